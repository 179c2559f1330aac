//! The accountant: `dpfl account` / `dpfl calibrate` (crates/dpfl-cli/src/account.rs) with
//! the same parameters, checks, messages and JSON output, plus accounting of any event given
//! as JSON (the serde form of `dpfl_privacy::PrivacyEvent`, built by `dpfl/events.py`).

use std::cell::RefCell;

use pyo3::prelude::*;
use serde_json::json;

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::accountant::lower_bound::epsilon_lower_bound;
use dpfl_privacy::accountant::sampled_pld::PoissonPair;
use dpfl_privacy::calibration::{analytic_gaussian_noise_multiplier, calibrate_noise_multiplier};
use dpfl_privacy::event::Sampling;
use dpfl_privacy::release::{
    LOWER_BOUND_SECONDS, Release, ReleaseError, ReleaseMechanism, ReportError, SamplingKind,
    account_report, calibrate_report,
};
use dpfl_privacy::{Delta, Epsilon, Neighbouring, PrivacyEvent};

use crate::errors::{RunError, config, privacy};

fn one_of<T: Copy>(field: &str, value: &str, table: &[(&str, T)]) -> PyResult<T> {
    let key = value.replace('_', "-");
    table
        .iter()
        .find(|(name, _)| *name == key)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
            config(
                field,
                format!("unknown value `{value}` (one of {})", names.join(", ")),
            )
        })
}

pub fn accountant(field: &str, name: &str) -> PyResult<AccountantKind> {
    use AccountantKind::*;
    one_of(
        field,
        name,
        &[
            ("rdp", Rdp),
            ("pld", Pld),
            ("zcdp", Zcdp),
            ("basic", Basic),
            ("advanced", Advanced),
            ("optimal", Optimal),
        ],
    )
}

pub fn neighbouring(field: &str, name: &str) -> PyResult<Neighbouring> {
    one_of(
        field,
        name,
        &[
            ("add-remove", Neighbouring::AddRemove),
            ("add-or-remove-one", Neighbouring::AddRemove),
            ("replace-one", Neighbouring::ReplaceOne),
        ],
    )
}

fn delta(field: &str, d: f64) -> PyResult<Delta> {
    Delta::new(d).map_err(|e| privacy(field, e))
}

fn refused(e: ReleaseError) -> PyErr {
    config(e.field, e.reason)
}

/// `ReleaseArgs` of the CLI, parsed from the names the CLI accepts; the checks and the event
/// are `dpfl_privacy::release`'s, shared with the CLI.
fn parse_release(
    mechanism: &str,
    sampling: Option<&str>,
    rate: Option<f64>,
    steps: u64,
    neighbouring_: Option<&str>,
    dataset_size: Option<u64>,
) -> PyResult<Release> {
    Ok(Release {
        mechanism: one_of("--mechanism", mechanism, &ReleaseMechanism::NAMES)?,
        sampling: one_of(
            "--sampling",
            sampling.unwrap_or("none"),
            &SamplingKind::NAMES,
        )?,
        rate,
        steps,
        neighbouring: neighbouring_
            .map(|n| neighbouring("--neighbouring", n))
            .transpose()?,
        dataset_size,
    })
}

fn report_error(e: ReportError) -> PyErr {
    match e {
        ReportError::Release(e) => refused(e),
        ReportError::Privacy { field, error } => privacy(field, error),
        other => RunError::new_err(other.to_string()),
    }
}

fn poisson_pair(name: &str) -> PyResult<PoissonPair> {
    one_of(
        "poisson_pair",
        name,
        &[
            ("ball", PoissonPair::Ball),
            ("generic", PoissonPair::Generic),
        ],
    )
}

