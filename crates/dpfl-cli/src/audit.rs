//! `dpfl audit CONFIG`: the one-run empirical privacy audit of one algorithm of an experiment
//! (`dpfl_lab::audit`); prints one JSON object.

use std::path::PathBuf;

use clap::Args;

#[derive(Args)]
pub struct AuditArgs {
    /// Experiment file (TOML) naming the algorithm to audit.
    config: PathBuf,
    /// Index of the algorithm in the experiment's [[algorithms]] list.
    #[arg(long, default_value_t = 0)]
    algorithm: usize,
    /// m: canaries, each put into silo 0 with probability 1/2.
    #[arg(long, default_value_t = 1000)]
    canaries: usize,
    /// k: guesses on each side (the k highest and k lowest scores; 2k in all).
    #[arg(long, default_value_t = 100)]
    k: usize,
    /// Confidence 1 - beta of the lower bound.
    #[arg(long, default_value_t = 0.95)]
    confidence: f64,
    /// How canaries are scored: sum (over rounds), max (the round of largest centred
    /// magnitude: catches canaries drawn once), or both (each bound at half the error
    /// probability, the larger reported).
    #[arg(long, default_value = "both")]
    score: String,
    /// Seed of the canary draw and of every silo's stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Directory with downloaded data sets (MNIST, ...).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

pub fn audit(args: &AuditArgs) -> anyhow::Result<()> {
    let spec = crate::train::load_spec(Some(&args.config))?;
    let opts = dpfl_lab::audit::AuditOptions {
        canaries: args.canaries,
        k: args.k,
        confidence: args.confidence,
        seed: args.seed,
        score: args.score.parse().map_err(crate::usage)?,
        ..dpfl_lab::audit::AuditOptions::new(args.algorithm)
    };
    let report = dpfl_lab::audit::audit(&spec, args.data_dir.as_deref(), &opts)
        .map_err(|e| crate::name_file(Some(&args.config), e))?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
