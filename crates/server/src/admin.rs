//! The one change path for access data: every change (the API, enrollment,
//! re-validation, the CLI, door modes, token deletion) is an [`Edit`] handed
//! to [`AccessData::change`], which
//!
//! 1. takes the change lock (changes are made one at a time),
//! 2. checks the edit against every stored entity read afresh (the access
//!    snapshot must still build: a door names an existing site, …),
//! 3. writes the change and its audit events in **one database
//!    transaction** (through the event log's writer when the service runs,
//!    so the events are published live in order with the taps'), and
//! 4. reads the snapshot back and swaps it into the controller: the next
//!    tap sees the change.
//!
//! A change whose transaction fails leaves nothing behind: neither the
//! change nor its event. HTTP maps [`ChangeError`] to answers in one place
//! (`http`); nothing here knows HTTP.

use std::sync::Arc;

use access::jiff::Timestamp;
use access::{AccessSnapshot, BuildError, DoorId, DoorMode, Entities};
use serde_json::json;
use store::{ApiToken, ChangeFuture, EventId, EventLog, NewEvent, Record, RecordId, Store};
use store::{StoreError, Tx};

use crate::door::Controller;

/// Why a change was refused or failed. Each variant says what a person can
/// do about it; `field` names the input at fault where there is one.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    /// The entity the change names does not exist.
    #[error("{kind} {id} does not exist")]
    NotFound {
        kind: &'static str,
        id: String,
        field: &'static str,
    },
    /// A value is refused.
    #[error("{message}")]
    Invalid {
        field: Option<&'static str>,
        message: String,
    },
    /// The change collides with stored data (a unique value taken, an
    /// entity still referred to).
    #[error("{message}")]
    Conflict {
        field: Option<&'static str>,
        message: String,
    },
    /// The change would leave the access data inconsistent.
    #[error("the change would leave the access data inconsistent: {0}")]
    Inconsistent(BuildError),
    /// The change was made against a version of the entity that is no
    /// longer the stored one: someone else changed it meanwhile.
    #[error("{0}")]
    Stale(String),
    /// The database failed; nothing was changed.
    #[error("{0}")]
    Store(StoreError),
    /// At a site following a central, the access data is the central's:
    /// changed there, never locally (it would be undone by the central's
    /// next change, and the central would not know of it).
    #[error(
        "this site's access data is managed by its central ({central}): make the change there"
    )]
    ManagedByCentral { central: String },
}

impl ChangeError {
    /// A stable code for the refusals that carry one.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            ChangeError::ManagedByCentral { .. } => Some(MANAGED_BY_CENTRAL),
            _ => None,
        }
    }
}

/// The code of [`ChangeError::ManagedByCentral`].
pub const MANAGED_BY_CENTRAL: &str = "managed-by-central";

impl From<StoreError> for ChangeError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { kind, id } => ChangeError::NotFound {
                kind,
                id,
                field: "id",
            },
            StoreError::Conflict { .. } | StoreError::Reference { .. } => ChangeError::Conflict {
                field: None,
                message: e.to_string(),
            },
            StoreError::Invalid { field, .. } => ChangeError::Invalid {
                field: Some(field),
                message: e.to_string(),
            },
            StoreError::Snapshot(b) => ChangeError::Inconsistent(b),
            e @ StoreError::Stale { .. } => ChangeError::Stale(e.to_string()),
            e => ChangeError::Store(e),
        }
    }
}

/// One change to the stored data: what it must not break, and what it
/// writes.
pub trait Edit: Send + 'static {
    /// What the change gives back (the entity as stored, …).
    type Output: Send + 'static;
    type Error: From<StoreError> + Send + 'static;
    /// Whether the change can make the access data inconsistent: then
    /// [`check`](Self::check) is given every stored entity, read afresh
    /// under the change lock.
    const CHECKED: bool = true;
    /// Whether the change touches what taps decide on (the snapshot is
    /// then read back and swapped in after the commit).
    const ACCESS: bool = true;

    /// Whether the change edits data a central manages, and the error
    /// refusing it at a site that follows `central` (see
    /// [`AccessData::managed_by`]); `None` (the default): the change is the
    /// site's own (tokens, re-validation results, the central's data as
    /// the follower applies it).
    fn managed_by_central(_central: &str) -> Option<Self::Error> {
        None
    }

    /// Refuses the change when it would not leave consistent data; may
    /// resolve what the write needs (ids found by name, …).
    fn check(&mut self, _entities: Entities) -> Result<(), Self::Error> {
        Ok(())
    }

    /// Writes the change in `tx` and returns its result and its audit
    /// events, which commit in the same transaction.
    fn write(
        self,
        tx: &mut Tx,
        actor: String,
        now: Timestamp,
    ) -> ChangeFuture<'_, Self::Output, Self::Error>;
}

