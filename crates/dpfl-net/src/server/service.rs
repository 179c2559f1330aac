//! The server's gRPC service: registration, each silo's session (a sender task publishing the
//! rounds it is selected for, a receiver checking and keeping its answers) and the shuffler's
//! pull and push. Anything wrong with a peer's input is logged and counted; the round goes on.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

use dpfl::algo::Round;
use dpfl::round::{Refusal, SiloAnswer};

use super::{Open, Shared};
use crate::codec;
use crate::error::{NetError, Result};
use crate::proto::federation_server::Federation as FederationRpc;
use crate::proto::{
    Frame, Header, PullRequest, PushReply, RegisterReply, RegisterRequest, ShuffleRound,
    Status as RoundStatus,
};

/// How long the shuffler's pull waits before answering WAIT.
const LONG_POLL: Duration = Duration::from_secs(15);
/// How long a new session may take to say HELLO.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) struct Service {
    pub(super) shared: Arc<Shared>,
}

type Outbound = tokio::sync::mpsc::Sender<std::result::Result<Frame, Status>>;

/// A session's sending half: the broadcast of every round the silo is selected for and has
/// not answered or refused (once per session), then DONE.
async fn send_rounds(s: Arc<Shared>, id: u32, tx: Outbound) {
    let mut opened = s.opened.subscribe();
    let mut sent: Option<Round> = None;
    loop {
        // Mark the current value seen before reading the state, so a round opened after the
        // read wakes the wait below.
        opened.borrow_and_update();
        let (frames, last) = {
            let mut inner = s.inner.lock().await;
            if inner.done {
                inner.done_told.insert(id);
                let h = Header {
                    status: RoundStatus::Done as i32,
                    epoch: s.epoch,
                    ..Default::default()
                };
                (codec::frames(h, &[]), true)
            } else {
                match &inner.open {
                    Some(o)
                        if sent != Some(o.round)
                            && o.selected.contains(&id)
                            && !o.answers.contains_key(&id) =>
                    {
                        sent = Some(o.round);
                        let h = Header {
                            status: RoundStatus::Round as i32,
                            round: o.round.get(),
                            epoch: s.epoch,
                            ..Default::default()
                        };
                        (codec::frames(h, &o.broadcast), false)
                    }
                    _ => (Vec::new(), false),
                }
            }
        };
        for f in frames {
            if tx.send(Ok(f)).await.is_err() {
                return;
            }
        }
        if last || opened.changed().await.is_err() {
            return;
        }
    }
}

/// One body a silo sent on its session: a message, a refusal or a heartbeat. Anything wrong
/// with it is logged and counted; the round goes on.
async fn receive(s: &Shared, id: u32, h: Header, body: &[u8]) {
    let mut inner = s.inner.lock().await;
    inner.last_seen.insert(id, Instant::now());
    let status = RoundStatus::try_from(h.status);
    if status == Ok(RoundStatus::Heartbeat) {
        return;
    }
    let Some(open) = inner.open.as_mut().filter(|o| o.round.get() == h.round) else {
        tracing::info!(silo = id, round = h.round, "late message ignored");
        return;
    };
    let bad = |open: &mut Open, e: NetError| {
        open.rejected += 1;
        tracing::warn!("message of silo {id} for round {} rejected: {e}", h.round);
    };
    if let Err(e) = check_claim(h.silo_id, id) {
        return bad(open, e);
    }
    if !open.selected.contains(&id) {
        let e = NetError::Rejected(format!("silo {id} is not selected for round {}", h.round));
        return bad(open, e);
    }
    match status {
        Ok(RoundStatus::Refused) => {
            tracing::info!(silo = id, round = h.round, "silo refuses the round");
            let refusal = Refusal {
                round: Round::new(h.round),
                reason: "the silo's ledger refused the round (reported on its session)".into(),
                privacy: None,
            };
            open.answers
                .entry(id)
                .or_insert(SiloAnswer::Refused(refusal));
        }
        Ok(RoundStatus::Message) if s.shuffle => {
            let e = NetError::Rejected("in shuffle mode messages go through the shuffler".into());
            return bad(open, e);
        }
        Ok(RoundStatus::Message) => {
            if open.answers.contains_key(&id) {
                tracing::info!(silo = id, round = h.round, "duplicate message ignored");
                return;
            }
            // One body per reply, of one or several messages, each validated once.
            match codec::decode_answer(body, Round::new(h.round), s.dim) {
                Ok(reply) => {
                    open.answers.insert(id, SiloAnswer::Reply(reply));
                }
                Err(e) => return bad(open, e),
            }
        }
        _ => {
            let e = NetError::Rejected(format!("unexpected frame status {}", h.status));
            return bad(open, e);
        }
    }
    drop(inner);
    s.notify();
}

