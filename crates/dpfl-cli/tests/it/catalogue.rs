//! The catalogue of malformed inputs (issue 12 item 9, the CLI/data/output half): every
//! subcommand fed broken configs, CSV, LIBSVM, IDX, gzip, account/calibrate flags, experiment
//! and reproduction specs, output directories and checkpoints. Each case asserts the exit code
//! the README documents (2 usage/config, 1 a failed run), no panic (no "panicked", never exit
//! code 101), no hang (a timeout), and one error line naming the culprit (file, line, field or
//! flag). Network, federation, shard and certificate faults are in their own test files.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use dpfl_testkit::experiment::Head;

const TIMEOUT: Duration = Duration::from_secs(120);

/// A small synthetic experiment that trains in well under a second.
static SYNTH: LazyLock<String> = LazyLock::new(|| {
    Head::default().toml(
        r#"[[algorithms]]
kind = "mb-sgd"
calibration = "experiment"
step_size = 0.5
"#,
    )
});

/// A CSV experiment over `data.csv` next to the config (relative to the config file).
const CSV_EXP: &str = r#"
name = "csv"
rounds = 3
seed = 1
[data]
source = { kind = "csv", path = "data.csv", spec = { target = { kind = "class", column = "y" } } }
partition = { kind = "iid", silos = 2 }
[model]
kind = "logistic"
[[algorithms]]
kind = "mb-sgd"
step_size = 0.1
batch_size = 2
"#;

const GOOD_CSV: &str = "a,b,y\n1,2,0\n2,1,1\n3,0,0\n0,3,1\n1,1,0\n2,2,1\n3,3,0\n0,0,1\n";

/// A LIBSVM experiment over `data.svm` next to the config.
fn libsvm_exp(features: &str) -> String {
    format!(
        r#"
name = "svm"
rounds = 3
seed = 1
[data]
source = {{ kind = "libsvm", path = "data.svm", spec = {{ num_features = {features}, target = "binary" }} }}
partition = {{ kind = "iid", silos = 2 }}
[model]
kind = "logistic"
[[algorithms]]
kind = "mb-sgd"
step_size = 0.1
batch_size = 2
"#
    )
}

const GOOD_SVM: &str =
    "+1 1:1 3:0.5\n-1 2:1\n+1 1:0.2\n-1 3:1\n+1 2:0.3\n-1 1:0.1\n+1 3:0.2\n-1 2:0.9\n";

/// A tiny reproduction on synthetic data (seconds); `refusals` uses it too.
pub(crate) const TINY_REPRO: &str = r#"
id = "tiny"
title = "tiny"
metric = "test_error"
seed = 7
trials = 2
repetitions = 2
epsilons = [1.0, 4.0]
[base]
rounds = 5
delta = 1e-5
lipschitz_from_data = 2.0
data = { source = { kind = "synthetic", task = "binary", silos = 3, train = 60, test = 20, features = 4 } }
model = { kind = "logistic" }
[[panels]]
figure = "1"
participation = { kind = "all" }
[[algorithms]]
label = "ISRL-DP MB-SGD"
spec = { kind = "mb-sgd", calibration = "experiment", step_size = 1.0 }
steps = { from = -3.0, to = 0.0, points = 4 }
[[algorithms]]
label = "MB-SGD"
spec = { kind = "mb-sgd", step_size = 1.0, batch_size = 10 }
steps = { from = -3.0, to = 0.0, points = 4 }
"#;

/// PAGD with `phases = 0` (was silently one phase).
const PAGD_PHASES_0: &str = r#"
name = "pagd"
rounds = 5
seed = 1
participation = { kind = "all" }
projection = { kind = "l2-ball", radius = 5.0 }
[data]
source = { kind = "synthetic", task = "binary", silos = 3, train = 200, test = 50, features = 4 }
[model]
kind = "logistic"
[privacy]
epsilon = 2.0
delta = 1e-5
lipschitz = 1.0
[[algorithms]]
kind = "pagd"
smoothness = 1.0
phases = 0
"#;

