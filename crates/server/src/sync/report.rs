//! The site tells the central how it is: the [`Reporter`] sends a
//! [`Report`] (`POST /sync/v1/report`, JSON) over the link its follower
//! holds: the feed position it has applied, its highest event sequence,
//! how old its revocation data and access changes are, and its clock. The
//! central keeps the last one per site ([`super::board`]) for its site
//! status, dashboard and metrics.
//!
//! It reports when the link comes up, then whenever one of these changes
//! (a change applied, an event committed, the data's freshness), at most
//! once per [`MIN_INTERVAL`], and at least every `every` (a third of
//! `central.silence_ms`) while nothing changes: the central takes a link
//! whose reports stopped for three times that as silent, whatever its TCP
//! connection says. A report that fails is not sent again; the next one
//! says everything anew. Taps never wait on it.
//!
//! ```json
//! {"v": 1, "sent_at": "2026-11-26T18:00:00Z", "applied": 42, "last_seq": 1234,
//!  "freshness": {"revocation": {"state": "at", "at": "2026-11-26T17:58:00Z"},
//!                "changes": {"state": "at", "at": "2026-11-26T17:59:59Z"}},
//!  "every_ms": 15000}
//! {"v": 1, "skew_us": -412}
//! ```

use std::sync::Arc;
use std::time::Duration;

use access::jiff::Timestamp;
use access::Freshness;
use axum::http::{HeaderValue, Method};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use store::{EventLog, Store};
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::follow::Follower;
use super::link::Link;
use crate::door::Controller;

/// Where the central takes reports.
pub const REPORT_PATH: &str = "/sync/v1/report";

/// The version of [`Report`] and [`ReportAck`] this release speaks.
pub const VERSION: u32 = 1;

/// Reports driven by a change are this far apart at least.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The largest report the central reads.
pub const MAX_BODY: usize = 64 * 1024;

/// What a site says of itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`VERSION`].
    pub v: u32,
    /// The site's clock when it sent this.
    pub sent_at: Timestamp,
    /// The last feed position applied (`None` before the first snapshot).
    pub applied: Option<i64>,
    /// The site's highest event sequence.
    pub last_seq: Option<i64>,
    /// How current its revocation data and access changes are.
    pub freshness: Freshness,
    /// It reports at least this often while linked.
    pub every_ms: u64,
}

/// The central's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportAck {
    pub v: u32,
    /// The site's clock minus the central's, as this report showed it.
    pub skew_us: i64,
}

/// What the reporter has done (for tests and status).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportProgress {
    /// Reports the central acknowledged.
    pub sent: u64,
    /// Reports that failed.
    pub failures: u64,
    /// The last report acknowledged.
    pub last: Option<(Option<i64>, Option<i64>)>,
}

/// Sends the site's reports (see the module's documentation).
pub struct Reporter {
    store: Store,
    log: EventLog,
    follower: Arc<Follower>,
    controller: Option<Arc<Controller>>,
    every: Duration,
    progress: watch::Sender<ReportProgress>,
}

impl Reporter {
    /// Reports over `follower`'s link, at least every `every`.
    pub fn new(
        store: Store,
        log: EventLog,
        follower: Arc<Follower>,
        controller: Option<Arc<Controller>>,
        every: Duration,
    ) -> Self {
        Reporter {
            store,
            log,
            follower,
            controller,
            every: every.max(MIN_INTERVAL),
            progress: watch::channel(ReportProgress::default()).0,
        }
    }

    pub fn progress(&self) -> watch::Receiver<ReportProgress> {
        self.progress.subscribe()
    }

    /// The report as of now.
    async fn report(&self) -> Result<Report, store::StoreError> {
        Ok(Report {
            v: VERSION,
            sent_at: Timestamp::now(),
            applied: self.store.applied_position().await?,
            last_seq: Some(self.store.last_event_seq().await?),
            freshness: self
                .controller
                .as_ref()
                .map_or(Freshness::NOT_APPLICABLE, |c| c.freshness()),
            every_ms: self.every.as_millis() as u64,
        })
    }

    async fn send(&self, link: &Link) -> Result<ReportAck, String> {
        let report = self.report().await.map_err(|e| e.to_string())?;
        let body = serde_json::to_vec(&report).map_err(|e| e.to_string())?;
        let mut req = link.request(Method::POST, REPORT_PATH, Bytes::from(body));
        req.headers_mut().insert(
            axum::http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let resp = tokio::time::timeout(self.every, link.send(req))
            .await
            .map_err(|_| "no answer in time".to_string())?
            .map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!(
                "the central answered {}: {}",
                resp.status(),
                String::from_utf8_lossy(resp.body())
                    .chars()
                    .take(256)
                    .collect::<String>()
            ));
        }
        let ack: ReportAck = serde_json::from_slice(resp.body()).map_err(|e| e.to_string())?;
        self.progress.send_modify(|p| {
            p.sent += 1;
            p.last = Some((report.applied, report.last_seq));
        });
        Ok(ack)
    }

    /// Reports until `stop`.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut link_rx = self.follower.link();
        let mut status = Some(self.follower.status());
        let mut fresh = self.controller.as_ref().map(|c| c.freshness_changes());
        let mut live = Some(self.log.subscribe());
        let mut last_sent: Option<Instant> = None;
        let mut dirty = true;
        loop {
            let link = link_rx.borrow_and_update().clone();
            let Some(link) = link else {
                tokio::select! {
                    r = link_rx.changed() => if r.is_err() { return },
                    _ = stop.wait_for(|s| *s) => return,
                }
                last_sent = None;
                continue;
            };
            let now = Instant::now();
            let due = match last_sent {
                None => now,
                Some(t) if dirty => t + MIN_INTERVAL,
                Some(t) => t + self.every,
            };
            if now >= due {
                match self.send(&link).await {
                    Ok(ack) => tracing::debug!(skew_us = ack.skew_us, "site report sent"),
                    Err(e) => {
                        self.progress.send_modify(|p| p.failures += 1);
                        tracing::debug!(error = %e, "site report failed");
                    }
                }
                last_sent = Some(Instant::now());
                dirty = false;
                continue;
            }
            tokio::select! {
                r = link_rx.changed() => {
                    if r.is_err() { return }
                    // A new link: report at once.
                    last_sent = None;
                }
                r = changed(&mut status) => if r { dirty = true } else { status = None },
                r = changed(&mut fresh) => if r { dirty = true } else { fresh = None },
                r = committed(&mut live) => if r { dirty = true } else { live = None },
                _ = tokio::time::sleep_until(due) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }
}

/// The next change of `rx`; false when its sender is gone; never when
/// there is none.
async fn changed<T>(rx: &mut Option<watch::Receiver<T>>) -> bool {
    match rx {
        Some(rx) => rx.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

/// The next commit of the event log; false when it has stopped.
async fn committed(live: &mut Option<broadcast::Receiver<Arc<store::Event>>>) -> bool {
    match live {
        Some(rx) => !matches!(rx.recv().await, Err(broadcast::error::RecvError::Closed)),
        None => std::future::pending().await,
    }
}
