//! What a config file names for the DP-NormFedAvg family (Das et al.; digest §3, §5.3–5.4):
//! the variant, the local optimiser, the step-size schedules η_k and β_k, and the QTDL /
//! Binomial privacy settings. Every field is checked once, by the spec's guard
//! ([`ParamGuard`] → [`CheckedNormFedAvg`], what planning takes), with an error naming the
//! field.

use serde::{Deserialize, Serialize};

use crate::algo::checked::{
    ParamError, ParamGuard, at_least_one, non_negative, positive, unit_interval,
};

/// Which algorithm of the paper.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Variant {
    /// FedAvg (Algorithm 3): silos send d = w_k − w_{k,E}; w_{k+1} = w_k − β_k·mean(d)
    /// (β_k = 1 is the paper's plain model average).
    FedAvg,
    /// NormFedAvg (Remark 3): the exact unit vector d/‖d‖, no quantisation, no privacy.
    NormFedAvg,
    /// DP-NormFedAvg (Algorithm 2): d/‖d‖ → Q_s → + TDL noise, t-bit integers.
    DpNormFedAvg,
    /// The clipping baseline of experiment (ii): d·min(1, C/‖d‖) → Q_s → + TDL noise
    /// (per client; C ≤ 1 so that the worst-case sensitivities hold).
    Clipping {
        /// C.
        clip: f64,
    },
    /// The Binomial baseline of experiment (i): d/‖d‖ → Q_s → + Bin(N, ½) − N/2 (cpSGD Thm 1).
    Binomial,
}

impl Variant {
    /// Whether the variant adds noise.
    pub fn is_private(&self) -> bool {
        !matches!(self, Variant::FedAvg | Variant::NormFedAvg)
    }
    /// The tables' name of the variant.
    pub fn label(&self) -> String {
        match self {
            Variant::FedAvg => "FedAvg".into(),
            Variant::NormFedAvg => "NormFedAvg".into(),
            Variant::DpNormFedAvg => "DP-NormFedAvg".into(),
            Variant::Clipping { clip } => format!("Clipping+TDL (C = {clip})"),
            Variant::Binomial => "Binomial".into(),
        }
    }
}

/// The server step β_k.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum BetaSchedule {
    /// β_k = beta.
    Constant {
        /// β.
        beta: f64,
    },
    /// β_k = `values[j]` for `from[j]` ≤ k < `from[j+1]` (digest §5.4's phases); `from[0]` = 0,
    /// strictly increasing.
    Piecewise {
        /// The first round of each phase.
        from: Vec<u32>,
        /// β of each phase.
        values: Vec<f64>,
    },
    /// β_k = factor·η_k (experiment (iv): β_k = 50η_k, 100η_k).
    Proportional {
        /// β_k/η_k.
        factor: f64,
    },
}

impl Default for BetaSchedule {
    fn default() -> Self {
        BetaSchedule::Constant { beta: 1.0 }
    }
}

impl BetaSchedule {
    /// Checks the schedule's parameters, naming the field.
    pub fn check(&self) -> Result<(), ParamError> {
        let f = "beta";
        match self {
            BetaSchedule::Constant { beta } => positive(f, *beta).map(|_| ()),
            BetaSchedule::Proportional { factor } => positive(f, *factor).map(|_| ()),
            BetaSchedule::Piecewise { from, values } => {
                if from.is_empty() || from.len() != values.len() {
                    return Err(ParamError::refused(
                        f,
                        format!(
                            "piecewise needs as many `from` rounds as `values` (≥ 1), got {} and {}",
                            from.len(),
                            values.len()
                        ),
                    ));
                }
                if from[0] != 0 {
                    return Err(ParamError::refused(
                        f,
                        "the first phase must start at round 0",
                    ));
                }
                if let Some(w) = from.windows(2).find(|w| w[0] >= w[1]) {
                    return Err(ParamError::refused(
                        f,
                        format!("phase starts must increase: {} then {}", w[0], w[1]),
                    ));
                }
                values.iter().try_for_each(|v| positive(f, *v).map(|_| ()))
            }
        }
    }

    /// β_k given η_k.
    pub fn at(&self, k: u32, eta_k: f64) -> f64 {
        match self {
            BetaSchedule::Constant { beta } => *beta,
            BetaSchedule::Proportional { factor } => factor * eta_k,
            BetaSchedule::Piecewise { from, values } => {
                let j = from.partition_point(|&f| f <= k).max(1) - 1;
                values[j]
            }
        }
    }
}

