//! P1D and PVEC: the local randomizer, the analyzer, and the two transports
//! (Cheu, Joseph, Mao & Peng 2022, Algorithms 1–2; digest §2.1–2.2, §5.1 items 2–5).
//!
//! Every analyzer here depends only on the per-label number of ones and the number of users
//! n', so both transports hand the analyzer the same statistic:
//! * **explicit**: a user emits d·(g + s) messages `(label, bit)`, the shuffler permutes the
//!   whole round's messages uniformly (Fisher–Yates on a ChaCha20 stream) and the analyzer
//!   counts; n' is inferred from the number of messages per label (robust to drop-outs,
//!   digest §1.5) and must be the same for every label;
//! * **compact**: a user sends its count vector (k_j ones at label j) as two additive shares
//!   modulo 2⁶⁴, a uniformly random one to the shuffler and the difference to the server;
//!   each side sums what it receives and only the two sums are combined. Since every count
//!   is ≤ g + s and n'·(g + s) < 2⁶⁴ (checked), the modular sum is the true sum. One share
//!   alone is uniform whatever the counts, so neither party sees one user's counts; the sum
//!   is exactly what the explicit transport's shuffled multiset reveals (digest §5.1 item 4).
//!
//! Decisions: inputs are ℓ₂-clipped to Δ₂ (never asserted: clipping is what keeps the
//! privacy claim for any input, digest §5.2 item 10); the scaled value u = w·g/Δ is clamped
//! into [0, g] against floating-point overshoot; the randomized rounding Bernoulli(u − ⌊u⌋)
//! compares lazily read random bits with (u − ⌊u⌋)·2⁶⁴ (`qtdl::bits`, ≈ 10 bits per
//! coordinate instead of a 64-bit word; exact for u − ⌊u⌋ ≥ 2⁻¹², otherwise low by < 2⁻⁶⁴),
//! and any bias would touch unbiasedness only — the privacy proof holds for any rounding of
//! x̂ to {⌊u⌋, ⌊u⌋ + 1} (Lemma 3.1 bounds |x̂_u − x̂'_u| ≤ 2 + …). A user's d
//! Binomial draws are made first (one block fill, [`Binomial::sample_into`]), then their
//! roundings, then the shares (one block fill).

use rand::RngExt;

use super::params::{P1dParams, PvecParams};
use super::{Result, ShuffleError};
use crate::binomial::Binomial;
use crate::qtdl::bits::Bits;
use crate::rng::DpRng;
use crate::sampler;

/// Explicit-mode message limit per user (2²⁸ messages, 1 GiB of `Message`s): beyond it use
/// the compact transport.
pub const MAX_EXPLICIT_MESSAGES: u64 = 1 << 28;

/// One labelled one-bit message of the explicit transport. Carries nothing else: no user id,
/// no position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Message {
    /// The coordinate j ∈ [0, d) this bit belongs to (always 0 for P1D).
    pub label: u32,
    /// One of R1D's g + s bits: the analyzer counts the ones per label.
    pub bit: bool,
}

/// 2⁶⁴: the rounding threshold's scale (frac·2⁶⁴ is an integer for frac ≥ 2⁻¹²).
const ROUNDING_SCALE: f64 = 18_446_744_073_709_551_616.0;

/// R1D's fixed-point rounding x̂ ∈ {⌊u⌋, ⌊u⌋ + 1}, u = w·g/Δ, for an input already in
/// [0, Δ] (Algorithm 1 lines 1–4).
fn p1d_round(w: f64, p: &P1dParams, bits: &mut Bits<'_>) -> u64 {
    let g = p.g as f64;
    let u = (w * g / p.range).clamp(0.0, g);
    // 0 ≤ u ≤ g < 2⁵³: truncation is the floor, exactly (and avoids a libm call).
    let floor = u as u64;
    let frac = u - floor as f64;
    // frac ≤ 1 − 2⁻⁵³, so the threshold is below 2⁶⁴ (a u64 cast, not the slow u128 one);
    // rounding up from u = g cannot happen.
    let up = frac > 0.0 && bits.below_dyadic(u128::from((frac * ROUNDING_SCALE) as u64), 64);
    floor + u64::from(up)
}

