//! Checkpoints of the SoteriaFL reproductions (`dpfl reproduce soteria-* --resume`): every
//! finished run — one (ε, algorithm, seed) — is appended to `checkpoint.jsonl` as it finishes,
//! with all of its evaluated rows, so an interrupted reproduction loses at most the run in
//! flight. Each run is seeded by its coordinates ([`super::soteria::run_unit`]), so a resumed
//! reproduction equals an uninterrupted one bit for bit.
//!
//! Format: a header `{"format":…, "plan_sha256":…}` naming the plan **without its seed
//! count**, then one line per run with its coordinates and its rows, every float as the hex of
//! its IEEE bits (exact, NaN-safe). Leaving the seed count out of the fingerprint is
//! deliberate: `--trials 2 --resume` after `--trials 1` keeps seed 0's runs and adds seed 1's
//! (lines of seeds beyond `--trials` are kept in the file and ignored). Any other change of
//! plan (another ID, `--quick`) is refused. A last line without its newline is a write cut
//! short and is dropped; other damage is an error naming the file and line. The file is kept
//! after a complete reproduction, for a later `--trials N --resume`.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::soteria::{CurveRow, Plan, RunStore};
use crate::{Error, Result};

const FORMAT: &str = "dpfl-soteria-checkpoint-1";

/// The file name inside the reproduction's output directory.
pub const FILE_NAME: &str = "checkpoint.jsonl";

#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    plan_sha256: String,
}

/// One evaluated row: round, train loss, test accuracy, ‖∇f‖², utility (hex bits), uplink
/// bits, uplink bits at 64 per float, gradient evaluations.
type RowBits = (usize, String, String, String, String, u64, u64, u64);

#[derive(Serialize, Deserialize)]
struct Line {
    epsilon: String,
    algorithm: String,
    seed: usize,
    rows: Vec<RowBits>,
}

fn hex(v: f64) -> String {
    format!("{:016x}", v.to_bits())
}

fn unhex(s: &str) -> Option<f64> {
    u64::from_str_radix(s, 16).ok().map(f64::from_bits)
}

