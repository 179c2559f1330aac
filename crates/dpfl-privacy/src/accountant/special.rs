//! Log-space arithmetic and the special functions the accountants need.
//!
//! Hand-written on purpose: the few helpers below (log-add, log-subtract, log-binomial,
//! log-erfc with a tail expansion) are a dozen lines each over `libm`'s `lgamma` and `erfc`,
//! and the crates that offer them (`statrs`, `special`) bring far more than we need. `libm`
//! itself is used for the primitives, as Rust's `std` has no `erfc` or `lgamma`.

use crate::error::{PrivacyError, Result};

/// log(eˣ + eʸ).
pub(crate) fn log_add(x: f64, y: f64) -> f64 {
    let (a, b) = if x < y { (x, y) } else { (y, x) };
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::INFINITY {
        return f64::INFINITY;
    }
    (a - b).exp().ln_1p() + b
}

/// log|eˣ − eʸ| and whether eˣ ≥ eʸ.
pub(crate) fn log_sub_sign(x: f64, y: f64) -> (bool, f64) {
    if x > y {
        (true, x + (-(y - x).exp()).ln_1p())
    } else if x < y {
        (false, y + (-(x - y).exp()).ln_1p())
    } else {
        (true, f64::NEG_INFINITY)
    }
}

/// log Γ(x) for x > 0.
pub(crate) fn ln_gamma(x: f64) -> f64 {
    libm::lgamma(x)
}

/// log C(n, k) for real n ≥ k ≥ 0 (via log Γ), as in `dp_accounting`'s `_log_comb`.
pub(crate) fn log_comb(n: f64, k: f64) -> f64 {
    ln_gamma(n + 1.0) - ln_gamma(k + 1.0) - ln_gamma(n - k + 1.0)
}

/// log erfc(x), accurate for large x where erfc underflows.
///
/// For x < 25 `libm::erfc` is used directly (relative accuracy ~1 ulp, no underflow since
/// erfc(25) ≈ 8e-274). Beyond, the asymptotic series (Abramowitz & Stegun 7.1.23)
/// erfc(x) = e^{-x²}/(x√π) · (1 − 1/(2x²) + 3/(4x⁴) − 15/(8x⁶) + …): at x ≥ 25 the first
/// omitted term is below 1e-10 relative.
pub(crate) fn log_erfc(x: f64) -> f64 {
    if x < 25.0 {
        libm::erfc(x).ln()
    } else {
        let x2 = x * x;
        let series = 1.0 - 1.0 / (2.0 * x2) + 3.0 / (4.0 * x2 * x2) - 15.0 / (8.0 * x2 * x2 * x2);
        -x2 - x.ln() - 0.5 * std::f64::consts::PI.ln() + series.ln()
    }
}

/// Φ(x), the standard normal CDF.
#[allow(dead_code)] // used by the PLD accountant
pub(crate) fn norm_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// Fails with a [`PrivacyError::Numerical`] if `x` is NaN; +∞ is a valid (if useless) bound.
pub(crate) fn not_nan(context: &'static str, x: f64) -> Result<f64> {
    if x.is_nan() {
        Err(PrivacyError::Numerical {
            context,
            reason: "NaN".into(),
        })
    } else {
        Ok(x)
    }
}

/// Rounds a computed privacy loss up by a relative 1e-12 (plus one ulp), so that the
/// floating-point error of the last few operations can only over-report. An exact 0 (a
/// clamped ε, no loss at all) stays 0: one ulp above it is 5e-324, which only misprints
/// (issue 27 finding 8) and covers no error a relative pad would not.
pub(crate) fn round_up(x: f64) -> f64 {
    if x == 0.0 {
        0.0
    } else if x.is_finite() {
        let y = x + x.abs() * 1e-12;
        y.next_up()
    } else {
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_erfc_matches_reference_values() {
        // erfc(1) = 0.157299207050285; erfc(5) = 1.5374597944280e-12
        assert!((log_erfc(1.0) - 0.157_299_207_050_285_f64.ln()).abs() < 1e-13);
        assert!((log_erfc(5.0) - 1.537_459_794_428_035e-12_f64.ln()).abs() < 1e-10);
        // Continuity across the switch at 25 (erfc(25) = 8.300172571196522e-274).
        let lo = log_erfc(25.0 - 1e-9);
        let hi = log_erfc(25.0);
        assert!((lo - hi).abs() < 1e-6, "{lo} {hi}");
        assert!((hi - 8.300_172_571_196_522e-274_f64.ln()).abs() < 1e-8);
    }

    #[test]
    fn log_helpers() {
        assert!((log_add(0.0, 0.0) - 2f64.ln()).abs() < 1e-15);
        assert_eq!(log_add(f64::NEG_INFINITY, 1.0), 1.0);
        let (s, m) = log_sub_sign(2f64.ln(), 0.0);
        assert!(s && m.abs() < 1e-15);
        assert!((log_comb(10.0, 3.0) - 120f64.ln()).abs() < 1e-12);
        assert!((norm_cdf(1.0) - 0.841_344_746_068_543).abs() < 1e-15);
    }
}
