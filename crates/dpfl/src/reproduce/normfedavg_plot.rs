//! The DP-NormFedAvg reproductions' figure (Das et al. Figs. 2, 3, 5): train loss and test
//! error against rounds and against the bits one participating silo has sent, one line per
//! algorithm, the mean over seeds (the paper's figures show one run per algorithm).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::normfedavg::{Outcome, RoundRow};
use super::plot::{COLORS, ensure_font, plot_err};

/// Per algorithm (in first-seen order), per round: (round, bits, train loss, test error)
/// averaged over seeds.
fn mean_curves(rows: &[RoundRow]) -> Vec<(String, Vec<[f64; 4]>)> {
    let mut order: Vec<String> = Vec::new();
    let mut acc: BTreeMap<(usize, usize), ([f64; 4], f64)> = BTreeMap::new();
    for r in rows {
        let a = match order.iter().position(|o| *o == r.algorithm) {
            Some(a) => a,
            None => {
                order.push(r.algorithm.clone());
                order.len() - 1
            }
        };
        let e = acc.entry((a, r.round)).or_insert(([0.0; 4], 0.0));
        let v = [r.round as f64, r.bits_per_silo, r.train_loss, r.test_error];
        e.0.iter_mut().zip(v).for_each(|(s, x)| *s += x);
        e.1 += 1.0;
    }
    order
        .iter()
        .enumerate()
        .map(|(a, name)| {
            let pts = acc
                .range((a, 0)..(a + 1, 0))
                .map(|(_, (s, n))| s.map(|x| x / n))
                .collect();
            (name.clone(), pts)
        })
        .collect()
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    curves: &[(String, Vec<[f64; 4]>)],
    x: usize,
    y: usize,
    title: &str,
) -> crate::Result<()> {
    let pts = || curves.iter().flat_map(|(_, p)| p.iter());
    let finite = |v: f64| v.is_finite();
    let x_max = pts()
        .map(|p| p[x])
        .filter(|v| finite(*v))
        .fold(1.0, f64::max);
    let y_max = pts()
        .map(|p| p[y])
        .filter(|v| finite(*v))
        .fold(0.0, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.05 } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 15))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc(if x == 0 {
            "round"
        } else {
            "bits sent per silo"
        })
        .y_desc(if y == 2 { "train loss" } else { "test error" })
        .label_style(("sans-serif", 11))
        .draw()
        .map_err(plot_err)?;
    for (i, (name, p)) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                p.iter()
                    .filter(|v| finite(v[x]) && finite(v[y]))
                    .map(|v| (v[x], v[y])),
                color.stroke_width(2),
            ))
            .map_err(plot_err)?
            .label(name.clone())
            .legend(move |(a, b)| PathElement::new([(a, b), (a + 16, b)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 11))
        .draw()
        .map_err(plot_err)?;
    Ok(())
}

/// Writes `<id>.svg` into `dir`: four panels (loss and error against rounds and bits).
pub fn write_figure(id: &str, outcome: &Outcome, dir: &Path) -> crate::Result<Vec<PathBuf>> {
    let curves = mean_curves(&outcome.rounds);
    if curves.is_empty() {
        return Ok(Vec::new());
    }
    ensure_font()?;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (1280, 900)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let areas = root.split_evenly((2, 2));
        for (k, (x, y)) in [(0, 2), (0, 3), (1, 2), (1, 3)].into_iter().enumerate() {
            panel(&areas[k], &curves, x, y, id)?;
        }
        root.present().map_err(plot_err)?;
    }
    let p = dir.join(format!("{id}.svg"));
    crate::output::atomic_write(&p, text.as_bytes())?;
    Ok(vec![p])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_average_seeds_per_round_and_the_figure_is_written() {
        let row = |a: &str, seed, round, loss| RoundRow {
            algorithm: a.into(),
            seed,
            round,
            train_loss: loss,
            test_error: 0.5,
            bits_per_silo: 10.0 * round as f64,
        };
        let rows = vec![
            row("B", 1, 1, 1.0),
            row("B", 2, 1, 3.0),
            row("A", 1, 1, 4.0),
            row("B", 1, 2, 0.5),
        ];
        let c = mean_curves(&rows);
        assert_eq!(c[0].0, "B", "first-seen order");
        assert_eq!(c[0].1, vec![[1.0, 10.0, 2.0, 0.5], [2.0, 20.0, 0.5, 0.5]]);
        assert_eq!(c[1].1, vec![[1.0, 10.0, 4.0, 0.5]]);
        let dir = tempfile::tempdir().unwrap();
        let out = Outcome {
            rounds: rows,
            ..Default::default()
        };
        let files = write_figure("x", &out, dir.path()).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.contains("<svg") && svg.contains("train loss"));
    }
}
