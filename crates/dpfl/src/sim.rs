//! The in-process simulator: N silos and one server in one process, a transport under the
//! round core ([`crate::round`]).
//!
//! Each round r: the server half makes a broadcast; the "network" picks the participating
//! set S_r (a uniformly random subset of M_r silos, [`Participation`]); the silos in S_r
//! run the round core's silo step in parallel (rayon), each with its own [`DpRng`] stream;
//! their replies, in silo order, optionally pass a shuffle stage, and go to the server half.
//! Because every silo draws only from its own stream and the messages are combined in a fixed
//! order, a seeded run is bit-for-bit the same whatever the number of threads.
//!
//! The simulator borrows the silos' data; it can evaluate a model on the pooled data for
//! reporting (an observer's privilege that a real deployment does not have).

use rayon::prelude::*;

use dpfl_privacy::ledger::Ledger;
use dpfl_privacy::{DpRng, PrivacyEvent};

use crate::algo::{BuiltAlgorithm, Round, ServerHalf, SiloHalf};
use crate::data::SiloData;
use crate::model::{Model, mean_loss, metric_value};
use crate::round::{Collected, NoLedger, Refusal, SiloAnswer};
pub use crate::round::{Participation, participation_rng, silo_rng};

/// One silo inside the simulator: its data, its half and its own generator.
struct Silo<'a> {
    data: &'a SiloData,
    half: Box<dyn SiloHalf>,
    rng: DpRng,
    spent: Vec<PrivacyEvent>,
    /// Charged with each round's event before the silo answers; refuses past the silo's
    /// budget (ISRL-DP: the silo, not the server, enforces (ε_i, δ_i)).
    ledger: Box<dyn crate::round::Ledger>,
}

/// What happened in one round, for observers.
#[derive(Debug, Clone)]
pub struct RoundReport {
    /// The round r, from 0.
    pub round: Round,
    /// M_r, the silos whose messages were aggregated (refusals left out).
    pub participants: usize,
    /// Total encoded size of the round's messages, bits.
    pub message_bits: u64,
    /// Silos that refused the round (their ledger's budget), in silo order.
    pub refused: Vec<u32>,
}

/// A simulator's state between two rounds ([`Simulator::snapshot`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SimSnapshot {
    /// Rounds run so far (the next round's number).
    pub round: u32,
    /// The participation draws' generator.
    pub network_rng: dpfl_privacy::rng::RngState,
    /// The shuffle stage's generator, if there is one.
    pub shuffler: Option<dpfl_privacy::rng::RngState>,
    /// Each silo's generator (silo order).
    pub silo_rngs: Vec<dpfl_privacy::rng::RngState>,
    /// Each silo half's persistent state.
    pub silo_states: Vec<crate::algo::HalfState>,
    /// The server half's persistent state.
    pub server: crate::algo::HalfState,
    /// The privacy events each silo has spent.
    pub spent: Vec<Vec<PrivacyEvent>>,
}

/// What the silos released in the last round, kept when [`Simulator::keep_released`] is on
/// (the audit reads the released messages as the server would).
#[derive(Debug, Clone)]
pub struct Released {
    /// The round's broadcast.
    pub broadcast: crate::algo::Broadcast,
    /// Each answering silo's messages (silo order; refusals absent), before any shuffle.
    pub replies: Vec<(u32, Vec<crate::algo::SiloMessage>)>,
}

/// Runs one algorithm over silos.
pub struct Simulator<'a> {
    silos: Vec<Silo<'a>>,
    server: Box<dyn ServerHalf>,
    participation: Participation,
    network_rng: DpRng,
    round: Round,
    selected: Vec<usize>,
    dim: usize,
    /// The optional shuffle stage's generator.
    shuffler: Option<DpRng>,
    /// The last round's refusals, with why.
    refusals: Vec<(u32, Refusal)>,
    /// The last round's released messages, when kept.
    released: Option<Released>,
    keep_released: bool,
}

