//! `dpfl.halves.Plan`: a run's plan (`dpfl::plan::Plan`: public setup, algorithm, every
//! silo's calibration) and the seed of its streams, from a federation file (`dpfl federate`'s
//! `[plan]` and `seed`), from an experiment (as `dpfl train` plans its algorithm `a`, with its
//! seed derivation), or built for a user's own model (`model.kind = "external"`).

use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::json;

use dpfl::algo::{AlgorithmSpec, FixedNoise, SiloInfo};
use dpfl::model::{ModelSpec, Projection};
use dpfl::plan::{Plan as Inner, Setup};
use dpfl::round::Participation;
use dpfl::units::{ClipNorm, SiloId};
use dpfl_lab::experiment::{self, ExperimentSpec};
use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::{Delta, Neighbouring, PrivacyEvent};

use crate::errors::{ConfigError, config, dpfl_error, one_line, uint_arg};

/// The text format of [`Plan::to_json`].
const FORMAT: &str = "dpfl-plan/1";

/// A run's plan and the seed of its streams (`None`: OS-seeded).
#[pyclass(module = "dpfl._core", frozen)]
#[derive(Clone)]
pub struct Plan {
    pub(crate) inner: Inner,
    pub(crate) seed: Option<u64>,
}

/// `obj` as JSON text, through Python's `json` (a dict, list or scalar); what `json` cannot
/// write is a [`ConfigError`] naming `field`.
pub(crate) fn to_json_text(field: &str, obj: &Bound<'_, PyAny>) -> PyResult<String> {
    obj.py()
        .import("json")?
        .call_method1("dumps", (obj,))
        .map_err(|e| config(field, format!("not JSON data: {e}")))?
        .extract()
}

fn opt_seed(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    v.filter(|s| !s.is_none())
        .map(|s| uint_arg("seed", s))
        .transpose()
}

fn parse<T: serde::de::DeserializeOwned>(field: &str, text: &str) -> PyResult<T> {
    serde_json::from_str(text).map_err(|e| config(field, e.to_string()))
}

/// A per-silo value: a number for every silo or a list of one per silo.
fn per_silo(field: &str, v: &Bound<'_, PyAny>, n: usize) -> PyResult<Vec<f64>> {
    if let Ok(x) = v.extract::<f64>() {
        return Ok(vec![x; n]);
    }
    let list: Vec<f64> = v
        .extract()
        .map_err(|_| config(field, "a number or a list of one number per silo"))?;
    if list.len() != n {
        return Err(config(
            field,
            format!("{} values for {n} silos", list.len()),
        ));
    }
    Ok(list)
}

impl Plan {
    /// ε of `events` composed at δ (replace-one) by `kind`, as `dpfl train`'s summary
    /// accounts a silo (`experiment::summary::account_silo`, fine grid); 0 for no events.
    pub(crate) fn epsilon_by(
        kind: AccountantKind,
        events: &[PrivacyEvent],
        delta: f64,
    ) -> Result<f64, dpfl_privacy::PrivacyError> {
        if events.is_empty() {
            return Ok(0.0);
        }
        let d = Delta::new(delta)?;
        let all = PrivacyEvent::Composed(events.to_vec());
        kind.epsilon(Neighbouring::ReplaceOne, &all, d)
    }

    /// The silo's budget δ, or the δ its fixed noise is reported at.
    pub(crate) fn delta_of(&self, silo: usize) -> Option<f64> {
        self.inner
            .setup
            .silos
            .get(silo)
            .and_then(SiloInfo::delta)
            .map(|d| d.get())
    }

    /// The model dimension d.
    pub(crate) fn dim_checked(&self) -> PyResult<usize> {
        Ok(self.inner.context().map_err(dpfl_error)?.federation.dim)
    }

    fn from_text(text: &str) -> PyResult<Self> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| config("plan", e.to_string()))?;
        if v.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
            return Err(config("plan", format!("not a `{FORMAT}` plan")));
        }
        let toml_text = v
            .get("plan")
            .and_then(|p| p.as_str())
            .ok_or_else(|| config("plan", "no `plan`"))?;
        let inner: Inner = toml::from_str(toml_text).map_err(|e| config("plan", e.to_string()))?;
        let seed = match v.get("seed") {
            None | Some(serde_json::Value::Null) => None,
            Some(s) => Some(
                s.as_u64()
                    .ok_or_else(|| config("seed", "must be an unsigned 64-bit integer"))?,
            ),
        };
        Ok(Plan { inner, seed })
    }
}

