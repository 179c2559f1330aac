//! The server's checkpoint and round log.
//!
//! After aggregating round r the server stores the next round, its epoch, the server half's
//! state, the participation generator's state and the round log in a [`crate::store::Cell`]
//! (two slots, SHA-256, synced before the next round opens). The value is `DPK2` followed by
//! the [`Checkpoint`] in postcard, a compact binary serde format: at d = 10⁶ a half's state
//! is 8 MB of raw little-endian f64s instead of ~20 MB of JSON text, and f64s round-trip bit
//! for bit without float formatting. `DPK2` holds the typed [`HalfState`] (named postcard
//! entries); a `DPK1` checkpoint (string-keyed maps, before issue 10) is refused with a
//! message saying so, never misread. A value that does not decode (a foreign format, bytes
//! that passed the checksum but not the decoder) is an error naming the file, never a fresh
//! start.

use std::path::Path;

use serde::{Deserialize, Serialize};

use dpfl::algo::{HalfState, Round};
use dpfl_privacy::rng::RngState;

use crate::error::{NetError, Result};

/// Tag and version of the checkpoint encoding.
const MAGIC: &[u8; 4] = b"DPK2";
/// The tag of the previous encoding (untyped half state), refused by name.
const OLD_MAGIC: &[u8; 4] = b"DPK1";

/// One line of the round log (`rounds.jsonl`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RoundLog {
    /// The round this line logs.
    pub round: Round,
    /// The server process's start count (incremented at every restart).
    pub epoch: u64,
    /// |S_r|.
    pub selected: usize,
    /// M_r: messages aggregated.
    pub participants: usize,
    /// Messages dropped as malformed or late.
    pub rejected: usize,
    /// Wall time of the round.
    pub seconds: f64,
}

/// What a restarted server resumes from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Checkpoint {
    /// The first round not yet aggregated.
    pub next_round: Round,
    /// The start count of the process that wrote the checkpoint.
    pub epoch: u64,
    /// The server half's typed, binary state.
    pub half: HalfState,
    /// The participation stream's position.
    pub participation: RngState,
    /// Every round aggregated so far.
    pub log: Vec<RoundLog>,
}

impl Checkpoint {
    /// The checkpoint's encoding, as the parts of one cell write (tag, postcard).
    pub fn encode(&self, path: &Path) -> Result<[Vec<u8>; 2]> {
        let body = postcard::to_allocvec(self).map_err(|e| NetError::file(path, e))?;
        Ok([MAGIC.to_vec(), body])
    }

    /// Decodes a checkpoint stored at `path` (for errors): the tag, then exactly one
    /// postcard value.
    pub fn decode(path: &Path, bytes: &[u8]) -> Result<Self> {
        if bytes.starts_with(OLD_MAGIC) {
            return Err(NetError::file(
                path,
                "a DPK1 checkpoint of an older dpfl (untyped half state); this version reads \
                 DPK2: finish the run with the version that started it, or start afresh in an \
                 empty state directory",
            ));
        }
        let body = bytes.strip_prefix(MAGIC).ok_or_else(|| {
            NetError::file(
                path,
                "not a DPK2 checkpoint (nor a DPK1 one: a checkpoint of an older version?)",
            )
        })?;
        let (c, rest): (Checkpoint, &[u8]) =
            postcard::take_from_bytes(body).map_err(|e| NetError::file(path, e))?;
        if !rest.is_empty() {
            return Err(NetError::file(
                path,
                format!("{} trailing bytes after the checkpoint", rest.len()),
            ));
        }
        Ok(c)
    }

    /// The next round recorded in the checkpoint cell at `path`, read without opening it for
    /// writing (tools, tests); `None` before the first checkpoint.
    pub fn next_round_at(path: &Path) -> Result<Option<Round>> {
        match crate::store::Cell::read(path)? {
            None => Ok(None),
            Some(bytes) => Ok(Some(Self::decode(path, &bytes)?.next_round)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        let mut half = HalfState::default();
        half.put("w", &vec![0.1, -0.0, f64::MIN_POSITIVE, 1e308]);
        half.put("t", &3.5f64);
        Checkpoint {
            next_round: Round::new(7),
            epoch: 2,
            half,
            participation: RngState {
                key: [9; 32],
                stream: 4,
                word_pos: "123456789012345678901234567890".into(),
            },
            log: vec![RoundLog {
                round: Round::new(6),
                epoch: 2,
                selected: 3,
                participants: 2,
                rejected: 1,
                seconds: 0.25,
            }],
        }
    }

    #[test]
    fn a_checkpoint_round_trips_bit_for_bit_and_damage_is_refused() {
        let path = Path::new("server/checkpoint");
        let c = sample();
        let parts = c.encode(path).unwrap();
        let bytes = parts.concat();
        let back = Checkpoint::decode(path, &bytes).unwrap();
        assert_eq!(back, c);
        let w = |c: &Checkpoint| {
            c.half
                .vector("w", 4)
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            w(&back),
            w(&c),
            "-0.0 and subnormal bounds kept bit for bit"
        );
        // Binary: the four f64s take 32 bytes, not their decimal text.
        assert!(bytes.len() < 200, "{} bytes", bytes.len());
        // A JSON checkpoint of an older version, a truncated one, one with a trailing byte.
        let json = serde_json::to_vec(&c).unwrap();
        let old = Checkpoint::decode(path, &json).unwrap_err().to_string();
        assert!(
            old.contains("server/checkpoint") && old.contains("DPK1"),
            "{old}"
        );
        assert!(Checkpoint::decode(path, &bytes[..bytes.len() - 3]).is_err());
        // A DPK1 checkpoint (before typed half state) is refused by name.
        let mut v1 = bytes.clone();
        v1[..4].copy_from_slice(b"DPK1");
        let e = Checkpoint::decode(path, &v1).unwrap_err().to_string();
        assert!(e.contains("DPK1 checkpoint of an older dpfl"), "{e}");
        let mut longer = bytes.clone();
        longer.push(0);
        let e = Checkpoint::decode(path, &longer).unwrap_err().to_string();
        assert!(e.contains("1 trailing bytes"), "{e}");
    }
}
