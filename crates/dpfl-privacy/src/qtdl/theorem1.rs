//! Theorem 1 of DP-NormFedAvg (Das et al., §4; proof App. B): the TDL parameters
//! (ε, Δ₁, Δ∞) → (α, m), α = ε/Δ₁, m = ⌈−(1/α) ln(1 − (e^α − 1)Δ∞)⌉ (eq. 16), the smallest m
//! with Z_{m,α} ≥ 1 + 2Δ∞; bits per coordinate t = ⌈log₂(2(s+m)+1)⌉ (eq. 7).
//!
//! Validity checks (digest §6.1 item 3): ε, Δ₁, Δ∞ finite; Δ∞ ≥ 1 (the m bound's proof
//! assumes ≥ 2; we only report [`Theorem1::satisfies_m_bound`]); Δ∞ ≤ Δ₁ (an ℓ∞ norm never
//! exceeds the ℓ₁ norm; the issue lists "Δ∞ ≥ Δ₁" as bad input, but Δ∞ = Δ₁ is a real case —
//! one coordinate moves, e.g. d = 1 — so only Δ∞ > Δ₁ is refused); ε < e^{−1}Δ₁/Δ∞. m is
//! computed with log1p/expm1 and then moved to the exact smallest integer by evaluating Z,
//! with a relative margin of 1e−12 so that a rounding tie never shortens the support.
//!
//! **The paper's δ is wrong for d ≥ 2, and is reported only as "claimed".** App. B bounds the
//! outputs one neighbour reaches and the other cannot by |S₂ − S₁| ≤ Δ∞^d points, i.e. it
//! counts outputs off the overlap in *every* coordinate. An output is off the common support
//! as soon as *one* coordinate is, so the mass off the overlap for a shift vector k is
//! 1 − Π_i (1 − p(k_i)), p(k) = P[Y ≥ m − k + 1], not Π p(k_i). At Theorem 1's m (≈ Δ∞ when αm
//! is small) p(Δ∞) ≈ 1/2, so for large d the true δ is ≈ 1, not 2^{−d}. The brute-force check
//! (`super::brute`) shows it at d = 2. [`worst_case_delta`] gives the correct δ: with
//! α⌊Δ₁⌋ ≤ ε every common output has likelihood ratio ≤ e^ε, so the hockey-stick divergence
//! at e^ε *equals* the mass off the overlap; g(k) = −ln(1 − p(k)) is convex on [0, m+1]
//! (p has increasing increments there, and m ≥ Δ∞ since Z ≤ 2m+1), so over integer shifts
//! with ‖k‖₁ ≤ ⌊Δ₁⌋, ‖k‖∞ ≤ ⌊Δ∞⌋ (quantized values are integers) the maximum of Σ g(k_i) is at
//! the greedy vertex: ⌊⌊Δ₁⌋/⌊Δ∞⌋⌋ coordinates (at most d) at ⌊Δ∞⌋ and one at the remainder.
//! [`calibrate_for_delta`] is the corrected calibration: the same α and the smallest m whose
//! true δ meets a target.

use crate::error::{PrivacyError, Result};

use super::LogProb;
use super::tdl::{MAX_M, TruncatedDiscreteLaplace, normaliser};

/// Theorem 1's output.
#[derive(Debug, Clone, PartialEq)]
pub struct Theorem1 {
    /// ε of the theorem's pure-DP part.
    pub epsilon: f64,
    /// Δ₁ in grid units.
    pub delta_1: f64,
    /// Δ∞ in grid units.
    pub delta_inf: f64,
    /// The distribution actually sampled (its α ≤ ε/Δ₁).
    pub tdl: TruncatedDiscreteLaplace,
}

