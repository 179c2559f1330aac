//! The one plotting helper: every figure dpfl draws (training curves of `dpfl train` and
//! `dpfl federate`, the Lowy & Razaviyayn ε figures, the SoteriaFL round/bit figures) is a
//! [`Figure`] of [`Panel`]s drawn here with `plotters`, as SVG and (optionally, with the
//! crate's default `png` feature, which the Python extension leaves off) PNG. Text is
//! laid out with `ab_glyph` and the DejaVu Sans font embedded in the crate (`assets/`,
//! Bitstream Vera licence), so no system fonts or font libraries are needed.
//!
//! Rules every figure follows (issue 16 item 7):
//! * the figure title carries N (silos), K (records or local steps per round), δ and the
//!   number of trials (the callers build it with [`setting_title`]);
//! * error bars of different series at the same x are dodged: series i of n is drawn shifted
//!   by (i − (n−1)/2) · 1.2% of the x range (multiplicatively on a log axis), so bars never
//!   sit on top of each other; the line, markers and bars of a series move together;
//! * where the panel plots a test error (or a relative RMSE), a dashed grey horizontal line
//!   marks the trivial predictor (majority class, or the training mean) — a private model
//!   above it has learned nothing;
//! * log axes where the paper has them: [`Panel::log_y`]. The SoteriaFL utility
//!   (running mean of ‖∇f‖²) spans decades and is drawn on a log y axis; the stored paper
//!   text does not state its figures' axis scales, so this follows the quantity, not a
//!   sentence of the paper. Lowy & Razaviyayn's test error/RMSE against ε stay linear.
//!
//! Every file is written to a temporary file and renamed into place
//! ([`crate::output::replace_with`]): never a truncated plot after a crash or a full disk.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::prelude::*;
use plotters::style::FontStyle;

const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Fraction of the x range between neighbouring series' dodged error bars.
pub const DODGE: f64 = 0.012;

/// Registers the embedded font once per process.
pub fn ensure_font() -> dpfl::Result<()> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
            .map_err(|_| "the embedded font does not parse".to_string())
    })
    .clone()
    .map_err(|e| dpfl::Error::data("plot", e))
}

/// The series colours (matplotlib's tab10 without its olive; the first six as before, so
/// figures of up to six series are unchanged; the rest for shuffle-rates' nine curves).
pub const COLORS: [RGBColor; 9] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(127, 127, 127),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];

fn plot_err(e: impl std::fmt::Display) -> dpfl::Error {
    dpfl::Error::data("plot", e.to_string())
}

/// One point; `spread` = (low, high) drawn as an error bar or a band.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// The x coordinate (rounds, ε, …).
    pub x: f64,
    /// The y coordinate (the metric's mean).
    pub y: f64,
    /// (low, high) around `y`, e.g. mean ± one standard error over trials.
    pub spread: Option<(f64, f64)>,
}

/// One line of a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend's label.
    pub label: String,
    /// The points, in increasing x.
    pub points: Vec<Point>,
}

/// How a series' spread is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// Error bars at each point, with a marker (dodged across series).
    Bars,
    /// A translucent band around the line.
    Band,
}

/// One chart of a figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// The caption over the chart.
    pub caption: String,
    /// The x axis' label.
    pub x_label: String,
    /// The y axis' label.
    pub y_label: String,
    /// The lines drawn.
    pub series: Vec<Series>,
    /// Error bars or a band for the points' spread.
    pub spread: Spread,
    /// A logarithmic y axis (needs positive values).
    pub log_y: bool,
    /// The largest x shown (points beyond it are dropped); default: the data's.
    pub x_max: Option<f64>,
    /// The y axis starts at 0 or above (metrics that cannot be negative).
    pub y_nonnegative: bool,
    /// The legend in the lower-left corner instead of the upper-right one (where it would
    /// cover curves that sit high on the right).
    pub legend_lower_left: bool,
    /// A horizontal reference line: (legend label, y), e.g. the trivial predictor.
    pub reference: Option<(String, f64)>,
    /// The top of a linear y axis: values above it are drawn at it (a clipped axis).
    pub y_max: Option<f64>,
}

/// How a figure is drawn: `scale` multiplies the PNG's pixels, fonts and lines (2: a sharp
/// figure on high-density screens and in print); `legend_below` puts each panel's legend
/// under its plot, where it covers no line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// The PNG's pixels per SVG pixel (the SVG is always 1).
    pub scale: u32,
    /// The legend under the plot instead of in its upper right corner.
    pub legend_below: bool,
}

