//! Noise sampler throughput (issue 11 item 7): the exact discrete Gaussian (Canonne, Kamath &
//! Steinke 2020, Algorithm 3) at several σ in grid units, against the continuous Gaussian
//! mechanism (rand_distr's ziggurat), both on ChaCha20; the exact truncated discrete Laplace
//! of DP-NormFedAvg (issue 14).
//!
//! `cpu/*` measure the same kind of work in CPU time of the benchmarking thread
//! (`/proc/thread-self/schedstat`, nanoseconds, updated at scheduler ticks: use long samples),
//! for a machine shared with other work: the raw ChaCha20 keystream (rand_chacha against
//! RustCrypto's chacha20, which produce the same stream) and `TruncatedDiscreteLaplace::fill`
//! at the paper's (m, α) and at dpfl's corrected m; one element = one 64-bit word or one draw.
//!
//! Run: `cargo bench -p dpfl-privacy --bench samplers` (`-- cpu/` for the CPU-time group).

#[path = "common/cpu_clock.rs"]
mod cpu_clock;
use cpu_clock::{CpuClock, CpuTime};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dpfl_privacy::discrete::DiscreteGaussian;
use dpfl_privacy::mechanism::{GaussianMechanism, GaussianNoise, VectorMechanism};
use dpfl_privacy::qtdl::TruncatedDiscreteLaplace;
use dpfl_privacy::rng::{DpRng, Purpose};
use std::hint::black_box;

const DRAWS: usize = 10_000;

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("noise");
    g.throughput(Throughput::Elements(DRAWS as u64));
    for sigma in [1.0, 100.0, 1e4, 1e6] {
        let dg = DiscreteGaussian::new(sigma).unwrap();
        let mut rng = DpRng::from_seed(1, Purpose::Silo, 0);
        g.bench_function(format!("discrete-gaussian/sigma={sigma:e}"), |b| {
            b.iter(|| {
                let mut s = 0i64;
                for _ in 0..DRAWS {
                    s = s.wrapping_add(dg.sample(&mut rng));
                }
                black_box(s)
            })
        });
    }
    // The mechanisms on a 10⁴-coordinate message: continuous, and discrete on grid 1e-6 with
    // σ = 1 (σ/γ ≈ 10⁶ grid units).
    let mut v = vec![0.5; DRAWS];
    let cont = GaussianMechanism::new(1.0, 1.0).unwrap();
    let disc = GaussianMechanism::with_noise(
        GaussianNoise::DiscreteGaussian { granularity: 1e-6 },
        1.0,
        1.0,
        DRAWS,
    )
    .unwrap();
    let mut rng = DpRng::from_seed(2, Purpose::Silo, 0);
    g.bench_function("mechanism/gaussian", |b| {
        b.iter(|| cont.privatize(black_box(&mut v), &mut rng))
    });
    g.bench_function("mechanism/discrete-gaussian-grid-1e-6", |b| {
        b.iter(|| disc.privatize(black_box(&mut v), &mut rng))
    });
    // Truncated discrete Laplace (DP-NormFedAvg), exact: the paper's FMNIST s = 2^12 and CIFAR
    // s = 2^20 Theorem-1 parameters, and the corrected FMNIST calibration (δ = 1e−9).
    for (m, alpha) in [(413u64, 1.12e-5), (105_205, 6.24e-8), (1_993_383, 1.12e-5)] {
        let tdl = TruncatedDiscreteLaplace::new(m, alpha).unwrap();
        let mut rng = DpRng::from_seed(3, Purpose::Silo, 0);
        let mut out = vec![0i64; DRAWS];
        g.bench_function(format!("tdl/m={m}/alpha={alpha:e}"), |b| {
            b.iter(|| {
                tdl.fill(&mut rng, &mut out);
                black_box(out[0])
            })
        });
    }
    g.finish();
}

/// The keystream and the TDL sampler in CPU time (module doc).
fn cpu(c: &mut Criterion<CpuClock>) {
    use rand::{Rng, SeedableRng};
    const WORDS: usize = 1 << 18;
    let mut g = c.benchmark_group("cpu");
    g.throughput(Throughput::Elements(WORDS as u64));
    let mut a = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    g.bench_function("keystream/rand_chacha/next_u64", |b| {
        b.iter(|| {
            let mut s = 0u64;
            for _ in 0..WORDS {
                s ^= a.next_u64();
            }
            black_box(s)
        })
    });
    let mut buf = [0u8; 2048];
    g.bench_function("keystream/rand_chacha/fill_bytes_2k", |b| {
        b.iter(|| {
            for _ in 0..WORDS / 256 {
                a.fill_bytes(&mut buf);
                black_box(&buf);
            }
        })
    });
    let mut r = chacha20::ChaCha20Rng::seed_from_u64(1);
    g.bench_function("keystream/chacha20/next_u64", |b| {
        b.iter(|| {
            let mut s = 0u64;
            for _ in 0..WORDS {
                s ^= r.next_u64();
            }
            black_box(s)
        })
    });
    g.bench_function("keystream/chacha20/fill_bytes_2k", |b| {
        b.iter(|| {
            for _ in 0..WORDS / 256 {
                r.fill_bytes(&mut buf);
                black_box(&buf);
            }
        })
    });
    // The paper's Theorem-1 (m, α) for FMNIST s = 2^12 and 2^6 (digest §5.6), and dpfl's
    // corrected m for s = 2^12 and 2^6 (per-round δ = 1e−9; s = 2^6: the exact output of
    // `theorem1::calibrate_for_delta(10, ln 1e−9, Δ₁, Δ∞, 328,810)` with the μ = 0.1
    // sensitivities Δ∞ = 2 + 0.1s, Δ₁ = 2d + 0.1s√d).
    const N: usize = 1 << 18;
    g.throughput(Throughput::Elements(N as u64));
    for (name, m, alpha) in [
        ("thm1_s4096", 413u64, 1.12e-5),
        ("thm1_s64", 9, 1.51e-5),
        ("corrected_s4096", 1_993_383, 1.12e-5),
        ("corrected_s64", 1_476_843, 1.512_196_122_056_936_7e-5),
    ] {
        let tdl = TruncatedDiscreteLaplace::new(m, alpha).unwrap();
        let mut rng = DpRng::from_seed(3, Purpose::Silo, 0);
        let mut out = vec![0i64; N];
        g.bench_function(format!("tdl/{name}_m{m}"), |b| {
            b.iter(|| {
                tdl.fill(&mut rng, &mut out);
                black_box(out[0])
            })
        });
    }
    g.finish();
}

criterion_group!(samplers, benches);
criterion_group! {
    name = cpu_time;
    config = Criterion::default().with_measurement(CpuTime);
    targets = cpu
}
criterion_main!(samplers, cpu_time);
