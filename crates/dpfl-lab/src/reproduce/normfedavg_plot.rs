//! The DP-NormFedAvg reproductions' figure (Das et al. Figs. 2, 3, 5): train loss and test
//! error against rounds and against the bits one participating silo has sent, one line per
//! algorithm, the mean over seeds (the paper's figures show one run per algorithm).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::privacy::RunPrivacy;
use crate::plot::{Figure, Panel, Point, Series, Spread};

/// One evaluated round of one run (floats exact in the checkpoint,
/// [`super::checkpoint::Exact`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RoundRow {
    /// The algorithm's label.
    pub algorithm: String,
    /// The run's seed.
    pub seed: u64,
    /// Rounds done, 1..=R.
    pub round: usize,
    /// Mean training loss on the evaluated training rows.
    #[serde(with = "super::checkpoint::exact")]
    pub train_loss: f64,
    /// Test error rate.
    #[serde(with = "super::checkpoint::exact")]
    pub test_error: f64,
    /// Bits one participating silo has sent so far (its messages' exact sizes).
    #[serde(with = "super::checkpoint::exact")]
    pub bits_per_silo: f64,
}

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

/// Writes `<id>.svg` and `<id>.png` into `dir`: four panels (loss and error against rounds
/// and against bits), drawn by the one plotting helper ([`crate::plot`]); each legend entry
/// carries its algorithm's certified ε (`privacy`, by label; [`super::privacy`]).
pub(crate) fn write_figure(
    id: &str,
    rows: &[RoundRow],
    privacy: &[(String, RunPrivacy)],
    dir: &Path,
) -> dpfl::Result<Vec<PathBuf>> {
    let mut curves = mean_curves(rows);
    if curves.is_empty() {
        return Ok(Vec::new());
    }
    // Bits in the unit that keeps the axis labels short (a full run sends ≈ 10^10 bits).
    let most = curves
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(|v| v[1]))
        .filter(|b| b.is_finite())
        .fold(0.0f64, f64::max);
    let (scale, bits_label) = bits_unit(most);
    for (_, pts) in &mut curves {
        pts.iter_mut().for_each(|v| v[1] /= scale);
    }
    // A diverged run's loss reaches 10^5–10^8 before it stops; on a linear axis the runs that
    // train (losses 0.3–2.3) would be a flat line at 0. Over more than two decades the loss
    // axis is logarithmic (cross-entropy is positive); otherwise linear, as the paper draws it.
    let (lo, hi) = curves
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(|v| v[2]))
        .filter(|l| l.is_finite() && *l > 0.0)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), l| {
            (lo.min(l), hi.max(l))
        });
    let log_loss = hi > 100.0 * lo;
    let panels = [(0, 2), (0, 3), (1, 2), (1, 3)]
        .into_iter()
        .map(|(x, y)| {
            let x_label = if x == 0 { "round" } else { bits_label };
            let y_label = match y {
                2 if log_loss => "train loss (log scale)",
                2 => "train loss",
                _ => "test error",
            };
            let mut panel = Panel::new(format!("{y_label} against {x_label}"), x_label, y_label);
            panel.spread = Spread::Band;
            panel.y_nonnegative = true;
            panel.log_y = y == 2 && log_loss;
            panel.series = curves
                .iter()
                .map(|(name, pts)| Series {
                    label: match privacy.iter().find(|(a, _)| a == name) {
                        Some((_, p)) if p.labelled_epsilon.is_some() => {
                            format!("{name} ({})", p.legend())
                        }
                        _ => name.clone(),
                    },
                    points: pts
                        .iter()
                        .filter(|v| v[x].is_finite() && v[y].is_finite())
                        .map(|v| Point {
                            x: v[x],
                            y: v[y],
                            spread: None,
                        })
                        .collect(),
                })
                .collect();
            panel
        })
        .collect();
    let fig = Figure {
        title: Some(id.to_string()),
        panels,
        panel_width: 640,
        height: 480,
    };
    crate::plot::write(&fig, dir, id, true)
}

/// (divisor, axis label) for a largest value of `most` bits.
fn bits_unit(most: f64) -> (f64, &'static str) {
    if most >= 1e9 {
        (1e9, "Gbit sent per silo")
    } else if most >= 1e6 {
        (1e6, "Mbit sent per silo")
    } else if most >= 1e3 {
        (1e3, "kbit sent per silo")
    } else {
        (1.0, "bits sent per silo")
    }
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
        let files = write_figure("x", &rows, &[], dir.path()).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.contains("<svg") && svg.contains("train loss"));
        // 20 bits at most: plain bits; a full run's ≈ 8.4·10^9: Gbit.
        assert!(svg.contains("bits sent per silo"));
        assert_eq!(bits_unit(8.4e9), (1e9, "Gbit sent per silo"));
        assert_eq!(bits_unit(4.2e6).1, "Mbit sent per silo");
        assert_eq!(bits_unit(999.0).0, 1.0);
        assert!(!svg.contains("log scale"), "0.5–4: a linear loss axis");
        // A diverged run's loss (10^6) beside one that trains: the loss axis turns log.
        let rows = vec![
            row("A", 1, 1, 2.3),
            row("A", 1, 2, 0.6),
            row("D", 1, 1, 1e6),
        ];
        let files = write_figure("y", &rows, &[], dir.path()).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.contains("train loss (log scale)"), "{}", &svg[..200]);
    }
}
