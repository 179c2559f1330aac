//! The one checkpoint format of every reproduction ([`super::reproduction`]): every finished
//! job is appended to `checkpoint.jsonl` in the output directory as it finishes, so an
//! interrupted reproduction (Ctrl-C, a crash, a killed job) loses at most the jobs in flight.
//! `dpfl reproduce --resume` reads the file back and runs only the rest; every job is seeded
//! by its coordinates, so the result equals an uninterrupted run bit for bit.
//!
//! Format (`dpfl-reproduction-checkpoint-2`): a header line
//! `{"format":…, "id":…, "spec_sha256":…, "options":…}` — the reproduction, the SHA-256 of its
//! plan as run (a reproduction that can be extended leaves its seed count out, so that
//! `--trials N --resume` adds seeds) and the options it was run with — then one line
//! `{"key":…, "record":…}` per finished job: the job's stable key
//! ([`super::reproduction::Reproduction::jobs`]) and its serialised record, every float as
//! the 16 hex digits of its IEEE bits ([`Exact`]: exact, NaN-safe). A line whose key is not a
//! job of this run (a seed beyond `--trials`) is kept and ignored. The file's rules (refusal
//! without `--resume`, cut-short last line, damage, a second line for one job, the files of
//! the three formats before this one) are those of [`super::checkpoint_file`].

use std::collections::HashMap;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::checkpoint_file::{self, AppendLog, hex, unhex};
use dpfl::Result;

/// The format tag of the header.
pub const FORMAT: &str = "dpfl-reproduction-checkpoint-2";

/// The file name of the checkpoint inside a reproduction's output directory.
pub const FILE_NAME: &str = "checkpoint.jsonl";

/// A checkpoint's first line.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// The reproduction's id.
    pub id: String,
    /// The SHA-256 of the plan as run ([`checkpoint_file::fingerprint`]).
    pub spec_sha256: String,
    /// The options the plan was run with (`--quick`, `--rounds`, …).
    pub options: serde_json::Value,
}

impl checkpoint_file::Header for Header {
    fn format(&self) -> &str {
        &self.format
    }
}

#[derive(Deserialize)]
struct Line<R> {
    key: String,
    record: R,
}

#[derive(Serialize)]
struct LineOut<'a, R> {
    key: &'a str,
    record: &'a R,
}

/// An f64 written as the 16 hex digits of its bits: what a record's floats are in the file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exact(pub f64);

impl Serialize for Exact {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&hex(self.0))
    }
}

impl<'de> Deserialize<'de> for Exact {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        unhex(&s)
            .filter(|_| s.len() == 16)
            .map(Exact)
            .ok_or_else(|| serde::de::Error::custom(format!("{s:?} is not 16 hex digits")))
    }
}

/// Serde helpers writing an `f64` field as [`Exact`].
pub mod exact {
    use super::Exact;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Writes `v` as [`Exact`].
    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        Exact(*v).serialize(s)
    }

    /// Reads an [`Exact`].
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Exact::deserialize(d)?.0)
    }
}

/// Serde helpers writing an `Option<f64>` field as an optional [`Exact`].
pub mod exact_opt {
    use super::Exact;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Writes `v` as an optional [`Exact`].
    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        v.map(Exact).serialize(s)
    }

    /// Reads an optional [`Exact`].
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        Ok(Option::<Exact>::deserialize(d)?.map(|e| e.0))
    }
}

/// An open checkpoint: the jobs already finished (by key) and the file new ones are appended
/// to.
pub struct Checkpoint<R> {
    log: AppendLog,
    done: HashMap<String, R>,
}

