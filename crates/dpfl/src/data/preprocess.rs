//! Standardisation of numeric columns to mean 0 and variance 1 (Lowy & Razaviyayn App. I.2:
//! age and BMI of the insurance set; App. I.3: the continuous obesity features).
//!
//! The statistics are fitted on training rows only and then applied, unchanged, to the test
//! rows, so no test information leaks into the features. Fitting on the pooled training rows
//! of all silos (what [`standardize_silos`] does) matches the paper's centralised
//! preprocessing; like the paper's, it is **not** differentially private (the paper lists
//! preprocessing among its experiments' limitations, App. I.1).
//!
//! The variance is the population variance (divide by n), as scikit-learn's
//! `StandardScaler`. A constant column gets scale 1 (it is only centred), again as
//! scikit-learn does, rather than a division by zero.

use serde::{Deserialize, Serialize};

use super::{Dataset, SiloData};
use crate::{Error, Result};

/// Per-column mean and scale, fitted on training data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Standardizer {
    names: Vec<String>,
    columns: Vec<usize>,
    mean: Vec<f64>,
    scale: Vec<f64>,
}

fn column_index(d: &Dataset, name: &str) -> Result<usize> {
    d.feature_names()
        .iter()
        .position(|f| f == name)
        .ok_or_else(|| {
            Error::config(
                "standardize",
                format!(
                    "no feature column `{name}` (features: {})",
                    d.feature_names().join(", ")
                ),
            )
        })
}

impl Standardizer {
    /// Fits on the pooled rows of `train` (all must have the same feature names).
    pub fn fit(train: &[&Dataset], columns: &[String]) -> Result<Self> {
        let first = train
            .first()
            .ok_or_else(|| Error::data("standardize", "no training data to fit on"))?;
        if let Some(d) = train
            .iter()
            .find(|d| d.feature_names() != first.feature_names())
        {
            return Err(Error::Dimension(format!(
                "standardizer inputs have different features: {:?} vs {:?}",
                first.feature_names(),
                d.feature_names()
            )));
        }
        let idx = columns
            .iter()
            .map(|c| column_index(first, c))
            .collect::<Result<Vec<_>>>()?;
        let n: usize = train.iter().map(|d| d.len()).sum();
        if n == 0 {
            return Err(Error::data("standardize", "no training rows to fit on"));
        }
        let mut mean = vec![0.0; idx.len()];
        for d in train {
            for i in 0..d.len() {
                let row = d.x().row(i);
                for (m, &j) in mean.iter_mut().zip(&idx) {
                    *m += row[j];
                }
            }
        }
        mean.iter_mut().for_each(|m| *m /= n as f64);
        // Two passes: the centred sum of squares is accurate even for large means.
        let mut var = vec![0.0; idx.len()];
        for d in train {
            for i in 0..d.len() {
                let row = d.x().row(i);
                for ((v, &j), m) in var.iter_mut().zip(&idx).zip(&mean) {
                    *v += (row[j] - m) * (row[j] - m);
                }
            }
        }
        let scale = var
            .iter()
            .map(|v| {
                let s = (v / n as f64).sqrt();
                if s > 0.0 { s } else { 1.0 }
            })
            .collect();
        Ok(Standardizer {
            names: columns.to_vec(),
            columns: idx,
            mean,
            scale,
        })
    }

    /// Public statistics (`scaling` in a CSV spec) for `columns` of `d`'s layout, in order:
    /// `(mean, scale)` each, the mean finite and the scale finite and > 0.
    pub fn fixed(d: &Dataset, columns: &[String], stats: &[(f64, f64)]) -> Result<Self> {
        if let Some((name, (m, s))) = columns
            .iter()
            .zip(stats)
            .find(|(_, (m, s))| !(m.is_finite() && s.is_finite() && *s > 0.0))
        {
            return Err(Error::config(
                format!("scaling.{name}"),
                format!("needs a finite mean and a finite scale > 0, got mean {m}, scale {s}"),
            ));
        }
        Ok(Standardizer {
            names: columns.to_vec(),
            columns: columns
                .iter()
                .map(|c| column_index(d, c))
                .collect::<Result<_>>()?,
            mean: stats.iter().map(|s| s.0).collect(),
            scale: stats.iter().map(|s| s.1).collect(),
        })
    }

