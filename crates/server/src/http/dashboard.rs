//! Read-only routes for the dashboard (viewer):
//!
//! - `GET /api/v1/doors/status`: every door with its mode, its latest tap
//!   and whether its readers are connected, all from memory
//!   ([`crate::status`]);
//! - `GET /api/v1/doors/{id}/latency?window=1h|1d`: percentiles of the
//!   door's taps in the window, per stage and per time bucket, from the
//!   stored stage tables (at most [`LATENCY_MAX_EVENTS`] taps, newest
//!   first; `truncated` says when more were there) and the `signal` stage
//!   the service keeps in memory for the last day;
//! - `GET /api/v1/pki/health`: trust store, CRLs held (age, staleness,
//!   where each came from), the last re-validation, cache hit ratios and
//!   the revocation policy;
//! - `GET /api/v1/events.csv`: the event log as CSV, with the filters of
//!   `/api/v1/events`, streamed page by page (at most [`CSV_MAX_ROWS`]
//!   rows);
//! - `GET /api/v1/cardholders/{id}/credentials`: a cardholder's
//!   credentials with their FASC-N decoded.

use std::collections::HashMap;
use std::sync::Arc;

use access::jiff::Timestamp;
use access::{CardholderId, DoorId};
use auth::StageName;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream;
use serde::{Deserialize, Serialize};
use store::{Direction, Event, EventKind, EventQuery, Store};
use utoipa::ToSchema;

use super::schema::ErrorBody;
use super::{door_id, event_filters, loaded, ApiError, AppResult};
use crate::service::AppState;

/// The most tap events one latency answer reads.
pub const LATENCY_MAX_EVENTS: usize = 50_000;
/// The most rows one CSV export writes.
pub const CSV_MAX_ROWS: u64 = 1_000_000;

/// Every door.
#[derive(Debug, Serialize, ToSchema)]
pub struct DoorStatusList {
    pub items: Vec<DoorStatus>,
}

/// A door, its latest tap and its readers.
#[derive(Debug, Serialize, ToSchema)]
pub struct DoorStatus {
    pub door: i64,
    pub name: String,
    /// The site (by id).
    pub site: i64,
    /// `normal`, `unlocked` or `locked`.
    pub mode: String,
    /// `pki-cak`, `pki-auth` or `chuid`.
    pub mechanism: String,
    /// The latest tap, granted or refused; `null` before the first.
    pub last_tap: Option<LastTap>,
    pub readers: Vec<ReaderState>,
}

/// A door's latest tap.
#[derive(Debug, Serialize, ToSchema)]
pub struct LastTap {
    /// The event's id.
    pub event: i64,
    #[schema(value_type = String, format = DateTime)]
    pub time: Timestamp,
    /// `granted` or `refused`.
    pub result: Option<String>,
    /// `granted` or the refusal code.
    pub code: Option<String>,
    /// Why it was refused.
    pub reason: Option<String>,
    pub reader: Option<i64>,
    pub cardholder: Option<i64>,
    /// The cardholder's current name.
    pub cardholder_name: Option<String>,
}

/// A reader bound to a door.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReaderState {
    pub reader: i64,
    pub name: String,
    pub connection: String,
    /// Whether the reader is plugged in (PC/SC) or online (OSDP); `null`
    /// when no watcher knows it (no configured OSDP port serves it, or the
    /// PC/SC service is not available).
    pub connected: Option<bool>,
    /// Since when it is (dis)connected, or watched.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub since: Option<Timestamp>,
}

/// `GET /api/v1/doors/status` (viewer): every door, from memory.
#[utoipa::path(get, path = "/api/v1/doors/status", tag = "dashboard",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every door, its latest tap and its readers' connections", body = DoorStatusList),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
    ))]
