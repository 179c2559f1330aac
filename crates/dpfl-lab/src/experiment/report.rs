//! `report.html` (issue 16 item 5, issue 31 item 9): one self-contained page per run — `dpfl
//! train --out`, `dpfl federate` and `dpfl server` write it next to `summary.json` — that a
//! person can read without the other files and forward to a privacy officer: each private
//! algorithm's guarantee in plain words as standard output prints it
//! ([`super::guarantee`]: what is protected, against whom, under which neighbouring relation,
//! and whether an accountant certifies it — an uncertified one is marked as such), the
//! results (with `!` on a model worse than the trivial predictor), one privacy row per silo
//! with that silo's own name, σ, z, δ, accounted ε and lower bound, the training curves (the
//! `curves.svg` drawing inlined, so the page needs no other file) or the server's rounds, the
//! timings and the configuration.
//!
//! Every value comes from the same [`RunOutput`] `summary.json` is written from; the page adds
//! no number of its own. Numbers show 4 significant digits ([`sig4`]); a note's raw JSON
//! event and long floats are shortened ([`tidy_note`]). The page is a minijinja template
//! (`report.html` beside this file) with HTML autoescaping: text from the experiment (names,
//! labels, notes) cannot inject markup; only the curves' SVG, drawn by dpfl, is inserted as
//! is.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::guarantee::{guarantee, sig4};
use super::summary::noise_multiplier;
use super::{ExperimentSpec, RunOutput};

/// The report's file name.
pub const REPORT_FILE: &str = "report.html";

const TEMPLATE: &str = include_str!("report.html");

/// The experiment as TOML (JSON if some value has no TOML form).
fn config_text(spec: &ExperimentSpec) -> String {
    toml::to_string_pretty(spec)
        .or_else(|_| serde_json::to_string_pretty(spec))
        .unwrap_or_else(|e| format!("(the configuration could not be printed: {e})"))
}

/// The page. `svg` is the curves drawing (`curves.svg`), inlined.
pub fn render(spec: &ExperimentSpec, out: &RunOutput, svg: &str) -> dpfl::Result<String> {
    let intro = format!(
        "{} round(s), {} trial(s), seed {}; written by dpfl {}.",
        spec.rounds,
        spec.trials,
        spec.seed
            .map_or("none (drawn from the system)".into(), |s| s.to_string()),
        env!("CARGO_PKG_VERSION"),
    );
    let svg = svg.trim_start_matches(|c: char| c != '<');
    page(
        &spec.name,
        &intro,
        out,
        Middle::Curves(svg),
        &config_text(spec),
    )
}

/// What stands between the privacy tables and the timings.
pub(crate) enum Middle<'a> {
    /// The curves' SVG drawing.
    Curves(&'a str),
    /// The server's rounds and traffic (from the summary's server facts).
    Server,
}

