//! DP-NormFedAvg's Fashion-MNIST reproductions (Das et al. §6, App. G/H; digest §5):
//! `normfedavg-fmnist-bits` (Table 4 / Fig. 3: QTDL s = 2^12, 2^6 against Binomial s = 2^12 at
//! per-round ε = 10, μ = 0.1), `normfedavg-fmnist-clipping` (Table 3 / Fig. 2: DP-NormFedAvg
//! against clipping C = 0.5, 1 at total (0.1, 1e−9), worst-case sensitivities) and
//! `normfedavg-fmnist-fedavg` (Table 6 / Fig. 5: NormFedAvg against FedAvg, non-private).
//!
//! Setting: 50 silos × 5 label shards (`data::shards`), r = 25 per round without replacement,
//! the 784 → 300 → 300 → 10 ReLU network, E = 20, B = 256, momentum 0.9, weight decay 1e−4,
//! η_k = 0.99^k η₀ and the paper's β_k; K = 400 rounds (not stated in the paper; its β phases
//! end at 300–350, digest §6.2 item 2); 3 seeds; the table's number is the test error averaged
//! over the last 5 evaluated rounds, mean ± std over seeds.
//!
//! Privacy labels: QTDL rows are run twice where it matters — with dpfl's corrected m (the
//! default: a true per-round δ of 1e−9) and with Theorem 1's m labelled "paper's claim" (its
//! δ is ≈ 1: no guarantee). The worst-case sensitivities of the clipping experiment have no
//! affordable corrected m (> 2^40); those rows are listed as not run, with the reason.
//! Experiment (ii)'s "full precision (32 bits)" is read as s = 2^29 (t = 32 with m = 2s + 1).
//!
//! `--quick`: 10 silos × 5 shards of a seeded 3,000-row subset, 5 per round, 3 rounds, E = 2,
//! B = 32, 1 seed, 1,000 test rows — a smoke test of the whole pipeline, not a result.

use std::path::{Path, PathBuf};

use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

use super::normfedavg_checkpoint::{InFlight, NormFedAvgCheckpoint, RunRows};
use crate::algo::context::BuildContext;
use crate::algo::half::{FederationInfo, SiloInfo};
use crate::algo::normfedavg::{
    BetaSchedule, BudgetSpec, NormFedAvgSpec, QuantPrivacy, SensitivitySpec, TdlCalibration,
    Variant, plan as wing_plan,
};
use crate::data::registry::{DataDirs, KnownDataset, Part};
use crate::data::{Dataset, SiloData};
use crate::model::{Activation, DeepMlp, GradientOracle, Model, Precision, Projection};
use crate::sim::{Participation, Simulator};
use crate::units::SiloId;

/// The reproduction ids this module runs (Das et al. Figs. 2, 3, 5).
pub const IDS: [&str; 3] = [
    "normfedavg-fmnist-bits",
    "normfedavg-fmnist-clipping",
    "normfedavg-fmnist-fedavg",
];

/// One reproduction: its federation, schedule and algorithms.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Plan {
    /// The reproduction's id (one of [`IDS`]).
    pub id: String,
    /// R, rounds per run.
    pub rounds: usize,
    /// N, the silos.
    pub silos: usize,
    /// Label shards per silo (the paper's non-i.i.d. split).
    pub per_silo: usize,
    /// M, the silos sampled each round.
    pub participants: usize,
    /// One run per seed; the figure shows their mean.
    pub seeds: Vec<u64>,
    /// The deep MLP's hidden widths (784 → 300 → 300 → 10 in the paper).
    pub hidden: Vec<usize>,
    /// The network's arithmetic (f32 by default; part of the checkpoint's fingerprint, so a
    /// run is never continued in another arithmetic).
    pub precision: Precision,
    /// Rows of the training / test set used (all when `None`).
    pub train_rows: Option<usize>,
    /// Rows of the test set used (all when `None`).
    pub test_rows: Option<usize>,
    /// Rows of the pooled training data the train loss is evaluated on.
    pub loss_rows: usize,
    /// (label, spec) of each algorithm compared.
    pub algorithms: Vec<(String, NormFedAvgSpec)>,
}

fn piecewise(from: &[u32], values: &[f64]) -> BetaSchedule {
    BetaSchedule::Piecewise {
        from: from.to_vec(),
        values: values.to_vec(),
    }
}

