//! The grid of independent runs (trial × panel × ε × algorithm × step size × clip ×
//! repetition), each seeded by a hash of its coordinates, and their parallel execution.

use std::path::Path;

use rayon::prelude::*;

use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

use super::spec::{ReproMetric, ReproSpec};
use crate::experiment::{TrialData, prepare_trial, train_one};
use dpfl::algo::AlgorithmSpec;
use dpfl::data::SiloData;

/// The algorithm with the panel's K and a step size.
fn configure(spec: &AlgorithmSpec, k: Option<usize>, eta: f64) -> AlgorithmSpec {
    spec.tuned(eta, k)
}

/// The smallest K App. I's calibration accepts on every silo, ⌊n_i√ε/(2√R)⌋ (0 for
/// algorithms without that calibration). A panel's K below it is raised to it: the paper
/// claims ISRL-DP for its σ² only under that condition (e.g. obesity at ε = 9 with our
/// n ≈ 217 needs K ≥ 32, not the script's 30).
fn min_batch(spec: &AlgorithmSpec, pt: &PanelTrial, rounds: usize, eps: f64) -> usize {
    let uses_rule = spec.knobs().app_i_batch_floor;
    let Ok(e) = dpfl_privacy::Epsilon::new(eps) else {
        return 0;
    };
    if !uses_rule {
        return 0;
    }
    pt.data
        .silos
        .iter()
        .map(|s| dpfl_privacy::calibration::isrl_experiment_k(s.train.len(), rounds, e))
        .max()
        .unwrap_or(0)
}

/// splitmix64 of a word sequence: independent seeds for every run.
pub(crate) fn mix(words: &[u64]) -> u64 {
    let mut h: u64 = 0x9E37_79B9_7F4A_7C15;
    for &w in words {
        let mut z = h ^ w.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        h = z ^ (z >> 31);
    }
    h
}

/// One training run of the grid.
#[derive(Debug, Clone)]
pub struct Job {
    /// Index of the panel (N, M, K setting) in the spec.
    pub panel: usize,
    /// The trial (a fresh draw of the data), from 0.
    pub trial: usize,
    /// Index into ε (None for a non-private algorithm, trained once).
    pub eps: Option<usize>,
    /// Index of the algorithm in the spec.
    pub algorithm: usize,
    /// The step size η of this grid point.
    pub step: f64,
    /// The clip threshold C = L of this point, when the spec tunes over clips.
    pub clip: Option<f64>,
    /// The repetition at this grid point (the paper averages 3).
    pub rep: usize,
}

/// What one run produced (a line of the checkpoint: floats exact, [`super::checkpoint::Exact`]).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct JobResult {
    /// The final model's mean training loss (what the selection minimises).
    #[serde(with = "super::checkpoint::exact")]
    pub train_loss: f64,
    /// The final model's value of the spec's metric (test error or relative RMSE).
    #[serde(with = "super::checkpoint::exact")]
    pub metric: f64,
    /// The run's certified ε: per silo the smaller of the RDP and PLD accounts of what its
    /// ledger released (at its target δ), then the largest over silos; None if a silo could
    /// not be accounted, or the algorithm is not private.
    #[serde(with = "super::checkpoint::exact_opt")]
    pub certified_epsilon: Option<f64>,
    /// The largest over silos of the lower bound on the true ε (a concrete pair), if any.
    #[serde(with = "super::checkpoint::exact_opt")]
    pub lower_epsilon: Option<f64>,
}

