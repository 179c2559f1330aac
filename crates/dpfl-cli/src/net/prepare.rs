//! `dpfl federate`, step one: a trial's shards, one federation file per algorithm (with the
//! run's plan, computed once) and every silo's own budget file, under `DIR/trial-<t>/`.

use std::path::{Path, PathBuf};

use anyhow::Context;

use dpfl_lab::experiment::{self, ExperimentSpec};
use dpfl_net::Federation;
use dpfl_net::config::{
    NetConfig, PublicFacts, ServerSection, ShufflerSection, SiloSection, TlsSection,
};

use super::args::FederateArgs;
use super::{ConfigError, net};

/// One prepared federation (one algorithm of one trial).
pub(super) struct Prepared {
    pub(super) label: String,
    /// The federation has a shuffler (`--shuffle`, or a shuffle-model algorithm).
    pub(super) shuffle: bool,
    pub(super) config: PathBuf,
    pub(super) server_state: PathBuf,
}

/// One trial's data, shards and federations, under `DIR/trial-<t>/`.
pub(super) struct PreparedTrial {
    pub(super) dir: PathBuf,
    pub(super) trial: experiment::TrialData,
    pub(super) feds: Vec<Prepared>,
    pub(super) shards: Vec<PathBuf>,
    /// The federation files carry the seed (`--seeded`).
    pub(super) seeded: bool,
}

