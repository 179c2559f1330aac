//! The discretised PLD itself: construction on the grid i·h (connect-the-dots from a
//! hockey-stick curve, atoms split pessimistically between grid points), the exact discrete
//! Laplace and discrete Gaussian PMFs, and the δ(ε) / ε(δ) queries. Composition is in
//! [`super::compose`].

use super::compose::{Grow, Sized};
use super::{MAX_ATOMS, MAX_BINS};
use crate::accountant::special::round_up;
use crate::error::{PrivacyError, Result};

/// A discrete privacy loss distribution on the grid i·h, i ≥ `lower`.
#[derive(Debug, Clone)]
pub struct Pmf {
    pub(super) h: f64,
    pub(super) lower: i64,
    pub(super) probs: Vec<f64>,
    pub(super) infinity: f64,
}

impl Pmf {
    /// The mass at +∞.
    pub fn infinity_mass(&self) -> f64 {
        self.infinity
    }

    /// Number of grid points.
    pub fn len(&self) -> usize {
        self.probs.len()
    }

    /// Whether the PMF has no finite grid points (all its mass, if any, at +∞).
    pub fn is_empty(&self) -> bool {
        self.probs.is_empty()
    }

    /// The pessimistic PMF of a pair whose hockey-stick curve at i·h, i = `lower`.., is
    /// `deltas` (the curve must be convex in e^ε; see [`Self::connect_dots`]). The hook other
    /// accountant modules build their PLDs through (e.g. [`super::sampled_pld`]).
    pub fn from_hockey_stick(h: f64, lower: i64, deltas: Vec<f64>) -> Result<Pmf> {
        Pmf::connect_dots(h, lower, deltas)
    }

    /// A PMF from its masses at i·h, i = `lower`.., and at +∞ (masses finite, ≥ 0, total ≤ 1;
    /// a total below 1 drops losses, which is only right for lower bounds).
    pub fn from_masses(h: f64, lower: i64, probs: Vec<f64>, infinity: f64) -> Result<Pmf> {
        let total: f64 = probs.iter().sum::<f64>() + infinity;
        // Each check is written so that a NaN fails it.
        let valid = h.is_finite()
            && h > 0.0
            && !probs.is_empty()
            && probs.iter().all(|p| p.is_finite() && *p >= 0.0)
            && (0.0..=1.0).contains(&infinity)
            && total <= 1.0 + 1e-9;
        if !valid {
            return Err(PrivacyError::Numerical {
                context: "PLD from masses",
                reason: format!("invalid PMF (h = {h}, total mass {total})"),
            });
        }
        Ok(Pmf {
            h,
            lower,
            probs,
            infinity,
        })
    }

    /// Connect-the-dots PMF from the hockey-stick values δ(i·h), i = lo..=hi (Doroshenko et
    /// al. 2022, Alg. 1; fixed-gap formulas of `dp_accounting`'s
    /// `create_pmf_pessimistic_connect_dots_fixed_gap`).
    pub(super) fn connect_dots(h: f64, lo: i64, deltas: Vec<f64>) -> Result<Pmf> {
        let n = deltas.len();
        if n == 0 {
            return Err(PrivacyError::Numerical {
                context: "PLD discretisation",
                reason: "empty grid".into(),
            });
        }
        // δ is non-increasing in ε; enforce it against round-off by a running minimum (which
        // only lowers later values that were numerically above earlier ones).
        let mut d = deltas;
        for i in 1..n {
            if d[i] > d[i - 1] {
                d[i] = d[i - 1];
            }
        }
        for &x in &d {
            if !(0.0..=1.0).contains(&x) {
                return Err(PrivacyError::Numerical {
                    context: "PLD discretisation",
                    reason: format!("hockey-stick value {x} outside [0, 1]"),
                });
            }
        }
        if n == 1 {
            return Ok(Pmf {
                h,
                lower: lo,
                probs: vec![1.0 - d[0]],
                infinity: d[0],
            });
        }
        let em1 = h.exp_m1();
        let e = h.exp();
        let mut probs = vec![0.0; n];
        probs[0] = 1.0 - d[0] + (d[1] - d[0]) / em1;
        for i in 1..n - 1 {
            probs[i] = ((d[i + 1] - d[i]) - e * (d[i] - d[i - 1])) / em1;
        }
        probs[n - 1] = (d[n - 1] - d[n - 2]) / (-h).exp_m1();
        for p in &mut probs {
            *p = p.max(0.0);
        }
        Ok(Pmf {
            h,
            lower: lo,
            probs,
            infinity: d[n - 1],
        })
    }

