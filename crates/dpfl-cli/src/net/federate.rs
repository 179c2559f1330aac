//! `dpfl federate --local`: every trial as a federation of processes (from the files
//! `prepare.rs` writes), each run collected as `experiment::train_one` would return it, then
//! the same outputs as `dpfl train --out`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use dpfl_lab::experiment::{self, SingleRun};

use super::args::FederateArgs;
use super::prepare::{Prepared, budget_file, prepare_trial, print_commands};
use super::{ConfigError, load, net};

/// Starts `exe args`, its stdout and stderr into `log`. Its stdin is a pipe whose write end
/// only this process holds (the `Child` keeps it): when `dpfl federate` ends in any way, an
/// interrupt or SIGKILL included, the kernel closes it and the child, told by
/// [`super::PARENT_PIPE_ENV`] to watch it, exits (issue 31: no orphaned server or silos).
fn spawn(exe: &Path, args: &[&str], log: &Path) -> anyhow::Result<Child> {
    let f = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let f2 = f.try_clone()?;
    Command::new(exe)
        .args(args)
        .env(super::PARENT_PIPE_ENV, "1")
        .stdin(std::process::Stdio::piped())
        .stdout(f)
        .stderr(f2)
        .spawn()
        .with_context(|| format!("starting {} {}", exe.display(), args.join(" ")))
}

