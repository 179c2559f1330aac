//! Linear SVM (hinge loss) and its Moreau envelope, for the non-smooth results of Lowy &
//! Razaviyayn (ICLR 2023): Thm 2.1 / D.2 (Noisy MB-SGD) and Thm 4.1 / F.2 (accelerated ERM)
//! run the smooth algorithms on the β-Moreau envelope (Nesterov 2005; their Lemma D.7)
//!
//!   f_β(w; x) = min_v { f(v; x) + (β/2)‖w − v‖² },   ∇f_β(w) = β (w − prox_{f/β}(w)).
//!
//! Labels y ∈ {0, 1} are mapped to s = 2y − 1 ∈ {−1, +1}; f(w; x, y) = max(0, 1 − s⟨w, x⟩),
//! which is ‖x‖-Lipschitz.
//!
//! **Per-example prox in closed form.** prox_{f/β}(w) = argmin_v f(v) + (β/2)‖v − w‖² moves w
//! along s·x only (a component orthogonal to x raises the quadratic and leaves f unchanged):
//! v = w + t s x with t ≥ 0 minimising max(0, 1 − m − t q) + (β/2) q t², where m = s⟨w, x⟩
//! and q = ‖x‖². Hence
//!
//! * m ≥ 1: t = 0 (no loss, v = w);
//! * m ≤ 1 − q/β: t = 1/β (a full subgradient step, the hinge stays active);
//! * otherwise t = (1 − m)/q (v lands on the kink s⟨v, x⟩ = 1).
//!
//! So ∇f_β(w) = −s · clamp(β(1 − m)/q, 0, 1) · x (the "Huberised" hinge) and
//! f_β(w) = 0, 1 − m − q/(2β), or β(1 − m)²/(2q) in the three cases.
//!
//! **Lipschitz constant used for privacy.** The gradient above lies in ∂f(prox(w)), so its
//! norm is at most ‖x‖: f_β is as Lipschitz as f. The paper's Lemma D.7 states only that f_β is
//! 2L-Lipschitz (its envelope minimises over v ∈ W, which can double the bound outside W). We
//! follow the paper on the safe side: the smoothed model reports 2·max‖x‖, so noise calibrated
//! to [`Model::lipschitz`] is twice what the envelope strictly needs.

use super::Metric;
use super::moreau_linear::{MoreauLinear, ProxLinearLoss};
use crate::data::Dataset;
use crate::linalg::{axpy, dot};

/// Hinge loss on labels {0, 1}; with `smoothing = Some(β)` its β-Moreau envelope.
pub type HingeLoss = MoreauLinear<Hinge>;

/// The hinge loss's formulas (module doc), for [`MoreauLinear`].
#[derive(Debug, Clone, Copy)]
pub struct Hinge;

/// Where the prox of (1/β)·hinge puts w, as the step t along s·x (see the module doc).
#[inline]
fn prox_step(margin: f64, sq_norm: f64, beta: f64) -> f64 {
    if margin >= 1.0 || sq_norm == 0.0 {
        0.0
    } else if margin <= 1.0 - sq_norm / beta {
        1.0 / beta
    } else {
        (1.0 - margin) / sq_norm
    }
}

#[inline]
fn sign(y: f64) -> f64 {
    if y > 0.5 { 1.0 } else { -1.0 }
}

