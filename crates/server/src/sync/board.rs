//! The central's view of its sites: link state, change lag, upload
//! backlog, data ages and clock skew, per site
//! (`GET /api/v1/sites/status`, the dashboard's *Sites* page, the
//! `pivgate_site_*` metrics).
//!
//! Everything is kept in PostgreSQL ([`store::Store::site_links`]), not in
//! one instance's memory, so every central instance answers the same:
//!
//! * **link**: the instance serving a site's feed records it up when the
//!   feed starts ([`track_feed`]: the instance, the site's address, the
//!   position it follows from) and down when it ends. A link still marked
//!   up whose site has not reported for three times its report interval
//!   is *silent* (a cut the TCP connection has not noticed yet, or an
//!   instance killed without a word).
//! * **reports** (`POST /sync/v1/report`, [`super::report`]): the position
//!   the site applied, its highest event sequence, its data's ages and its
//!   clock. Change lag is the site's changes in the feed after the
//!   position it applied (and how long the oldest has waited); upload
//!   backlog is its highest sequence minus the central's acknowledgement.
//! * **clock skew**: the site's clock minus the central's at its latest
//!   report or upload batch, whichever came last.
//!
//! Ages reported by the site are carried over to the central's clock (the
//! instant of confirmation shifted by the skew the report showed) and
//! keep growing from there while the site is silent: the central's view is
//! as of the last report.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use access::jiff::{SignedDuration, Timestamp};
use access::{AsOf, Freshness};
use axum::body::{Body, Bytes};
use axum::extract::{Extension, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Serialize;
use serde_json::json;
use store::{SiteLinkRow, Store, StoreError};
use tokio::sync::watch;
use utoipa::ToSchema;

use super::feed::Central;
use super::link::Peer;
use super::report::{self, Report, ReportAck};

/// A link still marked up is silent when its site has not reported for
/// this many report intervals.
pub const SILENT_AFTER_INTERVALS: u32 = 3;

/// The central's board of sites (see the module's documentation).
#[derive(Debug)]
pub struct Board {
    store: Store,
    instance: String,
    /// Bumped after each link change or report this instance recorded.
    changed: watch::Sender<u64>,
    links: AtomicU64,
    /// The last status read (what the metrics show).
    cache: Mutex<Option<Arc<SitesStatus>>>,
}

impl Board {
    /// The board of the central instance named `instance` (as the status
    /// shows which instance serves a site), over `store` (PostgreSQL).
    pub fn new(store: Store, instance: String) -> Arc<Board> {
        Arc::new(Board {
            store,
            instance,
            changed: watch::channel(0).0,
            links: AtomicU64::new(0),
            cache: Mutex::new(None),
        })
    }

    /// This instance's name.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// Changes after each link change or report this instance recorded.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A new link's id: unique across instances and restarts (the time
    /// in microseconds, this process and a counter).
    fn link_id(&self) -> i64 {
        let n = self.links.fetch_add(1, Ordering::Relaxed) as i64;
        Timestamp::now()
            .as_microsecond()
            .wrapping_mul(1 << 10)
            .wrapping_add(((i64::from(std::process::id()) << 4) + (n & 0xf)) & 0x3ff)
    }

    /// Records that this instance serves `site`'s feed from position
    /// `after` to `peer`; returns the link's id.
    pub async fn link_up(&self, site: &str, peer: &str, after: i64) -> Result<i64, StoreError> {
        let id = self.link_id();
        self.store
            .site_link_up(&store::LinkUp {
                site,
                link_id: id,
                central: &self.instance,
                peer,
                followed_from: after,
                at: Timestamp::now(),
            })
            .await?;
        self.bump();
        Ok(id)
    }

    /// Records that the feed of link `id` ended.
    pub async fn link_down(&self, site: &str, id: i64) -> Result<(), StoreError> {
        self.store
            .site_link_down(site, id, Timestamp::now())
            .await?;
        self.bump();
        Ok(())
    }

    /// Records `site`'s report, received at `at`.
    pub async fn report(
        &self,
        site: &str,
        r: &Report,
        at: Timestamp,
    ) -> Result<ReportAck, StoreError> {
        let freshness = serde_json::to_string(&r.freshness).unwrap_or_else(|_| "{}".into());
        self.store
            .record_site_report(&store::SiteReportRow {
                site,
                applied: r.applied,
                last_seq: r.last_seq,
                freshness: &freshness,
                every_ms: r.every_ms,
                sent_at: r.sent_at,
                received_at: at,
            })
            .await?;
        self.bump();
        Ok(ReportAck {
            v: report::VERSION,
            skew_us: micros(r.sent_at.duration_since(at)),
        })
    }

    /// Every site's status now, read from the database (three
    /// statements).
    pub async fn status(&self) -> Result<Arc<SitesStatus>, StoreError> {
        let rows = self.store.site_links().await?;
        let head = self.store.feed_position().await?;
        let now = Timestamp::now();
        let s = Arc::new(SitesStatus {
            central: true,
            instance: Some(self.instance.clone()),
            at: now,
            feed_head: Some(head),
            items: rows.iter().map(|r| site_status(r, now)).collect(),
        });
        *self.cache.lock().unwrap_or_else(|p| p.into_inner()) = Some(s.clone());
        Ok(s)
    }

    /// The last status read, if any (for the metrics, read after
    /// [`Self::status`]).
    pub fn cached(&self) -> Option<Arc<SitesStatus>> {
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .cloned()
    }
}

fn micros(d: SignedDuration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(if d.is_negative() { i64::MIN } else { i64::MAX })
}

/// Every site the central knows, as `GET /api/v1/sites/status` answers.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SitesStatus {
    /// Whether this service is a central (`[sites]`); otherwise `items` is
    /// empty.
    pub central: bool,
    /// The central instance that answered.
    pub instance: Option<String>,
    /// When this was read (the central's clock).
    #[schema(value_type = String, format = DateTime)]
    pub at: Timestamp,
    /// The change feed's latest position.
    pub feed_head: Option<i64>,
    pub items: Vec<SiteStatus>,
}

