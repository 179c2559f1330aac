//! The parameter rules of Lowy & Razaviyayn (ICLR 2023) as one pure function,
//! [`theory_params`]: from (L, β, μ, D, n, N, M, d, ε, δ) it computes the rounds R, the batch
//! size K, the step size η, the averaging weights, the regulariser λ and the AC-SA schedule as
//!
//! * Thm D.1 (Noisy MB-SGD, smooth; convex and strongly convex, the latter with Stich's
//!   step and exponential weights) and Thm D.2 (non-smooth, by Moreau smoothing);
//! * Thm E.1 (One-Pass Accelerated Noisy MB-SGD; convex with regulariser λ, strongly convex
//!   by the multi-stage schedule of App. E.1);
//! * Thm F.1 (Accelerated Noisy MB-SGD for ERM) and Thm F.2 (non-smooth).
//!
//! Every computed value can be overridden by an explicit one ([`Overrides`]); a rule that needs
//! a constant the user did not configure fails with an error naming the field
//! (`algorithm.constants.<name>`).
//!
//! # Decisions (digest §5.2)
//! * **Regulariser λ (item 4).** λ = V/(D√R), as in Lemma E.1 (Woodworth et al. 2020b,
//!   Lemma 4: F̃ = F + V/(2‖w₀−w*‖√R)·‖w−w₀‖², i.e. λ/2 = V/(2‖w₀−w*‖√R)) and Thm F.1, with D
//!   in place of the unknown ‖w₀ − w*‖. The proof of Thm E.1 writes V/(2D√R); the two differ
//!   by a factor 2 that only trades bias λD²/2 against variance 8V²/(λR) and never touches
//!   privacy (λ enters on the server, after the noise). The AC-SA on F̃ uses μ := λ (F̃ is
//!   λ-strongly convex) and β̃ = β + λ.
//! * **Convex AC-SA steps (item 4).** α_r = 2/(r+1), η_r = 4γ/(r(r+1)),
//!   γ = max{2β̃, √(V²R(R+1)(R+2)/(3D²))}; see [`super::multistage`] for the check.
//! * **V and V_X.** V² = φ²/(MK) + (v²/M)(N−M)/(N−1)·1{N>1} + dσ²/M (Lemma E.3) for the
//!   one-pass algorithm, V_X² = 1{MK<nN}·4L²/(MK) + dσ²/M (proof of Thm F.1) for ERM. φ and v
//!   default to L (a variance never exceeds the second moment, and every gradient has norm
//!   ≤ L); σ is the largest noise of any silo. `constants.variance` overrides V².
//! * **D.** The projection's diameter, or `constants.diameter` (which also stands in for the
//!   unknown ‖w₀ − w*‖ when W = R^d, as in the paper's experiments).
//! * **Unbalanced silos.** The rules take the worst silo on each axis: n = min n_i, ε = min ε_i,
//!   δ = min δ_i; with weights p_i, L̃ = max_i Np_i·L, β̃ = max_i Np_i·β, μ̃ = min_i Np_i·μ
//!   (App. H.1).
//! * **Non-private runs** take ε → ∞ in every rule. Where that leaves no finite R (ERM), the
//!   rounds must be given.
//! * **Thm D.1 strongly convex R**: the printed ln(βD²μMε₀²n²/(dL²)) uses ε₀²n²/d; without
//!   privacy we use n in its place (the other term of rate (18)).
//! * **Thm E.1 strongly convex K**: the logarithm is floored at 1 so that K ≤ n/√κ.
//! * **Thm F.1 convex R**: the first term is printed garbled; we use
//!   ((βD/L)·√M ε₀ n/√(d ln(1/δ₀)))^{1/2}, re-derived from βD²/R² ≲ LD√(d ln(1/δ₀))/(ε₀n√M).
//!   Its K-dependent second term and K ≥ ε₀n/(4√(2R ln(2/δ₀))) are solved by fixed-point
//!   iteration.
//! * **Smoothing (Thm D.2 / F.2).** β is the smallest value with L²/β at most the stated bound:
//!   D.2 convex β = L²/[(LD/√M)(1/√n + √(d ln(1/δ₀))/(ε₀n))], strongly convex
//!   β = μM/(1/n + d ln(1/δ₀)/(ε₀²n²)); F.2 convex β = ε₀n√M·L/(√d·D), strongly convex
//!   β = μMε₀²n²/d. The one-pass algorithm (Thm E.1) has no smoothing rule. After smoothing
//!   every rule uses 2L (Lemma D.7) and the smoothing β as the smoothness.
//! * Real-valued K and R are rounded (K to nearest for Thm E.1, up to the privacy minimum
//!   otherwise; R up) and clamped to [1, n] and ≥ 1.

