//! Noisy ISRL-DP minibatch SGD of Lowy & Razaviyayn (ICLR 2023), one algorithm in two
//! config forms:
//!
//! * `kind = "mb-sgd"`: Algorithm 2 (digest §2.1), every silo with its own default K
//!   ([`super::calibration::default_k`]) under the configured calibration rule; non-private
//!   without one.
//! * `kind = "noisy-mb-sgd"`: the general form, Algorithm 7 (App. H, digest §2.6): objective
//!   weights p_i, K_i/n_i constant across silos, Moreau smoothing, and the parameter rules of
//!   Thm D.1/D.2 ([`super::params`]) including the strongly convex step and exponential
//!   weights of Thm 2.1.
//!
//! Silo half: the floor's [`GradientSilo`] (lines 5–8: K records drawn by the configured record
//! sampler, mean of the clipped gradients at w_r, scaled by N p_i, plus N(0, σ_i² I) added
//! inside the silo). Server half ([`MbSgdServer`], lines 9–11): the **unweighted** average of
//! the M_r messages (Algorithm 7 line 9), w_{r+1} = Π_W(w_r − η g̃_r), output the average of
//! w_0..w_{R−1}, w_R, or the exponential weights.
//!
//! Privacy: the replace-one sensitivity of the minibatch mean is 2 L_i/K_i per occurrence of
//! the record; each round spends `Sampled(sampling, Gaussian(σ_i K_i/(2 L_i)))` and the
//! accountant composes R of them ([`super::calibration`]).

use serde::{Deserialize, Serialize};

use dpfl_privacy::sampler::RecordSampling;
use dpfl_privacy::{Mechanism, VectorMechanism};

use super::calibration::SiloPlan;
use super::calibration::{BatchChoice, Calibration, NoiseRule, plan_silos, report};
use super::checked_params::{MbSgdParams, NoisyMbSgdParams};
use super::params::{oracle, prepare, theory};
use super::theory::{Constants, Params, Setting, Smoothing};
use crate::algo::checked::{BatchRule, ParamError, StepRule};
use crate::algo::context::{BuildContext, SiloCalibration};
use crate::algo::gradient::{BatchSource, GradientSilo};
use crate::algo::half::{ServerHalf, SiloHalf};
use crate::algo::server::OutputRule;

/// MB-SGD's server half lives in the floor: the shuffle wing's SDP MB-SGD, PSGD and PGD run
/// it too.
pub(crate) use crate::algo::server::MbSgdServer;
use crate::units::StepSize;

/// What an MB-SGD run's halves are built from, checked and calibrated once (both config
/// forms): per silo K_i, N p_i, L_i and σ_i, Moreau smoothing's β, the record sampling, η
/// and the output rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MbSgdPlan {
    /// One calibrated silo per silo, in silo order.
    pub silos: Vec<SiloPlan>,
    /// β of Moreau smoothing (Thm D.2), or none.
    pub smoothing: Option<f64>,
    /// How each silo draws its K_i records.
    pub sampling: RecordSampling,
    /// η.
    pub step_size: StepSize,
    /// The output rule of the server half.
    pub output: OutputRule,
}

