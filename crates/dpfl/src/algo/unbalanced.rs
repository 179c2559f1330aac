//! Noisy MB-SGD in its general form, Lowy & Razaviyayn App. H, Algorithm 7 (digest §2.6):
//! silos with their own sizes n_i and budgets (ε_i, δ_i), objective weights p_i, per-silo batch
//! sizes K_i with K_i/n_i the same for every silo, per-silo noise σ_i, and the parameter rules of
//! Thm D.1/D.2 ([`super::theory`]) including the strongly convex step and exponential weights
//! of Thm 2.1. The per-silo calibration ([`plan_silos`]) is shared with the accelerated
//! algorithm ([`super::acsa`]).
//!
//! Silo i draws K_i records with replacement, averages their clipped gradients at w_r, scales by
//! N p_i, adds N(0, σ_i² I) and sends; the server averages the M_r messages **unweighted**
//! (Algorithm 7 line 9) and steps as in Algorithm 2.
//!
//! # Privacy of each silo
//! * **Noise (Thm H.1, the per-silo Thm D.1):**
//!   σ_i² = 256 L_i² R ln(2.5R/δ_i) ln(2/δ_i)/(n_i² ε_i²), valid for ε_i ≤ 2 ln(2/δ_i) and
//!   K_i ≥ ε_i n_i/(4√(2R ln(2/δ_i))). Thm H.1 prints n, not n_i, in the K bound; the proof is
//!   Thm D.1's applied to silo i alone, whose subsampling ratio is K_i/n_i, so we use n_i.
//!   The experiments' rule (App. I) is available per silo as well.
//! * **Weights.** F = Σ p_i F_i is run as the uniform objective of f̃_i = N p_i f (App. H.1).
//!   Silo i's message then has sensitivity 2 N p_i L/K_i, so its σ_i is calibrated to
//!   L_i = N p_i L: each silo gets exactly its own (ε_i, δ_i). (The theorem's L̃ = max_i N p_i L
//!   would over-noise the lighter silos; the parameter rules do use L̃.) Weights must be > 0.
//! * **K_i/n_i constant (App. H.1).** Without an explicit batch size, ρ = max_i of each silo's
//!   smallest allowed K_i/n_i, and K_i = ⌈ρ n_i⌉ (theory rule; ⌊ρ n_i⌋ for the experiments'
//!   rule, whose own minimum is a floor), never below the silo's own minimum.

use serde::{Deserialize, Serialize};

use dpfl_privacy::calibration::{
    isrl_experiment_k, isrl_experiment_sigma, isrl_theory_min_k, isrl_theory_sigma, one_pass_sigma,
};
use dpfl_privacy::mechanism::GaussianMechanism;
use dpfl_privacy::sampler::WithReplacement;
use dpfl_privacy::{Delta, Epsilon, PrivacyError};

use super::acsa::{BatchSource, GradientSilo};
use super::mbsgd::MbSgdServer;
use super::spec::{BuildContext, BuiltAlgorithm, Calibration, OutputRule, SiloCalibration};
use super::theory::{Constants, Overrides, Params, Setting, Smoothing, TheoryInputs, TheoryParams};
use super::{SiloHalf, SiloInfo};
use crate::model::GradientOracle;

/// Which closed-form noise a silo uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoiseRule {
    /// Thm D.1 / F.1 / H.1: σ² = 256 L² R ln(2.5R/δ) ln(2/δ)/(n²ε²).
    Theory,
    /// App. I: σ² = 8 L² R ln(1/δ)/(n²ε²).
    Experiment,
    /// Thm E.1: σ² = 32 L² ln(1.25/δ)/(ε²K²), one pass over disjoint batches.
    OnePass,
}

