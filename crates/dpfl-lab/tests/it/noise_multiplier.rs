//! Issue 16: `privacy.noise_multiplier` in an experiment file. With z given instead of a
//! target ε, each silo's σ is z times its message's sensitivity, the plan carries z (so the
//! simulator and every network process build the same halves), and the run reports the ε the
//! accountants certify for that noise at the silo's δ. Bad combinations are refused naming the
//! fields.

use dpfl_lab::experiment::{ExperimentSpec, prepare_trial, summary_of, train_one};
use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::event::Sampling;
use dpfl_privacy::rng::Purpose;
use dpfl_privacy::{Delta, DpRng, Neighbouring, PrivacyEvent};

const Z: f64 = 1.1;

/// Three silos of n = 50 training records, L = 1, R = 5, δ = 1/n² = 4e-4.
fn text(privacy: &str, algorithm: &str) -> String {
    format!(
        r#"
name = "z"
rounds = 5
seed = 3
[data]
source = {{ kind = "synthetic", task = "binary", silos = 3, train = 50, test = 10, features = 4 }}
[model]
kind = "logistic"
[privacy]
delta = "1/n^2"
lipschitz = 1.0
{privacy}
[[algorithms]]
{algorithm}
"#
    )
}

fn spec(privacy: &str, algorithm: &str) -> dpfl::Result<ExperimentSpec> {
    ExperimentSpec::from_toml(&text(privacy, algorithm), "z.toml")
}

fn run(spec: &ExperimentSpec) -> dpfl_lab::experiment::AlgorithmSummary {
    let mut rng = DpRng::from_seed(5, Purpose::Data, 0);
    let trial = prepare_trial(spec, None, &mut rng).unwrap();
    let r = train_one(spec, &spec.algorithms[0].spec, &trial, Some(9), 5, |_| {}).unwrap();
    summary_of(spec, &spec.algorithms[0], &trial, &r)
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

#[test]
fn mb_sgd_with_z_adds_z_times_the_sensitivity_and_reports_the_accountants_epsilon() {
    let s = spec(
        &format!("noise_multiplier = {Z}"),
        "kind = \"mb-sgd\"\ncalibration = \"accountant\"\nstep_size = 0.5\nbatch_size = 10",
    )
    .unwrap();
    let sum = run(&s);
    // σ = z·Δ with Δ = 2L/K = 2·1/10 = 0.2: σ = 0.22 for every silo.
    assert_eq!(sum.silos.len(), 3);
    for c in &sum.silos {
        assert!(close(c.sigma, 0.22, 1e-12), "{}", c.sigma);
        assert_eq!(c.batch_size, 10);
        assert!(c.formula.contains("set directly"), "{}", c.formula);
    }
    assert!(close(sum.noise_multiplier.unwrap(), Z, 1e-12));
    // No target: the certified ε is what the run reports.
    assert_eq!(sum.epsilon, None);
    assert_eq!(sum.delta, Some(4e-4));
    // The same event as `dpfl account --noise-multiplier 1.1 --delta 4e-4 --sampling
    // with-replacement --rate 0.2 --dataset-size 50 --steps 5` (replace-one).
    let event = PrivacyEvent::Gaussian {
        noise_multiplier: Z,
    }
    .sampled(Sampling::WithReplacement {
        population: 50,
        draws: 10,
    })
    .repeated(5);
    let d = Delta::new(4e-4).unwrap();
    let rdp = AccountantKind::Rdp
        .epsilon(Neighbouring::ReplaceOne, &event, d)
        .unwrap();
    let pld = AccountantKind::Pld
        .epsilon(Neighbouring::ReplaceOne, &event, d)
        .unwrap();
    assert_eq!(sum.privacy.len(), 3);
    for p in &sum.privacy {
        assert_eq!(p.target_epsilon, None);
        assert_eq!(p.target_delta, 4e-4);
        assert!(close(p.rdp_epsilon.unwrap(), rdp, 1e-9), "{p:?} vs {rdp}");
        assert!(close(p.pld_epsilon.unwrap(), pld, 1e-9), "{p:?} vs {pld}");
    }
    let certified = sum.certified_epsilon.unwrap();
    assert!(close(certified, rdp.min(pld), 1e-9), "{certified}");
    let json = serde_json::to_value(&sum).unwrap();
    assert!(json["certified_epsilon"].as_f64().is_some(), "{json}");
    assert!(json["epsilon"].is_null());
}

#[test]
fn a_larger_z_certifies_a_smaller_epsilon() {
    let eps = |z: f64| {
        let s = spec(
            &format!("noise_multiplier = {z}"),
            "kind = \"mb-sgd\"\ncalibration = \"experiment\"\nstep_size = 0.5\nbatch_size = 10",
        )
        .unwrap();
        run(&s).certified_epsilon.unwrap()
    };
    let (a, b) = (eps(0.8), eps(2.0));
    assert!(a > b && b > 0.0, "{a} {b}");
}

#[test]
fn local_sgd_and_cdp_sgd_take_z_with_their_own_sensitivity() {
    // Local SGD: one record's gradient per local step, Δ = 2L = 2: σ = 2z.
    let s = spec(
        &format!("noise_multiplier = {Z}"),
        "kind = \"local-sgd\"\nprivate = true\nstep_size = 0.1\nlocal_steps = 3",
    )
    .unwrap();
    let sum = run(&s);
    for c in &sum.silos {
        assert!(close(c.sigma, 2.0 * Z, 1e-12), "{}", c.sigma);
    }
    assert!(close(sum.noise_multiplier.unwrap(), Z, 1e-12));
    // CDP-SGD: a minibatch mean of b = 5 per-record gradients clipped at G = L = 1,
    // replace-one Δ = 2G/b = 0.4: σ = 0.44.
    let s = spec(
        &format!("noise_multiplier = {Z}"),
        "kind = \"cdp-sgd\"\nstep_size = 0.1\nbatch_size = 5",
    )
    .unwrap();
    let sum = run(&s);
    for c in &sum.silos {
        assert!(close(c.sigma, 0.44, 1e-12), "{}", c.sigma);
    }
    assert!(close(sum.noise_multiplier.unwrap(), Z, 1e-12));
    assert!(sum.certified_epsilon.unwrap() > 0.0);
}

/// The error's one line, which must name every `fields` entry.
fn refused(privacy: &str, algorithm: &str, fields: &[&str]) {
    let msg = match spec(privacy, algorithm) {
        Err(e) => e.to_string(),
        // Refused when planned (a rule that needs ε, found only with the data's shape).
        Ok(s) => {
            let mut rng = DpRng::from_seed(5, Purpose::Data, 0);
            let trial = prepare_trial(&s, None, &mut rng).unwrap();
            match train_one(&s, &s.algorithms[0].spec, &trial, Some(9), 5, |_| {}) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{privacy} / {algorithm} was accepted"),
            }
        }
    };
    assert!(!msg.contains('\n'), "{msg}");
    for f in fields {
        assert!(msg.contains(f), "{f} not in: {msg}");
    }
}

