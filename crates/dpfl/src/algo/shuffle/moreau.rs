//! Moreau smoothing for non-smooth losses (Cheu, Joseph, Mao & Peng 2022, Definition 4.5,
//! Lemma 4.6, Theorem 4.7; digest `shuffle-private-sco.md` §2.6): PAGD and pan-private AC-SA
//! run on the β-Moreau envelope
//!
//!   ℓ_β(θ; x) = min_{θ'} ℓ(θ'; x) + (β/2)‖θ − θ'‖²,   ∇ℓ_β(θ) = β(θ − prox_{ℓ/β}(θ)),
//!
//! which each user computes locally from the proximal operator of its own loss. The
//! envelope is β-smooth, and ℓ_β ≤ ℓ ≤ ℓ_β + L²/(2β) (Lemma 4.6; the OCR's "+ L" read as
//! L²/(2β) from the proofs of Thms 4.7/4.9), so the smoothed minimiser is L²/(2β)-optimal.
//!
//! * The wing smooths through [`crate::model::Model::smoothed`]: the hinge loss
//!   (`model/hinge.rs`) and the absolute loss |⟨θ, x⟩ − y| (`kind = "absolute"`,
//!   `model/absolute.rs`) have closed-form proxes; `absolute_prox` and
//!   `absolute_envelope_grad` (test-only) check the latter against hand-computed values.
//! * β: [`theory_beta`] (Thm 4.7), or a value from the config.
//!
//! Decisions on the digest's ambiguities: **prox domain** (§5.2 item 11) — unconstrained on
//! R^d: the losses are convex and L-Lipschitz on all of R^d, so the envelope gradient lies in
//! ∂ℓ(prox(θ)) and has norm ≤ L; **Lipschitz constant** (item 10) — PVEC still runs with
//! Δ₂ = 2L and the gradients are clipped at 2L (Lemma 4.6's conservative bound, as the paper
//! does): twice the noise the envelope strictly needs, never less.

#![warn(missing_docs)]

#[cfg(test)]
use crate::linalg::{axpy, dot};
#[cfg(test)]
use crate::model::AbsoluteLoss;
#[cfg(test)]
use crate::model::absolute_prox_step as absolute_step;

/// Thm 4.7's β = ε^{2/3} n^{2/3} L / (d^{1/3} D ℓ^{2/3}) with ℓ the log factor (ln(d/δ) for
/// PVEC, √ln(1/δ) pan-privately).
pub(crate) fn theory_beta(
    epsilon: f64,
    users: f64,
    lipschitz: f64,
    d: f64,
    diameter: f64,
    log_factor: f64,
) -> crate::Result<f64> {
    let beta = (epsilon * users).powf(2.0 / 3.0) * lipschitz
        / (d.cbrt() * diameter * log_factor.powf(2.0 / 3.0));
    if beta.is_finite() && beta > 0.0 {
        Ok(beta)
    } else {
        Err(crate::Error::config(
            "algorithm.smoothing",
            format!(
                "Thm 4.7's beta is {beta} (eps = {epsilon}, n = {users}, L = {lipschitz}, d = {d}, D = {diameter})"
            ),
        ))
    }
}

/// prox_{ℓ/β}(θ) for ℓ(θ) = |⟨θ, x⟩ − y| into `out` (the model's closed form,
/// `model/absolute.rs`).
#[cfg(test)]
pub(crate) fn absolute_prox(theta: &[f64], x: &[f64], y: f64, beta: f64, out: &mut [f64]) {
    AbsoluteLoss::prox(theta, x, y, beta, out);
}

/// ∇ℓ_β(θ) = β(θ − prox_{ℓ/β}(θ)) = clamp(β r/q, −1, 1)·x for the absolute loss, into `out`.
#[cfg(test)]
pub(crate) fn absolute_envelope_grad(theta: &[f64], x: &[f64], y: f64, beta: f64, out: &mut [f64]) {
    let t = absolute_step(dot(theta, x) - y, dot(x, x), beta);
    out.iter_mut().for_each(|v| *v = 0.0);
    axpy(-beta * t, x, out);
}

