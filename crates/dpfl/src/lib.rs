//! # dpfl
//!
//! Differentially private federated learning without a trusted server.
//!
//! * [`data`]: loaders (CSV, LIBSVM, IDX), preprocessing and partitioners into silos;
//! * [`compress`]: unbiased compressors of silo messages (random-k, quantisers) with exact
//!   bit counts;
//! * [`model`]: losses with per-example gradients, clipping and projection;
//! * [`algo`]: every algorithm as a [`algo::SiloHalf`] and a [`algo::ServerHalf`] exchanging
//!   typed messages; one module per paper;
//! * [`round`]: the round core both runners drive (participation, RNG streams, the silo step
//!   with its one refusal rule, collection, the shuffle stage);
//! * [`sim`]: the in-process simulator, a transport under the round core; [`run`]: how every
//!   simulated run starts (requirements, ledger policy) and steps (the refusal rule);
//! * [`units`]: checked newtypes for numbers that carry meaning (silo id, step size, clip).
//!
//! Experiments (TOML files, runs, outputs, reports), the papers' reproductions, the audit and
//! the plots live in the lab crate, `dpfl-lab`, which builds on this one.
//!
//! See `ARCHITECTURE.md` at the repository root for the invariants.

#![warn(missing_docs)]

pub mod algo;
pub mod compress;
pub mod data;
pub mod error;
pub mod linalg;
pub mod model;
pub mod plan;
pub mod round;
pub mod run;
pub mod sim;
#[cfg(feature = "test-hooks")]
pub mod testing;
pub mod units;

pub use error::{Error, Result};

#[cfg(test)]
mod mechanism_tests;
