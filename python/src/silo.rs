//! `dpfl.halves.SiloHalf`: one silo's half of a plan, its data (numpy, or a user's own
//! model's gradients), its generator and its ledger, stepping as `dpfl::round::silo_step` does
//! in both Rust runners: the ledger charges the round's event before the half touches data or
//! draws noise, a refusal releases nothing.
//!
//! Its state (`state()`) is the half's state, a seeded generator's position, the last round
//! answered with the bytes sent for it, and an in-memory ledger's value. An OS-seeded silo
//! stores no key (as `dpfl silo`, issue 27) and after a restore draws from a fresh OS key. A
//! restored silo continues its stream and never answers an older round; a silo started
//! without state on a durable ledger that records releases refuses when seeded (its stream
//! would start over at release 0's noise) or when its half keeps state (a one-pass position,
//! SoteriaFL's shift), and otherwise (OS-seeded, stateless half) continues after the
//! ledger's last release.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde::{Deserialize, Serialize};

use dpfl::algo::{HalfState, SiloHalf as Half};
use dpfl::data::{Dataset, Target};
use dpfl::linalg::Matrix;
use dpfl::model::{ExternalModel, ModelSpec};
use dpfl::round::{self, SiloAnswer};
use dpfl::units::SiloId;
use dpfl_privacy::DpRng;
use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::ledger::{Budget, FileStore, Ledger, LedgerStore, Limits, StoreError};
use dpfl_privacy::rng::RngState;
use dpfl_privacy::{Neighbouring, PrivacyEvent};

use crate::codec;
use crate::data_ledger::{DataLedger, Ledgers};
use crate::errors::{
    AlreadyReleased, BudgetExceeded, ConfigError, LedgerError, RunError, config, dpfl_error,
    one_line,
};
use crate::own_model::PyGradients;
use crate::plan::Plan;

/// A ledger kept in memory whose value the silo's state carries.
#[derive(Debug, Clone, Default)]
struct MemStore(Arc<Mutex<Option<Vec<u8>>>>);

impl LedgerStore for MemStore {
    fn load(&mut self) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.0.lock().map_err(|_| "poisoned")?.clone())
    }
    fn store(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        *self.0.lock().map_err(|_| "poisoned")? = Some(bytes.to_vec());
        Ok(())
    }
    fn location(&self) -> String {
        "<in-memory ledger>".into()
    }
}

/// What `state()` stores.
#[derive(Serialize, Deserialize)]
struct Saved {
    silo: u32,
    dim: u64,
    half: HalfState,
    /// A seeded generator's state; `None` for an OS-seeded one (its key is never written).
    rng: Option<RngState>,
    /// The last round answered and the bytes sent for it.
    last: Option<(u32, Option<Vec<u8>>)>,
    /// The in-memory ledger's value (`None`: the silo's ledger is the file at `ledger_path`).
    ledger: Option<Vec<u8>>,
}

/// (RDP ε, PLD ε, the tighter of the two), each `None` where it cannot be certified.
type Eps3 = (Option<f64>, Option<f64>, Option<f64>);

struct Core {
    silo: u32,
    dim: usize,
    /// δ the silo's ε is read at: its data ledger's budget's, else the plan's silo δ.
    delta: Option<f64>,
    plan_delta: Option<f64>,
    half: Box<dyn Half>,
    data: Dataset,
    rng: DpRng,
    ledger: Ledger,
    /// The silo's data set's ledger across plans (`data_ledger=`), if it keeps one.
    data_ledger: Option<DataLedger>,
    memory: Option<MemStore>,
    external: Option<Arc<ExternalModel>>,
    last: Option<(u32, Option<Vec<u8>>)>,
    failed: Option<String>,
}

/// One silo's half of a plan.
#[pyclass(module = "dpfl._core")]
pub struct SiloHalf {
    core: Mutex<Core>,
}

fn f64s(bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect()
}

/// `a` as float64 values and its shape, through numpy.
fn array(py: Python<'_>, field: &str, a: &Bound<'_, PyAny>) -> PyResult<(Vec<f64>, Vec<usize>)> {
    let np = py.import("numpy")?;
    let arr = np
        .call_method1("ascontiguousarray", (a, "<f8"))
        .map_err(|e| config(field, format!("not a float array: {e}")))?;
    let shape: Vec<usize> = arr.getattr("shape")?.extract()?;
    let bytes: Vec<u8> = arr.call_method0("tobytes")?.extract()?;
    Ok((f64s(&bytes), shape))
}

