//! One round of each variant on a tiny problem, by hand.

use super::*;
use crate::algo::context::BuildContext;
use crate::algo::half::{FederationInfo, SiloInfo};
use crate::algo::message::{PackedInts, Payload, SiloMessage};
use crate::data::{Dataset, SiloData, Target};
use crate::model::{GradientOracle, LinearRegression, Projection};
use crate::sim::{Participation, Simulator};

/// Least squares in d = 2; silo 0 holds x = (1, 0), y = 2; silo 1 holds x = (0, 1), y = −4.
fn silos() -> Vec<SiloData> {
    let one = |x: [f64; 2], y: f64| {
        let m = crate::linalg::Matrix::from_vec(1, 2, x.to_vec()).unwrap();
        Dataset::new(m, vec![y], Target::Real, vec!["a".into(), "b".into()]).unwrap()
    };
    vec![
        SiloData {
            train: one([1.0, 0.0], 2.0),
            test: one([1.0, 0.0], 2.0),
        },
        SiloData {
            train: one([0.0, 1.0], -4.0),
            test: one([0.0, 1.0], -4.0),
        },
    ]
}

fn ctx() -> BuildContext {
    BuildContext {
        federation: FederationInfo {
            dim: 2,
            silos: 2,
            rounds: 3,
            expected_participants: 2.0,
        },
        silos: (0..2)
            .map(|i| SiloInfo {
                id: crate::units::SiloId::new(i),
                records: 1,
                budget: None,
                fixed_noise: None,
            })
            .collect(),
        oracle: GradientOracle::new(std::sync::Arc::new(LinearRegression::new(2)), None).unwrap(),
        lipschitz: 1.0,
        projection: Projection::None,
        init: vec![0.0; 2],
        noise: Default::default(),
    }
}

/// E = 1, B = 1, η₀ = 0.5, no momentum, no weight decay.
fn plain(variant: Variant, beta: f64) -> NormFedAvgSpec {
    NormFedAvgSpec {
        local_steps: 1,
        batch_size: 1,
        momentum: 0.0,
        weight_decay: 0.0,
        ..NormFedAvgSpec::new(variant, 0.5, BetaSchedule::Constant { beta })
    }
}

fn one_round(spec: &NormFedAvgSpec) -> (Vec<f64>, u64) {
    let data = silos();
    let built = build(&ctx(), spec).unwrap();
    let mut sim = Simulator::new(&data, built, Participation::All, Some(5)).unwrap();
    let report = sim.step().unwrap();
    (sim.output(), report.message_bits)
}

#[test]
fn fedavg_and_normfedavg_one_round_by_hand() {
    // From w = 0 with η = 0.5: silo 0's gradient (−2, 0) → w = (1, 0), d = (−1, 0); silo 1's
    // (0, 4) → w = (0, −2), d = (0, 2).
    // FedAvg: w₁ = −(1/2)(d₀ + d₁) = (0.5, −1).
    let (w, bits) = one_round(&plain(Variant::FedAvg, 1.0));
    assert_eq!(w, vec![0.5, -1.0]);
    assert_eq!(bits, 2 * 2 * 64, "two dense f64 messages of d = 2");
    // NormFedAvg, β = 0.1: unit vectors (−1, 0), (0, 1); w₁ = −(0.1/2)(−1, 1) = (0.05, −0.05).
    let (w, _) = one_round(&plain(Variant::NormFedAvg, 0.1));
    assert!(
        (w[0] - 0.05).abs() < 1e-15 && (w[1] + 0.05).abs() < 1e-15,
        "{w:?}"
    );
}

/// s = 4, eq. 6 with μ = 0.1 in d = 2: Δ∞ = 2.4, Δ₁ = 4 + 0.4√2 = 4.5657; ε = 0.5 per round
/// is below Theorem 1's limit e^{−1}Δ₁/Δ∞ = 0.6998.
fn private(variant: Variant, calibration: TdlCalibration) -> NormFedAvgSpec {
    NormFedAvgSpec {
        privacy: Some(QuantPrivacy {
            s: 4,
            sensitivity: SensitivitySpec::Mu { mu: 0.1 },
            budget: BudgetSpec::PerRound {
                epsilon: 0.5,
                delta: 1e-3,
            },
            calibration,
        }),
        ..plain(variant, 0.1)
    }
}

