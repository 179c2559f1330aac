//! A fully connected network of any depth (DP-NormFedAvg §6 / App. H, digest §5.2):
//! p inputs → hidden layers h₁ … h_L with ReLU (or sigmoid) → C-way softmax, cross-entropy.
//! The paper's FMNIST model is `hidden = [300, 300]` (784 → 300 → 300 → 10, 328,810
//! parameters); its CIFAR-10 model is the config change `hidden = [600, 600]` on 3072 inputs
//! (2,210,410 parameters). Weight decay belongs to the optimiser (`algo::normfedavg::local`).
//!
//! Parameter layout, one flat vector: per layer l (inputs n_l → outputs n_{l+1}) W_l
//! (n_{l+1}×n_l, row-major) then b_l (n_{l+1}).
//!
//! Initialisation: PyTorch's `nn.Linear` default — every weight and bias of layer l uniform on
//! [−1/√n_l, 1/√n_l] (kaiming_uniform with a = √5) — from the ChaCha20 stream (`init_seed`,
//! `Purpose::Server`, 2³² − 2): public, data-independent randomness (digest §6.2 item 5).
//!
//! Batched training: forward A_{l+1} = act(A_l W_lᵀ + 1b_lᵀ), backward δ_l = (δ_{l+1} W_{l+1}) ∘
//! act'(·), ∇W_l += δ_lᵀ A_l — matrix products with faer over chunks of ≤ 256 rows, in f64
//! (f32 measured in BENCHMARKS.md, "DP-NormFedAvg: f32 against f64": kept f64, see there), with
//! per-thread buffers reused across steps (no allocation per step once warm). Per-example clipping uses the trait's
//! materialising default: the DP-NormFedAvg family never clips per example.

use std::cell::RefCell;

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use serde::{Deserialize, Serialize};

use super::logistic::{check_features, sigmoid};
use super::{Metric, Model};
use crate::data::Dataset;
use crate::linalg::softmax_in_place;
use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

const CHUNK: usize = 256;

/// The hidden layers' nonlinearity.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Activation {
    /// max(0, z): the paper's MLP (Das et al. §6, 784 → 300 → 300 → 10 ReLU).
    #[default]
    Relu,
    /// The logistic sigmoid 1/(1 + e^{−z}).
    Sigmoid,
}

impl Activation {
    fn apply(self, v: &mut [f64]) {
        match self {
            Activation::Relu => v.iter_mut().for_each(|x| *x = x.max(0.0)),
            Activation::Sigmoid => v.iter_mut().for_each(|x| *x = sigmoid(*x)),
        }
    }
    /// δ ∘ act'(z), written with the activation a = act(z).
    fn backprop(self, delta: &mut [f64], a: &[f64]) {
        match self {
            Activation::Relu => delta.iter_mut().zip(a).for_each(|(d, &a)| {
                if a <= 0.0 {
                    *d = 0.0
                }
            }),
            Activation::Sigmoid => delta
                .iter_mut()
                .zip(a)
                .for_each(|(d, &a)| *d *= a * (1.0 - a)),
        }
    }
}

/// A fully connected network p → n_1 → … → n_L → C with one [`Activation`] on the hidden
/// layers, softmax cross-entropy at the output, a bias per unit and a seeded initialisation.
#[derive(Debug, Clone)]
pub struct DeepMlp {
    /// n_0 = p, n_1 … n_L hidden, n_{L+1} = C.
    widths: Vec<usize>,
    activation: Activation,
    init_seed: u64,
    params: usize,
}

impl DeepMlp {
    /// Σ_l n_{l+1}(n_l + 1), `None` on overflow.
    pub fn param_count(widths: &[usize]) -> Option<usize> {
        widths.windows(2).try_fold(0usize, |acc, w| {
            acc.checked_add(w[1].checked_mul(w[0].checked_add(1)?)?)
        })
    }

