//! Step schedules for strongly convex losses (Lowy & Razaviyayn, ICLR 2023):
//!
//! * the **multi-stage implementation** of Accelerated Noisy MB-SGD (App. E.1, after Ghadimi &
//!   Lan 2013, Prop. 7; digest §2.3), as an [`AcsaSchedule`] the AC-SA server half follows; and
//!   the convex (μ = 0) AC-SA schedule of Ghadimi & Lan (2012);
//! * the **strongly convex step and weights of Theorem 2.1** for Noisy MB-SGD (proof of
//!   Lemma D.6, via Stich's Lemma D.5): constant η and exponential averaging weights.
//!
//! # Decisions
//! * **Convex AC-SA (μ = 0), digest §5.2 item 4.** α_r = 2/(r+1), η_r = 4γ/(r(r+1)) with
//!   γ = max{2β, √(V² R(R+1)(R+2)/(3D²))}. Checked against Ghadimi–Lan's AC-SA bound rather
//!   than from memory alone: with these α_r the weights Γ_r = 2/(r(r+1)) make γ_r/Γ_r = 2γ
//!   constant (their condition), γ ≥ 2β gives η_r − βα_r² ≥ 2γ/(r(r+1)), and the bound becomes
//!   4γ V₀/(R(R+1)) + V²(2R+1)/(3γ) with V₀ = ‖w₀ − w*‖²/2 ≤ D²/2; minimising over γ gives
//!   γ² = V² R(R+1)(2R+1)/(6D²) ≈ V² R(R+1)(R+2)/(3D²) and the rate βD²/R² + VD/√R of
//!   Lemma E.1. The first step is α₁/η₁ = 1/(2γ); we expose it as the user's `step_size`.
//! * **Stage constant v_k.** App. E.1 prints v_k = max{2β, [μV²/(3Δ2^{−(k−1)} R_k(R_k+1)(R_k+2))]^{1/2}}
//!   with R_k(R_k+1)(R_k+2) in the *denominator*, unlike the convex γ above. We keep the printed
//!   form: with μ > 0 the prox weight μ + η_r alone controls the noise (the noise term of the
//!   AC-SA bound is at most Γ_R Σ_r α_r² V²/(Γ_r μ) ≤ 8V²/(μ(R+1))), so v_k = 2β already gives
//!   each stage's halving, and the second branch can only enlarge v_k (shorter steps).
//! * **Truncation.** Stages run while the round budget lasts; the stage that would cross it is
//!   cut short (its v_k is kept), so Σ_k R_k = R exactly.
//! * q₀ := w₀ (the text's "q₀ = 0" contradicts its own input w₀).

/// The schedule types live in the floor with the AC-SA server half that follows them.
pub(crate) use crate::algo::acsa_server::{AcsaSchedule, Stage};

/// The convex AC-SA constant γ = max{2β, √(V² R(R+1)(R+2)/(3D²))} (see the module doc).
pub(crate) fn convex_gamma(beta: f64, variance: f64, diameter: f64, rounds: usize) -> f64 {
    let r = rounds as f64;
    let noise = (variance * r * (r + 1.0) * (r + 2.0) / (3.0 * diameter * diameter)).sqrt();
    (2.0 * beta).max(if noise.is_finite() { noise } else { 0.0 })
}

/// The multi-stage schedule of App. E.1 for a μ-strongly convex, β-smooth objective with
/// gradient-noise variance V² and initial gap Δ ≥ F(w₀) − F*, cut to `budget` rounds:
///
/// R_k = ⌈max{4√(2β/μ), 128V²/(3μΔ2^{−(k+1)})}⌉,
/// v_k = max{2β, [μV²/(3Δ2^{−(k−1)} R_k(R_k+1)(R_k+2))]^{1/2}}.
pub(crate) fn multistage(
    beta: f64,
    mu: f64,
    variance: f64,
    gap: f64,
    budget: usize,
) -> crate::Result<Vec<Stage>> {
    for (name, v) in [("smoothness", beta), ("strong_convexity", mu), ("gap", gap)] {
        if !(v.is_finite() && v > 0.0) {
            return Err(crate::Error::config(
                format!("algorithm.constants.{name}"),
                format!("must be finite and > 0 for the multi-stage schedule, got {v}"),
            ));
        }
    }
    if !(variance.is_finite() && variance >= 0.0) {
        return Err(crate::Error::config(
            "algorithm.constants.variance",
            format!("must be finite and >= 0, got {variance}"),
        ));
    }
    let mut stages = Vec::new();
    let mut used = 0usize;
    let mut k = 1i32;
    while used < budget {
        let shrink = |e: i32| 2f64.powi(-e);
        let rk = (4.0 * (2.0 * beta / mu).sqrt())
            .max(128.0 * variance / (3.0 * mu * gap * shrink(k + 1)))
            .ceil()
            .max(1.0);
        let v = (2.0 * beta).max(
            (mu * variance / (3.0 * gap * shrink(k - 1) * rk * (rk + 1.0) * (rk + 2.0))).sqrt(),
        );
        // The stage that would cross the budget is cut short (compared in f64: R_k may be huge).
        let remaining = budget - used;
        let rounds = if rk < remaining as f64 {
            rk as usize
        } else {
            remaining
        };
        stages.push(Stage { rounds, v });
        used += rounds;
        k += 1;
    }
    Ok(stages)
}

