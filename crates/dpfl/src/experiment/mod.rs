//! Experiments as data: a TOML file names the data set and its partition into silos, the
//! model, the privacy budget, the participation, and the algorithms; [`run`] trains each
//! algorithm in the simulator and returns per-round metrics and a summary.
//!
//! ```toml
//! name = "obesity"
//! rounds = 100
//! seed = 1
//! participation = { kind = "fixed", m = 3 }
//!
//! [data]
//! source = { kind = "obesity" }
//! partition = { kind = "by-class" }
//! balance = true
//!
//! [model]
//! kind = "softmax"
//!
//! [privacy]
//! epsilon = 1.0
//! delta = "1/n^2"
//! lipschitz = 2.0       # public: gradients are clipped at L and the noise calibrated to it
//!
//! [[algorithms]]
//! kind = "mb-sgd"
//! calibration = "experiment"
//! step_size = 0.05
//! ```

use std::time::Instant;

use serde::{Deserialize, Serialize};

use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

use crate::algo::{AlgorithmSpec, FederationInfo, SiloInfo};
use crate::algo::{BuildContext, SiloCalibration};
use crate::data::SiloData;
use crate::model::{GradientOracle, Model, ModelSpec, Projection};
use crate::sim::{Participation, Simulator};

pub mod datasource;
pub use datasource::DataSpec;
mod output;
pub use output::{check_finite, write_outputs};
pub mod paths;

/// A whole experiment, as read from TOML.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSpec {
    pub name: String,
    /// Master seed; without one every generator is seeded from the operating system.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Rounds R.
    pub rounds: usize,
    /// Independent repetitions, each with a fresh split of the data.
    #[serde(default = "one")]
    pub trials: usize,
    /// Evaluate every this many rounds (default: every round up to 200 rounds, else R/100).
    #[serde(default)]
    pub eval_every: Option<usize>,
    pub data: DataSpec,
    pub model: ModelSpec,
    #[serde(default)]
    pub privacy: Option<PrivacySpec>,
    #[serde(default)]
    pub participation: Participation,
    #[serde(default)]
    pub projection: Projection,
    /// Per-example L2 clip threshold C (applies to all algorithms).
    #[serde(default)]
    pub clip: Option<f64>,
    pub algorithms: Vec<AlgorithmEntry>,
    /// A non-finite training loss or test metric is an error (exit code 1) unless this is
    /// set: for sweeps where a diverging setting is an expected result.
    #[serde(default)]
    pub expect_divergence: bool,
}

fn one() -> usize {
    1
}

/// One algorithm of an experiment with an optional display label.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlgorithmEntry {
    #[serde(default)]
    pub label: Option<String>,
    #[serde(flatten)]
    pub spec: AlgorithmSpec,
}

impl AlgorithmEntry {
    pub fn label(&self) -> String {
        self.label
            .clone()
            .unwrap_or_else(|| self.spec.default_label())
    }
}

/// δ as a number or as "1/n^2" (n = the silo's number of training records; the paper's rule).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DeltaSpec {
    Value(f64),
    Rule(String),
}

impl DeltaSpec {
    pub fn resolve(&self, n: usize) -> crate::Result<f64> {
        match self {
            DeltaSpec::Value(d) => Ok(*d),
            DeltaSpec::Rule(s) if s.replace(' ', "") == "1/n^2" => Ok(1.0 / (n as f64 * n as f64)),
            DeltaSpec::Rule(s) if s.replace(' ', "") == "1/n" => Ok(1.0 / n as f64),
            DeltaSpec::Rule(s) => Err(crate::Error::config(
                "privacy.delta",
                format!("expected a number, \"1/n^2\" or \"1/n\", got {s:?}"),
            )),
        }
    }
}

