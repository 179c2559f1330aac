//! Principal component analysis, for the MNIST preprocessing of Lowy & Razaviyayn App. I.1
//! (PCA to d = 50, fitted on all 60,000 training images with pixels in [0, 1], before the
//! silos are formed). Like the paper's, this preprocessing is not differentially private.
//!
//! The fit eigen-decomposes the d × d sample covariance (X − 1μᵀ)ᵀ(X − 1μᵀ)/(n − 1) with
//! faer's self-adjoint eigensolver instead of taking an SVD of the n × d data: for MNIST that
//! is a 784 × 784 problem after one Gram product, far cheaper than a thin SVD of 60000 × 784.
//! Squaring the condition number does not matter here, because only the leading components
//! (eigenvalues far above round-off) are kept. Projection centres the data, as
//! scikit-learn's `PCA.fit_transform` (the paper's code) does.
//!
//! **Reproducibility.** The Gram product is summed over fixed blocks of rows (each a
//! sequential faer product) in block order, and the eigensolver runs sequentially, so the
//! result is bit-for-bit the same for any rayon thread count. Eigenvectors are defined up to
//! sign; each component is flipped so that its largest-magnitude entry is positive.

use faer::diag::Diag;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::evd::{self, ComputeEigenvectors};
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, Mat, MatMut, MatRef, Par};
use rayon::prelude::*;

use super::Dataset;
use crate::linalg::Matrix;
use crate::{Error, Result};

/// Rows per block of the Gram product: large enough for an efficient product, small enough
/// that the per-block d × d partial sums stay few.
const BLOCK_ROWS: usize = 4096;

/// A fitted PCA's mean and axes (row j: the j-th axis), as saved in `model.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PcaParams {
    /// The training mean subtracted before projecting (length d).
    pub mean: Vec<f64>,
    /// The k axes, each of length d, in decreasing order of variance.
    pub components: Vec<Vec<f64>>,
}

/// A fitted PCA: mean and the k leading principal axes.
#[derive(Debug, Clone, PartialEq)]
pub struct Pca {
    mean: Vec<f64>,
    /// k × d, row j is the j-th principal axis (unit norm).
    components: Matrix,
    /// Eigenvalues of the sample covariance for the kept axes, non-increasing.
    explained_variance: Vec<f64>,
    /// Trace of the sample covariance (the sum of all eigenvalues).
    total_variance: f64,
}

impl Pca {
    /// Fits the k leading components of the rows of `x`.
    pub fn fit(x: &Matrix, k: usize) -> Result<Pca> {
        let (n, d) = (x.rows(), x.cols());
        if n < 2 {
            return Err(Error::data(
                "pca",
                format!("needs at least 2 rows, got {n}"),
            ));
        }
        if k == 0 || k > d {
            return Err(Error::config(
                "pca.components",
                format!("must lie in 1..={d} (the number of features), got {k}"),
            ));
        }
        let mut mean = vec![0.0; d];
        for i in 0..n {
            mean.iter_mut().zip(x.row(i)).for_each(|(m, v)| *m += v);
        }
        mean.iter_mut().for_each(|m| *m /= n as f64);

        let blocks: Vec<Mat<f64>> = (0..n.div_ceil(BLOCK_ROWS))
            .into_par_iter()
            .map(|b| {
                let rows = b * BLOCK_ROWS..((b + 1) * BLOCK_ROWS).min(n);
                let centred =
                    Mat::from_fn(rows.len(), d, |i, j| x.row(rows.start + i)[j] - mean[j]);
                let mut g = Mat::<f64>::zeros(d, d);
                // Only the lower triangle: the eigensolver reads no more, and it halves the work.
                triangular::matmul(
                    &mut g,
                    BlockStructure::TriangularLower,
                    Accum::Replace,
                    centred.transpose(),
                    BlockStructure::Rectangular,
                    &centred,
                    BlockStructure::Rectangular,
                    1.0,
                    Par::Seq,
                );
                g
            })
            .collect();
        let mut cov = Mat::<f64>::zeros(d, d);
        for g in &blocks {
            cov += g;
        }
        drop(blocks);
        let inv = 1.0 / (n - 1) as f64;
        cov *= faer::Scale(inv);

        let mut s = Diag::<f64>::zeros(d);
        let mut u = Mat::<f64>::zeros(d, d);
        let par = Par::Seq;
        let mut mem = MemBuffer::new(evd::self_adjoint_evd_scratch::<f64>(
            d,
            ComputeEigenvectors::Yes,
            par,
            Default::default(),
        ));
        evd::self_adjoint_evd(
            cov.as_ref(),
            s.as_mut(),
            Some(u.as_mut()),
            par,
            MemStack::new(&mut mem),
            Default::default(),
        )
        .map_err(|e| Error::data("pca", format!("eigen-decomposition failed: {e:?}")))?;

        let total_variance = (0..d).map(|j| cov[(j, j)]).sum();
        // Eigenvalues come in non-decreasing order: the leading axes are the last columns.
        let mut components = Vec::with_capacity(k * d);
        let mut explained_variance = Vec::with_capacity(k);
        for c in (d - k..d).rev() {
            let col = u.col(c);
            let (mut imax, mut vmax) = (0, 0.0f64);
            for i in 0..d {
                if col[i].abs() > vmax {
                    (imax, vmax) = (i, col[i].abs());
                }
            }
            let sign = if col[imax] < 0.0 { -1.0 } else { 1.0 };
            components.extend((0..d).map(|i| sign * col[i]));
            // Round-off can make a zero eigenvalue slightly negative.
            explained_variance.push(s[c].max(0.0));
        }
        let components = Matrix::from_vec(k, d, components)
            .ok_or_else(|| Error::Dimension("pca components".into()))?;
        Ok(Pca {
            mean,
            components,
            explained_variance,
            total_variance,
        })
    }

