//! TLS for the API (`rustls`, aws-lc-rs provider): a listener that hands
//! axum only connections whose handshake finished.
//!
//! Handshakes run in their own tasks, each bounded in time, so a client that
//! stalls its handshake delays nobody else's connection; at most as many
//! run at once as the API serves connections
//! ([`crate::limits::Limits::descriptors`]): past that, new connections
//! are closed at once.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a client may take to finish its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the TLS certificate or key cannot be used; names the key.
#[derive(Debug, thiserror::Error)]
#[error("`{key}`: {path}: {problem}", path = path.display())]
pub struct TlsError {
    pub key: &'static str,
    pub path: std::path::PathBuf,
    pub problem: String,
}

/// Reads the PEM certificate chain and private key into a server
/// configuration (TLS 1.2 and 1.3, HTTP/1.1).
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let err = |k: &'static str, p: &Path, problem: String| TlsError {
        key: k,
        path: p.to_owned(),
        problem,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| err("http.tls_cert", cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| err("http.tls_cert", cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(err(
            "http.tls_cert",
            cert,
            "no PEM CERTIFICATE block".into(),
        ));
    }
    // Like the OSDP and remote-reader keys: the service's user owns it and
    // nobody else may read it.
    files::check_secret_file(key).map_err(|e| err("http.tls_key", key, e.to_string()))?;
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        err(
            "http.tls_key",
            key,
            format!("{e} (expected a PEM PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY)"),
        )
    })?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err("http.tls_cert", cert, e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            err(
                "http.tls_key",
                key,
                format!("does not go with the certificate chain: {e}"),
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A listener that yields connections after their TLS handshake.
pub struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl TlsListener {
    /// At most `max_handshakes` handshakes run at once.
    pub fn new(
        tcp: TcpListener,
        config: Arc<ServerConfig>,
        max_handshakes: usize,
    ) -> std::io::Result<Self> {
        let addr = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, rx) = mpsc::channel(64);
        let handshakes = Arc::new(tokio::sync::Semaphore::new(max_handshakes.max(1)));
        let task = tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of descriptors and the like: let others finish.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(place) = handshakes.clone().try_acquire_owned() else {
                    tracing::debug!(%peer, "connection closed at once: too many TLS handshakes in progress");
                    continue;
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let _place = place;
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { rx, addr, task })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept task ended (only when aborted): nothing more comes.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}