fn check_inputs(epsilon: f64, delta_1: f64, delta_inf: f64) -> Result<()> {
    if !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(PrivacyError::invalid(
            "epsilon",
            epsilon,
            "must be finite and > 0",
        ));
    }
    if !(delta_inf.is_finite() && delta_inf >= 1.0) {
        return Err(PrivacyError::invalid(
            "delta_inf",
            delta_inf,
            "the l-infinity sensitivity in grid units must be finite and >= 1",
        ));
    }
    if !(delta_1.is_finite() && delta_1 >= delta_inf) {
        return Err(PrivacyError::invalid(
            "delta_1",
            delta_1,
            format!("the l1 sensitivity must be finite and >= delta_inf = {delta_inf}"),
        ));
    }
    Ok(())
}

/// Theorem 1: (ε, Δ₁, Δ∞) → (α, m).
pub fn calibrate(epsilon: f64, delta_1: f64, delta_inf: f64) -> Result<Theorem1> {
    check_inputs(epsilon, delta_1, delta_inf)?;
    let limit = (-1.0f64).exp() * delta_1 / delta_inf;
    if epsilon >= limit {
        return Err(PrivacyError::OutsideValidity {
            formula: "DP-NormFedAvg Theorem 1",
            reason: format!("needs epsilon < e^-1 * delta_1/delta_inf = {limit}, got {epsilon}"),
        });
    }
    let alpha = epsilon / delta_1;
    let target = 1.0 + 2.0 * delta_inf;
    // Z rounding is ~1e−16 relative; demand a clear margin so a tie never shortens m.
    let enough = |m: u64| normaliser(m, alpha) >= target * (1.0 + 1e-12);
    let guess = (-(-alpha.exp_m1() * delta_inf).ln_1p() / alpha).ceil();
    if !(guess.is_finite() && guess >= 1.0 && guess <= MAX_M as f64) {
        return Err(PrivacyError::Numerical {
            context: "Theorem 1 support width m",
            reason: format!("m = {guess} for alpha = {alpha}, delta_inf = {delta_inf}"),
        });
    }
    let mut m = guess as u64;
    while !enough(m) {
        m += 1;
        if m > MAX_M {
            return Err(PrivacyError::Numerical {
                context: "Theorem 1 support width m",
                reason: format!("no m <= {MAX_M} reaches Z >= 1 + 2 delta_inf"),
            });
        }
    }
    while m > 1 && enough(m - 1) {
        m -= 1;
    }
    let tdl = TruncatedDiscreteLaplace::new(m, alpha)?;
    Ok(Theorem1 {
        epsilon,
        delta_1,
        delta_inf,
        tdl,
    })
}

impl Theorem1 {
    /// The support's half-width m.
    pub fn m(&self) -> u64 {
        self.tdl.m()
    }
    /// α as sampled.
    pub fn alpha(&self) -> f64 {
        self.tdl.alpha()
    }
    /// Z_{m,α}.
    pub fn normaliser(&self) -> f64 {
        self.tdl.normaliser()
    }
    /// The paper's claimed δ = (Δ∞/Z)^d, as log (it underflows f64 for d ≳ 1000). **Not a
    /// valid δ for d ≥ 2** (module docs); never feed it to an accountant.
    pub fn claimed_delta(&self, d: u64) -> LogProb {
        LogProb::from_ln(d as f64 * (self.delta_inf / self.normaliser()).ln())
    }
    /// The correct δ at this ε ([`worst_case_delta`]).
    pub fn delta(&self, d: u64) -> Result<LogProb> {
        worst_case_delta(&self.tdl, self.epsilon, self.delta_1, self.delta_inf, d)
    }
    /// Theorem 1's m < ⌈2.5Δ∞⌉.
    pub fn satisfies_m_bound(&self) -> bool {
        (self.m() as f64) < (2.5 * self.delta_inf).ceil()
    }
    /// t = ⌈log₂(2(s+m)+1)⌉ (eq. 7).
    pub fn bits(&self, s: u64) -> Result<u32> {
        bits_per_coordinate(s, self.m())
    }
    /// ⌈log₂(1 + m/s)⌉, the bits privacy adds (proof of Cor. 3.1).
    pub fn extra_bits(&self, s: u64) -> Result<u32> {
        check_s(s)?;
        let (s, m) = (u128::from(s), u128::from(self.m()));
        Ok((0..=64).find(|&b| s << b >= s + m).unwrap_or(64))
    }
}

