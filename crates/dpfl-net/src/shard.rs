//! A silo's data shard on disk: how `dpfl silo --data PATH` gets its data.
//!
//! The format keeps every f64 bit for bit (the network run must equal the simulator's): the
//! line `DPFLSHARD2`, one line of JSON describing the shape, then little-endian f64s: train
//! features (row-major), train targets, test features, test targets, and last the SHA-256 of
//! everything before it. A shard whose checksum fails is refused, naming the file: flipped
//! bits in a finite f64 would otherwise train silently on altered data. `dpfl federate
//! --prepare-only` writes one shard per silo from an experiment's data pipeline (the same
//! split as `dpfl train`); a real silo writes its own from its records.
//!
//! The header names the silo the shard was made for. Its [`ShardId::digest`] is the SHA-256
//! of the header alone (silo name, row counts, feature names, classes: public facts), which
//! `dpfl federate` writes into the federation file as `public.shards`, so that a silo started
//! with another silo's shard is refused (issue 31). It is deliberately not a digest of the
//! records: a digest of the data, read by the server, would let it test guesses of a record
//! (all but one record known, try each value of the last), which differential privacy rules
//! out.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use dpfl::data::{Dataset, SiloData, Target};
use dpfl::linalg::Matrix;

use crate::error::{NetError, Result};

const MAGIC: &[u8] = b"DPFLSHARD2\n";
/// The format before checksums; refused with a hint.
const MAGIC_V1: &[u8] = b"DPFLSHARD1\n";
const SUM: usize = 32;

#[derive(Debug, Serialize, Deserialize)]
struct Shape {
    train_rows: usize,
    test_rows: usize,
    features: usize,
    /// Class names, or null for a real target.
    classes: Option<Vec<String>>,
    feature_names: Vec<String>,
    /// The silo the shard was made for (absent in shards written before names were kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    silo: Option<String>,
}

/// Which silo a shard belongs to, from its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardId {
    /// The silo's name, if the shard records one.
    pub silo: Option<String>,
    /// SHA-256 (hex) of the header's public facts (module doc): equal for the shard
    /// `dpfl federate` prepares and the one a silo makes of the same records.
    pub digest: String,
}

fn shape(data: &SiloData, silo: Option<&str>) -> Shape {
    Shape {
        train_rows: data.train.len(),
        test_rows: data.test.len(),
        features: data.train.num_features(),
        classes: match data.train.target() {
            Target::Classes { names } => Some(names.clone()),
            Target::Real => None,
        },
        feature_names: data.train.feature_names().to_vec(),
        silo: silo.map(str::to_string),
    }
}

fn id_of(shape: &Shape) -> ShardId {
    // serde_json writes the struct's fields in declaration order: a canonical form.
    let json = serde_json::to_vec(shape).unwrap_or_default();
    ShardId {
        silo: shape.silo.clone(),
        digest: Sha256::digest(&json)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    }
}

/// The identity a shard of `data` made for silo `silo` has (what [`write`] records).
pub fn id(data: &SiloData, silo: Option<&str>) -> ShardId {
    id_of(&shape(data, silo))
}

