//! The rules of the checkpoint file of every reproduction (its one format is
//! [`super::checkpoint`]'s): a JSON-lines file in the output directory, a header naming the
//! plan, then one line per finished unit of work, appended as it finishes.
//!
//! Rules: an existing file without `--resume` is refused (its finished work would be lost);
//! with `--resume` it is read back (a missing file starts afresh). A header of one of the
//! formats before the one format ([`OLDER_FORMATS`]) is refused as written by an older dpfl;
//! one of an unknown format is an error, one of another plan is refused with the caller's
//! wording. A last line without its newline is a write cut short by the interruption and is
//! dropped (the file is truncated before appending); any other damage is an error naming the
//! file and line, never a silent fresh start. A line is written with one `write_all` and
//! synced at most once a second (an interrupted process keeps every written line; a power
//! cut may lose the last second).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use dpfl::{Error, Result};

/// The header tags of the three checkpoint formats before the one format (Lowy's grids,
/// SoteriaFL's runs, DP-NormFedAvg's runs, each with its own line payload): their files are
/// refused with a message saying so, not read.
pub(crate) const OLDER_FORMATS: [&str; 3] = [
    "dpfl-reproduce-checkpoint-1",
    "dpfl-soteria-checkpoint-1",
    "dpfl-normfedavg-checkpoint-1",
];

/// A checkpoint's first line.
pub(crate) trait Header: Serialize + DeserializeOwned + PartialEq {
    /// The format tag, checked before anything else.
    fn format(&self) -> &str;
}

/// `value` as JSON (a plan in a checkpoint header or in provenance.json).
pub(crate) fn config_json(value: &impl Serialize) -> Result<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| Error::data("reproduction", e.to_string()))
}