impl Default for Style {
    fn default() -> Self {
        Style {
            scale: 1,
            legend_below: false,
        }
    }
}

impl Panel {
    /// An empty panel with bars, linear axes and no reference line.
    pub fn new(caption: impl Into<String>, x_label: &str, y_label: &str) -> Panel {
        Panel {
            caption: caption.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            series: Vec::new(),
            spread: Spread::Bars,
            log_y: false,
            x_max: None,
            y_nonnegative: false,
            legend_lower_left: false,
            reference: None,
            y_max: None,
        }
    }
}

/// A figure: an optional title over panels side by side.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The title over every panel (usually [`setting_title`]).
    pub title: Option<String>,
    /// The panels, left to right.
    pub panels: Vec<Panel>,
    /// Each panel's width in pixels.
    pub panel_width: u32,
    /// The figure's height in pixels.
    pub height: u32,
}

/// "N = 7 silos, K = 30, δ = 2.1e-5, 3 trials": the setting every figure title carries.
/// `k` lists the distinct K values (several when algorithms differ); δ None = non-private.
pub fn setting_title(n: usize, k: &[usize], delta: Option<f64>, trials: usize) -> String {
    let mut ks: Vec<usize> = k.to_vec();
    ks.sort_unstable();
    ks.dedup();
    let k = match ks.as_slice() {
        [] => "K per algorithm".to_string(),
        [one] => format!("K = {one}"),
        many => format!(
            "K ∈ {{{}}}",
            many.iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let delta = delta.map_or("non-private".to_string(), |d| format!("δ = {d:.1e}"));
    let t = if trials == 1 { "trial" } else { "trials" };
    format!("N = {n} silos, {k}, {delta}, {trials} {t}")
}

/// The majority-class error or the training-mean RMSE: what a predictor that ignores the
/// features scores on the pooled test rows (the reference line of test-error panels).
/// `classification` picks the rule; None when there are no test rows.
pub fn trivial_metric(silos: &[dpfl::data::SiloData], classification: bool) -> Option<f64> {
    let train = silos.iter().flat_map(|s| s.train.y().iter().copied());
    let test: Vec<f64> = silos
        .iter()
        .flat_map(|s| s.test.y().iter().copied())
        .collect();
    if test.is_empty() {
        return None;
    }
    if classification {
        // Most frequent training label; ties go to the smaller label (deterministic).
        let mut counts: Vec<(f64, usize)> = Vec::new();
        for y in train {
            match counts.iter_mut().find(|c| c.0 == y) {
                Some(c) => c.1 += 1,
                None => counts.push((y, 1)),
            }
        }
        counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.total_cmp(&b.0)));
        let majority = counts.first()?.0;
        let wrong = test.iter().filter(|&&y| y != majority).count();
        Some(wrong as f64 / test.len() as f64)
    } else {
        let (s, n) = train.fold((0.0, 0usize), |(s, n), y| (s + y, n + 1));
        if n == 0 {
            return None;
        }
        let mean = s / n as f64;
        let mse = test.iter().map(|y| (y - mean).powi(2)).sum::<f64>() / test.len() as f64;
        Some(mse.sqrt())
    }
}

/// Whether this build writes PNG copies of its figures (the crate's `png` feature; the Python
/// wheel leaves it off, so its users can tell which files a run writes).
pub const WRITES_PNG: bool = cfg!(feature = "png");

/// Writes `dir/<stem>.svg` (and `dir/<stem>.png` when `png` and the crate's `png` feature is
/// on); returns the files written.
pub fn write(fig: &Figure, dir: &Path, stem: &str, png: bool) -> dpfl::Result<Vec<PathBuf>> {
    write_with(fig, dir, stem, png, Style::default())
}

/// [`write`] in `style`.
pub fn write_with(
    fig: &Figure,
    dir: &Path,
    stem: &str,
    png: bool,
    style: Style,
) -> dpfl::Result<Vec<PathBuf>> {
    ensure_font()?;
    let size = (fig.panel_width * fig.panels.len().max(1) as u32, fig.height);
    let svg = dir.join(format!("{stem}.svg"));
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
        draw(&root, fig, Style { scale: 1, ..style })?;
        root.present().map_err(plot_err)?;
    }
    crate::output::atomic_write(&svg, text.as_bytes())?;
    let mut written = vec![svg];
    if png && let Some(path) = write_png(fig, dir, stem, size, style)? {
        written.push(path);
    }
    Ok(written)
}

