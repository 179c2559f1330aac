//! A run's outputs: `rounds.csv`, `summary.json` and `models/` (see [`super::saved`]), each
//! file written atomically
//! ([`crate::output`]), and the check that a run did not diverge.

use std::path::Path;

use super::{ExperimentSpec, RunOutput};
use crate::output::{atomic_write, csv_string};

/// Writes `rounds.csv` and `summary.json` into `dir` (created if needed). Each file is
/// written to a temporary file and renamed, so a crash or a full disk never leaves a
/// truncated result.
pub fn write_outputs(out: &RunOutput, dir: &Path) -> dpfl::Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| dpfl::Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    // The extended columns are appended only when some row has them, so other runs' files
    // keep exactly their columns.
    let extended = out.rounds.iter().any(|r| r.extended.is_some());
    let mut header = vec!["trial", "round", "algorithm", "train_loss", "test_metric"];
    if extended {
        header.extend_from_slice(&super::metrics::COLUMNS);
    }
    let csv = csv_string(
        &header,
        out.rounds.iter().map(|r| {
            let mut row = vec![
                r.trial.to_string(),
                r.round.to_string(),
                r.algorithm.clone(),
                r.train_loss.to_string(),
                r.test_metric.to_string(),
            ];
            if extended {
                match &r.extended {
                    Some(e) => row.extend(e.cells()),
                    None => row.extend(std::iter::repeat_n(String::new(), 5)),
                }
            }
            row
        }),
    )?;
    atomic_write(&dir.join("rounds.csv"), csv.as_bytes())?;
    let json = serde_json::to_string_pretty(&out.summary)
        .map_err(|e| dpfl::Error::data("summary.json", e.to_string()))?;
    atomic_write(&dir.join("summary.json"), (json + "\n").as_bytes())?;
    for (k, m) in out.models.iter().enumerate() {
        let name = format!("{}-{}", k + 1, super::saved::slug(&m.meta.algorithm));
        m.save(&dir.join("models").join(name))?;
    }
    Ok(())
}

/// Fails (a numerical error, exit code 1 in the CLI) if any evaluated training loss or test
/// metric is NaN or infinite, unless the experiment sets `expect_divergence = true` (for
/// step-size sweeps where a diverging setting is part of the result).
pub fn check_finite(spec: &ExperimentSpec, out: &RunOutput) -> dpfl::Result<()> {
    if spec.expect_divergence {
        return Ok(());
    }
    let bad = out
        .rounds
        .iter()
        .find(|r| !(r.train_loss.is_finite() && r.test_metric.is_finite()));
    if let Some(r) = bad {
        return Err(dpfl::Error::data(
            format!("{} (trial {}, round {})", r.algorithm, r.trial, r.round),
            format!(
                "diverged: train loss = {}, test metric = {}; lower the step size, or set \
                 `expect_divergence = true` in the experiment if this is expected",
                r.train_loss, r.test_metric
            ),
        ));
    }
    if let Some(s) = out
        .summary
        .iter()
        .find(|s| !(s.final_train_loss.is_finite() && s.test_metric.is_finite()))
    {
        return Err(dpfl::Error::data(
            s.algorithm.clone(),
            format!(
                "diverged: final train loss = {}, test metric = {}; lower the step size, or \
                 set `expect_divergence = true` in the experiment if this is expected",
                s.final_train_loss, s.test_metric
            ),
        ));
    }
    Ok(())
}
