//! `dpfl train` and `dpfl data`.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use dpfl::experiment::{self, ExperimentSpec, RunOutput};

/// The experiment `dpfl train` runs without `--config`.
pub const DEFAULT_EXPERIMENT: &str = include_str!("../../../experiments/default.toml");

#[derive(Args)]
pub struct TrainArgs {
    /// Experiment file (TOML); default: the bundled obesity demo.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Directory for rounds.csv and summary.json.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Directory holding the larger data sets (else $DPFL_DATA, else the bundled data/).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Override the experiment's seed (for reproducible runs).
    #[arg(long)]
    seed: Option<u64>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

#[derive(Subcommand)]
pub enum DataCommand {
    /// Print rows, features, classes and silo sizes of an experiment's data.
    Inspect {
        /// An experiment TOML file (its [data] section is used).
        path: PathBuf,
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
}

fn load_spec(config: Option<&PathBuf>) -> anyhow::Result<ExperimentSpec> {
    Ok(match config {
        Some(p) => ExperimentSpec::from_file(p)?,
        None => {
            ExperimentSpec::from_toml(DEFAULT_EXPERIMENT, "<bundled experiments/default.toml>")?
        }
    })
}

/// A progress bar of `total` steps drawn with `template` (hidden when `quiet`).
pub fn progress_bar(total: u64, quiet: bool, template: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(total);
    b.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    b
}

pub fn train(args: &TrainArgs) -> anyhow::Result<()> {
    let mut spec = load_spec(args.config.as_ref())?;
    if args.seed.is_some() {
        spec.seed = args.seed;
    }
    let total = (spec.rounds * spec.trials * spec.algorithms.len()) as u64;
    let bar = progress_bar(
        total,
        args.quiet,
        "{spinner} {msg:<22} [{bar:30}] {pos}/{len} rounds ({elapsed})",
    );
    let labels: Vec<String> = spec.algorithms.iter().map(|a| a.label()).collect();
    let rounds = spec.rounds as u64;
    let trials = spec.trials as u64;
    let progress = |a: usize, t: usize, r: usize| {
        bar.set_message(labels[a].clone());
        bar.set_position((t as u64 * labels.len() as u64 + a as u64) * rounds + r as u64);
    };
    let _ = trials;
    let out = experiment::run(&spec, args.data_dir.as_deref(), &progress)?;
    bar.finish_and_clear();
    print_report(&spec, &out);
    if let Some(dir) = &args.out {
        experiment::write_outputs(&out, dir)
            .with_context(|| format!("writing results to {}", dir.display()))?;
        println!(
            "wrote {} and {}",
            dir.join("rounds.csv").display(),
            dir.join("summary.json").display()
        );
    }
    Ok(())
}

pub(crate) fn print_report(spec: &ExperimentSpec, out: &RunOutput) {
    let metric = out.summary.first().map_or("test metric", |s| {
        if s.metric == "test_error" {
            "test error"
        } else {
            "test RMSE"
        }
    });
    println!(
        "{} ({} rounds, {} trial(s))",
        spec.name, spec.rounds, spec.trials
    );
    println!(
        "{:<24} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>6} {:>11} {:>11}",
        "algorithm",
        "epsilon",
        "delta",
        "eps RDP",
        "eps PLD",
        "eps lower",
        "sigma",
        "K",
        metric,
        "train loss"
    );
    for s in &out.summary {
        let eps = s.epsilon.map_or("-".into(), |e| format!("{e}"));
        let delta = s.delta.map_or("-".into(), |d| format!("{d:.1e}"));
        // The accountants' ε for the noise actually used, largest over silos.
        let acc = |pld: bool| {
            s.max_accounted_epsilon(pld)
                .map_or("-".into(), |e| format!("{e:.3}"))
        };
        let lower = s
            .max_lower_epsilon()
            .map_or("-".into(), |e| format!("{e:.3}"));
        println!(
            "{:<24} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9.4} {:>6} {:>11.4} {:>11.4}",
            s.algorithm,
            eps,
            delta,
            acc(false),
            acc(true),
            lower,
            s.sigma,
            s.batch_size,
            s.test_metric,
            s.final_train_loss
        );
    }
    let private: Vec<_> = out.summary.iter().filter(|s| s.private).collect();
    if private.is_empty() {
        return;
    }
    println!();
    for s in &private {
        let target = s.epsilon.unwrap_or(f64::NAN);
        let delta = s.delta.unwrap_or(f64::NAN);
        let lower = s
            .max_lower_epsilon()
            .map_or(String::new(), |l| {
                format!(" (and the true epsilon is at least {l:.3}: a lower bound from a concrete neighbouring pair)")
            });
        // State what the accountants certify (the tighter of the two sound ones), never just
        // the formula's target.
        match s.max_certified_epsilon() {
            Some(acc) if acc <= target * (1.0 + 1e-9) => println!(
                "Privacy ({}): each silo's messages are ({target}, {delta:.1e})-DP with respect to \
                 any one of its records (ISRL-DP, replace-one; certified epsilon = {acc:.3}{lower}); \
                 the server and the other silos are not trusted.",
                s.algorithm
            ),
            Some(acc) => println!(
                "Privacy ({}): the calibration targets ({target}, {delta:.1e}), but the accountants \
                 certify only epsilon = {acc:.3} at that delta for the noise used{lower}: each \
                 silo's messages are ({acc:.3}, {delta:.1e})-DP with respect to any one of its \
                 records. For mb-sgd, calibration = \"accountant\" meets the target.",
                s.algorithm
            ),
            None => println!(
                "Privacy ({}): the calibration targets ({target}, {delta:.1e})-DP per silo \
                 (ISRL-DP, replace-one); no accountant could certify it (see summary.json).",
                s.algorithm
            ),
        }
    }
    for s in &private {
        for c in &s.caveats {
            println!("Caveat ({}): {c}", s.algorithm);
        }
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
            let spec = ExperimentSpec::from_file(path)?;
            let mut rng = dpfl_privacy::DpRng::new(
                spec.seed.or(Some(0)),
                dpfl_privacy::rng::Purpose::Data,
                0,
            )?;
            let silos = spec.data.load(data_dir.as_deref(), &mut rng)?;
            println!("{}", dpfl::data::describe_silos(&silos));
            Ok(())
        }
    }
}
