//! Privacy amplification by shuffling (Feldman, McMillan & Talwar, "Hiding Among the Clones",
//! FOCS 2021, arXiv 2012.12803): n users each apply an ε₀-DP local randomizer, a trusted
//! shuffler permutes the n reports; the shuffled output is (ε, δ)-DP with ε given by
//! * **closed form** (their Theorem 3.1, in the form of their published code, which keeps the
//!   factor 1/(1 + e^{−ε₀−ε′}) instead of rounding it to 1/(1 + e^{−ε₀}) and so is never
//!   smaller): ε ≤ ln(1 + (1 − e^{−ε₀})/(1 + e^{−ε₀−ε′})·(a + c)), a = 8√(e^{ε₀}ln(4/δ)/n),
//!   c = 8e^{ε₀}/n, ε′ = ln(1 + a + c); valid when ε₀ ≤ ln(n/(16 ln(4/δ))) — we check the
//!   ln(4/δ) form, the stricter of the two conditions printed (2/δ in the theorem, 4/δ in
//!   the code);
//! * **numerical** (their Theorem 3.2 / Appendix E): the output is dominated by the pair
//!   P = (A + Δ, C − A + 1 − Δ), Q = (A + 1 − Δ, C − A + Δ) with C ~ Bin(n−1, e^{−ε₀}),
//!   A ~ Bin(C, ½), Δ ~ Bern(e^{ε₀}/(e^{ε₀}+1)). We compute D_{e^ε}(P‖Q) *exactly* up to
//!   explicitly bounded truncations instead of their stepped approximation: C is observed
//!   (it is the sum of the two coordinates), so the divergence is Σ_c P(C=c)·D_{e^ε}(P_c‖Q_c),
//!   and D(Q_c‖P_c) = D(P_c‖Q_c) because Q_c is P_c mirrored (a ↦ c+1−a) and Bin(c, ½) is
//!   symmetric. The likelihood ratio of P_c to Q_c is monotone in a, so the positive part is
//!   a left tail {a ≤ a*}, summed term by term. ε is the smallest value on a bisection grid
//!   (50 halvings of [0, ε₀]) at which δ(ε) ≤ δ; the upper end is returned.
//!
//! Never under-reporting: the weights P(C = c) are normalised over the tabulated window of
//! c, which over-states each of them; the mass of C outside the window (≤ δ·10⁻⁶ by a
//! Bernstein bound) is added to δ(ε) as if it leaked entirely; the inner tail is cut only
//! with a geometric bound on what is left, which is added; and δ(ε) is inflated by 10⁻⁶
//! relative for floating-point error. The guarantee reported is the smaller of the two ε.
//!
//! Not used: the SODA 2023 follow-up ("Stronger privacy amplification by shuffling…",
//! arXiv 2208.04591), whose erratum restricts its general bounds to a class of local
//! randomizers; the 2021 bounds hold for every ε₀-DP randomizer, so they are the safe choice.
//! Local randomizers with δ₀ > 0 are not covered here.

use crate::accountant::AccountantKind;
use crate::error::PrivacyError;
use crate::event::{Neighbouring, PrivacyEvent};
use crate::params::Delta;

use super::Result;

/// Relative safety margin on the computed δ(ε).
const REL_MARGIN: f64 = 1e-6;
/// Bisection steps on [0, ε₀].
const BISECTION_STEPS: u32 = 50;

/// How the reported ε was obtained.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Amplified {
    /// The reported guarantee: min of the two bounds (and of ε₀).
    pub epsilon: f64,
    /// The target δ of the shuffled output, as requested (both bounds are computed at it;
    /// neither adds slack beyond it).
    pub delta: f64,
    /// Theorem 3.1, when its condition holds.
    pub closed_form: Option<f64>,
    /// Theorem 3.2, computed numerically.
    pub numerical: f64,
}

fn check(n: u64, eps0: f64, delta: f64) -> Result<()> {
    if n == 0 {
        return Err(PrivacyError::invalid("n", 0.0, "need at least one report").into());
    }
    if !(eps0.is_finite() && eps0 > 0.0) {
        return Err(PrivacyError::invalid("epsilon0", eps0, "must be finite and > 0").into());
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(PrivacyError::invalid("delta", delta, "must lie in (0, 1)").into());
    }
    Ok(())
}

