//! A one-hidden-layer network (SoteriaFL App. A, Task 2; digest §5.1–5.2): p inputs → h sigmoid
//! units → C-way softmax with cross-entropy,
//! f(w; x, y) = CE(softmax(W₂·σ(W₁x + c₁) + c₂), y).
//! With p = 784, h = 64, C = 10 it has the paper's 64·784 + 64 + 10·64 + 10 = 50,890
//! parameters: the biases are real parameters (digest ambiguity 16), not the official code's
//! 785×65 / 65×10 matrices whose 785 weights into the constant unit never move.
//!
//! Parameter layout, one flat vector: W₁ (h×p, row-major) | c₁ (h) | W₂ (C×h, row-major) | c₂ (C).
//!
//! Initialisation: every parameter N(0, `init_std`²) from the ChaCha20 stream
//! (`init_seed`, `Purpose::Server`, 2³² − 1): public, data-independent randomness. The official code draws
//! randn(d)/5, so `init_std = 0.2` is the default.
//!
//! ## Per-example clipping without per-example gradients ("ghost clipping")
//! For one example the gradient is, with a = σ(W₁x + c₁), δ₂ = softmax(z) − e_y and
//! δ₁ = (W₂ᵀδ₂)∘a∘(1 − a):
//! ∇W₁ = δ₁xᵀ, ∇c₁ = δ₁, ∇W₂ = δ₂aᵀ, ∇c₂ = δ₂.
//! Each weight gradient is rank one, so ‖∇‖² = ‖δ₁‖²(‖x‖² + 1) + ‖δ₂‖²(‖a‖² + 1) exactly
//! (the bias is the weight of a constant input 1; Goodfellow 2015, Lee & Kifer 2021 "ghost
//! clipping"). The batch kernel therefore computes, for a sorted chunk of ≤ 256 rows,
//! * materialised: the gathered rows X_B (K×p), activations A (K×h), δ₂ (K×C), δ₁ (K×h), the
//!   K row norms and clip factors f_i — O(K(p + h + C)) numbers;
//! * never materialised: any per-example gradient (K×50,890 numbers for MNIST).
//!
//! It then scales row i of δ₁ and δ₂ by scale·f_i and forms the clipped sum with two matrix
//! products, ∇W₁ += δ₁ᵀX_B and ∇W₂ += δ₂ᵀA (faer, as in `batch.rs`), plus column sums for the
//! biases. The clipped and unclipped kernels cost the same; the forward pass is
//! X_B·W₁ᵀ, A·W₂ᵀ and δ₂·W₂, three products of the same shapes.
//!
//! Softmax uses the max shift (the official code does not); the values agree where the code's
//! do not overflow.

use std::cell::RefCell;

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};

use super::logistic::{check_features, sigmoid};
use super::{Metric, Model};
use crate::data::Dataset;
use crate::linalg::softmax_in_place;
use crate::linalg::{axpy, clip_factor, dot};
use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

mod eval;
pub use eval::MlpEval;

/// Rows per batched chunk: bounds the workspace (256·784 f64 = 1.6 MB) for full-gradient calls.
const CHUNK: usize = 256;

/// A one-hidden-layer sigmoid network with a softmax output and cross-entropy loss.
#[derive(Debug, Clone)]
pub struct Mlp {
    features: usize,
    hidden: usize,
    classes: usize,
    init_seed: u64,
    init_std: f64,
}

impl Mlp {
    /// Number of parameters h·p + h + C·h + C, `None` on overflow.
    pub fn param_count(features: usize, hidden: usize, classes: usize) -> Option<usize> {
        let a = hidden.checked_mul(features.checked_add(1)?)?;
        let b = classes.checked_mul(hidden.checked_add(1)?)?;
        a.checked_add(b)
    }

