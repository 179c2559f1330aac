//! Durable files: write to a temporary file, fsync, rename. A crash leaves either the old or
//! the new contents, never a torn file.

use std::io::Write;
use std::path::Path;

use crate::error::{NetError, Result};

pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(NetError::io(dir))?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).map_err(NetError::io(&tmp))?;
    f.write_all(bytes).map_err(NetError::io(&tmp))?;
    f.sync_all().map_err(NetError::io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(NetError::io(path))
}

pub fn read_opt(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(NetError::Io {
            path: path.into(),
            source: e,
        }),
    }
}
