//! Create, read, replace and delete for every access entity, door modes and
//! tokens.
//!
//! A change is checked against every stored entity before it is written (the
//! access snapshot must still build: a door must name an existing site, a
//! site a known time zone, …), written, read back into a new snapshot that
//! is swapped into the controller (the next tap sees it), and recorded as an
//! admin event naming the token, committed before the answer. Changes are
//! made one at a time; one that cannot be recorded is undone.

use std::future::Future;
use std::pin::Pin;

use access::jiff::Timestamp;
use access::{AccessSnapshot, BuildError, Entities};
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use store::{ApiToken, NewEvent, Store, StoreError};

use super::{json_body_required, loaded, schema, ApiError, AppResult};
use crate::service::{AppState, Loaded};

type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The longest name or connection string accepted.
const MAX_TEXT: usize = 200;
/// The longest reason accepted.
const MAX_REASON: usize = 1000;

/// An entity the API manages: how it is read from a body and how the store
/// keeps it.
pub(super) trait Entity: Serialize + Clone + Send + Sync + Sized + 'static {
    /// `door`, as in the action `door.create` and in messages.
    const KIND: &'static str;
    type Body: for<'de> Deserialize<'de> + Send;

    fn id(&self) -> i64;
    fn with_id(self, id: i64) -> Self;
    /// A short description for the log, e.g. ``door 3 (`Front door`)``.
    fn label(&self) -> String;
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
    /// Fills the event's door, reader, cardholder and credential columns.
    fn tag(&self, _event: &mut NewEvent) {}
    /// What the store removes with the entity `id` (group memberships).
    fn cascade(_e: &mut Entities, _id: i64) {}

    fn items(e: &mut Entities) -> &mut Vec<Self>;
    fn create(store: &dyn Store, v: Self) -> StoreFuture<'_, Self>;
    fn get(store: &dyn Store, id: i64) -> StoreFuture<'_, Self>;
    fn list(store: &dyn Store) -> StoreFuture<'_, Vec<Self>>;
    fn update<'a>(store: &'a dyn Store, v: &'a Self) -> StoreFuture<'a, ()>;
    fn delete(store: &dyn Store, id: i64) -> StoreFuture<'_, ()>;
}

fn text(field: &'static str, v: String) -> AppResult<String> {
    if v.trim().is_empty() {
        return Err(ApiError::field(
            StatusCode::UNPROCESSABLE_ENTITY,
            field,
            format!("body field `{field}`: must not be empty"),
        ));
    }
    if v.len() > MAX_TEXT {
        return Err(ApiError::field(
            StatusCode::UNPROCESSABLE_ENTITY,
            field,
            format!("body field `{field}`: at most {MAX_TEXT} bytes"),
        ));
    }
    Ok(v)
}

fn reason_text(v: Option<String>) -> AppResult<Option<String>> {
    match v {
        Some(r) if r.len() > MAX_REASON => Err(ApiError::field(
            StatusCode::UNPROCESSABLE_ENTITY,
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
        _ => Err(ApiError::field(
            StatusCode::UNPROCESSABLE_ENTITY,
            "reason",
            format!("body field `reason`: required when the state is `{state}`"),
        )),
    }
}

fn no_reason(reason: &Option<String>, state: &str) -> AppResult<()> {
    match reason {
        Some(_) => Err(ApiError::field(
            StatusCode::UNPROCESSABLE_ENTITY,
            "reason",
            format!("body field `reason`: only a suspended or revoked entity has a reason, not an `{state}` one"),
        )),
        None => Ok(()),
    }
}

impl Entity for access::Site {
    const KIND: &'static str = "site";
    type Body = schema::Site;

    fn id(&self) -> i64 {
        self.id.0
    }
    fn with_id(self, id: i64) -> Self {
        Self {
            id: access::SiteId(id),
            ..self
        }
    }
    fn label(&self) -> String {
        format!("site {} (`{}`)", self.id, self.name)
    }
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
            return Err(ApiError::field(
                StatusCode::UNPROCESSABLE_ENTITY,
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
        })
    }
    fn items(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.sites
    }
    fn create(s: &dyn Store, v: Self) -> StoreFuture<'_, Self> {
        s.create_site(v)
    }
    fn get(s: &dyn Store, id: i64) -> StoreFuture<'_, Self> {
        s.get_site(access::SiteId(id))
    }
    fn list(s: &dyn Store) -> StoreFuture<'_, Vec<Self>> {
        s.list_sites()
    }
    fn update<'a>(s: &'a dyn Store, v: &'a Self) -> StoreFuture<'a, ()> {
        s.update_site(v)
    }
    fn delete(s: &dyn Store, id: i64) -> StoreFuture<'_, ()> {
        s.delete_site(access::SiteId(id))
    }
}

