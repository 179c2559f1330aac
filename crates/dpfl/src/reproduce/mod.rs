//! Reproductions of the experiments of Lowy & Razaviyayn (ICLR 2023), §6 and App. I:
//! `lowy-mnist` (Fig. 4 and 7), `lowy-insurance` (Fig. 5, 8, 9) and `lowy-obesity` (Fig. 6).
//!
//! A reproduction is data: a TOML file in `experiments/` (embedded in the binary, see
//! [`builtin`]) names the data, model, ε grid, panels (figure, N, M, K) and, per algorithm, its
//! step-size grid. The protocol is App. I's:
//!
//! 1. for each trial, a fresh partition and train/test split (seeded by the trial number, so
//!    every panel and algorithm of a trial sees the same split);
//! 2. for every ε, algorithm, step size η of the grid (× clip threshold C of the clip grid
//!    for the insurance data), `repetitions` independent training runs;
//! 3. the (η, C) with the lowest mean final *training* loss is selected and its mean test
//!    metric is the trial's value (selection on training data, as in the paper's code);
//! 4. over trials: the mean and a 90% interval.
//!
//! Decisions (digest §5.2), each on the paper's side where it is explicit and on the safe side
//! where it is not:
//! * **Noise** is App. I's experiment calibration σ² = 8L²R ln(1/δ)/(n²ε²) (MB-SGD and the
//!   accelerated ERM variant) and σ² = 8L²RK ln(1/δ)/(n²ε²) per local step (Local SGD); δ_i =
//!   1/n_i²; L = 2 max‖x‖ (logistic, softmax) or the clip threshold (linear). Every
//!   per-example gradient is clipped at L, so the sensitivity holds for any record. The
//!   calibration refuses a K below ⌊n√ε/(2√R)⌋ (the condition under which App. I's σ² is
//!   claimed to give ISRL-DP), so a panel's K is raised to that minimum where it is smaller
//!   (only obesity at ε = 9: 32 instead of 30).
//! * **Messages are averaged** (Algorithm 2 line 9), per-example gradients clipped, one noise
//!   draw per silo message; the official code's sums, batch-mean clipping and resampling
//!   with replacement are *not* copied (`docs/reproductions.md`).
//! * **Output**: the last iterate w_R (as App. I.3 says "w_R"); non-private baselines do
//!   not depend on ε and are trained once per trial; their rows repeat for every ε.
//! * **Error bars**: the 5th and 95th percentiles of the per-trial values (linear
//!   interpolation), the paper's code's "90% error bars". With few trials they are wide.
//! * A run whose training loss is not finite (divergence) ranks last in the selection.
//!
//! Runs are independent and executed in parallel (rayon); each run's seed is a hash of its
//! coordinates (trial, panel, ε, algorithm, grid point, repetition), so results are
//! bit-for-bit the same for a seed whatever the number of threads.

pub mod checkpoint;
pub mod newton;
mod output;
pub mod plot;
pub mod soteria;
pub mod soteria_out;

pub use output::write_outputs;

use std::path::Path;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

use crate::algo::AlgorithmSpec;
use crate::data::SiloData;
use crate::data::partition::PartitionSpec;
use crate::experiment::{
    DataSpec, DeltaSpec, ExperimentSpec, PrivacySpec, TrialData, prepare_trial, train_one,
};
use crate::model::{ModelSpec, Projection};
use crate::sim::Participation;

/// The reproductions shipped with dpfl: (id, TOML text).
pub const BUILTIN: [(&str, &str); 3] = [
    (
        "lowy-mnist",
        include_str!("../../../../experiments/lowy-mnist.toml"),
    ),
    (
        "lowy-insurance",
        include_str!("../../../../experiments/lowy-insurance.toml"),
    ),
    (
        "lowy-obesity",
        include_str!("../../../../experiments/lowy-obesity.toml"),
    ),
];

/// The built-in reproduction `id`, parsed.
pub fn builtin(id: &str) -> crate::Result<ReproSpec> {
    let (_, text) = BUILTIN.iter().find(|(i, _)| *i == id).ok_or_else(|| {
        crate::Error::config(
            "id",
            format!(
                "unknown reproduction {id:?}; known: {}",
                BUILTIN.map(|(i, _)| i).join(", ")
            ),
        )
    })?;
    ReproSpec::from_toml(text, &format!("experiments/{id}.toml"))
}

