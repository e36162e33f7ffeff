//! Events sent to SIEMs: syslog receivers (RFC 5424 or CEF over TCP or
//! TLS, [`format`]) and webhooks (JSON, HMAC-signed), configured under
//! `[export]` ([`crate::config::ExportConfig`]).
//!
//! - **Source of truth.** Each sink is a task that reads the event log in
//!   id order after its cursor (the last event its receiver accepted),
//!   sends what it read and only then moves the cursor. The live event
//!   broadcast only wakes it; a sink that falls behind the broadcast reads
//!   what it missed from the store. Taps never wait on a sink.
//! - **Accepted** means the bytes were written and flushed on a connection
//!   the receiver had not closed (syslog), or an HTTP 2xx answer
//!   (webhook, one event per request).
//! - **Cursor.** Kept per sink in `<data_dir>/export/<sink>.cursor`
//!   (replaced atomically and durably after each accepted batch), so a
//!   restart resumes where the receiver stopped. A sink seen for the first
//!   time starts after the newest event already logged; a cursor beyond the
//!   newest event (another database) starts there too, with a warning.
//! - **Retention.** Events deleted by [`crate::retention`] before a sink
//!   reached them are not sent (the sink continues with the next one kept);
//!   watch the backlog.
//! - **At least once.** A failure (connect, TLS, write, timeout, non-2xx)
//!   is retried with exponential backoff from 250 ms to 30 s, the same
//!   events again; a receiver can therefore see an event twice (after a
//!   restart between sending and recording the cursor) and drops
//!   duplicates by the event id (`eventId` in the structured data,
//!   `externalId` in CEF, `X-Pivgate-Event-Id` on webhooks). Plain syslog
//!   has no acknowledgement: bytes a receiver accepted into its socket
//!   but lost when it crashed are not sent again.
//! - **Webhooks.** `POST` of the event as the API returns it (`id`,
//!   `time`, `kind`, …), `Content-Type: application/json`, with
//!   `X-Pivgate-Event-Id: <id>` and `X-Pivgate-Signature: sha256=<hex>`,
//!   the HMAC-SHA256 of the body under the key in `secret_file`.
//! - **Metrics** ([`ExportStatus`], served by [`crate::metrics`]): events
//!   exported and failed attempts per sink, and the backlog (event ids not
//!   yet delivered).

pub mod format;
mod syslog;
mod webhook;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use store::{Direction, Event, EventId, EventLog, EventQuery, Store};
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{ExportConfig, SyslogTransport};

/// Events read and sent per batch.
pub const BATCH: u32 = 100;
/// The first wait after a failure; it doubles up to [`BACKOFF_MAX`].
pub const BACKOFF_MIN: Duration = Duration::from_millis(250);
/// The longest wait between two attempts.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// A sink that cannot be set up at start.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("`{key}`: {error}")]
    Secret {
        key: String,
        error: files::KeyFileError,
    },
    #[error("`{key}`: {path}: the key is shorter than 16 bytes", path = path.display())]
    ShortSecret { key: String, path: PathBuf },
    #[error("`{key}`: {error}")]
    Tls {
        key: String,
        error: remote::tls::TlsError,
    },
}

impl ExportError {
    /// A stable code for logs.
    pub fn code(&self) -> &'static str {
        match self {
            ExportError::Secret { .. } => "export.secret",
            ExportError::ShortSecret { .. } => "export.secret-short",
            ExportError::Tls { .. } => "export.tls-config",
        }
    }
}

/// Why one delivery attempt failed; the events are sent again.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("cannot connect to {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("TLS with {0}: {1}")]
    Tls(String, std::io::Error),
    #[error("sending to {0}: {1}")]
    Write(String, std::io::Error),
    #[error("{0}: no answer within {1} ms")]
    Timeout(String, u64),
    #[error("{0}: answered HTTP {1}")]
    Status(String, u16),
    #[error("{0}: {1}")]
    Http(String, String),
}

impl SendError {
    /// A stable code for logs.
    pub fn code(&self) -> &'static str {
        match self {
            SendError::Connect(..) => "export.connect",
            SendError::Tls(..) => "export.tls",
            SendError::Write(..) => "export.write",
            SendError::Timeout(..) => "export.timeout",
            SendError::Status(..) => "export.status",
            SendError::Http(..) => "export.http",
        }
    }
}