/// The change path: the store, the event log's writer and the controller
/// whose snapshot a change swaps.
pub struct AccessData {
    store: Store,
    /// The running service's event log (changes are committed by its
    /// writer, in order with the taps' events, and published live); `None`
    /// for tools that change the database with no service running.
    log: Option<EventLog>,
    controller: Option<Arc<Controller>>,
    /// Held from the check to the swap: otherwise a snapshot read before
    /// another change could be swapped in after it and hide it.
    lock: tokio::sync::Mutex<()>,
    /// At a site, the central whose data this is (see [`Self::managed_by`]).
    central: std::sync::OnceLock<String>,
}

impl std::fmt::Debug for AccessData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessData").finish_non_exhaustive()
    }
}

impl AccessData {
    /// The change path of a running service: committed through the
    /// controller's event log, then in force at the controller.
    pub fn new(store: Store, controller: Arc<Controller>) -> Self {
        AccessData {
            store,
            log: Some(controller.log().clone()),
            controller: Some(controller),
            lock: tokio::sync::Mutex::new(()),
            central: std::sync::OnceLock::new(),
        }
    }

    /// The change path with no service running (`pivgate enroll`, seeding):
    /// the same checks and one transaction per change; a running service
    /// picks the change up on reload.
    pub fn offline(store: Store) -> Self {
        AccessData {
            store,
            log: None,
            controller: None,
            lock: tokio::sync::Mutex::new(()),
            central: std::sync::OnceLock::new(),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The controller this change path swaps snapshots into (`None` for
    /// tools with no service running).
    pub fn controller(&self) -> Option<&Arc<Controller>> {
        self.controller.as_ref()
    }

    /// Marks this change path as a site's, whose access data `central`
    /// (its `central.urls`, for messages) manages: from then on every
    /// change of that data ([`Edit::managed_by_central`]: entities, door
    /// modes, lockdowns) is refused with that error; the follower's
    /// changes, tokens and re-validation results go on. Set once.
    pub fn follow_central(&self, central: &str) {
        let _ = self.central.set(central.to_string());
    }

    /// The central whose data this is, at a site.
    pub fn managed_by(&self) -> Option<&str> {
        self.central.get().map(String::as_str)
    }

    /// Checks, writes and records `edit` as made by `actor`, then puts it in
    /// force; returns its result and its events' ids.
    pub async fn change<E: Edit>(
        &self,
        actor: &str,
        mut edit: E,
    ) -> Result<(E::Output, Vec<EventId>), E::Error> {
        if let Some(refused) = self.managed_by().and_then(E::managed_by_central) {
            return Err(refused);
        }
        let _one_at_a_time = self.lock.lock().await;
        // And one at a time across processes sharing a PostgreSQL database
        // (central instances).
        let _everywhere = self.store.change_lock().await?;
        if E::CHECKED {
            edit.check(self.store.load_entities().await?)?;
        }
        let actor = actor.to_string();
        let now = Timestamp::now();
        // From the commit until the new snapshot is in force no tap
        // decides (taps deciding now finish first): none opens a door on
        // the state this change replaces.
        let _opening = match (&self.controller, E::ACCESS) {
            (Some(c), true) => Some(c.opening().clone().write_owned().await),
            _ => None,
        };
        let done = match &self.log {
            Some(log) => log.change(move |tx| edit.write(tx, actor, now)).await?,
            None => {
                self.store
                    .change(move |tx| edit.write(tx, actor, now))
                    .await?
            }
        };
        if E::ACCESS {
            self.swap().await?;
        }
        Ok(done)
    }

    /// Reads every entity again and swaps the new snapshot in (taps in
    /// flight finish on the old one): after a change, and on SIGHUP.
    pub async fn reload(&self) -> Result<usize, StoreError> {
        let _one_at_a_time = self.lock.lock().await;
        let _opening = match &self.controller {
            Some(c) => Some(c.opening().clone().write_owned().await),
            None => None,
        };
        self.swap().await
    }

    async fn swap(&self) -> Result<usize, StoreError> {
        let Some(controller) = &self.controller else {
            return Ok(0);
        };
        let snapshot = self.store.load_snapshot().await?;
        let credentials = snapshot.credentials().len();
        controller.set_snapshot(snapshot);
        Ok(credentials)
    }
}

/// Whether `entities` still make a snapshot.
pub fn consistent(entities: Entities) -> Result<(), ChangeError> {
    AccessSnapshot::build(entities)
        .map(|_| ())
        .map_err(ChangeError::Inconsistent)
}

/// An admin event naming `actor`, tagged with `r`'s door, reader,
/// cardholder or credential.
fn admin_event<R: Record>(
    r: &R,
    now: Timestamp,
    actor: &str,
    verb: &str,
    sentence: String,
    data: serde_json::Value,
) -> NewEvent {
    let mut e = NewEvent::admin(now, actor, &format!("{}.{verb}", R::ACTION), sentence, data);
    r.tag(&mut e);
    e
}

/// Create, replace or delete one entity.
#[derive(Debug)]
pub enum EntityChange<R: Record> {
    /// A new entity (its id is assigned).
    Create(R),
    /// The entity with this id, replaced whole.
    Replace(R),
    /// [`Replace`](Self::Replace), only if the stored entity is still at
    /// `version` (else [`ChangeError::Stale`]).
    ReplaceIf {
        value: R,
        version: i64,
    },
    Delete(R::Id),
    /// [`Delete`](Self::Delete), only if the stored entity is still at
    /// `version`.
    DeleteIf {
        id: R::Id,
        version: i64,
    },
}

impl<R: Record> EntityChange<R> {
    /// A replacement, conditional when `version` is given.
    pub fn replace(value: R, version: Option<i64>) -> Self {
        match version {
            Some(version) => EntityChange::ReplaceIf { value, version },
            None => EntityChange::Replace(value),
        }
    }

    /// A deletion, conditional when `version` is given.
    pub fn delete(id: R::Id, version: Option<i64>) -> Self {
        match version {
            Some(version) => EntityChange::DeleteIf { id, version },
            None => EntityChange::Delete(id),
        }
    }
}

impl<R: Record> Edit for EntityChange<R> {
    /// As stored (the removed one for a delete).
    type Output = R;
    type Error = ChangeError;

    fn managed_by_central(central: &str) -> Option<ChangeError> {
        Some(ChangeError::ManagedByCentral {
            central: central.to_string(),
        })
    }

    fn check(&mut self, mut entities: Entities) -> Result<(), ChangeError> {
        let items = R::items_mut(&mut entities);
        let mut removed = None;
        match self {
            EntityChange::Create(v) => {
                let next = items.iter().map(R::id).max().unwrap_or(0).saturating_add(1);
                let mut v = v.clone();
                v.set_id(next);
                items.push(v);
            }
            EntityChange::Replace(after) | EntityChange::ReplaceIf { value: after, .. } => {
                match items.iter_mut().find(|i| i.id() == after.id()) {
                    Some(slot) => *slot = after.clone(),
                    None => return Err(not_found::<R>(after.id())),
                }
            }
            EntityChange::Delete(id) | EntityChange::DeleteIf { id, .. } => {
                let at = items.iter().position(|i| i.id() == id.raw());
                let Some(at) = at else {
                    return Err(not_found::<R>(id.raw()));
                };
                removed = Some(items.remove(at));
                R::cascade(&mut entities, id.raw());
            }
        }
        match (AccessSnapshot::build(entities), removed) {
            (Ok(_), _) => Ok(()),
            // What is removed is still in use: a conflict, not a bad value.
            (Err(e @ BuildError::Dangling { .. }), Some(r)) => Err(ChangeError::Conflict {
                field: None,
                message: format!("{} is still referred to: {e}", r.label()),
            }),
            (Err(e), _) => Err(ChangeError::Inconsistent(e)),
        }
    }

    fn write(self, tx: &mut Tx, actor: String, now: Timestamp) -> ChangeFuture<'_, R, ChangeError> {
        Box::pin(async move {
            Ok(match self {
                EntityChange::Create(v) => {
                    let created = tx.create(v).await?;
                    // As stored (times keep the store's precision).
                    let stored = tx.get(id_of(&created)).await?;
                    let e = admin_event(
                        &stored,
                        now,
                        &actor,
                        "create",
                        format!("{} created by {actor}", stored.label()),
                        json!({ "after": stored }),
                    );
                    (stored, vec![e])
                }
                EntityChange::Replace(after) => replace(tx, after, None, &actor, now).await?,
                EntityChange::ReplaceIf { value, version } => {
                    replace(tx, value, Some(version), &actor, now).await?
                }
                EntityChange::Delete(id) => delete(tx, id, None, &actor, now).await?,
                EntityChange::DeleteIf { id, version } => {
                    delete(tx, id, Some(version), &actor, now).await?
                }
            })
        })
    }
}

async fn replace<R: Record>(
    tx: &mut Tx,
    after: R,
    version: Option<i64>,
    actor: &str,
    now: Timestamp,
) -> Result<(R, Vec<NewEvent>), ChangeError> {
    let before = tx.get(id_of(&after)).await?;
    tx.update_if(&after, version).await?;
    let stored = tx.get(id_of(&after)).await?;
    let e = admin_event(
        &stored,
        now,
        actor,
        "update",
        format!("{} replaced by {actor}", stored.label()),
        json!({ "before": before, "after": stored }),
    );
    Ok((stored, vec![e]))
}

async fn delete<R: Record>(
    tx: &mut Tx,
    id: R::Id,
    version: Option<i64>,
    actor: &str,
    now: Timestamp,
) -> Result<(R, Vec<NewEvent>), ChangeError> {
    let before = tx.get(id).await?;
    tx.delete_if(id, version).await?;
    let e = admin_event(
        &before,
        now,
        actor,
        "delete",
        format!("{} deleted by {actor}", before.label()),
        json!({ "before": before }),
    );
    Ok((before, vec![e]))
}

/// The typed id of `r`.
fn id_of<R: Record>(r: &R) -> R::Id {
    R::Id::from_raw(r.id())
}

fn not_found<R: Record>(id: i64) -> ChangeError {
    ChangeError::NotFound {
        kind: R::ACTION,
        id: id.to_string(),
        field: "id",
    }
}

/// A door's mode (`normal`, `unlocked`, `locked`), set by an operator.
#[derive(Debug)]
pub struct SetMode {
    pub door: DoorId,
    pub mode: DoorMode,
    pub reason: Option<String>,
}

impl Edit for SetMode {
    /// The door before and after.
    type Output = (access::Door, access::Door);
    type Error = ChangeError;
    const CHECKED: bool = false;

    fn managed_by_central(central: &str) -> Option<ChangeError> {
        Some(ChangeError::ManagedByCentral {
            central: central.to_string(),
        })
    }

    fn write(
        self,
        tx: &mut Tx,
        actor: String,
        now: Timestamp,
    ) -> ChangeFuture<'_, Self::Output, ChangeError> {
        Box::pin(async move {
            let before = tx.get(self.door).await?;
            let after = access::Door {
                mode: self.mode,
                ..before.clone()
            };
            tx.update(&after).await?;
            let mut sentence = format!(
                "door {} (`{}`) set to mode {} (was {}) by {actor}",
                after.id, after.name, after.mode, before.mode
            );
            if let Some(w) = &self.reason {
                sentence.push_str(": ");
                sentence.push_str(w);
            }
            let mut event = NewEvent::door_command(now, &actor, after.id, "mode", sentence);
            event.data = Some(json!({ "mode": after.mode, "previous": before.mode }));
            Ok(((before, after), vec![event]))
        })
    }
}

/// A site's lockdown, put on or lifted by an administrator in one change:
/// while it holds, every door of the site is driven `locked`, no tap is
/// granted there and scheduled unlocks do not apply (an operator's override
/// unlock still opens a door, and is recorded as one).
#[derive(Debug)]
pub struct SetLockdown {
    pub site: access::SiteId,
    pub lockdown: bool,
    pub reason: Option<String>,
}

impl Edit for SetLockdown {
    /// The site before and after.
    type Output = (access::Site, access::Site);
    type Error = ChangeError;
    const CHECKED: bool = false;

