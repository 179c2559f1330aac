//! Noise mechanisms. A mechanism validates its parameters at construction, adds noise only
//! through a [`DpRng`], and reports the [`PrivacyEvent`] one use of it spends.
//!
//! [`Mechanism`] is the one trait every noise source of dpfl implements: a release of an input
//! with the generator, and the event that release spends, computed from the mechanism's own
//! parameters (so a silo half derives its round event from its mechanism and its record
//! sampler, and never keeps an event beside them). Implementors: [`GaussianMechanism`] here;
//! PVEC's randomizer (`crate::shuffle::randomizer`, Cheu et al. 2022 Thm 3.2 / Lemma A.1);
//! in `dpfl`, SoteriaFL's two-part Gaussian (Lemma 3), DP-NormFedAvg's QTDL and Binomial
//! encoders (Das et al. Thm 1; cpSGD Thm 1) and pan-private AC-SA's pair of Gaussians
//! (Cheu et al. App. C, Lemma C.4/C.5).
//!
//! [`GaussianMechanism`] adds either continuous Gaussian noise or, chosen by
//! [`GaussianNoise`] (a config field), exact discrete Gaussian noise on a fixed-point grid
//! (Canonne, Kamath & Steinke 2020, Algorithm 3, in [`crate::discrete`]), so an algorithm
//! switches noise by configuration only.

use serde::{Deserialize, Serialize};

use crate::discrete::DiscreteGaussian;
use crate::error::{PrivacyError, Result};
use crate::event::{PrivacyEvent, Sampling};
use crate::params::positive;
use crate::rng::DpRng;

/// Which Gaussian noise a [`GaussianMechanism`] adds (`privacy.mechanism` in an experiment).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum GaussianNoise {
    /// N(0, σ²) per coordinate, floating point (rand_distr's ziggurat on ChaCha20).
    #[default]
    Gaussian,
    /// The message rounded to the grid `granularity`·ℤ, plus `granularity`·N_ℤ(0, (σ/γ)²)
    /// drawn exactly on integers.
    DiscreteGaussian {
        /// The granularity γ > 0 of the grid γ·ℤ, in the message's units.
        granularity: f64,
    },
}

impl GaussianNoise {
    /// Checks the granularity (finite, > 0).
    pub fn validate(&self) -> Result<()> {
        if let GaussianNoise::DiscreteGaussian { granularity } = *self {
            positive("granularity", granularity)?;
        }
        Ok(())
    }
}

/// A noise source: releases an input with noise drawn from a [`DpRng`] only, and reports the
/// privacy event one release spends (module docs).
pub trait Mechanism {
    /// What one release reads (a vector noised in place, a vector to encode, a record stream).
    type Input<'a>: ?Sized;
    /// What one release returns (`()` for a vector noised in place).
    type Output;
    /// Why a release can fail (a malformed input; never a privacy shortfall).
    type Error;
    /// One release of `input`, every random draw from `rng`.
    fn release(
        &mut self,
        input: &mut Self::Input<'_>,
        rng: &mut DpRng,
    ) -> std::result::Result<Self::Output, Self::Error>;
    /// What one release spends, before any record sampling, from the mechanism's parameters.
    fn privacy_event(&self) -> PrivacyEvent;
    /// What one release spends when its records are drawn by `sampling`: the event amplified
    /// by the sampling, unless the mechanism says otherwise (SoteriaFL's full-batch part is
    /// not sampled).
    fn sampled_event(&self, sampling: Sampling) -> PrivacyEvent {
        self.privacy_event().sampled(sampling)
    }
}

/// A [`Mechanism`] that privatises a vector in place (the Gaussian's shape).
pub trait VectorMechanism: Send + Sync + std::fmt::Debug {
    /// Adds noise to `v` in place.
    fn privatize(&self, v: &mut [f64], rng: &mut DpRng);
    /// Per-coordinate noise standard deviation (for reporting).
    fn noise_std(&self) -> f64;
}

