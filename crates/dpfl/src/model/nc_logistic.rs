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

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

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

/// One iterate's full-data metrics (SoteriaFL's per-round evaluation, App. A): ‖∇f(w)‖² of
/// the pooled training objective, its mean loss, and the error rate on the test rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IterateEval {
    /// ‖(1/n)Σ_i ∇f(w; x_i, y_i)‖² over the n pooled training rows.
    pub grad_norm_sq: f64,
    /// (1/n)Σ_i f(w; x_i, y_i).
    pub loss: f64,
    /// Fraction of test rows with the wrong predicted label (NaN without test rows).
    pub error_rate: f64,
}

impl NonconvexLogistic {
    /// `IterateEval` of every iterate in `ws`, over the pooled `train` and `test` shards.
    ///
    /// Equal, up to the order of floating-point sums, to evaluating each iterate through
    /// `sim::full_grad_norm_sq`, `sim::train_loss` and `sim::test_metric`, but
    /// one pass over the data serves every iterate: with W = [w_1 … w_K] (p×K), each shard's
    /// Z = X W and Xᵀ A (A the per-row coefficients σ(z) − y) are two faer GEMMs, and the
    /// loss and coefficient of a row share one exponential. Shards run in parallel (rayon) and
    /// their partial sums are added in shard order, so the result does not depend on the
    /// thread count. The regulariser, the same for every row, is added once per iterate.
    pub fn evaluate_iterates(
        &self,
        ws: &[Vec<f64>],
        train: &[&Dataset],
        test: &[&Dataset],
    ) -> Vec<IterateEval> {
        let (p, k) = (self.features, ws.len());
        if k == 0 {
            return Vec::new();
        }
        let mut flat = Vec::with_capacity(p * k);
        for w in ws {
            flat.extend_from_slice(w);
        }
        let wm = MatRef::from_column_major_slice(&flat, p, k);
        let (parts, errors) = rayon::join(
            || {
                train
                    .par_iter()
                    .map(|d| train_part(d, wm))
                    .collect::<Vec<_>>()
            },
            || {
                test.par_iter()
                    .map(|d| test_errors(d, wm))
                    .collect::<Vec<_>>()
            },
        );
        let n: usize = train.iter().map(|d| d.len()).sum();
        let n_test: usize = test.iter().map(|d| d.len()).sum();
        let mut grad = vec![0.0; p * k];
        let mut loss = vec![0.0; k];
        for (g, l) in &parts {
            grad.iter_mut().zip(g).for_each(|(a, b)| *a += b);
            loss.iter_mut().zip(l).for_each(|(a, b)| *a += b);
        }
        let mut wrong = vec![0u64; k];
        for e in &errors {
            wrong.iter_mut().zip(e).for_each(|(a, b)| *a += b);
        }
        let (nf, tf) = (n as f64, n_test as f64);
        ws.iter()
            .enumerate()
            .map(|(j, w)| {
                let r = self.reg_grad(w);
                let g = &grad[j * p..(j + 1) * p];
                let grad_norm_sq = if n == 0 {
                    f64::NAN
                } else {
                    g.iter()
                        .zip(&r)
                        .map(|(gi, ri)| (gi / nf + ri).powi(2))
                        .sum()
                };
                let reg: f64 = w.iter().map(|v| v * v / (1.0 + v * v)).sum();
                IterateEval {
                    grad_norm_sq,
                    loss: if n == 0 {
                        f64::NAN
                    } else {
                        loss[j] / nf + self.lambda * reg
                    },
                    error_rate: if n_test == 0 {
                        f64::NAN
                    } else {
                        wrong[j] as f64 / tf
                    },
                }
            })
            .collect()
    }
}

/// One shard's (Xᵀ A as p×K column-major, per-iterate Σ (softplus(z) − y z)).
fn train_part(d: &Dataset, wm: MatRef<'_, f64>) -> (Vec<f64>, Vec<f64>) {
    let (n, p, k) = (d.len(), wm.nrows(), wm.ncols());
    if n == 0 {
        return (vec![0.0; p * k], vec![0.0; k]);
    }
    let x = MatRef::from_row_major_slice(d.x().as_slice(), n, p);
    let mut z = vec![0.0; n * k];
    matmul(
        MatMut::from_column_major_slice_mut(&mut z, n, k),
        Accum::Replace,
        x,
        wm,
        1.0,
        Par::Seq,
    );
    super::batch::clean_simd_state();
    let y = d.y();
    let loss = z
        .chunks_exact_mut(n)
        .map(|col| {
            let mut s = 0.0;
            for (zi, &yi) in col.iter_mut().zip(y) {
                let v = *zi;
                // softplus(v) and sigmoid(v) (logistic.rs) from one e = exp(−|v|), with the
                // same branches, so each row's values are those of `loss` and `add_grad`.
                let e = (-v.abs()).exp();
                let l = e.ln_1p();
                s += (if v > 0.0 { v + l } else { l }) - yi * v;
                let sig = if v >= 0.0 {
                    1.0 / (1.0 + e)
                } else {
                    e / (1.0 + e)
                };
                *zi = sig - yi;
            }
            s
        })
        .collect();
    let mut g = vec![0.0; p * k];
    matmul(
        MatMut::from_column_major_slice_mut(&mut g, p, k),
        Accum::Replace,
        x.transpose(),
        MatRef::from_column_major_slice(&z, n, k),
        1.0,
        Par::Seq,
    );
    (g, loss)
}

