//! The models' gradients against central finite differences, their batch kernels against the
//! per-example sum, clipping, projection, Lipschitz bounds and metrics on hand-worked values.

use std::sync::Arc;

use dpfl::data::{Dataset, Target};
use dpfl::linalg::{Matrix, norm2};
use dpfl::model::{
    GradientOracle, LinearRegression, LogisticRegression, Model, ModelSpec, Projection,
    SoftmaxRegression, mean_loss, metric_value,
};

/// Deterministic test inputs in [-a, a] (a fixed LCG: tests need no privacy-grade randomness).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, a: f64) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let u = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
        a * (2.0 * u - 1.0)
    }
    fn vec(&mut self, n: usize, a: f64) -> Vec<f64> {
        (0..n).map(|_| self.next(a)).collect()
    }
}

/// Largest |central difference − analytic gradient| over all coordinates.
fn fd_error(model: &dyn Model, w: &[f64], x: &[f64], y: f64) -> f64 {
    let mut g = vec![0.0; w.len()];
    model.add_grad(w, x, y, 1.0, &mut g);
    let h = 1e-6;
    let mut worst: f64 = 0.0;
    for k in 0..w.len() {
        let (mut wp, mut wm) = (w.to_vec(), w.to_vec());
        wp[k] += h;
        wm[k] -= h;
        let fd = (model.loss(&wp, x, y) - model.loss(&wm, x, y)) / (2.0 * h);
        worst = worst.max((fd - g[k]).abs());
    }
    worst
}

#[test]
fn logistic_gradient_matches_finite_differences() {
    let mut r = Lcg(1);
    let plain = LogisticRegression::new(6, None).unwrap();
    // Inside the clamp region the clamped model is the plain one (|z| ≤ 6·0.5·1 = 3 < 15).
    let clamped = LogisticRegression::new(6, Some(15.0)).unwrap();
    for _ in 0..50 {
        let (w, x) = (r.vec(6, 0.5), r.vec(6, 1.0));
        for y in [0.0, 1.0] {
            assert!(fd_error(&plain, &w, &x, y) < 1e-7);
            assert!(fd_error(&clamped, &w, &x, y) < 1e-7);
        }
    }
}

#[test]
fn logistic_hand_values_and_clamp() {
    let m = LogisticRegression::new(2, Some(15.0)).unwrap();
    // z = ⟨(1, 2), (0.5, 0.25)⟩ = 1: f(y=1) = ln(1 + e) − 1 = 0.31326169, ∇ = (σ(1) − 1)x.
    let (w, x) = ([1.0, 2.0], [0.5, 0.25]);
    assert!((m.loss(&w, &x, 1.0) - 0.313_261_687_518_222_8).abs() < 1e-14);
    let mut g = [0.0; 2];
    m.add_grad(&w, &x, 1.0, 1.0, &mut g);
    let s = 1.0 / (1.0 + (-1.0f64).exp()) - 1.0; // −0.26894142
    assert!((g[0] - 0.5 * s).abs() < 1e-15 && (g[1] - 0.25 * s).abs() < 1e-15);
    // z = 100 is clamped to 15: f(y=0) = ln(1 + e^15) = 15.000000305902.
    let big = [100.0, 0.0];
    assert!((m.loss(&big, &[1.0, 0.0], 0.0) - 15.000_000_305_902_32).abs() < 1e-9);
    // Unclamped, the same loss is ln(1 + e^100) = 100 (to double precision), and finite.
    let plain = LogisticRegression::new(2, None).unwrap();
    assert_eq!(plain.loss(&big, &[1.0, 0.0], 0.0), 100.0);
    assert!(plain.loss(&[1e5, 0.0], &[1.0, 0.0], 0.0).is_finite());
    assert!(LogisticRegression::new(2, Some(0.0)).is_err());
    assert!(LogisticRegression::new(2, Some(f64::NAN)).is_err());
}

