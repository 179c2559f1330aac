//! The wing's tests: one round by hand, ω = 0 reduces to the uncompressed baselines, shifts
//! never drift in the simulator, participation and config errors.

use std::sync::Arc;

use super::plan::build;
use super::spec::{Method, SoteriaSpec};
use crate::algo::context::{BuildContext, BuiltAlgorithm};
use crate::algo::half::{FederationInfo, SiloInfo};
use crate::data::{Dataset, SiloData, Target};
use crate::linalg::Matrix;
use crate::model::{GradientOracle, LinearRegression, Model, NonconvexLogistic, Projection};
use crate::sim::{Participation, Simulator};

fn dataset(rows: &[(&[f64], f64)], target: Target) -> Dataset {
    let d = rows[0].0.len();
    let x: Vec<f64> = rows.iter().flat_map(|r| r.0.iter().copied()).collect();
    Dataset::new(
        Matrix::from_vec(rows.len(), d, x).unwrap(),
        rows.iter().map(|r| r.1).collect(),
        target,
        (0..d).map(|j| format!("x{j}")).collect(),
    )
    .unwrap()
}

fn ctx(
    model: Arc<dyn Model>,
    records: &[usize],
    rounds: usize,
    g: f64,
    budget: Option<(f64, f64)>,
) -> BuildContext {
    let d = model.num_params();
    BuildContext {
        federation: FederationInfo {
            dim: d,
            silos: records.len(),
            rounds,
            expected_participants: records.len() as f64,
        },
        silos: records
            .iter()
            .enumerate()
            .map(|(i, &n)| SiloInfo::new(crate::units::SiloId::new(i as u32), n, budget).unwrap())
            .collect(),
        oracle: GradientOracle::new(model, None).unwrap(),
        lipschitz: g,
        projection: Projection::None,
        init: vec![0.0; d],
        noise: Default::default(),
    }
}

/// A config of this wing (`kind` picks the method; the wing may not import `algo::spec`).
struct Alg(Method, SoteriaSpec);

impl Alg {
    fn build(&self, ctx: &BuildContext) -> crate::Result<BuiltAlgorithm> {
        build(ctx, self.0, &self.1)
    }
}

fn parse(text: &str) -> Result<Alg, String> {
    let mut t: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let kind = t.remove("kind").and_then(|k| k.as_str().map(String::from));
    let method = match kind.as_deref() {
        Some("soteria-fl") => Method::SoteriaFl,
        Some("cdp-sgd") => Method::CdpSgd,
        Some("ldp-sgd") => Method::LdpSgd,
        Some("ldp-svrg") => Method::LdpSvrg,
        Some("q-dpsgd-1") => Method::QDpsgd1,
        other => return Err(format!("kind {other:?}")),
    };
    let spec: SoteriaSpec = t.try_into().map_err(|e: toml::de::Error| e.to_string())?;
    Ok(Alg(method, spec))
}

fn spec(text: &str) -> Alg {
    parse(text).unwrap()
}

/// Two silos of one record each under least squares: silo 0 (x = (1, 0), y = 1), silo 1
/// (x = (0, 2), y = 1).
fn two_silos() -> Vec<SiloData> {
    let rows: [(&[f64], f64); 2] = [(&[1.0, 0.0], 1.0), (&[0.0, 2.0], 1.0)];
    rows.iter()
        .map(|r| SiloData {
            train: dataset(&[*r], Target::Real),
            test: dataset(&[*r], Target::Real),
        })
        .collect()
}

