//! The selection (lowest mean training loss per panel, trial, ε and algorithm) and the
//! summary over trials: mean and the 5th/95th percentiles.

use serde::Serialize;

use super::grid::{Job, JobResult};

/// One row of `summary.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryRow {
    /// The paper's figure number.
    pub figure: String,
    /// The algorithm's label.
    pub algorithm: String,
    /// M, the paper's participants per round (1/M = E[1/M_r]).
    #[serde(rename = "M")]
    pub m: f64,
    /// None for rows that do not depend on ε (data diagnostics).
    pub epsilon: Option<f64>,
    /// The metric's name (`test_error`, `relative_rmse`, or a data diagnostic).
    pub metric: String,
    /// Mean over trials.
    pub mean: f64,
    /// 5th percentile over trials.
    pub ci_low: f64,
    /// 95th percentile over trials.
    pub ci_high: f64,
    /// Trials summarised.
    pub trials: usize,
}

/// A finished reproduction.
#[derive(Debug, Clone)]
pub struct ReproOutput {
    /// Every row of `summary.csv`.
    pub rows: Vec<SummaryRow>,
    /// Seconds of the whole reproduction.
    pub wall_seconds: f64,
    /// Training runs done (including those restored from a checkpoint).
    pub runs: usize,
    /// The public facts of each panel (spec order) that the figures' titles carry.
    pub panels: Vec<PanelFacts>,
}

/// A panel's setting as drawn in its figure's title, and its trivial predictor.
#[derive(Debug, Clone, PartialEq)]
pub struct PanelFacts {
    /// The paper's figure number.
    pub figure: String,
    /// M, the paper's participants per round.
    pub m: f64,
    /// N: silos of the first trial's partition.
    pub silos: usize,
    /// The panel's K (None: each algorithm's own).
    pub batch_size: Option<usize>,
    /// δ of the silo with the fewest records (the largest δ under 1/n²), first trial.
    pub delta: Option<f64>,
    /// The trivial predictor's value of the plotted metric, mean over trials: the
    /// majority-class test error, or exactly 1 for the relative RMSE (its denominator is the
    /// training-mean predictor's error).
    pub trivial: Option<f64>,
}

/// The q-quantile of sorted values, linear interpolation (numpy's default).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Mean and 5th/95th percentiles.
pub fn summarize(values: &[f64]) -> (f64, f64, f64) {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    (mean, quantile(&v, 0.05), quantile(&v, 0.95))
}

/// The selected grid point of (panel, trial, ε, algorithm): lowest mean training loss over
/// repetitions (non-finite = worst); returns its mean test metric and its step size.
pub(crate) fn select(
    jobs: &[Job],
    results: &[JobResult],
    panel: usize,
    trial: usize,
    eps: Option<usize>,
    algorithm: usize,
) -> (f64, f64) {
    // (step, clip) → (Σ train loss, Σ metric, count)
    let mut points: Vec<((u64, u64), f64, f64, usize)> = Vec::new();
    for (j, r) in jobs.iter().zip(results) {
        if j.panel != panel || j.trial != trial || j.eps != eps || j.algorithm != algorithm {
            continue;
        }
        let key = (j.step.to_bits(), j.clip.map_or(0, f64::to_bits));
        let loss = if r.train_loss.is_finite() {
            r.train_loss
        } else {
            f64::INFINITY
        };
        match points.iter_mut().find(|p| p.0 == key) {
            Some(p) => {
                p.1 += loss;
                p.2 += r.metric;
                p.3 += 1;
            }
            None => points.push((key, loss, r.metric, 1)),
        }
    }
    let best = points
        .iter()
        .min_by(|a, b| (a.1 / a.3 as f64).total_cmp(&(b.1 / b.3 as f64)));
    match best {
        Some(&((step, _), _, m, c)) => (m / c as f64, f64::from_bits(step)),
        None => (f64::NAN, f64::NAN),
    }
}
