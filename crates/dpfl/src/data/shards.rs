//! DP-NormFedAvg's data (App. H; digest §5.1): the label-shard split and a CIFAR-10 loader.
//!
//! * [`label_shards`]: sort the training rows by label (stable: file order within a class),
//!   cut them into `silos × per_silo` equal shards and give each silo `per_silo` shards drawn
//!   uniformly without replacement (McMahan et al. 2017's pathological non-IID split). The
//!   paper's setting is 50 silos × 5 shards = 250 shards: 240 rows each for (Fashion-)MNIST's
//!   60,000, 200 for CIFAR-10's 50,000. Decisions: when the row count is not a multiple of
//!   the shard count the last n mod S rows of the sorted order are dropped (the paper's sets
//!   divide exactly); with unequal class sizes (MNIST) a shard may straddle two classes, as in
//!   McMahan et al. — with Fashion-MNIST's 6,000 per class every shard holds one class.
//! * [`load_cifar10_bin`]: the CIFAR-10 "binary version" (Krizhevsky 2009, the data set's web
//!   page): files of records of 1 label byte (0–9) then 3,072 pixel bytes — 1,024 red, 1,024
//!   green, 1,024 blue, each a 32×32 image in row-major order. Pixels become v/255 in that
//!   channel-major order (torchvision's ToTensor then flatten gives the same order). The data
//!   set itself is not available offline (see `shared/datasets/SOURCES.md`).

use std::path::Path;

use dpfl_privacy::rng::DpRng;
use dpfl_privacy::sampler::shuffle;

use super::{Dataset, Target};
use crate::linalg::Matrix;
use crate::{Error, Result};

/// Bytes per CIFAR-10 record.
pub const CIFAR_RECORD: usize = 1 + 3 * 1024;

/// CIFAR-10's class names, in label order.
pub const CIFAR_CLASSES: [&str; 10] = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
];

/// Row indices of each silo under the label-shard split.
pub fn label_shard_indices(
    y: &[f64],
    silos: usize,
    per_silo: usize,
    rng: &mut DpRng,
) -> Result<Vec<Vec<usize>>> {
    let shards = silos
        .checked_mul(per_silo)
        .filter(|&s| s > 0)
        .ok_or_else(|| Error::config("partition", "silos and shards_per_silo must be >= 1"))?;
    if shards > y.len() {
        return Err(Error::config(
            "partition",
            format!(
                "{shards} shards for {} rows would leave a shard empty",
                y.len()
            ),
        ));
    }
    let mut order: Vec<usize> = (0..y.len()).collect();
    // Stable: rows of one class keep their file order.
    order.sort_by(|&a, &b| y[a].total_cmp(&y[b]));
    let size = y.len() / shards;
    let mut ids: Vec<usize> = (0..shards).collect();
    shuffle(rng, &mut ids);
    Ok(ids
        .chunks(per_silo)
        .map(|mine| {
            let mut rows: Vec<usize> = mine
                .iter()
                .flat_map(|&s| order[s * size..(s + 1) * size].iter().copied())
                .collect();
            rows.sort_unstable();
            rows
        })
        .collect())
}

/// The label-shard split of `data` into `silos` silos of `per_silo` shards.
pub fn label_shards(
    data: &Dataset,
    silos: usize,
    per_silo: usize,
    rng: &mut DpRng,
) -> Result<Vec<Dataset>> {
    if data.target().num_classes().is_none() {
        return Err(Error::config(
            "partition",
            "the label-shard split needs a class target",
        ));
    }
    Ok(label_shard_indices(data.y(), silos, per_silo, rng)?
        .iter()
        .map(|rows| data.subset(rows))
        .collect())
}

