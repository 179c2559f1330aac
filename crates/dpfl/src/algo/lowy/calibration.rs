//! Per-silo noise calibration for the Lowy & Razaviyayn wing: each silo's batch size K_i and
//! noise σ_i from its own public size n_i and budget (ε_i, δ_i), under one of the calibration
//! rules (theory | experiment | accountant) or Thm E.1's one-pass rule. Every minibatch
//! algorithm of the wing (MB-SGD in both forms, AC-SA) calibrates here.
//!
//! # Privacy of each silo (App. H, Algorithm 7; digest §2.6)
//! * **Noise (Thm H.1, the per-silo Thm D.1):**
//!   σ_i² = 256 L_i² R ln(2.5R/δ_i) ln(2/δ_i)/(n_i² ε_i²), valid for ε_i ≤ 2 ln(2/δ_i) and
//!   K_i ≥ ε_i n_i/(4√(2R ln(2/δ_i))). Thm H.1 prints n, not n_i, in the K bound; the proof is
//!   Thm D.1's applied to silo i alone, whose subsampling ratio is K_i/n_i, so we use n_i.
//!   The experiments' rule (App. I) is available per silo as well, and dpfl's accountant rule
//!   (the smallest certified noise multiplier for the run as sampled).
//! * **Weights.** F = Σ p_i F_i is run as the uniform objective of f̃_i = N p_i f (App. H.1).
//!   Silo i's message then has sensitivity 2 N p_i L/K_i, so its σ_i is calibrated to
//!   L_i = N p_i L: each silo gets exactly its own (ε_i, δ_i). (The theorem's L̃ = max_i N p_i L
//!   would over-noise the lighter silos; the parameter rules do use L̃.) Weights must be > 0.
//! * **Default K.** [`default_k`] is the one rule: the silo's own privacy minimum (Thm D.1's
//!   bound rounded up, or App. I's ⌊n√ε/(2√R)⌋, which the accountant rule shares). With
//!   [`BatchChoice::CommonRatio`] (App. H.1: K_i/n_i constant) ρ = max_i of each silo's
//!   smallest allowed K_i/n_i and K_i = ⌈ρ n_i⌉ (theory rule; ⌊ρ n_i⌋ for the experiments'
//!   and the accountant's), never below the silo's own minimum.
//! * **Sampling.** The closed forms are stated for batches drawn with replacement; a run that
//!   samples otherwise still charges its ledger the event of the sampling it really uses
//!   ([`crate::algo::gradient::BatchSource`]), and the accountant rule calibrates to exactly
//!   that sampling.

use serde::{Deserialize, Serialize};

use dpfl_privacy::calibration::{
    calibrate_rdp_then_pld, calibrate_sampled_gaussian, isrl_experiment_k, isrl_experiment_sigma,
    isrl_theory_min_k, isrl_theory_sigma, one_pass_sigma,
};
use dpfl_privacy::event::Sampling;
use dpfl_privacy::mechanism::GaussianMechanism;
use dpfl_privacy::sampler::{BatchSampler, RecordSampling};
use dpfl_privacy::{Delta, Epsilon, GaussianNoise, Neighbouring, PrivacyError, PrivacyEvent};

use crate::algo::checked::ParamError;
use crate::algo::context::{BuildContext, SiloCalibration};
use crate::algo::half::{SiloHalf, SiloInfo};
use crate::units::SiloId;

/// How a private algorithm calibrates its Gaussian noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Calibration {
    /// Lowy & Razaviyayn Thm D.1: σ² = 256 L² R ln(2.5R/δ) ln(2/δ)/(n²ε²), with its K bound.
    Theory,
    /// Lowy & Razaviyayn App. I: σ² = 8 L² R ln(1/δ)/(n²ε²), K = n√ε/(2√R).
    Experiment,
    /// dpfl's rule: the smallest noise multiplier for which the tightest sound accountant for
    /// the sampling used certifies the silo's (ε, δ) for the run as sampled (R rounds of K
    /// records, replace-one; the sampled PLD of Balle, Barthe & Gaboardi 2018's profile, or RDP
    /// if that is tighter: `calibration::calibrate_sampled_gaussian`), K as in `Experiment`
    /// unless given. The paper's experiment rule rests on Abadi et al.'s Thm 1, whose
    /// constants are unstated: under the sound accountant it meets small targets (obesity,
    /// target 1: certified 0.86) but not larger ones (obesity target 3: true ε ≥ 3.02; target
    /// 9: ≥ 24; docs/reproductions.md), so this is the default of dpfl's own examples.
    Accountant,
}

