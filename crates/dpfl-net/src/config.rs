//! The federation file that every process reads (`dpfl server|silo|shuffler --config FILE`).
//!
//! It names the experiment (model, privacy, participation, algorithms), the public facts the
//! halves are built from (each silo's record count n_i, the feature count, the classes and the
//! gradient bound L, all public in the papers' model), addresses, the certificate directory,
//! deadlines and state directories. Relative paths are relative to the file. `dpfl federate
//! --local --prepare-only` writes one.
//!
//! The processes build their halves from the run's **plan** (`[plan]`, a
//! [`dpfl::plan::Plan`]: the public setup and every silo's calibrated K_i and σ_i), which
//! `dpfl federate` computes once and writes into the file; a process then calibrates nothing
//! and builds only its own half. A hand-written file may leave the plan out and name the
//! experiment instead: [`Federation::load_with`] then asks a [`Planner`] (the `dpfl` binary's
//! reads the experiment) for it. This crate never reads an experiment file itself.
//!
//! ```toml
//! experiment = "experiment.toml"
//! algorithm = 0
//! seed = 7            # reproducible streams: tests only, omit in a deployment
//!
//! [public]
//! records = [120, 118, 121]
//! features = 17
//! classes = 7
//! lipschitz = 2.0
//!
//! [server]
//! address = "127.0.0.1:7000"
//! state_dir = "server"
//! round_deadline_ms = 30000
//! record_models_every = 10   # models.bin: the model after rounds 10, 20, ... and the last
//!
//! [tls]
//! dir = "certs"
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use dpfl::algo::wing::Transport;
use dpfl::algo::{AlgorithmSpec, BuildContext};
use dpfl::plan::Plan;

use crate::error::{NetError, Result};

/// A federation file (`federation.toml`): what every process of one federation reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetConfig {
    /// The experiment TOML the plan comes from (read by a [`Planner`] when `plan` is absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment: Option<PathBuf>,
    /// Index of the experiment's algorithm to train.
    #[serde(default)]
    pub algorithm: usize,
    /// Seed of the silos' and the participation streams, as in the simulator. With a seed
    /// the server could recompute every silo's noise: use it for tests only.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Facts every party may know (n_i, d, classes, L).
    pub public: PublicFacts,
    /// Where and how the server runs.
    pub server: ServerSection,
    /// Present: shuffle mode (messages are sealed to the server and go through the shuffler).
    #[serde(default)]
    pub shuffler: Option<ShufflerSection>,
    /// Where the certificates are.
    pub tls: TlsSection,
    /// Silo state directories and heartbeat.
    #[serde(default)]
    pub silo: SiloSection,
    /// A model card (JSON: feature names, classes, how rows become features; `dpfl federate`
    /// writes `model-card.json`): with it the `dpfl` binary's server saves its final model as
    /// `dpfl train` saves models, for `dpfl predict` / `evaluate`. Opaque to this crate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_card: Option<PathBuf>,
    /// The run's plan, computed once (`dpfl federate` writes it); every process builds its
    /// half from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
}

/// Computes the plan of a federation file that holds none: (experiment file, algorithm
/// index, public facts) → plan. The `dpfl` binary's planner reads the experiment.
pub type Planner<'a> = &'a dyn Fn(&Path, usize, &PublicFacts) -> dpfl::Result<Plan>;

/// Public facts about the federation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicFacts {
    /// n_i for every silo, in silo order (N = its length).
    pub records: Vec<usize>,
    /// Number of features d.
    pub features: usize,
    /// Number of classes (classification) or none (regression).
    #[serde(default)]
    pub classes: Option<usize>,
    /// The per-example gradient bound L the noise is calibrated to.
    pub lipschitz: f64,
    /// Each silo's shard identity (`dpfl_net::shard::ShardId::digest`: a digest of public
    /// facts, not of records), in silo order: `dpfl silo` refuses a shard whose identity is
    /// not its own. `dpfl federate` writes it; absent, shards are not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<Vec<String>>,
}

