//! The two halves of every algorithm and the public facts they are built from (the floor's
//! contract; see [`crate::algo`] for the trust boundary these types enforce).

use serde::{Deserialize, Serialize};

use super::message::{Broadcast, Reply, Round, SiloMessage};
use crate::data::Dataset;
use crate::units::SiloId;
use dpfl_privacy::{Delta, DpRng, Epsilon, PrivacyEvent};

/// Serialisable state of a half, for checkpoints (server) and restarts (silo): named,
/// typed entries, each any serde type stored as its postcard encoding (f64s bit for bit, a
/// d-vector in 8d bytes). A half writes what it must resume from with [`HalfState::put`]
/// and reads it back with [`HalfState::get`] (or [`HalfState::vector`] for a length-checked
/// model-sized vector); a missing or undecodable entry is an error naming the key, never a
/// default. Runners store the whole value in postcard too (`dpfl-net`'s `DPS2` / `DPK2`).
///
/// ```
/// # use dpfl::algo::HalfState;
/// #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
/// struct Shifts { h: Vec<f64>, step: u64 }
/// let mut s = HalfState::default();
/// s.put("shifts", &Shifts { h: vec![-0.0, 1.5], step: 3 });
/// s.put("w", &vec![0.25; 4]);
/// let back: Shifts = s.get("shifts").unwrap();
/// assert_eq!(back, Shifts { h: vec![-0.0, 1.5], step: 3 });
/// assert_eq!(s.vector("w", 4).unwrap(), vec![0.25; 4]);
/// assert!(s.vector("w", 5).is_err() && s.get::<u64>("t").is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HalfState {
    entries: std::collections::BTreeMap<String, Entry>,
}

/// One entry's postcard bytes, serialised as one byte string (not a sequence of u8s: a
/// checkpoint at d = 10⁶ is 8 MB).
#[derive(Debug, Clone, Default, PartialEq)]
struct Entry(Vec<u8>);

impl Serialize for Entry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl<'de> serde::de::Visitor<'de> for Bytes {
            type Value = Entry;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Entry, E> {
                Ok(Entry(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Entry, E> {
                Ok(Entry(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Entry, A::Error> {
                let mut v = Vec::with_capacity(a.size_hint().unwrap_or(0).min(1 << 20));
                while let Some(b) = a.next_element()? {
                    v.push(b);
                }
                Ok(Entry(v))
            }
        }
        d.deserialize_bytes(Bytes)
    }
}

/// The silo's side of an algorithm: turns a broadcast and its own data into a message.
pub trait SiloHalf: Send {
    /// The privacy event answering round `round` spends (record sampling included), known
    /// before any data is touched, so the silo's ledger can refuse the round. `None` for
    /// non-private algorithms.
    fn round_event(&self, round: Round) -> Option<PrivacyEvent>;
    /// Computes this silo's (already privatised) message.
    fn respond(
        &mut self,
        broadcast: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<SiloMessage>;
    /// This silo's whole reply to the round: one message unless the algorithm sends several
    /// (multi-message protocols override this; the runners call it, never `respond`).
    fn respond_reply(
        &mut self,
        broadcast: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<Reply> {
        Ok(Reply::single(self.respond(broadcast, data, rng)?))
    }
    /// Per-coordinate standard deviation of the privacy noise this silo adds (0 if none).
    fn noise_std(&self) -> f64;
    /// State to persist across a restart (e.g. a one-pass permutation's position).
    fn state(&self) -> HalfState {
        HalfState::default()
    }
    /// Restores the state [`Self::state`] saved.
    fn restore(&mut self, _state: HalfState) -> crate::Result<()> {
        Ok(())
    }
    /// Work and traffic so far, for per-round reports; `None` where a half does not count.
    fn counters(&self) -> Option<SiloCounters> {
        None
    }
}

/// What a silo half has done so far (SoteriaFL's metrics, digest §6 item 13).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiloCounters {
    /// Per-record gradient evaluations (∇f_ij at one point counts once).
    pub grad_evals: u64,
    /// f64 values sent (d dense, k for random-k; the paper's "64 bits per float" count).
    pub floats_sent: u64,
}

impl std::ops::Add for SiloCounters {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        SiloCounters {
            grad_evals: self.grad_evals + o.grad_evals,
            floats_sent: self.floats_sent + o.floats_sent,
        }
    }
}

/// The server's side: makes broadcasts and aggregates messages. Holds no silo data.
pub trait ServerHalf: Send {
    /// The broadcast of round `round`.
    fn broadcast(&mut self, round: Round) -> Broadcast;
    /// Aggregates the messages of the silos that answered round `round` (any order, possibly
    /// none) and updates the state.
    fn aggregate(&mut self, round: Round, messages: &[SiloMessage]) -> crate::Result<()>;
    /// The model the algorithm outputs if stopped now (e.g. the average of iterates).
    fn output(&self) -> Vec<f64>;
    /// Number of parameters of the model.
    fn dim(&self) -> usize;
    /// The server's state, for checkpoints.
    fn state(&self) -> HalfState;
    /// Restores a checkpoint [`Self::state`] wrote.
    fn restore(&mut self, state: HalfState) -> crate::Result<()>;
}

/// Public, non-private facts about the federation that the halves may be built from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FederationInfo {
    /// Number of model parameters.
    pub dim: usize,
    /// Number of silos N.
    pub silos: usize,
    /// Planned rounds R.
    pub rounds: usize,
    /// Expected participants per round (the paper's M), used by parameter rules.
    pub expected_participants: f64,
}

/// Public facts about one silo that its half may be built from: its record count (the paper
/// treats n_i as public) and its privacy budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiloInfo {
    /// The silo's index.
    pub id: SiloId,
    /// Its record count n_i.
    pub records: usize,
    /// (ε_i, δ_i) for private algorithms, each checked once where the context is built (and
    /// again when a plan is read); written as two bare numbers, as before the types.
    pub budget: Option<(Epsilon, Delta)>,
    /// The noise multiplier set directly (`privacy.noise_multiplier`) instead of a target ε:
    /// then `budget` is `None`, the silo's σ is z times its message's sensitivity, and the
    /// ε the accountants certify at `delta` is reported. Absent from plans that calibrate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_noise: Option<FixedNoise>,
}

/// A silo's noise given as a multiplier rather than calibrated to a target ε.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedNoise {
    /// z = σ/Δ, Δ the L2 sensitivity of the silo's message as its algorithm defines it.
    pub noise_multiplier: f64,
    /// The δ at which the certified ε is reported.
    pub delta: Delta,
}

impl FixedNoise {
    /// z and δ, checked: z finite and > 0, δ ∈ (0, 1).
    pub fn new(noise_multiplier: f64, delta: f64) -> crate::Result<Self> {
        if !(noise_multiplier.is_finite() && noise_multiplier > 0.0) {
            return Err(crate::Error::config(
                "privacy.noise_multiplier",
                format!("must be finite and > 0, got {noise_multiplier}"),
            ));
        }
        Ok(FixedNoise {
            noise_multiplier,
            delta: Delta::new(delta)?,
        })
    }
}

impl SiloInfo {
    /// Silo `id` with `records` records and, for a private algorithm, the (ε, δ) `budget`
    /// checked here (ε > 0 finite, δ ∈ (0, 1)); an error names the bad value.
    pub fn new(id: SiloId, records: usize, budget: Option<(f64, f64)>) -> crate::Result<Self> {
        let budget = match budget {
            Some((e, d)) => Some((Epsilon::new(e)?, Delta::new(d)?)),
            None => None,
        };
        Ok(SiloInfo {
            id,
            records,
            budget,
            fixed_noise: None,
        })
    }

