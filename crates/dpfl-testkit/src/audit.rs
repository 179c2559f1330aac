//! The experiment files of the audit's tests, shared by `dpfl_lab::audit`'s unit tests and the
//! `dpfl audit` command-line tests (one copy): 3 silos of 100 synthetic binary records with 4
//! features, all silos in every round, claimed (1, 1/n²)-DP at L = 1. The audit puts its
//! canaries into silo 0 (100 of them: n₀ = 200, so K = 100 draws half of silo 0).

use crate::experiment::Head;

/// The audit's head: 3 silos of 100 + 20 records, all in every round, R = `rounds`.
fn head(name: &str, rounds: usize) -> Head<'_> {
    Head {
        name,
        rounds,
        seed: 3,
        participation: Some(r#"{ kind = "all" }"#),
        train: 100,
        test: 20,
        ..Head::default()
    }
}

/// Five algorithms on logistic regression, R = 50: accountant-calibrated MB-SGD (K = 100),
/// private Local SGD, accelerated MB-SGD, Noisy MB-SGD (theory), and a non-private MB-SGD
/// (index 4: no claim to audit).
pub fn experiment() -> String {
    head("audit", 50).toml(
        r#"[[algorithms]]
kind = "mb-sgd"
calibration = "accountant"
step_size = 0.3
batch_size = 100
[[algorithms]]
kind = "local-sgd"
private = true
step_size = 0.05
local_steps = 10
[[algorithms]]
kind = "accelerated-mb-sgd"
sampling = "erm"
calibration = "experiment"
step_size = 1.0
[[algorithms]]
kind = "noisy-mb-sgd"
calibration = "theory"
params = "theory"
constants = { smoothness = 0.25, diameter = 10.0 }
[[algorithms]]
kind = "mb-sgd"
step_size = 0.3
batch_size = 20
"#,
    )
}

/// One experiment of `rounds` rounds with the `[model]` table's body `model` and one
/// `[[algorithms]]` table's body `algorithm` (per-example clip 1).
pub fn kinds_toml(rounds: usize, model: &str, algorithm: &str) -> String {
    Head {
        clip: Some(1.0),
        model,
        ..head("audit-kinds", rounds)
    }
    .toml(&format!("[[algorithms]]\n{algorithm}\n"))
}

/// `[model]` body: logistic regression.
pub const LOGISTIC: &str = r#"kind = "logistic""#;

/// `[model]` body: a one-hidden-layer network of 4 units on the 4 data features.
pub const MLP: &str = r#"kind = "mlp"
hidden = 4
inputs = 4"#;

/// `[[algorithms]]` body: MB-SGD calibrated by the accountant, K = 100 with replacement.
pub const MB_SGD: &str = r#"kind = "mb-sgd"
calibration = "accountant"
step_size = 0.3
batch_size = 100"#;

/// `[[algorithms]]` body: SoteriaFL-GD with seeded random-k (half the coordinates) and
/// shifted compression.
pub const SOTERIA_RANDK: &str = r#"kind = "soteria-fl"
estimator = "gd"
step_size = 0.3
compressor = { kind = "random-k", fraction = 0.5, indices = "seed" }"#;

/// `[[algorithms]]` body: CDP-SGD with the official SoteriaFL code's noise preset
/// (`calibration = "paper-code"`, σ² = 8G²T ln(1/δ)/(m²ε²), which ignores that one record
/// moves a b-record mean by 2G/b, not 2G/m), b = 5 draws with replacement, uncompressed.
/// With the audit's 2000 canaries (n₀ = 2100) and R = 20 its z = σb/(2G) ≈ 0.06: far more
/// than the claimed ε = 1 (issue 27, finding 6).
pub fn cdp_paper_code() -> String {
    cdp_sgd("paper-code")
}

/// [`cdp_paper_code`] with dpfl's accountant calibration: the honest build of the same run.
pub fn cdp_accountant() -> String {
    cdp_sgd("accountant")
}

fn cdp_sgd(calibration: &str) -> String {
    format!(
        "kind = \"cdp-sgd\"\nstep_size = 0.3\nbatch_size = 5\ncalibration = \"{calibration}\"\n\
         sampling = \"with-replacement\"\ncompressor = {{ kind = \"identity\" }}"
    )
}
