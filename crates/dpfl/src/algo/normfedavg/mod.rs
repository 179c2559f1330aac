//! The wing of Das, Hashemi, Sanghavi & Dhillon, "DP-NormFedAvg: Normalizing Client Updates
//! for Privacy-Preserving Federated Learning" (digest `shared/spec/dp-normfedavg.md`): DP-
//! NormFedAvg (Algorithm 2), NormFedAvg (Remark 3), FedAvg (Algorithm 3), the clipping + TDL
//! baseline (experiment (ii)) and the Binomial baseline (experiment (i)), one config kind
//! (`kind = "norm-fed-avg"`, [`NormFedAvgSpec`]) with a `variant`.
//!
//! - `config.rs` — the spec, η_k = η₀·0.99^k, the β_k schedules of digest §5.4, privacy
//!   settings, every check naming its field;
//! - `sensitivity.rs` — worst case, Theorem 3 (failure probability reported), eq. 6's μ form;
//! - `local.rs` — E local minibatch steps with momentum and weight decay;
//! - `quantized.rs` — the t-bit packed message (silo encoder, server integer decoder);
//! - `halves.rs` — the silo and server halves and `build`.
//!
//! The privacy mechanisms are `dpfl_privacy::qtdl` (quantizer, exact TDL sampler, Theorem 1,
//! cpSGD's calculator, accounting). Decisions on the digest's ambiguities (§6.2):
//! * **Theorem 1's δ is wrong for d ≥ 2** (`dpfl_privacy::qtdl` module docs): the default
//!   calibration is the corrected m (`calibration = "corrected"`, the smallest m whose true δ
//!   meets the round's target); Theorem 1's m is available only as `"paper-claim"`, whose
//!   round event carries the correct δ (≈ 1, i.e. no guarantee). Client-sampling
//!   amplification (Theorem 2's 2r/n) is not credited: the server draws S_k and sees who
//!   answers. Theorem 2's ε₀ is used to *calibrate* a `total` budget (the paper's recipe);
//!   dpfl's accountant reports what the events compose to.
//! * **Noise placement**: per client only. The paper's aggregate-level experiment (iii) adds
//!   noise calibrated to Δ/r, which protects only the sum under a trusted aggregator; here
//!   the server is untrusted and never adds noise, so that mode is not offered.
//! * **Clipping + TDL**: the clipped update goes through Q_s (the noise lives on the 1/s grid),
//!   with the worst-case sensitivities, valid because C ≤ 1 is enforced.
//! * **Participation**: r of n without replacement is the experiment's
//!   `participation = { kind = "fixed", m = r }`; the server divides by the number M of valid
//!   messages (= r when every sampled silo answers).
//! * **Momentum** 0.9 with a per-round buffer, weight decay in the optimiser, fresh
//!   without-replacement minibatches (`local.rs`). The zero update sends noise only
//!   (`halves.rs`). FedAvg's server step is β_k (default 1: the paper's plain average).
//! * **Record-level DP, any neighbouring relation**: the sensitivities are suprema over the
//!   local run and do not depend on which relation the ledger uses.
//! * **Training arithmetic** (session 8, by measurement: BENCHMARKS.md): the network's
//!   products run in f32 (`model::DeepMlp`, `Precision::F32`); the gradient is added to an
//!   f64 accumulator, and the optimiser (w, momentum, weight decay), the update d = w_k −
//!   w_{k,E}, its norm, d/‖d‖ or the clipped d, and the quantizer Q_s are all f64. Precision
//!   cannot weaken the guarantee: the worst-case and Theorem 3 sensitivities bound
//!   ‖Q_s(u) − Q_s(u')‖ for *any* u, u' in the unit ball (the direction is renormalised in
//!   f64 whatever d is, and clipping enforces ‖u‖ ≤ C ≤ 1), so how d was computed — f32 or
//!   f64, rounded or not — never enters them; the released message is the integer
//!   Q_s(u) + e with e drawn exactly on the integers. Only the μ form's sensitivity is an
//!   assumption about d itself, in either arithmetic alike.
//!
//! **API boundary:** the config ([`NormFedAvgSpec`]) and the types its fields name; the plan
//! `WingPlan` holds ([`NormFedAvgPlan`], [`NoisePlan`], [`SiloPlan`]) with [`plan()`] and
//! [`build()`], which the lab's reproduction calls per grid cell; and the kernels
//! `benches/normfedavg.rs` times ([`LocalTrainer`], [`sensitivities()`], [`Encoder`] with its
//! [`IntNoise`] and [`MessageAccounting`]). The halves (`halves.rs`) and the `Wing` impl are
//! crate-private, tested beside them (`tests.rs`) and in `src/mechanism_tests.rs`.

#![warn(missing_docs)]

pub(crate) mod config;
pub(crate) mod halves;
pub(crate) mod local;
pub(crate) mod plan;
pub(crate) mod quantized;
pub(crate) mod sensitivity;
pub(crate) mod wing;

// The wing's public face (issue 28 item 5): the config and the types its fields name; the plan
// `WingPlan` holds, with `plan` and `build` (the reproduction plans and builds per grid cell);
// and the kernels the benchmarks time (local training, the sensitivities, the encoder and its
// integer noise). The halves are crate-private.
pub use config::{
    BetaSchedule, BudgetSpec, EtaSchedule, NormFedAvgSpec, QuantPrivacy, SensitivitySpec,
    TdlCalibration, Variant,
};
pub use local::LocalTrainer;
pub use plan::{NoisePlan, NormFedAvgPlan, SiloPlan, build, plan};
pub use quantized::{Encoder, IntNoise, MessageAccounting};
pub use sensitivity::{Sensitivities, sensitivities};

#[cfg(test)]
mod tests;
