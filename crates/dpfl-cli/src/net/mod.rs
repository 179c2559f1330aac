//! `dpfl server`, `dpfl silo`, `dpfl shuffler`, `dpfl certs` and `dpfl federate`: argument
//! parsing and process orchestration for the network runtime (crate `dpfl-net`).
//!
//! One job a file: `args.rs` the clap arguments, `roles.rs` the one-process subcommands
//! (server, silo, shuffler, certs), `prepare.rs` a trial's shards, federation and budget files
//! for `dpfl federate`, `federate.rs` starting those processes and collecting their results;
//! this file the error mapping and helpers they share.

mod args;
mod federate;
mod prepare;
mod roles;

use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use dpfl::experiment;
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
    Federation::load_with(path, Some(&planner))
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