/// Strongly convex step and weights of Thm 2.1 / D.1 (proof of Lemma D.6 with Stich's
/// Lemma D.5: a = μ, b = 2, g = 2β, c = dσ²/M + L², r₀ = ‖w₀ − w*‖² ≤ D², T = R):
///
/// η = min{1/(2β), ln(max{2, μ² r₀ R²/c})/(μR)},   γ_r = (1 − μη)^{−(r+1)}.
///
/// Returns η; the weights are [`crate::algo::server::OutputRule::Exponential`] with decay μη.
pub(crate) fn stich_step(beta: f64, mu: f64, r0: f64, c: f64, rounds: usize) -> f64 {
    let r = rounds as f64;
    let arg = (mu * mu * r0 * r * r / c).max(2.0);
    (1.0 / (2.0 * beta)).min(arg.ln() / (mu * r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_follow_app_e1_and_are_truncated() {
        // β = 1, μ = 0.01, V² = 0.5, Δ = 2, budget 400.
        // k = 1: max{4√200 = 56.57, 128·0.5/(3·0.01·2·2^{−2}) = 64/0.015 = 4266.7} → 4267,
        // truncated to 400. v_1 = max{2, [0.01·0.5/(3·2·1·4267·4268·4269)]^{1/2}} = 2.
        let s = multistage(1.0, 0.01, 0.5, 2.0, 400).unwrap();
        assert_eq!(
            s,
            vec![Stage {
                rounds: 400,
                v: 2.0
            }]
        );
        // Noise-free: every stage has R_k = ⌈4√200⌉ = 57, and 200 = 3·57 + 29.
        let s = multistage(1.0, 0.01, 0.0, 2.0, 200).unwrap();
        assert_eq!(
            s.iter().map(|x| x.rounds).collect::<Vec<_>>(),
            vec![57, 57, 57, 29]
        );
        assert!(s.iter().all(|x| x.v == 2.0));
        // The second branch of v_k wins for tiny β: β = 1e-6, μ = 1, V² = 1e-6, Δ = 1:
        // R_1 = ⌈max{4√(2e-6) = 0.0057, 128e-6/(3·1·1·0.25) = 1.7e-4}⌉ = 1,
        // v_1 = max{2e-6, [1·1e-6/(3·1·1·1·2·3)]^{1/2} = 2.3570226e-4}.
        let s = multistage(1e-6, 1.0, 1e-6, 1.0, 3).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].rounds, 1);
        assert!(
            (s[0].v - (1e-6f64 / 18.0).sqrt()).abs() < 1e-18,
            "{}",
            s[0].v
        );
        // k = 2: Δ2^{-1} halves the denominator: v_2 = [1e-6/9]^{1/2}.
        assert!(
            (s[1].v - (1e-6f64 / 9.0).sqrt()).abs() < 1e-18,
            "{}",
            s[1].v
        );
        assert!(multistage(1.0, 0.0, 0.0, 1.0, 5).is_err());
        assert!(multistage(1.0, 1.0, 0.0, -1.0, 5).is_err());
    }

    #[test]
    fn schedule_restarts_each_stage() {
        let sched = AcsaSchedule::MultiStage {
            stages: vec![Stage { rounds: 2, v: 3.0 }, Stage { rounds: 3, v: 5.0 }],
        };
        let s1 = sched.step(1);
        assert_eq!((s1.stage, s1.r, s1.alpha, s1.eta), (0, 1, 1.0, 6.0));
        let s3 = sched.step(3);
        // Stage 2, r = 1: α = 1, η = 4·5/2 = 10.
        assert_eq!((s3.stage, s3.r, s3.alpha, s3.eta), (1, 1, 1.0, 10.0));
        let s5 = sched.step(5);
        // r = 3: α = 1/2, η = 4·5/12.
        assert_eq!((s5.stage, s5.r), (1, 3));
        assert!((s5.eta - 20.0 / 12.0).abs() < 1e-15);
        // Past the plan, the last stage continues: t = 6 is r = 4 of stage 2.
        assert_eq!(sched.step(6).r, 4);
        assert_eq!(sched.planned_rounds(), Some(5));
        let c = AcsaSchedule::Convex { gamma: 2.0 };
        // r = 4: α = 2/5, η = 4·2/20 = 0.4.
        let s = c.step(4);
        assert!((s.alpha - 0.4).abs() < 1e-15 && (s.eta - 0.4).abs() < 1e-15);
    }

    #[test]
    fn convex_gamma_and_stich_step_match_hand_values() {
        // β = 0.5, V² = 3, D = 2, R = 10: √(3·10·11·12/(3·4)) = √330 = 18.166 > 2β = 1.
        assert!((convex_gamma(0.5, 3.0, 2.0, 10) - 330f64.sqrt()).abs() < 1e-12);
        assert_eq!(convex_gamma(0.5, 0.0, 2.0, 10), 1.0);
        // β = 1, μ = 0.1, r₀ = 4, c = 2, R = 100: μ² r₀ R²/c = 0.01·4·1e4/2 = 200,
        // ln 200/(0.1·100) = 0.52983 > 1/(2β) = 0.5 → η = 0.5.
        assert_eq!(stich_step(1.0, 0.1, 4.0, 2.0, 100), 0.5);
        // R = 1000: arg = 2e4, ln(2e4)/100 = 0.099035.
        let eta = stich_step(1.0, 0.1, 4.0, 2.0, 1000);
        assert!((eta - 20000f64.ln() / 100.0).abs() < 1e-15);
        // Small arguments are floored at 2: μ² r₀ R²/c = 0.01·1·1/100 → ln 2/(0.1·1).
        assert!((stich_step(100.0, 0.1, 1.0, 100.0, 1) - 0.005).abs() < 1e-15);
    }
}