use super::calibration::NoiseRule;
pub(crate) use super::inputs::{
    Constants, Overrides, Params, Setting, Smoothing, TheoryInputs, TheoryParams,
};
use super::multistage::{self, AcsaSchedule};
use crate::algo::server::OutputRule;

fn constant(v: Option<f64>, name: &str, rule: &str) -> crate::Result<f64> {
    match v {
        Some(x) if x.is_finite() && x > 0.0 => Ok(x),
        Some(x) => Err(crate::Error::config(
            format!("algorithm.constants.{name}"),
            format!("must be finite and > 0, got {x}"),
        )),
        None => Err(crate::Error::config(
            format!("algorithm.constants.{name}"),
            format!("not configured, but {rule} needs it"),
        )),
    }
}

struct Ctx<'a> {
    inp: &'a TheoryInputs,
    n: f64,
    big_n: f64,
    m: f64,
    d: f64,
    eps: f64,
    ln_inv_delta: f64,
    ln_two_over_delta: f64,
}

impl Ctx<'_> {
    fn new(inp: &TheoryInputs) -> crate::Result<Ctx<'_>> {
        if inp.records == 0 || inp.silos == 0 || inp.dim == 0 {
            return Err(crate::Error::config(
                "silos",
                "the rules need n ≥ 1, N ≥ 1 and d ≥ 1",
            ));
        }
        if !(inp.participants.is_finite() && inp.participants >= 1.0) {
            return Err(crate::Error::config(
                "participation",
                format!("M must be ≥ 1, got {}", inp.participants),
            ));
        }
        if !(inp.lipschitz.is_finite() && inp.lipschitz > 0.0) {
            return Err(crate::Error::config(
                "privacy.lipschitz",
                format!("the rules need a finite L > 0, got {}", inp.lipschitz),
            ));
        }
        let (eps, ln_inv_delta, ln_two_over_delta) = match inp.privacy {
            Some((e, dl)) => (e, (1.0 / dl).ln(), (2.0 / dl).ln()),
            None => (f64::INFINITY, 1.0, 1.0),
        };
        Ok(Ctx {
            inp,
            n: inp.records as f64,
            big_n: inp.silos as f64,
            m: inp.participants,
            d: inp.dim as f64,
            eps,
            ln_inv_delta,
            ln_two_over_delta,
        })
    }
    fn private(&self) -> bool {
        self.inp.privacy.is_some()
    }
    fn diameter(&self, rule: &str) -> crate::Result<f64> {
        match self.inp.constants.diameter {
            Some(_) => constant(self.inp.constants.diameter, "diameter", rule),
            None if self.inp.projection_diameter.is_finite() => Ok(self.inp.projection_diameter),
            None => Err(crate::Error::config(
                "algorithm.constants.diameter",
                format!(
                    "not configured and the projection is none (W = R^d), but {rule} needs D; give an estimate of ‖w0 − w*‖"
                ),
            )),
        }
    }
    /// The privacy-minimum K at R rounds (Thm D.1 / F.1) for the smallest silo.
    fn k_min(&self, rounds: f64) -> Option<f64> {
        match self.inp.noise {
            Some(NoiseRule::Theory) => {
                Some(self.eps * self.n / (4.0 * (2.0 * rounds * self.ln_two_over_delta).sqrt()))
            }
            Some(NoiseRule::Experiment | NoiseRule::Accountant) => {
                Some((self.n * self.eps.sqrt() / (2.0 * rounds.sqrt())).floor())
            }
            Some(NoiseRule::OnePass) | None => None,
        }
    }
}

