//! Doors: commands (momentary unlock, mode, a PIN typed at a card + PIN
//! door) and the dashboard's door reads.
//!
//! - `POST /api/v1/doors/{id}/unlock`, `PUT /api/v1/doors/{id}/mode`
//!   (operator) and `POST /api/v1/doors/{id}/keypad` (keypad);
//! - `POST` / `DELETE /api/v1/sites/{id}/lockdown` (admin): every door of
//!   the site `locked` in one change, and lifted again;
//! - `GET /api/v1/doors/status` (viewer): every door with its mode, its
//!   latest tap, whether its readers are connected and its position
//!   (open or closed, from its position switch), all from memory
//!   ([`crate::status`]);
//! - `GET /api/v1/doors/{id}/latency?window=1h|1d` (viewer): percentiles
//!   of the door's taps in the window, per stage and per time bucket
//!   ([`crate::stats`]), from the stored stage tables (at most
//!   [`LATENCY_MAX_EVENTS`] taps, newest first; `truncated` says when more
//!   were there) and the `signal` stage the service keeps in memory for
//!   the last day.

use std::sync::Arc;

use access::jiff::Timestamp;
use access::DoorId;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::json;
use store::{Role, Store};
use utoipa::ToSchema;

use super::auth::{Admin, Keypad, Operator, Viewer};
use super::entities::{path_id, reason_text};
use super::error::{ApiError, AppResult};
use super::extract::{door_id, json_body, json_body_required, loaded, FromQuery, QueryParams};
use super::schema::{self, ErrorBody};
use crate::admin::{SetLockdown, SetMode};
use crate::door::CommandError;
use crate::keypad::{EntryError, Place};
use crate::state::AppState;
use crate::stats::{self, TapTimes};

/// The most tap events one latency answer reads.
pub const LATENCY_MAX_EVENTS: usize = 50_000;

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
        (status = 409, description = "The door is in locked mode and `override` was not set", body = ErrorBody),
        (status = 422, description = "A field is wrong or unknown; `field` names it", body = ErrorBody),
    ))]
pub async fn unlock(
    State(state): State<Arc<AppState>>,
    Operator(token): Operator,
    Path(id): Path<String>,
    body: Bytes,
) -> AppResult<Json<serde_json::Value>> {
    let door = door_id(&id)?;
    let body: schema::UnlockCommand = json_body(&body)?;
    if let Some(r) = &body.reason {
        if r.len() > 1000 {
            return Err(ApiError::unprocessable(
                "reason",
                "body field `reason`: at most 1000 bytes",
            ));
        }
    }
    let l = loaded(&state)?;
    match l
        .controller
        .unlock(
            door,
            &token.name,
            body.reason.as_deref(),
            body.override_locked,
        )
        .await
    {
        Ok(event) => Ok(Json(json!({
            "door": door,
            "event": event,
            "unlock_ms": l.controller.unlock_duration().as_millis() as u64,
        }))),
        Err(CommandError::UnknownDoor(d)) => Err(ApiError::not_found(
            "id",
            format!("door {d} does not exist"),
        )),
        Err(e @ CommandError::Locked(_)) => Err(ApiError::conflict(
            "override",
            format!("{e}: send {{\"override\": true}} to release it anyway"),
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
pub async fn door_mode(
    State(state): State<Arc<AppState>>,
    Operator(token): Operator,
    Path(id): Path<String>,
    body: Bytes,
) -> AppResult<Json<serde_json::Value>> {
    let id = path_id("door", &id)?;
    let body: schema::ModeCommand = json_body_required(&body)?;
    let reason = reason_text(body.reason)?;
    let l = loaded(&state)?;
    let ((_, after), events) = l
        .access
        .change(
            &token.name,
            SetMode {
                door: access::DoorId(id),
                mode: body.mode,
                reason,
            },
        )
        .await?;
    Ok(Json(
        json!({ "door": after.id, "mode": after.mode, "event": events.first() }),
    ))
}

/// `POST /api/v1/sites/{id}/lockdown` (admin): locks the site down in one
/// change (an admin event naming the token): every door of it is driven
/// `locked`, no tap is granted there and scheduled unlocks do not apply; an
/// operator's `{"override": true}` unlock still opens a door.
#[utoipa::path(post, path = "/api/v1/sites/{id}/lockdown", tag = "sites",
    security(("bearer" = [])),
    params(("id" = i64, Path, description = "The site")),
    request_body(content = Option<schema::LockdownCommand>, description = "Optional: why, for the log"),
    responses(
        (status = 200, description = "Stored, recorded and applied to every door of the site", body = schema::LockdownAnswer),
        (status = 400, description = "The body is not JSON, or the id not a number", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "The token is not an admin token", body = ErrorBody),
        (status = 404, description = "No such site", body = ErrorBody),
        (status = 422, description = "A field is wrong or unknown; `field` names it", body = ErrorBody),
    ))]
pub async fn lockdown(
    State(state): State<Arc<AppState>>,
    Admin(token): Admin,
    Path(id): Path<String>,
    body: Bytes,
) -> AppResult<Json<schema::LockdownAnswer>> {
    set_lockdown(&state, &token.name, &id, &body, true).await
}

/// `DELETE /api/v1/sites/{id}/lockdown` (admin): lifts the site's lockdown;
/// its doors go back to their own modes and schedules.
#[utoipa::path(delete, path = "/api/v1/sites/{id}/lockdown", tag = "sites",
    security(("bearer" = [])),
    params(("id" = i64, Path, description = "The site")),
    request_body(content = Option<schema::LockdownCommand>, description = "Optional: why, for the log"),
    responses(
        (status = 200, description = "Stored, recorded and applied", body = schema::LockdownAnswer),
        (status = 400, description = "The body is not JSON, or the id not a number", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "The token is not an admin token", body = ErrorBody),
        (status = 404, description = "No such site", body = ErrorBody),
        (status = 422, description = "A field is wrong or unknown; `field` names it", body = ErrorBody),
    ))]
