//! The experiment file's reference (`dpfl config reference`, `docs/config-reference.md`;
//! issue 16 item 3), generated from the code so that it cannot drift.
//!
//! The schema is derived (`schemars`) from the very types serde reads an experiment into, so
//! field names, `kind` variants, types and defaults are the parser's own (its `rename_all`,
//! `tag`, `flatten`, `default` and `deny_unknown_fields`); each field's meaning, unit and the
//! paper or algorithm behind it come from the field's doc comment. A field or variant without
//! one is listed by [`undocumented`], and the test of `dpfl-cli` fails on it as it fails on a
//! stale `docs/config-reference.md`.
//!
//! Decision: tables appear once, at the first path that reaches them (depth first, in the
//! schema's alphabetical field order); later uses link there.

#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// The command that regenerates `docs/config-reference.md`.
pub const REGENERATE: &str =
    "cargo run -p dpfl-cli -- config reference --out docs/config-reference.md";

/// The JSON Schema (draft 2020-12) of the experiment file.
pub fn json_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(super::ExperimentSpec)).unwrap_or_default()
}

/// The reference as Markdown.
pub fn markdown() -> String {
    Renderer::new(&json_schema()).run().0
}

/// Every field or variant path whose doc comment is missing (empty when all are documented).
pub fn undocumented() -> Vec<String> {
    Renderer::new(&json_schema()).run().1
}

/// One table (or `kind`-tagged family of tables) still to be written.
struct Pending {
    path: String,
    anchor: String,
    schema: Value,
}

struct Renderer {
    root: Value,
    defs: Map<String, Value>,
    /// Definition name → the anchor of the section that documents it.
    placed: BTreeMap<String, String>,
    queue: Vec<Pending>,
    out: String,
    missing: Vec<String>,
}

impl Renderer {
    fn new(schema: &Value) -> Self {
        let defs = schema
            .get("$defs")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Renderer {
            root: schema.clone(),
            defs,
            placed: BTreeMap::new(),
            queue: Vec::new(),
            out: String::new(),
            missing: Vec::new(),
        }
    }

    fn run(mut self) -> (String, Vec<String>) {
        self.out.push_str(HEADER);
        self.queue.push(Pending {
            path: String::new(),
            anchor: "top-level".into(),
            schema: self.root.clone(),
        });
        // Breadth first from the top; each section queues the tables it links to.
        let mut i = 0;
        while i < self.queue.len() {
            let p = Pending {
                path: self.queue[i].path.clone(),
                anchor: self.queue[i].anchor.clone(),
                schema: self.queue[i].schema.clone(),
            };
            self.section(&p);
            i += 1;
        }
        (self.out, self.missing)
    }

