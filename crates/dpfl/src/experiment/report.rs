//! `report.html` (issue 16 item 5): one self-contained page per run — `dpfl train --out` and
//! `dpfl federate` write it next to `summary.json` — that a person can read without the other
//! files: the run's results, the privacy table (per silo: the target, the RDP and PLD upper
//! bounds and the lower bound), the training curves (the `curves.svg` drawing inlined, so the
//! page needs no other file), the timings and the configuration.
//!
//! Every value comes from the same [`RunOutput`] `summary.json` is written from; the page adds
//! no number of its own. Text from the experiment (names, labels, notes) is HTML-escaped.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{ExperimentSpec, RunOutput};

/// The report's file name.
pub const REPORT_FILE: &str = "report.html";

pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

pub(crate) fn num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() && v != 0.0 && (v.abs() < 1e-3 || v.abs() >= 1e5) => {
            format!("{v:.3e}")
        }
        Some(v) if v.is_finite() => format!("{v:.4}"),
        Some(v) => v.to_string(),
        None => "—".into(),
    }
}

/// The experiment as TOML (JSON if some value has no TOML form).
fn config_text(spec: &ExperimentSpec) -> String {
    toml::to_string_pretty(spec)
        .or_else(|_| serde_json::to_string_pretty(spec))
        .unwrap_or_else(|e| format!("(the configuration could not be printed: {e})"))
}

/// The page. `svg` is the curves drawing (`curves.svg`), inlined.
pub fn render(spec: &ExperimentSpec, out: &RunOutput, svg: &str) -> String {
    let intro = format!(
        "{} round(s), {} trial(s), seed {}; written by dpfl {}.",
        spec.rounds,
        spec.trials,
        spec.seed
            .map_or("none (drawn from the system)".into(), |s| s.to_string()),
        env!("CARGO_PKG_VERSION"),
    );
    let curves = format!(
        "<h2>Training curves</h2>\n<figure id=\"curves\">\n{}\n<figcaption>Training loss and \
         test metric against rounds, mean over trials (also curves.svg, curves.png).\
         </figcaption></figure>\n",
        svg.trim_start_matches(|c: char| c != '<')
    );
    page(&spec.name, &intro, out, &curves, &config_text(spec))
}