pub async fn lift_lockdown(
    State(state): State<Arc<AppState>>,
    Admin(token): Admin,
    Path(id): Path<String>,
    body: Bytes,
) -> AppResult<Json<schema::LockdownAnswer>> {
    set_lockdown(&state, &token.name, &id, &body, false).await
}

async fn set_lockdown(
    state: &AppState,
    actor: &str,
    id: &str,
    body: &Bytes,
    lockdown: bool,
) -> AppResult<Json<schema::LockdownAnswer>> {
    let id = path_id("site", id)?;
    let body: schema::LockdownCommand = json_body(body)?;
    let reason = reason_text(body.reason)?;
    let l = loaded(state)?;
    let ((_, after), events) = l
        .access
        .change(
            actor,
            SetLockdown {
                site: access::SiteId(id),
                lockdown,
                reason,
            },
        )
        .await?;
    Ok(Json(schema::LockdownAnswer {
        site: after.id.0,
        lockdown: after.lockdown,
        event: events.first().map(|e| e.0),
    }))
}

/// `POST /api/v1/doors/{id}/keypad` (keypad, operator or admin): a PIN typed
/// on the keypad of a card + PIN door, for the tap waiting at the door (at
/// the token's reader, when it is bound to one) or the next tap there
/// within `keypad.pin_first_ms`; no other tap ever gets it. A keypad token
/// reaches only the doors it was created for (403 elsewhere). Each entry is
/// a `keypad-pin` door-command event naming the token (never the digits),
/// committed before the PIN is handed on; and the tap that used it names
/// the token too. After `keypad.max_wrong` wrong PINs the token's entries
/// are refused (429, `Retry-After`) for `keypad.cooldown_ms`.
#[utoipa::path(post, path = "/api/v1/doors/{id}/keypad", tag = "doors",
    security(("bearer" = [])),
    params(("id" = i64, Path, description = "The door (a pki-auth door)")),
    request_body = schema::KeypadEntry,
    responses(
        (status = 202, description = "Recorded, then handed to the tap waiting at the door, or kept for the next tap there", body = crate::keypad::Entered),
        (status = 400, description = "The body is not JSON, or the id not a number", body = ErrorBody),
        (status = 401, description = "No token, an unknown one, or an expired one", body = ErrorBody),
        (status = 403, description = "A viewer token, or a keypad token not bound to this door (or reader)", body = ErrorBody),
        (status = 404, description = "No such door", body = ErrorBody),
        (status = 422, description = "Not 6 to 8 digits, the door takes no PIN, or the reader is not at the door; `field` names it", body = ErrorBody),
        (status = 429, description = "Too many of the token's PINs were wrong lately: refused for a while (`Retry-After`)", body = ErrorBody),
    ))]
