//! The shuffle wing's six kinds as [`Wing`]s (issue 28 item 1), and [`ShuffleAlgorithm`], the
//! spec a shuffle plan keeps so that a server process derives its server half by closed
//! forms. The server halves behind the analyzer are the floor's (`MbSgdServer` for SDP
//! MB-SGD, PSGD and PGD; `AcsaServer` for Algorithm 6) or this wing's own AC-SA (PAGD,
//! pan-private AC-SA): the wing reaches no other wing.
//!
//! The five shuffle-model algorithms need a shuffler and a fixed number of answering silos
//! (Lowy & Razaviyayn §5; Cheu et al. 2022 §4); pan-private AC-SA needs neither.

use serde::{Deserialize, Serialize};

use super::guard::CheckedShuffle;
pub(crate) use super::guard::ShuffleAlgorithm;
use super::pagd_preset::PagdSpec;
use super::pan::PanPrivateSpec;
use super::plan::ShufflePlan;
use super::pvec::Transport as PvecTransport;
use super::trust::ShufflerTrust;
use super::{PgdSpec, PsgdSpec, SdpAcceleratedSpec, SdpMbSgdSpec};
use crate::algo::acsa_server::{AcsaSchedule, AcsaServer};
use crate::algo::context::BuildContext;
use crate::algo::half::ServerHalf;
use crate::algo::server::{MbSgdServer, OutputRule};
use crate::algo::wing::{
    AuditView, Knobs, NoiseMultiplier, Planned, Privacy, Requirements, Transport, Wing,
};
use crate::units::StepSize;

/// What a shuffle wing's run is built from: its spec (the server half follows by closed
/// forms) and its calibrated plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShuffleWingPlan {
    /// The spec.
    pub algorithm: ShuffleAlgorithm,
    /// The calibrated plan.
    pub plan: ShufflePlan,
}

impl CheckedShuffle {
    /// The non-private server half behind the analyzer (closed forms only: a server half
    /// never adds noise).
    pub fn server_inner(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>> {
        let sgd = |eta: f64, output: OutputRule| -> crate::Result<Box<dyn ServerHalf>> {
            Ok(Box::new(MbSgdServer::new(
                ctx.init.clone(),
                StepSize::new(eta)?,
                ctx.projection,
                output,
            )))
        };
        match self.algorithm() {
            ShuffleAlgorithm::SdpMbSgd(a) => sgd(a.step_size, a.output),
            ShuffleAlgorithm::SdpAcceleratedMbSgd(a) => {
                // Checks R·K ≤ min n_i, as the AC-SA plan of this one-pass run did.
                a.batch_size(ctx)?;
                let step = StepSize::new(a.step_size)?.get();
                // AC-SA on f + (λ/2)‖w − w₀‖² with μ := λ and first step 1/(2γ)
                // (Lowy & Razaviyayn Algorithm 1's convex schedule, `lowy/acsa.rs`).
                let lambda = a.regularization.unwrap_or(0.0);
                Ok(Box::new(AcsaServer::new(
                    ctx.init.clone(),
                    ctx.projection,
                    lambda,
                    lambda,
                    AcsaSchedule::Convex {
                        gamma: 1.0 / (2.0 * step),
                    },
                )?))
            }
            ShuffleAlgorithm::Psgd(a) => {
                let (_, eta, _) = super::psgd_preset(ctx, a)?;
                sgd(eta, OutputRule::Average)
            }
            ShuffleAlgorithm::Pgd(a) => {
                let (_, eta, _) = super::pgd_preset(ctx, a)?;
                sgd(eta, OutputRule::Average)
            }
            ShuffleAlgorithm::Pagd(a) => super::pagd_preset::pagd_server(ctx, a),
            ShuffleAlgorithm::PanPrivateAcsa(a) => super::pan_plan::pan_server(ctx, a),
        }
    }

    /// Plans by building the whole federation once (the shuffle calibration needs the
    /// realised protocol); other processes build their one half from the plan.
    fn planned(self, ctx: &BuildContext) -> crate::Result<Planned<ShuffleWingPlan>> {
        let inner = self.server_inner(ctx)?;
        let (built, silos, pvec) = match self.algorithm() {
            ShuffleAlgorithm::SdpMbSgd(a) => super::build_sdp_mbsgd(ctx, a, inner)?,
            ShuffleAlgorithm::SdpAcceleratedMbSgd(a) => super::build_sdp_acsa(ctx, a, inner)?,
            ShuffleAlgorithm::Psgd(a) => super::build_psgd(ctx, a, inner)?,
            ShuffleAlgorithm::Pgd(a) => super::build_pgd(ctx, a, inner)?,
            ShuffleAlgorithm::Pagd(a) => super::build_pagd(ctx, a, inner)?,
            ShuffleAlgorithm::PanPrivateAcsa(a) => super::pan_plan::build_pan(ctx, a, inner)?,
        };
        Ok(Planned {
            calibration: built.calibration.clone(),
            plan: ShuffleWingPlan {
                algorithm: self.into_algorithm(),
                plan: ShufflePlan { silos, pvec },
            },
            built: Some(built),
        })
    }
}

impl ShuffleAlgorithm {
    /// The robust variant's honest fraction γ (PAGD only), which the quorum scales by.
    pub fn honest_fraction(&self) -> Option<f64> {
        match self {
            ShuffleAlgorithm::Pagd(a) => a.robust.map(|r| r.honest_fraction),
            ShuffleAlgorithm::SdpMbSgd(_)
            | ShuffleAlgorithm::SdpAcceleratedMbSgd(_)
            | ShuffleAlgorithm::Psgd(_)
            | ShuffleAlgorithm::Pgd(_)
            | ShuffleAlgorithm::PanPrivateAcsa(_) => None,
        }
    }