/// `dir/<stem>.png` at `style.scale` times the SVG's pixels.
#[cfg(feature = "png")]
fn write_png(
    fig: &Figure,
    dir: &Path,
    stem: &str,
    size: (u32, u32),
    style: Style,
) -> dpfl::Result<Option<PathBuf>> {
    let png = dir.join(format!("{stem}.png"));
    crate::output::replace_with(&png, |tmp| {
        // The bitmap backend picks the encoder from the extension: keep `.png` last.
        let tmp_png = tmp.with_extension("png");
        {
            let s = style.scale.max(1);
            let root = BitMapBackend::new(&tmp_png, (size.0 * s, size.1 * s)).into_drawing_area();
            draw(&root, fig, style)?;
            root.present().map_err(plot_err)?;
        }
        std::fs::rename(&tmp_png, tmp).map_err(|source| dpfl::Error::Io {
            path: png.clone(),
            source,
        })
    })?;
    Ok(Some(png))
}

/// Without the `png` feature (the Python extension's build, which then compiles no image
/// codecs) only the SVG is written; report.html inlines the SVG, so it is complete either way.
#[cfg(not(feature = "png"))]
fn write_png(
    _fig: &Figure,
    _dir: &Path,
    _stem: &str,
    _size: (u32, u32),
    _style: Style,
) -> dpfl::Result<Option<PathBuf>> {
    Ok(None)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    fig: &Figure,
    st: Style,
) -> dpfl::Result<()> {
    root.fill(&WHITE).map_err(plot_err)?;
    let root = match &fig.title {
        Some(t) => root
            .titled(t, ("sans-serif", 17 * st.scale))
            .map_err(plot_err)?,
        None => root.clone(),
    };
    let areas = root.split_evenly((1, fig.panels.len().max(1)));
    for (area, panel) in areas.iter().zip(&fig.panels) {
        if !st.legend_below {
            draw_panel(area, panel, st)?;
            continue;
        }
        let entries = panel.series.len() + usize::from(panel.reference.is_some());
        let line = 17 * st.scale;
        let h = area.dim_in_pixel().1;
        let legend = (line * entries as u32 + 8 * st.scale).min(h / 2);
        let (plot, below) = area.split_vertically(h - legend);
        draw_panel(&plot, panel, st)?;
        legend_below(&below, panel, st)?;
    }
    Ok(())
}

/// The legend of `panel` as lines of text under its plot (see [`Style::legend_below`]).
fn legend_below<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    st: Style,
) -> dpfl::Result<()> {
    let s = st.scale as i32;
    let grey = RGBColor(90, 90, 90);
    let entries = panel
        .series
        .iter()
        .enumerate()
        .map(|(i, x)| (x.label.as_str(), COLORS[i % COLORS.len()], 2))
        .chain(panel.reference.iter().map(|(l, _)| (l.as_str(), grey, 1)));
    for (j, (label, color, width)) in entries.enumerate() {
        let y = 17 * s * j as i32 + 10 * s;
        area.draw(&PathElement::new(
            vec![(70 * s, y), (95 * s, y)],
            color.stroke_width(width * st.scale),
        ))
        .map_err(plot_err)?;
        area.draw(&Text::new(
            label.to_string(),
            (102 * s, y - 7 * s),
            ("sans-serif", 13 * st.scale).into_font(),
        ))
        .map_err(plot_err)?;
    }
    Ok(())
}

/// The x shift of series `i` of `n` (see the module docs); 0 for bands.
fn dodge(panel: &Panel, i: usize, x_lo: f64, x_hi: f64) -> f64 {
    let n = panel.series.len();
    if panel.spread != Spread::Bars || n < 2 {
        return 0.0;
    }
    (i as f64 - (n - 1) as f64 / 2.0) * DODGE * (x_hi - x_lo)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    st: Style,
) -> dpfl::Result<()> {
    let x_cut = panel.x_max.unwrap_or(f64::INFINITY);
    let visible = |p: &&Point| p.x.is_finite() && p.x <= x_cut && p.y.is_finite();
    let xs: Vec<f64> = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().filter(visible).map(|p| p.x))
        .collect();
    let x_lo = xs.iter().copied().fold(f64::INFINITY, f64::min).min(0.0);
    let x_hi = match panel.x_max {
        Some(m) => m,
        None => xs.iter().copied().fold(f64::NEG_INFINITY, f64::max) * 1.05,
    };
    let (x_lo, x_hi) = if x_lo.is_finite() && x_hi.is_finite() && x_hi > x_lo {
        (x_lo, x_hi)
    } else {
        (0.0, 1.0)
    };
    let mut ys: Vec<f64> = Vec::new();
    for s in &panel.series {
        for p in s.points.iter().filter(visible) {
            ys.push(p.y);
            if let Some((lo, hi)) = p.spread {
                ys.extend([lo, hi]);
            }
        }
    }
    if let Some((_, r)) = &panel.reference {
        ys.push(*r);
    }
    ys.retain(|v| v.is_finite() && (!panel.log_y || *v > 0.0));
    if let Some(m) = panel.y_max.filter(|_| !panel.log_y) {
        ys.iter_mut().for_each(|v| *v = v.min(m));
    }
    let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if panel.log_y {
        let (lo, hi) = if lo.is_finite() && hi > lo {
            (lo / 1.2, hi * 1.2)
        } else {
            (1e-3, 1.0)
        };
        chart(
            area,
            panel,
            (x_lo, x_hi),
            (Some(lo), None),
            (lo..hi).log_scale(),
            st,
        )
    } else {
        let (lo, hi) = if lo.is_finite() && hi.is_finite() {
            let pad = ((hi - lo) * 0.08).max(1e-3);
            let lo = lo - pad;
            (if panel.y_nonnegative { lo.max(0.0) } else { lo }, hi + pad)
        } else {
            (0.0, 1.0)
        };
        chart(area, panel, (x_lo, x_hi), (None, panel.y_max), lo..hi, st)
    }
}

