//! SoteriaFL speed benchmarks (issue 13's speed section), reported in BENCHMARKS.md.
//!
//! * `soteria_a9a/eps1_one_seed_five_algorithms`: what `dpfl reproduce soteria-a9a` does at
//!   ε = 1 for one seed (LDP-SGD, LDP-SVRG, CDP-SGD, SoteriaFL-SGD, SoteriaFL-SVRG; 25 rounds
//!   each, every round evaluated: full-train ‖∇f‖², loss, test accuracy), data loaded once
//!   outside the timing. The official notebook takes ≈ 31 s wall (0.19–0.24 s per algorithm
//!   in process).
//! * `soteria_a9a/eps1_update_rounds_five_algorithms`: the same five runs' update rounds only
//!   (build the halves, 25 simulated rounds, no evaluation): the notebook's 13–43 ms part;
//!   `soteria_a9a/update_rounds/<algorithm>` each algorithm's alone.
//! * `soteria_a9a/whole_reproduction_eps1_one_seed`: what `dpfl reproduce soteria-a9a --quick
//!   --trials 1` computes, loading included: read and parse the bundled a9a (gzip), scale by
//!   ‖X‖₂/(2√N), split, the five runs with every round evaluated, bands, and the CSVs and
//!   SVGs written into a temporary directory (process start-up excluded); `load` alone.
//! * `soteria_a9a_cpu/*`: the a9a group measured in the CPU time of the whole process (every
//!   thread, `/proc/self/task/*/schedstat`) instead of wall time, for a shared machine. The
//!   counters advance at scheduler ticks, so only samples of tens of milliseconds or more are
//!   measured well (the a9a ones are).
//! * `soteria_mnist_step/*`: one silo step of the MNIST network (784 → 64 sigmoid → 10,
//!   50,890 parameters) at b = 128 of m = 6,000 records: `private` is SoteriaFL-SGD's silo
//!   half (draw, per-record ghost-clipped gradients, N(0, σ²I) at the code's σ for ε = 1,
//!   random-k, shift update); `non_private` the same half with no noise and no per-record
//!   clipping; `noise_only` the Gaussian mechanism alone on the 50,890 coordinates (what the
//!   private half adds besides clipping). Throughput in the batched forward/backward's flops,
//!   4Kph + 6KhC.
//! * `reference/gemm_pair_mnist_b128`: faer's two products of the same shapes on one core
//!   ((K×p)(p×h) and (p×K)(K×h), 4Kph flops): the machine's GEMM rate for this shape.
//!
//! * `soteria_mnist_eval/{fused,three_passes}`: one evaluation of the network (full-train
//!   ‖∇f‖² and loss, test accuracy) by `Mlp::evaluate` and by the earlier three passes.
//!
//! Run: `DPFL_DATA=/path/to/datasets cargo bench -p dpfl-lab --bench soteria` (the a9a group is
//! skipped when `libsvm/a9a` is not found).

use std::hint::black_box;
use std::sync::Arc;

#[path = "../../dpfl-privacy/benches/common/cpu_clock.rs"]
mod cpu_clock;
use cpu_clock::{CpuClock, ProcessCpu};
use criterion::measurement::Measurement;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};

use dpfl::algo::BuildContext;
use dpfl::algo::half::{FederationInfo, SiloInfo};
use dpfl::algo::message::Broadcast;
use dpfl::data::{Dataset, Target};
use dpfl::linalg::Matrix;
use dpfl::model::{GradientOracle, Mlp, Model, Projection};
use dpfl::sim::{Participation, Simulator};
use dpfl_lab::reproduce::soteria;
use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

fn data_dir() -> std::path::PathBuf {
    dpfl_testkit::shared_datasets().unwrap_or_default()
}

fn context(
    model: Arc<dyn Model>,
    records: &[usize],
    rounds: usize,
    g: f64,
    eps: f64,
) -> BuildContext {
    let d = model.num_params();
    BuildContext {
        federation: FederationInfo {
            dim: d,
            silos: records.len(),
            rounds,
            expected_participants: records.len() as f64,
        },
        silos: records
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                SiloInfo::new(dpfl::units::SiloId::new(i as u32), n, Some((eps, 1e-3))).unwrap()
            })
            .collect(),
        oracle: GradientOracle::new(model, None).unwrap(),
        lipschitz: g,
        projection: Projection::None,
        init: vec![0.0; d],
        noise: Default::default(),
    }
}

