//! Python exceptions with the CLI's one-line messages (crates/dpfl-cli/src/main.rs `one_line`,
//! account.rs `privacy`).

use dpfl_privacy::PrivacyError;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyInt;

create_exception!(
    _core,
    DpflError,
    PyException,
    "Base class of every dpfl error."
);
create_exception!(
    _core,
    ConfigError,
    DpflError,
    "A bad parameter or configuration, or an event the accountant cannot account (the CLI's exit code 2)."
);
create_exception!(
    _core,
    RunError,
    DpflError,
    "A failed computation or run: numerical failure, I/O, malformed data (the CLI's exit code 1)."
);

create_exception!(
    _core,
    LedgerError,
    DpflError,
    "A privacy ledger that cannot be used: its file is empty, damaged or not a ledger (never read as a fresh budget), it records other limits, or it refused a release."
);

create_exception!(
    _core,
    BudgetExceeded,
    DpflError,
    "A round would take the silo past its (ε, δ) budget or its release cap; nothing was released."
);

create_exception!(
    _core,
    AlreadyReleased,
    BudgetExceeded,
    "The silo already released this round (or a later one); nothing was released."
);

/// An integer argument in `0..=T::MAX`: a negative or too large one is a [`ConfigError`]
/// naming `field` (PyO3's own extraction would raise `OverflowError`); a non-integer stays a
/// `TypeError`, as in any Python function.
pub fn uint_arg<T: TryFrom<u64>>(field: &str, v: &Bound<'_, PyAny>) -> PyResult<T> {
    if let Ok(n) = v.extract::<u64>() {
        return T::try_from(n).map_err(|_| config(field, format!("{n} is too large")));
    }
    match v.extract::<i64>() {
        Ok(n) => Err(config(field, format!("{n} is negative"))),
        Err(_) if v.is_instance_of::<PyInt>() => Err(config(field, "too large for 64 bits")),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{field}: an integer, got {}",
            v.get_type().name()?
        ))),
    }
}

/// `config field `{field}`: {reason}`, as `dpfl::Error::Config` displays.
pub fn config(field: &str, reason: impl Into<String>) -> PyErr {
    ConfigError::new_err(dpfl::Error::config(field, reason).to_string())
}

/// The CLI's rule: parameter and support errors are usage errors naming `field`; numerical
/// failures are run errors.
pub fn privacy(field: &str, e: PrivacyError) -> PyErr {
    match e {
        PrivacyError::InvalidParameter { .. }
        | PrivacyError::Unsupported { .. }
        | PrivacyError::OutsideValidity { .. } => config(field, e.to_string()),
        other => RunError::new_err(one_line(&other)),
    }
}

/// A `dpfl::Error`: configuration errors are [`ConfigError`], the rest [`RunError`].
pub fn dpfl_error(e: dpfl::Error) -> PyErr {
    match e.is_config() {
        true => ConfigError::new_err(one_line(&e)),
        false => RunError::new_err(one_line(&e)),
    }
}

/// The error and its causes on one line, each cause once (the CLI's `one_line`).
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = String::new();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        cause = c.source();
    }
    out.replace('\n', " ")
}
