//! A reproduction's TOML spec (`experiments/lowy-*.toml`, embedded in the binary): data,
//! model, ε grid, panels and per-algorithm step-size grids, checked once, and the
//! [`ExperimentSpec`] of one panel at one ε.

use serde::{Deserialize, Serialize};

use crate::experiment::{DataSpec, DeltaSpec, ExperimentSpec, PrivacySpec};
use dpfl::algo::AlgorithmSpec;
use dpfl::data::partition::PartitionSpec;
use dpfl::model::{ModelSpec, Projection};
use dpfl::round::Participation;

/// The reproductions shipped with dpfl: (id, TOML text).
pub const BUILTIN: [(&str, &str); 4] = [
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
    (
        "lowy-obesity-certified",
        include_str!("../../../../experiments/lowy-obesity-certified.toml"),
    ),
];

/// The built-in reproduction `id`, parsed.
pub fn builtin(id: &str) -> dpfl::Result<ReproSpec> {
    let (_, text) = BUILTIN.iter().find(|(i, _)| *i == id).ok_or_else(|| {
        dpfl::Error::config(
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
    /// The name in `summary.csv` (`test_error`, `relative_rmse`).
    pub fn name(self) -> &'static str {
        match self {
            ReproMetric::TestError => "test_error",
            ReproMetric::RelativeRmse => "relative_rmse",
        }
    }
}

/// The most step sizes one grid may try: far beyond any figure's (the papers try 8), small
/// enough to list at once (issue 31: a grid of 10⁹ points aborted allocating them).
pub const MAX_GRID_POINTS: usize = 10_000;

/// The most training runs one reproduction may hold (panels × trials × ε values × clips ×
/// grid points × repetitions), checked before the run list is allocated.
pub const MAX_RUNS: usize = 10_000_000;

/// exp(linspace(from, to, points)): the paper's log-spaced grids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogGrid {
    /// ln of the first value.
    pub from: f64,
    /// ln of the last value.
    pub to: f64,
    /// The number of values.
    pub points: usize,
}

impl LogGrid {
    /// The grid's values, e^from … e^to, log-spaced.
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
    /// The name in the outputs.
    pub label: String,
    /// The algorithm; its step size is replaced by each grid point, and its batch size (or
    /// number of local steps) by the panel's K when the panel gives one.
    pub spec: AlgorithmSpec,
    /// The step sizes η tried.
    pub steps: LogGrid,
    /// Step grid for small ε (ε ≤ `small_epsilon`), as App. I.3 tunes Local SGD further.
    #[serde(default)]
    pub small_eps_steps: Option<LogGrid>,
    /// The ε at or below which `small_eps_steps` applies.
    #[serde(default)]
    pub small_epsilon: Option<f64>,
}

/// Everything except the algorithms and ε: the common set-up.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseSpec {
    /// R, rounds per run.
    pub rounds: usize,
    /// The data set and its partition.
    pub data: DataSpec,
    /// The model all algorithms train.
    pub model: ModelSpec,
    /// Every silo's δ (the paper: 1/n²).
    pub delta: DeltaSpec,
    /// L = factor · max‖x‖ (logistic/softmax); without it L is the clip threshold.
    #[serde(default)]
    pub lipschitz_from_data: Option<f64>,
    /// The set W iterates are projected onto.
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
    /// Which silos take part each round (the paper's M).
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
    /// Trials instead of the spec's.
    #[serde(default)]
    pub trials: Option<usize>,
    /// Runs per grid point instead of the spec's.
    #[serde(default)]
    pub repetitions: Option<usize>,
    /// ε values instead of the spec's.
    #[serde(default)]
    pub epsilons: Option<Vec<f64>>,
    /// Panels to keep, by index.
    #[serde(default)]
    pub panels: Option<Vec<usize>>,
    /// Grid points per algorithm (same range).
    #[serde(default)]
    pub step_points: Option<usize>,
    /// Clip thresholds instead of the spec's.
    #[serde(default)]
    pub clips: Option<Vec<f64>>,
    /// Rounds instead of the spec's.
    #[serde(default)]
    pub rounds: Option<usize>,
}

/// A reproduction, as read from TOML.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReproSpec {
    /// The reproduction's id (`lowy-obesity`, …), the name `dpfl reproduce` takes.
    pub id: String,
    /// The title over its figures.
    pub title: String,
    /// What the figures plot and the selection reports.
    pub metric: ReproMetric,
    /// The master seed: trial data, participation and noise derive from it.
    pub seed: u64,
    /// Trials, each with a fresh draw of the data.
    pub trials: usize,
    /// Runs per grid point (the paper: 3).
    pub repetitions: usize,
    /// The ε values of the x axis (every silo's budget).
    pub epsilons: Vec<f64>,
    /// The set-up every panel shares.
    pub base: BaseSpec,
    /// The panels, each a setting of N, M and K.
    pub panels: Vec<PanelSpec>,
    /// The algorithms, each with its step-size grid.
    pub algorithms: Vec<GridAlgorithm>,
    /// The reduced settings of `--quick`.
    #[serde(default)]
    pub quick: QuickSpec,
    /// A summary value that is not finite (every grid point of an algorithm diverged) is an
    /// error (exit code 1) unless this is set. Single diverging grid points are expected and
    /// rank last in the selection.
    #[serde(default)]
    pub expect_divergence: bool,
    /// `--quick`: each point's certified ε by RDP alone, without the PLD and the lower bound
    /// (at the paper's large-ε noise those take minutes per point, too slow for a smoke run).
    #[serde(skip)]
    pub rdp_only: bool,
}

