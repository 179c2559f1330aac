//! Privacy accounting of QTDL releases: the paper's two modes, reproduced as printed, and
//! dpfl's own accountant for the same releases. Both are reported; only dpfl's is charged.
//!
//! *Paper, per round* (experiment (i), digest §1.5): each message is (ε, 2^{−d})-DP by
//! Theorem 1 — [`paper_per_round`] reports that claim with δ in log form.
//!
//! *Paper, K rounds* (Theorem 2, proof in App. C; digest §1.4): ε₀ = ε/(8√(2K ln(1/δ)))
//! (eq. 21) per round; advanced composition, ε̂ = ε₀√(2K ln(1/δ)) + Kε₀ tanh(ε₀/2) ≤ ε/8 +
//! ε²/(256 ln(1/δ)) (eq. 22; the paper uses the bound form); parallel composition over
//! clients; then amplification by client sampling to (2r/n)ε̂ when ε̂ < 1 (Kamath's Lemma 3);
//! δ_total = K·2^{−d} + δ, unscaled. Validity ε < 6, δ < e^{−9/4} (the theorem's statement;
//! its proof needs only e^{−9/16}, we keep the stricter), and eq. 23's ε₀ < e^{−1}Δ₁/Δ∞ via
//! [`Theorem2::check_sensitivities`]. Corollary 3.1's per-client form adds 4(ρ−1)/n_i to δ and
//! takes no amplification.
//!
//! *dpfl* ([`release_event`], [`dpfl_epsilon`]): each message is a
//! `PrivacyEvent::TruncatedDiscreteLaplace { ε, δ }` with the **correct** δ of
//! `theorem1::worst_case_delta` (rounded up in f64, never 0), composed over every round the
//! client may answer (K: the worst case, as the paper's proof also assumes) by any
//! (ε, δ)-capable accountant (basic, advanced, optimal, PLD). Two departures from the paper,
//! both so as never to under-report:
//! 1. no amplification by client sampling: in the paper's threat model the adversary is the
//!    server, and the server draws S_k (Algorithm 2 line 2) and sees who answered, so the
//!    sample is not secret and subsampling amplifies nothing (the per-round release is a
//!    mixture with an observed label). The paper's 2r/n is therefore valid only against an
//!    observer who does not learn S_k; it is reported in paper mode only. (Also, the paper
//!    amplifies the K-fold composition once although sampling happens every round.)
//! 2. the correct δ instead of 2^{−d}; at Theorem 1's m it is ≈ 1 and [`release_event`]
//!    refuses (there is no guarantee to account), so calibrate with
//!    `theorem1::calibrate_for_delta`.

use crate::accountant::AccountantKind;
use crate::error::{PrivacyError, Result};
use crate::event::{Neighbouring, PrivacyEvent};
use crate::params::Delta;

use super::LogProb;
use super::theorem1::Theorem1;

/// The paper's per-round claim for one message: (ε, (Δ∞/Z)^d).
pub fn paper_per_round(th: &Theorem1, d: u64) -> (f64, LogProb) {
    (th.epsilon, th.claimed_delta(d))
}

/// Theorem 2's K-round mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Theorem2 {
    /// The theorem's ε parameter (not the final ε: see [`Self::paper_epsilon`]).
    pub epsilon: f64,
    /// The theorem's δ parameter.
    pub delta: f64,
    /// K, the rounds.
    pub rounds: u64,
    /// r clients sampled per round out of n.
    pub sampled: u64,
    /// n, the clients.
    pub clients: u64,
}

