//! Outputs of `dpfl reproduce shuffle-rates` ([`super::shuffle_rates`]): `runs.csv` (every
//! run), `summary.csv` (per algorithm and n: mean and 10–90% band of the excess loss; per
//! algorithm: the fitted slope and Table 1's exponent), `pvec_noise.csv` (the small-n table
//! below) and `shuffle-rates.{svg,png}`.
//!
//! **PVEC's noise at paper-faithful constants** (digest §4): per coordinate, the standard
//! deviation of PVEC's sum estimate (Thm 3.2's parameters, the exact variance
//! (Δ/g)²(n/4 + s·n·p(1−p)) at its worst case) against a central Gaussian mechanism for the
//! same sum (ℓ₂ sensitivity 2, replace-one; the analytic Gaussian of Balle & Wang 2018).
//! **What an exact accountant recovers**, for the scalar protocol P1D (sum of n values in
//! [0, 1]): Lemma 3.1's calibration at ε/3 (its worst case is 3·(ε/3) = ε) against the fewest
//! binomial trials for which the exact hockey-stick divergence of the shift-by-g binomial
//! mechanism meets (ε, δ) ([`dpfl_privacy::shuffle::exact`]). The vector case (the
//! composition over d coordinates with per-instance budgets) is not computed exactly here.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::shuffle_rates::{ALGORITHMS, Band, DESIGN_EXPONENT, Plan, RunRow, first_beats_local};
use crate::plot::{Figure, Panel, Point, Series, Spread};
use dpfl_privacy::params::Delta;
use dpfl_privacy::shuffle::params::{P1dParams, PvecParams, Scale};

/// One row of the PVEC / P1D noise table.
#[derive(Debug, Clone, Serialize)]
pub struct NoiseRow {
    /// "PVEC" or "P1D".
    pub protocol: String,
    /// Users in the sum.
    pub n: u64,
    /// Coordinates (1 for P1D).
    pub d: usize,
    /// Target ε.
    pub epsilon: f64,
    /// Target δ.
    pub delta: f64,
    /// The paper's granularity g.
    pub g: u64,
    /// The paper's noise bits per user s.
    pub s: u64,
    /// Per-coordinate std of the shuffle protocol's sum at the paper's constants.
    pub paper_std: f64,
    /// The same with the noise trials an exact accountant needs (P1D only).
    pub exact_std: Option<f64>,
    /// A central Gaussian mechanism's std for the same sum.
    pub central_std: f64,
}

