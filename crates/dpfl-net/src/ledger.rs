//! The silo's privacy ledger on durable storage: `dpfl_privacy::ledger::Ledger` (the one
//! ledger type of both runners) kept in a [`Cell`] of the silo's state directory.
//!
//! The silo charges a round's privacy event *before* computing the message, once, against all
//! its limits: the release cap R (the calibration composes over exactly R releases, so R is
//! the budget in releases) and, when the silo enforces one, its (ε_i, δ_i) by the RDP
//! accountant. A charge is idempotent per round: answering the same round again (after a
//! server restart) finds `AlreadyCharged` and resends the stored bytes instead of drawing
//! fresh noise. A damaged cell (no valid slot) is an error, never an empty ledger.

use std::path::{Path, PathBuf};

use dpfl_privacy::PrivacyEvent;
use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::ledger::{Budget, Ledger, LedgerStore, Limits, StoreError};

use crate::error::{NetError, Result};
use crate::store::Cell;

/// File name of a silo's ledger in its state directory (a [`Cell`]: `ledger.0`, `ledger.1`).
pub const ROUND_LEDGER: &str = "ledger";

/// A ledger's storage in a [`Cell`]: the value read when the cell was opened, then durable
/// in-place writes.
#[derive(Debug)]
pub struct CellStore {
    path: PathBuf,
    cell: Cell,
    opened: Option<Vec<u8>>,
}

impl CellStore {
    /// Opens the cell at `path`; a damaged one is an error naming its slot files.
    pub fn open(path: &Path) -> Result<Self> {
        let (cell, opened) = Cell::open(path)?;
        Ok(CellStore {
            path: path.into(),
            cell,
            opened,
        })
    }
}

impl LedgerStore for CellStore {
    fn load(&mut self) -> std::result::Result<Option<Vec<u8>>, StoreError> {
        Ok(self.opened.take())
    }
    fn store(&mut self, bytes: &[u8]) -> std::result::Result<(), StoreError> {
        Ok(self.cell.write(bytes)?)
    }
    fn location(&self) -> String {
        self.path.display().to_string()
    }
}

/// For a restart: the ledger at `path` must hold a value. Missing or 0-byte slot files are
/// what a lost or wiped state directory leaves, and an empty ledger would answer charged
/// rounds again; a damaged one is refused by [`Cell::read`], naming its slots.
pub fn check_stored(path: &Path) -> Result<()> {
    match Cell::read(path)? {
        Some(_) => Ok(()),
        None => {
            let slot = |i: usize| slot(path, "", i);
            let what = |p: &Path| match std::fs::metadata(p) {
                Ok(m) if m.len() == 0 => "empty (0 bytes)",
                Ok(_) => "present",
                Err(_) => "missing",
            };
            let (a, b) = (slot(0), slot(1));
            Err(NetError::file(
                path,
                format!(
                    "no stored ledger ({} {}, {} {}): this silo's state is lost or was emptied, \
                     and starting over would answer the rounds it answered with fresh noise; \
                     restore the state directory from a backup (a silo that never ran starts \
                     with --fresh on an empty directory)",
                    a.display(),
                    what(&a),
                    b.display(),
                    what(&b)
                ),
            ))
        }
    }
}

/// Suffix of the cell a fresh start writes its first ledger into before moving it in place.
const UNFINISHED: &str = ".new";

fn slot(path: &Path, suffix: &str, i: usize) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!("{suffix}.{i}"));
    PathBuf::from(s)
}

/// A fresh start's ledger at `path` (which must not exist yet), in place at once: it is
/// written into a cell beside it and its written slot renamed over `path`'s, so that a crash
/// leaves either no ledger (the start can be repeated with `--fresh`) or a whole one, never
/// the empty slot files a restart refuses.
pub fn create(path: &Path, rounds: usize, budget: Option<Budget>) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(UNFINISHED);
    let tmp = PathBuf::from(tmp);
    drop(open(&tmp, rounds, budget)?);
    for i in 0..2 {
        let from = slot(path, UNFINISHED, i);
        let written = std::fs::metadata(&from).map_err(NetError::io(&from))?.len() > 0;
        if written {
            let to = slot(path, "", i);
            std::fs::rename(&from, &to).map_err(NetError::io(&to))?;
        } else {
            std::fs::remove_file(&from).map_err(NetError::io(&from))?;
        }
    }
    // The rename is durable once the directory is.
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        d.sync_all().map_err(NetError::io(dir))?;
    }
    Ok(())
}

/// Removes the unfinished ledger a fresh start that died left in `dir` (see [`create`]).
pub(crate) fn remove_unfinished(dir: &Path) -> Result<()> {
    for i in 0..2 {
        let p = slot(&dir.join(ROUND_LEDGER), UNFINISHED, i);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(NetError::Io { path: p, source: e }),
        }
    }
    Ok(())
}

/// Opens silo ledger at `path` with a cap of `rounds` releases and, if given, `budget` by the
/// RDP accountant (the accountant the simulator's silos charge with).
pub fn open(path: &Path, rounds: usize, budget: Option<Budget>) -> Result<Ledger> {
    let store = CellStore::open(path)?;
    let limits = Limits {
        budget,
        accountant: AccountantKind::Rdp,
        max_releases: Some(rounds),
    };
    Ok(Ledger::with_store(Box::new(store), limits)?)
}

/// The releases recorded in the ledger at `path`, in round order, read without opening it
/// for charging (the silo may be gone; nothing is created).
fn read(path: &Path) -> Result<Vec<(u64, PrivacyEvent)>> {
    match Cell::read(path)? {
        // A silo that was never charged (a non-private algorithm) may have an empty cell.
        None if path.parent().is_some_and(Path::is_dir) => Ok(Vec::new()),
        None => Err(NetError::file(path, "no silo state directory here")),
        Some(bytes) => {
            dpfl_privacy::ledger::stored_releases(&bytes).map_err(|e| NetError::file(path, e))
        }
    }
}

/// The events charged in the ledger at `path`, in round order: what the silo has released,
/// as the simulator's `Simulator::spent` reports it (`dpfl federate` accounts them for
/// `summary.json`).
pub fn read_events(path: &Path) -> Result<Vec<PrivacyEvent>> {
    Ok(read(path)?.into_iter().map(|(_, e)| e).collect())
}

/// The rounds charged in the ledger at `path`, in order.
pub fn charged_rounds(path: &Path) -> Result<Vec<u64>> {
    Ok(read(path)?.into_iter().map(|(r, _)| r).collect())
}
