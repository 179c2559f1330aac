//! `dpfl train` from Python: the crate-level entry point `dpfl_lab::experiment::run` (as
//! crates/dpfl-cli/src/train.rs calls it), nothing below it.

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use serde_json::json;

use dpfl_lab::experiment::{self, ExperimentSpec};

use crate::errors::{ConfigError, RunError, dpfl_error, one_line};

/// The experiment `dpfl train` runs without `--config` (the CLI's `DEFAULT_EXPERIMENT`).
const DEFAULT_EXPERIMENT: &str = include_str!("../../experiments/default.toml");

/// `config` is TOML text (`format = "toml"`; `None`: the bundled demo) or a JSON object of
/// the same fields (`"json"`, from a Python dict); `path` the file it came from (relative data
/// paths are relative to it; error messages name it). Returns `{"rounds": [...],
/// "summary": [...]}` as JSON. `progress(rounds_done, rounds_total)` is called as rounds
/// finish.
#[pyfunction]
#[pyo3(signature = (config=None, format="toml", path=None, seed=None, data_dir=None, out=None, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn train(
    py: Python<'_>,
    config: Option<&str>,
    format: &str,
    path: Option<PathBuf>,
    seed: Option<u64>,
    data_dir: Option<PathBuf>,
    out: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let text = match (config, format, &path) {
        // Read here so that an unreadable file gives the CLI's message (`read_config`).
        (None, "file", Some(p)) => std::fs::read_to_string(p)
            .map_err(|e| ConfigError::new_err(format!("{}: {e}", p.display())))?,
        (None, _, _) => DEFAULT_EXPERIMENT.to_string(),
        (Some(t), "toml", _) => t.to_string(),
        (Some(j), _, _) => {
            let value: serde_json::Value = serde_json::from_str(j)
                .map_err(|e| ConfigError::new_err(format!("<config dict>: {e}")))?;
            toml::to_string(&value)
                .map_err(|e| ConfigError::new_err(format!("<config dict>: {e}")))?
        }
    };
    let origin = match (config, format) {
        (None, _) => "<bundled experiments/default.toml>",
        (Some(_), "toml") => "<config>",
        _ => "<config dict>",
    };
    let mut spec = match &path {
        // The CLI's `load_spec`: a usage error naming the file once.
        Some(p) => ExperimentSpec::from_toml_at(&text, p)
            .map_err(|e| ConfigError::new_err(in_file(p, e.to_string())))?,
        None => ExperimentSpec::from_toml(&text, origin).map_err(dpfl_error)?,
    };
    if seed.is_some() {
        spec.seed = seed;
    }
    if let Some(dir) = &out {
        dpfl_lab::output::prepare_out_dir(dir).map_err(|e| ConfigError::new_err(e.to_string()))?;
    }
    let algorithms = spec.algorithms.len();
    let total = spec.rounds * spec.trials * algorithms;
    let rounds = spec.rounds;
    let report = |a: usize, t: usize, r: usize| {
        if let Some(cb) = &progress {
            let done = (t * algorithms + a) * rounds + r;
            // A failing callback must not stop training: its error is printed and dropped.
            Python::attach(|py| {
                if let Err(e) = cb.call1(py, (done, total)) {
                    e.print(py);
                }
            });
        }
    };
    let result = py.detach(|| experiment::run(&spec, data_dir.as_deref(), &report));
    let run = result.map_err(|e| match (&path, &e) {
        (Some(p), e2) if e2.is_config() => ConfigError::new_err(in_file(p, one_line(&e))),
        _ => dpfl_error(e),
    })?;
    if let Some(dir) = &out {
        experiment::write_outputs(&run, dir).map_err(|e| {
            RunError::new_err(format!(
                "writing results to {}: {}",
                dir.display(),
                one_line(&e)
            ))
        })?;
        let title = experiment::curves::title(&spec, &run);
        experiment::curves::plot_curves(&run, &title, dir).map_err(dpfl_error)?;
    }
    experiment::check_finite(&spec, &run).map_err(dpfl_error)?;
    Ok(json!({ "rounds": run.rounds, "summary": run.summary }).to_string())
}

/// The CLI's `in_file`: `e` naming `file` once.
fn in_file(file: &Path, e: String) -> String {
    let f = file.display().to_string();
    if e.starts_with(&f) {
        e
    } else {
        format!("{f}: {e}")
    }
}

/// `dpfl reproduce ID [--quick] [--trials N] [--out DIR]` without checkpoints: the built-in
/// reproduction `id`; returns `{"rows": [...summary.csv rows], "wall_seconds", "runs"}` as
/// JSON and, with `out`, writes summary.csv and the figures there.
#[pyfunction]
#[pyo3(signature = (id, quick=false, trials=None, data_dir=None, out=None, progress=None))]
pub fn reproduce(
    py: Python<'_>,
    id: &str,
    quick: bool,
    trials: Option<usize>,
    data_dir: Option<PathBuf>,
    out: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    use dpfl_lab::reproduce as repro;
    let mut spec = repro::builtin(id).map_err(dpfl_error)?;
    if quick {
        spec = spec.quick();
    }
    if let Some(t) = trials {
        if t == 0 {
            return Err(dpfl_error(dpfl::Error::config(
                "--trials",
                "must be at least 1",
            )));
        }
        spec.trials = t;
    }
    if let Some(dir) = &out {
        dpfl_lab::output::prepare_out_dir(dir).map_err(|e| ConfigError::new_err(e.to_string()))?;
    }
    let report = |done: usize, total: usize| {
        if let Some(cb) = &progress {
            Python::attach(|py| {
                if let Err(e) = cb.call1(py, (done, total)) {
                    e.print(py);
                }
            });
        }
    };
    let run = py
        .detach(|| repro::run(&spec, data_dir.as_deref(), &report))
        .map_err(dpfl_error)?;
    if let Some(dir) = &out {
        repro::write_outputs(&spec, &run, dir).map_err(dpfl_error)?;
    }
    // The CLI's check: a point whose whole step-size grid diverged is a failed run.
    if !spec.expect_divergence
        && let Some(r) = run.rows.iter().find(|r| !r.mean.is_finite())
    {
        return Err(dpfl_error(dpfl::Error::data(
            format!("{} (figure {}, {})", r.algorithm, r.figure, r.metric),
            format!(
                "is {} at epsilon {:?}: every step size of its grid diverged; narrow the grid, \
                 or set `expect_divergence = true` in the spec if this is expected",
                r.mean, r.epsilon
            ),
        )));
    }
    Ok(json!({ "rows": run.rows, "wall_seconds": run.wall_seconds, "runs": run.runs }).to_string())
}
