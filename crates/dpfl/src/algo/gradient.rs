//! The gradient silo every minibatch algorithm shares: draw a batch from the silo's
//! [`BatchSource`], average its clipped per-example gradients at the broadcast point, scale by
//! the silo's objective weight, add the silo's Gaussian noise, send. The source's sampling
//! (with or without replacement, Poisson, or one pass over disjoint batches) is the sampling
//! of the round's privacy event, so the ledger and the accountant see exactly what was drawn.

use dpfl_privacy::event::Sampling;
use dpfl_privacy::mechanism::{GaussianMechanism, Mechanism, VectorMechanism};
use dpfl_privacy::sampler::{BatchSampler, DisjointBatches, RecordSampling};
use dpfl_privacy::{DpRng, PrivacyEvent};

use serde::{Deserialize, Serialize};

use super::half::{HalfState, SiloHalf};
use super::message::{Broadcast, Payload, Round, SiloMessage};
use crate::data::Dataset;
use crate::model::GradientOracle;

/// A gradient silo's noise: a vector mechanism that reports the event of one round whose
/// records were drawn by a sampling (the Gaussian's own sampled event, or the trusted
/// shuffle's chain, `shuffle::honest`). A trait object, as [`Mechanism`]'s associated types
/// are not object safe.
pub trait GradientNoise: VectorMechanism {
    /// What one round spends when its records are drawn by `sampling`.
    fn round_event(&self, sampling: Sampling) -> PrivacyEvent;
}

impl GradientNoise for GaussianMechanism {
    fn round_event(&self, sampling: Sampling) -> PrivacyEvent {
        Mechanism::sampled_event(self, sampling)
    }
}

/// Where a silo's records come from each round.
#[derive(Debug, Clone)]
pub enum BatchSource {
    /// A fresh batch of (expected) size K every round from the configured record sampler:
    /// with replacement (Lowy & Razaviyayn Algorithm 1 ERM branch, Algorithms 2 and 7),
    /// without replacement, or Poisson.
    Sampled {
        /// Records n_i.
        n: usize,
        /// The record sampler.
        sampler: BatchSampler,
    },
    /// One pass over disjoint batches of K; the permutation is drawn from the silo's own
    /// generator when the first round is answered.
    OnePass {
        /// Records n_i.
        n: usize,
        /// Batch size K.
        k: usize,
        /// The permutation's batches, once drawn.
        batches: Option<DisjointBatches>,
    },
}

impl BatchSource {
    /// A fresh batch of K of the `n` records every round, drawn by `kind`.
    pub fn sampled(kind: RecordSampling, n: usize, k: usize) -> crate::Result<Self> {
        Ok(BatchSource::Sampled {
            n,
            sampler: BatchSampler::new(kind, n, k)?,
        })
    }
    /// One pass over disjoint batches of K of the `n` records (the permutation is drawn at the first round).
    pub fn one_pass(n: usize, k: usize) -> Self {
        BatchSource::OnePass {
            n,
            k,
            batches: None,
        }
    }
    fn records(&self) -> usize {
        match self {
            BatchSource::Sampled { n, .. } => *n,
            BatchSource::OnePass { n, .. } => *n,
        }
    }
    /// The sampling a round's privacy event is amplified by.
    pub fn sampling(&self) -> Sampling {
        match self {
            BatchSource::Sampled { sampler, .. } => sampler.sampling(),
            BatchSource::OnePass { n, k, .. } => Sampling::Disjoint {
                population: *n as u64,
                size: *k as u64,
            },
        }
    }
}

/// Refuses data of another size than the `n` records the silo half was built for.
pub fn check_records(n: usize, data: &Dataset) -> crate::Result<()> {
    if data.len() != n {
        return Err(crate::Error::Protocol(format!(
            "the silo half was built for {n} records, its data has {}",
            data.len()
        )));
    }
    Ok(())
}

/// The next batch of a one-pass silo over disjoint batches of `k` of its `n` records, the
/// permutation drawn from the silo's own `rng` when the first round is answered; `who` names
/// the silo in the error once all ⌊n/K⌋ batches are used.
pub fn next_disjoint_batch<'a>(
    batches: &'a mut Option<DisjointBatches>,
    n: usize,
    k: usize,
    rng: &mut DpRng,
    who: &str,
) -> crate::Result<&'a [usize]> {
    let batches = match batches {
        Some(b) => b,
        None => batches.insert(DisjointBatches::new(n, k, rng)?),
    };
    batches.next_batch().ok_or_else(|| {
        crate::Error::Protocol(format!(
            "one-pass {who} has used all ⌊n/K⌋ = {} batches; answering again would reuse records",
            n / k
        ))
    })
}

