//! Samplers: which records a silo uses in a round, which silos take part, in what order a
//! shuffler forwards messages. Each sampler validates its sizes once, at construction, and
//! draws from a [`DpRng`] only.
//!
//! The sampling scheme is part of the privacy guarantee (amplification by subsampling
//! depends on it), so each sampler names the [`crate::event::Sampling`] it realises.

use rand::seq::SliceRandom;
use rand_distr::{Binomial, Distribution, Gamma};
use serde::{Deserialize, Serialize};

use crate::error::{PrivacyError, Result};
use crate::event::Sampling;
use crate::rng::DpRng;

/// K indices i.i.d. uniform on {0..n-1} (with replacement), fresh each call.
/// Lowy & Razaviyayn, Algorithm 2 line 6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WithReplacement {
    n: usize,
    k: usize,
}

impl WithReplacement {
    /// A sampler of `k` draws from `n` records; refuses n = 0, k = 0 or k > n.
    pub fn new(n: usize, k: usize) -> Result<Self> {
        check_sizes(n, k)?;
        Ok(WithReplacement { n, k })
    }
    /// Replaces `out` with K fresh i.i.d. uniform indices.
    pub fn draw(&self, rng: &mut DpRng, out: &mut Vec<usize>) {
        out.clear();
        out.extend((0..self.k).map(|_| rng.index(self.n)));
    }
    /// The sampling a release over this batch is amplified by.
    pub fn sampling(&self) -> Sampling {
        Sampling::WithReplacement {
            population: self.n as u64,
            draws: self.k as u64,
        }
    }
    /// K, the draws per batch.
    pub fn k(&self) -> usize {
        self.k
    }
}

/// K distinct indices uniform among the K-subsets of {0..n-1}, fresh each call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WithoutReplacement {
    n: usize,
    k: usize,
}

impl WithoutReplacement {
    /// A sampler of `k`-subsets of `n` records; refuses n = 0, k = 0 or k > n.
    pub fn new(n: usize, k: usize) -> Result<Self> {
        check_sizes(n, k)?;
        Ok(WithoutReplacement { n, k })
    }
    /// Floyd's algorithm: O(k) draws, uniform over k-subsets; the result is sorted so that
    /// the order of summation (and so the floating-point result) does not depend on luck.
    pub fn draw(&self, rng: &mut DpRng, out: &mut Vec<usize>) {
        out.clear();
        let mut set = std::collections::BTreeSet::new();
        for j in (self.n - self.k)..self.n {
            let t = rng.index(j + 1);
            if !set.insert(t) {
                set.insert(j);
            }
        }
        out.extend(set);
    }
    /// The sampling a release over this batch is amplified by.
    pub fn sampling(&self) -> Sampling {
        Sampling::WithoutReplacement {
            population: self.n as u64,
            size: self.k as u64,
        }
    }
}

/// Each record independently with probability q.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Poisson {
    n: usize,
    q: f64,
}

impl Poisson {
    /// A sampler including each of `n` records with probability `q` ∈ (0, 1].
    pub fn new(n: usize, q: f64) -> Result<Self> {
        if n == 0 {
            return Err(PrivacyError::invalid(
                "n",
                0.0,
                "population must be non-empty",
            ));
        }
        if !(q > 0.0 && q <= 1.0) {
            return Err(PrivacyError::invalid("rate", q, "must lie in (0, 1]"));
        }
        Ok(Poisson { n, q })
    }
    /// Replaces `out` with the included indices, in increasing order (each kept with probability
    /// q).
    pub fn draw(&self, rng: &mut DpRng, out: &mut Vec<usize>) {
        out.clear();
        out.extend((0..self.n).filter(|_| rng.uniform01() < self.q));
    }
    /// The sampling a release over this batch is amplified by.
    pub fn sampling(&self) -> Sampling {
        Sampling::Poisson { rate: self.q }
    }
}

