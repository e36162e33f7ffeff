//! The HTTP API (`axum`, JSON under `/api/v1`).
//!
//! Routes (role needed in brackets):
//! - `GET /healthz`, `GET /readyz`, `GET /api/v1/openapi.json` (none);
//! - `GET /api/v1/events` (viewer): filters and cursor paging;
//!   `GET /api/v1/events/stream` (viewer): the same events live, as
//!   Server-Sent Events ([`crate::live`]);
//! - dashboard reads (viewer, [`dashboard`]): `GET /api/v1/doors/status`,
//!   `GET /api/v1/doors/{id}/latency`, `GET /api/v1/pki/health`,
//!   `GET /api/v1/events.csv`, `GET /api/v1/cardholders/{id}/credentials`;
//! - `GET /metrics` (viewer): Prometheus / OpenMetrics text
//!   ([`crate::metrics`]);
//! - for each of `sites`, `doors`, `readers`, `cardholders`, `credentials`,
//!   `groups`, `schedules`, `holidays`: `GET /api/v1/{kind}` and
//!   `GET /api/v1/{kind}/{id}` (viewer), `POST /api/v1/{kind}` (create),
//!   `PUT /api/v1/{kind}/{id}` (replace) and `DELETE /api/v1/{kind}/{id}`
//!   (admin);
//! - `POST /api/v1/doors/{id}/unlock` (momentary unlock),
//!   `PUT /api/v1/doors/{id}/mode` (`normal`, `unlocked`, `locked`) and
//!   `POST /api/v1/doors/{id}/keypad` (a PIN typed at a card + PIN door)
//!   (operator);
//! - `POST /api/v1/credentials/enroll` (admin): enrollment from a card
//!   authentication certificate in PEM ([`crate::enroll_api`]);
//! - `GET /api/v1/whoami` (viewer): the token's name and role;
//! - `GET /` and `GET /ui/{file}` (none): the dashboard
//!   ([`crate::dashboard`]), static assets that read the API;
//! - `GET /api/v1/tokens` and `DELETE /api/v1/tokens/{name}` (admin); tokens
//!   are created on the machine only (`pivgate token create`), so a secret
//!   never crosses the network.
//!
//! `/healthz` (the process answers), `/readyz` (everything is loaded) and
//! the OpenAPI document need no token. Every other route needs
//! `Authorization: Bearer <token>` of a token created with
//! `pivgate token create`: no token or an unknown one is 401, a token whose
//! role is too weak is 403. Bad input is 400 (cannot be parsed) or 422
//! (parsed, but a value is wrong), with a JSON body
//! `{"error": sentence, "field": name}` naming the field; never 500.
//!
//! Every change (entity, door mode, token) is an event naming the token
//! that made it, committed before the answer; a change to the access data
//! is checked against the whole data set first and swapped into the
//! controller at once, so the next tap sees it. The routes are declared once
//! ([`define`]), for the router and for [`routes`], which a test checks
//! against the OpenAPI document ([`openapi`]) generated from the handlers'
//! annotations.

use std::collections::HashMap;
use std::sync::Arc;

use access::DoorId;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::handler::Handler;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put, MethodRouter};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use serde_json::json;
use store::{ApiToken, Direction, EventId, EventKind, EventQuery, EventResult, Role};
use tokio::sync::watch;

use crate::door::CommandError;
use crate::service::{AppState, Loaded};
use crate::token;

pub mod dashboard;
pub mod entities;
pub mod openapi;
pub mod schema;

use schema::ErrorBody;

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

    pub(crate) fn field(
        status: StatusCode,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// A failure of the service itself (database, task): the detail (SQL,
    /// paths) goes to the log under a reference, the client gets the
    /// reference only.
    pub(crate) fn internal(e: impl std::fmt::Display) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let reference = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::error!(error = %e, reference, "request failed");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "the service could not complete the request (logged as internal error {reference})"
            ),
        )
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