type FrameStream = Pin<Box<dyn Stream<Item = std::result::Result<Frame, Status>> + Send>>;

fn silo_id_of<T>(req: &Request<T>, silos: usize) -> Result<u32> {
    let name = crate::tls::peer_name(req)?;
    let id = name
        .strip_prefix("silo-")
        .and_then(|s| s.parse::<u32>().ok())
        .ok_or_else(|| NetError::Denied(format!("{name:?} is not a silo")))?;
    if id as usize >= silos {
        return Err(NetError::Denied(format!(
            "silo {id} is not in this federation of {silos}"
        )));
    }
    Ok(id)
}

fn require_shuffler<T>(req: &Request<T>) -> Result<()> {
    let name = crate::tls::peer_name(req)?;
    if name != "shuffler" {
        return Err(NetError::Denied(format!("{name:?} is not the shuffler")));
    }
    Ok(())
}

fn check_claim(claimed: u32, id: u32) -> Result<()> {
    if claimed != id {
        return Err(NetError::Denied(format!(
            "certificate of silo {id} claims to be silo {claimed}"
        )));
    }
    Ok(())
}

fn reply(outcome: &str, accepted: u32) -> Response<PushReply> {
    Response::new(PushReply {
        outcome: outcome.into(),
        accepted,
    })
}

/// Logs a rejection (the round goes on) and turns it into a status.
fn rejected(what: &str, e: NetError) -> Status {
    tracing::warn!("{what} rejected: {e}");
    e.into()
}

#[tonic::async_trait]
impl FederationRpc for Service {
    async fn register(
        &self,
        req: Request<RegisterRequest>,
    ) -> std::result::Result<Response<RegisterReply>, Status> {
        let s = &self.shared;
        let id = silo_id_of(&req, s.silos)?;
        check_claim(req.get_ref().silo_id, id)?;
        s.inner.lock().await.last_seen.insert(id, Instant::now());
        s.notify();
        tracing::info!(silo = id, "registered");
        Ok(Response::new(RegisterReply {
            dim: s.dim as u32,
            rounds: s.rounds as u32,
            silos: s.silos as u32,
            shuffle: s.shuffle,
            hpke_public_key: s.hpke_pk.clone(),
            epoch: s.epoch,
        }))
    }

    type SessionStream = FrameStream;

