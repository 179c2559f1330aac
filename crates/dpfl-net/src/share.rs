//! PVEC's compact transport through the network shuffler (issue 15 item 1; Cheu, Joseph, Mao &
//! Peng 2022 §5.1 as implemented in `dpfl::algo::shuffle`'s PVEC halves).
//!
//! A silo's compact reply is two additive shares modulo 2⁶⁴ of its per-label counts:
//! label [`TO_SHUFFLER`] and [`TO_SERVER`]. Each alone is uniformly distributed, so:
//! * the server share is sealed to the server (HPKE) and permuted like every sealed message;
//! * the shuffler share goes to the shuffler *unsealed* (over the silo's TLS connection),
//!   framed as `DPSH`, a u32 count (1 from a silo) and the encoded message. The shuffler checks
//!   it, adds it to its sum and forwards **only the sum** (one `DPSH` body whose count is the
//!   number of shares in it): forwarding the shares one by one would let the server pair each
//!   with its server share (a pair sums to small counts, a wrong pair to noise) and read every
//!   silo's counts.
//!
//! The server hands the analyzer the sum plus count − 1 zero shares: the analyzer checks that
//! both sides summed the same number of users, and zeros change no sum. The sum is exact, so
//! the analyzer's counts, and with them the estimate, are the simulator's bit for bit.
//!
//! A sealed body that happens to begin with `DPSH` (probability 2⁻³² per message, the
//! encapsulated key being random) is sealed again, so the prefix alone tells the two apart —
//! also in a silo's stored bodies, resent after a restart.

use dpfl::algo::shuffle::{TO_SERVER, TO_SHUFFLER};
use dpfl::algo::{PackedInts, Payload, Round, SiloMessage};
use dpfl_privacy::shuffle::protocol::ShareSum;

use crate::codec;
use crate::error::{NetError, Result};

/// The prefix of a shuffler-share body.
pub const SHARE_MAGIC: &[u8; 4] = b"DPSH";

/// Whether `m` is a compact PVEC share addressed to the shuffler.
pub fn is_shuffler_share(m: &SiloMessage) -> bool {
    matches!(&m.payload, Payload::Labelled { label, payload }
        if *label == TO_SHUFFLER && matches!(payload.as_ref(), Payload::Packed(p) if p.bits() == 64))
}

/// Whether `body` is a shuffler-share body (else a sealed message).
pub fn is_share_body(body: &[u8]) -> bool {
    body.starts_with(SHARE_MAGIC)
}

/// The body of a share (or a sum of `count` shares).
pub fn encode(count: u32, m: &SiloMessage) -> Vec<u8> {
    let msg = codec::encode_message(m);
    let mut out = Vec::with_capacity(8 + msg.len());
    out.extend_from_slice(SHARE_MAGIC);
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&msg);
    out
}

/// Decodes a share body of round `round` and dimension `dim`: (count, share values). Anything
/// but a labelled [`TO_SHUFFLER`] vector of `dim` 64-bit integers is refused.
pub fn decode(body: &[u8], round: u32, dim: usize) -> Result<(u32, Vec<u64>)> {
    let rest = body
        .strip_prefix(SHARE_MAGIC)
        .ok_or_else(|| NetError::Rejected("not a DPSH share body".into()))?;
    let (count, msg) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| NetError::Rejected("share body cut before its count".into()))?;
    let count = u32::from_le_bytes(*count);
    if count == 0 {
        return Err(NetError::Rejected("share body of count 0".into()));
    }
    let m = codec::decode_message(msg, Round::new(round), dim)?;
    match m.payload {
        Payload::Labelled { label, payload } if label == TO_SHUFFLER => match *payload {
            Payload::Packed(p) if p.bits() == 64 && p.len() == dim => Ok((count, p.unpack())),
            _ => Err(NetError::Rejected(format!(
                "shuffler share is not {dim} packed 64-bit integers"
            ))),
        },
        Payload::Labelled { label, .. } if label == TO_SERVER => Err(NetError::Rejected(
            "the server's share sent to the shuffler in the clear".into(),
        )),
        _ => Err(NetError::Rejected(
            "share body holds no labelled shuffler share".into(),
        )),
    }
}

