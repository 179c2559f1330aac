//! Rényi accounting of compositions that contain approximate (ε, δ) events with δ > 0, which
//! the plain RDP accountant refuses (an (ε, δ) guarantee has no RDP curve). Used by the
//! per-silo ledger ([`crate::ledger`]) so that shuffle-model releases (PVEC rounds,
//! amplification by shuffling, honest-shuffler round guarantees) can be charged under
//! `enforce_budget` next to Gaussian releases.
//!
//! # The rule (δ-approximate RDP)
//! * An (ε_i, δ_i)-DP mechanism is δ_i-approximately (α, min(ε_i, αε_i²/2))-RDP at every
//!   order α at once: for each pair of neighbours its output distributions split as
//!   P = (1 − δ_i)P′ + δ_i·E, Q = (1 − δ_i)Q′ + δ_i·E′ with P′, Q′ ε_i-indistinguishable
//!   (Murtagh & Vadhan 2016, Lemma 3.2; Bun & Steinke 2016, §8: "(ε, δ)-DP implies
//!   δ-approximate ½ε²-zCDP"), and an ε-indistinguishable
//!   pair has D_α ≤ min(ε, αε²/2) (Bun & Steinke 2016, Prop. 3.3).
//! * Every other event (Gaussian, sampled Gaussian, Laplace, pure (ε, 0), …) is 0-approximately
//!   RDP with the curve of [`super::rdp::RdpAccountant`].
//! * Approximate RDP composes adaptively by adding the curves and the δ's (Bun & Steinke 2016,
//!   Lemma 8.3, whose proof is per order and carries over to RDP unchanged): the whole
//!   composition is Σδ_i-approximately ρ(α)-RDP with ρ = Σ curves.
//! * To (ε, δ): the good part converts by Balle et al. 2020 Prop. 12 at δ − Σδ_i, and the
//!   bad mass adds Σδ_i (P(S) ≤ (1 − δ_a)P′(S) + δ_a ≤ e^ε·Q(S) + δ′ + δ_a), so the result
//!   is (ε_RDP(δ − Σδ_i), δ)-DP.
//! * When every event is an (ε, δ) event, basic composition (Σε_i, Σδ_i) is also sound and
//!   needs no conversion slack; the smaller ε is taken. So one release calibrated to the whole
//!   budget (a PVEC silo's single pass) is charged at its own ε. Otherwise, if the events'
//!   own δ already reach δ, the composition is refused.
//!
//! This is never worse than basic composition "alongside" the RDP part: with the constant
//! curve ε_i instead of min(ε_i, αε_i²/2) the conversion gives exactly
//! ε_RDP(δ − Σδ_i) + Σε_i; the αε²/2 branch is what lets many small (ε_i, δ_i) events
//! compose like advanced composition (√k growth) instead of linearly.
//!
//! Disjoint batches are flattened by parallel composition first ([`super::leaves`]), so a
//! PVEC silo's per-batch (ε, δ) counts once per pass over its records.

use super::rdp::{RdpAccountant, epsilon_from_rdp, pure_dp_rdp};
use super::special::round_up;
use super::{Leaf, leaves};
use crate::error::Result;
use crate::event::{Neighbouring, PrivacyEvent};
use crate::params::Delta;

/// The (ε_i, δ_i, count) of the approximate leaves of `event` (δ_i > 0), and the rest as one
/// composed event (`None` if there is none).
/// (ε_i, δ_i, count) of each approximate leaf.
type ApproxLeaves = Vec<(f64, f64, u64)>;

fn split(event: &PrivacyEvent) -> Result<(ApproxLeaves, Option<PrivacyEvent>)> {
    let mut approx = Vec::new();
    let mut rest = Vec::new();
    for Leaf { event, count } in leaves(event)? {
        match event {
            PrivacyEvent::EpsilonDelta { epsilon, delta }
            | PrivacyEvent::TruncatedDiscreteLaplace { epsilon, delta }
                if delta > 0.0 =>
            {
                approx.push((epsilon, delta, count))
            }
            other => rest.push(other.repeated(count)),
        }
    }
    let rest = (!rest.is_empty()).then_some(PrivacyEvent::Composed(rest));
    Ok((approx, rest))
}