impl MbSgdPlan {
    /// The server half.
    pub fn server_half(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>> {
        Ok(Box::new(MbSgdServer::new(
            ctx.init.clone(),
            self.step_size,
            ctx.projection,
            self.output,
        )))
    }

    /// Silo `silo`'s half (the floor's [`GradientSilo`]); no calibration.
    pub fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>> {
        let p = self
            .silos
            .get(silo)
            .ok_or_else(|| no_silo(silo, self.silos.len()))?;
        let (oracle, _) = oracle(ctx, self.smoothing)?;
        Ok(Box::new(GradientSilo::new(
            oracle,
            BatchSource::sampled(self.sampling, p.records, p.batch_size)?,
            silo_mechanism(ctx, p)?,
            p.weight,
        )))
    }
}

/// A silo's Gaussian as its half draws it (continuous or discrete, `ctx.gaussian`); `None`
/// for a non-private silo.
fn silo_mechanism(
    ctx: &BuildContext,
    p: &SiloPlan,
) -> crate::Result<Option<dpfl_privacy::GaussianMechanism>> {
    p.mechanism()?
        .map(|m| ctx.gaussian(m.sigma(), m.sensitivity()))
        .transpose()
}

/// The error for a silo index past the plan's silos.
pub(crate) fn no_silo(silo: usize, silos: usize) -> crate::Error {
    crate::Error::config(
        "silo",
        format!("the plan has {silos} silos, no silo {silo}"),
    )
}

/// `kind = "mb-sgd"` (Algorithm 2): each silo's K is `batch_size` or its own default under
/// `calibration`; the report keeps each rule's own formula (the accountant's per silo).
pub(crate) fn plan(
    ctx: &BuildContext,
    params: &MbSgdParams,
) -> crate::Result<(MbSgdPlan, Vec<SiloCalibration>)> {
    let MbSgdParams {
        step: step_size,
        calibration,
        batch,
        output,
        sampling,
    } = *params;
    ctx.enforcing_oracle()?;
    // Required here, not by the guard: a reproduction's grid may set K.
    if calibration.is_none() && batch == BatchRule::Rule {
        return Err(
            ParamError::missing("batch_size", "non-private MB-SGD has no batch-size rule").into(),
        );
    }
    let batch = batch
        .given()
        .map_or(BatchChoice::Own, BatchChoice::Explicit);
    let weights = vec![1.0; ctx.silos.len()];
    let noise = calibration.map(NoiseRule::from);
    let plans = plan_silos(ctx, noise, ctx.lipschitz, &weights, batch, sampling)?;
    let rounds = ctx.federation.rounds;
    let plan = MbSgdPlan {
        silos: plans,
        smoothing: None,
        sampling,
        step_size,
        output,
    };
    let mut calibrations = Vec::with_capacity(plan.silos.len());
    for p in &plan.silos {
        // The report reads the mechanism and sampler the silo's half is built from (its round
        // event is derived from exactly these), without building the half.
        let mechanism = silo_mechanism(ctx, p)?;
        let drawn = BatchSource::sampled(sampling, p.records, p.batch_size)?.sampling();
        let formula = match calibration {
            Some(_) if p.fixed_multiplier.is_some() => p.certificate(rounds).unwrap_or_default(),
            None => "non-private".to_string(),
            Some(Calibration::Experiment) => {
                "sigma^2 = 8 L^2 R ln(1/delta) / (n^2 eps^2) (Lowy & Razaviyayn App. I)".into()
            }
            Some(Calibration::Theory) => {
                "sigma^2 = 256 L^2 R ln(2.5R/delta) ln(2/delta) / (n^2 eps^2) (Lowy & Razaviyayn Thm D.1)".into()
            }
            Some(Calibration::Accountant) => p.certificate(rounds).unwrap_or_default(),
        };
        calibrations.push(SiloCalibration {
            silo: p.id,
            sigma: mechanism.as_ref().map_or(0.0, |m| m.noise_std()),
            batch_size: p.batch_size,
            formula,
            run_event: mechanism.map(|m| m.sampled_event(drawn).repeated(rounds as u64)),
        });
    }
    Ok((plan, calibrations))
}

/// Noisy MB-SGD, general form (Algorithm 7), as named in a config file:
///
/// ```toml
/// [[algorithms]]
/// kind = "noisy-mb-sgd"
/// calibration = "theory"
/// params = "theory"
/// constants = { smoothness = 0.25, diameter = 10.0 }
/// weights = [0.5, 0.25, 0.25]
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoisyMbSgdSpec {
    /// Noise rule; `None` for the non-private algorithm.
    #[serde(default)]
    pub calibration: Option<Calibration>,
    /// Explicit parameters, or the theorems' rules for the missing ones (`params = "theory"`).
    #[serde(default)]
    pub params: Params,
    /// η; required unless `params = "theory"`.
    #[serde(default)]
    pub step_size: Option<f64>,
    /// The same K for every silo; default K_i/n_i constant at the privacy minimum.
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// Default: uniform average, or the theory's rule (exponential weights when strongly convex).
    #[serde(default)]
    pub output: Option<OutputRule>,
    /// Moreau smoothing of a non-smooth loss: β, or "theory" (Thm D.2).
    #[serde(default)]
    pub smoothing: Option<Smoothing>,
    /// Objective weights p_i (length N, > 0, sum 1).
    #[serde(default)]
    pub weights: Option<Vec<f64>>,
    /// Problem constants the theorems' rules need (β, μ, D, …).
    #[serde(default)]
    pub constants: Constants,
    /// How each silo draws its K_i records per round: `with-replacement` (the paper's,
    /// default), `without-replacement` or `poisson` (rate K_i/n_i); the round's privacy event
    /// names the sampling used.
    #[serde(default)]
    pub sampling: RecordSampling,
}

/// `kind = "noisy-mb-sgd"` (Algorithm 7): weights, K_i/n_i constant, smoothing and the
/// theorems' rules, checked and calibrated once.
pub(crate) fn plan_general(
    ctx: &BuildContext,
    spec: &NoisyMbSgdParams,
) -> crate::Result<(MbSgdPlan, Vec<SiloCalibration>)> {
    let general = &spec.theory;
    let noise = spec.calibration.map(NoiseRule::from);
    let prep = prepare(
        ctx,
        Setting::MbSgd,
        noise,
        general.smoothing,
        &general.constants,
        general.weights.as_deref(),
    )?;
    let batch = match general.batch {
        BatchRule::Given(k) => BatchChoice::Explicit(k),
        BatchRule::Rule => BatchChoice::CommonRatio,
    };
    let plans = plan_silos(
        ctx,
        noise,
        prep.lipschitz,
        &prep.weights,
        batch,
        spec.sampling,
    )?;
    let rounds = ctx.federation.rounds;
    let (eta, output, note) = match (general.params, general.step) {
        (Params::Explicit, StepRule::Given(eta)) => {
            (eta.get(), spec.output.unwrap_or_default(), String::new())
        }
        // Required here, not by the guard: a reproduction's grid may set η.
        (Params::Explicit, StepRule::Rule) => {
            return Err(ParamError::missing("step_size", "give it, or params = \"theory\"").into());
        }
        (Params::Theory, step) => {
            let p = theory(
                ctx,
                Setting::MbSgd,
                noise,
                &general.constants,
                &prep,
                &plans,
                step.given(),
                None,
            )?;
            let eta = p.step_size.unwrap_or(f64::NAN);
            let note = format!(
                "; theory (Thm D.1{}): eta = {eta}, rule R = {:?}",
                if prep.smoothing.is_some() { "/D.2" } else { "" },
                p.rounds_rule
            );
            (eta, spec.output.unwrap_or(p.output), note)
        }
    };
    let eta = StepSize::new(eta)?;
    let plan = MbSgdPlan {
        silos: plans,
        smoothing: prep.smoothing,
        sampling: spec.sampling,
        step_size: eta,
        output,
    };
    let silos = (0..plan.silos.len())
        .map(|i| plan.silo_half(ctx, i))
        .collect::<crate::Result<Vec<_>>>()?;
    let formula = match noise {
        Some(rule) => format!("{}{note}", rule.formula()),
        None => format!("non-private{note}"),
    };
    let calibration = report(&plan.silos, &silos, rounds, &formula);
    Ok((plan, calibration))
}

#[cfg(test)]
mod tests {
    use dpfl_privacy::PrivacyEvent;
    use dpfl_privacy::event::Sampling;

