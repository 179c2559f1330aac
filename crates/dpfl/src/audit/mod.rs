//! `dpfl audit`: an empirical privacy audit of one configured algorithm from one training run
//! (Steinke, Nasr & Jagielski 2023, "Privacy auditing with one (1) training run",
//! arXiv:2305.08846, white-box gradient-space auditing of §6 in data form).
//!
//! * **Canaries (replace-one).** m canary records, all in silo 0's training data. Canary j
//!   is one row whose only non-zero feature is a fresh column d + j (every other row, in every
//!   silo, has 0 there) with value `scale`; its secret bit S_j (a fair coin from the seeded
//!   audit stream) is its label: 1 ("in") or 0 ("out"). Changing one S_j replaces one record by
//!   another, exactly the replace-one relation dpfl's ledgers certify, and n_0 (hence K/n_0
//!   and δ) does not depend on the bits. The model is wrapped so that a canary row's gradient
//!   is ±scale on one parameter p_j of its own column at every point ([`canary`], white-box
//!   gradient canaries): the silo half samples, clips (at the calibrated L, so exactly ±L) and
//!   noises it like any record, every time the sampler draws it. Nothing else in the
//!   algorithm is changed.
//! * **White box on silo 0's messages.** Every round runs every silo's half through the round
//!   core's silo step and the server half's aggregation; silo 0's released (noised) dense
//!   messages are what the auditor sees (what the server sees). Canary j's score is
//!   Σ_t u_t[p_j], the released update's coordinate on the canary's own parameter: the
//!   message for algorithms that send gradients, broadcast point − message for Local SGD
//!   (which sends its model after local descent steps).
//! * **Guesses.** The k highest scores are guessed "in", the k lowest "out", the rest
//!   abstain; the number of correct guesses becomes an ε lower bound at confidence 1 − β by
//!   the exact binomial-tail method ([`bound`]).
//!
//! Decisions: all silos take part in every round (participation only removes releases of
//! silo 0; the claimed ε is silo 0's budget, which the calibration meets); the claim is silo
//! 0's (ε, δ) as configured (δ from `privacy.delta` at the augmented n_0 = n + m). Only dense
//! messages are scored (compressed payloads are refused), and only models with a parameter per
//! input feature (linear, logistic, softmax; not the MLPs) can carry gradient canaries.
//!
//! Power against sampled algorithms (measured, not a guarantee). A record drawn K of n per
//! round is seen ≈ RK/n times and the accountant's ε is driven by rare many-draw events, so
//! one run sees far less than the certified ε. Two choices make sampled builds catchable: the
//! replace-one canary pair (the canary's two states differ by 2L per draw, not L as for
//! present/absent canaries, which also changed n_0 and so were not the certified relation),
//! and a silo 0 made mostly of canaries (K/n_0 ≈ ½, where amplification by sampling is weak
//! and the certified ε is close to what one run can observe). In the tests (n_0 = 220, K = 100,
//! R = 50, m = 200, k = 50) MB-SGD calibrated by the accountant for ε = 30 while claiming 1 is
//! caught, and the correctly noised build is not (`tests` below). With the earlier data
//! canaries (present/absent, n_0 ≈ 200, K = 20) builds for ε = 30 and 100 got only 65 and 70
//! of 100 guesses right (bounds 0.26 and 0.47): not caught. A per-step likelihood-ratio score
//! for the Binomial(K, 1/n) count mixture was tried in simulation and found no better than the
//! plain sum at these signal levels (≈ 0.8 noise standard deviations per draw at ε = 30).

pub mod bound;
pub mod canary;

use std::time::Instant;

use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

use crate::algo::Payload;
use crate::data::{Dataset, SiloData};
use crate::experiment::{ExperimentSpec, TrialData, build_context, prepare_trial};
use crate::linalg::Matrix;
use crate::round::{self, NoLedger, SiloAnswer};
use crate::{Error, Result};

pub use bound::{Guesses, epsilon_lower_bound, p_value};

/// What to audit and how hard.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    /// Index of the algorithm in the experiment.
    pub algorithm: usize,
    /// m, the number of canaries.
    pub canaries: usize,
    /// k: guesses on each side (2k in all).
    pub k: usize,
    /// 1 − β.
    pub confidence: f64,
    /// Seeds the canary draw and every silo's stream.
    pub seed: u64,
    /// The canary's feature value (large: its gradient is clipped at L every time).
    pub scale: f64,
    /// Test-only: build the halves for ε·factor while claiming ε (under-noised). Not a config
    /// field and not compiled outside tests.
    #[cfg(test)]
    pub(crate) under_noise: Option<f64>,
}

