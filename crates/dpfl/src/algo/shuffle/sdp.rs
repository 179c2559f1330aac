//! Shuffled Noisy MB-SGD (Lowy & Razaviyayn §5, Algorithm 3 under a shuffler): each silo's
//! Gaussian-noised minibatch gradient, amplified by shuffling (Feldman, McMillan & Talwar
//! 2021). Under a trusted shuffler every silo runs one common σ ([`super::calibration`]).

use super::calibration::{SdpInputs, sdp_noise};
use super::honest::{HonestShuffle, gaussian_silo};
use super::plan::ShuffleSilo;
use super::trust::ShufflerTrust;
use super::{Planned, SdpMbSgdSpec, calibration, participants, trust};
use crate::algo::context::{BuildContext, BuiltAlgorithm, SiloCalibration, count_calibration};
use crate::algo::half::{ServerHalf, SiloHalf};

/// Shuffled Noisy MB-SGD's halves around `server` (an averaging server half).
///
/// Under a trusted shuffler every silo runs one common σ, the strictest silo's
/// ([`calibration`]'s module doc: FMT 2021 Thm 3.2 needs one randomizer per shuffle).
pub(crate) fn build_sdp_mbsgd(
    ctx: &BuildContext,
    spec: &SdpMbSgdSpec,
    server: Box<dyn ServerHalf>,
) -> crate::Result<Planned> {
    // Both guarantees below are the continuous Gaussian's (the local randomizer's exact
    // curve, its ISRL-DP event): a discrete Gaussian would run uncertified.
    if !matches!(ctx.noise, dpfl_privacy::GaussianNoise::Gaussian) {
        return Err(crate::Error::config(
            "privacy.mechanism",
            "sdp-mb-sgd is calibrated for the continuous Gaussian only; use mechanism = \"gaussian\"",
        ));
    }
    let oracle = ctx.enforcing_oracle()?;
    let rounds = ctx.federation.rounds;
    let mut silos: Vec<Box<dyn SiloHalf>> = Vec::with_capacity(ctx.silos.len());
    let mut report = Vec::with_capacity(ctx.silos.len());
    let mut solved: Vec<(SdpInputs, calibration::SdpNoise)> = Vec::new();
    let mut planned = Vec::with_capacity(ctx.silos.len());
    let mut chains = Vec::with_capacity(ctx.silos.len());
    for s in &ctx.silos {
        let (eps, delta) = ctx.budget(s)?;
        let x = SdpInputs {
            epsilon: eps.get(),
            delta: delta.get(),
            records: s.records,
            batch_size: spec.batch_size,
            silos: ctx.federation.silos,
            participants: participants(ctx),
            rounds,
            lipschitz: ctx.lipschitz,
        };
        // Silos with the same public facts get the same σ: solve the chain once per kind.
        let noise = match solved.iter().find(|(y, _)| *y == x) {
            Some((_, n)) => n.clone(),
            None => {
                let n = sdp_noise(&x, spec.calibration)?;
                solved.push((x, n.clone()));
                n
            }
        };
        chains.push((s, x, noise));
    }
    // Trusted: one randomizer for the whole shuffle, at the strictest silo's σ.
    let common = match spec.shuffler {
        ShufflerTrust::Trusted => chains
            .iter()
            .map(|(s, _, n)| (n.sigma, s.id))
            .max_by(|a, b| a.0.total_cmp(&b.0)),
        ShufflerTrust::Untrusted => None,
    };
    for (s, x, noise) in chains {
        let (eps, _) = ctx.budget(s)?;
        let sigma = match common {
            // Untrusted shuffler: the silo's own Gaussian must meet its budget (σ raised if not).
            None => trust::sigma_for(noise.sigma, eps.get(), |s| calibration::isrl_epsilon(&x, s))?,
            Some((sigma, _)) => sigma,
        };
        let isrl = calibration::isrl_epsilon(&x, sigma)?;
        // Trusted: charge the honest-shuffler round guarantee of the common randomizer where
        // the chain computed one; under the theory rule there is none, so the silo's own
        // event (at the common σ) is charged. Checked here against the budget; the silo's
        // mechanism derives the event it charges from its own σ (`super::honest`).
        let shared = match (common, noise.local) {
            (Some(_), Some((_, delta0))) => {
                Some(calibration::shared_round(&x, sigma, delta0).map_err(|e| {
                    crate::Error::config("algorithm.shuffler", format!("silo {}: {e}", s.id))
                })?)
            }
            _ => None,
        };
        let shuffled = match (&shared, noise.shuffled_epsilon) {
            (Some(r), _) => format!("{:.4}", r.total),
            (None, Some(e)) => format!("{:.4}", e.min(isrl)),
            (None, None) => "not computed (theory rule)".to_string(),
        };
        let honest = shared.as_ref().map(|r| HonestShuffle {
            chain: x,
            delta0: r.delta0,
        });
        let charged = match (&shared, common) {
            (Some(r), Some((_, strictest))) => format!(
                "the honest-shuffler round guarantee charged: every silo shares the strictest silo's sigma (silo {strictest}; FMT 2021 Thm 3.2 needs one randomizer per shuffle), local (eps0, delta0) = ({:.4}, {:.3e}), per round ({:.4}, {:.3e})",
                r.eps0, r.delta0, r.round.0, r.round.1
            ),
            (None, Some((_, strictest))) => format!(
                "the silo's own noise charged at the strictest silo's sigma (silo {strictest}), shared by every silo of the shuffle"
            ),
            _ => "the silo's own noise charged".to_string(),
        };
        let formula = format!(
            "{}; against the server: eps = {shuffled} given an honest shuffler, eps = {isrl:.4} without it (sigma = {sigma:.4}; shuffler = {}, {charged})",
            noise.formula,
            spec.shuffler.name()
        );
        count_calibration();
        planned.push(ShuffleSilo::Gaussian {
            sigma,
            records: s.records,
            batch_size: spec.batch_size,
            honest,
        });
        let half: Box<dyn SiloHalf> = Box::new(gaussian_silo(
            ctx,
            oracle.clone(),
            sigma,
            s.records,
            spec.batch_size,
            honest,
        )?);
        report.push(SiloCalibration {
            silo: s.id,
            sigma,
            batch_size: spec.batch_size,
            formula,
            run_event: half
                .round_event(crate::units::Round::FIRST)
                .map(|e| e.repeated(rounds as u64)),
        });
        silos.push(half);
    }
    Ok((
        BuiltAlgorithm {
            server,
            silos,
            calibration: report,
        },
        planned,
        None,
    ))
}
