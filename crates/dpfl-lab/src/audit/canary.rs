//! The audit's gradient canaries (white-box "Dirac" canaries, Steinke, Nasr & Jagielski 2023
//! §6 and Nasr et al. 2023's gradient canaries): a model wrapper whose per-example gradient on
//! canary row j is ±G·e_{p_j} (G = the canary's feature value, far above L, so the silo's
//! clipping makes it exactly ±L·e_{p_j}; p_j a parameter of canary feature d + j only)
//! whenever the sampler draws that row, at every point w. A data canary's gradient would
//! shrink once its own weight grows (the logistic loss saturates), so the signal would fade
//! with the noise the audit is trying to measure.
//!
//! **Networks (issue 11).** p_j is found by probing ([`CanaryModel::new`]): a parameter that
//! only input feature d + j moves. In an MLP that is a first-layer weight (hidden unit h,
//! input d + j): every other record has x_{d+j} = 0, so its gradient there is exactly 0
//! (∂ℓ/∂W₁[h, f] = δ_h·x_f), and no data record can mask or imitate the canary.
//!
//! **Why the Dirac gradient is the worst case, and why the bound is valid anyway.** Every
//! mechanism dpfl audits certifies its (ε, δ) for *any* per-record function of norm ≤ L
//! (clipping is applied to whatever the model returns; DP-NormFedAvg's guarantee even holds
//! for any unit vector): the proofs never use that the gradient comes from a loss. So the
//! wrapped model is one of the inputs the claim covers, and a lower bound measured on it
//! bounds the claim from below. Among those inputs, the two canary states ±L·e_{p_j} are at
//! the largest distance the clipping allows (2L) and are orthogonal to every other record's
//! and every other canary's contribution, the pair the Gaussian analysis treats as the worst.
//!
//! **PVEC too (issue 11).** Every payload kind, PVEC included, uses this one-coordinate
//! canary. A canary spread over all coordinates (±L/√d by a sign pattern, scored by the inner
//! product) is no stronger against PVEC's i.i.d. per-coordinate noise, whose guarantee is an
//! ℓ₂ one (the same signal-to-noise ratio), and weaker in practice (rounding of 1 ± 1/√d,
//! interference between m ≈ d sign patterns); an under-noised PVEC is caught with this canary
//! (`tests`; docs/audit.md "Limits" has the numbers and the simulation).
//!
//! Rows without a canary feature go to the wrapped model unchanged. The wrapper offers no
//! [`Model::input_coefficient`], so the default batch kernels materialise each gradient
//! through [`Model::add_grad`] and clip it exactly as for any model.

use std::sync::Arc;

use dpfl::data::Dataset;
use dpfl::model::{Metric, Model};

/// `inner` with gradient canaries on features `first..` (module doc).
#[derive(Debug)]
pub(crate) struct CanaryModel {
    inner: Arc<dyn Model>,
    first: usize,
    /// Canary j's parameter: one that only input feature `first + j` moves ([`Self::new`]):
    /// d + j for linear models, (class 1, feature d + j) for softmax, a first-layer weight
    /// of feature d + j for networks.
    param: Vec<usize>,
}