/// The smoothing parameter of Thm D.2 (Noisy MB-SGD) or Thm F.2 (accelerated ERM): the
/// smallest β with L²/β at most the theorem's bound (see the module doc).
pub(crate) fn smoothing_rule(inp: &TheoryInputs) -> crate::Result<f64> {
    let c = Ctx::new(inp)?;
    let (wmin, wmax) = inp.weight_range;
    let l = inp.lipschitz * wmax;
    let mu = inp.constants.strong_convexity;
    let beta = match (inp.setting, mu) {
        (Setting::OnePass, _) => {
            return Err(crate::Error::config(
                "algorithm.smoothing",
                "Thm E.1 (one pass) assumes a smooth loss and has no smoothing rule; give smoothing = β",
            ));
        }
        (Setting::MbSgd, None) => {
            let dd = c.diameter("Thm D.2's smoothing rule")?;
            let bound = l * dd / c.m.sqrt()
                * (1.0 / c.n.sqrt() + (c.d * c.ln_inv_delta).sqrt() / (c.eps * c.n));
            l * l / bound
        }
        (Setting::MbSgd, Some(_)) => {
            let mu = wmin * constant(mu, "strong_convexity", "Thm D.2's smoothing rule")?;
            mu * c.m / (1.0 / c.n + c.d * c.ln_inv_delta / (c.eps * c.eps * c.n * c.n))
        }
        (Setting::Erm, None) => {
            let dd = c.diameter("Thm F.2's smoothing rule")?;
            c.eps * c.n * c.m.sqrt() * l / (c.d.sqrt() * dd)
        }
        (Setting::Erm, Some(_)) => {
            let mu = wmin * constant(mu, "strong_convexity", "Thm F.2's smoothing rule")?;
            mu * c.m * c.eps * c.eps * c.n * c.n / c.d
        }
    };
    if !(beta.is_finite() && beta > 0.0) {
        return Err(crate::Error::config(
            "algorithm.smoothing",
            format!(
                "the smoothing rule gives β = {beta} (it needs a privacy budget); give smoothing = β"
            ),
        ));
    }
    Ok(beta)
}

fn ceil_rounds(r: f64) -> Option<usize> {
    (r.is_finite() && r < 1e12).then(|| r.ceil().max(1.0) as usize)
}

