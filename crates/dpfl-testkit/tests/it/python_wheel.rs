//! The published wheel is built without what only the test suite's build has (issue 30 item 3):
//! scripts/test.sh builds the extension with `shared-test-build` (dpfl's `test-hooks`, which can
//! under-noise on purpose for the auditor's tests, and dpfl-lab's PNG and report code) so that
//! it links the cargo step's libraries; `pip install ./python` must get none of that.

use std::path::Path;

fn read(rel: &str) -> toml::Table {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    let text = std::fs::read_to_string(&path).expect("readable");
    text.parse().expect("valid TOML")
}

#[test]
fn the_wheel_has_no_test_hooks_and_no_png() {
    let cargo = read("python/Cargo.toml");
    let deps = cargo["dependencies"].as_table().expect("[dependencies]");
    let lab = deps["dpfl-lab"].as_table().expect("dpfl-lab as a table");
    assert_eq!(
        lab.get("default-features").and_then(|v| v.as_bool()),
        Some(false)
    );
    assert!(lab.get("features").is_none(), "{lab:?}");
    let dpfl = deps["dpfl"].as_table().expect("dpfl as a table");
    assert!(dpfl.get("features").is_none(), "{dpfl:?}");
    let features = cargo["features"].as_table().expect("[features]");
    assert!(
        features.get("default").is_none(),
        "a default feature: {features:?}"
    );
    let shared = features["shared-test-build"].as_array().expect("a list");
    assert!(shared.iter().any(|f| f.as_str() == Some("dpfl/test-hooks")));

    let pyproject = read("python/pyproject.toml");
    let maturin = pyproject["tool"]["maturin"]
        .as_table()
        .expect("[tool.maturin]");
    let wheel_features: Vec<&str> = maturin["features"]
        .as_array()
        .expect("features")
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert_eq!(wheel_features, ["pyo3/extension-module"]);
    assert_eq!(maturin["profile"].as_str(), Some("wheel"));
}