impl Entity for access::Door {
    const KIND: &'static str = "door";
    type Body = schema::Door;

    fn id(&self) -> i64 {
        self.id.0
    }
    fn with_id(self, id: i64) -> Self {
        Self {
            id: access::DoorId(id),
            ..self
        }
    }
    fn label(&self) -> String {
        format!("door {} (`{}`)", self.id, self.name)
    }
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
        })
    }
    fn tag(&self, e: &mut NewEvent) {
        e.door = Some(self.id);
    }
    fn cascade(e: &mut Entities, id: i64) {
        for g in &mut e.groups {
            g.doors.retain(|d| d.0 != id);
        }
    }
    fn items(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.doors
    }
    fn create(s: &dyn Store, v: Self) -> StoreFuture<'_, Self> {
        s.create_door(v)
    }
    fn get(s: &dyn Store, id: i64) -> StoreFuture<'_, Self> {
        s.get_door(access::DoorId(id))
    }
    fn list(s: &dyn Store) -> StoreFuture<'_, Vec<Self>> {
        s.list_doors()
    }
    fn update<'a>(s: &'a dyn Store, v: &'a Self) -> StoreFuture<'a, ()> {
        s.update_door(v)
    }
    fn delete(s: &dyn Store, id: i64) -> StoreFuture<'_, ()> {
        s.delete_door(access::DoorId(id))
    }
}

impl Entity for access::Reader {
    const KIND: &'static str = "reader";
    type Body = schema::Reader;

    fn id(&self) -> i64 {
        self.id.0
    }
    fn with_id(self, id: i64) -> Self {
        Self {
            id: access::ReaderId(id),
            ..self
        }
    }
    fn label(&self) -> String {
        format!("reader {} (`{}`)", self.id, self.name)
    }
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
    fn tag(&self, e: &mut NewEvent) {
        e.reader = Some(self.id);
        e.door = Some(self.door);
    }
    fn items(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.readers
    }
    fn create(s: &dyn Store, v: Self) -> StoreFuture<'_, Self> {
        s.create_reader(v)
    }
    fn get(s: &dyn Store, id: i64) -> StoreFuture<'_, Self> {
        s.get_reader(access::ReaderId(id))
    }
    fn list(s: &dyn Store) -> StoreFuture<'_, Vec<Self>> {
        s.list_readers()
    }
    fn update<'a>(s: &'a dyn Store, v: &'a Self) -> StoreFuture<'a, ()> {
        s.update_reader(v)
    }
    fn delete(s: &dyn Store, id: i64) -> StoreFuture<'_, ()> {
        s.delete_reader(access::ReaderId(id))
    }
}

fn validity(from: Option<Timestamp>, until: Option<Timestamp>) -> AppResult<()> {
    match (from, until) {
        (Some(f), Some(u)) if u <= f => Err(ApiError::field(
            StatusCode::UNPROCESSABLE_ENTITY,
            "valid_until",
            format!("body field `valid_until`: {u} is not after `valid_from` {f}"),
        )),
        _ => Ok(()),
    }
}

impl Entity for access::Cardholder {
    const KIND: &'static str = "cardholder";
    type Body = schema::Cardholder;

    fn id(&self) -> i64 {
        self.id.0
    }
    fn with_id(self, id: i64) -> Self {
        Self {
            id: access::CardholderId(id),
            ..self
        }
    }
    fn label(&self) -> String {
        format!("cardholder {} (`{}`)", self.id, self.name)
    }
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
    fn tag(&self, e: &mut NewEvent) {
        e.cardholder = Some(self.id);
    }
    fn cascade(e: &mut Entities, id: i64) {
        for g in &mut e.groups {
            g.cardholders.retain(|c| c.0 != id);
        }
    }
    fn items(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.cardholders
    }
    fn create(s: &dyn Store, v: Self) -> StoreFuture<'_, Self> {
        s.create_cardholder(v)
    }
    fn get(s: &dyn Store, id: i64) -> StoreFuture<'_, Self> {
        s.get_cardholder(access::CardholderId(id))
    }
    fn list(s: &dyn Store) -> StoreFuture<'_, Vec<Self>> {
        s.list_cardholders()
    }
    fn update<'a>(s: &'a dyn Store, v: &'a Self) -> StoreFuture<'a, ()> {
        s.update_cardholder(v)
    }
    fn delete(s: &dyn Store, id: i64) -> StoreFuture<'_, ()> {
        s.delete_cardholder(access::CardholderId(id))
    }
}

