//! The shuffle wing's parameter guards (issue 28 item 4; `crate::algo::checked`): each of the
//! six configs is checked once into [`CheckedShuffle`], the only form its planning and its
//! server half (rebuilt from a federation file's spec) take. What needs the federation
//! (one pass: R·K ≤ min n_i; M_min ≤ N; a bounded projection for a preset's η) is checked
//! when planning, with the same [`ParamError`].

use serde::{Deserialize, Serialize};

use super::calibration::SdpCalibration;
use super::pagd_preset::PagdSpec;
use super::pan::PanPrivateSpec;
use super::{PgdSpec, PsgdSpec, SdpAcceleratedSpec, SdpMbSgdSpec};
use crate::algo::checked::{
    BatchRule, CheckedSmoothing, ParamError, ParamGuard, StepRule, at_least_one, non_negative,
    positive, step_size,
};
use crate::algo::gradient::Smoothing;

/// A shuffle-wing algorithm as a plan keeps it (the same `kind`-tagged form as the config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ShuffleAlgorithm {
    /// `sdp-mb-sgd`.
    SdpMbSgd(SdpMbSgdSpec),
    /// `sdp-accelerated-mb-sgd`.
    SdpAcceleratedMbSgd(SdpAcceleratedSpec),
    /// `psgd`.
    Psgd(PsgdSpec),
    /// `pgd`.
    Pgd(PgdSpec),
    /// `pagd`.
    Pagd(PagdSpec),
    /// `pan-private-acsa`.
    PanPrivateAcsa(PanPrivateSpec),
}

/// A shuffle-wing algorithm whose parameters passed its guard.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedShuffle(ShuffleAlgorithm);

impl CheckedShuffle {
    /// The checked spec.
    pub fn algorithm(&self) -> &ShuffleAlgorithm {
        &self.0
    }

    /// The checked spec, owned (what the plan keeps).
    pub fn into_algorithm(self) -> ShuffleAlgorithm {
        self.0
    }
}

impl ParamGuard for ShuffleAlgorithm {
    type Checked = CheckedShuffle;
    fn check(&self) -> Result<CheckedShuffle, ParamError> {
        match self {
            ShuffleAlgorithm::SdpMbSgd(a) => a.check(),
            ShuffleAlgorithm::SdpAcceleratedMbSgd(a) => a.check(),
            ShuffleAlgorithm::Psgd(a) => a.check(),
            ShuffleAlgorithm::Pgd(a) => a.check(),
            ShuffleAlgorithm::Pagd(a) => a.check(),
            ShuffleAlgorithm::PanPrivateAcsa(a) => a.check(),
        }
    }
}

fn min_participants(m: Option<usize>) -> Result<(), ParamError> {
    m.map(|m| at_least_one("min_participants", m)).transpose()?;
    Ok(())
}

impl ParamGuard for SdpMbSgdSpec {
    type Checked = CheckedShuffle;
    fn check(&self) -> Result<CheckedShuffle, ParamError> {
        step_size(self.step_size)?;
        at_least_one("batch_size", self.batch_size)?;
        if let SdpCalibration::Theory { constant } = self.calibration {
            positive("calibration.constant", constant)?;
        }
        Ok(CheckedShuffle(ShuffleAlgorithm::SdpMbSgd(self.clone())))
    }
}

impl ParamGuard for SdpAcceleratedSpec {
    type Checked = CheckedShuffle;
    fn check(&self) -> Result<CheckedShuffle, ParamError> {
        step_size(self.step_size)?;
        BatchRule::check("batch_size", self.batch_size)?;
        if let Some(l) = self.regularization {
            non_negative("regularization", l)?;
        }
        min_participants(self.min_participants)?;
        Ok(CheckedShuffle(ShuffleAlgorithm::SdpAcceleratedMbSgd(
            self.clone(),
        )))
    }
}

impl ParamGuard for PsgdSpec {
    type Checked = CheckedShuffle;
    fn check(&self) -> Result<CheckedShuffle, ParamError> {
        StepRule::check(self.step_size)?;
        BatchRule::check("batch_size", self.batch_size)?;
        min_participants(self.min_participants)?;
        Ok(CheckedShuffle(ShuffleAlgorithm::Psgd(self.clone())))
    }
}

impl ParamGuard for PgdSpec {
    type Checked = CheckedShuffle;
    fn check(&self) -> Result<CheckedShuffle, ParamError> {
        StepRule::check(self.step_size)?;
        Ok(CheckedShuffle(ShuffleAlgorithm::Pgd(self.clone())))
    }
}

/// What PAGD and pan-private AC-SA share (Cheu et al. Thm 4.3 / C.3's AC-SA tuning): K, β or
/// Moreau smoothing, D, λ and the number of phases.
fn acsa_tuning(
    batch_size: Option<usize>,
    smoothness: Option<f64>,
    diameter: Option<f64>,
    smoothing: Option<Smoothing>,
    strong_convexity: Option<f64>,
    phases: Option<usize>,
) -> Result<(), ParamError> {
    BatchRule::check("batch_size", batch_size)?;
    for (name, v) in [
        ("smoothness", smoothness),
        ("diameter", diameter),
        ("strong_convexity", strong_convexity),
    ] {
        v.map(|v| positive(name, v)).transpose()?;
    }
    if CheckedSmoothing::check(smoothing)?.is_none() && smoothness.is_none() {
        return Err(ParamError::missing(
            "smoothness",
            "the AC-SA schedule needs beta (smoothness) or Moreau smoothing (smoothing = \"theory\")",
        ));
    }
    // Refused, not silently one phase (issue 31).
    phases.map(|k| at_least_one("phases", k)).transpose()?;
    Ok(())
}

impl ParamGuard for PagdSpec {
    type Checked = CheckedShuffle;
    fn check(&self) -> Result<CheckedShuffle, ParamError> {
        acsa_tuning(
            self.batch_size,
            self.smoothness,
            self.diameter,
            self.smoothing,
            self.strong_convexity,
            self.phases,
        )?;
        min_participants(self.min_participants)?;
        if let Some(r) = &self.robust {
            let g = r.honest_fraction;
            if !(g.is_finite() && (1.0 / 3.0..=1.0).contains(&g)) {
                return Err(ParamError::OutOfRange {
                    field: "robust.honest_fraction".into(),
                    range: "[1/3, 1] (Cheu et al. Cor. A.9)",
                    value: g,
                });
            }
        }
        Ok(CheckedShuffle(ShuffleAlgorithm::Pagd(self.clone())))
    }
}

impl ParamGuard for PanPrivateSpec {
    type Checked = CheckedShuffle;
    fn check(&self) -> Result<CheckedShuffle, ParamError> {
        acsa_tuning(
            self.batch_size,
            self.smoothness,
            self.diameter,
            self.smoothing,
            self.strong_convexity,
            self.phases,
        )?;
        Ok(CheckedShuffle(ShuffleAlgorithm::PanPrivateAcsa(
            self.clone(),
        )))
    }
}