fn check_s(s: u64) -> Result<()> {
    if s == 0 || s > 1 << 40 {
        return Err(PrivacyError::invalid(
            "s",
            s as f64,
            "quantization resolution must lie in [1, 2^40]",
        ));
    }
    Ok(())
}

/// t = ⌈log₂(2(s+m)+1)⌉ on integers: the bit length of 2(s+m), the largest offset-binary
/// value z + s + m.
pub fn bits_per_coordinate(s: u64, m: u64) -> Result<u32> {
    check_s(s)?;
    let top = 2 * (u128::from(s) + u128::from(m));
    Ok(128 - top.leading_zeros())
}

/// The correct δ of TDL noise on an integer vector of dimension `d` whose neighbours differ
/// by at most Δ₁ in ℓ₁ and Δ∞ in ℓ∞, at the ε the distribution's α supports (module docs):
/// δ = 1 − (1 − p(⌊Δ∞⌋))^n (1 − p(r)), n = min(d, ⌊⌊Δ₁⌋/⌊Δ∞⌋⌋), r the remainder (if n < d).
pub fn worst_case_delta(
    tdl: &TruncatedDiscreteLaplace,
    epsilon: f64,
    delta_1: f64,
    delta_inf: f64,
    d: u64,
) -> Result<LogProb> {
    check_inputs(epsilon, delta_1, delta_inf)?;
    if d == 0 {
        return Err(PrivacyError::invalid("d", 0.0, "dimension must be >= 1"));
    }
    let (k1, kinf) = (delta_1.floor() as u64, delta_inf.floor() as u64);
    // α = ε/Δ₁ in f64 can put α·⌊Δ₁⌋ an ulp above ε; callers report max(ε, α⌊Δ₁⌋).
    if tdl.alpha() * k1 as f64 > epsilon * (1.0 + 1e-12) {
        return Err(PrivacyError::OutsideValidity {
            formula: "TDL overlap bound",
            reason: format!(
                "alpha * delta_1 = {} exceeds epsilon = {epsilon}",
                tdl.alpha() * k1 as f64
            ),
        });
    }
    if kinf > tdl.m() {
        // Never happens for a Theorem 1 or calibrated m; the convexity argument needs it.
        return Ok(LogProb::ONE);
    }
    let p = |k: u64| tdl.tail(tdl.m() as i64 - k as i64 + 1);
    let full = (k1 / kinf).min(d);
    let rest = if full < d { k1 - full * kinf } else { 0 };
    // Tiny tails (calibrations to δ ≪ 1e−300): in log space, with −ln(1 − p) ≤ p(1 + 2p) and
    // δ = 1 − e^{−S} ≤ S, so ln δ ≤ ln(n·p(k) + p(r)) + 4e−13 (p < e^{−30} here).
    let ln_p = |k: u64| {
        if k == 0 {
            f64::NEG_INFINITY
        } else {
            tdl.ln_tail(tdl.m() as i64 - k as i64 + 1)
                .unwrap_or(f64::NEG_INFINITY)
        }
    };
    let (ln_full, ln_rest) = ((full as f64).ln() + ln_p(kinf), ln_p(rest));
    if ln_full.max(ln_rest) < -30.0 {
        let s = LogProb::from_ln(ln_full).plus(LogProb::from_ln(ln_rest));
        return Ok(LogProb::from_ln(s.ln() + 4e-13));
    }
    let ln_keep = full as f64 * (-p(kinf)).ln_1p() + (-p(rest)).ln_1p();
    // δ = 1 − e^{ln_keep} = −expm1(ln_keep).
    let delta = -ln_keep.exp_m1();
    if ln_keep.is_nan() || ln_keep > 0.0 {
        return Err(PrivacyError::Numerical {
            context: "TDL overlap bound",
            reason: format!("log survival {ln_keep}"),
        });
    }
    Ok(if delta > 1e-300 {
        LogProb::from_ln(delta.ln())
    } else {
        // −expm1(x) = −x(1 + x/2 + …) and x ≈ −δ tiny: ln δ = ln(−x) to 1e−16.
        LogProb::from_ln((-ln_keep).ln())
    })
}

