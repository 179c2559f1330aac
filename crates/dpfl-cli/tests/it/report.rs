//! `report.html` (issue 16 item 5, issue 31 item 9), rendered by a real headless browser:
//! `dpfl train --out` and `dpfl federate` write it; Chromium (`chromium --headless
//! --dump-dom`, and a screenshot) renders it, and the rendered page must hold the plain-words
//! guarantee standard output printed (marked certified), the curves figure (an inline SVG
//! with both panels), the privacy table with one row per silo holding that silo's own σ, δ
//! and accounted ε to 4 significant digits, the results and timings tables and the
//! configuration. Without a browser (`DPFL_BROWSER`, else `chromium` or `chromium-browser`
//! on PATH) the rendering part is skipped with a loud note on stderr; scripts/test.sh
//! installs Debian's `chromium` when it can.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;

use dpfl_testkit::experiment::Head;

static EXPERIMENT: LazyLock<String> = LazyLock::new(|| {
    Head {
        name: "report <test> & co",
        rounds: 8,
        seed: 5,
        participation: Some(r#"{ kind = "all" }"#),
        train: 60,
        test: 20,
        epsilon: 2.0,
        delta: "1e-4",
        ..Head::default()
    }
    .toml(
        r#"[[algorithms]]
label = "ISRL-DP MB-SGD"
kind = "mb-sgd"
calibration = "accountant"
step_size = 0.3
batch_size = 20
[[algorithms]]
label = "MB-SGD"
kind = "mb-sgd"
step_size = 0.3
batch_size = 20
"#,
    )
});

fn dpfl(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_dpfl"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run dpfl");
    assert!(
        out.status.success(),
        "dpfl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn browser() -> Option<PathBuf> {
    if let Some(b) = std::env::var_os("DPFL_BROWSER") {
        return Some(PathBuf::from(b));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|d| ["chromium", "chromium-browser"].map(|b| d.join(b)))
        .find(|p| p.is_file())
}

/// The section of `html` from `<table id="ID"` to its `</table>`.
fn table<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<table id=\"{id}\""))
        .unwrap_or_else(|| panic!("no table {id}"));
    let end = start + html[start..].find("</table>").expect("table end");
    &html[start..end]
}

/// `v` to 4 significant digits as the report prints it (dpfl's `guarantee::sig4`).
fn sig4(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if v.abs() < 1e-3 || v.abs() >= 1e5 {
        return format!("{v:.3e}");
    }
    let decimals = (3 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$}")
}

