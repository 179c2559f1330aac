//! Output files that are never half-written: every result file (summary.json, CSVs, SVG/PNG
//! plots, checkpoints' final copies) is written to a temporary file in the same directory,
//! flushed and synced, and renamed over the target. A crash or a full disk leaves either the
//! old file or the new one, never a truncated mix, and no temporary file behind.
//!
//! Also: [`prepare_out_dir`], which checks an output directory *before* a run starts (a long
//! reproduction must not be lost because `--out` names a file), and [`csv_string`], which
//! writes CSV with a real CSV writer (a label with a comma or a quote stays one field).
//! A run's whole output set (`train --out`, `federate --out`) goes through [`Staging`]: written
//! aside and moved in only once whole, after checking that every entry can replace its target.

use std::io::Write;
use std::path::{Path, PathBuf};

use dpfl::{Error, Result};

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A temporary path next to `path` (same directory, so the rename is atomic).
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Removes the temporary file when dropped unless it was renamed into place.
struct TempGuard(Option<PathBuf>);

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Replaces `path` by a file produced by `produce(temp_path)`: the producer writes the
/// temporary file (any way it likes, e.g. a plotting backend), then it is synced and renamed
/// over `path`. On any error the temporary file is removed and `path` is left untouched.
pub fn replace_with(path: &Path, produce: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let tmp = temp_path(path);
    let mut guard = TempGuard(Some(tmp.clone()));
    produce(&tmp)?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .open(&tmp)
        .map_err(io_err(path))?;
    f.sync_all().map_err(io_err(path))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io_err(path))?;
    guard.0 = None;
    // The rename is durable once the directory is synced (best effort: not every platform
    // lets a directory be opened).
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })
    {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Writes `bytes` to `path` atomically (see the module docs).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    replace_with(path, |tmp| {
        let f = std::fs::File::create(tmp).map_err(io_err(path))?;
        write_through(f, bytes).map_err(io_err(path))
    })
}

/// Writes all of `bytes` into `w` and flushes it: the one place a file's content is written,
/// generic so that a size-limited writer can stand in for a full disk in tests.
pub fn write_through<W: Write>(mut w: W, bytes: &[u8]) -> std::io::Result<()> {
    w.write_all(bytes)?;
    w.flush()
}

/// `header` and `rows` as CSV text (RFC 4180 quoting where a field needs it).
pub fn csv_string<I, R>(header: &[&str], rows: I) -> Result<String>
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    let mut w = csv::Writer::from_writer(Vec::new());
    let err = |e: csv::Error| Error::data("CSV output", e.to_string());
    w.write_record(header).map_err(err)?;
    for r in rows {
        w.write_record(r).map_err(err)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| Error::data("CSV output", e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| Error::data("CSV output", e.to_string()))
}

/// Checks that `dir` is (or can be created as) a writable directory, before any work is
/// done: creates it if missing, refuses a path that is a file, and proves it writable by
/// creating and removing a probe file. Errors name the directory.
pub fn prepare_out_dir(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "exists and is not a directory (the output directory)",
            ),
        });
    }
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let probe = dir.join(format!(".dpfl-write-probe-{}", std::process::id()));
    std::fs::File::create(&probe).map_err(io_err(dir))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// [`prepare_out_dir`] for a new run's results: an existing directory that holds anything is
/// refused unless `force` (the CLI's `--force`), so a second run never silently mixes its
/// files with, or overwrites, an earlier run's.
pub fn prepare_fresh_out_dir(dir: &Path, force: bool) -> Result<()> {
    if !force
        && dir.is_dir()
        && std::fs::read_dir(dir)
            .map_err(io_err(dir))?
            .next()
            .is_some()
    {
        return Err(Error::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the output directory exists and is not empty; pass --force to overwrite \
                 its files, or choose another --out",
            ),
        });
    }
    prepare_out_dir(dir)
}

/// A run's output set written aside and moved into its directory only once whole (issue 31:
/// `train --force` wrote `rounds.csv` and then failed on `summary.json`, leaving a mix of two
/// runs). Files are written into a hidden directory inside the target ([`Staging::path`]);
/// [`Staging::commit`] first checks that every entry can replace its target (a file may not
/// replace a directory, nor a directory a file) and only then renames each into place. A
/// staging that is dropped without `commit` is removed, and the target is untouched.
pub struct Staging {
    dir: PathBuf,
    stage: Option<PathBuf>,
}

impl Staging {
    /// A fresh staging directory inside `dir` (which must exist: [`prepare_out_dir`]).
    pub fn new(dir: &Path) -> Result<Self> {
        let stage = dir.join(format!(".dpfl-staging-{}", std::process::id()));
        if stage.exists() {
            std::fs::remove_dir_all(&stage).map_err(io_err(&stage))?;
        }
        std::fs::create_dir(&stage).map_err(io_err(&stage))?;
        Ok(Staging {
            dir: dir.to_path_buf(),
            stage: Some(stage),
        })
    }

    /// Where to write the outputs.
    pub fn path(&self) -> &Path {
        self.stage.as_deref().unwrap_or(&self.dir)
    }

