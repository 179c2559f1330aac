//! Messages per second through the network shuffler (issue 15, speed): `SILOS` silos on
//! loopback (TLS 1.3, real sockets, one process, 2 tokio workers) each answer every round
//! with `PER_SILO` labelled one-bit messages (the explicit PVEC transport's message shape:
//! a label and one bit packed in one byte), each sealed on its own (HPKE) and sent to the
//! shuffler, which permutes the round's messages and forwards them to the server; the server
//! half only counts them. A message's path: silo encode + seal → TLS → shuffler → permute →
//! TLS → server open + decode.
//!
//! `cargo bench -p dpfl-net --profile test --bench shuffler`

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use dpfl::algo::{
    Broadcast, HalfState, PackedInts, Payload, Reply, Round, ServerHalf, SiloHalf, SiloMessage,
};
use dpfl::data::Dataset;
use dpfl_net::Federation;
use dpfl_privacy::{DpRng, PrivacyEvent};

const SILOS: usize = 8;
const PER_SILO: u32 = 1_000;

/// Answers with `PER_SILO` one-bit messages labelled 0, 1, … (bit = label parity).
struct Bits;
impl SiloHalf for Bits {
    fn round_event(&self, _: Round) -> Option<PrivacyEvent> {
        None
    }
    fn respond(&mut self, b: &Broadcast, d: &Dataset, r: &mut DpRng) -> dpfl::Result<SiloMessage> {
        Ok(self.respond_reply(b, d, r)?.messages.remove(0))
    }
    fn respond_reply(&mut self, b: &Broadcast, _: &Dataset, _: &mut DpRng) -> dpfl::Result<Reply> {
        let messages = (0..PER_SILO)
            .map(|k| {
                Ok(SiloMessage {
                    round: b.round,
                    payload: Payload::Labelled {
                        label: k,
                        payload: Box::new(Payload::Packed(PackedInts::pack(
                            1,
                            &[u64::from(k % 2)],
                        )?)),
                    },
                })
            })
            .collect::<dpfl::Result<Vec<_>>>()?;
        Ok(Reply {
            round: b.round,
            messages,
        })
    }
    fn noise_std(&self) -> f64 {
        0.0
    }
}

/// Counts the messages it is given.
struct Count(Arc<AtomicU64>);
impl ServerHalf for Count {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        Broadcast {
            round,
            point: vec![0.0],
            aux: vec![],
        }
    }
    fn aggregate(&mut self, _: Round, messages: &[SiloMessage]) -> dpfl::Result<()> {
        self.0.fetch_add(messages.len() as u64, Ordering::Relaxed);
        Ok(())
    }
    fn output(&self) -> Vec<f64> {
        vec![0.0]
    }
    fn dim(&self) -> usize {
        1
    }
    fn state(&self) -> HalfState {
        HalfState::default()
    }
    fn restore(&mut self, _: HalfState) -> dpfl::Result<()> {
        Ok(())
    }
}

fn federation_dir(dir: &Path) -> std::path::PathBuf {
    std::fs::write(
        dir.join("experiment.toml"),
        "name = \"bench\"\nrounds = 1\n[data]\nsource = { kind = \"synthetic\", task = \"regression\", silos = 2, train = 4, test = 2, features = 1 }\n[model]\nkind = \"linear\"\n[[algorithms]]\nkind = \"mb-sgd\"\nstep_size = 0.1\nbatch_size = 1\n",
    )
    .unwrap();
    dpfl_net::certs::dev_pki(&dir.join("certs"), SILOS).unwrap();
    let records = vec![1; SILOS];
    let text = format!(
        "experiment = \"experiment.toml\"\nseed = 1\n[public]\nrecords = {records:?}\nfeatures = 1\nlipschitz = 1.0\n\
         [server]\naddress = \"127.0.0.1:0\"\naddress_file = \"server.addr\"\nstate_dir = \"server\"\n\
         round_deadline_ms = 600000\nstart_timeout_ms = 600000\nheartbeat_timeout_ms = 600000\n\
         [shuffler]\naddress = \"127.0.0.1:0\"\naddress_file = \"shuffler.addr\"\n[tls]\ndir = \"certs\"\n"
    );
    let p = dir.join("federation.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs `rounds` rounds; returns the time from the first round's opening to the last
/// checkpoint and the messages the server aggregated.
fn network(rt: &tokio::runtime::Runtime, config: &Path, rounds: u64) -> (Duration, u64) {
    let dir = config.parent().unwrap();
    let _ = std::fs::remove_dir_all(dir.join("server"));
    for i in 0..SILOS {
        let _ = std::fs::remove_dir_all(dir.join(format!("silo-{i}")));
    }
    let _ = std::fs::remove_file(dir.join("server.addr"));
    let _ = std::fs::remove_file(dir.join("shuffler.addr"));
    rt.block_on(async {
        let planner = |e: &Path, a: usize, p: &dpfl_net::config::PublicFacts| {
            dpfl::experiment::plan_from_file(e, a, p.features, p.classes, &p.records, p.lipschitz)
        };
        let mut fed = Federation::load_with(config, Some(&planner)).unwrap();
        fed.plan.setup.rounds = rounds as usize;
        let count = Arc::new(AtomicU64::new(0));
        let server = dpfl_net::server::Server::bind(fed.clone()).await.unwrap();
        let handle = tokio::spawn(server.run_with(Box::new(Count(count.clone()))));
        let shuffler = dpfl_net::shuffler::ShufflerProcess::bind(fed.clone())
            .await
            .unwrap();
        let shuffler = tokio::spawn(shuffler.run());
        let silos: Vec<_> = (0..SILOS as u32)
            .map(|i| {
                let s = dpfl_net::silo::Silo::with_half(
                    fed.clone(),
                    i,
                    dpfl_testkit::tiny_silo(1),
                    Box::new(Bits),
                    1,
                )
                .unwrap();
                tokio::spawn(s.run())
            })
            .collect();
        let out = handle.await.unwrap().unwrap();
        for s in silos {
            let _ = s.await;
        }
        let _ = shuffler.await;
        (out.rounds_elapsed, count.load(Ordering::Relaxed))
    })
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = federation_dir(tmp.path());
    let per_round = SILOS as u64 * u64::from(PER_SILO);
    // One timed run first, outside criterion: messages/s and that every message arrived.
    let start = Instant::now();
    let (elapsed, got) = network(&rt, &config, 5);
    assert_eq!(got, 5 * per_round, "messages lost");
    println!(
        "shuffler: {got} messages in 5 rounds, {:.3} s in rounds ({:.3} s with set-up): {:.0} messages/s",
        elapsed.as_secs_f64(),
        start.elapsed().as_secs_f64(),
        got as f64 / elapsed.as_secs_f64()
    );
    let mut g = c.benchmark_group("shuffler");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Elements(per_round));
    g.bench_function(format!("round/{SILOS}x{PER_SILO}-one-bit-messages"), |b| {
        b.iter_custom(|iters| network(&rt, &config, iters.max(1)).0)
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
