//! `dpfl reproduce ID [--quick] [--out DIR] [--resume]`: regenerates a paper's figures and
//! tables. One entry for every reproduction: the id resolves to a family
//! (`dpfl_lab::reproduce::families`), whose `Reproduction` is driven by the one loop
//! (`dpfl_lab::reproduce::reproduction::run`): jobs → those in `DIR/checkpoint.jsonl` skipped
//! on `--resume` → run → appended → summarised → drawn. The checkpoint is removed at the end,
//! or kept where the family extends a finished run with more seeds (`--trials N --resume`).

use std::path::{Path, PathBuf};

use clap::Args;

use dpfl_lab::reproduce::checkpoint;
use dpfl_lab::reproduce::families::{self, Family};
use dpfl_lab::reproduce::reproduction::{self, Hooks, Options, Reproduction, RunFacts};

use crate::progress::Progress;

#[derive(Args)]
pub struct ReproduceArgs {
    /// lowy-mnist (Fig. 4, 7), lowy-insurance (Fig. 5, 8, 9), lowy-obesity (Fig. 6),
    /// normfedavg-fmnist-{bits,clipping,fedavg} (Das et al. Tables 4, 3, 6),
    /// soteria-a9a or soteria-mnist (SoteriaFL Figs. 1–8), shuffle-rates (Cheu et al.'s
    /// implied experiment: excess loss against n per trust model).
    id: String,
    /// The reduced run of the spec's [quick] table (under a minute).
    #[arg(long)]
    quick: bool,
    /// Output directory (default: results/ID, or results/ID-quick).
    #[arg(long)]
    out: Option<PathBuf>,
    /// A reproduction TOML to use instead of the built-in one for ID (its `id` must be ID;
    /// relative data paths in it are relative to the file).
    #[arg(long)]
    spec: Option<PathBuf>,
    /// Override the number of trials (a reduced full run; the CSV's `trials` column says so).
    /// For normfedavg-*: the number of seeds (1, 2, … N; the `seeds` column says so).
    #[arg(long)]
    trials: Option<usize>,
    /// normfedavg-* only: override the number of rounds (a reduced run; the `rounds` column of
    /// summary.csv says so).
    #[arg(long)]
    rounds: Option<usize>,
    /// normfedavg-* only: every algorithm's local heavy-ball momentum, in [0, 1) (default the
    /// plans' 0.9; 0 is PyTorch's default, plain SGD). A run is never resumed with another.
    #[arg(long)]
    momentum: Option<f64>,
    /// normfedavg-* only: the local step's factor per round, eta_k = eta_0 * decay^k, in (0, 1]
    /// (default the paper's 0.99). A run is never resumed with another.
    #[arg(long)]
    step_decay: Option<f64>,
    /// normfedavg-* only: run only these of the plan's algorithms, in this order
    /// (comma-separated labels as in summary.csv, e.g. "Bin s = 2^12,QTDL s = 2^6 (paper's
    /// claim)"; a reduced run).
    #[arg(long, value_delimiter = ',')]
    algorithms: Option<Vec<String>>,
    /// Directory holding the larger data sets (else $DPFL_DATA, else the bundled data/).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// No progress bar (and no progress lines when not on a terminal).
    #[arg(long)]
    quiet: bool,
    /// Continue an interrupted reproduction from DIR/checkpoint.jsonl (same ID, spec and flags).
    #[arg(long)]
    resume: bool,
    /// Overwrite the files of an existing non-empty output directory.
    #[arg(long)]
    force: bool,
    /// Train nothing: soteria-* and normfedavg-* rewrite the summaries, the privacy columns
    /// (certified ε, lower bound) and the figures of the finished reproduction in --out from
    /// its training outputs (curves.csv, or rounds.csv and summary.csv), which are kept
    /// byte for byte; lowy-* write privacy.csv (each label's certificate, from the plans of
    /// as many trials as summary.csv has) beside summary.csv.
    #[arg(long, conflicts_with_all = ["resume", "trials", "rounds"])]
    rewrite: bool,
    /// soteria-* only: how every algorithm's noise is set: paper-code (the official code's
    /// presets, the default; they certify far more than their ε labels), accountant (each σ
    /// calibrated by dpfl's accountants to the labelled (ε, δ), so every method certifies the
    /// same ε; default output results/ID-certified) or none (non-private).
    #[arg(long, value_parser = ["paper-code", "accountant", "none"])]
    calibration: Option<String>,
    /// soteria-* only: per-record (the default, the paper's) or aggregate (each silo's whole
    /// estimator clipped at G, the official code's; no guarantee at the label).
    #[arg(long, value_parser = ["per-record", "aggregate"])]
    clipping: Option<String>,
    /// soteria-* only: run only these of the plan's ε settings (comma-separated; a reduced
    /// run).
    #[arg(long, value_delimiter = ',')]
    epsilons: Option<Vec<f64>>,
    /// soteria-* only: b of LDP-SGD, CDP-SGD and SoteriaFL-SGD (default Corollary 1's rule:
    /// 1 and 4 on MNIST; the official code's MNIST notebooks fix 128).
    #[arg(long)]
    sgd_batch: Option<usize>,
}

/// The options the families read (the flags beyond the id, `--out`, `--data-dir`, `--quiet`,
/// `--force`).
fn options(args: &ReproduceArgs) -> Options {
    Options {
        quick: args.quick,
        spec: args.spec.clone(),
        trials: args.trials,
        rounds: args.rounds,
        momentum: args.momentum,
        step_decay: args.step_decay,
        algorithms: args.algorithms.clone(),
        calibration: args.calibration.clone(),
        clipping: args.clipping.clone(),
        epsilons: args.epsilons.clone(),
        sgd_batch: args.sgd_batch,
        rewrite: args.rewrite,
        resume: args.resume,
    }
}