/// One malformed input.
struct Case {
    name: &'static str,
    /// Files to write in the case's directory: (name, content).
    files: Vec<(&'static str, Vec<u8>)>,
    /// Arguments; `{dir}` is replaced by the case's directory.
    args: Vec<String>,
    code: i32,
    /// Fragments the error line must contain (`{dir}` replaced).
    culprit: Vec<&'static str>,
    /// Extra environment.
    env: Vec<(&'static str, &'static str)>,
}

fn case(
    name: &'static str,
    files: Vec<(&'static str, Vec<u8>)>,
    args: &[&str],
    code: i32,
    culprit: &[&'static str],
) -> Case {
    Case {
        name,
        files,
        args: args.iter().map(|s| s.to_string()).collect(),
        code,
        culprit: culprit.to_vec(),
        env: Vec::new(),
    }
}

fn text(name: &'static str, s: &str) -> (&'static str, Vec<u8>) {
    (name, s.as_bytes().to_vec())
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// `train --config {dir}/c.toml` on `SYNTH` with one replacement.
fn synth(name: &'static str, from: &str, to: &str, code: i32, culprit: &[&'static str]) -> Case {
    assert!(SYNTH.contains(from), "{name}: {from:?} not in SYNTH");
    case(
        name,
        vec![text("c.toml", &SYNTH.replace(from, to))],
        &["train", "--quiet", "--config", "{dir}/c.toml"],
        code,
        culprit,
    )
}

/// `train` on a CSV experiment with the given data file.
fn csv(name: &'static str, data: Vec<u8>, code: i32, culprit: &[&'static str]) -> Case {
    case(
        name,
        vec![text("c.toml", CSV_EXP), ("data.csv", data)],
        &["train", "--quiet", "--config", "{dir}/c.toml"],
        code,
        culprit,
    )
}

/// `train` on a LIBSVM experiment with the given feature count and data file.
fn svm(
    name: &'static str,
    features: &str,
    data: Vec<u8>,
    code: i32,
    culprit: &[&'static str],
) -> Case {
    Case {
        name,
        files: vec![
            ("c.toml", libsvm_exp(features).into_bytes()),
            ("data.svm", data),
        ],
        args: ["train", "--quiet", "--config", "{dir}/c.toml"]
            .map(String::from)
            .to_vec(),
        code,
        culprit: culprit.to_vec(),
        env: Vec::new(),
    }
}

fn account(name: &'static str, extra: &[&str], code: i32, culprit: &[&'static str]) -> Case {
    // Valid --noise-multiplier and --delta unless the case gives its own.
    let mut args = vec!["account"];
    for (flag, value) in [("--noise-multiplier", "2"), ("--delta", "1e-5")] {
        if !extra.contains(&flag) {
            args.extend([flag, value]);
        }
    }
    args.extend_from_slice(extra);
    case(name, vec![], &args, code, culprit)
}

fn calibrate(name: &'static str, extra: &[&str], code: i32, culprit: &[&'static str]) -> Case {
    let mut args = vec!["calibrate"];
    args.extend_from_slice(extra);
    case(name, vec![], &args, code, culprit)
}

/// `reproduce tiny --spec {dir}/r.toml` on `TINY_REPRO` with one replacement.
fn repro(name: &'static str, from: &str, to: &str, code: i32, culprit: &[&'static str]) -> Case {
    assert!(
        TINY_REPRO.contains(from),
        "{name}: {from:?} not in TINY_REPRO"
    );
    case(
        name,
        vec![text("r.toml", &TINY_REPRO.replace(from, to))],
        &[
            "reproduce",
            "tiny",
            "--quiet",
            "--spec",
            "{dir}/r.toml",
            "--out",
            "{dir}/out",
        ],
        code,
        culprit,
    )
}

fn idx(magic: u32, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut v = magic.to_be_bytes().to_vec();
    for d in dims {
        v.extend_from_slice(&d.to_be_bytes());
    }
    v.extend_from_slice(data);
    v
}

