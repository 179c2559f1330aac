//! `dpfl reproduce ID [--quick] [--out DIR]`: regenerates a paper figure (see
//! `dpfl::reproduce`): writes `DIR/summary.csv` and `DIR/fig<F>.{svg,png}`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use dpfl::reproduce::{self, ReproSpec};

#[derive(Args)]
pub struct ReproduceArgs {
    /// lowy-mnist (Fig. 4, 7), lowy-insurance (Fig. 5, 8, 9) or lowy-obesity (Fig. 6).
    id: String,
    /// The reduced run of the spec's [quick] table (under a minute).
    #[arg(long)]
    quick: bool,
    /// Output directory (default: results/ID, or results/ID-quick).
    #[arg(long)]
    out: Option<PathBuf>,
    /// A reproduction TOML to use instead of the built-in one for ID.
    #[arg(long)]
    spec: Option<PathBuf>,
    /// Override the number of trials (a reduced full run; the CSV's `trials` column says so).
    #[arg(long)]
    trials: Option<usize>,
    /// Directory holding the larger data sets (else $DPFL_DATA, else the bundled data/).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

pub fn reproduce(args: &ReproduceArgs) -> anyhow::Result<()> {
    let mut spec = match &args.spec {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            ReproSpec::from_toml(&text, &p.display().to_string())?
        }
        None => reproduce::builtin(&args.id)?,
    };
    if args.quick {
        spec = spec.quick();
    }
    if let Some(t) = args.trials {
        if t == 0 {
            return Err(dpfl::Error::config("--trials", "must be at least 1").into());
        }
        spec.trials = t;
    }
    let out_dir = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("results").join(if args.quick {
            format!("{}-quick", args.id)
        } else {
            args.id.clone()
        })
    });
    let total = reproduce::jobs(&spec).len() as u64;
    let bar = crate::train::progress_bar(
        total,
        args.quiet,
        "{spinner} [{bar:30}] {pos}/{len} runs ({elapsed}, eta {eta})",
    );
    let progress = |d: usize, _: usize| bar.set_position(d as u64);
    let out = reproduce::run(&spec, args.data_dir.as_deref(), &progress)?;
    bar.finish_and_clear();
    let files = reproduce::write_outputs(&spec, &out, &out_dir)?;
    println!(
        "{}: {} runs ({} trials) in {:.1} s",
        spec.id, out.runs, spec.trials, out.wall_seconds
    );
    for f in files {
        println!("wrote {}", f.display());
    }
    if spec.base.lipschitz_from_data.is_some() {
        // The paper's rule, kept to reproduce it: say what it costs.
        println!("Caveat: {}", dpfl::experiment::DATA_DERIVED_L_CAVEAT);
    }
    Ok(())
}
