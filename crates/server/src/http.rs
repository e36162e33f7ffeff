//! The HTTP API (`axum`, JSON under `/api/v1`).
//!
//! Routes: `GET /healthz`, `GET /readyz`; viewer: `GET /api/v1/events`,
//! `GET /api/v1/events/stream` (Server-Sent Events, [`crate::live`]),
//! `GET /metrics` (Prometheus, [`crate::metrics`]),
//! `GET /api/v1/{sites,doors,readers,cardholders,credentials,groups,schedules,holidays}`,
//! `GET /api/v1/doors/{id}`; operator: `POST /api/v1/doors/{id}/unlock`.
//!
//! `/healthz` (the process answers) and `/readyz` (everything is loaded) need
//! no token. Every other route needs `Authorization: Bearer <token>` of a
//! token created with `pivgate token create`: no token or an unknown one is
//! 401, a token whose role is too weak is 403. Bad input is 400 (cannot be
//! parsed) or 422 (parsed, but a value is wrong), with a JSON body
//! `{"error": sentence, "field": name}` naming the field; never 500.

use std::collections::HashMap;
use std::sync::Arc;

use access::DoorId;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use eventlog::{ApiToken, Direction, EventId, EventKind, EventQuery, EventResult, Role};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::watch;

use crate::door::CommandError;
use crate::service::{AppState, Loaded};
use crate::token;

/// An error answer: status, sentence and the field at fault.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            field: None,
        }
    }

    fn field(status: StatusCode, field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            field: Some(field.into()),
        }
    }

    fn internal(e: impl std::fmt::Display) -> Self {
        tracing::error!(error = %e, "request failed");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.message });
        if let Some(f) = self.field {
            body["field"] = json!(f);
        }
        let mut r = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"pivgate\""),
            );
        }
        r
    }
}

type AppResult<T> = Result<T, ApiError>;

fn loaded(state: &AppState) -> AppResult<&Loaded> {
    state
        .loaded()
        .ok_or_else(|| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the service is starting"))
}

/// The router over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    let viewer = Router::new()
        .route("/api/v1/events", get(events))
        .route("/api/v1/events/stream", get(crate::live::stream))
        .route("/metrics", get(crate::metrics::scrape))
        .route("/api/v1/sites", get(list_sites))
        .route("/api/v1/doors", get(list_doors))
        .route("/api/v1/doors/{id}", get(get_door))
        .route("/api/v1/readers", get(list_readers))
        .route("/api/v1/cardholders", get(list_cardholders))
        .route("/api/v1/credentials", get(list_credentials))
        .route("/api/v1/groups", get(list_groups))
        .route("/api/v1/schedules", get(list_schedules))
        .route("/api/v1/holidays", get(list_holidays))
        .route_layer(middleware::from_fn_with_state(
            (state.clone(), Role::Viewer),
            require,
        ));
    let operator = Router::new()
        .route("/api/v1/doors/{id}/unlock", post(unlock))
        .route_layer(middleware::from_fn_with_state(
            (state.clone(), Role::Operator),
            require,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(viewer)
        .merge(operator)
        .fallback(not_found)
        .with_state(state)
}

/// Serves `router(state)` on `listener` until `stop` turns true, then
/// finishes the requests in flight.
pub async fn serve<L>(
    listener: L,
    state: Arc<AppState>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()>
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    axum::serve(listener, router(state))
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such route")
}

async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    match state.loaded() {
        Some(l) => Json(json!({ "status": "ready", "startup": l.times })).into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "starting" })),
        )
            .into_response(),
    }
}

/// Checks the bearer token and its role; hands the token to the handler.
async fn require(
    State((state, role)): State<(Arc<AppState>, Role)>,
    mut req: Request,
    next: Next,
) -> Response {
    let unauthorized = |m: &str| ApiError::new(StatusCode::UNAUTHORIZED, m).into_response();
    let Some(value) = req.headers().get(header::AUTHORIZATION) else {
        return unauthorized("a bearer token is required (Authorization: Bearer <token>)");
    };
    let Some(text) = value
        .to_str()
        .ok()
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty())
    else {
        return unauthorized("the Authorization header is not `Bearer <token>`");
    };
    let l = match loaded(&state) {
        Ok(l) => l,
        Err(e) => return e.into_response(),
    };
    let t = match l.store.token_by_hash(&token::hash(text)).await {
        Ok(Some(t)) => t,
        Ok(None) => return unauthorized("unknown token"),
        Err(e) => return ApiError::internal(e).into_response(),
    };
    if !t.role.includes(role) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "token `{}` has role {}; this needs {} or above",
                t.name, t.role, role
            ),
        )
        .into_response();
    }
    req.extensions_mut().insert(t);
    next.run(req).await
}

fn param<T: std::str::FromStr>(
    q: &HashMap<String, String>,
    name: &str,
    what: &str,
) -> AppResult<Option<T>>
where
    T::Err: std::fmt::Display,
{
    match q.get(name) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|e| {
            ApiError::field(
                StatusCode::BAD_REQUEST,
                name,
                format!("query parameter `{name}`: `{v}` is not {what}: {e}"),
            )
        }),
    }
}

const EVENT_PARAMS: [&str; 9] = [
    "door",
    "cardholder",
    "result",
    "kind",
    "since",
    "until",
    "cursor",
    "direction",
    "limit",
];

