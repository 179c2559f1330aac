//! Algorithm specifications (what a config file names) and their construction into halves.

use serde::{Deserialize, Serialize};

use super::context::{BuildContext, BuiltAlgorithm, SiloCalibration};
use super::half::{ServerHalf, SiloHalf};
use super::lowy;
use super::lowy::calibration::Calibration;
use super::normfedavg;
use super::server::OutputRule;
use super::shuffle;
use super::soteria;

/// An algorithm as named in a config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum AlgorithmSpec {
    /// Minibatch SGD (Lowy & Razaviyayn Algorithm 2); private when `calibration` is set.
    MbSgd {
        /// η > 0.
        step_size: f64,
        /// The noise rule; `None` for the non-private algorithm.
        #[serde(default)]
        calibration: Option<Calibration>,
        /// K; default: the calibration's rule (private) or required (non-private).
        #[serde(default)]
        batch_size: Option<usize>,
        /// Which iterate the server outputs.
        #[serde(default)]
        output: OutputRule,
        /// How each silo draws its K records per round: `with-replacement` (the paper's,
        /// default), `without-replacement` or `poisson` (rate K/n).
        #[serde(default)]
        sampling: dpfl_privacy::sampler::RecordSampling,
    },
    /// Local SGD / FedAvg: K local single-sample steps, server averages models; private
    /// (the paper's ISRL-DP Local SGD baseline, App. I) when `private = true` or a
    /// `calibration` is given.
    LocalSgd {
        /// η > 0 of each local step.
        step_size: f64,
        /// Private with the paper's App. I noise (`experiment` rule) unless `calibration` says
        /// otherwise.
        #[serde(default)]
        private: bool,
        /// The noise rule of a private run: `experiment` (App. I's per-step σ, the default
        /// with `private = true`) or `accountant` (the smallest σ certified for the R·K
        /// sampled steps). Local SGD has no `theory` rule in the paper.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        calibration: Option<Calibration>,
        /// K local steps; default as for MB-SGD's experiment rule.
        #[serde(default)]
        local_steps: Option<usize>,
        /// Which iterate (average of the silos' models) the server outputs.
        #[serde(default)]
        output: OutputRule,
    },
    /// Accelerated Noisy MB-SGD (Lowy & Razaviyayn Algorithm 1), one-pass or ERM; see
    /// [`lowy::acsa::AcceleratedSpec`].
    AcceleratedMbSgd(lowy::acsa::AcceleratedSpec),
    /// Noisy MB-SGD in its general form (Algorithm 7: weights, per-silo K_i) with the
    /// theorems' parameter rules; see [`lowy::mbsgd::NoisyMbSgdSpec`].
    NoisyMbSgd(lowy::mbsgd::NoisyMbSgdSpec),
    /// Shuffled Noisy MB-SGD (Lowy & Razaviyayn Thm 5.1); see [`shuffle::SdpMbSgdSpec`].
    SdpMbSgd(shuffle::SdpMbSgdSpec),
    /// SDP One-Pass Accelerated Noisy MB-SGD (Lowy & Razaviyayn Algorithm 6, PVEC in AC-SA);
    /// see [`shuffle::SdpAcceleratedSpec`].
    SdpAcceleratedMbSgd(shuffle::SdpAcceleratedSpec),
    /// PSGD (Cheu, Joseph, Mao & Peng 2022 Algorithm 3); see [`shuffle::PsgdSpec`].
    Psgd(shuffle::PsgdSpec),
    /// PGD (Cheu, Joseph, Mao & Peng 2022 Algorithm 5); see [`shuffle::PgdSpec`].
    Pgd(shuffle::PgdSpec),
    /// PAGD (Cheu, Joseph, Mao & Peng 2022 Algorithm 4, with smoothing, phases and the
    /// robust variant); see [`shuffle::PagdSpec`].
    Pagd(shuffle::PagdSpec),
    /// Pan-private AC-SA (Cheu, Joseph, Mao & Peng 2022 Algorithm 6); see
    /// [`shuffle::PanPrivateSpec`].
    PanPrivateAcsa(shuffle::PanPrivateSpec),
    /// The DP-NormFedAvg family (Das et al.: Algorithms 2 and 3, the clipping and Binomial
    /// baselines); see [`normfedavg::NormFedAvgSpec`].
    NormFedAvg(normfedavg::NormFedAvgSpec),
    /// SoteriaFL (Li et al. 2022, Algorithms 2–3): shifted compression with a local
    /// estimator; see [`soteria::SoteriaSpec`].
    SoteriaFl(soteria::SoteriaSpec),
    /// CDP-SGD (SoteriaFL Algorithm 1): perturb, then compress.
    CdpSgd(soteria::SoteriaSpec),
    /// LDP-SGD: CDP-SGD uncompressed (SoteriaFL §5 baseline).
    LdpSgd(soteria::SoteriaSpec),
    /// LDP-SVRG: SoteriaFL-SVRG uncompressed (SoteriaFL §5 baseline).
    LdpSvrg(soteria::SoteriaSpec),
    /// Q-DPSGD-1 (Ding et al. 2021; SoteriaFL's Table 1 baseline): silos keep their own
    /// models and send them compressed; see [`soteria::qdpsgd`].
    #[serde(rename = "q-dpsgd-1")]
    QDpsgd1(soteria::SoteriaSpec),
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
            AlgorithmSpec::LocalSgd { .. } if self.is_private() => "ISRL-DP Local SGD".into(),
            AlgorithmSpec::LocalSgd { .. } => "Local SGD".into(),
            AlgorithmSpec::AcceleratedMbSgd(a) => a.label(),
            AlgorithmSpec::NoisyMbSgd(a) if a.calibration.is_some() => {
                "ISRL-DP MB-SGD (Alg. 7)".into()
            }
            AlgorithmSpec::NoisyMbSgd(_) => "MB-SGD (Alg. 7)".into(),
            AlgorithmSpec::SdpMbSgd(_) => "SDP MB-SGD".into(),
            AlgorithmSpec::SdpAcceleratedMbSgd(_) => "SDP accelerated MB-SGD (one-pass)".into(),
            AlgorithmSpec::Psgd(_) => "PSGD (shuffle)".into(),
            AlgorithmSpec::Pgd(_) => "PGD (shuffle)".into(),
            AlgorithmSpec::Pagd(_) => "PAGD (shuffle)".into(),
            AlgorithmSpec::PanPrivateAcsa(_) => "pan-private AC-SA".into(),
            AlgorithmSpec::NormFedAvg(a) => a.label(),
            _ => match self.soteria() {
                Some((m, s)) => s.label(m),
                None => String::new(),
            },
        }
    }
    /// Whether the algorithm adds noise (and so spends a privacy budget).
    pub fn is_private(&self) -> bool {
        match self {
            AlgorithmSpec::MbSgd { calibration, .. } => calibration.is_some(),
            AlgorithmSpec::LocalSgd {
                private,
                calibration,
                ..
            } => *private || calibration.is_some(),
            AlgorithmSpec::AcceleratedMbSgd(a) => a.calibration.is_some(),
            AlgorithmSpec::NoisyMbSgd(a) => a.calibration.is_some(),
            AlgorithmSpec::SdpMbSgd(_)
            | AlgorithmSpec::SdpAcceleratedMbSgd(_)
            | AlgorithmSpec::Psgd(_)
            | AlgorithmSpec::Pgd(_)
            | AlgorithmSpec::Pagd(_)
            | AlgorithmSpec::PanPrivateAcsa(_) => true,
            AlgorithmSpec::NormFedAvg(a) => a.variant.is_private(),
            _ => self.soteria().is_some_and(|(_, s)| s.is_private()),
        }
    }

    /// Whether the algorithm takes `privacy.noise_multiplier` (σ = z·Δ set directly): the
    /// Gaussian algorithms whose message has one L2 sensitivity Δ. See
    /// [`Self::noise_multiplier_refusal`] for the others.
    pub fn accepts_noise_multiplier(&self) -> bool {
        match self {
            AlgorithmSpec::MbSgd { .. }
            | AlgorithmSpec::LocalSgd { .. }
            | AlgorithmSpec::AcceleratedMbSgd(_)
            | AlgorithmSpec::NoisyMbSgd(_) => true,
            _ => self.soteria().is_some_and(|(m, s)| {
                use soteria::Estimator;
                m != soteria::Method::LdpSvrg
                    && matches!(s.estimator, None | Some(Estimator::Sgd | Estimator::Gd))
            }),
        }
    }

    /// Why an algorithm refuses `privacy.noise_multiplier` (empty where it accepts one).
    pub fn noise_multiplier_refusal(&self) -> &'static str {
        match self {
            _ if self.accepts_noise_multiplier() => "",
            AlgorithmSpec::NormFedAvg(_) => {
                "its noise is the truncated discrete Laplace (or Binomial) calibrated by Theorem \
                 1, not a Gaussian multiplier"
            }
            AlgorithmSpec::SdpMbSgd(_)
            | AlgorithmSpec::SdpAcceleratedMbSgd(_)
            | AlgorithmSpec::Psgd(_)
            | AlgorithmSpec::Pgd(_)
            | AlgorithmSpec::Pagd(_) => {
                "its guarantee is calibrated through the shuffler (amplification, or the \
                 PVEC/P1D vector summation), where a Gaussian multiplier fixes no epsilon"
            }
            AlgorithmSpec::PanPrivateAcsa(_) => {
                "it adds two Gaussians (state and output noise) split from one target"
            }
            _ => {
                "the SVRG/SAGA estimators split their noise over two terms of different \
                 sensitivities (SoteriaFL Lemma 3), so one multiplier is ill-defined"
            }
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
            AlgorithmSpec::QDpsgd1(s) => Some((Method::QDpsgd1, s)),
            _ => None,
        }
    }
    /// Whether the runner must put a shuffle stage between the silos and the server.
    pub fn needs_shuffler(&self) -> bool {
        matches!(
            self,
            AlgorithmSpec::SdpMbSgd(_)
                | AlgorithmSpec::SdpAcceleratedMbSgd(_)
                | AlgorithmSpec::Psgd(_)
                | AlgorithmSpec::Pgd(_)
                | AlgorithmSpec::Pagd(_)
        )
    }
    /// The configured step size; `None` where `params = "theory"` computes it.
    pub fn explicit_step_size(&self) -> Option<f64> {
        match self {
            AlgorithmSpec::MbSgd { step_size, .. } | AlgorithmSpec::LocalSgd { step_size, .. } => {
                Some(*step_size)
            }
            AlgorithmSpec::AcceleratedMbSgd(a) => a.step_size,
            AlgorithmSpec::NoisyMbSgd(a) => a.step_size,
            AlgorithmSpec::SdpMbSgd(a) => Some(a.step_size),
            AlgorithmSpec::SdpAcceleratedMbSgd(a) => Some(a.step_size),
            AlgorithmSpec::Psgd(a) => a.step_size,
            AlgorithmSpec::Pgd(a) => a.step_size,
            // AC-SA's steps come from the preset (L_t).
            AlgorithmSpec::Pagd(_) | AlgorithmSpec::PanPrivateAcsa(_) => None,
            AlgorithmSpec::NormFedAvg(a) => Some(a.step_size),
            AlgorithmSpec::SoteriaFl(a)
            | AlgorithmSpec::CdpSgd(a)
            | AlgorithmSpec::LdpSgd(a)
            | AlgorithmSpec::LdpSvrg(a)
            | AlgorithmSpec::QDpsgd1(a) => Some(a.step_size),
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
            AlgorithmSpec::SdpMbSgd(a) => a.step_size = eta,
            AlgorithmSpec::SdpAcceleratedMbSgd(a) => a.step_size = eta,
            AlgorithmSpec::Psgd(a) => a.step_size = Some(eta),
            AlgorithmSpec::Pgd(a) => a.step_size = Some(eta),
            // No step size to search: L_t is the preset's.
            AlgorithmSpec::Pagd(_) | AlgorithmSpec::PanPrivateAcsa(_) => {}
            AlgorithmSpec::NormFedAvg(a) => a.step_size = eta,
            AlgorithmSpec::SoteriaFl(a)
            | AlgorithmSpec::CdpSgd(a)
            | AlgorithmSpec::LdpSgd(a)
            | AlgorithmSpec::LdpSvrg(a)
            | AlgorithmSpec::QDpsgd1(a) => a.step_size = eta,
        }
        s
    }

    /// Checks the parameters and calibrates every silo once: the algorithm part of a run's
    /// plan (per-silo K_i, σ_i, formula and run event, and what the halves are built from).
    /// `ctx` holds only public information and the gradient oracle (a model without data);
    /// see the module doc of [`crate::algo`].
    pub fn plan(&self, ctx: &BuildContext) -> crate::Result<(Vec<SiloCalibration>, WingPlan)> {
        self.plan_parts(ctx)
            .map(|(calibration, wing, _)| (calibration, wing))
    }

    /// [`AlgorithmSpec::plan`], plus the whole federation where planning already built it (the
    /// shuffle wing calibrates by building), so that the simulator builds it once.
    pub(crate) fn plan_parts(
        &self,
        ctx: &BuildContext,
    ) -> crate::Result<(Vec<SiloCalibration>, WingPlan, Option<BuiltAlgorithm>)> {
        if let Some(eta) = self.explicit_step_size() {
            crate::units::StepSize::new(eta)?;
        }
        let mut whole = None;
        let (calibration, wing) = match self {
            AlgorithmSpec::MbSgd {
                step_size,
                calibration,
                batch_size,
                output,
                sampling,
            } => {
                let (p, c) = lowy::mbsgd::plan(
                    ctx,
                    crate::units::StepSize::new(*step_size)?,
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
                calibration,
                local_steps,
                output,
            } => {
                // `private = true` alone keeps its meaning (App. I's rule); a calibration
                // makes the run private whatever `private` says (never less noise).
                let rule = match (calibration, private) {
                    (Some(c), _) => Some(*c),
                    (None, true) => Some(Calibration::Experiment),
                    (None, false) => None,
                };
                let (p, c) = lowy::local_sgd::plan(
                    ctx,
                    crate::units::StepSize::new(*step_size)?,
                    rule,
                    *local_steps,
                    *output,
                )?;
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
            AlgorithmSpec::SoteriaFl(s)
            | AlgorithmSpec::CdpSgd(s)
            | AlgorithmSpec::LdpSgd(s)
            | AlgorithmSpec::LdpSvrg(s)
            | AlgorithmSpec::QDpsgd1(s) => {
                let method = self
                    .soteria()
                    .map_or(soteria::Method::SoteriaFl, |(m, _)| m);
                let (p, c) = soteria::plan::plan(ctx, method, s)?;
                (c, WingPlan::Soteria(Box::new(p)))
            }
            // The shuffle wing plans while building the whole federation once (kept for the
            // simulator); other processes build their one half from the plan.
            AlgorithmSpec::SdpMbSgd(_)
            | AlgorithmSpec::SdpAcceleratedMbSgd(_)
            | AlgorithmSpec::Psgd(_)
            | AlgorithmSpec::Pgd(_)
            | AlgorithmSpec::Pagd(_)
            | AlgorithmSpec::PanPrivateAcsa(_) => {
                let inner = self.shuffle_inner(ctx)?;
                let (built, silos, pvec) = match self {
                    AlgorithmSpec::SdpMbSgd(a) => shuffle::build_sdp_mbsgd(ctx, a, inner)?,
                    AlgorithmSpec::SdpAcceleratedMbSgd(a) => {
                        shuffle::build_sdp_acsa(ctx, a, inner)?
                    }
                    AlgorithmSpec::Psgd(a) => shuffle::build_psgd(ctx, a, inner)?,
                    AlgorithmSpec::Pgd(a) => shuffle::build_pgd(ctx, a, inner)?,
                    AlgorithmSpec::Pagd(a) => shuffle::build_pagd(ctx, a, inner)?,
                    AlgorithmSpec::PanPrivateAcsa(a) => {
                        shuffle::pan_plan::build_pan(ctx, a, inner)?
                    }
                    _ => {
                        return Err(crate::Error::config("algorithm", "not a shuffle algorithm"));
                    }
                };
                let calibration = built.calibration.clone();
                whole = Some(built);
                let plan = shuffle::plan::ShufflePlan { silos, pvec };
                (
                    calibration,
                    WingPlan::Shuffle {
                        algorithm: Box::new(self.clone()),
                        plan: Box::new(plan),
                    },
                )
            }
            AlgorithmSpec::NormFedAvg(a) => {
                let (p, c) = normfedavg::plan::plan(ctx, a)?;
                (c, WingPlan::NormFedAvg(Box::new(p)))
            }
        };
        Ok((calibration, wing, whole))
    }

    /// The non-private Lowy server half behind a shuffle algorithm's analyzer (closed forms
    /// only: Lowy's plans without calibration and the shuffle presets).
    pub(crate) fn shuffle_inner(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>> {
        match self {
            AlgorithmSpec::SdpMbSgd(a) => lowy_mbsgd_server(
                ctx,
                a.step_size,
                None,
                Some(a.batch_size),
                a.output,
                dpfl_privacy::sampler::RecordSampling::WithReplacement,
            ),
            AlgorithmSpec::SdpAcceleratedMbSgd(a) => lowy_acsa_server(
                ctx,
                &lowy::acsa::AcceleratedSpec {
                    sampling: lowy::acsa::AcsaSampling::OnePass,
                    calibration: None,
                    params: lowy::inputs::Params::Explicit,
                    step_size: Some(a.step_size),
                    batch_size: Some(a.batch_size(ctx)?),
                    regularization: a.regularization,
                    smoothing: None,
                    weights: None,
                    constants: Default::default(),
                },
            ),
            AlgorithmSpec::Psgd(a) => {
                let (k, eta, _) = shuffle::psgd_preset(ctx, a)?;
                lowy_mbsgd_server(
                    ctx,
                    eta,
                    None,
                    Some(k),
                    OutputRule::Average,
                    dpfl_privacy::sampler::RecordSampling::WithReplacement,
                )
            }
            AlgorithmSpec::Pgd(a) => {
                let (_, eta, _) = shuffle::pgd_preset(ctx, a)?;
                lowy_mbsgd_server(
                    ctx,
                    eta,
                    None,
                    Some(1),
                    OutputRule::Average,
                    dpfl_privacy::sampler::RecordSampling::WithReplacement,
                )
            }
            AlgorithmSpec::Pagd(a) => shuffle::pagd_preset::pagd_server(ctx, a),
            AlgorithmSpec::PanPrivateAcsa(a) => shuffle::pan_plan::pan_server(ctx, a),
            _ => Err(crate::Error::config(
                "algorithm",
                format!("{} is not a shuffle algorithm", self.default_label()),
            )),
        }
    }

    /// Plans and builds every half at once (the simulator's whole federation, and tests).
    pub fn build(&self, ctx: &BuildContext) -> crate::Result<BuiltAlgorithm> {
        match self.plan_parts(ctx)? {
            (_, _, Some(built)) => Ok(built),
            (calibration, wing, None) => wing.build(ctx, calibration),
        }
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
    /// The SoteriaFL wing's algorithms.
    Soteria(Box<soteria::plan::SoteriaPlan>),
    /// The shuffle model's algorithms: the spec (its server half follows by closed forms)
    /// and the wing's plan.
    Shuffle {
        /// The spec (its server half follows by closed forms).
        algorithm: Box<AlgorithmSpec>,
        /// The wing's calibrated plan.
        plan: Box<shuffle::plan::ShufflePlan>,
    },
    /// The DP-NormFedAvg family.
    NormFedAvg(Box<normfedavg::plan::NormFedAvgPlan>),
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
            WingPlan::Soteria(p) => p.silos.len(),
            WingPlan::Shuffle { plan, .. } => plan.silos.len(),
            WingPlan::NormFedAvg(p) => p.silos.len(),
        }
    }

    /// The server half.
    pub fn server_half(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>> {
        match self {
            WingPlan::Lowy(LowyPlan::MbSgd(p)) => p.server_half(ctx),
            WingPlan::Lowy(LowyPlan::Acsa(p)) => p.server_half(ctx),
            WingPlan::Lowy(LowyPlan::LocalSgd(p)) => p.server_half(ctx),
            WingPlan::Soteria(p) => p.server_half(ctx),
            WingPlan::Shuffle { algorithm, plan } => {
                plan.server_half(algorithm.shuffle_inner(ctx)?)
            }
            WingPlan::NormFedAvg(p) => p.server_half(ctx),
        }
    }

    /// Silo `silo`'s half (index in silo order).
    pub fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>> {
        match self {
            WingPlan::Lowy(LowyPlan::MbSgd(p)) => p.silo_half(ctx, silo),
            WingPlan::Lowy(LowyPlan::Acsa(p)) => p.silo_half(ctx, silo),
            WingPlan::Lowy(LowyPlan::LocalSgd(p)) => p.silo_half(ctx, silo),
            WingPlan::Soteria(p) => p.silo_half(ctx, silo),
            WingPlan::Shuffle { plan, .. } => plan.silo_half(ctx, silo),
            WingPlan::NormFedAvg(p) => p.silo_half(ctx, silo),
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

/// A non-private Lowy MB-SGD server half (the shuffle wing's server side: a server half never
/// adds noise).
fn lowy_mbsgd_server(
    ctx: &BuildContext,
    step_size: f64,
    calibration: Option<Calibration>,
    batch_size: Option<usize>,
    output: OutputRule,
    sampling: dpfl_privacy::sampler::RecordSampling,
) -> crate::Result<Box<dyn ServerHalf>> {
    let step_size = crate::units::StepSize::new(step_size)?;
    let (p, _) = lowy::mbsgd::plan(ctx, step_size, calibration, batch_size, output, sampling)?;
    p.server_half(ctx)
}

/// A Lowy AC-SA server half built from `spec` (non-private in the shuffle wing's use).
fn lowy_acsa_server(
    ctx: &BuildContext,
    spec: &lowy::acsa::AcceleratedSpec,
) -> crate::Result<Box<dyn ServerHalf>> {
    let (p, _) = lowy::acsa::plan(ctx, spec)?;
    p.server_half(ctx)
}