/// Whether `event` contains an (ε, δ) leaf with δ > 0 (which plain RDP refuses).
pub(crate) fn has_approximate(event: &PrivacyEvent) -> Result<bool> {
    Ok(!split(event)?.0.is_empty())
}

/// ε at `delta` of `event` by δ-approximate RDP (module docs): the RDP curve of the noise
/// events plus min(ε_i, αε_i²/2) per (ε_i, δ_i) event, converted at δ − Σδ_i; `f64::INFINITY`
/// if the events' own δ leave nothing of `delta`. Errors on any numerical failure (never a
/// smaller ε).
pub(crate) fn approximate_rdp_epsilon(
    neighbouring: Neighbouring,
    event: &PrivacyEvent,
    delta: Delta,
) -> Result<f64> {
    let acc = RdpAccountant::new(neighbouring);
    let (approx, rest) = split(event)?;
    let mut curve = match &rest {
        Some(e) => acc.rdp(e)?,
        None => vec![0.0; acc.orders().len()],
    };
    let mut own_delta = 0.0f64;
    let mut basic = 0.0f64;
    for &(eps, d, count) in &approx {
        own_delta += d * count as f64;
        basic += eps * count as f64;
        for (c, &a) in curve.iter_mut().zip(acc.orders()) {
            *c += count as f64 * pure_dp_rdp(eps, a);
        }
    }
    // Rounded up so that the δ left for the conversion is never overstated; one event is
    // taken exactly (a release calibrated to the whole budget's δ must still fit).
    let (own_delta, basic) = match approx.as_slice() {
        [(e, d, 1)] => (*d, *e),
        _ => (
            own_delta * (1.0 + 4.0 * f64::EPSILON),
            round_up(basic * (1.0 + 4.0 * f64::EPSILON)),
        ),
    };
    // Basic composition (Dwork & Roth Thm 3.16) when there are only (ε, δ) events: it
    // needs no conversion slack, so it also covers events that use the whole δ.
    let basic = (rest.is_none() && own_delta <= delta.get()).then_some(basic);
    let left = delta.get() - own_delta;
    if left.is_nan() || left <= 0.0 {
        // No finite ε holds at this δ: ∞, which every budget check refuses (a ledger turns
        // it into `BudgetExceeded`, not an error that stops the run).
        return Ok(basic.unwrap_or(f64::INFINITY));
    }
    let rdp = epsilon_from_rdp(acc.orders(), &curve, left).map(|(e, _)| e)?;
    Ok(basic.map_or(rdp, |b| b.min(rdp)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Sampling;

    fn ed(epsilon: f64, delta: f64) -> PrivacyEvent {
        PrivacyEvent::EpsilonDelta { epsilon, delta }
    }

    #[test]
    fn a_few_events_cost_basic_composition() {
        // k (1, 1e-7) events at δ = 1e-5: basic gives k; the RDP conversion of the curve
        // k·min(1, α/2) at δ′ = 1e-5 − k·1e-7 gives k + 0.0035 (by hand over the default
        // orders: 1.003511 at k = 1, 2.003521 at k = 2), so basic composition is taken.
        let d = Delta::new(1e-5).unwrap();
        for k in [1u64, 2] {
            let e =
                approximate_rdp_epsilon(Neighbouring::ReplaceOne, &ed(1.0, 1e-7).repeated(k), d)
                    .unwrap();
            assert!(e >= k as f64 && e - (k as f64) < 1e-9, "{k}: {e}");
        }
    }

    #[test]
    fn many_small_events_grow_like_sqrt_k() {
        // k = 10⁴ events of (0.01, 1e-10) at δ = 1e-5: basic composition gives 100; the
        // curve is min(100, 0.5α) (ρ = kε²/2 = 0.5), converted at δ′ = 9e-6: min over the
        // orders of 0.5α + log(1 − 1/α) − log(δ′α)/(α − 1) = 4.7523 (by hand, over the default orders),
        // below zCDP's ρ + 2√(ρ ln(1/δ′)) = 5.32.
        let e = approximate_rdp_epsilon(
            Neighbouring::ReplaceOne,
            &ed(0.01, 1e-10).repeated(10_000),
            Delta::new(1e-5).unwrap(),
        )
        .unwrap();
        assert!((e - 4.752338).abs() < 1e-4, "{e}");
    }

    #[test]
    fn gaussian_part_is_plain_rdp_and_the_sum_is_at_most_basic() {
        let g = PrivacyEvent::Gaussian {
            noise_multiplier: 2.0,
        }
        .repeated(10);
        let acc = RdpAccountant::new(Neighbouring::ReplaceOne);
        let d = Delta::new(1e-5).unwrap();
        let alone = acc.epsilon(&g, Delta::new(1e-5 - 1e-6).unwrap()).unwrap();
        let both = PrivacyEvent::Composed(vec![g.clone(), ed(0.5, 1e-6)]);
        let e = approximate_rdp_epsilon(Neighbouring::ReplaceOne, &both, d).unwrap();
        // Never above basic composition of the RDP part at the remaining δ and the event.
        assert!(e <= alone + 0.5 + 1e-12, "{e} vs {alone} + 0.5");
        assert!(e > acc.epsilon(&g, d).unwrap(), "{e}");
        // Without approximate events it is the RDP accountant's answer.
        assert_eq!(
            approximate_rdp_epsilon(Neighbouring::ReplaceOne, &g, d).unwrap(),
            acc.epsilon(&g, d).unwrap()
        );
    }

    #[test]
    fn disjoint_batches_count_once_per_pass_and_delta_is_checked() {
        // 20 batches of 10 from 100 records: 2 passes of the (1, 1e-6) event.
        let batches = ed(1.0, 1e-6)
            .sampled(Sampling::Disjoint {
                population: 100,
                size: 10,
            })
            .repeated(20);
        let twice = ed(1.0, 1e-6).repeated(2);
        let d = Delta::new(1e-5).unwrap();
        assert_eq!(
            approximate_rdp_epsilon(Neighbouring::ReplaceOne, &batches, d).unwrap(),
            approximate_rdp_epsilon(Neighbouring::ReplaceOne, &twice, d).unwrap()
        );
        assert!(has_approximate(&batches).unwrap());
        // The events' own δ (11 × 1e-6) exceed δ = 1e-5: no finite ε.
        let e = approximate_rdp_epsilon(Neighbouring::ReplaceOne, &ed(1.0, 1e-6).repeated(11), d)
            .unwrap();
        assert_eq!(e, f64::INFINITY);
    }

    #[test]
    fn an_event_at_the_whole_delta_is_charged_by_basic_composition() {
        let d = Delta::new(1e-5).unwrap();
        let e = approximate_rdp_epsilon(Neighbouring::ReplaceOne, &ed(1.5, 1e-5), d).unwrap();
        assert!(e >= 1.5 && e - 1.5 < 1e-9, "{e}");
        // Two of them need 2e-5: no finite ε. With a Gaussian next to it, nothing is left
        // for the Gaussian's conversion: none either.
        assert_eq!(
            approximate_rdp_epsilon(Neighbouring::ReplaceOne, &ed(1.5, 1e-5).repeated(2), d)
                .unwrap(),
            f64::INFINITY
        );
        let g = PrivacyEvent::Gaussian {
            noise_multiplier: 5.0,
        };
        let both = PrivacyEvent::Composed(vec![g, ed(1.5, 1e-5)]);
        assert_eq!(
            approximate_rdp_epsilon(Neighbouring::ReplaceOne, &both, d).unwrap(),
            f64::INFINITY
        );
    }
}
