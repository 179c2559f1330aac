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

use crate::experiment::preprocessing::{IdxLayout, Preprocessing};
use dpfl::data::csv::{CsvSchema, CsvSpec, load_csv};
use dpfl::data::idx::{load_idx, read_idx_images};
use dpfl::data::libsvm::{LibsvmSpec, LibsvmTarget, load_libsvm};
use dpfl::data::partition::{PartitionSpec, balance_train, train_test_split};
use dpfl::data::pca::{Pca, PcaParams};
use dpfl::data::preprocess::standardize_silos;
use dpfl::data::registry::{DataDirs, KnownDataset, Part, insurance_spec, obesity_spec};
use dpfl::data::silos;
use dpfl::data::synthetic::{self, SyntheticTask};
use dpfl::data::{Dataset, SiloData};

/// The data section of an experiment.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataSpec {
    /// Where the records come from (a known set, a file, or generated).
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
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Source {
    /// UCI obesity (bundled), the paper's preprocessing (App. I.3).
    Obesity,
    /// Medical cost / insurance (bundled), the paper's preprocessing (App. I.2).
    Insurance,
    /// MNIST training images (pixels in [0,1]); `pca` components if given (the paper: 50).
    Mnist {
        /// Principal components to project the 784 pixels onto (fitted on training rows only);
        /// `None` keeps the pixels.
        #[serde(default)]
        pca: Option<usize>,
    },
    /// Fashion-MNIST training images, as MNIST (`pca` components if given).
    FashionMnist {
        /// Principal components, as for MNIST.
        #[serde(default)]
        pca: Option<usize>,
    },
    /// LIBSVM a9a training file (bundled), 123 binary features, labels ±1 → {0,1}.
    A9a,
    /// LIBSVM w8a training file, 300 features.
    W8a,
    /// Any CSV file with a header row.
    Csv {
        /// The CSV file.
        path: PathBuf,
        /// Which column is the target and how the others become features.
        spec: CsvSpec,
    },
    /// One CSV file per silo, all with one header (no `partition`; see [`dpfl::data::silos`]).
    CsvSilos {
        /// One CSV file per silo, in silo order.
        paths: Vec<PathBuf>,
        /// The schema every file shares.
        spec: CsvSpec,
        /// The silos' names, one per file (default: each file's name without its extension).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        names: Option<Vec<String>>,
    },
    /// Any LIBSVM file.
    Libsvm {
        /// The LIBSVM file (raw or gzipped).
        path: PathBuf,
        /// Its width and how its labels are read.
        spec: LibsvmSpec,
    },
    /// Any IDX image file with its IDX label file (MNIST's format; pixels scaled to [0, 1]);
    /// `pca` components if given; `classes` names the labels 0, 1, … (default "0".."9").
    Idx {
        /// The IDX image file (3-D unsigned bytes).
        images: PathBuf,
        /// The IDX label file (1-D unsigned bytes), one label per image.
        labels: PathBuf,
        /// Principal components, as for MNIST.
        #[serde(default)]
        pca: Option<usize>,
        /// The labels' names, in label order.
        #[serde(default)]
        classes: Option<Vec<String>>,
    },
    /// Generated data (see [`dpfl::data::synthetic`]); already one data set per silo: `task`,
    /// `silos` silos of `train` training and `test` test rows with `features` features;
    /// `shift` moves each silo's feature mean (heterogeneity, 0 = i.i.d.).
    Synthetic {
        /// Binary, regression or multiclass (see [`dpfl::data::synthetic`]).
        task: SyntheticTask,
        /// N, the number of silos generated.
        silos: usize,
        /// Training records per silo.
        train: usize,
        /// Test records per silo.
        test: usize,
        /// d, the feature dimension.
        features: usize,
        /// How far apart the silos' data distributions are (0: identically distributed).
        #[serde(default)]
        shift: f64,
    },
}

