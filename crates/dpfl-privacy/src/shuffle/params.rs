//! Parameter calculators for P1D (Cheu, Joseph, Mao & Peng 2022, Algorithm 1, Lemma 3.1/A.2)
//! and PVEC (Algorithm 2, Theorem 3.2/A.6); digest §2.1–2.3 and §5.1 item 1.
//!
//! Decisions on the digest's open points (§5.2):
//! * **g condition (item 7):** g ≥ Δ√n with Δ the scalar range (Δ = 2Δ₂ inside PVEC), as
//!   both the OCR and the proof read. [`Scale::Unit`] runs PVEC on x/Δ₂ with Δ₂ = 1 and
//!   multiplies the output by Δ₂ (the paper's scaling trick), so s does not grow with Δ₂ and
//!   the rounding variance scales with Δ₂² too. [`Scale::Paper`] keeps Δ₂ as given.
//! * **Choice of s (item 8):** the smallest admissible integer,
//!   s = ⌊180 g² ln(2/δ̂)/(ε̂² n)⌋ + 1, which puts p just below ½; E[noise ones] = s·n·p does
//!   not depend on s.
//! * **Standalone P1D:** besides g ≥ Δ√n we enforce g ≥ ⌈ε/2.5⌉ so that α = ε/(3g) stays in
//!   the range where ln((1+α)/(1−α)) ≤ 3α (digest §2.1 caveat); PVEC checks α ≤ 0.85.
//! * **Constants:** paper-faithful (ε̂ = ε/(18√ln(1/γ)), 180, 90). No "tight" mode.

use crate::error::PrivacyError;

use super::{Result, ShuffleError};

/// Lemma 3.1 needs ε ≤ 15 (αmp ≥ 2t uses it).
pub const MAX_EPSILON: f64 = 15.0;

/// P1D parameters for one call over `n` users with inputs in [0, `range`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct P1dParams {
    /// Users in the call (the paper's n; the batch size B inside an optimizer).
    pub n: u64,
    /// Δ: inputs lie in [0, Δ].
    pub range: f64,
    /// Fixed-point granularity g.
    pub g: u64,
    /// Noise bits per user s (the paper's b).
    pub s: u64,
    /// Probability of each noise bit, in (0, ½).
    pub p: f64,
}

impl P1dParams {
    /// Parameters given directly (tests, custom protocols). No privacy claim is attached;
    /// only the protocol's own constraints are checked: n, g, s ≥ 1, Δ > 0, p ∈ (0, ½), and
    /// that g + s and n·(g + s) fit in u64 (the analyzer counts up to n·(g + s) ones).
    pub fn new(n: u64, range: f64, g: u64, s: u64, p: f64) -> Result<Self> {
        if n == 0 {
            return Err(PrivacyError::invalid("n", 0.0, "need at least one user").into());
        }
        if !(range.is_finite() && range > 0.0) {
            return Err(PrivacyError::invalid("range", range, "must be finite and > 0").into());
        }
        if g == 0 || s == 0 {
            return Err(PrivacyError::invalid(
                if g == 0 { "g" } else { "s" },
                0.0,
                "must be at least 1",
            )
            .into());
        }
        if !(p > 0.0 && p < 0.5) {
            return Err(PrivacyError::invalid("p", p, "must lie in (0, 1/2)").into());
        }
        let per_user = g.checked_add(s).ok_or_else(|| ShuffleError::Overflow {
            what: "g + s",
            detail: format!("g = {g}, s = {s}"),
        })?;
        per_user
            .checked_mul(n)
            .ok_or_else(|| ShuffleError::Overflow {
                what: "n·(g + s)",
                detail: format!("n = {n}, g + s = {per_user}"),
            })?;
        Ok(P1dParams { n, range, g, s, p })
    }

