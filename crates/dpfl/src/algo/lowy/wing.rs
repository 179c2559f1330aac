//! The Lowy & Razaviyayn wing's configs as [`Wing`]s (issue 28 item 1): `mb-sgd`
//! (Algorithm 2), `local-sgd` (App. I's baseline), `accelerated-mb-sgd` (Algorithm 1) and
//! `noisy-mb-sgd` (Algorithm 7). Each silo adds its own Gaussian (ISRL-DP, Def. 2.2) when a
//! calibration is set; none of them needs anything of the runner beyond the round core.

use serde::{Deserialize, Serialize};

use dpfl_privacy::sampler::RecordSampling;

use super::acsa::{AcceleratedSpec, AcsaPlan, AcsaSampling};
use super::calibration::{Calibration, NoiseRule};
pub use super::checked_params::{
    AcceleratedParams, GeneralParams, LocalSgdParams, MbSgdParams, NoisyMbSgdParams,
};
use super::local_sgd::LocalSgdPlan;
use super::mbsgd::{MbSgdPlan, NoisyMbSgdSpec};
use crate::algo::checked::{BatchRule, ParamError, ParamGuard, non_negative, step_size};
use crate::algo::context::BuildContext;
use crate::algo::server::OutputRule;
use crate::algo::wing::{AuditView, Knobs, NoiseMultiplier, Planned, Privacy, Requirements, Wing};

/// Minibatch SGD (Lowy & Razaviyayn Algorithm 2); private when `calibration` is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MbSgdSpec {
    /// η > 0.
    pub step_size: f64,
    /// The noise rule; `None` for the non-private algorithm.
    #[serde(default)]
    pub calibration: Option<Calibration>,
    /// K; default: the calibration's rule (private) or required (non-private).
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// Which iterate the server outputs.
    #[serde(default)]
    pub output: OutputRule,
    /// How each silo draws its K records per round: `with-replacement` (the paper's,
    /// default), `without-replacement` or `poisson` (rate K/n).
    #[serde(default)]
    pub sampling: RecordSampling,
}

/// Local SGD / FedAvg: K local single-sample steps, server averages models; private
/// (the paper's ISRL-DP Local SGD baseline, App. I) when `private = true` or a
/// `calibration` is given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LocalSgdSpec {
    /// η > 0 of each local step.
    pub step_size: f64,
    /// Private with the paper's App. I noise (`experiment` rule) unless `calibration` says
    /// otherwise.
    #[serde(default)]
    pub private: bool,
    /// The noise rule of a private run: `experiment` (App. I's per-step σ, the default
    /// with `private = true`) or `accountant` (the smallest σ certified for the R·K
    /// sampled steps). Local SGD has no `theory` rule in the paper.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
    /// K local steps; default as for MB-SGD's experiment rule.
    #[serde(default)]
    pub local_steps: Option<usize>,
    /// Which iterate (average of the silos' models) the server outputs.
    #[serde(default)]
    pub output: OutputRule,
}

impl LocalSgdSpec {
    /// The noise rule: `private = true` alone keeps its meaning (App. I's rule); a
    /// calibration makes the run private whatever `private` says (never less noise).
    fn rule(&self) -> Option<Calibration> {
        match (self.calibration, self.private) {
            (Some(c), _) => Some(c),
            (None, true) => Some(Calibration::Experiment),
            (None, false) => None,
        }
    }
}

impl ParamGuard for MbSgdSpec {
    type Checked = MbSgdParams;
    fn check(&self) -> Result<MbSgdParams, ParamError> {
        Ok(MbSgdParams {
            step: step_size(self.step_size)?,
            calibration: self.calibration,
            batch: BatchRule::check("batch_size", self.batch_size)?,
            output: self.output,
            sampling: self.sampling,
        })
    }
}

impl ParamGuard for LocalSgdSpec {
    type Checked = LocalSgdParams;
    fn check(&self) -> Result<LocalSgdParams, ParamError> {
        let rule = self.rule();
        if rule == Some(Calibration::Theory) {
            return Err(ParamError::refused(
                "calibration",
                "Local SGD has no theory rule (the paper gives it only App. I's noise); use \"experiment\" or \"accountant\"",
            ));
        }
        Ok(LocalSgdParams {
            step: step_size(self.step_size)?,
            rule,
            local_steps: BatchRule::check("local_steps", self.local_steps)?,
            output: self.output,
        })
    }
}

impl ParamGuard for NoisyMbSgdSpec {
    type Checked = NoisyMbSgdParams;
    fn check(&self) -> Result<NoisyMbSgdParams, ParamError> {
        let theory = GeneralParams::check(
            self.params,
            self.step_size,
            self.batch_size,
            self.smoothing,
            self.weights.as_deref(),
            &self.constants,
        )?;
        Ok(NoisyMbSgdParams {
            calibration: self.calibration,
            theory,
            output: self.output,
            sampling: self.sampling,
        })
    }
}

impl ParamGuard for AcceleratedSpec {
    type Checked = AcceleratedParams;
    fn check(&self) -> Result<AcceleratedParams, ParamError> {
        let noise = match (self.sampling, self.calibration) {
            (_, None) => None,
            (AcsaSampling::OnePass, Some(Calibration::Theory)) => Some(NoiseRule::OnePass),
            (AcsaSampling::OnePass, Some(Calibration::Experiment | Calibration::Accountant)) => {
                return Err(ParamError::refused(
                    "calibration",
                    "the one-pass algorithm has only Thm E.1's calibration; use \"theory\"",
                ));
            }
            (_, Some(c)) => Some(NoiseRule::from(c)),
        };
        let theory = GeneralParams::check(
            self.params,
            self.step_size,
            self.batch_size,
            self.smoothing,
            self.weights.as_deref(),
            &self.constants,
        )?;
        Ok(AcceleratedParams {
            sampling: self.sampling,
            noise,
            theory,
            regularization: self
                .regularization
                .map(|l| non_negative("regularization", l))
                .transpose()?,
        })
    }
}

