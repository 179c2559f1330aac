//! `dpfl predict` / `dpfl evaluate` on models trained on every kind of data source (issue 16
//! item 4): LIBSVM, IDX images (with and without PCA), generated (synthetic) data and the
//! bundled obesity (CSV) and a9a (LIBSVM) sets. Each model is trained on a small, learnable,
//! generated file; predicting must repeat the training preprocessing, so the predictions
//! must be those `evaluate` scores and must be mostly right.

use std::path::Path;
use std::process::{Command, Output};

fn dpfl(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args(args)
        .current_dir(dir)
        .env_remove("DPFL_DATA")
        .output()
        .expect("run dpfl")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `dpfl ARGS` in `dir`, which must fail with `needle` in its error.
fn fails(dir: &Path, args: &[&str], needle: &str) {
    let out = dpfl(dir, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(needle), "{err}");
}

/// `dpfl predict --model MODEL --data DATA --out OUT` in `dir`; returns the predictions file.
fn predict(dir: &Path, model: &Path, data: &str, out: &str) -> String {
    let m = model.to_str().unwrap();
    ok(&dpfl(
        dir,
        &["predict", "--model", m, "--data", data, "--out", out],
    ));
    std::fs::read_to_string(dir.join(out)).unwrap()
}

/// A saved model's `model.json`.
fn meta(model: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(model.join("model.json")).unwrap()).unwrap()
}

/// The strings of a JSON array.
fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// A deterministic stream of numbers in [0, 1) (the test needs no statistical quality).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn experiment(source: &str, partition: bool, model: &str, rounds: usize) -> String {
    let partition = if partition {
        "partition = { kind = \"iid\", silos = 2 }\n"
    } else {
        ""
    };
    format!(
        "name = \"predict test\"\nrounds = {rounds}\nseed = 3\nparticipation = {{ kind = \"all\" }}\n\
         [data]\nsource = {source}\n{partition}\
         [model]\nkind = \"{model}\"\n\
         [privacy]\nepsilon = 1.0\ndelta = 1e-5\nlipschitz = 5.0\n\
         [[algorithms]]\nlabel = \"MB-SGD\"\nkind = \"mb-sgd\"\nstep_size = 1.0\nbatch_size = 20\n"
    )
}

/// Trains `toml` in `dir`; returns the model directory.
fn train(dir: &Path, toml: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("exp.toml"), toml).unwrap();
    ok(&dpfl(
        dir,
        &["train", "--config", "exp.toml", "--out", "out"],
    ));
    dir.join("out/models/1-mb-sgd")
}

/// Predicts and evaluates `data` (with `labels` for images); checks that the metric
/// `evaluate` prints is the error rate of the predictions against `truth`, and returns it.
fn predict_and_evaluate(
    dir: &Path,
    model: &Path,
    data: &str,
    labels: Option<&str>,
    truth: &[&str],
) -> f64 {
    let m = model.to_str().unwrap();
    let preds: Vec<String> = predict(dir, model, data, "preds.csv")
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().to_string())
        .collect();
    assert_eq!(preds.len(), truth.len());
    let wrong = preds.iter().zip(truth).filter(|(p, t)| p != *t).count();
    let mut args = vec!["evaluate", "--model", m, "--data", data];
    if let Some(l) = labels {
        args.extend(["--labels", l]);
    }
    let v: serde_json::Value = serde_json::from_str(ok(&dpfl(dir, &args)).trim()).unwrap();
    assert_eq!(v["metric"], "test_error");
    assert_eq!(v["rows"], truth.len());
    let error = v["value"].as_f64().unwrap();
    assert!(
        (error - wrong as f64 / truth.len() as f64).abs() < 1e-12,
        "evaluate says {error}, predict got {wrong} of {} wrong",
        truth.len()
    );
    error
}

