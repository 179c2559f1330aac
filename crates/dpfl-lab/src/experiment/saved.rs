//! Saved models: every `dpfl train --out DIR` writes each algorithm's final model to
//! `DIR/models/<k>-<label>/` as two files:
//!
//! * `model.safetensors`: one tensor `weights`, dtype F64, shape `[num_params]` (the flat
//!   parameter vector the model's `predict` takes: for softmax, feature-major: one
//!   row of C class weights per feature, w[j·C + c]);
//! * `model.json`: [`ModelMeta`]: `format = "dpfl-model"`, `format_version` (this module reads
//!   only [`FORMAT_VERSION`]), the SHA-256 of `model.safetensors` (checked on load), the model
//!   spec, feature names, classes, the preprocessing (the fitted CSV schema: header, category
//!   orders; the standardiser's means and scales), and the privacy guarantee of the run that
//!   produced it (the summary's per-silo targets and certified ε).
//!
//! Decisions: the saved model is trial 1's (the trial whose calibration and accounting
//! `summary.json` reports); a file to predict on has the training source's format (CSV,
//! LIBSVM, IDX or a features CSV: [`super::preprocessing`]); a CSV must hold every feature
//! column of the training file, its target and silo columns may be absent, and extra columns
//! are ignored.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::silo_privacy::SiloPrivacy;
use crate::output::atomic_write;
use dpfl::data::Dataset;
use dpfl::model::ModelSpec;
use dpfl::{Error, Result};

/// The `format` every `model.json` names.
pub const FORMAT: &str = "dpfl-model";
/// The `model.json` layout version; a reader refuses others.
pub const FORMAT_VERSION: u32 = 1;
/// The weights file beside `model.json` (safetensors, one f64 tensor).
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The metadata file of a saved model.
pub const META_FILE: &str = "model.json";
const TENSOR: &str = "weights";

pub use super::preprocessing::{Layout, Preprocessing};

/// A final model as training leaves it, before the summary exists.
#[derive(Debug, Clone)]
pub struct FinalModel {
    /// The algorithm's label.
    pub algorithm: String,
    /// The final model's parameters.
    pub weights: Vec<f64>,
    /// The feature columns the model reads, in order.
    pub feature_names: Vec<String>,
    /// The class names in label order (a class target), `None` for a real target.
    pub classes: Option<Vec<String>>,
    /// How raw rows became features, repeated by `dpfl predict`.
    pub preprocessing: Preprocessing,
}

/// Everything of a saved model but its weights and its run's privacy: what `dpfl federate`
/// writes beside a federation's files (`model-card.json`) so that `dpfl server`, which holds
/// no data, saves its final model in the format `dpfl train` does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCard {
    /// Always [`FORMAT`]` + "-card"`.
    pub format: String,
    /// The experiment's name.
    pub experiment: String,
    /// The model kind and its parameters.
    pub model: ModelSpec,
    /// The feature columns, in order.
    pub feature_names: Vec<String>,
    /// Class names in code order (a class target), else `None`.
    pub classes: Option<Vec<String>>,
    /// How raw rows became features.
    pub preprocessing: Preprocessing,
    /// The silos' names in silo order, where the data give them (the server, which holds
    /// no data, names the silos of its saved model's privacy with them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub silos: Option<Vec<String>>,
}

/// The `format` of a model card.
pub const CARD_FORMAT: &str = "dpfl-model-card";

impl ModelCard {
    /// The card of a trial's data under `spec`.
    pub fn of_trial(spec: &super::ExperimentSpec, trial: &super::TrialData) -> Self {
        let first = trial.silos.first().map(|s| &s.train);
        ModelCard {
            format: CARD_FORMAT.into(),
            experiment: spec.name.clone(),
            model: spec.model.clone(),
            feature_names: first.map_or(vec![], |d| d.feature_names().to_vec()),
            classes: first.and_then(|d| match d.target() {
                dpfl::data::Target::Classes { names } => Some(names.clone()),
                dpfl::data::Target::Real => None,
            }),
            preprocessing: trial.preprocessing.clone(),
            silos: trial.silo_names.clone(),
        }
    }

