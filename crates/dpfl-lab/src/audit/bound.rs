//! The ε lower bound of a one-run audit from its count of correct guesses (Steinke, Nasr &
//! Jagielski 2023, "Privacy auditing with one (1) training run", arXiv:2305.08846).
//!
//! m canaries are each included independently with probability ½; the auditor guesses the
//! inclusion of r of them and is right v times. If the mechanism is ε-DP, the number of
//! correct guesses is stochastically dominated by Binomial(r, q), q = e^ε/(1 + e^ε) (their
//! main theorem for pure DP: each guess is no better than ε-randomised response, even
//! adaptively). For (ε, δ)-DP their theorem adds δ through
//! α = max_{1≤i≤v} P[v − i ≤ Binomial(r, q) < v]/i, so the p-value of "the mechanism is
//! (ε, δ)-DP" given v is
//!
//!   p(ε) = min(1, P[Binomial(r, q) ≥ v] + 2mδ·α)
//!
//! exactly the authors' published `p_value_DP_audit` routine. The reported lower bound is the
//! largest ε rejected at confidence 1 − β, i.e. sup{ε : p(ε) < β}; p(ε) increases with ε, so
//! it is found by bisection and rounded *down* (a lower bound must not overstate). Binomial
//! masses are summed in log space from an exact log-factorial table.

use dpfl::Error;

/// One audit's count: `m` canaries, `r` guesses, `v` correct.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guesses {
    /// Canaries.
    pub m: u64,
    /// Guesses made (r ≤ m).
    pub r: u64,
    /// Correct guesses (v ≤ r).
    pub v: u64,
}

impl Guesses {
    fn check(self) -> dpfl::Result<Self> {
        if self.v <= self.r && self.r <= self.m && self.m > 0 {
            Ok(self)
        } else {
            Err(Error::config(
                "audit",
                format!(
                    "need correct ≤ guesses ≤ canaries and at least one canary, got v = {}, r = {}, m = {}",
                    self.v, self.r, self.m
                ),
            ))
        }
    }
}

/// log P[Binomial(r, q) = k] for k = 0..=r.
fn log_pmf(r: u64, q: f64) -> Vec<f64> {
    let mut log_fact = Vec::with_capacity(r as usize + 1);
    let mut acc = 0.0f64;
    log_fact.push(0.0);
    for i in 1..=r {
        acc += (i as f64).ln();
        log_fact.push(acc);
    }
    let (lq, l1q) = (q.ln(), (-q).ln_1p());
    (0..=r)
        .map(|k| {
            let (k, n) = (k as usize, r as usize);
            log_fact[n] - log_fact[k] - log_fact[n - k] + k as f64 * lq + (n - k) as f64 * l1q
        })
        .collect()
}

fn log_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    if hi == f64::NEG_INFINITY {
        hi
    } else {
        hi + (lo - hi).exp().ln_1p()
    }
}

/// The p-value of "(ε, δ)-DP" given the guesses (module doc).
pub fn p_value(g: Guesses, epsilon: f64, delta: f64) -> dpfl::Result<f64> {
    let g = g.check()?;
    if !(epsilon.is_finite() && epsilon >= 0.0 && (0.0..=1.0).contains(&delta)) {
        return Err(Error::config(
            "audit",
            format!("epsilon {epsilon} / delta {delta} out of range"),
        ));
    }
    // q = 1/(1 + e^{−ε}), with 1 − q = 1/(1 + e^{ε}) kept apart for large ε.
    let q = 1.0 / (1.0 + (-epsilon).exp());
    let lp = log_pmf(g.r, q);
    let tail = lp[g.v as usize..]
        .iter()
        .fold(f64::NEG_INFINITY, |s, &x| log_add(s, x))
        .exp();
    let (mut sum, mut alpha) = (f64::NEG_INFINITY, 0.0f64);
    for i in 1..=g.v {
        sum = log_add(sum, lp[(g.v - i) as usize]);
        alpha = alpha.max(sum.exp() / i as f64);
    }
    let p = tail + 2.0 * g.m as f64 * delta * alpha;
    if p.is_nan() {
        return Err(Error::Privacy(dpfl_privacy::PrivacyError::Numerical {
            context: "audit p-value",
            reason: format!("NaN at epsilon {epsilon}"),
        }));
    }
    Ok(p.min(1.0))
}

