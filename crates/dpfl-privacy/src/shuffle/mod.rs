//! Shuffle-model summation and amplification (issue 15, items 1 and 4).
//!
//! * [`params`]: the parameter calculators of Cheu, Joseph, Mao & Peng (ICLR 2022; digest
//!   `shared/spec/shuffle-private-sco.md` §2.1–2.3, §5.1): P1D (Lemma 3.1) and PVEC
//!   (Theorem 3.2), with their preconditions checked and their variance bounds reported;
//! * [`protocol`]: the P1D/PVEC local randomizer and analyzer and the two transports with the
//!   same output distribution: *explicit* (every labelled one-bit message is its own message,
//!   shuffled by Fisher–Yates) and *compact* (per-label counts split into additive shares
//!   modulo 2⁶⁴, one for the shuffler and one for the server, so only the sum is revealed);
//! * [`amplification`]: privacy amplification by shuffling of ε₀-LDP reports (Feldman,
//!   McMillan & Talwar, FOCS 2021), the tighter of the closed form and the numerical bound;
//!   as a privacy event, `PrivacyEvent::ShuffledLocal`, which every accountant flattens to
//!   that (ε, δ) and composes (tests: `tests/it/shuffle_amplification.rs`, FMT's published
//!   values);
//! * [`local`]: a PVEC silo's guarantee without a trusted shuffler (Lemma A.1 per coordinate).
//! * [`randomizer`]: PVEC's randomizer as a silo's `Mechanism`, its event by the trust model.
//!
//! The optimizers built on PVEC live in `dpfl::algo::shuffle`.

pub mod amplification;
pub mod exact;
pub mod local;
pub mod params;
pub mod protocol;
pub mod pvec_exact;
pub mod randomizer;

use thiserror::Error;

use crate::error::PrivacyError;

/// Errors of the shuffle protocols. Each names the offending field.
#[derive(Debug, Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum ShuffleError {
    /// A privacy or protocol parameter is outside the range its theorem covers.
    #[error(transparent)]
    Parameter(#[from] PrivacyError),
    /// A quantity does not fit in u64 (g + s, the total message count, a count sum).
    #[error("{what} overflows u64: {detail}")]
    Overflow {
        /// The quantity that overflowed (e.g. "g", "explicit messages per user").
        what: &'static str,
        /// The values involved, and the way out when there is one (e.g. "use the compact
        /// transport").
        detail: String,
    },
    /// A message carries a coordinate label outside [0, d).
    #[error("message label {label} outside [0, {d})")]
    LabelOutOfRange {
        /// The offending coordinate label (as received, widened to u64).
        label: u64,
        /// The dimension d of the protocol instance: valid labels are 0..d.
        d: usize,
    },
    /// A vector (input, count vector, share vector) has the wrong length.
    #[error("{what} has length {got}, expected {expected}")]
    WrongLength {
        /// Which vector (e.g. "share vector", "partial share sum").
        what: &'static str,
        /// The length the protocol instance requires (d for per-label vectors).
        expected: usize,
        /// The length received.
        got: usize,
    },
    /// A count exceeds what the messages it stands for could hold (g + s per user).
    #[error("{what}: count {count} at label {label} exceeds the maximum {max}")]
    CountTooLarge {
        /// Which count (e.g. "P1D ones").
        what: &'static str,
        /// The coordinate label j the count belongs to (0 for P1D).
        label: usize,
        /// The count of ones received.
        count: u64,
        /// The largest possible count: n'·(g + s) for n' users, or g + s for one user.
        max: u64,
    },
    /// The messages or shares received are inconsistent (e.g. an unequal number of messages
    /// per label, or shares from a different number of users on the two sides).
    #[error("inconsistent input: {0}")]
    Inconsistent(String),
}

/// The result type of the shuffle protocols and calculators (error: [`ShuffleError`]).
pub type Result<T> = std::result::Result<T, ShuffleError>;
