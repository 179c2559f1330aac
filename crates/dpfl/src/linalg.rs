//! Dense row-major matrices and the few BLAS-1 kernels the models need. Hand-written because
//! the hot loops are dot products and axpys over one row at a time, which the compiler
//! vectorises; a BLAS dependency would not speed these up (see BENCHMARKS.md). Heavier linear
//! algebra (PCA, Newton solves) uses `faer`.

/// A dense row-major matrix of f64.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f64>,
}

impl Matrix {
    /// A `rows × cols` matrix of zeros.
    pub fn zeros(rows: usize, cols: usize) -> Self {
        Matrix {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }
    /// Builds from row-major data; `None` if the length is not rows·cols.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<f64>) -> Option<Self> {
        (data.len() == rows * cols).then_some(Matrix { rows, cols, data })
    }
    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// The number of columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Row `i` (panics if `i ≥ rows`, an internal invariant).
    pub fn row(&self, i: usize) -> &[f64] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }
    /// Row `i`, mutable.
    pub fn row_mut(&mut self, i: usize) -> &mut [f64] {
        &mut self.data[i * self.cols..(i + 1) * self.cols]
    }
    /// The entries, row after row.
    pub fn as_slice(&self) -> &[f64] {
        &self.data
    }
    /// The entries, row after row, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [f64] {
        &mut self.data
    }
    /// The rows at `idx`, in that order.
    pub fn select_rows(&self, idx: &[usize]) -> Matrix {
        let mut data = Vec::with_capacity(idx.len() * self.cols);
        for &i in idx {
            data.extend_from_slice(self.row(i));
        }
        Matrix {
            rows: idx.len(),
            cols: self.cols,
            data,
        }
    }
}

/// ⟨a, b⟩. Four accumulators so the compiler can vectorise without reassociating.
#[inline]
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0.0f64; 4];
    let chunks = a.len() / 4;
    for c in 0..chunks {
        let i = 4 * c;
        acc[0] += a[i] * b[i];
        acc[1] += a[i + 1] * b[i + 1];
        acc[2] += a[i + 2] * b[i + 2];
        acc[3] += a[i + 3] * b[i + 3];
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for i in 4 * chunks..a.len() {
        s += a[i] * b[i];
    }
    s
}

/// (⟨w, x⟩, ‖x‖²) in one pass over x: the batch kernels clip per-example gradients of the form
/// a·x through ‖a·x‖ = |a|·‖x‖ without a second pass.
#[inline]
pub fn dot_and_sq(w: &[f64], x: &[f64]) -> (f64, f64) {
    debug_assert_eq!(w.len(), x.len());
    let (mut d, mut q) = ([0.0f64; 4], [0.0f64; 4]);
    let chunks = x.len() / 4;
    for c in 0..chunks {
        let i = 4 * c;
        for l in 0..4 {
            d[l] += w[i + l] * x[i + l];
            q[l] += x[i + l] * x[i + l];
        }
    }
    let (mut ds, mut qs) = ((d[0] + d[1]) + (d[2] + d[3]), (q[0] + q[1]) + (q[2] + q[3]));
    for i in 4 * chunks..x.len() {
        ds += w[i] * x[i];
        qs += x[i] * x[i];
    }
    (ds, qs)
}

