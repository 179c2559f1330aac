//! The privacy calls of the demo (100 rounds of K = 30 of n = 217 with replacement, ε = 1,
//! δ = 1/217², replace-one), each with its answer to 17 digits, its wall time and its CPU time
//! (this thread's, from /proc/thread-self/schedstat: meaningful on a loaded machine, where
//! wall time is not). Issue 30; figures in BENCHMARKS.md.
//!
//! Run: `cargo run -p dpfl-privacy --profile test --example privacy_timing`.

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::accountant::pld::PldAccountant;
use dpfl_privacy::calibration::{
    calibrate_noise_multiplier_with_progress, calibrate_sampled_gaussian,
};
use dpfl_privacy::event::Sampling;
use dpfl_privacy::{Delta, Epsilon, Neighbouring, PrivacyEvent};
use std::time::Instant;

/// CPU seconds of this thread so far (0 where schedstat is missing).
fn cpu() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |ns| ns / 1e9)
}

/// Runs `f`, printing its answer, wall and CPU time.
fn timed<T: std::fmt::Debug>(what: &str, f: impl FnOnce() -> T) -> T {
    let (t, c) = (Instant::now(), cpu());
    let v = f();
    println!(
        "{what}: {v:.17?}  wall {:.3} s, cpu {:.3} s",
        t.elapsed().as_secs_f64(),
        cpu() - c
    );
    v
}

fn main() {
    let s = Sampling::WithReplacement {
        population: 217,
        draws: 30,
    };
    let d = Delta::new(1.0 / (217.0 * 217.0)).unwrap();
    let one = Epsilon::new(1.0).unwrap();
    let nb = Neighbouring::ReplaceOne;
    let ev = |z: f64| {
        PrivacyEvent::Gaussian {
            noise_multiplier: z,
        }
        .sampled(s.clone())
        .repeated(100)
    };
    // `dpfl calibrate` (default PLD grid 1e-4, tolerance 1e-6) first: nothing remembered yet.
    let mut evaluations = 0;
    timed("dpfl calibrate --accountant pld (z)", || {
        calibrate_noise_multiplier_with_progress(ev, AccountantKind::Pld, nb, one, d, |_, _| {
            evaluations += 1
        })
        .unwrap()
    });
    println!("  ({evaluations} evaluations on the 1e-4 grid)");
    // What `dpfl train` calibrates (RDP, then the PLD on the 1e-3 grid, tolerance 1e-4).
    let (z, _) = timed("train: calibrate_sampled_gaussian (z)", || {
        calibrate_sampled_gaussian(s.clone(), 100, nb, one, d).unwrap()
    });
    // What its report accounts at that z.
    timed("report: rdp epsilon", || {
        AccountantKind::Rdp.epsilon(nb, &ev(z), d).unwrap()
    });
    timed("report: pld epsilon (grid 1e-4)", || {
        PldAccountant::new(nb).epsilon(&ev(z), d).unwrap()
    });
    timed("report: lower bound (grid 1e-4)", || {
        dpfl_privacy::accountant::lower_bound::epsilon_lower_bound(&ev(z), nb, d).unwrap()
    });
    // A ledger's charges: rounds 1..=100 composed again at each round, RDP then the 1e-3 PLD.
    timed("ledger: 100 charges (rdp + pld 1e-3 per round)", || {
        let pld = PldAccountant::with_discretization(nb, 1e-3).unwrap();
        (1..=100u64)
            .map(|t| {
                let e = PrivacyEvent::Composed(vec![
                    PrivacyEvent::Gaussian {
                        noise_multiplier: z
                    }
                    .sampled(s.clone());
                    t as usize
                ]);
                let r = AccountantKind::Rdp.epsilon(nb, &e, d).unwrap();
                if r > 1.0 {
                    r.min(pld.epsilon(&e, d).unwrap())
                } else {
                    r
                }
            })
            .fold(0.0, f64::max)
    });
}
