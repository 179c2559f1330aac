//! The compressed message kinds that no general payload can carry: [`Compressed`], travelling
//! as `Payload::Compressed`. Each knows its dimension, its exact content bits, its validation,
//! how to add the vector it represents, and its content bytes on the wire (the codec writes
//! its usual 9-byte head — kind, dimension, `wire_count` — in front of them).

use serde::{Deserialize, Serialize};

use super::PackedInts;
use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;
use dpfl_privacy::sampler::WithoutReplacement;

fn protocol(m: String) -> crate::Error {
    crate::Error::Protocol(m)
}

/// Bits of the high part of an f64 natural compression keeps: sign and 11 exponent bits.
pub(crate) const POWER_BITS: u8 = 12;

/// Largest s accepted: 2s codes then fit in 31 bits.
pub(crate) const MAX_LEVELS: u32 = 1 << 30;

/// Width of the codes {0, …, 2s} of s-level quantisation: ⌈log₂(2s+1)⌉.
pub(crate) fn level_width(s: u32) -> u8 {
    (64 - u64::from(2 * s).leading_zeros()) as u8
}

/// A compressed vector in a compressor's own wire encoding, with its exact bit count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Compressed {
    /// Random-k whose k indices are [`indices_from_seed`]`(seed, dim, k)` with
    /// k = `values.len()`; `values` are the scaled coordinates in increasing index order.
    SeededSparse {
        /// The vector's length.
        dim: u32,
        /// The seed the indices derive from.
        seed: u64,
        /// The scaled coordinates.
        values: Vec<f64>,
    },
    /// s-level quantisation: coordinate j is `scale·(code_j − s)`, codes in {0, …, 2s} packed
    /// in ⌈log₂(2s+1)⌉ bits.
    Levels {
        /// Levels s.
        s: u32,
        /// The scale of one level.
        scale: f64,
        /// The codes, in {0, …, 2s}.
        codes: PackedInts,
    },
    /// Natural compression: coordinate j is the f64 whose 12 high bits (sign, exponent) are
    /// code j and whose mantissa is zero: ±2^e or ±0.
    PowersOfTwo(PackedInts),
}

impl Compressed {
    /// Length of the represented vector.
    pub fn dim(&self) -> usize {
        match self {
            Compressed::SeededSparse { dim, .. } => *dim as usize,
            Compressed::Levels { codes, .. } => codes.len(),
            Compressed::PowersOfTwo(codes) => codes.len(),
        }
    }

    /// Exact content bits: seed and values; scale and codes; codes. The codec's head carries
    /// the dimension and the count (k, or s), as it does for every payload kind.
    pub fn bits(&self) -> u64 {
        match self {
            Compressed::SeededSparse { values, .. } => 64 + 64 * values.len() as u64,
            Compressed::Levels { codes, .. } => 64 + u64::from(codes.bits()) * codes.len() as u64,
            Compressed::PowersOfTwo(codes) => u64::from(codes.bits()) * codes.len() as u64,
        }
    }

    /// Checks the message against the expected dimension: seeded k in 1..=dim and finite
    /// values; codes of the right width and range, a finite non-negative scale; no power of two
    /// that is infinite or NaN.
    pub fn validate(&self, dim: usize) -> crate::Result<()> {
        if self.dim() != dim {
            return Err(protocol(format!(
                "compressed message of dimension {}, expected {dim}",
                self.dim()
            )));
        }
        match self {
            Compressed::SeededSparse { values, .. } => {
                if values.is_empty() || values.len() > dim {
                    return Err(protocol(format!(
                        "seeded sparse message with {} values for dimension {dim}",
                        values.len()
                    )));
                }
                if values.iter().any(|v| !v.is_finite()) {
                    return Err(protocol("message holds a non-finite value".into()));
                }
            }
            Compressed::Levels { s, scale, codes } => {
                if *s == 0 || *s > MAX_LEVELS {
                    return Err(protocol(format!("quantised message with s = {s} levels")));
                }
                if codes.bits() != level_width(*s) {
                    return Err(protocol(format!(
                        "quantised message with {}-bit codes where s = {s} needs {}",
                        codes.bits(),
                        level_width(*s)
                    )));
                }
                if !(scale.is_finite() && *scale >= 0.0) {
                    return Err(protocol(format!("quantised message with scale {scale}")));
                }
                if let Some(j) = (0..codes.len()).find(|&j| codes.get(j) > 2 * u64::from(*s)) {
                    return Err(protocol(format!(
                        "quantisation code {} at {j} exceeds 2s = {}",
                        codes.get(j),
                        2 * s
                    )));
                }
            }
            Compressed::PowersOfTwo(codes) => {
                if codes.bits() != POWER_BITS {
                    return Err(protocol(format!(
                        "natural-compression message with {}-bit codes, expected {POWER_BITS}",
                        codes.bits()
                    )));
                }
                if let Some(j) = (0..codes.len()).find(|&j| codes.get(j) & 0x7ff == 0x7ff) {
                    return Err(protocol(format!(
                        "natural-compression code at {j} is not a finite power of two"
                    )));
                }
            }
        }
        Ok(())
    }

