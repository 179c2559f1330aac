//! Training curves of any run (`dpfl train --out`, `dpfl federate`): `curves.svg` and
//! `curves.png`, two panels — training loss and the test metric against rounds — with one
//! line per algorithm, the mean over trials at each evaluated round. Drawn as the
//! reproduction figures are ([`crate::reproduce::plot`]: plotters, the embedded font).
//!
//! The title carries the experiment's name, its number of silos N, rounds R, δ and trials.
//! A round where some trial's value is not finite is left out of the line (a diverged run
//! shows as a line that stops), never plotted as an average of infinities.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::RunOutput;
use crate::reproduce::plot::{COLORS, ensure_font, plot_err};

pub const WIDTH: u32 = 1100;
pub const HEIGHT: u32 = 460;

/// One algorithm's mean curve: (round, mean train loss, mean test metric).
pub type Curve = (String, Vec<(usize, f64, f64)>);

/// Sums per evaluated round while averaging: (round, Σ loss, Σ metric, trials).
type CurveSums = (String, Vec<(usize, f64, f64, usize)>);

/// A panel: its y label and the point's coordinate it plots.
type Panel<'a> = (&'a str, fn(&(usize, f64, f64)) -> f64);

/// The mean over trials of each algorithm's evaluated rounds, algorithms in first-seen order.
pub fn mean_curves(out: &RunOutput) -> Vec<Curve> {
    let mut curves: Vec<CurveSums> = Vec::new();
    for r in &out.rounds {
        let i = match curves.iter().position(|c| c.0 == r.algorithm) {
            Some(i) => i,
            None => {
                curves.push((r.algorithm.clone(), Vec::new()));
                curves.len() - 1
            }
        };
        let pts = &mut curves[i].1;
        match pts.iter_mut().find(|p| p.0 == r.round) {
            Some(p) => {
                p.1 += r.train_loss;
                p.2 += r.test_metric;
                p.3 += 1;
            }
            None => pts.push((r.round, r.train_loss, r.test_metric, 1)),
        }
    }
    curves
        .into_iter()
        .map(|(a, mut pts)| {
            pts.sort_by_key(|p| p.0);
            let mean = pts
                .into_iter()
                .map(|(r, l, m, n)| (r, l / n as f64, m / n as f64))
                .collect();
            (a, mean)
        })
        .collect()
}

/// The figure's title: the experiment, N silos, R rounds, δ (of the first private
/// algorithm, largest over silos) and the number of trials.
pub fn title(spec: &super::ExperimentSpec, out: &RunOutput) -> String {
    let n = out.summary.first().map_or(0, |s| s.silos.len());
    let delta = out
        .summary
        .iter()
        .find_map(|s| s.delta)
        .map_or("non-private".to_string(), |d| format!("δ = {d:.1e}"));
    format!(
        "{}: N = {n} silos, R = {}, {delta}, {} trial(s)",
        spec.name, spec.rounds, spec.trials
    )
}

/// Writes `curves.svg` and `curves.png` into `dir`; `title` heads the figure.
pub fn plot_curves(out: &RunOutput, title: &str, dir: &Path) -> crate::Result<Vec<PathBuf>> {
    ensure_font()?;
    let curves = mean_curves(out);
    let metric = out
        .summary
        .first()
        .map_or("test metric", |s| s.metric.label());
    let size = (WIDTH, HEIGHT);
    let svg = dir.join("curves.svg");
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
        draw(&root, title, metric, &curves)?;
        root.present().map_err(plot_err)?;
    }
    crate::output::atomic_write(&svg, text.as_bytes())?;
    let png = dir.join("curves.png");
    crate::output::replace_with(&png, |tmp| {
        // The bitmap backend picks the encoder from the extension: keep `.png` last.
        let tmp_png = tmp.with_extension("png");
        {
            let root = BitMapBackend::new(&tmp_png, size).into_drawing_area();
            draw(&root, title, metric, &curves)?;
            root.present().map_err(plot_err)?;
        }
        std::fs::rename(&tmp_png, tmp).map_err(|source| crate::Error::Io {
            path: png.clone(),
            source,
        })
    })?;
    Ok(vec![svg, png])
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    metric: &str,
    curves: &[Curve],
) -> crate::Result<()> {
    root.fill(&WHITE).map_err(plot_err)?;
    let root = root.titled(title, ("sans-serif", 17)).map_err(plot_err)?;
    let areas = root.split_evenly((1, 2));
    let panels: [Panel; 2] = [("training loss", |p| p.1), (metric, |p| p.2)];
    let x_max = curves
        .iter()
        .flat_map(|c| c.1.iter().map(|p| p.0))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    for (area, (name, value)) in areas.iter().zip(panels) {
        let vals: Vec<f64> = curves
            .iter()
            .flat_map(|c| c.1.iter().map(value))
            .filter(|v| v.is_finite())
            .collect();
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if lo.is_finite() && hi.is_finite() {
            let pad = ((hi - lo) * 0.08).max(1e-3);
            (lo - pad, hi + pad)
        } else {
            (0.0, 1.0)
        };
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{name} against rounds"), ("sans-serif", 15))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_max, lo..hi)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("round")
            .y_desc(name)
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(plot_err)?;
        for (i, (label, pts)) in curves.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let line: Vec<(f64, f64)> = pts
                .iter()
                .map(|p| (p.0 as f64, value(p)))
                .filter(|p| p.1.is_finite())
                .collect();
            chart
                .draw_series(LineSeries::new(line, color.stroke_width(2)))
                .map_err(plot_err)?
                .label(label.as_str())
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
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::RoundRow;

    fn row(trial: usize, round: usize, a: &str, loss: f64, m: f64) -> RoundRow {
        RoundRow {
            trial,
            round,
            algorithm: a.into(),
            train_loss: loss,
            test_metric: m,
            extended: None,
        }
    }

    #[test]
    fn curves_average_trials_per_round_and_plot() {
        let out = RunOutput {
            rounds: vec![
                row(0, 1, "A", 1.0, 0.5),
                row(0, 2, "A", 0.5, 0.25),
                row(0, 1, "B", 2.0, 0.9),
                row(1, 1, "A", 3.0, 0.7),
                row(1, 2, "A", 1.5, 0.35),
            ],
            summary: vec![],
            models: vec![],
        };
        let c = mean_curves(&out);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].0, "A");
        assert_eq!(c[0].1, vec![(1, 2.0, 0.6), (2, 1.0, 0.3)]);
        assert_eq!(c[1].1, vec![(1, 2.0, 0.9)]);
        let dir = tempfile::tempdir().unwrap();
        let files = plot_curves(&out, "t (N = 2)", dir.path()).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("training loss against rounds"));
        // Legend entries: one per algorithm.
        assert!(svg.contains("t (N = 2)") && svg.contains(">\nA\n<") && svg.contains(">\nB\n<"));
        let png = std::fs::read(&files[1]).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    }
}
