//! The crate's module graph has no import circle, the algorithm floor imports no wing, and a
//! wing imports no other wing (issue 10, "a floor and wings").
//!
//! Edges come from the source text: every `use crate::…` / `use super::…` / `use self::…` tree
//! (braces expanded) and every inline `crate::…` / `super::…` path, with comments and the
//! trailing `#[cfg(test)]` module left out (tests may reach anywhere). A path resolves to the
//! longest prefix that is a module file (`a/b.rs` or `a/b/mod.rs`), so importing a re-export
//! from a parent module is an edge to that parent. `use child::…` in a file that declares
//! `mod child` is an edge to the child; `pub use child::…` is not (a re-export is a facade: no
//! code of the parent depends on it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn collect(dir: &Path, root: &Path, out: &mut BTreeMap<Module, PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect(&p, root, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p.strip_prefix(root).expect("under root").with_extension("");
            let mut parts: Module = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
                parts.pop();
            }
            out.insert(parts, p);
        }
    }
}

/// The code of a file without comments and without its `#[cfg(test)]` tail.
fn code(src: &str) -> String {
    let mut out = String::new();
    for line in src.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let line = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Expands a use tree (`a::{b, c::{d, e}}`) into full paths.
fn expand(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else {
        return vec![tree.to_string()];
    };
    let close = tree.rfind('}').expect("balanced braces in a use tree");
    let (prefix, body) = (&tree[..open], &tree[open + 1..close]);
    let mut items = Vec::new();
    let (mut depth, mut cur) = (0, String::new());
    for c in body.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            items.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    items.push(cur);
    items
        .iter()
        .filter(|i| !i.trim().is_empty())
        .flat_map(|i| expand(i.trim()))
        .map(|i| format!("{prefix}{i}"))
        .collect()
}

/// The modules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn children(code: &str) -> Vec<String> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub(crate) ")
                .or(l.strip_prefix("pub "))
                .unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?.trim();
            Some(name.to_string())
        })
        .collect()
}

fn paths(code: &str) -> Vec<String> {
    let children = children(code);
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].chars().last();
        let after = &rest[i + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            rest = after;
            continue;
        }
        let end = after.find(';').unwrap_or(after.len());
        let tree: String = after[..end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let reexport = rest[..i].trim_end().ends_with(')') || rest[..i].trim_end().ends_with("pub");
        for p in expand(&tree) {
            let first = p.split("::").next().unwrap_or("");
            if children.iter().any(|c| c == first) {
                // `use child::X` is a dependency on the child; `pub use child::X` is a facade.
                if !reexport {
                    out.push(format!("self::{p}"));
                }
            } else {
                out.push(p);
            }
        }
        rest = &after[end..];
    }
    // Inline paths: crate::a::b, super::a.
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(start) {
            let i = from + i;
            from = i + start.len();
            if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
                continue;
            }
            let end = code[i..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| i + e);
            out.push(code[i..end].to_string());
        }
    }
    out
}

fn graph(root: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = BTreeMap::new();
    collect(root, root, &mut files);
    let resolve = |path: &[String]| -> Option<Module> {
        (0..=path.len())
            .rev()
            .map(|i| path[..i].to_vec())
            .find(|p| files.contains_key(p))
    };
    let mut edges = BTreeMap::new();
    for (module, file) in &files {
        let src = std::fs::read_to_string(file).expect("read source");
        let mut out = BTreeSet::new();
        for p in paths(&code(&src)) {
            let mut segs: Vec<String> = p
                .split("::")
                .filter(|s| !s.is_empty())
                .map(|s| s.split(" as ").next().unwrap_or(s).to_string())
                .collect();
            let mut base: Module = match segs.first().map(String::as_str) {
                Some("crate") => {
                    segs.remove(0);
                    Vec::new()
                }
                Some("super" | "self") => module.clone(),
                _ => continue,
            };
            while let Some(s) = segs.first() {
                match s.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                segs.remove(0);
            }
            base.extend(segs);
            if let Some(target) = resolve(&base)
                && &target != module
            {
                out.insert(target);
            }
        }
        edges.insert(module.clone(), out);
    }
    edges
}

