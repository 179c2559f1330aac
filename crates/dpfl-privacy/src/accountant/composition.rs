//! Composition theorems for (ε, δ) guarantees: basic, advanced and optimal.
//!
//! Each leaf event is first given an (ε_i, δ_i) guarantee:
//! * (ε, δ) events and truncated discrete Laplace: as stated; Laplace and discrete Laplace
//!   with noise multiplier b: (1/b, 0) (Dwork & Roth Thm 3.6);
//! * Gaussian with noise multiplier z: the exact ε at a per-step δ₀ (analytic Gaussian,
//!   Balle & Wang 2018 Thm 8); discrete Gaussian: via ½z⁻²-zCDP (Canonne, Kamath & Steinke
//!   2020) and Bun & Steinke 2016 Prop. 1.3;
//! * Poisson sampling (add/remove) and sampling without replacement (replace-one) of a
//!   Gaussian: amplification by subsampling, ε' = log(1 + q(e^ε − 1)), δ' = qδ (Balle,
//!   Barthe & Gaboardi 2018, Thm 8 (Poisson) and Thm 9 (without replacement)).
//!   Sampling with replacement is refused (its amplification needs group privacy).
//!
//! The δ not taken by (ε, δ) events is split between the per-step δ₀ of noise events and the
//! slack δ̃ of the composition theorem; the split is searched over a grid and the best sound
//! result kept.
//!
//! Rules:
//! * **basic**: ε = Σ ε_i, δ = Σ δ_i (Dwork & Roth Thm 3.16);
//! * **advanced**: the better of Dwork & Roth Thm 3.20 (homogeneous: ε₀√(2k ln(1/δ̃)) +
//!   kε₀(e^{ε₀} − 1), δ = kδ₀ + δ̃) and Kairouz, Oh & Viswanath 2015 Thm 3.5
//!   (heterogeneous), never worse than basic;
//! * **optimal**: Kairouz, Oh & Viswanath 2015 Thm 3.3, the exact k-fold composition of
//!   (ε₀, δ₀): δ(ε) = 1 − (1 − δ₀)^k (1 − δ_RR(ε)) with
//!   δ_RR(ε) = Σ_l C(k,l) [e^{(k−l)ε₀} − e^{ε+lε₀}]₊ / (1 + e^{ε₀})^k; homogeneous only.

use super::gaussian::gaussian_epsilon;
use super::special::{log_add, log_comb, round_up};
use super::zcdp::rho_to_epsilon;
use super::{Leaf, effective_gaussian, leaves, unsupported};
use crate::error::{PrivacyError, Result};
use crate::event::{Neighbouring, PrivacyEvent, Sampling};
use crate::params::Delta;

/// The composition theorem a [`CompositionAccountant`] applies to a run's (ε, δ) leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// Basic composition: the ε and δ of the steps add up (Dwork & Roth Thm 3.16).
    Basic,
    /// Advanced composition: the better of Dwork & Roth Thm 3.20 (ε₀√(2k ln(1/δ̃)) + kε₀(e^ε₀ − 1))
    /// and Kairouz, Oh & Viswanath Thm 3.5 (heterogeneous steps); never worse than basic.
    Advanced,
    /// The optimal homogeneous composition of Kairouz, Oh & Viswanath (Thm 3.3), exact for k (ε₀,
    /// δ₀) steps.
    Optimal,
}

impl Rule {
    fn name(self) -> &'static str {
        match self {
            Rule::Basic => "basic",
            Rule::Advanced => "advanced",
            Rule::Optimal => "optimal",
        }
    }
}

/// How a leaf gets its (ε, δ): fixed, or as a function of a per-step δ₀.
enum Cost {
    Fixed(f64, f64),
    /// ε(δ₀) of a noise event.
    Noise(Box<dyn Fn(f64) -> Result<f64>>),
}

/// An (ε, δ)-composition accountant: each event is first reduced to (ε₀, δ₀) (noise events at a
/// per-step δ₀ split off the target δ), then composed by its [`Rule`]. Looser than RDP or PLD;
/// there as the papers' baseline.
#[derive(Debug, Clone)]
pub(crate) struct CompositionAccountant {
    rule: Rule,
    neighbouring: Neighbouring,
}

impl CompositionAccountant {
    /// An accountant composing by `rule`; `neighbouring` fixes the sensitivity noise multipliers
    /// refer to.
    pub(crate) fn new(rule: Rule, neighbouring: Neighbouring) -> Self {
        CompositionAccountant { rule, neighbouring }
    }