/// The ISRL-DP budget of every silo and the gradient bound the noise is calibrated to.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrivacySpec {
    /// ε of every silo (overridden per silo by `epsilons`).
    pub epsilon: f64,
    pub delta: DeltaSpec,
    /// Per-silo ε_i (unbalanced budgets, App. H); length N.
    #[serde(default)]
    pub epsilons: Option<Vec<f64>>,
    /// The per-example gradient bound L. Every per-example gradient is clipped at L, so the
    /// bound holds for any record.
    #[serde(default)]
    pub lipschitz: Option<f64>,
    /// Set L = factor · max‖x‖ over the pooled training rows of all silos (the paper's rule,
    /// e.g. 2). σ ∝ L then reveals max‖x‖ to the server and every silo, so a run using it is
    /// reported as **not end-to-end private** (stdout and `summary.json`). For reproducing the
    /// paper only; ignored when `lipschitz` is set.
    #[serde(default)]
    pub lipschitz_from_data: Option<f64>,
    /// Each silo charges an in-memory ledger (RDP accountant, replace-one) with its
    /// (ε_i, δ_i) and refuses a round that would cross it; the run then fails with a
    /// budget error. Off by default: the papers' closed-form calibrations are reported
    /// against the accountant (summary `privacy`), not enforced.
    #[serde(default)]
    pub enforce_budget: bool,
    /// The noise every Gaussian algorithm adds: `"gaussian"` (continuous, floating point) or
    /// `"discrete-gaussian"` (exact integer sampling on the grid `granularity`·ℤ; Canonne,
    /// Kamath & Steinke 2020). See `dpfl_privacy::mechanism::GaussianMechanism`.
    #[serde(default)]
    pub mechanism: NoiseKind,
    /// The grid γ of `mechanism = "discrete-gaussian"` (messages are rounded to multiples of
    /// it; the sensitivity grows by γ√d).
    #[serde(default)]
    pub granularity: Option<f64>,
}

/// `privacy.mechanism`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoiseKind {
    #[default]
    Gaussian,
    DiscreteGaussian,
}

impl PrivacySpec {
    /// The noise of `mechanism` and `granularity`; errors name the field.
    pub fn noise(&self) -> crate::Result<dpfl_privacy::GaussianNoise> {
        use dpfl_privacy::GaussianNoise;
        let noise = match (self.mechanism, self.granularity) {
            (NoiseKind::Gaussian, None) => GaussianNoise::Gaussian,
            (NoiseKind::Gaussian, Some(_)) => {
                return Err(crate::Error::config(
                    "privacy.granularity",
                    "only applies to mechanism = \"discrete-gaussian\"",
                ));
            }
            (NoiseKind::DiscreteGaussian, None) => {
                return Err(crate::Error::config(
                    "privacy.granularity",
                    "mechanism = \"discrete-gaussian\" needs the grid, e.g. granularity = 1e-6",
                ));
            }
            (NoiseKind::DiscreteGaussian, Some(g)) => {
                GaussianNoise::DiscreteGaussian { granularity: g }
            }
        };
        noise
            .validate()
            .map_err(|e| crate::Error::config("privacy.granularity", e.to_string()))?;
        Ok(noise)
    }
}

/// Deserialises TOML `text` read from `origin`; a syntax or schema error names the file and
/// the line it starts on.
pub(crate) fn parse_toml<T: serde::de::DeserializeOwned>(
    text: &str,
    origin: &str,
) -> crate::Result<T> {
    toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
            .unwrap_or(0);
        crate::Error::Parse {
            path: origin.into(),
            line,
            reason: e.message().to_string(),
        }
    })
}

impl ExperimentSpec {
    /// Parses and checks a TOML experiment; errors name the file and the field.
    pub fn from_toml(text: &str, origin: &str) -> crate::Result<Self> {
        let spec: ExperimentSpec = parse_toml(text, origin)?;
        spec.validate()?;
        Ok(spec)
    }

