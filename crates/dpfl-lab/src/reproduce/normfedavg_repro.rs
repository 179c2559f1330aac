//! DP-NormFedAvg's reproductions (`normfedavg-fmnist-*`; [`super::normfedavg`], Das et al.
//! §6) as a [`Reproduction`]: one job per (algorithm, seed), run one after another, each
//! through `Simulator::drive` with the run in flight saved after every round
//! ([`super::normfedavg_state`]), so an interruption loses at most one round. A diverged run
//! is a result (recorded with its rows so far and why), not a fault. The checkpoint's
//! fingerprint leaves the seeds out and the file is kept after a complete run, so `--trials N
//! --resume` adds seeds; any other change (ID, `--quick`, `--rounds`, `--momentum`,
//! `--step-decay`, `--algorithms`, the network's arithmetic) is refused.

use std::path::{Path, PathBuf};

use super::normfedavg::{
    self as nfa, Outcome, Plan, RoundRow, Seeded, SummaryRow, not_run_privacy, privacy_of_run,
    seeded, subset,
};
use super::normfedavg_state::{InFlight, RunRows, RunState};
use super::privacy::{self, RunPrivacy};
use super::reproduction::{self, Flag, Hooks, JobContext, Options, Report, Reproduction, RunFacts};
use dpfl::algo::normfedavg::build as build_wing;
use dpfl::algo::wing::Wing;
use dpfl::data::Dataset;
use dpfl::run::{Finished, Ledgers, OnDiverged, RunOptions};
use dpfl::sim::{Participation, Simulator};

/// The data every run reads: the plan's subsets of the training and test sets.
struct Sets {
    train: Dataset,
    test: Dataset,
    loss: Dataset,
    classes: usize,
}

/// What an algorithm's first seed's build says: its calibration and privacy, or why it cannot
/// be built.
enum Meta {
    Built {
        calibration: String,
        privacy: RunPrivacy,
    },
    NotRun {
        why: String,
        privacy: RunPrivacy,
    },
}

/// A DP-NormFedAvg reproduction.
pub struct NormFedAvgRepro {
    plan: Plan,
    quick: bool,
    options: serde_json::Value,
    config: serde_json::Value,
    sets: Option<Sets>,
    meta: Vec<Meta>,
    jobs: Vec<(usize, u64)>,
}

impl NormFedAvgRepro {
    /// Reproduction `id` with `--quick`, `--rounds`, `--momentum`, `--step-decay`,
    /// `--algorithms` and `--trials` (seeds 1, 2, … N).
    pub fn new(id: &str, opts: &Options) -> dpfl::Result<Self> {
        let mut plan = nfa::plan(id, opts.quick)?;
        if let Some(r) = opts.rounds {
            if r == 0 {
                return Err(dpfl::Error::config("--rounds", "must be >= 1"));
            }
            plan.rounds = r;
        }
        super::normfedavg_local::set_local_training(&mut plan, opts.momentum, opts.step_decay)?;
        if let Some(a) = &opts.algorithms {
            super::normfedavg_local::keep_algorithms(&mut plan, a)?;
        }
        if let Some(n) = opts.trials()? {
            plan.seeds = (1..=n as u64).collect();
        }
        let mut config = serde_json::json!({
            "id": id, "quick": opts.quick, "seeds": plan.seeds, "rounds": plan.rounds,
        });
        // Only when set, so a default run's provenance keeps its old keys.
        if let Some(m) = opts.momentum {
            config["momentum"] = m.into();
        }
        if let Some(q) = opts.step_decay {
            config["step_decay"] = q.into();
        }
        if let Some(a) = &opts.algorithms {
            config["algorithms"] = a.clone().into();
        }
        let mut r = NormFedAvgRepro::from_plan(plan);
        r.quick = opts.quick;
        r.config = config;
        r.options = opts.header(&[
            Flag::Rounds,
            Flag::Momentum,
            Flag::StepDecay,
            Flag::Algorithms,
        ]);
        Ok(r)
    }

    /// The reproduction of `plan` as it is (data loaded by [`Reproduction::load`]).
    pub fn from_plan(plan: Plan) -> Self {
        let config = serde_json::json!({"id": plan.id, "seeds": plan.seeds, "rounds": plan.rounds});
        NormFedAvgRepro {
            plan,
            quick: false,
            options: serde_json::json!({}),
            config,
            sets: None,
            meta: Vec::new(),
            jobs: Vec::new(),
        }
    }

    /// The reproduction of `plan` on the given training and test sets.
    pub fn on(plan: &Plan, train: &Dataset, test: &Dataset) -> dpfl::Result<Self> {
        let mut r = NormFedAvgRepro::from_plan(plan.clone());
        r.prepare(train, test)?;
        Ok(r)
    }

