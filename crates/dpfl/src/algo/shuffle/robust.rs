//! The robust variant (Cheu, Joseph, Mao & Peng 2022, App. A.3: Definition A.7, Claim A.8,
//! Corollary A.9; digest `shuffle-private-sco.md` §1.5, §2.10, §5.1 item 11): a fraction of
//! the silos drop out or lie, and the honest silos keep a privacy guarantee.
//!
//! **Guarantee reported** (Cor. A.9): PVEC calibrated at ε_c ≤ 1 for n users is
//! (ε_c/γ, δ, γ)-robustly shuffle private: whenever at least γn of the users are honest
//! (γ ∈ [1/3, 1]), the view is (ε_c/γ, δ)-DP for every honest user. Decision (never
//! under-protects): with `robust = { honest_fraction = γ }` PVEC is calibrated at
//! ε_c = γ·ε ([`RobustSpec::calibration_epsilon`]), so the robust level ε_c/γ is the silo's
//! budget ε, and that is what the ledger charges under a trusted shuffler; a γ·ε above
//! Cor. A.9's ε ≤ 1 is refused. (Untrusted, the ledger charges the silo's own binomial noise,
//! which no other silo can weaken.) PVEC's n is the calibrated M_min·K; the honest users of a
//! round are then at least γ·M_min·K when at most (1 − γ)·N silos are adversarial (checked).
//!
//! **Simulated adversaries** (the last `adversaries` silos, so the honest ones keep their
//! indices): every behaviour stays inside the protocol's message space.
//! * [`Behaviour::Drop`] — the silo does not take part; since the round core needs a
//!   non-empty reply, it sends one empty marker (label [`ABSENT`], no values), which the
//!   analyzer in front of PVEC ([`AbsentFilter`]) discards, so n' counts only the silos that
//!   sent shares (digest §1.5: debias with the observed n').
//! * [`Behaviour::Flip`] — the silo runs the honest randomizer on the negated gradient
//!   (data poisoning with valid messages): E[g̃] = (1 − 2f)·∇ for a fraction f of liars.
//! * [`Behaviour::Extreme`] — every count at its maximum K·(g + s) (all messages "1"), the
//!   largest shift one silo can cause: each coordinate of the estimated sum moves by
//!   (Δ/g)·K·(g + s) − (expected honest count), so one such silo swamps the gradient. This is
//!   the known limit of shuffle protocols (privacy, not integrity, is what they guarantee).
//!
//! The paper analyses privacy only; the accuracy cost (tested in `tests/it/shuffle_pagd.rs`):
//! dropping a fraction f leaves n' = (1 − f)B users and the mean's PVEC noise variance grows
//! as 1/(1 − f); flipping scales the expected gradient by (1 − 2f).
//!
//! **End to end** (`experiments/shuffle-pagd-robust-excess.toml`, `tests/it/shuffle_robust.rs`,
//! docs/shuffle.md): PAGD, 6 silos of 40 000 records, ε = 2 at γ = 1/2 (PVEC at ε_c = 1), mean
//! excess population loss over 8 seeds: all honest 0.0106; 3 of 6 drop out 0.0177 (bound
//! asserted: ≤ 2× honest, the noise variance's 1/(1 − f)); 1 of 6 flips 0.0208 (≤ 1/(1 − 2f)²
//! = 2.25×); 3 of 6 flip 0.157, the untrained model's 0.153 (E g̃ = 0 at the edge of the
//! tolerated fraction); 1 extreme liar 2.21 (the model pinned to the ball's boundary). More
//! adversaries than ⌊(1 − γ)N⌋, or γ < 1/3, are refused at plan time.
//!
//! **Over the network** a silo that dies is a real dropout: the shuffler forwards a batch only
//! if it holds at least ⌈γ·M_min⌉ silos ([`super::plan::ShufflePlan::quorum`]), so the
//! guarantee above holds for the silos that answered (docs/shuffle.md "Dropouts over the
//! network").

// `pub` items here that only `crate::testing` re-exports (other crates' tests) are
// unreachable without the `test-hooks` feature.
#![cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]
#![warn(missing_docs)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use dpfl_privacy::{DpRng, PrivacyEvent};