impl AuditOptions {
    pub fn new(algorithm: usize) -> Self {
        AuditOptions {
            algorithm,
            canaries: 1000,
            k: 100,
            confidence: 0.95,
            seed: 1,
            scale: 1e3,
            #[cfg(test)]
            under_noise: None,
        }
    }
}

/// The audit's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AuditReport {
    pub algorithm: String,
    pub claimed_epsilon: f64,
    pub delta: f64,
    pub epsilon_lower_bound: f64,
    pub confidence: f64,
    pub canaries: usize,
    pub included: usize,
    pub k: usize,
    pub guesses: usize,
    pub correct: usize,
    pub seconds: f64,
}

/// `data` with `m` zero columns appended, and one row per `(j, label)` canary (feature d + j).
fn augment(data: &Dataset, m: usize, canaries: &[(usize, f64)], scale: f64) -> Result<Dataset> {
    let (n, d) = (data.len(), data.num_features());
    let rows = n + canaries.len();
    let mut x = Matrix::zeros(rows, d + m);
    for i in 0..n {
        x.row_mut(i)[..d].copy_from_slice(data.x().row(i));
    }
    let mut y = data.y().to_vec();
    for (r, &(j, label)) in canaries.iter().enumerate() {
        x.row_mut(n + r)[d + j] = scale;
        y.push(label);
    }
    let mut names = data.feature_names().to_vec();
    names.extend((0..m).map(|j| format!("canary-{j}")));
    Dataset::new(x, y, data.target().clone(), names)
}

