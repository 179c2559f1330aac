//! SoteriaFL's reproductions (`soteria-a9a`, `soteria-mnist`; [`super::soteria`], Li et al.
//! 2022 App. A) as a [`Reproduction`]: one job per (seed, ε, algorithm), run one after
//! another seed by seed (every (ε, algorithm) of seed 0 first, so an interrupted run leaves
//! whole seeds), each seeded by its coordinates ([`soteria::run_unit`]); the outputs are
//! rewritten after each job. The checkpoint's fingerprint leaves the seed count out and the
//! file is kept after a complete run, so `--trials N --resume` adds seeds.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::checkpoint_file::{config_json, fingerprint, hex};
use super::reproduction::{self, Flag, Hooks, JobContext, Options, Report, Reproduction, RunFacts};
use super::soteria::{self, ALGORITHMS, BandRow, CurveRow, Federation, Plan, PrivacyRow};
use super::soteria_out;

/// The federation: loaded by the reproduction, or lent by a caller that holds it.
enum Fed<'a> {
    Unloaded,
    Owned(Box<Federation>),
    Lent(&'a Federation),
}

/// A SoteriaFL reproduction.
pub struct SoteriaRepro<'a> {
    plan: Plan,
    options: serde_json::Value,
    fed: Fed<'a>,
    privacy: Vec<PrivacyRow>,
    g0: OnceLock<f64>,
}

/// What a SoteriaFL run's tables hold.
pub struct SoteriaSummary {
    /// Mean and spread over seeds per (ε, algorithm, round).
    pub bands: Vec<BandRow>,
    /// Runs summarised.
    pub runs: usize,
}

impl SoteriaRepro<'static> {
    /// Reproduction `id` with `--quick`, `--calibration`, `--clipping`, `--epsilons`,
    /// `--sgd-batch` and `--trials`.
    pub fn new(id: &str, opts: &Options) -> dpfl::Result<Self> {
        use dpfl::algo::soteria::{Clipping, NoiseCalibration};
        let calibration = match opts.calibration.as_deref() {
            None | Some("paper-code") => NoiseCalibration::PaperCode,
            Some("accountant") => NoiseCalibration::Accountant,
            Some("none") => NoiseCalibration::None,
            Some(other) => {
                return Err(dpfl::Error::config(
                    "--calibration",
                    format!("{other:?} is not paper-code, accountant or none"),
                ));
            }
        };
        let clipping = match opts.clipping.as_deref() {
            None | Some("per-record") => Clipping::PerRecord,
            Some("aggregate") => Clipping::AggregateNoGuarantee,
            Some(other) => {
                return Err(dpfl::Error::config(
                    "--clipping",
                    format!("{other:?} is not per-record or aggregate"),
                ));
            }
        };
        let mut plan = Plan::new(id, opts.quick)?.calibrated(calibration, clipping)?;
        if let Some(e) = &opts.epsilons {
            plan.keep_epsilons(e)?;
        }
        if let Some(b) = opts.sgd_batch {
            plan.with_sgd_batch(b)?;
        }
        if let Some(t) = opts.trials()? {
            plan.seeds = t;
        }
        let mut r = SoteriaRepro::from_plan(plan);
        r.options = opts.header(&[
            Flag::Calibration,
            Flag::Clipping,
            Flag::Epsilons,
            Flag::SgdBatch,
        ]);
        Ok(r)
    }

    /// The reproduction of `plan` as it is.
    pub fn from_plan(plan: Plan) -> Self {
        SoteriaRepro {
            plan,
            options: serde_json::json!({}),
            fed: Fed::Unloaded,
            privacy: Vec::new(),
            g0: OnceLock::new(),
        }
    }
}

impl<'a> SoteriaRepro<'a> {
    /// The reproduction of `plan` on the loaded `fed` (no privacy table: [`run`]'s).
    pub fn on(plan: &Plan, fed: &'a Federation) -> Self {
        SoteriaRepro {
            plan: plan.clone(),
            options: serde_json::json!({}),
            fed: Fed::Lent(fed),
            privacy: Vec::new(),
            g0: OnceLock::new(),
        }
    }

    /// The plan as run.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    fn fed(&self) -> dpfl::Result<&Federation> {
        match &self.fed {
            Fed::Owned(f) => Ok(&**f),
            Fed::Lent(f) => Ok(*f),
            Fed::Unloaded => Err(dpfl::Error::data(self.plan.id.clone(), "data not loaded")),
        }
    }

    /// Job `i` as (seed, setting, algorithm).
    fn coordinates(&self, i: usize) -> (usize, usize, usize) {
        let per_seed = self.plan.settings.len() * ALGORITHMS.len();
        (
            i / per_seed,
            i % per_seed / ALGORITHMS.len(),
            i % ALGORITHMS.len(),
        )
    }

    /// The rows of the finished `records`, in output order: setting, algorithm, seed, round.
    pub fn curves(&self, records: &[Option<Vec<CurveRow>>]) -> Vec<CurveRow> {
        let n = self.plan.settings.len() * ALGORITHMS.len();
        let mut rows = Vec::new();
        for slot in 0..n {
            for seed in 0..self.plan.seeds {
                if let Some(Some(r)) = records.get(seed * n + slot) {
                    rows.extend(r.iter().cloned());
                }
            }
        }
        rows
    }

    /// The report of `bands` over `runs` runs.
    fn report_of(&self, plan: &Plan, bands: &[BandRow], runs: usize, wall: f64) -> Report {
        let last = soteria_out::final_bands(plan, bands);
        let mut r = Report::default();
        let json = serde_json::json!({
            "id": plan.id,
            "runs": runs,
            "seeds": plan.seeds,
            "wall_seconds": wall,
            "final": last,
            "privacy": self.privacy,
        });
        if let serde_json::Value::Object(m) = json {
            r.json = m;
        }
        r.lines.push(format!(
            "{}: {} runs ({} seeds) in {:.1} s",
            plan.id, runs, plan.seeds, wall
        ));
        r.lines.push(format!(
            "{:>6} {:<16} {:>10} {:>10} {:>10}  privacy (delta = {})",
            "eps", "algorithm", "utility", "loss", "test acc", plan.delta
        ));
        for b in last {
            let what = soteria::privacy_of(&self.privacy, b.epsilon, &b.algorithm)
                .map_or_else(String::new, |p| p.describe());
            r.lines.push(format!(
                "{:>6} {:<16} {:>10.4} {:>10.4} {:>10.4}  {what}",
                b.epsilon, b.algorithm, b.utility_mean, b.train_loss_mean, b.test_accuracy_mean
            ));
        }
        r
    }
}

