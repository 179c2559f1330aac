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
}
