//! Where an output came from (issue 16 item 7): every output directory of `dpfl train`,
//! `dpfl federate` and `dpfl reproduce` holds `provenance.json` next to its CSVs, JSON and
//! plots — the command, the full configuration as run, the seed, the dpfl version and the git
//! revision of the build, the build profile, the machine and the wall time (issue 32 item 5).
//! A sidecar rather than new fields, so `summary.json`'s array and the
//! CSV headers stay what their readers expect.
//!
//! The revision is embedded by the binary that links this crate (the CLI's `build.rs` runs
//! `git rev-parse`; "unknown" without a `.git`) and handed over with [`set_revision`], so a
//! commit rebuilds only that binary, not this crate.
//!
//! `test_metric` (rounds.csv's column, summary.json's field) is the model's metric on the
//! pooled test rows: the misclassification rate ("test_error") or the RMSE ("test_rmse"); the
//! sidecar names which. A reproduction's `test_error` is the same quantity; its
//! `relative_rmse` is a different one (RMSE over the training-mean predictor's) and is named
//! differently.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Serialize;

/// The file name of the sidecar.
pub const FILE_NAME: &str = "provenance.json";

static REVISION: OnceLock<String> = OnceLock::new();
static STARTED: OnceLock<std::time::Instant> = OnceLock::new();

/// Records the git revision of the running binary (first call wins) and starts the wall
/// clock [`Provenance::write`] reads (the CLI calls this first thing).
pub fn set_revision(rev: &str) {
    let _ = REVISION.set(rev.to_string());
    STARTED.get_or_init(std::time::Instant::now);
}

/// "release" or "debug": whether this crate was compiled with debug assertions (the
/// workspace's release profile turns them off, dev and test keep them).
pub fn build_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// OS, architecture, logical CPUs and (where readable) the host name.
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown host".into());
    format!(
        "{}-{}, {cpus} logical CPUs, {host}",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// The git revision set by [`set_revision`], or "unknown".
pub fn revision() -> &'static str {
    REVISION.get().map_or("unknown", String::as_str)
}

/// The dpfl version (the workspace's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The contents of `provenance.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    /// The dpfl version that wrote the outputs ([`VERSION`]).
    pub dpfl_version: String,
    /// The git revision the binary was built from ("unknown" outside a checkout).
    pub git_revision: String,
    /// The subcommand, e.g. "train".
    pub command: String,
    /// The seed every generator derives from; null when drawn from the operating system, or
    /// when the configuration lists its seeds itself (`config`).
    pub seed: Option<u64>,
    /// The configuration file as named on the command line (None: built in).
    pub config_file: Option<String>,
    /// What `test_metric` holds in this directory's files, where it appears.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_metric: Option<String>,
    /// The configuration as run (after command-line overrides).
    pub config: serde_json::Value,
    /// [`build_profile`] of the binary that wrote the outputs.
    pub build_profile: String,
    /// [`machine`] the outputs were written on.
    pub machine: String,
    /// Seconds from the command's start ([`set_revision`]) to writing this file (null when
    /// the clock was never started, e.g. from a library caller).
    pub wall_seconds: Option<f64>,
}

impl Provenance {
    /// The provenance of `command` run with `config` (as run), `seed` and `config_file`; version
    /// and revision filled in.
    pub fn new(
        command: &str,
        seed: Option<u64>,
        config_file: Option<&Path>,
        config: &impl Serialize,
    ) -> dpfl::Result<Provenance> {
        Ok(Provenance {
            dpfl_version: VERSION.to_string(),
            git_revision: revision().to_string(),
            command: command.to_string(),
            seed,
            config_file: config_file.map(|p| p.display().to_string()),
            test_metric: None,
            config: serde_json::to_value(config)
                .map_err(|e| dpfl::Error::data(FILE_NAME, e.to_string()))?,
            build_profile: build_profile().to_string(),
            machine: machine(),
            wall_seconds: None,
        })
    }

    /// Writes `dir/provenance.json` atomically; returns its path.
    pub fn write(&self, dir: &Path) -> dpfl::Result<PathBuf> {
        let p = dir.join(FILE_NAME);
        let mut me = self.clone();
        if me.wall_seconds.is_none() {
            me.wall_seconds = STARTED.get().map(|t| t.elapsed().as_secs_f64());
        }
        let json = serde_json::to_string_pretty(&me)
            .map_err(|e| dpfl::Error::data(FILE_NAME, e.to_string()))?;
        crate::output::atomic_write(&p, (json + "\n").as_bytes())?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecar_names_version_revision_seed_and_config() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Provenance::new(
            "train",
            Some(7),
            Some(Path::new("e.toml")),
            &serde_json::json!({"rounds": 3}),
        )
        .unwrap();
        p.test_metric = Some("test_error".into());
        let f = p.write(dir.path()).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        assert_eq!(v["dpfl_version"], VERSION);
        assert_eq!(v["git_revision"], revision());
        assert_eq!(v["seed"], 7);
        assert_eq!(v["config"]["rounds"], 3);
        assert_eq!(v["config_file"], "e.toml");
        assert_eq!(v["test_metric"], "test_error");
        assert_eq!(v["build_profile"], build_profile());
        assert!(v["machine"].as_str().unwrap().contains("logical CPUs"));
        assert!(v.get("wall_seconds").is_some());
    }
}
