//! The AC-SA server half (Ghadimi & Lan 2012) that two wings run: Lowy & Razaviyayn's
//! Accelerated Noisy MB-SGD (Algorithm 1, `lowy/acsa.rs`, which documents the update) and the
//! shuffle wing's SDP one-pass accelerated MB-SGD (Algorithm 6, PVEC's analyzer in front of
//! it), with its (α_r, η_r) schedules: the convex schedule and the multi-stage restarts of
//! App. E.1 (`lowy/multistage.rs` computes the stages). Part of the floor: it imports no wing.

use serde::{Deserialize, Serialize};

use super::half::{HalfState, ServerHalf};
use super::message::{Broadcast, Round, SiloMessage};
use super::server::AcsaIterates;
use crate::model::Projection;

/// Server half of AC-SA (Algorithm 1 lines 3, 8–10); see the module doc.
#[derive(Debug, Clone)]
pub(crate) struct AcsaServer {
    /// w_{r−1}, w_ag, w_md and g.
    it: AcsaIterates,
    /// Centre of the regulariser (the initial point).
    w0: Vec<f64>,
    mu: f64,
    lambda: f64,
    schedule: AcsaSchedule,
    /// Completed AC-SA iterations.
    t: u64,
}

impl AcsaServer {
    /// `mu`: the modulus the update uses (λ for the regularised convex run, μ for the
    /// multi-stage run); `lambda`: the regulariser weight added to every gradient.
    pub(crate) fn new(
        init: Vec<f64>,
        projection: Projection,
        mu: f64,
        lambda: f64,
        schedule: AcsaSchedule,
    ) -> crate::Result<Self> {
        for (name, v) in [("strong_convexity", mu), ("regularization", lambda)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(crate::Error::config(
                    format!("algorithm.{name}"),
                    format!("must be finite and >= 0, got {v}"),
                ));
            }
        }
        let ok = match &schedule {
            AcsaSchedule::Convex { gamma } => gamma.is_finite() && *gamma > 0.0,
            AcsaSchedule::MultiStage { stages } => {
                !stages.is_empty() && stages.iter().all(|s| s.v.is_finite() && s.v > 0.0)
            }
        };
        if !ok {
            return Err(crate::Error::config(
                "algorithm.step_size",
                format!("the AC-SA schedule needs positive finite constants, got {schedule:?}"),
            ));
        }
        let it = AcsaIterates::new(init, projection);
        Ok(AcsaServer {
            w0: it.w.clone(),
            it,
            mu,
            lambda,
            schedule,
            t: 0,
        })
    }

    /// w_md of the next iteration into `self.it.md`; returns (α, η).
    fn middle(&mut self) -> (f64, f64) {
        let s = self.schedule.step(self.t + 1);
        let (a, eta, mu) = (s.alpha, s.eta, self.mu);
        let den = eta + (1.0 - a * a) * mu;
        let c_ag = (1.0 - a) * (mu + eta) / den;
        let c_w = a * ((1.0 - a) * mu + eta) / den;
        let it = &mut self.it;
        for ((m, ag), w) in it.md.iter_mut().zip(&it.w_ag).zip(&it.w) {
            *m = c_ag * ag + c_w * w;
        }
        (a, eta)
    }

    /// Iterations done (tests).
    #[cfg(test)]
    pub(crate) fn iterations(&self) -> u64 {
        self.t
    }
}

