//! dpfl's network runtime: the simulator's halves as separate processes over gRPC.
//!
//! A **server** process holds the [`dpfl::algo::ServerHalf`]; each **silo** process holds its
//! data, its [`dpfl::algo::SiloHalf`], its generator and its privacy ledger; an optional
//! **shuffler** anonymises messages. Every connection is TLS 1.3 with mutual authentication
//! (`tls`), identities are certificate common names (`certs`), the protocol is
//! `proto/dpfl.proto` (compiled by protox at build time: no system `protoc`).
//!
//! Why it equals the simulator: both runners build the halves with
//! [`dpfl::algo::AlgorithmSpec::build`] from the same public [`dpfl::algo::BuildContext`]
//! ([`config::Federation::context`]), draw participation from
//! [`dpfl::round::participation_rng`] and silo noise from [`dpfl::round::silo_rng`], and aggregate
//! in silo order (non-shuffle mode), so a seeded federation's final model is bit-for-bit the
//! simulator's.
//!
//! Only this crate knows prost and tonic types; errors become `tonic::Status` in one place
//! ([`error`]).

#![warn(missing_docs)]

pub mod budget;
pub mod certs;
pub mod checkpoint;
pub mod codec;
pub mod config;
pub mod error;
pub mod keys;
pub mod ledger;
pub mod lock;
pub mod metrics;
pub mod models;
pub mod retry;
pub mod seal;
pub mod server;
pub mod shard;
pub mod share;
pub mod shuffler;
pub mod silo;
pub mod store;
pub mod tls;

/// The generated protocol types and services (package `dpfl.v1`).
#[allow(clippy::all, missing_docs, unused_qualifications, unreachable_pub)]
pub mod proto {
    tonic::include_proto!("dpfl.v1");
}

pub use config::Federation;
pub use error::{NetError, Result};
