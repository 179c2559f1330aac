//! The network's full evaluation in one pass: ‖∇f(w)‖², the mean training loss and the test
//! accuracy, where f is the mean loss over every training row of every shard (SoteriaFL's
//! "utility" metric, digest §5.2 "Metrics").
//!
//! Why: the reproduction evaluates the 50,890-parameter network on 60,000 training and 10,000
//! test rows at every evaluated round. Done as three separate passes (the batched gradient,
//! then the per-row `Model::loss` and `Model::predict`, which allocate per row and run the
//! forward pass as 74 dot products), it cost most of a run. Here every training row goes
//! through the forward pass once, and its loss and its backward pass come from that same
//! forward pass:
//! * per block of [`BLOCK`] contiguous rows (read in place, no copy): A = σ(X W₁ᵀ + c₁),
//!   Z = A W₂ᵀ + c₂, loss = logsumexp(z) − z_y, δ₂ = softmax(z) − e_y,
//!   δ₁ = (δ₂ W₂) ∘ a ∘ (1 − a), then ∇W₁ += δ₁ᵀ X and ∇W₂ += δ₂ᵀ A (faer GEMMs);
//! * test rows: the forward pass only, correct when argmax z = y (the same argmax as
//!   `Model::predict`, first maximum wins).
//!
//! Shards are evaluated in parallel (rayon), each into its own partial sums, which are then
//! added in shard order: the result does not depend on the number of threads. Against the
//! per-row paths the values differ only by the order of floating-point sums (tested).
//! A `vzeroupper` follows every faer product that is followed by libm's exp (see
//! `batch::clean_simd_state`).

use std::cell::RefCell;

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

use super::Mlp;
use crate::data::Dataset;
use crate::linalg::{axpy, softmax_in_place};
use crate::model::batch::clean_simd_state;
use crate::model::logistic::sigmoid;

/// Rows per block: the block of X (512 × 784 f64 = 3.2 MB) is read twice, forward and
/// backward, while it is still in the last-level cache.
const BLOCK: usize = 512;

/// One evaluation of the network (module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MlpEval {
    /// ‖∇f(w)‖², f the mean loss over all training rows.
    pub grad_norm_sq: f64,
    /// f(w).
    pub loss: f64,
    /// Fraction of test rows classified correctly (NaN without test rows).
    pub accuracy: f64,
}

/// Partial sums of one shard.
struct Partial {
    grad: Vec<f64>,
    loss: f64,
    correct: usize,
}

#[derive(Default)]
struct Workspace {
    a: Vec<f64>,
    z: Vec<f64>,
    d1: Vec<f64>,
}

thread_local! {
    static WORKSPACE: RefCell<Workspace> = RefCell::new(Workspace::default());
}

impl Mlp {
    /// ‖∇f(w)‖², f(w) over the rows of `train` (all shards pooled, each row weighing the
    /// same) and the accuracy over the rows of `test` (pooled), in one pass (module doc).
    pub fn evaluate(&self, w: &[f64], train: &[&Dataset], test: &[&Dataset]) -> MlpEval {
        let n: usize = train.iter().map(|d| d.len()).sum();
        let n_test: usize = test.iter().map(|d| d.len()).sum();
        let jobs: Vec<(&Dataset, bool)> = train
            .iter()
            .map(|d| (*d, true))
            .chain(test.iter().filter(|d| !d.is_empty()).map(|d| (*d, false)))
            .collect();
        let parts: Vec<Partial> = jobs
            .par_iter()
            .map(|&(d, backward)| self.shard(w, d, backward))
            .collect();
        let mut grad = vec![0.0; w.len()];
        let (mut loss, mut correct) = (0.0, 0usize);
        for (p, &(_, backward)) in parts.iter().zip(&jobs) {
            if backward {
                axpy(1.0, &p.grad, &mut grad);
                loss += p.loss;
            } else {
                correct += p.correct;
            }
        }
        let inv = 1.0 / n as f64;
        let g2 = grad.iter().map(|g| (g * inv) * (g * inv)).sum::<f64>();
        MlpEval {
            grad_norm_sq: if n == 0 { f64::NAN } else { g2 },
            loss: loss * inv,
            accuracy: correct as f64 / n_test as f64,
        }
    }