#[test]
fn two_rounds_of_soteria_gd_by_hand() {
    // η = 0.1, γ = 0.5, identity compressor, no noise, G = 100 (no clipping), x⁰ = 0.
    // Round 0: g_0 = (−1, 0), g_1 = (0, −2); v̄ = (−0.5, −1); x¹ = (0.05, 0.1);
    //   s = 0.5·v̄ = (−0.25, −0.5); s_0 = (−0.5, 0), s_1 = (0, −1).
    // Round 1: g_0 = (0.05 − 1)(1, 0) = (−0.95, 0), g_1 = (0.2 − 1)(0, 2) = (0, −1.6);
    //   v_0 = g_0 − s_0 = (−0.45, 0), v_1 = (0, −0.6), v̄ = (−0.225, −0.3);
    //   x² = x¹ − 0.1·(s + v̄) = x¹ − 0.1·(−0.475, −0.8) = (0.0975, 0.18);
    //   s = (−0.25, −0.5) + 0.5·v̄ = (−0.3625, −0.65).
    let data = two_silos();
    let c = ctx(Arc::new(LinearRegression::new(2)), &[1, 1], 2, 100.0, None);
    let built = spec(
        "kind = \"soteria-fl\"\nestimator = \"gd\"\nstep_size = 0.1\nshift_step = 0.5\ncalibration = \"none\"\ncompressor = { kind = \"identity\" }",
    )
    .build(&c)
    .unwrap();
    let mut sim = Simulator::new(&data, built, Participation::All, Some(1)).unwrap();
    sim.step().unwrap();
    let x1 = sim.output();
    assert!(
        (x1[0] - 0.05).abs() < 1e-15 && (x1[1] - 0.1).abs() < 1e-15,
        "{x1:?}"
    );
    sim.step().unwrap();
    let x2 = sim.output();
    assert!(
        (x2[0] - 0.0975).abs() < 1e-15 && (x2[1] - 0.18).abs() < 1e-15,
        "{x2:?}"
    );
    let s = sim.server_state().vector("shift", 2).unwrap();
    assert!(
        (s[0] + 0.3625).abs() < 1e-15 && (s[1] + 0.65).abs() < 1e-15,
        "{s:?}"
    );
    let si: Vec<Vec<f64>> = sim
        .silo_states()
        .iter()
        .map(|st| st.vector("shift", 2).unwrap())
        .collect();
    // s_0 = (−0.5, 0) + 0.5·(−0.45, 0) = (−0.725, 0); s_1 = (0, −1) + 0.5·(0, −0.6) = (0, −1.3).
    assert!((si[0][0] + 0.725).abs() < 1e-15 && si[0][1] == 0.0);
    assert!(si[1][0] == 0.0 && (si[1][1] + 1.3).abs() < 1e-15);
}

/// A small non-IID federation of 4 silos × 30 records, a9a-like (bias feature, labels {0,1}).
fn logistic_silos() -> Vec<SiloData> {
    let mut rng = dpfl_privacy::DpRng::from_seed(3, dpfl_privacy::rng::Purpose::Data, 0);
    let mut noise = vec![0.0; 4 * 30 * 3];
    use dpfl_privacy::VectorMechanism;
    dpfl_privacy::GaussianMechanism::new(1.0, 1.0)
        .unwrap()
        .privatize(&mut noise, &mut rng);
    (0..4)
        .map(|s| {
            let rows: Vec<(Vec<f64>, f64)> = (0..30)
                .map(|j| {
                    let z = &noise[(s * 30 + j) * 3..(s * 30 + j + 1) * 3];
                    let y = if s >= 2 { 1.0 } else { 0.0 };
                    (vec![z[0] + y, z[1] - y, 1.0], y)
                })
                .collect();
            let refs: Vec<(&[f64], f64)> = rows.iter().map(|(x, y)| (x.as_slice(), *y)).collect();
            SiloData {
                train: dataset(
                    &refs,
                    Target::Classes {
                        names: vec!["0".into(), "1".into()],
                    },
                ),
                test: dataset(
                    &refs[..5],
                    Target::Classes {
                        names: vec!["0".into(), "1".into()],
                    },
                ),
            }
        })
        .collect()
}

fn logistic_ctx(rounds: usize, budget: Option<(f64, f64)>) -> BuildContext {
    ctx(
        Arc::new(NonconvexLogistic::new(3, 0.2).unwrap()),
        &[30; 4],
        rounds,
        0.5,
        budget,
    )
}