impl<R: Serialize + DeserializeOwned> Checkpoint<R> {
    /// Opens `path` for `header`'s reproduction. Without `resume`, an existing checkpoint is an
    /// error (its work would be lost); with it, its finished jobs are read back (a missing file
    /// starts afresh). A header of another plan or other options is refused, saying which.
    pub fn open(path: &Path, header: Header, resume: bool) -> Result<Self> {
        let mut done = HashMap::new();
        let mut seen = checkpoint_file::Lines::new();
        let mismatch = |old: &Header| {
            let what = if old.id != header.id {
                format!("reproduction {:?}, not {:?}", old.id, header.id)
            } else if old.options != header.options {
                format!("options {}, not {}", old.options, header.options)
            } else {
                "another spec or plan with the same options".to_string()
            };
            format!("a different specification or options ({what})")
        };
        let log = AppendLog::open(path, &header, resume, &mismatch, |n, line: Line<R>| {
            seen.first(line.key.clone(), n, &format!("job {:?}", line.key))?;
            done.insert(line.key, line.record);
            Ok(())
        })?;
        Ok(Checkpoint { log, done })
    }

    /// The record of the finished job `key`, if the file holds it.
    pub fn get(&self, key: &str) -> Option<&R> {
        self.done.get(key)
    }

    /// How many of `keys` the file holds.
    pub fn finished(&self, keys: &[String]) -> usize {
        keys.iter().filter(|k| self.done.contains_key(*k)).count()
    }

    /// Appends the finished job `key` (one line).
    pub fn record(&self, key: &str, record: &R) -> Result<()> {
        self.log.append(&LineOut { key, record })
    }

    /// The checkpoint file, for messages.
    pub fn path(&self) -> &Path {
        self.log.path()
    }

    /// Deletes the checkpoint (after the outputs it fed are written).
    pub fn remove(self) -> Result<()> {
        self.log.remove()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Rec {
        #[serde(with = "exact")]
        x: f64,
        #[serde(with = "exact_opt")]
        y: Option<f64>,
        n: u64,
    }

    fn refused(r: Result<Checkpoint<Rec>>) -> String {
        match r {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    fn header(options: serde_json::Value, sha: &str) -> Header {
        Header {
            format: FORMAT.into(),
            id: "r".into(),
            spec_sha256: sha.into(),
            options,
        }
    }

    /// Records come back bit for bit (NaN included); a cut-short line is dropped; keys not
    /// asked for are kept; another plan or other options are refused saying which; the older
    /// formats are refused as such.
    #[test]
    fn records_come_back_exactly_and_other_plans_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let opts = serde_json::json!({"quick": true});
        let a = Rec {
            x: 1.0 / 7.0,
            y: Some(f64::NAN),
            n: 3,
        };
        let b = Rec {
            x: f64::NEG_INFINITY,
            y: None,
            n: 4,
        };
        {
            let c = Checkpoint::open(&path, header(opts.clone(), "s"), false).unwrap();
            c.record("a", &a).unwrap();
            c.record("b", &b).unwrap();
        }
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        write!(f, "{{\"key\":\"c\",\"rec").unwrap();
        drop(f);
        assert!(Checkpoint::<Rec>::open(&path, header(opts.clone(), "s"), false).is_err());
        let c = Checkpoint::<Rec>::open(&path, header(opts.clone(), "s"), true).unwrap();
        let back = c.get("a").unwrap();
        assert_eq!(back.x.to_bits(), a.x.to_bits());
        assert!(back.y.unwrap().is_nan());
        assert_eq!(c.get("b"), Some(&b));
        assert_eq!(c.finished(&["a".into(), "z".into()]), 1);
        drop(c);
        let e = refused(Checkpoint::<Rec>::open(
            &path,
            header(serde_json::json!({}), "s"),
            true,
        ));
        assert!(e.contains("options {\"quick\":true}, not {}"), "{e}");
        let e = refused(Checkpoint::<Rec>::open(
            &path,
            header(opts.clone(), "t"),
            true,
        ));
        assert!(e.contains("different specification"), "{e}");
        std::fs::write(
            &path,
            "{\"format\":\"dpfl-soteria-checkpoint-1\",\"plan_sha256\":\"x\"}\n",
        )
        .unwrap();
        let e = refused(Checkpoint::<Rec>::open(&path, header(opts, "s"), true));
        assert!(
            e.contains("checkpoint.jsonl")
                && e.contains("written by an older dpfl")
                && e.contains("without --resume"),
            "{e}"
        );
    }
}
