//! The trusted shuffle's Gaussian randomizer as a [`Mechanism`] (issue 28 item 2): Shuffled
//! Noisy MB-SGD under `shuffler = "trusted"` charges the honest-shuffler round guarantee of
//! Lowy & Razaviyayn's Thm G.1 chain (FMT 2021 Thm 3.2/3.8 over the M reports, Balle, Barthe
//! & Gaboardi 2018 Thm 10 for the K-of-n sampling; [`super::calibration::round_at`]). The
//! event is computed here from the mechanism's own σ, not stored beside it, so the ledger
//! charges the noise actually drawn.
//!
//! Decision (never under-protects): where the chain gives no guarantee at this σ (FMT's
//! conditions fail, as for a σ far below the plan's) or the record sampling is not the one
//! the chain was solved for, the silo's own sampled Gaussian event is charged: the shuffle is
//! post-processing of the silo's own release, so that event holds whatever the shuffler does.

use serde::{Deserialize, Serialize};

use dpfl_privacy::event::Sampling;
use dpfl_privacy::mechanism::{GaussianMechanism, Mechanism, VectorMechanism};
use dpfl_privacy::sampler::RecordSampling;
use dpfl_privacy::{DpRng, PrivacyEvent};

use super::calibration::{SdpInputs, round_at};
use crate::algo::context::BuildContext;
use crate::algo::gradient::{BatchSource, GradientNoise, GradientSilo};

/// What the honest-shuffler event of a silo is computed from, besides the mechanism's σ: the
/// silo's chain inputs and its own δ̂₀ (the plan keeps these, not an event).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HonestShuffle {
    /// The silo's chain inputs (its budget, n_i, K, N, M, R, L).
    pub chain: SdpInputs,
    /// δ̂₀ of the silo's own chain, at which the common randomizer's ε₀ is measured.
    pub delta0: f64,
}

/// The silo's Gaussian, charged at its honest-shuffler round guarantee (module docs).
#[derive(Debug, Clone)]
pub(crate) struct HonestShuffleGaussian {
    gaussian: GaussianMechanism,
    honest: HonestShuffle,
    /// The chain's (ε, δ) per round at the Gaussian's σ, computed once from it (`None`: the
    /// chain gives nothing there).
    round: Option<(f64, f64)>,
}

impl HonestShuffleGaussian {
    /// The silo's Gaussian `gaussian` behind an honest shuffler described by `honest`.
    /// Errors: a discrete Gaussian (the chain is the continuous Gaussian's).
    pub(crate) fn new(gaussian: GaussianMechanism, honest: HonestShuffle) -> crate::Result<Self> {
        if gaussian.granularity().is_some() {
            return Err(crate::Error::config(
                "privacy.mechanism",
                "the honest-shuffler chain is the continuous Gaussian's",
            ));
        }
        let round = round_at(&honest.chain, gaussian.sigma(), honest.delta0).ok();
        Ok(HonestShuffleGaussian {
            gaussian,
            honest,
            round,
        })
    }

    fn own_sampling(&self) -> Sampling {
        Sampling::WithReplacement {
            population: self.honest.chain.records as u64,
            draws: self.honest.chain.batch_size as u64,
        }
    }
}

impl Mechanism for HonestShuffleGaussian {
    type Input<'a> = [f64];
    type Output = ();
    type Error = std::convert::Infallible;
    fn release(&mut self, v: &mut [f64], rng: &mut DpRng) -> Result<(), Self::Error> {
        self.gaussian.privatize(v, rng);
        Ok(())
    }
    /// The honest-shuffler round event (its K-of-n sampling is inside the chain), else the
    /// Gaussian's own unsampled event.
    fn privacy_event(&self) -> PrivacyEvent {
        match self.round {
            Some((epsilon, delta)) => PrivacyEvent::EpsilonDelta { epsilon, delta },
            None => self.gaussian.privacy_event(),
        }
    }
    /// The chain already amplifies by the silo's K-of-n sampling: its event is not sampled
    /// again. Another sampling than the chain's, or no chain guarantee: the Gaussian's own
    /// sampled event.
    fn sampled_event(&self, sampling: Sampling) -> PrivacyEvent {
        match self.round {
            Some((epsilon, delta)) if sampling == self.own_sampling() => {
                PrivacyEvent::EpsilonDelta { epsilon, delta }
            }
            _ => self.gaussian.sampled_event(sampling),
        }
    }
}

impl VectorMechanism for HonestShuffleGaussian {
    fn privatize(&self, v: &mut [f64], rng: &mut DpRng) {
        self.gaussian.privatize(v, rng);
    }
    fn noise_std(&self) -> f64 {
        self.gaussian.noise_std()
    }
}

impl GradientNoise for HonestShuffleGaussian {
    fn round_event(&self, sampling: Sampling) -> PrivacyEvent {
        Mechanism::sampled_event(self, sampling)
    }
}

/// A Shuffled MB-SGD silo: K of n records with replacement, the batch mean plus N(0, σ²I) at
/// the mean's replace-one sensitivity 2L/K, charged at its honest-shuffler round guarantee
/// when `honest` is set (trusted shuffler) and at its own Gaussian event otherwise.
pub(super) fn gaussian_silo(
    ctx: &BuildContext,
    oracle: crate::model::GradientOracle,
    sigma: f64,
    records: usize,
    batch_size: usize,
    honest: Option<HonestShuffle>,
) -> crate::Result<GradientSilo> {
    let gaussian = ctx.gaussian(sigma, 2.0 * ctx.lipschitz / batch_size as f64)?;
    let noise: Box<dyn GradientNoise> = match honest {
        Some(h) => Box::new(HonestShuffleGaussian::new(gaussian, h)?),
        None => Box::new(gaussian),
    };
    Ok(GradientSilo::with_noise(
        oracle,
        BatchSource::sampled(RecordSampling::WithReplacement, records, batch_size)?,
        Some(noise),
        1.0,
    ))
}
