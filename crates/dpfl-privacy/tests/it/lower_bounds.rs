//! Issue 27 finding 3: lower bounds that are lower bounds.
//!
//! * Poisson sampling under replace-one is accounted with the ball pair of clipped
//!   contributions, dp-accounting 0.6's REPLACE_ONE (golden values from
//!   `scripts/golden_ball_pair.py`): the PLD upper bound and the lower bound bracket
//!   dp-accounting's optimistic/pessimistic pair.
//! * A sweep over extreme (q, z, T, δ): no lower bound ever exceeds an upper bound that dpfl
//!   computes for the same event.

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::accountant::lower_bound::epsilon_lower_bound_at;
use dpfl_privacy::accountant::pld::PldAccountant;
use dpfl_privacy::event::Sampling;
use dpfl_privacy::{Delta, Neighbouring, PrivacyEvent};

fn poisson(z: f64, q: f64, t: u64) -> PrivacyEvent {
    PrivacyEvent::Gaussian {
        noise_multiplier: z,
    }
    .sampled(Sampling::Poisson { rate: q })
    .repeated(t)
}

#[test]
fn poisson_replace_one_brackets_dp_accountings_replace_one() {
    // (z, q, T, δ, dp-accounting pessimistic, optimistic) at noise multiplier 2z.
    let golden = [
        (
            1.0,
            0.01,
            1000,
            1e-5,
            1.205_209_604_146_427,
            1.155_203_704_808_679_6,
        ),
        (
            0.8,
            0.05,
            100,
            1e-6,
            2.939_769_353_666_416,
            2.934_768_986_337_763_5,
        ),
        (
            2.0,
            0.1,
            10,
            1e-5,
            0.565_285_583_866_685_4,
            0.564_785_479_961_696_4,
        ),
        (
            0.5,
            0.2,
            50,
            1e-3,
            11.686_712_256_355_278,
            11.684_212_192_721_082,
        ),
        (
            1.5,
            1.0,
            5,
            1e-5,
            6.999_226_706_605_671,
            6.998_976_696_356_442,
        ),
    ];
    let nb = Neighbouring::ReplaceOne;
    for (z, q, t, d, upper, lower) in golden {
        let e = poisson(z, q, t);
        let delta = Delta::new(d).unwrap();
        let pld = AccountantKind::Pld.epsilon(nb, &e, delta).unwrap();
        let lb = epsilon_lower_bound_at(&e, nb, delta, 1e-4)
            .unwrap()
            .unwrap();
        // The truth lies in [optimistic, pessimistic]; dpfl's upper bound is never below the
        // optimistic one and its lower bound never above the pessimistic one.
        assert!(
            pld >= lower - 1e-9 && pld <= upper + 0.01,
            "{z} {q} {t}: pld {pld}"
        );
        assert!(
            lb <= upper + 1e-9 && lb >= lower - 0.01,
            "{z} {q} {t}: lower {lb}"
        );
        assert!(lb <= pld, "{z} {q} {t}: {lb} > {pld}");
    }
}

#[test]
fn no_lower_bound_exceeds_an_upper_bound_over_extreme_cases() {
    let cases: Vec<(&str, PrivacyEvent, Neighbouring, f64)> = vec![
        (
            "poisson q=1e-4 z=0.4",
            poisson(0.4, 1e-4, 1000),
            Neighbouring::ReplaceOne,
            1e-5,
        ),
        (
            "poisson q=1e-4 z=0.4 add/remove",
            poisson(0.4, 1e-4, 1000),
            Neighbouring::AddRemove,
            1e-5,
        ),
        (
            "poisson q=0.5 z=0.6 T=20",
            poisson(0.6, 0.5, 20),
            Neighbouring::AddRemove,
            1e-3,
        ),
        (
            "poisson q=0.01 z=2 T=1e5 δ=1e-12",
            poisson(2.0, 0.01, 100_000),
            Neighbouring::AddRemove,
            1e-12,
        ),
        (
            "poisson q=0.01 z=2 T=1e4 δ=1e-9 replace-one",
            poisson(2.0, 0.01, 10_000),
            Neighbouring::ReplaceOne,
            1e-9,
        ),
        (
            "gaussian z=0.527 T=48441",
            PrivacyEvent::Gaussian {
                noise_multiplier: 0.527,
            }
            .repeated(48_441),
            Neighbouring::AddRemove,
            4e-5,
        ),
        (
            "gaussian z=50 T=1e5 δ=1e-12",
            PrivacyEvent::Gaussian {
                noise_multiplier: 50.0,
            }
            .repeated(100_000),
            Neighbouring::ReplaceOne,
            1e-12,
        ),
        (
            "with replacement K=3 of 100 z=0.8 T=200",
            PrivacyEvent::Gaussian {
                noise_multiplier: 0.8,
            }
            .sampled(Sampling::WithReplacement {
                population: 100,
                draws: 3,
            })
            .repeated(200),
            Neighbouring::ReplaceOne,
            1e-6,
        ),
    ];
    for (name, e, nb, d) in cases {
        let delta = Delta::new(d).unwrap();
        let uppers: Vec<(&str, f64)> = [
            ("rdp", AccountantKind::Rdp.epsilon(nb, &e, delta)),
            (
                "pld",
                PldAccountant::with_discretization(nb, 1e-3)
                    .unwrap()
                    .epsilon(&e, delta),
            ),
        ]
        .into_iter()
        .filter_map(|(k, r)| r.ok().map(|v| (k, v)))
        .collect();
        assert!(!uppers.is_empty(), "{name}: no upper bound");
        // A refused bound (Err) or none is always sound; a stated one must be below every
        // upper bound.
        if let Ok(Some(lb)) = epsilon_lower_bound_at(&e, nb, delta, 1e-3) {
            for (k, u) in &uppers {
                assert!(lb <= *u, "{name}: lower {lb} > {k} {u}");
            }
        }
    }
}