impl ProxLinearLoss for Hinge {
    const NAMES: [&'static str; 2] = ["hinge", "smoothed hinge"];
    const METRIC: Metric = Metric::ErrorRate;

    fn loss(w: &[f64], x: &[f64], y: f64, smoothing: Option<f64>) -> f64 {
        let Some(beta) = smoothing else {
            return HingeLoss::hinge(w, x, y);
        };
        let m = sign(y) * dot(w, x);
        let q = dot(x, x);
        let t = prox_step(m, q, beta);
        // f(v) + (β/2)‖w − v‖² at v = w + t s x.
        (1.0 - m - t * q).max(0.0) + 0.5 * beta * t * t * q
    }

    /// −s where the plain hinge is active (s = ±1 the signed label), and β(w − prox(w)) =
    /// −β t s x for the envelope.
    fn coefficient(z: f64, xx: f64, y: f64, smoothing: Option<f64>) -> f64 {
        let s = sign(y);
        let m = s * z;
        let c = match smoothing {
            Some(beta) => beta * prox_step(m, xx, beta),
            None if m < 1.0 => 1.0,
            None => 0.0,
        };
        -c * s
    }

    fn predict(z: f64) -> f64 {
        if z > 0.0 { 1.0 } else { 0.0 }
    }

    fn check_target(data: &Dataset) -> crate::Result<()> {
        match data.target().num_classes() {
            Some(2) => Ok(()),
            other => Err(crate::Error::Dimension(format!(
                "the hinge loss needs a 2-class target, the data has {}",
                other.map_or("a real target".to_string(), |c| format!("{c} classes"))
            ))),
        }
    }
}

impl HingeLoss {
    /// prox_{f/β}(w) for the unsmoothed hinge f(·; x, y), written into `out`.
    pub fn prox(&self, w: &[f64], x: &[f64], y: f64, beta: f64, out: &mut [f64]) {
        let s = sign(y);
        let t = prox_step(s * dot(w, x), dot(x, x), beta);
        out.copy_from_slice(w);
        axpy(t * s, x, out);
    }

