//! Data: loaders, preprocessing and partitioners into silos.
//!
//! A [`Dataset`] is a dense feature matrix with one target per row. It deliberately does not
//! implement `Clone`: the simulator moves each silo's data into that silo, and nothing on the
//! server side can obtain a copy (see [`crate::algo`] for the trust boundary).

pub(crate) mod bundled;
pub mod csv;
mod csv_table;
pub mod idx;
pub(crate) mod inspect;
mod io;
pub mod libsvm;
pub mod limits;
pub mod partition;
pub mod pca;
pub mod preprocess;
pub mod registry;
pub mod shards;
pub mod silos;
pub mod synthetic;

pub use inspect::{describe_dataset, describe_named_silos, describe_silos};

use crate::linalg::Matrix;

/// What the target column holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// Class indices 0..names.len(), stored as f64 in `y`.
    Classes {
        /// The class names; class i is named `names[i]`.
        names: Vec<String>,
    },
    /// A real-valued target.
    Real,
}

impl Target {
    /// C, the number of classes; `None` for a real target.
    pub fn num_classes(&self) -> Option<usize> {
        match self {
            Target::Classes { names } => Some(names.len()),
            Target::Real => None,
        }
    }
}

/// Rows of features with their targets.
#[derive(Debug, PartialEq)]
pub struct Dataset {
    x: Matrix,
    y: Vec<f64>,
    target: Target,
    feature_names: Vec<String>,
}

impl Dataset {
    /// Checks that shapes agree, every value is finite and class labels are in range.
    pub fn new(
        x: Matrix,
        y: Vec<f64>,
        target: Target,
        feature_names: Vec<String>,
    ) -> crate::Result<Self> {
        if x.rows() != y.len() {
            return Err(crate::Error::Dimension(format!(
                "{} feature rows but {} targets",
                x.rows(),
                y.len()
            )));
        }
        if feature_names.len() != x.cols() {
            return Err(crate::Error::Dimension(format!(
                "{} feature names for {} columns",
                feature_names.len(),
                x.cols()
            )));
        }
        if let Some(i) = x.as_slice().iter().position(|v| !v.is_finite()) {
            return Err(crate::Error::data(
                "features",
                format!(
                    "non-finite value at row {}, column {}",
                    i / x.cols().max(1),
                    i % x.cols().max(1)
                ),
            ));
        }
        if let Some(i) = y.iter().position(|v| !v.is_finite()) {
            return Err(crate::Error::data(
                "target",
                format!("non-finite value at row {i}"),
            ));
        }
        if let Some(c) = target.num_classes()
            && let Some(i) = y
                .iter()
                .position(|&v| v < 0.0 || v >= c as f64 || v.fract() != 0.0)
        {
            return Err(crate::Error::data(
                "target",
                format!("label {} at row {i} is not a class index in 0..{c}", y[i]),
            ));
        }
        Ok(Dataset {
            x,
            y,
            target,
            feature_names,
        })
    }
    /// n, the number of records.
    pub fn len(&self) -> usize {
        self.y.len()
    }
    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }
    /// d, the number of features (columns of X).
    pub fn num_features(&self) -> usize {
        self.x.cols()
    }
    /// The feature matrix X (n × d, row-major).
    pub fn x(&self) -> &Matrix {
        &self.x
    }
    /// The targets y: class indices 0..C as f64, or real values.
    pub fn y(&self) -> &[f64] {
        &self.y
    }
    /// Record i: its feature row and its target.
    pub fn row(&self, i: usize) -> (&[f64], f64) {
        (self.x.row(i), self.y[i])
    }
    /// What the targets hold (classes with their names, or reals).
    pub fn target(&self) -> &Target {
        &self.target
    }
    /// The feature columns' names (`f1..fd` where the source has none).
    pub fn feature_names(&self) -> &[String] {
        &self.feature_names
    }
    /// A new dataset made of the rows at `idx` (in that order, repeats allowed).
    pub fn subset(&self, idx: &[usize]) -> Dataset {
        Dataset {
            x: self.x.select_rows(idx),
            y: idx.iter().map(|&i| self.y[i]).collect(),
            target: self.target.clone(),
            feature_names: self.feature_names.clone(),
        }
    }
    /// Appends a constant-1 column (the intercept), named `intercept`.
    pub fn with_intercept(self) -> Dataset {
        let (n, p) = (self.x.rows(), self.x.cols());
        let mut data = Vec::with_capacity(n * (p + 1));
        for i in 0..n {
            data.extend_from_slice(self.x.row(i));
            data.push(1.0);
        }
        let mut names = self.feature_names;
        names.push("intercept".into());
        Dataset {
            x: Matrix::from_vec(n, p + 1, data).expect("n·(p+1) values"),
            y: self.y,
            target: self.target,
            feature_names: names,
        }
    }
    /// Largest row norm max‖x‖₂ (used for data-dependent Lipschitz constants, as the paper's
    /// experiments do; note this is itself not a private statistic).
    pub fn max_row_norm(&self) -> f64 {
        (0..self.len())
            .map(|i| crate::linalg::norm2(self.x.row(i)))
            .fold(0.0, f64::max)
    }
    /// Mutable access to the feature matrix for preprocessing (standardisation, PCA).
    pub fn x_mut(&mut self) -> &mut Matrix {
        &mut self.x
    }
    /// Replaces the features (e.g. after a projection), keeping targets.
    pub fn with_features(self, x: Matrix, feature_names: Vec<String>) -> crate::Result<Dataset> {
        Dataset::new(x, self.y, self.target, feature_names)
    }
    /// Rows per class, in class order; `None` for a real target.
    pub fn class_counts(&self) -> Option<Vec<usize>> {
        let c = self.target.num_classes()?;
        let mut counts = vec![0usize; c];
        // Dataset::new guarantees every label is an integer in 0..c.
        self.y.iter().for_each(|&v| counts[v as usize] += 1);
        Some(counts)
    }
    /// The rows of all `parts`, in order (e.g. pooled training data for the non-private
    /// reference solution). The parts must share target and feature names.
    pub fn concat(parts: &[&Dataset]) -> crate::Result<Dataset> {
        let first = parts
            .first()
            .ok_or_else(|| crate::Error::data("concat", "no datasets to concatenate"))?;
        if let Some(d) = parts
            .iter()
            .find(|d| d.target != first.target || d.feature_names != first.feature_names)
        {
            return Err(crate::Error::Dimension(format!(
                "cannot concatenate datasets with features {:?} / target {:?} and {:?} / {:?}",
                first.feature_names, first.target, d.feature_names, d.target
            )));
        }
        let n: usize = parts.iter().map(|d| d.len()).sum();
        let p = first.num_features();
        let mut x = Vec::with_capacity(n * p);
        let mut y = Vec::with_capacity(n);
        for d in parts {
            x.extend_from_slice(d.x.as_slice());
            y.extend_from_slice(&d.y);
        }
        Ok(Dataset {
            x: Matrix::from_vec(n, p, x).ok_or_else(|| crate::Error::Dimension("concat".into()))?,
            y,
            target: first.target.clone(),
            feature_names: first.feature_names.clone(),
        })
    }
    /// Mutable targets (e.g. relabelling digits to even/odd).
    pub fn map_target(self, target: Target, f: impl Fn(f64) -> f64) -> crate::Result<Dataset> {
        let y = self.y.iter().map(|&v| f(v)).collect();
        Dataset::new(self.x, y, target, self.feature_names)
    }
}

