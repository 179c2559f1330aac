//! The SoteriaFL wing's five kinds as one [`Wing`] (issue 28 item 1): `soteria-fl`,
//! `cdp-sgd`, `ldp-sgd`, `ldp-svrg` and `q-dpsgd-1` share [`SoteriaSpec`] and differ by their
//! [`Method`]. Every silo must answer every round (the server's shift stays the silos' mean
//! only if no round is short: module doc of [`super::server`]).

use super::calibration::Estimator;
use super::plan::SoteriaPlan;
use super::spec::{Clipping, InitSpec, Method, SoteriaSpec};
use crate::algo::checked::{
    BatchRule, ParamError, ParamGuard, non_negative, positive, step_size, unit_interval,
};
use crate::algo::context::BuildContext;
use crate::algo::wing::{
    AuditView, Knobs, NoiseMultiplier, Planned, Privacy, Requirements, Transport, Wing,
};
use crate::compress::CompressorSpec;

/// One SoteriaFL-wing algorithm: its method (the config's `kind`) and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct SoteriaWing {
    /// Which algorithm of the paper.
    pub method: Method,
    /// Its parameters.
    pub spec: SoteriaSpec,
}

/// A SoteriaFL-wing algorithm whose parameters passed its guard, with what the guard
/// resolved: the estimator of its method and Q-DPSGD-1's consensus step.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedSoteria {
    /// Which algorithm of the paper.
    pub(crate) method: Method,
    /// Its checked parameters.
    pub(crate) spec: SoteriaSpec,
    /// The local estimator (SGD for the direct-compression methods).
    pub(crate) estimator: Estimator,
    /// ε_c of Q-DPSGD-1 (`Some` exactly for that method).
    pub(crate) consensus: Option<f64>,
}

/// Q-DPSGD-1's default consensus step (the authors' code's `epsilon=0.9`).
pub const QDPSGD_CONSENSUS: f64 = 0.9;

impl ParamGuard for SoteriaWing {
    type Checked = CheckedSoteria;
    fn check(&self) -> Result<CheckedSoteria, ParamError> {
        let (method, spec) = (self.method, &self.spec);
        step_size(spec.step_size)?;
        BatchRule::check("batch_size", spec.batch_size)?;
        let estimator = match (method, spec.estimator) {
            (Method::SoteriaFl, e) => e.unwrap_or_default(),
            (Method::LdpSvrg, None | Some(Estimator::Svrg)) => Estimator::Svrg,
            (Method::CdpSgd | Method::LdpSgd | Method::QDpsgd1, None | Some(Estimator::Sgd)) => {
                Estimator::Sgd
            }
            (_, Some(e)) => {
                return Err(ParamError::refused(
                    "estimator",
                    format!("{e:?} is fixed by this kind; only soteria-fl takes an estimator"),
                ));
            }
        };
        // SAGA's table holds each record's gradient at the last round it was drawn: state
        // that depends on every past round's secret draws. Lemma 3 charges each round as if
        // its randomness were fresh, but the table term of round t reveals which records were
        // drawn before, undoing the amplification those rounds were charged with, so no
        // accountant here certifies the run (issue 27 finding 8). Refused when private;
        // SVRG's snapshot is public.
        if estimator == Estimator::Saga && spec.is_private() {
            return Err(ParamError::refused(
                "estimator",
                "SAGA's per-record gradient table is hidden state that SoteriaFL's Lemma 3 (a \
                 per-round split) does not cover, so dpfl cannot certify a private SAGA run; use \
                 estimator = \"svrg\" (or calibration = \"none\" for a non-private SAGA run)",
            ));
        }
        if let (Method::LdpSgd | Method::LdpSvrg, Some(c)) = (method, &spec.compressor)
            && *c != (CompressorSpec::Identity {})
        {
            return Err(ParamError::refused(
                "compressor",
                "LDP-SGD/LDP-SVRG are uncompressed; use cdp-sgd or soteria-fl",
            ));
        }
        if let Some(g) = spec.shift_step {
            unit_interval("shift_step", g)?;
        }
        let consensus = match (method, spec.consensus) {
            (Method::QDpsgd1, None) => Some(QDPSGD_CONSENSUS),
            (Method::QDpsgd1, Some(c)) => Some(unit_interval("consensus", c)?),
            (_, None) => None,
            (_, Some(_)) => {
                return Err(ParamError::refused(
                    "consensus",
                    "only q-dpsgd-1 takes a consensus step",
                ));
            }
        };
        if spec.clipping == Clipping::AggregateNoGuarantee && method == Method::QDpsgd1 {
            return Err(ParamError::refused(
                "clipping",
                "Q-DPSGD-1 clips per record only",
            ));
        }
        if let Some(c) = spec.noise_constant {
            positive("noise_constant", c)?;
        }
        if let Some(InitSpec { std, .. }) = spec.init {
            non_negative("init.std", std)?;
        }
        if let Some(p) = spec.snapshot_probability {
            unit_interval("snapshot_probability", p)?;
        }
        Ok(CheckedSoteria {
            method,
            spec: spec.clone(),
            estimator,
            consensus,
        })
    }
}

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
