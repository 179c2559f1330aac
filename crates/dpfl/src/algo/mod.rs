//! Algorithms as two halves that exchange typed messages: the **floor** every paper builds on,
//! and one **wing** per paper.
//!
//! # Floor plan
//!
//! ```text
//!   crate::plan  Plan = Setup (public facts) + AlgorithmSpec + WingPlan, computed once per
//!      │         run; server_half(&plan) / silo_half(&plan, i) build one half each
//!   spec.rs      AlgorithmSpec: the serde enum of what a config file names; one exhaustive
//!      │         match hands each question to the variant's Wing (no fallback arm);
//!      │         WingPlan: each wing's checked, calibrated parameters (serialisable)
//!   registry.rs  wings defined outside dpfl: AlgorithmSpec::Custom / WingPlan::Custom, the
//!      │         object-safe face of Wing and the table of registered kinds
//!   lowy/        Lowy & Razaviyayn (ICLR 2023): MB-SGD (Alg. 2/7), AC-SA (Alg. 1), Local SGD,
//!      │         per-silo calibration, the theorems' parameter rules
//!   normfedavg/  Das et al.: DP-NormFedAvg (Alg. 2), NormFedAvg, FedAvg (Alg. 3), clipping
//!      │         and Binomial baselines; t-bit QTDL messages summed as integers
//!   soteria/     Li, Zhao, Li & Chi (NeurIPS 2022): CDP-SGD, SoteriaFL (GD/SGD/SVRG/SAGA),
//!      │         LDP-SGD, LDP-SVRG; shifted compression, calibration
//!      ▼
//!   floor        half.rs      SiloHalf / ServerHalf, HalfState, FederationInfo, SiloInfo
//!                message.rs   Broadcast, SiloMessage, Payload, Reply
//!                context.rs   BuildContext (public facts), BuiltAlgorithm, SiloCalibration
//!                server.rs    averaging, iterate outputs, MbSgdServer (what wings share)
//!                acsa_server.rs  AC-SA's server half and schedules (Lowy Alg. 1, shuffle Alg. 6)
//!                wing.rs      the Wing trait each config implements: label, Privacy (no
//!                             default), noise-multiplier rule, grid knobs, audit view,
//!                             Requirements of the runner, plan()
//!                checked.rs   ParamGuard, ParamError and the shared parameter blocks (step,
//!                             batch, smoothing, weights), each checked once before plan()
//!                gradient.rs  GradientSilo: a (weighted, clipped, noised) minibatch gradient
//!                             from a BatchSource (record sampler or one pass)
//! ```
//!
//! The floor imports no wing and a wing imports only the floor (and its own files); a wing
//! imports floor files by their own path (`crate::algo::half::…`), never through this module's
//! re-exports, so `spec.rs` can sit above every wing without an import circle
//! (`crates/dpfl/tests/it/import_graph.rs` checks both rules).
//!
//! # Planning, then building one half
//!
//! A wing splits building into **planning** (check the parameters, calibrate every silo's
//! K_i and σ_i once, resolve the theorems' rules: a serialisable plan struct, e.g.
//! `lowy::mbsgd::MbSgdPlan`, plus one [`SiloCalibration`] row per silo) and **building** a half
//! from the plan (`server_half(ctx)`, `silo_half(ctx, i)`), which calibrates nothing. Its plan
//! struct becomes a variant of [`spec::WingPlan`]. A calibration calls
//! [`context::count_calibration`], so tests can check that each process builds only its
//! own half (`crate::plan`).
//!
//! # Half state (checkpoints and restarts)
//!
//! A half that must resume after a restart stores typed values in a [`HalfState`]:
//! `state.put("shifts", &my_struct)` for any serde type, and on restore
//! `state.get::<MyStruct>("shifts")?` (or `state.vector("w", d)?` for a length-checked
//! model vector). Entries are postcard bytes, so f64s round-trip bit for bit and a d = 10⁶
//! vector is 8 MB; a missing or undecodable entry is an error naming the key. Prefer one
//! entry holding a struct of the half's state (SAGA tables, shifts, counters) over many
//! loose keys; shared helpers such as `server::IterateOutput` write their own keys.
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
//! ```compile_fail,E0308
//! use dpfl::algo::{Round, ServerHalf};
//! // A server half cannot be handed a dataset: no method accepts one (a type mismatch).
//! fn leak(server: &mut dyn ServerHalf, data: &dpfl::data::Dataset) {
//!     let _ = server.aggregate(Round::FIRST, data);
//! }
//! ```
//!
//! The same call with the messages it does take compiles, so the example above fails for the
//! dataset and nothing else:
//!
//! ```no_run
//! use dpfl::algo::{Round, ServerHalf, SiloMessage};
//! fn aggregate(server: &mut dyn ServerHalf, messages: &[SiloMessage]) {
//!     let _ = server.aggregate(Round::FIRST, messages);
//! }
//! ```
//!
//! [`Dataset`]: crate::data::Dataset
//! [`DpRng`]: dpfl_privacy::DpRng

pub(crate) mod acsa_server;
pub mod checked;
pub mod context;
pub mod gradient;
pub mod half;
pub mod lowy;
pub mod message;
pub mod normfedavg;
pub mod registry;
pub(crate) mod server;
pub mod shuffle;
pub mod soteria;
pub mod spec;
pub mod wing;

pub use context::{BuildContext, BuiltAlgorithm, SiloCalibration};
pub use half::{
    FederationInfo, FixedNoise, HalfState, ServerHalf, SiloCounters, SiloHalf, SiloInfo,
};
pub use lowy::calibration::Calibration;
pub use message::{Broadcast, PackedInts, Payload, Reply, Round, SiloMessage};
pub use server::OutputRule;
pub use spec::AlgorithmSpec;
