//! Checkpoints of a long reproduction: every finished training run of the grid is appended to
//! `checkpoint.jsonl` in the output directory as it finishes, so an interrupted run (Ctrl-C, a
//! crash, a killed job) loses at most the runs in flight. `dpfl reproduce --resume` reads the
//! file back and runs only the rest; since every run is seeded by its coordinates
//! ([`super::run_job`]), the result equals an uninterrupted run bit for bit.
//!
//! Format: a header line `{"format":…, "spec_sha256":…, "jobs":N}` naming the exact
//! specification (after `--quick` / `--trials`), then one line per finished run with its index,
//! its coordinates and its two numbers as the hex of their IEEE bits (exact, NaN-safe).
//! A last line without its newline is a write cut short by the interruption and is dropped;
//! any other damage is an error naming the file and line (never a silent fresh start).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Job, JobResult, PanelTrial, ReproSpec, run_job};
use crate::{Error, Result};

const FORMAT: &str = "dpfl-reproduce-checkpoint-1";

/// The file name of the checkpoint inside a reproduction's output directory.
pub const FILE_NAME: &str = "checkpoint.jsonl";

#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    spec_sha256: String,
    jobs: usize,
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

fn fingerprint(spec: &ReproSpec) -> Result<String> {
    let json =
        serde_json::to_string(spec).map_err(|e| Error::data("reproduction", e.to_string()))?;
    Ok(Sha256::digest(json.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

fn bits(s: &str) -> Option<f64> {
    u64::from_str_radix(s, 16).ok().map(f64::from_bits)
}

/// An open checkpoint: the runs already finished and the file new ones are appended to.
pub struct Checkpoint {
    path: PathBuf,
    file: Mutex<(std::fs::File, Instant)>,
    done: HashMap<usize, JobResult>,
}

impl Checkpoint {
    /// Opens `path` for the jobs of `spec`. Without `resume`, an existing checkpoint is an
    /// error (its work would be lost); with it, its finished runs are read back (a missing file
    /// starts afresh).
    pub fn open(path: &Path, spec: &ReproSpec, jobs: &[Job], resume: bool) -> Result<Self> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let sha = fingerprint(spec)?;
        let mut done = HashMap::new();
        if path.exists() {
            if !resume {
                return Err(Error::config(
                    "--resume",
                    format!(
                        "{} holds the finished runs of an interrupted reproduction: pass --resume \
                         to continue it, or delete the file to start over",
                        path.display()
                    ),
                ));
            }
            let text = std::fs::read_to_string(path).map_err(io)?;
            // A last line without its newline was cut short by the interruption.
            let complete = text.rfind('\n').map_or(0, |i| i + 1);
            let parse = |line: usize, reason: String| Error::Parse {
                path: path.to_path_buf(),
                line,
                reason,
            };
            let mut lines = text[..complete].lines().enumerate();
            // No header line: cut short before the header was complete, nothing finished yet.
            if let Some((_, h)) = lines.next() {
                let h: Header = serde_json::from_str(h)
                    .map_err(|e| parse(1, format!("not a checkpoint header: {e}")))?;
                if h.format != FORMAT {
                    return Err(parse(1, format!("unknown format {:?}", h.format)));
                }
                if h.spec_sha256 != sha || h.jobs != jobs.len() {
                    return Err(Error::config(
                        "--resume",
                        format!(
                            "{} was written for a different specification (other spec, \
                             --quick or --trials): run with the same ones, or delete it",
                            path.display()
                        ),
                    ));
                }
            }
            for (i, l) in lines {
                let line: Line = serde_json::from_str(l)
                    .map_err(|e| parse(i + 1, format!("damaged checkpoint line: {e}")))?;
                let job = jobs
                    .get(line.job)
                    .ok_or_else(|| parse(i + 1, format!("job {} out of range", line.job)))?;
                if key(job) != line.key {
                    return Err(parse(
                        i + 1,
                        format!(
                            "job {} has coordinates {:?}, expected {:?}",
                            line.job,
                            line.key,
                            key(job)
                        ),
                    ));
                }
                let (Some(train_loss), Some(metric)) = (bits(&line.train_loss), bits(&line.metric))
                else {
                    return Err(parse(i + 1, "numbers are not 16 hex digits".into()));
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
            }
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io)?;
            f.set_len(complete as u64).map_err(io)?;
            if complete == 0 {
                write_header(&f, &sha, jobs.len()).map_err(io)?;
            }
        } else {
            let f = std::fs::File::create(path).map_err(io)?;
            write_header(&f, &sha, jobs.len()).map_err(io)?;
        }
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io)?;
        Ok(Checkpoint {
            path: path.to_path_buf(),
            file: Mutex::new((file, Instant::now())),
            done,
        })
    }

    /// How many runs were already finished when the checkpoint was opened.
    pub fn finished(&self) -> usize {
        self.done.len()
    }

    /// The checkpoint file (finished runs, one JSON line each), for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one finished run: one write of one whole line, synced at most once a second
    /// (an interrupted process keeps every written line; a power cut may lose the last second).
    fn record(&self, i: usize, job: &Job, r: &JobResult) -> Result<()> {
        let line = serde_json::to_string(&Line {
            job: i,
            key: key(job),
            train_loss: format!("{:016x}", r.train_loss.to_bits()),
            metric: format!("{:016x}", r.metric.to_bits()),
            certified_epsilon: r.certified_epsilon,
            lower_epsilon: r.lower_epsilon,
        })
        .map_err(|e| Error::data("checkpoint", e.to_string()))?
            + "\n";
        let io = |source| Error::Io {
            path: self.path.clone(),
            source,
        };
        let mut g = self.file.lock().unwrap_or_else(|e| e.into_inner());
        g.0.write_all(line.as_bytes()).map_err(io)?;
        if g.1.elapsed().as_secs_f64() >= 1.0 {
            g.0.sync_data().map_err(io)?;
            g.1 = Instant::now();
        }
        Ok(())
    }

    /// Deletes the checkpoint (after the outputs it fed are written).
    pub fn remove(self) -> Result<()> {
        std::fs::remove_file(&self.path).map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })
    }
}

fn write_header(mut f: &std::fs::File, sha: &str, jobs: usize) -> std::io::Result<()> {
    let h = serde_json::to_string(&Header {
        format: FORMAT.into(),
        spec_sha256: sha.into(),
        jobs,
    })?;
    f.write_all((h + "\n").as_bytes())?;
    f.sync_all()
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
