//! `dpfl server`, `dpfl silo`, `dpfl shuffler`, `dpfl certs` and `dpfl federate`: argument
//! parsing and process orchestration for the network runtime (crate `dpfl-net`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use dpfl::experiment::{self, ExperimentSpec, RoundRow, RunOutput, SingleRun};
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
}

#[derive(Args)]
pub struct SiloArgs {
    #[arg(long)]
    config: PathBuf,
    /// This silo's data shard (written by `dpfl federate --prepare-only`, see docs/deployment.md).
    #[arg(long)]
    data: PathBuf,
    /// This silo's id; must match the common name `silo-<id>` of its certificate.
    #[arg(long)]
    id: u32,
}

#[derive(Args)]
pub struct ShufflerArgs {
    #[arg(long)]
    config: PathBuf,
}

#[derive(Subcommand)]
pub enum CertsCommand {
    /// Create a development federation CA (ca.pem, ca.key) in DIR.
    Init {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long)]
        force: bool,
    },
    /// Issue NAME.pem/NAME.key (NAME: server, shuffler or silo-<id>) signed by the CA in --ca-dir.
    Issue {
        #[arg(long)]
        ca_dir: PathBuf,
        /// Output directory (default: the CA directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        #[arg(long)]
        name: String,
        /// Extra host names or IP addresses for the certificate (repeatable).
        #[arg(long)]
        san: Vec<String>,
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
    /// Directory for certificates, shards, state, rounds.csv and summary.json.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Route messages through a shuffler, sealed to the server (HPKE).
    #[arg(long)]
    shuffle: bool,
    /// Write certificates, shards and federation files, print the commands, start nothing.
    #[arg(long)]
    prepare_only: bool,
    /// Per-round deadline in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    deadline_ms: u64,
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Override the experiment's seed.
    #[arg(long)]
    seed: Option<u64>,
}

