//! Errors of the privacy core. Every variant names the parameter it refuses.

use thiserror::Error;

/// Why the privacy core refused or failed: the ledger, accountants, calibrations and
/// mechanisms return it, and never a number that might under-report the privacy loss.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum PrivacyError {
    /// A parameter is outside its domain (e.g. ε ≤ 0, δ ∉ (0,1), σ ≤ 0).
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// The parameter's name as the caller knows it (`epsilon`, `noise_multiplier`, …).
        name: &'static str,
        /// The refused value.
        value: f64,
        /// The domain it is outside of.
        reason: String,
    },
    /// A closed-form calibration is used outside the range its theorem covers.
    #[error("{formula}: {reason}")]
    OutsideValidity {
        /// The calibration rule with its theorem (e.g. `Lowy–Razaviyayn Thm 2.1`).
        formula: &'static str,
        /// Which condition of the theorem fails.
        reason: String,
    },
    /// An accountant was given an event it cannot account for.
    #[error("accountant `{accountant}` does not support event {event}")]
    Unsupported {
        /// The accountant's name ([`crate::accountant::AccountantKind::name`]).
        accountant: &'static str,
        /// The refused event, debug-printed.
        event: String,
    },
    /// A numerical computation failed; we never return a possibly optimistic number instead.
    #[error("numerical failure in {context}: {reason}")]
    Numerical {
        /// The computation that failed (e.g. `RDP to (ε, δ) conversion`).
        context: &'static str,
        /// What went wrong: NaN, ∞, no root in the bracket, …
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
        /// The refused release's id (the round, for a silo's ledger).
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
    ReleaseCapReached {
        /// The refused release's id.
        release: u64,
        /// The calibrated number of releases, all spent.
        max: usize,
    },
    /// A release id was charged before with a different event.
    #[error("release {release} was already charged with {recorded}, now asked with {requested}")]
    ReleaseConflict {
        /// The release id charged twice.
        release: u64,
        /// The event recorded for it, debug-printed.
        recorded: String,
        /// The different event asked for now, debug-printed.
        requested: String,
    },
    /// Ledger persistence failed.
    #[error("ledger file {path}: {reason}")]
    Ledger {
        /// The ledger's file.
        path: String,
        /// The I/O or decoding failure, or the damage found.
        reason: String,
    },
}

impl PrivacyError {
    /// [`PrivacyError::InvalidParameter`] for `name` = `value`, outside its domain `reason`.
    pub fn invalid(name: &'static str, value: f64, reason: impl Into<String>) -> Self {
        PrivacyError::InvalidParameter {
            name,
            value,
            reason: reason.into(),
        }
    }
}

/// The privacy core's result.
pub type Result<T> = std::result::Result<T, PrivacyError>;
