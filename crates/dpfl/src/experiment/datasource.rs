//! Where an experiment's data come from and how they are split into silos.
//!
//! Order of operations (Lowy & Razaviyayn App. I): load → (PCA, fitted on the whole training
//! file, for image sets) → partition into silos → per-silo train/test split → standardise the
//! spec's columns with statistics of the pooled training rows → optionally balance silos.
//! As in the paper, this preprocessing is not itself private; `docs/reproductions.md` says
//! where that matters.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde::{Deserialize, Serialize};

use dpfl_privacy::DpRng;

use crate::data::csv::{CsvSchema, CsvSpec, load_csv};
use crate::data::libsvm::{LibsvmSpec, load_libsvm};
use crate::data::partition::{PartitionSpec, balance_train, train_test_split};
use crate::data::pca::Pca;
use crate::data::preprocess::standardize_silos;
use crate::data::registry::{DataDirs, KnownDataset, Part, insurance_spec, obesity_spec};
use crate::data::silos;
use crate::data::synthetic::{self, SyntheticTask};
use crate::data::{Dataset, SiloData};
use crate::experiment::preprocessing::Preprocessing;

/// The data section of an experiment.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSpec {
    pub source: Source,
    /// How rows become silos (required except for synthetic data, which is generated per silo).
    #[serde(default)]
    pub partition: Option<PartitionSpec>,
    /// Fraction of each silo's rows held out for testing.
    #[serde(default = "default_test_fraction")]
    pub test_fraction: f64,
    /// Drop random training rows so that every silo has the same n (the paper's option).
    #[serde(default)]
    pub balance: bool,
}

fn default_test_fraction() -> f64 {
    0.2
}

/// A data source.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Source {
    /// UCI obesity (bundled), the paper's preprocessing (App. I.3).
    Obesity,
    /// Medical cost / insurance (bundled), the paper's preprocessing (App. I.2).
    Insurance,
    /// MNIST training images (pixels in [0,1]); `pca` components if given (the paper: 50).
    Mnist {
        #[serde(default)]
        pca: Option<usize>,
    },
    /// Fashion-MNIST training images, as MNIST.
    FashionMnist {
        #[serde(default)]
        pca: Option<usize>,
    },
    /// LIBSVM a9a training file (bundled), 123 binary features, labels ±1 → {0,1}.
    A9a,
    /// LIBSVM w8a training file, 300 features.
    W8a,
    /// Any CSV file with a header row.
    Csv { path: PathBuf, spec: CsvSpec },
    /// One CSV file per silo, all with one header (no `partition`; see [`crate::data::silos`]).
    CsvSilos { paths: Vec<PathBuf>, spec: CsvSpec },
    /// Any LIBSVM file.
    Libsvm { path: PathBuf, spec: LibsvmSpec },
    /// Generated data (see [`crate::data::synthetic`]); already one data set per silo.
    Synthetic {
        task: SyntheticTask,
        silos: usize,
        train: usize,
        test: usize,
        features: usize,
        #[serde(default)]
        shift: f64,
    },
}

impl DataSpec {
    /// Loads, partitions, splits, standardises and (optionally) balances the data.
    pub fn load(&self, data_dir: Option<&Path>, rng: &mut DpRng) -> crate::Result<Vec<SiloData>> {
        Ok(self.load_prepared(data_dir, rng)?.0)
    }

    /// [`Self::load`], and how rows became features (for saved models to repeat).
    pub fn load_prepared(
        &self,
        data_dir: Option<&Path>,
        rng: &mut DpRng,
    ) -> crate::Result<(Vec<SiloData>, Preprocessing)> {
        if !(self.test_fraction >= 0.0 && self.test_fraction < 1.0) {
            return Err(crate::Error::config(
                "data.test_fraction",
                format!("must lie in [0, 1), got {}", self.test_fraction),
            ));
        }
        let mut prep = Preprocessing {
            source: source_kind(&self.source),
            ..Preprocessing::default()
        };
        if let Source::Synthetic {
            task,
            silos,
            train,
            test,
            features,
            shift,
        } = &self.source
        {
            let s = synthetic::generate(*task, *silos, *train, *test, *features, *shift, rng)?;
            let s = if self.balance {
                balance_train(s, rng)?
            } else {
                s
            };
            return Ok((s, prep));
        }
        if let Some((parts, schema)) = self.load_split()? {
            prep.csv = Some(schema);
            return self.finish(parts, prep, rng);
        }
        let (whole, schema) = self.load_whole(data_dir)?;
        prep.csv = schema;
        if whole.is_empty() {
            let what = match &self.source {
                Source::Csv { path, .. } | Source::Libsvm { path, .. } => {
                    path.display().to_string()
                }
                _ => "data.source".into(),
            };
            return Err(crate::Error::data(what, "holds no data rows"));
        }
        let partition = self.partition.as_ref().ok_or_else(|| {
            crate::Error::config("data.partition", "name how rows are split into silos")
        })?;
        let parts = partition.apply(&whole, rng)?;
        self.finish(parts, prep, rng)
    }

