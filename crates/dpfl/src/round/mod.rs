//! The round core, written once below both runners (the in-process simulator, [`crate::sim`],
//! and the network runtime, `dpfl-net`): participation draws, the RNG streams, the silo step
//! and the server's side of a round.
//!
//! A round r is: draw S_r ([`Participation::draw`] on the [`participation_rng`] stream) →
//! broadcast → each silo in S_r runs [`silo_step`] (ledger charge → respond → a validated
//! [`Reply`], or a [`Refusal`]) → collect in silo order → optional shuffle stage
//! ([`shuffle_stage`], a uniform permutation of all messages) → the server half aggregates.
//! Transports differ only in how broadcasts and replies travel and in deadlines.
//!
//! # One refusal rule
//! A silo whose ledger refuses round r's privacy event answers [`SiloAnswer::Refused`] before
//! its half touches data or draws noise; the round goes on without it (M_r < |S_r|). Both
//! runners apply this rule through [`silo_step`]. Any other ledger failure (an I/O error
//! writing a durable ledger) is an error of the silo, not a refusal.

mod participation;

pub use participation::Participation;

use dpfl_privacy::rng::Purpose;
use dpfl_privacy::{DpRng, PrivacyError, PrivacyEvent, sampler};

use crate::algo::{Broadcast, Reply, Round, ServerHalf, SiloHalf, SiloMessage};
use crate::data::Dataset;

/// Silo `i`'s generator: stream (Silo, i) of `seed`, or OS-seeded. Every runner takes it from
/// here, so both draw the same noise.
pub fn silo_rng(seed: Option<u64>, silo: u32) -> crate::Result<DpRng> {
    Ok(DpRng::new(seed, Purpose::Silo, silo)?)
}

/// The generator of the participation draws S_r: stream (Participation, 0) of `seed`.
pub fn participation_rng(seed: Option<u64>) -> crate::Result<DpRng> {
    Ok(DpRng::new(seed, Purpose::Participation, 0)?)
}

/// The generator of a simulated shuffler's permutations: stream (Shuffle, 0) of `seed`.
pub fn shuffle_rng(seed: Option<u64>) -> crate::Result<DpRng> {
    Ok(DpRng::new(seed, Purpose::Shuffle, 0)?)
}

/// Why a silo did not answer a round.
#[derive(Debug)]
pub struct Refusal {
    /// The refused round.
    pub round: Round,
    /// Why, for logs.
    pub reason: String,
    /// The accountant's error when the refusal comes from a privacy budget.
    pub privacy: Option<PrivacyError>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "round {} refused: {}", self.round, self.reason)
    }
}

