//! The data sets the papers use, where to find them, and their SHA-256 sums.
//!
//! Each [`KnownDataset`] lists its files by a path relative to a *data directory* whose layout
//! is that of the shared data folder (`mnist/…`, `fashion-mnist/…`, `libsvm/…`,
//! `insurance/…`, `obesity/…`). A file is looked up in these directories, in order:
//!
//! 1. the directory given explicitly (the CLI's `--data-dir`);
//! 2. the directory in the `DPFL_DATA` environment variable;
//! 3. the small sets (insurance, obesity, a9a) embedded in the binary from the repository's
//!    `data/` directory (licences in `data/LICENSES.md`; `bundled.rs`), so an installed
//!    binary needs no source checkout. ([`DataDirs::from_parts`] can name a bundled directory
//!    on disk instead, for tests.)
//!
//! The first directory holding the file wins; its SHA-256 must match the sum recorded here
//! (copied from the shared `SHA256SUMS`), else loading fails naming the file and both sums.
//! A verified file is remembered for the rest of the process, keyed by its canonical path,
//! length and modification time, so repeated loads hash it once.
//!
//! The default specs for the tabular sets follow Lowy & Razaviyayn App. I.2 (insurance:
//! categoricals label-encoded, age and BMI standardised, intercept, d = 7) and App. I.3
//! (obesity: categoricals encoded, Age/Height/Weight/CH2O/TUE standardised as in the paper's
//! code, intercept, d = 17, 7 classes).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::csv::{CategoricalSpec, CsvSpec, TargetSpec, load_csv};
use super::idx::load_idx;
use super::libsvm::{LibsvmSpec, LibsvmTarget, load_libsvm};
use super::{Dataset, io};
use crate::{Error, Result};

/// Name of the environment variable holding a data directory.
pub const DATA_ENV: &str = "DPFL_DATA";

/// A data set dpfl knows how to find, verify and load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KnownDataset {
    /// MNIST digits (LeCun et al.): 60 000 + 10 000 28×28 images, IDX files.
    Mnist,
    /// Fashion-MNIST (Xiao et al. 2017): MNIST's shape, ten clothing classes.
    FashionMnist,
    /// a9a (LIBSVM): UCI Adult, 123 binary features; SoteriaFL's experiments.
    A9a,
    /// w8a (LIBSVM): 300 binary features.
    W8a,
    /// The insurance cost regression set (CSV, Lowy & Razaviyayn's experiments).
    Insurance,
    /// The obesity level set (CSV, seven classes; Lowy & Razaviyayn's experiments).
    Obesity,
}

/// Training or test part of a data set with separate files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    /// The training file.
    Train,
    /// The test file.
    Test,
}

/// One file of a data set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataFile {
    /// Path relative to a data directory, `/`-separated.
    pub rel_path: &'static str,
    /// Lower-case hex SHA-256 of the file as stored (compressed if it is a .gz).
    pub sha256: &'static str,
}

const fn f(rel_path: &'static str, sha256: &'static str) -> DataFile {
    DataFile { rel_path, sha256 }
}

// Sums from the shared SHA256SUMS.
const MNIST: [DataFile; 4] = [
    f(
        "mnist/train-images-idx3-ubyte.gz",
        "0b367032e93c5d0cea0925647cfdb18614af8ee15f83e6f2fc2ad904a6835971",
    ),
    f(
        "mnist/train-labels-idx1-ubyte.gz",
        "1787548bbe0bff1ec2ecdc0ef292b02df999e2d1a6002d27500982c652b17203",
    ),
    f(
        "mnist/t10k-images-idx3-ubyte.gz",
        "1a1a05eab793c14bb050b398624a11b0ffd1a2953baed553b1b9bd079e2a20be",
    ),
    f(
        "mnist/t10k-labels-idx1-ubyte.gz",
        "b91679a0acfe4ba0e50a2437a903084cba1f5f92592b016a25a7dfd00455798b",
    ),
];
const FASHION: [DataFile; 4] = [
    f(
        "fashion-mnist/train-images-idx3-ubyte.gz",
        "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7",
    ),
    f(
        "fashion-mnist/train-labels-idx1-ubyte.gz",
        "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056",
    ),
    f(
        "fashion-mnist/t10k-images-idx3-ubyte.gz",
        "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa",
    ),
    f(
        "fashion-mnist/t10k-labels-idx1-ubyte.gz",
        "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05",
    ),
];
const A9A: [DataFile; 2] = [
    f(
        "libsvm/a9a.gz",
        "b301f3e87350539f3ebc751d07b4691a8c66f0bf38c1d179c86bbf5e2d9623b2",
    ),
    f(
        "libsvm/a9a.t.gz",
        "92967561181c73a60149cc8221b936eb746573fda8cbf483115d673f42b26c3f",
    ),
];
const W8A: [DataFile; 1] = [f(
    "libsvm/w8a.gz",
    "758d97c654378b34cca0160e7a6b2ac926d882b51dddd2f0d3d3743f0ed9135b",
)];
const INSURANCE: [DataFile; 1] = [f(
    "insurance/insurance.csv",
    "505c1cbc2e63d0363bac59501563df2530aadf4cdb9cfee226f4ef32f5468281",
)];
const OBESITY: [DataFile; 1] = [f(
    "obesity/obesity.csv",
    "28b6991062855d3d15642e38b1aa9d1b32fb7abbb5abf5b096f1868cd706154b",
)];