    pub fn from_file(path: &std::path::Path) -> crate::Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| crate::Error::Io {
            path: path.into(),
            source,
        })?;
        Self::from_toml_at(&text, path)
    }

    /// Checks every field that can be checked without the data.
    pub fn validate(&self) -> crate::Result<()> {
        if self.rounds == 0 {
            return Err(crate::Error::config("rounds", "must be at least 1"));
        }
        if self.trials == 0 {
            return Err(crate::Error::config("trials", "must be at least 1"));
        }
        if self.algorithms.is_empty() {
            return Err(crate::Error::config(
                "algorithms",
                "name at least one algorithm",
            ));
        }
        if let Some(c) = self.clip
            && !(c.is_finite() && c > 0.0)
        {
            return Err(crate::Error::config(
                "clip",
                format!("must be finite and > 0, got {c}"),
            ));
        }
        if let Projection::L2Ball { radius } = self.projection
            && !(radius.is_finite() && radius > 0.0)
        {
            return Err(crate::Error::config(
                "projection.radius",
                format!("must be finite and > 0, got {radius}"),
            ));
        }
        if let Some(p) = &self.privacy {
            dpfl_privacy::Epsilon::new(p.epsilon)
                .map_err(|e| crate::Error::config("privacy.epsilon", e.to_string()))?;
            if let Some(es) = &p.epsilons {
                for (i, &e) in es.iter().enumerate() {
                    dpfl_privacy::Epsilon::new(e).map_err(|err| {
                        crate::Error::config(format!("privacy.epsilons[{i}]"), err.to_string())
                    })?;
                }
            }
            p.noise()?;
            if let DeltaSpec::Value(d) = p.delta {
                dpfl_privacy::Delta::new(d)
                    .map_err(|e| crate::Error::config("privacy.delta", e.to_string()))?;
            } else {
                p.delta.resolve(2)?;
            }
            for (name, v) in [
                ("privacy.lipschitz", p.lipschitz),
                ("privacy.lipschitz_from_data", p.lipschitz_from_data),
            ] {
                if let Some(v) = v
                    && !(v.is_finite() && v > 0.0)
                {
                    return Err(crate::Error::config(
                        name,
                        format!("must be finite and > 0, got {v}"),
                    ));
                }
            }
        }
        for (i, a) in self.algorithms.iter().enumerate() {
            if a.spec.is_private() && self.privacy.is_none() {
                return Err(crate::Error::config(
                    format!("algorithms[{i}]"),
                    format!(
                        "{} is private but the experiment has no [privacy] section",
                        a.label()
                    ),
                ));
            }
            if let Some(eta) = a.spec.explicit_step_size()
                && !(eta.is_finite() && eta > 0.0)
            {
                return Err(crate::Error::config(
                    format!("algorithms[{i}].step_size"),
                    format!("must be finite and > 0, got {eta}"),
                ));
            }
        }
        if needs_public_l(self) {
            return Err(missing_public_l());
        }
        Ok(())
    }
}

/// One evaluated round.
#[derive(Debug, Clone, Serialize)]
pub struct RoundRow {
    pub trial: usize,
    pub round: usize,
    pub algorithm: String,
    pub train_loss: f64,
    pub test_metric: f64,
}

/// The outcome of one algorithm (averaged over trials).
#[derive(Debug, Clone, Serialize)]
pub struct AlgorithmSummary {
    pub algorithm: String,
    pub private: bool,
    /// Target ε (the smallest over silos when budgets differ); null if non-private.
    pub epsilon: Option<f64>,
    pub delta: Option<f64>,
    /// Noise std per coordinate (largest over silos).
    pub sigma: f64,
    /// Records (or local steps) per round, K (smallest over silos).
    pub batch_size: usize,
    pub rounds: usize,
    /// The paper's M (1/M = E[1/M_r]).
    pub participants: f64,
    pub final_train_loss: f64,
    pub test_metric: f64,
    pub metric: String,
    pub trials: usize,
    pub wall_seconds: f64,
    /// Per-silo calibration of the first trial.
    pub silos: Vec<SiloCalibration>,
    /// Per-silo target (ε, δ) and the accountants' ε at that δ for the noise actually used
    /// (first trial); empty if non-private.
    pub privacy: Vec<SiloPrivacy>,
    /// False when the guarantee above does not hold end to end (see `caveats`); true for
    /// non-private runs, which promise nothing.
    pub end_to_end_private: bool,
    /// What qualifies the guarantee: a data-derived L ([`DATA_DERIVED_L_CAVEAT`]), a seeded
    /// run ([`SEEDED_CAVEAT`]).
    pub caveats: Vec<String>,
    /// Per-example gradients with a NaN or infinite coordinate, replaced by zero before
    /// clipping (summed over silos and rounds, first trial); null where the runner cannot
    /// see the silos' counts (network runs).
    pub nonfinite_gradients: Option<u64>,
}

/// The caveat of a seeded run: one seed recomputes every silo's noise.
pub const SEEDED_CAVEAT: &str = "seeded run: one seed (the experiment's `seed`) determines \
     every silo's noise, so anyone who knows it can subtract the noise; the guarantee holds \
     only against parties who do not know the seed (simulation, not deployment). Omit `seed` \
     to draw every generator from the operating system.";

/// One silo's promised and accounted privacy.
#[derive(Debug, Clone, Serialize)]
pub struct SiloPrivacy {
    pub silo: usize,
    /// The paper's target (ε_i, δ_i).
    pub target_epsilon: f64,
    pub target_delta: f64,
    /// ε at `target_delta` of the events the silo released, by the RDP accountant
    /// (replace-one neighbouring); null if it cannot account them (see `notes`).
    pub rdp_epsilon: Option<f64>,
    /// The same by the PLD accountant (for sampled Gaussians under replace-one, the Balle,
    /// Barthe & Gaboardi 2018 profile: `dpfl_privacy::accountant::sampled_pld`).
    pub pld_epsilon: Option<f64>,
    /// A lower bound on the true ε at `target_delta` from a concrete neighbouring pair
    /// (`dpfl_privacy::accountant::lower_bound`); null where no pair is implemented.
    #[serde(default)]
    pub lower_epsilon: Option<f64>,
    /// Why an accountant gave no number.
    pub notes: Vec<String>,
}