/// The corrected calibration: α = ε/Δ₁ as in Theorem 1, and the smallest m ≥ Theorem 1's m
/// whose true δ ([`worst_case_delta`]) is at most `delta` (given as ln δ, so 2^{−d}-sized
/// targets can be asked for).
pub fn calibrate_for_delta(
    epsilon: f64,
    ln_delta: f64,
    delta_1: f64,
    delta_inf: f64,
    d: u64,
) -> Result<Theorem1> {
    if ln_delta.is_nan() || ln_delta >= 0.0 || ln_delta.is_infinite() {
        return Err(PrivacyError::invalid(
            "ln_delta",
            ln_delta,
            "must be finite and < 0",
        ));
    }
    let base = calibrate(epsilon, delta_1, delta_inf)?;
    let alpha = epsilon / delta_1;
    let ok = |m: u64| -> Result<bool> {
        let t = TruncatedDiscreteLaplace::new(m, alpha)?;
        Ok(worst_case_delta(&t, epsilon, delta_1, delta_inf, d)?.ln() <= ln_delta)
    };
    let (mut lo, mut hi) = (base.m(), base.m());
    while !ok(hi)? {
        lo = hi;
        hi = hi.saturating_mul(2).min(MAX_M);
        if lo == MAX_M {
            return Err(PrivacyError::OutsideValidity {
                formula: "TDL corrected calibration",
                reason: format!("no m <= {MAX_M} reaches ln delta = {ln_delta}"),
            });
        }
    }
    // ok(hi); δ decreases in m, find the smallest.
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if ok(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let m = if ok(lo)? { lo } else { hi };
    Ok(Theorem1 {
        epsilon,
        delta_1,
        delta_inf,
        tdl: TruncatedDiscreteLaplace::new(m, alpha)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// §5.6 of the digest: ε = 10 per round, eq. 6 with μ = 0.1 (Δ∞ = 2 + μs,
    /// Δ₁ = 2d + μs√d), two-hidden-layer d.
    #[test]
    fn reproduces_the_papers_t_values() {
        let cases = [
            // (s, d, α, m, t)
            (1u64 << 20, 2_210_410u64, 6.24e-8, 105_205u64, 22u32),
            (1 << 9, 2_210_410, 2.22e-6, 54, 11),
            (1 << 12, 328_810, 1.12e-5, 413, 14),
            (1 << 6, 328_810, 1.51e-5, 9, 8),
        ];
        for (s, d, alpha, m, t) in cases {
            let sf = s as f64;
            let (dinf, d1) = (
                2.0 + 0.1 * sf,
                2.0 * d as f64 + 0.1 * sf * (d as f64).sqrt(),
            );
            let th = calibrate(10.0, d1, dinf).unwrap();
            assert_eq!(th.m(), m, "s = {s}");
            assert!(
                (th.alpha() - alpha).abs() / alpha < 5e-3,
                "s = {s}: {}",
                th.alpha()
            );
            assert_eq!(th.bits(s).unwrap(), t, "s = {s}");
            assert!(th.satisfies_m_bound());
            // The paper's δ ≤ 2^−d; the correct one is 1 to within f64 here.
            assert!(th.claimed_delta(d).log2() <= -(d as f64));
            assert!(th.delta(d).unwrap().ln() > -1e-12, "s = {s}");
        }
        // 1-hidden-layer d changes m only for CIFAR s = 2^20 (digest §5.6).
        let (s, d) = ((1u64 << 20) as f64, 1_849_810.0f64);
        let th = calibrate(10.0, 2.0 * d + 0.1 * s * d.sqrt(), 2.0 + 0.1 * s).unwrap();
        assert_eq!((th.m(), th.bits(1 << 20).unwrap()), (105_238, 22));
    }

    #[test]
    fn m_is_the_smallest_integer_even_where_naive_log_loses_it() {
        // Worst case Δ∞ = 2s, s = 2^16 (digest §2.4): Z(2s) = 262144.9997 < 262145, m = 2s+1.
        let s = 65_536.0;
        let d = 328_810.0;
        let th = calibrate(1e-3, 2.0 * d * s, 2.0 * s).unwrap();
        assert_eq!(th.m(), 2 * 65_536 + 1);
        assert!(th.normaliser() >= 1.0 + 2.0 * 2.0 * s);
        assert!(normaliser(th.m() - 1, th.alpha()) < 1.0 + 4.0 * s);
    }

    #[test]
    fn hand_example_and_bad_inputs() {
        // ε = 0.3, Δ₁ = Δ∞ = 2: α = 0.15, e^.15 − 1 = 0.161834, −ln(1 − 0.323668)/0.15 =
        // 2.6073 → m = 3, Z = 5.478308 ≥ 5; t(s = 1) = bits(8) = 4; extra bits ⌈log₂ 4⌉ = 2.
        let th = calibrate(0.3, 2.0, 2.0).unwrap();
        assert_eq!(th.m(), 3);
        assert_eq!(th.bits(1).unwrap(), 4);
        assert_eq!(th.extra_bits(1).unwrap(), 2);
        assert_eq!(bits_per_coordinate(2, 2).unwrap(), 4); // 9 levels
        assert_eq!(bits_per_coordinate(1, 1).unwrap(), 3); // 5 levels
        assert_eq!(bits_per_coordinate(2, 1).unwrap(), 3); // 7 levels
        assert!(calibrate(0.37, 2.0, 2.0).is_err()); // ε ≥ e^−1
        assert!(calibrate(0.1, 1.0, 2.0).is_err()); // Δ∞ > Δ₁
        assert!(calibrate(0.1, 2.0, 0.5).is_err());
        assert!(calibrate(f64::NAN, 2.0, 2.0).is_err());
        assert!(calibrate(0.1, f64::INFINITY, 2.0).is_err());
        assert!(th.bits(0).is_err());
    }

    #[test]
    fn corrected_calibration_meets_its_target_and_costs_bits() {
        // FMNIST s = 2^12 at ε = 10, μ = 0.1, target δ = 1e−9: m grows far beyond 413.
        let (s, d) = (4096.0, 328_810.0f64);
        let (dinf, d1) = (2.0 + 0.1 * s, 2.0 * d + 0.1 * s * d.sqrt());
        let target = 1e-9f64.ln();
        let th = calibrate_for_delta(10.0, target, d1, dinf, 328_810).unwrap();
        assert!(th.delta(328_810).unwrap().ln() <= target);
        let smaller = TruncatedDiscreteLaplace::new(th.m() - 1, th.alpha()).unwrap();
        let above = worst_case_delta(&smaller, 10.0, d1, dinf, 328_810).unwrap();
        assert!(above.ln() > target);
        // 2169 coordinates shifted by 411 must each leave mass ≈ 411·e^{−αm}/Z off the
        // overlap: αm ≈ 22.3, m = 1 993 383 (Theorem 1: 413), t = 22 (Theorem 1: 14).
        assert_eq!(th.m(), 1_993_383);
        assert_eq!(th.bits(4096).unwrap(), 22);
        // A target of 2^−d (the paper's claim) is reachable too, in log space: αm ≈ d ln 2.
        let tiny = -(328_810.0f64) * std::f64::consts::LN_2;
        let th = calibrate_for_delta(10.0, tiny, d1, dinf, 328_810).unwrap();
        let got = th.delta(328_810).unwrap().ln();
        assert!(got <= tiny && got > tiny - 1e-3, "{got}");
        assert!(th.alpha() * th.m() as f64 > 328_810.0 * std::f64::consts::LN_2);
    }
}
