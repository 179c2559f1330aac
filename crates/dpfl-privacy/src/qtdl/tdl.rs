//! The truncated discrete Laplace distribution TDL(m, α) = L̃(m, α) of Das, Hashemi, Sanghavi
//! & Dhillon, "DP-NormFedAvg" (§4, eq. 3; Lemma 1, eq. 9; App. A), in integer units (the
//! paper's values y/s are the integers y here; divide variances by s² for real units):
//! P[Y = y] = e^{−α|y|}/Z_{m,α} on {−m, …, m}, Z_{m,α} = 1 + 2(1 − e^{−αm})/(e^α − 1).
//!
//! **The sampler is exact** (digest §2.6 open decision; we take option (c), made fast): α is
//! held as a dyadic rational num/2^k (the requested f64 α when k ≤ 120, else rounded *down*
//! to k = 120 — a flatter distribution; every formula here, and the privacy report, uses the
//! rational actually sampled), and every random choice is an exact comparison of uniform
//! random bits with a rational threshold ([`super::bits`]: ChaCha20 output read a few bits at a
//! time; CKS20's Bernoulli(e^{−γ}) built on lazy digit comparisons). Two proposals, each
//! followed by rejection, are available; the cheaper is chosen from the parameters (the choice
//! changes speed, never the output distribution):
//! * *uniform* (αm ≤ 1, which covers every Theorem-1 calibration: αΔ∞ < e^{−1} there): Y
//!   uniform on {−m..m} (Lemire's exact bounded integer on 2m+1 values), accepted with
//!   probability e^{−α|Y|}. The accepted law is ∝ e^{−α|y|} on {−m..m}; acceptance is
//!   Z/(2m+1) ≥ e^{−αm} ≥ e^{−1}, where the digest's option (c) — discrete Laplace then
//!   truncation — accepts only ≈ αm ≈ 10^{−9}…10^{−2}. A draw of the paper's settings costs
//!   ≈ 28 random bits (18 for the index, 10 that decide the acceptance unless the uniform
//!   falls below 2^{−10} + α|Y|).
//! * *split* (αm > 1, e.g. dpfl's corrected m; issue 14, session 8): a sign S (one fair
//!   bit) and a magnitude J = Q·2^l + R, with l the largest such that γ = α·2^l ≤ 1/8 (l = 0
//!   when α > 1/8). R is uniform on [0, 2^l) (l bits) accepted with probability e^{−αR}
//!   (CKS20, acceptance ≥ e^{−1/8}), so P[R = r] ∝ e^{−αr}; Q is the number of successes
//!   before the first failure of independent Bernoulli(e^{−γ}) trials, so P[Q = q] ∝
//!   e^{−γq} = e^{−α2^l q} on {0, 1, …}. S, R and Q are independent, and every j ≥ 0 has one
//!   (q, r) with j = q·2^l + r, hence P[J = j] ∝ e^{−αq2^l}·e^{−αr} = e^{−αj}: J is exactly
//!   geometric with ratio e^{−α}. An attempt is abandoned (and a fresh one started) when Q
//!   passes ⌊m/2^l⌋, when J > m, or when (S = −, J = 0); what is left is
//!   P[Y = y] ∝ e^{−α|y|} on {−m..m} (y ≠ 0 from one (S, J), y = 0 from (+, 0) only).
//!   Each trial is CKS20's Bernoulli(e^{−γ}) with A₁ = [U < γ] decided from U's first four
//!   bits when they are ≥ 2 (U ≥ 1/8 ≥ γ: A₁ = 0, a success; probability 7/8); on 0
//!   (U < 1/16 < γ: A₁ = 1) or 1 (U = (1 + V)/16, A₁ = [V < 16γ − 1], a dyadic comparison)
//!   the trial goes on with A_j ~ Bernoulli(γ/j), j ≥ 2, and succeeds iff the first zero A
//!   has an odd index (`Bits::exp_tail`). So the ≈ 1/(1 − e^{−γ}) ≈ 11 trials of the
//!   corrected m cost one scan of fourteen 4-bit fields of a [`Bits::peek`] window each
//!   (the fields ≤ 1 are found with one add and mask), plus about one CKS20 tail for the
//!   failing trial. No table of transcendental probabilities is needed. For α > 1/8 each
//!   trial is the general [`Bits::bernoulli_exp`] (l = 0, R = 0). R's acceptance has the
//!   uniform path's fast lane (below): the first 10-bit chunk read after S and R decides it
//!   unless it is ≤ ⌊R·c/2^32⌋. This path replaced session 7's *digits* path (independent
//!   bits b_i, P[b_i = 1] = e^{−α2^i}/(1 + e^{−α2^i}), each by a fair bit and a CKS20
//!   Bernoulli(e^{−α2^i}) with α2^i up to ≈ 12): ≈ 89 bits and ≈ 50 ns a draw at the corrected m
//!   (6x the digits path; BENCHMARKS.md), with new seeded draws for αm > 1 (pinned in
//!   `split_path_seeded_draws_are_pinned`; Theorem 1's calibrations, αm ≤ 1, keep theirs).
//!   The failing trial's A₁ and A₂ are read from one window with few branches
//!   (`split_tail_lane`), a shortcut of the same reads as the general code.
//!
//! Conditioning an exact draw on an event by rejection gives the exact conditional law, so
//! both paths sample TDL(m, α) exactly (χ² tests of both paths in `tests/it/samplers.rs`).
//!
//! **Speed without a new law** (issue 14, session 7): [`TruncatedDiscreteLaplace::fill`]
//! returns exactly the draws of one word-by-word bit reader, from keystream fetched in 2 KiB
//! bulk ([`super::bits`]: the bits a read returns do not depend on how the stream is fetched,
//! and the generator is rewound to where the word reader would leave it), and runs the
//! uniform path's common case in a fast lane: one 57-bit window gives Lemire's x (w bits) and
//! the acceptance's first 10-bit chunk u; when x is not rejected, |y| > 0 and
//! u > ⌊|y|·c/2^32⌋ with c = ⌈α·2^42⌉ (so ⌊|y|·c/2^32⌋ ≥ ⌊α|y|·2^10⌋, the threshold's first
//! chunk), the word reader's CKS20 test would read these very bits and accept (A₁ = 0), so
//! the lane returns y having consumed the same w + 10 bits. Every other case (a Lemire
//! rejection, y = 0, a chunk at or below the bound) consumes x and falls back to the general
//! code at the same stream position. The lane is thus a shortcut of the same function of the
//! same bits: exactness is the argument above, and the seeded draws are unchanged (pinned by
//! `seeded_draws_are_those_of_the_session_6_sampler`). At the paper's (m, α) a draw reads
//! w + 10 = 28 bits (0.875 of a 32-bit word), 18 when y = 0.
//! Speed (issue 14, BENCHMARKS.md): a table of the pmf (alias, Knuth–Yao) would need an
//! arbitrary-precision fallback on ties (its entries are transcendental); the split path
//! spends cheap exact trials instead. What is left at the corrected m is branch-heavy work
//! (≈ 1.4 trials a draw leave the four-bit scan, each with data-dependent outcomes), not
//! keystream (≈ 1.4 words a draw).
//!
//! The variance (Lemma 1) has the paper's closed form and a stable path: the closed form
//! cancels catastrophically as αm → 0 (relative error ≈ 10^{−16}/(αm)³), so
//! [`TruncatedDiscreteLaplace::variance`] sums directly for m ≤ 2^20, uses the closed form for
//! αm ≥ 0.1 and otherwise a power series in αm with Euler–Maclaurin power sums.