/// Every run of a reproduction, in a fixed order.
pub fn jobs(spec: &ReproSpec) -> Vec<Job> {
    let clips: Vec<Option<f64>> = match &spec.base.clips {
        Some(c) => c.iter().map(|&v| Some(v)).collect(),
        None => vec![None],
    };
    let mut out = Vec::new();
    for panel in 0..spec.panels.len() {
        for trial in 0..spec.trials {
            for (a, alg) in spec.algorithms.iter().enumerate() {
                let eps_list: Vec<Option<usize>> = if alg.spec.is_private() {
                    (0..spec.epsilons.len()).map(Some).collect()
                } else {
                    vec![None]
                };
                for eps in eps_list {
                    let grid = match (eps, &alg.small_eps_steps, alg.small_epsilon) {
                        (Some(e), Some(g), Some(t)) if spec.epsilons[e] <= t => g,
                        _ => &alg.steps,
                    };
                    for &clip in &clips {
                        for step in grid.values() {
                            for rep in 0..spec.repetitions {
                                out.push(Job {
                                    panel,
                                    trial,
                                    eps,
                                    algorithm: a,
                                    step,
                                    clip,
                                    rep,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// One trial's data for one panel, with the public facts the metrics need.
pub struct PanelTrial {
    /// The trial's silos and model.
    pub data: TrialData,
    /// Mean of all silos' training labels (relative RMSE's naive predictor).
    pub y_train_mean: f64,
}

/// Prepares the data of every (panel, trial). The data stream depends on the trial only, so
/// panels that share a partition see the same split.
pub fn prepare(spec: &ReproSpec, data_dir: Option<&Path>) -> dpfl::Result<Vec<Vec<PanelTrial>>> {
    spec.panels
        .iter()
        .map(|panel| {
            let exp = spec.experiment(panel, spec.epsilons[0], None);
            (0..spec.trials)
                .map(|t| {
                    let mut rng = DpRng::from_seed(mix(&[spec.seed, t as u64]), Purpose::Data, 0);
                    let data = prepare_trial(&exp, data_dir, &mut rng)?;
                    let (s, n) = data.silos.iter().fold((0.0, 0usize), |(s, n), d| {
                        (s + d.train.y().iter().sum::<f64>(), n + d.train.len())
                    });
                    Ok(PanelTrial {
                        data,
                        y_train_mean: s / n.max(1) as f64,
                    })
                })
                .collect()
        })
        .collect()
}

fn metric_of(
    metric: ReproMetric,
    model: &dyn dpfl::model::Model,
    w: &[f64],
    pt: &PanelTrial,
) -> f64 {
    let silos: &[SiloData] = &pt.data.silos;
    match metric {
        ReproMetric::TestError => {
            let (mut wrong, mut n) = (0usize, 0usize);
            for s in silos {
                for i in 0..s.test.len() {
                    let (x, y) = s.test.row(i);
                    wrong += usize::from(model.predict(w, x) != y);
                }
                n += s.test.len();
            }
            wrong as f64 / n.max(1) as f64
        }
        ReproMetric::RelativeRmse => {
            let (mut num, mut den) = (0.0, 0.0);
            for s in silos {
                for i in 0..s.test.len() {
                    let (x, y) = s.test.row(i);
                    num += (model.predict(w, x) - y).powi(2);
                    den += (y - pt.y_train_mean).powi(2);
                }
            }
            (num / den).sqrt()
        }
    }
}

/// Runs one job.
/// A job's experiment (with its ε), its algorithm configured with the job's K and step, and
/// its trial's data.
fn job_parts<'a>(
    spec: &ReproSpec,
    data: &'a [Vec<PanelTrial>],
    job: &Job,
) -> (
    crate::experiment::ExperimentSpec,
    f64,
    AlgorithmSpec,
    &'a PanelTrial,
) {
    let panel = &spec.panels[job.panel];
    let eps = job.eps.map_or(spec.epsilons[0], |e| spec.epsilons[e]);
    let exp = spec.experiment(panel, eps, job.clip);
    let alg = &spec.algorithms[job.algorithm];
    let pt = &data[job.panel][job.trial];
    let k = panel
        .batch_size
        .map(|k| k.max(min_batch(&alg.spec, pt, spec.base.rounds, eps)));
    (exp, eps, configure(&alg.spec, k, job.step), pt)
}

/// Every silo's events in a run of `job` in which it answers every round: its plan's run
/// event, without training, with the job's experiment (whose privacy block gives each silo's
/// δ). This is the guarantee the calibration promises (under partial participation a silo
/// that sat rounds out spent less); `reproduce --rewrite` certifies committed results with it.
pub fn plan_events(
    spec: &ReproSpec,
    data: &[Vec<PanelTrial>],
    job: &Job,
) -> dpfl::Result<(
    crate::experiment::ExperimentSpec,
    Vec<Vec<dpfl_privacy::PrivacyEvent>>,
)> {
    let (exp, _, algorithm, pt) = job_parts(spec, data, job);
    let setup = crate::experiment::setup(&exp, &pt.data)?;
    let plan = dpfl::plan::Plan::new(setup, &algorithm)?;
    Ok((exp, dpfl::algo::context::run_events(&plan.calibration)))
}

/// Runs one job.
pub fn run_job(spec: &ReproSpec, data: &[Vec<PanelTrial>], job: &Job) -> dpfl::Result<JobResult> {
    let (exp, eps, algorithm, pt) = job_parts(spec, data, job);
    let alg = &spec.algorithms[job.algorithm];
    let seed = mix(&[
        spec.seed,
        0x5EED,
        job.panel as u64,
        job.trial as u64,
        job.eps.map_or(u64::MAX, |e| e as u64),
        job.algorithm as u64,
        job.step.to_bits(),
        job.clip.map_or(0, f64::to_bits),
        job.rep as u64,
    ]);
    let run = train_one(
        &exp,
        &algorithm,
        &pt.data,
        Some(seed),
        spec.base.rounds,
        |_| {},
    )
    .map_err(|e| match e {
        dpfl::Error::Config { field, reason } => dpfl::Error::Config {
            field: format!("{} (panel {}, eps {eps}): {field}", alg.label, job.panel),
            reason,
        },
        dpfl::Error::Param(p) => dpfl::Error::Config {
            field: format!(
                "{} (panel {}, eps {eps}): algorithm.{}",
                alg.label,
                job.panel,
                p.field()
            ),
            reason: p.reason(),
        },
        other => other,
    })?;
    let metric = metric_of(spec.metric, pt.data.model.as_ref(), &run.final_model, pt);
    let (certified_epsilon, lower_epsilon) = match (alg.spec.is_private(), spec.rdp_only) {
        (false, _) => (None, None),
        (true, false) => certified(&crate::experiment::account_silos(
            &exp,
            &pt.data,
            &run.spent,
            crate::experiment::Precision::Coarse,
        )),
        (true, true) => (certified_rdp(&exp, &pt.data, &run.spent), None),
    };
    Ok(JobResult {
        train_loss: run.final_train_loss,
        metric,
        certified_epsilon,
        lower_epsilon,
    })
}

/// The largest over silos of the RDP account of its released events at its δ (`--quick`).
fn certified_rdp(
    exp: &crate::experiment::ExperimentSpec,
    data: &TrialData,
    spent: &[Vec<dpfl_privacy::PrivacyEvent>],
) -> Option<f64> {
    let p = exp.privacy.as_ref()?;
    let mut worst = 0.0f64;
    for (i, events) in spent.iter().enumerate() {
        let n = data.silos.get(i).map_or(1, |s| s.train.len());
        let delta = dpfl_privacy::Delta::new(p.delta.resolve(n).ok()?).ok()?;
        let all = dpfl_privacy::PrivacyEvent::Composed(events.clone());
        let e = dpfl_privacy::accountant::AccountantKind::Rdp
            .epsilon(dpfl_privacy::Neighbouring::ReplaceOne, &all, delta)
            .ok()?;
        worst = worst.max(e);
    }
    Some(worst)
}

/// (certified ε, lower bound) of a run from its silos' accounts ([`JobResult`]).
pub(crate) fn certified(silos: &[crate::experiment::SiloPrivacy]) -> (Option<f64>, Option<f64>) {
    let mut up = Some(0.0f64);
    let mut low: Option<f64> = None;
    for s in silos {
        let best = match (s.rdp_epsilon, s.pld_epsilon) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        up = match (up, best) {
            (Some(u), Some(b)) => Some(u.max(b)),
            _ => None,
        };
        if let Some(l) = s.lower_epsilon {
            low = Some(low.map_or(l, |x| x.max(l)));
        }
    }
    (up.filter(|_| !silos.is_empty()), low)
}

/// Runs `jobs` in parallel; results in job order.
pub fn run_grid(
    spec: &ReproSpec,
    data: &[Vec<PanelTrial>],
    jobs: &[Job],
    progress: &(dyn Fn(usize, usize) + Sync),
) -> dpfl::Result<Vec<JobResult>> {
    let done = std::sync::atomic::AtomicUsize::new(0);
    jobs.par_iter()
        .map(|j| {
            let r = run_job(spec, data, j);
            let d = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            progress(d, jobs.len());
            r
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `test_error` means the same in `dpfl reproduce` (its summary's `metric`) and in
    /// `dpfl train` (rounds.csv's `test_metric` of a classifier, summary `metric = test_error`):
    /// the pooled misclassification rate of the same model on the same test rows.
    #[test]
    fn reproduce_test_error_is_train_test_metric() {
        let exp = crate::experiment::ExperimentSpec::from_toml(
            r#"
name = "m"
rounds = 1
seed = 4
[data]
source = { kind = "synthetic", task = "binary", silos = 3, train = 40, test = 17, features = 3, shift = 0.5 }
[model]
kind = "logistic"
[[algorithms]]
kind = "mb-sgd"
step_size = 0.1
"#,
            "<test>",
        )
        .unwrap();
        let mut rng = DpRng::from_seed(9, Purpose::Data, 0);
        let data = prepare_trial(&exp, None, &mut rng).unwrap();
        let pt = PanelTrial {
            data,
            y_train_mean: 0.0,
        };
        let model = pt.data.model.clone();
        for k in 0..4 {
            let w: Vec<f64> = (0..model.num_params())
                .map(|i| ((i + k) as f64 * 0.7).sin())
                .collect();
            let repro = metric_of(ReproMetric::TestError, model.as_ref(), &w, &pt);
            let train = dpfl::sim::test_metric(model.as_ref(), &w, &pt.data.silos);
            assert!((repro - train).abs() < 1e-12, "{repro} vs {train}");
            // 51 test rows: a multiple of 1/51.
            assert!(
                (repro * 51.0 - (repro * 51.0).round()).abs() < 1e-9,
                "{repro}"
            );
        }
    }
}
