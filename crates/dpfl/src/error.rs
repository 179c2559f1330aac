//! Errors of the dpfl library. Each variant carries the file, line, field or parameter it is
//! about, so the binary can print one clear line.

use std::path::PathBuf;
use thiserror::Error;

/// Why a dpfl library call failed; the binary maps config errors ([`Error::is_config`]) to exit
/// code 2 and the rest to 1.
#[derive(Debug, Error)]
#[non_exhaustive]
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
    /// An algorithm's parameter is refused (its checked block, `crate::algo::checked`);
    /// shown under `algorithm.` like a config field until [`Error::Algorithm`] names the
    /// algorithm.
    #[error("config field `algorithm.{}`: {}", .0.field(), .0.reason())]
    // Not a `#[source]`: the message already holds the parameter's, and the binary's one-line
    // report would repeat it.
    Param(crate::algo::checked::ParamError),
    /// A configuration error of one algorithm of an experiment, naming its index and label:
    /// `algorithms[2] "CDP-SGD": compressor.k must be ≤ d = 124, got 200`.
    #[error("algorithms[{index}] \"{label}\": {}", inner_message(error))]
    Algorithm {
        /// The index in the experiment's `algorithms`.
        index: usize,
        /// The algorithm's label.
        label: String,
        /// The refusal (not a `#[source]`, for the same reason as [`Error::Param`]'s).
        error: Box<Error>,
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
    /// Whether the configuration is at fault (a field, an algorithm's parameter): the
    /// binary's exit code 2.
    pub fn is_config(&self) -> bool {
        match self {
            Error::Config { .. } | Error::Param(_) => true,
            Error::Algorithm { error, .. } => error.is_config(),
            _ => false,
        }
    }
    /// A configuration error of algorithm `index` (labelled `label`) of an experiment, named
    /// so ([`Error::Algorithm`]); other errors pass unchanged.
    pub fn in_algorithm(self, index: usize, label: &str) -> Self {
        match self {
            e @ (Error::Config { .. } | Error::Param(_)) => Error::Algorithm {
                index,
                label: label.to_string(),
                error: Box::new(e),
            },
            other => other,
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

/// An algorithm's refusal inside its `algorithms[i] "label": …` line: a parameter as its
/// field and reason, a config field as `field: reason`.
fn inner_message(e: &Error) -> String {
    match e {
        Error::Param(p) => p.to_string(),
        Error::Config { field, reason } => format!("{field}: {reason}"),
        other => other.to_string(),
    }
}

impl From<crate::algo::checked::ParamError> for Error {
    fn from(e: crate::algo::checked::ParamError) -> Self {
        Error::Param(e)
    }
}

/// The dpfl library's result.
pub type Result<T> = std::result::Result<T, Error>;
