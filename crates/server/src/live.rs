//! The live event stream: `GET /api/v1/events/stream` (viewer), Server-Sent
//! Events.
//!
//! Each committed event (taps, admin changes, door commands) is one SSE
//! event: `id:` the event id, `data:` the stored [`store::Event`] as
//! JSON (the same object `GET /api/v1/events` lists). Events are taken from
//! the group-commit writer after their transaction is durable
//! ([`EventLog::subscribe`]), never read back from the database: every
//! event must therefore be appended through the controller's
//! [`EventLog`], not written to the store directly.
//!
//! - **Resuming.** A client that sends `Last-Event-ID: N` (browsers do on
//!   reconnect) or `?since=N` first gets every event after `N` from the
//!   store, then continues live, without a gap or a duplicate (the header
//!   wins when both are given). Without either, the stream starts with the
//!   next event committed; so does an id beyond the newest event (it came
//!   from another database).
//! - **Filters.** `door`, `cardholder`, `kind` (`tap`, `admin`,
//!   `door-command`, `reader`) and `result` (`granted`, `refused`), as for
//!   `/api/v1/events`.
//! - **Slow clients.** A client that falls more than the live buffer behind
//!   never slows the writer: its stream notices, reads what it missed from
//!   the store, and continues. If that read fails, it is told with an
//!   `event: lagged` whose data is `{"from": first id, "to": last id,
//!   "error": sentence}`: events in that range may be missing (fetch them
//!   from `/api/v1/events`).
//! - A comment (`: keep-alive`) every 15 s keeps proxies from closing an
//!   idle stream; streams end when the service shuts down.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use access::{CardholderId, DoorId};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures_util::stream::{self, Stream, StreamExt};
use store::{
    ApiToken, Direction, Event, EventId, EventKind, EventLog, EventQuery, EventResult, NewEvent,
    Store, StoreError,
};
use tokio::sync::broadcast::{self, error::RecvError};

use crate::http::ApiError;
use crate::service::AppState;

/// How often an idle stream sends a keep-alive comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Events read from the store per query while catching up.
const REPLAY_PAGE: u32 = EventQuery::MAX_LIMIT;

/// Which events a stream carries; `None` matches anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filter {
    pub door: Option<DoorId>,
    pub cardholder: Option<CardholderId>,
    pub kind: Option<EventKind>,
    pub result: Option<EventResult>,
}

impl Filter {
    pub fn matches(&self, e: &NewEvent) -> bool {
        self.door.is_none_or(|d| e.door == Some(d))
            && self.cardholder.is_none_or(|c| e.cardholder == Some(c))
            && self.kind.is_none_or(|k| e.kind == k)
            && self.result.is_none_or(|r| e.result == Some(r))
    }

    /// The store query for the events after `after`.
    fn after(&self, after: EventId) -> EventQuery {
        EventQuery {
            door: self.door,
            cardholder: self.cardholder,
            result: self.result,
            kind: self.kind,
            cursor: Some(after),
            direction: Direction::Forward,
            limit: REPLAY_PAGE,
            ..EventQuery::default()
        }
    }
}

/// One thing a stream delivers.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Event(Arc<Event>),
    /// Events with ids in `from..=to` may be missing: the stream fell
    /// behind and could not read them from the store.
    Lagged {
        from: EventId,
        to: EventId,
        error: String,
    },
}

/// The state of one follower between items.
struct Follower {
    store: Store,
    live: broadcast::Receiver<Arc<Event>>,
    filter: Filter,
    /// Every matching event up to this id has been delivered (or queued).
    position: EventId,
    /// Read the store after `position` before taking live events again.
    replay: bool,
    queued: VecDeque<Item>,
    /// A failed catch-up: events after this id may be missing; reported
    /// with the next live event, which bounds the range.
    gap: Option<(EventId, String)>,
}

