//! The network runtime's error type, and the one place where errors become `tonic::Status`.

use std::path::PathBuf;

/// Errors of the network runtime. Each names the file, field or peer it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// A federation file field is missing or invalid.
    #[error("config {field}: {reason}")]
    Config {
        /// The field, as `section.key`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file was read but its content is invalid.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Another process holds a state directory's lock.
    #[error("{path}: {reason}")]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// Who holds it, as far as known.
        reason: String,
    },
    /// Damaged state, a bad key file or a federation that does not match this process's data:
    /// the process must not go on.
    #[error("{0}")]
    Refused(String),
    /// No connection within the connect timeout.
    #[error("{0}")]
    Timeout(String),
    /// TLS set-up or handshake failed.
    #[error("TLS: {0}")]
    Tls(String),
    /// A certificate could not be made, read or verified.
    #[error("certificate: {0}")]
    Cert(String),
    /// A peer sent something malformed, oversized, of the wrong dimension or for the wrong round.
    #[error("rejected: {0}")]
    Rejected(String),
    /// The caller's certificate does not allow the call.
    #[error("permission denied: {0}")]
    Denied(String),
    /// Sealing or opening a message for the shuffle mode failed.
    #[error("HPKE: {0}")]
    Hpke(String),
    /// A silo's privacy budget refuses the plan or the round.
    #[error("budget: {0}")]
    Budget(String),
    /// The connection failed.
    #[error("transport: {0}")]
    Transport(String),
    /// A peer answered a call with an error status.
    #[error("rpc: {0}")]
    Rpc(#[from] tonic::Status),
    /// An error of the algorithms and data layer.
    #[error(transparent)]
    Dpfl(#[from] dpfl::Error),
    /// An error of the privacy layer (ledger, accountant).
    #[error(transparent)]
    Privacy(#[from] dpfl_privacy::PrivacyError),
}

/// The network runtime's result type.
pub type Result<T> = std::result::Result<T, NetError>;

impl NetError {
    /// A [`NetError::Config`].
    pub fn config(field: impl Into<String>, reason: impl Into<String>) -> Self {
        NetError::Config {
            field: field.into(),
            reason: reason.into(),
        }
    }
    /// Maps an I/O error on `path` to [`NetError::Io`] (for `map_err`).
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> NetError {
        let path = path.into();
        move |source| NetError::Io { path, source }
    }
    /// A [`NetError::File`].
    pub fn file(path: impl Into<PathBuf>, reason: impl ToString) -> Self {
        NetError::File {
            path: path.into(),
            reason: reason.to_string(),
        }
    }
    /// Whether the error is a configuration or usage error (CLI exit code 2).
    pub fn is_config(&self) -> bool {
        match self {
            NetError::Config { .. } | NetError::Dpfl(dpfl::Error::Parse { .. }) => true,
            NetError::Dpfl(e) => e.is_config(),
            _ => false,
        }
    }
}

/// The single conversion of runtime errors into gRPC statuses.
impl From<NetError> for tonic::Status {
    fn from(e: NetError) -> Self {
        match e {
            NetError::Rejected(m) => tonic::Status::invalid_argument(m),
            NetError::Denied(m) => tonic::Status::permission_denied(m),
            NetError::Hpke(m) => tonic::Status::invalid_argument(format!("HPKE: {m}")),
            NetError::Rpc(s) => s,
            other => tonic::Status::internal(other.to_string()),
        }
    }
}
