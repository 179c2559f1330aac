//! The shuffler: collects a round's sealed messages from the silos, permutes them with a
//! ChaCha20 generator seeded from the operating system, and forwards them to the server
//! without any silo identity.
//!
//! It holds no decryption key: it sees only HPKE ciphertexts (bound to their round) and the
//! TLS identity of each sender, which it uses to accept at most one submission per silo per
//! round and drops before forwarding. A submission holds the silo's whole reply, each message
//! sealed on its own: the unit of the permutation is the message, so the messages of one
//! silo's multi-message reply are spread through the batch.
//!
//! It forwards a round's batch only if at least the plan's shuffle quorum of silos submitted
//! (`dpfl::plan::Plan::shuffle_quorum`: the silos the shuffle's privacy was calibrated for);
//! a smaller batch is withheld and the server told so (a lone `STATUS_REFUSED` header), so a
//! dropout never leaves the others' messages with less noise or amplification than charged
//! (docs/shuffle.md "Dropouts over the network").
//!
//! With each batch (and each withholding notice) it tells the server which silos submitted,
//! for the round log (`checkpoint::RoundLog`): the participants are no secret from the server
//! (it selects them and holds their sessions); which message came from whom stays hidden.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, watch};
use tonic::{Request, Response, Status, Streaming};

use dpfl_privacy::{DpRng, sampler};

use crate::codec;
use crate::config::Federation;
use crate::error::{NetError, Result};
use crate::proto::federation_client::FederationClient;
use crate::proto::shuffler_server::{Shuffler as ShufflerRpc, ShufflerServer};
use crate::proto::{Frame, Header, PullRequest, PushReply, Status as RoundStatus};

struct Collecting {
    epoch: u64,
    round: u32,
    /// Keyed by silo id only to refuse a second submission; the ids are dropped on
    /// forwarding. Each holds the silo's sealed messages; none when the silo's ledger refused
    /// the round (it counts as heard from, so the batch need not wait for it).
    by_silo: BTreeMap<u32, Vec<Vec<u8>>>,
}

struct Shared {
    dim: usize,
    silos: usize,
    /// The algorithm sends compact PVEC shares (`share`); else a share body is refused.
    shares: bool,
    /// The fewest silos a forwarded batch must hold (`Plan::shuffle_quorum`).
    quorum: usize,
    current: Mutex<Option<Collecting>>,
    changed: watch::Sender<u64>,
}

/// The shuffler process: takes sealed messages from silos and forwards them, shuffled, to the server.
pub struct ShufflerProcess {
    fed: Federation,
    listener: tokio::net::TcpListener,
    /// With an address file, a lock beside it: a second shuffler must not overwrite it. (A
    /// fixed address without one excludes a second shuffler by the bind itself.)
    _lock: Option<crate::lock::DirLock>,
    connect_timeout: Duration,
}

impl ShufflerProcess {
    /// Binds the shuffler's listener (and writes its address file, under a lock, when one is configured).
    pub async fn bind(fed: Federation) -> Result<Self> {
        let section = fed.config.shuffler.clone().ok_or_else(|| {
            NetError::config("shuffler", "the federation has no [shuffler] section")
        })?;
        let lock = match &section.address_file {
            Some(f) => {
                let mut p = fed.path(f).into_os_string();
                p.push(".lock");
                let p = std::path::PathBuf::from(p);
                if let Some(dir) = p.parent() {
                    std::fs::create_dir_all(dir).map_err(NetError::io(dir))?;
                }
                Some(crate::lock::lock_file(&p, "shuffler")?)
            }
            None => None,
        };
        let listener = tokio::net::TcpListener::bind(&section.address)
            .await
            .map_err(|e| {
                NetError::config("shuffler.address", format!("{}: {e}", section.address))
            })?;
        let local = listener
            .local_addr()
            .map_err(|e| NetError::Transport(e.to_string()))?;
        if let Some(f) = &section.address_file {
            crate::store::write_atomic(&fed.path(f), local.to_string().as_bytes())?;
        }
        tracing::info!(%local, "shuffler listening");
        Ok(ShufflerProcess {
            fed,
            listener,
            _lock: lock,
            connect_timeout: crate::retry::DEFAULT_CONNECT_TIMEOUT,
        })
    }

