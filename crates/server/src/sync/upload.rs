//! The site side of events going up: the [`Uploader`] sends what the
//! central has not acknowledged, in batches, over an [`Uplink`] (the link
//! to the central: "send this batch, get the acknowledgement"), and
//! records each acknowledgement at the site ([`store::Store::set_upload_cursor`]).
//!
//! It runs beside the taps and never in their way: a tap's event is
//! durable in the site's SQLite first, and the uploader learns of it from
//! the event log's live channel ([`store::EventLog::subscribe`]), reads what
//! follows the acknowledgement from the database (so what the channel
//! dropped or what committed before it started is sent too), and sends it.
//! Whatever fails (the connection, the central, this process), it sends
//! again from the last acknowledgement, after a back-off that doubles up to
//! [`UploadOptions::max_backoff`], or at once when the link to the central
//! is made again ([`Uplink::reconnected`]: the follower reconnected); the
//! central stores each event once. It
//! waits for a commit, never on a timer, when everything is acknowledged;
//! after a commit wakes it, it lets the events that follow gather for
//! [`UploadOptions::linger`] (`central.upload_linger_ms`, 200 ms) before
//! sending a batch that would not be full, so a busy site sends a request
//! per linger, not one per tap.
//!
//! The acknowledgement also tells the site how far its clock is from the
//! central's ([`UploadProgress::skew`]); a skew beyond what the central
//! allows is logged here and raised as an event there.

use std::future::Future;
use std::time::Duration;

use access::jiff::{SignedDuration, Timestamp};
use store::{EventLog, SiteEvent, Store, StoreError};
use tokio::sync::{broadcast, watch};

use super::wire::{self, UploadAck, UploadBatch};

/// The link to the central, as the uploader uses it. One batch at a time.
pub trait Uplink: Send + Sync {
    /// Sends `batch`; resolves with the central's acknowledgement, or why
    /// none came (the batch may still have been stored: it is sent again).
    fn send(
        &self,
        batch: &UploadBatch,
    ) -> impl Future<Output = Result<UploadAck, UplinkError>> + Send;

    /// Resolves when the link to the central is made again after this
    /// call (what was current at the call does not count): the uploader
    /// then sends at once instead of waiting out its back-off. By default,
    /// never.
    fn reconnected(&self) -> impl Future<Output = ()> + Send {
        std::future::pending()
    }
}

/// Why a batch got no acknowledgement.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UplinkError {
    /// No answer: the connection could not be made, or was lost.
    #[error("the central cannot be reached: {0}")]
    Unreachable(String),
    /// The central answered with a refusal.
    #[error("the central refused the batch (HTTP {status}, {code}): {reason}")]
    Refused {
        status: u16,
        code: String,
        reason: String,
    },
    /// The answer was not an acknowledgement this site understands.
    #[error("the central's answer cannot be read: {0}")]
    BadAnswer(String),
}

impl UplinkError {
    /// A stable code, for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            UplinkError::Unreachable(_) => "central-unreachable",
            UplinkError::Refused { .. } => "central-refused",
            UplinkError::BadAnswer(_) => "central-bad-answer",
        }
    }
}

/// The largest answer [`post_batch`] reads.
const MAX_ANSWER: usize = 64 * 1024;

/// Sends `batch` as `POST /sync/v1/events` (HTTP/1.1, JSON) over `stream`,
/// a connection the link made (TCP, TLS), and reads the answer: the
/// acknowledgement, or the central's refusal. `host` is the request's
/// `Host`. For [`Uplink`] implementations.
pub async fn post_batch<S>(
    stream: S,
    host: &str,
    batch: &UploadBatch,
) -> Result<UploadAck, UplinkError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use http_body_util::{BodyExt, Full, Limited};
    let lost = |e: &dyn std::fmt::Display| UplinkError::Unreachable(e.to_string());
    let body = serde_json::to_vec(batch).map_err(|e| UplinkError::BadAnswer(e.to_string()))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| lost(&e))?;
    let conn = tokio::spawn(conn);
    let answer = async {
        let req = hyper::Request::post(wire::EVENTS_PATH)
            .header(hyper::header::HOST, host)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(bytes::Bytes::from(body)))
            .map_err(|e| UplinkError::BadAnswer(e.to_string()))?;
        let resp = sender.send_request(req).await.map_err(|e| lost(&e))?;
        let status = resp.status();
        let bytes = Limited::new(resp.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| lost(&*e))?
            .to_bytes();
        read_answer(status, &bytes)
    }
    .await;
    conn.abort();
    answer
}

