//! A trial's data and the public facts the halves are built from: the model, the gradient
//! bound L (public or measured), and the [`BuildContext`].

use dpfl_privacy::DpRng;

use super::spec::{ExperimentSpec, missing_public_l, needs_public_l};
use dpfl::algo::{BuildContext, SiloInfo};
use dpfl::data::SiloData;
use dpfl::model::Model;
use dpfl::plan::Setup;
use dpfl::units::SiloId;

/// Prepared data for one trial, with the public facts derived from it.
pub struct TrialData {
    /// The trial's silos, each its own train/test split (only its own half ever sees it).
    pub silos: Vec<SiloData>,
    /// The model (loss, gradients, metric), shared read-only by every half of the trial.
    pub model: std::sync::Arc<dyn Model>,
    /// How rows became features (saved with the models).
    pub preprocessing: super::preprocessing::Preprocessing,
    /// The silos' names when the data give them (a by-column partition's values, the files of
    /// `csv-silos`), in silo order.
    pub silo_names: Option<Vec<String>>,
}

/// Loads and splits the data for trial `trial` and builds the model.
pub fn prepare_trial(
    spec: &ExperimentSpec,
    data_dir: Option<&std::path::Path>,
    rng: &mut DpRng,
) -> dpfl::Result<TrialData> {
    let super::datasource::Loaded {
        silos,
        preprocessing,
        names: silo_names,
    } = spec.data.load_prepared(data_dir, rng)?;
    if matches!(spec.model, dpfl::model::ModelSpec::External { .. }) {
        return Err(dpfl::Error::config(
            "model.kind",
            "`external` is a user's own model, whose gradients only a Python silo half has              (dpfl.halves.SiloHalf(gradients=...)); an experiment names one of dpfl's models",
        ));
    }
    let first = silos
        .first()
        .ok_or_else(|| dpfl::Error::config("data.partition", "produced no silos"))?;
    let features = first.train.num_features();
    let classes = first.train.target().num_classes();
    let model = spec.model.build(features, classes)?;
    for (i, s) in silos.iter().enumerate() {
        // The model does not fit the data: a config error like any other wrong model kind.
        model
            .check_data(&s.train)
            .map_err(|e| dpfl::Error::config("model.kind", format!("silo {i}: {e}")))?;
        if s.train.is_empty() {
            return Err(dpfl::Error::data(
                format!("silo {i}"),
                "has no training rows",
            ));
        }
    }
    Ok(TrialData {
        silos,
        model,
        preprocessing,
        silo_names,
    })
}

/// The caveat a run with a data-derived L carries in its report and `summary.json`.
pub const DATA_DERIVED_L_CAVEAT: &str = "not end-to-end private: the gradient bound L was \
     derived from the training data (privacy.lipschitz_from_data = factor * max||x|| over all \
     silos' rows); the noise scale sigma, proportional to L, reveals it to the server and every \
     silo. Set a public privacy.lipschitz or clip for an end-to-end guarantee.";

/// Whether the gradient bound L of `spec` is public (`privacy.lipschitz` or `clip`), as the
/// noise calibration must be for the run's guarantee to be end to end: σ ∝ L is visible in
/// every message's scale. A private experiment with neither is refused by [`lipschitz`]
/// unless it asks for the data-derived `privacy.lipschitz_from_data`.
pub fn lipschitz_is_public(spec: &ExperimentSpec) -> bool {
    let p = spec.privacy.as_ref();
    p.and_then(|p| p.lipschitz).is_some()
        || (p.and_then(|p| p.lipschitz_from_data).is_none() && spec.clip.is_some())
}

/// The gradient bound L of an experiment on given data. In order: `privacy.lipschitz`,
/// `privacy.lipschitz_from_data` (data-derived, reported as not end-to-end private), `clip`;
/// with none of them an experiment with a private algorithm is refused (naming
/// `privacy.lipschitz`) and any other uses the model's bound at the data's largest row norm.
pub fn lipschitz(
    spec: &ExperimentSpec,
    model: &dyn Model,
    silos: &[SiloData],
) -> dpfl::Result<f64> {
    let max_norm = || {
        silos
            .iter()
            .map(|s| s.train.max_row_norm())
            .fold(0.0, f64::max)
    };
    let p = spec.privacy.as_ref();
    if let Some(l) = p.and_then(|p| p.lipschitz) {
        return Ok(l);
    }
    if let Some(f) = p.and_then(|p| p.lipschitz_from_data) {
        return Ok(f * max_norm());
    }
    if let Some(c) = spec.clip {
        return Ok(c);
    }
    if needs_public_l(spec) {
        return Err(missing_public_l());
    }
    model.lipschitz(max_norm()).ok_or_else(|| {
        dpfl::Error::config(
            "privacy.lipschitz",
            format!(
                "the {} loss is not Lipschitz: set `clip` or `privacy.lipschitz`",
                model.name()
            ),
        )
    })
}

