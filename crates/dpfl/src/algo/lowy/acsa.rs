//! Accelerated Noisy MB-SGD: Lowy & Razaviyayn (ICLR 2023), Algorithm 1 (Ghadimi & Lan's AC-SA
//! with per-silo Gaussian noise; digest §2.2), in both variants:
//!
//! * **one-pass** (Thm 3.1 / E.1): each silo cuts a uniform permutation of its records into
//!   disjoint batches of K, so R ≤ ⌊n/K⌋ and no record is ever used twice; the noise is
//!   σ² = 32 L² ln(1.25/δ)/(ε²K²) (Gaussian mechanism, Δ = 2L/K) and each silo's whole run is
//!   (ε, δ)-DP by parallel composition (McSherry 2009);
//! * **ERM** (Thm 4.1 / F.1): a fresh batch every round, drawn with replacement (the paper's;
//!   `sampling = "erm"` or `"with-replacement"`), without replacement or by Poisson sampling,
//!   calibrated per silo as Noisy MB-SGD (Thm D.1, App. I's experiment rule, or the
//!   accountant for the sampling used); the round's event names the sampling drawn.
//!
//! Silo half (the floor's [`GradientSilo`], lines 5–7): the noisy minibatch gradient at the broadcast point
//! w_r^md. Server half ([`AcsaServer`], lines 3, 8–10):
//!
//! ```text
//! w_md = [(1−α)(μ+η) w_ag + α((1−α)μ+η) w] / (η + (1−α²)μ)
//! g    = (1/M_r) Σ g_i + λ (w_md − w₀)                    (regulariser, post-processing)
//! w    = Π_W(z),  z = [α μ w_md + ((1−α)μ + η) w − α g] / (μ + η)
//! w_ag = α w + (1 − α) w_ag
//! ```
//!
//! Line 9 is mis-bracketed in the main text; we use Algorithm 6's (and Ghadimi–Lan's) form
//! argmin_{w∈W} α[⟨g, w⟩ + (μ/2)‖w_md − w‖²] + ((1−α)μ + η)/2 ‖w_prev − w‖², which equals
//! ((μ+η)/2)‖w − z‖² + const, so its minimiser over W is Π_W(z). w_md and w_ag are convex
//! combinations of points of W. The output is w_ag.
//!
//! **Schedules** ([`super::multistage`]): convex losses run AC-SA on f + (λ/2)‖w − w₀‖² with
//! μ := λ and α_r = 2/(r+1), η_r = 4γ/(r(r+1)); strongly convex losses run the multi-stage
//! restarts of App. E.1 on f. The user's `step_size` is the first step α₁/η₁ = 1/(2γ).
//!
//! **Rounds without messages** (Bernoulli availability can leave a round empty) do not advance
//! the AC-SA iteration: the server keeps its state and re-broadcasts the same w_md.
//!
//! **Privacy accounting.** A one-pass silo's round event is
//! `Sampled(Disjoint{n, K}, Gaussian(σK/(2L)))`; its run is R ≤ ⌊n/K⌋ of them over disjoint
//! batches, which an accountant must compose in parallel (the whole run costs one batch's
//! (ε, δ)). The permutation and the position in it are silo state ([`SiloHalf::state`]): a silo
//! that restarts must restore them, or it would reuse records.

use serde::{Deserialize, Serialize};

use dpfl_privacy::sampler::RecordSampling;

use super::calibration::SiloPlan;
use super::calibration::{BatchChoice, Calibration, plan_silos, report};
use super::checked_params::AcceleratedParams;
use super::multistage::AcsaSchedule;
use super::params::{oracle, prepare, theory};
use super::theory::{Constants, Overrides, Params, Setting, Smoothing, TheoryInputs};
use crate::algo::checked::{BatchRule, ParamError, StepRule};
use crate::algo::context::{BuildContext, SiloCalibration};
use crate::algo::gradient::{BatchSource, GradientSilo};
use crate::algo::half::{ServerHalf, SiloHalf};

/// The AC-SA server half lives in the floor: the shuffle wing's Algorithm 6 runs it too.
pub(crate) use crate::algo::acsa_server::AcsaServer;

/// How an accelerated silo samples its records (kept with the wing's other inputs, so that
/// the checked parameters can name it without importing this file).
pub(crate) use super::inputs::AcsaSampling;

