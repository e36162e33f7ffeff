//! The change feed from a central to its sites (migration 9).
//!
//! **Central.** A [`Store`] made with [`Store::with_change_feed`] keeps,
//! in a transaction, each entity as it was before its first write (and the
//! groups a door or cardholder deletion changes); when the transaction
//! commits ([`Tx::commit`]) it reads those entities and what decides their
//! place in the sites' parts (every entity when a site is created or
//! deleted), puts the kept ones back to get the state before and, for each
//! site whose part ([`access::site_part`]) changed, writes the delta
//! ([`access::Delta`]) as one `sync_feed` row, all under one *position*
//! allocated last, just before the commit: a transactional outbox. The
//! position comes from the `feed` row of `id_sequences` after a
//! transaction-level advisory lock (PostgreSQL): the allocating
//! transaction holds that row until it commits, so the next position is
//! handed out only once the previous one is visible. Positions therefore
//! become visible in order, without gaps left by transactions still in
//! flight, and a reader asking for "rows after the last position I saw"
//! ([`Store::feed_after`]) never skips one that commits late (the trap of
//! sequence ids, which commit out of order). On PostgreSQL the commit
//! also sends a `NOTIFY pivgate_feed`, which [`Store::feed_notifications`]
//! turns into a wake-up (no polling).
//!
//! [`Store::feed_snapshot`] reads every entity and the position they are
//! at in one repeatable-read transaction: a new site bootstraps from it
//! and follows the feed from that position. [`Store::prune_feed`] deletes
//! old rows and remembers the highest position deleted; a site behind it
//! is told to bootstrap ([`FeedRead::Gone`]).
//!
//! **Site.** [`Tx::apply_delta`] stores a delta with the central's ids
//! (upserts, removals in an order the foreign keys accept) and
//! [`Tx::set_applied_position`] records the position in the same
//! transaction; [`Store::applied_position`] reads it back.
//!
//! [`Store::change_lock`] serialises changes across processes sharing one
//! PostgreSQL database (several central instances).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use access::{
    site_part, AccessGroup, Cardholder, Credential, Delta, Door, Entities, Holiday, Reader,
    Schedule, Site, SiteId,
};
use sqlx::{AnyConnection, Executor, Row};

use crate::record::{Record, RecordId};
use crate::sql::{bump_sequence, entities_in, insert_with_id, next_ids, version_in};
use crate::{Backend, Store, StoreError, Tx};

/// The channel `NOTIFY` wakes followers on.
pub const FEED_CHANNEL: &str = "pivgate_feed";

/// Advisory lock key taken before a feed position is allocated.
pub(crate) const FEED_LOCK: i64 = 0x7069_7667_6665_6564; // "pivgfeed"
/// Advisory lock key of the change path ([`Store::change_lock`]).
const CHANGE_LOCK: i64 = 0x7069_7667_6368_6e67; // "pivgchng"

/// One site's row of the feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedRow {
    /// Its position: ascending in commit order.
    pub pos: i64,
    /// Whether the delta takes access away.
    pub revocation: bool,
    /// The delta ([`access::Delta`]) as JSON; with `data`, the
    /// [`crate::RevocationData`] as JSON.
    pub body: String,
    /// Revocation data the central downloaded (for every site), not a
    /// delta.
    pub data: bool,
}

/// What [`Store::feed_after`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedRead {
    /// The site's rows after the position asked for, in order (none when
    /// it is up to date).
    Rows(Vec<FeedRow>),
    /// Rows after the position asked for were pruned: the site must
    /// bootstrap from a snapshot.
    Gone { pruned: i64 },
}

/// Held while a change is checked, written and put in force (see
/// [`Store::change_lock`]); released when dropped.
#[derive(Debug)]
pub struct ChangeLock {
    _tx: Option<sqlx::Transaction<'static, sqlx::Any>>,
}

/// What a feed-writing transaction wrote: the ids it wrote (by table) and
/// each entity as it was before its first write (absent when it did not
/// exist). Every entity that changes goes through here, so the state
/// before the transaction is the state at commit with these put back.
#[derive(Debug, Default)]
pub(crate) struct Touched {
    ids: BTreeMap<&'static str, BTreeSet<i64>>,
    before: Entities,
}