fn cases() -> Vec<Case> {
    let mut c = vec![
        // ---- experiment configs (train) ----
        case("config missing", vec![], &["train", "--config", "{dir}/none.toml"], 2, &["{dir}/none.toml"]),
        case("config is a directory", vec![], &["train", "--config", "{dir}"], 2, &["{dir}"]),
        case("config empty", vec![text("c.toml", "")], &["train", "--config", "{dir}/c.toml"], 2, &["c.toml", "name"]),
        case("config not UTF-8", vec![("c.toml", vec![0xff, 0xfe, 0x00, 0x41])], &["train", "--config", "{dir}/c.toml"], 2, &["c.toml"]),
        synth("TOML syntax error", "rounds = 5", "rounds = = 5", 2, &["c.toml:3"]),
        synth("unknown top-level field", "seed = 1", "seed = 1\ncolour = \"red\"", 2, &["c.toml", "colour"]),
        synth("rounds zero", "rounds = 5", "rounds = 0", 2, &["c.toml", "rounds"]),
        synth("rounds negative", "rounds = 5", "rounds = -5", 2, &["c.toml:3"]),
        synth("rounds a string", "rounds = 5", "rounds = \"ten\"", 2, &["c.toml:3"]),
        synth("trials zero", "seed = 1", "seed = 1\ntrials = 0", 2, &["trials"]),
        synth("no algorithms", "[[algorithms]]\nkind = \"mb-sgd\"\ncalibration = \"experiment\"\nstep_size = 0.5\n", "algorithms = []\n", 2, &["c.toml"]),
        synth("unknown algorithm", "kind = \"mb-sgd\"", "kind = \"magic-sgd\"", 2, &["c.toml", "magic-sgd"]),
        synth("unknown model", "kind = \"logistic\"", "kind = \"transformer\"", 2, &["c.toml", "transformer"]),
        synth("epsilon zero", "epsilon = 1.0", "epsilon = 0.0", 2, &["c.toml", "privacy.epsilon"]),
        synth("epsilon negative", "epsilon = 1.0", "epsilon = -1.0", 2, &["privacy.epsilon"]),
        synth("epsilon nan", "epsilon = 1.0", "epsilon = nan", 2, &["privacy.epsilon"]),
        synth("epsilon and noise multiplier", "epsilon = 1.0", "epsilon = 1.0\nnoise_multiplier = 1.0", 2, &["c.toml", "privacy.epsilon", "privacy.noise_multiplier"]),
        synth("neither epsilon nor noise multiplier", "epsilon = 1.0", "", 2, &["c.toml", "privacy.epsilon", "privacy.noise_multiplier"]),
        synth("noise multiplier with enforce_budget", "epsilon = 1.0", "noise_multiplier = 1.0\nenforce_budget = true", 2, &["privacy.enforce_budget"]),
        synth("delta one", "delta = \"1/n^2\"", "delta = 1.0", 2, &["privacy.delta"]),
        synth("delta rule unknown", "delta = \"1/n^2\"", "delta = \"1/m\"", 2, &["privacy.delta", "1/m"]),
        synth("lipschitz infinite", "lipschitz = 1.0", "lipschitz = inf", 2, &["privacy.lipschitz"]),
        synth("clip negative", "seed = 1", "seed = 1\nclip = -1.0", 2, &["clip"]),
        synth("step size zero", "step_size = 0.5", "step_size = 0.0", 2, &["algorithms[0] \"", "\": step_size must be finite and > 0, got 0"]),
        // A TOML nan reaches the parameter check (the algorithm table is read through the
        // derive, not a JSON value that would turn it into null: issue 28 item 6's registry).
        synth("step size nan", "step_size = 0.5", "step_size = nan", 2, &["algorithms[0] \"", "\": step_size must be finite and > 0, got NaN"]),
        synth("private without privacy section", "[privacy]\nepsilon = 1.0\ndelta = \"1/n^2\"\nlipschitz = 1.0\n", "", 2, &["algorithms[0]", "[privacy]"]),
        synth("batch above n", "step_size = 0.5", "step_size = 0.5\nbatch_size = 51", 2, &["51", "n = 50"]),
        synth("epsilons wrong length", "epsilon = 1.0", "epsilon = 1.0\nepsilons = [1.0, 2.0]", 2, &["privacy.epsilons"]),
        synth("test fraction above one", "features = 4 }", "features = 4 }\ntest_fraction = 1.5", 2, &["data.test_fraction"]),
        synth("participation above N", "seed = 1", "seed = 1\nparticipation = { kind = \"fixed\", m = 9 }", 2, &["participation", "9"]),
        synth("participation unknown kind", "seed = 1", "seed = 1\nparticipation = { kind = \"sometimes\" }", 2, &["c.toml", "sometimes"]),
        synth("projection radius negative", "seed = 1", "seed = 1\nprojection = { kind = \"l2-ball\", radius = -1.0 }", 2, &["projection.radius"]),
        synth("synthetic zero silos", "silos = 3", "silos = 0", 2, &["data"]),
        synth("synthetic features 1e12", "features = 4", "features = 1000000000000", 2, &["features", "16777216"]),
        synth("synthetic rows too many", "train = 50", "train = 1000000000", 1, &["synthetic", "268435456"]),
        synth("logistic on 3 classes", "task = \"binary\"", "task = { multiclass = { classes = 3 } }", 2, &["c.toml", "model.kind", "2 classes"]),
        synth("linear on a class target", "kind = \"logistic\"", "kind = \"linear\"", 2, &["c.toml", "model.kind"]),
        synth("diverged run", "step_size = 0.5", "step_size = 1e308", 1, &["diverged", "expect_divergence"]),
        // ---- CSV data ----
        csv("csv missing", vec![], 1, &["data.csv"]),
        csv("csv empty", vec![], 1, &["data.csv"]),
        csv("csv header only", b"a,b,y\n".to_vec(), 1, &["data.csv", "no data rows"]),
        csv("csv ragged row", b"a,b,y\n1,2,0\n1,2\n".to_vec(), 1, &["data.csv:3"]),
        csv("csv non-numeric cell", b"a,b,y\n1,2,0\n1,x,1\n".to_vec(), 1, &["data.csv:3", "b"]),
        csv("csv nan cell", b"a,b,y\n1,2,0\n1,nan,1\n".to_vec(), 1, &["data.csv:3"]),
        csv("csv duplicate header", b"a,a,y\n1,2,0\n".to_vec(), 1, &["data.csv:1", "repeated"]),
        csv("csv not UTF-8", b"a,b,y\n1,2,0\n1,\xff,1\n".to_vec(), 1, &["data.csv:3", "UTF-8"]),
        csv("csv target column missing", b"a,b,z\n1,2,0\n".to_vec(), 2, &["y"]),
        csv("csv gzip truncated", gz(GOOD_CSV.as_bytes())[..20].to_vec(), 1, &["data.csv"]),
        csv("csv gzip corrupt body", { let mut g = gz(GOOD_CSV.as_bytes()); let n = g.len(); for b in &mut g[10..n - 8] { *b ^= 0x5a; } g }, 1, &["data.csv"]),
        case("csv path relative to the config file", vec![text("c.toml", CSV_EXP)], &["train", "--quiet", "--config", "{dir}/c.toml"], 1, &["{dir}/data.csv"]),
        // ---- LIBSVM data ----
        svm("libsvm features 1e12", "1000000000000", GOOD_SVM.as_bytes().to_vec(), 2, &["c.toml", "num_features", "16777216"]),
        svm("libsvm features 1e8 on 13 lines", "100000000", GOOD_SVM.repeat(2).as_bytes().to_vec(), 2, &["c.toml", "num_features", "16777216"]),
        Case { env: vec![("DPFL_MAX_VALUES", "3000000")], ..svm("libsvm rows past the dense limit", "1000000", GOOD_SVM.as_bytes().to_vec(), 1, &["data.svm", "3000000", "DPFL_MAX_VALUES"]) },
        svm("libsvm features zero", "0", GOOD_SVM.as_bytes().to_vec(), 2, &["num_features"]),
        svm("libsvm features negative", "-3", GOOD_SVM.as_bytes().to_vec(), 2, &["c.toml"]),
        svm("libsvm index above count", "3", b"+1 1:1\n-1 4:1\n".to_vec(), 1, &["data.svm:2", "outside 1..=3"]),
        svm("libsvm index decreasing", "3", b"+1 1:1\n-1 2:1 1:1\n".to_vec(), 1, &["data.svm:2", "increase"]),
        svm("libsvm index zero", "3", b"+1 0:1\n".to_vec(), 1, &["data.svm:1"]),
        svm("libsvm bad label", "3", b"+1 1:1\n+2 1:1\n".to_vec(), 1, &["data.svm:2", "label"]),
        svm("libsvm label text", "3", b"+1 1:1\nyes 1:1\n".to_vec(), 1, &["data.svm:2", "yes"]),
        svm("libsvm nan value", "3", b"+1 1:nan\n".to_vec(), 1, &["data.svm:1", "not finite"]),
        svm("libsvm missing colon", "3", b"+1 1=1\n".to_vec(), 1, &["data.svm:1", "index:value"]),
        svm("libsvm empty file", "3", Vec::new(), 1, &["data.svm", "no data rows"]),
        case("libsvm file missing", vec![("c.toml", libsvm_exp("3").into_bytes())], &["train", "--quiet", "--config", "{dir}/c.toml"], 1, &["{dir}/data.svm"]),
        svm("libsvm gzip truncated", "3", gz(GOOD_SVM.as_bytes())[..25].to_vec(), 1, &["data.svm"]),
        svm("libsvm gzip bad header", "3", vec![0x1f, 0x8b, 0x00, 0x00, 0x01, 0x02], 1, &["data.svm"]),
        // ---- IDX via --data-dir (MNIST layout) ----
        case("mnist files missing", vec![text("m.toml", &SYNTH.replace("source = { kind = \"synthetic\", task = \"binary\", silos = 3, train = 50, test = 10, features = 4 }", "source = { kind = \"mnist\" }\npartition = { kind = \"iid\", silos = 2 }").replace("kind = \"logistic\"", "kind = \"softmax\""))], &["train", "--quiet", "--config", "{dir}/m.toml", "--data-dir", "{dir}"], 1, &["mnist/train-images-idx3-ubyte.gz", "{dir}"]),
        case("mnist images corrupt (checksum)", vec![
            text("m.toml", &SYNTH.replace("source = { kind = \"synthetic\", task = \"binary\", silos = 3, train = 50, test = 10, features = 4 }", "source = { kind = \"mnist\" }\npartition = { kind = \"iid\", silos = 2 }").replace("kind = \"logistic\"", "kind = \"softmax\"")),
            ("mnist/train-images-idx3-ubyte.gz", gz(&idx(0x0803, &[2, 1, 2], &[0, 1, 2]))),
            ("mnist/train-labels-idx1-ubyte.gz", gz(&idx(0x0801, &[2], &[0, 1]))),
        ], &["train", "--quiet", "--config", "{dir}/m.toml", "--data-dir", "{dir}"], 1, &["train-images-idx3-ubyte.gz", "SHA-256"]),
        case("data dir is a file", vec![text("m.toml", &SYNTH.replace("source = { kind = \"synthetic\", task = \"binary\", silos = 3, train = 50, test = 10, features = 4 }", "source = { kind = \"mnist\" }\npartition = { kind = \"iid\", silos = 2 }").replace("kind = \"logistic\"", "kind = \"softmax\""))], &["train", "--quiet", "--config", "{dir}/m.toml", "--data-dir", "{dir}/m.toml"], 1, &["{dir}/m.toml"]),
        // ---- train flags and outputs ----
        case("train out is a file", vec![text("c.toml", &SYNTH), text("f", "")], &["train", "--quiet", "--config", "{dir}/c.toml", "--out", "{dir}/f"], 2, &["{dir}/f", "not a directory"]),
        case("train out under a file", vec![text("c.toml", &SYNTH), text("f", "")], &["train", "--quiet", "--config", "{dir}/c.toml", "--out", "{dir}/f/sub"], 2, &["{dir}/f/sub"]),
        case("train seed negative", vec![], &["train", "--seed", "-1"], 2, &["--seed", "-1"]),
        case("train seed text", vec![], &["train", "--seed", "abc"], 2, &["--seed", "abc"]),
        case("train unknown flag", vec![], &["train", "--colour"], 2, &["--colour"]),
        case("unknown subcommand", vec![], &["trane"], 2, &["trane"]),
        case("data inspect missing file", vec![], &["data", "inspect", "{dir}/none.toml"], 2, &["{dir}/none.toml"]),
        case("data inspect bad csv", vec![text("c.toml", CSV_EXP), text("data.csv", "a,b,y\n1,2\n")], &["data", "inspect", "{dir}/c.toml"], 1, &["data.csv:2"]),
        case("federate config missing", vec![], &["federate", "--local", "--config", "{dir}/none.toml"], 2, &["{dir}/none.toml"]),
        // ---- account / calibrate flags ----
        account("noise multiplier negative", &["--noise-multiplier", "-1"], 2, &["--noise-multiplier", "-1"]),
        account("noise multiplier zero", &["--noise-multiplier", "0"], 2, &["--noise-multiplier"]),
        account("noise multiplier nan", &["--noise-multiplier", "NaN"], 2, &["--noise-multiplier"]),
        account("noise multiplier text", &["--noise-multiplier", "lots"], 2, &["--noise-multiplier", "lots"]),
        account("delta zero", &["--delta", "0"], 2, &["--delta"]),
        account("delta above one", &["--delta", "1.5"], 2, &["--delta"]),
        account("delta negative", &["--delta", "-1e-5"], 2, &["--delta"]),
        case("delta missing", vec![], &["account", "--noise-multiplier", "2"], 2, &["--delta"]),
        account("rate above one", &["--sampling", "poisson", "--rate", "1.5"], 2, &["--rate", "1.5"]),
        account("rate negative", &["--sampling", "poisson", "--rate", "-0.1"], 2, &["--rate", "-0.1"]),
        account("poisson without rate", &["--sampling", "poisson"], 2, &["--rate"]),
        account("rate without sampling", &["--rate", "0.1"], 2, &["--rate"]),
        account("steps zero", &["--steps", "0"], 2, &["--steps"]),
        account("steps negative", &["--steps", "-3"], 2, &["--steps", "-3"]),
        account("fixed-size without dataset size", &["--sampling", "with-replacement", "--rate", "0.1"], 2, &["--dataset-size"]),
        account("dataset size zero", &["--sampling", "without-replacement", "--rate", "0.1", "--dataset-size", "0"], 2, &["--dataset-size"]),
        account("batch not whole", &["--sampling", "without-replacement", "--rate", "0.013", "--dataset-size", "100"], 2, &["--rate"]),
        account("unknown mechanism", &["--mechanism", "cauchy"], 2, &["--mechanism", "cauchy"]),
        account("unknown accountant", &["--accountant", "magic"], 2, &["--accountant", "magic"]),
        calibrate("calibrate epsilon zero", &["--epsilon", "0", "--delta", "1e-5"], 2, &["--epsilon"]),
        calibrate("calibrate epsilon negative", &["--epsilon", "-1", "--delta", "1e-5"], 2, &["--epsilon"]),
        calibrate("calibrate epsilon infinite", &["--epsilon", "inf", "--delta", "1e-5"], 2, &["--epsilon"]),
        calibrate("calibrate delta one", &["--epsilon", "1", "--delta", "1"], 2, &["--delta"]),
        calibrate("calibrate epsilon missing", &["--delta", "1e-5"], 2, &["--epsilon"]),
        // ---- reproduction specs and flags ----
        case("reproduce unknown id", vec![], &["reproduce", "lowy-nope", "--quiet", "--out", "{dir}/o"], 2, &["lowy-nope", "lowy-mnist"]),
        case("reproduce trials zero", vec![], &["reproduce", "lowy-obesity", "--trials", "0", "--quiet", "--out", "{dir}/o"], 2, &["--trials"]),
        case("reproduce trials negative", vec![], &["reproduce", "lowy-obesity", "--trials", "-2", "--quiet"], 2, &["--trials", "-2"]),
        case("reproduce spec missing", vec![], &["reproduce", "tiny", "--spec", "{dir}/none.toml", "--quiet"], 2, &["{dir}/none.toml"]),
        repro("reproduce spec id mismatch", "id = \"tiny\"", "id = \"other\"", 2, &["r.toml", "\"other\"", "\"tiny\""]),
        repro("reproduce spec syntax", "trials = 2", "trials = [", 2, &["r.toml:7"]),
        repro("reproduce spec unknown field", "seed = 7", "seed = 7\nsead = 8", 2, &["r.toml", "sead"]),
        repro("reproduce spec no epsilons", "epsilons = [1.0, 4.0]", "epsilons = []", 2, &["epsilons"]),
        repro("reproduce spec epsilon negative", "epsilons = [1.0, 4.0]", "epsilons = [-1.0]", 2, &["r.toml", "epsilons[0]"]),
        repro("reproduce spec repetitions zero", "repetitions = 2", "repetitions = 0", 2, &["repetitions"]),
        repro("reproduce spec no panels", "[[panels]]\nfigure = \"1\"\nparticipation = { kind = \"all\" }\n", "panels = []\n", 2, &["panels"]),
        repro("reproduce spec grid empty", "points = 4 }\n[[algorithms]]", "points = 0 }\n[[algorithms]]", 2, &["algorithms[0].steps"]),
        repro("reproduce spec quick panel out of range", "[base]", "[quick]\npanels = [3]\n[base]", 2, &["quick.panels"]),
        repro("reproduce spec clips negative", "rounds = 5", "rounds = 5\nclips = [-1.0]", 2, &["base.clips"]),
        case("reproduce out is a file", vec![text("r.toml", TINY_REPRO), text("f", "")], &["reproduce", "tiny", "--quiet", "--spec", "{dir}/r.toml", "--out", "{dir}/f"], 2, &["{dir}/f"]),
        case("reproduce checkpoint without resume", vec![text("r.toml", TINY_REPRO), text("out/checkpoint.jsonl", "{}\n")], &["reproduce", "tiny", "--quiet", "--spec", "{dir}/r.toml", "--out", "{dir}/out"], 2, &["checkpoint.jsonl", "--resume"]),
        case("reproduce checkpoint of another spec", vec![text("r.toml", TINY_REPRO), text("out/checkpoint.jsonl", "{\"format\":\"dpfl-reproduction-checkpoint-2\",\"id\":\"tiny\",\"spec_sha256\":\"00\",\"options\":{\"--quick\":false}}\n")], &["reproduce", "tiny", "--quiet", "--resume", "--spec", "{dir}/r.toml", "--out", "{dir}/out"], 2, &["checkpoint.jsonl", "different specification"]),
        case("reproduce checkpoint of an older dpfl", vec![text("r.toml", TINY_REPRO), text("out/checkpoint.jsonl", "{\"format\":\"dpfl-reproduce-checkpoint-1\",\"spec_sha256\":\"00\",\"jobs\":3}\n")], &["reproduce", "tiny", "--quiet", "--resume", "--spec", "{dir}/r.toml", "--out", "{dir}/out"], 2, &["{dir}/out/checkpoint.jsonl", "written by an older dpfl", "rerun without --resume"]),
        case("reproduce checkpoint header damaged", vec![text("r.toml", TINY_REPRO), text("out/checkpoint.jsonl", "not json\n")], &["reproduce", "tiny", "--quiet", "--resume", "--spec", "{dir}/r.toml", "--out", "{dir}/out"], 1, &["checkpoint.jsonl:1"]),
        // ---- sizes from input, checked before allocating (issue 31) ----
        case("audit canaries 1e6", vec![text("c.toml", &SYNTH)], &["audit", "{dir}/c.toml", "--canaries", "1000000"], 2, &["--canaries", "1000000", "dense values"]),
        case("audit canaries 1e12 digits", vec![text("c.toml", &SYNTH)], &["audit", "{dir}/c.toml", "--canaries", "1000000000000"], 2, &["--canaries", "16777216"]),
        case("audit canaries 1e12", vec![text("c.toml", &SYNTH)], &["audit", "{dir}/c.toml", "--canaries", "1e12"], 2, &["--canaries", "1e12"]),
        repro("reproduce spec grid of 1e9 points", "points = 4 }\n[[algorithms]]", "points = 1000000000 }\n[[algorithms]]", 2, &["r.toml", "algorithms[0].steps.points", "10000"]),
        repro("reproduce spec 1e12 repetitions", "repetitions = 2", "repetitions = 1000000000000", 2, &["r.toml", "runs", "10000000"]),
        case("reproduce trials past the run limit", vec![text("r.toml", TINY_REPRO)], &["reproduce", "tiny", "--quiet", "--trials", "1000000000000", "--spec", "{dir}/r.toml", "--out", "{dir}/out"], 2, &["--trials"]),
        // ---- silently accepted (issue 31) ----
        case("pagd phases zero", vec![text("c.toml", PAGD_PHASES_0)], &["config", "check", "{dir}/c.toml"], 2, &["c.toml", "algorithms[0]", "phases"]),
        // ---- bare command ----
        case("bare dpfl", vec![], &[], 2, &["Usage"]),
    ];
    c.sort_by_key(|c| c.name);
    c
}