/// The silo's dataset from `(X, y)` for a plan of a built-in model.
fn dataset(py: Python<'_>, plan: &Plan, n: usize, data: &Bound<'_, PyAny>) -> PyResult<Dataset> {
    let (x, y): (Bound<'_, PyAny>, Bound<'_, PyAny>) = data
        .extract()
        .map_err(|_| config("data", "a pair (X, y) of numpy arrays"))?;
    let (x, xs) = array(py, "data X", &x)?;
    let (y, ys) = array(py, "data y", &y)?;
    let features = plan.inner.setup.features;
    if xs != [n, features] || ys != [n] {
        return Err(config(
            "data",
            format!(
                "X has shape {xs:?} and y {ys:?}; the plan's silo holds {n} records of \
                 {features} features: X ({n}, {features}), y ({n},)"
            ),
        ));
    }
    let target = match plan.inner.setup.classes {
        Some(c) => Target::Classes {
            names: (0..c).map(|k| k.to_string()).collect(),
        },
        None => Target::Real,
    };
    let m = Matrix::from_vec(n, features, x).ok_or_else(|| config("data", "X's shape"))?;
    let names = (0..features).map(|j| format!("x{j}")).collect();
    Dataset::new(m, y, target, names).map_err(dpfl_error)
}

/// The generator of `seed`: `None` OS-seeded, `"plan"` the plan's seed, or an int.
pub(crate) fn seed_of(plan: &Plan, seed: Option<&Bound<'_, PyAny>>) -> PyResult<Option<u64>> {
    match seed {
        None => Ok(None),
        Some(s) if s.is_none() => Ok(None),
        Some(s) => {
            if let Ok(text) = s.extract::<String>() {
                if text != "plan" {
                    return Err(config("seed", "None, \"plan\" or an integer"));
                }
                return plan.seed.map(Some).ok_or_else(|| {
                    config(
                        "seed",
                        "\"plan\", but the plan carries no seed (OS-seeded run)",
                    )
                });
            }
            s.extract::<u64>()
                .map(Some)
                .map_err(|_| config("seed", "None, \"plan\" or an unsigned integer"))
        }
    }
}

fn ledger_error(e: dpfl_privacy::PrivacyError) -> PyErr {
    LedgerError::new_err(one_line(&e))
}

/// The ledger's releases, in charge order.
fn events(ledger: &Ledger) -> Vec<PrivacyEvent> {
    ledger.releases().map(|(_, e)| e.clone()).collect()
}