use super::bits::{Bits, FIRST_CHUNK, PEEK_BITS, lemire_threshold};

mod split;
use crate::error::{PrivacyError, Result};
use crate::rng::DpRng;
use split::{Split, split};

/// Largest support half-width accepted (keeps |y|·num within u128).
pub const MAX_M: u64 = 1 << 40;
/// Largest decay rate accepted.
pub const MAX_ALPHA: f64 = 64.0;
/// Largest power-of-two denominator of the sampled α.
const MAX_DEN_BITS: u32 = 120;
/// Up to this m the variance is summed term by term.
const DIRECT_SUM_MAX: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proposal {
    /// Y uniform on the 2m+1 values (Lemire with `w`-bit draws, reject below `reject`).
    Uniform { w: u32, reject: u64 },
    /// J = Q·2^low + R (module doc).
    Split(Split),
}

/// TDL(m, α) on the integers {−m..m}, sampled exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TruncatedDiscreteLaplace {
    m: u64,
    /// α = num / 2^den_bits exactly; num < 2^53, so `alpha` below is this value exactly.
    num: u128,
    den_bits: u32,
    alpha: f64,
    proposal: Proposal,
    /// The uniform path's fast lane ([`Self::fill`]): an upper bound c/2^32 ≥ α·2^10 in
    /// 32-bit fixed point, when every quantity of the lane fits in u64.
    fast_top: Option<u64>,
}

impl TruncatedDiscreteLaplace {
    /// TDL(m, α); α is rounded down to a dyadic rational with denominator ≤ 2^120 (exact
    /// for every α ≥ 2^{−68}).
    pub fn new(m: u64, alpha: f64) -> Result<Self> {
        if m == 0 || m > MAX_M {
            return Err(PrivacyError::invalid(
                "m",
                m as f64,
                format!("TDL support half-width must lie in [1, {MAX_M}]"),
            ));
        }
        if !(alpha.is_finite() && (0.0..=MAX_ALPHA).contains(&alpha)) {
            return Err(PrivacyError::invalid(
                "alpha",
                alpha,
                format!("TDL decay rate must be finite and in [0, {MAX_ALPHA}]"),
            ));
        }
        let (num, den_bits) = dyadic_floor(alpha);
        let alpha = libm::ldexp(num as f64, -(den_bits as i32));
        let (w, reject) = lemire_threshold(2 * m + 1);
        let mut tdl = TruncatedDiscreteLaplace {
            m,
            num,
            den_bits,
            alpha,
            proposal: Proposal::Uniform { w, reject },
            fast_top: None,
        };
        tdl.fast_top = fast_top(m, num, den_bits, w);
        if alpha * m as f64 > 1.0 {
            tdl.proposal = Proposal::Split(split(m, num, den_bits));
        }
        Ok(tdl)
    }

    /// The support's half-width m.
    pub fn m(&self) -> u64 {
        self.m
    }

