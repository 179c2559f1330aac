//! The split path of [`super::TruncatedDiscreteLaplace`] (αm > 1): J = Q·2^l + R; the proof
//! note is the parent module's doc.

use super::super::bits::{Bits, FIRST_CHUNK, PEEK_BITS};
use super::{TruncatedDiscreteLaplace, chunk_bound};

/// Four-bit fields of a [`Bits::peek`] window scanned at once by the split path: bits 0–2
/// of each of the 14 fields (applied to the window shifted right by one), and bit 3.
const NIBBLE_LOW3: u64 = 0x0077_7777_7777_7777;
const NIBBLE_TOP: u64 = 0x0088_8888_8888_8888;

/// The split path's constants (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Split {
    /// l: R is uniform on [0, 2^l) before its acceptance.
    pub(super) low: u32,
    /// γ = α·2^l = gamma/2^k (k = the α denominator's bits).
    pub(super) gamma: u128,
    /// 16γ − 1 in units of 2^−k when 1/16 < γ ≤ 1/8 (the four-bit trials), else `None`
    /// (every trial by the general Bernoulli(e^{−γ})).
    pub(super) tie: Option<u128>,
    /// ⌊m/2^l⌋: a larger Q abandons the attempt.
    pub(super) qmax: u64,
    /// c ≥ α·2^42 for R's acceptance lane ([`chunk_bound`]), when it applies.
    pub(super) r_top: Option<u64>,
    /// The first 10-bit chunks of 16γ − 1 and of γ/2 (A₁ on a field 1, A₂), when k ≥ 10
    /// and `tie` is set (`split_tail_lane`).
    pub(super) tops: Option<(u64, u64)>,
}

impl TruncatedDiscreteLaplace {
    /// One attempt after another of the split path (module doc) until one is kept.
    #[inline]
    pub(super) fn draw_split(&self, bits: &mut Bits<'_>, sp: &Split) -> i64 {
        let k = self.den_bits;
        let (low, lmask) = (sp.low, (1u64 << sp.low) - 1);
        let chunk_mask = (1u64 << FIRST_CHUNK) - 1;
        loop {
            // S, then R ∝ e^{−αR}: the acceptance's first chunk follows S and R in the window
            // and decides it when above the bound (as in `fill_uniform_fast`); otherwise the
            // general CKS20 test reads from the same bit on.
            let (negative, r) = loop {
                let win = bits.peek();
                let (negative, r) = (win & 1 == 1, (win >> 1) & lmask);
                if let Some(c) = sp.r_top
                    && r != 0
                    && (win >> (1 + low)) & chunk_mask > (r * c) >> 32
                {
                    bits.advance(1 + low + FIRST_CHUNK);
                    break (negative, r);
                }
                bits.advance(1 + low);
                if bits.bernoulli_exp(u128::from(r) * self.num, k) {
                    break (negative, r);
                }
            };
            // Q: successes before the first failed Bernoulli(e^{−γ}) trial.
            let mut q: u64 = 0;
            let kept = match sp.tie {
                Some(tie) => loop {
                    let win = bits.peek();
                    // Bit 3 of field i set iff field i ≥ 2 (a success decided by 4 bits).
                    let decided = ((win >> 1) & NIBBLE_LOW3).wrapping_add(NIBBLE_LOW3) & NIBBLE_TOP;
                    let open = !decided & NIBBLE_TOP;
                    if open == 0 {
                        q += 14;
                        bits.advance(56);
                        if q > sp.qmax {
                            break false;
                        }
                        continue;
                    }
                    let fast = open.trailing_zeros() / 4;
                    q += u64::from(fast);
                    let field = (win >> (4 * fast)) & 1;
                    bits.advance(4 * fast + 4);
                    // field 0: U < 1/16 < γ; field 1: U = (1 + V)/16 < γ iff V < 16γ − 1.
                    // Then A₂ = [U' < γ/2] and the rest of the chain (`Bits::exp_tail`).
                    let failed = match sp.tops {
                        Some((tie_top, a2_top)) => {
                            self.split_tail_lane(bits, sp, field, tie, tie_top, a2_top)
                        }
                        None => {
                            (field == 0 || bits.below_dyadic(tie, k)) && !bits.exp_tail(sp.gamma, k)
                        }
                    };
                    if failed {
                        break q <= sp.qmax;
                    }
                    q += 1;
                    if q > sp.qmax {
                        break false;
                    }
                },
                None => loop {
                    if !bits.bernoulli_exp(sp.gamma, k) {
                        break true;
                    }
                    q += 1;
                    if q > sp.qmax {
                        break false;
                    }
                },
            };
            if !kept {
                continue;
            }
            let j = (q << low) | r;
            if j > self.m || (negative && j == 0) {
                continue;
            }
            return if negative { -(j as i64) } else { j as i64 };
        }
    }

