//! The shuffle-model wing (issue 15): Lowy & Razaviyayn §5 (digest `isrl-dp-fl.md` §2.4–2.5)
//! on the protocols of `dpfl_privacy::shuffle` (Cheu, Joseph, Mao & Peng 2022).
//!
//! - `kind = "sdp-mb-sgd"` — **Shuffled Noisy MB-SGD** (Thm 5.1 / G.1): Algorithm 2 with a
//!   shuffler; each silo's Gaussian noise is calibrated so that the shuffled reports meet the
//!   silo's (ε, δ) against the server (`calibration.rs`); silo half = the floor's
//!   `GradientSilo`, server half = the floor's `MbSgdServer` (`wing.rs`).
//! - `kind = "sdp-accelerated-mb-sgd"` — **SDP One-Pass Accelerated Noisy MB-SGD**
//!   (Algorithm 6, Thm 5.2 / G.2): PVEC over the K per-record gradients of each silo's
//!   disjoint batch, no Gaussian noise (`pvec.rs`); the analyzer sits in front of the floor's
//!   AC-SA server half (`crate::algo::acsa_server`, `wing.rs`).
//!
//! Both need the simulator's shuffle stage: their `Requirements` (`wing.rs`) turn it on, and
//! both assume a fixed number M of answering silos (Assumption of §5; the experiment refuses
//! other participation rules for them).
//!
//! What each silo's ledger charges depends on `shuffler` (`trust.rs`; default `untrusted`):
//! untrusted, the guarantee that holds whatever the shuffler does (SDP MB-SGD: the silo's own
//! Gaussian; PVEC silos: their own binomial noise, `dpfl_privacy::shuffle::local`), and the
//! protocol is calibrated so that it meets the budget; trusted, the honest-shuffler guarantee.
//! Every calibration row reports both.
//!
//! Amplification by shuffling needs one randomizer for every report of a shuffle (FMT 2021
//! Thm 3.2; issue 27 finding 1): under a trusted shuffler Shuffled Noisy MB-SGD runs the
//! strictest silo's σ in every silo, and each silo is charged the amplified guarantee of that
//! common randomizer at its own δ̂₀ and q_i = K/n_i ((`calibration.rs`, `shared_round`)); we chose
//! this over refusing runs whose silos differ. The PVEC algorithms already run one PVEC (at the
//! smallest budget) for every user of every silo.
//!
//! - `kind = "psgd"` — **PSGD** (Cheu et al. Algorithm 3, Thm 4.1): PVEC silos as above in
//!   front of MB-SGD's server (projected step, average iterate); B and η from Thm 4.1
//!   ([`psgd_preset`]). A round's B users are the M answering silos' K fresh records each.
//! - `kind = "pgd"` — **PGD** (Algorithm 5, Lemma B.6): every record of every silo in every
//!   round, per-round (ε₀, δ₀) from digest §5.2 item 5, checked by advanced composition
//!   ([`pgd_preset`]); each round's event is charged (fully interactive).
//!
//! - `kind = "pagd"` — **PAGD** (Algorithm 4, Thm 4.3; `pagd.rs`, `pagd_preset.rs`): PVEC
//!   silos in front of AC-SA with Lan's (default) or the OCR's constants; Moreau smoothing
//!   for non-smooth losses (Thm 4.7, `moreau.rs`); the strongly convex phases (Thm 4.8); the
//!   robust variant (Cor. A.9, `robust.rs`).
//! - `kind = "pan-private-acsa"` — **pan-private AC-SA** (Algorithm 6, Thm C.3; `pan.rs`): no
//!   shuffler; each silo's accumulator is noised before and after its batch.
//!
//! **API boundary:** the six configs (`SdpMbSgdSpec`, `SdpAcceleratedSpec`, `PsgdSpec`,
//! `PgdSpec`, [`PagdSpec`], [`PanPrivateSpec`]) and the types their fields name
//! ([`SdpCalibration`], [`ShufflerTrust`], [`Transport`], [`AcsaConstants`], [`RobustSpec`],
//! [`Behaviour`]); the plan `WingPlan` holds ([`ShuffleWingPlan`], [`ShufflePlan`],
//! [`ShuffleSilo`], [`Against`]); Cheu et al.'s presets ([`psgd_preset`], [`pgd_preset`]); the
//! PVEC reply labels a transport routes on ([`TO_SHUFFLER`], [`TO_SERVER`]); and
//! [`charges_trusted_shuffler`], which the experiment reads off a calibration row. The halves,
//! the calibration chain, PVEC's planning and the robust variant's adversaries are
//! crate-private (their unit tests sit beside them and in `src/mechanism_tests.rs`);
//! `crate::testing::shuffle` (feature `test-hooks`) names the few that `dpfl-lab`'s Monte Carlo
//! tests drive directly.