/// The [`Uplink`] of a running site: `POST /sync/v1/events` over the
/// mutual-TLS link its follower holds (the site's certificate is its
/// identity; the batch never names the site).
#[derive(Debug, Clone)]
pub struct LinkUplink {
    link: watch::Receiver<Option<std::sync::Arc<super::link::Link>>>,
}

impl LinkUplink {
    pub fn new(follower: &super::follow::Follower) -> Self {
        LinkUplink {
            link: follower.link(),
        }
    }
}

impl Uplink for LinkUplink {
    async fn send(&self, batch: &UploadBatch) -> Result<UploadAck, UplinkError> {
        let Some(link) = self.link.borrow().clone() else {
            return Err(UplinkError::Unreachable(
                "no link to a central yet (the follower is connecting)".into(),
            ));
        };
        let body = serde_json::to_vec(batch).map_err(|e| UplinkError::BadAnswer(e.to_string()))?;
        let mut req = link.request(
            axum::http::Method::POST,
            wire::EVENTS_PATH,
            bytes::Bytes::from(body),
        );
        req.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        );
        let resp = link
            .send(req)
            .await
            .map_err(|e| UplinkError::Unreachable(e.to_string()))?;
        read_answer(resp.status(), resp.body())
    }

    /// When the follower publishes a link again (it published it once the
    /// central answered the feed request: the central is back).
    fn reconnected(&self) -> impl Future<Output = ()> + Send {
        let mut link = self.link.clone();
        link.borrow_and_update();
        async move {
            loop {
                if link.changed().await.is_err() {
                    // The follower is gone: no link will come.
                    return std::future::pending().await;
                }
                if link.borrow_and_update().is_some() {
                    return;
                }
            }
        }
    }
}

/// The central's answer to a batch: its acknowledgement, or its refusal
/// (`{"code", "reason"}`), or why neither could be read.
fn read_answer(status: hyper::StatusCode, body: &[u8]) -> Result<UploadAck, UplinkError> {
    if status.is_success() {
        serde_json::from_slice::<UploadAck>(body).map_err(|e| UplinkError::BadAnswer(e.to_string()))
    } else {
        match serde_json::from_slice::<wire::Refusal>(body) {
            Ok(r) => Err(UplinkError::Refused {
                status: status.as_u16(),
                code: r.code,
                reason: r.reason,
            }),
            Err(_) => Err(UplinkError::BadAnswer(format!("HTTP {status}"))),
        }
    }
}

/// How the uploader batches and backs off.
#[derive(Debug, Clone, Copy)]
pub struct UploadOptions {
    /// The most events a batch carries (at most [`wire::MAX_EVENTS`]).
    pub max_batch: u32,
    /// The first wait after a failure; it doubles at each failure in a row.
    pub min_backoff: Duration,
    /// The longest wait after a failure.
    pub max_backoff: Duration,
    /// How long the uploader lets events gather before it sends a batch
    /// that would not be full: new events wait at most this long (plus
    /// the round trip) to go up, and a busy site sends one request per
    /// linger instead of one per tap, so uploading costs the taps next to
    /// nothing whether the link is up, slow or down. Zero sends at once.
    pub linger: Duration,
    /// The site's clock (for `sent_at`).
    pub clock: fn() -> Timestamp,
}

impl Default for UploadOptions {
    fn default() -> Self {
        UploadOptions {
            max_batch: 256,
            min_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(60),
            linger: Duration::from_millis(200),
            clock: Timestamp::now,
        }
    }
}

