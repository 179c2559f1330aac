//! The federation's processes started by hand (as an operator would, from the commands
//! `federate --prepare-only` prints), each with `--json`: the server's, every silo's and the
//! shuffler's stdout is one JSON object with the values of the run (issue 16 item 6).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use dpfl_testkit::experiment::Head;

static EXP: LazyLock<String> = LazyLock::new(|| {
    Head::federation("standalone", 3, 5).toml(
        r#"[[algorithms]]
kind = "mb-sgd"
calibration = "experiment"
step_size = 0.3
batch_size = 30
"#,
    )
});

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args(args)
        .arg("--json")
        .env("DPFL_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dpfl")
}

/// Waits up to 120 s for `c`, killing it past that; its stdout parsed as one JSON object.
fn finish(mut c: Child, what: &str) -> serde_json::Value {
    let end = Instant::now() + Duration::from_secs(120);
    while c.try_wait().expect("wait").is_none() {
        if Instant::now() > end {
            let _ = c.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = c.wait_with_output().expect("output");
    assert!(
        o.status.success(),
        "{what}: {:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("{what}: stdout is not one JSON value ({e}): {out}"));
    assert!(v.is_object(), "{what}: {v}");
    v
}

#[test]
fn server_silo_and_shuffler_print_their_results_as_json() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let exp = tmp.path().join("exp.toml");
    std::fs::write(&exp, &*EXP).expect("write experiment");
    let out = tmp.path().join("fed");
    let o = Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args([
            "federate",
            "--local",
            "--prepare-only",
            "--shuffle",
            "--seeded",
        ])
        .args(["--config", s(&exp), "--out", s(&out)])
        .output()
        .expect("prepare");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cfg = out.join("trial-0/federation-0.toml");
    let c = s(&cfg);
    let server = spawn(&["server", "--config", c]);
    let shuffler = spawn(&["shuffler", "--config", c]);
    let silos: Vec<Child> = (0..3)
        .map(|i| {
            let id = i.to_string();
            let shard = out.join(format!("trial-0/data/silo-{i}.shard"));
            let budget = out.join(format!("trial-0/alg-0/budget-silo-{i}.toml"));
            spawn(&[
                "silo",
                "--config",
                c,
                "--id",
                &id,
                "--data",
                s(&shard),
                "--budget",
                s(&budget),
                "--fresh",
                "--allow-seeded",
            ])
        })
        .collect();
    let server = finish(server, "server");
    assert_eq!(server["finished"], true, "{server}");
    assert_eq!(server["rounds"], 3, "{server}");
    // d = 4 features + intercept? The model's dimension as the server reports it.
    let dim = server["dim"].as_u64().expect("dim");
    assert!(dim >= 4, "{server}");
    let log = server["log"].as_array().expect("log");
    assert_eq!(log.len(), 3);
    for (i, s) in silos.into_iter().enumerate() {
        let v = finish(s, &format!("silo {i}"));
        assert_eq!(v["silo"], i as u64, "{v}");
        // Every silo answered the three rounds, refused none.
        assert_eq!(v["answered"].as_array().map(Vec::len), Some(3), "{v}");
        assert_eq!(v["refused"].as_array().map(Vec::len), Some(0), "{v}");
    }
    let sh = finish(shuffler, "shuffler");
    // One batch per round.
    assert_eq!(sh["batches"], 3, "{sh}");
}

/// `summary.json` shows the noise multiplier z = σ/Δ next to σ: for MB-SGD, Δ = 2L/K
/// (replace-one, a mean of K clipped gradients), so z = σK/(2L).
#[test]
fn summary_reports_the_noise_multiplier_next_to_sigma() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let exp = tmp.path().join("exp.toml");
    std::fs::write(&exp, &*EXP).expect("write experiment");
    let o = Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args(["train", "--json", "--config", s(&exp)])
        .output()
        .expect("train");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let a = &v["summary"][0];
    let sigma = a["sigma"].as_f64().expect("sigma");
    let k = a["batch_size"].as_f64().expect("K");
    assert_eq!(k, 30.0);
    let z = a["noise_multiplier"].as_f64().expect("noise_multiplier");
    // L = privacy.lipschitz = 1.
    let expected = sigma * k / 2.0;
    assert!(
        (z - expected).abs() <= 1e-9 * expected,
        "z = {z}, σK/(2L) = {expected}"
    );
}
