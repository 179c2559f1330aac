//! The SoteriaFL wing's plan (issue 10's "checked parameters, built per party"): [`plan`]
//! checks a [`SoteriaSpec`] against the public [`BuildContext`] and calibrates every silo's σ
//! once; [`SoteriaPlan::server_half`] and [`SoteriaPlan::silo_half`] build one half each from
//! the plan and calibrate nothing, so a `dpfl server` or `dpfl silo` process builds only its
//! own half and never repeats the accountant search.
//!
//! The plan is public: per silo n_i, b_i and σ_i, and the run's γ, compressor, sampling, coin
//! and x⁰ rule. A silo half's round event is derived from its noise mechanism
//! ([`super::silo::SiloNoise`], built from σ_i with [`round_event`]'s sensitivities) and its
//! record sampler, so the event a half charges is the one the planner reported.

use serde::{Deserialize, Serialize};

use dpfl_privacy::mechanism::GaussianMechanism;
use dpfl_privacy::sampler::{BatchSampler, RecordSampling};

use super::calibration::{
    CODE_DIRECT_FACTOR, CODE_SHIFTED_CONSTANT, Estimator, accountant_sigma, closed_form_sigma,
    default_batch, qdpsgd_code_sigma, round_event, shift_step,
};
use super::guard::CheckedSoteria;
use super::qdpsgd::{QdpsgdServer, QdpsgdSilo};
use super::server::SoteriaServer;
use super::silo::{SiloNoise, SoteriaSilo};
use super::spec::{Clipping, InitSpec, Method, NoiseCalibration};
use crate::algo::checked::at_most;
use crate::algo::context::{BuildContext, BuiltAlgorithm, SiloCalibration};
use crate::algo::half::{ServerHalf, SiloHalf};
use crate::compress::{CompressorSpec, IndexEncoding};
#[cfg(test)]
use {super::spec::SoteriaSpec, crate::algo::checked::ParamGuard};

/// One silo's planned parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoteriaSiloPlan {
    /// m: the silo's records.
    pub records: usize,
    /// b (m for GD).
    pub batch_size: usize,
    /// σ_p, the total noise standard deviation per coordinate; `None` when non-private.
    pub sigma: Option<f64>,
}

/// A checked, calibrated SoteriaFL-wing run: everything its halves are built from beyond the
/// public context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoteriaPlan {
    /// Which algorithm of the wing.
    pub method: Method,
    /// The local estimator (SGD for the direct-compression methods).
    pub estimator: Estimator,
    /// The uplink compressor (identity for LDP-*).
    pub compressor: CompressorSpec,
    /// γ under shifted compression (SoteriaFL), `None` for direct compression.
    pub shift_step: Option<f64>,
    /// G, the per-record (or, under aggregate clipping, per-estimator) clip.
    pub clip: f64,
    /// Where gradients are clipped.
    pub clipping: Clipping,
    /// How a silo draws its b records.
    pub sampling: RecordSampling,
    /// η, the server's step size.
    pub step_size: f64,
    /// SVRG's shared coin: (p, seed).
    pub coin: Option<(f64, u64)>,
    /// x⁰'s rule; `None`: the model's own initial parameters.
    pub init: Option<InitSpec>,
    /// Q-DPSGD-1's ε_c (`Some` exactly for that method).
    pub consensus: Option<f64>,
    /// One per silo, in silo order.
    pub silos: Vec<SoteriaSiloPlan>,
}

/// Q-DPSGD-1's default consensus step (its guard's, `super::guard`).
pub use super::guard::QDPSGD_CONSENSUS;

fn bad(field: &str, reason: impl Into<String>) -> crate::Error {
    crate::Error::config(format!("algorithm.{field}"), reason)
}

/// Checks `spec` for `method` (its guard, once) and calibrates every silo once on `ctx`
/// (module doc of [`super`] for the decisions).
#[cfg(test)]
pub(crate) fn plan(
    ctx: &BuildContext,
    method: Method,
    spec: &SoteriaSpec,
) -> crate::Result<(SoteriaPlan, Vec<SiloCalibration>)> {
    let wing = super::guard::SoteriaWing {
        method,
        spec: spec.clone(),
    };
    plan_checked(ctx, &wing.check()?)
}

