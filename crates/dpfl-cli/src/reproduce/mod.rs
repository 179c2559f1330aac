//! `dpfl reproduce ID [--quick] [--out DIR] [--resume]`: regenerates a paper figure (see
//! `dpfl_lab::reproduce`): writes `DIR/summary.csv` and `DIR/fig<F>.{svg,png}`. Finished runs are
//! checkpointed in `DIR/checkpoint.jsonl` (removed at the end); `--resume` continues an
//! interrupted reproduction from it.

use std::path::PathBuf;

use clap::Args;

use dpfl_lab::reproduce::{self, ReproSpec, checkpoint::Checkpoint};

use crate::progress::Progress;

mod normfedavg;
mod soteria;

use normfedavg::normfedavg;
use soteria::reproduce_soteria;

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

/// Checks the output directory before any work: a non-empty one needs --force, unless it
/// holds an interrupted run's checkpoint (then `Checkpoint::open` decides: --resume continues
/// it, and without --resume the run is refused so the finished work is not thrown away).
fn prepare(args: &ReproduceArgs, dir: &std::path::Path) -> anyhow::Result<()> {
    let interrupted = dir.join(reproduce::checkpoint::FILE_NAME).exists();
    dpfl_lab::output::prepare_fresh_out_dir(dir, args.force || args.resume || interrupted)
        .map_err(crate::usage)
}

/// Writes `dir/provenance.json` for reproduction `args.id` run with `config`.
fn provenance(
    args: &ReproduceArgs,
    seed: Option<u64>,
    config: &impl serde::Serialize,
    dir: &std::path::Path,
) -> anyhow::Result<PathBuf> {
    // Every flag that changes what runs, so the command reruns it.
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
    let mut p =
        dpfl_lab::provenance::Provenance::new(&command, seed, args.spec.as_deref(), config)?;
    p.test_metric = None;
    Ok(p.write(dir)?)
}

pub fn reproduce(args: &ReproduceArgs) -> anyhow::Result<()> {
    let soteria_flags = args.calibration.is_some()
        || args.clipping.is_some()
        || args.epsilons.is_some()
        || args.sgd_batch.is_some();
    if soteria_flags && !args.id.starts_with("soteria-") {
        return Err(crate::usage(dpfl::Error::config(
            "--calibration/--clipping/--epsilons/--sgd-batch",
            "only the soteria-* reproductions take them (the Lowy specs set `calibration` \
             per algorithm)",
        )));
    }
    if reproduce::normfedavg::IDS.contains(&args.id.as_str()) {
        return normfedavg(args);
    }
    if args.rounds.is_some()
        || args.momentum.is_some()
        || args.step_decay.is_some()
        || args.algorithms.is_some()
    {
        return Err(crate::usage(dpfl::Error::config(
            "--rounds/--momentum/--step-decay/--algorithms",
            "only the normfedavg-* reproductions take them",
        )));
    }
    if args.id.starts_with("soteria-") {
        return reproduce_soteria(args);
    }
    if args.rewrite && args.id == "shuffle-rates" {
        return Err(crate::usage(dpfl::Error::config(
            "--rewrite",
            "shuffle-rates does not take --rewrite (its runs.csv carries each run's certificate)",
        )));
    }
    if args.id == "shuffle-rates" {
        return reproduce_shuffle_rates(args);
    }
    let mut spec = match &args.spec {
        Some(p) => {
            let text = crate::read_config(p)?;
            let mut spec = ReproSpec::from_toml(&text, &p.display().to_string())
                .map_err(|e| crate::usage(crate::in_file(p, e)))?;
            spec.base
                .data
                .resolve_paths(dpfl_lab::experiment::paths::base_of(p));
            if spec.id != args.id {
                return Err(dpfl::Error::config(
                    "id",
                    format!(
                        "{} is reproduction {:?}, but the command names {:?}",
                        p.display(),
                        spec.id,
                        args.id
                    ),
                )
                .into());
            }
            spec
        }
        None => reproduce::builtin(&args.id)?,
    };
    if args.quick {
        spec = spec.quick();
    }
    if let Some(t) = args.trials {
        if t == 0 {
            return Err(dpfl::Error::config("--trials", "must be at least 1").into());
        }
        spec.trials = t;
        // The run count with the new trials, before the run list is allocated.
        if spec.runs().is_none_or(|n| n > reproduce::MAX_RUNS) {
            return Err(dpfl::Error::config(
                "--trials",
                format!("{t} trials: more than {} runs", reproduce::MAX_RUNS),
            )
            .into());
        }
    }
    let out_dir = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(if args.quick {
            format!("{}-quick", args.id)
        } else {
            args.id.clone()
        })
    });
    if args.rewrite {
        return rewrite_lowy(args, &spec, &out_dir);
    }
    // Before any work: a bad --out must not cost a 40-minute run.
    prepare(args, &out_dir)?;
    let jobs = reproduce::jobs(&spec);
    let checkpoint = Checkpoint::open(
        &out_dir.join(reproduce::checkpoint::FILE_NAME),
        &spec,
        &jobs,
        args.resume,
    )?;
    if checkpoint.finished() > 0 && !args.quiet {
        eprintln!(
            "resuming: {} of {} runs already finished ({})",
            checkpoint.finished(),
            jobs.len(),
            checkpoint.path().display()
        );
    }
    let bar = Progress::new(
        jobs.len() as u64,
        args.quiet,
        "{spinner} {msg} [{bar:30}] {pos}/{len} runs ({elapsed}, eta {eta})",
        "runs",
    );
    bar.set_message(crate::progress::loading_message(&spec.base.data));
    let progress = |d: usize, _: usize| {
        bar.set_message("training");
        bar.set_position(d as u64);
    };
    let out = reproduce::run_checkpointed(
        &spec,
        args.data_dir.as_deref(),
        &progress,
        Some(&checkpoint),
    )
    .map_err(|e| crate::name_file(args.spec.as_deref(), e))?;
    bar.finish();
    let mut files = reproduce::write_outputs(&spec, &out, &out_dir)?;
    files.push(provenance(args, Some(spec.seed), &spec, &out_dir)?);
    // The outputs hold everything the checkpoint did.
    checkpoint.remove()?;
    if crate::json() {
        crate::print_json(&serde_json::json!({
            "id": spec.id,
            "runs": out.runs,
            "trials": spec.trials,
            "wall_seconds": out.wall_seconds,
            "rows": out.rows,
            "files": files,
        }));
        return check_diverged(&spec, &out);
    }
    println!(
        "{}: {} runs ({} trials) in {:.1} s",
        spec.id, out.runs, spec.trials, out.wall_seconds
    );
    for f in files {
        println!("wrote {}", f.display());
    }
    if spec.base.lipschitz_from_data.is_some() {
        // The paper's rule, kept to reproduce it: say what it costs.
        println!("Caveat: {}", dpfl_lab::experiment::DATA_DERIVED_L_CAVEAT);
    }
    check_diverged(&spec, &out)
}