#[test]
fn shifts_never_drift_for_any_estimator_in_the_simulator() {
    let data = logistic_silos();
    for est in ["gd", "sgd", "svrg", "saga"] {
        let c = logistic_ctx(40, Some((2.0, 1e-3)));
        let text = format!(
            "kind = \"soteria-fl\"\nestimator = \"{est}\"\nstep_size = 0.3\ncalibration = \"paper-code\"\ncompressor = {{ kind = \"random-k\", k = 1 }}\nsnapshot_probability = 0.3"
        );
        let text = if est == "svrg" {
            text
        } else {
            text.replace("\nsnapshot_probability = 0.3", "")
        };
        // A private SAGA run is refused (its table is hidden state, see the module doc).
        let text = if est == "saga" {
            text.replace("\"paper-code\"", "\"none\"")
        } else {
            text
        };
        let built = spec(&text).build(&c).unwrap();
        let mut sim = Simulator::new(&data, built, Participation::All, Some(9)).unwrap();
        for r in 0..40 {
            let rep = sim.step().unwrap();
            // random-k with explicit indices: 32 + 32·1 + 64·1 bits per silo.
            assert_eq!(rep.message_bits, 4 * 128, "{est}");
            let s = sim.server_state().vector("shift", 3).unwrap();
            let states = sim.silo_states();
            for (j, sj) in s.iter().enumerate() {
                let mean: f64 = states
                    .iter()
                    .map(|st| st.vector("shift", 3).unwrap()[j])
                    .sum::<f64>()
                    / 4.0;
                assert!(
                    (mean - sj).abs() <= 1e-12 * (1.0 + sj.abs()),
                    "{est} round {r} coord {j}: {mean} vs {sj}"
                );
            }
            if est == "saga" {
                // The table's stored mean stays the mean of its rows.
                let st = &states[0];
                let t = st.vector("saga_table", 90).unwrap();
                let mu = st.vector("saga_mean", 3).unwrap();
                for j in 0..3 {
                    let m: f64 = (0..30).map(|i| t[i * 3 + j]).sum::<f64>() / 30.0;
                    assert!((m - mu[j]).abs() < 1e-12);
                }
            }
        }
        assert!(sim.output().iter().all(|v| v.is_finite()));
    }
}

#[test]
fn the_identity_compressor_reduces_soteria_to_the_uncompressed_baselines() {
    // Same streams: SoteriaFL-SGD with ω = 0 gives LDP-SGD's iterates (v = s + mean(g − s_i)
    // = mean g), SoteriaFL-SVRG gives LDP-SVRG's, and CDP-SGD with the identity is LDP-SGD.
    let data = logistic_silos();
    let run = |text: &str| {
        let built = spec(text)
            .build(&logistic_ctx(15, Some((4.0, 1e-3))))
            .unwrap();
        let mut sim = Simulator::new(&data, built, Participation::All, Some(5)).unwrap();
        for _ in 0..15 {
            sim.step().unwrap();
        }
        sim.output()
    };
    let common = "step_size = 0.5\ncalibration = \"paper-code\"\nbatch_size = 6\n";
    let id = "compressor = { kind = \"identity\" }\n";
    let pairs = [
        (
            format!("kind = \"soteria-fl\"\n{common}{id}"),
            format!("kind = \"ldp-sgd\"\n{common}"),
        ),
        (
            format!("kind = \"soteria-fl\"\nestimator = \"svrg\"\n{common}{id}"),
            format!("kind = \"ldp-svrg\"\n{common}"),
        ),
        (
            format!("kind = \"cdp-sgd\"\n{common}{id}"),
            format!("kind = \"ldp-sgd\"\n{common}"),
        ),
    ];
    for (a, b) in pairs {
        let (xa, xb) = (run(&a), run(&b));
        // paper-code σ differs between SoteriaFL-SGD (c = 48) and LDP-SGD (8G²), so compare at
        // equal σ only where the presets agree (SVRG, CDP); for SGD check closeness of the
        // noise-free part through the identical sampling instead.
        if a.contains("svrg") || a.contains("cdp") {
            for (u, v) in xa.iter().zip(&xb) {
                assert!((u - v).abs() < 1e-10, "{a}\n{xa:?} vs {xb:?}");
            }
        }
    }
    // SoteriaFL-SGD vs LDP-SGD at the same closed form.
    let cf = "calibration = \"closed-form\"\nnoise_constant = 32.0\n";
    let xa = run(&format!(
        "kind = \"soteria-fl\"\nstep_size = 0.5\nbatch_size = 6\n{cf}{id}"
    ));
    let xb =
        run("kind = \"ldp-sgd\"\nstep_size = 0.5\nbatch_size = 6\ncalibration = \"paper-code\"\n");
    // 32·G²/4 = 8G²: the same σ as the code's LDP-SGD preset.
    for (u, v) in xa.iter().zip(&xb) {
        assert!((u - v).abs() < 1e-10, "{xa:?} vs {xb:?}");
    }
}