/// A silo that answers with its (weighted, clipped, noised) minibatch gradient at the
/// broadcast point: Lowy & Razaviyayn Algorithm 1 lines 5–7, Algorithm 2 lines 5–8,
/// Algorithm 7 lines 6–7. A Poisson batch's gradient sum is divided by the expected K, not
/// by the drawn size, so one record moves it by at most 2L/K.
#[derive(Debug)]
pub struct GradientSilo {
    oracle: GradientOracle,
    source: BatchSource,
    mechanism: Option<Box<dyn GradientNoise>>,
    /// N p_i (App. H.1); the mechanism's sensitivity already includes it.
    weight: f64,
    idx: Vec<usize>,
    grad: Vec<f64>,
    scratch: Vec<f64>,
}

impl GradientSilo {
    /// A gradient silo: clipped minibatch gradients from `source`, plus the Gaussian noise of its calibration.
    pub fn new(
        oracle: GradientOracle,
        source: BatchSource,
        mechanism: Option<GaussianMechanism>,
        weight: f64,
    ) -> Self {
        Self::with_noise(
            oracle,
            source,
            mechanism.map(|m| Box::new(m) as Box<dyn GradientNoise>),
            weight,
        )
    }

    /// A gradient silo whose noise reports its own round event (`noise`; `None`: no noise).
    pub fn with_noise(
        oracle: GradientOracle,
        source: BatchSource,
        mechanism: Option<Box<dyn GradientNoise>>,
        weight: f64,
    ) -> Self {
        let d = oracle.model().num_params();
        GradientSilo {
            oracle,
            source,
            mechanism,
            weight,
            idx: Vec::new(),
            grad: vec![0.0; d],
            scratch: vec![0.0; d],
        }
    }

    /// Batches a one-pass silo has left (`None` for a sampled source).
    pub fn remaining_batches(&self) -> Option<usize> {
        match &self.source {
            BatchSource::Sampled { .. } => None,
            BatchSource::OnePass { n, k, batches } => Some(match batches {
                Some(b) => b.remaining(),
                None => n / k,
            }),
        }
    }
}

impl SiloHalf for GradientSilo {
    fn round_event(&self, _round: Round) -> Option<PrivacyEvent> {
        self.mechanism
            .as_ref()
            .map(|m| m.round_event(self.source.sampling()))
    }

    fn respond(
        &mut self,
        b: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<SiloMessage> {
        b.check_dim(self.grad.len())?;
        check_records(self.source.records(), data)?;
        match &mut self.source {
            BatchSource::Sampled { sampler, .. } => sampler.draw(rng, &mut self.idx),
            BatchSource::OnePass { n, k, batches } => {
                let batch = next_disjoint_batch(batches, *n, *k, rng, "silo")?;
                self.idx.clear();
                self.idx.extend_from_slice(batch);
            }
        }
        self.oracle
            .mean_grad(&b.point, data, &self.idx, &mut self.grad, &mut self.scratch);
        if let BatchSource::Sampled { sampler, .. } = &self.source {
            let rescale = sampler.mean_rescale(self.idx.len());
            if rescale != 1.0 {
                crate::linalg::scale(rescale, &mut self.grad);
            }
        }
        if self.weight != 1.0 {
            crate::linalg::scale(self.weight, &mut self.grad);
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

    fn state(&self) -> HalfState {
        let mut s = HalfState::default();
        if let BatchSource::OnePass {
            batches: Some(b), ..
        } = &self.source
        {
            let (perm, _, next) = b.parts();
            s.put(
                ONE_PASS,
                &OnePassState {
                    perm: perm.iter().map(|&i| i as u64).collect(),
                    next: next as u64,
                },
            );
        }
        s
    }

    fn restore(&mut self, state: HalfState) -> crate::Result<()> {
        let BatchSource::OnePass { n, k, batches } = &mut self.source else {
            return Ok(());
        };
        if !state.contains(ONE_PASS) {
            return Ok(());
        }
        let st: OnePassState = state.get(ONE_PASS)?;
        let perm = st
            .perm
            .iter()
            .map(|&i| usize::try_from(i))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| crate::Error::Protocol(format!("state `{ONE_PASS}`: {e}")))?;
        let next = usize::try_from(st.next)
            .map_err(|e| crate::Error::Protocol(format!("state `{ONE_PASS}`: {e}")))?;
        if perm.len() != *n {
            return Err(crate::Error::Protocol(format!(
                "state `{ONE_PASS}` is not a permutation of 0..{n}"
            )));
        }
        let b = DisjointBatches::from_parts(perm, *k, next)
            .map_err(|e| crate::Error::Protocol(format!("state `{ONE_PASS}`: {e}")))?;
        *batches = Some(b);
        Ok(())
    }
}

/// The key of a one-pass silo's state: the permutation and the next batch's position.
const ONE_PASS: &str = "one_pass";

/// A one-pass silo's position in its permutation (a record in a used batch is never drawn
/// again, across restarts too).
#[derive(Debug, Serialize, Deserialize)]
struct OnePassState {
    perm: Vec<u64>,
    next: u64,
}

/// A fixed smoothing parameter β or the theorem's rule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Smoothing {
    /// A fixed β > 0 of the Moreau envelope.
    Beta(f64),
    /// β from the theorem (Thm D.2 / F.2).
    Rule(SmoothingRule),
}

/// The string `"theory"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SmoothingRule {
    /// The theorems' rule (`"theory"`), the only string accepted.
    Theory,
}