/// Private exactly when a noise rule is set: each silo adds its own Gaussian.
fn silo_noise(calibration: Option<Calibration>) -> Privacy {
    match calibration {
        Some(_) => Privacy::SiloNoise,
        None => Privacy::NonPrivate,
    }
}

impl Wing for MbSgdSpec {
    type Plan = MbSgdPlan;

    fn label(&self) -> String {
        match self.calibration {
            Some(_) => "ISRL-DP MB-SGD".into(),
            None => "MB-SGD".into(),
        }
    }
    fn privacy(&self) -> Privacy {
        silo_noise(self.calibration)
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        NoiseMultiplier::Accepts
    }
    fn knobs(&self) -> Knobs {
        Knobs {
            step_size: Some(self.step_size),
            app_i_batch_floor: self.calibration == Some(Calibration::Experiment),
        }
    }
    fn tuned(&self, step_size: f64, batch: Option<usize>) -> Self {
        MbSgdSpec {
            step_size,
            batch_size: batch.or(self.batch_size),
            ..self.clone()
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::PLAIN
    }
    fn extended_metrics(&self) -> bool {
        false
    }
    fn audit_view(&self, _: &MbSgdPlan) -> AuditView {
        AuditView::Gradient { all_silos: false }
    }
    fn plan(params: &MbSgdParams, ctx: &BuildContext) -> crate::Result<Planned<MbSgdPlan>> {
        let (p, c) = super::mbsgd::plan(ctx, params)?;
        Ok(Planned::new(p, c))
    }
}

impl Wing for LocalSgdSpec {
    type Plan = LocalSgdPlan;

    fn label(&self) -> String {
        match self.rule() {
            Some(_) => "ISRL-DP Local SGD".into(),
            None => "Local SGD".into(),
        }
    }
    fn privacy(&self) -> Privacy {
        silo_noise(self.rule())
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        NoiseMultiplier::Accepts
    }
    fn knobs(&self) -> Knobs {
        Knobs {
            step_size: Some(self.step_size),
            app_i_batch_floor: false,
        }
    }
    fn tuned(&self, step_size: f64, batch: Option<usize>) -> Self {
        LocalSgdSpec {
            step_size,
            local_steps: batch.or(self.local_steps),
            ..self.clone()
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::PLAIN
    }
    fn extended_metrics(&self) -> bool {
        false
    }
    fn audit_view(&self, _: &LocalSgdPlan) -> AuditView {
        AuditView::Model
    }
    fn plan(params: &LocalSgdParams, ctx: &BuildContext) -> crate::Result<Planned<LocalSgdPlan>> {
        let (p, c) = super::local_sgd::plan(ctx, params)?;
        Ok(Planned::new(p, c))
    }
}

impl Wing for AcceleratedSpec {
    type Plan = AcsaPlan;

    fn label(&self) -> String {
        AcceleratedSpec::label(self)
    }
    fn privacy(&self) -> Privacy {
        silo_noise(self.calibration)
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        NoiseMultiplier::Accepts
    }
    fn knobs(&self) -> Knobs {
        Knobs {
            step_size: self.step_size,
            app_i_batch_floor: self.calibration == Some(Calibration::Experiment),
        }
    }
    fn tuned(&self, step_size: f64, batch: Option<usize>) -> Self {
        AcceleratedSpec {
            step_size: Some(step_size),
            batch_size: batch.or(self.batch_size),
            ..self.clone()
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::PLAIN
    }
    fn extended_metrics(&self) -> bool {
        false
    }
    fn audit_view(&self, _: &AcsaPlan) -> AuditView {
        AuditView::Gradient { all_silos: false }
    }
    fn plan(params: &AcceleratedParams, ctx: &BuildContext) -> crate::Result<Planned<AcsaPlan>> {
        let (p, c) = super::acsa::plan(ctx, params)?;
        Ok(Planned::new(p, c))
    }
}

impl Wing for NoisyMbSgdSpec {
    type Plan = MbSgdPlan;

    fn label(&self) -> String {
        match self.calibration {
            Some(_) => "ISRL-DP MB-SGD (Alg. 7)".into(),
            None => "MB-SGD (Alg. 7)".into(),
        }
    }
    fn privacy(&self) -> Privacy {
        silo_noise(self.calibration)
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        NoiseMultiplier::Accepts
    }
    fn knobs(&self) -> Knobs {
        Knobs {
            step_size: self.step_size,
            app_i_batch_floor: false,
        }
    }
    // K_i is per silo (a common K_i/n_i): a grid turns only η.
    fn tuned(&self, step_size: f64, _batch: Option<usize>) -> Self {
        NoisyMbSgdSpec {
            step_size: Some(step_size),
            ..self.clone()
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::PLAIN
    }
    fn extended_metrics(&self) -> bool {
        false
    }
    fn audit_view(&self, _: &MbSgdPlan) -> AuditView {
        AuditView::Gradient { all_silos: false }
    }
    fn plan(params: &NoisyMbSgdParams, ctx: &BuildContext) -> crate::Result<Planned<MbSgdPlan>> {
        let (p, c) = super::mbsgd::plan_general(ctx, params)?;
        Ok(Planned::new(p, c))
    }
}
