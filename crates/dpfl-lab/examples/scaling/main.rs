//! One point of the scaling table (BENCHMARKS.md, "Issue 30 item 4"): builds the synthetic
//! federation of `federation.rs` with N silos at dimension d, runs a few simulated rounds, and
//! prints the resident memory before the rounds, the peak during them and the time per round.
//! Run each point in its own process under `/usr/bin/time -f %M` for the process's peak:
//! `scaling N D [ROUNDS]` (default 5 rounds).
//!
//! The peak during the rounds comes from Linux's `VmHWM`, reset before the first round by
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
    // Reset the peak so that VmHWM afterwards is the peak of the rounds alone.
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        sim.step()?;
        times.push(t.elapsed().as_secs_f64());
    }
    let after = memory();
    // The first round also starts rayon's threads; the rest are the steady state.
    let steady = times[1..].iter().sum::<f64>() / (rounds - 1) as f64;
    let peak = after.filter(|_| reset).map(|m| m.1);
    println!(
        "silos={silos} d={features} rows/silo={}: built in {:.2} s; RSS after the data {} MiB, \
         before the rounds {} MiB; peak during the rounds {} MiB (+{} MiB); round {:.3} ms \
         (first {:.3} ms, mean of the other {})",
        federation::ROWS,
        built.as_secs_f64(),
        mib(data_done.map(|m| m.0)),
        mib(before.map(|m| m.0)),
        mib(peak),
        mib(peak.zip(before).map(|(p, b)| p.saturating_sub(b.0))),
        steady * 1e3,
        times[0] * 1e3,
        rounds - 1,
    );
    Ok(())
}
