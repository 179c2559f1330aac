//! The DP-NormFedAvg family (Das et al.) as a [`Wing`] (issue 28 item 1): private variants add
//! their discrete noise inside the silo (Theorem 1's truncated discrete Laplace, or the
//! Binomial baseline), so they take no Gaussian multiplier.

use super::config::{CheckedNormFedAvg, NormFedAvgSpec};
use super::plan::NormFedAvgPlan;
use crate::algo::context::BuildContext;
use crate::algo::wing::{AuditView, Knobs, NoiseMultiplier, Planned, Privacy, Requirements, Wing};

impl Wing for NormFedAvgSpec {
    type Plan = NormFedAvgPlan;

    fn label(&self) -> String {
        NormFedAvgSpec::label(self)
    }
    fn privacy(&self) -> Privacy {
        match self.variant.is_private() {
            true => Privacy::SiloNoise,
            false => Privacy::NonPrivate,
        }
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        NoiseMultiplier::Refuses(
            "its noise is the truncated discrete Laplace (or Binomial) calibrated by Theorem \
             1, not a Gaussian multiplier",
        )
    }
    fn knobs(&self) -> Knobs {
        Knobs {
            step_size: Some(self.step_size),
            app_i_batch_floor: false,
        }
    }
    // The local steps and batch are the paper's per-experiment constants: a grid turns η₀.
    fn tuned(&self, step_size: f64, _batch: Option<usize>) -> Self {
        NormFedAvgSpec {
            step_size,
            ..self.clone()
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::PLAIN
    }
    fn extended_metrics(&self) -> bool {
        false
    }
    fn audit_view(&self, _: &NormFedAvgPlan) -> AuditView {
        AuditView::Gradient { all_silos: false }
    }
    fn plan(
        params: &CheckedNormFedAvg,
        ctx: &BuildContext,
    ) -> crate::Result<Planned<NormFedAvgPlan>> {
        let (p, c) = super::plan::plan_checked(ctx, params)?;
        Ok(Planned::new(p, c))
    }
}
