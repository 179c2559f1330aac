use super::*;
use crate::accountant::gaussian::gaussian_delta;

#[test]
fn hockey_stick_of_the_gaussian_by_hand() {
    // q = 1, z = 1, ε = 1: Φ(−0.5) − eΦ(−1.5) = 0.126936737 (Balle & Wang Thm 8).
    let want = 0.308_537_538_725_986_9 - std::f64::consts::E * 0.066_807_201_268_858_06;
    assert!((delta_remove(1.0, 1.0, 1.0) - want).abs() < 1e-14);
    assert!((delta_add(1.0, 1.0, 1.0) - want).abs() < 1e-14);
    assert!((gaussian_delta(1.0, 1.0).unwrap() - want).abs() < 1e-12);
    // Sampled, remove, ε ≤ log(1−q): δ = 1 − e^ε.
    assert!((delta_remove(0.5, 1.0, -1.0) - (1.0 - (-1.0f64).exp())).abs() < 1e-15);
    // Add direction never exceeds −log(1−q): δ(−log 0.5) = 0.
    assert_eq!(delta_add(0.5, 1.0, 2f64.ln()), 0.0);
}

#[test]
fn single_gaussian_pld_matches_the_exact_curve() {
    let acc = PldAccountant::new(Neighbouring::AddRemove);
    let e = PrivacyEvent::Gaussian {
        noise_multiplier: 2.0,
    };
    let d = Delta::new(1e-5).unwrap();
    let eps = acc.epsilon(&e, d).unwrap();
    let exact = crate::accountant::gaussian::gaussian_epsilon(2.0, d).unwrap();
    // Connect-the-dots is exact at grid points and above the truth in between.
    assert!(
        eps >= exact - 1e-9 && eps <= exact + 1e-4,
        "{eps} vs {exact}"
    );
}

#[test]
fn composition_of_gaussians_is_a_gaussian() {
    // 4 releases at z = 2 equal one at z = 1 (Dong, Roth & Su 2019 Cor. 3.3).
    let acc = PldAccountant::new(Neighbouring::AddRemove);
    let d = Delta::new(1e-6).unwrap();
    let four = acc
        .epsilon(
            &PrivacyEvent::Gaussian {
                noise_multiplier: 2.0,
            }
            .repeated(4),
            d,
        )
        .unwrap();
    let exact = crate::accountant::gaussian::gaussian_epsilon(1.0, d).unwrap();
    assert!(
        four >= exact - 1e-9 && four <= exact * 1.001,
        "{four} vs {exact}"
    );
}

#[test]
fn laplace_by_hand() {
    // b = 1 (ε₀ = 1): δ(ε) = 1 − e^{(ε−1)/2}; δ = 0.1 at ε = 1 + 2 ln 0.9 = 0.789279.
    let acc = PldAccountant::new(Neighbouring::AddRemove);
    let e = PrivacyEvent::Laplace {
        noise_multiplier: 1.0,
    };
    let eps = acc.epsilon(&e, Delta::new(0.1).unwrap()).unwrap();
    let want = 1.0 + 2.0 * 0.9f64.ln();
    assert!(eps >= want - 1e-9 && eps <= want + 1e-4, "{eps} vs {want}");
}

#[test]
fn losses_beyond_the_float_range_by_hand() {
    // One atom at loss 1000 (e^{±1000} is not an f64): δ(ε) = 1 − e^{ε−1000}, so
    // δ = 1e-5 at ε = 1000 + ln(1 − 1e-5). The old code read inf·0 = NaN as "met".
    let pmf = Pmf {
        h: 1e-4,
        lower: 10_000_000,
        probs: vec![1.0],
        infinity: 0.0,
    };
    let eps = pmf.epsilon_for_delta(1e-5).unwrap();
    let want = 1000.0 + (-1e-5f64).ln_1p();
    assert!((eps - want).abs() < 1e-9, "{eps} vs {want}");
    // Far below: atoms at −2000 and 3000 (masses 0.5 each): δ = 0.5(1 − e^{ε−3000}).
    let mut probs = vec![0.0; 50_000_001];
    probs[0] = 0.5;
    probs[50_000_000] = 0.5;
    let pmf = Pmf {
        h: 1e-4,
        lower: -20_000_000,
        probs,
        infinity: 0.0,
    };
    let eps = pmf.epsilon_for_delta(1e-5).unwrap();
    let want = 3000.0 + (-2e-5f64).ln_1p();
    assert!((eps - want).abs() < 1e-8, "{eps} vs {want}");
}

