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
//! # The run loop
//! Which round is next, what ends the run and what a refusal or a divergence does are not
//! decided here: the server follows `dpfl::run::RunLoop` under `Policy::federated` (the
//! simulator's loop, with the network's policy: a refusal leaves its silo out, a divergence
//! fails the run, `server.stop_after_rounds` pauses it, a withheld round ends it at that
//! round). The server does a round's I/O between the loop's calls and checkpoints after it.
//!
//! # Crashes
//! After aggregating round r the server writes a checkpoint (next round, the server half's
//! state, the participation generator's state, the round log) durably, then opens r + 1.
//! A restarted server resumes at the checkpoint with a new *epoch*; silos answer the re-opened
//! round with the bytes they stored, so no fresh noise is drawn and no ledger is charged twice.
//!
//! # The round log
//! The checkpoint carries the round log; `rounds.jsonl` is written from it at the end and when
//! the server stops at a withheld round. Each line names the round, the silos that submitted
//! and those that dropped, the shuffle quorum and the outcome (`complete`, `survivors`: the
//! round went on without the dropped silos, e.g. under PAGD's robust γ; `withheld`: the
//! shuffler kept the batch back, nothing was aggregated, and the checkpoint still opens that
//! round, so a restarted server logs it a second time when it aggregates it).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, watch};

use dpfl::algo::{Round, ServerHalf, SiloMessage};
use dpfl::round::SiloAnswer;
use dpfl::run::{Finished, Next, Policy, RunLoop};
use dpfl_privacy::DpRng;

use crate::codec;
use crate::config::Federation;
use crate::error::{NetError, Result};
use crate::proto::federation_server::FederationServer;

pub use crate::checkpoint::{Checkpoint, RoundLog};

mod round;
mod service;

use round::{Closed, run_round, wait_for_silos};
use service::Service;

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
    /// Shuffle mode: the shuffler withheld the batch, (silos that submitted, quorum).
    withheld: Option<(u32, u32)>,
    /// Shuffle mode: the silos whose submission the shuffler's batch (or notice) holds.
    submitted: Option<Vec<u32>>,
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
    /// The algorithm sends compact PVEC shares (`share`); else a share body is rejected.
    shares: bool,
    /// The algorithm needs every silo's message every round (SoteriaFL's shifts): a round
    /// waits for silos that are gone, and one still short at the deadline stops the server.
    every_silo: bool,
    /// Shuffle mode: the fewest silos a forwarded batch holds (for the round log).
    quorum: Option<usize>,
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
    /// The final model.
    pub model: Vec<f64>,
    /// One line per round.
    pub log: Vec<RoundLog>,
    /// How the run loop (`dpfl::run::RunLoop`, the simulator's) ended this process's run:
    /// `Completed`, or `Paused` by `stop_after_rounds`.
    pub ended: Finished,
    /// Bytes that crossed the server's sockets (TLS records included).
    pub wire: crate::tls::WireCounter,
    /// Bytes received by this process from its first round's opening on.
    pub received_in_rounds: u64,
    /// Wall time of this process's rounds, from the first round's opening to the last
    /// checkpoint (registration excluded).
    pub rounds_elapsed: Duration,
}

impl ServerOutcome {
    /// Whether this process ran to the end (false: stopped by `stop_after_rounds`).
    pub fn finished(&self) -> bool {
        self.ended == Finished::Completed
    }
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

