//! Partition counts on the paper's data sets, the MNIST digit-pair construction, Dirichlet
//! label skew, splitting, balancing, standardisation on train statistics, and
//! reproducibility for a seed.

use crate::data_common;

use std::collections::HashSet;

use data_common::{bundled, shared};
use dpfl::data::partition::{
    self, MnistPairs, PairSampling, PartitionSpec, balance_train, by_class, by_sorted_target,
    mnist_pair_digits, mnist_pairs, mnist_pairs_indices, train_test_split,
};
use dpfl::data::preprocess::standardize_silos;
use dpfl::data::registry::{KnownDataset, Part, obesity_spec};
use dpfl::data::{Dataset, Target, describe_silos};
use dpfl::linalg::Matrix;
use dpfl_privacy::rng::{DpRng, Purpose};

fn rng(seed: u64) -> DpRng {
    DpRng::from_seed(seed, Purpose::Data, 0)
}

/// A stand-in for MNIST: digit labels with the given counts, feature 0 = row index.
fn digits(counts: [usize; 10]) -> Dataset {
    let y: Vec<f64> = counts
        .iter()
        .enumerate()
        .flat_map(|(d, &c)| std::iter::repeat_n(d as f64, c))
        .collect();
    let n = y.len();
    let x = Matrix::from_vec(n, 2, (0..n).flat_map(|i| [i as f64, y[i]]).collect()).unwrap();
    let names = (0..10).map(|d| d.to_string()).collect();
    Dataset::new(
        x,
        y,
        Target::Classes { names },
        vec!["row".into(), "digit".into()],
    )
    .unwrap()
}

fn rows_of(d: &Dataset) -> Vec<usize> {
    (0..d.len()).map(|i| d.x().row(i)[0] as usize).collect()
}
fn digits_of(d: &Dataset) -> Vec<usize> {
    (0..d.len()).map(|i| d.x().row(i)[1] as usize).collect()
}

#[test]
fn obesity_by_class_gives_the_class_counts() {
    let d = bundled().load(KnownDataset::Obesity, Part::Train).unwrap();
    let silos = by_class(&d).unwrap();
    let sizes: Vec<usize> = silos.iter().map(Dataset::len).collect();
    assert_eq!(sizes, vec![272, 287, 290, 290, 351, 297, 324]);
    for (c, s) in silos.iter().enumerate() {
        assert!(
            s.y().iter().all(|&v| v == c as f64),
            "silo {c} holds another class"
        );
    }

    // The paper's pipeline: 80/20 split, standardise on pooled train, balance train.
    let split = train_test_split(silos, 0.2, &mut rng(1)).unwrap();
    let tests: Vec<usize> = split.iter().map(|s| s.test.len()).collect();
    // ⌈0.2·n⌉: 54.4→55, 57.4→58, 58, 58, 70.2→71, 59.4→60, 64.8→65.
    assert_eq!(tests, vec![55, 58, 58, 58, 71, 60, 65]);
    let mut split = split;
    let st = standardize_silos(&mut split, &obesity_spec().standardize, None).unwrap();
    assert_eq!(st.columns(), &["Age", "Height", "Weight", "CH2O", "TUE"]);
    let age = 1; // Gender, Age, ...
    let train_rows: Vec<f64> = split
        .iter()
        .flat_map(|s| (0..s.train.len()).map(move |i| s.train.x().row(i)[age]))
        .collect();
    let m = train_rows.iter().sum::<f64>() / train_rows.len() as f64;
    let v = train_rows.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / train_rows.len() as f64;
    assert!(
        m.abs() < 1e-12 && (v - 1.0).abs() < 1e-12,
        "mean {m}, var {v}"
    );
    let balanced = balance_train(split, &mut rng(2)).unwrap();
    // min train = 272 − 55 = 217.
    assert!(balanced.iter().all(|s| s.train.len() == 217));
    assert_eq!(
        balanced.iter().map(|s| s.test.len()).collect::<Vec<_>>(),
        tests,
        "balancing leaves test parts alone"
    );
    let text = describe_silos(&balanced);
    assert!(
        text.contains("silos: 7 (train rows 1519, test rows 425)"),
        "{text}"
    );
}

