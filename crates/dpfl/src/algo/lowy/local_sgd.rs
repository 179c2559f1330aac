//! Local SGD (FedAvg) and the ISRL-DP Local SGD baseline of Lowy & Razaviyayn, App. I
//! (digest §2.7): each participating silo starts from w_r and takes K single-sample SGD
//! steps w ← w − η(∇f(w; x) + u), x uniform from its data, u ~ N(0, σ² I) with
//! σ² = 8 L² R K ln(1/δ)/(n² ε²); it sends its K-th iterate and the server averages them.
//!
//! Privacy: each local step is a Gaussian release of one record's gradient (replace-one
//! sensitivity 2L, noise multiplier σ/(2L)) on a record drawn uniformly with replacement;
//! the silo releases only the final iterate, and we account for it (conservatively) as the
//! adaptive composition of all R·K steps.

use dpfl_privacy::calibration::local_sgd_sigma;
use dpfl_privacy::mechanism::{GaussianMechanism, Mechanism, VectorMechanism};
use dpfl_privacy::sampler::WithReplacement;
use dpfl_privacy::{DpRng, PrivacyEvent};

use dpfl_privacy::sampler::RecordSampling;
use serde::{Deserialize, Serialize};

use super::calibration::{Calibration, NoiseRule, default_k, sampling_label, silo_sigma};

use crate::algo::context::{BuildContext, SiloCalibration};
use crate::algo::half::{HalfState, ServerHalf, SiloHalf};
use crate::algo::message::{Broadcast, Payload, Round, SiloMessage};
use crate::algo::server::{IterateOutput, OutputRule, average_messages};
use crate::data::Dataset;
use crate::model::{GradientOracle, Projection};
use crate::units::StepSize;

/// A Local SGD silo (Lowy & Razaviyayn App. I): K single-sample clipped steps from the broadcast
/// point, each noised for a private run; sends its local model.
#[derive(Debug)]
pub(crate) struct LocalSgdSilo {
    oracle: GradientOracle,
    step_size: StepSize,
    steps: usize,
    sampler: WithReplacement,
    mechanism: Option<GaussianMechanism>,
    projection: Projection,
    idx: Vec<usize>,
    grad: Vec<f64>,
}

impl SiloHalf for LocalSgdSilo {
    fn round_event(&self, _round: Round) -> Option<PrivacyEvent> {
        self.mechanism.as_ref().map(|m| {
            m.privacy_event()
                .sampled(self.sampler.sampling())
                .repeated(self.steps as u64)
        })
    }

    fn respond(
        &mut self,
        b: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<SiloMessage> {
        b.check_dim(self.grad.len())?;
        let mut w = b.point.clone();
        for _ in 0..self.steps {
            self.sampler.draw(rng, &mut self.idx);
            let (x, y) = data.row(self.idx[0]);
            self.oracle.clipped_grad(&w, x, y, &mut self.grad);
            if let Some(m) = &self.mechanism {
                m.privatize(&mut self.grad, rng);
            }
            crate::linalg::axpy(-self.step_size.get(), &self.grad, &mut w);
            self.projection.apply(&mut w);
        }
        Ok(SiloMessage {
            round: b.round,
            payload: Payload::Dense(w),
        })
    }

    fn noise_std(&self) -> f64 {
        self.mechanism.as_ref().map_or(0.0, |m| m.noise_std())
    }
}

/// Server half of Local SGD: w_{r+1} = mean of the silos' models.
#[derive(Debug, Clone)]
pub(crate) struct ModelAverageServer {
    w: Vec<f64>,
    out: IterateOutput,
    g: Vec<f64>,
}

impl ServerHalf for ModelAverageServer {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        Broadcast {
            round,
            point: self.w.clone(),
            aux: Vec::new(),
        }
    }
    fn aggregate(&mut self, round: Round, messages: &[SiloMessage]) -> crate::Result<()> {
        self.out.record(&self.w);
        if average_messages(messages, round, &mut self.g)? {
            self.w.copy_from_slice(&self.g);
        }
        Ok(())
    }
    fn output(&self) -> Vec<f64> {
        self.out.output(&self.w)
    }
    fn dim(&self) -> usize {
        self.w.len()
    }
    fn state(&self) -> HalfState {
        self.out.state_with(&self.w)
    }
    fn restore(&mut self, state: HalfState) -> crate::Result<()> {
        self.out.restore_with(&mut self.w, &state)
    }
}

/// One silo of a Local SGD plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalSiloPlan {
    /// n_i.
    pub records: usize,
    /// K local steps.
    pub steps: usize,
    /// σ per local step (App. I), or none for the non-private run.
    pub sigma: Option<f64>,
}

/// What a Local SGD run's halves are built from, checked and calibrated once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalSgdPlan {
    /// η of the local steps.
    pub step_size: StepSize,
    /// The output rule of the server half.
    pub output: OutputRule,
    /// One per silo, in silo order.
    pub silos: Vec<LocalSiloPlan>,
}

