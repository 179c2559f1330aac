//! Issue 27 finding 1: Shuffled Noisy MB-SGD under a trusted shuffler charges each silo the
//! FMT-amplified guarantee, which needs every report of the shuffle to come from one
//! randomizer (FMT 2021 Thm 3.2). With per-silo budgets or unequal n_i the per-silo σ's used
//! to differ and a server could pick a silo's report out of the shuffle by its norm. Now every
//! silo runs the strictest silo's σ, is charged the amplified guarantee of that common
//! randomizer, and stays within its own budget; the distinguishing attack is computed against
//! both the old and the accepted configuration.

use dpfl::testing::shuffle::{SdpInputs, round_guarantee, sdp_chain, shared_round};
use dpfl_lab::experiment::{ExperimentSpec, prepare_trial, train_one};
use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::rng::Purpose;
use dpfl_privacy::{Delta, DpRng, GaussianMechanism, Neighbouring, PrivacyEvent, VectorMechanism};

const SDP_TRUSTED: &str = r#"
[[algorithms]]
kind = "sdp-mb-sgd"
step_size = 0.5
calibration = { kind = "accountant" }
shuffler = "trusted"
"#;

/// The honest-shuffler ε a calibration row prints ("eps = X given an honest shuffler").
fn printed_epsilon(formula: &str) -> f64 {
    let (_, rest) = formula
        .split_once("against the server: eps = ")
        .unwrap_or_else(|| panic!("{formula}"));
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

/// Trains `spec`'s one algorithm and checks the trusted-shuffle invariants: one σ for every
/// silo, each silo's released events exactly the charged round event, within its budget, and
/// the printed ε equal to the charged events' ε.
fn check_one_randomizer(spec: &ExperimentSpec) -> Vec<f64> {
    let mut rng = DpRng::from_seed(5, Purpose::Data, 0);
    let trial = prepare_trial(spec, None, &mut rng).unwrap();
    let setup = dpfl_lab::experiment::setup(spec, &trial).unwrap();
    let ctx = setup.context_with(trial.model.clone()).unwrap();
    let run = train_one(spec, &spec.algorithms[0].spec, &trial, Some(7), 5, |_| {}).unwrap();
    let sigma = run.calibration[0].sigma;
    let mut own = Vec::new();
    for (i, c) in run.calibration.iter().enumerate() {
        assert_eq!(c.sigma, sigma, "silo {i}: {}", c.formula);
        assert!(
            c.formula.contains("strictest silo's sigma"),
            "{}",
            c.formula
        );
        let (eps, delta) = ctx.silos[i].budget.unwrap();
        let events = &run.spent[i];
        assert_eq!(events.len(), spec.rounds);
        let Some(PrivacyEvent::EpsilonDelta { .. }) = events.first() else {
            panic!("silo {i}: {events:?}")
        };
        assert!(events.iter().all(|e| *e == events[0]));
        let charged = AccountantKind::Advanced
            .epsilon(
                Neighbouring::ReplaceOne,
                &PrivacyEvent::Composed(events.clone()),
                delta,
            )
            .unwrap();
        assert!(
            charged <= eps.get() * (1.0 + 1e-9),
            "silo {i}: {charged} > {eps:?}"
        );
        let printed = printed_epsilon(&c.formula);
        assert!(
            (printed - charged).abs() <= 5e-5,
            "silo {i}: printed {printed}, charged {charged}"
        );
        // What each silo's own chain would have run before (per-silo σ).
        let x = SdpInputs {
            epsilon: eps.get(),
            delta: delta.get(),
            records: ctx.silos[i].records,
            batch_size: 1,
            silos: ctx.silos.len(),
            participants: ctx.silos.len(),
            rounds: spec.rounds,
            lipschitz: ctx.lipschitz,
        };
        own.push(sdp_chain(&x).unwrap().sigma);
    }
    // The common σ is the strictest silo's own σ.
    let max = own.iter().copied().fold(0.0, f64::max);
    assert_eq!(sigma, max, "{own:?}");
    own
}

#[test]
fn per_silo_budgets_share_the_strictest_silos_sigma() {
    let text = dpfl_testkit::SyntheticBinary {
        name: "trusted-budgets",
        rounds: 3,
        participation: "{ kind = \"all\" }",
        silos: 6,
        train: 100,
        features: 4,
    }
    .toml(
        "epsilons = [1.0, 15.0, 15.0, 15.0, 15.0, 15.0]",
        SDP_TRUSTED,
    );
    let spec = ExperimentSpec::from_toml(&text, "trusted-budgets.toml").unwrap();
    let own = check_one_randomizer(&spec);
    // Before the fix silo 1 ran its own, half as large σ (2.71 vs 1.36 here).
    assert!(own[1] < own[0] / 1.9, "{own:?}");
}

#[test]
fn unequal_silo_sizes_share_the_strictest_silos_sigma() {
    // Obesity by class, unbalanced: seven silos of different n_i (and δ_i = 1/n_i²).
    let text = r#"
name = "trusted-sizes"
rounds = 3
seed = 1
participation = { kind = "all" }
[data]
source = { kind = "obesity" }
partition = { kind = "by-class" }
[model]
kind = "softmax"
[privacy]
epsilon = 2.0
delta = "1/n^2"
lipschitz = 2.0
"#
    .to_string()
        + SDP_TRUSTED;
    let spec = ExperimentSpec::from_toml(&text, "trusted-sizes.toml").unwrap();
    let own = check_one_randomizer(&spec);
    let min = own.iter().copied().fold(f64::INFINITY, f64::min);
    let max = own.iter().copied().fold(0.0, f64::max);
    assert!(
        min < max,
        "the silos' own sigmas would have differed: {own:?}"
    );
}

/// Φ̄(x) = P(N(0,1) > x) by composite Simpson over [x, x + 40] (relative error far below
/// what the bounds here need).
fn normal_sf(x: f64) -> f64 {
    let n = 40_000;
    let h = 40.0 / n as f64;
    let pdf = |u: f64| (-0.5 * u * u).exp() / (2.0 * std::f64::consts::PI).sqrt();
    let mut s = pdf(x) + pdf(x + 40.0);
    for i in 1..n {
        s += pdf(x + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0
}

/// The best ε lower bound at δ of the threshold test "silo 0's gradient is +L" ⇔ "its
/// projection exceeds t", for a report N(±L, σ²) identified with probability at least
/// 1 − `p_mis`, over a grid of thresholds: ln((TPR − p_mis − δ)/(FPR + p_mis)).
fn threshold_lower_bound(sigma: f64, l: f64, p_mis: f64, delta: f64) -> f64 {
    let mut best: f64 = 0.0;
    for k in 0..200 {
        let t = k as f64 * 0.05 * sigma;
        let tpr = normal_sf((t - l) / sigma) - p_mis - delta;
        let fpr = normal_sf((t + l) / sigma) + p_mis;
        if tpr > 0.0 {
            best = best.max((tpr / fpr).ln());
        }
    }
    best
}

#[test]
fn the_norm_attack_breaks_per_silo_sigmas_and_not_the_common_one() {
    // One round, K = n = 1 (no record sampling), M = N = 20 000 silos, δ = 1e-6, L = 1
    // (issue 27's case): silo 0 asks ε = 1, every other silo ε = 15. Neighbouring datasets
    // differ in silo 0's record, whose gradient is +L·e₁ or −L·e₁; every other silo's
    // gradient is 0.
    let m = 20_000;
    let x0 = SdpInputs {
        epsilon: 1.0,
        delta: 1e-6,
        records: 1,
        batch_size: 1,
        silos: m,
        participants: m,
        rounds: 1,
        lipschitz: 1.0,
    };
    let xj = SdpInputs {
        epsilon: 15.0,
        ..x0
    };
    let (c0, cj) = (sdp_chain(&x0).unwrap(), sdp_chain(&xj).unwrap());
    let (s0, sj) = (c0.sigma, cj.sigma);
    let (eps0, delta0) = c0.local.unwrap();
    let charge = |round: (f64, f64)| {
        AccountantKind::Advanced
            .epsilon(
                Neighbouring::ReplaceOne,
                &PrivacyEvent::EpsilonDelta {
                    epsilon: round.0,
                    delta: round.1,
                },
                Delta::new(1e-6).unwrap(),
            )
            .unwrap()
    };
    // Old configuration: silo 0 ran σ₀ and was charged its own amplified guarantee.
    let old_charge =
        charge(round_guarantee(&x0, eps0, delta0, dpfl::testing::shuffle::delta_a(&x0)).unwrap());
    assert!(
        old_charge <= 1.0 + 1e-9 && s0 > 2.0 * sj,
        "{old_charge} {s0} {sj}"
    );
    // The attack: the server takes the largest-norm report as silo 0's. In d = 4096
    // dimensions (d is free: the calibration does not depend on it) identification is
    // certain up to p_mis by Laurent & Massart 2000 Lemma 1 (χ²_d ≤ d − 2√(dx) and
    // χ²_d ≥ d + 2√(dx) + 2x each with probability ≤ e^{−x}), x = 60: silo 0's norm is at
    // least σ₀√(d − 2√(dx)) − L, every other at most σ_j√(d + 2√(dx) + 2x).
    let (d, xx) = (4096.0f64, 60.0f64);
    let low0 = s0 * (d - 2.0 * (d * xx).sqrt()).sqrt() - 1.0;
    let high_j = sj * (d + 2.0 * (d * xx).sqrt() + 2.0 * xx).sqrt();
    assert!(low0 > high_j, "{low0} {high_j}");
    let p_mis = m as f64 * (-xx).exp();
    let old_lower = threshold_lower_bound(s0, 1.0, p_mis, 1e-6);
    eprintln!(
        "M = {m}: sigma_0 = {s0:.4}, sigma_j = {sj:.4}; old charge {old_charge:.4}, attack lower bound {old_lower:.4}"
    );
    assert!(
        old_lower > old_charge + 1.0,
        "old: attack lower bound {old_lower} vs charged {old_charge}"
    );

    // Accepted configuration: every silo runs σ* = max σ_i = σ₀, silo 0 charged the shared
    // randomizer's guarantee at its own δ̂₀ (the same as its chain: it is the strictest).
    assert!(s0 >= sj);
    let shared = shared_round(&x0, s0, delta0).unwrap();
    let new_charge = charge(shared.round);
    assert!(new_charge <= 1.0 + 1e-9);
    // The same attack by simulation (d = 1, where a report's norm tells most about silo 0's
    // gradient): 2 000 datasets of each kind, every report drawn by the Gaussian mechanism
    // from a seeded DpRng.
    let mech = GaussianMechanism::new(s0, 2.0).unwrap();
    let mut rng = DpRng::from_seed(27, Purpose::Silo, 0);
    let trials = 2_000;
    let mut picked = [Vec::with_capacity(trials), Vec::with_capacity(trials)];
    let mut reports = vec![0.0; m];
    for (side, sign) in [(0usize, 1.0f64), (1, -1.0)] {
        for _ in 0..trials {
            reports.iter_mut().for_each(|r| *r = 0.0);
            reports[0] = sign;
            mech.privatize(&mut reports, &mut rng);
            let top = reports
                .iter()
                .copied()
                .max_by(|a, b| a.abs().total_cmp(&b.abs()))
                .unwrap();
            picked[side].push(top);
        }
    }
    // Hoeffding at confidence 1 − 1e-3 per rate: a lower bound on TPR, an upper on FPR.
    let slack = ((1e3f64).ln() / (2.0 * trials as f64)).sqrt();
    let mut new_lower: f64 = 0.0;
    let mut point: f64 = 0.0;
    for k in -40..=40 {
        let t = k as f64 * 0.1 * s0;
        let rate = |v: &[f64]| v.iter().filter(|&&p| p > t).count() as f64 / trials as f64;
        let (tpr, fpr) = (rate(&picked[0]), rate(&picked[1]));
        if tpr - slack - 1e-6 > 0.0 {
            new_lower = new_lower.max(((tpr - slack - 1e-6) / (fpr + slack).min(1.0)).ln());
        }
        if tpr.min(fpr) * trials as f64 >= 50.0 {
            point = point.max((tpr / fpr).ln());
        }
    }
    eprintln!(
        "accepted: charge {new_charge:.4}, attack lower bound {new_lower:.4} (point estimate {point:.4})"
    );
    assert!(
        new_lower <= new_charge,
        "accepted: attack lower bound {new_lower} > charged {new_charge}"
    );
    // Even the attack's point estimate stays far below the charge: identification by norm
    // fails when every report has the same noise.
    assert!(point < 0.5 * new_charge, "{point} vs {new_charge}");
}
