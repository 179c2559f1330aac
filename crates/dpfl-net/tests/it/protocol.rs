//! The server against hostile or broken peers, in-process over real TLS on 127.0.0.1 (port 0):
//! refused certificates, oversized, wrong-dimension, duplicated and tampered messages. Each
//! rejection is logged and the round still completes with the good messages.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use dpfl::algo::{Payload, Round, SiloMessage};
use dpfl_net::codec;
use dpfl_net::proto::federation_client::FederationClient;
use dpfl_net::proto::{Frame, Header, PullRequest, RegisterRequest, Status as RoundStatus};
use dpfl_net::server::{Server, ServerOutcome};
use dpfl_net::silo::Start;
use tokio::sync::mpsc::Sender;
use tonic::Streaming;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

const EXPERIMENT: &str = r#"
name = "net-protocol"
rounds = 1
seed = 3
[data]
source = { kind = "synthetic", task = "binary", silos = 2, train = 10, test = 5, features = 3 }
[model]
kind = "logistic"
[[algorithms]]
kind = "mb-sgd"
step_size = 0.5
batch_size = 5
output = "last"
"#;

/// A federation directory with certificates for two silos; returns its federation file.
fn federation(dir: &Path, shuffle: bool) -> PathBuf {
    std::fs::write(dir.join("experiment.toml"), EXPERIMENT).unwrap();
    dpfl_net::certs::dev_pki(&dir.join("certs"), 2).unwrap();
    let shuffler = if shuffle {
        "[shuffler]\naddress = \"127.0.0.1:0\"\n"
    } else {
        ""
    };
    let text = format!(
        "experiment = \"experiment.toml\"\nseed = 3\n[public]\nrecords = [10, 10]\nfeatures = 3\n\
         classes = 2\nlipschitz = 1.0\n[server]\naddress = \"127.0.0.1:0\"\n\
         state_dir = \"server\"\nround_deadline_ms = 20000\nstart_timeout_ms = 20000\n\
         heartbeat_timeout_ms = 20000\n{shuffler}[tls]\ndir = \"certs\"\n"
    );
    let p = dir.join("federation.toml");
    std::fs::write(&p, text).unwrap();
    p
}

async fn start(
    config: &Path,
) -> (
    String,
    usize,
    tokio::task::JoinHandle<dpfl_net::Result<ServerOutcome>>,
) {
    let fed = common::load(config);
    let dim = fed.context().unwrap().federation.dim;
    let server = Server::bind(fed).await.unwrap();
    let addr = server.local_addr().unwrap().to_string();
    (addr, dim, tokio::spawn(server.run()))
}

async fn client(addr: &str, dir: &Path, name: &str) -> FederationClient<Channel> {
    let ep = dpfl_net::tls::client_endpoint(addr, &dir.join("certs"), name, "localhost").unwrap();
    FederationClient::new(ep.connect().await.unwrap())
}

fn message(round: u32, dim: usize, value: f64) -> Vec<u8> {
    codec::encode_message(&SiloMessage {
        round: Round::new(round),
        payload: Payload::Dense(vec![value; dim]),
    })
}

/// A silo's message for `round` as session frames.
fn frames(silo: u32, round: u32, body: &[u8]) -> Vec<Frame> {
    codec::frames(
        Header {
            status: RoundStatus::Message as i32,
            round,
            silo_id: silo,
            ..Default::default()
        },
        body,
    )
}

fn header(h: Header) -> Frame {
    Frame {
        part: Some(dpfl_net::proto::frame::Part::Header(h)),
    }
}

