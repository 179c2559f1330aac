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
//! plan (another ID, `--quick`) is refused. The file's rules (refusal without `--resume`,
//! cut-short last line, damage) are those of [`super::checkpoint_file`]. The file is kept
//! after a complete reproduction, for a later `--trials N --resume`.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::checkpoint_file::{self, AppendLog, fingerprint, hex, unhex};
use super::soteria::{CurveRow, Plan, RunStore};
use dpfl::Result;

const FORMAT: &str = "dpfl-soteria-checkpoint-1";

/// The file name inside the reproduction's output directory.
pub const FILE_NAME: &str = "checkpoint.jsonl";

#[derive(Serialize, Deserialize, PartialEq)]
struct Header {
    format: String,
    plan_sha256: String,
}

impl checkpoint_file::Header for Header {
    fn format(&self) -> &str {
        &self.format
    }
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

type Key = (u64, String, usize);

/// An open checkpoint: the finished runs and the file new ones are appended to.
pub struct SoteriaCheckpoint {
    log: AppendLog,
    done: HashMap<Key, Vec<CurveRow>>,
}

impl SoteriaCheckpoint {
    /// Opens `path` for `plan`. Without `resume` an existing checkpoint is an error (its runs
    /// would be lost); with it, its runs are read back (a missing file starts afresh).
    pub fn open(path: &Path, plan: &Plan, resume: bool) -> Result<Self> {
        let mut p = plan.clone();
        p.seeds = 0;
        let header = Header {
            format: FORMAT.into(),
            plan_sha256: fingerprint(&p)?,
        };
        let mut done = HashMap::new();
        let mut seen = checkpoint_file::Lines::new();
        let log = AppendLog::open(
            path,
            &header,
            resume,
            "another reproduction (ID or --quick)",
            |n, line: Line| {
                let eps = unhex(&line.epsilon).ok_or("bad epsilon")?;
                seen.first(
                    (eps.to_bits(), line.algorithm.clone(), line.seed),
                    n,
                    &format!(
                        "the run of {} at epsilon {eps}, seed {}",
                        line.algorithm, line.seed
                    ),
                )?;
                let mut rows = Vec::with_capacity(line.rows.len());
                for (round, loss, acc, g, u, bits, bits64, evals) in line.rows {
                    let f = |s: &str| unhex(s).ok_or_else(|| format!("bad number {s:?}"));
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
                Ok(())
            },
        )?;
        Ok(SoteriaCheckpoint { log, done })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        self.log.path()
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

    /// Appends a finished run (one line).
    pub fn record(&self, eps: f64, algorithm: &str, seed: usize, rows: &[CurveRow]) -> Result<()> {
        self.log.append(&Line {
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
    use std::io::Write;

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