/// One sink's counters, read by the metrics.
#[derive(Debug)]
pub struct SinkStatus {
    /// `syslog[0]:rfc5424:host:port` or `webhook[0]:https://host:port`.
    pub name: String,
    exported: AtomicU64,
    failures: AtomicU64,
    delivered: AtomicI64,
    newest: AtomicI64,
}

impl SinkStatus {
    fn new(name: String) -> SinkStatus {
        SinkStatus {
            name,
            exported: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            delivered: AtomicI64::new(0),
            newest: AtomicI64::new(0),
        }
    }

    /// Events the receiver accepted since start.
    pub fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }

    /// Failed delivery attempts since start.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// The last event id the receiver accepted.
    pub fn delivered(&self) -> EventId {
        EventId(self.delivered.load(Ordering::Relaxed))
    }

    /// Event ids logged but not yet delivered (the newest id seen minus
    /// the cursor).
    pub fn backlog(&self) -> u64 {
        let n = self.newest.load(Ordering::Relaxed);
        let d = self.delivered.load(Ordering::Relaxed);
        n.saturating_sub(d).max(0) as u64
    }

    fn saw(&self, id: EventId) {
        self.newest.fetch_max(id.0, Ordering::Relaxed);
    }
}

/// Every sink's status, in configuration order (syslog, then webhooks).
#[derive(Debug, Default)]
pub struct ExportStatus {
    sinks: Vec<Arc<SinkStatus>>,
}

impl ExportStatus {
    pub fn sinks(&self) -> &[Arc<SinkStatus>] {
        &self.sinks
    }
}

enum Transport {
    Syslog(syslog::SyslogSink),
    Webhook(Box<webhook::WebhookSink>),
}

impl Transport {
    /// Sends `events` in order: how many the receiver accepted, and the
    /// failure that stopped it short.
    async fn send(&mut self, events: &[Event]) -> (usize, Option<SendError>) {
        match self {
            Transport::Syslog(s) => match s.send(events).await {
                Ok(()) => (events.len(), None),
                Err(e) => (0, Some(e)),
            },
            Transport::Webhook(w) => w.send(events).await,
        }
    }
}

struct Sink {
    status: Arc<SinkStatus>,
    cursor: PathBuf,
    transport: Transport,
}

/// The sinks of a configuration, checked (secret files, CA files) but not
/// started.
pub struct Plan {
    sinks: Vec<Sink>,
    status: Arc<ExportStatus>,
}

/// The cursor file of the sink whose identity is `identity`: a hash, so
/// that reordering the configuration keeps each sink's place and a changed
/// address or format starts afresh.
fn cursor_path(data_dir: &Path, kind: &str, identity: &str) -> PathBuf {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, identity.as_bytes());
    let name = format!("{kind}-{}.cursor", hex::encode(&digest.as_ref()[..8]));
    data_dir.join("export").join(name)
}

/// Checks `config`'s sinks and builds them; nothing connects yet.
pub fn plan(config: &ExportConfig, data_dir: &Path) -> Result<Plan, ExportError> {
    let origin = format::Origin::this_process();
    let mut sinks = Vec::new();
    for (i, s) in config.syslog.iter().enumerate() {
        let tls = match s.transport {
            SyslogTransport::Tcp => None,
            SyslogTransport::Tls => {
                Some(syslog::tls_target(s).map_err(|error| ExportError::Tls {
                    key: format!("export.syslog[{i}].ca_file"),
                    error,
                })?)
            }
        };
        let identity = format!("{}\0{}", s.address, s.format.as_str());
        sinks.push(Sink {
            status: Arc::new(SinkStatus::new(format!(
                "syslog[{i}]:{}:{}",
                s.format.as_str(),
                s.address
            ))),
            cursor: cursor_path(data_dir, "syslog", &identity),
            transport: Transport::Syslog(syslog::SyslogSink::new(
                s.address.clone(),
                tls,
                s.format,
                origin.clone(),
            )),
        });
    }
    for (i, w) in config.webhook.iter().enumerate() {
        let key = |k: &str| format!("export.webhook[{i}].{k}");
        let secret =
            files::read_secret_file(&w.secret_file).map_err(|error| ExportError::Secret {
                key: key("secret_file"),
                error,
            })?;
        let secret = secret.trim_ascii_end();
        if secret.len() < 16 {
            return Err(ExportError::ShortSecret {
                key: key("secret_file"),
                path: w.secret_file.clone(),
            });
        }
        let hook = webhook::WebhookSink::new(w, secret).map_err(|error| ExportError::Tls {
            key: key("ca_file"),
            error,
        })?;
        sinks.push(Sink {
            status: Arc::new(SinkStatus::new(format!("webhook[{i}]:{}", hook.target()))),
            cursor: cursor_path(data_dir, "webhook", &w.url),
            transport: Transport::Webhook(Box::new(hook)),
        });
    }
    let status = Arc::new(ExportStatus {
        sinks: sinks.iter().map(|s| s.status.clone()).collect(),
    });
    Ok(Plan { sinks, status })
}

