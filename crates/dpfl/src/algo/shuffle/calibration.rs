//! The noise of Shuffled Noisy MB-SGD (Lowy & Razaviyayn Thm 5.1 / G.1; digest
//! `isrl-dp-fl.md` §2.4), under two rules:
//!
//! * **theory**: σ² = C·L²·R·M·ln(RM²/(Nδ))·ln(R/δ)·ln(1/δ)/(n²N²ε²) with the paper's
//!   unspecified absolute constant C given in the config, and the theorem's conditions
//!   checked: δ ∈ (0, 1), ε ≤ ln(2/δ), M ≥ 16 ln(18RM²/(Nδ));
//! * **accountant**: the proof's chain with explicit, sound pieces ([`sdp_chain`]), solved for
//!   the largest local ε̂₀ and so the smallest σ that meets the silo's (ε, δ) against the
//!   server given an honest shuffler.
//!
//! Decisions (each the reading that never under-protects):
//! * **No amplification by sampling silos.** The server draws S_r, so it knows which silos
//!   answered; only the silo's own record sampling (K of n) amplifies: q = K/n.
//! * **Clones need local DP for any two inputs.** Another silo's report is a batch mean of
//!   entirely different records, so the shuffling step's ε̂₀ is measured at sensitivity 2L
//!   whatever K is (the theorem's proof has K = 1, where 2L is exact). The silo's own ISRL-DP
//!   event (what its ledger charges) uses the mean's replace-one sensitivity 2L/K.
//! * **Approximate local randomizers.** Feldman, McMillan & Talwar 2021 Thm 3.8: (ε₀, δ₀)
//!   randomizers shuffled over M reports are (ε, δ_a + (e^ε + 1)(1 + e^{−ε₀}/2)·M·δ₀)-DP, ε the
//!   pure-ε₀ bound at δ_a (`dpfl_privacy::shuffle::amplification::amplify`); we bound
//!   (1 + e^{−ε₀}/2) ≤ 3/2 and e^ε ≤ e^ε̂.
//! * **One randomizer per shuffle (issue 27 finding 1).** FMT 2021 Thm 3.2 applies the i-th
//!   randomizer to the i-th position of a uniformly random permutation: every report in the
//!   shuffle must come from the same randomizer. Silos whose σ differ (per-silo budgets, or
//!   unequal n_i, which change the chain's ε̂ through q = K/n_i) are told apart by their
//!   messages' norms, and the shuffle hides nothing. Under a trusted shuffler every silo
//!   therefore runs the strictest silo's σ* = max_i σ_i; the randomizer (batch mean + N(0,
//!   σ*²I), K and L common) is then one randomizer whose (ε₀, δ₀) at sensitivity 2L depends on
//!   σ* only, not on n_i. Each silo is charged [`shared_round`]: ε₀' = the exact ε of that
//!   Gaussian at the silo's own δ̂₀ (≤ its ε̂₀, since σ* ≥ σ_i), amplified over the M reports,
//!   then the silo's own record sampling q_i = K/n_i (applied after the shuffle, per silo, so
//!   unequal n_i are sound). We chose a common σ over refusing such runs: it costs the looser
//!   silos only noise, and every silo still meets its own budget (checked forwards).

// `pub` items here that only `crate::testing` re-exports (other crates' tests) are
// unreachable without the `test-hooks` feature.
#![cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]

use serde::{Deserialize, Serialize};

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::calibration::analytic_gaussian_noise_multiplier;
use dpfl_privacy::shuffle::amplification::amplify;
use dpfl_privacy::{Delta, Epsilon, Neighbouring, PrivacyEvent};

/// How Shuffled Noisy MB-SGD's σ is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SdpCalibration {
    /// Thm 5.1 / G.1 with the absolute constant C = `constant`.
    Theory {
        /// C in σ² = C·L²·R·M·ln(RM²/(Nδ))·ln(R/δ)·ln(1/δ)/(n²N²ε²): the theorem leaves it
        /// unspecified, so the guarantee holds only if C is at least the proof's constant.
        constant: f64,
    },
    /// The proof's chain, solved numerically (`sdp_chain`).
    Accountant,
}