/// Which noise rule a silo uses: a configured [`Calibration`], or Thm E.1's one-pass rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum NoiseRule {
    /// Thm D.1 / F.1 / H.1: σ² = 256 L² R ln(2.5R/δ) ln(2/δ)/(n²ε²).
    Theory,
    /// App. I: σ² = 8 L² R ln(1/δ)/(n²ε²).
    Experiment,
    /// The smallest noise multiplier the accountant certifies for the run as sampled.
    Accountant,
    /// Thm E.1: σ² = 32 L² ln(1.25/δ)/(ε²K²), one pass over disjoint batches.
    OnePass,
}

impl From<Calibration> for NoiseRule {
    fn from(c: Calibration) -> Self {
        match c {
            Calibration::Theory => NoiseRule::Theory,
            Calibration::Experiment => NoiseRule::Experiment,
            Calibration::Accountant => NoiseRule::Accountant,
        }
    }
}

impl NoiseRule {
    /// The formula with its citation, for reports.
    pub(crate) fn formula(self) -> &'static str {
        match self {
            NoiseRule::Theory => {
                "sigma_i^2 = 256 L_i^2 R ln(2.5R/delta_i) ln(2/delta_i) / (n_i^2 eps_i^2) (Lowy & Razaviyayn Thm D.1/H.1)"
            }
            NoiseRule::Experiment => {
                "sigma_i^2 = 8 L_i^2 R ln(1/delta_i) / (n_i^2 eps_i^2) (Lowy & Razaviyayn App. I)"
            }
            NoiseRule::Accountant => {
                "sigma_i = z_i 2 L_i / K_i with z_i the smallest noise multiplier certified for silo i's run (dpfl accountant calibration)"
            }
            NoiseRule::OnePass => {
                "sigma_i^2 = 32 L_i^2 ln(1.25/delta_i) / (eps_i^2 K_i^2), disjoint batches (Lowy & Razaviyayn Thm E.1)"
            }
        }
    }
}

/// The default K of one silo under `rule`: its own privacy minimum at R rounds (Thm D.1's
/// bound rounded up; App. I's rule for the experiment and accountant rules), in [1, n].
/// `None` where the rule gives none (one pass: K = ⌊n/R⌋ is a schedule, not a privacy bound).
pub(crate) fn default_k(
    rule: NoiseRule,
    n: usize,
    rounds: usize,
    eps: Epsilon,
    delta: Delta,
) -> Option<usize> {
    match rule {
        NoiseRule::Theory => {
            Some((isrl_theory_min_k(n, rounds, eps, delta).ceil() as usize).clamp(1, n.max(1)))
        }
        NoiseRule::Experiment | NoiseRule::Accountant => Some(isrl_experiment_k(n, rounds, eps)),
        NoiseRule::OnePass => None,
    }
}

/// What the accountant certified for one silo (the accountant rule only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Certified {
    /// The noise multiplier z = σK/(2L).
    pub noise_multiplier: f64,
    /// The accountant that certified it.
    pub accountant: String,
    /// The sampling the run was calibrated for.
    pub sampling: Sampling,
}

/// The noise that will run, as the accountant rule must see it (issue 27 finding 7): the
/// continuous Gaussian, or the discrete Gaussian on the grid γ·ℤ of `dim`-vectors, whose
/// event ([`GaussianMechanism::with_noise`]) carries the rounded sensitivity and the dimension.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NoiseShape {
    /// `privacy.mechanism`.
    pub noise: GaussianNoise,
    /// d, the message's length.
    pub dim: usize,
}

