//! Least absolute deviations: f(w; x, y) = |⟨w, x⟩ − y|, the non-smooth Lipschitz loss of the
//! shuffle SCO paper's assumptions (Cheu, Joseph, Mao & Peng 2022 §4.2: convex, L-Lipschitz,
//! not smooth; digest `shuffle-private-sco.md` §2.6 and §5.1 item 9 name the absolute loss as
//! a loss with a closed-form prox). Issue 15.
//!
//! * **Lipschitz constant** (the bounded-data assumption ‖x‖ ≤ X): |f(w) − f(w')| ≤
//!   |⟨w − w', x⟩| ≤ X‖w − w'‖, so L = max‖x‖ ([`Model::lipschitz`] at `max_norm`).
//! * **Subgradient**: sign(r)·x with r = ⟨w, x⟩ − y; at the kink r = 0 we return 0, which lies
//!   in ∂f = [−1, 1]·x, so every returned vector has norm ≤ ‖x‖ ≤ L.
//! * **Moreau envelope** (Cheu et al. Def. 4.5 / Lemma 4.6, for PAGD, pan-private AC-SA and
//!   Lowy's smooth algorithms): prox_{f/β}(w) moves w along x only, w + t·x with q = ‖x‖²:
//!   t = −r/q when |r| ≤ q/β (the prox lands on the kink ⟨prox, x⟩ = y), else −sign(r)/β (a full
//!   subgradient step). Hence ∇f_β(w) = β(w − prox) = clamp(βr/q, −1, 1)·x (the Huber
//!   loss of width q/β) and f_β = βr²/(2q) inside, |r| − q/(2β) outside. The envelope is
//!   β-smooth and within L²/(2β) of f. As for the hinge loss (`hinge.rs`), the smoothed model
//!   reports 2·max‖x‖ as its Lipschitz constant (Lemma 4.6 / Lowy & Razaviyayn Lemma D.7, safe
//!   side), although its gradient lies in ∂f(prox(w)) and has norm ≤ ‖x‖.
//!
//! Predictions are ⟨w, x⟩ and the metric is the RMSE (dpfl's one metric for a real target;
//! the mean absolute deviation is the model's loss, reported beside it).

use super::Metric;
use super::moreau_linear::{MoreauLinear, ProxLinearLoss};
use crate::data::Dataset;
use crate::linalg::{axpy, dot};

/// |⟨w, x⟩ − y| on a real target; with `smoothing = Some(β)` its β-Moreau envelope.
pub type AbsoluteLoss = MoreauLinear<Absolute>;

/// The absolute loss's formulas (module doc), for [`MoreauLinear`].
#[derive(Debug, Clone, Copy)]
pub struct Absolute;

/// The step t with prox_{f/β}(w) = w + t·x for residual r = ⟨w, x⟩ − y and q = ‖x‖² (module
/// doc); 0 for x = 0, where f does not depend on w.
#[inline]
pub fn prox_step(r: f64, q: f64, beta: f64) -> f64 {
    if q == 0.0 {
        0.0
    } else if r.abs() <= q / beta {
        -r / q
    } else {
        -r.signum() / beta
    }
}

impl ProxLinearLoss for Absolute {
    const NAMES: [&'static str; 2] = ["absolute", "smoothed absolute"];
    const METRIC: Metric = Metric::Rmse;

    fn loss(w: &[f64], x: &[f64], y: f64, smoothing: Option<f64>) -> f64 {
        match smoothing {
            Some(beta) => AbsoluteLoss::envelope(w, x, y, beta),
            None => (dot(w, x) - y).abs(),
        }
    }

    fn coefficient(z: f64, xx: f64, y: f64, smoothing: Option<f64>) -> f64 {
        let r = z - y;
        match smoothing {
            // β(w − prox) = −βt·x.
            Some(beta) => -beta * prox_step(r, xx, beta),
            // sign(0) = 0: a subgradient at the kink.
            None if r > 0.0 => 1.0,
            None if r < 0.0 => -1.0,
            None => 0.0,
        }
    }

    fn predict(z: f64) -> f64 {
        z
    }

    fn check_target(data: &Dataset) -> crate::Result<()> {
        if data.target().num_classes().is_some() {
            return Err(crate::Error::Dimension(
                "the absolute loss needs a real-valued target, the data has classes".into(),
            ));
        }
        Ok(())
    }
}

impl AbsoluteLoss {
    /// prox_{f/β}(w) for the unsmoothed loss f(·; x, y), written into `out`.
    pub fn prox(w: &[f64], x: &[f64], y: f64, beta: f64, out: &mut [f64]) {
        let t = prox_step(dot(w, x) - y, dot(x, x), beta);
        out.copy_from_slice(w);
        axpy(t, x, out);
    }