    /// Reads a card, checking its format.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let card: ModelCard = serde_json::from_slice(&bytes)
            .map_err(|e| bad(path, format!("not a model card: {e}")))?;
        if card.format != CARD_FORMAT {
            return Err(bad(path, format!("not a {CARD_FORMAT} file")));
        }
        Ok(card)
    }

    /// Writes the card as JSON.
    pub fn save(&self, path: &Path) -> Result<()> {
        let json = serde_json::to_string_pretty(self).map_err(|e| bad(path, e.to_string()))? + "\n";
        atomic_write(path, json.as_bytes())
    }
}

/// The privacy guarantee of the run that trained the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPrivacy {
    /// Whether the run added noise.
    pub private: bool,
    /// The target ε (smallest over silos); `None` if non-private.
    pub epsilon: Option<f64>,
    /// The target δ (smallest over silos); `None` if non-private.
    pub delta: Option<f64>,
    /// The tighter sound accountant's ε, largest over silos (what is certified).
    pub certified_epsilon: Option<f64>,
    /// Each silo's target and accounted (ε, δ).
    pub silos: Vec<SiloPrivacy>,
}

/// `model.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelMeta {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`FORMAT_VERSION`] when written.
    pub format_version: u32,
    /// The dpfl version that wrote the file.
    pub dpfl_version: String,
    /// The experiment's name.
    pub experiment: String,
    /// The algorithm's label.
    pub algorithm: String,
    /// The experiment's master seed, if it had one.
    pub seed: Option<u64>,
    /// The model kind and its parameters, enough to rebuild it.
    pub model: ModelSpec,
    /// d, the features the model reads.
    pub num_features: usize,
    /// The feature columns, in order.
    pub feature_names: Vec<String>,
    /// Class names in code order (a class target), else `None` (a real target).
    pub classes: Option<Vec<String>>,
    /// How raw rows became features, repeated by `dpfl predict`.
    pub preprocessing: Preprocessing,
    /// The guarantee of the run that trained it.
    pub privacy: ModelPrivacy,
    /// The weights file's name ([`WEIGHTS_FILE`]).
    pub weights_file: String,
    /// SHA-256 of the weights file (hex); a mismatch is refused on load.
    pub weights_sha256: String,
    /// The number of parameters in the weights file.
    pub num_params: usize,
}

/// A model with its metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedModel {
    /// `model.json`'s content.
    pub meta: ModelMeta,
    /// The parameters.
    pub weights: Vec<f64>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn bad(path: &Path, reason: impl Into<String>) -> Error {
    Error::data(path.display().to_string(), reason.into())
}

/// A directory name from a label: lower-case ASCII letters and digits, `-` elsewhere.
pub fn slug(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let parts: Vec<&str> = s.split('-').filter(|p| !p.is_empty()).collect();
    parts.join("-")
}

impl SavedModel {
    /// The saved form of `model`, trained under `spec` with guarantee `privacy`.
    pub fn new(spec: &super::ExperimentSpec, model: &FinalModel, privacy: ModelPrivacy) -> Self {
        let meta = ModelMeta {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            dpfl_version: env!("CARGO_PKG_VERSION").into(),
            experiment: spec.name.clone(),
            algorithm: model.algorithm.clone(),
            seed: spec.seed,
            model: spec.model.clone(),
            num_features: model.feature_names.len(),
            feature_names: model.feature_names.clone(),
            classes: model.classes.clone(),
            preprocessing: model.preprocessing.clone(),
            privacy,
            weights_file: WEIGHTS_FILE.into(),
            weights_sha256: String::new(),
            num_params: model.weights.len(),
        };
        SavedModel {
            meta,
            weights: model.weights.clone(),
        }
    }

