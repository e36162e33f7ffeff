//! The central side of events going up: [`post_events`] takes a site's
//! batch ([`wire::UploadBatch`](super::wire::UploadBatch)) on
//! `POST /sync/v1/events`, stores the events not stored yet
//! ([`store::Store::ingest_site_events`]: `ON CONFLICT (site, site_seq) DO
//! NOTHING`, late ones marked, a clock-skew event raised) and answers with
//! the highest sequence up to which it holds every event of the site.
//!
//! Batches that reach the central together share one transaction: the
//! route's writer task ([`IngestGroup`], one per [`router`]) takes every
//! checked batch waiting (up to [`GROUP_MAX_BATCHES`] batches of distinct
//! sites and [`GROUP_MAX_EVENTS`] events) into one
//! [`store::Store::ingest_site_batches`], so the sites' uploads share the
//! event-id allocation and the commit instead of queueing for them one by
//! one. Should that transaction fail, each batch of it is tried again on
//! its own, so one batch the database refuses fails only its own request.
//!
//! The handler trusts the [`SiteIdentity`] in the request's extensions:
//! the link that authenticated the site (its certificate) puts it there;
//! [`router`] is mounted behind it. The batch itself never names the site.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, OnceLock};

use access::jiff::{SignedDuration, Timestamp};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use bytes::Bytes;
use serde::Deserialize;
use store::{IngestPolicy, SiteEvent, Store, StoreError};
use tokio::sync::{mpsc, oneshot};

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

/// Refuses a batch this central cannot take (nothing of it is stored).
fn check(batch: &UploadBatch) -> Result<(), IngestError> {
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
    Ok(())
}

fn store_ingest<'a>(
    site: &'a SiteIdentity,
    batch: &UploadBatch,
    received_at: Timestamp,
) -> store::Ingest<'a> {
    store::Ingest {
        site: site.name(),
        floor: batch.floor.max(0),
        sent_at: batch.sent_at,
        received_at,
    }
}

fn answer(site: &SiteIdentity, ack: &store::Ack) -> UploadAck {
    if ack.late > 0 {
        tracing::info!(site = site.name(), late = ack.late, "late events received");
    }
    UploadAck::from_store(ack)
}

/// Checks `batch` and stores it for `site`, received at `received_at`, in
/// a transaction of its own.
pub async fn ingest(
    state: &IngestState,
    site: &SiteIdentity,
    batch: &UploadBatch,
    received_at: Timestamp,
) -> Result<UploadAck, IngestError> {
    check(batch)?;
    let ack = state
        .store
        .ingest_site_events(
            store_ingest(site, batch, received_at),
            &batch.events,
            &state.policy,
        )
        .await?;
    Ok(answer(site, &ack))
}

/// The most batches one group transaction carries.
pub const GROUP_MAX_BATCHES: usize = 128;
/// The most events one group transaction carries (a batch larger than
/// this still goes, alone).
pub const GROUP_MAX_EVENTS: usize = 16_384;

/// A checked batch waiting for the writer.
struct Pending {
    site: SiteIdentity,
    batch: UploadBatch,
    received_at: Timestamp,
    done: oneshot::Sender<Result<store::Ack, StoreError>>,
}

/// The writer that stores the batches reaching one central instance
/// together, started on the first batch and ending when the last route
/// holding it is dropped.
#[derive(Debug, Clone)]
pub struct IngestGroup {
    state: IngestState,
    tx: Arc<OnceLock<mpsc::Sender<Pending>>>,
}

impl IngestGroup {
    pub fn new(state: IngestState) -> Self {
        IngestGroup {
            state,
            tx: Arc::new(OnceLock::new()),
        }
    }

    /// Checks `batch` and stores it for `site` with whatever other batches
    /// are waiting.
    pub async fn ingest(
        &self,
        site: &SiteIdentity,
        batch: UploadBatch,
        received_at: Timestamp,
    ) -> Result<UploadAck, IngestError> {
        check(&batch)?;
        let tx = self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::channel(4 * GROUP_MAX_BATCHES);
            tokio::spawn(group_writer(self.state.clone(), rx));
            tx
        });
        let (done, answered) = oneshot::channel();
        let pending = Pending {
            site: site.clone(),
            batch,
            received_at,
            done,
        };
        let stopped = || IngestError::Store(StoreError::WriterStopped);
        tx.send(pending).await.map_err(|_| stopped())?;
        let ack = answered.await.map_err(|_| stopped())??;
        Ok(answer(site, &ack))
    }
}

/// Takes every batch waiting into one transaction, one site's batches one
/// group after another in the order they came.
async fn group_writer(state: IngestState, mut rx: mpsc::Receiver<Pending>) {
    let mut held: VecDeque<Pending> = VecDeque::new();
    loop {
        if held.is_empty() {
            match rx.recv().await {
                Some(p) => held.push_back(p),
                None => return,
            }
        }
        let mut group: Vec<Pending> = Vec::new();
        let mut events = 0usize;
        // Sites in the group or with a batch held back: a later batch of
        // theirs waits too.
        let mut taken: HashSet<SiteIdentity> = HashSet::new();
        let mut kept: VecDeque<Pending> = VecDeque::new();
        let mut full = false;
        let mut offer = |p: Pending,
                         group: &mut Vec<Pending>,
                         kept: &mut VecDeque<Pending>,
                         full: &mut bool| {
            let n = p.batch.events.len();
            let fits = group.is_empty()
                || (group.len() < GROUP_MAX_BATCHES && events + n <= GROUP_MAX_EVENTS);
            if taken.insert(p.site.clone()) && fits {
                events += n;
                group.push(p);
            } else {
                *full |= !fits;
                kept.push_back(p);
            }
        };
        while let Some(p) = held.pop_front() {
            offer(p, &mut group, &mut kept, &mut full);
        }
        while !full {
            match rx.try_recv() {
                Ok(p) => offer(p, &mut group, &mut kept, &mut full),
                Err(_) => break,
            }
        }
        held = kept;
        store_group(&state, group).await;
    }
}

async fn store_group(state: &IngestState, group: Vec<Pending>) {
    if group.len() > 1 {
        let batches: Vec<(store::Ingest<'_>, &[SiteEvent])> = group
            .iter()
            .map(|p| {
                (
                    store_ingest(&p.site, &p.batch, p.received_at),
                    p.batch.events.as_slice(),
                )
            })
            .collect();
        match state
            .store
            .ingest_site_batches(&batches, &state.policy)
            .await
        {
            Ok(acks) => {
                drop(batches);
                for (p, ack) in group.into_iter().zip(acks) {
                    // A site that gave up waiting sends again.
                    let _ = p.done.send(Ok(ack));
                }
                return;
            }
            Err(e) => {
                tracing::warn!(batches = group.len(), error = %e, "group of site batches failed, storing each alone");
            }
        }
    }
    for p in group {
        let r = state
            .store
            .ingest_site_events(
                store_ingest(&p.site, &p.batch, p.received_at),
                &p.batch.events,
                &state.policy,
            )
            .await;
        let _ = p.done.send(r);
    }
}

/// `POST /sync/v1/events`: the batch of the site the link authenticated.
pub async fn post_events(
    State(group): State<IngestGroup>,
    Extension(site): Extension<SiteIdentity>,
    body: Bytes,
) -> Result<Json<UploadAck>, IngestError> {
    let received_at = Timestamp::now();
    let batch: UploadBatch =
        serde_json::from_slice(&body).map_err(|e| IngestError::Malformed(e.to_string()))?;
    match group.ingest(&site, batch, received_at).await {
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
        .with_state(IngestGroup::new(state))
}
