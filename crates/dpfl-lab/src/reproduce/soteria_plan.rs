//! The plan of a SoteriaFL reproduction ([`super::soteria`]; Li, Zhao, Li & Chi 2022, App. A;
//! digest `soteriafl.md` §5.2): the settings (ε, T, the notebooks' tuned η), seeds and data,
//! and how the noise is set and the gradients clipped. By default the official code's presets
//! with per-record clipping; `calibration = accountant` calibrates every algorithm's σ with
//! dpfl's accountants (the tighter of RDP and PLD, replace-one, the sampling actually used:
//! `algo::soteria::calibration::accountant_sigma`) to the labelled (ε, δ), so that the five
//! methods are compared at one certified ε (issue 32 item 1); `clipping = aggregate` is the
//! code's clipping of each silo's whole estimator, to measure what per-record clipping costs.
//!
//! [`Plans`] keeps each (setting, algorithm)'s calibrated plan for the reproduction's seeds:
//! an accountant calibration is a PLD search per silo, which the seeds need not repeat (only
//! the SVRG coin's seed differs between seeds, and it is public).

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Serialize;

use dpfl::algo::soteria::{Clipping, NoiseCalibration};
use dpfl::algo::spec::WingPlan;
use dpfl::algo::{AlgorithmSpec, SiloCalibration};

/// Which experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Experiment {
    /// a9a (LIBSVM, 123 features), non-convex logistic regression (digest §5.2).
    A9a,
    /// MNIST with a one-hidden-layer MLP (digest §5.3).
    Mnist,
}

/// One reproduction's plan.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// `soteria-a9a` or `soteria-mnist`.
    pub id: String,
    /// Which data set and model.
    pub experiment: Experiment,
    /// A `--quick` plan (fewer rounds, seeds and records).
    pub quick: bool,
    /// (ε, T, step sizes in [`ALGORITHMS`] order).
    pub settings: Vec<(f64, usize, [f64; 5])>,
    /// Runs per (ε, algorithm); the figures show mean and spread.
    pub seeds: usize,
    /// Records kept per silo (None: all; quick modes subsample).
    pub per_silo: Option<usize>,
    /// Evaluate every this many rounds.
    pub eval_every: usize,
    /// Per-record clip threshold C (the code's presets).
    pub clip: f64,
    /// δ of every silo.
    pub delta: f64,
    /// N, the silos (label-sorted shards).
    pub silos: usize,
    /// How every algorithm's σ is set: the official code's presets (`paper-code`, the
    /// default; they certify far more than their labels), dpfl's accountant at the labelled
    /// (ε, δ) (`accountant`: every method certified at its label, issue 32 item 1), or
    /// `none` (non-private, same T, η and b). Left out of the serialised plan when it is
    /// the default, so the presets' checkpoints and provenance stay as they were.
    #[serde(skip_serializing_if = "is_paper_code")]
    pub calibration: NoiseCalibration,
    /// Where gradients are clipped: per record (the default, the paper's Assumption 2) or
    /// each silo's whole estimator (`aggregate-no-guarantee`, the official code's; its noise
    /// certifies nothing at the label, sensitivity 2G unamplified). Serialised only when not
    /// the default.
    #[serde(skip_serializing_if = "is_per_record")]
    pub clipping: Clipping,
    /// b of the SGD-type algorithms (LDP-SGD, CDP-SGD, SoteriaFL-SGD); `None`: Corollary 1's
    /// rule (`algo::soteria::calibration::default_batch`), which gives b = 1 (compressed) and
    /// 4 (LDP-SGD) on MNIST, where the official code fixes 128 (digest §5.2). Serialised only
    /// when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sgd_batch: Option<usize>,
}

