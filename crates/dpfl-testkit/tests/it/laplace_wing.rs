//! Issue 28 item 6, "prove the shape": the testkit's `laplace-mb-sgd` wing, defined outside
//! `dpfl` (`dpfl_testkit::laplace_mbsgd`), read from an experiment file, planned, run by the
//! simulator's one run loop (`Simulator::drive`) with every silo's ledger charged, and run in
//! a reproduction's grid over its knobs (`Wing::tuned`: η and K). The network runner is
//! `dpfl-net`'s `tests/it/laplace_wing.rs`.

use dpfl::algo::AlgorithmSpec;
use dpfl::algo::spec::WingPlan;
use dpfl::algo::wing::Wing;
use dpfl::run::{Finished, Ledgers, OnDiverged, RunOptions};
use dpfl::sim::{Participation, Simulator};
use dpfl_lab::experiment::{ExperimentSpec, prepare_trial, setup};
use dpfl_lab::reproduce::{self, ReproSpec};
use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::ledger::{Budget, Ledger};
use dpfl_privacy::rng::Purpose;
use dpfl_privacy::{Delta, DpRng, Neighbouring, PrivacyEvent};
use dpfl_testkit::laplace_mbsgd::{self, LaplaceMbSgdSpec, LaplacePlan};

const ROUNDS: usize = 10;

/// ε₀ = 0.5 per round: the Laplace event's noise multiplier b/Δ₁ = 1/ε₀ = 2.
fn round_event() -> PrivacyEvent {
    PrivacyEvent::Laplace {
        noise_multiplier: 2.0,
    }
}

