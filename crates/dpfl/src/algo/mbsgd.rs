//! Noisy ISRL-DP minibatch SGD: Lowy & Razaviyayn (ICLR 2023), Algorithm 2 (digest §2.1),
//! and its non-private counterpart.
//!
//! Silo half (lines 5–8): draw K records with replacement, average their (clipped) gradients
//! at w_r, add N(0, σ² I) inside the silo, send. Server half (lines 9–11): average the M_r
//! messages, w_{r+1} = Π_W(w_r − η g̃_r), output the average of w_0..w_{R-1} or w_R.
//!
//! Privacy: per-record replace-one sensitivity of the minibatch mean is 2L/K per occurrence
//! of the record in the batch. Each round spends the event
//! `Sampled(WithReplacement{n, K}, Gaussian(σK/(2L)))`; the accountant composes R of them.

use dpfl_privacy::calibration::calibrate_sampled_gaussian;
use dpfl_privacy::calibration::{
    isrl_experiment_k, isrl_experiment_sigma, isrl_theory_min_k, isrl_theory_sigma,
};
use dpfl_privacy::mechanism::{GaussianMechanism, VectorMechanism};
use dpfl_privacy::sampler::{BatchSampler, RecordSampling};
use dpfl_privacy::{DpRng, Neighbouring, PrivacyEvent};

use super::spec::{BuildContext, BuiltAlgorithm, Calibration, OutputRule, SiloCalibration};
use super::{Broadcast, HalfState, Payload, Round, ServerHalf, SiloHalf, SiloMessage};
use crate::data::Dataset;
use crate::model::{GradientOracle, Projection};

/// Silo half of (Noisy) MB-SGD.
#[derive(Debug)]
pub struct MbSgdSilo {
    oracle: GradientOracle,
    sampler: BatchSampler,
    mechanism: Option<GaussianMechanism>,
    idx: Vec<usize>,
    grad: Vec<f64>,
    scratch: Vec<f64>,
}

impl MbSgdSilo {
    pub fn new(
        oracle: GradientOracle,
        sampler: BatchSampler,
        mechanism: Option<GaussianMechanism>,
    ) -> Self {
        let d = oracle.model().num_params();
        MbSgdSilo {
            oracle,
            sampler,
            mechanism,
            idx: Vec::new(),
            grad: vec![0.0; d],
            scratch: vec![0.0; d],
        }
    }
}

impl SiloHalf for MbSgdSilo {
    fn round_event(&self, _round: Round) -> Option<PrivacyEvent> {
        self.mechanism
            .as_ref()
            .map(|m| m.privacy_event().sampled(self.sampler.sampling()))
    }

