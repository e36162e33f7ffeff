//! The central's side of the feed: what a site fetches over its link.
//!
//! * `GET /sync/v1/snapshot` → `{"pos": P, "part": Entities}`: the site's
//!   part ([`access::site_part`]) of every entity as of position `P`, read
//!   in one database snapshot (with `?data=true` also `revocation_data`,
//!   the latest CRL of each distribution point and OCSP answer of each
//!   certificate at `P`). A new site starts from it.
//! * `GET /sync/v1/feed?after=P` → `200`, NDJSON, one line per change of
//!   the site's part after `P`, in position order, for as long as the link
//!   lasts: `{"pos": P, "revocation": bool, "delta": Delta}`, or with
//!   `&data=true` also the CRLs and OCSP answers the central got,
//!   `{"pos": P, "revocation": true, "data": RevocationData}` (its `kind`
//!   `crl` or `ocsp`, [`store::revdata`]); on a quiet
//!   feed `{"heartbeat": HEAD}` every `sites.heartbeat_ms`. New changes are
//!   read when PostgreSQL notifies a commit (`LISTEN`, sent by whichever
//!   central instance committed): no polling, and any instance serves any
//!   site. `410` with code `feed-pruned` when changes after `P` were
//!   pruned: the site takes a snapshot again.
//!
//! The site is the one its certificate names (`urn:pivgate:site:NAME`),
//! resolved to the site entity of that name. A certificate naming no site
//! or a site that does not exist, or a request for another site's part
//! (`?site=OTHER`), is refused (`403`) with a `sync.refused` admin event
//! (limited per peer: [`super::refused`]).
//!
//! Both are served in the form of the site's schema ([`super::version`]):
//! a site a release behind gets its entities without the fields it does
//! not know, and no revocation data of a kind it does not know (a site
//! before schema 14 gets its CRLs, not the OCSP answers).

use std::sync::Arc;
use std::time::Duration;

use access::jiff::Timestamp;
use access::{site_part, Site};
use axum::body::{Body, Bytes};
use axum::extract::{Extension, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::json;
use store::{EventLog, FeedRead, NewEvent, Store};
use tokio::sync::{mpsc, watch};

use super::link::Peer;
use super::version::{SiteForm, VersionRefusal};
use super::SyncError;

/// Rows read from the database at a time.
const BATCH: u32 = 256;

/// What the central's site routes share.
#[derive(Debug)]
pub struct Central {
    store: Store,
    /// `sync.refused` events, limited per peer.
    refusals: super::refused::RefusalLog,
    /// Goes up at each feed commit of any central instance.
    wake: watch::Receiver<u64>,
    heartbeat: Duration,
    stop: watch::Receiver<bool>,
}

/// Why a site's request is refused: a stable code and the sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub code: &'static str,
    pub reason: String,
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        (
            StatusCode::FORBIDDEN,
            axum::Json(json!({ "code": self.code, "reason": self.reason })),
        )
            .into_response()
    }
}

