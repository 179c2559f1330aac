//! PAGD as a config kind and its theorem-driven preset (Cheu, Joseph, Mao & Peng 2022:
//! Algorithm 4 with Theorem 4.3; Moreau-smoothed PAGD, Theorem 4.7; the strongly convex
//! phase reduction, Theorem 4.8; digest `shuffle-private-sco.md` §2.5–2.7, §2.10, §5.2).
//!
//! The preset, every quantity rounded and clamped and the whole chain written into the run
//! report (the calibration rows' formula):
//! 1. n = M·min_i n_i users in one pass; k phases (1, or ⌈log₂ log₂ n⌉ for λ-strongly convex
//!    losses, clamped to [1, R]); n_k = n/k users per phase.
//! 2. Moreau β (Thm 4.7, when `smoothing = "theory"`):
//!    β = ε^{2/3} n_k^{2/3} L / (d^{1/3} D ln^{2/3}(d/δ)); the smoothed loss is β-smooth and
//!    PVEC runs with Δ₂ = 2L (digest §2.6).
//! 3. B (Thm 4.3) = n_k^{3/5} d^{1/5} L^{2/5} ln^{2/5}(d/δ) / (ε^{2/5} β^{2/5} D^{2/5}), then
//!    K = ⌈B/M⌉ clamped to [1, ⌊min n_i/R⌋] (one pass: no user answers twice).
//! 4. σ² = L²/B + V/B² with B = M_min·K and V PVEC's exact worst-case squared error at the
//!    realised parameters (digest §5.2 item 2).
//! 5. Phases ([`phase_schedule`]): R_i = ⌊R/k⌋ rounds (the last takes the remainder), D_1 = D,
//!    L_t from [`AcsaConstants`] at (β, σ, D_i, R_i), the phase's a-priori bound
//!    Δ̂_i = βD_i²/R_i² + D_iσ/√R_i (Lemma 4.4's two terms with constant 1) and
//!    D_{i+1} = min(D_i, √(2Δ̂_i/λ)) (digest §5.2 item 6's recursion; E‖θ̂_i − θ*‖² ≤ 2Δ_i/λ).
//!
//! Decisions: one β for all phases (the silos need not know the phase; D is the largest
//! radius, so β is the smallest and the smoothing the most conservative); the constant of
//! Lemma 4.4 is unknown and taken as 1, which only tunes steps; the run's R is T (the
//! theorem's ⌊n/B⌋ is reported). Privacy never depends on any of it: each round is one PVEC
//! at the full (ε, δ) on fresh users (sequentially interactive, digest §1.4), with the
//! robust variant's ε scaling ([`super::robust`]).

// `pub` items here that only `crate::testing` re-exports (other crates' tests) are
// unreachable without the `test-hooks` feature.
#![cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]
#![warn(missing_docs)]

use serde::{Deserialize, Serialize};

use super::pagd::{AcsaConstants, PagdServer, Phase};
use super::plan::ShuffleSilo;
use super::pvec::Transport;
use super::robust::RobustSpec;
use super::trust::{PvecTarget, ShufflerTrust, plan_pvec};
use super::{Planned, PvecChoice, participants, pvec_halves, smallest_budget};
use crate::algo::checked::{ParamError, one_pass_batch};
use crate::algo::context::BuildContext;
use crate::algo::gradient::{Smoothing, SmoothingRule};
use crate::algo::half::ServerHalf;
use dpfl_privacy::shuffle::params::{PvecRule, Scale};