    fn resolve<'a>(&'a self, s: &'a Value) -> (&'a Value, Option<String>) {
        match s.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r.rsplit('/').next().unwrap_or(r).to_string();
                match self.defs.get(&name) {
                    Some(d) => (d, Some(name)),
                    None => (s, None),
                }
            }
            None => (s, None),
        }
    }

    /// `s` without an `Option`'s null branch.
    fn non_null(s: &Value) -> Value {
        if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
            let rest: Vec<&Value> = any
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            if rest.len() == 1 {
                let mut v = rest[0].clone();
                if let (Some(m), Some(d)) = (v.as_object_mut(), s.get("description")) {
                    m.entry("description").or_insert_with(|| d.clone());
                }
                return v;
            }
        }
        s.clone()
    }

    /// The string values of an enum of plain names, with each one's doc.
    fn names(s: &Value) -> Option<Vec<(String, String)>> {
        if let Some(e) = s.get("enum").and_then(Value::as_array) {
            return e
                .iter()
                .map(|v| v.as_str().map(|n| (n.to_string(), String::new())))
                .collect();
        }
        s.get("oneOf")?
            .as_array()?
            .iter()
            .map(|v| {
                let c = v.get("const")?.as_str()?.to_string();
                Some((c, desc(v)))
            })
            .collect()
    }

    fn is_table(s: &Value) -> bool {
        s.get("properties").is_some() || s.get("oneOf").is_some_and(|o| Self::names(o).is_none())
    }

    /// The type column of a field; queues the tables the field leads to.
    fn type_of(&mut self, s: &Value, path: &str) -> String {
        let s = Self::non_null(s);
        let (d, name) = self.resolve(&s);
        let d = d.clone();
        if let Some(names) = Self::names(&d) {
            let list = names
                .iter()
                .map(|(n, _)| format!("`\"{n}\"`"))
                .collect::<Vec<_>>()
                .join(" \\| ");
            if names.iter().any(|(_, doc)| !doc.is_empty()) {
                let anchor = self.place(name.as_deref(), path, &d);
                return format!("{list} ([values](#{anchor}))");
            }
            return list;
        }
        if Self::is_table(&d) {
            let anchor = self.place(name.as_deref(), path, &d);
            let tagged = if d.get("oneOf").is_some() {
                " chosen by `kind`"
            } else {
                ""
            };
            return format!("[table{tagged}](#{anchor})");
        }
        if let Some(any) = d.get("anyOf").and_then(Value::as_array) {
            let parts: Vec<String> = any.iter().map(|b| self.type_of(b, path)).collect();
            return parts.join(" or ");
        }
        let ty = match d.get("type") {
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .find(|t| *t != "null")
                .unwrap_or("value")
                .to_string(),
            Some(Value::String(t)) => t.clone(),
            _ => "value".into(),
        };
        match ty.as_str() {
            "integer" if d.get("minimum").and_then(Value::as_f64) == Some(0.0) => {
                "integer ≥ 0".into()
            }
            "array" => {
                let items = d.get("items").cloned().unwrap_or(Value::Null);
                format!("array of {}", self.type_of(&items, &format!("{path}[]")))
            }
            _ => ty,
        }
    }

    /// The anchor of the section documenting `schema` (a definition or an inline table),
    /// queueing the section the first time.
    fn place(&mut self, def: Option<&str>, path: &str, schema: &Value) -> String {
        if let Some(a) = def.and_then(|d| self.placed.get(d)) {
            return a.clone();
        }
        let anchor = anchor_of(path);
        if let Some(d) = def {
            self.placed.insert(d.to_string(), anchor.clone());
        }
        self.queue.push(Pending {
            path: path.to_string(),
            anchor: anchor.clone(),
            schema: schema.clone(),
        });
        anchor
    }

    fn section(&mut self, p: &Pending) {
        let title = if p.path.is_empty() {
            "Top level".to_string()
        } else {
            format!("`{}`", p.path)
        };
        let _ = write!(self.out, "\n<a id=\"{}\"></a>\n## {title}\n\n", p.anchor);
        let about = desc(&p.schema);
        if !about.is_empty() {
            let _ = write!(self.out, "{about}\n\n");
        }
        if let Some(names) = Self::names(&p.schema) {
            for (n, doc) in names {
                if doc.is_empty() {
                    self.missing.push(format!("{} = \"{n}\"", p.path));
                }
                let _ = writeln!(self.out, "- `\"{n}\"`: {doc}");
            }
            return;
        }
        if p.schema.get("properties").is_some() {
            self.fields(&p.schema, &p.path, "");
        }
        if let Some(variants) = p.schema.get("oneOf").and_then(Value::as_array).cloned() {
            let _ = write!(self.out, "\nChosen by `kind`:\n");
            let mut seen: BTreeMap<String, String> = BTreeMap::new();
            for v in &variants {
                // Internally tagged (`kind`), or externally: a bare name, or a table whose one
                // key names the variant.
                let (kind, written, v) =
                    if let Some(k) = v.pointer("/properties/kind/const").and_then(Value::as_str) {
                        (k.to_string(), format!("kind = \"{k}\""), v.clone())
                    } else if let Some(k) = v.get("const").and_then(Value::as_str) {
                        (k.to_string(), format!("\"{k}\""), v.clone())
                    } else if let Some((k, inner)) = v
                        .get("properties")
                        .and_then(Value::as_object)
                        .filter(|m| m.len() == 1)
                        .and_then(|m| m.iter().next())
                    {
                        let (d, _) = self.resolve(inner);
                        let mut d = d.clone();
                        if let (Some(m), Some(doc)) = (d.as_object_mut(), v.get("description")) {
                            m.insert("description".into(), doc.clone());
                        }
                        (k.clone(), format!("{k} = {{ ... }}"), d)
                    } else {
                        ("?".into(), "?".into(), v.clone())
                    };
                let doc = desc(&v);
                if doc.is_empty() {
                    self.missing.push(format!("{} {written}", p.path));
                }
                let _ = write!(self.out, "\n### `{written}`\n\n{doc}\n\n");
                if v.get("properties").is_none() {
                    continue;
                }
                let props = v
                    .get("properties")
                    .map(Value::to_string)
                    .unwrap_or_default();
                if let Some(first) = seen.get(&props) {
                    let _ = writeln!(self.out, "Fields as for `kind = \"{first}\"`.");
                    continue;
                }
                seen.insert(props, kind.clone());
                let path = if p.path.is_empty() {
                    format!("[kind = \"{kind}\"]")
                } else {
                    format!("{}[kind = \"{kind}\"]", p.path)
                };
                self.fields(&v, &path, "kind");
            }
        }
    }

    /// The field table of one object schema (all but the field `skip`).
    fn fields(&mut self, s: &Value, path: &str, skip: &str) {
        let required: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let Some(props) = s.get("properties").and_then(Value::as_object) else {
            return;
        };
        let rows: Vec<(&String, &Value)> = props.iter().filter(|(k, _)| *k != skip).collect();
        if rows.is_empty() {
            let _ = writeln!(self.out, "No other fields.");
            return;
        }
        let _ = write!(
            self.out,
            "| Field | Type | Default | Meaning |\n| --- | --- | --- | --- |\n"
        );
        for (name, f) in rows {
            let full = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            let ty = self.type_of(f, &full);
            let default = match f.get("default") {
                Some(Value::Null) => "unset".to_string(),
                Some(v) => format!("`{}`", toml_inline(v)),
                None if required.contains(&name.as_str()) => "**required**".to_string(),
                None => "unset".to_string(),
            };
            let mut doc = desc(f);
            if doc.is_empty() {
                // A field may inherit its meaning from its table's own doc.
                let inner = Self::non_null(f);
                let (d, _) = self.resolve(&inner);
                if Self::is_table(d) || Self::names(d).is_some() {
                    doc = desc(d);
                }
            }
            if doc.is_empty() && desc(s).contains(&format!("`{name}`")) {
                // One-line variants document their fields in the variant's own doc.
                doc = "As described above.".into();
            }
            if doc.is_empty() {
                self.missing.push(full.clone());
            }
            let _ = writeln!(self.out, "| `{name}` | {ty} | {default} | {doc} |");
        }
    }
}