pub async fn keypad(
    State(state): State<Arc<AppState>>,
    Keypad(token): Keypad,
    Path(id): Path<String>,
    body: Bytes,
) -> AppResult<Response> {
    let door = door_id(&id)?;
    let body: schema::KeypadEntry = json_body(&body)?;
    let pin = zeroize::Zeroizing::new(
        body.pin
            .ok_or_else(|| ApiError::unprocessable("pin", "body field `pin`: missing"))?,
    );
    let l = loaded(&state)?;
    let snapshot = l.controller.snapshot();
    let Some(d) = snapshot.door(door) else {
        return Err(ApiError::not_found(
            "id",
            format!("door {door} does not exist"),
        ));
    };
    // A keypad token is bound to the doors (and reader) of its keypad.
    if token.role == Role::Keypad && !token.doors.contains(&door) {
        let message = if token.doors.is_empty() {
            format!(
                "keypad token `{}` is bound to no door; create keypad tokens with `pivgate token create --role keypad --door ID`",
                token.name
            )
        } else {
            format!(
                "keypad token `{}` is bound to door(s) {}, not to door {door}",
                token.name,
                token
                    .doors
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return Err(ApiError::Forbidden { message });
    }
    let asked = body.reader.map(access::ReaderId);
    let reader = match (token.reader, asked) {
        (Some(bound), Some(r)) if bound != r => {
            return Err(ApiError::Forbidden {
                message: format!(
                    "keypad token `{}` is bound to reader {bound}, not to reader {r}",
                    token.name
                ),
            })
        }
        (bound, r) => bound.or(r),
    };
    if let Some(r) = reader {
        if snapshot.reader(r).is_none_or(|x| x.door != door) {
            return Err(ApiError::unprocessable(
                "reader",
                format!("reader {r} is not a reader of door {door}"),
            ));
        }
    }
    if d.mechanism != access::Mechanism::PkiAuth {
        return Err(ApiError::unprocessable(
            "id",
            format!(
                "door `{}` requires {}, which takes no PIN (only pki-auth doors do)",
                d.name, d.mechanism
            ),
        ));
    }
    // A refused entry as an answer: 422, or 429 with `Retry-After`.
    let refused = |e: EntryError| -> Response {
        match e {
            EntryError::Format => {
                ApiError::unprocessable("pin", format!("body field `pin`: {e}")).into_response()
            }
            EntryError::CoolingDown { retry_after_s, .. } => {
                let mut r = ApiError::TooManyRequests {
                    message: e.to_string(),
                }
                .into_response();
                r.headers_mut()
                    .insert(axum::http::header::RETRY_AFTER, retry_after_s.into());
                r
            }
        }
    };
    if !(6..=8).contains(&pin.len()) || !pin.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(refused(EntryError::Format));
    }
    if let Err(e) = l.keypads.check(&token.name) {
        return Ok(refused(e));
    }
    // The entry is on record before any card can be given it.
    let mut event = store::NewEvent::door_command(
        Timestamp::now(),
        &token.name,
        door,
        "keypad-pin",
        format!(
            "PIN entered at door `{}` by keypad token `{}`",
            d.name, token.name
        ),
    );
    event.reader = reader;
    l.controller
        .log()
        .append(event)
        .await
        .map_err(ApiError::internal)?;
    let place = Place {
        door,
        reader,
        by: Some(token.name.clone()),
    };
    match l.keypads.enter_at(place, pin) {
        Ok(entered) => Ok((StatusCode::ACCEPTED, Json(entered)).into_response()),
        Err(e) => Ok(refused(e)),
    }
}
/// Every door, and how current the data they decide from is.
#[derive(Debug, Serialize, ToSchema)]
pub struct DoorStatusList {
    pub items: Vec<DoorStatus>,
    pub data_age: DataAges,
}

/// How old the site's data is (see `access::freshness`): the revocation
/// data (as of the least recently confirmed CRL or OCSP answer in force:
/// a CRL's last successful download, a configured CRL file's thisUpdate,
/// an OCSP answer's thisUpdate) and the access changes from the central
/// (as of the last change applied or confirmation that none is pending).
#[derive(Debug, Serialize, ToSchema)]
pub struct DataAges {
    pub revocation: DataAge,
    pub changes: DataAge,
    /// The maximum (seconds) of doors that set none (`[offline]
    /// max_staleness`); `null`: such doors are never stale.
    pub default_max_staleness_s: Option<u64>,
}

/// How old one kind of data is.
#[derive(Debug, Serialize, ToSchema)]
pub struct DataAge {
    /// `confirmed` (current as of `as_of`), `never` (depended on but never
    /// confirmed: beyond any maximum) or `not-applicable` (a site without a
    /// central; revocation checking off): never stale.
    pub state: String,
    /// When it was last known current.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub as_of: Option<Timestamp>,
    /// Seconds since `as_of`.
    pub age_s: Option<u64>,
}

impl DataAge {
    pub(crate) fn of(as_of: access::AsOf, now: Timestamp) -> DataAge {
        match as_of {
            access::AsOf::NotApplicable => DataAge {
                state: "not-applicable".into(),
                as_of: None,
                age_s: None,
            },
            access::AsOf::Never => DataAge {
                state: "never".into(),
                as_of: None,
                age_s: None,
            },
            access::AsOf::At { at } => DataAge {
                state: "confirmed".into(),
                as_of: Some(at),
                age_s: as_of.age(now).secs(),
            },
        }
    }
}

/// A door, its latest tap and its readers.
#[derive(Debug, Serialize, ToSchema)]
pub struct DoorStatus {
    pub door: i64,
    pub name: String,
    /// The site (by id).
    pub site: i64,
    /// `normal`, `unlocked` or `locked`: the door's own mode.
    pub mode: String,
    /// The mode the door is driven in now: its own mode, `locked` while its
    /// site is locked down, or `unlocked` by its unlock schedule.
    pub driven_mode: String,
    /// Why `driven_mode` is not the door's own mode: `lockdown` (its site
    /// is locked down), `schedule` (inside a window of its unlock
    /// schedule) or `first-card` (the same, opened by the window's first
    /// granted tap); `null` when the door is driven in its own mode.
    pub driven_by: Option<String>,
    /// When the schedule's window ends (`schedule`, `first-card`).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub driven_until: Option<Timestamp>,
    /// `pki-cak`, `pki-auth` or `chuid`.
    pub mechanism: String,
    /// The latest tap, granted or refused; `null` before the first.
    pub last_tap: Option<LastTap>,
    pub readers: Vec<ReaderState>,
    /// The door's position, when a reader reports its position switch
    /// (`[osdp.ports.readers.door]`); `null` otherwise.
    pub position: Option<DoorPositionState>,
    /// Whether the data the door decides from is older than its maximum.
    pub stale: bool,
    /// The door's maximum age (seconds), its own or the site's; `null`:
    /// none.
    pub max_staleness_s: Option<u64>,
    /// `decide`, `refuse` or `recent-only`.
    pub stale_policy: String,
    /// The interlock groups (`[[interlocks]]`) the door is in, and whether
    /// another door of each keeps it from releasing now; empty when it is
    /// in none.
    pub interlocks: Vec<InterlockState>,
}

/// A door's interlock group, now.
#[derive(Debug, Serialize, ToSchema)]
pub struct InterlockState {
    /// The group's name.
    pub group: String,
    /// The other door of the group that keeps this one from releasing
    /// now (a tap would be refused with code `interlock`, a
    /// request-to-exit not released); `null` when it may release.
    pub blocked_by: Option<InterlockBlock>,
}

/// The door that blocks a release, and why.
#[derive(Debug, Serialize, ToSchema)]
pub struct InterlockBlock {
    pub door: i64,
    pub name: String,
    /// `open` (its position switch), `released` (a grant's, an unlock's or
    /// an exit's pulse not over) or `held-unlocked` (its mode).
    pub because: String,
}

/// A door's position from its position switch.
#[derive(Debug, Serialize, ToSchema)]
pub struct DoorPositionState {
    /// `true` open, `false` closed, `null` before the first report.
    pub open: Option<bool>,
    /// `unknown`, `secure`, `released`, `open`, `pre-alarm`, `held-open`,
    /// `forced` or `unlocked`.
    pub state: String,
    /// The last change of any of the door's inputs.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_change: Option<Timestamp>,
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
pub async fn doors_status(
    State(state): State<Arc<AppState>>,
    _: Viewer,
) -> AppResult<Json<DoorStatusList>> {
    let l = loaded(&state)?;
    let snapshot = l.controller.snapshot();
    let offline = l.controller.offline();
    let now = l.controller.now();
    let instant = std::time::Instant::now();
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
            let driven = l.controller.door_mode(d.id);
            let (driven_by, driven_until) = driven_by(&snapshot, d, driven, now);
            DoorStatus {
                door: d.id.0,
                name: d.name.clone(),
                site: d.site.0,
                mode: d.mode.as_str().to_string(),
                driven_mode: driven.as_str().to_string(),
                driven_by: driven_by.map(str::to_string),
                driven_until,
                mechanism: d.mechanism.as_str().to_string(),
                last_tap,
                readers,
                position: l.doors.as_ref().and_then(|w| w.position(d.id)).map(|p| {
                    DoorPositionState {
                        open: p.open,
                        state: p.phase.to_string(),
                        last_change: p.last_change,
                    }
                }),
                interlocks: interlock_states(l.controller.interlocks(), &snapshot, d.id, instant),
                stale: offline.stale(d, now).is_some(),
                max_staleness_s: offline.max_for(d),
                stale_policy: d.stale_policy.as_str().to_string(),
            }
        })
        .collect();
    items.sort_by_key(|d| d.door);
    Ok(Json(DoorStatusList {
        items,
        data_age: DataAges {
            revocation: DataAge::of(offline.freshness.revocation, now),
            changes: DataAge::of(offline.freshness.changes, now),
            default_max_staleness_s: offline.default_max_staleness_s,
        },
    }))
}

