//! Errors of the dpfl library. Each variant carries the file, line, field or parameter it is
//! about, so the binary can print one clear line.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Malformed content at a given place in a file.
    #[error("{path}:{line}: {reason}")]
    Parse {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    /// A data set failed a check (checksum, shape, label range).
    #[error("{what}: {reason}")]
    Data { what: String, reason: String },
    /// A configuration field is missing or invalid.
    #[error("config field `{field}`: {reason}")]
    Config { field: String, reason: String },
    /// Model and data disagree on shape.
    #[error("dimension mismatch: {0}")]
    Dimension(String),
    #[error(transparent)]
    Privacy(#[from] dpfl_privacy::PrivacyError),
    /// A protocol violation between halves (wrong round, wrong size, unexpected payload).
    #[error("protocol: {0}")]
    Protocol(String),
    /// A silo's ledger failed (not a refusal: e.g. it could not write its durable record).
    #[error("ledger: {0}")]
    Ledger(Box<dyn std::error::Error + Send + Sync>),
}

impl Error {
    pub fn config(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Config {
            field: field.into(),
            reason: reason.into(),
        }
    }
    pub fn data(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Data {
            what: what.into(),
            reason: reason.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