/// `--rewrite` of a Lowy reproduction: `privacy.csv` beside the finished reproduction's
/// `summary.csv` (kept as it is), each label's certificate from the plans alone.
fn rewrite_lowy(
    args: &ReproduceArgs,
    spec: &ReproSpec,
    out_dir: &std::path::Path,
) -> anyhow::Result<()> {
    use dpfl_lab::reproduce::plan_privacy;
    let summary = out_dir.join("summary.csv");
    if !summary.is_file() {
        return Err(crate::usage(dpfl::Error::config(
            "--rewrite",
            format!(
                "{} is not a finished reproduction (no summary.csv); run it first",
                out_dir.display()
            ),
        )));
    }
    // As many trials as the finished run had (its summary's `trials` column).
    let text = std::fs::read_to_string(&summary).map_err(|source| dpfl::Error::Io {
        path: summary.clone(),
        source,
    })?;
    let trials = summary_trials(&text).ok_or_else(|| {
        dpfl::Error::data(
            summary.display().to_string(),
            "has no `trials` column with a whole number of trials",
        )
    })?;
    let spec = &ReproSpec {
        trials,
        ..spec.clone()
    };
    let start = std::time::Instant::now();
    let data = reproduce::prepare(spec, args.data_dir.as_deref())
        .map_err(|e| crate::name_file(args.spec.as_deref(), e))?;
    let rows = plan_privacy::plan_privacy(spec, &data)?;
    let path = out_dir.join("privacy.csv");
    dpfl_lab::output::atomic_write(&path, plan_privacy::privacy_csv(&rows)?.as_bytes())?;
    if crate::json() {
        crate::print_json(&serde_json::json!({
            "id": spec.id,
            "rows": rows.iter().map(|r| serde_json::json!({
                "figure": r.figure,
                "algorithm": r.algorithm,
                "M": r.m,
                "labelled_epsilon": r.labelled_epsilon,
                "certified_epsilon": r.certified_epsilon,
                "certified_epsilon_min": r.certified_epsilon_min,
                "epsilon_lower_bound": r.epsilon_lower_bound,
                "meets_label": r.meets_label(),
            })).collect::<Vec<_>>(),
            "files": [path],
        }));
        return Ok(());
    }
    println!(
        "{}: what each label delivers, from the plans of {} trials ({:.1} s)",
        spec.id,
        spec.trials,
        start.elapsed().as_secs_f64()
    );
    for r in &rows {
        println!(
            "  Fig. {} {} (M = {}): labelled ε = {} — certified ε {}{}",
            r.figure,
            r.algorithm,
            r.m,
            r.labelled_epsilon,
            plan_privacy::certificate_range(r),
            if r.meets_label() {
                ""
            } else {
                " (label NOT met)"
            }
        );
    }
    println!("wrote {}", path.display());
    Ok(())
}

