//! Privacy accountants: turn a (composite) [`PrivacyEvent`] into an (ε, δ) guarantee.
//!
//! Each accountant states which events it supports and refuses the rest with
//! [`PrivacyError::Unsupported`] naming the event; there is no catch-all arm that costs zero.
//! All accountants round towards more privacy loss, and a numerical failure is an error.
//!
//! * [`rdp`] — Rényi DP (Mironov 2017) with the exact Poisson-sampled Gaussian RDP
//!   (Mironov, Talwar & Zhang 2019), sampling without replacement (Wang, Balle &
//!   Kasiviswanathan 2019), a sound bound for sampling with replacement, and the improved
//!   RDP→(ε, δ) conversion (Balle et al. 2020 / Canonne, Kamath & Steinke 2020).
//! * [`pld`] — privacy loss distributions with pessimistic ("connect the dots") discretisation
//!   and FFT composition (Koskela et al. 2020; Doroshenko et al. 2022; `dp_accounting`).
//! * [`zcdp`] — zero-concentrated DP (Bun & Steinke 2016).
//! * [`composition`] — basic, advanced (Dwork & Roth Thm 3.20) and optimal (Kairouz, Oh &
//!   Viswanath 2015) composition of (ε, δ) guarantees.
//!
//! Layering: `accountant/` imports nothing from [`crate::calibration`]; the exact Gaussian
//! curve both need is [`gaussian`] here, re-exported by calibration. `tests/it/layers.rs`
//! checks it.
//!
//! The neighbouring relation is a parameter of every accountant: an event's noise
//! multiplier is relative to the sensitivity under that relation, and which sampling
//! amplification theorems apply depends on it.
//!
//! Every accountant first flattens a composite event into its leaves (`leaves`): identical
//! events are counted once with their number, and disjoint batches of one random partition
//! compose in parallel (McSherry 2009), so a pass over a silo's records costs one use.

pub(crate) mod approximate;
pub(crate) mod composition;
pub mod gaussian;
pub mod lower_bound;
mod memo;
pub use memo::forget_all as forget_remembered;
pub(crate) mod par;
pub mod pld;
pub mod rdp;
mod rdp_wr;
mod sampled_discrete;
pub mod sampled_pld;
pub(crate) mod special;
pub(crate) mod zcdp;

use serde::{Deserialize, Serialize};

use crate::error::{PrivacyError, Result};
use crate::event::{Neighbouring, PrivacyEvent, Sampling};
use crate::params::Delta;

/// Which accountant to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccountantKind {
    /// Rényi DP ([`rdp`]).
    Rdp,
    /// Privacy loss distributions ([`pld`]).
    Pld,
    /// zero-concentrated DP ([`zcdp`]).
    Zcdp,
    /// Basic composition: ε and δ add up ([`composition`]).
    Basic,
    /// Advanced composition, Dwork & Roth Thm 3.20 / KOV Thm 3.5 ([`composition`]).
    Advanced,
    /// Optimal composition of Kairouz, Oh & Viswanath, Thm 3.3 ([`composition`]).
    Optimal,
}

impl AccountantKind {
    /// Every accountant, in the order `dpfl account` lists them.
    pub const ALL: [AccountantKind; 6] = [
        AccountantKind::Rdp,
        AccountantKind::Pld,
        AccountantKind::Zcdp,
        AccountantKind::Basic,
        AccountantKind::Advanced,
        AccountantKind::Optimal,
    ];