#[test]
fn partial_participation_and_bad_configs_are_refused_with_the_field_named() {
    let mut c = logistic_ctx(5, Some((1.0, 1e-3)));
    c.federation.expected_participants = 3.0;
    let e = spec("kind = \"soteria-fl\"\nstep_size = 0.1")
        .build(&c)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("participation"), "{e}");
    let c = logistic_ctx(5, Some((1.0, 1e-3)));
    let err = |t: &str| spec(t).build(&c).err().expect(t).to_string();
    assert!(
        err("kind = \"cdp-sgd\"\nestimator = \"svrg\"\nstep_size = 0.1")
            .contains("algorithm.estimator")
    );
    assert!(
        err("kind = \"ldp-sgd\"\nstep_size = 0.1\ncompressor = { kind = \"random-k\", k = 1 }")
            .contains("algorithm.compressor")
    );
    assert!(
        err("kind = \"soteria-fl\"\nstep_size = 0.1\ncompressor = { kind = \"random-k\", k = 0 }")
            .contains("k")
    );
    assert!(
        err("kind = \"soteria-fl\"\nstep_size = 0.1\ncompressor = { kind = \"random-k\", k = 4 }")
            .contains("k")
    );
    assert!(
        err("kind = \"soteria-fl\"\nstep_size = 0.1\nbatch_size = 31")
            .contains("algorithm.batch_size")
    );
    assert!(
        err("kind = \"soteria-fl\"\nestimator = \"gd\"\nstep_size = 0.1\nbatch_size = 5")
            .contains("algorithm.batch_size")
    );
    assert!(
        err("kind = \"soteria-fl\"\nstep_size = 0.1\nshift_step = 2.0")
            .contains("algorithm.shift_step")
    );
    let unknown = parse("kind = \"soteria-fl\"\nstep_size = 0.1\nestimator = \"spider\"");
    assert!(unknown.err().unwrap().to_string().contains("spider"));
    // The server refuses a round with a missing silo: its shift would drift.
    let built = spec("kind = \"soteria-fl\"\nstep_size = 0.1")
        .build(&c)
        .unwrap();
    let mut server = built.server;
    let b = server.broadcast(crate::units::Round::FIRST);
    assert!(server.aggregate(crate::units::Round::FIRST, &[]).is_err());
    assert_eq!(
        server.broadcast(crate::units::Round::FIRST).point,
        b.point,
        "a refused round leaves the model unchanged"
    );
}

#[test]
fn reports_carry_the_accounted_event_and_aggregate_clipping_is_marked() {
    let c = logistic_ctx(25, Some((1.0, 1e-3)));
    let b = spec("kind = \"soteria-fl\"\nestimator = \"svrg\"\nstep_size = 0.1\ncalibration = \"accountant\"")
        .build(&c)
        .unwrap();
    let cal = &b.calibration[0];
    // SVRG is calibrated by the PLD on the calibration grid (below RDP's σ).
    let e = dpfl_privacy::accountant::pld::PldAccountant::with_discretization(
        dpfl_privacy::Neighbouring::ReplaceOne,
        dpfl_privacy::calibration::CALIBRATION_PLD_DISCRETIZATION,
    )
    .unwrap()
    .epsilon(
        cal.run_event.as_ref().unwrap(),
        dpfl_privacy::Delta::new(1e-3).unwrap(),
    )
    .unwrap();
    assert!(
        e <= 1.0 && e > 0.9,
        "accountant calibration lands just under the target: {e}"
    );
    let agg = spec("kind = \"cdp-sgd\"\nstep_size = 0.1\ncalibration = \"paper-code\"\nclipping = \"aggregate-no-guarantee\"")
        .build(&c)
        .unwrap();
    assert!(agg.calibration[0].formula.contains("NO FORMAL GUARANTEE"));
}

/// A fingerprint of a short simulated run: the output's bits, every round's message bits and
/// every silo's σ, folded (FNV-style) into one number.
fn run_fingerprint(alg: &Alg, rounds: usize) -> u64 {
    let data = logistic_silos();
    let built = alg.build(&logistic_ctx(rounds, Some((2.0, 1e-3)))).unwrap();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut fold = |v: u64| h = (h ^ v).wrapping_mul(0x0100_0000_01b3);
    for c in &built.calibration {
        fold(c.sigma.to_bits());
        fold(c.batch_size as u64);
    }
    let mut sim = Simulator::new(&data, built, Participation::All, Some(9)).unwrap();
    for _ in 0..rounds {
        fold(sim.step().unwrap().message_bits);
    }
    for v in sim.output() {
        fold(v.to_bits());
    }
    h
}

