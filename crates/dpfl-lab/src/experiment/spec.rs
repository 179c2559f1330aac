//! The experiment file: [`ExperimentSpec`] and its sections (privacy, algorithms), parsed and
//! checked once.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::datasource::DataSpec;
use dpfl::algo::AlgorithmSpec;
use dpfl::model::{ModelSpec, Projection};
use dpfl::sim::Participation;

/// A whole experiment, as read from TOML.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSpec {
    /// The name written into the outputs (`summary.json`, `model.json`).
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
    /// Where the records come from and how they become silos.
    pub data: DataSpec,
    /// The model kind (logistic, softmax, MLP, …) and its parameters.
    pub model: ModelSpec,
    /// Every silo's (ε, δ) and the gradient bound L; `None` for a non-private experiment.
    #[serde(default)]
    pub privacy: Option<PrivacySpec>,
    /// Which silos take part in each round (all, a fixed M, Bernoulli availability).
    #[serde(default)]
    pub participation: Participation,
    /// The set W the iterates are projected onto (none by default).
    #[serde(default)]
    pub projection: Projection,
    /// Per-example L2 clip threshold C (applies to all algorithms).
    #[serde(default)]
    pub clip: Option<f64>,
    /// The algorithms run, each on the same trials and data.
    pub algorithms: Vec<AlgorithmEntry>,
    /// A non-finite training loss or test metric is an error (exit code 1) unless this is
    /// set: for sweeps where a diverging setting is an expected result.
    #[serde(default)]
    pub expect_divergence: bool,
    /// Append the extended per-round metrics to `rounds.csv` (`experiment::metrics`); default
    /// on for the SoteriaFL wing's algorithms, off otherwise.
    #[serde(default)]
    pub extended_metrics: Option<bool>,
}

fn one() -> usize {
    1
}

/// One algorithm of an experiment with an optional display label.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct AlgorithmEntry {
    /// The name in the outputs; default: the algorithm's [`AlgorithmSpec::default_label`].
    #[serde(default)]
    pub label: Option<String>,
    /// The algorithm and its parameters (flattened into the entry's table).
    #[serde(flatten)]
    pub spec: AlgorithmSpec,
}

impl AlgorithmEntry {
    /// The name in the outputs (`label` if given, else the algorithm's default).
    pub fn label(&self) -> String {
        self.label
            .clone()
            .unwrap_or_else(|| self.spec.default_label())
    }
}

/// δ as a number or as "1/n^2" (n = the silo's number of training records; the paper's rule).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "DeltaRaw", into = "DeltaRaw")]
pub enum DeltaSpec {
    /// A fixed δ ∈ (0, 1).
    Value(f64),
    /// δ as a function of the silo's record count n.
    Rule(DeltaRule),
}

/// A δ rule in terms of the silo's record count n.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaRule {
    /// δ = 1/n² (the paper's), written `"1/n^2"`.
    OneOverNSquared,
    /// δ = 1/n, written `"1/n"`.
    OneOverN,
}

/// How δ is written in a file: a number or a rule (spaces ignored).
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
enum DeltaRaw {
    Value(f64),
    Rule(String),
}

impl TryFrom<DeltaRaw> for DeltaSpec {
    type Error = String;
    fn try_from(raw: DeltaRaw) -> Result<Self, String> {
        match raw {
            DeltaRaw::Value(d) => Ok(DeltaSpec::Value(d)),
            DeltaRaw::Rule(s) => match s.replace(' ', "").as_str() {
                "1/n^2" => Ok(DeltaSpec::Rule(DeltaRule::OneOverNSquared)),
                "1/n" => Ok(DeltaSpec::Rule(DeltaRule::OneOverN)),
                _ => Err(format!(
                    "privacy.delta: expected a number, \"1/n^2\" or \"1/n\", got {s:?}"
                )),
            },
        }
    }
}

impl From<DeltaSpec> for DeltaRaw {
    fn from(d: DeltaSpec) -> DeltaRaw {
        match d {
            DeltaSpec::Value(v) => DeltaRaw::Value(v),
            DeltaSpec::Rule(DeltaRule::OneOverNSquared) => DeltaRaw::Rule("1/n^2".into()),
            DeltaSpec::Rule(DeltaRule::OneOverN) => DeltaRaw::Rule("1/n".into()),
        }
    }
}

impl DeltaSpec {
    /// δ for a silo of `n` training records (1/n² or 1/n for the rules).
    pub fn resolve(&self, n: usize) -> dpfl::Result<f64> {
        Ok(match self {
            DeltaSpec::Value(d) => *d,
            DeltaSpec::Rule(DeltaRule::OneOverNSquared) => 1.0 / (n as f64 * n as f64),
            DeltaSpec::Rule(DeltaRule::OneOverN) => 1.0 / n as f64,
        })
    }
}