    async fn session(
        &self,
        req: Request<Streaming<Frame>>,
    ) -> std::result::Result<Response<FrameStream>, Status> {
        let s = self.shared.clone();
        let id = silo_id_of(&req, s.silos)?;
        let mut inbound = req.into_inner();
        let hello = tokio::time::timeout(HELLO_TIMEOUT, codec::next_body(&mut inbound, 0))
            .await
            .map_err(|_| NetError::Rejected("no HELLO in time".into()))
            .and_then(|r| r)
            .map_err(|e| rejected(&format!("session of silo {id}"), e))?;
        let Some((h, _)) = hello else {
            return Err(Status::cancelled("session closed before HELLO"));
        };
        if h.status != RoundStatus::Hello as i32 {
            return Err(rejected(
                &format!("session of silo {id}"),
                NetError::Rejected("the first frame of a session must be HELLO".into()),
            ));
        }
        check_claim(h.silo_id, id)?;
        let serial = {
            let mut inner = s.inner.lock().await;
            inner.next_session += 1;
            let serial = inner.next_session;
            inner.sessions.insert(id, serial);
            inner.last_seen.insert(id, Instant::now());
            serial
        };
        s.notify();
        tracing::info!(silo = id, "session opened");
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        let sender = tokio::spawn(send_rounds(s.clone(), id, tx.clone()));
        tokio::spawn(async move {
            let limit = codec::max_reply_bytes(s.dim);
            let end = loop {
                match codec::next_body(&mut inbound, limit).await {
                    Ok(Some((h, body))) => receive(&s, id, h, &body).await,
                    Ok(None) => break None,
                    Err(e) => break Some(e),
                }
            };
            match end {
                None | Some(NetError::Rpc(_)) => {
                    tracing::info!(silo = id, "session closed");
                }
                Some(e) => {
                    // A framing violation (oversized, short, out of order) ends the session
                    // with a logged reason; the silo reconnects, the round goes on.
                    let status = rejected(&format!("session of silo {id}"), e);
                    let _ = tx.send(Err(status)).await;
                }
            }
            sender.abort();
            {
                let mut inner = s.inner.lock().await;
                if inner.sessions.get(&id) == Some(&serial) {
                    inner.sessions.remove(&id);
                }
            }
            s.notify();
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn pull_shuffle_round(
        &self,
        req: Request<PullRequest>,
    ) -> std::result::Result<Response<ShuffleRound>, Status> {
        let s = &self.shared;
        require_shuffler(&req)?;
        let p = req.into_inner();
        let mut rx = s.changed.subscribe();
        let end = Instant::now() + LONG_POLL;
        loop {
            {
                let mut inner = s.inner.lock().await;
                if inner.done {
                    return Ok(Response::new(ShuffleRound {
                        status: RoundStatus::Done as i32,
                        epoch: s.epoch,
                        ..Default::default()
                    }));
                }
                if let Some(o) = inner.open.as_mut() {
                    let told = p.last_epoch == s.epoch && p.last_round >= i64::from(o.round.get());
                    if !told && !o.batch_received {
                        return Ok(Response::new(ShuffleRound {
                            status: RoundStatus::Round as i32,
                            round: o.round.get(),
                            epoch: s.epoch,
                            expected: o.selected.len() as u32,
                            deadline_ms: o
                                .deadline
                                .saturating_duration_since(Instant::now())
                                .as_millis() as u64,
                        }));
                    }
                }
            }
            let now = Instant::now();
            if now >= end {
                return Ok(Response::new(ShuffleRound {
                    status: RoundStatus::Wait as i32,
                    epoch: s.epoch,
                    ..Default::default()
                }));
            }
            let _ = tokio::time::timeout(end - now, rx.changed()).await;
        }
    }

    async fn push_shuffled(
        &self,
        req: Request<Streaming<Frame>>,
    ) -> std::result::Result<Response<PushReply>, Status> {
        let s = &self.shared;
        require_shuffler(&req)?;
        let mut stream = req.into_inner();
        let bodies = codec::read_bodies(
            &mut stream,
            codec::max_sealed_bytes(s.dim),
            s.silos.saturating_mul(codec::max_reply_messages(s.dim)),
            (s.silos as u64).saturating_mul(codec::max_sealed_reply_bytes(s.dim)),
        )
        .await
        .map_err(|e| rejected("shuffled batch", e))?;
        // Every batch names its round and epoch (an empty one in a lone header with count 0),
        // so a late batch can never be taken for a later round's.
        let Some((round, epoch)) = bodies.first().map(|(h, _)| (h.round, h.epoch)) else {
            return Err(rejected(
                "shuffled batch",
                NetError::Rejected("a batch without a header".into()),
            ));
        };
        let mut inner = s.inner.lock().await;
        let Some(open) = inner
            .open
            .as_mut()
            .filter(|o| o.round.get() == round && epoch == s.epoch && !o.batch_received)
        else {
            tracing::info!(round, epoch, "late or repeated shuffled batch ignored");
            return Ok(reply("LATE", 0));
        };
        if let Some((h, _)) = bodies
            .first()
            .filter(|(h, _)| h.status == RoundStatus::Refused as i32)
        {
            tracing::warn!(
                round,
                submitted = h.index,
                quorum = h.count,
                "the shuffler withheld the batch"
            );
            open.withheld = Some((h.index, h.count));
            open.submitted = Some(h.submitted.clone());
            open.batch_received = true;
            drop(inner);
            s.notify();
            return Ok(reply("WITHHELD", 0));
        }
        open.submitted = bodies.first().map(|(h, _)| h.submitted.clone());
        let mut accepted = 0;
        for (i, (h, sealed)) in bodies.iter().enumerate() {
            if h.count == 0 && sealed.is_empty() {
                continue; // the marker of an empty batch
            }
            if h.silo_id != 0 {
                tracing::warn!("shuffled message {i} carries a silo id; identity dropped");
            }
            let digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(sealed).into();
            if !open.seen.insert(digest) {
                tracing::info!(index = i, "replayed sealed message ignored");
                continue;
            }
            // The shuffler's sum of compact PVEC shares comes unsealed (`share`).
            let msgs = if crate::share::is_share_body(sealed) {
                if s.shares {
                    crate::share::expand(sealed, open.round.get(), s.dim, s.silos)
                } else {
                    Err(NetError::Rejected(
                        "a share sum, but this federation's algorithm sends no PVEC shares".into(),
                    ))
                }
            } else {
                crate::seal::open(&s.hpke_sk, open.round.get(), sealed)
                    .and_then(|plain| codec::decode_message(&plain, open.round, s.dim))
                    .map(|m| vec![m])
            };
            match msgs {
                Ok(m) => {
                    open.shuffled.extend(m);
                    accepted += 1;
                }
                Err(e) => {
                    open.rejected += 1;
                    tracing::warn!(index = i, "sealed message rejected: {e}");
                }
            }
        }
        open.batch_received = true;
        drop(inner);
        s.notify();
        Ok(reply("ACCEPTED", accepted))
    }
}