/// Configs covering every method, estimator, calibration rule, clipping, sampling, x⁰ rule
/// and compressor of the wing.
const FINGERPRINTED: [&str; 8] = [
    "kind = \"soteria-fl\"\nestimator = \"sgd\"\nstep_size = 0.3\ncalibration = \"paper-code\"\ncompressor = { kind = \"random-k\", k = 1 }",
    "kind = \"soteria-fl\"\nestimator = \"svrg\"\nstep_size = 0.3\ncompressor = { kind = \"random-k\", k = 2, indices = \"explicit\" }\nsnapshot_probability = 0.3\ncoin_seed = 4",
    "kind = \"soteria-fl\"\nestimator = \"saga\"\nstep_size = 0.3\ncalibration = \"none\"\ncompressor = { kind = \"qsgd\", levels = 2 }",
    "kind = \"soteria-fl\"\nestimator = \"gd\"\nstep_size = 0.3\ncompressor = { kind = \"natural\" }",
    "kind = \"cdp-sgd\"\nstep_size = 0.2\nsampling = \"without-replacement\"\nbatch_size = 7",
    "kind = \"ldp-sgd\"\nstep_size = 0.2\ncalibration = \"paper-code\"\ninit = { std = 0.2, seed = 0 }",
    "kind = \"ldp-svrg\"\nstep_size = 0.2\ncalibration = \"paper-code\"\nclipping = \"aggregate-no-guarantee\"",
    "kind = \"soteria-fl\"\nestimator = \"sgd\"\nstep_size = 0.3\ncalibration = \"none\"\nbatch_size = 5",
];

/// The fingerprints of [`FINGERPRINTED`] computed by the wing before it was split into plan
/// and halves (commit 3eaec42): the split changes no bit of a simulated run. The second
/// (SVRG, `calibration = "accountant"`) changed intentionally in session 6, when SVRG/SAGA
/// moved from RDP to the tighter of RDP and the PLD (a smaller σ); it was 0x34a958d5a8bb5de9.
/// The third (SAGA) runs non-private since issue 27 (a private SAGA run is refused); its
/// closed-form fingerprint was 0xca7d1f7cfc871485.
const BEFORE_THE_SPLIT: [u64; 8] = [
    0xaef7e5f805f7d2bb,
    0x7a79cdbd3cd65c48,
    0x86dcdc9711395462,
    0x062522e258835ff5,
    0xccd87e2875cca7c5,
    0x06208686694d73ce,
    0xa71bba65098b4cc7,
    0xf99bca00e2eaf8e6,
];

#[test]
fn runs_are_bit_for_bit_those_of_the_unsplit_wing() {
    for (t, want) in FINGERPRINTED.iter().zip(BEFORE_THE_SPLIT) {
        assert_eq!(run_fingerprint(&spec(t), 6), want, "{t}");
    }
}

#[test]
fn a_plan_calibrates_each_silo_once_and_its_halves_calibrate_nothing() {
    use crate::algo::context::calibrations_on_this_thread;
    // SVRG under the accountant: one RDP search per silo (4 silos).
    let alg = spec(FINGERPRINTED[1]);
    let c = logistic_ctx(6, Some((2.0, 1e-3)));
    let before = calibrations_on_this_thread();
    let (plan, calibration) = super::plan::plan(&c, alg.0, &alg.1).unwrap();
    assert_eq!(calibrations_on_this_thread() - before, 4);
    // The plan crosses a process boundary as text, f64s exactly.
    let text = toml::to_string(&plan).unwrap();
    let back: super::plan::SoteriaPlan = toml::from_str(&text).unwrap();
    assert_eq!(back, plan, "{text}");
    let before = calibrations_on_this_thread();
    let server = back.server_half(&c).unwrap();
    let silos: Vec<_> = (0..4).map(|i| back.silo_half(&c, i).unwrap()).collect();
    assert_eq!(calibrations_on_this_thread(), before);
    assert_eq!(server.dim(), 3);
    for (s, row) in silos.iter().zip(&calibration) {
        assert_eq!(s.noise_std().to_bits(), row.sigma.to_bits());
        assert!(row.sigma > 0.0);
    }
    let e = back.silo_half(&c, 4).err().unwrap().to_string();
    assert!(e.contains("no silo 4"), "{e}");
    // Halves built one by one from the text plan run exactly as the planner's federation.
    let data = logistic_silos();
    let built = BuiltAlgorithm {
        server,
        silos,
        calibration,
    };
    let mut a = Simulator::new(&data, built, Participation::All, Some(9)).unwrap();
    let mut b = Simulator::new(&data, alg.build(&c).unwrap(), Participation::All, Some(9)).unwrap();
    for _ in 0..6 {
        assert_eq!(
            a.step().unwrap().message_bits,
            b.step().unwrap().message_bits
        );
    }
    let bits = |v: Vec<f64>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(a.output()), bits(b.output()));
    // Closed forms count no calibration.
    let before = calibrations_on_this_thread();
    super::plan::plan(&c, Method::SoteriaFl, &spec(FINGERPRINTED[0]).1).unwrap();
    assert_eq!(calibrations_on_this_thread(), before);
}

