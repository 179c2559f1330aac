//! One shape for every reproduction (issue 28 item 3): a [`Reproduction`] lists its jobs
//! (the units of work a run consists of, each with a stable key), runs one job (through
//! `dpfl::run`'s driver, `Simulator::drive`), summarises the finished jobs' records into its
//! tables and draws its figures. [`run`] is the one loop every reproduction goes through:
//! jobs → skip those in the checkpoint → run → append → (summarise, draw by the caller). The
//! one checkpoint format is [`super::checkpoint`]'s. `dpfl reproduce` resolves an id to one of
//! the families ([`super::families`]) and drives it with this loop; the flags only some
//! families take are [`Options`], refused in one place ([`Options::refuse_others`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::checkpoint::{self, Checkpoint, Header};

/// The options of `dpfl reproduce` beyond the id, `--out`, `--data-dir`, `--quiet` and
/// `--force` (which every reproduction takes the same way).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--quick`: the reduced run (every family takes it).
    pub quick: bool,
    /// `--spec`: a reproduction TOML instead of the built-in one.
    pub spec: Option<PathBuf>,
    /// `--trials`: trials (seeds) to run.
    pub trials: Option<usize>,
    /// `--rounds`: rounds per run.
    pub rounds: Option<usize>,
    /// `--momentum`: local heavy-ball momentum.
    pub momentum: Option<f64>,
    /// `--step-decay`: the local step's factor per round.
    pub step_decay: Option<f64>,
    /// `--algorithms`: a subset of the plan's algorithms.
    pub algorithms: Option<Vec<String>>,
    /// `--calibration`: how every algorithm's noise is set.
    pub calibration: Option<String>,
    /// `--clipping`: per record or aggregate.
    pub clipping: Option<String>,
    /// `--epsilons`: a subset of the plan's ε settings.
    pub epsilons: Option<Vec<f64>>,
    /// `--sgd-batch`: b of the SGD-type algorithms.
    pub sgd_batch: Option<usize>,
    /// `--rewrite`: train nothing, rewrite the summaries of a finished reproduction.
    pub rewrite: bool,
    /// `--resume`: continue from the checkpoint.
    pub resume: bool,
}

/// A flag of [`Options`] that a reproduction may or may not take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flag {
    /// `--spec`
    Spec,
    /// `--trials`
    Trials,
    /// `--rounds`
    Rounds,
    /// `--momentum`
    Momentum,
    /// `--step-decay`
    StepDecay,
    /// `--algorithms`
    Algorithms,
    /// `--calibration`
    Calibration,
    /// `--clipping`
    Clipping,
    /// `--epsilons`
    Epsilons,
    /// `--sgd-batch`
    SgdBatch,
    /// `--rewrite`
    Rewrite,
    /// `--resume`
    Resume,
}

impl Flag {
    /// Every flag, in the order of `dpfl reproduce --help`.
    pub const ALL: [Flag; 12] = [
        Flag::Spec,
        Flag::Trials,
        Flag::Rounds,
        Flag::Momentum,
        Flag::StepDecay,
        Flag::Algorithms,
        Flag::Calibration,
        Flag::Clipping,
        Flag::Epsilons,
        Flag::SgdBatch,
        Flag::Rewrite,
        Flag::Resume,
    ];

    /// The flag as typed.
    pub fn name(self) -> &'static str {
        match self {
            Flag::Spec => "--spec",
            Flag::Trials => "--trials",
            Flag::Rounds => "--rounds",
            Flag::Momentum => "--momentum",
            Flag::StepDecay => "--step-decay",
            Flag::Algorithms => "--algorithms",
            Flag::Calibration => "--calibration",
            Flag::Clipping => "--clipping",
            Flag::Epsilons => "--epsilons",
            Flag::SgdBatch => "--sgd-batch",
            Flag::Rewrite => "--rewrite",
            Flag::Resume => "--resume",
        }
    }
}

