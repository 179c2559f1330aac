//! The longer suite's list (`scripts/long-tests.txt`, issue 30 item 3) names tests that exist:
//! `bash scripts/test.sh` skips each line's tests and `--long` runs them, so a line naming no
//! test would leave a renamed test in neither suite's intended place, silently. Each line is a
//! libtest filter `module::test_name` (or `module::`) on a crate's `tests/it` binary.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The problems of the list `text` against the test sources under `root` (empty: fine).
fn problems(text: &str, root: &Path) -> Vec<String> {
    let crates = root.join("crates");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(&crates) else {
        return vec![format!("{} cannot be read", crates.display())];
    };
    let dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path().join("tests/it")))
        .collect();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((module, test)) = line.split_once("::") else {
            out.push(format!("line {}: {line:?} is not `module::test`", i + 1));
            continue;
        };
        let sources: Vec<String> = dirs
            .iter()
            .filter_map(|d| std::fs::read_to_string(d.join(format!("{module}.rs"))).ok())
            .collect();
        if sources.is_empty() {
            out.push(format!(
                "line {}: no tests/it/{module}.rs in any crate",
                i + 1
            ));
        } else if !test.is_empty() && !sources.iter().any(|s| s.contains(&format!("fn {test}()"))) {
            out.push(format!(
                "line {}: no test {test} in tests/it/{module}.rs",
                i + 1
            ));
        }
    }
    out
}

#[test]
fn every_entry_names_a_test() {
    let file = root().join("scripts/long-tests.txt");
    let text = std::fs::read_to_string(&file).expect("scripts/long-tests.txt");
    assert!(
        text.lines().filter(|l| l.contains("::")).count() >= 10,
        "the list is nearly empty"
    );
    let p = problems(&text, &root());
    assert!(p.is_empty(), "{}", p.join("\n"));
}

#[test]
fn a_line_naming_no_test_is_caught() {
    let text = "# comment\nnet_dropouts::\nnet::no_such_test\nno_such_module::\nnot a filter\n";
    let p = problems(text, &root());
    assert_eq!(p.len(), 3, "{p:?}");
    assert!(p[0].starts_with("line 3: no test no_such_test"), "{p:?}");
    assert!(
        p[1].starts_with("line 4: no tests/it/no_such_module.rs"),
        "{p:?}"
    );
    assert!(p[2].starts_with("line 5:"), "{p:?}");
}