/// The per-silo rule of a configured calibration. The accountant calibration is offered by
/// the plain MB-SGD (`kind = "mb-sgd"`) only; the general form keeps the paper's rules.
pub(crate) fn noise_rule(c: Calibration) -> crate::Result<NoiseRule> {
    match c {
        Calibration::Theory => Ok(NoiseRule::Theory),
        Calibration::Experiment => Ok(NoiseRule::Experiment),
        Calibration::Accountant => Err(crate::Error::config(
            "algorithm.calibration",
            "\"accountant\" is available for kind = \"mb-sgd\"; use \"theory\" or \"experiment\" here",
        )),
    }
}

impl NoiseRule {
    /// The formula with its citation, for reports.
    pub fn formula(self) -> &'static str {
        match self {
            NoiseRule::Theory => {
                "sigma_i^2 = 256 L_i^2 R ln(2.5R/delta_i) ln(2/delta_i) / (n_i^2 eps_i^2) (Lowy & Razaviyayn Thm D.1/H.1)"
            }
            NoiseRule::Experiment => {
                "sigma_i^2 = 8 L_i^2 R ln(1/delta_i) / (n_i^2 eps_i^2) (Lowy & Razaviyayn App. I)"
            }
            NoiseRule::OnePass => {
                "sigma_i^2 = 32 L_i^2 ln(1.25/delta_i) / (eps_i^2 K_i^2), disjoint batches (Lowy & Razaviyayn Thm E.1)"
            }
        }
    }
}

/// σ of one silo under `rule` (each formula checks its own validity range).
pub fn silo_sigma(
    rule: NoiseRule,
    l: f64,
    rounds: usize,
    n: usize,
    k: usize,
    eps: Epsilon,
    delta: Delta,
) -> Result<f64, PrivacyError> {
    match rule {
        NoiseRule::Theory => isrl_theory_sigma(l, rounds, n, k, eps, delta),
        NoiseRule::Experiment => isrl_experiment_sigma(l, rounds, n, k, eps, delta),
        NoiseRule::OnePass => one_pass_sigma(l, k, eps, delta),
    }
}

/// One silo's calibration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiloPlan {
    pub id: u32,
    pub records: usize,
    pub batch_size: usize,
    /// N p_i (1 without weights).
    pub weight: f64,
    /// L_i = N p_i L, the bound the noise is calibrated to.
    pub lipschitz: f64,
    /// 0 for non-private runs.
    pub sigma: f64,
}

impl SiloPlan {
    /// The silo's mechanism: N(0, σ_i²) on a mean of K_i gradients bounded by L_i, replace-one
    /// sensitivity 2L_i/K_i.
    pub fn mechanism(&self) -> crate::Result<Option<GaussianMechanism>> {
        if self.sigma == 0.0 {
            return Ok(None);
        }
        Ok(Some(GaussianMechanism::new(
            self.sigma,
            2.0 * self.lipschitz / self.batch_size as f64,
        )?))
    }
}

/// How the batch sizes are chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BatchChoice {
    /// The same K for every silo.
    Explicit(usize),
    /// One pass in R rounds: K_i = ⌊n_i/R⌋.
    OnePass { rounds: usize },
    /// K_i/n_i the same for every silo, at the smallest ratio every silo's privacy allows.
    CommonRatio,
}

/// N p_i for every silo, from `weights` (p_i > 0, Σ p_i = 1 within 1e-9), or all 1.
pub fn silo_weights(silos: usize, weights: Option<&[f64]>) -> crate::Result<Vec<f64>> {
    let Some(p) = weights else {
        return Ok(vec![1.0; silos]);
    };
    if p.len() != silos {
        return Err(crate::Error::config(
            "algorithm.weights",
            format!("has {} entries for {silos} silos", p.len()),
        ));
    }
    if let Some(i) = p.iter().position(|&x| !(x.is_finite() && x > 0.0)) {
        return Err(crate::Error::config(
            format!("algorithm.weights[{i}]"),
            format!("must be finite and > 0, got {}", p[i]),
        ));
    }
    let s: f64 = p.iter().sum();
    if (s - 1.0).abs() > 1e-9 {
        return Err(crate::Error::config(
            "algorithm.weights",
            format!("must sum to 1, got {s}"),
        ));
    }
    Ok(p.iter().map(|x| x * silos as f64).collect())
}