impl ServerHalf for AcsaServer {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        self.middle();
        self.it.broadcast(round)
    }

    fn aggregate(&mut self, round: Round, messages: &[SiloMessage]) -> crate::Result<()> {
        let (a, eta) = self.middle();
        if !self.it.mean_gradient(round, messages)? {
            return Ok(());
        }
        let (mu, it) = (self.mu, &mut self.it);
        if self.lambda > 0.0 {
            // ∇ of (λ/2)‖w − w₀‖² at w_md: data-independent, so added after the noise.
            for ((g, m), c) in it.g.iter_mut().zip(&it.md).zip(&self.w0) {
                *g += self.lambda * (m - c);
            }
        }
        let keep = (1.0 - a) * mu + eta;
        let den = mu + eta;
        for ((w, m), g) in it.w.iter_mut().zip(&it.md).zip(&it.g) {
            *w = (a * mu * m + keep * *w - a * g) / den;
        }
        it.project_and_aggregate(a);
        let stage = self.schedule.step(self.t + 1).stage;
        self.t += 1;
        let next = self.schedule.step(self.t + 1);
        if next.stage != stage && next.r == 1 {
            // Multi-stage restart: the next stage starts from w₀ := q_k = w_ag.
            self.it.restart();
        }
        Ok(())
    }

    fn output(&self) -> Vec<f64> {
        self.it.output()
    }

    fn dim(&self) -> usize {
        self.it.dim()
    }

    fn state(&self) -> HalfState {
        let mut s = HalfState::default();
        self.it.put(&mut s);
        s.put("acsa_iterations", &self.t);
        s
    }

    fn restore(&mut self, state: HalfState) -> crate::Result<()> {
        // A count by type: u64 (the JSON-era f64 needed a fraction check).
        let t: u64 = state.get("acsa_iterations")?;
        self.it.restore(&state)?;
        self.t = t;
        Ok(())
    }
}

/// One stage of the multi-stage schedule: R_k rounds with stage constant v_k.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// R_k, the rounds of stage k.
    pub rounds: usize,
    /// v_k, the stage constant that sets its step sizes (Ghadimi & Lan 2013 multi-stage AC-SA).
    pub v: f64,
}

/// The (α_r, η_r) schedule of the AC-SA server half.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AcsaSchedule {
    /// One run of AC-SA with α_r = 2/(r+1), η_r = 4γ/(r(r+1)), r = 1, 2, ….
    Convex {
        /// γ > 0 of the step schedule, with 1/(2γ) the first step.
        gamma: f64,
    },
    /// Restarts from the current w^ag at each stage, with r counted from 1 in each stage.
    MultiStage {
        /// The stages in order (Thm E.1 strongly convex: stage k halves the optimality gap).
        stages: Vec<Stage>,
    },
}

/// The step parameters of one AC-SA iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AcsaStep {
    /// Stage index (0 for the convex schedule).
    pub stage: usize,
    /// r within the stage, from 1.
    pub r: u64,
    /// α_r, the averaging weight of the new point.
    pub alpha: f64,
    /// η_r, the step size.
    pub eta: f64,
}

impl AcsaSchedule {
    /// Parameters of the `t`-th iteration (t = 1, 2, … counted over the whole run). Past the
    /// planned stages the last stage simply continues.
    pub fn step(&self, t: u64) -> AcsaStep {
        let (stage, r, c) = match self {
            AcsaSchedule::Convex { gamma } => (0, t, *gamma),
            AcsaSchedule::MultiStage { stages } => {
                let mut start = 0u64;
                let mut found = None;
                for (k, s) in stages.iter().enumerate() {
                    let end = start + s.rounds as u64;
                    if t <= end {
                        found = Some((k, t - start, s.v));
                        break;
                    }
                    start = end;
                }
                match (found, stages.last()) {
                    (Some(f), _) => f,
                    (None, Some(last)) => {
                        let k = stages.len() - 1;
                        let prev = start - last.rounds as u64;
                        (k, t - prev, last.v)
                    }
                    (None, None) => (0, t, 0.0),
                }
            }
        };
        let rf = r.max(1) as f64;
        AcsaStep {
            stage,
            r: r.max(1),
            alpha: 2.0 / (rf + 1.0),
            eta: 4.0 * c / (rf * (rf + 1.0)),
        }
    }

    /// Total planned iterations (∞ for the convex schedule).
    pub fn planned_rounds(&self) -> Option<usize> {
        match self {
            AcsaSchedule::Convex { .. } => None,
            AcsaSchedule::MultiStage { stages } => Some(stages.iter().map(|s| s.rounds).sum()),
        }
    }
}
