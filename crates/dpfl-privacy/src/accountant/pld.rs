//! The privacy loss distribution (PLD) accountant, for tight numbers.
//!
//! A mechanism's privacy loss distribution is the law of L = log(p(X)/q(X)), X ~ P, for its
//! dominating pair (P, Q); δ(ε) = E[(1 − e^{ε−L})₊] + P(L = ∞), and composition convolves
//! PLDs (Koskela, Jälkö & Honkela 2020; Meiser & Mohammadi 2018 "privacy buckets";
//! Sommer, Meiser & Mohammadi 2019). The implementation follows Google's `dp_accounting` 0.6.0:
//!
//! * **Discretisation** on the grid ε_i = i·h (h = 1e-4): the pessimistic "connect the dots"
//!   construction of Doroshenko, Ghazi, Kamath, Kumar & Manurangsi 2022 (arXiv:2207.04380,
//!   Alg. 1, fixed-gap form): the discrete PLD's δ(ε) equals the true one at grid points and
//!   interpolates it linearly in e^ε between them. The true δ is convex in e^ε, so the
//!   discrete PLD dominates it everywhere; the mass beyond the last grid point becomes mass at
//!   +∞ (pessimistic). For mechanisms whose PLD is discrete (discrete Laplace, discrete
//!   Gaussian, (ε, δ) pairs) the same construction is applied atom by atom
//!   ([`Pmf::from_atoms`]): an atom between two grid points is split between them keeping
//!   E[e^{−L}] and δ at every grid point, rather than rounded up as privacy buckets do.
//! * **Exact hockey-stick curves** of the (Poisson-sampled) Gaussian in both directions of
//!   add/remove neighbouring (remove: P = (1−q)N(0,σ²) + qN(1,σ²) vs Q = N(0,σ²); add: the
//!   reverse), from Balle & Wang 2018 Thm 8 generalised to the mixture; Laplace (Koskela et
//!   al. 2021, closed form); any (ε, δ) event by the dominating randomised-response pair
//!   (Kairouz, Oh & Viswanath 2015, Thm 3.3 proof; Zhu, Dong & Wang 2022).
//! * **Exact discrete PLDs** ([`Pmf::discrete_laplace`], [`Pmf::discrete_gaussian`], as
//!   `dp_accounting`'s `DiscreteLaplacePrivacyLoss` / `DiscreteGaussianPrivacyLoss`): the
//!   discrete Laplace with parameter a and sensitivity Δ has losses a(Δ − 2x) ∈ {−aΔ … aΔ};
//!   the discrete Gaussian (Canonne, Kamath & Steinke 2020) has losses (Δ² − 2xΔ)/(2σ²) with
//!   the exact PMF e^{−x²/(2σ²)}/Z. The events carry only σ/Δ, so the accountant uses
//!   Δ = 1: exact for the discrete Laplace at Δ = 1 and dominating at any Δ (the pair of a
//!   pure (1/z)-DP mechanism is dominated by randomised response), and for the discrete
//!   Gaussian the scalar query on ℤ with unit sensitivity (`dp_accounting`'s default). A
//!   discrete Gaussian with Δ > 1 lattice steps, or a vector one, is *not* covered by that
//!   PLD; the rdp and zcdp accountants (Canonne et al. Thm 14, ρ = Δ²/(2σ²)) cover every Δ.
//! * **Grid choice.** When the composition contains lattice losses (±ε of a pure-DP event,
//!   1/(2σ²)-spaced losses of the discrete Gaussian) the grid width is shrunk to the largest
//!   divisor ≤ h of the smallest such spacing, so those losses sit on the grid and cost
//!   nothing: a discrete Laplace at ε₀ = 1e-6 is no longer rounded up to 1e-4 (T = 10^6 of
//!   them gave ε = 50; now the exact 0.00194). If a composition needs more than
//!   [`BIN_BUDGET`] bins the grid is coarsened until it fits: any grid is pessimistic, and
//!   its cost (about one grid step per composed leaf) is negligible next to an ε that wide.
//! * **Composition** by FFT (`realfft`): T-fold self-composition raises the spectrum to the
//!   T-th power on a window chosen by a Chernoff bound with tail mass 1e-15, and that tail mass
//!   is added to the mass at +∞ (pessimistic), exactly as `dp_accounting`'s `self_convolve`.
//!   Negative values from floating-point round-off are clamped to zero (more mass, never less).
//!   Plain Gaussians are merged first into one Gaussian of noise multiplier (Σ T_i/z_i²)^{−½}
//!   (Dong, Roth & Su 2019, Cor. 3.3); a composition of Gaussians alone is answered by the
//!   analytic Gaussian's exact curve (Balle & Wang 2018, Thm 8) without discretisation.
//! * The two directions of add/remove are composed separately and ε is their maximum.
//! * **Never under-report** (issue 11): every quantity that can pass e^{±709.78} is kept in
//!   log space — the hockey-stick curves use log(e^ε − 1 + q) = ε + log1p(−(1−q)e^{−ε}), and
//!   [`Pmf::epsilon_for_delta`] keeps its running sum relative to a moving anchor — because
//!   inf·0 = NaN and `NaN > δ` is false: that once reported ε = 5e-324 for a true 2634.78.
//!   Every PMF is checked (finite, non-negative masses) after construction and composition,
//!   and a non-finite value anywhere is a [`PrivacyError::Numerical`], never a number.
//!
//! Supported: Gaussian, Laplace, discrete Laplace, discrete Gaussian and (ε, δ) events under
//! either relation; Poisson-sampled Gaussian under add/remove-one. Everything else is refused
//! by name (`dp_accounting`'s PLD does not cover fixed-size sampling either).

use realfft::RealFftPlanner;
use realfft::num_complex::Complex;