impl AlgorithmSummary {
    /// The largest accounted ε over silos (None if any silo has none).
    pub fn max_accounted_epsilon(&self, pld: bool) -> Option<f64> {
        if self.privacy.is_empty() {
            return None;
        }
        self.privacy
            .iter()
            .map(|p| if pld { p.pld_epsilon } else { p.rdp_epsilon })
            .try_fold(0.0f64, |m, e| e.map(|e| m.max(e)))
    }

    /// The certified ε: per silo the tighter of the two sound accountants, largest over
    /// silos (None if some silo has neither).
    pub fn max_certified_epsilon(&self) -> Option<f64> {
        if self.privacy.is_empty() {
            return None;
        }
        self.privacy
            .iter()
            .map(|p| match (p.rdp_epsilon, p.pld_epsilon) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            })
            .try_fold(0.0f64, |m, e| e.map(|e| m.max(e)))
    }

    /// The largest lower bound on the true ε over silos (None if some silo has none).
    pub fn max_lower_epsilon(&self) -> Option<f64> {
        if self.privacy.is_empty() {
            return None;
        }
        self.privacy
            .iter()
            .map(|p| p.lower_epsilon)
            .try_fold(0.0f64, |m, e| e.map(|e| m.max(e)))
    }
}

/// Accounting is deterministic in (event, δ, accountant) and grid searches repeat the same
/// calibrated events many times: remember the answers.
#[allow(clippy::type_complexity)]
fn memo_epsilon(
    key: String,
    compute: impl FnOnce() -> Result<Option<f64>, String>,
) -> Result<Option<f64>, String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static MEMO: OnceLock<Mutex<HashMap<String, Result<Option<f64>, String>>>> = OnceLock::new();
    let memo = MEMO.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(v) = memo.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return v;
    }
    let v = compute();
    if let Ok(mut m) = memo.lock() {
        m.insert(key, v.clone());
    }
    v
}

/// Accounts each silo's released events at its own target δ (replace-one, the relation the
/// noise is calibrated in).
fn silo_privacy(
    spec: &ExperimentSpec,
    trial: &TrialData,
    spent: &[Vec<dpfl_privacy::PrivacyEvent>],
) -> Vec<SiloPrivacy> {
    use dpfl_privacy::accountant::AccountantKind;
    let Some(p) = &spec.privacy else {
        return Vec::new();
    };
    spent
        .iter()
        .enumerate()
        .map(|(i, events)| {
            let target_epsilon = p
                .epsilons
                .as_ref()
                .and_then(|es| es.get(i).copied())
                .unwrap_or(p.epsilon);
            let n = trial.silos.get(i).map_or(1, |s| s.train.len());
            let target_delta = p.delta.resolve(n).unwrap_or(f64::NAN);
            let mut notes = Vec::new();
            let mut account = |kind: AccountantKind| -> Option<f64> {
                let d = match dpfl_privacy::Delta::new(target_delta) {
                    Ok(d) => d,
                    Err(e) => {
                        notes.push(format!("{kind}: {e}"));
                        return None;
                    }
                };
                if events.is_empty() {
                    return Some(0.0);
                }
                let all = dpfl_privacy::PrivacyEvent::Composed(events.clone());
                let key = format!("{kind}|{}|{all}", d.get());
                let nb = dpfl_privacy::Neighbouring::ReplaceOne;
                match memo_epsilon(key, || {
                    kind.epsilon(nb, &all, d)
                        .map(Some)
                        .map_err(|e| e.to_string())
                }) {
                    Ok(e) => e,
                    Err(e) => {
                        notes.push(format!("{kind}: {e}"));
                        None
                    }
                }
            };
            let rdp_epsilon = account(AccountantKind::Rdp);
            let pld_epsilon = account(AccountantKind::Pld);
            let lower_epsilon = match dpfl_privacy::Delta::new(target_delta) {
                Ok(_) if events.is_empty() => Some(0.0),
                Ok(d) => {
                    let all = dpfl_privacy::PrivacyEvent::Composed(events.clone());
                    let key = format!("lower|{}|{all}", d.get());
                    match memo_epsilon(key, || {
                        dpfl_privacy::accountant::lower_bound::epsilon_lower_bound(
                            &all,
                            dpfl_privacy::Neighbouring::ReplaceOne,
                            d,
                        )
                        .map_err(|e| e.to_string())
                    }) {
                        Ok(e) => e,
                        Err(e) => {
                            notes.push(format!("lower bound: {e}"));
                            None
                        }
                    }
                }
                Err(_) => None,
            };
            SiloPrivacy {
                silo: i,
                target_epsilon,
                target_delta,
                rdp_epsilon,
                pld_epsilon,
                lower_epsilon,
                notes,
            }
        })
        .collect()
}

