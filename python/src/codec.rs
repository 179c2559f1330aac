//! Bytes of what the halves exchange from Python: a broadcast, a silo's reply, and the two
//! halves' stored states. Each is a 6-byte magic (`dpfl` + kind + version) and the value in
//! postcard (f64s bit for bit). Decoding checks the magic, the whole length and, for
//! messages, the round and dimension (`Reply::validate`); no input panics.

use serde::Serialize;
use serde::de::DeserializeOwned;

use dpfl::algo::{Broadcast, Reply, Round};

use crate::errors::{RunError, config};
use pyo3::PyResult;

pub const BROADCAST: &[u8; 6] = b"dpflB\x01";
pub const REPLY: &[u8; 6] = b"dpflR\x01";
pub const SILO_STATE: &[u8; 6] = b"dpflS\x01";
pub const SERVER_STATE: &[u8; 6] = b"dpflV\x01";

fn name(magic: &[u8; 6]) -> &'static str {
    match magic {
        BROADCAST => "a broadcast",
        REPLY => "a silo message",
        SILO_STATE => "a silo half's state",
        _ => "a server half's state",
    }
}

/// `magic` and `value` in postcard.
pub fn encode<T: Serialize>(magic: &[u8; 6], value: &T) -> PyResult<Vec<u8>> {
    let mut out = magic.to_vec();
    let body = postcard::to_allocvec(value)
        .map_err(|e| RunError::new_err(format!("encoding {}: {e}", name(magic))))?;
    out.extend_from_slice(&body);
    Ok(out)
}

/// The value `encode(magic, _)` wrote, or an error naming what was expected: a state is
/// the caller's argument (`state=`: a [`ConfigError`]), a message the transport's
/// ([`RunError`]).
pub fn decode<T: DeserializeOwned>(magic: &[u8; 6], bytes: &[u8]) -> PyResult<T> {
    let what = name(magic);
    let fail = |reason: String| match magic {
        SILO_STATE | SERVER_STATE => config("state", reason),
        _ => RunError::new_err(reason),
    };
    let body = bytes.strip_prefix(&magic[..]).ok_or_else(|| {
        fail(format!(
            "not {what} of dpfl.halves (its bytes do not start with {:?})",
            String::from_utf8_lossy(magic)
        ))
    })?;
    let (v, rest) = postcard::take_from_bytes(body).map_err(|e| fail(format!("{what}: {e}")))?;
    if !rest.is_empty() {
        return Err(fail(format!(
            "{what}: {} bytes after the value",
            rest.len()
        )));
    }
    Ok(v)
}

/// A broadcast of dimension `dim`.
pub fn broadcast(bytes: &[u8], dim: usize) -> PyResult<Broadcast> {
    let b: Broadcast = decode(BROADCAST, bytes)?;
    b.check_dim(dim).map_err(crate::errors::dpfl_error)?;
    Ok(b)
}

/// A silo's reply to round `round`, validated against `dim`.
pub fn reply(bytes: &[u8], round: Round, dim: usize) -> PyResult<Reply> {
    let r: Reply = decode(REPLY, bytes)?;
    if r.round != round {
        return Err(RunError::new_err(format!(
            "a silo message for round {}, aggregated as round {round}",
            r.round
        )));
    }
    r.validate(dim).map_err(crate::errors::dpfl_error)?;
    Ok(r)
}