fn silo_err(s: &SiloInfo) -> impl Fn(PrivacyError) -> crate::Error + '_ {
    move |e| crate::Error::config(format!("silo {}", s.id), e.to_string())
}

/// Per-silo K_i and σ_i (Algorithm 7 / Thm H.1, or Thm E.1 for `NoiseRule::OnePass`).
/// `lipschitz` is the L of the (possibly smoothed) loss; `weights` are N p_i.
pub fn plan_silos(
    ctx: &BuildContext,
    noise: Option<NoiseRule>,
    lipschitz: f64,
    weights: &[f64],
    batch: BatchChoice,
) -> crate::Result<Vec<SiloPlan>> {
    let r = ctx.federation.rounds;
    let budgets = ctx
        .silos
        .iter()
        .map(|s| match noise {
            Some(_) => ctx.budget(s).map(Some),
            None => Ok(None),
        })
        .collect::<crate::Result<Vec<_>>>()?;
    // The common ratio: the largest of the silos' smallest K_i/n_i.
    let ratio = |rule: NoiseRule, eps: Epsilon, delta: Delta| match rule {
        NoiseRule::Theory => eps.get() / (4.0 * (2.0 * r as f64 * (2.0 / delta.get()).ln()).sqrt()),
        NoiseRule::Experiment => eps.get().sqrt() / (2.0 * (r as f64).sqrt()),
        NoiseRule::OnePass => 0.0,
    };
    let rho = match noise {
        Some(rule) => budgets
            .iter()
            .flatten()
            .map(|&(e, d)| ratio(rule, e, d))
            .fold(0.0, f64::max),
        None => 0.0,
    };
    let mut plans = Vec::with_capacity(ctx.silos.len());
    for ((s, budget), &w) in ctx.silos.iter().zip(&budgets).zip(weights) {
        let n = s.records;
        let k = match batch {
            BatchChoice::Explicit(k) => k,
            BatchChoice::OnePass { rounds } => n / rounds.max(1),
            BatchChoice::CommonRatio => match (noise, budget) {
                (Some(NoiseRule::Theory), Some((e, d))) => {
                    let own = isrl_theory_min_k(n, r, *e, *d).ceil();
                    ((rho * n as f64).ceil().max(own).max(1.0) as usize).min(n)
                }
                (Some(NoiseRule::Experiment), Some((e, _))) => {
                    let own = isrl_experiment_k(n, r, *e);
                    ((rho * n as f64).floor() as usize)
                        .max(own)
                        .clamp(1, n.max(1))
                }
                _ => {
                    return Err(crate::Error::config(
                        "algorithm.batch_size",
                        "a non-private run has no batch-size rule; give batch_size",
                    ));
                }
            },
        };
        if k == 0 || k > n {
            return Err(crate::Error::config(
                format!("silo {}", s.id),
                match batch {
                    BatchChoice::OnePass { rounds } => format!(
                        "holds n = {n} records, fewer than the {rounds} rounds of one pass (K = ⌊n/R⌋ = 0)"
                    ),
                    _ => format!("batch size K = {k} must lie in [1, n = {n}]"),
                },
            ));
        }
        let lw = w * lipschitz;
        let sigma = match (noise, budget) {
            (Some(rule), Some((e, d))) => {
                silo_sigma(rule, lw, r, n, k, *e, *d).map_err(silo_err(s))?
            }
            _ => 0.0,
        };
        plans.push(SiloPlan {
            id: s.id,
            records: n,
            batch_size: k,
            weight: w,
            lipschitz: lw,
            sigma,
        });
    }
    Ok(plans)
}

