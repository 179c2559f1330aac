//! Outputs of a SoteriaFL reproduction: `curves.csv` (every run's evaluated rounds),
//! `bands.csv` (mean and standard deviation over seeds), `final.csv` (the last round per ε and
//! algorithm) and one SVG figure per ε: utility (a9a) or test accuracy (MNIST) against
//! rounds and against uplink bits (64 per float, the paper's count), mean ± one standard
//! deviation as a band, drawn by the one plotting helper ([`crate::plot`]). The title carries
//! N, δ and the seeds; K differs per algorithm (the code's batch rules), so it says so.
//! Every (ε label, algorithm) carries its certified ε and lower bound
//! ([`super::privacy`]): columns of `bands.csv` and `final.csv`, one row of `privacy.csv`,
//! the legend of its curve; a label the noise does not meet is called "labelled ε". A plan
//! other than the presets' (accountant calibration, aggregate clipping, non-private) says
//! so in the title ([`Plan::variant`]).

use std::path::{Path, PathBuf};

use super::privacy::RunPrivacy;
use super::soteria::{ALGORITHMS, BandRow, CurveRow, Experiment, Plan, PrivacyRow, privacy_of};
use crate::output::{atomic_write, csv_string};
use crate::plot::{Figure, Panel, Point, Series, Spread};
use dpfl::algo::soteria::NoiseCalibration;

/// `curves.csv`'s columns.
const CURVES_COLUMNS: [&str; 11] = [
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
];

/// Writes the CSVs and figures into `dir`; returns the files written. `privacy` holds each
/// (ε label, algorithm)'s certificate ([`super::soteria::privacy_table`]): columns of
/// `bands.csv` and `final.csv`, `privacy.csv`, the figures' titles and legends.
pub fn write(
    plan: &Plan,
    rows: &[CurveRow],
    bands: &[BandRow],
    privacy: &[PrivacyRow],
    dir: &Path,
) -> dpfl::Result<Vec<PathBuf>> {
    let mut files = write_tables(plan, rows, bands, privacy, dir)?;
    files.extend(draw(plan, bands, privacy, dir)?);
    Ok(files)
}

/// The figures of [`write`] ([`figures`]), written into `dir`.
pub fn draw(
    plan: &Plan,
    bands: &[BandRow],
    privacy: &[PrivacyRow],
    dir: &Path,
) -> dpfl::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for fig in figures(plan, bands, privacy) {
        files.extend(crate::plot::write(&fig.1, dir, &fig.0, false)?);
    }
    Ok(files)
}

/// The bands of each setting's last round (its T): the rows of `final.csv` and of the report.
pub(crate) fn final_bands<'a>(plan: &Plan, bands: &'a [BandRow]) -> Vec<&'a BandRow> {
    bands
        .iter()
        .filter(|b| {
            plan.settings
                .iter()
                .any(|s| s.0 == b.epsilon && s.1 == b.round)
        })
        .collect()
}

