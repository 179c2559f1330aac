//! IDX files (LeCun & Cortes, "THE MNIST DATABASE", file format section): MNIST and
//! Fashion-MNIST images and labels, raw or gzipped.
//!
//! Layout: two zero bytes, a type byte (0x08 = unsigned byte, the only type these sets use),
//! the number of dimensions, then each dimension as a big-endian u32, then the data in
//! row-major order. Images are 3-dimensional (count × rows × cols, magic 0x00000803),
//! labels 1-dimensional (magic 0x00000801). The loader checks the magic number, that the
//! byte count matches the dimensions exactly (no truncation, no trailing bytes), that image
//! and label counts agree, and that every label names a class.
//!
//! Pixels are scaled to [0, 1] by v/255 (torchvision's `ToTensor`, which the paper's code
//! uses before its PCA; Lowy & Razaviyayn App. I.1), through a 256-entry table so the
//! conversion is one pass without per-pixel work beyond a lookup.

use std::path::Path;

use super::{Dataset, Target, io};
use crate::linalg::Matrix;
use crate::{Error, Result};

/// Magic number of a 3-D unsigned-byte IDX file (images).
pub const IMAGES_MAGIC: u32 = 0x0000_0803;
/// Magic number of a 1-D unsigned-byte IDX file (labels).
pub const LABELS_MAGIC: u32 = 0x0000_0801;

/// Images as stored: `count` images of `rows × cols` bytes, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxImages {
    /// The number of images.
    pub count: usize,
    /// Rows of each image (28 for MNIST).
    pub rows: usize,
    /// Columns of each image (28 for MNIST).
    pub cols: usize,
    /// count·rows·cols bytes, image after image, each row-major (0 = background).
    pub pixels: Vec<u8>,
}

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::data(path.display().to_string(), reason)
}

/// Parses the header; returns the dimensions and the offset of the data.
fn header(path: &Path, bytes: &[u8], magic: u32) -> Result<(Vec<usize>, usize)> {
    let ndims = (magic & 0xff) as usize;
    let head = 4 + 4 * ndims;
    let word = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    let found = if bytes.len() >= 4 {
        Some(word(0))
    } else {
        None
    };
    if found != Some(magic) {
        let what = found.map_or_else(
            || "no magic number".to_string(),
            |m| format!("magic number 0x{m:08x}"),
        );
        return Err(bad(
            path,
            format!("{what}, expected 0x{magic:08x} (is this the right IDX file?)"),
        ));
    }
    if bytes.len() < head {
        return Err(bad(
            path,
            format!(
                "{} bytes is too short for an IDX header of {head} bytes",
                bytes.len()
            ),
        ));
    }
    let dims: Vec<usize> = (0..ndims).map(|k| word(4 + 4 * k) as usize).collect();
    let data_len = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| bad(path, format!("dimensions {dims:?} overflow")))?;
    if bytes.len() - head != data_len {
        return Err(bad(
            path,
            format!(
                "dimensions {dims:?} need {data_len} data bytes but the file has {}",
                bytes.len() - head
            ),
        ));
    }
    Ok((dims, head))
}

/// Reads an image file (magic 0x00000803).
pub fn read_idx_images(path: &Path) -> Result<IdxImages> {
    let mut bytes = io::read_all(path)?;
    let (dims, head) = header(path, &bytes, IMAGES_MAGIC)?;
    bytes.drain(..head);
    Ok(IdxImages {
        count: dims[0],
        rows: dims[1],
        cols: dims[2],
        pixels: bytes,
    })
}

/// Reads a label file (magic 0x00000801).
pub fn read_idx_labels(path: &Path) -> Result<Vec<u8>> {
    let mut bytes = io::read_all(path)?;
    let (_, head) = header(path, &bytes, LABELS_MAGIC)?;
    bytes.drain(..head);
    Ok(bytes)
}

/// Loads images and labels into a dataset with pixels in [0, 1] and features `px0..`.
/// `class_names` gives the classes (labels must be below their number); when `None` the
/// classes are `"0".."9"`.
pub fn load_idx(images: &Path, labels: &Path, class_names: Option<Vec<String>>) -> Result<Dataset> {
    let img = read_idx_images(images)?;
    let lab = read_idx_labels(labels)?;
    if img.count != lab.len() {
        return Err(Error::Dimension(format!(
            "{} holds {} images but {} holds {} labels",
            images.display(),
            img.count,
            labels.display(),
            lab.len()
        )));
    }
    let names = class_names.unwrap_or_else(|| (0..10).map(|d| d.to_string()).collect());
    if let Some(i) = lab.iter().position(|&l| usize::from(l) >= names.len()) {
        return Err(bad(
            labels,
            format!(
                "label {} of item {i} (byte offset {}) is out of range: {} classes",
                lab[i],
                8 + i,
                names.len()
            ),
        ));
    }
    let d = img.rows * img.cols;
    super::limits::check_dense(&images.display().to_string(), img.count, d)?;
    let lut: [f64; 256] = std::array::from_fn(|v| v as f64 / 255.0);
    let data: Vec<f64> = img.pixels.iter().map(|&v| lut[usize::from(v)]).collect();
    let x = Matrix::from_vec(img.count, d, data)
        .ok_or_else(|| Error::Dimension(format!("{}: pixel count", images.display())))?;
    let y = lab.iter().map(|&l| f64::from(l)).collect();
    let feature_names = (0..d).map(|j| format!("px{j}")).collect();
    Dataset::new(x, y, Target::Classes { names }, feature_names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut v = magic.to_be_bytes().to_vec();
        for d in dims {
            v.extend_from_slice(&d.to_be_bytes());
        }
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn reads_and_scales_and_checks() {
        let dir = tempfile::tempdir().unwrap();
        let im = dir.path().join("im");
        let lb = dir.path().join("lb");
        std::fs::write(&im, idx(IMAGES_MAGIC, &[2, 1, 2], &[0, 255, 51, 102])).unwrap();
        std::fs::write(&lb, idx(LABELS_MAGIC, &[2], &[3, 9])).unwrap();
        let d = load_idx(&im, &lb, None).unwrap();
        assert_eq!(d.row(0), (&[0.0, 1.0][..], 3.0));
        assert_eq!(d.row(1), (&[0.2, 0.4][..], 9.0));
        assert_eq!(d.feature_names(), &["px0", "px1"]);

        // Truncated image data.
        std::fs::write(&im, idx(IMAGES_MAGIC, &[2, 1, 2], &[0, 255, 51])).unwrap();
        let err = load_idx(&im, &lb, None).unwrap_err().to_string();
        assert!(
            err.contains("need 4 data bytes but the file has 3"),
            "{err}"
        );
        // Label file given as images.
        let err = read_idx_images(&lb).unwrap_err().to_string();
        assert!(
            err.contains("magic number 0x00000801, expected 0x00000803"),
            "{err}"
        );
        // Counts disagree.
        std::fs::write(&im, idx(IMAGES_MAGIC, &[1, 1, 2], &[0, 255])).unwrap();
        let err = load_idx(&im, &lb, None).unwrap_err().to_string();
        assert!(
            err.contains("1 images") && err.contains("2 labels"),
            "{err}"
        );
        // Label out of range.
        std::fs::write(&im, idx(IMAGES_MAGIC, &[2, 1, 2], &[0, 255, 51, 102])).unwrap();
        std::fs::write(&lb, idx(LABELS_MAGIC, &[2], &[3, 10])).unwrap();
        let err = load_idx(&im, &lb, None).unwrap_err().to_string();
        assert!(
            err.contains("label 10 of item 1") && err.contains("lb"),
            "{err}"
        );
    }
}
