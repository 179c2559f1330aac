//! Tight, sound PLDs of the subsampled Gaussian under replace-one neighbouring, for the three
//! record samplers dpfl offers: K draws with replacement, a fixed-size subset without
//! replacement, and Poisson sampling.
//!
//! **The occurrence law.** Let D, D' differ in record i and let C be the number of times i
//! enters the batch: C ~ Binomial(K, 1/n) with replacement, C ~ Bernoulli(m/n) without,
//! C ~ Bernoulli(q) for Poisson. Conditioned on C = c and on the draws of the other records,
//! the two outputs are Gaussians whose means differ by at most c sensitivities (c copies of i
//! swapped for other records: group privacy). Writing η = P(C ≥ 1) and w_c = P(C = c)/η,
//! M(D) = (1−η)μ₀ + ην and M(D') = (1−η)μ₀ + ην' with ν = Σ_c w_c μ_c.
//!
//! **The upper bound** (Balle, Barthe & Gaboardi 2018, "Privacy amplification by subsampling:
//! tight analyses via couplings and divergences", Thm 2 (advanced joint convexity) and Thm 10
//! (sampling with replacement, substitution); Thm 9 for without replacement): for ε ≥ 0 and
//! e^{ε'} = 1 + η(e^ε − 1),
//!
//!   H_{e^{ε'}}(M(D) ‖ M(D')) ≤ η Σ_{c≥1} w_c δ_G(ε; z/c),
//!
//! δ_G(ε; s) the hockey-stick of N(1, s²) vs N(0, s²) (Balle & Wang 2018, Thm 8). This is
//! exactly the hockey-stick δ_R of the pair R = ((1−η)Q̂ + ηP̂, Q̂) with P̂ = (c ~ w, N(c, z²)),
//! Q̂ = (c ~ w, N(0, z²)) (advanced joint convexity holds with equality when the mixed-in
//! component is the second distribution), so δ_R(ε) = Σ_c w_c δ_rem(η, z/c, ε) with δ_rem the
//! Poisson-remove curve below, for every ε. For ε' < 0, replace-one is symmetric and
//! H_{e^ε}(P‖Q) = 1 − e^ε + e^ε H_{e^{−ε}}(Q‖P), so the reversed pair's curve δ_R̄(ε) =
//! Σ_c w_c δ_add(η, z/c, ε) bounds the mechanism there. Their pointwise maximum
//! δ* = max(δ_R, δ_R̄) is convex and non-increasing in e^ε with δ*(−∞) = 1, hence the
//! hockey-stick curve of some pair (Zhu, Dong & Wang 2022, "Optimal accounting of differential
//! privacy via characteristic function", §3 and Thm 11 for the same max construction without
//! replacement; Dong, Roth & Su 2019 Thm 4.2, C_p(f) = min(f_p, f_p⁻¹)**), and that pair
//! dominates one round at every order. The T-fold product of dominating pairs dominates the
//! adaptive composition (Zhu, Dong & Wang 2022, Thm 10), so the connect-the-dots PMF of δ*
//! (Doroshenko et al. 2022, Alg. 1, through [`Pmf::from_hockey_stick`]) composes soundly.
//!
//! Truncations are pessimistic: occurrence counts c with P(C > c_max) ≤ [`COUNT_TAIL`] are
//! charged as a mutually singular component (δ = 1 for that mass), and losses above the grid
//! (δ*(hi) ≤ [`LOSS_TAIL`]) go to the mass at +∞.
//!
//! Poisson sampling under add/remove-one is the `pld` module's curve; here Poisson is the
//! replace-one case (a minibatch normalised by its expected size).
//!
//! **Poisson under replace-one: the ball pair** (issue 27 finding 3). A record that is not
//! drawn contributes 0 and a drawn one a clipped vector of norm ≤ Δ/2 (Δ, the replace-one
//! sensitivity, is the ball's diameter), so the pair is (1−q)N(0) + qN(u) vs (1−q)N(0) + qN(v)
//! with ‖u‖, ‖v‖ ≤ Δ/2, and the dominating one is u = −v (dp-accounting 0.6's REPLACE_ONE
//! `GaussianPrivacyLoss`: mu_upper = (1−q)μ + qμ(· + s), mu_lower = (1−q)μ + qμ(· − s), s
//! the ball's radius): [`ball_profile`]. The occurrence-law profile above covers any pair of
//! centres c sensitivities apart, i.e. a record Δ away from its "absent" value, which clipping
//! never produces; it is kept as [`PoissonPair::Generic`] for `dpfl account`.

