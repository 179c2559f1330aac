//! One benchmark per user-visible privacy call (issue 30 item 2), on the inputs
//! `scripts/bench_dp_accounting.py` gives dp-accounting 0.6.0 where it has a rule for them:
//!
//! * the demo (`dpfl train`, `dpfl calibrate`): 100 rounds of K = 30 of n = 217 drawn with
//!   replacement, replace-one, δ = 1/217², target ε = 1 — the calibration, the PLD (grid
//!   1e-4) and RDP accounts at its z, and the lower bound;
//! * Poisson DP-SGD at q = 0.01 over 10⁴ steps, z = 1, δ = 1e-5 (add/remove-one, and
//!   replace-one's ball pair): RDP and PLD accounts, RDP and PLD calibrations to ε = 1;
//! * with replacement at the papers' shapes (docs/reproductions.md): MNIST (n = 1238,
//!   K = 443, R = 35, z = 7.53) and insurance Fig. 5 (n = 107, K = 19, R = 35, z = 4.54).
//!
//! Every iteration first empties the accountants' memos (`forget_remembered`), so the times
//! are the computations', not memo hits.
//!
//! Run: `nice -n 10 cargo bench -p dpfl-privacy --bench privacy_calls`.

use criterion::{Criterion, criterion_group, criterion_main};
use dpfl_privacy::accountant::lower_bound::{LOWER_DISCRETIZATION, epsilon_lower_bound_at};
use dpfl_privacy::accountant::pld::PldAccountant;
use dpfl_privacy::accountant::{AccountantKind, forget_remembered};
use dpfl_privacy::calibration::{calibrate_noise_multiplier, calibrate_sampled_gaussian};
use dpfl_privacy::event::Sampling;
use dpfl_privacy::{Delta, Epsilon, Neighbouring, PrivacyEvent};
use std::hint::black_box;

fn sampled(z: f64, sampling: &Sampling, steps: u64) -> PrivacyEvent {
    PrivacyEvent::Gaussian {
        noise_multiplier: z,
    }
    .sampled(sampling.clone())
    .repeated(steps)
}

fn wr(n: u64, k: u64) -> Sampling {
    Sampling::WithReplacement {
        population: n,
        draws: k,
    }
}

fn delta_of(n: u64) -> Delta {
    Delta::new(1.0 / (n * n) as f64).unwrap()
}

fn demo(c: &mut Criterion) {
    let mut g = c.benchmark_group("demo");
    g.sample_size(10);
    let (s, nb, d) = (wr(217, 30), Neighbouring::ReplaceOne, delta_of(217));
    let target = Epsilon::new(1.0).unwrap();
    g.bench_function("calibrate", |b| {
        b.iter(|| {
            forget_remembered();
            calibrate_sampled_gaussian(black_box(s.clone()), 100, nb, target, d).unwrap()
        })
    });
    let (z, _) = calibrate_sampled_gaussian(s.clone(), 100, nb, target, d).unwrap();
    let event = sampled(z, &s, 100);
    g.bench_function("pld-account", |b| {
        b.iter(|| {
            forget_remembered();
            {
                PldAccountant::new(nb)
                    .epsilon(black_box(&event), d)
                    .unwrap()
            }
        })
    });
    g.bench_function("rdp-account", |b| {
        b.iter(|| {
            forget_remembered();
            {
                AccountantKind::Rdp
                    .epsilon(nb, black_box(&event), d)
                    .unwrap()
            }
        })
    });
    g.bench_function("lower-bound", |b| {
        b.iter(|| {
            forget_remembered();
            epsilon_lower_bound_at(black_box(&event), nb, d, LOWER_DISCRETIZATION).unwrap()
        })
    });
    g.finish();
}

fn poisson(c: &mut Criterion) {
    let mut g = c.benchmark_group("poisson");
    g.sample_size(10);
    let s = Sampling::Poisson { rate: 0.01 };
    let d = Delta::new(1e-5).unwrap();
    let event = sampled(1.0, &s, 10_000);
    let ar = Neighbouring::AddRemove;
    g.bench_function("rdp-account/q0.01-10k-steps", |b| {
        b.iter(|| {
            forget_remembered();
            {
                AccountantKind::Rdp
                    .epsilon(ar, black_box(&event), d)
                    .unwrap()
            }
        })
    });
    g.bench_function("pld-account/q0.01-10k-steps", |b| {
        b.iter(|| {
            forget_remembered();
            {
                PldAccountant::new(ar)
                    .epsilon(black_box(&event), d)
                    .unwrap()
            }
        })
    });
    g.bench_function("pld-account-replace-one/q0.01-10k-steps", |b| {
        b.iter(|| {
            forget_remembered();
            {
                PldAccountant::new(Neighbouring::ReplaceOne)
                    .epsilon(black_box(&event), d)
                    .unwrap()
            }
        })
    });
    let target = Epsilon::new(1.0).unwrap();
    for (name, kind) in [
        ("rdp-calibrate/q0.01-10k-steps-eps1", AccountantKind::Rdp),
        ("pld-calibrate/q0.01-10k-steps-eps1", AccountantKind::Pld),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                forget_remembered();
                {
                    calibrate_noise_multiplier(|z| sampled(z, &s, 10_000), kind, ar, target, d)
                        .unwrap()
                }
            })
        });
    }
    g.finish();
}

fn with_replacement(c: &mut Criterion) {
    let mut g = c.benchmark_group("with-replacement");
    g.sample_size(10);
    let nb = Neighbouring::ReplaceOne;
    for (name, n, k, r, z) in [
        ("mnist-1238-443-35", 1238, 443, 35, 7.53),
        ("insurance-107-19-35", 107, 19, 35, 4.54),
    ] {
        let (s, d) = (wr(n, k), delta_of(n));
        let event = sampled(z, &s, r);
        g.bench_function(format!("{name}/pld-account"), |b| {
            b.iter(|| {
                forget_remembered();
                {
                    PldAccountant::new(nb)
                        .epsilon(black_box(&event), d)
                        .unwrap()
                }
            })
        });
        g.bench_function(format!("{name}/rdp-account"), |b| {
            b.iter(|| {
                forget_remembered();
                {
                    AccountantKind::Rdp
                        .epsilon(nb, black_box(&event), d)
                        .unwrap()
                }
            })
        });
        let target = Epsilon::new(1.0).unwrap();
        g.bench_function(format!("{name}/calibrate"), |b| {
            b.iter(|| {
                forget_remembered();
                calibrate_sampled_gaussian(s.clone(), r, nb, target, d).unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(privacy_calls, demo, poisson, with_replacement);
criterion_main!(privacy_calls);
