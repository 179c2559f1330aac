//! Prints the noise multiplier `calibration = "accountant"` picks for R steps of K of N drawn
//! with replacement (replace-one, δ = 1/N²): the docs' equal-certified-ε tables.
use dpfl_privacy::calibration::calibrate_sampled_gaussian;
use dpfl_privacy::event::Sampling;
use dpfl_privacy::{Delta, Epsilon, Neighbouring};

/// Usage: sampled_calibration N K ROUNDS EPSILON.
fn main() {
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .map(|a| {
            a.parse()
                .expect("usage: sampled_calibration N K ROUNDS EPSILON")
        })
        .collect();
    assert_eq!(
        args.len(),
        4,
        "usage: sampled_calibration N K ROUNDS EPSILON"
    );
    let (n, k, t) = (args[0] as u64, args[1] as u64, args[2] as u64);
    let eps = Epsilon::new(args[3]).expect("EPSILON");
    let delta = Delta::new(1.0 / (n * n) as f64).expect("N");
    let t0 = std::time::Instant::now();
    let got = calibrate_sampled_gaussian(
        Sampling::WithReplacement {
            population: n,
            draws: k,
        },
        t,
        Neighbouring::ReplaceOne,
        eps,
        delta,
    );
    println!("{got:?} ({:?})", t0.elapsed());
}