/// A fresh directory under the system's temporary one.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "dpfl-laplace-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn registration_refuses_a_builtin_kind_and_reads_its_own() {
    laplace_mbsgd::register().unwrap();
    // Again: a no-op.
    laplace_mbsgd::register().unwrap();
    assert!(dpfl::algo::registry::registered().contains(&"laplace-mb-sgd"));

    /// A wing that tries to take a built-in kind.
    #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Squatter(LaplaceMbSgdSpec);
    impl dpfl::algo::checked::ParamGuard for Squatter {
        type Checked = <LaplaceMbSgdSpec as dpfl::algo::checked::ParamGuard>::Checked;
        fn check(&self) -> Result<Self::Checked, dpfl::algo::checked::ParamError> {
            self.0.check()
        }
    }
    impl Wing for Squatter {
        type Plan = LaplacePlan;
        fn label(&self) -> String {
            self.0.label()
        }
        fn privacy(&self) -> dpfl::algo::wing::Privacy {
            self.0.privacy()
        }
        fn noise_multiplier(&self) -> dpfl::algo::wing::NoiseMultiplier {
            self.0.noise_multiplier()
        }
        fn knobs(&self) -> dpfl::algo::wing::Knobs {
            self.0.knobs()
        }
        fn tuned(&self, s: f64, b: Option<usize>) -> Self {
            Squatter(self.0.tuned(s, b))
        }
        fn requirements(&self) -> dpfl::algo::wing::Requirements {
            self.0.requirements()
        }
        fn extended_metrics(&self) -> bool {
            false
        }
        fn audit_view(&self, p: &LaplacePlan) -> dpfl::algo::wing::AuditView {
            self.0.audit_view(p)
        }
        fn plan(
            p: &Self::Checked,
            ctx: &dpfl::algo::BuildContext,
        ) -> dpfl::Result<dpfl::algo::wing::Planned<LaplacePlan>> {
            LaplaceMbSgdSpec::plan(p, ctx)
        }
    }
    impl dpfl::algo::registry::ExternalWing for Squatter {
        const KIND: &'static str = "mb-sgd";
    }
    let e = AlgorithmSpec::register::<Squatter>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("`mb-sgd` is a built-in algorithm"), "{e}");
    // The built-in kind still reads as itself, with its own errors.
    let head = dpfl_testkit::experiment::Head::default();
    let read = |alg: &str| ExperimentSpec::from_toml(&head.toml(alg), "<t>");
    let mb = read("[[algorithms]]\nkind = \"mb-sgd\"\nstep_size = 0.1\n").unwrap();
    assert!(matches!(mb.algorithms[0].spec, AlgorithmSpec::MbSgd(_)));
    let e = read("[[algorithms]]\nkind = \"mb-sgd\"\nstep = 0.1\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `step`"), "{e}");

    // The registered kind reads, and refuses its own typos and bad values.
    let text = "[[algorithms]]\nkind = \"laplace-mb-sgd\"\nstep_size = 0.5\nbatch_size = 50\nround_epsilon = 0.5\n";
    let spec = read(text).unwrap().algorithms[0].spec.clone();
    assert!(matches!(spec, AlgorithmSpec::Custom(_)));
    let e = read(&text.replace("round_epsilon", "epsilon"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `epsilon`"), "{e}");
    let e = spec.tuned(-1.0, None).check().unwrap_err().to_string();
    assert!(e.contains("step_size"), "{e}");
    assert!(!spec.accepts_noise_multiplier());
}

/// Item 6 in the simulator: the experiment file's `kind = "laplace-mb-sgd"` loads, plans with
/// the noise scale computed by hand, runs 10 rounds through `Simulator::drive` with a durable
/// ledger per silo, the training loss falls, and each ledger holds exactly the 10 rounds'
/// events, whose basic composition is 10·ε₀ = 5.
#[test]
fn the_laplace_wing_runs_in_the_simulator_with_every_ledger_charged() {
    laplace_mbsgd::register().unwrap();
    let exp = ExperimentSpec::from_toml(&laplace_mbsgd::example_experiment(ROUNDS, 3), "<laplace>")
        .unwrap();
    let alg = &exp.algorithms[0].spec;
    let AlgorithmSpec::Custom(custom) = alg else {
        panic!("not a registered wing: {alg:?}")
    };
    assert_eq!(custom.kind(), "laplace-mb-sgd");
    assert_eq!(
        custom.get::<LaplaceMbSgdSpec>(),
        Some(&LaplaceMbSgdSpec {
            step_size: 0.5,
            batch_size: 50,
            round_epsilon: 0.5
        })
    );
    assert!(alg.is_private());
    assert_eq!(alg.default_label(), "Laplace MB-SGD");

    let trial = prepare_trial(&exp, None, &mut DpRng::from_seed(3, Purpose::Data, 0)).unwrap();
    let setup = setup(&exp, &trial).unwrap();
    let ctx = setup.context_with(trial.model.clone()).unwrap();
    // Logistic regression on 2 features (no intercept): d = 2; L = 1.
    assert_eq!((ctx.federation.dim, ctx.lipschitz), (2, 1.0));
    let (plan, built) = dpfl::plan::Plan::with_halves(setup, alg, &ctx).unwrap();
    // By hand: Δ₁ = 2·√2·1/50 = 0.0565685424…, b = Δ₁/0.5 = 0.1131370849…, σ = √2·b =
    // 4/25 = 0.16 (Var Lap(b) = 2b²).
    let WingPlan::Custom(wing) = &plan.wing else {
        panic!("not a registered wing's plan")
    };
    let lp = wing.get::<LaplacePlan>().unwrap();
    assert!(
        (lp.sensitivity - 0.056_568_542_494_923_8).abs() < 1e-15,
        "{lp:?}"
    );
    assert!((lp.scale - 0.113_137_084_989_847_6).abs() < 1e-15, "{lp:?}");
    assert_eq!(lp.records, vec![200, 200, 200]);
    for c in &plan.calibration {
        assert!((c.sigma - 0.16).abs() < 1e-15, "{c:?}");
        assert_eq!(c.batch_size, 50);
        assert_eq!(c.run_event, Some(round_event().repeated(ROUNDS as u64)));
    }
    assert_eq!(
        alg.audit_view(&plan.wing).unwrap(),
        dpfl::algo::wing::AuditView::Gradient { all_silos: false }
    );

    let dir = scratch("sim");
    let budget = Budget::new(8.0, 1e-5, Neighbouring::ReplaceOne).unwrap();
    let path = |i: usize| dir.join(format!("silo-{i}.ledger"));
    let opts = RunOptions::seeded(Participation::All, Some(17), Ledgers::Record);
    let mut sim = Simulator::start(&trial.silos, built, &ctx, &plan.requirements(), opts).unwrap();
    sim.attach_ledgers(
        (0..3)
            .map(|i| Some(Ledger::open(&path(i), budget, AccountantKind::Rdp).unwrap()))
            .collect(),
    )
    .unwrap();
    let model = trial.model.as_ref();
    let before = sim.train_loss(model, &sim.output());
    let mut losses = Vec::new();
    let finished = sim
        .drive(ROUNDS, OnDiverged::Fail, |sim, _, report| {
            assert_eq!((report.participants, report.refused.len()), (3, 0));
            losses.push(sim.train_loss(model, &sim.output()));
            Ok(())
        })
        .unwrap();
    assert_eq!(finished, Finished::Completed);
    // w_0 = 0: ln 2.
    assert!((before - std::f64::consts::LN_2).abs() < 1e-12, "{before}");
    let after = losses[ROUNDS - 1];
    assert!(
        after < 0.9 * before,
        "loss {before} -> {after} ({losses:?})"
    );

    let delta = Delta::new(1e-5).unwrap();
    for (i, spent) in sim.spent().into_iter().enumerate() {
        assert_eq!(spent, vec![round_event(); ROUNDS], "silo {i}");
        // Reopened from its file: the ledger holds rounds 0..10, one Laplace event each.
        let ledger = Ledger::open(&path(i), budget, AccountantKind::Rdp).unwrap();
        let held: Vec<(u64, PrivacyEvent)> =
            ledger.releases().map(|(r, e)| (r, e.clone())).collect();
        let want: Vec<(u64, PrivacyEvent)> =
            (0..ROUNDS as u64).map(|r| (r, round_event())).collect();
        assert_eq!(held, want, "silo {i}");
        let spent_eps = ledger.spent_epsilon().unwrap();
        assert!(spent_eps > 0.0 && spent_eps <= 8.0, "silo {i}: {spent_eps}");
        // ε by hand: basic composition of 10 pure 0.5-DP rounds, 5 (the accountant rounds
        // up by a few ulps, never down).
        let basic = AccountantKind::Basic
            .epsilon(
                Neighbouring::ReplaceOne,
                &PrivacyEvent::Composed(spent),
                delta,
            )
            .unwrap();
        assert!((5.0..5.0 + 1e-9).contains(&basic), "silo {i}: {basic}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Item 6 in a reproduction's grid: two panels (K = 20, K = 50, through `Wing::tuned`) × three
/// step sizes e^-2, e^-1, e^0 of the registered wing, each run by `reproduce::run_grid` with
/// its plan's events (5 rounds at ε₀ = 0.5: basic composition 2.5) and a certified ε.
#[test]
fn the_laplace_wing_runs_in_a_reproduction_grid_over_its_knobs() {
    laplace_mbsgd::register().unwrap();
    let text = r#"
id = "laplace-grid"
title = "Laplace MB-SGD, synthetic"
metric = "test_error"
seed = 5
trials = 1
repetitions = 1
epsilons = [8.0]

[base]
rounds = 5
delta = 1e-5
clips = [1.0]
data = { source = { kind = "synthetic", task = "binary", silos = 3, train = 200, test = 50, features = 2, shift = 0.5 } }
model = { kind = "logistic" }

[[panels]]
figure = "a"
participation = { kind = "all" }
batch_size = 20

[[panels]]
figure = "b"
participation = { kind = "all" }
batch_size = 50

[[algorithms]]
label = "Laplace MB-SGD"
spec = { kind = "laplace-mb-sgd", step_size = 1.0, batch_size = 10, round_epsilon = 0.5 }
steps = { from = -2.0, to = 0.0, points = 3 }
"#;
    let mut spec = ReproSpec::from_toml(text, "<laplace-grid>").unwrap();
    spec.rdp_only = true;
    let jobs = reproduce::jobs(&spec);
    assert_eq!(jobs.len(), 6);
    let steps: Vec<f64> = jobs.iter().map(|j| j.step).collect();
    let e = |x: f64| x.exp();
    assert_eq!(
        steps,
        vec![e(-2.0), e(-1.0), e(0.0), e(-2.0), e(-1.0), e(0.0)]
    );
    // The grid's knobs reach the wing: η and the panel's K.
    let tuned = spec.algorithms[0].spec.tuned(e(-1.0), Some(20));
    let AlgorithmSpec::Custom(c) = &tuned else {
        panic!("{tuned:?}")
    };
    assert_eq!(
        c.get::<LaplaceMbSgdSpec>()
            .map(|s| (s.step_size, s.batch_size)),
        Some((e(-1.0), 20))
    );

    let data = reproduce::prepare(&spec, None).unwrap();
    let delta = Delta::new(1e-5).unwrap();
    for job in &jobs {
        let (_, events) = reproduce::plan_events(&spec, &data, job).unwrap();
        assert_eq!(events.len(), 3);
        for silo in events {
            assert_eq!(silo, vec![round_event().repeated(5)]);
            let basic = AccountantKind::Basic
                .epsilon(
                    Neighbouring::ReplaceOne,
                    &PrivacyEvent::Composed(silo),
                    delta,
                )
                .unwrap();
            assert!((2.5..2.5 + 1e-9).contains(&basic), "{basic}");
        }
    }
    let results = reproduce::run_grid(&spec, &data, &jobs, &|_, _| {}).unwrap();
    assert_eq!(results.len(), 6);
    for (job, r) in jobs.iter().zip(&results) {
        assert!(
            r.train_loss.is_finite() && r.train_loss < std::f64::consts::LN_2,
            "{job:?}: {r:?}"
        );
        let eps = r.certified_epsilon.expect("a private run is certified");
        assert!(eps > 0.0 && eps <= 8.0, "{job:?}: {eps}");
    }
    // The panels' K changes the noise (b = 2√2/(K·0.5)), so their runs differ.
    assert_ne!(
        results[1].train_loss.to_bits(),
        results[4].train_loss.to_bits()
    );
}
