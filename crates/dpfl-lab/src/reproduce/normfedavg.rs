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
//! The jobs (one per algorithm and seed), the run of one and the checkpoint are
//! [`super::normfedavg_repro`]'s.
//!
//! `--quick`: 10 silos × 5 shards of a seeded 3,000-row subset, 5 per round, 3 rounds, E = 2,
//! B = 32, 1 seed, 1,000 test rows — a smoke test of the whole pipeline, not a result.

use std::path::{Path, PathBuf};

use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

use super::privacy::RunPrivacy;
use dpfl::algo::context::BuildContext;
use dpfl::algo::context::SiloCalibration;
use dpfl::algo::half::{FederationInfo, SiloInfo};
use dpfl::algo::normfedavg::{
    BetaSchedule, BudgetSpec, NormFedAvgSpec, QuantPrivacy, SensitivitySpec, TdlCalibration,
    Variant, plan as wing_plan,
};
use dpfl::data::registry::{DataDirs, KnownDataset, Part};
use dpfl::data::{Dataset, SiloData};
use dpfl::model::{Activation, DeepMlp, GradientOracle, Model, Precision, Projection};
use dpfl::units::SiloId;

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

fn algorithms(id: &str) -> dpfl::Result<Vec<(String, NormFedAvgSpec)>> {
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
            return Err(dpfl::Error::config(
                "id",
                format!("unknown reproduction {other:?}; known: {}", IDS.join(", ")),
            ));
        }
    })
}

/// The plan of reproduction `id`, full or `--quick`.
pub fn plan(id: &str, quick: bool) -> dpfl::Result<Plan> {
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
    pub fn fingerprint(&self) -> dpfl::Result<String> {
        let mut p = self.clone();
        p.seeds.clear();
        super::checkpoint_file::fingerprint(&p)
    }
}

/// Fashion-MNIST's training and test sets from `--data-dir`, `$DPFL_DATA` or `data/`.
pub fn load_fmnist(data_dir: Option<&Path>) -> dpfl::Result<(Dataset, Dataset)> {
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
    /// Per algorithm, what its label delivers ([`privacy_of_run`]).
    pub privacy: Vec<(String, RunPrivacy)>,
    /// Seconds of the whole reproduction.
    pub wall_seconds: f64,
}

/// `rows` rows of `data` drawn with `seed` (all of them when `None`).
pub(crate) fn subset(data: &Dataset, rows: Option<usize>, seed: u64) -> dpfl::Result<Dataset> {
    let Some(k) = rows.filter(|&k| k < data.len()) else {
        return Ok(data.subset(&(0..data.len()).collect::<Vec<_>>()));
    };
    let mut rng = DpRng::from_seed(seed, Purpose::Data, 1);
    let mut idx = Vec::new();
    dpfl_privacy::sampler::choose_subset(&mut rng, data.len(), k, &mut idx)?;
    idx.sort_unstable();
    Ok(data.subset(&idx))
}

/// One seed's federation: the label shards, the network and the public facts.
pub(crate) struct Seeded {
    pub(crate) silos: Vec<SiloData>,
    pub(crate) net: DeepMlp,
    pub(crate) d: usize,
    pub(crate) ctx: BuildContext,
}

/// Seed `seed`'s label shards of `train`, its network and the public facts.
pub(crate) fn seeded(
    plan: &Plan,
    train: &Dataset,
    classes: usize,
    seed: u64,
) -> dpfl::Result<Seeded> {
    let mut rng = DpRng::from_seed(seed, Purpose::Data, 0);
    let parts = dpfl::data::shards::label_shards(train, plan.silos, plan.per_silo, &mut rng)?;
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
    Ok(Seeded { silos, net, d, ctx })
}

/// (label, label kind, the run's δ) of an algorithm's budget. The run's δ is twice the sum of
/// the R per-round δ's the calibration targets — 2Rδ₀ for a per-round budget (the paper
/// states no δ for the whole run), 2δ for a total one (Theorem 2's calibration spends δ/K a
/// round) — so that the accountants have room beyond the δ's the events already spend.
fn label_of(plan: &Plan, spec: &NormFedAvgSpec) -> Option<(f64, &'static str, f64)> {
    let p = spec
        .privacy
        .as_ref()
        .filter(|_| spec.variant.is_private())?;
    Some(match (p.budget, p.calibration) {
        (BudgetSpec::PerRound { epsilon, delta }, TdlCalibration::Corrected) => (
            epsilon,
            "paper: per round",
            2.0 * plan.rounds as f64 * delta,
        ),
        (BudgetSpec::PerRound { epsilon, delta }, TdlCalibration::PaperClaim) => (
            epsilon,
            "paper's claim: per round",
            2.0 * plan.rounds as f64 * delta,
        ),
        (BudgetSpec::Total { epsilon, delta }, TdlCalibration::Corrected) => {
            (epsilon, "paper: whole run", 2.0 * delta)
        }
        (BudgetSpec::Total { epsilon, delta }, TdlCalibration::PaperClaim) => {
            (epsilon, "paper's claim: whole run", 2.0 * delta)
        }
    })
}

