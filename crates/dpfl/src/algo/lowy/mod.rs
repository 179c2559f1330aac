//! The wing of Lowy & Razaviyayn, "Private Federated Learning Without a Trusted Server"
//! (ICLR 2023; digest `/work/shared/spec/`): ISRL-DP minibatch SGD (Algorithms 2 and 7),
//! Accelerated Noisy MB-SGD (Algorithm 1, one-pass and ERM), the ISRL-DP Local SGD baseline
//! (App. I), the per-silo calibration and the theorems' parameter rules.
//!
//! - `mbsgd.rs` — one MB-SGD: `kind = "mb-sgd"` (Algorithm 2) and `"noisy-mb-sgd"`
//!   (Algorithm 7: weights, per-silo K_i, smoothing, the theorems' rules); its server half
//!   is the floor's `MbSgdServer` (the shuffle wing runs it too).
//! - `acsa.rs` — `kind = "accelerated-mb-sgd"`; its server half is the floor's `AcsaServer`.
//! - `wing.rs` — the `mb-sgd` and `local-sgd` configs and the wing's `Wing` and `ParamGuard`
//!   impls; `checked_params.rs` — the checked types the guards produce and planning takes.
//! - `local_sgd.rs` — Local SGD / FedAvg and its ISRL-DP baseline.
//! - `calibration.rs` — per-silo K_i and σ_i under theory | experiment | accountant (and
//!   Thm E.1's one-pass rule); the one default-K rule.
//! - `theory.rs` — the theorems' parameter rules as one pure function (`inputs.rs`: what
//!   they read and return); `params.rs` applies
//!   them to a built federation; `multistage.rs` — AC-SA's step schedules.
//!
//! Silo halves come from the floor (`crate::algo::gradient::GradientSilo` with a
//! `BatchSource`); server halves share the floor's averaging and iterate outputs.
//!
//! # Adding a paper (a new wing)
//! A new paper gets a sibling directory (`soteria/`, `normfedavg/`, `shuffle/`) that imports
//! only floor files (`crate::algo::{half, message, context, server, gradient, wing,
//! acsa_server}`) and its own files, never this wing: what two wings share moves down into
//! the floor. It adds (1) its config struct implementing `crate::algo::wing::Wing` (in its
//! `wing.rs`: label, privacy, noise-multiplier rule, knobs, audit view, requirements, plan)
//! and `crate::algo::checked::ParamGuard` (its parameters checked once, from the shared
//! blocks, into the type its `plan()` takes)
//! and, in `crate::algo::spec`, its variant of `AlgorithmSpec` with its line in `with_wing!`
//! and `from_config!`, and its plan's `WingPlan` variant; (2) its silo half (or a `BatchSource`/mechanism for the floor's `GradientSilo`) and
//! server half, each reporting its round's privacy event; (3) its calibration with the
//! theorem and a hand-computed test; (4) a line in ARCHITECTURE.md's code map.
//! `crates/dpfl/tests/it/import_graph.rs` fails if a wing imports another wing or the floor
//! imports a wing.
//!
//! **API boundary:** the configs `AlgorithmSpec` holds ([`MbSgdSpec`], [`LocalSgdSpec`],
//! [`AcceleratedSpec`], [`NoisyMbSgdSpec`]) and the checked parameters their guards produce
//! ([`MbSgdParams`], [`LocalSgdParams`], [`GeneralParams`], [`NoisyMbSgdParams`],
//! [`AcceleratedParams`]); the plans `WingPlan` holds ([`MbSgdPlan`], [`AcsaPlan`],
//! [`LocalSgdPlan`]); `Calibration`, re-exported by `crate::algo`. Every module is
//! crate-private.

pub(crate) mod acsa;
pub(crate) mod calibration;
pub(crate) mod checked_params;
pub(crate) mod inputs;
pub(crate) mod local_sgd;
pub(crate) mod mbsgd;
pub(crate) mod multistage;
pub(crate) mod params;
pub(crate) mod theory;
pub(crate) mod wing;

// The wing's public face (issue 28 item 5): the configs the public `AlgorithmSpec` holds and
// the checked parameters they become, and the plans `WingPlan` holds. Everything else is
// crate-private.
pub use acsa::{AcceleratedSpec, AcsaPlan};
pub use local_sgd::LocalSgdPlan;
pub use mbsgd::{MbSgdPlan, NoisyMbSgdSpec};
pub use wing::{
    AcceleratedParams, GeneralParams, LocalSgdParams, LocalSgdSpec, MbSgdParams, MbSgdSpec,
    NoisyMbSgdParams,
};