/// PAGD as named in a config file:
///
/// ```toml
/// [[algorithms]]
/// kind = "pagd"
/// smoothness = 0.25        # β (or smoothing = "theory" for a non-smooth loss)
/// constants = "lan"        # or "paper-ocr"
/// strong_convexity = 0.1   # optional: the phase reduction of Thm 4.8
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PagdSpec {
    /// K per silo; default Thm 4.3's B/M, clamped to one pass.
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// The AC-SA constants ([`AcsaConstants`]; default Lan's).
    #[serde(default)]
    pub constants: AcsaConstants,
    /// β: every loss is β-smooth. Required unless `smoothing` is set.
    #[serde(default)]
    pub smoothness: Option<f64>,
    /// D for the schedule; default the projection's diameter.
    #[serde(default)]
    pub diameter: Option<f64>,
    /// Moreau smoothing: a β or "theory" (Thm 4.7).
    #[serde(default)]
    pub smoothing: Option<Smoothing>,
    /// λ: every loss is λ-strongly convex; turns on the phases of Thm 4.8.
    #[serde(default)]
    pub strong_convexity: Option<f64>,
    /// The number of phases k (default ⌈log₂ log₂ n⌉ with `strong_convexity`, else 1).
    #[serde(default)]
    pub phases: Option<usize>,
    /// How PVEC's counts travel.
    #[serde(default)]
    pub transport: Transport,
    /// PVEC's treatment of Δ₂ (digest §5.2 item 7).
    #[serde(default = "super::paper_scale")]
    pub scale: Scale,
    /// The fewest silos that answer a round (PVEC is calibrated for M_min·K users).
    #[serde(default)]
    pub min_participants: Option<usize>,
    /// Whether the ledger may charge the honest-shuffler guarantee.
    #[serde(default)]
    pub shuffler: ShufflerTrust,
    /// The robust variant (Cheu et al. Cor. A.9) and its simulated adversaries.
    #[serde(default)]
    pub robust: Option<RobustSpec>,
    /// How PVEC's noise bits are chosen: `paper` (Cheu et al. Theorem 3.2's constants, the
    /// default, for reproduction) or `accountant` (the fewest bits whose release meets the
    /// (ε, δ) by the exact-sum accountant, `dpfl_privacy::shuffle::pvec_exact`; issue 32).
    #[serde(default)]
    pub calibration: PvecRule,
}

/// The AC-SA tuning PAGD and pan-private AC-SA share.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// K, if given.
    pub batch_size: Option<usize>,
    /// The AC-SA constants.
    pub constants: AcsaConstants,
    /// β, if given.
    pub smoothness: Option<f64>,
    /// D, if given.
    pub diameter: Option<f64>,
    /// Moreau smoothing.
    pub smoothing: Option<Smoothing>,
    /// λ.
    pub strong_convexity: Option<f64>,
    /// k, if given.
    pub phases: Option<usize>,
    /// The log factor ℓ of the rates: ln(d/δ) for PVEC; √ln(1/δ) pan-privately (Thm C.3's
    /// substitution ln²(d/δ) → ln(1/δ) in the variance).
    pub log_factor: f64,
    /// How the report writes ℓ.
    pub log_label: &'static str,
    /// The per-round ε PVEC (or the Gaussian) is calibrated at.
    pub epsilon: f64,
}

impl PagdSpec {
    /// The tuning view of this spec at per-round ε `epsilon`.
    pub fn tuning(&self, ctx: &BuildContext, epsilon: f64) -> crate::Result<Tuning> {
        let (_, delta) = smallest_budget(ctx)?;
        Ok(Tuning {
            batch_size: self.batch_size,
            constants: self.constants,
            smoothness: self.smoothness,
            diameter: self.diameter,
            smoothing: self.smoothing,
            strong_convexity: self.strong_convexity,
            phases: self.phases,
            log_factor: (ctx.federation.dim as f64 / delta).ln().max(1.0),
            log_label: "ln(d/delta)",
            epsilon,
        })
    }

    /// The per-round ε PVEC is calibrated at: the budget, times γ in the robust variant.
    pub fn round_epsilon(&self, ctx: &BuildContext) -> crate::Result<f64> {
        let (eps, _) = smallest_budget(ctx)?;
        match &self.robust {
            Some(r) => r.calibration_epsilon(eps),
            None => Ok(eps),
        }
    }
}

/// What the tuning fixes before the noise is known.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    /// K per silo.
    pub k: usize,
    /// The Moreau β, if smoothing.
    pub moreau: Option<f64>,
    /// The gradient bound the mechanism sees: L, or 2L when smoothed.
    pub lipschitz: f64,
    /// The smoothness the schedule uses (given β, or the Moreau β).
    pub beta: f64,
    /// D.
    pub diameter: f64,
    /// k phases.
    pub phases: usize,
    /// The report's explanation so far.
    pub note: String,
}

