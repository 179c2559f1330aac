//! DP-NormFedAvg benchmarks (issue 14, "Speed"), reported in BENCHMARKS.md.
//!
//! * `tdl/*`: exact truncated discrete Laplace draws at the FMNIST (m, α) of the digest's §5.6
//!   (Theorem 1's m at s = 2^12 and 2^6) and at dpfl's corrected m for s = 2^12 (per-round
//!   δ = 1e−9, t = 22), one element = one draw.
//! * `gemm/*`: the three layer shapes of one local step of the 784 → 300 → 300 → 10 network at
//!   batch 256 (forward A·Wᵀ, backward δᵀ·A and δ·W per layer: 6·B·Σ n_l n_{l+1} flops), in f64
//!   and in f32 — the machine's GEMM rate for exactly these shapes, and the f32/f64 ratio.
//! * `step/*`: one local step's batched gradient through `DeepMlp::add_batch_grad` (f32, the
//!   default, and f64), the same flops as `gemm/*` plus softmax, ReLU and bias work (and, in
//!   f32, the conversion of w in and of the gradient out): its ratio to `gemm/*` of the same
//!   type is the "within 2x of the GEMM peak".
//! * `message/*`: quantize + TDL noise + pack of a 328,810-vector (the silo's encoder) at s = 2^12
//!   with dpfl's corrected m (t = 22) and with Theorem 1's m = 413 (t = 14), and pack / unpack
//!   alone (t = 22).
//! * `round/*`: one simulated round at the paper's shape (25 of 50 silos × E = 20 steps ×
//!   B = 256, QTDL s = 2^12, corrected m) on synthetic data of FMNIST's shape (1,200 rows of
//!   784 features per silo, 10 classes); no evaluation.
//!
//! * `cpu/*`: the GEMMs and one local step's gradient in f32 and f64, one silo's whole local
//!   round (E = 20 steps: minibatch draw, gradient, weight decay, momentum, update, d = w_k −
//!   w_{k,E}; `cpu/local/*`, divide by 20 for a step), and the two encodes, in CPU time of the
//!   benchmarking thread (`/proc/thread-self/schedstat`), for a machine shared with other work.
//!
//! Run: `nice cargo bench -p dpfl --bench normfedavg` (`-- round` for the round alone).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

#[path = "../../dpfl-privacy/benches/common/cpu_clock.rs"]
mod cpu_clock;
use cpu_clock::{CpuClock, CpuTime};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, Par};

use dpfl::algo::PackedInts;
use dpfl::algo::context::BuildContext;
use dpfl::algo::half::{FederationInfo, SiloInfo};
use dpfl::algo::normfedavg::{
    BetaSchedule, BudgetSpec, Encoder, EtaSchedule, IntNoise, LocalTrainer, MessageAccounting,
    NormFedAvgSpec, QuantPrivacy, Sensitivities, SensitivitySpec, TdlCalibration, Variant,
};
use dpfl::data::{Dataset, SiloData, Target};
use dpfl::linalg::Matrix;
use dpfl::model::{Activation, DeepMlp, GradientOracle, Model, Precision, Projection};
use dpfl::sim::{Participation, Simulator};
use dpfl_privacy::DpRng;
use dpfl_privacy::qtdl::TruncatedDiscreteLaplace;
use dpfl_privacy::qtdl::theorem1;
use dpfl_privacy::rng::Purpose;

const D: usize = 328_810;
const B: usize = 256;
const WIDTHS: [usize; 4] = [784, 300, 300, 10];

fn data(rows: usize, cols: usize, classes: usize, seed: u64) -> Dataset {
    let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ seed;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let x = Matrix::from_vec(rows, cols, (0..rows * cols).map(|_| next()).collect()).unwrap();
    let y = (0..rows).map(|i| (i % classes) as f64).collect();
    let names = (0..cols).map(|j| format!("x{j}")).collect();
    let target = Target::Classes {
        names: (0..classes).map(|c| c.to_string()).collect(),
    };
    Dataset::new(x, y, target, names).unwrap()
}