/// Opens a session as silo `id`: the sender of its frames and the server's frames.
async fn session(c: &mut FederationClient<Channel>, id: u32) -> (Sender<Frame>, Streaming<Frame>) {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let hello = Header {
        status: RoundStatus::Hello as i32,
        silo_id: id,
        ..Default::default()
    };
    tx.send(header(hello)).await.unwrap();
    let inbound = c
        .session(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    (tx, inbound)
}

async fn send(tx: &Sender<Frame>, frames: Vec<Frame>) {
    for f in frames {
        tx.send(f).await.unwrap();
    }
}

/// The next body the server sends on a session.
async fn next(inbound: &mut Streaming<Frame>) -> dpfl_net::Result<(Header, Vec<u8>)> {
    let got = tokio::time::timeout(Duration::from_secs(30), codec::next_body(inbound, 1 << 20))
        .await
        .expect("the server answers");
    got.map(|b| b.expect("the session is open"))
}

/// A silo connection with its open session.
struct SiloConn {
    client: FederationClient<Channel>,
    tx: Sender<Frame>,
    inbound: Streaming<Frame>,
}

/// A fresh non-shuffle federation in `dir` whose two silos registered, opened sessions and
/// received round 0's broadcast; returns the model dimension, the server and the silos.
async fn round_zero(
    dir: &Path,
) -> (
    usize,
    tokio::task::JoinHandle<dpfl_net::Result<ServerOutcome>>,
    [SiloConn; 2],
) {
    let config = federation(dir, false);
    let (addr, dim, handle) = start(&config).await;
    let mut conns = Vec::new();
    for id in 0..2u32 {
        let mut client = client(&addr, dir, &format!("silo-{id}")).await;
        client
            .register(RegisterRequest { silo_id: id })
            .await
            .unwrap();
        let (tx, inbound) = session(&mut client, id).await;
        conns.push(SiloConn {
            client,
            tx,
            inbound,
        });
    }
    // Round 0 opens once both have a session.
    for c in &mut conns {
        let (h, _) = next(&mut c.inbound).await.unwrap();
        assert_eq!(h.status, RoundStatus::Round as i32);
        assert_eq!(h.round, 0);
    }
    let [a, b]: [SiloConn; 2] = conns.try_into().ok().unwrap();
    (dim, handle, [a, b])
}

async fn finish(h: tokio::task::JoinHandle<dpfl_net::Result<ServerOutcome>>) -> ServerOutcome {
    tokio::time::timeout(Duration::from_secs(60), h)
        .await
        .expect("server finishes")
        .expect("join")
        .expect("server run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_without_a_federation_certificate_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = federation(dir, false);
    let (addr, _, handle) = start(&config).await;
    let ca = std::fs::read(dir.join("certs/ca.pem")).unwrap();

    // Is a call with this TLS configuration refused?
    async fn refused(addr: &str, tls: ClientTlsConfig) -> bool {
        let ep = dpfl_net::tls::client_endpoint_with(addr, tls).unwrap();
        match ep.connect().await {
            Err(_) => true,
            Ok(ch) => FederationClient::new(ch)
                .register(RegisterRequest { silo_id: 0 })
                .await
                .is_err(),
        }
    }
    // No client certificate.
    let none = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&ca))
        .domain_name("localhost");
    assert!(refused(&addr, none).await, "client without a certificate");
    // A certificate named silo-0, but from another CA.
    let foreign = tempfile::tempdir().unwrap();
    dpfl_net::certs::init_ca(foreign.path(), false).unwrap();
    dpfl_net::certs::issue(foreign.path(), foreign.path(), "silo-0", &[], false).unwrap();
    let read = |p: PathBuf| std::fs::read(p).unwrap();
    let forged = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&ca))
        .identity(Identity::from_pem(
            read(foreign.path().join("silo-0.pem")),
            read(foreign.path().join("silo-0.key")),
        ))
        .domain_name("localhost");
    assert!(refused(&addr, forged).await, "certificate of a foreign CA");

    // A genuine silo-1 may not speak for silo 0.
    let mut silo1 = client(&addr, dir, "silo-1").await;
    let e = silo1
        .register(RegisterRequest { silo_id: 0 })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
    // The shuffler's certificate cannot register as a silo.
    let mut sh = client(&addr, dir, "shuffler").await;
    assert!(sh.register(RegisterRequest { silo_id: 0 }).await.is_err());
    // The genuine silo-0 is accepted, which shows the refusals above are not a broken setup.
    let mut silo0 = client(&addr, dir, "silo-0").await;
    let reply = silo0
        .register(RegisterRequest { silo_id: 0 })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.silos, 2);
    handle.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_are_rejected_and_the_round_completes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (dim, handle, [c0, c1]) = round_zero(dir).await;
    let SiloConn {
        client: mut s0,
        tx: tx0,
        inbound: mut in0,
    } = c0;

    // Oversized: the announced length is refused before any data is read, and the session
    // ends with the reason.
    let huge = Header {
        status: RoundStatus::Message as i32,
        round: 0,
        silo_id: 0,
        // A session body is a reply: up to `REPLY_WEIGHT` largest messages.
        body_len: codec::max_reply_bytes(dim) + 1,
        ..Default::default()
    };
    tx0.send(header(huge)).await.unwrap();
    let e = next(&mut in0).await.unwrap_err().to_string();
    assert!(e.contains("exceeds the limit"), "{e}");
    // The silo reconnects and is offered round 0 again.
    let (tx0, mut in0) = session(&mut s0, 0).await;
    assert_eq!(next(&mut in0).await.unwrap().0.round, 0);
    // Wrong dimension and a garbage body: rejected, counted, the session goes on.
    send(&tx0, frames(0, 0, &message(0, dim + 1, 0.5))).await;
    send(&tx0, frames(0, 0, b"not a message")).await;
    // A body shorter than announced (a new header arrives before it is complete) ends the
    // session.
    let mut short = frames(0, 0, &message(0, dim, 0.5));
    if let Some(dpfl_net::proto::frame::Part::Header(h)) = short[0].part.as_mut() {
        h.body.truncate(8);
    }
    send(&tx0, short).await;
    send(&tx0, frames(0, 0, &message(0, dim, 0.5))).await;
    let e = next(&mut in0).await.unwrap_err().to_string();
    assert!(e.contains("missing"), "{e}");
    // A good message, then the same again: the duplicate is ignored.
    let (tx0, _in0) = session(&mut s0, 0).await;
    send(&tx0, frames(0, 0, &message(0, dim, 0.5))).await;
    send(&tx0, frames(0, 0, &message(0, dim, 9.0))).await;
    // Silo 1 answers; the round completes with both good messages.
    send(&c1.tx, frames(1, 0, &message(0, dim, 0.5))).await;
    let out = finish(handle).await;
    assert!(out.finished());
    assert_eq!(out.log.len(), 1);
    assert_eq!(out.log[0].participants, 2);
    assert_eq!(out.log[0].rejected, 2, "wrong dimension and garbage");
    // MB-SGD from w = 0 with step 0.5 on the mean message 0.5: w = -0.25 everywhere; the
    // duplicate (9.0) did not count.
    assert!(out.model.iter().all(|&w| w == -0.25), "{:?}", out.model);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_ciphertext_byte_is_rejected_in_shuffle_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = federation(dir, true);
    let (addr, dim, handle) = start(&config).await;
    let mut s0 = client(&addr, dir, "silo-0").await;
    let mut s1 = client(&addr, dir, "silo-1").await;
    let reg = s0
        .register(RegisterRequest { silo_id: 0 })
        .await
        .unwrap()
        .into_inner();
    assert!(reg.shuffle);
    s1.register(RegisterRequest { silo_id: 1 }).await.unwrap();
    // The round opens once both silos have a session.
    let _s0 = session(&mut s0, 0).await;
    let _s1 = session(&mut s1, 1).await;
    let mut sh = client(&addr, dir, "shuffler").await;
    // Silos may not act as the shuffler.
    let e = s0
        .pull_shuffle_round(PullRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::PermissionDenied);
    let round = sh
        .pull_shuffle_round(PullRequest {
            last_round: -1,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(round.status, RoundStatus::Round as i32);
    assert_eq!(round.expected, 2);
    // Batches for another round or from another epoch (a restarted server's predecessor),
    // empty or not, are never taken for this round's.
    for (r, e) in [(1, round.epoch), (0, round.epoch + 7)] {
        let empty = codec::frames(
            Header {
                round: r,
                epoch: e,
                ..Default::default()
            },
            &[],
        );
        let reply = sh.push_shuffled(tokio_stream::iter(empty)).await.unwrap();
        assert_eq!(reply.into_inner().outcome, "LATE", "round {r} epoch {e}");
    }
    // A batch that names no round at all is refused.
    let none: Vec<Frame> = Vec::new();
    assert!(sh.push_shuffled(tokio_stream::iter(none)).await.is_err());
    let pk = reg.hpke_public_key;
    let good = dpfl_net::seal::seal(&pk, 0, &message(0, dim, 0.5)).unwrap();
    let mut bad = dpfl_net::seal::seal(&pk, 0, &message(0, dim, 0.5)).unwrap();
    let last = bad.len() - 5;
    bad[last] ^= 0x01;
    let batch: Vec<Frame> = [&bad, &good]
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            codec::frames(
                Header {
                    round: 0,
                    epoch: round.epoch,
                    index: i as u32,
                    count: 2,
                    ..Default::default()
                },
                m,
            )
        })
        .collect();
    let reply = sh
        .push_shuffled(tokio_stream::iter(batch))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.accepted, 1, "the tampered message is rejected");
    // A replayed batch is ignored.
    let again = sh
        .push_shuffled(tokio_stream::iter(codec::frames(
            Header {
                round: 0,
                epoch: round.epoch,
                count: 1,
                ..Default::default()
            },
            &good,
        )))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.outcome, "LATE");
    let out = finish(handle).await;
    assert_eq!(out.log[0].participants, 1);
    assert_eq!(out.log[0].rejected, 1);
    assert!(out.model.iter().all(|&w| w == -0.25), "{:?}", out.model);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_or_abandoned_round_is_not_waited_for() {
    // Silo 1's ledger refuses round 0: it says so and keeps its session open.
    let tmp = tempfile::tempdir().unwrap();
    let (dim, handle, [c0, c1]) = round_zero(tmp.path()).await;
    let refused = Header {
        status: RoundStatus::Refused as i32,
        round: 0,
        silo_id: 1,
        ..Default::default()
    };
    c1.tx.send(header(refused)).await.unwrap();
    send(&c0.tx, frames(0, 0, &message(0, dim, 0.5))).await;
    let out = finish(handle).await;
    assert_eq!(out.log[0].participants, 1);
    assert_eq!(out.log[0].rejected, 0);
    // The deadline is 20 s and heartbeats time out after 20 s: the round closed on the
    // refusal, not on a timeout.
    assert!(out.log[0].seconds < 10.0, "{:?}", out.log[0]);
    drop((c0, c1));

    // Same, but silo 1 simply goes away: its closed session is not waited for either.
    let tmp = tempfile::tempdir().unwrap();
    let (dim, handle, [c0, c1]) = round_zero(tmp.path()).await;
    drop(c1);
    send(&c0.tx, frames(0, 0, &message(0, dim, 0.5))).await;
    let out = finish(handle).await;
    assert_eq!(out.log[0].participants, 1);
    assert!(out.log[0].seconds < 10.0, "{:?}", out.log[0]);
}

