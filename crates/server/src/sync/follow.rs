//! The site's follower: keeps the site's part of the data as the central
//! has it.
//!
//! It connects to the first of `central.urls` that answers, with the
//! site's certificate. Without a position (a new site) it takes a snapshot
//! (`/sync/v1/snapshot`) and stores it, with its position, in one
//! transaction; then it reads the feed after its position
//! (`/sync/v1/feed?after=P`) for as long as the link lasts. A central that
//! answers `410` (the site was away longer than the feed keeps) sends it
//! back to a snapshot.
//!
//! Changes are applied through the site's change path
//! ([`crate::admin::AccessData::change`]): the snapshot taps decide on is
//! swapped after each, and the position goes into the same SQLite
//! transaction as the change, so a restart resumes exactly after the last
//! change applied. A change already applied (its position at or below the
//! stored one) is skipped. When several changes are pending (read but not
//! yet applied), their revocations and suspensions
//! ([`access::Delta::revocations`]) are applied first, in a transaction of
//! their own, then all of them in order. A snapshot likewise takes access
//! away first, then stores the rest.
//!
//! The CRLs the central downloaded and the OCSP answers it got come down
//! the same feed (`data` lines, and the snapshot's `revocation_data`;
//! `kind` `crl` or `ocsp`): they are stored (the latest of each
//! distribution point and of each certificate,
//! [`store::Tx::hold_revocation_data`]) in a transaction of their own
//! ahead of the other pending changes, then put in force through the
//! site's revocation work
//! ([`crate::revocation::Revocation::central_data_stored`]; at start-up,
//! [`crate::revocation::Revocation::load_central`]): the CRLs aged from
//! the central's download, the OCSP answers only once verified against
//! the site's own trust store (the central delivers them; the responder's
//! signature vouches for what they say).
//!
//! The site counts as connected (its status names the central, and the
//! uploader and reporter get the link) only once it has caught up: the
//! central sends a heartbeat as soon as everything pending is sent, and
//! the link is published after what came before it is applied. So a site
//! coming back has put in force what changed while it was away (a
//! revocation, a suspension) before it says it is back. (A central of the
//! release before sends its first heartbeat only after `heartbeat_ms`:
//! against it a site counts as connected that much later.)
//!
//! A failure (the central goes away, a silent link, a refusal) drops the
//! link; the follower tries the next central, waiting `retry_min_ms`
//! after each round through the list, doubling up to `retry_max_ms`.
//! Taps never wait on it: they decide on the snapshot in force.

use std::sync::Arc;
use std::time::Duration;

use access::jiff::Timestamp;
use access::{Delta, Entities};
use axum::body::Bytes;
use axum::http::{Method, StatusCode};
use futures_util::FutureExt;
use http_body_util::BodyExt;
use serde::Deserialize;
use serde_json::json;
use store::{ChangeFuture, NewEvent, RevocationData, Store, Tx};
use tokio::sync::watch;

use super::link::{Connector, Link};
use super::settings::CentralConfig;
use super::SyncError;
use crate::admin::{AccessData, ChangeError, Edit};

/// The actor of changes the central sends.
pub const ACTOR: &str = "central";

/// Where the follower is, for status and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FollowStatus {
    /// The last position applied.
    pub applied: Option<i64>,
    /// The central followed now (index into `central.urls`), if connected.
    pub central: Option<usize>,
    /// Snapshots taken since start.
    pub snapshots: u64,
    /// Why the last link ended.
    pub last_error: Option<String>,
    /// Set while the central refuses this site's release
    /// ([`super::version`]): why, and which side must be upgraded. The
    /// site keeps deciding on the data it holds.
    pub must_upgrade: Option<String>,
}

/// A site's follower (see the module's documentation).
#[derive(Debug)]
pub struct Follower {
    site: String,
    connector: Arc<Connector>,
    store: Store,
    access: Arc<AccessData>,
    silence: Duration,
    retry_min: Duration,
    retry_max: Duration,
    status: watch::Sender<FollowStatus>,
    link: watch::Sender<Option<Arc<Link>>>,
    /// Where the CRLs and OCSP answers the central sends are put in force.
    revocation: std::sync::OnceLock<Arc<crate::revocation::Revocation>>,
}

#[derive(Deserialize)]
struct SnapshotBody {
    pos: i64,
    part: Entities,
    /// The central's latest CRL of each distribution point and OCSP answer
    /// of each certificate.
    #[serde(default)]
    revocation_data: Vec<RevocationData>,
}

