//! Durable files.
//!
//! [`write_atomic`] writes a temporary file, fsyncs it and renames it: a crash leaves either
//! the old or the new contents, never a torn file. Used for files written once or rarely.
//!
//! [`Cell`] is for state rewritten every round (a silo's message and generator state, its
//! round ledger, the server's checkpoint). Creating and renaming a file per round made ext4
//! allocate a fresh inode each time, and with thousands of recently deleted inodes the
//! allocator's scan (`find_inode_bit`, `recently_deleted`) dominated a 25-silo round. A cell
//! is two slot files written alternately in place: each write goes to the slot *not* holding
//! the latest value, with a sequence number and a SHA-256 of the contents, and is synced before
//! `write` returns. A crash mid-write tears at most that slot; the reader takes the valid slot
//! with the highest sequence number, which is the last completed write.
//!
//! Hand-written because no maintained crate offers this two-slot scheme on plain files;
//! the format is 52 bytes of header: "DPC1", u64 sequence, u64 length, SHA-256, contents.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{NetError, Result};

/// Writes `bytes` to `path` atomically: a synced temporary file renamed over it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(NetError::io(dir))?;
    }
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp).map_err(NetError::io(&tmp))?;
    f.write_all(bytes).map_err(NetError::io(&tmp))?;
    f.sync_all().map_err(NetError::io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(NetError::io(path))
}

/// The file's bytes, or none when it does not exist.
pub fn read_opt(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(NetError::Io {
            path: path.into(),
            source: e,
        }),
    }
}

const MAGIC: &[u8; 4] = b"DPC1";
const HEADER: usize = 4 + 8 + 8 + 32;

/// A durable value rewritten in place (see the module doc). Files: `<path>.0` and `<path>.1`.
#[derive(Debug)]
pub struct Cell {
    slots: [(PathBuf, File); 2],
    /// Sequence number of the latest completed write (0: none).
    seq: u64,
}

fn slot_path(path: &Path, i: usize) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{i}"));
    PathBuf::from(s)
}

/// What a slot file holds.
enum Slot {
    /// Absent or zero-length: never written.
    Empty,
    /// Bytes that are not a complete write (torn, truncated, flipped bits, not a cell).
    Damaged(String),
    Valid(u64, Vec<u8>),
}

fn parse_slot(bytes: Vec<u8>) -> Slot {
    if bytes.is_empty() {
        return Slot::Empty;
    }
    if bytes.len() < HEADER || &bytes[..4] != MAGIC {
        return Slot::Damaged(format!("{} bytes without a cell header", bytes.len()));
    }
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[o..o + 8]);
        u64::from_le_bytes(b)
    };
    let (seq, len) = (u64_at(4), u64_at(12));
    let body = &bytes[HEADER..];
    if body.len() as u64 != len {
        return Slot::Damaged(format!(
            "header announces {len} bytes, {} follow",
            body.len()
        ));
    }
    if Sha256::digest(body).as_slice() != &bytes[20..HEADER] {
        return Slot::Damaged("SHA-256 mismatch".into());
    }
    Slot::Valid(seq, body.to_vec())
}

fn read_slot(file: &mut File, path: &Path) -> Result<Slot> {
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0)).map_err(NetError::io(path))?;
    file.read_to_end(&mut bytes).map_err(NetError::io(path))?;
    Ok(parse_slot(bytes))
}

/// The latest valid value of two slots. One damaged slot beside a valid one is the torn
/// last write of a crash (the value before it is the last completed write) and is recovered
/// from; no valid slot but a damaged one is damaged state, and an error: starting from empty
/// would forget what was released (a silo would draw a second, fresh noise for rounds it
/// already answered).
fn latest(path: &Path, slots: [(PathBuf, Slot); 2]) -> Result<(u64, Option<Vec<u8>>)> {
    let mut best: Option<(u64, Vec<u8>)> = None;
    let mut damaged = Vec::new();
    for (p, slot) in slots {
        match slot {
            Slot::Empty => {}
            Slot::Damaged(why) => damaged.push(format!("{}: {why}", p.display())),
            Slot::Valid(seq, body) => {
                if best.as_ref().is_none_or(|(s, _)| seq > *s) {
                    best = Some((seq, body));
                }
            }
        }
    }
    match best {
        Some((seq, body)) => {
            for d in damaged {
                tracing::warn!(
                    "torn write ({d}); recovered the previous value from the other slot"
                );
            }
            Ok((seq, Some(body)))
        }
        None if !damaged.is_empty() => Err(NetError::file(
            path,
            format!(
                "damaged state ({}) and no valid copy: refusing to start from empty; restore \
                 the state directory from a backup (see docs/deployment.md, \"Operating a \
                 silo\")",
                damaged.join("; ")
            ),
        )),
        None => Ok((0, None)),
    }
}