/// The analytic Gaussian's σ for ℓ₂ sensitivity `sens` at (ε, δ) (bisection on the noise
/// multiplier until Balle & Wang's exact ε is at most ε; rounded up).
fn central_sigma(sens: f64, epsilon: f64, delta: f64) -> dpfl::Result<f64> {
    let d = Delta::new(delta)?;
    let eps_of = |z: f64| dpfl_privacy::accountant::gaussian::gaussian_epsilon(z, d);
    let (mut lo, mut hi) = (1e-3f64, 1e4f64);
    for _ in 0..80 {
        let mid = (lo * hi).sqrt();
        if eps_of(mid)? <= epsilon {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi * sens)
}

/// The PVEC rows (n from 10² to 10⁶, d ∈ {10, 100}, ε = 1, δ = 1e-6) and the P1D rows with
/// the exact accountant (n up to `exact_max_n`).
pub fn pvec_noise_rows(exact_max_n: u64) -> dpfl::Result<Vec<NoiseRow>> {
    let sh =
        |e: dpfl_privacy::shuffle::ShuffleError| dpfl::Error::data("PVEC table", e.to_string());
    let (eps, delta) = (1.0, 1e-6);
    let central_vec = central_sigma(2.0, eps, delta)?;
    let central_scalar = central_sigma(1.0, eps, delta)?;
    let mut rows = Vec::new();
    for d in [10usize, 100] {
        for n in [100u64, 1_000, 10_000, 100_000, 1_000_000] {
            let p = PvecParams::calibrate(n, d, 1.0, eps, delta, Scale::Paper).map_err(sh)?;
            rows.push(NoiseRow {
                protocol: "PVEC".into(),
                n,
                d,
                epsilon: eps,
                delta,
                g: p.p1d.g,
                s: p.p1d.s,
                paper_std: (p.variance_bound() / d as f64).sqrt(),
                exact_std: None,
                central_std: central_vec,
            });
        }
    }
    for n in [100u64, 1_000, 10_000, 100_000] {
        let p = P1dParams::calibrate(n, 1.0, eps / 3.0, delta).map_err(sh)?;
        let m_paper = p.s * n;
        let exact = if n <= exact_max_n {
            dpfl_privacy::shuffle::exact::fewest_trials(p.p, p.g, eps, delta, m_paper)
                .map_err(sh)?
        } else {
            None
        };
        let scale = 1.0 / p.g as f64;
        let std = |m: u64| scale * (n as f64 / 4.0 + m as f64 * p.p * (1.0 - p.p)).sqrt();
        rows.push(NoiseRow {
            protocol: "P1D".into(),
            n,
            d: 1,
            epsilon: eps,
            delta,
            g: p.g,
            s: p.s,
            paper_std: std(m_paper),
            exact_std: exact.map(std),
            central_std: central_scalar,
        });
    }
    Ok(rows)
}

fn csv<T: Serialize>(path: &Path, rows: &[T]) -> dpfl::Result<()> {
    let mut w = csv::Writer::from_path(path)
        .map_err(|e| dpfl::Error::data(path.display().to_string(), e.to_string()))?;
    for r in rows {
        w.serialize(r)
            .map_err(|e| dpfl::Error::data(path.display().to_string(), e.to_string()))?;
    }
    w.flush()
        .map_err(|e| dpfl::Error::data(path.display().to_string(), e.to_string()))
}

/// Writes runs.csv, summary.csv, pvec_noise.csv and the figure into `dir`.
pub fn write(
    plan: &Plan,
    runs: &[RunRow],
    bands: &[Band],
    slopes: &[(String, Option<f64>, Option<f64>)],
    noise: &[NoiseRow],
    refused: &[String],
    dir: &Path,
) -> dpfl::Result<Vec<PathBuf>> {
    let mut files = write_tables(runs, bands, slopes, noise, refused, dir)?;
    files.extend(draw(plan, bands, slopes, dir)?);
    Ok(files)
}

/// The CSVs of [`write`]: runs.csv, summary.csv, pvec_noise.csv.
pub fn write_tables(
    runs: &[RunRow],
    bands: &[Band],
    slopes: &[(String, Option<f64>, Option<f64>)],
    noise: &[NoiseRow],
    refused: &[String],
    dir: &Path,
) -> dpfl::Result<Vec<PathBuf>> {
    let io =
        |p: &Path, e: std::io::Error| dpfl::Error::data(p.display().to_string(), e.to_string());
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut files = Vec::new();
    let runs_path = dir.join("runs.csv");
    csv(&runs_path, runs)?;
    files.push(runs_path);
    let summary = dir.join("summary.csv");
    let mut text = String::from(
        "algorithm,n,seeds,excess_loss_mean,excess_loss_p10,excess_loss_p90,fitted_slope,theory_exponent,design_exponent\n",
    );
    for b in bands {
        let _ = writeln!(
            text,
            "\"{}\",{},{},{:e},{:e},{:e},,,",
            b.algorithm, b.n, b.seeds, b.mean, b.low, b.high
        );
    }
    for (a, fit, theory) in slopes {
        let o = |x: &Option<f64>| x.map_or(String::new(), |v| format!("{v:.4}"));
        let design = ALGORITHMS
            .iter()
            .position(|n| n == a)
            .map_or("", |i| DESIGN_EXPONENT[i]);
        let _ = writeln!(text, "\"{a}\",,,,,,{},{},{design}", o(fit), o(theory));
    }
    for (a, n) in first_beats_local(bands) {
        let at = n.map_or("at no n of the plan".to_string(), |n| {
            format!("from n = {n}")
        });
        let _ = writeln!(text, "\"{a} below local DP {at}\",,,,,,,,");
    }
    for r in refused {
        let _ = writeln!(text, "\"not run: {}\",,,,,,,,", r.replace('"', "'"));
    }
    std::fs::write(&summary, text).map_err(|e| io(&summary, e))?;
    files.push(summary);
    let noise_path = dir.join("pvec_noise.csv");
    csv(&noise_path, noise)?;
    files.push(noise_path);
    Ok(files)
}

/// The figure of [`write`] (`<id>.svg`, `.png`), written into `dir`.
pub fn draw(
    plan: &Plan,
    bands: &[Band],
    slopes: &[(String, Option<f64>, Option<f64>)],
    dir: &Path,
) -> dpfl::Result<Vec<PathBuf>> {
    let mut panel = Panel::new(
        format!(
            "excess population loss, d = {}, eps = {}, delta = {:e}, {} seeds (10-90% band)",
            plan.d, plan.epsilon, plan.delta, plan.seeds
        ),
        "log10 n (records)",
        "E loss(w) - loss(w*)",
    );
    panel.log_y = true;
    panel.spread = Spread::Band;
    // The shuffle curves sit high on the right; an upper-right legend covered them.
    panel.legend_lower_left = true;
    for (a, fit, theory) in slopes {
        let points: Vec<Point> = bands
            .iter()
            .filter(|b| &b.algorithm == a)
            .map(|b| Point {
                x: (b.n as f64).log10(),
                y: b.mean,
                spread: Some((b.low, b.high)),
            })
            .collect();
        if points.is_empty() {
            continue;
        }
        let design = ALGORITHMS
            .iter()
            .position(|n| n == a)
            .map_or("", |i| DESIGN_EXPONENT[i]);
        let label = match (fit, theory) {
            (Some(f), Some(t)) => format!("{a}: slope {f:.2} (design {design}; Table 1 {t})"),
            (Some(f), None) => format!("{a}: slope {f:.2} (design {design})"),
            _ => a.clone(),
        };
        panel.series.push(Series { label, points });
    }
    let fig = Figure {
        title: Some(format!(
            "shuffle-rates: equal (eps, delta); PVEC by Thm 3.2 or the exact accountant{}",
            if plan.ns.len() <= 3 { " (quick)" } else { "" }
        )),
        panels: vec![panel],
        panel_width: 900,
        height: 600,
    };
    crate::plot::write(&fig, dir, &plan.id, true)
}
