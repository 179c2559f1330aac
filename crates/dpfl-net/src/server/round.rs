//! One round of the server on the round core (`dpfl::round`): draw S_r from the participation
//! stream, publish the broadcast, keep each selected silo's answer (a reply or its ledger's
//! refusal) until every one has answered, refused or gone, or the deadline; then collect with
//! [`Collected`] in silo order (plus, in shuffle mode, the shuffler's permuted batch) and let
//! the server half aggregate. What the round came to ([`Closed`]) goes to the run loop
//! (`dpfl::run::RunLoop`), which decides what follows: a batch the shuffler withheld (fewer
//! silos than the shuffle's quorum) is logged (`RoundOutcome::Withheld`) and stops the server
//! at that round, which a restarted server runs again; refusals leave their silos out; a
//! failed aggregation (a divergence) fails the run. Every round's log line names the silos
//! that submitted, those that dropped, the quorum and the outcome.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dpfl::algo::{Round, ServerHalf};
use dpfl::round::{Collected, Participation, Refusal, SiloAnswer};
use dpfl_privacy::DpRng;

use super::{Inner, Open, RoundLog, Shared};
use crate::checkpoint::RoundOutcome;
use crate::codec;
use crate::error::{NetError, Result};

/// Waits for every silo to open a session, or until the start timeout; then starts if at
/// least `min` have, and refuses otherwise (a federation of fewer silos than configured is
/// a misconfiguration, not a training run).
pub(super) async fn wait_for_silos(shared: &Shared, min: usize, timeout: Duration) -> Result<()> {
    let end = Instant::now() + timeout;
    let mut rx = shared.changed.subscribe();
    loop {
        let n = shared.inner.lock().await.sessions.len();
        if n >= shared.silos {
            return Ok(());
        }
        let now = Instant::now();
        if now >= end {
            if n < min {
                return Err(NetError::Refused(format!(
                    "only {n} of {} silos connected within server.start_timeout_ms = {} ms, \
                     fewer than server.min_silos = {min}: not starting round 0 (see the silos' \
                     logs: a silo that refuses the plan or its data exits at once)",
                    shared.silos,
                    timeout.as_millis()
                )));
            }
            tracing::warn!(
                registered = n,
                silos = shared.silos,
                min_silos = min,
                "starting without every silo"
            );
            return Ok(());
        }
        let _ = tokio::time::timeout(end - now, rx.changed()).await;
    }
}

/// What a network round came to, for the run loop.
pub(super) enum Closed {
    /// Aggregated: the log line and the refusals the round core left out.
    Aggregated(RoundLog, Vec<(u32, Refusal)>),
    /// The shuffler withheld the batch: the log line; nothing was aggregated.
    Withheld(RoundLog),
    /// The server half's aggregation failed (e.g. a divergence).
    Failed(dpfl::Error),
}

