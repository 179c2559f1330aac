//! The federation server: opens rounds, hands out broadcasts, collects messages, aggregates
//! with the algorithm's own [`ServerHalf`], checkpoints after every round.
//!
//! # Rounds
//! Round r draws S_r from the participation stream exactly as the simulator does, publishes
//! the broadcast on each selected silo's session, and closes when every selected silo has
//! answered or refused (or, in shuffle mode, when the shuffler has forwarded the batch), when
//! every silo still missing has closed its session or stopped sending heartbeats, or at the
//! deadline. Messages that arrive after their round closed are logged and ignored; the round
//! aggregates whatever arrived (M_r may be smaller than |S_r|). In
//! non-shuffle mode messages are aggregated in silo order, so a run is bit-for-bit the
//! simulator's.
//!
//! # Crashes
//! After aggregating round r the server writes a checkpoint (next round, the server half's
//! state, the participation generator's state, the round log) durably, then opens r + 1.
//! A restarted server resumes at the checkpoint with a new *epoch*; silos answer the re-opened
//! round with the bytes they stored, so no fresh noise is drawn and no ledger is charged twice.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, watch};
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

use dpfl::algo::{Round, ServerHalf, SiloMessage};
use dpfl::round::{Collected, Participation, Refusal, SiloAnswer};
use dpfl_privacy::DpRng;

use crate::codec;
use crate::config::Federation;
use crate::error::{NetError, Result};
use crate::proto::federation_server::{Federation as FederationRpc, FederationServer};
use crate::proto::{
    Frame, Header, PullRequest, PushReply, RegisterReply, RegisterRequest, ShuffleRound,
    Status as RoundStatus,
};

/// How long the shuffler's pull waits before answering WAIT.
const LONG_POLL: Duration = Duration::from_secs(15);
/// How long a new session may take to say HELLO.
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);

pub use crate::checkpoint::{Checkpoint, RoundLog};

struct Open {
    round: Round,
    selected: Vec<u32>,
    broadcast: Arc<Vec<u8>>,
    deadline: Instant,
    /// Each silo's answer (a reply or its ledger's refusal), keyed, and so later collected, in
    /// silo order. In shuffle mode only refusals arrive here (replies come through the
    /// shuffler, without identities).
    answers: BTreeMap<u32, SiloAnswer>,
    /// Shuffle mode: the messages of the shuffler's batch, in its (permuted) order.
    shuffled: Vec<SiloMessage>,
    seen: HashSet<[u8; 32]>,
    batch_received: bool,
    rejected: usize,
}

struct Inner {
    open: Option<Open>,
    done: bool,
    last_seen: HashMap<u32, Instant>,
    /// Silos with an open session, and the session's serial number (a silo that reconnects
    /// replaces its session; the old one's end must not mark the new one gone).
    sessions: HashMap<u32, u64>,
    next_session: u64,
    done_told: HashSet<u32>,
}

struct Shared {
    dim: usize,
    rounds: usize,
    silos: usize,
    shuffle: bool,
    epoch: u64,
    hpke_sk: Vec<u8>,
    hpke_pk: Vec<u8>,
    heartbeat_timeout: Duration,
    inner: Mutex<Inner>,
    /// Any change the round loop waits for (a message, a refusal, a session closing).
    changed: watch::Sender<u64>,
    /// A round opened or training ended: what the sessions' senders wait for. Kept apart from
    /// `changed` so that 25 messages arriving do not wake 25 senders 25 times each.
    opened: watch::Sender<u64>,
}

impl Shared {
    fn notify(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }
    fn notify_opened(&self) {
        self.opened.send_modify(|v| *v = v.wrapping_add(1));
        self.notify();
    }
}

/// What a finished run leaves behind.
#[derive(Debug)]
pub struct ServerOutcome {
    pub model: Vec<f64>,
    pub log: Vec<RoundLog>,
    /// Whether this process ran to the end (false: stopped by `stop_after_rounds`).
    pub finished: bool,
    /// Bytes that crossed the server's sockets (TLS records included).
    pub wire: crate::tls::WireCounter,
    /// Wall time of this process's rounds, from the first round's opening to the last
    /// checkpoint (registration excluded).
    pub rounds_elapsed: Duration,
}

/// A server ready to listen.
pub struct Server {
    fed: Federation,
    listener: tokio::net::TcpListener,
    /// The state directory's lock, taken before the address file is written (a second server
    /// must not redirect the silos to itself).
    lock: crate::lock::DirLock,
}

impl Server {
    /// Binds the listening socket and writes the address file.
    pub async fn bind(fed: Federation) -> Result<Self> {
        let lock = crate::lock::lock_dir(&fed.server_state_dir(), "server")?;
        let addr = fed.config.server.address.clone();
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|e| NetError::config("server.address", format!("{addr}: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| NetError::Transport(e.to_string()))?;
        if let Some(f) = &fed.config.server.address_file {
            crate::store::write_atomic(&fed.path(f), local.to_string().as_bytes())?;
        }
        tracing::info!(%local, "server listening");
        Ok(Server {
            fed,
            listener,
            lock,
        })
    }

    pub fn local_addr(&self) -> Result<std::net::SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| NetError::Transport(e.to_string()))
    }

