//! The own-data path of README.md and docs/own-data.md, end to end (issue 31): a hospital
//! readmission CSV with named hospitals → `dpfl init` → `config check` → `federate
//! --prepare-only` (the federation's files) → each hospital's own `data shard` → a real `dpfl
//! server` and one `dpfl silo` per hospital, each with its own shard → the model the server
//! saved → `dpfl predict` and `dpfl evaluate`.

use crate::common;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use common::{dpfl_in, ok, spawn, wait_exit};

const HOSPITALS: [&str; 3] = ["northside", "st-marys", "westgate"];
const HEADER: &str = "age,bmi,sex,smoker,admission,hospital,readmitted";

/// `dpfl data shard` of hospital `h`'s own file `d/h.csv` into `d/h.shard`; its stdout.
fn own_shard(d: &Path, h: &str) -> String {
    ok(&dpfl_in(
        d,
        &[
            "data",
            "shard",
            "--config",
            "exp.toml",
            "--data",
            &format!("{h}.csv"),
            "--out",
            &format!("{h}.shard"),
        ],
    ))
}

/// `dpfl init` of `d/patients.csv` (label `readmitted`, silo column `hospital`) into
/// `d/exp.toml`; returns its output.
fn init(d: &Path) -> Output {
    let out = dpfl_in(
        d,
        &[
            "init",
            "--data",
            "patients.csv",
            "--label",
            "readmitted",
            "--silo-column",
            "hospital",
            "--out",
            "exp.toml",
        ],
    );
    ok(&out);
    out
}

/// `dpfl federate --config exp.toml --local --prepare-only --out OUT [EXTRA]` in `d`; its
/// stdout (the commands to run).
fn prepare(d: &Path, out: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "federate",
        "--config",
        "exp.toml",
        "--local",
        "--prepare-only",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    ok(&dpfl_in(d, &args))
}

/// One patient row of hospital `h` (deterministic): readmission is likelier for the old,
/// smokers and emergency admissions.
fn row(h: usize, i: usize) -> String {
    let r = |k: usize| (i * 2654435761 + h * 40503 + k * 97) % 1000;
    let age = 25 + r(1) % 60;
    let bmi = 18.0 + (r(2) % 200) as f64 / 10.0;
    let sex = ["female", "male"][r(3) % 2];
    let smoker = ["no", "yes"][usize::from(r(4) % 3 == 0)];
    let admission = ["elective", "emergency", "urgent"][r(5) % 3];
    let score = age as f64 / 85.0
        + f64::from(u8::from(smoker == "yes")) * 0.4
        + f64::from(u8::from(admission == "emergency")) * 0.4
        + (r(6) % 100) as f64 / 250.0;
    let readmitted = if score > 0.95 { "yes" } else { "no" };
    format!(
        "{age},{bmi:.1},{sex},{smoker},{admission},{},{readmitted}",
        HOSPITALS[h]
    )
}

/// Writes the pooled file (`patients.csv`, hospitals interleaved) and each hospital's own
/// file (`<hospital>.csv`, the same rows), CRLF line ends as spreadsheets export them.
fn write_data(dir: &Path, rows: usize) {
    let mut pooled = format!("{HEADER}\r\n");
    let mut own = vec![format!("{HEADER}\r\n"); HOSPITALS.len()];
    for i in 0..rows {
        for (h, file) in own.iter_mut().enumerate() {
            let line = row(h, i);
            pooled += &format!("{line}\r\n");
            *file += &format!("{line}\r\n");
        }
    }
    std::fs::write(dir.join("patients.csv"), pooled).unwrap();
    for (h, text) in HOSPITALS.iter().zip(own) {
        std::fs::write(dir.join(format!("{h}.csv")), text).unwrap();
    }
}