impl Follower {
    async fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.queued.pop_front() {
                return Some(item);
            }
            if self.replay {
                match self
                    .store
                    .query_events(&self.filter.after(self.position))
                    .await
                {
                    Ok(page) => {
                        self.replay = page.next.is_some();
                        // What was lost is now read.
                        self.gap = None;
                        if let Some(last) = page.events.last() {
                            self.position = last.id;
                        }
                        self.queued
                            .extend(page.events.into_iter().map(|e| Item::Event(Arc::new(e))));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, after = self.position.0, "event stream could not catch up from the store");
                        self.replay = false;
                        self.gap = Some((self.position, e.to_string()));
                    }
                }
                continue;
            }
            match self.live.recv().await {
                Ok(e) => {
                    if e.id <= self.position {
                        // Already read from the store.
                        continue;
                    }
                    if let Some((after, error)) = self.gap.take() {
                        if e.id.0 > after.0 + 1 {
                            self.queued.push_back(Item::Lagged {
                                from: EventId(after.0 + 1),
                                to: EventId(e.id.0 - 1),
                                error,
                            });
                        }
                    }
                    self.position = e.id;
                    if self.filter.matches(&e.event) {
                        self.queued.push_back(Item::Event(e));
                    }
                }
                // Fell behind the live buffer: the store has what was missed.
                Err(RecvError::Lagged(_)) => self.replay = true,
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

/// Follows `log`: the events matching `filter` committed after `since`
/// (read from `store` first, then live), or from now on when `since` is
/// `None`. Ends when the event log stops.
pub async fn follow(
    store: Store,
    log: &EventLog,
    filter: Filter,
    since: Option<EventId>,
) -> Result<impl Stream<Item = Item> + Send + 'static, StoreError> {
    // Subscribe before looking at the store: whatever commits in between is
    // in both, and the ids tell which to skip.
    let live = log.subscribe();
    let newest = store
        .query_events(&EventQuery {
            direction: Direction::Backward,
            limit: 1,
            ..EventQuery::default()
        })
        .await?
        .events
        .first()
        .map_or(EventId(0), |e| e.id);
    // An id beyond the newest comes from another database: start from now.
    let (position, replay) = match since {
        Some(s) if s < newest => (s, true),
        _ => (newest, false),
    };
    let follower = Follower {
        store,
        live,
        filter,
        position,
        replay,
        queued: VecDeque::new(),
        gap: None,
    };
    Ok(stream::unfold(follower, |mut f| async move {
        let item = f.next().await?;
        Some((item, f))
    }))
}

fn sse(item: Item) -> Result<SseEvent, axum::Error> {
    match item {
        Item::Event(e) => SseEvent::default().id(e.id.to_string()).json_data(&*e),
        Item::Lagged { from, to, error } => SseEvent::default()
            .event("lagged")
            .json_data(serde_json::json!({ "from": from, "to": to, "error": error })),
    }
}

const PARAMS: [&str; 5] = ["door", "cardholder", "kind", "result", "since"];

fn bad(status: StatusCode, field: &str, message: String) -> ApiError {
    ApiError {
        status,
        message,
        field: Some(field.to_string()),
    }
}

fn parse<T: std::str::FromStr>(
    q: &HashMap<String, String>,
    name: &str,
    what: &str,
) -> Result<Option<T>, ApiError>
where
    T::Err: std::fmt::Display,
{
    q.get(name)
        .map(|v| {
            v.parse().map_err(|e| {
                bad(
                    StatusCode::BAD_REQUEST,
                    name,
                    format!("query parameter `{name}`: `{v}` is not {what}: {e}"),
                )
            })
        })
        .transpose()
}

fn event_id(field: &str, v: i64) -> Result<EventId, ApiError> {
    if v < 0 {
        return Err(bad(
            StatusCode::UNPROCESSABLE_ENTITY,
            field,
            format!("`{field}`: event ids are not negative (got {v})"),
        ));
    }
    Ok(EventId(v))
}

/// Where to resume: the `Last-Event-ID` header, else `?since=`.
fn resume_from(
    headers: &HeaderMap,
    q: &HashMap<String, String>,
) -> Result<Option<EventId>, ApiError> {
    const HEADER: &str = "Last-Event-ID";
    let header = headers
        .get(HEADER)
        .map(|v| v.to_str().unwrap_or("").trim())
        // An empty value means "no last event".
        .filter(|t| !t.is_empty());
    if let Some(text) = header {
        let id = text.parse::<i64>().map_err(|e| {
            bad(
                StatusCode::BAD_REQUEST,
                HEADER,
                format!("header `{HEADER}`: `{text}` is not an event id: {e}"),
            )
        })?;
        return event_id(HEADER, id).map(Some);
    }
    parse::<i64>(q, "since", "an event id")?
        .map(|v| event_id("since", v))
        .transpose()
}