use super::special::{log_erfc, log_sub_sign, round_up};
use super::{Leaf, effective_gaussian, leaves, unsupported};
use crate::error::{PrivacyError, Result};
use crate::event::{Neighbouring, PrivacyEvent, Sampling};
use crate::params::Delta;

const NAME: &str = "pld";

/// The grid width `dp_accounting` uses by default.
pub const DEFAULT_DISCRETIZATION: f64 = 1e-4;
/// Tail mass a self-composition may move to +∞ (`dp_accounting`'s default).
const TAIL_MASS_TRUNCATION: f64 = 1e-15;
/// Noise quantile beyond which the single-step PLD is cut (mass ≤ e^{-50}/2 per side, as
/// `dp_accounting`'s `log_mass_truncation_bound = -50`): Φ̄(9.8) ≈ 5.6e-23 < e^{-50}/2.
const NOISE_TAIL_QUANTILE: f64 = 9.8;
/// Refuse grids that would exhaust memory (direct [`Pmf::compose`] and
/// [`Pmf::self_compose`] calls).
const MAX_BINS: usize = 1 << 26;
/// Bins the accountant lets one PMF use before it coarsens the grid (2^22: FFTs of well
/// under a second and ~100 MB).
pub const BIN_BUDGET: usize = 1 << 22;
/// Atoms a discrete mechanism's PLD may enumerate.
const MAX_ATOMS: usize = 1 << 26;
/// How many times the accountant coarsens the grid before it gives up.
const COARSENINGS: usize = 8;

