//! Ledger behaviour: refusal at the crossing release, also after a restart; idempotence.

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::accountant::rdp::RdpAccountant;
use dpfl_privacy::event::Sampling;
use dpfl_privacy::ledger::{Budget, Charge, Ledger};
use dpfl_privacy::{Delta, Neighbouring, PrivacyError, PrivacyEvent};

fn gaussian(z: f64) -> PrivacyEvent {
    PrivacyEvent::Gaussian {
        noise_multiplier: z,
    }
}

/// zCDP with z = 10: ρ = 0.005 per release; at δ = e^{-4}, ε(R) = 0.005R + 4√(0.005R).
/// ε ≤ 1 ⇔ √(0.005R) ≤ √5 − 2 ⇔ R ≤ 11.1456, so release 11 (the 12th) is refused.
#[test]
fn refuses_the_crossing_release_by_hand() {
    let budget = Budget::new(1.0, (-4.0f64).exp(), Neighbouring::AddRemove).unwrap();
    let mut l = Ledger::in_memory(budget, AccountantKind::Zcdp);
    for r in 0..11 {
        assert_eq!(
            l.charge(r, &gaussian(10.0)).unwrap(),
            Charge::New,
            "round {r}"
        );
    }
    let spent = l.spent_epsilon().unwrap();
    let want = 0.055 + 4.0 * 0.055f64.sqrt();
    assert!((spent - want).abs() < 1e-9, "{spent} vs {want}");
    assert!(!l.would_allow(&gaussian(10.0)).unwrap());
    match l.charge(11, &gaussian(10.0)) {
        Err(PrivacyError::BudgetExceeded {
            release,
            spent: s,
            requested,
            budget,
            ..
        }) => {
            assert_eq!(release, 11);
            assert_eq!(s, spent);
            assert!((requested - (0.06 + 4.0 * 0.06f64.sqrt())).abs() < 1e-9);
            assert_eq!(budget, 1.0);
        }
        other => panic!("expected BudgetExceeded, got {other:?}"),
    }
    // Nothing was recorded by the refusal.
    assert_eq!(l.releases().count(), 11);
    assert_eq!(l.spent_epsilon().unwrap(), spent);
    // A cheaper release still fits: one more at z = 100 costs ρ = 5e-5.
    assert!(l.would_allow(&gaussian(100.0)).unwrap());
}

#[test]
fn charging_is_idempotent_per_release() {
    let budget = Budget::new(1.0, 1e-5, Neighbouring::AddRemove).unwrap();
    let mut l = Ledger::in_memory(budget, AccountantKind::Rdp);
    assert_eq!(l.charge(7, &gaussian(5.0)).unwrap(), Charge::New);
    let s = l.spent_epsilon().unwrap();
    assert_eq!(l.charge(7, &gaussian(5.0)).unwrap(), Charge::AlreadyCharged);
    assert_eq!(l.spent_epsilon().unwrap(), s);
    assert!(matches!(
        l.charge(7, &gaussian(6.0)),
        Err(PrivacyError::ReleaseConflict { release: 7, .. })
    ));
}

#[test]
fn a_restart_cannot_reset_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("silo-0.ledger.json");
    let budget = Budget::new(1.0, 1e-5, Neighbouring::AddRemove).unwrap();
    let e = gaussian(2.0).sampled(Sampling::Poisson { rate: 0.05 });
    // The crossing round according to the accountant alone.
    let acc = RdpAccountant::new(Neighbouring::AddRemove);
    let d = Delta::new(1e-5).unwrap();
    let crossing = (1..1000u64)
        .find(|&r| acc.epsilon(&e.clone().repeated(r), d).unwrap() > 1.0)
        .unwrap();
    assert!(crossing > 5, "{crossing}");
    let half = crossing / 2;
    {
        let mut l = Ledger::open(&path, budget, AccountantKind::Rdp).unwrap();
        for r in 0..half {
            l.charge(r, &e).unwrap();
        }
    }
    // Restart: the spend is still there.
    let mut l = Ledger::open(&path, budget, AccountantKind::Rdp).unwrap();
    assert_eq!(l.releases().count() as u64, half);
    let want = acc.epsilon(&e.clone().repeated(half), d).unwrap();
    assert!((l.spent_epsilon().unwrap() - want).abs() <= 1e-12 * want);
    // Re-sending an old round is free, as before the restart.
    assert_eq!(l.charge(0, &e).unwrap(), Charge::AlreadyCharged);
    for r in half..crossing - 1 {
        l.charge(r, &e).unwrap();
    }
    drop(l);
    let mut l = Ledger::open(&path, budget, AccountantKind::Rdp).unwrap();
    assert!(matches!(
        l.charge(crossing - 1, &e),
        Err(PrivacyError::BudgetExceeded { release, .. }) if release == crossing - 1
    ));
    drop(l);
    // Still refused after another restart: the refusal recorded nothing and nothing was lost.
    let mut l = Ledger::open(&path, budget, AccountantKind::Rdp).unwrap();
    assert_eq!(l.releases().count() as u64, crossing - 1);
    assert!(l.charge(crossing - 1, &e).is_err());

    // Reopening with another budget or accountant is an error, not a reset.
    let bigger = Budget::new(2.0, 1e-5, Neighbouring::AddRemove).unwrap();
    assert!(matches!(
        Ledger::open(&path, bigger, AccountantKind::Rdp),
        Err(PrivacyError::Ledger { .. })
    ));
    assert!(matches!(
        Ledger::open(&path, budget, AccountantKind::Zcdp),
        Err(PrivacyError::Ledger { .. })
    ));
    // A corrupt file is an error too.
    std::fs::write(&path, "{not json").unwrap();
    assert!(matches!(
        Ledger::open(&path, budget, AccountantKind::Rdp),
        Err(PrivacyError::Ledger { .. })
    ));
}