/// The `[server]` section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    /// host:port the clients connect to; port 0 lets the OS pick (then `address_file` is
    /// how clients learn the port).
    pub address: String,
    /// Where the server writes the address it actually listens on, and clients read it.
    #[serde(default)]
    pub address_file: Option<PathBuf>,
    /// Name the clients verify the server's certificate against.
    #[serde(default = "localhost")]
    pub server_name: String,
    /// Checkpoints, the HPKE key, the round log and the final model.
    pub state_dir: PathBuf,
    /// A round closes at this deadline with whichever messages arrived.
    #[serde(default = "deadline")]
    pub round_deadline_ms: u64,
    /// How long round 0 waits for all silos to register before starting with fewer.
    #[serde(default = "start_timeout")]
    pub start_timeout_ms: u64,
    /// Round 0 starts only once this many silos have registered; fewer by the start timeout
    /// is an error. Default: every silo of `public.records`.
    #[serde(default)]
    pub min_silos: Option<usize>,
    /// A selected silo silent for this long is not waited for.
    #[serde(default = "heartbeat_timeout")]
    pub heartbeat_timeout_ms: u64,
    /// Stop after this many rounds of this process (as a crash would, without the final
    /// model); a later start resumes from the checkpoint.
    #[serde(default)]
    pub stop_after_rounds: Option<usize>,
    /// Minimum duration of a round: paces the federation (fault tests use it to act while
    /// training is under way).
    #[serde(default)]
    pub min_round_ms: u64,
    /// Append the model after every k-th round (and the last) to `models.bin` in the state
    /// directory (`dpfl_net::models`), the rounds `dpfl train` evaluates with `eval_every = k`;
    /// `dpfl federate` sets it to write the simulator's learning curve. Off by default.
    #[serde(default)]
    pub record_models_every: Option<usize>,
}

/// The `[shuffler]` section: where the shuffler listens.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShufflerSection {
    /// host:port the silos connect to; port 0 lets the OS pick.
    pub address: String,
    /// Where the shuffler writes the address it listens on.
    #[serde(default)]
    pub address_file: Option<PathBuf>,
    /// Name the silos verify the shuffler's certificate against.
    #[serde(default = "shuffler_name")]
    pub server_name: String,
}

/// The `[tls]` section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    /// Holds ca.pem and <name>.pem / <name>.key for the participants on this machine.
    pub dir: PathBuf,
}

/// The `[silo]` section.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiloSection {
    /// State directory of silo i: this path with `{id}` replaced by i.
    #[serde(default = "silo_state")]
    pub state_dir: String,
    /// Interval between a silo's heartbeats.
    #[serde(default = "heartbeat")]
    pub heartbeat_ms: u64,
}

impl ServerSection {
    /// A server listening on `address`, with every optional field at its default.
    pub fn new(address: String, state_dir: PathBuf) -> Self {
        ServerSection {
            address,
            address_file: None,
            server_name: localhost(),
            state_dir,
            round_deadline_ms: deadline(),
            start_timeout_ms: start_timeout(),
            min_silos: None,
            heartbeat_timeout_ms: heartbeat_timeout(),
            stop_after_rounds: None,
            min_round_ms: 0,
            record_models_every: None,
        }
    }
}

impl ShufflerSection {
    /// A shuffler listening on `address`, verified under the default name.
    pub fn new(address: String, address_file: Option<PathBuf>) -> Self {
        ShufflerSection {
            address,
            address_file,
            server_name: shuffler_name(),
        }
    }
}

impl Default for SiloSection {
    fn default() -> Self {
        SiloSection {
            state_dir: silo_state(),
            heartbeat_ms: heartbeat(),
        }
    }
}

fn localhost() -> String {
    "localhost".into()
}
fn shuffler_name() -> String {
    "localhost".into()
}
fn deadline() -> u64 {
    30_000
}
fn start_timeout() -> u64 {
    120_000
}
fn heartbeat_timeout() -> u64 {
    6_000
}
fn heartbeat() -> u64 {
    1_000
}
fn silo_state() -> String {
    "silo-{id}".into()
}

/// A loaded federation file with its paths resolved.
#[derive(Debug, Clone)]
pub struct Federation {
    /// The file as written.
    pub config: NetConfig,
    /// The directory relative paths start from.
    pub base: PathBuf,
    /// The run's plan (the file's, or the planner's).
    pub plan: Plan,
    /// The algorithm (the plan's).
    pub algorithm: AlgorithmSpec,
}

