//! TLS 1.3 with mutual authentication (rustls).
//!
//! Servers (the federation server and the shuffler) accept only TLS 1.3 and only clients
//! whose certificate chains to the federation CA; a client without a certificate, or with one
//! from another CA, fails the handshake and never reaches a gRPC handler. The accept loop
//! counts the bytes that cross each socket (TLS records included) for the wire-size benchmark.

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::server::{Connected, TcpConnectInfo};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

use crate::error::{NetError, Result};

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(NetError::io(path))
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let pem = read(path)?;
    let certs = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| NetError::file(path, e))?;
    if certs.is_empty() {
        return Err(NetError::file(path, "holds no PEM certificate"));
    }
    Ok(certs)
}

fn key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    let pem = crate::keys::read_private(path)?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| NetError::file(path, e))?
        .ok_or_else(|| NetError::file(path, "holds no PEM private key"))
}

/// Certificate and key paths of participant `name` in `dir`.
pub fn identity_paths(dir: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    )
}

/// A TLS 1.3-only server configuration that requires a client certificate from the CA
/// `dir/ca.pem`, presenting `dir/<name>.pem`.
pub fn server_config(dir: &Path, name: &str) -> Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(&dir.join("ca.pem"))? {
        roots
            .add(c)
            .map_err(|e| NetError::file(dir.join("ca.pem"), e))?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| NetError::Tls(e.to_string()))?;
    let (cert, key_path) = identity_paths(dir, name);
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| NetError::Tls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs(&cert)?, key(&key_path)?)
        .map_err(|e| NetError::file(&cert, e))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// A gRPC endpoint at `addr` (host:port) over mutual TLS as participant `name`, verifying
/// the server's certificate for `server_name`.
pub fn client_endpoint(addr: &str, dir: &Path, name: &str, server_name: &str) -> Result<Endpoint> {
    let (cert, key_path) = identity_paths(dir, name);
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read(&dir.join("ca.pem"))?))
        .identity(Identity::from_pem(
            read(&cert)?,
            crate::keys::read_private(&key_path)?,
        ))
        .domain_name(server_name);
    client_endpoint_with(addr, tls)
}

/// An endpoint with a caller-made TLS configuration (tests use it for foreign certificates).
pub fn client_endpoint_with(addr: &str, tls: ClientTlsConfig) -> Result<Endpoint> {
    Endpoint::from_shared(format!("https://{addr}"))
        .map_err(|e| NetError::config("address", format!("{addr:?}: {e}")))?
        .tls_config(tls)
        .map_err(|e| NetError::Tls(e.to_string()))
        .map(|e| {
            e.connect_timeout(Duration::from_secs(5))
                .tcp_nodelay(true)
                .initial_stream_window_size(Some(4 << 20))
                .initial_connection_window_size(Some(8 << 20))
        })
}

/// Bytes received and sent on a server's sockets.
#[derive(Debug, Clone, Default)]
pub struct WireCounter {
    /// Bytes received.
    pub received: Arc<AtomicU64>,
    /// Bytes sent.
    pub sent: Arc<AtomicU64>,
}

impl WireCounter {
    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }
    /// Bytes sent so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

/// A TCP stream that counts the bytes it reads and writes.
pub struct Counted {
    inner: TcpStream,
    counter: WireCounter,
}

impl Connected for Counted {
    type ConnectInfo = TcpConnectInfo;
    fn connect_info(&self) -> TcpConnectInfo {
        self.inner.connect_info()
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len().saturating_sub(before);
        self.counter.received.fetch_add(n as u64, Ordering::Relaxed);
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.counter.sent.fetch_add(n as u64, Ordering::Relaxed);
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A server-side TLS stream over a byte-counting socket.
pub type TlsConn = tokio_rustls::server::TlsStream<Counted>;

/// Accepts TCP connections on `listener` and completes TLS handshakes concurrently; a failed
/// handshake (no certificate, foreign CA, old TLS version) is logged and dropped.
pub fn incoming(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    wire_bytes: WireCounter,
) -> tokio_stream::wrappers::ReceiverStream<std::io::Result<TlsConn>> {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let tx = tx.clone();
            let counter = wire_bytes.clone();
            tokio::spawn(async move {
                let counted = Counted {
                    inner: tcp,
                    counter,
                };
                match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(counted)).await
                {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Ok(Err(e)) => tracing::warn!(%peer, "TLS handshake refused: {e}"),
                    Err(_) => tracing::warn!(%peer, "TLS handshake timed out"),
                }
            });
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// The common name of the verified client certificate of a request.
pub fn peer_name<T>(req: &tonic::Request<T>) -> Result<String> {
    let certs = req
        .peer_certs()
        .ok_or_else(|| NetError::Denied("no client certificate".into()))?;
    let first = certs
        .first()
        .ok_or_else(|| NetError::Denied("empty client certificate chain".into()))?;
    crate::certs::common_name(first.as_ref())
}
