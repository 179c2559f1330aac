//! Outputs of a SoteriaFL reproduction: `curves.csv` (every run's evaluated rounds),
//! `bands.csv` (mean and standard deviation over seeds), `final.csv` (the last round per ε and
//! algorithm) and one SVG figure per ε: utility (a9a) or test accuracy (MNIST) against
//! rounds and against uplink bits (64 per float, the paper's count), mean ± one standard
//! deviation as a band.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::plot::{COLORS, ensure_font, plot_err};
use super::soteria::{ALGORITHMS, BandRow, CurveRow, Experiment, Plan};
use crate::output::{atomic_write, csv_string};

/// Writes the CSVs and figures into `dir`; returns the files written.
pub fn write(
    plan: &Plan,
    rows: &[CurveRow],
    bands: &[BandRow],
    dir: &Path,
) -> crate::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|source| crate::Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files = Vec::new();
    let curves = csv_string(
        &[
            "epsilon",
            "algorithm",
            "seed",
            "round",
            "train_loss",
            "test_accuracy",
            "grad_norm_sq",
            "utility",
            "uplink_bits",
            "uplink_bits_64",
            "grad_evals",
        ],
        rows.iter().map(|r| {
            [
                r.epsilon.to_string(),
                r.algorithm.clone(),
                r.seed.to_string(),
                r.round.to_string(),
                r.train_loss.to_string(),
                r.test_accuracy.to_string(),
                r.grad_norm_sq.to_string(),
                r.utility.to_string(),
                r.uplink_bits.to_string(),
                r.uplink_bits_64.to_string(),
                r.grad_evals.to_string(),
            ]
        }),
    )?;
    let p = dir.join("curves.csv");
    atomic_write(&p, curves.as_bytes())?;
    files.push(p);
    let header = [
        "epsilon",
        "algorithm",
        "round",
        "seeds",
        "uplink_bits_64",
        "uplink_bits",
        "utility_mean",
        "utility_std",
        "train_loss_mean",
        "train_loss_std",
        "test_accuracy_mean",
        "test_accuracy_std",
    ];
    let band_row = |b: &BandRow| {
        [
            b.epsilon.to_string(),
            b.algorithm.clone(),
            b.round.to_string(),
            b.seeds.to_string(),
            b.uplink_bits_64.to_string(),
            b.uplink_bits.to_string(),
            format!("{:.6}", b.utility_mean),
            format!("{:.6}", b.utility_std),
            format!("{:.6}", b.train_loss_mean),
            format!("{:.6}", b.train_loss_std),
            format!("{:.6}", b.test_accuracy_mean),
            format!("{:.6}", b.test_accuracy_std),
        ]
    };
    let p = dir.join("bands.csv");
    atomic_write(
        &p,
        csv_string(&header, bands.iter().map(band_row))?.as_bytes(),
    )?;
    files.push(p);
    let last: Vec<&BandRow> = bands
        .iter()
        .filter(|b| {
            plan.settings
                .iter()
                .any(|s| s.0 == b.epsilon && s.1 == b.round)
        })
        .collect();
    let p = dir.join("final.csv");
    atomic_write(
        &p,
        csv_string(&header, last.into_iter().map(band_row))?.as_bytes(),
    )?;
    files.push(p);
    ensure_font()?;
    for &(eps, _, _) in &plan.settings {
        let sel: Vec<&BandRow> = bands.iter().filter(|b| b.epsilon == eps).collect();
        let mut text = String::new();
        {
            let root = SVGBackend::with_string(&mut text, (1280, 480)).into_drawing_area();
            root.fill(&WHITE).map_err(plot_err)?;
            let areas = root.split_evenly((1, 2));
            draw(&areas[0], plan, eps, &sel, false)?;
            draw(&areas[1], plan, eps, &sel, true)?;
            root.present().map_err(plot_err)?;
        }
        let p = dir.join(format!("{}-eps{eps}.svg", plan.id));
        atomic_write(&p, text.as_bytes())?;
        files.push(p);
    }
    Ok(files)
}

fn metric(plan: &Plan, b: &BandRow) -> (f64, f64) {
    match plan.experiment {
        Experiment::A9a => (b.utility_mean, b.utility_std),
        Experiment::Mnist => (b.test_accuracy_mean, b.test_accuracy_std),
    }
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    plan: &Plan,
    eps: f64,
    rows: &[&BandRow],
    by_bits: bool,
) -> crate::Result<()> {
    let x = |b: &BandRow| {
        if by_bits {
            b.uplink_bits_64
        } else {
            b.round as f64
        }
    };
    // Bits axis cut at 1.1× the smallest final bit count (the notebooks' truncation).
    let x_max = if by_bits {
        ALGORITHMS
            .iter()
            .filter_map(|a| {
                rows.iter()
                    .filter(|b| b.algorithm == *a)
                    .map(|b| x(b))
                    .reduce(f64::max)
            })
            .fold(f64::INFINITY, f64::min)
            * 1.1
    } else {
        rows.iter().map(|b| x(b)).fold(0.0, f64::max)
    };
    let vis: Vec<&BandRow> = rows.iter().copied().filter(|b| x(b) <= x_max).collect();
    let lo = vis
        .iter()
        .map(|b| metric(plan, b).0 - metric(plan, b).1)
        .fold(f64::INFINITY, f64::min);
    let hi = vis
        .iter()
        .map(|b| metric(plan, b).0 + metric(plan, b).1)
        .fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo.is_finite() && hi > lo {
        (lo.max(0.0), hi)
    } else {
        (0.0, 1.0)
    };
    let ylab = match plan.experiment {
        Experiment::A9a => "utility (running mean of ||grad f||^2)",
        Experiment::Mnist => "test accuracy",
    };
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{} eps = {eps}, {} seeds", plan.id, plan.seeds),
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max.max(1.0), lo..hi)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc(if by_bits {
            "uplink bits (64 per float)"
        } else {
            "round"
        })
        .y_desc(ylab)
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(plot_err)?;
    for (i, a) in ALGORITHMS.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64, f64)> = vis
            .iter()
            .filter(|b| b.algorithm == *a)
            .map(|b| {
                let (m, s) = metric(plan, b);
                (x(b), m, s)
            })
            .collect();
        if pts.is_empty() {
            continue;
        }
        let mut band: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1 + p.2)).collect();
        band.extend(pts.iter().rev().map(|p| (p.0, p.1 - p.2)));
        chart
            .draw_series(std::iter::once(Polygon::new(band, color.mix(0.15))))
            .map_err(plot_err)?;
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0, p.1)),
                color.stroke_width(2),
            ))
            .map_err(plot_err)?
            .label(*a)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 12))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(plot_err)?;
    Ok(())
}