/// `dpfl account`: the same JSON object the CLI prints (one function builds both:
/// `dpfl_privacy::release::account_report`).
#[pyfunction]
#[pyo3(signature = (noise_multiplier, delta, mechanism="gaussian", sampling=None, rate=None, steps=1, neighbouring=None, dataset_size=None, accountant="rdp", poisson_pair="ball"))]
#[allow(clippy::too_many_arguments)]
pub fn account_release(
    py: Python<'_>,
    noise_multiplier: f64,
    delta: f64,
    mechanism: &str,
    sampling: Option<&str>,
    rate: Option<f64>,
    steps: u64,
    neighbouring: Option<&str>,
    dataset_size: Option<u64>,
    accountant: &str,
    poisson_pair: &str,
) -> PyResult<String> {
    let r = parse_release(mechanism, sampling, rate, steps, neighbouring, dataset_size)?;
    let acc = self::accountant("--accountant", accountant)?;
    let delta = self::delta("--delta", delta)?;
    let pair = self::poisson_pair(poisson_pair)?;
    let limit = std::time::Duration::from_secs(LOWER_BOUND_SECONDS);
    let out = py
        .detach(|| account_report(&r, noise_multiplier, delta, acc, pair, limit))
        .map_err(report_error)?;
    Ok(out.to_string())
}

/// `dpfl calibrate`: the same JSON object the CLI prints (`calibrate_report` builds both).
#[pyfunction]
#[pyo3(signature = (epsilon, delta, mechanism="gaussian", sampling=None, rate=None, steps=1, neighbouring=None, dataset_size=None, accountant="rdp"))]
#[allow(clippy::too_many_arguments)]
pub fn calibrate_release(
    py: Python<'_>,
    epsilon: f64,
    delta: f64,
    mechanism: &str,
    sampling: Option<&str>,
    rate: Option<f64>,
    steps: u64,
    neighbouring: Option<&str>,
    dataset_size: Option<u64>,
    accountant: &str,
) -> PyResult<String> {
    let r = parse_release(mechanism, sampling, rate, steps, neighbouring, dataset_size)?;
    let acc = self::accountant("--accountant", accountant)?;
    let eps = Epsilon::new(epsilon).map_err(|e| privacy("--epsilon", e))?;
    let delta = self::delta("--delta", delta)?;
    let out = py
        .detach(|| calibrate_report(&r, eps, delta, acc, |_, _| {}))
        .map_err(report_error)?;
    Ok(out.to_string())
}

pub fn parse_event(text: &str) -> PyResult<PrivacyEvent> {
    let v: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| config("event", format!("not a dpfl event: {e}")))?;
    from_value(v).map_err(|e| config("event", format!("not a dpfl event: {e}")))
}

/// serde cannot (de)serialise the internally tagged `Composed(Vec<_>)`, so composed events
/// (`{"kind": "composed", "events": [...]}`) and the events around them are built by hand.
fn from_value(v: serde_json::Value) -> Result<PrivacyEvent, String> {
    let kind = v
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or("")
        .to_string();
    let inner = |v: &serde_json::Value, key: &str| -> Result<PrivacyEvent, String> {
        from_value(
            v.get(key)
                .cloned()
                .ok_or(format!("`{kind}` needs `{key}`"))?,
        )
    };
    match kind.as_str() {
        "composed" => {
            let events = v
                .get("events")
                .and_then(|e| e.as_array())
                .ok_or("`composed` needs a list `events`")?;
            Ok(PrivacyEvent::Composed(
                events
                    .iter()
                    .cloned()
                    .map(from_value)
                    .collect::<Result<_, _>>()?,
            ))
        }
        "sampled" => {
            let sampling: Sampling =
                serde_json::from_value(v.get("sampling").cloned().unwrap_or_default())
                    .map_err(|e| e.to_string())?;
            Ok(inner(&v, "event")?.sampled(sampling))
        }
        "self-composed" => {
            let count = v
                .get("count")
                .and_then(|c| c.as_u64())
                .ok_or("`self-composed` needs an integer `count`")?;
            Ok(inner(&v, "event")?.repeated(count))
        }
        _ => serde_json::from_value(v).map_err(|e| e.to_string()),
    }
}

