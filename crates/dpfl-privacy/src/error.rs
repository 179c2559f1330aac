//! Errors of the privacy core. Every variant names the parameter it refuses.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum PrivacyError {
    /// A parameter is outside its domain (e.g. ε ≤ 0, δ ∉ (0,1), σ ≤ 0).
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        name: &'static str,
        value: f64,
        reason: String,
    },
    /// A closed-form calibration is used outside the range its theorem covers.
    #[error("{formula}: {reason}")]
    OutsideValidity {
        formula: &'static str,
        reason: String,
    },
    /// An accountant was given an event it cannot account for.
    #[error("accountant `{accountant}` does not support event {event}")]
    Unsupported {
        accountant: &'static str,
        event: String,
    },
    /// A numerical computation failed; we never return a possibly optimistic number instead.
    #[error("numerical failure in {context}: {reason}")]
    Numerical {
        context: &'static str,
        reason: String,
    },
    /// The operating system's random number generator could not be read.
    #[error("cannot seed from the operating system's generator: {0}")]
    OsRng(String),
    /// A release would cross a silo's privacy budget. Nothing was recorded.
    #[error(
        "budget exceeded: release {release} would bring epsilon to {requested} (spent so far {spent}) \
         at delta {delta}, over the budget epsilon {budget}"
    )]
    BudgetExceeded {
        release: u64,
        /// ε spent before this release, at the budget's δ.
        spent: f64,
        /// ε the composition including this release would spend, at the budget's δ.
        requested: f64,
        /// The budget's ε.
        budget: f64,
        /// The budget's δ.
        delta: f64,
    },
    /// A release past the number of releases the silo's noise was calibrated for (the
    /// calibration composes over exactly that many). Nothing was recorded.
    #[error("refusing release {release}: all {max} calibrated releases are spent")]
    ReleaseCapReached { release: u64, max: usize },
    /// A release id was charged before with a different event.
    #[error("release {release} was already charged with {recorded}, now asked with {requested}")]
    ReleaseConflict {
        release: u64,
        recorded: String,
        requested: String,
    },
    /// Ledger persistence failed.
    #[error("ledger file {path}: {reason}")]
    Ledger { path: String, reason: String },
}

impl PrivacyError {
    pub fn invalid(name: &'static str, value: f64, reason: impl Into<String>) -> Self {
        PrivacyError::InvalidParameter {
            name,
            value,
            reason: reason.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, PrivacyError>;
