//! Checkpoints of the DP-NormFedAvg reproductions (`dpfl reproduce normfedavg-* --resume`),
//! at two grains:
//!
//! * `checkpoint.jsonl` ([`super::checkpoint_file`]): every finished run — one (algorithm,
//!   seed) — with its evaluated rows, every float as the hex of its IEEE bits. The header names
//!   the plan **without its seeds** (as the SoteriaFL checkpoint), so `--trials 1` then
//!   `--trials 3 --resume` keeps seed 1's runs and adds seeds 2 and 3; any other change
//!   (ID, `--quick`, `--rounds`, the network's arithmetic) is refused. Kept after a complete
//!   reproduction, for such a later extension.
//! * `run-state.bin`: the run in flight, replaced atomically after every round — its rows so
//!   far and the simulator's [`SimSnapshot`] (server model, every generator's position, the
//!   halves' state, the events spent), postcard-encoded (≈ 8 bytes per parameter: 2.6 MB at
//!   the paper's d). A resumed run continues from it bit for bit: every draw of a run comes
//!   from generators seeded by (seed, purpose, index) whose positions the snapshot holds, and
//!   the halves keep no other state between rounds (fresh momentum buffer each round,
//!   stateless minibatch sampler). So an interruption loses at most the round in flight.
//!   The state file holds the silos' generator keys, derived from the public seed: no secret
//!   beyond what the seed already gives.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::checkpoint_file::{self, AppendLog, hex, unhex};
use super::normfedavg_plot::RoundRow;
use dpfl::sim::SimSnapshot;
use dpfl::{Error, Result};

const FORMAT: &str = "dpfl-normfedavg-checkpoint-1";
const STATE_FORMAT: &str = "dpfl-normfedavg-run-state-1";

/// The finished runs' file inside the reproduction's output directory.
pub const FILE_NAME: &str = "checkpoint.jsonl";
/// The run in flight's file.
pub const STATE_FILE_NAME: &str = "run-state.bin";

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

/// One evaluated round: round, train loss, test error, bits per silo (hex bits).
type RowBits = (usize, String, String, String);

#[derive(Serialize, Deserialize)]
struct Line {
    algorithm: String,
    seed: u64,
    bits_per_coordinate: String,
    rows: Vec<RowBits>,
    /// Why the run stopped before its last round (it diverged); absent for a complete run,
    /// so the lines of complete runs are those of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stopped: Option<String>,
}

/// A run: its rows and the last message's bits per coordinate (NaN before any message).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRows {
    /// Every evaluated round so far, in order.
    pub rows: Vec<RoundRow>,
    /// Bits per coordinate of the last round's messages.
    pub bits_per_coordinate: f64,
    /// Why the run stopped before the plan's last round (`Error::Diverged`); `None` for a
    /// run that is complete or still going.
    pub stopped: Option<String>,
}

/// The run in flight: its rows so far and where its simulator stands.
#[derive(Debug, Clone, PartialEq)]
pub struct InFlight {
    /// The run's algorithm label.
    pub algorithm: String,
    /// The run's seed.
    pub seed: u64,
    /// Its rows so far.
    pub done: RunRows,
    /// The simulator after the last of those rounds.
    pub sim: SimSnapshot,
}

/// What `run-state.bin` holds. The simulator's privacy events go as JSON text (they are an
/// internally tagged enum, which postcard cannot read back).
#[derive(Serialize, Deserialize)]
struct StateFile {
    format: String,
    plan_sha256: String,
    algorithm: String,
    seed: u64,
    bits_per_coordinate: u64,
    rows: Vec<(usize, u64, u64, u64)>,
    round: u32,
    network_rng: dpfl_privacy::rng::RngState,
    shuffler: Option<dpfl_privacy::rng::RngState>,
    silo_rngs: Vec<dpfl_privacy::rng::RngState>,
    silo_states: Vec<dpfl::algo::HalfState>,
    server: dpfl::algo::HalfState,
    spent_json: String,
}

/// An open checkpoint of one reproduction.
pub struct NormFedAvgCheckpoint {
    log: AppendLog,
    state_path: PathBuf,
    plan_sha256: String,
    done: HashMap<(String, u64), RunRows>,
}

impl NormFedAvgCheckpoint {
    /// Opens the checkpoint in `dir` for the plan whose seedless fingerprint is `plan_sha256`
    /// (`normfedavg::Plan::fingerprint`). Without `resume` an existing checkpoint is an error;
    /// with it, the finished runs are read back (a missing file starts afresh).
    pub fn open(dir: &Path, plan_sha256: &str, resume: bool) -> Result<Self> {
        let header = Header {
            format: FORMAT.into(),
            plan_sha256: plan_sha256.into(),
        };
        let mut done = HashMap::new();
        let mut seen = checkpoint_file::Lines::new();
        let log = AppendLog::open(
            &dir.join(FILE_NAME),
            &header,
            resume,
            "another reproduction (ID, --quick or --rounds)",
            |n, line: Line| {
                seen.first(
                    (line.algorithm.clone(), line.seed),
                    n,
                    &format!("the run of {} with seed {}", line.algorithm, line.seed),
                )?;
                let f = |s: &str| unhex(s).ok_or_else(|| format!("bad number {s:?}"));
                let mut rows = Vec::with_capacity(line.rows.len());
                for (round, loss, err, bits) in line.rows {
                    rows.push(RoundRow {
                        algorithm: line.algorithm.clone(),
                        seed: line.seed,
                        round,
                        train_loss: f(&loss)?,
                        test_error: f(&err)?,
                        bits_per_silo: f(&bits)?,
                    });
                }
                let run = RunRows {
                    rows,
                    bits_per_coordinate: f(&line.bits_per_coordinate)?,
                    stopped: line.stopped,
                };
                done.insert((line.algorithm, line.seed), run);
                Ok(())
            },
        )?;
        Ok(NormFedAvgCheckpoint {
            log,
            state_path: dir.join(STATE_FILE_NAME),
            plan_sha256: plan_sha256.into(),
            done,
        })
    }