#[test]
fn insurance_sorted_into_ten_silos() {
    let d = bundled()
        .load(KnownDataset::Insurance, Part::Train)
        .unwrap();
    let silos = by_sorted_target(&d, 10).unwrap();
    let sizes: Vec<usize> = silos.iter().map(Dataset::len).collect();
    assert_eq!(sizes, [vec![134; 9], vec![132]].concat());
    for w in silos.windows(2) {
        let hi = w[0].y().iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lo = w[1].y().iter().copied().fold(f64::INFINITY, f64::min);
        assert!(hi <= lo, "silos are not ordered by target");
    }
    let sizes3: Vec<usize> = by_sorted_target(&d, 3)
        .unwrap()
        .iter()
        .map(Dataset::len)
        .collect();
    assert_eq!(sizes3, vec![446, 446, 446]);
}

#[test]
fn mnist_pairs_heterogeneous_hold_only_their_digits() {
    // Digit 5 is the rarest, as in MNIST: n_m = ⌊63/7⌋ = 9.
    let d = digits([70, 71, 72, 73, 74, 63, 76, 77, 78, 79]);
    let silos = mnist_pairs(&d, &MnistPairs::default(), &mut rng(3)).unwrap();
    assert_eq!(silos.len(), 25);
    let mut seen = HashSet::new();
    for (s, (e, o)) in silos.iter().zip(mnist_pair_digits()) {
        assert_eq!(s.len(), 18);
        let ds = digits_of(s);
        assert_eq!(ds.iter().filter(|&&x| x == e).count(), 9);
        assert_eq!(ds.iter().filter(|&&x| x == o).count(), 9);
        // Labels: even = 1, odd = 0.
        for (i, &dg) in ds.iter().enumerate() {
            assert_eq!(s.y()[i], if dg % 2 == 0 { 1.0 } else { 0.0 });
        }
        // Disjoint: no image in two silos.
        for r in rows_of(s) {
            assert!(seen.insert(r), "row {r} in two silos");
        }
    }
    assert_eq!(mnist_pair_digits()[0], (0, 1));
    assert_eq!(mnist_pair_digits()[24], (8, 9));
    assert_eq!(silos[0].target().num_classes(), Some(2));
}

#[test]
fn mnist_pairs_mixing() {
    let d = digits([400; 10]);
    let n_m = 400 / 7; // 57
    // p = 1: every example from the pool, so silos hold many digits.
    let cfg = MnistPairs {
        p: 1.0,
        ..MnistPairs::default()
    };
    let silos = mnist_pairs(&d, &cfg, &mut rng(4)).unwrap();
    for s in &silos {
        assert_eq!(s.len(), 2 * n_m);
        let distinct: HashSet<usize> = digits_of(s).into_iter().collect();
        assert!(
            distinct.len() >= 6,
            "homogeneous silo with digits {distinct:?}"
        );
    }
    // p = 0.5: round(114·0.5) = 57 examples from the pair; the rest from the pool, whose
    // examples are from other digits 80% of the time.
    let cfg = MnistPairs {
        p: 0.5,
        ..MnistPairs::default()
    };
    let silos = mnist_pairs(&d, &cfg, &mut rng(5)).unwrap();
    let mut foreign = 0usize;
    for (s, (e, o)) in silos.iter().zip(mnist_pair_digits()) {
        let own = digits_of(s).iter().filter(|&&x| x == e || x == o).count();
        assert!(own >= 57, "silo ({e},{o}) has only {own} own-pair examples");
        foreign += 2 * n_m - own;
    }
    // Expected foreign examples: 25·57·0.8 = 1140; sd ≈ √(25·57·0.16) ≈ 15.
    assert!((foreign as i64 - 1140).abs() < 100, "{foreign}");
    // Disjoint sampling needs 5·n_m images per digit: scale 1 is refused, per-silo allowed.
    let full = MnistPairs {
        scale: 1.0,
        ..MnistPairs::default()
    };
    let err = mnist_pairs(&d, &full, &mut rng(6)).unwrap_err().to_string();
    assert!(
        err.contains("too few for disjoint") && err.contains("per-silo"),
        "{err}"
    );
    let per_silo = MnistPairs {
        sampling: PairSampling::PerSilo,
        ..full
    };
    let silos = mnist_pairs(&d, &per_silo, &mut rng(6)).unwrap();
    for s in &silos {
        let rows = rows_of(s);
        assert_eq!(rows.len(), 800);
        assert_eq!(
            rows.iter().collect::<HashSet<_>>().len(),
            800,
            "repeat within a silo"
        );
    }
    for bad in [-0.1, 1.1] {
        let cfg = MnistPairs {
            p: bad,
            ..MnistPairs::default()
        };
        assert!(
            mnist_pairs(&d, &cfg, &mut rng(7))
                .unwrap_err()
                .to_string()
                .contains("partition.p")
        );
    }
}

