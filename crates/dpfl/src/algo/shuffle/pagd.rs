//! PAGD's server half: sequentially interactive shuffle-private AC-SA (Cheu, Joseph, Mao &
//! Peng 2022, Algorithm 4, Theorem 4.3; digest `shuffle-private-sco.md` §2.5), with the
//! strongly convex phase restarts of Theorem 4.8 (digest §2.7). The same server serves
//! pan-private AC-SA (Algorithm 6, digest §2.9; silo half in [`super::pan`]).
//!
//! ```text
//! θ^ag_1 = θ_1 = Π_Θ(w₀)
//! for t = 1..T:
//!   θ^md_t   = α_t θ_t + (1 − α_t) θ^ag_t                 (broadcast)
//!   g_t      = the analyzer's mean gradient at θ^md_t     (PVEC / the silos' noisy means)
//!   θ_{t+1}  = argmin_Θ ⟨g_t, θ − θ_t⟩ + (L_t/2)‖θ − θ_t‖² = Π_Θ(θ_t − g_t/L_t)
//!   θ^ag_{t+1} = α_t θ_{t+1} + (1 − α_t) θ^ag_t
//! output θ^ag_{T+1}
//! ```
//!
//! Decisions on the digest's ambiguities (§5.2):
//! * **Item 2, the AC-SA constants** ([`AcsaConstants`]). The OCR of Theorem 4.3 / Lemma 4.4
//!   reads α_t = 2/(t+2) and L_t = c/(t+1)·((T+2)^{3/2}·[σ/]D + β) with c unreadable and σ
//!   lost. Lan (2012, Thm 2 / Cor. 1), whose guarantee Lemma 4.4 restates, has α_t = 2/(t+1)
//!   and L_t = (2/(t+1))·max{2β, (T+2)^{3/2}σ/D}. **Default: Lan's form** ([`AcsaConstants::Lan`],
//!   the digest's recommendation: the one with a proof behind it); the OCR reading is
//!   [`AcsaConstants::PaperOcr`] with c = 2 (the larger of the two plausible numerators, so the
//!   smaller steps) and σ/D restored. Neither changes privacy: every iterate is
//!   post-processing of the analyzer's outputs, whose (ε, δ) is PVEC's per disjoint batch, so
//!   both are equally safe and the choice is about accuracy only.
//! * **σ** is the oracle's standard deviation from the *exact* bound of the realised protocol
//!   (digest §5.2 item 2): σ² = L²/B + V/B², V = PVEC's worst-case E‖PVEC − Σ‖²
//!   (`PvecParams::variance_bound`) at the calibrated parameters ([`super::pagd_preset`]).
//! * **T** is the run's rounds R (a round is one batch t); the theorem's T = ⌊n/B⌋ is reported.
//! * **Strongly convex phases** (item 6): k phases, each a fresh AC-SA started from the
//!   previous phase's output θ̂_{i−1} (θ_1 = θ^ag_1 = θ̂_{i−1}) with its own schedule tuned to
//!   a radius D_i; Θ is not shrunk (the paper does not). See [`super::pagd_preset`].
//! * **Rounds without messages** do not advance the iteration (as Lowy's AC-SA server).
//! * **More rounds than the phases plan** continue the last phase's schedule.

// `pub` items here that only `crate::testing` re-exports (other crates' tests) are
// unreachable without the `test-hooks` feature.
#![cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]
#![warn(missing_docs)]

use serde::{Deserialize, Serialize};

use crate::algo::half::{HalfState, ServerHalf};
use crate::algo::message::{Broadcast, Round, SiloMessage};
use crate::algo::server::AcsaIterates;
use crate::model::Projection;

/// Which AC-SA step-size sequences PAGD uses (see the module doc).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum AcsaConstants {
    /// Lan (2012): α_t = 2/(t+1), L_t = (2/(t+1))·max{2β, (T+2)^{3/2}σ/D} (default).
    #[default]
    Lan,
    /// Cheu et al.'s OCR of Thm 4.3: α_t = 2/(t+2), L_t = (2/(t+1))·((T+2)^{3/2}σ/D + β).
    PaperOcr,
}

impl AcsaConstants {
    /// α_t, t ≥ 1.
    pub fn alpha(self, t: u64) -> f64 {
        let t = t as f64;
        match self {
            AcsaConstants::Lan => 2.0 / (t + 1.0),
            AcsaConstants::PaperOcr => 2.0 / (t + 2.0),
        }
    }

