//! The stochastic quantizer Q_s of DP-NormFedAvg (Das et al., §4, Algorithm 1 lines 1–5;
//! QSGD-style): a coordinate u ∈ [−1, 1] goes to the integer q = s·Q(u) ∈ {−s..s}, rounding
//! x = s·u down to b = min(⌊x⌋, s − 1) with probability 1 − (x − b) and up otherwise.
//!
//! Proof notes: E[q] = b + (x − b) = x, so Q is unbiased; Var[q] = (x−b)(1−(x−b)) ≤ 1/4, i.e.
//! ≤ 1/(4s²) in real units. Decisions (digest §2.1): coordinates are clamped into [−1, 1]
//! first (a unit vector's rounding can exceed 1 by an ulp); b = min(⌊x⌋, s−1) makes u = 1 map
//! to s deterministically; a non-finite coordinate is an error, never a silent value.
//!
//! The quantizer's coin is not privacy noise: Theorem 1's sensitivities are a supremum over
//! the quantizer's outcomes, so its randomness is never credited for privacy, and the coin is
//! a 53-bit uniform from the same ChaCha20 [`DpRng`] (granularity 2^{−53} in P[round up]).

use crate::error::{PrivacyError, Result};
use crate::rng::DpRng;

/// Largest resolution accepted (s·u and s ± m stay exact in f64 and i64).
pub const MAX_S: u64 = 1 << 40;

/// Q_s with resolution s: 2s + 1 levels {−s..s}/s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StochasticQuantizer {
    s: u64,
}

impl StochasticQuantizer {
    /// Q_s for 1 ≤ s ≤ the largest supported resolution.
    pub fn new(s: u64) -> Result<Self> {
        if s == 0 || s > MAX_S {
            return Err(PrivacyError::invalid(
                "s",
                s as f64,
                format!("quantization resolution must lie in [1, {MAX_S}]"),
            ));
        }
        Ok(StochasticQuantizer { s })
    }

    /// Q_s with s required to be a power of two (the paper's experiments use s = 2^j).
    pub fn power_of_two(s: u64) -> Result<Self> {
        if !s.is_power_of_two() {
            return Err(PrivacyError::invalid(
                "s",
                s as f64,
                "quantization resolution must be a power of two",
            ));
        }
        Self::new(s)
    }

    /// The resolution s.
    pub fn s(&self) -> u64 {
        self.s
    }

    /// The per-coordinate variance bound 1/(4s²) (real units).
    pub fn variance_bound(&self) -> f64 {
        0.25 / (self.s as f64 * self.s as f64)
    }

    /// Quantizes `u` into `out` (resized to u's length). Coordinate i of `u` that is not
    /// finite is an error naming i.
    pub fn quantize(&self, u: &[f64], rng: &mut DpRng, out: &mut Vec<i64>) -> Result<()> {
        if let Some(i) = u.iter().position(|x| !x.is_finite()) {
            return Err(PrivacyError::invalid(
                "u",
                u[i],
                format!("coordinate {i} of the vector to quantize is not finite"),
            ));
        }
        out.clear();
        out.reserve(u.len());
        // The coins are the generator's next 64-bit words in order, one per coordinate off
        // the grid (P[round up] > 0), each read as `uniform01` reads it; fetching a chunk's
        // coins in one call consumes exactly the words coordinate-by-coordinate draws would.
        let mut coins = [0u64; 256];
        for chunk in u.chunks(coins.len()) {
            let need = chunk.iter().filter(|&&x| self.split(x).1 > 0.0).count();
            rng.fill_u64(&mut coins[..need]);
            let mut next = coins.iter();
            out.extend(chunk.iter().map(|&x| {
                let (b, up) = self.split(x);
                if up > 0.0 && next.next().is_some_and(|&w| uniform53(w) < up) {
                    b + 1
                } else {
                    b
                }
            }));
        }
        Ok(())
    }

