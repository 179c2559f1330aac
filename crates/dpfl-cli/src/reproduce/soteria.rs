//! `dpfl reproduce soteria-a9a | soteria-mnist`: SoteriaFL's reproductions
//! (`dpfl_lab::reproduce::soteria`).

use std::path::PathBuf;

use dpfl_lab::reproduce;

use super::{ReproduceArgs, prepare, provenance};
use crate::progress::Progress;

/// `dpfl reproduce soteria-a9a | soteria-mnist` (`dpfl_lab::reproduce::soteria`).
pub(super) fn reproduce_soteria(args: &ReproduceArgs) -> anyhow::Result<()> {
    use dpfl_lab::reproduce::soteria_checkpoint::{self, SoteriaCheckpoint};
    use dpfl_lab::reproduce::{soteria, soteria_out};
    if args.spec.is_some() {
        return Err(
            dpfl::Error::config("--spec", "the SoteriaFL reproductions are built in").into(),
        );
    }
    let plan = soteria::Plan::new(&args.id, args.quick)?;
    let mut plan = options(args, plan).map_err(crate::usage)?;
    if let Some(t) = args.trials {
        if t == 0 {
            return Err(dpfl::Error::config("--trials", "must be at least 1").into());
        }
        plan.seeds = t;
    }
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join(plan.out_name()));
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

/// The plan with `--calibration`, `--clipping`, `--epsilons` and `--sgd-batch` applied.
fn options(
    args: &ReproduceArgs,
    plan: reproduce::soteria::Plan,
) -> dpfl::Result<reproduce::soteria::Plan> {
    use dpfl::algo::soteria::{Clipping, NoiseCalibration};
    // clap has checked the values.
    let calibration = match args.calibration.as_deref() {
        Some("accountant") => NoiseCalibration::Accountant,
        Some("none") => NoiseCalibration::None,
        _ => NoiseCalibration::PaperCode,
    };
    let clipping = match args.clipping.as_deref() {
        Some("aggregate") => Clipping::AggregateNoGuarantee,
        _ => Clipping::PerRecord,
    };
    let mut plan = plan.calibrated(calibration, clipping)?;
    if let Some(e) = &args.epsilons {
        plan.keep_epsilons(e)?;
    }
    if let Some(b) = args.sgd_batch {
        plan.with_sgd_batch(b)?;
    }
    Ok(plan)
}

/// `--rewrite`: the outputs of the finished reproduction in `out_dir` from its `curves.csv`
/// (kept as it is), with the privacy columns; the plan and data give the certificates.
fn rewrite_soteria(
    args: &ReproduceArgs,
    plan: &reproduce::soteria::Plan,
    out_dir: &std::path::Path,
) -> anyhow::Result<()> {
    use dpfl_lab::reproduce::{soteria, soteria_out};
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
    use dpfl_lab::reproduce::soteria;
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