/// How the figure's y axis is scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReproMetric {
    /// Pooled test misclassification rate.
    TestError,
    /// √(Σ(y − ŷ)² / Σ(y − ȳ_train)²) on the pooled test rows; ȳ_train is the mean of all
    /// silos' training labels (App. I.2's naive predictor).
    RelativeRmse,
}

impl ReproMetric {
    pub fn name(self) -> &'static str {
        match self {
            ReproMetric::TestError => "test_error",
            ReproMetric::RelativeRmse => "relative_rmse",
        }
    }
}

/// exp(linspace(from, to, points)): the paper's log-spaced grids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogGrid {
    pub from: f64,
    pub to: f64,
    pub points: usize,
}

impl LogGrid {
    pub fn values(&self) -> Vec<f64> {
        match self.points {
            0 => vec![],
            1 => vec![self.to.exp()],
            p => (0..p)
                .map(|i| (self.from + (self.to - self.from) * i as f64 / (p - 1) as f64).exp())
                .collect(),
        }
    }
    /// `points` values of this grid's range (for quick runs).
    pub fn with_points(&self, points: usize) -> LogGrid {
        LogGrid {
            points,
            ..self.clone()
        }
    }
}

/// One algorithm of a reproduction with its step-size grid.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridAlgorithm {
    pub label: String,
    /// The algorithm; its step size is replaced by each grid point, and its batch size (or
    /// number of local steps) by the panel's K when the panel gives one.
    pub spec: AlgorithmSpec,
    pub steps: LogGrid,
    /// Step grid for small ε (ε ≤ `small_epsilon`), as App. I.3 tunes Local SGD further.
    #[serde(default)]
    pub small_eps_steps: Option<LogGrid>,
    #[serde(default)]
    pub small_epsilon: Option<f64>,
}

/// Everything except the algorithms and ε: the common set-up.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseSpec {
    pub rounds: usize,
    pub data: DataSpec,
    pub model: ModelSpec,
    pub delta: DeltaSpec,
    /// L = factor · max‖x‖ (logistic/softmax); without it L is the clip threshold.
    #[serde(default)]
    pub lipschitz_from_data: Option<f64>,
    #[serde(default)]
    pub projection: Projection,
    /// Clip thresholds C to tune over (L = C); one entry = fixed.
    #[serde(default)]
    pub clips: Option<Vec<f64>>,
}

/// One panel of a figure: a setting of N, M and K.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PanelSpec {
    /// The paper's figure number, e.g. "4".
    pub figure: String,
    pub participation: Participation,
    /// Number of silos for partitions that take one (sorted-target, iid, dirichlet).
    #[serde(default)]
    pub silos: Option<usize>,
    /// K for every algorithm (records per round, or local steps).
    #[serde(default)]
    pub batch_size: Option<usize>,
}

/// Reduced settings for `--quick`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickSpec {
    #[serde(default)]
    pub trials: Option<usize>,
    #[serde(default)]
    pub repetitions: Option<usize>,
    #[serde(default)]
    pub epsilons: Option<Vec<f64>>,
    /// Panels to keep, by index.
    #[serde(default)]
    pub panels: Option<Vec<usize>>,
    /// Grid points per algorithm (same range).
    #[serde(default)]
    pub step_points: Option<usize>,
    #[serde(default)]
    pub clips: Option<Vec<f64>>,
    #[serde(default)]
    pub rounds: Option<usize>,
}

/// A reproduction, as read from TOML.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReproSpec {
    pub id: String,
    pub title: String,
    pub metric: ReproMetric,
    pub seed: u64,
    pub trials: usize,
    /// Runs per grid point (the paper: 3).
    pub repetitions: usize,
    pub epsilons: Vec<f64>,
    pub base: BaseSpec,
    pub panels: Vec<PanelSpec>,
    pub algorithms: Vec<GridAlgorithm>,
    #[serde(default)]
    pub quick: QuickSpec,
    /// A summary value that is not finite (every grid point of an algorithm diverged) is an
    /// error (exit code 1) unless this is set. Single diverging grid points are expected and
    /// rank last in the selection.
    #[serde(default)]
    pub expect_divergence: bool,
}

impl ReproSpec {
    pub fn from_toml(text: &str, origin: &str) -> crate::Result<Self> {
        let spec: ReproSpec = crate::experiment::parse_toml(text, origin)?;
        spec.validate()?;
        Ok(spec)
    }

