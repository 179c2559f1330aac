//! Participation: which silos answer a round (Lowy & Razaviyayn Assumption 1.4 and App. H).

use serde::{Deserialize, Serialize};

use dpfl_privacy::{DpRng, sampler};

/// Which silos are available in a round (Lowy & Razaviyayn Assumption 1.4: S_r is uniform
/// among subsets of size M_r; the M_r are independent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Participation {
    /// M_r = N.
    #[default]
    All,
    /// M_r = m, a uniform subset each round.
    Fixed {
        /// Participants per round.
        m: usize,
    },
    /// Each silo present independently with probability q (M_r ~ Binomial(N, q); a round may
    /// have no silo, in which case the model does not move).
    Bernoulli {
        /// Each silo's probability of taking part.
        q: f64,
    },
    /// M_r uniform on {lo..=hi}, then a uniform subset of that size.
    Uniform {
        /// Fewest participants.
        lo: usize,
        /// Most participants.
        hi: usize,
    },
    /// M_r drawn from the pmf `probs` (probs[m−1] = P(M_r = m), m = 1..=probs.len() ≤ N;
    /// non-negative, summing to 1 within 1e-9), then a uniform subset of that size.
    Distribution {
        /// probs[m−1] = P(M_r = m).
        probs: Vec<f64>,
    },
}