pub async fn doors_status(State(state): State<Arc<AppState>>) -> AppResult<Json<DoorStatusList>> {
    let l = loaded(&state)?;
    let snapshot = l.controller.snapshot();
    let mut items: Vec<DoorStatus> = snapshot
        .doors()
        .map(|d| {
            let last_tap = l.last_taps.get(d.id).map(|t| {
                let cardholder = t.cardholder;
                LastTap {
                    event: t.event.0,
                    time: t.time,
                    result: t.result.map(|r| r.as_str().to_string()),
                    code: t.code,
                    reason: t.reason,
                    reader: t.reader.map(|r| r.0),
                    cardholder: cardholder.map(|c| c.0),
                    cardholder_name: cardholder
                        .and_then(|c| snapshot.cardholder(c))
                        .map(|c| c.name.clone()),
                }
            });
            let mut readers: Vec<ReaderState> = snapshot
                .readers()
                .iter()
                .filter(|r| r.door == d.id)
                .map(|r| {
                    let c = l.reader_status.get(r.id);
                    ReaderState {
                        reader: r.id.0,
                        name: r.name.clone(),
                        connection: r.connection.clone(),
                        connected: c.map(|c| c.connected),
                        since: c.map(|c| c.since),
                    }
                })
                .collect();
            readers.sort_by_key(|r| r.reader);
            DoorStatus {
                door: d.id.0,
                name: d.name.clone(),
                site: d.site.0,
                mode: d.mode.as_str().to_string(),
                mechanism: d.mechanism.as_str().to_string(),
                last_tap,
                readers,
            }
        })
        .collect();
    items.sort_by_key(|d| d.door);
    Ok(Json(DoorStatusList { items }))
}

/// The 50th and 95th percentiles, in milliseconds; `null` without taps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct Percentiles {
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
}

/// One stage of the taps of a window.
#[derive(Debug, Serialize, ToSchema)]
pub struct StageLatency {
    /// `detect`, `select`, `read`, `challenge`, `validate`, `verify`,
    /// `decide` or `signal`.
    pub stage: String,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    /// Taps that went through this stage.
    pub count: usize,
}

/// One time bucket of a window.
#[derive(Debug, Serialize, ToSchema)]
pub struct LatencyBucket {
    #[schema(value_type = String, format = DateTime)]
    pub start: Timestamp,
    pub taps: usize,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
}

/// Tap latency at one door over a window.
#[derive(Debug, Serialize, ToSchema)]
pub struct Latency {
    pub door: i64,
    /// `1h` or `1d`.
    pub window: String,
    /// The first bucket's start; buckets are aligned to whole 5 minutes
    /// (`1h`) or hours (`1d`), the last one holding now.
    #[schema(value_type = String, format = DateTime)]
    pub since: Timestamp,
    /// The end of the last bucket.
    #[schema(value_type = String, format = DateTime)]
    pub until: Timestamp,
    /// Taps read.
    pub taps: usize,
    /// More taps were in the window than were read (the newest are read).
    pub truncated: bool,
    /// Whole taps: the stored stages plus `signal` when known.
    pub total: Percentiles,
    /// Every stage, in tap order (`count` 0 and `null` percentiles when no
    /// tap went through it).
    pub stages: Vec<StageLatency>,
    /// Seconds per bucket: 300 for `1h`, 3600 for `1d`.
    pub bucket_s: u64,
    pub buckets: Vec<LatencyBucket>,
    /// Taps whose `signal` stage (commit and lock) is known: it is kept in
    /// memory for the last day, so taps before a restart lack it.
    pub signal_known: usize,
}

/// The `p`th percentile (nearest rank) of `sorted`, in ms.
fn percentile(sorted: &[u64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1] as f64 / 1000.0)
}

fn percentiles(values: &mut [u64]) -> Percentiles {
    values.sort_unstable();
    Percentiles {
        p50_ms: percentile(values, 0.50),
        p95_ms: percentile(values, 0.95),
    }
}

#[derive(Deserialize)]
struct StoredStage {
    name: StageName,
    wall_us: u64,
}

/// The stage table a tap event stores (`data.stages`); empty when it has
/// none it can read.
fn stages_of(e: &Event) -> Vec<(StageName, u64)> {
    let Some(stages) = e.event.data.as_ref().and_then(|d| d.get("stages")) else {
        return Vec::new();
    };
    Vec::<StoredStage>::deserialize(stages)
        .map(|v| v.into_iter().map(|s| (s.name, s.wall_us)).collect())
        .unwrap_or_default()
}