/// Writes trial `t`'s shards and one federation file per algorithm into `out/trial-<t>/`.
/// The files share the experiment file and the dev PKI in `out`; each algorithm gets its
/// seed exactly as `experiment::run` derives it, and the server records the models the
/// simulator evaluates (`record_models_every = eval_every`).
pub(super) fn prepare_trial(
    args: &FederateArgs,
    spec: &ExperimentSpec,
    out: &Path,
    t: usize,
    trial: experiment::TrialData,
    trial_seed: Option<u64>,
) -> anyhow::Result<PreparedTrial> {
    let dir = out.join(format!("trial-{t}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let l = experiment::lipschitz(spec, trial.model.as_ref(), &trial.silos)?;
    let first = &trial
        .silos
        .first()
        .ok_or_else(|| ConfigError("data.partition: produced no silos".into()))?
        .train;
    let records: Vec<usize> = trial.silos.iter().map(|s| s.train.len()).collect();
    let mut shards = Vec::new();
    // Each shard names its silo (as a silo's own `dpfl data shard` does), and the federation
    // file lists every shard's identity, so a silo refuses another silo's shard.
    let names: Vec<String> = (0..trial.silos.len())
        .map(|i| {
            trial
                .silo_names
                .as_ref()
                .and_then(|n| n.get(i).cloned())
                .unwrap_or_else(|| format!("silo {i}"))
        })
        .collect();
    let shard_ids: Vec<String> = trial
        .silos
        .iter()
        .zip(&names)
        .map(|(s, n)| dpfl_net::shard::id(s, Some(n)).digest)
        .collect();
    for (i, s) in trial.silos.iter().enumerate() {
        let p = dir.join("data").join(format!("silo-{i}.shard"));
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        dpfl_net::shard::write(&p, s, Some(&names[i])).map_err(net)?;
        shards.push(p);
    }
    // What the server needs to save its final model as `dpfl train` does (it holds no data).
    let card = dir.join("model-card.json");
    experiment::saved::ModelCard::of_trial(spec, &trial).save(&card)?;
    let mut feds = Vec::new();
    let features = first.num_features();
    let classes = first.target().num_classes();
    for (a, entry) in spec.algorithms.iter().enumerate() {
        // The run's plan, computed once here (every silo calibrated once) and handed to every
        // process in its federation file; a configuration error stops before any process
        // starts.
        let plan = experiment::plan_from(spec, a, features, classes, &records, l)
            .map_err(|e| e.in_algorithm(a, &entry.label()))?;
        // Only a seeded simulation carries the seed (with it the noise can be recomputed).
        let seed = experiment::algorithm_seed(trial_seed, a).filter(|_| args.seeded);
        let mut server = ServerSection::new(
            "127.0.0.1:0".into(),
            PathBuf::from(format!("alg-{a}/server")),
        );
        server.address_file = Some(PathBuf::from(format!("alg-{a}/server.addr")));
        server.round_deadline_ms = args.deadline_ms;
        server.record_models_every = Some(experiment::eval_every(spec));
        let net_config = NetConfig {
            experiment: Some(PathBuf::from("../experiment.toml")),
            algorithm: a,
            seed,
            public: PublicFacts {
                records: records.clone(),
                features,
                classes,
                lipschitz: l,
                shards: Some(shard_ids.clone()),
            },
            server,
            // Shuffle-model algorithms always get their shuffler.
            shuffler: (args.shuffle || entry.spec.needs_shuffler()).then(|| {
                ShufflerSection::new(
                    "127.0.0.1:0".into(),
                    Some(PathBuf::from(format!("alg-{a}/shuffler.addr"))),
                )
            }),
            tls: TlsSection {
                dir: PathBuf::from("../certs"),
            },
            silo: SiloSection {
                state_dir: format!("alg-{a}/silo-{{id}}"),
                ..SiloSection::default()
            },
            model_card: Some(PathBuf::from("model-card.json")),
            plan: Some(plan),
        };
        let config = format!(
            "# Written by dpfl federate for trial {t}, algorithm {a} ({}).\n{}",
            entry.label(),
            toml::to_string(&net_config).context("writing the federation file")?
        );
        let path = dir.join(format!("federation-{a}.toml"));
        std::fs::write(&path, config).with_context(|| format!("writing {}", path.display()))?;
        let fed = Federation::load(&path).map_err(net)?;
        // Fresh state for a fresh run.
        let state = dir.join(format!("alg-{a}"));
        if state.exists() {
            std::fs::remove_dir_all(&state)
                .with_context(|| format!("removing the old state {}", state.display()))?;
        }
        // Each silo's own budget file: federate plays every silo's operator, and takes the
        // experiment's budget and `enforce_budget` as theirs. A plan a silo would refuse is
        // refused here, before any process starts.
        let ctx = fed.context().map_err(net)?;
        let enforce = fed.plan.setup.enforce_budget && fed.algorithm.is_private();
        std::fs::create_dir_all(&state).with_context(|| format!("creating {}", state.display()))?;
        for i in 0..fed.silos() {
            let b = ctx.silos.get(i).and_then(|s| s.budget);
            let local = dpfl_net::config::LocalBudget {
                epsilon: b.map(|b| b.0.get()),
                delta: b.map(|b| b.1.get()),
                neighbouring: dpfl_privacy::Neighbouring::ReplaceOne,
                enforce: enforce && b.is_some(),
            };
            dpfl_net::config::check_plan(&fed, i as u32, &local).map_err(|e| {
                anyhow::Error::new(ConfigError(format!(
                    "algorithms[{a}] ({}): {e}",
                    entry.label()
                )))
            })?;
            let p = budget_file(&state, i);
            std::fs::write(&p, local.to_toml())
                .with_context(|| format!("writing {}", p.display()))?;
        }
        feds.push(Prepared {
            shuffle: fed.shuffle(),
            label: entry.label(),
            config: path,
            server_state: state.join("server"),
        });
    }
    Ok(PreparedTrial {
        dir,
        trial,
        feds,
        shards,
        seeded: args.seeded && trial_seed.is_some(),
    })
}

/// The budget file `dpfl federate` writes for silo `i` of an algorithm's state directory.
pub(super) fn budget_file(alg_state: &Path, i: usize) -> PathBuf {
    alg_state.join(format!("budget-silo-{i}.toml"))
}

/// The commands that run trial `t`'s federations by hand.
pub(super) fn print_commands(t: usize, p: &PreparedTrial) {
    for f in &p.feds {
        println!("# trial {t}: {}", f.label);
        println!("dpfl server --config {}", f.config.display());
        if f.shuffle {
            println!("dpfl shuffler --config {}", f.config.display());
        }
        // A silo's first start; a restart drops --fresh and resumes from its state.
        for (i, s) in p.shards.iter().enumerate() {
            println!(
                "dpfl silo --fresh --config {} --id {i} --data {} --budget {}{}",
                f.config.display(),
                s.display(),
                budget_file(f.server_state.parent().unwrap_or(Path::new(".")), i).display(),
                if p.seeded { " --allow-seeded" } else { "" }
            );
        }
    }
}