/// Everything a run produces.
#[derive(Debug, Clone, Serialize)]
pub struct RunOutput {
    pub rounds: Vec<RoundRow>,
    pub summary: Vec<AlgorithmSummary>,
}

/// Progress callback: (algorithm index, trial, rounds done in this run).
pub type Progress<'p> = &'p (dyn Fn(usize, usize, usize) + Sync);

/// Prepared data for one trial, with the public facts derived from it.
pub struct TrialData {
    pub silos: Vec<SiloData>,
    pub model: std::sync::Arc<dyn Model>,
}

/// Loads and splits the data for trial `trial` and builds the model.
pub fn prepare_trial(
    spec: &ExperimentSpec,
    data_dir: Option<&std::path::Path>,
    rng: &mut DpRng,
) -> crate::Result<TrialData> {
    let silos = spec.data.load(data_dir, rng)?;
    let first = silos
        .first()
        .ok_or_else(|| crate::Error::config("data.partition", "produced no silos"))?;
    let features = first.train.num_features();
    let classes = first.train.target().num_classes();
    let model = spec.model.build(features, classes)?;
    for (i, s) in silos.iter().enumerate() {
        // The model does not fit the data: a config error like any other wrong model kind.
        model
            .check_data(&s.train)
            .map_err(|e| crate::Error::config("model.kind", format!("silo {i}: {e}")))?;
        if s.train.is_empty() {
            return Err(crate::Error::data(
                format!("silo {i}"),
                "has no training rows",
            ));
        }
    }
    Ok(TrialData { silos, model })
}

/// The caveat a run with a data-derived L carries in its report and `summary.json`.
pub const DATA_DERIVED_L_CAVEAT: &str = "not end-to-end private: the gradient bound L was \
     derived from the training data (privacy.lipschitz_from_data = factor * max||x|| over all \
     silos' rows); the noise scale sigma, proportional to L, reveals it to the server and every \
     silo. Set a public privacy.lipschitz or clip for an end-to-end guarantee.";

/// Whether the gradient bound L of `spec` is public (`privacy.lipschitz` or `clip`), as the
/// noise calibration must be for the run's guarantee to be end to end: σ ∝ L is visible in
/// every message's scale. A private experiment with neither is refused by [`lipschitz`]
/// unless it asks for the data-derived `privacy.lipschitz_from_data`.
pub fn lipschitz_is_public(spec: &ExperimentSpec) -> bool {
    let p = spec.privacy.as_ref();
    p.and_then(|p| p.lipschitz).is_some()
        || (p.and_then(|p| p.lipschitz_from_data).is_none() && spec.clip.is_some())
}

/// A private experiment that names no source for L at all.
fn needs_public_l(spec: &ExperimentSpec) -> bool {
    spec.privacy
        .as_ref()
        .is_some_and(|p| p.lipschitz.is_none() && p.lipschitz_from_data.is_none())
        && spec.clip.is_none()
        && spec.algorithms.iter().any(|a| a.spec.is_private())
}

fn missing_public_l() -> crate::Error {
    crate::Error::config(
        "privacy.lipschitz",
        "a private run needs a public gradient bound: set `privacy.lipschitz` or `clip` (the \
         noise is calibrated to it and every per-example gradient is clipped at it); \
         `privacy.lipschitz_from_data` derives it from the data instead, which is reported as \
         not end-to-end private",
    )
}