#[test]
fn linear_gradient_matches_finite_differences_and_hand_value() {
    let mut r = Lcg(2);
    let m = LinearRegression::new(5);
    for _ in 0..50 {
        let (w, x, y) = (r.vec(5, 1.0), r.vec(5, 1.0), r.next(3.0));
        assert!(fd_error(&m, &w, &x, y) < 1e-7);
    }
    // f = (⟨w,x⟩ − y)²/2 = (2 − 5)²/2 = 4.5; ∇ = −3x.
    let (w, x) = ([1.0, 1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 7.0, 0.0, 0.0]);
    assert_eq!(m.loss(&w, &x, 5.0), 4.5);
    let mut g = [0.0; 5];
    m.add_grad(&w, &x, 5.0, 1.0, &mut g);
    assert_eq!(g, [-3.0, -3.0, -21.0, 0.0, 0.0]);
    assert_eq!(
        m.lipschitz(1.0),
        None,
        "squared loss is not Lipschitz on R^d"
    );
}

#[test]
fn softmax_gradient_matches_finite_differences_and_hand_value() {
    let mut r = Lcg(3);
    let m = SoftmaxRegression::new(4, 3).unwrap();
    assert_eq!(m.num_params(), 12);
    for _ in 0..50 {
        let (w, x) = (r.vec(12, 1.0), r.vec(4, 1.0));
        for y in [0.0, 1.0, 2.0] {
            assert!(fd_error(&m, &w, &x, y) < 1e-7);
        }
    }
    // W = 0: every class has probability 1/3, f = ln 3 whatever the label.
    let w = vec![0.0; 12];
    let x = [1.0, 0.0, 2.0, 0.0];
    assert!((m.loss(&w, &x, 2.0) - 3f64.ln()).abs() < 1e-15);
    // ∇ = x (p − e_y)ᵀ: row j = x_j·(1/3, 1/3, −2/3) for y = 2.
    let mut g = vec![0.0; 12];
    m.add_grad(&w, &x, 2.0, 1.0, &mut g);
    let third = 1.0 / 3.0;
    let want = [
        third,
        third,
        -2.0 * third,
        0.0,
        0.0,
        0.0,
        2.0 * third,
        2.0 * third,
        -4.0 * third,
        0.0,
        0.0,
        0.0,
    ];
    for (a, b) in g.iter().zip(want) {
        assert!((a - b).abs() < 1e-15, "{g:?}");
    }
    // ‖∇f‖ ≤ √2‖x‖ (the model's Lipschitz constant).
    assert!(norm2(&g) <= m.lipschitz(norm2(&x)).unwrap() + 1e-12);
    assert!((m.lipschitz(1.0).unwrap() - 2f64.sqrt()).abs() < 1e-15);
    assert!(SoftmaxRegression::new(4, 1).is_err());
}

fn dataset(rows: usize, cols: usize, classes: Option<usize>, seed: u64) -> Dataset {
    let mut r = Lcg(seed);
    let x = Matrix::from_vec(rows, cols, r.vec(rows * cols, 2.0)).unwrap();
    let (y, target) = match classes {
        Some(c) => (
            (0..rows).map(|i| (i % c) as f64).collect(),
            Target::Classes {
                names: (0..c).map(|k| k.to_string()).collect(),
            },
        ),
        None => (r.vec(rows, 5.0), Target::Real),
    };
    let names = (0..cols).map(|j| format!("x{j}")).collect();
    Dataset::new(x, y, target, names).unwrap()
}