/// The local step η_k = η₀·decay^k (digest §5.3, after Bottou).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EtaSchedule {
    /// η₀.
    pub eta0: f64,
    /// The per-round factor (the paper's 0.99).
    pub decay: f64,
}

impl EtaSchedule {
    /// η₀ > 0 and decay ∈ (0, 1].
    pub fn check(&self) -> Result<(), ParamError> {
        positive("step_size", self.eta0)?;
        unit_interval("step_decay", self.decay)?;
        Ok(())
    }
    /// η_k.
    pub fn at(&self, k: u32) -> f64 {
        self.eta0 * self.decay.powi(k as i32)
    }
}

/// The per-client sensitivities the noise is calibrated to (digest §6.1 item 5).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SensitivitySpec {
    /// Δ∞ = 2s, Δ₁ = 2ds, Δ₂ = 2s + 2√d: valid for every pair of neighbours.
    WorstCase,
    /// Theorem 3 (A1 + A3 with growth constant ρ = `rho`): valid with probability ≥ 1 − 4(ρ−1)/n_i,
    /// which is added to the round's δ (Corollary 3.1).
    Theorem3 {
        /// ρ > 1.
        rho: f64,
    },
    /// The experiments' eq. 6 with a chosen μ: an assumption, not a guarantee.
    Mu {
        /// μ.
        mu: f64,
    },
}

/// The privacy target of a private variant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum BudgetSpec {
    /// Every message (`epsilon`, `delta`)-DP (experiment (i)); δ is the target of the corrected TDL
    /// calibration and the Binomial's δ.
    PerRound {
        /// ε per message.
        epsilon: f64,
        /// δ per message.
        delta: f64,
    },
    /// The whole run (ε, δ) by Theorem 2: ε₀ = ε/(8√(2K ln(1/δ))) per round (K = planned
    /// rounds, r = expected participants); the corrected calibration targets δ/K per round.
    Total {
        /// ε of the run.
        epsilon: f64,
        /// δ of the run.
        delta: f64,
    },
}

/// How m of the TDL noise is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TdlCalibration {
    /// The smallest m whose *correct* δ meets the target (dpfl's default).
    #[default]
    Corrected,
    /// Theorem 1's m, whose claimed δ = 2^−d is wrong for d ≥ 2: for reproducing the paper's
    /// bit counts only; the round's event carries the correct δ (≈ 1).
    PaperClaim,
}

/// QTDL / Binomial settings of a private variant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuantPrivacy {
    /// Quantisation resolution s (a power of two, as in every experiment of the paper).
    pub s: u64,
    /// Where the sensitivities Δ₁, Δ₂, Δ∞ come from.
    pub sensitivity: SensitivitySpec,
    /// The per-round or total budget.
    pub budget: BudgetSpec,
    /// Theorem 1's m or dpfl's corrected m.
    #[serde(default)]
    pub calibration: TdlCalibration,
}

/// The DP-NormFedAvg family, as named in a config (`kind = "norm-fed-avg"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NormFedAvgSpec {
    /// Which algorithm of the family.
    pub variant: Variant,
    /// η₀.
    pub step_size: f64,
    /// η_k = η₀·step_decay^k; the paper's 0.99.
    #[serde(default = "default_decay")]
    pub step_decay: f64,
    /// The server's step β_k.
    #[serde(default)]
    pub beta: BetaSchedule,
    /// E.
    #[serde(default = "default_local_steps")]
    pub local_steps: usize,
    /// Minibatch size (drawn without replacement, min(B, n_i)).
    #[serde(default = "default_batch")]
    pub batch_size: usize,
    /// Heavy-ball momentum (PyTorch's form), buffer reset every round.
    #[serde(default = "default_momentum")]
    pub momentum: f64,
    /// PyTorch-style weight decay: λw added to every minibatch gradient.
    #[serde(default = "default_weight_decay")]
    pub weight_decay: f64,
    /// The QTDL/Binomial settings (private variants only).
    #[serde(default)]
    pub privacy: Option<QuantPrivacy>,
}

fn default_decay() -> f64 {
    0.99
}
fn default_local_steps() -> usize {
    20
}
fn default_batch() -> usize {
    256
}
fn default_momentum() -> f64 {
    0.9
}
fn default_weight_decay() -> f64 {
    1e-4
}

