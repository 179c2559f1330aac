//! LIBSVM / SVMlight text format: one record per line, `label index:value index:value ...`
//! with 1-based, strictly increasing feature indices (Chang & Lin, LIBSVM FAQ). Used for the
//! a9a (UCI Adult) and w8a sets.
//!
//! **Storage is dense.** The input is sparse (a9a has 14 non-zeros of 123 per row), but every
//! model in dpfl keeps a dense w ∈ ℝᵈ and the gradient kernels are dense dot products and
//! axpys over one row ([`crate::linalg`]). At d = 123 a dense row is 1 KB and a9a's 32,561
//! training rows take 32 MB, which costs less than a second sparse code path through every
//! model. w8a (49,749 × 300) takes 119 MB. A sparse row type would pay off only for far wider
//! sets (e.g. d ≥ 10⁴), which the papers do not use.
//!
//! The feature count is given, not inferred: a9a's test file never uses feature 123, so
//! inferring it would give train and test different shapes. An index above the given count
//! is an error, as is a repeated or decreasing index, a non-finite value, or (for a binary
//! target) a label other than ±1 or 0/1. Errors name the file and the 1-based line.

use std::io::BufRead;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Dataset, Target, io};
use crate::linalg::Matrix;
use crate::{Error, Result};

/// How to read the label column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LibsvmTarget {
    /// Two classes: −1 (or 0) ↦ class 0 named "-1", +1 (or 1) ↦ class 1 named "+1".
    Binary,
    /// The label as a real number (regression sets).
    Real,
}

/// Shape and target of a LIBSVM file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LibsvmSpec {
    /// d, the feature dimension (indices 1..=d; a larger index is an error naming its line).
    pub num_features: usize,
    /// How the label is read (binary ±1, class index or real).
    pub target: LibsvmTarget,
}

/// Loads a LIBSVM file (raw or gzipped) into a dense dataset with features `f1..fd`.
pub fn load_libsvm(path: &Path, spec: &LibsvmSpec) -> Result<Dataset> {
    let d = spec.num_features;
    if d == 0 {
        return Err(Error::config("num_features", "must be at least 1"));
    }
    super::limits::check_features("num_features", d)?;
    let mut reader = io::open(path)?;
    let mut x: Vec<f64> = Vec::new();
    let mut y: Vec<f64> = Vec::new();
    let mut line = String::new();
    let mut lineno = 0usize;
    loop {
        line.clear();
        let read = reader
            .read_line(&mut line)
            .map_err(|e| io::io_error(path, e))?;
        if read == 0 {
            break;
        }
        lineno += 1;
        let content = line.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let fail = |reason: String| Error::Parse {
            path: path.to_path_buf(),
            line: lineno,
            reason,
        };
        let mut tokens = content.split_ascii_whitespace();
        let label_tok = tokens.next().unwrap_or("");
        let label: f64 = label_tok
            .parse()
            .map_err(|_| fail(format!("cannot parse label `{label_tok}` as a number")))?;
        if !label.is_finite() {
            return Err(fail(format!("label `{label_tok}` is not finite")));
        }
        let label = match spec.target {
            LibsvmTarget::Real => label,
            LibsvmTarget::Binary if label == 1.0 => 1.0,
            LibsvmTarget::Binary if label == -1.0 || label == 0.0 => 0.0,
            LibsvmTarget::Binary => {
                return Err(fail(format!(
                    "label `{label_tok}` is out of range for a binary target (expected +1/-1 or 1/0)"
                )));
            }
        };
        // Each row is d dense values: check the total before growing (a huge declared
        // feature count on a short file must fail here, not in the allocator).
        super::limits::check_dense(&path.display().to_string(), y.len() + 1, d)?;
        let start = x.len();
        x.resize(start + d, 0.0);
        let row = &mut x[start..];
        let mut last = 0usize;
        for tok in tokens {
            let (i, v) = tok
                .split_once(':')
                .ok_or_else(|| fail(format!("expected `index:value`, found `{tok}`")))?;
            let idx: usize = i
                .parse()
                .map_err(|_| fail(format!("cannot parse feature index `{i}`")))?;
            if idx == 0 || idx > d {
                return Err(fail(format!(
                    "feature index {idx} is outside 1..={d} (the declared feature count)"
                )));
            }
            if idx <= last {
                return Err(fail(format!(
                    "feature index {idx} follows {last}: indices must increase strictly"
                )));
            }
            last = idx;
            let val: f64 = v
                .parse()
                .map_err(|_| fail(format!("cannot parse value `{v}` of feature {idx}")))?;
            if !val.is_finite() {
                return Err(fail(format!("value `{v}` of feature {idx} is not finite")));
            }
            row[idx - 1] = val;
        }
        y.push(label);
    }
    let n = y.len();
    let x = Matrix::from_vec(n, d, x)
        .ok_or_else(|| Error::Dimension(format!("{}: rows of {d} values", path.display())))?;
    let target = match spec.target {
        LibsvmTarget::Binary => Target::Classes {
            names: vec!["-1".into(), "+1".into()],
        },
        LibsvmTarget::Real => Target::Real,
    };
    let names = (1..=d).map(|j| format!("f{j}")).collect();
    Dataset::new(x, y, target, names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sparse_rows_densely() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.svm");
        std::fs::write(&p, "+1 1:0.5 3:2\n\n-1 2:1e-1 # comment\n0\n").unwrap();
        let spec = LibsvmSpec {
            num_features: 4,
            target: LibsvmTarget::Binary,
        };
        let d = load_libsvm(&p, &spec).unwrap();
        assert_eq!(d.len(), 3);
        assert_eq!(d.row(0), (&[0.5, 0.0, 2.0, 0.0][..], 1.0));
        assert_eq!(d.row(1), (&[0.0, 0.1, 0.0, 0.0][..], 0.0));
        assert_eq!(d.row(2), (&[0.0; 4][..], 0.0));
        let real = load_libsvm(
            &p,
            &LibsvmSpec {
                num_features: 4,
                target: LibsvmTarget::Real,
            },
        )
        .unwrap();
        assert_eq!(real.y(), &[1.0, -1.0, 0.0]);
    }

    #[test]
    fn errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let spec = LibsvmSpec {
            num_features: 3,
            target: LibsvmTarget::Binary,
        };
        let cases = [
            ("+1 1:1\n+1 4:1\n", "outside 1..=3"),
            ("+1 1:1\n+1 2:1 2:3\n", "increase strictly"),
            ("+1 1:1\n+2 1:1\n", "out of range"),
            ("+1 1:1\n+1 1:nan\n", "not finite"),
            ("+1 1:1\n+1 1=1\n", "index:value"),
            ("+1 1:1\nx 1:1\n", "label `x`"),
        ];
        for (i, (content, needle)) in cases.iter().enumerate() {
            let p = dir.path().join(format!("bad{i}.svm"));
            std::fs::write(&p, content).unwrap();
            let err = load_libsvm(&p, &spec).unwrap_err().to_string();
            assert!(
                err.contains(&format!("bad{i}.svm:2:")) && err.contains(needle),
                "{err}"
            );
        }
    }
}
