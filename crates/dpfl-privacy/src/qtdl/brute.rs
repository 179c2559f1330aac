//! Exhaustive privacy check of QTDL for tiny d, s, m (digest §6.1 item 11): for every pair of
//! quantized vectors q, q' ∈ {−s..s}^d whose difference has ℓ₁ ≤ Δ₁ and ℓ∞ ≤ Δ∞ (Theorem 1's
//! sensitivity model, App. B), the two output distributions q + Y and q' + Y (Y i.i.d. TDL) are
//! enumerated on {−(s+m)..s+m}^d, and we report the worst log likelihood ratio on the common
//! support, the worst mass off the overlap, and the worst hockey-stick divergence
//! δ(ε) = Σ_z max(0, P(z) − e^ε P'(z)) — the exact δ of the pair at ε.

use crate::error::{PrivacyError, Result};

use super::tdl::TruncatedDiscreteLaplace;

/// The worst case over all neighbouring pairs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BruteForce {
    /// max ln(P(z)/P'(z)) over outputs both can produce.
    pub max_log_ratio: f64,
    /// max P(outputs q' + Y cannot produce).
    pub max_off_overlap: f64,
    /// max Σ_z (P(z) − e^ε P'(z))₊.
    pub max_hockey_stick: f64,
    /// Number of ordered pairs examined.
    pub pairs: u64,
}

/// Runs the check; refuses more than ~10^8 elementary steps.
pub(crate) fn brute_force(
    tdl: &TruncatedDiscreteLaplace,
    s: u64,
    d: u32,
    delta_1: u64,
    delta_inf: u64,
    epsilon: f64,
) -> Result<BruteForce> {
    let m = tdl.m();
    let levels = 2 * s + 1;
    let outputs = 2 * (s + m) + 1;
    let work = (levels as f64).powi(2 * d as i32) * (outputs as f64).powi(d as i32);
    if d == 0 || work > 1e8 {
        return Err(PrivacyError::invalid(
            "d",
            f64::from(d),
            "brute force is for tiny d, s, m (at most ~1e8 steps)",
        ));
    }
    let vectors = |base: u64, offset: i64| -> Vec<Vec<i64>> {
        let count = base.pow(d);
        (0..count)
            .map(|mut c| {
                (0..d)
                    .map(|_| {
                        let v = (c % base) as i64 - offset;
                        c /= base;
                        v
                    })
                    .collect()
            })
            .collect()
    };
    let qs = vectors(levels, s as i64);
    let zs = vectors(outputs, (s + m) as i64);
    let prob =
        |z: &[i64], q: &[i64]| -> f64 { z.iter().zip(q).map(|(&z, &q)| tdl.pmf(z - q)).product() };
    let mut out = BruteForce {
        max_log_ratio: f64::NEG_INFINITY,
        max_off_overlap: 0.0,
        max_hockey_stick: 0.0,
        pairs: 0,
    };
    let e_eps = epsilon.exp();
    for q in &qs {
        for q2 in &qs {
            let diff: Vec<u64> = q.iter().zip(q2).map(|(a, b)| a.abs_diff(*b)).collect();
            if diff.iter().sum::<u64>() > delta_1 || diff.iter().any(|&x| x > delta_inf) {
                continue;
            }
            out.pairs += 1;
            let (mut off, mut hs) = (0.0, 0.0);
            for z in &zs {
                let (p, p2) = (prob(z, q), prob(z, q2));
                if p > 0.0 && p2 > 0.0 {
                    out.max_log_ratio = out.max_log_ratio.max((p / p2).ln());
                } else if p > 0.0 {
                    off += p;
                }
                hs += (p - e_eps * p2).max(0.0);
            }
            out.max_off_overlap = out.max_off_overlap.max(off);
            out.max_hockey_stick = out.max_hockey_stick.max(hs);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::theorem1::{calibrate, calibrate_for_delta};
    use super::*;

    #[test]
    fn one_dimension_meets_theorem1() {
        // d = 1, s = 1, Δ₁ = Δ∞ = 2, ε = 0.3: α = 0.15, m = 3 (hand example in theorem1.rs).
        let th = calibrate(0.3, 2.0, 2.0).unwrap();
        let b = brute_force(&th.tdl, 1, 1, 2, 2, 0.3).unwrap();
        assert!(b.max_log_ratio <= 0.3 + 1e-12, "{}", b.max_log_ratio);
        assert!(b.max_log_ratio >= 0.3 - 1e-12); // attained: the bound is tight
        // Off the overlap: Y ∈ {2, 3} for a shift of 2: (e^−.3 + e^−.45)/Z = 0.251619.
        assert!((b.max_off_overlap - 0.251_619).abs() < 1e-6);
        assert!(b.max_off_overlap <= th.claimed_delta(1).value());
        let ours = th.delta(1).unwrap().value();
        assert!((b.max_off_overlap - ours).abs() < 1e-12);
        assert!((b.max_hockey_stick - ours).abs() < 1e-12);
        assert_eq!(b.pairs, 9); // every pair of {−1, 0, 1} is within distance 2
    }

    #[test]
    fn two_dimensions_break_the_papers_delta_and_meet_ours() {
        // d = 2, s = 1, Δ∞ = 2, Δ₁ = 4, ε = 0.7 < e^−1·2 = 0.7358: α = 0.175.
        let th = calibrate(0.7, 4.0, 2.0).unwrap();
        let b = brute_force(&th.tdl, 1, 2, 4, 2, 0.7).unwrap();
        assert!(b.max_log_ratio <= 0.7 + 1e-12);
        let claimed = th.claimed_delta(2).value();
        let ours = th.delta(2).unwrap().value();
        // The paper's (Δ∞/Z)² is exceeded by the true δ of the pair q = (−1,−1), q' = (1,1).
        assert!(
            b.max_hockey_stick > 1.5 * claimed,
            "{} vs {claimed}",
            b.max_hockey_stick
        );
        assert!(
            (b.max_hockey_stick - ours).abs() < 1e-12,
            "{} vs {ours}",
            b.max_hockey_stick
        );
        assert!((b.max_off_overlap - ours).abs() < 1e-12);
    }

    #[test]
    fn corrected_calibration_holds_exhaustively() {
        // Same setting, target δ = 0.05: a wider m, checked over every pair.
        let th = calibrate_for_delta(0.7, 0.05f64.ln(), 4.0, 2.0, 2).unwrap();
        let b = brute_force(&th.tdl, 1, 2, 4, 2, 0.7).unwrap();
        assert!(b.max_hockey_stick <= 0.05, "{}", b.max_hockey_stick);
        assert!(b.max_log_ratio <= 0.7 + 1e-12);
        // d = 3, Δ₁ = 3 < d·Δ∞: the greedy worst shift (1, 1, 1)… or (2, 1, 0); exhaustive.
        let th = calibrate(0.5, 3.0, 2.0).unwrap();
        let b = brute_force(&th.tdl, 1, 3, 3, 2, 0.5).unwrap();
        let ours = th.delta(3).unwrap().value();
        assert!(
            (b.max_hockey_stick - ours).abs() < 1e-12,
            "{} vs {ours}",
            b.max_hockey_stick
        );
    }
}