impl LocalSgdPlan {
    /// The server half: the average of the silos' models.
    pub fn server_half(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>> {
        let d = ctx.init.len();
        let mut w = ctx.init.clone();
        ctx.projection.apply(&mut w);
        Ok(Box::new(ModelAverageServer {
            w,
            out: IterateOutput::new(self.output, d),
            g: vec![0.0; d],
        }))
    }

    /// Silo `silo`'s half; no calibration.
    pub fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>> {
        let p = self
            .silos
            .get(silo)
            .ok_or_else(|| super::mbsgd::no_silo(silo, self.silos.len()))?;
        let silo_err = |e: dpfl_privacy::PrivacyError| {
            crate::Error::config(format!("silo {silo}"), e.to_string())
        };
        let oracle = ctx.enforcing_oracle()?;
        // One record's gradient, replace-one: sensitivity 2L.
        let mechanism = p
            .sigma
            .map(|sigma| ctx.gaussian(sigma, 2.0 * ctx.lipschitz))
            .transpose()?;
        let sampler = WithReplacement::new(p.records, 1).map_err(silo_err)?;
        let d = oracle.model().num_params();
        Ok(Box::new(LocalSgdSilo {
            oracle,
            step_size: self.step_size,
            steps: p.steps,
            sampler,
            mechanism,
            projection: ctx.projection,
            idx: Vec::new(),
            grad: vec![0.0; d],
        }))
    }
}

/// Calibrates every silo once (App. I) from Local SGD's checked parameters.
pub(crate) fn plan(
    ctx: &BuildContext,
    params: &super::checked_params::LocalSgdParams,
) -> crate::Result<(LocalSgdPlan, Vec<SiloCalibration>)> {
    let (step_size, calibration, output) = (params.step, params.rule, params.output);
    let local_steps = params.local_steps.given();
    ctx.enforcing_oracle()?;
    let r = ctx.federation.rounds;
    let mut plan = LocalSgdPlan {
        step_size,
        output,
        silos: Vec::with_capacity(ctx.silos.len()),
    };
    let mut report = Vec::new();
    for (i, s) in ctx.silos.iter().enumerate() {
        let silo_err = |e: dpfl_privacy::PrivacyError| {
            crate::Error::config(format!("silo {}", s.id), e.to_string())
        };
        let fixed = calibration.and(ctx.fixed_multiplier(s));
        let (k, sigma, formula) = if let Some(z) = fixed {
            // One record's gradient per local step, replace-one: Δ = 2L (`silo_half`).
            let k = local_steps.ok_or_else(|| {
                crate::Error::config(
                    "algorithm.local_steps",
                    "with privacy.noise_multiplier give local_steps: the default K rule reads a \
                     target epsilon",
                )
            })?;
            (
                k,
                Some(z * 2.0 * ctx.lipschitz),
                crate::algo::context::fixed_formula(z, "2 L per local step", r),
            )
        } else if let Some(rule) = calibration {
            let (eps, delta) = ctx.budget(s)?;
            // App. I: K as for MB-SGD's experiment rule.
            let k = match local_steps {
                Some(k) => k,
                None => default_k(NoiseRule::Experiment, s.records, r, eps, delta).unwrap_or(1),
            };
            let (sigma, formula) = match rule {
                Calibration::Experiment => {
                    crate::algo::context::count_calibration();
                    (
                    local_sgd_sigma(ctx.lipschitz, r, k, s.records, eps, delta)
                        .map_err(silo_err)?,
                    "sigma^2 = 8 L^2 R K ln(1/delta) / (n^2 eps^2) per local step (Lowy & Razaviyayn App. I)".to_string(),
                )
                }
                Calibration::Accountant => {
                    // R·K single-record steps, each 1 of n with replacement: the minibatch
                    // search with K = 1 (σ = z·2L) over R·K "rounds".
                    let steps = r.checked_mul(k).ok_or_else(|| {
                        crate::Error::config("algorithm.local_steps", "R·K overflows")
                    })?;
                    let (sigma, cert) = silo_sigma(
                        NoiseRule::Accountant,
                        ctx.lipschitz,
                        steps,
                        s.records,
                        1,
                        eps,
                        delta,
                        RecordSampling::WithReplacement,
                        super::calibration::NoiseShape::of(ctx),
                    )
                    .map_err(silo_err)?;
                    let formula = match cert {
                        Some(c) => format!(
                            "smallest noise multiplier z = {:.4} per local step with epsilon <= {} at delta {:e} for R*K = {steps} steps of {} (replace-one), accountant {} (dpfl accountant calibration)",
                            c.noise_multiplier,
                            eps.get(),
                            delta.get(),
                            sampling_label(&c.sampling),
                            c.accountant
                        ),
                        None => NoiseRule::Accountant.formula().to_string(),
                    };
                    (sigma, formula)
                }
                // The guard refuses it: the paper gives Local SGD only App. I's noise.
                Calibration::Theory => {
                    return Err(crate::algo::checked::ParamError::refused(
                        "calibration",
                        "Local SGD has no theory rule",
                    )
                    .into());
                }
            };
            (k, Some(sigma), formula)
        } else {
            // Required here, not by the guard: a reproduction's grid may set K.
            let k = local_steps.ok_or_else(|| {
                crate::algo::checked::ParamError::missing(
                    "local_steps",
                    "non-private Local SGD has no rule for K",
                )
            })?;
            (k, None, "non-private".to_string())
        };
        plan.silos.push(LocalSiloPlan {
            records: s.records,
            steps: k,
            sigma,
        });
        let silo = plan.silo_half(ctx, i)?;
        report.push(SiloCalibration {
            silo: s.id,
            sigma: silo.noise_std(),
            batch_size: k,
            formula,
            run_event: silo.round_event(Round::FIRST).map(|e| e.repeated(r as u64)),
        });
    }
    Ok((plan, report))
}