/// What an algorithm's label delivers: the account of R rounds of each silo's round event
/// (the plan's run event: the most a silo's ledger lets it release — dpfl takes no
/// amplification by client sampling, `dpfl_privacy::qtdl::accounting` — so a silo that
/// answered fewer rounds is covered), at the run's δ ([`label_of`]).
pub fn privacy_of_run(
    plan: &Plan,
    spec: &NormFedAvgSpec,
    calibration: &[SiloCalibration],
) -> RunPrivacy {
    let Some((label, kind, delta)) = label_of(plan, spec) else {
        return RunPrivacy::non_private();
    };
    let events = dpfl::algo::context::run_events(calibration);
    RunPrivacy::account(Some(label), kind, delta, &events)
}

/// The privacy row of an algorithm that could not be built (`why`).
pub(crate) fn not_run_privacy(plan: &Plan, spec: &NormFedAvgSpec, why: &str) -> RunPrivacy {
    match label_of(plan, spec) {
        Some((label, kind, delta)) => {
            RunPrivacy::uncertified(Some(label), kind, delta, format!("not run: {why}"))
        }
        None => RunPrivacy::non_private(),
    }
}

/// Every algorithm's [`privacy_of_run`] from the plan alone (seed `plan.seeds[0]`'s shards;
/// no training): what `--rewrite` adds to a finished reproduction.
pub fn plan_privacy(plan: &Plan, train: &Dataset) -> dpfl::Result<Vec<(String, RunPrivacy)>> {
    let train = subset(train, plan.train_rows, 0)?;
    let classes = train.target().num_classes().unwrap_or(0);
    let seed = plan.seeds.first().copied().unwrap_or(1);
    let ctx = seeded(plan, &train, classes, seed)?.ctx;
    Ok(plan
        .algorithms
        .iter()
        .map(|(label, spec)| {
            let p = match wing_plan(&ctx, spec) {
                Ok((_, calibration)) => privacy_of_run(plan, spec, &calibration),
                Err(e) => not_run_privacy(plan, spec, &e.to_string()),
            };
            (label.clone(), p)
        })
        .collect())
}

/// The summary columns that training produced, before the privacy columns
/// ([`RunPrivacy::label_cells`]).
const SUMMARY_COLUMNS: [&str; 7] = [
    "algorithm",
    "bits_per_coordinate",
    "test_error_pct_mean",
    "test_error_pct_std",
    "seeds",
    "rounds",
    "status",
];

fn privacy_cells(privacy: &[(String, RunPrivacy)], algorithm: &str) -> Vec<String> {
    match privacy.iter().find(|(a, _)| a == algorithm) {
        Some((_, p)) => p.label_cells(),
        None => vec![String::new(); 6],
    }
}

/// `summary.csv` from its training cells (one row per algorithm, [`SUMMARY_COLUMNS`]) and
/// the privacy columns.
fn summary_csv(
    rows: impl IntoIterator<Item = Vec<String>>,
    privacy: &[(String, RunPrivacy)],
) -> dpfl::Result<String> {
    let header: Vec<&str> = SUMMARY_COLUMNS
        .into_iter()
        .chain(RunPrivacy::LABEL_HEADER)
        .chain(RunPrivacy::CSV_HEADER)
        .collect();
    crate::output::csv_string(
        &header,
        rows.into_iter().map(|mut r| {
            let extra = privacy_cells(privacy, &r[0]);
            r.extend(extra);
            r
        }),
    )
}

fn privacy_file(privacy: &[(String, RunPrivacy)], dir: &Path) -> dpfl::Result<PathBuf> {
    let rows: Vec<(String, String, &RunPrivacy)> = privacy
        .iter()
        .map(|(a, p)| (String::new(), a.clone(), p))
        .collect();
    let path = dir.join("privacy.csv");
    crate::output::atomic_write(&path, super::privacy::privacy_csv(&rows)?.as_bytes())?;
    Ok(path)
}