/// Why `door` is driven in `driven` rather than its own mode, and until
/// when: the site's lockdown, or its unlock schedule's window (ending at
/// the window's next change).
fn driven_by(
    snapshot: &access::AccessSnapshot,
    door: &access::Door,
    driven: access::DoorMode,
    now: Timestamp,
) -> (Option<&'static str>, Option<Timestamp>) {
    if driven == door.mode {
        return (None, None);
    }
    if snapshot.site(door.site).is_some_and(|s| s.lockdown) {
        return (Some("lockdown"), None);
    }
    match snapshot.unlock_window(door.id, now) {
        Some(w) if w.open && driven == access::DoorMode::Unlocked => (
            Some(if door.first_card_unlock {
                "first-card"
            } else {
                "schedule"
            }),
            Some(w.next_change),
        ),
        _ => (None, None),
    }
}

/// `door`'s interlock groups and what blocks it in each, at `now`.
fn interlock_states(
    interlocks: Option<&Arc<crate::interlock::Interlocks>>,
    snapshot: &Arc<access::AccessSnapshot>,
    door: DoorId,
    now: std::time::Instant,
) -> Vec<InterlockState> {
    let Some(i) = interlocks else {
        return Vec::new();
    };
    i.blocked(snapshot, door, now)
        .into_iter()
        .map(|(group, by)| InterlockState {
            group,
            blocked_by: by.map(|(d, b)| InterlockBlock {
                door: d.0,
                name: snapshot
                    .door(d)
                    .map_or_else(|| d.to_string(), |d| d.name.clone()),
                because: match b {
                    access::interlock::Blocking::Open => "open",
                    access::interlock::Blocking::Released => "released",
                    access::interlock::Blocking::Unlocked => "held-unlocked",
                }
                .to_string(),
            }),
        })
        .collect()
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
    pub total: stats::Percentiles,
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

/// The window of a latency answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LatencyWindow {
    /// The last hour, in 5-minute buckets (the default).
    #[default]
    Hour,
    /// The last day, in 1-hour buckets.
    Day,
}