#[pymethods]
impl SiloHalf {
    /// Silo `silo`'s half of `plan`. `data` = (X, y) for a built-in model; `gradients` for a
    /// user's own model (a plan from `Plan.build`). `seed`: `None` (OS), `"plan"` or an int.
    /// `ledger_path`: a durable ledger file (created when missing); without it the ledger is
    /// in memory and its value part of `state()`. `state`: bytes of an earlier `state()`.
    /// `data_ledger` (with `plan_id`, e.g. the plan's digest): the silo's data set's ledger,
    /// shared by every plan run on the same records (`data_ledger.rs`); `budget` = (ε, δ) the
    /// silo's own, replace-one (default: the plan's when it enforces one).
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (plan, silo, *, data=None, gradients=None, ledger_path=None, seed=None,
                        state=None, data_ledger=None, plan_id=None, budget=None))]
    fn new(
        py: Python<'_>,
        plan: &Plan,
        silo: &Bound<'_, PyAny>,
        data: Option<&Bound<'_, PyAny>>,
        gradients: Option<Py<PyAny>>,
        ledger_path: Option<PathBuf>,
        seed: Option<&Bound<'_, PyAny>>,
        state: Option<Vec<u8>>,
        data_ledger: Option<PathBuf>,
        plan_id: Option<String>,
        budget: Option<(f64, f64)>,
    ) -> PyResult<Self> {
        let silo: u32 = crate::errors::uint_arg("silo", silo)?;
        if let Some(path) = &ledger_path {
            crate::data_ledger::check_path("ledger_path", path)?;
        }
        let p = &plan.inner;
        let n_silos = p.silos();
        let id =
            SiloId::checked(silo as usize, n_silos).map_err(|e| config("silo", one_line(&e)))?;
        let info = &p.setup.silos[silo as usize];
        let dim = plan.dim_checked()?;
        let seed = seed_of(plan, seed)?;
        let (half, data, external) = match (&p.setup.model, data, gradients) {
            (ModelSpec::External { params }, None, Some(g)) => {
                let provider = Arc::new(PyGradients::new(g, *params));
                let model = Arc::new(ExternalModel::new(*params, Some(provider)));
                let half =
                    dpfl::plan::silo_half_with_model(p, id, model.clone()).map_err(dpfl_error)?;
                let data = dpfl::model::index_dataset(info.records).map_err(dpfl_error)?;
                (half, data, Some(model))
            }
            (ModelSpec::External { .. }, _, _) => {
                return Err(config(
                    "gradients",
                    "a plan of your own model takes gradients=callable and no data (the \
                     callable reads your records)",
                ));
            }
            (_, Some(d), None) => {
                let data = dataset(py, plan, info.records, d)?;
                let model = p.setup.model.build(p.setup.features, p.setup.classes);
                model
                    .map_err(dpfl_error)?
                    .check_data(&data)
                    .map_err(|e| config("data", one_line(&e)))?;
                let half = dpfl::plan::silo_half(p, id).map_err(dpfl_error)?;
                (half, data, None)
            }
            _ => {
                return Err(config(
                    "data",
                    "a plan of one of dpfl's models takes data=(X, y) and no gradients",
                ));
            }
        };
        let budget = match budget {
            Some((e, d)) => Some((e, d)),
            None if p.setup.enforce_budget => info.budget.map(|(e, d)| (e.get(), d.get())),
            None => None,
        }
        .filter(|_| p.algorithm.is_private())
        .map(|(e, d)| Budget::new(e, d, Neighbouring::ReplaceOne))
        .transpose()
        .map_err(|e| crate::errors::privacy("budget", e))?;
        // With a data ledger the budget is enforced there, over every plan; the plan's own
        // ledger keeps its release cap R and the rounds it answered.
        let data_ledger = match (data_ledger, plan_id) {
            (Some(path), Some(id)) => Some(DataLedger::open(
                &path,
                &id,
                Limits {
                    budget,
                    accountant: AccountantKind::Rdp,
                    max_releases: None,
                },
            )?),
            (None, None) => None,
            _ => {
                return Err(config(
                    "data_ledger",
                    "data_ledger and plan_id go together (plan_id names the plan in the data \
                     set's ledger: its digest)",
                ));
            }
        };
        let limits = Limits {
            budget: budget.filter(|_| data_ledger.is_none()),
            accountant: AccountantKind::Rdp,
            max_releases: Some(p.setup.rounds),
        };
        let saved: Option<Saved> = state
            .map(|s| codec::decode(codec::SILO_STATE, &s))
            .transpose()?;
        let (ledger, memory) = match (&ledger_path, saved.as_ref().map(|s| &s.ledger)) {
            (Some(path), None | Some(None)) => (
                Ledger::with_store(Box::new(FileStore::new(path)), limits).map_err(ledger_error)?,
                None,
            ),
            (None, None | Some(Some(_))) => {
                let mem = MemStore(Arc::new(Mutex::new(
                    saved.as_ref().and_then(|s| s.ledger.clone()),
                )));
                let l = Ledger::with_store(Box::new(mem.clone()), limits).map_err(ledger_error)?;
                (l, Some(mem))
            }
            (Some(_), Some(Some(_))) => {
                return Err(config(
                    "ledger_path",
                    "the state was taken of a silo whose ledger was in memory (it is in the \
                     state): restore it without ledger_path",
                ));
            }
            (None, Some(None)) => {
                return Err(config(
                    "ledger_path",
                    "the state was taken of a silo with a durable ledger: give its ledger_path",
                ));
            }
        };
        let delta = match data_ledger.as_ref().and_then(|d| d.ledger.budget()) {
            Some(b) if plan.delta_of(silo as usize).is_some() => Some(b.delta()),
            _ => plan.delta_of(silo as usize),
        };
        let mut core = Core {
            silo,
            dim,
            delta,
            plan_delta: plan.delta_of(silo as usize),
            half,
            data,
            rng: round::silo_rng(seed, silo).map_err(dpfl_error)?,
            ledger,
            data_ledger,
            memory,
            external,
            last: None,
            failed: None,
        };
        let charged: Option<u64> = core.ledger.releases().map(|(r, _)| r).max();
        match saved {
            Some(s) => {
                if s.silo != silo || s.dim != dim as u64 {
                    return Err(config(
                        "state",
                        format!(
                            "taken of silo {} (d = {}), restored as silo {silo} (d = {dim})",
                            s.silo, s.dim
                        ),
                    ));
                }
                core.half.restore(s.half).map_err(dpfl_error)?;
                core.rng = match (&s.rng, seed) {
                    (Some(r), _) => {
                        DpRng::from_snapshot(r).map_err(|e| config("state", e.to_string()))?
                    }
                    (None, None) => core.rng,
                    (None, Some(_)) => {
                        return Err(config(
                            "seed",
                            "the state was taken of an OS-seeded silo: a seed's stream would \
                             start over and repeat noise; restore it without a seed",
                        ));
                    }
                };
                let last = s.last.as_ref().map(|(r, _)| u64::from(*r));
                if charged.is_some_and(|c| Some(c) > last) {
                    return Err(ConfigError::new_err(format!(
                        "the ledger records round {} answered, after the state's last round \
                         {last:?}: the state is older than the ledger; restoring it would answer \
                         a round again",
                        charged.unwrap_or(0)
                    )));
                }
                core.last = s.last;
            }
            None => {
                if let Some(c) = charged {
                    let stateful = !core.half.state().is_empty();
                    if seed.is_some() || stateful {
                        return Err(ConfigError::new_err(format!(
                            "the ledger records {} releases (last round {c}) but no state was \
                             given: {}; restore the silo with state= (its last state())",
                            core.ledger.releases().count(),
                            if seed.is_some() {
                                "a seeded silo would draw release 0's noise again"
                            } else {
                                "this algorithm's silo keeps state across rounds"
                            }
                        )));
                    }
                    let c = u32::try_from(c).map_err(|_| config("ledger", "release id"))?;
                    core.last = Some((c, None));
                }
            }
        }
        Ok(SiloHalf {
            core: Mutex::new(core),
        })
    }

    /// This silo's message bytes answering `broadcast` (bytes of `ServerHalf.broadcast`): the
    /// ledger charges the round first (`BudgetExceeded` on refusal, nothing released); the
    /// bytes sent for the last round answered when it is asked again.
    fn step<'py>(&self, py: Python<'py>, broadcast: Vec<u8>) -> PyResult<Bound<'py, PyBytes>> {
        let mut guard = self.lock(py)?;
        let core = &mut *guard;
        if let Some(f) = &core.failed {
            return Err(RunError::new_err(format!(
                "this silo half failed ({f}); build it again from its last state()"
            )));
        }
        let b = codec::broadcast(&broadcast, core.dim)?;
        let r = b.round.get();
        if let Some((last, sent)) = &core.last {
            if r == *last
                && let Some(bytes) = sent
            {
                return Ok(PyBytes::new(py, bytes));
            }
            if r <= *last {
                return Err(AlreadyReleased::new_err(format!(
                    "round {r} refused: this silo already answered round {last}; answering an \
                     older round again would release its data a second time"
                )));
            }
        }
        let dim = core.dim;
        let Core {
            half,
            ledger,
            data_ledger,
            data,
            rng,
            ..
        } = core;
        let answer = py.detach(|| {
            let mut spent = Vec::new();
            let mut ledgers = Ledgers {
                plan: ledger,
                data: data_ledger.as_mut(),
            };
            round::silo_step(half.as_mut(), &mut ledgers, &mut spent, &b, data, rng, dim)
        });
        if let Some(e) = core.external.as_ref().and_then(|m| m.take_error()) {
            core.failed = Some(format!("round {r}: {e}"));
            return Err(RunError::new_err(format!(
                "round {r}: {e}; the message was discarded, nothing was sent"
            )));
        }
        let reply = match answer {
            Ok(SiloAnswer::Reply(reply)) => reply,
            Ok(SiloAnswer::Refused(why)) => return Err(BudgetExceeded::new_err(why.to_string())),
            Err(dpfl::Error::Ledger(e)) => return Err(LedgerError::new_err(e.to_string())),
            Err(e) => {
                core.failed = Some(format!("round {r}: {}", one_line(&e)));
                return Err(dpfl_error(e));
            }
        };
        let bytes = codec::encode(codec::REPLY, &reply)?;
        // An OS-seeded generator's key that drew this round's noise goes (as `dpfl silo`).
        core.rng
            .rekey()
            .map_err(|e| RunError::new_err(one_line(&e)))?;
        core.last = Some((r, Some(bytes.clone())));
        Ok(PyBytes::new(py, &bytes))
    }

    /// The bytes to rebuild this silo from (`SiloHalf(plan, silo, ..., state=...)`).
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let core = self.lock(py)?;
        if let Some(f) = &core.failed {
            return Err(RunError::new_err(format!(
                "this silo half failed ({f}): its state is not one to continue from"
            )));
        }
        let ledger = match &core.memory {
            Some(m) => m.0.lock().ok().and_then(|v| v.clone()),
            None => None,
        };
        let saved = Saved {
            silo: core.silo,
            dim: core.dim as u64,
            half: core.half.state(),
            rng: core.rng.seeded_snapshot(),
            last: core.last.clone(),
            ledger: ledger.or_else(|| core.memory.as_ref().map(|_| Vec::new())),
        };
        Ok(PyBytes::new(py, &codec::encode(codec::SILO_STATE, &saved)?))
    }

    /// ε this silo's ledger certifies for its releases so far, at the silo's δ (replace-one):
    /// the tighter of RDP and PLD, `dpfl train`'s certified ε; `None` when neither
    /// accountant can account the events (e.g. (ε, δ) events whose δ's exceed the silo's).
    /// With a data ledger: every plan's releases on the silo's data (at its budget's δ).
    #[getter]
    fn epsilon(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        Ok(self.epsilons(py, false)?.2)
    }

    /// The RDP accountant's ε of the ledger's releases (`dpfl train`'s `rdp_epsilon`).
    #[getter]
    fn rdp_epsilon(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.accounted(py, AccountantKind::Rdp, false)
    }

    /// The PLD accountant's ε of the ledger's releases (`dpfl train`'s `pld_epsilon`).
    #[getter]
    fn pld_epsilon(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.accounted(py, AccountantKind::Pld, false)
    }

    /// (RDP ε, PLD ε, the tighter) of this plan's releases alone (`plan=True`, at the plan's
    /// silo δ: `dpfl train`'s figures for the run) or of the ledger `epsilon` reads.
    #[pyo3(signature = (plan=false))]
    fn epsilons(&self, py: Python<'_>, plan: bool) -> PyResult<Eps3> {
        let rdp = self.accounted(py, AccountantKind::Rdp, plan)?;
        let pld = self.accounted(py, AccountantKind::Pld, plan)?;
        let best = match (rdp, pld) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok((rdp, pld, best))
    }

    /// ε of the next round's event alone at the silo's δ (the tighter of RDP and PLD; `None`
    /// for a non-private algorithm).
    #[getter]
    fn round_event_epsilon(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        let core = self.lock(py)?;
        let next = core.last.as_ref().map_or(0, |(r, _)| r + 1);
        match (
            core.half.round_event(dpfl::algo::Round::new(next)),
            core.delta,
        ) {
            (Some(e), Some(d)) => Ok(py.detach(|| {
                [AccountantKind::Rdp, AccountantKind::Pld]
                    .into_iter()
                    .filter_map(|k| Plan::epsilon_by(k, std::slice::from_ref(&e), d).ok())
                    .reduce(f64::min)
            })),
            _ => Ok(None),
        }
    }

    /// The rounds the ledger has charged, in order.
    #[getter]
    fn releases(&self, py: Python<'_>) -> PyResult<Vec<u64>> {
        Ok(self.lock(py)?.ledger.releases().map(|(r, _)| r).collect())
    }

    /// The last round answered (`None` before the first).
    #[getter]
    fn last_round(&self, py: Python<'_>) -> PyResult<Option<u32>> {
        Ok(self.lock(py)?.last.as_ref().map(|(r, _)| *r))
    }

    /// The silo's index.
    #[getter]
    fn silo(&self, py: Python<'_>) -> PyResult<u32> {
        Ok(self.lock(py)?.silo)
    }
}