#[test]
fn batch_kernels_equal_the_sum_of_per_example_gradients() {
    let cases: Vec<(Arc<dyn Model>, Dataset)> = vec![
        (
            Arc::new(LogisticRegression::new(7, Some(15.0)).unwrap()),
            dataset(40, 7, Some(2), 4),
        ),
        (Arc::new(LinearRegression::new(7)), dataset(40, 7, None, 5)),
        (
            Arc::new(SoftmaxRegression::new(7, 4).unwrap()),
            dataset(40, 7, Some(4), 6),
        ),
        (
            Arc::new(dpfl::model::HingeLoss::new(7, Some(3.0)).unwrap()),
            dataset(40, 7, Some(2), 15),
        ),
    ];
    let short: Vec<usize> = vec![0, 3, 3, 17, 39, 22, 5, 3];
    let long: Vec<usize> = (0..700).map(|i| (i * 11 + i / 5) % 40).collect();
    for ((model, data), idx) in cases.iter().flat_map(|c| [(c, &short), (c, &long)]) {
        let idx: &[usize] = idx;
        let w = Lcg(7).vec(model.num_params(), 0.3);
        let mut fast = vec![0.0; w.len()];
        model.add_batch_grad(&w, data, idx, 0.25, &mut fast);
        let mut slow = vec![0.0; w.len()];
        for &i in idx {
            let (x, y) = data.row(i);
            model.add_grad(&w, x, y, 0.25, &mut slow);
        }
        for (a, b) in fast.iter().zip(&slow) {
            assert!(
                (a - b).abs() < 1e-10 * (1.0 + b.abs()),
                "{}: {a} vs {b}",
                model.name()
            );
        }
    }
}

#[test]
fn clipping_bounds_every_per_example_gradient() {
    let data = dataset(30, 5, None, 8);
    let model: Arc<dyn Model> = Arc::new(LinearRegression::new(5));
    let w = vec![3.0; 5];
    let c = 0.5;
    let oracle = GradientOracle::new(model.clone(), Some(c)).unwrap();
    let mut g = vec![0.0; 5];
    let mut raw = vec![0.0; 5];
    for i in 0..data.len() {
        let (x, y) = data.row(i);
        oracle.clipped_grad(&w, x, y, &mut g);
        oracle.per_example_grad(&w, x, y, &mut raw);
        let n = norm2(&raw);
        if n > c {
            // Clipped onto the sphere of radius C, same direction.
            assert!((norm2(&g) - c).abs() < 1e-12);
            for (a, b) in g.iter().zip(&raw) {
                assert!((a - b * c / n).abs() < 1e-12);
            }
        } else {
            assert_eq!(g, raw, "small gradients are left alone");
        }
    }
    // The clipped mean gradient is the mean of clipped gradients, so its norm is ≤ C.
    let idx: Vec<usize> = (0..30).collect();
    let mut mean = vec![0.0; 5];
    let mut scratch = vec![0.0; 5];
    oracle.mean_grad(&w, &data, &idx, &mut mean, &mut scratch);
    assert!(norm2(&mean) <= c + 1e-12);
    assert!(
        norm2(&mean) > 0.1,
        "the test data do produce large gradients"
    );
    // Bound reported to the calibration: min(C, model's Lipschitz constant).
    let soft: Arc<dyn Model> = Arc::new(SoftmaxRegression::new(5, 3).unwrap());
    let o = GradientOracle::new(soft, Some(10.0)).unwrap();
    assert!((o.gradient_bound(1.0).unwrap() - 2f64.sqrt()).abs() < 1e-15);
    assert_eq!(oracle.gradient_bound(1.0), Some(0.5));
    assert!(GradientOracle::new(model.clone(), Some(0.0)).is_err());
    assert!(GradientOracle::new(model, Some(f64::INFINITY)).is_err());
}

#[test]
fn projection_onto_the_l2_ball() {
    let p = Projection::L2Ball { radius: 2.0 };
    let mut w = vec![3.0, 4.0];
    p.apply(&mut w);
    assert!((w[0] - 1.2).abs() < 1e-15 && (w[1] - 1.6).abs() < 1e-15);
    let mut inside = vec![0.3, -0.4];
    p.apply(&mut inside);
    assert_eq!(inside, vec![0.3, -0.4]);
    assert_eq!(p.diameter(), 4.0);
    assert_eq!(Projection::None.diameter(), f64::INFINITY);
}