/// An experiment's data as loaded: the silos, how rows became features, and the silos' names
/// when the data name them (a by-column partition's values, the files of `csv-silos`).
pub struct Loaded {
    /// Each silo's train/test split, in silo order.
    pub silos: Vec<SiloData>,
    /// How rows became features (for saved models to repeat).
    pub preprocessing: Preprocessing,
    /// The silos' names, in silo order; `None` when the data give none.
    pub names: Option<Vec<String>>,
}

impl DataSpec {
    /// Loads, partitions, splits, standardises and (optionally) balances the data.
    pub fn load(&self, data_dir: Option<&Path>, rng: &mut DpRng) -> dpfl::Result<Vec<SiloData>> {
        Ok(self.load_prepared(data_dir, rng)?.silos)
    }

    /// [`Self::load`], how rows became features and the silos' names.
    pub fn load_prepared(&self, data_dir: Option<&Path>, rng: &mut DpRng) -> dpfl::Result<Loaded> {
        if !(self.test_fraction >= 0.0 && self.test_fraction < 1.0) {
            return Err(dpfl::Error::config(
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
            return Ok(Loaded {
                silos: s,
                preprocessing: prep,
                names: None,
            });
        }
        if let Some((parts, names, schema)) = self.load_split()? {
            prep.csv = Some(schema);
            return self.finish(parts, Some(names), prep, rng);
        }
        let whole = self.load_whole(data_dir, &mut prep)?;
        if whole.is_empty() {
            let what = match &self.source {
                Source::Csv { path, .. } | Source::Libsvm { path, .. } => {
                    path.display().to_string()
                }
                Source::Idx { images, .. } => images.display().to_string(),
                _ => "data.source".into(),
            };
            return Err(dpfl::Error::data(what, "holds no data rows"));
        }
        let partition = self.partition.as_ref().ok_or_else(|| {
            dpfl::Error::config("data.partition", "name how rows are split into silos")
        })?;
        let parts = partition.apply(&whole, rng)?;
        self.finish(parts, None, prep, rng)
    }

    /// The data section for one silo's own file (`dpfl data shard`): the experiment's format
    /// and preprocessing applied to `path` alone, as one silo. A CSV source becomes a
    /// one-file `csv-silos` source (a by-column partition's column dropped), a LIBSVM source
    /// the file as one IID silo; other sources have no file of the silo's own.
    ///
    /// Decisions: every category order (categorical columns, a class target) must be given
    /// in the experiment, since a silo fitting its own order would encode a category
    /// differently from the other silos; standardisation uses the silo's own training rows
    /// (no silo sees another's data), so it matches the simulation's pooled statistics only
    /// when the silos' rows are alike.
    pub fn for_own_file(&self, path: &Path, name: Option<&str>) -> dpfl::Result<DataSpec> {
        let source = match &self.source {
            Source::Csv { spec, .. } | Source::CsvSilos { spec, .. } => {
                let mut spec = spec.clone();
                let table = dpfl::data::csv::read_table(path)?;
                let column = match &self.partition {
                    Some(PartitionSpec::ByColumn { column }) => Some(column.as_str()),
                    _ => None,
                };
                // The silo's name: the one value of the partition column its rows hold (the
                // pooled run's name for it), else `name`, else the file's name.
                let mut own_name = name.map(String::from);
                if let Some(col) = column.and_then(|c| table.header.iter().position(|h| h == c)) {
                    let values: std::collections::BTreeSet<&str> = table
                        .rows
                        .iter()
                        .map(|(_, r)| r.get(col).unwrap_or("").trim())
                        .collect();
                    match values.into_iter().collect::<Vec<_>>().as_slice() {
                        [one] if !one.is_empty() => {
                            own_name.get_or_insert_with(|| one.to_string());
                        }
                        many => {
                            return Err(dpfl::Error::data(
                                path.display().to_string(),
                                format!(
                                    "column `{}` holds {} silo names ({}): a shard holds one \
                                     silo's rows",
                                    column.unwrap_or_default(),
                                    many.len(),
                                    many.iter()
                                        .map(|v| format!("`{v}`"))
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                            ));
                        }
                    }
                    if !spec.drop.iter().any(|d| Some(d.as_str()) == column) {
                        spec.drop.push(column.unwrap_or_default().to_string());
                    }
                }
                let unordered: Vec<&str> = spec
                    .categorical
                    .iter()
                    .filter(|c| c.order.is_none())
                    .map(|c| c.column.as_str())
                    .chain(match &spec.target {
                        dpfl::data::csv::TargetSpec::Class {
                            column,
                            order: None,
                        } => Some(column.as_str()),
                        _ => None,
                    })
                    .collect();
                if !unordered.is_empty() {
                    return Err(dpfl::Error::config(
                        "data.source.spec",
                        format!(
                            "give the category `order` of {} in the experiment: a silo fitting \
                             the order on its own rows could code a category differently from \
                             the other silos",
                            unordered.join(", ")
                        ),
                    ));
                }
                let unscaled: Vec<&str> = spec
                    .standardize
                    .iter()
                    .filter(|c| !spec.scaling.contains_key(*c))
                    .map(String::as_str)
                    .collect();
                if !unscaled.is_empty() {
                    return Err(dpfl::Error::config(
                        "data.source.spec.scaling",
                        format!(
                            "give the public `scaling` (mean, scale) of {} in the experiment: a \
                             silo standardising on its own rows would scale a feature \
                             differently from the other silos and from the saved model",
                            unscaled.join(", ")
                        ),
                    ));
                }
                let own_name = own_name.unwrap_or_else(|| file_stem(path));
                Source::CsvSilos {
                    paths: vec![path.to_path_buf()],
                    spec,
                    names: Some(vec![own_name]),
                }
            }
            Source::Libsvm { spec, .. } => Source::Libsvm {
                path: path.to_path_buf(),
                spec: *spec,
            },
            other => {
                return Err(dpfl::Error::config(
                    "data.source",
                    format!(
                        "a `{}` source has no file of a silo's own; `data shard` reads csv, \
                         csv-silos and libsvm sources",
                        source_kind(other)
                    ),
                ));
            }
        };
        let partition = match source {
            Source::Libsvm { .. } => Some(PartitionSpec::Iid { silos: 1 }),
            _ => None,
        };
        Ok(DataSpec {
            source,
            partition,
            test_fraction: self.test_fraction,
            balance: false,
        })
    }

    /// Split, standardise and balance silos. Named silos each draw their split from a stream
    /// of their own, derived from one draw of `rng` and the silo's name
    /// ([`named_split_stream`]), so that a silo making its shard from its own file gets the
    /// split the pooled run gives it (with the experiment's seed).
    fn finish(
        &self,
        parts: Vec<Dataset>,
        names: Option<Vec<String>>,
        mut prep: Preprocessing,
        rng: &mut DpRng,
    ) -> dpfl::Result<Loaded> {
        let standardize = self.standardize();
        let fixed = self.fixed_scaling(&standardize)?;
        let mut silos = match &names {
            None => train_test_split(parts, self.test_fraction, rng)?,
            Some(names) => {
                let base = rng.next_seed();
                let mut out = Vec::with_capacity(parts.len());
                for (part, name) in parts.into_iter().zip(names) {
                    let mut r = named_split_stream(base, name);
                    let split = train_test_split(vec![part], self.test_fraction, &mut r)
                        .map_err(|e| rename_silo(e, name))?;
                    out.extend(split);
                }
                out
            }
        };
        if !standardize.is_empty() {
            prep.standardizer = Some(standardize_silos(
                &mut silos,
                &standardize,
                fixed.as_deref(),
            )?);
        }
        if self.balance {
            silos = balance_train(silos, rng)?;
        }
        Ok(Loaded {
            silos,
            preprocessing: prep,
            names,
        })
    }

    /// The public `scaling` of a CSV spec for `standardize`'s columns, in order: all of them
    /// or none (fitted on the training rows then).
    fn fixed_scaling(&self, standardize: &[String]) -> dpfl::Result<Option<Vec<(f64, f64)>>> {
        let scaling = match &self.source {
            Source::Csv { spec, .. } | Source::CsvSilos { spec, .. } => &spec.scaling,
            _ => return Ok(None),
        };
        if scaling.is_empty() {
            return Ok(None);
        }
        if let Some(extra) = scaling.keys().find(|k| !standardize.contains(k)) {
            return Err(dpfl::Error::config(
                "data.source.spec.scaling",
                format!("`{extra}` is not a `standardize` column"),
            ));
        }
        standardize
            .iter()
            .map(|c| {
                scaling.get(c).map(|s| (s.mean, s.scale)).ok_or_else(|| {
                    dpfl::Error::config(
                        "data.source.spec.scaling",
                        format!(
                            "gives no statistics for the `standardize` column `{c}`: give all \
                             of them or none"
                        ),
                    )
                })
            })
            .collect::<dpfl::Result<Vec<_>>>()
            .map(Some)
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

    /// Data that arrive split into silos: a CSV with a silo column, or one CSV per silo; with
    /// the silos' names.
    #[allow(clippy::type_complexity)]
    fn load_split(&self) -> dpfl::Result<Option<(Vec<Dataset>, Vec<String>, CsvSchema)>> {
        let by_column = match &self.partition {
            Some(PartitionSpec::ByColumn { column }) => Some(column),
            _ => None,
        };
        Ok(match (&self.source, by_column) {
            (Source::Csv { path, spec }, Some(column)) => {
                let (parts, names, schema) = silos::by_column(path, spec, column)?;
                Some((parts, names, schema))
            }
            (Source::CsvSilos { paths, spec, names }, None) => {
                if self.partition.is_some() {
                    return Err(dpfl::Error::config(
                        "data.partition",
                        "csv-silos data are already one file per silo; remove the partition",
                    ));
                }
                let names = match names {
                    Some(n) if n.len() != paths.len() => {
                        return Err(dpfl::Error::config(
                            "data.source.names",
                            format!("names {} silos for {} files", n.len(), paths.len()),
                        ));
                    }
                    Some(n) => n.clone(),
                    None => paths.iter().map(|p| file_stem(p)).collect(),
                };
                let (parts, schema) = silos::csv_files(paths, spec)?;
                Some((parts, names, schema))
            }
            (Source::CsvSilos { .. }, Some(_)) => {
                return Err(dpfl::Error::config(
                    "data.partition",
                    "csv-silos data are already one file per silo; remove the partition",
                ));
            }
            (_, Some(_)) => {
                return Err(dpfl::Error::config(
                    "partition.kind",
                    "by-column needs a csv source (the column is read from the file)",
                ));
            }
            _ => None,
        })
    }

    /// The whole data set before partitioning; records in `prep` how a new file of the same
    /// format becomes features (schema, LIBSVM layout, image shape, PCA).
    fn load_whole(
        &self,
        data_dir: Option<&Path>,
        prep: &mut Preprocessing,
    ) -> dpfl::Result<Dataset> {
        let dirs = DataDirs::new(data_dir);
        let binary = |num_features| LibsvmSpec {
            num_features,
            target: LibsvmTarget::Binary,
        };
        let (data, pca) = match &self.source {
            Source::Obesity => (
                bundled_csv(&dirs, KnownDataset::Obesity, obesity_spec(), prep)?,
                None,
            ),
            Source::Insurance => (
                bundled_csv(&dirs, KnownDataset::Insurance, insurance_spec(), prep)?,
                None,
            ),
            Source::A9a => {
                prep.libsvm = Some(binary(123));
                (dirs.load(KnownDataset::A9a, Part::Train)?, None)
            }
            Source::W8a => {
                prep.libsvm = Some(binary(300));
                (dirs.load(KnownDataset::W8a, Part::Train)?, None)
            }
            Source::Mnist { pca } => images(&dirs, KnownDataset::Mnist, *pca, prep)?,
            Source::FashionMnist { pca } => images(&dirs, KnownDataset::FashionMnist, *pca, prep)?,
            Source::Csv { path, spec } => {
                let (data, schema) = load_csv(path, spec)?;
                prep.csv = Some(schema);
                (data, None)
            }
            Source::Libsvm { path, spec } => {
                prep.libsvm = Some(*spec);
                (load_libsvm(path, spec)?, None)
            }
            Source::Idx {
                images,
                labels,
                pca,
                classes,
            } => {
                let data = load_idx(images, labels, classes.clone())?;
                let img = read_idx_images(images)?;
                prep.idx = Some(IdxLayout {
                    rows: img.rows,
                    cols: img.cols,
                    classes: class_names(&data),
                });
                match pca {
                    Some(k) => {
                        let p = Pca::fit(data.x(), *k)?;
                        (p.transform_dataset(data)?, Some(p.params()))
                    }
                    None => (data, None),
                }
            }
            Source::Synthetic { .. } | Source::CsvSilos { .. } => {
                return Err(dpfl::Error::config(
                    "data.source",
                    "this source is already split into silos",
                ));
            }
        };
        prep.pca = pca;
        Ok(data)
    }
}

/// The split stream of the silo named `name`: seeded by `base` (one draw of the data
/// generator) mixed with the first 8 bytes of the name's SHA-256.
fn named_split_stream(base: u64, name: &str) -> DpRng {
    use sha2::Digest;
    let h = sha2::Sha256::digest(name.as_bytes());
    let mut k = [0u8; 8];
    k.copy_from_slice(&h[..8]);
    DpRng::from_seed(
        base ^ u64::from_le_bytes(k),
        dpfl_privacy::rng::Purpose::Data,
        1,
    )
}

/// An error about "silo 0" of a one-silo split, said of the silo `name`.
fn rename_silo(e: dpfl::Error, name: &str) -> dpfl::Error {
    match e {
        dpfl::Error::Data { what, reason } if what == "silo 0" => dpfl::Error::Data {
            what: format!("silo `{name}`"),
            reason,
        },
        other => other,
    }
}

/// A file's name without its extension (a silo's default name).
fn file_stem(p: &Path) -> String {
    p.file_stem().map_or_else(
        || p.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// A bundled CSV set loaded with its paper spec, its fitted schema recorded in `prep`.
fn bundled_csv(
    dirs: &DataDirs,
    which: KnownDataset,
    spec: CsvSpec,
    prep: &mut Preprocessing,
) -> dpfl::Result<Dataset> {
    let file = which.part_files(Part::Train)?[0];
    let path = dirs.locate(which, &file)?;
    let (data, schema) = load_csv(&path, &spec)?;
    prep.csv = Some(schema);
    Ok(data)
}

fn class_names(d: &Dataset) -> Vec<String> {
    match d.target() {
        dpfl::data::Target::Classes { names } => names.clone(),
        dpfl::data::Target::Real => vec![],
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
fn images(
    dirs: &DataDirs,
    which: KnownDataset,
    k: Option<usize>,
    prep: &mut Preprocessing,
) -> dpfl::Result<(Dataset, Option<PcaParams>)> {
    let data = dirs.load(which, Part::Train)?;
    // Both image sets are 28 × 28 (LeCun & Cortes; Xiao et al. 2017).
    prep.idx = Some(IdxLayout {
        rows: 28,
        cols: 28,
        classes: class_names(&data),
    });
    let Some(k) = k else { return Ok((data, None)) };
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
    Ok((pca.transform_dataset(data)?, Some(pca.params())))
}