fn stage_index(s: StageName) -> usize {
    StageName::ALL.iter().position(|n| *n == s).unwrap_or(0)
}

/// `GET /api/v1/doors/{id}/latency` (viewer).
#[utoipa::path(get, path = "/api/v1/doors/{id}/latency", tag = "dashboard",
    security(("bearer" = [])),
    params(
        ("id" = i64, Path, description = "The door"),
        ("window" = Option<String>, Query, description = "`1h` (the default; 5-minute buckets) or `1d` (1-hour buckets)"),
    ),
    responses(
        (status = 200, description = "Percentiles over the window, per stage and per bucket", body = Latency),
        (status = 400, description = "`window` is not `1h` or `1d`, the id not a number, or a parameter unknown; `field` names it", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 404, description = "No such door", body = ErrorBody),
    ))]
pub async fn door_latency(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> AppResult<Json<Latency>> {
    let door = door_id(&id)?;
    if let Some(k) = q.keys().find(|k| k.as_str() != "window") {
        return Err(ApiError::field(
            StatusCode::BAD_REQUEST,
            k.as_str(),
            format!("unknown query parameter `{k}` (known: window)"),
        ));
    }
    let (window, window_s, bucket_s): (&str, i64, i64) = match q.get("window").map(String::as_str) {
        None | Some("1h") => ("1h", 3600, 300),
        Some("1d") => ("1d", 86_400, 3600),
        Some(v) => {
            return Err(ApiError::field(
                StatusCode::BAD_REQUEST,
                "window",
                format!("query parameter `window`: `{v}` is not `1h` or `1d`"),
            ))
        }
    };
    let l = loaded(&state)?;
    if l.controller.snapshot().door(door).is_none() {
        return Err(ApiError::field(
            StatusCode::NOT_FOUND,
            "id",
            format!("door {door} does not exist"),
        ));
    }
    let now = Timestamp::now().as_second();
    let end = (now.div_euclid(bucket_s) + 1) * bucket_s;
    let since = end - window_s;
    let ts = |s: i64| Timestamp::from_second(s).map_err(ApiError::internal);
    let (mut events, truncated) =
        read_taps(&l.store, door, ts(since)?, ts(end)?, LATENCY_MAX_EVENTS).await?;
    let signals = l.signals.door(door);

    let buckets_n = (window_s / bucket_s) as usize;
    let mut totals = Vec::with_capacity(events.len());
    let mut per_stage: Vec<Vec<u64>> = vec![Vec::new(); StageName::ALL.len()];
    let mut per_bucket: Vec<Vec<u64>> = vec![Vec::new(); buckets_n];
    let mut signal_known = 0;
    for e in events.iter_mut() {
        let stages = &mut e.stages;
        if !stages.iter().any(|(n, _)| *n == StageName::Signal) {
            if let Some(&us) = signals.get(&e.id) {
                stages.push((StageName::Signal, us));
            }
        }
        if stages.iter().any(|(n, _)| *n == StageName::Signal) {
            signal_known += 1;
        }
        let total: u64 = stages.iter().map(|(_, us)| us).sum();
        for &(name, us) in stages.iter() {
            per_stage[stage_index(name)].push(us);
        }
        totals.push(total);
        let at = e.time.as_second();
        if (since..end).contains(&at) {
            per_bucket[((at - since) / bucket_s) as usize].push(total);
        }
    }
    let stages = StageName::ALL
        .iter()
        .zip(per_stage.iter_mut())
        .map(|(name, v)| {
            let p = percentiles(v);
            StageLatency {
                stage: name.as_str().to_string(),
                p50_ms: p.p50_ms,
                p95_ms: p.p95_ms,
                count: v.len(),
            }
        })
        .collect();
    let buckets = per_bucket
        .iter_mut()
        .enumerate()
        .map(|(i, v)| {
            let p = percentiles(v);
            Ok(LatencyBucket {
                start: ts(since + i as i64 * bucket_s)?,
                taps: v.len(),
                p50_ms: p.p50_ms,
                p95_ms: p.p95_ms,
            })
        })
        .collect::<AppResult<Vec<_>>>()?;
    Ok(Json(Latency {
        door: door.0,
        window: window.to_string(),
        since: ts(since)?,
        until: ts(end)?,
        taps: events.len(),
        truncated,
        total: percentiles(&mut totals),
        stages,
        bucket_s: bucket_s as u64,
        buckets,
        signal_known,
    }))
}

/// What the latency statistics read of one tap event (the rest of the
/// event is dropped as each page is read).
struct TapTimes {
    id: store::EventId,
    time: Timestamp,
    stages: Vec<(StageName, u64)>,
}

/// The tap events of `door` in `[since, until)`, newest first, at most
/// `cap`; whether more were there.
async fn read_taps(
    store: &Store,
    door: DoorId,
    since: Timestamp,
    until: Timestamp,
    cap: usize,
) -> AppResult<(Vec<TapTimes>, bool)> {
    let mut q = EventQuery {
        door: Some(door),
        kind: Some(EventKind::Tap),
        since: Some(since),
        until: Some(until),
        direction: Direction::Backward,
        limit: EventQuery::MAX_LIMIT.min(cap.max(1) as u32),
        ..EventQuery::default()
    };
    let mut out = Vec::new();
    loop {
        let page = store.query_events(&q).await.map_err(ApiError::internal)?;
        out.extend(page.events.iter().map(|e| TapTimes {
            id: e.id,
            time: e.event.time,
            stages: stages_of(e),
        }));
        if out.len() >= cap {
            let more = out.len() > cap || page.next.is_some();
            out.truncate(cap);
            return Ok((out, more));
        }
        match page.next {
            Some(n) => q.cursor = Some(n),
            None => return Ok((out, false)),
        }
    }
}

/// A CRL held for revocation checking.
#[derive(Debug, Serialize, ToSchema)]
pub struct CrlHealth {
    pub issuer: String,
    /// `full` or `delta`.
    pub kind: String,
    /// The CRL number in hex (empty without one).
    pub number: String,
    #[schema(value_type = String, format = DateTime)]
    pub this_update: Timestamp,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_update: Option<Timestamp>,
    /// Seconds since thisUpdate.
    pub age_s: i64,
    /// Past its nextUpdate.
    pub stale: bool,
    /// Still used by the doors: not past nextUpdate plus the policy's grace
    /// (a stale CRL within the grace period is still used).
    pub usable: bool,
    /// `file` (configured `trust.crls`) or `download`.
    pub source: String,
    /// The distribution point it was downloaded from.
    pub url: Option<String>,
}

/// Validation cache hits and misses.
#[derive(Debug, Serialize, ToSchema)]
pub struct CacheHealth {
    pub hits: u64,
    pub misses: u64,
    /// hits / (hits + misses); `null` before the first lookup.
    pub ratio: Option<f64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CachesHealth {
    /// Validated certificate paths.
    pub certificates: CacheHealth,
    /// Fast-path keys.
    pub keys: CacheHealth,
}

/// How revocation is checked at the doors.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyHealth {
    /// `require`, `best-effort` or `off`.
    pub mode: String,
    /// How long past nextUpdate a CRL is still used.
    pub grace_s: u64,
}

/// The PKI as the doors see it.
#[derive(Debug, Serialize, ToSchema)]
pub struct PkiHealth {
    pub anchors: usize,
    pub intermediates: usize,
    pub crls: Vec<CrlHealth>,
    /// Whether CRLs are downloaded (`[trust.fetch]`).
    pub downloads: bool,
    /// Every distribution point watched: URL, issuer, thisUpdate and
    /// nextUpdate (seconds since the epoch), download time, the last error
    /// while it fails, the next attempt.
    #[schema(value_type = Vec<Object>)]
    pub distribution_points: Vec<crate::revocation::CrlStatus>,
    /// The last re-validation of every credential: `last_run`, `checked`,
    /// `ok`, `revoked`, `expired`, `invalid`, `unknown`,
    /// `without_certificate`.
    #[schema(value_type = Object)]
    pub revalidation: crate::revocation::RevalidationReport,
    pub cache: CachesHealth,
    pub policy: PolicyHealth,
}

fn cache_health(s: &pki::cache::CacheStats) -> CacheHealth {
    let n = s.hits + s.misses;
    CacheHealth {
        hits: s.hits,
        misses: s.misses,
        ratio: (n > 0).then(|| s.hits as f64 / n as f64),
    }
}

/// `GET /api/v1/pki/health` (viewer).
#[utoipa::path(get, path = "/api/v1/pki/health", tag = "dashboard",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Trust store, CRLs, re-validation, caches and policy", body = PkiHealth),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
    ))]
