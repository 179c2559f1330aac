//! `kind = "laplace-mb-sgd"`: minibatch SGD whose silos add Laplace noise, a wing defined
//! outside `dpfl` (issue 28 item 6, "the next paper costs one folder"). It is this folder and
//! one line outside it (`pub mod laplace_mbsgd;` in the crate root; the crate's manifest also
//! gained `serde`, which the testkit did not use before); a program that runs it calls
//! [`register`] once, and from then on the simulator, `dpfl-net`'s server and silos and the
//! reproductions' grids run it as they run a built-in kind (`dpfl::algo::registry`).
//!
//! ```toml
//! [[algorithms]]
//! kind = "laplace-mb-sgd"
//! step_size = 0.5
//! batch_size = 50
//! round_epsilon = 0.5
//! ```
//!
//! Silo half: the floor's `GradientSilo` — K records drawn without replacement, the mean of
//! their gradients clipped at L in L2 norm (the build context's enforcing oracle), plus
//! [`LaplaceMechanism`] noise of scale b per coordinate. Server half ([`LaplaceServer`]): the
//! unweighted average of the messages, w_{r+1} = Π_W(w_r − η g̃_r), output w_R (Lowy &
//! Razaviyayn Algorithm 2 with Laplace instead of Gaussian noise).
//!
//! Privacy (ISRL-DP, Lowy & Razaviyayn Def. 2.2, replace-one): a clipped gradient has
//! ‖g‖₁ ≤ √d ‖g‖₂ ≤ √d L, and replacing one record of a batch that holds it at most once moves
//! the mean by at most Δ₁ = 2√d L/K in L1 norm; with b = Δ₁/ε₀ each round is pure ε₀-DP (Dwork
//! & Roth 2014, Thm 3.6) and R rounds compose to R·ε₀ (basic composition, Thm 3.16). A plan
//! whose R·ε₀ exceeds a silo's ε_i is refused; the silo's ledger charges each round's event,
//! which the mechanism reports itself (`PrivacyEvent::Laplace` at noise multiplier 1/ε₀).

mod mechanism;
mod server;

pub use mechanism::LaplaceMechanism;
pub use server::LaplaceServer;

use serde::{Deserialize, Serialize};

use dpfl::algo::checked::{ParamError, ParamGuard, at_least_one, positive, step_size};
use dpfl::algo::gradient::{BatchSource, GradientNoise, GradientSilo};
use dpfl::algo::registry::{ExternalWing, WingHalves};
use dpfl::algo::wing::{AuditView, Knobs, NoiseMultiplier, Planned, Privacy, Requirements, Wing};
use dpfl::algo::{AlgorithmSpec, BuildContext, ServerHalf, SiloCalibration, SiloHalf};
use dpfl_privacy::sampler::RecordSampling;

/// The kind a config names this wing by.
pub const KIND: &str = "laplace-mb-sgd";

/// Registers the wing for this program (`AlgorithmSpec::register`); again is a no-op.
pub fn register() -> dpfl::Result<()> {
    AlgorithmSpec::register::<LaplaceMbSgdSpec>()
}

/// The config (module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaplaceMbSgdSpec {
    /// η > 0.
    pub step_size: f64,
    /// K ≥ 1 records per silo and round, drawn without replacement (K ≤ every n_i).
    pub batch_size: usize,
    /// ε₀ > 0 each round spends (pure DP).
    pub round_epsilon: f64,
}

/// The config, checked once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LaplaceParams {
    step_size: f64,
    batch_size: usize,
    round_epsilon: f64,
}

impl ParamGuard for LaplaceMbSgdSpec {
    type Checked = LaplaceParams;
    fn check(&self) -> Result<LaplaceParams, ParamError> {
        Ok(LaplaceParams {
            step_size: step_size(self.step_size)?.get(),
            batch_size: at_least_one("batch_size", self.batch_size)?,
            round_epsilon: positive("round_epsilon", self.round_epsilon)?,
        })
    }
}

/// What the halves are built from: η, K, b and Δ₁ (the same for every silo) and each n_i.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaplacePlan {
    /// η.
    pub step_size: f64,
    /// K.
    pub batch_size: usize,
    /// b = Δ₁/ε₀.
    pub scale: f64,
    /// Δ₁ = 2√d L/K.
    pub sensitivity: f64,
    /// n_i per silo, in silo order.
    pub records: Vec<usize>,
}

impl WingHalves for LaplacePlan {
    fn silos(&self) -> usize {
        self.records.len()
    }
    fn quorum(&self, _participants: usize) -> Option<usize> {
        None
    }
    fn server_half(&self, ctx: &BuildContext) -> dpfl::Result<Box<dyn ServerHalf>> {
        Ok(Box::new(LaplaceServer::new(
            ctx.init.clone(),
            self.step_size,
            ctx.projection,
        )))
    }
    fn silo_half(&self, ctx: &BuildContext, silo: usize) -> dpfl::Result<Box<dyn SiloHalf>> {
        let n = *self.records.get(silo).ok_or_else(|| {
            dpfl::Error::config(
                "silo",
                format!("the plan has {} silos, no silo {silo}", self.records.len()),
            )
        })?;
        let noise: Box<dyn GradientNoise> =
            Box::new(LaplaceMechanism::new(self.scale, self.sensitivity)?);
        Ok(Box::new(GradientSilo::with_noise(
            ctx.enforcing_oracle()?,
            BatchSource::sampled(RecordSampling::WithoutReplacement, n, self.batch_size)?,
            Some(noise),
            1.0,
        )))
    }
}

