//! `dpfl server`, `dpfl silo`, `dpfl shuffler`, `dpfl certs` and `dpfl federate`: argument
//! parsing and process orchestration for the network runtime (crate `dpfl-net`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use dpfl::experiment::{self, ExperimentSpec, SingleRun};
use dpfl_net::config::{
    NetConfig, PublicFacts, ServerSection, ShufflerSection, SiloSection, TlsSection,
};
use dpfl_net::{Federation, NetError};

/// Config errors of the network runtime map to exit code 2 like the simulator's.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for ConfigError {}

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

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

#[derive(Args)]
pub struct ServerArgs {
    /// Federation file (see docs/deployment.md).
    #[arg(long)]
    config: PathBuf,
    /// Serve Prometheus metrics on this address (`GET /metrics`, plain HTTP; off by default).
    #[arg(long)]
    metrics_addr: Option<String>,
}

#[derive(Args)]
pub struct SiloArgs {
    /// Federation file (see docs/deployment.md).
    #[arg(long)]
    config: PathBuf,
    /// This silo's data shard (written by `dpfl federate --prepare-only`, see docs/deployment.md).
    #[arg(long)]
    data: PathBuf,
    /// This silo's id; must match the common name `silo-<id>` of its certificate.
    #[arg(long)]
    id: u32,
    /// This silo's own budget file (epsilon, delta, neighbouring, enforce; see
    /// docs/deployment.md). The federation file cannot raise it; a plan that would spend more
    /// is refused before the data are read.
    #[arg(long)]
    budget: PathBuf,
    /// Seconds to keep trying to reach the server (also after losing it) before giving up.
    #[arg(long, default_value_t = dpfl_net::retry::DEFAULT_CONNECT_TIMEOUT.as_secs_f64())]
    connect_timeout: f64,
    /// Serve Prometheus metrics on this address (`GET /metrics`, plain HTTP; off by default).
    #[arg(long)]
    metrics_addr: Option<String>,
}

#[derive(Args)]
pub struct ShufflerArgs {
    /// Federation file (see docs/deployment.md).
    #[arg(long)]
    config: PathBuf,
    /// Seconds to keep trying to reach the server (also after losing it) before giving up.
    #[arg(long, default_value_t = dpfl_net::retry::DEFAULT_CONNECT_TIMEOUT.as_secs_f64())]
    connect_timeout: f64,
    /// Serve Prometheus metrics on this address (`GET /metrics`, plain HTTP; off by default).
    #[arg(long)]
    metrics_addr: Option<String>,
}

/// A `--connect-timeout` value.
fn timeout(secs: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(secs).map_err(|_| {
        anyhow::Error::new(ConfigError(format!(
            "--connect-timeout: expected a non-negative number of seconds, got {secs}"
        )))
    })
}

