//! Behaviour snapshot (issue 10): the outputs of `dpfl train` (the bundled demo and the fast
//! `experiments/*.toml`, seeded), the `--quick` reproductions that need no downloaded data,
//! `dpfl account` / `dpfl calibrate` on a small grid and a seeded `dpfl federate`, compared
//! bit for bit with the files in `tests/golden/`. Wall-clock times and temporary paths are the
//! only things normalised away; binary outputs (plots, models) are compared by hash.
//!
//! A deliberate change of behaviour regenerates the files: `DPFL_BLESS=1 cargo test -p dpfl-cli
//! --test it golden::`, then review the diff.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// Runs `dpfl ARGS` (which must succeed) and returns its stdout.
fn dpfl(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run dpfl");
    assert!(
        out.status.success(),
        "dpfl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 stdout")
}

/// Compares `got` with the golden file `name`, or rewrites it under `DPFL_BLESS=1`.
fn check(name: &str, got: &str) {
    let p = golden_path(name);
    if std::env::var_os("DPFL_BLESS").is_some() {
        std::fs::write(&p, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e} (DPFL_BLESS=1 writes it)", p.display()));
    if want != got {
        let line = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(got.lines().count()));
        panic!(
            "{name} differs from the golden file at line {}:\n want: {:?}\n  got: {:?}",
            line + 1,
            want.lines().nth(line),
            got.lines().nth(line)
        );
    }
}

/// FNV-1a: a stable 64-bit fingerprint of binary outputs (std's hasher is not stable).
fn fnv(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x} ({} bytes)", bytes.len())
}

/// Drops every `wall_seconds` field (the only non-deterministic number in summary.json) and
/// masks the build's git revision and machine (provenance.json), which change with every commit
/// and machine.
fn strip_wall(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.remove("wall_seconds");
            if let Some(r) = m.get_mut("git_revision") {
                *r = serde_json::Value::String("<REVISION>".into());
            }
            // provenance.json's machine (CPU model, cores, memory) differs between machines.
            if let Some(r) = m.get_mut("machine") {
                *r = serde_json::Value::String("<MACHINE>".into());
            }
            m.values_mut().for_each(strip_wall);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_wall),
        _ => {}
    }
}

/// `report.html` without the contents of its timings table.
fn strip_timings(html: &str) -> String {
    let start = html
        .find("<table id=\"timings\">")
        .expect("a timings table");
    let end = start + html[start..].find("</table>").expect("its end");
    format!("{}{}", &html[..start], &html[end..])
}