impl LatencyWindow {
    pub fn as_str(self) -> &'static str {
        match self {
            LatencyWindow::Hour => "1h",
            LatencyWindow::Day => "1d",
        }
    }

    /// The window's and a bucket's length, in seconds.
    fn seconds(self) -> (i64, i64) {
        match self {
            LatencyWindow::Hour => (3600, 300),
            LatencyWindow::Day => (86_400, 3600),
        }
    }
}

/// The query of `GET /api/v1/doors/{id}/latency`: `window` (`1h` or `1d`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LatencyQuery {
    pub window: LatencyWindow,
}

impl FromQuery for LatencyQuery {
    fn from_query(q: &QueryParams) -> AppResult<Self> {
        q.only(&["window"])?;
        let window = match q.raw("window") {
            None | Some("1h") => LatencyWindow::Hour,
            Some("1d") => LatencyWindow::Day,
            Some(v) => {
                return Err(ApiError::bad_request(
                    "window",
                    format!("query parameter `window`: `{v}` is not `1h` or `1d`"),
                ))
            }
        };
        Ok(LatencyQuery { window })
    }
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
    _: Viewer,
    Path(id): Path<String>,
    q: QueryParams,
) -> AppResult<Json<Latency>> {
    let door = door_id(&id)?;
    let LatencyQuery { window } = LatencyQuery::from_query(&q)?;
    let (window_s, bucket_s) = window.seconds();
    let l = loaded(&state)?;
    if l.controller.snapshot().door(door).is_none() {
        return Err(ApiError::not_found(
            "id",
            format!("door {door} does not exist"),
        ));
    }
    let now = Timestamp::now().as_second();
    let end = (now.div_euclid(bucket_s) + 1) * bucket_s;
    let since = end - window_s;
    let ts = |s: i64| Timestamp::from_second(s).map_err(ApiError::internal);
    let (mut taps, truncated) =
        read_taps(&l.store, door, ts(since)?, ts(end)?, LATENCY_MAX_EVENTS).await?;
    let s = stats::latency(
        &mut taps,
        &l.signals.door(door),
        stats::Window {
            since,
            until: end,
            bucket_s,
        },
    );
    let stages = s
        .stages
        .into_iter()
        .map(|x| StageLatency {
            stage: x.stage.as_str().to_string(),
            p50_ms: x.percentiles.p50_ms,
            p95_ms: x.percentiles.p95_ms,
            count: x.count,
        })
        .collect();
    let buckets = s
        .buckets
        .into_iter()
        .map(|b| {
            Ok(LatencyBucket {
                start: ts(b.start)?,
                taps: b.taps,
                p50_ms: b.percentiles.p50_ms,
                p95_ms: b.percentiles.p95_ms,
            })
        })
        .collect::<AppResult<Vec<_>>>()?;
    Ok(Json(Latency {
        door: door.0,
        window: window.as_str().to_string(),
        since: ts(since)?,
        until: ts(end)?,
        taps: taps.len(),
        truncated,
        total: s.total,
        stages,
        bucket_s: bucket_s as u64,
        buckets,
        signal_known: s.signal_known,
    }))
}

/// The tap events of `door` in `[since, until)`, newest first, at most
/// `cap`; whether more were there. One indexed range read
/// ([`Store::door_taps`]), each tap's stage table parsed as it comes: the
/// cost follows the window's taps (at most `cap`), not the log's size.
async fn read_taps(
    store: &Store,
    door: DoorId,
    since: Timestamp,
    until: Timestamp,
    cap: usize,
) -> AppResult<(Vec<TapTimes>, bool)> {
    let mut out = Vec::new();
    store
        .door_taps(door, since, until, cap as u64 + 1, |id, time, data| {
            out.push(TapTimes {
                id,
                time,
                stages: data.map(stats::stages_of_json).unwrap_or_default(),
            });
            Ok(())
        })
        .await
        .map_err(ApiError::internal)?;
    let more = out.len() > cap;
    out.truncate(cap);
    Ok((out, more))
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::EventKind;

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
            passback: false,
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
