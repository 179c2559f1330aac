//! A silo's privacy ledger: `dpfl_privacy::ledger::Ledger` on its `FileStore` (or in memory),
//! the one ledger type, format and set of checks of every runner (issue 27). `dpfl.flower`'s
//! `DpflClient` keeps its releases here: an emptied, damaged, `[]` or `null` ledger file is
//! refused with [`LedgerError`], never read as a fresh budget; only a missing file starts one.
//! Events cross as JSON (the serde form `dpfl/events.py` writes).

use std::path::PathBuf;
use std::sync::Mutex;

use pyo3::prelude::*;

use dpfl_privacy::PrivacyError;
use dpfl_privacy::ledger::{Budget, Charge, Ledger as Inner};

use crate::accounting::{accountant, neighbouring, parse_event};
use crate::errors::{LedgerError, one_line, privacy};

/// The ledger's own failures (storage, a damaged value, a refusal) as [`LedgerError`];
/// parameter errors as the CLI's.
fn ledger_error(e: PrivacyError) -> PyErr {
    match e {
        PrivacyError::InvalidParameter { .. } => privacy("budget", e),
        other => LedgerError::new_err(one_line(&other)),
    }
}

/// One silo's durable record of its releases and its (ε, δ) budget.
#[pyclass(module = "dpfl._core")]
pub struct Ledger {
    // `Mutex`: a `#[pyclass]` must be `Sync`; the ledger's store is only `Send`.
    inner: Mutex<Inner>,
}

impl Ledger {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> PyResult<T>) -> PyResult<T> {
        let mut g = self
            .inner
            .lock()
            .map_err(|_| LedgerError::new_err("the ledger's lock was poisoned by a panic"))?;
        f(&mut g)
    }
}

#[pymethods]
impl Ledger {
    /// Opens the ledger at `path` (created, and written, when the file does not exist), or
    /// one in memory when `path` is `None`. A stored ledger with another budget or accountant
    /// is refused, as is any file that is not a whole, checksummed ledger.
    #[new]
    #[pyo3(signature = (path, epsilon, delta, accountant="rdp", neighbouring="add-remove"))]
    fn new(
        path: Option<PathBuf>,
        epsilon: f64,
        delta: f64,
        accountant: &str,
        neighbouring: &str,
    ) -> PyResult<Self> {
        let acc = self::accountant("accountant", accountant)?;
        let nb = self::neighbouring("neighbouring", neighbouring)?;
        let budget = Budget::new(epsilon, delta, nb).map_err(ledger_error)?;
        let inner = match path {
            Some(p) => {
                crate::data_ledger::check_path("path", &p)?;
                Inner::open(&p, budget, acc).map_err(ledger_error)?
            }
            None => Inner::in_memory(budget, acc),
        };
        Ok(Ledger {
            inner: Mutex::new(inner),
        })
    }

    /// Records `event` (JSON) as release `release` if it stays within the budget, durably
    /// before returning: `True` when recorded now, `False` when this release id was already
    /// charged with the same event. A refusal records nothing and raises `LedgerError`.
    fn charge(&self, py: Python<'_>, release: u64, event: &str) -> PyResult<bool> {
        let e = parse_event(event)?;
        self.with(|l| {
            let c = py.detach(|| l.charge(release, &e)).map_err(ledger_error)?;
            Ok(c == Charge::New)
        })
    }

    /// Whether charging `event` (JSON) now would stay within the budget; records nothing.
    fn would_allow(&self, py: Python<'_>, event: &str) -> PyResult<bool> {
        let e = parse_event(event)?;
        self.with(|l| py.detach(move || l.would_allow(&e)).map_err(ledger_error))
    }

    /// ε spent so far at the budget's δ, by the ledger's accountant.
    fn spent_epsilon(&self) -> PyResult<f64> {
        self.with(|l| l.spent_epsilon().map_err(ledger_error))
    }

    /// The release ids recorded, in charge order.
    fn releases(&self) -> PyResult<Vec<u64>> {
        self.with(|l| Ok(l.releases().map(|(r, _)| r).collect()))
    }

    /// Whether release `release` is recorded.
    fn __contains__(&self, release: u64) -> PyResult<bool> {
        self.with(|l| Ok(l.releases().any(|(r, _)| r == release)))
    }

    /// The number of releases recorded.
    fn __len__(&self) -> PyResult<usize> {
        self.with(|l| Ok(l.releases().count()))
    }

    /// (ε, δ) of the budget.
    fn budget(&self) -> PyResult<(f64, f64)> {
        self.with(|l| {
            let b = l
                .budget()
                .ok_or_else(|| LedgerError::new_err("a ledger without a budget"))?;
            Ok((b.epsilon(), b.delta()))
        })
    }
}