/// Accelerated Noisy MB-SGD as named in a config file:
///
/// ```toml
/// [[algorithms]]
/// kind = "accelerated-mb-sgd"
/// sampling = "one-pass"      # or "erm"
/// calibration = "theory"     # one-pass: Thm E.1; erm: "theory" (Thm F.1) or "experiment"
/// params = "theory"          # or give step_size (the first step 1/(2γ))
/// constants = { smoothness = 0.25, diameter = 10.0 }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AcceleratedSpec {
    /// One pass over disjoint batches (Thm E.1) or a fresh batch every round (ERM, Thm F.1) and its
    /// sampler.
    pub sampling: AcsaSampling,
    /// `None` for the non-private algorithm.
    #[serde(default)]
    pub calibration: Option<Calibration>,
    /// Explicit parameters, or the theorems' rules for the missing ones (`params = "theory"`).
    #[serde(default)]
    pub params: Params,
    /// The first step α₁/η₁ = 1/(2γ) of the convex schedule; required for convex losses unless
    /// `params = "theory"`.
    #[serde(default)]
    pub step_size: Option<f64>,
    /// The same K for every silo. Default: one-pass ⌊n_i/R⌋ (or Thm E.1's K with
    /// `params = "theory"`); ERM K_i/n_i constant at the privacy minimum.
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// λ of f + (λ/2)‖w − w₀‖² (convex). Default: 0, or V/(D√R) with `params = "theory"`.
    #[serde(default)]
    pub regularization: Option<f64>,
    /// Moreau smoothing: β or "theory" (Thm F.2; ERM only).
    #[serde(default)]
    pub smoothing: Option<Smoothing>,
    /// Objective weights p_i.
    #[serde(default)]
    pub weights: Option<Vec<f64>>,
    /// Problem constants the theorems' rules need (β, μ, D, …).
    #[serde(default)]
    pub constants: Constants,
}

impl AcceleratedSpec {
    /// The name the outputs use ("accelerated MB-SGD (one-pass)", with its calibration).
    pub fn label(&self) -> String {
        let base = match self.sampling {
            AcsaSampling::OnePass => "accelerated MB-SGD (one-pass)",
            _ => "accelerated MB-SGD",
        };
        match self.calibration {
            Some(_) => format!("ISRL-DP {base}"),
            None => {
                let mut s = base.to_string();
                s[..1].make_ascii_uppercase();
                s
            }
        }
    }
}

impl AcsaSampling {
    fn setting(self) -> Setting {
        match self {
            AcsaSampling::OnePass => Setting::OnePass,
            AcsaSampling::Erm | AcsaSampling::WithoutReplacement | AcsaSampling::Poisson => {
                Setting::Erm
            }
        }
    }

    /// The record sampler of the ERM variants (`None` for one pass over disjoint batches).
    fn record_sampling(self) -> Option<RecordSampling> {
        match self {
            AcsaSampling::OnePass => None,
            AcsaSampling::Erm => Some(RecordSampling::WithReplacement),
            AcsaSampling::WithoutReplacement => Some(RecordSampling::WithoutReplacement),
            AcsaSampling::Poisson => Some(RecordSampling::Poisson),
        }
    }
}

/// What an AC-SA run's halves are built from, checked and calibrated once: per silo K_i,
/// N p_i, L_i and σ_i, smoothing's β, the record sampling (none: one pass over disjoint
/// batches), and the server's μ, λ and step schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcsaPlan {
    /// One calibrated silo per silo, in silo order.
    pub silos: Vec<SiloPlan>,
    /// β of Moreau smoothing (Thm F.2), or none.
    pub smoothing: Option<f64>,
    /// The ERM variants' record sampling; `None` for one pass over disjoint batches.
    pub sampling: Option<RecordSampling>,
    /// The modulus the update uses.
    pub mu: f64,
    /// The regulariser weight.
    pub lambda: f64,
    /// The (α_r, η_r) schedule.
    pub schedule: AcsaSchedule,
}

