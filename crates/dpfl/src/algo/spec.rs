//! Algorithm specifications (what a config file names) and their construction into halves.

use serde::{Deserialize, Serialize};

use super::context::{BuildContext, BuiltAlgorithm};
use super::lowy;
use super::lowy::calibration::Calibration;
use super::server::OutputRule;
use super::soteria;

/// An algorithm as named in a config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum AlgorithmSpec {
    /// Minibatch SGD (Lowy & Razaviyayn Algorithm 2); private when `calibration` is set.
    MbSgd {
        step_size: f64,
        #[serde(default)]
        calibration: Option<Calibration>,
        /// K; default: the calibration's rule (private) or required (non-private).
        #[serde(default)]
        batch_size: Option<usize>,
        #[serde(default)]
        output: OutputRule,
        /// How each silo draws its K records per round: `with-replacement` (the paper's,
        /// default), `without-replacement` or `poisson` (rate K/n).
        #[serde(default)]
        sampling: dpfl_privacy::sampler::RecordSampling,
    },
    /// Local SGD / FedAvg: K local single-sample steps, server averages models; private
    /// (the paper's ISRL-DP Local SGD baseline, App. I) when `private = true`.
    LocalSgd {
        step_size: f64,
        #[serde(default)]
        private: bool,
        /// K local steps; default as for MB-SGD's experiment rule.
        #[serde(default)]
        local_steps: Option<usize>,
        #[serde(default)]
        output: OutputRule,
    },
    /// Accelerated Noisy MB-SGD (Lowy & Razaviyayn Algorithm 1), one-pass or ERM; see
    /// [`lowy::acsa::AcceleratedSpec`].
    AcceleratedMbSgd(lowy::acsa::AcceleratedSpec),
    /// Noisy MB-SGD in its general form (Algorithm 7: weights, per-silo K_i) with the
    /// theorems' parameter rules; see [`lowy::mbsgd::NoisyMbSgdSpec`].
    NoisyMbSgd(lowy::mbsgd::NoisyMbSgdSpec),
    /// SoteriaFL (Li et al. 2022, Algorithms 2–3): shifted compression with a local
    /// estimator; see [`soteria::SoteriaSpec`].
    SoteriaFl(soteria::SoteriaSpec),
    /// CDP-SGD (SoteriaFL Algorithm 1): perturb, then compress.
    CdpSgd(soteria::SoteriaSpec),
    /// LDP-SGD: CDP-SGD uncompressed (SoteriaFL §5 baseline).
    LdpSgd(soteria::SoteriaSpec),
    /// LDP-SVRG: SoteriaFL-SVRG uncompressed (SoteriaFL §5 baseline).
    LdpSvrg(soteria::SoteriaSpec),
}

impl AlgorithmSpec {
    /// A short label (used when a config gives none).
    pub fn default_label(&self) -> String {
        match self {
            AlgorithmSpec::MbSgd {
                calibration: Some(_),
                ..
            } => "ISRL-DP MB-SGD".into(),
            AlgorithmSpec::MbSgd {
                calibration: None, ..
            } => "MB-SGD".into(),
            AlgorithmSpec::LocalSgd { private: true, .. } => "ISRL-DP Local SGD".into(),
            AlgorithmSpec::LocalSgd { private: false, .. } => "Local SGD".into(),
            AlgorithmSpec::AcceleratedMbSgd(a) => a.label(),
            AlgorithmSpec::NoisyMbSgd(a) if a.calibration.is_some() => {
                "ISRL-DP MB-SGD (Alg. 7)".into()
            }
            AlgorithmSpec::NoisyMbSgd(_) => "MB-SGD (Alg. 7)".into(),
            _ => match self.soteria() {
                Some((m, s)) => s.label(m),
                None => String::new(),
            },
        }
    }
    pub fn is_private(&self) -> bool {
        match self {
            AlgorithmSpec::MbSgd { calibration, .. } => calibration.is_some(),
            AlgorithmSpec::LocalSgd { private, .. } => *private,
            AlgorithmSpec::AcceleratedMbSgd(a) => a.calibration.is_some(),
            AlgorithmSpec::NoisyMbSgd(a) => a.calibration.is_some(),
            _ => self.soteria().is_some_and(|(_, s)| s.is_private()),
        }
    }