fn fingerprint(plan: &Plan) -> Result<String> {
    let mut p = plan.clone();
    p.seeds = 0;
    let json = serde_json::to_string(&p).map_err(|e| Error::data("reproduction", e.to_string()))?;
    Ok(Sha256::digest(json.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

type Key = (u64, String, usize);

/// An open checkpoint: the finished runs and the file new ones are appended to.
pub struct SoteriaCheckpoint {
    path: PathBuf,
    file: Mutex<std::fs::File>,
    done: HashMap<Key, Vec<CurveRow>>,
}

impl SoteriaCheckpoint {
    /// Opens `path` for `plan`. Without `resume` an existing checkpoint is an error (its runs
    /// would be lost); with it, its runs are read back (a missing file starts afresh).
    pub fn open(path: &Path, plan: &Plan, resume: bool) -> Result<Self> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let sha = fingerprint(plan)?;
        let mut done = HashMap::new();
        let mut fresh = true;
        if path.exists() {
            if !resume {
                return Err(Error::config(
                    "--resume",
                    format!(
                        "{} holds the finished runs of an earlier reproduction: pass --resume \
                         to continue it, or delete the file to start over",
                        path.display()
                    ),
                ));
            }
            let text = std::fs::read_to_string(path).map_err(io)?;
            let complete = text.rfind('\n').map_or(0, |i| i + 1);
            let parse = |line: usize, reason: String| Error::Parse {
                path: path.to_path_buf(),
                line,
                reason,
            };
            let mut lines = text[..complete].lines().enumerate();
            if let Some((_, h)) = lines.next() {
                fresh = false;
                let h: Header = serde_json::from_str(h)
                    .map_err(|e| parse(1, format!("not a checkpoint header: {e}")))?;
                if h.format != FORMAT {
                    return Err(parse(1, format!("unknown format {:?}", h.format)));
                }
                if h.plan_sha256 != sha {
                    return Err(Error::config(
                        "--resume",
                        format!(
                            "{} was written for another reproduction (ID or --quick): run with \
                             the same ones, or delete it",
                            path.display()
                        ),
                    ));
                }
            }
            for (i, l) in lines {
                let bad = |reason: String| parse(i + 1, reason);
                let line: Line = serde_json::from_str(l)
                    .map_err(|e| bad(format!("damaged checkpoint line: {e}")))?;
                let eps = unhex(&line.epsilon).ok_or_else(|| bad("bad epsilon".into()))?;
                let mut rows = Vec::with_capacity(line.rows.len());
                for (round, loss, acc, g, u, bits, bits64, evals) in line.rows {
                    let f = |s: &str| unhex(s).ok_or_else(|| bad(format!("bad number {s:?}")));
                    rows.push(CurveRow {
                        epsilon: eps,
                        algorithm: line.algorithm.clone(),
                        seed: line.seed,
                        round,
                        train_loss: f(&loss)?,
                        test_accuracy: f(&acc)?,
                        grad_norm_sq: f(&g)?,
                        utility: f(&u)?,
                        uplink_bits: bits,
                        uplink_bits_64: bits64,
                        grad_evals: evals,
                    });
                }
                done.insert((eps.to_bits(), line.algorithm, line.seed), rows);
            }
            // Drop a cut-short last line before appending after it.
            if complete < text.len() {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(io)?;
                f.set_len(complete as u64).map_err(io)?;
            }
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        if fresh {
            let h = Header {
                format: FORMAT.into(),
                plan_sha256: sha,
            };
            let text =
                serde_json::to_string(&h).map_err(|e| Error::data("checkpoint", e.to_string()))?;
            writeln!(file, "{text}").map_err(io)?;
        }
        Ok(SoteriaCheckpoint {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            done,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs read back from the file (all seeds).
    pub fn finished(&self) -> usize {
        self.done.len()
    }

    /// The rows of a finished run, if the file holds it.
    pub fn get(&self, eps: f64, algorithm: &str, seed: usize) -> Option<Vec<CurveRow>> {
        self.done
            .get(&(eps.to_bits(), algorithm.to_string(), seed))
            .cloned()
    }

    /// Appends a finished run (one line, flushed).
    pub fn record(&self, eps: f64, algorithm: &str, seed: usize, rows: &[CurveRow]) -> Result<()> {
        let line = Line {
            epsilon: hex(eps),
            algorithm: algorithm.to_string(),
            seed,
            rows: rows
                .iter()
                .map(|r| {
                    (
                        r.round,
                        hex(r.train_loss),
                        hex(r.test_accuracy),
                        hex(r.grad_norm_sq),
                        hex(r.utility),
                        r.uplink_bits,
                        r.uplink_bits_64,
                        r.grad_evals,
                    )
                })
                .collect(),
        };
        let text =
            serde_json::to_string(&line).map_err(|e| Error::data("checkpoint", e.to_string()))?;
        let mut f = self
            .file
            .lock()
            .map_err(|_| Error::data("checkpoint", "poisoned lock".to_string()))?;
        writeln!(f, "{text}")
            .and_then(|()| f.flush())
            .map_err(|source| Error::Io {
                path: self.path.clone(),
                source,
            })
    }
}

impl RunStore for SoteriaCheckpoint {
    fn get(&self, eps: f64, algorithm: &str, seed: usize) -> Option<Vec<CurveRow>> {
        SoteriaCheckpoint::get(self, eps, algorithm, seed)
    }

    fn record(&self, eps: f64, algorithm: &str, seed: usize, rows: &[CurveRow]) -> Result<()> {
        SoteriaCheckpoint::record(self, eps, algorithm, seed, rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(eps: f64, seed: usize, round: usize, v: f64) -> CurveRow {
        CurveRow {
            epsilon: eps,
            algorithm: "CDP-SGD".into(),
            seed,
            round,
            train_loss: v,
            test_accuracy: f64::NAN,
            grad_norm_sq: v / 3.0,
            utility: 0.1 + v,
            uplink_bits: 7,
            uplink_bits_64: 8,
            grad_evals: 9,
        }
    }

    /// Rows come back bit for bit (NaN included); another seed count resumes; a cut-short
    /// line is dropped; another plan and a missing --resume are refused.
    #[test]
    fn runs_come_back_exactly_and_other_plans_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let mut plan = Plan::new("soteria-a9a", true).unwrap();
        let rows = vec![row(1.0, 1, 5, 1.0 / 7.0), row(1.0, 1, 10, 2.0f64.sqrt())];
        {
            let c = SoteriaCheckpoint::open(&path, &plan, false).unwrap();
            c.record(1.0, "CDP-SGD", 1, &rows).unwrap();
        }
        // An interrupted write.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        write!(f, "{{\"epsilon\":\"3ff").unwrap();
        drop(f);
        assert!(SoteriaCheckpoint::open(&path, &plan, false).is_err());
        plan.seeds = 5;
        let c = SoteriaCheckpoint::open(&path, &plan, true).unwrap();
        assert_eq!(c.finished(), 1);
        let back = c.get(1.0, "CDP-SGD", 1).unwrap();
        assert_eq!(back.len(), 2);
        for (a, b) in back.iter().zip(&rows) {
            assert_eq!(a.train_loss.to_bits(), b.train_loss.to_bits());
            assert_eq!(a.utility.to_bits(), b.utility.to_bits());
            assert!(a.test_accuracy.is_nan());
            assert_eq!((a.round, a.seed, a.grad_evals), (b.round, b.seed, 9));
        }
        assert!(c.get(1.0, "CDP-SGD", 0).is_none());
        c.record(1.0, "LDP-SGD", 0, &rows).unwrap();
        drop(c);
        assert_eq!(
            SoteriaCheckpoint::open(&path, &plan, true)
                .unwrap()
                .finished(),
            2
        );
        let other = Plan::new("soteria-a9a", false).unwrap();
        assert!(SoteriaCheckpoint::open(&path, &other, true).is_err());
    }
}
