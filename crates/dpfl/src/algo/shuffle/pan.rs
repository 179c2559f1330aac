//! Pan-private AC-SA (Cheu, Joseph, Mao & Peng 2022, App. C: Definition C.2, Algorithm 6,
//! Lemma C.4, Theorem C.3; digest `shuffle-private-sco.md` §1.6, §2.9).
//!
//! **Definition** (C.2): for neighbouring streams and every time t, the pair (internal state
//! after the first t elements, final output) is (ε, δ)-indistinguishable: privacy against one
//! intrusion into the memory at any time *and* the published output.
//!
//! **Federated reading.** Each silo is the stream processor of its own records: it reads its
//! disjoint batch of K records one at a time into a gradient accumulator, and its internal
//! state during a round is that accumulator (the θ variables are the server's, computed from
//! published outputs only, so post-processing). Per round and silo ([`PanPrivateSilo`], its
//! noise the [`PanPrivatePair`] mechanism):
//!
//! ```text
//! g ← Z_t,  Z_t ~ N(0, ζ² I_d)         state noise, before any record is read (Alg. 6 lines 4–5)
//! for each of the K records: g ← g + (1/K)·∇ℓ(θ^md, x); discard x         (line 7)
//! g ← g + N(0, ζ² I_d)                  output noise, fresh, at the end of the batch (line 9)
//! send g
//! ```
//!
//! with ζ² = 8L²ln(2/δ)/(K²ε²) (Alg. 6 line 1): the Gaussian mechanism of Lemma C.5
//! (2Δ²ln(2/δ)/ε², valid for ε < 1) at the sensitivity Δ = 2L/K of the batch mean under
//! replacement (the OCR's "Δ₂(f) ≤ 2L" is 2L/K; digest §2.9). **The state noise** is Z_t, the
//! first draw: an intrusion after the differing record was read sees Z_t + (partial mean),
//! which Z_t alone protects (Lemma C.4, case t* = t, i* ≥ i); an intrusion before it sees
//! nothing of the record, and the output's second draw protects the output (cases t* < t and
//! i* < i). One Gaussian counts in each case, so each round is (ε, δ)-pan-private, and the
//! batches are disjoint (one pass), so the whole run is.
//!
//! The server half is PAGD's AC-SA ([`super::pagd::PagdServer`]) with the same preset
//! ([`super::pagd_preset`]), σ² = L²/(MK) + 2dζ²/M (the paper's L²/B + 2dζ² with M silos each
//! adding their own noise), and the log factor √ln(1/δ) (Thm C.3's substitution of ln(1/δ)
//! for ln²(d/δ) in the variance). No shuffler is needed.
//!
//! **Keys (the intrusion model).** An intruder reads the silo's memory and stored state once,
//! at a time t. What it may find is the state the proof allows: the noised accumulator
//! Z_t + (partial mean), the batch schedule, the server's public θ's. It must not find a key
//! that regenerates Z_t (de-noising the accumulator) or the output noise of this or any other
//! round (de-noising the messages). So an OS-seeded silo draws Z_t and the output noise each
//! from its own fresh OS key ([`DpRng::with_fresh_key`]), erased as soon as its draw is done:
//! Z_t's before the first record is read, the output noise's before the message leaves; no key
//! is written to the silo's state (`dpfl-net`'s `silo/state.rs`). The batch schedule (a
//! permutation of record indices from the silo's own generator) and the stored message are not
//! secret from the intrusion model's point of view: the message is the published output, and
//! the schedule does not depend on the records' values. A seeded run (`seed = …`) draws both
//! from the silo's seeded stream, to stay reproducible: it is pan-private only against those
//! who do not hold the seed. docs/shuffle.md states the model in full.
//!
//! Decisions: **what the ledger charges** — the pan-private (ε, δ) per disjoint batch (the
//! output alone is a Gaussian of variance 2ζ², a stronger guarantee, reported beside it); the
//! charge is the weaker of the two, so it never under-reports. **ε < 1** is required (Lemma
//! C.5), and refused otherwise. **Line 12** of Algorithm 6 repeats line 11 in the OCR; the
//! server forms θ^md for the next round from the new θ and θ^ag (digest §5.2 item 3).