    /// The subsets, each algorithm's build at the first seed, and the jobs: every seed of
    /// each algorithm that can be built.
    fn prepare(&mut self, train: &Dataset, test: &Dataset) -> dpfl::Result<()> {
        let plan = &self.plan;
        let train = subset(train, plan.train_rows, 0)?;
        let test = subset(test, plan.test_rows, 0)?;
        let loss = subset(&train, Some(plan.loss_rows), 2)?;
        let classes = train.target().num_classes().unwrap_or(0);
        let first = plan.seeds.first().copied().unwrap_or(1);
        let ctx = seeded(plan, &train, classes, first)?.ctx;
        self.meta.clear();
        self.jobs.clear();
        for (a, (_, spec)) in plan.algorithms.iter().enumerate() {
            match build_wing(&ctx, spec) {
                Ok(built) => {
                    self.meta.push(Meta::Built {
                        calibration: built.calibration[0].formula.clone(),
                        privacy: privacy_of_run(plan, spec, &built.calibration),
                    });
                    self.jobs.extend(plan.seeds.iter().map(|&s| (a, s)));
                }
                Err(e) => self.meta.push(Meta::NotRun {
                    why: e.to_string(),
                    privacy: not_run_privacy(plan, spec, &e.to_string()),
                }),
            }
        }
        self.sets = Some(Sets {
            train,
            test,
            loss,
            classes,
        });
        Ok(())
    }

    /// The plan as run.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The curves and table of the finished `records` (wall time left at 0).
    pub fn outcome(&self, records: &[Option<RunRows>]) -> Outcome {
        let plan = &self.plan;
        let mut out = Outcome {
            id: plan.id.clone(),
            rounds_run: plan.rounds,
            ..Default::default()
        };
        for (a, ((label, _), meta)) in plan.algorithms.iter().zip(&self.meta).enumerate() {
            match meta {
                Meta::NotRun { why, privacy } => {
                    out.privacy.push((label.clone(), privacy.clone()));
                    out.not_run.push((label.clone(), why.clone()));
                    continue;
                }
                Meta::Built {
                    calibration,
                    privacy,
                } => {
                    out.calibration.push((label.clone(), calibration.clone()));
                    out.privacy.push((label.clone(), privacy.clone()));
                }
            }
            let mut finals = Vec::new();
            let mut diverged = Vec::new();
            let mut bits_per_coordinate = f64::NAN;
            for (&(_, seed), run) in self.jobs.iter().zip(records).filter(|(j, _)| j.0 == a) {
                let Some(run) = run else { continue };
                if run.bits_per_coordinate.is_finite() {
                    bits_per_coordinate = run.bits_per_coordinate;
                }
                if let Some(why) = &run.stopped {
                    diverged.push(format!("seed {seed}: {why}"));
                } else {
                    let tail = &run.rows[run.rows.len().saturating_sub(5)..];
                    finals.push(
                        tail.iter().map(|r| r.test_error).sum::<f64>() / tail.len().max(1) as f64,
                    );
                }
                out.rounds.extend(run.rows.iter().cloned());
            }
            if finals.len() + diverged.len() == plan.seeds.len() {
                let n = finals.len() as f64;
                let mean = finals.iter().sum::<f64>() / n;
                let var =
                    finals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
                out.summary.push(SummaryRow {
                    algorithm: label.clone(),
                    bits_per_coordinate,
                    mean,
                    std: if finals.is_empty() {
                        f64::NAN
                    } else {
                        var.sqrt()
                    },
                    seeds: finals.len(),
                    diverged,
                });
            }
        }
        out
    }

    fn sets(&self) -> dpfl::Result<&Sets> {
        self.sets
            .as_ref()
            .ok_or_else(|| dpfl::Error::data(self.plan.id.clone(), "data not loaded"))
    }
}

