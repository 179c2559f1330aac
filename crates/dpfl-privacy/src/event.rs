//! Privacy events: what a release spends, described independently of how it is accounted
//! (after Google's `dp_accounting`). Mechanisms and samplers produce events; accountants
//! ([`crate::accountant`]) turn compositions of events into (ε, δ).

use serde::{Deserialize, Serialize};

/// Which pairs of datasets are neighbours. It changes the numbers: replacing one record
/// moves a clipped sum by up to 2C, adding or removing one by up to C.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Neighbouring {
    /// D and D' differ by one record added or removed (sensitivity of a clipped sum: C).
    AddRemove,
    /// D and D' have the same size and differ in one record (sensitivity of a clipped sum:
    /// 2C); dpfl's default, as in the ISRL-DP papers.
    ReplaceOne,
}

/// How the records a release touches were chosen from a population.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Sampling {
    /// Each record independently with probability `rate`.
    Poisson {
        /// The inclusion probability q ∈ (0, 1].
        rate: f64,
    },
    /// `draws` indices i.i.d. uniform over `population` records (a record can appear more
    /// than once in one batch).
    WithReplacement {
        /// n, the records drawn from.
        population: u64,
        /// K, the i.i.d. draws per batch.
        draws: u64,
    },
    /// A uniformly random subset of fixed `size`.
    WithoutReplacement {
        /// n, the records drawn from.
        population: u64,
        /// K ≤ n, the batch size.
        size: u64,
    },
    /// One of ⌊population/size⌋ disjoint batches of a random permutation; each record is in
    /// at most one batch, so releases compose in parallel.
    Disjoint {
        /// n, the records permuted.
        population: u64,
        /// K, the size of each disjoint batch.
        size: u64,
    },
}

/// A privacy-relevant release.
///
/// `noise_multiplier` is always σ divided by the L2 (or L1 for Laplace) sensitivity of the
/// released quantity to one record occurrence under the neighbouring relation of the
/// accounting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum PrivacyEvent {
    /// The Gaussian mechanism with noise multiplier σ/Δ₂.
    Gaussian {
        /// σ/Δ₂ > 0.
        noise_multiplier: f64,
    },
    /// The Laplace mechanism with scale b/Δ₁.
    Laplace {
        /// b/Δ₁ > 0; the release is pure (1/noise_multiplier)-DP.
        noise_multiplier: f64,
    },
    /// The discrete Gaussian N_ℤ(0, σ²) added to each of `dimension` coordinates of an integer
    /// valued query (Canonne, Kamath & Steinke 2020), with `noise_multiplier` = σ/Δ₂ and
    /// `l2_sensitivity` = Δ₂, both in lattice steps (after any rounding to the lattice).
    /// RDP and zCDP need only σ/Δ₂ (CKS20 Thm 14: ρ = Δ₂²/(2σ²) for every dimension); an exact
    /// PLD needs the integer shift and the dimension (CKS20 Thm 7 for d = 1; for d > 1 the
    /// tight curve depends on the direction of the shift, CKS20 Thm 15, whose ℓ1 bound follows
    /// from these fields: ‖v‖₁ ≤ min(√d·Δ₂, Δ₂²) for v ∈ ℤ^d).
    DiscreteGaussian {
        /// σ/Δ₂ in lattice steps.
        noise_multiplier: f64,
        /// Δ₂ in lattice steps (the PLD needs the shift itself, not only the ratio).
        l2_sensitivity: f64,
        /// d, the coordinates noised (the PLD accounts d = 1 exactly and refuses d > 1).
        dimension: u64,
    },
    /// The discrete Laplace (two-sided geometric) mechanism with scale t/Δ₁: pure
    /// (1/noise_multiplier)-DP (Ghosh, Roughgarden & Sundararajan 2012).
    DiscreteLaplace {
        /// t/Δ₁ > 0 in lattice steps.
        noise_multiplier: f64,
    },
    /// The truncated discrete Laplace mechanism, known by its (ε, δ); δ > 0 always (an upper
    /// bound of the *correct* δ, `qtdl::theorem1::worst_case_delta`, never DP-NormFedAvg's
    /// Theorem 1 claim 2^{−d}).
    TruncatedDiscreteLaplace {
        /// ε of Das et al. Theorem 1.
        epsilon: f64,
        /// The correct δ > 0 (`worst_case_delta`), never the paper's 2^{−d}.
        delta: f64,
    },
    /// A mechanism known only by an (ε, δ) guarantee.
    EpsilonDelta {
        /// ε ≥ 0.
        epsilon: f64,
        /// δ ∈ [0, 1).
        delta: f64,
    },
    /// Amplification by shuffling (Feldman, McMillan & Talwar 2021): `reports` users each
    /// apply a pure `local_epsilon`-DP local randomizer and a trusted shuffler permutes the
    /// reports. Accounted as (ε, `delta`) with ε the tighter of FMT's Theorem 3.1 and their
    /// numerical Theorem 3.2 (`shuffle::amplification::amplify`), then composed like any
    /// (ε, δ) event (RDP and zCDP refuse it: δ > 0).
    ShuffledLocal {
        /// ε₀ of each user's local randomizer (pure DP).
        local_epsilon: f64,
        /// n, the reports shuffled together.
        reports: u64,
        /// δ at which the amplified ε is stated.
        delta: f64,
    },
    /// One PVEC release (Cheu, Joseph, Mao & Peng 2022 Algorithm 2) accounted by the
    /// exact-sum accountant (`shuffle::pvec_exact`, issue 32): `dimension` coordinates, each a
    /// count Σ_i x̂_ij + Bin(`trials`, `p`) with roundings x̂ ∈ {0, …, `granularity`}. Every
    /// accountant flattens it to (ε, `delta`) with ε that accountant's value at `delta`
    /// (plus (1 + e^ε)·`sampler_tv`), then composes it like any (ε, δ) event.
    PvecSum {
        /// Binomial trials per coordinate: n·s behind a trusted shuffler, K·s for a silo's
        /// own counts.
        trials: u64,
        /// Probability of each noise bit.
        p: f64,
        /// g: the rounding granularity.
        granularity: u64,
        /// d: the coordinates.
        dimension: u64,
        /// Total-variation distance of this release's noise draws from the exact law.
        sampler_tv: f64,
        /// δ at which the release's ε is stated.
        delta: f64,
    },
    /// `event` applied to a sample of the records.
    Sampled {
        /// How the records were drawn (amplification by subsampling).
        sampling: Sampling,
        /// What the release spends on the sample.
        event: Box<PrivacyEvent>,
    },
    /// `event` repeated `count` times (adaptively).
    SelfComposed {
        /// The repeated event.
        event: Box<PrivacyEvent>,
        /// How many times (R rounds, T steps, …).
        count: u64,
    },
    /// Several events in sequence. Written as `{"kind": "composed", "events": [...]}`: an
    /// internally tagged newtype variant holding a sequence cannot carry the tag otherwise.
    #[serde(with = "composed_serde")]
    Composed(Vec<PrivacyEvent>),
}

