//! A webhook sink: each event `POST`ed as JSON on a kept-alive HTTP/1.1
//! connection (over TLS for `https://`), signed with HMAC-SHA256.

use std::time::Duration;

use aws_lc_rs::hmac;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderValue, CONTENT_TYPE, HOST, USER_AGENT};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use store::Event;
use tokio::net::TcpStream;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::TlsConnector;

use super::syslog::{client_config, Connection};
use super::SendError;
use crate::config::WebhookExport;

/// The header carrying the event id.
pub const EVENT_ID_HEADER: &str = "x-pivgate-event-id";
/// The header carrying `sha256=<hex HMAC-SHA256 of the body>`.
pub const SIGNATURE_HEADER: &str = "x-pivgate-signature";
/// The most of an answer's body read (and dropped).
const MAX_ANSWER: usize = 64 * 1024;

/// `sha256=<hex>`: the signature of `body` under `key`.
pub fn signature(key: &hmac::Key, body: &[u8]) -> String {
    format!("sha256={}", hex::encode(hmac::sign(key, body).as_ref()))
}

pub(super) struct WebhookSink {
    uri: Uri,
    /// `host:port` to connect to.
    address: String,
    host_header: HeaderValue,
    tls: Option<(std::sync::Arc<ClientConfig>, ServerName<'static>)>,
    key: hmac::Key,
    timeout: Duration,
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl WebhookSink {
    /// The sink `w` configures (its URL checked by the configuration).
    pub(super) fn new(
        w: &WebhookExport,
        secret: &[u8],
    ) -> Result<WebhookSink, remote::tls::TlsError> {
        use remote::tls::TlsError;
        let bad = || TlsError::BadServerName(w.url.clone());
        let uri: Uri = w.url.parse().map_err(|_| bad())?;
        let authority = uri.authority().ok_or_else(bad)?.clone();
        let https = uri.scheme_str() == Some("https");
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let tls = match (&w.ca_file, https) {
            (Some(ca), true) => Some((
                client_config(ca)?,
                remote::tls::server_name(authority.host())?,
            )),
            _ => None,
        };
        Ok(WebhookSink {
            address: format!("{}:{port}", authority.host()),
            host_header: HeaderValue::from_str(authority.as_str()).map_err(|_| bad())?,
            uri,
            tls,
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
            timeout: Duration::from_millis(w.timeout_ms),
            sender: None,
        })
    }

    /// `scheme://authority`, without the path (which may hold a secret).
    pub(super) fn target(&self) -> String {
        format!(
            "{}://{}",
            self.uri.scheme_str().unwrap_or("http"),
            self.uri.authority().map_or("", |a| a.as_str())
        )
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, SendError> {
        let tcp = TcpStream::connect(&self.address)
            .await
            .map_err(|e| SendError::Connect(self.address.clone(), e))?;
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Connection> = match &self.tls {
            None => Box::new(tcp),
            Some((config, name)) => Box::new(
                TlsConnector::from(config.clone())
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|e| SendError::Tls(self.address.clone(), e))?,
            ),
        };
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| SendError::Http(self.address.clone(), e.to_string()))?;
        tokio::spawn(async move {
            // Ends when the sender is dropped or the receiver closes.
            let _ = connection.await;
        });
        Ok(sender)
    }

    async fn post(&mut self, e: &Event) -> Result<(), SendError> {
        let body =
            serde_json::to_vec(e).map_err(|e| SendError::Http("JSON".into(), e.to_string()))?;
        let kept = match self.sender.take() {
            Some(mut s) => s.ready().await.is_ok().then_some(s),
            None => None,
        };
        let mut sender = match kept {
            Some(s) => s,
            None => self.connect().await?,
        };
        let path = self
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(HOST, self.host_header.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(USER_AGENT, concat!("pivgate/", env!("CARGO_PKG_VERSION")))
            .header(EVENT_ID_HEADER, e.id.to_string())
            .header(SIGNATURE_HEADER, signature(&self.key, &body))
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| SendError::Http(self.target(), e.to_string()))?;
        let answer = sender
            .send_request(request)
            .await
            .map_err(|e| SendError::Http(self.target(), e.to_string()))?;
        let status = answer.status();
        // The body is read so that the connection can carry the next one.
        let read = Limited::new(answer.into_body(), MAX_ANSWER).collect().await;
        if read.is_ok() {
            self.sender = Some(sender);
        }
        if status.is_success() {
            Ok(())
        } else {
            Err(SendError::Status(self.target(), status.as_u16()))
        }
    }

    /// Posts `events` one by one: how many were answered 2xx, and the
    /// failure that stopped it short.
    pub(super) async fn send(&mut self, events: &[Event]) -> (usize, Option<SendError>) {
        for (i, e) in events.iter().enumerate() {
            match tokio::time::timeout(self.timeout, self.post(e)).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => return (i, Some(error)),
                Err(_) => {
                    self.sender = None;
                    return (
                        i,
                        Some(SendError::Timeout(
                            self.target(),
                            self.timeout.as_millis() as u64,
                        )),
                    );
                }
            }
        }
        (events.len(), None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hex_hmac_sha256_of_the_body() {
        // RFC 4231 test case 2.
        let key = hmac::Key::new(hmac::HMAC_SHA256, b"Jefe");
        assert_eq!(
            signature(&key, b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
