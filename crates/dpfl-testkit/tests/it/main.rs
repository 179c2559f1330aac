//! The integration tests of `dpfl-testkit`, one test binary (`cargo test -p dpfl-testkit --test it`): each
//! module was its own binary, and every binary linked the workspace again (issue 30 item 3).

mod architecture;
mod laplace_wing;
mod long_suite;
mod python_wheel;
mod results_provenance;
