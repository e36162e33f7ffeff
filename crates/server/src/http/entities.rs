//! Create, read, replace and delete for every access entity (sites, doors,
//! readers, cardholders, credentials, groups, schedules, holidays): viewers
//! read, admins change.
//!
//! Handlers only: a body becomes an entity here, and the change goes
//! through [`crate::admin::AccessData::change`] (checked, written with its
//! audit event in one transaction, in force at the next tap).

use access::jiff::Timestamp;
use axum::body::Bytes;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use store::{ApiToken, Record, RecordId};

use super::error::{ApiError, AppResult};
use super::extract::{json_body_required, loaded};
use super::schema;
use crate::admin::EntityChange;
use crate::state::AppState;

/// The longest name or connection string accepted.
const MAX_TEXT: usize = 200;
/// The longest reason accepted.
const MAX_REASON: usize = 1000;

/// An entity the API manages: how it is read from a request body (the rest
/// of what describes it is its [`Record`]).
pub(super) trait ApiEntity: Record {
    type Body: for<'de> Deserialize<'de> + Send;

    /// The entity `body` describes, with id `id`. `previous` is the stored
    /// entity a replacement replaces.
    fn from_body(
        body: Self::Body,
        id: i64,
        previous: Option<&Self>,
        actor: &str,
        now: Timestamp,
    ) -> AppResult<Self>;
    /// The id the body repeats, if any.
    fn body_id(body: &Self::Body) -> Option<i64>;
    /// Fields the API shows but a body must not carry (kept by a change).
    const READ_ONLY: &'static [&'static str] = &[];
}

fn text(field: &'static str, v: String) -> AppResult<String> {
    if v.trim().is_empty() {
        return Err(ApiError::unprocessable(
            field,
            format!("body field `{field}`: must not be empty"),
        ));
    }
    if v.len() > MAX_TEXT {
        return Err(ApiError::unprocessable(
            field,
            format!("body field `{field}`: at most {MAX_TEXT} bytes"),
        ));
    }
    if v.chars().any(char::is_control) {
        return Err(ApiError::unprocessable(
            field,
            format!("body field `{field}`: must not contain control characters"),
        ));
    }
    Ok(v)
}

pub(super) fn reason_text(v: Option<String>) -> AppResult<Option<String>> {
    match v {
        Some(r) if r.len() > MAX_REASON => Err(ApiError::unprocessable(
            "reason",
            format!("body field `reason`: at most {MAX_REASON} bytes"),
        )),
        r => Ok(r),
    }
}

/// The reason a suspended or revoked state needs.
fn state_reason(reason: Option<String>, state: &str) -> AppResult<String> {
    match reason_text(reason)? {
        Some(r) if !r.trim().is_empty() => Ok(r),
        _ => Err(ApiError::unprocessable(
            "reason",
            format!("body field `reason`: required when the state is `{state}`"),
        )),
    }
}

fn no_reason(reason: &Option<String>, state: &str) -> AppResult<()> {
    match reason {
        Some(_) => Err(ApiError::unprocessable("reason",
            format!("body field `reason`: only a suspended or revoked entity has a reason, not an `{state}` one"),
        )),
        None => Ok(()),
    }
}

impl ApiEntity for access::Site {
    type Body = schema::Site;

    fn body_id(b: &Self::Body) -> Option<i64> {
        b.id
    }
    fn from_body(
        b: schema::Site,
        id: i64,
        _: Option<&Self>,
        _: &str,
        _: Timestamp,
    ) -> AppResult<Self> {
        if let Err(e) = access::time_zone(&b.time_zone) {
            return Err(ApiError::unprocessable(
                "time_zone",
                format!(
                    "body field `time_zone`: `{}` is not a known IANA time zone ({e})",
                    b.time_zone.chars().take(80).collect::<String>()
                ),
            ));
        }
        Ok(access::Site {
            id: access::SiteId(id),
            name: text("name", b.name)?,
            time_zone: b.time_zone,
            lockdown: b.lockdown,
        })
    }
}

impl ApiEntity for access::Door {
    type Body = schema::Door;

