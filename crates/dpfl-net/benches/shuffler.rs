//! Messages per second through the network shuffler (issue 15, speed): `SILOS` silos on
//! loopback (TLS 1.3, real sockets, one process, 2 tokio workers) each answer every round
//! with `PER_SILO` one-bit messages in the explicit PVEC transport's shape (`algo::shuffle::
//! pvec`: a one-hot `Payload::Sparse { indices: [label], values: [bit] }` of the model's
//! dimension), each sealed on its own (HPKE) and sent to the shuffler, which permutes the
//! round's messages and forwards them to the server; the server half only counts them. A
//! message's path: silo encode + seal → TLS → shuffler → permute → TLS → server open +
//! decode. (Explicit PVEC itself is refused over the network, `config.rs`: this measures the
//! transport it would use.)
//!
//! `cargo bench -p dpfl-net --profile test --bench shuffler` (first line: a timed 5-round
//! run, outside criterion; `RUST_LOG=info` shows the runtime's log).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

use dpfl::algo::{Broadcast, HalfState, Payload, Reply, Round, ServerHalf, SiloHalf, SiloMessage};
use dpfl::data::Dataset;
use dpfl_privacy::{DpRng, PrivacyEvent};

#[path = "common/federation.rs"]
mod federation;

const SILOS: usize = 8;
const PER_SILO: u32 = 1_000;
/// The plan's model dimension bounds the messages of one reply (`codec::max_reply_messages`,
/// about 9.6·d): at d = 256 a reply may hold 2479, room for `PER_SILO`. (At the d = 1 of the
/// first version the shuffler refused every reply, and the silos resent it for ever.)
const FEATURES: usize = 256;

/// Answers with `PER_SILO` one-bit messages: message k has label k mod d and bit k mod 2.
struct Bits {
    dim: usize,
}
impl SiloHalf for Bits {
    fn round_event(&self, _: Round) -> Option<PrivacyEvent> {
        None
    }
    fn respond(&mut self, b: &Broadcast, d: &Dataset, r: &mut DpRng) -> dpfl::Result<SiloMessage> {
        Ok(self.respond_reply(b, d, r)?.messages.remove(0))
    }
    fn respond_reply(&mut self, b: &Broadcast, _: &Dataset, _: &mut DpRng) -> dpfl::Result<Reply> {
        let messages = (0..PER_SILO)
            .map(|k| SiloMessage {
                round: b.round,
                payload: Payload::Sparse {
                    dim: self.dim as u32,
                    indices: vec![k % self.dim as u32],
                    values: vec![f64::from(k % 2)],
                },
            })
            .collect();
        Ok(Reply {
            round: b.round,
            messages,
        })
    }
    fn noise_std(&self) -> f64 {
        0.0
    }
}

/// Counts the messages it is given; its model is `dim` zeros.
struct Count {
    seen: Arc<AtomicU64>,
    dim: usize,
}
impl ServerHalf for Count {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        Broadcast {
            round,
            point: vec![0.0; self.dim],
            aux: vec![],
        }
    }
    fn aggregate(&mut self, _: Round, messages: &[SiloMessage]) -> dpfl::Result<()> {
        self.seen
            .fetch_add(messages.len() as u64, Ordering::Relaxed);
        Ok(())
    }
    fn output(&self) -> Vec<f64> {
        vec![0.0; self.dim]
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn state(&self) -> HalfState {
        HalfState::default()
    }
    fn restore(&mut self, _: HalfState) -> dpfl::Result<()> {
        Ok(())
    }
}

/// Runs `rounds` rounds; returns the time from the first round's opening to the last
/// checkpoint and the messages the server aggregated.
fn network(
    rt: &tokio::runtime::Runtime,
    config: &Path,
    dim: usize,
    rounds: u64,
) -> (Duration, u64) {
    let count = Arc::new(AtomicU64::new(0));
    let out = federation::run(
        rt,
        config,
        rounds,
        Box::new(Count {
            seen: count.clone(),
            dim,
        }),
        |_| Box::new(Bits { dim }),
        dim,
    );
    (out.rounds_elapsed, count.load(Ordering::Relaxed))
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = federation::federation_dir(tmp.path(), SILOS, FEATURES, true);
    let dim = federation::load(&config)
        .context()
        .expect("plan context")
        .federation
        .dim;
    assert!(
        PER_SILO as usize <= dpfl_net::codec::max_reply_messages(dim),
        "{PER_SILO} messages per reply exceed what the shuffler accepts at d = {dim}"
    );
    let per_round = SILOS as u64 * u64::from(PER_SILO);
    // One timed run first, outside criterion: messages/s and that every message arrived.
    let start = Instant::now();
    let (elapsed, got) = network(&rt, &config, dim, 5);
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
        b.iter_custom(|iters| network(&rt, &config, dim, iters.max(1)).0)
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
