//! The models a simulator run evaluates, recorded by the server (`[server]
//! record_models_every = k`) so that `dpfl federate` can write `dpfl train`'s learning curve.
//!
//! After aggregating a round the server appends the model [`dpfl::algo::ServerHalf::output`]
//! returns — exactly what `dpfl_lab::experiment::train_one` evaluates at that point — for every
//! round that [`dpfl::round::is_eval_round`] selects with period k (every k-th round and
//! always the last).
//!
//! # Format (`models.bin` in the server state directory)
//! A sequence of records, each `u32 round` (rounds aggregated so far, 1-based: the `round` of
//! `rounds.csv`), `u32 dim`, then `dim` little-endian f64 (bit-exact), all little-endian.
//!
//! # Crashes
//! A record is appended and fsynced *before* the checkpoint of its round, so every
//! checkpointed round's model is on disk. A restarted server re-runs the rounds after its
//! checkpoint; on start it therefore drops every record past the checkpoint (and a record torn
//! by the crash) before appending again. [`read_models`] in addition keeps only the last
//! record of each round, so a file is read correctly whichever writer left it.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{NetError, Result};

/// Bytes of a record header (round, dim).
const HEADER: usize = 8;

/// Appends the evaluated rounds' models to `models.bin`.
pub struct ModelRecorder {
    path: PathBuf,
    every: usize,
    rounds: usize,
    file: std::fs::File,
}

impl ModelRecorder {
    /// Opens `path` for a server that has aggregated `done` of `rounds` rounds (its
    /// checkpoint), recording every `every`-th round. Records of rounds after `done` are
    /// dropped: those rounds will be run, and recorded, again.
    pub fn open(path: &Path, every: usize, rounds: usize, done: usize) -> Result<Self> {
        if every == 0 {
            return Err(NetError::config(
                "server.record_models_every",
                "must be at least 1",
            ));
        }
        let kept = match crate::store::read_opt(path)? {
            // A fresh run (no checkpoint) starts a fresh file whatever an earlier run left.
            Some(bytes) if done > 0 => {
                let (records, _) = parse(&bytes);
                let mut out = Vec::new();
                for (round, w) in records {
                    if round as usize <= done {
                        out.extend_from_slice(&encode(round, &w));
                    }
                }
                out
            }
            _ => Vec::new(),
        };
        crate::store::write_atomic(path, &kept)?;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(NetError::io(path))?;
        Ok(ModelRecorder {
            path: path.into(),
            every,
            rounds,
            file,
        })
    }

    /// After round `done` (1-based) has been aggregated: appends `model()` durably if `done`
    /// is an evaluated round. Call before writing that round's checkpoint.
    pub fn after_round(&mut self, done: usize, model: impl FnOnce() -> Vec<f64>) -> Result<()> {
        if !dpfl::round::is_eval_round(done, self.every, self.rounds) {
            return Ok(());
        }
        let round = u32::try_from(done)
            .map_err(|_| NetError::file(&self.path, format!("round {done} exceeds u32")))?;
        let bytes = encode(round, &model());
        self.file
            .write_all(&bytes)
            .map_err(NetError::io(&self.path))?;
        // Durable before the checkpoint that says this round is done (see the module doc).
        self.file.sync_data().map_err(NetError::io(&self.path))
    }
}

fn encode(round: u32, w: &[f64]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER + 8 * w.len());
    b.extend_from_slice(&round.to_le_bytes());
    // The dimension is the model's, far below u32::MAX (messages are bounded much lower).
    b.extend_from_slice(&(w.len() as u32).to_le_bytes());
    for v in w {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// The complete records in `bytes`, and, if the file does not end on a record boundary, why.
fn parse(bytes: &[u8]) -> (Vec<(u32, Vec<f64>)>, Option<String>) {
    let mut records = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < HEADER {
            return (
                records,
                Some(format!("truncated record header at byte {at}")),
            );
        }
        let round = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let dim = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]) as usize;
        let body = dim.checked_mul(8).and_then(|n| n.checked_add(HEADER));
        let Some(len) = body.filter(|&n| n <= rest.len()) else {
            return (
                records,
                Some(format!(
                    "truncated record at byte {at} (round {round}, dimension {dim})"
                )),
            );
        };
        let w = rest[HEADER..len]
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect();
        records.push((round, w));
        at += len;
    }
    (records, None)
}

