//! The shuffle wing's plan (issue 10's split into plan + halves): what each half is built
//! from, computed once per run. Building a half from it calibrates nothing: the silo's σ or
//! PVEC parameters and the (ε, δ) its ledger charges are in the plan; the server half is the
//! shuffle analyzer (PVEC) in front of a non-private Lowy server derived from the spec by
//! closed forms (`wing::ShuffleAlgorithm::server_inner`).

use serde::{Deserialize, Serialize};

use dpfl_privacy::shuffle::params::PvecParams;
use dpfl_privacy::shuffle::protocol::Pvec;

use super::honest::HonestShuffle;
use super::pvec::{Against, PvecServer, PvecSilo, Transport, shuffle_err};
use super::robust::{AbsentFilter, AbsentSilo, Behaviour, ExtremeSilo, NegatedModel};
use crate::algo::context::BuildContext;
use crate::algo::half::{ServerHalf, SiloHalf};
use crate::model::GradientOracle;

/// One silo's half, as planned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ShuffleSilo {
    /// Shuffled Noisy MB-SGD: a Gaussian silo; `charged` replaces its own event (trusted
    /// shuffler) when set.
    Gaussian {
        /// σ: standard deviation of the Gaussian noise per coordinate of the batch-mean
        /// gradient (from `super::calibration`).
        sigma: f64,
        /// n_i: the silo's records.
        records: usize,
        /// K: records sampled per round.
        batch_size: usize,
        /// `shuffler = "trusted"`: what the silo's mechanism computes its honest-shuffler
        /// round event from (`super::honest`); `None`: the silo's own ISRL-DP event.
        honest: Option<HonestShuffle>,
    },
    /// A PVEC silo: K records per round (one pass) or all of them (`full`, PGD).
    Pvec {
        /// n_i: the silo's records, one PVEC user each.
        records: usize,
        /// K: fresh records (users) per round in one-pass mode; ignored when `full`.
        batch_size: usize,
        /// PGD (Cheu et al. Algorithm 5): all n_i records answer every round.
        full: bool,
        /// Whom the silo's replies are private against (chosen by the shuffler trust model,
        /// `super::trust`): its randomizer derives the (ε, δ) per round the ledger charges.
        against: Against,
    },
    /// `inner` on the β-Moreau envelope of the loss (gradients clipped at 2L; `super::moreau`).
    Smoothed {
        /// β: the envelope's smoothness (Cheu et al. Lemma 4.6: f_β is β-smooth and
        /// 2L-Lipschitz, within L²/(2β) of f).
        beta: f64,
        /// The silo run on the smoothed loss.
        inner: Box<ShuffleSilo>,
    },
    /// A simulated adversary of the robust variant (`super::robust`); `inner` is the honest
    /// silo it replaces.
    Adversarial {
        /// What the adversary does instead of following the protocol: drop out, run the
        /// honest randomizer on the negated gradient, or send the largest count per label.
        behaviour: Behaviour,
        /// The honest silo it replaces (a `flip` adversary runs it on the negated loss; an
        /// `extreme` one takes its K).
        inner: Box<ShuffleSilo>,
    },
    /// Pan-private AC-SA's silo (`super::pan`): ζ per coordinate, drawn twice a round.
    PanPrivate {
        /// n_i: the silo's records (its stream).
        records: usize,
        /// B: records per round (batch), one pass.
        batch_size: usize,
        /// ζ: standard deviation of each of the two Gaussian draws per coordinate a round
        /// (Cheu et al. Algorithm 6: ζ² = 8L²ln(2/δ)/(B²ε²), Lemma C.5).
        zeta: f64,
        /// The (ε, δ) per round the silo's ledger charges (pan-privacy, Lemma C.4).
        guarantee: (f64, f64),
        /// L: gradients are clipped to ℓ₂ norm L (2L under `moreau`); the mean's
        /// sensitivity is 2L/B.
        lipschitz: f64,
        /// β of the Moreau envelope when the loss is smoothed (Theorem 4.7's variant).
        moreau: Option<f64>,
    },
}

/// PVEC's parameters, shared by every silo and the analyzer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PvecPlanned {
    /// Theorem 3.2's calibrated parameters (d, Δ₂, g, s, p) for `users` users per round.
    pub params: PvecParams,
    /// How the messages travel (compact shares or explicit shuffled bits).
    pub transport: Transport,
    /// K, or `None` for PGD's full batch over `users`.
    pub batch_size: Option<usize>,
    /// The users PVEC is calibrated for per round (M_min·K, or Σ n_i for PGD): its n.
    pub users: u64,
}

/// The shuffle wing's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShufflePlan {
    /// One planned half per silo, in silo order.
    pub silos: Vec<ShuffleSilo>,
    /// PVEC's shared parameters; `None` when no silo runs PVEC (Gaussian or pan-private
    /// silos: the server then has no analyzer).
    pub pvec: Option<PvecPlanned>,
}

impl ShufflePlan {
    /// The analyzer (if PVEC) in front of `inner`, the spec's non-private server half.
    pub fn server_half(&self, inner: Box<dyn ServerHalf>) -> crate::Result<Box<dyn ServerHalf>> {
        let server: Box<dyn ServerHalf> = match &self.pvec {
            None => inner,
            Some(p) => {
                let pvec = Pvec::new(p.params).map_err(shuffle_err)?;
                Box::new(match p.batch_size {
                    Some(k) => PvecServer::new(inner, pvec, p.transport, k),
                    None => PvecServer::full_batch(
                        inner,
                        pvec,
                        p.transport,
                        p.users,
                        self.silos.len() as u64,
                    ),
                })
            }
        };
        Ok(if self.has_dropouts() {
            Box::new(AbsentFilter { inner: server })
        } else {
            server
        })
    }

