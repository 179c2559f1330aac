//! Stochastic quantisers: QSGD's s-level random dithering (Alistarh et al. 2017, §3.1) and
//! natural compression (Horváth et al. 2019, §3). Both round each coordinate at random to one
//! of the two grid points around it, with the probability that makes the mean exact.

use super::{Compressed, Compressor, check_input};
use crate::algo::message::compressed::{MAX_LEVELS, POWER_BITS, level_width};
use crate::algo::message::{PackedInts, Payload};
use dpfl_privacy::DpRng;
use dpfl_privacy::sampler::bernoulli;

/// QSGD with s levels: C(x)_j = ‖x‖·sign(x_j)·ζ_j/s with ζ_j = ⌊s|x_j|/‖x‖⌋ + Bernoulli(frac),
/// ω = min(d/s², √d/s) (Alistarh et al. Lemma 3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Qsgd {
    dim: usize,
    s: u32,
}

impl Qsgd {
    /// QSGD on d-vectors with s = `levels` (1 ≤ s ≤ `MAX_LEVELS`); ω = min(d/s², √d/s).
    pub fn new(dim: usize, levels: u32) -> crate::Result<Self> {
        if levels == 0 || levels > MAX_LEVELS {
            return Err(crate::Error::config(
                "compressor.levels",
                format!("must be in 1..={MAX_LEVELS}, got {levels}"),
            ));
        }
        if u32::try_from(dim).is_err() {
            return Err(crate::Error::config(
                "compressor.levels",
                format!("quantisation needs a dimension below 2^32, got {dim}"),
            ));
        }
        Ok(Qsgd { dim, s: levels })
    }
}

impl Compressor for Qsgd {
    fn name(&self) -> &'static str {
        "qsgd"
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn omega(&self) -> f64 {
        let (d, s) = (self.dim as f64, f64::from(self.s));
        (d / (s * s)).min(d.sqrt() / s)
    }
    fn message_bits(&self) -> u64 {
        64 + u64::from(level_width(self.s)) * self.dim as u64
    }
    fn compress(&self, x: &[f64], rng: &mut DpRng) -> crate::Result<Payload> {
        check_input(x, self.dim)?;
        let norm = crate::linalg::norm2(x);
        if !norm.is_finite() {
            return Err(crate::Error::Protocol(
                "the vector to quantise has an infinite norm".into(),
            ));
        }
        let s = self.s;
        let sf = f64::from(s);
        let codes: Vec<u64> = x
            .iter()
            .map(|&v| {
                if norm == 0.0 || v == 0.0 {
                    return u64::from(s);
                }
                let r = (sf * v.abs() / norm).min(sf);
                let lo = r.floor();
                // lo ≤ s; rounding up from lo = s has probability 0.
                let level = (lo as u64 + u64::from(bernoulli(rng, r - lo))).min(u64::from(s));
                if v < 0.0 {
                    u64::from(s) - level
                } else {
                    u64::from(s) + level
                }
            })
            .collect();
        Ok(Payload::Compressed(Compressed::Levels {
            s,
            scale: norm / sf,
            codes: PackedInts::pack(level_width(s), &codes)?,
        }))
    }
}

/// Natural compression: each coordinate to ±2^⌊log₂|x_j|⌋ or ±2^(⌊log₂|x_j|⌋+1), up with
/// probability |x_j|/2^⌊log₂|x_j|⌋ − 1; ω = 1/8 (Horváth et al. Theorem 1: the worst ratio
/// (t − 1)(2 − t)/t² over t ∈ [1, 2] is 1/8, at t = 4/3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Natural {
    dim: usize,
}

impl Natural {
    /// Natural compression of d-vectors (ω = 1/8).
    pub fn new(dim: usize) -> Self {
        Natural { dim }
    }
}

/// The 12-bit code of one coordinate's random power of two.
fn natural_code(v: f64, rng: &mut DpRng) -> crate::Result<u64> {
    let a = v.abs();
    let (lo, hi) = if a < f64::MIN_POSITIVE {
        (0.0, f64::MIN_POSITIVE)
    } else {
        let lo = f64::from_bits(a.to_bits() & 0xfff0_0000_0000_0000);
        (lo, 2.0 * lo)
    };
    let r = if a == lo {
        lo
    } else {
        if !hi.is_finite() {
            return Err(crate::Error::Protocol(format!(
                "natural compression of {v}: 2^1024 is not an f64"
            )));
        }
        // a − lo and hi − lo are exact (Sterbenz; hi − lo = lo, or 2^−1022).
        if bernoulli(rng, (a - lo) / (hi - lo)) {
            hi
        } else {
            lo
        }
    };
    Ok((r.to_bits() >> 52) | (u64::from(v.is_sign_negative()) << 11))
}

