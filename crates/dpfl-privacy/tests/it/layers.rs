//! The module layering of dpfl-privacy, checked on the source: `accountant/` (the
//! accountants and the curves they share) never imports `calibration` (which searches over
//! accountants), so the two cannot form an import circle again. (The 600-line limit of every
//! product file, this crate's included, is `dpfl-testkit/tests/it/architecture.rs`'s.)

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The file's text before its `#[cfg(test)]` module (tests may use anything).
fn non_test(p: &Path) -> String {
    let text = std::fs::read_to_string(p).unwrap();
    match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn accountants_do_not_import_calibration() {
    let mut files = Vec::new();
    rust_files(&src().join("accountant"), &mut files);
    assert!(files.len() >= 10, "{files:?}");
    for f in files {
        if f.ends_with("tests.rs") {
            continue;
        }
        let code = non_test(&f);
        for (i, line) in code.lines().enumerate() {
            let l = line.trim_start();
            if l.starts_with("//") {
                continue;
            }
            assert!(
                !(l.contains("calibration::") || l.contains("crate::calibration")),
                "{}:{}: accountant code imports calibration: {line}",
                f.display(),
                i + 1
            );
        }
    }
}
