//! The integration tests of `dpfl`, one test binary (`cargo test -p dpfl --test it`): each
//! module was its own binary, and every binary linked the workspace again (issue 30 item 3).

mod data_common;
mod data_loaders;
mod data_partition;
mod data_pca;
mod import_graph;
mod models;
mod no_kind_fallback;
mod round_core;
mod soteria_models;
mod wing_requirements;