impl TheoryInputs {
    /// The rules' inputs from a build context: the worst silo on each axis (smallest n_i, ε_i
    /// and δ_i), N, M, d, L and the projection's diameter.
    pub fn from_context(
        ctx: &BuildContext,
        setting: Setting,
        noise: Option<NoiseRule>,
        constants: &Constants,
        weights: &[f64],
        smoothing: Option<f64>,
        overrides: Overrides,
    ) -> crate::Result<Self> {
        let privacy = match noise {
            None => None,
            Some(_) => {
                let mut worst: Option<(f64, f64)> = None;
                for s in &ctx.silos {
                    let (e, d) = ctx.budget(s)?;
                    worst = Some(match worst {
                        None => (e.get(), d.get()),
                        Some((we, wd)) => (we.min(e.get()), wd.min(d.get())),
                    });
                }
                worst
            }
        };
        let wmin = weights.iter().copied().fold(f64::INFINITY, f64::min);
        let wmax = weights.iter().copied().fold(0.0, f64::max);
        Ok(TheoryInputs {
            setting,
            noise,
            lipschitz: ctx.lipschitz,
            constants: constants.clone(),
            projection_diameter: ctx.projection.diameter(),
            weight_range: if weights.is_empty() {
                (1.0, 1.0)
            } else {
                (wmin, wmax)
            },
            records: ctx.silos.iter().map(|s| s.records).min().unwrap_or(0),
            silos: ctx.federation.silos,
            participants: ctx.federation.expected_participants,
            dim: ctx.federation.dim,
            privacy,
            smoothing,
            overrides,
        })
    }
}

/// The gradient oracle (smoothed if asked) and the L the noise is calibrated to.
pub(crate) struct Prepared {
    pub oracle: GradientOracle,
    pub lipschitz: f64,
    pub smoothing: Option<f64>,
    pub weights: Vec<f64>,
}

/// Resolves weights and Moreau smoothing (Thm D.2 / F.2): a smoothed loss is optimised with
/// gradients clipped at 2L and noise calibrated to 2L (Lemma D.7, safe side).
pub(crate) fn prepare(
    ctx: &BuildContext,
    setting: Setting,
    noise: Option<NoiseRule>,
    smoothing: Option<Smoothing>,
    constants: &Constants,
    weights: Option<&[f64]>,
) -> crate::Result<Prepared> {
    let weights = silo_weights(ctx.silos.len(), weights)?;
    let beta = match smoothing {
        None => None,
        Some(Smoothing::Beta(b)) if b.is_finite() && b > 0.0 => Some(b),
        Some(Smoothing::Beta(b)) => {
            return Err(crate::Error::config(
                "algorithm.smoothing",
                format!("must be finite and > 0, got {b}"),
            ));
        }
        Some(Smoothing::Rule(_)) => {
            Some(super::theory::smoothing_rule(&TheoryInputs::from_context(
                ctx,
                setting,
                noise,
                constants,
                &weights,
                None,
                Overrides::default(),
            )?)?)
        }
    };
    let (oracle, lipschitz) = match beta {
        None => (ctx.enforcing_oracle()?, ctx.lipschitz),
        Some(b) => {
            let model = ctx.oracle.model().smoothed(b)?.ok_or_else(|| {
                crate::Error::config(
                    "algorithm.smoothing",
                    format!(
                        "the {} loss offers no prox to smooth it with",
                        ctx.oracle.model().name()
                    ),
                )
            })?;
            let l = 2.0 * ctx.lipschitz;
            let clip = ctx.oracle.clip().map_or(l, |c| c.min(l));
            (GradientOracle::new(model, Some(clip))?, l)
        }
    };
    Ok(Prepared {
        oracle,
        lipschitz,
        smoothing: beta,
        weights,
    })
}

/// Calibration rows for reports.
pub(crate) fn report(
    plans: &[SiloPlan],
    silos: &[Box<dyn SiloHalf>],
    rounds: usize,
    formula: &str,
) -> Vec<SiloCalibration> {
    plans
        .iter()
        .zip(silos)
        .map(|(p, h)| SiloCalibration {
            silo: p.id,
            sigma: p.sigma,
            batch_size: p.batch_size,
            formula: formula.to_string(),
            run_event: h.round_event(0).map(|e| e.repeated(rounds as u64)),
        })
        .collect()
}