mod composed_serde {
    use super::PrivacyEvent;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    struct Out<'a> {
        events: &'a [PrivacyEvent],
    }
    #[derive(Deserialize)]
    struct In {
        events: Vec<PrivacyEvent>,
    }

    pub(super) fn serialize<S: Serializer>(v: &[PrivacyEvent], s: S) -> Result<S::Ok, S::Error> {
        Out { events: v }.serialize(s)
    }
    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<PrivacyEvent>, D::Error> {
        Ok(In::deserialize(d)?.events)
    }
}

impl PrivacyEvent {
    /// This event on a sample drawn by `sampling` ([`PrivacyEvent::Sampled`]).
    pub fn sampled(self, sampling: Sampling) -> Self {
        PrivacyEvent::Sampled {
            sampling,
            event: Box::new(self),
        }
    }
    /// This event `count` times, adaptively ([`PrivacyEvent::SelfComposed`]).
    pub fn repeated(self, count: u64) -> Self {
        PrivacyEvent::SelfComposed {
            event: Box::new(self),
            count,
        }
    }
    /// A scalar discrete Gaussian at unit sensitivity (`dp_accounting`'s default reading).
    pub fn discrete_gaussian_scalar(noise_multiplier: f64) -> Self {
        PrivacyEvent::DiscreteGaussian {
            noise_multiplier,
            l2_sensitivity: 1.0,
            dimension: 1,
        }
    }
    /// A short human-readable description, for error messages.
    pub fn describe(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| format!("{self:?}"))
    }
}

impl std::fmt::Display for PrivacyEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

#[cfg(test)]
mod composed_serde_tests {
    use super::*;

    #[test]
    fn composed_events_round_trip_through_json() {
        let e = PrivacyEvent::Composed(vec![
            PrivacyEvent::Gaussian {
                noise_multiplier: 1.5,
            }
            .sampled(Sampling::Poisson { rate: 0.1 }),
            PrivacyEvent::Gaussian {
                noise_multiplier: 2.0,
            },
        ])
        .repeated(3);
        let text = serde_json::to_string(&e).unwrap();
        assert!(
            text.contains("\"kind\":\"composed\",\"events\":["),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<PrivacyEvent>(&text).unwrap(), e);
    }
}
