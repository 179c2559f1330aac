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
//!
//! # Keys and intrusions (issue 27)
//! ChaCha20 is seekable: whoever holds a generator's key regenerates every draw of its stream,
//! past and future. So the key of an OS-seeded generator never leaves memory
//! ([`DpRng::seeded_snapshot`] is `None` for it: a silo persists no key, and a restarted one
//! draws a fresh key), its memory is overwritten when it is dropped (best effort: a move may
//! leave a copy the compiler does not clear), and [`DpRng::with_fresh_key`] /
//! [`DpRng::rekey`] give draws whose key lives only as long as they do (pan-privacy: the
//! pan-private AC-SA of `dpfl`'s shuffle wing, `crates/dpfl/src/algo/shuffle/pan.rs`). A seeded generator is reproducible by design: its key is the
//! seed's, so its draws are private only against those who do not hold the seed.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::error::{PrivacyError, Result};

/// A ChaCha20 generator. Not `Clone`: duplicating a noise stream would reuse noise.
#[derive(Debug)]
pub struct DpRng {
    inner: ChaCha20Rng,
    /// Keyed from the operating system's entropy (nobody else can regenerate the stream)
    /// rather than from a seed or a stored state.
    os_seeded: bool,
}

impl Drop for DpRng {
    /// Overwrites the key and the buffered keystream, so that a generator that is gone cannot
    /// be read back out of freed memory. `black_box` keeps the store from being removed as
    /// dead; a copy an earlier move left elsewhere is not reached (best effort, see the module
    /// doc).
    fn drop(&mut self) {
        self.inner = ChaCha20Rng::from_seed([0; 32]);
        std::hint::black_box(&mut self.inner);
    }
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
        Ok(DpRng {
            inner,
            os_seeded: true,
        })
    }

    /// A reproducible generator: ChaCha20 keyed by `seed`, on the stream identified by
    /// `(purpose, index)` (e.g. the silo id). Distinct `(purpose, index)` pairs give
    /// independent streams under the same key.
    pub fn from_seed(seed: u64, purpose: Purpose, index: u32) -> Self {
        let mut inner = ChaCha20Rng::seed_from_u64(seed);
        inner.set_stream(((purpose as u64) << 32) | u64::from(index));
        DpRng {
            inner,
            os_seeded: false,
        }
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
            os_seeded: self.os_seeded,
        }
    }

    /// Whether this generator was keyed from the operating system (see the module doc).
    pub fn is_os_seeded(&self) -> bool {
        self.os_seeded
    }

    /// Runs `draw` on a generator whose key exists only while `draw` runs: for an OS-seeded
    /// generator a fresh one from the operating system, dropped (its key overwritten) when
    /// `draw` returns, so that no key left in memory or on disk regenerates these draws; for a
    /// seeded one this very generator (the run stays reproducible from its seed, and whoever
    /// holds the seed can regenerate the draws).
    pub fn with_fresh_key<T>(&mut self, draw: impl FnOnce(&mut DpRng) -> T) -> Result<T> {
        if self.os_seeded {
            let mut fresh = DpRng::from_os()?;
            Ok(draw(&mut fresh))
        } else {
            Ok(draw(self))
        }
    }

    /// Replaces an OS-seeded generator's key by fresh OS entropy (the old key is overwritten),
    /// so that the key in memory from now on regenerates none of the draws made before; a
    /// seeded generator is left as it is (its stream must stay reproducible).
    pub fn rekey(&mut self) -> Result<()> {
        if self.os_seeded {
            *self = DpRng::from_os()?;
        }
        Ok(())
    }

    /// A fresh u64 (e.g. to seed a trial).
    pub fn next_seed(&mut self) -> u64 {
        self.inner.random()
    }

    /// The generator's complete state (key, stream, position), so that a simulation or a
    /// server that restarts continues the very same stream instead of reusing or skipping
    /// draws. The state contains the key, which regenerates every draw of the stream: a silo
    /// stores [`Self::seeded_snapshot`] instead.
    pub fn snapshot(&self) -> RngState {
        RngState {
            key: self.inner.get_seed(),
            stream: self.inner.get_stream(),
            word_pos: self.inner.get_word_pos().to_string(),
        }
    }

    /// The state to persist so that a restart continues this stream: [`Self::snapshot`] for a
    /// seeded generator (whose key is the seed's), `None` for an OS-seeded one, whose key must
    /// never be written anywhere (a restart draws a fresh key instead).
    pub fn seeded_snapshot(&self) -> Option<RngState> {
        (!self.os_seeded).then(|| self.snapshot())
    }

    /// The generator a [`Self::snapshot`] was taken of, at the same position. Its key was
    /// stored, so it counts as seeded (not [`Self::is_os_seeded`]).
    pub fn from_snapshot(state: &RngState) -> Result<Self> {
        let pos: u128 = state.word_pos.parse().map_err(|_| {
            PrivacyError::OsRng(format!("bad generator position {:?}", state.word_pos))
        })?;
        let mut inner = ChaCha20Rng::from_seed(state.key);
        inner.set_stream(state.stream);
        inner.set_word_pos(pos);
        Ok(DpRng {
            inner,
            os_seeded: false,
        })
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

    /// An OS-seeded generator gives no key to store; fresh-key draws and a rekeyed generator
    /// are not what the old key's stream gives next; a seeded generator keeps its stream.
    #[test]
    fn os_keys_are_never_stored_and_fresh_keys_regenerate_nothing() {
        let mut os = DpRng::from_os().expect("os rng");
        assert!(os.is_os_seeded() && os.seeded_snapshot().is_none());
        // What the current key would give next (read off a copy, as an intruder would).
        let mut copy = DpRng::from_snapshot(&os.snapshot()).expect("copy");
        let predicted: Vec<u64> = (0..4).map(|_| copy.next_seed()).collect();
        let fresh: Vec<u64> = os
            .with_fresh_key(|g| (0..4).map(|_| g.next_seed()).collect())
            .expect("fresh");
        assert_ne!(fresh, predicted);
        os.rekey().expect("rekey");
        let after: Vec<u64> = (0..4).map(|_| os.next_seed()).collect();
        assert_ne!(after, predicted);
        assert!(os.is_os_seeded());

        let mut seeded = DpRng::from_seed(5, Purpose::Silo, 1);
        let mut twin = DpRng::from_seed(5, Purpose::Silo, 1);
        assert_eq!(seeded.seeded_snapshot(), Some(seeded.snapshot()));
        let a: Vec<u64> = seeded
            .with_fresh_key(|g| (0..4).map(|_| g.next_seed()).collect())
            .expect("seeded");
        seeded.rekey().expect("rekey");
        let b: Vec<u64> = (0..4).map(|_| seeded.next_seed()).collect();
        let want: Vec<u64> = (0..8).map(|_| twin.next_seed()).collect();
        assert_eq!([a, b].concat(), want, "a seeded stream is unchanged");
        assert!(
            !DpRng::from_snapshot(&twin.snapshot())
                .unwrap()
                .is_os_seeded()
        );
    }

    #[test]
    fn os_seeded_generators_differ() {
        let mut a = DpRng::from_os().expect("os rng");
        let mut b = DpRng::from_os().expect("os rng");
        assert_ne!(a.next_seed(), b.next_seed());
    }
}