/// Seals `plain` to the server (`pk`) for `round`, never producing a body that reads as a share.
pub fn seal(pk: &[u8], round: u32, plain: &[u8]) -> Result<Vec<u8>> {
    loop {
        let sealed = crate::seal::seal(pk, round, plain)?;
        if !is_share_body(&sealed) {
            return Ok(sealed);
        }
    }
}

/// The shuffler's running sum of one round's shares.
pub struct Accumulator {
    sum: ShareSum,
    count: u32,
}

impl Accumulator {
    /// An empty sum of `dim`-dimensional shares.
    pub fn new(dim: usize) -> Self {
        Accumulator {
            sum: ShareSum::new(dim),
            count: 0,
        }
    }

    /// Adds a checked share body (a silo's, count 1).
    pub fn add(&mut self, body: &[u8], round: u32) -> Result<()> {
        let dim = self.sum.sum().len();
        let (count, share) = decode(body, round, dim)?;
        if count != 1 {
            return Err(NetError::Rejected(format!(
                "a silo's share body counts {count} shares"
            )));
        }
        self.sum
            .add(&share)
            .map_err(|e| NetError::Rejected(e.to_string()))?;
        self.count += 1;
        Ok(())
    }

    /// The body forwarding the sum to the server; `None` if no share was added.
    pub fn finish(self, round: u32) -> Result<Option<Vec<u8>>> {
        if self.count == 0 {
            return Ok(None);
        }
        Ok(Some(encode(
            self.count,
            &share_message(round, self.sum.sum())?,
        )))
    }
}

fn share_message(round: u32, values: &[u64]) -> Result<SiloMessage> {
    Ok(SiloMessage {
        round: Round::new(round),
        payload: Payload::Labelled {
            label: TO_SHUFFLER,
            payload: Box::new(Payload::Packed(PackedInts::pack(64, values)?)),
        },
    })
}

/// The server's side: the analyzer's messages for a forwarded sum of `count` shares (at most
/// `silos`): the sum, then count − 1 zero shares.
pub fn expand(body: &[u8], round: u32, dim: usize, silos: usize) -> Result<Vec<SiloMessage>> {
    let (count, sum) = decode(body, round, dim)?;
    if count as usize > silos {
        return Err(NetError::Rejected(format!(
            "a share sum of {count} shares from a federation of {silos} silos"
        )));
    }
    let mut out = vec![share_message(round, &sum)?];
    if count > 1 {
        let zero = share_message(round, &vec![0; dim])?;
        out.extend(std::iter::repeat_n(zero, count as usize - 1));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_sum_in_the_shuffler_and_expand_at_the_server() {
        let round = 3;
        let a = share_message(round, &[u64::MAX, 5, 0]).unwrap();
        let b = share_message(round, &[2, u64::MAX - 4, 7]).unwrap();
        assert!(is_shuffler_share(&a));
        let mut acc = Accumulator::new(3);
        acc.add(&encode(1, &a), round).unwrap();
        acc.add(&encode(1, &b), round).unwrap();
        let body = acc.finish(round).unwrap().unwrap();
        assert!(is_share_body(&body));
        let (count, sum) = decode(&body, round, 3).unwrap();
        assert_eq!((count, sum), (2, vec![1, 0, 7]));
        let msgs = expand(&body, round, 3, 2).unwrap();
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[1], share_message(round, &[0, 0, 0]).unwrap());
        // More shares than silos, another round, another dimension, a server share, a
        // silo body claiming two shares: refused.
        assert!(expand(&body, round, 3, 1).is_err());
        assert!(decode(&body, round + 1, 3).is_err());
        assert!(decode(&body, round, 4).is_err());
        let server_share = SiloMessage {
            round: Round::new(round),
            payload: Payload::Labelled {
                label: TO_SERVER,
                payload: Box::new(Payload::Packed(PackedInts::pack(64, &[1, 2, 3]).unwrap())),
            },
        };
        assert!(!is_shuffler_share(&server_share));
        let e = decode(&encode(1, &server_share), round, 3).unwrap_err();
        assert!(e.to_string().contains("in the clear"), "{e}");
        assert!(Accumulator::new(3).add(&body, round).is_err());
        assert!(Accumulator::new(3).finish(round).unwrap().is_none());
        assert!(decode(b"DPSH\x00\x00", round, 3).is_err());
    }
}
