//! A syslog sink: one long-lived TCP or TLS connection to the receiver,
//! messages framed by octet counting (RFC 6587; RFC 5425 over TLS), a
//! batch written and flushed at once.
//!
//! Before each batch the connection is checked for a close by the
//! receiver (a stopped receiver's end-of-stream has arrived by then), so
//! that a batch is not written into a connection nobody reads and counted
//! as accepted; it is sent on a new connection instead.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use rustls_pki_types::ServerName;
use store::Event;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use super::format::{self, Origin};
use super::SendError;
use crate::config::{split_host_port, SyslogExport, SyslogFormat};

/// Connecting and the TLS handshake must finish within this.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Writing one batch must finish within this (a receiver that stops
/// reading is given up on and reconnected).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) trait Connection: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Connection for T {}

/// The TLS configuration and the name the receiver's certificate must
/// carry.
pub(super) struct TlsTarget {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

/// A client configuration trusting `s.ca_file` alone (TLS 1.2 or 1.3,
/// aws-lc-rs), and the server name to check.
pub(super) fn tls_target(s: &SyslogExport) -> Result<TlsTarget, remote::tls::TlsError> {
    let ca = s.ca_file.as_deref().unwrap_or(std::path::Path::new(""));
    let host = match &s.server_name {
        Some(n) => n.as_str(),
        None => split_host_port(&s.address).map_or("", |(h, _)| h),
    };
    Ok(TlsTarget {
        config: client_config(ca)?,
        name: remote::tls::server_name(host)?,
    })
}

/// A client configuration trusting the certificates in `ca` alone.
pub(super) fn client_config(
    ca: &std::path::Path,
) -> Result<Arc<ClientConfig>, remote::tls::TlsError> {
    use remote::tls::TlsError;
    let mut roots = RootCertStore::empty();
    for c in remote::tls::load_certs(ca)? {
        roots
            .add(c)
            .map_err(|e| TlsError::BadCa(format!("{}: {e}", ca.display())))?;
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Verifier(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

pub(super) struct SyslogSink {
    address: String,
    tls: Option<TlsTarget>,
    format: SyslogFormat,
    origin: Origin,
    connection: Option<Box<dyn Connection>>,
}

impl SyslogSink {
    pub(super) fn new(
        address: String,
        tls: Option<TlsTarget>,
        format: SyslogFormat,
        origin: Origin,
    ) -> SyslogSink {
        SyslogSink {
            address,
            tls,
            format,
            origin,
            connection: None,
        }
    }

    async fn connect(&self) -> Result<Box<dyn Connection>, SendError> {
        let timeout = |what: &str| SendError::Timeout(format!("{} ({what})", self.address), 10_000);
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&self.address))
            .await
            .map_err(|_| timeout("connect"))?
            .map_err(|e| SendError::Connect(self.address.clone(), e))?;
        let _ = tcp.set_nodelay(true);
        match &self.tls {
            None => Ok(Box::new(tcp)),
            Some(t) => {
                let tls = tokio::time::timeout(
                    CONNECT_TIMEOUT,
                    TlsConnector::from(t.config.clone()).connect(t.name.clone(), tcp),
                )
                .await
                .map_err(|_| timeout("TLS handshake"))?
                .map_err(|e| SendError::Tls(self.address.clone(), e))?;
                Ok(Box::new(tls))
            }
        }
    }

    fn message(&self, e: &Event) -> String {
        match self.format {
            SyslogFormat::Rfc5424 => format::rfc5424(e, &self.origin),
            SyslogFormat::Cef => format::cef_message(e, &self.origin),
        }
    }

    /// Writes and flushes `events`, connecting first when needed.
    pub(super) async fn send(&mut self, events: &[Event]) -> Result<(), SendError> {
        let mut bytes = Vec::with_capacity(events.len() * 256);
        for e in events {
            format::frame(&self.message(e), &mut bytes);
        }
        if let Some(c) = &mut self.connection {
            if closed_by_peer(c.as_mut()) {
                tracing::info!(address = %self.address, "syslog receiver closed the connection; reconnecting");
                self.connection = None;
            }
        }
        let mut c = match self.connection.take() {
            Some(c) => c,
            None => self.connect().await?,
        };
        let written = tokio::time::timeout(WRITE_TIMEOUT, async {
            c.write_all(&bytes).await?;
            c.flush().await
        })
        .await;
        match written {
            Ok(Ok(())) => {
                self.connection = Some(c);
                Ok(())
            }
            Ok(Err(e)) => Err(SendError::Write(self.address.clone(), e)),
            Err(_) => Err(SendError::Timeout(
                self.address.clone(),
                WRITE_TIMEOUT.as_millis() as u64,
            )),
        }
    }
}

/// Whether the receiver has closed `c` (or it failed): reads that do not
/// wait. A receiver sends nothing, so anything read is dropped (a bounded
/// amount, so that a chatty receiver cannot hold the sink); over TLS the
/// reads go through the TLS layer (session tickets, a close_notify).
fn closed_by_peer(c: &mut dyn Connection) -> bool {
    let mut buf = [0u8; 512];
    for _ in 0..16 {
        match c.read(&mut buf).now_or_never() {
            None => return false,
            Some(Ok(0)) | Some(Err(_)) => return true,
            Some(Ok(_)) => continue,
        }
    }
    false
}