    /// The finished runs' file.
    pub fn path(&self) -> &Path {
        self.log.path()
    }

    /// Runs read back from the file (all seeds).
    pub fn finished(&self) -> usize {
        self.done.len()
    }

    /// A finished run, if the file holds it.
    pub fn get(&self, algorithm: &str, seed: u64) -> Option<RunRows> {
        self.done.get(&(algorithm.to_string(), seed)).cloned()
    }

    /// Appends a finished run (complete or diverged) and deletes the in-flight state (it is
    /// now the line).
    pub fn record(&self, algorithm: &str, seed: u64, run: &RunRows) -> Result<()> {
        self.log.append(&Line {
            algorithm: algorithm.into(),
            seed,
            bits_per_coordinate: hex(run.bits_per_coordinate),
            rows: run
                .rows
                .iter()
                .map(|r| {
                    (
                        r.round,
                        hex(r.train_loss),
                        hex(r.test_error),
                        hex(r.bits_per_silo),
                    )
                })
                .collect(),
            stopped: run.stopped.clone(),
        })?;
        match std::fs::remove_file(&self.state_path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io {
                path: self.state_path.clone(),
                source: e,
            }),
            _ => Ok(()),
        }
    }

    /// Replaces the in-flight state (atomically: an interruption leaves the previous one).
    pub fn save(&self, run: &InFlight) -> Result<()> {
        let sim = &run.sim;
        let state = StateFile {
            format: STATE_FORMAT.into(),
            plan_sha256: self.plan_sha256.clone(),
            algorithm: run.algorithm.clone(),
            seed: run.seed,
            bits_per_coordinate: run.done.bits_per_coordinate.to_bits(),
            rows: run
                .done
                .rows
                .iter()
                .map(|r| {
                    (
                        r.round,
                        r.train_loss.to_bits(),
                        r.test_error.to_bits(),
                        r.bits_per_silo.to_bits(),
                    )
                })
                .collect(),
            round: sim.round,
            network_rng: sim.network_rng.clone(),
            shuffler: sim.shuffler.clone(),
            silo_rngs: sim.silo_rngs.clone(),
            silo_states: sim.silo_states.clone(),
            server: sim.server.clone(),
            spent_json: serde_json::to_string(&sim.spent)
                .map_err(|e| Error::data("checkpoint", e.to_string()))?,
        };
        let bytes =
            postcard::to_stdvec(&state).map_err(|e| Error::data("checkpoint", e.to_string()))?;
        crate::output::atomic_write(&self.state_path, &bytes)
    }

    /// The in-flight state of run (`algorithm`, `seed`), if the state file holds that run of
    /// this plan. A state file of another run is `None` (that run is redone from its start:
    /// runs go in a fixed order, so this happens only after a change of `--trials`); a damaged
    /// one is an error naming the file.
    pub fn in_flight(&self, algorithm: &str, seed: u64) -> Result<Option<InFlight>> {
        let bytes = match std::fs::read(&self.state_path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(Error::Io {
                    path: self.state_path.clone(),
                    source,
                });
            }
        };
        let bad = |reason: String| {
            Error::data(
                self.state_path.display().to_string(),
                format!("{reason}: delete it to redo the run in flight from its start"),
            )
        };
        let s: StateFile =
            postcard::from_bytes(&bytes).map_err(|e| bad(format!("damaged run state: {e}")))?;
        if s.format != STATE_FORMAT || s.plan_sha256 != self.plan_sha256 {
            return Err(bad("written by another format or reproduction".into()));
        }
        if s.algorithm != algorithm || s.seed != seed {
            return Ok(None);
        }
        let rows = s
            .rows
            .iter()
            .map(|&(round, loss, err, bits)| RoundRow {
                algorithm: s.algorithm.clone(),
                seed,
                round,
                train_loss: f64::from_bits(loss),
                test_error: f64::from_bits(err),
                bits_per_silo: f64::from_bits(bits),
            })
            .collect();
        let spent = serde_json::from_str(&s.spent_json)
            .map_err(|e| bad(format!("damaged privacy events: {e}")))?;
        Ok(Some(InFlight {
            algorithm: s.algorithm,
            seed,
            done: RunRows {
                rows,
                bits_per_coordinate: f64::from_bits(s.bits_per_coordinate),
                stopped: None,
            },
            sim: SimSnapshot {
                round: s.round,
                network_rng: s.network_rng,
                shuffler: s.shuffler,
                silo_rngs: s.silo_rngs,
                silo_states: s.silo_states,
                server: s.server,
                spent,
            },
        }))
    }
}