pub(crate) mod calibration;
pub(crate) mod guard;
pub(crate) mod honest;
pub(crate) mod moreau;
pub(crate) mod pagd;
pub(crate) mod pagd_preset;
pub(crate) mod pan;
pub(crate) mod pan_plan;
pub(crate) mod plan;
mod presets;
pub(crate) mod pvec;
pub(crate) mod robust;
mod sdp;
pub(crate) mod trust;
pub(crate) mod wing;

// The wing's public face (issue 28 item 5): the configs and the types their fields name, the
// plan `WingPlan` holds, Cheu et al.'s presets, the PVEC reply labels a transport routes on,
// and how a calibration row says it charges a trusted shuffler. Everything else is
// crate-private; `crate::testing` names what other crates' tests probe.
pub use calibration::SdpCalibration;
pub use pagd::AcsaConstants;
pub use pagd_preset::PagdSpec;
pub(crate) use pagd_preset::build_pagd;
pub use pan::PanPrivateSpec;
pub use plan::{ShufflePlan, ShuffleSilo};
pub use presets::{pgd_preset, psgd_preset};
pub use pvec::{Against, TO_SERVER, TO_SHUFFLER, Transport};
pub use robust::{Behaviour, RobustSpec};
pub(crate) use sdp::build_sdp_mbsgd;
pub use trust::{ShufflerTrust, charges_trusted_shuffler};
pub use wing::ShuffleWingPlan;

use serde::{Deserialize, Serialize};

use dpfl_privacy::shuffle::params::{PvecRule, Scale};

use self::plan::PvecPlanned;
use self::pvec::{PvecServer, PvecSilo};
use self::trust::{PvecTarget, describe, plan_pvec, silo_guarantees};
use crate::algo::checked::{at_most, one_pass_batch};
use crate::algo::context::{BuildContext, BuiltAlgorithm, SiloCalibration, count_calibration};

/// A wing's whole federation with its plan's silos and PVEC parameters.
pub(crate) type Planned = (BuiltAlgorithm, Vec<ShuffleSilo>, Option<PvecPlanned>);
use crate::algo::half::{ServerHalf, SiloHalf};
use crate::algo::server::OutputRule;

fn one() -> usize {
    1
}

/// Shuffled Noisy MB-SGD as named in a config file:
///
/// ```toml
/// [[algorithms]]
/// kind = "sdp-mb-sgd"
/// step_size = 0.5
/// calibration = { kind = "accountant" }   # or { kind = "theory", constant = 1.0 }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SdpMbSgdSpec {
    /// η of every round.
    pub step_size: f64,
    /// How σ is chosen: Lowy & Razaviyayn Thm 5.1/G.1 with a given constant (`theory`), or
    /// the proof's chain with FMT 2021 amplification solved numerically (`accountant`).
    pub calibration: SdpCalibration,
    /// K (the theorem's proof has K = 1, the default).
    #[serde(default = "one")]
    pub batch_size: usize,
    /// Which iterate the run returns: the average (default), the last, or exponentially
    /// weighted (strongly convex case).
    #[serde(default)]
    pub output: OutputRule,
    /// Which guarantee each silo's ledger charges: its own ISRL-DP noise (`untrusted`,
    /// default) or the FMT-amplified guarantee that needs an honest shuffler (`trusted`).
    #[serde(default)]
    pub shuffler: ShufflerTrust,
}

