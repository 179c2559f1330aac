//! The one-process subcommands: `dpfl server`, `dpfl silo`, `dpfl shuffler`, `dpfl certs`.

use anyhow::{Context, bail};

use super::args::{CertsCommand, ServerArgs, ShufflerArgs, SiloArgs};
use super::{config_file, exit_with_parent, init_logs, load, net, runtime, timeout};

/// Runs the server of a federation file to the end (or `stop_after_rounds`); fails when no
/// round aggregated a single message.
pub fn server(args: &ServerArgs) -> anyhow::Result<()> {
    init_logs();
    exit_with_parent("server");
    let fed = load(&args.process.config).map_err(config_file)?;
    let plan = fed.plan.clone();
    let state_dir = fed.server_state_dir();
    let fed_file = args.process.config.clone();
    let seed = fed.config.seed;
    // The model card is read before training, so that a missing or damaged one stops the
    // server before any silo spends budget.
    let card = match &fed.config.model_card {
        Some(p) => Some((
            dpfl_lab::experiment::saved::ModelCard::load(&fed.path(p)).map_err(|e| {
                crate::usage(format!(
                    "{}: model_card: {e}",
                    args.process.config.display()
                ))
            })?,
            seed,
        )),
        None => None,
    };
    let report_dir = args.out.clone().unwrap_or_else(|| state_dir.clone());
    let out = runtime()?.block_on(async {
        crate::ops::metrics(
            args.process.metrics_addr.as_deref(),
            dpfl_net::metrics::Role::Server,
        )
        .await?;
        let s = dpfl_net::server::Server::bind(fed).await?;
        s.run().await
    });
    let out = out.map_err(net)?;
    let summary = if out.finished() {
        let mut s = server_summary(&plan, &out, &state_dir)?;
        // The plan numbers the silos; the model card, where the data gave names, names them
        // (issue 31 item 3): in the server's summary.json and its saved model.
        let names = card.as_ref().and_then(|(c, _)| c.silos.as_ref());
        for p in s.summary.iter_mut().flat_map(|a| a.privacy.iter_mut()) {
            p.name = names.and_then(|n| n.get(p.silo).cloned());
        }
        Some(s)
    } else {
        None
    };
    let report = match &summary {
        Some(s) if !args.no_report => {
            Some(write_server_report(&plan, s, &report_dir).with_context(|| {
                format!("writing the server's report into {}", report_dir.display())
            })?)
        }
        _ => None,
    };
    let model_dir = match &summary {
        Some(s) => save_model(&fed_file, &card, &plan, s, out.model.clone(), &report_dir)?,
        None => None,
    };
    if out.finished() && out.log.iter().all(|l| l.participants == 0) {
        bail!(
            "training ended without aggregating a single silo message ({} rounds, each with 0 \
             participants): the model is the initial one; see the silos' logs (refused rounds)",
            out.log.len()
        );
    }
    if crate::json() {
        crate::print_json(&serde_json::json!({
            "finished": out.finished(),
            "rounds": out.log.len(),
            "dim": out.model.len(),
            "log": out.log,
            "report": report,
            "model": model_dir,
        }));
    } else if out.finished() {
        println!(
            "training finished after {} rounds; model of dimension {}",
            out.log.iter().filter(|l| l.aggregated()).count(),
            out.model.len()
        );
    } else {
        println!("stopped after round {} (stop_after_rounds)", out.log.len());
    }
    match (&model_dir, crate::json()) {
        (Some(dir), false) => println!(
            "wrote the final model to {} (dpfl predict --model {} --data FILE)",
            dir.display(),
            dir.display()
        ),
        (None, false) if out.finished() => println!(
            "the federation file names no model_card: the final model is only in {} (raw \
             little-endian f64s)",
            state_dir.join("model.bin").display()
        ),
        _ => {}
    }
    if let (Some(files), false) = (&report, crate::json()) {
        println!(
            "wrote {} (plan, privacy per silo, rounds, traffic, timings; no model quality: the \
             server holds no data)",
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// Saves the final model into `dir/model/` in `dpfl train`'s format from the federation's
/// model card, with each silo's certified ε of the planned run (`summary`); `None` without
/// a card.
fn save_model(
    fed_file: &std::path::Path,
    card: &Option<(dpfl_lab::experiment::saved::ModelCard, Option<u64>)>,
    plan: &dpfl::plan::Plan,
    summary: &dpfl_lab::experiment::RunOutput,
    weights: Vec<f64>,
    dir: &std::path::Path,
) -> anyhow::Result<Option<std::path::PathBuf>> {
    use dpfl_lab::experiment::saved::{ModelPrivacy, SavedModel};
    let Some((card, seed)) = card else {
        return Ok(None);
    };
    let Some(s) = summary.summary.first() else {
        return Ok(None);
    };
    let privacy = ModelPrivacy {
        private: s.private,
        epsilon: s.epsilon,
        delta: s.delta,
        certified_epsilon: s.max_certified_epsilon(),
        silos: s.privacy.clone(),
    };
    let label = plan.algorithm.default_label();
    let model = SavedModel::from_card(card, &label, *seed, weights, privacy);
    let out = dir.join("model");
    model
        .save(&out)
        .with_context(|| format!("saving the final model of {}", fed_file.display()))?;
    Ok(Some(out))
}

/// The server's own summary of a finished run (`dpfl_lab::experiment::server_report`): from the
/// plan, its round log and traffic only.
fn server_summary(
    plan: &dpfl::plan::Plan,
    out: &dpfl_net::server::ServerOutcome,
    state_dir: &std::path::Path,
) -> anyhow::Result<dpfl_lab::experiment::RunOutput> {
    use dpfl_lab::experiment::server_report::{NO_MODEL_QUALITY, ServerFacts, ServerRound};
    // A withheld round is in the log (what happened) but was not aggregated.
    let rounds: Vec<ServerRound> = out
        .log
        .iter()
        .filter(|l| l.aggregated())
        .map(|l| ServerRound {
            round: l.round.done(),
            selected: l.selected,
            participants: l.participants,
            rejected: l.rejected,
            seconds: l.seconds,
        })
        .collect();
    // The traffic of the rounds themselves, as `wire.json` counted it when the last round
    // closed (the outcome's count also holds the closing handshakes).
    let wire: Option<serde_json::Value> = std::fs::read(state_dir.join("wire.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let field = |k: &str| wire.as_ref().and_then(|w| w[k].as_u64());
    let uplink = field("received_in_rounds").unwrap_or(out.received_in_rounds);
    let facts = ServerFacts {
        rounds_run: rounds.len(),
        finished: out.finished(),
        messages: rounds.iter().map(|r| r.participants as u64).sum(),
        rejected: rounds.iter().map(|r| r.rejected as u64).sum(),
        uplink_bytes: uplink,
        uplink_bits: uplink.saturating_mul(8),
        sent_bytes: field("sent").unwrap_or(out.wire.sent()),
        model_quality: NO_MODEL_QUALITY.to_string(),
        rounds,
    };
    Ok(dpfl_lab::experiment::server_report::server_summary(
        plan,
        facts,
        out.rounds_elapsed.as_secs_f64(),
    )?)
}

/// Writes the server's `summary.json`, `rounds.csv` and `report.html` into `dir`.
fn write_server_report(
    plan: &dpfl::plan::Plan,
    summary: &dpfl_lab::experiment::RunOutput,
    dir: &std::path::Path,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let name = format!("{} (federation server)", plan.algorithm.default_label());
    Ok(dpfl_lab::experiment::server_report::write_server_report(
        &name, plan, summary, dir,
    )?)
}

/// Runs one silo: its own budget file judges the plan before its data are read.
pub fn silo(args: &SiloArgs) -> anyhow::Result<()> {
    init_logs();
    exit_with_parent("silo");
    let connect_timeout = timeout(args.connect.connect_timeout)?;
    let fed = load(&args.process.config).map_err(config_file)?;
    if let (Some(seed), false) = (fed.config.seed, args.allow_seeded) {
        return Err(anyhow::Error::new(super::ConfigError(format!(
            "{}: seed = {seed}: a seeded federation is a simulation: whoever holds this file \
             (the server included) can recompute this silo's noise and remove it, so its \
             messages would not be private. Remove the seed (or prepare the federation without \
             `dpfl federate --seeded`), or pass --allow-seeded to run the simulation anyway",
            args.process.config.display()
        ))));
    }
    let local = dpfl_net::config::LocalBudget::load(&args.budget).map_err(config_file)?;
    // The plan is judged against the silo's own budget before its data are read.
    match dpfl_net::config::check_plan(&fed, args.id, &local).map_err(net)? {
        Some(p) => eprintln!(
            "silo {}: plan accepted: {} rounds spend at most ε = {:.4} of this silo's ε = {}",
            args.id,
            p.rounds,
            p.epsilon,
            local.epsilon.unwrap_or(f64::NAN)
        ),
        None if fed.algorithm.is_private() => eprintln!(
            "silo {}: budget enforcement is OFF in {} (enforce = false): this silo will answer \
             every round the federation asks for",
            args.id,
            args.budget.display()
        ),
        None => {}
    }
    let needs = fed.plan.requirements();
    if needs.shuffler && needs.transport.is_pvec() {
        // The PVEC wing charges the honest-shuffler guarantee (algo/shuffle/pvec.rs); say so
        // where the silo's operator sees it.
        eprintln!(
            "silo {}: warning: this PVEC-based algorithm's ledger charges PVEC's (ε, δ) given an \
             honest shuffler; against a server that colludes with the shuffler the guarantee \
             is weaker and not yet computed (issue 15 item 4)",
            args.id
        );
    }
    if fed.algorithm.privacy() == dpfl::algo::wing::Privacy::PanPrivate
        && let Some(seed) = fed.config.seed
    {
        eprintln!(
            "silo {}: warning: the federation file sets seed = {seed}: this silo's noise is \
             drawn from that seed's stream (reproducible), so it is pan-private only against \
             whoever does not hold the seed; without a seed each noise vector has its own \
             fresh key (docs/shuffle.md, \"Intrusions\")",
            args.id
        );
    }
    let start = if args.fresh {
        dpfl_net::silo::Start::Fresh
    } else {
        dpfl_net::silo::Start::Resume
    };
    let (data, shard) = dpfl_net::shard::read_with_id(&args.data).map_err(net)?;
    check_own_shard(&args.process.config, &fed, args.id, &args.data, &shard)?;
    let mut silo =
        dpfl_net::silo::Silo::with_budget(fed, args.id, data, &local, start).map_err(net)?;
    silo.set_connect_timeout(connect_timeout);
    let role = dpfl_net::metrics::Role::Silo(args.id as usize);
    let report = runtime()?
        .block_on(async {
            crate::ops::metrics(args.process.metrics_addr.as_deref(), role).await?;
            silo.run().await
        })
        .map_err(net)?;
    if crate::json() {
        crate::print_json(&serde_json::json!({
            "silo": args.id,
            "answered": report.answered,
            "resent": report.resent,
            "refused": report.refused,
        }));
        return Ok(());
    }
    println!(
        "silo {}: answered {} rounds, resent {}, refused {}",
        args.id,
        report.answered.len(),
        report.resent.len(),
        report.refused.len()
    );
    Ok(())
}

/// Refuses a shard that the federation file's `public.shards` lists for another silo, or not
/// at all (issue 31: a silo started with another silo's shard trained on the wrong records
/// and charged the wrong ledger).
fn check_own_shard(
    file: &std::path::Path,
    fed: &dpfl_net::Federation,
    id: u32,
    path: &std::path::Path,
    shard: &dpfl_net::shard::ShardId,
) -> anyhow::Result<()> {
    let Some(ids) = &fed.config.public.shards else {
        return Ok(());
    };
    let i = id as usize;
    if ids.get(i) == Some(&shard.digest) {
        return Ok(());
    }
    let named = shard
        .silo
        .as_deref()
        .map_or(String::new(), |n| format!(" (made for silo `{n}`)"));
    let msg = match ids.iter().position(|d| *d == shard.digest) {
        Some(j) => format!(
            "{}{named} is silo {j}'s shard (public.shards[{j}] of {}), not silo {id}'s: start \
             silo {j} with it, and silo {id} with its own shard",
            path.display(),
            file.display()
        ),
        None => format!(
            "{}{named} is not the shard {} names for silo {id} (public.shards[{id}]): it was \
             made from other records or for another federation; use this silo's own shard \
             (dpfl data shard) of the records the federation was prepared for",
            path.display(),
            file.display()
        ),
    };
    Err(anyhow::Error::new(super::ConfigError(msg)))
}

/// Runs the federation's shuffler until the server is done.
pub fn shuffler(args: &ShufflerArgs) -> anyhow::Result<()> {
    init_logs();
    exit_with_parent("shuffler");
    let connect_timeout = timeout(args.connect.connect_timeout)?;
    let fed = load(&args.process.config).map_err(config_file)?;
    let batches = runtime()?
        .block_on(async {
            crate::ops::metrics(
                args.process.metrics_addr.as_deref(),
                dpfl_net::metrics::Role::Shuffler,
            )
            .await?;
            let mut s = dpfl_net::shuffler::ShufflerProcess::bind(fed).await?;
            s.set_connect_timeout(connect_timeout);
            s.run().await
        })
        .map_err(net)?;
    if crate::json() {
        crate::print_json(&serde_json::json!({ "batches": batches }));
    } else {
        println!("shuffler forwarded {batches} batches");
    }
    Ok(())
}

/// Creates the development CA or issues a certificate signed by it.
pub fn certs(cmd: &CertsCommand) -> anyhow::Result<()> {
    match cmd {
        CertsCommand::Init { dir, force } => {
            dpfl_net::certs::init_ca(dir, *force).map_err(net)?;
            if crate::json() {
                let files = [dir.join("ca.pem"), dir.join("ca.key")];
                crate::print_json(&serde_json::json!({ "files": files }));
                return Ok(());
            }
            println!(
                "wrote {} and {}",
                dir.join("ca.pem").display(),
                dir.join("ca.key").display()
            );
        }
        CertsCommand::Issue {
            ca_dir,
            dir,
            name,
            san,
            force,
        } => {
            let dir = dir.as_deref().unwrap_or(ca_dir);
            dpfl_net::certs::issue(ca_dir, dir, name, san, *force).map_err(net)?;
            let cert = dir.join(format!("{name}.pem"));
            if crate::json() {
                crate::print_json(&serde_json::json!({ "files": [cert] }));
            } else {
                println!("wrote {}", cert.display());
            }
        }
    }
    Ok(())
}