/// What the uploader has done so far (a `watch` channel: tests and status
/// wait on it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UploadProgress {
    /// The central's last acknowledgement.
    pub acked: i64,
    /// Batches acknowledged.
    pub batches: u64,
    /// Events sent (those sent again included).
    pub sent: u64,
    /// Attempts that got no acknowledgement.
    pub failures: u64,
    /// Back-offs cut short because the link to the central came back.
    pub woken: u64,
    /// The site's clock minus the central's, at the last acknowledgement.
    pub skew: Option<SignedDuration>,
    /// Whether the central finds that skew too large.
    pub skewed: bool,
    /// The last failure's code and sentence, until a batch succeeds.
    pub last_error: Option<(&'static str, String)>,
}

/// Why one round did not get an acknowledgement.
#[derive(Debug, thiserror::Error)]
enum RoundError {
    #[error(transparent)]
    Uplink(#[from] UplinkError),
    #[error("the site's database: {0}")]
    Store(#[from] StoreError),
    #[error("the central acknowledged nothing new (it holds up to {acked}, {sent} events sent)")]
    NoProgress { acked: i64, sent: usize },
    /// The central holds sequences of this site that the site never
    /// handed out: its database was replaced or restored from an older
    /// backup, and its new events would be taken for ones already stored.
    /// Nothing is recorded; an operator must look.
    #[error("the central acknowledges this site's events up to {acked}, beyond its last event {last}: was the site's database replaced or restored? Its new events would be taken for old ones; not going on")]
    CentralAhead { acked: i64, last: i64 },
}

impl RoundError {
    fn code(&self) -> &'static str {
        match self {
            RoundError::Uplink(e) => e.code(),
            RoundError::Store(_) => "site-database",
            RoundError::NoProgress { .. } => "central-no-progress",
            RoundError::CentralAhead { .. } => "central-ahead",
        }
    }
}

/// What a round found.
enum Round {
    /// Nothing above the acknowledgement: wait for a commit.
    Idle,
    /// A batch was acknowledged: look again at once if it was full, after
    /// the linger if not.
    Sent { full: bool },
}

/// Sends the site's events to the central (see the module documentation).
pub struct Uploader<U> {
    store: Store,
    log: EventLog,
    uplink: U,
    options: UploadOptions,
    progress: watch::Sender<UploadProgress>,
}

impl<U: Uplink> Uploader<U> {
    /// `store` is the site's database, `log` its event log (for the commits'
    /// live channel).
    pub fn new(store: Store, log: EventLog, uplink: U, options: UploadOptions) -> Self {
        Uploader {
            store,
            log,
            uplink,
            options,
            progress: watch::channel(UploadProgress::default()).0,
        }
    }

    /// Follows what the uploader does.
    pub fn progress(&self) -> watch::Receiver<UploadProgress> {
        self.progress.subscribe()
    }

    /// Runs until `stop` turns true (or its sender is gone). Stopping while
    /// a batch is in flight abandons it: it is sent again next time.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        // Subscribed before the first read: a commit after it wakes us.
        let mut live = self.log.subscribe();
        let mut after = loop {
            match self.store.start_upload_cursor().await {
                Ok(c) => break c.acked,
                Err(e) => {
                    tracing::error!(error = %e, "site upload: cannot read the upload cursor");
                    if !self.pause(self.options.max_backoff, &mut stop).await {
                        return;
                    }
                }
            }
        };
        self.progress.send_modify(|p| p.acked = after);
        let mut backoff = self.options.min_backoff;
        loop {
            if *stop.borrow() {
                return;
            }
            // Commits already seen are covered by the read below.
            drain(&mut live);
            // Made before the round: a link made again while it fails
            // ends the back-off below.
            let reconnected = self.uplink.reconnected();
            let round = tokio::select! {
                r = self.round(&mut after) => r,
                _ = stopped(&mut stop) => return,
            };
            match round {
                Ok(Round::Sent { full }) => {
                    backoff = self.options.min_backoff;
                    if !full && !self.pause(self.options.linger, &mut stop).await {
                        return;
                    }
                }
                Ok(Round::Idle) => {
                    backoff = self.options.min_backoff;
                    if !wait_for_commit(&mut live, &mut stop).await {
                        return;
                    }
                    // Let the events that follow this one gather.
                    if !self.pause(self.options.linger, &mut stop).await {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(code = e.code(), error = %e, retry_in = ?backoff, "site upload failed");
                    self.progress.send_modify(|p| {
                        p.failures += 1;
                        p.last_error = Some((e.code(), e.to_string()));
                    });
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {
                            backoff = (backoff * 2).min(self.options.max_backoff);
                        }
                        _ = reconnected => {
                            tracing::info!("the link to the central is back; uploading at once");
                            self.progress.send_modify(|p| p.woken += 1);
                            backoff = self.options.min_backoff;
                        }
                        _ = stopped(&mut stop) => return,
                    }
                }
            }
        }
    }