/// `html`'s text with the entities the template's escaping writes turned back into
/// characters (a browser's DOM has them plain).
fn plain(html: &str) -> String {
    html.replace("&#x27;", "'")
        .replace("&#x2f;", "/")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// Checks a report (as written, or as a browser's DOM) against the run's summary.json and
/// the `Privacy (…)` sentences of its standard output.
fn check_report(html: &str, summary: &serde_json::Value, stdout: &str) {
    // The guarantee of the private algorithm, word for word as stdout printed it, marked
    // certified; the non-private one is said to promise nothing.
    let sentence = stdout
        .lines()
        .find_map(|l| l.strip_prefix("Privacy (ISRL-DP MB-SGD): "))
        .expect("a guarantee on stdout");
    let text = plain(html);
    assert!(text.contains(sentence), "{sentence} not in the report");
    assert!(
        sentence.contains("with respect to any one of its records (ISRL-DP, replace-one")
            && sentence.contains("the server and the other silos are not trusted"),
        "{sentence}"
    );
    let g = &html[html.find("id=\"guarantee-1\"").expect("a guarantee box")..];
    // Certified, and (a seeded run) qualified by the seed's caveat, which the page prints.
    assert!(
        g.contains("certified by the accountants, with a caveat") && !g.contains("NOT certified")
    );
    assert!(text.contains("Caveat (ISRL-DP MB-SGD): seeded run"));
    assert!(text.contains("replace-one: one record changed"));
    assert!(text.contains("MB-SGD: non-private (no noise, no guarantee"));
    assert!(
        html.contains("report &lt;test&gt; &amp; co"),
        "title escaped"
    );
    let fig = &html[html.find("<figure id=\"curves\">").expect("curves figure")..];
    assert!(fig.contains("<svg") && fig.contains("training loss against rounds"));
    let privacy = table(html, "privacy");
    let private = &summary.as_array().unwrap()[0];
    let silos = private["privacy"].as_array().unwrap();
    assert_eq!(silos.len(), 3);
    // One header row and one row per silo of the private algorithm, each with its own σ
    // and δ beside its accounted ε.
    assert_eq!(privacy.matches("<tr").count(), 1 + silos.len(), "{privacy}");
    let rows: Vec<&str> = privacy.split("<tr").skip(2).collect();
    for (i, p) in silos.iter().enumerate() {
        let row = rows[i];
        assert!(row.contains(&format!("<td>{i}</td>")), "{row}");
        let sigma = private["silos"][i]["sigma"].as_f64().unwrap();
        let delta = p["target_delta"].as_f64().unwrap();
        for (what, v) in [("sigma", sigma), ("delta", delta)] {
            let cell = format!("<td>{}</td>", sig4(v));
            assert!(row.contains(&cell), "{what}: {cell} not in {row}");
        }
        for key in ["rdp_epsilon", "pld_epsilon", "lower_epsilon"] {
            let v = p[key].as_f64().unwrap_or_else(|| panic!("{key} in {p}"));
            let cell = format!("<td>{}</td>", sig4(v));
            assert!(row.contains(&cell), "{cell} not in {row}");
        }
        // Upper bounds above the lower bound, and the certified one within the target.
        let (rdp, pld, low) = (
            p["rdp_epsilon"].as_f64().unwrap(),
            p["pld_epsilon"].as_f64().unwrap(),
            p["lower_epsilon"].as_f64().unwrap(),
        );
        assert!(
            low <= pld && low <= rdp && rdp.min(pld) <= 2.0 + 1e-9,
            "{p}"
        );
    }
    let results = table(html, "results");
    assert_eq!(results.matches("<tr").count(), 3);
    let loss = private["final_train_loss"].as_f64().unwrap();
    assert!(
        results.contains(&format!("<td>{}</td>", sig4(loss))),
        "{results}"
    );
    assert!(!html.contains("NaN"), "a NaN in the report");
    assert_eq!(table(html, "timings").matches("<tr").count(), 4);
    // The configuration (quotes escaped as written; a browser's DOM prints them plain).
    assert!(html.contains("<pre id=\"config\">"));
    assert!(
        html.contains("calibration = &quot;accountant&quot;")
            || html.contains("calibration = \"accountant\"")
    );
}

fn render(browser: &Path, report: &Path) -> String {
    let url = format!("file://{}", report.display());
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--dump-dom",
            &url,
        ])
        .output()
        .expect("run the browser");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn train_report_renders_in_a_headless_browser() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("exp.toml"), &*EXPERIMENT).unwrap();
    let stdout = dpfl(
        dir.path(),
        &["train", "--config", "exp.toml", "--out", "out"],
    );
    assert!(
        stdout.contains("report.html (results, privacy per silo"),
        "{stdout}"
    );
    // curves.png has twice the SVG's pixels (1100 wide).
    let png = std::fs::read(dir.path().join("out/curves.png")).unwrap();
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 2200);
    let out = dir.path().join("out");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    check_report(&html, &summary, &stdout);
    // Self-contained: no reference to another file or the network.
    assert!(
        !html.contains("src=") && !html.contains("href="),
        "external reference"
    );
    let Some(browser) = browser() else {
        eprintln!(
            "WARNING: no headless browser (chromium; DPFL_BROWSER) found: report.html was NOT \
             rendered, only its text checked"
        );
        return;
    };
    let dom = render(&browser, &out.join("report.html"));
    check_report(&dom, &summary, &stdout);
    // A screenshot of the rendered page: a PNG of the window size, not blank.
    let shot = dir.path().join("shot.png");
    let status = Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1200,1600",
            &format!("--screenshot={}", shot.display()),
            &format!("file://{}", out.join("report.html").display()),
        ])
        .output()
        .expect("run the browser");
    assert!(status.status.success());
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 1200);
    assert!(png.len() > 20_000, "{} bytes: a blank page?", png.len());
}

#[test]
fn federate_writes_the_same_report() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("exp.toml"), &*EXPERIMENT).unwrap();
    let stdout = dpfl(
        dir.path(),
        &[
            "federate", "--config", "exp.toml", "--local", "--seeded", "--out", "fed",
        ],
    );
    let out = dir.path().join("fed");
    for f in ["curves.svg", "curves.png", "report.html", "provenance.json"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    // The results were staged and moved in whole (issue 31): no staging directory is left.
    for e in std::fs::read_dir(&out).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            !name.starts_with(".dpfl-staging"),
            "{name} left in {}",
            out.display()
        );
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    check_report(
        &std::fs::read_to_string(out.join("report.html")).unwrap(),
        &summary,
        &stdout,
    );
    match browser() {
        Some(browser) => check_report(
            &render(&browser, &out.join("report.html")),
            &summary,
            &stdout,
        ),
        None => {
            eprintln!("WARNING: no headless browser found: the federate report was NOT rendered")
        }
    }
}
