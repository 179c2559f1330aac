//! The integration tests of `dpfl-privacy`, one test binary (`cargo test -p dpfl-privacy --test it`): each
//! module was its own binary, and every binary linked the workspace again (issue 30 item 3).

mod golden;
mod layers;
mod ledger;
mod lower_bounds;
mod properties;
mod samplers;
mod shuffle;
mod shuffle_amplification;
mod wr_exact;
