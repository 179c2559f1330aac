//! Figures of a reproduction in the shape of Lowy & Razaviyayn's Fig. 4–9: the metric against
//! ε, one line per algorithm with 90% error bars (dodged so they do not overlap), one panel
//! per setting (M, N) of the figure, and the trivial predictor's line. Drawn by the one
//! plotting helper ([`crate::plot`]); the title names the reproduction, N, K, δ and trials.

use std::path::{Path, PathBuf};

use super::{PanelFacts, ReproSpec, SummaryRow};
use crate::plot::{Figure, Panel, Point, Series, Spread};

/// Width of one panel and height of a figure, pixels.
pub const PANEL_WIDTH: u32 = 640;
/// Height of each figure, pixels.
pub const FIGURE_HEIGHT: u32 = 480;

/// Draws every figure of `rows` into `dir` as `fig<F>.svg` and `fig<F>.png`; `facts` are the
/// panels' settings ([`super::ReproOutput::panels`]).
pub fn plot_figures(
    spec: &ReproSpec,
    rows: &[SummaryRow],
    facts: &[PanelFacts],
    dir: &Path,
) -> dpfl::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for fig in figures(spec, rows, facts) {
        written.extend(crate::plot::write(
            &fig.1,
            dir,
            &format!("fig{}", fig.0),
            true,
        )?);
    }
    Ok(written)
}

/// The figures of `rows`, as (figure number, figure), in first-seen order.
pub fn figures(
    spec: &ReproSpec,
    rows: &[SummaryRow],
    facts: &[PanelFacts],
) -> Vec<(String, Figure)> {
    let metric = spec.metric.name();
    let mut names: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| r.metric == metric) {
        if !names.contains(&r.figure.as_str()) {
            names.push(&r.figure);
        }
    }
    let y_label = metric.replace('_', " ");
    names
        .into_iter()
        .map(|f| {
            let mut ms: Vec<f64> = Vec::new();
            for r in rows.iter().filter(|r| r.metric == metric && r.figure == f) {
                if !ms.contains(&r.m) {
                    ms.push(r.m);
                }
            }
            let panel_facts: Vec<&PanelFacts> = facts.iter().filter(|p| p.figure == f).collect();
            let panels = ms
                .iter()
                .map(|&m| {
                    let fact = panel_facts.iter().find(|p| p.m == m);
                    let sel: Vec<&SummaryRow> = rows
                        .iter()
                        .filter(|r| r.metric == metric && r.figure == f && r.m == m)
                        .collect();
                    let n = fact.map_or(String::new(), |p| format!(", N = {}", p.silos));
                    let mut panel = Panel::new(format!("M = {m}{n}"), "ε", &y_label);
                    panel.spread = Spread::Bars;
                    panel.y_nonnegative = true;
                    panel.reference = fact
                        .and_then(|p| p.trivial)
                        .map(|v| ("trivial predictor".to_string(), v));
                    let mut labels: Vec<&str> = Vec::new();
                    for r in &sel {
                        if !labels.contains(&r.algorithm.as_str()) {
                            labels.push(&r.algorithm);
                        }
                    }
                    panel.series = labels
                        .iter()
                        .map(|label| {
                            let mut points: Vec<Point> = sel
                                .iter()
                                .filter(|r| r.algorithm == *label && r.mean.is_finite())
                                .filter_map(|r| {
                                    r.epsilon.map(|e| Point {
                                        x: e,
                                        y: r.mean,
                                        spread: Some((r.ci_low, r.ci_high)),
                                    })
                                })
                                .collect();
                            points.sort_by(|a, b| a.x.total_cmp(&b.x));
                            Series {
                                label: label.to_string(),
                                points,
                            }
                        })
                        .collect();
                    panel
                })
                .collect::<Vec<_>>();
            let n = panel_facts.iter().map(|p| p.silos).max().unwrap_or(0);
            let k: Vec<usize> = panel_facts.iter().filter_map(|p| p.batch_size).collect();
            let delta = panel_facts
                .iter()
                .filter_map(|p| p.delta)
                .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.max(d))));
            let title = format!(
                "Fig. {f}: {} — {}",
                spec.title,
                crate::plot::setting_title(n, &k, delta, spec.trials)
            );
            (
                f.to_string(),
                Figure {
                    title: Some(title),
                    panels,
                    panel_width: PANEL_WIDTH,
                    height: FIGURE_HEIGHT,
                },
            )
        })
        .collect()
}