impl SiloHalf {
    /// `kind`'s ε at the silo's δ of the data ledger's releases (every plan's), or of the
    /// plan's ledger's (`plan`, or no data ledger, at the plan's δ); `None` where it cannot
    /// account them; 0 without a δ (a non-private silo).
    fn accounted(&self, py: Python<'_>, kind: AccountantKind, plan: bool) -> PyResult<Option<f64>> {
        let core = self.lock(py)?;
        let (ev, delta) = match (&core.data_ledger, plan) {
            (Some(d), false) => (events(&d.ledger), core.delta),
            _ => (events(&core.ledger), core.plan_delta),
        };
        let Some(d) = delta else {
            return Ok(Some(0.0));
        };
        drop(core);
        Ok(py.detach(|| Plan::epsilon_by(kind, &ev, d).ok()))
    }

    /// The silo's state, waiting for it with the GIL released: a step holds the lock while
    /// its gradients callable needs the GIL, so waiting with the GIL held could deadlock.
    fn lock(&self, py: Python<'_>) -> PyResult<std::sync::MutexGuard<'_, Core>> {
        loop {
            match self.core.try_lock() {
                Ok(g) => return Ok(g),
                Err(std::sync::TryLockError::WouldBlock) => {
                    py.detach(|| std::thread::sleep(std::time::Duration::from_micros(200)))
                }
                Err(std::sync::TryLockError::Poisoned(_)) => {
                    return Err(RunError::new_err(
                        "the silo half's lock was poisoned by a panic",
                    ));
                }
            }
        }
    }
}