const FASHION_CLASSES: [&str; 10] = [
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
];

impl KnownDataset {
    /// Every known data set, in the order `dpfl data list` prints them.
    pub const ALL: [KnownDataset; 6] = [
        KnownDataset::Mnist,
        KnownDataset::FashionMnist,
        KnownDataset::A9a,
        KnownDataset::W8a,
        KnownDataset::Insurance,
        KnownDataset::Obesity,
    ];

    /// The name used in configs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            KnownDataset::Mnist => "mnist",
            KnownDataset::FashionMnist => "fashion-mnist",
            KnownDataset::A9a => "a9a",
            KnownDataset::W8a => "w8a",
            KnownDataset::Insurance => "insurance",
            KnownDataset::Obesity => "obesity",
        }
    }

    /// Parses a name as printed by [`KnownDataset::name`].
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| {
                Error::config(
                    "data.name",
                    format!(
                        "unknown data set `{name}` (known: {})",
                        Self::ALL.map(|d| d.name()).join(", ")
                    ),
                )
            })
    }

    /// Every file of the set.
    pub fn files(self) -> &'static [DataFile] {
        match self {
            KnownDataset::Mnist => &MNIST,
            KnownDataset::FashionMnist => &FASHION,
            KnownDataset::A9a => &A9A,
            KnownDataset::W8a => &W8A,
            KnownDataset::Insurance => &INSURANCE,
            KnownDataset::Obesity => &OBESITY,
        }
    }

    /// The files of one part, or an error if the set has no such part.
    pub fn part_files(self, part: Part) -> Result<&'static [DataFile]> {
        let files = self.files();
        match (self, part) {
            (KnownDataset::Mnist | KnownDataset::FashionMnist, Part::Train) => Ok(&files[..2]),
            (KnownDataset::Mnist | KnownDataset::FashionMnist, Part::Test) => Ok(&files[2..]),
            (KnownDataset::A9a, Part::Train) => Ok(&files[..1]),
            (KnownDataset::A9a, Part::Test) => Ok(&files[1..]),
            (_, Part::Train) => Ok(files),
            (_, Part::Test) => Err(Error::config(
                "data.part",
                format!(
                    "data set `{}` has no separate test file: split its training data into train and test",
                    self.name()
                ),
            )),
        }
    }

    /// Whether the repository ships this set in `data/`.
    pub fn is_bundled(self) -> bool {
        matches!(
            self,
            KnownDataset::A9a | KnownDataset::Insurance | KnownDataset::Obesity
        )
    }
}

impl std::fmt::Display for KnownDataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for KnownDataset {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::from_name(s)
    }
}

/// The insurance spec of Lowy & Razaviyayn App. I.2: target `charges` (real), sex, smoker
/// and region label-encoded in sorted order, age and bmi to be standardised, intercept.
pub fn insurance_spec() -> CsvSpec {
    CsvSpec {
        target: TargetSpec::Real {
            column: "charges".into(),
        },
        categorical: ["sex", "smoker", "region"]
            .map(CategoricalSpec::label)
            .to_vec(),
        standardize: vec!["age".into(), "bmi".into()],
        drop: vec![],
        intercept: true,
        scaling: Default::default(),
        na_values: vec![],
        missing: Default::default(),
    }
}