    /// The α actually sampled (≤ the requested one).
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// α as (num, k) with α = num/2^k exactly.
    pub fn alpha_rational(&self) -> (u128, u32) {
        (self.num, self.den_bits)
    }

    /// Z_{m,α} = 1 + 2(1 − e^{−αm})/(e^α − 1) (eq. 3), with expm1 so that small α keeps its
    /// digits; 2m + 1 at α = 0.
    pub fn normaliser(&self) -> f64 {
        normaliser(self.m, self.alpha)
    }

    /// P[Y = y].
    pub fn pmf(&self, y: i64) -> f64 {
        if y.unsigned_abs() > self.m {
            return 0.0;
        }
        (-self.alpha * y.unsigned_abs() as f64).exp() / self.normaliser()
    }

    /// P[Y ≥ j], for any integer j.
    pub fn tail(&self, j: i64) -> f64 {
        let m = self.m as i64;
        if j > m {
            return 0.0;
        }
        if j <= -m {
            return 1.0;
        }
        if j <= 0 {
            // P[Y ≥ j] = 1 − P[Y ≤ j − 1] = 1 − P[Y ≥ 1 − j] by symmetry.
            return 1.0 - self.tail(1 - j);
        }
        // Σ_{i=j}^{m} e^{−αi} = e^{−αj}(1 − e^{−α(m−j+1)})/(1 − e^{−α}).
        let count = (m - j + 1) as f64;
        let a = self.alpha;
        let mass = if a == 0.0 {
            count
        } else {
            (-a * j as f64).exp() * (-(-a * count).exp_m1()) / (-(-a).exp_m1())
        };
        (mass / self.normaliser()).min(1.0)
    }

    /// ln P[Y ≥ j] for 1 ≤ j ≤ m, without underflow: −αj + ln(1 − e^{−α(m−j+1)})
    /// − ln(1 − e^{−α}) − ln Z; `None` outside 1..=m.
    pub fn ln_tail(&self, j: i64) -> Option<f64> {
        let m = self.m as i64;
        if j < 1 || j > m {
            return None;
        }
        let count = (m - j + 1) as f64;
        let a = self.alpha;
        let ln_mass = if a == 0.0 {
            count.ln()
        } else {
            -a * j as f64 + (-(-a * count).exp_m1()).ln() - (-(-a).exp_m1()).ln()
        };
        Some(ln_mass - self.normaliser().ln())
    }

    /// Lemma 1 (eq. 9) with s = 1: with x = e^{−α},
    /// V = 2x{1 + x − x^m(m(1−x)+1)² − x^{m+1}} / ((1−x)²{(1−x) + 2x(1−x^m)}).
    /// Cancels as αm → 0; see [`Self::variance`]. m(m+1)/3 (uniform) at α = 0.
    pub fn variance_closed_form(&self) -> f64 {
        let (m, a) = (self.m as f64, self.alpha);
        if a == 0.0 {
            return m * (m + 1.0) / 3.0;
        }
        let x = (-a).exp();
        let w = -(-a).exp_m1(); // 1 − x
        let xm = (-a * m).exp();
        let xm1 = (-a * (m + 1.0)).exp();
        let inner = m * w + 1.0;
        let num = 2.0 * x * (1.0 + x - xm * inner * inner - xm1);
        let den = w * w * (w + 2.0 * x * (-(-a * m).exp_m1()));
        num / den
    }

    /// E[Y²] (integer units), accurate to ~1e−13 relative in every regime (module docs).
    pub fn variance(&self) -> f64 {
        let am = self.alpha * self.m as f64;
        if self.m <= DIRECT_SUM_MAX {
            self.variance_direct()
        } else if am >= 0.1 {
            self.variance_closed_form()
        } else {
            variance_series(self.m, self.alpha)
        }
    }

    /// E[Y²] = 2Σ j²e^{−αj} / (1 + 2Σ e^{−αj}), summed with Neumaier compensation
    /// (positive terms: no cancellation).
    fn variance_direct(&self) -> f64 {
        let (mut a, mut ca, mut b, mut cb) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for j in 1..=self.m {
            let jf = j as f64;
            let e = (-self.alpha * jf).exp();
            neumaier(&mut a, &mut ca, jf * jf * e);
            neumaier(&mut b, &mut cb, e);
        }
        2.0 * (a + ca) / (1.0 + 2.0 * (b + cb))
    }

    /// One exact draw.
    pub fn sample(&self, rng: &mut DpRng) -> i64 {
        self.draw(&mut Bits::new(rng))
    }

    /// Fills `out` with independent draws — the very draws, and the generator left at the
    /// very position, of `out.len()` draws from one word-by-word bit reader — from keystream
    /// fetched in bulk, with the uniform path's common case in a fast lane (module doc).
    pub fn fill(&self, rng: &mut DpRng, out: &mut [i64]) {
        let mut bits = Bits::bulk(rng);
        match (self.proposal, self.fast_top) {
            (Proposal::Uniform { w, reject }, Some(c)) => {
                self.fill_uniform_fast(&mut bits, w, reject, c, out)
            }
            _ => {
                for o in out {
                    *o = self.draw(&mut bits);
                }
            }
        }
    }

