//! Minibatch gradient kernels on gathered rows.
//!
//! A silo's minibatch is K row indices (repeats allowed: Lowy & Razaviyayn's Algorithm 2
//! samples with replacement). Row by row, a gradient is a dot product and an axpy per row
//! (BLAS-1, a few GFLOP/s at best). Copying the K rows into one contiguous K×p block lets
//! faer's matrix kernels do the two products (X_B w, then X_Bᵀ a; or X_B W and X_Bᵀ P for
//! softmax), which run near the core's vector peak; the copy costs one pass over the rows,
//! which the row-by-row kernel makes anyway. Below [`GATHER_MIN_WORK`] the call overhead
//! dominates and the row-by-row kernel is used instead.
//!
//! Clipping happens on the per-row coefficients (|a_i|·‖x_i‖, or ‖x_i‖·‖p_i − e_y‖ for
//! softmax), with ‖x_i‖² accumulated during the copy, so the clipped and unclipped kernels
//! cost the same. Buffers are per thread (rayon runs silos on several threads) and are
//! overwritten on every call, so results do not depend on which thread ran a silo.

use std::cell::RefCell;

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};

use crate::data::Dataset;
use crate::linalg::clip_factor;

/// Clears the upper halves of the AVX registers (vzeroupper) after a faer product, before
/// scalar code that calls libm. faer's kernels return with them dirty; this crate's SSE code
/// calling glibc's VEX-encoded exp/log1p then pays a state transition on every call
/// (measured on the 2-vCPU EPYC VM: 4.1M exp + log1p after a product took 1.58 s, after a
/// vzeroupper 0.20 s). No effect on any value; a no-op without AVX.
pub(crate) fn clean_simd_state() {
    #[cfg(target_arch = "x86_64")]
    if let Some(avx) = pulp::core_arch::x86::Avx::try_new() {
        avx._mm256_zeroupper();
    }
}

/// K·p from which gathering pays off (measured with `cargo bench --bench kernels`).
pub(crate) const GATHER_MIN_WORK: usize = 4096;

pub(crate) fn use_gathered(rows: usize, params: usize) -> bool {
    rows * params >= GATHER_MIN_WORK
}

#[derive(Default)]
struct Workspace {
    /// The batch's row indices in increasing order: a sum is order-free up to rounding, and
    /// reading rows in address order lets the hardware prefetcher hide most cache misses when
    /// a silo's data do not fit in cache.
    order: Vec<usize>,
    /// The gathered rows, K×p row-major.
    xb: Vec<f64>,
    /// ‖x_i‖² per gathered row.
    sq: Vec<f64>,
    /// X_B w (K), or X_B W (K×C row-major), overwritten by the coefficients.
    z: Vec<f64>,
}

thread_local! {
    static WORKSPACE: RefCell<Workspace> = RefCell::new(Workspace::default());
}

/// Copies rows `idx` of `data` into `ws.xb`, and their squared norms into `ws.sq` when
/// clipping needs them.
fn gather(ws: &mut Workspace, data: &Dataset, idx: &[usize], norms: bool) {
    let p = data.num_features();
    ws.order.clear();
    ws.order.extend_from_slice(idx);
    ws.order.sort_unstable();
    ws.xb.clear();
    ws.xb.reserve(idx.len() * p);
    ws.sq.clear();
    for &i in &ws.order {
        let (x, _) = data.row(i);
        ws.xb.extend_from_slice(x);
        ws.sq
            .push(if norms { crate::linalg::dot(x, x) } else { 0.0 });
    }
}

/// out += scale·Σ_i clip(a_i x_i) with a_i = coef(⟨w, x_i⟩, ‖x_i‖², y_i); see
/// [`super::rank_one_batch`].
pub(crate) fn rank_one_gathered(
    w: &[f64],
    data: &Dataset,
    idx: &[usize],
    clip: Option<f64>,
    scale: f64,
    out: &mut [f64],
    coef: impl Fn(f64, f64, f64) -> f64,
) {
    let (k, p) = (idx.len(), w.len());
    WORKSPACE.with_borrow_mut(|ws| {
        // coef may need ‖x‖² even without clipping (the smoothed hinge's prox does).
        gather(ws, data, idx, true);
        ws.z.clear();
        ws.z.resize(k, 0.0);
        let xb = MatRef::from_row_major_slice(&ws.xb, k, p);
        matmul(
            MatMut::from_column_major_slice_mut(&mut ws.z, k, 1),
            Accum::Replace,
            xb,
            MatRef::from_column_major_slice(w, p, 1),
            1.0,
            Par::Seq,
        );
        clean_simd_state();
        for (r, &i) in ws.order.iter().enumerate() {
            let a = coef(ws.z[r], ws.sq[r], data.y()[i]);
            let f = clip.map_or(1.0, |c| clip_factor(a.abs() * ws.sq[r].sqrt(), c));
            // f = 0 marks a non-finite gradient, replaced by zero (a may be NaN).
            ws.z[r] = if f > 0.0 { scale * a * f } else { 0.0 };
        }
        matmul(
            MatMut::from_column_major_slice_mut(out, p, 1),
            Accum::Add,
            xb.transpose(),
            MatRef::from_column_major_slice(&ws.z, k, 1),
            1.0,
            Par::Seq,
        );
    })
}

/// Softmax regression with W ∈ R^{p×C} row-major: out += scale·Σ_i clip(x_i (p_i − e_{y_i})ᵀ),
/// clipping through ‖x (p − e_y)ᵀ‖_F = ‖x‖·‖p − e_y‖.
pub(crate) fn softmax_gathered(
    w: &[f64],
    classes: usize,
    data: &Dataset,
    idx: &[usize],
    clip: Option<f64>,
    scale: f64,
    out: &mut [f64],
) {
    let (k, p, c) = (idx.len(), data.num_features(), classes);
    WORKSPACE.with_borrow_mut(|ws| {
        gather(ws, data, idx, clip.is_some());
        ws.z.clear();
        ws.z.resize(k * c, 0.0);
        let xb = MatRef::from_row_major_slice(&ws.xb, k, p);
        let wm = MatRef::from_row_major_slice(w, p, c);
        matmul(
            MatMut::from_row_major_slice_mut(&mut ws.z, k, c),
            Accum::Replace,
            xb,
            wm,
            1.0,
            Par::Seq,
        );
        clean_simd_state();
        for (r, &i) in ws.order.iter().enumerate() {
            let z = &mut ws.z[r * c..(r + 1) * c];
            crate::linalg::softmax_in_place(z);
            z[data.y()[i] as usize] -= 1.0;
            let f = clip.map_or(1.0, |cl| {
                clip_factor((ws.sq[r] * crate::linalg::dot(z, z)).sqrt(), cl)
            });
            if f > 0.0 {
                crate::linalg::scale(scale * f, z);
            } else {
                // A non-finite gradient, replaced by zero (z may hold NaN).
                z.iter_mut().for_each(|v| *v = 0.0);
            }
        }
        matmul(
            MatMut::from_row_major_slice_mut(out, p, c),
            Accum::Add,
            xb.transpose(),
            MatRef::from_row_major_slice(&ws.z, k, c),
            1.0,
            Par::Seq,
        );
    })
}
