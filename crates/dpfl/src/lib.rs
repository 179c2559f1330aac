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
//! * [`sim`]: the in-process simulator, a transport under the round core;
//! * [`experiment`]: TOML experiment specs, runs and their outputs;
//! * [`units`]: checked newtypes for numbers that carry meaning (silo id, step size, clip).
//!
//! See `ARCHITECTURE.md` at the repository root for the invariants.

#![warn(missing_docs)]

pub mod algo;
pub mod audit;
pub mod compress;
pub mod data;
pub mod error;
pub mod experiment;
pub mod linalg;
pub mod model;
pub mod output;
pub mod plan;
pub mod plot;
pub mod provenance;
pub mod reproduce;
pub mod round;
pub mod sim;
pub mod units;

pub use error::{Error, Result};