/// A cycle through `start`, if any (depth-first search).
fn cycle(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn visit(
        v: &Module,
        edges: &BTreeMap<Module, BTreeSet<Module>>,
        state: &mut BTreeMap<Module, u8>,
        stack: &mut Vec<Module>,
    ) -> Option<Vec<Module>> {
        state.insert(v.clone(), 1);
        stack.push(v.clone());
        for w in edges.get(v).into_iter().flatten() {
            match state.get(w).copied().unwrap_or(0) {
                1 => {
                    let i = stack.iter().position(|x| x == w).expect("on stack");
                    let mut c = stack[i..].to_vec();
                    c.push(w.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(w, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(v.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for v in edges.keys() {
        if state.get(v).copied().unwrap_or(0) == 0
            && let Some(c) = visit(v, edges, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

fn show(c: &[Module]) -> String {
    c.iter()
        .map(|m| m.join("/"))
        .collect::<Vec<_>>()
        .join(" -> ")
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_crate_has_no_import_circle() {
    let edges = graph(&src());
    assert!(edges.len() > 30, "found only {} modules", edges.len());
    if let Some(c) = cycle(&edges) {
        panic!("import circle: {}", show(&c));
    }
}

#[test]
fn the_floor_imports_no_wing_and_wings_import_no_other_wing() {
    let edges = graph(&src());
    let algo = |rest: &[&str]| -> Module {
        std::iter::once("algo")
            .chain(rest.iter().copied())
            .map(String::from)
            .collect()
    };
    let floor: Vec<Module> = [
        "half",
        "message",
        "context",
        "server",
        "gradient",
        "wing",
        "acsa_server",
        "checked",
    ]
    .iter()
    .map(|f| algo(&[f]))
    .collect();
    let is_wing = |m: &Module| {
        m.len() >= 2 && m[0] == "algo" && edges.contains_key(&m[..2]) && {
            let top = &m[..2];
            !floor.iter().any(|f| f.as_slice() == top) && top[1] != "spec"
        }
    };
    for f in &floor {
        let out = edges
            .get(f)
            .unwrap_or_else(|| panic!("floor file {} missing", f.join("/")));
        for t in out {
            assert!(
                !(is_wing(t) || *t == algo(&["spec"]) || *t == algo(&[])),
                "floor file {} imports {} (the floor imports only the floor)",
                f.join("/"),
                t.join("/")
            );
        }
    }
    for (m, out) in &edges {
        if !is_wing(m) {
            continue;
        }
        for t in out {
            let other_wing = is_wing(t) && t[1] != m[1];
            assert!(
                !(other_wing || *t == algo(&["spec"]) || *t == algo(&[])),
                "wing file {} imports {} (a wing imports only the floor and itself)",
                m.join("/"),
                t.join("/")
            );
        }
    }
    assert!(edges.contains_key(&algo(&["lowy"])), "the lowy wing exists");
}

#[test]
fn the_checker_sees_a_circle() {
    // A made-up crate with a → b → a: the checker must report it.
    let dir = std::env::temp_dir().join(format!("dpfl-import-graph-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("x")).expect("mkdir");
    std::fs::write(dir.join("lib.rs"), "pub mod x;\n").expect("write");
    std::fs::write(dir.join("x/mod.rs"), "pub mod a;\npub mod b;\n").expect("write");
    std::fs::write(
        dir.join("x/a.rs"),
        "use super::{b::B, other};\n// use crate::x::b;\npub struct A;\n",
    )
    .expect("write");
    std::fs::write(dir.join("x/b.rs"), "pub struct B(crate::x::a::A);\n").expect("write");
    let edges = graph(&dir);
    let c = cycle(&edges).expect("a circle");
    assert_eq!(show(&c), "x/a -> x/b -> x/a");
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
