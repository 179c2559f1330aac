//! What an algorithm is built from (public facts only) and what building yields.

use serde::{Deserialize, Serialize};

use super::half::{FederationInfo, ServerHalf, SiloHalf, SiloInfo};
use crate::model::{GradientOracle, Projection};
use crate::units::SiloId;

#[cfg(any(test, feature = "test-hooks"))]
thread_local! {
    /// Test-only: scales every σ built on this thread (the audit's under-noised builds without
    /// a slow recalibration, in `dpfl-lab`'s audit tests). Compiled only into this crate's
    /// tests and under the `test-hooks` feature, which only `dpfl-lab`'s dev-dependency turns
    /// on: not in `cargo build`/`cargo install` of the `dpfl` binary nor in the Python package
    /// (`cargo test --workspace` unifies features, so its test builds carry the hook, inert at
    /// 1.0 and reachable from Rust test code only).
    pub static TEST_NOISE_SCALE: std::cell::Cell<f64> = const { std::cell::Cell::new(1.0) };
}

/// Everything public an algorithm is built from.
#[derive(Debug, Clone)]
pub struct BuildContext {
    /// Public facts about the federation (d, N, R, expected M).
    pub federation: FederationInfo,
    /// Public facts about each silo, in silo order.
    pub silos: Vec<SiloInfo>,
    /// The model's gradients, with the per-example clip that enforces `lipschitz`.
    pub oracle: GradientOracle,
    /// The per-example gradient bound L the noise is calibrated to. The silo halves clip every
    /// per-example gradient at L, so the bound holds for any record, not only the data seen.
    pub lipschitz: f64,
    /// The parameter domain W the server projects onto.
    pub projection: Projection,
    /// The initial model w_0.
    pub init: Vec<f64>,
    /// The noise of every Gaussian mechanism (`privacy.mechanism`); see [`Self::gaussian`].
    pub noise: dpfl_privacy::GaussianNoise,
}

impl BuildContext {
    /// The oracle with clipping at min(configured clip, L), so the sensitivity the noise is
    /// calibrated to holds for every possible record.
    pub fn enforcing_oracle(&self) -> crate::Result<GradientOracle> {
        let c = match self.oracle.clip() {
            Some(c) => c.min(self.lipschitz),
            None => self.lipschitz,
        };
        self.oracle.with_clip(c)
    }

    /// The one place algorithms get Gaussian noise from: σ per coordinate for L2 sensitivity
    /// Δ on model-sized vectors, continuous or discrete as configured (`privacy.mechanism`).
    pub fn gaussian(
        &self,
        sigma: f64,
        sensitivity: f64,
    ) -> crate::Result<dpfl_privacy::GaussianMechanism> {
        #[cfg(any(test, feature = "test-hooks"))]
        let sigma = sigma * TEST_NOISE_SCALE.with(|c| c.get());
        Ok(dpfl_privacy::GaussianMechanism::with_noise(
            self.noise,
            sigma,
            sensitivity,
            self.federation.dim,
        )?)
    }

    /// (ε_i, δ_i) of silo `i`, or a config error naming the silo. A silo with a noise
    /// multiplier set directly has no target ε: every rule that reads one (a calibration, a
    /// default batch size, a theorem's parameters) fails here, naming the field, so no
    /// algorithm silently calibrates to a made-up target.
    pub fn budget(
        &self,
        silo: &SiloInfo,
    ) -> crate::Result<(dpfl_privacy::Epsilon, dpfl_privacy::Delta)> {
        if silo.fixed_noise.is_some() {
            return Err(crate::Error::config(
                "privacy.noise_multiplier",
                format!(
                    "silo {}: this setting reads a target epsilon (set privacy.epsilon instead, \
                     or give the batch size / local steps and explicit parameters)",
                    silo.id
                ),
            ));
        }
        silo.budget.ok_or_else(|| {
            crate::Error::config("privacy", format!("silo {} has no privacy budget", silo.id))
        })
    }

    /// The noise multiplier z of a silo whose noise is set directly (`privacy.noise_multiplier`).
    pub fn fixed_multiplier(&self, silo: &SiloInfo) -> Option<f64> {
        silo.fixed_noise.map(|f| f.noise_multiplier)
    }
}

/// The halves of one algorithm instance.
pub struct BuiltAlgorithm {
    /// The server half.
    pub server: Box<dyn ServerHalf>,
    /// One half per silo, in silo order.
    pub silos: Vec<Box<dyn SiloHalf>>,
    /// Per silo: a description of the noise calibration (σ, K, formula), for reports.
    pub calibration: Vec<SiloCalibration>,
}

/// The calibration a silo half uses, for reports and summaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiloCalibration {
    /// The silo's index.
    pub silo: SiloId,
    /// Noise standard deviation per coordinate (0 if non-private).
    pub sigma: f64,
    /// Records (or local steps) per round.
    pub batch_size: usize,
    /// The formula used, with its citation.
    pub formula: String,
    /// The privacy event of the whole run for this silo (None if non-private).
    pub run_event: Option<dpfl_privacy::PrivacyEvent>,
}

/// Every silo's whole-run events from its calibration, in silo order (none for a
/// non-private silo): what the silo's ledger charges if it answers every round.
pub fn run_events(calibration: &[SiloCalibration]) -> Vec<Vec<dpfl_privacy::PrivacyEvent>> {
    calibration
        .iter()
        .map(|c| c.run_event.iter().cloned().collect())
        .collect()
}

/// The formula of a silo whose noise multiplier z was set directly (`privacy.noise_multiplier`)
/// for a message of sensitivity `sensitivity`.
pub fn fixed_formula(z: f64, sensitivity: &str, rounds: usize) -> String {
    format!(
        "sigma_i = z {sensitivity} with z = {z} set directly (privacy.noise_multiplier), {rounds} \
         rounds; the accountants' epsilon at the silo's delta is what the run certifies"
    )
}

thread_local! {
    static CALIBRATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many per-silo noise calibrations (one σ_i from a budget) this thread has computed.
/// A plan calibrates each silo once; building halves from a plan calibrates nothing, so a
/// test can check that each process builds only its own half (issue 10). Thread-local, so
/// tests running in parallel do not see each other's counts.
pub fn calibrations_on_this_thread() -> u64 {
    CALIBRATIONS.with(|c| c.get())
}

/// Wings call this once per σ_i they calibrate (see [`calibrations_on_this_thread`]).
pub fn count_calibration() {
    CALIBRATIONS.with(|c| c.set(c.get() + 1));
}