/// `note` for people: a JSON object or list in it (an accountant's event) is replaced by a
/// pointer to `summary.json`, and a number with more than 4 significant digits is shortened
/// to 4 ([`sig4`]).
pub fn tidy_note(note: &str) -> String {
    let chars: Vec<char> = note.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if (c == '{' || c == '[') && matches!(chars.get(i + 1), Some('"') | Some('{')) {
            // Skip to the matching bracket.
            let mut depth = 0i32;
            let mut j = i;
            while j < chars.len() {
                match chars[j] {
                    '{' | '[' => depth += 1,
                    '}' | ']' => depth -= 1,
                    _ => {}
                }
                j += 1;
                if depth == 0 {
                    break;
                }
            }
            out.push_str("(the event: see summary.json)");
            i = j;
            continue;
        }
        let starts_number = c.is_ascii_digit()
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_'));
        if starts_number {
            let mut j = i;
            while j < chars.len()
                && (chars[j].is_ascii_digit()
                    || (chars[j] == '.' && chars.get(j + 1).is_some_and(char::is_ascii_digit))
                    || ((chars[j] == 'e' || chars[j] == 'E')
                        && chars
                            .get(j + 1)
                            .is_some_and(|d| d.is_ascii_digit() || *d == '-')))
            {
                j += if chars[j] == 'e' || chars[j] == 'E' {
                    2
                } else {
                    1
                };
            }
            let token: String = chars[i..j.min(chars.len())].iter().collect();
            let digits = token
                .split(['e', 'E'])
                .next()
                .unwrap_or("")
                .trim_start_matches(['0', '.'])
                .chars()
                .filter(char::is_ascii_digit)
                .count();
            match token.parse::<f64>() {
                Ok(v) if token.contains('.') && digits > 6 => out.push_str(&sig4(Some(v))),
                _ => out.push_str(&token),
            }
            i = j.min(chars.len());
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// The smallest and largest of `v` as one number or a range.
fn range(v: impl Iterator<Item = f64>) -> String {
    let (lo, hi) = v.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    if lo > hi {
        "—".into()
    } else if lo == hi {
        sig4(Some(lo))
    } else {
        format!("{} – {}", sig4(Some(lo)), sig4(Some(hi)))
    }
}

/// The template's context for `out` (see the module docs).
fn context(name: &str, intro: &str, out: &RunOutput, middle: Middle, config: &str) -> Value {
    let metric = out
        .summary
        .first()
        .map_or("test metric", |s| s.metric.label());
    let worse = |s: &super::AlgorithmSummary| {
        out.trivial_test_metric
            .is_some_and(|t| s.test_metric.is_finite() && s.test_metric > t)
    };
    let guarantees: Vec<Value> = out
        .summary
        .iter()
        .filter_map(guarantee)
        .map(|g| {
            let (class, status) = match (g.certified, g.end_to_end) {
                (true, true) => ("certified", "certified by the accountants"),
                (true, false) => (
                    "qualified",
                    "certified by the accountants, with a caveat (below) that limits it",
                ),
                (false, _) => ("uncertified", "NOT certified: read the sentence below"),
            };
            json!({
                "algorithm": g.algorithm, "text": g.text, "protected": g.protected,
                "against": g.against, "relation": g.relation, "class": class, "status": status,
            })
        })
        .collect();
    let results: Vec<Value> = out
        .summary
        .iter()
        .map(|s| {
            json!({
                "algorithm": s.algorithm,
                "private": if s.private { "yes" } else { "no" },
                "epsilon": sig4(s.epsilon),
                "certified": sig4(s.max_certified_epsilon()),
                "lower": sig4(s.max_lower_epsilon()),
                "delta": if s.private {
                    range(s.privacy.iter().map(|p| p.target_delta))
                } else {
                    "—".into()
                },
                "k": s.batch_size,
                "rounds": s.rounds,
                "loss": sig4(Some(s.final_train_loss)),
                "metric": sig4(Some(s.test_metric)),
                "worse": worse(s),
            })
        })
        .collect();
    let flagged: Vec<&str> = out
        .summary
        .iter()
        .filter(|s| worse(s))
        .map(|s| s.algorithm.as_str())
        .collect();
    let trivial = format!(
        "{}: {metric} {}",
        match out.summary.first().map(|s| s.metric) {
            Some(super::TestMetric::TestError) => "the training majority class",
            _ => "the training mean",
        },
        sig4(out.trivial_test_metric)
    );
    // A caveat several algorithms share prints once, naming them all (as on stdout).
    let mut caveats: Vec<(&str, Vec<&str>)> = Vec::new();
    for s in out.summary.iter().filter(|s| s.private) {
        for c in &s.caveats {
            match caveats.iter_mut().find(|(t, _)| *t == c.as_str()) {
                Some((_, who)) => who.push(&s.algorithm),
                None => caveats.push((c, vec![&s.algorithm])),
            }
        }
    }
    let silos: Vec<Value> = out
        .summary
        .iter()
        .flat_map(|s| {
            s.privacy.iter().map(move |p| {
                let cal = s.silos.get(p.silo);
                let certified = match (p.rdp_epsilon, p.pld_epsilon) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                let notes: Vec<String> = p.notes.iter().map(|n| tidy_note(n)).collect();
                json!({
                    "algorithm": s.algorithm,
                    "silo": p.silo,
                    "name": p.name.clone().unwrap_or_else(|| "—".into()),
                    "sigma": sig4(cal.map(|c| c.sigma)),
                    "z": sig4(cal.and_then(|c| c.run_event.as_ref()).and_then(noise_multiplier)),
                    "target": sig4(p.target_epsilon),
                    "delta": sig4(Some(p.target_delta)),
                    "rdp": sig4(p.rdp_epsilon),
                    "pld": sig4(p.pld_epsilon),
                    "certified": sig4(certified),
                    "lower": sig4(p.lower_epsilon),
                    "notes": notes.join("; "),
                })
            })
        })
        .collect();
    let server = out.summary.first().and_then(|s| s.server.as_ref());
    let server = match middle {
        Middle::Server => server.map(|f| {
            json!({
                "rounds_run": f.rounds_run, "messages": f.messages, "rejected": f.rejected,
                "uplink_bits": f.uplink_bits, "sent_bytes": f.sent_bytes,
                "rounds": f.rounds.iter().map(|r| json!({
                    "round": r.round, "selected": r.selected, "participants": r.participants,
                    "rejected": r.rejected, "seconds": sig4(Some(r.seconds)),
                })).collect::<Vec<_>>(),
            })
        }),
        Middle::Curves(_) => None,
    };
    let svg = match middle {
        Middle::Curves(svg) => Some(svg),
        Middle::Server => None,
    };
    json!({
        "name": name,
        "intro": intro,
        "metric": metric,
        "guarantees": guarantees,
        "non_private": out.summary.iter().filter(|s| !s.private).map(|s| &s.algorithm).collect::<Vec<_>>(),
        "results": results,
        "flagged": flagged.join(", "),
        "trivial": trivial,
        "caveats": caveats.iter().map(|(t, who)| json!({"text": t, "who": who.join(", ")})).collect::<Vec<_>>(),
        "silos": silos,
        "svg": svg,
        "server": server,
        "timings": out.summary.iter().map(|s| json!({
            "algorithm": s.algorithm, "trials": s.trials, "seconds": format!("{:.3}", s.wall_seconds),
        })).collect::<Vec<_>>(),
        "total_seconds": format!("{:.3}", out.summary.iter().map(|s| s.wall_seconds * s.trials as f64).sum::<f64>()),
        "config": config,
    })
}

/// A page of `out` under the heading `name`: `intro` (text), the guarantee, results and
/// privacy tables, `middle`, the timings and `config` (text).
pub(crate) fn page(
    name: &str,
    intro: &str,
    out: &RunOutput,
    middle: Middle,
    config: &str,
) -> dpfl::Result<String> {
    let env = minijinja::Environment::new();
    env.render_named_str(
        REPORT_FILE,
        TEMPLATE,
        context(name, intro, out, middle, config),
    )
    .map_err(|e| dpfl::Error::data(REPORT_FILE, format!("the report template: {e}")))
}

/// Writes `curves.svg`, `curves.png` and `report.html` into `dir` (which must exist);
/// returns the three paths.
pub fn write_report(
    spec: &ExperimentSpec,
    out: &RunOutput,
    dir: &Path,
) -> dpfl::Result<Vec<PathBuf>> {
    let title = super::curves::title(spec, out);
    let mut files = super::curves::plot_curves(out, &title, dir)?;
    let svg_path = &files[0];
    let svg = std::fs::read_to_string(svg_path).map_err(|source| dpfl::Error::Io {
        path: svg_path.clone(),
        source,
    })?;
    let path = dir.join(REPORT_FILE);
    crate::output::atomic_write(&path, render(spec, out, &svg)?.as_bytes())?;
    files.push(path);
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_lose_raw_json_and_long_floats() {
        assert_eq!(
            tidy_note(r#"cannot account {"sampled":{"q":0.1}} at 0.12345678901234567"#),
            "cannot account (the event: see summary.json) at 0.1235"
        );
        // Short numbers, indices and words with digits stay.
        assert_eq!(
            tidy_note("silo 3 at delta 1e-5, eps 2.5 (x2)"),
            "silo 3 at delta 1e-5, eps 2.5 (x2)"
        );
        assert_eq!(range([1e-4, 1e-4].into_iter()), "1.000e-4");
        assert_eq!(range([0.5, 2.0].into_iter()), "0.5000 – 2.000");
    }

    /// A private run no accountant certifies is marked NOT certified (never with the
    /// certified look); each silo's row has its own name, σ and δ; the model quality the
    /// server cannot know shows as "not available", never NaN; text is escaped.
    #[test]
    fn uncertified_runs_are_marked_and_rows_are_each_silos_own() {
        use super::super::summary::{AlgorithmSummary, SiloPrivacy, TestMetric};
        let silo = |i: usize, sigma: f64, delta: f64| {
            (
                dpfl::algo::SiloCalibration {
                    silo: dpfl::units::SiloId::new(i as u32),
                    sigma,
                    batch_size: 8,
                    formula: "f".into(),
                    run_event: None,
                },
                SiloPrivacy {
                    silo: i,
                    name: Some(["north <1>", "south"][i].into()),
                    target_epsilon: Some(1.0),
                    target_delta: delta,
                    rdp_epsilon: None,
                    pld_epsilon: None,
                    lower_epsilon: None,
                    notes: vec![r#"cannot account {"x":1} 0.30000000000000004"#.into()],
                },
            )
        };
        let (c0, p0) = silo(0, 0.25, 1e-4);
        let (c1, p1) = silo(1, 0.5, 4e-5);
        let s = AlgorithmSummary {
            algorithm: "A <b>".into(),
            private: true,
            epsilon: Some(1.0),
            delta: Some(4e-5),
            sigma: 0.5,
            noise_multiplier: None,
            certified_epsilon: None,
            server: None,
            batch_size: 8,
            rounds: 3,
            participants: 2.0,
            final_train_loss: f64::NAN,
            test_metric: f64::NAN,
            metric: TestMetric::TestError,
            trials: 1,
            wall_seconds: 0.1,
            silos: vec![c0, c1],
            privacy: vec![p0, p1],
            end_to_end_private: true,
            caveats: vec![],
            nonfinite_gradients: None,
        };
        let out = RunOutput {
            rounds: vec![],
            summary: vec![s],
            models: vec![],
            trivial_test_metric: None,
        };
        let html = page("t", "i", &out, Middle::Server, "c").unwrap();
        assert!(html.contains("class=\"guarantee uncertified\""), "{html}");
        assert!(html.contains("NOT certified") && !html.contains("certified by the accountants"));
        assert!(html.contains("no accountant could certify it"));
        assert!(!html.contains("NaN") && html.contains("<td>not available</td>"));
        assert!(html.contains("A &lt;b&gt;") && !html.contains("A <b>"));
        let rows: Vec<&str> = html.split("<tr class=\"silo\">").skip(1).collect();
        assert_eq!(rows.len(), 2);
        assert!(rows[0].contains("north &lt;1&gt;") && rows[0].contains("<td>0.2500</td>"));
        assert!(rows[0].contains("<td>1.000e-4</td>"));
        assert!(rows[1].contains("south") && rows[1].contains("<td>0.5000</td>"));
        assert!(rows[1].contains("<td>4.000e-5</td>"));
        assert!(rows[1].contains("cannot account (the event: see summary.json) 0.3000"));
    }
}