/// SDP One-Pass Accelerated Noisy MB-SGD as named in a config file:
///
/// ```toml
/// [[algorithms]]
/// kind = "sdp-accelerated-mb-sgd"
/// step_size = 1.0        # AC-SA's first step 1/(2γ)
/// transport = "compact"  # or "explicit" (tiny parameters only)
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SdpAcceleratedSpec {
    /// The first step α₁/η₁ of AC-SA's convex schedule (Algorithm 6).
    pub step_size: f64,
    /// K for every silo; default ⌊min_i n_i / R⌋ (one pass).
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// λ of f + (λ/2)‖w − w₀‖².
    #[serde(default)]
    pub regularization: Option<f64>,
    /// How PVEC's messages travel: `compact` (additive shares of per-label counts mod 2⁶⁴,
    /// default) or `explicit` (every one-bit message shuffled; tiny parameters only). Both
    /// give the analyzer the same statistic.
    #[serde(default)]
    pub transport: Transport,
    /// PVEC's treatment of Δ₂ = L (Cheu et al. §5.2 item 7): `Paper` or `Unit`.
    #[serde(default = "paper_scale")]
    pub scale: Scale,
    /// The fewest silos that answer a round (PVEC is calibrated for M_min·K users); default M.
    #[serde(default)]
    pub min_participants: Option<usize>,
    /// Whether the ledger may charge the honest-shuffler guarantee (`trust.rs`).
    #[serde(default)]
    pub shuffler: ShufflerTrust,
    /// How PVEC's noise bits are chosen: `paper` (Cheu et al. Theorem 3.2's constants, the
    /// default, for reproduction) or `accountant` (the fewest bits whose release meets the
    /// (ε, δ) by the exact-sum accountant, `dpfl_privacy::shuffle::pvec_exact`; issue 32).
    #[serde(default)]
    pub calibration: PvecRule,
}

pub(crate) fn paper_scale() -> Scale {
    Scale::Paper
}

impl SdpAcceleratedSpec {
    /// K: the configured one or ⌊min n_i / R⌋, checked to allow R rounds in one pass.
    pub fn batch_size(&self, ctx: &BuildContext) -> crate::Result<usize> {
        let n_min = ctx.silos.iter().map(|s| s.records).min().unwrap_or(0);
        let rounds = ctx.federation.rounds.max(1);
        let k = self.batch_size.unwrap_or(n_min / rounds);
        Ok(one_pass_batch(k, rounds, n_min)?)
    }
}

/// The fixed M the §5 theorems assume (the experiment allows only `all` or `fixed`
/// participation for shuffle algorithms, where the expected M is exact).
pub(crate) fn participants(ctx: &BuildContext) -> usize {
    (ctx.federation.expected_participants.floor() as usize).clamp(1, ctx.federation.silos.max(1))
}

/// SDP one-pass accelerated MB-SGD's halves: PVEC silos and the analyzer in front of
/// `server` (AC-SA's server half).
pub(crate) fn build_sdp_acsa(
    ctx: &BuildContext,
    spec: &SdpAcceleratedSpec,
    server: Box<dyn ServerHalf>,
) -> crate::Result<Planned> {
    let k = spec.batch_size(ctx)?;
    let pvec = PvecChoice {
        transport: spec.transport,
        scale: spec.scale,
        min_participants: spec.min_participants,
        trust: spec.shuffler,
        rule: spec.calibration,
        ..PvecChoice::plain()
    };
    pvec_halves(ctx, k, &pvec, server, "Lowy & Razaviyayn Alg. 6", "")
}

/// PSGD (Cheu et al. 2022 Algorithm 3) as named in a config file: each round every silo
/// contributes K fresh records (one pass, so no user answers twice: sequentially
/// interactive), PVEC sums their gradients, the server takes a projected step and outputs
/// the average iterate.
///
/// ```toml
/// [[algorithms]]
/// kind = "psgd"          # Thm 4.1's B and η unless given (η needs a bounded projection)
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PsgdSpec {
    /// η; default Thm 4.1's D·ε·B/(L·√T·(εB + √d·ln(d/δ))).
    #[serde(default)]
    pub step_size: Option<f64>,
    /// K per silo; default ⌈B/M⌉ with Thm 4.1's B = √d·ln(d/δ)/ε, at most ⌊min n_i/R⌋.
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// How PVEC's messages travel: `compact` (additive shares of per-label counts mod 2⁶⁴,
    /// default) or `explicit` (every one-bit message shuffled; tiny parameters only).
    #[serde(default)]
    pub transport: Transport,
    /// PVEC's treatment of Δ₂ = L (Cheu et al. §5.2 item 7): `Paper` (g ≥ 2L√n, the
    /// default) or `Unit` (gradients divided by L, run at Δ₂ = 1, output multiplied by L).
    #[serde(default = "paper_scale")]
    pub scale: Scale,
    /// The fewest silos that answer a round (PVEC is calibrated for M_min·K users); default M.
    #[serde(default)]
    pub min_participants: Option<usize>,
    /// Which guarantee each silo's ledger charges: the one without a trusted shuffler
    /// (Cheu et al. Lemma A.1 on the silo's own binomial noise; `untrusted`, default) or
    /// Theorem 3.2's shuffle-DP guarantee (`trusted`).
    #[serde(default)]
    pub shuffler: ShufflerTrust,
    /// How PVEC's noise bits are chosen: `paper` (Cheu et al. Theorem 3.2's constants, the
    /// default, for reproduction) or `accountant` (the fewest bits whose release meets the
    /// (ε, δ) by the exact-sum accountant, `dpfl_privacy::shuffle::pvec_exact`; issue 32).
    #[serde(default)]
    pub calibration: PvecRule,
}

