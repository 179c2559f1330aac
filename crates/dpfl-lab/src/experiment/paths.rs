//! One rule for relative paths: a path inside a file (an experiment's CSV or LIBSVM source, a
//! reproduction's data) is relative to the directory of the file that names it, never to the
//! working directory, as in federation files. Absolute paths are kept.

use std::path::Path;

use super::ExperimentSpec;
use super::datasource::{DataSpec, Source};

impl DataSpec {
    /// Makes the source's relative path relative to `base` (the naming file's directory).
    pub fn resolve_paths(&mut self, base: &Path) {
        match &mut self.source {
            Source::Csv { path, .. } | Source::Libsvm { path, .. } if path.is_relative() => {
                *path = base.join(&*path);
            }
            Source::CsvSilos { paths, .. } => {
                for path in paths.iter_mut().filter(|p| p.is_relative()) {
                    *path = base.join(&*path);
                }
            }
            _ => {}
        }
    }
}

/// The directory relative paths in `file` are resolved against.
pub fn base_of(file: &Path) -> &Path {
    file.parent().unwrap_or(Path::new(""))
}

impl ExperimentSpec {
    /// Parses the experiment `text` read from `file`, with relative data paths resolved
    /// against `file`'s directory.
    pub fn from_toml_at(text: &str, file: &Path) -> dpfl::Result<Self> {
        let mut spec = Self::from_toml(text, &file.display().to_string())?;
        spec.data.resolve_paths(base_of(file));
        Ok(spec)
    }
}
