//! Issue 16: every private algorithm of the catalogue calibrates to its target ε. For each
//! `kind` the experiment schema names (derived from the catalogue, so a new kind without a
//! case here fails), a small plan at a target (ε, δ) is computed and each silo's planned run
//! event is accounted (replace-one, RDP and PLD, the tighter): the certified ε must never
//! exceed the target, and where the calibration searches the accountant it must be close to
//! it (≥ 0.9·target). Closed forms are looser; each such case says why.
//!
//! Not covered, on purpose: the reproduction presets that the papers state without a sound
//! constant — Lowy & Razaviyayn App. I's `calibration = "experiment"` (Abadi et al.'s
//! unstated constants: certified above the target at larger ε, docs/reproductions.md), and
//! SoteriaFL's `closed-form` / `paper-code` presets (no guarantee implied; the run reports
//! what the accountants certify). Every kind is covered by its default or accountant rule.
//! Poisson sampling (`sampling = "poisson"`) has no replace-one RDP curve in dpfl; its
//! accountant calibration is the sampled PLD's alone (it used to be refused when planned).

use dpfl_lab::experiment::{ExperimentSpec, plan_from};
use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::{Delta, Neighbouring};

/// Target ε (below 1: pan-private AC-SA's Gaussian needs ε < 1) and the silos' δ (1/n² for
/// n = 200).
const EPS: f64 = 0.9;
const N: usize = 200;

/// How close to the target a case must certify.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// An accountant search: certified ∈ [0.9·target, target].
    Tight,
    /// A closed form or a guarantee whose accounting is looser than dpfl's: certified ≤
    /// target only. The reason is printed with the case.
    Below(#[allow(dead_code)] &'static str),
}

/// (kind, the algorithm's table, the expectation): the private configurations checked.
fn cases() -> Vec<(&'static str, &'static str, Expect)> {
    use Expect::*;
    vec![
        (
            "mb-sgd",
            "kind = \"mb-sgd\"\ncalibration = \"accountant\"\nstep_size = 0.5\nbatch_size = 20",
            Tight,
        ),
        (
            "mb-sgd",
            "kind = \"mb-sgd\"\ncalibration = \"theory\"\nstep_size = 0.5",
            Below("Thm D.1's closed form (constant 256) is far above the accountant's noise"),
        ),
        (
            "noisy-mb-sgd",
            "kind = \"noisy-mb-sgd\"\ncalibration = \"accountant\"\nstep_size = 0.5\nbatch_size = 20\nsampling = \"without-replacement\"",
            Tight,
        ),
        (
            "noisy-mb-sgd",
            "kind = \"noisy-mb-sgd\"\ncalibration = \"accountant\"\nstep_size = 0.5\nbatch_size = 20\nsampling = \"poisson\"",
            Tight,
        ),
        (
            "accelerated-mb-sgd",
            "kind = \"accelerated-mb-sgd\"\nsampling = \"erm\"\ncalibration = \"accountant\"\nstep_size = 1.0\nbatch_size = 20",
            Tight,
        ),
        (
            "local-sgd",
            "kind = \"local-sgd\"\ncalibration = \"accountant\"\nstep_size = 0.1\nlocal_steps = 2",
            Tight,
        ),
        (
            "sdp-mb-sgd",
            "kind = \"sdp-mb-sgd\"\nstep_size = 0.5\nbatch_size = 20\ncalibration = { kind = \"accountant\" }",
            Below("the no-shuffler guarantee each silo's ledger charges is a closed-form chain"),
        ),
        (
            "sdp-accelerated-mb-sgd",
            "kind = \"sdp-accelerated-mb-sgd\"\nstep_size = 1.0",
            Below("PVEC's Theorem 3.2 parameters, a closed form"),
        ),
        (
            "psgd",
            "kind = \"psgd\"\nstep_size = 0.5",
            Below("PVEC's Theorem 3.2 parameters, a closed form"),
        ),
        (
            "pgd",
            "kind = \"pgd\"\nstep_size = 0.5",
            Below("PVEC's Theorem 3.2 parameters, a closed form"),
        ),
        (
            "pagd",
            "kind = \"pagd\"\nsmoothness = 1.0\ndiameter = 10.0",
            Below("PVEC's Theorem 3.2 parameters, a closed form"),
        ),
        (
            "pan-private-acsa",
            "kind = \"pan-private-acsa\"\nsmoothness = 0.25\nbatch_size = 10\ndiameter = 10.0",
            Below("Algorithm 6's Gaussian ζ rule with advanced composition, a closed form"),
        ),
        (
            "norm-fed-avg",
            r#"kind = "norm-fed-avg"
step_size = 0.1
local_steps = 2
batch_size = 20
variant = { kind = "dp-norm-fed-avg" }
[algorithms.privacy]
s = 64
sensitivity = { kind = "worst-case" }
budget = { kind = "per-round", epsilon = 0.1, delta = 1e-6 }"#,
            Below(
                "its budget is its own (per round, Theorem 1's TDL calibration): R = 5 rounds of (0.1, 1e-6) compose to at most 0.5 < 0.9",
            ),
        ),
        (
            "soteria-fl",
            "kind = \"soteria-fl\"\nstep_size = 0.3\nbatch_size = 20",
            Tight,
        ),
        (
            "soteria-fl",
            "kind = \"soteria-fl\"\nestimator = \"svrg\"\nstep_size = 0.3\nbatch_size = 20",
            Tight,
        ),
        (
            "cdp-sgd",
            "kind = \"cdp-sgd\"\nstep_size = 0.3\nbatch_size = 20",
            Tight,
        ),
        (
            "ldp-sgd",
            "kind = \"ldp-sgd\"\nstep_size = 0.3\nbatch_size = 20",
            Tight,
        ),
        (
            "ldp-svrg",
            "kind = \"ldp-svrg\"\nstep_size = 0.3\nbatch_size = 20",
            Tight,
        ),
        (
            "q-dpsgd-1",
            "kind = \"q-dpsgd-1\"\nstep_size = 0.3\nbatch_size = 20",
            Tight,
        ),
    ]
}