use super::pvec::{Transport, count_messages, multi_message_only};
use crate::algo::half::{HalfState, ServerHalf, SiloHalf};
use crate::algo::message::{Broadcast, Payload, Reply, Round, SiloMessage};
use crate::data::Dataset;
use crate::model::{Metric, Model};

/// Label of a dropped silo's empty marker.
pub(crate) const ABSENT: u32 = 2;

/// What the adversarial silos do.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Behaviour {
    /// Take no part (an empty marker the analyzer discards).
    #[default]
    Drop,
    /// Run the honest randomizer on the negated gradient.
    Flip,
    /// Send the largest count for every label.
    Extreme,
}

/// `robust = { honest_fraction = γ, adversaries = a, behaviour = "drop" }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RobustSpec {
    /// γ ∈ [1/3, 1]: the honest fraction the guarantee holds for.
    pub honest_fraction: f64,
    /// Silos simulated as adversaries (the last ones); at most ⌊(1 − γ)N⌋.
    #[serde(default)]
    pub adversaries: usize,
    /// What they do.
    #[serde(default)]
    pub behaviour: Behaviour,
}

impl RobustSpec {
    /// ε_c = γ·ε, after Cor. A.9's conditions (γ ∈ [1/3, 1], ε_c ≤ 1).
    pub fn calibration_epsilon(&self, epsilon: f64) -> crate::Result<f64> {
        let g = self.honest_fraction;
        if !(g.is_finite() && (1.0 / 3.0..=1.0).contains(&g)) {
            return Err(crate::Error::config(
                "algorithm.robust.honest_fraction",
                format!("Cheu et al. Cor. A.9 needs gamma in [1/3, 1], got {g}"),
            ));
        }
        let e = g * epsilon;
        if e > 1.0 {
            return Err(crate::Error::config(
                "algorithm.robust.honest_fraction",
                format!(
                    "Cor. A.9 needs PVEC's epsilon = gamma·eps = {e} <= 1 (budget eps = {epsilon})"
                ),
            ));
        }
        Ok(e)
    }

    /// The adversaries fit the honest fraction: a ≤ ⌊(1 − γ)N⌋.
    pub fn check(&self, silos: usize) -> crate::Result<()> {
        let most = ((1.0 - self.honest_fraction) * silos as f64 + 1e-9).floor() as usize;
        if self.adversaries > most {
            return Err(crate::Error::config(
                "algorithm.robust.adversaries",
                format!(
                    "{} adversarial silos of N = {silos} leave fewer than gamma = {} honest (at most {most})",
                    self.adversaries, self.honest_fraction
                ),
            ));
        }
        Ok(())
    }

    /// Whether silo `i` of `n` is simulated as an adversary.
    pub fn is_adversary(&self, i: usize, n: usize) -> bool {
        i + self.adversaries >= n
    }

    /// The report's sentence.
    pub fn describe(&self, epsilon_c: f64, delta: f64) -> String {
        format!(
            "; robust (Cheu et al. Cor. A.9): PVEC at eps_c = gamma eps = {epsilon_c:.4} is ({:.4}, {delta:e}, gamma = {})-robustly shuffle private; {} adversarial silo(s) simulated ({})",
            epsilon_c / self.honest_fraction,
            self.honest_fraction,
            self.adversaries,
            match self.behaviour {
                Behaviour::Drop => "drop",
                Behaviour::Flip => "flip",
                Behaviour::Extreme => "extreme",
            }
        )
    }
}

/// A model whose loss and gradient are the negation of `inner`'s (a flipping liar's oracle).
#[derive(Debug)]
pub struct NegatedModel {
    /// The honest loss.
    pub inner: Arc<dyn Model>,
}

impl Model for NegatedModel {
    fn name(&self) -> &'static str {
        "negated"
    }
    fn num_params(&self) -> usize {
        self.inner.num_params()
    }
    fn num_features(&self) -> usize {
        self.inner.num_features()
    }
    fn loss(&self, w: &[f64], x: &[f64], y: f64) -> f64 {
        -self.inner.loss(w, x, y)
    }
    fn add_grad(&self, w: &[f64], x: &[f64], y: f64, scale: f64, out: &mut [f64]) {
        self.inner.add_grad(w, x, y, -scale, out);
    }
    fn predict(&self, w: &[f64], x: &[f64]) -> f64 {
        self.inner.predict(w, x)
    }
    fn metric(&self) -> Metric {
        self.inner.metric()
    }
    fn lipschitz(&self, max_norm: f64) -> Option<f64> {
        self.inner.lipschitz(max_norm)
    }
    fn check_data(&self, data: &Dataset) -> crate::Result<()> {
        self.inner.check_data(data)
    }
}