/// Steps 1–3 of the module doc.
pub(crate) fn shape(ctx: &BuildContext, t: &Tuning) -> crate::Result<Shape> {
    let eps = t.epsilon;
    let d = ctx.federation.dim as f64;
    let m = participants(ctx);
    let rounds = ctx.federation.rounds.max(1);
    let n_min = ctx.silos.iter().map(|s| s.records).min().unwrap_or(0);
    // D given is checked by the guard (`super::guard`); the projection's may be infinite.
    let diameter = t.diameter.unwrap_or_else(|| ctx.projection.diameter());
    if !diameter.is_finite() {
        return Err(ParamError::missing(
            "diameter",
            "the AC-SA schedule needs D: give diameter or a bounded projection",
        )
        .into());
    }
    let n = (m * n_min).max(1) as f64;
    let phases = match (t.phases, t.strong_convexity) {
        (Some(k), _) => k,
        (None, Some(_)) => n.log2().max(1.0).log2().ceil().max(1.0) as usize,
        (None, None) => 1,
    }
    .clamp(1, rounds);
    let n_k = n / phases as f64;
    let l = ctx.lipschitz;
    let (moreau, beta, lipschitz, smooth_note) = match t.smoothing {
        None => {
            // The guard requires β without smoothing (and checks it).
            let beta = t.smoothness.ok_or_else(|| {
                ParamError::missing("smoothness", "or Moreau smoothing (smoothing = \"theory\")")
            })?;
            (None, beta, l, String::new())
        }
        Some(s) => {
            let (b, how) = match s {
                Smoothing::Beta(b) => (b, "given".to_string()),
                Smoothing::Rule(SmoothingRule::Theory) => (
                    super::moreau::theory_beta(eps, n_k, l, d, diameter, t.log_factor)?,
                    format!(
                        "= eps^(2/3) n^(2/3) L/(d^(1/3) D [{}]^(2/3)) (Thm 4.7)",
                        t.log_label
                    ),
                ),
            };
            (
                Some(b),
                b,
                2.0 * l,
                format!(", Moreau beta = {b:.4e} {how}, Delta2 = 2L = {}", 2.0 * l),
            )
        }
    };
    let lf = t.log_factor;
    let b_theory = n_k.powf(0.6) * d.powf(0.2) * lipschitz.powf(0.4) * lf.powf(0.4)
        / (eps.powf(0.4) * beta.powf(0.4) * diameter.powf(0.4));
    let k_max = n_min / rounds;
    let k = match t.batch_size {
        Some(k) => k,
        None => ((b_theory / m as f64).ceil() as usize).clamp(1, k_max.max(1)),
    };
    one_pass_batch(k, rounds, n_min)?;
    let note = format!(
        "; AC-SA preset (Cheu et al. Thm 4.3{}): n = M min n_i = {n}, {phases} phase(s), D = {diameter}, beta = {beta:.4e}{smooth_note}, B = n^(3/5) d^(1/5) L^(2/5) [{}]^(2/5)/(eps^(2/5) beta^(2/5) D^(2/5)) = {b_theory:.1}, K = {k} per silo (B = M K = {}, at most min n_i/R = {k_max}; theorem's T = n/B = {:.0}, run's T = R = {rounds})",
        if phases > 1 { ", 4.8" } else { "" },
        t.log_label,
        m * k,
        n_k / (m * k) as f64,
    );
    Ok(Shape {
        k,
        moreau,
        lipschitz,
        beta,
        diameter,
        phases,
        note,
    })
}