#[test]
fn dp_normfedavg_sends_t_bit_integers_and_the_server_sums_them_then_scales_once() {
    let spec = private(Variant::DpNormFedAvg, TdlCalibration::PaperClaim);
    let mut built = build(&ctx(), &spec).unwrap();
    // Theorem 1: α = 0.5/4.5657 = 0.10951; m is the smallest with Z ≥ 1 + 2Δ∞ = 5.8:
    // Z(2) = 1 + 2(e^{−α} + e^{−2α}) = 4.399, Z(3) = 5.839 → m = 3, t = ⌈log₂ 15⌉ = 4.
    let cal = &built.calibration[0];
    assert!(cal.formula.contains("m = 3, t = 4 bits"), "{}", cal.formula);
    // Paper-claim mode reports the correct δ of these parameters, not 2^−d.
    let Some(dpfl_privacy::PrivacyEvent::TruncatedDiscreteLaplace { epsilon, delta }) =
        built.silos[0].round_event(crate::units::Round::FIRST)
    else {
        panic!("no TDL event")
    };
    assert!((epsilon - 0.5).abs() < 1e-12);
    assert!(
        delta > 0.25,
        "correct delta at Theorem 1's m is large: {delta}"
    );
    // The server: offset s + m = 7, two hand-made messages z = (3, −7), (−2, 1) and one
    // malformed (value 15 − 7 = 8 > 7) that is left out: M = 2, Σz = (1, −6),
    // w₁ = −(β/(M s)) Σz = −(0.1/8)(1, −6) = (−0.0125, 0.075).
    let msg = |z: [i64; 2]| SiloMessage {
        round: crate::units::Round::FIRST,
        payload: Payload::Packed(PackedInts::pack(4, &z.map(|v| (v + 7) as u64)).unwrap()),
    };
    let bad = SiloMessage {
        round: crate::units::Round::FIRST,
        payload: Payload::Packed(PackedInts::pack(4, &[15, 7]).unwrap()),
    };
    let wrong_round = SiloMessage {
        round: crate::units::Round::new(4),
        ..msg([1, 1])
    };
    let server = built.server.as_mut();
    server
        .aggregate(
            crate::units::Round::FIRST,
            &[msg([3, -7]), bad, msg([-2, 1]), wrong_round],
        )
        .unwrap();
    let w = server.output();
    assert!(
        (w[0] + 0.0125).abs() < 1e-15 && (w[1] - 0.075).abs() < 1e-15,
        "{w:?}"
    );
    assert_eq!(server.state().get::<u64>("rejected").unwrap(), 2);
    // A real round: each message is exactly t·d = 8 bits.
    let (_, bits) = one_round(&spec);
    assert_eq!(bits, 2 * 8);
}

#[test]
fn corrected_calibration_meets_its_delta_and_binomial_runs() {
    let spec = private(Variant::DpNormFedAvg, TdlCalibration::Corrected);
    let built = build(&ctx(), &spec).unwrap();
    let Some(dpfl_privacy::PrivacyEvent::TruncatedDiscreteLaplace { delta, .. }) =
        built.silos[1].round_event(crate::units::Round::new(2))
    else {
        panic!("no TDL event")
    };
    assert!(delta <= 1e-3, "{delta}");
    assert!(built.calibration[0].formula.contains("corrected m"));
    let (w, bits) = one_round(&spec);
    assert!(w.iter().all(|v| v.is_finite()));
    assert_eq!(bits % 2, 0);
    // Binomial baseline: Δ₂ = 2√2 + 0.4; the event is cpSGD's (ε, δ + sampler TV term).
    let mut b = private(Variant::Binomial, TdlCalibration::Corrected);
    if let Some(p) = b.privacy.as_mut() {
        p.budget = BudgetSpec::PerRound {
            epsilon: 10.0,
            delta: 3e-6,
        };
    }
    let built = build(&ctx(), &b).unwrap();
    match built.silos[0].round_event(crate::units::Round::FIRST) {
        Some(dpfl_privacy::PrivacyEvent::EpsilonDelta { epsilon, delta }) => {
            assert_eq!(epsilon, 10.0);
            assert!((3e-6..3.1e-6).contains(&delta), "{delta}");
        }
        e => panic!("{e:?}"),
    }
    let (w, _) = one_round(&b);
    assert!(w.iter().all(|v| v.is_finite()));
}

