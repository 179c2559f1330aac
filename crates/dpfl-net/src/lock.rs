//! Exclusive locks on state directories.
//!
//! Two processes on one state directory would both restore the same generator state: two
//! `dpfl silo --id 0` could answer different rounds with identical noise, whose difference is
//! noiseless (issue 11, item 5). Every process that owns a state directory (silo, server, and
//! the shuffler's address file) takes an exclusive advisory lock on a `LOCK` file there before
//! reading any state, and holds it until it exits. The operating system releases the lock when
//! the process dies, however it dies, so a crash never leaves a stale lock behind.
//!
//! `std::fs::File::try_lock` (stable since Rust 1.89; `flock` on Linux, `LockFileEx` on
//! Windows) is the whole mechanism: no crate needed.

use std::fs::{File, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::{NetError, Result};

/// An exclusive lock, held until dropped (or the process exits).
#[derive(Debug)]
pub struct DirLock {
    path: PathBuf,
    _file: File,
}

impl DirLock {
    /// The locked directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Locks `dir` (creating it) for `who` (e.g. "silo 0"), or fails naming the directory and the
/// process holding it.
pub fn lock_dir(dir: &Path, who: &str) -> Result<DirLock> {
    std::fs::create_dir_all(dir).map_err(NetError::io(dir))?;
    lock_file(&dir.join(LOCK_FILE), who)
}

/// The lock file's name in a state directory.
pub const LOCK_FILE: &str = "LOCK";

/// Locks the file `path` (creating it): see [`lock_dir`].
pub fn lock_file(path: &Path, who: &str) -> Result<DirLock> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(NetError::io(path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(NetError::Locked {
                path: path.into(),
                reason: format!(
                    "{who}: another process holds this state directory's lock{}; two processes \
                     on one state directory would release identical noise, so this one stops",
                    if holder.is_empty() {
                        String::new()
                    } else {
                        format!(" ({holder})")
                    }
                ),
            });
        }
        Err(TryLockError::Error(e)) => return Err(NetError::io(path)(e)),
    }
    // Who holds it, for the message of the next one to try (best effort: the lock, not this
    // text, is what excludes).
    let _ = file.set_len(0);
    let _ = file.seek(SeekFrom::Start(0));
    let _ = writeln!(file, "{who}, pid {}", std::process::id());
    let _ = file.sync_data();
    Ok(DirLock {
        path: path.into(),
        _file: file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_a_directory_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().expect("tmp");
        let state = dir.path().join("silo-0");
        let first = lock_dir(&state, "silo 0").expect("first");
        let e = lock_dir(&state, "silo 0").expect_err("second");
        let msg = e.to_string();
        assert!(msg.contains("silo-0/LOCK"), "{msg}");
        assert!(msg.contains("another process holds"), "{msg}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        drop(first);
        lock_dir(&state, "silo 0").expect("free again");
    }
}