/// Noisy MB-SGD, general form (Algorithm 7), as named in a config file:
///
/// ```toml
/// [[algorithms]]
/// kind = "noisy-mb-sgd"
/// calibration = "theory"
/// params = "theory"
/// constants = { smoothness = 0.25, diameter = 10.0 }
/// weights = [0.5, 0.25, 0.25]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoisyMbSgdSpec {
    /// Noise rule; `None` for the non-private algorithm.
    #[serde(default)]
    pub calibration: Option<Calibration>,
    #[serde(default)]
    pub params: Params,
    /// η; required unless `params = "theory"`.
    #[serde(default)]
    pub step_size: Option<f64>,
    /// The same K for every silo; default K_i/n_i constant at the privacy minimum.
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// Default: uniform average, or the theory's rule (exponential weights when strongly convex).
    #[serde(default)]
    pub output: Option<OutputRule>,
    /// Moreau smoothing of a non-smooth loss: β, or "theory" (Thm D.2).
    #[serde(default)]
    pub smoothing: Option<Smoothing>,
    /// Objective weights p_i (length N, > 0, sum 1).
    #[serde(default)]
    pub weights: Option<Vec<f64>>,
    #[serde(default)]
    pub constants: Constants,
}

pub(crate) fn build(ctx: &BuildContext, spec: &NoisyMbSgdSpec) -> crate::Result<BuiltAlgorithm> {
    let noise = spec.calibration.map(noise_rule).transpose()?;
    let prep = prepare(
        ctx,
        Setting::MbSgd,
        noise,
        spec.smoothing,
        &spec.constants,
        spec.weights.as_deref(),
    )?;
    let batch = match spec.batch_size {
        Some(k) => BatchChoice::Explicit(k),
        None => BatchChoice::CommonRatio,
    };
    let plans = plan_silos(ctx, noise, prep.lipschitz, &prep.weights, batch)?;
    let rounds = ctx.federation.rounds;
    let (eta, output, note) = match spec.params {
        Params::Explicit => {
            let eta = spec.step_size.ok_or_else(|| {
                crate::Error::config("algorithm.step_size", "required unless params = \"theory\"")
            })?;
            (eta, spec.output.unwrap_or_default(), String::new())
        }
        Params::Theory => {
            let p = theory(
                ctx,
                Setting::MbSgd,
                noise,
                &spec.constants,
                &prep,
                &plans,
                spec.step_size,
                None,
            )?;
            let eta = p.step_size.unwrap_or(f64::NAN);
            let note = format!(
                "; theory (Thm D.1{}): eta = {eta}, rule R = {:?}",
                if prep.smoothing.is_some() { "/D.2" } else { "" },
                p.rounds_rule
            );
            (eta, spec.output.unwrap_or(p.output), note)
        }
    };
    if !(eta.is_finite() && eta > 0.0) {
        return Err(crate::Error::config(
            "algorithm.step_size",
            format!("must be finite and > 0, got {eta}"),
        ));
    }
    let mut silos: Vec<Box<dyn SiloHalf>> = Vec::with_capacity(plans.len());
    for p in &plans {
        let sampler = WithReplacement::new(p.records, p.batch_size)?;
        silos.push(Box::new(GradientSilo::new(
            prep.oracle.clone(),
            BatchSource::WithReplacement(sampler),
            p.mechanism()?
                .map(|m| ctx.gaussian(m.sigma(), m.sensitivity()))
                .transpose()?,
            p.weight,
        )));
    }
    let formula = match noise {
        Some(rule) => format!("{}{note}", rule.formula()),
        None => format!("non-private{note}"),
    };
    let calibration = report(&plans, &silos, rounds, &formula);
    let server = MbSgdServer::new(ctx.init.clone(), eta, ctx.projection, output);
    Ok(BuiltAlgorithm {
        server: Box::new(server),
        silos,
        calibration,
    })
}