#[derive(Subcommand)]
pub enum CertsCommand {
    /// Create a development federation CA (ca.pem, ca.key) in DIR.
    Init {
        /// Directory for ca.pem and ca.key (created if needed).
        #[arg(long)]
        dir: PathBuf,
        /// Overwrite an existing CA.
        #[arg(long)]
        force: bool,
    },
    /// Issue NAME.pem/NAME.key (NAME: server, shuffler or silo-<id>) signed by the CA in --ca-dir.
    Issue {
        /// Directory of the CA (ca.pem, ca.key) that signs.
        #[arg(long)]
        ca_dir: PathBuf,
        /// Output directory (default: the CA directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The certificate's name: server, shuffler or silo-<id>.
        #[arg(long)]
        name: String,
        /// Extra host names or IP addresses for the certificate (repeatable).
        #[arg(long)]
        san: Vec<String>,
        /// Overwrite existing NAME.pem/NAME.key.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Args)]
pub struct FederateArgs {
    /// Experiment file (TOML).
    #[arg(long)]
    config: PathBuf,
    /// Run every process on 127.0.0.1 (the only mode so far).
    #[arg(long)]
    local: bool,
    /// Directory for certificates and private keys, each trial's shards and state
    /// (trial-<t>/), rounds.csv, summary.json and provenance.json. Required: keys and shards
    /// never go to a temporary directory. An existing non-empty one needs --force.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Overwrite the files of an existing non-empty --out.
    #[arg(long)]
    force: bool,
    /// Route messages through a shuffler, sealed to the server (HPKE).
    #[arg(long)]
    shuffle: bool,
    /// Write certificates, shards and federation files of every trial, print the commands of
    /// every trial, start nothing.
    #[arg(long)]
    prepare_only: bool,
    /// Per-round deadline in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    deadline_ms: u64,
    /// Directory holding the larger data sets (else $DPFL_DATA, else the bundled data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Override the experiment's seed.
    #[arg(long)]
    seed: Option<u64>,
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

pub fn server(args: &ServerArgs) -> anyhow::Result<()> {
    init_logs();
    let fed = load(&args.config).map_err(config_file)?;
    let out = runtime()?.block_on(async {
        crate::ops::metrics(
            args.metrics_addr.as_deref(),
            dpfl_net::metrics::Role::Server,
        )
        .await?;
        let s = dpfl_net::server::Server::bind(fed).await?;
        s.run().await
    });
    let out = out.map_err(net)?;
    if out.finished && out.log.iter().all(|l| l.participants == 0) {
        bail!(
            "training ended without aggregating a single silo message ({} rounds, each with 0 \
             participants): the model is the initial one; see the silos' logs (refused rounds)",
            out.log.len()
        );
    }
    if crate::json() {
        crate::print_json(&serde_json::json!({
            "finished": out.finished,
            "rounds": out.log.len(),
            "dim": out.model.len(),
            "log": out.log,
        }));
    } else if out.finished {
        println!(
            "training finished after {} rounds; model of dimension {}",
            out.log.len(),
            out.model.len()
        );
    } else {
        println!("stopped after round {} (stop_after_rounds)", out.log.len());
    }
    Ok(())
}

pub fn silo(args: &SiloArgs) -> anyhow::Result<()> {
    init_logs();
    let connect_timeout = timeout(args.connect_timeout)?;
    let fed = load(&args.config).map_err(config_file)?;
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
    if fed.algorithm.needs_shuffler()
        && !matches!(fed.algorithm, dpfl::algo::AlgorithmSpec::SdpMbSgd(_))
    {
        // The PVEC wing charges the honest-shuffler guarantee (algo/shuffle/pvec.rs); say so
        // where the silo's operator sees it.
        eprintln!(
            "silo {}: warning: this PVEC-based algorithm's ledger charges PVEC's (ε, δ) given an \
             honest shuffler; against a server that colludes with the shuffler the guarantee \
             is weaker and not yet computed (issue 15 item 4)",
            args.id
        );
    }
    let data = dpfl_net::shard::read(&args.data).map_err(net)?;
    let mut silo = dpfl_net::silo::Silo::with_budget(fed, args.id, data, &local).map_err(net)?;
    silo.set_connect_timeout(connect_timeout);
    let role = dpfl_net::metrics::Role::Silo(args.id as usize);
    let report = runtime()?
        .block_on(async {
            crate::ops::metrics(args.metrics_addr.as_deref(), role).await?;
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

pub fn shuffler(args: &ShufflerArgs) -> anyhow::Result<()> {
    init_logs();
    let connect_timeout = timeout(args.connect_timeout)?;
    let fed = load(&args.config).map_err(config_file)?;
    let batches = runtime()?
        .block_on(async {
            crate::ops::metrics(
                args.metrics_addr.as_deref(),
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

/// One prepared federation (one algorithm of one trial).
struct Prepared {
    label: String,
    /// The federation has a shuffler (`--shuffle`, or a shuffle-model algorithm).
    shuffle: bool,
    config: PathBuf,
    server_state: PathBuf,
}

/// One trial's data, shards and federations, under `DIR/trial-<t>/`.
struct PreparedTrial {
    dir: PathBuf,
    trial: experiment::TrialData,
    feds: Vec<Prepared>,
    shards: Vec<PathBuf>,
}

/// Writes trial `t`'s shards and one federation file per algorithm into `out/trial-<t>/`.
/// The files share the experiment file and the dev PKI in `out`; each algorithm gets its
/// seed exactly as `experiment::run` derives it, and the server records the models the
/// simulator evaluates (`record_models_every = eval_every`).
fn prepare_trial(
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
    for (i, s) in trial.silos.iter().enumerate() {
        let p = dir.join("data").join(format!("silo-{i}.shard"));
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        dpfl_net::shard::write(&p, s).map_err(net)?;
        shards.push(p);
    }
    let mut feds = Vec::new();
    let features = first.num_features();
    let classes = first.target().num_classes();
    for (a, entry) in spec.algorithms.iter().enumerate() {
        // The run's plan, computed once here (every silo calibrated once) and handed to every
        // process in its federation file; a configuration error stops before any process
        // starts.
        let plan =
            experiment::plan_from(spec, a, features, classes, &records, l).map_err(
                |e| match e {
                    dpfl::Error::Config { field, reason } => dpfl::Error::Config {
                        field: format!("algorithms[{a}] ({}): {field}", entry.label()),
                        reason,
                    },
                    other => other,
                },
            )?;
        let seed = experiment::algorithm_seed(trial_seed, a);
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
                epsilon: b.map(|b| b.0),
                delta: b.map(|b| b.1),
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
    })
}

/// The budget file `dpfl federate` writes for silo `i` of an algorithm's state directory.
fn budget_file(alg_state: &Path, i: usize) -> PathBuf {
    alg_state.join(format!("budget-silo-{i}.toml"))
}

fn spawn(exe: &Path, args: &[&str], log: &Path) -> anyhow::Result<Child> {
    let f = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let f2 = f.try_clone()?;
    Command::new(exe)
        .args(args)
        .stdout(f)
        .stderr(f2)
        .spawn()
        .with_context(|| format!("starting {} {}", exe.display(), args.join(" ")))
}

fn wait_timeout(
    child: &mut Child,
    timeout: Duration,
) -> anyhow::Result<Option<std::process::ExitStatus>> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if Instant::now() >= end {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The commands that run trial `t`'s federations by hand.
fn print_commands(t: usize, p: &PreparedTrial) {
    for f in &p.feds {
        println!("# trial {t}: {}", f.label);
        println!("dpfl server --config {}", f.config.display());
        if f.shuffle {
            println!("dpfl shuffler --config {}", f.config.display());
        }
        for (i, s) in p.shards.iter().enumerate() {
            println!(
                "dpfl silo --config {} --id {i} --data {} --budget {}",
                f.config.display(),
                s.display(),
                budget_file(f.server_state.parent().unwrap_or(Path::new(".")), i).display()
            );
        }
    }
}

/// Runs one federation (server, silos, optional shuffler) to the end.
fn run_federation(
    args: &FederateArgs,
    exe: &Path,
    logs: &Path,
    a: usize,
    f: &Prepared,
    shards: &[PathBuf],
    rounds: usize,
) -> anyhow::Result<()> {
    let cfg = f.config.to_string_lossy().to_string();
    let mut server = spawn(
        exe,
        &["server", "--config", &cfg],
        &logs.join(format!("alg-{a}-server.log")),
    )?;
    let mut others: Vec<Child> = Vec::new();
    if f.shuffle {
        others.push(spawn(
            exe,
            &["shuffler", "--config", &cfg],
            &logs.join(format!("alg-{a}-shuffler.log")),
        )?);
    }
    for (i, s) in shards.iter().enumerate() {
        let id = i.to_string();
        let shard = s.to_string_lossy().to_string();
        let budget = budget_file(f.server_state.parent().unwrap_or(Path::new(".")), i);
        let budget = budget.to_string_lossy().to_string();
        others.push(spawn(
            exe,
            &[
                "silo", "--config", &cfg, "--id", &id, "--data", &shard, "--budget", &budget,
            ],
            &logs.join(format!("alg-{a}-silo-{i}.log")),
        )?);
    }
    let budget = Duration::from_millis(args.deadline_ms.saturating_mul(rounds as u64 + 2));
    let status = wait_timeout(&mut server, budget)?;
    for c in &mut others {
        if wait_timeout(c, Duration::from_secs(10))?.is_none() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    match status {
        Some(s) if s.success() => Ok(()),
        Some(s) => bail!(
            "the server of {} exited with {s}; see {}",
            f.label,
            logs.display()
        ),
        None => {
            let _ = server.kill();
            let _ = server.wait();
            bail!(
                "the server of {} did not finish in time; see {}",
                f.label,
                logs.display()
            );
        }
    }
}

/// What `experiment::train_one` returns, from a finished federation's files: the recorded
/// models evaluated on the trial's data (as the simulator evaluates them), the calibration,
/// and each silo's charged events.
fn collect_run(
    f: &Prepared,
    trial: &experiment::TrialData,
    eval_every: usize,
    start: Instant,
) -> anyhow::Result<SingleRun> {
    let fed = load(&f.config).map_err(net)?;
    let rounds = fed.rounds();
    let models_path = f.server_state.join("models.bin");
    let recorded: std::collections::BTreeMap<u32, Vec<f64>> =
        dpfl_net::models::read_models(&models_path)
            .map_err(net)?
            .into_iter()
            .collect();
    let model = trial.model.as_ref();
    let mut curve = Vec::new();
    for done in 1..=rounds {
        if !experiment::is_eval_round(done, eval_every, rounds) {
            continue;
        }
        let w = u32::try_from(done)
            .ok()
            .and_then(|r| recorded.get(&r))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: no model recorded for round {done}",
                    models_path.display()
                )
            })?;
        curve.push((
            done,
            dpfl::sim::train_loss(model, w, &trial.silos),
            dpfl::sim::test_metric(model, w, &trial.silos),
        ));
    }
    let model_path = f.server_state.join("model.bin");
    let w = dpfl_net::server::read_model(&model_path).map_err(net)?;
    // The last round is always recorded; the final model must be that record.
    let last = u32::try_from(rounds).ok().and_then(|r| recorded.get(&r));
    let same = last.is_some_and(|l| {
        l.len() == w.len() && l.iter().zip(&w).all(|(a, b)| a.to_bits() == b.to_bits())
    });
    if !same {
        bail!(
            "{} differs from the model {} recorded for the last round {rounds}",
            model_path.display(),
            models_path.display()
        );
    }
    let (final_train_loss, test_metric) = match curve.last() {
        Some(&(_, l, m)) => (l, m),
        None => (
            dpfl::sim::train_loss(model, &w, &trial.silos),
            dpfl::sim::test_metric(model, &w, &trial.silos),
        ),
    };
    let calibration = fed.plan.calibration.clone();
    // What each silo released: the events its ledger charged (one per round it answered),
    // in round order, as the simulator's `spent` lists them. The silos have exited; their
    // ledgers are read, never charged.
    let spent = (0..fed.silos())
        .map(|i| {
            let path = fed
                .silo_state_dir(i as u32)
                .join(dpfl_net::ledger::ROUND_LEDGER);
            dpfl_net::ledger::read_events(&path).map_err(net)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(SingleRun {
        curve,
        extended: Vec::new(),
        final_model: w,
        final_train_loss,
        test_metric,
        calibration,
        spent,
        wall_seconds: start.elapsed().as_secs_f64(),
        // Counted inside each silo process; a silo does not report it to the server.
        nonfinite_gradients: None,
    })
}

/// `dpfl federate --local`: every trial of the experiment, drawn exactly as
/// `experiment::run` draws them (same master generator, trial data and seeds), each
/// algorithm as a federation of processes under `DIR/trial-<t>/`; then `rounds.csv` and
/// `summary.json` as `dpfl train --out DIR` writes them. `--prepare-only` writes every
/// trial's files and prints the commands of every trial.
pub fn federate(args: &FederateArgs) -> anyhow::Result<()> {
    if !args.local {
        return Err(anyhow::Error::new(ConfigError(
            "federate: only --local is supported; across machines, run dpfl server/silo/shuffler (docs/deployment.md)".into(),
        )));
    }
    let mut spec = crate::train::load_spec(Some(&args.config))?;
    if args.seed.is_some() {
        spec.seed = args.seed;
    }
    // The federation's private keys and every silo's shard are written under --out: never
    // into a shared temporary directory that outlives the run.
    let out = args.out.clone().ok_or_else(|| {
        crate::usage(
            "federate needs --out DIR: the federation's certificates, private keys and every \
             silo's data shard are written there (it is not cleaned up)",
        )
    })?;
    // Like train and reproduce: an unusable --out is refused before any certificate, shard
    // or process is made.
    dpfl::output::prepare_fresh_out_dir(&out, args.force).map_err(crate::usage)?;
    let text = std::fs::read_to_string(&args.config)
        .with_context(|| format!("reading {}", args.config.display()))?;
    let exp_copy = out.join("experiment.toml");
    std::fs::write(&exp_copy, text).with_context(|| format!("writing {}", exp_copy.display()))?;
    let certs = out.join("certs");
    let exe = std::env::current_exe().context("locating the dpfl binary")?;
    let eval_every = experiment::eval_every(&spec);
    let mut master = experiment::master_rng(&spec)?;
    let mut acc = experiment::RunAccumulator::new(&spec);
    let mut certified = 0usize;
    for t in 0..spec.trials {
        let (trial, trial_seed) =
            experiment::next_trial(&spec, args.data_dir.as_deref(), &mut master)?;
        // One dev PKI for every trial; a trial with more silos than any before (a partition
        // may in principle vary) gets the missing silo certificates.
        let n = trial.silos.len();
        if t == 0 {
            dpfl_net::certs::dev_pki(&certs, n).map_err(net)?;
            certified = n;
        }
        for i in certified..n {
            dpfl_net::certs::issue(&certs, &certs, &format!("silo-{i}"), &[], true).map_err(net)?;
        }
        certified = certified.max(n);
        let prep = prepare_trial(args, &spec, &out, t, trial, trial_seed)?;
        if args.prepare_only {
            print_commands(t, &prep);
            continue;
        }
        let logs = prep.dir.join("logs");
        std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        for (a, f) in prep.feds.iter().enumerate() {
            let start = Instant::now();
            run_federation(args, &exe, &logs, a, f, &prep.shards, spec.rounds)?;
            let run = collect_run(f, &prep.trial, eval_every, start)?;
            // With --json, stdout holds only the result object.
            if !crate::json() {
                println!(
                    "trial {t} {:<28} test metric {:.4}  train loss {:.4}",
                    f.label, run.test_metric, run.final_train_loss
                );
            }
            acc.add(&spec, a, t, &prep.trial, &run);
        }
    }
    if args.prepare_only {
        return Ok(());
    }
    let output = acc.finish();
    if !crate::json() {
        crate::train::print_report(&spec, &output);
    }
    experiment::write_outputs(&output, &out)?;
    let prov = crate::train::provenance("federate", &spec, Some(&args.config), &output)?;
    let prov_file = prov.write(&out)?;
    if crate::json() {
        crate::print_json(&serde_json::json!({
            "experiment": spec.name,
            "summary": output.summary,
            "files": [out.join("rounds.csv"), out.join("summary.json"), prov_file],
            "provenance": prov,
        }));
        return Ok(());
    }
    println!(
        "wrote {} and {}",
        out.join("rounds.csv").display(),
        out.join("summary.json").display()
    );
    // The same curves and report as `dpfl train --out`, from the rounds the server recorded.
    let files = experiment::report::write_report(&spec, &output, &out)
        .with_context(|| format!("writing the curves and report into {}", out.display()))?;
    // On stderr: stdout is the federation's result (and a golden snapshot's).
    eprintln!(
        "wrote {}, {} and {}",
        files[0].display(),
        files[1].display(),
        files[2].display()
    );
    Ok(())
}