    /// Number of input features.
    pub fn input_dim(&self) -> usize {
        self.mean.len()
    }
    /// Number of components k.
    pub fn output_dim(&self) -> usize {
        self.components.rows()
    }
    /// The training mean subtracted before projecting.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }
    /// k × d, one unit-norm principal axis per row, leading first.
    pub fn components(&self) -> &Matrix {
        &self.components
    }
    /// Variance along each kept axis (sample covariance eigenvalues), non-increasing.
    pub fn explained_variance(&self) -> &[f64] {
        &self.explained_variance
    }
    /// Fraction of the total variance along each kept axis.
    pub fn explained_variance_ratio(&self) -> Vec<f64> {
        self.explained_variance
            .iter()
            .map(|v| {
                if self.total_variance > 0.0 {
                    v / self.total_variance
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// Projects rows onto the components: (x − μ)·Vₖᵀ.
    pub fn transform(&self, x: &Matrix) -> Result<Matrix> {
        let d = self.input_dim();
        if x.cols() != d {
            return Err(Error::Dimension(format!(
                "PCA fitted on {d} features, data has {}",
                x.cols()
            )));
        }
        let k = self.output_dim();
        let n = x.rows();
        let mut out = Matrix::zeros(n, k);
        // Vₖᵀ as a d × k view of the row-major k × d components.
        let vt = MatRef::from_row_major_slice(self.components.as_slice(), k, d).transpose();
        out.as_mut_slice()
            .par_chunks_mut(BLOCK_ROWS * k)
            .enumerate()
            .for_each(|(b, o)| {
                let start = b * BLOCK_ROWS;
                let rows = o.len() / k;
                let centred = Mat::from_fn(rows, d, |i, j| x.row(start + i)[j] - self.mean[j]);
                let dst = MatMut::from_row_major_slice_mut(o, rows, k);
                matmul(dst, Accum::Replace, &centred, vt, 1.0, Par::Seq);
            });
        Ok(out)
    }

    /// The mean and axes, what [`Pca::transform`] needs (saved with a model so that
    /// `predict` projects new images exactly as the training images were).
    pub fn params(&self) -> PcaParams {
        let d = self.input_dim();
        PcaParams {
            mean: self.mean.clone(),
            components: self
                .components
                .as_slice()
                .chunks(d.max(1))
                .map(<[f64]>::to_vec)
                .collect(),
        }
    }

    /// A PCA from saved [`PcaParams`] (explained variances are not saved: they read 0).
    pub fn from_params(p: &PcaParams) -> Result<Pca> {
        let d = p.mean.len();
        let k = p.components.len();
        if d == 0 || k == 0 || p.components.iter().any(|c| c.len() != d) {
            return Err(Error::Dimension(format!(
                "saved PCA: {k} components for a mean of {d} features, each must have {d} entries"
            )));
        }
        let flat: Vec<f64> = p.components.concat();
        if flat.iter().chain(&p.mean).any(|v| !v.is_finite()) {
            return Err(Error::data("pca", "saved PCA holds a non-finite value"));
        }
        let components = Matrix::from_vec(k, d, flat)
            .ok_or_else(|| Error::Dimension("saved PCA components".into()))?;
        Ok(Pca {
            mean: p.mean.clone(),
            components,
            explained_variance: vec![0.0; k],
            total_variance: 0.0,
        })
    }

    /// Replaces a dataset's features by their projections, named `pc1..pck`.
    pub fn transform_dataset(&self, data: Dataset) -> Result<Dataset> {
        let x = self.transform(data.x())?;
        let names = (1..=self.output_dim()).map(|j| format!("pc{j}")).collect();
        data.with_features(x, names)
    }
}
