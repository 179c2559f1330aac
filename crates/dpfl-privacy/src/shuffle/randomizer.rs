//! PVEC's randomizer as a silo's [`Mechanism`]: a silo's reply is the summed per-label counts
//! of `users` PVEC users (RVEC, Cheu, Joseph, Mao & Peng 2022 Algorithm 2; [`Pvec::counts`]
//! per user), and the event one reply spends is computed from the protocol's own parameters,
//! against the party the silo's trust model names ([`Against`]):
//! * an honest shuffler: Theorem 3.2's (ε, δ), the target PVEC's parameters were calibrated
//!   for (kept in [`crate::shuffle::params::PvecCalibration`]); with only a γ fraction of
//!   honest users, (ε/γ, δ) (Cor. A.9). Parameters calibrated by the exact-sum accountant
//!   (`PvecRule::Accountant`, issue 32) report the release itself,
//!   [`PrivacyEvent::PvecSum`], with ⌊γn⌋·s trials under the robust variant;
//! * a server that sees the silo's own counts (no trusted shuffler): the binomial noise of
//!   the summed counts, Lemma A.1 over the coordinates ([`super::local`]), at the δ given.

use serde::{Deserialize, Serialize};

use super::local::silo_round_guarantee;
use super::params::PvecRule;
use super::protocol::Pvec;
use super::{Result, ShuffleError};
use crate::error::PrivacyError;
use crate::event::PrivacyEvent;
use crate::mechanism::Mechanism;
use crate::rng::DpRng;

/// Whom a PVEC silo's reply is private against, which decides its event (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Against {
    /// The server behind an honest shuffler: Theorem 3.2's calibrated (ε, δ), divided by the
    /// honest fraction γ when set (Cor. A.9).
    HonestShuffler {
        /// γ ∈ (0, 1] of the robust variant; `None`: every user honest.
        honest_fraction: Option<f64>,
    },
    /// A server that sees the silo's own counts: Lemma A.1 at this δ per reply.
    OwnCounts {
        /// δ of one reply.
        delta: f64,
    },
}

/// RVEC for the `users` users one silo reply sums (module docs).
#[derive(Debug, Clone)]
pub struct PvecRandomizer {
    pvec: Pvec,
    users: u64,
    against: Against,
}

impl PvecRandomizer {
    /// The randomizer of a silo summing `users` users' counts, private `against` a party.
    /// Errors: no users; an honest-shuffler event for parameters that were not calibrated
    /// (no (ε, δ) to report) or γ outside (0, 1]. Where Lemma A.1 gives no guarantee for
    /// [`Against::OwnCounts`] the event is ε = ∞, which no ledger accepts.
    pub fn new(pvec: Pvec, users: u64, against: Against) -> Result<Self> {
        if users == 0 {
            return Err(PrivacyError::invalid("users", 0.0, "need at least one user").into());
        }
        match against {
            Against::HonestShuffler { honest_fraction } => {
                if pvec.params().calibration.is_none() {
                    return Err(ShuffleError::Inconsistent(
                        "an honest-shuffler PVEC event needs calibrated parameters".into(),
                    ));
                }
                if let Some(g) = honest_fraction
                    && !(g > 0.0 && g <= 1.0)
                {
                    return Err(
                        PrivacyError::invalid("honest_fraction", g, "must lie in (0, 1]").into(),
                    );
                }
            }
            Against::OwnCounts { .. } => {}
        }
        Ok(PvecRandomizer {
            pvec,
            users,
            against,
        })
    }
    /// The protocol (parameters and analyzer).
    pub fn pvec(&self) -> &Pvec {
        &self.pvec
    }
    /// The users one reply sums.
    pub fn users(&self) -> u64 {
        self.users
    }
    /// Whom the reply is private against.
    pub fn against(&self) -> Against {
        self.against
    }
}