/// Which record sampler a minibatch algorithm draws its batches with (a config choice).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum RecordSampling {
    /// K i.i.d. uniform draws (Lowy & Razaviyayn Algorithm 2 line 6).
    #[default]
    WithReplacement,
    /// A uniform K-subset ("shuffle and take K"), fresh each round.
    WithoutReplacement,
    /// Each record independently with probability K/n; the batch sum is divided by K, the
    /// expected size, so one record still moves the mean by at most 2L/K.
    Poisson,
}

/// A batch sampler of (expected) size K from n records, as chosen by [`RecordSampling`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BatchSampler {
    /// K i.i.d. uniform draws.
    WithReplacement(WithReplacement),
    /// A uniform K-subset.
    WithoutReplacement(WithoutReplacement),
    /// Each record with probability K/n.
    Poisson {
        /// The sampler at rate K/n.
        sampler: Poisson,
        /// The expected batch size K that the batch sum is divided by.
        k: usize,
    },
}

impl BatchSampler {
    /// The sampler `kind` of (expected) size `k` from `n` records.
    pub fn new(kind: RecordSampling, n: usize, k: usize) -> Result<Self> {
        check_sizes(n, k)?;
        Ok(match kind {
            RecordSampling::WithReplacement => {
                BatchSampler::WithReplacement(WithReplacement::new(n, k)?)
            }
            RecordSampling::WithoutReplacement => {
                BatchSampler::WithoutReplacement(WithoutReplacement::new(n, k)?)
            }
            RecordSampling::Poisson => BatchSampler::Poisson {
                sampler: Poisson::new(n, k as f64 / n as f64)?,
                k,
            },
        })
    }
    /// Replaces `out` with a fresh batch's indices.
    pub fn draw(&self, rng: &mut DpRng, out: &mut Vec<usize>) {
        match self {
            BatchSampler::WithReplacement(s) => s.draw(rng, out),
            BatchSampler::WithoutReplacement(s) => s.draw(rng, out),
            BatchSampler::Poisson { sampler, .. } => sampler.draw(rng, out),
        }
    }
    /// The sampling a release over this batch is amplified by.
    pub fn sampling(&self) -> Sampling {
        match self {
            BatchSampler::WithReplacement(s) => s.sampling(),
            BatchSampler::WithoutReplacement(s) => s.sampling(),
            BatchSampler::Poisson { sampler, .. } => sampler.sampling(),
        }
    }
    /// The factor that turns the mean over a drawn batch of `drawn` records into the sum
    /// divided by K: 1 for fixed-size batches, drawn/K for Poisson (whose size varies, so a
    /// mean over the drawn records would have data-dependent sensitivity).
    pub fn mean_rescale(&self, drawn: usize) -> f64 {
        match self {
            BatchSampler::Poisson { k, .. } => drawn as f64 / *k as f64,
            _ => 1.0,
        }
    }
}

/// One pass over the data in disjoint batches: a uniform permutation cut into ⌊n/K⌋ batches
/// of K (the leftover n mod K records are never used). Lowy & Razaviyayn, Algorithm 1 line 5
/// (one-pass version): each record is in at most one batch, so the rounds compose in
/// parallel (McSherry 2009).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisjointBatches {
    perm: Vec<usize>,
    k: usize,
    next: usize,
}