#[test]
fn a_nan_mass_is_an_error_not_a_number() {
    let pmf = Pmf {
        h: 1e-4,
        lower: 0,
        probs: vec![0.5, f64::NAN],
        infinity: 0.0,
    };
    assert!(matches!(
        pmf.epsilon_for_delta(1e-5),
        Err(PrivacyError::Numerical { .. })
    ));
}

#[test]
fn the_issue_case_on_the_pmf_path() {
    // Issue 11: z = 0.8, T = 3000, δ = 1e-5. The truth, δ(ε) = Φ(μ/2 − ε/μ) −
    // e^εΦ(−μ/2 − ε/μ) with μ = √3000/0.8 solved at 50 digits (mpmath), is
    // 2634.7770827180324; dp-accounting 0.6.0 gives 2635.748 (pessimistic) and 2635.597
    // ("optimistic", above the truth here). The Gaussian leaves merge into z/√3000 and
    // the grid is coarsened to fit BIN_BUDGET; the discretised PMF stays above the truth.
    const TRUTH: f64 = 2_634.777_082_718_032_4;
    let acc = PldAccountant::new(Neighbouring::AddRemove);
    let e = PrivacyEvent::Gaussian {
        noise_multiplier: 0.8,
    }
    .repeated(3000);
    let (r, a) = acc.pmfs(&e).unwrap();
    assert!(r.len() <= BIN_BUDGET);
    let pmf_eps = r.epsilon_for_delta(1e-5).unwrap();
    let pmf_eps = pmf_eps.max(a.epsilon_for_delta(1e-5).unwrap());
    assert!((TRUTH..TRUTH + 0.01).contains(&pmf_eps), "{pmf_eps}");
    let exact = acc.epsilon(&e, Delta::new(1e-5).unwrap()).unwrap();
    assert!((TRUTH..TRUTH + 1e-6).contains(&exact), "{exact}");
}

#[test]
fn a_mixed_composition_takes_the_pmf_path() {
    // Gaussian z = 2 and Laplace b = 10: above the Gaussian alone, below the sum of the
    // two ε at δ/2 and 0 (basic composition).
    let acc = PldAccountant::new(Neighbouring::AddRemove);
    let d = Delta::new(1e-5).unwrap();
    let g = PrivacyEvent::Gaussian {
        noise_multiplier: 2.0,
    };
    let l = PrivacyEvent::Laplace {
        noise_multiplier: 10.0,
    };
    let both = acc
        .epsilon(&PrivacyEvent::Composed(vec![g.clone(), l]), d)
        .unwrap();
    let alone = crate::accountant::gaussian::gaussian_epsilon(2.0, d).unwrap();
    let basic =
        crate::accountant::gaussian::gaussian_epsilon(2.0, Delta::new(0.5e-5).unwrap()).unwrap();
    assert!(
        both > alone && both < basic + 0.1,
        "{alone} < {both} < {}",
        basic + 0.1
    );
}

#[test]
fn an_atom_between_grid_points_is_split_keeping_delta_at_the_grid() {
    // Atom at 1.5h: mass (1 − e^{−h/2})/(1 − e^{−h}) = 1/(1 + e^{−h/2}) goes up.
    let h = 0.1;
    let pmf = Pmf::from_atoms(h, &[(0.15, 1.0)], 0.0).unwrap();
    let up = 1.0 / (1.0 + (-0.05f64).exp());
    assert_eq!(pmf.lower, 1);
    assert!((pmf.probs[1] - up).abs() < 1e-15 && (pmf.probs[0] - (1.0 - up)).abs() < 1e-15);
    // δ(0.1) = 1 − e^{0.1−0.15} for the atom, and the same for the split PMF.
    let want = -(-0.05f64).exp_m1();
    assert!((pmf.delta_for_epsilon(0.1) - want).abs() < 1e-12);
    // An atom on the grid stays put.
    let pmf = Pmf::from_atoms(h, &[(0.3, 1.0)], 0.0).unwrap();
    assert!(pmf.probs.iter().filter(|&&p| p > 1e-12).count() == 1);
}

