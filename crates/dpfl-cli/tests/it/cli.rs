//! The `dpfl` binary on good and bad input: bad input gives one clear error line naming the
//! file/line/field and a non-zero exit code, never a panic.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::LazyLock;

use dpfl_testkit::experiment::Head;

fn dpfl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args(args)
        .output()
        .expect("run dpfl")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dpfl-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Asserts a failed run with exit code `code` whose stderr is one `error:` line containing
/// every fragment, and no panic.
fn assert_error(out: &Output, code: i32, fragments: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one error line, got: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    for f in fragments {
        assert!(lines[0].contains(f), "missing {f:?} in: {err}");
    }
}

static SYNTH: LazyLock<String> = LazyLock::new(|| {
    Head::default().toml(
        r#"[[algorithms]]
kind = "mb-sgd"
calibration = "experiment"
step_size = 0.5
"#,
    )
});

#[test]
fn train_writes_rounds_and_summary() {
    let d = tmpdir("ok");
    let cfg = write(&d, "ok.toml", &SYNTH);
    let out_dir = d.join("out");
    let out = dpfl(&[
        "train",
        "--quiet",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(out_dir.join("rounds.csv")).unwrap();
    assert_eq!(
        csv.lines().next().unwrap(),
        "trial,round,algorithm,train_loss,test_metric"
    );
    assert_eq!(csv.lines().count(), 1 + 5);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    let s = &summary[0];
    for key in [
        "algorithm",
        "epsilon",
        "delta",
        "sigma",
        "batch_size",
        "rounds",
        "participants",
        "final_train_loss",
        "test_metric",
        "wall_seconds",
    ] {
        assert!(s.get(key).is_some(), "summary lacks {key}: {s}");
    }
    assert_eq!(s["epsilon"], 1.0);
    assert_eq!(s["rounds"], 5);
    // n = 50, R = 5, eps = 1: K = floor(50/(2 sqrt 5)) = 11.
    assert_eq!(s["batch_size"], 11);
}

#[test]
fn missing_config_file_names_the_file() {
    let out = dpfl(&["train", "--config", "/nonexistent/exp.toml"]);
    assert_error(&out, 2, &["/nonexistent/exp.toml"]);
}

#[test]
fn unknown_algorithm_and_model_are_config_errors() {
    let d = tmpdir("unknown");
    let p = write(
        &d,
        "a.toml",
        &SYNTH.replace("kind = \"mb-sgd\"", "kind = \"magic-sgd\""),
    );
    assert_error(
        &dpfl(&["train", "--config", p.to_str().unwrap()]),
        2,
        &["a.toml", "magic-sgd"],
    );
    let p = write(
        &d,
        "m.toml",
        &SYNTH.replace("kind = \"logistic\"", "kind = \"transformer\""),
    );
    assert_error(
        &dpfl(&["train", "--config", p.to_str().unwrap()]),
        2,
        &["m.toml", "transformer"],
    );
}

#[test]
fn epsilon_and_delta_out_of_range_are_config_errors() {
    let d = tmpdir("eps");
    for (name, from, to, field) in [
        (
            "e0.toml",
            "epsilon = 1.0",
            "epsilon = 0.0",
            "privacy.epsilon",
        ),
        (
            "en.toml",
            "epsilon = 1.0",
            "epsilon = -2.0",
            "privacy.epsilon",
        ),
        (
            "d1.toml",
            "delta = \"1/n^2\"",
            "delta = 1.0",
            "privacy.delta",
        ),
        (
            "d0.toml",
            "delta = \"1/n^2\"",
            "delta = 0.0",
            "privacy.delta",
        ),
    ] {
        let p = write(&d, name, &SYNTH.replace(from, to));
        assert_error(
            &dpfl(&["train", "--config", p.to_str().unwrap()]),
            2,
            &[field],
        );
    }
}

#[test]
fn batch_size_above_n_is_a_config_error() {
    let d = tmpdir("k");
    let p = write(
        &d,
        "k.toml",
        &SYNTH.replace("step_size = 0.5", "step_size = 0.5\nbatch_size = 51"),
    );
    assert_error(
        &dpfl(&["train", "--config", p.to_str().unwrap()]),
        2,
        &["K", "51", "n = 50"],
    );
}

#[test]
fn reproduce_rejects_unknown_ids_bad_trials_and_bad_specs() {
    let out = dpfl(&["reproduce", "lowy-nope", "--quiet"]);
    assert_error(&out, 2, &["lowy-nope", "lowy-mnist"]);
    let out = dpfl(&["reproduce", "lowy-obesity", "--trials", "0", "--quiet"]);
    assert_error(&out, 2, &["--trials"]);
    let dir = tmpdir("repro-spec");
    let bad = write(
        &dir,
        "bad.toml",
        "id = \"x\"\ntitle = \"t\"\nmetric = \"accuracy\"\n",
    );
    let out = dpfl(&["reproduce", "x", "--spec", bad.to_str().unwrap(), "--quiet"]);
    assert_error(&out, 2, &["bad.toml"]);
    let out = dpfl(&[
        "reproduce",
        "normfedavg-fmnist-bits",
        "--spec",
        bad.to_str().unwrap(),
        "--quiet",
    ]);
    assert_error(&out, 2, &["--spec", "normfedavg"]);
}

/// The CSV at `path` as header → column cells.
fn csv_columns(path: &Path) -> std::collections::HashMap<String, Vec<String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(str::to_string).collect();
    let mut cols: std::collections::HashMap<String, Vec<String>> =
        header.iter().map(|h| (h.clone(), Vec::new())).collect();
    for rec in r.records() {
        for (h, v) in header.iter().zip(rec.unwrap().iter()) {
            cols.get_mut(h).unwrap().push(v.to_string());
        }
    }
    cols
}

/// Issue 32 item 1: `dpfl reproduce soteria-a9a --quick --calibration accountant` gives the
/// five algorithms one certified ε at or below the label, in privacy.csv, final.csv and
/// provenance.json; the flags are refused where they do not apply.
#[test]
fn soteria_reproduction_at_the_accountants_epsilon() {
    let d = tmpdir("soteria-certified");
    let out = dpfl(&[
        "reproduce",
        "soteria-a9a",
        "--quick",
        "--quiet",
        "--trials",
        "1",
        "--calibration",
        "accountant",
        "--out",
        d.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let privacy = csv_columns(&d.join("privacy.csv"));
    assert_eq!(privacy["algorithm"].len(), 5);
    let certified: Vec<f64> = privacy["certified_epsilon"]
        .iter()
        .map(|c| c.parse().unwrap())
        .collect();
    for (i, &c) in certified.iter().enumerate() {
        assert!(c <= 1.0 && c > 0.99, "{}: {c}", privacy["algorithm"][i]);
        assert_eq!(privacy["labelled_epsilon"][i], "1");
        assert_eq!(privacy["label"][i], "accountant target");
        assert_eq!(privacy["meets_label"][i], "true");
    }
    let spread = certified.iter().copied().fold(0.0f64, f64::max)
        - certified.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(spread < 0.01, "{certified:?}");
    // final.csv: the label in `epsilon`, the certificate beside it, per algorithm.
    let fin = csv_columns(&d.join("final.csv"));
    assert_eq!(fin["epsilon"], vec!["1"; 5]);
    assert_eq!(fin["round"], vec!["25"; 5]);
    let final_cert: Vec<f64> = fin["certified_epsilon"]
        .iter()
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(final_cert, certified);
    let prov = std::fs::read_to_string(d.join("provenance.json")).unwrap();
    assert!(
        prov.contains("reproduce soteria-a9a --quick --trials 1 --calibration accountant"),
        "{prov}"
    );
    assert!(
        prov.contains("Accountant") || prov.contains("accountant"),
        "{prov}"
    );
    let svg = std::fs::read_to_string(d.join("soteria-a9a-eps1.svg")).unwrap();
    assert!(
        svg.contains("calibrated by the accountant"),
        "the title says so"
    );
    // The flags are the SoteriaFL reproductions' only, and a missing ε is named.
    let out = dpfl(&["reproduce", "lowy-obesity", "--calibration", "accountant"]);
    assert_error(&out, 2, &["--calibration", "soteria"]);
    let out = dpfl(&["reproduce", "soteria-a9a", "--epsilons", "3", "--quiet"]);
    assert_error(&out, 2, &["--epsilons", "epsilon 3", "[1.0, 5.0, 10.0]"]);
    let out = dpfl(&["reproduce", "soteria-a9a", "--calibration", "closed-form"]);
    assert_eq!(out.status.code(), Some(2));
}

/// `dpfl reproduce normfedavg-fmnist-fedavg --quick` end to end, when `DPFL_DATA` has
/// Fashion-MNIST.
#[test]
fn normfedavg_quick_reproduction_writes_its_tables() {
    let Some(data) = std::env::var_os("DPFL_DATA")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|d| d.join("fashion-mnist").is_dir())
    else {
        eprintln!("note: DPFL_DATA with fashion-mnist/ not set; skipping");
        return;
    };
    let d = tmpdir("nfa-quick");
    let out = dpfl(&[
        "reproduce",
        "normfedavg-fmnist-fedavg",
        "--quick",
        "--quiet",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        d.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("NormFedAvg:") && stdout.contains("64 bits/coordinate"),
        "{stdout}"
    );
    let summary = std::fs::read_to_string(d.join("summary.csv")).unwrap();
    assert!(
        summary.starts_with("algorithm,bits_per_coordinate,"),
        "{summary}"
    );
    assert_eq!(summary.lines().count(), 3);
    let rounds = std::fs::read_to_string(d.join("rounds.csv")).unwrap();
    assert_eq!(
        rounds.lines().count(),
        1 + 2 * 3,
        "2 algorithms x 3 quick rounds"
    );
    // The checkpoint is kept: a second run needs --resume, which redoes nothing and writes
    // the same tables.
    let again = [
        "reproduce",
        "normfedavg-fmnist-fedavg",
        "--quick",
        "--quiet",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        d.to_str().unwrap(),
    ];
    assert_error(&dpfl(&again), 2, &["--resume"]);
    let mut resumed = again.to_vec();
    resumed.push("--resume");
    let out = dpfl(&resumed);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(d.join("rounds.csv")).unwrap(),
        rounds
    );
    assert_eq!(
        std::fs::read_to_string(d.join("summary.csv")).unwrap(),
        summary
    );
}

/// Issue 32 item 3: `--momentum` and `--step-decay` change what a normfedavg reproduction
/// trains, are recorded in provenance.json, refuse a resume under other values, and refuse
/// bad values and other reproductions.
#[test]
fn normfedavg_local_training_flags() {
    let out = dpfl(&[
        "reproduce",
        "normfedavg-fmnist-fedavg",
        "--momentum",
        "1",
        "--quiet",
    ]);
    assert_error(&out, 2, &["--momentum", "[0, 1)"]);
    let out = dpfl(&[
        "reproduce",
        "normfedavg-fmnist-bits",
        "--step-decay",
        "1.5",
        "--quiet",
    ]);
    assert_error(&out, 2, &["--step-decay", "(0, 1]"]);
    let out = dpfl(&["reproduce", "lowy-obesity", "--momentum", "0", "--quiet"]);
    assert_error(&out, 2, &["--momentum", "normfedavg"]);
    let out = dpfl(&[
        "reproduce",
        "normfedavg-fmnist-fedavg",
        "--algorithms",
        "FedAvg,SGD",
    ]);
    assert_error(&out, 2, &["--algorithms", "\"SGD\"", "\"NormFedAvg\""]);
    let Some(data) = std::env::var_os("DPFL_DATA")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|d| d.join("fashion-mnist").is_dir())
    else {
        eprintln!("note: DPFL_DATA with fashion-mnist/ not set; skipping the runs");
        return;
    };
    let run = |dir: &Path, extra: &[&str]| {
        let mut a = vec![
            "reproduce",
            "normfedavg-fmnist-fedavg",
            "--quick",
            "--quiet",
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        dpfl(&a)
    };
    let (plain, m0) = (tmpdir("nfa-m09"), tmpdir("nfa-m0"));
    let out = run(&plain, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&m0, &["--momentum", "0", "--step-decay", "0.995"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let only = tmpdir("nfa-only");
    let out = run(&only, &["--algorithms", "FedAvg"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |d: &Path, f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    // FedAvg alone trains as it does beside NormFedAvg (its own seeds and shards).
    let fedavg_rows = |d: &Path| -> Vec<String> {
        read(d, "rounds.csv")
            .lines()
            .filter(|l| l.starts_with("FedAvg,"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(fedavg_rows(&only).len(), 3);
    assert_eq!(fedavg_rows(&only), fedavg_rows(&plain));
    let only_prov: serde_json::Value =
        serde_json::from_str(&read(&only, "provenance.json")).unwrap();
    let command = only_prov["command"].as_str().unwrap();
    assert!(command.ends_with("--algorithms \"FedAvg\""), "{command}");
    assert_eq!(only_prov["config"]["algorithms"][0], "FedAvg");
    assert_ne!(read(&plain, "rounds.csv"), read(&m0, "rounds.csv"));
    let prov = read(&m0, "provenance.json");
    assert!(
        prov.contains("reproduce normfedavg-fmnist-fedavg --quick --momentum 0 --step-decay 0.995"),
        "{prov}"
    );
    let config: serde_json::Value = serde_json::from_str(&prov).unwrap();
    assert_eq!(config["config"]["momentum"], 0.0);
    assert_eq!(config["config"]["step_decay"], 0.995);
    let plain_prov: serde_json::Value =
        serde_json::from_str(&read(&plain, "provenance.json")).unwrap();
    assert!(
        plain_prov["config"].get("momentum").is_none(),
        "{plain_prov}"
    );
    // The checkpoint's fingerprint holds the settings: another momentum is not a resume.
    let out = run(
        &m0,
        &["--momentum", "0.5", "--step-decay", "0.995", "--resume"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--resume"), "{err}");
    let out = run(
        &m0,
        &["--momentum", "0", "--step-decay", "0.995", "--resume"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn train_needs_a_public_bound_and_marks_a_data_derived_one() {
    let d = tmpdir("public-l");
    let cfg = write(&d, "nol.toml", &SYNTH.replace("lipschitz = 1.0\n", ""));
    assert_error(
        &dpfl(&["train", "--quiet", "--config", cfg.to_str().unwrap()]),
        2,
        &["privacy.lipschitz", "clip"],
    );
    let cfg = write(
        &d,
        "data-l.toml",
        &SYNTH.replace("lipschitz = 1.0", "lipschitz_from_data = 2.0"),
    );
    let out = dpfl(&["train", "--quiet", "--config", cfg.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Caveat") && stdout.contains("not end-to-end private"),
        "{stdout}"
    );
    // The seeded run's guarantee is qualified too.
    assert!(stdout.contains("seeded run"), "{stdout}");
}

/// A shuffle run with `shuffler = "trusted"` is not described as ISRL-DP: its ε holds for the
/// shuffled round given an honest shuffler, not for a silo's own messages.
#[test]
fn a_trusted_shuffler_run_is_not_called_isrl_dp() {
    let dir = tempfile::tempdir().unwrap();
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../experiments/shuffle-absolute.toml"
    );
    let out = dpfl(&[
        "train",
        "--config",
        config,
        "--out",
        dir.path().to_str().unwrap(),
        "--quiet",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("Privacy ("))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    for l in lines {
        assert!(l.contains("given an honest shuffler"), "{l}");
        assert!(l.contains("(4.000, 1.0e-5)-DP"), "{l}");
        assert!(!l.contains("ISRL-DP"), "{l}");
    }
}
