//! Algorithms as two halves that exchange typed messages: the **floor** every paper builds on,
//! and one **wing** per paper.
//!
//! # Floor plan
//!
//! ```text
//!   spec.rs      AlgorithmSpec: what a config file names → the wing that builds it
//!      │
//!   lowy/        Lowy & Razaviyayn (ICLR 2023): MB-SGD (Alg. 2/7), AC-SA (Alg. 1), Local SGD,
//!      │         per-silo calibration, the theorems' parameter rules
//!   soteria/     Li, Zhao, Li & Chi (NeurIPS 2022): CDP-SGD, SoteriaFL (GD/SGD/SVRG/SAGA),
//!      │         LDP-SGD, LDP-SVRG; shifted compression, calibration
//!      ▼
//!   floor        half.rs      SiloHalf / ServerHalf, HalfState, FederationInfo, SiloInfo
//!                message.rs   Broadcast, SiloMessage, Payload, Reply
//!                context.rs   BuildContext (public facts), BuiltAlgorithm, SiloCalibration
//!                server.rs    averaging, iterate outputs (server helpers every wing shares)
//!                gradient.rs  GradientSilo: a (weighted, clipped, noised) minibatch gradient
//!                             from a BatchSource (record sampler or one pass)
//! ```
//!
//! The floor imports no wing and a wing imports only the floor (and its own files); a wing
//! imports floor files by their own path (`crate::algo::half::…`), never through this module's
//! re-exports, so `spec.rs` can sit above every wing without an import circle
//! (`crates/dpfl/tests/import_graph.rs` checks both rules).
//!
//! Every federated algorithm is a [`SiloHalf`] (one per silo) and a [`ServerHalf`]:
//!
//! ```text
//!   ServerHalf::broadcast(r) ──Broadcast──►  SiloHalf::respond(&Broadcast, &Dataset, &mut DpRng)
//!   ServerHalf::aggregate(r, &[SiloMessage]) ◄──SiloMessage──┘
//! ```
//!
//! # The trust boundary, enforced by types
//!
//! * A server half is built by [`spec::AlgorithmSpec::build`] from [`FederationInfo`] only: public
//!   sizes and dimensions, never a [`Dataset`]. The factory that builds the silo halves
//!   likewise receives only a silo's public description; data reaches a silo half only as the
//!   `&Dataset` argument of [`SiloHalf::respond`], borrowed for that call.
//! * No method of [`ServerHalf`] takes a [`Dataset`], a [`DpRng`] of a silo, or a silo half;
//!   its only inputs are [`Broadcast`]s it made and [`SiloMessage`]s, which are plain vectors.
//! * [`Dataset`] is not `Clone`, and the runner (simulator or network silo) moves each
//!   silo's data into that silo's own state; there is no shared handle to copy.
//! * Privacy noise is added inside the silo half, before [`SiloHalf::respond`] returns, and
//!   the silo's ledger is charged before the message leaves (see [`crate::sim`]).
//!
//! ```compile_fail
//! // A server half cannot be handed a dataset: no method accepts one.
//! fn leak(server: &mut dyn dpfl::algo::ServerHalf, data: &dpfl::data::Dataset) {
//!     server.aggregate(0, data);
//! }
//! ```

pub mod context;
pub mod gradient;
pub mod half;
pub mod lowy;
pub mod message;
pub mod server;
pub mod soteria;
pub mod spec;

pub use context::{BuildContext, BuiltAlgorithm, SiloCalibration};
pub use half::{FederationInfo, HalfState, ServerHalf, SiloCounters, SiloHalf, SiloInfo};
pub use lowy::calibration::Calibration;
pub use message::{Broadcast, PackedInts, Payload, Reply, Round, SiloMessage};
pub use server::OutputRule;
pub use spec::AlgorithmSpec;