impl Plan {
    /// The plan of `id` (`soteria-a9a` or `soteria-mnist`), full or `--quick`.
    pub fn new(id: &str, quick: bool) -> dpfl::Result<Plan> {
        // Tuned η of the official notebooks (digest §5.2 table).
        let (experiment, settings, clip) = match id {
            "soteria-a9a" => (
                Experiment::A9a,
                vec![
                    (1.0, 25, [1.0, 1.0, 0.6, 0.6, 0.6]),
                    (5.0, 100, [1.0, 1.0, 0.1, 0.3, 0.3]),
                    (10.0, 150, [1.0, 1.0, 0.3, 0.6, 0.6]),
                ],
                0.5,
            ),
            "soteria-mnist" => (
                Experiment::Mnist,
                vec![
                    (1.0, 150, [1.0, 1.0, 0.3, 0.6, 0.3]),
                    (2.0, 200, [1.0, 1.0, 0.3, 0.6, 0.3]),
                    (4.0, 300, [1.0, 1.0, 0.6, 1.0, 0.6]),
                    (8.0, 500, [1.0, 1.0, 0.6, 1.0, 0.6]),
                    (16.0, 1000, [1.0, 1.0, 0.6, 1.0, 0.6]),
                ],
                1.0,
            ),
            other => {
                return Err(dpfl::Error::config(
                    "id",
                    format!(
                        "unknown SoteriaFL reproduction {other:?}; known: soteria-a9a, soteria-mnist"
                    ),
                ));
            }
        };
        let mut plan = Plan {
            id: id.to_string(),
            experiment,
            quick,
            settings,
            seeds: 5,
            per_silo: None,
            eval_every: if experiment == Experiment::A9a { 1 } else { 10 },
            clip,
            delta: 1e-3,
            silos: 10,
            calibration: NoiseCalibration::PaperCode,
            clipping: Clipping::PerRecord,
            sgd_batch: None,
        };
        if quick {
            plan.seeds = 2;
            match experiment {
                Experiment::A9a => plan.settings.truncate(1),
                Experiment::Mnist => {
                    plan.settings = vec![(4.0, 20, [1.0, 1.0, 0.6, 1.0, 0.6])];
                    plan.per_silo = Some(200);
                    plan.eval_every = 5;
                }
            }
        }
        Ok(plan)
    }
}

impl Plan {
    /// The plan with another noise rule and clipping (module doc). The closed form is
    /// refused: its constant is unstated by the paper, so it is neither the code's nor a
    /// certified rule.
    pub fn calibrated(
        mut self,
        calibration: NoiseCalibration,
        clipping: Clipping,
    ) -> dpfl::Result<Plan> {
        if calibration == NoiseCalibration::ClosedForm {
            return Err(dpfl::Error::config(
                "calibration",
                "the SoteriaFL reproductions take paper-code, accountant or none",
            ));
        }
        self.calibration = calibration;
        self.clipping = clipping;
        Ok(self)
    }

    /// Sets b of the SGD-type algorithms (0 is refused).
    pub fn with_sgd_batch(&mut self, b: usize) -> dpfl::Result<()> {
        if b == 0 {
            return Err(dpfl::Error::config("--sgd-batch", "must be at least 1"));
        }
        self.sgd_batch = Some(b);
        Ok(())
    }

    /// Keeps only the settings whose ε is in `epsilons` (a reduced run); an ε the plan does
    /// not have is an error naming the plan's.
    pub fn keep_epsilons(&mut self, epsilons: &[f64]) -> dpfl::Result<()> {
        let have: Vec<f64> = self.settings.iter().map(|s| s.0).collect();
        if let Some(e) = epsilons.iter().find(|e| !have.contains(e)) {
            return Err(dpfl::Error::config(
                "--epsilons",
                format!("{} has no setting at epsilon {e}; it has {have:?}", self.id),
            ));
        }
        self.settings.retain(|s| epsilons.contains(&s.0));
        Ok(())
    }

