//! What a networked run's server knows beyond its plan (issue 16 item 5): the data types of
//! [`super::server_report`], kept apart from it so that [`super::summary`] can carry them
//! without importing the report's code (the import graph has no circles).

use serde::{Deserialize, Serialize};

/// One aggregated round, as the server logged it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerRound {
    /// The round, from 1.
    pub round: usize,
    /// |S_r|: silos asked.
    pub selected: usize,
    /// M_r: messages aggregated.
    pub participants: usize,
    /// Messages dropped as malformed or late.
    pub rejected: usize,
    /// Wall seconds of the round.
    pub seconds: f64,
}

/// What the server reports beyond the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerFacts {
    /// Rounds aggregated.
    pub rounds_run: usize,
    /// Whether the run reached its last round.
    pub finished: bool,
    /// Messages aggregated over all rounds.
    pub messages: u64,
    /// Messages rejected over all rounds.
    pub rejected: u64,
    /// Bytes the server received during its rounds (TLS records included): the uplink.
    pub uplink_bytes: u64,
    /// The same in bits (8 per byte).
    pub uplink_bits: u64,
    /// Bytes sent by the server (broadcasts, TLS records included).
    pub sent_bytes: u64,
    /// Why the model's quality is missing.
    pub model_quality: String,
    /// One line per round.
    pub rounds: Vec<ServerRound>,
}
