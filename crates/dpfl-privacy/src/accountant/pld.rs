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
//!   +∞ (pessimistic).
//! * **Exact hockey-stick curves** of the (Poisson-sampled) Gaussian in both directions of
//!   add/remove neighbouring (remove: P = (1−q)N(0,σ²) + qN(1,σ²) vs Q = N(0,σ²); add: the
//!   reverse), from Balle & Wang 2018 Thm 8 generalised to the mixture; Laplace (Koskela et
//!   al. 2021, closed form); any (ε, δ) event by the dominating randomised-response pair
//!   (Kairouz, Oh & Viswanath 2015, Thm 3.3 proof; Zhu, Dong & Wang 2022).
//! * **Composition** by FFT (`realfft`): T-fold self-composition raises the spectrum to the
//!   T-th power on a window chosen by a Chernoff bound with tail mass 1e-15, and that tail mass
//!   is added to the mass at +∞ (pessimistic), exactly as `dp_accounting`'s `self_convolve`.
//!   Negative values from floating-point round-off are clamped to zero (more mass, never less).
//! * The two directions of add/remove are composed separately and ε is their maximum.
//!
//! Supported: Gaussian, Laplace, discrete Laplace and (ε, δ) events under either relation;
//! Poisson-sampled Gaussian under add/remove-one. Everything else is refused by name
//! (`dp_accounting`'s PLD does not cover fixed-size sampling either).

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
/// Refuse grids that would exhaust memory rather than silently coarsen them.
const MAX_BINS: usize = 1 << 26;

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
        if !(h.is_finite() && h > 0.0)
            || probs.iter().any(|p| !(p.is_finite() && *p >= 0.0))
            || !(0.0..=1.0).contains(&infinity)
            || !(total <= 1.0 + 1e-9)
            || probs.is_empty()
        {
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

    /// Pessimistic PMF of a pair with losses `ε` w.p. a, `−ε` w.p. b and +∞ w.p. δ (the
    /// dominating pair of an (ε, δ)-DP mechanism): losses rounded up to the grid.
    fn eps_delta(h: f64, eps: f64, delta: f64) -> Pmf {
        let e = eps.exp();
        let a = (1.0 - delta) * e / (1.0 + e);
        let b = (1.0 - delta) / (1.0 + e);
        let hi = (eps / h).ceil() as i64;
        let lo = (-eps / h).ceil() as i64;
        let mut probs = vec![0.0; (hi - lo + 1) as usize];
        probs[0] += b;
        probs[(hi - lo) as usize] += a;
        Pmf {
            h,
            lower: lo,
            probs,
            infinity: delta,
        }
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
    /// alone exceeds δ.
    pub fn epsilon_for_delta(&self, delta: f64) -> Result<f64> {
        if self.infinity > delta {
            return Err(PrivacyError::Numerical {
                context: "PLD epsilon",
                reason: format!(
                    "mass at infinite loss {} exceeds delta {delta}",
                    self.infinity
                ),
            });
        }
        // Walk down from the largest loss, keeping U = P(∞) + Σ_{ℓ≥ℓ_j} p and
        // W = Σ_{ℓ≥ℓ_j} p e^{−ℓ}; on (ℓ_{j−1}, ℓ_j], δ(ε) = U − e^ε W.
        let (mut u, mut w) = (self.infinity, 0.0f64);
        for j in (0..self.probs.len()).rev() {
            let lj = (self.lower + j as i64) as f64 * self.h;
            let p = self.probs[j];
            if p > 0.0 {
                u += p;
                w += p * (-lj).exp();
            }
            let next = lj - self.h;
            // δ(next) = U − e^{next} W; if still ≤ δ, continue down.
            if u - next.exp() * w > delta {
                // The crossing is in (next, ℓ_j]: solve U − e^ε W = δ.
                let eps = if w > 0.0 { ((u - delta) / w).ln() } else { lj };
                return Ok(eps.clamp(next, lj).max(0.0));
            }
        }
        // δ(ε) ≤ δ even at the lowest loss: any ε ≥ 0 will do (δ(ε) ≤ δ(lowest)).
        Ok(0.0)
    }

    /// T-fold composition by FFT on the Chernoff window (`dp_accounting`'s `self_convolve`).
    pub fn self_compose(&self, t: u64) -> Result<Pmf> {
        if t == 1 {
            return Ok(self.clone());
        }
        let n = self.probs.len();
        let tf = t as f64;
        let (lo_b, hi_b) = chernoff_bounds(&self.probs, t, TAIL_MASS_TRUNCATION);
        let out_len = (hi_b - lo_b + 1) as usize;
        let fft_len = next_fast_len(out_len.max(n));
        if fft_len > MAX_BINS {
            return Err(PrivacyError::Numerical {
                context: "PLD composition",
                reason: format!("{fft_len} bins needed; use a coarser grid or the RDP accountant"),
            });
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
        Ok(Pmf {
            h: self.h,
            lower: self.lower * t as i64 + lo_b,
            probs,
            infinity,
        })
    }

    /// Composition of two PMFs on the same grid (full linear convolution by FFT).
    pub fn compose(&self, other: &Pmf) -> Result<Pmf> {
        let len = self.probs.len() + other.probs.len() - 1;
        let fft_len = next_fast_len(len);
        if fft_len > MAX_BINS {
            return Err(PrivacyError::Numerical {
                context: "PLD composition",
                reason: format!("{fft_len} bins needed"),
            });
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
        Ok(Pmf {
            h: self.h,
            lower: self.lower + other.lower,
            probs,
            infinity,
        })
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
/// `compute_self_convolve_bounds`, eq. (5) of its supplementary notes).
fn chernoff_bounds(probs: &[f64], t: u64, tail: f64) -> (i64, i64) {
    let n = probs.len();
    let mut upper = ((n - 1) as u128 * t as u128).min(i64::MAX as u128) as i64;
    let mut lower = 0i64;
    let tf = t as f64;
    for k in (-20i32..=20).filter(|&k| k != 0) {
        let order = k as f64 / n as f64;
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
fn delta_remove(q: f64, z: f64, eps: f64) -> f64 {
    if q < 1.0 && eps <= (-q).ln_1p() {
        return -eps.exp_m1();
    }
    let c = eps.exp_m1() + q; // e^ε − (1 − q) > 0
    let xs = z * z * (c / q).ln() + 0.5;
    let a = q.ln() + log_sf((xs - 1.0) / z);
    let b = c.ln() + log_sf(xs / z);
    let (pos, mag) = log_sub_sign(a, b);
    if pos { mag.exp() } else { 0.0 }
}

/// δ(ε) of the add direction: P = N(0,σ²), Q = (1−q)N(0,σ²) + qN(1,σ²). The loss
/// −log(1−q+q e^{(2x−1)/(2σ²)}) is decreasing and below −log(1−q), so for smaller ε
/// δ = (1 − e^ε(1−q))Φ(x*/σ) − q e^ε Φ((x*−1)/σ), x* = σ² log((e^{−ε} − 1 + q)/q) + ½.
fn delta_add(q: f64, z: f64, eps: f64) -> f64 {
    if q < 1.0 && eps >= -(-q).ln_1p() {
        return 0.0;
    }
    let c = (-eps).exp_m1() + q; // e^{−ε} − (1 − q) > 0
    if c <= 0.0 {
        return 0.0;
    }
    let xs = z * z * (c / q).ln() + 0.5;
    // 1 − e^ε(1 − q) = e^ε·c.
    let a = eps + c.ln() + log_cdf(xs / z);
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

fn grid_pmf(h: f64, eps_lo: f64, eps_hi: f64, delta: impl Fn(f64) -> f64) -> Result<Pmf> {
    let lo = (eps_lo / h).floor() as i64;
    let hi = ((eps_hi / h).ceil() as i64).max(lo);
    let n = (hi - lo + 1) as usize;
    if n > MAX_BINS {
        return Err(PrivacyError::Numerical {
            context: "PLD discretisation",
            reason: format!("{n} grid points needed"),
        });
    }
    let deltas: Vec<f64> = (lo..=hi).map(|i| delta(i as f64 * h)).collect();
    Pmf::connect_dots(h, lo, deltas)
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

    /// The (remove, add) PMFs of one event.
    fn leaf_pmfs(&self, event: &PrivacyEvent) -> Result<(Pmf, Option<Pmf>)> {
        let h = self.h;
        let gaussian = |q: f64, z: f64| -> Result<(Pmf, Option<Pmf>)> {
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
            let remove = grid_pmf(h, loss(x_lo), loss(x_hi), |e| delta_remove(q, z, e))?;
            if q == 1.0 {
                return Ok((remove, None));
            }
            let add = grid_pmf(h, -loss(x_hi), -loss(x_lo), |e| delta_add(q, z, e))?;
            Ok((remove, Some(add)))
        };
        match event {
            PrivacyEvent::Gaussian { noise_multiplier } => gaussian(1.0, *noise_multiplier),
            PrivacyEvent::Laplace { noise_multiplier } => {
                let e0 = 1.0 / noise_multiplier;
                Ok((grid_pmf(h, -e0, e0, |e| delta_laplace(e0, e))?, None))
            }
            PrivacyEvent::DiscreteLaplace { noise_multiplier } => {
                Ok((Pmf::eps_delta(h, 1.0 / noise_multiplier, 0.0), None))
            }
            PrivacyEvent::EpsilonDelta { epsilon, delta }
            | PrivacyEvent::TruncatedDiscreteLaplace { epsilon, delta } => {
                Ok((Pmf::eps_delta(h, *epsilon, *delta), None))
            }
            PrivacyEvent::DiscreteGaussian { .. } => Err(unsupported(
                NAME,
                event,
                "no PLD for the discrete Gaussian yet; use the rdp or zcdp accountant",
            )),
            PrivacyEvent::Sampled {
                sampling,
                event: inner,
            } => {
                let Some(z) = effective_gaussian(inner)? else {
                    return Err(unsupported(
                        NAME,
                        event,
                        "only Gaussian events can be sampled",
                    ));
                };
                if super::sampled_pld::supported(sampling, self.neighbouring) {
                    // Replace-one: one symmetric dominating PMF for both orders.
                    let law = super::sampled_pld::OccurrenceLaw::replace_one(sampling)?;
                    return Ok((super::sampled_pld::upper_pmf(&law, z, h)?, None));
                }
                match (sampling, self.neighbouring) {
                    (Sampling::Poisson { rate }, Neighbouring::AddRemove) => {
                        if *rate == 0.0 {
                            return Ok((Pmf::eps_delta(h, 0.0, 0.0), None));
                        }
                        gaussian(*rate, z)
                    }
                    (Sampling::Poisson { .. }, Neighbouring::ReplaceOne) => Err(unsupported(
                        NAME,
                        event,
                        "Poisson sampling is accounted under add/remove-one neighbouring only",
                    )),
                    (Sampling::WithoutReplacement { .. } | Sampling::WithReplacement { .. }, _) => {
                        Err(unsupported(
                            NAME,
                            event,
                            "fixed-size sampling has no PLD rule here; use the rdp accountant",
                        ))
                    }
                    (Sampling::Disjoint { .. }, _) => Err(unsupported(
                        NAME,
                        event,
                        "disjoint batches must be accounted through composition",
                    )),
                }
            }
            PrivacyEvent::SelfComposed { .. } | PrivacyEvent::Composed(_) => Err(unsupported(
                NAME,
                event,
                "composite event reached a leaf rule",
            )),
        }
    }

    /// The composed (remove, add) PMFs of `event`.
    pub fn pmfs(&self, event: &PrivacyEvent) -> Result<(Pmf, Pmf)> {
        let mut rem: Option<Pmf> = None;
        let mut add: Option<Pmf> = None;
        for Leaf { event, count } in leaves(event)? {
            let (r, a) = self.leaf_pmfs(&event)?;
            let r = r.self_compose(count)?;
            let a = match a {
                Some(a) => a.self_compose(count)?,
                None => r.clone(),
            };
            rem = Some(match rem {
                Some(p) => p.compose(&r)?,
                None => r,
            });
            add = Some(match add {
                Some(p) => p.compose(&a)?,
                None => a,
            });
        }
        match (rem, add) {
            (Some(r), Some(a)) => Ok((r, a)),
            _ => {
                let zero = Pmf::eps_delta(self.h, 0.0, 0.0);
                Ok((zero.clone(), zero))
            }
        }
    }

    /// ε at δ: the larger over the two directions, rounded up.
    pub fn epsilon(&self, event: &PrivacyEvent, delta: Delta) -> Result<f64> {
        let (r, a) = self.pmfs(event)?;
        let e = r
            .epsilon_for_delta(delta.get())?
            .max(a.epsilon_for_delta(delta.get())?);
        Ok(round_up(e))
    }

    /// δ at ε: the larger over the two directions.
    pub fn delta(&self, event: &PrivacyEvent, eps: f64) -> Result<f64> {
        let (r, a) = self.pmfs(event)?;
        Ok(r.delta_for_epsilon(eps).max(a.delta_for_epsilon(eps)))
    }
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
