//! Every committed result has provenance (issue 32 item 5): each `docs/results/<id>/` folder
//! holds a `provenance.json` naming the command, the configuration, the seed, the commit, the
//! build profile, the machine and the wall time — as the run recorded them
//! (`dpfl_lab::provenance`), or, for folders older than that file, reconstructed with the unknown
//! fields marked "unknown" or null. A folder without one fails here.

use std::path::{Path, PathBuf};

const FIELDS: [&str; 7] = [
    "command",
    "config",
    "seed",
    "git_revision",
    "build_profile",
    "machine",
    "wall_seconds",
];

fn results() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results")
}

/// The problems of one folder's provenance.json (empty: fine).
fn problems(dir: &Path) -> Vec<String> {
    let file = dir.join("provenance.json");
    let Ok(text) = std::fs::read_to_string(&file) else {
        return vec![format!("{} is missing", file.display())];
    };
    let trimmed = text.trim();
    let mut out = Vec::new();
    if !(trimmed.starts_with('{') && trimmed.ends_with('}')) {
        out.push(format!("{} is not a JSON object", file.display()));
    }
    for f in FIELDS {
        // A top-level key is indented by two spaces in the pretty-printed files.
        if !text.contains(&format!("\n  \"{f}\":")) {
            out.push(format!("{} lacks \"{f}\"", file.display()));
        }
    }
    out
}

#[test]
fn every_results_folder_has_provenance() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(results())
        .expect("docs/results exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 11, "{dirs:?}");
    let bad: Vec<String> = dirs.iter().flat_map(|d| problems(d)).collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn a_folder_without_provenance_is_caught() {
    let tmp = std::env::temp_dir().join(format!("dpfl-prov-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    assert_eq!(problems(&tmp).len(), 1);
    std::fs::write(
        tmp.join("provenance.json"),
        "{\n  \"command\": \"x\",\n  \"seed\": null\n}\n",
    )
    .unwrap();
    let p = problems(&tmp);
    assert_eq!(p.len(), 5, "{p:?}");
    std::fs::remove_dir_all(&tmp).unwrap();
}