use super::pld::Pmf;
use super::special::{log_comb, log_erfc, log_sub_sign};
use crate::error::{PrivacyError, Result};
use crate::event::{Neighbouring, Sampling};

/// Occurrence counts beyond the one where P(C > c_max) first drops below this are charged
/// with δ = 1 (pessimistic).
pub const COUNT_TAIL: f64 = 1e-16;
/// The loss grid of one round ends where δ* ≤ this; the rest is mass at +∞ (pessimistic).
pub const LOSS_TAIL: f64 = 1e-15;
/// Refuse grids that would exhaust memory.
const MAX_GRID: usize = 1 << 25;

/// The law of C, the number of times the differing record enters a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct OccurrenceLaw {
    /// P(C = c) for c = 0..=c_max.
    probs: Vec<f64>,
    /// P(C ≥ 1), computed directly (not as 1 − P(C = 0)).
    eta: f64,
    /// P(C > c_max) (an upper bound).
    tail: f64,
}

impl OccurrenceLaw {
    /// The law for `sampling` under replace-one neighbouring.
    pub fn replace_one(sampling: &Sampling) -> Result<Self> {
        super::check_sampling(sampling)?;
        match *sampling {
            Sampling::WithReplacement { population, draws } => {
                Ok(Self::binomial(draws, 1.0 / population as f64))
            }
            Sampling::WithoutReplacement { population, size } => {
                Ok(Self::bernoulli(size as f64 / population as f64))
            }
            Sampling::Poisson { rate } => Ok(Self::bernoulli(rate)),
            Sampling::Disjoint { .. } => Err(PrivacyError::invalid(
                "sampling",
                f64::NAN,
                "disjoint batches compose in parallel; they have no occurrence law",
            )),
        }
    }

    /// C ~ Bernoulli(q).
    pub fn bernoulli(q: f64) -> Self {
        OccurrenceLaw {
            probs: vec![1.0 - q, q],
            eta: q,
            tail: 0.0,
        }
    }

    /// C ~ Binomial(k, p), cut where the upper tail drops below [`COUNT_TAIL`].
    pub fn binomial(k: u64, p: f64) -> Self {
        let (lp, lq) = (p.ln(), (-p).ln_1p());
        let kf = k as f64;
        let mut probs = Vec::new();
        for c in 0..=k {
            let cf = c as f64;
            let lpc = log_comb(kf, cf) + cf * lp + (kf - cf) * lq;
            // Past the mode the terms fall geometrically (ratio ≤ (k−c)p/((c+1)(1−p)) < 1):
            // stop once they are far below f64's resolution of anything we add them to.
            if cf > kf * p && lpc < -745.0 {
                break;
            }
            probs.push(lpc.exp());
        }
        let eta = -(kf * lq).exp_m1();
        // Suffix sums give the tails; the terms never computed (all < e^{-745}, at most k of
        // them) are charged as k·1e-300.
        let mut tail = kf * 1e-300;
        let mut cut = probs.len() - 1;
        while cut > 1 && tail + probs[cut] <= COUNT_TAIL {
            tail += probs[cut];
            cut -= 1;
        }
        probs.truncate(cut + 1);
        OccurrenceLaw { probs, eta, tail }
    }

    /// P(C ≥ 1).
    pub fn eta(&self) -> f64 {
        self.eta
    }

    /// P(C = c) for c = 0..=c_max.
    pub fn probs(&self) -> &[f64] {
        &self.probs
    }

    /// P(C > c_max).
    pub fn tail(&self) -> f64 {
        self.tail
    }
}

/// log Φ̄(x).
fn log_sf(x: f64) -> f64 {
    0.5f64.ln() + log_erfc(x / std::f64::consts::SQRT_2)
}

/// log Φ(x).
fn log_cdf(x: f64) -> f64 {
    log_sf(-x)
}

