//! Federations of separate `dpfl` processes on 127.0.0.1 (ports chosen by the OS): the final
//! model equals the simulator's bit for bit, `dpfl federate` writes `dpfl train`'s outputs, and
//! training survives killed silos and a killed server without charging any silo's ledger twice.

use crate::common;
use common::{
    bits, dpfl, participants, prepare, simulated_run, spawn, spawn_silo, wait_exit, wait_until,
};

use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use dpfl_lab::experiment::ExperimentSpec;

fn experiment(rounds: usize, participation: &str) -> String {
    format!(
        r#"
name = "net"
rounds = {rounds}
seed = 5
participation = {participation}
[data]
source = {{ kind = "synthetic", task = "binary", silos = 3, train = 60, test = 20, features = 4, shift = 0.3 }}
[model]
kind = "logistic"
[privacy]
epsilon = 2.0
delta = "1/n^2"
lipschitz = 1.0
[[algorithms]]
label = "ISRL-DP MB-SGD"
kind = "mb-sgd"
calibration = "experiment"
step_size = 0.3
batch_size = 20
output = "last"
"#
    )
}

fn write_experiment(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("exp.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// `dpfl federate --config EXP --local [EXTRA] --out OUT`, which must succeed.
fn federate_local(exp: &Path, out: &Path, extra: &[&str]) {
    let mut args = vec!["federate", "--config", exp.to_str().unwrap(), "--local"];
    args.push("--seeded");
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = dpfl(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The simulator's final model and training loss for algorithm 0 of trial 0.
fn simulated(exp: &Path) -> (Vec<f64>, f64) {
    let spec = ExperimentSpec::from_file(exp).unwrap();
    let (_, run) = simulated_run(exp, spec.rounds);
    (run.final_model, run.final_train_loss)
}

/// The final model of algorithm 0 in a trial's directory (`dpfl federate --out OUT` writes
/// trial t's under OUT/trial-<t>).
fn model(trial_dir: &Path) -> Vec<f64> {
    dpfl_net::server::read_model(&trial_dir.join("alg-0/server/model.bin")).unwrap()
}

#[test]
fn a_federation_of_processes_equals_the_simulator_bit_for_bit() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = write_experiment(tmp.path(), &experiment(8, r#"{ kind = "fixed", m = 2 }"#));
    let out = tmp.path().join("run");
    federate_local(&exp, &out, &[]);
    let (w, loss) = simulated(&exp);
    let got = model(&out.join("trial-0"));
    assert_eq!(got.len(), 4, "one weight per feature");
    assert_eq!(bits(&got), bits(&w), "network {got:?} vs simulator {w:?}");
    // summary.json is dpfl train's, with the same numbers.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let s = &summary[0];
    assert_eq!(s["algorithm"], "ISRL-DP MB-SGD");
    assert_eq!(s["rounds"], 8);
    assert_eq!(s["participants"], 2.0);
    assert_eq!(s["final_train_loss"].as_f64().unwrap(), loss);
    assert!(s["sigma"].as_f64().unwrap() > 0.0);
    // Participation M = 2 of 3: every round aggregated exactly 2 messages.
    assert_eq!(participants(&out.join("trial-0/alg-0")), vec![2; 8]);
}

#[test]
fn enforced_budgets_are_charged_by_each_silo_process() {
    // Accountant calibration with enforce_budget: each silo charges issue 4's ledger once per
    // round it answers, the total stays within (ε, δ), and the model is still the simulator's.
    let tmp = tempfile::tempdir().unwrap();
    let text = experiment(6, r#"{ kind = "all" }"#)
        .replace("lipschitz = 1.0", "lipschitz = 1.0\nenforce_budget = true")
        .replace(
            "calibration = \"experiment\"",
            "calibration = \"accountant\"",
        );
    let exp = write_experiment(tmp.path(), &text);
    let out = tmp.path().join("run");
    federate_local(&exp, &out, &[]);
    let (w, _) = simulated(&exp);
    assert_eq!(bits(&model(&out.join("trial-0"))), bits(&w));
    for id in 0..3 {
        // The silo's one ledger (release cap and budget), a durable cell.
        let path = out.join(format!("trial-0/alg-0/silo-{id}/ledger"));
        let bytes = dpfl_net::store::Cell::read(&path).unwrap().unwrap();
        let l: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(l["releases"].as_array().unwrap().len(), 6, "silo {id}");
        assert_eq!(l["budget"]["epsilon"], 2.0);
    }
}

#[test]
fn a_plan_over_the_silos_budget_is_refused_before_any_process_starts() {
    // The paper's experiment rule with enforce_budget: by the RDP accountant its per-round
    // noise at this sampling rate already exceeds ε = 2, so every silo would refuse the plan
    // (`dpfl silo` checks it against its own budget file before reading its data); federate,
    // which plays every silo's operator, refuses it at once, naming the silo and the spend.
    let tmp = tempfile::tempdir().unwrap();
    let text = experiment(8, r#"{ kind = "all" }"#)
        .replace("lipschitz = 1.0", "lipschitz = 1.0\nenforce_budget = true");
    let exp = write_experiment(tmp.path(), &text);
    for mode in [&[][..], &["--shuffle"][..]] {
        let out = tmp.path().join(format!("run{}", mode.len()));
        let start = Instant::now();
        let mut args = vec!["federate", "--config", exp.to_str().unwrap(), "--local"];
        args.extend_from_slice(mode);
        args.push("--seeded");
        args.extend_from_slice(&["--out", out.to_str().unwrap()]);
        let o = dpfl(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{mode:?}: {err}");
        assert!(err.contains("silo 0") && err.contains("spends ε"), "{err}");
        assert!(err.contains("own budget ε = 2"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(start.elapsed() < Duration::from_secs(15));
        assert!(!out.join("trial-0/alg-0/server").exists(), "no process ran");
    }
}

#[test]
fn shuffle_mode_matches_the_simulator_up_to_summation_order() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = write_experiment(tmp.path(), &experiment(6, r#"{ kind = "all" }"#));
    let out = tmp.path().join("run");
    federate_local(&exp, &out, &["--shuffle"]);
    let (w, _) = simulated(&exp);
    let got = model(&out.join("trial-0"));
    // The same noise is drawn (each silo's own stream); only the order of the sum differs.
    let scale = w.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    for (a, b) in got.iter().zip(&w) {
        assert!(
            (a - b).abs() <= 1e-12 * scale,
            "shuffled {got:?} vs simulated {w:?}"
        );
    }
    let log = std::fs::read_to_string(out.join("trial-0/alg-0/server/rounds.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 6);
    assert!(
        log.lines().all(|l| l.contains("\"participants\":3")),
        "{log}"
    );
}

/// rounds.csv as (trial, round, algorithm, train_loss bits, test_metric bits).
fn rounds_csv(dir: &Path) -> Vec<(usize, usize, String, u64, u64)> {
    let text = std::fs::read_to_string(dir.join("rounds.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("trial,round,algorithm,train_loss,test_metric")
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 5, "{l}");
            let num = |s: &str| s.parse::<f64>().unwrap().to_bits();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].trim_matches('"').to_string(),
                num(f[3]),
                num(f[4]),
            )
        })
        .collect()
}

/// summary.json without the wall times (the only field that may differ).
fn summary_json(dir: &Path) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    for s in v.as_array_mut().unwrap() {
        s.as_object_mut().unwrap().remove("wall_seconds");
    }
    v
}

#[test]
fn federate_writes_the_rounds_and_summary_of_dpfl_train_for_every_trial() {
    // Two trials, evaluations at rounds 3, 6 and 8, a private algorithm with the last iterate
    // as output and a non-private one with the average (an output that is not the broadcast).
    let tmp = tempfile::tempdir().unwrap();
    let text = experiment(8, r#"{ kind = "fixed", m = 2 }"#)
        .replace("rounds = 8", "rounds = 8\ntrials = 2\neval_every = 3")
        + "[[algorithms]]\nlabel = \"MB-SGD average\"\nkind = \"mb-sgd\"\n\
           step_size = 0.3\nbatch_size = 20\n";
    let exp = write_experiment(tmp.path(), &text);
    let sim = tmp.path().join("sim");
    let o = dpfl(&[
        "train",
        "--config",
        exp.to_str().unwrap(),
        "--quiet",
        "--out",
        sim.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = tmp.path().join("run");
    federate_local(&exp, &out, &[]);
    let want = rounds_csv(&sim);
    let got = rounds_csv(&out);
    let keys: Vec<(usize, usize, &str)> = want
        .iter()
        .map(|(t, r, a, _, _)| (*t, *r, a.as_str()))
        .collect();
    let mut expected = Vec::new();
    for t in 0..2 {
        for a in ["ISRL-DP MB-SGD", "MB-SGD average"] {
            for r in [3, 6, 8] {
                expected.push((t, r, a));
            }
        }
    }
    assert_eq!(keys, expected, "dpfl train's rows");
    assert_eq!(got, want, "federate's rows, values bit for bit");
    // The trials differ (fresh split, fresh seeds), so trial 1 was really run.
    assert_ne!(want[2].3, want[8].3);
    // summary.json: the same averages over both trials, calibration and accounted privacy.
    let (mut g, mut w) = (summary_json(&out), summary_json(&sim));
    // The count of non-finite gradients stays in each silo process (it would tell the server
    // something about the data), so federate reports it as unknown (null); dpfl train counts 0.
    for (s, want) in [
        (&mut g, serde_json::Value::Null),
        (&mut w, serde_json::json!(0)),
    ] {
        for alg in s.as_array_mut().unwrap() {
            assert_eq!(alg["nonfinite_gradients"], want);
            alg["nonfinite_gradients"] = serde_json::Value::Null;
        }
    }
    for s in [&g, &w] {
        assert_eq!(s[0]["trials"], 2);
        assert!(!s[0]["privacy"].as_array().unwrap().is_empty());
        assert!(s[0]["privacy"][0]["rdp_epsilon"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(g, w);
}

/// Starts the server and the three silos of federation file `cfg`, logging into `logs`.
fn start_processes(cfg: &Path, shards: &[PathBuf], logs: &Path) -> (Child, Vec<Child>) {
    let server = spawn(
        &["server", "--config", cfg.to_str().unwrap()],
        &logs.join("server.log"),
    );
    let silos = shards
        .iter()
        .enumerate()
        .map(|(i, shard)| spawn_silo(cfg, i, shard, &logs.join(format!("silo-{i}.log"))))
        .collect();
    (server, silos)
}

fn checkpoint_round(out: &Path) -> u64 {
    dpfl_net::checkpoint::Checkpoint::next_round_at(&out.join("alg-0/server/checkpoint"))
        .ok()
        .flatten()
        .map_or(0, u64::from)
}

#[test]
fn a_killed_silo_is_left_out_and_rejoins() {
    let tmp = tempfile::tempdir().unwrap();
    // 60 paced rounds leave the restarted silo several seconds to rejoin before the end.
    let exp = write_experiment(tmp.path(), &experiment(60, r#"{ kind = "all" }"#));
    let (cfg, shards) = prepare(
        tmp.path(),
        &exp,
        &[],
        "heartbeat_timeout_ms = 1500\nmin_round_ms = 150",
    );
    let out = cfg.parent().unwrap().to_path_buf();
    let logs = tmp.path();
    let (mut server, mut silos) = start_processes(&cfg, &shards, logs);
    wait_until("round 3", Duration::from_secs(60), || {
        checkpoint_round(&out) >= 3
    });
    silos[2].kill().unwrap();
    silos[2].wait().unwrap();
    let killed_at = checkpoint_round(&out);
    // Rounds go on without silo 2 (left out once its session closes).
    wait_until("two rounds without silo 2", Duration::from_secs(60), || {
        checkpoint_round(&out) >= killed_at + 3
    });
    // It rejoins, restoring its generator and ledger from its state directory.
    silos[2] = spawn_silo(&cfg, 2, &shards[2], &logs.join("silo-2-again.log"));
    let status = wait_exit(&mut server, Duration::from_secs(120));
    assert!(
        status.success(),
        "{}",
        std::fs::read_to_string(logs.join("server.log")).unwrap()
    );
    for s in &mut silos {
        assert!(wait_exit(s, Duration::from_secs(30)).success());
    }
    let parts = participants(&out.join("alg-0"));
    assert_eq!(parts.len(), 60, "every round completed");
    assert!(parts.iter().filter(|&&p| p == 2).count() >= 2, "{parts:?}");
    assert_eq!(*parts.last().unwrap(), 3, "silo 2 rejoined: {parts:?}");
    assert!(parts.iter().all(|&p| p >= 2), "{parts:?}");
}

#[test]
fn a_restarted_server_resumes_without_charging_any_ledger_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let rounds = 12;
    let exp = write_experiment(tmp.path(), &experiment(rounds, r#"{ kind = "all" }"#));
    let (cfg, shards) = prepare(tmp.path(), &exp, &[], "min_round_ms = 150");
    let out = cfg.parent().unwrap().to_path_buf();
    let c = cfg.to_str().unwrap();
    let logs = tmp.path();
    let (mut server, mut silos) = start_processes(&cfg, &shards, logs);
    wait_until("round 4", Duration::from_secs(60), || {
        checkpoint_round(&out) >= 4
    });
    server.kill().unwrap(); // SIGKILL: no chance to clean up
    server.wait().unwrap();
    let at = checkpoint_round(&out);
    assert!(at < rounds as u64, "killed mid-training");
    let mut server = spawn(&["server", "--config", c], &logs.join("server-again.log"));
    let status = wait_exit(&mut server, Duration::from_secs(120));
    let again = std::fs::read_to_string(logs.join("server-again.log")).unwrap();
    assert!(status.success(), "{again}");
    assert!(again.contains("resuming from checkpoint"), "{again}");
    for (i, s) in silos.iter_mut().enumerate() {
        assert!(wait_exit(s, Duration::from_secs(30)).success());
        // Each round's message was computed (and its event charged) exactly once.
        let text = std::fs::read_to_string(logs.join(format!("silo-{i}.log"))).unwrap();
        assert!(
            text.contains(&format!("silo {i}: answered {rounds} rounds")),
            "silo {i}: {text}"
        );
        let cell = out.join(format!("alg-0/silo-{i}/ledger"));
        let charged = dpfl_net::ledger::charged_rounds(&cell).unwrap();
        let mut sorted = charged.clone();
        sorted.sort();
        assert_eq!(sorted, (0..rounds as u64).collect::<Vec<_>>());
    }
    // And the result is still the simulator's, bit for bit.
    let (w, _) = simulated(&exp);
    assert_eq!(bits(&model(&out)), bits(&w));
    // The model of every evaluated round (here each) was recorded once across the restart,
    // and it is the simulator's: evaluated, it gives the simulator's curve bit for bit.
    let (trial, run) = simulated_run(&exp, 1);
    let recorded = dpfl_net::models::read_models(&out.join("alg-0/server/models.bin")).unwrap();
    let done: Vec<usize> = recorded.iter().map(|(r, _)| *r as usize).collect();
    assert_eq!(done, (1..=rounds).collect::<Vec<_>>());
    let m = trial.model.as_ref();
    for ((r, w), &(round, loss, metric)) in recorded.iter().zip(&run.curve) {
        assert_eq!(*r as usize, round);
        let got = (
            dpfl::sim::train_loss(m, w, &trial.silos),
            dpfl::sim::test_metric(m, w, &trial.silos),
        );
        assert_eq!(bits(&[got.0, got.1]), bits(&[loss, metric]), "round {r}");
    }
}

/// This machine's address on its default route (not loopback), if it has one.
fn host_address() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    // A UDP connect sends nothing; it only picks the interface the route goes through.
    s.connect("8.8.8.8:53").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn a_federation_set_up_as_across_machines_equals_the_simulator() {
    // As docs/deployment.md's "Across machines": a CA made with `dpfl certs`, the server's
    // certificate naming the address it is reached at, each participant in its own directory
    // holding only ca.pem, its own key and (silos) its own shard, and a fixed server address
    // on a real interface instead of loopback and an address file. One machine cannot be
    // three, but everything the processes see is what they would see on three.
    let Some(ip) = host_address() else {
        eprintln!("skipped: this machine has no non-loopback IPv4 route");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let exp = write_experiment(root, &experiment(6, r#"{ kind = "fixed", m = 2 }"#));
    let prep = root.join("prep");
    federate_local(&exp, &prep, &["--prepare-only"]);
    let prepared = std::fs::read_to_string(prep.join("trial-0/federation-0.toml")).unwrap();
    let port = std::net::TcpListener::bind((ip, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let fed = prepared
        .replace("\"../experiment.toml\"", "\"experiment.toml\"")
        .replace(
            "address = \"127.0.0.1:0\"\naddress_file = \"alg-0/server.addr\"\nserver_name = \"localhost\"",
            &format!("address = \"{ip}:{port}\"\nserver_name = \"{ip}\""),
        )
        .replace("\"alg-0/server\"", "\"state\"")
        .replace("\"alg-0/silo-{id}\"", "\"state\"")
        .replace("dir = \"../certs\"", "dir = \"certs\"");
    assert!(fed.contains(&format!("server_name = \"{ip}\"")), "{fed}");
    let ca = root.join("ca");
    let ok = |o: Output| assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    ok(dpfl(&["certs", "init", "--dir", ca.to_str().unwrap()]));
    let host = |name: &str, san: &[&str]| -> PathBuf {
        let dir = root.join(format!("host-{name}"));
        let certs = dir.join("certs");
        let mut args = vec![
            "certs",
            "issue",
            "--ca-dir",
            ca.to_str().unwrap(),
            "--dir",
            certs.to_str().unwrap(),
            "--name",
            name,
        ];
        for s in san {
            args.extend_from_slice(&["--san", s]);
        }
        ok(dpfl(&args));
        std::fs::copy(ca.join("ca.pem"), certs.join("ca.pem")).unwrap();
        std::fs::copy(&exp, dir.join("experiment.toml")).unwrap();
        std::fs::write(dir.join("federation.toml"), &fed).unwrap();
        dir
    };
    let ip_text = ip.to_string();
    let server = host("server", &[&ip_text]);
    // The server's host also keeps the model card (features, preprocessing, classes) that
    // the federation file names, so the model it saves is one `dpfl predict` reads.
    std::fs::copy(
        prep.join("trial-0/model-card.json"),
        server.join("model-card.json"),
    )
    .unwrap();
    let mut silos = Vec::new();
    for i in 0..3 {
        let dir = host(&format!("silo-{i}"), &[]);
        std::fs::copy(
            prep.join(format!("trial-0/data/silo-{i}.shard")),
            dir.join("data.shard"),
        )
        .unwrap();
        // Each silo's own budget file, kept on its own machine.
        std::fs::copy(
            prep.join(format!("trial-0/alg-0/budget-silo-{i}.toml")),
            dir.join("budget.toml"),
        )
        .unwrap();
        silos.push(dir);
    }
    let cfg = |d: &Path| d.join("federation.toml").to_str().unwrap().to_string();
    let mut children = vec![spawn(
        &["server", "--config", &cfg(&server)],
        &root.join("server.log"),
    )];
    for (i, d) in silos.iter().enumerate() {
        let id = i.to_string();
        let shard = d.join("data.shard").to_str().unwrap().to_string();
        let budget = d.join("budget.toml").to_str().unwrap().to_string();
        children.push(spawn(
            &[
                "silo",
                "--config",
                &cfg(d),
                "--id",
                &id,
                "--data",
                &shard,
                "--budget",
                &budget,
                "--fresh",
                "--allow-seeded",
            ],
            &root.join(format!("silo-{i}.log")),
        ));
    }
    for c in &mut children {
        let status = wait_exit(c, Duration::from_secs(120));
        let logs: String = ["server", "silo-0", "silo-1", "silo-2"]
            .iter()
            .map(|n| std::fs::read_to_string(root.join(format!("{n}.log"))).unwrap_or_default())
            .collect();
        assert!(status.success(), "{logs}");
    }
    let (w, _) = simulated(&exp);
    let got = dpfl_net::server::read_model(&server.join("state/model.bin")).unwrap();
    assert_eq!(bits(&got), bits(&w), "network {got:?} vs simulator {w:?}");
    // No participant held another's key.
    assert!(!server.join("certs/silo-0.key").exists());
    assert!(!silos[0].join("certs/server.key").exists());
}