/// Calibrates every silo once from the checked parameters, checking what needs the
/// federation (every silo answers; b ≤ m_i; the compressor at d; the continuous Gaussian).
pub(crate) fn plan_checked(
    ctx: &BuildContext,
    params: &CheckedSoteria,
) -> crate::Result<(SoteriaPlan, Vec<SiloCalibration>)> {
    let (method, spec, est) = (params.method, &params.spec, params.estimator);
    let n = ctx.silos.len();
    let d = ctx.federation.dim;
    let t = ctx.federation.rounds;
    if ctx.federation.expected_participants < n as f64 {
        return Err(crate::Error::config(
            "participation",
            format!(
                "SoteriaFL needs every silo every round (expected M = {} < N = {n}); use participation = \"all\"",
                ctx.federation.expected_participants
            ),
        ));
    }
    let comp_spec = match (method, &spec.compressor) {
        (Method::LdpSgd | Method::LdpSvrg, _) => CompressorSpec::Identity {},
        (_, Some(c)) => c.clone(),
        // k = ⌊d/20⌋ (the experiments' 5%), at least one coordinate.
        (_, None) => CompressorSpec::RandomK {
            k: Some((d / 20).max(1)),
            fraction: None,
            indices: IndexEncoding::Seed,
        },
    };
    let omega = comp_spec.build(d)?.omega();
    // LDP-SVRG is SoteriaFL-SVRG with ω = 0, where v = (1/n)Σ g_i exactly: run unshifted.
    let shifted = method == Method::SoteriaFl;
    let gamma = spec.shift_step.unwrap_or_else(|| shift_step(omega));
    let consensus = params.consensus;
    let g_clip = ctx.lipschitz;
    let aggregate = spec.clipping == Clipping::AggregateNoGuarantee;
    // The halves' oracle; built here so that a bad clip fails at planning.
    oracle(ctx, spec.clipping)?;
    if ctx.noise != dpfl_privacy::GaussianNoise::default() && spec.is_private() {
        // The events below are computed from the continuous σ; the discrete variant inflates σ.
        return Err(crate::Error::config(
            "privacy.mechanism",
            "the SoteriaFL wing adds the continuous Gaussian only",
        ));
    }
    let mut silos = Vec::with_capacity(n);
    let mut report = Vec::with_capacity(n);
    let mut coin_p = None;
    for info in &ctx.silos {
        let m = info.records;
        let fixed = ctx.fixed_multiplier(info).filter(|_| spec.is_private());
        if fixed.is_some() && !matches!(est, Estimator::Sgd | Estimator::Gd) {
            return Err(bad(
                "estimator",
                "privacy.noise_multiplier needs the sgd or gd estimator (SVRG/SAGA split their \
                 noise over two terms, SoteriaFL Lemma 3)",
            ));
        }
        let (eps, delta) = match info.budget {
            Some((e, d)) => (e.get(), d.get()),
            // Read only by the default batch size of SGD, which is refused below.
            None if fixed.is_some() => (f64::NAN, f64::NAN),
            None if !spec.is_private() => (1.0, 0.5),
            None => {
                return Err(bad(
                    "calibration",
                    format!("silo {} has no privacy budget", info.id),
                ));
            }
        };
        let b = match (est, spec.batch_size) {
            (Estimator::Gd, Some(b)) if b != m => {
                return Err(bad("batch_size", "GD uses every record (b = m)"));
            }
            (_, Some(b)) if b > m => {
                return Err(
                    at_most("batch_size", b, &format!("silo {}'s m", info.id), m)
                        .unwrap_err()
                        .into(),
                );
            }
            (_, Some(b)) => b,
            (Estimator::Sgd, None) if fixed.is_some() => {
                return Err(bad(
                    "batch_size",
                    "with privacy.noise_multiplier give batch_size: the default b reads a \
                     target epsilon",
                ));
            }
            (e, None) => default_batch(e, m, n, d, omega, g_clip, eps, delta),
        };
        let sampling = event_sampling(est, spec.sampling, m, b)?;
        if est == Estimator::Svrg {
            // Given, the guard checked it; the default b/m lies in (0, 1] as 1 ≤ b ≤ m.
            coin_p = Some(spec.snapshot_probability.unwrap_or(b as f64 / m as f64));
        }
        let (sigma, formula) = match spec.calibration {
            NoiseCalibration::None => (0.0, "non-private".to_string()),
            // σ = z·Δ with Δ the round event's sensitivity (`round_event`).
            _ if fixed.is_some() => {
                let z = fixed.unwrap_or(f64::NAN);
                let (unit, label) = if aggregate {
                    (2.0 * g_clip, "2 G")
                } else if est == Estimator::Gd {
                    (2.0 * g_clip / m as f64, "2 G / m")
                } else {
                    (2.0 * g_clip / b as f64, "2 G / b")
                };
                (
                    z * unit,
                    crate::algo::context::fixed_formula(z, label, t),
                )
            }
            NoiseCalibration::Accountant => {
                let (s, acc) = accountant_sigma(
                    est,
                    g_clip,
                    b,
                    m,
                    &sampling,
                    aggregate,
                    t,
                    dpfl_privacy::Epsilon::new(eps)?,
                    dpfl_privacy::Delta::new(delta)?,
                )?;
                crate::algo::context::count_calibration();
                (
                    s,
                    format!(
                        "sigma = smallest certified by the {acc} accountant for ({eps}, {delta}) over T = {t} rounds"
                    ),
                )
            }
            NoiseCalibration::ClosedForm => {
                let c = spec.noise_constant.unwrap_or(CODE_SHIFTED_CONSTANT);
                (
                    closed_form_sigma(c, est.noise_factor(), g_clip, t, m, eps, delta),
                    format!(
                        "sigma^2 = {c} (G_A^2/4+G_B^2) T ln(1/delta)/(m^2 eps^2) (SoteriaFL Thm 2/4; constant unstated by the paper)"
                    ),
                )
            }
            NoiseCalibration::PaperCode if method == Method::QDpsgd1 => (
                qdpsgd_code_sigma(t, m, eps, delta),
                "sigma^2 = 16 T (2 ln(1/delta)/eps + 1)/(m^2 eps) (official SoteriaFL code's Q-DPSGD-1 preset, no G)".to_string(),
            ),
            NoiseCalibration::PaperCode => {
                let (c, f) = match method {
                    Method::CdpSgd | Method::LdpSgd => (CODE_DIRECT_FACTOR, 1.0),
                    _ => (CODE_SHIFTED_CONSTANT, est.noise_factor()),
                };
                (
                    closed_form_sigma(c, f, g_clip, t, m, eps, delta),
                    format!(
                        "sigma^2 = {} G^2 T ln(1/delta)/(m^2 eps^2) (official SoteriaFL code preset)",
                        c * f
                    ),
                )
            }
        };
        let formula = if aggregate {
            format!(
                "{formula}; aggregate clipping: NO FORMAL GUARANTEE at the target, reported epsilon from sensitivity 2G"
            )
        } else {
            formula
        };
        let silo = SoteriaSiloPlan {
            records: m,
            batch_size: b,
            sigma: spec.is_private().then_some(sigma),
        };
        let run_event = silo
            .sigma
            .map(|s| round_event(est, s, g_clip, b, m, &sampling, aggregate).repeated(t as u64));
        report.push(SiloCalibration {
            silo: info.id,
            sigma,
            batch_size: b,
            formula: format!(
                "{formula}; omega = {omega:.4}{}",
                if shifted {
                    format!(", gamma = {gamma:.5}")
                } else {
                    String::new()
                }
            ),
            run_event,
        });
        silos.push(silo);
    }
    let plan = SoteriaPlan {
        method,
        estimator: est,
        compressor: comp_spec,
        shift_step: shifted.then_some(gamma),
        clip: g_clip,
        clipping: spec.clipping,
        sampling: spec.sampling,
        step_size: spec.step_size,
        coin: coin_p.map(|p| (p, spec.coin_seed)),
        init: spec.init,
        consensus,
        silos,
    };
    Ok((plan, report))
}