/// Loads CIFAR-10 binary files (e.g. `data_batch_1.bin` … `data_batch_5.bin`, or
/// `test_batch.bin`) into one dataset, in file order.
pub fn load_cifar10_bin(paths: &[&Path]) -> Result<Dataset> {
    let mut labels = Vec::new();
    let mut pixels = Vec::new();
    for path in paths {
        let bytes = super::io::read_all(path)?;
        if bytes.is_empty() || bytes.len() % CIFAR_RECORD != 0 {
            return Err(Error::Parse {
                path: path.to_path_buf(),
                line: 0,
                reason: format!(
                    "{} bytes is not a whole number of {CIFAR_RECORD}-byte CIFAR-10 records",
                    bytes.len()
                ),
            });
        }
        let count = bytes.len() / CIFAR_RECORD;
        super::limits::check_dense(&path.display().to_string(), labels.len() + count, 3072)?;
        for (i, rec) in bytes.chunks_exact(CIFAR_RECORD).enumerate() {
            if rec[0] > 9 {
                return Err(Error::Parse {
                    path: path.to_path_buf(),
                    line: 0,
                    reason: format!(
                        "record {i} (byte offset {}) has label {}, CIFAR-10 labels are 0-9",
                        i * CIFAR_RECORD,
                        rec[0]
                    ),
                });
            }
            labels.push(f64::from(rec[0]));
            pixels.extend_from_slice(&rec[1..]);
        }
    }
    let lut: [f64; 256] = std::array::from_fn(|v| v as f64 / 255.0);
    let n = labels.len();
    let x = Matrix::from_vec(
        n,
        3072,
        pixels.iter().map(|&v| lut[usize::from(v)]).collect(),
    )
    .ok_or_else(|| Error::Dimension("CIFAR-10 pixel count".into()))?;
    let names = CIFAR_CLASSES.iter().map(|s| s.to_string()).collect();
    let features = ["r", "g", "b"]
        .iter()
        .flat_map(|c| (0..1024).map(move |j| format!("{c}{j}")))
        .collect();
    Dataset::new(x, labels, Target::Classes { names }, features)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpfl_privacy::rng::Purpose;

    #[test]
    fn shards_hold_one_class_each_and_cover_every_row_once() {
        // 10 classes × 24 rows = 240 rows, 10 silos × 5 shards = 50 shards of 4.8 → 4 rows
        // (the last 40 sorted rows dropped). Labels interleaved in file order.
        let y: Vec<f64> = (0..240).map(|i| (i % 10) as f64).collect();
        let mut rng = DpRng::from_seed(1, Purpose::Data, 0);
        let parts = label_shard_indices(&y, 10, 5, &mut rng).unwrap();
        assert_eq!(parts.len(), 10);
        assert!(parts.iter().all(|p| p.len() == 20));
        let mut all: Vec<usize> = parts.concat();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 200, "no row twice");
        // The paper's FMNIST shape: 6,000 per class, 250 shards of 240, one class each, and
        // each silo has at most 5 classes.
        let y: Vec<f64> = (0..60_000).map(|i| (i % 10) as f64).collect();
        let parts = label_shard_indices(&y, 50, 5, &mut rng).unwrap();
        assert!(parts.iter().all(|p| p.len() == 1200));
        for p in &parts {
            let mut classes: Vec<u64> = p.iter().map(|&i| y[i] as u64).collect();
            classes.sort_unstable();
            classes.dedup();
            assert!(classes.len() <= 5);
            // Per class, a multiple of 240 rows: whole shards.
            for c in classes {
                assert_eq!(p.iter().filter(|&&i| y[i] as u64 == c).count() % 240, 0);
            }
        }
        // Seeded: the same draw again.
        let again =
            label_shard_indices(&y, 50, 5, &mut DpRng::from_seed(1, Purpose::Data, 0)).unwrap();
        let first =
            label_shard_indices(&y, 50, 5, &mut DpRng::from_seed(1, Purpose::Data, 0)).unwrap();
        assert_eq!(again, first);
        assert!(label_shard_indices(&y[..10], 50, 5, &mut rng).is_err());
        assert!(label_shard_indices(&y, 0, 5, &mut rng).is_err());
    }

    #[test]
    fn cifar_binary_records_load_in_channel_major_order() {
        let dir = tempfile::tempdir().unwrap();
        let rec = |label: u8, fill: u8| {
            let mut r = vec![label];
            r.extend((0..3072).map(|j| {
                if j == 0 {
                    255
                } else if j == 1024 {
                    51
                } else {
                    fill
                }
            }));
            r
        };
        let mut bytes = rec(3, 0);
        bytes.extend(rec(9, 102));
        let a = dir.path().join("data_batch_1.bin");
        std::fs::write(&a, &bytes).unwrap();
        let b = dir.path().join("test_batch.bin");
        std::fs::write(&b, rec(0, 255)).unwrap();
        let d = load_cifar10_bin(&[&a, &b]).unwrap();
        assert_eq!(d.len(), 3);
        assert_eq!(d.y(), &[3.0, 9.0, 0.0]);
        let (x, _) = d.row(1);
        // First red pixel 255 → 1, first green pixel (feature 1024) 51 → 0.2, others 0.4.
        assert_eq!((x[0], x[1024], x[1], x[3071]), (1.0, 0.2, 0.4, 0.4));
        assert_eq!(d.feature_names()[1024], "g0");
        assert_eq!(d.target().num_classes(), Some(10));
        // A truncated file and a bad label name the file and the record.
        std::fs::write(&a, &bytes[..CIFAR_RECORD + 5]).unwrap();
        let e = load_cifar10_bin(&[&a]).unwrap_err().to_string();
        assert!(
            e.contains("data_batch_1.bin") && e.contains("3078 bytes"),
            "{e}"
        );
        let mut bad = rec(1, 0);
        bad.extend(rec(10, 0));
        std::fs::write(&a, &bad).unwrap();
        let e = load_cifar10_bin(&[&a]).unwrap_err().to_string();
        assert!(e.contains("record 1") && e.contains("label 10"), "{e}");
    }
}
