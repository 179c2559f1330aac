//! A silo process: keeps its data, its generator, its half and its ledger, connects out to
//! the server, and answers the rounds it is selected for.
//!
//! # One reply per round
//! Before computing round r's reply the silo charges r's privacy event to its ledger
//! (refusing the round if the budget does not allow it). It stores the reply's bytes (one
//! body, or in shuffle mode one sealed body per message) together with its half's and its
//! generator's new state in one atomic write, and only then sends. If asked for round r again
//! (a restarted server, a lost reply), it resends exactly the stored bytes: a silo never sends
//! two differently-noised replies for one round, and the ledger is never charged twice. A
//! restarted silo continues its generator from the stored state.
//!
//! # Withheld rounds and dropouts (decision)
//! The charge precedes the message, so a silo that sent its randomized message has paid for
//! the round whatever becomes of it: if the shuffler withholds the batch (too few silos), or
//! the server never aggregates it, the charge stands and is never refunded. The message has
//! left the silo and the silo cannot know that no one kept it (a dishonest shuffler may have),
//! so a refund could under-report. A silo that never received the round, or was gone before
//! answering it, is not charged (nothing left it); one that crashed between the charge and
//! the send stays charged, the safe side. When the withheld round is run again, the silo
//! resends the stored bytes of that charge: one charge per round number, never two.

use std::path::PathBuf;
use std::time::Duration;

use dpfl::algo::{Round, SiloHalf};
use dpfl::data::SiloData;
use dpfl::round::{self, SiloAnswer};
use dpfl_privacy::DpRng;
use dpfl_privacy::ledger::{Budget, Ledger};

use crate::codec;
use crate::config::Federation;
use crate::error::{NetError, Result};

mod session;
mod state;

use state::Persisted;

/// What a silo did, for tests and logs.
#[derive(Debug, Default, Clone)]
pub struct SiloReport {
    /// Rounds answered.
    pub answered: Vec<u32>,
    /// Rounds whose stored answer was sent again (after a restart).
    pub resent: Vec<u32>,
    /// Rounds refused (budget).
    pub refused: Vec<u32>,
}

/// One silo process: its data, its half, its generator and its one ledger.
pub struct Silo {
    fed: Federation,
    id: u32,
    data: SiloData,
    half: Box<dyn SiloHalf>,
    rng: DpRng,
    /// The one ledger, in a durable cell: the release cap R and, when the silo enforces a
    /// budget (its own `--budget`, or the experiment's `[privacy] enforce_budget` in
    /// in-process runs, as the simulator's silos do), its (ε_i, δ_i) by the RDP accountant.
    ledger: Ledger,
    /// Message bytes, half state and generator state of the last round answered.
    state: crate::store::Cell,
    state_path: PathBuf,
    /// The last round answered and the bodies sent for it.
    last: Option<(u32, Vec<Vec<u8>>)>,
    dim: usize,
    /// Held while this silo lives: no second process on its state directory.
    _lock: crate::lock::DirLock,
    /// How long `run` tries to reach the server (or the shuffler) before giving up.
    connect_timeout: Duration,
}

impl Silo {
    /// Builds silo `id`'s half exactly as the simulator does and restores its stored state.
    /// The budget and its enforcement are the experiment's (`[privacy] enforce_budget`): for
    /// in-process tests. A silo process takes them from its own configuration
    /// ([`Silo::with_budget`]).
    pub fn new(fed: Federation, id: u32, data: SiloData) -> Result<Self> {
        Self::open(fed, id, data, None)
    }

    /// [`Silo::new`] with the silo's own budget: with `local.enforce` every round is charged
    /// to a ledger with (ε_i, δ_i, neighbouring) from `local`, whatever the federation file
    /// says. Call [`crate::config::check_plan`] before reading the data.
    pub fn with_budget(
        fed: Federation,
        id: u32,
        data: SiloData,
        local: &crate::config::LocalBudget,
    ) -> Result<Self> {
        Self::open(fed, id, data, Some(local))
    }

    fn open(
        fed: Federation,
        id: u32,
        data: SiloData,
        local: Option<&crate::config::LocalBudget>,
    ) -> Result<Self> {
        crate::config::check_data(&fed, id, &data)?;
        let ctx = fed.context()?;
        let dim = ctx.federation.dim;
        if id as usize >= fed.silos() {
            return Err(NetError::config("--id", format!("no half for silo {id}")));
        }
        // This silo's half only, from the plan: no calibration, no other silo's half.
        let half = fed.plan.wing.silo_half(&ctx, id as usize)?;
        let private = fed.algorithm.is_private();
        let budget = match local {
            Some(l) => l.budget()?,
            None => match ctx.silos.get(id as usize).and_then(|s| s.budget) {
                Some((eps, delta)) if fed.plan.setup.enforce_budget => Some(
                    Budget::new(
                        eps.get(),
                        delta.get(),
                        dpfl_privacy::Neighbouring::ReplaceOne,
                    )
                    .map_err(|e| NetError::config("privacy", e.to_string()))?,
                ),
                _ => None,
            },
        }
        .filter(|_| private);
        Self::with_half_and_budget(fed, id, data, half, dim, budget)
    }