/// Every `kind` of the algorithm catalogue, from the experiment file's JSON Schema.
fn catalogue_kinds() -> Vec<String> {
    let schema = serde_json::to_value(schemars::schema_for!(dpfl::algo::AlgorithmSpec)).unwrap();
    let mut kinds = Vec::new();
    fn walk(v: &serde_json::Value, kinds: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(k) = m.get("properties").and_then(|p| p.get("kind")) {
                    for s in k.get("const").into_iter().chain(
                        k.get("enum")
                            .into_iter()
                            .flat_map(|e| e.as_array().map(|a| a.iter()).into_iter().flatten()),
                    ) {
                        if let Some(s) = s.as_str() {
                            kinds.push(s.to_string());
                        }
                    }
                }
                m.values().for_each(|v| walk(v, kinds));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, kinds)),
            _ => {}
        }
    }
    // Only the top level's variants: the `oneOf` / `anyOf` of the enum.
    for key in ["oneOf", "anyOf"] {
        if let Some(vs) = schema.get(key).and_then(|v| v.as_array()) {
            for v in vs {
                if let Some(k) = v.get("properties").and_then(|p| p.get("kind")) {
                    walk(
                        &serde_json::json!({ "properties": { "kind": k } }),
                        &mut kinds,
                    );
                }
            }
        }
    }
    kinds.sort();
    kinds.dedup();
    kinds
}

fn experiment(algorithm: &str) -> ExperimentSpec {
    let text = format!(
        r#"
name = "calibration"
rounds = 5
participation = {{ kind = "all" }}
clip = 1.0
[data]
source = {{ kind = "synthetic", task = "binary", silos = 2, train = {N}, test = 20, features = 4 }}
[model]
kind = "logistic"
[privacy]
epsilon = {EPS}
delta = "1/n^2"
lipschitz = 1.0
[[algorithms]]
{algorithm}
"#
    );
    ExperimentSpec::from_toml(&text, "calibration.toml").unwrap()
}

/// The certified ε of each silo's planned run (the tighter of RDP and PLD), or why not.
fn certified(algorithm: &str) -> Result<Vec<f64>, String> {
    let spec = experiment(algorithm);
    let records = [N; 2];
    let plan = plan_from(&spec, 0, 4, Some(2), &records, 1.0).map_err(|e| e.to_string())?;
    let delta = Delta::new(1.0 / (N * N) as f64).unwrap();
    plan.calibration
        .iter()
        .map(|c| {
            let event = c
                .run_event
                .as_ref()
                .ok_or_else(|| format!("silo {} has no run event", c.silo))?;
            let acc = |k: AccountantKind| k.epsilon(Neighbouring::ReplaceOne, event, delta);
            match (acc(AccountantKind::Rdp), acc(AccountantKind::Pld)) {
                (Ok(a), Ok(b)) => Ok(a.min(b)),
                (Ok(a), Err(_)) | (Err(_), Ok(a)) => Ok(a),
                (Err(a), Err(b)) => Err(format!("no accountant takes {event}: {a}; {b}")),
            }
        })
        .collect()
}

#[test]
fn every_private_kind_of_the_catalogue_has_a_case() {
    let kinds = catalogue_kinds();
    assert!(kinds.len() >= 16, "the schema's kinds: {kinds:?}");
    let covered: Vec<&str> = cases().iter().map(|c| c.0).collect();
    for k in &kinds {
        assert!(
            covered.contains(&k.as_str()),
            "algorithm kind {k:?} is in the catalogue but has no calibration case here"
        );
    }
    for c in &covered {
        assert!(kinds.iter().any(|k| k == c), "{c} is not a catalogue kind");
    }
}

/// Checks the cases of `kinds` (or all others with `others`); panics listing every failure.
fn check(kinds: &[&str], others: bool) {
    let mut failures = Vec::new();
    for (kind, algorithm, expect) in cases() {
        if kinds.contains(&kind) == others {
            continue;
        }
        let spec = experiment(algorithm);
        assert!(
            spec.algorithms[0].spec.is_private(),
            "{kind} case is private"
        );
        let start = std::time::Instant::now();
        let eps = match certified(algorithm) {
            Ok(e) => e,
            Err(e) => {
                failures.push(format!("{kind} ({algorithm:?}): {e}"));
                continue;
            }
        };
        let worst = eps.iter().copied().fold(0.0, f64::max);
        let best = eps.iter().copied().fold(f64::INFINITY, f64::min);
        eprintln!(
            "{kind:<24} certified {eps:?} ({expect:?}) in {:.1} s",
            start.elapsed().as_secs_f64()
        );
        let ok = match expect {
            Expect::Tight => worst <= EPS * (1.0 + 1e-9) && best >= 0.9 * EPS,
            Expect::Below(_) => worst <= EPS * (1.0 + 1e-9),
        };
        if !ok {
            failures.push(format!(
                "{kind} ({algorithm:?}): certified {eps:?}, {expect:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The SoteriaFL wing (its accountant searches take seconds each) apart from the others, so
/// that the two halves run in parallel.
const SOTERIA: [&str; 5] = ["soteria-fl", "cdp-sgd", "ldp-sgd", "ldp-svrg", "q-dpsgd-1"];

#[test]
fn soteria_algorithms_certify_at_most_their_target() {
    check(&SOTERIA, false);
}

#[test]
fn every_other_private_algorithm_certifies_at_most_its_target() {
    check(&SOTERIA, true);
}
