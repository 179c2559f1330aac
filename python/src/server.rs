//! `dpfl.halves.ServerHalf`: the server's half of a plan, driven round by round as the
//! simulator (`dpfl::sim::Simulator::step`) drives it: broadcast(r), the participation draw
//! S_r from `round::participation_rng`, then the replies of S_r in silo order, the shuffle
//! stage from `round::shuffle_rng` when the plan requires a shuffler, and the aggregation.
//! So a seeded run over these halves equals `dpfl train`'s bit for bit.
//!
//! The shuffle stage here is the simulator's: the process running it sees the messages before
//! they are permuted, so the shuffle model's guarantee against the server holds only when the
//! shuffle runs in a party the server does not control (what `dpfl shuffler` is for).

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde::{Deserialize, Serialize};

use dpfl::algo::wing::Requirements;
use dpfl::algo::{HalfState, Round, ServerHalf as Half};
use dpfl::round::{self, Collected, Participation, SiloAnswer};
use dpfl_privacy::DpRng;
use dpfl_privacy::rng::RngState;

use crate::codec;
use crate::errors::{RunError, config, dpfl_error, uint_arg};
use crate::plan::Plan;
use crate::silo::seed_of;

/// What `state()` stores (the server trusts itself with its streams' keys).
#[derive(Serialize, Deserialize)]
struct Saved {
    dim: u64,
    next: u32,
    half: HalfState,
    network: RngState,
    shuffler: Option<RngState>,
    drawn: Option<(u32, Vec<u64>)>,
    sent: Option<(u32, Vec<u8>)>,
}

struct Core {
    dim: usize,
    silos: usize,
    participation: Participation,
    needs: Requirements,
    half: Box<dyn Half>,
    network: DpRng,
    shuffler: Option<DpRng>,
    /// The next round to aggregate.
    next: u32,
    /// The participants drawn for round `next`.
    drawn: Option<(u32, Vec<usize>)>,
    /// The broadcast of round `next`, made once.
    sent: Option<(u32, Vec<u8>)>,
}

/// The server's half of a plan.
#[pyclass(module = "dpfl._core")]
pub struct ServerHalf {
    core: Mutex<Core>,
}

impl Core {
    fn check_round(&self, round: u32, what: &str) -> PyResult<()> {
        if round != self.next {
            return Err(config(
                "round",
                format!(
                    "{what} of round {round}, but the server is at round {} (rounds run in \
                     order, once each)",
                    self.next
                ),
            ));
        }
        Ok(())
    }

    fn participants(&mut self, round: u32) -> PyResult<Vec<usize>> {
        self.check_round(round, "participants")?;
        if let Some((r, s)) = &self.drawn
            && *r == round
        {
            return Ok(s.clone());
        }
        let mut selected = Vec::new();
        self.participation
            .draw(self.silos, &mut self.network, &mut selected)
            .map_err(dpfl_error)?;
        self.drawn = Some((round, selected.clone()));
        Ok(selected)
    }
}

#[pymethods]
impl ServerHalf {
    /// The server half of `plan`; `seed`: `None` (OS), `"plan"` or an int, for the
    /// participation draws and the simulated shuffler; `state`: bytes of an earlier `state()`.
    #[new]
    #[pyo3(signature = (plan, *, seed=None, state=None))]
    fn new(plan: &Plan, seed: Option<&Bound<'_, PyAny>>, state: Option<Vec<u8>>) -> PyResult<Self> {
        let p = &plan.inner;
        let seed = seed_of(plan, seed)?;
        let half = dpfl::plan::server_half(p).map_err(dpfl_error)?;
        let needs = p.requirements();
        // As `dpfl train` refuses it: the shuffle model's theorems assume M_r = M (Lowy &
        // Razaviyayn §5).
        if needs.fixed_participation
            && !matches!(
                p.setup.participation,
                Participation::All | Participation::Fixed { .. }
            )
        {
            return Err(config(
                "participation",
                "shuffle-model algorithms need a fixed number of silos per round (all or fixed)",
            ));
        }
        let shuffle = needs.shuffler;
        let mut core = Core {
            dim: half.dim(),
            silos: p.silos(),
            participation: p.setup.participation.clone(),
            needs,
            half,
            network: round::participation_rng(seed).map_err(dpfl_error)?,
            shuffler: if shuffle {
                Some(round::shuffle_rng(seed).map_err(dpfl_error)?)
            } else {
                None
            },
            next: 0,
            drawn: None,
            sent: None,
        };
        if let Some(bytes) = state {
            let s: Saved = codec::decode(codec::SERVER_STATE, &bytes)?;
            if s.dim != core.dim as u64 || s.shuffler.is_some() != core.shuffler.is_some() {
                return Err(config("state", "taken of another plan's server half"));
            }
            let rng =
                |r: &RngState| DpRng::from_snapshot(r).map_err(|e| config("state", e.to_string()));
            core.half.restore(s.half).map_err(dpfl_error)?;
            core.network = rng(&s.network)?;
            core.shuffler = s.shuffler.as_ref().map(rng).transpose()?;
            core.next = s.next;
            core.drawn = s
                .drawn
                .map(|(r, v)| (r, v.into_iter().map(|i| i as usize).collect()));
            core.sent = s.sent;
        }
        Ok(ServerHalf {
            core: Mutex::new(core),
        })
    }