impl Plan {
    /// What the metrics read.
    pub fn status(&self) -> Arc<ExportStatus> {
        self.status.clone()
    }

    /// Starts one task per sink, reading `store` and woken by `log`'s
    /// commits; they end when `stop` turns true (or its sender goes), or
    /// when the event log is gone.
    pub fn start(
        self,
        store: &Store,
        log: &EventLog,
        stop: &watch::Receiver<bool>,
    ) -> Vec<JoinHandle<()>> {
        self.sinks
            .into_iter()
            .map(|sink| tokio::spawn(run(sink, store.clone(), log.subscribe(), stop.clone())))
            .collect()
    }
}

/// Resolves once `stop` is true or its sender is gone.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            return;
        }
    }
}

/// The exponential backoff between attempts.
struct Backoff(Duration);

impl Backoff {
    fn new() -> Backoff {
        Backoff(BACKOFF_MIN)
    }

    /// The next wait, doubling the one after.
    fn next(&mut self) -> Duration {
        let d = self.0;
        self.0 = (self.0 * 2).min(BACKOFF_MAX);
        d
    }

    fn reset(&mut self) {
        self.0 = BACKOFF_MIN;
    }
}

/// Waits `d`; false when stopped meanwhile.
async fn pause(d: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        _ = stopped(stop) => false,
    }
}

/// The newest event id in the store (0 when there is none).
async fn newest(store: &Store) -> Result<EventId, store::StoreError> {
    Ok(store
        .query_events(&EventQuery {
            direction: Direction::Backward,
            limit: 1,
            ..EventQuery::default()
        })
        .await?
        .events
        .first()
        .map_or(EventId(0), |e| e.id))
}

async fn read_cursor(path: &Path) -> std::io::Result<Option<EventId>> {
    match tokio::fs::read_to_string(path).await {
        Ok(text) => text
            .trim()
            .parse::<i64>()
            .map(|n| Some(EventId(n)))
            .map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: not an event id", path.display()),
                )
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

async fn write_cursor(path: &Path, id: EventId) -> std::io::Result<()> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        files::write_atomic(&path, format!("{}\n", id.0).as_bytes())
    })
    .await
    .map_err(std::io::Error::other)?
}

/// Where `sink` starts: its stored cursor, or the newest event for a new
/// sink (recorded at once).
async fn start_cursor(sink: &Sink, store: &Store) -> Result<EventId, String> {
    let newest = newest(store).await.map_err(|e| e.to_string())?;
    sink.status.saw(newest);
    let stored = read_cursor(&sink.cursor).await.map_err(|e| e.to_string())?;
    match stored {
        Some(c) if c <= newest => Ok(c),
        other => {
            if let Some(c) = other {
                tracing::warn!(
                    sink = %sink.status.name,
                    cursor = c.0,
                    newest = newest.0,
                    "export cursor is beyond the newest event (another database?): starting after the newest"
                );
            }
            write_cursor(&sink.cursor, newest)
                .await
                .map_err(|e| format!("{}: {e}", sink.cursor.display()))?;
            Ok(newest)
        }
    }
}

/// Takes every announcement already queued; false when the log is gone.
fn drain(live: &mut broadcast::Receiver<Arc<Event>>, status: &SinkStatus) -> bool {
    loop {
        match live.try_recv() {
            Ok(e) => status.saw(e.id),
            Err(TryRecvError::Lagged(_)) => continue,
            Err(TryRecvError::Empty) => return true,
            Err(TryRecvError::Closed) => return false,
        }
    }
}