/// PSGD's halves around `server` (MB-SGD's server: projected step, average iterate).
pub(crate) fn build_psgd(
    ctx: &BuildContext,
    spec: &PsgdSpec,
    server: Box<dyn ServerHalf>,
) -> crate::Result<Planned> {
    let (k, _, note) = psgd_preset(ctx, spec)?;
    let pvec = PvecChoice {
        transport: spec.transport,
        scale: spec.scale,
        min_participants: spec.min_participants,
        trust: spec.shuffler,
        rule: spec.calibration,
        ..PvecChoice::plain()
    };
    pvec_halves(ctx, k, &pvec, server, "Cheu et al. Alg. 3", &note)
}

/// How the PVEC silos of an algorithm are configured.
pub(crate) struct PvecChoice {
    pub(crate) transport: Transport,
    pub(crate) scale: Scale,
    pub(crate) min_participants: Option<usize>,
    pub(crate) trust: ShufflerTrust,
    /// The Moreau β the silos smooth their loss with (PVEC's Δ₂ is then 2L).
    pub(crate) moreau: Option<f64>,
    /// The per-round ε PVEC is calibrated at (default the smallest budget).
    pub(crate) round_epsilon: Option<f64>,
    /// γ of the robust variant: a trusted shuffler's charge is ε_c/γ.
    pub(crate) robust_gamma: Option<f64>,
    /// How PVEC's noise bits are chosen.
    pub(crate) rule: PvecRule,
}

impl PvecChoice {
    fn plain() -> Self {
        PvecChoice {
            transport: Transport::Compact,
            scale: Scale::Paper,
            min_participants: None,
            trust: ShufflerTrust::Untrusted,
            moreau: None,
            round_epsilon: None,
            robust_gamma: None,
            rule: PvecRule::Paper,
        }
    }
}

/// The smallest (ε, δ) of any silo: one PVEC serves every user, so it meets the tightest
/// budget (never under-protects).
pub(crate) fn smallest_budget(ctx: &BuildContext) -> crate::Result<(f64, f64)> {
    let mut eps = f64::INFINITY;
    let mut delta = f64::INFINITY;
    for s in &ctx.silos {
        let (e, d) = ctx.budget(s)?;
        eps = eps.min(e.get());
        delta = delta.min(d.get());
    }
    if !eps.is_finite() {
        return Err(crate::Error::config("silos", "no silo"));
    }
    Ok((eps, delta))
}

