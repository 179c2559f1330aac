//! The integration tests of `dpfl-lab`, one test binary (`cargo test -p dpfl-lab --test it`): each
//! module was its own binary, and every binary linked the workspace again (issue 30 item 3).

mod calibrates_to_target;
mod calibration;
mod noise;
mod noise_multiplier;
mod normfedavg;
mod reproduce;
mod shuffle_absolute;
mod shuffle_ledger;
mod shuffle_pagd;
mod shuffle_rates;
mod shuffle_robust;
mod shuffle_trusted;
mod shuffle_wing;
mod simulator;
mod soteria_experiment;
mod soteria_reproduce;