/// The gradient bound L of an experiment on given data. In order: `privacy.lipschitz`,
/// `privacy.lipschitz_from_data` (data-derived, reported as not end-to-end private), `clip`;
/// with none of them an experiment with a private algorithm is refused (naming
/// `privacy.lipschitz`) and any other uses the model's bound at the data's largest row norm.
pub fn lipschitz(
    spec: &ExperimentSpec,
    model: &dyn Model,
    silos: &[SiloData],
) -> crate::Result<f64> {
    let max_norm = || {
        silos
            .iter()
            .map(|s| s.train.max_row_norm())
            .fold(0.0, f64::max)
    };
    let p = spec.privacy.as_ref();
    if let Some(l) = p.and_then(|p| p.lipschitz) {
        return Ok(l);
    }
    if let Some(f) = p.and_then(|p| p.lipschitz_from_data) {
        return Ok(f * max_norm());
    }
    if let Some(c) = spec.clip {
        return Ok(c);
    }
    if needs_public_l(spec) {
        return Err(missing_public_l());
    }
    model.lipschitz(max_norm()).ok_or_else(|| {
        crate::Error::config(
            "privacy.lipschitz",
            format!(
                "the {} loss is not Lipschitz: set `clip` or `privacy.lipschitz`",
                model.name()
            ),
        )
    })
}

/// Builds the public context for one algorithm on one trial's data.
pub fn build_context(spec: &ExperimentSpec, trial: &TrialData) -> crate::Result<BuildContext> {
    let records: Vec<usize> = trial.silos.iter().map(|s| s.train.len()).collect();
    let l = lipschitz(spec, trial.model.as_ref(), &trial.silos)?;
    build_context_from(spec, trial.model.clone(), &records, l)
}

/// The public context from public facts only: the model (without data), every silo's record
/// count n_i and the gradient bound L. A network server or silo, which holds no other silo's
/// data, builds exactly the simulator's halves from this.
pub fn build_context_from(
    spec: &ExperimentSpec,
    model: std::sync::Arc<dyn Model>,
    records: &[usize],
    l: f64,
) -> crate::Result<BuildContext> {
    let n_silos = records.len();
    spec.participation.validate(n_silos)?;
    let silos = records
        .iter()
        .enumerate()
        .map(|(i, &n_i)| {
            let budget = match &spec.privacy {
                None => None,
                Some(p) => {
                    let eps = match &p.epsilons {
                        Some(es) if es.len() != n_silos => {
                            return Err(crate::Error::config(
                                "privacy.epsilons",
                                format!("has {} entries for {n_silos} silos", es.len()),
                            ));
                        }
                        Some(es) => es[i],
                        None => p.epsilon,
                    };
                    let delta = p.delta.resolve(n_i)?;
                    dpfl_privacy::Delta::new(delta)
                        .map_err(|e| crate::Error::config("privacy.delta", e.to_string()))?;
                    Some((eps, delta))
                }
            };
            Ok(SiloInfo {
                id: i as u32,
                records: n_i,
                budget,
            })
        })
        .collect::<crate::Result<Vec<_>>>()?;
    Ok(BuildContext {
        federation: FederationInfo {
            dim: model.num_params(),
            silos: n_silos,
            rounds: spec.rounds,
            expected_participants: spec.participation.effective_m(n_silos),
        },
        silos,
        init: vec![0.0; model.num_params()],
        oracle: GradientOracle::new(model, spec.clip)?,
        lipschitz: l,
        projection: spec.projection,
        noise: match &spec.privacy {
            Some(p) => p.noise()?,
            None => Default::default(),
        },
    })
}

/// Result of training one algorithm once.
pub struct SingleRun {
    pub curve: Vec<(usize, f64, f64)>,
    pub final_model: Vec<f64>,
    pub final_train_loss: f64,
    pub test_metric: f64,
    pub calibration: Vec<SiloCalibration>,
    pub spent: Vec<Vec<dpfl_privacy::PrivacyEvent>>,
    pub wall_seconds: f64,
    /// Per-example gradients with a NaN or infinite coordinate, replaced by zero before
    /// clipping (all silos and rounds); `None` where the runner cannot see the silos' counts
    /// (the network runtime).
    pub nonfinite_gradients: Option<u64>,
}