fn a9a_wall(c: &mut Criterion) {
    a9a(c, "soteria_a9a");
}

fn a9a_cpu(c: &mut Criterion<CpuClock>) {
    a9a(c, "soteria_a9a_cpu");
}

fn a9a<M: Measurement>(c: &mut Criterion<M>, group: &str) {
    let dir = data_dir();
    if !dir.join("libsvm").is_dir() {
        eprintln!(
            "no libsvm/ under {} (set DPFL_DATA): skipping {group}",
            dir.display()
        );
        return;
    }
    let mut plan = soteria::Plan::new("soteria-a9a", false).unwrap();
    plan.settings.truncate(1);
    plan.seeds = 1;
    let fed = soteria::load(&plan, Some(&dir)).unwrap();
    let (eps, rounds, etas) = plan.settings[0];
    let records: Vec<usize> = fed.silos.iter().map(|s| s.train.len()).collect();
    let ctx = context(fed.model.clone(), &records, rounds, plan.clip, eps);
    let out = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group(group);
    g.sample_size(10);
    g.bench_function("whole_reproduction_eps1_one_seed", |b| {
        b.iter(|| {
            // The bundled copy, as `dpfl reproduce soteria-a9a` without --data-dir.
            let fed = soteria::load(&plan, None).unwrap();
            let rows = dpfl_lab::reproduce::soteria_repro::run(&plan, &fed, &|_, _| {}).unwrap();
            let bands = soteria::bands(&rows);
            black_box(
                dpfl_lab::reproduce::soteria_out::write(&plan, &rows, &bands, &[], out.path())
                    .unwrap(),
            )
        })
    });
    g.bench_function("load", |b| {
        b.iter(|| black_box(soteria::load(&plan, None).unwrap()))
    });
    g.bench_function("eps1_one_seed_five_algorithms", |b| {
        b.iter(|| {
            black_box(dpfl_lab::reproduce::soteria_repro::run(&plan, &fed, &|_, _| {}).unwrap())
        })
    });
    let update_rounds = |a: usize| {
        let spec = soteria::algorithm(a, etas[a], fed.init_std).unwrap();
        let built = spec.build(&ctx).unwrap();
        let mut sim = Simulator::new(&fed.silos, built, Participation::All, Some(1000)).unwrap();
        for _ in 0..rounds {
            sim.step().unwrap();
        }
        black_box(sim.output());
    };
    g.bench_function("eps1_update_rounds_five_algorithms", |b| {
        b.iter(|| (0..etas.len()).for_each(update_rounds))
    });
    for (a, name) in soteria::ALGORITHMS.iter().enumerate() {
        g.bench_function(format!("update_rounds/{name}"), |b| {
            b.iter(|| update_rounds(a))
        });
    }
    g.finish();
}

