//! The SoteriaFL wing's parameter guard (issue 28 item 4; `crate::algo::checked`): the five
//! kinds' shared [`SoteriaSpec`] checked once for its method into [`CheckedSoteria`], what
//! planning (`super::plan`) takes. What needs the federation (every silo answers, b ≤ m_i,
//! the compressor at d, the continuous Gaussian) is checked when planning.

use super::calibration::Estimator;
use super::spec::{Clipping, InitSpec, Method, SoteriaSpec};
use crate::algo::checked::{
    BatchRule, ParamError, ParamGuard, non_negative, positive, step_size, unit_interval,
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
