//! A silo's data ledger: one ledger per data set, across plans (issue 29). Every run on the
//! same records composes, so the silo charges each round's event twice: to the plan's own
//! ledger (release ids = rounds, the plan's release cap R, idempotent per round: the half's
//! restart checks read it) and to its data set's ledger, which holds every plan's releases
//! and enforces the silo's (ε, δ) budget over all of them. This is `dpfl silo`'s rule (one
//! ledger per silo state directory, `crates/dpfl-net/src/silo.rs`; a fresh budget only on an
//! empty directory, when told) for a runtime (Flower) that starts a new plan on the same
//! SuperNode without a new directory.
//!
//! Release ids in the data ledger are `index << 32 | round`, `index` the plan's number in a
//! registry beside the ledger (`<ledger>.plans.json`: plan id → index, written durably before
//! the plan's first charge). A new plan takes one more than every index in the registry and
//! in the ledger's ids, so a lost registry can only make a plan seen before count its rounds
//! again (over-reporting, the safe side), never share ids with another plan.
//!
//! Order of a charge: the plan's release cap is checked first (nothing recorded on a cap
//! refusal), then the data ledger (a budget refusal records nothing anywhere), then the plan's
//! ledger. A crash between the two leaves a data charge without its plan charge: the round
//! asked again finds it already charged in the data ledger (spending nothing) and goes on.

use std::path::{Path, PathBuf};

use dpfl::algo::Round;
use dpfl::round::{self, ChargeError};
use dpfl_privacy::PrivacyError;
use dpfl_privacy::ledger::{Budget, FileStore, Ledger, LedgerStore, Limits};
use pyo3::prelude::*;

use crate::errors::{LedgerError, one_line};

const REGISTRY_FORMAT: &str = "dpfl-data-plans/1";

/// The data set's ledger and this plan's place in it.
pub(crate) struct DataLedger {
    pub(crate) ledger: Ledger,
    base: u64,
}

/// A ledger file argument: a file (created when missing) in a directory that exists;
/// otherwise a [`crate::errors::ConfigError`] naming `field`, before anything is read.
pub(crate) fn check_path(field: &str, path: &Path) -> PyResult<()> {
    let why = if path.is_dir() {
        "is a directory; give the ledger's file path".to_string()
    } else {
        match path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(d) if !d.is_dir() => format!(
                "its directory {} does not exist (dpfl creates the file, not its directory)",
                d.display()
            ),
            _ => return Ok(()),
        }
    };
    Err(crate::errors::config(
        field,
        format!("{}: {why}", path.display()),
    ))
}

fn registry_path(ledger: &Path) -> PathBuf {
    let mut s = ledger.as_os_str().to_owned();
    s.push(".plans.json");
    PathBuf::from(s)
}

fn err(path: &Path, reason: impl std::fmt::Display) -> PyErr {
    LedgerError::new_err(format!("{}: {reason}", path.display()))
}

impl DataLedger {
    /// Opens (or creates) the data ledger at `path` with `limits` (no release cap: plans
    /// differ in rounds) and registers `plan_id` in it.
    /// Without a budget in `limits`, a stored ledger's budget stands: a plan that asks for
    /// none never drops the one the data set's ledger enforces.
    pub(crate) fn open(path: &Path, plan_id: &str, mut limits: Limits) -> PyResult<Self> {
        check_path("data_ledger", path)?;
        if limits.budget.is_none() {
            limits.budget = stored_budget(path)?;
        }
        let ledger = Ledger::with_store(Box::new(FileStore::new(path)), limits)
            .map_err(|e| LedgerError::new_err(one_line(&e)))?;
        let reg = registry_path(path);
        let mut store = FileStore::new(&reg);
        let mut plans = match store.load().map_err(|e| err(&reg, e))? {
            None => serde_json::Map::new(),
            Some(bytes) => {
                let v: serde_json::Value = serde_json::from_slice(&bytes)
                    .map_err(|e| err(&reg, format!("not a plan registry ({e})")))?;
                if v.get("format").and_then(|f| f.as_str()) != Some(REGISTRY_FORMAT) {
                    return Err(err(&reg, format!("not a {REGISTRY_FORMAT} registry")));
                }
                match v.get("plans") {
                    Some(serde_json::Value::Object(m)) => m.clone(),
                    _ => return Err(err(&reg, "no `plans` object")),
                }
            }
        };
        let index = match plans.get(plan_id) {
            Some(i) => i
                .as_u64()
                .filter(|i| *i < 1 << 31)
                .ok_or_else(|| err(&reg, format!("plan {plan_id}: index {i} is not a number")))?,
            None => {
                let in_ledger = ledger.releases().map(|(id, _)| id >> 32);
                let in_registry = plans.values().filter_map(|v| v.as_u64());
                let next = in_ledger.chain(in_registry).max().map_or(0, |m| m + 1);
                plans.insert(plan_id.to_string(), next.into());
                let text = serde_json::json!({"format": REGISTRY_FORMAT, "plans": plans});
                store
                    .store(text.to_string().as_bytes())
                    .map_err(|e| err(&reg, e))?;
                next
            }
        };
        Ok(DataLedger {
            ledger,
            base: index << 32,
        })
    }

    fn id(&self, round: Round) -> u64 {
        self.base | u64::from(round.get())
    }
}

/// The budget a stored ledger records (`None`: no file, or none recorded). The file's own
/// checks (format, checksum) are `Ledger::with_store`'s, which reads it next.
fn stored_budget(path: &Path) -> PyResult<Option<Budget>> {
    let Some(bytes) = FileStore::new(path).load().map_err(|e| err(path, e))? else {
        return Ok(None);
    };
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| err(path, format!("not a ledger ({e})")))?;
    match v.get("budget") {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(b) => serde_json::from_value(b.clone())
            .map(Some)
            .map_err(|e| err(path, format!("its budget does not parse ({e})"))),
    }
}

/// The plan's ledger and, when the silo keeps one, its data set's (module docs).
pub(crate) struct Ledgers<'a> {
    pub(crate) plan: &'a mut Ledger,
    pub(crate) data: Option<&'a mut DataLedger>,
}

impl round::Ledger for Ledgers<'_> {
    fn charge(
        &mut self,
        round: Round,
        event: &dpfl_privacy::PrivacyEvent,
    ) -> Result<(), ChargeError> {
        let Some(data) = self.data.as_deref_mut() else {
            return round::Ledger::charge(self.plan, round, event);
        };
        let r = u64::from(round.get());
        let charged = self.plan.releases().any(|(id, _)| id == r);
        if let Some(max) = self.plan.limits().max_releases
            && !charged
            && self.plan.releases().count() >= max
        {
            return Err(ChargeError::from_ledger(
                round,
                PrivacyError::ReleaseCapReached { release: r, max },
            ));
        }
        let id = data.id(round);
        data.ledger
            .charge(id, event)
            .map_err(|e| ChargeError::from_ledger(round, e))?;
        round::Ledger::charge(self.plan, round, event)
    }
}