/// Runs every algorithm of `plan` for every seed on the given training and test sets, without
/// a checkpoint.
pub fn run(plan: &Plan, train: &Dataset, test: &Dataset) -> dpfl::Result<Outcome> {
    let start = std::time::Instant::now();
    let r = NormFedAvgRepro::on(plan, train, test)?;
    let (records, _) = reproduction::run(&r, None, None, &Hooks::progress(&|_, _| {}))?;
    let mut out = r.outcome(&records);
    out.wall_seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

/// [`run`] with the checkpoint in `dir` (opened with `resume`): finished runs are taken from
/// it, the run in flight continues from its last saved round, and every round is saved.
/// `round(job, rounds done, rounds)` is called after each round is saved (progress; an error
/// stops the reproduction there, as an interruption would).
pub fn run_checkpointed(
    plan: &Plan,
    train: &Dataset,
    test: &Dataset,
    dir: &Path,
    resume: bool,
    round: &(dyn Fn(&str, usize, usize) -> dpfl::Result<()> + Sync),
) -> dpfl::Result<Outcome> {
    let start = std::time::Instant::now();
    let r = NormFedAvgRepro::on(plan, train, test)?;
    let checkpoint = reproduction::open_checkpoint(&r, dir, resume)?;
    let hooks = Hooks {
        progress: &|_, _| {},
        round,
        note: &|_| {},
    };
    let (records, _) = reproduction::run(&r, Some(&checkpoint), Some(dir), &hooks)?;
    let mut out = r.outcome(&records);
    out.wall_seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

/// What each algorithm's label delivers ([`super::privacy`]), one line each.
fn privacy_lines(id: &str, privacy: &[(String, RunPrivacy)]) -> Vec<String> {
    let mut lines = vec![format!(
        "{id}: privacy (the run's delta per algorithm in privacy.csv)"
    )];
    for (a, p) in privacy {
        let lower = p.epsilon_lower_bound.map_or_else(String::new, |l| {
            format!("; true epsilon >= {}", privacy::fmt_epsilon(l))
        });
        if p.labelled_epsilon.is_some() {
            lines.push(format!(
                "  {a}: {} at delta = {:.3e}{lower}",
                p.describe(),
                p.delta
            ));
        } else {
            lines.push(format!("  {a}: {}", p.describe()));
        }
    }
    lines
}

impl Reproduction for NormFedAvgRepro {
    type Record = RunRows;
    type Summary = Outcome;
    const TAKES: &'static [Flag] = &[
        Flag::Trials,
        Flag::Rounds,
        Flag::Momentum,
        Flag::StepDecay,
        Flag::Algorithms,
        Flag::Rewrite,
        Flag::Resume,
    ];

    fn id(&self) -> &str {
        &self.plan.id
    }

    fn out_name(&self) -> String {
        reproduction::quick_name(&self.plan.id, self.quick)
    }

    /// The plan without its seeds ([`Plan::fingerprint`]).
    fn fingerprint(&self) -> dpfl::Result<String> {
        self.plan.fingerprint()
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

    fn provenance(&self) -> dpfl::Result<(Option<u64>, serde_json::Value)> {
        Ok((None, self.config.clone()))
    }

    fn load(&mut self, data_dir: Option<&Path>) -> dpfl::Result<()> {
        if self.sets.is_none() {
            let (train, test) = nfa::load_fmnist(data_dir)?;
            self.prepare(&train, &test)?;
        }
        Ok(())
    }

    fn jobs(&self) -> Vec<String> {
        self.jobs
            .iter()
            .map(|&(a, seed)| format!("{} seed {seed}", self.plan.algorithms[a].0))
            .collect()
    }

    fn run_job(&self, job: usize, ctx: &JobContext) -> dpfl::Result<RunRows> {
        let plan = &self.plan;
        let sets = self.sets()?;
        let (a, seed) = self.jobs[job];
        let (label, spec) = &plan.algorithms[a];
        let Seeded {
            silos,
            net,
            d,
            ctx: build,
        } = seeded(plan, &sets.train, sets.classes, seed)?;
        let built = build_wing(&build, spec)?;
        let fixed = Participation::Fixed {
            m: plan.participants,
        };
        let opts = RunOptions::seeded(fixed, Some(seed), Ledgers::Record);
        let mut sim = Simulator::start(&silos, built, &build, &spec.requirements(), opts)?;
        let mut run = RunRows {
            rows: Vec::new(),
            bits_per_coordinate: f64::NAN,
            stopped: None,
        };
        let state = ctx
            .dir
            .map(|dir| Ok::<_, dpfl::Error>(RunState::new(dir, &plan.fingerprint()?)))
            .transpose()?;
        let in_flight = state
            .as_ref()
            .map(|s| s.load(label, seed))
            .transpose()?
            .flatten();
        if let Some(f) = in_flight.filter(|f| f.done.rows.len() < plan.rounds) {
            sim.restore(f.sim)?;
            run = f.done;
        }
        let mut bits = run.rows.last().map_or(0.0, |r| r.bits_per_silo);
        let job_name = format!("{label}, seed {seed}");
        // A diverged run is a result (the noise overwhelms the step size), not a fault: it is
        // recorded with its rows so far and the reproduction goes on with the next run.
        let finished = sim.drive(plan.rounds, OnDiverged::Stop, |sim, round, report| {
            let k = round - 1;
            if report.participants > 0 {
                let per = report.message_bits as f64 / report.participants as f64;
                bits += per;
                run.bits_per_coordinate = per / d as f64;
            }
            let w = sim.output();
            run.rows.push(RoundRow {
                algorithm: label.clone(),
                seed,
                round: k + 1,
                train_loss: net.evaluate(&w, &sets.loss).0,
                test_error: net.evaluate(&w, &sets.test).1,
                bits_per_silo: bits,
            });
            if let Some(s) = &state
                && k + 1 < plan.rounds
            {
                s.save(&InFlight {
                    algorithm: label.clone(),
                    seed,
                    done: run.clone(),
                    sim: sim.snapshot(),
                })?;
            }
            (ctx.round)(&job_name, k + 1, plan.rounds)
        })?;
        if let Finished::Diverged { round, why } = finished {
            run.stopped = Some(format!(
                "diverged in round {round} of {} (rows end at round {}): {why}",
                plan.rounds,
                round - 1
            ));
        }
        Ok(run)
    }

    /// The run's line is in the checkpoint: its in-flight state goes.
    fn recorded(&self, _: usize, ctx: &JobContext) -> dpfl::Result<()> {
        match ctx.dir {
            Some(dir) => RunState::new(dir, &self.plan.fingerprint()?).clear(),
            None => Ok(()),
        }
    }

    fn summarise(
        &self,
        records: &[Option<RunRows>],
        dir: &Path,
    ) -> dpfl::Result<(Outcome, Vec<PathBuf>)> {
        let out = self.outcome(records);
        let files = nfa::write_tables(&out, dir)?;
        Ok((out, files))
    }

    fn draw(&self, out: &Outcome, dir: &Path) -> dpfl::Result<Vec<PathBuf>> {
        super::normfedavg_plot::write_figure(&out.id, &out.rounds, &out.privacy, dir)
    }

    fn report(&self, out: &Outcome, facts: &RunFacts) -> Report {
        let plan = &self.plan;
        let mut r = Report::default();
        let json = serde_json::json!({
            "id": plan.id,
            "wall_seconds": facts.wall_seconds,
            "summary": out.summary.iter().map(|r| serde_json::json!({
                "algorithm": r.algorithm,
                "test_error_mean": r.mean,
                "test_error_std": r.std,
                "bits_per_coordinate": r.bits_per_coordinate,
            })).collect::<Vec<_>>(),
            "not_run": out.not_run,
            "privacy": out.privacy,
        });
        if let serde_json::Value::Object(m) = json {
            r.json = m;
        }
        let trained = facts.rounds_here;
        let per_round = if trained == 0 {
            "no round trained: every run restored from the checkpoint".to_string()
        } else {
            format!(
                "{trained} rounds trained here, {:.2} s per round, evaluation included",
                facts.wall_seconds / trained as f64
            )
        };
        r.lines.push(format!(
            "{}: {} algorithms x {} seeds x {} rounds in {:.1} s ({per_round})",
            plan.id,
            plan.algorithms.len(),
            plan.seeds.len(),
            plan.rounds,
            facts.wall_seconds,
        ));
        for s in &out.summary {
            if s.seeds > 0 {
                r.lines.push(format!(
                    "  {}: {:.2} +- {:.2} % test error over {} seed(s), {:.0} bits/coordinate",
                    s.algorithm,
                    100.0 * s.mean,
                    100.0 * s.std,
                    s.seeds,
                    s.bits_per_coordinate
                ));
            }
            for why in &s.diverged {
                r.lines.push(format!("  {}: {why}", s.algorithm));
            }
        }
        for (a, why) in &out.not_run {
            r.lines.push(format!("  {a}: not run: {why}"));
        }
        r.lines.extend(privacy_lines(&plan.id, &out.privacy));
        r
    }

    /// The privacy columns of the finished reproduction in `dir` (module `normfedavg`'s
    /// [`nfa::rewrite`]), training nothing.
    fn rewrite(&mut self, data_dir: Option<&Path>, dir: &Path) -> dpfl::Result<Report> {
        let (train, _) = nfa::load_fmnist(data_dir)?;
        let files = nfa::rewrite(&self.plan, &train, dir)?;
        let privacy = nfa::plan_privacy(&self.plan, &train)?;
        let mut r = Report::default();
        let json = serde_json::json!({"id": self.plan.id, "privacy": privacy});
        if let serde_json::Value::Object(m) = json {
            r.json = m;
        }
        r.lines = privacy_lines(&self.plan.id, &privacy);
        r.files = files;
        Ok(r)
    }
}