/// One line of the feed.
#[derive(Deserialize)]
#[serde(untagged)]
enum Line {
    Change {
        pos: i64,
        delta: Box<Delta>,
    },
    /// A CRL or an OCSP answer the central got.
    Data {
        pos: i64,
        data: Box<RevocationData>,
    },
    Heartbeat {
        #[allow(dead_code)]
        heartbeat: i64,
    },
}

/// What the central sends, stored through the change path.
struct Apply {
    what: What,
    /// The position reached, stored in the same transaction; none for
    /// revocations applied ahead.
    pos: Option<i64>,
    /// Only what takes access away, to entities already stored.
    revocations_only: bool,
    /// Revocation data the central downloaded, stored first.
    data: Vec<RevocationData>,
}

enum What {
    Delta(Delta),
    /// A snapshot: the whole part.
    Replace(Entities),
}

impl Edit for Apply {
    /// How many entities changed.
    type Output = usize;
    type Error = ChangeError;
    const CHECKED: bool = false;

    fn write(
        self,
        tx: &mut Tx,
        actor: String,
        now: Timestamp,
    ) -> ChangeFuture<'_, usize, ChangeError> {
        Box::pin(async move {
            if let Some(p) = self.pos {
                if tx.applied_position().await?.is_some_and(|a| a >= p) {
                    return Ok((0, Vec::new()));
                }
            }
            for d in &self.data {
                tx.hold_revocation_data(d).await?;
            }
            let snapshot = matches!(self.what, What::Replace(_));
            let delta = match self.what {
                What::Delta(d) => d,
                What::Replace(part) => Delta::between(&tx.load_entities().await?, &part),
            };
            let delta = if self.revocations_only {
                delta.revocations()
            } else {
                delta
            };
            let n = tx.apply_delta(&delta, self.revocations_only).await?;
            let mut events = Vec::new();
            if let Some(p) = self.pos {
                tx.set_applied_position(p).await?;
                if snapshot {
                    events.push(NewEvent::admin(
                        now,
                        &actor,
                        "sync.snapshot",
                        format!(
                            "the central's snapshot at position {p} stored ({n} entities changed)"
                        ),
                        json!({ "pos": p, "changed": n }),
                    ));
                }
            }
            Ok((n, events))
        })
    }
}

impl Follower {
    /// The follower of `[central]` for the site whose data is `store`,
    /// changed through `access`.
    pub fn new(
        cfg: &CentralConfig,
        store: Store,
        access: Arc<AccessData>,
    ) -> Result<Arc<Follower>, SyncError> {
        Self::with_connector(cfg, store, access, Connector::new(cfg)?)
    }

    /// The same, reaching the centrals through `connector`.
    pub fn with_connector(
        cfg: &CentralConfig,
        store: Store,
        access: Arc<AccessData>,
        connector: Connector,
    ) -> Result<Arc<Follower>, SyncError> {
        let connector = Arc::new(connector);
        Ok(Arc::new(Follower {
            site: cfg.site.clone(),
            connector,
            store,
            access,
            silence: Duration::from_millis(cfg.silence_ms),
            retry_min: Duration::from_millis(cfg.retry_min_ms),
            retry_max: Duration::from_millis(cfg.retry_max_ms),
            status: watch::channel(FollowStatus::default()).0,
            link: watch::channel(None).0,
            revocation: std::sync::OnceLock::new(),
        }))
    }

    /// Puts the CRLs and OCSP answers the central sends in force through
    /// `r` (the site's revocation work); set once, before [`Self::run`].
    pub fn set_revocation(&self, r: Arc<crate::revocation::Revocation>) {
        let _ = self.revocation.set(r);
    }

    /// Swaps in the revocation data `data` just stored.
    async fn revocation_data_stored(&self, data: &[RevocationData]) {
        if let Some(r) = self.revocation.get() {
            if let Err(e) = r.central_data_stored(data).await {
                tracing::warn!(error = %e, "the central's revocation data could not be put in force");
            }
        }
    }

    /// Where the follower is; changes as it goes.
    pub fn status(&self) -> watch::Receiver<FollowStatus> {
        self.status.subscribe()
    }

    /// The link to the central followed now (`None` while not connected):
    /// for other requests to the central ([`Link::send`]).
    pub fn link(&self) -> watch::Receiver<Option<Arc<Link>>> {
        self.link.subscribe()
    }