impl Theorem2 {
    /// Checks the theorem's validity range (0 < ε < 6, 0 < δ < e^{−9/4}, K ≥ 1, 1 ≤ r ≤ n).
    pub fn new(epsilon: f64, delta: f64, rounds: u64, sampled: u64, clients: u64) -> Result<Self> {
        if !(epsilon > 0.0 && epsilon < 6.0) {
            return Err(PrivacyError::OutsideValidity {
                formula: "DP-NormFedAvg Theorem 2",
                reason: format!("needs 0 < epsilon < 6, got {epsilon}"),
            });
        }
        let limit = (-2.25f64).exp();
        if !(delta > 0.0 && delta < limit) {
            return Err(PrivacyError::OutsideValidity {
                formula: "DP-NormFedAvg Theorem 2",
                reason: format!("needs 0 < delta < e^(-9/4) = {limit}, got {delta}"),
            });
        }
        if rounds == 0 {
            return Err(PrivacyError::invalid("rounds", 0.0, "must be >= 1"));
        }
        if sampled == 0 || sampled > clients {
            return Err(PrivacyError::invalid(
                "sampled",
                sampled as f64,
                format!("clients per round must lie in [1, n = {clients}]"),
            ));
        }
        Ok(Theorem2 {
            epsilon,
            delta,
            rounds,
            sampled,
            clients,
        })
    }

    /// [derived, digest §1.4] The ε parameter that makes the paper's final ε equal
    /// `epsilon_total`: T = ε_tot/min(1, 2r/n), Λ = ln(1/δ), ε = 16Λ(√(1 + T/Λ) − 1).
    pub fn from_target(
        epsilon_total: f64,
        delta: f64,
        rounds: u64,
        sampled: u64,
        clients: u64,
    ) -> Result<Self> {
        if !(epsilon_total.is_finite() && epsilon_total > 0.0) {
            return Err(PrivacyError::invalid(
                "epsilon_total",
                epsilon_total,
                "must be > 0",
            ));
        }
        if !(delta > 0.0 && delta < 1.0) || clients == 0 {
            return Err(PrivacyError::invalid("delta", delta, "must lie in (0, 1)"));
        }
        let factor = (2.0 * sampled as f64 / clients as f64).min(1.0);
        let t = epsilon_total / factor;
        let lam = (1.0 / delta).ln();
        let eps = 16.0 * lam * ((1.0 + t / lam).sqrt() - 1.0);
        let th = Self::new(eps, delta, rounds, sampled, clients)?;
        if th.composed_bound() >= 1.0 && factor < 1.0 {
            return Err(PrivacyError::OutsideValidity {
                formula: "DP-NormFedAvg Theorem 2",
                reason: "amplification needs the composed epsilon below 1".into(),
            });
        }
        Ok(th)
    }

    fn log_inv_delta(&self) -> f64 {
        (1.0 / self.delta).ln()
    }

    /// ε₀ = ε/(8√(2K ln(1/δ))) (eq. 21), the per-round budget each client calibrates to.
    pub fn epsilon_0(&self) -> f64 {
        self.epsilon / (8.0 * (2.0 * self.rounds as f64 * self.log_inv_delta()).sqrt())
    }

    /// Advanced composition, exact tanh form: ε₀√(2K ln(1/δ)) + Kε₀ tanh(ε₀/2).
    pub fn composed_tanh(&self) -> f64 {
        let (e0, k) = (self.epsilon_0(), self.rounds as f64);
        e0 * (2.0 * k * self.log_inv_delta()).sqrt() + k * e0 * (e0 / 2.0).tanh()
    }

    /// ε̂ = ε/8 + ε²/(256 ln(1/δ)) (eq. 22), the bound the paper uses.
    pub fn composed_bound(&self) -> f64 {
        self.epsilon / 8.0 + self.epsilon * self.epsilon / (256.0 * self.log_inv_delta())
    }

    /// The paper's final ε: (2r/n)ε̂ when ε̂ < 1 and 2r/n < 1, else ε̂.
    pub fn paper_epsilon(&self) -> f64 {
        let hat = self.composed_bound();
        let factor = 2.0 * self.sampled as f64 / self.clients as f64;
        if hat < 1.0 && factor < 1.0 {
            factor * hat
        } else {
            hat
        }
    }