impl Cell {
    /// Opens (creating if needed) the cell at `path` and returns its latest value.
    pub fn open(path: &Path) -> Result<(Cell, Option<Vec<u8>>)> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(NetError::io(dir))?;
        }
        let open = |i: usize| -> Result<(PathBuf, File)> {
            let p = slot_path(path, i);
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&p)
                .map_err(NetError::io(&p))?;
            Ok((p, f))
        };
        let mut slots = [open(0)?, open(1)?];
        let mut read = Vec::with_capacity(2);
        for (p, f) in &mut slots {
            read.push((p.clone(), read_slot(f, p)?));
        }
        let [a, b]: [(PathBuf, Slot); 2] = read
            .try_into()
            .map_err(|_| NetError::file(path, "two slots expected"))?;
        let (seq, value) = latest(path, [a, b])?;
        Ok((Cell { slots, seq }, value))
    }

    /// The latest value at `path`, without opening the cell for writing (tests, tools).
    pub fn read(path: &Path) -> Result<Option<Vec<u8>>> {
        let slot = |i: usize| -> Result<(PathBuf, Slot)> {
            let p = slot_path(path, i);
            match std::fs::read(&p) {
                Ok(b) => Ok((p, parse_slot(b))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((p, Slot::Empty)),
                Err(e) => Err(NetError::Io { path: p, source: e }),
            }
        };
        Ok(latest(path, [slot(0)?, slot(1)?])?.1)
    }

    /// Replaces the value durably: when this returns, a crash leaves `bytes`.
    pub fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.write_parts(&[bytes])
    }

    /// [`Cell::write`] of the concatenation of `parts`, without building it (a silo's state
    /// holds its whole message: 8 MB at d = 10⁶).
    pub fn write_parts(&mut self, parts: &[&[u8]]) -> Result<()> {
        let seq = self.seq + 1;
        let (path, file) = &mut self.slots[(seq % 2) as usize];
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let mut hash = Sha256::new();
        for p in parts {
            hash.update(p);
        }
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&seq.to_le_bytes());
        header.extend_from_slice(&(len as u64).to_le_bytes());
        header.extend_from_slice(&hash.finalize());
        file.seek(SeekFrom::Start(0))
            .map_err(NetError::io(&*path))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 16, &mut *file);
        out.write_all(&header).map_err(NetError::io(&*path))?;
        for p in parts {
            out.write_all(p).map_err(NetError::io(&*path))?;
        }
        out.flush().map_err(NetError::io(&*path))?;
        drop(out);
        file.set_len((HEADER + len) as u64)
            .map_err(NetError::io(&*path))?;
        file.sync_data().map_err(NetError::io(&*path))?;
        self.seq = seq;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_returns_its_last_complete_write_even_after_a_torn_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state");
        let (mut c, v) = Cell::open(&path).expect("open");
        assert_eq!(v, None);
        c.write(b"one").expect("write");
        c.write(b"two, longer").expect("write");
        c.write(b"3").expect("write");
        drop(c);
        assert_eq!(Cell::read(&path).expect("read").as_deref(), Some(&b"3"[..]));
        let (mut c, v) = Cell::open(&path).expect("reopen");
        assert_eq!(v.as_deref(), Some(&b"3"[..]));
        c.write(b"four").expect("write");
        drop(c);
        // Tear the latest write (slot of sequence 4 = slot 0): the previous value survives.
        let p0 = slot_path(&path, 0);
        let mut bytes = std::fs::read(&p0).expect("slot");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&p0, &bytes).expect("tear");
        assert_eq!(Cell::read(&path).expect("read").as_deref(), Some(&b"3"[..]));
        // A truncated slot too.
        std::fs::write(&p0, &bytes[..HEADER - 1]).expect("truncate");
        let (mut c, v) = Cell::open(&path).expect("reopen");
        assert_eq!(v.as_deref(), Some(&b"3"[..]));
        // Writing after recovery continues past the surviving sequence number.
        c.write(b"five").expect("write");
        assert_eq!(
            Cell::read(&path).expect("read").as_deref(),
            Some(&b"five"[..])
        );
    }

    #[test]
    fn a_cell_with_no_valid_slot_but_a_damaged_one_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state");
        let (mut c, _) = Cell::open(&path).expect("open");
        c.write(b"answered round 0").expect("write");
        drop(c);
        // The only written slot (sequence 1 = slot 1) loses a bit: nothing valid is left.
        let p1 = slot_path(&path, 1);
        let mut bytes = std::fs::read(&p1).expect("slot");
        bytes[HEADER] ^= 0x40;
        std::fs::write(&p1, &bytes).expect("flip");
        for e in [
            Cell::read(&path).expect_err("read"),
            Cell::open(&path).expect_err("open"),
        ] {
            let msg = e.to_string();
            assert!(msg.contains("state.1"), "{msg}");
            assert!(msg.contains("SHA-256 mismatch"), "{msg}");
            assert!(msg.contains("refusing to start from empty"), "{msg}");
        }
        // Garbage in both slots: the same.
        std::fs::write(slot_path(&path, 0), b"junk").expect("junk");
        let msg = Cell::open(&path).expect_err("open").to_string();
        assert!(msg.contains("without a cell header"), "{msg}");
        // Zero-length slots are a cell never written.
        std::fs::write(slot_path(&path, 0), b"").expect("empty");
        std::fs::write(slot_path(&path, 1), b"").expect("empty");
        assert_eq!(Cell::open(&path).expect("open").1, None);
    }
}
