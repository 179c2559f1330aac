use super::*;
use crate::data::Target;

fn data(n: usize, p: usize, c: usize) -> Dataset {
    let x: Vec<f64> = (0..n * p)
        .map(|i| ((i * 37 % 17) as f64 - 8.0) / 8.0)
        .collect();
    let y = (0..n).map(|i| (i % c) as f64).collect();
    let names = (0..p).map(|j| format!("x{j}")).collect();
    let target = Target::Classes {
        names: (0..c).map(|k| k.to_string()).collect(),
    };
    Dataset::new(
        crate::linalg::Matrix::from_vec(n, p, x).unwrap(),
        y,
        target,
        names,
    )
    .unwrap()
}

#[test]
fn paper_sizes_and_seeded_pytorch_init() {
    let m = DeepMlp::new(784, &[300, 300], 10, Activation::Relu, 1).unwrap();
    assert_eq!(m.num_params(), 328_810);
    let c = DeepMlp::new(3072, &[600, 600], 10, Activation::Relu, 1).unwrap();
    assert_eq!(c.num_params(), 2_210_410);
    let w = m.initial_params();
    assert_eq!(w, m.initial_params(), "seeded");
    // Layer 0 within ±1/√784 = ±1/28, layer 1 within ±1/√300.
    assert!(w[..300 * 785].iter().all(|v| v.abs() <= 1.0 / 28.0));
    assert!(w[..300 * 785].iter().any(|v| v.abs() > 0.03));
    let l1 = &w[300 * 785..300 * 785 + 300 * 301];
    assert!(l1.iter().all(|v| v.abs() <= 1.0 / 300f64.sqrt()));
    assert!(DeepMlp::new(4, &[0], 3, Activation::Relu, 0).is_err());
}

#[test]
fn batch_gradient_matches_finite_differences_and_the_per_example_sum() {
    for act in [Activation::Relu, Activation::Sigmoid] {
        let m = DeepMlp::new(3, &[4, 5], 3, act, 7)
            .unwrap()
            .with_precision(Precision::F64);
        let d = data(6, 3, 3);
        let w = m.initial_params();
        let idx: Vec<usize> = (0..6).collect();
        let mut g = vec![0.0; m.num_params()];
        m.add_batch_grad(&w, &d, &idx, 0.5, &mut g);
        let mut each = vec![0.0; m.num_params()];
        for &i in &idx {
            let (x, y) = d.row(i);
            m.add_grad(&w, x, y, 0.5, &mut each);
        }
        let f = |w: &[f64]| -> f64 {
            idx.iter()
                .map(|&i| {
                    let (x, y) = d.row(i);
                    0.5 * m.loss(w, x, y)
                })
                .sum()
        };
        for j in 0..m.num_params() {
            assert!((g[j] - each[j]).abs() < 1e-12, "{act:?} {j}");
            let (mut a, mut b) = (w.clone(), w.clone());
            a[j] += 1e-6;
            b[j] -= 1e-6;
            let fd = (f(&a) - f(&b)) / 2e-6;
            assert!(
                (fd - g[j]).abs() < 1e-5,
                "{act:?} param {j}: {fd} vs {}",
                g[j]
            );
        }
    }
}

/// The f32 network against the f64 one on the paper's widths (a 600-row batch: three
/// chunks): gradient, loss and error agree to f32's precision, and the f32 gradient is
/// added to what `out` held (not written over it).
#[test]
fn f32_arithmetic_agrees_with_f64_to_single_precision() {
    for act in [Activation::Relu, Activation::Sigmoid] {
        let wide = DeepMlp::new(40, &[30, 20], 5, act, 3)
            .unwrap()
            .with_precision(Precision::F64);
        let narrow = wide.clone().with_precision(Precision::F32);
        assert_eq!(
            DeepMlp::new(1, &[1], 2, act, 0).unwrap().precision(),
            Precision::F32
        );
        let d = data(600, 40, 5);
        let w = wide.initial_params();
        let idx: Vec<usize> = (0..600).rev().collect();
        let mut g64 = vec![0.0; wide.num_params()];
        wide.add_batch_grad(&w, &d, &idx, 1.0 / 600.0, &mut g64);
        let mut g32 = vec![1.0; wide.num_params()];
        narrow.add_batch_grad(&w, &d, &idx, 1.0 / 600.0, &mut g32);
        let scale = g64.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        assert!(scale > 1e-3, "{act:?}: a gradient to compare");
        let worst = g64
            .iter()
            .zip(&g32)
            .map(|(a, b)| (a - (b - 1.0)).abs())
            .fold(0.0, f64::max);
        assert!(worst <= 1e-5 * scale, "{act:?}: {worst} against {scale}");
        // A wrong conversion (e.g. f32 weights left at zero) is far off.
        assert!(g32.iter().any(|&v| (v - 1.0).abs() > 1e-4 * scale));
        let (l64, e64) = wide.evaluate(&w, &d);
        let (l32, e32) = narrow.evaluate(&w, &d);
        assert!((l64 - l32).abs() <= 1e-5 * l64, "{l64} {l32}");
        assert!((e64 - e32).abs() <= 2.0 / 600.0, "{e64} {e32}");
        let (x, y) = d.row(17);
        assert!((wide.loss(&w, x, y) - narrow.loss(&w, x, y)).abs() < 1e-5);
    }
}

#[test]
fn batched_evaluation_matches_the_per_row_loss_and_error() {
    // 600 rows: two full chunks of 256 and a partial one. In f32 the one-row products
    // round differently from the 256-row ones.
    for (precision, tol, err_tol) in [
        (Precision::F64, 1e-12, 0.0),
        (Precision::F32, 1e-6, 2.0 / 600.0),
    ] {
        let m = DeepMlp::new(20, &[30, 30], 5, Activation::Relu, 3)
            .unwrap()
            .with_precision(precision);
        let d = data(600, 20, 5);
        let w = m.initial_params();
        let (loss, err) = m.evaluate(&w, &d);
        let want_loss = crate::model::mean_loss(&m, &w, &d);
        let want_err = crate::model::metric_value(&m, &w, &d);
        assert!(
            (loss - want_loss).abs() <= tol * want_loss.abs(),
            "{precision:?}: {loss} vs {want_loss}"
        );
        assert!(
            (err - want_err).abs() <= err_tol,
            "{precision:?}: {err} vs {want_err}"
        );
        assert!(err > 0.0 && err < 1.0);
        assert!(m.evaluate(&w, &d.subset(&[])).0.is_nan());
    }
}

#[test]
fn predicts_the_largest_logit_and_checks_data() {
    // One layer of width 2 on 1 input: with W₀ = [[1], [0]], b₀ = 0, ReLU, then the
    // identity-like W₁ = I, b₁ = 0, x = 3 gives logits (3, 0): class 0, loss ln(1 + e^−3).
    for (precision, tol) in [(Precision::F64, 1e-12), (Precision::F32, 1e-7)] {
        let m = DeepMlp::new(1, &[2], 2, Activation::Relu, 0)
            .unwrap()
            .with_precision(precision);
        let w = vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0];
        assert_eq!(m.num_params(), 10);
        assert_eq!(m.predict(&w, &[3.0]), 0.0);
        assert!((m.loss(&w, &[3.0], 0.0) - (1.0 + (-3.0f64).exp()).ln()).abs() < tol);
    }
    let m = DeepMlp::new(1, &[2], 2, Activation::Relu, 0).unwrap();
    assert!(m.check_data(&data(2, 1, 3)).is_err());
    assert!(m.check_data(&data(2, 1, 2)).is_ok());
}