    /// The paper's final δ = K·2^{−d} + δ (as printed; 2^{−d} is not a valid per-round δ,
    /// see `theorem1`).
    pub fn paper_delta(&self, d: u64) -> LogProb {
        let k_two_d =
            LogProb::from_ln((self.rounds as f64).ln() - d as f64 * std::f64::consts::LN_2);
        LogProb::from_prob(self.delta).plus(k_two_d)
    }

    /// Eq. 23: Theorem 1 must apply at ε₀, i.e. ε₀ < e^{−1}Δ₁/Δ∞.
    pub fn check_sensitivities(&self, delta_1: f64, delta_inf: f64) -> Result<()> {
        let limit = (-1.0f64).exp() * delta_1 / delta_inf;
        if self.epsilon_0() < limit {
            Ok(())
        } else {
            Err(PrivacyError::OutsideValidity {
                formula: "DP-NormFedAvg eq. 23",
                reason: format!(
                    "epsilon_0 = {} >= e^-1 delta_1/delta_inf = {limit}",
                    self.epsilon_0()
                ),
            })
        }
    }

    /// Corollary 3.1 (per client, Theorem 3 sensitivities, no amplification):
    /// (ε̂, K2^{−d} + δ + 4(ρ−1)/n_i).
    pub fn corollary_3_1(&self, rho: f64, n_i: u64, d: u64) -> Result<(f64, LogProb)> {
        if !(rho.is_finite() && rho > 1.0) || n_i == 0 {
            return Err(PrivacyError::invalid(
                "rho",
                rho,
                "needs rho > 1 and n_i >= 1",
            ));
        }
        let fail = 4.0 * (rho - 1.0) / n_i as f64;
        Ok((
            self.composed_bound(),
            self.paper_delta(d).plus(LogProb::from_prob(fail)),
        ))
    }
}

/// dpfl's privacy event for one QTDL message at dimension d: (ε, correct δ). An error when
/// the correct δ rounds to 1 (no (ε, δ) guarantee at these parameters).
pub fn release_event(th: &Theorem1, d: u64) -> Result<PrivacyEvent> {
    let delta = th.delta(d)?.upper_f64();
    if delta >= 1.0 {
        return Err(PrivacyError::OutsideValidity {
            formula: "QTDL release",
            reason: format!(
                "the truncated discrete Laplace with m = {}, alpha = {} has delta = 1 (to f64) \
                 at epsilon {} in dimension {d}: widen m (theorem1::calibrate_for_delta)",
                th.m(),
                th.alpha(),
                th.epsilon
            ),
        });
    }
    // The likelihood-ratio bound is e^{α⌊Δ₁⌋}: report it when rounding put it above ε.
    let epsilon = th.epsilon.max(th.alpha() * th.delta_1.floor());
    Ok(PrivacyEvent::TruncatedDiscreteLaplace { epsilon, delta })
}

/// dpfl's ε at `delta` for a client that answers all `rounds` rounds with `event`.
pub fn dpfl_epsilon(
    event: &PrivacyEvent,
    rounds: u64,
    kind: AccountantKind,
    neighbouring: Neighbouring,
    delta: f64,
) -> Result<f64> {
    kind.epsilon(
        neighbouring,
        &event.clone().repeated(rounds),
        Delta::new(delta)?,
    )
}

/// Both accounts of a K-round run, side by side (never charge the paper's).
#[derive(Debug, Clone, PartialEq)]
pub struct KRoundReport {
    /// The paper's final ε ([`Theorem2::paper_epsilon`]) and δ = K·2^{−d} + δ.
    pub paper_epsilon: f64,
    /// The paper's δ, as a log.
    pub paper_delta: LogProb,
    /// dpfl's ε at `dpfl_delta` over K rounds of [`release_event`], or why there is none.
    pub dpfl_epsilon: Result<f64>,
    /// The δ dpfl's ε is reported at.
    pub dpfl_delta: f64,
}