/// Runs every (ε, algorithm, seed) of `plan` on `fed` without a checkpoint;
/// `progress(done, total)`. Rows in the order ε, algorithm, seed, round.
pub fn run(
    plan: &Plan,
    fed: &Federation,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> dpfl::Result<Vec<CurveRow>> {
    let r = SoteriaRepro::on(plan, fed);
    let (records, _) = reproduction::run(&r, None, None, &Hooks::progress(progress))?;
    Ok(r.curves(&records))
}

impl Reproduction for SoteriaRepro<'_> {
    type Record = Vec<CurveRow>;
    type Summary = SoteriaSummary;
    const TAKES: &'static [Flag] = &[
        Flag::Trials,
        Flag::Calibration,
        Flag::Clipping,
        Flag::Epsilons,
        Flag::SgdBatch,
        Flag::Rewrite,
        Flag::Resume,
    ];

    fn id(&self) -> &str {
        &self.plan.id
    }

    fn out_name(&self) -> String {
        self.plan.out_name()
    }

    /// The plan without its seed count (`--trials N --resume` adds seeds).
    fn fingerprint(&self) -> dpfl::Result<String> {
        let mut p = self.plan.clone();
        p.seeds = 0;
        fingerprint(&p)
    }

    fn header_options(&self) -> serde_json::Value {
        self.options.clone()
    }

    fn keeps_checkpoint(&self) -> bool {
        true
    }

    fn in_parallel(&self) -> bool {
        false
    }

    fn partial_outputs(&self) -> bool {
        true
    }

    fn provenance(&self) -> dpfl::Result<(Option<u64>, serde_json::Value)> {
        Ok((None, config_json(&self.plan)?))
    }

    /// The data, and what each label delivers from the plan alone (before any training).
    fn load(&mut self, data_dir: Option<&Path>) -> dpfl::Result<()> {
        if let Fed::Unloaded = self.fed {
            self.fed = Fed::Owned(Box::new(soteria::load(&self.plan, data_dir)?));
        }
        self.privacy = soteria::privacy_table(&self.plan, self.fed()?)?;
        Ok(())
    }

    fn jobs(&self) -> Vec<String> {
        let n = self.plan.settings.len() * ALGORITHMS.len() * self.plan.seeds;
        (0..n)
            .map(|i| {
                let (seed, e, a) = self.coordinates(i);
                format!(
                    "eps {} algorithm {} seed {seed}",
                    hex(self.plan.settings[e].0),
                    ALGORITHMS[a]
                )
            })
            .collect()
    }

    fn run_job(&self, job: usize, _: &JobContext) -> dpfl::Result<Vec<CurveRow>> {
        let (seed, e, a) = self.coordinates(job);
        let fed = self.fed()?;
        let g0 = match self.g0.get() {
            Some(&g) => g,
            None => {
                let g = soteria::initial_grad_norm_sq(&self.plan, fed)?;
                let _ = self.g0.set(g);
                g
            }
        };
        soteria::run_unit(&self.plan, fed, g0, e, a, seed)
    }

    fn summarise(
        &self,
        records: &[Option<Vec<CurveRow>>],
        dir: &Path,
    ) -> dpfl::Result<(SoteriaSummary, Vec<PathBuf>)> {
        let rows = self.curves(records);
        let bands = soteria::bands(&rows);
        let files = soteria_out::write_tables(&self.plan, &rows, &bands, &self.privacy, dir)?;
        let runs = records.iter().filter(|r| r.is_some()).count();
        Ok((SoteriaSummary { bands, runs }, files))
    }

    fn draw(&self, s: &SoteriaSummary, dir: &Path) -> dpfl::Result<Vec<PathBuf>> {
        soteria_out::draw(&self.plan, &s.bands, &self.privacy, dir)
    }

    fn report(&self, s: &SoteriaSummary, facts: &RunFacts) -> Report {
        self.report_of(&self.plan, &s.bands, s.runs, facts.wall_seconds)
    }

    /// The outputs of the finished reproduction in `dir` from its `curves.csv` (kept as it
    /// is), with the privacy columns; the plan and data give the certificates.
    fn rewrite(&mut self, data_dir: Option<&Path>, dir: &Path) -> dpfl::Result<Report> {
        let start = std::time::Instant::now();
        let rows = soteria_out::read_curves(&dir.join("curves.csv"))?;
        self.plan.seeds = rows.iter().map(|r| r.seed + 1).max().unwrap_or(0);
        self.load(data_dir)?;
        let bands = soteria::bands(&rows);
        let files = soteria_out::write(&self.plan, &rows, &bands, &self.privacy, dir)?;
        let runs = rows
            .iter()
            .map(|r| (r.epsilon.to_bits(), &r.algorithm, r.seed))
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let mut r = self.report_of(&self.plan, &bands, runs, start.elapsed().as_secs_f64());
        r.files = files;
        Ok(r)
    }
}