impl CanaryModel {
    /// Canaries on features `first..first + m`; each must own a parameter no other canary
    /// or data feature touches.
    ///
    /// Canary j's parameter is found by probing the wrapped model, so that one rule serves
    /// linear models and networks: a parameter *owned* by feature f = first + j has a non-zero
    /// gradient for the row e_f at a generic point w̃ (every parameter non-zero) and an exactly
    /// zero gradient at w̃ for probe rows whose canary features are all 0, i.e. it is a
    /// first-layer weight of input f (linear: w_f; softmax: (class c, f); MLP: (hidden unit
    /// h, input f)). Among the owned parameters not taken by an earlier canary, the one with
    /// the largest |gradient| of e_f at w = 0 is chosen (label 1 for a linear model: w_f;
    /// softmax: class 1), then the largest at w̃ (an MLP's gradient at w = 0 vanishes
    /// below its zero output layer). Ownership only matters for the audit's power: whatever
    /// parameter is read, the bound stays a valid lower bound (any score of the released
    /// messages is post-processing).
    pub(crate) fn new(inner: Arc<dyn Model>, first: usize, m: usize) -> dpfl::Result<Self> {
        let (d, p) = (inner.num_features(), inner.num_params());
        if first + m > d {
            return Err(dpfl::Error::config(
                "audit",
                format!("{m} canary features from {first} exceed the model's {d} features"),
            ));
        }
        // w̃: a fixed point with every coordinate non-zero and of mixed sign, so that no
        // hidden unit of a network is idle at every probe.
        let generic: Vec<f64> = (0..p)
            .map(|k| 0.3 * ((k as f64 + 1.0) * 0.618_033_988_749_895).sin() + 0.05)
            .collect();
        // Probe rows over the data features only (canary features 0): gradients there
        // mark the parameters that ordinary records move.
        let probes: Vec<Vec<f64>> = (0..3)
            .map(|r| {
                (0..d)
                    .map(|k| match k {
                        k if k >= first => 0.0,
                        _ => ((k * 7 + r * 13) % 11) as f64 / 5.0 - 1.0,
                    })
                    .collect()
            })
            .collect();
        let mut touched = vec![false; p];
        for x in &probes {
            for y in [0.0, 1.0] {
                let mut g = vec![0.0; p];
                inner.add_grad(&generic, x, y, 1.0, &mut g);
                for (t, v) in touched.iter_mut().zip(&g) {
                    *t |= *v != 0.0;
                }
            }
        }
        let zero = vec![0.0; p];
        let mut taken = vec![false; p];
        let mut param = Vec::with_capacity(m);
        for j in 0..m {
            let mut x = vec![0.0; d];
            x[first + j] = 1.0;
            let (mut at_zero, mut at_generic) = (vec![0.0; p], vec![0.0; p]);
            inner.add_grad(&zero, &x, 1.0, 1.0, &mut at_zero);
            inner.add_grad(&generic, &x, 1.0, 1.0, &mut at_generic);
            let best = (0..p)
                .filter(|&k| !touched[k] && !taken[k] && at_generic[k].abs() > 0.0)
                .filter(|&k| at_zero[k].is_finite() && at_generic[k].is_finite())
                .max_by(|&a, &b| {
                    at_zero[a]
                        .abs()
                        .total_cmp(&at_zero[b].abs())
                        .then(at_generic[a].abs().total_cmp(&at_generic[b].abs()))
                        .then(b.cmp(&a))
                });
            let Some(k) = best else {
                return Err(dpfl::Error::config(
                    "model",
                    format!(
                        "the audit's gradient canaries need a parameter that only input \
                         feature {} moves; {} gives canary {j} none of its own",
                        first + j,
                        inner.name()
                    ),
                ));
            };
            taken[k] = true;
            param.push(k);
        }
        Ok(CanaryModel {
            inner,
            first,
            param,
        })
    }

    /// Canary j's parameter index (the coordinate the auditor reads).
    pub(crate) fn param(&self, j: usize) -> usize {
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
    fn check_data(&self, data: &Dataset) -> dpfl::Result<()> {
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
        let inner = dpfl::model::ModelSpec::Logistic { logit_clip: None }
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
        let soft = dpfl::model::ModelSpec::Softmax.build(4, Some(3)).unwrap();
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

    #[test]
    fn an_mlp_canary_owns_a_first_layer_weight_no_data_row_moves() {
        // 3 data features + 2 canary features, 4 hidden units, 2 classes.
        let spec = dpfl::model::ModelSpec::Mlp {
            inputs: None,
            hidden: 4,
            init_seed: 7,
            init_std: 0.2,
        };
        let inner = spec.build(5, Some(2)).unwrap();
        let m = CanaryModel::new(inner.clone(), 3, 2).unwrap();
        let (p0, p1) = (m.param(0), m.param(1));
        assert_ne!(p0, p1);
        // Moving canary feature 3 (resp. 4) alone changes the parameter's gradient; at any
        // point, a data row's gradient there is exactly 0 (x_3 = x_4 = 0).
        let w = inner.initial_params();
        for (x, y) in [
            ([0.5, -1.0, 2.0, 0.0, 0.0], 1.0),
            ([3.0, 0.1, -0.7, 0.0, 0.0], 0.0),
        ] {
            let mut g = vec![0.0; inner.num_params()];
            inner.add_grad(&w, &x, y, 1.0, &mut g);
            assert_eq!((g[p0], g[p1]), (0.0, 0.0));
            assert!(g.iter().any(|v| *v != 0.0));
        }
        for (j, p) in [(3, p0), (4, p1)] {
            let mut x = [0.0; 5];
            x[j] = 1.0;
            let mut g = vec![0.0; inner.num_params()];
            inner.add_grad(&w, &x, 1.0, 1.0, &mut g);
            assert!(g[p] != 0.0, "feature {j} does not move parameter {p}");
        }
        // The wrapper's canary gradient is the signed Dirac there.
        let mut out = vec![0.0; inner.num_params()];
        m.add_grad(&w, &[0.0, 0.0, 0.0, 0.0, 1e3], 0.0, 1.0, &mut out);
        assert_eq!(out[p1], -1e3);
        assert_eq!(out.iter().filter(|v| **v != 0.0).count(), 1);
    }
}