/// Eq. 6's sensitivities at μ = 0.1 (FMNIST, digest §5.6), per round ε = 10; the paper's
/// accounting mode, whose event is computed whatever the noise (the encoder refuses none).
fn bench_accounting() -> MessageAccounting {
    MessageAccounting {
        epsilon: 10.0,
        delta: 3e-6,
        sensitivities: Sensitivities {
            l1: 8.925e5,
            l2: 1556.0,
            linf: 411.6,
            failure: 0.0,
        },
        calibration: TdlCalibration::PaperClaim,
    }
}

/// The corrected TDL of QTDL s = 2^12 at per-round (10, 1e−9) with the μ = 0.1 sensitivities.
fn corrected_tdl() -> TruncatedDiscreteLaplace {
    corrected_tdl_s(1 << 12)
}

/// The same for quantization levels `s` (2^6: m = 1,476,843).
fn corrected_tdl_s(levels: u64) -> TruncatedDiscreteLaplace {
    let s = dpfl::algo::normfedavg::sensitivities(SensitivitySpec::Mu { mu: 0.1 }, levels, D, 1200)
        .unwrap();
    theorem1::calibrate_for_delta(10.0, 1e-9f64.ln(), s.l1, s.linf, D as u64)
        .unwrap()
        .tdl
}

fn tdl(c: &mut Criterion) {
    let mut g = c.benchmark_group("tdl");
    const N: usize = 100_000;
    g.throughput(Throughput::Elements(N as u64));
    let cases = [
        (
            "thm1_s4096_m413",
            TruncatedDiscreteLaplace::new(413, 1.12e-5).unwrap(),
        ),
        (
            "thm1_s64_m9",
            TruncatedDiscreteLaplace::new(9, 1.51e-5).unwrap(),
        ),
        ("corrected_s4096", corrected_tdl()),
    ];
    for (name, t) in cases {
        let mut rng = DpRng::from_seed(1, Purpose::Silo, 0);
        let mut out = vec![0i64; N];
        g.bench_function(format!("{name}_m{}", t.m()), |b| {
            b.iter(|| {
                t.fill(&mut rng, &mut out);
                black_box(&out);
            })
        });
    }
    g.finish();
}

/// The six products of one local step: per layer, forward Z = A·Wᵀ (B×o), weight gradient
/// δᵀ·A (o×i), and (above the first layer) δ·W (B×i). Flops 2·B·i·o each.
fn step_gemms<T: faer::traits::ComplexField + Copy>(
    a: &[Mat<T>],
    w: &[Mat<T>],
    z: &mut [Mat<T>],
    gw: &mut [Mat<T>],
    back: &mut [Mat<T>],
    one: T,
) {
    for l in 0..3 {
        matmul(
            z[l].as_mut(),
            Accum::Replace,
            a[l].as_ref(),
            w[l].transpose(),
            one,
            Par::Seq,
        );
        matmul(
            gw[l].as_mut(),
            Accum::Add,
            z[l].transpose(),
            a[l].as_ref(),
            one,
            Par::Seq,
        );
        if l > 0 {
            matmul(
                back[l].as_mut(),
                Accum::Replace,
                z[l].as_ref(),
                w[l].as_ref(),
                one,
                Par::Seq,
            );
        }
    }
}

fn step_flops() -> u64 {
    let mut f = 0;
    for l in 0..3 {
        let (i, o) = (WIDTHS[l], WIDTHS[l + 1]);
        f += 2 * B * i * o * if l > 0 { 3 } else { 2 };
    }
    f as u64
}

macro_rules! gemm_case {
    ($g:expr, $name:expr, $t:ty) => {{
        let a: Vec<Mat<$t>> = (0..3)
            .map(|l| Mat::from_fn(B, WIDTHS[l], |i, j| ((i * 7 + j * 3) % 11) as $t * 0.01))
            .collect();
        let w: Vec<Mat<$t>> = (0..3)
            .map(|l| {
                Mat::from_fn(WIDTHS[l + 1], WIDTHS[l], |i, j| {
                    ((i + j * 5) % 13) as $t * 0.01
                })
            })
            .collect();
        let mut z: Vec<Mat<$t>> = (0..3).map(|l| Mat::zeros(B, WIDTHS[l + 1])).collect();
        let mut gw: Vec<Mat<$t>> = (0..3)
            .map(|l| Mat::zeros(WIDTHS[l + 1], WIDTHS[l]))
            .collect();
        let mut back: Vec<Mat<$t>> = (0..3).map(|l| Mat::zeros(B, WIDTHS[l])).collect();
        $g.bench_function($name, |b| {
            b.iter(|| {
                step_gemms(&a, &w, &mut z, &mut gw, &mut back, 1.0 as $t);
                black_box(&gw);
            })
        });
    }};
}

