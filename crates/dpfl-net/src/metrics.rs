//! The operators' Prometheus endpoint (`--metrics-addr`, off by default): `GET /metrics` on
//! the server, a silo or the shuffler, in the OpenMetrics text format (`prometheus-client`),
//! served over plain HTTP/1.1 by the hyper that tonic already brings in.
//!
//! One process, one role, one registry ([`enable`]); the hooks in the round loops are no-ops
//! while it is off. What each role exposes:
//! * server: `dpfl_server_rounds_total`, `dpfl_server_round_selected`,
//!   `dpfl_server_round_participants` (M_r of the last round), `dpfl_server_rejected_total`
//!   (messages refused), `dpfl_server_wire_{received,sent}_bytes_total`;
//! * silo i: `dpfl_silo_rounds_total`, `dpfl_silo_refusals_total` (rounds its ledger refused),
//!   `dpfl_silo_sent_bytes_total`, `dpfl_silo_epsilon_spent{silo="i"}` (its ledger's spent ε, when it enforces a budget);
//! * shuffler: `dpfl_shuffler_batches_total`, `dpfl_shuffler_batch_messages`,
//!   `dpfl_shuffler_forwarded_bytes_total`.
//!
//! Privacy: a silo's spent ε is exposed on that silo's own endpoint only. The server and the
//! shuffler never learn a silo's ledger, and expose none; no endpoint shows message contents.
//! The endpoint has no TLS or authentication: bind it to a loopback or management address.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::error::{NetError, Result};

/// Which process this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The server process.
    Server,
    /// Silo number i (its own ε is shown only here).
    Silo(usize),
    /// The shuffler process.
    Shuffler,
}

struct Metrics {
    role: Role,
    registry: Registry,
    rounds: Counter,
    selected: Gauge,
    participants: Gauge,
    refusals: Counter,
    received: Counter,
    sent: Counter,
    epsilon: Family<Vec<(String, String)>, Gauge<f64, AtomicU64>>,
    /// The wire counters' values at the last update (the server's are cumulative).
    last_wire: [AtomicU64; 2],
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

/// Which of [`Metrics`]' instruments a registered metric reports (the roles share them).
#[derive(Clone, Copy)]
enum Instrument {
    Rounds,
    Selected,
    Participants,
    Refusals,
    Received,
    Sent,
    Epsilon,
}

/// What each role registers: (name, help, instrument).
type Table = &'static [(&'static str, &'static str, Instrument)];

const SERVER: Table = &[
    ("dpfl_server_rounds", "Rounds closed", Instrument::Rounds),
    (
        "dpfl_server_round_selected",
        "Silos selected in the last round",
        Instrument::Selected,
    ),
    (
        "dpfl_server_round_participants",
        "Messages aggregated in the last round (M_r)",
        Instrument::Participants,
    ),
    (
        "dpfl_server_rejected",
        "Messages refused (malformed, late or duplicate)",
        Instrument::Refusals,
    ),
    (
        "dpfl_server_wire_received_bytes",
        "Bytes received on the server's sockets (TLS records included)",
        Instrument::Received,
    ),
    (
        "dpfl_server_wire_sent_bytes",
        "Bytes sent on the server's sockets (TLS records included)",
        Instrument::Sent,
    ),
];

// Only the silo's own label of `dpfl_silo_epsilon_spent` ever exists; it appears at the first
// charge against a budget (a silo that enforces none has no spent ε to show).
const SILO: Table = &[
    (
        "dpfl_silo_rounds",
        "Rounds this silo answered",
        Instrument::Rounds,
    ),
    (
        "dpfl_silo_refusals",
        "Rounds this silo's ledger refused (budget or release cap)",
        Instrument::Refusals,
    ),
    (
        "dpfl_silo_sent_bytes",
        "Bytes of this silo's answers (message bodies)",
        Instrument::Sent,
    ),
    (
        "dpfl_silo_epsilon_spent",
        "Epsilon this silo's ledger has spent (its accountant, at its delta)",
        Instrument::Epsilon,
    ),
];

const SHUFFLER: Table = &[
    (
        "dpfl_shuffler_batches",
        "Batches shuffled and forwarded",
        Instrument::Rounds,
    ),
    (
        "dpfl_shuffler_batch_messages",
        "Messages in the last forwarded batch",
        Instrument::Participants,
    ),
    (
        "dpfl_shuffler_forwarded_bytes",
        "Bytes of sealed messages forwarded",
        Instrument::Sent,
    ),
];

/// Turns the metrics of `role` on for this process (first call wins).
pub fn enable(role: Role) {
    METRICS.get_or_init(|| {
        let mut m = Metrics {
            role,
            registry: Registry::default(),
            rounds: Counter::default(),
            selected: Gauge::default(),
            participants: Gauge::default(),
            refusals: Counter::default(),
            received: Counter::default(),
            sent: Counter::default(),
            epsilon: Family::default(),
            last_wire: [AtomicU64::new(0), AtomicU64::new(0)],
        };
        let table = match role {
            Role::Server => SERVER,
            Role::Silo(_) => SILO,
            Role::Shuffler => SHUFFLER,
        };
        let mut registry = Registry::default();
        for &(name, help, instrument) in table {
            match instrument {
                Instrument::Rounds => registry.register(name, help, m.rounds.clone()),
                Instrument::Selected => registry.register(name, help, m.selected.clone()),
                Instrument::Participants => registry.register(name, help, m.participants.clone()),
                Instrument::Refusals => registry.register(name, help, m.refusals.clone()),
                Instrument::Received => registry.register(name, help, m.received.clone()),
                Instrument::Sent => registry.register(name, help, m.sent.clone()),
                Instrument::Epsilon => registry.register(name, help, m.epsilon.clone()),
            }
        }
        m.registry = registry;
        m
    });
}

fn get() -> Option<&'static Metrics> {
    METRICS.get()
}

