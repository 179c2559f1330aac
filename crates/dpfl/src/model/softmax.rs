//! Softmax (multinomial logistic) regression with C classes. Parameters W ∈ R^{p×C} stored
//! row-major (w[j·C + c]). f(W; x, y) = logsumexp(z) − z_y with z = Wᵀx;
//! ∇f = x (softmax(z) − e_y)ᵀ, whose norm is ‖x‖·‖p − e_y‖ ≤ √2‖x‖.

use super::logistic::check_features;
use super::{Metric, Model};
use crate::data::Dataset;
use crate::linalg::softmax_in_place;

/// Multinomial logistic (softmax) regression: a C×p weight matrix, cross-entropy loss.
#[derive(Debug, Clone)]
pub struct SoftmaxRegression {
    features: usize,
    classes: usize,
}

impl SoftmaxRegression {
    /// Softmax regression on `features` inputs and `classes` ≥ 2 classes.
    pub fn new(features: usize, classes: usize) -> crate::Result<Self> {
        if classes < 2 {
            return Err(crate::Error::config(
                "model.kind",
                format!("softmax needs at least 2 classes, got {classes}"),
            ));
        }
        Ok(SoftmaxRegression { features, classes })
    }
    /// Classes C.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// out += scale·Σ_i clip(∇f_i). ∇f = x (p − e_y)ᵀ has Frobenius norm ‖x‖·‖p − e_y‖, so
    /// clipping needs no materialised gradient.
    fn batch(
        &self,
        w: &[f64],
        data: &Dataset,
        idx: &[usize],
        clip: Option<f64>,
        scale: f64,
        out: &mut [f64],
    ) {
        let c = self.classes;
        if super::batch::use_gathered(idx.len(), w.len()) {
            return super::batch::softmax_gathered(w, c, data, idx, clip, scale, out);
        }
        with_scratch(c, |z| {
            for &i in idx {
                let (x, y) = data.row(i);
                self.logits(w, x, z);
                softmax_in_place(z);
                z[y as usize] -= 1.0;
                let f = clip.map_or(1.0, |cl| {
                    let norm = (crate::linalg::dot(x, x) * crate::linalg::dot(z, z)).sqrt();
                    crate::linalg::clip_factor(norm, cl)
                });
                if f == 0.0 {
                    // A non-finite gradient, replaced by zero.
                    continue;
                }
                for (j, &xj) in x.iter().enumerate() {
                    if xj != 0.0 {
                        let a = scale * f * xj;
                        for (o, p) in out[j * c..(j + 1) * c].iter_mut().zip(z.iter()) {
                            *o += a * p;
                        }
                    }
                }
            }
        })
    }
    /// z = Wᵀx into `z` (length C).
    #[inline]
    fn logits(&self, w: &[f64], x: &[f64], z: &mut [f64]) {
        let c = self.classes;
        z.iter_mut().for_each(|v| *v = 0.0);
        for (j, &xj) in x.iter().enumerate() {
            if xj != 0.0 {
                let row = &w[j * c..(j + 1) * c];
                for (zk, wk) in z.iter_mut().zip(row) {
                    *zk += xj * wk;
                }
            }
        }
    }
}

const STACK_CLASSES: usize = 16;

/// Runs `f` with a scratch buffer of length `c`, on the stack when small.
#[inline]
fn with_scratch<R>(c: usize, f: impl FnOnce(&mut [f64]) -> R) -> R {
    if c <= STACK_CLASSES {
        let mut buf = [0.0f64; STACK_CLASSES];
        f(&mut buf[..c])
    } else {
        let mut buf = vec![0.0; c];
        f(&mut buf)
    }
}

impl Model for SoftmaxRegression {
    fn name(&self) -> &'static str {
        "softmax"
    }
    fn num_params(&self) -> usize {
        self.features * self.classes
    }
    fn num_features(&self) -> usize {
        self.features
    }
    fn loss(&self, w: &[f64], x: &[f64], y: f64) -> f64 {
        with_scratch(self.classes, |z| {
            self.logits(w, x, z);
            let zy = z[y as usize];
            let lse = softmax_in_place(z);
            lse - zy
        })
    }
    fn add_grad(&self, w: &[f64], x: &[f64], y: f64, scale: f64, out: &mut [f64]) {
        let c = self.classes;
        with_scratch(c, |z| {
            self.logits(w, x, z);
            softmax_in_place(z);
            z[y as usize] -= 1.0;
            for (j, &xj) in x.iter().enumerate() {
                if xj != 0.0 {
                    let a = scale * xj;
                    for (o, p) in out[j * c..(j + 1) * c].iter_mut().zip(z.iter()) {
                        *o += a * p;
                    }
                }
            }
        })
    }
    batch_grads_from_loop!();
    fn predict(&self, w: &[f64], x: &[f64]) -> f64 {
        with_scratch(self.classes, |z| {
            self.logits(w, x, z);
            super::argmax(z) as f64
        })
    }
    fn metric(&self) -> Metric {
        Metric::ErrorRate
    }
    fn lipschitz(&self, max_norm: f64) -> Option<f64> {
        Some(std::f64::consts::SQRT_2 * max_norm)
    }
    fn check_data(&self, data: &Dataset) -> crate::Result<()> {
        check_features(self.features, data)?;
        match data.target().num_classes() {
            Some(c) if c == self.classes => Ok(()),
            other => Err(crate::Error::Dimension(format!(
                "the softmax model has {} classes, the data has {}",
                self.classes,
                other.map_or("a real target".to_string(), |c| format!("{c} classes"))
            ))),
        }
    }
}
