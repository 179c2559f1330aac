//! Algorithm specifications (what a config file names) and their construction into halves.

use serde::{Deserialize, Serialize};

use super::context::{BuildContext, BuiltAlgorithm, SiloCalibration};
use super::half::{ServerHalf, SiloHalf};
use super::lowy;
use super::lowy::calibration::Calibration;
use super::server::OutputRule;

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
        }
    }
    pub fn is_private(&self) -> bool {
        match self {
            AlgorithmSpec::MbSgd { calibration, .. } => calibration.is_some(),
            AlgorithmSpec::LocalSgd { private, .. } => *private,
            AlgorithmSpec::AcceleratedMbSgd(a) => a.calibration.is_some(),
            AlgorithmSpec::NoisyMbSgd(a) => a.calibration.is_some(),
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
        }
        s
    }

    /// Checks the parameters and calibrates every silo once: the algorithm part of a run's
    /// plan (per-silo K_i, σ_i, formula and run event, and what the halves are built from).
    /// `ctx` holds only public information and the gradient oracle (a model without data);
    /// see the module doc of [`crate::algo`].
    pub fn plan(&self, ctx: &BuildContext) -> crate::Result<(Vec<SiloCalibration>, WingPlan)> {
        if let Some(eta) = self.explicit_step_size()
            && !(eta.is_finite() && eta > 0.0)
        {
            return Err(crate::Error::config(
                "algorithm.step_size",
                format!("must be finite and > 0, got {eta}"),
            ));
        }
        Ok(match self {
            AlgorithmSpec::MbSgd {
                step_size,
                calibration,
                batch_size,
                output,
                sampling,
            } => {
                let (p, c) = lowy::mbsgd::plan(
                    ctx,
                    *step_size,
                    *calibration,
                    *batch_size,
                    *output,
                    *sampling,
                )?;
                (c, WingPlan::Lowy(LowyPlan::MbSgd(p)))
            }
            AlgorithmSpec::LocalSgd {
                step_size,
                private,
                local_steps,
                output,
            } => {
                let (p, c) =
                    lowy::local_sgd::plan(ctx, *step_size, *private, *local_steps, *output)?;
                (c, WingPlan::Lowy(LowyPlan::LocalSgd(p)))
            }
            AlgorithmSpec::AcceleratedMbSgd(a) => {
                let (p, c) = lowy::acsa::plan(ctx, a)?;
                (c, WingPlan::Lowy(LowyPlan::Acsa(p)))
            }
            AlgorithmSpec::NoisyMbSgd(a) => {
                let (p, c) = lowy::mbsgd::plan_general(ctx, a)?;
                (c, WingPlan::Lowy(LowyPlan::MbSgd(p)))
            }
        })
    }

    /// Plans and builds every half at once (the simulator's whole federation, and tests).
    pub fn build(&self, ctx: &BuildContext) -> crate::Result<BuiltAlgorithm> {
        let (calibration, wing) = self.plan(ctx)?;
        wing.build(ctx, calibration)
    }
}

/// The resolved, calibrated parameters of one algorithm, per wing: everything its halves are
/// built from beyond the public [`BuildContext`]. Serialisable, so a run plans once and
/// hands the plan to every process (`dpfl federate`); building a half from it calibrates
/// nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WingPlan {
    /// Lowy & Razaviyayn's algorithms.
    Lowy(LowyPlan),
}

/// The Lowy & Razaviyayn wing's plans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LowyPlan {
    /// `mb-sgd` and `noisy-mb-sgd`.
    MbSgd(lowy::mbsgd::MbSgdPlan),
    /// `accelerated-mb-sgd`.
    Acsa(lowy::acsa::AcsaPlan),
    /// `local-sgd`.
    LocalSgd(lowy::local_sgd::LocalSgdPlan),
}

impl WingPlan {
    /// The number of silo halves the plan builds.
    pub fn silos(&self) -> usize {
        match self {
            WingPlan::Lowy(LowyPlan::MbSgd(p)) => p.silos.len(),
            WingPlan::Lowy(LowyPlan::Acsa(p)) => p.silos.len(),
            WingPlan::Lowy(LowyPlan::LocalSgd(p)) => p.silos.len(),
        }
    }

    /// The server half.
    pub fn server_half(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>> {
        match self {
            WingPlan::Lowy(LowyPlan::MbSgd(p)) => p.server_half(ctx),
            WingPlan::Lowy(LowyPlan::Acsa(p)) => p.server_half(ctx),
            WingPlan::Lowy(LowyPlan::LocalSgd(p)) => p.server_half(ctx),
        }
    }

    /// Silo `silo`'s half (index in silo order).
    pub fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>> {
        match self {
            WingPlan::Lowy(LowyPlan::MbSgd(p)) => p.silo_half(ctx, silo),
            WingPlan::Lowy(LowyPlan::Acsa(p)) => p.silo_half(ctx, silo),
            WingPlan::Lowy(LowyPlan::LocalSgd(p)) => p.silo_half(ctx, silo),
        }
    }

    /// Every half (the simulator's whole federation), with the plan's calibration rows.
    pub fn build(
        &self,
        ctx: &BuildContext,
        calibration: Vec<SiloCalibration>,
    ) -> crate::Result<BuiltAlgorithm> {
        let silos = (0..self.silos())
            .map(|i| self.silo_half(ctx, i))
            .collect::<crate::Result<Vec<_>>>()?;
        Ok(BuiltAlgorithm {
            server: self.server_half(ctx)?,
            silos,
            calibration,
        })
    }
}
