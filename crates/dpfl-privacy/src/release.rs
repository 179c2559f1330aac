//! A release described by its parameters, as `dpfl account` / `dpfl calibrate` and the Python
//! package's `account_release` / `calibrate_release` take them: which mechanism, how each
//! step's records are sampled, how many steps. One place checks the parameters and builds the
//! [`PrivacyEvent`], so the command line and Python refuse the same inputs with the same
//! messages and account the same event.
//!
//! Errors name the command-line flag (`--rate`, `--dataset-size`, …) they refuse; callers turn
//! a [`ReleaseError`] into their own configuration error.

mod report;

pub use report::{LOWER_BOUND_SECONDS, ReportError, account_report, calibrate_report};

use crate::event::Sampling;
use crate::{Neighbouring, PrivacyEvent};

/// The noise mechanism of each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseMechanism {
    /// Continuous Gaussian noise.
    Gaussian,
    /// Continuous Laplace noise.
    Laplace,
    /// A scalar integer query at unit sensitivity (noise multiplier = σ on ℤ).
    DiscreteGaussian,
    /// Two-sided geometric noise on a scalar integer query at unit sensitivity.
    DiscreteLaplace,
}

impl ReleaseMechanism {
    /// Names as the command line spells them.
    pub const NAMES: [(&'static str, ReleaseMechanism); 4] = [
        ("gaussian", ReleaseMechanism::Gaussian),
        ("laplace", ReleaseMechanism::Laplace),
        ("discrete-gaussian", ReleaseMechanism::DiscreteGaussian),
        ("discrete-laplace", ReleaseMechanism::DiscreteLaplace),
    ];
}

/// How each step's records are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingKind {
    /// Each record independently with probability `rate`.
    Poisson,
    /// `rate`·n i.i.d. uniform draws per step (`rate` = batch size / n).
    WithReplacement,
    /// A uniform subset of size `rate`·n per step.
    WithoutReplacement,
    /// Every record every step (no amplification).
    None,
}

impl SamplingKind {
    /// Names as the command line spells them.
    pub const NAMES: [(&'static str, SamplingKind); 4] = [
        ("poisson", SamplingKind::Poisson),
        ("with-replacement", SamplingKind::WithReplacement),
        ("without-replacement", SamplingKind::WithoutReplacement),
        ("none", SamplingKind::None),
    ];
}

/// A refused release parameter: the flag and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ReleaseError {
    /// The command-line flag (or Python argument) refused.
    pub field: &'static str,
    /// Why.
    pub reason: String,
}

fn refuse<T>(field: &'static str, reason: impl Into<String>) -> Result<T, ReleaseError> {
    Err(ReleaseError {
        field,
        reason: reason.into(),
    })
}

/// What is released, how often, and how records are sampled.
#[derive(Debug, Clone, PartialEq)]
pub struct Release {
    /// The noise added at each step.
    pub mechanism: ReleaseMechanism,
    /// How each step's records are drawn.
    pub sampling: SamplingKind,
    /// Sampling rate q (Poisson), or batch size / dataset size (fixed-size sampling).
    pub rate: Option<f64>,
    /// Number of steps composed.
    pub steps: u64,
    /// `None`: add/remove for Poisson or no sampling, replace-one for fixed-size sampling.
    pub neighbouring: Option<Neighbouring>,
    /// Records in the (silo's) dataset; needed for fixed-size sampling.
    pub dataset_size: Option<u64>,
}

impl Release {
    /// The neighbouring relation: the one given, or the default of the sampling.
    pub fn neighbouring(&self) -> Neighbouring {
        match (self.neighbouring, self.sampling) {
            (Some(n), _) => n,
            (None, SamplingKind::WithReplacement | SamplingKind::WithoutReplacement) => {
                Neighbouring::ReplaceOne
            }
            (None, _) => Neighbouring::AddRemove,
        }
    }