impl Options {
    /// Whether `flag` was given.
    pub fn is_set(&self, flag: Flag) -> bool {
        match flag {
            Flag::Spec => self.spec.is_some(),
            Flag::Trials => self.trials.is_some(),
            Flag::Rounds => self.rounds.is_some(),
            Flag::Momentum => self.momentum.is_some(),
            Flag::StepDecay => self.step_decay.is_some(),
            Flag::Algorithms => self.algorithms.is_some(),
            Flag::Calibration => self.calibration.is_some(),
            Flag::Clipping => self.clipping.is_some(),
            Flag::Epsilons => self.epsilons.is_some(),
            Flag::SgdBatch => self.sgd_batch.is_some(),
            Flag::Rewrite => self.rewrite,
            Flag::Resume => self.resume,
        }
    }

    /// The one refusal of a flag reproduction `id` does not take: the first given flag outside
    /// `takes`, named, with the reproductions that do take it (`takers(flag)`).
    pub fn refuse_others(
        &self,
        id: &str,
        takes: &[Flag],
        takers: &dyn Fn(Flag) -> String,
    ) -> dpfl::Result<()> {
        match Flag::ALL
            .into_iter()
            .find(|&f| self.is_set(f) && !takes.contains(&f))
        {
            Some(f) => Err(dpfl::Error::config(
                f.name(),
                format!("{id} does not take it (only {} do)", takers(f)),
            )),
            None => Ok(()),
        }
    }

    /// The value of `flag` as JSON (null when not given).
    pub fn value(&self, flag: Flag) -> serde_json::Value {
        use serde_json::json;
        match flag {
            Flag::Spec => json!(self.spec.as_ref().map(|p| p.display().to_string())),
            Flag::Trials => json!(self.trials),
            Flag::Rounds => json!(self.rounds),
            Flag::Momentum => json!(self.momentum),
            Flag::StepDecay => json!(self.step_decay),
            Flag::Algorithms => json!(self.algorithms),
            Flag::Calibration => json!(self.calibration),
            Flag::Clipping => json!(self.clipping),
            Flag::Epsilons => json!(self.epsilons),
            Flag::SgdBatch => json!(self.sgd_batch),
            Flag::Rewrite => json!(self.rewrite),
            Flag::Resume => json!(self.resume),
        }
    }

    /// The options a checkpoint header records: `--quick` and those of `flags` given.
    pub fn header(&self, flags: &[Flag]) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("--quick".into(), self.quick.into());
        for &f in flags {
            if self.is_set(f) {
                m.insert(f.name().into(), self.value(f));
            }
        }
        serde_json::Value::Object(m)
    }

    /// `--trials`, refused at 0.
    pub fn trials(&self) -> dpfl::Result<Option<usize>> {
        match self.trials {
            Some(0) => Err(dpfl::Error::config("--trials", "must be at least 1")),
            t => Ok(t),
        }
    }
}

/// What a running job may call: where the checkpoint is (a job may keep its in-flight state
/// beside it), and the per-round hook of a sequential job.
pub struct JobContext<'a> {
    /// The output directory holding the checkpoint; `None` when the run keeps none.
    pub dir: Option<&'a Path>,
    /// `round(job, rounds done, rounds)` after each round of a job that reports rounds; an
    /// error stops the reproduction there, as an interruption would.
    pub round: &'a (dyn Fn(&str, usize, usize) -> dpfl::Result<()> + Sync),
}

/// What the caller of [`run`] hears.
pub struct Hooks<'a> {
    /// `progress(done, total)` jobs, finished ones from the checkpoint counted as done (from
    /// any thread).
    pub progress: &'a (dyn Fn(usize, usize) + Sync),
    /// [`JobContext::round`].
    pub round: &'a (dyn Fn(&str, usize, usize) -> dpfl::Result<()> + Sync),
    /// One line for a person ("resuming: …", partial outputs written).
    pub note: &'a (dyn Fn(&str) + Sync),
}

impl Hooks<'_> {
    /// Hooks with only a progress callback.
    pub fn progress(progress: &(dyn Fn(usize, usize) + Sync)) -> Hooks<'_> {
        Hooks {
            progress,
            round: &|_, _, _| Ok(()),
            note: &|_| {},
        }
    }
}