    /// [`Self::draw`]'s uniform path with its common case read from one window of stream
    /// bits: x (w bits) for Lemire, then the acceptance's first chunk u (10 bits). When x is
    /// accepted, |y| > 0 and u > ⌊|y|·c/2^32⌋ ≥ ⌊α|y|·2^10⌋ (the threshold's first chunk),
    /// `draw` would accept y having read exactly these w + 10 bits; every other case
    /// consumes x and continues with `draw`'s own code, so the draws are `draw`'s.
    fn fill_uniform_fast(&self, bits: &mut Bits<'_>, w: u32, reject: u64, c: u64, out: &mut [i64]) {
        let n = 2 * self.m + 1;
        let wmask = u64::MAX >> (64 - w);
        let chunk_mask = (1u64 << FIRST_CHUNK) - 1;
        let m = self.m as i64;
        for o in out {
            *o = loop {
                let win = bits.peek();
                // x·n < 2^w·2^(w−8) ≤ 2^64 (fast_top's conditions).
                let prod = (win & wmask) * n;
                if prod & wmask < reject {
                    bits.advance(w);
                    continue;
                }
                let y = (prod >> w) as i64 - m;
                let a = y.unsigned_abs();
                if a == 0 {
                    // Bernoulli(e^0): no bits read.
                    bits.advance(w);
                    break 0;
                }
                if (win >> w) & chunk_mask > (a * c) >> 32 {
                    bits.advance(w + FIRST_CHUNK);
                    break y;
                }
                bits.advance(w);
                if bits.bernoulli_exp(u128::from(a) * self.num, self.den_bits) {
                    break y;
                }
            };
        }
    }

    #[inline]
    fn draw(&self, bits: &mut Bits<'_>) -> i64 {
        let k = self.den_bits;
        match self.proposal {
            Proposal::Uniform { w, reject } => loop {
                let y = bits.uniform_below(2 * self.m + 1, w, reject) as i64 - self.m as i64;
                // |y|·num < 2^40·2^53.
                if bits.bernoulli_exp(u128::from(y.unsigned_abs()) * self.num, k) {
                    return y;
                }
            },
            Proposal::Split(sp) => self.draw_split(bits, &sp),
        }
    }
}
/// c = ⌈α·2^42⌉ = ⌈num·2^(42−k)⌉, the fast lanes' 32-bit fixed-point bound on the first
/// chunk of a threshold α·i (⌊i·c/2^32⌋ ≥ ⌊α·i·2^10⌋), when α > 0, the first chunk is
/// [`FIRST_CHUNK`] bits (k ≥ 10) and c fits in u64.
fn chunk_bound(num: u128, k: u32) -> Option<u64> {
    if num == 0 || k < FIRST_CHUNK {
        return None;
    }
    let sh = k - FIRST_CHUNK;
    let c = if sh >= 32 {
        ((num - 1) >> (sh - 32)) + 1
    } else {
        num.checked_shl(32 - sh)?
    };
    u64::try_from(c).ok()
}

/// The fast lane's constant c ≥ α·2^42 = num·2^(42−k) (rounded up), when the lane applies:
/// α > 0, a first chunk of [`FIRST_CHUNK`] bits (k ≥ 10), x and the chunk within one
/// [`Bits::peek`] window, x·(2m+1) and m·c within u64.
fn fast_top(m: u64, num: u128, k: u32, w: u32) -> Option<u64> {
    let n = 2 * m + 1;
    if num == 0 || k < FIRST_CHUNK || w + FIRST_CHUNK > PEEK_BITS {
        return None;
    }
    if w + (64 - n.leading_zeros()) > 64 {
        return None;
    }
    let c = chunk_bound(num, k)?;
    m.checked_mul(c)?;
    Some(c)
}

/// Z_{m,α} (eq. 3).
pub(crate) fn normaliser(m: u64, alpha: f64) -> f64 {
    if alpha == 0.0 {
        return 2.0 * m as f64 + 1.0;
    }
    1.0 + 2.0 * (-(-alpha * m as f64).exp_m1()) / alpha.exp_m1()
}

/// The largest num/2^k ≤ alpha with k ≤ 120 and num < 2^53 (exact when alpha ≥ 2^{−68}).
fn dyadic_floor(alpha: f64) -> (u128, u32) {
    if alpha == 0.0 {
        return (0, 0);
    }
    let bits = alpha.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = u128::from(bits & ((1u64 << 52) - 1));
    let (mant, e) = if exp == 0 {
        (frac, -1074)
    } else {
        (frac | (1u128 << 52), exp - 1075)
    };
    // alpha ≤ 64 = 2^6 and mant ≥ 2^52 (normal) give e ≤ −46 < 0.
    let k = (-e) as u32;
    let (mut num, mut k) = if k <= MAX_DEN_BITS {
        (mant, k)
    } else {
        (mant >> (k - MAX_DEN_BITS).min(127), MAX_DEN_BITS)
    };
    while num != 0 && num % 2 == 0 && k > 0 {
        num /= 2;
        k -= 1;
    }
    (num, k)
}

fn neumaier(sum: &mut f64, comp: &mut f64, x: f64) {
    let t = *sum + x;
    if sum.abs() >= x.abs() {
        *comp += (*sum - t) + x;
    } else {
        *comp += (x - t) + *sum;
    }
    *sum = t;
}

