//! Sealing messages to the server for the shuffler (HPKE, RFC 9180: DHKEM(X25519,
//! HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305, base mode).
//!
//! A sealed message is `encapsulated key (32 bytes) || ciphertext`. The round is bound as
//! associated data, so the shuffler (which holds no key) can neither read a message nor move
//! it to another round, and any flipped byte makes [`open`] fail.

use hpke::aead::ChaCha20Poly1305;
use hpke::kdf::HkdfSha256;
use hpke::kem::X25519HkdfSha256;
use hpke::{Deserializable, Kem as _, OpModeR, OpModeS, Serializable};

use crate::error::{NetError, Result};

type Kem = X25519HkdfSha256;
const INFO: &[u8] = b"dpfl/v1 silo message";
const ENC_LEN: usize = 32;

fn aad(round: u32) -> Vec<u8> {
    let mut a = b"dpfl/v1 round ".to_vec();
    a.extend_from_slice(&round.to_le_bytes());
    a
}

fn os_rng() -> rand_core_09::UnwrapErr<rand_core_09::OsRng> {
    rand_core_09::UnwrapErr(rand_core_09::OsRng)
}

/// The server's HPKE key pair (private, public), as bytes.
pub fn generate_keypair() -> (Vec<u8>, Vec<u8>) {
    let (sk, pk) = Kem::gen_keypair(&mut os_rng());
    (sk.to_bytes().to_vec(), pk.to_bytes().to_vec())
}

/// Seals `plaintext` for round `round` to the public key `pk`.
pub fn seal(pk: &[u8], round: u32, plaintext: &[u8]) -> Result<Vec<u8>> {
    let pk = <Kem as hpke::Kem>::PublicKey::from_bytes(pk)
        .map_err(|e| NetError::Hpke(format!("bad server public key: {e}")))?;
    let (enc, ct) = hpke::single_shot_seal::<ChaCha20Poly1305, HkdfSha256, Kem, _>(
        &OpModeS::Base,
        &pk,
        INFO,
        plaintext,
        &aad(round),
        &mut os_rng(),
    )
    .map_err(|e| NetError::Hpke(e.to_string()))?;
    let mut out = enc.to_bytes().to_vec();
    out.extend_from_slice(&ct);
    Ok(out)
}

/// Opens a sealed message of round `round` with the private key `sk`.
pub fn open(sk: &[u8], round: u32, sealed: &[u8]) -> Result<Vec<u8>> {
    if sealed.len() < ENC_LEN + 16 {
        return Err(NetError::Hpke(format!(
            "sealed message of {} bytes is too short",
            sealed.len()
        )));
    }
    let sk = <Kem as hpke::Kem>::PrivateKey::from_bytes(sk)
        .map_err(|e| NetError::Hpke(format!("bad private key: {e}")))?;
    let (enc, ct) = sealed.split_at(ENC_LEN);
    let enc = <Kem as hpke::Kem>::EncappedKey::from_bytes(enc)
        .map_err(|e| NetError::Hpke(format!("bad encapsulated key: {e}")))?;
    hpke::single_shot_open::<ChaCha20Poly1305, HkdfSha256, Kem>(
        &OpModeR::Base,
        &sk,
        &enc,
        INFO,
        ct,
        &aad(round),
    )
    .map_err(|e| NetError::Hpke(format!("cannot open sealed message: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_messages_open_and_tampering_is_detected() {
        let (sk, pk) = generate_keypair();
        let msg = b"a silo message".to_vec();
        let sealed = seal(&pk, 4, &msg).expect("seal");
        assert_eq!(open(&sk, 4, &sealed).expect("open"), msg);
        assert!(open(&sk, 5, &sealed).is_err(), "bound to its round");
        for i in [0, 31, 32, sealed.len() - 1] {
            let mut bad = sealed.clone();
            bad[i] ^= 1;
            assert!(open(&sk, 4, &bad).is_err(), "byte {i}");
        }
        let (other_sk, _) = generate_keypair();
        assert!(open(&other_sk, 4, &sealed).is_err());
        assert!(open(&sk, 4, &sealed[..40]).is_err());
    }
}
