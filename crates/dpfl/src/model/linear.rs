//! Linear least-squares regression: f(w; x, y) = (⟨w, x⟩ − y)²/2, ∇f = (⟨w,x⟩ − y)·x.
//! Not Lipschitz on an unbounded domain; private training must clip per-example gradients
//! (Lowy & Razaviyayn App. I.2 calibrate to the clip threshold).

use super::logistic::check_features;
use super::{Metric, Model};
use crate::data::Dataset;
use crate::linalg::{axpy, dot};

/// Least squares, f = (⟨w,x⟩ − y)²/2 (no separate bias: add a constant feature for one).
#[derive(Debug, Clone)]
pub struct LinearRegression {
    features: usize,
}

impl LinearRegression {
    /// Least squares on `features` inputs.
    pub fn new(features: usize) -> Self {
        LinearRegression { features }
    }
}

impl Model for LinearRegression {
    fn name(&self) -> &'static str {
        "linear"
    }
    fn num_params(&self) -> usize {
        self.features
    }
    fn num_features(&self) -> usize {
        self.features
    }
    fn loss(&self, w: &[f64], x: &[f64], y: f64) -> f64 {
        let r = dot(w, x) - y;
        0.5 * r * r
    }
    fn add_grad(&self, w: &[f64], x: &[f64], y: f64, scale: f64, out: &mut [f64]) {
        axpy(scale * (dot(w, x) - y), x, out);
    }
    fn input_coefficient(&self, z: f64, _xx: f64, y: f64) -> Option<f64> {
        Some(z - y)
    }
    fn predict(&self, w: &[f64], x: &[f64]) -> f64 {
        dot(w, x)
    }
    fn metric(&self) -> Metric {
        Metric::Rmse
    }
    fn lipschitz(&self, _max_norm: f64) -> Option<f64> {
        None
    }
    fn check_data(&self, data: &Dataset) -> crate::Result<()> {
        check_features(self.features, data)?;
        if data.target().num_classes().is_some() {
            return Err(crate::Error::Dimension(
                "linear regression needs a real-valued target, the data has classes".into(),
            ));
        }
        Ok(())
    }
}