/// The rules of Thms D.1/D.2, E.1 and F.1/F.2 (see the module doc for every decision).
pub(crate) fn theory_params(inp: &TheoryInputs) -> crate::Result<TheoryParams> {
    let c = Ctx::new(inp)?;
    let ov = inp.overrides;
    let (wmin, wmax) = inp.weight_range;
    if !(wmin > 0.0 && wmax >= wmin && wmax.is_finite()) {
        return Err(crate::Error::config(
            "algorithm.weights",
            format!("weights must be > 0, got range {wmin}..{wmax}"),
        ));
    }
    let lip = wmax * inp.lipschitz * if inp.smoothing.is_some() { 2.0 } else { 1.0 };
    let beta = match inp.smoothing {
        Some(b) => Some(wmax * b),
        None => inp.constants.smoothness.map(|b| wmax * b),
    };
    let mu = match inp.constants.strong_convexity {
        Some(_) => Some(
            wmin * constant(
                inp.constants.strong_convexity,
                "strong_convexity",
                "the strongly convex rules",
            )?,
        ),
        None => None,
    };
    let need_beta = |rule: &str| match beta {
        Some(b) if b.is_finite() && b > 0.0 => Ok(b),
        _ => constant(inp.constants.smoothness, "smoothness", rule).map(|b| wmax * b),
    };
    let phi = inp.constants.phi.unwrap_or(lip);
    let het = inp.constants.heterogeneity.unwrap_or(lip);
    let n = c.n;
    let (m, d, eps, lnd) = (c.m, c.d, c.eps, c.ln_inv_delta);

    // ---- R and K ---------------------------------------------------------------------
    let mut batch_rule = None;
    let (rounds_rule, rounds, batch_size): (Option<f64>, usize, usize) = match inp.setting {
        Setting::MbSgd => {
            let rule = match (ov.rounds, mu) {
                (Some(_), _) => None,
                (None, None) => {
                    let r = "Thm D.1's R";
                    let (b, dd) = (need_beta(r)?, c.diameter(r)?);
                    // R = (βD√M/L)·min{√n, εn/√d} + min{nM, ε²n²M/d}.
                    Some(
                        b * dd * m.sqrt() / lip * n.sqrt().min(eps * n / d.sqrt())
                            + (n * m).min(eps * eps * n * n * m / d),
                    )
                }
                (None, Some(mu)) => {
                    let r = "Thm D.1's strongly convex R";
                    let (b, dd) = (need_beta(r)?, c.diameter(r)?);
                    // R = max{(2β/μ) ln(βD²μMε²n²/(dL²)), min{Mn, Mε²n²/d}}.
                    let x = if c.private() {
                        eps * eps * n * n / d
                    } else {
                        n
                    };
                    let first = 2.0 * b / mu * (b * dd * dd * mu * m * x / (lip * lip)).ln();
                    Some(first.max((m * n).min(m * eps * eps * n * n / d)))
                }
            };
            let rounds = match ov.rounds.or_else(|| rule.and_then(ceil_rounds)) {
                Some(r) => r,
                None => return Err(no_rounds("Thm D.1")),
            };
            let k = match ov.batch_size {
                Some(k) => k,
                None => default_k(&c, rounds)?,
            };
            (rule, rounds, k)
        }
        Setting::OnePass => {
            let k_real = match mu {
                None => {
                    let r = "Thm E.1's batch size";
                    let (b, dd) = (need_beta(r)?, c.diameter(r)?);
                    // K = (L/(βD))^{2/5} n^{3/5} (d ln(1/δ))^{1/5} / (ε^{2/5} M^{1/5}).
                    (lip / (b * dd)).powf(0.4) * n.powf(0.6) * (d * lnd).powf(0.2)
                        / (eps.powf(0.4) * m.powf(0.2))
                }
                Some(mu) => {
                    let r = "Thm E.1's strongly convex batch size";
                    let b = need_beta(r)?;
                    let gap = constant(inp.constants.gap, "gap", r)?;
                    // K = n / (√κ ln(μΔ min{ε²n²M/(L²d ln(1/δ)), nM/φ²})), log floored at 1.
                    let arg = mu
                        * gap
                        * (eps * eps * n * n * m / (lip * lip * d * lnd)).min(n * m / (phi * phi));
                    n / ((b / mu).sqrt() * arg.ln().max(1.0))
                }
            };
            batch_rule = Some(k_real);
            let k = ov
                .batch_size
                .unwrap_or_else(|| (k_real.round().max(1.0) as usize).min(inp.records));
            let passes = inp.records / k.max(1);
            let rounds = ov.rounds.unwrap_or(passes);
            if rounds > passes || k == 0 {
                return Err(crate::Error::config(
                    "rounds",
                    format!(
                        "one pass over n = {} records in batches of K = {k} allows at most {passes} rounds, {rounds} requested",
                        inp.records
                    ),
                ));
            }
            (Some(passes as f64), rounds, k)
        }
        Setting::Erm => {
            let first = |rule: &str| -> crate::Result<f64> {
                Ok(match mu {
                    None => {
                        let (b, dd) = (need_beta(rule)?, c.diameter(rule)?);
                        (b * dd / lip * m.sqrt() * eps * n / (d * lnd).sqrt()).sqrt()
                    }
                    Some(mu) => {
                        let b = need_beta(rule)?;
                        let gap = constant(inp.constants.gap, "gap", rule)?;
                        (b / mu).sqrt() * (gap * mu * m * eps * eps * n * n / (lip * lip * d)).ln()
                    }
                })
            };
            let second = |k: usize| {
                if m * (k as f64) < c.big_n * n {
                    eps * eps * n * n / (k as f64 * d * lnd)
                } else {
                    0.0
                }
            };
            match (ov.rounds, ov.batch_size) {
                (Some(r), Some(k)) => (None, r, k),
                (Some(r), None) => (None, r, default_k(&c, r)?),
                (None, kk) => {
                    let r1 = first("Thm F.1's R")?;
                    // Fixed point of R = max{R₁, 1{MK<Nn} ε²n²/(K d ln(1/δ))}, K = K_min(R).
                    let mut r = r1.max(1.0);
                    let mut k = kk.unwrap_or(1);
                    for _ in 0..100 {
                        if kk.is_none() {
                            k = default_k(&c, ceil_rounds(r).unwrap_or(usize::MAX))?;
                        }
                        let next = r1.max(second(k)).max(1.0);
                        if (next - r).abs() <= 1e-9 * r {
                            break;
                        }
                        r = next;
                    }
                    match ceil_rounds(r) {
                        Some(rr) => (Some(r), rr, k),
                        None => return Err(no_rounds("Thm F.1")),
                    }
                }
            }
        }
    };
    if batch_size == 0 || batch_size > inp.records {
        return Err(crate::Error::config(
            "algorithm.batch_size",
            format!("K = {batch_size} must lie in [1, n = {}]", inp.records),
        ));
    }
    let (rf, kf) = (rounds as f64, batch_size as f64);

    // ---- σ -------------------------------------------------------------------------------
    let sigma = match (ov.sigma, inp.noise, inp.privacy) {
        (Some(s), _, _) => s,
        (None, Some(rule), Some((e, dl))) => {
            let e = dpfl_privacy::Epsilon::new(e)?;
            let dl = dpfl_privacy::Delta::new(dl)?;
            // The closed forms are the papers' (sampling with replacement); the accountant
            // rule is certified for that sampling here.
            super::calibration::silo_sigma(
                rule,
                lip,
                rounds,
                inp.records,
                batch_size,
                e,
                dl,
                dpfl_privacy::sampler::RecordSampling::WithReplacement,
                // The parameter rules read σ for the step sizes only, never for privacy.
                super::calibration::NoiseShape::continuous(),
            )?
            .0
        }
        _ => 0.0,
    };

    // ---- steps, weights, λ, schedule -------------------------------------------------------
    let mut out = TheoryParams {
        lipschitz: lip,
        smoothness: beta,
        strong_convexity: mu,
        rounds,
        rounds_rule,
        batch_size,
        batch_rule,
        sigma,
        variance: None,
        step_size: None,
        output: OutputRule::Average,
        lambda: 0.0,
        acsa_mu: 0.0,
        acsa: None,
    };
    match inp.setting {
        Setting::MbSgd => match mu {
            None => {
                // η = min(1/β, (D/(L√R))·min{1, εn√M/√(Rd), √(nM/R)}), γ_r = 1/R.
                let eta = match ov.step_size {
                    Some(s) => s,
                    None => {
                        let r = "Thm D.1's step size";
                        let (b, dd) = (need_beta(r)?, c.diameter(r)?);
                        (1.0 / b).min(
                            dd / (lip * rf.sqrt())
                                * 1f64
                                    .min(eps * n * m.sqrt() / (rf * d).sqrt())
                                    .min((n * m / rf).sqrt()),
                        )
                    }
                };
                out.step_size = Some(eta);
            }
            Some(mu) => {
                let eta = match ov.step_size {
                    Some(s) => s,
                    None => {
                        let r = "Thm D.1's strongly convex step size";
                        let (b, dd) = (need_beta(r)?, c.diameter(r)?);
                        let cc = d * sigma * sigma / m + lip * lip;
                        multistage::stich_step(b, mu, dd * dd, cc, rounds)
                    }
                };
                if (mu * eta).partial_cmp(&1.0) != Some(std::cmp::Ordering::Less) {
                    return Err(crate::Error::config(
                        "algorithm.step_size",
                        format!(
                            "μη = {} must be < 1 for the weights (1 − μη)^-(r+1)",
                            mu * eta
                        ),
                    ));
                }
                out.step_size = Some(eta);
                out.output = OutputRule::Exponential { decay: mu * eta };
            }
        },
        Setting::OnePass | Setting::Erm => {
            let v2 = match inp.constants.variance {
                Some(v) if v.is_finite() && v >= 0.0 => v,
                Some(v) => {
                    return Err(crate::Error::config(
                        "algorithm.constants.variance",
                        format!("must be finite and >= 0, got {v}"),
                    ));
                }
                None if inp.setting == Setting::OnePass => {
                    // Lemma E.3.
                    let het_term = if inp.silos > 1 {
                        het * het / m * (c.big_n - m) / (c.big_n - 1.0)
                    } else {
                        0.0
                    };
                    phi * phi / (m * kf) + het_term.max(0.0) + d * sigma * sigma / m
                }
                None => {
                    // Proof of Thm F.1 (Lemma F.1).
                    let samp = if m * kf < c.big_n * n {
                        4.0 * lip * lip / (m * kf)
                    } else {
                        0.0
                    };
                    samp + d * sigma * sigma / m
                }
            };
            out.variance = Some(v2);
            match mu {
                None => {
                    let lambda = match ov.regularization {
                        Some(l) => l,
                        None if v2 == 0.0 => 0.0,
                        None => {
                            v2.sqrt() / (c.diameter("the regulariser λ = V/(D√R)")? * rf.sqrt())
                        }
                    };
                    let gamma = match ov.step_size {
                        Some(s) => 1.0 / (2.0 * s),
                        None => {
                            let r = "the AC-SA step rule";
                            let b = need_beta(r)? + lambda;
                            let dd = if v2 > 0.0 { c.diameter(r)? } else { 1.0 };
                            multistage::convex_gamma(b, v2, dd, rounds)
                        }
                    };
                    out.lambda = lambda;
                    out.acsa_mu = lambda;
                    out.acsa = Some(AcsaSchedule::Convex { gamma });
                }
                Some(mu) => {
                    let r = "the multi-stage schedule (App. E.1)";
                    let b = need_beta(r)?;
                    let gap = constant(inp.constants.gap, "gap", r)?;
                    let stages = multistage::multistage(b, mu, v2, gap, rounds)?;
                    out.acsa_mu = mu;
                    out.acsa = Some(AcsaSchedule::MultiStage { stages });
                }
            }
        }
    }
    Ok(out)
}

