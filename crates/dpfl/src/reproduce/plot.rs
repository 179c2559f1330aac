//! Figures of a reproduction in the shape of Lowy & Razaviyayn's Fig. 4–9: the metric against
//! ε, one line per algorithm with 90% error bars, one panel per setting (M, N) of the figure.
//!
//! Written with `plotters`' SVG backend and its bitmap backend (PNG). Text is laid out with
//! `ab_glyph` and the DejaVu Sans font embedded in the crate (`assets/`, Bitstream Vera
//! licence), so no system fonts or font libraries are needed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::{ReproSpec, SummaryRow};

/// Width of one panel and height of a figure, pixels.
pub const PANEL_WIDTH: u32 = 640;
pub const FIGURE_HEIGHT: u32 = 480;

const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

pub(crate) fn ensure_font() -> crate::Result<()> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
            .map_err(|_| "the embedded font does not parse".to_string())
    })
    .clone()
    .map_err(|e| crate::Error::data("plot", e))
}

pub(crate) const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(127, 127, 127),
];

pub(crate) fn plot_err(e: impl std::fmt::Display) -> crate::Error {
    crate::Error::data("plot", e.to_string())
}

/// One panel: its M and the rows of the plotted metric.
struct Panel<'a> {
    m: f64,
    rows: Vec<&'a SummaryRow>,
}

/// Draws every figure of `rows` into `dir` as `fig<F>.svg` and `fig<F>.png`.
pub fn plot_figures(
    spec: &ReproSpec,
    rows: &[SummaryRow],
    dir: &Path,
) -> crate::Result<Vec<PathBuf>> {
    ensure_font()?;
    let metric = spec.metric.name();
    let mut figures: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| r.metric == metric) {
        if !figures.contains(&r.figure.as_str()) {
            figures.push(&r.figure);
        }
    }
    let mut written = Vec::new();
    for f in figures {
        let mut panels: Vec<Panel> = Vec::new();
        for r in rows.iter().filter(|r| r.metric == metric && r.figure == f) {
            match panels.iter_mut().find(|p| p.m == r.m) {
                Some(p) => p.rows.push(r),
                None => panels.push(Panel {
                    m: r.m,
                    rows: vec![r],
                }),
            }
        }
        let size = (PANEL_WIDTH * panels.len() as u32, FIGURE_HEIGHT);
        // Each figure is drawn into a temporary file and renamed into place (never a
        // truncated plot after a crash or a full disk).
        let svg = dir.join(format!("fig{f}.svg"));
        let mut text = String::new();
        {
            let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
            draw(&root, spec, f, &panels)?;
            root.present().map_err(plot_err)?;
        }
        crate::output::atomic_write(&svg, text.as_bytes())?;
        let png = dir.join(format!("fig{f}.png"));
        crate::output::replace_with(&png, |tmp| {
            // The bitmap backend picks the encoder from the extension: keep `.png` last.
            let tmp_png = tmp.with_extension("png");
            {
                let root = BitMapBackend::new(&tmp_png, size).into_drawing_area();
                draw(&root, spec, f, &panels)?;
                root.present().map_err(plot_err)?;
            }
            std::fs::rename(&tmp_png, tmp).map_err(|source| crate::Error::Io {
                path: png.clone(),
                source,
            })
        })?;
        written.push(svg);
        written.push(png);
    }
    Ok(written)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    spec: &ReproSpec,
    figure: &str,
    panels: &[Panel],
) -> crate::Result<()> {
    root.fill(&WHITE).map_err(plot_err)?;
    let areas = root.split_evenly((1, panels.len()));
    let metric = spec.metric.name().replace('_', " ");
    for (area, panel) in areas.iter().zip(panels) {
        let finite = |v: f64| v.is_finite();
        let eps: Vec<f64> = panel.rows.iter().filter_map(|r| r.epsilon).collect();
        let x_max = eps.iter().copied().fold(0.0, f64::max) * 1.05 + 1e-9;
        let lo = panel
            .rows
            .iter()
            .map(|r| r.ci_low.min(r.mean))
            .filter(|v| finite(*v))
            .fold(f64::INFINITY, f64::min);
        let hi = panel
            .rows
            .iter()
            .map(|r| r.ci_high.max(r.mean))
            .filter(|v| finite(*v))
            .fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if lo.is_finite() && hi.is_finite() {
            let pad = ((hi - lo) * 0.08).max(1e-3);
            ((lo - pad).max(0.0), hi + pad)
        } else {
            (0.0, 1.0)
        };
        let caption = format!("Fig. {figure}: {}, M = {}", spec.title, panel.m);
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..x_max, lo..hi)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("ε")
            .y_desc(metric.as_str())
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(plot_err)?;
        let mut labels: Vec<&str> = Vec::new();
        for r in &panel.rows {
            if !labels.contains(&r.algorithm.as_str()) {
                labels.push(&r.algorithm);
            }
        }
        for (i, label) in labels.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let mut pts: Vec<(f64, f64, f64, f64)> = panel
                .rows
                .iter()
                .filter(|r| r.algorithm == *label && finite(r.mean))
                .filter_map(|r| r.epsilon.map(|e| (e, r.ci_low, r.mean, r.ci_high)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.0, p.2)),
                    color.stroke_width(2),
                ))
                .map_err(plot_err)?
                .label(*label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart
                .draw_series(
                    pts.iter().map(|p| {
                        ErrorBar::new_vertical(p.0, p.1, p.2, p.3, color.stroke_width(1), 6)
                    }),
                )
                .map_err(plot_err)?;
            chart
                .draw_series(
                    pts.iter()
                        .map(|p| Circle::new((p.0, p.2), 3, color.filled())),
                )
                .map_err(plot_err)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(plot_err)?;
    }
    Ok(())
}
