//! `dpfl account` and `dpfl calibrate`: one JSON object on success; one error line and exit
//! code 2 on bad flags.

use std::process::{Command, Output};
use std::sync::LazyLock;

use dpfl_testkit::experiment::Head;

use serde_json::Value;

fn dpfl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args(args)
        .output()
        .expect("run dpfl")
}

fn json(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.lines().count(), 1, "one JSON object: {stdout}");
    serde_json::from_str(&stdout).expect("JSON")
}

fn assert_usage_error(out: &Output, fragment: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one error line: {err}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(fragment),
        "{err}"
    );
}

const POISSON: [&str; 14] = [
    "account",
    "--mechanism",
    "gaussian",
    "--noise-multiplier",
    "1.0",
    "--sampling",
    "poisson",
    "--rate",
    "0.01",
    "--steps",
    "1000",
    "--delta",
    "1e-5",
    "--accountant",
];

#[test]
fn account_rdp_matches_dp_accounting() {
    let mut a = POISSON.to_vec();
    a.push("rdp");
    let v = json(&dpfl(&a));
    // dp-accounting 0.6.0 RdpAccountant: 2.101366525420273 (golden file).
    let e = v["rdp_epsilon"].as_f64().unwrap();
    assert!((e - 2.101_366_525_420_273).abs() < 1e-6, "{v}");
    assert_eq!(v["delta"], 1e-5);
    assert_eq!(v["accountant"], "rdp");
    assert_eq!(v["neighbouring"], "add-remove");
    // Issue 27: the PLD is computed too and the tighter of the two is the answer.
    let pld = v["pld_epsilon"].as_f64().unwrap();
    assert_eq!(v["epsilon"].as_f64().unwrap(), e.min(pld), "{v}");
    assert_eq!(v["epsilon_accountant"], if pld < e { "pld" } else { "rdp" });
}

/// Issue 27 finding 5: `--accountant rdp` exited 1 or took up to 45 s computing a PLD lower
/// bound it always computed. The lower bound is best effort: analytic for unsampled
/// Gaussians, null with a reason otherwise, never an exit code.
#[test]
fn account_rdp_is_not_blocked_by_the_lower_bound() {
    let start = std::time::Instant::now();
    let v = json(&dpfl(&[
        "account",
        "--noise-multiplier",
        "0.527",
        "--steps",
        "48441",
        "--delta",
        "4e-5",
        "--accountant",
        "rdp",
    ]));
    assert!(start.elapsed().as_secs() < 10, "{:?}", start.elapsed());
    // 48 441 Gaussians of z = 0.527 are one of z/√48441: the exact ε is the lower bound
    // (stepped down) and the PLD's; RDP is looser.
    let (rdp, pld, lower) = (
        v["rdp_epsilon"].as_f64().unwrap(),
        v["pld_epsilon"].as_f64().unwrap(),
        v["epsilon_lower_bound"].as_f64().unwrap(),
    );
    assert!(lower <= pld && pld < rdp, "{v}");
    assert!(lower > pld * (1.0 - 1e-5), "{v}");
    assert_eq!(v["epsilon"].as_f64().unwrap(), pld, "{v}");
    // No pair (Laplace): null with the reason, exit 0.
    let v = json(&dpfl(&[
        "account",
        "--mechanism",
        "laplace",
        "--noise-multiplier",
        "2",
        "--delta",
        "1e-5",
    ]));
    assert!(v["epsilon_lower_bound"].is_null(), "{v}");
    assert!(
        v["notes"]["epsilon_lower_bound"]
            .as_str()
            .unwrap()
            .contains("no concrete neighbouring pair"),
        "{v}"
    );
}

/// Issue 27 finding 8: an ε of exactly 0 printed as 5e-324 (one ulp above 0).
#[test]
fn account_prints_a_zero_epsilon_as_zero() {
    let v = json(&dpfl(&[
        "account",
        "--noise-multiplier",
        "1e6",
        "--delta",
        "0.5",
    ]));
    assert_eq!(v["epsilon"].as_f64().unwrap(), 0.0, "{v}");
    assert!(!v.to_string().contains("e-324"), "{v}");
}

/// Issue 27 finding 5 (listed in issue 31): tiny noise panicked in the PLD's grid.
#[test]
fn account_pld_refuses_noise_too_small_for_a_grid() {
    for (mechanism, z) in [
        ("discrete-gaussian", "1e-9"),
        ("discrete-laplace", "1e-300"),
    ] {
        let out = dpfl(&[
            "account",
            "--mechanism",
            mechanism,
            "--noise-multiplier",
            z,
            "--delta",
            "1e-5",
            "--accountant",
            "pld",
        ]);
        assert_usage_error(&out, "too small for the PLD accountant");
    }
}