/// stdout with the output directory replaced by `<OUT>` and timing lines' seconds removed.
fn normalise_stdout(stdout: &str, out: &Path) -> String {
    let s = stdout.replace(out.to_str().unwrap(), "<OUT>");
    s.lines()
        .map(|l| match l.find(" in ") {
            Some(i) if l.ends_with(" s") => format!("{} in <TIME> s", &l[..i]),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// stdout, then every file of `out` (sorted by name): text files verbatim (summary.json without
/// wall times), binary files by fingerprint.
fn snapshot(stdout: &str, out: &Path) -> String {
    let mut s = format!("== stdout\n{}\n", normalise_stdout(stdout, out));
    let mut files: Vec<PathBuf> = walk(out);
    files.sort();
    for f in files {
        let rel = f
            .strip_prefix(out)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let bytes = std::fs::read(&f).unwrap();
        let ext = f.extension().and_then(|e| e.to_str()).unwrap_or("");
        let body = match ext {
            "json" => {
                let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                strip_wall(&mut v);
                serde_json::to_string_pretty(&v).unwrap()
            }
            "csv" => String::from_utf8(bytes).unwrap(),
            // The report's timings table holds wall times: fingerprinted without it.
            "html" => fnv(strip_timings(&String::from_utf8(bytes).unwrap()).as_bytes()),
            _ => fnv(&bytes),
        };
        s.push_str(&format!("== {rel}\n{body}\n"));
    }
    s
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v
}

fn train(golden: &str, config: Option<&str>) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let mut args = vec![
        "train",
        "--quiet",
        "--seed",
        "7",
        "--out",
        out.to_str().unwrap(),
    ];
    if let Some(c) = config {
        args.extend_from_slice(&["--config", c]);
    }
    let stdout = dpfl(&args);
    check(golden, &snapshot(&stdout, &out));
}

#[test]
fn train_default() {
    train("train-default.txt", None);
}

#[test]
fn train_obesity() {
    train("train-obesity.txt", Some("experiments/obesity.toml"));
}

#[test]
fn train_insurance() {
    train("train-insurance.txt", Some("experiments/insurance.toml"));
}

fn reproduce_quick(id: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let stdout = dpfl(&[
        "reproduce",
        id,
        "--quick",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    check(
        &format!("reproduce-{id}-quick.txt"),
        &snapshot(&stdout, &out),
    );
}

#[test]
fn reproduce_lowy_insurance_quick() {
    reproduce_quick("lowy-insurance");
}

#[test]
fn reproduce_lowy_obesity_quick() {
    reproduce_quick("lowy-obesity");
}

/// `dpfl account` and `dpfl calibrate` over mechanisms × sampling × accountants.
#[test]
fn account_grid() {
    let mut s = String::new();
    let sampled: [(&str, &[&str]); 4] = [
        ("none", &[]),
        ("poisson", &["--rate", "0.01"]),
        (
            "with-replacement",
            &["--rate", "0.01", "--dataset-size", "1000"],
        ),
        (
            "without-replacement",
            &["--rate", "0.01", "--dataset-size", "1000"],
        ),
    ];
    for accountant in ["rdp", "pld", "zcdp", "basic", "advanced", "optimal"] {
        for mechanism in ["gaussian", "laplace"] {
            for (sampling, extra) in sampled {
                for steps in ["1", "100"] {
                    let mut args = vec![
                        "account",
                        "--noise-multiplier",
                        "1.5",
                        "--delta",
                        "1e-5",
                        "--mechanism",
                        mechanism,
                        "--sampling",
                        sampling,
                        "--steps",
                        steps,
                        "--accountant",
                        accountant,
                    ];
                    args.extend_from_slice(extra);
                    s.push_str(&format!("{}\n{}\n", args.join(" "), run_any(&args)));
                }
            }
        }
    }
    for accountant in ["rdp", "pld"] {
        for (sampling, extra) in sampled {
            let mut args = vec![
                "calibrate",
                "--epsilon",
                "1",
                "--delta",
                "1e-5",
                "--sampling",
                sampling,
                "--steps",
                "50",
                "--accountant",
                accountant,
            ];
            args.extend_from_slice(extra);
            s.push_str(&format!("{}\n{}\n", args.join(" "), run_any(&args)));
        }
    }
    check("account-grid.txt", &s);
}

/// stdout on success, else `exit CODE: STDERR` (unsupported combinations are part of the
/// snapshot too).
fn run_any(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args(args)
        .output()
        .expect("run dpfl");
    if out.status.success() {
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
    } else {
        format!(
            "exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim_end()
        )
    }
}

const FEDERATION: &str = r#"
name = "golden federation"
rounds = 6
seed = 11
participation = { kind = "fixed", m = 2 }
[data]
source = { kind = "synthetic", task = "binary", silos = 3, train = 60, test = 20, features = 4, shift = 0.3 }
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
"#;

/// A seeded `dpfl federate`: rounds.csv, summary.json and the final model's bits.
#[test]
fn federate_seeded() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp.toml");
    std::fs::write(&exp, FEDERATION).unwrap();
    let out = tmp.path().join("run");
    let stdout = dpfl(&[
        "federate",
        "--config",
        exp.to_str().unwrap(),
        "--local",
        "--seeded",
        "--seed",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    let mut s = format!("== stdout\n{}\n", normalise_stdout(&stdout, &out));
    for f in ["rounds.csv", "summary.json"] {
        let text = std::fs::read_to_string(out.join(f)).unwrap();
        let body = if f.ends_with(".json") {
            let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
            strip_wall(&mut v);
            serde_json::to_string_pretty(&v).unwrap()
        } else {
            text
        };
        s.push_str(&format!("== {f}\n{body}\n"));
    }
    let model = std::fs::read(out.join("trial-0/alg-0/server/model.bin")).unwrap();
    s.push_str(&format!(
        "== trial-0/alg-0/server/model.bin\n{}\n",
        fnv(&model)
    ));
    check("federate-seeded.txt", &s);
}