impl Touched {
    fn ids<R: Record>(&self) -> BTreeSet<i64> {
        self.ids.get(R::TABLE).cloned().unwrap_or_default()
    }

    /// Puts back in `e` (entities as they are now, ordered by id, holding
    /// every touched entity that exists now) the touched entities of kind
    /// `R` as they were before.
    fn restore<R: Record>(&self, e: &mut Entities) {
        let Some(ids) = self.ids.get(R::TABLE) else {
            return;
        };
        let v = R::items_mut(e);
        v.retain(|x| !ids.contains(&x.id()));
        v.extend(R::items(&self.before).iter().cloned());
        v.sort_by_key(|x| x.id());
    }

    /// `now` as it was before the transaction.
    fn restored(&self, now: &Entities) -> Entities {
        let mut e = now.clone();
        self.restore::<Site>(&mut e);
        self.restore::<Door>(&mut e);
        self.restore::<Reader>(&mut e);
        self.restore::<Cardholder>(&mut e);
        self.restore::<Credential>(&mut e);
        self.restore::<AccessGroup>(&mut e);
        self.restore::<Schedule>(&mut e);
        self.restore::<Holiday>(&mut e);
        e
    }
}

/// Above this many ids, a kind is read whole and filtered rather than one
/// id at a time.
const MANY: usize = 64;

/// The entities of kind `R` with these ids that exist, ordered by id.
async fn read_ids<R: Record>(
    conn: &mut AnyConnection,
    ids: &BTreeSet<i64>,
) -> Result<Vec<R>, StoreError> {
    if ids.len() > MANY {
        let mut v = R::read(conn, None).await?;
        v.retain(|x| ids.contains(&x.id()));
        return Ok(v);
    }
    let mut v = Vec::new();
    for id in ids {
        v.extend(R::read(conn, Some(*id)).await?);
    }
    Ok(v)
}

/// The `val` column of the rows of `table` whose `key` column is one of
/// `keys` (table and column names are the store's own constants).
async fn linked(
    conn: &mut AnyConnection,
    table: &str,
    key: &str,
    val: &str,
    keys: &BTreeSet<i64>,
) -> Result<BTreeSet<i64>, StoreError> {
    let mut out = BTreeSet::new();
    if keys.len() > MANY {
        let sql = format!("SELECT {key}, {val} FROM {table} WHERE {key} IS NOT NULL");
        for r in sqlx::query(&sql).fetch_all(&mut *conn).await? {
            if keys.contains(&r.try_get::<i64, _>(0)?) {
                out.insert(r.try_get::<i64, _>(1)?);
            }
        }
        return Ok(out);
    }
    let sql = format!("SELECT {val} FROM {table} WHERE {key} = $1");
    for k in keys {
        for r in sqlx::query(&sql).bind(*k).fetch_all(&mut *conn).await? {
            out.insert(r.try_get::<i64, _>(0)?);
        }
    }
    Ok(out)
}

