//! Outputs that are never lost (issue 12 item 5): checkpointed reproductions resumed after a
//! kill give the same summary as an uninterrupted run; CSV quoting; the embedded demo data from
//! any directory; paths relative to the file naming them; progress lines off a terminal.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn dpfl_in(dir: &Path, args: &[&str]) -> Output {
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

/// A reproduction of a few hundred short runs on synthetic data (a few seconds).
const REPRO: &str = r#"
id = "resumable"
title = "resume test"
metric = "test_error"
seed = 11
trials = 3
repetitions = 3
epsilons = [1.0, 4.0]
[base]
rounds = 600
delta = 1e-5
lipschitz_from_data = 2.0
data = { source = { kind = "synthetic", task = "binary", silos = 3, train = 200, test = 40, features = 20 } }
model = { kind = "logistic" }
[[panels]]
figure = "1"
participation = { kind = "all" }
[[algorithms]]
label = "ISRL-DP MB-SGD"
spec = { kind = "mb-sgd", calibration = "experiment", step_size = 1.0 }
steps = { from = -4.0, to = 0.0, points = 8 }
[[algorithms]]
label = "MB-SGD, \"plain\""
spec = { kind = "mb-sgd", step_size = 1.0, batch_size = 10 }
steps = { from = -4.0, to = 0.0, points = 8 }
"#;

fn lines(p: &Path) -> usize {
    std::fs::read_to_string(p).map_or(0, |s| s.lines().count())
}