/// The CSVs of [`write`]: `curves.csv`, `bands.csv`, `final.csv`, `privacy.csv`.
pub fn write_tables(
    plan: &Plan,
    rows: &[CurveRow],
    bands: &[BandRow],
    privacy: &[PrivacyRow],
    dir: &Path,
) -> dpfl::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|source| dpfl::Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files = Vec::new();
    let curves = csv_string(
        &CURVES_COLUMNS,
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
    let mut header = vec![
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
    header.extend(RunPrivacy::CSV_HEADER);
    let band_row = |b: &BandRow| {
        let cert = privacy_of(privacy, b.epsilon, &b.algorithm)
            .map_or_else(|| vec![String::new(); 3], RunPrivacy::csv_cells);
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
        .into_iter()
        .chain(cert)
        .collect::<Vec<String>>()
    };
    let p = dir.join("bands.csv");
    atomic_write(
        &p,
        csv_string(&header, bands.iter().map(band_row))?.as_bytes(),
    )?;
    files.push(p);
    let last = final_bands(plan, bands);
    let p = dir.join("final.csv");
    atomic_write(
        &p,
        csv_string(&header, last.into_iter().map(band_row))?.as_bytes(),
    )?;
    files.push(p);
    let p = dir.join("privacy.csv");
    let table: Vec<(String, String, &RunPrivacy)> = privacy
        .iter()
        .map(|r| {
            (
                format!("eps = {}", r.epsilon),
                r.algorithm.clone(),
                &r.privacy,
            )
        })
        .collect();
    atomic_write(&p, super::privacy::privacy_csv(&table)?.as_bytes())?;
    files.push(p);
    Ok(files)
}

fn metric(accuracy: bool, b: &BandRow) -> (f64, f64) {
    if accuracy {
        (b.test_accuracy_mean, b.test_accuracy_std)
    } else {
        (b.utility_mean, b.utility_std)
    }
}

/// One figure per ε that has rows, as (file stem, figure): utility (a9a; log axis), or test
/// accuracy and utility (MNIST, the paper's two rows), against rounds and against uplink bits
/// (see [`crate::plot`]). A partial reproduction (checkpointed, interrupted) plots what it has;
/// the title gives the largest seed count of the figure's bands.
pub fn figures(plan: &Plan, bands: &[BandRow], privacy: &[PrivacyRow]) -> Vec<(String, Figure)> {
    let utility = "utility (running mean of ||grad f||^2)";
    plan.settings
        .iter()
        .filter_map(|&(eps, _, _)| {
            let sel: Vec<&BandRow> = bands.iter().filter(|b| b.epsilon == eps).collect();
            let seeds = sel.iter().map(|b| b.seeds).max()?;
            let panel = |by_bits: bool, accuracy: bool| {
                let ylab = if accuracy { "test accuracy" } else { utility };
                let x = |b: &BandRow| {
                    if by_bits {
                        b.uplink_bits_64
                    } else {
                        b.round as f64
                    }
                };
                let mut p = Panel::new(
                    format!("{} labelled eps = {eps}", plan.id),
                    if by_bits {
                        "uplink bits (64 per float)"
                    } else {
                        "round"
                    },
                    ylab,
                );
                p.spread = Spread::Band;
                p.log_y = !accuracy;
                p.y_nonnegative = true;
                // Bits axis cut at 1.1x the smallest final bit count (the notebooks'
                // truncation).
                if by_bits {
                    p.x_max = Some(
                        ALGORITHMS
                            .iter()
                            .filter_map(|a| {
                                sel.iter()
                                    .filter(|b| b.algorithm == *a)
                                    .map(|b| x(b))
                                    .reduce(f64::max)
                            })
                            .fold(f64::INFINITY, f64::min)
                            * 1.1,
                    )
                    .filter(|m| m.is_finite());
                }
                p.series = ALGORITHMS
                    .iter()
                    .map(|a| Series {
                        label: match privacy_of(privacy, eps, a) {
                            Some(c) => format!("{a} ({})", c.legend()),
                            None => a.to_string(),
                        },
                        points: sel
                            .iter()
                            .filter(|b| b.algorithm == *a)
                            .map(|b| {
                                let (m, s) = metric(accuracy, b);
                                Point {
                                    x: x(b),
                                    y: m,
                                    spread: Some((m - s, m + s)),
                                }
                            })
                            .collect(),
                    })
                    .collect();
                p
            };
            // The label is the paper preset's; the legends carry what each algorithm's
            // noise certifies (module `privacy`).
            let met = ALGORITHMS
                .iter()
                .all(|a| privacy_of(privacy, eps, a).is_some_and(RunPrivacy::meets_label));
            let label = if plan.calibration == NoiseCalibration::None {
                format!("non-private; the ε = {eps} setting's T, b and η")
            } else if met {
                format!("ε = {eps}")
            } else {
                format!(
                    "labelled ε = {eps} (paper preset; certified ε per algorithm in the legend)"
                )
            };
            let title = format!(
                "{}{} ({label}, mean ± 1 sd over seeds) — {}",
                plan.id,
                plan.variant().map_or(String::new(), |v| format!(" [{v}]")),
                crate::plot::setting_title(plan.silos, &[], Some(plan.delta), seeds)
            );
            let panels = match plan.experiment {
                Experiment::A9a => vec![panel(false, false), panel(true, false)],
                Experiment::Mnist => vec![
                    panel(false, true),
                    panel(true, true),
                    panel(false, false),
                    panel(true, false),
                ],
            };
            let panel_width = if panels.len() > 2 { 480 } else { 640 };
            Some((
                format!("{}-eps{eps}", plan.id),
                Figure {
                    title: Some(title),
                    panels,
                    panel_width,
                    height: 480,
                },
            ))
        })
        .collect()
}

/// The rows of a finished reproduction's `curves.csv` (written by [`write`] with Rust's
/// shortest round-trip float formatting, so every value reads back bit for bit): what
/// `dpfl reproduce soteria-* --rewrite` rebuilds the other outputs from without training.
pub fn read_curves(path: &Path) -> dpfl::Result<Vec<CurveRow>> {
    let text = std::fs::read_to_string(path).map_err(|source| dpfl::Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let bad = |line: usize, what: &str| {
        dpfl::Error::data(format!("{} line {line}", path.display()), what.to_string())
    };
    let header: Vec<String> = r
        .headers()
        .map_err(|e| bad(1, &e.to_string()))?
        .iter()
        .map(str::to_string)
        .collect();
    let want = CURVES_COLUMNS;
    if header != want {
        return Err(bad(1, &format!("header {header:?}, expected {want:?}")));
    }
    let mut rows = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let line = i + 2;
        let rec = rec.map_err(|e| bad(line, &e.to_string()))?;
        let f = |c: usize| -> dpfl::Result<f64> {
            rec.get(c)
                .and_then(|v| v.parse::<f64>().ok())
                .ok_or_else(|| bad(line, &format!("column {} is not a number", want[c])))
        };
        let u = |c: usize| -> dpfl::Result<u64> {
            rec.get(c)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| bad(line, &format!("column {} is not an integer", want[c])))
        };
        rows.push(CurveRow {
            epsilon: f(0)?,
            algorithm: rec.get(1).unwrap_or_default().to_string(),
            seed: u(2)? as usize,
            round: u(3)? as usize,
            train_loss: f(4)?,
            test_accuracy: f(5)?,
            grad_norm_sq: f(6)?,
            utility: f(7)?,
            uplink_bits: u(8)?,
            uplink_bits_64: u(9)?,
            grad_evals: u(10)?,
        });
    }
    Ok(rows)
}