impl NoiseShape {
    /// The shape of `ctx`'s mechanism on model-sized messages.
    pub(crate) fn of(ctx: &BuildContext) -> Self {
        NoiseShape {
            noise: ctx.noise,
            dim: ctx.federation.dim,
        }
    }

    /// The continuous Gaussian (the closed forms' and the papers' mechanism).
    pub(crate) fn continuous() -> Self {
        NoiseShape {
            noise: GaussianNoise::Gaussian,
            dim: 1,
        }
    }
}

/// σ of one silo under `rule` (each closed form checks its own validity range; the accountant
/// rule calibrates to the event of `sampling` K of n, R times, replace-one, of the mechanism
/// `shape` says will run).
#[allow(clippy::too_many_arguments)]
pub(crate) fn silo_sigma(
    rule: NoiseRule,
    l: f64,
    rounds: usize,
    n: usize,
    k: usize,
    eps: Epsilon,
    delta: Delta,
    sampling: RecordSampling,
    shape: NoiseShape,
) -> Result<(f64, Option<Certified>), PrivacyError> {
    crate::algo::context::count_calibration();
    Ok(match rule {
        NoiseRule::Theory => (isrl_theory_sigma(l, rounds, n, k, eps, delta)?, None),
        NoiseRule::Experiment => (isrl_experiment_sigma(l, rounds, n, k, eps, delta)?, None),
        NoiseRule::OnePass => (one_pass_sigma(l, k, eps, delta)?, None),
        NoiseRule::Accountant => {
            let sampling = BatchSampler::new(sampling, n, k)?.sampling();
            let (z, accountant) = match shape.noise {
                GaussianNoise::Gaussian => {
                    cached_calibration(&sampling, rounds as u64, eps, delta)?
                }
                // The discrete Gaussian's own event (RDP by joint convexity for sampled
                // vectors; the PLD where it is exact, scalars): calibrating the continuous one
                // and certifying this one certified target 2 at 8.02 (issue 27).
                GaussianNoise::DiscreteGaussian { granularity } => {
                    let sens = 2.0 * l / k as f64;
                    let l2 = (sens + granularity * (shape.dim as f64).sqrt()) / granularity;
                    let event = |z: f64| {
                        PrivacyEvent::DiscreteGaussian {
                            noise_multiplier: z,
                            l2_sensitivity: l2,
                            dimension: shape.dim as u64,
                        }
                        .sampled(sampling.clone())
                        .repeated(rounds as u64)
                    };
                    let (z, name) =
                        calibrate_rdp_then_pld(event, Neighbouring::ReplaceOne, eps, delta, "pld")?;
                    (
                        z,
                        if name == "rdp" {
                            "rdp (discrete Gaussian)"
                        } else {
                            "pld (discrete Gaussian)"
                        },
                    )
                }
            };
            // σ = z·2L/K, and the mechanism recovers z as σK/(2L): one rounding each way could
            // land a hair below the certified z, so σ is nudged up by a relative 1e-9.
            let sigma = z * (2.0 * l / k as f64) * (1.0 + 1e-9);
            (
                sigma,
                Some(Certified {
                    noise_multiplier: z,
                    accountant: accountant.to_string(),
                    sampling,
                }),
            )
        }
    })
}

