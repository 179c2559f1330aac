//! The DP-NormFedAvg wing from outside: its config kind, and the `--quick` reproductions on
//! Fashion-MNIST, run only when `DPFL_DATA` names a directory with `fashion-mnist/` (as the
//! lowy-mnist quick reproduction; about 100 s of the test profile on a loaded 2-core machine).

use dpfl::algo::AlgorithmSpec;
use dpfl::data::registry::{KnownDataset, Part};
use std::sync::atomic::{AtomicUsize, Ordering};

use dpfl_lab::reproduce::normfedavg_repro::{self, NormFedAvgRepro};
use dpfl_lab::reproduce::{normfedavg, reproduction};

#[test]
fn the_config_kind_is_registered() {
    let text = r#"
        kind = "norm-fed-avg"
        step_size = 0.01
        variant = { kind = "binomial" }
        [privacy]
        s = 4096
        sensitivity = { kind = "mu", mu = 0.1 }
        budget = { kind = "per-round", epsilon = 10.0, delta = 3e-6 }
    "#;
    let a: AlgorithmSpec = toml::from_str(text).unwrap();
    assert!(a.is_private());
    assert_eq!(a.default_label(), "Binomial (s = 4096)");
    assert_eq!(a.explicit_step_size(), Some(0.01));
    let AlgorithmSpec::NormFedAvg(spec) = a.with_step_size(0.05) else {
        panic!("not the normfedavg kind")
    };
    assert_eq!(spec.step_size, 0.05);
    let fedavg: AlgorithmSpec = toml::from_str(
        "kind = \"norm-fed-avg\"\nstep_size = 0.05\nvariant = { kind = \"fed-avg\" }",
    )
    .unwrap();
    assert!(!fedavg.is_private());
    assert_eq!(fedavg.default_label(), "FedAvg");
}

fn fmnist() -> Option<(dpfl::data::Dataset, dpfl::data::Dataset)> {
    if std::env::var_os("DPFL_DATA").is_none_or(|v| v.is_empty()) {
        eprintln!("note: DPFL_DATA not set; skipping the normfedavg quick reproductions");
        return None;
    }
    let dirs = dpfl::data::registry::DataDirs::from_parts(
        Some(dpfl_testkit::shared_datasets()?),
        None,
        None,
    );
    if dirs.load(KnownDataset::FashionMnist, Part::Test).is_err() {
        eprintln!("note: fashion-mnist not found; skipping");
        return None;
    }
    Some((
        dirs.load(KnownDataset::FashionMnist, Part::Train).unwrap(),
        dirs.load(KnownDataset::FashionMnist, Part::Test).unwrap(),
    ))
}

fn print_summary(out: &normfedavg::Outcome) {
    for r in &out.summary {
        eprintln!(
            "{}: t = {}, test error {:.2} % ({:.1} s)",
            r.algorithm,
            r.bits_per_coordinate,
            100.0 * r.mean,
            out.wall_seconds
        );
    }
    for (a, why) in &out.not_run {
        eprintln!("{a}: not run: {why}");
    }
    for (a, c) in &out.calibration {
        eprintln!("{a}: {c}");
    }
}

#[test]
fn quick_reproductions_run_and_report_bits_and_errors() {
    let Some((train, test)) = fmnist() else {
        return;
    };
    // Non-private: both algorithms run; dense f64 messages are 64 bits per coordinate.
    let plan = normfedavg::plan("normfedavg-fmnist-fedavg", true).unwrap();
    let out = normfedavg_repro::run(&plan, &train, &test).unwrap();
    assert_eq!(out.summary.len(), 2, "{:?}", out.not_run);
    for r in &out.summary {
        assert_eq!(r.bits_per_coordinate, 64.0);
        assert!(r.mean > 0.0 && r.mean < 0.95, "{}: {}", r.algorithm, r.mean);
    }
    assert_eq!(out.rounds.len(), 2 * plan.rounds);
    print_summary(&out);
    // Table 4's algorithms: t = 14 and 8 with Theorem 1's m (the paper's), 22 for s = 2^12
    // with the corrected m; the Binomial is sent with the centred width N/2.
    let plan = normfedavg::plan("normfedavg-fmnist-bits", true).unwrap();
    let out = normfedavg_repro::run(&plan, &train, &test).unwrap();
    let t = |label: &str| {
        out.summary
            .iter()
            .find(|r| r.algorithm == label)
            .unwrap_or_else(|| panic!("{label} missing: {:?}", out.not_run))
            .bits_per_coordinate
    };
    print_summary(&out);
    assert_eq!(t("QTDL s = 2^12 (paper's claim)"), 14.0);
    assert_eq!(t("QTDL s = 2^6 (paper's claim)"), 8.0);
    assert_eq!(t("QTDL s = 2^12 (corrected m)"), 22.0);
    assert!(t("Bin s = 2^12") >= 22.0);
    let dir = tempfile::tempdir().unwrap();
    let files = normfedavg::write_outputs(&out, dir.path()).unwrap();
    // summary.csv, rounds.csv, calibration.csv, privacy.csv (each run's certified ε next to
    // its label, issue 27) and the figure as SVG and PNG.
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 6, "{names:?}");
    assert!(names.iter().any(|n| n == "privacy.csv"), "{names:?}");
    assert!(names.iter().any(|n| n.ends_with(".png")), "{names:?}");
    let summary = std::fs::read_to_string(dir.path().join("summary.csv")).unwrap();
    assert!(
        summary.contains("QTDL s = 2^6 (paper's claim),8,"),
        "{summary}"
    );
}

