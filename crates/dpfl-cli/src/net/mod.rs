//! `dpfl server`, `dpfl silo`, `dpfl shuffler`, `dpfl certs` and `dpfl federate`: argument
//! parsing and process orchestration for the network runtime (crate `dpfl-net`).
//!
//! One job a file: `args.rs` the clap arguments, `roles.rs` the one-process subcommands
//! (server, silo, shuffler, certs), `prepare.rs` a trial's shards, federation and budget files
//! for `dpfl federate`, `federate.rs` starting those processes and collecting their results;
//! this file the error mapping and helpers they share.
//!
//! A process `dpfl federate` started watches a stdin pipe from it and exits when the pipe
//! closes (no orphan outlives its federation); a federation file whose `[plan]` is of another
//! algorithm than the one its `experiment` / `algorithm` name is refused.

mod args;
mod federate;
mod prepare;
mod roles;

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use dpfl_lab::experiment;
use dpfl_net::config::PublicFacts;
use dpfl_net::{Federation, NetError};

pub use args::{CertsCommand, FederateArgs, ServerArgs, ShufflerArgs, SiloArgs};
pub use federate::federate;
pub use roles::{certs, server, shuffler, silo};

/// Config errors of the network runtime map to exit code 2 like the simulator's.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}

/// A network error as the binary reports it: configuration errors exit with 2.
fn net(e: NetError) -> anyhow::Error {
    if e.is_config() {
        anyhow::Error::new(ConfigError(e.to_string()))
    } else {
        anyhow::Error::new(e)
    }
}

/// Errors loading a config file named on the command line (a federation file, the
/// experiment it names, a silo's budget file): one that cannot be read is a usage error (2), as
/// under `dpfl train`; the rest map as [`net`] maps them.
fn config_file(e: NetError) -> anyhow::Error {
    match e {
        NetError::Io { .. } | NetError::Dpfl(dpfl::Error::Io { .. }) => crate::usage(e),
        e => net(e),
    }
}

/// Set by `dpfl federate` in the environment of the processes it starts: their stdin is a
/// pipe from it, and its end (EOF) means `federate` is gone.
pub(crate) const PARENT_PIPE_ENV: &str = "DPFL_EXIT_WITH_PARENT";

/// In a process `dpfl federate` started ([`PARENT_PIPE_ENV`]), exits as soon as its stdin
/// reaches end of file: the parent has ended, however it ended, and nobody would collect
/// this process's results. A silo's ledger and the server's checkpoint are durable before
/// each message leaves, so this exit is as safe as the crash they are built to survive.
fn exit_with_parent(role: &'static str) {
    if std::env::var_os(PARENT_PIPE_ENV).is_none() {
        return;
    }
    std::thread::spawn(move || {
        use std::io::Read;
        let mut buf = [0u8; 64];
        let mut stdin = std::io::stdin();
        // Nothing is ever written: any read that returns is the parent's end.
        while let Ok(n) = stdin.read(&mut buf) {
            if n == 0 {
                break;
            }
        }
        eprintln!("{role}: dpfl federate, which started this process, has ended: exiting");
        std::process::exit(1);
    });
}

/// Logs to stderr, filtered by `DPFL_LOG` (default `info`).
fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DPFL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// The async runtime every network subcommand runs on (two worker threads).
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// A `--connect-timeout` value.
fn timeout(secs: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(secs).map_err(|_| {
        anyhow::Error::new(ConfigError(format!(
            "--connect-timeout: expected a non-negative number of seconds, got {secs}"
        )))
    })
}

/// Loads a federation file; one without a `[plan]` gets it from the experiment it names.
fn load(path: &Path) -> Result<Federation, NetError> {
    let fed = Federation::load_with(path, Some(&planner))?;
    check_named_algorithm(path, &fed)?;
    Ok(fed)
}

/// With a `[plan]`, the plan is what runs, not the file's `experiment` and `algorithm`: a file
/// where they name another algorithm than the plan's is refused (issue 31), so that nobody
/// reads one algorithm in the file and trains another. An experiment this process cannot read
/// (a deployment's file may name one only the coordinator holds) leaves the plan alone.
fn check_named_algorithm(path: &Path, fed: &Federation) -> Result<(), NetError> {
    let Some(exp) = &fed.config.experiment else {
        return Ok(());
    };
    let file = fed.path(exp);
    let Some(spec) = std::fs::read_to_string(&file)
        .ok()
        .and_then(|text| experiment::ExperimentSpec::from_toml_at(&text, &file).ok())
    else {
        return Ok(());
    };
    let a = fed.config.algorithm;
    // JSON values: fields the files do not carry compare equal.
    let planned = serde_json::to_value(&fed.algorithm).ok();
    let same = |e: &experiment::AlgorithmEntry| serde_json::to_value(&e.spec).ok() == planned;
    let plan = match spec.algorithms.iter().position(same) {
        Some(j) => format!("algorithms[{j}] `{}`", spec.algorithms[j].label()),
        None => format!("`{}`", fed.algorithm.default_label()),
    };
    let why = match spec.algorithms.get(a) {
        None => format!(
            "= {a}, but {} has {} algorithm(s); the file's [plan] trains {plan}",
            exp.display(),
            spec.algorithms.len()
        ),
        Some(e) if !same(e) => {
            format!(
                "= {a} names `{}` in {}, but the file's [plan] trains {plan} (the [plan] is \
                 what runs)",
                e.label(),
                exp.display()
            )
        }
        Some(_) => return Ok(()),
    };
    Err(NetError::config(
        format!("{}: algorithm", path.display()),
        format!(
            "{why}: write the file again with `dpfl federate --prepare-only`, or make \
             `experiment` and `algorithm` name the planned algorithm"
        ),
    ))
}

/// The plan of a hand-written federation file: its experiment, checked and calibrated once.
fn planner(
    experiment: &Path,
    algorithm: usize,
    public: &PublicFacts,
) -> dpfl::Result<dpfl::plan::Plan> {
    experiment::plan_from_file(
        experiment,
        algorithm,
        public.features,
        public.classes,
        &public.records,
        public.lipschitz,
    )
}