/// Algorithm 1's analyzer on a count of ones C over n' users: (Δ/g)·(C − p·s·n').
fn p1d_estimate(p: &P1dParams, ones: u64, users: u64) -> f64 {
    let expected_noise = p.p * p.s as f64 * users as f64;
    p.range / p.g as f64 * (ones as f64 - expected_noise)
}

/// Emits `count` ones and g + s − count zeros at `label`.
fn push_bits(out: &mut Vec<Message>, label: u32, count: u64, total: u64) {
    out.extend((0..count).map(|_| Message { label, bit: true }));
    out.extend((count..total).map(|_| Message { label, bit: false }));
}

/// Uniformly random permutation of a round's messages (the shuffler). Fisher–Yates.
pub fn shuffle_messages(messages: &mut [Message], rng: &mut DpRng) {
    sampler::shuffle(rng, messages);
}

// ---------------------------------------------------------------- P1D

/// P1D's local randomizer and analyzer (scalars in [0, Δ]).
#[derive(Debug, Clone)]
pub struct P1d {
    params: P1dParams,
    noise: Binomial,
}

impl P1d {
    /// Builds the randomizer/analyzer and its Bin(s, p) noise sampler. Errors if the
    /// sampler refuses (s, p) (see [`crate::binomial::Binomial::new`]).
    pub fn new(params: P1dParams) -> Result<Self> {
        let noise = Binomial::new(params.s, params.p)?;
        Ok(P1d { params, noise })
    }
    /// The (n, Δ, g, s, p) of Lemma 3.1 this instance runs with.
    pub fn params(&self) -> &P1dParams {
        &self.params
    }
    /// The number of ones this user emits for x (clamped into [0, Δ]; NaN is refused).
    pub fn count(&self, x: f64, rng: &mut DpRng) -> Result<u64> {
        if x.is_nan() {
            return Err(crate::error::PrivacyError::invalid("x", x, "input is NaN").into());
        }
        let rounded = p1d_round(
            x.clamp(0.0, self.params.range),
            &self.params,
            &mut Bits::new(rng),
        );
        Ok(rounded + self.noise.sample(rng))
    }
    /// The user's g + s explicit messages (label 0).
    pub fn messages(&self, x: f64, rng: &mut DpRng) -> Result<Vec<Message>> {
        let total = self.params.bits_per_user();
        if total > MAX_EXPLICIT_MESSAGES {
            return Err(ShuffleError::Overflow {
                what: "explicit messages per user",
                detail: format!("{total} > {MAX_EXPLICIT_MESSAGES}; use the compact transport"),
            });
        }
        let k = self.count(x, rng)?;
        let mut out = Vec::with_capacity(total as usize);
        push_bits(&mut out, 0, k, total);
        Ok(out)
    }
    /// A1D on a count of ones over `users` users. Errors if the count exceeds
    /// users·(g + s).
    pub fn analyze_count(&self, ones: u64, users: u64) -> Result<f64> {
        let max = users.saturating_mul(self.params.bits_per_user());
        if ones > max {
            return Err(ShuffleError::CountTooLarge {
                what: "P1D ones",
                label: 0,
                count: ones,
                max,
            });
        }
        Ok(p1d_estimate(&self.params, ones, users))
    }
    /// A1D on the shuffled bits (label must be 0; n' inferred from the message count).
    pub fn analyze_messages(&self, messages: &[Message]) -> Result<f64> {
        let (ones, users) = tally(messages, 1, self.params.bits_per_user())?;
        self.analyze_count(ones[0], users)
    }
}

// ---------------------------------------------------------------- PVEC

/// PVEC's vector randomizer RVEC and analyzer AVEC.
#[derive(Debug, Clone)]
pub struct Pvec {
    params: PvecParams,
    noise: Binomial,
}

