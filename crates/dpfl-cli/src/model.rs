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
    /// A file in the training data's format: CSV with the training columns (target and silo
    /// columns optional), LIBSVM, an IDX image file, or (synthetic data) a CSV with one
    /// column per feature name.
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
    /// A labelled file in the training data's format (see `dpfl predict --help`).
    #[arg(long)]
    data: PathBuf,
    /// The IDX label file for --data, for models trained on images (mnist, fashion-mnist, idx).
    #[arg(long)]
    labels: Option<PathBuf>,
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
    let preds = model.predict_file(&args.data)?;
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
    let (value, metric, rows) = model.evaluate_file(&args.data, args.labels.as_deref())?;
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