    /// A with L_t = A/(t+1), for smoothness β, oracle standard deviation σ, radius D and
    /// T iterations.
    pub fn numerator(self, beta: f64, sigma: f64, diameter: f64, rounds: u64) -> f64 {
        let noise = (rounds as f64 + 2.0).powf(1.5) * sigma / diameter;
        match self {
            AcsaConstants::Lan => 2.0 * (2.0 * beta).max(noise),
            AcsaConstants::PaperOcr => 2.0 * (noise + beta),
        }
    }

    /// The config name.
    pub fn name(self) -> &'static str {
        match self {
            AcsaConstants::Lan => "lan",
            AcsaConstants::PaperOcr => "paper-ocr",
        }
    }
}

/// One AC-SA run of the phase reduction: its rounds and L_t = `numerator`/(t+1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Phase {
    /// Rounds (AC-SA iterations) of this phase.
    pub rounds: u64,
    /// A in L_t = A/(t+1).
    pub numerator: f64,
    /// The radius D_i the phase was tuned for.
    pub radius: f64,
}

/// The server half of PAGD and pan-private AC-SA (module doc).
#[derive(Debug, Clone)]
pub struct PagdServer {
    /// θ, θ^ag, θ^md and g.
    it: AcsaIterates,
    phases: Vec<Phase>,
    constants: AcsaConstants,
    /// Current phase.
    phase: usize,
    /// Iterations done in the current phase.
    t: u64,
}

impl PagdServer {
    /// Starts at Π_Θ(`init`); `phases` must be non-empty with positive finite numerators.
    pub fn new(
        init: Vec<f64>,
        projection: Projection,
        constants: AcsaConstants,
        phases: Vec<Phase>,
    ) -> crate::Result<Self> {
        if phases.is_empty()
            || phases
                .iter()
                .any(|p| !(p.numerator.is_finite() && p.numerator > 0.0) || p.rounds == 0)
        {
            return Err(crate::Error::config(
                "algorithm",
                format!("PAGD needs phases of >= 1 round with L_t > 0, got {phases:?}"),
            ));
        }
        Ok(PagdServer {
            it: AcsaIterates::new(init, projection),
            phases,
            constants,
            phase: 0,
            t: 0,
        })
    }

    /// θ^md of the next iteration into `self.it.md`; returns (α_t, L_t).
    fn middle(&mut self) -> (f64, f64) {
        let t = self.t + 1;
        let a = self.constants.alpha(t);
        let l = self.phases[self.phase].numerator / (t as f64 + 1.0);
        let it = &mut self.it;
        for ((m, w), ag) in it.md.iter_mut().zip(&it.w).zip(&it.w_ag) {
            *m = a * w + (1.0 - a) * ag;
        }
        (a, l)
    }

    /// (phase index, iterations done in it).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn position(&self) -> (usize, u64) {
        (self.phase, self.t)
    }
}