    fn managed_by_central(central: &str) -> Option<ChangeError> {
        Some(ChangeError::ManagedByCentral {
            central: central.to_string(),
        })
    }

    fn write(
        self,
        tx: &mut Tx,
        actor: String,
        now: Timestamp,
    ) -> ChangeFuture<'_, Self::Output, ChangeError> {
        Box::pin(async move {
            let before = tx.get(self.site).await?;
            let after = access::Site {
                lockdown: self.lockdown,
                ..before.clone()
            };
            tx.update(&after).await?;
            let (action, what) = match (before.lockdown, after.lockdown) {
                (false, true) => ("site.lockdown", "locked down"),
                (true, false) => ("site.lockdown-lifted", "lockdown lifted"),
                (true, true) => ("site.lockdown", "locked down (already)"),
                (false, false) => ("site.lockdown-lifted", "not locked down (already)"),
            };
            let mut sentence = format!("site {} (`{}`) {what} by {actor}", after.id, after.name);
            if let Some(w) = &self.reason {
                sentence.push_str(": ");
                sentence.push_str(w);
            }
            let event = NewEvent::admin(
                now,
                &actor,
                action,
                sentence,
                json!({ "site": after.id, "lockdown": after.lockdown, "previous": before.lockdown }),
            );
            Ok(((before, after), vec![event]))
        })
    }
}