    /// The unsmoothed hinge max(0, 1 − s⟨w, x⟩).
    pub fn hinge(w: &[f64], x: &[f64], y: f64) -> f64 {
        (1.0 - sign(y) * dot(w, x)).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;

    /// Brute force: minimise f(v) + (β/2)‖v − w‖² over v = w + a x/‖x‖ + b u (u ⊥ x) on a
    /// fine grid; the optimum must be at b = 0 and match the closed form.
    fn brute_prox(w: &[f64], x: &[f64], y: f64, beta: f64) -> (Vec<f64>, f64) {
        let q = dot(x, x);
        let nx = q.sqrt();
        let u = [-x[1] / nx, x[0] / nx];
        let obj = |v: &[f64]| {
            let d2: f64 = v.iter().zip(w).map(|(a, b)| (a - b) * (a - b)).sum();
            HingeLoss::hinge(v, x, y) + 0.5 * beta * d2
        };
        let (mut best, mut best_v) = (f64::INFINITY, vec![0.0; 2]);
        let steps = 4000;
        for i in 0..=steps {
            for j in -2..=2 {
                let a = -2.0 / beta * nx + 4.0 / beta * nx * i as f64 / steps as f64;
                let b = 1e-3 * j as f64;
                let v = [
                    w[0] + a * x[0] / nx + b * u[0],
                    w[1] + a * x[1] / nx + b * u[1],
                ];
                let o = obj(&v);
                if o < best {
                    best = o;
                    best_v = v.to_vec();
                }
            }
        }
        (best_v, best)
    }

    #[test]
    fn prox_matches_brute_force_in_all_three_regimes() {
        let x = [0.6, -0.8]; // ‖x‖ = 1
        let beta = 2.0;
        let model = HingeLoss::new(2, Some(beta)).unwrap();
        // margins m = s⟨w,x⟩: 1.5 (inactive), 0.8 (kink: 1 − q/β = 0.5 < m < 1), −1 (full step).
        for (w, y) in [([0.9, -1.2], 1.0), ([0.48, -0.64], 1.0), ([0.6, -0.8], 0.0)] {
            let mut v = [0.0; 2];
            model.prox(&w, &x, y, beta, &mut v);
            let (bv, bobj) = brute_prox(&w, &x, y, beta);
            for k in 0..2 {
                assert!((v[k] - bv[k]).abs() < 2e-3, "{v:?} vs {bv:?}");
            }
            // The envelope value is the minimum of the prox objective.
            assert!((model.loss(&w, &x, y) - bobj).abs() < 1e-5, "{}", bobj);
        }
        // Hand values: m = 0.8 lands on the kink, t = (1 − 0.8)/1 = 0.2: v = w + 0.2 x.
        let mut v = [0.0; 2];
        model.prox(&[0.48, -0.64], &x, 1.0, beta, &mut v);
        assert!((v[0] - 0.6).abs() < 1e-12 && (v[1] + 0.8).abs() < 1e-12);
        // f_β = β(1 − m)²/(2q) = 2·0.04/2 = 0.04.
        assert!((model.loss(&[0.48, -0.64], &x, 1.0) - 0.04).abs() < 1e-12);
        // m = −1 (label 0, s = −1, ⟨w,x⟩ = 1): f_β = 1 − m − q/(2β) = 2 − 0.25 = 1.75.
        assert!((model.loss(&[0.6, -0.8], &x, 0.0) - 1.75).abs() < 1e-12);
    }

    #[test]
    fn moreau_gradient_matches_finite_differences_of_the_envelope() {
        let x = [1.5, 0.5, -1.0];
        for beta in [0.5, 3.0, 40.0] {
            let model = HingeLoss::new(3, Some(beta)).unwrap();
            for (w, y) in [
                ([0.1, 0.2, 0.3], 1.0),
                ([0.3, 0.1, -0.2], 1.0),
                ([-0.5, 1.0, 0.4], 0.0),
                ([0.05, -0.02, 0.01], 0.0),
            ] {
                let mut g = [0.0; 3];
                model.add_grad(&w, &x, y, 1.0, &mut g);
                // β(w − prox(w)) is the same vector.
                let mut p = [0.0; 3];
                model.prox(&w, &x, y, beta, &mut p);
                for k in 0..3 {
                    assert!((g[k] - beta * (w[k] - p[k])).abs() < 1e-12);
                }
                let h = 1e-6;
                for k in 0..3 {
                    let (mut wp, mut wm) = (w, w);
                    wp[k] += h;
                    wm[k] -= h;
                    let fd = (model.loss(&wp, &x, y) - model.loss(&wm, &x, y)) / (2.0 * h);
                    assert!(
                        (fd - g[k]).abs() < 1e-5,
                        "beta {beta} w {w:?} k {k}: {fd} vs {}",
                        g[k]
                    );
                }
                // ‖∇f_β‖ ≤ ‖x‖ (the gradient is a subgradient of f at the prox point).
                assert!(crate::linalg::norm2(&g) <= crate::linalg::norm2(&x) + 1e-12);
            }
        }
    }

    #[test]
    fn envelope_sandwich_and_plain_subgradient() {
        // Lemma D.7 part 2: f_β ≤ f ≤ f_β + L²/(2β), L = ‖x‖.
        let x = [2.0, -1.0];
        let beta = 1.5;
        let smooth = HingeLoss::new(2, Some(beta)).unwrap();
        let plain = HingeLoss::new(2, None).unwrap();
        for i in 0..50 {
            let w = [-1.0 + 0.05 * i as f64, 0.3 - 0.02 * i as f64];
            for y in [0.0, 1.0] {
                let (fb, f) = (smooth.loss(&w, &x, y), plain.loss(&w, &x, y));
                assert!(fb <= f + 1e-12 && f <= fb + 5.0 / (2.0 * beta) + 1e-12);
            }
        }
        let mut g = [0.0; 2];
        plain.add_grad(&[0.0, 0.0], &x, 1.0, 1.0, &mut g);
        assert_eq!(g, [-2.0, 1.0]);
        assert_eq!(smooth.lipschitz(3.0), Some(6.0));
        assert_eq!(plain.lipschitz(3.0), Some(3.0));
        assert!(HingeLoss::new(2, Some(0.0)).is_err());
        assert!(smooth.smoothed(1.0).is_err());
        assert!(plain.smoothed(1.0).unwrap().is_some());
    }
}