    /// The saved form of a federation's final model `weights` (algorithm `algorithm`, seed
    /// `seed`) from its `card` and guarantee `privacy`.
    pub fn from_card(
        card: &ModelCard,
        algorithm: &str,
        seed: Option<u64>,
        weights: Vec<f64>,
        privacy: ModelPrivacy,
    ) -> Self {
        let meta = ModelMeta {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            dpfl_version: env!("CARGO_PKG_VERSION").into(),
            experiment: card.experiment.clone(),
            algorithm: algorithm.into(),
            seed,
            model: card.model.clone(),
            num_features: card.feature_names.len(),
            feature_names: card.feature_names.clone(),
            classes: card.classes.clone(),
            preprocessing: card.preprocessing.clone(),
            privacy,
            weights_file: WEIGHTS_FILE.into(),
            weights_sha256: String::new(),
            num_params: weights.len(),
        };
        SavedModel { meta, weights }
    }

    /// Writes `model.safetensors` and `model.json` into `dir` (created if needed).
    pub fn save(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let bytes: Vec<u8> = self.weights.iter().flat_map(|w| w.to_le_bytes()).collect();
        let view = safetensors::tensor::TensorView::new(
            safetensors::Dtype::F64,
            vec![self.weights.len()],
            &bytes,
        )
        .map_err(|e| bad(&dir.join(WEIGHTS_FILE), e.to_string()))?;
        let file = safetensors::serialize([(TENSOR, view)], None)
            .map_err(|e| bad(&dir.join(WEIGHTS_FILE), e.to_string()))?;
        let mut meta = self.meta.clone();
        meta.weights_sha256 = sha256_hex(&file);
        meta.num_params = self.weights.len();
        atomic_write(&dir.join(WEIGHTS_FILE), &file)?;
        let json = serde_json::to_string_pretty(&meta)
            .map_err(|e| bad(&dir.join(META_FILE), e.to_string()))?;
        atomic_write(&dir.join(META_FILE), (json + "\n").as_bytes())
    }

