//! Accountant benchmarks (issue #4): RDP of 10^4 Poisson-subsampled Gaussian steps over 100
//! orders (target < 10 ms) and a PLD composition of 10^4 steps (target < 1 s).
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
    g.finish();
}

criterion_group!(accountant, benches);
criterion_main!(accountant);