    /// Follows the centrals until `stop`.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        // Until the central confirms this site is current, its access
        // data's age is unknown ("never confirmed"), not "not applicable".
        if let Some(c) = self.access.controller() {
            c.follow_central(None);
        }
        if let Ok(p) = self.store.applied_position().await {
            self.status.send_modify(|s| s.applied = p);
        }
        let n = self.connector.endpoints().len();
        let mut i = 0;
        let mut wait = self.retry_min;
        loop {
            let link = Arc::new(self.connector.link(i));
            let before = self.status.borrow().applied;
            let ended = tokio::select! {
                r = self.session(&link) => r,
                _ = stop.wait_for(|s| *s) => return,
            };
            self.link.send_replace(None);
            let progressed = self.status.borrow().applied != before;
            let e = match ended {
                Ok(never) => match never {},
                Err(e) => e,
            };
            tracing::warn!(central = %link.endpoint().url, code = e.code(), error = %e, "link to the central ended");
            self.status.send_modify(|s| {
                s.central = None;
                s.last_error = Some(e.to_string());
            });
            if progressed {
                wait = self.retry_min;
            }
            if let SyncError::Version { reason, upgrade } = &e {
                self.must_upgrade(reason, upgrade).await;
                // Not until one side is upgraded: try again rarely.
                wait = self.retry_max;
            }
            i = (i + 1) % n;
            // A pause after each round through the list.
            if i == 0 || n == 1 {
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                wait = (wait * 2).min(self.retry_max);
            }
        }
    }

    /// One link: snapshot if needed, then the feed until it fails.
    async fn session(&self, link: &Arc<Link>) -> Result<std::convert::Infallible, SyncError> {
        let mut pos = match self.store.applied_position().await? {
            Some(p) => p,
            None => self.snapshot(link).await?,
        };
        let resp = loop {
            let req = link.request(
                Method::GET,
                &format!("/sync/v1/feed?after={pos}&data=true"),
                Bytes::new(),
            );
            let resp = link.stream(req).await?;
            match resp.status() {
                StatusCode::OK => break resp,
                StatusCode::GONE => {
                    tracing::info!(after = pos, "the central pruned the changes after this site's position; taking a snapshot");
                    pos = self.snapshot(link).await?;
                }
                s => {
                    let body = resp
                        .into_body()
                        .collect()
                        .await
                        .map(|b| b.to_bytes())
                        .unwrap_or_default();
                    return Err(SyncError::refused(s.as_u16(), &body));
                }
            }
        };
        tracing::info!(central = %link.endpoint().url, after = pos, "following the central");
        // The link is published (the uploader and the reporter use it, and
        // the site counts as connected) only once the central has said
        // nothing is pending beyond what is applied: a site that is
        // "back" has already applied what changed while it was away, so
        // a revocation made meanwhile is in force before its first tap.
        let mut published = false;
        let mut body = resp.into_body();
        let mut buf: Vec<u8> = Vec::new();
        loop {
            let frame = tokio::time::timeout(self.silence, body.frame())
                .await
                .map_err(|_| {
                    SyncError::Link(format!(
                        "the central was silent for {} ms",
                        self.silence.as_millis()
                    ))
                })?;
            let mut ended = take(frame, &mut buf)?;
            // Whatever else has arrived already: pending together.
            while !ended {
                match body.frame().now_or_never() {
                    None => break,
                    Some(f) => ended = take(f, &mut buf)?,
                }
            }
            let mut pending = Vec::new();
            let mut data = Vec::new();
            // Whether the central said it has sent everything (a
            // heartbeat). The feed is one ordered stream, so every line
            // before the heartbeat was read with it and is applied below;
            // its position is not compared with the site's, because a
            // central may leave out rows a site's release does not take
            // (revocation data of a later kind) and still count them.
            let mut quiet_at = None;
            while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=nl).collect();
                match serde_json::from_slice::<Line>(&line) {
                    Ok(Line::Change { pos, delta }) => pending.push((pos, *delta)),
                    Ok(Line::Data { pos, data: d }) => data.push(RevocationData { pos, ..*d }),
                    Ok(Line::Heartbeat { heartbeat }) => quiet_at = Some(heartbeat),
                    Err(e) => return Err(SyncError::Protocol(format!("a feed line: {e}"))),
                }
            }
            if buf.len() > 64 << 20 {
                return Err(SyncError::Protocol("a feed line longer than 64 MiB".into()));
            }
            let applied = !pending.is_empty() || !data.is_empty();
            pos = self.apply(pos, pending, data).await?;
            // The site's access data is current as of now when a change
            // was just applied or the central confirmed nothing is pending
            // beyond what is applied (what stale-data door policies age).
            let caught_up = quiet_at.is_some();
            if applied || caught_up {
                self.changes_current();
            }
            if caught_up && !published {
                published = true;
                self.link.send_replace(Some(link.clone()));
                self.status.send_modify(|s| {
                    s.central = Some(link.index());
                    s.must_upgrade = None;
                });
                tracing::info!(central = %link.endpoint().url, pos, "caught up with the central");
            }
            if ended {
                return Err(SyncError::Link("the central closed the feed".into()));
            }
        }
    }

    /// Shows that the central refuses this site's release, and records it
    /// (a `sync.version` event) when that is news.
    async fn must_upgrade(&self, reason: &str, upgrade: &str) {
        let sentence = format!("the central refuses this site's release: {reason}");
        let news = self.status.borrow().must_upgrade.as_deref() != Some(sentence.as_str());
        if !news {
            return;
        }
        tracing::error!(upgrade, "{sentence}; deciding on the data held until then");
        self.status
            .send_modify(|s| s.must_upgrade = Some(sentence.clone()));
        let event = NewEvent::admin(
            Timestamp::now(),
            ACTOR,
            "sync.version",
            sentence,
            json!({ "code": super::version::VersionRefusal::CODE, "upgrade": upgrade,
                    "schema": super::version::current() }),
        );
        let recorded = match self.access.controller() {
            Some(c) => c.log().append(event).await.map(|_| ()),
            None => self.store.append_events(&[event]).await.map(|_| ()),
        };
        if let Err(e) = recorded {
            tracing::error!(error = %e, "the sync.version event could not be recorded");
        }
    }

    /// Tells the controller the central's changes are applied as of now.
    fn changes_current(&self) {
        if let Some(c) = self.access.controller() {
            c.note_changes_current(c.now());
        }
    }

    /// Applies the pending changes after `pos`, revocations first (the
    /// central's CRLs and OCSP answers, then what takes access away);
    /// returns the position reached.
    async fn apply(
        &self,
        pos: i64,
        pending: Vec<(i64, Delta)>,
        data: Vec<RevocationData>,
    ) -> Result<i64, SyncError> {
        let data: Vec<RevocationData> = data.into_iter().filter(|d| d.pos > pos).collect();
        let data_pos = data.iter().map(|d| d.pos).max();
        if !data.is_empty() {
            self.access
                .change(
                    ACTOR,
                    Apply {
                        what: What::Delta(Delta::default()),
                        pos: None,
                        revocations_only: true,
                        data: data.clone(),
                    },
                )
                .await?;
            self.revocation_data_stored(&data).await;
        }
        let Some(plan) = plan(pos, pending) else {
            if let Some(p) = data_pos {
                // Only revocation data: its position.
                self.access
                    .change(
                        ACTOR,
                        Apply {
                            what: What::Delta(Delta::default()),
                            pos: Some(p),
                            revocations_only: false,
                            data: Vec::new(),
                        },
                    )
                    .await?;
                self.status.send_modify(|s| s.applied = Some(p));
                return Ok(p);
            }
            return Ok(pos);
        };
        let top = data_pos.map_or(plan.pos, |p| p.max(plan.pos));
        if let Some(revocations) = plan.revocations {
            self.access
                .change(
                    ACTOR,
                    Apply {
                        what: What::Delta(revocations),
                        pos: None,
                        revocations_only: true,
                        data: Vec::new(),
                    },
                )
                .await?;
        }
        self.access
            .change(
                ACTOR,
                Apply {
                    what: What::Delta(plan.all),
                    pos: Some(top),
                    revocations_only: false,
                    data: Vec::new(),
                },
            )
            .await?;
        self.status.send_modify(|s| s.applied = Some(top));
        Ok(top)
    }

    /// Takes and stores a snapshot; returns its position.
    async fn snapshot(&self, link: &Link) -> Result<i64, SyncError> {
        let resp = link
            .send(link.request(Method::GET, "/sync/v1/snapshot?data=true", Bytes::new()))
            .await?;
        if resp.status() != StatusCode::OK {
            return Err(SyncError::refused(resp.status().as_u16(), resp.body()));
        }
        let mut snap: SnapshotBody = serde_json::from_slice(resp.body())
            .map_err(|e| SyncError::Protocol(format!("the snapshot: {e}")))?;
        if !snap.part.sites.iter().any(|s| s.name == self.site) {
            return Err(SyncError::Protocol(format!(
                "the snapshot is not site `{}`'s part",
                self.site
            )));
        }
        let data = snap.revocation_data.clone();
        for revocations_only in [true, false] {
            self.access
                .change(
                    ACTOR,
                    Apply {
                        what: What::Replace(snap.part.clone()),
                        pos: (!revocations_only).then_some(snap.pos),
                        revocations_only,
                        data: if revocations_only {
                            std::mem::take(&mut snap.revocation_data)
                        } else {
                            Vec::new()
                        },
                    },
                )
                .await?;
            if revocations_only && !data.is_empty() {
                self.revocation_data_stored(&data).await;
            }
        }
        self.status.send_modify(|s| {
            s.applied = Some(snap.pos);
            s.snapshots += 1;
        });
        self.changes_current();
        tracing::info!(pos = snap.pos, "stored the central's snapshot");
        Ok(snap.pos)
    }
}