/// One shard's count of wrong predictions (ŷ = 1 iff ⟨w, x⟩ > 0) per iterate.
fn test_errors(d: &Dataset, wm: MatRef<'_, f64>) -> Vec<u64> {
    let (n, p, k) = (d.len(), wm.nrows(), wm.ncols());
    if n == 0 {
        return vec![0; k];
    }
    let x = MatRef::from_row_major_slice(d.x().as_slice(), n, p);
    let mut z = vec![0.0; n * k];
    matmul(
        MatMut::from_column_major_slice_mut(&mut z, n, k),
        Accum::Replace,
        x,
        wm,
        1.0,
        Par::Seq,
    );
    super::batch::clean_simd_state();
    let y = d.y();
    z.chunks_exact(n)
        .map(|col| {
            col.iter()
                .zip(y)
                .filter(|&(&v, &yi)| (if v > 0.0 { 1.0 } else { 0.0 }) != yi)
                .count() as u64
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{SiloData, Target};

    fn data(n: usize, p: usize, seed: usize) -> Dataset {
        let x: Vec<f64> = (0..n * p)
            .map(|i| (((i + seed) * 37 % 17) as f64 - 8.0) / 4.0)
            .collect();
        let y = (0..n)
            .map(|i| (i * 7 + seed).is_multiple_of(3) as u8 as f64)
            .collect();
        let names = (0..p).map(|j| format!("x{j}")).collect();
        let target = Target::Classes {
            names: vec!["0".into(), "1".into()],
        };
        Dataset::new(
            crate::linalg::Matrix::from_vec(n, p, x).unwrap(),
            y,
            target,
            names,
        )
        .unwrap()
    }

    /// The batched evaluation against the per-iterate path it replaces in the SoteriaFL
    /// reproduction (sim::full_grad_norm_sq, sim::train_loss, sim::test_metric), over
    /// shards of unequal size, one without test rows, and iterates large enough to reach
    /// both branches of softplus/sigmoid: equal up to summation order (1e−12 relative).
    #[test]
    fn batched_evaluation_equals_the_per_iterate_metrics() {
        let p = 7;
        let model = NonconvexLogistic::new(p, 0.2).unwrap();
        let silos: Vec<SiloData> = [(30, 11), (17, 0), (45, 9)]
            .iter()
            .enumerate()
            .map(|(s, &(n, t))| SiloData {
                train: data(n, p, s),
                test: data(t, p, s + 5),
            })
            .collect();
        let ws: Vec<Vec<f64>> = (0..4)
            .map(|j| {
                (0..p)
                    .map(|i| ((i * 5 + j * 3) as f64).sin() * j as f64)
                    .collect()
            })
            .collect();
        let train: Vec<&Dataset> = silos.iter().map(|s| &s.train).collect();
        let test: Vec<&Dataset> = silos.iter().map(|s| &s.test).collect();
        let got = model.evaluate_iterates(&ws, &train, &test);
        assert_eq!(got.len(), 4);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1e-300);
        for (w, e) in ws.iter().zip(&got) {
            let g = crate::sim::full_grad_norm_sq(&model, w, silos.iter());
            let l = crate::sim::train_loss(&model, w, silos.iter());
            let err = crate::sim::test_metric(&model, w, silos.iter());
            assert!(close(e.grad_norm_sq, g), "{} vs {g}", e.grad_norm_sq);
            assert!(close(e.loss, l), "{} vs {l}", e.loss);
            assert!(close(e.error_rate, err), "{} vs {err}", e.error_rate);
        }
        // w = 0 has loss ln 2 on every row and predicts 0 everywhere.
        assert!(close(got[0].loss, std::f64::consts::LN_2));
        assert!(model.evaluate_iterates(&[], &train, &test).is_empty());
    }
}