/// PVEC silos (K records each per round) and the analyzer in front of `server`.
pub(crate) fn pvec_halves(
    ctx: &BuildContext,
    k: usize,
    choice: &PvecChoice,
    server: Box<dyn ServerHalf>,
    cite: &str,
    note: &str,
) -> crate::Result<Planned> {
    let n_silos = ctx.federation.silos;
    // M_min ≥ 1 is the guard's (`guard`); at most N needs the federation.
    let m_min = at_most(
        "min_participants",
        choice.min_participants.unwrap_or(participants(ctx)),
        "N",
        n_silos,
    )?;
    let (eps, delta) = smallest_budget(ctx)?;
    let (oracle, l2) = crate::algo::gradient::smoothed_oracle(ctx, choice.moreau)?;
    let target = PvecTarget {
        users: (m_min as u64).saturating_mul(k as u64),
        d: ctx.federation.dim,
        l2_bound: l2,
        scale: choice.scale,
        round: (choice.round_epsilon.unwrap_or(eps), delta),
        uses: 1,
        budget: (eps, delta),
        rule: choice.rule,
    };
    if choice.rule == PvecRule::Accountant && choice.robust_gamma.is_some() {
        return Err(crate::Error::config(
            "algorithm.calibration",
            "calibration = \"accountant\" is not combined with the robust variant (its γ scaling is Theorem 3.2's)",
        ));
    }
    let plan = plan_pvec(&target, k as u64, choice.trust)?;
    let params = plan.params;
    // Every silo's summed counts must stay below 2⁶⁴ for the share arithmetic.
    params
        .p1d
        .bits_per_user()
        .checked_mul(k as u64)
        .and_then(|v| v.checked_mul(n_silos as u64))
        .ok_or_else(|| crate::Error::config("algorithm.batch_size", "N·K·(g + s) overflows u64"))?;
    let rounds = ctx.federation.rounds;
    let mut silos: Vec<Box<dyn SiloHalf>> = Vec::with_capacity(ctx.silos.len());
    let mut report = Vec::with_capacity(ctx.silos.len());
    let mut g = silo_guarantees(&plan, &target, k as u64, choice.trust)?;
    if let (Some(gamma), ShufflerTrust::Trusted) = (choice.robust_gamma, choice.trust) {
        // Cor. A.9: with only a γ fraction honest the round is (ε_c/γ, δ).
        g.charged.0 /= gamma;
        g.against = Against::HonestShuffler {
            honest_fraction: Some(gamma),
        };
    }
    let both = describe(&plan, &target, &g, choice.trust);
    let mut planned = Vec::with_capacity(ctx.silos.len());
    for s in &ctx.silos {
        count_calibration();
        let entry = ShuffleSilo::Pvec {
            records: s.records,
            batch_size: k,
            full: false,
            against: g.against,
        };
        planned.push(match choice.moreau {
            Some(beta) => ShuffleSilo::Smoothed {
                beta,
                inner: Box::new(entry),
            },
            None => entry,
        });
        let silo = PvecSilo::new(
            oracle.clone(),
            plan.pvec.clone(),
            choice.transport,
            s.records,
            k,
            g.against,
        )?;
        report.push(SiloCalibration {
            silo: s.id,
            sigma: silo.noise_std(),
            batch_size: k,
            formula: format!(
                "PVEC (Cheu et al. 2022 Thm 3.2; {cite}) for n = {} users, d = {}, L = {}: g = {}, s = {}, p = {:.6}, E||PVEC - sum||^2 <= {:.4e}, calibrated at (eps, delta) = ({:.4}, {delta}) per disjoint batch; {both}{note}",
                target.users,
                params.d,
                l2,
                params.p1d.g,
                params.p1d.s,
                params.p1d.p,
                params.variance_bound(),
                plan.round.0,
            ),
            run_event: silo.round_event(crate::units::Round::FIRST).map(|e| e.repeated(rounds as u64)),
        });
        silos.push(Box::new(silo));
    }
    let pvec = PvecPlanned {
        params,
        transport: choice.transport,
        batch_size: Some(k),
        users: target.users,
    };
    Ok((
        BuiltAlgorithm {
            server: Box::new(PvecServer::new(server, plan.pvec, choice.transport, k)),
            silos,
            calibration: report,
        },
        planned,
        Some(pvec),
    ))
}

