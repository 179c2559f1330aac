//! A numerical accountant for PVEC's release (Cheu, Joseph, Mao & Peng 2022, Algorithm 2;
//! digest `shuffle-private-sco.md` §2.2) that replaces Theorem 3.2's constants (ε̂ =
//! ε/(18√ln(1/γ)), Lemma A.1's ln((1+α)/(1−α)) and Chernoff δ, Lemma 3.3's composition) by
//! the Rényi divergences of the binomial mechanism, summed exactly over its support (issue 32
//! item 2).
//!
//! **What is released.** Behind a trusted shuffler the analyzer's view of coordinate j is the
//! count C_j = Σ_i x̂_ij + Bin(m, p), m = n·s (digest §2.1: the multiset is a function of the
//! count). A silo's own summed counts (no trusted shuffler, [`super::local`]) are the same
//! mechanism with m = K·s. The d coordinates have independent noise.
//!
//! **One record's change.** Replacing user 1's x by x′ (‖x‖, ‖x′‖ ≤ Δ₂ after clipping) moves
//! u_j = g(x_j + Δ₂)/(2Δ₂) by v_j with ‖v‖₂ ≤ g. Randomised rounding x̂ = ⌊u + V⌋ (V uniform,
//! the same V for x and x′: a coupling) moves x̂_j by a_j ≤ min(g, ⌈v_j⌉) < v_j + 1, so
//! Σ_j a_j² ≤ S₂ = min(d·g², g² + 2g√d + d) (Cauchy–Schwarz on Σ v_j). The output is a
//! mixture over the coupled roundings and exp((α−1)D_α) is jointly convex, so the worst
//! coupled pair bounds the mixture (Proposition: van Erven & Harremoës 2014, Thm 13).
//! The implemented rounding compares bits with ⌊frac·2⁶⁴⌋ (`protocol.rs`): it differs from
//! the coupling with probability < 2⁻⁶³ per coordinate, which goes into δ.
//!
//! **Per coordinate (exact).** For P = a + Bin(m, p), Q = Bin(m, p), D_α(P‖Q) = ∞ (P puts mass
//! on m + a), so we use δ-approximate RDP (Bun & Steinke 2016 Def. 8.1, §8; the rule of
//! `accountant::approximate`): P = (1 − η)P′ + ηE with P′ = P conditioned on the window W
//! where Q > 0, and D_α(P′‖Q) = (ln Σ_{k∈W} P(k)^α Q(k)^{1−α} − α ln(1 − η))/(α − 1), summed
//! exactly over W (both directions; the larger is kept). W is also cut to mean ± 10σ and the
//! binomial mass outside that band is bounded by Hoeffding, 2·exp(−2(10σ)²/m), added to η.
//!
//! **Over the coordinates and releases.** R_α(a) ≤ K_α·a² with K_α = max_{1≤a≤g} R_α(a)/a²
//! (computed for every a), so one release is Σ_j η_j-approximately (K_α·S₂)-RDP, with
//! Σ_j η_j ≤ d·η(g) + d·2⁻⁶³ (η grows with a). Releases compose by adding curves and δ's
//! (Bun & Steinke 2016 Lemma 8.3); the curve converts to (ε, δ) by Balle et al. 2020 Prop. 12
//! (`accountant::rdp::delta_from_rdp`). The Binomial sampler's total-variation error
//! (`crate::binomial`, `tv` per draw) adds (1 + e^ε)·draws·tv.
//!
//! Decisions (each the safe reading): RDP rather than a PLD, because the worst shift profile
//! (a_j) is only known through S₂ and RDP is additive over coordinates (a PLD of one profile
//! would not bound the others); the per-a maximum is taken over all a ∈ [1, g]; the
//! calibration ([`calibrate_exact`]) keeps the paper's g ≥ 2Δ₂√n but asks g ≥ 4√d (not √d)
//! so the rounding's extra √d costs at most (1 + 1/4)² in S₂, and p = 0.49 (the protocol
//! needs p < ½; p(1 − p) is then 0.9996 of its maximum).

use crate::accountant::rdp::delta_from_rdp;
use crate::accountant::special::log_comb;
use crate::error::PrivacyError;

use super::Result;
use super::params::{P1dParams, PvecCalibration, PvecParams, PvecRule, Scale};

/// The orders α of the curves (a subset of `rdp::default_orders`: fewer orders only loosen
/// the conversion, never under-report).
pub const ORDERS: [f64; 30] = [
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 14.0, 16.0, 20.0,
    24.0, 28.0, 32.0, 40.0, 48.0, 56.0, 64.0, 96.0, 128.0, 192.0, 256.0, 512.0, 1024.0,
];