pub(crate) fn loaded(state: &AppState) -> AppResult<&Loaded> {
    state
        .loaded()
        .ok_or_else(|| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the service is starting"))
}

/// An HTTP method a route answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    Post,
    Put,
    Delete,
}

impl Verb {
    /// Lower case, as the OpenAPI document keys operations.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Post => "post",
            Verb::Put => "put",
            Verb::Delete => "delete",
        }
    }
}

/// One route the router serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub verb: Verb,
    /// As axum and OpenAPI write it, e.g. `/api/v1/doors/{id}`.
    pub path: &'static str,
    /// The least role a token needs; `None`: no token.
    pub role: Option<Role>,
}

/// Where [`define`] puts each route: the router, or a list.
trait Routes {
    fn add<H, T>(&mut self, verb: Verb, path: &'static str, role: Option<Role>, handler: H)
    where
        H: Handler<T, Arc<AppState>>,
        T: 'static;
}

/// Every route, once: the router and the route list both come from here.
fn define(r: &mut impl Routes) {
    use entities::{cardholders, credentials, doors, groups, holidays, readers, schedules, sites};
    use Verb::{Delete, Get, Post, Put};
    let (viewer, operator, admin) = (Some(Role::Viewer), Some(Role::Operator), Some(Role::Admin));

    r.add(Get, "/healthz", None, healthz);
    r.add(Get, "/readyz", None, readyz);
    r.add(Get, "/api/v1/openapi.json", None, openapi::document);
    r.add(Get, "/api/v1/events", viewer, events);
    r.add(Get, "/api/v1/events/stream", viewer, crate::live::stream);
    r.add(Get, "/api/v1/events.csv", viewer, dashboard::events_csv);
    r.add(Get, "/api/v1/doors/status", viewer, dashboard::doors_status);
    r.add(
        Get,
        "/api/v1/doors/{id}/latency",
        viewer,
        dashboard::door_latency,
    );
    r.add(Get, "/api/v1/pki/health", viewer, dashboard::pki_health);
    r.add(
        Get,
        "/api/v1/cardholders/{id}/credentials",
        viewer,
        dashboard::cardholder_credentials,
    );
    r.add(Get, "/metrics", viewer, crate::metrics::scrape);

    macro_rules! crud {
        ($m:ident, $list:literal, $one:literal) => {
            r.add(Get, $list, viewer, $m::list);
            r.add(Post, $list, admin, $m::create);
            r.add(Get, $one, viewer, $m::get);
            r.add(Put, $one, admin, $m::replace);
            r.add(Delete, $one, admin, $m::delete);
        };
    }
    crud!(sites, "/api/v1/sites", "/api/v1/sites/{id}");
    crud!(doors, "/api/v1/doors", "/api/v1/doors/{id}");
    crud!(readers, "/api/v1/readers", "/api/v1/readers/{id}");
    crud!(
        cardholders,
        "/api/v1/cardholders",
        "/api/v1/cardholders/{id}"
    );
    crud!(
        credentials,
        "/api/v1/credentials",
        "/api/v1/credentials/{id}"
    );
    crud!(groups, "/api/v1/groups", "/api/v1/groups/{id}");
    crud!(schedules, "/api/v1/schedules", "/api/v1/schedules/{id}");
    crud!(holidays, "/api/v1/holidays", "/api/v1/holidays/{id}");

    r.add(Post, "/api/v1/doors/{id}/unlock", operator, unlock);
    r.add(Put, "/api/v1/doors/{id}/mode", operator, door_mode);
    r.add(
        Post,
        "/api/v1/doors/{id}/keypad",
        Some(Role::Keypad),
        keypad,
    );
    r.add(
        Post,
        "/api/v1/credentials/enroll",
        admin,
        crate::enroll_api::enroll,
    );

    r.add(Get, "/api/v1/tokens", admin, list_tokens);
    r.add(Delete, "/api/v1/tokens/{name}", admin, delete_token);
    r.add(Get, "/api/v1/whoami", viewer, crate::dashboard::whoami);

    // The dashboard: static assets only; its data comes from the routes above.
    r.add(Get, "/", None, crate::dashboard::index);
    r.add(Get, "/ui/{file}", None, crate::dashboard::asset);
}

struct RouterRoutes {
    state: Arc<AppState>,
    router: Router<Arc<AppState>>,
}

impl Routes for RouterRoutes {
    fn add<H, T>(&mut self, verb: Verb, path: &'static str, role: Option<Role>, handler: H)
    where
        H: Handler<T, Arc<AppState>>,
        T: 'static,
    {
        let route: MethodRouter<Arc<AppState>> = match verb {
            Verb::Get => get(handler),
            Verb::Post => post(handler),
            Verb::Put => put(handler),
            Verb::Delete => delete(handler),
        };
        let route = match role {
            Some(role) => route.route_layer(middleware::from_fn_with_state(
                (self.state.clone(), role),
                require,
            )),
            None => route,
        };
        self.router = std::mem::take(&mut self.router).route(path, route);
    }
}

impl Routes for Vec<Route> {
    fn add<H, T>(&mut self, verb: Verb, path: &'static str, role: Option<Role>, _: H)
    where
        H: Handler<T, Arc<AppState>>,
        T: 'static,
    {
        self.push(Route { verb, path, role });
    }
}

/// Every route the router serves, with the role it needs.
pub fn routes() -> Vec<Route> {
    let mut list = Vec::new();
    define(&mut list);
    list
}

/// The router over `state`.
pub fn router(state: Arc<AppState>) -> Router {
    let mut r = RouterRoutes {
        state: state.clone(),
        router: Router::new(),
    };
    define(&mut r);
    r.router.fallback(not_found).with_state(state)
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

/// The process answers.
#[utoipa::path(get, path = "/healthz", tag = "service",
    responses((status = 200, description = "The process answers", body = schema::Health)))]
async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

/// Everything is loaded: taps and the API work.
#[utoipa::path(get, path = "/readyz", tag = "service",
    responses(
        (status = 200, description = "Ready, with the start-up times", body = schema::Ready),
        (status = 503, description = "Still starting", body = schema::Ready),
    ))]
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
pub(crate) async fn require(
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

pub(crate) fn param<T: std::str::FromStr>(
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

/// The filters of the event routes (`/api/v1/events` and its CSV export).
pub(crate) const EVENT_FILTERS: [&str; 6] =
    ["door", "cardholder", "result", "kind", "since", "until"];

/// An [`EventQuery`] with the filters of `q` (door, cardholder, result,
/// kind, since, until) and nothing else set. A parameter that is neither a
/// filter nor one of `extra` (which the caller reads) is refused, naming
/// the known ones.
pub(crate) fn event_filters(q: &HashMap<String, String>, extra: &[&str]) -> AppResult<EventQuery> {
    if let Some(k) = q
        .keys()
        .find(|k| !EVENT_FILTERS.contains(&k.as_str()) && !extra.contains(&k.as_str()))
    {
        let known: Vec<&str> = EVENT_FILTERS.iter().chain(extra).copied().collect();
        return Err(ApiError::field(
            StatusCode::BAD_REQUEST,
            k.as_str(),
            format!(
                "unknown query parameter `{k}` (known: {})",
                known.join(", ")
            ),
        ));
    }
    Ok(EventQuery {
        door: param::<i64>(q, "door", "a door id")?.map(DoorId),
        cardholder: param::<i64>(q, "cardholder", "a cardholder id")?.map(access::CardholderId),
        result: param::<EventResult>(q, "result", "an event result")?,
        kind: param::<EventKind>(q, "kind", "an event kind")?,
        since: param(q, "since", "an RFC 3339 time")?,
        until: param(q, "until", "an RFC 3339 time")?,
        ..EventQuery::default()
    })
}

/// `GET /api/v1/events`: filters `door`, `cardholder`, `result`, `kind`,
/// `since`, `until` (RFC 3339); paging `cursor` (the `next` of the previous
/// page), `direction` (`forward` or `backward`), `limit` (1..=1000).
#[utoipa::path(get, path = "/api/v1/events", tag = "events",
    security(("bearer" = [])),
    params(
        ("door" = Option<i64>, Query, description = "Only events of this door"),
        ("cardholder" = Option<i64>, Query, description = "Only events of this cardholder"),
        ("result" = Option<schema::EventResult>, Query, description = "Only taps with this result"),
        ("kind" = Option<schema::EventKind>, Query, description = "Only events of this kind"),
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
async fn events(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
) -> AppResult<Json<store::EventPage>> {
    let filters = event_filters(&q, &["cursor", "direction", "limit"])?;
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
        cursor: param::<i64>(&q, "cursor", "an event id")?.map(EventId),
        direction,
        limit,
        ..filters
    };
    let l = loaded(&state)?;
    let page = l
        .store
        .query_events(&query)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(page))
}

pub(crate) fn door_id(id: &str) -> AppResult<DoorId> {
    id.parse::<i64>().map(DoorId).map_err(|e| {
        ApiError::field(
            StatusCode::BAD_REQUEST,
            "id",
            format!("path parameter `id`: `{id}` is not a door id: {e}"),
        )
    })
}

/// Reads an optional JSON body: syntax errors are 400, a wrong or unknown
/// field 422 naming the field.
pub(crate) fn json_body<T: for<'de> Deserialize<'de> + Default>(body: &Bytes) -> AppResult<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    parse_json(body)
}