    /// The SoteriaFL wing's method and config, if this is one of its kinds.
    pub fn soteria(&self) -> Option<(soteria::Method, &soteria::SoteriaSpec)> {
        use soteria::Method;
        match self {
            AlgorithmSpec::SoteriaFl(s) => Some((Method::SoteriaFl, s)),
            AlgorithmSpec::CdpSgd(s) => Some((Method::CdpSgd, s)),
            AlgorithmSpec::LdpSgd(s) => Some((Method::LdpSgd, s)),
            AlgorithmSpec::LdpSvrg(s) => Some((Method::LdpSvrg, s)),
            _ => None,
        }
    }
    /// The configured step size; `None` where `params = "theory"` computes it.
    pub fn explicit_step_size(&self) -> Option<f64> {
        match self {
            AlgorithmSpec::MbSgd { step_size, .. } | AlgorithmSpec::LocalSgd { step_size, .. } => {
                Some(*step_size)
            }
            AlgorithmSpec::AcceleratedMbSgd(a) => a.step_size,
            AlgorithmSpec::NoisyMbSgd(a) => a.step_size,
            AlgorithmSpec::SoteriaFl(a)
            | AlgorithmSpec::CdpSgd(a)
            | AlgorithmSpec::LdpSgd(a)
            | AlgorithmSpec::LdpSvrg(a) => Some(a.step_size),
        }
    }
    /// The same algorithm with another step size (for grid searches).
    pub fn with_step_size(&self, eta: f64) -> Self {
        let mut s = self.clone();
        match &mut s {
            AlgorithmSpec::MbSgd { step_size, .. } | AlgorithmSpec::LocalSgd { step_size, .. } => {
                *step_size = eta
            }
            AlgorithmSpec::AcceleratedMbSgd(a) => a.step_size = Some(eta),
            AlgorithmSpec::NoisyMbSgd(a) => a.step_size = Some(eta),
            AlgorithmSpec::SoteriaFl(a)
            | AlgorithmSpec::CdpSgd(a)
            | AlgorithmSpec::LdpSgd(a)
            | AlgorithmSpec::LdpSvrg(a) => a.step_size = eta,
        }
        s
    }

    /// Builds the halves. `ctx` holds only public information and the gradient oracle (a
    /// model without data); see the module doc of [`crate::algo`].
    pub fn build(&self, ctx: &BuildContext) -> crate::Result<BuiltAlgorithm> {
        if let Some(eta) = self.explicit_step_size()
            && !(eta.is_finite() && eta > 0.0)
        {
            return Err(crate::Error::config(
                "algorithm.step_size",
                format!("must be finite and > 0, got {eta}"),
            ));
        }
        match self {
            AlgorithmSpec::MbSgd {
                step_size,
                calibration,
                batch_size,
                output,
                sampling,
            } => lowy::mbsgd::build(
                ctx,
                *step_size,
                *calibration,
                *batch_size,
                *output,
                *sampling,
            ),
            AlgorithmSpec::LocalSgd {
                step_size,
                private,
                local_steps,
                output,
            } => lowy::local_sgd::build(ctx, *step_size, *private, *local_steps, *output),
            AlgorithmSpec::AcceleratedMbSgd(a) => lowy::acsa::build(ctx, a),
            AlgorithmSpec::NoisyMbSgd(a) => lowy::mbsgd::build_general(ctx, a),
            _ => match self.soteria() {
                Some((m, s)) => soteria::spec::build(ctx, m, s),
                None => Err(crate::Error::config("algorithm.kind", "unknown algorithm")),
            },
        }
    }
}