/// δ(ε) of P = (1−η)N(0,s²) + ηN(1,s²) vs Q = N(0,s²) (the loss log(1−η+ηe^{(2x−1)/(2s²)})
/// is increasing): δ = ηΦ̄((x*−1)/s) − (e^ε−1+η)Φ̄(x*/s), x* = s² log((e^ε−1+η)/η) + ½;
/// δ = 1 − e^ε for ε ≤ log(1−η) (Balle & Wang 2018 Thm 8 for η = 1; BBG 2018 Thm 2).
pub fn delta_remove(eta: f64, s: f64, eps: f64) -> f64 {
    Remove::at(eta, eps).delta(s)
}

/// The parts of [`delta_remove`] that depend on (η, ε) only, computed once for all the
/// components of a profile point (issue 30; the same operations on the same values, so the
/// same bits as computing them per component).
struct Remove {
    /// Some(δ) when ε ≤ log(1−η) (δ = 1 − e^ε whatever s).
    trivial: Option<f64>,
    /// log(c/η), log η, log c with c = e^ε − 1 + η.
    log_ratio: f64,
    log_eta: f64,
    log_c: f64,
}

impl Remove {
    fn at(eta: f64, eps: f64) -> Self {
        if eta < 1.0 && eps <= (-eta).ln_1p() {
            return Remove {
                trivial: Some(-eps.exp_m1()),
                log_ratio: f64::NAN,
                log_eta: f64::NAN,
                log_c: f64::NAN,
            };
        }
        let c = eps.exp_m1() + eta;
        Remove {
            trivial: None,
            log_ratio: (c / eta).ln(),
            log_eta: eta.ln(),
            log_c: c.ln(),
        }
    }

    fn delta(&self, s: f64) -> f64 {
        if let Some(d) = self.trivial {
            return d;
        }
        let xs = s * s * self.log_ratio + 0.5;
        let a = self.log_eta + log_sf((xs - 1.0) / s);
        let b = self.log_c + log_sf(xs / s);
        let (pos, mag) = log_sub_sign(a, b);
        if pos { mag.exp().min(1.0) } else { 0.0 }
    }
}

/// δ(ε) of the reversed pair, N(0,s²) vs (1−η)N(0,s²) + ηN(1,s²): 0 for ε ≥ −log(1−η), else
/// δ = e^ε c Φ(x*/s) − η e^ε Φ((x*−1)/s), c = e^{−ε} − 1 + η, x* = s² log(c/η) + ½.
pub fn delta_add(eta: f64, s: f64, eps: f64) -> f64 {
    Add::at(eta, eps).delta(s)
}

/// The parts of [`delta_add`] that depend on (η, ε) only (as [`Remove`]).
struct Add {
    /// Some(0) where δ is 0 whatever s.
    trivial: Option<f64>,
    /// log(c/η), ε + log c and log η + ε with c = e^{−ε} − 1 + η.
    log_ratio: f64,
    eps_log_c: f64,
    log_eta_eps: f64,
}

impl Add {
    fn at(eta: f64, eps: f64) -> Self {
        let zero = Add {
            trivial: Some(0.0),
            log_ratio: f64::NAN,
            eps_log_c: f64::NAN,
            log_eta_eps: f64::NAN,
        };
        if eta < 1.0 && eps >= -(-eta).ln_1p() {
            return zero;
        }
        let c = (-eps).exp_m1() + eta;
        if c <= 0.0 {
            return zero;
        }
        Add {
            trivial: None,
            log_ratio: (c / eta).ln(),
            eps_log_c: eps + c.ln(),
            log_eta_eps: eta.ln() + eps,
        }
    }

    fn delta(&self, s: f64) -> f64 {
        if let Some(d) = self.trivial {
            return d;
        }
        let xs = s * s * self.log_ratio + 0.5;
        // (ε + log c) + log Φ(x*/s), as eps + c.ln() + log_cdf(..) associates.
        let a = self.eps_log_c + log_cdf(xs / s);
        let b = self.log_eta_eps + log_cdf((xs - 1.0) / s);
        let (pos, mag) = log_sub_sign(a, b);
        if pos { mag.exp().min(1.0) } else { 0.0 }
    }
}