impl Participation {
    /// Checks the parameters against N.
    pub fn validate(&self, n: usize) -> crate::Result<()> {
        let bad = |r: String| Err(crate::Error::config("participation", r));
        match *self {
            Participation::All => Ok(()),
            Participation::Fixed { m } if m == 0 || m > n => {
                bad(format!("m = {m} must lie in [1, N = {n}]"))
            }
            Participation::Bernoulli { q } if !(q > 0.0 && q <= 1.0) => {
                bad(format!("q = {q} must lie in (0, 1]"))
            }
            Participation::Uniform { lo, hi } if lo == 0 || lo > hi || hi > n => bad(format!(
                "need 1 <= lo <= hi <= N = {n}, got lo = {lo}, hi = {hi}"
            )),
            Participation::Distribution { ref probs } => {
                if probs.is_empty() || probs.len() > n {
                    return bad(format!(
                        "probs must give P(M_r = m) for m = 1..=k with 1 <= k <= N = {n}, got {} entries",
                        probs.len()
                    ));
                }
                if let Some(i) = probs.iter().position(|p| !(p.is_finite() && *p >= 0.0)) {
                    return bad(format!("probs[{i}] = {} must be finite and >= 0", probs[i]));
                }
                let total: f64 = probs.iter().sum();
                if (total - 1.0).abs() > 1e-9 {
                    return bad(format!("probs must sum to 1 (within 1e-9), got {total}"));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// P(M_r = m) for m = 1..=n (index m − 1); Bernoulli availability is conditioned on a
    /// non-empty round, as in [`Self::effective_m`]. Call after [`Self::validate`].
    pub fn pmf(&self, n: usize) -> Vec<f64> {
        let mut p = vec![0.0; n];
        if n == 0 {
            return p;
        }
        match *self {
            Participation::All => p[n - 1] = 1.0,
            Participation::Fixed { m } => p[m.clamp(1, n) - 1] = 1.0,
            Participation::Uniform { lo, hi } => {
                let (lo, hi) = (lo.clamp(1, n), hi.clamp(1, n));
                let w = 1.0 / (hi - lo + 1) as f64;
                p[lo - 1..hi].iter_mut().for_each(|x| *x = w);
            }
            Participation::Bernoulli { q } if q >= 1.0 => p[n - 1] = 1.0,
            Participation::Bernoulli { q } => {
                // Binomial(n, q) in log space (no underflow for large n), given M ≥ 1.
                let nonempty = -((n as f64) * (-q).ln_1p()).exp_m1();
                let (lq, l1q) = (q.ln(), (-q).ln_1p());
                let mut ln_choose = 0.0;
                for k in 1..=n {
                    ln_choose += ((n - k + 1) as f64).ln() - (k as f64).ln();
                    p[k - 1] = (ln_choose + k as f64 * lq + (n - k) as f64 * l1q).exp() / nonempty;
                }
            }
            Participation::Distribution { ref probs } => {
                p.iter_mut().zip(probs).for_each(|(x, v)| *x = *v);
            }
        }
        p
    }

    /// The paper's M' of App. H (Assumption 2): 1/M' = √(E[1/M_r²]).
    pub fn effective_m_prime(&self, n: usize) -> f64 {
        let e2: f64 = self
            .pmf(n)
            .iter()
            .enumerate()
            .map(|(i, p)| p / ((i + 1) as f64).powi(2))
            .sum();
        1.0 / e2.sqrt()
    }

    /// Draws S_r into `out` (sorted).
    pub fn draw(&self, n: usize, rng: &mut DpRng, out: &mut Vec<usize>) -> crate::Result<()> {
        match *self {
            Participation::All => {
                out.clear();
                out.extend(0..n);
            }
            Participation::Fixed { m } => sampler::choose_subset(rng, n, m, out)?,
            Participation::Bernoulli { q } => sampler::bernoulli_subset(rng, n, q, out)?,
            Participation::Uniform { lo, hi } => {
                let m = sampler::uniform_int(rng, lo, hi)?;
                sampler::choose_subset(rng, n, m, out)?;
            }
            Participation::Distribution { ref probs } => {
                // Inverse CDF of one uniform draw; zero-probability sizes are never chosen,
                // and a draw beyond a total a little below 1 falls on the last possible size.
                let u = sampler::uniforms(rng, 1).first().copied().unwrap_or(0.0);
                let mut acc = 0.0;
                let mut m = probs.iter().rposition(|p| *p > 0.0).map_or(1, |i| i + 1);
                for (i, p) in probs.iter().enumerate() {
                    acc += p;
                    if *p > 0.0 && u < acc {
                        m = i + 1;
                        break;
                    }
                }
                sampler::choose_subset(rng, n, m, out)?;
            }
        }
        Ok(())
    }

    /// The paper's M, defined by 1/M = E[1/M_r] (Assumption 1.4); for Bernoulli
    /// participation the expectation is taken over non-empty rounds.
    pub fn effective_m(&self, n: usize) -> f64 {
        match *self {
            Participation::All => n as f64,
            Participation::Fixed { m } => m as f64,
            Participation::Uniform { lo, hi } => {
                let k = (hi - lo + 1) as f64;
                k / (lo..=hi).map(|m| 1.0 / m as f64).sum::<f64>()
            }
            // E[1/M | M ≥ 1] for M ~ Binomial(n, q), and E[1/M] for a given pmf.
            Participation::Bernoulli { .. } | Participation::Distribution { .. } => {
                let inv: f64 = self
                    .pmf(n)
                    .iter()
                    .enumerate()
                    .map(|(i, p)| p / (i + 1) as f64)
                    .sum();
                1.0 / inv
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpfl_privacy::rng::Purpose;

    #[test]
    fn distribution_participation_is_validated_and_has_the_right_m() {
        let p = Participation::Distribution {
            probs: vec![0.5, 0.0, 0.5],
        };
        p.validate(3).unwrap();
        assert!(p.validate(2).is_err(), "more sizes than silos");
        for bad in [vec![0.5, 0.4], vec![1.5, -0.5], vec![], vec![f64::NAN, 1.0]] {
            assert!(
                Participation::Distribution { probs: bad }
                    .validate(3)
                    .is_err()
            );
        }
        // Within 1e-9 of 1 is accepted.
        Participation::Distribution {
            probs: vec![0.3, 0.7 + 5e-10],
        }
        .validate(2)
        .unwrap();
        // E[1/M] = 0.5/1 + 0.5/3 = 2/3 → M = 1.5; E[1/M²] = 0.5 + 0.5/9 = 5/9 → M' = 3/√5.
        assert!((p.effective_m(3) - 1.5).abs() < 1e-15);
        assert!((p.effective_m_prime(3) - 3.0 / 5f64.sqrt()).abs() < 1e-15);
        // Draws follow the pmf and never pick a zero-probability size.
        let mut rng = DpRng::from_seed(3, Purpose::Participation, 0);
        let mut out = Vec::new();
        let mut ones = 0;
        for _ in 0..20_000 {
            p.draw(3, &mut rng, &mut out).unwrap();
            assert!(out.len() == 1 || out.len() == 3, "{out:?}");
            ones += usize::from(out.len() == 1);
        }
        // 10 000 ± 5·70.7.
        assert!((ones as i64 - 10_000).abs() < 354, "{ones}");
    }

    #[test]
    fn effective_m_of_the_other_rules() {
        // Bernoulli, n = 2, q = 1/2, given M ≥ 1: P(1) = 2/3, P(2) = 1/3:
        // E[1/M] = 2/3 + 1/6 = 5/6 → M = 1.2.
        let b = Participation::Bernoulli { q: 0.5 };
        assert!((b.effective_m(2) - 1.2).abs() < 1e-12);
        // Large N no longer underflows: M ≈ Nq for N = 2000, q = 1/2.
        let m = b.effective_m(2000);
        assert!(m > 995.0 && m < 1000.0, "{m}");
        assert_eq!(Participation::Bernoulli { q: 1.0 }.effective_m(7), 7.0);
        // Uniform on {2, 3, 4}: M = 3/(1/2 + 1/3 + 1/4) = 36/13, and its pmf agrees.
        let u = Participation::Uniform { lo: 2, hi: 4 };
        assert!((u.effective_m(5) - 36.0 / 13.0).abs() < 1e-12);
        assert_eq!(u.pmf(5), vec![0.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 0.0]);
        assert_eq!(Participation::Fixed { m: 4 }.effective_m_prime(5), 4.0);
        assert!((b.pmf(40).iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }
}
