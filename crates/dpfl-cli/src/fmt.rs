//! Numbers for people: fixed notation in the everyday range, scientific notation for very
//! large or very small magnitudes (never a 300-digit integer or a row of zeros).

/// `v` with `digits` decimals, or in scientific notation with `digits` decimals of mantissa
/// when |v| ≥ 1e6 or 0 < |v| < 1e-3. Non-finite values print as `NaN`, `inf`, `-inf`.
pub fn num(v: f64, digits: usize) -> String {
    let a = v.abs();
    if !v.is_finite() || v == 0.0 || (1e-3..1e6).contains(&a) {
        format!("{v:.digits$}")
    } else {
        format!("{v:.digits$e}")
    }
}

/// `v` in its shortest exact form when that is short, else as [`num`] with 4 digits (for
/// user-given values such as ε that are usually short).
pub fn short(v: f64) -> String {
    let s = format!("{v}");
    if s.len() <= 10 { s } else { num(v, 4) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_and_tiny_numbers_are_scientific() {
        assert_eq!(num(1e300, 4), "1.0000e300");
        assert_eq!(num(-2.5e-7, 2), "-2.50e-7");
        assert_eq!(num(0.1234567, 4), "0.1235");
        assert_eq!(num(123456.0, 1), "123456.0");
        assert_eq!(num(0.0, 3), "0.000");
        assert_eq!(num(f64::INFINITY, 4), "inf");
        assert_eq!(short(1.0), "1");
        assert_eq!(short(0.75), "0.75");
        assert_eq!(short(1e300), "1.0000e300");
        assert_eq!(short(1e-300), "1.0000e-300");
    }
}