/// The child's exit status, or `None` if it is still running after `timeout`.
fn wait_timeout(
    child: &mut Child,
    timeout: Duration,
) -> anyhow::Result<Option<std::process::ExitStatus>> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if Instant::now() >= end {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs one federation (server, silos, optional shuffler) to the end.
fn run_federation(
    args: &FederateArgs,
    exe: &Path,
    logs: &Path,
    a: usize,
    f: &Prepared,
    shards: &[PathBuf],
    rounds: usize,
) -> anyhow::Result<()> {
    let cfg = f.config.to_string_lossy().to_string();
    let mut server = spawn(
        exe,
        // The server's own report would only repeat, without the data, what federate writes.
        &["server", "--config", &cfg, "--no-report"],
        &logs.join(format!("alg-{a}-server.log")),
    )?;
    let mut others: Vec<Child> = Vec::new();
    if f.shuffle {
        others.push(spawn(
            exe,
            &["shuffler", "--config", &cfg],
            &logs.join(format!("alg-{a}-shuffler.log")),
        )?);
    }
    for (i, s) in shards.iter().enumerate() {
        let id = i.to_string();
        let shard = s.to_string_lossy().to_string();
        let budget = budget_file(f.server_state.parent().unwrap_or(Path::new(".")), i);
        let budget = budget.to_string_lossy().to_string();
        let mut silo_args = vec![
            "silo", "--config", &cfg, "--id", &id, "--data", &shard, "--budget", &budget,
            // `prepare` removed the algorithm's old state: each silo's first start.
            "--fresh",
        ];
        if args.seeded {
            silo_args.push("--allow-seeded");
        }
        others.push(spawn(
            exe,
            &silo_args,
            &logs.join(format!("alg-{a}-silo-{i}.log")),
        )?);
    }
    let budget = Duration::from_millis(args.deadline_ms.saturating_mul(rounds as u64 + 2));
    let status = wait_timeout(&mut server, budget)?;
    for c in &mut others {
        if wait_timeout(c, Duration::from_secs(10))?.is_none() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    match status {
        Some(s) if s.success() => Ok(()),
        Some(s) => bail!(
            "the server of {} exited with {s}; see {}",
            f.label,
            logs.display()
        ),
        None => {
            let _ = server.kill();
            let _ = server.wait();
            bail!(
                "the server of {} did not finish in time; see {}",
                f.label,
                logs.display()
            );
        }
    }
}

/// What `experiment::train_one` returns, from a finished federation's files: the recorded
/// models evaluated on the trial's data (as the simulator evaluates them), the calibration,
/// and each silo's charged events.
fn collect_run(
    f: &Prepared,
    trial: &experiment::TrialData,
    eval_every: usize,
    start: Instant,
) -> anyhow::Result<SingleRun> {
    let fed = load(&f.config).map_err(net)?;
    let rounds = fed.rounds();
    let models_path = f.server_state.join("models.bin");
    let recorded: std::collections::BTreeMap<u32, Vec<f64>> =
        dpfl_net::models::read_models(&models_path)
            .map_err(net)?
            .into_iter()
            .collect();
    let model = trial.model.as_ref();
    let mut curve = Vec::new();
    for done in 1..=rounds {
        if !experiment::is_eval_round(done, eval_every, rounds) {
            continue;
        }
        let w = u32::try_from(done)
            .ok()
            .and_then(|r| recorded.get(&r))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: no model recorded for round {done}",
                    models_path.display()
                )
            })?;
        curve.push((
            done,
            dpfl::sim::train_loss(model, w, &trial.silos),
            dpfl::sim::test_metric(model, w, &trial.silos),
        ));
    }
    let model_path = f.server_state.join("model.bin");
    let w = dpfl_net::server::read_model(&model_path).map_err(net)?;
    // The last round is always recorded; the final model must be that record.
    let last = u32::try_from(rounds).ok().and_then(|r| recorded.get(&r));
    let same = last.is_some_and(|l| {
        l.len() == w.len() && l.iter().zip(&w).all(|(a, b)| a.to_bits() == b.to_bits())
    });
    if !same {
        bail!(
            "{} differs from the model {} recorded for the last round {rounds}",
            model_path.display(),
            models_path.display()
        );
    }
    let (final_train_loss, test_metric) = match curve.last() {
        Some(&(_, l, m)) => (l, m),
        None => (
            dpfl::sim::train_loss(model, &w, &trial.silos),
            dpfl::sim::test_metric(model, &w, &trial.silos),
        ),
    };
    let calibration = fed.plan.calibration.clone();
    // What each silo released: the events its ledger charged (one per round it answered),
    // in round order, as the simulator's `spent` lists them. The silos have exited; their
    // ledgers are read, never charged.
    let spent = (0..fed.silos())
        .map(|i| {
            let path = fed
                .silo_state_dir(i as u32)
                .join(dpfl_net::ledger::ROUND_LEDGER);
            dpfl_net::ledger::read_events(&path).map_err(net)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(SingleRun {
        curve,
        extended: Vec::new(),
        final_model: w,
        final_train_loss,
        test_metric,
        calibration,
        spent,
        wall_seconds: start.elapsed().as_secs_f64(),
        // Counted inside each silo process; a silo does not report it to the server.
        nonfinite_gradients: None,
    })
}

/// `dpfl federate --local`: every trial of the experiment, drawn exactly as
/// `experiment::run` draws them (same master generator, trial data and seeds), each
/// algorithm as a federation of processes under `DIR/trial-<t>/`; then `rounds.csv` and
/// `summary.json` as `dpfl train --out DIR` writes them. `--prepare-only` writes every
/// trial's files and prints the commands of every trial. An error before the first process
/// starts removes what this call wrote under `DIR` ([`remove_what_was_written`]).
pub fn federate(args: &FederateArgs) -> anyhow::Result<()> {
    if !args.local {
        return Err(anyhow::Error::new(ConfigError(
            "federate: only --local is supported; across machines, run dpfl server/silo/shuffler (docs/deployment.md)".into(),
        )));
    }
    let mut spec = crate::train::load_spec(Some(&args.config))?;
    if args.seed.is_some() {
        spec.seed = args.seed;
    }
    // The federation's private keys and every silo's shard are written under --out: never
    // into a shared temporary directory that outlives the run.
    let out = args.out.clone().ok_or_else(|| {
        crate::usage(
            "federate needs --out DIR: the federation's certificates, private keys and every \
             silo's data shard are written there (it is not cleaned up)",
        )
    })?;
    // Like train and reproduce: an unusable --out is refused before any certificate, shard
    // or process is made.
    let before = entries(&out);
    dpfl_lab::output::prepare_fresh_out_dir(&out, args.force).map_err(crate::usage)?;
    let mut launched = false;
    let result = federate_into(args, &spec, &out, &mut launched);
    if result.is_err() && !launched {
        remove_what_was_written(&out, before.as_ref());
    }
    result
}

/// The names in `dir`, or `None` if it is not a readable directory.
fn entries(dir: &Path) -> Option<std::collections::HashSet<std::ffi::OsString>> {
    let rd = std::fs::read_dir(dir).ok()?;
    Some(rd.filter_map(|e| e.ok().map(|e| e.file_name())).collect())
}

/// A federation refused before any process started (a plan its silos' budgets or a
/// closed form's range refuse, say) must not leave private keys and copies of the silos'
/// data behind: every entry of `out` that was not there before (`before`; `None`: `out` did
/// not exist) is removed, and `out` itself if this run made it. What cannot be removed is
/// named on stderr. After a process has started, the logs are kept for diagnosis.
fn remove_what_was_written(
    out: &Path,
    before: Option<&std::collections::HashSet<std::ffi::OsString>>,
) {
    let Ok(rd) = std::fs::read_dir(out) else {
        return;
    };
    for e in rd.flatten() {
        if before.is_some_and(|b| b.contains(&e.file_name())) {
            continue;
        }
        let path = e.path();
        let gone = if e.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        if let Err(err) = gone {
            eprintln!("warning: could not remove {}: {err}", path.display());
        }
    }
    if before.is_none() {
        let _ = std::fs::remove_dir(out);
    }
}

/// The body of [`federate`] once `out` is ready; `launched` is set when the first process
/// starts.
fn federate_into(
    args: &FederateArgs,
    spec: &experiment::ExperimentSpec,
    out: &Path,
    launched: &mut bool,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.config)
        .with_context(|| format!("reading {}", args.config.display()))?;
    let exp_copy = out.join("experiment.toml");
    std::fs::write(&exp_copy, text).with_context(|| format!("writing {}", exp_copy.display()))?;
    let certs = out.join("certs");
    let exe = std::env::current_exe().context("locating the dpfl binary")?;
    let eval_every = experiment::eval_every(spec);
    let mut master = experiment::master_rng(spec)?;
    let mut acc = experiment::RunAccumulator::new(spec);
    let mut certified = 0usize;
    for t in 0..spec.trials {
        let (trial, trial_seed) =
            experiment::next_trial(spec, args.data_dir.as_deref(), &mut master)?;
        // One dev PKI for every trial; a trial with more silos than any before (a partition
        // may in principle vary) gets the missing silo certificates.
        let n = trial.silos.len();
        if t == 0 {
            dpfl_net::certs::dev_pki(&certs, n).map_err(net)?;
            certified = n;
        }
        for i in certified..n {
            dpfl_net::certs::issue(&certs, &certs, &format!("silo-{i}"), &[], true).map_err(net)?;
        }
        certified = certified.max(n);
        let prep = prepare_trial(args, spec, out, t, trial, trial_seed)?;
        if args.prepare_only {
            print_commands(t, &prep);
            continue;
        }
        let logs = prep.dir.join("logs");
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        for (a, f) in prep.feds.iter().enumerate() {
            let start = Instant::now();
            *launched = true;
            run_federation(args, &exe, &logs, a, f, &prep.shards, spec.rounds)?;
            let run = collect_run(f, &prep.trial, eval_every, start)?;
            // With --json, stdout holds only the result object.
            if !crate::json() {
                println!(
                    "trial {t} {:<28} test metric {:.4}  train loss {:.4}",
                    f.label, run.test_metric, run.final_train_loss
                );
            }
            acc.add(spec, a, t, &prep.trial, &run);
        }
    }
    if args.prepare_only {
        return Ok(());
    }
    let output = acc.finish();
    if !crate::json() {
        crate::train::print_report(spec, &output);
    }
    // The results are written aside and moved in whole, as `train --out`'s: a failure
    // leaves no half of them beside the federation's files.
    let stage = dpfl_lab::output::Staging::new(out)?;
    let tmp = stage.path();
    experiment::write_outputs(&output, tmp)?;
    let prov = crate::train::provenance("federate", spec, Some(&args.config), &output)?;
    let prov_file = out.join(prov.write(tmp)?.file_name().unwrap_or_default());
    // The same curves and report as `dpfl train --out`, from the rounds the server recorded.
    let files: Vec<PathBuf> = experiment::report::write_report(spec, &output, tmp)
        .with_context(|| format!("writing the curves and report into {}", out.display()))?
        .iter()
        .map(|p| out.join(p.file_name().unwrap_or_default()))
        .collect();
    stage
        .commit()
        .with_context(|| format!("moving the results into {}", out.display()))?;
    if crate::json() {
        crate::print_json(&serde_json::json!({
            "experiment": spec.name,
            "summary": output.summary,
            "files": [out.join("rounds.csv"), out.join("summary.json"), prov_file],
            "provenance": prov,
        }));
        return Ok(());
    }
    println!(
        "wrote {} and {}",
        out.join("rounds.csv").display(),
        out.join("summary.json").display()
    );
    // On stderr: stdout is the federation's result (and a golden snapshot's).
    eprintln!(
        "wrote {}, {} and {}",
        files[0].display(),
        files[1].display(),
        files[2].display()
    );
    Ok(())
}
