//! Loader row counts and known statistics (shared `SOURCES.md`), registry resolution and
//! checksums, and every bad-input case of issue #2 that concerns data: each error must name
//! the file and, for text formats, the line.

use crate::data_common;

use data_common::{bundled, shared, tmp, write};
use dpfl::data::csv::{CategoricalSpec, CsvSpec, TargetSpec, load_csv};
use dpfl::data::idx::{LABELS_MAGIC, load_idx};
use dpfl::data::libsvm::{LibsvmSpec, LibsvmTarget, load_libsvm};
use dpfl::data::registry::{self, DataDirs, KnownDataset, Part};
use dpfl::data::{Dataset, Target};

fn positives(d: &Dataset) -> usize {
    d.y().iter().filter(|&&v| v == 1.0).count()
}

// ---------------------------------------------------------------- bundled sets (always run)

#[test]
fn bundled_insurance_matches_sources() {
    let d = bundled()
        .load(KnownDataset::Insurance, Part::Train)
        .unwrap();
    assert_eq!(d.len(), 1338);
    assert_eq!(
        d.feature_names(),
        &[
            "age",
            "sex",
            "bmi",
            "children",
            "smoker",
            "region",
            "intercept"
        ]
    );
    assert_eq!(d.target(), &Target::Real);
    let mean = d.y().iter().sum::<f64>() / d.len() as f64;
    assert!((mean - 13270.42).abs() < 0.005, "mean charges {mean}");
    // First row: 19,female,27.9,0,yes,southwest,16884.924 (female = 0, yes = 1, southwest = 3).
    assert_eq!(
        d.row(0),
        (&[19.0, 0.0, 27.9, 0.0, 1.0, 3.0, 1.0][..], 16884.924)
    );
}

#[test]
fn bundled_obesity_matches_sources() {
    let d = bundled().load(KnownDataset::Obesity, Part::Train).unwrap();
    assert_eq!(d.len(), 2111);
    assert_eq!(d.num_features(), 17, "16 features and the intercept");
    let counts = d.class_counts().unwrap();
    // Paper order: Insufficient, Normal, Overweight I, II, Obesity I, II, III.
    assert_eq!(counts, vec![272, 287, 290, 290, 351, 297, 324]);
    let mut sorted = counts.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(sorted, vec![351, 324, 297, 290, 290, 287, 272]);
}

#[test]
fn bundled_a9a_matches_sources() {
    let dirs = bundled();
    let train = dirs.load(KnownDataset::A9a, Part::Train).unwrap();
    assert_eq!((train.len(), train.num_features()), (32_561, 123));
    assert_eq!(positives(&train), 7_841);
    let test = dirs.load(KnownDataset::A9a, Part::Test).unwrap();
    assert_eq!((test.len(), test.num_features()), (16_281, 123));
    // Binary features only.
    assert!(train.x().as_slice().iter().all(|&v| v == 0.0 || v == 1.0));
    // Verified once, remembered after.
    let path = dirs
        .locate(KnownDataset::A9a, &KnownDataset::A9a.files()[0])
        .unwrap();
    assert!(registry::is_verified(
        &path,
        KnownDataset::A9a.files()[0].sha256
    ));
}

// ---------------------------------------------------------------- shared sets (skip if absent)

#[test]
fn mnist_matches_sources() {
    let Some(dirs) = shared() else { return };
    let train = dirs.load(KnownDataset::Mnist, Part::Train).unwrap();
    assert_eq!((train.len(), train.num_features()), (60_000, 784));
    assert_eq!(
        train.class_counts().unwrap(),
        vec![5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    );
    let px = train.x().as_slice();
    assert!(px.iter().all(|&v| (0.0..=1.0).contains(&v)));
    assert_eq!(px.iter().copied().fold(0.0, f64::max), 1.0);
    let test = dirs.load(KnownDataset::Mnist, Part::Test).unwrap();
    assert_eq!(test.len(), 10_000);
}

#[test]
fn fashion_mnist_and_w8a_load() {
    let Some(dirs) = shared() else { return };
    let f = dirs.load(KnownDataset::FashionMnist, Part::Test).unwrap();
    assert_eq!((f.len(), f.num_features()), (10_000, 784));
    assert_eq!(f.class_counts().unwrap(), vec![1000; 10]);
    let w = dirs.load(KnownDataset::W8a, Part::Train).unwrap();
    assert_eq!((w.len(), w.num_features()), (49_749, 300));
    assert!(dirs.load(KnownDataset::W8a, Part::Test).is_err());
}

// ---------------------------------------------------------------- registry resolution

#[test]
fn resolution_order_and_checksums() {
    let bundled_dir = DataDirs::bundled_dir();
    let original = std::fs::read(bundled_dir.join("insurance/insurance.csv")).unwrap();
    let explicit = tmp();
    let env = tmp();
    std::fs::create_dir(explicit.path().join("insurance")).unwrap();
    std::fs::create_dir(env.path().join("insurance")).unwrap();
    write(&env, "insurance/insurance.csv", &original);
    let file = &KnownDataset::Insurance.files()[0];

    // Not in the explicit directory: the environment directory comes next.
    let dirs = DataDirs::from_parts(
        Some(explicit.path().to_path_buf()),
        Some(env.path().to_path_buf()),
        Some(bundled_dir.clone()),
    );
    let found = dirs.locate(KnownDataset::Insurance, file).unwrap();
    assert!(found.starts_with(env.path()), "{}", found.display());

    // A corrupt copy in the explicit directory wins the lookup and fails the checksum.
    let mut corrupt = original.clone();
    corrupt[100] ^= 1;
    write(&explicit, "insurance/insurance.csv", &corrupt);
    let err = dirs
        .load(KnownDataset::Insurance, Part::Train)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("insurance.csv") && err.contains("SHA-256 mismatch"),
        "{err}"
    );
    assert!(err.contains(file.sha256), "expected sum missing: {err}");
    let actual = registry::sha256_file(&explicit.path().join("insurance/insurance.csv")).unwrap();
    assert!(err.contains(&actual), "actual sum missing: {err}");

    // Without the explicit directory the bundled copy is found last.
    let dirs = DataDirs::from_parts(None, None, Some(bundled_dir.clone()));
    assert!(
        dirs.locate(KnownDataset::Insurance, file)
            .unwrap()
            .starts_with(&bundled_dir)
    );
}