impl Entity for access::Credential {
    const KIND: &'static str = "credential";
    type Body = schema::Credential;

    fn id(&self) -> i64 {
        self.id.0
    }
    fn with_id(self, id: i64) -> Self {
        Self {
            id: access::CredentialId(id),
            ..self
        }
    }
    fn label(&self) -> String {
        format!("credential {} of cardholder {}", self.id, self.cardholder)
    }
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
            return Err(ApiError::field(
                StatusCode::UNPROCESSABLE_ENTITY,
                "cert_sha256",
                "body: a credential needs at least one of `card_uuid`, `fasc_n`, `cert_sha256`, `spki_sha256`",
            ));
        }
        if b.at.is_some() && b.state != schema::CredentialState::Revoked {
            return Err(ApiError::field(
                StatusCode::UNPROCESSABLE_ENTITY,
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
    fn tag(&self, e: &mut NewEvent) {
        e.credential = Some(self.id);
        e.cardholder = Some(self.cardholder);
    }
    fn items(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.credentials
    }
    fn create(s: &dyn Store, v: Self) -> StoreFuture<'_, Self> {
        s.create_credential(v)
    }
    fn get(s: &dyn Store, id: i64) -> StoreFuture<'_, Self> {
        s.get_credential(access::CredentialId(id))
    }
    fn list(s: &dyn Store) -> StoreFuture<'_, Vec<Self>> {
        s.list_credentials()
    }
    fn update<'a>(s: &'a dyn Store, v: &'a Self) -> StoreFuture<'a, ()> {
        s.update_credential(v)
    }
    fn delete(s: &dyn Store, id: i64) -> StoreFuture<'_, ()> {
        s.delete_credential(access::CredentialId(id))
    }
}

impl Entity for access::AccessGroup {
    const KIND: &'static str = "group";
    type Body = schema::Group;

    fn id(&self) -> i64 {
        self.id.0
    }
    fn with_id(self, id: i64) -> Self {
        Self {
            id: access::GroupId(id),
            ..self
        }
    }
    fn label(&self) -> String {
        format!("group {} (`{}`)", self.id, self.name)
    }
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
    fn items(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.groups
    }
    fn create(s: &dyn Store, v: Self) -> StoreFuture<'_, Self> {
        s.create_group(v)
    }
    fn get(s: &dyn Store, id: i64) -> StoreFuture<'_, Self> {
        s.get_group(access::GroupId(id))
    }
    fn list(s: &dyn Store) -> StoreFuture<'_, Vec<Self>> {
        s.list_groups()
    }
    fn update<'a>(s: &'a dyn Store, v: &'a Self) -> StoreFuture<'a, ()> {
        s.update_group(v)
    }
    fn delete(s: &dyn Store, id: i64) -> StoreFuture<'_, ()> {
        s.delete_group(access::GroupId(id))
    }
}

impl Entity for access::Schedule {
    const KIND: &'static str = "schedule";
    type Body = schema::Schedule;

    fn id(&self) -> i64 {
        self.id.0
    }
    fn with_id(self, id: i64) -> Self {
        Self {
            id: access::ScheduleId(id),
            ..self
        }
    }
    fn label(&self) -> String {
        format!("schedule {} (`{}`)", self.id, self.name)
    }
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
    fn items(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.schedules
    }
    fn create(s: &dyn Store, v: Self) -> StoreFuture<'_, Self> {
        s.create_schedule(v)
    }
    fn get(s: &dyn Store, id: i64) -> StoreFuture<'_, Self> {
        s.get_schedule(access::ScheduleId(id))
    }
    fn list(s: &dyn Store) -> StoreFuture<'_, Vec<Self>> {
        s.list_schedules()
    }
    fn update<'a>(s: &'a dyn Store, v: &'a Self) -> StoreFuture<'a, ()> {
        s.update_schedule(v)
    }
    fn delete(s: &dyn Store, id: i64) -> StoreFuture<'_, ()> {
        s.delete_schedule(access::ScheduleId(id))
    }
}

