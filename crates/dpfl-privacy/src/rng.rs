//! The one random generator of dpfl.
//!
//! Every random draw that can influence a message (record sampling, privacy noise, shuffling,
//! participation) comes from a [`DpRng`]: a ChaCha20 stream cipher used as a CSPRNG. It is
//! seeded from the operating system (`getrandom`'s `SysRng`) in deployment, or from an
//! explicit `(seed, stream)` pair in simulation, where each silo and each purpose gets its own
//! ChaCha stream so that results do not depend on thread scheduling.
//!
//! The raw draws are `pub(crate)`: code outside this crate draws through a mechanism
//! ([`crate::mechanism`]) or a sampler ([`crate::sampler`]), so that replacing, say, the
//! continuous Gaussian by an exact discrete sampler touches this crate only.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::error::{PrivacyError, Result};

/// A ChaCha20 generator. Not `Clone`: duplicating a noise stream would reuse noise.
#[derive(Debug)]
pub struct DpRng {
    inner: ChaCha20Rng,
}

/// A persisted generator state (see [`DpRng::snapshot`]). The position is a decimal string
/// because it is a 128-bit counter.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RngState {
    /// The ChaCha20 key (the seed expanded, or OS entropy).
    pub key: [u8; 32],
    /// The ChaCha20 stream id ((purpose, index) of a seeded stream).
    pub stream: u64,
    /// The 128-bit word position within the stream.
    pub word_pos: String,
}

/// What a stream is used for; part of the stream id, so that e.g. a silo's noise and its
/// train/test split never share a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Purpose {
    /// A silo's record sampling and privacy noise.
    Silo = 1,
    /// The network's choice of participating silos (the simulator's stand-in for availability).
    Participation = 2,
    /// A shuffler's permutations.
    Shuffle = 3,
    /// Data preparation: splits, partitions, subsampling of records before training.
    Data = 4,
    /// Server-side randomness of an algorithm (never privacy noise: the server is untrusted).
    Server = 5,
    /// A compressed message's public index set, regenerated from the seed the message carries
    /// (`dpfl::compress`): data-independent, sent in the clear.
    Compression = 6,
}

impl DpRng {
    /// A generator seeded from the operating system. Use this for real deployments.
    pub fn from_os() -> Result<Self> {
        let inner = ChaCha20Rng::try_from_rng(&mut rand::rngs::SysRng)
            .map_err(|e| PrivacyError::OsRng(e.to_string()))?;
        Ok(DpRng { inner })
    }

    /// A reproducible generator: ChaCha20 keyed by `seed`, on the stream identified by
    /// `(purpose, index)` (e.g. the silo id). Distinct `(purpose, index)` pairs give
    /// independent streams under the same key.
    pub fn from_seed(seed: u64, purpose: Purpose, index: u32) -> Self {
        let mut inner = ChaCha20Rng::seed_from_u64(seed);
        inner.set_stream(((purpose as u64) << 32) | u64::from(index));
        DpRng { inner }
    }

    /// `from_seed` when a seed is given, otherwise `from_os`.
    pub fn new(seed: Option<u64>, purpose: Purpose, index: u32) -> Result<Self> {
        match seed {
            Some(s) => Ok(Self::from_seed(s, purpose, index)),
            None => Self::from_os(),
        }
    }

    /// A child generator seeded from this one (for nested, reproducible streams, e.g. one
    /// per trial of an experiment).
    pub fn fork(&mut self) -> Self {
        DpRng {
            inner: ChaCha20Rng::from_rng(&mut self.inner),
        }
    }

    /// A fresh u64 (e.g. to seed a trial).
    pub fn next_seed(&mut self) -> u64 {
        self.inner.random()
    }

    /// The generator's complete state (key, stream, position), so that a silo or server that
    /// restarts continues the very same stream instead of reusing or skipping draws. The
    /// state contains the key: persist it only where the silo keeps its data.
    pub fn snapshot(&self) -> RngState {
        RngState {
            key: self.inner.get_seed(),
            stream: self.inner.get_stream(),
            word_pos: self.inner.get_word_pos().to_string(),
        }
    }

    /// The generator a [`Self::snapshot`] was taken of, at the same position.
    pub fn from_snapshot(state: &RngState) -> Result<Self> {
        let pos: u128 = state.word_pos.parse().map_err(|_| {
            PrivacyError::OsRng(format!("bad generator position {:?}", state.word_pos))
        })?;
        let mut inner = ChaCha20Rng::from_seed(state.key);
        inner.set_stream(state.stream);
        inner.set_word_pos(pos);
        Ok(DpRng { inner })
    }

    pub(crate) fn standard_normal(&mut self) -> f64 {
        StandardNormal.sample(&mut self.inner)
    }