    fn cost(&self, event: &PrivacyEvent) -> Result<Cost> {
        let name = self.rule.name();
        Ok(match event {
            PrivacyEvent::EpsilonDelta { epsilon, delta }
            | PrivacyEvent::TruncatedDiscreteLaplace { epsilon, delta } => {
                Cost::Fixed(*epsilon, *delta)
            }
            PrivacyEvent::Laplace { noise_multiplier }
            | PrivacyEvent::DiscreteLaplace { noise_multiplier } => {
                Cost::Fixed(1.0 / noise_multiplier, 0.0)
            }
            PrivacyEvent::Gaussian { noise_multiplier } => {
                let z = *noise_multiplier;
                Cost::Noise(Box::new(move |d| gaussian_epsilon(z, Delta::new(d)?)))
            }
            // CKS20 Thm 14: ρ = Δ₂²/(2σ²) in every dimension, then the zCDP conversion.
            PrivacyEvent::DiscreteGaussian {
                noise_multiplier, ..
            } => {
                let rho = 1.0 / (2.0 * noise_multiplier * noise_multiplier);
                Cost::Noise(Box::new(move |d| Ok(rho_to_epsilon(rho, d))))
            }
            PrivacyEvent::Sampled {
                sampling,
                event: inner,
            } => {
                let Some(z) = effective_gaussian(inner)? else {
                    return Err(unsupported(
                        name,
                        event,
                        "only Gaussian events can be sampled",
                    ));
                };
                let q = match (sampling, self.neighbouring) {
                    (Sampling::Poisson { rate }, Neighbouring::AddRemove) => *rate,
                    (
                        Sampling::WithoutReplacement { population, size },
                        Neighbouring::ReplaceOne,
                    ) => *size as f64 / *population as f64,
                    (Sampling::WithReplacement { .. }, _) => {
                        return Err(unsupported(
                            name,
                            event,
                            "sampling with replacement has no (epsilon, delta) amplification here; use rdp",
                        ));
                    }
                    (Sampling::Disjoint { .. }, _) => {
                        return Err(unsupported(
                            name,
                            event,
                            "disjoint batches must be accounted through composition",
                        ));
                    }
                    _ => {
                        return Err(unsupported(
                            name,
                            event,
                            "amplification theorem does not match the neighbouring relation",
                        ));
                    }
                };
                if q == 0.0 {
                    Cost::Fixed(0.0, 0.0)
                } else {
                    // BBG18: the inner mechanism at δ₀/q gives (log(1 + q(e^ε − 1)), δ₀).
                    Cost::Noise(Box::new(move |d| {
                        let inner = (d / q).min(0.5);
                        let e = gaussian_epsilon(z, Delta::new(inner)?)?;
                        Ok((q * e.exp_m1()).ln_1p())
                    }))
                }
            }
            PrivacyEvent::SelfComposed { .. }
            | PrivacyEvent::Composed(_)
            | PrivacyEvent::ShuffledLocal { .. }
            | PrivacyEvent::PvecSum { .. } => {
                return Err(unsupported(
                    name,
                    event,
                    "composite event reached a leaf rule",
                ));
            }
        })
    }

    /// ε at δ (rounded up); δ must leave room for the events' own δ.
    pub(crate) fn epsilon(&self, event: &PrivacyEvent, delta: Delta) -> Result<f64> {
        let ls = leaves(event)?;
        let mut fixed: Vec<(f64, f64, u64)> = Vec::new();
        let mut noise: Vec<(Cost, u64)> = Vec::new();
        let mut fixed_delta = 0.0;
        for Leaf { event, count } in &ls {
            match self.cost(event)? {
                Cost::Fixed(e, d) => {
                    fixed_delta += d * *count as f64;
                    fixed.push((e, d, *count));
                }
                c @ Cost::Noise(_) => noise.push((c, *count)),
            }
        }
        let avail = delta.get() - fixed_delta;
        if avail <= 0.0 {
            return Err(PrivacyError::invalid(
                "delta",
                delta.get(),
                format!("the events' own delta adds up to {fixed_delta}; nothing is left"),
            ));
        }
        let k_noise: f64 = noise.iter().map(|(_, c)| *c as f64).sum();
        let splits: Vec<f64> = match self.rule {
            Rule::Basic => vec![0.0],
            _ => (1..40).map(|i| i as f64 / 40.0).collect(),
        };
        let mut best = f64::INFINITY;
        let mut last_err = None;
        for t in splits {
            let slack = avail * t;
            let d0 = if k_noise > 0.0 {
                (avail - slack) / k_noise
            } else {
                0.0
            };
            let mut steps: Vec<(f64, f64, u64)> = fixed.clone();
            let mut ok = true;
            for (c, count) in &noise {
                if let Cost::Noise(f) = c {
                    match f(d0) {
                        Ok(e) => steps.push((e, d0, *count)),
                        Err(e) => {
                            last_err = Some(e);
                            ok = false;
                            break;
                        }
                    }
                }
            }
            if !ok {
                continue;
            }
            let e = match self.rule {
                Rule::Basic => basic(&steps),
                Rule::Advanced => advanced(&steps, slack).min(basic(&steps)),
                Rule::Optimal => match optimal(&steps, delta.get()) {
                    Ok(e) => e,
                    Err(e @ PrivacyError::Unsupported { .. }) => return Err(e),
                    Err(e) => {
                        last_err = Some(e);
                        continue;
                    }
                },
            };
            best = best.min(e);
        }
        if best.is_finite() {
            Ok(round_up(best))
        } else {
            Err(last_err.unwrap_or(PrivacyError::Numerical {
                context: "composition",
                reason: "no delta split gives a finite epsilon".into(),
            }))
        }
    }
}