impl Federation {
    /// Loads a federation file that holds its plan.
    pub fn load(path: &Path) -> Result<Self> {
        Self::load_with(path, None)
    }

    /// Loads a federation file; without a `[plan]`, `planner` computes it from the experiment
    /// the file names.
    pub fn load_with(path: &Path, planner: Option<Planner<'_>>) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(NetError::io(path))?;
        let mut config: NetConfig = toml::from_str(&text)
            .map_err(|e| NetError::config(path.display().to_string(), e.message().to_string()))?;
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let plan = match (config.plan.take(), &config.experiment, planner) {
            (Some(plan), _, _) => plan,
            (None, Some(exp), Some(planner)) => {
                planner(&base.join(exp), config.algorithm, &config.public)?
            }
            (None, _, _) => {
                return Err(NetError::config(
                    format!("{}: plan", path.display()),
                    "the file holds no [plan]; write it with `dpfl federate --prepare-only`, \
                     or name the experiment and load it with the dpfl binary",
                ));
            }
        };
        let algorithm = plan.algorithm.clone();
        let f = Federation {
            config,
            base,
            plan,
            algorithm,
        };
        f.validate()?;
        Ok(f)
    }

    fn validate(&self) -> Result<()> {
        let p = &self.config.public;
        let setup = &self.plan.setup;
        let records: Vec<usize> = setup.silos.iter().map(|s| s.records).collect();
        // Name the first public fact the plan disagrees with, as the data checks do.
        let field = if let Some(i) = records.iter().zip(&p.records).position(|(a, b)| a != b) {
            Some(format!("public.records[{i}]"))
        } else if records.len() != p.records.len() {
            Some("public.records".to_string())
        } else if setup.features != p.features {
            Some("public.features".to_string())
        } else if setup.classes != p.classes {
            Some("public.classes".to_string())
        } else if setup.lipschitz.to_bits() != p.lipschitz.to_bits() {
            Some("public.lipschitz".to_string())
        } else {
            None
        };
        if let Some(field) = field {
            return Err(NetError::config(
                field,
                "disagrees with the federation's [plan] (plan.setup): the plan was made for \
                 another federation, or [public] was edited after planning",
            ));
        }
        if p.records.is_empty() {
            return Err(NetError::config("public.records", "names no silo"));
        }
        if let Some(i) = p.records.iter().position(|&n| n == 0) {
            return Err(NetError::config(
                format!("public.records[{i}]"),
                "must be at least 1",
            ));
        }
        if p.features == 0 {
            return Err(NetError::config("public.features", "must be at least 1"));
        }
        if let Some(s) = p.shards.as_ref().filter(|s| s.len() != p.records.len()) {
            return Err(NetError::config(
                "public.shards",
                format!("names {} shards for {} silos", s.len(), p.records.len()),
            ));
        }
        if let Some(c) = p.classes.filter(|&c| c < 2) {
            return Err(NetError::config(
                "public.classes",
                format!("must be at least 2, got {c}"),
            ));
        }
        if let Some(m) = self.config.server.min_silos
            && (m == 0 || m > p.records.len())
        {
            return Err(NetError::config(
                "server.min_silos",
                format!(
                    "must be between 1 and the {} silos of public.records, got {m}",
                    p.records.len()
                ),
            ));
        }
        if !(p.lipschitz.is_finite() && p.lipschitz > 0.0) {
            return Err(NetError::config(
                "public.lipschitz",
                format!("must be finite and > 0, got {}", p.lipschitz),
            ));
        }
        if let Some(sh) = &self.config.shuffler {
            let server = &self.config.server;
            let same_file = sh.address_file.is_some() && sh.address_file == server.address_file;
            if same_file || (sh.address == server.address && !sh.address.ends_with(":0")) {
                return Err(NetError::config(
                    "shuffler.address",
                    format!(
                        "{} is also the server's address{}: the shuffler would talk to itself",
                        sh.address,
                        if same_file { " file" } else { "" }
                    ),
                ));
            }
        }
        let needs = self.plan.requirements();
        if needs.shuffler && self.config.shuffler.is_none() {
            // Their privacy against the server rests on the shuffle stage.
            return Err(NetError::config(
                "shuffler",
                "this shuffle-model algorithm needs a [shuffler] section (dpfl federate \
                 --shuffle adds one)",
            ));
        }
        if needs.transport == Transport::PvecExplicit {
            // d·(g + s)·K sealed one-bit messages per silo and round: beyond the runtime's
            // per-reply limits at any useful size.
            return Err(NetError::config(
                "algorithm.transport",
                "\"explicit\" PVEC (one message per bit) runs in the simulator only; over \
                 the network use \"compact\" (the same analyzer distribution)",
            ));
        }
        if self.config.server.round_deadline_ms == 0 {
            return Err(NetError::config("server.round_deadline_ms", "must be > 0"));
        }
        if self.config.server.record_models_every == Some(0) {
            return Err(NetError::config(
                "server.record_models_every",
                "must be at least 1",
            ));
        }
        Ok(())
    }

