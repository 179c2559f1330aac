//! End-to-end checks of the simulator on synthetic data.

use dpfl_lab::experiment::{ExperimentSpec, prepare_trial, train_one};
use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

fn spec(extra: &str) -> ExperimentSpec {
    let text = format!(
        r#"
name = "synthetic"
rounds = 30
seed = 11
{extra}
[data]
source = {{ kind = "synthetic", task = "binary", silos = 6, train = 400, test = 100, features = 10, shift = 0.5 }}
[model]
kind = "logistic"
[privacy]
epsilon = 1.0
delta = "1/n^2"
lipschitz = 2.0
[[algorithms]]
kind = "mb-sgd"
calibration = "experiment"
step_size = 0.5
[[algorithms]]
kind = "mb-sgd"
step_size = 0.5
batch_size = 50
"#
    );
    ExperimentSpec::from_toml(&text, "test.toml").unwrap()
}

fn final_model(spec: &ExperimentSpec, threads: usize, alg: usize) -> Vec<f64> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        let mut rng = DpRng::from_seed(5, Purpose::Data, 0);
        let trial = prepare_trial(spec, None, &mut rng).unwrap();
        train_one(
            spec,
            &spec.algorithms[alg].spec,
            &trial,
            Some(99),
            10,
            |_| {},
        )
        .unwrap()
        .final_model
    })
}

#[test]
fn same_seed_gives_the_same_model_with_one_and_two_threads() {
    let s = spec("participation = { kind = \"fixed\", m = 4 }");
    let a = final_model(&s, 1, 0);
    let b = final_model(&s, 2, 0);
    let c = final_model(&s, 2, 0);
    assert_eq!(
        a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        b.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    assert_eq!(b, c);
    // A different seed gives different noise.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let d = pool.install(|| {
        let mut rng = DpRng::from_seed(5, Purpose::Data, 0);
        let trial = prepare_trial(&s, None, &mut rng).unwrap();
        train_one(&s, &s.algorithms[0].spec, &trial, Some(100), 10, |_| {})
            .unwrap()
            .final_model
    });
    assert_ne!(a, d);
}

#[test]
fn private_training_learns_and_noise_follows_the_formula() {
    let s = spec("");
    let mut rng = DpRng::from_seed(5, Purpose::Data, 0);
    let trial = prepare_trial(&s, None, &mut rng).unwrap();
    let private = train_one(&s, &s.algorithms[0].spec, &trial, Some(1), 10, |_| {}).unwrap();
    let plain = train_one(&s, &s.algorithms[1].spec, &trial, Some(1), 10, |_| {}).unwrap();
    // n = 400, R = 30, eps = 1: K = floor(400/(2 sqrt 30)) = 36;
    // sigma^2 = 8·4·30·ln(160000)/(160000) = 0.071898, sigma = 0.268137.
    let c = &private.calibration[0];
    assert_eq!(c.batch_size, 36);
    assert!((c.sigma - 0.268137).abs() < 1e-5, "sigma {}", c.sigma);
    // Both beat chance (0.5) clearly on this separable-ish task.
    assert!(
        plain.test_metric < 0.3,
        "non-private error {}",
        plain.test_metric
    );
    assert!(
        private.test_metric < 0.4,
        "private error {}",
        private.test_metric
    );
    // Every participating round spent one event per silo.
    assert_eq!(private.spent[0].len(), 30);
    assert!(plain.spent[0].is_empty());
}

#[test]
fn bad_configs_name_the_field() {
    let bad = r#"
name = "x"
rounds = 3
[data]
source = { kind = "synthetic", task = "binary", silos = 2, train = 10, test = 5, features = 3 }
[model]
kind = "logistic"
[[algorithms]]
kind = "warp-drive"
step_size = 1.0
"#;
    let e = ExperimentSpec::from_toml(bad, "bad.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.toml") && e.contains("warp-drive"), "{e}");
    let bad_eps = bad.replace(
        "kind = \"warp-drive\"",
        "kind = \"mb-sgd\"\ncalibration = \"experiment\"",
    ) + "[privacy]\nepsilon = -1.0\ndelta = 1e-5\n";
    let e = ExperimentSpec::from_toml(&bad_eps, "bad.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("privacy.epsilon"), "{e}");
    let bad_delta = bad_eps
        .replace("epsilon = -1.0", "epsilon = 1.0")
        .replace("delta = 1e-5", "delta = 1.5");
    let e = ExperimentSpec::from_toml(&bad_delta, "bad.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("privacy.delta"), "{e}");
}

#[test]
fn batch_size_above_n_is_refused() {
    let s = spec("").algorithms[1].spec.clone();
    let s = match s {
        dpfl::algo::AlgorithmSpec::MbSgd(a) => {
            dpfl::algo::AlgorithmSpec::MbSgd(dpfl::algo::lowy::MbSgdSpec {
                step_size: a.step_size,
                calibration: None,
                batch_size: Some(401),
                output: Default::default(),
                sampling: Default::default(),
            })
        }
        other => other,
    };
    let spec = spec("");
    let mut rng = DpRng::from_seed(5, Purpose::Data, 0);
    let trial = prepare_trial(&spec, None, &mut rng).unwrap();
    let e = train_one(&spec, &s, &trial, Some(1), 10, |_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("K") && e.contains("400"), "{e}");
}