    /// What the ε column is: the preset's label, or the target the accountant calibrated to.
    pub fn label_kind(&self) -> &'static str {
        match self.calibration {
            NoiseCalibration::Accountant => "accountant target",
            NoiseCalibration::None => "non-private",
            _ => "paper preset",
        }
    }

    /// The figures' note on what differs from the presets run (`None` for that run).
    pub fn variant(&self) -> Option<String> {
        let mut v = Vec::new();
        match self.calibration {
            NoiseCalibration::Accountant => {
                v.push("every algorithm calibrated by the accountant".to_string())
            }
            NoiseCalibration::None => v.push("non-private".into()),
            _ => {}
        }
        if self.clipping == Clipping::AggregateNoGuarantee {
            v.push("aggregate clipping (the code's; no guarantee)".into());
        }
        if let Some(b) = self.sgd_batch {
            v.push(format!("SGD-type b = {b}"));
        }
        (!v.is_empty()).then(|| v.join(", "))
    }

    /// The default output folder's name: the ID, `-certified` (accountant), `-nonprivate`,
    /// `-aggregate-clip`, then `-quick`.
    pub fn out_name(&self) -> String {
        let mut name = self.id.clone();
        match self.calibration {
            NoiseCalibration::Accountant => name.push_str("-certified"),
            NoiseCalibration::None => name.push_str("-nonprivate"),
            _ => {}
        }
        if self.clipping == Clipping::AggregateNoGuarantee {
            name.push_str("-aggregate-clip");
        }
        if self.quick {
            name.push_str("-quick");
        }
        name
    }

    /// The config of algorithm `a` ([`super::soteria::ALGORITHMS`]) at step size `eta` under
    /// this plan's noise rule and clipping.
    pub fn algorithm(
        &self,
        a: usize,
        eta: f64,
        init_std: Option<f64>,
    ) -> dpfl::Result<AlgorithmSpec> {
        let mut spec = algorithm_spec(a, eta, init_std, self.calibration, self.clipping)?;
        if let (Some(b), 0 | 2 | 3) = (self.sgd_batch, a)
            && let AlgorithmSpec::LdpSgd(s) | AlgorithmSpec::CdpSgd(s) | AlgorithmSpec::SoteriaFl(s) =
                &mut spec
        {
            s.batch_size = Some(b);
        }
        Ok(spec)
    }
}

fn is_paper_code(c: &NoiseCalibration) -> bool {
    *c == NoiseCalibration::PaperCode
}

fn is_per_record(c: &Clipping) -> bool {
    *c == Clipping::PerRecord
}

/// The config of algorithm `a` ([`super::soteria::ALGORITHMS`]) at step size `eta`: draws
/// with replacement (the code's sampling), x⁰ ~ N(0, `init_std`²) from seed 0 if given.
pub(crate) fn algorithm_spec(
    a: usize,
    eta: f64,
    init_std: Option<f64>,
    calibration: NoiseCalibration,
    clipping: Clipping,
) -> dpfl::Result<AlgorithmSpec> {
    let kind = match a {
        0 => "kind = \"ldp-sgd\"",
        1 => "kind = \"ldp-svrg\"",
        2 => "kind = \"cdp-sgd\"",
        3 => "kind = \"soteria-fl\"\nestimator = \"sgd\"",
        _ => "kind = \"soteria-fl\"\nestimator = \"svrg\"",
    };
    let init = init_std.map_or(String::new(), |s| {
        format!("init = {{ std = {s}, seed = 0 }}\n")
    });
    let cal = match calibration {
        NoiseCalibration::PaperCode => "paper-code",
        NoiseCalibration::Accountant => "accountant",
        NoiseCalibration::ClosedForm => "closed-form",
        NoiseCalibration::None => "none",
    };
    let clip = match clipping {
        Clipping::PerRecord => "per-record",
        Clipping::AggregateNoGuarantee => "aggregate-no-guarantee",
    };
    let text = format!(
        "{kind}\nstep_size = {eta}\ncalibration = \"{cal}\"\nclipping = \"{clip}\"\nsampling = \"with-replacement\"\n{init}"
    );
    toml::from_str(&text).map_err(|e| dpfl::Error::config("algorithm", e.to_string()))
}

/// Each (setting, algorithm)'s checked, calibrated plan, made on first use and kept for the
/// other seeds (module doc).
#[derive(Default)]
pub struct Plans(Mutex<HashMap<String, (Vec<SiloCalibration>, WingPlan)>>);

impl Plans {
    /// The plan under `key` (every input of the plan), made by `make` if not yet kept.
    pub fn get(
        &self,
        key: String,
        make: impl FnOnce() -> dpfl::Result<(Vec<SiloCalibration>, WingPlan)>,
    ) -> dpfl::Result<(Vec<SiloCalibration>, WingPlan)> {
        // A panic elsewhere while the lock was held leaves whole entries only.
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = map.get(&key) {
            return Ok(p.clone());
        }
        let p = make()?;
        map.insert(key, p.clone());
        Ok(p)
    }
}
