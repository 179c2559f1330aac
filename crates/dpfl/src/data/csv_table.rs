//! A CSV file's raw cells ([`Table`]), each record with its 1-based line number, for
//! [`super::csv`]'s loader and for the lab's own-data tools (`dpfl init`, silo columns), so
//! that every error can name the line. Read with the csv crate; only the line bookkeeping
//! (CRLF files) is ours.

use std::collections::BTreeSet;
use std::path::Path;

use super::io;
use crate::{Error, Result};

/// The raw cells of a CSV file, with the line number of each record ([`read_table`]).
#[derive(Debug)]
pub struct Table {
    /// The header's column names.
    pub header: Vec<String>,
    /// The header's 1-based line number.
    pub header_line: usize,
    /// Every record with its 1-based line number.
    pub rows: Vec<(usize, csv::StringRecord)>,
}

/// 1-based line numbers of byte offsets in `bytes`, counted by `\n` (so LF, CRLF and mixed
/// files alike). The csv crate's own line count runs one behind after a CRLF (a record ends
/// at its `\r`, and the `\n` is counted only once the next record is read), so records are
/// placed by their byte offset instead.
struct Lines<'a> {
    bytes: &'a [u8],
    at: usize,
    line: usize,
}

impl Lines<'_> {
    /// The line of the first byte at or after `byte` that is not a line end (where a record
    /// that a reader placed at the end of the previous line really starts). Offsets must not
    /// decrease between calls.
    fn of(&mut self, byte: u64) -> usize {
        let mut start = usize::try_from(byte)
            .unwrap_or(usize::MAX)
            .min(self.bytes.len());
        while start < self.bytes.len() && matches!(self.bytes[start], b'\r' | b'\n') {
            start += 1;
        }
        if start >= self.at {
            self.line += self.bytes[self.at..start]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            self.at = start;
        }
        self.line
    }
}

/// Reads a CSV file's header and records, keeping each record's line number for errors.
pub fn read_table(path: &Path) -> Result<Table> {
    let bytes = io::read_all(path)?;
    let mut lines = Lines {
        bytes: &bytes,
        at: 0,
        line: 1,
    };
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(&bytes[..]);
    let parse_err = |e: csv::Error| -> Error {
        // An error's line is counted afresh (errors end the read; offsets need not grow).
        let line = e.position().map_or(0, |p| {
            Lines {
                bytes: &bytes,
                at: 0,
                line: 1,
            }
            .of(p.byte())
        });
        match e.into_kind() {
            csv::ErrorKind::Io(source) => io::io_error(path, source),
            csv::ErrorKind::Utf8 { err, .. } => Error::Parse {
                path: path.to_path_buf(),
                line,
                reason: format!("field {} is not valid UTF-8", err.field() + 1),
            },
            other => Error::Parse {
                path: path.to_path_buf(),
                line,
                reason: format!("malformed CSV: {other:?}"),
            },
        }
    };
    let mut records = rdr.records();
    let first = records.next().ok_or_else(|| Error::Parse {
        path: path.to_path_buf(),
        line: 1,
        reason: "empty file: expected a header row".into(),
    })?;
    let first = first.map_err(parse_err)?;
    let header_line = first.position().map_or(1, |p| lines.of(p.byte()));
    let header: Vec<String> = first.iter().map(|h| h.trim().to_string()).collect();
    let mut seen = BTreeSet::new();
    for (i, h) in header.iter().enumerate() {
        if h.is_empty() || !seen.insert(h.as_str()) {
            return Err(Error::Parse {
                path: path.to_path_buf(),
                line: header_line,
                reason: format!("header column {} is empty or repeated (`{h}`)", i + 1),
            });
        }
    }
    let mut rows = Vec::new();
    for record in records {
        let record = record.map_err(parse_err)?;
        let line = record.position().map_or(0, |p| lines.of(p.byte()));
        if record.len() != header.len() {
            return Err(Error::Parse {
                path: path.to_path_buf(),
                line,
                reason: format!(
                    "{} fields, but the header has {}",
                    record.len(),
                    header.len()
                ),
            });
        }
        rows.push((line, record));
    }
    Ok(Table {
        header,
        header_line,
        rows,
    })
}