/// What a finished run of [`run`] reports besides its records.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunFacts {
    /// Seconds from loading to the last record.
    pub wall_seconds: f64,
    /// Jobs of the run.
    pub jobs: usize,
    /// Rounds trained by this process (a resumed run's restored rounds not counted).
    pub rounds_here: usize,
}

/// What a reproduction tells its user at the end: the `--json` object, the lines of text
/// around the list of files written, and a failure to report after the outputs are written.
#[derive(Debug, Default)]
pub struct Report {
    /// The `--json` object; the caller adds `"files"`.
    pub json: serde_json::Map<String, serde_json::Value>,
    /// Lines before the "wrote …" lines.
    pub lines: Vec<String>,
    /// The files written.
    pub files: Vec<PathBuf>,
    /// Lines after the "wrote …" lines.
    pub after: Vec<String>,
    /// An error to return once everything is written and printed (an unexpected divergence).
    pub failure: Option<dpfl::Error>,
}

/// The default output folder's name of reproduction `id` (`results/ID`, or `results/ID-quick`
/// for the reduced run).
pub(crate) fn quick_name(id: &str, quick: bool) -> String {
    if quick {
        format!("{id}-quick")
    } else {
        id.to_owned()
    }
}

/// One reproduction: its jobs, how one runs, how the finished ones are summarised and drawn.
pub trait Reproduction: Sync {
    /// What one finished job leaves: the line payload of the checkpoint and what
    /// [`Reproduction::summarise`] reads (floats as [`checkpoint::Exact`]).
    type Record: Serialize + DeserializeOwned + Clone + Send + Sync;
    /// What summarising computes for drawing and reporting.
    type Summary;
    /// The flags of [`Options`] this reproduction takes.
    const TAKES: &'static [Flag];

    /// The reproduction's id.
    fn id(&self) -> &str;
    /// The default output folder's name under `results/`.
    fn out_name(&self) -> String;
    /// The SHA-256 of the plan as run (without what `--trials N --resume` may extend, if the
    /// reproduction can be extended).
    fn fingerprint(&self) -> dpfl::Result<String>;
    /// The options the checkpoint header records (a resume with others is refused).
    fn header_options(&self) -> serde_json::Value;
    /// Whether the checkpoint stays after a complete run (so that more seeds can be added).
    fn keeps_checkpoint(&self) -> bool;
    /// Whether jobs run in parallel (rayon) rather than one after another.
    fn in_parallel(&self) -> bool;
    /// Whether the outputs are rewritten after every job (a long sequential run leaves the
    /// figures of what it finished).
    fn partial_outputs(&self) -> bool {
        false
    }
    /// provenance.json's seed and configuration.
    fn provenance(&self) -> dpfl::Result<(Option<u64>, serde_json::Value)>;
    /// What the progress display says while [`Reproduction::load`] runs.
    fn loading(&self) -> &'static str {
        "loading data"
    }
    /// Loads the data and plans everything the jobs share.
    fn load(&mut self, data_dir: Option<&Path>) -> dpfl::Result<()>;
    /// The jobs' stable keys, in run order (after [`Reproduction::load`]).
    fn jobs(&self) -> Vec<String>;
    /// Runs job `job` (an index into [`Reproduction::jobs`]).
    fn run_job(&self, job: usize, ctx: &JobContext) -> dpfl::Result<Self::Record>;
    /// After job `job`'s record is in the checkpoint (e.g. its in-flight state is dropped).
    fn recorded(&self, _job: usize, _ctx: &JobContext) -> dpfl::Result<()> {
        Ok(())
    }
    /// The tables of the finished jobs (`None`: not finished), written into `dir`.
    fn summarise(
        &self,
        records: &[Option<Self::Record>],
        dir: &Path,
    ) -> dpfl::Result<(Self::Summary, Vec<PathBuf>)>;
    /// The figures of `summary`, written into `dir`.
    fn draw(&self, summary: &Self::Summary, dir: &Path) -> dpfl::Result<Vec<PathBuf>>;
    /// What the run says at its end (the caller sets the files).
    fn report(&self, summary: &Self::Summary, facts: &RunFacts) -> Report;
    /// `--rewrite`: the summaries of the finished reproduction in `dir` again, training
    /// nothing.
    fn rewrite(&mut self, data_dir: Option<&Path>, dir: &Path) -> dpfl::Result<Report>;
}