    /// The network on `features` inputs with the `hidden` widths (each ≥ 1) and `classes` ≥ 2
    /// outputs; `init_seed` fixes the initial weights. An error names the bad field.
    pub fn new(
        features: usize,
        hidden: &[usize],
        classes: usize,
        activation: Activation,
        init_seed: u64,
    ) -> crate::Result<Self> {
        if hidden.contains(&0) {
            return Err(crate::Error::config(
                "model.hidden",
                "every hidden width must be >= 1",
            ));
        }
        if classes < 2 {
            return Err(crate::Error::config(
                "model.kind",
                format!("the network needs at least 2 classes, got {classes}"),
            ));
        }
        let mut widths = vec![features];
        widths.extend_from_slice(hidden);
        widths.push(classes);
        let params = Self::param_count(&widths);
        crate::data::limits::check_params("model", params)?;
        Ok(DeepMlp {
            widths,
            activation,
            init_seed,
            params: params.unwrap_or(usize::MAX),
        })
    }

    fn layers(&self) -> usize {
        self.widths.len() - 1
    }

    /// Offset of W_l in the parameter vector (b_l follows it).
    fn offset(&self, l: usize) -> usize {
        self.widths[..=l]
            .windows(2)
            .map(|w| w[1] * (w[0] + 1))
            .sum()
    }