/// A page of `out` under the heading `name`: `intro` (HTML), the results and privacy tables,
/// `middle` (HTML: the curves, or the server's rounds), the timings and `config` (text).
pub(crate) fn page(name: &str, intro: &str, out: &RunOutput, middle: &str, config: &str) -> String {
    let mut h = String::new();
    let title = esc(name);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>dpfl report: {title}</title>\n<style>\
         body{{font-family:sans-serif;max-width:1150px;margin:2em auto;color:#222}}\
         table{{border-collapse:collapse;margin:0.5em 0 1.5em}}\
         th,td{{border:1px solid #bbb;padding:3px 8px;text-align:right}}\
         th{{background:#eee}}td.l,th.l{{text-align:left}}\
         pre{{background:#f6f6f6;padding:1em;overflow:auto}}\
         .note{{color:#555;font-size:0.9em}}</style></head>\n<body>\n\
         <h1>{title}</h1>\n<p>{intro}</p>\n",
    );
    results(&mut h, out);
    privacy(&mut h, out);
    h.push_str(middle);
    timings(&mut h, out);
    let _ = write!(
        h,
        "<h2>Configuration</h2>\n<pre id=\"config\">{}</pre>\n</body></html>\n",
        esc(config)
    );
    h
}

fn results(h: &mut String, out: &RunOutput) {
    let metric = out
        .summary
        .first()
        .map_or("test metric", |s| s.metric.label());
    let _ = write!(
        h,
        "<h2>Results</h2>\n<table id=\"results\"><tr><th class=\"l\">algorithm</th>\
         <th>private</th><th>target ε</th><th>δ</th><th>σ</th><th>z = σ/Δ</th><th>K</th>\
         <th>R</th><th>final train loss</th><th>{}</th></tr>\n",
        esc(metric)
    );
    for s in &out.summary {
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&s.algorithm),
            if s.private { "yes" } else { "no" },
            num(s.epsilon),
            num(s.delta),
            num(Some(s.sigma)),
            num(s.noise_multiplier),
            s.batch_size,
            s.rounds,
            num(Some(s.final_train_loss)),
            num(Some(s.test_metric)),
        );
    }
    h.push_str("</table>\n");
    for s in out
        .summary
        .iter()
        .filter(|s| s.private && s.epsilon.is_none())
    {
        let _ = writeln!(
            h,
            "<p class=\"note\">{}: the noise multiplier z = {} was set directly \
             (privacy.noise_multiplier); the accountants certify ε = {} at δ = {} for it \
             (per silo below).</p>",
            esc(&s.algorithm),
            num(s.noise_multiplier),
            num(s.certified_epsilon),
            num(s.delta),
        );
    }
    let caveats: Vec<&String> = out.summary.iter().flat_map(|s| &s.caveats).collect();
    let mut seen = Vec::new();
    for c in caveats {
        if !seen.contains(&c) {
            let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(c));
            seen.push(c);
        }
    }
}

fn privacy(h: &mut String, out: &RunOutput) {
    h.push_str(
        "<h2>Privacy per silo</h2>\n<p class=\"note\">Upper bounds: ε at the silo's δ by the \
         RDP and PLD accountants for the noise actually used (the certified ε is the smaller); \
         lower bound: ε of a concrete neighbouring pair. The true ε lies between.</p>\n\
         <table id=\"privacy\"><tr><th class=\"l\">algorithm</th><th>silo</th>\
         <th>target ε</th><th>target δ</th><th>ε upper (RDP)</th><th>ε upper (PLD)</th>\
         <th>ε lower</th><th class=\"l\">notes</th></tr>\n",
    );
    let mut any = false;
    for s in &out.summary {
        for p in &s.privacy {
            any = true;
            let _ = writeln!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
                esc(&s.algorithm),
                p.silo,
                num(p.target_epsilon),
                num(Some(p.target_delta)),
                num(p.rdp_epsilon),
                num(p.pld_epsilon),
                num(p.lower_epsilon),
                esc(&p.notes.join("; ")),
            );
        }
    }
    if !any {
        h.push_str("<tr><td class=\"l\" colspan=\"8\">no private algorithm</td></tr>\n");
    }
    h.push_str("</table>\n");
}

fn timings(h: &mut String, out: &RunOutput) {
    h.push_str(
        "<h2>Timings</h2>\n<table id=\"timings\"><tr><th class=\"l\">algorithm</th>\
         <th>trials</th><th>wall seconds per trial</th></tr>\n",
    );
    let mut total = 0.0;
    for s in &out.summary {
        total += s.wall_seconds * s.trials as f64;
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{:.3}</td></tr>",
            esc(&s.algorithm),
            s.trials,
            s.wall_seconds
        );
    }
    let _ = writeln!(
        h,
        "<tr><th class=\"l\">total</th><td></td><td>{total:.3}</td></tr>\n</table>"
    );
}

/// Writes `curves.svg`, `curves.png` and `report.html` into `dir` (which must exist);
/// returns the three paths.
pub fn write_report(
    spec: &ExperimentSpec,
    out: &RunOutput,
    dir: &Path,
) -> crate::Result<Vec<PathBuf>> {
    let title = super::curves::title(spec, out);
    let mut files = super::curves::plot_curves(out, &title, dir)?;
    let svg_path = &files[0];
    let svg = std::fs::read_to_string(svg_path).map_err(|source| crate::Error::Io {
        path: svg_path.clone(),
        source,
    })?;
    let path = dir.join(REPORT_FILE);
    crate::output::atomic_write(&path, render(spec, out, &svg).as_bytes())?;
    files.push(path);
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_formats() {
        assert_eq!(esc("<a & 'b'>"), "&lt;a &amp; &#39;b&#39;&gt;");
        assert_eq!(num(Some(1.0)), "1.0000");
        assert_eq!(num(Some(1e-5)), "1.000e-5");
        assert_eq!(num(None), "—");
        assert_eq!(num(Some(0.0)), "0.0000");
    }
}