    /// Reads a model directory, checking format, version, checksum and shape.
    pub fn load(dir: &Path) -> Result<Self> {
        let read = |p: PathBuf| std::fs::read(&p).map_err(|source| Error::Io { path: p, source });
        let meta_path = dir.join(META_FILE);
        let text = read(meta_path.clone())?;
        let value: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| bad(&meta_path, format!("not JSON: {e}")))?;
        if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(bad(
                &meta_path,
                format!("not a {FORMAT} file (no `format = \"{FORMAT}\"`)"),
            ));
        }
        let version = value.get("format_version").and_then(|v| v.as_u64());
        if version != Some(u64::from(FORMAT_VERSION)) {
            return Err(bad(
                &meta_path,
                format!(
                    "format_version {version:?}; this dpfl ({}) reads version {FORMAT_VERSION}",
                    env!("CARGO_PKG_VERSION")
                ),
            ));
        }
        let meta: ModelMeta = serde_json::from_value(value)
            .map_err(|e| bad(&meta_path, format!("malformed: {e}")))?;
        let weights_path = dir.join(&meta.weights_file);
        let file = read(weights_path.clone())?;
        let sum = sha256_hex(&file);
        if sum != meta.weights_sha256 {
            return Err(bad(
                &weights_path,
                format!(
                    "SHA-256 {sum} differs from {} recorded in {META_FILE}: the file is damaged or was changed",
                    meta.weights_sha256
                ),
            ));
        }
        let tensors = safetensors::SafeTensors::deserialize(&file)
            .map_err(|e| bad(&weights_path, e.to_string()))?;
        let t = tensors
            .tensor(TENSOR)
            .map_err(|e| bad(&weights_path, e.to_string()))?;
        if t.dtype() != safetensors::Dtype::F64 || t.shape() != [meta.num_params] {
            return Err(bad(
                &weights_path,
                format!(
                    "tensor `{TENSOR}` is {:?} {:?}, expected F64 [{}]",
                    t.dtype(),
                    t.shape(),
                    meta.num_params
                ),
            ));
        }
        let weights = t
            .data()
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        Ok(SavedModel { meta, weights })
    }

    fn model(&self) -> Result<std::sync::Arc<dyn dpfl::model::Model>> {
        if let Some(i) = self.weights.iter().position(|w| !w.is_finite()) {
            return Err(Error::data(
                self.meta.weights_file.clone(),
                format!(
                    "weight {i} is {}: the run that saved this model diverged; it predicts \
                     nothing",
                    self.weights[i]
                ),
            ));
        }
        let m = self.meta.model.build(
            self.meta.num_features,
            self.meta.classes.as_ref().map(Vec::len),
        )?;
        if m.num_params() != self.weights.len() {
            return Err(Error::Dimension(format!(
                "the model needs {} parameters, the file holds {}",
                m.num_params(),
                self.weights.len()
            )));
        }
        Ok(m)
    }

    /// Reads `path` (and `labels`, an IDX label file, for image models) as the training data
    /// were read: the source's file format, its fitted schema, standardisation and PCA.
    fn read(&self, path: &Path, labels: Option<&Path>, need_target: bool) -> Result<Dataset> {
        let layout = Layout {
            feature_names: &self.meta.feature_names,
            classes: self.meta.classes.as_deref(),
        };
        self.meta
            .preprocessing
            .read(path, labels, &layout, need_target)
    }

    /// One prediction per record of `path` (a file of the training source's format; see
    /// [`super::preprocessing`]): the class name (a class target) or the value.
    pub fn predict_file(&self, path: &Path) -> Result<Vec<String>> {
        Ok(self.predict_rows(path, false)?.0)
    }

    /// The predictions of [`Self::predict_file`] and, with `proba`, each row's class
    /// probabilities in class order ([`super::evaluation`]); refused for a real target or a
    /// model without probabilities (the hinge loss).
    #[allow(clippy::type_complexity)]
    pub fn predict_rows(
        &self,
        path: &Path,
        proba: bool,
    ) -> Result<(Vec<String>, Option<Vec<Vec<f64>>>)> {
        let model = self.model()?;
        let k = match (&self.meta.classes, proba) {
            (_, false) => None,
            (None, true) => {
                return Err(Error::config(
                    "--proba",
                    "the model predicts a real value: it has no class probabilities",
                ));
            }
            (Some(c), true) if !super::evaluation::has_probabilities(&self.meta.model) => {
                return Err(Error::config(
                    "--proba",
                    format!(
                        "a {} model gives a class, not probabilities ({} classes)",
                        model.name(),
                        c.len()
                    ),
                ));
            }
            (Some(c), true) => Some(c.len()),
        };
        let data = self.read(path, None, false)?;
        let labels = (0..data.len())
            .map(|i| {
                let p = model.predict(&self.weights, data.row(i).0);
                match &self.meta.classes {
                    Some(c) => c.get(p as usize).cloned().unwrap_or_else(|| p.to_string()),
                    None => p.to_string(),
                }
            })
            .collect();
        let probs = k.map(|k| {
            (0..data.len())
                .map(|i| {
                    super::evaluation::class_probabilities(
                        model.as_ref(),
                        &self.weights,
                        data.row(i).0,
                        k,
                    )
                })
                .collect()
        });
        Ok((labels, probs))
    }

    /// The test metric (error rate or RMSE, as `summary.json`'s) on a labelled file (with
    /// `labels` for image models), its name and the number of rows.
    pub fn evaluate_file(
        &self,
        path: &Path,
        labels: Option<&Path>,
    ) -> Result<(f64, &'static str, usize)> {
        let e = self.evaluation(path, labels)?;
        Ok((e.value, e.metric, e.rows))
    }

    /// The metric of [`Self::evaluate_file`] with log-loss, AUC (binary) and the confusion
    /// matrix ([`super::evaluation`]).
    pub fn evaluation(
        &self,
        path: &Path,
        labels: Option<&Path>,
    ) -> Result<super::evaluation::Evaluation> {
        let model = self.model()?;
        let data = self.read(path, labels, true)?;
        if data.is_empty() {
            return Err(Error::data(
                path.display().to_string(),
                "holds no data rows to evaluate on",
            ));
        }
        Ok(super::evaluation::evaluate(
            &self.meta.model,
            model.as_ref(),
            &self.weights,
            &data,
            self.meta.classes.as_deref(),
        ))
    }
}
