//! The mutual-TLS link between a site and a central: TLS 1.3, both ends
//! with certificates, HTTP/1.1 inside.
//!
//! **Central.** [`serve`] accepts sites' connections on `sites.listen`,
//! verifies each site certificate with pivgate's own validator (chain to
//! `sites.site_ca`, clientAuth; revoked by `sites.crls`), and hands every
//! request to the router with a [`Peer`] extension: the site name the
//! certificate carries as the URI `urn:pivgate:site:NAME`.
//!
//! **Site.** A [`Connector`] holds the site's certificate and the CA of the
//! central, and connects to one of `central.urls`; a [`Link`] is the link
//! to one central: [`Link::send`] sends a request and reads the whole
//! answer (connections are kept alive and reused), [`Link::stream`] opens
//! a connection of its own for a long answer read as it comes (the feed).
//! HTTP/1.1 carries one request at a time on a connection, so the feed
//! holds its own and other requests go over a second one to the same
//! central, with the same certificate.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1 as client;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use pki::validate::{RevocationMode, RevocationPolicy};
use rustls_pki_types::CertificateDer;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt;

use super::settings::{CentralConfig, Endpoint, SitesConfig};
use super::SyncError;

/// How a site certificate names its site.
pub const SITE_URI_PREFIX: &str = "urn:pivgate:site:";

/// Who sent a request over a site link, as the central verified it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The site name in the certificate (`urn:pivgate:site:NAME`), if any.
    pub site: Option<String>,
    /// The certificate's subject common name, for messages.
    pub subject: Option<String>,
    pub addr: SocketAddr,
}

/// The site a certificate (DER) names with a subjectAltName URI
/// `urn:pivgate:site:NAME`; `None` when it names none (or several).
pub fn site_of_certificate(der: &[u8]) -> Option<String> {
    let cert = pki::cert::Cert::from_der(der.to_vec()).ok()?;
    let mut names = cert
        .ext
        .subject_alt_names
        .iter()
        .flatten()
        .filter_map(|n| match n {
            pki::cert::GeneralName::Uri(u) => u.strip_prefix(SITE_URI_PREFIX),
            _ => None,
        });
    let name = names.next()?;
    (names.next().is_none() && !name.is_empty()).then(|| name.to_string())
}

fn invalid(key: &'static str, problem: impl std::fmt::Display) -> SyncError {
    SyncError::Invalid {
        key,
        problem: problem.to_string(),
    }
}

fn key_file(key: &'static str, path: &std::path::Path) -> Result<(), SyncError> {
    files::check_secret_file(path)
        .map_err(|e| invalid(key, format!("{}: {}", path.display(), e.problem)))
}

/// The central's TLS configuration for `[sites]`.
pub fn server_tls(cfg: &SitesConfig) -> Result<Arc<tokio_rustls::rustls::ServerConfig>, SyncError> {
    key_file("sites.key", &cfg.key)?;
    let chain = remote::tls::load_certs(&cfg.cert).map_err(|e| invalid("sites.cert", e))?;
    let key = remote::tls::load_key(&cfg.key).map_err(|e| invalid("sites.key", e))?;
    let mut store = pki::store::TrustStore::builder();
    for p in &cfg.site_ca {
        let n = store
            .add_anchors_from_path(p)
            .map_err(|e| invalid("sites.site_ca", format!("{}: {e}", p.display())))?;
        if n == 0 {
            return Err(invalid(
                "sites.site_ca",
                format!("{} holds no certificate", p.display()),
            ));
        }
    }
    let mut crls = pki::revocation_set::RevocationSet::builder();
    for p in &cfg.crls {
        crls.add_path(p)
            .map_err(|e| invalid("sites.crls", format!("{}: {e}", p.display())))?;
    }
    // Revoked by the CRLs given; a certificate they do not cover passes.
    let policy = RevocationPolicy {
        mode: RevocationMode::BestEffort,
        ..RevocationPolicy::default()
    };
    let verifier = remote::tls::ReaderVerifier::new(store.build(), crls.build(), policy);
    remote::tls::server_config(chain, key, verifier).map_err(|e| {
        invalid(
            "sites.cert",
            format!("{e} (does `sites.key` belong to `sites.cert`?)"),
        )
    })
}

