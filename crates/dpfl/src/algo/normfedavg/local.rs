//! A client's local training in round k (Algorithm 2 lines 4–7 as the experiments run them,
//! digest §5.3): E steps of minibatch SGD from w_k with heavy-ball momentum and weight decay
//! at η_k, returning d_k = w_k − w_{k,E}.
//!
//! Decisions (digest §6.2 items 3–4):
//! * momentum: the paper says "the standard momentum of PyTorch with its default value", but
//!   PyTorch's default is 0, which would be no momentum at all; we take the usual 0.9
//!   (configurable, `momentum = 0` gives plain SGD) in PyTorch's form — b ← μb + g (b = g at
//!   the first step), w ← w − ηb, no dampening, no Nesterov — with a fresh buffer every round
//!   (a new optimiser per round, the usual FL practice: a buffer kept across rounds would be
//!   client state the paper never mentions);
//! * weight decay sits inside the optimiser as in PyTorch: g = ∇f_B(w) + λw;
//! * each step's minibatch is min(B, n_i) records drawn uniformly without replacement, fresh
//!   per step (no epoch cycling). Record sampling is not credited for privacy: the
//!   sensitivities are suprema over the whole local run.

use dpfl_privacy::DpRng;
use dpfl_privacy::sampler::{BatchSampler, RecordSampling};

use super::config::EtaSchedule;
use crate::data::Dataset;
use crate::model::GradientOracle;

/// A silo's local training: E minibatch steps with momentum and weight decay.
#[derive(Debug, Clone)]
pub struct LocalTrainer {
    /// The model's gradients.
    pub oracle: GradientOracle,
    /// η_k.
    pub eta: EtaSchedule,
    /// E, the local steps per round.
    pub steps: usize,
    /// Heavy-ball momentum (PyTorch's form).
    pub momentum: f64,
    /// λ, added as λw to every minibatch gradient.
    pub weight_decay: f64,
    sampler: BatchSampler,
    records: usize,
    idx: Vec<usize>,
    grad: Vec<f64>,
    buf: Vec<f64>,
    scratch: Vec<f64>,
}

impl LocalTrainer {
    /// A trainer of a silo with `records` records, minibatches of min(`batch`, records).
    pub fn new(
        oracle: GradientOracle,
        eta: EtaSchedule,
        steps: usize,
        batch: usize,
        momentum: f64,
        weight_decay: f64,
        records: usize,
    ) -> crate::Result<Self> {
        if records == 0 {
            return Err(crate::Error::config("data", "a silo has no records"));
        }
        let d = oracle.model().num_params();
        let sampler = BatchSampler::new(
            RecordSampling::WithoutReplacement,
            records,
            batch.min(records),
        )?;
        Ok(LocalTrainer {
            oracle,
            eta,
            steps,
            momentum,
            weight_decay,
            sampler,
            records,
            idx: Vec::new(),
            grad: vec![0.0; d],
            buf: vec![0.0; d],
            scratch: vec![0.0; d],
        })
    }

    /// d_k = w_k − w_{k,E} for round k from `w` (the broadcast w_k).
    pub fn update(
        &mut self,
        round: u32,
        w: &[f64],
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<Vec<f64>> {
        crate::algo::gradient::check_records(self.records, data)?;
        let eta = self.eta.at(round);
        let mut local = w.to_vec();
        for tau in 0..self.steps {
            self.sampler.draw(rng, &mut self.idx);
            self.oracle
                .mean_grad(&local, data, &self.idx, &mut self.grad, &mut self.scratch);
            if self.weight_decay != 0.0 {
                crate::linalg::axpy(self.weight_decay, &local, &mut self.grad);
            }
            if self.momentum == 0.0 || tau == 0 {
                self.buf.copy_from_slice(&self.grad);
            } else {
                for (b, g) in self.buf.iter_mut().zip(&self.grad) {
                    *b = self.momentum * *b + g;
                }
            }
            crate::linalg::axpy(-eta, &self.buf, &mut local);
        }
        for (l, w0) in local.iter_mut().zip(w) {
            *l = w0 - *l;
        }
        if local.iter().any(|v| !v.is_finite()) {
            return Err(crate::Error::Diverged(format!(
                "the local update is not finite (protocol round {round}, eta = {eta})"
            )));
        }
        Ok(local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Target;
    use dpfl_privacy::rng::Purpose;

    /// One record x = 1, y = 2 under least squares f = (w − 2)²/2: ∇f = w − 2.
    fn one_record() -> (Dataset, GradientOracle) {
        let x = crate::linalg::Matrix::from_vec(1, 1, vec![1.0]).unwrap();
        let data = Dataset::new(x, vec![2.0], Target::Real, vec!["x".into()]).unwrap();
        let oracle = GradientOracle::new(
            std::sync::Arc::new(crate::model::LinearRegression::new(1)),
            None,
        )
        .unwrap();
        (data, oracle)
    }

    #[test]
    fn momentum_and_weight_decay_follow_pytorch_by_hand() {
        let (data, oracle) = one_record();
        let eta = EtaSchedule {
            eta0: 0.1,
            decay: 0.5,
        };
        let mut t = LocalTrainer::new(oracle, eta, 2, 256, 0.9, 0.1, 1).unwrap();
        let mut rng = DpRng::from_seed(1, Purpose::Silo, 0);
        // Round 1: η = 0.05. w₀ = 0: g = (0 − 2) + 0.1·0 = −2, b = −2, w = 0.1.
        // g = (0.1 − 2) + 0.01 = −1.89, b = 0.9·(−2) − 1.89 = −3.69, w = 0.1 + 0.1845 = 0.2845.
        // d = w₀ − w_E = −0.2845.
        let d = t.update(1, &[0.0], &data, &mut rng).unwrap();
        assert!((d[0] + 0.2845).abs() < 1e-12, "{d:?}");
        // The buffer starts afresh each round: the same call gives the same update.
        let d2 = t.update(1, &[0.0], &data, &mut rng).unwrap();
        assert_eq!(d, d2);
        // No momentum, no decay, round 0 (η = 0.1), 3 steps: w = 2 − 2·0.9³ = 0.542.
        let (data, oracle) = one_record();
        let mut plain = LocalTrainer::new(oracle, eta, 3, 4, 0.0, 0.0, 1).unwrap();
        let d = plain.update(0, &[0.0], &data, &mut rng).unwrap();
        assert!((d[0] + 0.542).abs() < 1e-12, "{d:?}");
        // A diverging run is an error, not a NaN message.
        let (data, oracle) = one_record();
        let huge = EtaSchedule {
            eta0: 1e300,
            decay: 1.0,
        };
        let mut bad = LocalTrainer::new(oracle, huge, 5, 1, 0.0, 0.0, 1).unwrap();
        assert!(bad.update(0, &[0.0], &data, &mut rng).is_err());
    }
}
