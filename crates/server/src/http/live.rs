//! The live event stream: `GET /api/v1/events/stream` (viewer), Server-Sent
//! Events over [`crate::live::follow`].
//!
//! Each committed event (taps, admin changes, door commands) is one SSE
//! event: `id:` the event id, `data:` the stored [`store::Event`] as
//! JSON (the same object `GET /api/v1/events` lists). Events are taken from
//! the group-commit writer after their transaction is durable
//! ([`store::EventLog::subscribe`]), never read back from the database: every
//! event must therefore be appended through the controller's
//! [`store::EventLog`], not written to the store directly.
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
//!   idle stream.
//! - **End.** A stream lives no longer than the token that opened it: it
//!   ends when the token expires (a timer set at its `expires_at`, not a
//!   check per event), when it is deleted (at once through the API; a
//!   token deleted directly in the database within a minute), or when the
//!   service shuts down. Its last event then says why: `event: end` with
//!   `{"reason": "token-expired" | "token-deleted" | "shutdown",
//!   "message": sentence}`; reconnecting with an expired or deleted token
//!   is refused with 401.

use std::sync::Arc;
use std::time::Duration;

use access::jiff::Timestamp;
use access::{CardholderId, DoorId};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::StreamExt;
use store::{ApiToken, EventId, Store};

use super::auth::Viewer;
use super::error::{ApiError, AppResult};
use super::extract::{loaded, FromQuery, QueryParams};
use super::schema;
use crate::live::{follow, Filter, Item};
use crate::state::{AppState, StreamRefusal};

/// How often an idle stream sends a keep-alive comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

fn sse(item: Item) -> Result<SseEvent, axum::Error> {
    match item {
        Item::Event(e) => SseEvent::default().id(e.id.to_string()).json_data(&*e),
        Item::Lagged { from, to, error } => SseEvent::default()
            .event("lagged")
            .json_data(serde_json::json!({ "from": from, "to": to, "error": error })),
    }
}

const PARAMS: [&str; 5] = ["door", "cardholder", "kind", "result", "since"];

/// The query of `GET /api/v1/events/stream`: which events it carries
/// (`door`, `cardholder`, `kind`, `result`); `since` is read only without a
/// `Last-Event-ID` header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamQuery {
    pub filter: Filter,
}

impl FromQuery for StreamQuery {
    fn from_query(q: &QueryParams) -> AppResult<Self> {
        q.only(&PARAMS)?;
        Ok(StreamQuery {
            filter: Filter {
                door: q.get::<i64>("door", "a door id")?.map(DoorId),
                cardholder: q
                    .get::<i64>("cardholder", "a cardholder id")?
                    .map(CardholderId),
                kind: q.get("kind", "an event kind")?,
                result: q.get("result", "an event result")?,
            },
        })
    }
}

fn event_id(field: &str, v: i64) -> AppResult<EventId> {
    if v < 0 {
        return Err(ApiError::unprocessable(
            field,
            format!("`{field}`: event ids are not negative (got {v})"),
        ));
    }
    Ok(EventId(v))
}

/// Where to resume: the `Last-Event-ID` header, else `?since=`.
fn resume_from(headers: &HeaderMap, q: &QueryParams) -> AppResult<Option<EventId>> {
    const HEADER: &str = "Last-Event-ID";
    let header = headers
        .get(HEADER)
        .map(|v| v.to_str().unwrap_or("").trim())
        // An empty value means "no last event".
        .filter(|t| !t.is_empty());
    if let Some(text) = header {
        let id = text.parse::<i64>().map_err(|e| {
            ApiError::bad_request(
                HEADER,
                format!("header `{HEADER}`: `{text}` is not an event id: {e}"),
            )
        })?;
        return event_id(HEADER, id).map(Some);
    }
    q.get::<i64>("since", "an event id")?
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

/// Why a stream ended, told in its last event.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    Expired { token: String, at: Timestamp },
    Deleted { token: String },
    Shutdown,
}

