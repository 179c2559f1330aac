//! # dpfl-privacy
//!
//! The privacy core of dpfl, usable without any machine-learning code:
//!
//! * [`rng`]: the ChaCha20 generator every random draw comes from (OS-seeded, or seeded
//!   explicitly for reproducible simulation);
//! * [`sampler`]: record and silo samplers (with / without replacement, disjoint batches,
//!   participation subsets, permutations);
//! * [`mechanism`]: noise mechanisms; each validates its parameters once and reports the
//!   [`event::PrivacyEvent`] it spends; [`discrete`]: exact integer samplers (discrete
//!   Laplace and Gaussian, Canonne–Kamath–Steinke 2020) the discrete mechanisms draw from;
//!   [`binomial`]: a table Binomial(n, p) sampler for n up to ~10¹¹ (shuffle protocols, cpSGD);
//! * [`calibration`]: the closed-form noise rules of the papers, each citing its theorem;
//! * [`qtdl`]: DP-NormFedAvg's quantizer, truncated discrete Laplace noise (exact sampler),
//!   Theorem 1 calculator, Binomial baseline calculator and accounting;
//! * [`event`], [`accountant`], [`ledger`]: composable privacy events, accountants that turn
//!   them into (ε, δ), and the per-silo ledger that refuses releases past a budget;
//! * [`release`]: a release given by its parameters (mechanism, sampling, steps), checked
//!   once for `dpfl account` / `dpfl calibrate` and the Python package.
//!
//! Invariant: this crate depends on no ML, async or network crate.

#![warn(missing_docs)]

pub mod accountant;
pub mod binomial;
pub mod calibration;
pub mod discrete;
pub mod error;
pub mod event;
pub mod ledger;
pub mod mechanism;
pub mod params;
pub mod qtdl;
pub mod release;
pub mod rng;
pub mod sampler;
pub mod shuffle;

pub use error::PrivacyError;
pub use event::{Neighbouring, PrivacyEvent};
pub use mechanism::{GaussianMechanism, GaussianNoise, Mechanism, VectorMechanism};
pub use params::{Delta, Epsilon};
pub use rng::DpRng;
