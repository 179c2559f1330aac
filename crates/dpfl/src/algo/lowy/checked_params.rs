//! The Lowy & Razaviyayn wing's checked parameters (issue 28 item 4): what each config's
//! guard (`ParamGuard`, in [`super::wing`]) produces and its planning takes. Built from the
//! floor's shared blocks (`crate::algo::checked`); this file imports no planning file, so
//! `mbsgd.rs`, `acsa.rs` and `local_sgd.rs` can take these types without an import circle.

use dpfl_privacy::sampler::RecordSampling;

use super::calibration::{Calibration, NoiseRule};
use super::inputs::{AcsaSampling, Constants, Params};
use crate::algo::checked::{
    BatchRule, CheckedSmoothing, ParamError, ParamGuard, StepRule, weights,
};
use crate::algo::server::OutputRule;
use crate::units::StepSize;

/// `mb-sgd`, checked: η and K. What a reproduction's grid may still fill in (K of a
/// non-private run, η where the theorems give none) is required when planning, not here.
#[derive(Debug, Clone, PartialEq)]
pub struct MbSgdParams {
    /// η.
    pub(crate) step: StepSize,
    /// The noise rule; `None` for the non-private algorithm.
    pub(crate) calibration: Option<Calibration>,
    /// K, or each silo's default under the noise rule.
    pub(crate) batch: BatchRule,
    /// Which iterate the server outputs.
    pub(crate) output: OutputRule,
    /// How each silo draws its K records.
    pub(crate) sampling: RecordSampling,
}

/// `local-sgd`, checked: η, the noise rule (App. I's or the accountant's) and K.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalSgdParams {
    /// η of each local step.
    pub(crate) step: StepSize,
    /// The noise rule; `None` for the non-private algorithm.
    pub(crate) rule: Option<Calibration>,
    /// K local steps, or App. I's default (private runs only).
    pub(crate) local_steps: BatchRule,
    /// Which iterate the server outputs.
    pub(crate) output: OutputRule,
}

/// The parameters Lowy & Razaviyayn's general forms share (Algorithm 7's `noisy-mb-sgd`,
/// Algorithm 1's `accelerated-mb-sgd`), checked: the step and batch rules, smoothing,
/// weights and constants.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneralParams {
    /// Explicit parameters or the theorems' rules for the missing ones.
    pub(crate) params: Params,
    /// η (AC-SA: the first step 1/(2γ)), or the rules'.
    pub(crate) step: StepRule,
    /// The same K for every silo, or the rules'.
    pub(crate) batch: BatchRule,
    /// Moreau smoothing.
    pub(crate) smoothing: Option<CheckedSmoothing>,
    /// Objective weights p_i (each > 0, summing to 1).
    pub(crate) weights: Option<Vec<f64>>,
    /// Problem constants.
    pub(crate) constants: Constants,
}

impl GeneralParams {
    pub(crate) fn check(
        params: Params,
        step: Option<f64>,
        batch: Option<usize>,
        smoothing: Option<crate::algo::gradient::Smoothing>,
        w: Option<&[f64]>,
        constants: &Constants,
    ) -> Result<Self, ParamError> {
        Ok(GeneralParams {
            params,
            step: StepRule::check(step)?,
            batch: BatchRule::check("batch_size", batch)?,
            smoothing: CheckedSmoothing::check(smoothing)?,
            weights: weights(w)?,
            constants: constants.check()?,
        })
    }
}

/// `noisy-mb-sgd`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct NoisyMbSgdParams {
    /// The noise rule; `None` for the non-private algorithm.
    pub(crate) calibration: Option<Calibration>,
    /// What Algorithm 7 shares with AC-SA.
    pub(crate) theory: GeneralParams,
    /// The output rule, or the theory's.
    pub(crate) output: Option<OutputRule>,
    /// How each silo draws its K_i records.
    pub(crate) sampling: RecordSampling,
}

/// `accelerated-mb-sgd`, checked: the calibration rule against the sampling (one pass has
/// only Thm E.1's), λ ≥ 0, and η where the convex schedule needs one.
#[derive(Debug, Clone, PartialEq)]
pub struct AcceleratedParams {
    /// One pass over disjoint batches or a fresh batch every round.
    pub(crate) sampling: AcsaSampling,
    /// The noise rule the calibration resolves to for this sampling.
    pub(crate) noise: Option<NoiseRule>,
    /// What Algorithm 1 shares with Algorithm 7.
    pub(crate) theory: GeneralParams,
    /// λ, if given.
    pub(crate) regularization: Option<f64>,
}
