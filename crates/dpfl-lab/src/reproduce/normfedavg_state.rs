//! What a DP-NormFedAvg run leaves ([`super::normfedavg_repro`]): its record in the
//! checkpoint ([`RunRows`], a line of the one format, [`super::checkpoint`]) and, while it
//! runs, `run-state.bin` beside the checkpoint: the run in flight, replaced atomically after
//! every round — its rows so far and the simulator's [`SimSnapshot`] (server model, every
//! generator's position, the halves' state, the events spent), postcard-encoded (≈ 8 bytes
//! per parameter: 2.6 MB at the paper's d). A resumed run continues from it bit for bit:
//! every draw of a run comes from generators seeded by (seed, purpose, index) whose positions
//! the snapshot holds, and the halves keep no other state between rounds (fresh momentum
//! buffer each round, stateless minibatch sampler). So an interruption loses at most the round
//! in flight. The state file holds the silos' generator keys, derived from the public seed: no
//! secret beyond what the seed already gives. It is deleted once its run's line is in the
//! checkpoint.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::checkpoint::exact;
use super::normfedavg_plot::RoundRow;
use dpfl::sim::SimSnapshot;
use dpfl::{Error, Result};

const STATE_FORMAT: &str = "dpfl-normfedavg-run-state-1";

/// The run in flight's file.
pub const STATE_FILE_NAME: &str = "run-state.bin";

/// A run: its rows and the last message's bits per coordinate (NaN before any message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRows {
    /// Every evaluated round so far, in order.
    pub rows: Vec<RoundRow>,
    /// Bits per coordinate of the last round's messages.
    #[serde(with = "exact")]
    pub bits_per_coordinate: f64,
    /// Why the run stopped before the plan's last round (`Error::Diverged`); `None` for a
    /// run that is complete or still going.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

/// The in-flight state file of one reproduction.
pub struct RunState {
    path: PathBuf,
    plan_sha256: String,
}

impl RunState {
    /// `dir/run-state.bin` for the plan whose seedless fingerprint is `plan_sha256`.
    pub fn new(dir: &Path, plan_sha256: &str) -> Self {
        RunState {
            path: dir.join(STATE_FILE_NAME),
            plan_sha256: plan_sha256.into(),
        }
    }

    /// Deletes the state (its run's line is in the checkpoint).
    pub fn clear(&self) -> Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io {
                path: self.path.clone(),
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
        crate::output::atomic_write(&self.path, &bytes)
    }

    /// The in-flight state of run (`algorithm`, `seed`), if the state file holds that run of
    /// this plan. A state file of another run is `None` (that run is redone from its start:
    /// runs go in a fixed order, so this happens only after a change of `--trials`); a damaged
    /// one is an error naming the file.
    pub fn load(&self, algorithm: &str, seed: u64) -> Result<Option<InFlight>> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(Error::Io {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let bad = |reason: String| {
            Error::data(
                self.path.display().to_string(),
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