/// Plans `method` and builds every half from the plan (the simulator's whole federation, and
/// tests).
#[cfg(test)]
pub(crate) fn build(
    ctx: &BuildContext,
    method: Method,
    spec: &SoteriaSpec,
) -> crate::Result<BuiltAlgorithm> {
    let (plan, calibration) = plan(ctx, method, spec)?;
    plan.build(ctx, calibration)
}

/// The oracle of every silo half: per-record clipping at min(configured clip, G), or none
/// under aggregate clipping (the silo clips the whole estimator instead).
fn oracle(ctx: &BuildContext, clipping: Clipping) -> crate::Result<crate::model::GradientOracle> {
    match clipping {
        Clipping::AggregateNoGuarantee => {
            crate::model::GradientOracle::new(ctx.oracle.model_arc(), None)
        }
        Clipping::PerRecord => ctx.enforcing_oracle(),
    }
}

/// The sampler of a silo with m records and batch b (none for GD, which uses every record).
fn sampler(
    est: Estimator,
    sampling: RecordSampling,
    m: usize,
    b: usize,
) -> crate::Result<Option<BatchSampler>> {
    Ok(match est {
        Estimator::Gd => None,
        _ => Some(BatchSampler::new(sampling, m, b)?),
    })
}

/// The sampling a round's event is amplified by (GD: every record, rate 1).
fn event_sampling(
    est: Estimator,
    sampling: RecordSampling,
    m: usize,
    b: usize,
) -> crate::Result<dpfl_privacy::event::Sampling> {
    Ok(sampler(est, sampling, m, b)?
        .map_or(dpfl_privacy::event::Sampling::Poisson { rate: 1.0 }, |s| {
            s.sampling()
        }))
}