/// A per-draw total-variation bound for calibrating before the sampler exists: the Binomial
/// table's bound is ≈ 1.1e-19 at n = 10⁸ (`crate::binomial`); callers check the built
/// sampler's bound against it.
pub const CALIBRATION_TV: f64 = 1e-18;

/// The noise-bit probability [`calibrate_exact`] uses.
pub const CALIBRATED_P: f64 = 0.49;

/// Band half-width in standard deviations (module docs).
const BAND: f64 = 10.0;

/// One coordinate's shift-a binomial pair: the larger Rényi divergence of the two directions
/// at each of [`ORDERS`] (after conditioning on the window) and the mass η conditioned away.
#[derive(Debug, Clone, PartialEq)]
pub struct ShiftCurve {
    /// max(D_α(P′‖Q), D_α(Q′‖P)) per order.
    pub rdp: Vec<f64>,
    /// η: the larger of the two conditioned-away masses (an upper bound).
    pub eta: f64,
}

/// The binomial's log pmf on [lo, hi] and the Hoeffding bound of the mass outside the band.
struct Table {
    lo: u64,
    log_pmf: Vec<f64>,
    band_lo: u64,
    band_hi: u64,
    band_tail: f64,
}

impl Table {
    fn new(m: u64, p: f64, reach: u64) -> Table {
        let mf = m as f64;
        let sd = (mf * p * (1.0 - p)).sqrt();
        let mean = mf * p;
        let band_lo = (mean - BAND * sd).floor().max(0.0) as u64;
        let band_hi = ((mean + BAND * sd).ceil().min(mf)) as u64;
        // P(B < band_lo) ≤ exp(−2(mean − band_lo + 1)²/m) and the same above (Hoeffding).
        let mut band_tail = 0.0;
        if band_lo > 0 {
            band_tail += (-2.0 * (mean - band_lo as f64 + 1.0).powi(2) / mf).exp();
        }
        if band_hi < m {
            band_tail += (-2.0 * (band_hi as f64 + 1.0 - mean).powi(2) / mf).exp();
        }
        let lo = band_lo.saturating_sub(reach);
        let hi = band_hi.saturating_add(reach).min(m);
        let (lp, lq) = (p.ln(), (1.0 - p).ln());
        let log_pmf = (lo..=hi)
            .map(|k| {
                let kf = k as f64;
                log_comb(mf, kf) + kf * lp + (mf - kf) * lq
            })
            .collect();
        Table {
            lo,
            log_pmf,
            band_lo,
            band_hi,
            band_tail,
        }
    }
    fn at(&self, k: u64) -> f64 {
        self.log_pmf[(k - self.lo) as usize]
    }
    /// Σ_{k ∈ [a, b]} pmf(k) over band points (0 if empty).
    fn mass(&self, a: u64, b: u64) -> f64 {
        if a > b {
            return 0.0;
        }
        (a..=b).map(|k| self.at(k).exp()).sum()
    }
}

/// ln Σ exp(x_i), stable.
fn log_sum_exp(xs: impl Iterator<Item = f64> + Clone) -> f64 {
    let top = xs.clone().fold(f64::NEG_INFINITY, f64::max);
    if top == f64::NEG_INFINITY {
        return top;
    }
    top + xs.map(|x| (x - top).exp()).sum::<f64>().ln()
}

fn check(m: u64, p: f64) -> Result<()> {
    if m == 0 || !(p > 0.0 && p < 1.0) {
        return Err(PrivacyError::invalid("m, p", p, "need m >= 1 trials and p in (0, 1)").into());
    }
    Ok(())
}

fn shift_curve_from(t: &Table, m: u64, a: u64) -> ShiftCurve {
    // Direction 1: P = a + B against Q = B, on k (values of B) with k + a ≤ m.
    // (Empty when a > m: then nothing is conditioned on and the divergence is ∞.)
    let w1 = if a > m {
        (1, 0)
    } else {
        (t.band_lo, t.band_hi.min(m - a))
    };
    // Direction 2: Q = B against P = a + B, on k ≥ a.
    let w2 = (t.band_lo.max(a), t.band_hi);
    let eta1 = if a > m {
        1.0
    } else {
        t.band_tail + t.mass(w1.1 + 1, t.band_hi)
    };
    let eta2 = t.band_tail
        + if w2.0 > t.band_lo {
            t.mass(t.band_lo, w2.0 - 1)
        } else {
            0.0
        };
    let eta = eta1.max(eta2);
    let rdp = ORDERS
        .iter()
        .map(|&alpha| {
            let d1 = if w1.0 > w1.1 || eta1 >= 1.0 {
                f64::INFINITY
            } else {
                let s = log_sum_exp(
                    (w1.0..=w1.1).map(|k| alpha * t.at(k) + (1.0 - alpha) * t.at(k + a)),
                );
                (s - alpha * (-eta1).ln_1p()) / (alpha - 1.0)
            };
            let d2 = if w2.0 > w2.1 || eta2 >= 1.0 {
                f64::INFINITY
            } else {
                let s = log_sum_exp(
                    (w2.0..=w2.1).map(|k| alpha * t.at(k) + (1.0 - alpha) * t.at(k - a)),
                );
                (s - alpha * (-eta2).ln_1p()) / (alpha - 1.0)
            };
            // Floating-point sums: rounded up by a relative 1e-9.
            d1.max(d2).max(0.0) * (1.0 + 1e-9)
        })
        .collect();
    ShiftCurve {
        rdp,
        eta: eta * (1.0 + 1e-9),
    }
}

