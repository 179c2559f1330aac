//! Saved models (`dpfl_lab::experiment::saved`: safetensors + JSON) and the own-data helpers
//! (`dpfl init`, `dpfl config check`) for the Python package.

use std::path::{Path, PathBuf};

use pyo3::prelude::*;

use dpfl_lab::experiment::ExperimentSpec;
use dpfl_lab::experiment::saved::SavedModel;

use crate::errors::{ConfigError, dpfl_error};

fn load(dir: &Path) -> PyResult<SavedModel> {
    SavedModel::load(dir).map_err(dpfl_error)
}

/// A saved model's metadata (JSON text) and its weights (little-endian f64 bytes), checked
/// (format, version, SHA-256, shape) as `dpfl predict` checks them.
#[pyfunction]
pub fn load_model(py: Python<'_>, dir: PathBuf) -> PyResult<(String, Vec<u8>)> {
    let m = py.detach(|| load(&dir))?;
    let meta = serde_json::to_string(&m.meta).map_err(|e| ConfigError::new_err(e.to_string()))?;
    Ok((
        meta,
        m.weights.iter().flat_map(|w| w.to_le_bytes()).collect(),
    ))
}

/// `dpfl predict`: one prediction (class name or value, as text) per record of `data` (a
/// file in the training data's format).
#[pyfunction]
pub fn predict_file(py: Python<'_>, dir: PathBuf, data: PathBuf) -> PyResult<Vec<String>> {
    py.detach(|| load(&dir)?.predict_file(&data).map_err(dpfl_error))
}

/// `dpfl evaluate`: (metric value, metric name, rows); `labels` an IDX label file for image
/// models.
#[pyfunction]
#[pyo3(signature = (dir, data, labels=None))]
pub fn evaluate_file(
    py: Python<'_>,
    dir: PathBuf,
    data: PathBuf,
    labels: Option<PathBuf>,
) -> PyResult<(f64, &'static str, usize)> {
    py.detach(|| {
        load(&dir)?
            .evaluate_file(&data, labels.as_deref())
            .map_err(dpfl_error)
    })
}

/// `dpfl init`: the experiment TOML for a CSV file.
#[pyfunction]
#[pyo3(signature = (data, label, silo_column=None))]
pub fn init_experiment(data: PathBuf, label: &str, silo_column: Option<&str>) -> PyResult<String> {
    dpfl_lab::experiment::init::init_experiment(&data, label, silo_column).map_err(dpfl_error)
}

/// `dpfl config check`: the report, or the first error.
#[pyfunction]
#[pyo3(signature = (path, data_dir=None))]
pub fn check_config(py: Python<'_>, path: PathBuf, data_dir: Option<PathBuf>) -> PyResult<String> {
    let text = std::fs::read_to_string(&path)
        .map_err(|e| ConfigError::new_err(format!("{}: {e}", path.display())))?;
    let spec = ExperimentSpec::from_toml_at(&text, &path).map_err(dpfl_error)?;
    py.detach(|| dpfl_lab::experiment::init::check_experiment(&spec, data_dir.as_deref()))
        .map_err(dpfl_error)
}
