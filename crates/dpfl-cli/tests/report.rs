//! `report.html` (issue 16 item 5), rendered by a real headless browser: `dpfl train --out`
//! and `dpfl federate` write it; Chromium (`chromium --headless --dump-dom`, and a
//! screenshot) renders it, and the rendered page must hold the curves figure (an inline SVG
//! with both panels), the privacy table with one row per silo and the run's numbers, the
//! results and timings tables and the configuration. Without a browser (`DPFL_BROWSER`, else
//! `chromium` or `chromium-browser` on PATH) the rendering part is skipped with a note;
//! scripts/test.sh installs Debian's `chromium` when it can.

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

/// Checks a report (as written, or as a browser's DOM) against the run's summary.json.
fn check_report(html: &str, summary: &serde_json::Value) {
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
    // One header row and one row per silo of the private algorithm.
    assert_eq!(privacy.matches("<tr").count(), 1 + silos.len(), "{privacy}");
    for p in silos {
        for key in ["rdp_epsilon", "pld_epsilon", "lower_epsilon"] {
            let v = p[key].as_f64().unwrap_or_else(|| panic!("{key} in {p}"));
            let cell = format!("<td>{v:.4}</td>");
            assert!(privacy.contains(&cell), "{cell} not in {privacy}");
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
        results.contains(&format!("<td>{loss:.4}</td>")),
        "{results}"
    );
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
    let out = dir.path().join("out");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    check_report(&html, &summary);
    // Self-contained: no reference to another file or the network.
    assert!(
        !html.contains("src=") && !html.contains("href="),
        "external reference"
    );
    let Some(browser) = browser() else {
        println!("note: no headless browser (chromium) found: the rendering check is skipped");
        return;
    };
    let dom = render(&browser, &out.join("report.html"));
    check_report(&dom, &summary);
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
    dpfl(
        dir.path(),
        &[
            "federate", "--config", "exp.toml", "--local", "--seeded", "--out", "fed",
        ],
    );
    let out = dir.path().join("fed");
    for f in ["curves.svg", "curves.png", "report.html"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    check_report(
        &std::fs::read_to_string(out.join("report.html")).unwrap(),
        &summary,
    );
    if let Some(browser) = browser() {
        check_report(&render(&browser, &out.join("report.html")), &summary);
    }
}