/// Creates an API token (its hash only: the secret never reaches the log).
/// A keypad token must be bound to at least one existing door, and its
/// reader, if any, to one of those doors; other roles are bound to none.
#[derive(Debug)]
pub struct CreateToken(pub ApiToken);

impl Edit for CreateToken {
    /// The token as stored.
    type Output = ApiToken;
    type Error = ChangeError;
    const ACCESS: bool = false;

    fn check(&mut self, entities: Entities) -> Result<(), ChangeError> {
        let t = &self.0;
        let invalid = |field, message: String| ChangeError::Invalid {
            field: Some(field),
            message,
        };
        if t.role != store::Role::Keypad {
            if !t.doors.is_empty() || t.reader.is_some() {
                return Err(invalid(
                    "doors",
                    format!("only keypad tokens are bound to doors; a {} token reaches every door its role allows", t.role),
                ));
            }
            return Ok(());
        }
        if t.doors.is_empty() {
            return Err(invalid(
                "doors",
                "a keypad token is bound to the door(s) of its keypad: name at least one (--door ID)".into(),
            ));
        }
        for d in &t.doors {
            if !entities.doors.iter().any(|x| x.id == *d) {
                return Err(ChangeError::NotFound {
                    kind: "door",
                    id: d.to_string(),
                    field: "doors",
                });
            }
        }
        if let Some(r) = t.reader {
            match entities.readers.iter().find(|x| x.id == r) {
                None => {
                    return Err(ChangeError::NotFound {
                        kind: "reader",
                        id: r.to_string(),
                        field: "reader",
                    })
                }
                Some(x) if !t.doors.contains(&x.door) => {
                    return Err(invalid(
                        "reader",
                        format!(
                            "reader {r} is at door {}, not at a door of the token",
                            x.door
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    fn write(
        self,
        tx: &mut Tx,
        actor: String,
        now: Timestamp,
    ) -> ChangeFuture<'_, ApiToken, ChangeError> {
        Box::pin(async move {
            let t = self.0;
            tx.create_token(&t).await?;
            let doors: Vec<i64> = t.doors.iter().map(|d| d.0).collect();
            let mut sentence = format!("token `{}` ({}) created by {actor}", t.name, t.role);
            if !doors.is_empty() {
                sentence.push_str(&format!(
                    ", for door(s) {}",
                    doors
                        .iter()
                        .map(i64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            if let Some(r) = t.reader {
                sentence.push_str(&format!(", reader {r}"));
            }
            if let Some(e) = t.expires_at {
                sentence.push_str(&format!(", expires {e}"));
            }
            let event = NewEvent::admin(
                now,
                &actor,
                "token.create",
                sentence,
                json!({ "after": {
                    "name": t.name, "role": t.role, "created_at": t.created_at,
                    "doors": doors, "reader": t.reader.map(|r| r.0), "expires_at": t.expires_at,
                } }),
            );
            Ok((t, vec![event]))
        })
    }
}

/// Deletes an API token: it stops working at once.
#[derive(Debug)]
pub struct DeleteToken(pub String);

impl Edit for DeleteToken {
    /// The token deleted.
    type Output = ApiToken;
    type Error = ChangeError;
    const CHECKED: bool = false;
    const ACCESS: bool = false;

    fn write(
        self,
        tx: &mut Tx,
        actor: String,
        now: Timestamp,
    ) -> ChangeFuture<'_, ApiToken, ChangeError> {
        Box::pin(async move {
            let gone = tx.delete_token(&self.0).await.map_err(|e| match e {
                StoreError::NotFound { .. } => ChangeError::NotFound {
                    kind: "token",
                    id: format!("`{}`", self.0.chars().take(64).collect::<String>()),
                    field: "name",
                },
                e => e.into(),
            })?;
            let event = NewEvent::admin(
                now,
                &actor,
                "token.delete",
                format!("token `{}` ({}) deleted by {actor}", gone.name, gone.role),
                json!({ "before": { "name": gone.name, "role": gone.role, "created_at": gone.created_at } }),
            );
            Ok((gone, vec![event]))
        })
    }
}