#[test]
fn a_pld_ledger_refuses_where_the_pld_accountant_crosses() {
    use dpfl_privacy::accountant::pld::PldAccountant;
    let budget = Budget::new(1.0, 1e-5, Neighbouring::AddRemove).unwrap();
    let e = gaussian(2.0).sampled(Sampling::Poisson { rate: 0.1 });
    let acc = PldAccountant::new(Neighbouring::AddRemove);
    let d = Delta::new(1e-5).unwrap();
    let crossing = (1..200u64)
        .find(|&r| acc.epsilon(&e.clone().repeated(r), d).unwrap() > 1.0)
        .unwrap();
    let mut l = Ledger::in_memory(budget, AccountantKind::Pld);
    for r in 0..crossing - 1 {
        assert_eq!(l.charge(r, &e).unwrap(), Charge::New);
    }
    assert!(matches!(
        l.charge(crossing - 1, &e),
        Err(PrivacyError::BudgetExceeded { release, .. }) if release == crossing - 1
    ));
    // PLD is tighter than RDP here: the RDP ledger refuses no later.
    let rdp = RdpAccountant::new(Neighbouring::AddRemove);
    assert!(
        rdp.epsilon(&e.clone().repeated(crossing - 1), d).unwrap() >= l.spent_epsilon().unwrap()
    );
}

/// Issue 27 (finding 7): only a missing ledger starts afresh. An emptied file, `[]`, `null`,
/// a cut-short file, an older unchecked format, and a ledger whose release list was emptied
/// (or any record edited) are refused, naming the file; nothing is written over them.
#[test]
fn an_emptied_or_damaged_ledger_is_refused_never_a_fresh_budget() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("silo-0.ledger.json");
    let budget = Budget::new(1.0, 1e-5, Neighbouring::ReplaceOne).unwrap();
    {
        let mut l = Ledger::open(&path, budget, AccountantKind::Rdp).unwrap();
        l.charge(1, &gaussian(10.0)).unwrap();
        l.charge(2, &gaussian(10.0)).unwrap();
    }
    let good = std::fs::read_to_string(&path).unwrap();
    assert!(good.contains("\"format\": \"dpfl-ledger/2\"") && good.contains("\"sha256\""));
    let emptied = {
        let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
        v["releases"] = serde_json::json!([]);
        serde_json::to_string_pretty(&v).unwrap()
    };
    let edited = good.replacen("\"release\": 2", "\"release\": 9", 1);
    assert_ne!(edited, good);
    let cases: [(&str, String, &str); 8] = [
        ("0 bytes", String::new(), "the ledger is empty (0 bytes)"),
        ("whitespace", "\n  \n".into(), "the ledger is empty"),
        ("[]", "[]".into(), "a JSON array"),
        ("null", "null".into(), "a JSON null"),
        ("cut short", good[..good.len() / 2].into(), "not a ledger"),
        (
            "release list emptied",
            emptied,
            "does not match its `sha256` (0 releases",
        ),
        (
            "a release renumbered",
            edited,
            "does not match its `sha256`",
        ),
        (
            "older format",
            good.replace("dpfl-ledger/2", "dpfl-ledger/1"),
            "dpfl-ledger/1 ledger of an older dpfl",
        ),
    ];
    for (what, text, expect) in cases {
        std::fs::write(&path, &text).unwrap();
        let e = Ledger::open(&path, budget, AccountantKind::Rdp)
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"))
            .to_string();
        assert!(e.contains("silo-0.ledger.json"), "{what}: {e}");
        assert!(e.contains(expect), "{what}: {e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "{what}");
    }
    // The good file still opens with both releases; a missing one starts afresh.
    std::fs::write(&path, &good).unwrap();
    let l = Ledger::open(&path, budget, AccountantKind::Rdp).unwrap();
    assert_eq!(l.releases().map(|(r, _)| r).collect::<Vec<_>>(), vec![1, 2]);
    std::fs::remove_file(&path).unwrap();
    let l = Ledger::open(&path, budget, AccountantKind::Rdp).unwrap();
    assert_eq!(l.releases().count(), 0);
}

/// Issue 29: the stored checksum is over the re-serialised parse of the file, so a noise
/// multiplier serde_json's fast float parser reads an ulp off (1.6463542662095279, a SoteriaFL
/// silo's, is one) made a sound ledger "edited or damaged" on reopening. Every f64 of a
/// release must parse back to itself (serde_json's `float_roundtrip`).
#[test]
fn a_ledger_reopens_whatever_its_floats() {
    let dir = tempfile::tempdir().unwrap();
    let budget = Budget::new(100.0, 1e-5, Neighbouring::AddRemove).unwrap();
    let mut zs = vec![1.6463542662095279, 0.1 + 0.2, 3.5342165669843895];
    // Many more, spread over magnitudes: each written, reopened and charged again.
    let mut x = 0.7318007233f64;
    for _ in 0..200 {
        x = (x * 7.123456789 + 0.3711).fract();
        zs.push(0.5 + 20.0 * x);
    }
    for (i, z) in zs.iter().enumerate() {
        let path = dir.path().join(format!("l{i}.json"));
        {
            let mut l = Ledger::open(&path, budget, AccountantKind::Rdp).unwrap();
            l.charge(0, &gaussian(*z)).unwrap();
        }
        let mut l = Ledger::open(&path, budget, AccountantKind::Rdp)
            .unwrap_or_else(|e| panic!("z = {z:?}: {e}"));
        assert_eq!(
            l.charge(0, &gaussian(*z)).unwrap(),
            Charge::AlreadyCharged,
            "z = {z:?}"
        );
    }
}