    /// Whether the trial whose four-bit field was `field` (0 or 1) fails: A₁ (on a field 1,
    /// [V < 16γ − 1] from a 10-bit chunk unless 16γ − 1 = 1), then A₂ = [U' < γ/2] from the
    /// next 10-bit chunk, both read from one window with few branches (their outcomes are
    /// unpredictable); a chunk equal to its threshold's (probability 2^−10) and A₂ = 1 go to
    /// the general code at the same bit, so the bits read and the answer are those of
    /// `(field == 0 || below_dyadic(tie, k)) && !exp_tail(γ, k)`.
    #[inline(always)]
    fn split_tail_lane(
        &self,
        bits: &mut Bits<'_>,
        sp: &Split,
        field: u64,
        tie: u128,
        tie_top: u64,
        a2_top: u64,
    ) -> bool {
        let k = self.den_bits;
        let chunk_mask = (1u64 << FIRST_CHUNK) - 1;
        let w = bits.peek();
        let v = w & chunk_mask;
        // A₁ reads a chunk on a field 1 unless 16γ − 1 = 1 (then A₁ = 1 with no read).
        let reads = u32::from(field == 1 && tie >> k == 0);
        let off = reads * FIRST_CHUNK;
        let a2_chunk = (w >> off) & chunk_mask;
        let a1 = reads == 0 || v < tie_top;
        if (reads == 1 && v == tie_top) || (a1 && a2_chunk == a2_top) {
            return (field == 0 || bits.below_dyadic(tie, k)) && !bits.exp_tail(sp.gamma, k);
        }
        let a2 = a2_chunk < a2_top;
        bits.advance(off + u32::from(a1) * FIRST_CHUNK);
        if a1 && a2 {
            return !bits.exp_tail_from_3(sp.gamma, k);
        }
        a1
    }
}

/// The split path's constants for TDL(m, num/2^k) with αm > 1 (module doc): l the largest
/// with num·2^(l+3) ≤ 2^k (γ ≤ 1/8), 0 when α > 1/8; l < bit length of m then, because
/// α·2^l ≤ 1/8 < αm/8.
pub(super) fn split(m: u64, num: u128, k: u32) -> Split {
    let high = 64 - m.leading_zeros();
    let one = 1u128 << k;
    let mut low = 0;
    while low + 1 < high && num << (low + 4) <= one {
        low += 1;
    }
    let gamma = num << low;
    let tie = if gamma << 3 <= one {
        (gamma << 4).checked_sub(one)
    } else {
        None
    };
    let r_top = chunk_bound(num, k)
        .filter(|&c| 1 + low + FIRST_CHUNK <= PEEK_BITS && c.checked_mul(1 << low).is_some());
    let tops = tie.filter(|_| k >= FIRST_CHUNK).map(|t| {
        let sh = k - FIRST_CHUNK;
        ((t >> sh) as u64, (gamma >> (sh + 1)) as u64)
    });
    Split {
        low,
        gamma,
        tie,
        qmax: m >> low,
        r_top,
        tops,
    }
}