/// The paper's Theorem 2 account and dpfl's for a client whose every round is a QTDL message
/// with `per_round` (calibrated at ε₀ by the caller: Theorem 1 or the corrected m).
pub fn k_round_report(
    t2: &Theorem2,
    per_round: &Theorem1,
    d: u64,
    kind: AccountantKind,
    neighbouring: Neighbouring,
    delta: f64,
) -> KRoundReport {
    KRoundReport {
        paper_epsilon: t2.paper_epsilon(),
        paper_delta: t2.paper_delta(d),
        dpfl_epsilon: release_event(per_round, d)
            .and_then(|ev| dpfl_epsilon(&ev, t2.rounds, kind, neighbouring, delta)),
        dpfl_delta: delta,
    }
}

#[cfg(test)]
mod tests {
    use super::super::theorem1::{calibrate, calibrate_for_delta};
    use super::*;

    #[test]
    fn theorem2_reproduces_the_digest_example() {
        // (0.1, 1e−9), r = 25, n = 50: 2r/n = 1, ε = 16Λ(√(1 + 0.1/Λ) − 1) = 0.79904 with
        // Λ = ln 1e9 = 20.7233; ε̂ = 0.79904/8 + 0.79904²/(256·20.7233) = 0.1.
        let th = Theorem2::from_target(0.1, 1e-9, 400, 25, 50).unwrap();
        assert!((th.epsilon - 0.799_04).abs() < 1e-5, "{}", th.epsilon);
        assert!((th.composed_bound() - 0.1).abs() < 1e-12);
        assert!((th.paper_epsilon() - 0.1).abs() < 1e-12);
        assert!(th.composed_tanh() <= th.composed_bound());
        // ε₀ = 0.79904/(8√(800·20.7233)) = 0.79904/(8·128.758) = 7.7572e−4.
        assert!(
            (th.epsilon_0() - 7.7572e-4).abs() < 1e-8,
            "{}",
            th.epsilon_0()
        );
        // δ_total = 1e−9 + 400·2^−d: 1e−9 in f64 for d = 328 810, exact log for d = 30.
        assert!((th.paper_delta(328_810).value() - 1e-9).abs() < 1e-23);
        let small = th.paper_delta(30).value();
        assert!((small - (1e-9 + 400.0 / 1_073_741_824.0)).abs() < 1e-18);
        // Amplification applies when 2r/n < 1: r = 10 of 50 → 0.4·ε̂.
        let th = Theorem2::new(0.79904, 1e-9, 400, 10, 50).unwrap();
        assert!((th.paper_epsilon() - 0.4 * th.composed_bound()).abs() < 1e-15);
        let (e, dl) = th.corollary_3_1(2.0, 1200, 30).unwrap();
        assert_eq!(e, th.composed_bound());
        assert!((dl.value() - (small + 4.0 / 1200.0)).abs() < 1e-15);
        assert!(Theorem2::new(6.0, 1e-9, 10, 1, 2).is_err());
        assert!(Theorem2::new(1.0, 0.2, 10, 1, 2).is_err()); // δ ≥ e^−9/4 = 0.1054
        assert!(Theorem2::new(1.0, 1e-9, 0, 1, 2).is_err());
        assert!(Theorem2::new(1.0, 1e-9, 10, 3, 2).is_err());
        // Eq. 23: worst case (2s, 2ds) holds for any d ≥ 1.
        assert!(
            th.check_sensitivities(2.0 * 328_810.0 * 64.0, 128.0)
                .is_ok()
        );
        assert!(th.check_sensitivities(1.0, 1.0).is_ok());
        // ε < 6 and δ < e^{−9/4} give ε₀ < 6/(8√4.5) = 0.3536 < e^{−1}: eq. 23 holds for
        // every Δ₁ ≥ Δ∞ (why the theorem takes e^{−9/4}); it fails only for Δ₁ < Δ∞.
        let edge = Theorem2::new(5.999, 0.105, 1, 1, 2).unwrap();
        assert!(edge.epsilon_0() > 0.35 && edge.epsilon_0() < 0.3536);
        assert!(edge.check_sensitivities(1.0, 1.0).is_ok());
        assert!(edge.check_sensitivities(1.0, 2.0).is_err());
    }

