//! `GET /metrics` (viewer): the service's Prometheus metrics
//! ([`crate::metrics`]) as OpenMetrics text, or in the Prometheus text
//! format 0.0.4 to a scraper whose `Accept` names `text/plain` and not
//! OpenMetrics.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};

use super::auth::Viewer;
use super::error::AppResult;
use super::extract::loaded;
use crate::metrics::{to_prometheus_text, CONTENT_TYPE, TEXT_CONTENT_TYPE};
use crate::state::AppState;

/// `GET /metrics` (viewer).
#[utoipa::path(get, path = "/metrics", tag = "service",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "OpenMetrics text: taps by door, mechanism and result; latency per stage; trust store; CRL ages; cache hits; event-log commits; start-up", content_type = "application/openmetrics-text", body = String),
        (status = 401, description = "No token, or an unknown one", body = super::schema::ErrorBody),
    ))]
pub async fn scrape(
    State(state): State<Arc<AppState>>,
    _: Viewer,
    headers: HeaderMap,
) -> AppResult<Response> {
    let l = loaded(&state)?;
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    // A central's per-site series come from the sites' status read now.
    if let Some(board) = &l.sites {
        if let Err(e) = board.status().await {
            tracing::warn!(error = %e, "reading the sites' status for the metrics failed");
        }
    }
    let text = l.metrics.encode();
    if accept.contains("text/plain") && !accept.contains("application/openmetrics-text") {
        return Ok((
            [(header::CONTENT_TYPE, TEXT_CONTENT_TYPE)],
            to_prometheus_text(&text),
        )
            .into_response());
    }
    Ok(([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response())
}