/// README's first steps: `dpfl init` writes every category order and standardisation it
/// read (and says so), `config check` accepts the file, and each hospital's `data shard` of
/// its own file is the shard `federate --prepare-only` makes of its rows of the pooled file.
#[test]
fn init_file_makes_each_hospitals_own_shard() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_data(d, 60);
    let notes = String::from_utf8_lossy(&init(d).stderr).into_owned();
    assert!(
        notes.contains("category order of sex, smoker, admission, readmitted"),
        "{notes}"
    );
    let exp = std::fs::read_to_string(d.join("exp.toml")).unwrap();
    assert!(
        exp.contains(
            r#"{ column = "admission", encoding = "one-hot", order = ["elective", "emergency", "urgent"] }"#
        ),
        "{exp}"
    );
    assert!(
        exp.contains(r#"column = "readmitted", order = ["no", "yes"]"#),
        "{exp}"
    );
    assert!(exp.contains("\"age\" = { mean = "), "{exp}");
    // The hospitals' names, in sorted order (issue 31 item 3).
    let check = ok(&dpfl_in(d, &["config", "check", "exp.toml"]));
    let inspect = ok(&dpfl_in(d, &["data", "inspect", "exp.toml"]));
    for (i, h) in HOSPITALS.iter().enumerate() {
        let line = format!("silo {i} ({h}): train ");
        assert!(
            check.contains(&line) && inspect.contains(&line),
            "{check}{inspect}"
        );
    }
    prepare(d, "fed", &[]);
    // Silos are in sorted order of their names.
    for (i, h) in HOSPITALS.iter().enumerate() {
        let out = own_shard(d, h);
        let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(report["silo"], *h);
        let mine = std::fs::read(d.join(format!("{h}.shard"))).unwrap();
        let prepared = std::fs::read(d.join(format!("fed/trial-0/data/silo-{i}.shard"))).unwrap();
        assert!(
            mine == prepared,
            "{h}: its own shard differs from silo {i}'s"
        );
    }
}

/// The whole path to a deployed model: the real server saves its final model in `dpfl
/// train`'s format, and `predict` / `evaluate` read it.
#[test]
fn real_server_and_own_shards_give_a_model_predict_reads() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_data(d, 60);
    init(d);
    prepare(d, "fed", &[]);
    for h in HOSPITALS {
        own_shard(d, h);
    }
    let cfg = d.join("fed/trial-0/federation-0.toml");
    let c = cfg.to_str().unwrap();
    let srv = d.join("srv");
    let mut server = spawn(
        &["server", "--config", c, "--out", srv.to_str().unwrap()],
        &d.join("server.log"),
    );
    let mut silos: Vec<_> = HOSPITALS
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let shard = d.join(format!("{h}.shard"));
            let budget = d.join(format!("fed/trial-0/alg-0/budget-silo-{i}.toml"));
            spawn(
                &[
                    "silo",
                    "--config",
                    c,
                    "--id",
                    &i.to_string(),
                    "--data",
                    shard.to_str().unwrap(),
                    "--budget",
                    budget.to_str().unwrap(),
                    // Each silo's first start (issue 27: a fresh start is explicit).
                    "--fresh",
                ],
                &d.join(format!("silo-{i}.log")),
            )
        })
        .collect();
    let status = wait_exit(&mut server, Duration::from_secs(120));
    let log = std::fs::read_to_string(d.join("server.log")).unwrap_or_default();
    assert!(status.success(), "server: {log}");
    for (i, s) in silos.iter_mut().enumerate() {
        let st = wait_exit(s, Duration::from_secs(30));
        let slog = std::fs::read_to_string(d.join(format!("silo-{i}.log"))).unwrap_or_default();
        assert!(st.success(), "silo {i}: {slog}");
    }
    assert!(log.contains("wrote the final model to"), "{log}");
    let model = srv.join("model");
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(model.join("model.json")).unwrap()).unwrap();
    assert_eq!(meta["format"], "dpfl-model");
    assert_eq!(meta["classes"], serde_json::json!(["no", "yes"]));
    let certified = meta["privacy"]["certified_epsilon"].as_f64().unwrap();
    assert!(certified > 0.0 && certified <= 1.0, "{meta}");
    assert_eq!(meta["privacy"]["silos"].as_array().unwrap().len(), 3);
    // The server's plan numbers the silos; the model card names them (issue 31 item 3).
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(srv.join("summary.json")).unwrap()).unwrap();
    for (i, h) in HOSPITALS.iter().enumerate() {
        assert_eq!(meta["privacy"]["silos"][i]["name"], *h, "{meta}");
        assert_eq!(summary[0]["privacy"][i]["name"], *h, "{summary}");
    }

    // A new patient file without the label or hospital columns, in another column order.
    let new = "smoker,admission,sex,bmi,age\r\nyes,emergency,male,31.5,80\r\nno,elective,female,22.0,30\r\n";
    std::fs::write(d.join("new.csv"), new).unwrap();
    let m = model.to_str().unwrap();
    ok(&dpfl_in(
        d,
        &[
            "predict",
            "--model",
            m,
            "--data",
            "new.csv",
            "--out",
            "preds.csv",
        ],
    ));
    let preds = std::fs::read_to_string(d.join("preds.csv")).unwrap();
    let lines: Vec<&str> = preds.lines().collect();
    assert_eq!(lines.len(), 3, "{preds}");
    assert!(
        lines[1..]
            .iter()
            .all(|l| l.ends_with(",yes") || l.ends_with(",no")),
        "{preds}"
    );
    let eval = ok(&dpfl_in(
        d,
        &["evaluate", "--model", m, "--data", "northside.csv"],
    ));
    let v: serde_json::Value = serde_json::from_str(eval.trim()).unwrap();
    assert_eq!(v["metric"], "test_error");
    assert_eq!(v["rows"], 60);
    let err = v["value"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&err), "{v}");
    assert_eq!(v["certified_epsilon"].as_f64(), Some(certified));
}

