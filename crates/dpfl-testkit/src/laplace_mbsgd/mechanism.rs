//! The Laplace mechanism on a vector (Dwork & Roth 2014, Def. 3.3): v + (Y_1, …, Y_d) with
//! Y_j ~ Lap(b) independent, b = Δ₁/ε₀. For a query whose L1 sensitivity is Δ₁ the release is
//! pure ε₀-DP (Thm 3.6); the event it reports says so (`PrivacyEvent::Laplace` with noise
//! multiplier b/Δ₁ = 1/ε₀), computed from its own parameters.
//!
//! Sampling: Y = −b·sgn(U)·ln(1 − 2|U|) for U uniform on (−½, ½), the inverse of Lap(b)'s
//! distribution function. U is one of the 2⁵³ midpoints (k + ½)/2⁵³ − ½, k drawn uniformly by
//! `dpfl_privacy::sampler::uniform_int` from the silo's ChaCha20 generator, so U is never 0 or
//! ±½ and |Y| ≤ b·ln 2⁵³ ≈ 36.7·b. Floating-point caveat (Mironov 2012, "On significance of
//! the least significant bits for differential privacy"): like every textbook floating-point
//! Laplace sampler, this one's low-order bits are not those of the exact distribution; the
//! continuous Gaussian of `dpfl_privacy::mechanism` carries the same caveat.

use dpfl::algo::gradient::GradientNoise;
use dpfl_privacy::event::Sampling;
use dpfl_privacy::{DpRng, Mechanism, PrivacyEvent, VectorMechanism, sampler};

/// 2⁵³: the number of grid points U is drawn from (every k < 2⁵³ is an exact f64).
const GRID: f64 = 9_007_199_254_740_992.0;

/// v + Lap(b)^d, b = Δ₁/ε₀ (module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct LaplaceMechanism {
    scale: f64,
    sensitivity: f64,
}

impl LaplaceMechanism {
    /// Scale `b` of each coordinate's noise and the L1 sensitivity Δ₁ of the released vector
    /// (to one record under the neighbouring relation it is accounted in); both finite, > 0.
    pub fn new(scale: f64, sensitivity: f64) -> dpfl::Result<Self> {
        for (field, v) in [("laplace scale", scale), ("l1 sensitivity", sensitivity)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(dpfl::Error::config(
                    field,
                    format!("must be finite and > 0, got {v}"),
                ));
            }
        }
        Ok(LaplaceMechanism { scale, sensitivity })
    }

    /// b.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Δ₁.
    pub fn sensitivity(&self) -> f64 {
        self.sensitivity
    }

    /// One Lap(b) draw.
    fn draw(&self, rng: &mut DpRng) -> f64 {
        // lo ≤ hi: `uniform_int` cannot fail here; 0 would still be a valid grid point.
        let k = sampler::uniform_int(rng, 0, (1usize << 53) - 1).unwrap_or(0);
        let u = (k as f64 + 0.5) / GRID - 0.5;
        -self.scale * u.signum() * (1.0 - 2.0 * u.abs()).ln()
    }
}

impl Mechanism for LaplaceMechanism {
    type Input<'a> = [f64];
    type Output = ();
    type Error = std::convert::Infallible;
    fn release(&mut self, v: &mut [f64], rng: &mut DpRng) -> Result<(), Self::Error> {
        self.privatize(v, rng);
        Ok(())
    }
    fn privacy_event(&self) -> PrivacyEvent {
        PrivacyEvent::Laplace {
            noise_multiplier: self.scale / self.sensitivity,
        }
    }
}

impl VectorMechanism for LaplaceMechanism {
    fn privatize(&self, v: &mut [f64], rng: &mut DpRng) {
        for x in v.iter_mut() {
            *x += self.draw(rng);
        }
    }
    fn noise_std(&self) -> f64 {
        // Var Lap(b) = 2b².
        std::f64::consts::SQRT_2 * self.scale
    }
}

impl GradientNoise for LaplaceMechanism {
    /// A batch drawn without replacement holds each record at most once, so the noised mean is
    /// ε₀-DP under replace-one whatever the batch: the unamplified event is charged
    /// (amplification by subsampling is not claimed; leaving it out over-reports, never
    /// under-reports). Any other sampling gets the floor's sampled event.
    fn round_event(&self, sampling: Sampling) -> PrivacyEvent {
        match sampling {
            Sampling::WithoutReplacement { .. } => self.privacy_event(),
            other => self.privacy_event().sampled(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpfl_privacy::rng::Purpose;

    #[test]
    fn laplace_noise_has_the_stated_moments_and_event() {
        // b = 0.5: E|Y| = b = 0.5, Var Y = 2b² = 0.5, P(|Y| > b ln 20) = 1/20.
        let m = LaplaceMechanism::new(0.5, 0.25).unwrap();
        assert_eq!(
            m.privacy_event(),
            PrivacyEvent::Laplace {
                noise_multiplier: 2.0
            }
        );
        let mut rng = DpRng::from_seed(5, Purpose::Silo, 0);
        let mut v = vec![0.0; 200_000];
        m.privatize(&mut v, &mut rng);
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let abs = v.iter().map(|x| x.abs()).sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let tail = v.iter().filter(|x| x.abs() > 0.5 * 20f64.ln()).count() as f64 / n;
        assert!(mean.abs() < 0.008, "{mean}");
        assert!((abs - 0.5).abs() < 0.005, "{abs}");
        assert!((var - 0.5).abs() < 0.01, "{var}");
        assert!((tail - 0.05).abs() < 0.003, "{tail}");
        assert!(LaplaceMechanism::new(0.0, 1.0).is_err());
        assert!(LaplaceMechanism::new(1.0, f64::NAN).is_err());
    }
}
