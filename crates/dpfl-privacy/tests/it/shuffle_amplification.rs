//! Amplification by shuffling as a privacy event (`PrivacyEvent::ShuffledLocal`), checked
//! against Feldman, McMillan & Talwar's published values and composed over rounds.
//!
//! Reference numbers: the first row is the example printed in the README of the authors'
//! code (github.com/apple/ml-shuffling-amplification, the companion of arXiv 2012.12803,
//! Appendix E); the other rows are outputs of that same published code
//! (`closedformanalysis`, and `numericalanalysis(n, eps0, delta, 10, 100, False/True)` for
//! the lower/upper bracket), run unmodified on scipy 1.17.1.

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::shuffle::amplification::{amplify, closed_form, numerical};
use dpfl_privacy::{Delta, Neighbouring, PrivacyEvent};

/// (n, ε₀, δ, closed form, numerical lower, numerical upper).
const FMT: [(u64, f64, f64, f64, f64, f64); 5] = [
    (
        100_000,
        4.0,
        1e-6,
        0.5378040242374512,
        0.1675385583317841,
        0.172790550755978,
    ),
    (
        10_000,
        1.0,
        1e-6,
        0.2332655961237434,
        0.05284923662178562,
        0.0535326319229294,
    ),
    (
        1_000,
        0.5,
        1e-6,
        0.33483647172226294,
        0.06801365831858466,
        0.0745534331569101,
    ),
    (
        100_000,
        2.0,
        1e-8,
        0.21531925884759595,
        0.05866608712742116,
        0.05950717798229458,
    ),
    (
        10_000,
        3.0,
        1e-6,
        0.8400272619177827,
        0.310088188481369,
        0.34864412726079846,
    ),
];

#[test]
fn closed_form_and_numerical_bounds_match_fmt_published_values() {
    for (n, e0, d, cf, lo, hi) in FMT {
        let c = closed_form(n, e0, d).unwrap();
        assert!((c - cf).abs() < 1e-12, "n = {n}, eps0 = {e0}: {c} vs {cf}");
        // Ours is the exact divergence of FMT's Thm 3.2 pair: inside their bracket.
        let x = numerical(n, e0, d).unwrap();
        assert!(
            x >= lo && x <= hi,
            "n = {n}, eps0 = {e0}: {x} not in [{lo}, {hi}]"
        );
        let a = amplify(n, e0, d).unwrap();
        assert_eq!(a.epsilon, x.min(cf));
    }
}

fn event(e0: f64, n: u64, d: f64) -> PrivacyEvent {
    PrivacyEvent::ShuffledLocal {
        local_epsilon: e0,
        reports: n,
        delta: d,
    }
}

#[test]
fn the_event_composes_over_rounds_with_the_existing_accountants() {
    let (n, e0, d) = (10_000, 1.0, 1e-6);
    let eps = amplify(n, e0, d).unwrap().epsilon;
    let rounds = event(e0, n, d).repeated(10);
    let nb = Neighbouring::ReplaceOne;
    // Basic composition: 10ε at δ ≥ 10·1e-6.
    let basic = AccountantKind::Basic
        .epsilon(nb, &rounds, Delta::new(1e-5).unwrap())
        .unwrap();
    assert!(
        (basic - 10.0 * eps).abs() < 1e-12,
        "{basic} vs {}",
        10.0 * eps
    );
    // Advanced composition (Dwork & Roth Thm 3.20) at δ = 2e-5, i.e. δ' = 2e-5 − 10·1e-6:
    // ε = √(2·10·ln(1/1e-5))·ε₁ + 10·ε₁(e^{ε₁} − 1), or basic if smaller.
    let adv = AccountantKind::Advanced
        .epsilon(nb, &rounds, Delta::new(2e-5).unwrap())
        .unwrap();
    let formula = (20.0 * (1e5f64).ln()).sqrt() * eps + 10.0 * eps * eps.exp_m1();
    assert!(adv <= formula.min(10.0 * eps) + 1e-9, "{adv} vs {formula}");
    assert!(adv > 0.0 && adv.is_finite());
    // The same as an explicit (ε, δ) event, to the bit.
    let explicit = PrivacyEvent::EpsilonDelta {
        epsilon: eps,
        delta: d,
    }
    .repeated(10);
    assert_eq!(
        AccountantKind::Optimal
            .epsilon(nb, &rounds, Delta::new(2e-5).unwrap())
            .unwrap(),
        AccountantKind::Optimal
            .epsilon(nb, &explicit, Delta::new(2e-5).unwrap())
            .unwrap()
    );
    // RDP has no bound for δ > 0: refused, never 0.
    assert!(
        AccountantKind::Rdp
            .epsilon(nb, &rounds, Delta::new(1e-5).unwrap())
            .is_err()
    );
}

#[test]
fn bad_events_fail_instead_of_costing_nothing() {
    let nb = Neighbouring::ReplaceOne;
    let d = Delta::new(1e-5).unwrap();
    for bad in [
        event(f64::NAN, 100, 1e-6),
        event(f64::INFINITY, 100, 1e-6),
        event(-1.0, 100, 1e-6),
        event(1.0, 0, 1e-6),
        event(1.0, 100, 0.0),
        event(1.0, 100, f64::NAN),
    ] {
        assert!(AccountantKind::Basic.epsilon(nb, &bad, d).is_err(), "{bad}");
    }
    // Sampling a shuffled release has no amplification theorem here: refused.
    let sampled =
        event(1.0, 100, 1e-7).sampled(dpfl_privacy::event::Sampling::Poisson { rate: 0.1 });
    assert!(AccountantKind::Basic.epsilon(nb, &sampled, d).is_err());
    // JSON round trip of the event.
    let e = event(1.0, 100, 1e-7);
    let text = serde_json::to_string(&e).unwrap();
    assert!(text.contains("\"kind\":\"shuffled-local\""), "{text}");
    assert_eq!(serde_json::from_str::<PrivacyEvent>(&text).unwrap(), e);
}