    /// Checks the steps, rate and dataset size, and returns the sampling of each step.
    pub fn sampling(&self) -> Result<Option<Sampling>, ReleaseError> {
        if self.steps == 0 {
            return refuse("--steps", "must be at least 1");
        }
        let rate = || -> Result<f64, ReleaseError> {
            match self.rate {
                Some(q) if q > 0.0 && q <= 1.0 => Ok(q),
                Some(q) => refuse("--rate", format!("{q} must lie in (0, 1]")),
                None => refuse("--rate", "required with this --sampling"),
            }
        };
        let batch = |q: f64| -> Result<(u64, u64), ReleaseError> {
            let n = match self.dataset_size {
                Some(n) if n > 0 => n,
                Some(_) => return refuse("--dataset-size", "must be at least 1"),
                None => {
                    return refuse(
                        "--dataset-size",
                        "required for with-replacement and without-replacement sampling",
                    );
                }
            };
            let k = q * n as f64;
            let kr = k.round();
            if (k - kr).abs() > 1e-6 * k.max(1.0) || kr < 1.0 {
                return refuse(
                    "--rate",
                    format!("rate x dataset-size = {k} is not a whole batch size >= 1"),
                );
            }
            Ok((n, kr as u64))
        };
        Ok(match self.sampling {
            SamplingKind::None => {
                if self.rate.is_some() {
                    return refuse("--rate", "given, but --sampling is none");
                }
                None
            }
            SamplingKind::Poisson => Some(Sampling::Poisson { rate: rate()? }),
            SamplingKind::WithReplacement => {
                let (population, draws) = batch(rate()?)?;
                Some(Sampling::WithReplacement { population, draws })
            }
            SamplingKind::WithoutReplacement => {
                let (population, size) = batch(rate()?)?;
                Some(Sampling::WithoutReplacement { population, size })
            }
        })
    }

    /// The whole release at noise multiplier `z`: `steps` self-composed (sampled) steps.
    pub fn event(&self, z: f64, sampling: &Option<Sampling>) -> PrivacyEvent {
        let base = match self.mechanism {
            ReleaseMechanism::Gaussian => PrivacyEvent::Gaussian {
                noise_multiplier: z,
            },
            ReleaseMechanism::Laplace => PrivacyEvent::Laplace {
                noise_multiplier: z,
            },
            ReleaseMechanism::DiscreteGaussian => PrivacyEvent::discrete_gaussian_scalar(z),
            ReleaseMechanism::DiscreteLaplace => PrivacyEvent::DiscreteLaplace {
                noise_multiplier: z,
            },
        };
        let step = match sampling {
            Some(s) => base.sampled(s.clone()),
            None => base,
        };
        if self.steps == 1 {
            step
        } else {
            step.repeated(self.steps)
        }
    }
}

/// A noise multiplier given by the user must be finite and positive.
pub fn check_noise_multiplier(z: f64) -> Result<(), ReleaseError> {
    if z.is_finite() && z > 0.0 {
        Ok(())
    } else {
        refuse("--noise-multiplier", format!("{z} must be finite and > 0"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(sampling: SamplingKind, rate: Option<f64>, n: Option<u64>) -> Release {
        Release {
            mechanism: ReleaseMechanism::Gaussian,
            sampling,
            rate,
            steps: 3,
            neighbouring: None,
            dataset_size: n,
        }
    }

    #[test]
    fn fixed_size_batches_are_rate_times_n_and_replace_one() {
        let r = release(SamplingKind::WithoutReplacement, Some(0.25), Some(40));
        assert_eq!(
            r.sampling(),
            Ok(Some(Sampling::WithoutReplacement {
                population: 40,
                size: 10
            }))
        );
        assert_eq!(r.neighbouring(), Neighbouring::ReplaceOne);
        let e = r.event(1.5, &r.sampling().unwrap());
        assert_eq!(
            e,
            PrivacyEvent::Gaussian {
                noise_multiplier: 1.5
            }
            .sampled(Sampling::WithoutReplacement {
                population: 40,
                size: 10
            })
            .repeated(3)
        );
    }

    #[test]
    fn refusals_name_the_flag() {
        let err = |r: Release| r.sampling().unwrap_err().field;
        assert_eq!(err(release(SamplingKind::Poisson, None, None)), "--rate");
        assert_eq!(
            err(release(SamplingKind::Poisson, Some(1.5), None)),
            "--rate"
        );
        assert_eq!(err(release(SamplingKind::None, Some(0.5), None)), "--rate");
        assert_eq!(
            err(release(SamplingKind::WithReplacement, Some(0.5), None)),
            "--dataset-size"
        );
        // 0.3 × 7 = 2.1 records is no batch size.
        let e = release(SamplingKind::WithReplacement, Some(0.3), Some(7))
            .sampling()
            .unwrap_err();
        assert_eq!(e.field, "--rate");
        assert!(e.reason.contains("2.1"), "{}", e.reason);
        let mut r = release(SamplingKind::None, None, None);
        r.steps = 0;
        assert_eq!(err(r), "--steps");
        assert!(check_noise_multiplier(f64::NAN).is_err());
        assert!(check_noise_multiplier(0.0).is_err());
        assert_eq!(check_noise_multiplier(0.7), Ok(()));
    }
}