    /// A silo with a given half of dimension `dim` and no budget beyond the release cap
    /// (benchmarks use bare halves).
    pub fn with_half(
        fed: Federation,
        id: u32,
        data: SiloData,
        half: Box<dyn SiloHalf>,
        dim: usize,
    ) -> Result<Self> {
        Self::with_half_and_budget(fed, id, data, half, dim, None)
    }

    /// [`Silo::with_half`] whose ledger also enforces `budget` (by the RDP accountant). A
    /// stored ledger with other limits (a budget added, dropped or changed after rounds were
    /// answered) is an error, never a reset.
    pub fn with_half_and_budget(
        fed: Federation,
        id: u32,
        data: SiloData,
        mut half: Box<dyn SiloHalf>,
        dim: usize,
        budget: Option<Budget>,
    ) -> Result<Self> {
        let dir = fed.silo_state_dir(id);
        // The state directory's lock is taken before the ledger is read.
        let lock = crate::lock::lock_dir(&dir, &format!("silo {id}"))?;
        let ledger =
            crate::ledger::open(&dir.join(crate::ledger::ROUND_LEDGER), fed.rounds(), budget)?;
        let state_path = dir.join("state");
        let (state, stored) = crate::store::Cell::open(&state_path)?;
        let (rng, last) = match stored {
            Some(bytes) => {
                let (p, body) = state::read(&bytes).map_err(|e| NetError::file(&state_path, e))?;
                half.restore(p.half)?;
                tracing::info!(silo = id, round = p.round, "restored silo state");
                (DpRng::from_snapshot(&p.rng)?, Some((p.round, body)))
            }
            None => (round::silo_rng(fed.config.seed, id)?, None),
        };
        check_state_agrees(&ledger, &state_path, last.as_ref().map(|(r, _)| *r), |r| {
            half.round_event(Round::new(r)).is_some()
        })?;
        Ok(Silo {
            fed,
            id,
            data,
            half,
            rng,
            ledger,
            state,
            state_path,
            last,
            dim,
            _lock: lock,
            connect_timeout: crate::retry::DEFAULT_CONNECT_TIMEOUT,
        })
    }

    /// The bodies answering round `round` given its broadcast `body`, and whether they are a
    /// resend: the stored bytes if `round` is the last round answered, otherwise a new
    /// reply (ledger charged, state stored durably before it is returned). Without `seal_to`
    /// the reply is one body ([`codec::encode_answer`]); with it (shuffle mode) each message
    /// is sealed on its own, one body per message, since the shuffler permutes messages. `None` if the
    /// round is refused: the ledger does not allow it, or it is older than the last round
    /// answered.
    ///
    /// Rounds only move forward. An honest server never asks for a round before the last one
    /// a silo answered (it checkpoints round r before opening r + 1), and the ledgers charge
    /// once per round *number*: answering an old round again would release a second,
    /// differently-noised message that no ledger counts. So a server that asks is refused.
    pub fn answer(
        &mut self,
        body: &[u8],
        round: u32,
        seal_to: Option<&[u8]>,
    ) -> Result<Option<(Vec<Vec<u8>>, bool)>> {
        if let Some((r, bytes)) = &self.last {
            if *r == round {
                return Ok(Some((bytes.clone(), true)));
            }
            if round < *r {
                tracing::warn!(
                    silo = self.id,
                    round,
                    last = *r,
                    "refusing a round older than the last one answered"
                );
                return Ok(None);
            }
        }
        let b = codec::decode_broadcast(body, self.dim)?;
        if b.round.get() != round {
            return Err(NetError::Rejected(format!(
                "broadcast body for round {} sent as round {round}",
                b.round
            )));
        }
        // The round core's silo step: one charge (release cap and budget), then the half; a
        // refusal leaves this silo out of the round.
        let mut spent = Vec::new();
        let answer = round::silo_step(
            self.half.as_mut(),
            &mut self.ledger,
            &mut spent,
            &b,
            &self.data.train,
            &mut self.rng,
            self.dim,
        );
        let reply = match answer {
            Ok(SiloAnswer::Reply(r)) => r,
            Ok(SiloAnswer::Refused(r)) => {
                crate::metrics::silo_refused(self.id as usize);
                tracing::warn!(silo = self.id, round, "ledger refuses the round: {r}");
                return Ok(None);
            }
            // A failed (not refusing) ledger: its storage, or a conflicting re-charge.
            Err(dpfl::Error::Ledger(e)) => return Err(NetError::Budget(e.to_string())),
            Err(e) => return Err(e.into()),
        };
        let shares = self.fed.compact_shares();
        let bodies = match seal_to {
            None => vec![codec::encode_answer(&reply)],
            // A compact PVEC share for the shuffler goes unsealed (it sums the shares and
            // forwards only the sum, `share`); every other message is sealed to the server.
            Some(pk) => reply
                .messages
                .iter()
                .map(|m| {
                    if shares && crate::share::is_shuffler_share(m) {
                        Ok(crate::share::encode(1, m))
                    } else {
                        crate::share::seal(pk, round, &codec::encode_message(m))
                    }
                })
                .collect::<Result<Vec<_>>>()?,
        };
        let p = Persisted {
            round,
            half: self.half.state(),
            rng: self.rng.snapshot(),
        };
        state::write(&mut self.state, &self.state_path, &p, &bodies)?;
        self.last = Some((round, bodies.clone()));
        crate::metrics::silo_answered(
            self.id as usize,
            bodies.iter().map(Vec::len).sum(),
            // Without a budget the ledger accounts nothing: no ε to show.
            self.ledger
                .budget()
                .and_then(|_| self.ledger.spent_epsilon().ok()),
        );
        Ok(Some((bodies, false)))
    }