/// Issue 27 finding 3: Poisson sampling under replace-one is the ball pair of clipped
/// contributions (dp-accounting 0.6's REPLACE_ONE with noise multiplier 2z: z = 1, q = 0.01,
/// T = 1000, δ = 1e-5 gives 1.2052 pessimistic, 1.1552 optimistic, scripts/golden_ball_pair.py);
/// the generic pair stays available, named.
#[test]
fn account_poisson_replace_one_uses_the_ball_pair() {
    let mut a = POISSON.to_vec();
    a.extend(["pld", "--neighbouring", "replace-one"]);
    let v = json(&dpfl(&a));
    let (e, lower) = (
        v["pld_epsilon"].as_f64().unwrap(),
        v["epsilon_lower_bound"].as_f64().unwrap(),
    );
    assert!((1.155..=1.2053).contains(&e), "{v}");
    assert!(lower <= e && lower > 1.1, "{v}");
    assert!(
        v["poisson_pair"].as_str().unwrap().starts_with("ball"),
        "{v}"
    );
    a.extend(["--poisson-pair", "generic"]);
    let g = json(&dpfl(&a));
    assert!(
        g["poisson_pair"].as_str().unwrap().starts_with("generic"),
        "{g}"
    );
    assert!(g["pld_epsilon"].as_f64().unwrap() > e, "{g}");
}

#[test]
fn account_pld_and_advanced() {
    let mut a = POISSON.to_vec();
    a.push("pld");
    let v = json(&dpfl(&a));
    // dp-accounting 0.6.0 PLD (pessimistic): 1.828243645591767.
    let pld = v["pld_epsilon"].as_f64().unwrap();
    assert!((pld - 1.828_243_645_591_767).abs() < 0.01 * 1.83, "{v}");
    let mut a = POISSON.to_vec();
    a.push("advanced");
    let v = json(&dpfl(&a));
    assert_eq!(v["accountant"], "advanced");
    assert!(v["epsilon"].as_f64().unwrap() > pld, "{v}");
}

/// Issue 11 item 1: past losses of ln(f64::MAX) the PLD accountant used to print 5e-324.
#[test]
fn account_pld_beyond_float_range_is_not_zero() {
    let v = json(&dpfl(&[
        "account",
        "--noise-multiplier",
        "0.8",
        "--sampling",
        "none",
        "--steps",
        "3000",
        "--delta",
        "1e-5",
        "--accountant",
        "pld",
    ]));
    // The truth (one Gaussian of μ = √3000/0.8, solved at 50 digits) is 2634.7770827180;
    // dp-accounting 0.6.0's PLD gives 2635.748 (golden file).
    let e = v["pld_epsilon"].as_f64().unwrap();
    assert!((2_634.777_082_718..2_634.78).contains(&e), "{v}");
}

/// Issue 11 item 1: `calibrate --accountant pld` returned z = 0.137 where RDP needs 221.6.
#[test]
fn calibrate_pld_agrees_with_rdp() {
    let run = |acc: &str| {
        json(&dpfl(&[
            "calibrate",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--steps",
            "3000",
            "--accountant",
            acc,
        ]))
    };
    let pld = run("pld");
    let rdp = run("rdp");
    let (zp, zr) = (
        pld["noise_multiplier"].as_f64().unwrap(),
        rdp["noise_multiplier"].as_f64().unwrap(),
    );
    assert!((zr - 221.6).abs() < 0.1, "{rdp}");
    // One Gaussian of z/√3000: the analytic Gaussian needs z/√3000 = 3.7305 at (1, 1e-5).
    assert!(zp > 0.9 * zr && zp <= zr, "pld {zp} vs rdp {zr}");
    assert!(pld["epsilon_achieved"].as_f64().unwrap() <= 1.0, "{pld}");
}

#[test]
fn account_with_replacement_needs_a_dataset_size() {
    let base = [
        "account",
        "--noise-multiplier",
        "2.0",
        "--sampling",
        "with-replacement",
        "--rate",
        "0.05",
        "--steps",
        "100",
        "--delta",
        "1e-5",
    ];
    assert_usage_error(&dpfl(&base), "--dataset-size");
    let mut a = base.to_vec();
    a.extend(["--dataset-size", "200"]);
    let v = json(&dpfl(&a));
    assert_eq!(v["neighbouring"], "replace-one");
    assert_eq!(v["event"]["event"]["sampling"]["draws"], 10);
    assert!(v["epsilon"].as_f64().unwrap() > 0.0);
}

#[test]
fn calibrate_round_trips_through_account() {
    let v = json(&dpfl(&[
        "calibrate",
        "--epsilon",
        "2",
        "--delta",
        "1e-5",
        "--sampling",
        "poisson",
        "--rate",
        "0.01",
        "--steps",
        "1000",
    ]));
    let z = v["noise_multiplier"].as_f64().unwrap();
    assert!(v["epsilon_achieved"].as_f64().unwrap() <= 2.0, "{v}");
    let zs = z.to_string();
    let w = json(&dpfl(&[
        "account",
        "--noise-multiplier",
        &zs,
        "--sampling",
        "poisson",
        "--rate",
        "0.01",
        "--steps",
        "1000",
        "--delta",
        "1e-5",
    ]));
    assert!(w["epsilon"].as_f64().unwrap() <= 2.0, "{w}");
    // One Gaussian release also gets the analytic Gaussian mechanism (Balle & Wang 2018).
    let v = json(&dpfl(&["calibrate", "--epsilon", "1", "--delta", "1e-5"]));
    let a = v["analytic_gaussian_noise_multiplier"].as_f64().unwrap();
    assert!((a - 3.7305).abs() < 1e-3, "{v}");
}