async fn run(
    mut sink: Sink,
    store: Store,
    mut live: broadcast::Receiver<Arc<Event>>,
    mut stop: watch::Receiver<bool>,
) {
    let name = sink.status.name.clone();
    let mut backoff = Backoff::new();
    let mut cursor = loop {
        match start_cursor(&sink, &store).await {
            Ok(c) => break c,
            Err(error) => {
                let wait = backoff.next();
                tracing::warn!(sink = %name, %error, retry_ms = wait.as_millis() as u64, "export cannot read its cursor");
                if !pause(wait, &mut stop).await {
                    return;
                }
            }
        }
    };
    backoff.reset();
    sink.status.delivered.store(cursor.0, Ordering::Relaxed);
    tracing::info!(sink = %name, after = cursor.0, "exporting events");
    loop {
        if *stop.borrow() {
            return;
        }
        // Whatever was announced is committed, so the query below sees it.
        let open = drain(&mut live, &sink.status);
        let query = EventQuery {
            cursor: Some(cursor),
            direction: Direction::Forward,
            limit: BATCH,
            ..EventQuery::default()
        };
        let page = match store.query_events(&query).await {
            Ok(p) => p,
            Err(error) => {
                let wait = backoff.next();
                tracing::warn!(sink = %name, %error, retry_ms = wait.as_millis() as u64, "export cannot read the event log");
                if !pause(wait, &mut stop).await {
                    return;
                }
                continue;
            }
        };
        let Some(last) = page.events.last() else {
            if !open {
                return;
            }
            tokio::select! {
                r = live.recv() => match r {
                    Ok(e) => sink.status.saw(e.id),
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                },
                _ = stopped(&mut stop) => return,
            }
            continue;
        };
        sink.status.saw(last.id);
        let (sent, failure) = tokio::select! {
            r = sink.transport.send(&page.events) => r,
            _ = stopped(&mut stop) => return,
        };
        if sent > 0 {
            cursor = page.events[sent - 1].id;
            sink.status
                .exported
                .fetch_add(sent as u64, Ordering::Relaxed);
            sink.status.delivered.store(cursor.0, Ordering::Relaxed);
            if let Err(error) = write_cursor(&sink.cursor, cursor).await {
                tracing::error!(sink = %name, %error, cursor = cursor.0, "export cursor not saved: a restart sends these events again");
            }
        }
        match failure {
            None => backoff.reset(),
            Some(error) => {
                sink.status.failures.fetch_add(1, Ordering::Relaxed);
                let wait = backoff.next();
                tracing::warn!(sink = %name, %error, code = error.code(), after = cursor.0, retry_ms = wait.as_millis() as u64, "export failed; retrying");
                if !pause(wait, &mut stop).await {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_and_resets() {
        let mut b = Backoff::new();
        let waits: Vec<_> = (0..10).map(|_| b.next().as_millis()).collect();
        assert_eq!(
            waits,
            [250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        b.reset();
        assert_eq!(b.next(), BACKOFF_MIN);
    }

    #[test]
    fn a_short_webhook_secret_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("k");
        std::fs::write(&secret, "short\n").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let config = ExportConfig {
            syslog: Vec::new(),
            webhook: vec![crate::config::WebhookExport {
                url: "http://127.0.0.1:9/h".into(),
                secret_file: secret,
                ca_file: None,
                timeout_ms: 1000,
            }],
        };
        let e = plan(&config, dir.path()).err().unwrap();
        assert_eq!(e.code(), "export.secret-short", "{e}");
        assert!(
            e.to_string().contains("export.webhook[0].secret_file"),
            "{e}"
        );
    }

    #[test]
    fn cursor_files_follow_the_sink_not_its_position() {
        let d = Path::new("/d");
        let a = cursor_path(d, "syslog", "h:1\0rfc5424");
        assert_eq!(a, cursor_path(d, "syslog", "h:1\0rfc5424"));
        assert_ne!(a, cursor_path(d, "syslog", "h:1\0cef"));
        assert!(a.starts_with("/d/export"));
    }
}
