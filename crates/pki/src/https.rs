//! TLS for the `https://` URIs path discovery follows ([`crate::discover`]): `rustls` with the
//! aws-lc-rs provider (as the rest of pivgate), TLS 1.2 and 1.3, plugged into `ureq` as its
//! [`ureq::TlsConnector`], so `ureq` is built without its own TLS (which would bring a second
//! crypto library, *ring*).
//!
//! The server certificate is checked by `rustls-webpki` against one set of roots:
//!
//! - `[trust.discovery] https_roots = "file.pem"`: the PEM certificates of that file only
//!   (e.g. the Federal Common Policy CA or the roots an agency's repository is served under);
//! - absent: the operating system's roots, read by `rustls-native-certs` from the
//!   system store (on Debian `/etc/ssl/certs`, kept by the `ca-certificates` package; the
//!   `SSL_CERT_FILE` / `SSL_CERT_DIR` variables override it). These are chosen over the
//!   Mozilla list compiled into `webpki-roots` because a door controller lives for years:
//!   the system store follows the distribution's security updates and the roots an
//!   administrator adds with `update-ca-certificates`, without a new pivgate build, and
//!   reading it needs no network.
//!
//! A server whose certificate does not chain to those roots, is outside its validity or does
//! not name the host of the URI (DNS name or IP address) is refused during the handshake,
//! with the `rustls` reason in the error.

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

/// Why the roots for `https://` could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpsRootsError {
    #[error("https_roots {path}: {reason}")]
    File { path: String, reason: String },
    #[error("https_roots {path} holds no PEM CERTIFICATE block")]
    Empty { path: String },
}

/// The roots a server certificate must chain to: those of `file`, or the system's.
pub fn roots(file: Option<&Path>) -> Result<RootCertStore, HttpsRootsError> {
    let mut store = RootCertStore::empty();
    match file {
        Some(path) => {
            let shown = path.display().to_string();
            let err = |reason: String| HttpsRootsError::File {
                path: shown.clone(),
                reason,
            };
            let bytes =
                crate::input::read_bounded(path, crate::input::InputKind::CertificateBundle)
                    .map_err(|e| err(e.to_string()))?;
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
                .collect::<Result<_, _>>()
                .map_err(|e| err(e.to_string()))?;
            if certs.is_empty() {
                return Err(HttpsRootsError::Empty { path: shown });
            }
            for c in certs {
                store
                    .add(c)
                    .map_err(|e| err(format!("a certificate is not usable as a root: {e}")))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for e in &found.errors {
                tracing::warn!(error = %e, "reading the system's TLS roots");
            }
            let (added, ignored) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                tracing::warn!(
                    ignored,
                    "no system TLS roots: https:// discovery will refuse every server \
                     (set [trust.discovery] https_roots)"
                );
            }
        }
    }
    Ok(store)
}

/// The client configuration: aws-lc-rs, TLS 1.2 and 1.3, `roots`, no client certificate.
pub fn client_config(roots: RootCertStore) -> Arc<ClientConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS12, &rustls::version::TLS13])
        .expect("the aws-lc-rs provider supports TLS 1.2 and 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// A [`ureq::TlsConnector`] that checks servers against the roots of
/// `roots_file` (PEM), or the system's: for clients of pivgate's own
/// `https://` API as for discovery.
pub fn connector(roots_file: Option<std::path::PathBuf>) -> Arc<Connector> {
    Arc::new(Connector::new(roots_file))
}

/// [`ureq::TlsConnector`] over `rustls`. The roots are read at the first `https://`
/// request (a service that never meets one never reads the system store, and starts
/// without that cost); when they cannot be read, every `https://` request fails with why.
pub struct Connector {
    roots_file: Option<std::path::PathBuf>,
    config: std::sync::OnceLock<Result<Arc<ClientConfig>, HttpsRootsError>>,
}

impl Connector {
    pub(crate) fn new(roots_file: Option<std::path::PathBuf>) -> Connector {
        Connector {
            roots_file,
            config: std::sync::OnceLock::new(),
        }
    }

    fn config(&self) -> &Result<Arc<ClientConfig>, HttpsRootsError> {
        self.config.get_or_init(|| {
            let r = roots(self.roots_file.as_deref()).map(client_config);
            if let Err(e) = &r {
                tracing::error!(error = %e, "https:// discovery refuses every server");
            }
            r
        })
    }
}

impl ureq::TlsConnector for Connector {
    fn connect(
        &self,
        dns_name: &str,
        mut io: Box<dyn ureq::ReadWrite>,
    ) -> Result<Box<dyn ureq::ReadWrite>, ureq::Error> {
        let fail = |reason: String| ureq::Error::from(io::Error::other(reason));
        let config = self
            .config()
            .as_ref()
            .map_err(|e| fail(format!("no TLS roots ({e})")))?;
        let host = dns_name
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(dns_name);
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| fail(format!("{host:?} is not a TLS server name: {e}")))?;
        let mut conn = ClientConnection::new(config.clone(), name)
            .map_err(|e| fail(format!("TLS with {host}: {e}")))?;
        conn.complete_io(&mut io)
            .map_err(|e| fail(format!("TLS handshake with {host} failed: {e}")))?;
        Ok(Box::new(Stream(StreamOwned::new(conn, io))))
    }
}

struct Stream(StreamOwned<ClientConnection, Box<dyn ureq::ReadWrite>>);

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("https::Stream")
    }
}

impl io::Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl io::Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl ureq::ReadWrite for Stream {
    fn socket(&self) -> Option<&std::net::TcpStream> {
        self.0.get_ref().socket()
    }
}