    fn respond(
        &mut self,
        b: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<SiloMessage> {
        check_point(&b.point, self.grad.len())?;
        self.sampler.draw(rng, &mut self.idx);
        self.oracle
            .mean_grad(&b.point, data, &self.idx, &mut self.grad, &mut self.scratch);
        let rescale = self.sampler.mean_rescale(self.idx.len());
        if rescale != 1.0 {
            crate::linalg::scale(rescale, &mut self.grad);
        }
        if let Some(m) = &self.mechanism {
            m.privatize(&mut self.grad, rng);
        }
        Ok(SiloMessage {
            round: b.round,
            payload: Payload::Dense(self.grad.clone()),
        })
    }

    fn noise_std(&self) -> f64 {
        self.mechanism.as_ref().map_or(0.0, |m| m.noise_std())
    }
}

pub(crate) fn check_point(point: &[f64], d: usize) -> crate::Result<()> {
    if point.len() != d {
        return Err(crate::Error::Protocol(format!(
            "broadcast point has dimension {}, the model has {d}",
            point.len()
        )));
    }
    Ok(())
}

/// Running average of iterates (γ_r = 1/R) or the last iterate.
#[derive(Debug, Clone)]
pub struct IterateOutput {
    rule: OutputRule,
    sum: Vec<f64>,
    count: f64,
}

impl IterateOutput {
    pub fn new(rule: OutputRule, d: usize) -> Self {
        IterateOutput {
            rule,
            sum: vec![0.0; d],
            count: 0.0,
        }
    }
    /// Records the iterate w_r that round r started from.
    pub fn record(&mut self, w: &[f64]) {
        match self.rule {
            // `sum` holds the running weighted average itself (no overflow for large r).
            OutputRule::Exponential { decay } => {
                let c = super::multistage::exponential_weight(decay, self.count);
                for (s, x) in self.sum.iter_mut().zip(w) {
                    *s += c * (x - *s);
                }
            }
            _ => crate::linalg::axpy(1.0, w, &mut self.sum),
        }
        self.count += 1.0;
    }
    /// The output given the current iterate.
    pub fn output(&self, current: &[f64]) -> Vec<f64> {
        match self.rule {
            OutputRule::Last => current.to_vec(),
            OutputRule::Average if self.count == 0.0 => current.to_vec(),
            OutputRule::Average => self.sum.iter().map(|s| s / self.count).collect(),
            OutputRule::Exponential { .. } if self.count == 0.0 => current.to_vec(),
            OutputRule::Exponential { .. } => self.sum.clone(),
        }
    }
    pub fn save(&self, state: &mut HalfState) {
        state.vectors.insert("iterate_sum".into(), self.sum.clone());
        state.scalars.insert("iterate_count".into(), self.count);
    }
    pub fn load(&mut self, state: &HalfState) -> crate::Result<()> {
        self.sum = take_vec(state, "iterate_sum", self.sum.len())?;
        self.count = take_scalar(state, "iterate_count")?;
        Ok(())
    }
}

pub(crate) fn take_vec(state: &HalfState, key: &str, d: usize) -> crate::Result<Vec<f64>> {
    let v = state
        .vectors
        .get(key)
        .ok_or_else(|| crate::Error::Protocol(format!("state lacks `{key}`")))?;
    if v.len() != d {
        return Err(crate::Error::Protocol(format!(
            "state `{key}` has length {}, expected {d}",
            v.len()
        )));
    }
    Ok(v.clone())
}

pub(crate) fn take_scalar(state: &HalfState, key: &str) -> crate::Result<f64> {
    state
        .scalars
        .get(key)
        .copied()
        .ok_or_else(|| crate::Error::Protocol(format!("state lacks `{key}`")))
}

/// Server half of MB-SGD: average, projected step, iterate averaging.
#[derive(Debug, Clone)]
pub struct MbSgdServer {
    w: Vec<f64>,
    step_size: f64,
    projection: Projection,
    out: IterateOutput,
    g: Vec<f64>,
}

impl MbSgdServer {
    pub fn new(init: Vec<f64>, step_size: f64, projection: Projection, rule: OutputRule) -> Self {
        let d = init.len();
        let mut w = init;
        projection.apply(&mut w);
        MbSgdServer {
            w,
            step_size,
            projection,
            out: IterateOutput::new(rule, d),
            g: vec![0.0; d],
        }
    }
}

/// g = (1/M_r) Σ messages, checked. Returns false if there were no messages.
pub(crate) fn average_messages(
    messages: &[SiloMessage],
    round: Round,
    g: &mut [f64],
) -> crate::Result<bool> {
    g.iter_mut().for_each(|v| *v = 0.0);
    if messages.is_empty() {
        return Ok(false);
    }
    let s = 1.0 / messages.len() as f64;
    for m in messages {
        if m.round != round {
            return Err(crate::Error::Protocol(format!(
                "message for round {} received in round {round}",
                m.round
            )));
        }
        m.payload.add_to(s, g)?;
    }
    Ok(true)
}

impl ServerHalf for MbSgdServer {
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
            crate::linalg::axpy(-self.step_size, &self.g, &mut self.w);
            self.projection.apply(&mut self.w);
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
        let mut s = HalfState::default();
        s.vectors.insert("w".into(), self.w.clone());
        self.out.save(&mut s);
        s
    }

    fn restore(&mut self, state: HalfState) -> crate::Result<()> {
        self.w = take_vec(&state, "w", self.w.len())?;
        self.out.load(&state)
    }
}