/// The entities whose place or form in some site's part the touched ones
/// can change, with everything deciding that place and form (the sites;
/// the doors of the groups read; every group naming a cardholder,
/// credential holder or schedule read; the doors of readers read and the
/// doors naming a schedule read), as they are now.
async fn reach(conn: &mut AnyConnection, t: &Touched) -> Result<Entities, StoreError> {
    let td = t.ids::<Door>();
    let door_groups = linked(conn, "access_group_doors", "door_id", "group_id", &td).await?;
    let mut cg = t.ids::<AccessGroup>();
    cg.extend(door_groups);
    let changed_groups: Vec<AccessGroup> = read_ids(conn, &cg).await?;
    let mut cc = t.ids::<Cardholder>();
    for g in changed_groups.iter().chain(&t.before.groups) {
        cc.extend(g.cardholders.iter().map(|c| c.0));
    }
    let mut ck = t.ids::<Credential>();
    ck.extend(linked(conn, "credentials", "cardholder_id", "id", &cc).await?);
    let credentials: Vec<Credential> = read_ids(conn, &ck).await?;
    let mut holders = cc.clone();
    holders.extend(
        credentials
            .iter()
            .chain(&t.before.credentials)
            .map(|k| k.cardholder.0),
    );
    let mut cr = t.ids::<Reader>();
    cr.extend(linked(conn, "readers", "door_id", "id", &td).await?);
    let readers: Vec<Reader> = read_ids(conn, &cr).await?;
    let changed_doors: Vec<Door> = read_ids(conn, &td).await?;
    let mut cs = t.ids::<Schedule>();
    cs.extend(
        changed_groups
            .iter()
            .chain(&t.before.groups)
            .map(|g| g.schedule.0),
    );
    cs.extend(
        changed_doors
            .iter()
            .chain(&t.before.doors)
            .filter_map(|d| d.unlock_schedule.map(|s| s.0)),
    );
    let schedules: Vec<Schedule> = read_ids(conn, &cs).await?;
    let mut gs = cg;
    gs.extend(
        linked(
            conn,
            "access_group_members",
            "cardholder_id",
            "group_id",
            &holders,
        )
        .await?,
    );
    gs.extend(linked(conn, "access_groups", "schedule_id", "id", &cs).await?);
    let groups: Vec<AccessGroup> = read_ids(conn, &gs).await?;
    let mut ds = td;
    for g in groups.iter().chain(&t.before.groups) {
        ds.extend(g.doors.iter().map(|d| d.0));
    }
    ds.extend(readers.iter().chain(&t.before.readers).map(|r| r.door.0));
    ds.extend(linked(conn, "doors", "unlock_schedule_id", "id", &cs).await?);
    Ok(Entities {
        sites: Site::read(conn, None).await?,
        doors: read_ids(conn, &ds).await?,
        readers,
        cardholders: read_ids(conn, &cc).await?,
        credentials,
        groups,
        schedules,
        holidays: read_ids(conn, &t.ids::<Holiday>()).await?,
    })
}

/// How many distinct deltas back a site's delta is compared with before
/// it is encoded on its own (bounds the comparisons when every site's
/// delta differs).
const SHARED_LOOKBACK: usize = 8;

/// Feed rows per `INSERT` statement (parameters: two, plus one per
/// distinct body at most).
const FEED_ROWS_PER_INSERT: usize = 256;

/// Inserts the feed rows `rows` (site, index into `bodies`) at `pos` in one
/// multi-row statement, each distinct body bound once. Site ids and
/// revocation flags are integers written into the statement, which is
/// therefore not kept prepared.
async fn insert_feed_rows(
    conn: &mut AnyConnection,
    pos: i64,
    now: i64,
    rows: &[(SiteId, usize)],
    bodies: &[(Delta, bool, String)],
) -> Result<(), StoreError> {
    use std::fmt::Write as _;
    let mut sql =
        String::from("INSERT INTO sync_feed (site_id, pos, time_us, revocation, body) VALUES ");
    // Body index -> parameter number, in order of first use.
    let mut params: BTreeMap<usize, usize> = BTreeMap::new();
    let mut order: Vec<usize> = Vec::new();
    for (n, (site, b)) in rows.iter().enumerate() {
        let next = 3 + order.len();
        let p = *params.entry(*b).or_insert_with(|| {
            order.push(*b);
            next
        });
        let sep = if n == 0 { "" } else { ", " };
        let revocation = i64::from(bodies[*b].1);
        let _ = write!(sql, "{sep}({}, $1, $2, {revocation}, ${p})", site.0);
    }
    let mut q = sqlx::query(&sql).persistent(false).bind(pos).bind(now);
    for b in order {
        q = q.bind(bodies[b].2.clone());
    }
    q.execute(conn).await?;
    Ok(())
}

