//! Shared helpers of the data tests: where the bundled and the shared data sets are.

#![allow(dead_code)]

use std::path::PathBuf;

use dpfl::data::registry::DataDirs;

/// The repository's bundled `data/` directory only.
pub(crate) fn bundled() -> DataDirs {
    DataDirs::from_parts(None, None, Some(DataDirs::bundled_dir()))
}

/// The shared data sets: `DPFL_DATA` if set, else `../../../shared/datasets` relative to
/// this crate, if it exists. `None` (with a note on stderr) when neither is there, so that
/// tests of the large sets skip on machines without them.
pub(crate) fn shared() -> Option<DataDirs> {
    let dir = std::env::var_os("DPFL_DATA")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets")
        });
    if dir.is_dir() {
        Some(DataDirs::from_parts(Some(dir), None, None))
    } else {
        eprintln!(
            "note: shared data sets not found at {} (set DPFL_DATA); skipping",
            dir.display()
        );
        None
    }
}

/// A fresh temporary directory.
pub(crate) fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Writes `content` to `dir/name` and returns the path.
pub(crate) fn write(dir: &tempfile::TempDir, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, content).unwrap();
    p
}