// `pub` items here that only `crate::testing` re-exports (other crates' tests) are
// unreachable without the `test-hooks` feature.
#![cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]
#![warn(missing_docs)]

use serde::{Deserialize, Serialize};

use dpfl_privacy::event::Sampling;
use dpfl_privacy::sampler::DisjointBatches;
use dpfl_privacy::{DpRng, GaussianMechanism, Mechanism, PrivacyEvent, VectorMechanism};

use super::pagd::AcsaConstants;
use crate::algo::context::BuildContext;
use crate::algo::gradient::{Smoothing, check_records, next_disjoint_batch};
use crate::algo::half::{HalfState, SiloHalf};
use crate::algo::message::{Broadcast, Payload, Round, SiloMessage};
use crate::data::Dataset;
use crate::model::GradientOracle;

/// Pan-private AC-SA as named in a config file:
///
/// ```toml
/// [[algorithms]]
/// kind = "pan-private-acsa"
/// smoothness = 0.25      # β, or smoothing = "theory"
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PanPrivateSpec {
    /// K per silo; default the preset's.
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// The AC-SA constants.
    #[serde(default)]
    pub constants: AcsaConstants,
    /// β.
    #[serde(default)]
    pub smoothness: Option<f64>,
    /// D; default the projection's diameter.
    #[serde(default)]
    pub diameter: Option<f64>,
    /// Moreau smoothing.
    #[serde(default)]
    pub smoothing: Option<Smoothing>,
    /// λ: the phase reduction (Thm C.3 items 3–4).
    #[serde(default)]
    pub strong_convexity: Option<f64>,
    /// k phases.
    #[serde(default)]
    pub phases: Option<usize>,
}

/// ζ = (2L/K)·√(2 ln(2/δ))/ε (Algorithm 6 line 1, ζ² = 8L²ln(2/δ)/(K²ε²)), for 0 < ε < 1 and
/// 0 < δ < 1 (Lemma C.5).
pub fn zeta(lipschitz: f64, k: usize, epsilon: f64, delta: f64) -> crate::Result<f64> {
    lemma_c5_sigma(2.0 * lipschitz / k as f64, epsilon, delta)
}

/// Lemma C.5's σ = Δ·√(2 ln(2/δ))/ε at sensitivity Δ, for 0 < ε < 1 and 0 < δ < 1.
fn lemma_c5_sigma(sensitivity: f64, epsilon: f64, delta: f64) -> crate::Result<f64> {
    if !(epsilon > 0.0 && epsilon < 1.0) {
        return Err(crate::Error::config(
            "privacy.epsilon",
            format!(
                "pan-private AC-SA's Gaussian (Cheu et al. Lemma C.5) needs 0 < eps < 1, got {epsilon}"
            ),
        ));
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(crate::Error::config(
            "privacy.delta",
            format!("must lie in (0, 1), got {delta}"),
        ));
    }
    Ok(sensitivity * (2.0 * (2.0 / delta).ln()).sqrt() / epsilon)
}

/// The pan-private pair (a [`Mechanism`]; module doc): the state noise Z_t before the batch's
/// records are read and fresh output noise after, each N(0, ζ²I) with ζ Lemma C.5's σ for
/// (ε, δ) at the batch mean's sensitivity Δ = 2L/K. The pair is built from (ε, δ, Δ) and
/// derives ζ from them, so the event it reports, (ε, δ) per batch (Lemma C.4), is the one its
/// noise was drawn for. Each draw comes from its own fresh key ([`DpRng::with_fresh_key`]).
#[derive(Debug)]
pub(crate) struct PanPrivatePair {
    gaussian: GaussianMechanism,
    dim: usize,
    epsilon: f64,
    delta: f64,
}