impl Pvec {
    /// Builds RVEC/AVEC with one Bin(s, p) noise sampler shared by the d coordinates (each
    /// draw is independent). Errors if the sampler refuses (s, p).
    pub fn new(params: PvecParams) -> Result<Self> {
        let noise = Binomial::new(params.p1d.s, params.p1d.p)?;
        Ok(Pvec { params, noise })
    }
    /// The d, Δ₂, scale and per-coordinate P1D parameters of Theorem 3.2 this instance runs
    /// with.
    pub fn params(&self) -> &PvecParams {
        &self.params
    }
    /// The total-variation bound of the Binomial noise sampler (see [`crate::binomial`]),
    /// per coordinate draw.
    pub fn noise_tv_bound(&self) -> f64 {
        self.noise.tv_bound()
    }

    /// RVEC as per-label counts: clip x to ‖x‖₂ ≤ Δ₂, shift each coordinate into [0, 2Δ₂]
    /// (at unit scale: x/Δ₂ + 1 into [0, 2]), and run an independent R1D per coordinate.
    pub fn counts(&self, x: &[f64], rng: &mut DpRng) -> Result<Vec<u64>> {
        let pp = &self.params;
        if x.len() != pp.d {
            return Err(ShuffleError::WrongLength {
                what: "PVEC input",
                expected: pp.d,
                got: x.len(),
            });
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(crate::error::PrivacyError::invalid(
                "x",
                x[i],
                format!("coordinate {i} is not finite"),
            )
            .into());
        }
        let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        let clip = if norm > pp.l2_bound {
            pp.l2_bound / norm
        } else {
            1.0
        };
        let unit = pp.protocol_l2() / pp.l2_bound;
        let shift = pp.protocol_l2();
        let mut out = vec![0u64; x.len()];
        self.noise.sample_into(rng, &mut out);
        let mut bits = Bits::new(rng);
        for (c, &v) in out.iter_mut().zip(x) {
            // x̂ ≤ g and the noise ≤ s, and g + s fits in u64 (checked by the parameters).
            *c += p1d_round(v * clip * unit + shift, &pp.p1d, &mut bits);
        }
        Ok(out)
    }

    /// RVEC as explicit labelled messages: d·(g + s) of them.
    pub fn messages(&self, x: &[f64], rng: &mut DpRng) -> Result<Vec<Message>> {
        let total = self.params.messages_per_user()?;
        if total > MAX_EXPLICIT_MESSAGES || self.params.d > u32::MAX as usize {
            return Err(ShuffleError::Overflow {
                what: "explicit messages per user",
                detail: format!("{total} > {MAX_EXPLICIT_MESSAGES}; use the compact transport"),
            });
        }
        let counts = self.counts(x, rng)?;
        let per = self.params.p1d.bits_per_user();
        let mut out = Vec::with_capacity(total as usize);
        for (j, &k) in counts.iter().enumerate() {
            push_bits(&mut out, j as u32, k, per);
        }
        Ok(out)
    }

    /// AVEC on per-label ones over `users` users: o_j = (Δ/g)(C_j − p·s·n') − n'·Δ₂, times
    /// Δ₂ at unit scale. Errors: wrong length, or a count above users·(g + s).
    pub fn analyze_counts(&self, ones: &[u64], users: u64) -> Result<Vec<f64>> {
        let pp = &self.params;
        if ones.len() != pp.d {
            return Err(ShuffleError::WrongLength {
                what: "PVEC count vector",
                expected: pp.d,
                got: ones.len(),
            });
        }
        let max = users.saturating_mul(pp.p1d.bits_per_user());
        if let Some(j) = ones.iter().position(|&c| c > max) {
            return Err(ShuffleError::CountTooLarge {
                what: "PVEC ones",
                label: j,
                count: ones[j],
                max,
            });
        }
        let recentre = users as f64 * pp.protocol_l2();
        let f = pp.output_factor();
        Ok(ones
            .iter()
            .map(|&c| (p1d_estimate(&pp.p1d, c, users) - recentre) * f)
            .collect())
    }

    /// AVEC on the shuffled explicit messages. The result depends only on the multiset of
    /// messages, so it is invariant under any permutation of them.
    pub fn analyze_messages(&self, messages: &[Message]) -> Result<Vec<f64>> {
        let (ones, users) = tally(messages, self.params.d, self.params.p1d.bits_per_user())?;
        self.analyze_counts(&ones, users)
    }
}