/// The gradient oracle and the L the noise is calibrated to, for Moreau smoothing at `beta`
/// (or none): a smoothed loss is optimised with gradients clipped at 2L (Lemma D.7). Plans
/// store β and every half rebuilds its oracle here, so the halves equal one build's.
pub(crate) fn smoothed_oracle(
    ctx: &crate::algo::context::BuildContext,
    beta: Option<f64>,
) -> crate::Result<(GradientOracle, f64)> {
    Ok(match beta {
        None => (ctx.enforcing_oracle()?, ctx.lipschitz),
        Some(b) => {
            let model = ctx.oracle.model().smoothed(b)?.ok_or_else(|| {
                crate::Error::config(
                    "algorithm.smoothing",
                    format!(
                        "the {} loss offers no prox to smooth it with",
                        ctx.oracle.model().name()
                    ),
                )
            })?;
            let l = 2.0 * ctx.lipschitz;
            let clip = ctx.oracle.clip().map_or(l, |c| c.min(l));
            (GradientOracle::new(model, Some(clip))?, l)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pass_silo_never_reuses_a_record_even_across_a_restart() {
        // n = 11, K = 3: ⌊11/3⌋ = 3 batches; a fourth round must be refused. The silo is
        // saved and restored into a fresh half after the first round (a restart).
        use crate::data::{Dataset, Target};
        let n = 11;
        let x = crate::linalg::Matrix::from_vec(n, 1, vec![1.0; n]).unwrap();
        let data = Dataset::new(
            x,
            (0..n).map(|i| i as f64).collect(),
            Target::Real,
            vec!["x".into()],
        )
        .unwrap();
        let oracle = GradientOracle::new(
            std::sync::Arc::new(crate::model::LinearRegression::new(1)),
            None,
        )
        .unwrap();
        let mut rng = DpRng::from_seed(7, dpfl_privacy::rng::Purpose::Silo, 0);
        let mut silo = GradientSilo::new(oracle.clone(), BatchSource::one_pass(n, 3), None, 1.0);
        let b = |round| Broadcast {
            round: Round::new(round),
            point: vec![0.0],
            aux: vec![],
        };
        let mut seen = Vec::new();
        silo.respond(&b(0), &data, &mut rng).unwrap();
        seen.extend_from_slice(&silo.idx);
        let mut restarted = GradientSilo::new(oracle, BatchSource::one_pass(n, 3), None, 1.0);
        restarted.restore(silo.state()).unwrap();
        assert_eq!(restarted.remaining_batches(), Some(2));
        for r in 1..3 {
            restarted.respond(&b(r), &data, &mut rng).unwrap();
            seen.extend_from_slice(&restarted.idx);
        }
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 9, "a record was used twice: {seen:?}");
        assert!(sorted.iter().all(|&i| i < n));
        assert!(restarted.respond(&b(3), &data, &mut rng).is_err());
    }
}