    /// Split, standardise and balance silos.
    fn finish(
        &self,
        parts: Vec<Dataset>,
        mut prep: Preprocessing,
        rng: &mut DpRng,
    ) -> crate::Result<(Vec<SiloData>, Preprocessing)> {
        let standardize = self.standardize();
        let mut silos = train_test_split(parts, self.test_fraction, rng)?;
        if !standardize.is_empty() {
            prep.standardizer = Some(standardize_silos(&mut silos, &standardize)?);
        }
        if self.balance {
            silos = balance_train(silos, rng)?;
        }
        Ok((silos, prep))
    }

    /// The columns standardised after splitting.
    fn standardize(&self) -> Vec<String> {
        match &self.source {
            Source::Obesity => obesity_spec().standardize,
            Source::Insurance => insurance_spec().standardize,
            Source::Csv { spec, .. } | Source::CsvSilos { spec, .. } => spec.standardize.clone(),
            _ => vec![],
        }
    }

    /// Data that arrive split into silos: a CSV with a silo column, or one CSV per silo.
    fn load_split(&self) -> crate::Result<Option<(Vec<Dataset>, CsvSchema)>> {
        let by_column = match &self.partition {
            Some(PartitionSpec::ByColumn { column }) => Some(column),
            _ => None,
        };
        Ok(match (&self.source, by_column) {
            (Source::Csv { path, spec }, Some(column)) => {
                let (parts, _, schema) = silos::by_column(path, spec, column)?;
                Some((parts, schema))
            }
            (Source::CsvSilos { paths, spec }, None) => {
                if self.partition.is_some() {
                    return Err(crate::Error::config(
                        "data.partition",
                        "csv-silos data are already one file per silo; remove the partition",
                    ));
                }
                Some(silos::csv_files(paths, spec)?)
            }
            (Source::CsvSilos { .. }, Some(_)) => {
                return Err(crate::Error::config(
                    "data.partition",
                    "csv-silos data are already one file per silo; remove the partition",
                ));
            }
            (_, Some(_)) => {
                return Err(crate::Error::config(
                    "partition.kind",
                    "by-column needs a csv source (the column is read from the file)",
                ));
            }
            _ => None,
        })
    }

    /// The whole data set before partitioning, and its fitted CSV schema (CSV sources).
    fn load_whole(&self, data_dir: Option<&Path>) -> crate::Result<(Dataset, Option<CsvSchema>)> {
        let dirs = DataDirs::new(data_dir);
        Ok(match &self.source {
            Source::Obesity => (dirs.load(KnownDataset::Obesity, Part::Train)?, None),
            Source::Insurance => (dirs.load(KnownDataset::Insurance, Part::Train)?, None),
            Source::A9a => (dirs.load(KnownDataset::A9a, Part::Train)?, None),
            Source::W8a => (dirs.load(KnownDataset::W8a, Part::Train)?, None),
            Source::Mnist { pca } => (images(&dirs, KnownDataset::Mnist, *pca)?, None),
            Source::FashionMnist { pca } => {
                (images(&dirs, KnownDataset::FashionMnist, *pca)?, None)
            }
            Source::Csv { path, spec } => {
                let (data, schema) = load_csv(path, spec)?;
                (data, Some(schema))
            }
            Source::Libsvm { path, spec } => (load_libsvm(path, spec)?, None),
            Source::Synthetic { .. } | Source::CsvSilos { .. } => {
                return Err(crate::Error::config(
                    "data.source",
                    "this source is already split into silos",
                ));
            }
        })
    }
}

/// The `kind` of a source, as written in the experiment file.
fn source_kind(source: &Source) -> String {
    serde_json::to_value(source)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(String::from))
        .unwrap_or_default()
}

type PcaKey = (KnownDataset, PathBuf, usize);
type PcaCache = Mutex<Vec<(PcaKey, Arc<Pca>)>>;

/// Loads an image set's training part, projected on its first `k` principal components if
/// asked. The fit (on all training images, as the paper's code does) is cached per process:
/// it is deterministic, and repeated trials need the same projection.
fn images(dirs: &DataDirs, which: KnownDataset, k: Option<usize>) -> crate::Result<Dataset> {
    let data = dirs.load(which, Part::Train)?;
    let Some(k) = k else { return Ok(data) };
    static CACHE: OnceLock<PcaCache> = OnceLock::new();
    let first = dirs
        .dirs()
        .next()
        .map(|(_, d)| d.to_path_buf())
        .unwrap_or_default();
    let key = (which, first, k);
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    let hit = cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(kk, _)| *kk == key)
        .map(|(_, p)| p.clone());
    let pca = match hit {
        Some(p) => p,
        None => {
            let p = Arc::new(Pca::fit(data.x(), k)?);
            cache
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((key, p.clone()));
            p
        }
    };
    pca.transform_dataset(data)
}