/// Reads a JSON body that must be there: an empty one is 400.
fn json_body_required<T: for<'de> Deserialize<'de>>(body: &Bytes) -> AppResult<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "body: a JSON object is required",
        ));
    }
    parse_json(body)
}

fn parse_json<T: for<'de> Deserialize<'de>>(body: &Bytes) -> AppResult<T> {
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
            // A syntax error is not at a field.
            _ if status == StatusCode::BAD_REQUEST => None,
            (_, Some(f)) => Some(f),
            (".", None) | ("", None) | ("?", None) => None,
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

/// The field serde names in "unknown field `x`" and "missing field `x`"
/// errors.
fn unknown_field(e: &serde_json::Error) -> Option<String> {
    let s = e.to_string();
    let rest = s
        .strip_prefix("unknown field `")
        .or_else(|| s.strip_prefix("missing field `"))?;
    Some(rest.split('`').next()?.to_string())
}

/// `POST /api/v1/doors/{id}/unlock` (operator): momentary unlock; the
/// command event (naming the token) is committed before the lock opens.
#[utoipa::path(post, path = "/api/v1/doors/{id}/unlock", tag = "doors",
    security(("bearer" = [])),
    params(("id" = i64, Path, description = "The door")),
    request_body(content = Option<schema::UnlockCommand>, description = "Optional: why, for the log"),
    responses(
        (status = 200, description = "Recorded, then the lock released", body = schema::UnlockAnswer),
        (status = 400, description = "The body is not JSON, or the id not a number", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "The token is a viewer token", body = ErrorBody),
        (status = 404, description = "No such door", body = ErrorBody),
        (status = 422, description = "A field is wrong or unknown; `field` names it", body = ErrorBody),
    ))]