/// `--rewrite`: adds the privacy columns to the finished reproduction in `dir` without
/// training. `summary.csv`'s training columns are read back and written unchanged,
/// `rounds.csv` and `calibration.csv` are not touched; `privacy.csv` and the figure are
/// written again (the figure from `rounds.csv`, whose floats read back bit for bit).
pub fn rewrite(plan: &Plan, train: &Dataset, dir: &Path) -> dpfl::Result<Vec<PathBuf>> {
    let privacy = plan_privacy(plan, train)?;
    let path = dir.join("summary.csv");
    let old = read_csv(&path)?;
    if old.0.len() < SUMMARY_COLUMNS.len() || old.0[..SUMMARY_COLUMNS.len()] != SUMMARY_COLUMNS {
        return Err(dpfl::Error::data(
            path.display().to_string(),
            format!("header {:?} does not start with {SUMMARY_COLUMNS:?}", old.0),
        ));
    }
    let rows = old
        .1
        .into_iter()
        .map(|r| r[..SUMMARY_COLUMNS.len()].to_vec());
    crate::output::atomic_write(&path, summary_csv(rows, &privacy)?.as_bytes())?;
    let mut files = vec![path, privacy_file(&privacy, dir)?];
    let rounds = read_rounds(&dir.join("rounds.csv"))?;
    files.extend(super::normfedavg_plot::write_figure(
        &plan.id, &rounds, &privacy, dir,
    )?);
    Ok(files)
}

/// (header, rows) of a CSV file, every row as long as the header.
fn read_csv(path: &Path) -> dpfl::Result<(Vec<String>, Vec<Vec<String>>)> {
    let text = std::fs::read_to_string(path).map_err(|source| dpfl::Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let bad =
        |line: usize, e: String| dpfl::Error::data(format!("{} line {line}", path.display()), e);
    let header: Vec<String> = r
        .headers()
        .map_err(|e| bad(1, e.to_string()))?
        .iter()
        .map(str::to_string)
        .collect();
    let mut rows = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let rec = rec.map_err(|e| bad(i + 2, e.to_string()))?;
        rows.push(rec.iter().map(str::to_string).collect());
    }
    Ok((header, rows))
}

/// `rounds.csv`'s columns.
const ROUNDS_COLUMNS: [&str; 6] = [
    "algorithm",
    "seed",
    "round",
    "train_loss",
    "test_error",
    "bits_per_silo",
];

/// The rows of `rounds.csv` (written with shortest round-trip floats: read back exactly).
fn read_rounds(path: &Path) -> dpfl::Result<Vec<RoundRow>> {
    let (header, rows) = read_csv(path)?;
    let want = ROUNDS_COLUMNS;
    if header != want {
        return Err(dpfl::Error::data(
            path.display().to_string(),
            format!("header {header:?}, expected {want:?}"),
        ));
    }
    rows.into_iter()
        .enumerate()
        .map(|(i, r)| {
            let bad = |c: usize| {
                dpfl::Error::data(
                    format!("{} line {}", path.display(), i + 2),
                    format!("column {} is not a number", want[c]),
                )
            };
            let f = |c: usize| r[c].parse::<f64>().map_err(|_| bad(c));
            Ok(RoundRow {
                algorithm: r[0].clone(),
                seed: r[1].parse().map_err(|_| bad(1))?,
                round: r[2].parse().map_err(|_| bad(2))?,
                train_loss: f(3)?,
                test_error: f(4)?,
                bits_per_silo: f(5)?,
            })
        })
        .collect()
}

/// Writes `summary.csv`, `rounds.csv`, `calibration.csv` and the figure `<id>.svg` and `.png` into
/// `dir`.
pub fn write_outputs(outcome: &Outcome, dir: &Path) -> dpfl::Result<Vec<PathBuf>> {
    let mut files = write_tables(outcome, dir)?;
    files.extend(super::normfedavg_plot::write_figure(
        &outcome.id,
        &outcome.rounds,
        &outcome.privacy,
        dir,
    )?);
    Ok(files)
}

/// The CSVs of [`write_outputs`]: `summary.csv`, `rounds.csv`, `calibration.csv`,
/// `privacy.csv`.
pub fn write_tables(outcome: &Outcome, dir: &Path) -> dpfl::Result<Vec<PathBuf>> {
    // NaN (every seed diverged) is written as an empty cell.
    let pct = |v: f64| {
        if v.is_finite() {
            format!("{:.2}", 100.0 * v)
        } else {
            String::new()
        }
    };
    let summary = summary_csv(
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
        &outcome.privacy,
    )?;
    let rounds = crate::output::csv_string(
        &ROUNDS_COLUMNS,
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
    files.push(privacy_file(&outcome.privacy, dir)?);
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