fn random_data(rows: usize, cols: usize, classes: usize) -> Dataset {
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

fn mnist_step_wall(c: &mut Criterion) {
    mnist_step(c, "");
}

/// `suffix` would name the groups of a CPU-time copy; there is none, because [`ProcessCpu`]
/// advances at scheduler ticks and this step's samples last a few milliseconds.
fn mnist_step<M: Measurement>(c: &mut Criterion<M>, suffix: &str) {
    let (p, h, classes, k, m) = (784, 64, 10, 128, 6000);
    let data = random_data(m, p, classes);
    let model: Arc<dyn Model> = Arc::new(Mlp::new(p, h, classes, 0, 0.2).unwrap());
    let flops = (4 * k * p * h + 6 * k * h * classes) as u64;
    let mut g = c.benchmark_group(format!("soteria_mnist_step{suffix}"));
    g.throughput(Throughput::Elements(flops));
    let base = "kind = \"soteria-fl\"\nestimator = \"sgd\"\nstep_size = 0.6\nbatch_size = 128\n";
    let configs = [
        ("private", format!("{base}calibration = \"paper-code\"")),
        // No noise, and the only clip is one norm of the whole estimator at an unreachable G.
        (
            "non_private",
            format!("{base}calibration = \"none\"\nclipping = \"aggregate-no-guarantee\""),
        ),
    ];
    for (name, text) in configs {
        let spec: dpfl::algo::AlgorithmSpec = toml::from_str(&text).unwrap();
        let g_clip = if name == "private" { 1.0 } else { 1e300 };
        let ctx = context(model.clone(), &[m], 150, g_clip, 1.0);
        let mut built = spec.build(&ctx).unwrap();
        let mut silo = built.silos.swap_remove(0);
        let bcast = Broadcast {
            round: dpfl::units::Round::FIRST,
            point: model.initial_params(),
            aux: Vec::new(),
        };
        let mut rng = DpRng::from_seed(7, Purpose::Data, 0);
        g.bench_function(format!("p784_h64_c10_b128/{name}"), |b| {
            b.iter(|| black_box(silo.respond(&bcast, &data, &mut rng).unwrap()))
        });
    }
    // What the private half adds besides the clipping: N(0, σ²I) on the 50,890 coordinates
    // (the continuous mechanism, ziggurat on ChaCha20), measured beside the two halves.
    {
        use dpfl_privacy::mechanism::{GaussianMechanism, VectorMechanism};
        let mech = GaussianMechanism::new(1.0, 1.0).unwrap();
        let mut v = model.initial_params();
        let mut rng = DpRng::from_seed(8, Purpose::Silo, 0);
        g.bench_function("p784_h64_c10_b128/noise_only", |b| {
            b.iter(|| mech.privatize(black_box(&mut v), &mut rng))
        });
    }
    g.finish();

    let mut g = c.benchmark_group(format!("reference{suffix}"));
    let x = Mat::<f64>::from_fn(k, p, |i, j| ((i * 31 + j * 17) % 13) as f64 / 13.0 - 0.5);
    let w = Mat::<f64>::from_fn(p, h, |j, c| 0.01 * ((j + c) % 7) as f64);
    let mut z = Mat::<f64>::zeros(k, h);
    let mut gw = Mat::<f64>::zeros(p, h);
    g.throughput(Throughput::Elements((4 * k * p * h) as u64));
    g.bench_function("gemm_pair_mnist_b128", |b| {
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
                gw.as_mut(),
                Accum::Replace,
                x.transpose(),
                z.as_ref(),
                1.0,
                Par::Seq,
            );
            black_box(&gw);
        })
    });
    g.finish();
}

/// One evaluation of the MNIST network as `soteria-mnist` does it at every evaluated round:
/// ‖∇f(w)‖² and the loss over the 60,000 training rows, accuracy over the 10,000 test rows.
/// `fused` is `Mlp::evaluate` (one forward pass per row, shards in parallel); `three_passes`
/// the earlier path (the batched full gradient, then per-row `loss` and `predict`, one
/// thread). Throughput in the GEMM flops of the fused pass: 4·n·p·h + 2·n_test·p·h.
fn mnist_eval(c: &mut Criterion) {
    let dir = data_dir();
    if !dir.join("mnist").is_dir() {
        eprintln!(
            "no mnist/ under {} (set DPFL_DATA): skipping",
            dir.display()
        );
        return;
    }
    let plan = soteria::Plan::new("soteria-mnist", false).unwrap();
    let fed = soteria::load(&plan, Some(&dir)).unwrap();
    let mlp = fed.mlp.clone().unwrap();
    let w = mlp.initial_params();
    let train: Vec<&Dataset> = fed.silos.iter().map(|s| &s.train).collect();
    let test: Vec<&Dataset> = fed.silos.iter().map(|s| &s.test).collect();
    let (n, n_test) = (60_000u64, 10_000u64);
    let mut g = c.benchmark_group("soteria_mnist_eval");
    g.sample_size(10);
    g.throughput(Throughput::Elements(
        4 * n * 784 * 64 + 2 * n_test * 784 * 64,
    ));
    g.bench_function("fused", |b| {
        b.iter(|| black_box(mlp.evaluate(&w, &train, &test)))
    });
    g.bench_function("three_passes", |b| {
        b.iter(|| {
            let m = fed.model.as_ref();
            black_box((
                dpfl_lab::experiment::metrics::full_grad_norm_sq(m, &w, fed.silos.iter()),
                dpfl::sim::train_loss(m, &w, fed.silos.iter()),
                dpfl::sim::test_metric(m, &w, fed.silos.iter()),
            ))
        })
    });
    g.finish();
}

criterion_group!(benches, a9a_wall, mnist_step_wall, mnist_eval);
criterion_group! {
    name = cpu;
    config = Criterion::default().with_measurement(ProcessCpu);
    targets = a9a_cpu
}
criterion_main!(benches, cpu);
