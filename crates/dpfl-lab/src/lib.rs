//! # dpfl-lab
//!
//! The lab around the `dpfl` library: everything that runs, compares, checks and draws
//! algorithms rather than being one.
//!
//! * [`experiment`]: TOML experiment files, their runs in the simulator, and their outputs
//!   (summary, per-round CSVs, the guarantee, report.html, saved models);
//! * [`reproduce`]: the four papers' experiments as one-command reproductions;
//! * [`audit`]: the empirical privacy audit of one training run;
//! * [`plot`], [`output`], [`provenance`]: figures, never-half-written files, and where every
//!   output came from.
//!
//! The library (`dpfl`: data, models, algorithms, the round core, the simulator) and the network
//! runtime (`dpfl-net`) do not depend on this crate; the command line (`dpfl-cli`) and the Python
//! package do. See `ARCHITECTURE.md` at the repository root.

#![warn(missing_docs)]

pub mod audit;
pub mod experiment;
pub mod output;
pub mod plot;
pub mod provenance;
pub mod reproduce;