impl Compressor for Natural {
    fn name(&self) -> &'static str {
        "natural"
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn omega(&self) -> f64 {
        0.125
    }
    fn message_bits(&self) -> u64 {
        u64::from(POWER_BITS) * self.dim as u64
    }
    fn compress(&self, x: &[f64], rng: &mut DpRng) -> crate::Result<Payload> {
        check_input(x, self.dim)?;
        let codes = x
            .iter()
            .map(|&v| natural_code(v, rng))
            .collect::<crate::Result<Vec<u64>>>()?;
        Ok(Payload::Compressed(Compressed::PowersOfTwo(
            PackedInts::pack(POWER_BITS, &codes)?,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{monte_carlo, vector};
    use super::*;
    use dpfl_privacy::rng::Purpose;

    /// E‖C(x) − x‖² for QSGD in closed form: Σ_j (‖x‖/s)²·p_j(1 − p_j), p_j the fraction.
    fn qsgd_variance(x: &[f64], s: f64) -> f64 {
        let n = crate::linalg::norm2(x);
        x.iter()
            .map(|v| {
                let r = s * v.abs() / n;
                let p = r - r.floor();
                (n / s).powi(2) * p * (1.0 - p)
            })
            .sum()
    }

    #[test]
    fn qsgd_is_unbiased_with_its_exact_variance_below_omega() {
        let x = vector(30);
        let xx = crate::linalg::dot(&x, &x);
        for s in [1u32, 4] {
            let c = Qsgd::new(30, s).unwrap();
            let (bias, var) = monte_carlo(&c, &x, 40_000, 21);
            let exact = qsgd_variance(&x, f64::from(s)) / xx;
            // Per coordinate sd of the mean ≤ (‖x‖/s)/2/200 ≤ 0.0025·‖x‖.
            assert!(bias < 0.0125, "s = {s}: bias {bias}");
            assert!(
                (var - exact).abs() < 0.03 * exact,
                "s = {s}: {var} vs {exact}"
            );
            assert!(exact <= c.omega(), "s = {s}: {exact} > ω = {}", c.omega());
        }
        // ω = min(d/s², √d/s): d = 30, s = 4 → min(1.875, 1.369).
        assert_eq!(Qsgd::new(30, 4).unwrap().omega(), 30f64.sqrt() / 4.0);
        assert_eq!(Qsgd::new(4, 4).unwrap().omega(), 0.25);
    }

    #[test]
    fn qsgd_codes_and_bits_are_exact() {
        let c = Qsgd::new(5, 2).unwrap();
        // x = (3, 0, −4, 0, 0): ‖x‖ = 5; s|x_j|/‖x‖ = 1.2, 0, 1.6.
        let x = [3.0, 0.0, -4.0, 0.0, 0.0];
        let mut rng = DpRng::from_seed(2, Purpose::Silo, 0);
        let p = c.compress(&x, &mut rng).unwrap();
        // 64 (scale) + 5 codes × 3 bits (2s + 1 = 5 values).
        assert_eq!((p.bits(), c.message_bits()), (79, 79));
        let Payload::Compressed(Compressed::Levels { s, scale, codes }) = &p else {
            panic!("QSGD travels as Compressed::Levels")
        };
        assert_eq!((*s, *scale), (2, 2.5));
        let codes = codes.unpack();
        assert!(codes[0] == 3 || codes[0] == 4, "{codes:?}");
        assert!(codes[2] == 1 || codes[2] == 0, "{codes:?}");
        assert_eq!((codes[1], codes[3], codes[4]), (2, 2, 2));
        // The zero vector quantises to zero.
        let z = c.compress(&[0.0; 5], &mut rng).unwrap();
        let mut out = [1.0; 5];
        z.add_to(1.0, &mut out).unwrap();
        assert_eq!(out, [1.0; 5]);
        assert!(
            c.compress(&[f64::MAX, f64::MAX, 0.0, 0.0, 0.0], &mut rng)
                .is_err()
        );
    }

    #[test]
    fn natural_compression_is_unbiased_with_omega_one_eighth() {
        let x = vector(30);
        let c = Natural::new(30);
        let (bias, var) = monte_carlo(&c, &x, 40_000, 31);
        assert!(bias < 0.01, "bias {bias}");
        assert!(var <= 0.125 && var > 0.01, "ratio {var}");
        // At t = 4/3 of a power of two the ratio is exactly 1/8: (1/3)(2/3)/(16/9).
        let worst = vec![-4.0 / 3.0; 8];
        let (bias, var) = monte_carlo(&Natural::new(8), &worst, 40_000, 32);
        assert!(bias < 0.01, "bias {bias}");
        assert!((var - 0.125).abs() < 0.004, "ratio {var} vs 1/8");
    }

    #[test]
    fn natural_codes_are_sign_and_exponent() {
        let c = Natural::new(5);
        let mut rng = DpRng::from_seed(4, Purpose::Silo, 0);
        // Powers of two and zero are kept exactly; 3 goes to 2 or 4.
        let x = [1.0, -0.5, 0.0, 1024.0, 3.0];
        let p = c.compress(&x, &mut rng).unwrap();
        assert_eq!((p.bits(), c.message_bits()), (60, 60));
        let mut out = [0.0; 5];
        p.add_to(1.0, &mut out).unwrap();
        assert_eq!(&out[..4], &x[..4]);
        assert!(out[4] == 2.0 || out[4] == 4.0);
        // Subnormals round between 0 and 2^−1022; 2^1023·1.5 has no upper power.
        let tiny = f64::MIN_POSITIVE / 4.0;
        let mut ups = 0;
        for _ in 0..4000 {
            let p = Natural::new(1).compress(&[tiny], &mut rng).unwrap();
            let mut o = [0.0];
            p.add_to(1.0, &mut o).unwrap();
            assert!(o[0] == 0.0 || o[0] == f64::MIN_POSITIVE);
            ups += usize::from(o[0] > 0.0);
        }
        assert!(
            (ups as f64 - 1000.0).abs() < 150.0,
            "{ups} of 4000 up, expected 1000"
        );
        assert!(
            Natural::new(1)
                .compress(&[1.5 * 2f64.powi(1023)], &mut rng)
                .is_err()
        );
        assert!(
            Natural::new(1)
                .compress(&[2f64.powi(1023)], &mut rng)
                .is_ok()
        );
    }
}