    fn body_id(b: &Self::Body) -> Option<i64> {
        b.id
    }
    fn from_body(
        b: schema::Door,
        id: i64,
        _: Option<&Self>,
        _: &str,
        _: Timestamp,
    ) -> AppResult<Self> {
        Ok(access::Door {
            id: access::DoorId(id),
            site: access::SiteId(b.site),
            name: text("name", b.name)?,
            mechanism: b.mechanism,
            allow_low_assurance: b.allow_low_assurance,
            passback: b.passback,
            mode: b.mode,
            unlock_schedule: b.unlock_schedule.map(access::ScheduleId),
            first_card_unlock: b.first_card_unlock,
            max_staleness_s: b.max_staleness_s,
            stale_policy: b.stale_policy,
        })
    }
}

impl ApiEntity for access::Reader {
    type Body = schema::Reader;

    fn body_id(b: &Self::Body) -> Option<i64> {
        b.id
    }
    fn from_body(
        b: schema::Reader,
        id: i64,
        _: Option<&Self>,
        _: &str,
        _: Timestamp,
    ) -> AppResult<Self> {
        Ok(access::Reader {
            id: access::ReaderId(id),
            door: access::DoorId(b.door),
            name: text("name", b.name)?,
            connection: text("connection", b.connection)?,
        })
    }
}

fn validity(from: Option<Timestamp>, until: Option<Timestamp>) -> AppResult<()> {
    match (from, until) {
        (Some(f), Some(u)) if u <= f => Err(ApiError::unprocessable(
            "valid_until",
            format!("body field `valid_until`: {u} is not after `valid_from` {f}"),
        )),
        _ => Ok(()),
    }
}

impl ApiEntity for access::Cardholder {
    type Body = schema::Cardholder;

    fn body_id(b: &Self::Body) -> Option<i64> {
        b.id
    }
    fn from_body(
        b: schema::Cardholder,
        id: i64,
        _: Option<&Self>,
        _: &str,
        _: Timestamp,
    ) -> AppResult<Self> {
        let status = match b.status {
            schema::CardholderStatus::Active => {
                no_reason(&b.reason, "active")?;
                access::CardholderStatus::Active
            }
            schema::CardholderStatus::Suspended => access::CardholderStatus::Suspended {
                reason: state_reason(b.reason, "suspended")?,
            },
        };
        validity(b.valid_from, b.valid_until)?;
        Ok(access::Cardholder {
            id: access::CardholderId(id),
            name: text("name", b.name)?,
            status,
            valid_from: b.valid_from,
            valid_until: b.valid_until,
        })
    }
}

impl ApiEntity for access::Credential {
    type Body = schema::Credential;
    const READ_ONLY: &'static [&'static str] = &["enrolled_at", "enrolled_by"];

    fn body_id(b: &Self::Body) -> Option<i64> {
        b.id
    }
    fn from_body(
        b: schema::Credential,
        id: i64,
        previous: Option<&Self>,
        actor: &str,
        now: Timestamp,
    ) -> AppResult<Self> {
        if b.card_uuid.is_none()
            && b.fasc_n.is_none()
            && b.cert_sha256.is_none()
            && b.spki_sha256.is_none()
        {
            return Err(ApiError::unprocessable("cert_sha256",
                "body: a credential needs at least one of `card_uuid`, `fasc_n`, `cert_sha256`, `spki_sha256`",
            ));
        }
        if b.at.is_some() && b.state != schema::CredentialState::Revoked {
            return Err(ApiError::unprocessable(
                "at",
                "body field `at`: only a revoked credential has a revocation time",
            ));
        }
        let state = match b.state {
            schema::CredentialState::Active => {
                no_reason(&b.reason, "active")?;
                access::CredentialState::Active
            }
            schema::CredentialState::Suspended => access::CredentialState::Suspended {
                reason: state_reason(b.reason, "suspended")?,
            },
            schema::CredentialState::Revoked => access::CredentialState::Revoked {
                reason: state_reason(b.reason, "revoked")?,
                at: b.at,
            },
        };
        // Enrolment is history: a replacement keeps it.
        let (enrolled_at, enrolled_by) = match previous {
            Some(p) => (p.enrolled_at, p.enrolled_by.clone()),
            None => (now, actor.to_string()),
        };
        Ok(access::Credential {
            id: access::CredentialId(id),
            cardholder: access::CardholderId(b.cardholder),
            card_uuid: b.card_uuid,
            fasc_n: b.fasc_n,
            cert_sha256: b.cert_sha256,
            spki_sha256: b.spki_sha256,
            expires_at: b.expires_at,
            enrolled_at,
            enrolled_by,
            state,
        })
    }
}