    /// A network of `features` → `hidden` → `classes`, parameters drawn N(0, `init_std`²) from `init_seed`.
    pub fn new(
        features: usize,
        hidden: usize,
        classes: usize,
        init_seed: u64,
        init_std: f64,
    ) -> crate::Result<Self> {
        if hidden == 0 {
            return Err(crate::Error::config("model.hidden", "must be ≥ 1"));
        }
        if classes < 2 {
            return Err(crate::Error::config(
                "model.kind",
                format!("the network needs at least 2 classes, got {classes}"),
            ));
        }
        if !(init_std.is_finite() && init_std >= 0.0) {
            return Err(crate::Error::config(
                "model.init_std",
                format!("must be finite and ≥ 0, got {init_std}"),
            ));
        }
        crate::data::limits::check_params("model", Self::param_count(features, hidden, classes))?;
        Ok(Mlp {
            features,
            hidden,
            classes,
            init_seed,
            init_std,
        })
    }

    /// Hidden units h.
    pub fn hidden(&self) -> usize {
        self.hidden
    }
    /// Classes C.
    pub fn classes(&self) -> usize {
        self.classes
    }

    /// (W₁, c₁, W₂, c₂) of a parameter vector.
    fn parts<'a>(&self, w: &'a [f64]) -> (&'a [f64], &'a [f64], &'a [f64], &'a [f64]) {
        let (p, h, c) = (self.features, self.hidden, self.classes);
        let (w1, rest) = w.split_at(h * p);
        let (c1, rest) = rest.split_at(h);
        let (w2, c2) = rest.split_at(c * h);
        (w1, c1, w2, c2)
    }

    #[allow(clippy::type_complexity)]
    fn parts_mut<'a>(
        &self,
        w: &'a mut [f64],
    ) -> (&'a mut [f64], &'a mut [f64], &'a mut [f64], &'a mut [f64]) {
        let (p, h, c) = (self.features, self.hidden, self.classes);
        let (w1, rest) = w.split_at_mut(h * p);
        let (c1, rest) = rest.split_at_mut(h);
        let (w2, c2) = rest.split_at_mut(c * h);
        (w1, c1, w2, c2)
    }

    /// a = σ(W₁x + c₁) and z = W₂a + c₂ for one input.
    fn forward(&self, w: &[f64], x: &[f64], a: &mut [f64], z: &mut [f64]) {
        let (p, h) = (self.features, self.hidden);
        let (w1, c1, w2, c2) = self.parts(w);
        for j in 0..self.hidden {
            a[j] = sigmoid(dot(&w1[j * p..(j + 1) * p], x) + c1[j]);
        }
        for k in 0..self.classes {
            z[k] = dot(&w2[k * h..(k + 1) * h], a) + c2[k];
        }
    }

    /// out += scale·Σ_i clip(∇f_i) over the rows `idx` (no clipping with `clip = None`), in
    /// sorted chunks of ≤ [`CHUNK`] rows; see the module doc.
    fn batch(
        &self,
        w: &[f64],
        data: &Dataset,
        idx: &[usize],
        clip: Option<f64>,
        scale: f64,
        out: &mut [f64],
    ) {
        let mut order = idx.to_vec();
        // Summation order independent of the draw order; rows read in address order.
        order.sort_unstable();
        WORKSPACE.with_borrow_mut(|ws| {
            for rows in order.chunks(CHUNK) {
                self.chunk(ws, w, data, rows, clip, scale, out);
            }
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn chunk(
        &self,
        ws: &mut Workspace,
        w: &[f64],
        data: &Dataset,
        rows: &[usize],
        clip: Option<f64>,
        scale: f64,
        out: &mut [f64],
    ) {
        let (k, p, h, c) = (rows.len(), self.features, self.hidden, self.classes);
        let (w1, c1, w2, c2) = self.parts(w);
        ws.xb.clear();
        ws.sq.clear();
        for &i in rows {
            let (x, _) = data.row(i);
            ws.xb.extend_from_slice(x);
            ws.sq.push(dot(x, x));
        }
        for v in [&mut ws.a, &mut ws.d1] {
            v.clear();
            v.resize(k * h, 0.0);
        }
        ws.d2.clear();
        ws.d2.resize(k * c, 0.0);
        let xb = MatRef::from_row_major_slice(&ws.xb, k, p);
        // A = σ(X_B W₁ᵀ + 1c₁ᵀ).
        matmul(
            MatMut::from_row_major_slice_mut(&mut ws.a, k, h),
            Accum::Replace,
            xb,
            MatRef::from_row_major_slice(w1, h, p).transpose(),
            1.0,
            Par::Seq,
        );
        super::batch::clean_simd_state();
        for row in ws.a.chunks_exact_mut(h) {
            for (v, b) in row.iter_mut().zip(c1) {
                *v = sigmoid(*v + b);
            }
        }
        // δ₂ = softmax(A W₂ᵀ + 1c₂ᵀ) − e_y.
        matmul(
            MatMut::from_row_major_slice_mut(&mut ws.d2, k, c),
            Accum::Replace,
            MatRef::from_row_major_slice(&ws.a, k, h),
            MatRef::from_row_major_slice(w2, c, h).transpose(),
            1.0,
            Par::Seq,
        );
        super::batch::clean_simd_state();
        for (z, &i) in ws.d2.chunks_exact_mut(c).zip(rows) {
            axpy(1.0, c2, z);
            softmax_in_place(z);
            z[data.y()[i] as usize] -= 1.0;
        }
        // δ₁ = (δ₂ W₂) ∘ a ∘ (1 − a).
        matmul(
            MatMut::from_row_major_slice_mut(&mut ws.d1, k, h),
            Accum::Replace,
            MatRef::from_row_major_slice(&ws.d2, k, c),
            MatRef::from_row_major_slice(w2, c, h),
            1.0,
            Par::Seq,
        );
        for (d, a) in ws.d1.chunks_exact_mut(h).zip(ws.a.chunks_exact(h)) {
            for (dj, aj) in d.iter_mut().zip(a) {
                *dj *= aj * (1.0 - aj);
            }
        }
        // Row coefficients scale·f_i from the per-example norms.
        for r in 0..k {
            let (d1, d2) = (
                &mut ws.d1[r * h..(r + 1) * h],
                &mut ws.d2[r * c..(r + 1) * c],
            );
            let f = clip.map_or(1.0, |cl| {
                let a = &ws.a[r * h..(r + 1) * h];
                let n2 = dot(d1, d1) * (ws.sq[r] + 1.0) + dot(d2, d2) * (dot(a, a) + 1.0);
                clip_factor(n2.sqrt(), cl)
            });
            if f > 0.0 {
                d1.iter_mut().for_each(|v| *v *= scale * f);
                d2.iter_mut().for_each(|v| *v *= scale * f);
            } else {
                // A non-finite gradient, replaced by zero (the rows may hold NaN).
                d1.iter_mut().for_each(|v| *v = 0.0);
                d2.iter_mut().for_each(|v| *v = 0.0);
            }
        }
        let (o1, oc1, o2, oc2) = self.parts_mut(out);
        matmul(
            MatMut::from_row_major_slice_mut(o1, h, p),
            Accum::Add,
            MatRef::from_row_major_slice(&ws.d1, k, h).transpose(),
            xb,
            1.0,
            Par::Seq,
        );
        matmul(
            MatMut::from_row_major_slice_mut(o2, c, h),
            Accum::Add,
            MatRef::from_row_major_slice(&ws.d2, k, c).transpose(),
            MatRef::from_row_major_slice(&ws.a, k, h),
            1.0,
            Par::Seq,
        );
        for d in ws.d1.chunks_exact(h) {
            axpy(1.0, d, oc1);
        }
        for d in ws.d2.chunks_exact(c) {
            axpy(1.0, d, oc2);
        }
    }
}

#[derive(Default)]
struct Workspace {
    /// Gathered rows K×p, row-major, and their squared norms.
    xb: Vec<f64>,
    sq: Vec<f64>,
    /// Activations K×h, δ₁ K×h, δ₂ K×C.
    a: Vec<f64>,
    d1: Vec<f64>,
    d2: Vec<f64>,
}

thread_local! {
    /// Per thread (rayon runs silos on several), overwritten on every call.
    static WORKSPACE: RefCell<Workspace> = RefCell::new(Workspace::default());
}

impl Model for Mlp {
    fn name(&self) -> &'static str {
        "mlp"
    }
    fn num_params(&self) -> usize {
        // Checked in `new`.
        Self::param_count(self.features, self.hidden, self.classes).unwrap_or(usize::MAX)
    }
    fn num_features(&self) -> usize {
        self.features
    }
    fn loss(&self, w: &[f64], x: &[f64], y: f64) -> f64 {
        let (mut a, mut z) = (vec![0.0; self.hidden], vec![0.0; self.classes]);
        self.forward(w, x, &mut a, &mut z);
        let zy = z[y as usize];
        softmax_in_place(&mut z) - zy
    }
    fn add_grad(&self, w: &[f64], x: &[f64], y: f64, scale: f64, out: &mut [f64]) {
        let (p, h) = (self.features, self.hidden);
        let (mut a, mut z) = (vec![0.0; h], vec![0.0; self.classes]);
        self.forward(w, x, &mut a, &mut z);
        softmax_in_place(&mut z);
        z[y as usize] -= 1.0;
        let (_, _, w2, _) = self.parts(w);
        let mut d1 = vec![0.0; h];
        for (k, &dk) in z.iter().enumerate() {
            axpy(dk, &w2[k * h..(k + 1) * h], &mut d1);
        }
        for (dj, aj) in d1.iter_mut().zip(&a) {
            *dj *= aj * (1.0 - aj);
        }
        let (o1, oc1, o2, oc2) = self.parts_mut(out);
        for j in 0..h {
            axpy(scale * d1[j], x, &mut o1[j * p..(j + 1) * p]);
        }
        axpy(scale, &d1, oc1);
        for (k, &dk) in z.iter().enumerate() {
            axpy(scale * dk, &a, &mut o2[k * h..(k + 1) * h]);
        }
        axpy(scale, &z, oc2);
    }
    batch_grads_from_loop!();
    fn predict(&self, w: &[f64], x: &[f64]) -> f64 {
        let (mut a, mut z) = (vec![0.0; self.hidden], vec![0.0; self.classes]);
        self.forward(w, x, &mut a, &mut z);
        super::argmax(&z) as f64
    }
    fn metric(&self) -> Metric {
        Metric::ErrorRate
    }
    /// The gradient with respect to W₁ grows with W₂: no bound over all w. Noise must be
    /// calibrated to the clip threshold.
    fn lipschitz(&self, _max_norm: f64) -> Option<f64> {
        None
    }
    fn check_data(&self, data: &Dataset) -> crate::Result<()> {
        check_features(self.features, data)?;
        match data.target().num_classes() {
            Some(c) if c == self.classes => Ok(()),
            other => Err(crate::Error::Dimension(format!(
                "the network has {} classes, the data has {}",
                self.classes,
                other.map_or("a real target".to_string(), |c| format!("{c} classes"))
            ))),
        }
    }
    fn initial_params(&self) -> Vec<f64> {
        // Its own stream index, apart from any algorithm's server draws under the same seed.
        let mut rng = DpRng::from_seed(self.init_seed, Purpose::Server, u32::MAX);
        let mut w = dpfl_privacy::sampler::standard_normals(&mut rng, self.num_params());
        w.iter_mut().for_each(|v| *v *= self.init_std);
        w
    }
}

/// A network's class count, checking its configured `inputs` against the data's `features`.
pub(super) fn network_classes(
    inputs: Option<usize>,
    features: usize,
    classes: Option<usize>,
) -> crate::Result<usize> {
    if let Some(n) = inputs
        && n != features
    {
        return Err(crate::Error::config(
            "model.inputs",
            format!("the network takes {n} inputs, the data has {features} features"),
        ));
    }
    classes.ok_or_else(|| crate::Error::config("model.kind", "the network needs a class target"))
}