/// Step 5 of the module doc: the phases and their report.
pub fn phase_schedule(
    constants: AcsaConstants,
    beta: f64,
    sigma: f64,
    diameter: f64,
    lambda: Option<f64>,
    phases: usize,
    rounds: usize,
) -> (Vec<Phase>, String) {
    let k = phases.clamp(1, rounds.max(1));
    let per = (rounds / k).max(1);
    let mut radius = diameter;
    let mut out = Vec::with_capacity(k);
    let mut text = Vec::with_capacity(k);
    for i in 0..k {
        let r = if i + 1 == k {
            rounds.saturating_sub(per * (k - 1)).max(1)
        } else {
            per
        } as u64;
        let numerator = constants.numerator(beta, sigma, radius, r);
        let bound = beta * radius * radius / (r * r) as f64 + radius * sigma / (r as f64).sqrt();
        out.push(Phase {
            rounds: r,
            numerator,
            radius,
        });
        text.push(format!(
            "phase {}: R_i = {r}, D_i = {radius:.4e}, L_t = {numerator:.4e}/(t+1), bound {bound:.4e}",
            i + 1
        ));
        if let Some(l) = lambda {
            radius = radius.min((2.0 * bound / l).sqrt());
        }
    }
    (
        out,
        format!(
            "; schedule ({}; sigma = {sigma:.4e}): {}",
            constants.name(),
            text.join("; ")
        ),
    )
}

/// PAGD's PVEC target at K per silo (the same one the silos are built with).
pub(crate) fn pvec_target(
    ctx: &BuildContext,
    spec: &PagdSpec,
    k: usize,
    l2: f64,
) -> crate::Result<PvecTarget> {
    let m_min = spec.min_participants.unwrap_or(participants(ctx));
    let (eps, delta) = smallest_budget(ctx)?;
    Ok(PvecTarget {
        users: (m_min.max(1) as u64).saturating_mul(k as u64),
        d: ctx.federation.dim,
        l2_bound: l2,
        scale: spec.scale,
        round: (spec.round_epsilon(ctx)?, delta),
        uses: 1,
        budget: (eps, delta),
        rule: spec.calibration,
    })
}

/// The end both presets share (PAGD's and pan-private AC-SA's, step 5): the phases at the
/// oracle's standard deviation σ, and the shape's note extended by `sigma_note` (how σ was
/// formed) and the schedule.
pub(crate) fn phases_at(
    ctx: &BuildContext,
    t: &Tuning,
    mut s: Shape,
    sigma: f64,
    sigma_note: &str,
) -> (Shape, Vec<Phase>) {
    let (phases, text) = phase_schedule(
        t.constants,
        s.beta,
        sigma,
        s.diameter,
        t.strong_convexity,
        s.phases,
        ctx.federation.rounds,
    );
    s.note = format!("{}{sigma_note}{text}", s.note);
    (s, phases)
}

/// The AC-SA server half of PAGD and pan-private AC-SA ([`PagdServer`]) on `phases`.
pub(crate) fn acsa_server(
    ctx: &BuildContext,
    constants: AcsaConstants,
    phases: Vec<Phase>,
) -> crate::Result<Box<dyn ServerHalf>> {
    Ok(Box::new(PagdServer::new(
        ctx.init.clone(),
        ctx.projection,
        constants,
        phases,
    )?))
}

/// The whole preset: the shape, σ from the realised PVEC and the phases.
pub(crate) fn pagd_preset(
    ctx: &BuildContext,
    spec: &PagdSpec,
) -> crate::Result<(Shape, Vec<Phase>)> {
    let tuning = spec.tuning(ctx, spec.round_epsilon(ctx)?)?;
    let s = shape(ctx, &tuning)?;
    let target = pvec_target(ctx, spec, s.k, s.lipschitz)?;
    let plan = plan_pvec(&target, s.k as u64, spec.shuffler)?;
    let b = target.users as f64;
    let v = plan.params.variance_bound();
    let sigma = (s.lipschitz * s.lipschitz / b + v / (b * b)).sqrt();
    let note = format!("; sigma^2 = L^2/B + V/B^2 with V = {v:.4e} (PVEC's exact bound)");
    Ok(phases_at(ctx, &tuning, s, sigma, &note))
}

/// PAGD's server half (closed forms only; the analyzer goes in front of it).
pub(crate) fn pagd_server(
    ctx: &BuildContext,
    spec: &PagdSpec,
) -> crate::Result<Box<dyn ServerHalf>> {
    let (_, phases) = pagd_preset(ctx, spec)?;
    acsa_server(ctx, spec.constants, phases)
}

