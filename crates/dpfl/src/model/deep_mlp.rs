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
//! act'(·), ∇W_l += δ_lᵀ A_l — matrix products with faer over chunks of ≤ 256 rows, with
//! per-thread buffers reused across steps (no allocation per step once warm). Per-example
//! clipping uses the trait's materialising default: the DP-NormFedAvg family never clips per
//! example.
//!
//! Precision ([`Precision`], decided by measurement, BENCHMARKS.md "DP-NormFedAvg: f32 against
//! f64, session 8"): the products, activations and the back-propagated δ run in **f32** by
//! default — faer's f32 products are ≈ 2x its f64 ones for these shapes on AVX2 — with the
//! softmax and the loss of each row in f64 (from the f32 logits), and the parameters,
//! gradients and data f64 at the [`Model`] boundary (one conversion of w in, one of ∇ out per
//! batch). Everything the optimiser and the privacy mechanisms do stays f64: the local
//! update d = w_k − w_{k,E}, its norm, d/‖d‖ and the quantizer (see `algo::normfedavg`).
//! `precision = "f64"` gives the session-7 network bit for bit (the f64 instantiation of the
//! same generic code does the same operations in the same order).

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use serde::{Deserialize, Serialize};

use super::batch::clean_simd_state;
use super::logistic::{check_features, sigmoid};
use super::{Metric, Model};
use crate::data::Dataset;
use crate::linalg::softmax_in_place;
use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

mod real;
#[cfg(test)]
mod tests;

use real::{Real, Work};

const CHUNK: usize = 256;

