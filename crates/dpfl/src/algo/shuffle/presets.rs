//! The theorem-driven presets of PSGD (Cheu et al. Thm 4.1) and PGD (Algorithm 5, Lemma B.6;
//! digest §5.2 item 5), rounded, clamped and explained for the run report.

use super::{PgdSpec, PsgdSpec, participants, smallest_budget};
use crate::algo::checked::{one_pass_batch, positive};
use crate::algo::context::BuildContext;

/// PSGD's K, η and the preset's explanation (Cheu et al. Thm 4.1, digest §2.4): B, then K =
/// ⌈B/M⌉ clamped to [1, ⌊min n_i/R⌋] (one pass), then η at the realised B = M·K and T = R.
pub fn psgd_preset(ctx: &BuildContext, spec: &PsgdSpec) -> crate::Result<(usize, f64, String)> {
    let (eps, delta) = smallest_budget(ctx)?;
    let d = ctx.federation.dim as f64;
    let m = participants(ctx);
    let rounds = ctx.federation.rounds.max(1);
    let n_min = ctx.silos.iter().map(|s| s.records).min().unwrap_or(0);
    let ln = (d / delta).ln().max(1.0);
    let b_theory = d.sqrt() * ln / eps;
    let k_max = n_min / rounds;
    let k = match spec.batch_size {
        Some(k) => k,
        None => ((b_theory / m as f64).ceil() as usize).clamp(1, k_max.max(1)),
    };
    one_pass_batch(k, rounds, n_min)?;
    let b = (m * k) as f64;
    let eta = match spec.step_size {
        Some(eta) => eta,
        None => {
            let diameter = ctx.projection.diameter();
            if !diameter.is_finite() {
                return Err(crate::Error::config(
                    "algorithm.step_size",
                    "Thm 4.1's step needs a bounded projection (diameter D); give step_size",
                ));
            }
            diameter * eps * b
                / (ctx.lipschitz * (rounds as f64).sqrt() * (eps * b + d.sqrt() * ln))
        }
    };
    // Given, the guard checked it; the preset's must come out finite and > 0 too.
    positive("step_size", eta)?;
    let note = format!(
        "; PSGD preset (Cheu et al. Thm 4.1): B = sqrt(d) ln(d/delta)/eps = {b_theory:.1}, K = {k} per silo (B = M K = {b}, at most min n_i/R = {k_max}), eta = {eta:.4e}{}",
        if spec.step_size.is_some() {
            " (given)"
        } else {
            " = D eps B/(L sqrt(T)(eps B + sqrt(d) ln(d/delta)))"
        }
    );
    Ok((k, eta, note))
}

/// PGD's per-round budget and step: digest §5.2 item 5's sound split, δ₀ = δ/(2T),
/// ε₀ = ε/(2√(2T ln(2/δ))), checked by advanced composition (Dwork–Roth Thm 3.20) to give at
/// most (ε, δ) over T = R rounds; η = D/(L√T) (Lemma B.6) unless given.
pub fn pgd_preset(ctx: &BuildContext, spec: &PgdSpec) -> crate::Result<((f64, f64), f64, String)> {
    let (eps, delta) = smallest_budget(ctx)?;
    let t = ctx.federation.rounds.max(1) as f64;
    let eps0 = eps / (2.0 * (2.0 * t * (2.0 / delta).ln()).sqrt());
    let delta0 = delta / (2.0 * t);
    let event = dpfl_privacy::PrivacyEvent::EpsilonDelta {
        epsilon: eps0,
        delta: delta0,
    }
    .repeated(t as u64);
    let total = dpfl_privacy::accountant::AccountantKind::Advanced.epsilon(
        dpfl_privacy::Neighbouring::ReplaceOne,
        &event,
        dpfl_privacy::Delta::new(delta)?,
    )?;
    if total > eps {
        return Err(crate::Error::config(
            "algorithm",
            format!(
                "PGD's per-round (eps0, delta0) = ({eps0}, {delta0}) composes to eps = {total} > {eps} over R = {t} rounds"
            ),
        ));
    }
    let eta = match spec.step_size {
        Some(e) => e,
        None => {
            let diameter = ctx.projection.diameter();
            if !diameter.is_finite() {
                return Err(crate::Error::config(
                    "algorithm.step_size",
                    "Lemma B.6's step D/(L sqrt(T)) needs a bounded projection; give step_size",
                ));
            }
            diameter / (ctx.lipschitz * t.sqrt())
        }
    };
    // Given, the guard checked it; the preset's must come out finite and > 0 too.
    positive("step_size", eta)?;
    let note = format!(
        "; PGD preset (Cheu et al. Alg. 5; digest 5.2 item 5): eps0 = eps/(2 sqrt(2T ln(2/delta))) = {eps0:.5}, delta0 = delta/(2T) = {delta0:.3e}, advanced composition over T = {t} rounds: eps = {total:.4}; eta = {eta:.4e}{}",
        if spec.step_size.is_some() {
            " (given)"
        } else {
            " = D/(L sqrt(T)) (Lemma B.6)"
        }
    );
    Ok(((eps0, delta0), eta, note))
}
