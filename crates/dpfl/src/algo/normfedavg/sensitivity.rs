//! Sensitivity providers of DP-NormFedAvg, in integer grid units (the real-valued sensitivity
//! times s; digest §2.4, §6.1 item 5):
//! * worst case (Definition 1's trivial bounds): Δ∞ = 2s, Δ₁ = 2ds; Δ₂ = 2s + 2√d
//!   (‖Q(u₁) − Q(u₂)‖₂ ≤ s‖u₁ − u₂‖₂ + 2√d with ‖u₁ − u₂‖₂ ≤ 2, eqs. 118–121's form);
//! * Theorem 3 (A1 + A3, n_i ≥ 15e^{1/4}ρ/2): Δ∞ = 2 + 15e^{1/4}ρs/n_i,
//!   Δ₁ = 2d + 15e^{1/4}ρs√d/n_i, Δ₂ = 2√d + 15e^{1/4}ρs/n_i, failing with probability
//!   4(ρ−1)/n_i (reported, and added to the round's δ as in Corollary 3.1);
//! * the experiments' eq. 6: Δ∞ = 2 + μs, Δ₁ = 2d + μs√d, Δ₂ = 2√d + μs — a chosen constant,
//!   so no guarantee unless μ bounds the true sensitivity (the calibration report says so).

use serde::{Deserialize, Serialize};

use super::config::SensitivitySpec;

/// Sensitivities in grid units and the probability that they fail to hold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sensitivities {
    /// Δ₁.
    pub l1: f64,
    /// Δ₂.
    pub l2: f64,
    /// Δ∞.
    pub linf: f64,
    /// 0 for worst case and the μ form; 4(ρ−1)/n_i for Theorem 3.
    pub failure: f64,
}

/// 15e^{1/4}, Theorem 3's constant (≈ 19.26).
fn theorem3_constant() -> f64 {
    15.0 * 0.25f64.exp()
}

/// The sensitivities of client i (n_i records) for resolution s and dimension d.
pub fn sensitivities(
    spec: SensitivitySpec,
    s: u64,
    d: usize,
    n_i: usize,
) -> crate::Result<Sensitivities> {
    let (s, df) = (s as f64, d as f64);
    Ok(match spec {
        SensitivitySpec::WorstCase => Sensitivities {
            linf: 2.0 * s,
            l1: 2.0 * df * s,
            l2: 2.0 * s + 2.0 * df.sqrt(),
            failure: 0.0,
        },
        SensitivitySpec::Mu { mu } => Sensitivities {
            linf: 2.0 + mu * s,
            l1: 2.0 * df + mu * s * df.sqrt(),
            l2: 2.0 * df.sqrt() + mu * s,
            failure: 0.0,
        },
        SensitivitySpec::Theorem3 { rho } => {
            let c = theorem3_constant() * rho;
            let n = n_i as f64;
            if n < c / 2.0 {
                return Err(crate::Error::config(
                    "algorithm.privacy.sensitivity",
                    format!(
                        "Theorem 3 needs n_i >= 15 e^(1/4) rho / 2 = {:.2}, a silo has {n_i} records",
                        c / 2.0
                    ),
                ));
            }
            Sensitivities {
                linf: 2.0 + c * s / n,
                l1: 2.0 * df + c * s * df.sqrt() / n,
                l2: 2.0 * df.sqrt() + c * s / n,
                failure: (4.0 * (rho - 1.0) / n).min(1.0),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_match_hand_computed_values() {
        // Worst case, s = 4, d = 9: Δ∞ = 8, Δ₁ = 72, Δ₂ = 8 + 6 = 14.
        let w = sensitivities(SensitivitySpec::WorstCase, 4, 9, 10).unwrap();
        assert_eq!((w.linf, w.l1, w.l2, w.failure), (8.0, 72.0, 14.0, 0.0));
        // Eq. 6, μ = 0.1, s = 2^12, d = 328,810 (digest §5.6): Δ∞ = 2 + 409.6 = 411.6,
        // Δ₁ = 657,620 + 409.6·573.42... = 892,496.8.
        let m = sensitivities(SensitivitySpec::Mu { mu: 0.1 }, 4096, 328_810, 1200).unwrap();
        assert!((m.linf - 411.6).abs() < 1e-9);
        let want = 657_620.0 + 409.6 * 328_810f64.sqrt();
        assert!((m.l1 - want).abs() < 1e-6 && (m.l1 - 8.925e5).abs() < 100.0);
        // Theorem 3, ρ = 2, n_i = 1200, s = 64, d = 4: c = 15e^{1/4}·2 = 38.520763,
        // Δ∞ = 2 + 38.520763·64/1200 = 4.054441, failure 4/1200.
        let t = sensitivities(SensitivitySpec::Theorem3 { rho: 2.0 }, 64, 4, 1200).unwrap();
        let c = 30.0 * 0.25f64.exp();
        assert!((c - 38.520_763).abs() < 1e-5);
        assert!((t.linf - (2.0 + c * 64.0 / 1200.0)).abs() < 1e-12);
        assert!((t.linf - 4.054_441).abs() < 1e-5);
        assert!((t.l1 - (8.0 + c * 64.0 * 2.0 / 1200.0)).abs() < 1e-12);
        assert!((t.failure - 4.0 / 1200.0).abs() < 1e-15);
        // n_i below 15e^{1/4}ρ/2 ≈ 19.26 for ρ = 2 is refused.
        let e = sensitivities(SensitivitySpec::Theorem3 { rho: 2.0 }, 64, 4, 19).unwrap_err();
        assert!(e.to_string().contains("n_i"), "{e}");
    }
}