pub(super) async fn run_round(
    shared: &Shared,
    half: &mut dyn ServerHalf,
    participation: &Participation,
    rng: &mut DpRng,
    r: Round,
    deadline: Duration,
) -> Result<Closed> {
    let mut selected = Vec::new();
    participation.draw(shared.silos, rng, &mut selected)?;
    let broadcast = codec::encode_broadcast(&half.broadcast(r));
    let opened = Instant::now();
    let selected: Vec<u32> = selected.iter().map(|&i| i as u32).collect();
    {
        let mut inner = shared.inner.lock().await;
        inner.open = Some(Open {
            round: r,
            selected: selected.clone(),
            broadcast: Arc::new(broadcast),
            deadline: opened + deadline,
            answers: BTreeMap::new(),
            shuffled: Vec::new(),
            seen: HashSet::new(),
            batch_received: false,
            rejected: 0,
            withheld: None,
            submitted: None,
        });
    }
    shared.notify_opened();
    let mut rx = shared.changed.subscribe();
    let (mut collected, entry) = loop {
        {
            let mut inner = shared.inner.lock().await;
            let now = Instant::now();
            let Inner {
                open: slot,
                last_seen,
                sessions,
                ..
            } = &mut *inner;
            let open = slot
                .as_mut()
                .ok_or_else(|| NetError::Transport("round state lost".into()))?;
            // A silo is waited for while its session is open and its heartbeats fresh.
            let gone = |id: &u32| {
                !sessions.contains_key(id)
                    || last_seen
                        .get(id)
                        .is_none_or(|t| now.duration_since(*t) > shared.heartbeat_timeout)
            };
            // In shuffle mode the server cannot tell who answered: it waits for the shuffler's
            // batch (which the shuffler forwards once every selected silo has submitted or
            // refused, or near the deadline with what it has).
            let refused = |id: &u32| matches!(open.answers.get(id), Some(SiloAnswer::Refused(_)));
            let complete = if shared.shuffle {
                open.batch_received || open.selected.iter().all(refused)
            } else if shared.every_silo {
                // A gone silo is waited for: it may restart and answer from its stored state.
                open.selected.iter().all(|id| open.answers.contains_key(id))
            } else {
                open.selected
                    .iter()
                    .all(|id| open.answers.contains_key(id) || gone(id))
            };
            if !complete && shared.every_silo && now >= open.deadline {
                // A short round would make the server's shift drift from the silos' mean;
                // stopping leaves the checkpoint at round r, which a restarted server reopens.
                let missing: Vec<u32> = open
                    .selected
                    .iter()
                    .copied()
                    .filter(|id| !open.answers.contains_key(id))
                    .collect();
                *slot = None;
                return Err(NetError::Refused(format!(
                    "round {r}: this algorithm needs every silo every round and silos \
                     {missing:?} did not answer within server.round_deadline_ms; restart them \
                     and the server (it resumes at round {r} from its checkpoint)"
                )));
            }
            if let Some((submitted, quorum)) = open.withheld {
                // Nothing of the round reached this server: logged, not aggregated; the
                // caller stops, leaving round r to a restarted server.
                tracing::warn!(round = r.get(), submitted, quorum, "round withheld");
                let entry = log_entry(shared, open, r, 0, opened);
                *slot = None;
                return Ok(Closed::Withheld(RoundLog {
                    outcome: Some(RoundOutcome::Withheld),
                    ..entry
                }));
            }
            if complete || now >= open.deadline {
                if !complete {
                    tracing::warn!(
                        round = r.get(),
                        "deadline passed; closing with the messages at hand"
                    );
                }
                // The round core's collection: answers in silo order (as in the simulator),
                // then, in shuffle mode, the shuffler's already permuted batch.
                let mut collected = Collected::default();
                for (id, answer) in std::mem::take(&mut open.answers) {
                    collected.push(id, answer);
                }
                collected.push_shuffled(std::mem::take(&mut open.shuffled));
                let entry = log_entry(shared, open, r, collected.messages.len(), opened);
                *slot = None;
                break (collected, entry);
            }
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), rx.changed()).await;
    };
    shared.notify();
    // The shuffle stage, if any, ran in the shuffler process: none here.
    if let Err(e) = collected.aggregate(half, r, None) {
        return Ok(Closed::Failed(e));
    }
    Ok(Closed::Aggregated(
        RoundLog {
            seconds: opened.elapsed().as_secs_f64(),
            ..entry
        },
        collected.refused,
    ))
}

/// The round log's line for `open` (before its answers are taken): who submitted, who
/// dropped, the quorum and whether the round closed complete or on its survivors.
fn log_entry(
    shared: &Shared,
    open: &Open,
    r: Round,
    participants: usize,
    opened: Instant,
) -> RoundLog {
    let refused: Vec<u32> = open
        .answers
        .iter()
        .filter(|(_, a)| matches!(a, SiloAnswer::Refused(_)))
        .map(|(&id, _)| id)
        .collect();
    let submitted: Vec<u32> = if shared.shuffle {
        // The shuffler's list; none when every silo refused and no batch came.
        open.submitted.clone().unwrap_or_default()
    } else {
        open.answers
            .iter()
            .filter(|(_, a)| matches!(a, SiloAnswer::Reply(_)))
            .map(|(&id, _)| id)
            .collect()
    };
    let dropped: Vec<u32> = open
        .selected
        .iter()
        .copied()
        .filter(|id| !submitted.contains(id) && !refused.contains(id))
        .collect();
    let outcome = if dropped.is_empty() {
        RoundOutcome::Complete
    } else {
        RoundOutcome::Survivors
    };
    RoundLog {
        round: r,
        epoch: shared.epoch,
        selected: open.selected.len(),
        participants,
        rejected: open.rejected,
        seconds: opened.elapsed().as_secs_f64(),
        submitted: Some(submitted),
        dropped: Some(dropped),
        quorum: shared.quorum,
        outcome: Some(outcome),
    }
}

/// Why the server stops at a withheld round `entry`.
pub(super) fn withheld_error(entry: &RoundLog) -> NetError {
    let r = entry.round;
    let submitted = entry.submitted.as_ref().map_or(0, Vec::len);
    NetError::Refused(format!(
        "round {r}: the shuffler withheld the round's batch: {submitted} silo(s) submitted, \
         fewer than the {} the shuffle's privacy was calibrated for \
         (algorithm.min_participants, robust.honest_fraction); the silos' ledgers charged the \
         round, nothing was released (round log: server/rounds.jsonl). Restart the missing \
         silos and the server (it resumes at round {r} from its checkpoint), or plan for \
         dropouts (docs/shuffle.md)",
        entry.quorum.unwrap_or_default()
    ))
}
