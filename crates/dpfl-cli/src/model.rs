//! `dpfl predict` and `dpfl evaluate`: use a model `dpfl train --out` saved
//! (`OUT/models/<k>-<label>/`, format in `dpfl_lab::experiment::saved`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use serde_json::json;

use dpfl_lab::experiment::saved::SavedModel;

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
    /// Where to write the predictions, a CSV with the columns `row` (1 = the first data row)
    /// and `prediction` (the class name, or the value), and with --proba one `p_<class>`
    /// column per class. `-` or no --out: standard output (then nothing else is printed
    /// there); with a file, a JSON line on standard output says what was written.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Add each class's probability (`p_<class>`, class order of model.json): the model's
    /// own sigmoid or softmax. Refused for a real target and for the hinge loss.
    #[arg(long)]
    proba: bool,
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
    let file = args.out.as_ref().filter(|o| o.as_os_str() != "-");
    if let Some(out) = file.filter(|o| o.exists() && !args.force) {
        return Err(crate::usage(format!(
            "{} exists; pass --force to overwrite it",
            out.display()
        )));
    }
    let model = load(&args.model)?;
    let (preds, probs) = model
        .predict_rows(&args.data, args.proba)
        .map_err(|e| match e {
            e if e.is_config() => crate::usage(crate::one_line(&anyhow::Error::new(e))),
            other => other.into(),
        })?;
    let mut header = vec!["row".to_string(), "prediction".to_string()];
    if probs.is_some() {
        for c in model.meta.classes.iter().flatten() {
            header.push(format!("p_{c}"));
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let csv = dpfl_lab::output::csv_string(
        &header,
        preds.iter().enumerate().map(|(i, p)| {
            let mut row = vec![(i + 1).to_string(), p.clone()];
            if let Some(ps) = probs.as_ref().and_then(|ps| ps.get(i)) {
                row.extend(ps.iter().map(|v| format!("{v:.6}")));
            }
            row
        }),
    )?;
    let Some(out) = file else {
        use std::io::Write as _;
        std::io::stdout().lock().write_all(csv.as_bytes())?;
        return Ok(());
    };
    dpfl_lab::output::atomic_write(out, csv.as_bytes())
        .with_context(|| format!("writing {}", out.display()))?;
    println!(
        "{}",
        json!({
            "model": args.model,
            "algorithm": model.meta.algorithm,
            "rows": preds.len(),
            "out": out,
            "probabilities": probs.is_some(),
        })
    );
    Ok(())
}

pub fn evaluate(args: &EvaluateArgs) -> anyhow::Result<()> {
    let model = load(&args.model)?;
    let e = model.evaluation(&args.data, args.labels.as_deref())?;
    println!(
        "{}",
        json!({
            "model": args.model,
            "algorithm": model.meta.algorithm,
            "metric": e.metric,
            "value": e.value,
            "rows": e.rows,
            "log_loss": e.log_loss,
            "auc": e.auc,
            "confusion": e.confusion,
            "certified_epsilon": model.meta.privacy.certified_epsilon,
            "delta": model.meta.privacy.delta,
        })
    );
    if !crate::json() {
        eprint!("{}", dpfl_lab::experiment::evaluation::table(&e));
    }
    Ok(())
}