#[test]
fn bad_flags_are_one_line_and_exit_code_two() {
    let mut a = POISSON.to_vec();
    a.push("rdp");
    let mut bad = a.clone();
    bad[8] = "1.5";
    assert_usage_error(&dpfl(&bad), "--rate");
    let mut bad = a.clone();
    bad[12] = "2";
    assert_usage_error(&dpfl(&bad), "--delta");
    let mut bad = a.clone();
    bad[4] = "0";
    assert_usage_error(&dpfl(&bad), "--noise-multiplier");
    let mut bad = a.clone();
    bad.extend(["--neighbouring", "replace-one"]);
    assert_usage_error(&dpfl(&bad), "does not support");
    assert_usage_error(
        &dpfl(&["calibrate", "--epsilon", "0", "--delta", "1e-5"]),
        "--epsilon",
    );
    // Unknown values are rejected by the argument parser, also with exit code 2.
    let mut bad = POISSON.to_vec();
    bad.push("magic");
    assert_usage_error(&dpfl(&bad), "magic");
    assert_usage_error(&dpfl(&["account", "--noise-multiplier", "1"]), "--delta");
    assert_usage_error(&dpfl(&["account", "--bogus"]), "--bogus");
}

static SYNTH: LazyLock<String> = LazyLock::new(|| {
    Head::default().toml(
        r#"ENFORCE
[[algorithms]]
kind = "mb-sgd"
calibration = "experiment"
step_size = 0.5
"#,
    )
});

fn train(name: &str, enforce: bool) -> (Output, std::path::PathBuf) {
    let d = std::env::temp_dir().join(format!("dpfl-account-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let cfg = d.join("exp.toml");
    let text = SYNTH.replace(
        "ENFORCE",
        if enforce { "enforce_budget = true" } else { "" },
    );
    std::fs::write(&cfg, text).unwrap();
    let out_dir = d.join("out");
    let out = dpfl(&[
        "train",
        "--quiet",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    (out, out_dir)
}

#[test]
fn summary_reports_target_and_accounted_epsilon_per_silo() {
    let (out, out_dir) = train("summary", false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("eps RDP") && stdout.contains("eps PLD"),
        "{stdout}"
    );
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    let p = summary[0]["privacy"].as_array().expect("privacy per silo");
    assert_eq!(p.len(), 3);
    for (i, s) in p.iter().enumerate() {
        assert_eq!(s["silo"], i);
        assert_eq!(s["target_epsilon"], 1.0);
        assert_eq!(s["target_delta"], 1.0 / 2500.0);
        // 5 rounds of K = 11 draws with replacement from n = 50: the RDP accountant's
        // with-replacement bound, the sampled PLD (Balle-Barthe-Gaboardi profile, tighter) and
        // a lower bound below both.
        let e = s["rdp_epsilon"].as_f64().expect("rdp epsilon");
        assert!(e > 0.0 && e.is_finite(), "{s}");
        let p = s["pld_epsilon"].as_f64().expect("pld epsilon");
        let l = s["lower_epsilon"].as_f64().expect("lower bound");
        assert!(0.0 < l && l <= p && p <= e, "{s}");
    }
}

#[test]
fn enforced_budget_refuses_the_crossing_round() {
    let (out, _) = train("enforce", true);
    let err = String::from_utf8_lossy(&out.stderr);
    // The experiment rule's noise is above budget by the accountant's count (see the
    // summary test), so a silo refuses a round before answering it.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("budget exceeded"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // The refused release is the first round whose composition crosses ε = 1 by both the RDP
    // accountant and the sampled PLD (the ledger takes the smaller of the two sound bounds). Noise of the experiment rule (App. I): σ² = 8L²R ln(1/δ)/(n²ε²) with L = 1,
    // R = 5, n = 50, δ = 1/n², K = 11, sensitivity 2L/K, so z = σK/2.
    let sigma = (8.0 * 5.0 * 2500f64.ln() / 2500.0).sqrt();
    let z = (sigma * 11.0 / 2.0).to_string();
    let crossing = (1..=5u64)
        .find(|t| {
            let ts = t.to_string();
            ["rdp", "pld"].iter().all(|acc| {
                let v = json(&dpfl(&[
                    "account",
                    "--noise-multiplier",
                    &z,
                    "--sampling",
                    "with-replacement",
                    "--rate",
                    "0.22",
                    "--dataset-size",
                    "50",
                    "--steps",
                    &ts,
                    "--delta",
                    "0.0004",
                    "--accountant",
                    acc,
                ]));
                v["epsilon"].as_f64().unwrap() > 1.0
            })
        })
        .expect("the rule's noise crosses the budget within 5 rounds");
    assert!(
        err.contains(&format!("release {} ", crossing - 1)),
        "expected release {} refused: {err}",
        crossing - 1
    );
}
