//! SoteriaFL's models (issue 13 item 2): the non-convex-regularised logistic regression and the
//! one-hidden-layer network. Gradients against central finite differences and hand values;
//! the batched (ghost-clipped) kernels against the naive per-example computation; the
//! network's size, seeded initialisation and config errors.

use std::sync::Arc;

use dpfl::data::{Dataset, Target};
use dpfl::linalg::{Matrix, norm2};
use dpfl::model::{
    GradientOracle, Mlp, Model, ModelSpec, NonconvexLogistic, clipped_batch_grad_per_example,
};

/// Deterministic test inputs in [-a, a].
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

fn dataset(rows: usize, cols: usize, classes: usize, seed: u64) -> Dataset {
    let mut r = Lcg(seed);
    let x = Matrix::from_vec(rows, cols, r.vec(rows * cols, 2.0)).unwrap();
    let y = (0..rows)
        .map(|i| ((i * 7 + i / 3) % classes) as f64)
        .collect();
    let target = Target::Classes {
        names: (0..classes).map(|k| k.to_string()).collect(),
    };
    let names = (0..cols).map(|j| format!("x{j}")).collect();
    Dataset::new(x, y, target, names).unwrap()
}

/// Largest |central difference − analytic gradient| / (1 + |gradient|) over all coordinates.
fn fd_error(model: &dyn Model, w: &[f64], x: &[f64], y: f64) -> f64 {
    let mut g = vec![0.0; w.len()];
    model.add_grad(w, x, y, 1.0, &mut g);
    let h = 1e-5;
    let mut worst: f64 = 0.0;
    for k in 0..w.len() {
        let (mut wp, mut wm) = (w.to_vec(), w.to_vec());
        wp[k] += h;
        wm[k] -= h;
        let fd = (model.loss(&wp, x, y) - model.loss(&wm, x, y)) / (2.0 * h);
        worst = worst.max((fd - g[k]).abs() / (1.0 + g[k].abs()));
    }
    worst
}

fn assert_close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len());
    for (j, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "{what}[{j}]: {x} vs {y}"
        );
    }
}

#[test]
fn nonconvex_logistic_hand_values_and_finite_differences() {
    let m = NonconvexLogistic::new(2, 0.2).unwrap();
    // w = (1, 0), x = (1, 2), y = 1: z = 1, loss = ln(1 + e) − 1 + 0.2·(1/2);
    // ∇ = (σ(1) − 1)·x + 0.2·(2·1/(1 + 1)², 0) = −0.268941421·(1, 2) + (0.1, 0).
    let (w, x) = ([1.0, 0.0], [1.0, 2.0]);
    assert!((m.loss(&w, &x, 1.0) - 0.413_261_687_518_222_8).abs() < 1e-15);
    let mut g = [0.0; 2];
    m.add_grad(&w, &x, 1.0, 1.0, &mut g);
    assert!((g[0] + 0.168_941_421_369_995_1).abs() < 1e-15, "{g:?}");
    assert!((g[1] + 0.537_882_842_739_990_2).abs() < 1e-15, "{g:?}");
    let mut r = Lcg(3);
    let m = NonconvexLogistic::new(6, 0.7).unwrap();
    for _ in 0..30 {
        let (w, x) = (r.vec(6, 2.0), r.vec(6, 1.0));
        for y in [0.0, 1.0] {
            assert!(fd_error(&m, &w, &x, y) < 1e-8);
        }
    }
    // ‖∇‖ ≤ ‖x‖ + λ√d·9/(8√3), attained by the regulariser at w_j = 1/√3.
    assert!(
        (m.lipschitz(1.0).unwrap() - (1.0 + 0.7 * 6f64.sqrt() * 0.649_519_052_838_329)).abs()
            < 1e-12
    );
    assert!(NonconvexLogistic::new(3, -1.0).is_err());
    assert!(NonconvexLogistic::new(3, f64::NAN).is_err());
}

/// The model's clipped and unclipped batch kernels against the per-example reference, at the
/// given clips and at the median per-example norm (so that the clip binds for about half the
/// rows).
fn check_batch_kernels(model: &dyn Model, data: &Dataset, w: &[f64], idx: &[usize], clips: &[f64]) {
    let p = model.num_params();
    let mut fast = vec![0.0; p];
    model.add_batch_grad(w, data, idx, 0.25, &mut fast);
    let mut slow = vec![0.0; p];
    for &i in idx {
        let (x, y) = data.row(i);
        model.add_grad(w, x, y, 0.25, &mut slow);
    }
    assert_close(&fast, &slow, 1e-11, "unclipped batch");
    let mut norms: Vec<f64> = idx
        .iter()
        .map(|&i| {
            let mut g = vec![0.0; p];
            let (x, y) = data.row(i);
            model.add_grad(w, x, y, 1.0, &mut g);
            norm2(&g)
        })
        .collect();
    norms.sort_by(f64::total_cmp);
    let median = norms[norms.len() / 2];
    assert!(
        norms[0] < median && median < norms[norms.len() - 1],
        "{norms:?}"
    );
    for &clip in clips.iter().chain([median].iter()) {
        let (mut fast, mut naive, mut scratch) = (vec![0.0; p], vec![0.0; p], vec![0.0; p]);
        model.add_clipped_batch_grad(w, data, idx, clip, 0.5, &mut fast, &mut scratch);
        clipped_batch_grad_per_example(model, w, data, idx, clip, 0.5, &mut naive, &mut scratch);
        assert_close(&fast, &naive, 1e-11, &format!("clip {clip}"));
    }
}