    use crate::algo::half::{FederationInfo, SiloInfo};
    use crate::algo::{AlgorithmSpec, BuildContext};
    use crate::model::{GradientOracle, LogisticRegression, Projection};
    use crate::units::SiloId;

    /// Two silos (n = 200 and 400, ε = 1, δ = 1e-5), R = 10, L = 1.
    fn ctx() -> BuildContext {
        let model = std::sync::Arc::new(LogisticRegression::new(3, None).unwrap());
        BuildContext {
            federation: FederationInfo {
                dim: 3,
                silos: 2,
                rounds: 10,
                expected_participants: 2.0,
            },
            silos: [200, 400]
                .iter()
                .enumerate()
                .map(|(i, &n)| SiloInfo::new(SiloId::new(i as u32), n, Some((1.0, 1e-5))).unwrap())
                .collect(),
            oracle: GradientOracle::new(model, None).unwrap(),
            lipschitz: 1.0,
            projection: Projection::None,
            init: vec![0.0; 3],
            noise: Default::default(),
        }
    }

    fn spec(toml_text: &str) -> AlgorithmSpec {
        toml::from_str(toml_text).unwrap()
    }

    /// The round event's sampling of silo `i`.
    fn sampling(spec: &AlgorithmSpec, i: usize) -> Sampling {
        let built = spec.build(&ctx()).unwrap();
        match built.silos[i].round_event(crate::units::Round::FIRST) {
            Some(PrivacyEvent::Sampled { sampling, .. }) => sampling,
            other => panic!("not a sampled event: {other:?}"),
        }
    }