    /// The name the configs and the command line use (`rdp`, `pld`, …).
    pub fn name(self) -> &'static str {
        match self {
            AccountantKind::Rdp => "rdp",
            AccountantKind::Pld => "pld",
            AccountantKind::Zcdp => "zcdp",
            AccountantKind::Basic => "basic",
            AccountantKind::Advanced => "advanced",
            AccountantKind::Optimal => "optimal",
        }
    }

    /// The ε of `event` at `delta` under `neighbouring`.
    pub fn epsilon(
        self,
        neighbouring: Neighbouring,
        event: &PrivacyEvent,
        delta: Delta,
    ) -> Result<f64> {
        match self {
            AccountantKind::Rdp => rdp::RdpAccountant::new(neighbouring).epsilon(event, delta),
            AccountantKind::Pld => pld::PldAccountant::new(neighbouring).epsilon(event, delta),
            AccountantKind::Zcdp => zcdp::ZcdpAccountant::new(neighbouring).epsilon(event, delta),
            AccountantKind::Basic => {
                composition::CompositionAccountant::new(composition::Rule::Basic, neighbouring)
                    .epsilon(event, delta)
            }
            AccountantKind::Advanced => {
                composition::CompositionAccountant::new(composition::Rule::Advanced, neighbouring)
                    .epsilon(event, delta)
            }
            AccountantKind::Optimal => {
                composition::CompositionAccountant::new(composition::Rule::Optimal, neighbouring)
                    .epsilon(event, delta)
            }
        }
    }
}

impl std::fmt::Display for AccountantKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for AccountantKind {
    type Err = PrivacyError;
    fn from_str(s: &str) -> Result<Self> {
        AccountantKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| PrivacyError::Unsupported {
                accountant: "accountant",
                event: format!(
                    "unknown accountant `{s}` (rdp, pld, zcdp, basic, advanced, optimal)"
                ),
            })
    }
}

pub(crate) fn unsupported(
    accountant: &'static str,
    event: &PrivacyEvent,
    why: &str,
) -> PrivacyError {
    PrivacyError::Unsupported {
        accountant,
        event: format!("{event} ({why})"),
    }
}

pub(crate) fn check_multiplier(x: f64) -> Result<()> {
    if x.is_finite() && x > 0.0 {
        Ok(())
    } else {
        Err(PrivacyError::invalid(
            "noise_multiplier",
            x,
            "must be finite and > 0",
        ))
    }
}

fn check_eps_delta(eps: f64, delta: f64) -> Result<()> {
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(PrivacyError::invalid(
            "epsilon",
            eps,
            "must be finite and >= 0",
        ));
    }
    if !(0.0..1.0).contains(&delta) {
        return Err(PrivacyError::invalid("delta", delta, "must lie in [0, 1)"));
    }
    Ok(())
}

/// Validates the numeric fields of a sampling.
pub(crate) fn check_sampling(s: &Sampling) -> Result<()> {
    match *s {
        Sampling::Poisson { rate } => {
            if !(0.0..=1.0).contains(&rate) {
                return Err(PrivacyError::invalid("rate", rate, "must lie in [0, 1]"));
            }
        }
        Sampling::WithReplacement { population, draws } => {
            if population == 0 {
                return Err(PrivacyError::invalid("population", 0.0, "must be >= 1"));
            }
            if draws == 0 {
                return Err(PrivacyError::invalid("draws", 0.0, "must be >= 1"));
            }
        }
        Sampling::WithoutReplacement { population, size }
        | Sampling::Disjoint { population, size } => {
            if population == 0 {
                return Err(PrivacyError::invalid("population", 0.0, "must be >= 1"));
            }
            if size == 0 || size > population {
                return Err(PrivacyError::invalid(
                    "size",
                    size as f64,
                    format!("must lie in [1, population = {population}]"),
                ));
            }
        }
    }
    Ok(())
}

/// An event that is not a composition, and how many times it is composed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Leaf {
    pub event: PrivacyEvent,
    pub count: u64,
}

/// Flattens compositions into distinct non-composite events with their counts.
///
/// Parallel composition (McSherry 2009, Thm 4): `Sampled { Disjoint { n, b }, e }` events
/// with the same (n, b, e) are batches of consecutive passes over one random partition; each
/// record is in one batch per pass, so `c` of them cost `ceil(c / ⌊n/b⌋)` uses of `e`. This
/// assumes a silo's disjoint-batch events with equal parameters come from one sequence of
/// passes (true of every algorithm in dpfl); if they did not, the caller must use different
/// parameters or plain events.
pub(crate) fn leaves(event: &PrivacyEvent) -> Result<Vec<Leaf>> {
    let mut raw = Vec::new();
    collect(event, 1, &mut raw)?;
    let mut out: Vec<Leaf> = Vec::new();
    for leaf in raw {
        if let PrivacyEvent::Sampled {
            sampling: Sampling::Disjoint { population, size },
            event: inner,
        } = &leaf.event
        {
            let per_pass = population / size;
            let passes = leaf.count.div_ceil(per_pass);
            let mut sub = Vec::new();
            collect(inner, passes, &mut sub)?;
            for l in sub {
                push(&mut out, l);
            }
        } else {
            push(&mut out, leaf);
        }
    }
    Ok(out)
}