async fn unlock(
    State(state): State<Arc<AppState>>,
    Extension(token): Extension<ApiToken>,
    Path(id): Path<String>,
    body: Bytes,
) -> AppResult<Json<serde_json::Value>> {
    let door = door_id(&id)?;
    let body: schema::UnlockCommand = json_body(&body)?;
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

/// `PUT /api/v1/doors/{id}/mode` (operator): puts the door in a mode, kept
/// on the door; the command event names the token.
#[utoipa::path(put, path = "/api/v1/doors/{id}/mode", tag = "doors",
    security(("bearer" = [])),
    params(("id" = i64, Path, description = "The door")),
    request_body = schema::ModeCommand,
    responses(
        (status = 200, description = "Stored, recorded and applied", body = schema::ModeAnswer),
        (status = 400, description = "The body is not JSON, or the id not a number", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "The token is a viewer token", body = ErrorBody),
        (status = 404, description = "No such door", body = ErrorBody),
        (status = 422, description = "A field is wrong or unknown; `field` names it", body = ErrorBody),
    ))]
async fn door_mode(
    State(state): State<Arc<AppState>>,
    Extension(token): Extension<ApiToken>,
    Path(id): Path<String>,
    body: Bytes,
) -> AppResult<Json<serde_json::Value>> {
    entities::set_mode(&state, &token, &id, &body).await
}