    /// Uniform on [0, 1).
    pub(crate) fn uniform01(&mut self) -> f64 {
        self.inner.random()
    }

    /// Uniform on {0, .., n-1}, exactly (rand's `unbiased` feature, see Cargo.toml); `n` must
    /// be > 0 (checked by every caller's constructor).
    pub(crate) fn index(&mut self, n: usize) -> usize {
        self.inner.random_range(0..n)
    }

    pub(crate) fn inner(&mut self) -> &mut ChaCha20Rng {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_streams_are_reproducible_and_distinct() {
        let mut a = DpRng::from_seed(7, Purpose::Silo, 3);
        let mut b = DpRng::from_seed(7, Purpose::Silo, 3);
        let mut c = DpRng::from_seed(7, Purpose::Silo, 4);
        let mut d = DpRng::from_seed(7, Purpose::Data, 3);
        let xa: Vec<u64> = (0..4).map(|_| a.next_seed()).collect();
        let xb: Vec<u64> = (0..4).map(|_| b.next_seed()).collect();
        let xc: Vec<u64> = (0..4).map(|_| c.next_seed()).collect();
        let xd: Vec<u64> = (0..4).map(|_| d.next_seed()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
        assert_ne!(xa, xd);
    }

    #[test]
    fn a_snapshot_continues_the_same_stream() {
        let mut a = DpRng::from_seed(9, Purpose::Silo, 2);
        let _ = (a.next_seed(), a.standard_normal());
        let snap = a.snapshot();
        let mut b = DpRng::from_snapshot(&snap).expect("restore");
        let xa: Vec<u64> = (0..5).map(|_| a.next_seed()).collect();
        let xb: Vec<u64> = (0..5).map(|_| b.next_seed()).collect();
        assert_eq!(xa, xb);
        let json = serde_json::to_string(&snap).expect("json");
        let back: RngState = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, snap);
    }

    /// Words a bounded draw reads, in order.
    struct Words<T>(std::vec::IntoIter<T>);

    impl rand::TryRng for Words<u32> {
        type Error = std::convert::Infallible;
        fn try_next_u32(&mut self) -> std::result::Result<u32, Self::Error> {
            Ok(self.0.next().expect("enough words"))
        }
        fn try_next_u64(&mut self) -> std::result::Result<u64, Self::Error> {
            unreachable!("a u32 draw")
        }
        fn try_fill_bytes(&mut self, _: &mut [u8]) -> std::result::Result<(), Self::Error> {
            unreachable!("a u32 draw")
        }
    }

    impl rand::TryRng for Words<u64> {
        type Error = std::convert::Infallible;
        fn try_next_u32(&mut self) -> std::result::Result<u32, Self::Error> {
            unreachable!("a u64 draw")
        }
        fn try_next_u64(&mut self) -> std::result::Result<u64, Self::Error> {
            Ok(self.0.next().expect("enough words"))
        }
        fn try_fill_bytes(&mut self, _: &mut [u8]) -> std::result::Result<(), Self::Error> {
            unreachable!("a u64 draw")
        }
    }

    /// Bounded draws are exactly uniform (rand's `unbiased` feature is on). A draw below 3 reads
    /// U = 0.w₁w₂w₃… in base 2³² (2⁶⁴) and returns ⌊3U⌋. With w₁ = w₂ = 0x55…55 the first two
    /// words leave it open (3·0.w₁w₂ = 1 − 2⁻⁶⁴ (2⁻¹²⁸)), so the exact method reads w₃ = 0xFF…FF:
    /// U > 1/3, ⌊3U⌋ = 1. rand's default stops after two words and returns 0 (its bias).
    #[test]
    fn bounded_draws_read_on_until_the_value_is_decided() {
        let mut r = Words(vec![0x5555_5555u32, 0x5555_5555, u32::MAX].into_iter());
        assert_eq!(r.random_range(0..3u32), 1);
        assert_eq!(r.0.len(), 0, "all three words read");
        let mut r =
            Words(vec![0x5555_5555_5555_5555u64, 0x5555_5555_5555_5555, u64::MAX].into_iter());
        assert_eq!(r.random_range(0..3u64), 1);
        assert_eq!(r.0.len(), 0, "all three words read");
        // The usual case reads one word: 3·0x8000_0000/2³² = 1.5, decided at once.
        let mut r = Words(vec![0x8000_0000u32, 7].into_iter());
        assert_eq!(r.random_range(0..3u32), 1);
        assert_eq!(r.0.len(), 1);
    }

    #[test]
    fn os_seeded_generators_differ() {
        let mut a = DpRng::from_os().expect("os rng");
        let mut b = DpRng::from_os().expect("os rng");
        assert_ne!(a.next_seed(), b.next_seed());
    }
}