/// The batch size when none is given: the privacy minimum K at R rounds for the smallest silo
/// (Thm D.1 / F.1 or App. I), or an error for non-private runs.
fn default_k(c: &Ctx<'_>, rounds: usize) -> crate::Result<usize> {
    match c.k_min(rounds as f64) {
        Some(k) => Ok((k.ceil().max(1.0) as usize).min(c.inp.records)),
        None => Err(crate::Error::config(
            "algorithm.batch_size",
            "a non-private run has no batch-size rule; give batch_size",
        )),
    }
}

fn no_rounds(thm: &str) -> crate::Error {
    crate::Error::config(
        "rounds",
        format!(
            "{thm} gives no finite number of rounds here (non-private?); set rounds explicitly"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(setting: Setting) -> TheoryInputs {
        TheoryInputs {
            setting,
            noise: Some(NoiseRule::Theory),
            lipschitz: 1.0,
            constants: Constants {
                smoothness: Some(1.0),
                diameter: Some(2.0),
                ..Constants::default()
            },
            projection_diameter: f64::INFINITY,
            weight_range: (1.0, 1.0),
            records: 1000,
            silos: 10,
            participants: 10.0,
            dim: 10,
            privacy: Some((1.0, 1e-5)),
            smoothing: None,
            overrides: Overrides::default(),
        }
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn mbsgd_convex_rules_match_hand_values() {
        // L = 1, β = 1, D = 2, n = 1000, N = M = 10, d = 10, ε = 1, δ = 1e-5.
        // R = (βD√M/L)·min{√n, εn/√d} + min{nM, ε²n²M/d}
        //   = 2·3.16228·min{31.6228, 316.228} + min{1e4, 1e6} = 200 + 10000 = 10200.
        let p = theory_params(&base(Setting::MbSgd)).unwrap();
        assert!(
            close(p.rounds_rule.unwrap(), 10200.0, 1e-12),
            "{:?}",
            p.rounds_rule
        );
        assert_eq!(p.rounds, 10200);
        // K = ⌈εn/(4√(2R ln(2/δ)))⌉ = ⌈1000/(4√(20400·12.2061))⌉ = ⌈1000/(4·499.00)⌉ = 1.
        assert_eq!(p.batch_size, 1);
        // σ² = 256 R ln(2.5R/δ) ln(2/δ)/(n²ε²) = 256·10200·ln(2.55e9)·ln(2e5)/1e6
        //    = 256·10200·21.6594·12.2061/1e6 = 690.338.
        assert!(
            close(p.sigma * p.sigma, 690.3379, 1e-5),
            "{}",
            p.sigma * p.sigma
        );
        // η = min(1/β, (D/(L√R))·min{1, εn√M/√(Rd), √(nM/R)})
        //   = min(1, (2/100.995)·min{1, 3162.28/319.37 = 9.90, √(1e4/10200) = 0.990148})
        //   = 0.0198030·0.990148 = 0.0196079.
        assert!(
            close(p.step_size.unwrap(), 0.0196079, 1e-4),
            "{:?}",
            p.step_size
        );
        assert_eq!(p.output, OutputRule::Average);
    }

    #[test]
    fn mbsgd_strongly_convex_rules_match_hand_values() {
        let mut inp = base(Setting::MbSgd);
        inp.constants.strong_convexity = Some(0.1);
        inp.overrides.rounds = Some(1000);
        inp.overrides.sigma = Some(0.5);
        let p = theory_params(&inp).unwrap();
        // c = dσ²/M + L² = 10·0.25/10 + 1 = 1.25; μ²r₀R²/c = 0.01·4·1e6/1.25 = 32000;
        // η = min{1/2, ln 32000/(0.1·1000)} = 0.103735; decay μη = 0.0103735.
        let eta = 32000f64.ln() / 100.0;
        assert!(close(p.step_size.unwrap(), eta, 1e-12));
        assert_eq!(p.output, OutputRule::Exponential { decay: 0.1 * eta });
        // R rule: max{(2β/μ) ln(βD²μMε²n²/(dL²)), min{Mn, Mε²n²/d}}
        //       = max{20 ln(1·4·0.1·10·1e6/10) = 20 ln(4e5) = 257.98, min{1e4, 1e6}} = 1e4;
        // reported only (rounds were given).
        inp.overrides.rounds = None;
        let p = theory_params(&inp).unwrap();
        assert!(close(p.rounds_rule.unwrap(), 1e4, 1e-12));
    }

    #[test]
    fn one_pass_rules_match_hand_values() {
        let mut inp = base(Setting::OnePass);
        inp.noise = Some(NoiseRule::OnePass);
        inp.silos = 10;
        inp.participants = 5.0;
        // K = (L/(βD))^{2/5} n^{3/5} (d ln(1/δ))^{1/5} / (ε^{2/5} M^{1/5})
        //   = 0.5^{0.4}·1000^{0.6}·(10·11.5129)^{0.2}/5^{0.2}
        //   = 0.757858·63.0957·2.58367/1.37973 = 89.543 → 90; R = ⌊1000/90⌋ = 11.
        let p = theory_params(&inp).unwrap();
        assert!(
            close(p.batch_rule.unwrap(), 89.5429, 1e-5),
            "{:?}",
            p.batch_rule
        );
        assert_eq!((p.batch_size, p.rounds), (90, 11));
        // σ² = 32 L² ln(1.25/δ)/(ε²K²) = 32·11.7361/8100 = 0.0463650.
        assert!(
            close(p.sigma * p.sigma, 0.046365, 1e-4),
            "{}",
            p.sigma * p.sigma
        );
        // V² = φ²/(MK) + (v²/M)(N−M)/(N−1) + dσ²/M = 1/450 + 0.2·5/9 + 10·0.046365/5
        //    = 0.0022222 + 0.1111111 + 0.0927294 = 0.2060628.
        assert!(
            close(p.variance.unwrap(), 0.2060628, 1e-6),
            "{:?}",
            p.variance
        );
        // λ = V/(D√R) = 0.453941/(2·3.31662) = 0.0684342.
        assert!(close(p.lambda, 0.0684342, 1e-5), "{}", p.lambda);
        assert_eq!(p.acsa_mu, p.lambda);
        // γ = max{2(β+λ), √(V²R(R+1)(R+2)/(3D²))} = max{2.13687, √(0.2060628·1716/12) = 5.42835}.
        match p.acsa {
            Some(AcsaSchedule::Convex { gamma }) => assert!(close(gamma, 5.42835, 1e-5), "{gamma}"),
            other => panic!("{other:?}"),
        }
        // More rounds than one pass allows are refused, naming `rounds`.
        inp.overrides.rounds = Some(12);
        let e = theory_params(&inp).unwrap_err().to_string();
        assert!(e.contains("rounds") && e.contains("11"), "{e}");
    }

    #[test]
    fn erm_and_smoothing_rules_match_hand_values() {
        let mut inp = base(Setting::Erm);
        inp.overrides.rounds = Some(100);
        let p = theory_params(&inp).unwrap();
        // K = ⌈1000/(4√(200·12.2061))⌉ = ⌈1000/(4·49.41)⌉ = ⌈5.0597⌉ = 6.
        assert_eq!(p.batch_size, 6);
        // σ² = 256·100·ln(2.5e7)·12.2061/1e6 = 256·100·17.0344·12.2061/1e6 = 5.32283.
        // V_X² = 4/(MK) + dσ²/M = 4/60 + 5.32283 = 5.38949; λ = V/(D√R) = 2.32153/20 = 0.116076.
        assert!(
            close(p.variance.unwrap(), 5.38949, 1e-5),
            "{:?}",
            p.variance
        );
        assert!(close(p.lambda, 0.116076, 1e-5), "{}", p.lambda);
        // Thm F.2 convex smoothing: β = εn√M L/(√d D) = 1000·3.16228/(3.16228·2) = 500.
        inp.overrides = Overrides::default();
        assert!(close(smoothing_rule(&inp).unwrap(), 500.0, 1e-12));
        // Thm F.2 strongly convex: β = μMε²n²/d = 0.1·10·1e6/10 = 1e5.
        inp.constants.strong_convexity = Some(0.1);
        assert!(close(smoothing_rule(&inp).unwrap(), 1e5, 1e-12));
        // Thm D.2 convex: bound = (LD/√M)(1/√n + √(d ln(1/δ))/(εn))
        //   = (2/3.16228)(0.0316228 + 10.7298/1000) = 0.632456·0.0423526 = 0.0267862; β = 37.333.
        let mut inp = base(Setting::MbSgd);
        assert!(close(smoothing_rule(&inp).unwrap(), 37.3327, 1e-4));
        // Thm D.2 strongly convex: β = μM/(1/n + d ln(1/δ)/(ε²n²)) = 1/(1e-3 + 1.15129e-4) = 896.757.
        inp.constants.strong_convexity = Some(0.1);
        assert!(close(smoothing_rule(&inp).unwrap(), 896.757, 1e-5));
        inp.setting = Setting::OnePass;
        assert!(smoothing_rule(&inp).is_err());
    }

    #[test]
    fn missing_constants_are_named() {
        let mut inp = base(Setting::MbSgd);
        inp.constants.smoothness = None;
        let e = theory_params(&inp).unwrap_err().to_string();
        assert!(e.contains("algorithm.constants.smoothness"), "{e}");
        let mut inp = base(Setting::OnePass);
        inp.constants.diameter = None;
        let e = theory_params(&inp).unwrap_err().to_string();
        assert!(e.contains("algorithm.constants.diameter"), "{e}");
        inp.projection_diameter = 2.0;
        assert!(theory_params(&inp).is_ok());
        let mut inp = base(Setting::Erm);
        inp.constants.strong_convexity = Some(0.5);
        inp.overrides.rounds = Some(10);
        let e = theory_params(&inp).unwrap_err().to_string();
        assert!(e.contains("algorithm.constants.gap"), "{e}");
        // Explicit values override: no β needed when the step size and R are given.
        let mut inp = base(Setting::MbSgd);
        inp.constants = Constants::default();
        inp.overrides.rounds = Some(50);
        inp.overrides.step_size = Some(0.1);
        assert_eq!(theory_params(&inp).unwrap().step_size, Some(0.1));
    }
}