impl SitesStatus {
    /// The answer of a service that is not a central.
    pub fn not_central() -> SitesStatus {
        SitesStatus {
            central: false,
            instance: None,
            at: Timestamp::now(),
            feed_head: None,
            items: Vec::new(),
        }
    }
}

/// One site.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SiteStatus {
    /// The site entity's id and name.
    pub site: i64,
    pub name: String,
    pub link: LinkStatus,
    pub changes: ChangeLag,
    pub upload: UploadBacklog,
    pub data_age: SiteDataAges,
    /// The site's clock minus the central's, in seconds, at its latest
    /// report or upload batch (`null`: none yet).
    pub clock_skew_s: Option<f64>,
    /// When its last report arrived (the central's clock).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub reported_at: Option<Timestamp>,
}

/// A site's link to the central instances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct LinkStatus {
    /// `up` (a central instance serves its feed and it reports),
    /// `silent` (a feed is marked open but the site stopped reporting:
    /// the link was cut, or the instance died), `down` (its feed ended),
    /// `never` (it never linked).
    pub state: String,
    /// `state` is `up`.
    pub up: bool,
    /// When the feed started (up, silent) or ended (down).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub since: Option<Timestamp>,
    /// The last time the central heard from the site (feed start, report
    /// or upload batch).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_seen: Option<Timestamp>,
    /// The central instance serving (or that last served) its feed.
    pub central: Option<String>,
    /// The site's address as that instance saw it.
    pub peer: Option<String>,
    /// The position the site asked the feed to follow from.
    pub followed_from: Option<i64>,
}

/// How far behind the central's changes a site is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ChangeLag {
    /// The last position the site applied, as it reported it.
    pub applied: Option<i64>,
    /// Changes of its part in the feed after that (`null`: never linked).
    pub pending: Option<u64>,
    /// Seconds since the oldest of them was made (0 with none).
    pub behind_s: Option<u64>,
}

/// The site's events not yet at the central.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct UploadBacklog {
    /// Every event of the site up to this sequence is at the central.
    pub acked: Option<i64>,
    /// The site's highest sequence, as it last reported it.
    pub last_seq: Option<i64>,
    /// `last_seq - acked` (`null` before the site reported).
    pub backlog: Option<u64>,
    /// When its last batch arrived.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_batch: Option<Timestamp>,
}

/// How old the site's data is, as of its last report (on the central's
/// clock).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct SiteDataAges {
    pub revocation: SiteDataAge,
    pub changes: SiteDataAge,
}