impl Tx {
    /// Before the first write of the entity `id` of kind `R` in a
    /// feed-writing transaction: keeps it as it is now (`created`: it does
    /// not exist yet).
    pub(crate) async fn touch<R: Record>(
        &mut self,
        id: i64,
        created: bool,
    ) -> Result<(), StoreError> {
        if !self.feed {
            return Ok(());
        }
        let t = self.touched.get_or_insert_with(Touched::default);
        if !t.ids.entry(R::TABLE).or_default().insert(id) || created {
            return Ok(());
        }
        let now = R::read(&mut self.tx, Some(id)).await?;
        R::items_mut(&mut t.before).extend(now);
        Ok(())
    }

    /// [`touch`](Self::touch) before deleting the entity `id`, with the
    /// groups the deletion changes (their door and member lists lose it).
    pub(crate) async fn touch_delete<R: Record>(&mut self, id: i64) -> Result<(), StoreError> {
        if !self.feed {
            return Ok(());
        }
        let link = match R::TABLE {
            "doors" => Some(("access_group_doors", "door_id")),
            "cardholders" => Some(("access_group_members", "cardholder_id")),
            _ => None,
        };
        if let Some((table, key)) = link {
            let groups =
                linked(&mut self.tx, table, key, "group_id", &BTreeSet::from([id])).await?;
            for g in groups {
                self.touch::<AccessGroup>(g, false).await?;
            }
        }
        self.touch::<R>(id, false).await
    }

    /// Writes the sites' deltas of this transaction under one new position
    /// (nothing when no site's part changed). Called by [`Tx::commit`],
    /// last before the commit itself.
    /// Public so that a test can hold a transaction between the
    /// allocation and the commit; calling it again does nothing.
    ///
    /// Reads only the touched entities and what decides their place in
    /// the sites' parts ([`reach`]); a site created or deleted reads every
    /// entity. Either way the deltas are those of the sites' whole parts
    /// before and after. Equal deltas are encoded once, and the rows go in
    /// multi-row statements (`insert_feed_rows`).
    pub async fn write_feed(&mut self) -> Result<Option<i64>, StoreError> {
        let Some(t) = self.touched.take() else {
            return Ok(None);
        };
        let touched_sites = t.ids::<Site>();
        let now_sites: Vec<Site> = read_ids(&mut self.tx, &touched_sites).await?;
        let sites_same =
            now_sites.len() == touched_sites.len() && t.before.sites.len() == touched_sites.len();
        let after = if sites_same {
            reach(&mut self.tx, &t).await?
        } else {
            entities_in(&mut self.tx).await?
        };
        let before = t.restored(&after);
        let sites: BTreeSet<SiteId> = before
            .sites
            .iter()
            .chain(&after.sites)
            .map(|s| s.id)
            .collect();
        // Sites whose deltas are equal (a suspension's is the same at every
        // site that had the cardholder) share one encoding.
        let mut bodies: Vec<(Delta, bool, String)> = Vec::new();
        let mut rows: Vec<(SiteId, usize)> = Vec::new();
        for site in sites {
            let d = Delta::between(&site_part(&before, site), &site_part(&after, site));
            if d.is_empty() {
                continue;
            }
            let seen = bodies.len().saturating_sub(SHARED_LOOKBACK);
            let i = match bodies[seen..].iter().position(|(b, ..)| *b == d) {
                Some(i) => seen + i,
                None => {
                    let body = serde_json::to_string(&d).map_err(|e| StoreError::Invalid {
                        kind: "change feed",
                        field: "body",
                        problem: e.to_string(),
                    })?;
                    let revocation = !d.revocations().is_empty();
                    bodies.push((d, revocation, body));
                    bodies.len() - 1
                }
            };
            rows.push((site, i));
        }
        if rows.is_empty() {
            return Ok(None);
        }
        if self.backend == Backend::Postgres {
            // Taken right before the position is allocated; the `feed` row
            // updated below then stays locked until this commits.
            sqlx::query("SELECT CAST(1 AS BIGINT) FROM (SELECT pg_advisory_xact_lock($1)) AS l")
                .bind(FEED_LOCK)
                .fetch_one(&mut *self.tx)
                .await?;
        }
        let pos = next_ids(&mut self.tx, "feed", 1).await?;
        let now = crate::columns::ts_to_db(access::jiff::Timestamp::now());
        for chunk in rows.chunks(FEED_ROWS_PER_INSERT) {
            insert_feed_rows(&mut self.tx, pos, now, chunk, &bodies).await?;
        }
        if self.backend == Backend::Postgres {
            (&mut *self.tx)
                .execute(format!("NOTIFY {FEED_CHANNEL}").as_str())
                .await?;
        }
        Ok(Some(pos))
    }

