//! `dpfl data shard`: a silo makes its data shard from its own file (issue 16 item 3), in the
//! format `dpfl federate --prepare-only` writes (`dpfl_net::shard`, checksummed) and
//! `dpfl silo --data` reads. The experiment file, shared by all silos, says how records
//! become features ([`dpfl_lab::experiment::DataSpec::for_own_file`]); the train/test split is
//! drawn as `dpfl train` draws trial 0's, so a federation file prepared from the same
//! experiment and records gives the same shard.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use serde_json::json;

use dpfl_lab::experiment;

#[derive(Args)]
pub struct ShardArgs {
    /// The federation's experiment TOML (its [data] section says how records become features).
    #[arg(long)]
    pub config: PathBuf,
    /// This silo's own records: a CSV (or LIBSVM) file in the experiment's format.
    #[arg(long)]
    pub data: PathBuf,
    /// Where to write the shard (for `dpfl silo --data`).
    #[arg(long)]
    pub out: PathBuf,
    /// This silo's name (default: the one value of the experiment's silo column in --data,
    /// else the file's name without its extension); it seeds the silo's train/test split.
    #[arg(long)]
    pub silo_name: Option<String>,
    /// Override the experiment's seed (the train/test split).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Overwrite --out if it exists.
    #[arg(long)]
    pub force: bool,
}

pub fn shard(args: &ShardArgs) -> anyhow::Result<()> {
    if args.out.exists() && !args.force {
        return Err(crate::usage(format!(
            "{} exists; pass --force to overwrite it",
            args.out.display()
        )));
    }
    let mut spec = crate::train::load_spec(Some(&args.config))?;
    if args.seed.is_some() {
        spec.seed = args.seed;
    }
    spec.data = spec
        .data
        .for_own_file(&args.data, args.silo_name.as_deref())
        .map_err(|e| crate::name_file(Some(&args.config), e))?;
    let mut master = experiment::master_rng(&spec)?;
    let (trial, _) = experiment::next_trial(&spec, None, &mut master)
        .map_err(|e| crate::name_file(Some(&args.config), e))?;
    let name = trial
        .silo_names
        .as_ref()
        .and_then(|n| n.first().cloned())
        .unwrap_or_default();
    let [silo] = trial.silos.as_slice() else {
        anyhow::bail!("expected one silo from {}", args.data.display());
    };
    let named = (!name.is_empty()).then_some(name.as_str());
    dpfl_net::shard::write(&args.out, silo, named)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("writing {}", args.out.display()))?;
    let sum = dpfl::data::registry::sha256_file(&args.out)?;
    println!(
        "{}",
        json!({
            "shard": args.out,
            "silo": name,
            "train_rows": silo.train.len(),
            "test_rows": silo.test.len(),
            "features": silo.train.feature_names(),
            "sha256": sum,
            // What the federation file's public.shards lists for this silo.
            "identity": dpfl_net::shard::id(silo, named).digest,
        })
    );
    Ok(())
}
