//! The two halves of the DP-NormFedAvg family (Algorithms 2 and 3) and their construction.
//!
//! Silo (Algorithm 2 lines 4–9): local run → d_k → direction (d for FedAvg, d/‖d‖, or
//! d·min(1, C/‖d‖)) → dense f64 (non-private) or the t-bit quantized, noised message
//! ([`super::quantized`]). Server (line 10): w_{k+1} = w_k − (β_k/M)·Σ g^{(i)} over the M
//! valid messages; for packed messages Σ z^{(i)} is an exact integer sum, scaled once by
//! β_k/(M·s).
//!
//! *Zero update* (digest §6.2 item 10): d_k = 0 has no direction; its unit vector is taken to
//! be 0, so a private silo sends pure noise (the worst-case sensitivities still hold: Q(0) = 0
//! lies in the same grid box as every other output) and NormFedAvg sends zeros.
//!
//! *Malformed messages never stop a round*: a message of the wrong round, kind, width, length
//! or with a value outside ±(s+m) is left out of the sum (M counts only the valid ones), logged
//! and counted in the server's state (`rejected`).

use dpfl_privacy::binomial::Binomial;
use dpfl_privacy::qtdl::accounting::{Theorem2, release_event};
use dpfl_privacy::qtdl::theorem1::{self, Theorem1};
use dpfl_privacy::qtdl::{LogProb, TruncatedDiscreteLaplace, binomial_mech};
use dpfl_privacy::{DpRng, PrivacyEvent};

use super::config::{BudgetSpec, NormFedAvgSpec, QuantPrivacy, TdlCalibration, Variant};
use super::local::LocalTrainer;
use super::quantized::{Encoder, IntNoise, Layout};
use super::sensitivity::{Sensitivities, sensitivities};
use crate::algo::context::{BuildContext, BuiltAlgorithm, SiloCalibration};
use crate::algo::half::{HalfState, ServerHalf, SiloHalf};
use crate::algo::message::{Broadcast, Payload, Round, SiloMessage};
use crate::data::Dataset;

/// What a silo does with its update d before sending it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Direction {
    Raw,
    Unit,
    Clip(f64),
}

impl Direction {
    fn apply(self, d: &mut [f64]) {
        let norm = crate::linalg::dot(d, d).sqrt();
        let factor = match self {
            Direction::Raw => return,
            // The zero update's unit vector is 0 (module docs).
            _ if norm == 0.0 => return,
            Direction::Unit => 1.0 / norm,
            Direction::Clip(c) => (c / norm).min(1.0),
        };
        crate::linalg::scale(factor, d);
    }
}

pub struct NormFedAvgSilo {
    local: LocalTrainer,
    direction: Direction,
    encoder: Option<Encoder>,
    event: Option<PrivacyEvent>,
}

impl SiloHalf for NormFedAvgSilo {
    fn round_event(&self, _round: Round) -> Option<PrivacyEvent> {
        self.event.clone()
    }

    fn respond(
        &mut self,
        b: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<SiloMessage> {
        b.check_dim(self.local.oracle.model().num_params())?;
        let mut d = self.local.update(b.round, &b.point, data, rng)?;
        self.direction.apply(&mut d);
        let payload = match &mut self.encoder {
            Some(enc) => enc.encode(&d, rng)?,
            None => Payload::Dense(d),
        };
        Ok(SiloMessage {
            round: b.round,
            payload,
        })
    }

    fn noise_std(&self) -> f64 {
        self.encoder
            .as_ref()
            .map_or(0.0, |e| e.noise().variance(e.layout.s).sqrt())
    }
}

/// w_{k+1} = w_k − (β_k/M) Σ g^{(i)}.
pub struct NormFedAvgServer {
    w: Vec<f64>,
    spec: NormFedAvgSpec,
    layout: Option<Layout>,
    rejected: u64,
    dense_sum: Vec<f64>,
    int_sum: Vec<i64>,
}

impl NormFedAvgServer {
    /// Messages left out so far as malformed.
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    fn add(&mut self, round: Round, m: &SiloMessage) -> Result<(), String> {
        if m.round != round {
            return Err(format!("message for round {} in round {round}", m.round));
        }
        match &self.layout {
            Some(layout) => layout.add_decoded(&m.payload, &mut self.int_sum),
            None => match &m.payload {
                Payload::Dense(v) if v.len() == self.w.len() && v.iter().all(|x| x.is_finite()) => {
                    crate::linalg::axpy(1.0, v, &mut self.dense_sum);
                    Ok(())
                }
                _ => Err(format!(
                    "expected a finite dense vector of dimension {}",
                    self.w.len()
                )),
            },
        }
    }
}

impl ServerHalf for NormFedAvgServer {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        Broadcast {
            round,
            point: self.w.clone(),
            aux: Vec::new(),
        }
    }

    fn aggregate(&mut self, round: Round, messages: &[SiloMessage]) -> crate::Result<()> {
        self.dense_sum.iter_mut().for_each(|v| *v = 0.0);
        self.int_sum.iter_mut().for_each(|v| *v = 0);
        let mut valid = 0usize;
        for m in messages {
            match self.add(round, m) {
                Ok(()) => valid += 1,
                Err(why) => {
                    self.rejected += 1;
                    tracing::warn!(round, "norm-fed-avg server left out a message: {why}");
                }
            }
        }
        if valid == 0 {
            return Ok(());
        }
        let beta = self.spec.beta.at(round, self.spec.eta().at(round));
        match &self.layout {
            Some(l) => {
                let c = beta / (valid as f64 * l.s as f64);
                for (w, &z) in self.w.iter_mut().zip(&self.int_sum) {
                    *w -= c * z as f64;
                }
            }
            None => crate::linalg::axpy(-beta / valid as f64, &self.dense_sum, &mut self.w),
        }
        Ok(())
    }