impl ApiEntity for access::AccessGroup {
    type Body = schema::Group;

    fn body_id(b: &Self::Body) -> Option<i64> {
        b.id
    }
    fn from_body(
        b: schema::Group,
        id: i64,
        _: Option<&Self>,
        _: &str,
        _: Timestamp,
    ) -> AppResult<Self> {
        Ok(access::AccessGroup {
            id: access::GroupId(id),
            name: text("name", b.name)?,
            schedule: access::ScheduleId(b.schedule),
            doors: b.doors.into_iter().map(access::DoorId).collect(),
            cardholders: b
                .cardholders
                .into_iter()
                .map(access::CardholderId)
                .collect(),
        })
    }
}

impl ApiEntity for access::Schedule {
    type Body = schema::Schedule;

    fn body_id(b: &Self::Body) -> Option<i64> {
        b.id
    }
    fn from_body(
        b: schema::Schedule,
        id: i64,
        _: Option<&Self>,
        _: &str,
        _: Timestamp,
    ) -> AppResult<Self> {
        Ok(access::Schedule {
            id: access::ScheduleId(id),
            name: text("name", b.name)?,
            windows: b.windows,
            holiday_windows: b.holiday_windows,
        })
    }
}

impl ApiEntity for access::Holiday {
    type Body = schema::Holiday;

    fn body_id(b: &Self::Body) -> Option<i64> {
        b.id
    }
    fn from_body(
        b: schema::Holiday,
        id: i64,
        _: Option<&Self>,
        _: &str,
        _: Timestamp,
    ) -> AppResult<Self> {
        Ok(access::Holiday {
            id: access::HolidayId(id),
            site: b.site.map(access::SiteId),
            date: b.date,
            name: text("name", b.name)?,
        })
    }
}

/// An id in the path: 400 naming `id` when it is not a number.
pub(super) fn path_id(kind: &str, raw: &str) -> AppResult<i64> {
    raw.parse::<i64>().map_err(|e| {
        ApiError::bad_request(
            "id",
            format!(
                "path parameter `id`: `{}` is not a {kind} id: {e}",
                raw.chars().take(40).collect::<String>()
            ),
        )
    })
}

/// The entity as the API shows it: its fields and its `version`.
fn shown<E: ApiEntity>(e: &E, version: i64) -> serde_json::Value {
    let mut v = serde_json::to_value(e).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("version".into(), json!(version));
    }
    v
}

/// One entity with its version as the body and as a strong `ETag`.
fn versioned<E: ApiEntity>(status: StatusCode, e: &E, version: i64) -> Response {
    let mut r = (status, Json(shown(e, version))).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("\"{version}\"")) {
        r.headers_mut().insert(header::ETAG, v);
    }
    r
}

/// The version `If-Match` asks for: `None` without the header or with
/// `*`; 400 when it is not one quoted version number (`"3"`, `W/"3"`).
pub(super) fn if_match(headers: &HeaderMap) -> AppResult<Option<i64>> {
    let Some(raw) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let bad = || {
        ApiError::bad_request(
            "If-Match",
            "header `If-Match`: give the entity's ETag as it was answered, e.g. \"3\"",
        )
    };
    let text = raw.to_str().map_err(|_| bad())?.trim();
    if text == "*" {
        return Ok(None);
    }
    let tag = text.strip_prefix("W/").unwrap_or(text);
    tag.strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .and_then(|t| t.parse::<i64>().ok())
        .map(Some)
        .ok_or_else(bad)
}

/// The body without `version`: what GET answered can be sent back.
fn without_version(body: &Bytes) -> AppResult<Bytes> {
    let Ok(serde_json::Value::Object(mut o)) = serde_json::from_slice::<serde_json::Value>(body)
    else {
        // Not an object: the body parser says what is wrong.
        return Ok(body.clone());
    };
    if o.remove("version").is_none() {
        return Ok(body.clone());
    }
    Ok(Bytes::from(serde_json::to_vec(&o).unwrap_or_default()))
}