struct Outcome {
    code: Option<i32>,
    stderr: String,
    elapsed: Duration,
}

fn run(dir: &Path, args: &[String], env: &[(&str, &str)]) -> Outcome {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .env_remove("DPFL_DATA")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dpfl");
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Outcome {
        code,
        stderr: reader.join().unwrap_or_default(),
        elapsed: start.elapsed(),
    }
}

fn check(c: &Case, root: &Path) -> Result<(), String> {
    let dir = root.join(c.name.replace(' ', "_"));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, content) in &c.files {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    let d = dir.to_str().unwrap();
    let args: Vec<String> = c.args.iter().map(|a| a.replace("{dir}", d)).collect();
    let out = run(&dir, &args, &c.env);
    let err = &out.stderr;
    let why = |s: String| {
        Err(format!(
            "[{}] {s}\n  args: {args:?}\n  stderr: {err}",
            c.name
        ))
    };
    if out.code.is_none() {
        return why(format!("hung (killed after {:?})", out.elapsed));
    }
    if err.contains("panicked") || out.code == Some(101) {
        return why("panicked".into());
    }
    if out.code != Some(c.code) {
        return why(format!("exit code {:?}, expected {}", out.code, c.code));
    }
    if c.name != "bare dpfl" {
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        if lines.len() != 1 || !lines[0].starts_with("error: ") {
            return why("expected exactly one `error:` line".into());
        }
    }
    for f in &c.culprit {
        let f = f.replace("{dir}", d);
        if !err.contains(&f) {
            return why(format!("does not name {f:?}"));
        }
    }
    Ok(())
}