    /// The silos taking part in round `round`, in silo order (the plan's participation draw).
    fn participants(&self, round: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
        self.lock()?.participants(uint_arg("round", round)?)
    }

    /// The broadcast of round `round` (the same bytes if asked again).
    fn broadcast<'py>(
        &self,
        py: Python<'py>,
        round: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let round: u32 = uint_arg("round", round)?;
        let mut core = self.lock()?;
        core.check_round(round, "the broadcast")?;
        if let Some((r, b)) = &core.sent
            && *r == round
        {
            return Ok(PyBytes::new(py, b));
        }
        let b = core.half.broadcast(Round::new(round));
        let bytes = codec::encode(codec::BROADCAST, &b)?;
        core.sent = Some((round, bytes.clone()));
        Ok(PyBytes::new(py, &bytes))
    }

    /// Aggregates round `round`'s messages (bytes of `SiloHalf.step`, one per answering silo,
    /// in silo order): the shuffle stage first when the plan requires a shuffler; a round
    /// short of a participant is refused when the plan requires every silo.
    fn aggregate(
        &self,
        py: Python<'_>,
        round: &Bound<'_, PyAny>,
        messages: Vec<Vec<u8>>,
    ) -> PyResult<()> {
        let round: u32 = uint_arg("round", round)?;
        let mut guard = self.lock()?;
        let core = &mut *guard;
        // The draw belongs to the round whether or not it was asked for (the stream stays
        // the simulator's).
        let participants = core.participants(round)?;
        if core.needs.every_silo && messages.len() != participants.len() {
            return Err(RunError::new_err(format!(
                "round {round}: {} messages for {} participants, and this algorithm needs \
                 every participant's message in every round",
                messages.len(),
                participants.len()
            )));
        }
        let r = Round::new(round);
        let mut collected = Collected::default();
        for (i, m) in messages.iter().enumerate() {
            let reply = codec::reply(m, r, core.dim)?;
            collected.push(i as u32, SiloAnswer::Reply(reply));
        }
        let Core { half, shuffler, .. } = core;
        py.detach(|| collected.aggregate(half.as_mut(), r, shuffler.as_mut()))
            .map_err(dpfl_error)?;
        core.next = round
            .checked_add(1)
            .ok_or_else(|| config("round", "more than 2^32 rounds"))?;
        core.drawn = None;
        core.sent = None;
        Ok(())
    }

    /// The model the algorithm outputs now, as a numpy float64 array.
    fn output<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let w = self.lock()?.half.output();
        let bytes: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
        py.import("numpy")?
            .call_method1("frombuffer", (PyBytes::new(py, &bytes), "<f8"))?
            .call_method1("astype", ("float64",))
    }

    /// The bytes to rebuild this server half from (`ServerHalf(plan, state=...)`): its
    /// half's state and its streams' positions.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let core = self.lock()?;
        let saved = Saved {
            dim: core.dim as u64,
            next: core.next,
            half: core.half.state(),
            network: core.network.snapshot(),
            shuffler: core.shuffler.as_ref().map(DpRng::snapshot),
            drawn: core
                .drawn
                .as_ref()
                .map(|(r, v)| (*r, v.iter().map(|&i| i as u64).collect())),
            sent: core.sent.clone(),
        };
        Ok(PyBytes::new(
            py,
            &codec::encode(codec::SERVER_STATE, &saved)?,
        ))
    }

    /// The model dimension d.
    #[getter]
    fn dim(&self) -> PyResult<usize> {
        Ok(self.lock()?.dim)
    }

    /// The next round to aggregate.
    #[getter]
    fn round(&self) -> PyResult<u32> {
        Ok(self.lock()?.next)
    }
}

impl ServerHalf {
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Core>> {
        self.core
            .lock()
            .map_err(|_| RunError::new_err("the server half's lock was poisoned by a panic"))
    }
}