/// The recorded models of `path`, one per round in increasing round order (the last record
/// of a round when it was written more than once). Errors name the file: a torn record, or
/// records of different dimensions.
pub fn read_models(path: &Path) -> Result<Vec<(u32, Vec<f64>)>> {
    let bytes = std::fs::read(path).map_err(NetError::io(path))?;
    let (records, torn) = parse(&bytes);
    if let Some(why) = torn {
        return Err(NetError::file(path, why));
    }
    let mut by_round = std::collections::BTreeMap::new();
    let mut dim = None;
    for (round, w) in records {
        match dim {
            None => dim = Some(w.len()),
            Some(d) if d != w.len() => {
                return Err(NetError::file(
                    path,
                    format!(
                        "round {round} has dimension {}, earlier records {d}",
                        w.len()
                    ),
                ));
            }
            Some(_) => {}
        }
        by_round.insert(round, w);
    }
    Ok(by_round.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(v: &[(u32, Vec<f64>)]) -> Vec<(u32, Vec<u64>)> {
        v.iter()
            .map(|(r, w)| (*r, w.iter().map(|x| x.to_bits()).collect()))
            .collect()
    }

    fn model(r: usize) -> Vec<f64> {
        // Values whose bits a lossy format would change.
        vec![
            0.1 * r as f64,
            -1.0 / 3.0,
            f64::MIN_POSITIVE,
            r as f64 + 1e-17,
        ]
    }

    #[test]
    fn records_the_evaluated_rounds_bit_for_bit() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("models.bin");
        let mut rec = ModelRecorder::open(&path, 3, 10, 0).expect("open");
        for done in 1..=10 {
            rec.after_round(done, || model(done)).expect("record");
        }
        let got = read_models(&path).expect("read");
        let want: Vec<(u32, Vec<f64>)> = [3, 6, 9, 10]
            .iter()
            .map(|&r| (r as u32, model(r)))
            .collect();
        assert_eq!(bits(&got), bits(&want));
    }

    #[test]
    fn a_restart_drops_the_rounds_after_the_checkpoint_and_a_torn_tail() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("models.bin");
        let mut rec = ModelRecorder::open(&path, 2, 8, 0).expect("open");
        for done in 1..=6 {
            rec.after_round(done, || model(done)).expect("record");
        }
        drop(rec);
        // A crash after recording round 6 but before its checkpoint (which says 4 rounds
        // are done), in the middle of appending a further record.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("append");
        f.write_all(&encode(8, &model(8))[..13]).expect("torn");
        drop(f);
        let err = read_models(&path).expect_err("a torn file is an error");
        let msg = err.to_string();
        assert!(
            msg.contains("models.bin") && msg.contains("truncated"),
            "{msg}"
        );
        // The restarted server re-runs rounds 5..=8 and records 6 and 8 again, with a
        // different model for 6 (as a shuffled re-run could sum differently).
        let mut rec = ModelRecorder::open(&path, 2, 8, 4).expect("reopen");
        rec.after_round(5, || model(50)).expect("5");
        rec.after_round(6, || model(60)).expect("6");
        rec.after_round(7, || model(70)).expect("7");
        rec.after_round(8, || model(80)).expect("8");
        let got = read_models(&path).expect("read");
        let want = vec![(2, model(2)), (4, model(4)), (6, model(60)), (8, model(80))];
        assert_eq!(bits(&got), bits(&want));
    }

    #[test]
    fn the_reader_keeps_the_last_record_of_a_round() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("models.bin");
        let bytes = [
            encode(1, &model(1)),
            encode(2, &model(2)),
            encode(2, &model(20)),
        ]
        .concat();
        std::fs::write(&path, bytes).expect("write");
        let got = read_models(&path).expect("read");
        assert_eq!(
            bits(&got),
            bits(&[(1, model(1)), (2, model(20))]),
            "a round written twice reads as its last record"
        );
        std::fs::write(&path, [encode(1, &model(1)), encode(2, &[1.0])].concat()).expect("write");
        let msg = read_models(&path)
            .expect_err("mixed dimensions")
            .to_string();
        assert!(
            msg.contains("models.bin") && msg.contains("dimension"),
            "{msg}"
        );
        let msg = read_models(&dir.path().join("absent.bin"))
            .expect_err("missing")
            .to_string();
        assert!(msg.contains("absent.bin"), "{msg}");
    }

    #[test]
    fn a_fresh_run_starts_a_fresh_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("models.bin");
        std::fs::write(&path, encode(1, &model(1))).expect("stale");
        let mut rec = ModelRecorder::open(&path, 1, 1, 0).expect("open");
        rec.after_round(1, || model(7)).expect("record");
        assert_eq!(
            bits(&read_models(&path).expect("read")),
            bits(&[(1, model(7))])
        );
        assert!(
            ModelRecorder::open(&path, 0, 1, 0).is_err(),
            "k = 0 is refused"
        );
    }
}