/// A failed charge: a refusal (the round is not answered) or a failure of the ledger itself.
#[derive(Debug)]
#[non_exhaustive]
pub enum ChargeError {
    /// The round is refused (a budget): not answered.
    Refused(Refusal),
    /// The ledger itself failed.
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

impl ChargeError {
    /// A `dpfl-privacy` ledger's error at round `round`: past (ε_i, δ_i) or past the release
    /// cap is a refusal; any other error (storage, a conflicting re-charge) a failure.
    pub fn from_ledger(round: Round, e: PrivacyError) -> Self {
        match e {
            PrivacyError::BudgetExceeded { .. } | PrivacyError::ReleaseCapReached { .. } => {
                ChargeError::Refused(Refusal {
                    round,
                    reason: e.to_string(),
                    privacy: Some(e),
                })
            }
            other => ChargeError::Failed(Box::new(other)),
        }
    }
}

/// A silo's privacy ledger as the silo step needs it: charge round `round`'s event before any
/// release, durably if the ledger is durable; charging a round again with the same event
/// spends nothing. Storage is the implementor's: in memory in the simulator, durable cells in
/// `dpfl-net`.
pub trait Ledger: Send {
    /// Charges `event` for `round` before any release.
    fn charge(&mut self, round: Round, event: &PrivacyEvent) -> Result<(), ChargeError>;
}

/// No enforcement: every charge succeeds.
pub struct NoLedger;

impl Ledger for NoLedger {
    fn charge(&mut self, _round: Round, _event: &PrivacyEvent) -> Result<(), ChargeError> {
        Ok(())
    }
}

/// The ledger of `dpfl-privacy` (issue 4), whatever its storage: refuses a release past
/// (ε_i, δ_i) or past its release cap; any other error (storage, a conflicting re-charge) is a
/// failure of the silo.
impl Ledger for dpfl_privacy::ledger::Ledger {
    fn charge(&mut self, round: Round, event: &PrivacyEvent) -> Result<(), ChargeError> {
        dpfl_privacy::ledger::Ledger::charge(self, u64::from(round), event)
            .map(|_| ())
            .map_err(|e| ChargeError::from_ledger(round, e))
    }
}

/// What a silo answers a round.
#[derive(Debug)]
pub enum SiloAnswer {
    /// The silo's answer.
    Reply(Reply),
    /// The silo's refusal.
    Refused(Refusal),
}

/// The silo step, the same in both runners: charge the round's privacy event to `ledger`
/// (appending it to `spent`), then let the half respond, and validate the reply once against
/// the model dimension `dim`. A refused charge returns [`SiloAnswer::Refused`] before the
/// half computes anything.
pub fn silo_step(
    half: &mut dyn SiloHalf,
    ledger: &mut dyn Ledger,
    spent: &mut Vec<PrivacyEvent>,
    broadcast: &Broadcast,
    data: &Dataset,
    rng: &mut DpRng,
    dim: usize,
) -> crate::Result<SiloAnswer> {
    let round = broadcast.round;
    if let Some(event) = half.round_event(round) {
        match ledger.charge(round, &event) {
            Ok(()) => {}
            Err(ChargeError::Refused(r)) => return Ok(SiloAnswer::Refused(r)),
            Err(ChargeError::Failed(e)) => return Err(crate::Error::Ledger(e)),
        }
        spent.push(event);
    }
    let reply = half.respond_reply(broadcast, data, rng)?;
    reply.validate(dim)?;
    Ok(SiloAnswer::Reply(reply))
}

/// The optional shuffle stage: a uniformly random permutation of the round's messages (all
/// silos' replies together; the unit is the message) from the shuffler's own stream.
pub fn shuffle_stage(rng: &mut DpRng, messages: &mut [SiloMessage]) {
    sampler::shuffle(rng, messages);
}

/// A round's answers in silo order, as the server half receives them.
#[derive(Debug, Default)]
pub struct Collected {
    /// The messages, in silo order (shuffled in shuffle mode).
    pub messages: Vec<SiloMessage>,
    /// Silos that answered (M_r).
    pub replies: usize,
    /// Silos whose ledger refused the round, with why.
    pub refused: Vec<(u32, Refusal)>,
    /// Total encoded size of the messages, bits.
    pub bits: u64,
}

impl Collected {
    /// Adds silo `silo`'s answer; call in silo order (non-shuffle aggregation is in silo order
    /// so that both runners sum identically).
    pub fn push(&mut self, silo: u32, answer: SiloAnswer) {
        match answer {
            SiloAnswer::Reply(r) => {
                self.replies += 1;
                self.bits += r.bits();
                self.messages.extend(r.messages);
            }
            SiloAnswer::Refused(r) => self.refused.push((silo, r)),
        }
    }

    /// Adds messages that reached the server through a remote shuffler (the network's shuffle
    /// stage runs in the shuffler process): already permuted and carrying no silo identity,
    /// so they count towards the messages and bits but not towards `replies`.
    pub fn push_shuffled(&mut self, messages: Vec<SiloMessage>) {
        self.bits += messages.iter().map(|m| m.payload.bits()).sum::<u64>();
        self.messages.extend(messages);
    }

    /// Runs the optional shuffle stage, then the server half's aggregation of round `round`.
    pub fn aggregate(
        &mut self,
        server: &mut dyn ServerHalf,
        round: Round,
        shuffler: Option<&mut DpRng>,
    ) -> crate::Result<()> {
        if let Some(rng) = shuffler {
            shuffle_stage(rng, &mut self.messages);
        }
        server.aggregate(round, &self.messages)
    }
}

/// Whether the model after `done` of `rounds` rounds is evaluated: every `eval_every`-th
/// round and always the last. Every runner (the simulator, the network server recording
/// models for `dpfl federate`) asks this one function, so they evaluate the same rounds.
pub fn is_eval_round(done: usize, eval_every: usize, rounds: usize) -> bool {
    done.is_multiple_of(eval_every.max(1)) || done == rounds
}
