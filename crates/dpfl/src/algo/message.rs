//! Typed messages: what a silo sends and what the server broadcasts.
//!
//! A silo's [`Reply`] to a round holds one or more [`SiloMessage`]s; the message, not the
//! reply, is the unit a shuffler permutes (Cheu et al.'s PVEC sends d·(g+s) labelled bits per
//! silo, each its own message). A message's [`Payload`] is one of a closed set of kinds — dense
//! f64, sparse f64, t-bit packed unsigned integers, or a labelled inner payload — and every
//! runner and codec matches them exhaustively, so a new kind cannot silently travel as another.
//! A payload is validated once, by [`Payload::validate`], when the round core receives it from
//! a silo half or a codec decodes it.

pub mod compressed;

use serde::{Deserialize, Serialize};

pub use crate::units::Round;

/// What the server sends to every participating silo at the start of a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Broadcast {
    /// The round this broadcast opens.
    pub round: Round,
    /// The point at which silos evaluate gradients (w_r, or w_r^md for AC-SA).
    pub point: Vec<f64>,
    /// Further vectors some algorithms need (e.g. a control variate), in an order the
    /// algorithm defines.
    pub aux: Vec<Vec<f64>>,
}

impl Broadcast {
    /// Checks that the broadcast point has the model's dimension `d` (a silo half's first
    /// check on what the server sent).
    pub fn check_dim(&self, d: usize) -> crate::Result<()> {
        if self.point.len() != d {
            return Err(crate::Error::Protocol(format!(
                "broadcast point has dimension {}, the model has {d}",
                self.point.len()
            )));
        }
        Ok(())
    }
}

/// Unsigned integers of `bits` bits each (1 ≤ bits ≤ 64), packed least-significant bit first
/// into ⌈len·bits/8⌉ bytes: exactly len·bits bits of information, the padding bits of the
/// last byte zero. Built only through [`PackedInts::pack`] or [`PackedInts::from_bytes`], both
/// of which check every value and length.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "PackedRaw", into = "PackedRaw")]
pub struct PackedInts {
    bits: u8,
    len: u32,
    bytes: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct PackedRaw {
    bits: u8,
    len: u32,
    bytes: Vec<u8>,
}

impl From<PackedInts> for PackedRaw {
    fn from(p: PackedInts) -> Self {
        PackedRaw {
            bits: p.bits,
            len: p.len,
            bytes: p.bytes,
        }
    }
}

impl TryFrom<PackedRaw> for PackedInts {
    type Error = crate::Error;
    fn try_from(r: PackedRaw) -> crate::Result<Self> {
        PackedInts::from_bytes(r.bits, r.len, r.bytes)
    }
}

fn protocol(m: String) -> crate::Error {
    crate::Error::Protocol(m)
}

impl PackedInts {
    /// Bytes holding `len` values of `bits` bits.
    pub fn byte_len(bits: u8, len: u32) -> u64 {
        (u64::from(bits) * u64::from(len)).div_ceil(8)
    }

    /// Packs `values`, each of which must be below 2^bits.
    pub fn pack(bits: u8, values: &[u64]) -> crate::Result<Self> {
        Self::pack_iter(bits, values.iter().copied())
    }

    /// Packs the values of an iterator of known length (the encoder's fused
    /// quantize-noise-offset pass), with [`Self::pack`]'s checks.
    pub fn pack_iter(bits: u8, values: impl ExactSizeIterator<Item = u64>) -> crate::Result<Self> {
        check_width(bits)?;
        let len = u32::try_from(values.len())
            .map_err(|_| protocol(format!("{} packed values", values.len())))?;
        // Word-wise: values enter a 128-bit accumulator (< 64 bits pending + ≤ 64 new) and
        // leave it 64 bits at a time, little-endian — the same LSB-first bytes as bit by bit.
        let mut bytes = Vec::with_capacity(Self::byte_len(bits, len) as usize);
        let (mut acc, mut fill) = (0u128, 0u32);
        for (i, v) in values.enumerate() {
            if bits < 64 && v >> bits != 0 {
                return Err(protocol(format!(
                    "packed value {v} at {i} does not fit in {bits} bits"
                )));
            }
            acc |= u128::from(v) << fill;
            fill += u32::from(bits);
            if fill >= 64 {
                bytes.extend_from_slice(&(acc as u64).to_le_bytes());
                acc >>= 64;
                fill -= 64;
            }
        }
        bytes.extend_from_slice(&(acc as u64).to_le_bytes()[..fill.div_ceil(8) as usize]);
        Ok(PackedInts { bits, len, bytes })
    }