#[test]
fn metrics_on_hand_examples() {
    // Error rate: logistic w = (1, 0) predicts class 1 iff x_0 > 0.
    let x = Matrix::from_vec(4, 2, vec![1.0, 0.0, -1.0, 0.0, 2.0, 5.0, -3.0, 1.0]).unwrap();
    let names = vec!["a".into(), "b".into()];
    let t = Target::Classes {
        names: vec!["no".into(), "yes".into()],
    };
    let d = Dataset::new(x, vec![1.0, 0.0, 0.0, 0.0], t, names).unwrap();
    let m = ModelSpec::Logistic { logit_clip: None }
        .build(2, Some(2))
        .unwrap();
    assert_eq!(metric_value(m.as_ref(), &[1.0, 0.0], &d), 0.25);
    // Mean loss at w = 0 is ln 2 for every row.
    assert!((mean_loss(m.as_ref(), &[0.0, 0.0], &d) - 2f64.ln()).abs() < 1e-15);
    // RMSE of linear regression: residuals 1 and −3 → √5.
    let x = Matrix::from_vec(2, 1, vec![1.0, 1.0]).unwrap();
    let d = Dataset::new(x, vec![1.0, 5.0], Target::Real, vec!["a".into()]).unwrap();
    let lin = LinearRegression::new(1);
    assert!((metric_value(&lin, &[2.0], &d) - 5f64.sqrt()).abs() < 1e-15);
    // Logistic needs two classes.
    assert!(
        ModelSpec::Logistic { logit_clip: None }
            .build(2, Some(3))
            .is_err()
    );
}

#[test]
fn fused_clipped_kernels_equal_clipping_each_gradient() {
    use dpfl::model::HingeLoss;
    let cases: Vec<(Arc<dyn Model>, Dataset)> = vec![
        // Logit clip 0.5 so that some rows saturate.
        (
            Arc::new(LogisticRegression::new(7, Some(0.5)).unwrap()),
            dataset(40, 7, Some(2), 9),
        ),
        (Arc::new(LinearRegression::new(7)), dataset(40, 7, None, 10)),
        (
            Arc::new(SoftmaxRegression::new(7, 4).unwrap()),
            dataset(40, 7, Some(4), 11),
        ),
        (
            Arc::new(HingeLoss::new(7, None).unwrap()),
            dataset(40, 7, Some(2), 12),
        ),
        (
            Arc::new(HingeLoss::new(7, Some(3.0)).unwrap()),
            dataset(40, 7, Some(2), 13),
        ),
    ];
    // A short batch (row-by-row kernel) and a long one with repeats (gathered kernel, K·p ≥ 4096).
    let short: Vec<usize> = vec![0, 3, 3, 17, 39, 22, 5, 3, 11, 12, 13, 30];
    let long: Vec<usize> = (0..700).map(|i| (i * 7 + i / 3) % 40).collect();
    for ((model, data), idx) in cases.iter().flat_map(|c| [(c, &short), (c, &long)]) {
        let idx: &[usize] = idx;
        let p = model.num_params();
        let w = Lcg(14).vec(p, 0.8);
        for clip in [0.05, 0.7, 1e6] {
            let mut fused = vec![0.0; p];
            let mut scratch = vec![0.0; p];
            model.add_clipped_batch_grad(&w, data, idx, clip, 0.5, &mut fused, &mut scratch);
            let mut want = vec![0.0; p];
            let mut g = vec![0.0; p];
            let mut clipped_some = false;
            for &i in idx {
                let (x, y) = data.row(i);
                g.iter_mut().for_each(|v| *v = 0.0);
                model.add_grad(&w, x, y, 1.0, &mut g);
                let n = norm2(&g);
                let f = if n > clip { clip / n } else { 1.0 };
                clipped_some |= f < 1.0;
                for (o, v) in want.iter_mut().zip(&g) {
                    *o += 0.5 * f * v;
                }
            }
            if clip == 0.05 {
                assert!(
                    clipped_some,
                    "{}: the small threshold must bite",
                    model.name()
                );
            }
            for (a, b) in fused.iter().zip(&want) {
                assert!(
                    (a - b).abs() < 1e-10 * (1.0 + b.abs()),
                    "{} clip {clip}: {a} vs {b}",
                    model.name()
                );
            }
        }
    }
}