    /// Checks the fields that can be checked without data.
    pub fn validate(&self) -> crate::Result<()> {
        let positive = |field: &str, v: usize| {
            if v == 0 {
                Err(crate::Error::config(field, "must be at least 1"))
            } else {
                Ok(())
            }
        };
        positive("trials", self.trials)?;
        positive("repetitions", self.repetitions)?;
        positive("base.rounds", self.base.rounds)?;
        if self.epsilons.is_empty() {
            return Err(crate::Error::config("epsilons", "name at least one ε"));
        }
        for (i, &e) in self.epsilons.iter().enumerate() {
            dpfl_privacy::Epsilon::new(e)
                .map_err(|err| crate::Error::config(format!("epsilons[{i}]"), err.to_string()))?;
        }
        if self.panels.is_empty() {
            return Err(crate::Error::config("panels", "name at least one panel"));
        }
        if self.algorithms.is_empty() {
            return Err(crate::Error::config(
                "algorithms",
                "name at least one algorithm",
            ));
        }
        for (i, a) in self.algorithms.iter().enumerate() {
            for (name, g) in [
                ("steps", Some(&a.steps)),
                ("small_eps_steps", a.small_eps_steps.as_ref()),
            ] {
                if let Some(g) = g
                    && (g.points == 0 || !g.from.is_finite() || !g.to.is_finite())
                {
                    return Err(crate::Error::config(
                        format!("algorithms[{i}].{name}"),
                        "needs finite from/to and at least one point",
                    ));
                }
            }
        }
        if let Some(c) = &self.base.clips
            && (c.is_empty() || c.iter().any(|v| !(v.is_finite() && *v > 0.0)))
        {
            return Err(crate::Error::config(
                "base.clips",
                "must be a non-empty list of finite positive thresholds",
            ));
        }
        if let Some(p) = &self.quick.panels
            && let Some(&bad) = p.iter().find(|&&i| i >= self.panels.len())
        {
            return Err(crate::Error::config(
                "quick.panels",
                format!(
                    "panel index {bad} out of range (have {})",
                    self.panels.len()
                ),
            ));
        }
        Ok(())
    }

    /// The reduced version `--quick` runs.
    pub fn quick(&self) -> ReproSpec {
        let q = &self.quick;
        let mut s = self.clone();
        if let Some(t) = q.trials {
            s.trials = t;
        }
        if let Some(r) = q.repetitions {
            s.repetitions = r;
        }
        if let Some(e) = &q.epsilons {
            s.epsilons = e.clone();
        }
        if let Some(p) = &q.panels {
            s.panels = p.iter().map(|&i| self.panels[i].clone()).collect();
        }
        if let Some(k) = q.step_points {
            for a in &mut s.algorithms {
                a.steps = a.steps.with_points(k.min(a.steps.points));
                a.small_eps_steps = a
                    .small_eps_steps
                    .as_ref()
                    .map(|g| g.with_points(k.min(g.points)));
            }
        }
        if let Some(c) = &q.clips {
            s.base.clips = Some(c.clone());
        }
        if let Some(r) = q.rounds {
            s.base.rounds = r;
        }
        // The reduced spec is final: its panel indices no longer refer to `quick.panels`.
        s.quick = QuickSpec::default();
        s
    }

    /// Whether the data must come from `DPFL_DATA` / `--data-dir` (not bundled).
    pub fn needs_external_data(&self) -> bool {
        matches!(
            self.base.data.source,
            crate::experiment::datasource::Source::Mnist { .. }
                | crate::experiment::datasource::Source::FashionMnist { .. }
                | crate::experiment::datasource::Source::W8a
        )
    }

    /// The experiment of one panel at one ε (without algorithms).
    fn experiment(&self, panel: &PanelSpec, epsilon: f64, clip: Option<f64>) -> ExperimentSpec {
        let mut data = self.base.data.clone();
        if let Some(n) = panel.silos {
            data.partition = data.partition.map(|p| match p {
                PartitionSpec::SortedTarget { .. } => PartitionSpec::SortedTarget { silos: n },
                PartitionSpec::Iid { .. } => PartitionSpec::Iid { silos: n },
                PartitionSpec::Dirichlet {
                    alpha, min_size, ..
                } => PartitionSpec::Dirichlet {
                    silos: n,
                    alpha,
                    min_size,
                },
                other => other,
            });
        }
        ExperimentSpec {
            name: self.id.clone(),
            seed: Some(self.seed),
            rounds: self.base.rounds,
            trials: 1,
            eval_every: Some(self.base.rounds),
            data,
            model: self.base.model.clone(),
            privacy: Some(PrivacySpec {
                epsilon,
                delta: self.base.delta.clone(),
                epsilons: None,
                lipschitz: None,
                lipschitz_from_data: self.base.lipschitz_from_data,
                // The figures use the paper's calibrations as printed; the accountant's view of
                // them is in `dpfl train`'s reports and docs/reproductions.md.
                enforce_budget: false,
                mechanism: Default::default(),
                granularity: None,
            }),
            participation: panel.participation.clone(),
            projection: self.base.projection,
            clip,
            algorithms: Vec::new(),
            // A grid point that diverges ranks last in the selection (module docs).
            expect_divergence: true,
            extended_metrics: None,
        }
    }
}

