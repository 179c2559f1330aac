//! A run's **plan**: the public facts the halves are built from ([`Setup`]) and the checked,
//! calibrated parameters of its algorithm (per-silo K_i, σ_i, formula and run privacy event,
//! and what each half needs: [`WingPlan`]), computed once per run (issue 10, "checked
//! parameters, built per party").
//!
//! [`server_half`] and [`silo_half`] build one half each from a plan and calibrate nothing, so
//! each process builds only its own half: the simulator builds all of them from one plan,
//! `dpfl federate` writes the plan into every federation file (`[plan]`), and `dpfl server` /
//! `dpfl silo` build their one half from it. `algo::context::calibrations_on_this_thread`
//! counts calibrations, so tests check that a run with `calibration = "accountant"`
//! calibrates N times, not once per process and silo.
//!
//! A plan is public: it holds no data, only what the papers treat as public (n_i, budgets,
//! d, L) and what follows from it. A silo that takes a plan from a coordinator still checks
//! its run event against its own budget before it reads data (`dpfl_net::config::check_plan`)
//! and its ledger charges every round, so a wrong plan can stop a silo but not make it
//! over-spend.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::algo::spec::WingPlan;
use crate::algo::wing::Requirements;
use crate::algo::{
    AlgorithmSpec, BuildContext, BuiltAlgorithm, FederationInfo, ServerHalf, SiloCalibration,
    SiloHalf, SiloInfo,
};
use crate::model::{GradientOracle, Model, ModelSpec, Projection};
use crate::round::Participation;
use crate::units::{ClipNorm, SiloId};

/// The public facts of a run: everything [`BuildContext`] is built from, serialisable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    /// The model, built from `features` and `classes`.
    pub model: ModelSpec,
    /// Feature count of every record.
    pub features: usize,
    /// Number of classes (classification) or none (regression).
    pub classes: Option<usize>,
    /// The configured per-example clip, if any.
    pub clip: Option<ClipNorm>,
    /// The per-example gradient bound L the noise is calibrated to.
    pub lipschitz: f64,
    /// R.
    pub rounds: usize,
    /// Which silos take part in a round.
    pub participation: Participation,
    /// The feasible set W.
    pub projection: Projection,
    /// The Gaussian noise of every mechanism (`privacy.mechanism`).
    pub noise: dpfl_privacy::GaussianNoise,
    /// Whether the experiment asks every silo to enforce its budget with a ledger.
    pub enforce_budget: bool,
    /// Each silo's n_i and (ε_i, δ_i), in silo order.
    pub silos: Vec<SiloInfo>,
}

impl Setup {
    /// The build context, with the model built from [`Setup::model`].
    pub fn context(&self) -> crate::Result<BuildContext> {
        let model = self.model.build(self.features, self.classes)?;
        self.context_with(model)
    }

    /// The build context on an already built model (the simulator's, which also holds the
    /// trial's data elsewhere; the model itself holds none).
    pub fn context_with(&self, model: Arc<dyn Model>) -> crate::Result<BuildContext> {
        let n = self.silos.len();
        self.participation.validate(n)?;
        Ok(BuildContext {
            federation: FederationInfo {
                dim: model.num_params(),
                silos: n,
                rounds: self.rounds,
                expected_participants: self.participation.effective_m(n),
            },
            silos: self.silos.clone(),
            init: vec![0.0; model.num_params()],
            oracle: GradientOracle::clipping(model, self.clip),
            lipschitz: self.lipschitz,
            projection: self.projection,
            noise: self.noise,
        })
    }
}

/// One run's plan: its public setup, its algorithm, and each silo's calibration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The public facts.
    pub setup: Setup,
    /// The algorithm as configured.
    pub algorithm: AlgorithmSpec,
    /// Per silo: K_i, σ_i, the formula used and the run's privacy event (reports read these).
    pub calibration: Vec<SiloCalibration>,
    /// What the halves are built from.
    pub wing: WingPlan,
}

impl Plan {
    /// Checks `algorithm` on `setup` and calibrates every silo, once.
    pub fn new(setup: Setup, algorithm: &AlgorithmSpec) -> crate::Result<Self> {
        let ctx = setup.context()?;
        Self::with_context(setup, algorithm, &ctx)
    }

    /// [`Plan::new`] on a context already built from `setup` (see [`Setup::context_with`]).
    pub fn with_context(
        setup: Setup,
        algorithm: &AlgorithmSpec,
        ctx: &BuildContext,
    ) -> crate::Result<Self> {
        let (calibration, wing) = algorithm.plan(ctx)?;
        Ok(Plan {
            setup,
            algorithm: algorithm.clone(),
            calibration,
            wing,
        })
    }

    /// [`Plan::with_context`] and every half on `ctx` (the simulator's whole federation), each
    /// built once: the shuffle wing built them while planning.
    pub fn with_halves(
        setup: Setup,
        algorithm: &AlgorithmSpec,
        ctx: &BuildContext,
    ) -> crate::Result<(Self, BuiltAlgorithm)> {
        let (calibration, wing, whole) = algorithm.plan_parts(ctx)?;
        let plan = Plan {
            setup,
            algorithm: algorithm.clone(),
            calibration,
            wing,
        };
        let built = match whole {
            Some(built) => built,
            None => plan.build_with(ctx)?,
        };
        Ok((plan, built))
    }