    /// Takes packed bytes as they travel: exactly [`Self::byte_len`] bytes, padding bits zero.
    pub fn from_bytes(bits: u8, len: u32, bytes: Vec<u8>) -> crate::Result<Self> {
        check_width(bits)?;
        let want = Self::byte_len(bits, len);
        if bytes.len() as u64 != want {
            return Err(protocol(format!(
                "{} bytes of packed {bits}-bit values where {len} values take {want}",
                bytes.len()
            )));
        }
        let used = u64::from(bits) * u64::from(len);
        let pad = (8 - used % 8) % 8;
        if pad > 0 {
            let last = bytes[bytes.len() - 1];
            if last >> (8 - pad) != 0 {
                return Err(protocol("packed values with non-zero padding bits".into()));
            }
        }
        Ok(PackedInts { bits, len, bytes })
    }

    /// Bits per value t.
    pub fn bits(&self) -> u8 {
        self.bits
    }
    /// Number of values.
    pub fn len(&self) -> usize {
        self.len as usize
    }
    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The packed bytes, as they are encoded.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Value `i` (i < len).
    pub fn get(&self, i: usize) -> u64 {
        let start = i * self.bits as usize;
        let (first, shift) = (start / 8, start % 8);
        // The value spans at most 9 bytes (63 bits of shift + 64 bits).
        let mut word = [0u8; 16];
        let end = (first + 16).min(self.bytes.len());
        word[..end - first].copy_from_slice(&self.bytes[first..end]);
        (u128::from_le_bytes(word) >> shift) as u64 & self.mask()
    }

    fn mask(&self) -> u64 {
        u64::MAX >> (64 - u32::from(self.bits))
    }

    /// The values in order, decoded a 64-bit word at a time.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let (bits, mask) = (u32::from(self.bits), self.mask());
        let (mut acc, mut fill, mut pos) = (0u128, 0u32, 0usize);
        (0..self.len()).map(move |_| {
            while fill < bits {
                // fill < bits ≤ 64 before a refill of ≤ 64 bits: the accumulator never overflows.
                if let Some(w) = self.bytes.get(pos..pos + 8) {
                    let w: [u8; 8] = w.try_into().unwrap_or_default();
                    acc |= u128::from(u64::from_le_bytes(w)) << fill;
                    pos += 8;
                    fill += 64;
                } else {
                    acc |= u128::from(self.bytes.get(pos).copied().unwrap_or(0)) << fill;
                    pos += 1;
                    fill += 8;
                }
            }
            let v = acc as u64 & mask;
            acc >>= bits;
            fill -= bits;
            v
        })
    }

    /// All values.
    pub fn unpack(&self) -> Vec<u64> {
        self.iter().collect()
    }
}

fn check_width(bits: u8) -> crate::Result<()> {
    if (1..=64).contains(&bits) {
        Ok(())
    } else {
        Err(protocol(format!(
            "packed width of {bits} bits (1..=64 allowed)"
        )))
    }
}

/// The body of a silo's message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Payload {
    /// A dense vector.
    Dense(Vec<f64>),
    /// A sparse vector of length `dim` (compressed messages).
    Sparse {
        /// The vector's length.
        dim: u32,
        /// Indices of the non-zero coordinates, increasing.
        indices: Vec<u32>,
        /// Their values.
        values: Vec<f64>,
    },
    /// t-bit unsigned integers (quantised messages); represents the vector of their values.
    Packed(PackedInts),
    /// One labelled message of a multi-message reply (e.g. the coordinate a PVEC bit is for);
    /// the label travels with the message through a shuffler. Not nested.
    Labelled {
        /// What the message is for (e.g. a coordinate).
        label: u32,
        /// The message; not itself labelled.
        payload: Box<Payload>,
    },
    /// A compressed vector in a compressor's own encoding (seeded random-k, quantisation
    /// levels, powers of two): see `crate::compress`.
    Compressed(compressed::Compressed),
}

impl Payload {
    /// Length of the vector the payload represents.
    pub fn dim(&self) -> usize {
        match self {
            Payload::Dense(v) => v.len(),
            Payload::Sparse { dim, .. } => *dim as usize,
            Payload::Packed(p) => p.len(),
            Payload::Labelled { payload, .. } => payload.dim(),
            Payload::Compressed(c) => c.dim(),
        }
    }

