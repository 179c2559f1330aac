//! The two halves of the DP-NormFedAvg family (Algorithms 2 and 3), built from the calibrated
//! `NormFedAvgPlan` of `plan.rs` (each process builds only its own half). A private silo's
//! round event is its encoder's (`quantized`: QTDL, Das et al. Thm 1; Binomial, cpSGD Thm 1).
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

use dpfl_privacy::{DpRng, Mechanism, PrivacyEvent};

use super::config::NormFedAvgSpec;
use super::local::LocalTrainer;
use super::quantized::{Encoder, Layout};
use crate::algo::half::{HalfState, ServerHalf, SiloHalf};
use crate::algo::message::{Broadcast, Payload, Round, SiloMessage};
use crate::data::Dataset;

/// What a silo does with its update d before sending it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Direction {
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

/// The silo half: E local steps, the update's direction, and (private variants) the
/// quantized, integer-noised, t-bit packed message of its [`Encoder`] mechanism, whose event
/// is the round's (every round uses all of the silo's records: no sampling amplification).
pub(crate) struct NormFedAvgSilo {
    pub(crate) local: LocalTrainer,
    pub(crate) direction: Direction,
    pub(crate) encoder: Option<Encoder>,
}

impl SiloHalf for NormFedAvgSilo {
    fn round_event(&self, _round: Round) -> Option<PrivacyEvent> {
        self.encoder.as_ref().map(|e| e.privacy_event())
    }

    fn respond(
        &mut self,
        b: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<SiloMessage> {
        b.check_dim(self.local.oracle.model().num_params())?;
        let mut d = self.local.update(b.round.get(), &b.point, data, rng)?;
        self.direction.apply(&mut d);
        let payload = match &mut self.encoder {
            Some(enc) => enc.release(d.as_mut_slice(), rng)?,
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
pub(crate) struct NormFedAvgServer {
    pub(crate) w: Vec<f64>,
    pub(crate) spec: NormFedAvgSpec,
    pub(crate) layout: Option<Layout>,
    pub(crate) rejected: u64,
    pub(crate) dense_sum: Vec<f64>,
    pub(crate) int_sum: Vec<i64>,
}

impl NormFedAvgServer {
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
                    tracing::warn!(
                        round = round.get(),
                        "norm-fed-avg server left out a message: {why}"
                    );
                }
            }
        }
        if valid == 0 {
            return Ok(());
        }
        let beta = self
            .spec
            .beta
            .at(round.get(), self.spec.eta().at(round.get()));
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