/// The ε lower bound at confidence 1 − `beta`: the largest ε with p(ε) < β (0 if even ε = 0
/// is not rejected), from below to within 1e-9.
pub fn epsilon_lower_bound(g: Guesses, delta: f64, beta: f64) -> dpfl::Result<f64> {
    if !(beta > 0.0 && beta < 1.0) {
        return Err(Error::config(
            "audit.confidence",
            format!("1 − {beta} must be in (0, 1)"),
        ));
    }
    if p_value(g, 0.0, delta)? >= beta {
        return Ok(0.0);
    }
    let mut hi = 1.0;
    while p_value(g, hi, delta)? < beta {
        hi *= 2.0;
        if hi > 1e4 {
            return Err(Error::Privacy(dpfl_privacy::PrivacyError::Numerical {
                context: "audit epsilon",
                reason: "p-value below beta up to epsilon 1e4".into(),
            }));
        }
    }
    let mut lo = 0.0;
    while hi - lo > 1e-9 {
        let mid = 0.5 * (lo + hi);
        if p_value(g, mid, delta)? < beta {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_guesses_right_by_hand() {
        // m = r = v = 10, δ = 0: p(ε) = q^10, so the bound solves q^10 = 0.05:
        // q = 0.05^{1/10} = 0.7411344, ε = ln(q/(1 − q)) = 1.0518732.
        let g = Guesses {
            m: 10,
            r: 10,
            v: 10,
        };
        let q: f64 = 0.05f64.powf(0.1);
        let want = (q / (1.0 - q)).ln();
        assert!((want - 1.051_873_2).abs() < 1e-6);
        let got = epsilon_lower_bound(g, 0.0, 0.05).unwrap();
        assert!(got <= want && want - got < 1e-8, "{got} vs {want}");
        // At ε = 0 every guess is a fair coin: p = 2^-10.
        assert!((p_value(g, 0.0, 0.0).unwrap() - 1.0 / 1024.0).abs() < 1e-15);
    }

    #[test]
    fn delta_raises_the_p_value_and_lowers_the_bound() {
        // m = 100, r = 20, v = 15, ε = 1 (reference values from the authors' routine):
        // P[Bin(20, 0.7311) ≥ 15] = 0.5400230, with δ = 1e-3: 0.5765565.
        let g = Guesses {
            m: 100,
            r: 20,
            v: 15,
        };
        assert!((p_value(g, 1.0, 0.0).unwrap() - 0.540_023_03).abs() < 1e-7);
        assert!((p_value(g, 1.0, 1e-3).unwrap() - 0.576_556_46).abs() < 1e-7);
        let g = Guesses {
            m: 1000,
            r: 100,
            v: 90,
        };
        let pure = epsilon_lower_bound(g, 0.0, 0.05).unwrap();
        let approx = epsilon_lower_bound(g, 1e-5, 0.05).unwrap();
        assert!((pure - 1.630_823_2).abs() < 1e-6, "{pure}");
        assert!((approx - 1.626_143_5).abs() < 1e-6, "{approx}");
        // Half right is no evidence at all.
        let g = Guesses {
            m: 1000,
            r: 100,
            v: 50,
        };
        assert_eq!(epsilon_lower_bound(g, 0.0, 0.05).unwrap(), 0.0);
    }

    #[test]
    fn bad_counts_are_errors() {
        assert!(p_value(Guesses { m: 5, r: 6, v: 1 }, 1.0, 0.0).is_err());
        assert!(p_value(Guesses { m: 5, r: 4, v: 5 }, 1.0, 0.0).is_err());
        assert!(epsilon_lower_bound(Guesses { m: 5, r: 4, v: 4 }, 0.0, 1.5).is_err());
    }
}