/// What the pair releases: a batch's records, read into the accumulator one at a time (the
/// silo adds (1/K)·∇ℓ of each record), between the two draws.
pub(crate) type ReadBatch<'a> = dyn FnMut(&mut [f64]) -> crate::Result<()> + 'a;

impl PanPrivatePair {
    /// The pair for (ε, δ) per batch at sensitivity Δ on `dim`-vectors. Lemma C.5's (ε, δ)
    /// is the continuous Gaussian's: a context configured for the discrete Gaussian is
    /// refused (issue 27 finding 7).
    pub(crate) fn new(
        ctx: &BuildContext,
        dim: usize,
        sensitivity: f64,
        epsilon: f64,
        delta: f64,
    ) -> crate::Result<Self> {
        if !matches!(ctx.noise, dpfl_privacy::GaussianNoise::Gaussian) {
            return Err(crate::Error::config(
                "privacy.mechanism",
                "pan-private-acsa is calibrated for the continuous Gaussian only (Cheu et al. \
                 Lemma C.5); use mechanism = \"gaussian\"",
            ));
        }
        let zeta = lemma_c5_sigma(sensitivity, epsilon, delta)?;
        Ok(PanPrivatePair {
            gaussian: ctx.gaussian(zeta, sensitivity)?,
            dim,
            epsilon,
            delta,
        })
    }
    /// ζ as drawn, per coordinate and draw.
    pub(crate) fn zeta(&self) -> f64 {
        self.gaussian.noise_std()
    }
}

impl Mechanism for PanPrivatePair {
    type Input<'a> = ReadBatch<'a>;
    type Output = Vec<f64>;
    type Error = crate::Error;
    fn release(&mut self, read: &mut ReadBatch<'_>, rng: &mut DpRng) -> crate::Result<Vec<f64>> {
        // The state noise Z_t goes in before any record is read, from a key erased before the
        // first record is (an OS-seeded silo's `with_fresh_key`): an intrusion from here on
        // sees Z_t + (partial mean) and no key that regenerates Z_t.
        let mut acc = vec![0.0; self.dim];
        rng.with_fresh_key(|g| self.gaussian.privatize(&mut acc, g))?;
        read(&mut acc)?;
        // The output noise from another fresh key: nothing in memory before this point
        // (an earlier intrusion) predicts it.
        rng.with_fresh_key(|g| self.gaussian.privatize(&mut acc, g))?;
        Ok(acc)
    }
    /// (ε, δ) per batch (Lemma C.4): the pair was built from it (the output alone, a Gaussian
    /// of variance 2ζ², is a stronger guarantee; the charge is the weaker one).
    fn privacy_event(&self) -> PrivacyEvent {
        PrivacyEvent::EpsilonDelta {
            epsilon: self.epsilon,
            delta: self.delta,
        }
    }
}

/// The silo half of pan-private AC-SA (module doc).
#[derive(Debug)]
pub(crate) struct PanPrivateSilo {
    oracle: GradientOracle,
    pair: PanPrivatePair,
    n: usize,
    k: usize,
    batches: Option<DisjointBatches>,
    grad: Vec<f64>,
}

impl PanPrivateSilo {
    /// `pair`: the two draws of N(0, ζ²) per coordinate a batch, and its (ε, δ).
    pub(crate) fn new(
        oracle: GradientOracle,
        pair: PanPrivatePair,
        n: usize,
        k: usize,
    ) -> crate::Result<Self> {
        if k == 0 || k > n {
            return Err(crate::Error::config(
                "algorithm.batch_size",
                format!("K = {k} must lie in [1, n = {n}]"),
            ));
        }
        let d = oracle.model().num_params();
        if pair.dim != d {
            return Err(crate::Error::Dimension(format!(
                "pan-private pair for d = {}, model has {d} parameters",
                pair.dim
            )));
        }
        Ok(PanPrivateSilo {
            oracle,
            pair,
            n,
            k,
            batches: None,
            grad: vec![0.0; d],
        })
    }
}

