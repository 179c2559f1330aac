//! How raw rows became features (issue 16 item 4): recorded with a run's data and saved with
//! its models so that `predict` repeats it on a new file of the training source's format. Its
//! own file so that `context` (which carries it) does not import `saved` (which imports the
//! summary, which imports `context`).
//!
//! The file format a model reads follows its source: CSV sources (`csv`, `csv-silos`,
//! `obesity`, `insurance`) a CSV file with the training columns (the fitted schema);
//! LIBSVM sources (`libsvm`, `a9a`, `w8a`) a LIBSVM file of the same width; image sources
//! (`mnist`, `fashion-mnist`, `idx`) an IDX image file (labels in a second IDX file), pixels
//! scaled and projected with the saved PCA; generated data (`synthetic`) a CSV file with one
//! column per feature name and an optional `target` column.
//!
//! Decision: a LIBSVM line needs a label by its format, so `predict` reads and ignores it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use dpfl::data::csv::{CsvSchema, Table, TargetSpec, read_table};
use dpfl::data::idx::{load_idx, read_idx_images};
use dpfl::data::libsvm::{LibsvmSpec, load_libsvm};
use dpfl::data::pca::{Pca, PcaParams};
use dpfl::data::preprocess::Standardizer;
use dpfl::data::{Dataset, Target};
use dpfl::linalg::Matrix;
use dpfl::{Error, Result};

/// The column of a features CSV (`synthetic` models) holding the target.
pub(crate) const FEATURES_TARGET: &str = "target";

/// The shape of IDX images a model was trained on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdxLayout {
    /// Image height in pixels.
    pub rows: usize,
    /// Image width in pixels.
    pub cols: usize,
    /// Class names in label order.
    pub classes: Vec<String>,
}

/// How raw rows became features: what `predict` repeats on a new file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Preprocessing {
    /// The source kind of the experiment (`csv`, `csv-silos`, `obesity`, …).
    pub source: String,
    /// The CSV schema fitted on the training file(s); `None` for non-CSV sources.
    pub csv: Option<CsvSchema>,
    /// The standardisation fitted on the pooled training rows, if any.
    pub standardizer: Option<Standardizer>,
    /// The LIBSVM layout (width, target) of `libsvm`, `a9a` and `w8a` sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libsvm: Option<LibsvmSpec>,
    /// The image shape and classes of `mnist`, `fashion-mnist` and `idx` sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idx: Option<IdxLayout>,
    /// The PCA fitted on the training images, if the source asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pca: Option<PcaParams>,
}

/// What a model's feature layout is, for the features-CSV reader.
pub struct Layout<'a> {
    /// The model's feature columns, in order.
    pub feature_names: &'a [String],
    /// The class names in label order (a class target), `None` for a real target.
    pub classes: Option<&'a [String]>,
}

impl Preprocessing {
    /// The file format `predict` reads, for messages.
    pub fn input_format(&self) -> &'static str {
        if self.csv.is_some() {
            "a CSV file with the training file's columns"
        } else if self.libsvm.is_some() {
            "a LIBSVM file"
        } else if self.idx.is_some() {
            "an IDX image file (and, to evaluate, an IDX label file)"
        } else {
            "a CSV file with one column per feature name and an optional `target` column"
        }
    }

    /// Reads `path` (with `labels`, an IDX label file, for image sources) as the training
    /// data were read, and applies the fitted standardisation and PCA. With `need_target`,
    /// targets must be present; without, absent targets read as class 0 / 0.0.
    pub fn read(
        &self,
        path: &Path,
        labels: Option<&Path>,
        layout: &Layout<'_>,
        need_target: bool,
    ) -> Result<Dataset> {
        if labels.is_some() && self.idx.is_none() {
            return Err(Error::config(
                "--labels",
                format!(
                    "only models trained on images read a separate label file; this one reads {}",
                    self.input_format()
                ),
            ));
        }
        let mut data = if let Some(schema) = &self.csv {
            let table = align(schema, path, read_table(path)?, need_target)?;
            if need_target {
                schema.encode(path, &table)?
            } else {
                // Predictions are one per row: a missing value is an error naming its line.
                schema.refusing_missing().encode(path, &table)?
            }
        } else if let Some(spec) = &self.libsvm {
            load_libsvm(path, spec)?
        } else if let Some(idx) = &self.idx {
            read_images(idx, path, labels, need_target)?
        } else {
            read_features(path, layout, need_target)?
        };
        if let Some(s) = &self.standardizer {
            s.apply(&mut data)?;
        }
        if let Some(p) = &self.pca {
            data = Pca::from_params(p)?.transform_dataset(data)?;
        }
        if data.feature_names() != layout.feature_names {
            return Err(Error::Dimension(format!(
                "{} gives {} features, the model was trained on {}",
                path.display(),
                data.num_features(),
                layout.feature_names.len()
            )));
        }
        Ok(data)
    }
}

