//! Double-word ("double-double") arithmetic for the Binomial table's weights: a value is the
//! unevaluated sum `hi + lo` of two `f64` with |lo| ≤ ulp(hi)/2, about 106 significant bits.
//!
//! Algorithms and their relative error bounds (u = 2⁻⁵³, round-to-nearest, a correctly
//! rounded fused multiply-add) are those of Joldes, Muller & Popescu, "Tight and rigorous
//! error bounds for basic building blocks of double-word arithmetic", ACM TOMS 44(2), 2017:
//! * [`Dd::mul_f64`]: Algorithm 9 (DWTimesFP3), ≤ 2u²;
//! * [`Dd::mul`]: Algorithm 12 (DWTimesDW3), ≤ 4u² (the module claims 5u² for margin);
//! * [`Dd::div`]: Algorithm 17 (DWDivDW2), ≤ 15u² + 56u³ (claimed: 16u²);
//! * [`Dd::add`]: Algorithm 6 (AccurateDWPlusDW), ≤ 3u²/(1 − 4u) (claimed: 4u²);
//! * [`Dd::prod`] and [`Dd::one_minus`] are exact (2Prod by FMA, Knuth's 2Sum).
//!
//! Only the public parameters (n, p) of a Binomial ever pass through here, never data.

/// hi + lo.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Dd {
    pub(super) hi: f64,
    pub(super) lo: f64,
}

/// Knuth's 2Sum: s + e = a + b exactly.
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// Dekker's Fast2Sum (needs |a| ≥ |b| or a = 0): s + e = a + b exactly.
fn fast_two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    (s, b - (s - a))
}

/// 2Prod by FMA: p + e = a·b exactly (barring underflow).
fn two_prod(a: f64, b: f64) -> (f64, f64) {
    let p = a * b;
    (p, a.mul_add(b, -p))
}

impl Dd {
    pub(super) fn from_f64(x: f64) -> Dd {
        Dd { hi: x, lo: 0.0 }
    }

    /// 1 − p, exactly.
    pub(super) fn one_minus(p: f64) -> Dd {
        let (hi, lo) = two_sum(1.0, -p);
        Dd { hi, lo }
    }

    /// a·b, exactly.
    pub(super) fn prod(a: f64, b: f64) -> Dd {
        let (hi, lo) = two_prod(a, b);
        Dd { hi, lo }
    }

    /// DWTimesFP3.
    pub(super) fn mul_f64(self, y: f64) -> Dd {
        let (ch, cl1) = two_prod(self.hi, y);
        let cl3 = self.lo.mul_add(y, cl1);
        let (hi, lo) = fast_two_sum(ch, cl3);
        Dd { hi, lo }
    }

    /// DWTimesDW3.
    pub(super) fn mul(self, y: Dd) -> Dd {
        let (ch, cl1) = two_prod(self.hi, y.hi);
        let tl0 = self.lo * y.lo;
        let tl1 = self.hi.mul_add(y.lo, tl0);
        let cl2 = self.lo.mul_add(y.hi, tl1);
        let cl3 = cl1 + cl2;
        let (hi, lo) = fast_two_sum(ch, cl3);
        Dd { hi, lo }
    }

    /// DWDivDW2.
    pub(super) fn div(self, y: Dd) -> Dd {
        let th = self.hi / y.hi;
        let r = y.mul_f64(th);
        let (ph, pl) = two_sum(self.hi, -r.hi);
        let dh = pl - r.lo;
        let dl = dh + self.lo;
        let d = ph + dl;
        let tl = d / y.hi;
        let (hi, lo) = fast_two_sum(th, tl);
        Dd { hi, lo }
    }

    /// AccurateDWPlusDW.
    pub(super) fn add(self, y: Dd) -> Dd {
        let (sh, sl) = two_sum(self.hi, y.hi);
        let (th, tl) = two_sum(self.lo, y.lo);
        let c = sl + th;
        let (vh, vl) = fast_two_sum(sh, c);
        let w = tl + vl;
        let (hi, lo) = fast_two_sum(vh, w);
        Dd { hi, lo }
    }

    /// The nearest integer to a non-negative value below 2¹²⁷, within 0.5 + 2⁻¹⁰ (the
    /// fractional part of `hi` is exact; adding `lo` to it rounds by ≤ u·2⁴³ for hi < 2⁹⁷).
    pub(super) fn round_to_u128(self) -> Option<u128> {
        if !(self.hi.is_finite() && self.hi >= 0.0 && self.hi < 2f64.powi(127)) {
            return None;
        }
        let whole = self.hi.floor();
        let frac = ((self.hi - whole) + self.lo).round();
        let v = (whole as u128) as i128 + frac as i128;
        u128::try_from(v).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn double_word_arithmetic_carries_about_106_bits() {
        // 1/3 in double-word: 3·(1/3) − 1 is below 2⁻¹⁰⁴ (an f64 third leaves 2⁻⁵⁴).
        let third = Dd::from_f64(1.0).div(Dd::from_f64(3.0));
        let back = third.mul_f64(3.0).add(Dd::from_f64(-1.0));
        assert!((back.hi + back.lo).abs() < 2f64.powi(-104), "{back:?}");
        assert!(third.lo != 0.0);
        // 1 − 2⁻⁶⁰ is exact as a double-word; (1 − 2⁻⁶⁰)² = 1 − 2⁻⁵⁹ + 2⁻¹²⁰.
        let q = Dd::one_minus(2f64.powi(-60));
        assert_eq!((q.hi, q.lo), (1.0, -(2f64.powi(-60))));
        let sq = q.mul(q);
        assert_eq!(sq.hi, 1.0);
        assert!((sq.lo + 2f64.powi(-59)).abs() < 2f64.powi(-110), "{sq:?}");
        // 2Prod is exact: (2²⁷ + 1)² = 2⁵⁴ + 2²⁸ + 1 needs 55 bits.
        let p = Dd::prod(134_217_729.0, 134_217_729.0);
        assert_eq!(p.round_to_u128(), Some((1u128 << 54) + (1 << 28) + 1));
        // Rounding: 2⁹⁰ + 0.75 → 2⁹⁰ + 1; negative and non-finite refused.
        let x = Dd {
            hi: 2f64.powi(90),
            lo: 0.75,
        };
        assert_eq!(x.round_to_u128(), Some((1u128 << 90) + 1));
        assert_eq!(Dd::from_f64(-1.0).round_to_u128(), None);
        assert_eq!(Dd::from_f64(f64::NAN).round_to_u128(), None);
    }
}