    /// The silo's δ: its budget's, or the one its fixed noise is reported at.
    pub fn delta(&self) -> Option<Delta> {
        self.budget
            .map(|(_, d)| d)
            .or(self.fixed_noise.map(|f| f.delta))
    }
}

impl HalfState {
    /// Stores `value` under `key` (replacing an earlier entry). Encoding a serde value into
    /// postcard bytes cannot fail for the types a half stores (sized sequences, maps,
    /// structs, numbers); should one fail, the key is left out and [`HalfState::get`]
    /// reports it missing on restore, never a wrong value.
    pub fn put<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> &mut Self {
        match postcard::to_allocvec(value) {
            Ok(bytes) => {
                self.entries.insert(key.to_string(), Entry(bytes));
            }
            Err(_) => {
                self.entries.remove(key);
            }
        }
        self
    }

    /// The value stored under `key`: an error if it is missing, does not decode as `T`, or
    /// has bytes left over.
    pub fn get<T: serde::de::DeserializeOwned>(&self, key: &str) -> crate::Result<T> {
        let Entry(bytes) = self
            .entries
            .get(key)
            .ok_or_else(|| crate::Error::Protocol(format!("state lacks `{key}`")))?;
        let (v, rest) = postcard::take_from_bytes(bytes)
            .map_err(|e| crate::Error::Protocol(format!("state `{key}`: {e}")))?;
        if !rest.is_empty() {
            return Err(crate::Error::Protocol(format!(
                "state `{key}`: {} bytes after the value",
                rest.len()
            )));
        }
        Ok(v)
    }

    /// Whether an entry is stored under `key`.
    pub fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// Whether no entry is stored (a stateless half).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The vector stored under `key`, checked to have length `d`.
    pub fn vector(&self, key: &str, d: usize) -> crate::Result<Vec<f64>> {
        let v: Vec<f64> = self.get(key)?;
        if v.len() != d {
            return Err(crate::Error::Protocol(format!(
                "state `{key}` has length {}, expected {d}",
                v.len()
            )));
        }
        Ok(v)
    }

    /// The scalar stored under `key`.
    pub fn scalar(&self, key: &str) -> crate::Result<f64> {
        self.get(key)
    }
}