const HEADER: &str = "# Experiment file reference\n\n\
Generated from the code by `dpfl config reference` (do not edit by hand; the test\n\
`config_reference_is_current` fails when this file is stale). Regenerate with\n\n\
```sh\n\
cargo run -p dpfl-cli -- config reference --out docs/config-reference.md\n\
```\n\n\
An experiment file is TOML. Tables are written `[data]`, `[model]`, `[privacy]`; algorithms\n\
are an array of tables, `[[algorithms]]`. A field whose type is a table chosen by `kind` is\n\
written inline (`source = { kind = \"obesity\" }`) or as a sub-table with a `kind` key.\n\
\"unset\" means the field is optional and has no value unless given; its meaning says what\n\
happens then. `dpfl config check FILE` validates a file without running it; `dpfl config\n\
reference --json` prints the JSON Schema this page is rendered from.\n";

/// A section anchor: the path lower-cased, runs of other characters as one `-`.
fn anchor_of(path: &str) -> String {
    let mut a = String::new();
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            a.push(c.to_ascii_lowercase());
        } else if !a.ends_with('-') {
            a.push('-');
        }
    }
    a.trim_matches('-').to_string()
}

/// A schema's description on one line, with rustdoc links as plain code.
fn desc(s: &Value) -> String {
    let d = s.get("description").and_then(Value::as_str).unwrap_or("");
    let one = d.split_whitespace().collect::<Vec<_>>().join(" ");
    one.replace("[`", "`")
        .replace("`]", "`")
        .replace('|', "\\|")
}

/// A JSON default written as TOML.
fn toml_inline(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(toml_inline).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{ {} }}",
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| format!("{k} = {}", toml_inline(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_types_and_defaults_come_from_the_parser_types() {
        let md = markdown();
        // Defaults as serde fills them, types and variants as the parser names them.
        assert!(md.contains("| `trials` | integer ≥ 0 | `1` |"), "{md}");
        assert!(md.contains("| `test_fraction` | number | `0.2` |"), "{md}");
        assert!(
            md.contains("| `rounds` | integer ≥ 0 | **required** |"),
            "{md}"
        );
        assert!(
            md.contains("`\"gaussian\"` \\| `\"discrete-gaussian\"`"),
            "privacy.mechanism's variants: {md}"
        );
        for kind in [
            "mb-sgd",
            "local-sgd",
            "sdp-mb-sgd",
            "norm-fed-avg",
            "soteria-fl",
            "csv-silos",
        ] {
            assert!(md.contains(&format!("### `kind = \"{kind}\"`")), "{kind}");
        }
        // A table reached twice is written once.
        assert_eq!(md.matches("\n## `algorithms[]`").count(), 1);
    }

    #[test]
    fn anchors_and_inline_defaults() {
        assert_eq!(
            anchor_of("algorithms[].calibration"),
            "algorithms-calibration"
        );
        assert_eq!(
            toml_inline(&serde_json::json!({"kind": "all"})),
            "{ kind = \"all\" }"
        );
    }
}