/// One split (issue 31 item 4): `data inspect`, `config check` and training draw trial 1's
/// split from one generator, so inspect describes the split training uses.
#[test]
fn inspect_check_and_train_describe_one_split() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_data(d, 50);
    // Without a silo column: 4 random silos, so the split depends on the generator.
    ok(&dpfl_in(
        d,
        &[
            "init",
            "--data",
            "patients.csv",
            "--label",
            "readmitted",
            "--out",
            "exp.toml",
        ],
    ));
    let inspect = ok(&dpfl_in(d, &["--json", "data", "inspect", "exp.toml"]));
    let inspect: serde_json::Value = serde_json::from_str(inspect.trim()).unwrap();
    // The split training uses: trial 1 of `experiment::run`'s master generator.
    let spec = dpfl_lab::experiment::ExperimentSpec::from_file(&d.join("exp.toml")).unwrap();
    let mut master = dpfl_lab::experiment::master_rng(&spec).unwrap();
    let (trial, _) = dpfl_lab::experiment::next_trial(&spec, None, &mut master).unwrap();
    let want: Vec<serde_json::Value> = trial
        .silos
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": null,
                "train_rows": s.train.len(),
                "test_rows": s.test.len(),
                "train_class_counts": s.train.class_counts(),
            })
        })
        .collect();
    assert_eq!(inspect["silos"], serde_json::Value::Array(want));
    // `config check` prints the same silo lines as `data inspect`.
    let text = ok(&dpfl_in(d, &["data", "inspect", "exp.toml"]));
    let check = ok(&dpfl_in(d, &["config", "check", "exp.toml"]));
    for line in text.lines().filter(|l| l.trim_start().starts_with("silo")) {
        assert!(check.contains(line), "{line} not in {check}");
    }
}

/// Safe deployment defaults (issue 31 item 7): init writes a seed, yet `federate` writes
/// federation files without one unless asked for a seeded simulation (`--seeded`), and a
/// silo refuses a seeded file without `--allow-seeded`, saying why.
#[test]
fn federation_files_carry_no_seed_unless_asked_and_silos_refuse_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_data(d, 20);
    init(d);
    assert!(
        std::fs::read_to_string(d.join("exp.toml"))
            .unwrap()
            .contains("\nseed = 1")
    );
    let seed_line = |dir: &str| {
        std::fs::read_to_string(d.join(dir).join("trial-0/federation-0.toml"))
            .unwrap()
            .lines()
            .any(|l| l.starts_with("seed ="))
    };
    prepare(d, "deploy", &[]);
    assert!(!seed_line("deploy"), "a deployment's file carries a seed");
    let printed = prepare(d, "sim", &["--seeded"]);
    assert!(seed_line("sim"));
    assert!(printed.contains("--allow-seeded"), "{printed}");
    let silo = dpfl_in(
        d,
        &[
            "silo",
            "--config",
            "sim/trial-0/federation-0.toml",
            "--id",
            "0",
            "--data",
            "sim/trial-0/data/silo-0.shard",
            "--budget",
            "sim/trial-0/alg-0/budget-silo-0.toml",
            "--fresh",
        ],
    );
    let err = String::from_utf8_lossy(&silo.stderr);
    assert_eq!(silo.status.code(), Some(2), "{err}");
    assert!(
        err.contains("recompute this silo's noise") && err.contains("--allow-seeded"),
        "{err}"
    );
}

