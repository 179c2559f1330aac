//! The integration tests of `dpfl-cli`, one test binary (`cargo test -p dpfl-cli --test it`): each
//! module was its own binary, and every binary linked the workspace again (issue 30 item 3).

mod account;
mod audit;
mod catalogue;
mod cli;
mod common;
mod config_reference;
mod data_shard;
mod deploy;
mod faults;
mod golden;
mod net;
mod net_dropouts;
mod net_wings;
mod ops;
mod outputs;
mod own_data;
mod predict;
mod refusals;
mod report;
mod server_report;
mod standalone;