#[test]
fn the_clipping_reproduction_reports_what_cannot_be_calibrated() {
    let Some((train, test)) = fmnist() else {
        return;
    };
    let plan = normfedavg::plan("normfedavg-fmnist-clipping", true).unwrap();
    let out = normfedavg_repro::run(&plan, &train, &test).unwrap();
    print_summary(&out);
    // Worst-case sensitivities: no corrected m below 2^40.
    assert_eq!(out.not_run.len(), 1, "{:?}", out.not_run);
    assert!(out.not_run[0].0.contains("corrected m"));
    assert_eq!(out.summary.len(), 3);
    // s = 2^29 with Theorem 1's m = 2s + 1: t = 32 ("full precision").
    assert!(out.summary.iter().all(|r| r.bits_per_coordinate == 32.0));
}

/// How many runs of `plan` the checkpoint in `dir` holds (opened with `--resume`).
fn finished_runs(
    plan: &normfedavg::Plan,
    train: &dpfl::data::Dataset,
    test: &dpfl::data::Dataset,
    dir: &std::path::Path,
) -> dpfl::Result<usize> {
    let r = NormFedAvgRepro::on(plan, train, test).unwrap();
    let c = reproduction::open_checkpoint(&r, dir, true)?;
    Ok(c.finished(&reproduction::Reproduction::jobs(&r)))
}

/// Resumes the finished checkpoint in `dir` (which must hold `finished` runs of `plan`),
/// failing if any round is run.
fn resume_running_nothing(
    plan: &normfedavg::Plan,
    train: &dpfl::data::Dataset,
    test: &dpfl::data::Dataset,
    dir: &std::path::Path,
    finished: usize,
) -> normfedavg::Outcome {
    assert_eq!(finished_runs(plan, train, test, dir).unwrap(), finished);
    normfedavg_repro::run_checkpointed(plan, train, test, dir, true, &|_, _, _| {
        panic!("nothing left to run")
    })
    .unwrap()
}