#[test]
fn catalogue_of_malformed_inputs() {
    let cases = cases();
    assert!(
        cases.len() >= 80,
        "the catalogue keeps at least 70 cases, has {}",
        cases.len()
    );
    let mut names: Vec<&str> = cases.iter().map(|c| c.name).collect();
    names.dedup();
    assert_eq!(names.len(), cases.len(), "case names are unique");
    let root = tempfile::tempdir().unwrap();
    // Two workers: the cases are independent processes.
    let (a, b): (Vec<&Case>, Vec<&Case>) =
        cases
            .iter()
            .enumerate()
            .fold((Vec::new(), Vec::new()), |(mut a, mut b), (i, c)| {
                if i % 2 == 0 {
                    a.push(c)
                } else {
                    b.push(c)
                }
                (a, b)
            });
    let failures: Vec<String> = std::thread::scope(|s| {
        let ha = s.spawn(|| {
            a.iter()
                .filter_map(|c| check(c, root.path()).err())
                .collect::<Vec<_>>()
        });
        let hb = s.spawn(|| {
            b.iter()
                .filter_map(|c| check(c, root.path()).err())
                .collect::<Vec<_>>()
        });
        let mut f = ha.join().unwrap();
        f.extend(hb.join().unwrap());
        f
    });
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
