//! Byte encodings of broadcasts, messages and multi-message replies, and chunked framing over
//! gRPC streams.
//!
//! A message is `DPM1`, its round, then its payload: a 9-byte head (kind, dimension, count)
//! and the content. Kinds: 0 dense (count = dimension, f64s), 1 sparse (count = entries,
//! u32 indices then f64s), 2 packed (count = bits per integer, ⌈len·bits/8⌉ bytes), 3 labelled
//! (count = label, then one non-labelled payload), 4–6 the compressed kinds of
//! `dpfl::compress::Compressed` (count and content defined there). Every [`Payload`] variant
//! is matched without a wildcard arm, so a new kind does not compile until it has an encoding.
//!
//! Vectors are sent as raw little-endian f64s rather than `repeated double`, so a body can be
//! cut into fixed-size chunks at any byte, sealed with HPKE as one plaintext, and stored on a
//! silo's disk as exactly the bytes it sent. Decoding checks every length against the bytes
//! present and the expected dimension; no input can make it panic or over-allocate.

use dpfl::algo::{Broadcast, PackedInts, Payload, Reply, Round, SiloMessage};
use dpfl::compress::Compressed;

use crate::error::{NetError, Result};
use crate::proto::{Frame, Header, frame::Part};

/// Bytes per data chunk of a streamed body.
pub const CHUNK_BYTES: usize = 1 << 20;

const BROADCAST_MAGIC: &[u8; 4] = b"DPB1";
const MESSAGE_MAGIC: &[u8; 4] = b"DPM1";
const REPLY_MAGIC: &[u8; 4] = b"DPR1";

/// Largest encoded message of dimension `dim` (a labelled sparse message with every index).
pub fn max_message_bytes(dim: usize) -> u64 {
    26 + 12 * dim as u64
}

/// Largest sealed message of dimension `dim` (encapsulated key and AEAD tag added).
pub fn max_sealed_bytes(dim: usize) -> u64 {
    max_message_bytes(dim) + 32 + 16
}

/// How many largest messages one reply may weigh. A reply of several messages (a
/// multi-message protocol) carries at most this many times the bytes of the largest single
/// message of the dimension: the limit stays derived from the model dimension, so an
/// announced length is still checked before anything is allocated. A protocol that needs
/// more raises it here.
pub const REPLY_WEIGHT: u64 = 8;

/// Largest body a silo sends for one round: a reply of dimension `dim`.
pub fn max_reply_bytes(dim: usize) -> u64 {
    12 + REPLY_WEIGHT * max_message_bytes(dim)
}

/// Most messages in one reply of dimension `dim`: every payload takes at least its 9-byte
/// head and one byte of content.
pub fn max_reply_messages(dim: usize) -> usize {
    usize::try_from(max_reply_bytes(dim) / 10).unwrap_or(usize::MAX)
}

/// Largest total of the sealed messages of one reply (each sealed on its own, so that the
/// shuffler permutes messages, not replies).
pub fn max_sealed_reply_bytes(dim: usize) -> u64 {
    max_reply_bytes(dim) + (32 + 16) * max_reply_messages(dim) as u64
}

/// The body a silo sends on its session for `reply`: a one-message reply is that message
/// (`DPM1`, the bytes a single-message algorithm has always sent), several messages a `DPR1`
/// reply. [`decode_answer`] reads both.
pub fn encode_answer(reply: &Reply) -> Vec<u8> {
    match reply.messages.as_slice() {
        [one] => encode_message(one),
        _ => encode_reply(reply),
    }
}

/// Decodes a silo's answer body ([`encode_answer`]): a message or a reply, by its magic.
pub fn decode_answer(bytes: &[u8], round: Round, dim: usize) -> Result<Reply> {
    if bytes.starts_with(REPLY_MAGIC) {
        decode_reply(bytes, round, dim, max_reply_messages(dim))
    } else {
        decode_message(bytes, round, dim).map(Reply::single)
    }
}

