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
//! the quantizer's outcomes, so its randomness is never credited for privacy. It is still
//! exact: P[round up] = x − b exactly (x − b is an exact dyadic in f64), by a lazy comparison
//! of uniform bits from the same ChaCha20 [`DpRng`] with x − b's binary digits
//! ([`Bits::below_f64`]: 8 bits decide it unless they tie, probability 2^{−8}), read from one
//! bulk reader per vector. Issue 14, session 9: this replaced a 53-bit uniform per coin (a
//! 64-bit word each, granularity 2^{−53}); the coins, hence the quantized values of a seeded
//! run, changed, not their law, and the encode of d = 328,810 coordinates fetches ≈ 0.34 MB of
//! keystream for its coins instead of 2.6 MB (BENCHMARKS.md).

use super::bits::Bits;
use crate::error::{PrivacyError, Result};
use crate::rng::DpRng;

/// Largest resolution accepted (s·u and s ± m stay exact in f64 and i64).
pub const MAX_S: u64 = 1 << 40;
/// Coins decided from one [`Bits::peek`] window (8 bits each, 56 ≤ 57 bits).
const COINS_PER_WINDOW: usize = 7;

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
        // One bulk bit reader for the whole vector: the coins are exactly those of one
        // word-by-word reader (`Bits`), each consuming ≈ 8 bits.
        let mut bits = Bits::bulk(rng);
        // Up to seven coins from one 57-bit window: a coin whose first 8 bits differ from
        // the first 8 digits of P[round up] is decided by them (what `below_f64` does with the
        // same bits); on a tie the bits before it are consumed and `below_f64` re-reads the
        // tied 8 bits and goes on, so the coins are `below_f64`'s, one after the other.
        // Each coordinate in fixed point with 8 fraction bits: z = s·u·2^8 is exact (powers of
        // two), ⌊z⌋ = 2^8·b + top with b = ⌊s·u⌋ and top the first 8 binary digits of
        // P[round up] = s·u − b; s·u is on the grid (no coin, no bits) iff top = 0 and z is
        // an integer. At u = 1 this gives b = s with no coin, the same value and bits as
        // `split`'s (s − 1, P = 1) with `below_f64`.
        let s256 = self.s as f64 * 256.0;
        let mut rest = u;
        while !rest.is_empty() {
            let win = bits.peek();
            let mut used = 0;
            let mut done = 0;
            for &x in rest.iter().take(COINS_PER_WINDOW) {
                done += 1;
                let z = x.clamp(-1.0, 1.0) * s256;
                let zi = floor_i64(z);
                let (b, top) = (zi >> 8, (zi & 0xff) as u64);
                if top == 0 && zi as f64 == z {
                    out.push(b);
                    continue;
                }
                let c = (win >> used) & 0xff;
                if c == top {
                    bits.advance(used);
                    used = 0;
                    let (b, up) = self.split(x);
                    out.push(b + i64::from(bits.below_f64(up)));
                    break;
                }
                out.push(b + i64::from(c < top));
                used += 8;
            }
            bits.advance(used);
            rest = &rest[done..];
        }
        Ok(())
    }

    /// (b, P[round up]) of a finite coordinate: b = min(⌊s·u⌋, s − 1) with u clamped.
    #[inline]
    fn split(&self, u: f64) -> (i64, f64) {
        let s = self.s as f64;
        let x = u.clamp(-1.0, 1.0) * s;
        let b = floor_i64(x).min(self.s as i64 - 1);
        (b, x - b as f64)
    }

    /// One coordinate (finite by the caller's check), its coin drawn alone.
    #[cfg(test)]
    fn quantize_one(&self, u: f64, bits: &mut Bits<'_>) -> i64 {
        let (b, up) = self.split(u);
        b + i64::from(up > 0.0 && bits.below_f64(up))
    }
}

/// ⌊x⌋ for |x| ≤ 2^62 without a libm call (`floor` is not inlined without SSE4.1): the
/// truncation toward zero is exact, and one step down corrects it below zero.
#[inline]
fn floor_i64(x: f64) -> i64 {
    let t = x as i64;
    t - i64::from((t as f64) > x)
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
        let mut word_reader = Bits::new(&mut a);
        let want: Vec<i64> = u
            .iter()
            .map(|&x| q.quantize_one(x, &mut word_reader))
            .collect();
        drop(word_reader);
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
        // Off the grid the floor is exact on both sides of zero: −0.3·4 = −1.2 → (−2, 0.8),
        // 0.3·4 = 1.2 → (1, 0.2) (to f64 rounding), 1 − 2^−40 → (3, 1 − 2^−38).
        let (b, up) = q.split(-0.3);
        assert_eq!(b, -2);
        assert!((up - 0.8).abs() < 1e-15);
        let (b, up) = q.split(0.3);
        assert_eq!(b, 1);
        assert!((up - 0.2).abs() < 1e-15);
        assert_eq!(
            q.split(1.0 - libm::ldexp(1.0, -40)),
            (3, 1.0 - libm::ldexp(1.0, -38))
        );
        assert_eq!(q.split(-1.0), (-4, 0.0));
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
