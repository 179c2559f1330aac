//! Experiments as data: a TOML file names the data set and its partition into silos, the
//! model, the privacy budget, the participation, and the algorithms; [`run`] trains each
//! algorithm in the simulator and returns per-round metrics and a summary.
//!
//! ```toml
//! name = "obesity"
//! rounds = 100
//! seed = 1
//! participation = { kind = "fixed", m = 3 }
//!
//! [data]
//! source = { kind = "obesity" }
//! partition = { kind = "by-class" }
//! balance = true
//!
//! [model]
//! kind = "softmax"
//!
//! [privacy]
//! epsilon = 1.0
//! delta = "1/n^2"
//! lipschitz = 2.0       # public: gradients are clipped at L and the noise calibrated to it
//!
//! [[algorithms]]
//! kind = "mb-sgd"
//! calibration = "experiment"
//! step_size = 0.05
//! ```

use std::time::Instant;

use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

use dpfl::algo::AlgorithmSpec;
use dpfl::run::{Ledgers, OnDiverged, RunOptions};
use dpfl::sim::Simulator;

mod context;
pub mod curves;
pub mod datasource;
pub mod evaluation;
pub mod guarantee;
pub mod init;
pub mod metrics;
mod output;
pub mod paths;
pub(crate) mod preprocessing;
pub mod reference;
// report.html (minijinja): the CLI's `train --out`, `federate` and `serve`; the Python
// extension builds without the `report` feature (issue 29 item 6).
#[cfg(feature = "report")]
pub mod report;
pub mod saved;
pub(crate) mod server_facts;
#[cfg(feature = "report")]
pub mod server_report;
mod silo_privacy;
mod spec;
mod summary;

pub use context::{
    DATA_DERIVED_L_CAVEAT, TrialData, build_context, lipschitz, lipschitz_is_public, plan_from,
    plan_from_file, prepare_trial, setup, setup_from,
};
pub use datasource::DataSpec;
pub use output::{check_finite, write_outputs};
pub(crate) use spec::parse_toml;
pub use spec::{AlgorithmEntry, DeltaRule, DeltaSpec, ExperimentSpec, NoiseKind, PrivacySpec};
pub use summary::{
    AlgorithmSummary, RoundRow, RunAccumulator, RunOutput, SEEDED_CAVEAT, SiloPrivacy, SingleRun,
    TestMetric, UNCERTIFIED_CAVEAT, noise_multiplier, run_caveats, summary_of,
};
pub(crate) use summary::{COARSE_GRID, Precision, account_silo, silo_privacy_at as account_silos};

/// Progress callback: (algorithm index, trial, rounds done in this run).
pub type Progress<'p> = &'p (dyn Fn(usize, usize, usize) + Sync);

/// One run's simulator as [`train_one`] drives it (plan, shuffler, ledgers), with the
/// calibration and the context it was built on.
fn start_run<'t>(
    spec: &ExperimentSpec,
    algorithm: &AlgorithmSpec,
    trial: &'t TrialData,
    seed: Option<u64>,
) -> dpfl::Result<(
    Simulator<'t>,
    Vec<dpfl::algo::SiloCalibration>,
    dpfl::algo::BuildContext,
)> {
    // One plan per run: every silo calibrated once, every half built from it.
    let setup = setup(spec, trial)?;
    let ctx = setup.context_with(trial.model.clone())?;
    let (plan, built) = dpfl::plan::Plan::with_halves(setup, algorithm, &ctx)?;
    let calibration = plan.calibration.clone();
    let ledgers =
        if spec.privacy.as_ref().is_some_and(|p| p.enforce_budget) && algorithm.is_private() {
            Ledgers::Enforce
        } else {
            Ledgers::Record
        };
    let opts = RunOptions::seeded(spec.participation.clone(), seed, ledgers);
    let sim = Simulator::start(&trial.silos, built, &ctx, &plan.requirements(), opts)?;
    Ok((sim, calibration, ctx))
}

/// Release 0 of one run, as [`train_one`] would make it (plan, halves, ledgers, first
/// round): what `dpfl config check` runs so that a check that fails at the first release
/// (a ledger that refuses it, a noise scale the mechanism refuses) fails there, not after
/// the other algorithms have trained (issue 31 item 8). One round of training.
pub fn release_zero(
    spec: &ExperimentSpec,
    algorithm: &AlgorithmSpec,
    trial: &TrialData,
    seed: Option<u64>,
) -> dpfl::Result<()> {
    use dpfl_privacy::PrivacyError;
    let (mut sim, _, _) = start_run(spec, algorithm, trial, seed)?;
    // Privacy failures at the first release are the configuration's: name the field.
    let named = |e: dpfl::Error| match e {
        dpfl::Error::Privacy(
            e @ (PrivacyError::BudgetExceeded { .. } | PrivacyError::ReleaseCapReached { .. }),
        ) => dpfl::Error::config(
            "privacy.enforce_budget",
            format!("a silo's ledger refuses the first round: {e}"),
        ),
        dpfl::Error::Privacy(e) => {
            dpfl::Error::config("privacy", format!("the first round fails: {e}"))
        }
        other => other,
    };
    sim.round().map(|_| ()).map_err(named)
}

