//! The extended per-round metrics (SoteriaFL digest §6 item 13): full-train ‖∇f(x^t)‖² and
//! its running mean ("utility", the official code's mean over the evaluated rounds including
//! x⁰), cumulative uplink bits (exact encoded size, and the paper's 64 bits per float sent)
//! and cumulative per-record gradient evaluations. Appended to `rounds.csv` only for runs that
//! ask for them (`extended_metrics`, default on for the SoteriaFL wing), so existing outputs
//! keep their columns.

use serde::Serialize;

/// Extended metrics of one evaluated round.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Extended {
    /// ‖∇f(x)‖² of the pooled training objective (unclipped, regulariser included).
    pub grad_norm_sq: f64,
    /// Mean of `grad_norm_sq` over x⁰ and every evaluated round so far.
    pub utility: f64,
    /// Uplink bits so far, exact encoded payload sizes.
    pub uplink_bits: u64,
    /// Uplink bits so far counted as 64 per f64 sent (the paper's count); `None` if the
    /// algorithm's halves do not count floats.
    pub uplink_bits_64: Option<u64>,
    /// Per-record gradient evaluations so far (all silos); `None` if not counted.
    pub grad_evals: Option<u64>,
}

/// The column names appended to `rounds.csv`.
pub const COLUMNS: [&str; 5] = [
    "grad_norm_sq",
    "utility",
    "uplink_bits",
    "uplink_bits_64",
    "grad_evals",
];

impl Extended {
    /// The appended cells.
    pub fn cells(&self) -> [String; 5] {
        let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
        [
            self.grad_norm_sq.to_string(),
            self.utility.to_string(),
            self.uplink_bits.to_string(),
            opt(self.uplink_bits_64),
            opt(self.grad_evals),
        ]
    }
}

pub use dpfl::sim::full_grad_norm_sq;

/// Accumulates the running quantities across rounds of one run.
#[derive(Debug, Clone, Default)]
pub struct Tracker {
    sum_sq: f64,
    evaluated: usize,
    bits: u64,
}

impl Tracker {
    /// Starts with ‖∇f(x⁰)‖².
    pub fn new(initial_grad_norm_sq: f64) -> Self {
        Tracker {
            sum_sq: initial_grad_norm_sq,
            evaluated: 1,
            bits: 0,
        }
    }
    /// Adds a round's exact uplink bits.
    pub fn add_bits(&mut self, bits: u64) {
        self.bits += bits;
    }
    /// The row of an evaluated round.
    pub fn row(
        &mut self,
        grad_norm_sq: f64,
        counters: Option<dpfl::algo::SiloCounters>,
    ) -> Extended {
        self.sum_sq += grad_norm_sq;
        self.evaluated += 1;
        Extended {
            grad_norm_sq,
            utility: self.sum_sq / self.evaluated as f64,
            uplink_bits: self.bits,
            uplink_bits_64: counters.map(|c| 64 * c.floats_sent),
            grad_evals: counters.map(|c| c.grad_evals),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utility_is_the_running_mean_including_x0() {
        // ‖∇f(x⁰)‖² = 4, then 2 and 0: utilities (4+2)/2 = 3 and (4+2+0)/3 = 2.
        let mut t = Tracker::new(4.0);
        t.add_bits(100);
        let a = t.row(2.0, None);
        assert_eq!(
            (a.utility, a.uplink_bits, a.uplink_bits_64),
            (3.0, 100, None)
        );
        t.add_bits(50);
        let c = dpfl::algo::SiloCounters {
            grad_evals: 7,
            floats_sent: 3,
        };
        let b = t.row(0.0, Some(c));
        assert_eq!(
            (b.utility, b.uplink_bits, b.uplink_bits_64, b.grad_evals),
            (2.0, 150, Some(192), Some(7))
        );
        assert_eq!(b.cells()[3], "192");
        assert_eq!(a.cells()[4], "");
    }
}
