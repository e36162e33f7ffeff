//! The central side of events going up: [`post_events`] takes a site's
//! batch ([`wire::UploadBatch`](super::wire::UploadBatch)) on
//! `POST /sync/v1/events`, stores the events not stored yet
//! ([`store::Store::ingest_site_events`]: `ON CONFLICT (site, site_seq) DO
//! NOTHING`, late ones marked, a clock-skew event raised) and answers with
//! the highest sequence up to which it holds every event of the site.
//!
//! The handler trusts the [`SiteIdentity`] in the request's extensions:
//! the link that authenticated the site (its certificate) puts it there;
//! [`router`] is mounted behind it. The batch itself never names the site.

use std::sync::Arc;

use access::jiff::{SignedDuration, Timestamp};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use bytes::Bytes;
use serde::Deserialize;
use store::{IngestPolicy, Store, StoreError};

use super::wire::{self, Refusal, UploadAck, UploadBatch};

/// The site a request comes from, as the link authenticated it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SiteIdentity(pub Arc<str>);

impl SiteIdentity {
    pub fn new(name: &str) -> Self {
        SiteIdentity(name.into())
    }

    pub fn name(&self) -> &str {
        &self.0
    }
}

/// How the central treats what sites upload (for its configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// An event received more than this many seconds after its site time
    /// is marked late.
    pub late_after_secs: u32,
    /// A site whose clock is further than this many seconds from the
    /// central's raises a `site.clock-skew` event.
    pub max_skew_secs: u32,
}

impl Default for IngestConfig {
    fn default() -> Self {
        let p = IngestPolicy::default();
        IngestConfig {
            late_after_secs: p.late_after.as_secs() as u32,
            max_skew_secs: p.max_skew.as_secs() as u32,
        }
    }
}

impl IngestConfig {
    pub fn policy(&self) -> IngestPolicy {
        IngestPolicy {
            late_after: SignedDuration::from_secs(i64::from(self.late_after_secs)),
            max_skew: SignedDuration::from_secs(i64::from(self.max_skew_secs)),
        }
    }
}

/// What the handler needs.
#[derive(Debug, Clone)]
pub struct IngestState {
    pub store: Store,
    pub policy: IngestPolicy,
}

/// Why a batch was refused. Nothing of a refused batch is stored.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(
        "this central speaks version {}, the batch is version {found}",
        wire::VERSION
    )]
    Version { found: u32 },
    #[error(
        "a batch carries at most {} events, this one {found}",
        wire::MAX_EVENTS
    )]
    TooLarge { found: usize },
    #[error("sequence {seq} is not a site sequence (they start at 1)")]
    Sequence { seq: i64 },
    #[error("the batch cannot be read: {0}")]
    Malformed(String),
    #[error("the central's database failed: {0}")]
    Store(#[from] StoreError),
}

impl IngestError {
    /// A stable code (also the answer's `code`).
    pub fn code(&self) -> &'static str {
        match self {
            IngestError::Version { .. } => "sync-version",
            IngestError::TooLarge { .. } => "batch-too-large",
            IngestError::Sequence { .. } => "bad-sequence",
            IngestError::Malformed(_) => "malformed-batch",
            IngestError::Store(_) => "database",
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            IngestError::Version { .. }
            | IngestError::Sequence { .. }
            | IngestError::Malformed(_) => StatusCode::BAD_REQUEST,
            IngestError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            IngestError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

impl IntoResponse for IngestError {
    fn into_response(self) -> Response {
        let body = Refusal {
            code: self.code().to_string(),
            reason: self.to_string(),
        };
        (self.status(), Json(body)).into_response()
    }
}

/// Checks `batch` and stores it for `site`, received at `received_at`.
pub async fn ingest(
    state: &IngestState,
    site: &SiteIdentity,
    batch: &UploadBatch,
    received_at: Timestamp,
) -> Result<UploadAck, IngestError> {
    if batch.v != wire::VERSION {
        return Err(IngestError::Version { found: batch.v });
    }
    if batch.events.len() > wire::MAX_EVENTS {
        return Err(IngestError::TooLarge {
            found: batch.events.len(),
        });
    }
    if let Some(e) = batch.events.iter().find(|e| e.seq < 1) {
        return Err(IngestError::Sequence { seq: e.seq });
    }
    let ack = state
        .store
        .ingest_site_events(
            store::Ingest {
                site: site.name(),
                floor: batch.floor.max(0),
                sent_at: batch.sent_at,
                received_at,
            },
            &batch.events,
            &state.policy,
        )
        .await?;
    if ack.late > 0 {
        tracing::info!(site = site.name(), late = ack.late, "late events received");
    }
    Ok(UploadAck::from_store(&ack))
}

/// `POST /sync/v1/events`: the batch of the site the link authenticated.
pub async fn post_events(
    State(state): State<IngestState>,
    Extension(site): Extension<SiteIdentity>,
    body: Bytes,
) -> Result<Json<UploadAck>, IngestError> {
    let received_at = Timestamp::now();
    let batch: UploadBatch =
        serde_json::from_slice(&body).map_err(|e| IngestError::Malformed(e.to_string()))?;
    match ingest(&state, &site, &batch, received_at).await {
        Ok(ack) => Ok(Json(ack)),
        Err(e) => {
            tracing::warn!(site = site.name(), code = e.code(), error = %e, "site batch refused");
            Err(e)
        }
    }
}

/// The route, to mount behind the layer that authenticates sites and puts
/// their [`SiteIdentity`] in the request's extensions.
pub fn router(state: IngestState) -> Router {
    Router::new()
        .route(wire::EVENTS_PATH, post(post_events))
        .layer(DefaultBodyLimit::max(wire::MAX_BODY))
        .with_state(state)
}