/// The default relation of the CLI: replace-one if any part samples a fixed-size batch,
/// add/remove otherwise.
fn default_neighbouring(e: &PrivacyEvent) -> Neighbouring {
    fn fixed(e: &PrivacyEvent) -> bool {
        match e {
            PrivacyEvent::Sampled { sampling, event } => {
                !matches!(sampling, Sampling::Poisson { .. }) || fixed(event)
            }
            PrivacyEvent::SelfComposed { event, .. } => fixed(event),
            PrivacyEvent::Composed(v) => v.iter().any(fixed),
            _ => false,
        }
    }
    if fixed(e) {
        Neighbouring::ReplaceOne
    } else {
        Neighbouring::AddRemove
    }
}

/// ε of an event (JSON) at δ, with the lower bound where dpfl has a neighbouring pair.
///
/// With no `accountant`, as `dpfl account` prints (crates/dpfl-privacy/src/release/report.rs):
/// RDP and the PLD are both sound upper bounds, so both are computed (best effort each) and the
/// tighter one is `epsilon`, named by `epsilon_accountant`, with both shown (`rdp_epsilon`,
/// `pld_epsilon`; null with the reason under `notes` where one does not support the event).
/// A named accountant gives exactly that accountant's ε.
#[pyfunction]
#[pyo3(signature = (event, delta, accountant=None, neighbouring=None))]
pub fn account_event(
    py: Python<'_>,
    event: &str,
    delta: f64,
    accountant: Option<&str>,
    neighbouring: Option<&str>,
) -> PyResult<String> {
    let event = parse_event(event)?;
    let asked = match accountant {
        Some(a) => Some(self::accountant("accountant", a)?),
        None => None,
    };
    let delta = self::delta("delta", delta)?;
    let nb = match neighbouring {
        Some(n) => self::neighbouring("neighbouring", n)?,
        None => default_neighbouring(&event),
    };
    let kinds = match asked {
        Some(k) => vec![k],
        None => vec![AccountantKind::Rdp, AccountantKind::Pld],
    };
    let (results, lower) = py.detach(|| {
        let results: Vec<_> = kinds
            .iter()
            .map(|k| (*k, k.epsilon(nb, &event, delta)))
            .collect();
        (results, epsilon_lower_bound(&event, nb, delta))
    });
    let lower = lower.map_err(|e| privacy("event", e))?;
    let mut out = json!({
        "epsilon_lower_bound": lower,
        "delta": delta.get(),
        "neighbouring": nb,
    });
    let mut best: Option<(AccountantKind, f64)> = None;
    let mut notes = serde_json::Map::new();
    let mut first_error = None;
    for (k, r) in results {
        match r {
            Ok(e) => {
                if asked.is_none() {
                    out[format!("{}_epsilon", k.name())] = json!(e);
                }
                if best.is_none_or(|(_, b)| e < b) {
                    best = Some((k, e));
                }
            }
            Err(why) => {
                if asked.is_none() {
                    out[format!("{}_epsilon", k.name())] = serde_json::Value::Null;
                    notes.insert(format!("{}_epsilon", k.name()), json!(why.to_string()));
                }
                first_error.get_or_insert(why);
            }
        }
    }
    let Some((used, eps)) = best else {
        // Every accountant asked refused: the first one's reason (never an optimistic ε).
        return Err(match first_error {
            Some(why) => privacy("accountant", why),
            None => config("accountant", "no accountant was asked"),
        });
    };
    // A lower bound is never shown above an upper bound (issue 27).
    if lower.is_some_and(|l| l > eps) {
        out["epsilon_lower_bound"] = serde_json::Value::Null;
        notes.insert(
            "epsilon_lower_bound".into(),
            json!("withheld: above the upper bound (the lower bound's grid is optimistic)"),
        );
    }
    out["epsilon"] = json!(eps);
    out["accountant"] = json!(used.name());
    out["epsilon_accountant"] = json!(used.name());
    if !notes.is_empty() {
        out["notes"] = serde_json::Value::Object(notes);
    }
    Ok(out.to_string())
}

