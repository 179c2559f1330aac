//! Issue 16: `dpfl server` alone writes the report of a networked run (summary.json,
//! rounds.csv, report.html) from its plan, round log and traffic — privacy per silo, rounds,
//! bits, timings — and says plainly that the model's quality is not available to it. The
//! federation here sets the noise multiplier directly (`privacy.noise_multiplier`), so it also
//! shows z flowing through the plan to the server and silos.

use crate::common;
use common::{Started, dpfl, start, wait_exit};

use std::time::Duration;

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::event::Sampling;
use dpfl_privacy::{Delta, Neighbouring, PrivacyEvent};

const EXPERIMENT: &str = r#"
name = "server report"
rounds = 4
seed = 11
[data]
source = { kind = "synthetic", task = "binary", silos = 3, train = 50, test = 10, features = 4 }
[model]
kind = "logistic"
[privacy]
noise_multiplier = 1.1
delta = "1/n^2"
lipschitz = 1.0
[[algorithms]]
kind = "mb-sgd"
calibration = "accountant"
step_size = 0.5
batch_size = 10
"#;

#[test]
fn the_server_alone_writes_summary_rounds_and_report() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp.toml");
    std::fs::write(&exp, EXPERIMENT).unwrap();
    let Started {
        cfg,
        mut server,
        mut silos,
        ..
    } = start(tmp.path(), &exp, &[], "");
    assert!(wait_exit(&mut server, Duration::from_secs(180)).success());
    for s in &mut silos {
        assert!(wait_exit(s, Duration::from_secs(60)).success());
    }
    let dir = cfg.parent().unwrap().join("alg-0/server");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let s = &summary[0];
    // The plan's noise: σ = z·2L/K = 1.1·0.2 for every silo, z = 1.1, no target ε.
    assert_eq!(s["rounds"], 4);
    assert_eq!(s["batch_size"], 10);
    assert!((s["sigma"].as_f64().unwrap() - 0.22).abs() < 1e-12, "{s}");
    assert!(
        (s["noise_multiplier"].as_f64().unwrap() - 1.1).abs() < 1e-12,
        "{s}"
    );
    assert!(s["epsilon"].is_null(), "{s}");
    assert_eq!(s["delta"], 4e-4);
    // The ε certified for the planned run: `dpfl account` of the same event.
    let event = PrivacyEvent::Gaussian {
        noise_multiplier: 1.1,
    }
    .sampled(Sampling::WithReplacement {
        population: 50,
        draws: 10,
    })
    .repeated(4);
    let d = Delta::new(4e-4).unwrap();
    let pld = AccountantKind::Pld
        .epsilon(Neighbouring::ReplaceOne, &event, d)
        .unwrap();
    let rdp = AccountantKind::Rdp
        .epsilon(Neighbouring::ReplaceOne, &event, d)
        .unwrap();
    let cli = dpfl(&[
        "--json",
        "account",
        "--noise-multiplier",
        "1.1",
        "--delta",
        "4e-4",
        "--sampling",
        "with-replacement",
        "--rate",
        "0.2",
        "--dataset-size",
        "50",
        "--steps",
        "4",
        "--accountant",
        "pld",
    ]);
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let cli: serde_json::Value = serde_json::from_slice(&cli.stdout).unwrap();
    let cli_pld = cli["epsilon"].as_f64().unwrap();
    assert!((cli_pld - pld).abs() <= 1e-9 * pld, "{cli_pld} vs {pld}");
    let privacy = s["privacy"].as_array().unwrap();
    assert_eq!(privacy.len(), 3);
    for (i, p) in privacy.iter().enumerate() {
        assert_eq!(p["silo"], i);
        assert!(p["target_epsilon"].is_null());
        assert_eq!(p["target_delta"], 4e-4);
        let got = p["pld_epsilon"].as_f64().unwrap();
        assert!(
            (got - cli_pld).abs() <= 1e-9 * cli_pld,
            "{got} vs {cli_pld}"
        );
        let got = p["rdp_epsilon"].as_f64().unwrap();
        assert!((got - rdp).abs() <= 1e-9 * rdp, "{got} vs {rdp}");
    }
    let certified = s["certified_epsilon"].as_f64().unwrap();
    assert!((certified - pld.min(rdp)).abs() <= 1e-9 * certified);
    // Rounds, messages, bits: every silo answered every round.
    let f = &s["server"];
    assert_eq!(f["rounds_run"], 4);
    assert_eq!(f["finished"], true);
    assert_eq!(f["messages"], 12);
    let wire: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("wire.json")).unwrap()).unwrap();
    let bytes = wire["received_in_rounds"].as_u64().unwrap();
    // Each message holds at least the d = 5 noisy f64 coordinates.
    assert!(bytes >= 12 * 5 * 8, "{wire}");
    assert_eq!(f["uplink_bytes"].as_u64(), Some(bytes));
    assert_eq!(f["uplink_bits"].as_u64(), Some(8 * bytes));
    assert_eq!(f["rounds"].as_array().unwrap().len(), 4);
    // No data at the server: the quality is missing, and says so.
    assert!(
        s["final_train_loss"].is_null() && s["test_metric"].is_null(),
        "{s}"
    );
    let caveats = s["caveats"].to_string();
    assert!(caveats.contains("not available to the server"), "{caveats}");
    assert!(s["wall_seconds"].as_f64().unwrap() > 0.0);
    // rounds.csv: the round log.
    let csv = std::fs::read_to_string(dir.join("rounds.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "round,selected,participants,rejected,seconds");
    assert_eq!(lines.len(), 5, "{csv}");
    assert!(lines[4].starts_with("4,3,3,0,"), "{csv}");
    // report.html: the tables a person reads.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    for needle in [
        "id=\"results\"",
        "id=\"privacy\"",
        "id=\"traffic\"",
        "id=\"rounds\"",
        "id=\"timings\"",
        "not available to the server",
        "set directly",
        &format!("{}", 8 * bytes),
    ] {
        assert!(html.contains(needle), "{needle} not in report.html");
    }
    // The model quality the server cannot know is "not available", never a NaN beside text
    // saying it is null (issue 31 item 9).
    assert!(
        !html.contains("NaN") && html.contains("not available</td>"),
        "{html}"
    );
}