/// The ISRL-DP budget of every silo and the gradient bound the noise is calibrated to.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrivacySpec {
    /// ε of every silo (overridden per silo by `epsilons`): the target each silo's noise is
    /// calibrated to. Exactly one of `epsilon` and `noise_multiplier` is given.
    #[serde(default)]
    pub epsilon: Option<f64>,
    /// The noise multiplier z set directly, as Opacus users do, instead of a target ε: every
    /// silo adds σ = z·Δ, Δ the L2 sensitivity of its message as its algorithm defines it
    /// (e.g. 2L/K for a minibatch mean under replace-one), and the run reports the ε its
    /// accountants certify for that noise at `delta` (summary table, `summary.json`,
    /// `report.html`). For the Gaussian algorithms only (Lowy's MB-SGD, noisy MB-SGD, AC-SA
    /// and Local SGD; SoteriaFL, CDP-SGD, LDP-SGD and Q-DPSGD-1 with the SGD or GD
    /// estimator); rules that read a target ε (default batch sizes, `params = "theory"`) need
    /// explicit values. Not with `epsilons` or `enforce_budget` (there is no budget to
    /// enforce; each silo's ledger still charges every release and caps them at R).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_multiplier: Option<f64>,
    /// δ of every silo: a number or a rule of n ("1/n^2").
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NoiseKind {
    /// Continuous N(0, σ²) per coordinate.
    #[default]
    Gaussian,
    /// The discrete Gaussian on a grid (exact integer sampler), see
    /// [`dpfl_privacy::GaussianNoise`].
    DiscreteGaussian,
}

impl PrivacySpec {
    /// Exactly one of `epsilon` and `noise_multiplier`, and `noise_multiplier` without the
    /// settings that need a target ε; errors name the fields.
    pub fn check_target(&self) -> dpfl::Result<()> {
        match (self.epsilon, self.noise_multiplier) {
            (Some(_), Some(_)) => Err(dpfl::Error::config(
                "privacy.epsilon, privacy.noise_multiplier",
                "give exactly one: a target epsilon to calibrate the noise to, or the noise \
                 multiplier z itself (both were given)",
            )),
            (None, None) => Err(dpfl::Error::config(
                "privacy.epsilon, privacy.noise_multiplier",
                "give exactly one: a target epsilon to calibrate the noise to, or the noise \
                 multiplier z itself (neither was given)",
            )),
            (None, Some(z)) => {
                if !(z.is_finite() && z > 0.0) {
                    return Err(dpfl::Error::config(
                        "privacy.noise_multiplier",
                        format!("must be finite and > 0, got {z}"),
                    ));
                }
                if self.epsilons.is_some() {
                    return Err(dpfl::Error::config(
                        "privacy.epsilons",
                        "per-silo targets need privacy.epsilon, not privacy.noise_multiplier",
                    ));
                }
                if self.enforce_budget {
                    return Err(dpfl::Error::config(
                        "privacy.enforce_budget",
                        "needs a target privacy.epsilon to enforce; with \
                         privacy.noise_multiplier each silo's ledger still charges every \
                         release and caps them at R, and the run reports the certified epsilon",
                    ));
                }
                Ok(())
            }
            (Some(_), None) => Ok(()),
        }
    }

    /// The target ε of silo `i` (`epsilons[i]`, else `epsilon`); `None` with a noise
    /// multiplier.
    pub fn target_epsilon(&self, i: usize) -> Option<f64> {
        self.epsilons
            .as_ref()
            .and_then(|es| es.get(i).copied())
            .or(self.epsilon)
    }