    /// PMF of the dominating pair of an (ε, δ)-DP mechanism (Kairouz, Oh & Viswanath 2015):
    /// losses ε w.p. (1−δ)/(1+e^{−ε}), −ε w.p. (1−δ)/(1+e^ε) and +∞ w.p. δ, discretised by
    /// [`Pmf::from_atoms`] (exact when ε is a multiple of h).
    pub(super) fn eps_delta(h: f64, eps: f64, delta: f64, max_bins: usize) -> Sized<Pmf> {
        // Without forming e^ε (inf past 709.78).
        let a = (1.0 - delta) / (1.0 + (-eps).exp());
        let b = (1.0 - delta) / (1.0 + eps.exp());
        Pmf::from_atoms_within(h, &[(eps, a), (-eps, b)], delta, max_bins)
    }

    /// The pessimistic PMF on the grid i·h of a PLD given by its atoms (loss ℓ, mass p) and
    /// its mass at +∞ (atoms at −∞ may be left out: they never contribute to δ(ε)).
    ///
    /// Each atom between grid points ℓ_i ≤ ℓ < ℓ_{i+1} is split between them so that
    /// E[e^{−L}] is kept and δ(ε) is unchanged at every grid point: mass
    /// p·(1 − e^{ℓ_i − ℓ})/(1 − e^{−h}) goes to ℓ_{i+1}, the rest to ℓ_i. Between grid
    /// points δ is then linear in e^ε, above the true (convex in e^ε) curve: this is the
    /// "connect the dots" discretisation of Doroshenko et al. 2022 (Alg. 1) applied to a
    /// discrete PLD. Atoms on the grid are kept as they are (so a loss that is a multiple of
    /// h costs nothing), which rounding every loss up would not do.
    pub fn from_atoms(h: f64, atoms: &[(f64, f64)], infinity: f64) -> Result<Pmf> {
        Pmf::from_atoms_within(h, atoms, infinity, MAX_BINS).map_err(Grow::into_error)
    }