/// Encodes a broadcast (round, point, auxiliary vectors) as protocol bytes.
pub fn encode_broadcast(b: &Broadcast) -> Vec<u8> {
    let n = b.point.len() + b.aux.iter().map(Vec::len).sum::<usize>();
    let mut out = Vec::with_capacity(16 + 4 * b.aux.len() + 8 * n);
    out.extend_from_slice(BROADCAST_MAGIC);
    out.extend_from_slice(&b.round.get().to_le_bytes());
    out.extend_from_slice(&(b.point.len() as u32).to_le_bytes());
    out.extend_from_slice(&(b.aux.len() as u32).to_le_bytes());
    for a in &b.aux {
        out.extend_from_slice(&(a.len() as u32).to_le_bytes());
    }
    push_f64s(&mut out, &b.point);
    for a in &b.aux {
        push_f64s(&mut out, a);
    }
    out
}

/// Decodes a broadcast, validating the point's dimension `dim` once.
pub fn decode_broadcast(bytes: &[u8], dim: usize) -> Result<Broadcast> {
    let mut r = Reader::new(bytes, "broadcast");
    r.magic(BROADCAST_MAGIC)?;
    let round = Round::new(r.u32()?);
    let point_len = r.u32()? as usize;
    if point_len != dim {
        return Err(NetError::Rejected(format!(
            "broadcast point of dimension {point_len}, expected {dim}"
        )));
    }
    let aux_count = r.u32()? as usize;
    if aux_count > 64 {
        return Err(NetError::Rejected(format!(
            "broadcast with {aux_count} aux vectors"
        )));
    }
    let aux_lens = (0..aux_count)
        .map(|_| r.u32().map(|v| v as usize))
        .collect::<Result<Vec<_>>>()?;
    let point = r.f64s(point_len)?;
    let aux = aux_lens
        .into_iter()
        .map(|n| r.f64s(n))
        .collect::<Result<Vec<_>>>()?;
    r.end()?;
    Ok(Broadcast { round, point, aux })
}

/// Encodes one silo message (round, silo, payload) as protocol bytes; every payload kind has its own arm.
pub fn encode_message(m: &SiloMessage) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + payload_bytes(&m.payload) as usize);
    out.extend_from_slice(MESSAGE_MAGIC);
    out.extend_from_slice(&m.round.get().to_le_bytes());
    push_payload(&mut out, &m.payload);
    out
}

/// Exact encoded length of a payload: a 9-byte head (kind, dimension, count) and its content
/// in ⌈[`Payload::bits`]/8⌉ bytes (the sparse dimension's 32 bits sit in the head).
pub fn payload_bytes(p: &Payload) -> u64 {
    match p {
        Payload::Dense(_) | Payload::Packed(_) | Payload::Compressed(_) => 9 + p.bits().div_ceil(8),
        Payload::Sparse { .. } => 9 + (p.bits() - 32) / 8,
        // The label's 32 bits are the inner head's count field of the outer head.
        Payload::Labelled { payload, .. } => 9 + payload_bytes(payload),
    }
}

/// Payload kinds on the wire. Every [`Payload`] variant has one, matched exhaustively both
/// ways: a new kind does not compile until it has an encoding.
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const PACKED: u8 = 2;
const LABELLED: u8 = 3;
/// Kinds COMPRESSED..COMPRESSED + `Compressed::KINDS`.
const COMPRESSED: u8 = 4;