/// The upper privacy profile δ*(ε) = max(δ_R(ε), δ_R̄(ε)) of one round (module doc) for ε ≥ 0,
/// with the two directions returned separately: (δ_R, δ_R̄).
fn directions(law: &OccurrenceLaw, z: f64, eps: f64) -> (f64, f64) {
    let eta = law.eta;
    let (remove, add) = (Remove::at(eta, eps), Add::at(eta, eps));
    let (mut r, mut a) = (0.0, 0.0);
    for (c, &p) in law.probs.iter().enumerate().skip(1) {
        if p == 0.0 {
            continue;
        }
        let w = p / eta;
        let s = z / c as f64;
        r += w * remove.delta(s);
        a += w * add.delta(s);
    }
    if law.tail > 0.0 {
        // A mutually singular component: H((1−η)Q + ηP_⊥ ‖ Q) = η + (1 − η − e^ε)₊ and
        // H(Q ‖ (1−η)Q + ηP_⊥) = (1 − e^ε(1−η))₊; both dominate every finite shift.
        let w = law.tail / eta;
        r += w * (eta + (1.0 - eta - eps.exp()).max(0.0));
        a += w * (1.0 - eps.exp() * (1.0 - eta)).max(0.0);
    }
    (r.min(1.0), a.min(1.0))
}

/// δ*(ε) for any real ε (module doc): for ε < 0 by the identity
/// δ*(ε) = 1 − e^ε + e^ε δ*(−ε), which holds because δ* is the max of a pair's curve and its
/// reverse's.
pub fn upper_profile(law: &OccurrenceLaw, z: f64, eps: f64) -> f64 {
    if eps >= 0.0 {
        let (r, a) = directions(law, z, eps);
        r.max(a)
    } else {
        let e = eps.exp();
        (-eps.exp_m1() + e * upper_profile(law, z, -eps)).min(1.0)
    }
}

/// Which neighbouring pair Poisson sampling under replace-one is accounted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoissonPair {
    /// (1−q)N(0) + qN(Δ/2) vs (1−q)N(0) + qN(−Δ/2): clipped contributions, absent ones 0
    /// (dp-accounting's REPLACE_ONE). What every dpfl mechanism releases.
    #[default]
    Ball,
    /// The occurrence-law profile: a record Δ from its absent value (BBG 2018), looser.
    Generic,
}

impl PoissonPair {
    /// The pair's name, for outputs.
    pub fn describe(self) -> &'static str {
        match self {
            PoissonPair::Ball => {
                "ball: (1-q)N(0,z^2) + qN(1/2,z^2) vs (1-q)N(0,z^2) + qN(-1/2,z^2) (clipped contributions; dp-accounting REPLACE_ONE)"
            }
            PoissonPair::Generic => {
                "generic: (1-q)N(0,z^2) + qN(1,z^2) vs N(0,z^2) and its reverse (a record one sensitivity from its absent value; Balle-Barthe-Gaboardi profile)"
            }
        }
    }
}

/// log P(X > x) and log Q(X > x) for the ball pair (shifts ±½, noise z, rate q).
fn ball_tails(q: f64, z: f64, x: f64) -> (f64, f64) {
    let l0 = (-q).ln_1p() + log_sf(x / z);
    let lp = super::special::log_add(l0, q.ln() + log_sf((x - 0.5) / z));
    let lq = super::special::log_add(l0, q.ln() + log_sf((x + 0.5) / z));
    (lp, lq)
}

/// The ball pair's privacy loss log P(x)/Q(x) (increasing in x).
fn ball_loss(q: f64, z: f64, x: f64) -> f64 {
    let a = (-q).ln_1p();
    let z2 = 2.0 * z * z;
    super::special::log_add(a, q.ln() + (x - 0.25) / z2)
        - super::special::log_add(a, q.ln() + (-x - 0.25) / z2)
}

