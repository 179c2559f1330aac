//! The audit's gradient canaries (white-box "Dirac" canaries, Steinke, Nasr & Jagielski 2023
//! §6 and Nasr et al. 2023's gradient canaries): a model wrapper whose per-example gradient on
//! canary row j is ±G·e_{p_j} (G = the canary's feature value, far above L, so the silo's
//! clipping makes it exactly ±L·e_{p_j}; p_j a parameter of canary feature d + j only)
//! whenever the sampler draws that row, at every point w. A data canary's gradient would shrink once its own weight grows (the logistic loss
//! saturates), so the signal would fade with the noise the audit is trying to measure.
//!
//! Rows without a canary feature go to the wrapped model unchanged. The wrapper offers no
//! [`Model::input_coefficient`], so the default batch kernels materialise each gradient
//! through [`Model::add_grad`] and clip it exactly as for any model.

use std::sync::Arc;

use crate::data::Dataset;
use crate::model::{Metric, Model};

/// `inner` with gradient canaries on features `first..` (module doc).
#[derive(Debug)]
pub struct CanaryModel {
    inner: Arc<dyn Model>,
    first: usize,
    /// Canary j's parameter: where the wrapped model's gradient of canary row j (label 1, at
    /// w = 0) is largest: d + j for linear models, (class 1, feature d + j) for softmax.
    param: Vec<usize>,
}

impl CanaryModel {
    /// Canaries on features `first..first + m`; each must own a parameter no other canary
    /// or data feature touches.
    pub fn new(inner: Arc<dyn Model>, first: usize, m: usize) -> crate::Result<Self> {
        let (d, p) = (inner.num_features(), inner.num_params());
        if first + m > d {
            return Err(crate::Error::config(
                "audit",
                format!("{m} canary features from {first} exceed the model's {d} features"),
            ));
        }
        let zero = vec![0.0; p];
        let mut param = Vec::with_capacity(m);
        for j in 0..m {
            let mut x = vec![0.0; d];
            x[first + j] = 1.0;
            let mut g = vec![0.0; p];
            inner.add_grad(&zero, &x, 1.0, 1.0, &mut g);
            let (k, v) = g
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
                .map(|(k, v)| (k, v.abs()))
                .unwrap_or((0, 0.0));
            if v.is_nan() || v <= 0.0 || param.contains(&k) {
                return Err(crate::Error::config(
                    "model",
                    format!(
                        "the audit's gradient canaries need a parameter per input feature; {} \
                         gives canary {j} none of its own",
                        inner.name()
                    ),
                ));
            }
            param.push(k);
        }
        Ok(CanaryModel {
            inner,
            first,
            param,
        })
    }

    /// Canary j's parameter index (the coordinate the auditor reads).
    pub fn param(&self, j: usize) -> usize {
        self.param[j]
    }

    /// The canary of row `x` (its index j) and its feature value, if it is a canary row.
    fn canary(&self, x: &[f64]) -> Option<(usize, f64)> {
        x.iter()
            .enumerate()
            .skip(self.first)
            .find(|(_, v)| **v != 0.0)
            .map(|(k, v)| (k - self.first, *v))
    }
}

impl Model for CanaryModel {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn num_params(&self) -> usize {
        self.inner.num_params()
    }
    fn num_features(&self) -> usize {
        self.inner.num_features()
    }
    fn loss(&self, w: &[f64], x: &[f64], y: f64) -> f64 {
        self.inner.loss(w, x, y)
    }
    fn add_grad(&self, w: &[f64], x: &[f64], y: f64, scale: f64, out: &mut [f64]) {
        match self.canary(x) {
            // Label 1: +G e_k ("in"); label 0: −G e_k ("out").
            Some((j, g)) => out[self.param[j]] += scale * if y == 1.0 { g.abs() } else { -g.abs() },
            None => self.inner.add_grad(w, x, y, scale, out),
        }
    }
    fn predict(&self, w: &[f64], x: &[f64]) -> f64 {
        self.inner.predict(w, x)
    }
    fn metric(&self) -> Metric {
        self.inner.metric()
    }
    fn lipschitz(&self, max_norm: f64) -> Option<f64> {
        self.inner.lipschitz(max_norm)
    }
    fn check_data(&self, data: &Dataset) -> crate::Result<()> {
        self.inner.check_data(data)
    }
    fn initial_params(&self) -> Vec<f64> {
        self.inner.initial_params()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canary_rows_get_a_signed_dirac_gradient_and_others_the_models() {
        let inner = crate::model::ModelSpec::Logistic { logit_clip: None }
            .build(4, Some(2))
            .expect("logistic");
        let m = CanaryModel::new(inner.clone(), 2, 2).unwrap();
        assert_eq!((m.param(0), m.param(1)), (2, 3));
        let w = [0.3, -0.2, 5.0, -7.0];
        let mut out = [0.0; 4];
        m.add_grad(&w, &[0.0, 0.0, 0.0, 1e3], 1.0, 0.5, &mut out);
        assert_eq!(out, [0.0, 0.0, 0.0, 500.0]);
        m.add_grad(&w, &[0.0, 0.0, 1e3, 0.0], 0.0, 1.0, &mut out);
        assert_eq!(out, [0.0, 0.0, -1e3, 500.0]);
        // A data row: the logistic gradient (σ(⟨w, x⟩) − y)·x.
        let (mut a, mut b) = ([0.0; 4], [0.0; 4]);
        m.add_grad(&w, &[1.0, 2.0, 0.0, 0.0], 1.0, 1.0, &mut a);
        inner.add_grad(&w, &[1.0, 2.0, 0.0, 0.0], 1.0, 1.0, &mut b);
        assert_eq!(a, b);
        assert!(a[0] < 0.0);
        // Softmax over 3 classes: canary j owns (class 1, feature 2 + j), wherever the layout
        // puts it; the Dirac gradient lands there.
        let soft = crate::model::ModelSpec::Softmax.build(4, Some(3)).unwrap();
        let m = CanaryModel::new(soft.clone(), 2, 2).unwrap();
        let (p0, p1) = (m.param(0), m.param(1));
        assert_ne!(p0, p1);
        let mut g = vec![0.0; soft.num_params()];
        soft.add_grad(&[0.0; 12], &[0.0, 0.0, 1.0, 0.0], 1.0, 1.0, &mut g);
        assert!((g[p0] - (1.0 / 3.0 - 1.0)).abs() < 1e-12, "{g:?}");
        let mut out = vec![0.0; 12];
        m.add_grad(&[0.0; 12], &[0.0, 0.0, 0.0, 5.0], 0.0, 1.0, &mut out);
        assert_eq!(out.iter().filter(|v| **v != 0.0).count(), 1);
        assert_eq!(out[p1], -5.0);
        // Canaries beyond the features are refused.
        assert!(CanaryModel::new(soft, 3, 2).is_err());
    }
}