/// The SHA-256 (hex) of `value`'s JSON: a plan's fingerprint for a header.
pub(crate) fn fingerprint(value: &impl Serialize) -> Result<String> {
    let json =
        serde_json::to_string(value).map_err(|e| Error::data("reproduction", e.to_string()))?;
    Ok(Sha256::digest(json.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// An IEEE double as 16 hex digits of its bits (exact, NaN-safe).
pub(crate) fn hex(v: f64) -> String {
    format!("{:016x}", v.to_bits())
}

/// The inverse of [`hex`].
pub(crate) fn unhex(s: &str) -> Option<f64> {
    u64::from_str_radix(s, 16).ok().map(f64::from_bits)
}

/// The line each unit of work was first read from: a second line for the same unit is
/// refused (issue 31: two conflicting lines for one job were accepted and the later one
/// silently changed the results). Every unit is appended once, when it finishes.
pub(crate) struct Lines<K>(std::collections::HashMap<K, usize>);

impl<K: std::hash::Hash + Eq> Lines<K> {
    /// No line read yet.
    pub(crate) fn new() -> Self {
        Lines(std::collections::HashMap::new())
    }

    /// Records that `unit` (named `what` in the message) is on line `line`; an error naming
    /// both lines if an earlier line holds it.
    pub(crate) fn first(
        &mut self,
        unit: K,
        line: usize,
        what: &str,
    ) -> std::result::Result<(), String> {
        match self.0.insert(unit, line) {
            Some(earlier) => Err(format!(
                "{what} is also on line {earlier}: a checkpoint holds each finished run once \
                 (a second line would replace its results); delete the file to start over"
            )),
            None => Ok(()),
        }
    }
}

impl<K: std::hash::Hash + Eq> Default for Lines<K> {
    fn default() -> Self {
        Self::new()
    }
}

/// An open checkpoint file that finished units are appended to.
pub(crate) struct AppendLog {
    path: PathBuf,
    file: Mutex<(std::fs::File, Instant)>,
}

impl AppendLog {
    /// Opens `path` for the plan described by `header`. Every complete line after the header
    /// is parsed as an `R` and handed to `row` with its 1-based line number; `row`'s error
    /// text becomes a parse error at that line. `mismatch(file's header)` completes "`path` was
    /// written for …" when the header names another plan.
    pub(crate) fn open<H: Header, R: DeserializeOwned>(
        path: &Path,
        header: &H,
        resume: bool,
        mismatch: &dyn Fn(&H) -> String,
        mut row: impl FnMut(usize, R) -> std::result::Result<(), String>,
    ) -> Result<Self> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let parse = |line: usize, reason: String| Error::Parse {
            path: path.to_path_buf(),
            line,
            reason,
        };
        let mut complete = 0;
        if path.exists() {
            if !resume {
                return Err(Error::config(
                    "--resume",
                    format!(
                        "{} holds the finished runs of an earlier or interrupted reproduction: \
                         pass --resume to continue it, or delete the file to start over",
                        path.display()
                    ),
                ));
            }
            let text = std::fs::read_to_string(path).map_err(io)?;
            complete = text.rfind('\n').map_or(0, |i| i + 1);
            let mut lines = text[..complete].lines().enumerate();
            // No header line: cut short before the header was complete, nothing finished.
            if let Some((_, h)) = lines.next() {
                let value: serde_json::Value = serde_json::from_str(h)
                    .map_err(|e| parse(1, format!("not a checkpoint header: {e}")))?;
                let format = value.get("format").and_then(|f| f.as_str()).unwrap_or("");
                if OLDER_FORMATS.contains(&format) {
                    return Err(Error::config(
                        "--resume",
                        format!(
                            "{} was written by an older dpfl (checkpoint format {format:?}), \
                             which this one cannot resume: delete it (or move it away) and \
                             rerun without --resume",
                            path.display()
                        ),
                    ));
                }
                if format != header.format() {
                    return Err(parse(1, format!("unknown format {format:?}")));
                }
                let h: H = serde_json::from_value(value)
                    .map_err(|e| parse(1, format!("not a checkpoint header: {e}")))?;
                if h != *header {
                    return Err(Error::config(
                        "--resume",
                        format!(
                            "{} was written for {}: run with the same ones, or delete it",
                            path.display(),
                            mismatch(&h)
                        ),
                    ));
                }
            }
            for (i, l) in lines {
                let r: R = serde_json::from_str(l)
                    .map_err(|e| parse(i + 1, format!("damaged checkpoint line: {e}")))?;
                row(i + 1, r).map_err(|reason| parse(i + 1, reason))?;
            }
            if complete < text.len() {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(io)?;
                f.set_len(complete as u64).map_err(io)?;
            }
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        if complete == 0 {
            let h = serde_json::to_string(header)
                .map_err(|e| Error::data("checkpoint", e.to_string()))?;
            file.write_all((h + "\n").as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(io)?;
        }
        Ok(AppendLog {
            path: path.to_path_buf(),
            file: Mutex::new((file, Instant::now())),
        })
    }

    /// The file, for messages.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line (one write of the whole line).
    pub(crate) fn append(&self, line: &impl Serialize) -> Result<()> {
        let text = serde_json::to_string(line)
            .map_err(|e| Error::data("checkpoint", e.to_string()))?
            + "\n";
        let io = |source| Error::Io {
            path: self.path.clone(),
            source,
        };
        let mut g = self.file.lock().unwrap_or_else(|e| e.into_inner());
        g.0.write_all(text.as_bytes()).map_err(io)?;
        if g.1.elapsed().as_secs_f64() >= 1.0 {
            g.0.sync_data().map_err(io)?;
            g.1 = Instant::now();
        }
        Ok(())
    }

    /// Deletes the file (after the outputs it fed are written).
    pub(crate) fn remove(self) -> Result<()> {
        std::fs::remove_file(&self.path).map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Serialize, Deserialize, PartialEq)]
    struct H {
        format: String,
        plan: u32,
    }
    impl Header for H {
        fn format(&self) -> &str {
            &self.format
        }
    }

    fn h(format: &str, plan: u32) -> H {
        H {
            format: format.into(),
            plan,
        }
    }

    fn read(path: &Path, header: &H, resume: bool) -> Result<Vec<(usize, u32)>> {
        let mut rows = Vec::new();
        AppendLog::open(
            path,
            header,
            resume,
            &|_| "another plan".into(),
            |line, r: u32| {
                if r == 99 {
                    return Err("row 99 is refused".into());
                }
                rows.push((line, r));
                Ok(())
            },
        )?;
        Ok(rows)
    }

    /// Lines come back with their numbers; a cut-short line is dropped and written over;
    /// no --resume, another plan, another format and a damaged line are errors naming why.
    #[test]
    fn appends_reads_back_and_refuses_what_it_must() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint.jsonl");
        let log = AppendLog::open(&path, &h("f1", 7), false, &|_| "x".into(), |_, _: u32| {
            Ok(())
        })
        .unwrap();
        log.append(&5u32).unwrap();
        log.append(&6u32).unwrap();
        drop(log);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        write!(f, "12").unwrap();
        drop(f);
        let e = read(&path, &h("f1", 7), false).unwrap_err().to_string();
        assert!(e.contains("--resume"), "{e}");
        assert_eq!(
            read(&path, &h("f1", 7), true).unwrap(),
            vec![(2, 5), (3, 6)]
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with("6\n"), "cut-short line dropped: {text:?}");
        let e = read(&path, &h("f1", 8), true).unwrap_err().to_string();
        assert!(e.contains("another plan"), "{e}");
        let e = read(&path, &h("f2", 7), true).unwrap_err().to_string();
        assert!(
            e.contains("unknown format") && e.contains("jsonl:1:"),
            "{e}"
        );
        std::fs::write(
            &path,
            format!("{}\n5\nnope\n", serde_json::to_string(&h("f1", 7)).unwrap()),
        )
        .unwrap();
        let e = read(&path, &h("f1", 7), true).unwrap_err().to_string();
        assert!(e.contains("jsonl:3:") && e.contains("damaged"), "{e}");
        std::fs::write(
            &path,
            format!("{}\n99\n", serde_json::to_string(&h("f1", 7)).unwrap()),
        )
        .unwrap();
        let e = read(&path, &h("f1", 7), true).unwrap_err().to_string();
        assert!(e.contains("jsonl:2:") && e.contains("row 99"), "{e}");
        let mut seen = Lines::new();
        seen.first(4, 2, "job 4").unwrap();
        let e = seen.first(4, 5, "job 4").unwrap_err();
        assert!(e.contains("job 4 is also on line 2"), "{e}");
        // A header cut short: a fresh start that writes the header.
        std::fs::write(&path, "{\"form").unwrap();
        assert!(read(&path, &h("f1", 7), true).unwrap().is_empty());
        assert_eq!(read(&path, &h("f1", 7), true).unwrap(), vec![]);
        assert_eq!(
            unhex(&hex(f64::NAN)).map(f64::to_bits),
            Some(f64::NAN.to_bits())
        );
    }
}
