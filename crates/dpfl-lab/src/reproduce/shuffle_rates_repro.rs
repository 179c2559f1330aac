//! `shuffle-rates` ([`super::shuffle_rates`], Cheu et al. 2022's implied experiment) as a
//! [`Reproduction`]: one job per (algorithm, n, seed, MB-SGD step), run in parallel, each
//! seeded by its coordinates; summarised into runs.csv (the tuned steps' runs), summary.csv
//! (bands, slopes, who beats local DP, what was not run) and pvec_noise.csv, drawn as one
//! log–log figure. A run the library refuses is a record too (listed as not run).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::checkpoint::{exact, exact_opt};
use super::checkpoint_file::{config_json, fingerprint, hex};
use super::reproduction::{self, Flag, Hooks, JobContext, Options, Report, Reproduction, RunFacts};
use super::shuffle_rates::{self as sr, ALGORITHMS, Band, DESIGN_EXPONENT, Plan, RunRow, is_mbsgd};
use super::shuffle_rates_out as out;

/// What one job left.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RunRecord {
    /// The run's facts (its coordinates are the job's).
    Ran {
        /// N.
        silos: usize,
        /// R.
        rounds: usize,
        /// ‖w − w*‖²/(2d) of the output.
        #[serde(with = "exact")]
        excess_loss: f64,
        /// [`RunRow::certified_epsilon`].
        #[serde(with = "exact_opt")]
        certified_epsilon: Option<f64>,
        /// [`RunRow::epsilon_lower_bound`].
        #[serde(with = "exact_opt")]
        epsilon_lower_bound: Option<f64>,
    },
    /// The algorithm is not run at this n (local DP beyond its largest n).
    NotAtThisN,
    /// The library refused the run: "algorithm at n = …: why".
    Refused(String),
}

/// The `shuffle-rates` reproduction.
pub struct ShuffleRates {
    plan: Plan,
    quick: bool,
    options: serde_json::Value,
    jobs: Vec<(usize, usize, usize, f64)>,
}

/// What its tables hold.
pub struct ShuffleSummary {
    /// The runs of the tuned steps (and the presets').
    pub runs: Vec<RunRow>,
    /// Mean and percentiles per (algorithm, n).
    pub bands: Vec<Band>,
    /// Fitted slope and Table 1's exponent per algorithm.
    pub slopes: Vec<(String, Option<f64>, Option<f64>)>,
    /// The runs the library refused.
    pub refused: Vec<String>,
}

impl ShuffleRates {
    /// The reproduction with `--quick` and `--trials` (seeds).
    pub fn new(opts: &Options) -> dpfl::Result<Self> {
        let mut plan = Plan::new(opts.quick);
        if let Some(t) = opts.trials()? {
            plan.seeds = t;
        }
        let mut r = ShuffleRates::from_plan(plan, opts.quick);
        r.options = opts.header(&[Flag::Trials]);
        Ok(r)
    }

    /// The reproduction of `plan` (`quick`: the `--quick` noise table).
    pub fn from_plan(plan: Plan, quick: bool) -> Self {
        let jobs = sr::job_list(&plan);
        ShuffleRates {
            plan,
            quick,
            options: serde_json::json!({}),
            jobs,
        }
    }

    /// The tuned runs and the refusals of the finished `records`.
    pub fn runs(&self, records: &[Option<RunRecord>]) -> (Vec<RunRow>, Vec<String>) {
        let mut rows = Vec::new();
        let mut refused: Vec<String> = Vec::new();
        for (&(a, n, seed, step), r) in self.jobs.iter().zip(records) {
            match r {
                Some(RunRecord::Ran {
                    silos,
                    rounds,
                    excess_loss,
                    certified_epsilon,
                    epsilon_lower_bound,
                }) => rows.push(RunRow {
                    algorithm: ALGORITHMS[a].into(),
                    n,
                    seed,
                    silos: *silos,
                    rounds: *rounds,
                    step_size: is_mbsgd(a).then_some(step),
                    excess_loss: *excess_loss,
                    certified_epsilon: *certified_epsilon,
                    epsilon_lower_bound: *epsilon_lower_bound,
                }),
                Some(RunRecord::Refused(e)) if !refused.contains(e) => refused.push(e.clone()),
                Some(RunRecord::Refused(_) | RunRecord::NotAtThisN) | None => {}
            }
        }
        (sr::tuned(rows), refused)
    }
}