/// Trains one algorithm on one trial's data. `seed` fixes the silos' and network's streams.
pub fn train_one(
    spec: &ExperimentSpec,
    algorithm: &AlgorithmSpec,
    trial: &TrialData,
    seed: Option<u64>,
    eval_every: usize,
    mut progress: impl FnMut(usize),
) -> crate::Result<SingleRun> {
    let start = Instant::now();
    let ctx = build_context(spec, trial)?;
    let built = algorithm.build(&ctx)?;
    let calibration = built.calibration.clone();
    let mut sim = Simulator::new(&trial.silos, built, spec.participation.clone(), seed)?;
    if spec.privacy.as_ref().is_some_and(|p| p.enforce_budget) && algorithm.is_private() {
        let ledgers = ctx
            .silos
            .iter()
            .map(|s| {
                s.budget
                    .map(|(eps, delta)| {
                        let b = dpfl_privacy::ledger::Budget::new(
                            eps,
                            delta,
                            dpfl_privacy::Neighbouring::ReplaceOne,
                        )?;
                        Ok::<_, crate::Error>(dpfl_privacy::ledger::Ledger::in_memory(
                            b,
                            dpfl_privacy::accountant::AccountantKind::Rdp,
                        ))
                    })
                    .transpose()
            })
            .collect::<crate::Result<Vec<_>>>()?;
        sim.attach_ledgers(ledgers)?;
    }
    let model = trial.model.as_ref();
    let mut curve = Vec::new();
    for r in 0..spec.rounds {
        sim.step()?;
        // The round core leaves a refusing silo out of its round; a simulated experiment,
        // though, plans every round within every silo's budget, so a refusal means the plan
        // does not fit the budget: report it rather than finish a different experiment.
        if let Some((silo, refusal)) = sim.take_refusals().into_iter().next() {
            return Err(match refusal.privacy {
                Some(e) => e.into(),
                None => crate::Error::Protocol(format!("silo {silo}: {refusal}")),
            });
        }
        if is_eval_round(r + 1, eval_every, spec.rounds) {
            let w = sim.output();
            curve.push((r + 1, sim.train_loss(model, &w), sim.test_metric(model, &w)));
        }
        progress(r + 1);
    }
    let w = sim.output();
    Ok(SingleRun {
        final_train_loss: sim.train_loss(model, &w),
        test_metric: sim.test_metric(model, &w),
        final_model: w,
        curve,
        calibration,
        spent: sim.spent(),
        wall_seconds: start.elapsed().as_secs_f64(),
        nonfinite_gradients: Some(ctx.oracle.nonfinite_gradients()),
    })
}

/// The generator [`run`] draws every trial's data and seed from.
pub fn master_rng(spec: &ExperimentSpec) -> crate::Result<DpRng> {
    Ok(DpRng::new(spec.seed, Purpose::Data, 0)?)
}

/// The next trial's data and seed, drawn from `master` exactly as [`run`] does (so a network
/// run of trial 0 uses the simulator's split and streams).
pub fn next_trial(
    spec: &ExperimentSpec,
    data_dir: Option<&std::path::Path>,
    master: &mut DpRng,
) -> crate::Result<(TrialData, Option<u64>)> {
    let mut data_rng = master.fork();
    let trial_seed = spec.seed.map(|_| master.next_seed());
    let trial = prepare_trial(spec, data_dir, &mut data_rng)?;
    Ok((trial, trial_seed))
}

/// The seed of algorithm `a` within a trial.
pub fn algorithm_seed(trial_seed: Option<u64>, a: usize) -> Option<u64> {
    trial_seed.map(|s| s ^ (a as u64) << 40)
}

/// Runs every algorithm of `spec` for every trial.
pub fn run(
    spec: &ExperimentSpec,
    data_dir: Option<&std::path::Path>,
    progress: Progress<'_>,
) -> crate::Result<RunOutput> {
    spec.validate()?;
    let mut master = master_rng(spec)?;
    let eval_every = eval_every(spec);
    let mut acc = RunAccumulator::new(spec);
    for t in 0..spec.trials {
        let (trial, trial_seed) = next_trial(spec, data_dir, &mut master)?;
        for (a, entry) in spec.algorithms.iter().enumerate() {
            let label = entry.label();
            let run = train_one(
                spec,
                &entry.spec,
                &trial,
                algorithm_seed(trial_seed, a),
                eval_every,
                |r| progress(a, t, r),
            )
            .map_err(|e| match e {
                crate::Error::Config { field, reason } => crate::Error::Config {
                    field: format!("algorithms[{a}] ({label}): {field}"),
                    reason,
                },
                other => other,
            })?;
            acc.add(spec, a, t, &trial, &run);
        }
    }
    Ok(acc.finish())
}

/// The evaluation period of an experiment: `eval_every`, by default every round up to 200
/// rounds and R/100 beyond.
pub fn eval_every(spec: &ExperimentSpec) -> usize {
    spec.eval_every
        .unwrap_or(if spec.rounds <= 200 {
            1
        } else {
            spec.rounds / 100
        })
        .max(1)
}