/// Server: a round closed; `wire` is the server's cumulative socket counter.
pub fn server_round(selected: usize, participants: usize, rejected: usize, wire: (u64, u64)) {
    if let Some(m) = get().filter(|m| m.role == Role::Server) {
        m.rounds.inc();
        m.selected.set(selected as i64);
        m.participants.set(participants as i64);
        m.refusals.inc_by(rejected as u64);
        let delta =
            |k: usize, now: u64| now.saturating_sub(m.last_wire[k].swap(now, Ordering::Relaxed));
        m.received.inc_by(delta(0, wire.0));
        m.sent.inc_by(delta(1, wire.1));
    }
}

/// Silo: a round answered with `bytes` of bodies, after which its ledger has spent
/// `epsilon` (None: the accountant could not say; the gauge keeps its last value).
pub fn silo_answered(silo: usize, bytes: usize, epsilon: Option<f64>) {
    if let Some(m) = get().filter(|m| m.role == Role::Silo(silo)) {
        m.rounds.inc();
        m.sent.inc_by(bytes as u64);
        if let Some(e) = epsilon {
            m.epsilon
                .get_or_create(&vec![("silo".to_string(), silo.to_string())])
                .set(e);
        }
    }
}

/// Silo: its ledger refused a round.
pub fn silo_refused(silo: usize) {
    if let Some(m) = get().filter(|m| m.role == Role::Silo(silo)) {
        m.refusals.inc();
    }
}

/// Shuffler: a batch of `messages` totalling `bytes` forwarded.
pub fn shuffler_batch(messages: usize, bytes: usize) {
    if let Some(m) = get().filter(|m| m.role == Role::Shuffler) {
        m.rounds.inc();
        m.participants.set(messages as i64);
        m.sent.inc_by(bytes as u64);
    }
}

/// The current metrics in the text format ("" while off).
pub fn render() -> String {
    let mut s = String::new();
    if let Some(m) = get() {
        // Encoding into a String cannot fail.
        let _ = encode(&mut s, &m.registry);
    }
    s
}

async fn handle(req: Request<Incoming>) -> std::result::Result<Response<Full<Bytes>>, Infallible> {
    let mut resp = if req.uri().path() == "/metrics" {
        let mut r = Response::new(Full::new(Bytes::from(render())));
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static(
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            ),
        );
        r
    } else {
        Response::new(Full::new(Bytes::from_static(b"not found; try /metrics\n")))
    };
    if req.uri().path() != "/metrics" {
        *resp.status_mut() = StatusCode::NOT_FOUND;
    }
    Ok(resp)
}

/// Listens on `addr` and serves `/metrics` in the background; returns the bound address.
pub async fn serve(addr: &str) -> Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| NetError::config("--metrics-addr", format!("{addr}: {e}")))?;
    let local = listener
        .local_addr()
        .map_err(|e| NetError::Transport(e.to_string()))?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, hyper::service::service_fn(handle))
                    .await;
            });
        }
    });
    tracing::info!(%local, "metrics on http://{local}/metrics");
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_silo_exposes_only_its_own_epsilon() {
        enable(Role::Silo(2));
        silo_answered(2, 100, Some(0.25));
        // Another silo's hooks (not this process's role) change nothing.
        silo_answered(1, 50, Some(9.0));
        silo_refused(1);
        server_round(3, 3, 1, (10, 10));
        silo_refused(2);
        let text = render();
        assert!(
            text.contains("dpfl_silo_epsilon_spent{silo=\"2\"} 0.25"),
            "{text}"
        );
        assert!(!text.contains("silo=\"1\""), "{text}");
        assert!(text.contains("dpfl_silo_rounds_total 1"), "{text}");
        assert!(text.contains("dpfl_silo_refusals_total 1"), "{text}");
        assert!(text.contains("dpfl_silo_sent_bytes_total 100"), "{text}");
        assert!(!text.contains("dpfl_server"), "{text}");
    }
}
