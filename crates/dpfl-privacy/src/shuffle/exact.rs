//! An exact numerical accountant for P1D's binomial mechanism (Cheu, Joseph, Mao & Peng 2022,
//! Lemma 3.1 / A.1; digest §4): the hockey-stick divergence of Bin(m, p) against its shift by
//! t, summed exactly over the support instead of Lemma A.1's Chernoff bound, and the fewest
//! noise trials m that meet a target (ε, δ) by it. Used by `dpfl reproduce shuffle-rates` to
//! show how much of PVEC's noise the paper's constants (18, 90, 180) cost.
//!
//! P1D's view is the count C = Σx̂_i + Bin(m, p) (m = s·n); replacing one user moves Σx̂ by
//! at most t = g (x̂ ∈ {0, …, g}; the randomised rounding is a mixture, and the hockey-stick
//! of two mixtures is at most the worst pair's). So P1D is (ε, δ)-DP for
//! δ ≥ max(H_ε(P‖Q), H_ε(Q‖P)) with P = t + Bin(m, p), Q = Bin(m, p),
//! H_ε(P‖Q) = Σ_k [P(k) − e^ε Q(k)]₊ — exact, no tail bound. Decision: the sum runs over the
//! window mean ± (12σ + t + 1) and the mass outside it (≤ 2exp(−2(12σ)²/m) by Hoeffding) is
//! added to δ, so the result is never below the truth (up to the pmf's floating-point
//! rounding, a relative 1e-12 or so of terms of size ≤ δ).

use crate::accountant::special::log_comb;
use crate::error::PrivacyError;

use super::Result;

/// max(H_ε(t + B ‖ B), H_ε(B ‖ t + B)) for B ~ Bin(m, p), computed exactly over a ±(12σ + t)
/// window; the window's outside mass (Hoeffding: ≤ 2exp(−2·(12σ)²/m)) is added.
pub fn binomial_shift_delta(m: u64, p: f64, t: u64, epsilon: f64) -> Result<f64> {
    if m == 0 || !(p > 0.0 && p < 1.0) || !(epsilon.is_finite() && epsilon >= 0.0) {
        return Err(PrivacyError::invalid(
            "m, p, epsilon",
            p,
            "need m >= 1, p in (0, 1), epsilon >= 0",
        )
        .into());
    }
    let mf = m as f64;
    let sd = (mf * p * (1.0 - p)).sqrt();
    let mean = mf * p;
    let r = 12.0 * sd + t as f64 + 1.0;
    let lo = (mean - r).floor().max(0.0) as u64;
    let hi = ((mean + r).ceil().min(mf)) as u64;
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    let log_pmf = |k: u64| -> f64 {
        let kf = k as f64;
        log_comb(mf, kf) + kf * lp + (mf - kf) * lq
    };
    let (mut up, mut down) = (0.0f64, 0.0f64);
    for k in lo..=hi.saturating_add(t) {
        let q = if k <= hi {
            log_pmf(k)
        } else {
            f64::NEG_INFINITY
        };
        let pk = if k >= lo + t && k - t <= hi {
            log_pmf(k - t)
        } else {
            f64::NEG_INFINITY
        };
        // [e^{pk} − e^{ε+q}]₊ and [e^{q} − e^{ε+pk}]₊, each only where it is positive.
        if pk > q + epsilon {
            up += pk.exp() * -(q + epsilon - pk).exp_m1();
        }
        if q > pk + epsilon {
            down += q.exp() * -(pk + epsilon - q).exp_m1();
        }
    }
    let tail = 2.0 * (-2.0 * (12.0 * sd).powi(2) / mf).exp();
    let d = up.max(down) + tail;
    if !d.is_finite() {
        return Err(PrivacyError::Numerical {
            context: "binomial hockey-stick",
            reason: format!("delta {d} for m = {m}, p = {p}, t = {t}"),
        }
        .into());
    }
    Ok(d)
}

/// The fewest trials m (at the given p) for which [`binomial_shift_delta`] ≤ δ at ε, found by
/// bisection up to `max_m` (δ decreases in m); `None` if even `max_m` does not suffice.
pub fn fewest_trials(p: f64, t: u64, epsilon: f64, delta: f64, max_m: u64) -> Result<Option<u64>> {
    if binomial_shift_delta(max_m, p, t, epsilon)? > delta {
        return Ok(None);
    }
    let (mut lo, mut hi) = (1u64, max_m);
    while hi - lo > 1 + hi / 1000 {
        let mid = lo + (hi - lo) / 2;
        if binomial_shift_delta(mid, p, t, epsilon)? <= delta {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(Some(hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_small_case() {
        // m = 2, p = ½, t = 1, ε = 0: B = (¼, ½, ¼) on {0, 1, 2}, 1 + B on {1, 2, 3}:
        // Σ[P − Q]₊ = (¼ − ½)₊ + (½ − ¼)₊ + (¼ − 0)₊ = ½ (total variation).
        let d = binomial_shift_delta(2, 0.5, 1, 0.0).unwrap();
        assert!((d - 0.5).abs() < 1e-9, "{d}");
        // ε = ln 2: (½ − 2·¼)₊ + (¼ − 0)₊ = ¼ (P side); Q side (¼ − 0)₊ at k = 0 = ¼.
        let d = binomial_shift_delta(2, 0.5, 1, 2f64.ln()).unwrap();
        assert!((d - 0.25).abs() < 1e-9, "{d}");
    }

    #[test]
    fn the_exact_delta_is_below_lemma_a1s() {
        // Digest §4: a small P1D (n = 16, g = 4, target δ = 0.1) is far below its δ.
        let (n, g, eps, delta) = (16u64, 4u64, 1.0, 0.1);
        let p = crate::shuffle::params::P1dParams::calibrate(n, 1.0, eps, delta).unwrap();
        assert_eq!(p.g, g);
        // Lemma 3.1's worst case is 3ε at |x − x'| = Δ; the exact δ there is tiny.
        let d = binomial_shift_delta(p.s * n, p.p, g, 3.0 * eps).unwrap();
        assert!(d < 1e-6, "{d}");
        // And far fewer trials meet (3ε, δ).
        let m = fewest_trials(p.p, g, 3.0 * eps, delta, p.s * n)
            .unwrap()
            .unwrap();
        assert!(m < p.s * n / 10, "{m} vs {}", p.s * n);
        assert!(binomial_shift_delta(m, p.p, g, 3.0 * eps).unwrap() <= delta);
    }
}