/// Runs the audit of `opts.algorithm` of `spec` (module doc).
pub fn audit(
    spec: &ExperimentSpec,
    data_dir: Option<&std::path::Path>,
    opts: &AuditOptions,
) -> Result<AuditReport> {
    let start = Instant::now();
    let entry = spec.algorithms.get(opts.algorithm).ok_or_else(|| {
        Error::config(
            "--algorithm",
            format!(
                "index {} but the experiment has {} algorithms",
                opts.algorithm,
                spec.algorithms.len()
            ),
        )
    })?;
    if !entry.spec.is_private() {
        return Err(Error::config(
            format!("algorithms[{}]", opts.algorithm),
            "is not private: there is no claim to audit",
        ));
    }
    let (m, k) = (opts.canaries, opts.k);
    if m == 0 || k == 0 || 2 * k > m {
        return Err(Error::config(
            "audit",
            format!("need 1 ≤ k and 2k ≤ canaries, got k = {k}, canaries = {m}"),
        ));
    }
    if !(opts.confidence > 0.0 && opts.confidence < 1.0) {
        return Err(Error::config("--confidence", "must be in (0, 1)"));
    }
    if !(opts.scale.is_finite() && opts.scale > 0.0) {
        return Err(Error::config("--scale", "must be finite and > 0"));
    }
    let mut rng = DpRng::new(Some(opts.seed), Purpose::Data, 0)?;
    let trial = prepare_trial(spec, data_dir, &mut rng)?;
    // S_j = 1 ("in", label 1) for the canaries in `included`, else 0 ("out").
    let mut included = Vec::new();
    dpfl_privacy::sampler::Poisson::new(m, 0.5)?.draw(&mut rng, &mut included);
    let is_in = {
        let mut v = vec![false; m];
        for &j in &included {
            v[j] = true;
        }
        v
    };
    let canaries: Vec<(usize, f64)> = (0..m)
        .map(|j| (j, if is_in[j] { 1.0 } else { 0.0 }))
        .collect();
    let d = trial.silos[0].train.num_features();
    let silos = trial
        .silos
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mine: &[(usize, f64)] = if i == 0 { &canaries } else { &[] };
            Ok(SiloData {
                train: augment(&s.train, m, mine, opts.scale)?,
                test: augment(&s.test, m, &[], opts.scale)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let classes = silos[0].train.target().num_classes();
    let canary_model = std::sync::Arc::new(canary::CanaryModel::new(
        spec.model.build(d + m, classes)?,
        d,
        m,
    )?);
    let params: Vec<usize> = (0..m).map(|j| canary_model.param(j)).collect();
    let model: std::sync::Arc<dyn crate::model::Model> = canary_model;
    let trial = TrialData {
        silos,
        model,
        preprocessing: Default::default(),
    };
    let ctx = build_context(spec, &trial)?;
    let (claimed, delta) = ctx.silos[0]
        .budget
        .map(|(e, d)| (e.get(), d.get()))
        .ok_or_else(|| Error::config("privacy", "silo 0 has no budget to audit"))?;
    #[cfg(test)]
    let ctx = match opts.under_noise {
        Some(f) => {
            let mut spec = spec.clone();
            if let Some(p) = spec.privacy.as_mut() {
                p.epsilon *= f;
                p.epsilons = None;
            }
            build_context(&spec, &trial)?
        }
        None => ctx,
    };
    let mut built = entry.spec.build(&ctx)?;
    let dim = ctx.federation.dim;
    let model_like = matches!(entry.spec, crate::algo::AlgorithmSpec::LocalSgd { .. });
    let mut rngs = (0..trial.silos.len() as u32)
        .map(|i| round::silo_rng(Some(opts.seed), i))
        .collect::<Result<Vec<_>>>()?;
    let mut scores = vec![0.0; m];
    for r in 0..spec.rounds {
        let r = crate::algo::Round::checked(r)?;
        let b = built.server.broadcast(r);
        let mut collected = round::Collected::default();
        for (i, half) in built.silos.iter_mut().enumerate() {
            let mut spent = Vec::new();
            let answer = round::silo_step(
                half.as_mut(),
                &mut NoLedger,
                &mut spent,
                &b,
                &trial.silos[i].train,
                &mut rngs[i],
                dim,
            )?;
            if let (0, SiloAnswer::Reply(reply)) = (i, &answer) {
                for msg in &reply.messages {
                    let Payload::Dense(v) = &msg.payload else {
                        return Err(Error::config(
                            format!("algorithms[{}]", opts.algorithm),
                            "sends a non-dense message; the audit scores dense updates only",
                        ));
                    };
                    // The released update on canary j's own parameter.
                    for (score, &k) in scores.iter_mut().zip(&params) {
                        *score += if model_like { b.point[k] - v[k] } else { v[k] };
                    }
                }
            }
            collected.push(i as u32, answer);
        }
        collected.aggregate(built.server.as_mut(), r, None)?;
    }
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let correct = order[..k].iter().filter(|&&j| is_in[j]).count()
        + order[m - k..].iter().filter(|&&j| !is_in[j]).count();
    let g = Guesses {
        m: m as u64,
        r: 2 * k as u64,
        v: correct as u64,
    };
    let eps = epsilon_lower_bound(g, delta, 1.0 - opts.confidence)?;
    Ok(AuditReport {
        algorithm: entry.label(),
        claimed_epsilon: claimed,
        delta,
        epsilon_lower_bound: eps,
        confidence: opts.confidence,
        canaries: m,
        included: included.len(),
        k,
        guesses: 2 * k,
        correct,
        seconds: start.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPERIMENT: &str = r#"
name = "audit"
rounds = 50
seed = 3
participation = { kind = "all" }
[data]
source = { kind = "synthetic", task = "binary", silos = 3, train = 100, test = 20, features = 4 }
[model]
kind = "logistic"
[privacy]
epsilon = 1.0
delta = "1/n^2"
lipschitz = 1.0
[[algorithms]]
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
"#;

    fn opts(a: usize) -> AuditOptions {
        AuditOptions {
            canaries: 200,
            k: 50,
            ..AuditOptions::new(a)
        }
    }

    #[test]
    fn every_private_algorithm_stays_below_its_claim() {
        let spec = ExperimentSpec::from_toml(EXPERIMENT, "audit.toml").unwrap();
        for a in 0..4 {
            let r = audit(&spec, None, &opts(a)).unwrap();
            assert_eq!((r.canaries, r.guesses), (200, 100));
            assert!(r.included > 60 && r.included < 140, "{r:?}");
            assert_eq!(r.claimed_epsilon, 1.0);
            assert!(
                r.epsilon_lower_bound <= r.claimed_epsilon,
                "{}: lower bound {} above the claimed {}: {r:?}",
                r.algorithm,
                r.epsilon_lower_bound,
                r.claimed_epsilon
            );
        }
        // A non-private algorithm has no claim to audit.
        let e = audit(&spec, None, &opts(4)).unwrap_err().to_string();
        assert!(e.contains("not private"), "{e}");
    }

    #[test]
    fn an_under_noised_build_is_caught() {
        // Halves calibrated to ε = 100 while claiming ε = 1: the canaries stand out. (The
        // closed-form rules of Local SGD and accelerated MB-SGD; the accountant search at
        // ε = 100 is slow.)
        let spec = ExperimentSpec::from_toml(EXPERIMENT, "audit.toml").unwrap();
        for a in [1, 2] {
            let o = AuditOptions {
                under_noise: Some(100.0),
                ..opts(a)
            };
            let r = audit(&spec, None, &o).unwrap();
            assert!(
                r.epsilon_lower_bound > r.claimed_epsilon,
                "{}: lower bound {} not above the claimed {}: {r:?}",
                r.algorithm,
                r.epsilon_lower_bound,
                r.claimed_epsilon
            );
        }
    }

    /// m = 100 canaries, k = 25: with silo 0's 100 rows, n_0 = 200 and K = 100 (K/n_0 = ½).
    fn sampled_opts() -> AuditOptions {
        AuditOptions {
            canaries: 100,
            k: 25,
            ..AuditOptions::new(0)
        }
    }

    /// z(ε = 1) / z(ε = 30) of the accountant for R = 50 rounds of K = 100 of n_0 = 200 drawn
    /// with replacement, δ = 1/200² (checked by the ignored test below, which recalibrates).
    const Z1: f64 = 14.583;
    const Z30: f64 = 1.367;

    fn assert_caught(honest: &AuditReport, under: &AuditReport) {
        eprintln!("honest: {honest:?}\nunder-noised: {under:?}");
        assert_eq!((under.claimed_epsilon, under.confidence), (1.0, 0.95));
        assert!(
            under.epsilon_lower_bound > under.claimed_epsilon,
            "lower bound {} not above the claimed {}: {under:?}",
            under.epsilon_lower_bound,
            under.claimed_epsilon
        );
        assert!(
            honest.epsilon_lower_bound <= honest.claimed_epsilon,
            "{honest:?}"
        );
    }

    #[test]
    fn an_under_noised_sampled_build_is_caught() {
        // Accountant-calibrated MB-SGD (K = 100 of n_0 = 200 with replacement, R = 50) with the
        // noise of its ε = 30 calibration (σ scaled by Z30/Z1) while claiming ε = 1: caught at
        // 95 % confidence; the same audit of the correctly noised build is not.
        let spec = ExperimentSpec::from_toml(EXPERIMENT, "audit.toml").unwrap();
        let honest = audit(&spec, None, &sampled_opts()).unwrap();
        crate::algo::context::TEST_NOISE_SCALE.with(|c| c.set(Z30 / Z1));
        let under = audit(&spec, None, &sampled_opts());
        crate::algo::context::TEST_NOISE_SCALE.with(|c| c.set(1.0));
        assert_caught(&honest, &under.unwrap());
    }

    #[test]
    #[ignore = "recalibrates at ε = 30 (~40 s on a loaded machine); the quick test above uses its z"]
    fn an_under_noised_sampled_build_is_caught_recalibrated() {
        use dpfl_privacy::event::Sampling;
        let z = |e: f64| {
            dpfl_privacy::calibration::calibrate_sampled_gaussian(
                Sampling::WithReplacement {
                    population: 200,
                    draws: 100,
                },
                50,
                dpfl_privacy::Neighbouring::ReplaceOne,
                dpfl_privacy::Epsilon::new(e).unwrap(),
                dpfl_privacy::Delta::new(1.0 / 40_000.0).unwrap(),
            )
            .unwrap()
            .0
        };
        let (z1, z30) = (z(1.0), z(30.0));
        eprintln!("z(1) = {z1}, z(30) = {z30}");
        assert!((z1 / Z1 - 1.0).abs() < 1e-3, "z(1) = {z1}");
        assert!((z30 / Z30 - 1.0).abs() < 1e-3, "z(30) = {z30}");
        let spec = ExperimentSpec::from_toml(EXPERIMENT, "audit.toml").unwrap();
        let honest = audit(&spec, None, &sampled_opts()).unwrap();
        let o = AuditOptions {
            under_noise: Some(30.0),
            ..sampled_opts()
        };
        assert_caught(&honest, &audit(&spec, None, &o).unwrap());
    }

    #[test]
    fn bad_options_are_config_errors() {
        let spec = ExperimentSpec::from_toml(EXPERIMENT, "audit.toml").unwrap();
        for o in [
            AuditOptions { k: 0, ..opts(0) },
            AuditOptions { k: 101, ..opts(0) },
            AuditOptions {
                confidence: 1.0,
                ..opts(0)
            },
            AuditOptions::new(9),
        ] {
            assert!(matches!(audit(&spec, None, &o), Err(Error::Config { .. })));
        }
    }
}
