//! Checkpoints of a long reproduction: every finished training run of the grid is appended to
//! `checkpoint.jsonl` in the output directory as it finishes, so an interrupted run (Ctrl-C, a
//! crash, a killed job) loses at most the runs in flight. `dpfl reproduce --resume` reads the
//! file back and runs only the rest; since every run is seeded by its coordinates
//! ([`super::run_job`]), the result equals an uninterrupted run bit for bit.
//!
//! Format: a header line `{"format":…, "spec_sha256":…, "jobs":N}` naming the exact
//! specification (after `--quick` / `--trials`), then one line per finished run with its index,
//! its coordinates and its two numbers as the hex of their IEEE bits (exact, NaN-safe).
//! The file's rules (refusal without `--resume`, cut-short last line, damage) are those of
//! [`super::checkpoint_file`].

use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::checkpoint_file::{self, AppendLog, fingerprint, hex, unhex};
use super::{Job, JobResult, PanelTrial, ReproSpec, run_job};
use dpfl::Result;

const FORMAT: &str = "dpfl-reproduce-checkpoint-1";

/// The file name of the checkpoint inside a reproduction's output directory.
pub const FILE_NAME: &str = "checkpoint.jsonl";

#[derive(Serialize, Deserialize, PartialEq)]
struct Header {
    format: String,
    spec_sha256: String,
    jobs: usize,
}

impl checkpoint_file::Header for Header {
    fn format(&self) -> &str {
        &self.format
    }
}

#[derive(Serialize, Deserialize)]
struct Line {
    job: usize,
    key: String,
    train_loss: String,
    metric: String,
    /// Absent in checkpoints written before the certified ε was kept.
    #[serde(default)]
    certified_epsilon: Option<f64>,
    #[serde(default)]
    lower_epsilon: Option<f64>,
}

/// The coordinates of a job as text (checked on resume, so a line cannot land on another job).
fn key(j: &Job) -> String {
    format!(
        "panel {} trial {} eps {} algorithm {} step {:016x} clip {} rep {}",
        j.panel,
        j.trial,
        j.eps.map_or("-".into(), |e| e.to_string()),
        j.algorithm,
        j.step.to_bits(),
        j.clip
            .map_or("-".into(), |c| format!("{:016x}", c.to_bits())),
        j.rep
    )
}

/// An open checkpoint: the runs already finished and the file new ones are appended to.
pub struct Checkpoint {
    log: AppendLog,
    done: HashMap<usize, JobResult>,
}

impl Checkpoint {
    /// Opens `path` for the jobs of `spec`. Without `resume`, an existing checkpoint is an
    /// error (its work would be lost); with it, its finished runs are read back (a missing file
    /// starts afresh).
    pub fn open(path: &Path, spec: &ReproSpec, jobs: &[Job], resume: bool) -> Result<Self> {
        let header = Header {
            format: FORMAT.into(),
            spec_sha256: fingerprint(spec)?,
            jobs: jobs.len(),
        };
        let mut done = HashMap::new();
        let mut seen = checkpoint_file::Lines::new();
        let log = AppendLog::open(
            path,
            &header,
            resume,
            "a different specification (other spec, --quick or --trials)",
            |n, line: Line| {
                seen.first(line.job, n, &format!("job {}", line.job))?;
                let job = jobs
                    .get(line.job)
                    .ok_or_else(|| format!("job {} out of range", line.job))?;
                if key(job) != line.key {
                    return Err(format!(
                        "job {} has coordinates {:?}, expected {:?}",
                        line.job,
                        line.key,
                        key(job)
                    ));
                }
                let (Some(train_loss), Some(metric)) =
                    (unhex(&line.train_loss), unhex(&line.metric))
                else {
                    return Err("numbers are not 16 hex digits".into());
                };
                done.insert(
                    line.job,
                    JobResult {
                        train_loss,
                        metric,
                        certified_epsilon: line.certified_epsilon,
                        lower_epsilon: line.lower_epsilon,
                    },
                );
                Ok(())
            },
        )?;
        Ok(Checkpoint { log, done })
    }

    /// How many runs were already finished when the checkpoint was opened.
    pub fn finished(&self) -> usize {
        self.done.len()
    }

    /// The checkpoint file (finished runs, one JSON line each), for messages.
    pub fn path(&self) -> &Path {
        self.log.path()
    }

    /// Appends one finished run.
    fn record(&self, i: usize, job: &Job, r: &JobResult) -> Result<()> {
        self.log.append(&Line {
            job: i,
            key: key(job),
            train_loss: hex(r.train_loss),
            metric: hex(r.metric),
            certified_epsilon: r.certified_epsilon,
            lower_epsilon: r.lower_epsilon,
        })
    }

    /// Deletes the checkpoint (after the outputs it fed are written).
    pub fn remove(self) -> Result<()> {
        self.log.remove()
    }
}

/// Runs the jobs not yet in `checkpoint` in parallel, recording each as it finishes; results
/// in job order. `progress(done, total)` counts the checkpointed runs as done.
pub fn run_grid(
    spec: &ReproSpec,
    data: &[Vec<PanelTrial>],
    jobs: &[Job],
    progress: &(dyn Fn(usize, usize) + Sync),
    checkpoint: Option<&Checkpoint>,
) -> Result<Vec<JobResult>> {
    let already = checkpoint.map_or(0, Checkpoint::finished);
    let done = std::sync::atomic::AtomicUsize::new(already);
    if already > 0 {
        progress(already, jobs.len());
    }
    jobs.par_iter()
        .enumerate()
        .map(|(i, j)| {
            if let Some(r) = checkpoint.and_then(|c| c.done.get(&i)) {
                return Ok(*r);
            }
            let r = run_job(spec, data, j)?;
            if let Some(c) = checkpoint {
                c.record(i, j, &r)?;
            }
            let d = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            progress(d, jobs.len());
            Ok(r)
        })
        .collect()
}