/// How often an open stream checks that its token still exists, besides
/// at once when a token is deleted through the API (a token deleted
/// directly in the database is noticed here).
const TOKEN_CHECK: Duration = Duration::from_secs(60);

/// Resolves once `token` no longer exists: the stream it opened ends, as
/// every other request with it is refused from then on.
async fn token_revoked(
    store: Store,
    token: ApiToken,
    mut deletions: tokio::sync::watch::Receiver<u64>,
) {
    loop {
        tokio::select! {
            changed = deletions.changed() => {
                if changed.is_err() {
                    // The service is going away; `stopping` ends the stream.
                    std::future::pending::<()>().await;
                }
            }
            _ = tokio::time::sleep(TOKEN_CHECK) => {}
        }
        if let Ok(None) = store.token_by_hash(&token.token_hash).await {
            tracing::info!(token = %token.name, "token deleted: its event stream ends");
            return;
        }
    }
}

/// `GET /api/v1/events/stream` (viewer).
#[utoipa::path(get, path = "/api/v1/events/stream", tag = "events",
    security(("bearer" = [])),
    params(
        ("Last-Event-ID" = Option<i64>, Header, description = "Resume after this event (what an EventSource sends on reconnecting)"),
        ("since" = Option<i64>, Query, description = "Resume after this event id (the header wins)"),
        ("door" = Option<i64>, Query, description = "Only events of this door"),
        ("cardholder" = Option<i64>, Query, description = "Only events of this cardholder"),
        ("result" = Option<crate::http::schema::EventResult>, Query, description = "Only taps with this result"),
        ("kind" = Option<crate::http::schema::EventKind>, Query, description = "Only events of this kind"),
    ),
    responses(
        (status = 200, description = "`text/event-stream`: one SSE event per committed event (`id:` the event id, `data:` the event as JSON); `event: lagged` with `{from, to, error}` when missed events could not be re-read", content_type = "text/event-stream", body = String),
        (status = 400, description = "A parameter cannot be parsed or is unknown; `field` names it", body = crate::http::schema::ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = crate::http::schema::ErrorBody),
        (status = 422, description = "A negative event id; `field` names it", body = crate::http::schema::ErrorBody),
        (status = 429, description = "The most event streams this service serves are open", body = crate::http::schema::ErrorBody),
    ))]
pub async fn stream(
    State(state): State<Arc<AppState>>,
    Extension(token): Extension<ApiToken>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    if let Some(k) = q.keys().find(|k| !PARAMS.contains(&k.as_str())) {
        return Err(bad(
            StatusCode::BAD_REQUEST,
            k,
            format!(
                "unknown query parameter `{k}` (known: {})",
                PARAMS.join(", ")
            ),
        ));
    }
    let filter = Filter {
        door: parse::<i64>(&q, "door", "a door id")?.map(DoorId),
        cardholder: parse::<i64>(&q, "cardholder", "a cardholder id")?.map(CardholderId),
        kind: parse(&q, "kind", "an event kind")?,
        result: parse(&q, "result", "an event result")?,
    };
    let since = resume_from(&headers, &q)?;
    let Some(l) = state.loaded() else {
        return Err(ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "the service is starting".into(),
            field: None,
        });
    };
    let permit = state.stream_permit().map_err(|max| ApiError {
        status: StatusCode::TOO_MANY_REQUESTS,
        message: format!(
            "{max} event streams are open, the most this service serves (`http.max_streams`); close one or try again later"
        ),
        field: None,
    })?;
    let items = follow(l.store.clone(), l.controller.log(), filter, since)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "event stream could not start");
            ApiError {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: format!("the event log cannot be read: {e}"),
                field: None,
            }
        })?;
    let mut stopping = state.stopping();
    let revoked = token_revoked(l.store.clone(), token, state.token_deletions());
    let events = items.map(sse).take_until(async move {
        tokio::select! {
            _ = stopping.wait_for(|s| *s) => {}
            _ = revoked => {}
        }
        // The place is given back when the stream ends.
        drop(permit);
    });
    let mut r = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response();
    // Proxies that buffer responses would hold events back.
    r.headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(r)
}