/// Per-label ones and the number of users n' from a shuffled message list: every label must
/// carry the same number of messages, a multiple of g + s.
fn tally(messages: &[Message], d: usize, per_user: u64) -> Result<(Vec<u64>, u64)> {
    let mut ones = vec![0u64; d];
    let mut total = vec![0u64; d];
    for m in messages {
        let j = m.label as usize;
        if j >= d {
            return Err(ShuffleError::LabelOutOfRange {
                label: u64::from(m.label),
                d,
            });
        }
        total[j] += 1;
        ones[j] += u64::from(m.bit);
    }
    let t = total[0];
    if let Some(j) = total.iter().position(|&x| x != t) {
        return Err(ShuffleError::Inconsistent(format!(
            "label 0 has {t} messages, label {j} has {}",
            total[j]
        )));
    }
    if !t.is_multiple_of(per_user) {
        return Err(ShuffleError::Inconsistent(format!(
            "{t} messages per label is not a multiple of g + s = {per_user}"
        )));
    }
    Ok((ones, t / per_user))
}

// ---------------------------------------------------------------- compact transport

/// A user's count vector split into two additive shares modulo 2⁶⁴.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shares {
    /// Uniformly random; goes to the shuffler.
    pub to_shuffler: Vec<u64>,
    /// counts − to_shuffler (mod 2⁶⁴); goes, sealed, to the server.
    pub to_server: Vec<u64>,
}

/// Splits `counts` (each ≤ `max_count`, normally g + s) into two shares. The random share is
/// drawn from the user's own generator.
pub fn share_counts(counts: &[u64], max_count: u64, rng: &mut DpRng) -> Result<Shares> {
    if let Some(j) = counts.iter().position(|&c| c > max_count) {
        return Err(ShuffleError::CountTooLarge {
            what: "count to share",
            label: j,
            count: counts[j],
            max: max_count,
        });
    }
    let mut to_shuffler = vec![0u64; counts.len()];
    rng.inner().fill(&mut to_shuffler[..]);
    let to_server = counts
        .iter()
        .zip(&to_shuffler)
        .map(|(&c, &m)| c.wrapping_sub(m))
        .collect();
    Ok(Shares {
        to_shuffler,
        to_server,
    })
}

/// One side's running sum of shares (the shuffler's or the server's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareSum {
    sum: Vec<u64>,
    users: u64,
}

impl ShareSum {
    /// An empty sum over d labels (all zero, no users yet).
    pub fn new(d: usize) -> Self {
        ShareSum {
            sum: vec![0; d],
            users: 0,
        }
    }
    /// Adds one user's share; a share of the wrong length is refused and nothing is added.
    pub fn add(&mut self, share: &[u64]) -> Result<()> {
        if share.len() != self.sum.len() {
            return Err(ShuffleError::WrongLength {
                what: "share vector",
                expected: self.sum.len(),
                got: share.len(),
            });
        }
        for (s, &x) in self.sum.iter_mut().zip(share) {
            *s = s.wrapping_add(x);
        }
        self.users += 1;
        Ok(())
    }
    /// The number of users whose share has been added (n' for [`reveal`]).
    pub fn users(&self) -> u64 {
        self.users
    }
    /// Adds another partial sum of the same side (sums mod 2⁶⁴ commute, so splitting the
    /// users across threads gives the same result).
    pub fn merge(&mut self, other: &ShareSum) -> Result<()> {
        if other.sum.len() != self.sum.len() {
            return Err(ShuffleError::WrongLength {
                what: "partial share sum",
                expected: self.sum.len(),
                got: other.sum.len(),
            });
        }
        for (s, &x) in self.sum.iter_mut().zip(&other.sum) {
            *s = s.wrapping_add(x);
        }
        self.users += other.users;
        Ok(())
    }
    /// The per-label sum of the shares added so far, modulo 2⁶⁴. On its own it is uniform
    /// and reveals nothing; only combined with the other side's sum by [`reveal`] does it give
    /// the per-label counts of ones.
    pub fn sum(&self) -> &[u64] {
        &self.sum
    }
}