#[test]
fn bad_combinations_are_refused_naming_the_fields() {
    let mb = "kind = \"mb-sgd\"\ncalibration = \"accountant\"\nstep_size = 0.5\nbatch_size = 10";
    // Both, and neither.
    refused(
        "epsilon = 1.0\nnoise_multiplier = 1.0",
        mb,
        &["privacy.epsilon", "privacy.noise_multiplier", "both"],
    );
    refused(
        "",
        mb,
        &["privacy.epsilon", "privacy.noise_multiplier", "neither"],
    );
    refused("noise_multiplier = 0.0", mb, &["privacy.noise_multiplier"]);
    refused("noise_multiplier = -1.0", mb, &["privacy.noise_multiplier"]);
    // No budget to enforce, no per-silo targets.
    refused(
        "noise_multiplier = 1.0\nenforce_budget = true",
        mb,
        &["privacy.enforce_budget", "privacy.noise_multiplier"],
    );
    refused(
        "noise_multiplier = 1.0\nepsilons = [1.0, 1.0, 1.0]",
        mb,
        &["privacy.epsilons"],
    );
    // The default batch size reads ε.
    refused(
        "noise_multiplier = 1.0",
        "kind = \"mb-sgd\"\ncalibration = \"accountant\"\nstep_size = 0.5",
        &["batch_size", "noise_multiplier"],
    );
    refused(
        "noise_multiplier = 1.0",
        "kind = \"local-sgd\"\nprivate = true\nstep_size = 0.1",
        &["local_steps", "noise_multiplier"],
    );
    // Algorithms whose noise is not one Gaussian multiplier name themselves.
    refused(
        "noise_multiplier = 1.0",
        "kind = \"psgd\"\nstep_size = 0.5",
        &["privacy.noise_multiplier", "PSGD", "shuffler"],
    );
    refused(
        "noise_multiplier = 1.0",
        "kind = \"soteria-fl\"\nestimator = \"svrg\"\nstep_size = 0.5",
        &["privacy.noise_multiplier", "SoteriaFL-SVRG", "Lemma 3"],
    );
    refused(
        "noise_multiplier = 1.0",
        r#"kind = "norm-fed-avg"
step_size = 0.1
local_steps = 2
batch_size = 16
variant = { kind = "dp-norm-fed-avg" }
[algorithms.privacy]
s = 64
sensitivity = { kind = "mu", mu = 0.1 }
budget = { kind = "per-round", epsilon = 10.0, delta = 1e-6 }"#,
        &["privacy.noise_multiplier", "truncated discrete Laplace"],
    );
}