#[test]
fn nonconvex_logistic_batches_clip_like_the_per_example_path() {
    let m = NonconvexLogistic::new(5, 0.2).unwrap();
    let data = dataset(40, 5, 2, 8);
    let idx: Vec<usize> = vec![0, 3, 3, 17, 39, 22, 5, 3, 11, 12, 13, 30];
    let w = Lcg(9).vec(5, 1.0);
    check_batch_kernels(&m, &data, &w, &idx, &[0.05, 1e6]);
    // A row whose data gradient nearly cancels the regulariser (a·x ≈ −r, ‖a x + r‖ ≈ 1e-7
    // against components ≈ 0.1): the expansion a²‖x‖² + 2a⟨x, r⟩ + ‖r‖² keeps about two
    // digits of ‖a x + r‖², the direct norm all of them. λ = 0.2, w = (1, 1): r = (0.1, 0.1);
    // x = (t, t), y = 1: a·t + 0.1 = 0.1 − t/(1 + e^{2t}), zero near t ≈ 1.5.
    let w = [1.0, 1.0];
    let m = NonconvexLogistic::new(2, 0.2).unwrap();
    let v = |t: f64| 0.1 - t / (1.0 + (2.0 * t).exp());
    let (mut lo, mut hi) = (0.64f64, 20.0f64);
    for _ in 0..200 {
        let t = 0.5 * (lo + hi);
        if v(t) < 0.0 { lo = t } else { hi = t }
    }
    let t = hi + 1e-6;
    let x = Matrix::from_vec(1, 2, vec![t, t]).unwrap();
    let target = Target::Classes {
        names: vec!["0".into(), "1".into()],
    };
    let data = Dataset::new(x, vec![1.0], target, vec!["a".into(), "b".into()]).unwrap();
    let mut g = vec![0.0; 2];
    m.add_grad(&w, &[t, t], 1.0, 1.0, &mut g);
    let n = norm2(&g);
    assert!(n > 1e-9 && n < 1e-5, "regime: ‖g‖ = {n}");
    let clip = 0.5 * n;
    let (mut fast, mut naive, mut scratch) = (vec![0.0; 2], vec![0.0; 2], vec![0.0; 2]);
    m.add_clipped_batch_grad(&w, &data, &[0], clip, 1.0, &mut fast, &mut scratch);
    clipped_batch_grad_per_example(&m, &w, &data, &[0], clip, 1.0, &mut naive, &mut scratch);
    let diff = norm2(&[fast[0] - naive[0], fast[1] - naive[1]]);
    assert!(diff <= 1e-6 * clip, "cancelling row: {fast:?} vs {naive:?}");
}

#[test]
fn mlp_has_the_papers_50890_parameters() {
    assert_eq!(Mlp::param_count(784, 64, 10), Some(50_890));
    let m = Mlp::new(784, 64, 10, 0, 0.2).unwrap();
    assert_eq!(m.num_params(), 64 * 784 + 64 + 10 * 64 + 10);
    assert_eq!(m.initial_params().len(), 50_890);
    assert!(Mlp::new(784, 0, 10, 0, 0.2).is_err());
    assert!(Mlp::new(784, 64, 1, 0, 0.2).is_err());
    assert!(Mlp::new(784, 64, 10, 0, -1.0).is_err());
}

