//! The `dpfl` command-line tool.
//!
//! Exit codes: 0 success; 1 the run failed (I/O, data, numerical); 2 bad usage or config.

mod account;
mod net;
mod reproduce;
mod train;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "dpfl",
    version,
    about = "Differentially private federated learning without a trusted server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train the algorithms of an experiment in the simulator (default: the bundled obesity demo).
    Train(train::TrainArgs),
    /// Inspect data sets and partitions.
    Data {
        #[command(subcommand)]
        command: train::DataCommand,
    },
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
    /// Regenerate a paper figure: summary.csv and SVG/PNG plots (lowy-mnist, lowy-insurance, lowy-obesity).
    Reproduce(reproduce::ReproduceArgs),
}

fn main() -> ExitCode {
    // Usage errors are one line (the rest of clap's message is a usage hint), exit code 2.
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => e.exit(),
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
    let result = match cli.command {
        Command::Train(args) => train::train(&args),
        Command::Data { command } => train::data(&command),
        Command::Account(args) => account::account(&args),
        Command::Calibrate(args) => account::calibrate(&args),
        Command::Server(args) => net::server(&args),
        Command::Silo(args) => net::silo(&args),
        Command::Shuffler(args) => net::shuffler(&args),
        Command::Certs { command } => net::certs(&command),
        Command::Federate(args) => net::federate(&args),
        Command::Reproduce(args) => reproduce::reproduce(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit_code(&e))
        }
    }
}

/// 2 for configuration and usage errors, 1 otherwise.
fn exit_code(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<net::ConfigError>().is_some() {
        return 2;
    }
    match e.downcast_ref::<dpfl::Error>() {
        Some(dpfl::Error::Config { .. }) | Some(dpfl::Error::Parse { .. }) => 2,
        _ => 1,
    }
}