/// The algorithm with the panel's K and a step size.
fn configure(spec: &AlgorithmSpec, k: Option<usize>, eta: f64) -> AlgorithmSpec {
    let mut s = spec.with_step_size(eta);
    if let Some(k) = k {
        match &mut s {
            AlgorithmSpec::MbSgd { batch_size, .. } => *batch_size = Some(k),
            AlgorithmSpec::LocalSgd { local_steps, .. } => *local_steps = Some(k),
            AlgorithmSpec::AcceleratedMbSgd(a) => a.batch_size = Some(k),
            AlgorithmSpec::NoisyMbSgd(_) => {}
            AlgorithmSpec::SoteriaFl(a)
            | AlgorithmSpec::CdpSgd(a)
            | AlgorithmSpec::LdpSgd(a)
            | AlgorithmSpec::LdpSvrg(a) => a.batch_size = Some(k),
        }
    }
    s
}

/// The smallest K App. I's calibration accepts on every silo, ⌊n_i√ε/(2√R)⌋ (0 for
/// algorithms without that calibration). A panel's K below it is raised to it: the paper
/// claims ISRL-DP for its σ² only under that condition (e.g. obesity at ε = 9 with our
/// n ≈ 217 needs K ≥ 32, not the script's 30).
fn min_batch(spec: &AlgorithmSpec, pt: &PanelTrial, rounds: usize, eps: f64) -> usize {
    use crate::algo::Calibration;
    let uses_rule = match spec {
        AlgorithmSpec::MbSgd { calibration, .. } => *calibration == Some(Calibration::Experiment),
        AlgorithmSpec::AcceleratedMbSgd(a) => a.calibration == Some(Calibration::Experiment),
        _ => false,
    };
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
fn mix(words: &[u64]) -> u64 {
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
    pub panel: usize,
    pub trial: usize,
    /// Index into ε (None for a non-private algorithm, trained once).
    pub eps: Option<usize>,
    pub algorithm: usize,
    pub step: f64,
    pub clip: Option<f64>,
    pub rep: usize,
}

/// What one run produced.
#[derive(Debug, Clone, Copy)]
pub struct JobResult {
    pub train_loss: f64,
    pub metric: f64,
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
    pub data: TrialData,
    /// Mean of all silos' training labels (relative RMSE's naive predictor).
    pub y_train_mean: f64,
}

/// Prepares the data of every (panel, trial). The data stream depends on the trial only, so
/// panels that share a partition see the same split.
pub fn prepare(spec: &ReproSpec, data_dir: Option<&Path>) -> crate::Result<Vec<Vec<PanelTrial>>> {
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
    model: &dyn crate::model::Model,
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
pub fn run_job(spec: &ReproSpec, data: &[Vec<PanelTrial>], job: &Job) -> crate::Result<JobResult> {
    let panel = &spec.panels[job.panel];
    let eps = job.eps.map_or(spec.epsilons[0], |e| spec.epsilons[e]);
    let exp = spec.experiment(panel, eps, job.clip);
    let alg = &spec.algorithms[job.algorithm];
    let pt = &data[job.panel][job.trial];
    let k = panel
        .batch_size
        .map(|k| k.max(min_batch(&alg.spec, pt, spec.base.rounds, eps)));
    let algorithm = configure(&alg.spec, k, job.step);
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
        crate::Error::Config { field, reason } => crate::Error::Config {
            field: format!("{} (panel {}, eps {eps}): {field}", alg.label, job.panel),
            reason,
        },
        other => other,
    })?;
    let metric = metric_of(spec.metric, pt.data.model.as_ref(), &run.final_model, pt);
    Ok(JobResult {
        train_loss: run.final_train_loss,
        metric,
    })
}