pub use crate::round::is_eval_round;

/// Turns runs into `rounds.csv` rows and per-algorithm summaries averaged over trials. Both
/// [`run`] and the network runner (`dpfl federate`) feed their runs through it, so their
/// outputs are averaged the same way (same order of additions, bit for bit).
pub struct RunAccumulator {
    rows: Vec<RoundRow>,
    acc: Vec<Option<AlgorithmSummary>>,
}

impl RunAccumulator {
    pub fn new(spec: &ExperimentSpec) -> Self {
        RunAccumulator {
            rows: Vec::new(),
            acc: vec![None; spec.algorithms.len()],
        }
    }

    /// Adds trial `t`'s run of algorithm `a`: its curve as rows, its summary to the average.
    /// Call in trial order; the first run of an algorithm gives the summary's per-trial facts
    /// (calibration, accounted privacy), as documented on [`AlgorithmSummary`]. `a` indexes
    /// `spec.algorithms` (a caller's bug otherwise: panics).
    pub fn add(
        &mut self,
        spec: &ExperimentSpec,
        a: usize,
        t: usize,
        trial: &TrialData,
        run: &SingleRun,
    ) {
        let entry = &spec.algorithms[a];
        let label = entry.label();
        for &(round, train_loss, test_metric) in &run.curve {
            self.rows.push(RoundRow {
                trial: t,
                round,
                algorithm: label.clone(),
                train_loss,
                test_metric,
            });
        }
        match &mut self.acc[a] {
            slot @ None => *slot = Some(summary_of(spec, entry, trial, run)),
            Some(s) => {
                s.final_train_loss += run.final_train_loss;
                s.test_metric += run.test_metric;
                s.wall_seconds += run.wall_seconds;
                s.trials += 1;
            }
        }
    }

    /// The rows in the order added and the summaries averaged over their trials.
    pub fn finish(self) -> RunOutput {
        let summary = self
            .acc
            .into_iter()
            .flatten()
            .map(|mut s| {
                s.final_train_loss /= s.trials as f64;
                s.test_metric /= s.trials as f64;
                s
            })
            .collect();
        RunOutput {
            rounds: self.rows,
            summary,
        }
    }
}

/// The summary row of one run (as in `summary.json`).
pub fn summary_of(
    spec: &ExperimentSpec,
    entry: &AlgorithmEntry,
    trial: &TrialData,
    run: &SingleRun,
) -> AlgorithmSummary {
    let private = entry.spec.is_private();
    let (epsilon, delta) = match (&spec.privacy, private) {
        (Some(p), true) => {
            let eps = p.epsilons.as_ref().map_or(p.epsilon, |es| {
                es.iter().copied().fold(f64::INFINITY, f64::min)
            });
            let n_min = trial.silos.iter().map(|s| s.train.len()).min().unwrap_or(1);
            (Some(eps), p.delta.resolve(n_min).ok())
        }
        _ => (None, None),
    };
    AlgorithmSummary {
        algorithm: entry.label(),
        private,
        epsilon,
        delta,
        sigma: run.calibration.iter().map(|c| c.sigma).fold(0.0, f64::max),
        batch_size: run
            .calibration
            .iter()
            .map(|c| c.batch_size)
            .min()
            .unwrap_or(0),
        rounds: spec.rounds,
        participants: spec.participation.effective_m(trial.silos.len()),
        final_train_loss: run.final_train_loss,
        test_metric: run.test_metric,
        metric: match trial.model.metric() {
            crate::model::Metric::ErrorRate => "test_error".into(),
            crate::model::Metric::Rmse => "test_rmse".into(),
        },
        trials: 1,
        wall_seconds: run.wall_seconds,
        silos: run.calibration.clone(),
        privacy: if private {
            silo_privacy(spec, trial, &run.spent)
        } else {
            Vec::new()
        },
        end_to_end_private: !private || lipschitz_is_public(spec),
        caveats: run_caveats(spec, private),
        nonfinite_gradients: run.nonfinite_gradients,
    }
}

/// The caveats of a private run's guarantee (empty for a non-private one).
pub fn run_caveats(spec: &ExperimentSpec, private: bool) -> Vec<String> {
    let mut c = Vec::new();
    if private && !lipschitz_is_public(spec) {
        c.push(DATA_DERIVED_L_CAVEAT.to_string());
    }
    if private && spec.seed.is_some() {
        c.push(SEEDED_CAVEAT.to_string());
    }
    c
}
