//! `dpfl train` and `dpfl data`.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::fmt::{num, short};
use crate::progress::Progress;

use dpfl_lab::experiment::{self, ExperimentSpec, RunOutput};

/// The experiment `dpfl train` runs without `--config`.
pub const DEFAULT_EXPERIMENT: &str = include_str!("../../../experiments/default.toml");

#[derive(Args)]
pub struct TrainArgs {
    /// Experiment file (TOML); default: the bundled obesity demo.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Directory for rounds.csv, summary.json, curves, models and provenance.json (checked
    /// before the run starts; an existing non-empty one needs --force).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Overwrite the files of an existing non-empty --out.
    #[arg(long)]
    force: bool,
    /// Directory holding the larger data sets (else $DPFL_DATA, else the bundled data/).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Override the experiment's seed (for reproducible runs).
    #[arg(long)]
    seed: Option<u64>,
    /// No progress bar (and no progress lines when not on a terminal).
    #[arg(long)]
    quiet: bool,
}

#[derive(Subcommand)]
pub enum DataCommand {
    /// Print rows, features, classes and silo sizes of an experiment's data.
    Inspect {
        /// An experiment TOML file (its [data] section is used).
        path: PathBuf,
        /// Directory holding the larger data sets (else $DPFL_DATA, else the bundled data).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Make this silo's data shard (for `dpfl silo --data`) from its own file.
    Shard(crate::shard::ShardArgs),
}

/// The experiment of `--config` (a file that cannot be read is a usage error, exit code 2;
/// relative data paths in it are relative to the file), or the bundled demo.
pub(crate) fn load_spec(config: Option<&PathBuf>) -> anyhow::Result<ExperimentSpec> {
    Ok(match config {
        Some(p) => {
            let text = crate::read_config(p)?;
            ExperimentSpec::from_toml_at(&text, p)
                .map_err(|e| crate::usage(crate::in_file(p, e)))?
        }
        None => {
            ExperimentSpec::from_toml(DEFAULT_EXPERIMENT, "<bundled experiments/default.toml>")?
        }
    })
}

pub fn train(args: &TrainArgs) -> anyhow::Result<()> {
    let mut spec = load_spec(args.config.as_ref())?;
    if args.seed.is_some() {
        spec.seed = args.seed;
    }
    if let Some(dir) = &args.out {
        dpfl_lab::output::prepare_fresh_out_dir(dir, args.force).map_err(crate::usage)?;
    }
    let total = (spec.rounds * spec.trials * spec.algorithms.len()) as u64;
    let bar = Progress::new(
        total,
        args.quiet,
        "{spinner} {msg:<22} [{bar:30}] {pos}/{len} rounds ({elapsed})",
        "rounds",
    );
    bar.set_message(crate::progress::loading_message(&spec.data));
    let labels: Vec<String> = spec.algorithms.iter().map(|a| a.label()).collect();
    let rounds = spec.rounds as u64;
    let progress = |a: usize, t: usize, r: usize| {
        bar.set_message(labels[a].clone());
        bar.set_position((t as u64 * labels.len() as u64 + a as u64) * rounds + r as u64);
    };
    // A failure after some algorithms finished keeps their results: printed, written under
    // --out with the failure, and the command still fails (issue 31 item 8).
    let (out, failure) = match experiment::run_keeping(&spec, args.data_dir.as_deref(), &progress) {
        Ok(out) => (out, None),
        Err(stopped) => {
            let experiment::Stopped {
                finished,
                at,
                error,
            } = *stopped;
            let error = crate::name_file(args.config.as_deref(), error);
            match finished {
                None => return Err(error),
                Some(out) => (out, Some((at, error))),
            }
        }
    };
    bar.finish();
    let json = crate::json();
    if !json {
        print_report(&spec, &out);
    }
    let mut files: Vec<PathBuf> = Vec::new();
    // curves.svg, curves.png and report.html, in that order.
    let mut report_files: Vec<PathBuf> = Vec::new();
    if let Some(dir) = &args.out {
        // Written aside and moved in whole: a failure leaves --out as it was.
        let stage = dpfl_lab::output::Staging::new(dir).map_err(crate::usage)?;
        let tmp = stage.path();
        experiment::write_outputs(&out, tmp)
            .with_context(|| format!("writing results to {}", dir.display()))?;
        files.extend([dir.join("rounds.csv"), dir.join("summary.json")]);
        let written = experiment::report::write_report(&spec, &out, tmp)
            .with_context(|| format!("writing the curves and report into {}", dir.display()))?;
        report_files = written
            .iter()
            .map(|p| dir.join(p.file_name().unwrap_or_default()))
            .collect();
        files.extend(report_files.clone());
        let prov = provenance("train", &spec, args.config.as_deref(), &out)?.write(tmp)?;
        files.push(dir.join(prov.file_name().unwrap_or_default()));
        if let Some((at, error)) = &failure {
            files.push(dir.join(FAILURE_FILE));
            write_failure(&spec, *at, error, &tmp.join(FAILURE_FILE))?;
        }
        stage
            .commit()
            .with_context(|| format!("moving the results into {}", dir.display()))?;
    }
    if json {
        crate::print_json(&serde_json::json!({
            "experiment": spec.name,
            "rounds": spec.rounds,
            "trials": spec.trials,
            "summary": out.summary,
            "files": files,
            "provenance": provenance("train", &spec, args.config.as_deref(), &out)?,
            "failed": failure.as_ref().map(|(_, e)| crate::one_line(e)),
        }));
    } else if let Some(dir) = &args.out {
        println!(
            "wrote {} and {}",
            dir.join("rounds.csv").display(),
            dir.join("summary.json").display()
        );
        println!(
            "wrote {} and {} (training curves) and {} model(s) under {} (dpfl predict --model)",
            report_files[0].display(),
            report_files[1].display(),
            out.models.len(),
            dir.join("models").display()
        );
        println!(
            "wrote {} (results, privacy per silo, curves, timings, configuration)",
            report_files[2].display()
        );
        if failure.is_some() {
            println!(
                "wrote {} (the failure; the results above are the algorithms that finished \
                 before it)",
                dir.join(FAILURE_FILE).display()
            );
        }
    }
    if let Some((_, error)) = failure {
        return Err(error);
    }
    // After the outputs are written, so a diverged run's curves can be inspected.
    experiment::check_finite(&spec, &out)?;
    Ok(())
}

/// The file `train --out` writes when a run failed after some algorithms finished.
const FAILURE_FILE: &str = "failure.json";

/// `failure.json`: which algorithm (index, label) and trial failed, and the error's line.
fn write_failure(
    spec: &ExperimentSpec,
    at: Option<(usize, usize)>,
    error: &anyhow::Error,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let v = serde_json::json!({
        "algorithm": at.map(|(a, _)| a),
        "label": at.and_then(|(a, _)| spec.algorithms.get(a)).map(|e| e.label()),
        "trial": at.map(|(_, t)| t),
        "error": crate::one_line(error),
        "finished": "summary.json, rounds.csv and models/ hold the runs that finished before it",
    });
    dpfl_lab::output::atomic_write(path, (serde_json::to_string_pretty(&v)? + "\n").as_bytes())?;
    Ok(())
}

/// The provenance of a run's outputs (`dpfl_lab::provenance`): the spec as run, its seed, and
/// what `test_metric` holds.
pub(crate) fn provenance(
    command: &str,
    spec: &ExperimentSpec,
    config: Option<&std::path::Path>,
    out: &RunOutput,
) -> anyhow::Result<dpfl_lab::provenance::Provenance> {
    let mut p = dpfl_lab::provenance::Provenance::new(command, spec.seed, config, spec)?;
    p.test_metric = out.summary.first().map(|s| {
        serde_json::to_value(s.metric)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    });
    Ok(p)
}

pub(crate) fn print_report(spec: &ExperimentSpec, out: &RunOutput) {
    let metric = out
        .summary
        .first()
        .map_or("test metric", |s| s.metric.label());
    println!(
        "{} ({} rounds, {} trial(s))",
        spec.name, spec.rounds, spec.trials
    );
    // Every test metric is an error (rate or RMSE): above the trivial predictor's is worse.
    let worse = |s: &experiment::AlgorithmSummary| {
        out.trivial_test_metric
            .is_some_and(|t| s.test_metric.is_finite() && s.test_metric > t)
    };
    println!(
        "{:<24} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6} {:>11} {:>11}",
        "algorithm",
        "epsilon",
        "delta",
        "eps RDP",
        "eps PLD",
        "eps lower",
        "sigma",
        "z",
        "K",
        metric,
        "train loss"
    );
    for s in &out.summary {
        let eps = s.epsilon.map_or("-".into(), short);
        let delta = s.delta.map_or("-".into(), |d| format!("{d:.1e}"));
        // The accountants' ε for the noise actually used, largest over silos.
        let acc = |pld: bool| {
            s.max_accounted_epsilon(pld)
                .map_or("-".into(), |e| num(e, 3))
        };
        let lower = s.max_lower_epsilon().map_or("-".into(), |e| num(e, 3));
        println!(
            "{:<24} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6} {:>11} {:>11}",
            s.algorithm,
            eps,
            delta,
            acc(false),
            acc(true),
            lower,
            num(s.sigma, 4),
            s.noise_multiplier.map_or("-".into(), |z| num(z, 3)),
            s.batch_size,
            if worse(s) {
                format!("{}!", num(s.test_metric, 4))
            } else {
                num(s.test_metric, 4)
            },
            num(s.final_train_loss, 4)
        );
    }
    let flagged: Vec<&str> = out
        .summary
        .iter()
        .filter(|s| worse(s))
        .map(|s| s.algorithm.as_str())
        .collect();
    if let (false, Some(t)) = (flagged.is_empty(), out.trivial_test_metric) {
        let trivial = match out.summary.first().map(|s| s.metric) {
            Some(experiment::TestMetric::TestError) => "the training majority class",
            _ => "the training mean",
        };
        println!(
            "! worse than the trivial predictor ({trivial}: {metric} {}): {}; a model that \
             ignores the features does better",
            num(t, 4),
            flagged.join(", ")
        );
    }
    // Which silo is which: summary.json, the models and the report number silos (issue 31).
    if let Some(s) = out
        .summary
        .iter()
        .find(|s| s.privacy.iter().any(|p| p.name.is_some()))
    {
        let named: Vec<String> = s
            .privacy
            .iter()
            .map(|p| format!("{} = {}", p.silo, p.name.as_deref().unwrap_or("?")))
            .collect();
        println!("silos: {}", named.join(", "));
    }
    let private: Vec<_> = out.summary.iter().filter(|s| s.private).collect();
    if private.is_empty() {
        return;
    }
    println!();
    for g in private
        .iter()
        .filter_map(|s| experiment::guarantee::guarantee(s))
    {
        println!("Privacy ({}): {}", g.algorithm, g.text);
    }
    // A caveat several algorithms share (the seed's) prints once, naming them all.
    let mut caveats: Vec<(&str, Vec<&str>)> = Vec::new();
    for s in &private {
        for c in &s.caveats {
            match caveats.iter_mut().find(|(t, _)| *t == c.as_str()) {
                Some((_, who)) => who.push(&s.algorithm),
                None => caveats.push((c, vec![&s.algorithm])),
            }
        }
    }
    for (c, who) in &caveats {
        println!("Caveat ({}): {c}", who.join(", "));
    }
    for s in &private {
        if let Some(n) = s.nonfinite_gradients.filter(|&n| n > 0) {
            println!(
                "Note ({}): {n} per-example gradient(s) had a NaN or infinite coordinate and \
                 were replaced by zero before clipping.",
                s.algorithm
            );
        }
    }
    println!(
        "(eps RDP / eps PLD: the accountants' epsilon at each silo's delta for the noise used, \
         largest over silos; '-' where an accountant cannot account the sampling. eps lower: \
         the true epsilon is at least this, from a concrete neighbouring pair.)"
    );
    if !spec.privacy.as_ref().is_some_and(|p| p.enforce_budget) {
        println!(
            "Budget enforcement is OFF ([privacy] enforce_budget = false): no silo's ledger \
             checked its spend; the guarantee rests on the calibration alone. (A `dpfl silo` \
             enforces its own --budget file by default.)"
        );
    }
}

pub fn data(cmd: &DataCommand) -> anyhow::Result<()> {
    match cmd {
        DataCommand::Inspect { path, data_dir } => {
            let spec = load_spec(Some(path))?;
            // Trial 1's split, drawn as `train` and `config check` draw it.
            let mut master = experiment::master_rng(&spec)?;
            let (trial, _) = experiment::next_trial(&spec, data_dir.as_deref(), &mut master)
                .map_err(|e| crate::name_file(Some(path), e))?;
            let (silos, names) = (trial.silos, trial.silo_names);
            if spec.seed.is_none() && !crate::json() {
                eprintln!(
                    "note: the experiment has no seed: this split is one draw; each run draws \
                     its own"
                );
            }
            if crate::json() {
                let first = silos.first().map(|s| &s.train);
                crate::print_json(&serde_json::json!({
                    "silos": silos.iter().enumerate().map(|(i, s)| serde_json::json!({
                        "name": names.as_ref().and_then(|n| n.get(i)),
                        "train_rows": s.train.len(),
                        "test_rows": s.test.len(),
                        "train_class_counts": s.train.class_counts(),
                    })).collect::<Vec<_>>(),
                    "features": first.map(|d| d.num_features()),
                    "classes": first.and_then(|d| match d.target() {
                        dpfl::data::Target::Classes { names } => Some(names.clone()),
                        dpfl::data::Target::Real => None,
                    }),
                }));
                return Ok(());
            }
            println!(
                "{}",
                dpfl::data::describe_named_silos(&silos, names.as_deref())
            );
            Ok(())
        }
        DataCommand::Shard(args) => crate::shard::shard(args),
    }
}