    #[test]
    fn every_minibatch_algorithm_charges_the_sampling_it_draws_with() {
        // K = 80 explicit (App. I needs K ≥ ⌊n√ε/(2√R)⌋ = 31 and 63): Poisson at rate
        // 80/200 = 0.4 and 80/400 = 0.2.
        let general = spec(
            "kind = \"noisy-mb-sgd\"\ncalibration = \"experiment\"\nstep_size = 0.1\nbatch_size = 80\nsampling = \"poisson\"",
        );
        assert_eq!(sampling(&general, 0), Sampling::Poisson { rate: 0.4 });
        assert_eq!(sampling(&general, 1), Sampling::Poisson { rate: 0.2 });
        let acsa = spec(
            "kind = \"accelerated-mb-sgd\"\nsampling = \"without-replacement\"\ncalibration = \"experiment\"\nstep_size = 1.0\nbatch_size = 80",
        );
        assert_eq!(
            sampling(&acsa, 1),
            Sampling::WithoutReplacement {
                population: 400,
                size: 80
            }
        );
        let erm = spec(
            "kind = \"accelerated-mb-sgd\"\nsampling = \"erm\"\ncalibration = \"experiment\"\nstep_size = 1.0\nbatch_size = 80",
        );
        assert_eq!(
            sampling(&erm, 0),
            Sampling::WithReplacement {
                population: 200,
                draws: 80
            }
        );
        let plain = spec(
            "kind = \"mb-sgd\"\ncalibration = \"theory\"\nstep_size = 0.1\nbatch_size = 80\nsampling = \"without-replacement\"",
        );
        assert_eq!(
            sampling(&plain, 0),
            Sampling::WithoutReplacement {
                population: 200,
                size: 80
            }
        );
    }

    #[test]
    fn the_general_form_calibrates_with_the_accountant_like_plain_mb_sgd() {
        // With uniform weights and the same K, Algorithm 7 under the accountant rule gives each
        // silo exactly plain MB-SGD's σ (one calibration path), and reports its certificate.
        let general = spec(
            "kind = \"noisy-mb-sgd\"\ncalibration = \"accountant\"\nstep_size = 0.1\nbatch_size = 20",
        )
        .build(&ctx())
        .unwrap();
        let plain = spec(
            "kind = \"mb-sgd\"\ncalibration = \"accountant\"\nstep_size = 0.1\nbatch_size = 20",
        )
        .build(&ctx())
        .unwrap();
        for i in 0..2 {
            let (g, p) = (&general.calibration[i], &plain.calibration[i]);
            assert_eq!(g.sigma.to_bits(), p.sigma.to_bits(), "silo {i}");
            assert_eq!(g.formula, p.formula);
            assert!(g.formula.contains("K = 20 of n = "), "{}", g.formula);
            assert_eq!(g.run_event, p.run_event);
        }
        // The smaller silo needs more noise for the same ε.
        assert!(general.calibration[0].sigma > general.calibration[1].sigma);
    }

    #[test]
    fn one_pass_acsa_keeps_only_its_theorem() {
        let e = spec(
            "kind = \"accelerated-mb-sgd\"\nsampling = \"one-pass\"\ncalibration = \"accountant\"\nstep_size = 1.0",
        )
        .build(&ctx())
        .err()
        .expect("one pass has only Thm E.1")
        .to_string();
        assert!(e.contains("Thm E.1"), "{e}");
    }
}
