//! The `dpfl` command-line tool.
//!
//! Exit codes: 0 success; 1 the run failed (I/O, data, numerical); 2 bad usage or config
//! (including a config or spec file named on the command line that cannot be read).
//! Errors are one line on standard error, each cause printed once.
//!
//! `--json` (global) makes every result-printing subcommand print one JSON object;
//! `dpfl completions SHELL` prints a shell's completions (clap_complete); `build.rs` embeds the
//! git revision that every output's provenance names.

// A binary has no outside: its modules' `pub` items are crate-visible by construction.
#![allow(unreachable_pub)]

mod account;
mod audit;
mod fmt;
mod init;
mod model;
mod net;
mod ops;
mod progress;
mod reproduce;
mod shard;
mod train;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "dpfl",
    version = concat!(env!("CARGO_PKG_VERSION"), " (git ", env!("DPFL_GIT_REVISION"), ")"),
    about = "Differentially private federated learning without a trusted server",
    arg_required_else_help = true
)]
struct Cli {
    /// Print the results as one JSON object on standard output (progress and notes go to
    /// standard error); account, calibrate, audit, predict and evaluate always do.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

static JSON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Whether `--json` was given.
pub fn json() -> bool {
    JSON.get().copied().unwrap_or(false)
}

/// Prints `v` as the command's one JSON result.
pub fn print_json(v: &serde_json::Value) {
    println!("{v}");
}

#[derive(Subcommand)]
enum Command {
    /// Train the algorithms of an experiment in the simulator (default: the bundled obesity demo).
    Train(train::TrainArgs),
    /// Inspect data sets and partitions; make a silo's shard from its own file.
    Data {
        #[command(subcommand)]
        command: train::DataCommand,
    },
    /// Write an experiment file for your own CSV (private defaults; silos from a column).
    Init(init::InitArgs),
    /// Check experiment files.
    Config {
        #[command(subcommand)]
        command: init::ConfigCommand,
    },
    /// Predict with a saved model (`dpfl train --out`, `federate --out`, `server --out`): one
    /// CSV row per record (with --proba each class's probability), to --out or standard output.
    Predict(model::PredictArgs),
    /// Score a saved model on a labelled file: error rate or RMSE, log-loss, AUC (two classes)
    /// and the confusion matrix; prints JSON on standard output and, without --json, a table
    /// on standard error.
    Evaluate(model::EvaluateArgs),
    /// Account the privacy of a composed, possibly sampled mechanism; prints one JSON object.
    Account(account::AccountArgs),
    /// Find the smallest noise multiplier reaching a target (epsilon, delta); prints JSON.
    Calibrate(account::CalibrateArgs),
    /// Run the federation server (network runtime).
    Server(net::ServerArgs),
    /// Run one silo: its data, noise and privacy ledger stay in this process.
    Silo(net::SiloArgs),
    /// Run the shuffler (shuffle mode): permutes sealed messages, cannot read them.
    Shuffler(net::ShufflerArgs),
    /// Make a development CA and participant certificates.
    Certs {
        #[command(subcommand)]
        command: net::CertsCommand,
    },
    /// Run an experiment as a federation of local processes and write summary.json.
    Federate(net::FederateArgs),
    /// Audit one algorithm of an experiment empirically from one training run (canaries in
    /// silo 0, Steinke-Nasr-Jagielski 2023); prints the epsilon lower bound as JSON.
    Audit(audit::AuditArgs),
    /// Regenerate a paper figure: summary.csv and SVG/PNG plots (lowy-mnist, lowy-insurance, lowy-obesity).
    Reproduce(reproduce::ReproduceArgs),
    /// Print a shell completion script (e.g. `dpfl completions bash > /etc/bash_completion.d/dpfl`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// The command tree with negative numbers accepted as values everywhere (`--rate -1` is a
/// value error from the command, not "unexpected argument '-1'").
fn command() -> clap::Command {
    fn negatives(c: clap::Command) -> clap::Command {
        // clap's own negative-number test misses exponents (`-1e-5`): a value-taking flag
        // takes the next word as its value whatever it starts with.
        let c = c.allow_negative_numbers(true).mut_args(|a| {
            if a.get_action().takes_values() {
                a.allow_hyphen_values(true)
            } else {
                a
            }
        });
        let names: Vec<String> = c
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        names
            .iter()
            .fold(c, |c, n| c.mut_subcommand(n.as_str(), negatives))
    }
    negatives(Cli::command())
}

/// `dpfl … | head`: standard output closed early. Rust's print macros panic on a broken pipe
/// (std ignores SIGPIPE so that socket writes return errors instead); a command-line tool stops
/// quietly instead, with the shell's code for a death by SIGPIPE (128 + 13). Only that panic is
/// taken over: every other panic keeps the default report.
fn quiet_on_broken_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info.payload_as_str().unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    quiet_on_broken_stdout();
    dpfl_lab::provenance::set_revision(env!("DPFL_GIT_REVISION"));
    // Usage errors are one line (the rest of clap's message is a usage hint), exit code 2.
    let parsed = command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // Bare `dpfl` (or `dpfl certs`): the help, on standard error, exit code 2.
            eprint!("{}", e.render());
            return ExitCode::from(2);
        }
        Err(e) => {
            // clap's message is the paragraph before the first blank line.
            let text = e.render().to_string();
            let msg: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            eprintln!("error: {}", msg.join(" ").trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    let _ = JSON.set(cli.json);
    let result = match cli.command {
        Command::Train(args) => train::train(&args),
        Command::Data { command } => train::data(&command),
        Command::Init(args) => init::init(&args),
        Command::Config { command } => init::config(&command),
        Command::Predict(args) => model::predict(&args),
        Command::Evaluate(args) => model::evaluate(&args),
        Command::Account(args) => account::account(&args),
        Command::Calibrate(args) => account::calibrate(&args),
        Command::Server(args) => net::server(&args),
        Command::Silo(args) => net::silo(&args),
        Command::Shuffler(args) => net::shuffler(&args),
        Command::Certs { command } => net::certs(&command),
        Command::Federate(args) => net::federate(&args),
        Command::Reproduce(args) => reproduce::reproduce(&args),
        Command::Audit(args) => audit::audit(&args),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut command(), "dpfl", &mut std::io::stdout());
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::from(exit_code(&e))
        }
    }
}