    /// The β-Moreau envelope f_β(w; x, y): the prox objective at the prox.
    pub fn envelope(w: &[f64], x: &[f64], y: f64, beta: f64) -> f64 {
        let q = dot(x, x);
        let r = dot(w, x) - y;
        let t = prox_step(r, q, beta);
        (r + t * q).abs() + 0.5 * beta * t * t * q
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;

    #[test]
    fn loss_and_subgradient_by_hand() {
        let m = AbsoluteLoss::new(2, None).unwrap();
        let x = [3.0, 4.0]; // ‖x‖ = 5
        // w = (1, 1), y = 2: r = 7 − 2 = 5, f = 5, ∂f = {x}.
        assert_eq!(m.loss(&[1.0, 1.0], &x, 2.0), 5.0);
        let mut g = [0.0; 2];
        m.add_grad(&[1.0, 1.0], &x, 2.0, 1.0, &mut g);
        assert_eq!(g, [3.0, 4.0]);
        // y = 10: r = −3, f = 3, ∂f = {−x}; scale 0.5 halves it.
        assert_eq!(m.loss(&[1.0, 1.0], &x, 10.0), 3.0);
        let mut g = [0.0; 2];
        m.add_grad(&[1.0, 1.0], &x, 10.0, 0.5, &mut g);
        assert_eq!(g, [-1.5, -2.0]);
        // The kink r = 0: f = 0 and the subgradient 0 ∈ [−1, 1]·x.
        let mut g = [0.0; 2];
        m.add_grad(&[1.0, 1.0], &x, 7.0, 1.0, &mut g);
        assert_eq!(g, [0.0, 0.0]);
        // L = max‖x‖; the envelope reports 2L (Lemma 4.6, safe side).
        assert_eq!(m.lipschitz(5.0), Some(5.0));
        let s = m.smoothed(2.0).unwrap().unwrap();
        assert_eq!(s.lipschitz(5.0), Some(10.0));
        assert!(s.smoothed(1.0).is_err());
        assert!(AbsoluteLoss::new(2, Some(0.0)).is_err());
        assert!(AbsoluteLoss::new(2, Some(f64::NAN)).is_err());
    }

    #[test]
    fn subgradient_matches_one_sided_differences_away_from_and_at_the_kink() {
        let m = AbsoluteLoss::new(3, None).unwrap();
        let x = [1.5, 0.5, -1.0];
        let h = 1e-7;
        for (w, y) in [
            ([0.1, 0.2, 0.3], 1.0),
            ([0.3, 0.1, -0.2], -2.0),
            ([-0.5, 1.0, 0.4], 0.0),
        ] {
            let mut g = [0.0; 3];
            m.add_grad(&w, &x, y, 1.0, &mut g);
            for k in 0..3 {
                let (mut wp, mut wm) = (w, w);
                wp[k] += h;
                wm[k] -= h;
                let fd = (m.loss(&wp, &x, y) - m.loss(&wm, &x, y)) / (2.0 * h);
                assert!((fd - g[k]).abs() < 1e-6, "{w:?} {k}: {fd} vs {}", g[k]);
            }
        }
        // At the kink (⟨w, x⟩ = y) the one-sided slopes along e_k are ±|x_k|: the
        // directional derivative is |x_k| both ways, and 0·x_k lies between them.
        let w = [1.0, 1.0, 1.0];
        let y = dot(&w, &x); // 1.0
        for k in 0..3 {
            let mut wp = w;
            wp[k] += h;
            let right = (m.loss(&wp, &x, y) - m.loss(&w, &x, y)) / h;
            assert!((right - x[k].abs()).abs() < 1e-6, "{k}: {right}");
        }
    }

    #[test]
    fn envelope_by_hand_and_against_finite_differences() {
        // x = (3, 4), q = 25, y = 0, β = 5: the Huber width q/β = 5.
        let x = [3.0, 4.0];
        let s = AbsoluteLoss::new(2, Some(5.0)).unwrap();
        // w = (1, 1): r = 7 > 5, outside: f_β = 7 − 25/10 = 4.5, ∇ = sign(r)·x = (3, 4).
        assert!((s.loss(&[1.0, 1.0], &x, 0.0) - 4.5).abs() < 1e-12);
        let mut g = [0.0; 2];
        s.add_grad(&[1.0, 1.0], &x, 0.0, 1.0, &mut g);
        assert!(
            (g[0] - 3.0).abs() < 1e-12 && (g[1] - 4.0).abs() < 1e-12,
            "{g:?}"
        );
        // w = (0.2, 0.1): r = 1 ≤ 5, inside: f_β = βr²/(2q) = 5/50 = 0.1,
        // ∇ = (βr/q)·x = 0.2·(3, 4) = (0.6, 0.8).
        assert!((s.loss(&[0.2, 0.1], &x, 0.0) - 0.1).abs() < 1e-12);
        let mut g = [0.0; 2];
        s.add_grad(&[0.2, 0.1], &x, 0.0, 1.0, &mut g);
        assert!(
            (g[0] - 0.6).abs() < 1e-12 && (g[1] - 0.8).abs() < 1e-12,
            "{g:?}"
        );
        // The prox lands on the kink: (0.2, 0.1) − (1/25)(3, 4) = (0.08, −0.06).
        let mut p = [0.0; 2];
        AbsoluteLoss::prox(&[0.2, 0.1], &x, 0.0, 5.0, &mut p);
        assert!(
            (p[0] - 0.08).abs() < 1e-15 && (p[1] + 0.06).abs() < 1e-15,
            "{p:?}"
        );
        let xs = [1.5, 0.5, -1.0];
        for beta in [0.5, 3.0, 40.0] {
            let s = AbsoluteLoss::new(3, Some(beta)).unwrap();
            let plain = AbsoluteLoss::new(3, None).unwrap();
            for (w, y) in [
                ([0.1, 0.2, 0.3], 1.0),
                ([0.3, 0.1, -0.2], 0.2),
                ([-0.5, 1.0, 0.4], 0.0),
            ] {
                let mut g = [0.0; 3];
                s.add_grad(&w, &xs, y, 1.0, &mut g);
                let h = 1e-6;
                for k in 0..3 {
                    let (mut wp, mut wm) = (w, w);
                    wp[k] += h;
                    wm[k] -= h;
                    let fd = (s.loss(&wp, &xs, y) - s.loss(&wm, &xs, y)) / (2.0 * h);
                    assert!(
                        (fd - g[k]).abs() < 1e-5,
                        "β {beta} {w:?} {k}: {fd} vs {}",
                        g[k]
                    );
                }
                // Lemma 4.6: f_β ≤ f ≤ f_β + L²/(2β), L = ‖x‖ (‖x‖² = 3.5).
                let (fb, f) = (s.loss(&w, &xs, y), plain.loss(&w, &xs, y));
                assert!(fb <= f + 1e-12 && f <= fb + 3.5 / (2.0 * beta) + 1e-12);
                assert!(crate::linalg::norm2(&g) <= 3.5f64.sqrt() + 1e-12);
            }
        }
    }
}
