//! Shared helpers of dpfl-net's integration tests.

use std::path::Path;

use dpfl_net::Federation;
use dpfl_net::config::PublicFacts;

/// Loads a hand-written federation file: its plan comes from the experiment it names, as
/// the `dpfl` binary's planner computes it.
pub(crate) fn load(path: &Path) -> Federation {
    Federation::load_with(path, Some(&planner)).expect("federation file")
}

/// The experiment planner the `dpfl` binary uses.
pub(crate) fn planner(
    experiment: &Path,
    algorithm: usize,
    p: &PublicFacts,
) -> dpfl::Result<dpfl::plan::Plan> {
    dpfl_lab::experiment::plan_from_file(
        experiment,
        algorithm,
        p.features,
        p.classes,
        &p.records,
        p.lipschitz,
    )
}