/// Writes the data shard of silo `silo` (checksummed, atomically).
pub fn write(path: &Path, data: &SiloData, silo: Option<&str>) -> Result<()> {
    let shape = shape(data, silo);
    let mut out = MAGIC.to_vec();
    out.extend(serde_json::to_vec(&shape).map_err(|e| NetError::file(path, e))?);
    out.push(b'\n');
    for d in [&data.train, &data.test] {
        for v in d.x().as_slice().iter().chain(d.y()) {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    crate::store::write_atomic(path, &out)
}

/// Reads a data shard, refusing a damaged one.
pub fn read(path: &Path) -> Result<SiloData> {
    read_with_id(path).map(|(d, _)| d)
}

/// [`read`], with the shard's [`ShardId`].
pub fn read_with_id(path: &Path) -> Result<(SiloData, ShardId)> {
    let bytes = std::fs::read(path).map_err(NetError::io(path))?;
    if bytes.starts_with(MAGIC_V1) {
        return Err(NetError::file(
            path,
            "a shard of the old format without a checksum: write it again (dpfl federate \
             --prepare-only)",
        ));
    }
    if !bytes.starts_with(MAGIC) {
        return Err(NetError::file(path, "not a dpfl shard (bad magic)"));
    }
    let split = bytes
        .len()
        .checked_sub(SUM)
        .filter(|&n| n >= MAGIC.len())
        .ok_or_else(|| NetError::file(path, "truncated shard (no checksum)"))?;
    let (bytes, sum) = bytes.split_at(split);
    if Sha256::digest(bytes).as_slice() != sum {
        return Err(NetError::file(
            path,
            "checksum mismatch: the shard is damaged or was altered",
        ));
    }
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| NetError::file(path, "not a dpfl shard (bad magic)"))?;
    let nl = rest
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| NetError::file(path, "truncated shard header"))?;
    let shape: Shape = serde_json::from_slice(&rest[..nl]).map_err(|e| NetError::file(path, e))?;
    let body = &rest[nl + 1..];
    let values = |rows: usize| rows.checked_mul(shape.features + 1);
    let total = values(shape.train_rows)
        .zip(values(shape.test_rows))
        .and_then(|(a, b)| a.checked_add(b))
        .and_then(|n| n.checked_mul(8))
        .ok_or_else(|| NetError::file(path, "shard shape overflows"))?;
    if body.len() != total {
        return Err(NetError::file(
            path,
            format!(
                "shard body has {} bytes, its shape needs {total}",
                body.len()
            ),
        ));
    }
    let mut it = body
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
    let target = match &shape.classes {
        Some(names) => Target::Classes {
            names: names.clone(),
        },
        None => Target::Real,
    };
    let mut take = |rows: usize| -> Result<Dataset> {
        let x: Vec<f64> = it.by_ref().take(rows * shape.features).collect();
        let y: Vec<f64> = it.by_ref().take(rows).collect();
        let x = Matrix::from_vec(rows, shape.features, x)
            .ok_or_else(|| NetError::file(path, "bad feature matrix shape"))?;
        Dataset::new(x, y, target.clone(), shape.feature_names.clone())
            .map_err(|e| NetError::file(path, e))
    };
    let train = take(shape.train_rows)?;
    let test = take(shape.test_rows)?;
    Ok((SiloData { train, test }, id_of(&shape)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard() -> SiloData {
        let d = |rows: usize| {
            let x = Matrix::from_vec(rows, 2, (0..rows * 2).map(|i| i as f64 * 0.5).collect())
                .expect("shape");
            let y = (0..rows).map(|i| (i % 2) as f64).collect();
            let target = Target::Classes {
                names: vec!["a".into(), "b".into()],
            };
            Dataset::new(x, y, target, vec!["f0".into(), "f1".into()]).expect("dataset")
        };
        SiloData {
            train: d(4),
            test: d(2),
        }
    }

    #[test]
    fn a_shard_round_trips_and_any_flipped_bit_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("silo-0.shard");
        write(&p, &shard(), Some("north")).expect("write");
        let (_, sid) = read_with_id(&p).expect("read");
        assert_eq!(sid, id(&shard(), Some("north")));
        assert_ne!(sid.digest, id(&shard(), Some("south")).digest);
        let back = read(&p).expect("read");
        assert_eq!(back.train, shard().train);
        assert_eq!(back.test, shard().test);
        let good = std::fs::read(&p).expect("bytes");
        // A flipped low mantissa bit keeps the value finite: only the checksum can tell.
        for at in [good.len() - SUM - 3, MAGIC.len() + 2, good.len() - 1] {
            let mut bad = good.clone();
            bad[at] ^= 1;
            std::fs::write(&p, &bad).expect("corrupt");
            let msg = read(&p).expect_err("corrupt shard").to_string();
            assert!(msg.contains("silo-0.shard"), "{msg}");
            assert!(msg.contains("checksum mismatch"), "{msg}");
        }
        std::fs::write(&p, &good[..20]).expect("truncate");
        assert!(read(&p).is_err());
        let mut v1 = MAGIC_V1.to_vec();
        v1.extend_from_slice(&good[MAGIC.len()..]);
        std::fs::write(&p, &v1).expect("v1");
        let msg = read(&p).expect_err("v1").to_string();
        assert!(msg.contains("old format"), "{msg}");
    }
}