/// Fail early (issue 31 item 8): DP-NormFedAvg with a total budget outside Theorem 2's range
/// fails in `config check`, naming the algorithm and the field, with exit code 2.
#[test]
fn a_budget_outside_theorem_2_fails_in_config_check_naming_algorithm_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_data(d, 100);
    init(d);
    // Every silo each round: Theorem 2's epsilon for a total of 1 at delta = 1e-5 is
    // 16 ln(1e5) (sqrt(1 + 1/ln(1e5)) - 1) = 7.83, outside 0 < epsilon < 6.
    let mut exp = std::fs::read_to_string(d.join("exp.toml")).unwrap();
    exp += r#"
[[algorithms]]
label = "DP-NormFedAvg"
kind = "norm-fed-avg"
step_size = 0.1
local_steps = 2
batch_size = 8
variant = { kind = "dp-norm-fed-avg" }
[algorithms.privacy]
s = 64
sensitivity = { kind = "mu", mu = 0.1 }
budget = { kind = "total", epsilon = 1.0, delta = 1e-5 }
"#;
    std::fs::write(d.join("exp.toml"), exp).unwrap();
    let out = dpfl_in(d, &["config", "check", "exp.toml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("algorithms[2] \"DP-NormFedAvg\": ")
            && err.contains("privacy.budget")
            && err.contains("needs 0 < epsilon < 6, got 7.83"),
        "{err}"
    );
}