pub fn reproduce(args: &ReproduceArgs) -> anyhow::Result<()> {
    match families::resolve(&args.id, &options(args)).map_err(crate::usage)? {
        Family::Lowy(r) => drive(r, args),
        Family::Soteria(r) => drive(r, args),
        Family::NormFedAvg(r) => drive(r, args),
        Family::ShuffleRates(r) => drive(r, args),
    }
}

/// The command line that reruns this reproduction (every flag that changes what runs).
fn command(args: &ReproduceArgs) -> String {
    let mut command = format!("reproduce {}", args.id);
    if args.quick {
        command.push_str(" --quick");
    }
    for (flag, value) in [
        ("--trials", args.trials.map(|t| t.to_string())),
        ("--rounds", args.rounds.map(|r| r.to_string())),
        ("--momentum", args.momentum.map(|m| m.to_string())),
        ("--step-decay", args.step_decay.map(|q| q.to_string())),
        (
            "--algorithms",
            args.algorithms
                .as_ref()
                .map(|a| format!("{:?}", a.join(","))),
        ),
        ("--calibration", args.calibration.clone()),
        ("--clipping", args.clipping.clone()),
        ("--sgd-batch", args.sgd_batch.map(|b| b.to_string())),
        (
            "--epsilons",
            args.epsilons
                .as_ref()
                .map(|e| e.iter().map(f64::to_string).collect::<Vec<_>>().join(",")),
        ),
    ] {
        if let Some(v) = value {
            command.push_str(&format!(" {flag} {v}"));
        }
    }
    command
}

/// The one loop of `dpfl reproduce`, the same for every family.
fn drive<R: Reproduction>(mut r: R, args: &ReproduceArgs) -> anyhow::Result<()> {
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(r.out_name()));
    let named = |e: dpfl::Error| crate::name_file(args.spec.as_deref(), e);
    if args.rewrite {
        let report = r
            .rewrite(args.data_dir.as_deref(), &out_dir)
            .map_err(named)?;
        return print(report);
    }
    // Before any work: a bad --out must not cost a 40-minute run. A non-empty directory needs
    // --force, unless it holds an interrupted run's checkpoint (then the checkpoint decides:
    // --resume continues it, and without --resume the run is refused so the finished work is
    // not thrown away).
    let interrupted = out_dir.join(checkpoint::FILE_NAME).exists();
    dpfl_lab::output::prepare_fresh_out_dir(&out_dir, args.force || args.resume || interrupted)
        .map_err(crate::usage)?;
    let checkpoint = reproduction::open_checkpoint(&r, &out_dir, args.resume)?;
    let start = std::time::Instant::now();
    let bar = Progress::new(
        0,
        args.quiet,
        "{spinner} {msg} [{bar:30}] {pos}/{len} runs ({elapsed}, eta {eta})",
        "runs",
    );
    bar.set_message(r.loading());
    r.load(args.data_dir.as_deref()).map_err(named)?;
    bar.set_length(r.jobs().len() as u64);
    let quiet = args.quiet;
    let progress = |d: usize, _: usize| {
        bar.set_message("training");
        bar.set_position(d as u64);
    };
    // One line per round at most every 10 rounds and at a run's end: a multi-hour run shows
    // where it is without flooding a log.
    let round = |job: &str, k: usize, rounds: usize| {
        if !quiet && (k.is_multiple_of(10) || k == rounds) {
            eprintln!(
                "{job}: round {k}/{rounds} ({:.0} s)",
                start.elapsed().as_secs_f64()
            );
        }
        Ok(())
    };
    let note = |line: &str| {
        if !quiet {
            eprintln!("{line}");
        }
    };
    let hooks = Hooks {
        progress: &progress,
        round: &round,
        note: &note,
    };
    let (records, rounds_here) =
        reproduction::run(&r, Some(&checkpoint), Some(&out_dir), &hooks).map_err(named)?;
    bar.finish();
    let (summary, mut files) = r.summarise(&records, &out_dir)?;
    files.extend(r.draw(&summary, &out_dir)?);
    files.push(provenance(args, &r, &out_dir)?);
    if !r.keeps_checkpoint() {
        // The outputs hold everything the checkpoint did.
        checkpoint.remove()?;
    }
    let facts = RunFacts {
        wall_seconds: start.elapsed().as_secs_f64(),
        jobs: records.len(),
        rounds_here,
    };
    let mut report = r.report(&summary, &facts);
    report.files = files;
    print(report)
}

/// Writes `dir/provenance.json` for reproduction `r` run as `args` says.
fn provenance<R: Reproduction>(args: &ReproduceArgs, r: &R, dir: &Path) -> anyhow::Result<PathBuf> {
    let (seed, config) = r.provenance()?;
    let mut p =
        dpfl_lab::provenance::Provenance::new(&command(args), seed, args.spec.as_deref(), &config)?;
    p.test_metric = None;
    Ok(p.write(dir)?)
}

/// Prints a reproduction's report: the `--json` object, or its lines around the files written;
/// then its failure, if any.
fn print(report: reproduction::Report) -> anyhow::Result<()> {
    if crate::json() {
        let mut json = report.json;
        json.insert("files".into(), serde_json::json!(report.files));
        crate::print_json(&serde_json::Value::Object(json));
    } else {
        for line in &report.lines {
            println!("{line}");
        }
        for f in &report.files {
            println!("wrote {}", f.display());
        }
        for line in &report.after {
            println!("{line}");
        }
    }
    match report.failure {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
