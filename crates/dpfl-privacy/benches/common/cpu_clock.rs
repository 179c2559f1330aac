//! Criterion measured in CPU time, for benchmarks run on a shared machine where wall time
//! mostly measures the other tenants: [`CpuTime`] (the benchmarking thread) and
//! [`ProcessCpu`] (every thread of the process, for code that runs on rayon). Shared by this
//! crate's `samplers` bench and `dpfl`'s `normfedavg` and `soteria` benches (included there
//! with `#[path]`, so a bench that uses only one of the two clocks leaves the other unused).
#![allow(dead_code)]

use criterion::measurement::{Measurement, ValueFormatter, WallTime};

/// CPU time of the calling thread in nanoseconds (first field of
/// `/proc/thread-self/schedstat`, updated at scheduler ticks; 0 where it cannot be read, which
/// shows as a zero time).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// CPU time of the whole process, every thread (sum of the first field of
/// `/proc/self/task/*/schedstat`, nanoseconds; 0 where unreadable). rayon's workers live as
/// long as the process, so no thread's time is lost between start and end.
fn process_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// A criterion measurement reading one nanosecond CPU clock at start and end.
pub(crate) struct CpuClock(fn() -> u64);

/// The benchmarking thread's CPU time (named like a type: it is used as one was before).
#[allow(non_upper_case_globals)]
pub(crate) const CpuTime: CpuClock = CpuClock(thread_cpu_ns);
/// The whole process's CPU time, every thread.
#[allow(non_upper_case_globals)]
pub(crate) const ProcessCpu: CpuClock = CpuClock(process_cpu_ns);

impl Measurement for CpuClock {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        (self.0)()
    }
    fn end(&self, start: u64) -> u64 {
        (self.0)().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        WallTime.formatter()
    }
}
