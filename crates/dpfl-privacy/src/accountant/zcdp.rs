//! The zero-concentrated DP accountant (Bun & Steinke 2016, "Concentrated Differential
//! Privacy: Simplifications, Extensions, and Lower Bounds", TCC).
//!
//! ρ-zCDP means D_α(M(D) ‖ M(D')) ≤ ρα for all α > 1 (Def. 1.1). Costs:
//! * Gaussian with noise multiplier z: ρ = 1/(2z²) (Prop. 1.6); discrete Gaussian likewise
//!   (Canonne, Kamath & Steinke 2020, Prop. 5);
//! * pure ε-DP (Laplace with ε = 1/b, discrete Laplace, (ε, 0)): ρ = ε²/2 (Prop. 1.4);
//! * composition adds ρ (Lemma 1.7).
//!
//! Conversion: ε = ρ + 2√(ρ log(1/δ)) (Prop. 1.3). zCDP has no amplification by subsampling,
//! so sampled events are refused, as are (ε, δ) events with δ > 0.

use super::special::round_up;
use super::{Leaf, leaves, unsupported};
use crate::error::Result;
use crate::event::{Neighbouring, PrivacyEvent};
use crate::params::Delta;

const NAME: &str = "zcdp";

/// The ρ-zCDP accountant (Bun & Steinke 2016): costs add in ρ and convert once to (ε, δ); it
/// refuses sampled events (zCDP has no amplification by subsampling) and (ε, δ > 0) events.
#[derive(Debug, Clone)]
pub(crate) struct ZcdpAccountant {
    // zCDP costs here do not depend on the relation: noise multipliers are relative to the
    // sensitivity under it, and no sampling rule is applied.
    _neighbouring: Neighbouring,
}

impl ZcdpAccountant {
    /// A zCDP accountant; the relation does not change zCDP costs (noise multipliers are already
    /// relative to its sensitivity).
    pub(crate) fn new(neighbouring: Neighbouring) -> Self {
        ZcdpAccountant {
            _neighbouring: neighbouring,
        }
    }

    /// ρ of `event`.
    pub(crate) fn rho(&self, event: &PrivacyEvent) -> Result<f64> {
        let mut rho = 0.0;
        for Leaf { event, count } in leaves(event)? {
            let r = match &event {
                PrivacyEvent::Gaussian { noise_multiplier }
                | PrivacyEvent::DiscreteGaussian {
                    noise_multiplier, ..
                } => 1.0 / (2.0 * noise_multiplier * noise_multiplier),
                PrivacyEvent::Laplace { noise_multiplier }
                | PrivacyEvent::DiscreteLaplace { noise_multiplier } => {
                    let e = 1.0 / noise_multiplier;
                    e * e / 2.0
                }
                PrivacyEvent::EpsilonDelta { epsilon, delta }
                | PrivacyEvent::TruncatedDiscreteLaplace { epsilon, delta } => {
                    if *delta > 0.0 {
                        return Err(unsupported(NAME, &event, "delta > 0 has no zCDP bound"));
                    }
                    epsilon * epsilon / 2.0
                }
                PrivacyEvent::Sampled { .. } => {
                    return Err(unsupported(
                        NAME,
                        &event,
                        "zCDP has no subsampling amplification",
                    ));
                }
                PrivacyEvent::SelfComposed { .. }
                | PrivacyEvent::Composed(_)
                | PrivacyEvent::ShuffledLocal { .. }
                | PrivacyEvent::PvecSum { .. } => {
                    return Err(unsupported(
                        NAME,
                        &event,
                        "composite event reached a leaf rule",
                    ));
                }
            };
            rho += count as f64 * r;
        }
        Ok(rho)
    }

    /// ε at δ: ρ + 2√(ρ log(1/δ)) (Bun & Steinke 2016, Prop. 1.3).
    pub(crate) fn epsilon(&self, event: &PrivacyEvent, delta: Delta) -> Result<f64> {
        let rho = self.rho(event)?;
        Ok(round_up(rho_to_epsilon(rho, delta.get())))
    }
}

/// Bun & Steinke 2016, Prop. 1.3.
pub(crate) fn rho_to_epsilon(rho: f64, delta: f64) -> f64 {
    rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Sampling;

    #[test]
    fn gaussian_by_hand() {
        // z = 2, 8 releases: ρ = 8/(2·4) = 1; δ = e^{-4}: ε = 1 + 2·√4 = 5.
        let acc = ZcdpAccountant::new(Neighbouring::AddRemove);
        let e = PrivacyEvent::Gaussian {
            noise_multiplier: 2.0,
        }
        .repeated(8);
        assert_eq!(acc.rho(&e).unwrap(), 1.0);
        let eps = acc
            .epsilon(&e, Delta::new((-4.0f64).exp()).unwrap())
            .unwrap();
        assert!((eps - 5.0).abs() < 1e-10, "{eps}");
        // Laplace b = 2: ε = 0.5, ρ = 0.125.
        let l = PrivacyEvent::Laplace {
            noise_multiplier: 2.0,
        };
        assert_eq!(acc.rho(&l).unwrap(), 0.125);
        let s = PrivacyEvent::Gaussian {
            noise_multiplier: 2.0,
        }
        .sampled(Sampling::Poisson { rate: 0.1 });
        assert!(acc.rho(&s).is_err());
    }
}