/// [`super::theory::theory_params`] for a built federation: R = the run's rounds, K = the
/// smallest K_i, σ = the largest σ_i.
#[allow(clippy::too_many_arguments)]
pub(crate) fn theory(
    ctx: &BuildContext,
    setting: Setting,
    noise: Option<NoiseRule>,
    constants: &Constants,
    prep: &Prepared,
    plans: &[SiloPlan],
    step_size: Option<f64>,
    regularization: Option<f64>,
) -> crate::Result<TheoryParams> {
    let overrides = Overrides {
        rounds: Some(ctx.federation.rounds),
        batch_size: plans.iter().map(|p| p.batch_size).min(),
        // Lemma H.1's σ²_max/M branch: the largest noise any silo adds.
        sigma: Some(plans.iter().map(|p| p.sigma).fold(0.0, f64::max)),
        step_size,
        regularization,
    };
    let mut inputs = TheoryInputs::from_context(
        ctx,
        setting,
        noise,
        constants,
        &prep.weights,
        prep.smoothing,
        overrides,
    )?;
    // A one-pass run over unequal silos only guarantees R ≤ ⌊n_i/K_i⌋ per silo.
    if setting == Setting::OnePass {
        inputs.records = plans
            .iter()
            .map(|p| p.batch_size * ctx.federation.rounds)
            .min()
            .unwrap_or(inputs.records);
    }
    super::theory::theory_params(&inputs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::FederationInfo;
    use crate::model::{LogisticRegression, Projection};

    fn ctx(silos: Vec<(usize, f64, f64)>, rounds: usize) -> BuildContext {
        let model = std::sync::Arc::new(LogisticRegression::new(3, None).unwrap());
        BuildContext {
            federation: FederationInfo {
                dim: 3,
                silos: silos.len(),
                rounds,
                expected_participants: silos.len() as f64,
            },
            silos: silos
                .iter()
                .enumerate()
                .map(|(i, &(n, e, d))| SiloInfo {
                    id: i as u32,
                    records: n,
                    budget: Some((e, d)),
                })
                .collect(),
            oracle: GradientOracle::new(model, None).unwrap(),
            lipschitz: 1.0,
            projection: Projection::None,
            init: vec![0.0; 3],
            noise: Default::default(),
        }
    }

    #[test]
    fn per_silo_sigma_follows_each_silos_budget() {
        // R = 10, L = 1. Silo 0: n = 100, ε = 1, δ = 1e-3; silo 1: n = 400, ε = 0.5, δ = 1e-4.
        let c = ctx(vec![(100, 1.0, 1e-3), (400, 0.5, 1e-4)], 10);
        let plans = plan_silos(
            &c,
            Some(NoiseRule::Theory),
            1.0,
            &[1.0, 1.0],
            BatchChoice::CommonRatio,
        )
        .unwrap();
        // Ratios ε_i/(4√(2R ln(2/δ_i))): silo 0: 1/(4√(20·7.60090)) = 0.0202765;
        // silo 1: 0.5/(4√(20·9.90349)) = 0.0088819. ρ = 0.0202765:
        // K_0 = ⌈2.02765⌉ = 3, K_1 = ⌈8.1106⌉ = 9 (K_i/n_i ≈ ρ for both).
        assert_eq!(plans[0].batch_size, 3);
        assert_eq!(plans[1].batch_size, 9);
        // σ_0² = 256·10·ln(25000)·ln(2000)/(100²·1²) = 256·10·10.12663·7.60090/1e4 = 19.70471.
        assert!(
            (plans[0].sigma.powi(2) - 19.704713).abs() < 1e-5,
            "{}",
            plans[0].sigma
        );
        // σ_1² = 256·10·ln(250000)·ln(20000)/(400²·0.25) = 256·10·12.42922·9.90349/4e4 = 7.87793.
        assert!(
            (plans[1].sigma.powi(2) - 7.877926).abs() < 1e-5,
            "{}",
            plans[1].sigma
        );
        // The mechanism's sensitivity is 2L/K_i: noise multiplier σ_i K_i/(2L).
        let m0 = plans[0].mechanism().unwrap().unwrap();
        assert!((m0.noise_multiplier() - plans[0].sigma * 3.0 / 2.0).abs() < 1e-12);
    }

    #[test]
    fn weights_scale_each_silos_lipschitz_and_noise() {
        // p = (0.75, 0.25), N = 2: N p = (1.5, 0.5); σ_i ∝ L_i = N p_i L.
        let c = ctx(vec![(100, 1.0, 1e-3), (100, 1.0, 1e-3)], 10);
        let w = silo_weights(2, Some(&[0.75, 0.25])).unwrap();
        assert_eq!(w, vec![1.5, 0.5]);
        let plans = plan_silos(
            &c,
            Some(NoiseRule::Theory),
            1.0,
            &w,
            BatchChoice::Explicit(5),
        )
        .unwrap();
        let base = 19.704713027617633f64.sqrt();
        assert!((plans[0].sigma - 1.5 * base).abs() < 1e-9);
        assert!((plans[1].sigma - 0.5 * base).abs() < 1e-9);
        assert_eq!(plans[0].lipschitz, 1.5);
        // Same noise multiplier (σ_i K/(2 L_i)) for both silos: same privacy.
        let (a, b) = (
            plans[0].mechanism().unwrap().unwrap(),
            plans[1].mechanism().unwrap().unwrap(),
        );
        assert!((a.noise_multiplier() - b.noise_multiplier()).abs() < 1e-12);
        assert!(silo_weights(2, Some(&[0.5, 0.4])).is_err());
        assert!(silo_weights(2, Some(&[1.0, 0.0])).is_err());
        assert!(silo_weights(3, Some(&[0.5, 0.5])).is_err());
    }

    #[test]
    fn experiment_and_one_pass_plans() {
        // App. I per silo: R = 4, silo 0 n = 100 ε = 4, silo 1 n = 300 ε = 1 (δ = 1e-4 both).
        // ratios √ε/(2√R): 0.5 and 0.25 → ρ = 0.5: K_0 = 50, K_1 = 150.
        let c = ctx(vec![(100, 4.0, 1e-4), (300, 1.0, 1e-4)], 4);
        let plans = plan_silos(
            &c,
            Some(NoiseRule::Experiment),
            1.0,
            &[1.0, 1.0],
            BatchChoice::CommonRatio,
        )
        .unwrap();
        assert_eq!((plans[0].batch_size, plans[1].batch_size), (50, 150));
        // σ_1² = 8·4·ln(1e4)/(300²·1) = 32·9.2103404/90000 = 0.00327478769.
        assert!(
            (plans[1].sigma.powi(2) - 0.00327478768781).abs() < 1e-13,
            "{}",
            plans[1].sigma.powi(2)
        );
        // One pass in R = 4 rounds: K_i = ⌊n_i/4⌋; σ_0² = 32 ln(1.25e4)/(16·625) = 0.0302239.
        let plans = plan_silos(
            &c,
            Some(NoiseRule::OnePass),
            1.0,
            &[1.0, 1.0],
            BatchChoice::OnePass { rounds: 4 },
        )
        .unwrap();
        assert_eq!((plans[0].batch_size, plans[1].batch_size), (25, 75));
        assert!((plans[0].sigma.powi(2) - 32.0 * 12500f64.ln() / (16.0 * 625.0)).abs() < 1e-12);
        let c = ctx(vec![(3, 1.0, 1e-4)], 4);
        let e = plan_silos(
            &c,
            Some(NoiseRule::OnePass),
            1.0,
            &[1.0],
            BatchChoice::OnePass { rounds: 4 },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("silo 0"), "{e}");
    }
}