    pub(super) fn from_atoms_within(
        h: f64,
        atoms: &[(f64, f64)],
        infinity: f64,
        max_bins: usize,
    ) -> Sized<Pmf> {
        let fail = |reason: String| {
            Grow::Fail(PrivacyError::Numerical {
                context: "PLD discretisation",
                reason,
            })
        };
        if !(h.is_finite() && h > 0.0) {
            return Err(Grow::Fail(PrivacyError::invalid(
                "discretization",
                h,
                "must be finite and > 0",
            )));
        }
        if !(0.0..=1.0).contains(&infinity) {
            return Err(fail(format!("mass at infinity {infinity}")));
        }
        let mut inf = infinity;
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for &(l, p) in atoms {
            if !(p.is_finite() && p >= 0.0) || l.is_nan() {
                return Err(fail(format!("atom ({l}, {p})")));
            }
            if l.is_finite() && p > 0.0 {
                let t = (l / h).floor();
                // Beyond 2^50 grid steps t + 1 is no longer exact in f64 (and the bins would not
                // fit anyway): a loss that large means the noise is far too small to account
                // on a grid (issue 27: the discrete Gaussian at z = 1e-9 panicked here).
                if t.abs() > (1u64 << 50) as f64 {
                    return Err(Grow::Fail(PrivacyError::invalid(
                        "noise_multiplier",
                        l,
                        format!(
                            "the privacy loss reaches {l:e}, beyond what a PLD grid of width {h} can hold: the noise is too small for the PLD accountant (the release is essentially not private)"
                        ),
                    )));
                }
                lo = lo.min(t);
                hi = hi.max(t + 1.0);
            }
        }
        if lo > hi {
            // Only atoms at ±∞.
            lo = 0.0;
            hi = 0.0;
        }
        let n = hi - lo + 1.0;
        if n > max_bins as f64 {
            return Err(Grow::Bins(n.min(usize::MAX as f64) as usize));
        }
        let lower = lo as i64;
        let mut probs = vec![0.0; n as usize];
        let em1 = -(-h).exp_m1();
        for &(l, p) in atoms {
            if p == 0.0 || l == f64::NEG_INFINITY {
                continue;
            }
            if l == f64::INFINITY {
                inf += p;
                continue;
            }
            let t = l / h;
            let i = t.floor();
            let frac = ((t - i) * h).max(0.0);
            let up = (-(-frac).exp_m1() / em1).clamp(0.0, 1.0);
            let k = (i as i64 - lower) as usize;
            probs[k] += p * (1.0 - up);
            probs[k + 1] += p * up;
        }
        let pmf = Pmf {
            h,
            lower,
            probs,
            infinity: inf.min(1.0),
        };
        pmf.check("PLD discretisation")?;
        Ok(pmf)
    }

    /// The exact PLD of the discrete Laplace mechanism with P(x) ∝ e^{−a|x|} on ℤ and integer
    /// sensitivity Δ (Ghosh, Roughgarden & Sundararajan 2012), pessimistically discretised
    /// ([`Pmf::from_atoms`]). With ε₀ = aΔ the loss a(|x − Δ| − |x|) is ε₀ for x ≤ 0
    /// (mass 1/(1 + e^{−a})), −ε₀ for x ≥ Δ (mass e^{−ε₀}/(1 + e^{−a})) and a(Δ − 2x) with
    /// mass tanh(a/2)·e^{−ax} for 0 < x < Δ; the PLD is the same in both directions.
    pub fn discrete_laplace(h: f64, parameter: f64, sensitivity: u64) -> Result<Pmf> {
        Pmf::discrete_laplace_within(h, parameter, sensitivity, MAX_BINS).map_err(Grow::into_error)
    }

    pub(super) fn discrete_laplace_within(
        h: f64,
        a: f64,
        sensitivity: u64,
        max_bins: usize,
    ) -> Sized<Pmf> {
        if !(a.is_finite() && a > 0.0) {
            return Err(Grow::Fail(PrivacyError::invalid(
                "parameter",
                a,
                "must be finite and > 0",
            )));
        }
        if sensitivity == 0 || sensitivity > MAX_BINS as u64 {
            return Err(Grow::Fail(PrivacyError::invalid(
                "sensitivity",
                sensitivity as f64,
                format!("must lie in [1, {MAX_BINS}]"),
            )));
        }
        let d = sensitivity as f64;
        // 1/(1 + e^{−a}) and e^{−aΔ}/(1 + e^{−a}) without overflow.
        let lse = (-a).exp().ln_1p();
        let mut atoms = Vec::with_capacity(sensitivity as usize + 1);
        atoms.push((a * d, (-lse).exp()));
        atoms.push((-a * d, (-a * d - lse).exp()));
        let th = (a / 2.0).tanh();
        for x in 1..sensitivity {
            let x = x as f64;
            atoms.push((a * (d - 2.0 * x), th * (-a * x).exp()));
        }
        Pmf::from_atoms_within(h, &atoms, 0.0, max_bins)
    }