/// Every (algorithm, n, seed) of `plan`, in parallel, without a checkpoint;
/// `progress(done, total)`: the runs of the tuned steps, and the runs the library refused
/// ("algorithm at n: reason").
pub fn run(
    plan: &Plan,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> dpfl::Result<(Vec<RunRow>, Vec<String>)> {
    let r = ShuffleRates::from_plan(plan.clone(), false);
    let (records, _) = reproduction::run(&r, None, None, &Hooks::progress(progress))?;
    Ok(r.runs(&records))
}

impl Reproduction for ShuffleRates {
    type Record = RunRecord;
    type Summary = ShuffleSummary;
    const TAKES: &'static [Flag] = &[Flag::Trials, Flag::Resume];

    fn id(&self) -> &str {
        &self.plan.id
    }

    fn out_name(&self) -> String {
        reproduction::quick_name(&self.plan.id, self.quick)
    }

    fn fingerprint(&self) -> dpfl::Result<String> {
        fingerprint(&self.plan)
    }

    fn header_options(&self) -> serde_json::Value {
        self.options.clone()
    }

    fn keeps_checkpoint(&self) -> bool {
        false
    }

    fn in_parallel(&self) -> bool {
        true
    }

    fn provenance(&self) -> dpfl::Result<(Option<u64>, serde_json::Value)> {
        Ok((None, config_json(&self.plan)?))
    }

    fn loading(&self) -> &'static str {
        "training"
    }

    /// The data are drawn per run.
    fn load(&mut self, _: Option<&Path>) -> dpfl::Result<()> {
        Ok(())
    }

    fn jobs(&self) -> Vec<String> {
        self.jobs
            .iter()
            .map(|&(a, n, seed, step)| {
                format!("{} n {n} seed {seed} step {}", ALGORITHMS[a], hex(step))
            })
            .collect()
    }

    fn run_job(&self, job: usize, _: &JobContext) -> dpfl::Result<RunRecord> {
        let (a, n, seed, step) = self.jobs[job];
        Ok(match sr::run_one(&self.plan, a, n, seed, step) {
            Ok(Some(r)) => RunRecord::Ran {
                silos: r.silos,
                rounds: r.rounds,
                excess_loss: r.excess_loss,
                certified_epsilon: r.certified_epsilon,
                epsilon_lower_bound: r.epsilon_lower_bound,
            },
            Ok(None) => RunRecord::NotAtThisN,
            Err(e) => RunRecord::Refused(format!("{} at n = {n}: {e}", ALGORITHMS[a])),
        })
    }

    fn summarise(
        &self,
        records: &[Option<RunRecord>],
        dir: &Path,
    ) -> dpfl::Result<(ShuffleSummary, Vec<PathBuf>)> {
        let (runs, refused) = self.runs(records);
        let bands = sr::bands(&runs);
        let slopes = sr::slopes(&bands);
        let noise = out::pvec_noise_rows(if self.quick { 1_000 } else { 100_000 })?;
        let files = out::write_tables(&runs, &bands, &slopes, &noise, &refused, dir)?;
        Ok((
            ShuffleSummary {
                runs,
                bands,
                slopes,
                refused,
            },
            files,
        ))
    }

    fn draw(&self, s: &ShuffleSummary, dir: &Path) -> dpfl::Result<Vec<PathBuf>> {
        out::draw(&self.plan, &s.bands, &s.slopes, dir)
    }

    fn report(&self, s: &ShuffleSummary, facts: &RunFacts) -> Report {
        let mut r = Report::default();
        let json = serde_json::json!({
            "id": self.plan.id,
            "runs": s.runs.len(),
            "wall_seconds": facts.wall_seconds,
            "slopes": s.slopes,
            "first_below_local_dp": sr::first_beats_local(&s.bands),
            "not_run": s.refused,
        });
        if let serde_json::Value::Object(m) = json {
            r.json = m;
        }
        r.lines.push(format!(
            "{}: {} runs in {:.1} s",
            self.plan.id,
            s.runs.len(),
            facts.wall_seconds
        ));
        for (i, (a, fit, theory)) in s.slopes.iter().enumerate() {
            r.lines.push(format!(
                "  {a}: fitted slope {fit:.3?}, design {}, Table 1 exponent {theory:?}",
                DESIGN_EXPONENT.get(i).copied().unwrap_or("")
            ));
        }
        for (a, n) in sr::first_beats_local(&s.bands) {
            r.lines.push(format!(
                "  {a} below local DP: {}",
                n.map_or("at no n".into(), |n| format!("from n = {n}"))
            ));
        }
        for why in &s.refused {
            r.lines.push(format!("  not run: {why}"));
        }
        r
    }

    fn rewrite(&mut self, _: Option<&Path>, _: &Path) -> dpfl::Result<Report> {
        Err(dpfl::Error::config(
            "--rewrite",
            "shuffle-rates does not take it (its runs.csv carries each run's certificate)",
        ))
    }
}