/// How old one kind of a site's data is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct SiteDataAge {
    /// `confirmed`, `never` (depended on, never confirmed),
    /// `not-applicable`, or `unknown` (the site never reported).
    pub state: String,
    /// When it was last known current (the central's clock).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub as_of: Option<Timestamp>,
    /// Seconds since `as_of`.
    pub age_s: Option<u64>,
}

impl SiteDataAge {
    fn unknown() -> Self {
        SiteDataAge {
            state: "unknown".into(),
            as_of: None,
            age_s: None,
        }
    }

    /// `as_of` on the site's clock, shifted by `shift` onto the central's.
    fn of(as_of: AsOf, shift: SignedDuration, now: Timestamp) -> Self {
        match as_of {
            AsOf::NotApplicable => SiteDataAge {
                state: "not-applicable".into(),
                as_of: None,
                age_s: None,
            },
            AsOf::Never => SiteDataAge {
                state: "never".into(),
                as_of: None,
                age_s: None,
            },
            AsOf::At { at } => {
                let at = at.checked_add(shift).unwrap_or(at);
                SiteDataAge {
                    state: "confirmed".into(),
                    as_of: Some(at),
                    age_s: AsOf::At { at }.age(now).secs(),
                }
            }
        }
    }
}

fn secs_since(t: Timestamp, now: Timestamp) -> u64 {
    now.duration_since(t).as_secs().max(0) as u64
}

/// What `r` says at `now`.
pub fn site_status(r: &SiteLinkRow, now: Timestamp) -> SiteStatus {
    let link = r.link.as_ref();
    let reported = link.and_then(|l| l.reported);
    // The report's skew, or the last batch's when that came later.
    let report_skew = link.and_then(|l| Some((l.reported?, l.skew_us?)));
    let batch_skew = r.last_batch.zip(r.batch_skew_us);
    let skew_us = match (report_skew, batch_skew) {
        (Some(a), Some(b)) => Some(if b.0 > a.0 { b.1 } else { a.1 }),
        (a, b) => a.or(b).map(|x| x.1),
    };
    let last_seen = [
        link.filter(|l| l.up).and_then(|l| l.since),
        reported,
        r.last_batch,
    ]
    .into_iter()
    .flatten()
    .max();
    let state = match link {
        None => "never",
        Some(l) if !l.up => "down",
        Some(l) => {
            let contact = [l.since, l.reported].into_iter().flatten().max();
            let silent = match (l.every_ms, contact) {
                (Some(every), Some(c)) => {
                    let limit = every.saturating_mul(u64::from(SILENT_AFTER_INTERVALS));
                    now.duration_since(c).as_millis() > i128::from(limit)
                }
                // A site that never reported (an older release): the
                // feed's state alone.
                _ => false,
            };
            if silent {
                "silent"
            } else {
                "up"
            }
        }
    };
    let freshness: Option<Freshness> = link
        .and_then(|l| l.freshness.as_deref())
        .and_then(|f| serde_json::from_str(f).ok());
    // Site clock + shift = central clock.
    let shift = link
        .and_then(|l| Some(l.reported?.duration_since(l.report_sent?)))
        .unwrap_or_default();
    let data_age = match freshness {
        Some(f) => SiteDataAges {
            revocation: SiteDataAge::of(f.revocation, shift, now),
            changes: SiteDataAge::of(f.changes, shift, now),
        },
        None => SiteDataAges {
            revocation: SiteDataAge::unknown(),
            changes: SiteDataAge::unknown(),
        },
    };
    let last_seq = link.and_then(|l| l.last_seq);
    SiteStatus {
        site: r.site_id,
        name: r.name.clone(),
        link: LinkStatus {
            state: state.into(),
            up: state == "up",
            since: link.and_then(|l| l.since),
            last_seen,
            central: link.and_then(|l| l.central.clone()),
            peer: link.and_then(|l| l.peer.clone()),
            followed_from: link.and_then(|l| l.followed_from),
        },
        changes: ChangeLag {
            applied: link.and_then(|l| l.applied),
            pending: link.map(|_| r.pending),
            behind_s: link.map(|_| r.oldest_pending.map_or(0, |t| secs_since(t, now))),
        },
        upload: UploadBacklog {
            acked: r.acked,
            last_seq,
            backlog: last_seq.map(|s| s.saturating_sub(r.acked.unwrap_or(0)).max(0) as u64),
            last_batch: r.last_batch,
        },
        data_age,
        clock_skew_s: skew_us.map(|us| us as f64 / 1e6),
        reported_at: reported,
    }
}