/// [`calibrate_sampled_gaussian`] (replace-one), remembered per process: the search is
/// deterministic in its inputs and costs up to seconds, while a reproduction builds the same
/// (sampling, R, ε, δ) for every silo of equal size, step size and trial.
fn cached_calibration(
    sampling: &Sampling,
    rounds: u64,
    eps: Epsilon,
    delta: Delta,
) -> Result<(f64, &'static str), PrivacyError> {
    type Key = (String, u64, u64, u64);
    static CACHE: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<Key, (f64, &'static str)>>,
    > = std::sync::OnceLock::new();
    let key = (
        format!("{sampling:?}"),
        rounds,
        eps.get().to_bits(),
        delta.get().to_bits(),
    );
    let cache = CACHE.get_or_init(Default::default);
    if let Some(&hit) = cache.lock().ok().as_ref().and_then(|c| c.get(&key)) {
        return Ok(hit);
    }
    let got = calibrate_sampled_gaussian(
        sampling.clone(),
        rounds,
        Neighbouring::ReplaceOne,
        eps,
        delta,
    )?;
    if let Ok(mut c) = cache.lock() {
        c.insert(key, got);
    }
    Ok(got)
}

/// "K of n with replacement" and the like, for formulas in reports.
pub(crate) fn sampling_label(s: &Sampling) -> String {
    match *s {
        Sampling::WithReplacement { population, draws } => {
            format!("K = {draws} of n = {population} with replacement")
        }
        Sampling::WithoutReplacement { population, size } => {
            format!("K = {size} of n = {population} without replacement")
        }
        Sampling::Poisson { rate } => format!("Poisson sampling at rate {rate:.6}"),
        ref other => format!("{other:?}"),
    }
}

/// One silo's calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiloPlan {
    /// The silo's id.
    pub id: SiloId,
    /// n_i.
    pub records: usize,
    /// K_i.
    pub batch_size: usize,
    /// N p_i (1 without weights).
    pub weight: f64,
    /// L_i = N p_i L, the bound the noise is calibrated to.
    pub lipschitz: f64,
    /// 0 for non-private runs.
    pub sigma: f64,
    /// The accountant's certificate (accountant rule only).
    pub certified: Option<Certified>,
    /// (ε_i, δ_i), for private runs calibrated to a target.
    pub budget: Option<(f64, f64)>,
    /// The noise multiplier z set directly (`privacy.noise_multiplier`): σ_i = z·2L_i/K_i.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_multiplier: Option<f64>,
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

    /// The accountant rule's per-silo formula: the certified z, the target and the sampling.
    pub fn certificate(&self, rounds: usize) -> Option<String> {
        if let Some(z) = self.fixed_multiplier {
            return Some(crate::algo::context::fixed_formula(
                z,
                "2 L_i / K_i",
                rounds,
            ));
        }
        let c = self.certified.as_ref()?;
        let (eps, delta) = self.budget?;
        Some(format!(
            "smallest noise multiplier z = {:.4} with epsilon <= {eps} at delta {delta:e} for {rounds} rounds of {} (replace-one), accountant {} (dpfl accountant calibration)",
            c.noise_multiplier,
            sampling_label(&c.sampling),
            c.accountant
        ))
    }
}

/// How the batch sizes are chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum BatchChoice {
    /// The same K for every silo.
    Explicit(usize),
    /// One pass in R rounds: K_i = ⌊n_i/R⌋.
    OnePass {
        /// R, the rounds of the pass.
        rounds: usize,
    },
    /// K_i/n_i the same for every silo, at the smallest ratio every silo's privacy allows.
    CommonRatio,
    /// Each silo's own [`default_k`].
    Own,
}

/// N p_i for every silo, from `weights` (checked by `crate::algo::checked::weights`: each
/// > 0, Σ p_i = 1), or all 1; one weight per silo.
pub(crate) fn silo_weights(silos: usize, weights: Option<&[f64]>) -> crate::Result<Vec<f64>> {
    let Some(p) = weights else {
        return Ok(vec![1.0; silos]);
    };
    if p.len() != silos {
        return Err(ParamError::refused(
            "weights",
            format!("has {} entries for {silos} silos", p.len()),
        )
        .into());
    }
    Ok(p.iter().map(|x| x * silos as f64).collect())
}

fn silo_err(s: &SiloInfo) -> impl Fn(PrivacyError) -> crate::Error + '_ {
    move |e| crate::Error::config(format!("silo {}", s.id), e.to_string())
}