impl DisjointBatches {
    /// A fresh pass: a uniform permutation of `n` records drawn from `rng`, cut into batches of
    /// `k`.
    pub fn new(n: usize, k: usize, rng: &mut DpRng) -> Result<Self> {
        check_sizes(n, k)?;
        let mut perm: Vec<usize> = (0..n).collect();
        perm.shuffle(rng.inner());
        Ok(DisjointBatches { perm, k, next: 0 })
    }
    /// A pass resumed from stored parts: `perm` must be a permutation of 0..n and `next` a
    /// batch position in 0..=⌊n/K⌋ (a silo restarting mid-pass; see [`Self::parts`]).
    pub fn from_parts(perm: Vec<usize>, k: usize, next: usize) -> Result<Self> {
        let n = perm.len();
        check_sizes(n, k)?;
        let mut seen = vec![false; n];
        if !perm
            .iter()
            .all(|&i| i < n && !std::mem::replace(&mut seen[i], true))
        {
            return Err(PrivacyError::invalid(
                "perm",
                n as f64,
                format!("not a permutation of 0..{n}"),
            ));
        }
        if next > n / k {
            return Err(PrivacyError::invalid(
                "next",
                next as f64,
                format!("not a batch position in 0..={}", n / k),
            ));
        }
        Ok(DisjointBatches { perm, k, next })
    }
    /// The permutation, K and the next batch's position (what a restart needs).
    pub fn parts(&self) -> (&[usize], usize, usize) {
        (&self.perm, self.k, self.next)
    }
    /// Number of batches, R = ⌊n/K⌋.
    pub fn batches(&self) -> usize {
        self.perm.len() / self.k
    }
    /// Batches still available.
    pub fn remaining(&self) -> usize {
        self.batches() - self.next
    }
    /// The next batch, or `None` once every batch has been used.
    pub fn next_batch(&mut self) -> Option<&[usize]> {
        if self.next >= self.batches() {
            return None;
        }
        let b = &self.perm[self.next * self.k..(self.next + 1) * self.k];
        self.next += 1;
        Some(b)
    }
    /// The sampling every batch of the pass realises (disjoint: releases compose in parallel).
    pub fn sampling(&self) -> Sampling {
        Sampling::Disjoint {
            population: self.perm.len() as u64,
            size: self.k as u64,
        }
    }
}

/// A uniformly random subset of M of N silos (the paper's S_r), returned sorted.
pub fn choose_subset(rng: &mut DpRng, n: usize, m: usize, out: &mut Vec<usize>) -> Result<()> {
    check_sizes(n, m)?;
    WithoutReplacement { n, k: m }.draw(rng, out);
    Ok(())
}

/// Each of `n` silos present independently with probability `q`.
pub fn bernoulli_subset(rng: &mut DpRng, n: usize, q: f64, out: &mut Vec<usize>) -> Result<()> {
    Poisson::new(n, q)?.draw(rng, out);
    Ok(())
}

/// A uniform draw from {lo..=hi}.
pub fn uniform_int(rng: &mut DpRng, lo: usize, hi: usize) -> Result<usize> {
    if lo > hi {
        return Err(PrivacyError::invalid(
            "range",
            lo as f64,
            "lower end above upper end",
        ));
    }
    Ok(lo + rng.index(hi - lo + 1))
}

/// Binomial(trials, p).
pub fn binomial(rng: &mut DpRng, trials: u64, p: f64) -> Result<u64> {
    let b = Binomial::new(trials, p).map_err(|e| PrivacyError::invalid("p", p, e.to_string()))?;
    Ok(b.sample(rng.inner()))
}

/// Bernoulli(p).
pub fn bernoulli(rng: &mut DpRng, p: f64) -> bool {
    rng.uniform01() < p
}

/// `n` i.i.d. standard normal draws, for generating synthetic data (not for privacy noise,
/// which only mechanisms add).
pub fn standard_normals(rng: &mut DpRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.standard_normal()).collect()
}

/// `n` i.i.d. uniform draws on [0, 1).
pub fn uniforms(rng: &mut DpRng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.uniform01()).collect()
}

/// A uniform random permutation in place (Fisher–Yates).
pub fn shuffle<T>(rng: &mut DpRng, items: &mut [T]) {
    items.shuffle(rng.inner());
}

/// A Dirichlet(α, …, α) draw of dimension k, via normalised Gamma(α, 1) draws. Used to make
/// label-skewed partitions of data, not for privacy.
pub fn dirichlet(rng: &mut DpRng, alpha: f64, k: usize) -> Result<Vec<f64>> {
    if !(alpha.is_finite() && alpha > 0.0) {
        return Err(PrivacyError::invalid(
            "alpha",
            alpha,
            "must be finite and > 0",
        ));
    }
    let g =
        Gamma::new(alpha, 1.0).map_err(|e| PrivacyError::invalid("alpha", alpha, e.to_string()))?;
    let mut v: Vec<f64> = (0..k).map(|_| g.sample(rng.inner())).collect();
    let s: f64 = v.iter().sum();
    if s > 0.0 {
        v.iter_mut().for_each(|x| *x /= s);
    } else {
        // All draws underflowed (tiny α): the limit is a one-hot vector at a uniform index.
        let j = rng.index(k);
        v.iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = if i == j { 1.0 } else { 0.0 });
    }
    Ok(v)
}