pub async fn pki_health(State(state): State<Arc<AppState>>) -> AppResult<Json<PkiHealth>> {
    let l = loaded(&state)?;
    let authn = l.controller.authenticator();
    let (anchors, intermediates) = crate::metrics::trust_counts(authn);
    let now = pki::time::Time::now().0;
    let policy = &l.revocation_policy;
    let grace = i64::try_from(policy.grace.as_secs()).unwrap_or(i64::MAX);
    let configured = crate::metrics::crl_rows(&l.revocation.configured_crls(), now);
    let points = l.revocation.crl_status();
    let ts = |s: i64| Timestamp::from_second(s).map_err(ApiError::internal);
    let crls = crate::metrics::crl_rows(&authn.crls(), now)
        .into_iter()
        .map(|r| {
            let from_file = configured.iter().any(|c| {
                c.issuer == r.issuer
                    && c.kind == r.kind
                    && c.number == r.number
                    && c.this_update == r.this_update
            });
            let url = if from_file {
                None
            } else {
                points
                    .iter()
                    .find(|p| {
                        p.issuer.as_deref() == Some(r.issuer.as_str())
                            && p.this_update == Some(r.this_update)
                    })
                    .map(|p| p.url.clone())
            };
            Ok(CrlHealth {
                stale: r.next_update.is_some_and(|n| n < now),
                usable: r.this_update <= now
                    && r.next_update.is_none_or(|n| n.saturating_add(grace) >= now),
                this_update: ts(r.this_update)?,
                next_update: r.next_update.map(ts).transpose()?,
                age_s: r.age_s,
                source: if from_file { "file" } else { "download" }.to_string(),
                url,
                issuer: r.issuer,
                kind: r.kind.to_string(),
                number: r.number,
            })
        })
        .collect::<AppResult<Vec<_>>>()?;
    let (certs, keys) = authn.cache_stats();
    Ok(Json(PkiHealth {
        anchors,
        intermediates,
        crls,
        downloads: l.revocation.downloads(),
        distribution_points: points,
        revalidation: l.revocation.report(),
        cache: CachesHealth {
            certificates: cache_health(&certs),
            keys: cache_health(&keys),
        },
        policy: PolicyHealth {
            mode: match policy.mode {
                pki::validate::RevocationMode::Require => "require",
                pki::validate::RevocationMode::BestEffort => "best-effort",
                pki::validate::RevocationMode::Off => "off",
            }
            .to_string(),
            grace_s: policy.grace.as_secs(),
        },
    }))
}