/// The checkpoint header of `r`.
pub fn header<R: Reproduction>(r: &R) -> dpfl::Result<Header> {
    Ok(Header {
        format: checkpoint::FORMAT.into(),
        id: r.id().into(),
        spec_sha256: r.fingerprint()?,
        options: r.header_options(),
    })
}

/// Opens `dir/checkpoint.jsonl` for `r` ([`Checkpoint::open`]).
pub fn open_checkpoint<R: Reproduction>(
    r: &R,
    dir: &Path,
    resume: bool,
) -> dpfl::Result<Checkpoint<R::Record>> {
    Checkpoint::open(&dir.join(checkpoint::FILE_NAME), header(r)?, resume)
}

/// The one loop of every reproduction: `r`'s jobs, those in `checkpoint` taken from it, the
/// others run (in parallel or in order, [`Reproduction::in_parallel`]) and each appended to
/// the checkpoint as it finishes; the records in job order (every one `Some`, the shape
/// [`Reproduction::summarise`] takes) and the rounds trained here. `dir` is the checkpoint's
/// directory (`None` without one).
pub fn run<R: Reproduction>(
    r: &R,
    checkpoint: Option<&Checkpoint<R::Record>>,
    dir: Option<&Path>,
    hooks: &Hooks,
) -> dpfl::Result<(Vec<Option<R::Record>>, usize)> {
    let keys = r.jobs();
    let total = keys.len();
    let mut records: Vec<Option<R::Record>> = keys
        .iter()
        .map(|k| checkpoint.and_then(|c| c.get(k).cloned()))
        .collect();
    let already = records.iter().filter(|x| x.is_some()).count();
    if let (Some(c), true) = (checkpoint, already > 0) {
        (hooks.note)(&format!(
            "resuming: {already} of {total} runs already finished ({})",
            c.path().display()
        ));
        (hooks.progress)(already, total);
    }
    let done = AtomicUsize::new(already);
    let rounds = AtomicUsize::new(0);
    let round = |job: &str, k: usize, of: usize| {
        rounds.fetch_add(1, Ordering::Relaxed);
        (hooks.round)(job, k, of)
    };
    let ctx = JobContext {
        dir: checkpoint.and(dir),
        round: &round,
    };
    let one = |i: usize| -> dpfl::Result<R::Record> {
        let record = r.run_job(i, &ctx)?;
        if let Some(c) = checkpoint {
            c.record(&keys[i], &record)?;
            r.recorded(i, &ctx)?;
        }
        let d = done.fetch_add(1, Ordering::Relaxed) + 1;
        (hooks.progress)(d, total);
        Ok(record)
    };
    if r.in_parallel() {
        let todo: Vec<usize> = (0..total).filter(|&i| records[i].is_none()).collect();
        let ran: Vec<(usize, R::Record)> = todo
            .par_iter()
            .map(|&i| Ok((i, one(i)?)))
            .collect::<dpfl::Result<_>>()?;
        for (i, record) in ran {
            records[i] = Some(record);
        }
    } else {
        for i in 0..total {
            if records[i].is_some() {
                continue;
            }
            records[i] = Some(one(i)?);
            if let (true, Some(d)) = (r.partial_outputs(), dir) {
                let (summary, _) = r.summarise(&records, d)?;
                r.draw(&summary, d)?;
                (hooks.note)(&format!(
                    "{}/{total} runs finished; outputs written to {}",
                    records.iter().filter(|x| x.is_some()).count(),
                    d.display()
                ));
            }
        }
    }
    Ok((records, rounds.into_inner()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reproduce::checkpoint::Exact;

    /// Job i's record is i/7; job `fail` fails (an interruption) unless `fail` is past the
    /// end; every job run is counted.
    struct Toy {
        parallel: bool,
        fail: usize,
        ran: AtomicUsize,
    }

    impl Reproduction for Toy {
        type Record = Exact;
        type Summary = Vec<f64>;
        const TAKES: &'static [Flag] = &[Flag::Resume];

        fn id(&self) -> &str {
            "toy"
        }
        fn out_name(&self) -> String {
            "toy".into()
        }
        fn fingerprint(&self) -> dpfl::Result<String> {
            Ok("f".into())
        }
        fn header_options(&self) -> serde_json::Value {
            serde_json::json!({})
        }
        fn keeps_checkpoint(&self) -> bool {
            false
        }
        fn in_parallel(&self) -> bool {
            self.parallel
        }
        fn provenance(&self) -> dpfl::Result<(Option<u64>, serde_json::Value)> {
            Ok((None, serde_json::Value::Null))
        }
        fn load(&mut self, _: Option<&Path>) -> dpfl::Result<()> {
            Ok(())
        }
        fn jobs(&self) -> Vec<String> {
            (0..6).map(|i| format!("job {i}")).collect()
        }
        fn run_job(&self, job: usize, ctx: &JobContext) -> dpfl::Result<Exact> {
            if job == self.fail {
                return Err(dpfl::Error::config("test", "interrupted"));
            }
            self.ran.fetch_add(1, Ordering::Relaxed);
            (ctx.round)("toy", 1, 1)?;
            Ok(Exact(job as f64 / 7.0))
        }
        fn summarise(
            &self,
            records: &[Option<Exact>],
            _: &Path,
        ) -> dpfl::Result<(Vec<f64>, Vec<PathBuf>)> {
            Ok((records.iter().flatten().map(|e| e.0).collect(), Vec::new()))
        }
        fn draw(&self, _: &Vec<f64>, _: &Path) -> dpfl::Result<Vec<PathBuf>> {
            Ok(Vec::new())
        }
        fn report(&self, _: &Vec<f64>, _: &RunFacts) -> Report {
            Report::default()
        }
        fn rewrite(&mut self, _: Option<&Path>, _: &Path) -> dpfl::Result<Report> {
            Ok(Report::default())
        }
    }

    /// Interrupted at job 3 and resumed, in order or in parallel: only the jobs not in the
    /// checkpoint run again, and the records equal an uninterrupted run's bit for bit.
    #[test]
    fn the_loop_resumes_only_what_is_missing() {
        for parallel in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let mut toy = Toy {
                parallel,
                fail: 3,
                ran: AtomicUsize::new(0),
            };
            let hooks = Hooks::progress(&|_, _| {});
            {
                let c = open_checkpoint(&toy, dir.path(), false).unwrap();
                assert!(run(&toy, Some(&c), Some(dir.path()), &hooks).is_err());
            }
            let before = toy.ran.swap(0, Ordering::Relaxed);
            assert!(
                open_checkpoint(&toy, dir.path(), false).is_err(),
                "needs --resume"
            );
            toy.fail = usize::MAX;
            let c = open_checkpoint(&toy, dir.path(), true).unwrap();
            let kept = c.finished(&toy.jobs());
            assert_eq!(kept, before);
            if !parallel {
                assert_eq!(kept, 3, "jobs 0, 1, 2 finished before the interruption");
            }
            let (records, rounds) = run(&toy, Some(&c), Some(dir.path()), &hooks).unwrap();
            assert_eq!(toy.ran.load(Ordering::Relaxed), 6 - kept);
            assert_eq!(rounds, 6 - kept);
            let bits: Vec<u64> = records.iter().map(|r| r.unwrap().0.to_bits()).collect();
            let want: Vec<u64> = (0..6).map(|i| (i as f64 / 7.0).to_bits()).collect();
            assert_eq!(bits, want);
        }
    }

    #[test]
    fn options_name_their_flags() {
        let o = Options {
            quick: true,
            trials: Some(2),
            momentum: Some(0.0),
            ..Options::default()
        };
        assert_eq!(
            o.header(&[Flag::Trials, Flag::Rounds]),
            serde_json::json!({"--quick": true, "--trials": 2})
        );
        let e = o
            .refuse_others("x", &[Flag::Trials], &|f| format!("{}-takers", f.name()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--momentum") && e.contains("only --momentum-takers do"),
            "{e}"
        );
        assert!(
            o.refuse_others("x", &[Flag::Trials, Flag::Momentum], &|_| String::new())
                .is_ok()
        );
    }
}