impl Mechanism for PvecRandomizer {
    /// One user's vector (clipped to Δ₂ inside).
    type Input<'a> = [f64];
    /// That user's per-label counts; a reply sums `users` of them.
    type Output = Vec<u64>;
    type Error = ShuffleError;
    fn release(&mut self, x: &mut [f64], rng: &mut DpRng) -> Result<Vec<u64>> {
        self.pvec.counts(x, rng)
    }
    /// The event of one reply (`users` users' summed counts).
    fn privacy_event(&self) -> PrivacyEvent {
        match self.against {
            Against::HonestShuffler { honest_fraction }
                if self.pvec.params().calibration.map(|c| c.rule) == Some(PvecRule::Accountant) =>
            {
                // Issue 32: the release itself, for the exact-sum accountant. With a γ fraction
                // of honest users only their noise counts (Cor. A.9): ⌊γn⌋·s trials.
                let params = self.pvec.params();
                let n = params.p1d.n;
                let honest = honest_fraction.map_or(n, |g| (g * n as f64).floor() as u64);
                let delta = params.calibration.map_or(1.0, |c| c.delta);
                PrivacyEvent::PvecSum {
                    trials: honest.max(1).saturating_mul(params.p1d.s),
                    p: params.p1d.p,
                    granularity: params.p1d.g,
                    dimension: params.d as u64,
                    sampler_tv: n as f64 * params.d as f64 * self.pvec.noise_tv_bound(),
                    delta,
                }
            }
            Against::HonestShuffler { honest_fraction } => {
                // Checked at construction; an uncalibrated PVEC would report no guarantee.
                let (epsilon, delta) = self
                    .pvec
                    .params()
                    .calibration
                    .map_or((f64::INFINITY, 1.0), |c| (c.epsilon, c.delta));
                PrivacyEvent::EpsilonDelta {
                    epsilon: honest_fraction.map_or(epsilon, |g| epsilon / g),
                    delta,
                }
            }
            Against::OwnCounts { delta } => {
                let p = self.pvec.params();
                // No guarantee from Lemma A.1 (too little binomial noise): ε = ∞.
                let epsilon =
                    silo_round_guarantee(p, self.users, delta, self.pvec.noise_tv_bound())
                        .map_or(f64::INFINITY, |g| g.epsilon);
                PrivacyEvent::EpsilonDelta { epsilon, delta }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shuffle::params::{PvecParams, Scale};

    #[test]
    fn the_event_follows_the_parameters_and_the_trust_model() {
        let params = PvecParams::calibrate(40, 3, 1.0, 1.0, 1e-6, Scale::Paper).unwrap();
        let pvec = Pvec::new(params).unwrap();
        let honest = PvecRandomizer::new(
            pvec.clone(),
            4,
            Against::HonestShuffler {
                honest_fraction: None,
            },
        )
        .unwrap();
        assert_eq!(
            honest.privacy_event(),
            PrivacyEvent::EpsilonDelta {
                epsilon: 1.0,
                delta: 1e-6
            }
        );
        let robust = PvecRandomizer::new(
            pvec.clone(),
            4,
            Against::HonestShuffler {
                honest_fraction: Some(0.5),
            },
        )
        .unwrap();
        assert_eq!(
            robust.privacy_event(),
            PrivacyEvent::EpsilonDelta {
                epsilon: 2.0,
                delta: 1e-6
            }
        );
        // Own counts: Lemma A.1 at the silo's users; more users (more binomial noise) cost less.
        let own = |users| {
            PvecRandomizer::new(pvec.clone(), users, Against::OwnCounts { delta: 1e-5 })
                .map(|r| r.privacy_event())
        };
        let g = silo_round_guarantee(&params, 40, 1e-5, pvec.noise_tv_bound()).unwrap();
        assert_eq!(
            own(40).unwrap(),
            PrivacyEvent::EpsilonDelta {
                epsilon: g.epsilon,
                delta: 1e-5
            }
        );
        let (
            PrivacyEvent::EpsilonDelta { epsilon: e40, .. },
            Ok(PrivacyEvent::EpsilonDelta { epsilon: e400, .. }),
        ) = (own(40).unwrap(), own(400))
        else {
            panic!("(ε, δ) events")
        };
        assert!(e400 < e40, "{e400} vs {e40}");
        // Hand-set parameters carry no Theorem 3.2 target: refused for the honest shuffler.
        let hand =
            Pvec::new(PvecParams::with_p1d(6, 2, 1.0, Scale::Paper, 4, 20, 0.25).unwrap()).unwrap();
        assert!(
            PvecRandomizer::new(
                hand,
                2,
                Against::HonestShuffler {
                    honest_fraction: None
                }
            )
            .is_err()
        );
        assert!(PvecRandomizer::new(pvec, 0, Against::OwnCounts { delta: 1e-5 }).is_err());
    }
}