/// `GET /api/v1/tokens` (admin): names, roles and creation times; never a
/// secret or its hash.
#[utoipa::path(get, path = "/api/v1/tokens", tag = "tokens",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every token", body = schema::TokenList),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "The token is not an admin token", body = ErrorBody),
    ))]
async fn list_tokens(State(state): State<Arc<AppState>>) -> AppResult<Json<serde_json::Value>> {
    entities::list_tokens(&state).await
}

/// `DELETE /api/v1/tokens/{name}` (admin): the token stops working at once.
#[utoipa::path(delete, path = "/api/v1/tokens/{name}", tag = "tokens",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "The token's name")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "The token is not an admin token", body = ErrorBody),
        (status = 404, description = "No such token", body = ErrorBody),
    ))]
async fn delete_token(
    State(state): State<Arc<AppState>>,
    Extension(token): Extension<ApiToken>,
    Path(name): Path<String>,
) -> AppResult<StatusCode> {
    entities::delete_token(&state, &token, &name).await
}

/// `POST /api/v1/doors/{id}/keypad` (keypad, operator or admin): a PIN typed on the keypad
/// of a card + PIN door, for the card tapped there next (or already waiting).
/// The PIN is never logged or stored.
#[utoipa::path(post, path = "/api/v1/doors/{id}/keypad", tag = "doors",
    security(("bearer" = [])),
    params(("id" = i64, Path, description = "The door (a pki-auth door)")),
    request_body = schema::KeypadEntry,
    responses(
        (status = 202, description = "Taken for the tap waiting at the door, or kept for the next card", body = crate::keypad::Entered),
        (status = 400, description = "The body is not JSON, or the id not a number", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "The token is a viewer token (keypad, operator or admin needed)", body = ErrorBody),
        (status = 404, description = "No such door", body = ErrorBody),
        (status = 422, description = "Not 6 to 8 digits, or the door takes no PIN; `field` names it", body = ErrorBody),
    ))]
async fn keypad(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Bytes,
) -> AppResult<Response> {
    let door = door_id(&id)?;
    let body: schema::KeypadEntry = json_body(&body)?;
    let pin = zeroize::Zeroizing::new(body.pin.ok_or_else(|| {
        ApiError::field(
            StatusCode::UNPROCESSABLE_ENTITY,
            "pin",
            "body field `pin`: missing",
        )
    })?);
    let l = loaded(&state)?;
    let snapshot = l.controller.snapshot();
    let Some(d) = snapshot.door(door) else {
        return Err(ApiError::field(
            StatusCode::NOT_FOUND,
            "id",
            format!("door {door} does not exist"),
        ));
    };
    if d.mechanism != access::Mechanism::PkiAuth {
        return Err(ApiError::field(
            StatusCode::UNPROCESSABLE_ENTITY,
            "id",
            format!(
                "door `{}` requires {}, which takes no PIN (only pki-auth doors do)",
                d.name, d.mechanism
            ),
        ));
    }
    match l.keypads.enter(door, pin) {
        Ok(entered) => Ok((StatusCode::ACCEPTED, Json(entered)).into_response()),
        Err(e) => Err(ApiError::field(
            StatusCode::UNPROCESSABLE_ENTITY,
            "pin",
            format!("body field `pin`: {e}"),
        )),
    }
}
