//! Training curves of any run (`dpfl train --out`, `dpfl federate`): `curves.svg` and
//! `curves.png`, two panels — training loss and the test metric against rounds — with one
//! line per algorithm, the mean over trials at each evaluated round, drawn by the one
//! plotting helper ([`crate::plot`]).
//!
//! The title carries the experiment's name, N silos, K, δ, R rounds and trials; the
//! test-metric panel has the trivial predictor's line (majority class or training mean).
//! A round where some trial's value is not finite is left out of the line (a diverged run
//! shows as a line that stops), never plotted as an average of infinities.
//!
//! Several algorithms' losses can differ by orders of magnitude (a diverging one, a noisy
//! one), which on a linear axis flattens the good curves (issue 31 item 9): the loss axis is
//! logarithmic when every loss is positive and they span a factor of 10 or more
//! ([`LOG_SPAN`]); otherwise it is linear and clipped at twice the largest median loss of an
//! algorithm (a spike above it is drawn at the top; the caption says so). The legend sits
//! under each panel, and `curves.png` has twice the SVG's pixels.

use std::path::{Path, PathBuf};

use super::RunOutput;
use crate::plot::{Figure, Panel, Point, Series, Spread};

/// The ratio of the largest to the smallest loss from which the loss axis is logarithmic.
pub const LOG_SPAN: f64 = 10.0;

/// Width in pixels of `curves.svg` (`curves.png` has twice as many).
pub const WIDTH: u32 = 1100;
/// Height in pixels of `curves.svg` / `curves.png`.
pub const HEIGHT: u32 = 460;

/// One algorithm's mean curve: (round, mean train loss, mean test metric).
pub type Curve = (String, Vec<(usize, f64, f64)>);

/// Sums per evaluated round while averaging: (round, Σ loss, Σ metric, trials).
type CurveSums = (String, Vec<(usize, f64, f64, usize)>);

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

/// The figure's title: the experiment, then N silos, K (per algorithm, smallest over
/// silos), δ (of the first private algorithm, largest over silos), trials, and R rounds.
pub fn title(spec: &super::ExperimentSpec, out: &RunOutput) -> String {
    let n = out.summary.first().map_or(0, |s| s.silos.len());
    let k: Vec<usize> = out.summary.iter().map(|s| s.batch_size).collect();
    let delta = out.summary.iter().find_map(|s| s.delta);
    format!(
        "{}: {}, R = {}",
        spec.name,
        crate::plot::setting_title(n, &k, delta, spec.trials),
        spec.rounds
    )
}

/// The figure of `out` under `title` (see the module docs).
pub fn figure(out: &RunOutput, title: &str) -> Figure {
    let curves = mean_curves(out);
    let metric = out
        .summary
        .first()
        .map_or("test metric", |s| s.metric.label());
    let panel = |name: &str, value: fn(&(usize, f64, f64)) -> f64| {
        let mut p = Panel::new(format!("{name} against rounds"), "round", name);
        p.spread = Spread::Band;
        p.series = curves
            .iter()
            .map(|(label, pts)| Series {
                label: label.clone(),
                points: pts
                    .iter()
                    .map(|q| Point {
                        x: q.0 as f64,
                        y: value(q),
                        spread: None,
                    })
                    .collect(),
            })
            .collect();
        p
    };
    let mut loss = panel("training loss", |p| p.1);
    loss_axis(&mut loss);
    let mut test = panel(metric, |p| p.2);
    test.y_nonnegative = true;
    test.reference = out
        .trivial_test_metric
        .map(|v| ("trivial predictor".to_string(), v));
    Figure {
        title: Some(title.to_string()),
        panels: vec![loss, test],
        panel_width: WIDTH / 2,
        height: HEIGHT,
    }
}

/// The loss panel's axis: log, or linear clipped (see the module docs).
fn loss_axis(p: &mut Panel) {
    let ys: Vec<f64> = p
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|q| q.y))
        .filter(|y| y.is_finite())
        .collect();
    let (lo, hi) = ys
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &y| {
            (a.min(y), b.max(y))
        });
    if lo > 0.0 && hi / lo >= LOG_SPAN {
        p.log_y = true;
        p.caption += " (log scale)";
        return;
    }
    let median = |s: &Series| {
        let mut v: Vec<f64> = s
            .points
            .iter()
            .map(|q| q.y)
            .filter(|y| y.is_finite())
            .collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let top = p
        .series
        .iter()
        .filter_map(median)
        .fold(f64::NEG_INFINITY, f64::max);
    if top > 0.0 && hi > 2.0 * top {
        p.y_max = Some(2.0 * top);
        p.caption += " (clipped)";
    }
}

/// Writes `curves.svg` and `curves.png` (twice the pixels) into `dir`; `title` heads the
/// figure.
pub fn plot_curves(out: &RunOutput, title: &str, dir: &Path) -> dpfl::Result<Vec<PathBuf>> {
    let style = crate::plot::Style {
        scale: 2,
        legend_below: true,
    };
    crate::plot::write_with(&figure(out, title), dir, "curves", true, style)
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
            trivial_test_metric: Some(0.45),
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
        // Losses 0.5 to 3 span less than a factor of 10: linear, not clipped.
        assert!(!svg.contains("log scale") && !svg.contains("(clipped)"));
        assert!(svg.contains("trivial predictor"));
        // Legend entries: one per algorithm.
        assert!(svg.contains("t (N = 2)") && svg.contains(">\nA\n<") && svg.contains(">\nB\n<"));
        let png = std::fs::read(&files[1]).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(
            u32::from_be_bytes([png[16], png[17], png[18], png[19]]),
            2 * WIDTH
        );
        // A loss that spans decades gets a log axis.
        let mut wide = out.clone();
        wide.rounds.push(row(0, 3, "C", 500.0, 0.9));
        let fig = figure(&wide, "t");
        assert!(fig.panels[0].log_y && !fig.panels[1].log_y);
        assert!(fig.panels[0].caption.ends_with("(log scale)"));
    }
}