/// Serves site links on `listener` until `stop`: each connection's TLS
/// handshake within `handshake`, then HTTP/1.1 to `router`, every request
/// with the connection's [`Peer`]. At `stop`, every link is cut (sites
/// reconnect to another central instance).
pub async fn serve(
    listener: TcpListener,
    tls: Arc<tokio_rustls::rustls::ServerConfig>,
    handshake: Duration,
    router: axum::Router,
    mut stop: watch::Receiver<bool>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let mut links = JoinSet::new();
    loop {
        let (tcp, addr) = tokio::select! {
            _ = stop.wait_for(|s| *s) => break,
            Some(_) = links.join_next(), if !links.is_empty() => continue,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "site link: accept failed");
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        links.spawn(async move {
            let tls = match tokio::time::timeout(handshake, acceptor.accept(tcp)).await {
                Ok(Ok(t)) => t,
                Ok(Err(e)) => {
                    tracing::warn!(%addr, error = %e, "site link refused in the TLS handshake");
                    return;
                }
                Err(_) => {
                    tracing::warn!(%addr, "site link: TLS handshake timed out");
                    return;
                }
            };
            let leaf = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| c.as_ref().to_vec());
            let peer = Peer {
                site: leaf.as_deref().and_then(site_of_certificate),
                subject: leaf.as_deref().and_then(remote::tls::subject_cn),
                addr,
            };
            tracing::debug!(%addr, site = ?peer.site, "site link up");
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let router = router.clone();
                let mut req = req.map(Body::new);
                req.extensions_mut().insert(peer.clone());
                async move {
                    match router.oneshot(req).await {
                        Ok(r) => Ok::<_, std::convert::Infallible>(r),
                        Err(e) => match e {},
                    }
                }
            });
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(handshake);
            if let Err(e) = builder.serve_connection(TokioIo::new(tls), service).await {
                tracing::debug!(%addr, error = %e, "site link ended");
            }
        });
    }
    links.shutdown().await;
}

/// A site's way to its centrals: its certificate and the centrals' CA.
#[derive(Debug)]
pub struct Connector {
    tls: Arc<tokio_rustls::rustls::ClientConfig>,
    endpoints: Vec<Endpoint>,
    timeout: Duration,
    /// The longest wait for a central's answer, and between its parts
    /// (`central.silence_ms`).
    silence: Duration,
    /// The schema every request says the site is at
    /// ([`super::version`]).
    schema: i64,
}

impl Connector {
    /// From `[central]`: the certificate must name the site `central.site`.
    pub fn new(cfg: &CentralConfig) -> Result<Connector, SyncError> {
        key_file("central.key", &cfg.key)?;
        let chain = remote::tls::load_certs(&cfg.cert).map_err(|e| invalid("central.cert", e))?;
        let key = remote::tls::load_key(&cfg.key).map_err(|e| invalid("central.key", e))?;
        let named = chain.first().and_then(|c| site_of_certificate(c.as_ref()));
        if named.as_deref() != Some(cfg.site.as_str()) {
            return Err(invalid(
                "central.cert",
                format!(
                    "{} names {}, not site `{}`: issue it with `pivgate pki issue-device --site {}`",
                    cfg.cert.display(),
                    match &named {
                        Some(n) => format!("site `{n}`"),
                        None => "no site (no subjectAltName URI urn:pivgate:site:NAME)".into(),
                    },
                    cfg.site,
                    cfg.site
                ),
            ));
        }
        let cas: Vec<CertificateDer<'static>> =
            remote::tls::load_certs(&cfg.ca).map_err(|e| invalid("central.ca", e))?;
        let tls = remote::tls::client_config(chain, key, &cas).map_err(|e| {
            invalid(
                "central.cert",
                format!("{e} (does `central.key` belong to `central.cert`?)"),
            )
        })?;
        let endpoints = cfg
            .urls
            .iter()
            .map(|u| Endpoint::parse(u).map_err(|p| invalid("central.urls", p)))
            .collect::<Result<_, _>>()?;
        Ok(Connector {
            tls,
            endpoints,
            timeout: Duration::from_millis(cfg.connect_timeout_ms),
            silence: Duration::from_millis(cfg.silence_ms),
            schema: super::version::current(),
        })
    }

