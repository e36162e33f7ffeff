//! Door alarms ([`crate::alarm`], run by [`crate::doorwatch`]).
//!
//! - `GET /api/v1/alarms` (viewer): the alarms not cleared, oldest first,
//!   then the history: the newest alarm events of the log (raised,
//!   returned, acknowledged, cleared), newest first;
//! - `POST /api/v1/alarms/{id}/ack` (operator) with `{"note": …}`: an
//!   operator acknowledges the alarm; the event names the token and keeps
//!   the note. An alarm whose cause already ended is cleared by it.

use std::sync::Arc;

use access::jiff::Timestamp;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use store::{Direction, Event, EventKind, EventQuery};
use utoipa::ToSchema;

use super::auth::{Operator, Viewer};
use super::error::{ApiError, AppResult};
use super::extract::{json_body_required, loaded};
use super::schema::ErrorBody;
use crate::alarm::AckError;
use crate::state::AppState;

/// How many alarm events the history holds.
pub const HISTORY: u32 = 100;

/// An alarm not cleared yet.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActiveAlarm {
    /// The id of the event that raised it.
    pub id: i64,
    pub door: i64,
    /// `door-forced`, `door-held-open`, `tamper`, `input-cut` or
    /// `input-shorted`.
    pub kind: String,
    /// For line faults: `contact`, `request-to-exit` or `tamper`.
    pub input: Option<String>,
    /// `active` (nobody acknowledged it), `acknowledged` (its cause goes
    /// on) or `returned` (its cause ended; it waits for an
    /// acknowledgement).
    pub state: String,
    #[schema(value_type = String, format = DateTime)]
    pub raised: Timestamp,
}

/// The alarms.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlarmList {
    /// Not cleared, oldest first.
    pub active: Vec<ActiveAlarm>,
    /// The newest alarm events, newest first (at most 100).
    #[schema(value_type = Vec<Object>)]
    pub history: Vec<Event>,
}

/// The body of `POST /api/v1/alarms/{id}/ack`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AckBody {
    /// What the operator found or did (1 to 1000 bytes).
    pub note: String,
}

/// `GET /api/v1/alarms` (viewer).
#[utoipa::path(get, path = "/api/v1/alarms", tag = "alarms",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The alarms not cleared, then the history", body = AlarmList),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
    ))]
pub async fn alarms(State(state): State<Arc<AppState>>, _: Viewer) -> AppResult<Json<AlarmList>> {
    let l = loaded(&state)?;
    let active = l
        .doors
        .as_ref()
        .map(|w| w.active())
        .unwrap_or_default()
        .into_iter()
        .map(|a| ActiveAlarm {
            id: a.id,
            door: a.door.0,
            kind: a.kind.to_string(),
            input: a.input.map(str::to_string),
            state: a.state.as_str().to_string(),
            raised: a.raised,
        })
        .collect();
    let page = l
        .store
        .query_events(&EventQuery {
            kind: Some(EventKind::Alarm),
            direction: Direction::Backward,
            limit: HISTORY,
            ..EventQuery::default()
        })
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(AlarmList {
        active,
        history: page.events,
    }))
}

/// `POST /api/v1/alarms/{id}/ack` (operator).
#[utoipa::path(post, path = "/api/v1/alarms/{id}/ack", tag = "alarms",
    security(("bearer" = [])),
    params(("id" = i64, Path, description = "The alarm (the id of the event that raised it)")),
    request_body = AckBody,
    responses(
        (status = 202, description = "Acknowledged; the event follows on the log", body = Object),
        (status = 400, description = "No body, or not JSON", body = ErrorBody),
        (status = 401, description = "No token, or an unknown one", body = ErrorBody),
        (status = 403, description = "The token is not an operator's or an admin's", body = ErrorBody),
        (status = 404, description = "No such alarm is open", body = ErrorBody),
        (status = 409, description = "The alarm is acknowledged already", body = ErrorBody),
        (status = 422, description = "The note is missing, empty or too long", body = ErrorBody),
    ))]
pub async fn acknowledge(
    State(state): State<Arc<AppState>>,
    Operator(token): Operator,
    Path(id): Path<String>,
    body: Bytes,
) -> AppResult<(axum::http::StatusCode, Json<serde_json::Value>)> {
    let id: i64 = id.parse().map_err(|e| {
        ApiError::bad_request(
            "id",
            format!("path parameter `id`: `{id}` is not an alarm id: {e}"),
        )
    })?;
    let body: AckBody = json_body_required(&body)?;
    let note = body.note.trim();
    if note.is_empty() || note.len() > 1000 {
        return Err(ApiError::unprocessable(
            "note",
            "body field `note`: 1 to 1000 bytes saying what was found or done",
        ));
    }
    let l = loaded(&state)?;
    let Some(watch) = &l.doors else {
        return Err(ApiError::not_found(
            "id",
            format!("no alarm {id}: no door reports its inputs"),
        ));
    };
    match watch.acknowledge(id, &token.name, note) {
        Ok(()) => Ok((
            axum::http::StatusCode::ACCEPTED,
            Json(serde_json::json!({ "alarm": id, "acknowledged_by": token.name })),
        )),
        Err(e @ AckError::Unknown(_)) => Err(ApiError::not_found("id", e.to_string())),
        Err(e @ AckError::Already(_)) => Err(ApiError::conflict("id", e.to_string())),
    }
}