fn gemm(c: &mut Criterion) {
    let mut g = c.benchmark_group("gemm");
    g.throughput(Throughput::Elements(step_flops()));
    gemm_case!(g, "f64_local_step_shapes", f64);
    gemm_case!(g, "f32_local_step_shapes", f32);
    g.finish();
}

fn step(c: &mut Criterion) {
    let mut g = c.benchmark_group("step");
    g.throughput(Throughput::Elements(step_flops()));
    let d = data(1200, 784, 10, 1);
    let idx: Vec<usize> = (0..B).map(|i| (i * 37) % 1200).collect();
    for (name, p) in [("f32", Precision::F32), ("f64", Precision::F64)] {
        let m = DeepMlp::new(784, &[300, 300], 10, Activation::Relu, 1)
            .unwrap()
            .with_precision(p);
        let w = m.initial_params();
        let mut out = vec![0.0; m.num_params()];
        g.bench_function(format!("deep_mlp_batch_grad_b256_{name}"), |b| {
            b.iter(|| {
                m.add_batch_grad(&w, &d, &idx, 1.0 / B as f64, &mut out);
                black_box(&out);
            })
        });
    }
    g.finish();
}

fn message(c: &mut Criterion) {
    let mut g = c.benchmark_group("message");
    g.throughput(Throughput::Elements(D as u64));
    let mut rng = DpRng::from_seed(2, Purpose::Silo, 0);
    let u: Vec<f64> = (0..D).map(|i| ((i % 1001) as f64 - 500.0) / 1e6).collect();
    // dpfl's corrected m (what the reproductions draw) and Theorem 1's m (the paper's).
    for tdl in [
        corrected_tdl(),
        TruncatedDiscreteLaplace::new(413, 1.12e-5).unwrap(),
    ] {
        let mut enc = Encoder::new(1 << 12, IntNoise::Tdl(tdl), D, bench_accounting()).unwrap();
        let t = enc.layout.bits;
        g.bench_function(format!("encode_quantize_noise_pack_t{t}"), |b| {
            b.iter(|| black_box(enc.encode(&u, &mut rng).unwrap()))
        });
    }
    let t = 22;
    let vals: Vec<u64> = (0..D as u64)
        .map(|i| (i * 2_654_435_761) & ((1 << t) - 1))
        .collect();
    g.bench_function(format!("pack_t{t}"), |b| {
        b.iter(|| black_box(PackedInts::pack(t, &vals).unwrap()))
    });
    let p = PackedInts::pack(t, &vals).unwrap();
    g.bench_function(format!("unpack_t{t}"), |b| b.iter(|| black_box(p.unpack())));
    g.finish();
}