/// A discrete privacy loss distribution on the grid i·h, i ≥ `lower`.
#[derive(Debug, Clone)]
pub struct Pmf {
    h: f64,
    lower: i64,
    probs: Vec<f64>,
    infinity: f64,
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
    fn connect_dots(h: f64, lo: i64, deltas: Vec<f64>) -> Result<Pmf> {
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
    fn eps_delta(h: f64, eps: f64, delta: f64, max_bins: usize) -> Sized<Pmf> {
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

    fn from_atoms_within(
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

    fn discrete_laplace_within(h: f64, a: f64, sensitivity: u64, max_bins: usize) -> Sized<Pmf> {
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

    fn discrete_gaussian_within(
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
    fn check(&self, context: &'static str) -> Result<()> {
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

    /// T-fold composition by FFT on the Chernoff window (`dp_accounting`'s `self_convolve`).
    pub fn self_compose(&self, t: u64) -> Result<Pmf> {
        self.self_compose_within(t, MAX_BINS)
            .map_err(Grow::into_error)
    }

    fn self_compose_within(&self, t: u64, max_bins: usize) -> Sized<Pmf> {
        if t == 0 {
            return Err(Grow::Fail(PrivacyError::invalid(
                "count",
                0.0,
                "composition count must be >= 1",
            )));
        }
        if t == 1 {
            return Ok(self.clone());
        }
        let n = self.probs.len();
        let tf = t as f64;
        let (lo_b, hi_b) = chernoff_bounds(&self.probs, t, TAIL_MASS_TRUNCATION);
        let out_len = (hi_b - lo_b + 1) as usize;
        let fft_len = next_fast_len(out_len.max(n));
        if fft_len > max_bins {
            return Err(Grow::Bins(fft_len));
        }
        let mut planner = RealFftPlanner::<f64>::new();
        let fwd = planner.plan_fft_forward(fft_len);
        let inv = planner.plan_fft_inverse(fft_len);
        let mut buf = vec![0.0; fft_len];
        buf[..n].copy_from_slice(&self.probs);
        let mut spec = fwd.make_output_vec();
        fwd.process(&mut buf, &mut spec).map_err(fft_err)?;
        for c in spec.iter_mut() {
            // Polar power: |c|^T e^{iT·arg c}, stable for large T.
            let (r, th) = c.to_polar();
            *c = Complex::from_polar(r.powf(tf), th * tf);
        }
        // The imaginary parts of the DC and Nyquist bins must be zero for a real inverse.
        if let Some(c) = spec.first_mut() {
            c.im = 0.0;
        }
        if fft_len.is_multiple_of(2)
            && let Some(c) = spec.last_mut()
        {
            c.im = 0.0;
        }
        let mut out = inv.make_output_vec();
        inv.process(&mut spec, &mut out).map_err(fft_err)?;
        let scale = 1.0 / fft_len as f64;
        let mut probs = Vec::with_capacity(out_len);
        for k in 0..out_len {
            let idx = ((lo_b as usize) + k) % fft_len;
            probs.push((out[idx] * scale).max(0.0));
        }
        let infinity = (TAIL_MASS_TRUNCATION - (tf * (-self.infinity).ln_1p()).exp_m1()).min(1.0);
        let lower = (self.lower as i128 * t as i128 + lo_b as i128)
            .try_into()
            .map_err(|_| {
                Grow::Fail(PrivacyError::Numerical {
                    context: "PLD composition",
                    reason: "grid index overflows i64".into(),
                })
            })?;
        let out = Pmf {
            h: self.h,
            lower,
            probs,
            infinity,
        };
        out.check("PLD composition")?;
        Ok(out)
    }

    /// Composition of two PMFs on the same grid (full linear convolution by FFT).
    pub fn compose(&self, other: &Pmf) -> Result<Pmf> {
        self.compose_within(other, MAX_BINS)
            .map_err(Grow::into_error)
    }

    fn compose_within(&self, other: &Pmf, max_bins: usize) -> Sized<Pmf> {
        if self.h != other.h {
            return Err(Grow::Fail(PrivacyError::invalid(
                "discretization",
                other.h,
                format!(
                    "PMFs on different grids ({} and {}) cannot be composed",
                    self.h, other.h
                ),
            )));
        }
        let len = self.probs.len() + other.probs.len() - 1;
        let fft_len = next_fast_len(len);
        if fft_len > max_bins {
            return Err(Grow::Bins(fft_len));
        }
        let mut planner = RealFftPlanner::<f64>::new();
        let fwd = planner.plan_fft_forward(fft_len);
        let inv = planner.plan_fft_inverse(fft_len);
        let mut a = vec![0.0; fft_len];
        a[..self.probs.len()].copy_from_slice(&self.probs);
        let mut b = vec![0.0; fft_len];
        b[..other.probs.len()].copy_from_slice(&other.probs);
        let mut sa = fwd.make_output_vec();
        let mut sb = fwd.make_output_vec();
        fwd.process(&mut a, &mut sa).map_err(fft_err)?;
        fwd.process(&mut b, &mut sb).map_err(fft_err)?;
        for (x, y) in sa.iter_mut().zip(&sb) {
            *x *= *y;
        }
        if let Some(c) = sa.first_mut() {
            c.im = 0.0;
        }
        if fft_len.is_multiple_of(2)
            && let Some(c) = sa.last_mut()
        {
            c.im = 0.0;
        }
        let mut out = inv.make_output_vec();
        inv.process(&mut sa, &mut out).map_err(fft_err)?;
        let scale = 1.0 / fft_len as f64;
        let probs = out[..len].iter().map(|x| (x * scale).max(0.0)).collect();
        let infinity = (self.infinity + other.infinity - self.infinity * other.infinity).min(1.0);
        let out = Pmf {
            h: self.h,
            lower: self.lower + other.lower,
            probs,
            infinity,
        };
        out.check("PLD composition")?;
        Ok(out)
    }
}

/// Why a computation on a grid did not produce a PMF: the grid needs more bins than allowed
/// (the caller may retry on a coarser grid, which stays pessimistic), or a real failure.
#[derive(Debug)]
enum Grow {
    Bins(usize),
    Fail(PrivacyError),
}

type Sized<T> = std::result::Result<T, Grow>;

impl From<PrivacyError> for Grow {
    fn from(e: PrivacyError) -> Self {
        Grow::Fail(e)
    }
}

impl Grow {
    fn into_error(self) -> PrivacyError {
        match self {
            Grow::Fail(e) => e,
            Grow::Bins(n) => PrivacyError::Numerical {
                context: "PLD composition",
                reason: format!("{n} bins needed; use a coarser grid or the RDP accountant"),
            },
        }
    }
}

fn fft_err(e: realfft::FftError) -> PrivacyError {
    PrivacyError::Numerical {
        context: "PLD FFT",
        reason: e.to_string(),
    }
}

/// Smallest 2^a 3^b ≥ n (fast sizes for `rustfft`).
fn next_fast_len(n: usize) -> usize {
    let mut best = n.next_power_of_two();
    let mut p3 = 1usize;
    while p3 < best {
        let mut m = p3;
        while m < n {
            m *= 2;
        }
        best = best.min(m);
        p3 *= 3;
    }
    best
}

/// Index window [lo, hi] of the T-fold convolution of `probs` outside which at most
/// `tail` mass lies, by the Chernoff bound at orders ±k/len, k = 1..20 (`dp_accounting`'s
/// `compute_self_convolve_bounds`, eq. (5) of its supplementary notes) and ±2^j/(len·√T).
fn chernoff_bounds(probs: &[f64], t: u64, tail: f64) -> (i64, i64) {
    let n = probs.len();
    let mut upper = ((n - 1) as u128 * t as u128).min(i64::MAX as u128) as i64;
    let mut lower = 0i64;
    let tf = t as f64;
    // dp_accounting's orders ±k/len, k = 1..20, plus smaller ones near the optimum
    // ≈ c/(len·√T) for long compositions: any order gives a valid bound, and without them a
    // T = 10^6 composition of a 7-bin PMF got a window 25x wider than needed.
    let small = (1..=7)
        .map(|j| f64::from(1u32 << j) / (n as f64 * tf.sqrt()))
        .filter(|&o| o < 1.0 / n as f64);
    let orders: Vec<f64> = (1..=20)
        .map(|k| k as f64 / n as f64)
        .chain(small)
        .flat_map(|o| [o, -o])
        .collect();
    for order in orders {
        // log Σ p_i e^{order·i}, stably.
        let m = probs
            .iter()
            .enumerate()
            .filter(|(_, p)| **p > 0.0)
            .map(|(i, p)| p.ln() + order * i as f64)
            .fold(f64::NEG_INFINITY, f64::max);
        if !m.is_finite() {
            continue;
        }
        let s: f64 = probs
            .iter()
            .enumerate()
            .filter(|(_, p)| **p > 0.0)
            .map(|(i, p)| (p.ln() + order * i as f64 - m).exp())
            .sum();
        let log_mgf = m + s.ln();
        let bound = (tf * log_mgf + (2.0 / tail).ln()) / order;
        if !bound.is_finite() {
            continue;
        }
        if order > 0.0 {
            upper = upper.min(bound.ceil() as i64);
        } else {
            lower = lower.max(bound.floor() as i64);
        }
    }
    (lower, upper.max(lower))
}

/// log Φ̄(x) = log P(N(0,1) > x).
fn log_sf(x: f64) -> f64 {
    0.5f64.ln() + log_erfc(x / std::f64::consts::SQRT_2)
}

/// log Φ(x).
fn log_cdf(x: f64) -> f64 {
    log_sf(-x)
}

/// δ(ε) of the remove direction of the Poisson-sampled Gaussian (sensitivity 1, σ = z):
/// P = (1−q)N(0,σ²) + qN(1,σ²), Q = N(0,σ²). The loss log(1−q+q e^{(2x−1)/(2σ²)}) is
/// increasing, so δ = qΦ̄((x*−1)/σ) − (e^ε − 1 + q)Φ̄(x*/σ) with
/// x* = σ² log((e^ε − 1 + q)/q) + ½ (Balle & Wang 2018 Thm 8 for q = 1).
///
/// In log space: log(e^ε − 1 + q) = ε + log1p(−(1−q)e^{−ε}), so nothing overflows past
/// ε = 709.78 (where e^ε = inf once made x* infinite and δ read 0).
fn delta_remove(q: f64, z: f64, eps: f64) -> f64 {
    if q < 1.0 && eps <= (-q).ln_1p() {
        return -eps.exp_m1();
    }
    let log_c = if q < 1.0 {
        eps + (-(1.0 - q) * (-eps).exp()).ln_1p()
    } else {
        eps
    };
    let xs = z * z * (log_c - q.ln()) + 0.5;
    let a = q.ln() + log_sf((xs - 1.0) / z);
    let b = log_c + log_sf(xs / z);
    let (pos, mag) = log_sub_sign(a, b);
    if pos { mag.exp() } else { 0.0 }
}

/// δ(ε) of the add direction: P = N(0,σ²), Q = (1−q)N(0,σ²) + qN(1,σ²). The loss
/// −log(1−q+q e^{(2x−1)/(2σ²)}) is decreasing and below −log(1−q), so for smaller ε
/// δ = (1 − e^ε(1−q))Φ(x*/σ) − q e^ε Φ((x*−1)/σ), x* = σ² log((e^{−ε} − 1 + q)/q) + ½,
/// with log(e^{−ε} − 1 + q) = −ε + log1p(−(1−q)e^{ε}) (no overflow for ε ≪ 0).
fn delta_add(q: f64, z: f64, eps: f64) -> f64 {
    if q < 1.0 && eps >= -(-q).ln_1p() {
        return 0.0;
    }
    let log_c = if q < 1.0 {
        -eps + (-(1.0 - q) * eps.exp()).ln_1p()
    } else {
        -eps
    };
    if log_c == f64::NEG_INFINITY {
        return 0.0;
    }
    let xs = z * z * (log_c - q.ln()) + 0.5;
    // 1 − e^ε(1 − q) = e^ε·c.
    let a = eps + log_c + log_cdf(xs / z);
    let b = q.ln() + eps + log_cdf((xs - 1.0) / z);
    let (pos, mag) = log_sub_sign(a, b);
    if pos { mag.exp() } else { 0.0 }
}

/// δ(ε) of the Laplace mechanism with ε₀ = Δ/b: 1 − e^{(ε−ε₀)/2} on [−ε₀, ε₀], 0 above,
/// 1 − e^ε below (Koskela, Tobaben & Honkela 2021, Lemma; symmetric in direction).
fn delta_laplace(eps0: f64, eps: f64) -> f64 {
    if eps >= eps0 {
        0.0
    } else if eps >= -eps0 {
        -((eps - eps0) / 2.0).exp_m1()
    } else {
        -eps.exp_m1()
    }
}

fn grid_pmf(
    h: f64,
    eps_lo: f64,
    eps_hi: f64,
    max_bins: usize,
    delta: impl Fn(f64) -> f64,
) -> Sized<Pmf> {
    if !(eps_lo.is_finite() && eps_hi.is_finite()) {
        return Err(Grow::Fail(PrivacyError::Numerical {
            context: "PLD discretisation",
            reason: format!("loss range [{eps_lo}, {eps_hi}] is not finite"),
        }));
    }
    let lo = (eps_lo / h).floor();
    let hi = (eps_hi / h).ceil().max(lo);
    let n = hi - lo + 1.0;
    if n > max_bins as f64 {
        return Err(Grow::Bins(n.min(usize::MAX as f64) as usize));
    }
    let (lo, hi) = (lo as i64, hi as i64);
    let deltas: Vec<f64> = (lo..=hi).map(|i| delta(i as f64 * h)).collect();
    Ok(Pmf::connect_dots(h, lo, deltas)?)
}

/// The PLD accountant.
#[derive(Debug, Clone)]
pub struct PldAccountant {
    neighbouring: Neighbouring,
    h: f64,
}

impl PldAccountant {
    pub fn new(neighbouring: Neighbouring) -> Self {
        PldAccountant {
            neighbouring,
            h: DEFAULT_DISCRETIZATION,
        }
    }

    /// With grid width `h` (finite, > 0).
    pub fn with_discretization(neighbouring: Neighbouring, h: f64) -> Result<Self> {
        if !(h.is_finite() && h > 0.0) {
            return Err(PrivacyError::invalid(
                "discretization",
                h,
                "must be finite and > 0",
            ));
        }
        Ok(PldAccountant { neighbouring, h })
    }

    /// The (remove, add) PMFs of one event on the grid of width `h`.
    fn leaf_pmfs(&self, event: &PrivacyEvent, h: f64) -> Sized<(Pmf, Option<Pmf>)> {
        let max = BIN_BUDGET;
        let gaussian = |q: f64, z: f64| -> Sized<(Pmf, Option<Pmf>)> {
            let c = NOISE_TAIL_QUANTILE;
            // The remove-direction loss log(1 − q + q e^{(2x−1)/(2σ²)}).
            let loss = |x: f64| {
                let t = (2.0 * x - 1.0) / (2.0 * z * z);
                if q < 1.0 {
                    super::special::log_add((-q).ln_1p(), q.ln() + t)
                } else {
                    t
                }
            };
            let (x_lo, x_hi) = (-c * z, 1.0 + c * z);
            let remove = grid_pmf(h, loss(x_lo), loss(x_hi), max, |e| delta_remove(q, z, e))?;
            if q == 1.0 {
                return Ok((remove, None));
            }
            let add = grid_pmf(h, -loss(x_hi), -loss(x_lo), max, |e| delta_add(q, z, e))?;
            Ok((remove, Some(add)))
        };
        match event {
            PrivacyEvent::Gaussian { noise_multiplier } => gaussian(1.0, *noise_multiplier),
            PrivacyEvent::Laplace { noise_multiplier } => {
                let e0 = 1.0 / noise_multiplier;
                Ok((grid_pmf(h, -e0, e0, max, |e| delta_laplace(e0, e))?, None))
            }
            // Sensitivity 1: exact at Δ = 1, and at any Δ the (1/z)-DP pair dominates
            // (every ε₀-DP pair is dominated by randomised response; KOV 2015).
            PrivacyEvent::DiscreteLaplace { noise_multiplier } => Ok((
                Pmf::discrete_laplace_within(h, 1.0 / noise_multiplier, 1, max)?,
                None,
            )),
            PrivacyEvent::EpsilonDelta { epsilon, delta }
            | PrivacyEvent::TruncatedDiscreteLaplace { epsilon, delta } => {
                Ok((Pmf::eps_delta(h, *epsilon, *delta, max)?, None))
            }
            // σ = noise multiplier on ℤ with Δ = 1 (the event's "σ/Δ₂ on ℤ" read at unit
            // sensitivity, `dp_accounting`'s default); see the module doc.
            PrivacyEvent::DiscreteGaussian { noise_multiplier } => Ok((
                Pmf::discrete_gaussian_within(h, *noise_multiplier, 1, max)?,
                None,
            )),
            PrivacyEvent::Sampled {
                sampling,
                event: inner,
            } => {
                let Some(z) = effective_gaussian(inner)? else {
                    return Err(Grow::Fail(unsupported(
                        NAME,
                        event,
                        "only Gaussian events can be sampled",
                    )));
                };
                if super::sampled_pld::supported(sampling, self.neighbouring) {
                    // Replace-one: one symmetric dominating PMF for both orders.
                    let law = super::sampled_pld::OccurrenceLaw::replace_one(sampling)?;
                    return Ok((super::sampled_pld::upper_pmf(&law, z, h)?, None));
                }
                match (sampling, self.neighbouring) {
                    (Sampling::Poisson { rate }, Neighbouring::AddRemove) => {
                        if *rate == 0.0 {
                            return Ok((Pmf::eps_delta(h, 0.0, 0.0, max)?, None));
                        }
                        gaussian(*rate, z)
                    }
                    (Sampling::Poisson { .. }, Neighbouring::ReplaceOne) => {
                        Err(Grow::Fail(unsupported(
                            NAME,
                            event,
                            "Poisson sampling is accounted under add/remove-one neighbouring only",
                        )))
                    }
                    (Sampling::WithoutReplacement { .. } | Sampling::WithReplacement { .. }, _) => {
                        Err(Grow::Fail(unsupported(
                            NAME,
                            event,
                            "fixed-size sampling has no PLD rule here; use the rdp accountant",
                        )))
                    }
                    (Sampling::Disjoint { .. }, _) => Err(Grow::Fail(unsupported(
                        NAME,
                        event,
                        "disjoint batches must be accounted through composition",
                    ))),
                }
            }
            PrivacyEvent::SelfComposed { .. } | PrivacyEvent::Composed(_) => Err(Grow::Fail(
                unsupported(NAME, event, "composite event reached a leaf rule"),
            )),
        }
    }

    /// The composed (remove, add) PMFs of `leaves` on the grid of width `h`.
    fn pmfs_on(&self, leaves: &[Leaf], h: f64) -> Sized<(Pmf, Pmf)> {
        let max = BIN_BUDGET;
        let mut rem: Option<Pmf> = None;
        let mut add: Option<Pmf> = None;
        for Leaf { event, count } in leaves {
            let (r, a) = self.leaf_pmfs(event, h)?;
            let r = r.self_compose_within(*count, max)?;
            let a = match a {
                Some(a) => a.self_compose_within(*count, max)?,
                None => r.clone(),
            };
            rem = Some(match rem {
                Some(p) => p.compose_within(&r, max)?,
                None => r,
            });
            add = Some(match add {
                Some(p) => p.compose_within(&a, max)?,
                None => a,
            });
        }
        match (rem, add) {
            (Some(r), Some(a)) => Ok((r, a)),
            _ => {
                let zero = Pmf::eps_delta(h, 0.0, 0.0, max)?;
                Ok((zero.clone(), zero))
            }
        }
    }

    /// The composed (remove, add) PMFs of `event`.
    ///
    /// Plain Gaussian leaves are first merged into one Gaussian (exact: Dong, Roth & Su 2019,
    /// Cor. 3.3), so they are discretised once rather than T times. If the composition needs
    /// more than [`BIN_BUDGET`] bins on the accountant's grid, the grid is coarsened until it
    /// fits: any grid width gives a pessimistic PLD, and the loss in tightness is about one
    /// grid step per leaf, negligible next to the ε of a composition that wide.
    pub fn pmfs(&self, event: &PrivacyEvent) -> Result<(Pmf, Pmf)> {
        let leaves = merged_leaves(event)?;
        let step = lattice_step(&leaves);
        let mut h = align(self.h, step);
        for _ in 0..COARSENINGS {
            match self.pmfs_on(&leaves, h) {
                Ok(p) => return Ok(p),
                Err(Grow::Fail(e)) => return Err(e),
                Err(Grow::Bins(n)) => {
                    h = align_coarser(h * (n as f64 / BIN_BUDGET as f64).max(1.0) * 1.25, step);
                    if !h.is_finite() {
                        break;
                    }
                }
            }
        }
        Err(PrivacyError::Numerical {
            context: "PLD composition",
            reason: format!("no grid up to width {h} fits {BIN_BUDGET} bins"),
        })
    }

    /// ε at δ: the larger over the two directions, rounded up.
    ///
    /// A composition of plain Gaussians is one Gaussian (Dong, Roth & Su 2019, Cor. 3.3)
    /// whose PLD is known in closed form, so its ε is the analytic Gaussian's (Balle & Wang
    /// 2018, Thm. 8), exact up to a bisection that keeps the side meeting δ.
    pub fn epsilon(&self, event: &PrivacyEvent, delta: Delta) -> Result<f64> {
        if let Some(z) = effective_gaussian(event)? {
            let e = crate::calibration::gaussian_epsilon(z, delta)?;
            return finite_up("PLD epsilon", e);
        }
        let (r, a) = self.pmfs(event)?;
        let e = r
            .epsilon_for_delta(delta.get())?
            .max(a.epsilon_for_delta(delta.get())?);
        finite_up("PLD epsilon", e)
    }

    /// δ at ε: the larger over the two directions.
    pub fn delta(&self, event: &PrivacyEvent, eps: f64) -> Result<f64> {
        if eps >= 0.0
            && let Some(z) = effective_gaussian(event)?
        {
            return crate::calibration::gaussian_delta(z, eps);
        }
        let (r, a) = self.pmfs(event)?;
        let d = r.delta_for_epsilon(eps).max(a.delta_for_epsilon(eps));
        if d.is_nan() {
            return Err(PrivacyError::Numerical {
                context: "PLD delta",
                reason: format!("NaN at epsilon {eps}"),
            });
        }
        Ok(d)
    }
}

/// The smallest loss spacing of the lattice-valued leaves (pure-DP pairs at ±ε, the
/// discrete Gaussian's (1 − 2x)/(2σ²) at spacing 1/σ², offset 1/(2σ²)), if any: a grid
/// that divides it carries those losses exactly instead of splitting them.
fn lattice_step(leaves: &[Leaf]) -> Option<f64> {
    leaves
        .iter()
        .filter_map(|l| match &l.event {
            PrivacyEvent::DiscreteLaplace { noise_multiplier } => Some(1.0 / noise_multiplier),
            PrivacyEvent::EpsilonDelta { epsilon, .. }
            | PrivacyEvent::TruncatedDiscreteLaplace { epsilon, .. } => Some(*epsilon),
            PrivacyEvent::DiscreteGaussian { noise_multiplier } => {
                Some(0.5 / (noise_multiplier * noise_multiplier))
            }
            _ => None,
        })
        .filter(|e| e.is_finite() && *e > 0.0)
        .reduce(f64::min)
}

/// The largest grid width ≤ `h` that divides `step` (or `h` itself if `step` is
/// smaller than h, or if there is none).
fn align(h: f64, step: Option<f64>) -> f64 {
    match step {
        Some(e) if e >= h => e / (e / h).ceil(),
        Some(e) if e < h && e >= 1e-3 * h => e,
        _ => h,
    }
}

/// The smallest grid width ≥ `h` that divides `step` (or `h` if `step` < h).
fn align_coarser(h: f64, step: Option<f64>) -> f64 {
    match step {
        Some(e) if e >= h => e / (e / h).floor(),
        _ => h,
    }
}

/// `x` rounded up, or a numerical error if it is not finite.
fn finite_up(context: &'static str, x: f64) -> Result<f64> {
    if x.is_finite() && x >= 0.0 {
        Ok(round_up(x))
    } else {
        Err(PrivacyError::Numerical {
            context,
            reason: format!("epsilon {x}"),
        })
    }
}

/// The leaves of `event` with all plain Gaussians merged into one of noise multiplier
/// (Σ count/z²)^{−1/2} (first), the rest unchanged.
fn merged_leaves(event: &PrivacyEvent) -> Result<Vec<Leaf>> {
    let mut inv = 0.0f64;
    let mut rest = Vec::new();
    for l in leaves(event)? {
        match l.event {
            PrivacyEvent::Gaussian { noise_multiplier } => {
                inv += l.count as f64 / (noise_multiplier * noise_multiplier)
            }
            _ => rest.push(l),
        }
    }
    if inv > 0.0 {
        let z = 1.0 / inv.sqrt();
        if !(z.is_finite() && z > 0.0) {
            return Err(PrivacyError::Numerical {
                context: "PLD composition",
                reason: format!("Gaussian composition has noise multiplier {z}"),
            });
        }
        rest.insert(
            0,
            Leaf {
                event: PrivacyEvent::Gaussian {
                    noise_multiplier: z,
                },
                count: 1,
            },
        );
    }
    Ok(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::gaussian_delta;

    #[test]
    fn hockey_stick_of_the_gaussian_by_hand() {
        // q = 1, z = 1, ε = 1: Φ(−0.5) − eΦ(−1.5) = 0.126936737 (Balle & Wang Thm 8).
        let want = 0.308_537_538_725_986_9 - std::f64::consts::E * 0.066_807_201_268_858_06;
        assert!((delta_remove(1.0, 1.0, 1.0) - want).abs() < 1e-14);
        assert!((delta_add(1.0, 1.0, 1.0) - want).abs() < 1e-14);
        assert!((gaussian_delta(1.0, 1.0).unwrap() - want).abs() < 1e-12);
        // Sampled, remove, ε ≤ log(1−q): δ = 1 − e^ε.
        assert!((delta_remove(0.5, 1.0, -1.0) - (1.0 - (-1.0f64).exp())).abs() < 1e-15);
        // Add direction never exceeds −log(1−q): δ(−log 0.5) = 0.
        assert_eq!(delta_add(0.5, 1.0, 2f64.ln()), 0.0);
    }

    #[test]
    fn single_gaussian_pld_matches_the_exact_curve() {
        let acc = PldAccountant::new(Neighbouring::AddRemove);
        let e = PrivacyEvent::Gaussian {
            noise_multiplier: 2.0,
        };
        let d = Delta::new(1e-5).unwrap();
        let eps = acc.epsilon(&e, d).unwrap();
        let exact = crate::calibration::gaussian_epsilon(2.0, d).unwrap();
        // Connect-the-dots is exact at grid points and above the truth in between.
        assert!(
            eps >= exact - 1e-9 && eps <= exact + 1e-4,
            "{eps} vs {exact}"
        );
    }

    #[test]
    fn composition_of_gaussians_is_a_gaussian() {
        // 4 releases at z = 2 equal one at z = 1 (Dong, Roth & Su 2019 Cor. 3.3).
        let acc = PldAccountant::new(Neighbouring::AddRemove);
        let d = Delta::new(1e-6).unwrap();
        let four = acc
            .epsilon(
                &PrivacyEvent::Gaussian {
                    noise_multiplier: 2.0,
                }
                .repeated(4),
                d,
            )
            .unwrap();
        let exact = crate::calibration::gaussian_epsilon(1.0, d).unwrap();
        assert!(
            four >= exact - 1e-9 && four <= exact * 1.001,
            "{four} vs {exact}"
        );
    }

    #[test]
    fn laplace_by_hand() {
        // b = 1 (ε₀ = 1): δ(ε) = 1 − e^{(ε−1)/2}; δ = 0.1 at ε = 1 + 2 ln 0.9 = 0.789279.
        let acc = PldAccountant::new(Neighbouring::AddRemove);
        let e = PrivacyEvent::Laplace {
            noise_multiplier: 1.0,
        };
        let eps = acc.epsilon(&e, Delta::new(0.1).unwrap()).unwrap();
        let want = 1.0 + 2.0 * 0.9f64.ln();
        assert!(eps >= want - 1e-9 && eps <= want + 1e-4, "{eps} vs {want}");
    }

    #[test]
    fn losses_beyond_the_float_range_by_hand() {
        // One atom at loss 1000 (e^{±1000} is not an f64): δ(ε) = 1 − e^{ε−1000}, so
        // δ = 1e-5 at ε = 1000 + ln(1 − 1e-5). The old code read inf·0 = NaN as "met".
        let pmf = Pmf {
            h: 1e-4,
            lower: 10_000_000,
            probs: vec![1.0],
            infinity: 0.0,
        };
        let eps = pmf.epsilon_for_delta(1e-5).unwrap();
        let want = 1000.0 + (-1e-5f64).ln_1p();
        assert!((eps - want).abs() < 1e-9, "{eps} vs {want}");
        // Far below: atoms at −2000 and 3000 (masses 0.5 each): δ = 0.5(1 − e^{ε−3000}).
        let mut probs = vec![0.0; 50_000_001];
        probs[0] = 0.5;
        probs[50_000_000] = 0.5;
        let pmf = Pmf {
            h: 1e-4,
            lower: -20_000_000,
            probs,
            infinity: 0.0,
        };
        let eps = pmf.epsilon_for_delta(1e-5).unwrap();
        let want = 3000.0 + (-2e-5f64).ln_1p();
        assert!((eps - want).abs() < 1e-8, "{eps} vs {want}");
    }

    #[test]
    fn a_nan_mass_is_an_error_not_a_number() {
        let pmf = Pmf {
            h: 1e-4,
            lower: 0,
            probs: vec![0.5, f64::NAN],
            infinity: 0.0,
        };
        assert!(matches!(
            pmf.epsilon_for_delta(1e-5),
            Err(PrivacyError::Numerical { .. })
        ));
    }

    #[test]
    fn the_issue_case_on_the_pmf_path() {
        // Issue 11: z = 0.8, T = 3000, δ = 1e-5. The truth, δ(ε) = Φ(μ/2 − ε/μ) −
        // e^εΦ(−μ/2 − ε/μ) with μ = √3000/0.8 solved at 50 digits (mpmath), is
        // 2634.7770827180324; dp-accounting 0.6.0 gives 2635.748 (pessimistic) and 2635.597
        // ("optimistic", above the truth here). The Gaussian leaves merge into z/√3000 and
        // the grid is coarsened to fit BIN_BUDGET; the discretised PMF stays above the truth.
        const TRUTH: f64 = 2_634.777_082_718_032_4;
        let acc = PldAccountant::new(Neighbouring::AddRemove);
        let e = PrivacyEvent::Gaussian {
            noise_multiplier: 0.8,
        }
        .repeated(3000);
        let (r, a) = acc.pmfs(&e).unwrap();
        assert!(r.len() <= BIN_BUDGET);
        let pmf_eps = r.epsilon_for_delta(1e-5).unwrap();
        let pmf_eps = pmf_eps.max(a.epsilon_for_delta(1e-5).unwrap());
        assert!((TRUTH..TRUTH + 0.01).contains(&pmf_eps), "{pmf_eps}");
        let exact = acc.epsilon(&e, Delta::new(1e-5).unwrap()).unwrap();
        assert!((TRUTH..TRUTH + 1e-6).contains(&exact), "{exact}");
    }

    #[test]
    fn a_mixed_composition_takes_the_pmf_path() {
        // Gaussian z = 2 and Laplace b = 10: above the Gaussian alone, below the sum of the
        // two ε at δ/2 and 0 (basic composition).
        let acc = PldAccountant::new(Neighbouring::AddRemove);
        let d = Delta::new(1e-5).unwrap();
        let g = PrivacyEvent::Gaussian {
            noise_multiplier: 2.0,
        };
        let l = PrivacyEvent::Laplace {
            noise_multiplier: 10.0,
        };
        let both = acc
            .epsilon(&PrivacyEvent::Composed(vec![g.clone(), l]), d)
            .unwrap();
        let alone = crate::calibration::gaussian_epsilon(2.0, d).unwrap();
        let basic = crate::calibration::gaussian_epsilon(2.0, Delta::new(0.5e-5).unwrap()).unwrap();
        assert!(
            both > alone && both < basic + 0.1,
            "{alone} < {both} < {}",
            basic + 0.1
        );
    }

    #[test]
    fn an_atom_between_grid_points_is_split_keeping_delta_at_the_grid() {
        // Atom at 1.5h: mass (1 − e^{−h/2})/(1 − e^{−h}) = 1/(1 + e^{−h/2}) goes up.
        let h = 0.1;
        let pmf = Pmf::from_atoms(h, &[(0.15, 1.0)], 0.0).unwrap();
        let up = 1.0 / (1.0 + (-0.05f64).exp());
        assert_eq!(pmf.lower, 1);
        assert!((pmf.probs[1] - up).abs() < 1e-15 && (pmf.probs[0] - (1.0 - up)).abs() < 1e-15);
        // δ(0.1) = 1 − e^{0.1−0.15} for the atom, and the same for the split PMF.
        let want = -(-0.05f64).exp_m1();
        assert!((pmf.delta_for_epsilon(0.1) - want).abs() < 1e-12);
        // An atom on the grid stays put.
        let pmf = Pmf::from_atoms(h, &[(0.3, 1.0)], 0.0).unwrap();
        assert!(pmf.probs.iter().filter(|&&p| p > 1e-12).count() == 1);
    }

    #[test]
    fn discrete_laplace_by_hand() {
        // a = 1, Δ = 1: losses ±1 w.p. 1/(1+e^{−1}), e^{−1}/(1+e^{−1}); at δ = 1e-5
        // ε = 1 + ln(1 − 1e-5(1 + e^{−1})) = 0.99998632 (dp-accounting: 0.9999863211120326).
        let pmf = Pmf::discrete_laplace(1e-4, 1.0, 1).unwrap();
        let want = 1.0 + (-1e-5 * (1.0 + (-1.0f64).exp())).ln_1p();
        let got = pmf.epsilon_for_delta(1e-5).unwrap();
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        // Δ = 2, a = 0.5: atoms ±1 and 0 (x = 1, mass tanh(1/4)e^{−1/2}); the masses sum to 1.
        let pmf = Pmf::discrete_laplace(0.5, 0.5, 2).unwrap();
        let total: f64 = pmf.probs.iter().sum();
        assert!((total - 1.0).abs() < 1e-14, "{total}");
        let mid = (0.25f64).tanh() * (-0.5f64).exp();
        assert!((pmf.probs[(0 - pmf.lower) as usize] - mid).abs() < 1e-15);
    }

    #[test]
    fn discrete_laplace_far_below_the_grid_is_tight() {
        // Issue 11: z = 1e6, T = 1e6 gave ε = 50. Exact (Binomial over ±1e-6 losses,
        // scripts/golden_dp_accounting.py): 0.0019387247346603358 at δ = 1e-5.
        let acc = PldAccountant::new(Neighbouring::AddRemove);
        let e = PrivacyEvent::DiscreteLaplace {
            noise_multiplier: 1e6,
        }
        .repeated(1_000_000);
        let got = acc.epsilon(&e, Delta::new(1e-5).unwrap()).unwrap();
        let exact = 0.001_938_724_734_660_335_8;
        assert!(
            got >= exact * (1.0 - 1e-9) && got <= exact * 1.001,
            "{got} vs {exact}"
        );
    }

    #[test]
    fn discrete_gaussian_by_hand() {
        // σ = 1, Δ = 1, one release: the loss at x is ½ − x, so the PLD has atoms at
        // 4.5, 5.5, … (x = −4, −5, …) above ε = 4.43; dp-accounting: 4.430238055279412.
        let pmf = Pmf::discrete_gaussian(1e-4, 1.0, 1).unwrap();
        let z: f64 = (-40i32..=40).map(|x| (-(x * x) as f64 / 2.0).exp()).sum();
        let p = |x: i32| (-(x * x) as f64 / 2.0).exp() / z;
        let d = |e: f64| -> f64 {
            (4..=40)
                .map(|k| p(k) * -(e - (k as f64 + 0.5)).exp_m1())
                .filter(|v| *v > 0.0)
                .sum()
        };
        let got = pmf.epsilon_for_delta(1e-5).unwrap();
        assert!((d(got) - 1e-5).abs() < 1e-12, "δ({got}) = {}", d(got));
        assert!((got - 4.430_238_055_279_412).abs() < 1e-9, "{got}");
    }

    #[test]
    fn eps_delta_event_by_hand() {
        // A (1, 1e-6) event alone: ε at δ = 1e-6 is 1 (rounded up to the grid).
        let acc = PldAccountant::new(Neighbouring::ReplaceOne);
        let e = PrivacyEvent::EpsilonDelta {
            epsilon: 1.0,
            delta: 1e-6,
        };
        let eps = acc.epsilon(&e, Delta::new(1e-6).unwrap()).unwrap();
        assert!((eps - 1.0).abs() < 2e-4, "{eps}");
        // δ too small for the event's own δ is an error, not a wrong number.
        assert!(acc.epsilon(&e, Delta::new(1e-7).unwrap()).is_err());
    }
}