/// The obesity spec of Lowy & Razaviyayn App. I.3: target `NObeyesdad` with the seven classes
/// in the paper's order (increasing weight), categoricals label-encoded (the frequency scales
/// CAEC and CALC in their natural order, the others sorted), Age, Height, Weight, CH2O and TUE
/// to be standardised (the paper's code), intercept.
pub fn obesity_spec() -> CsvSpec {
    let freq = || {
        Some(
            ["no", "Sometimes", "Frequently", "Always"]
                .map(String::from)
                .to_vec(),
        )
    };
    let mut categorical: Vec<CategoricalSpec> = [
        "Gender",
        "family_history_with_overweight",
        "FAVC",
        "SMOKE",
        "SCC",
        "MTRANS",
    ]
    .map(CategoricalSpec::label)
    .to_vec();
    for c in ["CAEC", "CALC"] {
        categorical.push(CategoricalSpec {
            order: freq(),
            ..CategoricalSpec::label(c)
        });
    }
    CsvSpec {
        target: TargetSpec::Class {
            column: "NObeyesdad".into(),
            order: Some(OBESITY_CLASSES.map(String::from).to_vec()),
        },
        categorical,
        standardize: ["Age", "Height", "Weight", "CH2O", "TUE"]
            .map(String::from)
            .to_vec(),
        drop: vec![],
        intercept: true,
        scaling: Default::default(),
        na_values: vec![],
        missing: Default::default(),
    }
}

/// The obesity classes in the paper's order.
pub const OBESITY_CLASSES: [&str; 7] = [
    "Insufficient_Weight",
    "Normal_Weight",
    "Overweight_Level_I",
    "Overweight_Level_II",
    "Obesity_Type_I",
    "Obesity_Type_II",
    "Obesity_Type_III",
];

/// Where a searched directory came from (for messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirSource {
    /// `--data-dir` on the command line.
    Argument,
    /// The `DPFL_DATA` environment variable.
    Env,
    /// The repository's `data/` directory (the bundled sets).
    Bundled,
}

impl DirSource {
    fn label(self) -> &'static str {
        match self {
            DirSource::Argument => "--data-dir",
            DirSource::Env => DATA_ENV,
            DirSource::Bundled => "bundled data/",
        }
    }
}

/// The ordered list of data directories to search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataDirs {
    dirs: Vec<(DirSource, PathBuf)>,
    /// Fall back on the copies embedded in the binary.
    embedded: bool,
}

impl DataDirs {
    /// `--data-dir` (if given), then `$DPFL_DATA` (if set and non-empty), then the bundled
    /// `data/` directory.
    pub fn new(explicit: Option<&Path>) -> Self {
        let env = std::env::var_os(DATA_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        DataDirs {
            embedded: true,
            ..Self::from_parts(explicit.map(Path::to_path_buf), env, None)
        }
    }

    /// An explicit list, for tests and embedding: any of the three may be absent.
    pub fn from_parts(
        explicit: Option<PathBuf>,
        env: Option<PathBuf>,
        bundled: Option<PathBuf>,
    ) -> Self {
        let dirs = [
            (DirSource::Argument, explicit),
            (DirSource::Env, env),
            (DirSource::Bundled, bundled),
        ]
        .into_iter()
        .filter_map(|(s, d)| d.map(|d| (s, d)))
        .collect();
        DataDirs {
            dirs,
            embedded: false,
        }
    }

    /// The repository's `data/` directory (found relative to this crate's sources, so it
    /// exists only in a source checkout: tests use it; the binary uses the embedded copies).
    pub fn bundled_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data")
    }

    /// The directories in search order.
    pub fn dirs(&self) -> impl Iterator<Item = (DirSource, &Path)> {
        self.dirs.iter().map(|(s, d)| (*s, d.as_path()))
    }