impl Entity for access::Holiday {
    const KIND: &'static str = "holiday";
    type Body = schema::Holiday;

    fn id(&self) -> i64 {
        self.id.0
    }
    fn with_id(self, id: i64) -> Self {
        Self {
            id: access::HolidayId(id),
            ..self
        }
    }
    fn label(&self) -> String {
        format!("holiday {} (`{}`, {})", self.id, self.name, self.date)
    }
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
    fn items(e: &mut Entities) -> &mut Vec<Self> {
        &mut e.holidays
    }
    fn create(s: &dyn Store, v: Self) -> StoreFuture<'_, Self> {
        s.create_holiday(v)
    }
    fn get(s: &dyn Store, id: i64) -> StoreFuture<'_, Self> {
        s.get_holiday(access::HolidayId(id))
    }
    fn list(s: &dyn Store) -> StoreFuture<'_, Vec<Self>> {
        s.list_holidays()
    }
    fn update<'a>(s: &'a dyn Store, v: &'a Self) -> StoreFuture<'a, ()> {
        s.update_holiday(v)
    }
    fn delete(s: &dyn Store, id: i64) -> StoreFuture<'_, ()> {
        s.delete_holiday(access::HolidayId(id))
    }
}

/// A store error as an answer: a missing entity is 404, a taken unique
/// value or a reference in the way 409, a refused value 422.
pub(super) fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound { .. } => ApiError::field(StatusCode::NOT_FOUND, "id", e.to_string()),
        StoreError::Conflict { .. } | StoreError::Reference { .. } => {
            ApiError::new(StatusCode::CONFLICT, e.to_string())
        }
        StoreError::Invalid { field, .. } => {
            ApiError::field(StatusCode::UNPROCESSABLE_ENTITY, field, e.to_string())
        }
        StoreError::Snapshot(b) => build_error(b),
        e => ApiError::internal(e),
    }
}

/// Why the entities would not make a consistent snapshot, as 422 (or 409
/// for a card identifier another credential has), naming the field.
fn build_error(e: BuildError) -> ApiError {
    let message = format!("the change would leave the access data inconsistent: {e}");
    let (status, field) = match &e {
        BuildError::Dangling { field, .. } => (StatusCode::UNPROCESSABLE_ENTITY, Some(*field)),
        BuildError::UnknownTimeZone { .. } => (StatusCode::UNPROCESSABLE_ENTITY, Some("time_zone")),
        BuildError::ChuidNotAllowed { .. } => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("allow_low_assurance"),
        ),
        BuildError::SharedIdentifier { identifier, .. } => (
            StatusCode::CONFLICT,
            Some(match *identifier {
                "card UUID" => "card_uuid",
                "FASC-N" => "fasc_n",
                "certificate SHA-256" => "cert_sha256",
                _ => "spki_sha256",
            }),
        ),
        BuildError::DuplicateId { .. } => (StatusCode::CONFLICT, None),
    };
    ApiError {
        status,
        message,
        field: field.map(str::to_string),
    }
}

/// An id in the path: 400 naming `id` when it is not a number.
pub(super) fn path_id(kind: &str, raw: &str) -> AppResult<i64> {
    raw.parse::<i64>().map_err(|e| {
        ApiError::field(
            StatusCode::BAD_REQUEST,
            "id",
            format!(
                "path parameter `id`: `{}` is not a {kind} id: {e}",
                raw.chars().take(40).collect::<String>()
            ),
        )
    })
}

async fn fetch<E: Entity>(store: &dyn Store, id: i64) -> AppResult<E> {
    E::get(store, id).await.map_err(store_error)
}

/// Every entity of the kind.
pub(super) async fn list<E: Entity>(state: &AppState) -> AppResult<Json<serde_json::Value>> {
    let l = loaded(state)?;
    let items = E::list(&*l.store).await.map_err(store_error)?;
    Ok(Json(json!({ "items": items })))
}

/// One entity by id.
pub(super) async fn get_one<E: Entity>(state: &AppState, raw: &str) -> AppResult<Json<E>> {
    let id = path_id(E::KIND, raw)?;
    let l = loaded(state)?;
    Ok(Json(fetch::<E>(&*l.store, id).await?))
}