    /// The same connector saying the site is at `schema` rather than this
    /// release's: what a site of another release sends (to check a
    /// rolling upgrade).
    pub fn presenting_schema(mut self, schema: i64) -> Connector {
        self.schema = schema;
        self
    }

    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    /// A new HTTP/1.1 connection to central `index`, over TLS.
    async fn connect(&self, index: usize) -> Result<client::SendRequest<Full<Bytes>>, SyncError> {
        let e = &self.endpoints[index % self.endpoints.len()];
        let name = remote::tls::server_name(&e.host).map_err(|x| SyncError::Link(x.to_string()))?;
        let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
        let attempt = async {
            let tcp = TcpStream::connect(&e.authority)
                .await
                .map_err(|x| SyncError::Link(format!("{}: {x}", e.url)))?;
            let _ = tcp.set_nodelay(true);
            let tls = connector
                .connect(name, tcp)
                .await
                .map_err(|x| SyncError::Link(format!("{}: TLS: {x}", e.url)))?;
            let (sender, conn) = client::handshake(TokioIo::new(tls))
                .await
                .map_err(|x| SyncError::Link(format!("{}: {x}", e.url)))?;
            Ok::<_, SyncError>((sender, conn))
        };
        let (sender, conn) = tokio::time::timeout(self.timeout, attempt)
            .await
            .map_err(|_| SyncError::Link(format!("{}: connecting timed out", e.url)))??;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "central link ended");
            }
        });
        Ok(sender)
    }

    /// The link to central `index` (no connection is made yet).
    pub fn link(self: &Arc<Self>, index: usize) -> Link {
        Link {
            connector: self.clone(),
            index: index % self.endpoints.len(),
            idle: tokio::sync::Mutex::new(None),
        }
    }
}

/// A site's link to one central (see the module's documentation).
#[derive(Debug)]
pub struct Link {
    connector: Arc<Connector>,
    index: usize,
    /// A connection kept alive for the next [`Link::send`].
    idle: tokio::sync::Mutex<Option<client::SendRequest<Full<Bytes>>>>,
}

impl Link {
    /// The central this link goes to.
    pub fn endpoint(&self) -> &Endpoint {
        &self.connector.endpoints[self.index]
    }

    /// Which of `central.urls` it is (from 0).
    pub fn index(&self) -> usize {
        self.index
    }

    /// A request for `path_and_query` (e.g. `/sync/v1/feed?after=3`) with
    /// the Host header of this central.
    pub fn request(
        &self,
        method: axum::http::Method,
        path_and_query: &str,
        body: Bytes,
    ) -> Request<Full<Bytes>> {
        let mut r = Request::new(Full::new(body));
        *r.method_mut() = method;
        *r.uri_mut() = path_and_query
            .parse()
            .unwrap_or_else(|_| "/".parse().expect("a path"));
        if let Ok(h) = self.endpoint().authority.parse() {
            r.headers_mut().insert(header::HOST, h);
        }
        r.headers_mut().insert(
            super::version::SCHEMA_HEADER,
            header::HeaderValue::from(self.connector.schema),
        );
        r
    }

    /// Sends `req` and reads the whole answer, over a kept-alive connection
    /// (a new one when none is idle). A central silent for
    /// `central.silence_ms` (no answer, or a pause within it) fails the
    /// request, and its connection is dropped: a central that stopped
    /// answering without closing the connection (frozen, or its host gone)
    /// does not hold the caller forever.
    pub async fn send(&self, req: Request<Full<Bytes>>) -> Result<Response<Bytes>, SyncError> {
        let mut sender = match self.idle.lock().await.take() {
            Some(s) if s.is_ready() => s,
            _ => self.connector.connect(self.index).await?,
        };
        let url = &self.endpoint().url;
        let resp = self
            .within(sender.send_request(req))
            .await?
            .map_err(|e| SyncError::Link(format!("{url}: {e}")))?;
        let (parts, mut body) = resp.into_parts();
        let mut bytes = Vec::new();
        while let Some(frame) = self.within(body.frame()).await? {
            let frame = frame.map_err(|e| SyncError::Link(format!("{url}: {e}")))?;
            if let Ok(data) = frame.into_data() {
                bytes.extend_from_slice(&data);
            }
        }
        let body = Bytes::from(bytes);
        if sender.ready().await.is_ok() {
            *self.idle.lock().await = Some(sender);
        }
        Ok(Response::from_parts(parts, body))
    }

    /// Sends `req` on a connection of its own and returns the answer to be
    /// read as it comes; the connection closes when the answer is dropped.
    /// The answer's head must come within `central.silence_ms`; the caller
    /// times the rest.
    pub async fn stream(&self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, SyncError> {
        let mut sender = self.connector.connect(self.index).await?;
        self.within(sender.send_request(req))
            .await?
            .map_err(|e| SyncError::Link(format!("{}: {e}", self.endpoint().url)))
    }

    /// `f`, unless the central is silent for `central.silence_ms` first.
    async fn within<T>(&self, f: impl std::future::Future<Output = T>) -> Result<T, SyncError> {
        tokio::time::timeout(self.connector.silence, f)
            .await
            .map_err(|_| {
                SyncError::Link(format!(
                    "{}: no answer for {} ms",
                    self.endpoint().url,
                    self.connector.silence.as_millis()
                ))
            })
    }
}
