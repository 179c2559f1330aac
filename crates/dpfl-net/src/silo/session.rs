//! The silo's side of the connection: registering with the server, the session (HELLO, then
//! the rounds it is sent, each answered through [`Silo::answer`]), heartbeats, submissions to
//! the shuffler, and reconnecting after a lost server.

use std::time::Duration;

use tonic::transport::Channel;

use super::{Silo, SiloReport};
use crate::codec;
use crate::config::Federation;
use crate::error::{NetError, Result};
use crate::proto::federation_client::FederationClient;
use crate::proto::shuffler_client::ShufflerClient;
use crate::proto::{Frame, Header, RegisterRequest, Status as RoundStatus};

impl Silo {
    /// Runs until the server says training is over.
    pub async fn run(mut self) -> Result<SiloReport> {
        let mut report = SiloReport::default();
        let tls_dir = self.fed.tls_dir();
        let name = format!("silo-{}", self.id);
        let server_name = self.fed.config.server.server_name.clone();
        let mut retry = crate::retry::Retry::new(
            format!("silo {}", self.id),
            "the server",
            self.connect_timeout,
        );
        'connect: loop {
            let Some(addr) = self.fed.server_address()? else {
                let file = self.fed.config.server.address_file.as_deref();
                let file = file.map(|f| self.fed.path(f).display().to_string());
                retry
                    .failed(
                        &self.fed.config.server.address,
                        &format!("no address file {} yet", file.unwrap_or_default()),
                    )
                    .await?;
                continue;
            };
            let endpoint = crate::tls::client_endpoint(
                &addr,
                &tls_dir,
                &name,
                &self.fed.config.server.server_name,
            )?;
            let channel = match endpoint.connect().await {
                Ok(c) => c,
                Err(e) => {
                    retry
                        .failed(&addr, &crate::retry::reason(&e, &server_name))
                        .await?;
                    continue;
                }
            };
            let mut client = FederationClient::new(channel.clone())
                .max_decoding_message_size(2 * codec::CHUNK_BYTES)
                .max_encoding_message_size(2 * codec::CHUNK_BYTES);
            let reg = match client.register(RegisterRequest { silo_id: self.id }).await {
                Ok(r) => r.into_inner(),
                Err(e) if e.code() == tonic::Code::PermissionDenied => {
                    return Err(NetError::Denied(e.message().to_string()));
                }
                Err(e) => {
                    retry
                        .failed(&addr, &crate::retry::reason(&e, &server_name))
                        .await?;
                    continue;
                }
            };
            retry.connected();
            if reg.dim as usize != self.dim {
                return Err(NetError::config(
                    "public",
                    format!(
                        "server model has dimension {}, this silo {}",
                        reg.dim, self.dim
                    ),
                ));
            }
            // The session: frames to the server go through `tx`; heartbeats share it.
            let (tx, rx) = tokio::sync::mpsc::channel::<Frame>(8);
            let hello = Header {
                status: RoundStatus::Hello as i32,
                silo_id: self.id,
                ..Default::default()
            };
            let _ = tx.send(header_frame(hello)).await;
            let heartbeat = spawn_heartbeat(
                tx.clone(),
                self.id,
                Duration::from_millis(self.fed.config.silo.heartbeat_ms),
            );
            let mut shuffler = None;
            let result: Result<bool> = async {
                let mut inbound = client
                    .session(tokio_stream::wrappers::ReceiverStream::new(rx))
                    .await?
                    .into_inner();
                let limit = 64 + 8 * (self.dim as u64) * 8;
                loop {
                    let Some((h, body)) = codec::next_body(&mut inbound, limit).await? else {
                        return Err(NetError::Transport("the server closed the session".into()));
                    };
                    match RoundStatus::try_from(h.status) {
                        Ok(RoundStatus::Done) => return Ok(true),
                        Ok(RoundStatus::Round) => {}
                        _ => continue,
                    }
                    let seal_to = reg.shuffle.then_some(reg.hpke_public_key.as_slice());
                    // The ledger charge and the state write end in fsyncs: off the async
                    // workers, so that many silos in one process sync in parallel.
                    let answer = if tokio::runtime::Handle::current().runtime_flavor()
                        == tokio::runtime::RuntimeFlavor::MultiThread
                    {
                        tokio::task::block_in_place(|| self.answer(&body, h.round, seal_to))?
                    } else {
                        self.answer(&body, h.round, seal_to)?
                    };
                    let mut header = Header {
                        round: h.round,
                        silo_id: self.id,
                        epoch: h.epoch,
                        ..Default::default()
                    };
                    let Some((bodies, resent)) = answer else {
                        report.refused.push(h.round);
                        header.status = RoundStatus::Refused as i32;
                        send(&tx, codec::frames(header.clone(), &[])).await?;
                        if reg.shuffle {
                            // So that the shuffler does not hold the batch for this silo. Best
                            // effort and in the background: when every selected silo refuses,
                            // the server closes the round before the shuffler hears of it.
                            let mut sh = shuffler_client(&mut shuffler, &self.fed, &name).await?;
                            let frames = codec::frames(header, &[]);
                            tokio::spawn(async move {
                                let _ = sh.submit(tokio_stream::iter(frames)).await;
                            });
                        }
                        continue;
                    };
                    if resent {
                        tracing::info!(
                            silo = self.id,
                            round = h.round,
                            "resending the stored message"
                        );
                        report.resent.push(h.round);
                    } else {
                        report.answered.push(h.round);
                    }
                    if reg.shuffle {
                        // One submission: every sealed message of the reply, indexed.
                        let count = bodies.len() as u32;
                        let frames = bodies
                            .iter()
                            .enumerate()
                            .flat_map(|(i, b)| {
                                let h = Header {
                                    index: i as u32,
                                    count,
                                    ..header.clone()
                                };
                                codec::frames(h, b)
                            })
                            .collect();
                        submit(&mut shuffler, &self.fed, &name, frames)
                            .await
                            .map_err(|e| permanent_rejection(e, h.round))?;
                    } else {
                        header.status = RoundStatus::Message as i32;
                        for b in &bodies {
                            send(&tx, codec::frames(header.clone(), b)).await?;
                        }
                    }
                }
            }
            .await;
            heartbeat.abort();
            match result {
                Ok(true) => break 'connect,
                Ok(false) => {}
                Err(NetError::Rpc(s)) if s.code() == tonic::Code::PermissionDenied => {
                    return Err(NetError::Denied(s.message().to_string()));
                }
                Err(e @ (NetError::Rpc(_) | NetError::Transport(_))) => {
                    tracing::info!(silo = self.id, "connection lost ({e}); reconnecting");
                    // The timeout counts from the loss: a restarted server has that long.
                    retry.connected();
                }
                Err(e) => return Err(e),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(report)
    }
}

fn header_frame(h: Header) -> Frame {
    Frame {
        part: Some(crate::proto::frame::Part::Header(h)),
    }
}

async fn send(tx: &tokio::sync::mpsc::Sender<Frame>, frames: Vec<Frame>) -> Result<()> {
    for f in frames {
        tx.send(f)
            .await
            .map_err(|_| NetError::Transport("the session's stream is closed".into()))?;
    }
    Ok(())
}

fn spawn_heartbeat(
    tx: tokio::sync::mpsc::Sender<Frame>,
    id: u32,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let h = Header {
                status: RoundStatus::Heartbeat as i32,
                silo_id: id,
                ..Default::default()
            };
            if tx.send(header_frame(h)).await.is_err() {
                return;
            }
        }
    })
}