/// PGD (Cheu et al. 2022 Algorithm 5, Lemma B.6) as named in a config file: fully
/// interactive full-batch gradient descent, every record of every silo in every round's PVEC
/// at a per-round (ε₀, δ₀) that advanced composition over the R rounds must certify (checked).
///
/// ```toml
/// [[algorithms]]
/// kind = "pgd"           # η = D/(L√T) (Lemma B.6) unless given
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PgdSpec {
    /// η; default D/(L√T) (Cheu et al. 2022 Lemma B.6; needs a bounded projection).
    #[serde(default)]
    pub step_size: Option<f64>,
    /// How PVEC's messages travel: `compact` (additive shares of per-label counts mod 2⁶⁴,
    /// default) or `explicit` (every one-bit message shuffled; tiny parameters only).
    #[serde(default)]
    pub transport: Transport,
    /// PVEC's treatment of Δ₂ = L (Cheu et al. §5.2 item 7): `Paper` (g ≥ 2L√n, the
    /// default) or `Unit` (gradients divided by L, run at Δ₂ = 1, output multiplied by L).
    #[serde(default = "paper_scale")]
    pub scale: Scale,
    /// Which guarantee each silo's ledger charges per round: the one without a trusted
    /// shuffler (Cheu et al. Lemma A.1; `untrusted`, default) or the per-round (ε₀, δ₀) of
    /// Theorem 3.2, composed over the T rounds (`trusted`).
    #[serde(default)]
    pub shuffler: ShufflerTrust,
    /// How PVEC's noise bits are chosen: `paper` (Cheu et al. Theorem 3.2's constants, the
    /// default, for reproduction) or `accountant` (the fewest bits whose release meets the
    /// (ε, δ) by the exact-sum accountant, `dpfl_privacy::shuffle::pvec_exact`; issue 32).
    #[serde(default)]
    pub calibration: PvecRule,
}

/// PGD's halves around `server` (MB-SGD's server: projected step, average iterate). Needs
/// every silo in every round (the analyzer divides by all n = Σ n_i users).
pub(crate) fn build_pgd(
    ctx: &BuildContext,
    spec: &PgdSpec,
    server: Box<dyn ServerHalf>,
) -> crate::Result<Planned> {
    if participants(ctx) != ctx.federation.silos {
        return Err(crate::Error::config(
            "participation",
            "PGD is fully interactive: every silo answers every round (participation = all)",
        ));
    }
    let ((eps0, delta0), _, note) = pgd_preset(ctx, spec)?;
    let users: u64 = ctx.silos.iter().map(|s| s.records as u64).sum();
    let rounds = ctx.federation.rounds;
    let target = PvecTarget {
        users,
        d: ctx.federation.dim,
        l2_bound: ctx.lipschitz,
        scale: spec.scale,
        round: (eps0, delta0),
        uses: rounds.max(1) as u64,
        budget: smallest_budget(ctx)?,
        rule: spec.calibration,
    };
    let n_min = ctx
        .silos
        .iter()
        .map(|s| s.records as u64)
        .min()
        .unwrap_or(0);
    let plan = plan_pvec(&target, n_min, spec.shuffler)?;
    let params = plan.params;
    params
        .p1d
        .bits_per_user()
        .checked_mul(users)
        .ok_or_else(|| crate::Error::config("silos", "n·(g + s) overflows u64"))?;
    let oracle = ctx.enforcing_oracle()?;
    let mut silos: Vec<Box<dyn SiloHalf>> = Vec::with_capacity(ctx.silos.len());
    let mut report = Vec::with_capacity(ctx.silos.len());
    let mut planned = Vec::with_capacity(ctx.silos.len());
    for s in &ctx.silos {
        // Each silo sums its own n_i records: its own no-shuffler guarantee.
        let g = silo_guarantees(&plan, &target, s.records as u64, spec.shuffler)?;
        count_calibration();
        planned.push(ShuffleSilo::Pvec {
            records: s.records,
            batch_size: s.records,
            full: true,
            against: g.against,
        });
        let silo = PvecSilo::full_batch(
            oracle.clone(),
            plan.pvec.clone(),
            spec.transport,
            s.records,
            g.against,
        )?;
        report.push(SiloCalibration {
            silo: s.id,
            sigma: silo.noise_std(),
            batch_size: s.records,
            formula: format!(
                "PVEC (Cheu et al. 2022 Thm 3.2) for n = {users} users, d = {}: g = {}, s = {}, p = {:.6} per round; {}{note}",
                params.d,
                params.p1d.g,
                params.p1d.s,
                params.p1d.p,
                describe(&plan, &target, &g, spec.shuffler)
            ),
            run_event: silo.round_event(crate::units::Round::FIRST).map(|e| e.repeated(rounds as u64)),
        });
        silos.push(Box::new(silo));
    }
    let pvec = PvecPlanned {
        params,
        transport: spec.transport,
        batch_size: None,
        users,
    };
    Ok((
        BuiltAlgorithm {
            server: Box::new(PvecServer::full_batch(
                server,
                plan.pvec,
                spec.transport,
                users,
                ctx.federation.silos as u64,
            )),
            silos,
            calibration: report,
        },
        planned,
        Some(pvec),
    ))
}
