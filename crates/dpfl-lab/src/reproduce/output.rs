//! A reproduction's outputs: `summary.csv` (a real CSV writer) and the figures, each written
//! atomically ([`crate::output`]).

use std::path::{Path, PathBuf};

use super::{ReproOutput, ReproSpec, plot};
use crate::output::{atomic_write, csv_string};

/// Writes `summary.csv`, and per figure `fig<F>.svg` and `fig<F>.png`, into `dir`.
pub fn write_outputs(
    spec: &ReproSpec,
    out: &ReproOutput,
    dir: &Path,
) -> dpfl::Result<Vec<PathBuf>> {
    let mut written = write_summary(out, dir)?;
    written.extend(plot::plot_figures(spec, &out.rows, &out.panels, dir)?);
    Ok(written)
}

/// Writes `summary.csv` into `dir` (the figures: [`plot::plot_figures`]).
pub fn write_summary(out: &ReproOutput, dir: &Path) -> dpfl::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|source| dpfl::Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let csv = csv_string(
        &[
            "figure",
            "algorithm",
            "M",
            "epsilon",
            "metric",
            "mean",
            "ci_low",
            "ci_high",
            "trials",
        ],
        out.rows.iter().map(|r| {
            [
                r.figure.clone(),
                r.algorithm.clone(),
                r.m.to_string(),
                r.epsilon.map_or(String::new(), |e| e.to_string()),
                r.metric.clone(),
                r.mean.to_string(),
                r.ci_low.to_string(),
                r.ci_high.to_string(),
                r.trials.to_string(),
            ]
        }),
    )?;
    let p = dir.join("summary.csv");
    atomic_write(&p, csv.as_bytes())?;
    Ok(vec![p])
}