    /// Moves every staged entry into the target directory, replacing what is there (a
    /// directory entry, e.g. `models/`, replaces the old directory as a whole). Checks all
    /// entries before moving any: on a refusal nothing is moved.
    pub fn commit(mut self) -> Result<()> {
        let Some(stage) = self.stage.clone() else {
            return Ok(());
        };
        let mut moves = Vec::new();
        for e in std::fs::read_dir(&stage).map_err(io_err(&stage))? {
            let e = e.map_err(io_err(&stage))?;
            let is_dir = e.file_type().map_err(io_err(&e.path()))?.is_dir();
            let target = self.dir.join(e.file_name());
            if let Ok(m) = std::fs::symlink_metadata(&target)
                && m.is_dir() != is_dir
            {
                return Err(Error::Io {
                    path: target,
                    source: std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        if is_dir {
                            "is a file where this run writes a directory; remove it (nothing \
                             was written)"
                        } else {
                            "is a directory where this run writes a file; remove it (nothing \
                             was written)"
                        },
                    ),
                });
            }
            moves.push((e.path(), target, is_dir));
        }
        for (from, to, is_dir) in moves {
            if is_dir && to.is_dir() {
                std::fs::remove_dir_all(&to).map_err(io_err(&to))?;
            }
            std::fs::rename(&from, &to).map_err(io_err(&to))?;
        }
        std::fs::remove_dir(&stage).map_err(io_err(&stage))?;
        self.stage = None;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Some(s) = self.stage.take() {
            let _ = std::fs::remove_dir_all(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused commit moves nothing and leaves no staging behind; a good one replaces the
    /// old files and the old `models/` as a whole.
    #[test]
    fn staging_moves_all_or_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        std::fs::write(d.join("rounds.csv"), "old").unwrap();
        std::fs::create_dir_all(d.join("summary.json")).unwrap();
        let s = Staging::new(d).unwrap();
        atomic_write(&s.path().join("rounds.csv"), b"new").unwrap();
        atomic_write(&s.path().join("summary.json"), b"{}").unwrap();
        let e = s.commit().unwrap_err().to_string();
        assert!(e.contains("summary.json") && e.contains("directory"), "{e}");
        assert_eq!(
            std::fs::read_to_string(d.join("rounds.csv")).unwrap(),
            "old"
        );
        assert_eq!(
            std::fs::read_dir(d).unwrap().count(),
            2,
            "staging left behind"
        );
        std::fs::remove_dir(d.join("summary.json")).unwrap();
        std::fs::create_dir_all(d.join("models/9-old")).unwrap();
        let s = Staging::new(d).unwrap();
        atomic_write(&s.path().join("rounds.csv"), b"new").unwrap();
        std::fs::create_dir_all(s.path().join("models/1-new")).unwrap();
        s.commit().unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("rounds.csv")).unwrap(),
            "new"
        );
        assert!(d.join("models/1-new").is_dir() && !d.join("models/9-old").exists());
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 2);
    }

    #[test]
    fn fresh_out_dir_refuses_a_non_empty_directory_without_force() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("out");
        prepare_fresh_out_dir(&d, false).unwrap();
        // Empty: still fine.
        prepare_fresh_out_dir(&d, false).unwrap();
        std::fs::write(d.join("summary.json"), "[]").unwrap();
        let e = prepare_fresh_out_dir(&d, false).unwrap_err().to_string();
        assert!(e.contains("--force") && e.contains("out"), "{e}");
        prepare_fresh_out_dir(&d, true).unwrap();
    }

    /// A writer that accepts `room` bytes and then fails like a full disk (ENOSPC).
    struct FullDisk<W> {
        inner: W,
        room: usize,
    }

    impl<W: Write> Write for FullDisk<W> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from_raw_os_error(28));
            }
            let k = buf.len().min(self.room);
            self.room -= k;
            self.inner.write(&buf[..k])
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.inner.flush()
        }
    }

    #[test]
    fn a_full_disk_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("summary.json");
        atomic_write(&p, b"old content\n").unwrap();
        let new = vec![b'x'; 10_000];
        let err = replace_with(&p, |tmp| {
            let f = std::fs::File::create(tmp).unwrap();
            write_through(
                FullDisk {
                    inner: f,
                    room: 4096,
                },
                &new,
            )
            .map_err(io_err(&p))
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("summary.json") && err.contains("os error 28"),
            "{err}"
        );
        assert_eq!(std::fs::read(&p).unwrap(), b"old content\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("summary.json")]);
        // With room, the new content replaces the old.
        atomic_write(&p, &new).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), new);
    }

    #[test]
    fn csv_quotes_labels_with_commas_and_quotes() {
        let s = csv_string(
            &["a", "label"],
            [vec!["1".to_string(), "say \"hi\", then go".to_string()]],
        )
        .unwrap();
        assert_eq!(s, "a,label\n1,\"say \"\"hi\"\", then go\"\n");
        let mut r = csv::Reader::from_reader(s.as_bytes());
        let rec = r.records().next().unwrap().unwrap();
        assert_eq!(&rec[1], "say \"hi\", then go");
    }

    #[test]
    fn out_dir_that_is_a_file_is_refused_before_work() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("file");
        std::fs::write(&f, b"").unwrap();
        let err = prepare_out_dir(&f).unwrap_err().to_string();
        assert!(
            err.contains("not a directory") && err.contains("file"),
            "{err}"
        );
        prepare_out_dir(&dir.path().join("a/b")).unwrap();
        assert!(dir.path().join("a/b").is_dir());
    }
}
