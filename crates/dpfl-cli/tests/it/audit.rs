//! `dpfl audit` end to end: the built binary on a compressed algorithm (SoteriaFL with seeded
//! random-k) and on a network (MB-SGD on an MLP), its JSON checked field by field and against
//! the library's bound for the reported guesses; bad input gives one clear error line and a
//! non-zero exit. The experiment files are `dpfl_testkit::audit`'s, the ones the library's
//! audit tests use. Each audit here is honest (the under-noised builds are a test-only switch
//! of the library; `crates/dpfl-lab/src/audit/tests.rs`), so each bound must stay at or below the
//! claimed ε = 1.

use crate::common;

use std::path::PathBuf;

use common::dpfl;
use dpfl_testkit::audit::{
    LOGISTIC, MB_SGD, MLP, SOTERIA_RANDK, experiment as audit_experiment, kinds_toml,
};

fn experiment(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// Runs `dpfl audit PATH ARGS`, asserts success, returns its one JSON object.
fn audit_json(path: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["audit", path.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = dpfl(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "one JSON line: {stdout}");
    serde_json::from_str(&stdout).unwrap()
}

/// The fields every honest audit of the shared experiments reports: claim (1, 1/200²) (silo
/// 0 holds 100 records and the 100 canaries), m = 100 canaries, k = 25 a side, 95 %, and a
/// bound that is the library's for the reported number of correct guesses and at most 1.
fn assert_honest_report(v: &serde_json::Value, algorithm: &str, scored: &str) {
    assert_eq!(v["algorithm"], algorithm, "{v}");
    assert_eq!(v["scored"], scored, "{v}");
    assert_eq!(v["claimed_epsilon"], 1.0, "{v}");
    assert_eq!(v["delta"], 1.0 / 40_000.0, "{v}");
    assert_eq!(v["confidence"], 0.95, "{v}");
    assert_eq!(
        (v["canaries"].as_u64(), v["k"].as_u64()),
        (Some(100), Some(25))
    );
    assert_eq!(v["guesses"], 50, "{v}");
    let included = v["included"].as_u64().unwrap();
    assert!((30..=70).contains(&included), "{v}");
    let correct = v["correct"].as_u64().unwrap();
    assert!(correct <= 50, "{v}");
    let bound = v["epsilon_lower_bound"].as_f64().unwrap();
    // Two scores (sum and max) by default, each bounded at 1 − 0.05/2.
    assert_eq!(v["score_confidence"], 0.975, "{v}");
    assert_eq!(v["scores"].as_array().map(Vec::len), Some(2), "{v}");
    let expected = dpfl_lab::audit::epsilon_lower_bound(
        dpfl_lab::audit::Guesses {
            m: 100,
            r: 50,
            v: correct,
        },
        1.0 / 40_000.0,
        0.025,
    )
    .unwrap();
    assert_eq!(bound, expected, "{v}");
    assert!((0.0..=1.0).contains(&bound), "honest run refuted: {v}");
    let certified = v["certified_epsilon"].as_f64().unwrap();
    assert!(bound <= certified && certified <= 1.05, "{v}");
    assert!(v["seconds"].as_f64().unwrap() > 0.0, "{v}");
}

#[test]
fn audit_of_compressed_soteria_scores_the_rebuilt_shift() {
    let (_dir, path) = experiment("soteria.toml", &kinds_toml(30, LOGISTIC, SOTERIA_RANDK));
    let v = audit_json(&path, &["--canaries", "100", "--k", "25"]);
    assert_honest_report(
        &v,
        "SoteriaFL-GD",
        "silo 0's shift plus its decoded compressed difference",
    );
}

#[test]
fn audit_of_an_mlp_uses_first_layer_canaries() {
    let (_dir, path) = experiment("mlp.toml", &kinds_toml(50, MLP, MB_SGD));
    let v = audit_json(&path, &["--canaries", "100", "--k", "25", "--seed", "1"]);
    assert_honest_report(&v, "ISRL-DP MB-SGD", "silo 0's decoded messages");
}

/// Bad input: one `error:` line naming the culprit, exit code 2, no panic.
#[test]
fn audit_refuses_bad_input() {
    let (_dir, path) = experiment("a.toml", &audit_experiment());
    let exp = path.to_str().unwrap();
    // The shared experiment's Local SGD (closed form, quick): a good run first.
    let v = audit_json(
        &path,
        &["--algorithm", "1", "--canaries", "40", "--k", "10"],
    );
    assert_eq!(
        (v["canaries"].as_u64(), v["guesses"].as_u64()),
        (Some(40), Some(20))
    );
    assert!(
        (0.0..=1.0).contains(&v["epsilon_lower_bound"].as_f64().unwrap()),
        "{v}"
    );
    for (args, fragments) in [
        (
            vec!["audit", exp, "--canaries", "40", "--k", "30"],
            vec!["a.toml", "2k"],
        ),
        (vec!["audit", exp, "--algorithm", "4"], vec!["not private"]),
        (
            vec!["audit", exp, "--algorithm", "9"],
            vec!["--algorithm", "the experiment has 5 algorithms"],
        ),
        (
            vec!["audit", exp, "--confidence", "1.5"],
            vec!["--confidence", "(0, 1)"],
        ),
        (
            vec!["audit", exp, "--score", "median"],
            vec!["--score", "sum, max, both"],
        ),
        (
            vec!["audit", "/nonexistent/x.toml"],
            vec!["/nonexistent/x.toml"],
        ),
    ] {
        let out = dpfl(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "panic: {err}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{args:?}: one error line, got {err}");
        assert!(lines[0].starts_with("error: "), "{err}");
        for f in fragments {
            assert!(lines[0].contains(f), "{args:?}: missing {f:?} in {err}");
        }
    }
}