fn read_images(
    idx: &IdxLayout,
    path: &Path,
    labels: Option<&Path>,
    need_target: bool,
) -> Result<Dataset> {
    if let Some(labels) = labels {
        let d = load_idx(path, labels, Some(idx.classes.clone()))?;
        return check_shape(idx, path, d);
    }
    if need_target {
        return Err(Error::config(
            "--labels",
            "evaluating an image model needs the IDX label file (--labels FILE)",
        ));
    }
    let img = read_idx_images(path)?;
    if (img.rows, img.cols) != (idx.rows, idx.cols) {
        return Err(Error::data(
            path.display().to_string(),
            format!(
                "images are {}×{}, the model was trained on {}×{}",
                img.rows, img.cols, idx.rows, idx.cols
            ),
        ));
    }
    let d = img.rows * img.cols;
    let x: Vec<f64> = img.pixels.iter().map(|&v| f64::from(v) / 255.0).collect();
    let x = Matrix::from_vec(img.count, d, x)
        .ok_or_else(|| Error::Dimension(format!("{}: pixel count", path.display())))?;
    let names = (0..d).map(|j| format!("px{j}")).collect();
    let target = Target::Classes {
        names: idx.classes.clone(),
    };
    Dataset::new(x, vec![0.0; img.count], target, names)
}

fn check_shape(idx: &IdxLayout, path: &Path, d: Dataset) -> Result<Dataset> {
    if d.num_features() != idx.rows * idx.cols {
        return Err(Error::data(
            path.display().to_string(),
            format!(
                "images have {} pixels, the model was trained on {}×{}",
                d.num_features(),
                idx.rows,
                idx.cols
            ),
        ));
    }
    Ok(d)
}

/// A CSV file with one numeric column per feature name (any order, extra columns ignored)
/// and, optionally, a [`FEATURES_TARGET`] column (a class name or index, or a value).
fn read_features(path: &Path, layout: &Layout<'_>, need_target: bool) -> Result<Dataset> {
    let table = read_table(path)?;
    let find = |name: &str| table.header.iter().position(|h| h == name);
    let cols = layout
        .feature_names
        .iter()
        .map(|name| {
            find(name).ok_or_else(|| Error::Parse {
                path: path.to_path_buf(),
                line: table.header_line,
                reason: format!(
                    "no column `{name}`; the model reads one column per feature ({})",
                    layout.feature_names.join(", ")
                ),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let target_col = find(FEATURES_TARGET);
    if need_target && target_col.is_none() {
        return Err(Error::Parse {
            path: path.to_path_buf(),
            line: table.header_line,
            reason: format!("no `{FEATURES_TARGET}` column to evaluate against"),
        });
    }
    let cell = |line: usize, r: &csv::StringRecord, j: usize| -> Result<f64> {
        let s = r.get(j).unwrap_or("").trim();
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| Error::Parse {
                path: path.to_path_buf(),
                line,
                reason: format!(
                    "column {} (`{}`): `{s}` is not a finite number",
                    j + 1,
                    table.header[j]
                ),
            })
    };
    let mut x = Vec::with_capacity(table.rows.len() * cols.len());
    let mut y = Vec::with_capacity(table.rows.len());
    for (line, r) in &table.rows {
        for &j in &cols {
            x.push(cell(*line, r, j)?);
        }
        y.push(match (target_col, layout.classes) {
            (None, _) => 0.0,
            (Some(j), Some(classes)) => {
                let s = r.get(j).unwrap_or("").trim();
                match classes.iter().position(|c| c == s) {
                    Some(k) => k as f64,
                    None => cell(*line, r, j)?,
                }
            }
            (Some(j), None) => cell(*line, r, j)?,
        });
    }
    let x = Matrix::from_vec(table.rows.len(), cols.len(), x)
        .ok_or_else(|| Error::Dimension(format!("{}: feature count", path.display())))?;
    let target = match layout.classes {
        Some(c) => Target::Classes { names: c.to_vec() },
        None => Target::Real,
    };
    Dataset::new(x, y, target, layout.feature_names.to_vec())
}

/// `table` with the fitted header's columns in the fitted order: missing target/silo/dropped
/// columns filled with a placeholder (a known class, or 0), extra columns left out.
fn align(schema: &CsvSchema, path: &Path, table: Table, need_target: bool) -> Result<Table> {
    let spec = schema.spec();
    let target = spec.target.column();
    let filler = match (&spec.target, schema.classes()) {
        (TargetSpec::Class { .. }, Some(c)) => c.first().cloned().unwrap_or_default(),
        _ => "0".to_string(),
    };
    let mut source = Vec::with_capacity(schema.header().len());
    for name in schema.header() {
        let at = table.header.iter().position(|h| h == name);
        let optional = (name == target && !need_target) || spec.drop.contains(name);
        if at.is_none() && !optional {
            return Err(Error::Parse {
                path: path.to_path_buf(),
                line: table.header_line,
                reason: format!(
                    "no column `{name}`, which the model was trained with (training columns: {})",
                    schema.header().join(", ")
                ),
            });
        }
        source.push(at);
    }
    let rows = table
        .rows
        .iter()
        .map(|(line, r)| {
            let fields: Vec<&str> = schema
                .header()
                .iter()
                .zip(&source)
                .map(|(name, at)| match at {
                    Some(j) => r.get(*j).unwrap_or(""),
                    None if name == target => filler.as_str(),
                    None => "",
                })
                .collect();
            (*line, csv::StringRecord::from(fields))
        })
        .collect();
    Ok(Table {
        header: schema.header().to_vec(),
        header_line: table.header_line,
        rows,
    })
}
