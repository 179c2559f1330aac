//! Bounded, visible retries for the processes that connect out (silos, the shuffler).
//!
//! A silo whose server is absent, whose server presents a certificate from another CA or for
//! another name, or whose own certificate the server refuses, used to retry forever and print
//! nothing. Every failed attempt is now logged at info level with its reason, attempts back
//! off exponentially (0.1 s doubling to 5 s), and after the connect timeout without a
//! connection the process stops with an error that names the address and the last reason.

use std::time::{Duration, Instant};

use crate::error::{NetError, Result};

/// Default of `--connect-timeout`: long enough for a server started a minute after its silos
/// or restarted after a crash, short enough that a wrong address does not hang a terminal.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(120);

const FIRST: Duration = Duration::from_millis(100);
const MAX: Duration = Duration::from_secs(5);

/// One process's attempts to reach one peer.
#[derive(Debug)]
pub struct Retry {
    who: String,
    peer: &'static str,
    timeout: Duration,
    since: Instant,
    backoff: Duration,
    attempts: u32,
}

impl Retry {
    /// `who` tries to reach `peer` ("the server", "the shuffler").
    pub fn new(who: impl Into<String>, peer: &'static str, timeout: Duration) -> Self {
        Retry {
            who: who.into(),
            peer,
            timeout,
            since: Instant::now(),
            backoff: FIRST,
            attempts: 0,
        }
    }

    /// A connection succeeded: the timeout counts again from now.
    pub fn connected(&mut self) {
        if self.attempts > 0 {
            tracing::info!(
                "{}: connected to {} after {} failed attempts",
                self.who,
                self.peer,
                self.attempts
            );
        }
        self.since = Instant::now();
        self.backoff = FIRST;
        self.attempts = 0;
    }

    /// An attempt on `addr` failed with `reason`: logs it, and sleeps the back-off, or returns
    /// the timeout error once no attempt has succeeded for the connect timeout.
    pub async fn failed(&mut self, addr: &str, reason: &str) -> Result<()> {
        self.attempts += 1;
        let waited = self.since.elapsed();
        if waited >= self.timeout {
            return Err(NetError::Timeout(format!(
                "{}: could not reach {} at {addr} within the connect timeout of {} s \
                 ({} attempts); last failure: {reason}",
                self.who,
                self.peer,
                self.timeout.as_secs_f64(),
                self.attempts
            )));
        }
        tracing::info!(
            "{}: cannot reach {} at {addr} ({reason}); retrying in {:.1} s",
            self.who,
            self.peer,
            self.backoff.as_secs_f64()
        );
        tokio::time::sleep(self.backoff.min(self.timeout.saturating_sub(waited))).await;
        self.backoff = (self.backoff * 2).min(MAX);
        Ok(())
    }
}

/// An error and its sources, as one line.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}

/// Why a connection or a first call failed, in the operator's terms, followed by the raw
/// error chain.
pub fn reason(e: &(dyn std::error::Error + 'static), server_name: &str) -> String {
    let raw = chain(e);
    let lower = raw.to_lowercase();
    let what = if lower.contains("notvalidforname") || lower.contains("not valid for name") {
        format!(
            "name mismatch: the peer's certificate is not valid for server_name = \
             {server_name:?}"
        )
    } else if lower.contains("unknownissuer")
        || lower.contains("unknown issuer")
        || lower.contains("badsignature")
    {
        "TLS rejected: the peer's certificate is not signed by this federation's CA (ca.pem)"
            .to_string()
    } else if lower.contains("unknownca")
        || lower.contains("unknown ca")
        || lower.contains("certificate required")
        || lower.contains("badcertificate")
        || lower.contains("bad certificate")
    {
        "TLS rejected by the peer: it does not accept this process's certificate (another CA?)"
            .to_string()
    } else if lower.contains("connection refused") {
        "connection refused: nothing listens there (not started yet, or a wrong address)"
            .to_string()
    } else if lower.contains("timed out") || lower.contains("deadline") {
        "timed out".to_string()
    } else if lower.contains("dns") || lower.contains("resolve") || lower.contains("lookup") {
        "the host name does not resolve".to_string()
    } else {
        return raw;
    };
    format!("{what} [{raw}]")
}
