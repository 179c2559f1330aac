//! `dpfl._core`: the Rust side of the `dpfl` Python package (PyO3, abi3 for Python ≥ 3.9).
//!
//! Everything crosses the boundary as JSON text (events, results) or little-endian bytes
//! (arrays): the pure-Python layer in `python/dpfl/` turns them into classes and numpy arrays,
//! so this module needs neither rust-numpy nor a serde bridge. Errors are raised as
//! [`ConfigError`] (what the CLI exits with code 2 for: a bad parameter, an unsupported event)
//! or [`RunError`] (exit code 1: numerical failure, I/O, a failed run), carrying the CLI's
//! one-line message.

mod accounting;
mod codec;
mod data_ledger;
mod errors;
mod ledger;
mod mechanisms;
mod models;
mod own_model;
mod plan;
mod server;
mod silo;
mod train;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // False in the published wheel (dpfl-lab without `png`); true in scripts/test.sh's
    // `shared-test-build`, which links the CLI's dpfl-lab.
    m.add("_writes_png", dpfl_lab::plot::WRITES_PNG)?;
    m.add("DpflError", py.get_type::<errors::DpflError>())?;
    m.add("ConfigError", py.get_type::<errors::ConfigError>())?;
    m.add("RunError", py.get_type::<errors::RunError>())?;
    m.add("LedgerError", py.get_type::<errors::LedgerError>())?;
    m.add("BudgetExceeded", py.get_type::<errors::BudgetExceeded>())?;
    m.add("AlreadyReleased", py.get_type::<errors::AlreadyReleased>())?;
    m.add_class::<plan::Plan>()?;
    m.add_class::<silo::SiloHalf>()?;
    m.add_class::<server::ServerHalf>()?;
    m.add_function(wrap_pyfunction!(plan::experiment_silos, m)?)?;
    m.add_class::<ledger::Ledger>()?;
    m.add_function(wrap_pyfunction!(accounting::account_event, m)?)?;
    m.add_function(wrap_pyfunction!(accounting::delta_event, m)?)?;
    m.add_function(wrap_pyfunction!(accounting::account_release, m)?)?;
    m.add_function(wrap_pyfunction!(accounting::calibrate_release, m)?)?;
    m.add_function(wrap_pyfunction!(accounting::calibrate_event, m)?)?;
    m.add_function(wrap_pyfunction!(accounting::analytic_gaussian, m)?)?;
    m.add_class::<mechanisms::GaussianMechanism>()?;
    m.add_class::<mechanisms::TruncatedDiscreteLaplace>()?;
    m.add_class::<mechanisms::StochasticQuantizer>()?;
    m.add_function(wrap_pyfunction!(mechanisms::qtdl_theorem1, m)?)?;
    m.add_function(wrap_pyfunction!(train::train, m)?)?;
    m.add_function(wrap_pyfunction!(train::reproduce, m)?)?;
    m.add_function(wrap_pyfunction!(models::load_model, m)?)?;
    m.add_function(wrap_pyfunction!(models::predict_file, m)?)?;
    m.add_function(wrap_pyfunction!(models::evaluate_file, m)?)?;
    m.add_function(wrap_pyfunction!(models::init_experiment, m)?)?;
    m.add_function(wrap_pyfunction!(models::check_config, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