    /// The algorithm's requirements ([`Wing::requirements`]).
    pub fn requirements(&self) -> Requirements {
        match self {
            ShuffleAlgorithm::SdpMbSgd(a) => a.requirements(),
            ShuffleAlgorithm::SdpAcceleratedMbSgd(a) => a.requirements(),
            ShuffleAlgorithm::Psgd(a) => a.requirements(),
            ShuffleAlgorithm::Pgd(a) => a.requirements(),
            ShuffleAlgorithm::Pagd(a) => a.requirements(),
            ShuffleAlgorithm::PanPrivateAcsa(a) => a.requirements(),
        }
    }
}

fn shuffled(transport: Transport) -> Requirements {
    Requirements {
        shuffler: true,
        every_silo: false,
        fixed_participation: true,
        transport,
        quorum: None,
    }
}

fn pvec_transport(t: PvecTransport) -> Transport {
    match t {
        PvecTransport::Compact => Transport::PvecCompact,
        PvecTransport::Explicit => Transport::PvecExplicit,
    }
}

/// Whether the ledgers charge the honest-shuffler guarantee, so that an auditor reads what
/// that guarantee lets the server read (every silo's messages summed).
fn trusted(t: ShufflerTrust) -> bool {
    t == ShufflerTrust::Trusted
}

const SHUFFLE_REFUSAL: &str = "its guarantee is calibrated through the shuffler \
     (amplification, or the PVEC/P1D vector summation), where a Gaussian multiplier fixes no \
     epsilon";

impl Wing for SdpMbSgdSpec {
    type Plan = ShuffleWingPlan;

    fn label(&self) -> String {
        "SDP MB-SGD".into()
    }
    fn privacy(&self) -> Privacy {
        Privacy::Shuffled
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        NoiseMultiplier::Refuses(SHUFFLE_REFUSAL)
    }
    fn knobs(&self) -> Knobs {
        Knobs {
            step_size: Some(self.step_size),
            app_i_batch_floor: false,
        }
    }
    fn tuned(&self, step_size: f64, batch: Option<usize>) -> Self {
        SdpMbSgdSpec {
            step_size,
            batch_size: batch.unwrap_or(self.batch_size),
            ..self.clone()
        }
    }
    // Gaussian messages: plain transport through the shuffler.
    fn requirements(&self) -> Requirements {
        shuffled(Transport::Messages)
    }
    fn extended_metrics(&self) -> bool {
        false
    }
    fn audit_view(&self, _: &ShuffleWingPlan) -> AuditView {
        AuditView::Gradient {
            all_silos: trusted(self.shuffler),
        }
    }
    fn plan(
        params: &CheckedShuffle,
        ctx: &BuildContext,
    ) -> crate::Result<Planned<ShuffleWingPlan>> {
        params.clone().planned(ctx)
    }
}

impl Wing for SdpAcceleratedSpec {
    type Plan = ShuffleWingPlan;

    fn label(&self) -> String {
        with_rule("SDP accelerated MB-SGD (one-pass)", self.calibration)
    }
    fn privacy(&self) -> Privacy {
        Privacy::Shuffled
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        NoiseMultiplier::Refuses(SHUFFLE_REFUSAL)
    }
    fn knobs(&self) -> Knobs {
        Knobs {
            step_size: Some(self.step_size),
            app_i_batch_floor: false,
        }
    }
    fn tuned(&self, step_size: f64, batch: Option<usize>) -> Self {
        SdpAcceleratedSpec {
            step_size,
            batch_size: batch.or(self.batch_size),
            ..self.clone()
        }
    }
    fn requirements(&self) -> Requirements {
        shuffled(pvec_transport(self.transport))
    }
    fn extended_metrics(&self) -> bool {
        false
    }
    fn audit_view(&self, _: &ShuffleWingPlan) -> AuditView {
        AuditView::Gradient {
            all_silos: trusted(self.shuffler),
        }
    }
    fn plan(
        params: &CheckedShuffle,
        ctx: &BuildContext,
    ) -> crate::Result<Planned<ShuffleWingPlan>> {
        params.clone().planned(ctx)
    }
}

impl Wing for PsgdSpec {
    type Plan = ShuffleWingPlan;

