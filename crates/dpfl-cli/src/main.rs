//! The `dpfl` command-line tool.
//!
//! Exit codes: 0 success; 1 the run failed (I/O, data, numerical); 2 bad usage or config.

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
    /// Regenerate a paper figure: summary.csv and SVG/PNG plots (lowy-mnist, lowy-insurance, lowy-obesity).
    Reproduce(reproduce::ReproduceArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Train(args) => train::train(&args),
        Command::Data { command } => train::data(&command),
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
    match e.downcast_ref::<dpfl::Error>() {
        Some(dpfl::Error::Config { .. }) | Some(dpfl::Error::Parse { .. }) => 2,
        _ => 1,
    }
}