impl NormFedAvgSpec {
    /// A spec with the paper's defaults (E = 20, B = 256, momentum 0.9, λ = 1e−4, 0.99^k).
    pub fn new(variant: Variant, step_size: f64, beta: BetaSchedule) -> Self {
        NormFedAvgSpec {
            variant,
            step_size,
            step_decay: default_decay(),
            beta,
            local_steps: default_local_steps(),
            batch_size: default_batch(),
            momentum: default_momentum(),
            weight_decay: default_weight_decay(),
            privacy: None,
        }
    }

    /// The local step schedule.
    pub fn eta(&self) -> EtaSchedule {
        EtaSchedule {
            eta0: self.step_size,
            decay: self.step_decay,
        }
    }

    /// The variant's label with its resolution s.
    pub fn label(&self) -> String {
        match (&self.variant, &self.privacy) {
            (Variant::DpNormFedAvg | Variant::Binomial, Some(p)) => {
                format!("{} (s = {})", self.variant.label(), p.s)
            }
            (v, _) => v.label(),
        }
    }
}

/// A DP-NormFedAvg spec whose every field passed its guard: what planning takes.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedNormFedAvg(NormFedAvgSpec);

impl CheckedNormFedAvg {
    /// The checked spec.
    pub fn spec(&self) -> &NormFedAvgSpec {
        &self.0
    }
}

/// Every field against the variant.
impl ParamGuard for NormFedAvgSpec {
    type Checked = CheckedNormFedAvg;
    fn check(&self) -> Result<CheckedNormFedAvg, ParamError> {
        self.eta().check()?;
        self.beta.check()?;
        at_least_one("local_steps", self.local_steps)?;
        at_least_one("batch_size", self.batch_size)?;
        if !(self.momentum >= 0.0 && self.momentum < 1.0) {
            return Err(ParamError::OutOfRange {
                field: "momentum".into(),
                range: "[0, 1)",
                value: self.momentum,
            });
        }
        non_negative("weight_decay", self.weight_decay)?;
        match (self.variant.is_private(), &self.privacy) {
            (false, Some(_)) => {
                return Err(ParamError::refused(
                    "privacy",
                    format!("{} is not private; remove `privacy`", self.variant.label()),
                ));
            }
            (true, None) => {
                return Err(ParamError::missing(
                    "privacy",
                    format!(
                        "{} needs `privacy` (s, sensitivity, budget)",
                        self.variant.label()
                    ),
                ));
            }
            (true, Some(p)) => check_privacy(self.variant, p)?,
            (false, None) => {}
        }
        Ok(CheckedNormFedAvg(self.clone()))
    }
}