    /// Runs the federation to the end (or to `stop_after_rounds`) with the configured
    /// algorithm's server half.
    pub async fn run(self) -> Result<ServerOutcome> {
        let ctx = self.fed.context()?;
        let half = self.fed.algorithm.build(&ctx)?.server;
        self.run_with(half).await
    }

    /// Runs with a given server half (benchmarks use bare halves to time the runtime alone).
    pub async fn run_with(self, mut half: Box<dyn ServerHalf>) -> Result<ServerOutcome> {
        let fed = self.fed;
        let dim = half.dim();
        if fed.config.seed.is_some() {
            tracing::warn!(
                "the federation file sets `seed`: every generator is reproducible, and anyone \
                 who knows the seed can recompute the noise; for tests only"
            );
        }
        let state_dir = fed.server_state_dir();
        let _lock = self.lock;
        let (hpke_sk, hpke_pk) = hpke_keys(&state_dir)?;

        let ckpt_path = state_dir.join("checkpoint");
        let (mut ckpt_cell, stored) = crate::store::Cell::open(&ckpt_path)?;
        let (mut next_round, mut participation_rng, mut log, epoch) = match stored {
            Some(bytes) => {
                let c = Checkpoint::decode(&ckpt_path, &bytes)?;
                half.restore(c.half)?;
                tracing::info!(round = c.next_round, "resuming from checkpoint");
                (
                    c.next_round,
                    DpRng::from_snapshot(&c.participation)?,
                    c.log,
                    c.epoch + 1,
                )
            }
            None => (
                0,
                dpfl::round::participation_rng(fed.config.seed)?,
                Vec::new(),
                1,
            ),
        };
        let (changed, _) = watch::channel(0u64);
        let (opened, _) = watch::channel(0u64);
        let shared = Arc::new(Shared {
            dim,
            rounds: fed.rounds(),
            silos: fed.silos(),
            shuffle: fed.shuffle(),
            epoch,
            hpke_sk,
            hpke_pk,
            heartbeat_timeout: Duration::from_millis(fed.config.server.heartbeat_timeout_ms),
            inner: Mutex::new(Inner {
                open: None,
                done: false,
                last_seen: HashMap::new(),
                sessions: HashMap::new(),
                next_session: 0,
                done_told: HashSet::new(),
            }),
            changed,
            opened,
        });

        let tls = crate::tls::server_config(&fed.tls_dir(), "server")?;
        let wire = crate::tls::WireCounter::default();
        let incoming = crate::tls::incoming(self.listener, tls, wire.clone());
        let service = FederationServer::new(Service {
            shared: shared.clone(),
        })
        .max_decoding_message_size(2 * codec::CHUNK_BYTES)
        .max_encoding_message_size(2 * codec::CHUNK_BYTES);
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let serve = tokio::spawn(
            tonic::transport::Server::builder()
                .tcp_nodelay(true)
                .initial_stream_window_size(Some(4 << 20))
                .initial_connection_window_size(Some(8 << 20))
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stop_rx.await;
                }),
        );

        let cfg = &fed.config.server;
        let participation = fed.spec.participation.clone();
        let deadline = Duration::from_millis(cfg.round_deadline_ms);
        // Wait for the silos to register (or the start timeout).
        let min_silos = cfg.min_silos.unwrap_or(shared.silos);
        if let Err(e) = wait_for_silos(
            &shared,
            min_silos,
            Duration::from_millis(cfg.start_timeout_ms),
        )
        .await
        {
            let _ = stop_tx.send(());
            return Err(e);
        }
        // The recorded models are computed by the server from the privatised messages alone,
        // as every broadcast is (with `output = "last"` each is the next round's broadcast,
        // which every selected silo receives): by post-processing, recording them discloses
        // nothing beyond what the silos' (ε_i, δ_i) already cover.
        let mut recorder = match cfg.record_models_every {
            Some(k) => Some(crate::models::ModelRecorder::open(
                &state_dir.join("models.bin"),
                k,
                shared.rounds,
                next_round as usize,
            )?),
            None => None,
        };
        let mut this_process = 0usize;
        let mut finished = true;
        let rounds_start = Instant::now();
        while (next_round as usize) < shared.rounds {
            if cfg.stop_after_rounds.is_some_and(|k| this_process >= k) {
                finished = false;
                break;
            }
            let r = next_round;
            let pace = Instant::now() + Duration::from_millis(cfg.min_round_ms);
            let entry = run_round(
                &shared,
                half.as_mut(),
                &participation,
                &mut participation_rng,
                r,
                deadline,
            )
            .await?;
            tracing::info!(
                round = r,
                selected = entry.selected,
                participants = entry.participants,
                rejected = entry.rejected,
                "round closed"
            );
            log.push(entry);
            next_round = r + 1;
            if let Some(rec) = &mut recorder {
                // Before the checkpoint: a checkpointed round's model is always on disk.
                rec.after_round(next_round as usize, || half.output())?;
            }
            let ckpt = Checkpoint {
                next_round,
                epoch,
                half: half.state(),
                participation: participation_rng.snapshot(),
                log: log.clone(),
            };
            let [tag, body] = ckpt.encode(&ckpt_path)?;
            ckpt_cell.write_parts(&[&tag, &body])?;
            this_process += 1;
            tokio::time::sleep_until(pace.into()).await;
        }
        let rounds_elapsed = rounds_start.elapsed();
        let model = half.output();
        if finished {
            write_model(&state_dir.join("model.bin"), &model)?;
            let mut lines = String::new();
            for l in &log {
                lines.push_str(&serde_json::to_string(l).unwrap_or_default());
                lines.push('\n');
            }
            crate::store::write_atomic(&state_dir.join("rounds.jsonl"), lines.as_bytes())?;
            {
                let mut inner = shared.inner.lock().await;
                inner.done = true;
                inner.open = None;
            }
            shared.notify_opened();
            // Let the silos (and the shuffler) learn that training is over.
            let grace = Instant::now() + Duration::from_secs(5);
            while Instant::now() < grace {
                let told = shared.inner.lock().await.done_told.len();
                if told >= shared.silos {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let _ = stop_tx.send(());
        let _ = tokio::time::timeout(Duration::from_secs(2), serve).await;
        Ok(ServerOutcome {
            model,
            log,
            finished,
            wire,
            rounds_elapsed,
        })
    }
}

/// The final model as little-endian f64s (bit-exact).
pub fn write_model(path: &std::path::Path, w: &[f64]) -> Result<()> {
    let bytes: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
    crate::store::write_atomic(path, &bytes)
}

pub fn read_model(path: &std::path::Path) -> Result<Vec<f64>> {
    let b = std::fs::read(path).map_err(NetError::io(path))?;
    if b.len() % 8 != 0 {
        return Err(NetError::file(path, "length is not a multiple of 8"));
    }
    Ok(b.chunks_exact(8)
        .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
        .collect())
}

fn hpke_keys(dir: &std::path::Path) -> Result<(Vec<u8>, Vec<u8>)> {
    let path = dir.join("hpke.key");
    if path.exists() {
        let b = crate::keys::read_private(&path)?;
        if b.len() != 64 {
            return Err(NetError::file(&path, "expected 64 bytes (private, public)"));
        }
        return Ok((b[..32].to_vec(), b[32..].to_vec()));
    }
    let (sk, pk) = crate::seal::generate_keypair();
    crate::keys::write_private(&path, &[sk.as_slice(), pk.as_slice()].concat(), false)?;
    Ok((sk, pk))
}

/// Waits for every silo to open a session, or until the start timeout; then starts if at
/// least `min` have, and refuses otherwise (a federation of fewer silos than configured is
/// a misconfiguration, not a training run).
async fn wait_for_silos(shared: &Shared, min: usize, timeout: Duration) -> Result<()> {
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

async fn run_round(
    shared: &Shared,
    half: &mut dyn ServerHalf,
    participation: &Participation,
    rng: &mut DpRng,
    r: Round,
    deadline: Duration,
) -> Result<RoundLog> {
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
        });
    }
    shared.notify_opened();
    let mut rx = shared.changed.subscribe();
    let (mut collected, rejected) = loop {
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
            } else {
                open.selected
                    .iter()
                    .all(|id| open.answers.contains_key(id) || gone(id))
            };
            if complete || now >= open.deadline {
                if !complete {
                    tracing::warn!(
                        round = r,
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
                let rejected = open.rejected;
                *slot = None;
                break (collected, rejected);
            }
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), rx.changed()).await;
    };
    shared.notify();
    // The shuffle stage, if any, ran in the shuffler process: none here.
    collected.aggregate(half, r, None)?;
    Ok(RoundLog {
        round: r,
        epoch: shared.epoch,
        selected: selected.len(),
        participants: collected.messages.len(),
        rejected,
        seconds: opened.elapsed().as_secs_f64(),
    })
}

struct Service {
    shared: Arc<Shared>,
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
                            round: o.round,
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
    let Some(open) = inner.open.as_mut().filter(|o| o.round == h.round) else {
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
                round: h.round,
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
            match codec::decode_answer(body, h.round, s.dim) {
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
                    let told = p.last_epoch == s.epoch && p.last_round >= i64::from(o.round);
                    if !told && !o.batch_received {
                        return Ok(Response::new(ShuffleRound {
                            status: RoundStatus::Round as i32,
                            round: o.round,
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
            .filter(|o| o.round == round && epoch == s.epoch && !o.batch_received)
        else {
            tracing::info!(round, epoch, "late or repeated shuffled batch ignored");
            return Ok(reply("LATE", 0));
        };
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
            let msg = crate::seal::open(&s.hpke_sk, open.round, sealed)
                .and_then(|plain| codec::decode_message(&plain, open.round, s.dim));
            match msg {
                Ok(m) => {
                    open.shuffled.push(m);
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