    /// (b, P[round up]) of a finite coordinate: b = min(⌊s·u⌋, s − 1) with u clamped.
    #[inline]
    fn split(&self, u: f64) -> (i64, f64) {
        let s = self.s as f64;
        let x = u.clamp(-1.0, 1.0) * s;
        let b = x.floor().min(s - 1.0);
        (b as i64, x - b)
    }

    /// One coordinate (finite by the caller's check), its coin drawn alone.
    #[cfg(test)]
    fn quantize_one(&self, u: f64, rng: &mut DpRng) -> i64 {
        let (b, up) = self.split(u);
        if up > 0.0 && rng.uniform01() < up {
            b + 1
        } else {
            b
        }
    }
}

/// A word's uniform on [0, 1) with 53 bits, as [`DpRng::uniform01`] (rand's `StandardUniform`).
#[inline]
fn uniform53(w: u64) -> f64 {
    (w >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Purpose;

    #[test]
    fn chunked_coins_are_the_coordinate_by_coordinate_coins() {
        // Grid points (no coin), ends, and off-grid values across several 256-chunks: the
        // same integers and the generator at the same position as one coin per call.
        let q = StochasticQuantizer::new(1 << 12).unwrap();
        let u: Vec<f64> = (0..1000)
            .map(|i| match i % 5 {
                0 => (i as f64 - 500.0) / 4096.0,
                1 => 1.0,
                2 => -1.0,
                _ => ((i * 7919) % 2001) as f64 / 1000.0 - 1.0 + 1e-7,
            })
            .collect();
        let mut a = DpRng::from_seed(4, Purpose::Silo, 9);
        let mut b = DpRng::from_seed(4, Purpose::Silo, 9);
        let want: Vec<i64> = u.iter().map(|&x| q.quantize_one(x, &mut a)).collect();
        let mut got = Vec::new();
        q.quantize(&u, &mut b, &mut got).unwrap();
        assert_eq!(got, want);
        assert_eq!(a.snapshot(), b.snapshot());
    }

    #[test]
    fn grid_points_are_deterministic_and_ends_are_kept() {
        let q = StochasticQuantizer::new(4).unwrap();
        let mut rng = DpRng::from_seed(1, Purpose::Silo, 0);
        let mut out = Vec::new();
        q.quantize(
            &[1.0, -1.0, 0.0, 0.5, -0.25, 1.0 + 1e-16, -3.0],
            &mut rng,
            &mut out,
        )
        .unwrap();
        assert_eq!(out, vec![4, -4, 0, 2, -1, 4, -4]);
        assert!(q.quantize(&[0.1, f64::NAN], &mut rng, &mut out).is_err());
        assert!(StochasticQuantizer::new(0).is_err());
        assert!(StochasticQuantizer::power_of_two(6).is_err());
        assert_eq!(StochasticQuantizer::power_of_two(64).unwrap().s(), 64);
    }

    #[test]
    fn unbiased_with_variance_within_the_bound() {
        // u = 0.3, s = 4: x = 1.2, P[2] = 0.2, mean 1.2, Var = 0.2·0.8 = 0.16 ≤ 1/4.
        let q = StochasticQuantizer::new(4).unwrap();
        let mut rng = DpRng::from_seed(2, Purpose::Silo, 0);
        let n = 200_000;
        let mut out = Vec::new();
        q.quantize(&vec![0.3; n], &mut rng, &mut out).unwrap();
        assert!(out.iter().all(|&v| v == 1 || v == 2));
        let mean = out.iter().sum::<i64>() as f64 / n as f64;
        let var = out.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        // sd of the mean = 0.4/√n = 9e−4; 5 sd.
        assert!((mean - 1.2).abs() < 4.5e-3, "{mean}");
        assert!((var - 0.16).abs() < 4e-3, "{var}");
        assert!(var / 16.0 <= q.variance_bound());
    }
}