    #[test]
    fn dpfl_refuses_theorem1_parameters_and_accounts_corrected_ones() {
        // FMNIST s = 2^12, μ = 0.1, ε = 10 per round: the correct δ is 1.
        let (s, d) = (4096.0, 328_810.0f64);
        let (dinf, d1) = (2.0 + 0.1 * s, 2.0 * d + 0.1 * s * d.sqrt());
        let th = calibrate(10.0, d1, dinf).unwrap();
        let (e, claimed) = paper_per_round(&th, 328_810);
        assert_eq!(e, 10.0);
        assert!(claimed.log2() < -328_810.0);
        assert!(release_event(&th, 328_810).is_err());
        // Corrected to δ₀ = 1e−12 per round: 10 rounds, basic composition gives exactly
        // (100, 1e−11 + …); the optimal (KOV) rule is tighter and never above basic.
        let th = calibrate_for_delta(10.0, 1e-12f64.ln(), d1, dinf, 328_810).unwrap();
        let ev = release_event(&th, 328_810).unwrap();
        let PrivacyEvent::TruncatedDiscreteLaplace { epsilon, delta } = ev else {
            panic!("event kind");
        };
        assert!((epsilon - 10.0).abs() < 1e-12 && epsilon >= 10.0 * (1.0 - 1e-15));
        assert!(delta > 0.0 && delta <= 1e-12);
        let basic = dpfl_epsilon(
            &ev,
            10,
            AccountantKind::Basic,
            Neighbouring::AddRemove,
            1e-10,
        )
        .unwrap();
        assert!((basic - 100.0).abs() < 1e-9, "{basic}");
        let opt = dpfl_epsilon(
            &ev,
            10,
            AccountantKind::Optimal,
            Neighbouring::AddRemove,
            1e-10,
        )
        .unwrap();
        assert!(opt <= basic + 1e-9);
        // RDP and zCDP have no bound for a δ > 0 event: an error, never pure DP.
        assert!(
            dpfl_epsilon(&ev, 10, AccountantKind::Rdp, Neighbouring::AddRemove, 1e-10).is_err()
        );
        assert!(
            dpfl_epsilon(
                &ev,
                10,
                AccountantKind::Zcdp,
                Neighbouring::AddRemove,
                1e-10
            )
            .is_err()
        );
    }

    #[test]
    fn experiment_ii_has_no_guarantee_and_no_affordable_fix() {
        // FMNIST, worst case Δ∞ = 2s, Δ₁ = 2ds (s = 2^12), total (0.1, 1e−9), K = 400,
        // r = 25 of n = 50: the paper reports (0.1, 1e−9 + 400·2^−d); Theorem 1 gives
        // m = 2s + 1 = 8193 (digest §2.8), whose correct δ is 1, so dpfl refuses.
        let (s, d) = (4096.0, 328_810u64);
        let t2 = Theorem2::from_target(0.1, 1e-9, 400, 25, 50).unwrap();
        let (d1, dinf) = (2.0 * d as f64 * s, 2.0 * s);
        let th = calibrate(t2.epsilon_0(), d1, dinf).unwrap();
        assert_eq!(th.m(), 8193);
        let r = k_round_report(
            &t2,
            &th,
            d,
            AccountantKind::Optimal,
            Neighbouring::AddRemove,
            1e-9,
        );
        assert!((r.paper_epsilon - 0.1).abs() < 1e-12);
        assert!((r.paper_delta.value() - 1e-9).abs() < 1e-23);
        assert!(r.dpfl_epsilon.is_err());
        // The corrected m would need α·m ≳ 20 with α = ε₀/Δ₁ ≈ 2.9e−13: m > 2^40, refused.
        assert!(calibrate_for_delta(t2.epsilon_0(), (1e-12f64).ln(), d1, dinf, d).is_err());
    }
}