/// Theorem 3.1 (closed form). Errors when ε₀ > ln(n/(16 ln(4/δ))) (too few reports).
pub fn closed_form(n: u64, eps0: f64, delta: f64) -> Result<f64> {
    check(n, eps0, delta)?;
    let nf = n as f64;
    let limit = (nf / (16.0 * (4.0 / delta).ln())).ln();
    // NaN-safe: a NaN limit (tiny n) must refuse too.
    if eps0.partial_cmp(&limit).is_none_or(|o| o.is_gt()) {
        return Err(PrivacyError::OutsideValidity {
            formula: "Feldman-McMillan-Talwar 2021 Theorem 3.1",
            reason: format!(
                "epsilon0 = {eps0} exceeds ln(n/(16 ln(4/delta))) = {limit} for n = {n}, \
                 delta = {delta}: too few reports"
            ),
        }
        .into());
    }
    let a = 8.0 * (eps0.exp() * (4.0 / delta).ln() / nf).sqrt();
    let c = 8.0 * eps0.exp() / nf;
    let e = (a + c).ln_1p();
    let b = -(-eps0).exp_m1();
    let d = 1.0 + (-eps0 - e).exp();
    Ok((b / d * (a + c)).ln_1p())
}

/// Theorem 3.2 (numerical upper bound). Valid for every n ≥ 1 and ε₀ > 0.
pub fn numerical(n: u64, eps0: f64, delta: f64) -> Result<f64> {
    check(n, eps0, delta)?;
    let outer = OuterWeights::new(n - 1, (-eps0).exp(), delta * 1e-6)?;
    let (mut lo, mut hi) = (0.0f64, eps0);
    if delta_at(&outer, eps0, 0.0) <= delta {
        return Ok(0.0);
    }
    for _ in 0..BISECTION_STEPS {
        let mid = 0.5 * (lo + hi);
        let d = delta_at(&outer, eps0, mid);
        if !d.is_finite() {
            return Err(PrivacyError::Numerical {
                context: "shuffle amplification",
                reason: format!("delta({mid}) = {d}"),
            }
            .into());
        }
        if d <= delta {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

/// The tighter of the two bounds (and ε₀ itself: shuffling never hurts).
pub fn amplify(n: u64, eps0: f64, delta: f64) -> Result<Amplified> {
    let numerical = numerical(n, eps0, delta)?;
    let closed = closed_form(n, eps0, delta).ok();
    let epsilon = closed.map_or(numerical, |c| c.min(numerical)).min(eps0);
    Ok(Amplified {
        epsilon,
        delta,
        closed_form: closed,
        numerical,
    })
}

/// P(C = c) for C ~ Bin(m, q) over a window holding all but `tail` of the mass, normalised
/// over the window (so each weight is over-stated, never under-stated).
struct OuterWeights {
    lo: u64,
    w: Vec<f64>,
    tail: f64,
}

impl OuterWeights {
    fn new(m: u64, q: f64, tail: f64) -> Result<Self> {
        if m == 0 {
            return Ok(OuterWeights {
                lo: 0,
                w: vec![1.0],
                tail: 0.0,
            });
        }
        let (mf, qq) = (m as f64, 1.0 - q);
        let l = (2.0 / tail).ln();
        let var = mf * q * qq;
        let t = l / 3.0 + (l * l / 9.0 + 2.0 * var * l).sqrt();
        let mu = mf * q;
        let lo = (mu - t).floor().max(0.0) as u64;
        let hi = ((mu + t).ceil().min(mf) as u64).min(m);
        let width = (hi - lo + 1) as usize;
        if width > 1 << 26 {
            return Err(
                PrivacyError::invalid("n", mf, "too many reports for the numerical bound").into(),
            );
        }
        let mode = ((mf + 1.0) * q).floor().clamp(lo as f64, hi as f64) as u64;
        let mut w = vec![0.0; width];
        let mi = (mode - lo) as usize;
        w[mi] = 1.0;
        for i in mi..width - 1 {
            let k = (lo + i as u64) as f64;
            w[i + 1] = w[i] * ((mf - k) / (k + 1.0)) * (q / qq);
        }
        for i in (1..=mi).rev() {
            let k = (lo + i as u64) as f64;
            w[i - 1] = w[i] * (k / (mf - k + 1.0)) * (qq / q);
        }
        let s: f64 = w.iter().sum();
        w.iter_mut().for_each(|x| *x /= s);
        Ok(OuterWeights { lo, w, tail })
    }
}

/// δ(ε) = Σ_c P(C=c)·D_{e^ε}(P_c‖Q_c), with the truncation bounds and margin added.
fn delta_at(outer: &OuterWeights, eps0: f64, eps: f64) -> f64 {
    let alpha = 1.0 / (1.0 + (-eps0).exp());
    let ee = eps.exp();
    let a_coef = alpha - ee * (1.0 - alpha);
    if a_coef <= 0.0 {
        return 0.0;
    }
    let b_coef = (1.0 - alpha) - ee * alpha;
    let mut total = 0.0;
    for (i, &pc) in outer.w.iter().enumerate() {
        if pc == 0.0 {
            continue;
        }
        let c = outer.lo + i as u64;
        total += pc * inner_divergence(c, a_coef, b_coef);
    }
    total * (1.0 + REL_MARGIN) + outer.tail
}

/// D_{e^ε}(P_c‖Q_c) with P_c(a) = α b(a) + (1−α) b(a−1), Q_c(a) = (1−α) b(a) + α b(a−1),
/// b the Bin(c, ½) pmf: Σ_{a ≤ a*} (A b(a) + B b(a−1)), A = α − e^ε(1−α) > 0,
/// B = (1−α) − e^ε α < 0. The term is positive iff λ(a) = b(a−1)/b(a) = a/(c−a+1) < A/(−B).
fn inner_divergence(c: u64, a_coef: f64, b_coef: f64) -> f64 {
    let lam = a_coef / -b_coef;
    let cf = c as f64;
    // a/(c − a + 1) < λ ⇔ a < λ(c+1)/(1+λ).
    let bound = lam * (cf + 1.0) / (1.0 + lam);
    let a_star = (bound.ceil() - 1.0).min(cf);
    if a_star < 0.0 {
        return 0.0;
    }
    let mut a = a_star as u64;
    // ln b(a*) by log-gamma; then b(a−1) = b(a)·a/(c−a+1) downwards.
    let ln_b = libm::lgamma(cf + 1.0)
        - libm::lgamma(a as f64 + 1.0)
        - libm::lgamma(cf - a as f64 + 1.0)
        - cf * std::f64::consts::LN_2;
    let mut b_a = ln_b.exp();
    let mut sum = 0.0;
    loop {
        let af = a as f64;
        let ratio = af / (cf - af + 1.0); // b(a−1)/b(a)
        let b_prev = b_a * ratio;
        let term = a_coef * b_a + b_coef * b_prev;
        if term > 0.0 {
            sum += term;
        }
        if a == 0 {
            break;
        }
        // Below the mode the pmf falls geometrically at rate ≤ `ratio`: what is left is at
        // most A·b(a−1)/(1 − ratio); stop once that is negligible and add it.
        if ratio < 0.9 {
            let rest = a_coef * b_prev / (1.0 - ratio);
            if rest <= sum * 1e-18 || rest < 1e-300 {
                sum += rest;
                break;
            }
        }
        b_a = b_prev;
        a -= 1;
    }
    sum
}

// ---------------------------------------------------------------- as a privacy event

/// ε₀ of a *pure* local event under replace-one neighbours: Laplace and discrete Laplace
/// (ε₀ = 1/noise multiplier), `EpsilonDelta` with δ = 0, and their compositions. The
/// clone argument needs each report to be ε₀-DP for *any* two inputs (local DP); a noise
/// multiplier relative to the replace-one sensitivity of a clipped single-record quantity is
/// exactly that, an add/remove one is not, so add/remove is refused. Events with δ₀ > 0
/// (Gaussian, …) are refused: this module implements FMT's pure-ε₀ theorems only.
pub fn local_epsilon(event: &PrivacyEvent, neighbouring: Neighbouring) -> Result<f64> {
    if neighbouring != Neighbouring::ReplaceOne {
        return Err(crate::accountant::unsupported(
            "shuffle amplification",
            event,
            "local DP needs replace-one neighbours",
        )
        .into());
    }
    let eps = match event {
        PrivacyEvent::Laplace { noise_multiplier }
        | PrivacyEvent::DiscreteLaplace { noise_multiplier } => {
            crate::accountant::check_multiplier(*noise_multiplier)?;
            1.0 / noise_multiplier
        }
        PrivacyEvent::EpsilonDelta { epsilon, delta } if *delta == 0.0 => *epsilon,
        PrivacyEvent::SelfComposed { event, count } => {
            *count as f64 * local_epsilon(event, neighbouring)?
        }
        PrivacyEvent::Composed(events) => {
            let mut total = 0.0;
            for e in events {
                total += local_epsilon(e, neighbouring)?;
            }
            total
        }
        other => {
            return Err(crate::accountant::unsupported(
                "shuffle amplification",
                other,
                "not a pure-DP local randomizer (FMT 2021 Theorems 3.1/3.2 need delta0 = 0)",
            )
            .into());
        }
    };
    if !(eps.is_finite() && eps > 0.0) {
        return Err(PrivacyError::invalid("epsilon0", eps, "must be finite and > 0").into());
    }
    Ok(eps)
}

/// One shuffled release: what the silo spends on its own (ε₀, charged by its ledger) and
/// what the server can learn given an honest shuffler mixing `reports` reports.
#[derive(Debug, Clone, PartialEq)]
pub struct ShuffledRelease {
    /// ε₀ of the pure-DP local randomizer (δ₀ = 0) under replace-one neighbours: what the
    /// silo's own ledger charges per release, whatever the shuffler does.
    pub local_epsilon: f64,
    /// n in FMT 2021: the number of ε₀-DP reports (one per user) the shuffler mixes.
    pub reports: u64,
    /// The (ε, δ) against the server after shuffling `reports` reports (FMT 2021 Theorems
    /// 3.1/3.2, the smaller).
    pub amplified: Amplified,
}

impl ShuffledRelease {
    /// Amplifies the pure local event `local` (one report per user, `reports` users in the
    /// shuffle) at the given δ.
    pub fn new(
        local: &PrivacyEvent,
        neighbouring: Neighbouring,
        reports: u64,
        delta: f64,
    ) -> Result<Self> {
        let eps0 = local_epsilon(local, neighbouring)?;
        Ok(ShuffledRelease {
            local_epsilon: eps0,
            reports,
            amplified: amplify(reports, eps0, delta)?,
        })
    }

    /// The guarantee against the server as a privacy event, to compose with the accountants
    /// (basic, advanced or optimal composition take `EpsilonDelta`).
    pub fn server_event(&self) -> PrivacyEvent {
        PrivacyEvent::EpsilonDelta {
            epsilon: self.amplified.epsilon,
            delta: self.amplified.delta,
        }
    }
}

/// A silo's guarantee over `rounds` identical shuffled releases, side by side: its own
/// ISRL-DP guarantee (the local events composed; what its ledger charges, unchanged) and the
/// guarantee against the server given an honest shuffler (the amplified events composed).
#[derive(Debug, Clone, PartialEq)]
pub struct SideBySide {
    /// The total δ both composed ε are reported at (the per-round amplification δ is
    /// `per_round.amplified.delta`, part of this budget).
    pub delta: f64,
    /// ε of the silo's own noise, composed by `accountant`: holds whatever the shuffler does.
    pub isrl_dp_epsilon: f64,
    /// ε against the server if the shuffler is honest.
    pub shuffled_epsilon: f64,
    /// One round's release (ε₀, reports and amplified (ε, δ)); the composed values above
    /// are `rounds` copies of it.
    pub per_round: ShuffledRelease,
}

/// Both guarantees at `delta` (split as `delta_round` per round for the amplification, the
/// rest for composition; the accountant checks the split).
pub fn side_by_side(
    accountant: AccountantKind,
    local_round: &PrivacyEvent,
    rounds: u64,
    reports: u64,
    delta_round: f64,
    delta: Delta,
) -> Result<SideBySide> {
    let neighbouring = Neighbouring::ReplaceOne;
    let per_round = ShuffledRelease::new(local_round, neighbouring, reports, delta_round)?;
    let isrl = accountant.epsilon(neighbouring, &local_round.clone().repeated(rounds), delta)?;
    let shuffled = accountant.epsilon(
        neighbouring,
        &per_round.server_event().repeated(rounds),
        delta,
    )?;
    Ok(SideBySide {
        delta: delta.get(),
        isrl_dp_epsilon: isrl,
        shuffled_epsilon: shuffled.min(isrl),
        per_round,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_form_matches_the_published_example() {
        // apple/ml-shuffling-amplification README: n = 10⁵, ε₀ = 4, δ = 1e-6 → 0.5378040242374512.
        let e = closed_form(100_000, 4.0, 1e-6).unwrap();
        assert!((e - 0.537_804_024_237_451_2).abs() < 1e-12, "{e}");
    }

    #[test]
    fn closed_form_refuses_too_few_reports() {
        // ln(1000/(16 ln(4e6))) = ln(4.1188) = 1.4155 < 4.
        assert!(closed_form(1000, 4.0, 1e-6).is_err());
        assert!(closed_form(1000, 1.4, 1e-6).is_ok());
    }

    #[test]
    fn numerical_bound_lies_in_the_published_bracket() {
        // Same README: the numerical bound lies between 0.1675385583317841 (their lower
        // bound) and 0.172790550755978 (their stepped upper bound, 10 bisection steps from
        // 0.5378, so resolution 5e-4).
        let e = numerical(100_000, 4.0, 1e-6).unwrap();
        assert!(e > 0.1675 && e < 0.172_790_550_755_978, "{e}");
        let amp = amplify(100_000, 4.0, 1e-6).unwrap();
        assert_eq!(amp.epsilon, e);
    }

    #[test]
    fn one_report_is_not_amplified() {
        // n = 1: C = 0, P_0 = (α, 1−α) on {0, 1}, Q_0 mirrored: δ(ε) = α − e^ε(1−α), so
        // δ = 1e-6 is met at ε = ln((α − 1e-6)/(1 − α)) = 1 − 1e-6(1 + e)(1 + e⁻¹) ≈ 1 − 5.09e-6
        // (α = e/(1+e)), up to the 10⁻⁶ margin and the grid.
        let e = numerical(1, 1.0, 1e-6).unwrap();
        let alpha = 1.0 / (1.0 + (-1.0f64).exp());
        let want = ((alpha - 1e-6) / (1.0 - alpha)).ln();
        assert!(e >= want && e - want < 1e-9, "{e} vs {want}");
    }

    #[test]
    fn side_by_side_reports_both_guarantees_and_refuses_non_pure_events() {
        // ε₀ = 2 per round (Laplace, multiplier ½), 10⁴ reports per shuffle, 10 rounds,
        // basic composition: ISRL-DP ε = 20 exactly; the shuffled one is far smaller.
        let local = PrivacyEvent::Laplace {
            noise_multiplier: 0.5,
        };
        let sbs = side_by_side(
            AccountantKind::Basic,
            &local,
            10,
            10_000,
            5e-8,
            Delta::new(1e-6).unwrap(),
        )
        .unwrap();
        assert!(
            (sbs.isrl_dp_epsilon - 20.0).abs() < 1e-9,
            "{}",
            sbs.isrl_dp_epsilon
        );
        assert!((sbs.per_round.local_epsilon - 2.0).abs() < 1e-12);
        let e1 = sbs.per_round.amplified.epsilon;
        assert!(e1 > 0.0 && e1 < 0.5, "{e1}");
        assert!(
            (sbs.shuffled_epsilon - 10.0 * e1).abs() < 1e-9,
            "{}",
            sbs.shuffled_epsilon
        );
        let gauss = PrivacyEvent::Gaussian {
            noise_multiplier: 1.0,
        };
        assert!(ShuffledRelease::new(&gauss, Neighbouring::ReplaceOne, 100, 1e-6).is_err());
        assert!(ShuffledRelease::new(&local, Neighbouring::AddRemove, 100, 1e-6).is_err());
    }
}