/// Builds the public context for one algorithm on one trial's data.
pub fn build_context(spec: &ExperimentSpec, trial: &TrialData) -> dpfl::Result<BuildContext> {
    setup(spec, trial)?.context_with(trial.model.clone())
}

/// The public [`Setup`] of one trial: n_i, the feature and class counts of its data and the
/// gradient bound L.
pub fn setup(spec: &ExperimentSpec, trial: &TrialData) -> dpfl::Result<Setup> {
    let records: Vec<usize> = trial.silos.iter().map(|s| s.train.len()).collect();
    let l = lipschitz(spec, trial.model.as_ref(), &trial.silos)?;
    let first = trial
        .silos
        .first()
        .ok_or_else(|| dpfl::Error::config("data.partition", "produced no silos"))?;
    setup_from(
        spec,
        first.train.num_features(),
        first.train.target().num_classes(),
        &records,
        l,
    )
}

/// [`plan_from`] on the experiment file at `path` (paths in it relative to it).
pub fn plan_from_file(
    path: &std::path::Path,
    algorithm: usize,
    features: usize,
    classes: Option<usize>,
    records: &[usize],
    l: f64,
) -> dpfl::Result<dpfl::plan::Plan> {
    let spec = ExperimentSpec::from_file(path)?;
    plan_from(&spec, algorithm, features, classes, records, l)
}

/// The plan of one algorithm of an experiment from public facts only (what `dpfl federate`
/// hands to every process): checks the algorithm and calibrates every silo once.
pub fn plan_from(
    spec: &ExperimentSpec,
    algorithm: usize,
    features: usize,
    classes: Option<usize>,
    records: &[usize],
    l: f64,
) -> dpfl::Result<dpfl::plan::Plan> {
    let alg = spec.algorithms.get(algorithm).ok_or_else(|| {
        dpfl::Error::config(
            "algorithm",
            format!(
                "index {algorithm} but the experiment has {} algorithms",
                spec.algorithms.len()
            ),
        )
    })?;
    let setup = setup_from(spec, features, classes, records, l)?;
    dpfl::plan::Plan::new(setup, &alg.spec)
}

/// The run's public [`Setup`] from an experiment and public facts: every silo's record count
/// n_i (with its budget (ε_i, δ_i), δ_i by the experiment's rule), the feature and class
/// counts and the gradient bound L.
pub fn setup_from(
    spec: &ExperimentSpec,
    features: usize,
    classes: Option<usize>,
    records: &[usize],
    l: f64,
) -> dpfl::Result<Setup> {
    let n_silos = records.len();
    spec.participation.validate(n_silos)?;
    let silos = records
        .iter()
        .enumerate()
        .map(|(i, &n_i)| {
            let (budget, fixed_noise) = match &spec.privacy {
                None => (None, None),
                Some(p) => {
                    p.check_target()?;
                    if let Some(es) = &p.epsilons
                        && es.len() != n_silos
                    {
                        return Err(dpfl::Error::config(
                            "privacy.epsilons",
                            format!("has {} entries for {n_silos} silos", es.len()),
                        ));
                    }
                    let delta = p.delta.resolve(n_i)?;
                    let delta = dpfl_privacy::Delta::new(delta)
                        .map_err(|e| dpfl::Error::config("privacy.delta", e.to_string()))?;
                    match (p.target_epsilon(i), p.noise_multiplier) {
                        (Some(eps), _) => {
                            let eps = dpfl_privacy::Epsilon::new(eps).map_err(|e| {
                                dpfl::Error::config("privacy.epsilon", e.to_string())
                            })?;
                            (Some((eps, delta)), None)
                        }
                        // check_target: exactly one of the two.
                        (None, z) => (
                            None,
                            Some(dpfl::algo::FixedNoise::new(
                                z.unwrap_or(f64::NAN),
                                delta.get(),
                            )?),
                        ),
                    }
                }
            };
            Ok(SiloInfo {
                id: SiloId::checked(i, n_silos)?,
                records: n_i,
                budget,
                fixed_noise,
            })
        })
        .collect::<dpfl::Result<Vec<_>>>()?;
    Ok(Setup {
        model: spec.model.clone(),
        features,
        classes,
        clip: spec.clip.map(dpfl::units::ClipNorm::new).transpose()?,
        lipschitz: l,
        rounds: spec.rounds,
        participation: spec.participation.clone(),
        projection: spec.projection,
        noise: match &spec.privacy {
            Some(p) => p.noise()?,
            None => Default::default(),
        },
        enforce_budget: spec.privacy.as_ref().is_some_and(|p| p.enforce_budget),
        silos,
    })
}