#[test]
fn a_killed_reproduction_resumes_to_the_uninterrupted_summary() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("r.toml");
    std::fs::write(&spec, REPRO).unwrap();
    let s = spec.to_str().unwrap();

    // Uninterrupted.
    let full = dir.path().join("full");
    ok(&dpfl_in(
        dir.path(),
        &[
            "reproduce",
            "resumable",
            "--quiet",
            "--spec",
            s,
            "--out",
            full.to_str().unwrap(),
        ],
    ));
    let want = std::fs::read_to_string(full.join("summary.csv")).unwrap();
    assert!(
        !full.join("checkpoint.jsonl").exists(),
        "the checkpoint is removed at the end"
    );
    // The label with a comma and quotes is one CSV field.
    let mut r = csv::Reader::from_reader(want.as_bytes());
    assert!(
        r.records()
            .any(|rec| rec.unwrap()[1] == *"MB-SGD, \"plain\"")
    );

    // Killed partway (SIGKILL: nothing gets to clean up), then resumed.
    let part = dir.path().join("part");
    let ckpt = part.join("checkpoint.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args([
            "reproduce",
            "resumable",
            "--quiet",
            "--spec",
            s,
            "--out",
            part.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while lines(&ckpt) < 20 && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let done = lines(&ckpt);
    assert!(
        done >= 20,
        "the checkpoint records runs as they finish ({done} lines)"
    );
    assert!(!part.join("summary.csv").exists(), "killed before the end");
    // Simulate a write cut short by the kill: a torn last line is dropped on resume.
    let mut text = std::fs::read_to_string(&ckpt).unwrap();
    text.push_str("{\"key\":\"panel 0 tri");
    std::fs::write(&ckpt, text).unwrap();

    // Without --resume the work is not thrown away.
    let out = dpfl_in(
        dir.path(),
        &[
            "reproduce",
            "resumable",
            "--quiet",
            "--spec",
            s,
            "--out",
            part.to_str().unwrap(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--resume"));

    let out = dpfl_in(
        dir.path(),
        &[
            "reproduce",
            "resumable",
            "--spec",
            s,
            "--out",
            part.to_str().unwrap(),
            "--resume",
        ],
    );
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("resuming:") && err.contains("already finished"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(part.join("summary.csv")).unwrap(),
        want
    );
    assert!(!ckpt.exists());

    // A resume with other flags (a different spec) is refused, naming the checkpoint.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(
        other.join("checkpoint.jsonl"),
        "{\"format\":\"dpfl-reproduction-checkpoint-2\",\"id\":\"resumable\",\"spec_sha256\":\"x\",\"options\":{\"--quick\":false}}\n",
    )
    .unwrap();
    let out = dpfl_in(
        dir.path(),
        &[
            "reproduce",
            "resumable",
            "--quiet",
            "--resume",
            "--trials",
            "1",
            "--spec",
            s,
            "--out",
            other.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("checkpoint.jsonl") && err.contains("\"--trials\":1"),
        "{err}"
    );
}

#[test]
fn train_runs_the_embedded_demo_from_any_directory_and_writes_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let stdout = ok(&dpfl_in(dir.path(), &["train", "--quiet", "--out", "out"]));
    assert!(stdout.contains("ISRL-DP MB-SGD"), "{stdout}");
    let mut names: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // Training also writes its curves, saved models and provenance (issue 16 items 4–5, 7).
    assert_eq!(
        names,
        [
            "curves.png",
            "curves.svg",
            "models",
            "provenance.json",
            "report.html",
            "rounds.csv",
            "summary.json"
        ],
        "no temporary files are left"
    );
    for model in std::fs::read_dir(out_dir.join("models")).unwrap() {
        let mut files: Vec<String> = std::fs::read_dir(model.unwrap().path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(
            files,
            ["model.json", "model.safetensors"],
            "no temporary files are left"
        );
    }
    // A missing large set names the embedded data among the places searched, not a path of
    // the build machine.
    std::fs::write(
        dir.path().join("m.toml"),
        "name = \"m\"\nrounds = 1\n[data]\nsource = { kind = \"w8a\" }\npartition = { kind = \"iid\", silos = 2 }\n[model]\nkind = \"logistic\"\n[[algorithms]]\nkind = \"mb-sgd\"\nstep_size = 0.1\nbatch_size = 5\n",
    )
    .unwrap();
    let out = dpfl_in(dir.path(), &["train", "--quiet", "--config", "m.toml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("embedded") && !err.contains(env!("CARGO_MANIFEST_DIR")),
        "{err}"
    );
}

#[test]
fn data_paths_are_relative_to_the_experiment_file() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("exp");
    std::fs::create_dir_all(&sub).unwrap();
    let mut csv = String::from("a,b,y\n");
    for i in 0..40 {
        csv.push_str(&format!("{},{},{}\n", i % 7, i % 5, i % 2));
    }
    std::fs::write(sub.join("data.csv"), csv).unwrap();
    std::fs::write(
        sub.join("c.toml"),
        "name = \"rel\"\nrounds = 2\nseed = 1\n[data]\nsource = { kind = \"csv\", path = \"data.csv\", spec = { target = { kind = \"class\", column = \"y\" } } }\npartition = { kind = \"iid\", silos = 2 }\n[model]\nkind = \"logistic\"\n[[algorithms]]\nkind = \"mb-sgd\"\nstep_size = 0.1\nbatch_size = 5\n",
    )
    .unwrap();
    // Run from the parent directory: data.csv is found next to the config, not in the cwd.
    ok(&dpfl_in(
        dir.path(),
        &["train", "--quiet", "--config", "exp/c.toml"],
    ));
}

#[test]
fn progress_lines_off_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let spec: PathBuf = dir.path().join("r.toml");
    std::fs::write(&spec, REPRO.replace("trials = 3", "trials = 1")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args([
            "reproduce",
            "resumable",
            "--spec",
            spec.to_str().unwrap(),
            "--out",
            dir.path().join("o").to_str().unwrap(),
        ])
        .env("DPFL_PROGRESS_SECS", "0.05")
        .output()
        .unwrap();
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("progress: ") && l.contains("runs")),
        "{err}"
    );
}

/// A writer that accepts `room` bytes and then fails like a full disk (ENOSPC).
struct FullDisk<W> {
    inner: W,
    room: usize,
}

impl<W: std::io::Write> std::io::Write for FullDisk<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.room == 0 {
            return Err(std::io::Error::from_raw_os_error(28));
        }
        let k = buf.len().min(self.room);
        self.room -= k;
        self.inner.write(&buf[..k])
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The atomic-output path on a full disk: the old summary stays whole, no temporary file is
/// left, and the error names the file.
#[test]
fn a_full_disk_leaves_the_previous_output_whole() {
    use dpfl_lab::output::{atomic_write, replace_with, write_through};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("summary.json");
    atomic_write(&p, b"[{\"old\": true}]\n").unwrap();
    let new = vec![b'x'; 100_000];
    let err = replace_with(&p, |tmp| {
        let f = std::fs::File::create(tmp).unwrap();
        write_through(
            FullDisk {
                inner: f,
                room: 8192,
            },
            &new,
        )
        .map_err(|source| dpfl::Error::Io {
            path: p.clone(),
            source,
        })
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("summary.json") && err.contains("os error 28"),
        "{err}"
    );
    assert_eq!(std::fs::read(&p).unwrap(), b"[{\"old\": true}]\n");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("summary.json")]);
    atomic_write(&p, &new).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), new);
}

#[test]
fn limits_name_the_field_and_the_limit() {
    use dpfl::data::limits::{MAX_FEATURES, check_dense, check_features, check_params};
    let e = check_features("num_features", 1_000_000_000_000)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("num_features") && e.contains(&MAX_FEATURES.to_string()),
        "{e}"
    );
    // 13 rows of 1e8 features: 1.3e9 values against the default 2^28.
    let e = check_dense("x.svm", 13, 100_000_000)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("x.svm") && e.contains("1300000000") && e.contains("268435456"),
        "{e}"
    );
    assert!(check_dense("x", usize::MAX, 2).is_err());
    check_dense("mnist", 60_000, 784).unwrap();
    assert!(
        check_params("model", None)
            .unwrap_err()
            .to_string()
            .contains("2^64")
    );
}