/// The Gaussian mechanism: v + N(0, σ² I) (Dwork & Roth 2014, Thm A.1 for the classical
/// (ε, δ) guarantee; tight accounting in [`crate::accountant`]), or its discrete version.
///
/// **Continuous** ([`GaussianMechanism::new`]). Floating-point caveat (Mironov 2012; Jin et
/// al. 2022 for Gaussian samplers): the sampler is rand_distr's ziggurat on top of ChaCha20,
/// whose low-order bits are not exactly Gaussian.
///
/// **Discrete** ([`GaussianMechanism::with_noise`] with [`GaussianNoise::DiscreteGaussian`]):
/// with grid γ, the release is γ·(round(v/γ) + Y), Y_j ~ N_ℤ(0, (σ/γ)²) i.i.d. by Canonne,
/// Kamath & Steinke (2020), Algorithm 3 — integer arithmetic only. Rounding to the nearest
/// grid point moves each coordinate by ≤ γ/2, so ‖round(a/γ) − round(b/γ)‖₂ ≤ ‖a − b‖₂/γ + √d
/// (triangle inequality; the deterministic branch (Δ + γ√d)² of Kairouz, Liu & Steinke 2021,
/// "The Distributed Discrete Gaussian Mechanism", §4 eq. for Δ̃₂, whose other branch needs
/// their conditional randomized rounding). The event is therefore the discrete Gaussian with
/// noise multiplier σ/(Δ + γ√d), accounted by CKS20 Thm 4 and Thm 14 (ρ = Δ̃²/(2σ²) zCDP,
/// the continuous Gaussian's RDP curve). To keep the calibrated noise multiplier, σ is scaled
/// up by (Δ + γ√d)/Δ; the sampled variance σ² is rounded up to a rational.
#[derive(Debug, Clone, PartialEq)]
pub struct GaussianMechanism {
    sigma: f64,
    sensitivity: f64,
    discrete: Option<Discrete>,
}

#[derive(Debug, Clone, PartialEq)]
struct Discrete {
    granularity: f64,
    /// Δ + γ√d, the sensitivity after rounding to the grid.
    rounded_sensitivity: f64,
    dim: usize,
    sampler: DiscreteGaussian,
}

impl GaussianMechanism {
    /// `sigma`: noise standard deviation per coordinate; `sensitivity`: L2 sensitivity of the
    /// released vector to one record occurrence under the relation the event is accounted in.
    pub fn new(sigma: f64, sensitivity: f64) -> Result<Self> {
        Ok(GaussianMechanism {
            sigma: positive("sigma", sigma)?,
            sensitivity: positive("sensitivity", sensitivity)?,
            discrete: None,
        })
    }

    /// The mechanism calibrated to noise multiplier σ/Δ with the given noise, on vectors of
    /// length `dim`. For [`GaussianNoise::DiscreteGaussian`], σ becomes σ·(Δ + γ√d)/Δ so the
    /// event's noise multiplier σ/(Δ + γ√d) stays the calibrated σ/Δ (type docs).
    pub fn with_noise(
        noise: GaussianNoise,
        sigma: f64,
        sensitivity: f64,
        dim: usize,
    ) -> Result<Self> {
        let base = Self::new(sigma, sensitivity)?;
        noise.validate()?;
        let GaussianNoise::DiscreteGaussian { granularity } = noise else {
            return Ok(base);
        };
        if dim == 0 {
            return Err(PrivacyError::invalid("dim", 0.0, "must be at least 1"));
        }
        let rounded_sensitivity = sensitivity + granularity * (dim as f64).sqrt();
        let sigma = sigma * rounded_sensitivity / sensitivity;
        let sampler = DiscreteGaussian::new(sigma / granularity)
            .map_err(|e| PrivacyError::invalid("granularity", granularity, e.to_string()))?;
        Ok(GaussianMechanism {
            sigma,
            sensitivity,
            discrete: Some(Discrete {
                granularity,
                rounded_sensitivity,
                dim,
                sampler,
            }),
        })
    }

