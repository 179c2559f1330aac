//! QTDL — quantized, truncated-discrete-Laplace-noised vectors — and its baselines, after
//! Das, Hashemi, Sanghavi & Dhillon, "DP-NormFedAvg: Normalizing Client Updates for
//! Privacy-Preserving Federated Learning" (digest: `shared/spec/dp-normfedavg.md`).
//!
//! * [`quantizer`]: Q_s (§4, Algorithm 1);
//! * [`tdl`]: TDL(m, α) — pmf, normaliser, Lemma 1 variance, exact sampler;
//! * [`theorem1`]: (ε, Δ₁, Δ∞) → (α, m), t bits; the paper's claimed δ and the correct δ;
//! * [`binomial_mech`]: the cpSGD Binomial baseline's calculator (experiment (i));
//! * [`accounting`]: the paper's per-round and K-round (Theorem 2) modes, and dpfl's own;
//! * [`brute`]: exhaustive privacy check of the mechanism for tiny d, s, m.
//!
//! **Privacy finding (read before using QTDL).** Theorem 1's δ = (Δ∞/Z)^d ≤ 2^{−d} does not
//! hold for d ≥ 2 (proof error in App. B, eq. 12: outputs off the common support are counted
//! as if *all* coordinates had to be off it; see [`theorem1`]). With Theorem 1's m the correct
//! δ is ≈ 1 for the paper's settings, so QTDL at Theorem 1's parameters gives no meaningful
//! (ε, δ) guarantee; [`theorem1::calibrate_for_delta`] gives the m that does (t grows to about
//! the Binomial baseline's). dpfl's accountant only ever sees the correct δ. Numbers: at d = 2
//! (s = 1, Δ∞ = 2, Δ₁ = 4, ε = 0.7, m = 3) the exhaustive δ is 0.431 against the claimed
//! 0.144; FMNIST s = 2^12 at ε = 10 (μ = 0.1) needs m = 1 993 383 (t = 22) instead of 413
//! (t = 14) for a true δ of 1e−9; the worst-case sensitivities of experiments (ii)/(iii) need
//! m > 2^40 in experiment (ii) (tested; (iii) is of the same order): no affordable calibration.
//!
//! Neighbouring relation (digest §6.2 item 11): nothing here depends on it; Δ₁ and Δ∞ must be
//! sensitivities under the relation the silo's ledger accounts with.

#![warn(missing_docs)]

pub mod accounting;
pub mod binomial_mech;
pub(crate) mod bits;
#[cfg(test)]
pub(crate) mod brute;
pub mod quantizer;
pub mod tdl;
pub mod theorem1;

pub use quantizer::StochasticQuantizer;
pub use tdl::TruncatedDiscreteLaplace;

/// A probability held as its natural log, for δ's such as 2^{−d} that underflow f64.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct LogProb(f64);

impl LogProb {
    /// Probability 1.
    pub const ONE: LogProb = LogProb(0.0);
    /// Probability 0.
    pub const ZERO: LogProb = LogProb(f64::NEG_INFINITY);

    /// From ln p (clamped to ≤ 0; NaN becomes 1, the conservative value for a δ).
    pub fn from_ln(ln: f64) -> Self {
        if ln.is_nan() {
            return LogProb::ONE;
        }
        LogProb(ln.min(0.0))
    }
    /// From p (p = 0 gives [`Self::ZERO`]).
    pub fn from_prob(p: f64) -> Self {
        Self::from_ln(p.ln())
    }
    /// ln p.
    pub fn ln(self) -> f64 {
        self.0
    }
    /// log₂ p.
    pub fn log2(self) -> f64 {
        self.0 / std::f64::consts::LN_2
    }
    /// p in f64 (0 when it underflows).
    pub fn value(self) -> f64 {
        self.0.exp()
    }
    /// An f64 that is ≥ p: p rounded up, and at least the smallest positive f64 when p > 0
    /// (so a positive δ never reaches an accountant as 0, i.e. as pure DP).
    pub fn upper_f64(self) -> f64 {
        if self.0 == f64::NEG_INFINITY {
            return 0.0;
        }
        let v = self.0.exp();
        (v * (1.0 + 1e-15)).next_up().clamp(f64::from_bits(1), 1.0)
    }
    /// p + q.
    pub fn plus(self, other: LogProb) -> LogProb {
        let (hi, lo) = if self.0 >= other.0 {
            (self.0, other.0)
        } else {
            (other.0, self.0)
        };
        if hi == f64::NEG_INFINITY {
            return LogProb::ZERO;
        }
        Self::from_ln(hi + (lo - hi).exp().ln_1p())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_probabilities_add_and_round_up() {
        let a = LogProb::from_ln(-328_810.0 * std::f64::consts::LN_2); // 2^−328810
        assert_eq!(a.value(), 0.0);
        assert!(a.upper_f64() > 0.0);
        assert!((a.log2() + 328_810.0).abs() < 1e-6);
        let s = LogProb::from_prob(1e-9).plus(a);
        assert_eq!(s.ln(), 1e-9f64.ln());
        let h = LogProb::from_prob(0.25).plus(LogProb::from_prob(0.5));
        assert!((h.value() - 0.75).abs() < 1e-15);
        assert!(LogProb::from_prob(0.3).upper_f64() >= 0.3);
        assert_eq!(LogProb::from_ln(f64::NAN), LogProb::ONE);
        assert_eq!(LogProb::ZERO.upper_f64(), 0.0);
    }
}
