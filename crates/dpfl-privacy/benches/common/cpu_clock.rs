//! Criterion measured in the benchmarking thread's CPU time, for benchmarks run on a shared
//! machine where wall time mostly measures the other tenants. Shared by this crate's
//! `samplers` bench and `dpfl`'s `normfedavg` bench (included there with `#[path]`).

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

/// Criterion measurement: the benchmarking thread's CPU time.
pub(crate) struct CpuTime;

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns().saturating_sub(start)
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
