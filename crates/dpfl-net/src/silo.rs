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
//!
//! # Fresh starts and keys (issue 27)
//! A silo starts afresh only when told to ([`Start::Fresh`], `dpfl silo --fresh`) and only on
//! an empty state directory; otherwise ([`Start::Resume`]) it needs its stored ledger, and a
//! ledger or state that is missing, empty (0-byte slot files) or unreadable stops it, naming
//! the file. An empty file is what a lost or wiped directory looks like, and starting over
//! on it would answer rounds it already answered with fresh noise. An OS-seeded silo never
//! writes its generator's key (a restart draws a fresh one) and replaces it after every answer
//! ([`DpRng::rekey`]), so neither a copy of its state directory nor its memory after a round
//! regenerates the noise of the rounds before; a re-asked round gets the stored bytes.

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

/// How a silo treats its state directory when it starts (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// A first start: the state directory must be empty (or absent); a fresh ledger is
    /// written before anything else happens.
    Fresh,
    /// A restart: the state directory must hold this silo's ledger; missing, empty or damaged
    /// state is an error naming the file.
    Resume,
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
    /// Message bytes, half state and (seeded) generator state of the last round answered.
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
    pub fn new(fed: Federation, id: u32, data: SiloData, start: Start) -> Result<Self> {
        Self::open(fed, id, data, None, start)
    }

    /// [`Silo::new`] with the silo's own budget: with `local.enforce` every round is charged
    /// to a ledger with (ε_i, δ_i, neighbouring) from `local`, whatever the federation file
    /// says. Call [`crate::config::check_plan`] before reading the data.
    pub fn with_budget(
        fed: Federation,
        id: u32,
        data: SiloData,
        local: &crate::config::LocalBudget,
        start: Start,
    ) -> Result<Self> {
        Self::open(fed, id, data, Some(local), start)
    }

    fn open(
        fed: Federation,
        id: u32,
        data: SiloData,
        local: Option<&crate::config::LocalBudget>,
        start: Start,
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
        Self::with_half_and_budget(fed, id, data, half, dim, budget, start)
    }

    /// A silo with a given half of dimension `dim` and no budget beyond the release cap
    /// (benchmarks use bare halves).
    pub fn with_half(
        fed: Federation,
        id: u32,
        data: SiloData,
        half: Box<dyn SiloHalf>,
        dim: usize,
        start: Start,
    ) -> Result<Self> {
        Self::with_half_and_budget(fed, id, data, half, dim, None, start)
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
        start: Start,
    ) -> Result<Self> {
        let dir = fed.silo_state_dir(id);
        if start == Start::Resume && !dir.is_dir() {
            return Err(NetError::file(
                &dir,
                format!(
                    "no state directory for silo {id}: a first start needs --fresh; a silo that \
                     ran before must get its state directory back (restore it from a backup)"
                ),
            ));
        }
        // The state directory's lock is taken before the ledger is read.
        let lock = crate::lock::lock_dir(&dir, &format!("silo {id}"))?;
        let ledger_path = dir.join(crate::ledger::ROUND_LEDGER);
        match start {
            Start::Fresh => {
                check_empty(&dir)?;
                crate::ledger::create(&ledger_path, fed.rounds(), budget)?;
            }
            Start::Resume => crate::ledger::check_stored(&ledger_path)?,
        }
        let ledger = crate::ledger::open(&ledger_path, fed.rounds(), budget)?;
        let state_path = dir.join("state");
        let (state, stored) = crate::store::Cell::open(&state_path)?;
        let (rng, last) = match stored {
            Some(bytes) => {
                let (p, body) = state::read(&bytes).map_err(|e| NetError::file(&state_path, e))?;
                half.restore(p.half)?;
                tracing::info!(silo = id, round = p.round, "restored silo state");
                // A seeded stream continues where it stopped; an OS-seeded silo stored no key
                // and draws a fresh one.
                let rng = match (&p.rng, fed.config.seed) {
                    (Some(s), _) => DpRng::from_snapshot(s)?,
                    (None, None) => DpRng::from_os()?,
                    // Starting the seed's stream over would draw round 0's noise again for a
                    // later round: the difference of the two messages would be noiseless.
                    (None, Some(_)) => {
                        return Err(NetError::file(
                            &state_path,
                            "written by an OS-seeded silo, but the federation file now sets a \
                             seed: the seed's stream would repeat noise already drawn; remove \
                             `seed` from the federation file",
                        ));
                    }
                };
                (rng, Some((p.round, body)))
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
            rng: self.rng.seeded_snapshot(),
        };
        state::write(&mut self.state, &self.state_path, &p, &bodies)?;
        // The key that drew this round's noise goes (OS-seeded silos): from here on, nothing
        // in memory regenerates it.
        self.rng.rekey()?;
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

/// A fresh start's state directory holds nothing but the lock this silo just took (and the
/// temporary ledger of a fresh start that died before its ledger was in place, removed here:
/// nothing was answered without a ledger).
fn check_empty(dir: &std::path::Path) -> Result<()> {
    crate::ledger::remove_unfinished(dir)?;
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(NetError::io(dir))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != crate::lock::LOCK_FILE)
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    names.sort();
    Err(NetError::file(
        dir,
        format!(
            "--fresh needs an empty state directory, and this one holds {}: a silo that ran \
             before resumes from it (start it without --fresh); an empty or damaged state is \
             never started over",
            names.join(", ")
        ),
    ))
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
            "{}: missing or empty, but the round ledger records {} charged rounds (last {}): the silo \
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const EXPERIMENT: &str = r#"
name = "silo-keys"
rounds = 3
seed = 3
[data]
source = { kind = "synthetic", task = "binary", silos = 2, train = 10, test = 5, features = 3 }
[model]
kind = "logistic"
[privacy]
epsilon = 1.0
delta = 1e-3
lipschitz = 1.0
[[algorithms]]
kind = "mb-sgd"
step_size = 0.5
batch_size = 5
output = "last"
calibration = "experiment"
"#;

    fn planner(
        experiment: &Path,
        algorithm: usize,
        p: &crate::config::PublicFacts,
    ) -> dpfl::Result<dpfl::plan::Plan> {
        dpfl_lab::experiment::plan_from_file(
            experiment,
            algorithm,
            p.features,
            p.classes,
            &p.records,
            p.lipschitz,
        )
    }

    /// A federation file in `dir` (with `seed = 3` for the silos' streams, or none: OS-seeded).
    fn federation(dir: &Path, seed: bool) -> Federation {
        std::fs::write(dir.join("experiment.toml"), EXPERIMENT).unwrap();
        let seed = if seed { "seed = 3\n" } else { "" };
        let text = format!(
            "experiment = \"experiment.toml\"\n{seed}[public]\nrecords = [10, 10]\nfeatures = 3\n\
             classes = 2\nlipschitz = 1.0\n[server]\naddress = \"127.0.0.1:0\"\n\
             state_dir = \"server\"\n[tls]\ndir = \"certs\"\n"
        );
        let p = dir.join("federation.toml");
        std::fs::write(&p, text).unwrap();
        Federation::load_with(&p, Some(&planner)).unwrap()
    }

    fn silo(dir: &Path, seed: bool, start: Start) -> Result<Silo> {
        let fed = federation(dir, seed);
        let spec =
            dpfl_lab::experiment::ExperimentSpec::from_file(&dir.join("experiment.toml")).unwrap();
        let mut master = dpfl_lab::experiment::master_rng(&spec).unwrap();
        let (trial, _) = dpfl_lab::experiment::next_trial(&spec, None, &mut master).unwrap();
        let data = trial.silos.into_iter().next().unwrap();
        Silo::new(fed, 0, data, start)
    }

    fn broadcast(dim: usize, round: u32) -> Vec<u8> {
        codec::encode_broadcast(&dpfl::algo::Broadcast {
            round: Round::new(round),
            point: vec![0.1; dim],
            aux: vec![],
        })
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }

    /// Every file of the silo's state directory, concatenated.
    fn stored_bytes(dir: &Path) -> Vec<u8> {
        let mut all = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            all.extend(std::fs::read(e.unwrap().path()).unwrap());
        }
        all
    }

    fn copy_dir(from: &Path, to: &Path) {
        let _ = std::fs::remove_dir_all(to);
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }

    /// Issue 27 (finding 4): an OS-seeded silo writes no key; restarted, its next message is
    /// not what the old key would give; a re-asked round gets the stored bytes. A seeded silo,
    /// the same steps: the very same message (its stream continues from the stored state).
    #[test]
    fn an_os_seeded_silo_stores_no_key_and_a_restart_draws_a_fresh_one() {
        for seeded in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path();
            let e = silo(dir, seeded, Start::Resume)
                .err()
                .expect("no state yet");
            assert!(e.to_string().contains("--fresh"), "{e}");
            let mut a = silo(dir, seeded, Start::Fresh).unwrap();
            let state_dir = a.fed.silo_state_dir(0);
            let dim = a.dim;
            assert_eq!(a.rng.is_os_seeded(), !seeded);
            let key0 = a.rng.snapshot().key;
            let (m0, _) = a.answer(&broadcast(dim, 0), 0, None).unwrap().unwrap();
            // The key in memory now (the one that would draw round 1) and round 0's.
            let key1 = a.rng.snapshot().key;
            assert_eq!(
                key0 == key1,
                seeded,
                "an OS-seeded silo rekeys after each answer"
            );
            let stored = stored_bytes(&state_dir);
            let p = state::read(
                &crate::store::Cell::read(&state_dir.join("state"))
                    .unwrap()
                    .unwrap(),
            )
            .unwrap()
            .0;
            if seeded {
                assert_eq!(p.rng.map(|r| r.key), Some(key1));
            } else {
                assert!(p.rng.is_none(), "typed state holds no generator");
                assert!(!contains(&stored, &key0) && !contains(&stored, &key1));
            }
            // What the old process would answer next (with the key it holds), then the same
            // round after a restart from the state it left.
            let backup = dir.join("backup");
            copy_dir(&state_dir, &backup);
            let (old_next, _) = a.answer(&broadcast(dim, 1), 1, None).unwrap().unwrap();
            drop(a);
            copy_dir(&backup, &state_dir);
            let mut b = silo(dir, seeded, Start::Resume).unwrap();
            assert_eq!(
                b.answer(&broadcast(dim, 0), 0, None).unwrap(),
                Some((m0, true))
            );
            let (next, resent) = b.answer(&broadcast(dim, 1), 1, None).unwrap().unwrap();
            assert!(!resent);
            assert_eq!(next == old_next, seeded, "seeded {seeded}");
            drop(b);
            // Re-asked after another restart: the stored bytes, byte for byte.
            let mut c = silo(dir, seeded, Start::Resume).unwrap();
            assert_eq!(
                c.answer(&broadcast(dim, 1), 1, None).unwrap(),
                Some((next, true))
            );
            assert_eq!(c.charged_rounds(), vec![0, 1]);
            drop(c);
            // A second fresh start on this directory is refused.
            let e = silo(dir, seeded, Start::Fresh).err().expect("not empty");
            assert!(e.to_string().contains("--fresh needs an empty"), "{e}");
        }
    }
}
