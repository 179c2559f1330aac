//! What the hinge loss (`hinge.rs`) and the absolute loss (`absolute.rs`) share: a non-smooth,
//! ‖x‖-Lipschitz loss of z = ⟨w, x⟩ whose (sub)gradient is a·x, optionally replaced by its
//! β-Moreau envelope (`smoothing = Some(β)`, Lowy & Razaviyayn Lemma D.7, Cheu et al. Def. 4.5 /
//! Lemma 4.6). Each loss keeps its own formulas (value, coefficient a, prox) in its own file;
//! this type holds the rest once: the checked β, the names, the gradient a·x, the Lipschitz
//! constant and the refusal to smooth twice.
//!
//! **Lipschitz constant.** The plain loss reports max‖x‖; the envelope reports 2·max‖x‖, the
//! papers' safe side (their envelopes minimise over v ∈ W, which can double the bound outside
//! W), although its gradient lies in ∂f(prox(w)) and has norm ≤ ‖x‖ (see each loss's doc).

use std::marker::PhantomData;

use super::logistic::check_features;
use super::{Metric, Model};
use crate::data::Dataset;
use crate::linalg::axpy;

/// One non-smooth loss of ⟨w, x⟩ with a closed-form Moreau envelope.
pub trait ProxLinearLoss: std::fmt::Debug + Clone + Send + Sync + 'static {
    /// The model's name, plain and smoothed.
    const NAMES: [&'static str; 2];
    /// The test metric.
    const METRIC: Metric;
    /// f(w; x, y), or its β-Moreau envelope f_β with `smoothing = Some(β)`.
    fn loss(w: &[f64], x: &[f64], y: f64, smoothing: Option<f64>) -> f64;
    /// a with ∇f = a·x (a subgradient of the plain loss), or ∇f_β = a·x, from z = ⟨w, x⟩,
    /// xx = ‖x‖² and the label.
    fn coefficient(z: f64, xx: f64, y: f64, smoothing: Option<f64>) -> f64;
    /// The prediction at z = ⟨w, x⟩.
    fn predict(z: f64) -> f64;
    /// Refuses a target the loss is not defined on.
    fn check_target(data: &Dataset) -> crate::Result<()>;
}

/// The loss `L` on `features` inputs; with `smoothing = Some(β)` its β-Moreau envelope.
#[derive(Debug, Clone)]
pub struct MoreauLinear<L> {
    features: usize,
    smoothing: Option<f64>,
    loss: PhantomData<L>,
}

impl<L: ProxLinearLoss> MoreauLinear<L> {
    /// `smoothing`: the Moreau parameter β (> 0, finite), or `None` for the plain loss (whose
    /// gradient is a subgradient).
    pub fn new(features: usize, smoothing: Option<f64>) -> crate::Result<Self> {
        if let Some(b) = smoothing
            && !(b.is_finite() && b > 0.0)
        {
            return Err(crate::Error::config(
                "model.smoothing",
                format!("must be finite and > 0, got {b}"),
            ));
        }
        Ok(MoreauLinear {
            features,
            smoothing,
            loss: PhantomData,
        })
    }

    /// The Moreau envelope's β, if smoothed.
    pub fn smoothing(&self) -> Option<f64> {
        self.smoothing
    }
}

impl<L: ProxLinearLoss> Model for MoreauLinear<L> {
    fn name(&self) -> &'static str {
        L::NAMES[usize::from(self.smoothing.is_some())]
    }
    fn num_params(&self) -> usize {
        self.features
    }
    fn num_features(&self) -> usize {
        self.features
    }
    fn loss(&self, w: &[f64], x: &[f64], y: f64) -> f64 {
        L::loss(w, x, y, self.smoothing)
    }
    fn add_grad(&self, w: &[f64], x: &[f64], y: f64, scale: f64, out: &mut [f64]) {
        let (z, xx) = crate::linalg::dot_and_sq(w, x);
        let a = L::coefficient(z, xx, y, self.smoothing);
        if a != 0.0 {
            axpy(scale * a, x, out);
        }
    }
    fn input_coefficient(&self, z: f64, xx: f64, y: f64) -> Option<f64> {
        Some(L::coefficient(z, xx, y, self.smoothing))
    }
    fn predict(&self, w: &[f64], x: &[f64]) -> f64 {
        L::predict(crate::linalg::dot(w, x))
    }
    fn metric(&self) -> Metric {
        L::METRIC
    }
    fn lipschitz(&self, max_norm: f64) -> Option<f64> {
        match self.smoothing {
            // The papers' envelope lemmas: 2L (safe side; module doc).
            Some(_) => Some(2.0 * max_norm),
            None => Some(max_norm),
        }
    }
    fn check_data(&self, data: &Dataset) -> crate::Result<()> {
        check_features(self.features, data)?;
        L::check_target(data)
    }
    fn smoothed(&self, beta: f64) -> crate::Result<Option<std::sync::Arc<dyn Model>>> {
        if self.smoothing.is_some() {
            return Err(crate::Error::config(
                "smoothing",
                "the model is already smoothed (model.smoothing); do not smooth it again",
            ));
        }
        Ok(Some(std::sync::Arc::new(Self::new(
            self.features,
            Some(beta),
        )?)))
    }
}
