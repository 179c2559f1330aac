//! Test-only access for other crates' tests (issue 28 item 5), compiled only under the
//! `test-hooks` feature, which only `dpfl-lab`'s dev-dependency turns on (never a product
//! build; see `Cargo.toml`).
//!
//! The hook: [`TEST_NOISE_SCALE`] (the audit's under-noised builds). The plan's calibration
//! counter (`algo::context::calibrations_on_this_thread`) stays public: external wings count.
//!
//! [`shuffle`] names the shuffle wing's crate-private halves, calibration steps and
//! adversaries that `dpfl-lab`'s shuffle tests (`shuffle_wing.rs`, `shuffle_pagd.rs`,
//! `shuffle_trusted.rs`) drive directly: PVEC's silo and analyzer draw for draw, PAGD's phase
//! schedule, the robust variant's adversaries, each step of the trusted-shuffle chain. They
//! are not the wing's public face (`crate::algo::shuffle`), which a user of the library sees.

pub use crate::algo::context::TEST_NOISE_SCALE;

/// The shuffle wing's internals its Monte Carlo and calibration tests probe.
pub mod shuffle {
    pub use crate::algo::shuffle::calibration::{
        SdpInputs, delta_a, isrl_epsilon, round_guarantee, sdp_chain, shared_round,
    };
    pub use crate::algo::shuffle::pagd::PagdServer;
    pub use crate::algo::shuffle::pagd_preset::phase_schedule;
    pub use crate::algo::shuffle::pan::zeta;
    pub use crate::algo::shuffle::pvec::{PvecServer, PvecSilo};
    pub use crate::algo::shuffle::robust::{AbsentFilter, AbsentSilo, ExtremeSilo, NegatedModel};
    pub use crate::algo::shuffle::trust::{PvecTarget, plan_pvec, sigma_for, silo_guarantees};
}