#[test]
fn libsvm_model_predicts_a_libsvm_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Lcg(1);
    let (mut text, mut truth) = (String::new(), Vec::new());
    for _ in 0..300 {
        let (a, b, c) = (rng.next() * 2.0 - 1.0, rng.next() * 2.0 - 1.0, rng.next());
        let label = if a - b > 0.0 { "+1" } else { "-1" };
        text += &format!("{label} 1:{a:.4} 2:{b:.4} 4:{c:.4}\n");
        truth.push(label);
    }
    std::fs::write(dir.path().join("train.svm"), &text).unwrap();
    let src = "{ kind = \"libsvm\", path = \"train.svm\", spec = { num_features = 4, target = \"binary\" } }";
    let model = train(dir.path(), &experiment(src, true, "logistic", 60));
    let meta = meta(&model);
    assert_eq!(meta["preprocessing"]["libsvm"]["num_features"], 4);
    assert_eq!(meta["classes"], serde_json::json!(["-1", "+1"]));
    let error = predict_and_evaluate(dir.path(), &model, "train.svm", None, &truth);
    assert!(error < 0.1, "{error}");
    // A wider file than the model's is refused, naming the file and line.
    std::fs::write(dir.path().join("wide.svm"), "+1 1:0.5 7:1\n").unwrap();
    let m = model.to_str().unwrap();
    let args = [
        "predict", "--model", m, "--data", "wide.svm", "--out", "p2.csv",
    ];
    fails(dir.path(), &args, "wide.svm:1:");
}

fn idx_file(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut v = magic.to_be_bytes().to_vec();
    for d in dims {
        v.extend_from_slice(&d.to_be_bytes());
    }
    v.extend_from_slice(data);
    v
}

/// 4 × 4 images: class "bright-left" has a bright left half, "bright-right" a bright right.
fn write_images(dir: &Path, n: usize, seed: u64) -> Vec<&'static str> {
    let mut rng = Lcg(seed);
    let (mut px, mut lab, mut truth) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let left = i % 2 == 0;
        for _r in 0..4 {
            for c in 0..4 {
                let bright = (c < 2) == left;
                let v = if bright {
                    150.0 + 100.0 * rng.next()
                } else {
                    100.0 * rng.next()
                };
                px.push(v as u8);
            }
        }
        lab.push(u8::from(!left));
        truth.push(if left { "bright-left" } else { "bright-right" });
    }
    std::fs::write(dir.join("img.idx"), idx_file(0x803, &[n as u32, 4, 4], &px)).unwrap();
    std::fs::write(dir.join("lab.idx"), idx_file(0x801, &[n as u32], &lab)).unwrap();
    truth
}

#[test]
fn idx_models_with_and_without_pca_predict_an_idx_file() {
    for pca in ["", ", pca = 3"] {
        let dir = tempfile::tempdir().unwrap();
        write_images(dir.path(), 200, 5);
        let src = format!(
            "{{ kind = \"idx\", images = \"img.idx\", labels = \"lab.idx\", \
             classes = [\"bright-left\", \"bright-right\"]{pca} }}"
        );
        let model = train(dir.path(), &experiment(&src, true, "logistic", 40));
        let meta = meta(&model);
        assert_eq!(meta["preprocessing"]["idx"]["rows"], 4);
        let features = if pca.is_empty() { 16 } else { 3 };
        assert_eq!(meta["num_features"], features, "{pca}");
        assert_eq!(meta["preprocessing"]["pca"].is_null(), pca.is_empty());
        // New images, never seen in training: the saved PCA projects them.
        let new = tempfile::tempdir().unwrap();
        let truth = write_images(new.path(), 50, 99);
        for f in ["img.idx", "lab.idx"] {
            std::fs::copy(new.path().join(f), dir.path().join(format!("new-{f}"))).unwrap();
        }
        let error = predict_and_evaluate(
            dir.path(),
            &model,
            "new-img.idx",
            Some("new-lab.idx"),
            &truth,
        );
        assert!(error < 0.1, "{pca}: {error}");
        // Evaluating images needs their labels.
        let m = model.to_str().unwrap();
        let args = ["evaluate", "--model", m, "--data", "new-img.idx"];
        fails(dir.path(), &args, "--labels");
    }
}