/// One silo's data after splitting.
#[derive(Debug)]
pub struct SiloData {
    /// The silo's training records (what its half trains on and the ledger protects).
    pub train: Dataset,
    /// The silo's held-out test records (for the reported test metric only).
    pub test: Dataset,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dataset_checks_shapes_and_labels() {
        let x = Matrix::from_vec(2, 1, vec![1.0, 2.0]).unwrap();
        let names = vec!["a".to_string()];
        let classes = Target::Classes {
            names: vec!["n".into(), "p".into()],
        };
        assert!(Dataset::new(x.clone(), vec![0.0, 1.0], classes.clone(), names.clone()).is_ok());
        assert!(Dataset::new(x.clone(), vec![0.0, 2.0], classes.clone(), names.clone()).is_err());
        assert!(Dataset::new(x.clone(), vec![0.0], classes.clone(), names.clone()).is_err());
        assert!(Dataset::new(x.clone(), vec![0.0, f64::NAN], Target::Real, names.clone()).is_err());
        let bad = Matrix::from_vec(2, 1, vec![1.0, f64::INFINITY]).unwrap();
        assert!(Dataset::new(bad, vec![0.0, 1.0], Target::Real, names.clone()).is_err());
        let d = Dataset::new(x, vec![0.0, 1.0], classes, names)
            .unwrap()
            .with_intercept();
        assert_eq!(d.row(1), (&[2.0, 1.0][..], 1.0));
        assert!((d.max_row_norm() - 5f64.sqrt()).abs() < 1e-15);
    }
}