    fn layer<'a>(&self, w: &'a [f64], l: usize) -> (&'a [f64], &'a [f64]) {
        let (i, o) = (self.widths[l], self.widths[l + 1]);
        let s = self.offset(l);
        (&w[s..s + o * i], &w[s + o * i..s + o * (i + 1)])
    }

    /// Forward pass of k rows: `work.acts[0]` holds x (k×p); fills acts[l] = A_l, the last the
    /// logits. Buffers are resized, never reallocated once large enough.
    fn forward(&self, w: &[f64], k: usize, work: &mut Work) {
        let layers = self.layers();
        work.acts.resize_with(layers + 1, Vec::new);
        for l in 0..layers {
            let (i, o) = (self.widths[l], self.widths[l + 1]);
            let (wl, bl) = self.layer(w, l);
            let (lo, hi) = work.acts.split_at_mut(l + 1);
            let z = &mut hi[0];
            z.resize(k * o, 0.0);
            matmul(
                MatMut::from_row_major_slice_mut(z, k, o),
                Accum::Replace,
                MatRef::from_row_major_slice(&lo[l][..k * i], k, i),
                MatRef::from_row_major_slice(wl, o, i).transpose(),
                1.0,
                Par::Seq,
            );
            for row in z.chunks_exact_mut(o) {
                row.iter_mut().zip(bl).for_each(|(v, b)| *v += b);
            }
            if l + 1 < layers {
                self.activation.apply(z);
            }
        }
    }

    /// out += scale·Σ ∇f over k rows: activations from [`Self::forward`], labels `work.y`.
    fn backward(&self, w: &[f64], k: usize, work: &mut Work, scale: f64, out: &mut [f64]) {
        let top = self.layers();
        let c = self.widths[top];
        let Work {
            acts,
            delta,
            prev,
            y,
            ..
        } = work;
        // δ = softmax(z) − e_y, scaled once here. The logits' buffer is swapped out, not
        // copied (the next forward pass overwrites it anyway).
        std::mem::swap(delta, &mut acts[top]);
        for (row, &yi) in delta.chunks_exact_mut(c).zip(y.iter()) {
            softmax_in_place(row);
            row[yi as usize] -= 1.0;
            row.iter_mut().for_each(|v| *v *= scale);
        }
        for l in (0..top).rev() {
            let (i, o) = (self.widths[l], self.widths[l + 1]);
            let s = self.offset(l);
            let (ow, ob) = out[s..s + o * (i + 1)].split_at_mut(o * i);
            matmul(
                MatMut::from_row_major_slice_mut(ow, o, i),
                Accum::Add,
                MatRef::from_row_major_slice(&delta[..k * o], k, o).transpose(),
                MatRef::from_row_major_slice(&acts[l][..k * i], k, i),
                1.0,
                Par::Seq,
            );
            for row in delta.chunks_exact(o) {
                ob.iter_mut().zip(row).for_each(|(b, d)| *b += d);
            }
            if l > 0 {
                let (wl, _) = self.layer(w, l);
                prev.resize(k * i, 0.0);
                matmul(
                    MatMut::from_row_major_slice_mut(prev, k, i),
                    Accum::Replace,
                    MatRef::from_row_major_slice(&delta[..k * o], k, o),
                    MatRef::from_row_major_slice(wl, o, i),
                    1.0,
                    Par::Seq,
                );
                self.activation.backprop(prev, &acts[l][..k * i]);
                std::mem::swap(delta, prev);
            }
        }
    }

    /// Loads rows `rows` of `data` into the input buffer and labels.
    fn load(work: &mut Work, data: &Dataset, rows: impl Iterator<Item = usize>) {
        work.acts.resize_with(1, Vec::new);
        work.acts[0].clear();
        work.y.clear();
        for i in rows {
            let (x, yi) = data.row(i);
            work.acts[0].extend_from_slice(x);
            work.y.push(yi);
        }
    }

    fn logits(&self, w: &[f64], x: &[f64]) -> Vec<f64> {
        WORK.with_borrow_mut(|work| {
            work.acts.resize_with(1, Vec::new);
            work.acts[0].clear();
            work.acts[0].extend_from_slice(x);
            self.forward(w, 1, work);
            work.acts[self.layers()].clone()
        })
    }

    /// (mean cross-entropy, error rate) over `data`, forward passes batched by [`CHUNK`] rows
    /// and the chunks spread over rayon's threads. The per-row losses are summed in row order,
    /// so the result does not depend on the thread count.
    pub fn evaluate(&self, w: &[f64], data: &Dataset) -> (f64, f64) {
        use rayon::prelude::*;
        if data.is_empty() {
            return (f64::NAN, f64::NAN);
        }
        let c = self.widths[self.layers()];
        let chunks: Vec<(Vec<f64>, usize)> = (0..data.len().div_ceil(CHUNK))
            .into_par_iter()
            .map(|b| {
                let rows = b * CHUNK..((b + 1) * CHUNK).min(data.len());
                WORK.with_borrow_mut(|work| {
                    Self::load(work, data, rows.clone());
                    self.forward(w, rows.len(), work);
                    let mut wrong = 0;
                    let mut losses = Vec::with_capacity(rows.len());
                    let logits = &mut work.acts[self.layers()];
                    for (z, &y) in logits.chunks_exact_mut(c).zip(&work.y) {
                        if argmax(z) as f64 != y {
                            wrong += 1;
                        }
                        let zy = z[y as usize];
                        losses.push(softmax_in_place(z) - zy);
                    }
                    (losses, wrong)
                })
            })
            .collect();
        let n = data.len() as f64;
        let loss = chunks.iter().flat_map(|(l, _)| l).sum::<f64>() / n;
        let wrong: usize = chunks.iter().map(|(_, k)| k).sum();
        (loss, wrong as f64 / n)
    }
}

/// The first index of the largest value (ties to the lowest class, as [`Model::predict`]).
fn argmax(z: &[f64]) -> usize {
    let mut best = 0;
    for k in 1..z.len() {
        if z[k] > z[best] {
            best = k;
        }
    }
    best
}

/// Per-thread buffers of one batched pass (rayon runs silos on several threads): activations
/// per layer, the back-propagated δ and its successor, labels, the sorted batch.
#[derive(Default)]
struct Work {
    acts: Vec<Vec<f64>>,
    delta: Vec<f64>,
    prev: Vec<f64>,
    y: Vec<f64>,
    order: Vec<usize>,
}