#[test]
fn synthetic_model_predicts_a_features_csv() {
    let dir = tempfile::tempdir().unwrap();
    let src = "{ kind = \"synthetic\", task = \"binary\", silos = 2, train = 200, test = 50, features = 3 }";
    let model = train(dir.path(), &experiment(src, false, "logistic", 30));
    let meta = meta(&model);
    let names = strings(&meta["feature_names"]);
    let classes = strings(&meta["classes"]);
    // The columns in reverse order and an extra column: read by name.
    let mut header: Vec<String> = names.iter().rev().cloned().collect();
    header.push("note".into());
    let mut text = header.join(",") + "\n";
    for i in 0..4 {
        let row: Vec<String> = (0..names.len())
            .map(|j| format!("{}", (i + j) as f64 * 0.1))
            .collect();
        text += &format!("{},x\n", row.join(","));
    }
    std::fs::write(dir.path().join("new.csv"), &text).unwrap();
    let preds = predict(dir.path(), &model, "new.csv", "p.csv");
    assert_eq!(preds.lines().count(), 5, "{preds}");
    assert!(
        preds
            .lines()
            .skip(1)
            .all(|l| classes.iter().any(|c| l.ends_with(&format!(",{c}")))),
        "{preds}"
    );
    // Evaluating needs the `target` column.
    let m = model.to_str().unwrap();
    fails(
        dir.path(),
        &["evaluate", "--model", m, "--data", "new.csv"],
        "`target`",
    );
}

#[test]
fn bundled_obesity_and_a9a_models_predict_their_formats() {
    let dir = tempfile::tempdir().unwrap();
    let model = train(
        dir.path(),
        &experiment("{ kind = \"obesity\" }", true, "softmax", 5),
    );
    let meta = meta(&model);
    assert_eq!(meta["preprocessing"]["source"], "obesity");
    assert!(
        meta["preprocessing"]["csv"].is_object()
            && meta["preprocessing"]["standardizer"].is_object()
    );
    // Three rows of the bundled file, with the columns reordered and the target dropped.
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/obesity/obesity.csv"),
    )
    .unwrap();
    let rows: Vec<Vec<&str>> = src
        .lines()
        .take(4)
        .map(|l| l.split(',').collect())
        .collect();
    let target = rows[0].iter().position(|h| *h == "NObeyesdad").unwrap();
    let truth: Vec<&str> = rows[1..].iter().map(|r| r[target]).collect();
    let mut text = String::new();
    for r in &rows {
        let mut r: Vec<&str> = r
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != target)
            .map(|(_, v)| *v)
            .collect();
        r.reverse();
        text += &(r.join(",") + "\n");
    }
    std::fs::write(dir.path().join("three.csv"), text).unwrap();
    let preds = predict(dir.path(), &model, "three.csv", "p.csv");
    assert_eq!(preds.lines().count(), 4);
    let classes = strings(&meta["classes"]);
    assert!(
        preds
            .lines()
            .skip(1)
            .all(|l| classes.iter().any(|c| l.ends_with(&format!(",{c}"))))
    );
    assert_eq!(truth.len(), 3);

    // a9a: LIBSVM with 123 features; a line using feature 123 reads, the labels map to ±1.
    let dir = tempfile::tempdir().unwrap();
    let model = train(
        dir.path(),
        &experiment("{ kind = \"a9a\" }", true, "logistic", 2),
    );
    std::fs::write(dir.path().join("two.svm"), "+1 3:1 123:1\n-1 5:1\n").unwrap();
    let truth = ["+1", "-1"];
    let error = predict_and_evaluate(dir.path(), &model, "two.svm", None, &truth);
    assert!([0.0, 0.5, 1.0].contains(&error), "{error}");
}