/// The error and its causes on one line, each cause once: a cause whose text its parent
/// already shows (e.g. an I/O error inside "path: error") is not repeated.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out.replace('\n', " ")
}

/// The directory of `file` (its parent; "." for a bare file name).
pub fn base_dir(file: &std::path::Path) -> &std::path::Path {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    }
}

/// A config or spec file named on the command line that cannot be read: a usage error.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Usage {}

/// Reads a config or spec file named by the command line; failing to is a usage error (2).
pub fn read_config(path: &std::path::Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).map_err(|e| usage(format!("{}: {e}", path.display())))
}

/// `e` naming `file` (once: a parse error already starts with it).
pub fn in_file(file: &std::path::Path, e: impl std::fmt::Display) -> String {
    let (f, e) = (file.display().to_string(), e.to_string());
    if e.starts_with(&f) {
        e
    } else {
        format!("{f}: {e}")
    }
}

/// Config errors found while running (a field checked against the data) name the file the
/// field is in; other errors pass unchanged.
pub fn name_file(file: Option<&std::path::Path>, e: dpfl::Error) -> anyhow::Error {
    match (file, &e) {
        (Some(f), err) if err.is_config() => {
            let text = in_file(f, &e);
            anyhow::Error::new(e).context(text)
        }
        _ => e.into(),
    }
}

/// A usage error (exit code 2): a config or spec file that cannot be read or parsed, an
/// output directory that cannot be used.
pub fn usage(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(Usage(e.to_string()))
}

/// 2 for usage and configuration errors (a bad flag, a config or spec file that cannot be
/// read or parsed, a bad config field, an unusable `--out`); 1 for a failed run (I/O, a
/// malformed data file, a numerical failure or divergence).
fn exit_code(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<net::ConfigError>().is_some() || e.downcast_ref::<Usage>().is_some() {
        return 2;
    }
    match e.downcast_ref::<dpfl::Error>() {
        Some(e) if e.is_config() => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every argument of every subcommand has help text (`--help` is useless otherwise).
    #[test]
    fn every_flag_has_help() {
        fn walk(c: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in c.get_arguments() {
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {}", a.get_id()));
                }
            }
            for s in c.get_subcommands() {
                if s.get_about().is_none() {
                    missing.push(format!("{path} {} (subcommand)", s.get_name()));
                }
                walk(s, &format!("{path} {}", s.get_name()), missing);
            }
        }
        let mut cmd = command();
        cmd.build();
        let mut missing = Vec::new();
        walk(&cmd, "dpfl", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }

    #[test]
    fn negative_numbers_are_values() {
        let m = command()
            .try_get_matches_from([
                "dpfl",
                "account",
                "--noise-multiplier",
                "-1",
                "--delta",
                "1e-5",
            ])
            .unwrap();
        let cli = Cli::from_arg_matches(&m).unwrap();
        assert!(matches!(cli.command, Command::Account(_)));
    }

    #[test]
    fn one_line_prints_each_cause_once() {
        let io = std::io::Error::from_raw_os_error(2);
        let e = anyhow::Error::new(dpfl::Error::Io {
            path: "/x/y.toml".into(),
            source: io,
        })
        .context("reading the experiment");
        let s = one_line(&e);
        assert_eq!(s.matches("os error 2").count(), 1, "{s}");
        assert!(s.starts_with("reading the experiment: /x/y.toml: "), "{s}");
    }
}