impl AcsaPlan {
    /// The server half.
    pub fn server_half(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>> {
        Ok(Box::new(AcsaServer::new(
            ctx.init.clone(),
            ctx.projection,
            self.mu,
            self.lambda,
            self.schedule.clone(),
        )?))
    }

    /// Silo `silo`'s half (the floor's [`GradientSilo`]); no calibration.
    pub fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>> {
        let p = self
            .silos
            .get(silo)
            .ok_or_else(|| super::mbsgd::no_silo(silo, self.silos.len()))?;
        let (oracle, _) = oracle(ctx, self.smoothing)?;
        let source = match self.sampling {
            None => BatchSource::one_pass(p.records, p.batch_size),
            Some(kind) => BatchSource::sampled(kind, p.records, p.batch_size)?,
        };
        Ok(Box::new(GradientSilo::new(
            oracle,
            source,
            p.mechanism()?
                .map(|m| ctx.gaussian(m.sigma(), m.sensitivity()))
                .transpose()?,
            p.weight,
        )))
    }
}

/// `kind = "accelerated-mb-sgd"` from its checked parameters: calibrates every silo and
/// resolves the schedule once.
pub(crate) fn plan(
    ctx: &BuildContext,
    spec: &AcceleratedParams,
) -> crate::Result<(AcsaPlan, Vec<SiloCalibration>)> {
    let setting = spec.sampling.setting();
    let noise = spec.noise;
    let general = &spec.theory;
    let prep = prepare(
        ctx,
        setting,
        noise,
        general.smoothing,
        &general.constants,
        general.weights.as_deref(),
    )?;
    let rounds = ctx.federation.rounds;
    let strongly_convex = general.constants.strong_convexity.is_some();
    let batch = match (general.batch, setting, general.params) {
        (BatchRule::Given(k), _, _) => BatchChoice::Explicit(k),
        (BatchRule::Rule, Setting::OnePass, Params::Theory) => {
            // Thm E.1's K; the run's R must fit in one pass (checked below).
            let inputs = TheoryInputs::from_context(
                ctx,
                setting,
                noise,
                &general.constants,
                &prep.weights,
                prep.smoothing,
                Overrides {
                    step_size: general.step.given(),
                    regularization: spec.regularization,
                    ..Overrides::default()
                },
            )?;
            BatchChoice::Explicit(super::theory::theory_params(&inputs)?.batch_size)
        }
        (BatchRule::Rule, Setting::OnePass, Params::Explicit) => BatchChoice::OnePass { rounds },
        (BatchRule::Rule, Setting::MbSgd | Setting::Erm, _) => BatchChoice::CommonRatio,
    };
    let plans = plan_silos(
        ctx,
        noise,
        prep.lipschitz,
        &prep.weights,
        batch,
        spec.sampling.record_sampling().unwrap_or_default(),
    )?;
    if setting == Setting::OnePass {
        for p in &plans {
            if rounds > p.records / p.batch_size {
                return Err(crate::Error::config(
                    "rounds",
                    format!(
                        "one pass over silo {}'s n = {} records in batches of K = {} allows at most {} rounds, {rounds} requested",
                        p.id,
                        p.records,
                        p.batch_size,
                        p.records / p.batch_size
                    ),
                ));
            }
        }
    }
    let (mu, lambda, schedule, note) = match (general.params, strongly_convex, general.step) {
        // Required here, not by the guard: a reproduction's grid may set η.
        (Params::Explicit, false, StepRule::Rule) => {
            return Err(ParamError::missing(
                "step_size",
                "for convex losses unless params = \"theory\"",
            )
            .into());
        }
        (Params::Explicit, false, StepRule::Given(s)) => {
            let s = s.get();
            let lambda = spec.regularization.unwrap_or(0.0);
            (
                lambda,
                lambda,
                AcsaSchedule::Convex {
                    gamma: 1.0 / (2.0 * s),
                },
                String::new(),
            )
        }
        (Params::Explicit, true, step) | (Params::Theory, _, step) => {
            let p = theory(
                ctx,
                setting,
                noise,
                &general.constants,
                &prep,
                &plans,
                step.given(),
                spec.regularization,
            )?;
            let schedule = p.acsa.clone().ok_or_else(|| {
                crate::Error::config("algorithm", "the rules produced no AC-SA schedule")
            })?;
            let note = format!(
                "; {} (Thm {}): lambda = {}, V^2 = {:?}, schedule = {:?}",
                if general.params == Params::Theory {
                    "theory"
                } else {
                    "multi-stage"
                },
                match setting {
                    Setting::OnePass => "E.1",
                    _ => "F.1",
                },
                p.lambda,
                p.variance,
                schedule
            );
            (p.acsa_mu, p.lambda, schedule, note)
        }
    };
    let plan = AcsaPlan {
        silos: plans,
        smoothing: prep.smoothing,
        sampling: spec.sampling.record_sampling(),
        mu,
        lambda,
        schedule,
    };
    let silos = (0..plan.silos.len())
        .map(|i| plan.silo_half(ctx, i))
        .collect::<crate::Result<Vec<_>>>()?;
    let formula = match noise {
        Some(rule) => format!("{}{note}", rule.formula()),
        None => format!("non-private{note}"),
    };
    let calibration = report(&plan.silos, &silos, rounds, &formula);
    // The server half's checks (schedule, μ, λ) fail here, before any process starts.
    plan.server_half(ctx)?;
    Ok((plan, calibration))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::lowy::mbsgd::MbSgdServer;
    use crate::algo::lowy::multistage::multistage;
    use crate::algo::message::Payload;
    use crate::algo::message::{Broadcast, Round, SiloMessage};
    use crate::algo::server::OutputRule;
    use crate::model::Projection;
    use crate::units::StepSize;

    /// F(w) = ½ Σ_j h_j (w_j − 1)², h log-spaced in [β/κ, β], β = 1.
    struct Quadratic {
        h: Vec<f64>,
    }

    impl Quadratic {
        fn new(kappa: f64, d: usize) -> Self {
            Quadratic {
                h: (0..d)
                    .map(|j| kappa.powf(j as f64 / (d - 1) as f64) / kappa)
                    .collect(),
            }
        }
        fn value(&self, w: &[f64]) -> f64 {
            self.h
                .iter()
                .zip(w)
                .map(|(h, w)| 0.5 * h * (w - 1.0).powi(2))
                .sum()
        }
        fn message(&self, b: &Broadcast) -> SiloMessage {
            let g = self
                .h
                .iter()
                .zip(&b.point)
                .map(|(h, w)| h * (w - 1.0))
                .collect();
            SiloMessage {
                round: b.round,
                payload: Payload::Dense(g),
            }
        }
        /// Relative error F(ŵ)/F(w₀) after `rounds` exact-gradient rounds.
        fn run(&self, server: &mut dyn ServerHalf, rounds: u32) -> f64 {
            let f0 = self.value(&vec![0.0; self.h.len()]);
            for r in (0..rounds).map(Round::new) {
                let b = server.broadcast(r);
                server.aggregate(r, &[self.message(&b)]).unwrap();
            }
            self.value(&server.output()) / f0
        }
    }

    fn acsa(kappa: f64, rounds: usize) -> AcsaServer {
        let (beta, mu) = (1.0, 1.0 / kappa);
        // Δ = F(0) − F* ≤ β·d/2 = 5 for d = 10; noise-free: V² = 0.
        let stages = multistage(beta, mu, 0.0, 5.0, rounds).unwrap();
        AcsaServer::new(
            vec![0.0; 10],
            Projection::None,
            mu,
            0.0,
            AcsaSchedule::MultiStage { stages },
        )
        .unwrap()
    }

    fn gd() -> MbSgdServer {
        // Plain gradient descent at the same smoothness: η = 1/β.
        MbSgdServer::new(
            vec![0.0; 10],
            StepSize::new(1.0).unwrap(),
            Projection::None,
            OutputRule::Last,
        )
    }

    #[test]
    fn noiseless_acsa_converges_at_the_accelerated_rate() {
        // κ = 100, R = 800: multi-stage AC-SA reaches ~1e-14 relative error, gradient descent
        // ~4e-10 ((1 − 1/κ)^{2R} ≈ e^{−16} for the flattest direction).
        let q = Quadratic::new(100.0, 10);
        let e_acsa = q.run(&mut acsa(100.0, 800), 800);
        let e_gd = q.run(&mut gd(), 800);
        assert!(e_acsa < 1e-12, "{e_acsa}");
        assert!(e_gd > 1e-10, "{e_gd}");
        assert!(e_acsa < 1e-3 * e_gd, "{e_acsa} vs {e_gd}");
        // The rate: −ln(error)/R over the second half of the run, per 1/√κ and per 1/κ.
        // AC-SA's decay rate scales like 1/√κ and gradient descent's like 1/κ: from κ = 100
        // to κ = 1600 the AC-SA rate drops ≈ 4× (√16), the GD rate ≈ 16×.
        let rate = |kappa: f64, acc: bool, r: u32| {
            let q = Quadratic::new(kappa, 10);
            let err = |rr: u32| {
                if acc {
                    q.run(&mut acsa(kappa, rr as usize), rr)
                } else {
                    q.run(&mut gd(), rr)
                }
            };
            (err(r).ln() - err(2 * r).ln()) / r as f64
        };
        let (a100, a1600) = (rate(100.0, true, 400), rate(1600.0, true, 1600));
        let (g100, g1600) = (rate(100.0, false, 400), rate(1600.0, false, 1600));
        let (ra, rg) = (a100 / a1600, g100 / g1600);
        eprintln!(
            "kappa=100: acsa {e_acsa:e} gd {e_gd:e}; rates acsa {a100} {a1600} gd {g100} {g1600}"
        );
        assert!(
            ra > 2.0 && ra < 8.0,
            "AC-SA rate ratio {ra} ({a100}, {a1600})"
        );
        assert!(
            rg > 10.0 && rg < 25.0,
            "GD rate ratio {rg} ({g100}, {g1600})"
        );
        // And per round AC-SA is faster: rate·√κ vs rate·κ are both O(1).
        assert!(a1600 > 3.0 * g1600, "{a1600} vs {g1600}");
    }

    #[test]
    fn convex_acsa_beats_gradient_descent_on_a_flat_quadratic() {
        // μ = 0 schedule with γ = 2β: error O(βD²/R²) vs GD's O(βD²/R) while R ≪ κ.
        let q = Quadratic::new(1e6, 10);
        let mut s = AcsaServer::new(
            vec![0.0; 10],
            Projection::None,
            0.0,
            0.0,
            AcsaSchedule::Convex { gamma: 2.0 },
        )
        .unwrap();
        let e_acsa = q.run(&mut s, 200);
        let e_gd = q.run(&mut gd(), 200);
        assert!(e_acsa < 0.5 * e_gd, "{e_acsa} vs {e_gd}");
    }

    #[test]
    fn closed_form_step_matches_the_argmin_and_projection() {
        // One iteration from w = w_ag = (1, 0), α₁ = 1, η₁ = 2γ = 4, μ = 2:
        // w_md = w; z = [αμ w_md + ((1−α)μ + η) w − α g]/(μ + η) = [2w + 4w − g]/6 = w − g/6.
        let mut s = AcsaServer::new(
            vec![1.0, 0.0],
            Projection::L2Ball { radius: 1.5 },
            2.0,
            0.0,
            AcsaSchedule::Convex { gamma: 2.0 },
        )
        .unwrap();
        let b = s.broadcast(Round::FIRST);
        assert_eq!(b.point, vec![1.0, 0.0]);
        let g = SiloMessage {
            round: Round::FIRST,
            payload: Payload::Dense(vec![-6.0, -6.0]),
        };
        s.aggregate(Round::FIRST, &[g]).unwrap();
        // z = (2, 1), ‖z‖ = √5 > 1.5: w = 1.5 (2, 1)/√5; w_ag = w (α = 1).
        let k = 1.5 / 5f64.sqrt();
        let out = s.output();
        assert!((out[0] - 2.0 * k).abs() < 1e-12 && (out[1] - k).abs() < 1e-12);
        // An empty round changes nothing and does not advance the schedule.
        let before = s.state();
        let b = s.broadcast(Round::new(1));
        s.aggregate(Round::new(1), &[]).unwrap();
        assert_eq!(s.state(), before);
        assert_eq!(s.iterations(), 1);
        // Second iteration: α = 2/3, η = 4γ/6 = 4/3, μ = 2: den = η + (1 − α²)μ = 4/3 + 10/9.
        // w_md = [(1−α)(μ+η) w_ag + α((1−α)μ + η) w]/den = w since w = w_ag.
        assert!((b.point[0] - 2.0 * k).abs() < 1e-12);
        // Wrong-round messages are refused.
        let bad = SiloMessage {
            round: Round::new(7),
            payload: Payload::Dense(vec![0.0, 0.0]),
        };
        assert!(s.aggregate(Round::new(2), &[bad]).is_err());
    }

    #[test]
    fn regulariser_is_added_on_the_server() {
        // Data gradient (1, 0) everywhere, λ = 1 around w₀ = (2, 0): F̃(w) = w₁ + ½‖w − w₀‖² is
        // minimised at (1, 0). μ := λ = 1, β̃ = 1, γ = 2β̃.
        let mut s = AcsaServer::new(
            vec![2.0, 0.0],
            Projection::None,
            1.0,
            1.0,
            AcsaSchedule::Convex { gamma: 2.0 },
        )
        .unwrap();
        for r in (0..200).map(Round::new) {
            s.broadcast(r);
            let m = SiloMessage {
                round: r,
                payload: Payload::Dense(vec![1.0, 0.0]),
            };
            s.aggregate(r, &[m]).unwrap();
        }
        let out = s.output();
        // (Without the regulariser the iterate would run off along −e₁.)
        assert!(
            (out[0] - 1.0).abs() < 1e-2 && out[1].abs() < 1e-12,
            "{out:?}"
        );
        assert!(
            AcsaServer::new(
                vec![0.0],
                Projection::None,
                -1.0,
                0.0,
                AcsaSchedule::Convex { gamma: 1.0 }
            )
            .is_err()
        );
        assert!(
            AcsaServer::new(
                vec![0.0],
                Projection::None,
                0.0,
                0.0,
                AcsaSchedule::Convex { gamma: 0.0 }
            )
            .is_err()
        );
    }
}