#[test]
fn a_zero_update_sends_noise_only() {
    // Both silos at their optimum from w = 0: y = 0 gives a zero gradient, d = 0.
    let zero = |x: [f64; 2]| {
        let m = crate::linalg::Matrix::from_vec(1, 2, x.to_vec()).unwrap();
        Dataset::new(m, vec![0.0], Target::Real, vec!["a".into(), "b".into()]).unwrap()
    };
    let data: Vec<SiloData> = (0..2)
        .map(|_| SiloData {
            train: zero([1.0, 0.0]),
            test: zero([1.0, 0.0]),
        })
        .collect();
    let built = build(&ctx(), &plain(Variant::NormFedAvg, 0.1)).unwrap();
    let mut sim = Simulator::new(&data, built, Participation::All, Some(1)).unwrap();
    sim.step().unwrap();
    assert_eq!(sim.output(), vec![0.0, 0.0]);
    let spec = private(Variant::DpNormFedAvg, TdlCalibration::PaperClaim);
    let built = build(&ctx(), &spec).unwrap();
    let mut sim = Simulator::new(&data, built, Participation::All, Some(1)).unwrap();
    sim.step().unwrap();
    // Only noise: each coordinate moves by β/(M s)·(e₀ + e₁) with |e| ≤ 3: at most 0.1·6/8.
    assert!(sim.output().iter().all(|v| v.abs() <= 0.075 + 1e-15));
}

#[test]
fn config_fields_parse_and_are_checked_when_built() {
    let text = r#"
        step_size = 0.01
        variant = { kind = "dp-norm-fed-avg" }
        beta = { kind = "piecewise", from = [0, 100], values = [0.1, 0.05] }
        [privacy]
        s = 4096
        sensitivity = { kind = "mu", mu = 0.1 }
        budget = { kind = "per-round", epsilon = 10.0, delta = 1e-9 }
    "#;
    let spec: NormFedAvgSpec = toml::from_str(text).unwrap();
    assert_eq!(spec.label(), "DP-NormFedAvg (s = 4096)");
    assert_eq!(
        (
            spec.local_steps,
            spec.batch_size,
            spec.momentum,
            spec.weight_decay
        ),
        (20, 256, 0.9, 1e-4)
    );
    let bad: NormFedAvgSpec = toml::from_str(&text.replace("s = 4096", "s = 0")).unwrap();
    let e = build(&ctx(), &bad).err().unwrap().to_string();
    assert!(e.contains("algorithm.privacy.s"), "{e}");
    assert!(toml::from_str::<NormFedAvgSpec>(&text.replace("step_size", "step")).is_err());
    // ε outside Theorem 1's range (limit 0.6998 here) is refused with the theorem named.
    let mut big = private(Variant::DpNormFedAvg, TdlCalibration::PaperClaim);
    if let Some(p) = big.privacy.as_mut() {
        p.budget = BudgetSpec::PerRound {
            epsilon: 0.8,
            delta: 1e-3,
        };
    }
    let e = build(&ctx(), &big).err().unwrap().to_string();
    assert!(e.contains("Theorem 1"), "{e}");
}

/// Planning calibrates each silo once; building a half from the (serialised) plan calibrates
/// nothing, and a federation assembled half by half gives the same round as the whole build.
#[test]
fn the_plan_calibrates_once_and_each_half_builds_alone() {
    use crate::algo::context::calibrations_on_this_thread;
    let spec = private(Variant::DpNormFedAvg, TdlCalibration::Corrected);
    let before = calibrations_on_this_thread();
    let (p, calibration) = plan(&ctx(), &spec).unwrap();
    assert_eq!(calibrations_on_this_thread() - before, 2, "one per silo");
    assert!(matches!(p.noise, Some(NoisePlan::Tdl { .. })));
    let json = serde_json::to_string(&p).unwrap();
    let back: NormFedAvgPlan = serde_json::from_str(&json).unwrap();
    assert_eq!(back, p);
    let before = calibrations_on_this_thread();
    let server = back.server_half(&ctx()).unwrap();
    let silo1 = back.silo_half(&ctx(), 1).unwrap();
    assert_eq!(
        calibrations_on_this_thread(),
        before,
        "halves calibrate nothing"
    );
    assert!(silo1.round_event(crate::units::Round::FIRST).is_some());
    assert!(back.silo_half(&ctx(), 2).is_err(), "no silo 2");
    let halves = crate::algo::context::BuiltAlgorithm {
        server,
        silos: vec![back.silo_half(&ctx(), 0).unwrap(), silo1],
        calibration,
    };
    let whole = build(&ctx(), &spec).unwrap();
    let data = silos();
    let run = |b| {
        let mut sim = Simulator::new(&data, b, Participation::All, Some(5)).unwrap();
        sim.step().unwrap();
        sim.output()
    };
    assert_eq!(run(halves), run(whole));
}