#[test]
fn two_rounds_of_q_dpsgd_1_by_hand() {
    // η = 0.1, ε_c = 0.5, n = 2, identity compressor, no noise, G = 100, x⁰ = 0:
    // keep = 1 − ε_c + ε_c/n = 0.75, own = ε_c/n = 0.25.
    // Round 0: x_0 = x_1 = 0, z = 0, z̄⁰ = 0; g_0 = (−1, 0), g_1 = (0, −2).
    // Round 1: x_0 = −0.5·0.1·(−1, 0) = (0.05, 0), x_1 = (0, 0.1); z̄¹ = (0.025, 0.05);
    //   g_0 = (0.05 − 1)(1, 0) = (−0.95, 0), g_1 = (0.2 − 1)(0, 2) = (0, −1.6).
    // Round 2: x_0 = 0.75(0.05, 0) + 0.5(0.025, 0.05) − 0.25(0.05, 0) − 0.05(−0.95, 0)
    //   = (0.085, 0.025); x_1 = 0.75(0, 0.1) + 0.5(0.025, 0.05) − 0.25(0, 0.1) − 0.05(0, −1.6)
    //   = (0.0125, 0.155); z̄² = (0.04875, 0.09).
    let data = two_silos();
    let c = ctx(Arc::new(LinearRegression::new(2)), &[1, 1], 3, 100.0, None);
    let built = spec(
        "kind = \"q-dpsgd-1\"\nstep_size = 0.1\nconsensus = 0.5\nbatch_size = 1\ncalibration = \"none\"\ncompressor = { kind = \"identity\" }",
    )
    .build(&c)
    .unwrap();
    let mut sim = Simulator::new(&data, built, Participation::All, Some(1)).unwrap();
    let close = |a: &[f64], b: [f64; 2]| (a[0] - b[0]).abs() < 1e-15 && (a[1] - b[1]).abs() < 1e-15;
    sim.step().unwrap();
    assert!(close(&sim.output(), [0.0, 0.0]), "{:?}", sim.output());
    sim.step().unwrap();
    assert!(close(&sim.output(), [0.025, 0.05]), "{:?}", sim.output());
    sim.step().unwrap();
    assert!(close(&sim.output(), [0.04875, 0.09]), "{:?}", sim.output());
    let x: Vec<Vec<f64>> = sim
        .silo_states()
        .iter()
        .map(|st| st.vector("x", 2).unwrap())
        .collect();
    assert!(
        close(&x[0], [0.085, 0.025]) && close(&x[1], [0.0125, 0.155]),
        "{x:?}"
    );
    // Round 2's g_0 at x_0 = (0.085, 0.025): (0.085 − 1)(1, 0), kept for round 3's update.
    let g0 = sim.silo_states()[0].vector("pending_g", 2).unwrap();
    assert!(close(&g0, [0.085 - 1.0, 0.0]), "{g0:?}");
}

