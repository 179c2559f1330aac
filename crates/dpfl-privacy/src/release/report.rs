//! `dpfl account` and `dpfl calibrate` as the one JSON object each prints. The command line
//! and the Python package (`dpfl.account_release` / `dpfl.calibrate_release`) both return
//! exactly this object, so they cannot drift: they did once, when issue 27's "both accountants,
//! the tighter one printed" reached the CLI only and CI caught the Python package printing the
//! old figure.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Release, ReleaseError, ReleaseMechanism, check_noise_multiplier};
use crate::accountant::AccountantKind;
use crate::accountant::lower_bound::{
    LOWER_DISCRETIZATION, epsilon_lower_bound_with, shown_beside,
};
use crate::accountant::pld::PldAccountant;
use crate::accountant::sampled_pld::PoissonPair;
use crate::calibration::{
    analytic_gaussian_noise_multiplier, calibrate_noise_multiplier_with_progress,
};
use crate::event::Sampling;
use crate::{Delta, Epsilon, Neighbouring, PrivacyError, PrivacyEvent};

/// How long [`account_report`] waits for the best-effort lower bound before answering
/// without it (issue 27 finding 5: it took up to 45 s and could fail the whole call).
pub const LOWER_BOUND_SECONDS: u64 = 20;

/// Why a report was refused: a parameter (naming its flag), or the accountant (naming the flag
/// the caller should blame, e.g. `--accountant`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// A release parameter was refused.
    #[error(transparent)]
    Release(#[from] ReleaseError),
    /// The accountant or calibration failed; `field` is the flag to name.
    #[error("{field}: {error}")]
    Privacy {
        /// The flag the failure is blamed on.
        field: &'static str,
        /// What failed.
        error: PrivacyError,
    },
}

fn privacy(field: &'static str) -> impl FnOnce(PrivacyError) -> ReportError {
    move |error| ReportError::Privacy { field, error }
}

/// ε of `event` by `kind`, the PLD with `pair` for Poisson under replace-one.
fn epsilon_of(
    kind: AccountantKind,
    nb: Neighbouring,
    event: &PrivacyEvent,
    delta: Delta,
    pair: PoissonPair,
) -> Result<f64, PrivacyError> {
    match kind {
        AccountantKind::Pld => PldAccountant::new(nb)
            .with_poisson_pair(pair)
            .epsilon(event, delta),
        other => other.epsilon(nb, event, delta),
    }
}

/// The lower bound of a concrete neighbouring pair, computed on a worker thread started before
/// the upper bounds; [`LowerBound::wait`] gives up `limit` after the start.
struct LowerBound {
    rx: mpsc::Receiver<Result<Option<f64>, PrivacyError>>,
    start: Instant,
    limit: Duration,
}

impl LowerBound {
    fn start(
        event: &PrivacyEvent,
        nb: Neighbouring,
        delta: Delta,
        pair: PoissonPair,
        limit: Duration,
    ) -> Self {
        let (tx, rx) = mpsc::channel();
        let ev = event.clone();
        std::thread::spawn(move || {
            // The receiver may have given up; the bound is then simply dropped.
            let _ = tx.send(epsilon_lower_bound_with(
                &ev,
                nb,
                delta,
                LOWER_DISCRETIZATION,
                pair,
            ));
        });
        LowerBound {
            rx,
            start: Instant::now(),
            limit,
        }
    }

    /// The bound, or null and the reason when it failed, timed out or has no pair.
    fn wait(self) -> (Option<f64>, Option<String>) {
        let left = self.limit.saturating_sub(self.start.elapsed());
        match self.rx.recv_timeout(left) {
            Ok(Ok(Some(l))) => (Some(l), None),
            Ok(Ok(None)) => (
                None,
                Some("dpfl has no concrete neighbouring pair for this event".into()),
            ),
            Ok(Err(e)) => (None, Some(e.to_string())),
            Err(_) => (
                None,
                Some(format!(
                    "not computed within {} s (best effort)",
                    self.limit.as_secs()
                )),
            ),
        }
    }
}