/// What one silo's calibration reads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SdpInputs {
    /// The silo's target ε (its whole run, R rounds) against the server given an honest
    /// shuffler.
    pub epsilon: f64,
    /// The silo's target δ, in (0, 1); the accountant rule splits it between the
    /// amplification, the local randomizer and the composition over rounds.
    pub delta: f64,
    /// n_i.
    pub records: usize,
    /// K.
    pub batch_size: usize,
    /// N.
    pub silos: usize,
    /// M: silos answering every round (fixed).
    pub participants: usize,
    /// R: the number of rounds, each using one fresh batch of K of the silo's records.
    pub rounds: usize,
    /// L.
    pub lipschitz: f64,
}

/// One silo's σ with both guarantees.
#[derive(Debug, Clone, PartialEq)]
pub struct SdpNoise {
    /// σ: the standard deviation of the Gaussian noise added to each coordinate of the
    /// silo's batch-mean gradient (in gradient units; accountant rule: z·2L with z the
    /// analytic-Gaussian multiplier at (ε̂₀, δ̂₀)).
    pub sigma: f64,
    /// ε against the server given an honest shuffler (the chain's ε, `None` under theory).
    pub shuffled_epsilon: Option<f64>,
    /// The local randomizer's (ε̂₀, δ̂₀) at sensitivity 2L (accountant rule).
    pub local: Option<(f64, f64)>,
    /// ε of the silo's own noise alone, R rounds composed by RDP at δ (no shuffler needed).
    pub isrl_dp_epsilon: f64,
    /// Human-readable provenance of σ (rule, theorem and intermediate values), for the run
    /// log and reports.
    pub formula: String,
}

fn bad(reason: String) -> crate::Error {
    crate::Error::config("algorithm.calibration", reason)
}

fn check(x: &SdpInputs) -> crate::Result<()> {
    if !(x.epsilon.is_finite() && x.epsilon > 0.0) {
        return Err(bad(format!(
            "epsilon = {} must be finite and > 0",
            x.epsilon
        )));
    }
    if !(x.delta > 0.0 && x.delta < 1.0) {
        return Err(bad(format!("delta = {} must lie in (0, 1)", x.delta)));
    }
    if x.batch_size == 0 || x.batch_size > x.records {
        return Err(bad(format!(
            "K = {} must lie in [1, n = {}]",
            x.batch_size, x.records
        )));
    }
    if x.participants == 0 || x.participants > x.silos || x.rounds == 0 {
        return Err(bad(format!(
            "need 1 <= M = {} <= N = {} and R = {} >= 1",
            x.participants, x.silos, x.rounds
        )));
    }
    if !(x.lipschitz.is_finite() && x.lipschitz > 0.0) {
        return Err(bad(format!("L = {} must be finite and > 0", x.lipschitz)));
    }
    Ok(())
}

/// Thm G.1's σ with constant C, after its conditions.
pub(crate) fn theory_sigma(x: &SdpInputs, c: f64) -> crate::Result<f64> {
    check(x)?;
    if !(c.is_finite() && c > 0.0) {
        return Err(bad(format!("constant C = {c} must be finite and > 0")));
    }
    let (e, d) = (x.epsilon, x.delta);
    let (r, m, nn, n) = (
        x.rounds as f64,
        x.participants as f64,
        x.silos as f64,
        x.records as f64,
    );
    if e > (2.0 / d).ln() {
        return Err(bad(format!(
            "Lowy & Razaviyayn Thm 5.1 needs epsilon <= ln(2/delta) = {}, got {e}",
            (2.0 / d).ln()
        )));
    }
    let need = 16.0 * (18.0 * r * m * m / (nn * d)).ln();
    if m < need {
        return Err(bad(format!(
            "Lowy & Razaviyayn Thm 5.1 needs M >= 16 ln(18RM^2/(N delta)) = {need:.1}, got M = {m}"
        )));
    }
    let l = x.lipschitz;
    let var = c * l * l * r * m * (r * m * m / (nn * d)).ln() * (r / d).ln() * (1.0 / d).ln()
        / (n * n * nn * nn * e * e);
    Ok(var.sqrt())
}

