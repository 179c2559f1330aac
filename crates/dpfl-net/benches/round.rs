//! Per-round overhead of the network runtime over the in-process simulator, 25 silos on
//! loopback (TLS 1.3, real sockets, one process), for d = 50 and d = 10^6, and bytes on the
//! wire per message against the raw payload.
//!
//! Both runners drive the same bare halves (each silo echoes the broadcast point, the server
//! averages), so the difference is the runtime's cost: encoding, TLS, gRPC, scheduling,
//! durable state writes and checkpoints.
//!
//! `cargo bench -p dpfl-net --bench round`

use std::path::Path;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

use dpfl::algo::{
    Broadcast, BuiltAlgorithm, HalfState, Payload, Round, ServerHalf, SiloHalf, SiloMessage,
};
use dpfl::data::{Dataset, SiloData};
use dpfl::sim::{Participation, Simulator};
use dpfl_privacy::{DpRng, PrivacyEvent};

#[path = "common/federation.rs"]
mod federation;

const SILOS: usize = 25;

struct Echo;
impl SiloHalf for Echo {
    fn round_event(&self, _: Round) -> Option<PrivacyEvent> {
        None
    }
    fn respond(&mut self, b: &Broadcast, _: &Dataset, _: &mut DpRng) -> dpfl::Result<SiloMessage> {
        let mut v = b.point.clone();
        v.iter_mut().for_each(|x| *x += 1.0);
        Ok(SiloMessage {
            round: b.round,
            payload: Payload::Dense(v),
        })
    }
    fn noise_std(&self) -> f64 {
        0.0
    }
}

struct Mean {
    w: Vec<f64>,
}
impl ServerHalf for Mean {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        Broadcast {
            round,
            point: self.w.clone(),
            aux: vec![],
        }
    }
    fn aggregate(&mut self, _: Round, messages: &[SiloMessage]) -> dpfl::Result<()> {
        if messages.is_empty() {
            return Ok(());
        }
        let mut acc = vec![0.0; self.w.len()];
        for m in messages {
            m.payload.add_to(1.0 / messages.len() as f64, &mut acc)?;
        }
        self.w = acc;
        Ok(())
    }
    fn output(&self) -> Vec<f64> {
        self.w.clone()
    }
    fn dim(&self) -> usize {
        self.w.len()
    }
    fn state(&self) -> HalfState {
        let mut s = HalfState::default();
        s.put("w", &self.w);
        s
    }
    fn restore(&mut self, s: HalfState) -> dpfl::Result<()> {
        if s.contains("w") {
            self.w = s.vector("w", self.w.len())?;
        }
        Ok(())
    }
}

fn tiny() -> SiloData {
    dpfl_testkit::tiny_silo(1)
}

/// Runs `rounds` network rounds at dimension `dim`; returns (time in rounds, bytes received
/// by the server per message, set-up included).
fn network(
    rt: &tokio::runtime::Runtime,
    config: &Path,
    dim: usize,
    rounds: u64,
) -> (Duration, f64) {
    let out = federation::run(
        rt,
        config,
        rounds,
        Box::new(Mean { w: vec![0.0; dim] }),
        |_| Box::new(Echo),
        dim,
    );
    let per_msg = out.wire.received() as f64 / (rounds as f64 * SILOS as f64);
    (out.rounds_elapsed, per_msg)
}

/// Whether the command line's filter (`-- "d=50$"`) selects dimension `dim`: the wire-size
/// runs and the set-up are not criterion benchmarks, so criterion's filter does not skip them.
fn selected(dim: usize) -> bool {
    // Criterion's options that take a value; the filter is the one other free argument.
    const VALUED: [&str; 12] = [
        "--warm-up-time",
        "--measurement-time",
        "--sample-size",
        "--save-baseline",
        "--baseline",
        "--baseline-lenient",
        "--profile-time",
        "--load-baseline",
        "--output-format",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filter = args
        .iter()
        .enumerate()
        .find(|(i, a)| !a.starts_with('-') && (*i == 0 || !VALUED.contains(&args[i - 1].as_str())));
    let Some((_, f)) = filter else {
        return true;
    };
    [
        format!("round/network/d={dim}"),
        format!("round/simulator/d={dim}"),
    ]
    .iter()
    .any(|name| match f.strip_suffix('$') {
        Some(f) => name.ends_with(f),
        None => name.contains(f.as_str()),
    })
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = federation::federation_dir(tmp.path(), SILOS, 1, false);
    let data: Vec<SiloData> = (0..SILOS).map(|_| tiny()).collect();
    let mut g = c.benchmark_group("round");
    g.sample_size(10).warm_up_time(Duration::from_secs(1));
    for dim in [50usize, 1_000_000] {
        if !selected(dim) {
            continue;
        }
        g.measurement_time(Duration::from_secs(if dim > 1000 { 30 } else { 5 }));
        let built = BuiltAlgorithm {
            server: Box::new(Mean { w: vec![0.0; dim] }),
            silos: (0..SILOS)
                .map(|_| Box::new(Echo) as Box<dyn SiloHalf>)
                .collect(),
            calibration: vec![],
        };
        let mut sim = Simulator::new(&data, built, Participation::All, Some(1)).unwrap();
        g.bench_function(format!("simulator/d={dim}"), |b| {
            b.iter(|| sim.step().unwrap())
        });
        g.bench_function(format!("network/d={dim}"), |b| {
            b.iter_custom(|iters| network(&rt, &config, dim, iters.max(1)).0)
        });
        // Bytes per message in steady state: the difference between a long and a short run,
        // so the one-off TLS handshakes and registrations (a few kB per silo) cancel out.
        let (short, long) = if dim > 1000 { (2, 4) } else { (20, 220) };
        let received = |rounds: u64| {
            let (_, per_msg) = network(&rt, &config, dim, rounds);
            per_msg * (rounds as f64 * SILOS as f64)
        };
        let (a, b) = (received(short), received(long));
        let marginal = (b - a) / ((long - short) as f64 * SILOS as f64);
        let payload = 8.0 * dim as f64;
        println!(
            "wire d={dim}: {marginal:.0} bytes received by the server per message in steady \
             state (payload {payload:.0} bytes, ratio {:.3}); {:.0} per message with the set-up \
             of a {long}-round run (ratio {:.3})",
            marginal / payload,
            b / (long as f64 * SILOS as f64),
            b / (long as f64 * SILOS as f64) / payload
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