    /// The verified path of one file of `dataset`.
    pub fn locate(&self, dataset: KnownDataset, file: &DataFile) -> Result<PathBuf> {
        let rel: PathBuf = file.rel_path.split('/').collect();
        let found = self
            .dirs
            .iter()
            .map(|(_, d)| d.join(&rel))
            .find(|p| p.is_file());
        if found.is_none()
            && self.embedded
            && let Some(p) = super::bundled::path_of(file.rel_path)
        {
            let bytes = super::bundled::bytes(&p).unwrap_or_default();
            let actual: String = Sha256::digest(bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            if actual != file.sha256 {
                return Err(Error::data(
                    p.display().to_string(),
                    format!(
                        "SHA-256 mismatch of the embedded copy: expected {}, found {actual}",
                        file.sha256
                    ),
                ));
            }
            return Ok(p);
        }
        let Some(path) = found else {
            let searched = if self.dirs.is_empty() && !self.embedded {
                "no directories".to_string()
            } else {
                self.dirs
                    .iter()
                    .map(|(s, d)| format!("{} ({})", d.display(), s.label()))
                    .chain(
                        self.embedded
                            .then(|| "the data embedded in dpfl".to_string()),
                    )
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(Error::data(
                format!("data set `{dataset}`"),
                format!(
                    "file `{}` not found; searched {searched}. Provide a directory DIR holding \
                     `{}` with --data-dir DIR or {DATA_ENV}=DIR (the layout of the shared datasets \
                     folder; sources and licences in data/LICENSES.md)",
                    file.rel_path, file.rel_path
                ),
            ));
        };
        verify_sha256(&path, file.sha256)?;
        Ok(path)
    }

    /// Locates, verifies and loads one part of a known data set. The tabular sets are loaded
    /// with [`insurance_spec`] / [`obesity_spec`] (not yet standardised: see
    /// [`crate::data::preprocess`]); the LIBSVM sets with binary targets (a9a: 123 features,
    /// w8a: 300); the image sets with pixels in [0, 1].
    pub fn load(&self, dataset: KnownDataset, part: Part) -> Result<Dataset> {
        let files = dataset.part_files(part)?;
        let paths = files
            .iter()
            .map(|f| self.locate(dataset, f))
            .collect::<Result<Vec<_>>>()?;
        let binary = |num_features| LibsvmSpec {
            num_features,
            target: LibsvmTarget::Binary,
        };
        match dataset {
            KnownDataset::Mnist => load_idx(&paths[0], &paths[1], None),
            KnownDataset::FashionMnist => load_idx(
                &paths[0],
                &paths[1],
                Some(FASHION_CLASSES.map(String::from).to_vec()),
            ),
            KnownDataset::A9a => load_libsvm(&paths[0], &binary(123)),
            KnownDataset::W8a => load_libsvm(&paths[0], &binary(300)),
            KnownDataset::Insurance => Ok(load_csv(&paths[0], &insurance_spec())?.0),
            KnownDataset::Obesity => Ok(load_csv(&paths[0], &obesity_spec())?.0),
        }
    }
}

/// Lower-case hex SHA-256 of a file's bytes.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| io::io_error(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let k = file.read(&mut buf).map_err(|e| io::io_error(path, e))?;
        if k == 0 {
            break;
        }
        hasher.update(&buf[..k]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// What identifies a file already verified: its identity on disk and the sum it matched.
type VerifiedKey = (PathBuf, String);
type VerifiedStamp = (u64, Option<SystemTime>);

fn verified() -> &'static Mutex<HashMap<VerifiedKey, VerifiedStamp>> {
    static CACHE: OnceLock<Mutex<HashMap<VerifiedKey, VerifiedStamp>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Checks a file against an expected SHA-256, once per process per unchanged file.
pub fn verify_sha256(path: &Path, expected: &str) -> Result<()> {
    let canonical = std::fs::canonicalize(path).map_err(|e| io::io_error(path, e))?;
    let meta = std::fs::metadata(&canonical).map_err(|e| io::io_error(path, e))?;
    let stamp = (meta.len(), meta.modified().ok());
    let key = (canonical, expected.to_ascii_lowercase());
    // A poisoned lock only means another thread panicked mid-insert; the map is still valid.
    if verified()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        == Some(&stamp)
    {
        return Ok(());
    }
    let actual = sha256_file(path)?;
    if actual != key.1 {
        return Err(Error::data(
            path.display().to_string(),
            format!(
                "SHA-256 mismatch: expected {}, found {actual}; the file is corrupt or a different version",
                key.1
            ),
        ));
    }
    verified()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, stamp);
    Ok(())
}

/// Whether `path` was verified against `expected` earlier in this process (for tests).
pub fn is_verified(path: &Path, expected: &str) -> bool {
    std::fs::canonicalize(path).is_ok_and(|c| {
        verified()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&(c, expected.to_ascii_lowercase()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in KnownDataset::ALL {
            assert_eq!(KnownDataset::from_name(d.name()).unwrap(), d);
            assert!(!d.files().is_empty());
            assert!(d.files().iter().all(|f| f.sha256.len() == 64));
        }
        let err = KnownDataset::from_name("cifar10").unwrap_err().to_string();
        assert!(err.contains("`cifar10`") && err.contains("mnist"), "{err}");
        assert!(KnownDataset::Obesity.part_files(Part::Test).is_err());
        assert_eq!(
            KnownDataset::A9a.part_files(Part::Test).unwrap()[0].rel_path,
            "libsvm/a9a.t.gz"
        );
    }

    #[test]
    fn sha256_of_known_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("abc");
        std::fs::write(&p, b"abc").unwrap();
        // FIPS 180-2 appendix B.1 test vector.
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_file(&p).unwrap(), abc);
        verify_sha256(&p, abc).unwrap();
        assert!(is_verified(&p, abc));
        let err = verify_sha256(&p, &"0".repeat(64)).unwrap_err().to_string();
        assert!(
            err.contains("abc") && err.contains(abc) && err.contains(&"0".repeat(64)),
            "{err}"
        );
    }
}