/// Trains one algorithm on one trial's data. `seed` fixes the silos' and network's streams.
pub fn train_one(
    spec: &ExperimentSpec,
    algorithm: &AlgorithmSpec,
    trial: &TrialData,
    seed: Option<u64>,
    eval_every: usize,
    mut progress: impl FnMut(usize),
) -> dpfl::Result<SingleRun> {
    let start = Instant::now();
    let (mut sim, calibration, ctx) = start_run(spec, algorithm, trial, seed)?;
    let model = trial.model.as_ref();
    let mut curve = Vec::new();
    let mut extended = Vec::new();
    let mut tracker = spec
        .extended_metrics
        .unwrap_or(algorithm.extended_metrics())
        .then(|| {
            metrics::Tracker::new(metrics::full_grad_norm_sq(
                model,
                &sim.output(),
                sim.silo_data(),
            ))
        });
    sim.drive(spec.rounds, OnDiverged::Fail, |sim, r, report| {
        if let Some(t) = tracker.as_mut() {
            t.add_bits(report.message_bits);
        }
        if is_eval_round(r, eval_every, spec.rounds) {
            let w = sim.output();
            curve.push((r, sim.train_loss(model, &w), sim.test_metric(model, &w)));
            if let Some(t) = tracker.as_mut() {
                let g = metrics::full_grad_norm_sq(model, &w, sim.silo_data());
                extended.push(t.row(g, sim.counters()));
            }
        }
        progress(r);
        Ok(())
    })?;
    let w = sim.output();
    Ok(SingleRun {
        final_train_loss: sim.train_loss(model, &w),
        test_metric: sim.test_metric(model, &w),
        final_model: w,
        curve,
        extended,
        calibration,
        spent: sim.spent(),
        wall_seconds: start.elapsed().as_secs_f64(),
        nonfinite_gradients: Some(ctx.oracle.nonfinite_gradients()),
    })
}

/// The generator [`run`] draws every trial's data and seed from.
pub fn master_rng(spec: &ExperimentSpec) -> dpfl::Result<DpRng> {
    Ok(DpRng::new(spec.seed, Purpose::Data, 0)?)
}

/// The next trial's data and seed, drawn from `master` exactly as [`run`] does (so a network
/// run of trial 0 uses the simulator's split and streams).
pub fn next_trial(
    spec: &ExperimentSpec,
    data_dir: Option<&std::path::Path>,
    master: &mut DpRng,
) -> dpfl::Result<(TrialData, Option<u64>)> {
    let mut data_rng = master.fork();
    let trial_seed = spec.seed.map(|_| master.next_seed());
    let trial = prepare_trial(spec, data_dir, &mut data_rng)?;
    Ok((trial, trial_seed))
}

/// The seed of algorithm `a` within a trial.
pub fn algorithm_seed(trial_seed: Option<u64>, a: usize) -> Option<u64> {
    trial_seed.map(|s| s ^ (a as u64) << 40)
}

/// Runs every algorithm of `spec` for every trial.
pub fn run(
    spec: &ExperimentSpec,
    data_dir: Option<&std::path::Path>,
    progress: Progress<'_>,
) -> dpfl::Result<RunOutput> {
    run_keeping(spec, data_dir, progress).map_err(|s| s.error)
}

/// A run that stopped at a failure: the runs that finished before it, and the failure.
#[derive(Debug)]
pub struct Stopped {
    /// The finished runs' output (`None` if none finished).
    pub finished: Option<RunOutput>,
    /// The failing algorithm's index and trial (`None`: before any algorithm ran).
    pub at: Option<(usize, usize)>,
    /// The failure (a config error names `algorithms[a] (label)`).
    pub error: dpfl::Error,
}

/// [`run`], keeping what finished when a run fails (issue 31 item 8: a failure after four
/// of five algorithms had trained wrote nothing).
pub fn run_keeping(
    spec: &ExperimentSpec,
    data_dir: Option<&std::path::Path>,
    progress: Progress<'_>,
) -> Result<RunOutput, Box<Stopped>> {
    let early = |error| {
        Box::new(Stopped {
            finished: None,
            at: None,
            error,
        })
    };
    spec.validate().map_err(early)?;
    let mut master = master_rng(spec).map_err(early)?;
    let eval_every = eval_every(spec);
    let mut acc = RunAccumulator::new(spec);
    let mut done = 0usize;
    for t in 0..spec.trials {
        let (trial, trial_seed) = match next_trial(spec, data_dir, &mut master) {
            Ok(v) => v,
            Err(error) => {
                return Err(Box::new(Stopped {
                    finished: (done > 0).then(|| acc.finish()),
                    at: None,
                    error,
                }));
            }
        };
        for (a, entry) in spec.algorithms.iter().enumerate() {
            let run = train_one(
                spec,
                &entry.spec,
                &trial,
                algorithm_seed(trial_seed, a),
                eval_every,
                |r| progress(a, t, r),
            );
            match run {
                Ok(run) => {
                    acc.add(spec, a, t, &trial, &run);
                    done += 1;
                }
                Err(e) => {
                    return Err(Box::new(Stopped {
                        finished: (done > 0).then(|| acc.finish()),
                        at: Some((a, t)),
                        error: match name_algorithm(a, &entry.label(), e) {
                            // A refusal or numerical failure of the privacy core names the
                            // algorithm and trial it happened in (issue 31 item 8).
                            dpfl::Error::Privacy(e) => dpfl::Error::data(
                                format!("algorithms[{a}] ({}), trial {t}", entry.label()),
                                e.to_string(),
                            ),
                            other => other,
                        },
                    }));
                }
            }
        }
    }
    Ok(acc.finish())
}

/// A config error of algorithm `a` names it (`algorithms[a] "label": …`,
/// [`dpfl::Error::Algorithm`]).
pub fn name_algorithm(a: usize, label: &str, e: dpfl::Error) -> dpfl::Error {
    e.in_algorithm(a, label)
}

/// The evaluation period of an experiment: `eval_every`, by default every round up to 200
/// rounds and R/100 beyond.
pub fn eval_every(spec: &ExperimentSpec) -> usize {
    spec.eval_every
        .unwrap_or(if spec.rounds <= 200 {
            1
        } else {
            spec.rounds / 100
        })
        .max(1)
}

pub use dpfl::round::is_eval_round;