    /// Exact encoded size of the payload's content in bits: 64 per f64, 32 per sparse index
    /// (and 32 for the sparse dimension), `bits` per packed integer, 32 per label.
    pub fn bits(&self) -> u64 {
        match self {
            Payload::Dense(v) => 64 * v.len() as u64,
            Payload::Sparse {
                indices, values, ..
            } => 32 + 32 * indices.len() as u64 + 64 * values.len() as u64,
            Payload::Packed(p) => u64::from(p.bits()) * p.len() as u64,
            Payload::Labelled { payload, .. } => 32 + payload.bits(),
            Payload::Compressed(c) => c.bits(),
        }
    }

    /// Checks the payload against the expected dimension: lengths agree, sparse indices are
    /// in range, values are finite, labels are not nested. Runners call this once per message,
    /// when a half returns it or a codec decodes it.
    pub fn validate(&self, dim: usize) -> crate::Result<()> {
        if self.dim() != dim {
            return Err(protocol(format!(
                "message of dimension {}, expected {dim}",
                self.dim()
            )));
        }
        match self {
            Payload::Dense(v) => finite(v),
            Payload::Sparse {
                indices, values, ..
            } => {
                if indices.len() != values.len() {
                    return Err(protocol(
                        "sparse message with unequal index and value counts".into(),
                    ));
                }
                if let Some(i) = indices.iter().find(|&&i| i as usize >= dim) {
                    return Err(protocol(format!("sparse index {i} out of range 0..{dim}")));
                }
                if let Some(w) = indices.windows(2).find(|w| w[0] >= w[1]) {
                    return Err(protocol(format!(
                        "sparse indices not strictly increasing: {} then {}",
                        w[0], w[1]
                    )));
                }
                finite(values)
            }
            // Every packed value fits its width by construction.
            Payload::Packed(_) => Ok(()),
            Payload::Labelled { payload, .. } => match **payload {
                Payload::Labelled { .. } => Err(protocol("nested labelled message".into())),
                ref inner => inner.validate(dim),
            },
            Payload::Compressed(c) => c.validate(dim),
        }
    }

    /// Adds `scale` times the represented vector into `out`; checks the dimension.
    pub fn add_to(&self, scale: f64, out: &mut [f64]) -> crate::Result<()> {
        if self.dim() != out.len() {
            return Err(protocol(format!(
                "message of dimension {} where {} was expected",
                self.dim(),
                out.len()
            )));
        }
        match self {
            Payload::Dense(v) => crate::linalg::axpy(scale, v, out),
            Payload::Sparse {
                indices, values, ..
            } => {
                if indices.len() != values.len() {
                    return Err(protocol(
                        "sparse message with unequal index and value counts".into(),
                    ));
                }
                for (&i, &v) in indices.iter().zip(values) {
                    let slot = out
                        .get_mut(i as usize)
                        .ok_or_else(|| protocol(format!("sparse index {i} out of range")))?;
                    *slot += scale * v;
                }
            }
            Payload::Packed(p) => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o += scale * p.get(i) as f64;
                }
            }
            Payload::Labelled { payload, .. } => payload.add_to(scale, out)?,
            Payload::Compressed(c) => c.add_to(scale, out)?,
        }
        if out.iter().any(|v| !v.is_finite()) {
            return Err(protocol("message holds a non-finite value".into()));
        }
        Ok(())
    }
}

fn finite(v: &[f64]) -> crate::Result<()> {
    // Branch-free within a chunk so that the check vectorises: at d = 10^6 it is one pass at
    // memory speed over each message rather than a compare-and-branch per value.
    if v.chunks(256)
        .all(|c| c.iter().fold(true, |ok, x| ok & x.is_finite()))
    {
        Ok(())
    } else {
        Err(protocol("message holds a non-finite value".into()))
    }
}

/// One message a silo sends. Carries no silo identity: in shuffle mode the server cannot
/// tell messages apart, and aggregation must not depend on their order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiloMessage {
    /// The round the message answers.
    pub round: Round,
    /// The body.
    pub payload: Payload,
}

/// A silo's whole answer to one round: one message for most algorithms, several for
/// multi-message protocols. A shuffle stage permutes the messages of all replies together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The round the reply answers.
    pub round: Round,
    /// Its messages, one or several.
    pub messages: Vec<SiloMessage>,
}

impl Reply {
    /// The reply of one message.
    pub fn single(message: SiloMessage) -> Self {
        Reply {
            round: message.round,
            messages: vec![message],
        }
    }