/// PAGD's halves around `server` (PAGD's AC-SA, [`pagd_server`]): PVEC silos
/// on the (smoothed) loss, with the robust variant's adversaries in place of the last silos.
pub(crate) fn build_pagd(
    ctx: &BuildContext,
    spec: &PagdSpec,
    server: Box<dyn ServerHalf>,
) -> crate::Result<Planned> {
    if let Some(r) = &spec.robust {
        r.check(ctx.federation.silos)?;
    }
    let (shape, _) = pagd_preset(ctx, spec)?;
    let round_epsilon = spec.round_epsilon(ctx)?;
    let pvec = PvecChoice {
        transport: spec.transport,
        scale: spec.scale,
        min_participants: spec.min_participants,
        trust: spec.shuffler,
        moreau: shape.moreau,
        round_epsilon: Some(round_epsilon),
        robust_gamma: spec.robust.map(|r| r.honest_fraction),
        rule: spec.calibration,
    };
    let mut note = shape.note.clone();
    if let Some(r) = &spec.robust {
        note.push_str(&r.describe(round_epsilon, smallest_budget(ctx)?.1));
    }
    let (mut built, mut planned, pvec_plan) =
        pvec_halves(ctx, shape.k, &pvec, server, "Cheu et al. Alg. 4", &note)?;
    let Some(r) = spec.robust.filter(|r| r.adversaries > 0) else {
        return Ok((built, planned, pvec_plan));
    };
    let n = planned.len();
    for (i, entry) in planned.iter_mut().enumerate() {
        if !r.is_adversary(i, n) {
            continue;
        }
        // Smoothing stays outermost, so a flipping liar negates the smoothed gradient.
        let adversarial = |inner: ShuffleSilo| ShuffleSilo::Adversarial {
            behaviour: r.behaviour,
            inner: Box::new(inner),
        };
        *entry = match entry.clone() {
            ShuffleSilo::Smoothed { beta, inner } => ShuffleSilo::Smoothed {
                beta,
                inner: Box::new(adversarial(*inner)),
            },
            other => adversarial(other),
        };
    }
    let plan = super::plan::ShufflePlan {
        silos: planned.clone(),
        pvec: pvec_plan.clone(),
    };
    for (i, half) in built.silos.iter_mut().enumerate() {
        if r.is_adversary(i, n) {
            *half = plan.silo_half(ctx, i)?;
        }
    }
    if plan.has_dropouts() {
        built.server = Box::new(super::robust::AbsentFilter {
            inner: built.server,
        });
    }
    Ok((built, planned, pvec_plan))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_schedule_by_hand() {
        // β = 1, σ = 1, D = 4, λ = 1, 2 phases of R = 8 rounds → 4 each (Lan):
        // phase 1: A = 2·max(2, 6^{1.5}·1/4) = 2·3.6742 = 7.3485; bound = 16/16 + 4/2 = 3;
        // D_2 = min(4, √(2·3/1)) = √6 = 2.4495; A_2 = 2·max(2, 14.697/2.4495) = 12.
        let (p, text) = phase_schedule(AcsaConstants::Lan, 1.0, 1.0, 4.0, Some(1.0), 2, 8);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].rounds, p[1].rounds), (4, 4));
        assert!((p[0].numerator - 2.0 * 6f64.powf(1.5) / 4.0).abs() < 1e-12);
        assert!((p[1].radius - 6f64.sqrt()).abs() < 1e-12);
        assert!((p[1].numerator - 12.0).abs() < 1e-9, "{}", p[1].numerator);
        assert!(text.contains("phase 2"), "{text}");
        // The last phase takes the remainder; more phases than rounds are clamped.
        let (p, _) = phase_schedule(AcsaConstants::Lan, 1.0, 1.0, 4.0, Some(1.0), 3, 10);
        assert_eq!(
            p.iter().map(|p| p.rounds).collect::<Vec<_>>(),
            vec![3, 3, 4]
        );
        let (p, _) = phase_schedule(AcsaConstants::Lan, 1.0, 1.0, 4.0, None, 9, 2);
        assert_eq!(p.len(), 2);
        // Without λ the radius never shrinks.
        assert_eq!(p[1].radius, 4.0);
    }
}
