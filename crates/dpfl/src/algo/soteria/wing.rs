//! The SoteriaFL wing's five kinds as one [`Wing`] (issue 28 item 1): `soteria-fl`,
//! `cdp-sgd`, `ldp-sgd`, `ldp-svrg` and `q-dpsgd-1` share [`SoteriaSpec`] and differ by their
//! [`Method`]. Every silo must answer every round (the server's shift stays the silos' mean
//! only if no round is short: module doc of [`super::server`]).

use super::calibration::Estimator;
use super::guard::CheckedSoteria;
pub(crate) use super::guard::SoteriaWing;
use super::plan::SoteriaPlan;
use super::spec::{Method, SoteriaSpec};
use crate::algo::context::BuildContext;
use crate::algo::wing::{
    AuditView, Knobs, NoiseMultiplier, Planned, Privacy, Requirements, Transport, Wing,
};

impl Wing for SoteriaWing {
    type Plan = SoteriaPlan;

    fn label(&self) -> String {
        self.spec.label(self.method)
    }
    fn privacy(&self) -> Privacy {
        match self.spec.is_private() {
            true => Privacy::SiloNoise,
            false => Privacy::NonPrivate,
        }
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        let one_sensitivity = match self.method {
            Method::LdpSvrg => false,
            Method::SoteriaFl | Method::CdpSgd | Method::LdpSgd | Method::QDpsgd1 => {
                match self.spec.estimator {
                    None | Some(Estimator::Sgd | Estimator::Gd) => true,
                    Some(Estimator::Svrg | Estimator::Saga) => false,
                }
            }
        };
        match one_sensitivity {
            true => NoiseMultiplier::Accepts,
            false => NoiseMultiplier::Refuses(
                "the SVRG/SAGA estimators split their noise over two terms of different \
                 sensitivities (SoteriaFL Lemma 3), so one multiplier is ill-defined",
            ),
        }
    }
    fn knobs(&self) -> Knobs {
        Knobs {
            step_size: Some(self.spec.step_size),
            app_i_batch_floor: false,
        }
    }
    fn tuned(&self, step_size: f64, batch: Option<usize>) -> Self {
        SoteriaWing {
            method: self.method,
            spec: SoteriaSpec {
                step_size,
                batch_size: batch.or(self.spec.batch_size),
                ..self.spec.clone()
            },
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements {
            shuffler: false,
            every_silo: true,
            fixed_participation: false,
            transport: Transport::Messages,
            quorum: None,
        }
    }
    fn extended_metrics(&self) -> bool {
        true
    }
    fn audit_view(&self, plan: &SoteriaPlan) -> AuditView {
        match (self.method, plan.shift_step) {
            (Method::QDpsgd1, _) => AuditView::Model,
            (
                Method::SoteriaFl | Method::CdpSgd | Method::LdpSgd | Method::LdpSvrg,
                Some(gamma),
            ) => AuditView::Shifted { gamma },
            (Method::SoteriaFl | Method::CdpSgd | Method::LdpSgd | Method::LdpSvrg, None) => {
                AuditView::Gradient { all_silos: false }
            }
        }
    }
    fn plan(params: &CheckedSoteria, ctx: &BuildContext) -> crate::Result<Planned<SoteriaPlan>> {
        let (p, c) = super::plan::plan_checked(ctx, params)?;
        Ok(Planned::new(p, c))
    }
}