    /// x ← (x − mean)/scale on the fitted columns.
    pub fn apply(&self, d: &mut Dataset) -> Result<()> {
        for (name, &j) in self.names.iter().zip(&self.columns) {
            if d.feature_names().get(j) != Some(name) {
                return Err(Error::Dimension(format!(
                    "standardizer fitted with column `{name}` at position {j}, but the data has {:?} there",
                    d.feature_names().get(j)
                )));
            }
        }
        let x = d.x_mut();
        for i in 0..x.rows() {
            let row = x.row_mut(i);
            for ((&j, m), s) in self.columns.iter().zip(&self.mean).zip(&self.scale) {
                row[j] = (row[j] - m) / s;
            }
        }
        Ok(())
    }

    /// The standardised columns, in order.
    pub fn columns(&self) -> &[String] {
        &self.names
    }
    /// Each column's training mean.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }
    /// Each column's training standard deviation (1 where it is 0, so constant columns pass).
    pub fn scale(&self) -> &[f64] {
        &self.scale
    }
}

/// Fits on the pooled training rows of all silos (or takes the public `fixed` statistics, one
/// `(mean, scale)` per column) and applies to every train and test part.
pub fn standardize_silos(
    silos: &mut [SiloData],
    columns: &[String],
    fixed: Option<&[(f64, f64)]>,
) -> Result<Standardizer> {
    let s = match (fixed, silos.first()) {
        (Some(stats), Some(first)) => Standardizer::fixed(&first.train, columns, stats)?,
        _ => {
            let train: Vec<&Dataset> = silos.iter().map(|s| &s.train).collect();
            Standardizer::fit(&train, columns)?
        }
    };
    for silo in silos.iter_mut() {
        s.apply(&mut silo.train)?;
        s.apply(&mut silo.test)?;
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Target;
    use crate::linalg::Matrix;

    fn ds(x: Vec<f64>) -> Dataset {
        let n = x.len() / 2;
        Dataset::new(
            Matrix::from_vec(n, 2, x).unwrap(),
            vec![0.0; n],
            Target::Real,
            vec!["a".into(), "b".into()],
        )
        .unwrap()
    }

    #[test]
    fn train_statistics_are_applied_to_test() {
        // Column a on train: 1, 3, 5, 7 → mean 4, population variance (9+1+1+9)/4 = 5.
        let train = ds(vec![1., 9., 3., 9., 5., 9., 7., 9.]);
        let s = Standardizer::fit(&[&train], &["a".into(), "b".into()]).unwrap();
        assert_eq!(s.mean(), &[4.0, 9.0]);
        assert!((s.scale()[0] - 5f64.sqrt()).abs() < 1e-15);
        assert_eq!(s.scale()[1], 1.0, "constant column is only centred");
        let mut test = ds(vec![4.0 + 5f64.sqrt(), 10.0]);
        s.apply(&mut test).unwrap();
        assert!((test.x().row(0)[0] - 1.0).abs() < 1e-15);
        assert_eq!(test.x().row(0)[1], 1.0);
        let mut tr = train;
        s.apply(&mut tr).unwrap();
        let m: f64 = (0..4).map(|i| tr.x().row(i)[0]).sum::<f64>() / 4.0;
        let v: f64 = (0..4).map(|i| tr.x().row(i)[0].powi(2)).sum::<f64>() / 4.0;
        assert!(m.abs() < 1e-15 && (v - 1.0).abs() < 1e-12);
        assert!(
            Standardizer::fit(&[&tr], &["zz".into()])
                .unwrap_err()
                .to_string()
                .contains("`zz`")
        );
    }
}