/// The CSV header row.
pub const CSV_HEADER: &str =
    "id,time,kind,door,reader,cardholder,credential,result,code,reason,actor,total_ms\r\n";

/// Appends `field` to `out`, quoted when it holds a comma, a quote or a
/// line break (RFC 4180: quotes doubled inside).
fn csv_field(out: &mut String, field: &str) {
    if field.contains([',', '"', '\r', '\n']) {
        out.push('"');
        out.push_str(&field.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(field);
    }
}

/// One event as a CSV row (with its line end).
pub fn csv_row(out: &mut String, e: &Event) {
    let n = &e.event;
    let int = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    let total_ms = match n.kind {
        EventKind::Tap => {
            let stages = stages_of(e);
            if stages.is_empty() {
                String::new()
            } else {
                let us: u64 = stages.iter().map(|(_, us)| us).sum();
                format!("{:.3}", us as f64 / 1000.0)
            }
        }
        _ => String::new(),
    };
    let fields: [String; 12] = [
        e.id.0.to_string(),
        n.time.to_string(),
        n.kind.as_str().to_string(),
        int(n.door.map(|d| d.0)),
        int(n.reader.map(|r| r.0)),
        int(n.cardholder.map(|c| c.0)),
        int(n.credential.map(|c| c.0)),
        n.result.map(|r| r.as_str().to_string()).unwrap_or_default(),
        n.code.clone().unwrap_or_default(),
        n.reason.clone().unwrap_or_default(),
        n.actor.clone().unwrap_or_default(),
        total_ms,
    ];
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        // Free text (code, reason, actor) may come from a card or a
        // request: a leading `=`, `+`, `-`, `@` would make a spreadsheet
        // evaluate it as a formula, so such a cell starts with `'`.
        if (8..=10).contains(&i) && f.starts_with(['=', '+', '-', '@', '\t', '\r']) {
            csv_field(out, &format!("'{f}"));
        } else {
            csv_field(out, f);
        }
    }
    out.push_str("\r\n");
}

