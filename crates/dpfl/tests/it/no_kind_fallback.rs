//! No `match` on an algorithm kind has a fallback arm (issue 28 item 1): a new kind must be
//! placed by every match that reads kinds, or the crate does not compile. A `_ =>` arm (or a
//! catch-all binding such as `other =>`) let a new private algorithm fall into
//! `is_private() == false` once; the wing trait (`dpfl::algo::wing::Wing`) replaced those
//! matches, and this scan keeps them from coming back anywhere in the workspace's sources.
//!
//! A match is "on a kind" when one of its top-level arm patterns names a variant of a kind
//! enum (`KINDS`); it fails when another top-level arm is a bare `_` or a lone binding,
//! guarded or not. Matches on other enums are not looked at.

use std::path::{Path, PathBuf};

/// The enums whose variants are algorithm kinds (or a wing's plan of one).
const KINDS: &[&str] = &[
    "AlgorithmSpec::",
    "WingPlan::",
    "LowyPlan::",
    "ShuffleAlgorithm::",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src dir")
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The source with comments, string and char literals blanked (same length, so offsets
/// still point at lines), so that braces and `match` inside them are not read as code.
fn blank(src: &str) -> Vec<u8> {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = src[i..].find('\n').map_or(b.len(), |e| i + e);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = src[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                blank(&mut out, i, end);
                i = end;
            }
            b'r' if (b.get(i + 1) == Some(&b'#') || b.get(i + 1) == Some(&b'"'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let start = i + 2 + hashes;
                let end = src[start..]
                    .find(&close)
                    .map_or(b.len(), |e| start + e + close.len());
                blank(&mut out, i, end);
                i = end;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let end = (j + 1).min(b.len());
                blank(&mut out, i, end);
                i = end;
            }
            b'\'' => {
                // A char literal ('x', '\n', '\u{..}'); otherwise a lifetime.
                let end = if b.get(i + 1) == Some(&b'\\') {
                    src.get(i + 3..)
                        .and_then(|rest| rest.find('\''))
                        .map(|e| i + 3 + e + 1)
                } else if b.get(i + 2) == Some(&b'\'') {
                    Some(i + 3)
                } else {
                    None
                };
                match end {
                    Some(end) => {
                        blank(&mut out, i, end);
                        i = end;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// The index of the bracket closing the one at `open`.
fn closing(code: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (k, &c) in code.iter().enumerate().skip(open) {
        match c {
            b'{' | b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

/// The top-level arm patterns of the match body `code[from..to]` (inside its braces).
fn arm_patterns(code: &[u8], from: usize, to: usize) -> Vec<String> {
    let mut pats = Vec::new();
    let mut i = from;
    while i < to {
        // The pattern: up to `=>` at depth 0.
        let start = i;
        let mut depth = 0i32;
        while i < to && !(depth == 0 && code[i] == b'=' && code.get(i + 1) == Some(&b'>')) {
            match code[i] {
                b'{' | b'(' | b'[' => depth += 1,
                b'}' | b')' | b']' => depth -= 1,
                _ => {}
            }
            i += 1;
        }
        if i >= to {
            break;
        }
        pats.push(String::from_utf8_lossy(&code[start..i]).trim().to_string());
        i += 2;
        while i < to && code[i].is_ascii_whitespace() {
            i += 1;
        }
        // The body: a block (then an optional comma) or an expression up to `,` at depth 0.
        if i < to && code[i] == b'{' {
            i = closing(code, i).map_or(to, |c| c + 1);
            let mut j = i;
            while j < to && code[j].is_ascii_whitespace() {
                j += 1;
            }
            let continues = j < to && matches!(code[j], b'.' | b'?' | b'+' | b'-' | b'*' | b'/');
            if !continues {
                if j < to && code[j] == b',' {
                    j += 1;
                }
                i = j;
                continue;
            }
        }
        let mut depth = 0i32;
        while i < to && !(depth == 0 && code[i] == b',') {
            match code[i] {
                b'{' | b'(' | b'[' => depth += 1,
                b'}' | b')' | b']' => depth -= 1,
                _ => {}
            }
            i += 1;
        }
        i += 1;
    }
    pats
}

/// Whether an arm pattern catches everything: `_` or a lone binding, guarded or not.
fn catch_all(pattern: &str) -> bool {
    let head = pattern.split(" if ").next().unwrap_or(pattern).trim();
    let head = head.strip_prefix("ref ").unwrap_or(head);
    let head = head.strip_prefix("mut ").unwrap_or(head);
    head == "_"
        || (!matches!(head, "" | "true" | "false")
            && head.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && head.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// Each `match` on a kind with a fallback arm in `src`: (line, the arm patterns).
fn fallbacks(src: &str) -> Vec<(usize, Vec<String>)> {
    let code = blank(src);
    let text = String::from_utf8_lossy(&code).into_owned();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(k) = text[from..].find("match") {
        let at = from + k;
        from = at + 5;
        let before = at.checked_sub(1).map(|p| code[p]);
        let after = code.get(at + 5).copied();
        let word = |c: Option<u8>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_');
        if word(before) || word(after) || before == Some(b'!') || after == Some(b'!') {
            continue;
        }
        // The body's brace: the first `{` outside the scrutinee's own brackets.
        let mut i = at + 5;
        let mut depth = 0i32;
        let open = loop {
            match code.get(i) {
                None => break None,
                Some(b'(' | b'[') => depth += 1,
                Some(b')' | b']') => depth -= 1,
                Some(b'{') if depth == 0 => break Some(i),
                Some(b';') if depth == 0 => break None,
                _ => {}
            }
            i += 1;
        };
        let Some(open) = open else { continue };
        let Some(close) = closing(&code, open) else {
            continue;
        };
        let pats = arm_patterns(&code, open + 1, close);
        let on_kind = pats.iter().any(|p| KINDS.iter().any(|k| p.contains(k)));
        if on_kind && pats.iter().any(|p| catch_all(p)) {
            let line = text[..at].matches('\n').count() + 1;
            found.push((line, pats));
        }
    }
    found
}

#[test]
fn no_match_on_an_algorithm_kind_has_a_fallback_arm() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for c in std::fs::read_dir(&crates).expect("read crates") {
        let src = c.expect("crate dir").path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    assert!(files.len() > 100, "found only {} source files", files.len());
    let mut bad = Vec::new();
    let mut kind_matches = 0;
    for f in &files {
        let src = std::fs::read_to_string(f).expect("read source");
        for (line, pats) in fallbacks(&src) {
            bad.push(format!("{}:{line}: {pats:?}", f.display()));
        }
        kind_matches += src.matches("AlgorithmSpec::").count();
    }
    assert!(
        kind_matches > 16,
        "the scan saw the kind enum only {kind_matches} times"
    );
    assert!(
        bad.is_empty(),
        "matches on an algorithm kind with a fallback arm (name every variant, or ask the \
         wing through `dpfl::algo::wing::Wing`):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_scan_sees_a_fallback_and_only_on_kinds() {
    let src = r#"
fn f(a: &AlgorithmSpec, b: Other) -> u8 {
    // match a { AlgorithmSpec::MbSgd(_) => 1, _ => 2 } in a comment is not code
    let s = "match a { AlgorithmSpec::Pgd(_) => 1, _ => 0 }";
    let x = match b {
        Other::A => { 1 }
        _ => 2,
    };
    let y = match (a, '{') {
        (AlgorithmSpec::MbSgd(m), _) if m.step_size > 0.0 => { 3 }
        (AlgorithmSpec::Pgd(_), _) => 4,
        _ => match a {
            AlgorithmSpec::Psgd(p) => p.k,
            other => 5,
        },
    };
    match a {
        AlgorithmSpec::MbSgd(_) | AlgorithmSpec::Pgd(_) => 6,
        AlgorithmSpec::Psgd(_) => 7,
    }
}
"#;
    let found = fallbacks(src);
    let lines: Vec<usize> = found.iter().map(|(l, _)| *l).collect();
    // The outer tuple match (`_ =>`) and the inner one (`other =>`); not `Other`'s, not the
    // comment's or the string's, not the exhaustive one.
    assert_eq!(lines, vec![9, 12], "{found:?}");
    assert!(catch_all("_ if x > 1"));
    assert!(catch_all("other"));
    assert!(!catch_all("AlgorithmSpec::Pgd(_)"));
    assert!(!catch_all("None"));
}