impl<'a> Simulator<'a> {
    /// `seed`: `Some` for a reproducible run (silo i uses ChaCha20 stream (Silo, i)),
    /// `None` to seed every generator from the operating system.
    pub fn new(
        data: &'a [SiloData],
        algorithm: BuiltAlgorithm,
        participation: Participation,
        seed: Option<u64>,
    ) -> crate::Result<Self> {
        if data.len() != algorithm.silos.len() {
            return Err(crate::Error::config(
                "silos",
                format!(
                    "{} data sets for {} silo halves",
                    data.len(),
                    algorithm.silos.len()
                ),
            ));
        }
        participation.validate(data.len())?;
        let silos = data
            .iter()
            .zip(algorithm.silos)
            .enumerate()
            .map(|(i, (data, half))| {
                Ok(Silo {
                    data,
                    half,
                    rng: silo_rng(seed, i as u32)?,
                    spent: Vec::new(),
                    ledger: Box::new(NoLedger),
                })
            })
            .collect::<crate::Result<Vec<_>>>()?;
        let dim = algorithm.server.dim();
        Ok(Simulator {
            silos,
            dim,
            shuffler: None,
            refusals: Vec::new(),
            released: None,
            keep_released: false,
            server: algorithm.server,
            participation,
            network_rng: participation_rng(seed)?,
            round: Round::FIRST,
            selected: Vec::new(),
        })
    }

    /// Adds the shuffle stage: from now on each round's messages (all replies' messages
    /// together) are permuted uniformly at random, from stream (Shuffle, 0) of `seed`, before
    /// the server half sees them.
    pub fn with_shuffle(mut self, seed: Option<u64>) -> crate::Result<Self> {
        self.shuffler = Some(crate::round::shuffle_rng(seed)?);
        Ok(self)
    }

    /// Runs one round: draw → broadcast → silo steps → (shuffle) → aggregate. A silo whose
    /// ledger refuses is left out of the round (the round core's one refusal rule) and is
    /// listed in the report and in [`Self::take_refusals`].
    pub fn step(&mut self) -> crate::Result<RoundReport> {
        let r = self.round;
        let b = self.server.broadcast(r);
        self.participation
            .draw(self.silos.len(), &mut self.network_rng, &mut self.selected)?;
        let mut mask = vec![false; self.silos.len()];
        self.selected.iter().for_each(|&i| mask[i] = true);
        let dim = self.dim;
        let answers: Vec<(u32, crate::Result<SiloAnswer>)> = self
            .silos
            .par_iter_mut()
            .enumerate()
            .zip(mask.par_iter())
            .filter(|(_, m)| **m)
            .map(|((i, s), _)| {
                let answer = crate::round::silo_step(
                    s.half.as_mut(),
                    s.ledger.as_mut(),
                    &mut s.spent,
                    &b,
                    &s.data.train,
                    &mut s.rng,
                    dim,
                );
                (i as u32, answer)
            })
            .collect();
        let mut collected = Collected::default();
        let mut replies = Vec::new();
        for (i, a) in answers {
            let a = a?;
            if let (true, SiloAnswer::Reply(reply)) = (self.keep_released, &a) {
                replies.push((i, reply.messages.clone()));
            }
            collected.push(i, a);
        }
        if self.keep_released {
            self.released = Some(Released {
                broadcast: b.clone(),
                replies,
            });
        }
        collected.aggregate(self.server.as_mut(), r, self.shuffler.as_mut())?;
        self.round = r
            .next()
            .ok_or_else(|| crate::Error::config("rounds", "more than 2^32 rounds"))?;
        let refused = collected.refused.iter().map(|(i, _)| *i).collect();
        self.refusals = collected.refused;
        Ok(RoundReport {
            round: r,
            participants: collected.replies,
            message_bits: collected.bits,
            refused,
        })
    }