/// A reproduction stopped in the middle of a run (here: an error from the per-round hook
/// after round 1 of the third run, as a kill after that round's snapshot would leave it)
/// and resumed gives bit for bit the rows of an uninterrupted one, and redoes only what was
/// not saved; a finished checkpoint resumes without running anything.
#[test]
fn an_interrupted_reproduction_resumes_bit_for_bit() {
    let Some((train, test)) = fmnist() else {
        return;
    };
    let mut plan = normfedavg::plan("normfedavg-fmnist-bits", true).unwrap();
    // The corrected-m QTDL and the Binomial: both noise samplers and the quantizer.
    plan.algorithms = vec![plan.algorithms[0].clone(), plan.algorithms[4].clone()];
    plan.seeds = vec![1, 2];
    let reference = normfedavg_repro::run(&plan, &train, &test).unwrap();
    assert_eq!(reference.rounds.len(), 2 * 2 * 3);
    let dir = tempfile::tempdir().unwrap();
    let done = AtomicUsize::new(0);
    let stopped =
        normfedavg_repro::run_checkpointed(&plan, &train, &test, dir.path(), false, &|_, _, _| {
            if done.fetch_add(1, Ordering::Relaxed) + 1 == 4 {
                return Err(dpfl::Error::config("test", "interrupted"));
            }
            Ok(())
        });
    assert!(stopped.is_err());
    let again =
        normfedavg_repro::run_checkpointed(&plan, &train, &test, dir.path(), false, &|_, _, _| {
            Ok(())
        });
    assert!(again.is_err(), "needs --resume");
    assert_eq!(finished_runs(&plan, &train, &test, dir.path()).unwrap(), 1);
    let rest = AtomicUsize::new(0);
    let resumed =
        normfedavg_repro::run_checkpointed(&plan, &train, &test, dir.path(), true, &|_, _, _| {
            rest.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
    assert_eq!(
        rest.into_inner(),
        12 - 4,
        "only the rounds not saved are run"
    );
    let bits = |o: &normfedavg::Outcome| -> Vec<(String, u64, usize, u64, u64, u64)> {
        o.rounds
            .iter()
            .map(|r| {
                (
                    r.algorithm.clone(),
                    r.seed,
                    r.round,
                    r.train_loss.to_bits(),
                    r.test_error.to_bits(),
                    r.bits_per_silo.to_bits(),
                )
            })
            .collect()
    };
    assert_eq!(bits(&resumed), bits(&reference));
    assert_eq!(resumed.summary, reference.summary);
    // Everything finished: a resume runs nothing; another plan is refused.
    let again = resume_running_nothing(&plan, &train, &test, dir.path(), 4);
    assert_eq!(bits(&again), bits(&reference));
    plan.rounds = 4;
    assert!(finished_runs(&plan, &train, &test, dir.path()).is_err());
}

/// A run whose training diverges (non-finite local update: here a step size of 1e300) is a
/// result, not a failure: it is recorded with the reason, the reproduction goes on with the
/// next runs, the table says which seeds diverged, and a resume restores it without rerunning.
#[test]
fn a_diverged_run_is_recorded_and_the_reproduction_goes_on() {
    let Some((train, test)) = fmnist() else {
        return;
    };
    let mut plan = normfedavg::plan("normfedavg-fmnist-bits", true).unwrap();
    let mut wild = plan.algorithms[0].1.clone();
    wild.step_size = 1e300;
    plan.algorithms = vec![("wild".to_string(), wild), plan.algorithms[4].clone()];
    plan.seeds = vec![1, 2];
    let dir = tempfile::tempdir().unwrap();
    let out =
        normfedavg_repro::run_checkpointed(&plan, &train, &test, dir.path(), false, &|_, _, _| {
            Ok(())
        })
        .unwrap();
    let wild = &out.summary[0];
    assert_eq!((wild.algorithm.as_str(), wild.seeds), ("wild", 0));
    assert!(wild.mean.is_nan() && wild.std.is_nan());
    assert_eq!(wild.diverged.len(), 2, "{:?}", wild.diverged);
    for (why, seed) in wild.diverged.iter().zip([1, 2]) {
        assert!(
            why.starts_with(&format!(
                "seed {seed}: diverged in round 1 of 3 (rows end at round 0): "
            )),
            "{why}"
        );
        assert!(why.contains("not finite"), "{why}");
    }
    // The other algorithm ran both seeds in full after the diverged runs.
    let bin = &out.summary[1];
    assert_eq!((bin.seeds, bin.diverged.len()), (2, 0));
    assert!(bin.mean > 0.0 && bin.mean < 1.0);
    assert_eq!(
        out.rounds.len(),
        2 * plan.rounds,
        "no rows for the diverged runs"
    );
    normfedavg::write_outputs(&out, dir.path()).unwrap();
    let summary = std::fs::read_to_string(dir.path().join("summary.csv")).unwrap();
    assert!(
        summary.contains("wild,,,,0,3,\"2 of 2 seeds diverged: seed 1: diverged in round 1 of 3"),
        "{summary}"
    );
    // The diverged runs are in the checkpoint: a resume reruns nothing and gives the same table.
    let again = resume_running_nothing(&plan, &train, &test, dir.path(), 4);
    assert_eq!(again.summary[0].diverged, wild.diverged);
    assert_eq!(again.summary[1], *bin);
}

/// The wall time of one full-scale round (50 silos, 25 answering, E = 20, B = 256, the
/// 328,810-parameter network, QTDL s = 2^12 corrected), to estimate a full reproduction:
/// `DPFL_DATA=… cargo test -p dpfl-lab --test it normfedavg:: -- --ignored --nocapture`.
#[test]
#[ignore]
fn full_scale_round_time() {
    let Some((train, test)) = fmnist() else {
        return;
    };
    let mut plan = normfedavg::plan("normfedavg-fmnist-bits", false).unwrap();
    plan.rounds = 1;
    plan.seeds = vec![1];
    plan.loss_rows = 1000;
    plan.test_rows = Some(1000);
    plan.algorithms.truncate(1);
    let out = normfedavg_repro::run(&plan, &train, &test).unwrap();
    eprintln!(
        "one full-scale round of {}: {:.1} s (t = {})",
        plan.algorithms[0].0, out.wall_seconds, out.summary[0].bits_per_coordinate
    );
}
