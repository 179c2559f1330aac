//! Who the silos trust, and what their ledgers therefore charge (issue 15 item 4).
//!
//! Every shuffle algorithm has two guarantees per silo:
//! * **given an honest shuffler** — what the server learns from the shuffled round: PVEC's
//!   (ε, δ) (Cheu et al. 2022 Thm 3.2), or Shuffled MB-SGD's amplified chain;
//! * **without a trusted shuffler** — what a server that sees one silo's own messages learns
//!   (a shuffler that colludes with the server, or is the server): for PVEC silos the
//!   binomial noise of the silo's own counts (`dpfl_privacy::shuffle::local`, Cheu et al.
//!   Lemma A.1 composed over the coordinates) composed over the rounds a record is used in;
//!   for Shuffled MB-SGD the silo's own Gaussian (ISRL-DP).
//!
//! Decision (never under-protects): unless the config says `shuffler = "trusted"`, the
//! shuffler is *not* trusted, each silo's ledger charges the no-shuffler guarantee and that
//! guarantee must meet the silo's budget. The protocol is then calibrated down until it does:
//! PVEC runs at the largest ε′ ≤ ε (bisection) whose no-shuffler guarantee is within the
//! budget, so the honest-shuffler guarantee is at most ε′ (never worse than asked). With
//! `shuffler = "trusted"` the ledger charges the honest-shuffler guarantee, as the papers do.
//! Both guarantees are in every silo's calibration row.

// `pub` items here that only `crate::testing` re-exports (other crates' tests) are
// unreachable without the `test-hooks` feature.
#![cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]

use serde::{Deserialize, Serialize};

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::shuffle::local::{LocalGuarantee, silo_round_guarantee};
use dpfl_privacy::shuffle::params::{PvecParams, PvecRule, Scale};
use dpfl_privacy::shuffle::protocol::Pvec;
use dpfl_privacy::shuffle::pvec_exact::{CALIBRATION_TV, calibrate_exact};
use dpfl_privacy::shuffle::randomizer::Against;
use dpfl_privacy::{Delta, Neighbouring, PrivacyEvent};

use super::pvec::shuffle_err;

/// Whether the silos trust the shuffler not to collude with the server.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ShufflerTrust {
    /// The ledger charges the guarantee that holds whatever the shuffler does (default).
    #[default]
    Untrusted,
    /// The ledger charges the guarantee given an honest shuffler.
    Trusted,
}

impl ShufflerTrust {
    /// The config spelling (`untrusted` or `trusted`), for logs and reports.
    pub fn name(self) -> &'static str {
        match self {
            ShufflerTrust::Untrusted => "untrusted",
            ShufflerTrust::Trusted => "trusted",
        }
    }
}

/// Whether a silo's calibration formula (as the plan writes it, here and in `shuffle/mod.rs`)
/// says the ledger charges the honest-shuffler guarantee: then the run's ε holds against the
/// server only for the shuffled round, not for a silo's own messages, and a report must not
/// call it ISRL-DP.
pub fn charges_trusted_shuffler(formula: &str) -> bool {
    formula.contains(&format!("shuffler = {}", ShufflerTrust::Trusted.name()))
}

/// What one PVEC round is calibrated for and what it costs.
#[derive(Debug, Clone, Copy)]
pub struct PvecTarget {
    /// Users the shuffle is calibrated for (M_min·K, or Σ n_i for PGD).
    pub users: u64,
    /// d: the model dimension (PVEC's number of coordinates).
    pub d: usize,
    /// Δ₂: the ℓ₂ bound of each user's gradient (L, or 2L on a Moreau envelope).
    pub l2_bound: f64,
    /// PVEC's treatment of Δ₂ (paper or unit scale).
    pub scale: Scale,
    /// The honest-shuffler (ε, δ) per round the algorithm asks for.
    pub round: (f64, f64),
    /// Rounds each record is used in (1 for one pass, R for PGD).
    pub uses: u64,
    /// The silos' (smallest) budget (ε, δ).
    pub budget: (f64, f64),
    /// How PVEC's noise bits are chosen: Theorem 3.2's constants (default) or the exact-sum
    /// accountant (`dpfl_privacy::shuffle::pvec_exact`, issue 32).
    pub rule: PvecRule,
}

