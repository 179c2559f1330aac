//! The network runtime's error type, and the one place where errors become `tonic::Status`.

use std::path::PathBuf;

/// Errors of the network runtime. Each names the file, field or peer it concerns.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("config {field}: {reason}")]
    Config { field: String, reason: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },
    /// Another process holds a state directory's lock.
    #[error("{path}: {reason}")]
    Locked { path: PathBuf, reason: String },
    /// Damaged state, a bad key file or a federation that does not match this process's data:
    /// the process must not go on.
    #[error("{0}")]
    Refused(String),
    /// No connection within the connect timeout.
    #[error("{0}")]
    Timeout(String),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("certificate: {0}")]
    Cert(String),
    /// A peer sent something malformed, oversized, of the wrong dimension or for the wrong round.
    #[error("rejected: {0}")]
    Rejected(String),
    /// The caller's certificate does not allow the call.
    #[error("permission denied: {0}")]
    Denied(String),
    #[error("HPKE: {0}")]
    Hpke(String),
    #[error("budget: {0}")]
    Budget(String),
    #[error("transport: {0}")]
    Transport(String),
    #[error("rpc: {0}")]
    Rpc(#[from] tonic::Status),
    #[error(transparent)]
    Dpfl(#[from] dpfl::Error),
    #[error(transparent)]
    Privacy(#[from] dpfl_privacy::PrivacyError),
}

pub type Result<T> = std::result::Result<T, NetError>;

impl NetError {
    pub fn config(field: impl Into<String>, reason: impl Into<String>) -> Self {
        NetError::Config {
            field: field.into(),
            reason: reason.into(),
        }
    }
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> NetError {
        let path = path.into();
        move |source| NetError::Io { path, source }
    }
    pub fn file(path: impl Into<PathBuf>, reason: impl ToString) -> Self {
        NetError::File {
            path: path.into(),
            reason: reason.to_string(),
        }
    }
    /// Whether the error is a configuration or usage error (CLI exit code 2).
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            NetError::Config { .. }
                | NetError::Dpfl(dpfl::Error::Config { .. })
                | NetError::Dpfl(dpfl::Error::Parse { .. })
        )
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
