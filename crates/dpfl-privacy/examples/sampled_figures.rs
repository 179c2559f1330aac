//! Prints the issue-11 figures of the with-replacement accountant (upper, lower, RDP).
use dpfl_privacy::accountant::{AccountantKind, lower_bound::epsilon_lower_bound};
use dpfl_privacy::event::Sampling;
use dpfl_privacy::{Delta, Neighbouring, PrivacyEvent};

/// Usage: sampled_figures N K ROUNDS Z (δ = 1/N²).
fn main() {
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("usage: sampled_figures N K ROUNDS Z"))
        .collect();
    assert_eq!(args.len(), 4, "usage: sampled_figures N K ROUNDS Z");
    let (n, k, t, z) = (args[0] as u64, args[1] as u64, args[2] as u64, args[3]);
    let d = Delta::new(1.0 / (n * n) as f64).unwrap();
    let e = PrivacyEvent::Gaussian {
        noise_multiplier: z,
    }
    .sampled(Sampling::WithReplacement {
        population: n,
        draws: k,
    })
    .repeated(t);
    let t0 = std::time::Instant::now();
    let up = AccountantKind::Pld.epsilon(Neighbouring::ReplaceOne, &e, d);
    let t1 = t0.elapsed();
    let lo = epsilon_lower_bound(&e, Neighbouring::ReplaceOne, d);
    let t2 = t0.elapsed() - t1;
    let rdp = AccountantKind::Rdp.epsilon(Neighbouring::ReplaceOne, &e, d);
    println!("upper {up:?} ({t1:?}) lower {lo:?} ({t2:?}) rdp {rdp:?}");
}