    /// out += scale · the represented vector (`out.len()` = dim, checked by the caller).
    pub fn add_to(&self, scale: f64, out: &mut [f64]) -> crate::Result<()> {
        match self {
            Compressed::SeededSparse { dim, seed, values } => {
                let idx = indices_from_seed(*seed, *dim as usize, values.len())?;
                for (&i, &v) in idx.iter().zip(values) {
                    out[i as usize] += scale * v;
                }
            }
            Compressed::Levels {
                s,
                scale: step,
                codes,
            } => {
                let s = i64::from(*s);
                for (j, o) in out.iter_mut().enumerate() {
                    let c = codes.get(j) as i64 - s;
                    if c != 0 {
                        *o += scale * step * c as f64;
                    }
                }
            }
            Compressed::PowersOfTwo(codes) => {
                for (j, o) in out.iter_mut().enumerate() {
                    *o += scale * f64::from_bits(codes.get(j) << 52);
                }
            }
        }
        Ok(())
    }

    /// The head's count field: k, s, or the code width.
    pub fn wire_count(&self) -> u32 {
        match self {
            Compressed::SeededSparse { values, .. } => values.len() as u32,
            Compressed::Levels { s, .. } => *s,
            Compressed::PowersOfTwo(codes) => u32::from(codes.bits()),
        }
    }

    /// Which kind (0, 1, 2) this is among [`Compressed::KINDS`].
    pub fn kind(&self) -> u8 {
        match self {
            Compressed::SeededSparse { .. } => 0,
            Compressed::Levels { .. } => 1,
            Compressed::PowersOfTwo(_) => 2,
        }
    }
    /// Number of compressed kinds (the wire tags are 0..KINDS).
    pub const KINDS: u8 = 3;

    /// Appends the content bytes: exactly ⌈[`Self::bits`]/8⌉, little-endian.
    pub fn push_content(&self, out: &mut Vec<u8>) {
        match self {
            Compressed::SeededSparse { seed, values, .. } => {
                out.extend_from_slice(&seed.to_le_bytes());
                values
                    .iter()
                    .for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
            }
            Compressed::Levels { scale, codes, .. } => {
                out.extend_from_slice(&scale.to_le_bytes());
                out.extend_from_slice(codes.as_bytes());
            }
            Compressed::PowersOfTwo(codes) => out.extend_from_slice(codes.as_bytes()),
        }
    }

    /// Content length in bytes of a message of `kind` with the given head, before reading it
    /// (so a reader can check it against what it holds); an impossible head is an error.
    pub fn content_len(kind: u8, dim: usize, count: u32) -> crate::Result<usize> {
        let n = u32::try_from(dim).map_err(|_| protocol(format!("dimension {dim}")))?;
        match kind {
            0 if count == 0 || count as usize > dim => Err(protocol(format!(
                "seeded sparse message with {count} values for dimension {dim}"
            ))),
            0 => Ok(8 + 8 * count as usize),
            1 if count == 0 || count > MAX_LEVELS => {
                Err(protocol(format!("quantised message with s = {count}")))
            }
            1 => Ok(8 + PackedInts::byte_len(level_width(count), n) as usize),
            2 if count != u32::from(POWER_BITS) => Err(protocol(format!(
                "natural-compression message with {count}-bit codes"
            ))),
            2 => Ok(PackedInts::byte_len(POWER_BITS, n) as usize),
            k => Err(protocol(format!("unknown compressed kind {k}"))),
        }
    }

    /// Parses content bytes of exactly [`Self::content_len`] bytes; validates the result.
    pub fn from_content(kind: u8, dim: usize, count: u32, bytes: &[u8]) -> crate::Result<Self> {
        let want = Self::content_len(kind, dim, count)?;
        if bytes.len() != want {
            return Err(protocol(format!(
                "{} content bytes where the head announces {want}",
                bytes.len()
            )));
        }
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[i..i + 8]);
            u64::from_le_bytes(b)
        };
        let n = dim as u32;
        let c = match kind {
            0 => Compressed::SeededSparse {
                dim: n,
                seed: u64_at(0),
                values: (0..count as usize)
                    .map(|i| f64::from_bits(u64_at(8 + 8 * i)))
                    .collect(),
            },
            1 => Compressed::Levels {
                s: count,
                scale: f64::from_bits(u64_at(0)),
                codes: PackedInts::from_bytes(level_width(count), n, bytes[8..].to_vec())?,
            },
            _ => Compressed::PowersOfTwo(PackedInts::from_bytes(POWER_BITS, n, bytes.to_vec())?),
        };
        c.validate(dim)?;
        Ok(c)
    }
}