/// Every entity of the kind, each with its version.
pub(super) async fn list<E: ApiEntity>(state: &AppState) -> AppResult<Json<serde_json::Value>> {
    let l = loaded(state)?;
    let items: Vec<serde_json::Value> = l
        .store
        .list_versioned::<E>()
        .await?
        .iter()
        .map(|(e, v)| shown(e, *v))
        .collect();
    Ok(Json(json!({ "items": items })))
}

/// One entity by id, with its version (also as `ETag`).
pub(super) async fn get_one<E: ApiEntity>(state: &AppState, raw: &str) -> AppResult<Response> {
    let id = path_id(E::ACTION, raw)?;
    let l = loaded(state)?;
    let (e, version) = l.store.get_versioned(E::Id::from_raw(id)).await?;
    Ok(versioned(StatusCode::OK, &e, version))
}

/// Creates a new entity from the body (admin); 201 with it as stored.
pub(super) async fn create<E: ApiEntity>(
    state: &AppState,
    token: &ApiToken,
    body: &Bytes,
) -> AppResult<Response> {
    let body: E::Body = json_body_required(&without_version(body)?)?;
    let l = loaded(state)?;
    let value = E::from_body(body, 0, None, &token.name, Timestamp::now())?;
    let (stored, _) = l
        .access
        .change(&token.name, EntityChange::Create(value))
        .await?;
    Ok(versioned(StatusCode::CREATED, &stored, 1))
}

/// The entity `id` changed to `after` unless its version is no longer
/// `version`; answered as stored, with its new version.
async fn replace_with<E: ApiEntity>(
    state: &AppState,
    token: &ApiToken,
    after: E,
    version: Option<i64>,
) -> AppResult<Response> {
    let l = loaded(state)?;
    let id = after.id();
    let (stored, _) = l
        .access
        .change(&token.name, EntityChange::replace(after, version))
        .await?;
    let version = l.store.get_versioned(E::Id::from_raw(id)).await?.1;
    Ok(versioned(StatusCode::OK, &stored, version))
}