/// The catalogue's silently accepted inputs on this path (issue 31 item 10): init's batch
/// fits a small CSV, `eval_every = 0` is refused, `evaluate` on a header-only file fails,
/// and `predict` refuses a model whose weights hold a NaN.
#[test]
fn small_files_zero_periods_empty_files_and_nan_weights_are_refused_or_fit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_data(d, 8);
    init(d);
    // 8 rows a hospital, 2 of them test rows: batches of 6.
    let exp = std::fs::read_to_string(d.join("exp.toml")).unwrap();
    assert!(exp.contains("batch_size = 6\n"), "{exp}");
    ok(&dpfl_in(d, &["config", "check", "exp.toml"]));
    let zero = exp.replace("rounds = 200", "rounds = 200\neval_every = 0");
    std::fs::write(d.join("zero.toml"), zero).unwrap();
    let out = dpfl_in(d, &["config", "check", "zero.toml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(2) && err.contains("eval_every"),
        "{err}"
    );

    let short = exp.replace("rounds = 200", "rounds = 2");
    std::fs::write(d.join("exp.toml"), short).unwrap();
    ok(&dpfl_in(
        d,
        &["train", "--config", "exp.toml", "--out", "res"],
    ));
    let model = d.join("res/models/1-isrl-dp-mb-sgd");
    let m = model.to_str().unwrap();
    std::fs::write(d.join("empty.csv"), format!("{HEADER}\r\n")).unwrap();
    let out = dpfl_in(d, &["evaluate", "--model", m, "--data", "empty.csv"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(1) && err.contains("no data rows"),
        "{err}"
    );
    // A NaN weight, with the checksum made to match: refused by its own check.
    let w = model.join("model.safetensors");
    let mut bytes = std::fs::read(&w).unwrap();
    let at = bytes.len() - 8;
    bytes[at..].copy_from_slice(&f64::NAN.to_le_bytes());
    std::fs::write(&w, &bytes).unwrap();
    let sum = dpfl::data::registry::sha256_file(&w).unwrap();
    let meta_path = model.join("model.json");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["weights_sha256"] = serde_json::Value::String(sum);
    std::fs::write(&meta_path, meta.to_string()).unwrap();
    let out = dpfl_in(
        d,
        &[
            "predict",
            "--model",
            m,
            "--data",
            "patients.csv",
            "--out",
            "p.csv",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("NaN") && err.contains("diverged"),
        "{err}"
    );
    assert!(!d.join("p.csv").exists());
}

/// Names (issue 31 item 3): the hospitals' names, not only silo indices, in train's results
/// (a `silos:` line under the table), `summary.json` and each saved model's privacy.
#[test]
fn results_summary_and_models_name_the_silos() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_data(d, 40);
    init(d);
    let stdout = ok(&dpfl_in(
        d,
        &["train", "--quiet", "--config", "exp.toml", "--out", "res"],
    ));
    assert!(
        stdout.contains("silos: 0 = northside, 1 = st-marys, 2 = westgate"),
        "{stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("res/summary.json")).unwrap()).unwrap();
    let private = summary
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["private"] == true)
        .unwrap();
    let models: Vec<_> = std::fs::read_dir(d.join("res/models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!models.is_empty());
    for (i, h) in HOSPITALS.iter().enumerate() {
        assert_eq!(private["privacy"][i]["silo"], i);
        assert_eq!(private["privacy"][i]["name"], *h, "{private}");
    }
    for m in models {
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(m.join("model.json")).unwrap()).unwrap();
        if meta["privacy"]["private"] == true {
            assert_eq!(meta["privacy"]["silos"][2]["name"], "westgate", "{meta}");
        }
    }
}

/// Fail early, keep what finished (issue 31 item 8), the issue's own case: DP-NormFedAvg with
/// a per-round δ above the silos' δ under init's `enforce_budget = true`. Its first release is
/// refused by every silo's ledger ("release 0 would bring epsilon to inf"): `config check`
/// fails naming the algorithm and the field (it said ok), and `train` writes the two
/// algorithms that finished and the failure (it ran them and wrote nothing).
#[test]
fn a_first_release_the_ledger_refuses_fails_in_config_check_and_train_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_data(d, 100);
    init(d);
    let mut exp = std::fs::read_to_string(d.join("exp.toml")).unwrap();
    assert!(exp.contains("enforce_budget = true"), "{exp}");
    exp += r#"
[[algorithms]]
label = "DP-NormFedAvg"
kind = "norm-fed-avg"
step_size = 0.1
local_steps = 2
batch_size = 8
variant = { kind = "dp-norm-fed-avg" }
[algorithms.privacy]
s = 64
sensitivity = { kind = "mu", mu = 0.1 }
budget = { kind = "per-round", epsilon = 0.01, delta = 1e-3 }
"#;
    std::fs::write(d.join("exp.toml"), exp).unwrap();
    let out = dpfl_in(d, &["config", "check", "exp.toml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("algorithms[2] \"DP-NormFedAvg\": ")
            && err.contains("privacy.enforce_budget")
            && err.contains("release 0"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let out = dpfl_in(
        d,
        &["train", "--quiet", "--config", "exp.toml", "--out", "res"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("release 0"), "{err}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("res/summary.json")).unwrap()).unwrap();
    assert_eq!(summary.as_array().unwrap().len(), 2, "{summary}");
    let failure: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("res/failure.json")).unwrap()).unwrap();
    assert_eq!(failure["algorithm"], 2);
    assert_eq!(failure["label"], "DP-NormFedAvg");
    assert_eq!(std::fs::read_dir(d.join("res/models")).unwrap().count(), 2);
}

/// Useful defaults and outputs (issue 31 item 6): on a 900-row file `dpfl init`'s rounds and
/// step size (its documented rule) bring the non-private baseline's training loss to a flat
/// end (it moves less than 3% over the last 10% of the rounds) no worse than the private
/// run's; `predict --proba` writes each class's probability to standard output; `evaluate`
/// adds log-loss, AUC and the confusion matrix, in its JSON and its table.
#[test]
fn init_defaults_train_to_a_flat_loss_and_outputs_are_useful() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_data(d, 300);
    let notes = String::from_utf8_lossy(&init(d).stderr).into_owned();
    // 300 rows a hospital, 240 for training at 16 a round: 20 passes are 300 rounds; six
    // feature columns (age, bmi, three one-hot groups, the intercept): step 1/(6/4).
    assert!(
        notes.contains("rounds = 300, step_size = 0.667: 20 passes"),
        "{notes}"
    );
    let exp = std::fs::read_to_string(d.join("exp.toml")).unwrap();
    assert!(exp.contains("rounds = 300") && exp.contains("step_size = 0.667"));
    ok(&dpfl_in(
        d,
        &["train", "--quiet", "--config", "exp.toml", "--out", "res"],
    ));
    let mut rounds = csv::Reader::from_path(d.join("res/rounds.csv")).unwrap();
    let mut curves: std::collections::BTreeMap<String, Vec<(usize, f64)>> = Default::default();
    let head = rounds.headers().unwrap().clone();
    let col = |n: &str| head.iter().position(|h| h == n).unwrap();
    let (ca, cr, cl) = (col("algorithm"), col("round"), col("train_loss"));
    for rec in rounds.records() {
        let f = rec.unwrap();
        curves
            .entry(f[ca].to_string())
            .or_default()
            .push((f[cr].parse().unwrap(), f[cl].parse().unwrap()));
    }
    let end = |a: &str| -> (f64, f64) {
        let c = &curves[a];
        let last = c.last().unwrap();
        let before = c.iter().find(|(r, _)| *r >= 270).unwrap();
        (last.1, (last.1 - before.1).abs() / last.1)
    };
    let (private, _) = end("ISRL-DP MB-SGD");
    let (baseline, change) = end("MB-SGD (non-private, for comparison)");
    assert!(
        change < 0.03,
        "the baseline still moves {change} at the end"
    );
    assert!(
        baseline <= private,
        "baseline {baseline} > private {private}"
    );

    let model = "res/models/2-mb-sgd-non-private-for-comparison";
    std::fs::write(
        d.join("new.csv"),
        "age,bmi,sex,smoker,admission\r\n80,31.5,male,yes,emergency\r\n30,22.0,female,no,elective\r\n",
    )
    .unwrap();
    let csv = ok(&dpfl_in(
        d,
        &["predict", "--model", model, "--data", "new.csv", "--proba"],
    ));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "row,prediction,p_no,p_yes", "{csv}");
    assert_eq!(lines.len(), 3, "{csv}");
    for (line, want) in lines[1..].iter().zip(["yes", "no"]) {
        let f: Vec<&str> = line.split(',').collect();
        let (no, yes): (f64, f64) = (f[2].parse().unwrap(), f[3].parse().unwrap());
        assert!((no + yes - 1.0).abs() < 1e-5, "{line}");
        assert_eq!(f[1], want, "{csv}");
        assert_eq!(f[1] == "yes", yes > 0.5, "{line}");
    }
    // `--out -` is standard output too; a real target has no probabilities.
    let dash = ok(&dpfl_in(
        d,
        &[
            "predict", "--model", model, "--data", "new.csv", "--out", "-",
        ],
    ));
    assert!(dash.starts_with("row,prediction\n"), "{dash}");

    let out = dpfl_in(d, &["evaluate", "--model", model, "--data", "patients.csv"]);
    let v: serde_json::Value = serde_json::from_str(ok(&out).trim()).unwrap();
    let table = String::from_utf8_lossy(&out.stderr).into_owned();
    let counts = &v["confusion"]["counts"];
    assert_eq!(v["confusion"]["classes"], serde_json::json!(["no", "yes"]));
    let n: Vec<u64> = (0..4)
        .map(|i| counts[i / 2][i % 2].as_u64().unwrap())
        .collect();
    assert_eq!(n.iter().sum::<u64>(), 900);
    let error = (n[1] + n[2]) as f64 / 900.0;
    assert!((v["value"].as_f64().unwrap() - error).abs() < 1e-12, "{v}");
    let (ll, auc) = (v["log_loss"].as_f64().unwrap(), v["auc"].as_f64().unwrap());
    assert!(ll > 0.0 && ll < std::f64::consts::LN_2, "{v}");
    assert!(auc > 0.8 && auc <= 1.0, "{v}");
    assert!(
        table.contains(&format!("log-loss {ll:.4}; AUC {auc:.4}"))
            && table.contains("rows: true class, columns: predicted class")
            && table.contains(&format!("  no {:>4} {:>4}", n[0], n[1])),
        "{table}"
    );
}

/// The commands of docs/own-data.md's ```sh block that follows `heading`, one per line, each
/// split into words (the docs quote nothing), comments dropped.
fn documented(heading: &str) -> Vec<Vec<String>> {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/own-data.md"
    ))
    .unwrap();
    let after = &doc[doc
        .find(heading)
        .unwrap_or_else(|| panic!("no {heading:?} in the docs"))..];
    let start = after.find("```sh\n").expect("a sh block") + 6;
    let block = &after[start..start + after[start..].find("```").unwrap()];
    block
        .lines()
        .map(|l| l.split(" #").next().unwrap().trim())
        .filter(|l| l.starts_with("dpfl "))
        .map(|l| l.split_whitespace().skip(1).map(String::from).collect())
        .collect()
}