    /// Stores `r` under its own id: replaces the stored entity, or inserts
    /// it (moving the id sequence past it). For a site applying the
    /// central's data.
    pub async fn put<R: Record>(&mut self, r: &R) -> Result<(), StoreError> {
        match version_in::<R>(&mut self.tx, r.id()).await {
            Ok(_) => self.update(r).await,
            Err(StoreError::NotFound { .. }) => {
                self.touch::<R>(r.id(), true).await?;
                insert_with_id(&mut self.tx, r, r.id()).await?;
                bump_sequence(&mut self.tx, R::SEQUENCE, r.id()).await
            }
            Err(e) => Err(e),
        }
    }

    /// Deletes the entity `id` if it is stored; whether it was.
    pub async fn remove<I: RecordId>(&mut self, id: I) -> Result<bool, StoreError> {
        match self.delete(id).await {
            Ok(()) => Ok(true),
            Err(StoreError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Stores a delta: removals first (references first: groups,
    /// credentials, readers, cardholders, doors, holidays, schedules,
    /// sites), then the entities stored whole (referenced first). Foreign
    /// keys are checked at commit on SQLite, so the order inside the
    /// transaction does not matter to them. With `only_present`, an entity
    /// not stored yet is left out (a revocation applied ahead of the
    /// changes that bring the entity). Returns how many entities changed.
    pub async fn apply_delta(
        &mut self,
        d: &Delta,
        only_present: bool,
    ) -> Result<usize, StoreError> {
        if self.backend == Backend::Sqlite {
            (&mut *self.tx)
                .execute("PRAGMA defer_foreign_keys = ON")
                .await?;
        }
        let mut n = 0;
        let r = &d.remove;
        for id in &r.groups {
            n += usize::from(self.remove(*id).await?);
        }
        for id in &r.credentials {
            n += usize::from(self.remove(*id).await?);
        }
        for id in &r.readers {
            n += usize::from(self.remove(*id).await?);
        }
        for id in &r.cardholders {
            n += usize::from(self.remove(*id).await?);
        }
        for id in &r.doors {
            n += usize::from(self.remove(*id).await?);
        }
        for id in &r.holidays {
            n += usize::from(self.remove(*id).await?);
        }
        for id in &r.schedules {
            n += usize::from(self.remove(*id).await?);
        }
        for id in &r.sites {
            n += usize::from(self.remove(*id).await?);
        }
        let p = &d.put;
        n += self.put_all(&p.sites, only_present).await?;
        n += self.put_all(&p.schedules, only_present).await?;
        n += self.put_all(&p.holidays, only_present).await?;
        n += self.put_all(&p.doors, only_present).await?;
        n += self.put_all(&p.readers, only_present).await?;
        n += self.put_all(&p.cardholders, only_present).await?;
        n += self.put_all(&p.credentials, only_present).await?;
        n += self.put_all(&p.groups, only_present).await?;
        Ok(n)
    }

    async fn put_all<R: Record>(
        &mut self,
        items: &[R],
        only_present: bool,
    ) -> Result<usize, StoreError> {
        let mut n = 0;
        for r in items {
            if only_present {
                match version_in::<R>(&mut self.tx, r.id()).await {
                    Ok(_) => {}
                    Err(StoreError::NotFound { .. }) => continue,
                    Err(e) => return Err(e),
                }
            }
            self.put(r).await?;
            n += 1;
        }
        Ok(n)
    }

    /// Replaces every entity with `part` (a snapshot from the central):
    /// what is not in it is removed. Returns how many entities changed.
    pub async fn replace_all(&mut self, part: &Entities) -> Result<usize, StoreError> {
        let now = entities_in(&mut self.tx).await?;
        self.apply_delta(&Delta::between(&now, part), false).await
    }

    /// The feed position this site has applied, if any.
    pub async fn applied_position(&mut self) -> Result<Option<i64>, StoreError> {
        let v: Option<i64> = sqlx::query_scalar("SELECT pos FROM sync_applied WHERE id = 1")
            .fetch_optional(&mut *self.tx)
            .await?;
        Ok(v)
    }

    /// Records `pos` as applied, in this transaction.
    pub async fn set_applied_position(&mut self, pos: i64) -> Result<(), StoreError> {
        let now = crate::columns::ts_to_db(access::jiff::Timestamp::now());
        sqlx::query(
            "INSERT INTO sync_applied (id, pos, time_us) VALUES (1, $1, $2) \
             ON CONFLICT (id) DO UPDATE SET pos = excluded.pos, time_us = excluded.time_us",
        )
        .bind(pos)
        .bind(now)
        .execute(&mut *self.tx)
        .await?;
        Ok(())
    }
}

impl Store {
    /// This store, writing the sites' change feed in every transaction
    /// that changes entities (a central).
    pub fn with_change_feed(mut self) -> Self {
        self.feed = true;
        self
    }

    /// Whether transactions write the change feed.
    pub fn writes_change_feed(&self) -> bool {
        self.feed
    }

    /// Held from a change's check until it is in force: on PostgreSQL a
    /// transaction-level advisory lock on a connection of its own, so that
    /// changes are made one at a time across every process using the
    /// database (central instances); nothing on SQLite, whose writers are
    /// one process. Released when dropped (the transaction rolls back), or
    /// by the server if the process dies.
    pub async fn change_lock(&self) -> Result<ChangeLock, StoreError> {
        if self.backend() != Backend::Postgres {
            return Ok(ChangeLock { _tx: None });
        }
        let mut tx = self.pool().begin().await?;
        sqlx::query("SELECT CAST(1 AS BIGINT) FROM (SELECT pg_advisory_xact_lock($1)) AS l")
            .bind(CHANGE_LOCK)
            .fetch_one(&mut *tx)
            .await?;
        Ok(ChangeLock { _tx: Some(tx) })
    }

    /// The rows of `site` after position `after`, at most `limit`, in
    /// order; or [`FeedRead::Gone`] when some were pruned.
    pub async fn feed_after(
        &self,
        site: SiteId,
        after: i64,
        limit: u32,
    ) -> Result<FeedRead, StoreError> {
        let rows = sqlx::query(
            "SELECT pos, revocation, body FROM sync_feed WHERE site_id = $1 AND pos > $2 \
             ORDER BY pos LIMIT $3",
        )
        .bind(site.0)
        .bind(after)
        .bind(i64::from(limit.max(1)))
        .fetch_all(self.pool())
        .await?;
        // Read after the rows: a prune that deleted rows this read needed
        // committed before it, so it shows here.
        let pruned = self.feed_pruned().await?;
        if after < pruned {
            return Ok(FeedRead::Gone { pruned });
        }
        let mut rows: Vec<FeedRow> = rows
            .iter()
            .map(|r| {
                Ok(FeedRow {
                    pos: r.try_get(0)?,
                    revocation: r.try_get::<i64, _>(1)? != 0,
                    body: r.try_get(2)?,
                    data: false,
                })
            })
            .collect::<Result<_, sqlx::Error>>()?;
        // The revocation data after `after`, merged in position order.
        let data = self.revocation_data_after(after, limit).await?;
        if !data.is_empty() {
            for d in data {
                let body = serde_json::to_string(&d).map_err(|e| StoreError::Invalid {
                    kind: "change feed",
                    field: "body",
                    problem: e.to_string(),
                })?;
                rows.push(FeedRow {
                    pos: d.pos,
                    revocation: true,
                    body,
                    data: true,
                });
            }
            rows.sort_by_key(|r| r.pos);
            rows.truncate(limit.max(1) as usize);
        }
        Ok(FeedRead::Rows(rows))
    }

    async fn feed_pruned(&self) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT next_id FROM id_sequences WHERE name = 'feed_pruned'")
                .fetch_one(self.pool())
                .await?,
        )
    }

    /// The latest position committed.
    pub async fn feed_position(&self) -> Result<i64, StoreError> {
        let next: i64 = sqlx::query_scalar("SELECT next_id FROM id_sequences WHERE name = 'feed'")
            .fetch_one(self.pool())
            .await?;
        Ok(next - 1)
    }

    /// Every entity and the feed position they are at, read in one
    /// snapshot of the database: a site that stores the part of these
    /// meant for it and then follows the feed after this position misses
    /// nothing and sees nothing twice.
    pub async fn feed_snapshot(&self) -> Result<(i64, Entities), StoreError> {
        let mut tx = self.pool().begin().await?;
        if self.backend() == Backend::Postgres {
            (&mut *tx)
                .execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .await?;
        }
        let next: i64 = sqlx::query_scalar("SELECT next_id FROM id_sequences WHERE name = 'feed'")
            .fetch_one(&mut *tx)
            .await?;
        let e = entities_in(&mut tx).await?;
        tx.commit().await?;
        Ok((next - 1, e))
    }

    /// Deletes the feed's rows older than `before` (whole positions) and
    /// remembers the highest position deleted; returns how many rows went.
    pub async fn prune_feed(&self, before: access::jiff::Timestamp) -> Result<u64, StoreError> {
        let mut tx = self.pool().begin().await?;
        let max: Option<i64> =
            sqlx::query_scalar("SELECT MAX(pos) FROM sync_feed WHERE time_us < $1")
                .bind(crate::columns::ts_to_db(before))
                .fetch_one(&mut *tx)
                .await?;
        let Some(max) = max else {
            drop(tx);
            return self.prune_revocation_data(before).await;
        };
        let gone = sqlx::query("DELETE FROM sync_feed WHERE pos <= $1")
            .bind(max)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query(
            "UPDATE id_sequences SET next_id = $1 WHERE name = 'feed_pruned' AND next_id < $1",
        )
        .bind(max)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        let superseded = self.prune_revocation_data(before).await?;
        Ok(gone + superseded)
    }

    /// The feed position this site has applied, if any.
    pub async fn applied_position(&self) -> Result<Option<i64>, StoreError> {
        let mut tx = self.begin().await?;
        let p = tx.applied_position().await?;
        tx.commit().await?;
        Ok(p)
    }

    /// A counter that goes up at every feed commit of any process on this
    /// PostgreSQL database (`LISTEN pivgate_feed`), and whenever the
    /// listening connection is made again (notifications may have been
    /// missed meanwhile): a follower re-reads the feed when it changes.
    /// `None` on SQLite. The listening task ends when every receiver is
    /// dropped.
    pub fn feed_notifications(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        if self.backend() != Backend::Postgres {
            return None;
        }
        let url = self.url().to_string();
        let (tx, rx) = tokio::sync::watch::channel(0u64);
        tokio::spawn(async move {
            let mut backoff = Duration::from_millis(250);
            loop {
                let listener = tokio::select! {
                    _ = tx.closed() => return,
                    l = listen(&url) => l,
                };
                let mut l = match listener {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot listen for change-feed notifications; retrying");
                        tokio::select! {
                            _ = tx.closed() => return,
                            _ = tokio::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(Duration::from_secs(10));
                        continue;
                    }
                };
                backoff = Duration::from_millis(250);
                // Whatever was committed while not listening.
                tx.send_modify(|n| *n += 1);
                loop {
                    tokio::select! {
                        _ = tx.closed() => return,
                        r = l.try_recv() => match r {
                            Ok(_) => tx.send_modify(|n| *n += 1),
                            Err(e) => {
                                tracing::warn!(error = %e, "change-feed notifications lost; listening again");
                                break;
                            }
                        }
                    }
                }
            }
        });
        Some(rx)
    }
}

async fn listen(url: &str) -> Result<sqlx::postgres::PgListener, sqlx::Error> {
    let mut l = sqlx::postgres::PgListener::connect(url).await?;
    l.listen(FEED_CHANNEL).await?;
    Ok(l)
}
