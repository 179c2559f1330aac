//! The server's per-round checkpoint at d = 10⁶: encoding plus the durable cell write
//! (two slots, SHA-256, fsync), as JSON (the format before issue 10) and as postcard (now),
//! and the decoding a restart pays. Sizes are printed once.
//!
//! `cargo bench -p dpfl-net --bench checkpoint` (or `--profile test` to reuse test builds).

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};

use dpfl::algo::{HalfState, Round};
use dpfl_net::checkpoint::{Checkpoint, RoundLog};
use dpfl_net::store::Cell;
use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

const DIM: usize = 1_000_000;
const ROUNDS_LOGGED: usize = 100;

fn checkpoint() -> Checkpoint {
    // Values with full mantissas, as a trained model has (JSON prints them at 17 digits).
    let w: Vec<f64> = (0..DIM)
        .map(|i| (i as f64 * 0.618_033_988_7).sin() / 3.0)
        .collect();
    let mut half = HalfState::default();
    half.put("w", &w);
    let rng = DpRng::new(Some(1), Purpose::Participation, 0).unwrap();
    Checkpoint {
        next_round: Round::new(ROUNDS_LOGGED as u32),
        epoch: 1,
        half,
        participation: rng.snapshot(),
        log: (0..ROUNDS_LOGGED as u32)
            .map(|round| RoundLog {
                round: Round::new(round),
                epoch: 1,
                selected: 25,
                participants: 25,
                rejected: 0,
                seconds: 0.123_456_789,
                submitted: Some((0..25).collect()),
                dropped: Some(Vec::new()),
                quorum: None,
                outcome: Some(dpfl_net::checkpoint::RoundOutcome::Complete),
            })
            .collect(),
    }
}

fn bench(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let ckpt = checkpoint();
    let json_path = tmp.path().join("json");
    let bin_path = tmp.path().join("postcard");
    let (mut json_cell, _) = Cell::open(&json_path).unwrap();
    let (mut bin_cell, _) = Cell::open(&bin_path).unwrap();
    let json = serde_json::to_vec(&ckpt).unwrap();
    let bin = ckpt.encode(&bin_path).unwrap();
    let bin_bytes = bin.concat();
    println!(
        "checkpoint d={DIM}: JSON {} bytes, postcard {} bytes (payload {} bytes of f64)",
        json.len(),
        bin_bytes.len(),
        8 * DIM
    );
    let mut g = c.benchmark_group("checkpoint");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    g.bench_function("json/write/d=1e6", |b| {
        b.iter(|| {
            let bytes = serde_json::to_vec(&ckpt).unwrap();
            json_cell.write(&bytes).unwrap();
        })
    });
    g.bench_function("postcard/write/d=1e6", |b| {
        b.iter(|| {
            let [tag, body] = ckpt.encode(&bin_path).unwrap();
            bin_cell.write_parts(&[&tag, &body]).unwrap();
        })
    });
    g.bench_function("json/read/d=1e6", |b| {
        b.iter(|| serde_json::from_slice::<Checkpoint>(&json).unwrap())
    });
    g.bench_function("postcard/read/d=1e6", |b| {
        b.iter(|| Checkpoint::decode(&bin_path, &bin_bytes).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