fn basic(steps: &[(f64, f64, u64)]) -> f64 {
    steps.iter().map(|(e, _, c)| e * *c as f64).sum()
}

/// min(Dwork & Roth Thm 3.20 if homogeneous, KOV15 Thm 3.5) with slack δ̃.
fn advanced(steps: &[(f64, f64, u64)], slack: f64) -> f64 {
    if slack <= 0.0 {
        return f64::INFINITY;
    }
    let mut best = f64::INFINITY;
    let nonzero: Vec<&(f64, f64, u64)> = steps
        .iter()
        .filter(|(e, _, c)| *e > 0.0 && *c > 0)
        .collect();
    if nonzero.is_empty() {
        return 0.0;
    }
    if nonzero.iter().all(|s| s.0 == nonzero[0].0) {
        let e0 = nonzero[0].0;
        let k: f64 = nonzero.iter().map(|s| s.2 as f64).sum();
        best = best.min(e0 * (2.0 * k * (1.0 / slack).ln()).sqrt() + k * e0 * e0.exp_m1());
    }
    // KOV15 Thm 3.5.
    let sum_sq: f64 = nonzero.iter().map(|(e, _, c)| e * e * *c as f64).sum();
    let drift: f64 = nonzero
        .iter()
        .map(|(e, _, c)| *c as f64 * e * e.exp_m1() / (e.exp() + 1.0))
        .sum();
    let a = drift + (2.0 * sum_sq * (std::f64::consts::E + sum_sq.sqrt() / slack).ln()).sqrt();
    let b = drift + (2.0 * sum_sq * (1.0 / slack).ln()).sqrt();
    best.min(a).min(b)
}