/// Runs `jobs` in parallel; results in job order.
pub fn run_grid(
    spec: &ReproSpec,
    data: &[Vec<PanelTrial>],
    jobs: &[Job],
    progress: &(dyn Fn(usize, usize) + Sync),
) -> crate::Result<Vec<JobResult>> {
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

/// The grid of the speed target (the official obesity script's one trial at ε = 3):
/// MB-SGD, Local SGD and ISRL-DP MB-SGD with 8 step sizes each and ISRL-DP Local SGD with 5,
/// 100 rounds, M = 3 of 7 silos, K = 30: 29 training runs.
pub fn obesity_speed_grid() -> crate::Result<ReproSpec> {
    let mut s = builtin("lowy-obesity")?;
    s.trials = 1;
    s.repetitions = 1;
    s.epsilons = vec![3.0];
    s.algorithms
        .retain(|a| !matches!(a.spec, AlgorithmSpec::AcceleratedMbSgd(_)));
    Ok(s)
}

/// One row of `summary.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    pub figure: String,
    pub algorithm: String,
    #[serde(rename = "M")]
    pub m: f64,
    /// None for rows that do not depend on ε (data diagnostics).
    pub epsilon: Option<f64>,
    pub metric: String,
    pub mean: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub trials: usize,
}

/// A finished reproduction.
#[derive(Debug, Clone)]
pub struct ReproOutput {
    pub rows: Vec<SummaryRow>,
    pub wall_seconds: f64,
    pub runs: usize,
}

/// The q-quantile of sorted values, linear interpolation (numpy's default).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Mean and 5th/95th percentiles.
pub fn summarize(values: &[f64]) -> (f64, f64, f64) {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    (mean, quantile(&v, 0.05), quantile(&v, 0.95))
}

