//! The event log: `GET /api/v1/events` (filters and cursor paging) and
//! `GET /api/v1/events.csv` (the same filters, oldest first, at most
//! [`CSV_MAX_ROWS`] rows), both viewer. The export is one statement read
//! as a stream ([`store::Store::send_events`]): rows are written as the
//! database returns them, in constant memory, and only each tap's stage
//! table is parsed out of its stored transaction. The live
//! stream of the same events is [`super::live`].

use std::sync::Arc;

use access::jiff::Timestamp;
use access::{CardholderId, DoorId};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures_util::stream;
use store::{Direction, Event, EventId, EventKind, EventQuery, EventResult, EventText};

use super::auth::Viewer;
use super::error::{ApiError, AppResult};
use super::extract::{loaded, FromQuery, QueryParams};
use super::schema::{self, ErrorBody};
use crate::state::AppState;
use crate::stats;

/// The most rows one CSV export writes.
pub const CSV_MAX_ROWS: u64 = 1_000_000;

/// The filters of the event routes (`/api/v1/events` and its CSV export).
pub const EVENT_FILTERS: [&str; 7] = [
    "door",
    "cardholder",
    "result",
    "kind",
    "site",
    "since",
    "until",
];

/// The filters of the event routes; `None` matches anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilters {
    pub door: Option<DoorId>,
    pub cardholder: Option<CardholderId>,
    pub result: Option<EventResult>,
    pub kind: Option<EventKind>,
    /// At a central: the site that uploaded the event (its name).
    pub site: Option<String>,
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
}

impl EventFilters {
    /// The filters of `q`, refusing a parameter that is neither a filter
    /// nor one of `extra` (which the caller reads), naming the known ones.
    pub fn read(q: &QueryParams, extra: &[&str]) -> AppResult<Self> {
        let known: Vec<&str> = EVENT_FILTERS.iter().chain(extra).copied().collect();
        q.only(&known)?;
        Ok(EventFilters {
            door: q.get::<i64>("door", "a door id")?.map(DoorId),
            cardholder: q
                .get::<i64>("cardholder", "a cardholder id")?
                .map(CardholderId),
            result: q.get("result", "an event result")?,
            kind: q.get("kind", "an event kind")?,
            site: site_filter(q)?,
            since: q.get("since", "an RFC 3339 time")?,
            until: q.get("until", "an RFC 3339 time")?,
        })
    }

    /// An [`EventQuery`] with these filters and nothing else set.
    pub fn query(self) -> EventQuery {
        EventQuery {
            door: self.door,
            cardholder: self.cardholder,
            result: self.result,
            kind: self.kind,
            site: self.site,
            since: self.since,
            until: self.until,
            ..EventQuery::default()
        }
    }
}

/// The `site` filter: a site name as sites are named (1 to 255
/// characters).
fn site_filter(q: &QueryParams) -> AppResult<Option<String>> {
    match q.raw("site") {
        None => Ok(None),
        Some(s) if s.is_empty() || s.len() > 255 => Err(ApiError::unprocessable(
            "site",
            "query parameter `site`: a site name, 1 to 255 characters",
        )),
        Some(s) => Ok(Some(s.to_string())),
    }
}

/// The query of `GET /api/v1/events.csv`: the filters only.
impl FromQuery for EventFilters {
    fn from_query(q: &QueryParams) -> AppResult<Self> {
        EventFilters::read(q, &[])
    }
}

/// The query of `GET /api/v1/events`: the filters and paging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsQuery {
    pub filters: EventFilters,
    /// The `next` of the previous page.
    pub cursor: Option<EventId>,
    /// `forward` (the default) or `backward`.
    pub direction: Direction,
    /// Events per page, at most [`EventQuery::MAX_LIMIT`]; 0: the store's
    /// default.
    pub limit: u32,
}

