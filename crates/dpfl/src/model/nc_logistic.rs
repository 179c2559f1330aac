//! Logistic regression with the non-convex regulariser of SoteriaFL's first experiment
//! (Li, Zhao, Li & Chi 2022, App. A, Task 1; digest §5.2 "Models"), labels y ∈ {0, 1}:
//! f(w; x, y) = ln(1 + e^z) − y·z + λ·Σ_j w_j²/(1 + w_j²), z = ⟨w, x⟩
//! (the paper's log(1 + e^{−b·z}) with b = 2y − 1). The regulariser sits inside every
//! per-example loss (digest ambiguity 12), so its gradient r(w)_j = 2λw_j/(1 + w_j²)² is part
//! of every per-example gradient and is clipped and noised with it: ∇f = (σ(z) − y)·x + r(w).
//!
//! Clipping without materialising the gradient: r is the same for every example of a batch,
//! so ‖a·x + r‖² = a²‖x‖² + 2a⟨x, r⟩ + ‖r‖² needs one extra dot product per row, and the
//! clipped sum is X_Bᵀ(f∘a) + (Σ_i f_i)·r. Where the expansion cancels (the computed square
//! below 10⁻⁶ of a²‖x‖² + ‖r‖²) the row's norm is recomputed directly, so rounding can never
//! shrink a norm that is near the clip bound by more than a relative 10⁻¹⁰.

use super::logistic::{check_features, sigmoid, softplus};
use super::{Metric, Model};
use crate::data::Dataset;
use crate::linalg::{axpy, clip_factor, dot, dot_and_sq};

/// max_w |2w/(1 + w²)²| = 9/(8√3), at w² = 1/3.
const REG_GRAD_MAX: f64 = 0.649_519_052_838_329;

/// Binary logistic regression with the nonconvex regulariser λ·Σ w_j²/(1 + w_j²).
#[derive(Debug, Clone)]
pub struct NonconvexLogistic {
    features: usize,
    lambda: f64,
}

impl NonconvexLogistic {
    /// λ ≥ 0 and finite (the paper's experiments use λ = 0.2).
    pub fn new(features: usize, lambda: f64) -> crate::Result<Self> {
        if !(lambda.is_finite() && lambda >= 0.0) {
            return Err(crate::Error::config(
                "model.lambda",
                format!("must be finite and ≥ 0, got {lambda}"),
            ));
        }
        Ok(NonconvexLogistic { features, lambda })
    }
    /// The regularisation weight λ.
    pub fn lambda(&self) -> f64 {
        self.lambda
    }

    /// r(w), the regulariser's gradient.
    fn reg_grad(&self, w: &[f64]) -> Vec<f64> {
        w.iter()
            .map(|&v| {
                let q = 1.0 + v * v;
                2.0 * self.lambda * v / (q * q)
            })
            .collect()
    }

    /// out += scale·Σ_i clip(a_i x_i + r).
    fn batch(
        &self,
        w: &[f64],
        data: &Dataset,
        idx: &[usize],
        clip: Option<f64>,
        scale: f64,
        out: &mut [f64],
    ) {
        let r = self.reg_grad(w);
        let rr = dot(&r, &r);
        let mut r_weight = 0.0;
        for &i in idx {
            let (x, y) = data.row(i);
            let (z, xx) = dot_and_sq(w, x);
            let a = sigmoid(z) - y;
            let f = match clip {
                None => 1.0,
                Some(c) => {
                    let big = a * a * xx + rr;
                    let mut n2 = big + 2.0 * a * dot(x, &r);
                    if n2 < 1e-6 * big {
                        n2 = x.iter().zip(&r).map(|(xj, rj)| (a * xj + rj).powi(2)).sum();
                    }
                    clip_factor(n2.max(0.0).sqrt(), c)
                }
            };
            // f = 0 marks a non-finite gradient, replaced by zero.
            if f > 0.0 {
                axpy(scale * f * a, x, out);
                r_weight += scale * f;
            }
        }
        axpy(r_weight, &r, out);
    }
}

impl Model for NonconvexLogistic {
    fn name(&self) -> &'static str {
        "nonconvex-logistic"
    }
    fn num_params(&self) -> usize {
        self.features
    }
    fn num_features(&self) -> usize {
        self.features
    }
    fn loss(&self, w: &[f64], x: &[f64], y: f64) -> f64 {
        let z = dot(w, x);
        let reg: f64 = w.iter().map(|v| v * v / (1.0 + v * v)).sum();
        softplus(z) - y * z + self.lambda * reg
    }
    fn add_grad(&self, w: &[f64], x: &[f64], y: f64, scale: f64, out: &mut [f64]) {
        axpy(scale * (sigmoid(dot(w, x)) - y), x, out);
        axpy(scale, &self.reg_grad(w), out);
    }
    batch_grads_from_loop!();
    fn predict(&self, w: &[f64], x: &[f64]) -> f64 {
        if dot(w, x) > 0.0 { 1.0 } else { 0.0 }
    }
    fn metric(&self) -> Metric {
        Metric::ErrorRate
    }
    /// |σ(z) − y|·‖x‖ + ‖r(w)‖ ≤ max_norm + λ·√d·9/(8√3).
    fn lipschitz(&self, max_norm: f64) -> Option<f64> {
        Some(max_norm + self.lambda * (self.features as f64).sqrt() * REG_GRAD_MAX)
    }
    fn check_data(&self, data: &Dataset) -> crate::Result<()> {
        check_features(self.features, data)?;
        match data.target().num_classes() {
            Some(2) => Ok(()),
            other => Err(crate::Error::Dimension(format!(
                "logistic regression needs a 2-class target, the data has {}",
                other.map_or("a real target".to_string(), |c| format!("{c} classes"))
            ))),
        }
    }
}
