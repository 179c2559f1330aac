//! `docs/config-reference.md` is the output of `dpfl config reference`: this test fails when
//! the checked-in file is stale and says how to regenerate it (issue 16 item 3).

use std::process::Command;

fn dpfl(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args(args)
        .output()
        .expect("run dpfl")
}

#[test]
fn config_reference_is_current() {
    let o = dpfl(&["config", "reference"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let fresh = String::from_utf8(o.stdout).expect("UTF-8");
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/config-reference.md"
    );
    let checked_in = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        fresh == checked_in,
        "docs/config-reference.md is stale; regenerate it with\n    {}",
        dpfl_lab::experiment::reference::REGENERATE
    );
}

#[test]
fn every_field_and_variant_is_documented() {
    let missing = dpfl_lab::experiment::reference::undocumented();
    assert!(
        missing.is_empty(),
        "fields or variants of the experiment file without a doc comment (the reference's \
         meaning column): {missing:#?}"
    );
}

#[test]
fn json_schema_names_every_section() {
    let o = dpfl(&["--json", "config", "reference"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("a JSON schema");
    assert_eq!(v["title"], "ExperimentSpec");
    let props = v["properties"].as_object().expect("properties");
    for field in ["name", "rounds", "data", "model", "privacy", "algorithms"] {
        assert!(props.contains_key(field), "{field}");
    }
    assert_eq!(v["properties"]["trials"]["default"], 1);
    // A unit enum is a flat `enum`, or a `oneOf` of `const`s once its variants carry docs.
    let noise = &v["$defs"]["NoiseKind"];
    let variants: Vec<&serde_json::Value> = match noise["enum"].as_array() {
        Some(values) => values.iter().collect(),
        None => noise["oneOf"]
            .as_array()
            .expect("NoiseKind is an enum or a oneOf")
            .iter()
            .map(|o| &o["const"])
            .collect(),
    };
    assert_eq!(variants, ["gaussian", "discrete-gaussian"]);
}
