//! Process and federation-file helpers shared by the tests that run `dpfl` processes
//! (`net.rs`, `net_wings.rs`, `faults.rs`, `ops.rs`). Each test binary compiles its own copy
//! and uses a subset, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use dpfl_lab::experiment::{self, ExperimentSpec};

/// The `dpfl` binary under test, logging at `warn`.
pub(crate) fn command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dpfl"));
    c.env("DPFL_LOG", "warn");
    c
}

/// `dpfl ARGS` to its end, logging at `warn` (stdout and stderr captured).
pub(crate) fn dpfl(args: &[&str]) -> Output {
    command().args(args).output().expect("run dpfl")
}

/// `dpfl ARGS` to its end in `dir`, logging at `warn` (stdout and stderr captured).
pub(crate) fn dpfl_in(dir: &Path, args: &[&str]) -> Output {
    command()
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run dpfl")
}

/// The stdout of a run that must succeed (its exit code and stderr otherwise).
pub(crate) fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Starts `dpfl ARGS` in the background, logging at `info` into `log` (stdout and stderr).
pub(crate) fn spawn(args: &[&str], log: &Path) -> Child {
    let f = std::fs::File::create(log).unwrap();
    Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args(args)
        .env("DPFL_LOG", "info")
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn dpfl")
}

/// Borrows owned arguments as the `&[&str]` [`dpfl`] and [`spawn`] take.
pub(crate) fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The bit patterns of `v`, for bit-for-bit comparisons with readable failures.
pub(crate) fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A port on 127.0.0.1 that was free a moment ago (nothing listens on it after the call).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Polls `f` every 20 ms until it holds; fails the test after `limit`, naming `what`.
pub(crate) fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `c` to exit; kills and reaps it and fails the test (a hang) after `limit`.
pub(crate) fn wait_exit(c: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let end = Instant::now() + limit;
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > end {
            let _ = c.kill();
            let _ = c.wait();
            panic!("process did not exit within {limit:?} (a hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The arguments `federate --config EXP --local --prepare-only [EXTRA] --out OUT`.
pub(crate) fn prepare_only_args<'a>(
    exp: &'a Path,
    out: &'a Path,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "federate",
        "--config",
        exp.to_str().unwrap(),
        "--local",
        "--prepare-only",
        // Tests compare with the simulator bit for bit (issue 31 item 7: never by default).
        "--seeded",
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    args
}

/// `dpfl federate --config EXP --local --prepare-only [EXTRA] --out OUT`, which must succeed;
/// returns trial 0's directory `OUT/trial-0`.
pub(crate) fn prepare_only(exp: &Path, out: &Path, extra: &[&str]) -> PathBuf {
    let o = dpfl(&prepare_only_args(exp, out, extra));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out.join("trial-0")
}

/// `dpfl federate --prepare-only` of `exp` in `dir/run` (with `extra` arguments), then
/// `extra_server` lines replacing their keys' lines in the federation file of algorithm 0
/// (see [`set_keys`]); returns (that federation file, trial 0's shard paths).
pub(crate) fn prepare(
    dir: &Path,
    exp: &Path,
    extra: &[&str],
    extra_server: &str,
) -> (PathBuf, Vec<PathBuf>) {
    let trial = prepare_only(exp, &dir.join("run"), extra);
    let cfg = trial.join("federation-0.toml");
    set_keys(&cfg, extra_server);
    (cfg, shards(&trial))
}

/// Replaces, in federation file `cfg`, the line of each key that `lines` sets (`key = value`
/// per line) by that line. The federation file `dpfl federate` writes names every server key,
/// so a missing key fails the test.
pub(crate) fn set_keys(cfg: &Path, lines: &str) {
    let mut text = std::fs::read_to_string(cfg).unwrap();
    for line in lines.lines() {
        let key = line.split('=').next().unwrap().trim();
        let old = text
            .lines()
            .find(|l| l.split('=').next().unwrap().trim() == key)
            .unwrap_or_else(|| panic!("no {key} in the federation file"))
            .to_string();
        text = text.replace(&old, line);
    }
    std::fs::write(cfg, text).unwrap();
}

/// The shards `dpfl federate` wrote into a trial directory, in silo order.
pub(crate) fn shards(trial_dir: &Path) -> Vec<PathBuf> {
    let silos = std::fs::read_dir(trial_dir.join("data")).unwrap().count();
    (0..silos)
        .map(|i| trial_dir.join(format!("data/silo-{i}.shard")))
        .collect()
}

/// `dpfl silo` arguments for silo `id` of a federation `dpfl federate --prepare-only` wrote
/// (file `cfg`), with the budget file it wrote beside algorithm 0's state. `--fresh` comes
/// last when the silo's state directory holds no ledger yet (its first start), as its operator
/// would give it; a restart resumes.
pub(crate) fn silo_args(cfg: &Path, id: usize, shard: &Path) -> Vec<String> {
    let alg = cfg.parent().unwrap().join("alg-0");
    let budget = alg.join(format!("budget-silo-{id}.toml"));
    let mut args: Vec<String> = [
        "silo",
        "--config",
        cfg.to_str().unwrap(),
        "--id",
        &id.to_string(),
        "--data",
        shard.to_str().unwrap(),
        "--budget",
        budget.to_str().unwrap(),
        "--allow-seeded",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let state = alg.join(format!("silo-{id}"));
    if !state.join("ledger.0").exists() && !state.join("ledger.1").exists() {
        args.push("--fresh".into());
    }
    args
}

/// Starts silo `id` of federation file `cfg` (see [`silo_args`]), logging into `log`.
pub(crate) fn spawn_silo(cfg: &Path, id: usize, shard: &Path, log: &Path) -> Child {
    spawn(&strs(&silo_args(cfg, id, shard)), log)
}

/// A federation started by [`start`]: its file, shards, server and silo processes.
pub(crate) struct Started {
    pub(crate) cfg: PathBuf,
    pub(crate) shards: Vec<PathBuf>,
    pub(crate) server: Child,
    pub(crate) silos: Vec<Child>,
}

/// [`prepare`], then the server and one silo per shard, logging into `dir/server.log` and
/// `dir/silo-<i>.log`.
pub(crate) fn start(dir: &Path, exp: &Path, extra: &[&str], extra_server: &str) -> Started {
    let (cfg, shards) = prepare(dir, exp, extra, extra_server);
    let c = cfg.to_str().unwrap();
    let server = spawn(&["server", "--config", c], &dir.join("server.log"));
    let silos = shards
        .iter()
        .enumerate()
        .map(|(i, s)| spawn_silo(&cfg, i, s, &dir.join(format!("silo-{i}.log"))))
        .collect();
    Started {
        cfg,
        shards,
        server,
        silos,
    }
}

/// M_r of every aggregated round in an algorithm's state directory (`alg-<a>`), from the
/// server's log (a withheld round's line is skipped: it was run again after a restart).
pub(crate) fn participants(alg: &Path) -> Vec<u64> {
    std::fs::read_to_string(alg.join("server/rounds.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["outcome"] != "withheld")
        .map(|v| v["participants"].as_u64().unwrap())
        .collect()
}

/// The simulator's run of algorithm 0 of trial 0 of `exp`, evaluated every `eval_every`
/// rounds, with the trial it ran on.
pub(crate) fn simulated_run(
    exp: &Path,
    eval_every: usize,
) -> (experiment::TrialData, experiment::SingleRun) {
    let spec = ExperimentSpec::from_file(exp).unwrap();
    let mut master = experiment::master_rng(&spec).unwrap();
    let (trial, seed) = experiment::next_trial(&spec, None, &mut master).unwrap();
    let run = experiment::train_one(
        &spec,
        &spec.algorithms[0].spec,
        &trial,
        experiment::algorithm_seed(seed, 0),
        eval_every,
        |_| {},
    )
    .unwrap();
    (trial, run)
}

/// The server checkpoint in an algorithm's state directory (`alg-<a>`), if one was written.
pub(crate) fn checkpoint(alg: &Path) -> Option<dpfl_net::checkpoint::Checkpoint> {
    let path = alg.join("server/checkpoint");
    let bytes = dpfl_net::store::Cell::read(&path).ok().flatten()?;
    dpfl_net::checkpoint::Checkpoint::decode(&path, &bytes).ok()
}

/// The first round the server has not aggregated yet (0 before its first checkpoint).
pub(crate) fn checkpoint_round(alg: &Path) -> u32 {
    checkpoint(alg).map_or(0, |c| c.next_round.get())
}

/// The rounds silo `id`'s ledger charged, sorted (a round charged twice would show twice).
pub(crate) fn charged_rounds(alg: &Path, id: usize) -> Vec<u64> {
    let mut charged =
        dpfl_net::ledger::charged_rounds(&alg.join(format!("silo-{id}/ledger"))).unwrap();
    charged.sort_unstable();
    charged
}

/// Starts the shuffler of federation file `cfg`, logging into `dir/shuffler.log`.
pub(crate) fn spawn_shuffler(cfg: &Path, dir: &Path) -> Child {
    spawn(
        &["shuffler", "--config", cfg.to_str().unwrap()],
        &dir.join("shuffler.log"),
    )
}