/// `dpfl ARGS` started in `d`, its output into `d/log`.
fn spawn_in(d: &Path, args: &[String], log: &str) -> std::process::Child {
    let f = std::fs::File::create(d.join(log)).unwrap();
    common::command()
        .args(args)
        .current_dir(d)
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("spawn dpfl")
}

/// Issue 31's "done when": the walk-through of README.md and docs/own-data.md, with the
/// commands as the docs print them (read from docs/own-data.md, so the docs cannot drift from
/// what works), on a messy spreadsheet export — CRLF line ends, `NA` and empty cells, named
/// hospitals — to predictions from the model the real server saved: `init` (warning about the
/// missing values), `config check`, `train`, `federate --prepare-only`, each hospital's own
/// `data shard`, a real `dpfl server` and one `dpfl silo` per hospital, then `predict` and
/// `evaluate` on the server's model.
#[test]
fn the_documented_walk_through_runs_on_a_messy_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The hospitals' rows with gaps: every 13th patient's BMI is `NA`, every 17th's smoker
    // cell empty; the pooled file and each hospital's own file hold the same rows.
    let mut pooled = format!("{HEADER}\r\n");
    let mut own = vec![format!("{HEADER}\r\n"); HOSPITALS.len()];
    for i in 0..100 {
        for (h, file) in own.iter_mut().enumerate() {
            let mut f: Vec<String> = row(h, i).split(',').map(String::from).collect();
            if i % 13 == 5 {
                f[1] = "NA".into();
            }
            if i % 17 == 3 {
                f[3] = String::new();
            }
            let line = f.join(",") + "\r\n";
            pooled += &line;
            *file += &line;
        }
    }
    std::fs::write(d.join("patients.csv"), pooled).unwrap();
    for (h, text) in HOSPITALS.iter().zip(own) {
        std::fs::write(d.join(format!("{h}.csv")), text).unwrap();
    }
    let first = documented("## Your own CSV, already split into silos");
    assert_eq!(first[0][0], "init", "{first:?}");
    for cmd in &first {
        // The docs' label column is `outcome`; this file's is `readmitted`.
        let args: Vec<String> = cmd
            .iter()
            .map(|a| {
                if a == "outcome" {
                    "readmitted".into()
                } else {
                    a.clone()
                }
            })
            .collect();
        let out = dpfl_in(d, &common::strs(&args));
        let stdout = ok(&out);
        match args[0].as_str() {
            "init" => {
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(
                    err.contains("warning: missing values in bmi") && err.contains("smoker"),
                    "{err}"
                );
            }
            "config" => assert!(
                stdout.contains("northside") && stdout.contains(": ok"),
                "{stdout}"
            ),
            _ => {}
        }
    }
    assert!(d.join("results/report.html").is_file());
    let deploy = documented("## From the experiment to a deployed model");
    let verbs: Vec<&str> = deploy.iter().map(|c| c[0].as_str()).collect();
    assert_eq!(
        verbs,
        ["federate", "data", "server", "silo", "predict", "evaluate"],
        "{deploy:?}"
    );
    ok(&dpfl_in(d, &common::strs(&deploy[0])));
    // The docs show hospital 0 (northside); every hospital runs the same with its own name
    // and index.
    let each = |cmd: &[String], i: usize, h: &str| -> Vec<String> {
        let mut out: Vec<String> = cmd
            .iter()
            .map(|a| {
                a.replace("northside", h)
                    .replace("silo-0", &format!("silo-{i}"))
            })
            .collect();
        if let Some(k) = out.iter().position(|a| a == "--id") {
            out[k + 1] = i.to_string();
        }
        out
    };
    for (i, h) in HOSPITALS.iter().enumerate() {
        ok(&dpfl_in(d, &common::strs(&each(&deploy[1], i, h))));
    }
    let mut server = spawn_in(d, &deploy[2], "server.log");
    let mut silos: Vec<_> = HOSPITALS
        .iter()
        .enumerate()
        .map(|(i, h)| spawn_in(d, &each(&deploy[3], i, h), &format!("silo-{i}.log")))
        .collect();
    let status = wait_exit(&mut server, Duration::from_secs(300));
    let log = std::fs::read_to_string(d.join("server.log")).unwrap_or_default();
    assert!(status.success(), "server: {log}");
    for (i, s) in silos.iter_mut().enumerate() {
        let st = wait_exit(s, Duration::from_secs(30));
        let slog = std::fs::read_to_string(d.join(format!("silo-{i}.log"))).unwrap_or_default();
        assert!(st.success(), "silo {i}: {slog}");
    }
    std::fs::write(
        d.join("new.csv"),
        "smoker,admission,sex,bmi,age\r\nyes,emergency,male,31.5,80\r\nno,elective,female,22.0,30\r\n",
    )
    .unwrap();
    ok(&dpfl_in(d, &common::strs(&deploy[4])));
    let preds = std::fs::read_to_string(d.join("preds.csv")).unwrap();
    assert!(
        preds.starts_with("row,prediction\n") && preds.lines().count() == 3,
        "{preds}"
    );
    let v: serde_json::Value =
        serde_json::from_str(ok(&dpfl_in(d, &common::strs(&deploy[5]))).trim()).unwrap();
    // Northside's rows without a gap (missing = "drop"): 100 less the NA and empty ones.
    let dropped = (0..100).filter(|i| i % 13 == 5 || i % 17 == 3).count();
    assert_eq!(v["rows"], 100 - dropped, "{v}");
    assert!(v["value"].as_f64().unwrap() < 0.5, "{v}");
    assert_eq!(v["confusion"]["classes"], serde_json::json!(["no", "yes"]));
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("server/model/model.json")).unwrap()).unwrap();
    assert_eq!(meta["privacy"]["silos"][1]["name"], "st-marys", "{meta}");
}