impl Wing for LaplaceMbSgdSpec {
    type Plan = LaplacePlan;

    fn label(&self) -> String {
        "Laplace MB-SGD".into()
    }
    fn privacy(&self) -> Privacy {
        Privacy::SiloNoise
    }
    fn noise_multiplier(&self) -> NoiseMultiplier {
        NoiseMultiplier::Refuses(
            "the Laplace wing's noise is set by round_epsilon (pure DP per round)",
        )
    }
    fn knobs(&self) -> Knobs {
        Knobs {
            step_size: Some(self.step_size),
            app_i_batch_floor: false,
        }
    }
    fn tuned(&self, step_size: f64, batch: Option<usize>) -> Self {
        LaplaceMbSgdSpec {
            step_size,
            batch_size: batch.unwrap_or(self.batch_size),
            ..self.clone()
        }
    }
    fn requirements(&self) -> Requirements {
        Requirements::PLAIN
    }
    fn extended_metrics(&self) -> bool {
        false
    }
    fn audit_view(&self, _: &LaplacePlan) -> AuditView {
        AuditView::Gradient { all_silos: false }
    }
    fn plan(p: &LaplaceParams, ctx: &BuildContext) -> dpfl::Result<Planned<LaplacePlan>> {
        let (d, l, rounds, k) = (
            ctx.federation.dim,
            ctx.lipschitz,
            ctx.federation.rounds,
            p.batch_size,
        );
        let sensitivity = 2.0 * (d as f64).sqrt() * l / k as f64;
        let mechanism = LaplaceMechanism::new(sensitivity / p.round_epsilon, sensitivity)?;
        let total = rounds as f64 * p.round_epsilon;
        let mut calibration = Vec::with_capacity(ctx.silos.len());
        for s in &ctx.silos {
            if s.fixed_noise.is_some() {
                return Err(ParamError::refused(
                    "round_epsilon",
                    "privacy.noise_multiplier does not apply (the Laplace noise is set by round_epsilon)",
                )
                .into());
            }
            let (eps, _) = ctx.budget(s)?;
            if total > eps.get() {
                return Err(ParamError::refused(
                    "round_epsilon",
                    format!(
                        "R·ε₀ = {rounds}·{} = {total} exceeds silo {}'s ε = {} (basic \
                         composition, Dwork & Roth Thm 3.16)",
                        p.round_epsilon,
                        s.id,
                        eps.get()
                    ),
                )
                .into());
            }
            if k > s.records {
                return Err(ParamError::refused(
                    "batch_size",
                    format!("K = {k} exceeds silo {}'s {} records", s.id, s.records),
                )
                .into());
            }
            dpfl::algo::context::count_calibration();
            let drawn = BatchSource::sampled(RecordSampling::WithoutReplacement, s.records, k)?;
            calibration.push(SiloCalibration {
                silo: s.id,
                sigma: dpfl_privacy::VectorMechanism::noise_std(&mechanism),
                batch_size: k,
                formula: format!(
                    "b = 2 sqrt(d) L / (K eps0) = {} per coordinate with d = {d}, L = {l}, \
                     K = {k}, eps0 = {} (Laplace mechanism, Dwork & Roth Thm 3.6); {rounds} \
                     rounds compose to {total} (Thm 3.16)",
                    mechanism.scale(),
                    p.round_epsilon
                ),
                run_event: Some(
                    mechanism
                        .round_event(drawn.sampling())
                        .repeated(rounds as u64),
                ),
            });
        }
        let plan = LaplacePlan {
            step_size: p.step_size,
            batch_size: k,
            scale: mechanism.scale(),
            sensitivity,
            records: ctx.silos.iter().map(|s| s.records).collect(),
        };
        Ok(Planned::new(plan, calibration))
    }
}

impl ExternalWing for LaplaceMbSgdSpec {
    const KIND: &'static str = KIND;
}

/// The experiment file the wing's tests run: 3 silos of 200 + 50 synthetic binary records
/// with 2 features, logistic regression (d = 2), L = 1, (ε, δ) = (8, 1e-5) enforced by each
/// silo's ledger, R = `rounds`, and one `laplace-mb-sgd` with η = 0.5, K = 50, ε₀ = 0.5.
pub fn example_experiment(rounds: usize, seed: u64) -> String {
    crate::experiment::Head {
        name: "laplace",
        rounds,
        seed,
        train: 200,
        test: 50,
        features: 2,
        shift: Some(0.5),
        epsilon: 8.0,
        delta: "1e-5",
        ..crate::experiment::Head::default()
    }
    .toml(
        "enforce_budget = true\n[[algorithms]]\nkind = \"laplace-mb-sgd\"\nstep_size = 0.5\n\
         batch_size = 50\nround_epsilon = 0.5\n",
    )
}