/// The PVEC a trust model allows, with both guarantees of one silo.
#[derive(Debug, Clone)]
pub struct PvecPlan {
    /// Theorem 3.2's parameters calibrated at `round`.
    pub params: PvecParams,
    /// The randomizer/analyzer built from `params`.
    pub pvec: Pvec,
    /// The honest-shuffler (ε, δ) per round actually used (≤ the asked one).
    pub round: (f64, f64),
}

/// One silo's two guarantees and what its ledger charges per round.
#[derive(Debug, Clone, Copy)]
pub struct SiloGuarantees {
    /// Per round without a trusted shuffler (Lemma A.1).
    pub local_round: LocalGuarantee,
    /// Over the `uses` rounds of a record, without a trusted shuffler.
    pub local_total: f64,
    /// Per round, charged by the ledger (what `against` makes the silo's randomizer report).
    pub charged: (f64, f64),
    /// Whom the silo's replies are private against: its randomizer's event (the half derives
    /// `charged` from it and the PVEC parameters).
    pub against: Against,
}

/// δ per round for the no-shuffler guarantee: all of δ for one use, else δ/(2·uses) (the
/// other half is advanced composition's slack).
fn local_round_delta(t: &PvecTarget) -> f64 {
    if t.uses <= 1 {
        t.budget.1
    } else {
        t.budget.1 / (2.0 * t.uses as f64)
    }
}

/// ε over `uses` rounds of a per-round (ε, δ): the smaller of basic and advanced
/// composition (Dwork & Roth Thm 3.16, 3.20) at δ.
fn composed(eps: f64, delta: f64, uses: u64, total_delta: f64) -> crate::Result<f64> {
    // ε = ∞ (no guarantee, possible for a silo's own counts under the accountant rule) stays ∞.
    if uses <= 1 || !eps.is_finite() {
        return Ok(eps);
    }
    let ev = PrivacyEvent::EpsilonDelta {
        epsilon: eps,
        delta,
    }
    .repeated(uses);
    let d = Delta::new(total_delta)?;
    let basic = AccountantKind::Basic.epsilon(Neighbouring::ReplaceOne, &ev, d)?;
    let adv = AccountantKind::Advanced.epsilon(Neighbouring::ReplaceOne, &ev, d)?;
    Ok(basic.min(adv))
}

fn build(t: &PvecTarget, eps: f64) -> crate::Result<(PvecParams, Pvec)> {
    let params = match t.rule {
        PvecRule::Paper => PvecParams::calibrate(t.users, t.d, t.l2_bound, eps, t.round.1, t.scale),
        PvecRule::Accountant => calibrate_exact(
            t.users,
            t.d,
            t.l2_bound,
            eps,
            t.round.1,
            t.scale,
            1,
            CALIBRATION_TV,
        ),
    }
    .map_err(shuffle_err)?;
    let pvec = Pvec::new(params).map_err(shuffle_err)?;
    // The accountant's δ assumed at most CALIBRATION_TV per draw; the built sampler must meet it.
    if t.rule == PvecRule::Accountant && pvec.noise_tv_bound() > CALIBRATION_TV {
        return Err(crate::Error::config(
            "algorithm.calibration",
            format!(
                "the Binomial sampler's total-variation bound {:e} exceeds the {CALIBRATION_TV:e} the PVEC accountant assumed",
                pvec.noise_tv_bound()
            ),
        ));
    }
    Ok((params, pvec))
}

/// The guarantees of a silo whose counts sum `silo_users` users, under `trust`.
pub fn silo_guarantees(
    plan: &PvecPlan,
    t: &PvecTarget,
    silo_users: u64,
    trust: ShufflerTrust,
) -> crate::Result<SiloGuarantees> {
    let dr = local_round_delta(t);
    let local_round =
        silo_round_guarantee(&plan.params, silo_users, dr, plan.pvec.noise_tv_bound())
            .map_err(shuffle_err)?;
    let local_total = composed(local_round.epsilon, dr, t.uses, t.budget.1)?;
    let (charged, against) = match trust {
        ShufflerTrust::Trusted => (
            plan.round,
            Against::HonestShuffler {
                honest_fraction: None,
            },
        ),
        ShufflerTrust::Untrusted => ((local_round.epsilon, dr), Against::OwnCounts { delta: dr }),
    };
    Ok(SiloGuarantees {
        local_round,
        local_total,
        charged,
        against,
    })
}