impl SiloHalf for PanPrivateSilo {
    fn round_event(&self, _: Round) -> Option<PrivacyEvent> {
        Some(self.pair.sampled_event(Sampling::Disjoint {
            population: self.n as u64,
            size: self.k as u64,
        }))
    }

    fn respond(
        &mut self,
        b: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<SiloMessage> {
        b.check_dim(self.grad.len())?;
        check_records(self.n, data)?;
        let batch =
            next_disjoint_batch(&mut self.batches, self.n, self.k, rng, "pan-private silo")?
                .to_vec();
        let inv = 1.0 / self.k as f64;
        let (oracle, grad) = (&self.oracle, &mut self.grad);
        let acc = self.pair.release(
            &mut |acc: &mut [f64]| -> crate::Result<()> {
                for &i in &batch {
                    let (x, y) = data.row(i);
                    oracle.clipped_grad(&b.point, x, y, grad);
                    acc.iter_mut()
                        .zip(grad.iter())
                        .for_each(|(a, g)| *a += inv * g);
                }
                Ok(())
            },
            rng,
        )?;
        Ok(SiloMessage {
            round: b.round,
            payload: Payload::Dense(acc),
        })
    }

    fn noise_std(&self) -> f64 {
        // Two independent draws of ζ per coordinate reach the output.
        std::f64::consts::SQRT_2 * self.pair.zeta()
    }

    fn state(&self) -> HalfState {
        let mut s = HalfState::default();
        if let Some(b) = &self.batches {
            let (perm, k, next) = b.parts();
            s.put("perm", perm);
            s.put("batch_size", &(k as u64));
            s.put("next", &(next as u64));
        }
        s
    }

    fn restore(&mut self, state: HalfState) -> crate::Result<()> {
        if state.contains("perm") {
            let perm: Vec<usize> = state.get("perm")?;
            let next: u64 = state.get("next")?;
            self.batches = Some(DisjointBatches::from_parts(perm, self.k, next as usize)?);
        }
        Ok(())
    }
}

/// One silo's half from its plan entry: the pair is built from the plan's (ε, δ), and the
/// plan's ζ must be the one Lemma C.5 gives for them.
pub(crate) fn silo_from_plan(
    ctx: &BuildContext,
    moreau: Option<f64>,
    records: usize,
    batch_size: usize,
    zeta: f64,
    guarantee: (f64, f64),
    lipschitz: f64,
) -> crate::Result<PanPrivateSilo> {
    let (oracle, _) = crate::algo::gradient::smoothed_oracle(ctx, moreau)?;
    let sensitivity = 2.0 * lipschitz / batch_size as f64;
    let (epsilon, delta) = guarantee;
    let derived = lemma_c5_sigma(sensitivity, epsilon, delta)?;
    // NaN (a corrupt plan) fails this test too.
    let same = (derived - zeta).abs() <= 1e-12 * derived;
    if !same {
        return Err(crate::Error::config(
            "plan",
            format!("zeta = {zeta} is not Lemma C.5's {derived} for ({epsilon}, {delta})"),
        ));
    }
    let d = oracle.model().num_params();
    let pair = PanPrivatePair::new(ctx, d, sensitivity, epsilon, delta)?;
    PanPrivateSilo::new(oracle, pair, records, batch_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeta_by_hand_and_its_conditions() {
        // L = 1, K = 4, ε = 0.5, δ = 2/e⁸ (ln(2/δ) = 8): ζ = (2/4)·√16/0.5 = 4;
        // ζ² = 8·1·8/(16·0.25) = 16.
        let delta = 2.0 * (-8f64).exp();
        let z = zeta(1.0, 4, 0.5, delta).unwrap();
        assert!((z - 4.0).abs() < 1e-12, "{z}");
        assert!((z * z - 8.0 * 8.0 / (16.0 * 0.25)).abs() < 1e-9);
        let e = zeta(1.0, 4, 1.0, 1e-5).unwrap_err().to_string();
        assert!(e.contains("privacy.epsilon"), "{e}");
        assert!(zeta(1.0, 4, 0.5, 1.0).is_err());
    }
}