fn push(out: &mut Vec<Leaf>, leaf: Leaf) {
    if leaf.count == 0 {
        return;
    }
    if let Some(l) = out.iter_mut().find(|l| l.event == leaf.event) {
        l.count = l.count.saturating_add(leaf.count);
    } else {
        out.push(leaf);
    }
}

fn collect(event: &PrivacyEvent, mult: u64, out: &mut Vec<Leaf>) -> Result<()> {
    match event {
        // FMT 2021: the shuffled release is (ε, δ)-DP; every accountant sees that leaf.
        PrivacyEvent::ShuffledLocal {
            local_epsilon,
            reports,
            delta,
        } => {
            let amplified =
                crate::shuffle::amplification::amplify(*reports, *local_epsilon, *delta).map_err(
                    |e| match e {
                        crate::shuffle::ShuffleError::Parameter(p) => p,
                        other => PrivacyError::Numerical {
                            context: "shuffle amplification",
                            reason: other.to_string(),
                        },
                    },
                )?;
            collect(
                &PrivacyEvent::EpsilonDelta {
                    epsilon: amplified.epsilon,
                    delta: amplified.delta,
                },
                mult,
                out,
            )
        }
        // Issue 32: the exact-sum accountant's ε at the event's δ; every accountant sees that leaf.
        PrivacyEvent::PvecSum {
            trials,
            p,
            granularity,
            dimension,
            sampler_tv,
            delta,
        } => {
            let epsilon = crate::shuffle::pvec_exact::release_epsilon(
                *trials,
                *p,
                *granularity,
                *dimension,
                *sampler_tv,
                *delta,
            )
            .map_err(|e| match e {
                crate::shuffle::ShuffleError::Parameter(p) => p,
                other => PrivacyError::Numerical {
                    context: "PVEC exact accountant",
                    reason: other.to_string(),
                },
            })?;
            if !epsilon.is_finite() {
                return Err(PrivacyError::Numerical {
                    context: "PVEC exact accountant",
                    reason: format!("no finite epsilon at delta = {delta} for {event}"),
                });
            }
            collect(
                &PrivacyEvent::EpsilonDelta {
                    epsilon,
                    delta: *delta,
                },
                mult,
                out,
            )
        }
        PrivacyEvent::SelfComposed { event, count } => {
            let m = mult.checked_mul(*count).ok_or_else(|| {
                PrivacyError::invalid("count", *count as f64, "composition count overflows u64")
            })?;
            collect(event, m, out)
        }
        PrivacyEvent::Composed(events) => {
            for e in events {
                collect(e, mult, out)?;
            }
            Ok(())
        }
        PrivacyEvent::DiscreteGaussian {
            noise_multiplier,
            l2_sensitivity,
            dimension,
        } => {
            check_multiplier(*noise_multiplier)?;
            if !(l2_sensitivity.is_finite() && *l2_sensitivity > 0.0) {
                return Err(PrivacyError::invalid(
                    "l2_sensitivity",
                    *l2_sensitivity,
                    "must be finite and > 0",
                ));
            }
            if *dimension == 0 {
                return Err(PrivacyError::invalid(
                    "dimension",
                    0.0,
                    "must be at least 1",
                ));
            }
            push(
                out,
                Leaf {
                    event: event.clone(),
                    count: mult,
                },
            );
            Ok(())
        }
        PrivacyEvent::Gaussian { noise_multiplier }
        | PrivacyEvent::Laplace { noise_multiplier }
        | PrivacyEvent::DiscreteLaplace { noise_multiplier } => {
            check_multiplier(*noise_multiplier)?;
            push(
                out,
                Leaf {
                    event: event.clone(),
                    count: mult,
                },
            );
            Ok(())
        }
        PrivacyEvent::TruncatedDiscreteLaplace { epsilon, delta }
        | PrivacyEvent::EpsilonDelta { epsilon, delta } => {
            check_eps_delta(*epsilon, *delta)?;
            // A truncated noise is never pure DP: δ = 0 here is an underflowed δ (2^−d), and
            // RDP/zCDP would read it as pure ε-DP. qtdl::LogProb::upper_f64 never gives 0.
            if matches!(event, PrivacyEvent::TruncatedDiscreteLaplace { .. }) && *delta == 0.0 {
                return Err(PrivacyError::invalid(
                    "delta",
                    *delta,
                    "a truncated discrete Laplace release has delta > 0; pass an upper bound \
                     (at least the smallest positive f64), never an underflowed 0",
                ));
            }
            push(
                out,
                Leaf {
                    event: event.clone(),
                    count: mult,
                },
            );
            Ok(())
        }
        PrivacyEvent::Sampled {
            sampling,
            event: inner,
        } => {
            check_sampling(sampling)?;
            // Validate the inner event too (its own leaves are accounted by the sampler rule).
            let mut scratch = Vec::new();
            collect(inner, 1, &mut scratch)?;
            push(
                out,
                Leaf {
                    event: event.clone(),
                    count: mult,
                },
            );
            Ok(())
        }
    }
}

