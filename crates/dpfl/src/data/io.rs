//! File access shared by the loaders: open a file, transparently un-gzip it, and turn I/O
//! failures into errors that name the path.
//!
//! Compression is detected from the gzip magic bytes (1f 8b), not from the file name, so a
//! renamed or decompressed copy loads the same way.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::{Error, Result};

/// The gzip magic number (RFC 1952 §2.3.1).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

pub(crate) fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A buffered reader over the file's (decompressed) content.
pub(crate) fn open(path: &Path) -> Result<Box<dyn BufRead>> {
    if let Some(bytes) = super::bundled::bytes(path) {
        return Ok(if bytes.starts_with(&GZIP_MAGIC) {
            Box::new(BufReader::new(MultiGzDecoder::new(bytes)))
        } else {
            Box::new(bytes)
        });
    }
    let file = File::open(path).map_err(|e| io_error(path, e))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let head = reader.fill_buf().map_err(|e| io_error(path, e))?;
    if head.starts_with(&GZIP_MAGIC) {
        Ok(Box::new(BufReader::with_capacity(
            1 << 16,
            MultiGzDecoder::new(reader),
        )))
    } else {
        Ok(Box::new(reader))
    }
}

/// The whole (decompressed) content of a file.
pub(crate) fn read_all(path: &Path) -> Result<Vec<u8>> {
    let raw = match super::bundled::bytes(path) {
        Some(b) => b.to_vec(),
        None => std::fs::read(path).map_err(|e| io_error(path, e))?,
    };
    if raw.starts_with(&GZIP_MAGIC) {
        // Typical compression ratio of the IDX files is 3–8×; start there to avoid regrowth.
        // The decompressed size is bounded before it is reached (a small gzip bomb must not
        // fill the memory): every byte becomes at most one dense value.
        let limit = super::limits::max_values();
        let mut out = Vec::with_capacity(raw.len().saturating_mul(6).min(limit));
        MultiGzDecoder::new(&raw[..])
            .take(limit as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| io_error(path, e))?;
        if out.len() > limit {
            return Err(Error::data(
                path.display().to_string(),
                format!(
                    "decompresses to more than {limit} bytes, the limit on one data set \
                     (raise it with {})",
                    super::limits::MAX_VALUES_ENV
                ),
            ));
        }
        Ok(out)
    } else {
        Ok(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Compression, write::GzEncoder};
    use std::io::Write;

    #[test]
    fn reads_plain_and_gzipped_content_alike() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("a.txt");
        let gz = dir.path().join("a.txt.gz");
        std::fs::write(&plain, b"hello\nworld\n").unwrap();
        let mut enc = GzEncoder::new(File::create(&gz).unwrap(), Compression::default());
        enc.write_all(b"hello\nworld\n").unwrap();
        enc.finish().unwrap();
        assert_eq!(read_all(&plain).unwrap(), b"hello\nworld\n");
        assert_eq!(read_all(&gz).unwrap(), b"hello\nworld\n");
        let mut s = String::new();
        open(&gz).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "hello\nworld\n");
        let err = read_all(&dir.path().join("missing"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing"), "{err}");
    }
}