fn check_privacy(variant: Variant, p: &QuantPrivacy) -> Result<(), ParamError> {
    if p.s == 0 || !p.s.is_power_of_two() || p.s > dpfl_privacy::qtdl::quantizer::MAX_S {
        return Err(ParamError::refused(
            "privacy.s",
            format!("must be a power of two in [1, 2^40], got {}", p.s),
        ));
    }
    let (eps, delta) = match p.budget {
        BudgetSpec::PerRound { epsilon, delta } | BudgetSpec::Total { epsilon, delta } => {
            (epsilon, delta)
        }
    };
    positive("privacy.budget.epsilon", eps)?;
    if !(delta > 0.0 && delta < 1.0) {
        return Err(ParamError::OutOfRange {
            field: "privacy.budget.delta".into(),
            range: "(0, 1)",
            value: delta,
        });
    }
    match p.sensitivity {
        SensitivitySpec::WorstCase => {}
        SensitivitySpec::Theorem3 { rho } if !(rho.is_finite() && rho > 1.0) => {
            return Err(ParamError::refused(
                "privacy.sensitivity.rho",
                format!("Theorem 3's growth constant must be finite and > 1, got {rho}"),
            ));
        }
        SensitivitySpec::Mu { mu } if !(mu.is_finite() && mu > 0.0 && mu <= 2.0) => {
            return Err(ParamError::OutOfRange {
                field: "privacy.sensitivity.mu".into(),
                range: "(0, 2] (μ = 2 is the trivial bound)",
                value: mu,
            });
        }
        SensitivitySpec::Theorem3 { .. } | SensitivitySpec::Mu { .. } => {}
    }
    if let Variant::Clipping { clip } = variant {
        if !(clip.is_finite() && clip > 0.0 && clip <= 1.0) {
            return Err(ParamError::OutOfRange {
                field: "variant.clip".into(),
                range: "(0, 1] (the worst-case sensitivities assume coordinates in [-1, 1])",
                value: clip,
            });
        }
        if p.sensitivity != SensitivitySpec::WorstCase {
            return Err(ParamError::refused(
                "privacy.sensitivity",
                "clipping needs `worst-case`: Theorem 3 and eq. 6 are about unit vectors",
            ));
        }
    }
    if variant == Variant::Binomial && !matches!(p.budget, BudgetSpec::PerRound { .. }) {
        return Err(ParamError::refused(
            "privacy.budget",
            "the Binomial baseline is per-round only (experiment (i))",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::checked::ParamGuard;

    #[test]
    fn schedules_follow_the_paper_and_refuse_bad_steps() {
        // Fig. 2's DP-NormFedAvg: 0.02 for k < 100, then 0.01.
        let b = BetaSchedule::Piecewise {
            from: vec![0, 100],
            values: vec![0.02, 0.01],
        };
        b.check().unwrap();
        assert_eq!(b.at(0, 1.0), 0.02);
        assert_eq!(b.at(99, 1.0), 0.02);
        assert_eq!(b.at(100, 1.0), 0.01);
        assert_eq!(b.at(5000, 1.0), 0.01);
        // η_k = 0.05·0.99^k, β_k = 50 η_k: at k = 2, 0.05·0.9801 = 0.049005 and 2.45025.
        let eta = EtaSchedule {
            eta0: 0.05,
            decay: 0.99,
        };
        assert!((eta.at(2) - 0.049005).abs() < 1e-15);
        let p = BetaSchedule::Proportional { factor: 50.0 };
        assert!((p.at(2, eta.at(2)) - 2.45025).abs() < 1e-12);
        for bad in [
            BetaSchedule::Constant { beta: -0.1 },
            BetaSchedule::Piecewise {
                from: vec![0, 100],
                values: vec![0.1, -0.05],
            },
            BetaSchedule::Piecewise {
                from: vec![1],
                values: vec![0.1],
            },
            BetaSchedule::Piecewise {
                from: vec![0, 100, 100],
                values: vec![0.1, 0.1, 0.1],
            },
            BetaSchedule::Piecewise {
                from: vec![0],
                values: vec![],
            },
        ] {
            let e = bad.check().unwrap_err().to_string();
            assert!(e.starts_with("beta"), "{e}");
        }
        assert!(
            EtaSchedule {
                eta0: -1.0,
                decay: 0.99
            }
            .check()
            .is_err()
        );
        assert!(
            EtaSchedule {
                eta0: 0.1,
                decay: 1.5
            }
            .check()
            .is_err()
        );
    }

    #[test]
    fn bad_privacy_settings_name_their_field() {
        let mut s = NormFedAvgSpec::new(Variant::DpNormFedAvg, 0.01, BetaSchedule::default());
        assert!(
            s.check()
                .unwrap_err()
                .to_string()
                .starts_with("privacy is required")
        );
        let p = QuantPrivacy {
            s: 4096,
            sensitivity: SensitivitySpec::Mu { mu: 0.1 },
            budget: BudgetSpec::PerRound {
                epsilon: 10.0,
                delta: 1e-9,
            },
            calibration: TdlCalibration::Corrected,
        };
        s.privacy = Some(p);
        s.check().unwrap();
        for (bad, field) in [
            (QuantPrivacy { s: 0, ..p }, "privacy.s:"),
            (QuantPrivacy { s: 48, ..p }, "privacy.s:"),
            (
                QuantPrivacy {
                    budget: BudgetSpec::PerRound {
                        epsilon: -1.0,
                        delta: 1e-9,
                    },
                    ..p
                },
                "epsilon",
            ),
            (
                QuantPrivacy {
                    sensitivity: SensitivitySpec::Theorem3 { rho: 0.5 },
                    ..p
                },
                "rho",
            ),
        ] {
            s.privacy = Some(bad);
            let e = s.check().unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
        s.variant = Variant::Clipping { clip: 2.0 };
        s.privacy = Some(QuantPrivacy {
            sensitivity: SensitivitySpec::WorstCase,
            ..p
        });
        assert!(s.check().unwrap_err().to_string().contains("clip"));
        let mut f = NormFedAvgSpec::new(Variant::FedAvg, 0.05, BetaSchedule::default());
        f.check().unwrap();
        f.privacy = Some(p);
        assert!(f.check().is_err());
        f.privacy = None;
        f.momentum = 1.0;
        assert!(f.check().unwrap_err().to_string().contains("momentum"));
    }
}
