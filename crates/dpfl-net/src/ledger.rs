//! The silo's privacy ledger, behind a small trait.
//!
//! The silo charges a round's privacy event *before* computing the message, and a charge is
//! idempotent per round: answering the same round again (after a server restart) finds
//! `AlreadyCharged` and resends the stored bytes instead of drawing fresh noise.
//!
//! [`RoundLedger`] caps a silo at the number of rounds its noise was calibrated for (the
//! calibration composes over exactly R releases, so R is the budget in releases). When the
//! experiment sets `[privacy] enforce_budget`, the silo also charges
//! `dpfl_privacy::ledger::Ledger` (issue 4, RDP accountant, file `budget-ledger.json`) first,
//! exactly as the simulator's silos do, and refuses any round that would take it past its
//! (ε_i, δ_i).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dpfl_privacy::PrivacyEvent;
use serde::{Deserialize, Serialize};

use crate::error::{NetError, Result};

/// Outcome of a charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge {
    New,
    AlreadyCharged,
}

/// What the silo needs of a ledger.
pub trait SiloLedger: Send {
    /// Records `event` for release `release` (the round) durably, or refuses if it would
    /// exceed the budget. Charging the same release with the same event again spends nothing.
    fn charge(&mut self, release: u64, event: &PrivacyEvent) -> Result<Charge>;
    /// Number of releases charged.
    fn releases(&self) -> usize;
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Entries {
    max_releases: usize,
    charged: BTreeMap<u64, PrivacyEvent>,
}

/// File name of a silo's round ledger in its state directory (a [`crate::store::Cell`]).
pub const ROUND_LEDGER: &str = "ledger";

/// A durable ledger that allows at most `max_releases` charged rounds.
#[derive(Debug)]
pub struct RoundLedger {
    path: PathBuf,
    cell: crate::store::Cell,
    entries: Entries,
}

impl RoundLedger {
    /// Opens the ledger kept in the [`crate::store::Cell`] at `path` (its value is JSON).
    pub fn open(path: &Path, max_releases: usize) -> Result<Self> {
        let (cell, stored) = crate::store::Cell::open(path)?;
        let entries = if let Some(bytes) = stored {
            let e: Entries = serde_json::from_slice(&bytes).map_err(|e| NetError::file(path, e))?;
            if e.max_releases != max_releases {
                return Err(NetError::file(
                    path,
                    format!(
                        "ledger was opened for {} releases, now {max_releases}",
                        e.max_releases
                    ),
                ));
            }
            e
        } else {
            Entries {
                max_releases,
                charged: BTreeMap::new(),
            }
        };
        Ok(RoundLedger {
            path: path.into(),
            cell,
            entries,
        })
    }

    /// The rounds charged so far.
    pub fn rounds(&self) -> Vec<u64> {
        self.entries.charged.keys().copied().collect()
    }

    /// The events charged so far, in round order: what the silo has released, as the
    /// simulator's `Simulator::spent` reports it (`dpfl federate` accounts them for
    /// `summary.json`).
    /// The events charged in the ledger at `path`, in round order, read without opening it
    /// for charging (the silo may be gone; nothing is created).
    pub fn read_events(path: &Path) -> Result<Vec<PrivacyEvent>> {
        match crate::store::Cell::read(path)? {
            // A silo that was never charged (a non-private algorithm) has an empty cell.
            None if path.parent().is_some_and(Path::is_dir) => Ok(Vec::new()),
            None => Err(NetError::file(path, "no silo state directory here")),
            Some(bytes) => {
                let e: Entries =
                    serde_json::from_slice(&bytes).map_err(|e| NetError::file(path, e))?;
                Ok(e.charged.into_values().collect())
            }
        }
    }

    pub fn events(&self) -> Vec<PrivacyEvent> {
        self.entries.charged.values().cloned().collect()
    }
}

impl SiloLedger for RoundLedger {
    fn charge(&mut self, release: u64, event: &PrivacyEvent) -> Result<Charge> {
        if let Some(old) = self.entries.charged.get(&release) {
            if old == event {
                return Ok(Charge::AlreadyCharged);
            }
            return Err(NetError::Budget(format!(
                "release {release} was already charged with a different event"
            )));
        }
        if self.entries.charged.len() >= self.entries.max_releases {
            return Err(NetError::Budget(format!(
                "refusing release {release}: all {} calibrated releases are spent",
                self.entries.max_releases
            )));
        }
        self.entries.charged.insert(release, event.clone());
        let json = serde_json::to_vec(&self.entries).map_err(|e| NetError::file(&self.path, e))?;
        self.cell.write(&json)?;
        Ok(Charge::New)
    }
    fn releases(&self) -> usize {
        self.entries.charged.len()
    }
}