/// The largest value of the `trials` column of a reproduction's `summary.csv`.
fn summary_trials(text: &str) -> Option<usize> {
    let mut lines = text.lines();
    // The column is the last (`write_outputs`), so a quoted label's commas do not move it.
    if lines.next()?.rsplit(',').next()?.trim() != "trials" {
        return None;
    }
    lines
        .filter_map(|l| l.rsplit(',').next()?.trim().parse::<usize>().ok())
        .max()
}

/// A divergence the spec does not expect fails the command (after the outputs are written).
fn check_diverged(spec: &ReproSpec, out: &reproduce::ReproOutput) -> anyhow::Result<()> {
    if !spec.expect_divergence
        && let Some(r) = out.rows.iter().find(|r| !r.mean.is_finite())
    {
        return Err(dpfl::Error::data(
            format!("{} (figure {}, {})", r.algorithm, r.figure, r.metric),
            format!(
                "is {} at epsilon {:?}: every step size of its grid diverged; narrow the grid, \
                 or set `expect_divergence = true` in the spec if this is expected",
                r.mean, r.epsilon
            ),
        )
        .into());
    }
    Ok(())
}

/// `dpfl reproduce shuffle-rates` (`dpfl_lab::reproduce::shuffle_rates`).
fn reproduce_shuffle_rates(args: &ReproduceArgs) -> anyhow::Result<()> {
    use dpfl_lab::reproduce::{shuffle_rates as sr, shuffle_rates_out as out};
    if args.spec.is_some() || args.resume {
        return Err(dpfl::Error::config(
            "--spec/--resume",
            "shuffle-rates is built in and runs in one go",
        )
        .into());
    }
    let mut plan = sr::Plan::new(args.quick);
    if let Some(t) = args.trials {
        if t == 0 {
            return Err(dpfl::Error::config("--trials", "must be at least 1").into());
        }
        plan.seeds = t;
    }
    let out_dir = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(if args.quick {
            "shuffle-rates-quick".to_string()
        } else {
            "shuffle-rates".to_string()
        })
    });
    prepare(args, &out_dir)?;
    let start = std::time::Instant::now();
    let bar = Progress::new(
        sr::job_count(&plan) as u64,
        args.quiet,
        "{spinner} {msg} [{bar:30}] {pos}/{len} runs ({elapsed}, eta {eta})",
        "runs",
    );
    bar.set_message("training");
    let (runs, refused) = sr::run(&plan, &|d, _| bar.set_position(d as u64))?;
    bar.finish();
    let bands = sr::bands(&runs);
    let slopes = sr::slopes(&bands);
    let noise = out::pvec_noise_rows(if args.quick { 1_000 } else { 100_000 })?;
    let mut files = out::write(&plan, &runs, &bands, &slopes, &noise, &refused, &out_dir)?;
    files.push(provenance(args, None, &plan, &out_dir)?);
    if crate::json() {
        crate::print_json(&serde_json::json!({
            "id": plan.id,
            "runs": runs.len(),
            "wall_seconds": start.elapsed().as_secs_f64(),
            "slopes": slopes,
            "first_below_local_dp": sr::first_beats_local(&bands),
            "not_run": refused,
            "files": files,
        }));
        return Ok(());
    }
    println!(
        "{}: {} runs in {:.1} s",
        plan.id,
        runs.len(),
        start.elapsed().as_secs_f64()
    );
    for (i, (a, fit, theory)) in slopes.iter().enumerate() {
        println!(
            "  {a}: fitted slope {fit:.3?}, design {}, Table 1 exponent {theory:?}",
            sr::DESIGN_EXPONENT.get(i).copied().unwrap_or("")
        );
    }
    for (a, n) in sr::first_beats_local(&bands) {
        println!(
            "  {a} below local DP: {}",
            n.map_or("at no n".into(), |n| format!("from n = {n}"))
        );
    }
    for r in &refused {
        println!("  not run: {r}");
    }
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(())
}