/// `GET /api/v1/events`: filters `door`, `cardholder`, `result`, `kind`,
/// `since`, `until` (RFC 3339); paging `cursor` (the `next` of the previous
/// page), `direction` (`forward` or `backward`), `limit` (1..=1000).
async fn events(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> AppResult<Json<eventlog::EventPage>> {
    if let Some(k) = q.keys().find(|k| !EVENT_PARAMS.contains(&k.as_str())) {
        return Err(ApiError::field(
            StatusCode::BAD_REQUEST,
            k.as_str(),
            format!(
                "unknown query parameter `{k}` (known: {})",
                EVENT_PARAMS.join(", ")
            ),
        ));
    }
    let direction = match q.get("direction").map(String::as_str) {
        None | Some("forward") => Direction::Forward,
        Some("backward") => Direction::Backward,
        Some(v) => {
            return Err(ApiError::field(
                StatusCode::BAD_REQUEST,
                "direction",
                format!("query parameter `direction`: `{v}` is not `forward` or `backward`"),
            ))
        }
    };
    let limit: u32 = param(&q, "limit", "a count")?.unwrap_or(0);
    if limit > EventQuery::MAX_LIMIT {
        return Err(ApiError::field(
            StatusCode::UNPROCESSABLE_ENTITY,
            "limit",
            format!(
                "query parameter `limit`: at most {} events per page",
                EventQuery::MAX_LIMIT
            ),
        ));
    }
    let query = EventQuery {
        door: param::<i64>(&q, "door", "a door id")?.map(DoorId),
        cardholder: param::<i64>(&q, "cardholder", "a cardholder id")?.map(access::CardholderId),
        result: param::<EventResult>(&q, "result", "an event result")?,
        kind: param::<EventKind>(&q, "kind", "an event kind")?,
        since: param(&q, "since", "an RFC 3339 time")?,
        until: param(&q, "until", "an RFC 3339 time")?,
        cursor: param::<i64>(&q, "cursor", "an event id")?.map(EventId),
        direction,
        limit,
    };
    let l = loaded(&state)?;
    let page = l
        .store
        .query_events(&query)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(page))
}

macro_rules! list {
    ($name:ident, $method:ident) => {
        /// Every entity of the kind, as stored (viewer).
        async fn $name(State(state): State<Arc<AppState>>) -> AppResult<Json<serde_json::Value>> {
            let l = loaded(&state)?;
            let items = l.store.$method().await.map_err(ApiError::internal)?;
            Ok(Json(json!({ "items": items })))
        }
    };
}

list!(list_sites, list_sites);
list!(list_doors, list_doors);
list!(list_readers, list_readers);
list!(list_cardholders, list_cardholders);
list!(list_credentials, list_credentials);
list!(list_groups, list_groups);
list!(list_schedules, list_schedules);
list!(list_holidays, list_holidays);

fn door_id(id: &str) -> AppResult<DoorId> {
    id.parse::<i64>().map(DoorId).map_err(|e| {
        ApiError::field(
            StatusCode::BAD_REQUEST,
            "id",
            format!("path parameter `id`: `{id}` is not a door id: {e}"),
        )
    })
}

/// `GET /api/v1/doors/{id}` (viewer).
async fn get_door(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> AppResult<Json<access::Door>> {
    let door = door_id(&id)?;
    let l = loaded(&state)?;
    match l.store.get_door(door).await {
        Ok(d) => Ok(Json(d)),
        Err(eventlog::StoreError::NotFound { .. }) => Err(ApiError::field(
            StatusCode::NOT_FOUND,
            "id",
            format!("door {door} does not exist"),
        )),
        Err(e) => Err(ApiError::internal(e)),
    }
}

/// The body of a door command (optional).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandBody {
    /// Why, for the log.
    #[serde(default)]
    reason: Option<String>,
}

/// Reads an optional JSON body: syntax errors are 400, a wrong or unknown
/// field 422 naming the field.
fn json_body<T: for<'de> Deserialize<'de> + Default>(body: &Bytes) -> AppResult<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let status = if inner.is_syntax() || inner.is_eof() {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::UNPROCESSABLE_ENTITY
        };
        let field = match (path.as_str(), unknown_field(&inner)) {
            (_, Some(f)) => Some(f),
            (".", None) | ("", None) => None,
            (p, None) => Some(p.to_string()),
        };
        ApiError {
            status,
            message: match &field {
                Some(f) => format!("body field `{f}`: {inner}"),
                None => format!("body: {inner}"),
            },
            field,
        }
    })
}

/// The field serde names in "unknown field `x`" errors.
fn unknown_field(e: &serde_json::Error) -> Option<String> {
    let s = e.to_string();
    let rest = s.strip_prefix("unknown field `")?;
    Some(rest.split('`').next()?.to_string())
}

/// `POST /api/v1/doors/{id}/unlock` (operator): momentary unlock; the
/// command event (naming the token) is committed before the lock opens.
async fn unlock(
    State(state): State<Arc<AppState>>,
    Extension(token): Extension<ApiToken>,
    Path(id): Path<String>,
    body: Bytes,
) -> AppResult<Json<serde_json::Value>> {
    let door = door_id(&id)?;
    let body: CommandBody = json_body(&body)?;
    if let Some(r) = &body.reason {
        if r.len() > 1000 {
            return Err(ApiError::field(
                StatusCode::UNPROCESSABLE_ENTITY,
                "reason",
                "body field `reason`: at most 1000 bytes",
            ));
        }
    }
    let l = loaded(&state)?;
    match l
        .controller
        .unlock(door, &token.name, body.reason.as_deref())
        .await
    {
        Ok(event) => Ok(Json(json!({
            "door": door,
            "event": event,
            "unlock_ms": l.controller.unlock_duration().as_millis() as u64,
        }))),
        Err(CommandError::UnknownDoor(d)) => Err(ApiError::field(
            StatusCode::NOT_FOUND,
            "id",
            format!("door {d} does not exist"),
        )),
        Err(e) => Err(ApiError::internal(e)),
    }
}
