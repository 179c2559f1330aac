//! The two halves of every algorithm and the public facts they are built from (the floor's
//! contract; see [`crate::algo`] for the trust boundary these types enforce).

use serde::{Deserialize, Serialize};

use super::message::{Broadcast, Reply, Round, SiloMessage};
use crate::data::Dataset;
use dpfl_privacy::{DpRng, PrivacyEvent};

/// Serializable state of a half, for checkpoints (server) and restarts (silo).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HalfState {
    pub vectors: std::collections::BTreeMap<String, Vec<f64>>,
    pub scalars: std::collections::BTreeMap<String, f64>,
    pub indices: std::collections::BTreeMap<String, Vec<u64>>,
}

/// The silo's side of an algorithm: turns a broadcast and its own data into a message.
pub trait SiloHalf: Send {
    /// The privacy event answering round `round` spends (record sampling included), known
    /// before any data is touched, so the silo's ledger can refuse the round. `None` for
    /// non-private algorithms.
    fn round_event(&self, round: Round) -> Option<PrivacyEvent>;
    /// Computes this silo's (already privatised) message.
    fn respond(
        &mut self,
        broadcast: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<SiloMessage>;
    /// This silo's whole reply to the round: one message unless the algorithm sends several
    /// (multi-message protocols override this; the runners call it, never `respond`).
    fn respond_reply(
        &mut self,
        broadcast: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<Reply> {
        Ok(Reply::single(self.respond(broadcast, data, rng)?))
    }
    /// Per-coordinate standard deviation of the privacy noise this silo adds (0 if none).
    fn noise_std(&self) -> f64;
    /// State to persist across a restart (e.g. a one-pass permutation's position).
    fn state(&self) -> HalfState {
        HalfState::default()
    }
    fn restore(&mut self, _state: HalfState) -> crate::Result<()> {
        Ok(())
    }
    /// Work and traffic so far, for per-round reports; `None` where a half does not count.
    fn counters(&self) -> Option<SiloCounters> {
        None
    }
}

/// What a silo half has done so far (SoteriaFL's metrics, digest §6 item 13).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiloCounters {
    /// Per-record gradient evaluations (∇f_ij at one point counts once).
    pub grad_evals: u64,
    /// f64 values sent (d dense, k for random-k; the paper's "64 bits per float" count).
    pub floats_sent: u64,
}

impl std::ops::Add for SiloCounters {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        SiloCounters {
            grad_evals: self.grad_evals + o.grad_evals,
            floats_sent: self.floats_sent + o.floats_sent,
        }
    }
}

/// The server's side: makes broadcasts and aggregates messages. Holds no silo data.
pub trait ServerHalf: Send {
    /// The broadcast of round `round`.
    fn broadcast(&mut self, round: Round) -> Broadcast;
    /// Aggregates the messages of the silos that answered round `round` (any order, possibly
    /// none) and updates the state.
    fn aggregate(&mut self, round: Round, messages: &[SiloMessage]) -> crate::Result<()>;
    /// The model the algorithm outputs if stopped now (e.g. the average of iterates).
    fn output(&self) -> Vec<f64>;
    /// Number of parameters of the model.
    fn dim(&self) -> usize;
    fn state(&self) -> HalfState;
    fn restore(&mut self, state: HalfState) -> crate::Result<()>;
}

/// Public, non-private facts about the federation that the halves may be built from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FederationInfo {
    /// Number of model parameters.
    pub dim: usize,
    /// Number of silos N.
    pub silos: usize,
    /// Planned rounds R.
    pub rounds: usize,
    /// Expected participants per round (the paper's M), used by parameter rules.
    pub expected_participants: f64,
}

/// Public facts about one silo that its half may be built from: its record count (the paper
/// treats n_i as public) and its privacy budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiloInfo {
    pub id: u32,
    pub records: usize,
    /// (ε_i, δ_i) for private algorithms.
    pub budget: Option<(f64, f64)>,
}

impl HalfState {
    /// The vector stored under `key`, checked to have length `d`.
    pub fn vector(&self, key: &str, d: usize) -> crate::Result<Vec<f64>> {
        let v = self
            .vectors
            .get(key)
            .ok_or_else(|| crate::Error::Protocol(format!("state lacks `{key}`")))?;
        if v.len() != d {
            return Err(crate::Error::Protocol(format!(
                "state `{key}` has length {}, expected {d}",
                v.len()
            )));
        }
        Ok(v.clone())
    }

    /// The scalar stored under `key`.
    pub fn scalar(&self, key: &str) -> crate::Result<f64> {
        self.scalars
            .get(key)
            .copied()
            .ok_or_else(|| crate::Error::Protocol(format!("state lacks `{key}`")))
    }
}