fn private(variant: Variant, eta0: f64, beta: BetaSchedule, p: QuantPrivacy) -> NormFedAvgSpec {
    NormFedAvgSpec {
        privacy: Some(p),
        ..NormFedAvgSpec::new(variant, eta0, beta)
    }
}

fn algorithms(id: &str) -> crate::Result<Vec<(String, NormFedAvgSpec)>> {
    let per_round = |s, calibration, delta| QuantPrivacy {
        s,
        sensitivity: SensitivitySpec::Mu { mu: 0.1 },
        budget: BudgetSpec::PerRound {
            epsilon: 10.0,
            delta,
        },
        calibration,
    };
    let total = |calibration| QuantPrivacy {
        s: 1 << 29,
        sensitivity: SensitivitySpec::WorstCase,
        budget: BudgetSpec::Total {
            epsilon: 0.1,
            delta: 1e-9,
        },
        calibration,
    };
    let (c, p) = (TdlCalibration::Corrected, TdlCalibration::PaperClaim);
    let qtdl_beta = || piecewise(&[0, 100], &[0.1, 0.05]);
    Ok(match id {
        "normfedavg-fmnist-bits" => {
            let mut v = Vec::new();
            for s in [1u64 << 12, 1 << 6] {
                for (cal, tag) in [(c, "corrected m"), (p, "paper's claim")] {
                    v.push((
                        format!("QTDL s = 2^{} ({tag})", s.trailing_zeros()),
                        private(
                            Variant::DpNormFedAvg,
                            0.01,
                            qtdl_beta(),
                            per_round(s, cal, 1e-9),
                        ),
                    ));
                }
            }
            v.push((
                "Bin s = 2^12".into(),
                private(
                    Variant::Binomial,
                    0.01,
                    piecewise(&[0, 100], &[0.1, 0.01]),
                    per_round(1 << 12, c, 3e-6),
                ),
            ));
            v
        }
        "normfedavg-fmnist-clipping" => {
            let nf = piecewise(&[0, 100], &[0.02, 0.01]);
            let mut v = Vec::new();
            for (cal, tag) in [(c, "corrected m"), (p, "paper's claim")] {
                v.push((
                    format!("DP-NormFedAvg ({tag})"),
                    private(Variant::DpNormFedAvg, 0.005, nf.clone(), total(cal)),
                ));
            }
            for (clip, values) in [
                (0.5, [0.04, 0.02, 0.01, 0.004]),
                (1.0, [0.02, 0.01, 0.005, 0.002]),
            ] {
                v.push((
                    format!("Clipping C = {clip} (paper's claim)"),
                    private(
                        Variant::Clipping { clip },
                        0.005,
                        piecewise(&[0, 100, 200, 300], &values),
                        total(p),
                    ),
                ));
            }
            v
        }
        "normfedavg-fmnist-fedavg" => vec![
            (
                "NormFedAvg".into(),
                NormFedAvgSpec::new(
                    Variant::NormFedAvg,
                    0.05,
                    BetaSchedule::Proportional { factor: 50.0 },
                ),
            ),
            (
                "FedAvg".into(),
                NormFedAvgSpec::new(Variant::FedAvg, 0.05, BetaSchedule::default()),
            ),
        ],
        other => {
            return Err(crate::Error::config(
                "id",
                format!("unknown reproduction {other:?}; known: {}", IDS.join(", ")),
            ));
        }
    })
}

/// The plan of reproduction `id`, full or `--quick`.
pub fn plan(id: &str, quick: bool) -> crate::Result<Plan> {
    let mut algorithms = algorithms(id)?;
    if quick {
        for (_, a) in &mut algorithms {
            a.local_steps = 2;
            a.batch_size = 32;
        }
        return Ok(Plan {
            id: id.into(),
            rounds: 3,
            silos: 10,
            per_silo: 5,
            participants: 5,
            seeds: vec![1],
            hidden: vec![300, 300],
            precision: Precision::default(),
            train_rows: Some(3000),
            test_rows: Some(1000),
            loss_rows: 1000,
            algorithms,
        });
    }
    Ok(Plan {
        id: id.into(),
        rounds: 400,
        silos: 50,
        per_silo: 5,
        participants: 25,
        seeds: vec![1, 2, 3],
        hidden: vec![300, 300],
        precision: Precision::default(),
        train_rows: None,
        test_rows: None,
        loss_rows: 10_000,
        algorithms,
    })
}