thread_local! {
    /// Non-finite per-example gradients met by [`clip_factor`] on this thread (read by
    /// `GradientOracle`, which runs each kernel on one thread).
    static NONFINITE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The factor min(1, C/‖g‖) that clips g to norm C (Abadi et al. 2016), from ‖g‖.
///
/// A non-finite norm (a NaN or infinite coordinate) gives 0: the gradient is replaced by zero
/// before clipping, so a record whose gradient overflows moves the release by ≤ C like any
/// other, and the message stays finite (a NaN would otherwise reach the noised message and
/// make its rejection depend on one record). Callers must skip, not multiply, a zero-factor
/// gradient (0·NaN = NaN). Each such gradient is counted ([`nonfinite_count`]).
#[inline]
pub fn clip_factor(norm: f64, clip: f64) -> f64 {
    if !norm.is_finite() {
        NONFINITE.with(|c| c.set(c.get() + 1));
        0.0
    } else if norm > clip {
        clip / norm
    } else {
        1.0
    }
}

/// How many non-finite gradients [`clip_factor`] has zeroed on this thread so far.
pub fn nonfinite_count() -> u64 {
    NONFINITE.with(|c| c.get())
}

/// y += alpha · x.
#[inline]
pub fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    debug_assert_eq!(x.len(), y.len());
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

/// ‖a‖₂.
#[inline]
pub fn norm2(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// x *= alpha.
#[inline]
pub fn scale(alpha: f64, x: &mut [f64]) {
    x.iter_mut().for_each(|v| *v *= alpha);
}

/// ‖X‖₂, the largest singular value of the row-major `n × d` matrix `x`, as the square root of
/// the largest eigenvalue of the `d × d` Gram matrix XᵀX (faer's symmetric eigensolver, one
/// thread). Used to scale a9a's features as the SoteriaFL code does (‖X‖₂/(2√N), digest
/// §5.2), where it replaced 200 power-iteration steps over the whole 32,560 × 124 matrix: the
/// Gram matrix is accumulated row by row over each row's non-zero entries only (a9a's rows
/// hold ≈ 14 ones in 124 columns, so its entries are exact integer counts), and its
/// eigenvalues cost nothing at d = 124.
pub fn spectral_norm(x: &[f64], n: usize, d: usize) -> crate::Result<f64> {
    use faer::diag::Diag;
    use faer::dyn_stack::{MemBuffer, MemStack};
    use faer::linalg::evd::{self, ComputeEigenvectors};

    if x.len() != n * d || d == 0 {
        return Err(crate::Error::Dimension(format!(
            "spectral norm: {} values for a {n} x {d} matrix",
            x.len()
        )));
    }
    // Lower triangle of XᵀX (column-major d × d; the eigensolver reads no more).
    let mut gram = vec![0.0; d * d];
    let mut nz: Vec<(usize, f64)> = Vec::with_capacity(d);
    for row in x.chunks_exact(d) {
        nz.clear();
        nz.extend(row.iter().copied().enumerate().filter(|&(_, v)| v != 0.0));
        for (a, &(j, vj)) in nz.iter().enumerate() {
            let col = &mut gram[j * d..(j + 1) * d];
            for &(i, vi) in &nz[a..] {
                col[i] += vi * vj;
            }
        }
    }
    let gram = faer::MatRef::from_column_major_slice(&gram, d, d);
    let par = faer::Par::Seq;
    let mut eig = Diag::<f64>::zeros(d);
    let mut mem = MemBuffer::new(evd::self_adjoint_evd_scratch::<f64>(
        d,
        ComputeEigenvectors::No,
        par,
        Default::default(),
    ));
    evd::self_adjoint_evd(
        gram,
        eig.as_mut(),
        None,
        par,
        MemStack::new(&mut mem),
        Default::default(),
    )
    .map_err(|e| crate::Error::data("spectral norm", format!("eigensolver failed: {e:?}")))?;
    // Non-decreasing order; round-off can leave a zero eigenvalue slightly negative.
    Ok(eig.column_vector()[d - 1].max(0.0).sqrt())
}

/// Replaces z by softmax(z) and returns logsumexp(z).
#[inline]
pub(crate) fn softmax_in_place(z: &mut [f64]) -> f64 {
    let m = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut s = 0.0;
    for v in z.iter_mut() {
        *v = (*v - m).exp();
        s += *v;
    }
    z.iter_mut().for_each(|v| *v /= s);
    m + s.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_match_naive() {
        let a: Vec<f64> = (0..11).map(|i| i as f64 * 0.5).collect();
        let b: Vec<f64> = (0..11).map(|i| 1.0 - i as f64).collect();
        let naive: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-12);
        let mut y = b.clone();
        axpy(2.0, &a, &mut y);
        assert_eq!(y[3], b[3] + 2.0 * a[3]);
        assert!((norm2(&[3.0, 4.0]) - 5.0).abs() < 1e-15);
        let (d, q) = dot_and_sq(&b, &a);
        assert!((d - naive).abs() < 1e-12 && (q - dot(&a, &a)).abs() < 1e-12);
        assert_eq!(clip_factor(4.0, 2.0), 0.5);
        assert_eq!(clip_factor(1.0, 2.0), 1.0);
        let before = nonfinite_count();
        assert_eq!(clip_factor(f64::NAN, 2.0), 0.0);
        assert_eq!(clip_factor(f64::INFINITY, 2.0), 0.0);
        assert_eq!(nonfinite_count() - before, 2);
        let m = Matrix::from_vec(2, 3, vec![1., 2., 3., 4., 5., 6.]).unwrap();
        assert_eq!(m.row(1), &[4., 5., 6.]);
        assert_eq!(m.select_rows(&[1, 0, 1]).row(2), &[4., 5., 6.]);
        assert!(Matrix::from_vec(2, 2, vec![1.0]).is_none());
    }

    /// The power iteration `reproduce::soteria::load` used before (200 steps on XᵀX from the
    /// all-ones direction, X never formed into XᵀX): the reference for [`spectral_norm`].
    fn power_iteration(x: &[f64], n: usize, d: usize) -> f64 {
        let mut v = vec![1.0 / (d as f64).sqrt(); d];
        let mut lambda = 0.0;
        for _ in 0..200 {
            let mut w = vec![0.0; d];
            for row in x.chunks_exact(d).take(n) {
                axpy(dot(row, &v), row, &mut w);
            }
            lambda = norm2(&w);
            v = w.iter().map(|t| t / lambda).collect();
        }
        lambda.sqrt()
    }

    #[test]
    fn spectral_norm_by_hand_and_errors() {
        // X = [[3, 0], [4, 5]]: XᵀX = [[25, 20], [20, 25]], eigenvalues 45 and 5.
        let s = spectral_norm(&[3.0, 0.0, 4.0, 5.0], 2, 2).unwrap();
        assert!((s - 45f64.sqrt()).abs() < 1e-14, "{s}");
        // A rank-one column: ‖(1, 2, 2)ᵀ‖ = 3.
        assert!((spectral_norm(&[1.0, 2.0, 2.0], 3, 1).unwrap() - 3.0).abs() < 1e-15);
        assert_eq!(spectral_norm(&[0.0; 6], 3, 2).unwrap(), 0.0);
        assert!(spectral_norm(&[1.0; 5], 3, 2).is_err());
    }

    #[test]
    fn spectral_norm_matches_the_old_power_iteration_on_a9a() {
        // The bundled a9a training set with the constant column, as the reproduction loads it.
        let data = crate::data::registry::DataDirs::new(None)
            .load(
                crate::data::registry::KnownDataset::A9a,
                crate::data::registry::Part::Train,
            )
            .unwrap();
        let (n, d) = (32_560, data.num_features() + 1);
        let mut x = Vec::with_capacity(n * d);
        for i in 0..n {
            x.extend_from_slice(data.row(i).0);
            x.push(1.0);
        }
        let (new, old) = (spectral_norm(&x, n, d).unwrap(), power_iteration(&x, n, d));
        assert!((new - old).abs() <= 1e-12 * old, "{new} vs {old}");
        assert!(new > 100.0 && new < 1000.0, "{new}");
    }
}