    /// Lemma 3.1: parameters that make P1D (ε, δ)-shuffle-DP per unit of |x − x'|/Δ (the
    /// per-instance bound ε·(2/g + |x_u − x'_u|/Δ)). Needs 0 < ε ≤ 15, 0 < δ < ½.
    pub fn calibrate(n: u64, range: f64, epsilon: f64, delta: f64) -> Result<Self> {
        check_eps_delta(epsilon, delta)?;
        if n == 0 {
            return Err(PrivacyError::invalid("n", 0.0, "need at least one user").into());
        }
        if !(range.is_finite() && range > 0.0) {
            return Err(PrivacyError::invalid("range", range, "must be finite and > 0").into());
        }
        let g_real = (range * (n as f64).sqrt()).max(epsilon / 2.5).max(1.0);
        let g = to_u64("g", g_real.ceil())?;
        let (s, p) = noise_bits(n, g, epsilon, delta)?;
        Self::new(n, range, g, s, p)
    }

    /// g + s: messages (bits) per user.
    pub fn bits_per_user(&self) -> u64 {
        self.g + self.s
    }

    /// Var of the analyzer's estimate given Σ_i r_i(1 − r_i) of the inputs' rounding
    /// fractions r_i = frac(x_i g/Δ): (Δ/g)²·(Σ r_i(1−r_i) + s·n·p(1−p)) (digest §2.1).
    pub fn variance(&self, rounding: f64) -> f64 {
        let scale = self.range / self.g as f64;
        scale * scale * (rounding + self.noise_variance_units())
    }

    /// The worst case of [`Self::variance`] over inputs (r(1−r) ≤ ¼):
    /// (Δ/g)²·(n/4 + s·n·p(1−p)).
    pub fn variance_bound(&self) -> f64 {
        self.variance(self.n as f64 / 4.0)
    }

    /// s·n·p(1−p): the variance of the noise count, in bits.
    fn noise_variance_units(&self) -> f64 {
        (self.s as f64) * (self.n as f64) * self.p * (1.0 - self.p)
    }
}

/// How PVEC treats the ℓ₂ bound (decision on digest §5.2 item 7).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub enum Scale {
    /// Δ₂ as given: g ≥ 2Δ₂√n, range 2Δ₂.
    Paper,
    /// Inputs divided by Δ₂, the protocol run with Δ₂ = 1, the output multiplied by Δ₂.
    Unit,
}

/// Which rule chose a calibrated PVEC's noise bits.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum PvecRule {
    /// Theorem 3.2's constants (the paper's rule; kept for reproduction).
    #[default]
    Paper,
    /// The fewest bits meeting (ε, δ) by the exact-sum accountant
    /// (`dpfl_privacy::shuffle::pvec_exact`, issue 32).
    Accountant,
}

/// What a calibrated PVEC's parameters were derived from (Theorem 3.2's proof, or the
/// accountant of [`super::pvec_exact`]; γ, δ̂, ε̂ are 0 under the latter).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PvecCalibration {
    /// The target ε of Theorem 3.2 (0 < ε ≤ 15) for one PVEC call.
    pub epsilon: f64,
    /// The target δ of Theorem 3.2 (0 < δ < ½): d·δ̂ + γ.
    pub delta: f64,
    /// γ = δ/(d+1), the slack of Lemma 3.3.
    pub gamma: f64,
    /// δ̂ = δ/(d+1), each coordinate's δ.
    pub delta_hat: f64,
    /// ε̂ = ε/(18√ln(1/γ)), each coordinate's unit ε.
    pub epsilon_hat: f64,
    /// The rule that chose the parameters (older plans have none: the paper's).
    #[serde(default)]
    pub rule: PvecRule,
}

/// PVEC parameters: d independent P1D instances over the shifted coordinates.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PvecParams {
    /// The common per-coordinate P1D parameters (range 2Δ₂, or 2 at unit scale).
    pub p1d: P1dParams,
    /// The dimension: the number of coordinates, hence of independent P1D instances and of
    /// message labels.
    pub d: usize,
    /// Δ₂: the ℓ₂ bound of each input (inputs are clipped to it).
    pub l2_bound: f64,
    /// Whether the protocol runs at Δ₂ as given or at unit scale (digest §5.2 item 7).
    pub scale: Scale,
    /// The (ε, δ) target and derived γ, δ̂, ε̂ when the parameters came from
    /// [`PvecParams::calibrate`]; `None` for hand-set parameters.
    pub calibration: Option<PvecCalibration>,
}

