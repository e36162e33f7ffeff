//! `GET /healthz` (the process answers) and `GET /readyz` (everything is
//! loaded); no token. The start-up figures of `/readyz` (how many anchors
//! and credentials were loaded) are shown only to a request with a token.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
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
        (status = 200, description = "Ready; with a token, also the start-up times and counts", body = schema::Ready),
        (status = 503, description = "Still starting", body = schema::Ready),
    ))]
pub async fn readyz(State(state): State<Arc<AppState>>, request: Request) -> Response {
    match state.loaded() {
        Some(l) => {
            let (parts, _) = request.into_parts();
            let known = parts.headers.contains_key(header::AUTHORIZATION)
                && super::auth::require(&parts, &state, super::auth::Viewer::ROLE)
                    .await
                    .is_ok();
            if known {
                Json(json!({ "status": "ready", "startup": l.times })).into_response()
            } else {
                Json(json!({ "status": "ready" })).into_response()
            }
        }
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "starting" })),
        )
            .into_response(),
    }
}
