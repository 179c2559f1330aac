//! The Binomial-mechanism baseline of DP-NormFedAvg's experiment (i) (Das et al. §6 (i),
//! App. G; digest §3.3 and §6.2 item 9): the same quantizer Q_s, then Bin(N, ½) − N/2 noise
//! per coordinate instead of TDL, with N set by Theorem 1 of cpSGD (Agarwal, Suresh, Yu,
//! Kumar & McMahan, NeurIPS 2018) for a per-round (ε, δ).
//!
//! cpSGD Theorem 1 (as transcribed in the digest, §3.3; the cpSGD paper itself is not in
//! `shared/papers`; an independent public transcription of arXiv:1805.10559 eqs. 7, 12, 16, 17
//! found in code search has the same terms, constants and condition): with p = ½ and the
//! grid scale s_c = 1 (the Δ's are in integer grid units), if Np(1−p) ≥ max(23 ln(10d/δ),
//! 2Δ∞), the mechanism x + Bin(N, p) − Np is (ε(N), δ)-DP with
//! ε(N) = Δ₂√(2 ln(1.25/δ))/√(Np(1−p)) + (Δ₂ c_p √(ln(10/δ)) + Δ₁ b_p)/(Np(1−p)(1 − δ/10))
//!        + ((2/3)Δ∞ ln(1.25/δ) + Δ∞ d_p ln(20d/δ) ln(10/δ))/(Np(1−p)),
//! b_p = (2/3)(p² + (1−p)²) + 1 − 2p, c_p = √2(3p³ + 3(1−p)³ + 2p² + 2(1−p)²),
//! d_p = (4/3)(p² + (1−p)²). ε(N) decreases in N; [`calibrate`] returns the smallest N.
//!
//! Decisions: the noise is centred, Bin(N, ½) − N/2 (with N even so it is an integer; an odd
//! smallest N is raised by one, which only lowers ε); the bits per coordinate count
//! 2(s+N)+1 levels (`m = N` in eq. 7), which is what reproduces the paper's t = 35 and 23 —
//! the centred noise needs only 2(s + N/2)+1, so the paper's count is an upper bound.
//! The exact Binomial sampler belongs to `crate::binomial` (the shuffle work); this module is
//! the calculator only.

use crate::error::{PrivacyError, Result};
use crate::event::PrivacyEvent;

use super::theorem1::bits_per_coordinate;

/// Sensitivities of the quantized vector in grid units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sensitivities {
    /// Δ₁.
    pub l1: f64,
    /// Δ₂.
    pub l2: f64,
    /// Δ∞.
    pub linf: f64,
}

/// A calibrated Binomial mechanism: Bin(n_trials, ½) − n_trials/2 per coordinate.
#[derive(Debug, Clone, PartialEq)]
pub struct CpSgdBinomial {
    /// N, the trials per coordinate.
    pub n_trials: u64,
    /// The ε it was calibrated for.
    pub epsilon: f64,
    /// The δ it was calibrated for.
    pub delta: f64,
    /// d, the coordinates.
    pub dimension: u64,
}

/// cpSGD Theorem 1's ε at N trials, p = ½; `None` when N violates the theorem's condition.
pub fn cpsgd_epsilon(n_trials: u64, delta: f64, sens: Sensitivities, d: u64) -> Option<f64> {
    let p: f64 = 0.5;
    let q = 1.0 - p;
    let npq = n_trials as f64 * p * q;
    let d = d as f64;
    if npq < (23.0 * (10.0 * d / delta).ln()).max(2.0 * sens.linf) {
        return None;
    }
    let b_p = 2.0 / 3.0 * (p * p + q * q) + 1.0 - 2.0 * p;
    let c_p =
        std::f64::consts::SQRT_2 * (3.0 * p.powi(3) + 3.0 * q.powi(3) + 2.0 * p * p + 2.0 * q * q);
    let d_p = 4.0 / 3.0 * (p * p + q * q);
    let l125 = (1.25 / delta).ln();
    let l10 = (10.0 / delta).ln();
    Some(
        sens.l2 * (2.0 * l125).sqrt() / npq.sqrt()
            + (sens.l2 * c_p * l10.sqrt() + sens.l1 * b_p) / (npq * (1.0 - delta / 10.0))
            + (2.0 / 3.0 * sens.linf * l125 + sens.linf * d_p * (20.0 * d / delta).ln() * l10)
                / npq,
    )
}

