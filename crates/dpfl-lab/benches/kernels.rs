//! Kernel and round benchmarks (issue 2), reported in BENCHMARKS.md.
//!
//! * `batch_grad/*`: the mean gradient over a batch of K rows, the silo's inner loop, for
//!   binary logistic regression (d = 50, K = 443: the paper's MNIST shape) and softmax
//!   regression (p = 50 features, C = 10 classes, K = 443), both with per-example clipping (the
//!   path every private silo takes) and without (the model's batch kernel).
//! * `reference/*`: the same arithmetic shape done by faer's matrix–vector kernels (two
//!   products with the K×d batch matrix), the machine's achievable rate for this shape, and a
//!   large matrix product for its compute peak.
//! * `mlp/*`: SoteriaFL's network (784 → 64 sigmoid → 10 softmax, 50,890 parameters) at
//!   batch 64: the clipped batch gradient by ghost clipping (per-layer norms of rank-one
//!   gradients, two matrix products), the naive path (each per-example gradient materialised,
//!   its norm taken, added), and the unclipped batch gradient (the non-private step's cost).
//!   Throughput in flops of the batched forward/backward, 4Kph + 6KhC.
//! * `round/*`: one full simulated round of ISRL-DP MB-SGD with 25 silos, d = 50, K = 443
//!   (broadcast, 25 silo halves in parallel: sampling, clipped gradients, Gaussian noise;
//!   server average and step).
//! * `scaling/silos=N/d=D`: one simulated round of the scaling table's federation
//!   (`examples/scaling/federation.rs`: N silos of 8 rows, logistic, private MB-SGD) at
//!   N = 10 … 10⁴ (d = 100) and d = 10² … 10⁶ (N = 10); the example measures its memory. Each
//!   point builds its federation only when the filter selects it (d = 10⁶ holds 720 MB of data).
//!
//! Run: `cargo bench -p dpfl-lab --bench kernels`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};

use dpfl::data::{Dataset, Target};
use dpfl::linalg::Matrix;
use dpfl::model::{
    GradientOracle, LogisticRegression, Mlp, Model, SoftmaxRegression,
    clipped_batch_grad_per_example,
};
use dpfl::sim::Simulator;
use dpfl_lab::experiment::{ExperimentSpec, build_context, prepare_trial};
use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

#[path = "../examples/scaling/federation.rs"]
mod federation;

const K: usize = 443;
const D: usize = 50;

fn data(rows: usize, cols: usize, classes: usize) -> Dataset {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let x = Matrix::from_vec(rows, cols, (0..rows * cols).map(|_| next()).collect()).unwrap();
    let y = (0..rows).map(|i| (i % classes) as f64).collect();
    let names = (0..cols).map(|j| format!("x{j}")).collect();
    let target = Target::Classes {
        names: (0..classes).map(|c| c.to_string()).collect(),
    };
    Dataset::new(x, y, target, names).unwrap()
}

fn batch_grad(c: &mut Criterion) {
    // Rows drawn with replacement in the real silo; a fixed scattered index set here.
    let rows = 2400;
    let idx: Vec<usize> = (0..K).map(|i| (i * 1031 + 7) % rows).collect();
    let cases: Vec<(&str, Arc<dyn Model>, Dataset, f64)> = vec![
        (
            "logistic_d50_k443",
            Arc::new(LogisticRegression::new(D, Some(15.0)).unwrap()),
            data(rows, D, 2),
            // dot + axpy per row: 4d flops.
            (4 * D * K) as f64,
        ),
        (
            "softmax_p50_c10_k443",
            Arc::new(SoftmaxRegression::new(D, 10).unwrap()),
            data(rows, D, 10),
            // logits (2pC) + outer-product update (2pC) per row.
            (4 * D * 10 * K) as f64,
        ),
    ];
    let mut g = c.benchmark_group("batch_grad");
    for (name, model, data, flops) in cases {
        let p = model.num_params();
        let w: Vec<f64> = (0..p).map(|j| 0.01 * (j % 7) as f64).collect();
        let (mut out, mut scratch) = (vec![0.0; p], vec![0.0; p]);
        g.throughput(Throughput::Elements(flops as u64));
        let plain = GradientOracle::new(model.clone(), None).unwrap();
        g.bench_function(format!("{name}/unclipped"), |b| {
            b.iter(|| {
                plain.mean_grad(black_box(&w), &data, &idx, &mut out, &mut scratch);
                black_box(&out);
            })
        });
        let clipped = GradientOracle::new(model.clone(), Some(1.0)).unwrap();
        g.bench_function(format!("{name}/clipped"), |b| {
            b.iter(|| {
                clipped.mean_grad(black_box(&w), &data, &idx, &mut out, &mut scratch);
                black_box(&out);
            })
        });
    }
    g.finish();
}