/// `dpfl account`: ε of `release` at noise multiplier `z` and `delta`.
///
/// RDP and the PLD are both sound upper bounds: with either asked for, the other is computed
/// too (best effort) and the tighter one is `epsilon`, both shown (issue 27: the PLD's BBG
/// profile for sampling with replacement printed 2.82 where RDP gives 2.35). The lower bound of
/// a concrete neighbouring pair is best effort, waited for at most `lower_bound_limit`, and
/// never shown above an upper bound computed here.
pub fn account_report(
    release: &Release,
    z: f64,
    delta: Delta,
    accountant: AccountantKind,
    pair: PoissonPair,
    lower_bound_limit: Duration,
) -> Result<Value, ReportError> {
    check_noise_multiplier(z)?;
    let sampling = release.sampling()?;
    let event = release.event(z, &sampling);
    let nb = release.neighbouring();
    let lower = LowerBound::start(&event, nb, delta, pair, lower_bound_limit);
    let asked = epsilon_of(accountant, nb, &event, delta, pair).map_err(privacy("--accountant"))?;
    let other = match accountant {
        AccountantKind::Rdp => Some(AccountantKind::Pld),
        AccountantKind::Pld => Some(AccountantKind::Rdp),
        _ => None,
    };
    let mut notes = serde_json::Map::new();
    let (mut eps, mut used) = (asked, accountant);
    let mut both = vec![(format!("{}_epsilon", accountant.name()), json!(asked))];
    if let Some(o) = other {
        let key = format!("{}_epsilon", o.name());
        match epsilon_of(o, nb, &event, delta, pair) {
            Ok(e) => {
                both.push((key, json!(e)));
                if e < eps {
                    (eps, used) = (e, o);
                }
            }
            Err(why) => {
                both.push((key.clone(), Value::Null));
                notes.insert(key, json!(why.to_string()));
            }
        }
    }
    let (lower, why) = lower.wait();
    let (lower, withheld) = shown_beside(lower, Some(eps));
    if let Some(why) = withheld.or(why) {
        notes.insert("epsilon_lower_bound".into(), json!(why));
    }
    let mut out = json!({
        "epsilon": eps,
        "epsilon_accountant": used.name(),
        "epsilon_lower_bound": lower,
        "delta": delta.get(),
        "accountant": accountant.name(),
        "neighbouring": nb,
        "noise_multiplier": z,
        "steps": release.steps,
        "event": event,
    });
    for (k, v) in both {
        out[k] = v;
    }
    if matches!(sampling, Some(Sampling::Poisson { .. })) && nb == Neighbouring::ReplaceOne {
        out["poisson_pair"] = json!(pair.describe());
    }
    if !notes.is_empty() {
        out["notes"] = Value::Object(notes);
    }
    Ok(out)
}

