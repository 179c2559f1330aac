//! `dpfl reproduce ID [--quick] [--out DIR] [--resume]`: regenerates a paper figure (see
//! `dpfl::reproduce`): writes `DIR/summary.csv` and `DIR/fig<F>.{svg,png}`. Finished runs are
//! checkpointed in `DIR/checkpoint.jsonl` (removed at the end); `--resume` continues an
//! interrupted reproduction from it.

use std::path::PathBuf;

use clap::Args;

use dpfl::reproduce::{self, ReproSpec, checkpoint::Checkpoint};

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
}

/// Checks the output directory before any work: a non-empty one needs --force, unless it
/// holds an interrupted run's checkpoint (then `Checkpoint::open` decides: --resume continues
/// it, and without --resume the run is refused so the finished work is not thrown away).
fn prepare(args: &ReproduceArgs, dir: &std::path::Path) -> anyhow::Result<()> {
    let interrupted = dir.join(reproduce::checkpoint::FILE_NAME).exists();
    dpfl::output::prepare_fresh_out_dir(dir, args.force || args.resume || interrupted)
        .map_err(crate::usage)
}

/// Writes `dir/provenance.json` for reproduction `args.id` run with `config`.
fn provenance(
    args: &ReproduceArgs,
    seed: Option<u64>,
    config: &impl serde::Serialize,
    dir: &std::path::Path,
) -> anyhow::Result<PathBuf> {
    let mut p = dpfl::provenance::Provenance::new(
        &format!(
            "reproduce {}{}",
            args.id,
            if args.quick { " --quick" } else { "" }
        ),
        seed,
        args.spec.as_deref(),
        config,
    )?;
    p.test_metric = None;
    Ok(p.write(dir)?)
}