/// Runs a reproduction. `progress(done, total)` is called as runs finish (from any thread).
pub fn run(
    spec: &ReproSpec,
    data_dir: Option<&Path>,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> crate::Result<ReproOutput> {
    run_checkpointed(spec, data_dir, progress, None)
}

/// [`run`], recording finished runs in (and skipping those already in) `checkpoint`.
pub fn run_checkpointed(
    spec: &ReproSpec,
    data_dir: Option<&Path>,
    progress: &(dyn Fn(usize, usize) + Sync),
    checkpoint: Option<&checkpoint::Checkpoint>,
) -> crate::Result<ReproOutput> {
    spec.validate()?;
    let start = std::time::Instant::now();
    let data = prepare(spec, data_dir)?;
    let all = jobs(spec);
    let results = checkpoint::run_grid(spec, &data, &all, progress, checkpoint)?;
    let mut rows = Vec::new();
    for (p, panel) in spec.panels.iter().enumerate() {
        let n_silos = data[p][0].data.silos.len();
        let m = panel.participation.effective_m(n_silos);
        for (a, alg) in spec.algorithms.iter().enumerate() {
            let eps_list: Vec<Option<usize>> = if alg.spec.is_private() {
                (0..spec.epsilons.len()).map(Some).collect()
            } else {
                vec![None]
            };
            for eps in eps_list {
                let mut values = Vec::with_capacity(spec.trials);
                let mut log_steps = Vec::with_capacity(spec.trials);
                for t in 0..spec.trials {
                    let (value, step) = select(&all, &results, p, t, eps, a);
                    values.push(value);
                    log_steps.push(step.ln());
                }
                let (mean, lo, hi) = summarize(&values);
                let (ls, ls_lo, ls_hi) = summarize(&log_steps);
                let targets: Vec<f64> = match eps {
                    Some(e) => vec![spec.epsilons[e]],
                    None => spec.epsilons.clone(),
                };
                for e in targets {
                    for (metric, mean, lo, hi) in [
                        (spec.metric.name(), mean, lo, hi),
                        ("selected_ln_step", ls, ls_lo, ls_hi),
                    ] {
                        rows.push(SummaryRow {
                            figure: panel.figure.clone(),
                            algorithm: alg.label.clone(),
                            m,
                            epsilon: Some(e),
                            metric: metric.into(),
                            mean,
                            ci_low: lo,
                            ci_high: hi,
                            trials: spec.trials,
                        });
                    }
                }
            }
        }
        // Heterogeneity and the optimum (Newton's method), per trial.
        let opt: Vec<newton::Optimum> = data[p]
            .par_iter()
            .map(|pt| newton::minimize(pt.data.model.as_ref(), &pt.data.silos, 50))
            .collect::<crate::Result<_>>()?;
        for (metric, values) in [
            (
                "v_star_sq",
                opt.iter().map(|o| o.v_star_sq).collect::<Vec<_>>(),
            ),
            (
                "train_loss_at_optimum",
                opt.iter().map(|o| o.value).collect(),
            ),
        ] {
            let (mean, lo, hi) = summarize(&values);
            rows.push(SummaryRow {
                figure: panel.figure.clone(),
                algorithm: "(data)".into(),
                m,
                epsilon: None,
                metric: metric.into(),
                mean,
                ci_low: lo,
                ci_high: hi,
                trials: spec.trials,
            });
        }
    }
    Ok(ReproOutput {
        rows,
        wall_seconds: start.elapsed().as_secs_f64(),
        runs: all.len(),
    })
}

/// The selected grid point of (panel, trial, ε, algorithm): lowest mean training loss over
/// repetitions (non-finite = worst); returns its mean test metric and its step size.
fn select(
    jobs: &[Job],
    results: &[JobResult],
    panel: usize,
    trial: usize,
    eps: Option<usize>,
    algorithm: usize,
) -> (f64, f64) {
    // (step, clip) → (Σ train loss, Σ metric, count)
    let mut points: Vec<((u64, u64), f64, f64, usize)> = Vec::new();
    for (j, r) in jobs.iter().zip(results) {
        if j.panel != panel || j.trial != trial || j.eps != eps || j.algorithm != algorithm {
            continue;
        }
        let key = (j.step.to_bits(), j.clip.map_or(0, f64::to_bits));
        let loss = if r.train_loss.is_finite() {
            r.train_loss
        } else {
            f64::INFINITY
        };
        match points.iter_mut().find(|p| p.0 == key) {
            Some(p) => {
                p.1 += loss;
                p.2 += r.metric;
                p.3 += 1;
            }
            None => points.push((key, loss, r.metric, 1)),
        }
    }
    let best = points
        .iter()
        .min_by(|a, b| (a.1 / a.3 as f64).total_cmp(&(b.1 / b.3 as f64)));
    match best {
        Some(&((step, _), _, m, c)) => (m / c as f64, f64::from_bits(step)),
        None => (f64::NAN, f64::NAN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_specs_parse_and_follow_appendix_i() {
        let m = builtin("lowy-mnist").unwrap();
        assert_eq!(m.epsilons, vec![0.75, 1.5, 3.0, 6.0, 12.0, 18.0]);
        assert_eq!((m.trials, m.repetitions, m.base.rounds), (20, 3, 35));
        let ms: Vec<f64> = m
            .panels
            .iter()
            .map(|p| p.participation.effective_m(25))
            .collect();
        assert_eq!(ms, vec![25.0, 12.0, 18.0]);
        let i = builtin("lowy-insurance").unwrap();
        assert_eq!(i.epsilons, vec![0.125, 0.25, 0.5, 1.0, 2.0, 3.0]);
        assert_eq!(i.base.clips.as_ref().unwrap().len(), 5);
        let o = builtin("lowy-obesity").unwrap();
        assert_eq!(o.epsilons, vec![0.5, 1.0, 3.0, 6.0, 9.0]);
        assert_eq!((o.trials, o.base.rounds), (3, 100));
        // MB-SGD grid: 8 points e^-8..e^2 (the paper's e^-7..e^-1, widened; see the TOML).
        let g = o.algorithms[0].steps.values();
        assert_eq!(g.len(), 8);
        assert!((g[0] - (-8f64).exp()).abs() < 1e-15 && (g[7] - 2f64.exp()).abs() < 1e-12);
        assert!(builtin("nope").is_err());
    }

    #[test]
    fn quantiles_and_seeds() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        // pos = 0.05·4 = 0.2 → 1.2; 0.95·4 = 3.8 → 4.8.
        assert_eq!(summarize(&v), (3.0, 1.2, 4.8));
        assert_eq!(quantile(&[7.0], 0.95), 7.0);
        assert_ne!(mix(&[1, 2]), mix(&[2, 1]));
        assert_eq!(mix(&[1, 2]), mix(&[1, 2]));
    }

    #[test]
    fn bad_specs_name_the_field() {
        let mut s = builtin("lowy-obesity").unwrap();
        s.epsilons = vec![-1.0];
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("epsilons[0]"), "{e}");
        let text = include_str!("../../../../experiments/lowy-obesity.toml")
            .replace("trials = 3", "trials = 0");
        let e = ReproSpec::from_toml(&text, "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("trials"), "{e}");
    }
}
