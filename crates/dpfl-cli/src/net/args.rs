//! The command-line arguments of the network subcommands (clap).

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// What every long-running network process takes: its federation file and where to serve
/// its metrics.
#[derive(Args)]
pub struct ProcessArgs {
    /// Federation file (see docs/deployment.md).
    #[arg(long)]
    pub(super) config: PathBuf,
    /// Serve Prometheus metrics on this address (`GET /metrics`, plain HTTP; off by default).
    #[arg(long)]
    pub(super) metrics_addr: Option<String>,
}

/// How long a silo or the shuffler keeps trying to reach the server.
#[derive(Args)]
pub struct ConnectArgs {
    /// Seconds to keep trying to reach the server (also after losing it) before giving up.
    #[arg(long, default_value_t = dpfl_net::retry::DEFAULT_CONNECT_TIMEOUT.as_secs_f64())]
    pub(super) connect_timeout: f64,
}

/// `dpfl server`.
#[derive(Args)]
pub struct ServerArgs {
    #[command(flatten)]
    pub(super) process: ProcessArgs,
    /// Where the server writes its report of a finished run (summary.json, rounds.csv,
    /// report.html: plan, privacy per silo, rounds, traffic, timings); default: its state
    /// directory.
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
    /// Write no report (`dpfl federate` writes the fuller one itself, with the silos' data).
    #[arg(long)]
    pub(super) no_report: bool,
}

/// `dpfl silo`.
#[derive(Args)]
pub struct SiloArgs {
    #[command(flatten)]
    pub(super) process: ProcessArgs,
    /// This silo's data shard (written by `dpfl federate --prepare-only`, see docs/deployment.md).
    #[arg(long)]
    pub(super) data: PathBuf,
    /// This silo's id; must match the common name `silo-<id>` of its certificate.
    #[arg(long)]
    pub(super) id: u32,
    /// This silo's own budget file (epsilon, delta, neighbouring, enforce; see
    /// docs/deployment.md). The federation file cannot raise it; a plan that would spend more
    /// is refused before the data are read.
    #[arg(long)]
    pub(super) budget: PathBuf,
    /// First start of this silo: its state directory must be empty (or absent), and a fresh
    /// ledger is written there. Without it the silo resumes from its state directory and
    /// refuses to start on one that is missing, empty or damaged (it would answer rounds it
    /// already answered with fresh noise); never pass it on a restart.
    #[arg(long)]
    pub(super) fresh: bool,
    /// Run a federation file that carries a `seed` (a reproducible simulation, `dpfl federate
    /// --seeded`): with the seed, whoever holds the file can recompute this silo's noise, so
    /// its messages are not private. Refused without this flag.
    #[arg(long)]
    pub(super) allow_seeded: bool,
    #[command(flatten)]
    pub(super) connect: ConnectArgs,
}

/// `dpfl shuffler`.
#[derive(Args)]
pub struct ShufflerArgs {
    #[command(flatten)]
    pub(super) process: ProcessArgs,
    #[command(flatten)]
    pub(super) connect: ConnectArgs,
}

/// `dpfl certs init | issue`: the development PKI.
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

/// `dpfl federate`.
#[derive(Args)]
pub struct FederateArgs {
    /// Experiment file (TOML).
    #[arg(long)]
    pub(super) config: PathBuf,
    /// Run every process on 127.0.0.1 (the only mode so far).
    #[arg(long)]
    pub(super) local: bool,
    /// Directory for certificates and private keys, each trial's shards and state
    /// (trial-<t>/), rounds.csv, summary.json and provenance.json. Required: keys and shards
    /// never go to a temporary directory. An existing non-empty one needs --force.
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
    /// Overwrite the files of an existing non-empty --out.
    #[arg(long)]
    pub(super) force: bool,
    /// Route messages through a shuffler, sealed to the server (HPKE).
    #[arg(long)]
    pub(super) shuffle: bool,
    /// Write certificates, shards and federation files of every trial, print the commands of
    /// every trial, start nothing.
    #[arg(long)]
    pub(super) prepare_only: bool,
    /// Per-round deadline in milliseconds.
    #[arg(long, default_value_t = 30_000)]
    pub(super) deadline_ms: u64,
    /// Directory holding the larger data sets (else $DPFL_DATA, else the bundled data).
    #[arg(long)]
    pub(super) data_dir: Option<PathBuf>,
    /// Override the experiment's seed.
    #[arg(long)]
    pub(super) seed: Option<u64>,
    /// A seeded (simulation) federation: write the experiment's seed into every federation
    /// file, so that the run equals `dpfl train` bit for bit. With the seed, the server (and
    /// anyone holding the file) can recompute every silo's noise: never for a deployment.
    /// Without it the files carry no seed (each process draws OS-seeded noise); the seed
    /// still fixes the data split.
    #[arg(long)]
    pub(super) seeded: bool,
}
