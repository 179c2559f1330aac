//! The server's checkpoint and round log.
//!
//! After aggregating round r the server stores the next round, its epoch, the server half's
//! state, the participation generator's state and the round log in a [`crate::store::Cell`]
//! (two slots, SHA-256, synced before the next round opens). The value is `DPK1` followed by
//! the [`Checkpoint`] in postcard, a compact binary serde format: at d = 10⁶ a half's state
//! is 8 MB of raw little-endian f64s instead of ~20 MB of JSON text, and f64s round-trip bit
//! for bit without float formatting. A value that does not decode (a foreign format, bytes
//! that passed the checksum but not the decoder) is an error naming the file, never a fresh
//! start.

use std::path::Path;

use serde::{Deserialize, Serialize};

use dpfl::algo::{HalfState, Round};
use dpfl_privacy::rng::RngState;

use crate::error::{NetError, Result};

/// Tag and version of the checkpoint encoding.
const MAGIC: &[u8; 4] = b"DPK1";

/// One line of the round log (`rounds.jsonl`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RoundLog {
    pub round: Round,
    pub epoch: u64,
    /// |S_r|.
    pub selected: usize,
    /// M_r: messages aggregated.
    pub participants: usize,
    pub rejected: usize,
    pub seconds: f64,
}

/// What a restarted server resumes from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Checkpoint {
    pub next_round: Round,
    pub epoch: u64,
    pub half: HalfState,
    pub participation: RngState,
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
        let body = bytes.strip_prefix(MAGIC).ok_or_else(|| {
            NetError::file(
                path,
                "not a DPK1 checkpoint (a checkpoint of an older version?)",
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
        half.vectors
            .insert("w".into(), vec![0.1, -0.0, f64::MIN_POSITIVE, 1e308]);
        half.scalars.insert("t".into(), 3.5);
        Checkpoint {
            next_round: 7,
            epoch: 2,
            half,
            participation: RngState {
                key: [9; 32],
                stream: 4,
                word_pos: "123456789012345678901234567890".into(),
            },
            log: vec![RoundLog {
                round: 6,
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
            c.half.vectors["w"]
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
        let mut longer = bytes.clone();
        longer.push(0);
        let e = Checkpoint::decode(path, &longer).unwrap_err().to_string();
        assert!(e.contains("1 trailing bytes"), "{e}");
    }
}