    /// The noise of `mechanism` and `granularity`; errors name the field.
    pub fn noise(&self) -> dpfl::Result<dpfl_privacy::GaussianNoise> {
        use dpfl_privacy::GaussianNoise;
        let noise = match (self.mechanism, self.granularity) {
            (NoiseKind::Gaussian, None) => GaussianNoise::Gaussian,
            (NoiseKind::Gaussian, Some(_)) => {
                return Err(dpfl::Error::config(
                    "privacy.granularity",
                    "only applies to mechanism = \"discrete-gaussian\"",
                ));
            }
            (NoiseKind::DiscreteGaussian, None) => {
                return Err(dpfl::Error::config(
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
            .map_err(|e| dpfl::Error::config("privacy.granularity", e.to_string()))?;
        Ok(noise)
    }
}

/// Deserialises TOML `text` read from `origin`; a syntax or schema error names the file and
/// the line it starts on.
pub(crate) fn parse_toml<T: serde::de::DeserializeOwned>(
    text: &str,
    origin: &str,
) -> dpfl::Result<T> {
    toml::from_str(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
            .unwrap_or(0);
        dpfl::Error::Parse {
            path: origin.into(),
            line,
            reason: e.message().to_string(),
        }
    })
}

impl ExperimentSpec {
    /// Parses and checks a TOML experiment; errors name the file and the field.
    pub fn from_toml(text: &str, origin: &str) -> dpfl::Result<Self> {
        let spec: ExperimentSpec = parse_toml(text, origin)?;
        spec.validate()?;
        Ok(spec)
    }

    /// Reads, parses and checks an experiment TOML file (errors name the file, line and field).
    pub fn from_file(path: &std::path::Path) -> dpfl::Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| dpfl::Error::Io {
            path: path.into(),
            source,
        })?;
        Self::from_toml_at(&text, path)
    }

    /// Checks every field that can be checked without the data.
    pub fn validate(&self) -> dpfl::Result<()> {
        if self.rounds == 0 {
            return Err(dpfl::Error::config("rounds", "must be at least 1"));
        }
        if self.trials == 0 {
            return Err(dpfl::Error::config("trials", "must be at least 1"));
        }
        if self.eval_every == Some(0) {
            return Err(dpfl::Error::config(
                "eval_every",
                "must be at least 1 (evaluate every k-th round)",
            ));
        }
        if self.algorithms.is_empty() {
            return Err(dpfl::Error::config(
                "algorithms",
                "name at least one algorithm",
            ));
        }
        if let Some(c) = self.clip
            && !(c.is_finite() && c > 0.0)
        {
            return Err(dpfl::Error::config(
                "clip",
                format!("must be finite and > 0, got {c}"),
            ));
        }
        if let Projection::L2Ball { radius } = self.projection
            && !(radius.is_finite() && radius > 0.0)
        {
            return Err(dpfl::Error::config(
                "projection.radius",
                format!("must be finite and > 0, got {radius}"),
            ));
        }
        if let Some(p) = &self.privacy {
            p.check_target()?;
            if let Some(e) = p.epsilon {
                dpfl_privacy::Epsilon::new(e)
                    .map_err(|e| dpfl::Error::config("privacy.epsilon", e.to_string()))?;
            }
            if let Some(es) = &p.epsilons {
                for (i, &e) in es.iter().enumerate() {
                    dpfl_privacy::Epsilon::new(e).map_err(|err| {
                        dpfl::Error::config(format!("privacy.epsilons[{i}]"), err.to_string())
                    })?;
                }
            }
            p.noise()?;
            if let DeltaSpec::Value(d) = p.delta {
                dpfl_privacy::Delta::new(d)
                    .map_err(|e| dpfl::Error::config("privacy.delta", e.to_string()))?;
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
                    return Err(dpfl::Error::config(
                        name,
                        format!("must be finite and > 0, got {v}"),
                    ));
                }
            }
        }
        let fixed = self
            .privacy
            .as_ref()
            .is_some_and(|p| p.noise_multiplier.is_some());
        for (i, a) in self.algorithms.iter().enumerate() {
            if fixed && a.spec.is_private() && !a.spec.accepts_noise_multiplier() {
                return Err(dpfl::Error::config(
                    "privacy.noise_multiplier",
                    format!(
                        "{} (algorithms[{i}]) does not take a noise multiplier: {}; set \
                         privacy.epsilon instead",
                        a.label(),
                        a.spec.noise_multiplier_refusal()
                    ),
                ));
            }
            if a.spec.is_private() && self.privacy.is_none() {
                return Err(dpfl::Error::config(
                    format!("algorithms[{i}]"),
                    format!(
                        "{} is private but the experiment has no [privacy] section",
                        a.label()
                    ),
                ));
            }
            // Every algorithm's parameters, checked once before any trains (its guard).
            a.spec
                .check()
                .map_err(|e| dpfl::Error::from(e).in_algorithm(i, &a.label()))?;
        }
        if needs_public_l(self) {
            return Err(missing_public_l());
        }
        Ok(())
    }
}

/// A private experiment that names no source for L at all.
pub(super) fn needs_public_l(spec: &ExperimentSpec) -> bool {
    spec.privacy
        .as_ref()
        .is_some_and(|p| p.lipschitz.is_none() && p.lipschitz_from_data.is_none())
        && spec.clip.is_none()
        && spec.algorithms.iter().any(|a| a.spec.is_private())
}

pub(super) fn missing_public_l() -> dpfl::Error {
    dpfl::Error::config(
        "privacy.lipschitz",
        "a private run needs a public gradient bound: set `privacy.lipschitz` or `clip` (the \
         noise is calibrated to it and every per-example gradient is clipped at it); \
         `privacy.lipschitz_from_data` derives it from the data instead, which is reported as \
         not end-to-end private",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct D {
        delta: DeltaSpec,
    }

    #[test]
    fn delta_rules_are_checked_when_read_and_resolve_per_silo() {
        let d: D = toml::from_str("delta = \"1 / n^2\"").unwrap();
        assert_eq!(d.delta, DeltaSpec::Rule(DeltaRule::OneOverNSquared));
        assert_eq!(d.delta.resolve(10).unwrap(), 0.01);
        let d: D = toml::from_str("delta = \"1/n\"").unwrap();
        assert_eq!(d.delta.resolve(4).unwrap(), 0.25);
        let d: D = toml::from_str("delta = 1e-5").unwrap();
        assert_eq!(d.delta.resolve(4).unwrap(), 1e-5);
        let e = toml::from_str::<D>("delta = \"1/n^3\"")
            .err()
            .expect("an unknown rule is refused")
            .to_string();
        assert!(e.contains("expected a number, \"1/n^2\" or \"1/n\""), "{e}");
        // Written back in its canonical form.
        let json = serde_json::to_string(&DeltaSpec::Rule(DeltaRule::OneOverN)).unwrap();
        assert_eq!(json, "\"1/n\"");
    }
}
