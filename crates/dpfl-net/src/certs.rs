//! A development certificate authority (`dpfl certs init|issue`), made with rcgen.
//!
//! One federation CA signs every participant's certificate. A participant's identity is its
//! certificate's common name: `server`, `shuffler` or `silo-<id>`; the server and the shuffler
//! read it from the verified peer certificate, never from a message field. Every certificate
//! allows both server and client authentication (the server and the shuffler are both).
//! For production, use your organisation's CA: any CA whose certificates carry these common
//! names works.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::error::{NetError, Result};

fn cert_err(e: rcgen::Error) -> NetError {
    NetError::Cert(e.to_string())
}

fn write_new(path: &Path, contents: &str, force: bool) -> Result<()> {
    if path.exists() && !force {
        return Err(NetError::file(
            path,
            "already exists (pass --force to overwrite)",
        ));
    }
    std::fs::write(path, contents).map_err(NetError::io(path))
}

/// Creates `dir/ca.pem` and `dir/ca.key`.
pub fn init_ca(dir: &Path, force: bool) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(NetError::io(dir))?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(cert_err)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "dpfl federation CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let key = KeyPair::generate().map_err(cert_err)?;
    let cert = params.self_signed(&key).map_err(cert_err)?;
    write_new(&dir.join("ca.pem"), &cert.pem(), force)?;
    crate::keys::write_private(&dir.join("ca.key"), key.serialize_pem().as_bytes(), force)?;
    Ok(())
}

/// Checks a participant name: `server`, `shuffler` or `silo-<id>`.
pub fn check_name(name: &str) -> Result<()> {
    let ok = name == "server"
        || name == "shuffler"
        || name
            .strip_prefix("silo-")
            .is_some_and(|id| id.parse::<u32>().is_ok());
    if ok {
        Ok(())
    } else {
        Err(NetError::config(
            "name",
            format!("{name:?} is not server, shuffler or silo-<id>"),
        ))
    }
}

/// Issues `dir/<name>.pem` and `dir/<name>.key`, signed by the CA in `ca_dir`, with the given
/// subject alternative names (host names or IP addresses the holder is reached at) in addition
/// to `localhost` and `127.0.0.1`.
pub fn issue(ca_dir: &Path, dir: &Path, name: &str, sans: &[String], force: bool) -> Result<()> {
    check_name(name)?;
    let ca_pem_path = ca_dir.join("ca.pem");
    let ca_key_path = ca_dir.join("ca.key");
    let ca_pem = std::fs::read_to_string(&ca_pem_path).map_err(NetError::io(&ca_pem_path))?;
    let ca_key_pem = String::from_utf8(crate::keys::read_private(&ca_key_path)?)
        .map_err(|e| NetError::file(&ca_key_path, e))?;
    let ca_key = KeyPair::from_pem(&ca_key_pem).map_err(|e| NetError::file(&ca_key_path, e))?;
    check_key_matches(&ca_pem_path, &ca_pem, &ca_key_path, &ca_key)?;
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key)
        .map_err(|e| NetError::file(ca_dir.join("ca.pem"), e))?;
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        name.to_string(),
    ];
    names.extend(sans.iter().cloned());
    names.dedup();
    let mut params = CertificateParams::new(names).map_err(cert_err)?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::NoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().map_err(cert_err)?;
    let cert = params.signed_by(&key, &issuer).map_err(cert_err)?;
    std::fs::create_dir_all(dir).map_err(NetError::io(dir))?;
    write_new(&dir.join(format!("{name}.pem")), &cert.pem(), force)?;
    crate::keys::write_private(
        &dir.join(format!("{name}.key")),
        key.serialize_pem().as_bytes(),
        force,
    )?;
    Ok(())
}

/// Refuses a CA key that is not the key of the CA certificate: certificates signed with it
/// would chain to no one's CA (a `ca.pem` and `ca.key` from two different `certs init`).
fn check_key_matches(pem_path: &Path, pem: &str, key_path: &Path, key: &KeyPair) -> Result<()> {
    use rcgen::PublicKeyData;
    let der = rustls_pemfile::certs(&mut pem.as_bytes())
        .next()
        .ok_or_else(|| NetError::file(pem_path, "holds no PEM certificate"))?
        .map_err(|e| NetError::file(pem_path, e))?;
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
        .map_err(|e| NetError::file(pem_path, e))?;
    if cert.public_key().subject_public_key.data.as_ref() != key.der_bytes() {
        return Err(NetError::Refused(format!(
            "{} is not the private key of the CA certificate {}: they come from different \
             CAs; use the ca.key written together with this ca.pem",
            key_path.display(),
            pem_path.display()
        )));
    }
    Ok(())
}

/// The common name of a DER certificate (the participant's identity).
pub fn common_name(der: &[u8]) -> Result<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| NetError::Denied(format!("unparsable peer certificate: {e}")))?;
    cert.subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::to_string)
        .ok_or_else(|| NetError::Denied("peer certificate has no common name".into()))
}

/// A fresh development PKI in `dir`: a CA, `server`, `shuffler` and `silo-0..silos`.
pub fn dev_pki(dir: &Path, silos: usize) -> Result<()> {
    init_ca(dir, true)?;
    issue(dir, dir, "server", &[], true)?;
    issue(dir, dir, "shuffler", &[], true)?;
    for i in 0..silos {
        issue(dir, dir, &format!("silo-{i}"), &[], true)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_certificates_carry_the_participant_name() {
        let dir = tempfile::tempdir().expect("tmp");
        init_ca(dir.path(), false).expect("ca");
        assert!(init_ca(dir.path(), false).is_err(), "no silent overwrite");
        issue(
            dir.path(),
            dir.path(),
            "silo-3",
            &["10.0.0.5".into()],
            false,
        )
        .expect("issue");
        assert!(issue(dir.path(), dir.path(), "mallory", &[], false).is_err());
        let pem = std::fs::read(dir.path().join("silo-3.pem")).expect("pem");
        let der = rustls_pemfile::certs(&mut pem.as_slice())
            .next()
            .expect("one cert")
            .expect("parse");
        assert_eq!(common_name(der.as_ref()).expect("cn"), "silo-3");
    }

    #[test]
    fn issuing_with_the_key_of_another_ca_is_refused() {
        let a = tempfile::tempdir().expect("tmp");
        let b = tempfile::tempdir().expect("tmp");
        init_ca(a.path(), false).expect("ca a");
        init_ca(b.path(), false).expect("ca b");
        std::fs::copy(b.path().join("ca.key"), a.path().join("ca.key")).expect("mix");
        let msg = issue(a.path(), a.path(), "server", &[], false)
            .expect_err("mismatched pair")
            .to_string();
        assert!(msg.contains("ca.key") && msg.contains("different"), "{msg}");
        assert!(!a.path().join("server.pem").exists());
    }
}