    /// The address the server actually listens on.
    pub fn local_addr(&self) -> Result<std::net::SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| NetError::Transport(e.to_string()))
    }

    /// Runs the federation to the end (or to `stop_after_rounds`) with the configured
    /// algorithm's server half.
    pub async fn run(self) -> Result<ServerOutcome> {
        // The server half only, from the plan: no calibration, no silo half.
        let half = dpfl::plan::server_half(&self.fed.plan)?;
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
        let (mut next_round, mut participation_rng, mut log, epoch) = match &stored {
            Some(bytes) => {
                let c = Checkpoint::decode(&ckpt_path, bytes)?;
                half.restore(c.half)?;
                tracing::info!(round = c.next_round.get(), "resuming from checkpoint");
                (
                    c.next_round,
                    DpRng::from_snapshot(&c.participation)?,
                    c.log,
                    c.epoch + 1,
                )
            }
            None => (
                Round::FIRST,
                dpfl::round::participation_rng(fed.config.seed)?,
                Vec::new(),
                1,
            ),
        };
        // The state the next round starts from: what a withheld round's checkpoint keeps
        // (only its log grows), so that a restarted server runs that round again as if it
        // had never opened.
        let mut before_round = (half.state(), participation_rng.snapshot());
        let (changed, _) = watch::channel(0u64);
        let (opened, _) = watch::channel(0u64);
        let shared = Arc::new(Shared {
            dim,
            rounds: fed.rounds(),
            silos: fed.silos(),
            shuffle: fed.shuffle(),
            shares: fed.compact_shares(),
            every_silo: fed.needs_every_silo(),
            quorum: fed.plan.shuffle_quorum().filter(|_| fed.shuffle()),
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
        let participation = fed.plan.setup.participation.clone();
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
                next_round.index(),
            )?),
            None => None,
        };
        let rounds_start = Instant::now();
        // Bytes received from here on are the rounds' (messages, their framing, heartbeats,
        // reconnections): what the uplink costs, without the registrations before round 0.
        let received_before_rounds = wire.received();
        // The run policy is dpfl's, as the simulator's: this loop only does a round's I/O
        // between the run loop's calls, and checkpoints where it stands.
        let mut run = RunLoop::new(
            shared.rounds,
            next_round.index(),
            Policy::federated(cfg.stop_after_rounds),
        );
        let mut withheld = None;
        let ended = loop {
            let r = match run.next()? {
                Next::Run(r) => r,
                Next::End(end) => break end,
            };
            let pace = Instant::now() + Duration::from_millis(cfg.min_round_ms);
            let closed = run_round(
                &shared,
                half.as_mut(),
                &participation,
                &mut participation_rng,
                r,
                deadline,
            )
            .await?;
            let (entry, refused) = match closed {
                Closed::Aggregated(entry, refused) => (entry, refused),
                Closed::Withheld(entry) => {
                    withheld = Some(round::withheld_error(&entry));
                    log.push(entry);
                    break run.withheld()?;
                }
                Closed::Failed(e) => break run.failed(e)?,
            };
            run.released(refused)?;
            tracing::info!(
                round = r.get(),
                selected = entry.selected,
                participants = entry.participants,
                rejected = entry.rejected,
                "round closed"
            );
            crate::metrics::server_round(
                entry.selected,
                entry.participants,
                entry.rejected,
                (wire.received(), wire.sent()),
            );
            log.push(entry);
            next_round = Round::checked(run.rounds_done())?;
            if let Some(rec) = &mut recorder {
                // Before the checkpoint: a checkpointed round's model is always on disk.
                rec.after_round(r.done(), || half.output())?;
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
            before_round = (ckpt.half, ckpt.participation);
            tokio::time::sleep_until(pace.into()).await;
        };
        let this_process = run.rounds_this_process();
        let finished = match &ended {
            Finished::Completed => true,
            // Not finished: the checkpoint of the last round done stays for a restarted
            // server.
            Finished::Paused { .. } | Finished::Diverged { .. } => false,
            &Finished::Withheld { round } => {
                // The checkpoint keeps the state before the round (only the log grows), so
                // that a restarted server runs it again as if it had never opened.
                let ckpt = Checkpoint {
                    next_round: round,
                    epoch,
                    half: before_round.0,
                    participation: before_round.1,
                    log: log.clone(),
                };
                let [tag, body] = ckpt.encode(&ckpt_path)?;
                ckpt_cell.write_parts(&[&tag, &body])?;
                write_round_log(&state_dir, &log)?;
                let _ = stop_tx.send(());
                return Err(withheld.unwrap_or_else(|| {
                    NetError::Refused(format!("round {round}: the shuffler withheld it"))
                }));
            }
        };
        let rounds_elapsed = rounds_start.elapsed();
        let model = half.output();
        if finished {
            write_model(&state_dir.join("model.bin"), &model)?;
            write_round_log(&state_dir, &log)?;
            let wire_json = serde_json::json!({
                "received_in_rounds": wire.received().saturating_sub(received_before_rounds),
                "received": wire.received(),
                "sent": wire.sent(),
                // This process's rounds only (a resumed server's log holds earlier ones).
                "rounds": this_process,
                "messages": log[log.len().saturating_sub(this_process)..]
                    .iter()
                    .map(|l| l.participants as u64)
                    .sum::<u64>(),
            });
            crate::store::write_atomic(
                &state_dir.join("wire.json"),
                wire_json.to_string().as_bytes(),
            )?;
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
            ended,
            received_in_rounds: wire.received().saturating_sub(received_before_rounds),
            wire,
            rounds_elapsed,
        })
    }
}

/// `rounds.jsonl`: one JSON line per round of `log` (withheld rounds included).
fn write_round_log(state_dir: &std::path::Path, log: &[RoundLog]) -> Result<()> {
    let mut lines = String::new();
    for l in log {
        lines.push_str(&serde_json::to_string(l).unwrap_or_default());
        lines.push('\n');
    }
    crate::store::write_atomic(&state_dir.join("rounds.jsonl"), lines.as_bytes())
}

/// The final model as little-endian f64s (bit-exact).
pub fn write_model(path: &std::path::Path, w: &[f64]) -> Result<()> {
    let bytes: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
    crate::store::write_atomic(path, &bytes)
}

/// Reads a model written by [`write_model`] (little-endian f64s).
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