impl End {
    fn code(&self) -> &'static str {
        match self {
            End::Expired { .. } => "token-expired",
            End::Deleted { .. } => "token-deleted",
            End::Shutdown => "shutdown",
        }
    }

    fn event(&self) -> Result<SseEvent, axum::Error> {
        let message = match self {
            End::Expired { token, at } => {
                format!("token `{token}` expired at {at}: open the stream again with a valid token")
            }
            End::Deleted { token } => {
                format!("token `{token}` was deleted: open the stream again with another token")
            }
            End::Shutdown => "the service is shutting down".to_string(),
        };
        SseEvent::default()
            .event("end")
            .json_data(serde_json::json!({ "reason": self.code(), "message": message }))
    }
}

/// Resolves when the token expiring at `at` expires; never without one.
async fn expiry(at: Option<Timestamp>) {
    let Some(at) = at else {
        return std::future::pending().await;
    };
    // Asked again after each sleep: the timer caps long sleeps (about two
    // years), and the wall clock may have been set meanwhile.
    loop {
        // A negative span (expired already) is not a duration.
        let Ok(left) = Duration::try_from(at.duration_since(Timestamp::now())) else {
            return;
        };
        if left.is_zero() {
            return;
        }
        tokio::time::sleep(left).await;
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
        ("result" = Option<schema::EventResult>, Query, description = "Only taps with this result"),
        ("kind" = Option<schema::EventKind>, Query, description = "Only events of this kind"),
    ),
    responses(
        (status = 200, description = "`text/event-stream`: one SSE event per committed event (`id:` the event id, `data:` the event as JSON); `event: lagged` with `{from, to, error}` when missed events could not be re-read; a last `event: end` with `{reason, message}` (reason `token-expired`, `token-deleted` or `shutdown`) when the stream ends", content_type = "text/event-stream", body = String),
        (status = 400, description = "A parameter cannot be parsed or is unknown; `field` names it", body = schema::ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = schema::ErrorBody),
        (status = 422, description = "A negative event id; `field` names it", body = schema::ErrorBody),
        (status = 429, description = "The most event streams this service serves are open, in all or for this token", body = schema::ErrorBody),
    ))]
pub async fn stream(
    State(state): State<Arc<AppState>>,
    Viewer(token): Viewer,
    headers: HeaderMap,
    q: QueryParams,
) -> AppResult<Response> {
    let StreamQuery { filter } = StreamQuery::from_query(&q)?;
    let since = resume_from(&headers, &q)?;
    let l = loaded(&state)?;
    let permit = state
        .stream_permit(&token.name)
        .map_err(|refusal| ApiError::TooManyRequests {
            message: match refusal {
                StreamRefusal::All(max) => format!(
                    "{max} event streams are open, the most this service serves (`http.max_streams`); close one or try again later"
                ),
                StreamRefusal::Token(max) => format!(
                    "this token holds {max} event streams open, the most one token may (`http.max_streams_per_token`); close one or try again later"
                ),
            },
        })?;
    let items = follow(l.store.clone(), l.controller.log(), filter, since)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "event stream could not start");
            ApiError::Unavailable {
                message: format!("the event log cannot be read: {e}"),
            }
        })?;
    let mut stopping = state.stopping();
    let name = token.name.clone();
    let expires_at = token.expires_at;
    let revoked = token_revoked(l.store.clone(), token, state.token_deletions());
    let (ended, why) = tokio::sync::oneshot::channel();
    let events = items
        .map(sse)
        .take_until(async move {
            let end = tokio::select! {
                _ = stopping.wait_for(|s| *s) => End::Shutdown,
                _ = revoked => End::Deleted { token: name },
                _ = expiry(expires_at) => End::Expired {
                    token: name,
                    at: expires_at.unwrap_or_else(Timestamp::now),
                },
            };
            if let End::Expired { token, .. } = &end {
                tracing::info!(token = %token, "token expired: its event stream ends");
            }
            // The place is given back when the stream ends.
            drop(permit);
            let _ = ended.send(end);
        })
        // The last event says why the stream ended.
        .chain(
            futures_util::stream::once(why)
                .filter_map(|end| async move { end.ok().map(|e| e.event()) }),
        );
    let mut r = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive"))
        .into_response();
    // Proxies that buffer responses would hold events back.
    r.headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(r)
}