    /// One shard: the summed gradient and loss (`backward`), or the count of correct
    /// predictions (test rows).
    fn shard(&self, w: &[f64], data: &Dataset, backward: bool) -> Partial {
        let (p, h, c) = (self.features, self.hidden, self.classes);
        let (w1, c1, w2, c2) = self.parts(w);
        let mut out = Partial {
            grad: if backward {
                vec![0.0; w.len()]
            } else {
                Vec::new()
            },
            loss: 0.0,
            correct: 0,
        };
        let x = data.x().as_slice();
        let y = data.y();
        WORKSPACE.with_borrow_mut(|ws| {
            for start in (0..data.len()).step_by(BLOCK) {
                let k = BLOCK.min(data.len() - start);
                let xb = MatRef::from_row_major_slice(&x[start * p..(start + k) * p], k, p);
                let yb = &y[start..start + k];
                ws.a.resize(k * h, 0.0);
                ws.z.resize(k * c, 0.0);
                let (a, z) = (&mut ws.a[..k * h], &mut ws.z[..k * c]);
                matmul(
                    MatMut::from_row_major_slice_mut(&mut *a, k, h),
                    Accum::Replace,
                    xb,
                    MatRef::from_row_major_slice(w1, h, p).transpose(),
                    1.0,
                    Par::Seq,
                );
                clean_simd_state();
                for row in a.chunks_exact_mut(h) {
                    for (v, b) in row.iter_mut().zip(c1) {
                        *v = sigmoid(*v + b);
                    }
                }
                matmul(
                    MatMut::from_row_major_slice_mut(&mut *z, k, c),
                    Accum::Replace,
                    MatRef::from_row_major_slice(&*a, k, h),
                    MatRef::from_row_major_slice(w2, c, h).transpose(),
                    1.0,
                    Par::Seq,
                );
                clean_simd_state();
                for (zr, &yi) in z.chunks_exact_mut(c).zip(yb) {
                    axpy(1.0, c2, zr);
                    let label = yi as usize;
                    if !backward {
                        out.correct += usize::from(crate::model::argmax(zr) == label);
                        continue;
                    }
                    let zy = zr[label];
                    out.loss += softmax_in_place(zr) - zy;
                    zr[label] -= 1.0;
                }
                if !backward {
                    continue;
                }
                ws.d1.resize(k * h, 0.0);
                let d1 = &mut ws.d1[..k * h];
                matmul(
                    MatMut::from_row_major_slice_mut(&mut *d1, k, h),
                    Accum::Replace,
                    MatRef::from_row_major_slice(&*z, k, c),
                    MatRef::from_row_major_slice(w2, c, h),
                    1.0,
                    Par::Seq,
                );
                for (d, av) in d1.iter_mut().zip(a.iter()) {
                    *d *= av * (1.0 - av);
                }
                let (o1, oc1, o2, oc2) = self.parts_mut(&mut out.grad);
                matmul(
                    MatMut::from_row_major_slice_mut(o1, h, p),
                    Accum::Add,
                    MatRef::from_row_major_slice(&*d1, k, h).transpose(),
                    xb,
                    1.0,
                    Par::Seq,
                );
                matmul(
                    MatMut::from_row_major_slice_mut(o2, c, h),
                    Accum::Add,
                    MatRef::from_row_major_slice(&*z, k, c).transpose(),
                    MatRef::from_row_major_slice(&*a, k, h),
                    1.0,
                    Par::Seq,
                );
                for d in d1.chunks_exact(h) {
                    axpy(1.0, d, oc1);
                }
                for d in z.chunks_exact(c) {
                    axpy(1.0, d, oc2);
                }
            }
        });
        clean_simd_state();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Target;
    use crate::linalg::Matrix;
    use crate::model::Model;

    fn data(rows: usize, p: usize, seed: u64) -> Dataset {
        // Deterministic pseudo-random features and labels 0..3.
        let mut s = seed;
        let mut next = || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        };
        let x: Vec<f64> = (0..rows * p).map(|_| next()).collect();
        let y: Vec<f64> = (0..rows).map(|i| (i % 3) as f64).collect();
        Dataset::new(
            Matrix::from_vec(rows, p, x).unwrap(),
            y,
            Target::Classes {
                names: vec!["a".into(), "b".into(), "c".into()],
            },
            (0..p).map(|j| format!("f{j}")).collect(),
        )
        .unwrap()
    }

    /// The fused pass equals the per-row paths (`Model::loss`, `Model::predict`) and the
    /// batched gradient, up to the order of sums; shards of unequal size, one longer than a
    /// block, and an empty test shard.
    #[test]
    fn fused_evaluation_matches_the_per_row_paths() {
        let m = Mlp::new(7, 5, 3, 4, 0.8).unwrap();
        let w = m.initial_params();
        let shards = [data(BLOCK + 37, 7, 1), data(19, 7, 2)];
        let t = data(41, 7, 3);
        let test = [t.subset(&[]), t];
        let train: Vec<&Dataset> = shards.iter().collect();
        let tests: Vec<&Dataset> = test.iter().collect();
        let e = m.evaluate(&w, &train, &tests);
        let n = (BLOCK + 37 + 19) as f64;
        let mut g = vec![0.0; w.len()];
        let (mut loss, mut correct) = (0.0, 0);
        for d in &shards {
            let idx: Vec<usize> = (0..d.len()).collect();
            m.add_batch_grad(&w, d, &idx, 1.0 / n, &mut g);
            for i in 0..d.len() {
                let (x, y) = d.row(i);
                loss += m.loss(&w, x, y);
            }
        }
        for i in 0..test[1].len() {
            let (x, y) = test[1].row(i);
            correct += usize::from(m.predict(&w, x) == y);
        }
        let g2: f64 = g.iter().map(|v| v * v).sum();
        assert!(g2 > 1e-6);
        assert!(
            (e.grad_norm_sq - g2).abs() <= 1e-12 * g2,
            "{} {g2}",
            e.grad_norm_sq
        );
        assert!(
            (e.loss - loss / n).abs() <= 1e-13 * loss / n,
            "{} {}",
            e.loss,
            loss / n
        );
        assert_eq!(e.accuracy, correct as f64 / 41.0);
        // Not a vacuous comparison: some but not all test rows are right.
        assert!(correct > 0 && correct < 41, "{correct}");
    }
}
