//! The calibrated plan of the DP-NormFedAvg family: the checked spec, the run's common integer
//! noise (TDL (m, α) or Binomial N — every silo shares the widest support, `quantized`'s
//! module docs) and each silo's record count and message accounting (its sensitivities and
//! per-round target), from which its encoder derives the round event. Planning calibrates every silo
//! once; [`NormFedAvgPlan::silo_half`] and [`NormFedAvgPlan::server_half`] calibrate nothing,
//! so each process of a networked run builds only its own half from the serialised plan.

use serde::{Deserialize, Serialize};

use dpfl_privacy::binomial::Binomial;
use dpfl_privacy::qtdl::accounting::Theorem2;
use dpfl_privacy::qtdl::theorem1::{self, Theorem1};
use dpfl_privacy::qtdl::{TruncatedDiscreteLaplace, binomial_mech};

use super::config::{
    BudgetSpec, CheckedNormFedAvg, NormFedAvgSpec, QuantPrivacy, TdlCalibration, Variant,
};
use super::halves::{Direction, NormFedAvgServer, NormFedAvgSilo};
use super::local::LocalTrainer;
use super::quantized::{Encoder, IntNoise, Layout, MessageAccounting};
use super::sensitivity::{Sensitivities, sensitivities};
use crate::algo::checked::ParamGuard;
use crate::algo::context::{BuildContext, BuiltAlgorithm, SiloCalibration};
use crate::algo::half::{ServerHalf, SiloHalf};

/// The run's integer noise, shared by every silo.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoisePlan {
    /// TDL(m, α).
    Tdl {
        /// m.
        m: u64,
        /// α as sampled.
        alpha: f64,
    },
    /// Bin(N, ½) − N/2.
    Binomial {
        /// N, even.
        n: u64,
    },
}

impl NoisePlan {
    fn noise(&self) -> crate::Result<IntNoise> {
        Ok(match *self {
            NoisePlan::Tdl { m, alpha } => IntNoise::Tdl(TruncatedDiscreteLaplace::new(m, alpha)?),
            NoisePlan::Binomial { n } => IntNoise::Binomial(Binomial::new(n, 0.5)?),
        })
    }
}

/// One silo's part of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiloPlan {
    /// The silo's records n_i.
    pub records: usize,
    /// What its messages are accounted from besides the common noise (none when
    /// non-private): its encoder derives the round event from both.
    pub accounting: Option<MessageAccounting>,
}

/// A checked, calibrated run of the family: everything its halves are built from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NormFedAvgPlan {
    /// The configuration.
    pub spec: NormFedAvgSpec,
    /// The common noise (none when non-private).
    pub noise: Option<NoisePlan>,
    /// One per silo, in silo order.
    pub silos: Vec<SiloPlan>,
}

impl NormFedAvgPlan {
    fn direction(&self) -> Direction {
        match self.spec.variant {
            Variant::FedAvg => Direction::Raw,
            Variant::Clipping { clip } => Direction::Clip(clip),
            _ => Direction::Unit,
        }
    }

    fn layout(&self, d: usize) -> crate::Result<Option<Layout>> {
        match (&self.spec.privacy, &self.noise) {
            (Some(p), Some(n)) => Ok(Some(Layout::new(p.s, n.noise()?.half_width(), d)?)),
            (None, None) => Ok(None),
            _ => Err(crate::Error::config(
                "plan",
                "a private DP-NormFedAvg plan without its noise, or the reverse",
            )),
        }
    }

    fn encoder(&self, d: usize, silo: &SiloPlan) -> crate::Result<Option<Encoder>> {
        match (&self.spec.privacy, &self.noise, silo.accounting) {
            (Some(p), Some(n), Some(a)) => Ok(Some(Encoder::new(p.s, n.noise()?, d, a)?)),
            (None, None, None) => Ok(None),
            _ => Err(crate::Error::config(
                "plan",
                "a private DP-NormFedAvg plan without its noise or a silo's accounting, or the reverse",
            )),
        }
    }

    /// Silo `silo`'s half; no calibration.
    pub fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>> {
        let p = self.silos.get(silo).ok_or_else(|| {
            crate::Error::config(
                "silo",
                format!("the plan has {} silos, no silo {silo}", self.silos.len()),
            )
        })?;
        let d = ctx.oracle.model().num_params();
        let spec = &self.spec;
        Ok(Box::new(NormFedAvgSilo {
            local: LocalTrainer::new(
                ctx.oracle.clone(),
                spec.eta(),
                spec.local_steps,
                spec.batch_size,
                spec.momentum,
                spec.weight_decay,
                p.records,
            )?,
            direction: self.direction(),
            encoder: self.encoder(d, p)?,
        }))
    }