fn reference(c: &mut Criterion) {
    let mut g = c.benchmark_group("reference");
    // X_B w then X_Bᵀ r: the logistic gradient's arithmetic as two faer GEMVs (4dK flops).
    let x = Mat::<f64>::from_fn(K, D, |i, j| ((i * 31 + j * 17) % 13) as f64 / 13.0 - 0.5);
    let w = Mat::<f64>::from_fn(D, 1, |j, _| 0.01 * j as f64);
    let mut z = Mat::<f64>::zeros(K, 1);
    let mut gr = Mat::<f64>::zeros(D, 1);
    g.throughput(Throughput::Elements((4 * D * K) as u64));
    g.bench_function("faer_gemv_pair_d50_k443", |b| {
        b.iter(|| {
            matmul(
                z.as_mut(),
                Accum::Replace,
                x.as_ref(),
                w.as_ref(),
                1.0,
                Par::Seq,
            );
            matmul(
                gr.as_mut(),
                Accum::Replace,
                x.transpose(),
                z.as_ref(),
                1.0,
                Par::Seq,
            );
            black_box(&gr);
        })
    });
    // The same pair on a row-major K×d block, the layout the batch kernels gather into
    // (`model::batch`): what faer itself reaches on it, against the column-major pair above.
    let xr: Vec<f64> = (0..K * D)
        .map(|t| ((t / D * 31 + t % D * 17) % 13) as f64 / 13.0 - 0.5)
        .collect();
    let xr = faer::MatRef::from_row_major_slice(&xr, K, D);
    g.throughput(Throughput::Elements((4 * D * K) as u64));
    g.bench_function("faer_gemv_pair_d50_k443_row_major", |b| {
        b.iter(|| {
            matmul(z.as_mut(), Accum::Replace, xr, w.as_ref(), 1.0, Par::Seq);
            matmul(
                gr.as_mut(),
                Accum::Replace,
                xr.transpose(),
                z.as_ref(),
                1.0,
                Par::Seq,
            );
            black_box(&gr);
        })
    });
    // Softmax shape: X_B W (K×p · p×C) then X_Bᵀ P (p×K · K×C): 4pCK flops.
    let wm = Mat::<f64>::from_fn(D, 10, |j, c| 0.01 * (j + c) as f64);
    let mut zc = Mat::<f64>::zeros(K, 10);
    let mut gc = Mat::<f64>::zeros(D, 10);
    g.throughput(Throughput::Elements((4 * D * 10 * K) as u64));
    g.bench_function("faer_gemm_pair_p50_c10_k443", |b| {
        b.iter(|| {
            matmul(
                zc.as_mut(),
                Accum::Replace,
                x.as_ref(),
                wm.as_ref(),
                1.0,
                Par::Seq,
            );
            matmul(
                gc.as_mut(),
                Accum::Replace,
                x.transpose(),
                zc.as_ref(),
                1.0,
                Par::Seq,
            );
            black_box(&gc);
        })
    });
    // Compute peak of one core: a 512³ matrix product (2n³ flops).
    let n = 512;
    let a = Mat::<f64>::from_fn(n, n, |i, j| ((i + 2 * j) % 11) as f64);
    let bm = Mat::<f64>::from_fn(n, n, |i, j| ((3 * i + j) % 7) as f64);
    let mut cm = Mat::<f64>::zeros(n, n);
    g.throughput(Throughput::Elements(2 * (n * n * n) as u64));
    g.sample_size(20);
    g.bench_function("faer_gemm_512_one_core", |b| {
        b.iter(|| {
            matmul(
                cm.as_mut(),
                Accum::Replace,
                a.as_ref(),
                bm.as_ref(),
                1.0,
                Par::Seq,
            );
            black_box(&cm);
        })
    });
    g.finish();
}