/// Combines the two sides' sums into the per-label total counts and the number of users.
/// Both sides must have summed the same number of users (each user's two shares are a
/// pair; a missing half would corrupt the sum).
pub fn reveal(shuffler: &ShareSum, server: &ShareSum) -> Result<(Vec<u64>, u64)> {
    if shuffler.sum.len() != server.sum.len() {
        return Err(ShuffleError::WrongLength {
            what: "server share sum",
            expected: shuffler.sum.len(),
            got: server.sum.len(),
        });
    }
    if shuffler.users != server.users {
        return Err(ShuffleError::Inconsistent(format!(
            "shuffler summed {} users' shares, server {}",
            shuffler.users, server.users
        )));
    }
    let total = shuffler
        .sum
        .iter()
        .zip(&server.sum)
        .map(|(&a, &b)| a.wrapping_add(b))
        .collect();
    Ok((total, shuffler.users))
}

/// One PVEC round in the compact transport, in process: each user randomizes and shares its
/// counts with its own generator; the shuffler's and the server's sums are combined and
/// analyzed. `user_rngs[i]` is user i's generator. Users are split over the available
/// cores; each draws only from its own generator, so the result does not depend on it.
pub fn compact_round(
    pvec: &Pvec,
    inputs: &[Vec<f64>],
    user_rngs: &mut [DpRng],
) -> Result<Vec<f64>> {
    if inputs.len() != user_rngs.len() {
        return Err(ShuffleError::WrongLength {
            what: "user generators",
            expected: inputs.len(),
            got: user_rngs.len(),
        });
    }
    let d = pvec.params.d;
    let max = pvec.params.p1d.bits_per_user();
    let users_in = |xs: &[Vec<f64>], rngs: &mut [DpRng]| -> Result<(ShareSum, ShareSum)> {
        let (mut shuffler, mut server) = (ShareSum::new(d), ShareSum::new(d));
        for (x, rng) in xs.iter().zip(rngs.iter_mut()) {
            let counts = pvec.counts(x, rng)?;
            let shares = share_counts(&counts, max, rng)?;
            shuffler.add(&shares.to_shuffler)?;
            server.add(&shares.to_server)?;
        }
        Ok((shuffler, server))
    };
    // Threads only pay off on large rounds (spawning costs ~tens of µs).
    let threads = if inputs.len().saturating_mul(d) < 1 << 16 {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    };
    let chunk = inputs.len().div_ceil(threads).max(1);
    let parts: Vec<Result<(ShareSum, ShareSum)>> = if threads == 1 {
        vec![users_in(inputs, user_rngs)]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = inputs
                .chunks(chunk)
                .zip(user_rngs.chunks_mut(chunk))
                .map(|(xs, rngs)| scope.spawn(move || users_in(xs, rngs)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(ShuffleError::Inconsistent(
                            "a randomizer thread panicked".into(),
                        ))
                    })
                })
                .collect()
        })
    };
    let (mut shuffler, mut server) = (ShareSum::new(d), ShareSum::new(d));
    for part in parts {
        let (a, b) = part?;
        shuffler.merge(&a)?;
        server.merge(&b)?;
    }
    let (ones, users) = reveal(&shuffler, &server)?;
    pvec.analyze_counts(&ones, users)
}

/// One PVEC round in the explicit transport, in process: every user's messages are pooled,
/// shuffled with `shuffle_rng` and analyzed.
pub fn explicit_round(
    pvec: &Pvec,
    inputs: &[Vec<f64>],
    user_rngs: &mut [DpRng],
    shuffle_rng: &mut DpRng,
) -> Result<Vec<f64>> {
    if inputs.len() != user_rngs.len() {
        return Err(ShuffleError::WrongLength {
            what: "user generators",
            expected: inputs.len(),
            got: user_rngs.len(),
        });
    }
    let mut pool = Vec::new();
    for (x, rng) in inputs.iter().zip(user_rngs.iter_mut()) {
        pool.extend(pvec.messages(x, rng)?);
    }
    shuffle_messages(&mut pool, shuffle_rng);
    pvec.analyze_messages(&pool)
}