/// Where a CSV export is.
struct CsvState {
    store: Store,
    query: EventQuery,
    /// The page read before the answer started (errors then are answered
    /// with a status); later pages are read as the client takes the body.
    first: Option<store::EventPage>,
    rows: u64,
    done: bool,
}

/// `GET /api/v1/events.csv` (viewer).
#[utoipa::path(get, path = "/api/v1/events.csv", tag = "dashboard",
    security(("bearer" = [])),
    params(
        ("door" = Option<i64>, Query, description = "Only events of this door"),
        ("cardholder" = Option<i64>, Query, description = "Only events of this cardholder"),
        ("result" = Option<super::schema::EventResult>, Query, description = "Only taps with this result"),
        ("kind" = Option<super::schema::EventKind>, Query, description = "Only events of this kind"),
        ("since" = Option<String>, Query, format = DateTime, description = "Events at or after this time (RFC 3339)"),
        ("until" = Option<String>, Query, format = DateTime, description = "Events before this time (RFC 3339)"),
    ),
    responses(
        (status = 200, description = "The events as CSV, oldest first (header `id,time,kind,door,reader,cardholder,credential,result,code,reason,actor,total_ms`; at most 1,000,000 rows), as an attachment", content_type = "text/csv", body = String),
        (status = 400, description = "A query parameter cannot be parsed or is unknown; `field` names it", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
    ))]
pub async fn events_csv(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> AppResult<Response> {
    let query = EventQuery {
        direction: Direction::Forward,
        limit: EventQuery::MAX_LIMIT,
        ..event_filters(&q, &[])?
    };
    let l = loaded(&state)?;
    let store = l.store.clone();
    let first = store
        .query_events(&query)
        .await
        .map_err(ApiError::internal)?;
    let st = CsvState {
        store,
        query,
        first: Some(first),
        rows: 0,
        done: false,
    };
    let body = stream::unfold(st, |mut st| async move {
        if st.done {
            return None;
        }
        let mut out = String::new();
        let page = match st.first.take() {
            Some(p) => {
                out.push_str(CSV_HEADER);
                p
            }
            None => match st.store.query_events(&st.query).await {
                Ok(p) => p,
                Err(e) => {
                    // The status is sent: the body is cut short, which the
                    // client sees as an incomplete download.
                    tracing::error!(error = %e, rows = st.rows, "CSV export failed");
                    st.done = true;
                    return Some((Err(std::io::Error::other(e.to_string())), st));
                }
            },
        };
        for e in &page.events {
            if st.rows >= CSV_MAX_ROWS {
                break;
            }
            csv_row(&mut out, e);
            st.rows += 1;
        }
        match page.next {
            Some(next) if st.rows < CSV_MAX_ROWS => st.query.cursor = Some(next),
            _ => st.done = true,
        }
        Some((Ok::<_, std::io::Error>(Bytes::from(out)), st))
    });
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"pivgate-events.csv\"",
            ),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

/// The decoded fields of a FASC-N.
#[derive(Debug, Serialize, ToSchema)]
pub struct FascnFields {
    pub agency_code: String,
    pub system_code: String,
    pub credential_number: String,
    /// Credential series.
    pub cs: String,
    /// Individual credential issue.
    pub ici: String,
    /// Person identifier.
    pub pi: String,
    /// Organisational category.
    pub oc: String,
    /// Organisational identifier.
    pub oi: String,
    /// Person/organisation association category.
    pub poa: String,
}

/// A stored credential with what the dashboard shows of it.
#[derive(Debug, Serialize, ToSchema)]
pub struct CredentialView {
    /// The stored credential (the fields of `Credential`).
    #[serde(flatten)]
    #[schema(value_type = super::schema::Credential)]
    pub credential: access::Credential,
    /// The FASC-N decoded; `null` without one (or when it cannot be
    /// decoded: `fasc_n_error` says why).
    pub fasc_n_fields: Option<FascnFields>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fasc_n_error: Option<String>,
    /// The strongest mechanism the credential can be matched by:
    /// `pki-cak` when enrolled with its card authentication certificate,
    /// else `chuid` (identifiers only).
    pub assurance: String,
    /// That mechanism's assurance: `some` or `low`.
    pub assurance_level: String,
    /// Its `expires_at` (the certificate's notAfter) has passed.
    pub expired: bool,
}

/// A cardholder's credentials.
#[derive(Debug, Serialize, ToSchema)]
pub struct CredentialViewList {
    pub items: Vec<CredentialView>,
}

/// `GET /api/v1/cardholders/{id}/credentials` (viewer).
#[utoipa::path(get, path = "/api/v1/cardholders/{id}/credentials", tag = "dashboard",
    security(("bearer" = [])),
    params(("id" = i64, Path, description = "The cardholder")),
    responses(
        (status = 200, description = "The cardholder's credentials, FASC-N decoded", body = CredentialViewList),
        (status = 400, description = "The id is not a number", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 404, description = "No such cardholder", body = ErrorBody),
    ))]