#[test]
fn discrete_laplace_by_hand() {
    // a = 1, Δ = 1: losses ±1 w.p. 1/(1+e^{−1}), e^{−1}/(1+e^{−1}); at δ = 1e-5
    // ε = 1 + ln(1 − 1e-5(1 + e^{−1})) = 0.99998632 (dp-accounting: 0.9999863211120326).
    let pmf = Pmf::discrete_laplace(1e-4, 1.0, 1).unwrap();
    let want = 1.0 + (-1e-5 * (1.0 + (-1.0f64).exp())).ln_1p();
    let got = pmf.epsilon_for_delta(1e-5).unwrap();
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    // Δ = 2, a = 0.5: atoms ±1 and 0 (x = 1, mass tanh(1/4)e^{−1/2}); the masses sum to 1.
    let pmf = Pmf::discrete_laplace(0.5, 0.5, 2).unwrap();
    let total: f64 = pmf.probs.iter().sum();
    assert!((total - 1.0).abs() < 1e-14, "{total}");
    let mid = (0.25f64).tanh() * (-0.5f64).exp();
    assert!((pmf.probs[(0 - pmf.lower) as usize] - mid).abs() < 1e-15);
}

#[test]
fn discrete_laplace_far_below_the_grid_is_tight() {
    // Issue 11: z = 1e6, T = 1e6 gave ε = 50. Exact (Binomial over ±1e-6 losses,
    // scripts/golden_dp_accounting.py): 0.0019387247346603358 at δ = 1e-5.
    let acc = PldAccountant::new(Neighbouring::AddRemove);
    let e = PrivacyEvent::DiscreteLaplace {
        noise_multiplier: 1e6,
    }
    .repeated(1_000_000);
    let got = acc.epsilon(&e, Delta::new(1e-5).unwrap()).unwrap();
    let exact = 0.001_938_724_734_660_335_8;
    assert!(
        got >= exact * (1.0 - 1e-9) && got <= exact * 1.001,
        "{got} vs {exact}"
    );
}

#[test]
fn discrete_gaussian_by_hand() {
    // σ = 1, Δ = 1, one release: the loss at x is ½ − x, so the PLD has atoms at
    // 4.5, 5.5, … (x = −4, −5, …) above ε = 4.43; dp-accounting: 4.430238055279412.
    let pmf = Pmf::discrete_gaussian(1e-4, 1.0, 1).unwrap();
    let z: f64 = (-40i32..=40).map(|x| (-(x * x) as f64 / 2.0).exp()).sum();
    let p = |x: i32| (-(x * x) as f64 / 2.0).exp() / z;
    let d = |e: f64| -> f64 {
        (4..=40)
            .map(|k| p(k) * -(e - (k as f64 + 0.5)).exp_m1())
            .filter(|v| *v > 0.0)
            .sum()
    };
    let got = pmf.epsilon_for_delta(1e-5).unwrap();
    assert!((d(got) - 1e-5).abs() < 1e-12, "δ({got}) = {}", d(got));
    assert!((got - 4.430_238_055_279_412).abs() < 1e-9, "{got}");
}

#[test]
fn eps_delta_event_by_hand() {
    // A (1, 1e-6) event alone: ε at δ = 1e-6 is 1 (rounded up to the grid).
    let acc = PldAccountant::new(Neighbouring::ReplaceOne);
    let e = PrivacyEvent::EpsilonDelta {
        epsilon: 1.0,
        delta: 1e-6,
    };
    let eps = acc.epsilon(&e, Delta::new(1e-6).unwrap()).unwrap();
    assert!((eps - 1.0).abs() < 2e-4, "{eps}");
    // δ too small for the event's own δ is an error, not a wrong number.
    assert!(acc.epsilon(&e, Delta::new(1e-7).unwrap()).is_err());
}