/// The smallest N (even) with cpSGD's condition and ε(N) ≤ ε.
pub fn calibrate(epsilon: f64, delta: f64, sens: Sensitivities, d: u64) -> Result<CpSgdBinomial> {
    if !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(PrivacyError::invalid(
            "epsilon",
            epsilon,
            "must be finite and > 0",
        ));
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(PrivacyError::invalid("delta", delta, "must lie in (0, 1)"));
    }
    if d == 0 {
        return Err(PrivacyError::invalid("d", 0.0, "dimension must be >= 1"));
    }
    let Sensitivities { l1, l2, linf } = sens;
    if !(linf.is_finite() && linf > 0.0 && l2 >= linf && l1 >= l2 && l1.is_finite()) {
        return Err(PrivacyError::invalid(
            "sensitivities",
            l2,
            format!("need 0 < linf <= l2 <= l1 finite, got l1 {l1}, l2 {l2}, linf {linf}"),
        ));
    }
    let ok = |n: u64| cpsgd_epsilon(n, delta, sens, d).is_some_and(|e| e <= epsilon);
    let cap = 1u64 << 62;
    let (mut lo, mut hi) = (1u64, 2u64);
    while !ok(hi) {
        lo = hi;
        hi = hi.saturating_mul(2);
        if lo >= cap {
            return Err(PrivacyError::OutsideValidity {
                formula: "cpSGD Theorem 1",
                reason: format!("no N below 2^62 reaches epsilon {epsilon} at delta {delta}"),
            });
        }
    }
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let n = if ok(lo) { lo } else { hi };
    Ok(CpSgdBinomial {
        n_trials: n + n % 2,
        epsilon,
        delta,
        dimension: d,
    })
}

impl CpSgdBinomial {
    /// t = ⌈log₂(2(s+N)+1)⌉, the paper's count (module docs).
    pub fn bits(&self, s: u64) -> Result<u32> {
        bits_per_coordinate(s, self.n_trials)
    }
    /// Per-coordinate noise variance in real units, N/(4s²).
    pub fn variance(&self, s: u64) -> f64 {
        self.n_trials as f64 / (4.0 * s as f64 * s as f64)
    }
    /// The per-message privacy event: cpSGD's (ε, δ).
    pub fn event(&self) -> PrivacyEvent {
        PrivacyEvent::EpsilonDelta {
            epsilon: self.epsilon,
            delta: self.delta,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eq6(s: f64, d: f64) -> Sensitivities {
        // Eq. 6 with μ = 0.1 and Δ₂ = 2√d + μs (digest §5.4 (i)).
        Sensitivities {
            l1: 2.0 * d + 0.1 * s * d.sqrt(),
            l2: 2.0 * d.sqrt() + 0.1 * s,
            linf: 2.0 + 0.1 * s,
        }
    }

    #[test]
    fn reproduces_the_papers_binomial_t_values() {
        // Digest §5.6: N = 1.211e10 (t = 35) for CIFAR s = 2^20, N = 2.84e6 (t = 23) for
        // FMNIST s = 2^12, at per-round (10, 3e−6).
        let c = calibrate(10.0, 3e-6, eq6(1_048_576.0, 2_210_410.0), 2_210_410).unwrap();
        assert!(
            (c.n_trials as f64 - 1.2107e10).abs() < 1e7,
            "{}",
            c.n_trials
        );
        assert_eq!(c.bits(1 << 20).unwrap(), 35);
        assert!((c.variance(1 << 20) - 2.75e-3).abs() < 1e-5);
        let f = calibrate(10.0, 3e-6, eq6(4096.0, 328_810.0), 328_810).unwrap();
        assert!((f.n_trials as f64 - 2.8437e6).abs() < 1e3, "{}", f.n_trials);
        assert_eq!(f.bits(1 << 12).unwrap(), 23);
        assert!((f.variance(1 << 12) - 4.24e-2).abs() < 1e-4);
        // Smallest: one fewer pair of trials misses ε.
        let e = cpsgd_epsilon(f.n_trials - 2, 3e-6, eq6(4096.0, 328_810.0), 328_810).unwrap();
        assert!(e > 10.0);
    }

    #[test]
    fn hand_value_and_bad_inputs() {
        // d = 1, δ = 0.1, Δ = (1, 1, 1): N = 400 gives Npq = 100 < 23 ln 100 = 105.9 (refused).
        let unit = Sensitivities {
            l1: 1.0,
            l2: 1.0,
            linf: 1.0,
        };
        assert!(cpsgd_epsilon(400, 0.1, unit, 1).is_none());
        // N = 800, Npq = 200: ε = √(2 ln 12.5)/√200 + (c·√(ln 100) + b)/(200·0.99)
        //   + ((2/3) ln 12.5 + (2/3) ln 200 · ln 100)/200, with b = 1/3, c = √2·1.75,
        // = 0.158925 + 0.028507 + 0.089751 = 0.277183 (hand computation).
        let e = cpsgd_epsilon(800, 0.1, unit, 1).unwrap();
        assert!((e - 0.277_183).abs() < 2e-6, "{e}");
        assert!(calibrate(0.0, 1e-5, unit, 1).is_err());
        assert!(calibrate(1.0, 1.0, unit, 1).is_err());
        let bad = Sensitivities {
            l1: 1.0,
            l2: 2.0,
            linf: 1.0,
        };
        assert!(calibrate(1.0, 1e-5, bad, 1).is_err());
    }
}
