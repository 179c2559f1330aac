//! Accountant benchmarks (issue #4): RDP of 10^4 Poisson-subsampled Gaussian steps over 100
//! orders (target < 10 ms) and a PLD composition of 10^4 steps (target < 1 s); issue #11: the
//! with-replacement PLD (Balle-Barthe-Gaboardi profile) of the demo's 100 rounds of K = 30 of
//! n = 217 at its calibrated noise multiplier (target < 1 s).
//!
//! Run: `cargo bench -p dpfl-privacy --bench accountant`.

use criterion::{Criterion, criterion_group, criterion_main};
use dpfl_privacy::accountant::pld::PldAccountant;
use dpfl_privacy::accountant::rdp::RdpAccountant;
use dpfl_privacy::event::Sampling;
use dpfl_privacy::{Delta, Neighbouring, PrivacyEvent};
use std::hint::black_box;

fn step(z: f64, q: f64) -> PrivacyEvent {
    PrivacyEvent::Gaussian {
        noise_multiplier: z,
    }
    .sampled(Sampling::Poisson { rate: q })
}

fn orders_100() -> Vec<f64> {
    // 1.25, 1.5, …, 20 (77 orders) and 21 … 43 (23 orders): 100 orders.
    let mut o: Vec<f64> = (5..=80).map(|i| i as f64 / 4.0).collect();
    o.retain(|&a| a > 1.0);
    o.extend((21..=44).map(|i| i as f64));
    o.truncate(100);
    o
}

fn benches(c: &mut Criterion) {
    let d = Delta::new(1e-5).unwrap();
    let orders = orders_100();
    assert_eq!(orders.len(), 100);
    let acc = RdpAccountant::with_orders(orders, Neighbouring::AddRemove).unwrap();
    let self_composed = step(1.0, 0.01).repeated(10_000);
    c.bench_function("rdp/10k-steps-100-orders/self-composed", |b| {
        b.iter(|| acc.epsilon(black_box(&self_composed), d).unwrap())
    });
    // As a ledger sees it: 10^4 separately recorded events.
    let listed = PrivacyEvent::Composed(vec![step(1.0, 0.01); 10_000]);
    c.bench_function("rdp/10k-steps-100-orders/listed", |b| {
        b.iter(|| acc.epsilon(black_box(&listed), d).unwrap())
    });
    let pld = PldAccountant::new(Neighbouring::AddRemove);
    let mut g = c.benchmark_group("pld");
    g.sample_size(10);
    g.bench_function("10k-steps", |b| {
        b.iter(|| pld.epsilon(black_box(&self_composed), d).unwrap())
    });
    // The demo: z = σK/(2L) = 0.755·30/4 ≈ 5.66, δ = 1/217².
    let demo = PrivacyEvent::Gaussian {
        noise_multiplier: 5.66,
    }
    .sampled(Sampling::WithReplacement {
        population: 217,
        draws: 30,
    })
    .repeated(100);
    let d_demo = Delta::new(1.0 / (217.0 * 217.0)).unwrap();
    let replace = PldAccountant::new(Neighbouring::ReplaceOne);
    g.bench_function("with-replacement/demo-100-rounds", |b| {
        b.iter(|| replace.epsilon(black_box(&demo), d_demo).unwrap())
    });
    // Issue 11 paths: Gaussian compositions (closed form), lattice-aligned discrete PLDs,
    // a long composition at small z, and a PLD calibration bracketed from RDP.
    let gauss = PrivacyEvent::Gaussian {
        noise_multiplier: 0.8,
    }
    .repeated(3000);
    g.bench_function("gaussian-z0.8-3000-steps", |b| {
        b.iter(|| pld.epsilon(black_box(&gauss), d).unwrap())
    });
    let gauss_pmf = PrivacyEvent::Composed(vec![
        gauss.clone(),
        PrivacyEvent::Laplace {
            noise_multiplier: 10.0,
        },
    ]);
    g.bench_function("gaussian-3000-steps-plus-laplace-pmf-path", |b| {
        b.iter(|| pld.epsilon(black_box(&gauss_pmf), d).unwrap())
    });
    let dlap = PrivacyEvent::DiscreteLaplace {
        noise_multiplier: 1e6,
    }
    .repeated(1_000_000);
    g.bench_function("discrete-laplace-1e6-steps", |b| {
        b.iter(|| pld.epsilon(black_box(&dlap), d).unwrap())
    });
    let dgauss = PrivacyEvent::discrete_gaussian_scalar(2.0).repeated(100);
    g.bench_function("discrete-gaussian-z2-100-steps", |b| {
        b.iter(|| pld.epsilon(black_box(&dgauss), d).unwrap())
    });
    let long = step(0.3, 1e-4).repeated(100_000);
    g.bench_function("poisson-z0.3-q1e-4-100k-steps", |b| {
        b.iter(|| pld.epsilon(black_box(&long), d).unwrap())
    });
    let target = dpfl_privacy::Epsilon::new(1.0).unwrap();
    g.bench_function("calibrate-poisson-q0.01-10k-steps", |b| {
        b.iter(|| {
            dpfl_privacy::calibration::calibrate_noise_multiplier(
                |z| step(z, 0.01).repeated(10_000),
                dpfl_privacy::accountant::AccountantKind::Pld,
                Neighbouring::AddRemove,
                target,
                d,
            )
            .unwrap()
        })
    });
    g.finish();
}

criterion_group!(accountant, benches);
criterion_main!(accountant);
