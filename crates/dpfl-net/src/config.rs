//! The federation file that every process reads (`dpfl server|silo|shuffler --config FILE`).
//!
//! It names the experiment (model, privacy, participation, algorithms), the public facts the
//! halves are built from (each silo's record count n_i, the feature count, the classes and the
//! gradient bound L, all public in the papers' model), addresses, the certificate directory,
//! deadlines and state directories. Relative paths are relative to the file. `dpfl federate
//! --local --prepare-only` writes one.
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

use dpfl::algo::{AlgorithmSpec, BuildContext};
use dpfl::experiment::ExperimentSpec;

use crate::error::{NetError, Result};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetConfig {
    /// The experiment TOML.
    pub experiment: PathBuf,
    /// Index of the experiment's algorithm to train.
    #[serde(default)]
    pub algorithm: usize,
    /// Seed of the silos' and the participation streams, as in the simulator. With a seed
    /// the server could recompute every silo's noise: use it for tests only.
    #[serde(default)]
    pub seed: Option<u64>,
    pub public: PublicFacts,
    pub server: ServerSection,
    /// Present: shuffle mode (messages are sealed to the server and go through the shuffler).
    #[serde(default)]
    pub shuffler: Option<ShufflerSection>,
    pub tls: TlsSection,
    #[serde(default)]
    pub silo: SiloSection,
}

/// Public facts about the federation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicFacts {
    /// n_i for every silo, in silo order (N = its length).
    pub records: Vec<usize>,
    pub features: usize,
    /// Number of classes (classification) or none (regression).
    #[serde(default)]
    pub classes: Option<usize>,
    /// The per-example gradient bound L the noise is calibrated to.
    pub lipschitz: f64,
}

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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShufflerSection {
    pub address: String,
    #[serde(default)]
    pub address_file: Option<PathBuf>,
    #[serde(default = "shuffler_name")]
    pub server_name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    /// Holds ca.pem and <name>.pem / <name>.key for the participants on this machine.
    pub dir: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiloSection {
    /// State directory of silo i: this path with `{id}` replaced by i.
    #[serde(default = "silo_state")]
    pub state_dir: String,
    #[serde(default = "heartbeat")]
    pub heartbeat_ms: u64,
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
    pub config: NetConfig,
    pub base: PathBuf,
    pub spec: ExperimentSpec,
    pub algorithm: AlgorithmSpec,
}

impl Federation {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(NetError::io(path))?;
        let config: NetConfig = toml::from_str(&text)
            .map_err(|e| NetError::config(path.display().to_string(), e.message().to_string()))?;
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let exp = base.join(&config.experiment);
        let spec = ExperimentSpec::from_file(&exp)?;
        let algorithm = spec
            .algorithms
            .get(config.algorithm)
            .ok_or_else(|| {
                NetError::config(
                    "algorithm",
                    format!(
                        "index {} but the experiment has {} algorithms",
                        config.algorithm,
                        spec.algorithms.len()
                    ),
                )
            })?
            .spec
            .clone();
        let f = Federation {
            config,
            base,
            spec,
            algorithm,
        };
        f.validate()?;
        Ok(f)
    }

    fn validate(&self) -> Result<()> {
        let p = &self.config.public;
        if p.records.is_empty() {
            return Err(NetError::config("public.records", "names no silo"));
        }
        if let Some(i) = p.records.iter().position(|&n| n == 0) {
            return Err(NetError::config(
                format!("public.records[{i}]"),
                "must be at least 1",
            ));
        }
        if !(p.lipschitz.is_finite() && p.lipschitz > 0.0) {
            return Err(NetError::config(
                "public.lipschitz",
                format!("must be finite and > 0, got {}", p.lipschitz),
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

    pub fn path(&self, p: &Path) -> PathBuf {
        self.base.join(p)
    }
    pub fn silos(&self) -> usize {
        self.config.public.records.len()
    }
    pub fn rounds(&self) -> usize {
        self.spec.rounds
    }
    pub fn shuffle(&self) -> bool {
        self.config.shuffler.is_some()
    }
    pub fn tls_dir(&self) -> PathBuf {
        self.path(&self.config.tls.dir)
    }
    pub fn server_state_dir(&self) -> PathBuf {
        self.path(&self.config.server.state_dir)
    }
    pub fn silo_state_dir(&self, id: u32) -> PathBuf {
        self.path(Path::new(
            &self.config.silo.state_dir.replace("{id}", &id.to_string()),
        ))
    }

    /// The public build context: exactly what the simulator builds the halves from.
    pub fn context(&self) -> Result<BuildContext> {
        let p = &self.config.public;
        let model = self.spec.model.build(p.features, p.classes)?;
        Ok(dpfl::experiment::build_context_from(
            &self.spec,
            model,
            &p.records,
            p.lipschitz,
        )?)
    }

    /// The address of the server (from its address file when one is configured and present).
    pub fn server_address(&self) -> Result<Option<String>> {
        address(
            self,
            &self.config.server.address,
            self.config.server.address_file.as_deref(),
        )
    }

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
