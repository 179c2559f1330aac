//! `dpfl predict` and `dpfl evaluate`: use a model `dpfl train --out` saved
//! (`OUT/models/<k>-<label>/`, format in `dpfl::experiment::saved`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use serde_json::json;

use dpfl::experiment::saved::SavedModel;

#[derive(Args)]
pub struct PredictArgs {
    /// A saved model directory (holds model.json and model.safetensors).
    #[arg(long)]
    model: PathBuf,
    /// CSV file with the training file's feature columns (target and silo columns optional).
    #[arg(long)]
    data: PathBuf,
    /// Where to write the predictions (CSV: line, prediction).
    #[arg(long)]
    out: PathBuf,
    /// Overwrite --out if it exists.
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
pub struct EvaluateArgs {
    /// A saved model directory (holds model.json and model.safetensors).
    #[arg(long)]
    model: PathBuf,
    /// Labelled CSV file with the training file's columns.
    #[arg(long)]
    data: PathBuf,
}

fn load(dir: &std::path::Path) -> anyhow::Result<SavedModel> {
    SavedModel::load(dir).map_err(|e| match e {
        dpfl::Error::Io { .. } => crate::usage(crate::one_line(&anyhow::Error::new(e))),
        other => other.into(),
    })
}

pub fn predict(args: &PredictArgs) -> anyhow::Result<()> {
    if args.out.exists() && !args.force {
        return Err(crate::usage(format!(
            "{} exists; pass --force to overwrite it",
            args.out.display()
        )));
    }
    let model = load(&args.model)?;
    let preds = model.predict_csv(&args.data)?;
    let csv = dpfl::output::csv_string(
        &["row", "prediction"],
        preds
            .iter()
            .enumerate()
            .map(|(i, p)| [(i + 1).to_string(), p.clone()]),
    )?;
    dpfl::output::atomic_write(&args.out, csv.as_bytes())
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "{}",
        json!({
            "model": args.model,
            "algorithm": model.meta.algorithm,
            "rows": preds.len(),
            "out": args.out,
        })
    );
    Ok(())
}

pub fn evaluate(args: &EvaluateArgs) -> anyhow::Result<()> {
    let model = load(&args.model)?;
    let (value, metric, rows) = model.evaluate_csv(&args.data)?;
    println!(
        "{}",
        json!({
            "model": args.model,
            "algorithm": model.meta.algorithm,
            "metric": metric,
            "value": value,
            "rows": rows,
            "certified_epsilon": model.meta.privacy.certified_epsilon,
            "delta": model.meta.privacy.delta,
        })
    );
    Ok(())
}