impl ReproSpec {
    /// Parses and checks a reproduction TOML; errors name `origin` and the field.
    pub fn from_toml(text: &str, origin: &str) -> dpfl::Result<Self> {
        let spec: ReproSpec = crate::experiment::parse_toml(text, origin)?;
        spec.validate()?;
        Ok(spec)
    }

    /// Checks the fields that can be checked without data.
    pub fn validate(&self) -> dpfl::Result<()> {
        let positive = |field: &str, v: usize| {
            if v == 0 {
                Err(dpfl::Error::config(field, "must be at least 1"))
            } else {
                Ok(())
            }
        };
        positive("trials", self.trials)?;
        positive("repetitions", self.repetitions)?;
        positive("base.rounds", self.base.rounds)?;
        if self.epsilons.is_empty() {
            return Err(dpfl::Error::config("epsilons", "name at least one ε"));
        }
        for (i, &e) in self.epsilons.iter().enumerate() {
            dpfl_privacy::Epsilon::new(e)
                .map_err(|err| dpfl::Error::config(format!("epsilons[{i}]"), err.to_string()))?;
        }
        if self.panels.is_empty() {
            return Err(dpfl::Error::config("panels", "name at least one panel"));
        }
        if self.algorithms.is_empty() {
            return Err(dpfl::Error::config(
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
                    return Err(dpfl::Error::config(
                        format!("algorithms[{i}].{name}"),
                        "needs finite from/to and at least one point",
                    ));
                }
                if let Some(g) = g.filter(|g| g.points > MAX_GRID_POINTS) {
                    return Err(dpfl::Error::config(
                        format!("algorithms[{i}].{name}.points"),
                        format!("{} points, above the limit of {MAX_GRID_POINTS}", g.points),
                    ));
                }
            }
        }
        match self.runs() {
            Some(n) if n <= MAX_RUNS => {}
            n => {
                return Err(dpfl::Error::config(
                    "panels, trials, repetitions, epsilons, base.clips, algorithms[].steps",
                    format!(
                        "{} panel(s) x {} trial(s) x {} repetition(s) x every algorithm's \
                         epsilons, clips and step sizes make {} runs, above the limit of \
                         {MAX_RUNS}",
                        self.panels.len(),
                        self.trials,
                        self.repetitions,
                        n.map_or("more than 2^64".into(), |n| n.to_string())
                    ),
                ));
            }
        }
        if let Some(c) = &self.base.clips
            && (c.is_empty() || c.iter().any(|v| !(v.is_finite() && *v > 0.0)))
        {
            return Err(dpfl::Error::config(
                "base.clips",
                "must be a non-empty list of finite positive thresholds",
            ));
        }
        if let Some(p) = &self.quick.panels
            && let Some(&bad) = p.iter().find(|&&i| i >= self.panels.len())
        {
            return Err(dpfl::Error::config(
                "quick.panels",
                format!(
                    "panel index {bad} out of range (have {})",
                    self.panels.len()
                ),
            ));
        }
        Ok(())
    }

    /// The number of training runs (`reproduce::grid::jobs`' length), `None` past 2^64.
    pub fn runs(&self) -> Option<usize> {
        let clips = self.base.clips.as_ref().map_or(1, Vec::len);
        let mut per_trial = 0usize;
        for a in &self.algorithms {
            let eps: Vec<Option<f64>> = if a.spec.is_private() {
                self.epsilons.iter().copied().map(Some).collect()
            } else {
                vec![None]
            };
            for e in eps {
                let grid = match (e, &a.small_eps_steps, a.small_epsilon) {
                    (Some(e), Some(g), Some(t)) if e <= t => g,
                    _ => &a.steps,
                };
                per_trial = per_trial.checked_add(grid.points.checked_mul(clips)?)?;
            }
        }
        per_trial
            .checked_mul(self.repetitions)?
            .checked_mul(self.trials)?
            .checked_mul(self.panels.len())
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
        s.rdp_only = true;
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
    pub(crate) fn experiment(
        &self,
        panel: &PanelSpec,
        epsilon: f64,
        clip: Option<f64>,
    ) -> ExperimentSpec {
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
                epsilon: Some(epsilon),
                noise_multiplier: None,
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

/// The grid of the speed target (the official obesity script's one trial at ε = 3):
/// MB-SGD, Local SGD and ISRL-DP MB-SGD with 8 step sizes each and ISRL-DP Local SGD with 5,
/// 100 rounds, M = 3 of 7 silos, K = 30: 29 training runs.
pub fn obesity_speed_grid() -> dpfl::Result<ReproSpec> {
    let mut s = builtin("lowy-obesity")?;
    s.trials = 1;
    s.repetitions = 1;
    s.epsilons = vec![3.0];
    s.algorithms
        .retain(|a| !matches!(a.spec, AlgorithmSpec::AcceleratedMbSgd(_)));
    Ok(s)
}
