//! The integration tests of `dpfl-net`, one test binary (`cargo test -p dpfl-net --test it`): each
//! module was its own binary, and every binary linked the workspace again (issue 30 item 3).

mod common;
mod laplace_wing;
mod layers;
mod plan;
mod protocol;
mod round_core;
mod wire;
