//! Private key files: written owner-only (mode 0600) and refused when others may read them,
//! as ssh refuses a private key "too open". Covers the CA key, every participant's TLS key
//! and the server's HPKE key; a key others could read is a key others may hold.

use std::io::Write;
use std::path::Path;

use crate::error::{NetError, Result};

/// Writes a private key durably (temporary file created 0600, fsync, rename). Refuses an
/// existing file unless `overwrite`.
pub fn write_private(path: &Path, bytes: &[u8], overwrite: bool) -> Result<()> {
    if !overwrite && path.exists() {
        return Err(NetError::file(
            path,
            "already exists (pass --force to overwrite)",
        ));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(NetError::io(dir))?;
    }
    let tmp = path.with_extension("key-tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&tmp).map_err(NetError::io(&tmp))?;
    f.write_all(bytes).map_err(NetError::io(&tmp))?;
    f.sync_all().map_err(NetError::io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(NetError::io(path))
}

/// Reads a private key, refusing one that the group or others may read or write.
pub fn read_private(path: &Path) -> Result<Vec<u8>> {
    check_private(path)?;
    std::fs::read(path).map_err(NetError::io(path))
}

/// Refuses a key file whose mode lets the group or others read or write it.
pub fn check_private(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(NetError::io(path))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(NetError::Refused(format!(
                "{}: private key is accessible by others (mode {:04o}); run `chmod 600 {}`",
                path.display(),
                mode & 0o7777,
                path.display()
            )));
        }
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn keys_are_written_0600_and_refused_when_group_readable() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("a.key");
        write_private(&p, b"secret", false).expect("write");
        let mode = std::fs::metadata(&p).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(read_private(&p).expect("read"), b"secret");
        assert!(
            write_private(&p, b"again", false).is_err(),
            "no silent overwrite"
        );
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let msg = read_private(&p).expect_err("too open").to_string();
        assert!(msg.contains("a.key") && msg.contains("0640"), "{msg}");
        assert!(msg.contains("chmod 600"), "{msg}");
    }
}