    /// The public build context.
    pub fn context(&self) -> crate::Result<BuildContext> {
        self.setup.context()
    }

    /// Every half on `ctx` (built from this plan's setup): the simulator's whole federation.
    pub fn build_with(&self, ctx: &BuildContext) -> crate::Result<BuiltAlgorithm> {
        self.wing.build(ctx, self.calibration.clone())
    }

    /// The number of silos.
    pub fn silos(&self) -> usize {
        self.setup.silos.len()
    }

    /// What the run requires of its runner: the algorithm's requirements
    /// ([`crate::algo::wing::Requirements`]) with the shuffle quorum of this plan. The
    /// experiment layer, `dpfl-net` and the CLI read these instead of matching kinds.
    pub fn requirements(&self) -> Requirements {
        let mut needs = self.algorithm.requirements();
        needs.quorum = self.quorum_of(&needs);
        needs
    }

    /// For an algorithm that needs a shuffler: the fewest silos a shuffled batch must hold
    /// for the reported honest-shuffler guarantee (`ShufflePlan::quorum`); `None` otherwise.
    pub fn shuffle_quorum(&self) -> Option<usize> {
        self.requirements().quorum
    }

    fn quorum_of(&self, needs: &Requirements) -> Option<usize> {
        if !needs.shuffler {
            return None;
        }
        let participants = match &self.setup.participation {
            Participation::Fixed { m } => *m,
            _ => self.silos(),
        };
        self.wing.quorum(participants)
    }
}

/// The server half of `plan` (no calibration).
pub fn server_half(plan: &Plan) -> crate::Result<Box<dyn ServerHalf>> {
    plan.wing.server_half(&plan.context()?)
}

/// Silo `silo`'s half of `plan` (no calibration, no other silo's half). A plan of a user's
/// own model (`external`) needs the silo's gradients: [`silo_half_with_model`].
pub fn silo_half(plan: &Plan, silo: SiloId) -> crate::Result<Box<dyn SiloHalf>> {
    if let ModelSpec::External { .. } = plan.setup.model {
        return Err(crate::Error::config(
            "model.kind",
            "an external model's silo half needs the silo's gradient provider",
        ));
    }
    plan.wing.silo_half(&plan.context()?, silo.index())
}

/// Silo `silo`'s half of `plan` on `model` (an [`crate::model::ExternalModel`] with the
/// silo's gradient provider), which must have the plan's dimension.
pub fn silo_half_with_model(
    plan: &Plan,
    silo: SiloId,
    model: Arc<dyn Model>,
) -> crate::Result<Box<dyn SiloHalf>> {
    let ctx = plan.setup.context_with(model)?;
    let d = plan.context()?.federation.dim;
    if ctx.federation.dim != d {
        return Err(crate::Error::Dimension(format!(
            "the silo's model has {} parameters, the plan's {d}",
            ctx.federation.dim
        )));
    }
    plan.wing.silo_half(&ctx, silo.index())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::context::calibrations_on_this_thread;

    fn setup(silos: usize) -> Setup {
        Setup {
            model: toml::from_str("kind = \"logistic\"").unwrap(),
            features: 2,
            classes: Some(2),
            clip: None,
            lipschitz: 1.0,
            rounds: 5,
            participation: Participation::default(),
            projection: Projection::None,
            noise: Default::default(),
            enforce_budget: false,
            silos: (0..silos)
                .map(|i| {
                    SiloInfo::new(SiloId::new(i as u32), 100 + 10 * i, Some((1.0, 1e-4))).unwrap()
                })
                .collect(),
        }
    }

    #[test]
    fn a_plan_calibrates_each_silo_once_and_halves_calibrate_nothing() {
        let alg: AlgorithmSpec = toml::from_str(
            "kind = \"mb-sgd\"\ncalibration = \"accountant\"\nstep_size = 0.1\nbatch_size = 10",
        )
        .unwrap();
        let before = calibrations_on_this_thread();
        let plan = Plan::new(setup(3), &alg).unwrap();
        // N = 3 calibrations for the run.
        assert_eq!(calibrations_on_this_thread() - before, 3);
        let text = toml::to_string(&plan).unwrap();
        let back: Plan = toml::from_str(&text).unwrap();
        assert_eq!(back, plan, "{text}");
        let before = calibrations_on_this_thread();
        let server = server_half(&back).unwrap();
        let silo = silo_half(&back, SiloId::new(2)).unwrap();
        assert_eq!(calibrations_on_this_thread(), before);
        assert_eq!(server.dim(), plan.context().unwrap().federation.dim);
        // The silo half's noise is the plan's σ_2, bit for bit.
        assert_eq!(silo.noise_std(), plan.calibration[2].sigma);
        assert!(silo_half(&back, SiloId::new(3)).is_err());
        // Building the whole federation the old way calibrates N more times.
        let before = calibrations_on_this_thread();
        alg.build(&plan.context().unwrap()).unwrap();
        assert_eq!(calibrations_on_this_thread() - before, 3);
    }
}
