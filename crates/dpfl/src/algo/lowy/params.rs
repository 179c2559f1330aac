//! The theorems' parameter rules ([`super::theory`]) applied to a built federation: the
//! worst silo's facts as the rules' inputs, weights and Moreau smoothing resolved once
//! ([`prepare`]), and [`theory`] with the silos' actual K_i and σ_i as overrides.

use super::calibration::{NoiseRule, SiloPlan, silo_weights};
use super::theory::{
    Constants, Overrides, Setting, TheoryInputs, TheoryParams, smoothing_rule, theory_params,
};
use crate::algo::checked::CheckedSmoothing;
use crate::algo::context::BuildContext;

impl TheoryInputs {
    /// The rules' inputs from a build context: the worst silo on each axis (smallest n_i, ε_i
    /// and δ_i), N, M, d, L and the projection's diameter.
    pub(crate) fn from_context(
        ctx: &BuildContext,
        setting: Setting,
        noise: Option<NoiseRule>,
        constants: &Constants,
        weights: &[f64],
        smoothing: Option<f64>,
        overrides: Overrides,
    ) -> crate::Result<Self> {
        let privacy = match noise {
            None => None,
            Some(_) => {
                let mut worst: Option<(f64, f64)> = None;
                for s in &ctx.silos {
                    let (e, d) = ctx.budget(s)?;
                    worst = Some(match worst {
                        None => (e.get(), d.get()),
                        Some((we, wd)) => (we.min(e.get()), wd.min(d.get())),
                    });
                }
                worst
            }
        };
        let wmin = weights.iter().copied().fold(f64::INFINITY, f64::min);
        let wmax = weights.iter().copied().fold(0.0, f64::max);
        Ok(TheoryInputs {
            setting,
            noise,
            lipschitz: ctx.lipschitz,
            constants: constants.clone(),
            projection_diameter: ctx.projection.diameter(),
            weight_range: if weights.is_empty() {
                (1.0, 1.0)
            } else {
                (wmin, wmax)
            },
            records: ctx.silos.iter().map(|s| s.records).min().unwrap_or(0),
            silos: ctx.federation.silos,
            participants: ctx.federation.expected_participants,
            dim: ctx.federation.dim,
            privacy,
            smoothing,
            overrides,
        })
    }
}

/// The L the noise is calibrated to (of the smoothed loss if asked), β and the weights.
pub(crate) struct Prepared {
    pub lipschitz: f64,
    pub smoothing: Option<f64>,
    pub weights: Vec<f64>,
}

/// Resolves weights and Moreau smoothing (Thm D.2 / F.2): a smoothed loss is optimised with
/// gradients clipped at 2L and noise calibrated to 2L (Lemma D.7, safe side).
pub(crate) fn prepare(
    ctx: &BuildContext,
    setting: Setting,
    noise: Option<NoiseRule>,
    smoothing: Option<CheckedSmoothing>,
    constants: &Constants,
    weights: Option<&[f64]>,
) -> crate::Result<Prepared> {
    let weights = silo_weights(ctx.silos.len(), weights)?;
    let beta = match smoothing {
        None => None,
        Some(CheckedSmoothing::Beta(b)) => Some(b),
        Some(CheckedSmoothing::Theory) => Some(smoothing_rule(&TheoryInputs::from_context(
            ctx,
            setting,
            noise,
            constants,
            &weights,
            None,
            Overrides::default(),
        )?)?),
    };
    // Built once here so a loss without a prox fails at planning; halves rebuild it.
    let (_, lipschitz) = oracle(ctx, beta)?;
    Ok(Prepared {
        lipschitz,
        smoothing: beta,
        weights,
    })
}

pub(crate) use crate::algo::gradient::smoothed_oracle as oracle;

/// [`theory_params`] for a built federation: R = the run's rounds, K = the
/// smallest K_i, σ = the largest σ_i.
#[allow(clippy::too_many_arguments)]
pub(crate) fn theory(
    ctx: &BuildContext,
    setting: Setting,
    noise: Option<NoiseRule>,
    constants: &Constants,
    prep: &Prepared,
    plans: &[SiloPlan],
    step_size: Option<f64>,
    regularization: Option<f64>,
) -> crate::Result<TheoryParams> {
    let overrides = Overrides {
        rounds: Some(ctx.federation.rounds),
        batch_size: plans.iter().map(|p| p.batch_size).min(),
        // Lemma H.1's σ²_max/M branch: the largest noise any silo adds.
        sigma: Some(plans.iter().map(|p| p.sigma).fold(0.0, f64::max)),
        step_size,
        regularization,
    };
    let mut inputs = TheoryInputs::from_context(
        ctx,
        setting,
        noise,
        constants,
        &prep.weights,
        prep.smoothing,
        overrides,
    )?;
    // A one-pass run over unequal silos only guarantees R ≤ ⌊n_i/K_i⌋ per silo.
    if setting == Setting::OnePass {
        inputs.records = plans
            .iter()
            .map(|p| p.batch_size * ctx.federation.rounds)
            .min()
            .unwrap_or(inputs.records);
    }
    theory_params(&inputs)
}