#[test]
fn a_silo_never_answers_a_round_older_than_its_last() {
    // A server that asks for an old round again would get a second, freshly noised release
    // that no ledger counts (ledgers charge once per round number): the silo refuses.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let config = federation(dir, false);
    let private = EXPERIMENT.replace("rounds = 1", "rounds = 3").replace(
        "[[algorithms]]",
        "[privacy]\nepsilon = 1.0\ndelta = 1e-3\nlipschitz = 1.0\n[[algorithms]]\ncalibration = \"experiment\"",
    );
    std::fs::write(dir.join("experiment.toml"), private).unwrap();
    let fed = common::load(&config);
    // Silo 0's data (the experiment is seeded: the same every time).
    let data = |spec: &dpfl_lab::experiment::ExperimentSpec| {
        let mut master = dpfl_lab::experiment::master_rng(spec).unwrap();
        let (trial, _) = dpfl_lab::experiment::next_trial(spec, None, &mut master).unwrap();
        trial.silos.into_iter().next().unwrap()
    };
    let dim = fed.context().unwrap().federation.dim;
    let d0 = data(
        &dpfl_lab::experiment::ExperimentSpec::from_file(&dir.join("experiment.toml")).unwrap(),
    );
    let mut silo = dpfl_net::silo::Silo::new(fed, 0, d0, Start::Fresh).unwrap();
    let broadcast = |round| {
        codec::encode_broadcast(&dpfl::algo::Broadcast {
            round: Round::new(round),
            point: vec![0.0; dim],
            aux: vec![],
        })
    };
    let (m0, resent) = silo.answer(&broadcast(0), 0, None).unwrap().unwrap();
    assert!(!resent);
    // Asked again for round 0 (a restarted server): exactly the stored bytes.
    assert_eq!(
        silo.answer(&broadcast(0), 0, None).unwrap(),
        Some((m0.clone(), true))
    );
    let (m1, _) = silo.answer(&broadcast(1), 1, None).unwrap().unwrap();
    assert_ne!(m0, m1);
    // Round 0 again after round 1: refused, nothing new released or charged.
    assert_eq!(silo.answer(&broadcast(0), 0, None).unwrap(), None);
    assert_eq!(silo.charged_rounds(), vec![0, 1]);
    // A restarted silo process remembers: still refused.
    drop(silo);
    let fed = common::load(&config);
    let d0 = data(
        &dpfl_lab::experiment::ExperimentSpec::from_file(&dir.join("experiment.toml")).unwrap(),
    );
    let mut silo = dpfl_net::silo::Silo::new(fed, 0, d0, Start::Resume).unwrap();
    assert_eq!(silo.answer(&broadcast(0), 0, None).unwrap(), None);
    assert_eq!(
        silo.answer(&broadcast(1), 1, None).unwrap(),
        Some((m1, true))
    );
}