    /// The exact PLD of the discrete Gaussian mechanism, noise P(x) ∝ e^{−x²/(2σ²)} on ℤ and
    /// integer sensitivity Δ (Canonne, Kamath & Steinke 2020), pessimistically discretised
    /// ([`Pmf::from_atoms`]), as `dp_accounting`'s `DiscreteGaussianPrivacyLoss`. The loss at
    /// x ~ P is ((x − Δ)² − x²)/(2σ²) = (Δ² − 2xΔ)/(2σ²), the same law in both directions
    /// by symmetry. x is enumerated over |x| ≤ B = ⌈11.6σ⌉ + Δ (dp_accounting's bound, mass
    /// beyond < 1e-30 by CKS Prop. 1); the mass beyond B, summed exactly, is put at +∞.
    /// The normaliser is summed over every x whose weight is a normal f64.
    pub fn discrete_gaussian(h: f64, sigma: f64, sensitivity: u64) -> Result<Pmf> {
        Pmf::discrete_gaussian_within(h, sigma, sensitivity, MAX_BINS).map_err(Grow::into_error)
    }

    pub(super) fn discrete_gaussian_within(
        h: f64,
        sigma: f64,
        sensitivity: u64,
        max_bins: usize,
    ) -> Sized<Pmf> {
        if !(sigma.is_finite() && sigma > 0.0) {
            return Err(Grow::Fail(PrivacyError::invalid(
                "sigma",
                sigma,
                "must be finite and > 0",
            )));
        }
        // Weights e^{−x²/(2σ²)} are below e^{−745} (0 in f64) beyond 38.6σ.
        let x_max = (38.6 * sigma).ceil() + sensitivity as f64;
        let b = (11.6 * sigma).ceil() + sensitivity as f64;
        if sensitivity == 0 || 2.0 * x_max + 1.0 > MAX_ATOMS as f64 {
            return Err(Grow::Fail(PrivacyError::invalid(
                "sigma",
                sigma,
                format!(
                    "discrete Gaussian with sensitivity {sensitivity} needs {} atoms (limit \
                     {MAX_ATOMS})",
                    2.0 * x_max + 1.0
                ),
            )));
        }
        let (x_max, b) = (x_max as i64, b as i64);
        let s2 = 2.0 * sigma * sigma;
        let logw = |x: i64| -((x as f64) * (x as f64)) / s2;
        // log Z by a shifted sum (the largest term is x = 0, weight 1).
        let z: f64 = (-x_max..=x_max).map(|x| logw(x).exp()).sum();
        let log_z = z.ln();
        let d = sensitivity as f64;
        let mut atoms = Vec::with_capacity((2 * b + 1) as usize);
        for x in -b..=b {
            let p = (logw(x) - log_z).exp();
            atoms.push(((d * d - 2.0 * x as f64 * d) / s2, p));
        }
        let tail: f64 = (b + 1..=x_max).map(|x| 2.0 * (logw(x) - log_z).exp()).sum();
        Pmf::from_atoms_within(h, &atoms, round_up(tail).min(1.0), max_bins)
    }

    /// δ(ε) = P(∞) + Σ_{ℓ > ε} p_ℓ (1 − e^{ε−ℓ}), rounded up.
    pub fn delta_for_epsilon(&self, eps: f64) -> f64 {
        let mut s = self.infinity;
        for (i, &p) in self.probs.iter().enumerate() {
            let l = (self.lower + i as i64) as f64 * self.h;
            if l > eps {
                s += p * -(eps - l).exp_m1();
            }
        }
        round_up(s).min(1.0)
    }