    /// The server half: w_{k+1} = w_k − (β_k/M) Σ g^{(i)}, decoding with the common layout.
    pub fn server_half(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>> {
        let d = ctx.oracle.model().num_params();
        check_init(ctx, d)?;
        Ok(Box::new(NormFedAvgServer {
            w: ctx.init.clone(),
            spec: self.spec.clone(),
            layout: self.layout(d)?,
            rejected: 0,
            dense_sum: vec![0.0; d],
            int_sum: vec![0; d],
        }))
    }

    /// Every half (the simulator's whole federation).
    pub fn build(
        &self,
        ctx: &BuildContext,
        calibration: Vec<SiloCalibration>,
    ) -> crate::Result<BuiltAlgorithm> {
        Ok(BuiltAlgorithm {
            server: self.server_half(ctx)?,
            silos: (0..self.silos.len())
                .map(|i| self.silo_half(ctx, i))
                .collect::<crate::Result<_>>()?,
            calibration,
        })
    }
}

fn check_init(ctx: &BuildContext, d: usize) -> crate::Result<()> {
    if ctx.init.len() != d {
        return Err(crate::Error::Dimension(format!(
            "initial point of dimension {}, the model has {d}",
            ctx.init.len()
        )));
    }
    Ok(())
}

/// Plans and builds every half (the reproductions and benchmarks).
pub fn build(ctx: &BuildContext, spec: &NormFedAvgSpec) -> crate::Result<BuiltAlgorithm> {
    let (p, calibration) = plan(ctx, spec)?;
    p.build(ctx, calibration)
}

/// One silo's calibrated noise before the common support width is chosen.
struct Calibrated {
    th: Option<Theorem1>,
    binomial: Option<binomial_mech::CpSgdBinomial>,
    sens: Sensitivities,
}

/// (ε, δ) of one round: the budget itself (per round) or Theorem 2's ε₀ and δ/K.
fn round_budget(p: &QuantPrivacy, ctx: &BuildContext) -> crate::Result<(f64, f64, String)> {
    match p.budget {
        BudgetSpec::PerRound { epsilon, delta } => {
            Ok((epsilon, delta, format!("per round (eps = {epsilon})")))
        }
        BudgetSpec::Total { epsilon, delta } => {
            let k = ctx.federation.rounds as u64;
            let n = ctx.federation.silos as u64;
            let r = (ctx.federation.expected_participants.round() as u64).clamp(1, n.max(1));
            // A total budget outside Theorem 2's range is the budget's fault: say which field,
            // with the theorem's own reason (a configuration error, exit code 2).
            let t2 = Theorem2::from_target(epsilon, delta, k, r, n).map_err(|e| {
                crate::Error::config(
                    "algorithm.privacy.budget",
                    format!(
                        "the total budget (epsilon = {epsilon}, delta = {delta}) over K = {k} \
                         rounds, r = {r} of n = {n} silos is outside DP-NormFedAvg Theorem 2 \
                         ({e}); use a per-round budget, or change epsilon, delta or the rounds"
                    ),
                )
            })?;
            let e0 = t2.epsilon_0();
            Ok((
                e0,
                delta / k as f64,
                format!(
                    "Theorem 2: total ({epsilon}, {delta}) over K = {k} rounds, r = {r} of n = {n} \
                     -> eps_0 = {e0:.6e} per round (paper's final eps {:.4})",
                    t2.paper_epsilon()
                ),
            ))
        }
    }
}

fn calibrate(
    spec: &NormFedAvgSpec,
    p: &QuantPrivacy,
    eps: f64,
    delta: f64,
    d: usize,
    n_i: usize,
) -> crate::Result<Calibrated> {
    let sens = sensitivities(p.sensitivity, p.s, d, n_i)?;
    if spec.variant == Variant::Binomial {
        let b = binomial_mech::calibrate(
            eps,
            delta,
            binomial_mech::Sensitivities {
                l1: sens.l1,
                l2: sens.l2,
                linf: sens.linf,
            },
            d as u64,
        )?;
        return Ok(Calibrated {
            th: None,
            binomial: Some(b),
            sens,
        });
    }
    let th = match p.calibration {
        TdlCalibration::PaperClaim => theorem1::calibrate(eps, sens.l1, sens.linf)?,
        TdlCalibration::Corrected => {
            theorem1::calibrate_for_delta(eps, delta.ln(), sens.l1, sens.linf, d as u64)?
        }
    };
    Ok(Calibrated {
        th: Some(th),
        binomial: None,
        sens,
    })
}

/// Checks the spec (its guard, once) and calibrates every silo once: the plan and its
/// calibration report.
pub fn plan(
    ctx: &BuildContext,
    spec: &NormFedAvgSpec,
) -> crate::Result<(NormFedAvgPlan, Vec<SiloCalibration>)> {
    plan_checked(ctx, &spec.check()?)
}

/// Calibrates every silo once from the checked spec.
pub(crate) fn plan_checked(
    ctx: &BuildContext,
    spec: &CheckedNormFedAvg,
) -> crate::Result<(NormFedAvgPlan, Vec<SiloCalibration>)> {
    let spec = spec.spec();
    let d = ctx.oracle.model().num_params();
    check_init(ctx, d)?;
    // Calibrate every silo, then share the widest support (module docs of `quantized`).
    let mut cals = Vec::new();
    let mut budget_note = String::new();
    let mut round = (f64::NAN, f64::NAN);
    if let Some(p) = &spec.privacy {
        let (eps, delta, note) = round_budget(p, ctx)?;
        budget_note = note;
        round = (eps, delta);
        for s in &ctx.silos {
            crate::algo::context::count_calibration();
            cals.push(calibrate(spec, p, eps, delta, d, s.records).map_err(|e| {
                crate::Error::config(format!("silo {} calibration", s.id), e.to_string())
            })?);
        }
    }
    let common_m = cals
        .iter()
        .filter_map(|c| c.th.as_ref().map(|t| t.m()))
        .max();
    let common_n = cals
        .iter()
        .filter_map(|c| c.binomial.as_ref().map(|b| b.n_trials))
        .max();
    let binomial = match common_n {
        Some(n) => Some(Binomial::new(n, 0.5)?),
        None => None,
    };
    let mut silos = Vec::new();
    let mut report = Vec::new();
    let mut noise_plan = None;
    for (i, s) in ctx.silos.iter().enumerate() {
        let (noise, accounting, formula) = match (&spec.privacy, cals.get(i)) {
            (Some(p), Some(cal)) => {
                let accounting = MessageAccounting {
                    epsilon: round.0,
                    delta: round.1,
                    sensitivities: cal.sens,
                    calibration: p.calibration,
                };
                let (noise, what) = if let Some(th) = &cal.th {
                    let m = common_m.unwrap_or(th.m());
                    let th = Theorem1 {
                        tdl: TruncatedDiscreteLaplace::new(m, th.alpha())?,
                        ..th.clone()
                    };
                    let what = format!(
                        "QTDL (Das et al. Thm 1, {}): alpha = {:.4e}, m = {m}, t = {} bits \
                         (Theorem 1's m = {}, t = {}; its claimed delta 2^{:.0} is not valid for \
                         d >= 2), correct delta = 2^{:.2}",
                        match p.calibration {
                            TdlCalibration::Corrected => "corrected m",
                            TdlCalibration::PaperClaim => "paper's claim: Theorem 1's m",
                        },
                        th.alpha(),
                        th.bits(p.s)?,
                        theorem1::calibrate(th.epsilon, th.delta_1, th.delta_inf)?.m(),
                        theorem1::calibrate(th.epsilon, th.delta_1, th.delta_inf)?.bits(p.s)?,
                        th.claimed_delta(d as u64).log2(),
                        th.delta(d as u64)?.log2(),
                    );
                    (
                        NoisePlan::Tdl {
                            m,
                            alpha: th.alpha(),
                        },
                        what,
                    )
                } else {
                    let (Some(cb), Some(bin)) = (&cal.binomial, &binomial) else {
                        return Err(crate::Error::Protocol("binomial calibration lost".into()));
                    };
                    let tv = bin.tv_bound();
                    let what = format!(
                        "Binomial (cpSGD Thm 1): N = {}, paper's t = {} bits (m = N), sent with \
                         the centred width N/2; delta includes (1 + e^eps) x sampler TV {tv:.1e}",
                        bin.n(),
                        cb.bits(p.s)?
                    );
                    (NoisePlan::Binomial { n: bin.n() }, what)
                };
                // Checks the layout (s + h, t) once here, so building a half cannot fail on it.
                Layout::new(p.s, noise.noise()?.half_width(), d)?;
                let sens_note = format!(
                    "sensitivities (grid units) linf = {:.4}, l1 = {:.4}{}",
                    cal.sens.linf,
                    cal.sens.l1,
                    match p.sensitivity {
                        super::config::SensitivitySpec::Mu { mu } =>
                            format!("; eq. 6 with mu = {mu} is an assumption, not a guarantee"),
                        super::config::SensitivitySpec::Theorem3 { .. } => format!(
                            "; Theorem 3 fails with probability {:.3e} (added to delta)",
                            cal.sens.failure
                        ),
                        super::config::SensitivitySpec::WorstCase => String::new(),
                    }
                );
                (
                    Some(noise),
                    Some(accounting),
                    format!("{what}; {sens_note}; {budget_note}"),
                )
            }
            _ => (None, None, "non-private".to_string()),
        };
        let sigma = match (&noise, &spec.privacy) {
            (Some(n), Some(p)) => n.noise()?.variance(p.s).sqrt(),
            _ => 0.0,
        };
        noise_plan = noise.or(noise_plan);
        report.push(SiloCalibration {
            silo: s.id,
            sigma,
            batch_size: spec.batch_size.min(s.records),
            formula,
            run_event: None,
        });
        silos.push(SiloPlan {
            records: s.records,
            accounting,
        });
    }
    // Every silo draws the run's common noise: its event is derived from that noise and its
    // own accounting, as its encoder derives it.
    if let Some(n) = &noise_plan {
        let noise = n.noise()?;
        for (row, silo) in report.iter_mut().zip(&silos) {
            if let Some(a) = &silo.accounting {
                row.run_event = Some(a.event(&noise, d)?.repeated(ctx.federation.rounds as u64));
            }
        }
    }
    Ok((
        NormFedAvgPlan {
            spec: spec.clone(),
            noise: noise_plan,
            silos,
        },
        report,
    ))
}