/// Wraps the feed route: a feed answered `200` is recorded as the site's
/// link, up until its answer ends (the connection closes, the feed task
/// ends).
pub async fn track_feed(board: Arc<Board>, req: Request, next: Next) -> Response {
    if req.uri().path() != "/sync/v1/feed" {
        return next.run(req).await;
    }
    let peer = req.extensions().get::<Peer>().cloned();
    let after = req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("after="))
            .and_then(|v| v.parse::<i64>().ok())
    });
    let resp = next.run(req).await;
    let (Some(peer), Some(after)) = (peer, after) else {
        return resp;
    };
    let Some(site) = peer
        .site
        .clone()
        .filter(|_| resp.status() == StatusCode::OK)
    else {
        return resp;
    };
    let id = match board.link_up(&site, &peer.addr.to_string(), after).await {
        Ok(id) => id,
        Err(e) => {
            tracing::warn!(site = %site, error = %e, "recording the site's link failed");
            return resp;
        }
    };
    let guard = LinkGuard {
        board,
        site,
        id,
        rt: tokio::runtime::Handle::current(),
    };
    let (parts, body) = resp.into_parts();
    use futures_util::StreamExt;
    let stream = body.into_data_stream().map(move |chunk| {
        let _held = &guard;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// Marks the link down when the feed's answer is dropped.
struct LinkGuard {
    board: Arc<Board>,
    site: String,
    id: i64,
    rt: tokio::runtime::Handle,
}

impl Drop for LinkGuard {
    fn drop(&mut self) {
        let (board, site, id) = (self.board.clone(), std::mem::take(&mut self.site), self.id);
        self.rt.spawn(async move {
            if let Err(e) = board.link_down(&site, id).await {
                tracing::warn!(site = %site, error = %e, "recording the end of the site's link failed");
            }
        });
    }
}

/// `POST /sync/v1/report`.
pub fn router(central: Arc<Central>, board: Arc<Board>) -> axum::Router {
    axum::Router::new()
        .route(report::REPORT_PATH, post(post_report))
        .layer(axum::extract::DefaultBodyLimit::max(report::MAX_BODY))
        .with_state((central, board))
}

async fn post_report(
    State((central, board)): State<(Arc<Central>, Arc<Board>)>,
    Extension(peer): Extension<Peer>,
    body: Bytes,
) -> Response {
    let at = Timestamp::now();
    let site = match central.site_of(&peer, None).await {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    let bad = |code: &str, reason: String| {
        (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({ "code": code, "reason": reason })),
        )
            .into_response()
    };
    let r: Report = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return bad(
                "malformed-report",
                format!("the report cannot be read: {e}"),
            )
        }
    };
    if r.v != report::VERSION {
        return bad(
            "sync-version",
            format!(
                "this central speaks report version {}, the report is version {}",
                report::VERSION,
                r.v
            ),
        );
    }
    match board.report(&site.name, &r, at).await {
        Ok(ack) => axum::Json(ack).into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({ "code": "database", "reason": e.to_string() })),
        )
            .into_response(),
    }
}

/// The per-site metrics, from the status the scrape read last
/// ([`Board::status`], called by the scrape before encoding): one series
/// per site entity, so their number is bounded by the configured sites.
#[derive(Debug)]
pub struct SitesCollector(pub Arc<Board>);