    /// The smallest ε with δ(ε) ≤ `delta` for this discrete PLD (solved exactly between grid
    /// points, as `dp_accounting`'s `_get_epsilon_for_delta`). Errors if the mass at +∞
    /// alone exceeds δ, or if any intermediate value is not finite.
    ///
    /// Computed without ever forming e^{ℓ} or e^{−ℓ} (which overflow or underflow once
    /// |ℓ| > 709, and whose product inf·0 = NaN once read "δ met" and returned ε ≈ 0): the
    /// running sum W = Σ_{ℓ ≥ ℓ_j} p_ℓ e^{ℓ_a − ℓ} is kept relative to an anchor grid point
    /// ℓ_a ≥ ℓ_j that is moved down whenever ℓ_a − ℓ_j exceeds 1, so every factor lies in
    /// [e^{−1−h}, e^{1}] and W ≤ e·Σp.
    pub fn epsilon_for_delta(&self, delta: f64) -> Result<f64> {
        let fail = |reason: String| PrivacyError::Numerical {
            context: "PLD epsilon",
            reason,
        };
        if !(0.0..=1.0).contains(&delta) {
            return Err(PrivacyError::invalid("delta", delta, "must lie in [0, 1]"));
        }
        self.check("PLD epsilon")?;
        if self.infinity > delta {
            return Err(fail(format!(
                "mass at infinite loss {} exceeds delta {delta}",
                self.infinity
            )));
        }
        let h = self.h;
        let n = self.probs.len();
        // On (ℓ_{j−1}, ℓ_j], δ(ε) = U − e^{ε − ℓ_a}·W with U = P(∞) + Σ_{ℓ ≥ ℓ_j} p.
        let (mut u, mut w) = (self.infinity, 0.0f64);
        let mut anchor = n as i64 - 1;
        for j in (0..n).rev() {
            let ji = j as i64;
            if (anchor - ji) as f64 * h > 1.0 {
                w *= (-((anchor - ji) as f64) * h).exp();
                anchor = ji;
            }
            let p = self.probs[j];
            if p > 0.0 {
                u += p;
                w += p * ((anchor - ji) as f64 * h).exp();
            }
            let lj = (self.lower + ji) as f64 * h;
            let next = lj - h;
            // δ(next) = U − e^{next − ℓ_a} W, next − ℓ_a ∈ [−1 − h, −h].
            let d_next = u - ((ji - 1 - anchor) as f64 * h).exp() * w;
            if !(d_next.is_finite() && u.is_finite() && w.is_finite()) {
                return Err(fail(format!("non-finite running sums at loss {lj}")));
            }
            if d_next > delta {
                // The crossing is in (next, ℓ_j]: solve U − e^{ε − ℓ_a} W = δ.
                let la = (self.lower + anchor) as f64 * h;
                let eps = if w > 0.0 {
                    la + ((u - delta) / w).ln()
                } else {
                    lj
                };
                if !eps.is_finite() {
                    return Err(fail(format!("non-finite epsilon near loss {lj}")));
                }
                return Ok(eps.clamp(next, lj).max(0.0));
            }
        }
        // δ(ε) ≤ δ even at the lowest loss: any ε ≥ 0 will do (δ(ε) ≤ δ(lowest)).
        Ok(0.0)
    }

    /// Fails unless every mass is finite and ≥ 0 and the mass at +∞ lies in [0, 1]: a NaN
    /// must never reach a comparison with δ.
    pub(super) fn check(&self, context: &'static str) -> Result<()> {
        let fail = |reason: String| PrivacyError::Numerical { context, reason };
        if !(self.h.is_finite() && self.h > 0.0) {
            return Err(fail(format!("grid width {}", self.h)));
        }
        if !(0.0..=1.0).contains(&self.infinity) {
            return Err(fail(format!("mass at infinity {}", self.infinity)));
        }
        let mut total = self.infinity;
        for (i, &p) in self.probs.iter().enumerate() {
            if !(p.is_finite() && p >= 0.0) {
                return Err(fail(format!(
                    "mass {p} at grid index {}",
                    self.lower + i as i64
                )));
            }
            total += p;
        }
        // Round-off clamped to zero adds mass (≈1e-7 per step for a sampled Gaussian), which
        // only raises δ(ε); a total far above 1 means something else went wrong.
        if total.is_nan() || total > 2.0 {
            return Err(fail(format!("total mass {total}")));
        }
        Ok(())
    }
}
