//! The exact privacy curve of one Gaussian release (Balle & Wang 2018, Thm. 8): δ(ε) and
//! its inverse. The accountants (composition, PLD) and calibration all use it; it sits
//! below them so that `accountant/` never imports `calibration` (checked by
//! `tests/it/layers.rs`).

use super::special::{log_erfc, log_sub_sign};
use crate::error::{PrivacyError, Result};
use crate::params::{Delta, positive};

/// δ(ε) of one Gaussian release with noise multiplier z (Balle & Wang 2018, Thm. 8):
/// δ = Φ(1/(2z) − εz) − e^ε Φ(−1/(2z) − εz), computed in log space (Φ via log erfc) so that
/// tiny δ does not cancel to zero. Rounded up.
pub fn gaussian_delta(z: f64, eps: f64) -> Result<f64> {
    positive("noise_multiplier", z)?;
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(PrivacyError::invalid(
            "epsilon",
            eps,
            "must be finite and >= 0",
        ));
    }
    // log Φ(x) = log(½ erfc(−x/√2)).
    let log_phi = |x: f64| 0.5f64.ln() + log_erfc(-x / std::f64::consts::SQRT_2);
    let a = log_phi(0.5 / z - eps * z);
    let b = eps + log_phi(-0.5 / z - eps * z);
    let (pos, mag) = log_sub_sign(a, b);
    if !pos {
        return Err(PrivacyError::Numerical {
            context: "analytic Gaussian delta",
            reason: format!("negative delta at z = {z}, epsilon = {eps}"),
        });
    }
    // Pad by a few ulps of the operands (the subtraction's absolute error) and 1e-12 relative.
    let d = mag.exp();
    let pad = 4.0 * f64::EPSILON * (a.exp() + b.exp()) + 1e-12 * d;
    Ok((d + pad).next_up().min(1.0))
}

/// The smallest ε for which one Gaussian release with noise multiplier z is (ε, δ)-DP
/// (Balle & Wang 2018, Thm. 8, inverted by bisection; rounded up).
pub fn gaussian_epsilon(z: f64, delta: Delta) -> Result<f64> {
    let d = delta.get();
    if gaussian_delta(z, 0.0)? <= d {
        return Ok(0.0);
    }
    let mut hi = 1.0;
    while gaussian_delta(z, hi)? > d {
        hi *= 2.0;
        if hi > 1e12 {
            return Err(PrivacyError::Numerical {
                context: "analytic Gaussian epsilon",
                reason: format!("no epsilon up to 1e12 at z = {z}"),
            });
        }
    }
    let mut lo = 0.0;
    while hi - lo > 1e-12 * hi.max(1e-12) {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if gaussian_delta(z, mid)? <= d {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}