/// KOV15 Thm 3.3 for k identical (ε₀, δ₀) steps: the smallest ε with
/// 1 − (1 − δ₀)^k (1 − δ_RR(ε)) ≤ δ, by bisection (upper end returned).
fn optimal(steps: &[(f64, f64, u64)], delta: f64) -> Result<f64> {
    let nz: Vec<&(f64, f64, u64)> = steps.iter().filter(|s| s.2 > 0).collect();
    if nz.is_empty() {
        return Ok(0.0);
    }
    let (e0, d0) = (nz[0].0, nz[0].1);
    if nz.iter().any(|s| s.0 != e0 || s.1 != d0) {
        return Err(PrivacyError::Unsupported {
            accountant: "optimal",
            event: "heterogeneous composition (KOV Thm 3.3 is for identical steps; use advanced or pld)".into(),
        });
    }
    let k: u64 = nz.iter().map(|s| s.2).sum();
    if k > 1_000_000 {
        return Err(PrivacyError::Unsupported {
            accountant: "optimal",
            event: format!("composition of {k} steps (at most 1e6)"),
        });
    }
    let total = |eps: f64| -> f64 {
        let d_rr = rr_delta(k, e0, eps);
        let keep = ((k as f64) * (-d0).ln_1p()).exp();
        1.0 - keep * (1.0 - d_rr)
    };
    if e0 == 0.0 {
        return if total(0.0) <= delta {
            Ok(0.0)
        } else {
            Err(PrivacyError::Numerical {
                context: "optimal composition",
                reason: "delta too small".into(),
            })
        };
    }
    let mut hi = k as f64 * e0;
    if total(hi) > delta {
        return Err(PrivacyError::Numerical {
            context: "optimal composition",
            reason: format!("delta {delta} is below the steps' own k·delta0"),
        });
    }
    let mut lo = 0.0;
    if total(lo) <= delta {
        return Ok(0.0);
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if total(mid) <= delta {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi - lo <= 1e-10 * hi {
            break;
        }
    }
    Ok(hi)
}

/// Hockey-stick divergence of k-fold randomised response with parameter ε₀ at ε (KOV15).
fn rr_delta(k: u64, e0: f64, eps: f64) -> f64 {
    let kf = k as f64;
    let norm = kf * log_add(0.0, e0);
    let mut s = f64::NEG_INFINITY;
    for l in 0..=k {
        let lf = l as f64;
        let gap = (kf - 2.0 * lf) * e0 - eps; // log e^{(k−l)ε₀} − log e^{ε+lε₀}
        if gap <= 0.0 {
            break;
        }
        let t = log_comb(kf, lf) + (kf - lf) * e0 + (-(-gap).exp()).ln_1p() - norm;
        s = log_add(s, t);
    }
    s.exp().min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ed(e: f64, d: f64) -> PrivacyEvent {
        PrivacyEvent::EpsilonDelta {
            epsilon: e,
            delta: d,
        }
    }

    #[test]
    fn basic_by_hand() {
        let acc = CompositionAccountant::new(Rule::Basic, Neighbouring::AddRemove);
        let e = PrivacyEvent::Composed(vec![ed(0.5, 1e-7).repeated(3), ed(0.2, 0.0)]);
        let eps = acc.epsilon(&e, Delta::new(1e-6).unwrap()).unwrap();
        assert!((eps - 1.7).abs() < 1e-9);
        assert!(acc.epsilon(&e, Delta::new(2e-7).unwrap()).is_err());
    }

    #[test]
    fn advanced_by_hand() {
        // k = 100 steps of (0.1, 0): DR Thm 3.20 with δ̃ = δ·t; best t is the largest (39/40):
        // δ̃ = 0.975e-5: 0.1·√(200 ln(1/δ̃)) + 100·0.1·(e^{0.1} − 1).
        let acc = CompositionAccountant::new(Rule::Advanced, Neighbouring::AddRemove);
        let e = ed(0.1, 0.0).repeated(100);
        let eps = acc.epsilon(&e, Delta::new(1e-5).unwrap()).unwrap();
        let s = 0.975e-5f64;
        let dr = 0.1 * (200.0 * (1.0 / s).ln()).sqrt() + 10.0 * 0.1f64.exp_m1();
        let sq = 1.0f64;
        let drift = 100.0 * 0.1 * 0.1f64.exp_m1() / (0.1f64.exp() + 1.0);
        let kov = drift + (2.0 * sq * (1.0 / s).ln()).sqrt();
        let want = dr.min(kov).min(10.0);
        assert!((eps - want).abs() < 1e-9, "{eps} vs {want}");
        // KOV's drift term beats DR here: 0.49958 + 4.80380 = 5.30338.
        assert!((want - 5.303_382_927_928).abs() < 1e-9, "{want}");
    }

    #[test]
    fn optimal_by_hand() {
        // k = 2 steps of (1, 0), δ = 0.05. δ_RR(ε) for ε ∈ [0, 2):
        // (l = 0) (e² − e^ε)/(1+e)² — l = 1 has gap −ε ≤ 0. Setting it to 0.05:
        // e^ε = e² − 0.05(1+e)² = 7.389056 − 0.691464 = 6.697592 → ε = 1.901746.
        let acc = CompositionAccountant::new(Rule::Optimal, Neighbouring::AddRemove);
        let eps = acc
            .epsilon(&ed(1.0, 0.0).repeated(2), Delta::new(0.05).unwrap())
            .unwrap();
        let e = std::f64::consts::E;
        let want = (e * e - 0.05 * (1.0 + e) * (1.0 + e)).ln();
        assert!((eps - want).abs() < 1e-8 && eps >= want, "{eps} vs {want}");
        // Heterogeneous steps are refused by the optimal rule.
        let het = PrivacyEvent::Composed(vec![ed(1.0, 0.0), ed(0.5, 0.0)]);
        assert!(acc.epsilon(&het, Delta::new(0.05).unwrap()).is_err());
    }

    #[test]
    fn gaussian_under_advanced_is_sound_and_above_rdp() {
        let e = PrivacyEvent::Gaussian {
            noise_multiplier: 5.0,
        }
        .repeated(50);
        let d = Delta::new(1e-5).unwrap();
        let adv = CompositionAccountant::new(Rule::Advanced, Neighbouring::AddRemove)
            .epsilon(&e, d)
            .unwrap();
        // The exact answer: one Gaussian with z = 5/√50.
        let exact = gaussian_epsilon(5.0 / 50f64.sqrt(), d).unwrap();
        assert!(adv >= exact, "{adv} < exact {exact}");
    }
}
