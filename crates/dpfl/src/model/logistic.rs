//! Binary logistic regression, labels y ∈ {0, 1}:
//! f(w; x, y) = ln(1 + e^z) − y·z with z = ⟨w, x⟩, ∇f = (σ(z) − y)·x.
//!
//! Optional logit clip (Lowy & Razaviyayn App. I.1, following Woodworth et al. 2020b):
//! z is clamped to [−c, c] before the sigmoid, for numerical stability. We use the same
//! clamped z in the loss and in the gradient formula (σ(clamp z) − y)·x, as the paper's code
//! does; the gradient norm stays ≤ ‖x‖, so the Lipschitz bound is unaffected.

use super::{Metric, Model};
use crate::data::Dataset;
use crate::linalg::{axpy, dot};

/// Binary logistic regression on labels {0, 1} (no separate bias term).
#[derive(Debug, Clone)]
pub struct LogisticRegression {
    features: usize,
    logit_clip: Option<f64>,
}

impl LogisticRegression {
    /// Logistic regression on `features` inputs; ⟨w,x⟩ clamped to ±`logit_clip` if given.
    pub fn new(features: usize, logit_clip: Option<f64>) -> crate::Result<Self> {
        if let Some(c) = logit_clip
            && !(c.is_finite() && c > 0.0)
        {
            return Err(crate::Error::config(
                "model.logit_clip",
                format!("must be finite and > 0, got {c}"),
            ));
        }
        Ok(LogisticRegression {
            features,
            logit_clip,
        })
    }
    #[inline]
    fn logit(&self, w: &[f64], x: &[f64]) -> f64 {
        let z = dot(w, x);
        match self.logit_clip {
            Some(c) => z.clamp(-c, c),
            None => z,
        }
    }
}

/// ln(1 + e^z) without overflow.
#[inline]
pub(crate) fn softplus(z: f64) -> f64 {
    if z > 0.0 {
        z + (-z).exp().ln_1p()
    } else {
        z.exp().ln_1p()
    }
}

#[inline]
pub(crate) fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

impl Model for LogisticRegression {
    fn name(&self) -> &'static str {
        "logistic"
    }
    fn num_params(&self) -> usize {
        self.features
    }
    fn num_features(&self) -> usize {
        self.features
    }
    fn loss(&self, w: &[f64], x: &[f64], y: f64) -> f64 {
        let z = self.logit(w, x);
        softplus(z) - y * z
    }
    fn add_grad(&self, w: &[f64], x: &[f64], y: f64, scale: f64, out: &mut [f64]) {
        let z = self.logit(w, x);
        axpy(scale * (sigmoid(z) - y), x, out);
    }
    fn input_coefficient(&self, z: f64, _xx: f64, y: f64) -> Option<f64> {
        let z = self.logit_clip.map_or(z, |c| z.clamp(-c, c));
        Some(sigmoid(z) - y)
    }
    fn predict(&self, w: &[f64], x: &[f64]) -> f64 {
        if dot(w, x) > 0.0 { 1.0 } else { 0.0 }
    }
    fn metric(&self) -> Metric {
        Metric::ErrorRate
    }
    fn lipschitz(&self, max_norm: f64) -> Option<f64> {
        Some(max_norm)
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

pub(crate) fn check_features(features: usize, data: &Dataset) -> crate::Result<()> {
    if data.num_features() != features {
        return Err(crate::Error::Dimension(format!(
            "the model expects {features} features, the data has {}",
            data.num_features()
        )));
    }
    Ok(())
}