pub async fn cardholder_credentials(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> AppResult<Json<CredentialViewList>> {
    let holder = id.parse::<i64>().map(CardholderId).map_err(|e| {
        ApiError::field(
            StatusCode::BAD_REQUEST,
            "id",
            format!("path parameter `id`: `{id}` is not a cardholder id: {e}"),
        )
    })?;
    let l = loaded(&state)?;
    let snapshot = l.controller.snapshot();
    if snapshot.cardholder(holder).is_none() {
        return Err(ApiError::field(
            StatusCode::NOT_FOUND,
            "id",
            format!("cardholder {} does not exist", holder.0),
        ));
    }
    let now = Timestamp::now();
    let mut items: Vec<CredentialView> = snapshot
        .credentials()
        .iter()
        .filter(|c| c.cardholder == holder)
        .map(|c| credential_view(c.clone(), now))
        .collect();
    items.sort_by_key(|v| v.credential.id);
    Ok(Json(CredentialViewList { items }))
}

fn credential_view(c: access::Credential, now: Timestamp) -> CredentialView {
    let (fasc_n_fields, fasc_n_error) = match c.fasc_n.map(|f| piv::fascn::Fascn::decode(&f.0)) {
        None => (None, None),
        Some(Ok(f)) => (
            Some(FascnFields {
                agency_code: f.agency_code,
                system_code: f.system_code,
                credential_number: f.credential_number,
                cs: f.credential_series,
                ici: f.individual_credential_issue,
                pi: f.person_identifier,
                oc: f.organizational_category,
                oi: f.organizational_identifier,
                poa: f.association_category,
            }),
            None,
        ),
        Some(Err(e)) => (None, Some(e.to_string())),
    };
    let mechanism = if c.cert_sha256.is_some() || c.spki_sha256.is_some() {
        access::Mechanism::PkiCak
    } else {
        access::Mechanism::Chuid
    };
    CredentialView {
        fasc_n_fields,
        fasc_n_error,
        assurance: mechanism.as_str().to_string(),
        assurance_level: mechanism.assurance().as_str().to_string(),
        expired: c.expires_at.is_some_and(|t| t <= now),
        credential: c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::EventId;

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[7000], 0.95), Some(7.0));
        let v: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(percentile(&v, 0.50), Some(50.0));
        assert_eq!(percentile(&v, 0.95), Some(95.0));
        let mut w = vec![3000, 1000, 2000];
        assert_eq!(
            percentiles(&mut w),
            Percentiles {
                p50_ms: Some(2.0),
                p95_ms: Some(3.0)
            }
        );
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        let mut s = String::new();
        csv_field(&mut s, "plain");
        s.push('|');
        csv_field(&mut s, "a, b");
        s.push('|');
        csv_field(&mut s, "say \"hi\"");
        s.push('|');
        csv_field(&mut s, "two\nlines");
        assert_eq!(s, "plain|\"a, b\"|\"say \"\"hi\"\"\"|\"two\nlines\"");
    }

    #[test]
    fn free_text_cells_never_start_a_formula() {
        let mut e: Event = serde_json::from_value(serde_json::json!({
            "id": 7, "time": "2026-11-23T10:00:00Z", "kind": "admin",
            "door": null, "reader": null, "cardholder": null, "credential": null,
            "result": null, "code": "x.y", "reason": "=HYPERLINK(\"http://x\")",
            "actor": "@admin", "data": null
        }))
        .unwrap();
        let mut s = String::new();
        csv_row(&mut s, &e);
        assert!(
            s.contains(",\"'=HYPERLINK(\"\"http://x\"\")\",'@admin,"),
            "{s}"
        );
        e.event.reason = Some("-1".into());
        let mut s = String::new();
        csv_row(&mut s, &e);
        assert!(s.contains(",'-1,"), "{s}");
    }

    #[test]
    fn csv_row_of_a_tap() {
        let e = Event {
            id: EventId(12),
            event: store::NewEvent {
                time: "2026-11-23T08:00:00Z".parse().unwrap(),
                kind: EventKind::Tap,
                door: Some(DoorId(1)),
                reader: Some(access::ReaderId(2)),
                cardholder: None,
                credential: None,
                result: Some(store::EventResult::Refused),
                code: Some("not-enrolled".into()),
                reason: Some("not enrolled, \"unknown\"".into()),
                actor: None,
                data: Some(serde_json::json!({"stages": [
                    {"name": "select", "wall_us": 1500, "apdus": 1},
                    {"name": "decide", "wall_us": 250}
                ]})),
            },
        };
        let mut s = String::new();
        csv_row(&mut s, &e);
        assert_eq!(
            s,
            "12,2026-11-23T08:00:00Z,tap,1,2,,,refused,not-enrolled,\"not enrolled, \"\"unknown\"\"\",,1.750\r\n"
        );
    }

    /// At most `cap` taps are read, the newest; `truncated` says when more
    /// were in the window. Other doors, other kinds and taps outside the
    /// window are not read.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn taps_read_are_capped_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = store::Store::open_data_dir(dir.path()).await.unwrap();
        let t0: Timestamp = "2026-11-23T08:00:00Z".parse().unwrap();
        let at = |s: i64| Timestamp::from_second(t0.as_second() + s).unwrap();
        let tap = |s: i64, door: i64| store::NewEvent {
            time: at(s),
            kind: EventKind::Tap,
            door: Some(DoorId(door)),
            reader: None,
            cardholder: None,
            credential: None,
            result: Some(store::EventResult::Refused),
            code: Some("not-enrolled".into()),
            reason: None,
            actor: None,
            data: None,
        };
        let mut events: Vec<_> = (0..25).map(|i| tap(i, 1)).collect();
        events.push(tap(3, 2));
        events.push(tap(-10, 1));
        events.push(tap(100, 1));
        events.push(store::NewEvent::door_command(
            at(5),
            "ops",
            DoorId(1),
            "unlock",
            "x".into(),
        ));
        store.append_events(&events).await.unwrap();
        let read = |cap| read_taps(&store, DoorId(1), at(0), at(25), cap);
        let (got, truncated) = read(10).await.unwrap();
        assert!(truncated);
        let times: Vec<i64> = got
            .iter()
            .map(|e| e.time.as_second() - t0.as_second())
            .collect();
        assert_eq!(times, (15..25).rev().collect::<Vec<_>>());
        for cap in [25, 30, 50_000] {
            let (got, truncated) = read(cap).await.unwrap();
            assert!(!truncated, "cap {cap}");
            assert_eq!(got.len(), 25, "cap {cap}");
        }
        store.close().await;
    }
}