pub fn reproduce(args: &ReproduceArgs) -> anyhow::Result<()> {
    if reproduce::normfedavg::IDS.contains(&args.id.as_str()) {
        return normfedavg(args);
    }
    if args.rounds.is_some() {
        return Err(crate::usage(dpfl::Error::config(
            "--rounds",
            "only the normfedavg-* reproductions take --rounds",
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
                .resolve_paths(dpfl::experiment::paths::base_of(p));
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
        println!("Caveat: {}", dpfl::experiment::DATA_DERIVED_L_CAVEAT);
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
    use dpfl::reproduce::plan_privacy;
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
    dpfl::output::atomic_write(&path, plan_privacy::privacy_csv(&rows)?.as_bytes())?;
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

/// DP-NormFedAvg's reproductions (`dpfl::reproduce::normfedavg`): finished runs in
/// `checkpoint.jsonl` (kept, so that `--trials N --resume` adds seeds), the run in flight in
/// `run-state.bin` after every round (`dpfl::reproduce::normfedavg_checkpoint`).
fn normfedavg(args: &ReproduceArgs) -> anyhow::Result<()> {
    use dpfl::reproduce::normfedavg_checkpoint::NormFedAvgCheckpoint;
    if args.spec.is_some() {
        return Err(crate::usage(dpfl::Error::config(
            "--spec",
            "not supported by the normfedavg reproductions",
        )));
    }
    let mut plan = reproduce::normfedavg::plan(&args.id, args.quick)?;
    if let Some(r) = args.rounds {
        if r == 0 {
            return Err(crate::usage(dpfl::Error::config(
                "--rounds",
                "must be >= 1",
            )));
        }
        plan.rounds = r;
    }
    if let Some(n) = args.trials {
        if n == 0 {
            return Err(crate::usage(dpfl::Error::config(
                "--trials",
                "must be >= 1",
            )));
        }
        plan.seeds = (1..=n as u64).collect();
    }
    let out_dir = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(if args.quick {
            format!("{}-quick", args.id)
        } else {
            args.id.clone()
        })
    });
    if args.rewrite {
        let (train, _) = reproduce::normfedavg::load_fmnist(args.data_dir.as_deref())?;
        let files = reproduce::normfedavg::rewrite(&plan, &train, &out_dir)?;
        let privacy = reproduce::normfedavg::plan_privacy(&plan, &train)?;
        print_privacy(&plan.id, &privacy);
        for f in files {
            println!("wrote {}", f.display());
        }
        return Ok(());
    }
    prepare(args, &out_dir)?;
    let (train, test) = reproduce::normfedavg::load_fmnist(args.data_dir.as_deref())?;
    let checkpoint = NormFedAvgCheckpoint::open(&out_dir, &plan.fingerprint()?, args.resume)?;
    if checkpoint.finished() > 0 && !args.quiet {
        eprintln!(
            "resuming: {} finished runs in {}",
            checkpoint.finished(),
            checkpoint.path().display()
        );
    }
    let start = std::time::Instant::now();
    let quiet = args.quiet;
    let rounds = plan.rounds;
    // Rounds trained by this process: a resumed reproduction's time per round counts these,
    // not the rounds restored from the checkpoint.
    let mut trained = 0usize;
    let out = reproduce::normfedavg::run_checkpointed(
        &plan,
        &train,
        &test,
        Some(&checkpoint),
        &mut |algorithm, seed, k| {
            trained += 1;
            // One line per round at most every 10 rounds and at the run's end: a multi-hour
            // run shows where it is without flooding a log.
            if !quiet && (k % 10 == 0 || k == rounds) {
                eprintln!(
                    "{algorithm}, seed {seed}: round {k}/{rounds} ({:.0} s)",
                    start.elapsed().as_secs_f64()
                );
            }
            Ok(())
        },
    )?;
    let mut files = reproduce::normfedavg::write_outputs(&out, &out_dir)?;
    let config = serde_json::json!({"id": args.id, "quick": args.quick, "seeds": plan.seeds, "rounds": plan.rounds});
    files.push(provenance(args, None, &config, &out_dir)?);
    if crate::json() {
        crate::print_json(&serde_json::json!({
            "id": plan.id,
            "wall_seconds": out.wall_seconds,
            "summary": out.summary.iter().map(|r| serde_json::json!({
                "algorithm": r.algorithm,
                "test_error_mean": r.mean,
                "test_error_std": r.std,
                "bits_per_coordinate": r.bits_per_coordinate,
            })).collect::<Vec<_>>(),
            "not_run": out.not_run,
            "privacy": out.privacy,
            "files": files,
        }));
        return Ok(());
    }
    let per_round = if trained == 0 {
        "no round trained: every run restored from the checkpoint".to_string()
    } else {
        format!(
            "{trained} rounds trained here, {:.2} s per round, evaluation included",
            out.wall_seconds / trained as f64
        )
    };
    println!(
        "{}: {} algorithms x {} seeds x {} rounds in {:.1} s ({per_round})",
        plan.id,
        plan.algorithms.len(),
        plan.seeds.len(),
        plan.rounds,
        out.wall_seconds,
    );
    for r in &out.summary {
        if r.seeds > 0 {
            println!(
                "  {}: {:.2} +- {:.2} % test error over {} seed(s), {:.0} bits/coordinate",
                r.algorithm,
                100.0 * r.mean,
                100.0 * r.std,
                r.seeds,
                r.bits_per_coordinate
            );
        }
        for why in &r.diverged {
            println!("  {}: {why}", r.algorithm);
        }
    }
    for (a, why) in &out.not_run {
        println!("  {a}: not run: {why}");
    }
    print_privacy(&plan.id, &out.privacy);
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(())
}

/// What each algorithm's label delivers (`dpfl::reproduce::privacy`).
fn print_privacy(id: &str, privacy: &[(String, reproduce::privacy::RunPrivacy)]) {
    println!("{id}: privacy (the run's delta per algorithm in privacy.csv)");
    for (a, p) in privacy {
        let lower = p.epsilon_lower_bound.map_or_else(String::new, |l| {
            format!("; true epsilon >= {}", reproduce::privacy::fmt_epsilon(l))
        });
        if p.labelled_epsilon.is_some() {
            println!("  {a}: {} at delta = {:.3e}{lower}", p.describe(), p.delta);
        } else {
            println!("  {a}: {}", p.describe());
        }
    }
}

/// `dpfl reproduce soteria-a9a | soteria-mnist` (`dpfl::reproduce::soteria`).
fn reproduce_soteria(args: &ReproduceArgs) -> anyhow::Result<()> {
    use dpfl::reproduce::soteria_checkpoint::{self, SoteriaCheckpoint};
    use dpfl::reproduce::{soteria, soteria_out};
    if args.spec.is_some() {
        return Err(
            dpfl::Error::config("--spec", "the SoteriaFL reproductions are built in").into(),
        );
    }
    let mut plan = soteria::Plan::new(&args.id, args.quick)?;
    if let Some(t) = args.trials {
        if t == 0 {
            return Err(dpfl::Error::config("--trials", "must be at least 1").into());
        }
        plan.seeds = t;
    }
    let out_dir = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(if args.quick {
            format!("{}-quick", args.id)
        } else {
            args.id.clone()
        })
    });
    let start = std::time::Instant::now();
    if args.rewrite {
        return rewrite_soteria(args, &plan, &out_dir);
    }
    prepare(args, &out_dir)?;
    let fed = soteria::load(&plan, args.data_dir.as_deref())?;
    // What each label delivers, from the plan alone (before any training).
    let privacy = soteria::privacy_table(&plan, &fed)?;
    let total = plan.settings.len() * soteria::ALGORITHMS.len() * plan.seeds;
    let bar = Progress::new(
        total as u64,
        args.quiet,
        "{spinner} {msg} [{bar:30}] {pos}/{len} runs ({elapsed}, eta {eta})",
        "runs",
    );
    bar.set_message("training");
    // Seed by seed, each finished run appended to the checkpoint (kept at the end, so that a
    // later `--trials N --resume` only adds seeds); the outputs are rewritten after each run,
    // so an interrupted reproduction leaves the figures of what it finished.
    let checkpoint = SoteriaCheckpoint::open(
        &out_dir.join(soteria_checkpoint::FILE_NAME),
        &plan,
        args.resume,
    )?;
    if checkpoint.finished() > 0 && !args.quiet {
        eprintln!(
            "resuming: {} finished runs in {}",
            checkpoint.finished(),
            checkpoint.path().display()
        );
    }
    let rows = soteria::run_checkpointed(
        &plan,
        &fed,
        &|d, _| bar.set_position(d as u64),
        Some(&checkpoint),
        &mut |finished, rows| {
            soteria_out::write(&plan, rows, &soteria::bands(rows), &privacy, &out_dir)?;
            if !args.quiet {
                eprintln!(
                    "{finished}/{total} runs finished after {:.1} s; outputs written to {}",
                    start.elapsed().as_secs_f64(),
                    out_dir.display()
                );
            }
            Ok(())
        },
    )?;
    bar.finish();
    let bands = soteria::bands(&rows);
    let mut files = soteria_out::write(&plan, &rows, &bands, &privacy, &out_dir)?;
    files.push(provenance(args, None, &plan, &out_dir)?);
    print_soteria(&plan, &bands, &privacy, files, total, start)
}

/// `--rewrite`: the outputs of the finished reproduction in `out_dir` from its `curves.csv`
/// (kept as it is), with the privacy columns; the plan and data give the certificates.
fn rewrite_soteria(
    args: &ReproduceArgs,
    plan: &reproduce::soteria::Plan,
    out_dir: &std::path::Path,
) -> anyhow::Result<()> {
    use dpfl::reproduce::{soteria, soteria_out};
    let start = std::time::Instant::now();
    let rows = soteria_out::read_curves(&out_dir.join("curves.csv"))?;
    let seeds = rows.iter().map(|r| r.seed + 1).max().unwrap_or(0);
    let plan = soteria::Plan {
        seeds,
        ..plan.clone()
    };
    let fed = soteria::load(&plan, args.data_dir.as_deref())?;
    let privacy = soteria::privacy_table(&plan, &fed)?;
    let bands = soteria::bands(&rows);
    let files = soteria_out::write(&plan, &rows, &bands, &privacy, out_dir)?;
    let total = rows
        .iter()
        .map(|r| (r.epsilon.to_bits(), &r.algorithm, r.seed))
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    print_soteria(&plan, &bands, &privacy, files, total, start)
}

/// The final table of a SoteriaFL reproduction, with each label's certificate.
fn print_soteria(
    plan: &reproduce::soteria::Plan,
    bands: &[reproduce::soteria::BandRow],
    privacy: &[reproduce::soteria::PrivacyRow],
    files: Vec<PathBuf>,
    total: usize,
    start: std::time::Instant,
) -> anyhow::Result<()> {
    use dpfl::reproduce::soteria;
    let last: Vec<&soteria::BandRow> = bands
        .iter()
        .filter(|b| {
            plan.settings
                .iter()
                .any(|s| s.0 == b.epsilon && s.1 == b.round)
        })
        .collect();
    if crate::json() {
        crate::print_json(&serde_json::json!({
            "id": plan.id,
            "runs": total,
            "seeds": plan.seeds,
            "wall_seconds": start.elapsed().as_secs_f64(),
            "final": last,
            "privacy": privacy,
            "files": files,
        }));
        return Ok(());
    }
    println!(
        "{}: {} runs ({} seeds) in {:.1} s",
        plan.id,
        total,
        plan.seeds,
        start.elapsed().as_secs_f64()
    );
    println!(
        "{:>6} {:<16} {:>10} {:>10} {:>10}  privacy (delta = {})",
        "eps", "algorithm", "utility", "loss", "test acc", plan.delta
    );
    for b in last {
        let what = soteria::privacy_of(privacy, b.epsilon, &b.algorithm)
            .map_or_else(String::new, |p| p.describe());
        println!(
            "{:>6} {:<16} {:>10.4} {:>10.4} {:>10.4}  {what}",
            b.epsilon, b.algorithm, b.utility_mean, b.train_loss_mean, b.test_accuracy_mean
        );
    }
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(())
}

/// `dpfl reproduce shuffle-rates` (`dpfl::reproduce::shuffle_rates`).
fn reproduce_shuffle_rates(args: &ReproduceArgs) -> anyhow::Result<()> {
    use dpfl::reproduce::{shuffle_rates as sr, shuffle_rates_out as out};
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
        (sr::ALGORITHMS.len() * plan.ns.len() * plan.seeds) as u64,
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
    for (a, fit, theory) in &slopes {
        println!("  {a}: fitted slope {fit:.3?}, Table 1 exponent {theory:?}");
    }
    for r in &refused {
        println!("  not run: {r}");
    }
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(())
}