impl Central {
    /// The central's site routes over `store` (PostgreSQL), recording
    /// refusals in `log`; streams end at `stop`.
    pub fn new(
        store: Store,
        log: EventLog,
        heartbeat: Duration,
        stop: watch::Receiver<bool>,
    ) -> Result<Arc<Central>, SyncError> {
        let wake = store
            .feed_notifications()
            .ok_or_else(|| SyncError::Invalid {
                key: "database_url",
                problem: "a central needs PostgreSQL".into(),
            })?;
        Ok(Arc::new(Central {
            store,
            refusals: super::refused::RefusalLog::new(log, stop.clone()),
            wake,
            heartbeat,
            stop,
        }))
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The `sync.refused` events' limiter.
    pub fn refusals(&self) -> &super::refused::RefusalLog {
        &self.refusals
    }

    /// The site entity `peer`'s certificate names, if it exists and is the
    /// one `asked` for (when a request names one); else refused, with a
    /// `sync.refused` event.
    pub async fn site_of(&self, peer: &Peer, asked: Option<&str>) -> Result<Site, Refused> {
        let refused = |code: &'static str, reason: String| Refused { code, reason };
        let outcome = match &peer.site {
            None => Err(refused(
                "no-site-in-certificate",
                "the certificate names no site (urn:pivgate:site:NAME)".into(),
            )),
            Some(name) => match asked {
                Some(other) if other != name => Err(refused(
                    "other-site",
                    format!(
                        "the certificate of site `{}` cannot read site `{}`",
                        crate::peer_text::escape(name, 64),
                        crate::peer_text::escape(other, 64)
                    ),
                )),
                _ => match self.store.site_named(name).await {
                    Ok(Some(site)) => Ok(site),
                    Ok(None) => Err(refused(
                        "unknown-site",
                        format!("there is no site `{}`", crate::peer_text::escape(name, 64)),
                    )),
                    Err(e) => Err(refused("database", format!("the database failed: {e}"))),
                },
            },
        };
        if let Err(r) = &outcome {
            self.record_refusal(peer, r, asked).await;
        }
        outcome
    }

    /// Records that `peer`'s site speaks a schema this central does not
    /// serve (a `sync.refused` event, code `sync-version`).
    pub async fn version_refused(&self, peer: &Peer, why: &VersionRefusal) {
        let r = Refused {
            code: VersionRefusal::CODE,
            reason: why.to_string(),
        };
        self.record_refusal(peer, &r, None).await;
    }

    async fn record_refusal(&self, peer: &Peer, r: &Refused, asked: Option<&str>) {
        {
            let sentence = format!("site link from {} refused: {}", peer.addr, r.reason);
            tracing::warn!(peer = %peer.addr, code = r.code, "{sentence}");
            let event = NewEvent::admin(
                Timestamp::now(),
                "site-link",
                "sync.refused",
                sentence,
                json!({
                    "code": r.code,
                    "peer": peer.addr.to_string(),
                    "site": peer.site.as_deref().map(|s| crate::peer_text::escape(s, 64)),
                    "asked": asked.map(|s| crate::peer_text::escape(s, 64)),
                    "subject": peer.subject.as_deref().map(|s| crate::peer_text::escape(s, 128)),
                }),
            );
            let key = super::refused::PeerKey {
                ip: peer.addr.ip(),
                site: peer.site.clone(),
            };
            self.refusals.refused(key, r.code, event).await;
        }
    }
}

/// `/sync/v1/snapshot` and `/sync/v1/feed`.
pub fn router(central: Arc<Central>) -> axum::Router {
    axum::Router::new()
        .route("/sync/v1/snapshot", get(snapshot))
        .route("/sync/v1/feed", get(feed))
        .with_state(central)
}

#[derive(Debug, Deserialize)]
struct SiteQuery {
    site: Option<String>,
    /// The site takes the central's revocation data too.
    #[serde(default)]
    data: bool,
}

#[derive(Debug, Deserialize)]
struct FeedQuery {
    after: i64,
    site: Option<String>,
    /// The site takes the central's revocation data lines too (a site
    /// that does not ask, of an earlier release, is sent none).
    #[serde(default)]
    data: bool,
}

fn unavailable(e: impl std::fmt::Display) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(json!({ "code": "database", "reason": e.to_string() })),
    )
        .into_response()
}