    /// How long [`ShufflerProcess::run`] tries to reach the server before failing.
    pub fn set_connect_timeout(&mut self, timeout: Duration) {
        self.connect_timeout = timeout;
    }

    /// Runs until the server says training is over. Returns the number of batches forwarded.
    pub async fn run(self) -> Result<usize> {
        let fed = self.fed;
        let local = self
            .listener
            .local_addr()
            .map_err(|e| NetError::Transport(e.to_string()))?;
        let dim = fed.context()?.federation.dim;
        let (changed, _) = watch::channel(0u64);
        let shared = Arc::new(Shared {
            dim,
            silos: fed.silos(),
            shares: fed.compact_shares(),
            quorum: fed.plan.shuffle_quorum().unwrap_or(1),
            current: Mutex::new(None),
            changed,
        });
        let tls = crate::tls::server_config(&fed.tls_dir(), "shuffler")?;
        let incoming = crate::tls::incoming(self.listener, tls, Default::default());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let serve = tokio::spawn(
            tonic::transport::Server::builder()
                .tcp_nodelay(true)
                .add_service(
                    ShufflerServer::new(Service {
                        shared: shared.clone(),
                    })
                    .max_decoding_message_size(2 * codec::CHUNK_BYTES),
                )
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stop_rx.await;
                }),
        );
        let mut rng = DpRng::from_os()?;
        let mut batches = 0;
        let mut last: (u64, i64) = (0, -1);
        let server_name = fed.config.server.server_name.clone();
        let mut retry = crate::retry::Retry::new("shuffler", "the server", self.connect_timeout);
        'connect: loop {
            let Some(addr) = fed.server_address()? else {
                retry
                    .failed(&fed.config.server.address, "no address file yet")
                    .await?;
                continue;
            };
            if addr == local.to_string() {
                return Err(NetError::config(
                    "server.address",
                    format!("{addr} is this shuffler's own address: it would talk to itself"),
                ));
            }
            let ep = crate::tls::client_endpoint(
                &addr,
                &fed.tls_dir(),
                "shuffler",
                &fed.config.server.server_name,
            )?;
            let channel = match ep.connect().await {
                Ok(c) => c,
                Err(e) => {
                    retry
                        .failed(&addr, &crate::retry::reason(&e, &server_name))
                        .await?;
                    continue;
                }
            };
            let mut client =
                FederationClient::new(channel).max_encoding_message_size(2 * codec::CHUNK_BYTES);
            loop {
                let task = match client
                    .pull_shuffle_round(PullRequest {
                        silo_id: 0,
                        last_epoch: last.0,
                        last_round: last.1,
                    })
                    .await
                {
                    Ok(t) => {
                        retry.connected();
                        t.into_inner()
                    }
                    Err(e) if e.code() == tonic::Code::PermissionDenied => {
                        return Err(NetError::Denied(e.message().to_string()));
                    }
                    Err(e) => {
                        retry
                            .failed(&addr, &crate::retry::reason(&e, &server_name))
                            .await?;
                        continue 'connect;
                    }
                };
                match RoundStatus::try_from(task.status) {
                    Ok(RoundStatus::Done) => break 'connect,
                    Ok(RoundStatus::Round) => {}
                    _ => continue,
                }
                {
                    // A round is its (epoch, number). A restarted server reopens the round it
                    // stopped at in a new epoch; the silos' resends to it carry that epoch and
                    // wait in `submit` until this batch exists, so none falls into the old
                    // epoch's batch (already forwarded or withheld) and none is lost.
                    let mut cur = shared.current.lock().await;
                    let keep = cur
                        .as_ref()
                        .is_some_and(|c| (c.epoch, c.round) == (task.epoch, task.round));
                    if !keep {
                        *cur = Some(Collecting {
                            epoch: task.epoch,
                            round: task.round,
                            by_silo: BTreeMap::new(),
                        });
                    }
                }
                shared.changed.send_modify(|v| *v = v.wrapping_add(1));
                // Forward when every selected silo has sent, or with 3/4 of the time left
                // spent, leaving the rest for the transfer.
                let end = Instant::now() + Duration::from_millis(task.deadline_ms * 3 / 4);
                let mut rx = shared.changed.subscribe();
                loop {
                    let n = shared
                        .current
                        .lock()
                        .await
                        .as_ref()
                        .map_or(0, |c| c.by_silo.len());
                    let now = Instant::now();
                    if n >= task.expected as usize || now >= end {
                        break;
                    }
                    let _ = tokio::time::timeout(end - now, rx.changed()).await;
                }
                let by_silo = {
                    let mut cur = shared.current.lock().await;
                    cur.as_mut()
                        .map(|c| std::mem::take(&mut c.by_silo))
                        .unwrap_or_default()
                };
                // Privacy against the server rests on the batch holding at least the silos
                // the shuffle was calibrated for: a smaller one is withheld, never forwarded
                // (docs/shuffle.md "Dropouts over the network"). A round where every silo
                // refused (nothing to protect) is forwarded empty as before.
                // Who submitted goes to the server's round log (outside the permutation: it
                // names the participants, not which message is whose).
                let submitters: Vec<u32> = by_silo
                    .iter()
                    .filter(|(_, m)| !m.is_empty())
                    .map(|(&id, _)| id)
                    .collect();
                let submitted = submitters.len();
                if submitted > 0 && submitted < shared.quorum {
                    tracing::warn!(
                        round = task.round,
                        submitted,
                        quorum = shared.quorum,
                        "batch withheld: fewer silos than the shuffle's privacy was calibrated for"
                    );
                    let marker = Header {
                        status: RoundStatus::Refused as i32,
                        round: task.round,
                        epoch: task.epoch,
                        index: submitted as u32,
                        count: shared.quorum as u32,
                        submitted: submitters.clone(),
                        ..Default::default()
                    };
                    match client
                        .push_shuffled(tokio_stream::iter(codec::frames(marker, &[])))
                        .await
                    {
                        Ok(_) => batches += 1,
                        Err(e) => {
                            tracing::warn!(round = task.round, "withholding notice failed: {e}")
                        }
                    }
                    last = (task.epoch, i64::from(task.round));
                    continue;
                }
                let collected: Vec<Vec<u8>> = by_silo.into_values().flatten().collect();
                // Sealed messages are permuted unread; compact PVEC shares are summed and only
                // the sum is forwarded (`share`).
                let mut sum = crate::share::Accumulator::new(shared.dim);
                let mut messages = Vec::with_capacity(collected.len());
                for b in collected {
                    if crate::share::is_share_body(&b) {
                        // Checked on submission; a failure here is a bug, logged, never fatal.
                        if let Err(e) = sum.add(&b, task.round) {
                            tracing::warn!(round = task.round, "share dropped: {e}");
                        }
                    } else {
                        messages.push(b);
                    }
                }
                sampler::shuffle(&mut rng, &mut messages);
                messages.extend(sum.finish(task.round)?);
                crate::metrics::shuffler_batch(messages.len(), messages.iter().map(Vec::len).sum());
                let count = messages.len() as u32;
                let mut frames: Vec<Frame> = messages
                    .iter()
                    .enumerate()
                    .flat_map(|(i, m)| {
                        codec::frames(
                            Header {
                                round: task.round,
                                epoch: task.epoch,
                                index: i as u32,
                                count,
                                submitted: if i == 0 {
                                    submitters.clone()
                                } else {
                                    Vec::new()
                                },
                                ..Default::default()
                            },
                            m,
                        )
                    })
                    .collect();
                if frames.is_empty() {
                    // Every silo refused (or none answered): still say which round this is,
                    // or the server could take the empty batch for a later round's.
                    let empty = Header {
                        round: task.round,
                        epoch: task.epoch,
                        submitted: submitters.clone(),
                        ..Default::default()
                    };
                    frames = codec::frames(empty, &[]);
                }
                match client.push_shuffled(tokio_stream::iter(frames)).await {
                    Ok(r) => {
                        tracing::info!(round = task.round, forwarded = count, outcome = %r.get_ref().outcome, "batch forwarded");
                        batches += 1;
                    }
                    Err(e) => tracing::warn!(round = task.round, "forwarding failed: {e}"),
                }
                last = (task.epoch, i64::from(task.round));
            }
        }
        let _ = stop_tx.send(());
        let _ = tokio::time::timeout(Duration::from_secs(2), serve).await;
        Ok(batches)
    }
}

