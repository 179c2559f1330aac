//! The synthetic federation of the scaling table (BENCHMARKS.md, "Issue 30 item 4"): `silos`
//! silos of [`ROWS`] training rows with `features` features each, logistic regression, and
//! private ISRL-DP MB-SGD (Lowy & Razaviyayn Algorithm 2, App. I's closed-form noise rule, so
//! building a federation of 10⁴ silos runs no accountant) with every silo in every round:
//! per silo and round a batch of K = [`ROWS`] clipped gradients, N(0, σ²I) on d coordinates
//! and one d-vector message; at the server the average and one step.
//!
//! Shared by `examples/scaling` (peak memory, `/usr/bin/time`) and `benches/kernels.rs`
//! (`scaling/*`, time per round), so both measure the same federation.

use dpfl::sim::Simulator;
use dpfl_lab::experiment::{ExperimentSpec, TrialData, build_context, prepare_trial};
use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

/// Training rows per silo; also the batch K (drawn with replacement).
pub(crate) const ROWS: usize = 8;

/// The experiment: N = `silos`, d = `features`.
pub(crate) fn spec(silos: usize, features: usize) -> dpfl::Result<ExperimentSpec> {
    ExperimentSpec::from_toml(
        &format!(
            r#"
name = "scaling"
rounds = 100
seed = 1
[data]
source = {{ kind = "synthetic", task = "binary", silos = {silos}, train = {ROWS}, test = 1, features = {features}, shift = 0.5 }}
[model]
kind = "logistic"
[privacy]
epsilon = 1.0
delta = 1e-6
lipschitz = 2.0
[[algorithms]]
kind = "mb-sgd"
calibration = "experiment"
batch_size = {ROWS}
step_size = 0.1
"#
        ),
        "scaling",
    )
}

/// The silos' data and the model.
pub(crate) fn trial(spec: &ExperimentSpec) -> dpfl::Result<TrialData> {
    prepare_trial(spec, None, &mut DpRng::from_seed(1, Purpose::Data, 0))
}

/// The simulator of the first algorithm over `trial`'s silos.
pub(crate) fn simulator<'a>(
    spec: &ExperimentSpec,
    trial: &'a TrialData,
) -> dpfl::Result<Simulator<'a>> {
    let ctx = build_context(spec, trial)?;
    let built = spec.algorithms[0].spec.build(&ctx)?;
    Simulator::new(&trial.silos, built, spec.participation.clone(), Some(7))
}