/// The shuffler client, connecting on first use.
async fn shuffler_client(
    shuffler: &mut Option<ShufflerClient<Channel>>,
    fed: &Federation,
    name: &str,
) -> Result<ShufflerClient<Channel>> {
    if let Some(sh) = shuffler {
        return Ok(sh.clone());
    }
    let sh = connect_shuffler(fed, name).await?;
    *shuffler = Some(sh.clone());
    Ok(sh)
}

/// Submits frames to the shuffler, connecting on first use.
async fn submit(
    shuffler: &mut Option<ShufflerClient<Channel>>,
    fed: &Federation,
    name: &str,
    frames: Vec<Frame>,
) -> Result<()> {
    let sh = shuffler_client(shuffler, fed, name).await?;
    send_with_retry(|| {
        let mut sh = sh.clone();
        let frames = frames.clone();
        async move { sh.submit(tokio_stream::iter(frames)).await }
    })
    .await
}

async fn connect_shuffler(fed: &Federation, name: &str) -> Result<ShufflerClient<Channel>> {
    let server_name = fed
        .config
        .shuffler
        .as_ref()
        .map(|s| s.server_name.clone())
        .unwrap_or_default();
    // The shuffler is up by the time a round reaches a silo: a short, bounded wait.
    let mut retry = crate::retry::Retry::new(name, "the shuffler", Duration::from_secs(10));
    loop {
        let Some(addr) = fed.shuffler_address()? else {
            retry
                .failed("(address file)", "no address file yet")
                .await?;
            continue;
        };
        let ep = crate::tls::client_endpoint(&addr, &fed.tls_dir(), name, &server_name)?;
        match ep.connect().await {
            Ok(c) => {
                return Ok(ShufflerClient::new(c)
                    .max_decoding_message_size(2 * codec::CHUNK_BYTES)
                    .max_encoding_message_size(2 * codec::CHUNK_BYTES));
            }
            Err(e) => {
                retry
                    .failed(&addr, &crate::retry::reason(&e, &server_name))
                    .await?
            }
        }
    }
}

/// A submission the shuffler refused for its content (too many or too large messages, a bad
/// share) is refused again when the stored reply is resent, so reconnecting and resending
/// would loop for ever, burning CPU while the round waits for its deadline (what the network
/// shuffler's benchmark did with 1000-message replies at d = 1). The silo stops instead, with
/// the shuffler's reason. A transport failure stays an `Rpc` error: the caller reconnects.
fn permanent_rejection(e: NetError, round: u32) -> NetError {
    match e {
        NetError::Rpc(s)
            if matches!(
                s.code(),
                tonic::Code::InvalidArgument
                    | tonic::Code::ResourceExhausted
                    | tonic::Code::OutOfRange
                    | tonic::Code::FailedPrecondition
            ) =>
        {
            NetError::Rejected(format!(
                "the shuffler refused this silo's reply to round {round} ({:?}: {}); the stored \
                 reply would be refused again, so the silo stops",
                s.code(),
                s.message()
            ))
        }
        e => e,
    }
}

/// Sends, retrying while the receiver is not ready for the round yet.
async fn send_with_retry<F, Fut>(mut f: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<
        Output = std::result::Result<tonic::Response<crate::proto::PushReply>, tonic::Status>,
    >,
{
    let mut wait = Duration::from_millis(50);
    for _ in 0..40 {
        match f().await {
            Ok(_) => return Ok(()),
            Err(s) if s.code() == tonic::Code::Unavailable => {
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_millis(500));
            }
            Err(s) => return Err(s.into()),
        }
    }
    Err(NetError::Transport("receiver unavailable".into()))
}
