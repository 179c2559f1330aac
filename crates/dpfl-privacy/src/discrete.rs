//! Exact samplers on the integers, after Canonne, Kamath & Steinke, "The Discrete Gaussian for
//! Differential Privacy" (NeurIPS 2020; CKS20 below), §5: Bernoulli(exp(−γ)) (Algorithm 1),
//! the discrete Laplace (Algorithm 2) and the discrete Gaussian (Algorithm 3).
//!
//! The only randomness is uniform integers from the ChaCha20 [`DpRng`]; every comparison is
//! on integers (u128), so no floating-point rounding can shape the output distribution — the
//! attack surface of Mironov (2012) and Jin et al. (2022) on floating-point noise. Parameters
//! are rationals: a caller's f64 σ is turned into σ² = p/q rounded *up* (more noise, never
//! less, than the σ its privacy event reports).
//!
//! One documented departure from exactness: in Algorithm 3, a candidate so far in the tail
//! that the acceptance exponent's numerator overflows u128 (γ ≥ 2^30 then) runs the first
//! min(γ, 2^40) Bernoulli(e^−1) trials of Algorithm 1 exactly and then rejects — the exact
//! algorithm would accept only after at least 2^30 consecutive successes of probability e^−1,
//! an event of probability below e^−(2^30) that cannot occur in any run.

use rand::RngExt;

use crate::error::{PrivacyError, Result};
use crate::rng::DpRng;

/// Bernoulli(n/d) exactly, for 0 ≤ n ≤ d, d > 0: a uniform integer below d is below n.
fn bernoulli_ratio(rng: &mut DpRng, n: u128, d: u128) -> bool {
    if n >= d {
        return true;
    }
    rng.inner().random_range(0..d) < n
}

/// Bernoulli(exp(−n/d)) exactly (CKS20 Algorithm 1), for d > 0.
pub(crate) fn bernoulli_exp(rng: &mut DpRng, n: u128, d: u128) -> bool {
    let whole = n / d;
    // exp(−γ) = exp(−1)^⌊γ⌋ · exp(−(γ − ⌊γ⌋)) (Algorithm 1, the γ > 1 branch).
    for _ in 0..whole {
        if !bernoulli_exp_unit(rng, 1, 1) {
            return false;
        }
    }
    bernoulli_exp_unit(rng, n % d, d)
}

/// Bernoulli(exp(−n/d)) for 0 ≤ n/d ≤ 1 (CKS20 Algorithm 1, the γ ∈ [0, 1] branch): draw
/// A_k ~ Bernoulli(γ/k) for k = 1, 2, … until the first A_k = 0; return whether that k is odd.
/// P[K > k] = γ^k/k!, so P[K odd] = Σ_k (−γ)^k/k! = exp(−γ).
pub(crate) fn bernoulli_exp_unit(rng: &mut DpRng, n: u128, d: u128) -> bool {
    let mut k: u128 = 1;
    loop {
        // γ/k = n/(d·k); d·k overflows only after ~2^64 successes of probability ≤ 1/k.
        let Some(dk) = d.checked_mul(k) else {
            return k % 2 == 1;
        };
        if !bernoulli_ratio(rng, n, dk) {
            return k % 2 == 1;
        }
        k += 1;
    }
}

/// Bernoulli(exp(−γ)) for a γ known only to be at least `lower` = ⌊2^128/den⌋ ≥ 2^30 (γ's
/// numerator overflowed; den < 2^98 for every accepted σ): exact up to the documented cap of
/// min(lower, 2^40) trials (module docs).
fn bernoulli_exp_huge(rng: &mut DpRng, lower: u128) -> bool {
    let cap = lower.min(1 << 40);
    for _ in 0..cap {
        if !bernoulli_exp_unit(rng, 1, 1) {
            return false;
        }
    }
    false
}

/// One draw of the discrete Laplace Lap_ℤ(t/s): P[Y = y] ∝ exp(−|y|·s/t), for positive
/// integers s, t (CKS20 Algorithm 2).
pub(crate) fn discrete_laplace_draw(rng: &mut DpRng, s: u64, t: u64) -> i64 {
    loop {
        let u = rng.inner().random_range(0..t);
        if !bernoulli_exp(rng, u128::from(u), u128::from(t)) {
            continue;
        }
        // V ~ Geometric(1 − e^−1) on {0, 1, …}.
        let mut v: u64 = 0;
        while bernoulli_exp_unit(rng, 1, 1) {
            v = v.saturating_add(1);
        }
        let x = u.saturating_add(t.saturating_mul(v));
        let y = (x / s).min(i64::MAX as u64) as i64;
        let negative = rng.inner().random::<bool>();
        if negative && y == 0 {
            continue;
        }
        return if negative { -y } else { y };
    }
}

