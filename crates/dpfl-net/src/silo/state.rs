//! A silo's stored state: the last round answered, its half's state, a seeded generator's
//! state and the exact bodies it sent for that round, in one [`Cell`] write (two slots,
//! SHA-256, synced before anything is sent). An OS-seeded silo stores no generator state:
//! its key would regenerate every noise vector it drew (issue 27), and a restart draws a
//! fresh key instead; what a restart must replay is the stored message, never the noise.
//!
//! Layout: `DPS3` (`DPS1` held the untyped half state before issue 10, `DPS2` an OS-seeded
//! silo's generator key before issue 27; both are refused by name), a u64 length and the
//! [`Persisted`] header in postcard (a compact binary
//! serde format: f64s bit for bit, no float formatting), then each body as a u64 length and
//! its bytes. The bodies are written as they are, without a copy into one buffer (a body is
//! 8 MB at d = 10⁶). A value that does not decode is an error naming the file, never a fresh
//! start.

use std::path::Path;

use serde::{Deserialize, Serialize};

use dpfl::algo::HalfState;
use dpfl_privacy::rng::RngState;

use crate::error::{NetError, Result};
use crate::store::Cell;

/// Tag and version of the layout.
const MAGIC: &[u8; 4] = b"DPS3";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Persisted {
    /// The last round answered; its bodies follow the header.
    pub round: u32,
    pub half: HalfState,
    /// A seeded generator's state (`DpRng::seeded_snapshot`); `None` for an OS-seeded one,
    /// whose key is never written.
    pub rng: Option<RngState>,
}

/// Stores `p` and the bodies sent for its round durably in `cell` (at `path`, for errors).
pub(crate) fn write(cell: &mut Cell, path: &Path, p: &Persisted, bodies: &[Vec<u8>]) -> Result<()> {
    let head = postcard::to_allocvec(p).map_err(|e| NetError::file(path, e))?;
    let head_len = (head.len() as u64).to_le_bytes();
    let lens: Vec<[u8; 8]> = bodies
        .iter()
        .map(|b| (b.len() as u64).to_le_bytes())
        .collect();
    let mut parts: Vec<&[u8]> = Vec::with_capacity(3 + 2 * bodies.len());
    parts.extend([&MAGIC[..], &head_len, &head]);
    for (len, b) in lens.iter().zip(bodies) {
        parts.push(len);
        parts.push(b);
    }
    cell.write_parts(&parts)
}

/// Splits a stored value into its header and the bodies sent.
pub(crate) fn read(bytes: &[u8]) -> std::result::Result<(Persisted, Vec<Vec<u8>>), String> {
    if bytes.starts_with(b"DPS1") || bytes.starts_with(b"DPS2") {
        return Err(format!(
            "a {} silo state of an older dpfl (DPS1: untyped half state; DPS2: it stored an \
             OS-seeded generator's key); this version reads DPS3: finish the run with the \
             version that started it",
            String::from_utf8_lossy(&bytes[..4])
        ));
    }
    let mut rest = bytes
        .strip_prefix(MAGIC)
        .ok_or("not a DPS3 silo state (nor DPS1/DPS2: a state of an older version?)")?;
    let take = |rest: &mut &[u8]| -> std::result::Result<Vec<u8>, String> {
        let len = rest
            .get(..8)
            .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
            .ok_or("truncated state file")?;
        let end = 8usize
            .checked_add(usize::try_from(len).map_err(|e| e.to_string())?)
            .filter(|&e| e <= rest.len())
            .ok_or("truncated state file")?;
        let part = rest[8..end].to_vec();
        *rest = &rest[end..];
        Ok(part)
    };
    let head = take(&mut rest)?;
    let (p, trailing): (Persisted, &[u8]) =
        postcard::take_from_bytes(&head).map_err(|e| e.to_string())?;
    if !trailing.is_empty() {
        return Err(format!(
            "{} trailing bytes after the header",
            trailing.len()
        ));
    }
    let mut bodies = Vec::new();
    while !rest.is_empty() {
        bodies.push(take(&mut rest)?);
    }
    if bodies.is_empty() {
        return Err("stored state without the bodies sent".into());
    }
    Ok((p, bodies))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_round_trips_and_damage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state");
        let (mut cell, _) = Cell::open(&path).unwrap();
        let mut half = HalfState::default();
        half.put("shift", &vec![-0.0, 1.5e-310, 2.0]);
        let p = Persisted {
            round: 4,
            half,
            rng: Some(RngState {
                key: [1; 32],
                stream: 7,
                word_pos: "42".into(),
            }),
        };
        let bodies = vec![b"first".to_vec(), Vec::new(), b"third".to_vec()];
        write(&mut cell, &path, &p, &bodies).unwrap();
        let stored = Cell::read(&path).unwrap().unwrap();
        let (back, sent) = read(&stored).unwrap();
        assert_eq!((back.clone(), sent), (p.clone(), bodies));
        let bits: Vec<u64> = back
            .half
            .vector("shift", 3)
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(
            bits,
            vec![(-0.0f64).to_bits(), 1.5e-310f64.to_bits(), 2.0f64.to_bits()]
        );
        // Older (JSON) state, a cut body, a header without bodies: errors, not a fresh start.
        assert!(read(b"{\"round\":1}").unwrap_err().contains("DPS1"));
        assert!(read(b"DPS2\0\0").unwrap_err().contains("generator's key"));
        assert!(
            read(&stored[..stored.len() - 1])
                .unwrap_err()
                .contains("truncated")
        );
        let head_only = 4 + 8 + u64::from_le_bytes(stored[4..12].try_into().unwrap()) as usize;
        assert!(
            read(&stored[..head_only])
                .unwrap_err()
                .contains("without the bodies")
        );
    }
}