fn check_sizes(n: usize, k: usize) -> Result<()> {
    if n == 0 {
        return Err(PrivacyError::invalid(
            "n",
            0.0,
            "population must be non-empty",
        ));
    }
    if k == 0 {
        return Err(PrivacyError::invalid(
            "K",
            0.0,
            "batch size must be at least 1",
        ));
    }
    if k > n {
        return Err(PrivacyError::invalid(
            "K",
            k as f64,
            format!("batch size exceeds the population size n = {n}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Purpose;

    fn rng() -> DpRng {
        DpRng::from_seed(1, Purpose::Silo, 0)
    }

    #[test]
    fn with_replacement_is_uniform() {
        let s = WithReplacement::new(4, 4).unwrap();
        let mut r = rng();
        let mut idx = Vec::new();
        let mut counts = [0usize; 4];
        let mut repeats = 0;
        for _ in 0..10_000 {
            s.draw(&mut r, &mut idx);
            assert_eq!(idx.len(), 4);
            repeats += usize::from(idx.iter().collect::<std::collections::HashSet<_>>().len() < 4);
            idx.iter().for_each(|&i| counts[i] += 1);
        }
        // 40 000 draws, expected 10 000 each, sd ≈ 87: 5 sd = 435.
        for c in counts {
            assert!((c as i64 - 10_000).abs() < 435, "{counts:?}");
        }
        // P(some index repeats in 4 draws of 4) = 1 − 4!/4⁴ = 0.90625: 9062 ± 5·29.
        assert!((repeats as i64 - 9062).abs() < 146, "{repeats}");
    }

    #[test]
    fn without_replacement_draws_distinct_sorted_indices() {
        let s = WithoutReplacement::new(10, 7).unwrap();
        let mut r = rng();
        let mut idx = Vec::new();
        let mut counts = [0usize; 10];
        for _ in 0..10_000 {
            s.draw(&mut r, &mut idx);
            assert_eq!(idx.len(), 7);
            assert!(idx.windows(2).all(|w| w[0] < w[1]));
            idx.iter().for_each(|&i| counts[i] += 1);
        }
        // each index present with probability 0.7: 7000 ± 5·45.8.
        for c in counts {
            assert!((c as i64 - 7000).abs() < 230, "{counts:?}");
        }
    }

    #[test]
    fn disjoint_batches_never_reuse_a_record() {
        let mut r = rng();
        let mut b = DisjointBatches::new(103, 10, &mut r).unwrap();
        assert_eq!(b.batches(), 10);
        let mut seen = std::collections::HashSet::new();
        let mut count = 0;
        while let Some(batch) = b.next_batch() {
            assert_eq!(batch.len(), 10);
            for &i in batch {
                assert!(i < 103);
                assert!(seen.insert(i), "record {i} reused");
            }
            count += 1;
        }
        assert_eq!(count, 10);
        assert_eq!(seen.len(), 100);
        assert!(b.next_batch().is_none());
    }

    #[test]
    fn bad_sizes_are_refused() {
        assert!(WithReplacement::new(5, 6).is_err());
        assert!(WithReplacement::new(0, 1).is_err());
        assert!(WithoutReplacement::new(5, 0).is_err());
        assert!(Poisson::new(5, 0.0).is_err());
        assert!(Poisson::new(5, 1.5).is_err());
        let mut v = Vec::new();
        assert!(choose_subset(&mut rng(), 3, 4, &mut v).is_err());
    }

    #[test]
    fn dirichlet_sums_to_one() {
        let mut r = rng();
        for alpha in [0.01, 0.5, 10.0] {
            let v = dirichlet(&mut r, alpha, 7).unwrap();
            assert!((v.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            assert!(v.iter().all(|&x| x >= 0.0));
        }
        assert!(dirichlet(&mut r, 0.0, 3).is_err());
    }
}