/// The discrete Laplace distribution on ℤ with scale `scale` = t/s (rational):
/// P[Y = y] = (e^{1/scale} − 1)/(e^{1/scale} + 1) · e^{−|y|/scale} (CKS20 Def. 26 / Algorithm
/// 2; Ghosh, Roughgarden & Sundararajan 2012's two-sided geometric with α = e^{−1/scale}).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscreteLaplace {
    s: u64,
    t: u64,
}

impl DiscreteLaplace {
    /// Scale t/s from positive integers.
    pub fn new(t: u64, s: u64) -> Result<Self> {
        if s == 0 || t == 0 {
            return Err(PrivacyError::invalid(
                "scale",
                if s == 0 { s as f64 } else { t as f64 },
                "discrete Laplace scale t/s needs positive integers t and s",
            ));
        }
        Ok(DiscreteLaplace { s, t })
    }
    /// One exact draw from the discrete Laplace with scale t/s (CKS20 Algorithm 2), from ChaCha20
    /// words only.
    pub fn sample(&self, rng: &mut DpRng) -> i64 {
        discrete_laplace_draw(rng, self.s, self.t)
    }
}

/// Largest σ (in grid units) accepted: keeps every intermediate of Algorithm 3 within u128.
pub const MAX_SIGMA: f64 = 16_777_216.0; // 2^24
/// Smallest σ accepted.
pub const MIN_SIGMA: f64 = 1.0 / 1024.0;

/// The discrete Gaussian N_ℤ(0, σ²): P[Y = y] ∝ exp(−y²/(2σ²)) on ℤ (CKS20 Def. 1), sampled
/// exactly by CKS20 Algorithm 3 with σ² = p/q rational.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscreteGaussian {
    /// σ² = p/q.
    p: u128,
    q: u128,
    /// t = ⌊σ⌋ + 1, the proposal's Laplace scale.
    t: u64,
    /// 2·t²·p·q, the denominator of the acceptance exponent.
    den: u128,
}

impl DiscreteGaussian {
    /// N_ℤ(0, σ²) with σ² rounded up to a rational p/q: q is the power of two that gives p at
    /// least 2^30 (σ² raised by less than 2^−29 relative), q = 1 for σ ≥ 2^15.
    pub fn new(sigma: f64) -> Result<Self> {
        if !(sigma.is_finite() && (MIN_SIGMA..=MAX_SIGMA).contains(&sigma)) {
            return Err(PrivacyError::invalid(
                "sigma",
                sigma,
                format!(
                    "discrete Gaussian sigma (in grid units) must lie in [{MIN_SIGMA}, {MAX_SIGMA}]; \
                     change the granularity"
                ),
            ));
        }
        let s2 = sigma * sigma;
        let mut q: u128 = 1;
        while (s2 * q as f64) < (1u64 << 30) as f64 {
            q <<= 1;
        }
        // s2·q ≤ 2^48, so f64's relative rounding of σ² and of the product (≤ 2^−52 each)
        // moves s2·q by less than 1/2: ceil + 1 is at least the exact σ²·q.
        let p = (s2 * q as f64).ceil() as u128 + 1;
        Self::from_rational(p, q)
    }

    /// N_ℤ(0, p/q) for positive integers p, q (σ² = p/q exactly).
    pub fn from_rational(p: u128, q: u128) -> Result<Self> {
        if p == 0 || q == 0 {
            return Err(PrivacyError::invalid(
                "sigma",
                0.0,
                "discrete Gaussian variance p/q needs positive p and q",
            ));
        }
        // t = ⌊σ⌋ + 1 = ⌊√(p/q)⌋ + 1, computed on integers.
        let mut t = ((p as f64 / q as f64).sqrt().floor()) as u128;
        while t * t * q > p {
            t -= 1;
        }
        while (t + 1) * (t + 1) * q <= p {
            t += 1;
        }
        let t = t + 1;
        let den = 2u128
            .checked_mul(t * t)
            .and_then(|x| x.checked_mul(p))
            .and_then(|x| x.checked_mul(q))
            .ok_or_else(|| {
                PrivacyError::invalid(
                    "sigma",
                    p as f64 / q as f64,
                    "discrete Gaussian variance too large or too finely given",
                )
            })?;
        let t = u64::try_from(t).map_err(|_| {
            PrivacyError::invalid("sigma", p as f64 / q as f64, "discrete Gaussian too wide")
        })?;
        Ok(DiscreteGaussian { p, q, t, den })
    }

