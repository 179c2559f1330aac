//! One silo's promised and accounted privacy: a row of `summary.json` and of a saved model's
//! `model.json`. Its own file so that `saved` does not import `summary` (which imports it).

use serde::{Deserialize, Serialize};

/// One silo's promised and accounted privacy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiloPrivacy {
    /// The silo's index.
    pub silo: usize,
    /// The silo's name (its value of the silo column, or its file's name), where the data
    /// give one (issue 31 item 3: a privacy officer reads hospitals, not indices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The paper's target ε_i; null when the noise multiplier was set directly
    /// (`privacy.noise_multiplier`), where the accountants' ε below is what the run certifies.
    pub target_epsilon: Option<f64>,
    /// The paper's target δ_i (resolved from the δ rule for this silo's n_i).
    pub target_delta: f64,
    /// ε at `target_delta` of the events the silo released, by the RDP accountant
    /// (replace-one neighbouring); null if it cannot account them (see `notes`).
    pub rdp_epsilon: Option<f64>,
    /// The same by the PLD accountant (for sampled Gaussians under replace-one, the Balle,
    /// Barthe & Gaboardi 2018 profile: `dpfl_privacy::accountant::sampled_pld`).
    pub pld_epsilon: Option<f64>,
    /// A lower bound on the true ε at `target_delta` from a concrete neighbouring pair
    /// (`dpfl_privacy::accountant::lower_bound`); null where no pair is implemented.
    #[serde(default)]
    pub lower_epsilon: Option<f64>,
    /// Why an accountant gave no number.
    pub notes: Vec<String>,
}
