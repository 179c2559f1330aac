//! Synthetic federated data for tests, benchmarks and examples: each silo draws features
//! from a Gaussian whose mean is shifted per silo (heterogeneity), labels from a fixed
//! ground-truth model. All draws come from a [`DpRng`] on the `Data` purpose.

use serde::{Deserialize, Serialize};

use dpfl_privacy::DpRng;
use dpfl_privacy::sampler;

use super::{Dataset, SiloData, Target};
use crate::linalg::{Matrix, dot};

/// What kind of target to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SyntheticTask {
    /// Labels {0,1} from a logistic model.
    Binary,
    /// Real targets from a linear model plus N(0, 0.1²) noise.
    Regression,
    /// `classes` classes from a softmax model.
    Multiclass {
        /// C ≥ 2.
        classes: usize,
    },
}

/// Generates `silos` silos of `train + test` rows with `features` features.
/// `shift` scales the per-silo mean offset (0 = i.i.d. silos).
pub fn generate(
    task: SyntheticTask,
    silos: usize,
    train: usize,
    test: usize,
    features: usize,
    shift: f64,
    rng: &mut DpRng,
) -> crate::Result<Vec<SiloData>> {
    if silos == 0 || train == 0 || features == 0 {
        return Err(crate::Error::config(
            "data",
            "synthetic data needs silos, train rows and features > 0",
        ));
    }
    super::limits::check_features("data.source.features", features)?;
    let rows = train
        .checked_add(test)
        .and_then(|r| r.checked_mul(silos))
        .unwrap_or(usize::MAX);
    super::limits::check_dense("data.source (synthetic)", rows, features)?;
    let classes = match task {
        SyntheticTask::Multiclass { classes } if classes < 2 => {
            return Err(crate::Error::config(
                "data.classes",
                "needs at least 2 classes",
            ));
        }
        SyntheticTask::Multiclass { classes } => classes,
        _ => 1,
    };
    // Ground truth with ‖w*‖ ≈ 2 per class.
    let truth: Vec<f64> = gaussians(rng, features * classes)?
        .into_iter()
        .map(|v| v * 2.0 / (features as f64).sqrt())
        .collect();
    let target = match task {
        SyntheticTask::Binary => Target::Classes {
            names: vec!["0".into(), "1".into()],
        },
        SyntheticTask::Regression => Target::Real,
        SyntheticTask::Multiclass { classes } => Target::Classes {
            names: (0..classes).map(|c| c.to_string()).collect(),
        },
    };
    let names: Vec<String> = (0..features).map(|j| format!("x{j}")).collect();
    let mut out = Vec::with_capacity(silos);
    for _ in 0..silos {
        let offset: Vec<f64> = gaussians(rng, features)?
            .into_iter()
            .map(|v| v * shift)
            .collect();
        let mut make = |rows: usize| -> crate::Result<Dataset> {
            let mut x = gaussians(rng, rows * features)?;
            for r in 0..rows {
                for j in 0..features {
                    x[r * features + j] += offset[j];
                }
            }
            let u = uniforms(rng, rows)?;
            let e = gaussians(rng, rows)?;
            let y: Vec<f64> = (0..rows)
                .map(|r| {
                    let row = &x[r * features..(r + 1) * features];
                    match task {
                        SyntheticTask::Binary => {
                            let p = 1.0 / (1.0 + (-dot(&truth, row)).exp());
                            f64::from(u[r] < p)
                        }
                        SyntheticTask::Regression => dot(&truth, row) + 0.1 * e[r],
                        SyntheticTask::Multiclass { classes } => {
                            let z: Vec<f64> = (0..classes)
                                .map(|c| {
                                    (0..features).map(|j| row[j] * truth[j * classes + c]).sum()
                                })
                                .collect();
                            let m = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                            let w: Vec<f64> = z.iter().map(|v| (v - m).exp()).collect();
                            let s: f64 = w.iter().sum();
                            let mut acc = 0.0;
                            let mut label = classes - 1;
                            for (c, wc) in w.iter().enumerate() {
                                acc += wc / s;
                                if u[r] < acc {
                                    label = c;
                                    break;
                                }
                            }
                            label as f64
                        }
                    }
                })
                .collect();
            let m = Matrix::from_vec(rows, features, x)
                .ok_or_else(|| crate::Error::Dimension("synthetic rows".into()))?;
            Dataset::new(m, y, target.clone(), names.clone())
        };
        let train_d = make(train)?;
        let test_d = make(test)?;
        out.push(SiloData {
            train: train_d,
            test: test_d,
        });
    }
    Ok(out)
}

fn gaussians(rng: &mut DpRng, n: usize) -> crate::Result<Vec<f64>> {
    Ok(sampler::standard_normals(rng, n))
}

fn uniforms(rng: &mut DpRng, n: usize) -> crate::Result<Vec<f64>> {
    Ok(sampler::uniforms(rng, n))
}