thread_local! {
    static WORK: RefCell<Work> = RefCell::new(Work::default());
}

impl Model for DeepMlp {
    fn name(&self) -> &'static str {
        "deep-mlp"
    }
    fn num_params(&self) -> usize {
        self.params
    }
    fn num_features(&self) -> usize {
        self.widths[0]
    }
    fn loss(&self, w: &[f64], x: &[f64], y: f64) -> f64 {
        let mut z = self.logits(w, x);
        let zy = z[y as usize];
        softmax_in_place(&mut z) - zy
    }
    fn add_grad(&self, w: &[f64], x: &[f64], y: f64, scale: f64, out: &mut [f64]) {
        WORK.with_borrow_mut(|work| {
            work.acts.resize_with(1, Vec::new);
            work.acts[0].clear();
            work.acts[0].extend_from_slice(x);
            work.y.clear();
            work.y.push(y);
            self.forward(w, 1, work);
            self.backward(w, 1, work, scale, out);
        })
    }
    fn add_batch_grad(
        &self,
        w: &[f64],
        data: &Dataset,
        idx: &[usize],
        scale: f64,
        out: &mut [f64],
    ) {
        WORK.with_borrow_mut(|work| {
            let mut order = std::mem::take(&mut work.order);
            order.clear();
            order.extend_from_slice(idx);
            order.sort_unstable();
            for rows in order.chunks(CHUNK) {
                Self::load(work, data, rows.iter().copied());
                self.forward(w, rows.len(), work);
                self.backward(w, rows.len(), work, scale, out);
            }
            work.order = order;
        })
    }
    fn predict(&self, w: &[f64], x: &[f64]) -> f64 {
        argmax(&self.logits(w, x)) as f64
    }
    fn metric(&self) -> Metric {
        Metric::ErrorRate
    }
    /// No bound over all w (the gradients grow with the weights).
    fn lipschitz(&self, _max_norm: f64) -> Option<f64> {
        None
    }
    fn check_data(&self, data: &Dataset) -> crate::Result<()> {
        check_features(self.widths[0], data)?;
        let c = self.widths[self.layers()];
        match data.target().num_classes() {
            Some(k) if k == c => Ok(()),
            other => Err(crate::Error::Dimension(format!(
                "the network has {c} classes, the data has {}",
                other.map_or("a real target".to_string(), |k| format!("{k} classes"))
            ))),
        }
    }
    fn initial_params(&self) -> Vec<f64> {
        let mut rng = DpRng::from_seed(self.init_seed, Purpose::Server, u32::MAX - 1);
        let mut w = dpfl_privacy::sampler::uniforms(&mut rng, self.params);
        for l in 0..self.layers() {
            let (i, o) = (self.widths[l], self.widths[l + 1]);
            let bound = 1.0 / (i as f64).sqrt();
            let s = self.offset(l);
            for v in &mut w[s..s + o * (i + 1)] {
                *v = (2.0 * *v - 1.0) * bound;
            }
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Target;

    fn data(n: usize, p: usize, c: usize) -> Dataset {
        let x: Vec<f64> = (0..n * p)
            .map(|i| ((i * 37 % 17) as f64 - 8.0) / 8.0)
            .collect();
        let y = (0..n).map(|i| (i % c) as f64).collect();
        let names = (0..p).map(|j| format!("x{j}")).collect();
        let target = Target::Classes {
            names: (0..c).map(|k| k.to_string()).collect(),
        };
        Dataset::new(
            crate::linalg::Matrix::from_vec(n, p, x).unwrap(),
            y,
            target,
            names,
        )
        .unwrap()
    }

    #[test]
    fn paper_sizes_and_seeded_pytorch_init() {
        let m = DeepMlp::new(784, &[300, 300], 10, Activation::Relu, 1).unwrap();
        assert_eq!(m.num_params(), 328_810);
        let c = DeepMlp::new(3072, &[600, 600], 10, Activation::Relu, 1).unwrap();
        assert_eq!(c.num_params(), 2_210_410);
        let w = m.initial_params();
        assert_eq!(w, m.initial_params(), "seeded");
        // Layer 0 within ±1/√784 = ±1/28, layer 1 within ±1/√300.
        assert!(w[..300 * 785].iter().all(|v| v.abs() <= 1.0 / 28.0));
        assert!(w[..300 * 785].iter().any(|v| v.abs() > 0.03));
        let l1 = &w[300 * 785..300 * 785 + 300 * 301];
        assert!(l1.iter().all(|v| v.abs() <= 1.0 / 300f64.sqrt()));
        assert!(DeepMlp::new(4, &[0], 3, Activation::Relu, 0).is_err());
    }

    #[test]
    fn batch_gradient_matches_finite_differences_and_the_per_example_sum() {
        for act in [Activation::Relu, Activation::Sigmoid] {
            let m = DeepMlp::new(3, &[4, 5], 3, act, 7).unwrap();
            let d = data(6, 3, 3);
            let w = m.initial_params();
            let idx: Vec<usize> = (0..6).collect();
            let mut g = vec![0.0; m.num_params()];
            m.add_batch_grad(&w, &d, &idx, 0.5, &mut g);
            let mut each = vec![0.0; m.num_params()];
            for &i in &idx {
                let (x, y) = d.row(i);
                m.add_grad(&w, x, y, 0.5, &mut each);
            }
            let f = |w: &[f64]| -> f64 {
                idx.iter()
                    .map(|&i| {
                        let (x, y) = d.row(i);
                        0.5 * m.loss(w, x, y)
                    })
                    .sum()
            };
            for j in 0..m.num_params() {
                assert!((g[j] - each[j]).abs() < 1e-12, "{act:?} {j}");
                let (mut a, mut b) = (w.clone(), w.clone());
                a[j] += 1e-6;
                b[j] -= 1e-6;
                let fd = (f(&a) - f(&b)) / 2e-6;
                assert!(
                    (fd - g[j]).abs() < 1e-5,
                    "{act:?} param {j}: {fd} vs {}",
                    g[j]
                );
            }
        }
    }

    #[test]
    fn batched_evaluation_matches_the_per_row_loss_and_error() {
        // 600 rows: two full chunks of 256 and a partial one.
        let m = DeepMlp::new(20, &[30, 30], 5, Activation::Relu, 3).unwrap();
        let d = data(600, 20, 5);
        let w = m.initial_params();
        let (loss, err) = m.evaluate(&w, &d);
        let want_loss = crate::model::mean_loss(&m, &w, &d);
        let want_err = crate::model::metric_value(&m, &w, &d);
        assert!(
            (loss - want_loss).abs() <= 1e-12 * want_loss.abs(),
            "{loss} vs {want_loss}"
        );
        assert_eq!(err, want_err);
        assert!(err > 0.0 && err < 1.0);
        assert!(m.evaluate(&w, &d.subset(&[])).0.is_nan());
    }

    #[test]
    fn predicts_the_largest_logit_and_checks_data() {
        // One layer of width 2 on 1 input: with W₀ = [[1], [0]], b₀ = 0, ReLU, then the
        // identity-like W₁ = I, b₁ = 0, x = 3 gives logits (3, 0): class 0, loss ln(1 + e^−3).
        let m = DeepMlp::new(1, &[2], 2, Activation::Relu, 0).unwrap();
        let w = vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0];
        assert_eq!(m.num_params(), 10);
        assert_eq!(m.predict(&w, &[3.0]), 0.0);
        assert!((m.loss(&w, &[3.0], 0.0) - (1.0 + (-3.0f64).exp()).ln()).abs() < 1e-12);
        assert!(m.check_data(&data(2, 1, 3)).is_err());
        assert!(m.check_data(&data(2, 1, 2)).is_ok());
    }
}
