//! The server's checkpoint and round log.
//!
//! After aggregating round r the server stores the next round, its epoch, the server half's
//! state, the participation generator's state and the round log in a [`crate::store::Cell`]
//! (two slots, SHA-256, synced before the next round opens). The value is `DPK3` followed by
//! the [`Checkpoint`] in postcard, a compact binary serde format: at d = 10⁶ a half's state
//! is 8 MB of raw little-endian f64s instead of ~20 MB of JSON text, and f64s round-trip bit
//! for bit without float formatting. `DPK3` holds the typed [`HalfState`] (named postcard
//! entries) and a round log naming each round's submitters, dropouts, quorum and outcome
//! (withheld rounds included); a `DPK2` checkpoint (its log without them) is read, its
//! lines' new fields `None`; a `DPK1` checkpoint (string-keyed maps, before issue 10) is refused with a
//! message saying so, never misread. A value that does not decode (a foreign format, bytes
//! that passed the checksum but not the decoder) is an error naming the file, never a fresh
//! start.

use std::path::Path;

use serde::{Deserialize, Serialize};

use dpfl::algo::{HalfState, Round};
use dpfl_privacy::rng::RngState;

use crate::error::{NetError, Result};

/// Tag and version of the checkpoint encoding.
const MAGIC: &[u8; 4] = b"DPK3";
/// The tag of the encoding before the round log named submitters and outcomes (read).
const V2_MAGIC: &[u8; 4] = b"DPK2";
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
    /// The silos whose reply reached the server (in shuffle mode: whose submission the
    /// shuffler's batch held), in id order; `None` in a log written before dpfl recorded it.
    pub submitted: Option<Vec<u32>>,
    /// Selected silos that neither replied nor refused (gone, killed, late), in id order.
    pub dropped: Option<Vec<u32>>,
    /// Shuffle mode: the fewest silos a batch must hold (`Plan::shuffle_quorum`).
    pub quorum: Option<usize>,
    /// What became of the round; `None` in a log written before dpfl recorded it.
    pub outcome: Option<RoundOutcome>,
}

/// What became of a round, for the round log.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum RoundOutcome {
    /// Aggregated, every selected silo having replied or refused.
    Complete,
    /// Aggregated without the dropped silos: the survivors met the shuffle's quorum (all
    /// silos, or ⌈γ·M_min⌉ under robust γ) or, without a shuffler, the round closed on what
    /// arrived.
    Survivors,
    /// The shuffler withheld the batch (fewer submitters than the quorum): nothing was
    /// aggregated and the server stopped at this round. The submitters' ledgers charged it.
    Withheld,
}

impl RoundLog {
    /// Whether the round was aggregated (a withheld round is logged but not aggregated; it is
    /// run again after a restart).
    pub fn aggregated(&self) -> bool {
        self.outcome != Some(RoundOutcome::Withheld)
    }
}

/// A round log line as DPK2 checkpoints stored it (before submitters and outcomes).
#[derive(Deserialize)]
struct RoundLogV2 {
    round: Round,
    epoch: u64,
    selected: usize,
    participants: usize,
    rejected: usize,
    seconds: f64,
}

/// A DPK2 checkpoint: read, never written.
#[derive(Deserialize)]
struct CheckpointV2 {
    next_round: Round,
    epoch: u64,
    half: HalfState,
    participation: RngState,
    log: Vec<RoundLogV2>,
}

impl From<CheckpointV2> for Checkpoint {
    fn from(c: CheckpointV2) -> Self {
        Checkpoint {
            next_round: c.next_round,
            epoch: c.epoch,
            half: c.half,
            participation: c.participation,
            log: c
                .log
                .into_iter()
                .map(|l| RoundLog {
                    round: l.round,
                    epoch: l.epoch,
                    selected: l.selected,
                    participants: l.participants,
                    rejected: l.rejected,
                    seconds: l.seconds,
                    submitted: None,
                    dropped: None,
                    quorum: None,
                    outcome: None,
                })
                .collect(),
        }
    }
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
                 DPK3 (and DPK2): finish the run with the version that started it, or start afresh in an \
                 empty state directory",
            ));
        }
        if let Some(body) = bytes.strip_prefix(V2_MAGIC) {
            return take_all::<CheckpointV2>(path, body).map(Checkpoint::from);
        }
        let body = bytes.strip_prefix(MAGIC).ok_or_else(|| {
            NetError::file(
                path,
                "not a DPK3 or DPK2 checkpoint (nor a DPK1 one: a checkpoint of an older \
                 version?)",
            )
        })?;
        take_all(path, body)
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

/// Exactly one postcard value of `body`.
fn take_all<T: serde::de::DeserializeOwned>(path: &Path, body: &[u8]) -> Result<T> {
    let (c, rest): (T, &[u8]) =
        postcard::take_from_bytes(body).map_err(|e| NetError::file(path, e))?;
    if !rest.is_empty() {
        return Err(NetError::file(
            path,
            format!("{} trailing bytes after the checkpoint", rest.len()),
        ));
    }
    Ok(c)
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
                submitted: Some(vec![0, 2]),
                dropped: Some(vec![1]),
                quorum: Some(2),
                outcome: Some(RoundOutcome::Survivors),
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
        // A DPK2 checkpoint (its round log without submitters and outcomes) is still read.
        let v2 = |c: &Checkpoint| {
            let log: Vec<_> = c
                .log
                .iter()
                .map(|l| {
                    (
                        l.round,
                        l.epoch,
                        l.selected,
                        l.participants,
                        l.rejected,
                        l.seconds,
                    )
                })
                .collect();
            let v = (c.next_round, c.epoch, &c.half, &c.participation, log);
            [b"DPK2".to_vec(), postcard::to_allocvec(&v).unwrap()].concat()
        };
        let old = Checkpoint::decode(path, &v2(&c)).unwrap();
        assert_eq!((old.next_round, old.epoch), (c.next_round, c.epoch));
        assert_eq!((old.log[0].participants, old.log[0].outcome), (2, None));
        assert_eq!(old.log[0].submitted, None);
        let mut longer = bytes.clone();
        longer.push(0);
        let e = Checkpoint::decode(path, &longer).unwrap_err().to_string();
        assert!(e.contains("1 trailing bytes"), "{e}");
    }
}