    /// σ² as the rational (p, q) actually sampled.
    pub fn variance_rational(&self) -> (u128, u128) {
        (self.p, self.q)
    }

    /// One draw (CKS20 Algorithm 3): Y ~ Lap_ℤ(t), accepted with probability
    /// exp(−(|Y| − σ²/t)²/(2σ²)) = exp(−(|Y|·t·q − p)² / (2·t²·p·q)).
    pub fn sample(&self, rng: &mut DpRng) -> i64 {
        loop {
            let y = discrete_laplace_draw(rng, 1, self.t);
            let a = (y.unsigned_abs() as u128)
                .checked_mul(u128::from(self.t))
                .and_then(|x| x.checked_mul(self.q));
            let accept = match a {
                Some(a) => {
                    let m = a.abs_diff(self.p);
                    match m.checked_mul(m) {
                        Some(num) => bernoulli_exp(rng, num, self.den),
                        None => bernoulli_exp_huge(rng, u128::MAX / self.den),
                    }
                }
                // γ's numerator ≥ 2^128 here too.
                None => bernoulli_exp_huge(rng, u128::MAX / self.den),
            };
            if accept {
                return y;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Purpose;

    fn rng() -> DpRng {
        DpRng::from_seed(5, Purpose::Silo, 0)
    }

    #[test]
    fn bernoulli_exp_matches_its_probability() {
        // exp(−0.5) = 0.60653, exp(−2.25) = 0.10540; 200 000 draws: sd ≤ 0.0011, 5 sd.
        let mut r = rng();
        for (n, d, p) in [
            (1u128, 2u128, 0.606_530_66),
            (9, 4, 0.105_399_22),
            (0, 3, 1.0),
        ] {
            let hits = (0..200_000).filter(|_| bernoulli_exp(&mut r, n, d)).count();
            let f = hits as f64 / 200_000.0;
            assert!((f - p).abs() < 0.0055, "exp(-{n}/{d}): {f} vs {p}");
        }
    }

    #[test]
    fn variance_is_rounded_up_and_t_is_floor_sigma_plus_one() {
        let g = DiscreteGaussian::new(3.0).unwrap();
        let (p, q) = g.variance_rational();
        // 9 · 2^27 = 1.2e9 ≥ 2^30: q = 2^27, p = 9·2^27 + 1 (one unit up, never down).
        assert_eq!((p, q), ((9 << 27) + 1, 1 << 27));
        assert_eq!(g.t, 4);
        let g = DiscreteGaussian::new(40_000.0).unwrap();
        assert_eq!(g.variance_rational(), (1_600_000_001, 1));
        assert_eq!(g.t, 40_001);
        // σ = 0.1: σ² rounded up, never down.
        let g = DiscreteGaussian::new(0.1).unwrap();
        let (p, q) = g.variance_rational();
        assert!(p as f64 / q as f64 >= 0.01 && p as f64 / q as f64 <= 0.01 * (1.0 + 1e-8));
        assert!(DiscreteGaussian::new(0.0).is_err());
        assert!(DiscreteGaussian::new(f64::NAN).is_err());
        assert!(DiscreteGaussian::new(1e9).is_err());
    }

    #[test]
    fn discrete_gaussian_of_small_sigma_is_mostly_zero() {
        // σ = 0.5: P[0] = 1/Σ_y e^{−2y²} = 1/(1 + 2e^{−2} + 2e^{−8} + …) = 0.786 (hand sum:
        // 1 + 0.270671 + 0.000671 + 0.0000000 = 1.271342 → 0.786571).
        let g = DiscreteGaussian::new(0.5).unwrap();
        let mut r = rng();
        let zeros = (0..100_000).filter(|_| g.sample(&mut r) == 0).count();
        let f = zeros as f64 / 100_000.0;
        assert!((f - 1.0 / 1.271_342).abs() < 0.0065, "{f}");
    }
}
