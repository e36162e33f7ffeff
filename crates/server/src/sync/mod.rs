//! Many sites: a central and the sites that follow it.
//!
//! A **central** is `pivgate serve` on PostgreSQL with `[sites]`; any
//! number of central instances share the one database and hold nothing
//! else. A **site** is `pivgate serve` on its embedded SQLite with
//! `[central]`: its readers, decisions and event log are those of a single
//! site; its access data is the part the central sends it.
//!
//! Down, changes flow through the change feed ([`store::feed`]): each
//! transaction that changes a site's part writes that site's delta under a
//! commit-ordered position. A site follows the feed over one mutual-TLS
//! link ([`link`]), applying each delta and its position in one SQLite
//! transaction through its change path ([`follow`]); the central serves the
//! feed and the snapshots new sites start from ([`feed`]), each site only
//! its own part, named by the certificate it presented.
//!
//! **Adding to the link.** On the central, [`central_router`] is the one
//! place routes under `/sync/v1/` are added: every request it routes
//! carries a [`link::Peer`] extension, the site name its verified
//! certificate holds (resolve it to a site entity with
//! [`feed::Central::site_of`], which refuses unknown sites with an event).
//! On a site, [`link::Link`] sends a request to the central the site
//! follows ([`link::Link::send`]), authenticated by the site's certificate;
//! the follower publishes the link it holds through
//! [`follow::Follower::link`].
//!
//! | module | what |
//! |---|---|
//! | [`settings`] | `[sites]` and `[central]` |
//! | [`link`] | the central's mutual-TLS listener, the site's connector |
//! | [`feed`] | the central's `/sync/v1/feed` and `/sync/v1/snapshot` |
//! | [`follow`] | the site's follower |
//! | [`upload`] | the site's uploader: its events up, exactly once |
//! | [`ingest`] | the central's `/sync/v1/events` |
//! | [`refused`] | `sync.refused` events, limited per peer |
//! | [`wire`] | what the uploader and the ingest exchange |
//! | [`report`] | the site's reports of itself to the central |
//! | [`board`] | the central's view of every site: link, lag, backlog, ages, skew |
//! | [`version`] | sites and centrals of different releases |
//!
//! Up, each site event is keyed by (site, the event's id at the site): the
//! central inserts it `ON CONFLICT DO NOTHING` and acknowledges the highest
//! gap-free sequence; the site re-sends from there after any failure.

pub mod board;
pub mod feed;
pub mod follow;
pub mod ingest;
pub mod link;
pub mod refused;
pub mod report;
pub mod run;
pub mod settings;
pub mod upload;
pub mod version;
pub mod wire;

use std::sync::Arc;

/// Why the link between a site and a central failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A setting cannot be used (a file, a key); names the key.
    #[error("`{key}`: {problem}")]
    Invalid { key: &'static str, problem: String },
    /// Connecting, TLS, or HTTP failed.
    #[error("{0}")]
    Link(String),
    /// The central answered with an error.
    #[error("the central answered {status}: {body}")]
    Refused { status: u16, body: String },
    /// The central sent something this site cannot read.
    #[error("the central sent what cannot be read: {0}")]
    Protocol(String),
    /// The site's database failed.
    #[error("database: {0}")]
    Store(#[from] store::StoreError),
    /// The site's change path refused what the central sent.
    #[error("applying the central's change failed: {0}")]
    Apply(#[from] crate::admin::ChangeError),
    /// The central does not serve a site of this release
    /// ([`version`]); `upgrade` names the side to upgrade.
    #[error("{reason}")]
    Version { reason: String, upgrade: String },
}

impl SyncError {
    /// A stable code, for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            SyncError::Invalid { .. } => "invalid-setting",
            SyncError::Link(_) => "link-failed",
            SyncError::Refused { .. } => "refused",
            SyncError::Protocol(_) => "protocol",
            SyncError::Store(_) => "database",
            SyncError::Apply(_) => "apply-failed",
            SyncError::Version { .. } => version::VersionRefusal::CODE,
        }
    }

    /// The central's error answer `status` with `body`: a version refusal
    /// when it is one, else [`SyncError::Refused`].
    pub fn refused(status: u16, body: &[u8]) -> SyncError {
        match version::refusal_in(status, body) {
            Some((reason, upgrade)) => SyncError::Version { reason, upgrade },
            None => SyncError::Refused {
                status,
                body: String::from_utf8_lossy(body).chars().take(512).collect(),
            },
        }
    }
}

/// The central's routes for its sites: the feed and snapshots, and
/// whatever else sites send or fetch (add routes here). Each feed served
/// and each site report is recorded on `board`.
pub fn central_router(
    central: Arc<feed::Central>,
    up: ingest::IngestConfig,
    board: Arc<board::Board>,
) -> axum::Router {
    let ingest_state = ingest::IngestState {
        store: central.store().clone(),
        policy: up.policy(),
    };
    let guard = central.clone();
    // A site uploads its own events only: the site its certificate names,
    // resolved (and refused with an event when unknown) as for the feed.
    let up = ingest::router(ingest_state).layer(axum::middleware::from_fn(
        move |mut req: axum::extract::Request, next: axum::middleware::Next| {
            let central = guard.clone();
            async move {
                use axum::response::IntoResponse;
                let Some(peer) = req.extensions().get::<link::Peer>().cloned() else {
                    return axum::http::StatusCode::FORBIDDEN.into_response();
                };
                match central.site_of(&peer, None).await {
                    Ok(site) => {
                        req.extensions_mut()
                            .insert(ingest::SiteIdentity::new(&site.name));
                        next.run(req).await
                    }
                    Err(refused) => refused.into_response(),
                }
            }
        },
    ));
    let reports = board::router(central.clone(), board.clone());
    // Every request says the site's schema: served in its form, or
    // refused with `sync-version` (and an event); every answer says ours.
    let guard = central.clone();
    let tracked = feed::router(central).layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            board::track_feed(board.clone(), req, next)
        },
    ));
    tracked
        .merge(up)
        .merge(reports)
        .layer(axum::middleware::from_fn(
            move |mut req: axum::extract::Request, next: axum::middleware::Next| {
                let central = guard.clone();
                async move {
                    use axum::response::IntoResponse;
                    let mut resp = match version::form_of(req.headers()) {
                        Ok(form) => {
                            req.extensions_mut().insert(form);
                            next.run(req).await
                        }
                        Err(refused) => {
                            if let Some(peer) = req.extensions().get::<link::Peer>() {
                                central.version_refused(peer, &refused).await;
                            }
                            refused.into_response()
                        }
                    };
                    version::stamp(resp.headers_mut());
                    resp
                }
            },
        ))
}