/// The PVEC for `t` under `trust`. Untrusted: the largest ε′ ≤ the asked per-round ε whose
/// no-shuffler guarantee for the worst silo (the fewest summed users, `min_silo_users`) over
/// its uses meets the budget; refused if none does.
pub fn plan_pvec(
    t: &PvecTarget,
    min_silo_users: u64,
    trust: ShufflerTrust,
) -> crate::Result<PvecPlan> {
    let (eps, delta) = t.round;
    let (params, pvec) = build(t, eps)?;
    let asked = PvecPlan {
        params,
        pvec,
        round: (eps, delta),
    };
    if trust == ShufflerTrust::Trusted {
        return Ok(asked);
    }
    let fits = |plan: &PvecPlan| -> bool {
        silo_guarantees(plan, t, min_silo_users, trust).is_ok_and(|g| g.local_total <= t.budget.0)
    };
    if fits(&asked) {
        return Ok(asked);
    }
    let (mut lo, mut hi): (Option<PvecPlan>, f64) = (None, eps);
    let mut low = 0.0;
    for _ in 0..40 {
        let mid = 0.5 * (low + hi);
        let candidate = build(t, mid).ok().map(|(params, pvec)| PvecPlan {
            params,
            pvec,
            round: (mid, delta),
        });
        match candidate {
            Some(c) if fits(&c) => {
                low = mid;
                lo = Some(c);
            }
            _ => hi = mid,
        }
    }
    lo.ok_or_else(|| {
        crate::Error::config(
            "algorithm.shuffler",
            format!(
                "no PVEC calibration meets the budget epsilon = {} without a trusted shuffler (a silo's own binomial noise is too small); set shuffler = \"trusted\" or raise the budget",
                t.budget.0
            ),
        )
    })
}

/// The calibration row's text on both guarantees.
pub(crate) fn describe(
    plan: &PvecPlan,
    t: &PvecTarget,
    g: &SiloGuarantees,
    trust: ShufflerTrust,
) -> String {
    let honest_total = composed(plan.round.0, plan.round.1, t.uses, t.budget.1)
        .map_or_else(|e| format!("not composed ({e})"), |e| format!("{e:.4}"));
    let (rule, local) = match t.rule {
        // The paper rule's text is unchanged (committed reports and goldens quote it).
        PvecRule::Paper => ("", "Cheu et al. Lemma A.1 over d coordinates"),
        PvecRule::Accountant => (
            "PVEC calibration = accountant (exact-sum, issue 32); ",
            "the exact-sum accountant or Lemma A.1, the smaller",
        ),
    };
    format!(
        "{rule}against the server: eps = {honest_total} given an honest shuffler (per round ({:.4}, {:.3e})); eps = {:.4} without a trusted shuffler (the silo's own binomial noise, {local}: per round ({:.4}, {:.3e}), {} use(s) per record); shuffler = {} so the ledger charges ({:.4}, {:.3e}) per round",
        plan.round.0,
        plan.round.1,
        g.local_total,
        g.local_round.epsilon,
        g.local_round.delta,
        t.uses,
        trust.name(),
        g.charged.0,
        g.charged.1
    )
}

/// The smallest σ (to 1e-9 relative) whose `epsilon_of(σ)` is at most `target`, by
/// bisection from `start` upwards (the silo's own guarantee must meet its budget when the
/// shuffler is untrusted).
pub fn sigma_for(
    start: f64,
    target: f64,
    epsilon_of: impl Fn(f64) -> crate::Result<f64>,
) -> crate::Result<f64> {
    if epsilon_of(start)? <= target {
        return Ok(start);
    }
    let (mut lo, mut hi) = (start, start * 2.0);
    while epsilon_of(hi)? > target {
        lo = hi;
        hi *= 2.0;
        if hi > 1e12 {
            return Err(crate::Error::config(
                "algorithm.calibration",
                format!("no sigma below 1e12 meets epsilon = {target} without a trusted shuffler"),
            ));
        }
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if epsilon_of(mid)? <= target {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi - lo <= 1e-9 * hi {
            break;
        }
    }
    Ok(hi)
}