enum Change<E> {
    Create(E),
    Replace { before: E, after: E },
    Delete(E),
}

impl<E: Entity> Change<E> {
    fn action(&self) -> &'static str {
        match self {
            Change::Create(_) => "create",
            Change::Replace { .. } => "update",
            Change::Delete(_) => "delete",
        }
    }
}

/// Creates a new entity from the body (admin); 201 with it as stored.
pub(super) async fn create<E: Entity>(
    state: &AppState,
    token: &ApiToken,
    body: &Bytes,
) -> AppResult<Response> {
    let body: E::Body = json_body_required(body)?;
    let l = loaded(state)?;
    let value = E::from_body(body, 0, None, &token.name, Timestamp::now())?;
    let stored = apply(l, token, Change::Create(value)).await?;
    Ok((StatusCode::CREATED, Json(stored)).into_response())
}

/// Replaces the entity `raw` with the body (admin).
pub(super) async fn replace<E: Entity>(
    state: &AppState,
    token: &ApiToken,
    raw: &str,
    body: &Bytes,
) -> AppResult<Json<E>> {
    let id = path_id(E::KIND, raw)?;
    let body: E::Body = json_body_required(body)?;
    if let Some(given) = E::body_id(&body).filter(|given| *given != id) {
        return Err(ApiError::field(
            StatusCode::UNPROCESSABLE_ENTITY,
            "id",
            format!(
                "body field `id`: {given} is not the {} id in the path ({id})",
                E::KIND
            ),
        ));
    }
    let l = loaded(state)?;
    let before = fetch::<E>(&*l.store, id).await?;
    let after = E::from_body(body, id, Some(&before), &token.name, Timestamp::now())?;
    let stored = apply(l, token, Change::Replace { before, after }).await?;
    Ok(Json(stored))
}

