//! `GET /healthz` (the process answers) and `GET /readyz` (everything is
//! loaded); no token.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::schema;
use crate::state::AppState;

/// The process answers.
#[utoipa::path(get, path = "/healthz", tag = "service",
    responses((status = 200, description = "The process answers", body = schema::Health)))]
pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

/// Everything is loaded: taps and the API work.
#[utoipa::path(get, path = "/readyz", tag = "service",
    responses(
        (status = 200, description = "Ready, with the start-up times", body = schema::Ready),
        (status = 503, description = "Still starting", body = schema::Ready),
    ))]
pub async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    match state.loaded() {
        Some(l) => Json(json!({ "status": "ready", "startup": l.times })).into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "starting" })),
        )
            .into_response(),
    }
}