/// ε of `rounds` compositions of an (eps, δ/(2R)) release at δ (advanced composition).
fn composed(eps_r: f64, x: &SdpInputs) -> crate::Result<f64> {
    let ev = PrivacyEvent::EpsilonDelta {
        epsilon: eps_r,
        delta: x.delta / (2.0 * x.rounds as f64),
    }
    .repeated(x.rounds as u64);
    Ok(AccountantKind::Advanced.epsilon(Neighbouring::ReplaceOne, &ev, Delta::new(x.delta)?)?)
}

/// The (ε, δ) against the server of one round given an honest shuffler, for a local
/// randomizer (ε₀, δ₀) at sensitivity 2L: shuffling M reports, then sampling K of n.
pub fn round_guarantee(
    x: &SdpInputs,
    eps0: f64,
    delta0: f64,
    delta_a: f64,
) -> crate::Result<(f64, f64)> {
    let m = x.participants as u64;
    let shuffled = amplify(m, eps0, delta_a)
        .map_err(|e| bad(format!("amplification by shuffling: {e}")))?
        .epsilon;
    let delta_hat = delta_a + (shuffled.exp() + 1.0) * 1.5 * m as f64 * delta0;
    // Balle, Barthe & Gaboardi 2018 Thm 10 (replace-one, sampling without replacement).
    let q = x.batch_size as f64 / x.records as f64;
    let eps_r = (q * shuffled.exp_m1()).ln_1p();
    Ok((eps_r, q * delta_hat))
}

/// The chain's δ_a = δ̂/2 with δ̂ = min(δ_r/q, ½), δ_r = δ/(2R), q = K/n (step 3 below).
pub fn delta_a(x: &SdpInputs) -> f64 {
    let delta_r = x.delta / (2.0 * x.rounds as f64);
    let q = x.batch_size as f64 / x.records as f64;
    (delta_r / q).min(0.5) / 2.0
}