/// Replaces the entity `raw` with the body (admin); with `If-Match`, only
/// if it is still at that version (else 412).
pub(super) async fn replace<E: ApiEntity>(
    state: &AppState,
    token: &ApiToken,
    raw: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> AppResult<Response> {
    let id = path_id(E::ACTION, raw)?;
    let expected = if_match(headers)?;
    let body: E::Body = json_body_required(&without_version(body)?)?;
    if let Some(given) = E::body_id(&body).filter(|given| *given != id) {
        return Err(ApiError::unprocessable(
            "id",
            format!(
                "body field `id`: {given} is not the {} id in the path ({id})",
                E::ACTION
            ),
        ));
    }
    let l = loaded(state)?;
    let (before, current) = l.store.get_versioned(E::Id::from_raw(id)).await?;
    let after = E::from_body(body, id, Some(&before), &token.name, Timestamp::now())?;
    // Without If-Match the replacement still applies to what it was built
    // from: never to a version that came in between.
    replace_with(state, token, after, Some(expected.unwrap_or(current))).await
}

/// Changes only the fields the body names (RFC 7396 JSON merge patch;
/// `null` removes an optional field), on the version `If-Match` names or
/// the one read (admin).
pub(super) async fn patch<E: ApiEntity>(
    state: &AppState,
    token: &ApiToken,
    raw: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> AppResult<Response> {
    let id = path_id(E::ACTION, raw)?;
    let expected = if_match(headers)?;
    let serde_json::Value::Object(changes) = json_body_required::<serde_json::Value>(body)? else {
        return Err(ApiError::bad_request(
            "body",
            "body: a JSON object of the fields to change is required",
        ));
    };
    let l = loaded(state)?;
    let (before, current) = l.store.get_versioned(E::Id::from_raw(id)).await?;
    let after = patched(&before, id, changes, &token.name, Timestamp::now())?;
    replace_with(state, token, after, Some(expected.unwrap_or(current))).await
}

/// `before` (entity `id`) with the merge patch `changes` applied, checked
/// as a replacement body is.
fn patched<E: ApiEntity>(
    before: &E,
    id: i64,
    changes: serde_json::Map<String, serde_json::Value>,
    actor: &str,
    now: Timestamp,
) -> AppResult<E> {
    let mut merged = serde_json::to_value(before).unwrap_or_default();
    let Some(fields) = merged.as_object_mut() else {
        return Err(ApiError::internal("an entity is not a JSON object"));
    };
    for (k, v) in changes {
        match k.as_str() {
            "version" => continue,
            "id" if v != json!(id) => {
                return Err(ApiError::unprocessable(
                    "id",
                    format!("body field `id`: the {} id cannot change", E::ACTION),
                ))
            }
            _ => {}
        }
        if v.is_null() {
            fields.remove(&k);
        } else {
            fields.insert(k, v);
        }
    }
    for k in E::READ_ONLY {
        fields.remove(*k);
    }
    let merged = Bytes::from(serde_json::to_vec(&merged).unwrap_or_default());
    let body: E::Body = json_body_required(&merged)?;
    E::from_body(body, id, Some(before), actor, now)
}

/// What the API makes of `body` as an entity of kind `kind` (`site`,
/// `door`, `reader`, `cardholder`, `credential`, `group`, `schedule` or
/// `holiday`) before the store sees it, without a database: read and
/// checked as `POST` does, then as `PUT` replacing that entity, then as a
/// `PATCH` of it, and the created entity as the API shows it sent back as
/// a `PUT` body. Answers each step's entity as the API would show it
/// (`None` for an unknown kind). The handlers use the same functions; this
/// exists so that a fuzzer or a test can reach them.
pub fn body_to_entity(kind: &str, body: &[u8], now: Timestamp) -> Option<BodySteps> {
    Some(match kind {
        "site" => steps::<access::Site>(body, now),
        "door" => steps::<access::Door>(body, now),
        "reader" => steps::<access::Reader>(body, now),
        "cardholder" => steps::<access::Cardholder>(body, now),
        "credential" => steps::<access::Credential>(body, now),
        "group" => steps::<access::AccessGroup>(body, now),
        "schedule" => steps::<access::Schedule>(body, now),
        "holiday" => steps::<access::Holiday>(body, now),
        _ => return None,
    })
}

/// The outcome of [`body_to_entity`], step by step.
#[derive(Debug)]
pub struct BodySteps {
    /// `POST`: the entity created (id 1).
    pub create: AppResult<serde_json::Value>,
    /// `PUT` of the body on the created entity (when it was created;
    /// with `id`, it must be 1).
    pub replace: Option<AppResult<serde_json::Value>>,
    /// `PATCH` of the body on the created entity (when it was created and
    /// the body is an object).
    pub patch: Option<AppResult<serde_json::Value>>,
    /// `PUT` of the created entity as `GET` shows it, on itself: must
    /// give the same entity back.
    pub round_trip: Option<AppResult<serde_json::Value>>,
}

fn steps<E: ApiEntity>(body: &[u8], now: Timestamp) -> BodySteps {
    const ACTOR: &str = "admin";
    let id = 1;
    let body = Bytes::copy_from_slice(body);
    // `POST` ignores a body's id; `PUT` refuses one that is not the path's.
    let put = |body: &Bytes, before: Option<&E>| -> AppResult<E> {
        let parsed: E::Body = json_body_required(&without_version(body)?)?;
        let given = E::body_id(&parsed).filter(|given| *given != id);
        if let Some(given) = given.filter(|_| before.is_some()) {
            return Err(ApiError::unprocessable(
                "id",
                format!("body field `id`: {given} is not the id in the path"),
            ));
        }
        E::from_body(parsed, id, before, ACTOR, now)
    };
    let created = put(&body, None);
    let Ok(created) = created else {
        return BodySteps {
            create: created.map(|e| shown(&e, 1)),
            replace: None,
            patch: None,
            round_trip: None,
        };
    };
    let replace = Some(put(&body, Some(&created)).map(|e| shown(&e, 2)));
    let patch = match json_body_required::<serde_json::Value>(&body) {
        Ok(serde_json::Value::Object(changes)) => {
            Some(patched(&created, id, changes, ACTOR, now).map(|e| shown(&e, 2)))
        }
        _ => None,
    };
    let as_shown = Bytes::from(serde_json::to_vec(&shown(&created, 1)).unwrap_or_default());
    let round_trip = Some(put(&as_shown, Some(&created)).map(|e| shown(&e, 2)));
    BodySteps {
        create: Ok(shown(&created, 1)),
        replace,
        patch,
        round_trip,
    }
}

/// Deletes the entity `raw` (admin); 204. With `If-Match`, only if it is
/// still at that version (else 412).
pub(super) async fn remove<E: ApiEntity>(
    state: &AppState,
    token: &ApiToken,
    raw: &str,
    headers: &HeaderMap,
) -> AppResult<StatusCode> {
    let id = path_id(E::ACTION, raw)?;
    let expected = if_match(headers)?;
    let l = loaded(state)?;
    l.access
        .change(
            &token.name,
            EntityChange::<E>::delete(E::Id::from_raw(id), expected),
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The five routes of one entity kind, documented for the OpenAPI document.
macro_rules! crud {
    ($module:ident, $E:ident, $Body:ident, $List:ident, $tag:tt, $list_path:tt, $one_path:tt,
     $list_op:tt, $get_op:tt, $create_op:tt, $replace_op:tt, $patch_op:tt, $delete_op:tt) => {
        pub mod $module {
            use std::sync::Arc;

            use axum::body::Bytes;
            use axum::extract::{Path, State};
            use axum::http::{HeaderMap, StatusCode};
            use axum::response::Response;
            use axum::Json;

            use crate::http::auth::{Admin, Viewer};
            use crate::http::schema::{self, ErrorBody};
            use crate::http::error::AppResult;
            use crate::state::AppState;

            /// Every one, as stored (viewer).
            #[utoipa::path(get, path = $list_path, tag = $tag, operation_id = $list_op,
                security(("bearer" = [])),
                responses(
                    (status = 200, description = "Every one, as stored", body = schema::$List),
                    (status = 401, description = "No token, or an unknown one", body = ErrorBody),
                    (status = 503, description = "The service is starting", body = ErrorBody),
                ))]
            pub async fn list(State(state): State<Arc<AppState>>, _: Viewer) -> AppResult<Json<serde_json::Value>> {
                crate::http::entities::list::<access::$E>(&state).await
            }

            /// One, by id (viewer).
            #[utoipa::path(get, path = $one_path, tag = $tag, operation_id = $get_op,
                security(("bearer" = [])),
                params(("id" = i64, Path, description = "The id")),
                responses(
                    (status = 200, description = "As stored", body = schema::$Body),
                    (status = 400, description = "The id is not a number", body = ErrorBody),
                    (status = 401, description = "No token, or an unknown one", body = ErrorBody),
                    (status = 404, description = "No such id", body = ErrorBody),
                ))]
            pub async fn get(
                State(state): State<Arc<AppState>>,
                _: Viewer,
                Path(id): Path<String>,
            ) -> AppResult<Response> {
                crate::http::entities::get_one::<access::$E>(&state, &id).await
            }

            /// Creates one; the service assigns the id (admin). Recorded as
            /// an admin event naming the token; the next tap sees it.
            #[utoipa::path(post, path = $list_path, tag = $tag, operation_id = $create_op,
                security(("bearer" = [])),
                request_body = schema::$Body,
                responses(
                    (status = 201, description = "Created, as stored", body = schema::$Body),
                    (status = 400, description = "The body is not JSON", body = ErrorBody),
                    (status = 401, description = "No token, or an unknown one", body = ErrorBody),
                    (status = 403, description = "The token is not an admin token", body = ErrorBody),
                    (status = 409, description = "A unique value is taken", body = ErrorBody),
                    (status = 422, description = "A field is wrong, unknown, or refers to nothing; `field` names it", body = ErrorBody),
                ))]
            pub async fn create(
                State(state): State<Arc<AppState>>,
                Admin(token): Admin,
                body: Bytes,
            ) -> AppResult<Response> {
                crate::http::entities::create::<access::$E>(&state, &token, &body).await
            }

            /// Replaces one (admin). Recorded as an admin event with the
            /// value before and after; the next tap sees it.
            #[utoipa::path(put, path = $one_path, tag = $tag, operation_id = $replace_op,
                security(("bearer" = [])),
                params(("id" = i64, Path, description = "The id")),
                request_body = schema::$Body,
                responses(
                    (status = 200, description = "Replaced, as stored", body = schema::$Body),
                    (status = 400, description = "The body is not JSON, or the id not a number", body = ErrorBody),
                    (status = 401, description = "No token, or an unknown one", body = ErrorBody),
                    (status = 403, description = "The token is not an admin token", body = ErrorBody),
                    (status = 404, description = "No such id", body = ErrorBody),
                    (status = 409, description = "A unique value is taken", body = ErrorBody),
                    (status = 422, description = "A field is wrong, unknown, or refers to nothing; `field` names it", body = ErrorBody),
                ))]
            pub async fn replace(
                State(state): State<Arc<AppState>>,
                Admin(token): Admin,
                Path(id): Path<String>,
                headers: HeaderMap,
                body: Bytes,
            ) -> AppResult<Response> {
                crate::http::entities::replace::<access::$E>(&state, &token, &id, &headers, &body).await
            }

            /// Changes only the fields the body names (JSON merge patch,
            /// RFC 7396), so a client never writes back what it did not
            /// show (admin). With `If-Match`, only if the entity is still at
            /// that version (else 412: reload).
            #[utoipa::path(patch, path = $one_path, tag = $tag, operation_id = $patch_op,
                security(("bearer" = [])),
                params(("id" = i64, Path, description = "The id"),
                       ("If-Match" = Option<String>, Header, description = "The ETag the change is made against")),
                request_body(content = serde_json::Value, description = "The fields to change; null removes an optional one"),
                responses(
                    (status = 200, description = "Changed, as stored, with its new ETag", body = schema::$Body),
                    (status = 400, description = "The body is not a JSON object, or If-Match is malformed", body = ErrorBody),
                    (status = 401, description = "No token, or an unknown one", body = ErrorBody),
                    (status = 403, description = "The token is not an admin token", body = ErrorBody),
                    (status = 404, description = "No such id", body = ErrorBody),
                    (status = 409, description = "A unique value is taken", body = ErrorBody),
                    (status = 412, description = "Changed by someone else since the ETag given: reload", body = ErrorBody),
                    (status = 422, description = "A field is wrong, unknown, or refers to nothing; `field` names it", body = ErrorBody),
                ))]
            pub async fn patch(
                State(state): State<Arc<AppState>>,
                Admin(token): Admin,
                Path(id): Path<String>,
                headers: HeaderMap,
                body: Bytes,
            ) -> AppResult<Response> {
                crate::http::entities::patch::<access::$E>(&state, &token, &id, &headers, &body).await
            }

            /// Deletes one (admin). A door or cardholder also leaves the
            /// groups that list it; an entity anything else still refers to
            /// is kept (409). Recorded as an admin event with the value
            /// removed.
            #[utoipa::path(delete, path = $one_path, tag = $tag, operation_id = $delete_op,
                security(("bearer" = [])),
                params(("id" = i64, Path, description = "The id")),
                responses(
                    (status = 204, description = "Deleted"),
                    (status = 400, description = "The id is not a number", body = ErrorBody),
                    (status = 401, description = "No token, or an unknown one", body = ErrorBody),
                    (status = 403, description = "The token is not an admin token", body = ErrorBody),
                    (status = 404, description = "No such id", body = ErrorBody),
                    (status = 409, description = "Another entity refers to it", body = ErrorBody),
                ))]
            pub async fn delete(
                State(state): State<Arc<AppState>>,
                Admin(token): Admin,
                Path(id): Path<String>,
                headers: HeaderMap,
            ) -> AppResult<StatusCode> {
                crate::http::entities::remove::<access::$E>(&state, &token, &id, &headers).await
            }
        }
    };
}