impl PvecParams {
    /// Theorem 3.2: (ε, δ)-shuffle-DP summation of n vectors in R^d of ℓ₂ norm ≤ Δ₂.
    /// Errors: ε ∉ (0, 15], δ ∉ (0, ½), n or d zero, Δ₂ not finite and > 0, g or s beyond u64,
    /// and (never expected, but checked) p ≥ ½, α = ε̂/(3g) > 0.85 or a composed ε above ε.
    pub fn calibrate(
        n: u64,
        d: usize,
        l2_bound: f64,
        epsilon: f64,
        delta: f64,
        scale: Scale,
    ) -> Result<Self> {
        check_eps_delta(epsilon, delta)?;
        if d == 0 {
            return Err(PrivacyError::invalid("d", 0.0, "need at least one coordinate").into());
        }
        if n == 0 {
            return Err(PrivacyError::invalid("n", 0.0, "need at least one user").into());
        }
        check_l2(l2_bound)?;
        let gamma = delta / (d as f64 + 1.0);
        let delta_hat = gamma;
        let epsilon_hat = epsilon / (18.0 * (1.0 / gamma).ln().sqrt());
        let eff = effective_l2(l2_bound, scale);
        let g_real = (2.0 * eff * (n as f64).sqrt())
            .max((d as f64).sqrt())
            .max(4.0);
        let g = to_u64("g", g_real.ceil())?;
        let (s, p) = noise_bits(n, g, epsilon_hat, delta_hat)?;
        let p1d = P1dParams::new(n, 2.0 * eff, g, s, p)?;
        let alpha = epsilon_hat / (3.0 * g as f64);
        if alpha > 0.85 {
            return Err(PrivacyError::OutsideValidity {
                formula: "PVEC (Cheu et al. Lemma A.1)",
                reason: format!("alpha = eps_hat/(3g) = {alpha} > 0.85"),
            }
            .into());
        }
        let params = PvecParams {
            p1d,
            d,
            l2_bound,
            scale,
            calibration: Some(PvecCalibration {
                epsilon,
                delta,
                gamma,
                delta_hat,
                epsilon_hat,
                rule: PvecRule::Paper,
            }),
        };
        let composed = params.composed_epsilon().unwrap_or(f64::INFINITY);
        if composed.is_nan() || composed > epsilon {
            return Err(PrivacyError::OutsideValidity {
                formula: "PVEC (Cheu et al. Theorem 3.2)",
                reason: format!("composed epsilon {composed} exceeds the target {epsilon}"),
            }
            .into());
        }
        Ok(params)
    }

    /// PVEC with P1D parameters given directly (tests, small explicit-mode instances); no
    /// privacy claim is attached.
    pub fn with_p1d(
        n: u64,
        d: usize,
        l2_bound: f64,
        scale: Scale,
        g: u64,
        s: u64,
        p: f64,
    ) -> Result<Self> {
        if d == 0 {
            return Err(PrivacyError::invalid("d", 0.0, "need at least one coordinate").into());
        }
        check_l2(l2_bound)?;
        let p1d = P1dParams::new(n, 2.0 * effective_l2(l2_bound, scale), g, s, p)?;
        Ok(PvecParams {
            p1d,
            d,
            l2_bound,
            scale,
            calibration: None,
        })
    }

    /// The ℓ₂ bound the protocol runs with: Δ₂, or 1 at unit scale.
    pub fn protocol_l2(&self) -> f64 {
        effective_l2(self.l2_bound, self.scale)
    }

    /// The factor the analyzer's output is multiplied by: 1, or Δ₂ at unit scale.
    pub fn output_factor(&self) -> f64 {
        match self.scale {
            Scale::Paper => 1.0,
            Scale::Unit => self.l2_bound,
        }
    }

    /// One-bit messages per user: d·(g + s) (checked against u64).
    pub fn messages_per_user(&self) -> Result<u64> {
        (self.d as u64)
            .checked_mul(self.p1d.bits_per_user())
            .ok_or_else(|| ShuffleError::Overflow {
                what: "d·(g + s)",
                detail: format!("d = {}, g + s = {}", self.d, self.p1d.bits_per_user()),
            })
    }

