//! Issue 15 speed targets: the table Binomial sampler at n = 10⁸ (target ≥ 10⁷ draws/s) and
//! one PVEC round in the compact transport at d = 10⁴, n = 10³ users (target < 1 s:
//! randomize, share, aggregate both sides, reveal and analyze).
//!
//! Run: `cargo bench -p dpfl-privacy --bench shuffle` (add `--profile test` to reuse the test
//! build's artifacts).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dpfl_privacy::binomial::Binomial;
use dpfl_privacy::rng::{DpRng, Purpose};
use dpfl_privacy::shuffle::params::{PvecParams, Scale};
use dpfl_privacy::shuffle::protocol::{
    Message, Pvec, compact_round, explicit_round, shuffle_messages,
};
use std::hint::black_box;

const DRAWS: usize = 100_000;

fn binomial(c: &mut Criterion) {
    let mut g = c.benchmark_group("binomial");
    g.throughput(Throughput::Elements(DRAWS as u64));
    for (n, p) in [(100_000_000u64, 0.5), (100_000_000, 0.01), (1_000, 0.3)] {
        let b = Binomial::new(n, p).unwrap();
        let mut rng = DpRng::from_seed(1, Purpose::Silo, 0);
        g.bench_function(format!("sample/n={n:e}/p={p}"), |bch| {
            bch.iter(|| {
                let mut s = 0u64;
                for _ in 0..DRAWS {
                    s = s.wrapping_add(b.sample(&mut rng));
                }
                black_box(s)
            })
        });
    }
    // The block form PVEC uses (one generator fill per 256 draws).
    let b = Binomial::new(100_000_000, 0.5).unwrap();
    let mut rng = DpRng::from_seed(1, Purpose::Silo, 0);
    let mut out = vec![0u64; DRAWS];
    g.bench_function("sample_into/n=1e8/p=0.5", |bch| {
        bch.iter(|| {
            b.sample_into(&mut rng, &mut out);
            black_box(out[0])
        })
    });
    g.finish();
    let mut g = c.benchmark_group("binomial-setup");
    g.sample_size(10);
    g.bench_function("new/n=1e8/p=0.5", |bch| {
        bch.iter(|| black_box(Binomial::new(100_000_000, 0.5).unwrap()))
    });
    g.finish();
}

fn pvec(c: &mut Criterion) {
    let (n, d) = (1_000usize, 10_000usize);
    let params = PvecParams::calibrate(n as u64, d, 1.0, 1.0, 1e-6, Scale::Unit).unwrap();
    eprintln!(
        "PVEC d = {d}, n = {n}: g = {}, s = {}, p = {:.6}",
        params.p1d.g, params.p1d.s, params.p1d.p
    );
    let pv = Pvec::new(params).unwrap();
    let mut data = DpRng::from_seed(9, Purpose::Data, 0);
    let inputs: Vec<Vec<f64>> = (0..n)
        .map(|_| {
            let v: Vec<f64> = (0..d)
                .map(|_| data.next_seed() as f64 / u64::MAX as f64 - 0.5)
                .collect();
            let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            v.into_iter().map(|x| x / norm).collect()
        })
        .collect();
    let mut rngs: Vec<DpRng> = (0..n as u32)
        .map(|i| DpRng::from_seed(3, Purpose::Silo, i))
        .collect();
    // Wall and CPU time of three rounds outside criterion: on a shared machine the wall time
    // measures the scheduler; the process's CPU time (user + system, both threads) is what
    // the round costs.
    let (wall, cpu) = (std::time::Instant::now(), cpu_seconds());
    for _ in 0..3 {
        black_box(compact_round(&pv, &inputs, &mut rngs).unwrap());
    }
    eprintln!(
        "PVEC compact round: {:.3} s wall, {:.3} s CPU (mean of 3)",
        wall.elapsed().as_secs_f64() / 3.0,
        cpu.map_or(f64::NAN, |c| (cpu_seconds().unwrap_or(f64::NAN) - c) / 3.0)
    );
    let mut g = c.benchmark_group("pvec-compact");
    g.sample_size(10);
    g.throughput(Throughput::Elements((n * d) as u64));
    g.bench_function("round/d=1e4/n=1e3", |bch| {
        bch.iter(|| black_box(compact_round(&pv, &inputs, &mut rngs).unwrap()))
    });
    g.finish();
}

/// This process's user + system CPU time from /proc/self/stat (Linux; clock ticks of 1/100 s).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Explicit mode: messages per second through the shuffler (Fisher–Yates over one round's
/// labelled bits) and through a whole explicit PVEC round (randomize, emit, shuffle, tally).
fn explicit(c: &mut Criterion) {
    let total = 1usize << 20;
    let mut msgs: Vec<Message> = (0..total)
        .map(|i| Message {
            label: (i % 16) as u32,
            bit: i % 3 == 0,
        })
        .collect();
    let mut rng = DpRng::from_seed(4, Purpose::Shuffle, 0);
    let mut g = c.benchmark_group("explicit");
    g.sample_size(10);
    g.throughput(Throughput::Elements(total as u64));
    g.bench_function("shuffle/2^20 messages", |bch| {
        bch.iter(|| {
            shuffle_messages(&mut msgs, &mut rng);
            black_box(msgs[0])
        })
    });
    // n = 64 users, d = 16, g + s = 1024 bits each: 2^20 messages per round.
    let (n, d) = (64usize, 16usize);
    let params = PvecParams::with_p1d(n as u64, d, 1.0, Scale::Unit, 24, 1000, 0.25).unwrap();
    let pv = Pvec::new(params).unwrap();
    let inputs: Vec<Vec<f64>> = (0..n)
        .map(|i| vec![0.2 * ((i % 5) as f64 - 2.0) / 4.0; d])
        .collect();
    let mut rngs: Vec<DpRng> = (0..n as u32)
        .map(|i| DpRng::from_seed(6, Purpose::Silo, i))
        .collect();
    g.bench_function("round/n=64/d=16/bits=1024", |bch| {
        bch.iter(|| black_box(explicit_round(&pv, &inputs, &mut rngs, &mut rng).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, binomial, pvec, explicit);
criterion_main!(benches);