impl FromQuery for EventsQuery {
    fn from_query(q: &QueryParams) -> AppResult<Self> {
        let filters = EventFilters::read(q, &["cursor", "direction", "limit"])?;
        let direction = match q.raw("direction") {
            None | Some("forward") => Direction::Forward,
            Some("backward") => Direction::Backward,
            Some(v) => {
                return Err(ApiError::bad_request(
                    "direction",
                    format!("query parameter `direction`: `{v}` is not `forward` or `backward`"),
                ))
            }
        };
        let limit: u32 = q.get("limit", "a count")?.unwrap_or(0);
        if limit > EventQuery::MAX_LIMIT {
            return Err(ApiError::unprocessable(
                "limit",
                format!(
                    "query parameter `limit`: at most {} events per page",
                    EventQuery::MAX_LIMIT
                ),
            ));
        }
        Ok(EventsQuery {
            filters,
            cursor: q.get::<i64>("cursor", "an event id")?.map(EventId),
            direction,
            limit,
        })
    }
}

impl EventsQuery {
    /// The store query.
    pub fn query(self) -> EventQuery {
        EventQuery {
            cursor: self.cursor,
            direction: self.direction,
            limit: self.limit,
            ..self.filters.query()
        }
    }
}

/// `GET /api/v1/events`: filters `door`, `cardholder`, `result`, `kind`,
/// `site` (a central: the site that uploaded the event), `since`, `until`
/// (RFC 3339); paging `cursor` (the `next` of the previous
/// page), `direction` (`forward` or `backward`), `limit` (1..=1000).
#[utoipa::path(get, path = "/api/v1/events", tag = "events",
    security(("bearer" = [])),
    params(
        ("door" = Option<i64>, Query, description = "Only events of this door"),
        ("cardholder" = Option<i64>, Query, description = "Only events of this cardholder"),
        ("result" = Option<schema::EventResult>, Query, description = "Only taps with this result"),
        ("kind" = Option<schema::EventKind>, Query, description = "Only events of this kind"),
        ("site" = Option<String>, Query, description = "At a central: only the events uploaded by the site of this name"),
        ("since" = Option<String>, Query, format = DateTime, description = "Events at or after this time (RFC 3339)"),
        ("until" = Option<String>, Query, format = DateTime, description = "Events before this time (RFC 3339)"),
        ("cursor" = Option<i64>, Query, description = "The `next` of the previous page"),
        ("direction" = Option<String>, Query, description = "`forward` (oldest first, the default) or `backward`"),
        ("limit" = Option<u32>, Query, description = "Events per page, 1 to 1000 (default 100)"),
    ),
    responses(
        (status = 200, description = "One page of events", body = schema::EventPage),
        (status = 400, description = "A query parameter cannot be parsed or is unknown; `field` names it", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 422, description = "A query parameter is out of range; `field` names it", body = ErrorBody),
    ))]
pub async fn events(
    State(state): State<Arc<AppState>>,
    _: Viewer,
    q: QueryParams,
) -> AppResult<Json<store::EventPage>> {
    let query = EventsQuery::from_query(&q)?.query();
    let l = loaded(&state)?;
    let page = l
        .store
        .query_events(&query)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(page))
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
    let stages = match e.event.kind {
        EventKind::Tap => stats::stages_of(e),
        _ => Vec::new(),
    };
    csv_fields(out, e, &stages);
}

/// [`csv_row`] for an event read with its `data` as text: only the stage
/// table is parsed out of it.
pub fn csv_row_text(out: &mut String, e: &EventText) {
    let stages = match (e.event.event.kind, &e.data) {
        (EventKind::Tap, Some(data)) => stats::stages_of_json(data),
        _ => Vec::new(),
    };
    csv_fields(out, &e.event, &stages);
}