#[test]
fn missing_data_set_names_dataset_dirs_and_remedy() {
    let empty = tmp();
    let dirs = DataDirs::from_parts(
        Some(empty.path().to_path_buf()),
        None,
        Some(DataDirs::bundled_dir()),
    );
    let err = dirs
        .load(KnownDataset::Mnist, Part::Train)
        .unwrap_err()
        .to_string();
    for needle in [
        "`mnist`",
        "mnist/train-images-idx3-ubyte.gz",
        "--data-dir",
        "DPFL_DATA",
        &empty.path().display().to_string(),
        "bundled",
    ] {
        assert!(err.contains(needle), "`{needle}` missing from: {err}");
    }
}

// ---------------------------------------------------------------- bad input (issue #2)

fn real_spec() -> CsvSpec {
    CsvSpec {
        target: TargetSpec::Real { column: "y".into() },
        categorical: vec![CategoricalSpec::label("c")],
        standardize: vec![],
        drop: vec![],
        intercept: false,
        scaling: Default::default(),
        na_values: vec![],
        missing: Default::default(),
    }
}

#[test]
fn missing_files_are_named() {
    let dir = tmp();
    let p = dir.path().join("nope.csv");
    let err = load_csv(&p, &real_spec()).unwrap_err().to_string();
    assert!(
        err.contains("nope.csv") && err.contains("No such file"),
        "{err}"
    );
    let q = dir.path().join("nope.svm");
    let spec = LibsvmSpec {
        num_features: 3,
        target: LibsvmTarget::Binary,
    };
    let err = load_libsvm(&q, &spec).unwrap_err().to_string();
    assert!(err.contains("nope.svm"), "{err}");
    let err = load_idx(&dir.path().join("im.gz"), &q, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("im.gz"), "{err}");
}

#[test]
fn malformed_csv_rows_name_file_line_and_column() {
    let dir = tmp();
    let cases = [
        // wrong field count
        (
            "a,c,y\n1,x,2\n1,x\n",
            "bad0.csv:3:",
            "2 fields, but the header has 3",
        ),
        // an unterminated quote swallows the rest of the file into one field
        (
            "a,c,y\n1,x,2\n\"1,x,2\n3,x,4\n",
            "bad1.csv:3:",
            "fields, but the header has 3",
        ),
        // unparsable number
        (
            "a,c,y\n1,x,2\n1.2.3,x,2\n",
            "bad2.csv:3:",
            "column 1 (`a`): cannot parse `1.2.3`",
        ),
        // NaN feature
        (
            "a,c,y\n1,x,2\nNaN,x,2\n",
            "bad3.csv:3:",
            "column 1 (`a`): value `NaN` is not finite",
        ),
        // infinite target
        (
            "a,c,y\n1,x,2\n1,x,inf\n",
            "bad4.csv:3:",
            "column 3 (`y`): value `inf` is not finite",
        ),
        // empty numeric field
        (
            "a,c,y\n1,x,2\n,x,2\n",
            "bad5.csv:3:",
            "column 1 (`a`): empty value",
        ),
        // empty categorical field
        (
            "a,c,y\n1,x,2\n1,,2\n",
            "bad6.csv:3:",
            "column 2 (`c`): empty value",
        ),
    ];
    for (i, (content, place, reason)) in cases.iter().enumerate() {
        let p = write(&dir, &format!("bad{i}.csv"), content);
        let err = load_csv(&p, &real_spec()).unwrap_err().to_string();
        assert!(
            err.contains(place) && err.contains(reason),
            "case {i}: {err}"
        );
    }
    let p = write(&dir, "empty.csv", "");
    let err = load_csv(&p, &real_spec()).unwrap_err().to_string();
    assert!(
        err.contains("empty.csv:1:") && err.contains("header"),
        "{err}"
    );
}