impl Plan {
    /// The checkpoint's fingerprint: the plan without its seeds (so that more seeds can be
    /// added to a finished reproduction with `--trials N --resume`).
    pub fn fingerprint(&self) -> crate::Result<String> {
        let mut p = self.clone();
        p.seeds.clear();
        super::checkpoint_file::fingerprint(&p)
    }
}

/// Fashion-MNIST's training and test sets from `--data-dir`, `$DPFL_DATA` or `data/`.
pub fn load_fmnist(data_dir: Option<&Path>) -> crate::Result<(Dataset, Dataset)> {
    let dirs = DataDirs::new(data_dir);
    Ok((
        dirs.load(KnownDataset::FashionMnist, Part::Train)?,
        dirs.load(KnownDataset::FashionMnist, Part::Test)?,
    ))
}

pub use super::normfedavg_plot::RoundRow;

/// A table entry: mean ± std over seeds of the test error averaged over the last 5 rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    /// The algorithm's label.
    pub algorithm: String,
    /// Bits per coordinate of one message (64 for dense f64).
    pub bits_per_coordinate: f64,
    /// Mean over seeds of the test error averaged over the last 5 rounds.
    pub mean: f64,
    /// Its standard deviation over seeds.
    pub std: f64,
    /// The seeds it is over (those whose run completed).
    pub seeds: usize,
    /// The runs that diverged, one line each ("seed 1: diverged in round 49 of 400 …"); the mean
    /// and std are over the other seeds only (NaN when none is left).
    pub diverged: Vec<String>,
}

/// A finished DP-NormFedAvg reproduction: its curves, table and calibrations.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// The reproduction's id and the rounds each run ran (a reduced run says so here).
    pub id: String,
    /// The rounds each run ran (fewer than the plan's for a reduced run).
    pub rounds_run: usize,
    /// Every evaluated round of every algorithm and seed.
    pub rounds: Vec<RoundRow>,
    /// The table, one row per algorithm run.
    pub summary: Vec<SummaryRow>,
    /// Algorithms that could not be built, with why (e.g. no affordable corrected m).
    pub not_run: Vec<(String, String)>,
    /// Per algorithm, its calibration report (silo 0).
    pub calibration: Vec<(String, String)>,
    /// Seconds of the whole reproduction.
    pub wall_seconds: f64,
}

fn subset(data: &Dataset, rows: Option<usize>, seed: u64) -> crate::Result<Dataset> {
    let Some(k) = rows.filter(|&k| k < data.len()) else {
        return Ok(data.subset(&(0..data.len()).collect::<Vec<_>>()));
    };
    let mut rng = DpRng::from_seed(seed, Purpose::Data, 1);
    let mut idx = Vec::new();
    dpfl_privacy::sampler::choose_subset(&mut rng, data.len(), k, &mut idx)?;
    idx.sort_unstable();
    Ok(data.subset(&idx))
}

/// Runs every algorithm of `plan` for every seed on the given training and test sets.
pub fn run(plan: &Plan, train: &Dataset, test: &Dataset) -> crate::Result<Outcome> {
    run_checkpointed(plan, train, test, None, &mut |_, _, _| Ok(()))
}

