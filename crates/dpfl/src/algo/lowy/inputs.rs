//! What the theorems' parameter rules ([`super::theory`]) read and return: the problem
//! constants a config gives, the setting (which theorem), the overrides, and the rules' output.

use serde::{Deserialize, Serialize};

use super::calibration::NoiseRule;
use super::multistage::AcsaSchedule;
use crate::algo::checked::{ParamError, ParamGuard, non_negative, positive};
use crate::algo::server::OutputRule;

/// How an accelerated silo samples its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AcsaSampling {
    /// Disjoint batches, one pass (Thm E.1: population loss, heterogeneous silos).
    OnePass,
    /// With replacement each round (Thm F.1: empirical risk).
    #[serde(alias = "with-replacement")]
    Erm,
    /// ERM with a uniform K-subset each round.
    WithoutReplacement,
    /// ERM with Poisson sampling at rate K/n each round.
    Poisson,
}

/// Whether missing parameters come from the theorems or must be given.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Params {
    /// Every parameter is given (step size required).
    #[default]
    Explicit,
    /// Missing parameters follow the theorems' rules; given ones override them.
    Theory,
}

pub(crate) use crate::algo::gradient::Smoothing;

/// Problem constants the rules need and the data cannot provide (all optional; a rule that
/// needs a missing one says so).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Constants {
    /// β: every f(·, x) is β-smooth.
    #[serde(default)]
    pub smoothness: Option<f64>,
    /// μ: every f(·, x) is μ-strongly convex; when set, the strongly convex rules apply.
    #[serde(default)]
    pub strong_convexity: Option<f64>,
    /// D: diameter of W (default: the projection's); stands in for ‖w₀ − w*‖.
    #[serde(default)]
    pub diameter: Option<f64>,
    /// φ: within-silo gradient standard deviation (default L).
    #[serde(default)]
    pub phi: Option<f64>,
    /// v: cross-silo heterogeneity of eq. (29) (default L).
    #[serde(default)]
    pub heterogeneity: Option<f64>,
    /// Δ ≥ F(w₀) − F* (multi-stage schedule, Thm E.1 strongly convex K).
    #[serde(default)]
    pub gap: Option<f64>,
    /// V², the variance of the aggregated noisy gradient (default: Lemma E.3 / Thm F.1 bound).
    #[serde(default)]
    pub variance: Option<f64>,
}

/// Lowy & Razaviyayn's problem constants: β, μ, D and Δ > 0; φ, v and V² ≥ 0 (each only
/// if given; a rule that needs a missing one says so when it runs).
impl ParamGuard for Constants {
    type Checked = Constants;
    fn check(&self) -> Result<Constants, ParamError> {
        for (name, v) in [
            ("smoothness", self.smoothness),
            ("strong_convexity", self.strong_convexity),
            ("diameter", self.diameter),
            ("gap", self.gap),
        ] {
            if let Some(v) = v {
                positive(name, v).map_err(|e| e.under("constants"))?;
            }
        }
        for (name, v) in [
            ("phi", self.phi),
            ("heterogeneity", self.heterogeneity),
            ("variance", self.variance),
        ] {
            if let Some(v) = v {
                non_negative(name, v).map_err(|e| e.under("constants"))?;
            }
        }
        Ok(self.clone())
    }
}

/// Which algorithm's theorem applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Setting {
    /// Noisy MB-SGD (Algorithm 2 / 7): Thm D.1, D.2.
    MbSgd,
    /// One-Pass Accelerated Noisy MB-SGD (Algorithm 1, disjoint batches): Thm E.1.
    OnePass,
    /// Accelerated Noisy MB-SGD for ERM (Algorithm 1, with replacement): Thm F.1, F.2.
    Erm,
}

/// Explicit values that replace the rules' results.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Overrides {
    /// R instead of the rule's.
    pub rounds: Option<usize>,
    /// K instead of the rule's.
    pub batch_size: Option<usize>,
    /// Noise σ actually used (largest over silos).
    pub sigma: Option<f64>,
    /// MB-SGD: η. AC-SA: the first step 1/(2γ).
    pub step_size: Option<f64>,
    /// λ of f + (λ/2)‖w − w₀‖² instead of the rule's.
    pub regularization: Option<f64>,
}

/// Everything the rules read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TheoryInputs {
    /// Which algorithm's theorem the rules follow.
    pub setting: Setting,
    /// `None` for a non-private run.
    pub noise: Option<NoiseRule>,
    /// L of the (unsmoothed, unweighted) loss.
    pub lipschitz: f64,
    /// The constants given in the config (each rule names the ones it lacks).
    pub constants: Constants,
    /// The projection's diameter (∞ without projection).
    pub projection_diameter: f64,
    /// (min_i N p_i, max_i N p_i); (1, 1) without weights.
    pub weight_range: (f64, f64),
    /// n: the smallest silo.
    pub records: usize,
    /// N.
    pub silos: usize,
    /// M (1/M = E[1/M_r]).
    pub participants: f64,
    /// d.
    pub dim: usize,
    /// (ε, δ) of the worst silo (smallest of each); `None` if non-private.
    pub privacy: Option<(f64, f64)>,
    /// The Moreau parameter β if the loss is smoothed by the algorithm.
    pub smoothing: Option<f64>,
    /// Values given explicitly, which replace the rules' results.
    pub overrides: Overrides,
}

/// The rules' output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TheoryParams {
    /// L̃ the rules used (2L after smoothing, times max N p_i).
    pub lipschitz: f64,
    /// β̃ the rules used, if any.
    pub smoothness: Option<f64>,
    /// μ̃, if strongly convex.
    pub strong_convexity: Option<f64>,
    /// R, rounds (rounded up from [`Self::rounds_rule`] unless given).
    pub rounds: usize,
    /// The theorem's R (real-valued; `None` where no finite rule exists).
    pub rounds_rule: Option<f64>,
    /// K, records per silo per round.
    pub batch_size: usize,
    /// The theorem's K before rounding, where the theorem has one.
    pub batch_rule: Option<f64>,
    /// σ of each silo's Gaussian noise, per coordinate (0 for a non-private run).
    pub sigma: f64,
    /// V² (accelerated settings).
    pub variance: Option<f64>,
    /// η for Noisy MB-SGD.
    pub step_size: Option<f64>,
    /// Which iterate the server outputs (last, average, or the strongly convex weights).
    pub output: OutputRule,
    /// λ of f + (λ/2)‖w − w₀‖² (0 if none).
    pub lambda: f64,
    /// The modulus μ the AC-SA update uses (λ, or μ̃ for the multi-stage schedule).
    pub acsa_mu: f64,
    /// AC-SA's (α_r, η_r) schedule (accelerated settings only).
    pub acsa: Option<AcsaSchedule>,
}