    /// The fewest silos whose messages a shuffled batch must hold for the honest-shuffler
    /// guarantee the plan reports (and, trusted, charges) to hold; a real shuffler withholds a
    /// smaller batch (`dpfl_net::shuffler`; docs/shuffle.md "Dropouts over the network").
    /// * one-pass PVEC: M_min = users/K silos (PVEC calibrated for M_min·K users: fewer users
    ///   mean less binomial noise, Cheu et al. Lemma A.1); with the robust variant at honest
    ///   fraction γ, ⌈γ·M_min⌉ (Cor. A.9: PVEC at ε_c is (ε_c/γ, δ)-DP for ≥ γn honest users);
    /// * PGD's full-batch PVEC: every silo (its analyzer debiases with all Σ n_i users and
    ///   cannot tell which silo is missing);
    /// * Shuffled Noisy MB-SGD: the `participants` M its amplification by shuffling
    ///   (Feldman–McMillan–Talwar over M reports) was computed for.
    pub fn quorum(&self, participants: usize, honest_fraction: Option<f64>) -> usize {
        match &self.pvec {
            Some(PvecPlanned {
                batch_size: Some(k),
                users,
                ..
            }) => {
                let m_min = (*users / (*k).max(1) as u64) as usize;
                match honest_fraction {
                    // γ·M_min rounded up, with a tolerance so that γ = 1/2 of 4 is 2.
                    Some(g) => ((g * m_min as f64 - 1e-9).ceil() as usize).clamp(1, m_min),
                    None => m_min,
                }
            }
            Some(PvecPlanned {
                batch_size: None, ..
            }) => self.silos.len(),
            None => participants,
        }
        .max(1)
    }

    /// Whether some silo is a simulated dropout (the analyzer then discards their markers).
    pub fn has_dropouts(&self) -> bool {
        self.silos.iter().any(|s| {
            matches!(
                s,
                ShuffleSilo::Adversarial {
                    behaviour: Behaviour::Drop,
                    ..
                }
            )
        })
    }

    /// Builds silo `silo`'s half from its planned entry (no calibration: σ, PVEC parameters
    /// and the charged (ε, δ) come from the plan). Errors if `silo` is out of range.
    pub fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>> {
        let plan = self.silos.get(silo).ok_or_else(|| {
            crate::Error::config(
                "plan",
                format!("no silo {silo} in a plan of {} silos", self.silos.len()),
            )
        })?;
        self.half(ctx, plan, ctx.enforcing_oracle()?)
    }

    /// The half of one plan entry with `oracle` (the smoothed or negated one where needed).
    fn half(
        &self,
        ctx: &BuildContext,
        plan: &ShuffleSilo,
        oracle: GradientOracle,
    ) -> crate::Result<Box<dyn SiloHalf>> {
        match plan {
            ShuffleSilo::Smoothed { beta, inner } => {
                let (oracle, _) = crate::algo::gradient::smoothed_oracle(ctx, Some(*beta))?;
                self.half(ctx, inner, oracle)
            }
            ShuffleSilo::Adversarial { behaviour, inner } => {
                self.adversary(ctx, *behaviour, inner, oracle)
            }
            ShuffleSilo::PanPrivate {
                records,
                batch_size,
                zeta,
                guarantee,
                lipschitz,
                moreau,
            } => Ok(Box::new(super::pan::silo_from_plan(
                ctx,
                *moreau,
                *records,
                *batch_size,
                *zeta,
                *guarantee,
                *lipschitz,
            )?)),
            ShuffleSilo::Gaussian {
                sigma,
                records,
                batch_size,
                honest,
            } => Ok(Box::new(super::honest::gaussian_silo(
                ctx,
                oracle,
                *sigma,
                *records,
                *batch_size,
                *honest,
            )?)),
            ShuffleSilo::Pvec {
                records,
                batch_size,
                full,
                against,
            } => {
                let p = self.pvec.as_ref().ok_or_else(|| {
                    crate::Error::config("plan", "a PVEC silo in a plan without PVEC parameters")
                })?;
                let pvec = Pvec::new(p.params).map_err(shuffle_err)?;
                Ok(Box::new(if *full {
                    PvecSilo::full_batch(oracle, pvec, p.transport, *records, *against)?
                } else {
                    PvecSilo::new(oracle, pvec, p.transport, *records, *batch_size, *against)?
                }))
            }
        }
    }

    /// A simulated adversary in place of the honest silo `inner`.
    fn adversary(
        &self,
        ctx: &BuildContext,
        behaviour: Behaviour,
        inner: &ShuffleSilo,
        oracle: GradientOracle,
    ) -> crate::Result<Box<dyn SiloHalf>> {
        let dim = ctx.federation.dim;
        Ok(match behaviour {
            Behaviour::Drop => Box::new(AbsentSilo { dim }),
            Behaviour::Flip => {
                let model = std::sync::Arc::new(NegatedModel {
                    inner: oracle.model_arc(),
                });
                let negated = GradientOracle::new(model, oracle.clip())?;
                self.half(ctx, inner, negated)?
            }
            Behaviour::Extreme => {
                let p = self.pvec.as_ref().ok_or_else(|| {
                    crate::Error::config("plan", "an extreme liar in a plan without PVEC")
                })?;
                let k = match inner {
                    ShuffleSilo::Pvec { batch_size, .. } => *batch_size as u64,
                    _ => 1,
                };
                Box::new(ExtremeSilo {
                    dim,
                    max: p.params.p1d.bits_per_user().saturating_mul(k),
                    transport: p.transport,
                })
            }
        })
    }
}
