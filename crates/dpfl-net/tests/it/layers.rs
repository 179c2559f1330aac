//! `dpfl-net` runs halves built from a plan and the round core; it never imports the
//! simulator (`dpfl::sim`, issue 10; checked on the source text of `src/`, comments and
//! `#[cfg(test)]` tails left out) or the lab (`dpfl-lab`: experiments, reproductions, plots;
//! checked on the manifest: the lab may be a dev-dependency only, so tests, benches and the
//! `dpfl` binary may read experiments).

use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without comments and its `#[cfg(test)]` tail, on one line per
/// statement-ish (whitespace collapsed so that `dpfl ::  sim` and multi-line `use` trees
/// are seen).
fn code(src: &str) -> String {
    let mut out = String::new();
    for line in src.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let line = line.find("//").map_or(line, |i| &line[..i]);
        out.push_str(line);
        out.push(' ');
    }
    out.split_whitespace().collect::<Vec<_>>().join("")
}

/// The layers of `dpfl` that `dpfl-net` must not reach, as paths (`dpfl::sim`) or in a use
/// tree (`dpfl::{sim, …}`).
fn forbidden(code: &str) -> Vec<&'static str> {
    let mut hits = Vec::new();
    for layer in ["sim"] {
        let direct = format!("dpfl::{layer}");
        let mut in_tree = false;
        let mut rest = code;
        while let Some(i) = rest.find("dpfl::{") {
            let tree = &rest[i + 7..];
            let end = tree.find(';').unwrap_or(tree.len());
            let tree = &tree[..end];
            if tree
                .split([',', '{', '}'])
                .any(|item| item == layer || item.starts_with(&format!("{layer}::")))
            {
                in_tree = true;
            }
            rest = &rest[i + 7..];
        }
        let direct_hit = code.match_indices(&direct).any(|(i, _)| {
            // `dpfl::simulate` is not `dpfl::sim`.
            !code[i + direct.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        });
        if direct_hit || in_tree {
            hits.push(layer);
        }
    }
    hits
}

#[test]
fn the_checker_sees_paths_and_use_trees() {
    assert_eq!(forbidden(&code("use dpfl::sim::Simulator;")), vec!["sim"]);
    assert_eq!(
        forbidden(&code("use dpfl::{algo::Round,\n sim::Simulator};")),
        vec!["sim"]
    );
    assert_eq!(
        forbidden(&code("let c = dpfl :: sim :: train_loss(m, w, s);")),
        vec!["sim"]
    );
    assert!(forbidden(&code("use dpfl::simulate; // dpfl::sim in a comment")).is_empty());
    assert!(forbidden(&code("use dpfl::plan::Plan;\nuse dpfl::round::silo_step;")).is_empty());
}

#[test]
fn dpfl_net_src_does_not_import_the_simulator() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    assert!(all.len() > 10, "found only {} files under src/", all.len());
    let mut bad = Vec::new();
    for f in all {
        let text = std::fs::read_to_string(&f).expect("read source");
        for layer in forbidden(&code(&text)) {
            bad.push(format!("{} imports dpfl::{layer}", f.display()));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// The lab (`dpfl-lab`) is not among `dpfl-net`'s `[dependencies]` (a dev-dependency is fine):
/// the runtime serves plans, whoever made them.
#[test]
fn the_lab_is_not_a_dependency_of_the_runtime() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .expect("read Cargo.toml");
    let deps = manifest
        .split("\n[")
        .find(|section| section.starts_with("dependencies]"))
        .expect("a [dependencies] section");
    assert!(
        deps.contains("dpfl.workspace"),
        "the checker reads the wrong section"
    );
    assert!(
        !deps.contains("dpfl-lab"),
        "dpfl-net depends on the lab:\n{deps}"
    );
}