impl ServerHalf for PagdServer {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        self.middle();
        self.it.broadcast(round)
    }

    fn aggregate(&mut self, round: Round, messages: &[SiloMessage]) -> crate::Result<()> {
        let (a, l) = self.middle();
        if !self.it.mean_gradient(round, messages)? {
            return Ok(());
        }
        // θ_{t+1} = Π_Θ(θ_t − g_t/L_t), θ^ag_{t+1} = α_t θ_{t+1} + (1 − α_t) θ^ag_t.
        for (w, g) in self.it.w.iter_mut().zip(&self.it.g) {
            *w -= g / l;
        }
        self.it.project_and_aggregate(a);
        self.t += 1;
        if self.t >= self.phases[self.phase].rounds && self.phase + 1 < self.phases.len() {
            // Restart (Thm 4.8): the next phase starts at θ_1 = θ^ag_1 = θ̂_i.
            self.phase += 1;
            self.t = 0;
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
        s.put("pagd_phase", &(self.phase as u64));
        s.put("pagd_iterations", &self.t);
        s
    }

    fn restore(&mut self, state: HalfState) -> crate::Result<()> {
        let phase: u64 = state.get("pagd_phase")?;
        if phase as usize >= self.phases.len() {
            return Err(crate::Error::Protocol(format!(
                "PAGD state in phase {phase} of a {}-phase run",
                self.phases.len()
            )));
        }
        self.it.restore(&state)?;
        self.t = state.get("pagd_iterations")?;
        self.phase = phase as usize;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::message::Payload;

    fn dense(round: Round, g: Vec<f64>) -> SiloMessage {
        SiloMessage {
            round,
            payload: Payload::Dense(g),
        }
    }

    #[test]
    fn constants_match_hand_computed_values() {
        // β = 1, σ = 2, D = 4, T = 7: (T+2)^{3/2}σ/D = 27·2/4 = 13.5.
        assert_eq!(AcsaConstants::Lan.numerator(1.0, 2.0, 4.0, 7), 27.0);
        assert_eq!(AcsaConstants::PaperOcr.numerator(1.0, 2.0, 4.0, 7), 29.0);
        // Noise-free: Lan's 2·2β = 4β; the OCR's 2β.
        assert_eq!(AcsaConstants::Lan.numerator(3.0, 0.0, 1.0, 7), 12.0);
        assert_eq!(AcsaConstants::PaperOcr.numerator(3.0, 0.0, 1.0, 7), 6.0);
        assert_eq!(AcsaConstants::Lan.alpha(1), 1.0);
        assert_eq!(AcsaConstants::PaperOcr.alpha(1), 2.0 / 3.0);
        assert_eq!(AcsaConstants::Lan.alpha(3), 0.5);
    }

    #[test]
    fn two_iterations_by_hand_and_a_phase_restart() {
        // Lan, A = 4 (L_1 = 2, L_2 = 4/3), Θ = R², start (1, 0); gradient (2, 2) then (0, 3).
        let phases = vec![
            Phase {
                rounds: 2,
                numerator: 4.0,
                radius: 1.0,
            },
            Phase {
                rounds: 5,
                numerator: 8.0,
                radius: 0.5,
            },
        ];
        let mut s =
            PagdServer::new(vec![1.0, 0.0], Projection::None, AcsaConstants::Lan, phases).unwrap();
        // t = 1: α = 1, md = θ_1 = (1, 0); θ_2 = (1, 0) − (2, 2)/2 = (0, −1); ag = θ_2.
        assert_eq!(s.broadcast(Round::new(0)).point, vec![1.0, 0.0]);
        s.aggregate(Round::new(0), &[dense(Round::new(0), vec![2.0, 2.0])])
            .unwrap();
        assert_eq!(s.output(), vec![0.0, -1.0]);
        // t = 2: α = 2/3, md = (2/3)(0,−1) + (1/3)(0,−1) = (0, −1); θ_3 = (0, −1) − (0, 3)·3/4
        // = (0, −3.25); ag = (2/3)(0, −3.25) + (1/3)(0, −1) = (0, −2.5).
        let b = s.broadcast(Round::new(1));
        assert!((b.point[1] + 1.0).abs() < 1e-15);
        s.aggregate(Round::new(1), &[dense(Round::new(1), vec![0.0, 3.0])])
            .unwrap();
        let out = s.output();
        assert!(
            out[0].abs() < 1e-15 && (out[1] + 2.5).abs() < 1e-12,
            "{out:?}"
        );
        // Phase 2 restarts at θ_1 = θ^ag = (0, −2.5), α_1 = 1 again.
        assert_eq!(s.position(), (1, 0));
        let b = s.broadcast(Round::new(2));
        assert!((b.point[1] + 2.5).abs() < 1e-12);
        // An empty round changes nothing; a wrong-round message is refused.
        let before = s.state();
        s.aggregate(Round::new(2), &[]).unwrap();
        assert_eq!(s.state(), before);
        assert!(
            s.aggregate(Round::new(2), &[dense(Round::new(9), vec![0.0, 0.0])])
                .is_err()
        );
        // State round-trips.
        let mut t = PagdServer::new(
            vec![0.0, 0.0],
            Projection::None,
            AcsaConstants::Lan,
            vec![
                Phase {
                    rounds: 2,
                    numerator: 4.0,
                    radius: 1.0,
                },
                Phase {
                    rounds: 5,
                    numerator: 8.0,
                    radius: 0.5,
                },
            ],
        )
        .unwrap();
        t.restore(before.clone()).unwrap();
        assert_eq!(t.state(), before);
        assert!(PagdServer::new(vec![0.0], Projection::None, AcsaConstants::Lan, vec![]).is_err());
    }

    #[test]
    fn the_projection_keeps_every_iterate_in_the_ball() {
        let phases = vec![Phase {
            rounds: 10,
            numerator: 1.0,
            radius: 2.0,
        }];
        let ball = Projection::L2Ball { radius: 1.0 };
        let mut s = PagdServer::new(vec![0.0], ball, AcsaConstants::PaperOcr, phases).unwrap();
        for r in 0..10 {
            s.broadcast(Round::new(r));
            s.aggregate(Round::new(r), &[dense(Round::new(r), vec![-100.0])])
                .unwrap();
            assert!(s.output()[0] <= 1.0 + 1e-12);
        }
        // Pushed to the boundary every round: θ_t = 1 and θ^ag = 1 − Π_t (1 − α_t) with
        // 1 − α_t = t/(t+2), whose product over t = 1..10 is 2/(11·12) = 1/66.
        assert!(
            (s.output()[0] - (1.0 - 1.0 / 66.0)).abs() < 1e-12,
            "{:?}",
            s.output()
        );
    }
}
