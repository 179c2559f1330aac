//! Algorithms as two halves that exchange typed messages.
//!
//! Every federated algorithm is a [`SiloHalf`] (one per silo) and a [`ServerHalf`]:
//!
//! ```text
//!   ServerHalf::broadcast(r) ──Broadcast──►  SiloHalf::respond(&Broadcast, &Dataset, &mut DpRng)
//!   ServerHalf::aggregate(r, &[SiloMessage]) ◄──SiloMessage──┘
//! ```
//!
//! # The trust boundary, enforced by types
//!
//! * A server half is built by [`AlgorithmSpec::build`] from [`FederationInfo`] only: public
//!   sizes and dimensions, never a [`Dataset`]. The factory that builds the silo halves
//!   likewise receives only a silo's public description; data reaches a silo half only as the
//!   `&Dataset` argument of [`SiloHalf::respond`], borrowed for that call.
//! * No method of [`ServerHalf`] takes a [`Dataset`], a [`DpRng`] of a silo, or a silo half;
//!   its only inputs are [`Broadcast`]s it made and [`SiloMessage`]s, which are plain vectors.
//! * [`Dataset`] is not `Clone`, and the runner (simulator or network silo) moves each
//!   silo's data into that silo's own state; there is no shared handle to copy.
//! * Privacy noise is added inside the silo half, before [`SiloHalf::respond`] returns, and
//!   the silo's ledger is charged before the message leaves (see [`crate::sim`]).
//!
//! ```compile_fail
//! // A server half cannot be handed a dataset: no method accepts one.
//! fn leak(server: &mut dyn dpfl::algo::ServerHalf, data: &dpfl::data::Dataset) {
//!     server.aggregate(0, data);
//! }
//! ```

pub mod acsa;
pub mod local_sgd;
pub mod mbsgd;
pub mod message;
pub mod multistage;
pub mod theory;
pub mod unbalanced;

use serde::{Deserialize, Serialize};

use crate::data::Dataset;
use dpfl_privacy::{DpRng, PrivacyEvent};

pub use message::{Broadcast, PackedInts, Payload, Reply, Round, SiloMessage};

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

pub mod spec;
pub use spec::{AlgorithmSpec, BuildContext, BuiltAlgorithm, Calibration, OutputRule};
