//! Times each privacy call `dpfl train` makes for the demo (issue 30): the calibration (its
//! RDP and PLD halves), the RDP and PLD accounts and the lower bound.
//! Run: `cargo run --release -p dpfl-privacy --example demo_profile`.
use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::accountant::lower_bound::{LOWER_DISCRETIZATION, epsilon_lower_bound_at};
use dpfl_privacy::accountant::pld::PldAccountant;
use dpfl_privacy::calibration::{calibrate_noise_multiplier, calibrate_sampled_gaussian};
use dpfl_privacy::event::Sampling;
use dpfl_privacy::{Delta, Epsilon, Neighbouring, PrivacyEvent};
use std::time::Instant;

fn main() {
    let sampling = Sampling::WithReplacement {
        population: 217,
        draws: 30,
    };
    let event = |z: f64| {
        PrivacyEvent::Gaussian {
            noise_multiplier: z,
        }
        .sampled(sampling.clone())
        .repeated(100)
    };
    let nb = Neighbouring::ReplaceOne;
    let eps = Epsilon::new(1.0).unwrap();
    let d = Delta::new(1.0 / (217.0f64 * 217.0)).unwrap();
    let t = Instant::now();
    let z_rdp = calibrate_noise_multiplier(event, AccountantKind::Rdp, nb, eps, d).unwrap();
    println!("rdp calibration z = {z_rdp} in {:?}", t.elapsed());
    let t = Instant::now();
    let e = AccountantKind::Rdp.epsilon(nb, &event(5.657), d).unwrap();
    println!("one rdp epsilon {e} in {:?}", t.elapsed());
    for z in [2.88, 5.66, 11.5] {
        let t = Instant::now();
        let e = PldAccountant::with_discretization(nb, 1e-3)
            .unwrap()
            .epsilon(&event(z), d)
            .unwrap();
        println!("one pld 1e-3 at z {z}: {e} in {:?}", t.elapsed());
    }
    let t = Instant::now();
    let (z, name) = calibrate_sampled_gaussian(sampling.clone(), 100, nb, eps, d).unwrap();
    println!(
        "calibrate_sampled_gaussian z = {z} ({name}) in {:?}",
        t.elapsed()
    );
    let t = Instant::now();
    let e = PldAccountant::new(nb).epsilon(&event(z), d).unwrap();
    println!("pld 1e-4 epsilon {e} in {:?}", t.elapsed());
    let t = Instant::now();
    let e = AccountantKind::Rdp.epsilon(nb, &event(z), d).unwrap();
    println!("rdp epsilon {e} in {:?}", t.elapsed());
    let t = Instant::now();
    let e = epsilon_lower_bound_at(&event(z), nb, d, LOWER_DISCRETIZATION).unwrap();
    println!("lower bound {e:?} in {:?}", t.elapsed());
}