#[test]
fn mlp_gradient_matches_finite_differences() {
    let m = Mlp::new(5, 4, 3, 7, 0.8).unwrap();
    let w = m.initial_params();
    let mut r = Lcg(5);
    for i in 0..20 {
        let x = r.vec(5, 1.5);
        let y = (i % 3) as f64;
        let e = fd_error(&m, &w, &x, y);
        assert!(e < 1e-8, "row {i}: {e}");
    }
    // A hand value: all weights 0 → a = σ(0) = 1/2, z = 0, loss = ln C, ∇c₂ = 1/C − e_y.
    let zero = vec![0.0; m.num_params()];
    assert!((m.loss(&zero, &[1.0; 5], 2.0) - 3f64.ln()).abs() < 1e-15);
    let mut g = vec![0.0; m.num_params()];
    m.add_grad(&zero, &[1.0; 5], 2.0, 1.0, &mut g);
    let c2 = &g[g.len() - 3..];
    assert_close(c2, &[1.0 / 3.0, 1.0 / 3.0, -2.0 / 3.0], 1e-15, "c2");
    // ∇W₂ = δ₂aᵀ with a = 1/2; ∇W₁ = 0 since W₂ = 0.
    assert!((g[5 * 4 + 4] - 1.0 / 6.0).abs() < 1e-15);
    assert!(g[..24].iter().all(|&v| v == 0.0));
}

#[test]
fn mlp_initialisation_is_seeded_and_reproducible() {
    let a = Mlp::new(30, 8, 4, 11, 0.2).unwrap().initial_params();
    let b = Mlp::new(30, 8, 4, 11, 0.2).unwrap().initial_params();
    let c = Mlp::new(30, 8, 4, 12, 0.2).unwrap().initial_params();
    assert_eq!(a, b);
    assert_ne!(a, c);
    // 50,890 N(0, 0.2²) draws: mean within 5 sd (0.2/√n ≈ 0.0009), sd within 2%.
    let w = Mlp::new(784, 64, 10, 0, 0.2).unwrap().initial_params();
    let n = w.len() as f64;
    let mean = w.iter().sum::<f64>() / n;
    let sd = (w.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
    assert!(mean.abs() < 0.0045, "{mean}");
    assert!((sd - 0.2).abs() < 0.004, "{sd}");
}

#[test]
fn mlp_ghost_clipping_equals_the_naive_per_example_path() {
    // Small shape, 300 rows with repeats: two chunks (≤ 256 rows each).
    let m = Mlp::new(6, 5, 4, 3, 0.7).unwrap();
    let data = dataset(50, 6, 4, 21);
    let w = m.initial_params();
    let idx: Vec<usize> = (0..300).map(|i| (i * 13 + i / 7) % 50).collect();
    check_batch_kernels(&m, &data, &w, &idx, &[0.02, 1e6]);
    // The MNIST shape at batch 64.
    let m = Mlp::new(784, 64, 10, 0, 0.05).unwrap();
    let data = dataset(100, 784, 10, 22);
    let w = m.initial_params();
    let idx: Vec<usize> = (0..64).map(|i| (i * 37) % 100).collect();
    check_batch_kernels(&m, &data, &w, &idx, &[0.5, 1e6]);
    // Through the oracle: every gradient bounded by the clip, which is the bound reported.
    let oracle = GradientOracle::new(Arc::new(m), Some(1.0)).unwrap();
    assert_eq!(oracle.gradient_bound(100.0), Some(1.0));
    let (mut g, mut s) = (vec![0.0; 50_890], vec![0.0; 50_890]);
    for i in 0..10 {
        oracle.mean_grad(&w, &data, &[i], &mut g, &mut s);
        assert!(norm2(&g) <= 1.0 + 1e-12);
    }
}

#[test]
fn the_model_registry_builds_both_models_and_names_bad_fields() {
    let spec: ModelSpec = toml::from_str("kind = \"nonconvex-logistic\"\nlambda = 0.2").unwrap();
    let m = spec.build(124, Some(2)).unwrap();
    assert_eq!((m.name(), m.num_params()), ("nonconvex-logistic", 124));
    assert!(spec.build(124, Some(3)).is_err());
    let spec: ModelSpec = toml::from_str("kind = \"mlp\"\ninputs = 784").unwrap();
    let m = spec.build(784, Some(10)).unwrap();
    assert_eq!((m.name(), m.num_params()), ("mlp", 50_890));
    let err = spec.build(785, Some(10)).unwrap_err().to_string();
    assert!(err.contains("model.inputs") && err.contains("785"), "{err}");
    let err = toml::from_str::<ModelSpec>("kind = \"mlp\"\nhidden = 0")
        .unwrap()
        .build(4, Some(2))
        .unwrap_err()
        .to_string();
    assert!(err.contains("model.hidden"), "{err}");
    assert!(toml::from_str::<ModelSpec>("kind = \"mlp\"\nwidth = 3").is_err());
    assert!(toml::from_str::<ModelSpec>("kind = \"nonconvex-logistic\"").is_err());
    // The initial point is the seeded draw.
    let a: ModelSpec = toml::from_str("kind = \"mlp\"\ninit_seed = 5").unwrap();
    let w = a.build(4, Some(3)).unwrap().initial_params();
    assert_eq!(w, Mlp::new(4, 64, 3, 5, 0.2).unwrap().initial_params());
}