/// `dpfl calibrate`: the smallest noise multiplier whose ε by `accountant` is at most
/// `target`, calling `progress(z, ε)` after every accountant evaluation. One Gaussian release
/// also gets the analytic Gaussian mechanism's exact multiplier (Balle & Wang 2018).
pub fn calibrate_report(
    release: &Release,
    target: Epsilon,
    delta: Delta,
    accountant: AccountantKind,
    mut progress: impl FnMut(f64, f64),
) -> Result<Value, ReportError> {
    let sampling = release.sampling()?;
    let nb = release.neighbouring();
    // The search evaluates its answer before returning it (issue 30: that evaluation is
    // reused, not repeated; the accountant is deterministic in its inputs).
    let mut seen: Vec<(f64, f64)> = Vec::new();
    let z = calibrate_noise_multiplier_with_progress(
        |z| release.event(z, &sampling),
        accountant,
        nb,
        target,
        delta,
        |z, e| {
            seen.push((z, e));
            progress(z, e)
        },
    )
    .map_err(privacy("--accountant"))?;
    let event = release.event(z, &sampling);
    let achieved = match seen.iter().rev().find(|(x, _)| x.to_bits() == z.to_bits()) {
        Some(&(_, e)) if e.is_finite() => e,
        _ => accountant
            .epsilon(nb, &event, delta)
            .map_err(privacy("--accountant"))?,
    };
    let mut out = json!({
        "noise_multiplier": z,
        "epsilon": target.get(),
        "epsilon_achieved": achieved,
        "delta": delta.get(),
        "accountant": accountant.name(),
        "neighbouring": nb,
        "steps": release.steps,
        "event": event,
    });
    if sampling.is_none() && release.steps == 1 && release.mechanism == ReleaseMechanism::Gaussian {
        let a = analytic_gaussian_noise_multiplier(target, delta).map_err(privacy("--epsilon"))?;
        out["analytic_gaussian_noise_multiplier"] = json!(a);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::release::SamplingKind;

    fn poisson() -> Release {
        Release {
            mechanism: ReleaseMechanism::Gaussian,
            sampling: SamplingKind::Poisson,
            rate: Some(0.01),
            steps: 1000,
            neighbouring: None,
            dataset_size: None,
        }
    }

    #[test]
    fn account_prints_the_tighter_of_rdp_and_pld_and_both() {
        let d = Delta::new(1e-5).unwrap();
        let limit = Duration::from_secs(LOWER_BOUND_SECONDS);
        let out = account_report(
            &poisson(),
            1.0,
            d,
            AccountantKind::Rdp,
            PoissonPair::Ball,
            limit,
        )
        .unwrap();
        let rdp = out["rdp_epsilon"].as_f64().unwrap();
        let pld = out["pld_epsilon"].as_f64().unwrap();
        // Abadi et al.'s q = 0.01, z = 1, T = 1000: RDP 2.10 (the README's figure), PLD 1.83.
        assert!((rdp - 2.1014).abs() < 1e-3, "{rdp}");
        assert!((pld - 1.8282).abs() < 1e-3, "{pld}");
        assert_eq!(out["epsilon"].as_f64(), Some(pld));
        assert_eq!(out["epsilon_accountant"], "pld");
        assert_eq!(out["accountant"], "rdp");
        let lower = out["epsilon_lower_bound"].as_f64().unwrap();
        assert!(lower > 1.7 && lower <= pld, "{lower}");
    }

    #[test]
    fn refusals_name_the_flag() {
        let d = Delta::new(1e-5).unwrap();
        let limit = Duration::from_secs(1);
        let e = account_report(
            &poisson(),
            -1.0,
            d,
            AccountantKind::Rdp,
            PoissonPair::Ball,
            limit,
        )
        .unwrap_err();
        assert!(matches!(
            e,
            ReportError::Release(ReleaseError {
                field: "--noise-multiplier",
                ..
            })
        ));
        let mut r = poisson();
        r.rate = None;
        let e = calibrate_report(
            &r,
            Epsilon::new(1.0).unwrap(),
            d,
            AccountantKind::Rdp,
            |_, _| {},
        )
        .unwrap_err();
        assert!(matches!(
            e,
            ReportError::Release(ReleaseError {
                field: "--rate",
                ..
            })
        ));
    }

    #[test]
    fn one_gaussian_release_also_gets_the_analytic_multiplier() {
        let r = Release {
            sampling: SamplingKind::None,
            rate: None,
            steps: 1,
            ..poisson()
        };
        let out = calibrate_report(
            &r,
            Epsilon::new(1.0).unwrap(),
            Delta::new(1e-5).unwrap(),
            AccountantKind::Pld,
            |_, _| {},
        )
        .unwrap();
        let a = out["analytic_gaussian_noise_multiplier"].as_f64().unwrap();
        let z = out["noise_multiplier"].as_f64().unwrap();
        // Balle & Wang's exact σ for (1, 1e-5) is 3.73; the PLD search lands on it.
        assert!((a - 3.7300).abs() < 1e-3, "{a}");
        assert!((z - a).abs() / a < 1e-3, "{z} vs {a}");
        assert!(out["epsilon_achieved"].as_f64().unwrap() <= 1.0);
    }
}