    /// From now on, keep each round's released messages ([`Self::released`]): a copy of every
    /// message, for an observer that reads what the server reads (the audit).
    pub fn keep_released(&mut self) {
        self.keep_released = true;
    }

    /// The last round's released messages, if [`Self::keep_released`] was on for it.
    pub fn released(&self) -> Option<&Released> {
        self.released.as_ref()
    }

    /// The last round's refusals (silo, why), taken out.
    pub fn take_refusals(&mut self) -> Vec<(u32, Refusal)> {
        std::mem::take(&mut self.refusals)
    }

    /// The server's current output model.
    pub fn output(&self) -> Vec<f64> {
        self.server.output()
    }

    /// Rounds run so far.
    pub fn rounds_done(&self) -> usize {
        self.round.index()
    }

    /// Mean training loss over all silos' training rows (pooled).
    pub fn train_loss(&self, model: &dyn Model, w: &[f64]) -> f64 {
        train_loss(model, w, self.silo_data())
    }

    /// The model's metric over all silos' test rows (pooled).
    pub fn test_metric(&self, model: &dyn Model, w: &[f64]) -> f64 {
        test_metric(model, w, self.silo_data())
    }

    /// Gives silo i the ledger `ledgers[i]` (`None`: no enforcement). From then on a silo
    /// whose next round would cross its budget refuses the round before its half computes or
    /// sends anything.
    pub fn attach_ledgers(&mut self, ledgers: Vec<Option<Ledger>>) -> crate::Result<()> {
        if ledgers.len() != self.silos.len() {
            return Err(crate::Error::config(
                "ledgers",
                format!("{} ledgers for {} silos", ledgers.len(), self.silos.len()),
            ));
        }
        for (s, l) in self.silos.iter_mut().zip(ledgers) {
            s.ledger = match l {
                Some(l) => Box::new(l),
                None => Box::new(NoLedger),
            };
        }
        Ok(())
    }

    /// The privacy events each silo has spent so far (silo order).
    pub fn spent(&self) -> Vec<Vec<PrivacyEvent>> {
        self.silos.iter().map(|s| s.spent.clone()).collect()
    }

    /// Every silo half's persistent state (silo order), e.g. to check that a wing's silo and
    /// server state agree (SoteriaFL's shifts) or to read counters a half keeps.
    pub fn silo_states(&self) -> Vec<crate::algo::HalfState> {
        self.silos.iter().map(|s| s.half.state()).collect()
    }

    /// The silos' counters summed (`None` if some half does not count).
    pub fn counters(&self) -> Option<crate::algo::SiloCounters> {
        self.silos
            .iter()
            .try_fold(crate::algo::SiloCounters::default(), |acc, s| {
                s.half.counters().map(|c| acc + c)
            })
    }

    /// The server half's persistent state.
    pub fn server_state(&self) -> crate::algo::HalfState {
        self.server.state()
    }

    /// Everything a later [`Self::restore`] needs to continue this run exactly where it
    /// stands between two rounds: the round counter, every generator's position, every
    /// half's persistent state and the privacy events spent. Attached ledgers are not part of
    /// it (their owner persists them). The silo generators' keys are in it: keep it where the
    /// data is kept.
    pub fn snapshot(&self) -> SimSnapshot {
        SimSnapshot {
            round: self.round.get(),
            network_rng: self.network_rng.snapshot(),
            shuffler: self.shuffler.as_ref().map(DpRng::snapshot),
            silo_rngs: self.silos.iter().map(|s| s.rng.snapshot()).collect(),
            silo_states: self.silo_states(),
            server: self.server.state(),
            spent: self.spent(),
        }
    }