async fn snapshot(
    State(c): State<Arc<Central>>,
    Extension(peer): Extension<Peer>,
    form: Option<Extension<SiteForm>>,
    Query(q): Query<SiteQuery>,
) -> Response {
    let form = form.map_or_else(SiteForm::current, |f| f.0);
    let site = match c.site_of(&peer, q.site.as_deref()).await {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    let (pos, all) = match c.store.feed_snapshot().await {
        Ok(s) => s,
        Err(e) => return unavailable(e),
    };
    let mut part = serde_json::to_value(site_part(&all, site.id)).unwrap_or_default();
    form.shape_entities(&mut part);
    let mut body = json!({ "pos": pos, "part": part });
    if q.data {
        match c.store.revocation_data_upto(pos).await {
            Ok(mut d) => {
                d.retain(|d| form.takes_data(&d.kind));
                body["revocation_data"] = json!(d)
            }
            Err(e) => return unavailable(e),
        }
    }
    axum::Json(body).into_response()
}

async fn feed(
    State(c): State<Arc<Central>>,
    Extension(peer): Extension<Peer>,
    form: Option<Extension<SiteForm>>,
    Query(q): Query<FeedQuery>,
) -> Response {
    let form = form.map_or_else(SiteForm::current, |f| f.0);
    let site = match c.site_of(&peer, q.site.as_deref()).await {
        Ok(s) => s,
        Err(r) => return r.into_response(),
    };
    // The first read decides the answer's status.
    let mut wake = c.wake.clone();
    wake.borrow_and_update();
    let first = match c.store.feed_after(site.id, q.after, BATCH).await {
        Ok(FeedRead::Rows(r)) => r,
        Ok(FeedRead::Gone { pruned }) => {
            return (
                StatusCode::GONE,
                axum::Json(json!({
                    "code": "feed-pruned",
                    "reason": format!("changes after {} were pruned (through {pruned}): take a snapshot", q.after),
                    "pruned": pruned,
                })),
            )
                .into_response()
        }
        Err(e) => return unavailable(e),
    };
    tracing::info!(site = %site.name, after = q.after, peer = %peer.addr, schema = form.schema, "site follows the feed");
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(follow(
        c.clone(),
        site,
        (form, q.data),
        q.after,
        first,
        wake,
        tx,
    ));
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .header(header::CACHE_CONTROL, "no-store")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// One feed line, in the site's form (revocation data as it is).
fn line(row: &store::FeedRow, form: &SiteForm) -> Bytes {
    if row.data {
        return Bytes::from(format!(
            "{{\"pos\":{},\"revocation\":{},\"data\":{}}}\n",
            row.pos, row.revocation, row.body
        ));
    }
    Bytes::from(format!(
        "{{\"pos\":{},\"revocation\":{},\"delta\":{}}}\n",
        row.pos,
        row.revocation,
        form.delta_text(&row.body)
    ))
}

/// Whether `row` goes to a site of `form` that asked for revocation data
/// (`data`) or not: every change; revocation data if asked for and of a
/// kind the site's schema knows.
fn sent(row: &store::FeedRow, form: &SiteForm, data: bool) -> bool {
    !row.data || (data && form.takes_data_text(&row.body))
}

/// Sends the site's rows after `after` as they commit, until the site goes
/// away, the feed is pruned under it, or the central stops. The rows go
/// in the site's form; revocation data rows only if it asked for them.
async fn follow(
    c: Arc<Central>,
    site: Site,
    (form, data): (SiteForm, bool),
    mut last: i64,
    mut rows: Vec<store::FeedRow>,
    mut wake: watch::Receiver<u64>,
    tx: mpsc::Sender<Bytes>,
) {
    let mut stop = c.stop.clone();
    let mut beat = tokio::time::interval(c.heartbeat);
    beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    beat.tick().await;
    // Once everything pending is sent, one heartbeat at once: the site
    // learns it has caught up (it counts as connected from then on).
    let mut told_caught_up = false;
    loop {
        // Everything committed up to now (the wake-up is marked seen
        // before each read: a commit after it wakes the next wait).
        loop {
            if rows.is_empty() {
                break;
            }
            for r in &rows {
                if sent(r, &form, data) && tx.send(line(r, &form)).await.is_err() {
                    return;
                }
                last = r.pos;
            }
            wake.borrow_and_update();
            rows = match c.store.feed_after(site.id, last, BATCH).await {
                Ok(FeedRead::Rows(r)) => r,
                // Pruned under a site this far behind: it reconnects and
                // is told to take a snapshot.
                Ok(FeedRead::Gone { .. }) => return,
                Err(e) => {
                    tracing::warn!(site = %site.name, error = %e, "reading the feed failed; the site reconnects");
                    return;
                }
            };
        }
        if !told_caught_up {
            told_caught_up = true;
            let line = Bytes::from(format!("{{\"heartbeat\":{last}}}\n"));
            if tx.send(line).await.is_err() {
                return;
            }
            beat.reset();
        }
        tokio::select! {
            changed = wake.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = beat.tick() => {
                let beat = Bytes::from(format!("{{\"heartbeat\":{last}}}\n"));
                if tx.send(beat).await.is_err() {
                    return;
                }
                continue;
            }
            _ = tx.closed() => return,
            _ = stopped(&mut stop) => return,
        }
        wake.borrow_and_update();
        rows = match c.store.feed_after(site.id, last, BATCH).await {
            Ok(FeedRead::Rows(r)) => r,
            Ok(FeedRead::Gone { .. }) => return,
            Err(e) => {
                tracing::warn!(site = %site.name, error = %e, "reading the feed failed; the site reconnects");
                return;
            }
        };
    }
}

/// Resolves at `stop` (holding no guard of it).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Prunes the feed of changes older than `days`, at start and hourly,
/// until `stop`.
pub async fn prune(store: Store, days: u32, mut stop: watch::Receiver<bool>) {
    loop {
        let cutoff =
            Timestamp::now() - access::jiff::SignedDuration::from_hours(24 * i64::from(days));
        match store.prune_feed(cutoff).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(rows = n, "change feed pruned"),
            Err(e) => tracing::warn!(error = %e, "pruning the change feed failed"),
        }
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            _ = tokio::time::sleep(Duration::from_secs(3600)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_gets_the_revocation_data_it_asked_for_and_knows() {
        let row = |data: Option<store::RevocationData>| store::FeedRow {
            pos: 1,
            revocation: true,
            body: data.map_or_else(|| "{}".into(), |d| serde_json::to_string(&d).unwrap()),
            data: false,
        };
        let change = row(None);
        let data = |d| store::FeedRow {
            data: true,
            ..row(Some(d))
        };
        let crl = data(store::RevocationData::crl("http://ca/ca.crl", b"c", 1));
        let answer = data(store::RevocationData::ocsp("sha1/aa/01", b"a", 1));
        let now = SiteForm::current();
        let before = super::super::version::site_form(13, 14).unwrap();
        for (form, asked, expect) in [
            (&now, true, [true, true, true]),
            (&now, false, [true, false, false]),
            (&before, true, [true, true, false]),
            (&before, false, [true, false, false]),
        ] {
            let got = [&change, &crl, &answer].map(|r| sent(r, form, asked));
            assert_eq!(got, expect, "schema {} asked {asked}", form.schema);
        }
    }
}