crud!(
    sites,
    Site,
    Site,
    SiteList,
    "sites",
    "/api/v1/sites",
    "/api/v1/sites/{id}",
    "list_sites",
    "get_site",
    "create_site",
    "replace_site",
    "patch_site",
    "delete_site"
);
crud!(
    doors,
    Door,
    Door,
    DoorList,
    "doors",
    "/api/v1/doors",
    "/api/v1/doors/{id}",
    "list_doors",
    "get_door",
    "create_door",
    "replace_door",
    "patch_door",
    "delete_door"
);
crud!(
    readers,
    Reader,
    Reader,
    ReaderList,
    "readers",
    "/api/v1/readers",
    "/api/v1/readers/{id}",
    "list_readers",
    "get_reader",
    "create_reader",
    "replace_reader",
    "patch_reader",
    "delete_reader"
);
crud!(
    cardholders,
    Cardholder,
    Cardholder,
    CardholderList,
    "cardholders",
    "/api/v1/cardholders",
    "/api/v1/cardholders/{id}",
    "list_cardholders",
    "get_cardholder",
    "create_cardholder",
    "replace_cardholder",
    "patch_cardholder",
    "delete_cardholder"
);
crud!(
    credentials,
    Credential,
    Credential,
    CredentialList,
    "credentials",
    "/api/v1/credentials",
    "/api/v1/credentials/{id}",
    "list_credentials",
    "get_credential",
    "create_credential",
    "replace_credential",
    "patch_credential",
    "delete_credential"
);
crud!(
    groups,
    AccessGroup,
    Group,
    GroupList,
    "groups",
    "/api/v1/groups",
    "/api/v1/groups/{id}",
    "list_groups",
    "get_group",
    "create_group",
    "replace_group",
    "patch_group",
    "delete_group"
);
crud!(
    schedules,
    Schedule,
    Schedule,
    ScheduleList,
    "schedules",
    "/api/v1/schedules",
    "/api/v1/schedules/{id}",
    "list_schedules",
    "get_schedule",
    "create_schedule",
    "replace_schedule",
    "patch_schedule",
    "delete_schedule"
);
crud!(
    holidays,
    Holiday,
    Holiday,
    HolidayList,
    "holidays",
    "/api/v1/holidays",
    "/api/v1/holidays/{id}",
    "list_holidays",
    "get_holiday",
    "create_holiday",
    "replace_holiday",
    "patch_holiday",
    "delete_holiday"
);

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::from_second(1_780_000_000).unwrap()
    }

    #[test]
    fn a_body_is_created_replaced_patched_and_sent_back() {
        let body = br#"{"name":"office","windows":["mon-fri 07:00-19:00"],"version":4}"#;
        let s = body_to_entity("schedule", body, now()).unwrap();
        let created = s.create.unwrap();
        assert_eq!(created["id"], 1);
        assert_eq!(created["windows"], json!(["mon-fri 07:00-19:00"]));
        assert_eq!(s.replace.unwrap().unwrap()["name"], "office");
        assert_eq!(s.patch.unwrap().unwrap()["name"], "office");
        assert_eq!(
            s.round_trip.unwrap().unwrap()["windows"],
            created["windows"]
        );
    }

    #[test]
    fn a_body_is_refused_as_the_handlers_refuse_it() {
        let s = body_to_entity(
            "site",
            br#"{"name":"HQ","time_zone":"Mars/Olympus"}"#,
            now(),
        )
        .unwrap();
        match s.create.unwrap_err() {
            ApiError::Unprocessable { field, .. } => {
                assert_eq!(field.as_deref(), Some("time_zone"))
            }
            e => panic!("{e:?}"),
        }
        assert!(s.replace.is_none() && s.patch.is_none() && s.round_trip.is_none());
        let s = body_to_entity(
            "door",
            br#"{"site":1,"name":"x","mechanism":"pki-cak","colour":1}"#,
            now(),
        )
        .unwrap();
        assert!(matches!(s.create, Err(ApiError::Unprocessable { .. })));
        let s = body_to_entity("reader", b"{", now()).unwrap();
        assert!(matches!(s.create, Err(ApiError::BadRequest { .. })));
        assert!(body_to_entity("token", b"{}", now()).is_none());
    }
}