fn csv_fields(out: &mut String, e: &Event, stages: &[(auth::StageName, u64)]) {
    let n = &e.event;
    let int = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    let total_ms = if stages.is_empty() {
        String::new()
    } else {
        let us: u64 = stages.iter().map(|(_, us)| us).sum();
        format!("{:.3}", us as f64 / 1000.0)
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

/// Rows queued between the database read and the answer's body: the
/// read waits when the client does (constant memory).
const CSV_QUEUE: usize = 2_048;
/// The most rows one body chunk carries.
const CSV_CHUNK_ROWS: usize = 512;

/// `GET /api/v1/events.csv` (viewer).
#[utoipa::path(get, path = "/api/v1/events.csv", tag = "dashboard",
    security(("bearer" = [])),
    params(
        ("door" = Option<i64>, Query, description = "Only events of this door"),
        ("cardholder" = Option<i64>, Query, description = "Only events of this cardholder"),
        ("result" = Option<schema::EventResult>, Query, description = "Only taps with this result"),
        ("kind" = Option<schema::EventKind>, Query, description = "Only events of this kind"),
        ("site" = Option<String>, Query, description = "At a central: only the events uploaded by the site of this name"),
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
    _: Viewer,
    q: QueryParams,
) -> AppResult<Response> {
    let query = EventQuery {
        direction: Direction::Forward,
        ..EventFilters::from_query(&q)?.query()
    };
    let l = loaded(&state)?;
    let store = l.store.clone();
    // One statement, streamed: rows are written as the database returns
    // them, the read waiting on the client through a bounded queue.
    let (tx, mut rx) = tokio::sync::mpsc::channel(CSV_QUEUE);
    tokio::spawn(async move { store.send_events(&query, CSV_MAX_ROWS, tx).await });
    // The first row (or the end) before the answer starts: a failure then
    // is answered with a status.
    let first = match rx.recv().await {
        Some(Err(e)) => return Err(ApiError::internal(e)),
        first => first,
    };
    let mut pending: Vec<Result<store::EventText, store::StoreError>> = first.into_iter().collect();
    let mut ended = pending.is_empty();
    let mut header = true;
    let mut rows = 0u64;
    let body = stream::poll_fn(move |cx| {
        use std::task::Poll;
        let mut out = String::new();
        if std::mem::take(&mut header) {
            out.push_str(CSV_HEADER);
        }
        if !ended && pending.is_empty() {
            match rx.poll_recv_many(cx, &mut pending, CSV_CHUNK_ROWS) {
                Poll::Pending if out.is_empty() => return Poll::Pending,
                Poll::Pending => {}
                Poll::Ready(0) => ended = true,
                Poll::Ready(_) => {}
            }
        }
        for item in pending.drain(..) {
            match item {
                Ok(e) => {
                    csv_row_text(&mut out, &e);
                    rows += 1;
                }
                Err(e) => {
                    // The status is sent: the body is cut short, which the
                    // client sees as an incomplete download.
                    tracing::error!(error = %e, rows, "CSV export failed");
                    return Poll::Ready(Some(Err(std::io::Error::other(e.to_string()))));
                }
            }
        }
        if out.is_empty() {
            return Poll::Ready(None);
        }
        Poll::Ready(Some(Ok::<_, std::io::Error>(Bytes::from(out))))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_read_as_requests_carry_them() {
        let q =
            QueryParams::from_query_string("door=3&kind=tap&limit=10&direction=backward").unwrap();
        let e = EventsQuery::from_query(&q).unwrap();
        assert_eq!(e.filters.door, Some(DoorId(3)));
        assert_eq!(e.limit, 10);
        assert_eq!(e.direction, Direction::Backward);
        let q = QueryParams::from_query_string("limit=5000").unwrap();
        assert!(matches!(
            EventsQuery::from_query(&q),
            Err(ApiError::Unprocessable { .. })
        ));
        let q = QueryParams::from_query_string("colour=red").unwrap();
        assert!(matches!(
            EventFilters::from_query(&q),
            Err(ApiError::BadRequest { .. })
        ));
        // No request carries a space in its target.
        assert!(QueryParams::from_query_string("door=1 2").is_none());
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
                passback: false,
            },
        };
        let mut s = String::new();
        csv_row(&mut s, &e);
        assert_eq!(
            s,
            "12,2026-11-23T08:00:00Z,tap,1,2,,,refused,not-enrolled,\"not enrolled, \"\"unknown\"\"\",,1.750\r\n"
        );
    }
}