/// If `event` is a composition of Gaussians only, the noise multiplier of the single
/// Gaussian equivalent to it: z_eff = (Σ count_i / z_i²)^{-1/2} (a composition of Gaussian
/// mechanisms is a Gaussian mechanism on the concatenated query; Dong, Roth & Su 2019,
/// Cor. 3.3). `None` if some part is not Gaussian.
pub(crate) fn effective_gaussian(event: &PrivacyEvent) -> Result<Option<f64>> {
    let mut sum = 0.0;
    for l in leaves(event)? {
        match l.event {
            PrivacyEvent::Gaussian { noise_multiplier } => {
                sum += l.count as f64 / (noise_multiplier * noise_multiplier)
            }
            _ => return Ok(None),
        }
    }
    if sum == 0.0 {
        return Ok(None);
    }
    Ok(Some(1.0 / sum.sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(z: f64) -> PrivacyEvent {
        PrivacyEvent::Gaussian {
            noise_multiplier: z,
        }
    }

    #[test]
    fn leaves_merge_counts_and_apply_parallel_composition() {
        let e = PrivacyEvent::Composed(vec![g(1.0).repeated(3), g(1.0), g(2.0)]);
        let l = leaves(&e).unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].count, 4);
        // 25 batches of 10 from 100 records: 10 per pass, so 3 passes.
        let d = g(1.0)
            .sampled(Sampling::Disjoint {
                population: 100,
                size: 10,
            })
            .repeated(25);
        let l = leaves(&d).unwrap();
        assert_eq!(
            l,
            vec![Leaf {
                event: g(1.0),
                count: 3
            }]
        );
        let d = g(1.0)
            .sampled(Sampling::Disjoint {
                population: 100,
                size: 10,
            })
            .repeated(10);
        assert_eq!(leaves(&d).unwrap()[0].count, 1);
    }

    #[test]
    fn bad_events_name_the_field() {
        let e = g(-1.0);
        match leaves(&e) {
            Err(PrivacyError::InvalidParameter { name, .. }) => {
                assert_eq!(name, "noise_multiplier")
            }
            other => panic!("{other:?}"),
        }
        let e = g(1.0).sampled(Sampling::Poisson { rate: 1.5 });
        match leaves(&e) {
            Err(PrivacyError::InvalidParameter { name, .. }) => assert_eq!(name, "rate"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn effective_gaussian_of_a_composition() {
        // 1/z² = 4·(1/4) = 1 → z = 1.
        let e = g(2.0).repeated(4);
        assert!((effective_gaussian(&e).unwrap().unwrap() - 1.0).abs() < 1e-15);
        let e = PrivacyEvent::Composed(vec![
            g(1.0),
            PrivacyEvent::Laplace {
                noise_multiplier: 1.0,
            },
        ]);
        assert_eq!(effective_gaussian(&e).unwrap(), None);
    }
}