    fn output(&self) -> Vec<f64> {
        self.w.clone()
    }
    fn dim(&self) -> usize {
        self.w.len()
    }
    fn state(&self) -> HalfState {
        let mut s = HalfState::default();
        s.put("w", &self.w).put("rejected", &self.rejected);
        s
    }
    fn restore(&mut self, state: HalfState) -> crate::Result<()> {
        self.w = state.vector("w", self.w.len())?;
        self.rejected = state.get("rejected")?;
        Ok(())
    }
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
            let t2 = Theorem2::from_target(epsilon, delta, k, r, n)?;
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

/// The round event of a TDL silo at the common m: the correct δ (plus Theorem 3's failure
/// probability); in paper-claim mode that δ may be 1, reported as such (no guarantee).
fn tdl_event(
    th: &Theorem1,
    d: u64,
    failure: f64,
    mode: TdlCalibration,
) -> crate::Result<PrivacyEvent> {
    let base = match mode {
        TdlCalibration::Corrected => release_event(th, d)?,
        TdlCalibration::PaperClaim => PrivacyEvent::TruncatedDiscreteLaplace {
            epsilon: th.epsilon.max(th.alpha() * th.delta_1.floor()),
            delta: th.delta(d)?.upper_f64(),
        },
    };
    Ok(match base {
        PrivacyEvent::TruncatedDiscreteLaplace { epsilon, delta } if failure > 0.0 => {
            PrivacyEvent::TruncatedDiscreteLaplace {
                epsilon,
                delta: LogProb::from_prob(delta)
                    .plus(LogProb::from_prob(failure))
                    .upper_f64()
                    .min(1.0),
            }
        }
        e => e,
    })
}

pub(crate) fn build(ctx: &BuildContext, spec: &NormFedAvgSpec) -> crate::Result<BuiltAlgorithm> {
    spec.check()?;
    let oracle = ctx.oracle.clone();
    let d = oracle.model().num_params();
    if ctx.init.len() != d {
        return Err(crate::Error::Dimension(format!(
            "initial point of dimension {}, the model has {d}",
            ctx.init.len()
        )));
    }
    let direction = match spec.variant {
        Variant::FedAvg => Direction::Raw,
        Variant::Clipping { clip } => Direction::Clip(clip),
        _ => Direction::Unit,
    };
    // Calibrate every silo, then share the widest support (module docs of `quantized`).
    let mut cals = Vec::new();
    let mut budget_note = String::new();
    if let Some(p) = &spec.privacy {
        let (eps, delta, note) = round_budget(p, ctx)?;
        budget_note = note;
        for s in &ctx.silos {
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
    let mut silos: Vec<Box<dyn SiloHalf>> = Vec::new();
    let mut report = Vec::new();
    let mut layout = None;
    for (i, s) in ctx.silos.iter().enumerate() {
        let local = LocalTrainer::new(
            oracle.clone(),
            spec.eta(),
            spec.local_steps,
            spec.batch_size,
            spec.momentum,
            spec.weight_decay,
            s.records,
        )?;
        let (encoder, event, formula) = match (&spec.privacy, cals.get(i)) {
            (Some(p), Some(cal)) => {
                let (noise, event, what) = if let Some(th) = &cal.th {
                    let m = common_m.unwrap_or(th.m());
                    let th = Theorem1 {
                        tdl: TruncatedDiscreteLaplace::new(m, th.alpha())?,
                        ..th.clone()
                    };
                    let event = tdl_event(&th, d as u64, cal.sens.failure, p.calibration)?;
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
                    (IntNoise::Tdl(th.tdl), event, what)
                } else {
                    let (Some(cb), Some(bin)) = (&cal.binomial, &binomial) else {
                        return Err(crate::Error::Protocol("binomial calibration lost".into()));
                    };
                    let tv = bin.tv_bound();
                    let event = PrivacyEvent::EpsilonDelta {
                        epsilon: cb.epsilon,
                        delta: (cb.delta + (1.0 + cb.epsilon.exp()) * tv).min(1.0),
                    };
                    let what = format!(
                        "Binomial (cpSGD Thm 1): N = {}, paper's t = {} bits (m = N), sent with \
                         the centred width N/2; delta includes (1 + e^eps) x sampler TV {tv:.1e}",
                        bin.n(),
                        cb.bits(p.s)?
                    );
                    (IntNoise::Binomial(bin.clone()), event, what)
                };
                let enc = Encoder::new(p.s, noise, d)?;
                layout = Some(enc.layout);
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
                    Some(enc),
                    Some(event),
                    format!("{what}; {sens_note}; {budget_note}"),
                )
            }
            _ => (None, None, "non-private".to_string()),
        };
        let silo = NormFedAvgSilo {
            local,
            direction,
            encoder,
            event,
        };
        report.push(SiloCalibration {
            silo: s.id,
            sigma: silo.noise_std(),
            batch_size: spec.batch_size.min(s.records),
            formula,
            run_event: silo
                .round_event(0)
                .map(|e| e.repeated(ctx.federation.rounds as u64)),
        });
        silos.push(Box::new(silo));
    }
    Ok(BuiltAlgorithm {
        server: Box::new(NormFedAvgServer {
            w: ctx.init.clone(),
            spec: spec.clone(),
            layout,
            rejected: 0,
            dense_sum: vec![0.0; d],
            int_sum: vec![0; d],
        }),
        silos,
        calibration: report,
    })
}
