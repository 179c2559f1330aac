//! The plain-words privacy guarantee of a private algorithm's run, one text for every place a
//! person reads it (issue 31 item 9): `dpfl train`'s and `dpfl federate`'s standard output
//! (`Privacy (label): …`) and `report.html`, which a user forwards to a privacy officer.
//!
//! It states what the accountants certify for the noise actually used (the tighter of the two
//! sound ones, largest over silos; `AlgorithmSummary::max_certified_epsilon`), never only the
//! calibration's target: what is protected (any one record of a silo — Lowy & Razaviyayn's
//! ISRL-DP, their Definition 2 — or, under a trusted shuffler, any one silo's record in what
//! the server sees), against whom (the server and the other silos; the server given an
//! honest shuffler), under which neighbouring relation (replace-one), and whether it is
//! certified: a target no accountant certifies, or one the certificate exceeds, says so.
//! Numbers for people: [`num`] and [`short`].

use super::summary::AlgorithmSummary;

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

/// `v` to 4 significant digits (scientific below 1e-3 and from 1e5), `—` for none, `not
/// available` for NaN: the report's numbers.
pub fn sig4(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(v) if v.is_nan() => "not available".into(),
        Some(v) if v.is_infinite() => if v > 0.0 { "∞" } else { "−∞" }.into(),
        Some(0.0) => "0".into(),
        Some(v) if v.abs() < 1e-3 || v.abs() >= 1e5 => format!("{v:.3e}"),
        Some(v) => {
            let decimals = (3 - v.abs().log10().floor() as i32).max(0) as usize;
            format!("{v:.decimals$}")
        }
    }
}

/// A private algorithm's guarantee.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Guarantee {
    /// The algorithm's label.
    pub algorithm: String,
    /// The sentence standard output prints after `Privacy (label): `.
    pub text: String,
    /// What one neighbouring change is.
    pub protected: &'static str,
    /// Who may see the messages without learning more than ε allows.
    pub against: &'static str,
    /// The neighbouring relation.
    pub relation: &'static str,
    /// An accountant certifies the stated ε for what ran (and, with a target, it meets it).
    pub certified: bool,
    /// No caveat qualifies it (a seeded run, a data-derived L).
    pub end_to_end: bool,
}

/// The guarantee of `s`; `None` for a non-private algorithm (it promises nothing).
pub fn guarantee(s: &AlgorithmSummary) -> Option<Guarantee> {
    if !s.private {
        return None;
    }
    let target = s.epsilon.map_or("NaN".into(), short);
    let delta = s.delta.unwrap_or(f64::NAN);
    let lower = s.max_lower_epsilon().map_or(String::new(), |l| {
        format!(
            " (and the true epsilon is at least {}: a lower bound from a concrete \
             neighbouring pair)",
            num(l, 3)
        )
    });
    let shuffled = s
        .silos
        .iter()
        .any(|c| dpfl::algo::shuffle::charges_trusted_shuffler(&c.formula));
    let acc = s.max_certified_epsilon();
    let (text, certified) = match acc {
        // Under `shuffler = "trusted"` the ε is the shuffled round's, not a silo's own
        // messages' (the per-silo formulas in summary.json give that weaker figure).
        Some(acc) if shuffled => (
            format!(
                "given an honest shuffler, what the server sees of the whole run is ({}, \
                 {delta:.1e})-DP with respect to any one silo's record (shuffle model, \
                 replace-one{lower}); a silo's own messages, seen without the shuffler, are \
                 protected only by its own noise (the \"without a trusted shuffler\" epsilon of \
                 each silo's formula in summary.json).",
                num(acc, 3)
            ),
            true,
        ),
        Some(acc) if s.epsilon.is_none() => (
            format!(
                "noise multiplier z = {} set directly (privacy.noise_multiplier); the \
                 accountants certify epsilon = {} at delta {delta:.1e} for it: each silo's \
                 messages are ({}, {delta:.1e})-DP with respect to any one of its records \
                 (ISRL-DP, replace-one){lower}.",
                s.noise_multiplier.map_or("-".into(), |z| num(z, 4)),
                num(acc, 3),
                num(acc, 3)
            ),
            true,
        ),
        Some(acc) if acc <= s.epsilon.unwrap_or(f64::NAN) * (1.0 + 1e-9) => (
            format!(
                "each silo's messages are ({target}, {delta:.1e})-DP with respect to any one of \
                 its records (ISRL-DP, replace-one; certified epsilon = {}{lower}); the server \
                 and the other silos are not trusted.",
                num(acc, 3)
            ),
            true,
        ),
        Some(acc) => (
            format!(
                "the calibration targets ({target}, {delta:.1e}), but the accountants certify \
                 only epsilon = {} at that delta for the noise used{lower}: each silo's \
                 messages are ({}, {delta:.1e})-DP with respect to any one of its records (the \
                 target is NOT met).",
                num(acc, 3),
                num(acc, 3)
            ),
            false,
        ),
        None => (
            format!(
                "the calibration targets ({target}, {delta:.1e})-DP per silo (ISRL-DP, \
                 replace-one); no accountant could certify it (see summary.json)."
            ),
            false,
        ),
    };
    Some(Guarantee {
        algorithm: s.algorithm.clone(),
        text,
        protected: if shuffled {
            "any one record of any one silo, in what the server sees of the whole run"
        } else {
            "any one record of each silo, in everything the silo sends"
        },
        against: if shuffled {
            "the server, given an honest shuffler (a silo's own messages: only its own noise)"
        } else {
            "the server, the other silos and anyone who sees the messages (none is trusted)"
        },
        relation: "replace-one: one record changed, the silo's record count public",
        certified,
        // A seeded run is end to end in summary.json's sense (its noise is calibrated), but
        // its caveat limits who the guarantee holds against: not shown as unqualified.
        end_to_end: s.end_to_end_private && s.caveats.is_empty(),
    })
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

    #[test]
    fn four_significant_digits() {
        assert_eq!(sig4(Some(0.123456789)), "0.1235");
        assert_eq!(sig4(Some(1.99999999999)), "2.000");
        assert_eq!(sig4(Some(12.3456)), "12.35");
        assert_eq!(sig4(Some(1234.5678)), "1235");
        assert_eq!(sig4(Some(4.3e-5)), "4.300e-5");
        assert_eq!(sig4(Some(f64::NAN)), "not available");
        assert_eq!(sig4(None), "—");
        assert_eq!(sig4(Some(0.0)), "0");
    }
}
