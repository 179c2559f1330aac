//! `dpfl reproduce normfedavg-*`: DP-NormFedAvg's reproductions (`dpfl_lab::reproduce::normfedavg`).

use std::path::PathBuf;

use dpfl_lab::reproduce;

use super::{ReproduceArgs, prepare, provenance};

/// DP-NormFedAvg's reproductions (`dpfl_lab::reproduce::normfedavg`): finished runs in
/// `checkpoint.jsonl` (kept, so that `--trials N --resume` adds seeds), the run in flight in
/// `run-state.bin` after every round (`dpfl_lab::reproduce::normfedavg_checkpoint`).
pub(super) fn normfedavg(args: &ReproduceArgs) -> anyhow::Result<()> {
    use dpfl_lab::reproduce::normfedavg_checkpoint::NormFedAvgCheckpoint;
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
    reproduce::normfedavg_local::set_local_training(&mut plan, args.momentum, args.step_decay)
        .map_err(crate::usage)?;
    if let Some(a) = &args.algorithms {
        reproduce::normfedavg_local::keep_algorithms(&mut plan, a).map_err(crate::usage)?;
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
    let mut config = serde_json::json!({"id": args.id, "quick": args.quick, "seeds": plan.seeds, "rounds": plan.rounds});
    // Only when set, so a default run's provenance keeps its old keys.
    if let Some(m) = args.momentum {
        config["momentum"] = m.into();
    }
    if let Some(q) = args.step_decay {
        config["step_decay"] = q.into();
    }
    if let Some(a) = &args.algorithms {
        config["algorithms"] = a.clone().into();
    }
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

/// What each algorithm's label delivers (`dpfl_lab::reproduce::privacy`).
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