/// δ(ε) of the ball pair P = (1−q)N(0,z²) + qN(½,z²) vs Q = (1−q)N(0,z²) + qN(−½,z²) (in
/// units of the replace-one sensitivity, module doc), ε ≥ 0: P(X > x*) − e^ε Q(X > x*) with
/// ℓ(x*) = ε (ℓ increasing, onto ℝ). x* by bisection; an x off x* only lowers the value
/// (x* maximises it), so the result is padded up by more than that second-order error and
/// the subtraction's rounding. The pair is symmetric (mirror image), so this is also the
/// reverse order's curve.
pub fn ball_profile(q: f64, z: f64, eps: f64) -> f64 {
    if q <= 0.0 {
        return 0.0;
    }
    let (mut lo, mut hi) = (-1.0, 1.0);
    while ball_loss(q, z, lo) > eps {
        lo *= 2.0;
    }
    while ball_loss(q, z, hi) < eps {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if ball_loss(q, z, mid) < eps {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let (lp, lq) = ball_tails(q, z, lo);
    let (a, b) = (lp, eps + lq);
    let (pos, mag) = log_sub_sign(a, b);
    let d = if pos { mag.exp() } else { 0.0 };
    let pad = 8.0 * f64::EPSILON * (a.exp() + b.exp()) + 1e-10 * d;
    (d + pad).min(1.0)
}

/// The ball pair's profile for any real ε (the identity of [`upper_profile`]).
fn ball_profile_signed(q: f64, z: f64, eps: f64) -> f64 {
    if eps >= 0.0 {
        ball_profile(q, z, eps)
    } else {
        let e = eps.exp();
        (-eps.exp_m1() + e * ball_profile(q, z, -eps)).min(1.0)
    }
}

/// The pessimistic PMF of one Poisson round under replace-one with the ball pair.
pub fn ball_pmf(q: f64, z: f64, h: f64) -> Result<Pmf> {
    if !(z.is_finite() && z > 0.0) {
        return Err(PrivacyError::invalid(
            "noise_multiplier",
            z,
            "must be finite and > 0",
        ));
    }
    if q == 0.0 {
        return Pmf::from_hockey_stick(h, 0, vec![0.0]);
    }
    profile_pmf(|e| ball_profile_signed(q, z, e), h)
}

/// The pessimistic (dominating) PMF of one round on the grid i·h.
pub fn upper_pmf(law: &OccurrenceLaw, z: f64, h: f64) -> Result<Pmf> {
    if !(z.is_finite() && z > 0.0) {
        return Err(PrivacyError::invalid(
            "noise_multiplier",
            z,
            "must be finite and > 0",
        ));
    }
    if law.eta == 0.0 {
        return Pmf::from_hockey_stick(h, 0, vec![0.0]);
    }
    profile_pmf(|e| upper_profile(law, z, e), h)
}

/// The connect-the-dots PMF of a symmetric profile δ*(ε) (ε ≥ 0 given; the negative half by
/// the identity δ*(−ε) = 1 − e^{−ε} + e^{−ε}δ*(ε)) on the grid i·h, up to where δ* ≤
/// [`LOSS_TAIL`] (the rest at +∞).
fn profile_pmf(profile: impl Fn(f64) -> f64 + Sync, h: f64) -> Result<Pmf> {
    // The grid's upper end: where δ* ≤ LOSS_TAIL, found by doubling then bisection.
    let mut hi = 1.0;
    while profile(hi) > LOSS_TAIL {
        hi *= 2.0;
        if hi / h > MAX_GRID as f64 {
            return Err(PrivacyError::Numerical {
                context: "sampled Gaussian PLD",
                reason: format!("losses beyond {hi} still carry mass; the grid would be too large"),
            });
        }
    }
    let mut lo_e = hi / 2.0;
    if profile(lo_e) <= LOSS_TAIL {
        lo_e = 0.0;
    }
    for _ in 0..30 {
        let mid = 0.5 * (lo_e + hi);
        if profile(mid) <= LOSS_TAIL {
            hi = mid;
        } else {
            lo_e = mid;
        }
    }
    let top = (hi / h).ceil() as i64;
    let n = top as usize + 1;
    // δ* on [0, hi]; the negative half follows from the identity (no more special functions).
    let pos = super::par::map_indices(n, &|i| profile(i as f64 * h));
    let mut deltas = super::par::map_indices(n - 1, &|k| {
        let i = n - 1 - k;
        let eps = -(i as f64) * h;
        let e = eps.exp();
        (-eps.exp_m1() + e * pos[i]).min(1.0)
    });
    deltas.extend_from_slice(&pos);
    if deltas.iter().any(|d| !d.is_finite()) {
        return Err(PrivacyError::Numerical {
            context: "sampled Gaussian PLD",
            reason: "non-finite hockey-stick value".into(),
        });
    }
    Pmf::from_hockey_stick(h, -top, deltas)
}

/// The law of C for `sampling` under `neighbouring`, if this module accounts for it
/// (replace-one; add/remove Poisson is the `pld` module's own curve).
pub fn supported(sampling: &Sampling, neighbouring: Neighbouring) -> bool {
    neighbouring == Neighbouring::ReplaceOne
        && matches!(
            sampling,
            Sampling::WithReplacement { .. }
                | Sampling::WithoutReplacement { .. }
                | Sampling::Poisson { .. }
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Φ(0.5) − Φ(−0.5) = 0.382924922548026 (tables).
    const TV_HALF: f64 = 0.382_924_922_548_026;

    #[test]
    fn binomial_law_by_hand() {
        // K = 2 draws of n = 4: P(C=0) = 9/16, P(C=1) = 6/16, P(C=2) = 1/16, η = 7/16.
        let l = OccurrenceLaw::binomial(2, 0.25);
        assert!((l.eta() - 7.0 / 16.0).abs() < 1e-15);
        let want = [9.0 / 16.0, 6.0 / 16.0, 1.0 / 16.0];
        assert_eq!(l.probs().len(), 3);
        for (a, b) in l.probs().iter().zip(want) {
            assert!((a - b).abs() < 1e-14, "{a} vs {b}");
        }
        // K = 30 of n = 217: P(C > c) ≤ 1e-16 first at c = 10 (P(C ≥ 11) ≈ 6.9e-17).
        let l = OccurrenceLaw::binomial(30, 1.0 / 217.0);
        assert_eq!(l.probs().len(), 11);
        assert!(l.tail() > 1e-18 && l.tail() <= COUNT_TAIL);
    }

    #[test]
    fn profile_at_zero_is_eta_times_total_variation() {
        // Without replacement, η = 1/2, z = 1, ε = 0: δ = η·TV(N(1,1), N(0,1)) = ½·0.3829249.
        let l = OccurrenceLaw::bernoulli(0.5);
        let d = upper_profile(&l, 1.0, 0.0);
        assert!((d - 0.5 * TV_HALF).abs() < 1e-12, "{d}");
        // With replacement K = 2 of n = 4, z = 1, ε = 0: Σ_c P(C=c)·TV(shift c):
        // 6/16·(2Φ(½)−1) + 1/16·(2Φ(1)−1) = 0.375·0.3829249 + 0.0625·0.6826895.
        let l = OccurrenceLaw::binomial(2, 0.25);
        let want = 0.375 * TV_HALF + 0.0625 * 0.682_689_492_137_086;
        let d = upper_profile(&l, 1.0, 0.0);
        assert!((d - want).abs() < 1e-12, "{d} vs {want}");
    }

    #[test]
    fn bbg_amplified_form_by_hand() {
        // ε' = log(1 + η(e^ε − 1)) with η = ½, ε = 1: δ' = η·δ_G(1; z = 1) = ½·0.126936737.
        let l = OccurrenceLaw::bernoulli(0.5);
        let eps1 = (1.0 + 0.5 * (1f64.exp() - 1.0)).ln();
        let dg = 0.308_537_538_725_986_9 - std::f64::consts::E * 0.066_807_201_268_858_06;
        let d = upper_profile(&l, 1.0, eps1);
        assert!((d - 0.5 * dg).abs() < 1e-12, "{d} vs {}", 0.5 * dg);
    }

    #[test]
    fn negative_half_is_the_reverse_identity() {
        let l = OccurrenceLaw::binomial(5, 0.1);
        for &e in &[0.1, 0.7, 2.0] {
            let lhs = upper_profile(&l, 0.8, -e);
            let rhs = 1.0 - (-e).exp() + (-e).exp() * upper_profile(&l, 0.8, e);
            assert!((lhs - rhs).abs() < 1e-14);
            // Never below the trivial curve 1 − e^ε.
            assert!(lhs >= 1.0 - (-e).exp());
        }
    }

    #[test]
    fn pmf_reproduces_the_profile_at_grid_points() {
        let l = OccurrenceLaw::binomial(4, 0.2);
        let pmf = upper_pmf(&l, 1.0, 1e-3).unwrap();
        for &e in &[0.0, 0.25, 0.5, 1.0, 2.0] {
            let want = upper_profile(&l, 1.0, e);
            let got = pmf.delta_for_epsilon(e);
            assert!(
                got >= want - 1e-9 && got <= want + 1e-6,
                "ε {e}: {got} vs {want}"
            );
        }
    }
}