#[pymethods]
impl Plan {
    /// The plan of a federation file written by `dpfl federate` (its `[plan]` and `seed`).
    #[staticmethod]
    fn from_federation(path: PathBuf) -> PyResult<Self> {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| ConfigError::new_err(format!("{}: {e}", path.display())))?;
        let value: toml::Table = toml::from_str(&text)
            .map_err(|e| ConfigError::new_err(format!("{}: {e}", path.display())))?;
        let plan = value.get("plan").cloned().ok_or_else(|| {
            ConfigError::new_err(format!(
                "{}: no [plan]: write the file with `dpfl federate`",
                path.display()
            ))
        })?;
        let inner: Inner = plan
            .try_into()
            .map_err(|e| ConfigError::new_err(format!("{}: [plan]: {e}", path.display())))?;
        let seed = match value.get("seed") {
            None => None,
            Some(s) => Some(
                s.as_integer()
                    .and_then(|i| u64::try_from(i).ok())
                    .ok_or_else(|| {
                        ConfigError::new_err(format!("{}: seed: not a u64", path.display()))
                    })?,
            ),
        };
        Ok(Plan { inner, seed })
    }

    /// The plan of algorithm `algorithm` of the experiment at `path`, exactly as `dpfl train`
    /// plans trial 0 of it (same data split, L and calibration), and that run's seed (the
    /// experiment's seed, or `seed`, through the same derivation): halves built from it and
    /// seeded with `"plan"` reproduce `dpfl train`'s model bit for bit.
    #[staticmethod]
    #[pyo3(signature = (path, algorithm=None, seed=None, data_dir=None))]
    fn from_experiment(
        py: Python<'_>,
        path: PathBuf,
        algorithm: Option<&Bound<'_, PyAny>>,
        seed: Option<&Bound<'_, PyAny>>,
        data_dir: Option<PathBuf>,
    ) -> PyResult<Self> {
        let algorithm: usize = algorithm.map_or(Ok(0), |a| uint_arg("algorithm", a))?;
        let seed = opt_seed(seed)?;
        let (spec, trial, trial_seed) = load_trial(py, &path, seed, data_dir.as_deref())?;
        let alg = spec.algorithms.get(algorithm).ok_or_else(|| {
            config(
                "algorithm",
                format!(
                    "index {algorithm} but the experiment has {} algorithms",
                    spec.algorithms.len()
                ),
            )
        })?;
        let setup = experiment::setup(&spec, &trial).map_err(dpfl_error)?;
        let inner = Inner::new(setup, &alg.spec)
            .map_err(|e| dpfl_error(experiment::name_algorithm(algorithm, &alg.label(), e)))?;
        Ok(Plan {
            inner,
            seed: experiment::algorithm_seed(trial_seed, algorithm),
        })
    }

    /// The plan of `algorithm` (a dict: an experiment's `[[algorithms]]` table) for a user's
    /// own model of `dim` parameters whose silos hold `records[i]` records: every
    /// per-example gradient clipped at min(`clip`, `lipschitz`), the noise calibrated to
    /// that bound and each silo's (`epsilon`, `delta`) (numbers, or lists of one per silo),
    /// or set by `noise_multiplier` instead of `epsilon`.
    #[staticmethod]
    #[pyo3(signature = (algorithm, *, dim, records, epsilon=None, delta=None, clip, rounds,
        participation=None, lipschitz=None, seed=None, noise_multiplier=None,
        mechanism=None, projection=None, enforce_budget=true))]
    #[allow(clippy::too_many_arguments)]
    fn build(
        algorithm: &Bound<'_, PyAny>,
        dim: &Bound<'_, PyAny>,
        records: &Bound<'_, PyAny>,
        epsilon: Option<&Bound<'_, PyAny>>,
        delta: Option<&Bound<'_, PyAny>>,
        clip: f64,
        rounds: &Bound<'_, PyAny>,
        participation: Option<&Bound<'_, PyAny>>,
        lipschitz: Option<f64>,
        seed: Option<&Bound<'_, PyAny>>,
        noise_multiplier: Option<f64>,
        mechanism: Option<&Bound<'_, PyAny>>,
        projection: Option<&Bound<'_, PyAny>>,
        enforce_budget: bool,
    ) -> PyResult<Self> {
        let alg: AlgorithmSpec = parse("algorithm", &to_json_text("algorithm", algorithm)?)?;
        let (dim, rounds): (usize, usize) = (uint_arg("dim", dim)?, uint_arg("rounds", rounds)?);
        let seed = opt_seed(seed)?;
        let records = records
            .try_iter()
            .map_err(|_| config("records", "a list of one record count per silo"))?
            .enumerate()
            .map(|(i, r)| uint_arg::<usize>(&format!("records[{i}]"), &r?))
            .collect::<PyResult<Vec<usize>>>()?;
        let n = records.len();
        if n == 0 {
            return Err(config("records", "no silos"));
        }
        if dim == 0 {
            return Err(config("dim", "must be at least 1"));
        }
        let clip_norm = ClipNorm::new(clip).map_err(dpfl_error)?;
        let l = lipschitz.unwrap_or(clip);
        if !(l.is_finite() && l > 0.0) {
            return Err(config(
                "lipschitz",
                format!("must be finite and > 0, got {l}"),
            ));
        }
        let private = alg.is_private();
        let eps = epsilon.map(|e| per_silo("epsilon", e, n)).transpose()?;
        let deltas = delta.map(|d| per_silo("delta", d, n)).transpose()?;
        let silos = (0..n)
            .map(|i| {
                let id = SiloId::checked(i, n).map_err(dpfl_error)?;
                let mut info = SiloInfo::new(id, records[i], None).map_err(dpfl_error)?;
                if !private {
                    return Ok(info);
                }
                let d = deltas
                    .as_ref()
                    .map(|d| d[i])
                    .ok_or_else(|| config("delta", "required for a private algorithm"))?;
                match (&eps, noise_multiplier) {
                    (Some(e), None) => {
                        info =
                            SiloInfo::new(id, records[i], Some((e[i], d))).map_err(dpfl_error)?;
                    }
                    (None, Some(z)) => {
                        info.fixed_noise = Some(FixedNoise::new(z, d).map_err(dpfl_error)?);
                    }
                    _ => {
                        return Err(config(
                            "epsilon",
                            "give exactly one of epsilon and noise_multiplier",
                        ));
                    }
                }
                Ok(info)
            })
            .collect::<PyResult<Vec<_>>>()?;
        let participation: Participation = match participation {
            None => Participation::default(),
            Some(p) => parse("participation", &to_json_text("participation", p)?)?,
        };
        let projection: Projection = match projection {
            None => Projection::None,
            Some(p) => parse("projection", &to_json_text("projection", p)?)?,
        };
        let noise = match mechanism {
            None => Default::default(),
            Some(m) => parse("mechanism", &to_json_text("mechanism", m)?)?,
        };
        let setup = Setup {
            model: ModelSpec::External { params: dim },
            features: 1,
            classes: None,
            clip: Some(clip_norm),
            lipschitz: l,
            rounds,
            participation,
            projection,
            noise,
            enforce_budget,
            silos,
        };
        let inner = Inner::new(setup, &alg).map_err(dpfl_error)?;
        Ok(Plan { inner, seed })
    }

    /// The plan as JSON text (`{"format": "dpfl-plan/1", "seed": …, "plan": <TOML>}`: the
    /// plan itself as the TOML `dpfl federate` writes, whose numbers read back bit for bit).
    fn to_json(&self) -> PyResult<String> {
        let toml_text = toml::to_string(&self.inner).map_err(|e| config("plan", e.to_string()))?;
        Ok(json!({ "format": FORMAT, "seed": self.seed, "plan": toml_text }).to_string())
    }

    /// A plan from [`Plan::to_json`]'s text.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Self> {
        Plan::from_text(text)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        let f = py.get_type::<Plan>().getattr("from_json")?;
        Ok((f, (self.to_json()?,)))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .extract::<PyRef<'_, Plan>>()
            .is_ok_and(|o| o.inner == self.inner && o.seed == self.seed)
    }

    fn __repr__(&self) -> String {
        format!(
            "Plan({} silos, {} rounds, d = {}, seed {:?})",
            self.inner.silos(),
            self.inner.setup.rounds,
            self.dim_checked().unwrap_or(0),
            self.seed
        )
    }

    /// The number of silos N.
    #[getter]
    fn silos(&self) -> usize {
        self.inner.silos()
    }

    /// The planned rounds R.
    #[getter]
    fn rounds(&self) -> usize {
        self.inner.setup.rounds
    }

    /// The model dimension d.
    #[getter]
    fn dim(&self) -> PyResult<usize> {
        self.dim_checked()
    }

    /// The seed of the streams (`None`: OS-seeded).
    #[getter]
    fn seed(&self) -> Option<u64> {
        self.seed
    }

    /// What the run needs of its runner: `shuffler`, `every_silo`, `fixed_participation`,
    /// `quorum`.
    #[getter]
    fn requirements<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self.inner.requirements();
        let d = PyDict::new(py);
        d.set_item("shuffler", r.shuffler)?;
        d.set_item("every_silo", r.every_silo)?;
        d.set_item("fixed_participation", r.fixed_participation)?;
        d.set_item("quorum", r.quorum)?;
        Ok(d)
    }

    /// Per silo: `sigma`, `batch_size` (K), `formula`, `delta` and `epsilon`, the ε certified
    /// for the whole run's event (the tighter of RDP and PLD, replace-one, at the silo's δ;
    /// `None` if neither accounts it); `run_event` as JSON.
    #[getter]
    fn calibration<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .calibration
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let d = PyDict::new(py);
                d.set_item("silo", i)?;
                d.set_item("sigma", c.sigma)?;
                d.set_item("batch_size", c.batch_size)?;
                d.set_item("formula", &c.formula)?;
                let delta = self.delta_of(i);
                d.set_item("delta", delta)?;
                // The tighter of RDP and PLD, as `dpfl train` certifies a silo.
                let eps = match (&c.run_event, delta) {
                    (Some(e), Some(delta)) => [AccountantKind::Rdp, AccountantKind::Pld]
                        .into_iter()
                        .filter_map(|k| Plan::epsilon_by(k, std::slice::from_ref(e), delta).ok())
                        .reduce(f64::min),
                    _ => None,
                };
                d.set_item("epsilon", eps)?;
                let ev = c
                    .run_event
                    .as_ref()
                    .map(|e| serde_json::to_string(e).map_err(|e| config("event", e.to_string())))
                    .transpose()?;
                d.set_item("run_event", ev)?;
                Ok(d)
            })
            .collect()
    }
}

