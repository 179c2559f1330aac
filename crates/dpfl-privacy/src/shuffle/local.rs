//! The guarantee of one PVEC silo **without a trusted shuffler**: what a server that colludes
//! with the shuffler (or a shuffler that is the server) learns from one silo's own messages.
//!
//! A silo answers a round with the per-label counts of its K users (records), summed before
//! they leave it (both transports carry exactly that vector). For coordinate j the count is
//! `C_j = Σ_k x̂_kj + Bin(K·s, p)`: the binomial mechanism of Cheu, Joseph, Mao & Peng 2022
//! Lemma A.1 (after Ghazi et al. 2021 Lemma 4.12) with m = K·s trials. Replacing one record
//! changes x̂_j by t_j ≤ g (x̂ ∈ {0, …, g}) and, over the coordinates, Σ_j t_j ≤ T₁ =
//! min(d·g, 2d + g√d) (|x̂_j − x̂′_j| ≤ 2 + |u_j − u′_j|, Σ_j |u_j − u′_j| = g‖x − x′‖₁/(2Δ₂) ≤
//! g√d for ‖x − x′‖₂ ≤ 2Δ₂; the randomised rounding is a mixture, and the hockey-stick
//! divergence of two mixtures is at most the worst pair's).
//!
//! Lemma A.1: for α ∈ (0, 1) with α·m·p ≥ 2g, coordinate j is (ε_j, δ_j)-DP with
//! ε_j = t_j·c, c = ln((1 + α)/(1 − α)), δ_j = 2·exp(−α²mp/10). Over the d coordinates
//! (independent noise) we take the smaller of
//! * basic composition (Dwork & Roth Thm 3.16): ε = c·T₁, δ = d·δ_j;
//! * Cheu et al. Lemma 3.3 (advanced composition with per-instance budgets):
//!   ε = Σ ε_j(e^{ε_j} − 1) + 2√(ln(1/γ)·Σ ε_j²) ≤ c·T₁(e^{cg} − 1) + 2√(ln(1/γ)·c²·g·T₁)
//!   (both sums are convex in t and largest at the vertex with T₁/g coordinates at g),
//!   δ = d·δ_j + γ.
//!
//! Decisions (each never under-protects):
//! * half of δ goes to Lemma A.1 (and γ), the other half is reserved for the sampler's
//!   total-variation error (`crate::binomial`): K·d draws, each within η of Bin(s, p), turn
//!   (ε, δ) into (ε, δ + (1 + e^ε)·K·d·η); it is checked to fit;
//! * α is the smallest value meeting both δ_j and α·m·p ≥ 2g; α ≥ 1 means Lemma A.1 gives
//!   nothing, and we report an error rather than a number;
//! * the K users' counts are summed inside the silo (as [`super::protocol::Pvec::counts`]
//!   callers do), so m = K·s; a silo that sent its users' counts separately would need K = 1.

use crate::error::PrivacyError;

use super::Result;
use super::params::PvecParams;

/// One silo's per-round guarantee without a trusted shuffler.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LocalGuarantee {
    /// The reported ε: the smaller of `basic_epsilon` and `lemma33_epsilon`, per round,
    /// against a server that sees this silo's per-label counts.
    pub epsilon: f64,
    /// The total δ requested: half for Lemma A.1's δ_j over d coordinates (and γ), half
    /// reserved for the Binomial sampler's total-variation error.
    pub delta: f64,
    /// Lemma A.1's α of the composition that gave `epsilon`.
    pub alpha: f64,
    /// ε by basic composition over the coordinates.
    pub basic_epsilon: f64,
    /// ε by Cheu et al. Lemma 3.3.
    pub lemma33_epsilon: f64,
    /// ε by the numerical accountant of [`super::pvec_exact`] (m = K·s), computed only for
    /// parameters that accountant calibrated; `epsilon` is then the smaller of it and the
    /// Lemma A.1 bounds.
    pub exact_epsilon: Option<f64>,
}