#[test]
fn labels_out_of_range_are_refused() {
    let dir = tmp();
    // CSV class target with a fixed class list.
    let p = write(&dir, "cls.csv", "a,y\n1,lo\n2,hi\n3,huge\n");
    let spec = CsvSpec {
        target: TargetSpec::Class {
            column: "y".into(),
            order: Some(vec!["lo".into(), "hi".into()]),
        },
        categorical: vec![],
        standardize: vec![],
        drop: vec![],
        intercept: false,
        scaling: Default::default(),
        na_values: vec![],
        missing: Default::default(),
    };
    let err = load_csv(&p, &spec).unwrap_err().to_string();
    assert!(
        err.contains("cls.csv:4:") && err.contains("`huge`"),
        "{err}"
    );
    // LIBSVM binary label 2.
    let q = write(&dir, "l.svm", "+1 1:1\n-1 2:1\n2 1:1\n");
    let spec = LibsvmSpec {
        num_features: 2,
        target: LibsvmTarget::Binary,
    };
    let err = load_libsvm(&q, &spec).unwrap_err().to_string();
    assert!(
        err.contains("l.svm:3:") && err.contains("out of range"),
        "{err}"
    );
    // IDX label 10 with ten classes.
    let mut im = 0x0803u32.to_be_bytes().to_vec();
    for d in [2u32, 1, 1] {
        im.extend_from_slice(&d.to_be_bytes());
    }
    im.extend_from_slice(&[0, 1]);
    let mut lb = LABELS_MAGIC.to_be_bytes().to_vec();
    lb.extend_from_slice(&2u32.to_be_bytes());
    lb.extend_from_slice(&[9, 10]);
    let (pi, pl) = (write(&dir, "im", im), write(&dir, "lb", lb));
    let err = load_idx(&pi, &pl, None).unwrap_err().to_string();
    assert!(
        err.contains("lb") && err.contains("label 10 of item 1"),
        "{err}"
    );
    // A Dataset built by hand is checked too.
    let x = dpfl::linalg::Matrix::from_vec(1, 1, vec![0.0]).unwrap();
    let t = Target::Classes {
        names: vec!["a".into()],
    };
    let err = Dataset::new(x, vec![1.0], t, vec!["f".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("label 1") && err.contains("0..1"), "{err}");
}

#[test]
fn dimension_mismatches_are_refused() {
    let dir = tmp();
    // LIBSVM index beyond the declared feature count.
    let q = write(&dir, "d.svm", "+1 1:1\n-1 124:1\n");
    let spec = LibsvmSpec {
        num_features: 123,
        target: LibsvmTarget::Binary,
    };
    let err = load_libsvm(&q, &spec).unwrap_err().to_string();
    assert!(
        err.contains("d.svm:2:") && err.contains("124") && err.contains("1..=123"),
        "{err}"
    );
    // IDX image and label counts differ.
    let mut im = 0x0803u32.to_be_bytes().to_vec();
    for d in [3u32, 1, 1] {
        im.extend_from_slice(&d.to_be_bytes());
    }
    im.extend_from_slice(&[0, 1, 2]);
    let mut lb = LABELS_MAGIC.to_be_bytes().to_vec();
    lb.extend_from_slice(&2u32.to_be_bytes());
    lb.extend_from_slice(&[1, 2]);
    let (pi, pl) = (write(&dir, "im3", im), write(&dir, "lb2", lb));
    let err = load_idx(&pi, &pl, None).unwrap_err().to_string();
    assert!(
        err.contains("dimension mismatch") && err.contains("3 images") && err.contains("2 labels"),
        "{err}"
    );
    // A second CSV with a different header than the fitted schema.
    let a = write(&dir, "a.csv", "a,c,y\n1,x,2\n");
    let b = write(&dir, "b.csv", "a,y\n1,2\n");
    let (_, schema) = load_csv(&a, &real_spec()).unwrap();
    let err = schema.load(&b).unwrap_err().to_string();
    assert!(err.contains("b.csv:1:") && err.contains("header"), "{err}");
    // PCA fitted on 2 features applied to 3.
    let x = dpfl::linalg::Matrix::from_vec(3, 2, vec![0., 1., 1., 0., 2., 2.]).unwrap();
    let pca = dpfl::data::pca::Pca::fit(&x, 1).unwrap();
    let err = pca
        .transform(&dpfl::linalg::Matrix::zeros(1, 3))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("dimension mismatch") && err.contains("2 features"),
        "{err}"
    );
}

#[test]
fn gzipped_text_loads_like_plain() {
    use flate2::{Compression, write::GzEncoder};
    use std::io::Write;
    let dir = tmp();
    let content = "a,c,y\n1,x,2\n3,y,4\n";
    let plain = write(&dir, "p.csv", content);
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(content.as_bytes()).unwrap();
    let gz = write(&dir, "p.csv.gz", enc.finish().unwrap());
    let (a, _) = load_csv(&plain, &real_spec()).unwrap();
    let (b, _) = load_csv(&gz, &real_spec()).unwrap();
    assert_eq!(a, b);
}