#[test]
fn mnist_pairs_at_the_papers_scale() {
    let Some(dirs) = shared() else { return };
    let d = dirs.load(KnownDataset::Mnist, Part::Train).unwrap();
    let parts = mnist_pairs_indices(&d, &MnistPairs::default(), &mut rng(8)).unwrap();
    assert!(
        parts.iter().all(|p| p.len() == 1548),
        "2·⌊5421/7⌋ = 1548 per silo"
    );
    let silos = mnist_pairs(&d, &MnistPairs::default(), &mut rng(8)).unwrap();
    let split = train_test_split(silos, 0.2, &mut rng(9)).unwrap();
    assert!(
        split
            .iter()
            .all(|s| s.train.len() == 1238 && s.test.len() == 310)
    );
    assert!(split.iter().all(|s| s.train.num_features() == 784));
}

#[test]
fn dirichlet_counts_sum_and_skew() {
    let d = digits([300; 10]);
    for alpha in [0.1, 100.0] {
        let silos = partition::dirichlet_label_skew(&d, 5, alpha, 1, &mut rng(10)).unwrap();
        assert_eq!(silos.iter().map(Dataset::len).sum::<usize>(), 3000);
        let mut per_class = [0usize; 10];
        let mut all_rows = HashSet::new();
        for s in &silos {
            assert!(!s.is_empty());
            for (c, k) in s.class_counts().unwrap().iter().enumerate() {
                per_class[c] += k;
            }
            all_rows.extend(rows_of(s));
        }
        assert_eq!(per_class, [300; 10]);
        assert_eq!(all_rows.len(), 3000);
        // Share of each class held by its largest silo: near 1 for α = 0.1, near 1/5 for α = 100.
        let top_share = (0..10)
            .map(|c| {
                silos
                    .iter()
                    .map(|s| s.class_counts().unwrap()[c])
                    .max()
                    .unwrap() as f64
                    / 300.0
            })
            .sum::<f64>()
            / 10.0;
        if alpha < 1.0 {
            assert!(top_share > 0.6, "alpha {alpha}: {top_share}");
        } else {
            assert!(top_share < 0.3, "alpha {alpha}: {top_share}");
        }
    }
    let err = partition::dirichlet_label_skew(&d, 5, 0.0, 1, &mut rng(10))
        .unwrap_err()
        .to_string();
    assert!(err.contains("partition.alpha"), "{err}");
}

#[test]
fn same_seed_same_partition() {
    let d = digits([90, 91, 92, 93, 94, 95, 96, 97, 98, 99]);
    let specs = [
        PartitionSpec::Iid { silos: 4 },
        PartitionSpec::Dirichlet {
            silos: 4,
            alpha: 0.5,
            min_size: 1,
        },
        PartitionSpec::MnistPairs {
            p: 0.3,
            scale: 1.0 / 7.0,
            sampling: PairSampling::Disjoint,
        },
        PartitionSpec::ByClass,
        PartitionSpec::SortedTarget { silos: 3 },
    ];
    for spec in &specs {
        let run = |seed| {
            let mut r = rng(seed);
            let silos = spec.apply(&d, &mut r).unwrap();
            let split = train_test_split(silos, 0.25, &mut r).unwrap();
            balance_train(split, &mut r).unwrap()
        };
        let (a, b) = (run(11), run(11));
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.train, y.train, "{spec:?}");
            assert_eq!(x.test, y.test, "{spec:?}");
        }
        if !matches!(
            spec,
            PartitionSpec::ByClass | PartitionSpec::SortedTarget { .. }
        ) {
            let c = run(12);
            assert!(
                a.iter().zip(&c).any(|(x, y)| x.train != y.train),
                "{spec:?} ignores the seed"
            );
        }
    }
    // IID sizes differ by at most one.
    let silos = PartitionSpec::Iid { silos: 4 }
        .apply(&d, &mut rng(1))
        .unwrap();
    assert_eq!(
        silos.iter().map(Dataset::len).collect::<Vec<_>>(),
        vec![237, 236, 236, 236]
    );
}
