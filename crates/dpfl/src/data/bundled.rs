//! The bundled demo data (obesity, insurance, a9a; licences in `data/LICENSES.md`), embedded
//! in the binary so that an installed or copied `dpfl` runs its demos from any directory.
//! They are the last place [`super::registry::DataDirs`] looks, after `--data-dir` and
//! `DPFL_DATA`, and are verified against the same SHA-256 sums as files on disk.
//!
//! An embedded file is named by a pseudo-path under [`PREFIX`] (e.g.
//! `<embedded>/obesity/obesity.csv`), which the loaders' file access ([`super::io`]) serves
//! from memory and error messages print as is.

use std::path::{Path, PathBuf};

/// The pseudo-directory of embedded files in paths and messages.
pub(crate) const PREFIX: &str = "<embedded>";

const FILES: [(&str, &[u8]); 4] = [
    (
        "obesity/obesity.csv",
        include_bytes!("../../../../data/obesity/obesity.csv"),
    ),
    (
        "insurance/insurance.csv",
        include_bytes!("../../../../data/insurance/insurance.csv"),
    ),
    (
        "libsvm/a9a.gz",
        include_bytes!("../../../../data/libsvm/a9a.gz"),
    ),
    (
        "libsvm/a9a.t.gz",
        include_bytes!("../../../../data/libsvm/a9a.t.gz"),
    ),
];

/// The pseudo-path of the embedded file `rel_path` (`/`-separated), if it is embedded.
pub(crate) fn path_of(rel_path: &str) -> Option<PathBuf> {
    FILES
        .iter()
        .any(|(p, _)| *p == rel_path)
        .then(|| Path::new(PREFIX).join(rel_path))
}

/// The bytes behind a pseudo-path of [`path_of`].
pub(crate) fn bytes(path: &Path) -> Option<&'static [u8]> {
    let rel = path.strip_prefix(PREFIX).ok()?;
    let rel: Vec<_> = rel.iter().map(|c| c.to_string_lossy()).collect();
    let rel = rel.join("/");
    FILES.iter().find(|(p, _)| *p == rel).map(|(_, b)| *b)
}
