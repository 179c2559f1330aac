//! A silo's data shard on disk: how `dpfl silo --data PATH` gets its data.
//!
//! The format keeps every f64 bit for bit (the network run must equal the simulator's): the
//! line `DPFLSHARD1`, one line of JSON describing the shape, then little-endian f64s: train
//! features (row-major), train targets, test features, test targets. `dpfl federate
//! --prepare-only` writes one shard per silo from an experiment's data pipeline (the same
//! split as `dpfl train`); a real silo writes its own from its records.

use std::path::Path;

use serde::{Deserialize, Serialize};

use dpfl::data::{Dataset, SiloData, Target};
use dpfl::linalg::Matrix;

use crate::error::{NetError, Result};

const MAGIC: &[u8] = b"DPFLSHARD1\n";

#[derive(Debug, Serialize, Deserialize)]
struct Shape {
    train_rows: usize,
    test_rows: usize,
    features: usize,
    /// Class names, or null for a real target.
    classes: Option<Vec<String>>,
    feature_names: Vec<String>,
}

pub fn write(path: &Path, data: &SiloData) -> Result<()> {
    let shape = Shape {
        train_rows: data.train.len(),
        test_rows: data.test.len(),
        features: data.train.num_features(),
        classes: match data.train.target() {
            Target::Classes { names } => Some(names.clone()),
            Target::Real => None,
        },
        feature_names: data.train.feature_names().to_vec(),
    };
    let mut out = MAGIC.to_vec();
    out.extend(serde_json::to_vec(&shape).map_err(|e| NetError::file(path, e))?);
    out.push(b'\n');
    for d in [&data.train, &data.test] {
        for v in d.x().as_slice().iter().chain(d.y()) {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    crate::store::write_atomic(path, &out)
}

pub fn read(path: &Path) -> Result<SiloData> {
    let bytes = std::fs::read(path).map_err(NetError::io(path))?;
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
    Ok(SiloData { train, test })
}