fn round(c: &mut Criterion) {
    // 25 silos of 2,400 training rows, d = 50, K = 443, every silo in every round.
    let spec = ExperimentSpec::from_toml(
        r#"
name = "round-bench"
rounds = 1000000
seed = 1
[data]
source = { kind = "synthetic", task = "binary", silos = 25, train = 2400, test = 10, features = 50, shift = 0.5 }
[model]
kind = "logistic"
[privacy]
epsilon = 1.0
delta = 1e-6
lipschitz = 2.0
[[algorithms]]
kind = "mb-sgd"
calibration = "experiment"
batch_size = 443
step_size = 0.1
"#,
        "bench",
    )
    .unwrap();
    let mut rng = DpRng::from_seed(1, Purpose::Data, 0);
    let trial = prepare_trial(&spec, None, &mut rng).unwrap();
    let ctx = build_context(&spec, &trial).unwrap();
    let built = spec.algorithms[0].spec.build(&ctx).unwrap();
    let mut sim = Simulator::new(&trial.silos, built, spec.participation.clone(), Some(7)).unwrap();
    let mut g = c.benchmark_group("round");
    // 25 silos × 4dK flops of gradient work per round.
    g.throughput(Throughput::Elements((25 * 4 * D * K) as u64));
    g.bench_function("isrl_mbsgd_25silos_d50_k443", |b| {
        b.iter(|| black_box(sim.step().unwrap()))
    });
    g.finish();
}

fn mlp(c: &mut Criterion) {
    let (p, h, classes, k) = (784, 64, 10, 64);
    let rows = 1000;
    let data = data(rows, p, classes);
    let idx: Vec<usize> = (0..k).map(|i| (i * 389 + 11) % rows).collect();
    let model = Mlp::new(p, h, classes, 0, 0.05).unwrap();
    let w = model.initial_params();
    let n = model.num_params();
    let (mut out, mut scratch) = (vec![0.0; n], vec![0.0; n]);
    let mut g = c.benchmark_group("mlp");
    g.throughput(Throughput::Elements(
        (4 * k * p * h + 6 * k * h * classes) as u64,
    ));
    g.bench_function("p784_h64_c10_b64/ghost_clipped", |b| {
        b.iter(|| {
            out.iter_mut().for_each(|v| *v = 0.0);
            model.add_clipped_batch_grad(
                black_box(&w),
                &data,
                &idx,
                1.0,
                1.0,
                &mut out,
                &mut scratch,
            );
            black_box(&out);
        })
    });
    g.bench_function("p784_h64_c10_b64/naive_clipped", |b| {
        b.iter(|| {
            out.iter_mut().for_each(|v| *v = 0.0);
            clipped_batch_grad_per_example(
                &model,
                black_box(&w),
                &data,
                &idx,
                1.0,
                1.0,
                &mut out,
                &mut scratch,
            );
            black_box(&out);
        })
    });
    g.bench_function("p784_h64_c10_b64/unclipped", |b| {
        b.iter(|| {
            out.iter_mut().for_each(|v| *v = 0.0);
            model.add_batch_grad(black_box(&w), &data, &idx, 1.0, &mut out);
            black_box(&out);
        })
    });
    g.finish();
}

/// Whether the command line's filter (criterion's one free argument) selects `name`: a
/// federation is built only for the points that will run.
fn selected(name: &str) -> bool {
    // Criterion's options that take a value.
    const VALUED: [&str; 12] = [
        "--warm-up-time",
        "--measurement-time",
        "--sample-size",
        "--save-baseline",
        "--baseline",
        "--baseline-lenient",
        "--profile-time",
        "--load-baseline",
        "--output-format",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filter = args
        .iter()
        .enumerate()
        .find(|(i, a)| !a.starts_with('-') && (*i == 0 || !VALUED.contains(&args[i - 1].as_str())));
    let Some((_, f)) = filter else {
        return true;
    };
    match f.strip_suffix('$') {
        Some(f) => name.ends_with(f),
        // Criterion's filter is a regular expression; the table's names need only `|`.
        None => f.split('|').any(|f| name.contains(f)),
    }
}

fn scaling(c: &mut Criterion) {
    let mut g = c.benchmark_group("scaling");
    g.sample_size(10);
    for (silos, d) in [
        (10, 100),
        (100, 100),
        (1000, 100),
        (10_000, 100),
        (10, 10_000),
        (10, 1_000_000),
    ] {
        let name = format!("silos={silos}/d={d}");
        if !selected(&format!("scaling/{name}")) {
            continue;
        }
        let spec = federation::spec(silos, d).unwrap();
        let trial = federation::trial(&spec).unwrap();
        let mut sim = federation::simulator(&spec, &trial).unwrap();
        // Gradient work per round: silos × K rows × 4d flops.
        g.throughput(Throughput::Elements(
            (silos * federation::ROWS * 4 * d) as u64,
        ));
        g.bench_function(name, |b| b.iter(|| black_box(sim.step().unwrap())));
    }
    g.finish();
}

criterion_group!(benches, batch_grad, reference, round, mlp, scaling);
criterion_main!(benches);