    /// Validates every message once: its round, its payload against `dim`.
    pub fn validate(&self, dim: usize) -> crate::Result<()> {
        if self.messages.is_empty() {
            return Err(protocol(format!("empty reply to round {}", self.round)));
        }
        for m in &self.messages {
            if m.round != self.round {
                return Err(protocol(format!(
                    "message for round {} in a reply to round {}",
                    m.round, self.round
                )));
            }
            m.payload.validate(dim)?;
        }
        Ok(())
    }

    /// Total encoded size of the messages' payloads, bits.
    pub fn bits(&self) -> u64 {
        self.messages.iter().map(|m| m.payload.bits()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_ints_hold_exactly_len_times_bits_bits() {
        let vals = [0u64, 1, 5, 7, 2];
        let p = PackedInts::pack(3, &vals).unwrap();
        // 5 values × 3 bits = 15 bits → 2 bytes, LSB first: bit 3 (1), bits 6, 8 (5),
        // bits 9–11 (7), bit 13 (2).
        assert_eq!(p.as_bytes(), &[0b0100_1000, 0b0010_1111]);
        assert_eq!(p.unpack(), vals);
        assert_eq!(Payload::Packed(p.clone()).bits(), 15);
        assert!(PackedInts::pack(3, &[8]).is_err(), "8 needs 4 bits");
        assert!(PackedInts::pack(0, &[]).is_err());
        assert!(PackedInts::pack(65, &[]).is_err());
        let full = PackedInts::pack(64, &[u64::MAX, 3]).unwrap();
        assert_eq!(full.unpack(), vec![u64::MAX, 3]);
        // Wrong length or set padding bits are refused.
        assert!(PackedInts::from_bytes(3, 5, vec![0; 3]).is_err());
        assert!(PackedInts::from_bytes(3, 5, vec![0, 0x80]).is_err());
        assert_eq!(
            PackedInts::from_bytes(3, 5, p.as_bytes().to_vec()).unwrap(),
            p
        );
    }

    /// The word-wise pack/unpack against the bit-by-bit definition, every width 1..=64, at
    /// lengths that end a word, a byte and neither.
    #[test]
    fn word_wise_packing_matches_the_bit_by_bit_reference() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for bits in 1..=64u8 {
            for len in [0usize, 1, 7, 8, 9, 63, 64, 65, 130] {
                let vals: Vec<u64> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x >> (64 - u32::from(bits))
                    })
                    .collect();
                let mut want = vec![0u8; PackedInts::byte_len(bits, len as u32) as usize];
                for (i, &v) in vals.iter().enumerate() {
                    for b in 0..bits as usize {
                        if (v >> b) & 1 == 1 {
                            let pos = i * bits as usize + b;
                            want[pos / 8] |= 1 << (pos % 8);
                        }
                    }
                }
                let p = PackedInts::pack(bits, &vals).unwrap();
                assert_eq!(p.as_bytes(), &want[..], "bits {bits} len {len}");
                assert_eq!(p.unpack(), vals, "bits {bits} len {len}");
                for (i, &v) in vals.iter().enumerate() {
                    assert_eq!(p.get(i), v, "bits {bits} len {len} at {i}");
                }
            }
        }
    }

    #[test]
    fn payloads_are_validated_once_against_the_dimension() {
        assert!(Payload::Dense(vec![1.0, 2.0]).validate(2).is_ok());
        assert!(Payload::Dense(vec![1.0, f64::NAN]).validate(2).is_err());
        assert!(Payload::Dense(vec![1.0]).validate(2).is_err());
        let s = Payload::Sparse {
            dim: 4,
            indices: vec![4],
            values: vec![1.0],
        };
        assert!(s.validate(4).is_err(), "index out of range");
        let repeated = Payload::Sparse {
            dim: 4,
            indices: vec![1, 1],
            values: vec![1.0, 1.0],
        };
        assert!(repeated.validate(4).is_err(), "repeated index");
        let l = Payload::Labelled {
            label: 3,
            payload: Box::new(Payload::Packed(PackedInts::pack(1, &[1]).unwrap())),
        };
        assert!(l.validate(1).is_ok());
        assert_eq!(l.bits(), 33);
        let nested = Payload::Labelled {
            label: 0,
            payload: Box::new(l),
        };
        assert!(nested.validate(1).is_err());
        let mut out = vec![0.0];
        Payload::Packed(PackedInts::pack(4, &[9]).unwrap())
            .add_to(0.5, &mut out)
            .unwrap();
        assert_eq!(out, vec![4.5]);
    }
}
