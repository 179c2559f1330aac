//! Errors of the dpfl library. Each variant carries the file, line, field or parameter it is
//! about, so the binary can print one clear line.

use std::path::PathBuf;
use thiserror::Error;

/// Why a dpfl library call failed; the binary maps config errors to exit code 2 and the rest to 1.
#[derive(Debug, Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Malformed content at a given place in a file.
    #[error("{path}:{line}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// What is wrong there.
        reason: String,
    },
    /// A data set failed a check (checksum, shape, label range).
    #[error("{what}: {reason}")]
    Data {
        /// The data set, file or silo.
        what: String,
        /// The check that failed.
        reason: String,
    },
    /// A configuration field is missing or invalid.
    #[error("config field `{field}`: {reason}")]
    Config {
        /// The field as the config spells it (`algorithm.step_size`, `privacy.delta`).
        field: String,
        /// Why the value is refused.
        reason: String,
    },
    /// Model and data disagree on shape.
    #[error("dimension mismatch: {0}")]
    Dimension(String),
    /// The privacy core refused (a parameter, a budget, an unsupported event) or failed
    /// numerically.
    #[error(transparent)]
    Privacy(#[from] dpfl_privacy::PrivacyError),
    /// A protocol violation between halves (wrong round, wrong size, unexpected payload).
    #[error("protocol: {0}")]
    Protocol(String),
    /// Training produced non-finite values (e.g. noise too large for the step size). A run's
    /// outcome rather than a fault: a reproduction records the run as diverged and goes on.
    #[error("diverged: {0}")]
    Diverged(String),
    /// A silo's ledger failed (not a refusal: e.g. it could not write its durable record).
    #[error("ledger: {0}")]
    Ledger(Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// [`Error::Config`] for `field` (as the config file spells it, e.g. `algorithm.step_size`).
    pub fn config(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Config {
            field: field.into(),
            reason: reason.into(),
        }
    }
    /// [`Error::Data`] for `what` (a data set, file or silo).
    pub fn data(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Data {
            what: what.into(),
            reason: reason.into(),
        }
    }
}

/// The dpfl library's result.
pub type Result<T> = std::result::Result<T, Error>;