/// How pending changes are applied: the revocations among them first
/// (when there are several), then all of them, in order, with the last
/// position.
#[derive(Debug, PartialEq, Eq)]
struct Plan {
    revocations: Option<Delta>,
    all: Delta,
    pos: i64,
}

/// The plan for the changes of `pending` after `pos` (those at or below it
/// are applied already); `None` when none is left.
fn plan(pos: i64, pending: Vec<(i64, Delta)>) -> Option<Plan> {
    let mut last = pos;
    let mut fresh = Vec::new();
    for (p, d) in pending {
        if p > last {
            last = p;
            fresh.push(d);
        }
    }
    if fresh.is_empty() {
        return None;
    }
    let revocations = (fresh.len() > 1)
        .then(|| {
            fresh
                .iter()
                .fold(Delta::default(), |acc, d| acc.then(d.revocations()))
        })
        .filter(|r| !r.is_empty());
    Some(Plan {
        revocations,
        all: fresh.into_iter().fold(Delta::default(), Delta::then),
        pos: last,
    })
}

/// Adds a frame's data to `buf`; whether the body ended.
fn take(
    frame: Option<Result<hyper::body::Frame<Bytes>, hyper::Error>>,
    buf: &mut Vec<u8>,
) -> Result<bool, SyncError> {
    match frame {
        None => Ok(true),
        Some(Err(e)) => Err(SyncError::Link(format!("reading the feed: {e}"))),
        Some(Ok(f)) => {
            if let Ok(data) = f.into_data() {
                buf.extend_from_slice(&data);
            }
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use access::{CardholderId, CardholderStatus, ReaderId};

    fn holder(id: i64, active: bool) -> access::Cardholder {
        access::Cardholder {
            id: CardholderId(id),
            name: format!("h{id}"),
            status: if active {
                CardholderStatus::Active
            } else {
                CardholderStatus::Suspended {
                    reason: "lost".into(),
                }
            },
            valid_from: None,
            valid_until: None,
        }
    }

    fn reader(id: i64) -> access::Reader {
        access::Reader {
            id: ReaderId(id),
            door: access::DoorId(1),
            name: "r".into(),
            connection: format!("sim:{id}"),
        }
    }

    fn put_holder(h: access::Cardholder) -> Delta {
        let mut d = Delta::default();
        d.put.cardholders.push(h);
        d
    }

    #[test]
    fn pending_suspensions_go_first_and_applied_changes_are_skipped() {
        let mut rename = Delta::default();
        rename.put.readers.push(reader(4));
        let pending = vec![
            (3, put_holder(holder(9, true))),
            (5, rename),
            (6, put_holder(holder(1, false))),
            (7, put_holder(holder(2, true))),
        ];
        let p = plan(3, pending).unwrap();
        assert_eq!(p.pos, 7);
        // Position 3 was applied already: its change is not repeated.
        assert!(!p
            .all
            .put
            .cardholders
            .iter()
            .any(|h| h.id == CardholderId(9)));
        // The suspension alone goes ahead; everything goes after.
        let r = p.revocations.unwrap();
        assert_eq!(r.put.cardholders, vec![holder(1, false)]);
        assert!(r.put.readers.is_empty());
        assert_eq!(p.all.put.readers.len(), 1);
        assert_eq!(p.all.put.cardholders.len(), 2);
        // One change alone: one transaction.
        let p = plan(0, vec![(1, put_holder(holder(1, false)))]).unwrap();
        assert!(p.revocations.is_none());
        assert!(plan(7, vec![(7, Delta::default())]).is_none());
    }

    #[test]
    fn a_suspension_lifted_later_in_the_same_batch_ends_lifted() {
        let p = plan(
            0,
            vec![
                (1, put_holder(holder(1, false))),
                (2, put_holder(holder(1, true))),
            ],
        )
        .unwrap();
        // Suspended first (as of position 1), then active as of 2.
        assert_eq!(
            p.revocations.unwrap().put.cardholders,
            vec![holder(1, false)]
        );
        assert_eq!(p.all.put.cardholders, vec![holder(1, true)]);
    }
}
