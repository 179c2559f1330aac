//! `dpfl data shard` (issue 16 item 3): a silo's shard from its own file is the shard
//! `dpfl federate --prepare-only` writes for the same records (byte for byte), reads back
//! through the silo's loader with its checksum, has the features of the federation's other
//! silos when the experiment splits a pooled file by column, and is refused when a category
//! order would be the silo's own.

use crate::common;

use common::{dpfl_in, ok};

/// Rows of `hospital`'s patients (and, with `all`, the other hospitals' too).
fn patients(hospitals: &[&str]) -> String {
    let mut s = String::from("age,sex,hospital,outcome\n");
    for (h, name) in hospitals.iter().enumerate() {
        for i in 0..40 {
            let age = 20 + (i * 7 + h * 3) % 50;
            let sex = ["f", "m"][i % 2];
            let outcome = if age > 45 { "sick" } else { "well" };
            s += &format!("{age},{sex},{name},{outcome}\n");
        }
    }
    s
}

fn experiment(source: &str, partition: &str) -> String {
    format!(
        r#"name = "shard test"
rounds = 3
seed = 9
participation = {{ kind = "all" }}
[data]
source = {source}
{partition}
[model]
kind = "logistic"
[privacy]
epsilon = 1.0
delta = 1e-4
lipschitz = 1.0
[[algorithms]]
label = "ISRL-DP MB-SGD"
kind = "mb-sgd"
calibration = "experiment"
step_size = 0.3
batch_size = 12
"#
    )
}

const SPEC: &str = r#"spec = { target = { kind = "class", column = "outcome", order = ["sick", "well"] }, categorical = [{ column = "sex", encoding = "one-hot", order = ["f", "m"] }], standardize = ["age"], scaling = { age = { mean = 44.0, scale = 14.5 } }, drop = ["hospital"], intercept = true }"#;

fn shard_header(bytes: &[u8]) -> serde_json::Value {
    let line = bytes.split(|b| *b == b'\n').nth(1).unwrap();
    serde_json::from_slice(line).unwrap()
}

#[test]
fn own_file_shard_equals_the_prepared_shard_and_loads() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("north.csv"), patients(&["north"])).unwrap();
    let src = format!("{{ kind = \"csv-silos\", paths = [\"north.csv\"], {SPEC} }}");
    std::fs::write(d.join("one.toml"), experiment(&src, "")).unwrap();
    ok(&dpfl_in(
        d,
        &[
            "federate",
            "--config",
            "one.toml",
            "--local",
            "--prepare-only",
            "--out",
            "prep",
        ],
    ));
    let stdout = ok(&dpfl_in(
        d,
        &[
            "data",
            "shard",
            "--config",
            "one.toml",
            "--data",
            "north.csv",
            "--out",
            "north.shard",
        ],
    ));
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    // 40 rows, a test fraction of 0.2: 32 training rows and 8 test rows.
    assert_eq!(
        (report["train_rows"].as_u64(), report["test_rows"].as_u64()),
        (Some(32), Some(8))
    );
    assert_eq!(
        report["features"],
        serde_json::json!(["age", "sex=f", "sex=m", "intercept"])
    );
    let mine = std::fs::read(d.join("north.shard")).unwrap();
    let prepared = std::fs::read(d.join("prep/trial-0/data/silo-0.shard")).unwrap();
    assert!(mine == prepared, "the shards differ");
    assert_eq!(report["sha256"].as_str().unwrap().len(), 64);

    // The silo's loader reads it (checksum verified) ...
    let data = dpfl_net::shard::read(&d.join("north.shard")).unwrap();
    assert_eq!((data.train.len(), data.test.len()), (32, 8));
    // ... and refuses it with one bit flipped.
    let mut bad = mine.clone();
    let at = bad.len() - 40;
    bad[at] ^= 1;
    std::fs::write(d.join("bad.shard"), &bad).unwrap();
    let err = dpfl_net::shard::read(&d.join("bad.shard"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("bad.shard"), "{err}");

    // --out is not overwritten without --force.
    let out = dpfl_in(
        d,
        &[
            "data",
            "shard",
            "--config",
            "one.toml",
            "--data",
            "north.csv",
            "--out",
            "north.shard",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn by_column_experiment_shard_matches_the_other_silos_features() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let all = patients(&["east", "north", "south"]);
    // North's own file: its rows of the pooled file.
    let north: String = all
        .lines()
        .enumerate()
        .filter(|(i, l)| *i == 0 || l.contains(",north,"))
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    std::fs::write(d.join("all.csv"), &all).unwrap();
    std::fs::write(d.join("north.csv"), north).unwrap();
    let src = format!("{{ kind = \"csv\", path = \"all.csv\", {SPEC} }}");
    let part = "partition = { kind = \"by-column\", column = \"hospital\" }";
    std::fs::write(d.join("pooled.toml"), experiment(&src, part)).unwrap();
    ok(&dpfl_in(
        d,
        &[
            "federate",
            "--config",
            "pooled.toml",
            "--local",
            "--prepare-only",
            "--out",
            "prep",
        ],
    ));
    ok(&dpfl_in(
        d,
        &[
            "data",
            "shard",
            "--config",
            "pooled.toml",
            "--data",
            "north.csv",
            "--out",
            "n.shard",
        ],
    ));
    let mine_bytes = std::fs::read(d.join("n.shard")).unwrap();
    let mine = shard_header(&mine_bytes);
    // Silo 1 of the pooled split is "north" (silos in sorted order of the column).
    let theirs_bytes = std::fs::read(d.join("prep/trial-0/data/silo-1.shard")).unwrap();
    let theirs = shard_header(&theirs_bytes);
    assert_eq!(mine["feature_names"], theirs["feature_names"]);
    assert_eq!(mine["classes"], theirs["classes"]);
    // Its split is drawn from its name's stream and its scaling is public: the same shard.
    assert!(
        mine_bytes == theirs_bytes,
        "north's shard differs from silo 1's"
    );

    // Without the public scaling, each silo would standardise on its own rows: refused.
    let unscaled = format!(
        "{{ kind = \"csv\", path = \"all.csv\", {} }}",
        SPEC.replace("scaling = { age = { mean = 44.0, scale = 14.5 } }, ", "")
    );
    std::fs::write(d.join("unscaled.toml"), experiment(&unscaled, part)).unwrap();
    let out = dpfl_in(
        d,
        &[
            "data",
            "shard",
            "--config",
            "unscaled.toml",
            "--data",
            "north.csv",
            "--out",
            "u.shard",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() == Some(2) && err.contains("scaling") && err.contains("age"),
        "{err}"
    );

    // Without the category orders, each silo would fit its own: refused, naming the columns.
    let loose = "{ kind = \"csv\", path = \"all.csv\", spec = { target = { kind = \"class\", column = \"outcome\" }, categorical = [{ column = \"sex\" }] } }";
    std::fs::write(d.join("loose.toml"), experiment(loose, part)).unwrap();
    let out = dpfl_in(
        d,
        &[
            "data",
            "shard",
            "--config",
            "loose.toml",
            "--data",
            "north.csv",
            "--out",
            "l.shard",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("sex, outcome") && err.contains("loose.toml"),
        "{err}"
    );
}