    /// σ, the standard deviation of the noise per coordinate, in the message's units.
    pub fn sigma(&self) -> f64 {
        self.sigma
    }
    /// Δ₂ before any rounding to a grid.
    pub fn sensitivity(&self) -> f64 {
        self.sensitivity
    }
    /// σ / Δ₂ for the continuous mechanism; σ / (Δ₂ + γ√d) for the discrete one.
    pub fn noise_multiplier(&self) -> f64 {
        match &self.discrete {
            None => self.sigma / self.sensitivity,
            Some(d) => self.sigma / d.rounded_sensitivity,
        }
    }
    /// The grid γ of the discrete mechanism.
    pub fn granularity(&self) -> Option<f64> {
        self.discrete.as_ref().map(|d| d.granularity)
    }
}

/// Largest grid index a coordinate is rounded to: |v/γ| beyond it is clamped, which only
/// shrinks differences (a 1-Lipschitz map), so the sensitivity bound still holds.
const MAX_INDEX: f64 = 9.0e15; // < 2^53: every index is an exact f64 and i64

impl Mechanism for GaussianMechanism {
    type Input<'a> = [f64];
    type Output = ();
    type Error = std::convert::Infallible;
    fn release(
        &mut self,
        v: &mut [f64],
        rng: &mut DpRng,
    ) -> std::result::Result<(), std::convert::Infallible> {
        self.privatize(v, rng);
        Ok(())
    }
    fn privacy_event(&self) -> PrivacyEvent {
        match &self.discrete {
            None => PrivacyEvent::Gaussian {
                noise_multiplier: self.noise_multiplier(),
            },
            // Lattice units: shift ≤ (Δ + γ√d)/γ steps, σ/γ noise; the ratio is unchanged.
            Some(d) => PrivacyEvent::DiscreteGaussian {
                noise_multiplier: self.noise_multiplier(),
                l2_sensitivity: d.rounded_sensitivity / d.granularity,
                dimension: d.dim as u64,
            },
        }
    }
}