fn push_head(out: &mut Vec<u8>, kind: u8, dim: u32, count: u32) {
    out.push(kind);
    out.extend_from_slice(&dim.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
}

fn push_payload(out: &mut Vec<u8>, p: &Payload) {
    match p {
        Payload::Dense(v) => {
            push_head(out, DENSE, v.len() as u32, v.len() as u32);
            push_f64s(out, v);
        }
        Payload::Sparse {
            dim,
            indices,
            values,
        } => {
            push_head(out, SPARSE, *dim, indices.len() as u32);
            for i in indices {
                out.extend_from_slice(&i.to_le_bytes());
            }
            push_f64s(out, values);
        }
        Payload::Packed(q) => {
            push_head(out, PACKED, q.len() as u32, u32::from(q.bits()));
            out.extend_from_slice(q.as_bytes());
        }
        Payload::Labelled { label, payload } => {
            push_head(out, LABELLED, payload.dim() as u32, *label);
            push_payload(out, payload);
        }
        Payload::Compressed(c) => {
            push_head(out, COMPRESSED + c.kind(), c.dim() as u32, c.wire_count());
            c.push_content(out);
        }
    }
}

fn read_payload(r: &mut Reader<'_>, dim: usize, labelled_ok: bool) -> Result<Payload> {
    let kind = r.u8()?;
    let d = r.u32()? as usize;
    if d != dim {
        return Err(NetError::Rejected(format!(
            "message of dimension {d}, expected {dim}"
        )));
    }
    let count = r.u32()?;
    let nnz = count as usize;
    let payload = match kind {
        DENSE => {
            if nnz != dim {
                return Err(NetError::Rejected(format!(
                    "dense message with {nnz} values for dimension {dim}"
                )));
            }
            Payload::Dense(r.f64s(nnz)?)
        }
        SPARSE => {
            if nnz > dim {
                return Err(NetError::Rejected(format!(
                    "sparse message with {nnz} entries for dimension {dim}"
                )));
            }
            let indices = (0..nnz).map(|_| r.u32()).collect::<Result<Vec<_>>>()?;
            Payload::Sparse {
                dim: dim as u32,
                indices,
                values: r.f64s(nnz)?,
            }
        }
        PACKED => {
            let bits = u8::try_from(count)
                .map_err(|_| NetError::Rejected(format!("packed width of {count} bits")))?;
            let n = u32::try_from(dim)
                .map_err(|_| NetError::Rejected(format!("packed length {dim}")))?;
            if !(1..=64).contains(&bits) {
                return Err(NetError::Rejected(format!("packed width of {bits} bits")));
            }
            let bytes = r.take(PackedInts::byte_len(bits, n) as usize)?.to_vec();
            Payload::Packed(
                PackedInts::from_bytes(bits, n, bytes)
                    .map_err(|e| NetError::Rejected(e.to_string()))?,
            )
        }
        LABELLED if labelled_ok => Payload::Labelled {
            label: count,
            payload: Box::new(read_payload(r, dim, false)?),
        },
        LABELLED => return Err(NetError::Rejected("nested labelled message".into())),
        k if (COMPRESSED..COMPRESSED + Compressed::KINDS).contains(&k) => {
            let rejected = |e: dpfl::Error| NetError::Rejected(e.to_string());
            let n = Compressed::content_len(k - COMPRESSED, dim, count).map_err(rejected)?;
            let content = r.take(n)?;
            Payload::Compressed(
                Compressed::from_content(k - COMPRESSED, dim, count, content).map_err(rejected)?,
            )
        }
        k => return Err(NetError::Rejected(format!("unknown payload kind {k}"))),
    };
    Ok(payload)
}

/// Decodes a message body, checking its round, its dimension and that every value is finite
/// ([`Payload::validate`], once).
pub fn decode_message(bytes: &[u8], round: Round, dim: usize) -> Result<SiloMessage> {
    let mut r = Reader::new(bytes, "message");
    r.magic(MESSAGE_MAGIC)?;
    let got_round = r.u32()?;
    if got_round != round.get() {
        return Err(NetError::Rejected(format!(
            "message body for round {got_round} sent for round {round}"
        )));
    }
    let payload = read_payload(&mut r, dim, true)?;
    r.end()?;
    payload
        .validate(dim)
        .map_err(|e| NetError::Rejected(e.to_string()))?;
    Ok(SiloMessage { round, payload })
}

/// A whole reply: `DPR1`, round, message count, then each message's payload.
pub fn encode_reply(reply: &Reply) -> Vec<u8> {
    let n: u64 = reply
        .messages
        .iter()
        .map(|m| payload_bytes(&m.payload))
        .sum();
    let mut out = Vec::with_capacity(12 + n as usize);
    out.extend_from_slice(REPLY_MAGIC);
    out.extend_from_slice(&reply.round.get().to_le_bytes());
    out.extend_from_slice(&(reply.messages.len() as u32).to_le_bytes());
    for m in &reply.messages {
        push_payload(&mut out, &m.payload);
    }
    out
}

/// Decodes a reply of at most `max_messages` messages, each validated once.
pub fn decode_reply(bytes: &[u8], round: Round, dim: usize, max_messages: usize) -> Result<Reply> {
    let mut r = Reader::new(bytes, "reply");
    r.magic(REPLY_MAGIC)?;
    let got_round = r.u32()?;
    if got_round != round.get() {
        return Err(NetError::Rejected(format!(
            "reply for round {got_round} sent for round {round}"
        )));
    }
    let n = r.u32()? as usize;
    // Every payload takes at least 10 bytes: a count the bytes cannot hold is refused before
    // anything is reserved for it.
    if n == 0 || n > max_messages || n > bytes.len() / 10 {
        return Err(NetError::Rejected(format!(
            "reply of {n} messages (1..={max_messages} allowed)"
        )));
    }
    let mut messages = Vec::with_capacity(n);
    for _ in 0..n {
        let payload = read_payload(&mut r, dim, true)?;
        messages.push(SiloMessage { round, payload });
    }
    r.end()?;
    let reply = Reply { round, messages };
    reply
        .validate(dim)
        .map_err(|e| NetError::Rejected(e.to_string()))?;
    Ok(reply)
}

fn push_f64s(out: &mut Vec<u8>, v: &[f64]) {
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Reader {
            bytes,
            pos: 0,
            what,
        }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        match end {
            Some(e) => {
                let s = &self.bytes[self.pos..e];
                self.pos = e;
                Ok(s)
            }
            None => Err(NetError::Rejected(format!(
                "{} truncated: needs {n} more bytes at offset {} of {}",
                self.what,
                self.pos,
                self.bytes.len()
            ))),
        }
    }
    fn magic(&mut self, m: &[u8; 4]) -> Result<()> {
        if self.take(4)? != m {
            return Err(NetError::Rejected(format!("{} has a bad magic", self.what)));
        }
        Ok(())
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn f64s(&mut self, n: usize) -> Result<Vec<f64>> {
        let bytes =
            self.take(n.checked_mul(8).ok_or_else(|| {
                NetError::Rejected(format!("{}: length {n} overflows", self.what))
            })?)?;
        Ok(bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect())
    }
    fn end(&self) -> Result<()> {
        if self.pos != self.bytes.len() {
            return Err(NetError::Rejected(format!(
                "{} has {} trailing bytes",
                self.what,
                self.bytes.len() - self.pos
            )));
        }
        Ok(())
    }
}

/// A body as frames: the header carries the first chunk inline (so a body of at most
/// [`CHUNK_BYTES`] is one frame), data frames carry the rest.
pub fn frames(mut header: Header, body: &[u8]) -> Vec<Frame> {
    header.body_len = body.len() as u64;
    let mut chunks = body.chunks(CHUNK_BYTES);
    header.body = chunks.next().map(<[u8]>::to_vec).unwrap_or_default();
    let mut out = Vec::with_capacity(1 + body.len() / CHUNK_BYTES);
    out.push(Frame {
        part: Some(Part::Header(header)),
    });
    out.extend(chunks.map(|c| Frame {
        part: Some(Part::Data(c.to_vec())),
    }));
    out
}

/// Reads the next (header, body) from a stream: `None` when the stream ends cleanly between
/// bodies. The announced length is checked against `limit` before any byte of the body is
/// kept, and the body against its announced length.
pub async fn next_body<S>(stream: &mut S, limit: u64) -> Result<Option<(Header, Vec<u8>)>>
where
    S: tokio_stream::Stream<Item = std::result::Result<Frame, tonic::Status>> + Unpin,
{
    use tokio_stream::StreamExt;
    let mut h = match stream.next().await {
        None => return Ok(None),
        Some(frame) => match frame?.part {
            Some(Part::Header(h)) => h,
            Some(Part::Data(_)) => {
                return Err(NetError::Rejected(
                    "data frame without a header (or longer than announced)".into(),
                ));
            }
            None => return Err(NetError::Rejected("empty frame".into())),
        },
    };
    if h.body_len > limit {
        return Err(NetError::Rejected(format!(
            "body of {} bytes exceeds the limit of {limit} bytes",
            h.body_len
        )));
    }
    let mut body = std::mem::take(&mut h.body);
    if body.len() as u64 > h.body_len {
        return Err(NetError::Rejected(format!(
            "inline body of {} bytes longer than its announced {} bytes",
            body.len(),
            h.body_len
        )));
    }
    // Reserve only what is announced and within the limit.
    body.reserve_exact((h.body_len as usize).saturating_sub(body.len()));
    while (body.len() as u64) < h.body_len {
        let want = h.body_len - body.len() as u64;
        match stream.next().await {
            None => {
                return Err(NetError::Rejected(format!(
                    "stream ended with {want} bytes of a body missing"
                )));
            }
            Some(frame) => match frame?.part {
                Some(Part::Data(d)) if d.len() as u64 <= want => body.extend_from_slice(&d),
                Some(Part::Data(_)) => {
                    return Err(NetError::Rejected(format!(
                        "body longer than its announced {} bytes",
                        h.body_len
                    )));
                }
                Some(Part::Header(_)) => {
                    return Err(NetError::Rejected(format!(
                        "new header with {want} bytes of the previous body missing"
                    )));
                }
                None => return Err(NetError::Rejected("empty frame".into())),
            },
        }
    }
    Ok(Some((h, body)))
}

/// Reads (header, body) pairs until the stream ends; more than `max_bodies`, or bodies of
/// more than `max_total` bytes together, is an error (each body's announced length is checked
/// against what is left of `max_total` before it is read).
pub async fn read_bodies<S>(
    stream: &mut S,
    limit: u64,
    max_bodies: usize,
    max_total: u64,
) -> Result<Vec<(Header, Vec<u8>)>>
where
    S: tokio_stream::Stream<Item = std::result::Result<Frame, tonic::Status>> + Unpin,
{
    let mut out = Vec::new();
    let mut left = max_total;
    while let Some(b) = next_body(stream, limit.min(left)).await? {
        if out.len() >= max_bodies {
            return Err(NetError::Rejected(format!(
                "more than {max_bodies} bodies in one stream"
            )));
        }
        left -= b.1.len() as u64;
        out.push(b);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_broadcasts_round_trip_bit_for_bit() {
        let m = SiloMessage {
            round: Round::new(7),
            payload: Payload::Dense(vec![1.5, -0.0, f64::MIN_POSITIVE, 3e300]),
        };
        let back = decode_message(&encode_message(&m), Round::new(7), 4).expect("decode");
        assert_eq!(back, m);
        let s = SiloMessage {
            round: Round::new(2),
            payload: Payload::Sparse {
                dim: 10,
                indices: vec![1, 9],
                values: vec![0.25, -4.0],
            },
        };
        assert_eq!(
            decode_message(&encode_message(&s), Round::new(2), 10).expect("sparse"),
            s
        );
        let b = Broadcast {
            round: Round::new(3),
            point: vec![0.1, 0.2],
            aux: vec![vec![1.0, 2.0], vec![]],
        };
        assert_eq!(decode_broadcast(&encode_broadcast(&b), 2).expect("b"), b);
    }

    #[test]
    fn bad_bodies_are_rejected_with_a_reason() {
        let m = SiloMessage {
            round: Round::new(1),
            payload: Payload::Dense(vec![1.0, 2.0, 3.0]),
        };
        let bytes = encode_message(&m);
        let e = decode_message(&bytes, Round::new(1), 4)
            .unwrap_err()
            .to_string();
        assert!(e.contains("dimension 3, expected 4"), "{e}");
        let e = decode_message(&bytes, Round::new(2), 3)
            .unwrap_err()
            .to_string();
        assert!(e.contains("round 1 sent for round 2"), "{e}");
        let e = decode_message(&bytes[..bytes.len() - 1], Round::new(1), 3)
            .unwrap_err()
            .to_string();
        assert!(e.contains("truncated"), "{e}");
        let mut long = bytes.clone();
        long.push(0);
        assert!(
            decode_message(&long, Round::new(1), 3)
                .unwrap_err()
                .to_string()
                .contains("trailing")
        );
        let nan = SiloMessage {
            round: Round::new(1),
            payload: Payload::Dense(vec![f64::NAN, 0.0, 0.0]),
        };
        assert!(decode_message(&encode_message(&nan), Round::new(1), 3).is_err());
        // Every prefix of a valid body fails cleanly.
        for k in 0..bytes.len() {
            assert!(decode_message(&bytes[..k], Round::new(1), 3).is_err());
        }
        assert_eq!(bytes.len() as u64, 17 + 24);
        assert!(bytes.len() as u64 <= max_message_bytes(3));
    }

    /// Every payload kind round-trips, and its encoding is exactly 17 bytes of head (magic,
    /// round, kind, dimension, count) plus its content's bits (9 more bytes per label).
    #[test]
    fn every_payload_kind_round_trips_with_exact_bit_counts() {
        let packed = |bits, v: &[u64]| Payload::Packed(PackedInts::pack(bits, v).unwrap());
        let cases: Vec<(Payload, usize, u64)> = vec![
            (Payload::Dense(vec![1.5, -2.0, 0.0]), 3, 17 + 24),
            (
                Payload::Sparse {
                    dim: 5,
                    indices: vec![0, 4],
                    values: vec![1.0, -1.0],
                },
                5,
                17 + 2 * 12,
            ),
            // 7 one-bit integers: 1 byte; 5 three-bit: 15 bits → 2 bytes; 64-bit: 8 bytes each.
            (packed(1, &[1, 0, 1, 1, 0, 0, 1]), 7, 17 + 1),
            (packed(3, &[0, 1, 5, 7, 2]), 5, 17 + 2),
            (packed(64, &[u64::MAX, 0]), 2, 17 + 16),
            (
                Payload::Labelled {
                    label: 41,
                    payload: Box::new(packed(2, &[3, 0, 1])),
                },
                3,
                17 + 9 + 1,
            ),
            // Seeded random-k: seed + 2 values; QSGD s = 2: scale + 5·3 bits; natural: 4·12.
            (
                Payload::Compressed(Compressed::SeededSparse {
                    dim: 9,
                    seed: 77,
                    values: vec![1.0, 2.0],
                }),
                9,
                17 + 24,
            ),
            (
                Payload::Compressed(Compressed::Levels {
                    s: 2,
                    scale: 0.5,
                    codes: PackedInts::pack(3, &[0, 4, 2, 3, 1]).unwrap(),
                }),
                5,
                17 + 8 + 2,
            ),
            (
                Payload::Compressed(Compressed::PowersOfTwo(
                    PackedInts::pack(12, &[0x3ff, 0xc00, 0, 1]).unwrap(),
                )),
                4,
                17 + 6,
            ),
        ];
        for (payload, dim, bytes) in cases {
            let m = SiloMessage {
                round: Round::new(4),
                payload,
            };
            let enc = encode_message(&m);
            assert_eq!(enc.len() as u64, bytes, "{m:?}");
            assert_eq!(8 + payload_bytes(&m.payload), bytes, "{m:?}");
            assert!(bytes <= max_message_bytes(dim));
            assert_eq!(decode_message(&enc, Round::new(4), dim).expect("decode"), m);
            for k in 0..enc.len() {
                assert!(
                    decode_message(&enc[..k], Round::new(4), dim).is_err(),
                    "prefix {k}"
                );
            }
        }
        // Packed bits are counted exactly: 3 × 5 = 15.
        assert_eq!(packed(3, &[0, 1, 5, 7, 2]).bits(), 15);
    }

    #[test]
    fn replies_hold_several_messages_and_bad_ones_are_refused() {
        let msg = |label, v| SiloMessage {
            round: Round::new(9),
            payload: Payload::Labelled {
                label,
                payload: Box::new(Payload::Packed(PackedInts::pack(4, &[v]).unwrap())),
            },
        };
        let reply = Reply {
            round: Round::new(9),
            messages: vec![msg(0, 3), msg(1, 15), msg(2, 0)],
        };
        let enc = encode_reply(&reply);
        // 12 bytes of reply head, then per message 9 (label head) + 9 (packed head) + 1.
        assert_eq!(enc.len(), 12 + 3 * 19);
        assert_eq!(decode_reply(&enc, Round::new(9), 1, 3).unwrap(), reply);
        assert!(
            decode_reply(&enc, Round::new(9), 1, 2).is_err(),
            "too many messages"
        );
        assert!(
            decode_reply(&enc, Round::new(8), 1, 3).is_err(),
            "wrong round"
        );
        // Padding bits set in a packed integer: refused.
        let mut bad = encode_message(&SiloMessage {
            round: Round::new(1),
            payload: Payload::Packed(PackedInts::pack(3, &[1]).unwrap()),
        });
        *bad.last_mut().unwrap() |= 0x80;
        let e = decode_message(&bad, Round::new(1), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("padding"), "{e}");
        // A labelled message inside a labelled message: refused.
        let nested = SiloMessage {
            round: Round::new(1),
            payload: Payload::Labelled {
                label: 0,
                payload: Box::new(msg(1, 1).payload),
            },
        };
        assert!(decode_message(&encode_message(&nested), Round::new(1), 1).is_err());
        // Widths outside 1..=64 are refused on decode.
        let mut wide = encode_message(&SiloMessage {
            round: Round::new(1),
            payload: Payload::Packed(PackedInts::pack(8, &[1]).unwrap()),
        });
        wide[13] = 65;
        assert!(decode_message(&wide, Round::new(1), 1).is_err());
    }
}