/// Per-silo noise for MB-SGD under `calibration`, returning (K, σ, formula).
pub(crate) fn calibrate_mbsgd(
    ctx: &BuildContext,
    silo: &super::SiloInfo,
    calibration: Calibration,
    batch_size: Option<usize>,
    sampling: RecordSampling,
) -> crate::Result<(usize, f64, String)> {
    let (eps, delta) = ctx.budget(silo)?;
    let n = silo.records;
    let r = ctx.federation.rounds;
    let l = ctx.lipschitz;
    let silo_err = |e: dpfl_privacy::PrivacyError| {
        crate::Error::config(format!("silo {}", silo.id), e.to_string())
    };
    Ok(match calibration {
        Calibration::Experiment => {
            let k = batch_size.unwrap_or_else(|| isrl_experiment_k(n, r, eps));
            let sigma = isrl_experiment_sigma(l, r, n, k, eps, delta).map_err(silo_err)?;
            (
                k,
                sigma,
                "sigma^2 = 8 L^2 R ln(1/delta) / (n^2 eps^2) (Lowy & Razaviyayn App. I)".into(),
            )
        }
        Calibration::Accountant => {
            let k = batch_size.unwrap_or_else(|| isrl_experiment_k(n, r, eps));
            if k == 0 || k > n {
                return Err(crate::Error::config(
                    format!("silo {}", silo.id),
                    format!("K = {k} must lie in [1, n = {n}]"),
                ));
            }
            let sampling = BatchSampler::new(sampling, n, k)
                .map_err(silo_err)?
                .sampling();
            let (z, accountant) = calibrate_sampled_gaussian(
                sampling.clone(),
                r as u64,
                Neighbouring::ReplaceOne,
                eps,
                delta,
            )
            .map_err(silo_err)?;
            // σ = z·2L/K, and the mechanism recovers z as σK/(2L): one rounding each way could
            // land a hair below the certified z, so σ is nudged up by a relative 1e-9.
            let sigma = z * (2.0 * l / k as f64) * (1.0 + 1e-9);
            (
                k,
                sigma,
                format!(
                    "smallest noise multiplier z = {z:.4} with epsilon <= {} at delta {:e} for {r} rounds of {} (replace-one), accountant {accountant} (dpfl accountant calibration)",
                    eps.get(),
                    delta.get(),
                    sampling_label(&sampling)
                ),
            )
        }
        Calibration::Theory => {
            let k = batch_size.unwrap_or_else(|| {
                (isrl_theory_min_k(n, r, eps, delta).ceil() as usize).clamp(1, n)
            });
            let sigma = isrl_theory_sigma(l, r, n, k, eps, delta).map_err(silo_err)?;
            (
                k,
                sigma,
                "sigma^2 = 256 L^2 R ln(2.5R/delta) ln(2/delta) / (n^2 eps^2) (Lowy & Razaviyayn Thm D.1)".into(),
            )
        }
    })
}

/// "K of n with replacement" and the like, for formulas in reports.
fn sampling_label(s: &dpfl_privacy::event::Sampling) -> String {
    use dpfl_privacy::event::Sampling;
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

pub(crate) fn build(
    ctx: &BuildContext,
    step_size: f64,
    calibration: Option<Calibration>,
    batch_size: Option<usize>,
    output: OutputRule,
    sampling: RecordSampling,
) -> crate::Result<BuiltAlgorithm> {
    let oracle = ctx.enforcing_oracle()?;
    let mut silos: Vec<Box<dyn SiloHalf>> = Vec::with_capacity(ctx.silos.len());
    let mut report = Vec::with_capacity(ctx.silos.len());
    for s in &ctx.silos {
        let (k, mechanism, formula) = match calibration {
            Some(c) => {
                let (k, sigma, formula) = calibrate_mbsgd(ctx, s, c, batch_size, sampling)?;
                // Replace-one sensitivity of a K-mean of L-bounded gradients: 2L/K.
                let m = ctx.gaussian(sigma, 2.0 * ctx.lipschitz / k as f64)?;
                (k, Some(m), formula)
            }
            None => {
                let k = batch_size.ok_or_else(|| {
                    crate::Error::config(
                        "algorithm.batch_size",
                        "non-private MB-SGD needs a batch size",
                    )
                })?;
                (k, None, "non-private".to_string())
            }
        };
        let sampler = BatchSampler::new(sampling, s.records, k)
            .map_err(|e| crate::Error::config(format!("silo {}", s.id), e.to_string()))?;
        let silo = MbSgdSilo::new(oracle.clone(), sampler, mechanism);
        report.push(SiloCalibration {
            silo: s.id,
            sigma: silo.noise_std(),
            batch_size: k,
            formula,
            run_event: silo
                .round_event(0)
                .map(|e| e.repeated(ctx.federation.rounds as u64)),
        });
        silos.push(Box::new(silo));
    }
    let server = MbSgdServer::new(ctx.init.clone(), step_size, ctx.projection, output);
    Ok(BuiltAlgorithm {
        server: Box::new(server),
        silos,
        calibration: report,
    })
}