    /// Continues from `snap`, taken of a simulator built the same way (same silos, algorithm,
    /// participation and shuffle stage): the following rounds are bit for bit those the
    /// snapshotted simulator would have run. A snapshot of another shape is an error.
    pub fn restore(&mut self, snap: SimSnapshot) -> crate::Result<()> {
        let n = self.silos.len();
        if snap.silo_rngs.len() != n
            || snap.silo_states.len() != n
            || snap.spent.len() != n
            || snap.shuffler.is_some() != self.shuffler.is_some()
        {
            return Err(crate::Error::config(
                "snapshot",
                format!(
                    "taken of another federation ({} silos, shuffle stage {}), this one has {n} \
                     silos, shuffle stage {}",
                    snap.silo_rngs.len(),
                    snap.shuffler.is_some(),
                    self.shuffler.is_some()
                ),
            ));
        }
        let rng = |s: &dpfl_privacy::rng::RngState| {
            DpRng::from_snapshot(s).map_err(|e| crate::Error::config("snapshot", e.to_string()))
        };
        self.server.restore(snap.server)?;
        for (((s, r), h), spent) in self
            .silos
            .iter_mut()
            .zip(&snap.silo_rngs)
            .zip(snap.silo_states)
            .zip(snap.spent)
        {
            s.rng = rng(r)?;
            s.half.restore(h)?;
            s.spent = spent;
        }
        self.network_rng = rng(&snap.network_rng)?;
        if let Some(s) = &snap.shuffler {
            self.shuffler = Some(rng(s)?);
        }
        self.round = Round::new(snap.round);
        Ok(())
    }

    /// Access to a silo's data for evaluation by experiment code.
    pub fn silo_data(&self) -> impl Iterator<Item = &SiloData> {
        self.silos.iter().map(|s| s.data)
    }
}

/// ‖∇f(w)‖² with f the mean loss over every silo's training rows.
pub fn full_grad_norm_sq<'d>(
    model: &dyn Model,
    w: &[f64],
    silos: impl IntoIterator<Item = &'d SiloData>,
) -> f64 {
    let silos: Vec<&SiloData> = silos.into_iter().collect();
    let n: usize = silos.iter().map(|s| s.train.len()).sum();
    if n == 0 {
        return f64::NAN;
    }
    let mut g = vec![0.0; w.len()];
    for s in silos {
        let idx: Vec<usize> = (0..s.train.len()).collect();
        model.add_batch_grad(w, &s.train, &idx, 1.0 / n as f64, &mut g);
    }
    crate::linalg::dot(&g, &g)
}

/// Mean training loss of `w` over the silos' training rows (pooled). The simulator and the
/// network runner (`dpfl federate`, which holds every shard) both evaluate through this and
/// [`test_metric`], so their curves agree bit for bit.
pub fn train_loss<'d>(
    model: &dyn Model,
    w: &[f64],
    silos: impl IntoIterator<Item = &'d SiloData>,
) -> f64 {
    pooled(
        silos,
        |d| mean_loss(model, w, &d.train) * d.train.len() as f64,
        |d| d.train.len(),
    )
}

/// The model's metric of `w` over the silos' test rows (pooled).
pub fn test_metric<'d>(
    model: &dyn Model,
    w: &[f64],
    silos: impl IntoIterator<Item = &'d SiloData>,
) -> f64 {
    let f = |d: &SiloData| {
        let v = metric_value(model, w, &d.test);
        match model.metric() {
            crate::model::Metric::Rmse => v * v * d.test.len() as f64,
            crate::model::Metric::ErrorRate => v * d.test.len() as f64,
        }
    };
    let m = pooled(silos, f, |d| d.test.len());
    match model.metric() {
        crate::model::Metric::Rmse => m.sqrt(),
        crate::model::Metric::ErrorRate => m,
    }
}

fn pooled<'d>(
    silos: impl IntoIterator<Item = &'d SiloData>,
    num: impl Fn(&SiloData) -> f64,
    den: impl Fn(&SiloData) -> usize,
) -> f64 {
    let (mut a, mut b) = (0.0, 0usize);
    for d in silos {
        let n = den(d);
        if n > 0 {
            a += num(d);
            b += n;
        }
    }
    if b == 0 { f64::NAN } else { a / b as f64 }
}