    /// E‖PVEC(X) − Σx_i‖² ≤ d·(Δ/g)²·(n/4 + s·n·p(1−p))·factor², the exact worst case over
    /// inputs of the per-coordinate variance (digest §2.2, §3.2), in output units.
    pub fn variance_bound(&self) -> f64 {
        let f = self.output_factor();
        self.d as f64 * self.p1d.variance_bound() * f * f
    }

    /// The closed form of Theorem 3.2 as rebuilt in the digest (§2.2):
    /// d/4 + 116640·d·Δ₂²·ln(2(d+1)/δ)·ln((d+1)/δ)/ε², with Δ₂ the protocol's bound and the
    /// result in output units; `None` for uncalibrated parameters. Always ≥
    /// [`Self::variance_bound`] up to rounding of g and s. `None` under the accountant rule.
    pub fn theorem_variance_bound(&self) -> Option<f64> {
        let c = self.calibration.filter(|c| c.rule == PvecRule::Paper)?;
        let d = self.d as f64;
        let l2 = self.protocol_l2();
        let f = self.output_factor();
        let v = d / 4.0
            + 116_640.0
                * d
                * l2
                * l2
                * (2.0 * (d + 1.0) / c.delta).ln()
                * ((d + 1.0) / c.delta).ln()
                / (c.epsilon * c.epsilon);
        Some(v * f * f)
    }

    /// Lemma 3.3's worst-case composed ε for the chosen parameters, 18ε̂² + 6ε̂√ln(1/γ)
    /// (digest §2.2: Σ_j ε_j² ≤ 9ε̂² and ε_j(e^{ε_j} − 1) ≤ 2ε_j²); `None` if uncalibrated or
    /// calibrated by the accountant.
    pub fn composed_epsilon(&self) -> Option<f64> {
        let c = self.calibration.filter(|c| c.rule == PvecRule::Paper)?;
        let e = c.epsilon_hat;
        Some(18.0 * e * e + 6.0 * e * (1.0 / c.gamma).ln().sqrt())
    }
}

fn check_eps_delta(epsilon: f64, delta: f64) -> Result<()> {
    if !(epsilon > 0.0 && epsilon <= MAX_EPSILON) {
        return Err(PrivacyError::invalid(
            "epsilon",
            epsilon,
            "Cheu et al. Lemma 3.1 / Theorem 3.2 need 0 < epsilon <= 15",
        )
        .into());
    }
    if !(delta > 0.0 && delta < 0.5) {
        return Err(PrivacyError::invalid(
            "delta",
            delta,
            "Cheu et al. Lemma 3.1 / Theorem 3.2 need 0 < delta < 1/2",
        )
        .into());
    }
    Ok(())
}

fn check_l2(l2_bound: f64) -> Result<()> {
    if !(l2_bound.is_finite() && l2_bound > 0.0) {
        return Err(PrivacyError::invalid("l2_bound", l2_bound, "must be finite and > 0").into());
    }
    Ok(())
}

fn effective_l2(l2_bound: f64, scale: Scale) -> f64 {
    match scale {
        Scale::Paper => l2_bound,
        Scale::Unit => 1.0,
    }
}

/// Lemma 3.1's s (smallest integer above 180g²ln(2/δ)/(ε²n)) and p = 90g²ln(2/δ)/(s ε² n).
fn noise_bits(n: u64, g: u64, epsilon: f64, delta: f64) -> Result<(u64, f64)> {
    let gf = g as f64;
    let mass = 90.0 * gf * gf * (2.0 / delta).ln() / (epsilon * epsilon * n as f64);
    let s = to_u64("s", (2.0 * mass).floor() + 1.0)?;
    let p = mass / s as f64;
    if !(p > 0.0 && p < 0.5) {
        return Err(PrivacyError::invalid("p", p, "calibrated p must lie in (0, 1/2)").into());
    }
    Ok((s, p))
}

fn to_u64(what: &'static str, x: f64) -> Result<u64> {
    // 2⁶⁴ as f64 is exact; anything at or above it (or NaN) does not fit.
    if !(0.0..18_446_744_073_709_551_616.0).contains(&x) {
        return Err(ShuffleError::Overflow {
            what,
            detail: format!("{what} = {x:e}"),
        });
    }
    Ok(x as u64)
}