    /// `p` resolved against the federation file's directory.
    pub fn path(&self, p: &Path) -> PathBuf {
        self.base.join(p)
    }
    /// Number of silos N.
    pub fn silos(&self) -> usize {
        self.config.public.records.len()
    }
    /// Number of rounds R of the plan.
    pub fn rounds(&self) -> usize {
        self.plan.setup.rounds
    }
    /// Whether messages go through a shuffler.
    pub fn shuffle(&self) -> bool {
        self.config.shuffler.is_some()
    }
    /// Whether every round needs every silo's message: the SoteriaFL wing, whose server shift
    /// stays the silos' mean only if no round is short (its server half refuses one).
    pub fn needs_every_silo(&self) -> bool {
        self.plan.requirements().every_silo
    }
    /// Whether the silos send PVEC's compact shares through the shuffler (`share`): the
    /// PVEC-based shuffle algorithms (explicit transport is refused over the network). PAGD
    /// is one: without it its shuffler share went sealed to the server like the server share,
    /// which could pair the two and read each silo's counts.
    pub fn compact_shares(&self) -> bool {
        self.plan.requirements().transport.is_pvec() && self.shuffle()
    }
    /// The certificate directory, resolved.
    pub fn tls_dir(&self) -> PathBuf {
        self.path(&self.config.tls.dir)
    }
    /// The server's state directory, resolved.
    pub fn server_state_dir(&self) -> PathBuf {
        self.path(&self.config.server.state_dir)
    }
    /// Silo `id`'s state directory, resolved.
    pub fn silo_state_dir(&self, id: u32) -> PathBuf {
        self.path(Path::new(
            &self.config.silo.state_dir.replace("{id}", &id.to_string()),
        ))
    }

    /// The public build context: exactly what the simulator builds the halves from.
    pub fn context(&self) -> Result<BuildContext> {
        Ok(self.plan.context()?)
    }

    /// The address of the server (from its address file when one is configured and present).
    pub fn server_address(&self) -> Result<Option<String>> {
        address(
            self,
            &self.config.server.address,
            self.config.server.address_file.as_deref(),
        )
    }

    /// The address of the shuffler (from its address file when one is configured and present); an error without a `[shuffler]` section.
    pub fn shuffler_address(&self) -> Result<Option<String>> {
        match &self.config.shuffler {
            None => Err(NetError::config("shuffler", "no [shuffler] section")),
            Some(s) => address(self, &s.address, s.address_file.as_deref()),
        }
    }
}

fn address(f: &Federation, configured: &str, file: Option<&Path>) -> Result<Option<String>> {
    match file {
        Some(file) => {
            let p = f.path(file);
            match crate::store::read_opt(&p)? {
                Some(b) => Ok(Some(String::from_utf8_lossy(&b).trim().to_string())),
                None if configured.ends_with(":0") => Ok(None),
                None => Ok(Some(configured.to_string())),
            }
        }
        None => Ok(Some(configured.to_string())),
    }
}

pub use crate::budget::{LocalBudget, PlanSpend, check_data, check_plan};