    /// Reads what follows `after`, sends it, records the acknowledgement.
    async fn round(&self, after: &mut i64) -> Result<Round, RoundError> {
        let max = self.options.max_batch.clamp(1, wire::MAX_EVENTS as u32);
        let found = self.store.events_after_site_seq(*after, max).await?;
        if found.events.is_empty() {
            return Ok(Round::Idle);
        }
        let sent = found.events.len();
        // Everything the site holds above `after` is in this batch.
        let whole = sent < max as usize;
        let batch = UploadBatch {
            v: wire::VERSION,
            floor: found.floor,
            sent_at: (self.options.clock)(),
            events: found
                .events
                .into_iter()
                .map(|e| SiteEvent {
                    seq: e.id.0,
                    event: e.event,
                })
                .collect(),
        };
        self.progress.send_modify(|p| p.sent += sent as u64);
        let ack = self.uplink.send(&batch).await?;
        if ack.v != wire::VERSION {
            return Err(UplinkError::BadAnswer(format!(
                "version {} (this site speaks {})",
                ack.v,
                wire::VERSION
            ))
            .into());
        }
        let last = batch.events.last().map_or(*after, |e| e.seq);
        if whole && ack.acked > last {
            return Err(RoundError::CentralAhead {
                acked: ack.acked,
                last,
            });
        }
        let skew = SignedDuration::from_micros(ack.skew_us);
        self.store
            .set_upload_cursor(ack.acked, skew, (self.options.clock)())
            .await?;
        let was_skewed = self.progress.borrow().skewed;
        if ack.skewed && !was_skewed {
            tracing::warn!(skew = %skew, "this site's clock is off from the central's by more than it allows");
        }
        let progressed = ack.acked != *after;
        // As the central says, even lower (it lost events: they are sent
        // again, the site kept them).
        *after = ack.acked;
        self.progress.send_modify(|p| {
            p.acked = ack.acked;
            p.batches += 1;
            p.skew = Some(skew);
            p.skewed = ack.skewed;
            p.last_error = None;
        });
        if progressed {
            Ok(Round::Sent { full: !whole })
        } else {
            Err(RoundError::NoProgress {
                acked: ack.acked,
                sent,
            })
        }
    }

    /// Waits `d` or until stopped; false when stopped.
    async fn pause(&self, d: Duration, stop: &mut watch::Receiver<bool>) -> bool {
        if d.is_zero() {
            return !*stop.borrow();
        }
        tokio::select! {
            _ = tokio::time::sleep(d) => true,
            _ = stopped(stop) => false,
        }
    }
}

/// Resolves once `stop` is true or its sender is gone.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Takes every notification already queued.
fn drain(live: &mut broadcast::Receiver<std::sync::Arc<store::Event>>) {
    use broadcast::error::TryRecvError;
    loop {
        match live.try_recv() {
            Ok(_) | Err(TryRecvError::Lagged(_)) => continue,
            Err(TryRecvError::Empty) | Err(TryRecvError::Closed) => return,
        }
    }
}

/// Waits for the next commit; false when stopped first. When the event log
/// has stopped, nothing more will be committed: waits for the stop.
async fn wait_for_commit(
    live: &mut broadcast::Receiver<std::sync::Arc<store::Event>>,
    stop: &mut watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        r = live.recv() => match r {
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => true,
            Err(broadcast::error::RecvError::Closed) => {
                stopped(stop).await;
                false
            }
        },
        _ = stopped(stop) => false,
    }
}