/// A dropped silo: one empty `ABSENT` marker per round, no privacy event.
#[derive(Debug, Clone)]
pub struct AbsentSilo {
    /// The model dimension.
    pub dim: usize,
}

impl SiloHalf for AbsentSilo {
    fn round_event(&self, _: Round) -> Option<PrivacyEvent> {
        None
    }
    fn respond(&mut self, b: &Broadcast, _: &Dataset, _: &mut DpRng) -> crate::Result<SiloMessage> {
        Ok(SiloMessage {
            round: b.round,
            payload: Payload::Labelled {
                label: ABSENT,
                payload: Box::new(Payload::Sparse {
                    dim: self.dim as u32,
                    indices: vec![],
                    values: vec![],
                }),
            },
        })
    }
    fn noise_std(&self) -> f64 {
        0.0
    }
}

/// A liar at the edge of the message space: every label's count at `max` = K·(g + s).
#[derive(Debug, Clone)]
pub struct ExtremeSilo {
    /// The model dimension.
    pub dim: usize,
    /// K·(g + s).
    pub max: u64,
    /// How the counts travel.
    pub transport: Transport,
}

impl SiloHalf for ExtremeSilo {
    fn round_event(&self, _: Round) -> Option<PrivacyEvent> {
        None
    }
    fn respond(&mut self, _: &Broadcast, _: &Dataset, _: &mut DpRng) -> crate::Result<SiloMessage> {
        Err(multi_message_only())
    }
    fn respond_reply(
        &mut self,
        b: &Broadcast,
        _: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<Reply> {
        // Every count at its maximum: all of the explicit messages are 1.
        let counts = vec![self.max; self.dim];
        let messages = count_messages(self.transport, b.round, &counts, self.max, rng)?;
        Ok(Reply {
            round: b.round,
            messages,
        })
    }
    fn noise_std(&self) -> f64 {
        0.0
    }
}

/// Discards `ABSENT` markers before the analyzer: n' counts only the silos that sent.
pub struct AbsentFilter {
    /// The analyzer (and the server behind it).
    pub inner: Box<dyn ServerHalf>,
}

impl ServerHalf for AbsentFilter {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        self.inner.broadcast(round)
    }
    fn aggregate(&mut self, round: Round, messages: &[SiloMessage]) -> crate::Result<()> {
        let kept: Vec<SiloMessage> = messages
            .iter()
            .filter(|m| !matches!(m.payload, Payload::Labelled { label: ABSENT, .. }))
            .cloned()
            .collect();
        self.inner.aggregate(round, &kept)
    }
    fn output(&self) -> Vec<f64> {
        self.inner.output()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn state(&self) -> HalfState {
        self.inner.state()
    }
    fn restore(&mut self, state: HalfState) -> crate::Result<()> {
        self.inner.restore(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_epsilon_and_adversary_bounds() {
        let r = RobustSpec {
            honest_fraction: 0.5,
            adversaries: 2,
            behaviour: Behaviour::Drop,
        };
        assert_eq!(r.calibration_epsilon(1.5).unwrap(), 0.75);
        // γ·ε = 1.5 > 1, γ outside [1/3, 1].
        assert!(r.calibration_epsilon(3.0).is_err());
        for g in [0.2, 1.1, f64::NAN] {
            let e = RobustSpec {
                honest_fraction: g,
                ..r
            }
            .calibration_epsilon(1.0)
            .unwrap_err()
            .to_string();
            assert!(e.contains("honest_fraction"), "{e}");
        }
        // N = 4: at most ⌊0.5·4⌋ = 2 adversaries; N = 3 allows 1.
        assert!(r.check(4).is_ok());
        assert!(r.check(3).unwrap_err().to_string().contains("adversaries"));
        assert!(!r.is_adversary(1, 4) && r.is_adversary(2, 4) && r.is_adversary(3, 4));
        // The robust level ε_c/γ = 0.75/0.5 = 1.5.
        assert!(r.describe(0.75, 1e-6).contains("(1.5000, "));
    }
}