fn chart<DB: DrawingBackend, Y>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    (x_lo, x_hi): (f64, f64),
    (y_floor, y_top): (Option<f64>, Option<f64>),
    y: Y,
    st: Style,
) -> dpfl::Result<()>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let x_cut = panel.x_max.unwrap_or(f64::INFINITY);
    let k = st.scale;
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.caption, ("sans-serif", 15 * k))
        .margin(12 * k)
        .x_label_area_size(40 * k)
        .y_label_area_size(60 * k)
        .build_cartesian_2d(x_lo..x_hi, y)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc(panel.x_label.as_str())
        .y_desc(panel.y_label.as_str())
        .label_style(("sans-serif", 13 * k))
        .draw()
        .map_err(plot_err)?;
    for (i, s) in panel.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let dx = dodge(panel, i, x_lo, x_hi);
        let pts: Vec<Point> = s
            .points
            .iter()
            .filter(|p| p.x.is_finite() && p.x <= x_cut && p.y.is_finite())
            .map(|p| {
                // A log axis has no place for values at or below 0: clamp them to its floor;
                // a clipped axis draws values above its top at the top.
                let f = |v: f64| {
                    let v = y_floor.map_or(v, |fl| v.max(fl));
                    y_top.map_or(v, |t| v.min(t))
                };
                Point {
                    x: p.x + dx,
                    y: f(p.y),
                    spread: p.spread.map(|(lo, hi)| (f(lo), f(hi))),
                }
            })
            .collect();
        if pts.is_empty() {
            continue;
        }
        if panel.spread == Spread::Band && pts.iter().all(|p| p.spread.is_some()) {
            let mut band: Vec<(f64, f64)> = pts
                .iter()
                .filter_map(|p| p.spread.map(|s| (p.x, s.1)))
                .collect();
            band.extend(
                pts.iter()
                    .rev()
                    .filter_map(|p| p.spread.map(|s| (p.x, s.0))),
            );
            chart
                .draw_series(std::iter::once(Polygon::new(band, color.mix(0.15))))
                .map_err(plot_err)?;
        }
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.x, p.y)),
                color.stroke_width(2 * k),
            ))
            .map_err(plot_err)?
            .label(s.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2 * k))
            });
        if panel.spread == Spread::Bars && pts.iter().any(|p| p.spread.is_some()) {
            chart
                .draw_series(pts.iter().filter_map(|p| {
                    p.spread.map(|(lo, hi)| {
                        ErrorBar::new_vertical(p.x, lo, p.y, hi, color.stroke_width(k), 6 * k)
                    })
                }))
                .map_err(plot_err)?;
            chart
                .draw_series(
                    pts.iter()
                        .map(|p| Circle::new((p.x, p.y), 3 * k, color.filled())),
                )
                .map_err(plot_err)?;
        }
    }
    if let Some((label, r)) = &panel.reference {
        let grey = RGBColor(90, 90, 90);
        let segments = 40;
        let step = (x_hi - x_lo) / segments as f64;
        // Dashes: every other segment of the line.
        chart
            .draw_series((0..segments).step_by(2).map(|j| {
                let a = x_lo + j as f64 * step;
                PathElement::new(vec![(a, *r), (a + step, *r)], grey.stroke_width(k))
            }))
            .map_err(plot_err)?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 8, y)], grey.stroke_width(1)));
    }
    if st.legend_below {
        return Ok(());
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 12 * k))
        .position(if panel.legend_lower_left {
            SeriesLabelPosition::LowerLeft
        } else {
            SeriesLabelPosition::UpperRight
        })
        .draw()
        .map_err(plot_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpfl::data::{Dataset, SiloData, Target};

    fn panel(n: usize) -> Panel {
        let mut p = Panel::new("c", "x", "y");
        for i in 0..n {
            p.series.push(Series {
                label: format!("s{i}"),
                points: vec![Point {
                    x: 1.0,
                    y: 0.5,
                    spread: Some((0.4, 0.6)),
                }],
            });
        }
        p
    }

    #[test]
    fn error_bars_of_series_are_dodged_symmetrically() {
        let p = panel(3);
        // Range 0..10: 1.2% of it is 0.12 per series, centred on the middle series.
        let d: Vec<f64> = (0..3).map(|i| dodge(&p, i, 0.0, 10.0)).collect();
        assert!((d[0] + 0.12).abs() < 1e-12 && d[1] == 0.0 && (d[2] - 0.12).abs() < 1e-12);
        assert_eq!(dodge(&panel(1), 0, 0.0, 10.0), 0.0);
        let mut band = panel(3);
        band.spread = Spread::Band;
        assert_eq!(dodge(&band, 0, 0.0, 10.0), 0.0);
    }

    #[test]
    fn title_names_n_k_delta_trials() {
        assert_eq!(
            setting_title(7, &[30, 30], Some(2.1e-5), 3),
            "N = 7 silos, K = 30, δ = 2.1e-5, 3 trials"
        );
        assert_eq!(
            setting_title(2, &[19, 8], None, 1),
            "N = 2 silos, K ∈ {8, 19}, non-private, 1 trial"
        );
    }

    fn silo(train: &[f64], test: &[f64]) -> SiloData {
        let ds = |y: &[f64]| {
            let x = dpfl::linalg::Matrix::zeros(y.len(), 1);
            Dataset::new(x, y.to_vec(), Target::Real, vec!["x".into()]).unwrap()
        };
        SiloData {
            train: ds(train),
            test: ds(test),
        }
    }

    #[test]
    fn trivial_predictor_by_hand() {
        // Training labels 0,0,1 | 1,0 → majority 0; test 1,0 | 1,1 → 3 of 4 wrong.
        let s = [
            silo(&[0.0, 0.0, 1.0], &[1.0, 0.0]),
            silo(&[1.0, 0.0], &[1.0, 1.0]),
        ];
        assert_eq!(trivial_metric(&s, true), Some(0.75));
        // Training mean 2/5 = 0.4; test errors 0.6, -0.4, 0.6, 0.6: mse = (3·0.36+0.16)/4.
        let rmse = trivial_metric(&s, false).unwrap();
        assert!((rmse - (1.24f64 / 4.0).sqrt()).abs() < 1e-12, "{rmse}");
        assert_eq!(trivial_metric(&[silo(&[1.0], &[])], true), None);
    }

    // Without `png` (the Python extension's build) only the SVG is written: tested through the
    // real wheel (python/tests/test_own_data.py); here dpfl-testkit turns the feature on.
    #[cfg(feature = "png")]
    #[test]
    fn writes_svg_and_png_with_reference_and_log_axis() {
        let mut p = panel(2);
        p.reference = Some(("trivial predictor".into(), 0.55));
        let mut q = panel(1);
        q.log_y = true;
        q.spread = Spread::Band;
        let fig = Figure {
            title: Some("T: N = 2 silos".into()),
            panels: vec![p, q],
            panel_width: 300,
            height: 200,
        };
        let dir = tempfile::tempdir().unwrap();
        let files = write(&fig, dir.path(), "f", true).unwrap();
        assert_eq!(files.len(), 2);
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.contains("T: N = 2 silos") && svg.contains("trivial predictor"));
        let png = std::fs::read(&files[1]).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(write(&fig, dir.path(), "g", false).unwrap().len(), 1);
        // Twice the pixels with the legend under the plots: the SVG keeps its size.
        let style = Style {
            scale: 2,
            legend_below: true,
        };
        let files = write_with(&fig, dir.path(), "h", true, style).unwrap();
        let png = std::fs::read(&files[1]).unwrap();
        let be = |i: usize| u32::from_be_bytes([png[i], png[i + 1], png[i + 2], png[i + 3]]);
        assert_eq!((be(16), be(20)), (1200, 400));
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.contains("width=\"600\"") && svg.contains("trivial predictor"));
    }
}
