//! What a config names for the SoteriaFL wing (planned in [`super::plan`]).
//!
//! ```toml
//! [[algorithms]]
//! kind = "soteria-fl"            # or "cdp-sgd", "ldp-sgd", "ldp-svrg", "q-dpsgd-1"
//! estimator = "svrg"             # gd | sgd | svrg | saga (soteria-fl only)
//! step_size = 0.6
//! calibration = "paper-code"     # accountant (default) | closed-form | paper-code | none
//! compressor = { kind = "random-k", fraction = 0.05, indices = "seed" }
//! sampling = "with-replacement"  # the default (the code's); or without-replacement, poisson
//! ```

use serde::{Deserialize, Serialize};

use dpfl_privacy::sampler::RecordSampling;

use super::calibration::Estimator;
use crate::compress::CompressorSpec;

/// Which algorithm of the paper (digest §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Algorithm 2 + 3: shifted compression with a local estimator.
    SoteriaFl,
    /// Algorithm 1: perturb, then compress directly.
    CdpSgd,
    /// CDP-SGD with the identity compressor (digest §3.4).
    LdpSgd,
    /// SoteriaFL-SVRG with the identity compressor (digest §3.4).
    LdpSvrg,
    /// Q-DPSGD-1 (digest §3.5; `qdpsgd.rs`).
    #[serde(rename = "q-dpsgd-1")]
    QDpsgd1,
}

/// How σ is chosen.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum NoiseCalibration {
    /// The smallest σ dpfl's accountant certifies for (ε, δ) over T rounds of the sampling
    /// actually used (replace-one).
    #[default]
    Accountant,
    /// Theorem 2: σ² = c(G_A²/4+G_B²)G²T ln(1/δ)/(m²ε²) with c = `noise_constant`
    /// (default 48); its constant is unstated in the paper, so no guarantee is implied.
    ClosedForm,
    /// The official code's presets: c = 48 for SoteriaFL and LDP-SVRG, 8G² for CDP/LDP-SGD.
    PaperCode,
    /// No noise (non-private; for tests and baselines).
    None,
}

/// Where the gradients are clipped.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Clipping {
    /// Every per-record gradient at G (the paper's Assumption 2; SVRG/SAGA clip both terms).
    #[default]
    PerRecord,
    /// The official code's clipping of each silo's whole estimator at G. NO FORMAL GUARANTEE
    /// at the target ε: the only sound bound is sensitivity 2G per round, which is what the
    /// run's reported ε is computed from. A reproduction option, never a default.
    AggregateNoGuarantee,
}

/// x⁰ ~ N(0, std²) from `seed` (the official code's randn(d)/5 has std 0.2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitSpec {
    /// The standard deviation of every coordinate.
    pub std: f64,
    /// The draw's seed.
    #[serde(default)]
    pub seed: u64,
}

/// The configuration shared by the wing's algorithms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SoteriaSpec {
    /// η, the server's step size.
    pub step_size: f64,
    /// SoteriaFL's local estimator (default sgd); only `kind = "soteria-fl"` takes one.
    #[serde(default)]
    pub estimator: Option<Estimator>,
    /// b; default the paper's rule per estimator (calibration module).
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// SVRG's p; default b/m.
    #[serde(default)]
    pub snapshot_probability: Option<f64>,
    /// Default random-k with k = max(1, ⌊d/20⌋) (indices by seed); LDP-* use the identity.
    #[serde(default)]
    pub compressor: Option<CompressorSpec>,
    /// γ; default sqrt((1+2ω)/(2(1+ω)³)).
    #[serde(default)]
    pub shift_step: Option<f64>,
    /// How σ is chosen (default `accountant`).
    #[serde(default)]
    pub calibration: NoiseCalibration,
    /// c of the closed form (calibration = "closed-form"); default 48.
    #[serde(default)]
    pub noise_constant: Option<f64>,
    /// Where gradients are clipped (default per record).
    #[serde(default)]
    pub clipping: Clipping,
    /// Record sampling: `with-replacement` (the official code's, default), `without-replacement`
    /// or `poisson` (the analysis's, 1/b normalisation; dpfl's accountants account Poisson
    /// only under add/remove-one, so it needs a closed-form calibration).
    #[serde(default)]
    pub sampling: RecordSampling,
    /// Seed of the server's SVRG coin stream (public randomness).
    #[serde(default)]
    pub coin_seed: u64,
    /// x⁰; default the model's own initial parameters.
    #[serde(default)]
    pub init: Option<InitSpec>,
    /// Q-DPSGD-1's consensus step ε_c in (0, 1] (default 0.9, the authors' code); only
    /// `kind = "q-dpsgd-1"` takes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consensus: Option<f64>,
}

impl SoteriaSpec {
    /// The figures' name of `method` with this estimator, e.g. "SoteriaFL-SVRG".
    pub fn label(&self, method: Method) -> String {
        match method {
            Method::SoteriaFl => {
                let e = match self.estimator.unwrap_or_default() {
                    Estimator::Gd => "GD",
                    Estimator::Sgd => "SGD",
                    Estimator::Svrg => "SVRG",
                    Estimator::Saga => "SAGA",
                };
                format!("SoteriaFL-{e}")
            }
            Method::CdpSgd => "CDP-SGD".into(),
            Method::LdpSgd => "LDP-SGD".into(),
            Method::LdpSvrg => "LDP-SVRG".into(),
            Method::QDpsgd1 => "Q-DPSGD-1".into(),
        }
    }
    /// Whether noise is added.
    pub fn is_private(&self) -> bool {
        self.calibration != NoiseCalibration::None
    }
}