impl SoteriaPlan {
    /// The server half: x⁰ by the plan's rule, η, γ and the SVRG coin.
    pub fn server_half(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>> {
        let d = ctx.federation.dim;
        let init = match self.init {
            None => ctx.oracle.model().initial_params(),
            Some(InitSpec { std, seed }) => {
                let mut x = vec![0.0; d];
                if std > 0.0 {
                    use dpfl_privacy::VectorMechanism;
                    let mut rng = dpfl_privacy::DpRng::from_seed(
                        seed,
                        dpfl_privacy::rng::Purpose::Server,
                        u32::MAX,
                    );
                    GaussianMechanism::new(std, 1.0)?.privatize(&mut x, &mut rng);
                }
                x
            }
        };
        if self.consensus.is_some() {
            return Ok(Box::new(QdpsgdServer::new(init, self.silos.len())));
        }
        Ok(Box::new(SoteriaServer::new(
            init,
            self.step_size,
            self.shift_step,
            self.coin,
            self.silos.len(),
        )))
    }

    /// Silo `silo`'s half (index in silo order); no calibration.
    pub fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>> {
        let p = self.silos.get(silo).ok_or_else(|| {
            crate::Error::config(
                "silo",
                format!("the plan has {} silos, no silo {silo}", self.silos.len()),
            )
        })?;
        let (est, g, m, b) = (self.estimator, self.clip, p.records, p.batch_size);
        let aggregate = self.clipping == Clipping::AggregateNoGuarantee;
        let sampler = sampler(est, self.sampling, m, b)?;
        // The noise's parts carry the sensitivities of `round_event`, so the half's event
        // (derived from them and the sampler) is the one the planner reported.
        let noise = match p.sigma {
            None => None,
            Some(sigma) if est.has_full_term() && !aggregate => {
                Some(SiloNoise::split(sigma, g, b, m)?)
            }
            Some(sigma) => Some(match (aggregate, est) {
                (true, _) => SiloNoise::single(sigma, 2.0 * g, false)?,
                (false, Estimator::Gd) => SiloNoise::single(sigma, 2.0 * g / m as f64, false)?,
                _ => SiloNoise::single(sigma, 2.0 * g / b as f64, true)?,
            }),
        };
        if let Some(eps_c) = self.consensus {
            let sampler = sampler.ok_or_else(|| bad("estimator", "Q-DPSGD-1 samples"))?;
            return Ok(Box::new(QdpsgdSilo::new(
                oracle(ctx, self.clipping)?,
                sampler,
                m,
                b,
                noise,
                self.compressor.build(ctx.federation.dim)?,
                eps_c,
                self.step_size,
                self.silos.len(),
            )));
        }
        Ok(Box::new(SoteriaSilo::new(
            est,
            oracle(ctx, self.clipping)?,
            aggregate.then_some(g),
            sampler,
            m,
            b,
            noise,
            self.compressor.build(ctx.federation.dim)?,
            self.shift_step,
        )))
    }

    /// Every half with the planner's calibration rows (the simulator's whole federation).
    pub fn build(
        &self,
        ctx: &BuildContext,
        calibration: Vec<SiloCalibration>,
    ) -> crate::Result<BuiltAlgorithm> {
        let silos = (0..self.silos.len())
            .map(|i| self.silo_half(ctx, i))
            .collect::<crate::Result<Vec<_>>>()?;
        Ok(BuiltAlgorithm {
            server: self.server_half(ctx)?,
            silos,
            calibration,
        })
    }
}
