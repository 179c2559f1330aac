//! One point of the scaling table (BENCHMARKS.md, "Issue 30 item 4"): builds the synthetic
//! federation of `federation.rs` with N silos at dimension d, runs a few simulated rounds, and
//! prints the resident memory before the rounds, the peak during them and the time per round.
//! Run each point in its own process under `/usr/bin/time -f %M` for the process's peak:
//! `scaling N D [ROUNDS]` (default 5 rounds).
//!
//! The peak during the rounds comes from Linux's `VmHWM`, reset after the first round by
//! writing 5 to `/proc/self/clear_refs`; elsewhere the memory columns read "n/a".

use std::time::Instant;

mod federation;

/// `VmRSS` and `VmHWM` of this process in KiB, when the kernel reports them.
fn memory() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("n/a".into(), |k| format!("{:.1}", k as f64 / 1024.0))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: scaling SILOS FEATURES [ROUNDS]";
    let arg = |i: usize| -> Result<Option<usize>, String> {
        args.get(i)
            .map(|a| {
                a.parse()
                    .map_err(|e| format!("argument {}: `{a}`: {e}; {usage}", i + 1))
            })
            .transpose()
    };
    let (Some(silos), Some(features)) = (arg(0)?, arg(1)?) else {
        return Err(usage.into());
    };
    let rounds = arg(2)?.unwrap_or(5).max(2);
    let spec = federation::spec(silos, features)?;
    let start = Instant::now();
    let trial = federation::trial(&spec)?;
    let data_done = memory();
    let mut sim = federation::simulator(&spec, &trial)?;
    let built = start.elapsed();
    let before = memory();
    // Round 1 also starts rayon's threads and first touches each silo's d-sized buffers
    // (allocated zeroed, so not yet resident); the later rounds are the steady state, whose
    // peak VmHWM gives once it is reset (write 5 to clear_refs) after round 1.
    let t = Instant::now();
    sim.step()?;
    let first = t.elapsed().as_secs_f64();
    let after_first = memory();
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let t = Instant::now();
    for _ in 1..rounds {
        sim.step()?;
    }
    let steady = t.elapsed().as_secs_f64() / (rounds - 1) as f64;
    let peak = memory().filter(|_| reset).map(|m| m.1);
    let rss = |m: Option<(u64, u64)>| m.map(|m| m.0);
    println!(
        "silos={silos} d={features} rows/silo={}: built in {:.2} s; RSS after the data {} MiB, \
         before the rounds {} MiB, after round 1 {} MiB; peak during rounds 2..={rounds} {} MiB \
         (+{} MiB over the RSS after round 1); round {:.3} ms (mean of rounds 2..={rounds}; \
         round 1 {:.3} ms)",
        federation::ROWS,
        built.as_secs_f64(),
        mib(rss(data_done)),
        mib(rss(before)),
        mib(rss(after_first)),
        mib(peak),
        mib(peak.zip(rss(after_first)).map(|(p, b)| p.saturating_sub(b))),
        steady * 1e3,
        first * 1e3,
    );
    Ok(())
}