fn round(c: &mut Criterion) {
    let mut g = c.benchmark_group("round");
    g.sample_size(10).measurement_time(Duration::from_secs(60));
    let silos: Vec<SiloData> = (0..50)
        .map(|i| {
            let train = data(1200, 784, 10, i);
            let test = train.subset(&[0]);
            SiloData { train, test }
        })
        .collect();
    let model = DeepMlp::new(784, &[300, 300], 10, Activation::Relu, 1).unwrap();
    let model: Arc<dyn Model> = Arc::new(model);
    let ctx = BuildContext {
        federation: FederationInfo {
            dim: D,
            silos: 50,
            rounds: 400,
            expected_participants: 25.0,
        },
        silos: (0..50)
            .map(|i| SiloInfo {
                id: dpfl::units::SiloId::new(i),
                records: 1200,
                budget: None,
                fixed_noise: None,
            })
            .collect(),
        oracle: GradientOracle::new(model.clone(), None).unwrap(),
        lipschitz: 1.0,
        projection: Projection::None,
        init: model.initial_params(),
        noise: Default::default(),
    };
    let spec = NormFedAvgSpec {
        privacy: Some(QuantPrivacy {
            s: 1 << 12,
            sensitivity: SensitivitySpec::Mu { mu: 0.1 },
            budget: BudgetSpec::PerRound {
                epsilon: 10.0,
                delta: 1e-9,
            },
            calibration: TdlCalibration::Corrected,
        }),
        ..NormFedAvgSpec::new(
            Variant::DpNormFedAvg,
            0.01,
            BetaSchedule::Piecewise {
                from: vec![0, 100],
                values: vec![0.1, 0.05],
            },
        )
    };
    let built = dpfl::algo::normfedavg::build(&ctx, &spec).unwrap();
    let mut sim = Simulator::new(&silos, built, Participation::Fixed { m: 25 }, Some(1)).unwrap();
    g.bench_function("qtdl_s4096_25x20x256", |b| {
        b.iter(|| black_box(sim.step().unwrap()))
    });
    g.finish();
}

/// The GEMMs, a local step's gradient and a silo's local round in f32 and f64, and the
/// encodes, in CPU time.
fn cpu(c: &mut Criterion<CpuClock>) {
    let mut g = c.benchmark_group("cpu");
    gemm_case!(g, "gemm/f64_local_step_shapes", f64);
    gemm_case!(g, "gemm/f32_local_step_shapes", f32);
    let d = data(1200, 784, 10, 1);
    let idx: Vec<usize> = (0..B).map(|i| (i * 37) % 1200).collect();
    for (name, p) in [("f32", Precision::F32), ("f64", Precision::F64)] {
        let m = DeepMlp::new(784, &[300, 300], 10, Activation::Relu, 1)
            .unwrap()
            .with_precision(p);
        let w = m.initial_params();
        let mut grad = vec![0.0; m.num_params()];
        g.bench_function(format!("step/deep_mlp_batch_grad_b256_{name}"), |b| {
            b.iter(|| {
                m.add_batch_grad(&w, &d, &idx, 1.0 / B as f64, &mut grad);
                black_box(&grad);
            })
        });
        let oracle = GradientOracle::new(Arc::new(m), None).unwrap();
        let eta = EtaSchedule {
            eta0: 0.01,
            decay: 0.99,
        };
        let mut t = LocalTrainer::new(oracle, eta, 20, B, 0.9, 1e-4, d.len()).unwrap();
        let mut rng = DpRng::from_seed(3, Purpose::Silo, 0);
        g.bench_function(format!("local/e20_b256_{name}"), |b| {
            b.iter(|| black_box(t.update(0, &w, &d, &mut rng).unwrap()))
        });
    }
    let mut rng = DpRng::from_seed(2, Purpose::Silo, 0);
    let u: Vec<f64> = (0..D).map(|i| ((i % 1001) as f64 - 500.0) / 1e6).collect();
    // s = 2^12 and 2^6, each at the corrected m and Theorem 1's m.
    for (levels, tdl) in [
        (1 << 12, corrected_tdl()),
        (
            1 << 12,
            TruncatedDiscreteLaplace::new(413, 1.12e-5).unwrap(),
        ),
        (1 << 6, corrected_tdl_s(1 << 6)),
        (1 << 6, TruncatedDiscreteLaplace::new(9, 1.51e-5).unwrap()),
    ] {
        let mut enc = Encoder::new(levels, IntNoise::Tdl(tdl), D, bench_accounting()).unwrap();
        let t = enc.layout.bits;
        g.bench_function(
            format!("message/encode_quantize_noise_pack_s{levels}_t{t}"),
            |b| b.iter(|| black_box(enc.encode(&u, &mut rng).unwrap())),
        );
    }
    g.finish();
}

criterion_group!(benches, tdl, gemm, step, message, round);
criterion_group! {
    name = cpu_time;
    config = Criterion::default().with_measurement(CpuTime);
    targets = cpu
}
criterion_main!(benches, cpu_time);
