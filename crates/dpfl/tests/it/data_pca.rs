//! PCA: recovers the axes of an anisotropic Gaussian, orders the explained variance, is
//! independent of the thread count, and on MNIST keeps the variance share known for 50 axes.

use crate::data_common;

use data_common::shared;
use dpfl::data::pca::Pca;
use dpfl::data::registry::{KnownDataset, Part};
use dpfl::linalg::{Matrix, dot};
use dpfl_privacy::mechanism::{GaussianMechanism, VectorMechanism};
use dpfl_privacy::rng::{DpRng, Purpose};

/// n rows of x = R·diag(stds)·z with z ~ N(0, I₃) and R the rotation by 30° about the
/// third axis, shifted by `shift`. Returns the data and the rotated axes (rows).
fn anisotropic(n: usize, stds: [f64; 3], shift: [f64; 3]) -> (Matrix, [[f64; 3]; 3]) {
    let noise = GaussianMechanism::new(1.0, 1.0).unwrap();
    let mut rng = DpRng::from_seed(21, Purpose::Data, 0);
    let (c, s) = (30f64.to_radians().cos(), 30f64.to_radians().sin());
    let axes = [[c, s, 0.0], [-s, c, 0.0], [0.0, 0.0, 1.0]];
    let mut data = Vec::with_capacity(3 * n);
    let mut z = [0.0; 3];
    for _ in 0..n {
        z.fill(0.0);
        noise.privatize(&mut z, &mut rng);
        for j in 0..3 {
            data.push(shift[j] + (0..3).map(|a| axes[a][j] * stds[a] * z[a]).sum::<f64>());
        }
    }
    (Matrix::from_vec(n, 3, data).unwrap(), axes)
}

#[test]
fn recovers_the_principal_axes_in_order() {
    let stds = [5.0, 2.0, 0.5];
    let (x, axes) = anisotropic(20_000, stds, [10.0, -3.0, 7.0]);
    let pca = Pca::fit(&x, 3).unwrap();
    for (a, axis) in axes.iter().enumerate() {
        let cos = dot(pca.components().row(a), axis).abs();
        assert!(cos > 0.999, "axis {a}: |cos| = {cos}");
        // Unit norm.
        assert!((dot(pca.components().row(a), pca.components().row(a)) - 1.0).abs() < 1e-12);
    }
    let ev = pca.explained_variance();
    assert!(ev.windows(2).all(|w| w[0] >= w[1]), "{ev:?}");
    // Variances 25, 4, 0.25 within 5% (sampling error of a variance at n = 20 000 is ~1%).
    for (v, s) in ev.iter().zip(stds) {
        assert!((v / (s * s) - 1.0).abs() < 0.05, "{ev:?}");
    }
    let ratio: f64 = pca.explained_variance_ratio().iter().sum();
    assert!((ratio - 1.0).abs() < 1e-12, "all axes kept: {ratio}");
    assert!((pca.mean()[0] - 10.0).abs() < 0.1);

    // Projections are centred, with variance equal to the eigenvalue.
    let k2 = Pca::fit(&x, 2).unwrap();
    assert_eq!(k2.explained_variance(), &ev[..2]);
    let y = k2.transform(&x).unwrap();
    assert_eq!((y.rows(), y.cols()), (20_000, 2));
    for (j, &ev_j) in ev.iter().enumerate().take(2) {
        let col: Vec<f64> = (0..y.rows()).map(|i| y.row(i)[j]).collect();
        let m = col.iter().sum::<f64>() / col.len() as f64;
        let v = col.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / (col.len() - 1) as f64;
        assert!(m.abs() < 1e-9, "mean {m}");
        assert!((v / ev_j - 1.0).abs() < 1e-9, "var {v} vs {ev_j}");
    }
    assert!(
        Pca::fit(&x, 4)
            .unwrap_err()
            .to_string()
            .contains("pca.components")
    );
    assert!(Pca::fit(&x, 0).is_err());
}

#[test]
fn same_result_with_one_and_two_threads() {
    // More rows than one block so that the blocked Gram sum matters.
    let (x, _) = anisotropic(9_000, [3.0, 1.0, 0.2], [0.5, 0.5, 0.5]);
    let fit = |threads| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                let p = Pca::fit(&x, 2).unwrap();
                let y = p.transform(&x).unwrap();
                (p, y)
            })
    };
    let (a, ya) = fit(1);
    let (b, yb) = fit(2);
    assert_eq!(a, b);
    assert_eq!(ya, yb);
}

#[test]
fn mnist_fifty_components() {
    let Some(dirs) = shared() else { return };
    let d = dirs.load(KnownDataset::Mnist, Part::Test).unwrap();
    let pca = Pca::fit(d.x(), 50).unwrap();
    // 50 axes keep about 82–83% of MNIST's pixel variance (a well-known figure for the
    // training set; the 10 000 test images behave alike).
    let kept: f64 = pca.explained_variance_ratio().iter().sum();
    assert!((0.79..0.87).contains(&kept), "kept {kept}");
    let reduced = pca.transform_dataset(d).unwrap();
    assert_eq!(reduced.num_features(), 50);
    assert_eq!(reduced.feature_names()[0], "pc1");
    assert_eq!(reduced.len(), 10_000);
}

/// The paper's preprocessing at full size: PCA fitted on all 60 000 training images.
/// Slow in the test profile; run with `cargo test --release -- --ignored`.
#[test]
#[ignore]
fn mnist_training_set_pca_full() {
    let Some(dirs) = shared() else { return };
    let d = dirs.load(KnownDataset::Mnist, Part::Train).unwrap();
    let pca = Pca::fit(d.x(), 50).unwrap();
    let kept: f64 = pca.explained_variance_ratio().iter().sum();
    assert!((0.80..0.86).contains(&kept), "kept {kept}");
    let reduced = pca.transform_dataset(d).unwrap();
    assert_eq!((reduced.len(), reduced.num_features()), (60_000, 50));
}