/// The exact (windowed) curve of one coordinate shifted by `a` ≥ 1 (module docs).
pub fn shift_curve(m: u64, p: f64, a: u64) -> Result<ShiftCurve> {
    check(m, p)?;
    if a == 0 {
        return Err(PrivacyError::invalid("a", 0.0, "the shift must be at least 1").into());
    }
    let t = Table::new(m, p, a);
    Ok(shift_curve_from(&t, m, a))
}

/// One PVEC release's δ-approximate RDP curve (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseCurve {
    /// K_α·S₂ per order of [`ORDERS`].
    pub rdp: Vec<f64>,
    /// δ of one release: d·η(g) + d·2⁻⁶³.
    pub tail: f64,
    /// S₂, the bound on Σ_j a_j².
    pub shift_sq: f64,
}

/// The curve of one release of d coordinates, m binomial trials each, granularity g.
pub fn release_curve(m: u64, p: f64, g: u64, d: u64) -> Result<ReleaseCurve> {
    check(m, p)?;
    if g == 0 || d == 0 {
        return Err(PrivacyError::invalid("g, d", 0.0, "need g >= 1 and d >= 1").into());
    }
    let t = Table::new(m, p, g);
    let mut k = vec![0.0f64; ORDERS.len()];
    let mut eta: f64 = 0.0;
    for a in 1..=g {
        let c = shift_curve_from(&t, m, a);
        let a2 = (a * a) as f64;
        for (ki, r) in k.iter_mut().zip(&c.rdp) {
            *ki = ki.max(r / a2);
        }
        eta = eta.max(c.eta);
    }
    let (gf, df) = (g as f64, d as f64);
    let shift_sq = (df * gf * gf).min(gf * gf + 2.0 * gf * df.sqrt() + df);
    let rounding = 2f64.powi(-63);
    Ok(ReleaseCurve {
        rdp: k.iter().map(|ki| ki * shift_sq).collect(),
        tail: df * (eta + rounding),
        shift_sq,
    })
}

impl ReleaseCurve {
    /// δ at ε of `releases` such releases composed, plus (1 + e^ε)·`tv_total` (the sampler's
    /// total-variation error over every draw of the run).
    pub fn delta(&self, releases: u64, epsilon: f64, tv_total: f64) -> f64 {
        let r = releases as f64;
        let curve: Vec<f64> = self.rdp.iter().map(|x| x * r).collect();
        let d = delta_from_rdp(&ORDERS, &curve, epsilon) + r * self.tail;
        (d + (1.0 + epsilon.exp()) * tv_total).min(1.0)
    }