/// [`run`] with a checkpoint: finished runs are taken from it, the run in flight continues
/// from its last saved round, and every round is saved (module `normfedavg_checkpoint`).
/// `after_round(algorithm, seed, rounds done)` is called after each round is saved (progress;
/// an error stops the reproduction there, as an interruption would).
pub fn run_checkpointed(
    plan: &Plan,
    train: &Dataset,
    test: &Dataset,
    checkpoint: Option<&NormFedAvgCheckpoint>,
    after_round: &mut dyn FnMut(&str, u64, usize) -> crate::Result<()>,
) -> crate::Result<Outcome> {
    let start = std::time::Instant::now();
    let train = subset(train, plan.train_rows, 0)?;
    let test = subset(test, plan.test_rows, 0)?;
    let loss_data = subset(&train, Some(plan.loss_rows), 2)?;
    let classes = train.target().num_classes().unwrap_or(0);
    let mut out = Outcome {
        id: plan.id.clone(),
        rounds_run: plan.rounds,
        ..Default::default()
    };
    for (label, spec) in &plan.algorithms {
        let mut finals = Vec::new();
        let mut diverged = Vec::new();
        let mut bits_per_coordinate = f64::NAN;
        for &seed in &plan.seeds {
            let mut rng = DpRng::from_seed(seed, Purpose::Data, 0);
            let parts =
                crate::data::shards::label_shards(&train, plan.silos, plan.per_silo, &mut rng)?;
            let silos: Vec<SiloData> = parts
                .into_iter()
                .map(|d| {
                    let test = d.subset(&[0]);
                    SiloData { train: d, test }
                })
                .collect();
            let model = DeepMlp::new(
                train.num_features(),
                &plan.hidden,
                classes,
                Activation::Relu,
                seed,
            )?
            .with_precision(plan.precision);
            let d = model.num_params();
            let net = model.clone();
            let model: std::sync::Arc<dyn Model> = std::sync::Arc::new(model);
            let ctx = BuildContext {
                federation: FederationInfo {
                    dim: d,
                    silos: plan.silos,
                    rounds: plan.rounds,
                    expected_participants: plan.participants as f64,
                },
                silos: silos
                    .iter()
                    .enumerate()
                    .map(|(i, s)| SiloInfo {
                        id: SiloId::new(i as u32),
                        records: s.train.len(),
                        budget: None,
                        fixed_noise: None,
                    })
                    .collect(),
                oracle: GradientOracle::new(model.clone(), None)?,
                lipschitz: 1.0,
                projection: Projection::None,
                init: model.initial_params(),
                noise: Default::default(),
            };
            let built = match wing_plan::build(&ctx, spec) {
                Ok(b) => b,
                Err(e) => {
                    out.not_run.push((label.clone(), e.to_string()));
                    break;
                }
            };
            if seed == plan.seeds[0] {
                out.calibration
                    .push((label.clone(), built.calibration[0].formula.clone()));
            }
            let run = match checkpoint.and_then(|c| c.get(label, seed)) {
                Some(run) => run,
                None => {
                    let participation = Participation::Fixed {
                        m: plan.participants,
                    };
                    let mut sim = Simulator::new(&silos, built, participation, Some(seed))?;
                    let mut run = RunRows {
                        rows: Vec::new(),
                        bits_per_coordinate: f64::NAN,
                        stopped: None,
                    };
                    if let Some(f) = checkpoint.map(|c| c.in_flight(label, seed)).transpose()? {
                        let f = f.filter(|f| f.done.rows.len() < plan.rounds);
                        if let Some(f) = f {
                            sim.restore(f.sim)?;
                            run = f.done;
                        }
                    }
                    let mut bits = run.rows.last().map_or(0.0, |r| r.bits_per_silo);
                    for k in run.rows.len()..plan.rounds {
                        // A diverged run is a result (the noise overwhelms the step size),
                        // not a fault: it is recorded with its rows so far and the
                        // reproduction goes on with the next run.
                        let report = match sim.step() {
                            Err(crate::Error::Diverged(why)) => {
                                run.stopped = Some(format!(
                                    "diverged in round {} of {} (rows end at round {k}): {why}",
                                    k + 1,
                                    plan.rounds
                                ));
                                if let Some(c) = checkpoint {
                                    c.record(label, seed, &run)?;
                                }
                                break;
                            }
                            r => r?,
                        };
                        if report.participants > 0 {
                            let per = report.message_bits as f64 / report.participants as f64;
                            bits += per;
                            run.bits_per_coordinate = per / d as f64;
                        }
                        let w = sim.output();
                        run.rows.push(RoundRow {
                            algorithm: label.clone(),
                            seed,
                            round: k + 1,
                            train_loss: net.evaluate(&w, &loss_data).0,
                            test_error: net.evaluate(&w, &test).1,
                            bits_per_silo: bits,
                        });
                        if let Some(c) = checkpoint {
                            if k + 1 < plan.rounds {
                                c.save(&InFlight {
                                    algorithm: label.clone(),
                                    seed,
                                    done: run.clone(),
                                    sim: sim.snapshot(),
                                })?;
                            } else {
                                c.record(label, seed, &run)?;
                            }
                        }
                        after_round(label, seed, k + 1)?;
                    }
                    run
                }
            };
            if run.bits_per_coordinate.is_finite() {
                bits_per_coordinate = run.bits_per_coordinate;
            }
            if let Some(why) = &run.stopped {
                diverged.push(format!("seed {seed}: {why}"));
            } else {
                let tail = &run.rows[run.rows.len().saturating_sub(5)..];
                finals.push(
                    tail.iter().map(|r| r.test_error).sum::<f64>() / tail.len().max(1) as f64,
                );
            }
            out.rounds.extend(run.rows);
        }
        if finals.len() + diverged.len() == plan.seeds.len() {
            let n = finals.len() as f64;
            let mean = finals.iter().sum::<f64>() / n;
            let var = finals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
            out.summary.push(SummaryRow {
                algorithm: label.clone(),
                bits_per_coordinate,
                mean,
                std: if finals.is_empty() {
                    f64::NAN
                } else {
                    var.sqrt()
                },
                seeds: finals.len(),
                diverged,
            });
        }
    }
    out.wall_seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

/// Writes `summary.csv`, `rounds.csv`, `calibration.csv` and the figure `<id>.svg` and `.png` into
/// `dir`.
pub fn write_outputs(outcome: &Outcome, dir: &Path) -> crate::Result<Vec<PathBuf>> {
    // NaN (every seed diverged) is written as an empty cell.
    let pct = |v: f64| {
        if v.is_finite() {
            format!("{:.2}", 100.0 * v)
        } else {
            String::new()
        }
    };
    let summary = crate::output::csv_string(
        &[
            "algorithm",
            "bits_per_coordinate",
            "test_error_pct_mean",
            "test_error_pct_std",
            "seeds",
            "rounds",
            "status",
        ],
        outcome
            .summary
            .iter()
            .map(|r| {
                vec![
                    r.algorithm.clone(),
                    if r.bits_per_coordinate.is_finite() {
                        format!("{}", r.bits_per_coordinate)
                    } else {
                        String::new() // no message was sent: every run diverged at round 1
                    },
                    pct(r.mean),
                    pct(r.std),
                    r.seeds.to_string(),
                    outcome.rounds_run.to_string(),
                    if r.diverged.is_empty() {
                        "run".into()
                    } else {
                        format!(
                            "{} of {} seeds diverged: {}",
                            r.diverged.len(),
                            r.seeds + r.diverged.len(),
                            r.diverged.join("; ")
                        )
                    },
                ]
            })
            .chain(outcome.not_run.iter().map(|(a, why)| {
                vec![
                    a.clone(),
                    String::new(),
                    String::new(),
                    String::new(),
                    "0".into(),
                    "0".into(),
                    format!("not run: {why}"),
                ]
            })),
    )?;
    let rounds = crate::output::csv_string(
        &[
            "algorithm",
            "seed",
            "round",
            "train_loss",
            "test_error",
            "bits_per_silo",
        ],
        outcome.rounds.iter().map(|r| {
            vec![
                r.algorithm.clone(),
                r.seed.to_string(),
                r.round.to_string(),
                format!("{}", r.train_loss),
                format!("{}", r.test_error),
                format!("{}", r.bits_per_silo),
            ]
        }),
    )?;
    let calibration = crate::output::csv_string(
        &["algorithm", "calibration"],
        outcome
            .calibration
            .iter()
            .map(|(a, f)| vec![a.clone(), f.clone()]),
    )?;
    let mut files = Vec::new();
    for (name, text) in [
        ("summary.csv", summary),
        ("rounds.csv", rounds),
        ("calibration.csv", calibration),
    ] {
        let path = dir.join(name);
        crate::output::atomic_write(&path, text.as_bytes())?;
        files.push(path);
    }
    files.extend(super::normfedavg_plot::write_figure(
        &outcome.id,
        &outcome.rounds,
        dir,
    )?);
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_carry_the_papers_settings() {
        let p = plan("normfedavg-fmnist-bits", false).unwrap();
        assert_eq!(
            (p.silos, p.per_silo, p.participants, p.rounds),
            (50, 5, 25, 400)
        );
        assert_eq!(p.algorithms.len(), 5);
        let (label, bin) = &p.algorithms[4];
        assert_eq!(label, "Bin s = 2^12");
        assert_eq!(bin.beta.at(150, 0.0), 0.01);
        let c = plan("normfedavg-fmnist-clipping", true).unwrap();
        assert_eq!(
            c.algorithms[2].1.beta.at(250, 0.0),
            0.01,
            "C = 0.5 in phase 3"
        );
        assert_eq!(c.algorithms[2].1.local_steps, 2, "quick");
        let f = plan("normfedavg-fmnist-fedavg", false).unwrap();
        assert_eq!(f.algorithms[0].1.beta.at(0, 0.05), 2.5, "beta_k = 50 eta_k");
        assert!(plan("normfedavg-cifar", false).is_err());
    }
}