#[test]
fn q_dpsgd_1_noise_rules_state_and_errors() {
    use super::calibration::qdpsgd_code_sigma;
    // The code's preset: sqrt(16·25·(2 ln 1000 + 1)/3256²) = 0.0236431 (a9a ε = 1, T = 25).
    assert!((qdpsgd_code_sigma(25, 3256, 1.0, 1e-3) - 0.023_643_072_3).abs() < 1e-9);
    let c = logistic_ctx(25, Some((1.0, 1e-3)));
    let q = spec("kind = \"q-dpsgd-1\"\nstep_size = 0.1\ncalibration = \"paper-code\"")
        .build(&c)
        .unwrap();
    // sqrt(16·25·(2 ln 1000 + 1)/30²) for m = 30.
    let want = (400.0 * (2.0 * 1000f64.ln() + 1.0) / 900.0).sqrt();
    assert!((q.calibration[0].sigma - want).abs() < 1e-12 * want);
    // Under the accountant a round is SoteriaFL-SGD's sampled Gaussian: the same σ as CDP-SGD
    // with the same batch.
    let acc = |kind: &str| {
        spec(&format!(
            "kind = \"{kind}\"\nstep_size = 0.1\nbatch_size = 6"
        ))
        .build(&c)
        .unwrap()
        .calibration[0]
            .clone()
    };
    let (a, b) = (acc("q-dpsgd-1"), acc("cdp-sgd"));
    assert_eq!(a.sigma.to_bits(), b.sigma.to_bits());
    assert_eq!(a.run_event, b.run_event);
    // A silo's state round-trips: a restored half answers as the original.
    let data = logistic_silos();
    let mut halves = spec("kind = \"q-dpsgd-1\"\nstep_size = 0.1\nbatch_size = 6")
        .build(&c)
        .unwrap();
    let bcast = halves.server.broadcast(crate::units::Round::FIRST);
    let mut rng = dpfl_privacy::DpRng::from_seed(1, dpfl_privacy::rng::Purpose::Data, 0);
    halves.silos[0]
        .respond(&bcast, &data[0].train, &mut rng)
        .unwrap();
    let st = halves.silos[0].state();
    let mut fresh = spec("kind = \"q-dpsgd-1\"\nstep_size = 0.1\nbatch_size = 6")
        .build(&c)
        .unwrap()
        .silos
        .swap_remove(0);
    fresh.restore(st).unwrap();
    let mut b1 = bcast.clone();
    b1.round = crate::units::Round::new(1);
    let fresh_rng = || dpfl_privacy::DpRng::from_seed(2, dpfl_privacy::rng::Purpose::Data, 0);
    let (mut r1, mut r2) = (fresh_rng(), fresh_rng());
    let m1 = halves.silos[0]
        .respond(&b1, &data[0].train, &mut r1)
        .unwrap();
    let m2 = fresh.respond(&b1, &data[0].train, &mut r2).unwrap();
    assert_eq!(m1, m2);
    let err = |t: &str| spec(t).build(&c).err().expect(t).to_string();
    assert!(
        err("kind = \"q-dpsgd-1\"\nstep_size = 0.1\nconsensus = 1.5")
            .contains("algorithm.consensus")
    );
    assert!(
        err("kind = \"soteria-fl\"\nstep_size = 0.1\nconsensus = 0.5")
            .contains("algorithm.consensus")
    );
    assert!(
        err("kind = \"q-dpsgd-1\"\nstep_size = 0.1\nclipping = \"aggregate-no-guarantee\"")
            .contains("algorithm.clipping")
    );
    assert!(
        err("kind = \"q-dpsgd-1\"\nstep_size = 0.1\nestimator = \"svrg\"")
            .contains("algorithm.estimator")
    );
}

#[test]
fn a_private_saga_run_is_refused_and_a_non_private_one_runs() {
    // Issue 27 finding 8: SAGA's table is hidden state that Lemma 3 does not cover.
    let c = logistic_ctx(10, Some((2.0, 1e-3)));
    for cal in ["accountant", "closed-form", "paper-code"] {
        let text = format!(
            "kind = \"soteria-fl\"\nestimator = \"saga\"\nstep_size = 0.3\ncalibration = \"{cal}\""
        );
        let e = spec(&text).build(&c).err().unwrap().to_string();
        assert!(
            e.contains("estimator") && e.contains("hidden state"),
            "{cal}: {e}"
        );
    }
    let built = spec(
        "kind = \"soteria-fl\"\nestimator = \"saga\"\nstep_size = 0.3\ncalibration = \"none\"",
    )
    .build(&c)
    .unwrap();
    assert_eq!(built.calibration[0].sigma, 0.0);
}