struct Service {
    shared: Arc<Shared>,
}

#[tonic::async_trait]
impl ShufflerRpc for Service {
    async fn submit(
        &self,
        req: Request<Streaming<Frame>>,
    ) -> std::result::Result<Response<PushReply>, Status> {
        let s = &self.shared;
        let name = crate::tls::peer_name(&req)?;
        let id = name
            .strip_prefix("silo-")
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|&i| (i as usize) < s.silos)
            .ok_or_else(|| {
                NetError::Denied(format!("{name:?} is not a silo of this federation"))
            })?;
        let mut stream = req.into_inner();
        let bodies = codec::read_bodies(
            &mut stream,
            codec::max_sealed_bytes(s.dim),
            codec::max_reply_messages(s.dim),
            codec::max_sealed_reply_bytes(s.dim),
        )
        .await
        .map_err(|e| {
            tracing::warn!(silo = id, "submission rejected: {e}");
            Status::from(e)
        })?;
        let Some(h) = bodies.first().map(|(h, _)| h.clone()) else {
            return Err(NetError::Rejected("empty submission".into()).into());
        };
        for (b, _) in &bodies {
            if b.silo_id != id {
                return Err(NetError::Denied(format!(
                    "certificate of silo {id} claims to be silo {}",
                    b.silo_id
                ))
                .into());
            }
            if (b.round, b.status) != (h.round, h.status) {
                return Err(
                    NetError::Rejected("a submission mixes rounds or statuses".into()).into(),
                );
            }
        }
        let refused = h.status == RoundStatus::Refused as i32;
        let sealed: Vec<Vec<u8>> = if refused {
            Vec::new()
        } else {
            bodies.into_iter().map(|(_, b)| b).collect()
        };
        // A compact PVEC share is checked now, so that a bad one is refused to its silo
        // instead of leaving the round's sums short of a user (`share`).
        let mut shares = 0;
        for b in sealed.iter().filter(|b| crate::share::is_share_body(b)) {
            shares += 1;
            if !s.shares {
                return Err(NetError::Rejected(
                    "a share body, but this federation's algorithm sends no PVEC shares".into(),
                )
                .into());
            }
            if let Err(e) = crate::share::decode(b, h.round, s.dim).and_then(|(c, _)| {
                (c == 1)
                    .then_some(())
                    .ok_or_else(|| NetError::Rejected(format!("a share body counting {c}")))
            }) {
                tracing::warn!(silo = id, "submission rejected: {e}");
                return Err(e.into());
            }
        }
        if shares > 1 {
            return Err(
                NetError::Rejected(format!("a submission of {shares} shuffler shares")).into(),
            );
        }
        // Wait (briefly) until this shuffler has learnt of the round. A round is its
        // (epoch, number): a restarted server re-opens its checkpoint's round in a new epoch,
        // and the silos' resends to it must wait for that batch, not fall into the old
        // epoch's batch of the same number (already forwarded or withheld, so lost).
        let mut rx = s.changed.subscribe();
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            {
                let mut cur = s.current.lock().await;
                if let Some(c) = cur.as_mut() {
                    if (c.epoch, c.round) == (h.epoch, h.round) {
                        if c.by_silo.contains_key(&id) {
                            return Ok(Response::new(PushReply {
                                outcome: "DUPLICATE".into(),
                                accepted: 0,
                            }));
                        }
                        c.by_silo.insert(id, sealed);
                        drop(cur);
                        s.changed.send_modify(|v| *v = v.wrapping_add(1));
                        return Ok(Response::new(PushReply {
                            outcome: "ACCEPTED".into(),
                            accepted: 1,
                        }));
                    }
                    if (c.epoch, c.round) > (h.epoch, h.round) {
                        return Ok(Response::new(PushReply {
                            outcome: "LATE".into(),
                            accepted: 0,
                        }));
                    }
                }
            }
            let now = Instant::now();
            if now >= end {
                return Err(Status::unavailable(format!(
                    "round {} is not being collected",
                    h.round
                )));
            }
            let _ = tokio::time::timeout(end - now, rx.changed()).await;
        }
    }
}