/// Fail early at later rounds too (issue 31 item 8, `config check`): DP-NormFedAvg with a
/// per-round budget whose first release fits each silo's total budget (ε = 0.5 of 1) but
/// whose R rounds do not. `config check` said ok (it ran release 0 only) and `train` failed
/// mid-run; now the check composes each silo's whole planned run against its ledger and
/// fails naming the algorithm, the field and the silo.
#[test]
fn a_budget_a_later_round_exceeds_fails_in_config_check() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_data(d, 40);
    init(d);
    let mut exp = std::fs::read_to_string(d.join("exp.toml")).unwrap();
    exp += r#"
[[algorithms]]
label = "DP-NormFedAvg"
kind = "norm-fed-avg"
step_size = 0.1
local_steps = 2
batch_size = 8
variant = { kind = "dp-norm-fed-avg" }
[algorithms.privacy]
s = 64
sensitivity = { kind = "mu", mu = 0.1 }
budget = { kind = "per-round", epsilon = 0.5, delta = 1e-9 }
"#;
    std::fs::write(d.join("exp.toml"), exp).unwrap();
    let out = dpfl_in(d, &["config", "check", "exp.toml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("algorithms[2] \"DP-NormFedAvg\": ")
            && err.contains("privacy.enforce_budget")
            && err.contains("silo 0 (northside)'s ledger would refuse a later round")
            && err.contains("200 planned rounds"),
        "{err}"
    );
    assert!(!err.contains("release 0 "), "{err}");
}