impl VectorMechanism for GaussianMechanism {
    fn privatize(&self, v: &mut [f64], rng: &mut DpRng) {
        match &self.discrete {
            None => {
                for x in v.iter_mut() {
                    *x += self.sigma * rng.standard_normal();
                }
            }
            Some(d) => {
                debug_assert!(
                    v.len() <= d.dim,
                    "vector longer than the calibrated dimension"
                );
                for x in v.iter_mut() {
                    // NaN (never expected: gradients are made finite before clipping) maps to 0.
                    let k = (*x / d.granularity).round();
                    let k = if k.is_nan() {
                        0.0
                    } else {
                        k.clamp(-MAX_INDEX, MAX_INDEX)
                    } as i64;
                    let y = d.sampler.sample(rng);
                    *x = d.granularity * k.saturating_add(y) as f64;
                }
            }
        }
    }
    fn noise_std(&self) -> f64 {
        // The discrete Gaussian's variance is at most σ² (CKS20 Prop. 19).
        self.sigma
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Purpose;

    #[test]
    fn gaussian_noise_has_the_stated_moments() {
        let m = GaussianMechanism::new(2.0, 0.5).unwrap();
        assert_eq!(m.noise_multiplier(), 4.0);
        let mut rng = DpRng::from_seed(3, Purpose::Silo, 0);
        let mut v = vec![1.0; 200_000];
        m.privatize(&mut v, &mut rng);
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        // mean 1 ± 5·2/√n = ±0.0224; variance 4 ± 5·4·√(2/n) = ±0.063.
        assert!((mean - 1.0).abs() < 0.0224, "mean {mean}");
        assert!((var - 4.0).abs() < 0.063, "var {var}");
        assert_eq!(
            m.privacy_event(),
            PrivacyEvent::Gaussian {
                noise_multiplier: 4.0
            }
        );
    }

    #[test]
    fn discrete_mechanism_keeps_the_noise_multiplier_and_lands_on_the_grid() {
        // Δ = 0.5, γ = 2^-10, d = 16: Δ̃ = 0.5 + 2^-10·4 = 0.50390625; σ = 2·Δ̃/Δ = 2.015625.
        let noise = GaussianNoise::DiscreteGaussian {
            granularity: 1.0 / 1024.0,
        };
        let m = GaussianMechanism::with_noise(noise, 2.0, 0.5, 16).unwrap();
        assert_eq!(m.sigma(), 2.015625);
        assert_eq!(m.noise_multiplier(), 4.0);
        assert_eq!(
            m.privacy_event(),
            // Δ̃/γ = 0.50390625·1024 = 516 lattice steps over 16 coordinates.
            PrivacyEvent::DiscreteGaussian {
                noise_multiplier: 4.0,
                l2_sensitivity: 516.0,
                dimension: 16,
            }
        );
        let mut rng = DpRng::from_seed(3, Purpose::Silo, 0);
        let mut v = vec![0.3; 16];
        m.privatize(&mut v, &mut rng);
        for x in &v {
            assert_eq!((x * 1024.0).fract(), 0.0, "{x} is off the grid");
        }
        // 40 000 draws of noise around 1.0 (on the grid): mean 1 ± 5σ/√n = ±0.05.
        let mut v = vec![1.0; 40_000];
        let m = GaussianMechanism::with_noise(noise, 2.0, 0.5, 40_000).unwrap();
        m.privatize(&mut v, &mut rng);
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        assert!((mean - 1.0).abs() < 5.0 * m.sigma() / 200.0, "mean {mean}");
        assert!(
            GaussianMechanism::with_noise(
                GaussianNoise::DiscreteGaussian { granularity: 0.0 },
                1.0,
                1.0,
                3
            )
            .is_err()
        );
        // σ/γ = 1e12 is beyond the exact sampler's range: refused, naming the granularity.
        let e = GaussianMechanism::with_noise(
            GaussianNoise::DiscreteGaussian { granularity: 1e-12 },
            1.0,
            1.0,
            3,
        )
        .unwrap_err();
        assert!(e.to_string().contains("granularity"), "{e}");
    }

    #[test]
    fn release_is_privatize_and_the_sampled_event_is_the_event_amplified() {
        // The trait's release draws exactly what privatize draws, from the same stream.
        for noise in [
            GaussianNoise::Gaussian,
            GaussianNoise::DiscreteGaussian {
                granularity: 1.0 / 256.0,
            },
        ] {
            let mut m = GaussianMechanism::with_noise(noise, 0.7, 0.2, 8).unwrap();
            let (mut a, mut b) = (vec![0.25; 8], vec![0.25; 8]);
            let mut r1 = DpRng::from_seed(4, Purpose::Silo, 2);
            let mut r2 = DpRng::from_seed(4, Purpose::Silo, 2);
            m.privatize(&mut a, &mut r1);
            let Ok(()) = m.release(&mut b, &mut r2);
            assert_eq!(a, b);
            let s = Sampling::Poisson { rate: 0.1 };
            assert_eq!(m.sampled_event(s.clone()), m.privacy_event().sampled(s));
        }
        // Twice σ: twice the noise multiplier (3 → 6).
        let e = |sigma| GaussianMechanism::new(sigma, 0.25).unwrap().privacy_event();
        assert_eq!(
            e(0.75),
            PrivacyEvent::Gaussian {
                noise_multiplier: 3.0
            }
        );
        assert_eq!(
            e(1.5),
            PrivacyEvent::Gaussian {
                noise_multiplier: 6.0
            }
        );
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(GaussianMechanism::new(0.0, 1.0).is_err());
        assert!(GaussianMechanism::new(1.0, -1.0).is_err());
        assert!(GaussianMechanism::new(f64::NAN, 1.0).is_err());
    }
}