/// ℓ_β(θ) for the absolute loss: the prox objective at the prox.
#[cfg(test)]
pub(crate) fn absolute_envelope(theta: &[f64], x: &[f64], y: f64, beta: f64) -> f64 {
    AbsoluteLoss::envelope(theta, x, y, beta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{HingeLoss, Model};

    #[test]
    fn theory_beta_by_hand() {
        // ε = 1, n = 1000, L = 1, d = 8, D = 2, ℓ = 8: 100/(2·2·4) = 6.25.
        let b = theory_beta(1.0, 1000.0, 1.0, 8.0, 2.0, 8.0).unwrap();
        assert!((b - 6.25).abs() < 1e-12, "{b}");
        assert!(theory_beta(1.0, 1000.0, 1.0, 8.0, f64::INFINITY, 8.0).is_err());
    }

    #[test]
    fn absolute_prox_by_hand() {
        // x = (3, 4), q = 25, y = 0, β = 5: q/β = 5.
        let x = [3.0, 4.0];
        let mut p = [0.0; 2];
        // θ = (1, 1): r = 7 > 5, t = −1/5: prox = (1 − 0.6, 1 − 0.8) = (0.4, 0.2).
        absolute_prox(&[1.0, 1.0], &x, 0.0, 5.0, &mut p);
        assert!(
            (p[0] - 0.4).abs() < 1e-15 && (p[1] - 0.2).abs() < 1e-15,
            "{p:?}"
        );
        // Its gradient β(θ − prox) = 5·(0.6, 0.8) = (3, 4) = sign(r)·x.
        let mut g = [0.0; 2];
        absolute_envelope_grad(&[1.0, 1.0], &x, 0.0, 5.0, &mut g);
        assert!((g[0] - 3.0).abs() < 1e-12 && (g[1] - 4.0).abs() < 1e-12);
        // θ = (0.2, 0.1): r = 1 ≤ 5, t = −1/25: prox = (0.08, −0.06) on the kink ⟨p, x⟩ = 0.
        absolute_prox(&[0.2, 0.1], &x, 0.0, 5.0, &mut p);
        assert!(
            (p[0] - 0.08).abs() < 1e-15 && (p[1] + 0.06).abs() < 1e-15,
            "{p:?}"
        );
        assert!(dot(&p, &x).abs() < 1e-15);
        // The envelope: β r²/(2q) = 5/50 = 0.1 inside, |r| − q/(2β) = 7 − 2.5 outside.
        assert!((absolute_envelope(&[0.2, 0.1], &x, 0.0, 5.0) - 0.1).abs() < 1e-12);
        assert!((absolute_envelope(&[1.0, 1.0], &x, 0.0, 5.0) - 4.5).abs() < 1e-12);
    }

    #[test]
    fn hinge_prox_by_hand() {
        // x = (3, 4), y = 1 (s = +1), θ = 0 (margin 0), q = 25.
        let h = HingeLoss::new(2, None).unwrap();
        let mut v = [0.0; 2];
        // β = 5: 0 > 1 − q/β = −4, so t = (1 − 0)/q = 0.04: v = (0.12, 0.16), on the kink.
        h.prox(&[0.0, 0.0], &[3.0, 4.0], 1.0, 5.0, &mut v);
        assert!(
            (v[0] - 0.12).abs() < 1e-15 && (v[1] - 0.16).abs() < 1e-15,
            "{v:?}"
        );
        // β = 100: 0 ≤ 1 − 0.25, so t = 1/β: v = (0.03, 0.04).
        h.prox(&[0.0, 0.0], &[3.0, 4.0], 1.0, 100.0, &mut v);
        assert!(
            (v[0] - 0.03).abs() < 1e-15 && (v[1] - 0.04).abs() < 1e-15,
            "{v:?}"
        );
        // The smoothed model's gradient is β(θ − prox) = −(3, 4) at β = 100.
        let s = h.smoothed(100.0).unwrap().unwrap();
        let mut g = [0.0; 2];
        s.add_grad(&[0.0, 0.0], &[3.0, 4.0], 1.0, 1.0, &mut g);
        assert!(
            (g[0] + 3.0).abs() < 1e-12 && (g[1] + 4.0).abs() < 1e-12,
            "{g:?}"
        );
    }

    /// The minimiser of θ ↦ mean_i ℓ_β(θ; 1, y_i) by bisection on its (monotone) derivative.
    fn smoothed_minimiser(ys: &[f64], beta: f64) -> f64 {
        let slope = |w: f64| -> f64 {
            ys.iter()
                .map(|&y| {
                    let mut g = [0.0];
                    absolute_envelope_grad(&[w], &[1.0], y, beta, &mut g);
                    g[0]
                })
                .sum()
        };
        let (mut lo, mut hi) = (-10.0, 10.0);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if slope(mid) < 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        0.5 * (lo + hi)
    }

    #[test]
    fn the_smoothed_optimum_approaches_the_true_one() {
        // Mean |θ − y| over y = {0, 0.9, 1, 5, 6}: minimised at the median 1 (value 2.02).
        let ys = [0.0, 0.9, 1.0, 5.0, 6.0];
        let f = |w: f64| ys.iter().map(|y| (w - y).abs()).sum::<f64>() / 5.0;
        // β = 2 (Huber width 1/2): slope −1 + 2(θ − 0.9) + 2(θ − 1) = 0 at θ = 1.2 (both
        // near points inside the width, the others outside): 0.2 from the true optimum.
        let w2 = smoothed_minimiser(&ys, 2.0);
        assert!((w2 - 1.2).abs() < 1e-9, "{w2}");
        // β = 20 (width 0.05): 0.9 is outside the width: −1 + 1 + 20(θ − 1) = 0 at θ = 1.
        let w20 = smoothed_minimiser(&ys, 20.0);
        assert!((w20 - 1.0).abs() < 1e-9, "{w20}");
        // Lemma 4.6: the smoothed minimiser is L²/(2β)-optimal (L = 1): 0.04 ≤ 0.25.
        assert!((f(w2) - 2.06).abs() < 1e-9 && f(w2) - f(1.0) <= 0.25);
        for beta in [0.5, 1.0, 2.0, 8.0, 50.0] {
            let w = smoothed_minimiser(&ys, beta);
            assert!(f(w) - f(1.0) <= 0.5 / beta + 1e-9, "beta {beta}: {w}");
            // ℓ_β ≤ ℓ ≤ ℓ_β + L²/(2β) pointwise.
            for &t in &[-3.0, 0.3, 1.0, 2.5, 7.0] {
                for &y in &ys {
                    let e = absolute_envelope(&[t], &[1.0], y, beta);
                    let l = (t - y).abs();
                    assert!(e <= l + 1e-12 && l <= e + 0.5 / beta + 1e-12);
                }
            }
        }
    }
}