/// The proof of Thm G.1 with sound pieces, per round r (digest §2.4):
/// 1. per-round target ε_r: the largest ε_r whose R-fold advanced composition (Dwork–Roth
///    Thm 3.20) with δ_r = δ/(2R) is at most ε at δ;
/// 2. sampling K of n (Balle, Barthe & Gaboardi 2018 Thm 10): ε̂ = ln(1 + (e^{ε_r} − 1)/q),
///    δ̂ = δ_r/q, q = K/n;
/// 3. shuffling M reports (FMT 2021 Thm 3.1/3.2 + 3.8): the largest ε̂₀ whose amplified ε is
///    at most ε̂ at δ_a = δ̂/2, with δ̂₀ = (δ̂/2)/(1.5·M·(e^ε̂ + 1));
/// 4. the analytic Gaussian (Balle & Wang 2018) for (ε̂₀, δ̂₀) at sensitivity 2L.
///
/// The result is re-checked forwards (steps 3→1) before it is returned.
pub fn sdp_chain(x: &SdpInputs) -> crate::Result<SdpNoise> {
    check(x)?;
    let (mut lo, mut hi) = (0.0, x.epsilon);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if composed(mid, x)? <= x.epsilon {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let eps_r = lo;
    if eps_r <= 0.0 {
        return Err(bad("no per-round epsilon meets the target".into()));
    }
    let delta_r = x.delta / (2.0 * x.rounds as f64);
    let q = x.batch_size as f64 / x.records as f64;
    let eps_hat = (eps_r.exp_m1() / q).ln_1p();
    let delta_a = delta_a(x);
    let delta0 = delta_a / (1.5 * x.participants as f64 * (eps_hat.exp() + 1.0));
    let m = x.participants as u64;
    let amp = |e0: f64| -> crate::Result<f64> {
        Ok(amplify(m, e0, delta_a)
            .map_err(|e| bad(format!("amplification by shuffling: {e}")))?
            .epsilon)
    };
    // amplify(ε₀) ≤ ε₀, so ε̂₀ ≥ ε̂; search up to where the bound stops helping.
    let (mut lo, mut hi) = (eps_hat, eps_hat.max(1e-3));
    while amp(hi)? <= eps_hat && hi < 60.0 {
        lo = hi;
        hi *= 2.0;
    }
    for _ in 0..40 {
        let mid = 0.5 * (lo + hi);
        if amp(mid)? <= eps_hat {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let eps0 = lo;
    let z = analytic_gaussian_noise_multiplier(Epsilon::new(eps0)?, Delta::new(delta0)?)?;
    let sigma = z * 2.0 * x.lipschitz;
    // Forwards: the round's guarantee, then R rounds composed.
    let (e_round, d_round) = round_guarantee(x, eps0, delta0, delta_a)?;
    if d_round > delta_r * (1.0 + 1e-9) {
        return Err(bad(format!(
            "forward check: round delta {d_round} exceeds {delta_r}"
        )));
    }
    let total = composed(e_round, x)?;
    if total > x.epsilon * (1.0 + 1e-9) {
        return Err(bad(format!(
            "forward check: composed epsilon {total} exceeds the target {}",
            x.epsilon
        )));
    }
    // An honest shuffler never weakens the silo's own guarantee: report the better of the two.
    let isrl = isrl_epsilon(x, sigma)?;
    Ok(SdpNoise {
        sigma,
        shuffled_epsilon: Some(total.min(isrl)),
        local: Some((eps0, delta0)),
        isrl_dp_epsilon: isrl,
        formula: format!(
            "SDP chain (Lowy & Razaviyayn Thm G.1 proof; FMT 2021 Thm 3.2/3.8; BBG 2018 Thm 10; analytic Gaussian): \
             eps_r = {eps_r:.4}, eps_hat = {eps_hat:.4}, local (eps0, delta0) = ({eps0:.4}, {delta0:.3e}) at sensitivity 2L, \
             honest-shuffler eps = {total:.4}"
        ),
    })
}

/// One round of a silo whose randomizer is the shuffle's common one (see the module doc):
/// noise σ (the strictest silo's) at sensitivity 2L.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SharedRound {
    /// ε₀': the exact ε of the Gaussian with multiplier σ/(2L) at the silo's δ̂₀.
    pub eps0: f64,
    /// The silo's δ̂₀ (from its own chain).
    pub delta0: f64,
    /// The (ε, δ) its ledger charges per round ([`round_guarantee`] at (ε₀', δ̂₀)).
    pub round: (f64, f64),
    /// ε of the R charged rounds at the silo's δ (advanced composition, Dwork–Roth Thm
    /// 3.20): the figure the calibration row prints.
    pub total: f64,
}

/// The honest-shuffler guarantee of a silo running the common randomizer σ, analysed at its
/// own δ̂₀, checked forwards against its budget (refused, naming the numbers, if it fails:
/// σ below the silo's own chain σ could do that).
pub fn shared_round(x: &SdpInputs, sigma: f64, delta0: f64) -> crate::Result<SharedRound> {
    let (eps0, (e, d)) = local_and_round(x, sigma, delta0)?;
    let delta_r = x.delta / (2.0 * x.rounds as f64);
    if d > delta_r * (1.0 + 1e-9) || composed(e, x)? > x.epsilon * (1.0 + 1e-9) {
        return Err(bad(format!(
            "the shuffle's common sigma = {sigma} does not meet this silo's budget (epsilon = {}, delta = {}): round ({e}, {d})",
            x.epsilon, x.delta
        )));
    }
    let total = AccountantKind::Advanced.epsilon(
        Neighbouring::ReplaceOne,
        &PrivacyEvent::EpsilonDelta {
            epsilon: e,
            delta: d,
        }
        .repeated(x.rounds as u64),
        Delta::new(x.delta)?,
    )?;
    Ok(SharedRound {
        eps0,
        delta0,
        round: (e, d),
        total,
    })
}

/// The chain's (ε, δ) per round of a silo running the Gaussian σ at sensitivity 2L, measured
/// at its δ̂₀, without the budget check of [`shared_round`]: the event a trusted-shuffler
/// silo's mechanism reports (`super::honest`). Errors where the chain gives no guarantee.
pub(crate) fn round_at(x: &SdpInputs, sigma: f64, delta0: f64) -> crate::Result<(f64, f64)> {
    let (e, d) = local_and_round(x, sigma, delta0)?.1;
    // Far below the planned σ, e^ε overflows and δ̂ with it: no guarantee, not an event.
    if !(e.is_finite() && e >= 0.0 && d.is_finite() && (0.0..1.0).contains(&d)) {
        return Err(bad(format!(
            "no honest-shuffler guarantee at sigma = {sigma}: round ({e}, {d})"
        )));
    }
    Ok((e, d))
}

/// ε₀' of the Gaussian σ at sensitivity 2L and δ̂₀, and the round guarantee it gives.
fn local_and_round(x: &SdpInputs, sigma: f64, delta0: f64) -> crate::Result<(f64, (f64, f64))> {
    check(x)?;
    let z = sigma / (2.0 * x.lipschitz);
    // A release that is (ε, δ)-DP is (ε', δ)-DP for ε' ≥ ε: a floor keeps FMT's bound defined.
    let eps0 = dpfl_privacy::calibration::gaussian_epsilon(z, Delta::new(delta0)?)?.max(1e-9);
    Ok((eps0, round_guarantee(x, eps0, delta0, delta_a(x))?))
}

/// The silo's own guarantee (no shuffler): R rounds of Sampled(K of n with replacement,
/// Gaussian(σK/(2L))) composed by RDP.
pub fn isrl_epsilon(x: &SdpInputs, sigma: f64) -> crate::Result<f64> {
    Ok(AccountantKind::Rdp.epsilon(
        Neighbouring::ReplaceOne,
        &isrl_round_event(x, sigma).repeated(x.rounds as u64),
        Delta::new(x.delta)?,
    )?)
}

/// The event the silo's ledger charges per round.
pub(crate) fn isrl_round_event(x: &SdpInputs, sigma: f64) -> PrivacyEvent {
    PrivacyEvent::Gaussian {
        noise_multiplier: sigma * x.batch_size as f64 / (2.0 * x.lipschitz),
    }
    .sampled(dpfl_privacy::event::Sampling::WithReplacement {
        population: x.records as u64,
        draws: x.batch_size as u64,
    })
}

/// σ and the report for one silo under `rule`.
pub(crate) fn sdp_noise(x: &SdpInputs, rule: SdpCalibration) -> crate::Result<SdpNoise> {
    match rule {
        SdpCalibration::Accountant => sdp_chain(x),
        SdpCalibration::Theory { constant } => {
            let sigma = theory_sigma(x, constant)?;
            Ok(SdpNoise {
                sigma,
                shuffled_epsilon: None,
                local: None,
                isrl_dp_epsilon: isrl_epsilon(x, sigma)?,
                formula: format!(
                    "sigma^2 = C L^2 R M ln(RM^2/(N delta)) ln(R/delta) ln(1/delta)/(n^2 N^2 eps^2), C = {constant} (Lowy & Razaviyayn Thm 5.1/G.1)"
                ),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> SdpInputs {
        SdpInputs {
            epsilon: 1.0,
            delta: 1e-5,
            records: 1000,
            batch_size: 1,
            silos: 100,
            participants: 100,
            rounds: 10,
            lipschitz: 1.0,
        }
    }

    #[test]
    fn theory_sigma_matches_a_hand_computation_and_checks_its_conditions() {
        // C = 1, L = 1, R = 10, M = N = 1000, n = 1000, ε = 1, δ = 1e-5:
        // σ² = 10·1000·ln(10·10⁶/(1000·1e-5))·ln(10/1e-5)·ln(1e5)/(10⁶·10⁶)
        //    = 1e4·ln(1e9)·ln(1e6)·ln(1e5)/1e12 = 1e4·20.7233·13.8155·11.5129/1e12
        //    = 3.296179e-5; M = 1000 ≥ 16 ln(18·10·10⁶/(1000·1e-5)) = 377.8.
        let x = SdpInputs {
            silos: 1000,
            participants: 1000,
            ..inputs()
        };
        let s = theory_sigma(&x, 1.0).unwrap();
        assert!((s * s - 3.296_179e-5).abs() < 1e-11, "{}", s * s);
        assert!((theory_sigma(&x, 4.0).unwrap() - 2.0 * s).abs() < 1e-15);
        // M = N = 100 < 16 ln(18·10·10⁴/(100·1e-5)) = 341.0: outside the theorem.
        let e = theory_sigma(&inputs(), 1.0).unwrap_err().to_string();
        assert!(e.contains("M >= 16 ln"), "{e}");
    }

    #[test]
    fn the_chain_meets_its_target_forwards_and_reports_both_guarantees() {
        let x = inputs();
        let n = sdp_chain(&x).unwrap();
        let total = n.shuffled_epsilon.unwrap();
        assert!(total <= 1.0 + 1e-9 && total > 0.0, "{total}");
        let (eps0, delta0) = n.local.unwrap();
        // δ̂₀ = (δ̂/2)/(1.5·M·(e^ε̂ + 1)) with δ̂ = (δ/2R)/q = 5e-4, M = 100.
        assert!(
            eps0 > 0.0 && delta0 > 0.0 && delta0 < 2.5e-4 / 300.0,
            "{eps0} {delta0}"
        );
        // The forward check: the round's guarantee composed over R rounds meets ε.
        let (e_round, d_round) = round_guarantee(&x, eps0, delta0, 2.5e-4).unwrap();
        assert!(d_round <= 5e-7 * (1.0 + 1e-9), "{d_round}");
        assert!(composed(e_round, &x).unwrap() <= 1.0 + 1e-9);
        // σ = z·2L with z the analytic Gaussian multiplier of (ε̂₀, δ̂₀).
        let z = analytic_gaussian_noise_multiplier(
            Epsilon::new(eps0).unwrap(),
            Delta::new(delta0).unwrap(),
        )
        .unwrap();
        assert_eq!(n.sigma, 2.0 * z);
        // Reported side by side; the honest-shuffler one is never the weaker.
        assert!(n.isrl_dp_epsilon.is_finite() && total <= n.isrl_dp_epsilon);
        // More silos in the shuffle amplify more (a larger ε̂₀), but FMT Thm 3.8 charges
        // M·δ̂₀, so δ̂₀ shrinks with M: at these sizes σ grows slightly (2.39 → 2.54).
        let more = sdp_chain(&SdpInputs {
            silos: 1000,
            participants: 1000,
            ..x
        })
        .unwrap();
        let (eps0_more, delta0_more) = more.local.unwrap();
        assert!(eps0_more > eps0 && delta0_more < delta0 / 5.0);
        assert!((n.sigma - 2.3947).abs() < 1e-3, "{}", n.sigma);
        assert!((more.sigma - 2.5405).abs() < 1e-3, "{}", more.sigma);
    }

    #[test]
    fn bad_inputs_are_refused_with_the_field() {
        let x = inputs();
        for bad in [
            SdpInputs { epsilon: 0.0, ..x },
            SdpInputs { delta: 1.0, ..x },
            SdpInputs { batch_size: 0, ..x },
            SdpInputs {
                participants: 101,
                ..x
            },
            SdpInputs {
                lipschitz: f64::NAN,
                ..x
            },
        ] {
            let e = sdp_chain(&bad).unwrap_err().to_string();
            assert!(e.contains("algorithm.calibration"), "{e}");
        }
        assert!(theory_sigma(&x, -1.0).is_err());
        // ε > ln(2/δ) is outside Thm 5.1.
        let e = theory_sigma(&SdpInputs { epsilon: 20.0, ..x }, 1.0).unwrap_err();
        assert!(e.to_string().contains("ln(2/delta)"), "{e}");
    }
}