/// The arithmetic of the network's products (the parameters stay f64).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    /// f32 products and activations, f64 softmax, loss, parameters and gradient sums: ≈ 2x
    /// faster than f64 on AVX2 (measured; BENCHMARKS.md). The default.
    #[default]
    F32,
    /// Everything in f64 (the network of dpfl before session 8, bit for bit).
    F64,
}

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
    fn apply<T: Real>(self, v: &mut [T]) {
        match self {
            Activation::Relu => v.iter_mut().for_each(|x| *x = x.relu()),
            Activation::Sigmoid => {
                clean_simd_state();
                v.iter_mut().for_each(|x| *x = T::of(sigmoid(x.wide())))
            }
        }
    }
    /// δ ∘ act'(z), written with the activation a = act(z).
    fn backprop<T: Real>(self, delta: &mut [T], a: &[T]) {
        let (zero, one) = (T::of(0.0), T::of(1.0));
        match self {
            Activation::Relu => delta.iter_mut().zip(a).for_each(|(d, &a)| {
                if a <= zero {
                    *d = zero
                }
            }),
            Activation::Sigmoid => delta
                .iter_mut()
                .zip(a)
                .for_each(|(d, &a)| *d *= a * (one - a)),
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
    precision: Precision,
}

impl DeepMlp {
    /// Σ_l n_{l+1}(n_l + 1), `None` on overflow.
    pub fn param_count(widths: &[usize]) -> Option<usize> {
        widths.windows(2).try_fold(0usize, |acc, w| {
            acc.checked_add(w[1].checked_mul(w[0].checked_add(1)?)?)
        })
    }

    /// The network on `features` inputs with the `hidden` widths (each ≥ 1) and `classes` ≥ 2
    /// outputs; `init_seed` fixes the initial weights. An error names the bad field. The
    /// products run in the default [`Precision`] (f32; see [`Self::with_precision`]).
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
            precision: Precision::default(),
        })
    }

    /// The same network computing in `precision`.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// The arithmetic of the products.
    pub fn precision(&self) -> Precision {
        self.precision
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

    fn layer<'a, T>(&self, w: &'a [T], l: usize) -> (&'a [T], &'a [T]) {
        let (i, o) = (self.widths[l], self.widths[l + 1]);
        let s = self.offset(l);
        (&w[s..s + o * i], &w[s + o * i..s + o * (i + 1)])
    }

    /// Forward pass of k rows: `work.acts[0]` holds x (k×p); fills acts[l] = A_l, the last the
    /// logits. Buffers are resized, never reallocated once large enough.
    fn forward<T: Real>(&self, w: &[T], k: usize, work: &mut Work<T>) {
        let layers = self.layers();
        work.acts.resize_with(layers + 1, Vec::new);
        for l in 0..layers {
            let (i, o) = (self.widths[l], self.widths[l + 1]);
            let (wl, bl) = self.layer(w, l);
            let (lo, hi) = work.acts.split_at_mut(l + 1);
            let z = &mut hi[0];
            z.resize(k * o, T::of(0.0));
            matmul(
                MatMut::from_row_major_slice_mut(z, k, o),
                Accum::Replace,
                MatRef::from_row_major_slice(&lo[l][..k * i], k, i),
                MatRef::from_row_major_slice(wl, o, i).transpose(),
                T::of(1.0),
                Par::Seq,
            );
            for row in z.chunks_exact_mut(o) {
                row.iter_mut().zip(bl).for_each(|(v, &b)| *v += b);
            }
            if l + 1 < layers {
                self.activation.apply(z);
            }
        }
    }

    /// out += scale·Σ ∇f over k rows: activations from [`Self::forward`], labels `work.y`.
    fn backward<T: Real>(&self, w: &[T], k: usize, work: &mut Work<T>, scale: f64, out: &mut [T]) {
        let top = self.layers();
        let c = self.widths[top];
        let Work {
            acts,
            delta,
            prev,
            y,
            row: wide,
            ..
        } = work;
        // δ = softmax(z) − e_y in f64, scaled once here. The logits' buffer is swapped out,
        // not copied (the next forward pass overwrites it anyway). libm's exp follows faer's
        // AVX products: clear the upper halves first (model/batch.rs).
        clean_simd_state();
        std::mem::swap(delta, &mut acts[top]);
        for (row, &yi) in delta.chunks_exact_mut(c).zip(y.iter()) {
            wide.clear();
            wide.extend(row.iter().map(|v| v.wide()));
            softmax_in_place(wide);
            wide[yi as usize] -= 1.0;
            row.iter_mut()
                .zip(wide.iter())
                .for_each(|(v, &p)| *v = T::of(p * scale));
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
                T::of(1.0),
                Par::Seq,
            );
            for row in delta.chunks_exact(o) {
                ob.iter_mut().zip(row).for_each(|(b, &d)| *b += d);
            }
            if l > 0 {
                let (wl, _) = self.layer(w, l);
                prev.resize(k * i, T::of(0.0));
                matmul(
                    MatMut::from_row_major_slice_mut(prev, k, i),
                    Accum::Replace,
                    MatRef::from_row_major_slice(&delta[..k * o], k, o),
                    MatRef::from_row_major_slice(wl, o, i),
                    T::of(1.0),
                    Par::Seq,
                );
                self.activation.backprop(prev, &acts[l][..k * i]);
                std::mem::swap(delta, prev);
            }
        }
    }

    /// Loads the rows `x` (k×p, f64) and labels into the input buffer.
    fn load_rows<'a, T: Real>(work: &mut Work<T>, rows: impl Iterator<Item = (&'a [f64], f64)>) {
        work.acts.resize_with(1, Vec::new);
        work.acts[0].clear();
        work.y.clear();
        for (x, yi) in rows {
            work.acts[0].extend(x.iter().map(|&v| T::of(v)));
            work.y.push(yi);
        }
    }

    /// out += scale·Σ_{i ∈ idx} ∇f_i in arithmetic T, rows sorted, chunks of [`CHUNK`].
    fn batch_grad<T: Real>(
        &self,
        w: &[f64],
        data: &Dataset,
        idx: &[usize],
        scale: f64,
        out: &mut [f64],
    ) {
        T::with_work(|work| {
            let mut order = std::mem::take(&mut work.order);
            let (mut wbuf, mut gbuf) =
                (std::mem::take(&mut work.w), std::mem::take(&mut work.grad));
            order.clear();
            order.extend_from_slice(idx);
            order.sort_unstable();
            let wt = T::params(w, &mut wbuf);
            T::accumulate(out, &mut gbuf, |g| {
                for rows in order.chunks(CHUNK) {
                    Self::load_rows(work, rows.iter().map(|&i| data.row(i)));
                    self.forward(wt, rows.len(), work);
                    self.backward(wt, rows.len(), work, scale, g);
                }
            });
            (work.order, work.w, work.grad) = (order, wbuf, gbuf);
        })
    }

    /// One row's gradient (k = 1 of the batched code).
    fn row_grad<T: Real>(&self, w: &[f64], x: &[f64], y: f64, scale: f64, out: &mut [f64]) {
        T::with_work(|work| {
            let (mut wbuf, mut gbuf) =
                (std::mem::take(&mut work.w), std::mem::take(&mut work.grad));
            let wt = T::params(w, &mut wbuf);
            T::accumulate(out, &mut gbuf, |g| {
                Self::load_rows(work, std::iter::once((x, y)));
                self.forward(wt, 1, work);
                self.backward(wt, 1, work, scale, g);
            });
            (work.w, work.grad) = (wbuf, gbuf);
        })
    }

    /// The logits of one row, in f64.
    fn logits<T: Real>(&self, w: &[f64], x: &[f64]) -> Vec<f64> {
        T::with_work(|work| {
            let mut wbuf = std::mem::take(&mut work.w);
            Self::load_rows(work, std::iter::once((x, 0.0)));
            self.forward(T::params(w, &mut wbuf), 1, work);
            work.w = wbuf;
            work.acts[self.layers()].iter().map(|v| v.wide()).collect()
        })
    }

    fn row_logits(&self, w: &[f64], x: &[f64]) -> Vec<f64> {
        match self.precision {
            Precision::F32 => self.logits::<f32>(w, x),
            Precision::F64 => self.logits::<f64>(w, x),
        }
    }

    /// (mean cross-entropy, error rate) over `data`, forward passes batched by `CHUNK` rows
    /// and the chunks spread over rayon's threads. The per-row losses are summed in row order,
    /// so the result does not depend on the thread count.
    pub fn evaluate(&self, w: &[f64], data: &Dataset) -> (f64, f64) {
        match self.precision {
            Precision::F32 => self.evaluate_in::<f32>(w, data),
            Precision::F64 => self.evaluate_in::<f64>(w, data),
        }
    }

    fn evaluate_in<T: Real + Send + Sync>(&self, w: &[f64], data: &Dataset) -> (f64, f64) {
        use rayon::prelude::*;
        if data.is_empty() {
            return (f64::NAN, f64::NAN);
        }
        let c = self.widths[self.layers()];
        let mut wbuf = Vec::new();
        let wt = T::params(w, &mut wbuf);
        let chunks: Vec<(Vec<f64>, usize)> = (0..data.len().div_ceil(CHUNK))
            .into_par_iter()
            .map(|b| {
                let rows = b * CHUNK..((b + 1) * CHUNK).min(data.len());
                T::with_work(|work| {
                    Self::load_rows(work, rows.clone().map(|i| data.row(i)));
                    self.forward(wt, rows.len(), work);
                    clean_simd_state();
                    let mut wrong = 0;
                    let mut losses = Vec::with_capacity(rows.len());
                    let Work { acts, y, row, .. } = work;
                    for (z, &y) in acts[self.layers()].chunks_exact(c).zip(y.iter()) {
                        row.clear();
                        row.extend(z.iter().map(|v| v.wide()));
                        if argmax(row) as f64 != y {
                            wrong += 1;
                        }
                        let zy = row[y as usize];
                        losses.push(softmax_in_place(row) - zy);
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
        let mut z = self.row_logits(w, x);
        let zy = z[y as usize];
        clean_simd_state();
        softmax_in_place(&mut z) - zy
    }
    fn add_grad(&self, w: &[f64], x: &[f64], y: f64, scale: f64, out: &mut [f64]) {
        match self.precision {
            Precision::F32 => self.row_grad::<f32>(w, x, y, scale, out),
            Precision::F64 => self.row_grad::<f64>(w, x, y, scale, out),
        }
    }
    fn add_batch_grad(
        &self,
        w: &[f64],
        data: &Dataset,
        idx: &[usize],
        scale: f64,
        out: &mut [f64],
    ) {
        match self.precision {
            Precision::F32 => self.batch_grad::<f32>(w, data, idx, scale, out),
            Precision::F64 => self.batch_grad::<f64>(w, data, idx, scale, out),
        }
    }
    fn predict(&self, w: &[f64], x: &[f64]) -> f64 {
        argmax(&self.row_logits(w, x)) as f64
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