/// Per-silo K_i and σ_i (Algorithm 7 / Thm H.1, Thm E.1 for `NoiseRule::OnePass`, or the
/// accountant for the run as `sampling` draws it). `lipschitz` is the L of the (possibly
/// smoothed) loss; `weights` are N p_i.
pub(crate) fn plan_silos(
    ctx: &BuildContext,
    noise: Option<NoiseRule>,
    lipschitz: f64,
    weights: &[f64],
    batch: BatchChoice,
    sampling: RecordSampling,
) -> crate::Result<Vec<SiloPlan>> {
    let r = ctx.federation.rounds;
    let budgets = ctx
        .silos
        .iter()
        .map(|s| match noise {
            // σ = z·2L_i/K_i below; no target to read.
            Some(_) if s.fixed_noise.is_some() => Ok(None),
            Some(_) => ctx.budget(s).map(Some),
            None => Ok(None),
        })
        .collect::<crate::Result<Vec<_>>>()?;
    // The common ratio: the largest of the silos' smallest K_i/n_i.
    let ratio = |rule: NoiseRule, eps: Epsilon, delta: Delta| match rule {
        NoiseRule::Theory => eps.get() / (4.0 * (2.0 * r as f64 * (2.0 / delta.get()).ln()).sqrt()),
        NoiseRule::Experiment | NoiseRule::Accountant => {
            eps.get().sqrt() / (2.0 * (r as f64).sqrt())
        }
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
        let own = match (noise, budget) {
            (Some(rule), Some((e, d))) => default_k(rule, n, r, *e, *d),
            _ => None,
        };
        let k = match (batch, noise, own) {
            (BatchChoice::Explicit(k), _, _) => k,
            (BatchChoice::OnePass { rounds }, _, _) => n / rounds.max(1),
            (BatchChoice::Own, _, Some(own)) => own,
            (BatchChoice::CommonRatio, Some(NoiseRule::Theory), Some(own)) => {
                ((rho * n as f64).ceil() as usize).max(own).min(n)
            }
            (BatchChoice::CommonRatio, Some(_), Some(own)) => ((rho * n as f64).floor() as usize)
                .max(own)
                .clamp(1, n.max(1)),
            (BatchChoice::Own | BatchChoice::CommonRatio, Some(_), None)
                if s.fixed_noise.is_some() =>
            {
                return Err(crate::Error::config(
                    "algorithm.batch_size",
                    "with privacy.noise_multiplier give batch_size: the default K rule reads a \
                     target epsilon",
                ));
            }
            _ => {
                return Err(crate::Error::config(
                    "algorithm.batch_size",
                    "a non-private run has no batch-size rule; give batch_size",
                ));
            }
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
        let fixed = noise.and(ctx.fixed_multiplier(s));
        let (sigma, certified) = match (noise, budget) {
            // The mechanism's replace-one sensitivity is 2L_i/K_i (`SiloPlan::mechanism`).
            _ if fixed.is_some() => (fixed.unwrap_or(f64::NAN) * (2.0 * lw / k as f64), None),
            (Some(rule), Some((e, d))) => {
                silo_sigma(rule, lw, r, n, k, *e, *d, sampling, NoiseShape::of(ctx))
                    .map_err(silo_err(s))?
            }
            _ => (0.0, None),
        };
        plans.push(SiloPlan {
            id: s.id,
            records: n,
            batch_size: k,
            weight: w,
            lipschitz: lw,
            sigma,
            certified,
            budget: budget.map(|(e, d)| (e.get(), d.get())),
            fixed_multiplier: fixed,
        });
    }
    Ok(plans)
}

/// Calibration rows for reports: one formula for all silos, or the accountant's per-silo
/// certificate.
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
            formula: p.certificate(rounds).unwrap_or_else(|| formula.to_string()),
            run_event: h
                .round_event(crate::units::Round::FIRST)
                .map(|e| e.repeated(rounds as u64)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::half::FederationInfo;
    use crate::model::{GradientOracle, LogisticRegression, Projection};

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
                .map(|(i, &(n, e, d))| {
                    SiloInfo::new(SiloId::new(i as u32), n, Some((e, d))).unwrap()
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
            RecordSampling::WithReplacement,
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
            RecordSampling::WithReplacement,
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
        // Positivity and the sum are the guard's (`checked::weights`); the count needs N.
        assert!(crate::algo::checked::weights(Some(&[0.5, 0.4])).is_err());
        assert!(crate::algo::checked::weights(Some(&[1.0, 0.0])).is_err());
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
            RecordSampling::WithReplacement,
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
            RecordSampling::WithReplacement,
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
            RecordSampling::WithReplacement,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("silo 0"), "{e}");
    }
}