/// Trial 0 of the experiment at `path` as `dpfl train` draws it, and its seed.
pub(crate) fn load_trial(
    py: Python<'_>,
    path: &Path,
    seed: Option<u64>,
    data_dir: Option<&Path>,
) -> PyResult<(ExperimentSpec, experiment::TrialData, Option<u64>)> {
    let mut spec = ExperimentSpec::from_file(path)
        .map_err(|e| ConfigError::new_err(format!("{}: {}", path.display(), one_line(&e))))?;
    if seed.is_some() {
        spec.seed = seed;
    }
    spec.validate().map_err(dpfl_error)?;
    py.detach(|| {
        let mut master = experiment::master_rng(&spec)?;
        let (trial, trial_seed) = experiment::next_trial(&spec, data_dir, &mut master)?;
        Ok((spec, trial, trial_seed))
    })
    .map_err(dpfl_error)
}

/// Every silo's training data of trial 0 of the experiment at `path` (as `dpfl train` splits
/// it): per silo (features as f64 bytes, rows, columns, targets as f64 bytes, classes).
#[pyfunction]
#[pyo3(signature = (path, seed=None, data_dir=None))]
#[allow(clippy::type_complexity)]
pub fn experiment_silos(
    py: Python<'_>,
    path: PathBuf,
    seed: Option<u64>,
    data_dir: Option<PathBuf>,
) -> PyResult<Vec<(Vec<u8>, usize, usize, Vec<u8>, Option<usize>)>> {
    let (_, trial, _) = load_trial(py, &path, seed, data_dir.as_deref())?;
    Ok(trial
        .silos
        .iter()
        .map(|s| {
            let t = &s.train;
            let x: Vec<u8> = t
                .x()
                .as_slice()
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            let y: Vec<u8> = t.y().iter().flat_map(|v| v.to_le_bytes()).collect();
            (x, t.len(), t.num_features(), y, t.target().num_classes())
        })
        .collect())
}
