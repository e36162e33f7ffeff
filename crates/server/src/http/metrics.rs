//! `GET /metrics` (viewer): the service's Prometheus metrics
//! ([`crate::metrics`]) as OpenMetrics text.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::auth::Viewer;
use super::error::AppResult;
use super::extract::loaded;
use crate::metrics::CONTENT_TYPE;
use crate::state::AppState;

/// `GET /metrics` (viewer).
#[utoipa::path(get, path = "/metrics", tag = "service",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "OpenMetrics text: taps by door, mechanism and result; latency per stage; trust store; CRL ages; cache hits; event-log commits; start-up", content_type = "application/openmetrics-text", body = String),
        (status = 401, description = "No token, or an unknown one", body = super::schema::ErrorBody),
    ))]
pub async fn scrape(State(state): State<Arc<AppState>>, _: Viewer) -> AppResult<Response> {
    let l = loaded(&state)?;
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], l.metrics.encode()).into_response())
}