/// R_p = m^{−(p+1)} Σ_{j=1}^m j^p by Euler–Maclaurin (exact for p ≤ 5; for larger p the
/// dropped B₈ term is below p⁷/(1.2e6·m⁸) relative, negligible for m ≥ 1000).
fn power_sum_ratio(p: u32, m: f64) -> f64 {
    if p == 0 {
        return 1.0;
    }
    let pf = f64::from(p);
    let mut r = 1.0 / (pf + 1.0) + 0.5 / m;
    if p >= 2 {
        r += pf / (12.0 * m * m);
    }
    if p >= 4 {
        r -= pf * (pf - 1.0) * (pf - 2.0) / (720.0 * m.powi(4));
    }
    if p >= 6 {
        r += pf * (pf - 1.0) * (pf - 2.0) * (pf - 3.0) * (pf - 4.0) / (30240.0 * m.powi(6));
    }
    r
}

/// E[Y²] for small a = αm by e^{−αj} = Σ_n (−αj)^n/n!:
/// Σ_{j≤m} j^k e^{−αj} = m^{k+1} Σ_n (−a)^n/n! · R_{n+k}.
pub(crate) fn variance_series(m: u64, alpha: f64) -> f64 {
    let mf = m as f64;
    let a = alpha * mf;
    let (mut s2, mut s0) = (0.0, 0.0);
    let mut coef = 1.0; // (−a)^n / n!
    for n in 0..60u32 {
        let t2 = coef * power_sum_ratio(n + 2, mf);
        let t0 = coef * power_sum_ratio(n, mf);
        s2 += t2;
        s0 += t0;
        if t2.abs() < 1e-18 * s2.abs() && t0.abs() < 1e-18 * s0.abs() {
            break;
        }
        coef *= -a / f64::from(n + 1);
    }
    2.0 * mf * mf * mf * s2 / (1.0 + 2.0 * mf * s0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Purpose;

    fn direct_z(m: u64, a: f64) -> f64 {
        1.0 + 2.0 * (1..=m).map(|j| (-a * j as f64).exp()).sum::<f64>()
    }

    #[test]
    fn normaliser_and_pmf_match_hand_values() {
        // m = 3, α = 0.15: Z = 1 + 2(e^−.15 + e^−.3 + e^−.45) = 1 + 2(0.860708 + 0.740818
        // + 0.637628) = 5.478308.
        let t = TruncatedDiscreteLaplace::new(3, 0.15).unwrap();
        assert!((t.normaliser() - 5.478_308).abs() < 1e-6);
        assert!((t.normaliser() - direct_z(3, 0.15)).abs() < 1e-13);
        let total: f64 = (-3..=3).map(|y| t.pmf(y)).sum();
        assert!((total - 1.0).abs() < 1e-15);
        assert_eq!(t.pmf(4), 0.0);
        assert!((t.pmf(-2) - t.pmf(2)).abs() < 1e-18);
        // P[Y ≥ 2] = (e^−.3 + e^−.45)/Z = 1.378446/5.478308 = 0.251619.
        assert!((t.tail(2) - 0.251_619).abs() < 1e-6);
        assert!((t.tail(-1) - (1.0 - t.tail(2))).abs() < 1e-15);
        assert!((t.ln_tail(2).unwrap() - t.tail(2).ln()).abs() < 1e-14);
        assert_eq!(t.ln_tail(0), None);
        // Far tails keep their logarithm where the probability underflows f64.
        let far = TruncatedDiscreteLaplace::new(4000, 1.0).unwrap();
        assert_eq!(far.tail(3000), 0.0);
        let want = -3000.0 - (-(-1.0f64).exp_m1()).ln() - far.normaliser().ln();
        assert!((far.ln_tail(3000).unwrap() - want).abs() < 1e-9);
        assert_eq!(t.tail(4), 0.0);
        assert_eq!(t.tail(-3), 1.0);
        // α = 0: uniform on 2m+1 points.
        let u = TruncatedDiscreteLaplace::new(4, 0.0).unwrap();
        assert_eq!(u.normaliser(), 9.0);
        assert!((u.variance() - 20.0 / 3.0).abs() < 1e-12);
        assert!((u.variance_closed_form() - 20.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn alpha_is_exact_or_rounded_down() {
        let t = TruncatedDiscreteLaplace::new(10, 1.1204574006574138e-5).unwrap();
        assert_eq!(t.alpha(), 1.1204574006574138e-5);
        let (num, k) = t.alpha_rational();
        assert_eq!(libm::ldexp(num as f64, -(k as i32)), t.alpha());
        // 1e−30 < 2^−68 needs k > 120: rounded down, never up, and close.
        let t = TruncatedDiscreteLaplace::new(10, 1e-30).unwrap();
        assert!(t.alpha() <= 1e-30 && t.alpha() > 1e-30 * (1.0 - 1e-5));
        assert_eq!(t.alpha_rational().1, MAX_DEN_BITS);
        assert!(TruncatedDiscreteLaplace::new(0, 0.1).is_err());
        assert!(TruncatedDiscreteLaplace::new(5, -0.1).is_err());
        assert!(TruncatedDiscreteLaplace::new(5, f64::NAN).is_err());
        assert!(TruncatedDiscreteLaplace::new(MAX_M + 1, 0.1).is_err());
    }

    #[test]
    fn lemma1_closed_form_matches_direct_sum_and_popoviciu() {
        // Hand value: m = 2, α = ln 2 (x = 1/2): E[Y²] = 2(1·½ + 4·¼)/(1 + 2(½ + ¼)) = 3/2.5.
        let t = TruncatedDiscreteLaplace::new(2, std::f64::consts::LN_2).unwrap();
        assert!((t.variance_closed_form() - 1.2).abs() < 1e-14);
        assert!((t.variance() - 1.2).abs() < 1e-14);
        for (m, a) in [
            (9u64, 1.51e-5),
            (413, 1.12e-5),
            (54, 2.22e-6),
            (1000, 0.01),
            (50, 2.0),
        ] {
            let t = TruncatedDiscreteLaplace::new(m, a).unwrap();
            let direct = t.variance();
            assert!(direct <= (m * m) as f64, "Popoviciu");
            let rel = (t.variance_closed_form() - direct).abs() / direct;
            // Cancellation grows like 1e−16/(αm)³: αm = 1.4e−4 at (9, 1.51e−5).
            let tol = (1e-15 / (a * m as f64).powi(3)).clamp(1e-13, 1e-2);
            assert!(rel < tol, "m {m} alpha {a}: rel {rel}");
        }
    }

    #[test]
    fn stable_series_matches_direct_sum_where_the_closed_form_fails() {
        for (m, a) in [(5000u64, 1e-6), (5000, 1e-5), (20_000, 1e-9), (3000, 3e-5)] {
            let direct = TruncatedDiscreteLaplace::new(m, a)
                .unwrap()
                .variance_direct();
            let series = variance_series(m, a);
            assert!(
                (series - direct).abs() / direct < 1e-12,
                "m {m} a {a}: {series} vs {direct}"
            );
        }
        // Worst-case regime (digest §2.8): m = 2^30 + 1, α ≈ 1e−18: ≈ uniform m(m+1)/3.
        let m = (1u64 << 30) + 1;
        let t = TruncatedDiscreteLaplace::new(m, 1e-18).unwrap();
        let uni = (m as f64) * (m as f64 + 1.0) / 3.0;
        assert!((t.variance() - uni).abs() / uni < 1e-8);
        assert!(t.variance() < uni);
    }

    /// `fill` as it was before the fast lane: one word-by-word reader for all draws.
    fn word_reader_fill(t: &TruncatedDiscreteLaplace, rng: &mut DpRng, n: usize) -> Vec<i64> {
        let mut b = Bits::new(rng);
        (0..n).map(|_| t.draw(&mut b)).collect()
    }

    #[test]
    fn fill_returns_the_word_readers_draws_and_leaves_the_generator_alike() {
        // The paper's (m, α) (fast lane), αm = 1 (large acceptance thresholds, many slow
        // acceptances), a wide support (w = 30), α = 0 and the digits path (no fast lane),
        // α below 2^−68 (k = 120).
        for (m, alpha, n) in [
            (413u64, 1.12e-5, 200_000usize),
            (9, 1.512e-5, 100_000),
            (100, 0.01, 100_000),
            (1 << 20, 1e-7, 50_000),
            (4, 0.0, 10_000),
            (30, 0.5, 20_000),
            (1_993_383, 1.12e-5, 5_000),
            (50, 1e-30, 10_000),
        ] {
            let t = TruncatedDiscreteLaplace::new(m, alpha).unwrap();
            let mut a = DpRng::from_seed(11, Purpose::Silo, 5);
            let mut b = DpRng::from_seed(11, Purpose::Silo, 5);
            // Two calls, so the second starts mid-keystream (each call its own reader: the
            // rest of a started word is dropped).
            let mut want = word_reader_fill(&t, &mut a, n / 3);
            want.extend(word_reader_fill(&t, &mut a, n - n / 3));
            let mut got = vec![0i64; n];
            t.fill(&mut b, &mut got[..n / 3]);
            t.fill(&mut b, &mut got[n / 3..]);
            assert!(got == want, "m {m} alpha {alpha}");
            assert_eq!(a.snapshot(), b.snapshot(), "m {m} alpha {alpha}");
        }
    }

    #[test]
    fn seeded_draws_are_those_of_the_session_6_sampler() {
        // Pinned from the sampler before the bulk reader, the fast lane and the u64 long
        // division (commit 6085237): `fill` then 8 `sample`s and the next generator word, so
        // seeded messages and every seeded test are unchanged. FNV-1a of the filled draws.
        // The uniform path only (αm ≤ 1); the split path (αm > 1) replaced session 7's digits
        // path in session 8 and has its own pins (`split_path_seeded_draws_are_pinned`).
        /// (m, α, n, first draws, FNV-1a of all, next word, then 8 single draws).
        type Pin = (u64, f64, usize, [i64; 6], u64, u64, [i64; 8]);
        let pins: [Pin; 3] = [
            (
                413,
                1.12e-5,
                100_000,
                [-51, -227, 365, -236, 345, 242],
                0x724de8613acce6a2,
                1968782068938783172,
                [390, 217, -281, -144, -270, -32, 352, 102],
            ),
            (
                9,
                1.51e-5,
                100_000,
                [-9, 7, 5, 1, 3, 3],
                0x2149848289cd6ce2,
                3302694794416345950,
                [0, -8, -5, -1, -5, 0, 9, 4],
            ),
            (
                100,
                0.01,
                100_000,
                [-22, -5, -11, -83, 7, -44],
                0xf95c76f9bac6b80c,
                12375828750507446281,
                [27, -47, 53, -39, 100, -81, -66, -2],
            ),
        ];
        for (m, alpha, n, first, hash, next, single) in pins {
            let t = TruncatedDiscreteLaplace::new(m, alpha).unwrap();
            let mut r = DpRng::from_seed(2026, Purpose::Silo, 7);
            let mut out = vec![0i64; n];
            t.fill(&mut r, &mut out);
            let h = out.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &y| {
                (h ^ y as u64).wrapping_mul(0x100_0000_01b3)
            });
            let got: Vec<i64> = (0..8).map(|_| t.sample(&mut r)).collect();
            assert_eq!(out[..6], first, "m {m}");
            assert_eq!(h, hash, "m {m}");
            assert_eq!(got, single, "m {m}");
            assert_eq!(r.next_seed(), next, "m {m}");
        }
    }

    /// The pins' check: `fill` of n, FNV-1a of the draws, then 8 `sample`s and the next word.
    fn fill_hash_singles_next(
        t: &TruncatedDiscreteLaplace,
        n: usize,
    ) -> (Vec<i64>, u64, Vec<i64>, u64) {
        let mut r = DpRng::from_seed(2026, Purpose::Silo, 7);
        let mut out = vec![0i64; n];
        t.fill(&mut r, &mut out);
        let h = out.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &y| {
            (h ^ y as u64).wrapping_mul(0x100_0000_01b3)
        });
        let single: Vec<i64> = (0..8).map(|_| t.sample(&mut r)).collect();
        out.truncate(6);
        (out, h, single, r.next_seed())
    }

    #[test]
    fn split_path_seeded_draws_are_pinned() {
        // Pinned from the split path as first committed (issue 14, session 8), so that a
        // faster reader or lane must keep every draw: the corrected m of FMNIST s = 2^12
        // (four-bit trials), a steep α (general trials), and αm = 1.95 with γ = 1/8 exactly.
        type Pin = (u64, f64, usize, [i64; 6], u64, [i64; 8], u64);
        let pins: [Pin; 3] = [
            (
                1_993_383,
                1.12e-5,
                20_000,
                [-49262, -224549, 85616, -209170, -106491, 68830],
                15842847381079693206,
                [-98301, -119245, 25917, -72003, 21244, -4096, 50426, -69982],
                8453221530213027175,
            ),
            (
                30,
                0.5,
                100_000,
                [-1, 0, -1, -1, 0, -1],
                18022753562052692046,
                [3, 3, 2, 0, 0, 2, 2, 0],
                13088560609463360248,
            ),
            (
                2000,
                1.0 / 1024.0,
                50_000,
                [-1390, -549, 168, -947, 75, -782],
                18428811857779057992,
                [-9, -1555, 122, -593, -448, 631, -415, 951],
                833545421918479086,
            ),
        ];
        for (m, alpha, n, first, hash, single, next) in pins {
            let t = TruncatedDiscreteLaplace::new(m, alpha).unwrap();
            assert!(matches!(t.proposal, Proposal::Split(_)), "m {m}");
            let got = fill_hash_singles_next(&t, n);
            assert_eq!(got, (first.to_vec(), hash, single.to_vec(), next), "m {m}");
        }
    }

    #[test]
    fn split_path_draws_by_hand() {
        // α = 2^−10, m = 2000 (αm = 1.95): l = 7 (α·2^7 = 1/8 = γ), ⌊2000/128⌋ = 15, and
        // c = 2^32, so R's lane accepts when the 10-bit chunk exceeds R itself (α·R·2^10 = R).
        let t = TruncatedDiscreteLaplace::new(2000, 1.0 / 1024.0).unwrap();
        let Proposal::Split(sp) = t.proposal else {
            panic!("{:?}", t.proposal)
        };
        assert_eq!(
            (sp.low, sp.gamma, sp.tie, sp.qmax, sp.r_top),
            (7, 128, Some(1024), 15, Some(1 << 32))
        );
        let mut rng = DpRng::from_seed(9, Purpose::Silo, 0);
        // 1. S = 1 (−); R = 5; chunk 6 > 5: accepted (U ≥ 6/1024 > α·5). Q: field 15 and
        // field 2 succeed (U ≥ 1/8 ≥ γ); field 1 ties, V < 16γ − 1 = 1 always, so A₁ = 1;
        // A₂ = [U < γ/2 = 1/16]: chunk 100 ≥ 64 = 2^10/16, A₂ = 0, K = 2 even: failure.
        // Q = 2: J = 2·128 + 5 = 261, y = −261, after 40 bits (then the sentinel 0b1011).
        let bits = 1 | 5 << 1 | 6 << 8 | 0xf << 18 | 2 << 22 | 1 << 26 | 100 << 30 | 0b1011 << 40;
        let mut b = Bits::primed(&mut rng, bits, 44);
        assert_eq!(t.draw(&mut b), -261);
        assert_eq!(b.take(4), 0b1011);
        drop(b);
        // 2. S = 0; R = 0 (accepted, e^0 = 1, no bit read). Q: field 0 (U < 1/16 < γ,
        // A₁ = 1), A₂: chunk 10 < 64 so A₂ = 1; A₃ = [U < γ/3 = 1/24]: 1/24 = 0.0A..₂₅₆,
        // byte 200 > 10 so A₃ = 0, K = 3 odd: success. Field 3: success. Field 0, A₂ by
        // chunk 100: K = 2, failure. Q = 2: y = 256, after 48 bits.
        let bits = 10u64 << 12 | 200 << 22 | 3 << 30 | 100 << 38 | 0b1011 << 48;
        let mut b = Bits::primed(&mut rng, bits, 52);
        assert_eq!(t.draw(&mut b), 256);
        assert_eq!(b.take(4), 0b1011);
        drop(b);
        // 3. R's acceptance by the general test: chunk 5 = R·α·2^10 ties, and the threshold
        // has no further digit, so U ≥ α·R: accepted (the same 18 bits). Q: field 0, A₂ by
        // chunk 100: failure at once. y = −5.
        let bits = 1 | 5 << 1 | 5 << 8 | 100 << 22 | 0b1011 << 32;
        let mut b = Bits::primed(&mut rng, bits, 36);
        assert_eq!(t.draw(&mut b), -5);
        assert_eq!(b.take(4), 0b1011);
    }

    #[test]
    fn the_fast_lane_threshold_bounds_the_first_chunk_from_above() {
        // α = 1.12e−5 = num/2^69 (num odd, 53 bits): c = ⌈num/2^27⌉ ≥ α·2^42 = 49,258,682.3…,
        // and within 1 of it.
        let t = TruncatedDiscreteLaplace::new(413, 1.12e-5).unwrap();
        let (num, k) = t.alpha_rational();
        assert_eq!(k, 69);
        let c = t.fast_top.unwrap();
        assert_eq!(u128::from(c), num.div_ceil(1 << 27));
        let exact = 1.12e-5 * 2f64.powi(42);
        assert!(
            c as f64 >= exact && (c as f64 - exact) < 1.0,
            "{c} vs {exact}"
        );
        // No lane for α = 0, for the digits path's wide supports beyond u64, or at k < 10.
        assert_eq!(
            TruncatedDiscreteLaplace::new(4, 0.0).unwrap().fast_top,
            None
        );
        assert_eq!(
            TruncatedDiscreteLaplace::new(1 << 30, 1e-12)
                .unwrap()
                .fast_top,
            None
        );
        assert_eq!(
            TruncatedDiscreteLaplace::new(1, 0.5).unwrap().fast_top,
            None
        );
    }

    #[test]
    fn both_proposals_are_used_and_stay_in_support() {
        let mut rng = DpRng::from_seed(3, Purpose::Silo, 0);
        // 2·413 + 1 = 827 values, 18-bit Lemire draws, 2^18 mod 827 = 812.
        let flat = TruncatedDiscreteLaplace::new(413, 1.12e-5).unwrap();
        assert_eq!(flat.proposal, Proposal::Uniform { w: 18, reject: 812 });
        // α = 0.5 > 1/8: no uniform low part, general trials of Bernoulli(e^{−1/2}).
        let steep = TruncatedDiscreteLaplace::new(1000, 0.5).unwrap();
        assert_eq!(
            steep.proposal,
            Proposal::Split(Split {
                low: 0,
                gamma: 1,
                tie: None,
                qmax: 1000,
                r_top: None,
                tops: None
            })
        );
        // Corrected m = 1,993,383, α = 1.12e−5 = num/2^69: 2^13·α = 0.092 ≤ 1/8 < 2^14·α;
        // ⌊1993383/8192⌋ = 243.
        let wide = TruncatedDiscreteLaplace::new(1_993_383, 1.12e-5).unwrap();
        let Proposal::Split(sp) = wide.proposal else {
            panic!("{:?}", wide.proposal)
        };
        let (num, k) = wide.alpha_rational();
        assert_eq!((sp.low, sp.qmax, k), (13, 243, 69));
        assert_eq!(sp.gamma, num << 13);
        assert_eq!(sp.tie, Some((num << 17) - (1 << 69)));
        assert_eq!(sp.r_top, wide.fast_top);
        for t in [flat, steep, wide] {
            let mut out = vec![0i64; 10_000];
            t.fill(&mut rng, &mut out);
            assert!(out.iter().all(|y| y.unsigned_abs() <= t.m()));
            assert!(t.sample(&mut rng).unsigned_abs() <= t.m());
        }
        // Boundaries: m = 1 at α = 64 (almost always 0), and α = 0 (uniform, no acceptance
        // test).
        let spike = TruncatedDiscreteLaplace::new(1, 64.0).unwrap();
        assert!((0..1000).all(|_| spike.sample(&mut rng).abs() <= 1));
        let uni = TruncatedDiscreteLaplace::new(2, 0.0).unwrap();
        let mut seen = [false; 5];
        for _ in 0..200 {
            seen[(uni.sample(&mut rng) + 2) as usize] = true;
        }
        assert_eq!(seen, [true; 5]);
    }
}