/// α for per-coordinate δ_j: max(√(10 ln(2/δ_j)/(mp)), 2g/(mp)).
fn alpha_for(mp: f64, g: f64, delta_j: f64) -> f64 {
    (10.0 * (2.0 / delta_j).ln() / mp).sqrt().max(2.0 * g / mp)
}

/// The (ε, δ) of one round of a silo that sums `users` PVEC users' counts, against a server
/// that sees the silo's counts, at total δ `delta`; `tv` is the Binomial sampler's
/// total-variation bound per draw ([`super::protocol::Pvec::noise_tv_bound`]).
pub fn silo_round_guarantee(
    params: &PvecParams,
    users: u64,
    delta: f64,
    tv: f64,
) -> Result<LocalGuarantee> {
    if users == 0 {
        return Err(PrivacyError::invalid("users", 0.0, "need at least one record").into());
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(PrivacyError::invalid("delta", delta, "must lie in (0, 1)").into());
    }
    if !(tv.is_finite() && tv >= 0.0) {
        return Err(PrivacyError::invalid("tv", tv, "must be finite and >= 0").into());
    }
    let d = params.d as f64;
    let g = params.p1d.g as f64;
    let mp = users as f64 * params.p1d.s as f64 * params.p1d.p;
    let t1 = (d * g).min(2.0 * d + g * d.sqrt());
    let lemma = |a: f64| ((1.0 + a) / (1.0 - a)).ln();
    let half = delta / 2.0;
    // Basic composition: δ_j = (δ/2)/d.
    let a_basic = alpha_for(mp, g, half / d);
    let basic = if a_basic < 1.0 {
        lemma(a_basic) * t1
    } else {
        f64::INFINITY
    };
    // Lemma 3.3: γ = δ/4, δ_j = (δ/4)/d.
    let gamma = half / 2.0;
    let a_33 = alpha_for(mp, g, gamma / d);
    let l33 = if a_33 < 1.0 {
        let c = lemma(a_33);
        c * t1 * (c * g).exp_m1() + 2.0 * ((1.0 / gamma).ln() * c * c * g * t1).sqrt()
    } else {
        f64::INFINITY
    };
    let (epsilon, alpha) = if basic <= l33 {
        (basic, a_basic)
    } else {
        (l33, a_33)
    };
    // Under the accountant rule the silo's own counts get the same exact accountant as the
    // shuffled release (m = K·s trials), with the sampler's error inside its δ.
    let exact = match params.calibration {
        Some(c) if c.rule == super::params::PvecRule::Accountant => Some(
            super::pvec_exact::pvec_epsilon(params, users, 1, delta, tv)?,
        ),
        _ => None,
    };
    // Lemma A.1's ε holds only if the sampler's error fits in the reserved δ/2.
    let tv_term = (epsilon.exp() + 1.0) * users as f64 * d * tv;
    // NaN-safe: an incomparable term fails the check too.
    let lemma_ok = epsilon.is_finite() && tv_term.partial_cmp(&half).is_some_and(|o| o.is_le());
    // Under the accountant rule a silo's own counts may carry too little noise for any
    // guarantee (the shuffled sum is what the bits were calibrated for): then ε = ∞ is
    // reported rather than an error, so a trusted-shuffler run still plans (its ledger charges
    // the shuffled release) and an untrusted one is refused by its budget.
    if let Some(e) = exact {
        return Ok(LocalGuarantee {
            epsilon: if lemma_ok { e.min(epsilon) } else { e },
            delta,
            alpha,
            basic_epsilon: basic,
            lemma33_epsilon: l33,
            exact_epsilon: exact,
        });
    }
    if !epsilon.is_finite() {
        return Err(PrivacyError::OutsideValidity {
            formula: "Cheu et al. 2022 Lemma A.1 (silo without a trusted shuffler)",
            reason: format!(
                "alpha = {a_basic} >= 1 for m p = {mp} (K = {users}, s = {}, p = {}): the silo's own binomial noise gives no guarantee",
                params.p1d.s, params.p1d.p
            ),
        }
        .into());
    }
    if !lemma_ok {
        return Err(PrivacyError::OutsideValidity {
            formula: "Cheu et al. 2022 Lemma A.1 (sampler error)",
            reason: format!(
                "the sampler's total-variation term {tv_term:e} exceeds delta/2 = {half:e}"
            ),
        }
        .into());
    }
    Ok(LocalGuarantee {
        epsilon,
        delta,
        alpha,
        basic_epsilon: basic,
        lemma33_epsilon: l33,
        exact_epsilon: exact,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shuffle::params::Scale;

    #[test]
    fn matches_a_hand_computation() {
        // d = 4, g = 4, s = 10 000, p = 0.25, K = 1: mp = 2500, T₁ = min(16, 8 + 4·2) = 16.
        // Basic: δ_j = 5e-7/4 = 1.25e-7, α = √(10 ln(1.6e7)/2500) = √(165.8813/2500)
        //   = 0.257590, c = ln(1.257590/0.742410) = 0.527050, ε = 16c = 8.43280.
        // Lemma 3.3: γ = 2.5e-7, δ_j = 6.25e-8, α = √(10 ln(3.2e7)/2500) = 0.262909,
        //   c = 0.538477, 16c(e^{4c} − 1) + 2√(ln(4e6)·c²·64) = 65.638 + 33.592: basic wins.
        let p = PvecParams::with_p1d(1, 4, 1.0, Scale::Paper, 4, 10_000, 0.25).unwrap();
        let g = silo_round_guarantee(&p, 1, 1e-6, 0.0).unwrap();
        assert!((g.alpha - 0.257_590).abs() < 1e-6, "{}", g.alpha);
        assert!((g.epsilon - 8.43280).abs() < 1e-4, "{}", g.epsilon);
        assert_eq!(g.epsilon, g.basic_epsilon);
        assert!(
            (g.lemma33_epsilon - 99.2301).abs() < 1e-3,
            "{}",
            g.lemma33_epsilon
        );
        // K = 4 users summed: mp = 10⁴, α halves: 0.128795, ε = 16 ln(1.128795/0.871205)
        // = 4.14445 (Lemma 3.3: 24.45).
        let g4 = silo_round_guarantee(&p, 4, 1e-6, 0.0).unwrap();
        assert!((g4.epsilon - 4.14445).abs() < 1e-4, "{}", g4.epsilon);
    }

    #[test]
    fn too_little_noise_and_bad_input_are_refused() {
        // mp = 25: α = √(10·16.59/25) > 1.
        let p = PvecParams::with_p1d(1, 4, 1.0, Scale::Paper, 4, 100, 0.25).unwrap();
        assert!(silo_round_guarantee(&p, 1, 1e-6, 0.0).is_err());
        let p = PvecParams::with_p1d(1, 4, 1.0, Scale::Paper, 4, 10_000, 0.25).unwrap();
        assert!(silo_round_guarantee(&p, 0, 1e-6, 0.0).is_err());
        assert!(silo_round_guarantee(&p, 1, 0.0, 0.0).is_err());
        assert!(silo_round_guarantee(&p, 1, 1e-6, f64::NAN).is_err());
        // A sampler error beyond δ/2 is refused.
        assert!(silo_round_guarantee(&p, 1, 1e-6, 1e-9).is_err());
    }

    #[test]
    fn a_calibrated_pvec_gives_a_finite_local_guarantee_that_grows_with_n() {
        // Cheu et al. parameters at ε = 1, δ = 1e-5, d = 10: the local ε of one user rises
        // with the n the shuffle was calibrated for (less noise per user).
        let eps = |n: u64| {
            let p = PvecParams::calibrate(n, 10, 1.0, 1.0, 1e-5, Scale::Unit).unwrap();
            silo_round_guarantee(&p, 1, 1e-5, 0.0).unwrap().epsilon
        };
        let (a, b) = (eps(100), eps(10_000));
        assert!(a.is_finite() && a < b, "{a} {b}");
    }
}