/// The k sorted distinct indices below `dim` named by `seed`: Floyd's k-subset
/// ([`WithoutReplacement`]) on the ChaCha20 stream `(seed, Purpose::Compression, 0)`. Part of
/// the wire format of [`Compressed::SeededSparse`], so it lives with the payload on the floor.
pub fn indices_from_seed(seed: u64, dim: usize, k: usize) -> crate::Result<Vec<u32>> {
    let mut rng = DpRng::from_seed(seed, Purpose::Compression, 0);
    let mut idx = Vec::with_capacity(k);
    WithoutReplacement::new(dim, k)?.draw(&mut rng, &mut idx);
    // dim < 2^32 is checked by every caller (constructor or validated message).
    Ok(idx.into_iter().map(|i| i as u32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_widths_are_ceil_log2_of_2s_plus_1() {
        let w: Vec<u8> = [1, 2, 3, 4, 7, 8, 127, 128].map(level_width).to_vec();
        assert_eq!(w, vec![2, 3, 3, 4, 4, 5, 8, 9]);
    }

    #[test]
    fn content_round_trips_in_exactly_ceil_bits_over_8_bytes() {
        let cases = vec![
            Compressed::SeededSparse {
                dim: 9,
                seed: 0xdead_beef,
                values: vec![1.5, -2.0],
            },
            Compressed::Levels {
                s: 2,
                scale: 0.25,
                codes: PackedInts::pack(3, &[0, 4, 2, 3, 1]).unwrap(),
            },
            Compressed::PowersOfTwo(PackedInts::pack(12, &[0x3ff, 0xc00, 0, 0x401]).unwrap()),
        ];
        // 64 + 2·64; 64 + 5·3; 4·12.
        let bits: Vec<u64> = cases.iter().map(Compressed::bits).collect();
        assert_eq!(bits, vec![192, 79, 48]);
        for c in cases {
            let mut buf = Vec::new();
            c.push_content(&mut buf);
            assert_eq!(buf.len() as u64, c.bits().div_ceil(8));
            let len = Compressed::content_len(c.kind(), c.dim(), c.wire_count()).unwrap();
            assert_eq!(len, buf.len());
            let back = Compressed::from_content(c.kind(), c.dim(), c.wire_count(), &buf);
            assert_eq!(back.unwrap(), c);
            assert!(
                Compressed::from_content(c.kind(), c.dim(), c.wire_count(), &buf[1..]).is_err()
            );
        }
        // 1.0, −2.0, 0, 4.0 from the f64 high bits.
        let mut out = vec![0.0; 4];
        Compressed::PowersOfTwo(PackedInts::pack(12, &[0x3ff, 0xc00, 0, 0x401]).unwrap())
            .add_to(1.0, &mut out)
            .unwrap();
        assert_eq!(out, vec![1.0, -2.0, 0.0, 4.0]);
    }

    #[test]
    fn malformed_compressed_messages_are_refused() {
        let bad = [
            // k = 0 and k > d.
            Compressed::SeededSparse {
                dim: 3,
                seed: 1,
                values: vec![],
            },
            Compressed::SeededSparse {
                dim: 1,
                seed: 1,
                values: vec![1.0, 2.0],
            },
            Compressed::SeededSparse {
                dim: 3,
                seed: 1,
                values: vec![f64::INFINITY],
            },
            // Code 5 > 2s = 4; wrong width; negative scale.
            Compressed::Levels {
                s: 2,
                scale: 1.0,
                codes: PackedInts::pack(3, &[5]).unwrap(),
            },
            Compressed::Levels {
                s: 2,
                scale: 1.0,
                codes: PackedInts::pack(4, &[1]).unwrap(),
            },
            Compressed::Levels {
                s: 2,
                scale: -1.0,
                codes: PackedInts::pack(3, &[1]).unwrap(),
            },
            // Infinity's exponent; wrong width.
            Compressed::PowersOfTwo(PackedInts::pack(12, &[0x7ff]).unwrap()),
            Compressed::PowersOfTwo(PackedInts::pack(11, &[1]).unwrap()),
        ];
        for c in bad {
            assert!(c.validate(c.dim()).is_err(), "{c:?}");
        }
        assert!(Compressed::content_len(0, 4, 5).is_err());
        assert!(Compressed::content_len(1, 4, 0).is_err());
        assert!(Compressed::content_len(2, 4, 11).is_err());
        assert!(Compressed::content_len(3, 4, 1).is_err());
    }
}