    /// An ε (the smallest to a relative 1e-6 above the first fitting power-of-two multiple of
    /// 0.01) with [`Self::delta`] ≤ `delta`; `f64::INFINITY` if none up to ε = 500.
    pub fn epsilon(&self, releases: u64, delta: f64, tv_total: f64) -> f64 {
        let fits = |e: f64| self.delta(releases, e, tv_total) <= delta;
        if fits(0.0) {
            return 0.0;
        }
        // Doubling, not a fixed top: the sampler's (1 + e^ε) term grows without bound.
        let (mut lo, mut hi) = (0.0, 0.01);
        while !fits(hi) {
            lo = hi;
            hi *= 2.0;
            if hi > 500.0 {
                return f64::INFINITY;
            }
        }
        while hi - lo > 1e-6 * hi {
            let mid = 0.5 * (lo + hi);
            if fits(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }
}

/// ε at `delta` of one release (the [`crate::PrivacyEvent::PvecSum`] event), memoised: a
/// ledger re-accounts its events at every charge.
pub fn release_epsilon(
    trials: u64,
    p: f64,
    granularity: u64,
    dimension: u64,
    sampler_tv: f64,
    delta: f64,
) -> Result<f64> {
    type Key = (u64, u64, u64, u64, u64, u64);
    static CACHE: std::sync::Mutex<Vec<(Key, f64)>> = std::sync::Mutex::new(Vec::new());
    if !(sampler_tv.is_finite() && sampler_tv >= 0.0 && delta > 0.0 && delta < 1.0) {
        return Err(PrivacyError::invalid(
            "sampler_tv, delta",
            delta,
            "need sampler_tv >= 0 finite and delta in (0, 1)",
        )
        .into());
    }
    let key = (
        trials,
        p.to_bits(),
        granularity,
        dimension,
        sampler_tv.to_bits(),
        delta.to_bits(),
    );
    if let Ok(cache) = CACHE.lock()
        && let Some(&(_, e)) = cache.iter().find(|(k, _)| *k == key)
    {
        return Ok(e);
    }
    let e = release_curve(trials, p, granularity, dimension)?.epsilon(1, delta, sampler_tv);
    if let Ok(mut cache) = CACHE.lock() {
        if cache.len() >= 256 {
            cache.clear();
        }
        cache.push((key, e));
    }
    Ok(e)
}

/// The (ε at δ) of `params` for `users` users summed per release (n behind a trusted
/// shuffler, K for a silo's own counts), `releases` releases per record, `tv` the sampler's
/// total-variation bound per draw.
pub fn pvec_epsilon(
    params: &PvecParams,
    users: u64,
    releases: u64,
    delta: f64,
    tv: f64,
) -> Result<f64> {
    let p1d = &params.p1d;
    let m = users.saturating_mul(p1d.s);
    let curve = release_curve(m, p1d.p, p1d.g, params.d as u64)?;
    let draws = users as f64 * params.d as f64 * releases as f64;
    Ok(curve.epsilon(releases, delta, draws * tv))
}

/// PVEC parameters whose release meets (ε, δ) by this accountant, `releases` times composed:
/// g = ⌈max(2Δ₂√n, 4√d, 4)⌉, p = [`CALIBRATED_P`], and the fewest noise bits s per user (to
/// 0.1%, rounded up). `tv` is the sampler's per-draw total-variation bound. Errors on bad
/// input or if no s below 2⁴⁰ suffices.
#[allow(clippy::too_many_arguments)]
pub fn calibrate_exact(
    n: u64,
    d: usize,
    l2_bound: f64,
    epsilon: f64,
    delta: f64,
    scale: Scale,
    releases: u64,
    tv: f64,
) -> Result<PvecParams> {
    if !(epsilon.is_finite() && epsilon > 0.0 && delta > 0.0 && delta < 1.0) {
        return Err(PrivacyError::invalid(
            "epsilon, delta",
            epsilon,
            "need epsilon > 0 finite and delta in (0, 1)",
        )
        .into());
    }
    if n == 0 || d == 0 || releases == 0 {
        return Err(PrivacyError::invalid("n, d, releases", 0.0, "must be at least 1").into());
    }
    let base = PvecParams::with_p1d(n, d, l2_bound, scale, 4, 1, CALIBRATED_P)?;
    let eff = base.protocol_l2();
    let g_real = (2.0 * eff * (n as f64).sqrt())
        .max(4.0 * (d as f64).sqrt())
        .max(4.0);
    let g = g_real.ceil() as u64;
    let build = |s: u64| PvecParams::with_p1d(n, d, l2_bound, scale, g, s, CALIBRATED_P);
    let fits = |s: u64| -> Result<bool> {
        Ok(pvec_epsilon(&build(s)?, n, releases, delta, tv)? <= epsilon)
    };
    let (mut lo, mut hi) = (0u64, 1u64);
    while !fits(hi)? {
        lo = hi;
        hi = hi.checked_mul(2).filter(|&h| h <= 1 << 40).ok_or_else(|| {
            PrivacyError::OutsideValidity {
                formula: "PVEC exact accountant",
                reason: format!("no s <= 2^40 meets epsilon = {epsilon} at delta = {delta}"),
            }
        })?;
    }
    while hi - lo > 1 + hi / 1000 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let mut params = build(hi)?;
    params.calibration = Some(PvecCalibration {
        epsilon,
        delta,
        gamma: 0.0,
        delta_hat: 0.0,
        epsilon_hat: 0.0,
        rule: PvecRule::Accountant,
    });
    Ok(params)
}

/// The per-coordinate noise standard deviation of `params`' release in output units,
/// (Δ/g)·√(s·n·p(1−p))·factor (the binomial part only; the rounding adds (Δ/g)²·n/4 at most).
pub fn noise_std(params: &PvecParams) -> f64 {
    let p: &P1dParams = &params.p1d;
    p.range / p.g as f64
        * ((p.s as f64) * (p.n as f64) * p.p * (1.0 - p.p)).sqrt()
        * params.output_factor()
}

#[cfg(test)]
#[path = "pvec_exact_tests.rs"]
mod tests;
