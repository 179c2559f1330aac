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
//! sound but loose: at the same noise the sampled discrete Gaussian is charged more ε. For
//! sampling without replacement the minimum with Wang–Balle–Kasiviswanathan's general
//! (second-order) bound is used.

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
            let q = *size as f64 / *population as f64;
            two_point(q, c).min(wbk_general_log_moment(q, z, a))
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

/// Wang, Balle & Kasiviswanathan 2019 ("Subsampled Rényi DP and analytical moments
/// accountant"), Thm 9 — the bound for *any* base mechanism of RDP curve ε(·), here
/// ε(j) = j/(2z²) (CKS20 Thm 4) and ε(∞) = ∞ — as (α − 1)·ε'(α), for sampling a q fraction
/// without replacement under replace-one:
/// log(1 + q²C(α,2)·min{4(e^{ε(2)} − 1), 2e^{ε(2)}} + Σ_{j=3}^{α} 2q^j C(α,j) e^{(j−1)ε(j)})
/// at integer α; at fractional α the linear interpolation of the neighbouring integers'
/// values (their Cor. 10: the log-moment is convex in α, so this bounds it from above).
fn wbk_general_log_moment(q: f64, z: f64, a: f64) -> f64 {
    let at = |a: u64| -> f64 {
        if a <= 1 {
            return 0.0;
        }
        let af = a as f64;
        let eps = |j: f64| j / (2.0 * z * z);
        let e2 = eps(2.0);
        let lq = q.ln();
        // log(e^{e2} − 1) = e2 + log(1 − e^{−e2}).
        let log_em1 = e2 + (-(-e2).exp()).ln_1p();
        let mut s = log_add(
            0.0,
            2.0 * lq + log_comb(af, 2.0) + (4f64.ln() + log_em1).min(e2 + 2f64.ln()),
        );
        for j in 3..=a {
            let jf = j as f64;
            s = log_add(
                s,
                2f64.ln() + (jf - 1.0) * eps(jf) + jf * lq + log_comb(af, jf),
            );
        }
        s
    };
    if a.fract() == 0.0 {
        at(a as u64)
    } else {
        let (f, t) = (a.floor(), a - a.floor());
        (1.0 - t) * at(f as u64) + t * at(f as u64 + 1)
    }
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
    fn without_replacement_takes_the_general_wbk_bound_when_smaller() {
        // q = 0.1, z = 1, α = 2: log(1 + 0.01·min(4(e − 1), 2e)) = log(1.054366) = 0.052939
        // (joint convexity: 0.158565). α = 3: log(1 + 0.03·2e + 2·0.001·e³)/2 = 0.092521.
        let s = Sampling::WithoutReplacement {
            population: 10,
            size: 1,
        };
        let at = |a: f64| {
            sampled_discrete_gaussian_rdp(&s, Neighbouring::ReplaceOne, 1.0, a)
                .unwrap()
                .unwrap()
        };
        assert!((at(2.0) - 0.052_939).abs() < 1e-6, "{}", at(2.0));
        assert!((at(3.0) - 0.092_521).abs() < 1e-6, "{}", at(3.0));
        // Fractional order: between the interpolated log-moments, divided by α − 1.
        let mid = (0.5 * 0.052_939 + 0.5 * 2.0 * 0.092_521) / 1.5;
        assert!((at(2.5) - mid).abs() < 1e-5, "{} vs {mid}", at(2.5));
    }

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
