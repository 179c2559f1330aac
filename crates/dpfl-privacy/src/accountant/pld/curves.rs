//! Exact hockey-stick curves δ(ε) of the continuous mechanisms (the Poisson-sampled Gaussian
//! in both add/remove directions, the Laplace mechanism) and their connect-the-dots PMF.

use super::Pmf;
use super::compose::{Grow, Sized};
use crate::accountant::special::{log_erfc, log_sub_sign};
use crate::error::PrivacyError;

/// log Φ̄(x) = log P(N(0,1) > x).
pub(super) fn log_sf(x: f64) -> f64 {
    0.5f64.ln() + log_erfc(x / std::f64::consts::SQRT_2)
}

/// log Φ(x).
pub(super) fn log_cdf(x: f64) -> f64 {
    log_sf(-x)
}

/// δ(ε) of the remove direction of the Poisson-sampled Gaussian (sensitivity 1, σ = z):
/// P = (1−q)N(0,σ²) + qN(1,σ²), Q = N(0,σ²). The loss log(1−q+q e^{(2x−1)/(2σ²)}) is
/// increasing, so δ = qΦ̄((x*−1)/σ) − (e^ε − 1 + q)Φ̄(x*/σ) with
/// x* = σ² log((e^ε − 1 + q)/q) + ½ (Balle & Wang 2018 Thm 8 for q = 1).
///
/// In log space: log(e^ε − 1 + q) = ε + log1p(−(1−q)e^{−ε}), so nothing overflows past
/// ε = 709.78 (where e^ε = inf once made x* infinite and δ read 0).
pub(super) fn delta_remove(q: f64, z: f64, eps: f64) -> f64 {
    if q < 1.0 && eps <= (-q).ln_1p() {
        return -eps.exp_m1();
    }
    let log_c = if q < 1.0 {
        eps + (-(1.0 - q) * (-eps).exp()).ln_1p()
    } else {
        eps
    };
    let xs = z * z * (log_c - q.ln()) + 0.5;
    let a = q.ln() + log_sf((xs - 1.0) / z);
    let b = log_c + log_sf(xs / z);
    let (pos, mag) = log_sub_sign(a, b);
    if pos { mag.exp() } else { 0.0 }
}

/// δ(ε) of the add direction: P = N(0,σ²), Q = (1−q)N(0,σ²) + qN(1,σ²). The loss
/// −log(1−q+q e^{(2x−1)/(2σ²)}) is decreasing and below −log(1−q), so for smaller ε
/// δ = (1 − e^ε(1−q))Φ(x*/σ) − q e^ε Φ((x*−1)/σ), x* = σ² log((e^{−ε} − 1 + q)/q) + ½,
/// with log(e^{−ε} − 1 + q) = −ε + log1p(−(1−q)e^{ε}) (no overflow for ε ≪ 0).
pub(super) fn delta_add(q: f64, z: f64, eps: f64) -> f64 {
    if q < 1.0 && eps >= -(-q).ln_1p() {
        return 0.0;
    }
    let log_c = if q < 1.0 {
        -eps + (-(1.0 - q) * eps.exp()).ln_1p()
    } else {
        -eps
    };
    if log_c == f64::NEG_INFINITY {
        return 0.0;
    }
    let xs = z * z * (log_c - q.ln()) + 0.5;
    // 1 − e^ε(1 − q) = e^ε·c.
    let a = eps + log_c + log_cdf(xs / z);
    let b = q.ln() + eps + log_cdf((xs - 1.0) / z);
    let (pos, mag) = log_sub_sign(a, b);
    if pos { mag.exp() } else { 0.0 }
}

/// δ(ε) of the Laplace mechanism with ε₀ = Δ/b: 1 − e^{(ε−ε₀)/2} on [−ε₀, ε₀], 0 above,
/// 1 − e^ε below (Koskela, Tobaben & Honkela 2021, Lemma; symmetric in direction).
pub(super) fn delta_laplace(eps0: f64, eps: f64) -> f64 {
    if eps >= eps0 {
        0.0
    } else if eps >= -eps0 {
        -((eps - eps0) / 2.0).exp_m1()
    } else {
        -eps.exp_m1()
    }
}

pub(super) fn grid_pmf(
    h: f64,
    eps_lo: f64,
    eps_hi: f64,
    max_bins: usize,
    delta: impl Fn(f64) -> f64 + Sync,
) -> Sized<Pmf> {
    if !(eps_lo.is_finite() && eps_hi.is_finite()) {
        return Err(Grow::Fail(PrivacyError::Numerical {
            context: "PLD discretisation",
            reason: format!("loss range [{eps_lo}, {eps_hi}] is not finite"),
        }));
    }
    let lo = (eps_lo / h).floor();
    let hi = (eps_hi / h).ceil().max(lo);
    let n = hi - lo + 1.0;
    if n > max_bins as f64 {
        return Err(Grow::Bins(n.min(usize::MAX as f64) as usize));
    }
    let (lo, hi) = (lo as i64, hi as i64);
    let deltas = crate::accountant::par::map_indices((hi - lo + 1) as usize, &|k| {
        delta((lo + k as i64) as f64 * h)
    });
    Ok(Pmf::connect_dots(h, lo, deltas)?)
}