    /// How long [`Silo::run`] tries to reach the server before failing (default
    /// [`crate::retry::DEFAULT_CONNECT_TIMEOUT`]); also the time a lost server has to return.
    pub fn set_connect_timeout(&mut self, timeout: Duration) {
        self.connect_timeout = timeout;
    }

    /// The ledger's charged rounds.
    pub fn charged_rounds(&self) -> Vec<u64> {
        self.ledger.releases().map(|(r, _)| r).collect()
    }
}

/// The round ledger and the stored state are written one after the other (charge, then
/// state); they can only disagree by the one round in between. A ledger with charges and no
/// state, or a state whose (private) round the ledger lacks, means one of them was deleted or
/// replaced: going on would answer charged rounds with fresh noise, so the silo stops.
fn check_state_agrees(
    ledger: &Ledger,
    state_path: &std::path::Path,
    last: Option<u32>,
    private_round: impl Fn(u32) -> bool,
) -> Result<()> {
    let mut charged: Vec<u64> = ledger.releases().map(|(r, _)| r).collect();
    charged.sort_unstable();
    match last {
        None if !charged.is_empty() => Err(NetError::Refused(format!(
            "{}: missing, but the round ledger records {} charged rounds (last {}): the silo \
             would answer them again with fresh noise; restore its state directory",
            state_path.display(),
            charged.len(),
            charged.last().copied().unwrap_or_default()
        ))),
        Some(r) if private_round(r) && !charged.contains(&u64::from(r)) => {
            Err(NetError::Refused(format!(
                "{}: answered round {r}, which the round ledger beside it does not record: \
                 the ledger was replaced or reset; restore the state directory",
                state_path.display()
            )))
        }
        _ => Ok(()),
    }
}

/// What the silo whose state directory is `dir` last stored: the round and the bodies it sent
/// for it, read without opening the silo (for operators and tests). `None` before the first
/// answer; a damaged or older-version state is an error naming the file.
pub fn stored_answer(dir: &std::path::Path) -> Result<Option<(u32, Vec<Vec<u8>>)>> {
    let path = dir.join("state");
    match crate::store::Cell::read(&path)? {
        None => Ok(None),
        Some(bytes) => {
            let (p, bodies) = state::read(&bytes).map_err(|e| NetError::file(&path, e))?;
            Ok(Some((p.round, bodies)))
        }
    }
}

/// The half state the silo whose state directory is `dir` stored with its last answer (e.g.
/// SoteriaFL's shift s_i), and that round: read without opening the silo, for operators and
/// tests. `None` before the first answer.
pub fn stored_half(dir: &std::path::Path) -> Result<Option<(u32, dpfl::algo::HalfState)>> {
    let path = dir.join("state");
    match crate::store::Cell::read(&path)? {
        None => Ok(None),
        Some(bytes) => {
            let (p, _) = state::read(&bytes).map_err(|e| NetError::file(&path, e))?;
            Ok(Some((p.round, p.half)))
        }
    }
}