impl prometheus_client::collector::Collector for SitesCollector {
    fn encode(
        &self,
        mut enc: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::gauge::ConstGauge;
        use prometheus_client::registry::Unit;
        let Some(s) = self.0.cached() else {
            return Ok(());
        };
        type Pick = fn(&SiteStatus) -> Option<f64>;
        let series: [(&str, &str, Option<Unit>, Pick); 5] = [
            (
                "site_link_up",
                "Whether each site's link to the central is up (1) or not (0: down, silent or never linked).",
                None,
                |s| Some(if s.link.up { 1.0 } else { 0.0 }),
            ),
            (
                "site_change_lag",
                "Changes of each site's part in the feed after the position it last reported applied.",
                None,
                |s| s.changes.pending.map(|n| n as f64),
            ),
            (
                "site_change_lag",
                "How long the oldest change each site has not applied has waited (0 with none).",
                Some(Unit::Seconds),
                |s| s.changes.behind_s.map(|n| n as f64),
            ),
            (
                "site_upload_backlog",
                "Events of each site not yet acknowledged by the central (its last reported sequence minus the acknowledgement).",
                None,
                |s| s.upload.backlog.map(|n| n as f64),
            ),
            (
                "site_clock_skew",
                "Each site's clock minus the central's, at its latest report or upload batch.",
                Some(Unit::Seconds),
                |s| s.clock_skew_s,
            ),
        ];
        for (name, help, unit, pick) in series {
            let g = ConstGauge::new(0.0f64);
            let mut m = enc.encode_descriptor(name, help, unit.as_ref(), g.metric_type())?;
            for site in &s.items {
                if let Some(v) = pick(site) {
                    ConstGauge::new(v).encode(m.encode_family(&[("site", site.name.as_str())])?)?;
                }
            }
        }
        let g = ConstGauge::new(0.0f64);
        let mut m = enc.encode_descriptor(
            "site_data_age",
            "How old each site's revocation data and access changes are, as of its last report and aged since; +Inf: never confirmed; absent: not applicable or not reported.",
            Some(&Unit::Seconds),
            g.metric_type(),
        )?;
        for site in &s.items {
            for (data, a) in [
                ("revocation", &site.data_age.revocation),
                ("changes", &site.data_age.changes),
            ] {
                let v = match (a.state.as_str(), a.age_s) {
                    ("never", _) => f64::INFINITY,
                    (_, Some(s)) => s as f64,
                    _ => continue,
                };
                ConstGauge::new(v)
                    .encode(m.encode_family(&[("site", site.name.as_str()), ("data", data)])?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::LinkRow;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn row(link: Option<LinkRow>) -> SiteLinkRow {
        SiteLinkRow {
            site_id: 1,
            name: "hq".into(),
            link,
            acked: Some(10),
            batch_skew_us: Some(-2_000_000),
            last_batch: Some(t(5)),
            pending: 0,
            oldest_pending: None,
        }
    }

    fn link(up: bool) -> LinkRow {
        LinkRow {
            link_id: Some(7),
            central: Some("c1".into()),
            peer: Some("127.0.0.1:5".into()),
            up,
            since: Some(t(0)),
            followed_from: Some(3),
            applied: Some(4),
            last_seq: Some(14),
            freshness: Some(
                serde_json::to_string(&Freshness {
                    revocation: AsOf::NotApplicable,
                    changes: AsOf::At { at: t(8) },
                })
                .unwrap(),
            ),
            every_ms: Some(1000),
            reported: Some(t(10)),
            // The site's clock is 2 s ahead.
            report_sent: Some(t(12)),
            skew_us: Some(2_000_000),
        }
    }

    #[test]
    fn a_reporting_link_is_up_then_silent_after_three_intervals() {
        let s = site_status(&row(Some(link(true))), t(12));
        assert_eq!((s.link.state.as_str(), s.link.up), ("up", true));
        assert_eq!(s.link.last_seen, Some(t(10)));
        assert_eq!(s.upload.backlog, Some(4));
        // The report came after the last batch: its skew.
        assert_eq!(s.clock_skew_s, Some(2.0));
        // Confirmed at 8 on the site's clock, 6 on the central's.
        assert_eq!(s.data_age.changes.as_of, Some(t(6)));
        assert_eq!(s.data_age.changes.age_s, Some(6));
        assert_eq!(s.data_age.revocation.state, "not-applicable");
        assert_eq!(s.changes.pending, Some(0));
        let s = site_status(&row(Some(link(true))), t(14));
        assert_eq!(s.link.state, "silent");
        assert!(!s.link.up);
        assert_eq!(
            site_status(&row(Some(link(false))), t(11)).link.state,
            "down"
        );
    }

    #[test]
    fn a_site_that_never_linked_has_no_lag_and_no_backlog_to_show() {
        let mut r = row(None);
        r.acked = None;
        r.last_batch = None;
        let s = site_status(&r, t(0));
        assert_eq!(s.link.state, "never");
        assert_eq!(s.changes.pending, None);
        assert_eq!(s.upload.backlog, None);
        assert_eq!(s.data_age.changes.state, "unknown");
        assert_eq!(s.clock_skew_s, None);
        // Acknowledged beyond what the site last reported: no backlog.
        let mut l = link(true);
        l.last_seq = Some(9);
        assert_eq!(site_status(&row(Some(l)), t(11)).upload.backlog, Some(0));
    }
}
