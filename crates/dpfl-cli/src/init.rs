//! `dpfl init` (an experiment file for one's own CSV), `dpfl config check` (validate an
//! experiment without training) and `dpfl config reference` (the generated field reference).

use std::path::PathBuf;

use clap::{Args, Subcommand};

#[derive(Args)]
pub struct InitArgs {
    /// The CSV file (header row first) to train on.
    #[arg(long)]
    data: PathBuf,
    /// The column to predict.
    #[arg(long)]
    label: String,
    /// The column naming each row's silo (e.g. hospital); without it, 4 random silos.
    #[arg(long)]
    silo_column: Option<String>,
    /// Write the experiment here instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Overwrite --out if it exists.
    #[arg(long)]
    force: bool,
}

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// Check an experiment file (fields, data, model, calibration) without training.
    Check {
        /// The experiment TOML file.
        path: PathBuf,
        /// Directory holding the larger data sets (else $DPFL_DATA, else the bundled data).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Print the experiment file reference (every table and field: type, default, allowed
    /// values, meaning), generated from the parser's own types; with --json, its JSON Schema.
    Reference {
        /// Write it here (e.g. docs/config-reference.md) instead of standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

pub fn init(args: &InitArgs) -> anyhow::Result<()> {
    // The data path is written relative to the experiment file's directory when it can be.
    let data_for_file = match &args.out {
        Some(out) => relative_to(&args.data, crate::base_dir(out)),
        None => args.data.clone(),
    };
    let init = dpfl_lab::experiment::init::init_with_notes(
        &args.data,
        &args.label,
        args.silo_column.as_deref(),
    )?;
    for note in &init.notes {
        eprintln!("note: {note}");
    }
    let text = init.text.replace(
        &format!("path = {:?}", args.data.display().to_string()),
        &format!("path = {:?}", data_for_file.display().to_string()),
    );
    match &args.out {
        None => print!("{text}"),
        Some(out) => {
            if out.exists() && !args.force {
                return Err(crate::usage(format!(
                    "{} exists; pass --force to overwrite it",
                    out.display()
                )));
            }
            dpfl_lab::output::atomic_write(out, text.as_bytes())?;
            eprintln!(
                "wrote {}; check it with `dpfl config check {}`",
                out.display(),
                out.display()
            );
        }
    }
    Ok(())
}

/// `path` relative to `dir` when both are relative or both absolute and `path` lies under
/// `dir`; else `path` made absolute (so the experiment file finds its data from anywhere).
fn relative_to(path: &std::path::Path, dir: &std::path::Path) -> PathBuf {
    let abs = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (p, d) = (abs(path), abs(dir));
    p.strip_prefix(&d).map(PathBuf::from).unwrap_or(p)
}

pub fn config(cmd: &ConfigCommand) -> anyhow::Result<()> {
    match cmd {
        ConfigCommand::Check { path, data_dir } => {
            let spec = crate::train::load_spec(Some(path))?;
            let report = dpfl_lab::experiment::init::check_experiment(&spec, data_dir.as_deref())
                .map_err(|e| crate::name_file(Some(path), e))?;
            if crate::json() {
                crate::print_json(&serde_json::json!({
                    "file": path, "ok": true, "report": report.to_string(),
                }));
                return Ok(());
            }
            println!("{report}");
            println!("{}: ok", path.display());
            Ok(())
        }
        ConfigCommand::Reference { out } => {
            use dpfl_lab::experiment::reference;
            let text = if crate::json() {
                let mut t = serde_json::to_string_pretty(&reference::json_schema())?;
                t.push('\n');
                t
            } else {
                reference::markdown()
            };
            match out {
                None => print!("{text}"),
                Some(out) => {
                    dpfl_lab::output::atomic_write(out, text.as_bytes())?;
                    eprintln!("wrote {}", out.display());
                }
            }
            Ok(())
        }
    }
}