/// δ of an event (JSON) at ε by the RDP (Canonne, Kamath & Steinke 2020 Prop. 12, min with the
/// KL bound) or PLD accountant (the larger over the two directions), as
/// `dp_accounting`'s `get_delta`.
#[pyfunction]
#[pyo3(signature = (event, epsilon, accountant="pld", neighbouring=None))]
pub fn delta_event(
    py: Python<'_>,
    event: &str,
    epsilon: f64,
    accountant: &str,
    neighbouring: Option<&str>,
) -> PyResult<f64> {
    use dpfl_privacy::accountant::{pld::PldAccountant, rdp::RdpAccountant};
    let event = parse_event(event)?;
    let acc = self::accountant("accountant", accountant)?;
    if !(epsilon.is_finite() && epsilon >= 0.0) {
        return Err(config(
            "epsilon",
            format!("must be finite and >= 0, got {epsilon}"),
        ));
    }
    let nb = match neighbouring {
        Some(n) => self::neighbouring("neighbouring", n)?,
        None => default_neighbouring(&event),
    };
    let d = match acc {
        AccountantKind::Rdp => py.detach(|| RdpAccountant::new(nb).delta(&event, epsilon)),
        AccountantKind::Pld => py.detach(|| PldAccountant::new(nb).delta(&event, epsilon)),
        other => {
            return Err(config(
                "accountant",
                format!("get_delta is offered by rdp and pld, not {}", other.name()),
            ));
        }
    };
    let d = d.map_err(|e| privacy("accountant", e))?;
    if !d.is_finite() {
        return Err(RunError::new_err(format!(
            "accountant: delta is not finite ({d})"
        )));
    }
    Ok(d)
}

/// The smallest noise multiplier z whose event `make_event(z)` (a callable returning event
/// JSON) the accountant certifies for (ε, δ); `calibrate_noise_multiplier`'s search.
#[pyfunction]
#[pyo3(signature = (make_event, epsilon, delta, accountant="rdp", neighbouring=None))]
pub fn calibrate_event(
    make_event: &Bound<'_, PyAny>,
    epsilon: f64,
    delta: f64,
    accountant: &str,
    neighbouring: Option<&str>,
) -> PyResult<(f64, f64)> {
    let acc = self::accountant("accountant", accountant)?;
    let eps = Epsilon::new(epsilon).map_err(|e| privacy("epsilon", e))?;
    let delta = self::delta("delta", delta)?;
    let first: RefCell<Option<PyErr>> = RefCell::new(None);
    let call = |z: f64| -> PyResult<PrivacyEvent> {
        let text: String = make_event.call1((z,))?.extract()?;
        parse_event(&text)
    };
    let probe = call(1.0)?;
    let nb = match neighbouring {
        Some(n) => self::neighbouring("neighbouring", n)?,
        None => default_neighbouring(&probe),
    };
    // The search takes a plain function: a failing callable is remembered and its error raised
    // afterwards; meanwhile it yields an event no accountant certifies (so the search never
    // stops on it).
    let z = calibrate_noise_multiplier(
        |z| match call(z) {
            Ok(e) => e,
            Err(err) => {
                first.borrow_mut().get_or_insert(err);
                PrivacyEvent::EpsilonDelta {
                    epsilon: f64::INFINITY,
                    delta: 1.0,
                }
            }
        },
        acc,
        nb,
        eps,
        delta,
    );
    if let Some(err) = first.into_inner() {
        return Err(err);
    }
    let z = z.map_err(|e| privacy("accountant", e))?;
    let event = call(z)?;
    let achieved = acc
        .epsilon(nb, &event, delta)
        .map_err(|e| privacy("accountant", e))?;
    if achieved.is_nan() || achieved > eps.get() {
        return Err(RunError::new_err(format!(
            "calibration returned z = {z} with epsilon {achieved} over the target {}",
            eps.get()
        )));
    }
    Ok((z, achieved))
}

/// Balle & Wang (2018)'s analytic Gaussian mechanism: the exact z of one Gaussian release.
#[pyfunction]
pub fn analytic_gaussian(epsilon: f64, delta: f64) -> PyResult<f64> {
    let eps = Epsilon::new(epsilon).map_err(|e| privacy("--epsilon", e))?;
    let delta = self::delta("--delta", delta)?;
    analytic_gaussian_noise_multiplier(eps, delta).map_err(|e| privacy("--epsilon", e))
}