    fn label(&self) -> String {
        with_rule("PSGD (shuffle)", self.calibration)
    }
    fn privacy(&self) -> Privacy {
        Privacy::Shuffled
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        NoiseMultiplier::Refuses(SHUFFLE_REFUSAL)
    }
    fn knobs(&self) -> Knobs {
        Knobs {
            step_size: self.step_size,
            app_i_batch_floor: false,
        }
    }
    fn tuned(&self, step_size: f64, batch: Option<usize>) -> Self {
        PsgdSpec {
            step_size: Some(step_size),
            batch_size: batch.or(self.batch_size),
            ..self.clone()
        }
    }
    fn requirements(&self) -> Requirements {
        shuffled(pvec_transport(self.transport))
    }
    fn extended_metrics(&self) -> bool {
        false
    }
    fn audit_view(&self, _: &ShuffleWingPlan) -> AuditView {
        AuditView::PvecCounts {
            all_silos: trusted(self.shuffler),
        }
    }
    fn plan(
        params: &CheckedShuffle,
        ctx: &BuildContext,
    ) -> crate::Result<Planned<ShuffleWingPlan>> {
        params.clone().planned(ctx)
    }
}

impl Wing for PgdSpec {
    type Plan = ShuffleWingPlan;

    fn label(&self) -> String {
        with_rule("PGD (shuffle)", self.calibration)
    }
    fn privacy(&self) -> Privacy {
        Privacy::Shuffled
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        NoiseMultiplier::Refuses(SHUFFLE_REFUSAL)
    }
    fn knobs(&self) -> Knobs {
        Knobs {
            step_size: self.step_size,
            app_i_batch_floor: false,
        }
    }
    // Every record of every silo in every round: no K to turn.
    fn tuned(&self, step_size: f64, _batch: Option<usize>) -> Self {
        PgdSpec {
            step_size: Some(step_size),
            ..self.clone()
        }
    }
    fn requirements(&self) -> Requirements {
        shuffled(pvec_transport(self.transport))
    }
    fn extended_metrics(&self) -> bool {
        false
    }
    fn audit_view(&self, _: &ShuffleWingPlan) -> AuditView {
        AuditView::PvecCounts {
            all_silos: trusted(self.shuffler),
        }
    }
    fn plan(
        params: &CheckedShuffle,
        ctx: &BuildContext,
    ) -> crate::Result<Planned<ShuffleWingPlan>> {
        params.clone().planned(ctx)
    }
}

impl Wing for PagdSpec {
    type Plan = ShuffleWingPlan;

    fn label(&self) -> String {
        with_rule("PAGD (shuffle)", self.calibration)
    }
    fn privacy(&self) -> Privacy {
        Privacy::Shuffled
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        NoiseMultiplier::Refuses(SHUFFLE_REFUSAL)
    }
    // AC-SA's steps come from the preset (L_t).
    fn knobs(&self) -> Knobs {
        Knobs {
            step_size: None,
            app_i_batch_floor: false,
        }
    }
    fn tuned(&self, _step_size: f64, batch: Option<usize>) -> Self {
        PagdSpec {
            batch_size: batch.or(self.batch_size),
            ..self.clone()
        }
    }
    fn requirements(&self) -> Requirements {
        shuffled(pvec_transport(self.transport))
    }
    fn extended_metrics(&self) -> bool {
        false
    }
    fn audit_view(&self, _: &ShuffleWingPlan) -> AuditView {
        AuditView::Gradient { all_silos: false }
    }
    fn plan(
        params: &CheckedShuffle,
        ctx: &BuildContext,
    ) -> crate::Result<Planned<ShuffleWingPlan>> {
        params.clone().planned(ctx)
    }
}

impl Wing for PanPrivateSpec {
    type Plan = ShuffleWingPlan;

    fn label(&self) -> String {
        "pan-private AC-SA".into()
    }
    fn privacy(&self) -> Privacy {
        Privacy::PanPrivate
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        NoiseMultiplier::Refuses(
            "it adds two Gaussians (state and output noise) split from one target",
        )
    }
    // AC-SA's steps come from the preset (L_t).
    fn knobs(&self) -> Knobs {
        Knobs {
            step_size: None,
            app_i_batch_floor: false,
        }
    }
    fn tuned(&self, _step_size: f64, batch: Option<usize>) -> Self {
        PanPrivateSpec {
            batch_size: batch.or(self.batch_size),
            ..self.clone()
        }
    }
    // No shuffler: each silo's noise protects it on its own.
    fn requirements(&self) -> Requirements {
        Requirements::PLAIN
    }
    fn extended_metrics(&self) -> bool {
        false
    }
    fn audit_view(&self, _: &ShuffleWingPlan) -> AuditView {
        AuditView::Gradient { all_silos: false }
    }
    fn plan(
        params: &CheckedShuffle,
        ctx: &BuildContext,
    ) -> crate::Result<Planned<ShuffleWingPlan>> {
        params.clone().planned(ctx)
    }
}

/// A PVEC algorithm's label, marked when the exact-sum accountant chose its noise (the paper
/// rule's labels are unchanged: committed results quote them).
fn with_rule(label: &str, rule: dpfl_privacy::shuffle::params::PvecRule) -> String {
    match rule {
        dpfl_privacy::shuffle::params::PvecRule::Paper => label.into(),
        dpfl_privacy::shuffle::params::PvecRule::Accountant => format!("{label}, accountant"),
    }
}