/// Deletes the entity `raw` (admin); 204.
pub(super) async fn remove<E: Entity>(
    state: &AppState,
    token: &ApiToken,
    raw: &str,
) -> AppResult<StatusCode> {
    let id = path_id(E::KIND, raw)?;
    let l = loaded(state)?;
    let before = fetch::<E>(&*l.store, id).await?;
    apply(l, token, Change::Delete(before)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Checks, writes, swaps the snapshot in and records one change; returns
/// the entity as stored (the removed one for a delete).
async fn apply<E: Entity>(l: &Loaded, token: &ApiToken, change: Change<E>) -> AppResult<E> {
    // Changes are made one at a time: each is checked against, written to
    // and read back from the store with no other change in between.
    let _one_at_a_time = l.controller.changes().lock().await;
    let store = &*l.store;

    // The change on every stored entity must still make a snapshot.
    let mut entities = store.load_entities().await.map_err(ApiError::internal)?;
    {
        let items = E::items(&mut entities);
        match &change {
            Change::Create(v) => {
                let next = items.iter().map(E::id).max().unwrap_or(0).saturating_add(1);
                items.push(v.clone().with_id(next));
            }
            Change::Replace { after, .. } => {
                match items.iter_mut().find(|i| i.id() == after.id()) {
                    Some(slot) => *slot = after.clone(),
                    None => return Err(not_found::<E>(after.id())),
                }
            }
            Change::Delete(v) => {
                let before = items.len();
                items.retain(|i| i.id() != v.id());
                if items.len() == before {
                    return Err(not_found::<E>(v.id()));
                }
                E::cascade(&mut entities, v.id());
            }
        }
    }
    AccessSnapshot::build(entities).map_err(|e| match (&change, e) {
        // What is removed is still in use: a conflict, not a bad value.
        (Change::Delete(v), e @ BuildError::Dangling { .. }) => ApiError::new(
            StatusCode::CONFLICT,
            format!("{} is still referred to: {e}", v.label()),
        ),
        (_, e) => build_error(e),
    })?;

    let written = match &change {
        Change::Create(v) => E::create(store, v.clone()).await.map_err(store_error)?,
        Change::Replace { after, .. } => {
            E::update(store, after).await.map_err(store_error)?;
            after.clone()
        }
        Change::Delete(v) => {
            E::delete(store, v.id()).await.map_err(store_error)?;
            v.clone()
        }
    };
    // As stored (times keep the store's precision).
    let stored = match &change {
        Change::Delete(_) => written,
        _ => match E::get(store, written.id()).await {
            Ok(v) => v,
            Err(e) => {
                undo(store, &change, &written).await;
                return Err(ApiError::internal(e));
            }
        },
    };

    // Read back: what taps see from now on.
    let snapshot = match store.load_snapshot().await {
        Ok(s) => s,
        Err(e) => {
            undo(store, &change, &stored).await;
            return Err(match e {
                StoreError::Snapshot(b) => build_error(b),
                e => ApiError::internal(e),
            });
        }
    };

    let action = format!("{}.{}", E::KIND, change.action());
    let (sentence, data) = match &change {
        Change::Create(_) => (
            format!("{} created by {}", stored.label(), token.name),
            json!({ "after": stored }),
        ),
        Change::Replace { before, .. } => (
            format!("{} replaced by {}", stored.label(), token.name),
            json!({ "before": before, "after": stored }),
        ),
        Change::Delete(before) => (
            format!("{} deleted by {}", before.label(), token.name),
            json!({ "before": before }),
        ),
    };
    let mut event = NewEvent::admin(Timestamp::now(), &token.name, &action, sentence, data);
    stored.tag(&mut event);
    if let Err(e) = l.controller.log().append(event).await {
        // A change the log does not hold does not stay.
        undo(store, &change, &stored).await;
        return Err(ApiError::internal(format!(
            "the change was undone because its event could not be recorded: {e}"
        )));
    }
    l.controller.set_snapshot(snapshot);
    Ok(stored)
}

fn not_found<E: Entity>(id: i64) -> ApiError {
    ApiError::field(
        StatusCode::NOT_FOUND,
        "id",
        format!("{} {id} does not exist", E::KIND),
    )
}

/// Takes a written change back (best effort; logged when it fails).
async fn undo<E: Entity>(store: &dyn Store, change: &Change<E>, stored: &E) {
    let result = match change {
        Change::Create(_) => E::delete(store, stored.id()).await,
        Change::Replace { before, .. } => E::update(store, before).await,
        Change::Delete(before) => {
            let mut e = Entities::default();
            E::items(&mut e).push(before.clone());
            store.import_entities(&e).await
        }
    };
    if let Err(e) = result {
        tracing::error!(error = %e, kind = E::KIND, id = stored.id(), "a change could not be undone");
    }
}

/// `PUT /api/v1/doors/{id}/mode` (operator): stores the mode on the door,
/// records the command naming the token, then swaps the snapshot in (which
/// puts the door output in the mode).
pub(super) async fn set_mode(
    state: &AppState,
    token: &ApiToken,
    raw: &str,
    body: &Bytes,
) -> AppResult<Json<serde_json::Value>> {
    let id = path_id("door", raw)?;
    let body: schema::ModeCommand = json_body_required(body)?;
    let why = reason_text(body.reason)?;
    let l = loaded(state)?;
    // Changes are made one at a time: each is checked against, written to
    // and read back from the store with no other change in between.
    let _one_at_a_time = l.controller.changes().lock().await;
    let store = &*l.store;
    let before: access::Door = fetch(store, id).await?;
    let after = access::Door {
        mode: body.mode,
        ..before.clone()
    };
    store.update_door(&after).await.map_err(store_error)?;
    let snapshot = match store.load_snapshot().await {
        Ok(s) => s,
        Err(e) => {
            let _ = store.update_door(&before).await;
            return Err(store_error(e));
        }
    };
    let mut sentence = format!(
        "door {} (`{}`) set to mode {} (was {}) by {}",
        after.id, after.name, after.mode, before.mode, token.name
    );
    if let Some(w) = &why {
        sentence.push_str(": ");
        sentence.push_str(w);
    }
    let mut event =
        NewEvent::door_command(Timestamp::now(), &token.name, after.id, "mode", sentence);
    event.data = Some(json!({ "mode": after.mode, "previous": before.mode }));
    let event = match l.controller.log().append(event).await {
        Ok(id) => id,
        Err(e) => {
            if let Err(u) = store.update_door(&before).await {
                tracing::error!(error = %u, door = id, "a mode change could not be undone");
            }
            return Err(ApiError::internal(format!(
                "the mode was not changed because its event could not be recorded: {e}"
            )));
        }
    };
    l.controller.set_snapshot(snapshot);
    Ok(Json(
        json!({ "door": after.id, "mode": after.mode, "event": event }),
    ))
}

/// `GET /api/v1/tokens` (admin): names, roles and creation times, never the
/// hashes.
pub(super) async fn list_tokens(state: &AppState) -> AppResult<Json<serde_json::Value>> {
    let l = loaded(state)?;
    let tokens = l.store.list_tokens().await.map_err(store_error)?;
    let items: Vec<schema::Token> = tokens
        .into_iter()
        .map(|t| schema::Token {
            name: t.name,
            role: t.role,
            created_at: t.created_at,
        })
        .collect();
    Ok(Json(json!({ "items": items })))
}

/// `DELETE /api/v1/tokens/{name}` (admin): the token stops working at once.
pub(super) async fn delete_token(
    state: &AppState,
    token: &ApiToken,
    name: &str,
) -> AppResult<StatusCode> {
    let l = loaded(state)?;
    // Changes are made one at a time: each is checked against, written to
    // and read back from the store with no other change in between.
    let _one_at_a_time = l.controller.changes().lock().await;
    let store = &*l.store;
    let Some(gone) = store
        .list_tokens()
        .await
        .map_err(store_error)?
        .into_iter()
        .find(|t| t.name == name)
    else {
        return Err(ApiError::field(
            StatusCode::NOT_FOUND,
            "name",
            format!(
                "token `{}` does not exist",
                name.chars().take(64).collect::<String>()
            ),
        ));
    };
    store.delete_token(name).await.map_err(store_error)?;
    let event = NewEvent::admin(
        Timestamp::now(),
        &token.name,
        "token.delete",
        format!(
            "token `{}` ({}) deleted by {}",
            gone.name, gone.role, token.name
        ),
        json!({ "before": { "name": gone.name, "role": gone.role, "created_at": gone.created_at } }),
    );
    if let Err(e) = l.controller.log().append(event).await {
        if let Err(u) = store.create_token(&gone).await {
            tracing::error!(error = %u, token = %gone.name, "a token deletion could not be undone");
        }
        return Err(ApiError::internal(format!(
            "the token was not deleted because its event could not be recorded: {e}"
        )));
    }
    state.token_deleted();
    Ok(StatusCode::NO_CONTENT)
}

/// The five routes of one entity kind, documented for the OpenAPI document.
macro_rules! crud {
    ($module:ident, $E:ident, $Body:ident, $List:ident, $tag:tt, $list_path:tt, $one_path:tt,
     $list_op:tt, $get_op:tt, $create_op:tt, $replace_op:tt, $delete_op:tt) => {
        pub mod $module {
            use std::sync::Arc;

            use axum::body::Bytes;
            use axum::extract::{Path, State};
                        use axum::http::StatusCode;
            use axum::response::Response;
            use axum::{Extension, Json};
            use store::ApiToken;

            use crate::http::schema::{self, ErrorBody};
            use crate::http::AppResult;
            use crate::service::AppState;

            /// Every one, as stored (viewer).
            #[utoipa::path(get, path = $list_path, tag = $tag, operation_id = $list_op,
                security(("bearer" = [])),
                responses(
                    (status = 200, description = "Every one, as stored", body = schema::$List),
                    (status = 401, description = "No token, or an unknown one", body = ErrorBody),
                    (status = 503, description = "The service is starting", body = ErrorBody),
                ))]
            pub async fn list(State(state): State<Arc<AppState>>) -> AppResult<Json<serde_json::Value>> {
                super::list::<access::$E>(&state).await
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
                Path(id): Path<String>,
            ) -> AppResult<Json<access::$E>> {
                super::get_one::<access::$E>(&state, &id).await
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
                Extension(token): Extension<ApiToken>,
                body: Bytes,
            ) -> AppResult<Response> {
                super::create::<access::$E>(&state, &token, &body).await
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
                Extension(token): Extension<ApiToken>,
                Path(id): Path<String>,
                body: Bytes,
            ) -> AppResult<Json<access::$E>> {
                super::replace::<access::$E>(&state, &token, &id, &body).await
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
                Extension(token): Extension<ApiToken>,
                Path(id): Path<String>,
            ) -> AppResult<StatusCode> {
                super::remove::<access::$E>(&state, &token, &id).await
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
    "delete_holiday"
);
