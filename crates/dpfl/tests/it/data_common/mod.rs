//! Shared helpers of the data tests: where the bundled and the shared data sets are.

#![allow(dead_code)]

use std::path::PathBuf;

use dpfl::data::registry::DataDirs;

/// The repository's bundled `data/` directory only.
pub(crate) fn bundled() -> DataDirs {
    DataDirs::from_parts(None, None, Some(DataDirs::bundled_dir()))
}

/// The shared data sets ([`dpfl_testkit::shared_datasets`]); `None` skips.
pub(crate) fn shared() -> Option<DataDirs> {
    dpfl_testkit::shared_datasets().map(|dir| DataDirs::from_parts(Some(dir), None, None))
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
