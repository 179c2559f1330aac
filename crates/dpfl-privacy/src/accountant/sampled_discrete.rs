//! RDP of a *sampled* discrete Gaussian, by joint convexity.
//!
//! The subsampled-Gaussian bounds of [`super::rdp`] (Mironov–Talwar–Zhang 2019; Wang–Balle–
//! Kasiviswanathan 2019 Thm 27; noise splitting for sampling with replacement) rest on facts
//! of the continuous Gaussian — rotation invariance, exact moment formulas, infinite
//! divisibility — that the discrete Gaussian lacks (a sum of discrete Gaussians is not one:
//! Kairouz, Liu & Steinke 2021, §3). What does carry over is the per-pair bound
//! D_α(N_ℤ(μ, σ²I) ‖ N_ℤ(ν, σ²I)) ≤ α‖μ − ν‖²/(2σ²) for integer vectors μ, ν (Canonne,
//! Kamath & Steinke 2020, Thm 4, coordinate-wise with additivity of Rényi divergence over
//! independent coordinates, their Thm 14).
//!
//! Couple the two neighbouring datasets' samples so that they differ only in the j uses of
//! the differing record, j ~ w (j ∈ {0, 1} with P[j = 1] = q for Poisson or without
//! replacement; Binomial(K, 1/n) for K draws with replacement). Given j the two releases are
//! discrete Gaussians whose centres differ by at most jΔ̃ (Δ̃ the mechanism's post-rounding
//! sensitivity, so z = σ/Δ̃). (P, Q) ↦ ∫ p^α q^{1−α} is jointly convex for α > 1 (van Erven &
//! Harremoës 2014, Thm 13), hence, symmetrically in both directions,
//!
//!   ε(α) ≤ 1/(α − 1) · log Σ_j w_j · exp(α(α − 1) j² / (2z²)).
//!
//! This is first order in q (the continuous Gaussian's bounds are second order), so it is
//! sound but loose: at the same noise the sampled discrete Gaussian is charged more ε.

use super::special::{log_add, log_comb, not_nan};
use crate::error::Result;
use crate::event::{Neighbouring, Sampling};

/// The bound above at order `a` for `sampling` under `neighbouring`, or `None` for a pair the
/// coupling does not cover (the caller refuses it).
pub(crate) fn sampled_discrete_gaussian_rdp(
    sampling: &Sampling,
    neighbouring: Neighbouring,
    z: f64,
    a: f64,
) -> Option<Result<f64>> {
    let c = a * (a - 1.0) / (2.0 * z * z);
    let log_sum = match (sampling, neighbouring) {
        (Sampling::Poisson { rate }, Neighbouring::AddRemove) => two_point(*rate, c),
        (Sampling::WithoutReplacement { population, size }, Neighbouring::ReplaceOne) => {
            two_point(*size as f64 / *population as f64, c)
        }
        (Sampling::WithReplacement { population, draws }, Neighbouring::ReplaceOne) => {
            let (n, k) = (*population as f64, *draws as f64);
            let (lp, l1mp) = ((1.0 / n).ln(), (-1.0 / n).ln_1p());
            let mut s = f64::NEG_INFINITY;
            for j in 0..=*draws {
                let jf = j as f64;
                let lw = if n == 1.0 {
                    // Every draw hits the one record.
                    if j == *draws { 0.0 } else { f64::NEG_INFINITY }
                } else {
                    log_comb(k, jf) + jf * lp + (k - jf) * l1mp
                };
                s = log_add(s, lw + c * jf * jf);
            }
            s
        }
        _ => return None,
    };
    Some(not_nan(
        "sampled discrete Gaussian RDP",
        (log_sum / (a - 1.0)).max(0.0),
    ))
}

/// log((1 − q) + q·e^c).
fn two_point(q: f64, c: f64) -> f64 {
    if q >= 1.0 {
        return c;
    }
    log_add((-q).ln_1p(), q.ln() + c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_values() {
        // Poisson q = 0.1, z = 1, α = 2: c = 1, ε ≤ log(0.9 + 0.1e) = log(1.171828) = 0.158565.
        let e = sampled_discrete_gaussian_rdp(
            &Sampling::Poisson { rate: 0.1 },
            Neighbouring::AddRemove,
            1.0,
            2.0,
        )
        .unwrap()
        .unwrap();
        assert!((e - 0.158_565).abs() < 1e-6, "{e}");
        // With replacement, n = 2, K = 2, z = 1, α = 2: w = (1/4, 1/2, 1/4),
        // log(0.25 + 0.5e + 0.25e^4) = log(15.25868) = 2.725148.
        let e = sampled_discrete_gaussian_rdp(
            &Sampling::WithReplacement {
                population: 2,
                draws: 2,
            },
            Neighbouring::ReplaceOne,
            1.0,
            2.0,
        )
        .unwrap()
        .unwrap();
        assert!((e - 2.725_148).abs() < 1e-6, "{e}");
        // q = 1 is the unsampled mechanism: α/(2z²) = 2/2 = 1 at α = 2, z = 1.
        let e = sampled_discrete_gaussian_rdp(
            &Sampling::WithoutReplacement {
                population: 5,
                size: 5,
            },
            Neighbouring::ReplaceOne,
            1.0,
            2.0,
        )
        .unwrap()
        .unwrap();
        assert!((e - 1.0).abs() < 1e-12, "{e}");
        assert!(
            sampled_discrete_gaussian_rdp(
                &Sampling::Poisson { rate: 0.1 },
                Neighbouring::ReplaceOne,
                1.0,
                2.0
            )
            .is_none()
        );
    }
}