pub fn server(args: &ServerArgs) -> anyhow::Result<()> {
    init_logs();
    let fed = Federation::load(&args.config).map_err(net)?;
    let out = runtime()?.block_on(async {
        let s = dpfl_net::server::Server::bind(fed).await?;
        s.run().await
    });
    let out = out.map_err(net)?;
    if out.finished {
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
    let fed = Federation::load(&args.config).map_err(net)?;
    let data = dpfl_net::shard::read(&args.data).map_err(net)?;
    let silo = dpfl_net::silo::Silo::new(fed, args.id, data).map_err(net)?;
    let report = runtime()?.block_on(silo.run()).map_err(net)?;
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
    let fed = Federation::load(&args.config).map_err(net)?;
    let batches = runtime()?
        .block_on(async {
            let s = dpfl_net::shuffler::ShufflerProcess::bind(fed).await?;
            s.run().await
        })
        .map_err(net)?;
    println!("shuffler forwarded {batches} batches");
    Ok(())
}

pub fn certs(cmd: &CertsCommand) -> anyhow::Result<()> {
    match cmd {
        CertsCommand::Init { dir, force } => {
            dpfl_net::certs::init_ca(dir, *force).map_err(net)?;
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
            println!("wrote {}", dir.join(format!("{name}.pem")).display());
        }
    }
    Ok(())
}

/// One prepared federation (one algorithm of the experiment).
struct Prepared {
    label: String,
    config: PathBuf,
    server_state: PathBuf,
}

struct PreparedAll {
    spec: ExperimentSpec,
    trial: experiment::TrialData,
    feds: Vec<Prepared>,
    shards: Vec<PathBuf>,
}

fn prepare(args: &FederateArgs, out: &Path) -> anyhow::Result<PreparedAll> {
    let mut spec = ExperimentSpec::from_file(&args.config)?;
    if args.seed.is_some() {
        spec.seed = args.seed;
    }
    if spec.trials > 1 {
        eprintln!(
            "note: federate runs the first of the experiment's {} trials",
            spec.trials
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut master = experiment::master_rng(&spec)?;
    let (trial, trial_seed) = experiment::next_trial(&spec, args.data_dir.as_deref(), &mut master)?;
    let l = experiment::lipschitz(&spec, trial.model.as_ref(), &trial.silos)?;
    let n = trial.silos.len();
    let first = &trial.silos[0].train;
    let records: Vec<usize> = trial.silos.iter().map(|s| s.train.len()).collect();
    let text = std::fs::read_to_string(&args.config)
        .with_context(|| format!("reading {}", args.config.display()))?;
    std::fs::write(out.join("experiment.toml"), text).context("writing experiment.toml")?;
    dpfl_net::certs::dev_pki(&out.join("certs"), n).map_err(net)?;
    let mut shards = Vec::new();
    for (i, s) in trial.silos.iter().enumerate() {
        let p = out.join("data").join(format!("silo-{i}.shard"));
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d)?;
        }
        dpfl_net::shard::write(&p, s).map_err(net)?;
        shards.push(p);
    }
    let mut feds = Vec::new();
    for (a, entry) in spec.algorithms.iter().enumerate() {
        let seed = experiment::algorithm_seed(trial_seed, a);
        let shuffler = if args.shuffle {
            format!(
                "\n[shuffler]\naddress = \"127.0.0.1:0\"\naddress_file = \"alg-{a}/shuffler.addr\"\n"
            )
        } else {
            String::new()
        };
        let config = format!(
            "# Written by dpfl federate for algorithm {a} ({label}).\n\
             experiment = \"experiment.toml\"\nalgorithm = {a}\n{seed}\n\
             [public]\nrecords = {records:?}\nfeatures = {features}\n{classes}lipschitz = {l:?}\n\n\
             [server]\naddress = \"127.0.0.1:0\"\naddress_file = \"alg-{a}/server.addr\"\n\
             state_dir = \"alg-{a}/server\"\nround_deadline_ms = {deadline}\n{shuffler}\n\
             [tls]\ndir = \"certs\"\n\n[silo]\nstate_dir = \"alg-{a}/silo-{{id}}\"\n",
            label = entry.label(),
            seed = seed.map_or(String::new(), |s| format!("seed = {s}")),
            features = first.num_features(),
            classes = first
                .target()
                .num_classes()
                .map_or(String::new(), |c| format!("classes = {c}\n")),
            deadline = args.deadline_ms,
        );
        let path = out.join(format!("federation-{a}.toml"));
        std::fs::write(&path, config).with_context(|| format!("writing {}", path.display()))?;
        // Build the halves once here, so a configuration error stops before any process starts.
        let fed = Federation::load(&path).map_err(net)?;
        fed.algorithm
            .build(&fed.context().map_err(net)?)
            .map_err(|e| match e {
                dpfl::Error::Config { field, reason } => dpfl::Error::Config {
                    field: format!("algorithms[{a}] ({}): {field}", entry.label()),
                    reason,
                },
                other => other,
            })?;
        // Fresh state for a fresh run.
        let _ = std::fs::remove_dir_all(out.join(format!("alg-{a}")));
        feds.push(Prepared {
            label: entry.label(),
            config: path,
            server_state: out.join(format!("alg-{a}/server")),
        });
    }
    Ok(PreparedAll {
        spec,
        trial,
        feds,
        shards,
    })
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

pub fn federate(args: &FederateArgs) -> anyhow::Result<()> {
    if !args.local {
        return Err(anyhow::Error::new(ConfigError(
            "federate: only --local is supported; across machines, run dpfl server/silo/shuffler (docs/deployment.md)".into(),
        )));
    }
    let out = args.out.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("dpfl-federate-{}", std::process::id()))
    });
    let prep = prepare(args, &out)?;
    let exe = std::env::current_exe().context("locating the dpfl binary")?;
    if args.prepare_only {
        for f in &prep.feds {
            println!("# {}", f.label);
            println!("dpfl server --config {}", f.config.display());
            if args.shuffle {
                println!("dpfl shuffler --config {}", f.config.display());
            }
            for (i, s) in prep.shards.iter().enumerate() {
                println!(
                    "dpfl silo --config {} --id {i} --data {}",
                    f.config.display(),
                    s.display()
                );
            }
        }
        return Ok(());
    }
    let logs = out.join("logs");
    std::fs::create_dir_all(&logs)?;
    let mut rows = Vec::new();
    let mut summary = Vec::new();
    for (a, f) in prep.feds.iter().enumerate() {
        let start = Instant::now();
        let cfg = f.config.to_string_lossy().to_string();
        let mut server = spawn(
            &exe,
            &["server", "--config", &cfg],
            &logs.join(format!("alg-{a}-server.log")),
        )?;
        let mut others: Vec<Child> = Vec::new();
        if args.shuffle {
            others.push(spawn(
                &exe,
                &["shuffler", "--config", &cfg],
                &logs.join(format!("alg-{a}-shuffler.log")),
            )?);
        }
        for (i, s) in prep.shards.iter().enumerate() {
            let id = i.to_string();
            let shard = s.to_string_lossy().to_string();
            others.push(spawn(
                &exe,
                &["silo", "--config", &cfg, "--id", &id, "--data", &shard],
                &logs.join(format!("alg-{a}-silo-{i}.log")),
            )?);
        }
        let budget =
            Duration::from_millis(args.deadline_ms.saturating_mul(prep.spec.rounds as u64 + 2));
        let status = wait_timeout(&mut server, budget)?;
        for c in &mut others {
            if wait_timeout(c, Duration::from_secs(10))?.is_none() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        match status {
            Some(s) if s.success() => {}
            Some(s) => bail!(
                "the server of {} exited with {s}; see {}",
                f.label,
                logs.display()
            ),
            None => {
                let _ = server.kill();
                bail!(
                    "the server of {} did not finish in time; see {}",
                    f.label,
                    logs.display()
                );
            }
        }
        let w = dpfl_net::server::read_model(&f.server_state.join("model.bin")).map_err(net)?;
        let fed = Federation::load(&f.config).map_err(net)?;
        let ctx = fed.context().map_err(net)?;
        let calibration = fed.algorithm.build(&ctx)?.calibration;
        let model = prep.trial.model.as_ref();
        let (train_loss, test_metric) = evaluate(model, &w, &prep.trial.silos);
        let run = SingleRun {
            curve: vec![(prep.spec.rounds, train_loss, test_metric)],
            final_model: w,
            final_train_loss: train_loss,
            test_metric,
            calibration,
            spent: Vec::new(),
            wall_seconds: start.elapsed().as_secs_f64(),
        };
        rows.push(RoundRow {
            trial: 0,
            round: prep.spec.rounds,
            algorithm: f.label.clone(),
            train_loss,
            test_metric,
        });
        summary.push(experiment::summary_of(
            &prep.spec,
            &prep.spec.algorithms[a],
            &prep.trial,
            &run,
        ));
        println!(
            "{:<28} test metric {test_metric:.4}  train loss {train_loss:.4}",
            f.label
        );
    }
    let output = RunOutput {
        rounds: rows,
        summary,
    };
    experiment::write_outputs(&output, &out)?;
    println!("wrote {}", out.join("summary.json").display());
    Ok(())
}

/// Pooled training loss and test metric, as the simulator reports them.
pub fn evaluate(
    model: &dyn dpfl::model::Model,
    w: &[f64],
    silos: &[dpfl::data::SiloData],
) -> (f64, f64) {
    use dpfl::model::{Metric, mean_loss, metric_value};
    let (mut a, mut b) = (0.0, 0usize);
    let (mut c, mut d) = (0.0, 0usize);
    for s in silos {
        let n = s.train.len();
        if n > 0 {
            a += mean_loss(model, w, &s.train) * n as f64;
            b += n;
        }
        let m = s.test.len();
        if m > 0 {
            let v = metric_value(model, w, &s.test);
            c += match model.metric() {
                Metric::Rmse => v * v * m as f64,
                Metric::ErrorRate => v * m as f64,
            };
            d += m;
        }
    }
    let loss = if b == 0 { f64::NAN } else { a / b as f64 };
    let metric = if d == 0 {
        f64::NAN
    } else {
        match model.metric() {
            Metric::Rmse => (c / d as f64).sqrt(),
            Metric::ErrorRate => c / d as f64,
        }
    };
    (loss, metric)
}
