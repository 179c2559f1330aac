//! The shuffle wing's plan (issue 10's split into plan + halves): what each half is built
//! from, computed once per run. Building a half from it calibrates nothing: the silo's σ or
//! PVEC parameters and the (ε, δ) its ledger charges are in the plan; the server half is the
//! shuffle analyzer (PVEC) in front of a non-private Lowy server derived from the spec by
//! closed forms (`AlgorithmSpec::shuffle_inner`).

use serde::{Deserialize, Serialize};

use dpfl_privacy::PrivacyEvent;
use dpfl_privacy::sampler::RecordSampling;
use dpfl_privacy::shuffle::params::PvecParams;
use dpfl_privacy::shuffle::protocol::Pvec;

use super::pvec::{PvecServer, PvecSilo, Transport, shuffle_err};
use super::trust::ChargedAs;
use crate::algo::context::BuildContext;
use crate::algo::gradient::{BatchSource, GradientSilo};
use crate::algo::half::{ServerHalf, SiloHalf};

/// One silo's half, as planned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ShuffleSilo {
    /// Shuffled Noisy MB-SGD: a Gaussian silo; `charged` replaces its own event (trusted
    /// shuffler) when set.
    Gaussian {
        sigma: f64,
        records: usize,
        batch_size: usize,
        charged: Option<PrivacyEvent>,
    },
    /// A PVEC silo: K records per round (one pass) or all of them (`full`, PGD).
    Pvec {
        records: usize,
        batch_size: usize,
        full: bool,
        charged: (f64, f64),
    },
}

/// PVEC's parameters, shared by every silo and the analyzer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PvecPlanned {
    pub params: PvecParams,
    pub transport: Transport,
    /// K, or `None` for PGD's full batch over `users`.
    pub batch_size: Option<usize>,
    pub users: u64,
}

/// The shuffle wing's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShufflePlan {
    pub silos: Vec<ShuffleSilo>,
    pub pvec: Option<PvecPlanned>,
}

impl ShufflePlan {
    /// The analyzer (if PVEC) in front of `inner`, the spec's non-private server half.
    pub fn server_half(&self, inner: Box<dyn ServerHalf>) -> crate::Result<Box<dyn ServerHalf>> {
        Ok(match &self.pvec {
            None => inner,
            Some(p) => {
                let pvec = Pvec::new(p.params).map_err(shuffle_err)?;
                Box::new(match p.batch_size {
                    Some(k) => PvecServer::new(inner, pvec, p.transport, k),
                    None => PvecServer::full_batch(inner, pvec, p.transport, p.users),
                })
            }
        })
    }

    pub fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>> {
        let plan = self.silos.get(silo).ok_or_else(|| {
            crate::Error::config(
                "plan",
                format!("no silo {silo} in a plan of {} silos", self.silos.len()),
            )
        })?;
        let oracle = ctx.enforcing_oracle()?;
        match plan {
            ShuffleSilo::Gaussian {
                sigma,
                records,
                batch_size,
                charged,
            } => {
                let mechanism = ctx.gaussian(*sigma, 2.0 * ctx.lipschitz / *batch_size as f64)?;
                let silo = GradientSilo::new(
                    oracle,
                    BatchSource::sampled(RecordSampling::WithReplacement, *records, *batch_size)?,
                    Some(mechanism),
                    1.0,
                );
                Ok(match charged {
                    Some(event) => Box::new(ChargedAs {
                        inner: silo,
                        event: event.clone(),
                    }),
                    None => Box::new(silo),
                })
            }
            ShuffleSilo::Pvec {
                records,
                batch_size,
                full,
                charged,
            } => {
                let p = self.pvec.as_ref().ok_or_else(|| {
                    crate::Error::config("plan", "a PVEC silo in a plan without PVEC parameters")
                })?;
                let pvec = Pvec::new(p.params).map_err(shuffle_err)?;
                Ok(Box::new(if *full {
                    PvecSilo::full_batch(oracle, pvec, p.transport, *records, *charged)?
                } else {
                    PvecSilo::new(oracle, pvec, p.transport, *records, *batch_size, *charged)?
                }))
            }
        }
    }
}
