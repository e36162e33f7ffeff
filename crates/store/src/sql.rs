//! [`Store`] on SQLite or PostgreSQL through `sqlx`'s `Any` driver, so one
//! implementation and one set of migrations serve both. Statements use `$N`
//! parameters, which both engines accept. Entity operations are generic over
//! [`Record`]; writes run in a [`Tx`], so a change and its audit events
//! commit together.

use std::fmt;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use access::*;
use sqlx::any::{install_default_drivers, AnyPoolOptions, AnyRow};
use sqlx::{Any, AnyConnection, AnyPool, Executor, Row};

use crate::columns::*;
use crate::record::{Record, RecordId};
use crate::types::*;

pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Which database engine a [`Store`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Sqlite => "SQLite",
            Backend::Postgres => "PostgreSQL",
        })
    }
}

/// The file name of the SQLite database inside a data directory.
pub const SQLITE_FILE: &str = "pivgate.db";

/// Entities, API tokens and the event log on SQLite or PostgreSQL. Cheap to
/// clone (a connection pool).
#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    url: Arc<str>,
    /// Whether transactions that change entities write the sites' change
    /// feed ([`crate::feed`]): on a central.
    pub(crate) feed: bool,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .finish()
    }
}

/// One batch of a prune: the lowest ids first.
/// At a site that uploads its events (`upload_cursor` has its row), none
/// above the central's last acknowledgement is deleted, however old.
const PRUNE_BATCH: &str = "DELETE FROM events WHERE id IN \
     (SELECT id FROM events WHERE time_us < $1 AND id <= $2 \
      AND id <= COALESCE((SELECT acked FROM upload_cursor WHERE id = 1), id) \
      ORDER BY id LIMIT $3)";

/// SQLite settings for every connection: WAL journal, a commit is durable
/// when it returns (`synchronous=FULL`), foreign keys enforced, and writers
/// wait for each other instead of failing.
const SQLITE_PRAGMAS: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
     PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10000;";

impl Store {
    /// Opens (creating if needed) the SQLite database in `dir`, creating the
    /// directory too, and brings its schema up to date.
    pub async fn open_data_dir(dir: &Path) -> Result<Self, StoreError> {
        let created = !dir.exists();
        std::fs::create_dir_all(dir).map_err(|source| StoreError::DataDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let dir = dir.canonicalize().map_err(|source| StoreError::DataDir {
            path: dir.to_path_buf(),
            source,
        })?;
        // The event log names people and doors: a directory made here is the
        // service user's alone, and the database always is.
        if created {
            restrict(&dir, 0o700)?;
        }
        let path = dir.join(SQLITE_FILE);
        let store = Self::connect(&format!("sqlite://{}?mode=rwc", path.display())).await?;
        for file in [SQLITE_FILE, "pivgate.db-wal", "pivgate.db-shm"] {
            let p = dir.join(file);
            if p.exists() {
                restrict(&p, 0o600)?;
            }
        }
        Ok(store)
    }

    /// Connects to `sqlite:…` or `postgres://…` and brings the schema up to
    /// date.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Backend::Postgres
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_string()));
        };
        let pool = Self::pool_for(
            url,
            backend,
            match backend {
                Backend::Sqlite => 4,
                Backend::Postgres => 8,
            },
        )
        .await?;
        refuse_newer_schema(&pool).await?;
        MIGRATOR.run(&pool).await?;
        Ok(Store {
            pool,
            backend,
            url: url.into(),
            feed: false,
        })
    }

    /// Deletes the events at or below `up_to` (an id) that happened before
    /// `before`, at most `batch` a transaction, so that taps' commits wait
    /// for one short transaction at most. Returns how many were deleted.
    /// At a site that uploads its events, none above the central's last
    /// acknowledgement is deleted ([`Store::upload_cursor`]).
    pub async fn prune_events(
        &self,
        before: access::jiff::Timestamp,
        up_to: EventId,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let cutoff = ts_to_db(before);
        let mut deleted = 0u64;
        loop {
            let r = sqlx::query(PRUNE_BATCH)
                .bind(cutoff)
                .bind(up_to.0)
                .bind(i64::from(batch.max(1)))
                .execute(&self.pool)
                .await?;
            deleted += r.rows_affected();
            if r.rows_affected() < u64::from(batch.max(1)) {
                return Ok(deleted);
            }
            tokio::task::yield_now().await;
        }
    }

    /// The time of the oldest event before `before`, if there is one (the
    /// `events_time` index): where a retention run starts.
    pub async fn oldest_event_before(
        &self,
        before: access::jiff::Timestamp,
    ) -> Result<Option<access::jiff::Timestamp>, StoreError> {
        let v: Option<i64> =
            sqlx::query_scalar("SELECT MIN(time_us) FROM events WHERE time_us < $1")
                .bind(ts_to_db(before))
                .fetch_one(&self.pool)
                .await?;
        v.map(|v| ts_from_db("event", "time", v)).transpose()
    }

    /// The latest schema version this release migrates to.
    pub fn schema_version() -> i64 {
        MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
    }

    /// The same database through a pool of its own of `connections`
    /// connections (the schema is already up to date): for the event-log
    /// writer, so that readers (API queries, event streams catching up)
    /// holding every connection of the shared pool never delay a commit a
    /// door is waiting for.
    pub async fn dedicated(&self, connections: u32) -> Result<Self, StoreError> {
        let pool = Self::pool_for(&self.url, self.backend, connections.max(1)).await?;
        Ok(Store {
            pool,
            backend: self.backend,
            url: self.url.clone(),
            feed: self.feed,
        })
    }

    async fn pool_for(
        url: &str,
        backend: Backend,
        connections: u32,
    ) -> Result<AnyPool, StoreError> {
        let mut opts = AnyPoolOptions::new().max_connections(connections);
        if backend == Backend::Sqlite {
            opts = opts.after_connect(|conn, _meta| {
                Box::pin(async move {
                    conn.execute(SQLITE_PRAGMAS).await?;
                    Ok(())
                })
            });
        }
        Ok(opts.connect(url).await?)
    }

    /// The URL it was opened with.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The connection pool, for what the methods do not cover.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Closes every connection (waits for those in use).
    pub async fn close(&self) {
        self.pool.close().await
    }
}

/// How long PostgreSQL lets a transaction that holds a shared row (an id
/// sequence, a site's upload state) sit idle, its client silent, before it
/// ends the session and releases the row. These transactions do database
/// work only: a client silent this long is frozen or cut off from the
/// server (its TCP connection still open), and every other central
/// instance would wait on it for as long.
pub(crate) const HOLDER_IDLE_LIMIT: &str = "SET LOCAL idle_in_transaction_session_timeout = '10s'";

/// On PostgreSQL, bounds how long `conn`'s transaction may sit idle
/// ([`HOLDER_IDLE_LIMIT`]); call before it locks a row others need.
pub(crate) async fn limit_idle_holder(conn: &mut AnyConnection) -> Result<(), StoreError> {
    if conn.backend_name() == "PostgreSQL" {
        sqlx::query(HOLDER_IDLE_LIMIT).execute(&mut *conn).await?;
    }
    Ok(())
}

/// Reserves `n` consecutive ids of sequence `name` inside `conn`'s
/// transaction; returns the first. The row stays locked until the
/// transaction ends, so the transaction's idle time is bounded first.
pub(crate) async fn next_ids(
    conn: &mut AnyConnection,
    name: &str,
    n: i64,
) -> Result<i64, StoreError> {
    limit_idle_holder(conn).await?;
    let row = sqlx::query(
        "UPDATE id_sequences SET next_id = next_id + $1 WHERE name = $2 RETURNING next_id",
    )
    .bind(n)
    .bind(name.to_string())
    .fetch_one(&mut *conn)
    .await?;
    let next: i64 = row.try_get(0)?;
    Ok(next - n)
}

/// What a change made in a [`Tx`] gives back: its result and the audit
/// events to commit with it.
pub type ChangeFuture<'t, T, E> =
    Pin<Box<dyn Future<Output = Result<(T, Vec<NewEvent>), E>> + Send + 't>>;

fn insert_sql<R: Record>() -> String {
    let params: Vec<String> = (1..=R::COLUMNS.len() + 1)
        .map(|i| format!("${i}"))
        .collect();
    format!(
        "INSERT INTO {} (id, {}) VALUES ({})",
        R::TABLE,
        R::COLUMNS.join(", "),
        params.join(", ")
    )
}

/// Inserts `r` under id `id` with what goes with it.
pub(crate) async fn insert_with_id<R: Record>(
    conn: &mut AnyConnection,
    r: &R,
    id: i64,
) -> Result<(), StoreError> {
    r.validate()?;
    r.bind(sqlx::query(&insert_sql::<R>()).bind(id))
        .execute(&mut *conn)
        .await
        .map_err(|err| classify(err, R::KIND, id))?;
    r.write_related(conn, false).await
}

/// Inserts `items` with their own ids and moves the id sequence past them.
async fn import_in<R: Record>(conn: &mut AnyConnection, items: &[R]) -> Result<(), StoreError> {
    let mut max = 0;
    for r in items {
        insert_with_id(conn, r, r.id()).await?;
        max = max.max(r.id());
    }
    bump_sequence(conn, R::SEQUENCE, max).await
}

pub(crate) async fn bump_sequence(
    conn: &mut AnyConnection,
    name: &str,
    max: i64,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE id_sequences SET next_id = $1 WHERE name = $2 AND next_id <= $3")
        .bind(max + 1)
        .bind(name.to_string())
        .bind(max)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

fn not_found<R: Record>(id: impl fmt::Display) -> StoreError {
    StoreError::NotFound {
        kind: R::KIND,
        id: id.to_string(),
    }
}

async fn get_in<I: RecordId>(conn: &mut AnyConnection, id: I) -> Result<I::Record, StoreError> {
    <I::Record as Record>::read(conn, Some(id.raw()))
        .await?
        .pop()
        .ok_or_else(|| not_found::<I::Record>(id))
}

pub(crate) async fn version_in<R: Record>(
    conn: &mut AnyConnection,
    id: i64,
) -> Result<i64, StoreError> {
    let sql = format!("SELECT version FROM {} WHERE id = $1", R::TABLE);
    let row = sqlx::query(&sql)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    match row {
        Some(row) => Ok(row.try_get::<i64, _>(0)?),
        None => Err(not_found::<R>(id)),
    }
}

fn stale_unless<R: Record>(id: i64, expected: Option<i64>, current: i64) -> Result<(), StoreError> {
    match expected {
        Some(expected) if expected != current => Err(StoreError::Stale {
            kind: R::KIND,
            id: id.to_string(),
            expected,
            current,
        }),
        _ => Ok(()),
    }
}

/// Every entity, in one read transaction (one snapshot of every table).
pub(crate) async fn entities_in(conn: &mut AnyConnection) -> Result<Entities, StoreError> {
    Ok(Entities {
        sites: Record::read(conn, None).await?,
        doors: Record::read(conn, None).await?,
        readers: Record::read(conn, None).await?,
        cardholders: Record::read(conn, None).await?,
        credentials: Record::read(conn, None).await?,
        groups: Record::read(conn, None).await?,
        schedules: Record::read(conn, None).await?,
        holidays: Record::read(conn, None).await?,
    })
}

/// One transaction: entity writes, token changes and events commit together
/// or not at all (dropping a `Tx` without [`commit`](Tx::commit) rolls it
/// back).
pub struct Tx {
    pub(crate) tx: sqlx::Transaction<'static, Any>,
    pub(crate) backend: Backend,
    /// Whether this transaction writes the change feed when it changes
    /// entities.
    pub(crate) feed: bool,
    /// The entities this transaction wrote, each as it was before its
    /// first write (kept only when `feed`): what the sites' deltas start
    /// from.
    pub(crate) touched: Option<crate::feed::Touched>,
}

impl fmt::Debug for Tx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Tx")
    }
}

impl Tx {
    /// Stores a new entity under an id the store assigns (the `id` in `r`
    /// is ignored) and returns it as stored.
    pub async fn create<R: Record>(&mut self, mut r: R) -> Result<R, StoreError> {
        r.validate()?;
        let id = next_ids(&mut self.tx, R::SEQUENCE, 1).await?;
        self.touch::<R>(id, true).await?;
        r.set_id(id);
        insert_with_id(&mut self.tx, &r, id).await?;
        Ok(r)
    }

    /// The entity `id`, or [`StoreError::NotFound`].
    pub async fn get<I: RecordId>(&mut self, id: I) -> Result<I::Record, StoreError> {
        get_in(&mut self.tx, id).await
    }

    /// Every entity of the kind, by id.
    pub async fn list<R: Record>(&mut self) -> Result<Vec<R>, StoreError> {
        R::read(&mut self.tx, None).await
    }

    /// Replaces the entity with `r`'s id, or [`StoreError::NotFound`]; its
    /// version goes up by one.
    pub async fn update<R: Record>(&mut self, r: &R) -> Result<(), StoreError> {
        self.update_if(r, None).await.map(|_| ())
    }

    /// [`update`](Self::update), only if the stored version is `expected`
    /// (else [`StoreError::Stale`]); returns the new version.
    pub async fn update_if<R: Record>(
        &mut self,
        r: &R,
        expected: Option<i64>,
    ) -> Result<i64, StoreError> {
        r.validate()?;
        self.touch::<R>(r.id(), false).await?;
        let current = version_in::<R>(&mut self.tx, r.id()).await?;
        stale_unless::<R>(r.id(), expected, current)?;
        let sets: Vec<String> = R::COLUMNS
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c} = ${}", i + 1))
            .collect();
        let sql = format!(
            "UPDATE {} SET {}, version = version + 1 WHERE id = ${}",
            R::TABLE,
            sets.join(", "),
            R::COLUMNS.len() + 1
        );
        let done = r
            .bind(sqlx::query(&sql))
            .bind(r.id())
            .execute(&mut *self.tx)
            .await
            .map_err(|err| classify(err, R::KIND, r.id()))?;
        if done.rows_affected() == 0 {
            return Err(not_found::<R>(r.id()));
        }
        r.write_related(&mut self.tx, true).await?;
        Ok(current + 1)
    }

    /// The stored version of the entity `id`, or [`StoreError::NotFound`].
    pub async fn version<I: RecordId>(&mut self, id: I) -> Result<i64, StoreError> {
        version_in::<I::Record>(&mut self.tx, id.raw()).await
    }

    /// [`delete`](Self::delete), only if the stored version is `expected`
    /// (else [`StoreError::Stale`]).
    pub async fn delete_if<I: RecordId>(
        &mut self,
        id: I,
        expected: Option<i64>,
    ) -> Result<(), StoreError> {
        let current = version_in::<I::Record>(&mut self.tx, id.raw()).await?;
        stale_unless::<I::Record>(id.raw(), expected, current)?;
        self.delete(id).await
    }

    /// Deletes the entity `id` (with its group memberships), or
    /// [`StoreError::NotFound`].
    pub async fn delete<I: RecordId>(&mut self, id: I) -> Result<(), StoreError> {
        type R<I> = <I as RecordId>::Record;
        self.touch_delete::<R<I>>(id.raw()).await?;
        let sql = format!("DELETE FROM {} WHERE id = $1", R::<I>::TABLE);
        let done = sqlx::query(&sql)
            .bind(id.raw())
            .execute(&mut *self.tx)
            .await
            .map_err(|err| classify(err, R::<I>::KIND, id))?;
        if done.rows_affected() == 0 {
            return Err(not_found::<R<I>>(id));
        }
        Ok(())
    }

    /// Stores a new credential with the card authentication certificate
    /// (DER) it was enrolled with.
    pub async fn create_credential_with_certificate(
        &mut self,
        c: Credential,
        certificate: &[u8],
    ) -> Result<Credential, StoreError> {
        let c = self.create(c).await?;
        sqlx::query("UPDATE credentials SET certificate = $1 WHERE id = $2")
            .bind(hex::encode(certificate))
            .bind(c.id.0)
            .execute(&mut *self.tx)
            .await?;
        Ok(c)
    }

    pub async fn create_token(&mut self, t: &ApiToken) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO api_tokens (name, role, token_hash, created_at, doors, reader_id, \
             expires_at, last_used_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(t.name.clone())
        .bind(t.role.as_str())
        .bind(t.token_hash.clone())
        .bind(ts_to_db(t.created_at))
        .bind(doors_to_db(&t.doors))
        .bind(t.reader.map(|r| r.0))
        .bind(t.expires_at.map(ts_to_db))
        .bind(t.last_used_at.map(ts_to_db))
        .execute(&mut *self.tx)
        .await
        .map_err(|err| classify(err, "API token", &t.name))?;
        Ok(())
    }

    /// Deletes at most `batch` of the events at or below `up_to` (an id)
    /// that happened before `before`, the lowest ids first; how many. Run
    /// on the event log's writer ([`crate::EventLog::change`]), each batch
    /// is one transaction between two group commits, so a tap's commit
    /// waits for one batch at most and never for a database lock. At a
    /// site that uploads its events, none above the central's last
    /// acknowledgement is deleted.
    pub async fn prune_events(
        &mut self,
        before: access::jiff::Timestamp,
        up_to: EventId,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let r = sqlx::query(PRUNE_BATCH)
            .bind(ts_to_db(before))
            .bind(up_to.0)
            .bind(i64::from(batch.max(1)))
            .execute(&mut *self.tx)
            .await?;
        Ok(r.rows_affected())
    }

    /// Notes that the token `name` was used at `at` (a token deleted
    /// meanwhile is no error).
    pub async fn token_used(
        &mut self,
        name: &str,
        at: access::jiff::Timestamp,
    ) -> Result<(), StoreError> {
        sqlx::query("UPDATE api_tokens SET last_used_at = $1 WHERE name = $2")
            .bind(ts_to_db(at))
            .bind(name.to_string())
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    /// Deletes the token `name` and returns it, or [`StoreError::NotFound`].
    pub async fn delete_token(&mut self, name: &str) -> Result<ApiToken, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE name = $1"
        ))
        .bind(name.to_string())
        .fetch_optional(&mut *self.tx)
        .await?;
        let token = match row {
            Some(r) => token_from_row(&r)?,
            None => {
                return Err(StoreError::NotFound {
                    kind: "API token",
                    id: name.to_string(),
                })
            }
        };
        sqlx::query("DELETE FROM api_tokens WHERE name = $1")
            .bind(name.to_string())
            .execute(&mut *self.tx)
            .await
            .map_err(|err| classify(err, "API token", name))?;
        Ok(token)
    }

    /// Every entity.
    pub async fn load_entities(&mut self) -> Result<Entities, StoreError> {
        entities_in(&mut self.tx).await
    }

    /// Appends `events` and returns their ids (ascending, in the order
    /// given); they are durable once the transaction commits.
    pub async fn append_events(&mut self, events: &[NewEvent]) -> Result<Vec<EventId>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let n = events.len() as i64;
        let first = next_ids(&mut self.tx, "event", n).await?;
        let mut id = first;
        for chunk in events.chunks(EVENT_ROWS_PER_INSERT) {
            let mut sql = format!("INSERT INTO events ({EVENT_COLUMNS}) VALUES ");
            for (row, _) in chunk.iter().enumerate() {
                if row > 0 {
                    sql.push_str(", ");
                }
                sql.push('(');
                for col in 0..12 {
                    if col > 0 {
                        sql.push_str(", ");
                    }
                    sql.push_str(&format!("${}", row * 12 + col + 1));
                }
                sql.push(')');
            }
            let mut q = sqlx::query(&sql);
            for e in chunk {
                let data = e
                    .data
                    .as_ref()
                    .map(serde_json::to_string)
                    .transpose()
                    .map_err(|err| invalid("event", "data", err))?;
                q = q
                    .bind(id)
                    .bind(ts_to_db(e.time))
                    .bind(e.kind.as_str())
                    .bind(e.door.map(|v| v.0))
                    .bind(e.reader.map(|v| v.0))
                    .bind(e.cardholder.map(|v| v.0))
                    .bind(e.credential.map(|v| v.0))
                    .bind(e.result.map(|r| r.as_str()))
                    .bind(e.code.as_deref().map(|t| text_to_db(t).into_owned()))
                    .bind(e.reason.as_deref().map(|t| text_to_db(t).into_owned()))
                    .bind(e.actor.as_deref().map(|t| text_to_db(t).into_owned()))
                    .bind(data);
                id += 1;
            }
            q.execute(&mut *self.tx).await?;
        }
        self.note_last_grants(events, first).await?;
        Ok((first..first + n).map(EventId).collect())
    }

    /// Records in `last_grants` the granted taps of `events` (the first
    /// with id `first`) that moved a cardholder at an anti-passback door
    /// ([`NewEvent::passback`]), in the same transaction: the latest per
    /// door and cardholder, never moving an entry back to an earlier event.
    /// Taps at other doors add no statement to their commit.
    async fn note_last_grants(
        &mut self,
        events: &[NewEvent],
        first: i64,
    ) -> Result<(), StoreError> {
        let mut latest = std::collections::BTreeMap::new();
        for (i, e) in events.iter().enumerate() {
            if let (true, EventKind::Tap, Some(EventResult::Granted), Some(door), Some(holder)) =
                (e.passback, e.kind, e.result, e.door, e.cardholder)
            {
                // Later events of the batch have greater ids.
                latest.insert((door.0, holder.0), first + i as i64);
            }
        }
        let latest: Vec<_> = latest.into_iter().collect();
        for chunk in latest.chunks(EVENT_ROWS_PER_INSERT) {
            let mut sql =
                "INSERT INTO last_grants (door_id, cardholder_id, event_id) VALUES ".to_string();
            for i in 0..chunk.len() {
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!("(${}, ${}, ${})", 3 * i + 1, 3 * i + 2, 3 * i + 3));
            }
            sql.push_str(
                " ON CONFLICT (door_id, cardholder_id) DO UPDATE SET event_id = excluded.event_id \
                 WHERE excluded.event_id > last_grants.event_id",
            );
            let mut q = sqlx::query(&sql);
            for ((door, holder), id) in chunk {
                q = q.bind(*door).bind(*holder).bind(*id);
            }
            q.execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    /// Makes everything done in the transaction durable.
    pub async fn commit(mut self) -> Result<(), StoreError> {
        self.write_feed().await?;
        Ok(self.tx.commit().await?)
    }
}

/// Takes every permission of group and others away from `path` (a new
/// data directory, a database file).
fn restrict(path: &Path, mode: u32) -> Result<(), StoreError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|source| {
        StoreError::DataDir {
            path: path.to_path_buf(),
            source,
        }
    })
}

impl Store {
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Starts a transaction.
    pub async fn begin(&self) -> Result<Tx, StoreError> {
        Ok(Tx {
            tx: self.pool.begin().await?,
            backend: self.backend,
            feed: self.feed,
            touched: None,
        })
    }

    /// Runs `change` in one transaction and commits it with the events it
    /// returns: the change and its audit trail are durable together or not
    /// at all. Returns its result and the events' ids.
    pub async fn change<T, E, F>(&self, change: F) -> Result<(T, Vec<EventId>), E>
    where
        E: From<StoreError>,
        F: for<'t> FnOnce(&'t mut Tx) -> ChangeFuture<'t, T, E>,
    {
        let mut tx = self.begin().await?;
        let (out, events) = change(&mut tx).await?;
        let ids = tx.append_events(&events).await?;
        tx.commit().await?;
        Ok((out, ids))
    }

    /// Stores a new entity under an id the store assigns (the `id` in `r`
    /// is ignored) and returns it as stored.
    pub async fn create<R: Record>(&self, r: R) -> Result<R, StoreError> {
        let mut tx = self.begin().await?;
        let r = tx.create(r).await?;
        tx.commit().await?;
        Ok(r)
    }

    /// The entity `id` and its version, read together.
    pub async fn get_versioned<I: RecordId>(&self, id: I) -> Result<(I::Record, i64), StoreError> {
        let mut tx = self.begin().await?;
        let r = tx.get(id).await?;
        let v = tx.version(id).await?;
        tx.commit().await?;
        Ok((r, v))
    }

    /// Every entity of the kind, by id, with its version, read together.
    pub async fn list_versioned<R: Record>(&self) -> Result<Vec<(R, i64)>, StoreError> {
        let mut tx = self.begin().await?;
        let items = tx.list::<R>().await?;
        let sql = format!("SELECT id, version FROM {}", R::TABLE);
        let rows = sqlx::query(&sql).fetch_all(&mut *tx.tx).await?;
        tx.commit().await?;
        let mut versions = std::collections::HashMap::with_capacity(rows.len());
        for row in rows {
            versions.insert(row.try_get::<i64, _>(0)?, row.try_get::<i64, _>(1)?);
        }
        Ok(items
            .into_iter()
            .map(|r| {
                let v = versions.get(&r.id()).copied().unwrap_or(1);
                (r, v)
            })
            .collect())
    }

    /// The entity `id`, or [`StoreError::NotFound`].
    pub async fn get<I: RecordId>(&self, id: I) -> Result<I::Record, StoreError> {
        let mut conn = self.pool.acquire().await?;
        get_in(&mut conn, id).await
    }

    /// Every entity of the kind, by id.
    pub async fn list<R: Record>(&self) -> Result<Vec<R>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        R::read(&mut conn, None).await
    }

    /// Replaces the entity with `r`'s id, or [`StoreError::NotFound`].
    pub async fn update<R: Record>(&self, r: &R) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        tx.update(r).await?;
        tx.commit().await
    }

    /// Deletes the entity `id`, or [`StoreError::NotFound`].
    pub async fn delete<I: RecordId>(&self, id: I) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        tx.delete(id).await?;
        tx.commit().await
    }

    /// Stores a new credential with the card authentication certificate
    /// (DER) it was enrolled with, in one transaction.
    pub async fn create_credential_with_certificate(
        &self,
        c: Credential,
        certificate: &[u8],
    ) -> Result<Credential, StoreError> {
        let mut tx = self.begin().await?;
        let c = tx
            .create_credential_with_certificate(c, certificate)
            .await?;
        tx.commit().await?;
        Ok(c)
    }

    /// Every stored enrollment certificate, by credential id (credentials
    /// enrolled without one are left out).
    pub async fn credential_certificates(&self) -> Result<Vec<EnrolledCertificate>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, certificate FROM credentials WHERE certificate IS NOT NULL ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let text: &str = r.try_get(1)?;
                Ok(EnrolledCertificate {
                    credential: CredentialId(r.try_get(0)?),
                    der: hex::decode(text).map_err(|e| invalid("credential", "certificate", e))?,
                })
            })
            .collect()
    }

    pub async fn create_token(&self, t: &ApiToken) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        tx.create_token(t).await?;
        tx.commit().await
    }
    pub async fn token_by_hash(&self, hash: &str) -> Result<Option<ApiToken>, StoreError> {
        let row = sqlx::query(&format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE token_hash = $1"
        ))
        .bind(hash.to_string())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(token_from_row).transpose()
    }
    pub async fn list_tokens(&self) -> Result<Vec<ApiToken>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {TOKEN_COLUMNS} FROM api_tokens ORDER BY name"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(token_from_row).collect()
    }
    /// Notes that the token `name` was used at `at` (a token deleted
    /// meanwhile is no error).
    pub async fn token_used(
        &self,
        name: &str,
        at: access::jiff::Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        tx.token_used(name, at).await?;
        tx.commit().await
    }
    pub async fn delete_token(&self, name: &str) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        tx.delete_token(name).await?;
        tx.commit().await
    }

    /// Stores every entity of `e` with the ids it has, in one transaction
    /// (for seeding, restoring a backup, or moving between databases). The
    /// ids must not be in use; later creations continue after the largest.
    pub async fn import_entities(&self, e: &Entities) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        import_in(&mut tx, &e.sites).await?;
        import_in(&mut tx, &e.doors).await?;
        import_in(&mut tx, &e.readers).await?;
        import_in(&mut tx, &e.cardholders).await?;
        import_in(&mut tx, &e.credentials).await?;
        import_in(&mut tx, &e.schedules).await?;
        import_in(&mut tx, &e.holidays).await?;
        import_in(&mut tx, &e.groups).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Every entity, read in one consistent transaction.
    pub async fn load_entities(&self) -> Result<Entities, StoreError> {
        let mut tx = self.pool.begin().await?;
        if self.backend == Backend::Postgres {
            // One snapshot for every table read below.
            tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .await?;
        }
        let e = entities_in(&mut tx).await?;
        tx.commit().await?;
        Ok(e)
    }

    /// Every entity, indexed for the decision.
    pub async fn load_snapshot(&self) -> Result<AccessSnapshot, StoreError> {
        let e = self.load_entities().await?;
        Ok(AccessSnapshot::build(e)?)
    }

    /// Appends `events` in one transaction and returns their ids (ascending,
    /// in the order given) once the transaction is durably committed.
    pub async fn append_events(&self, events: &[NewEvent]) -> Result<Vec<EventId>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.begin().await?;
        let ids = tx.append_events(events).await?;
        tx.commit().await?;
        Ok(ids)
    }

    /// The statement selecting the events matching `q`'s filters (and its
    /// cursor, when `paged`), ordered by id in `q`'s direction, and its
    /// parameters.
    fn events_sql(&self, q: &EventQuery, paged: bool) -> (String, Vec<Param>) {
        let mut sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE 1 = 1");
        let mut params = Vec::new();
        // Each clause is followed by its parameter, whose name it returns.
        let mut cond = |sql: &mut String, clause: &str, p: Param| {
            params.push(p);
            let n = format!("${}", params.len());
            sql.push_str(&format!(" AND {clause} {n}"));
            n
        };
        // The time index read for the window's id bounds: on SQLite named,
        // since its planner (with no statistics) would rather walk the
        // whole log in id order to find the first id of a recent window.
        let by_time = match self.backend {
            Backend::Sqlite => "events INDEXED BY events_time",
            Backend::Postgres => "events",
        };
        if let Some(d) = q.door {
            cond(&mut sql, "door_id =", Param::Int(d.0));
        }
        if let Some(c) = q.cardholder {
            cond(&mut sql, "cardholder_id =", Param::Int(c.0));
        }
        if let Some(r) = q.result {
            cond(&mut sql, "result =", Param::Text(r.as_str().into()));
        }
        if let Some(k) = q.kind {
            cond(&mut sql, "kind =", Param::Text(k.as_str().into()));
        }
        // A range of `events_site` (site, id): bounded as the other
        // filters, whatever the other sites' share of the log.
        if let Some(site) = &q.site {
            cond(&mut sql, "site =", Param::Text(site.clone()));
        }
        // A window bounds the ids walked by the lowest id inside it (and,
        // with both ends, the highest), read from the time index: a page of
        // a window costs what the window holds, not what the log holds,
        // and an empty window nothing (the id walk alone read the whole
        // log to find no event in the last hour). Ids out of time order
        // (a clock set back, events uploaded late) stay inside the bounds,
        // which are those of the window's own events.
        //
        // `MIN(id + 0)`, not `MIN(id)`: PostgreSQL answers a bare `MIN(id)`
        // by walking the primary key from the oldest event until one is in
        // the window, which its statistics (that know nothing of ids
        // following time) price as a few rows when the window holds many;
        // on a log filled in time order that walk reads everything older
        // than the window. An expression is read from the time index's
        // range, as long as the window.
        let since = q
            .since
            .map(|t| cond(&mut sql, "time_us >=", Param::Int(ts_to_db(t))));
        let until = q
            .until
            .map(|t| cond(&mut sql, "time_us <", Param::Int(ts_to_db(t))));
        if let Some(s) = &since {
            let window = match &until {
                Some(u) => format!("time_us >= {s} AND time_us < {u}"),
                None => format!("time_us >= {s}"),
            };
            sql.push_str(&format!(
                " AND id >= (SELECT MIN(id + 0) FROM {by_time} WHERE {window})"
            ));
            if until.is_some() {
                sql.push_str(&format!(
                    " AND id <= (SELECT MAX(id + 0) FROM {by_time} WHERE {window})"
                ));
            }
        }
        let backward = q.direction == Direction::Backward;
        if let (Some(c), true) = (q.cursor, paged) {
            cond(
                &mut sql,
                if backward { "id <" } else { "id >" },
                Param::Int(c.0),
            );
        }
        sql.push_str(if backward {
            " ORDER BY id DESC"
        } else {
            " ORDER BY id ASC"
        });
        (sql, params)
    }

    fn bind_all(
        sql: &str,
        params: Vec<Param>,
    ) -> sqlx::query::Query<'_, Any, sqlx::any::AnyArguments<'_>> {
        let mut query = sqlx::query(sql);
        for p in params {
            query = match p {
                Param::Int(v) => query.bind(v),
                Param::Text(v) => query.bind(v),
            };
        }
        query
    }

    /// Events matching `q`, one page at a time.
    pub async fn query_events(&self, q: &EventQuery) -> Result<EventPage, StoreError> {
        let (mut sql, params) = self.events_sql(q, true);
        let limit = q.effective_limit();
        // One more than asked tells whether another page follows.
        sql.push_str(&format!(" LIMIT {}", limit + 1));
        let rows = Self::bind_all(&sql, params).fetch_all(&self.pool).await?;
        let more = rows.len() > limit as usize;
        let events = rows
            .iter()
            .take(limit as usize)
            .map(Self::event_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if more {
            events.last().map(|e| e.id)
        } else {
            None
        };
        Ok(EventPage { events, next })
    }

    /// Every event matching `q`'s filters, in `q`'s direction, at most
    /// `max`, sent to `to` one at a time as the database returns them: one
    /// statement, read as a stream, so memory stays constant and the cost
    /// follows the rows read however the database plans it (never one
    /// sort per page). Each [`EventText`] keeps its `data` as stored JSON
    /// text. Stops early, without error, when `to` is closed; returns how
    /// many were sent. `q`'s cursor and limit are not used.
    pub async fn send_events(
        &self,
        q: &EventQuery,
        max: u64,
        to: tokio::sync::mpsc::Sender<Result<EventText, StoreError>>,
    ) -> u64 {
        use futures_util::TryStreamExt;
        let (mut sql, params) = self.events_sql(q, false);
        sql.push_str(&format!(
            " LIMIT {}",
            i64::try_from(max).unwrap_or(i64::MAX)
        ));
        let mut rows = Self::bind_all(&sql, params).fetch(&self.pool);
        let mut sent = 0;
        loop {
            let item = match rows.try_next().await {
                Ok(None) => return sent,
                Ok(Some(r)) => Self::event_text_from_row(&r),
                Err(e) => Err(e.into()),
            };
            let failed = item.is_err();
            if to.send(item).await.is_err() || failed {
                return sent;
            }
            sent += 1;
        }
    }

    /// For every cardholder and every door of `doors`: the last granted tap
    /// there, in no particular order. Read from `last_grants` (one row per
    /// door and cardholder, kept by [`Tx::append_events`]), so its cost is
    /// bounded by cardholders × doors however long the event log is; the
    /// anti-passback state is rebuilt from it at start-up.
    pub async fn last_granted_taps(&self, doors: &[DoorId]) -> Result<Vec<LastGrant>, StoreError> {
        let mut out = Vec::new();
        // Door ids are integers written into the statement (no parameter
        // limit to mind); a very long list is split.
        for chunk in doors.chunks(500) {
            let list = chunk
                .iter()
                .map(|d| d.0.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "SELECT cardholder_id, door_id, event_id FROM last_grants WHERE door_id IN ({list})"
            );
            for r in sqlx::query(&sql).fetch_all(&self.pool).await? {
                out.push(LastGrant {
                    cardholder: CardholderId(r.try_get(0)?),
                    door: DoorId(r.try_get(1)?),
                    event: EventId(r.try_get(2)?),
                });
            }
        }
        Ok(out)
    }

    /// The latest tap event (granted or refused, by time, then id) of each
    /// door of `doors` that has one, in no particular order: one descent
    /// of the `events_door_tap_times` index per door, whatever the log's
    /// size.
    pub async fn last_taps(&self, doors: &[DoorId]) -> Result<Vec<Event>, StoreError> {
        let mut out = Vec::new();
        for chunk in doors.chunks(500) {
            // Door ids are integers written into the statement.
            let latest = chunk
                .iter()
                .map(|d| {
                    format!(
                        "(SELECT id FROM events WHERE door_id = {} AND kind = 'tap' \
                         ORDER BY time_us DESC, id DESC LIMIT 1)",
                        d.0
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE id IN ({latest})");
            for r in sqlx::query(&sql).fetch_all(&self.pool).await? {
                out.push(Self::event_from_row(&r)?);
            }
        }
        Ok(out)
    }

    /// Hands `each` the taps of `door` in `[since, until)`, newest first
    /// (by time, then id), at most `limit`: their id, time and stored
    /// transaction (JSON text), one row at a time as read. A range of the
    /// `events_door_tap_times` index: the cost follows the window's taps,
    /// not the log. Returns how many were handed over.
    pub async fn door_taps<F>(
        &self,
        door: DoorId,
        since: access::jiff::Timestamp,
        until: access::jiff::Timestamp,
        limit: u64,
        mut each: F,
    ) -> Result<u64, StoreError>
    where
        F: FnMut(EventId, access::jiff::Timestamp, Option<&str>) -> Result<(), StoreError>,
    {
        use futures_util::TryStreamExt;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = sqlx::query(DOOR_TAPS_SQL)
            .bind(door.0)
            .bind(ts_to_db(since))
            .bind(ts_to_db(until))
            .bind(limit)
            .fetch(&self.pool);
        let mut n = 0;
        while let Some(r) = rows.try_next().await? {
            each(
                EventId(r.try_get(0)?),
                ts_from_db("event", "time_us", r.try_get(1)?)?,
                r.try_get::<Option<&str>, _>(2)?,
            )?;
            n += 1;
        }
        Ok(n)
    }

    /// The plan the database picks for the page [`Store::query_events`]
    /// reads for `q` (`EXPLAIN QUERY PLAN` on SQLite, `EXPLAIN` on
    /// PostgreSQL), one step a line: for tests and diagnosis of reads that
    /// must stay bounded however long the log is.
    pub async fn explain_events(&self, q: &EventQuery) -> Result<String, StoreError> {
        let (mut sql, params) = self.events_sql(q, true);
        sql.push_str(&format!(" LIMIT {}", q.effective_limit() + 1));
        self.explain(&sql, params).await
    }

    /// The plan of [`Store::door_taps`]' statement for `door` in
    /// `[since, until)` (see [`Store::explain_events`]).
    pub async fn explain_door_taps(
        &self,
        door: DoorId,
        since: access::jiff::Timestamp,
        until: access::jiff::Timestamp,
    ) -> Result<String, StoreError> {
        let params = vec![
            Param::Int(door.0),
            Param::Int(ts_to_db(since)),
            Param::Int(ts_to_db(until)),
            Param::Int(50_000),
        ];
        self.explain(DOOR_TAPS_SQL, params).await
    }

    async fn explain(&self, sql: &str, params: Vec<Param>) -> Result<String, StoreError> {
        let sql = match self.backend {
            Backend::Sqlite => format!("EXPLAIN QUERY PLAN {sql}"),
            Backend::Postgres => format!("EXPLAIN {sql}"),
        };
        let column = match self.backend {
            Backend::Sqlite => 3,
            Backend::Postgres => 0,
        };
        let mut plan = String::new();
        for r in Self::bind_all(&sql, params).fetch_all(&self.pool).await? {
            plan.push_str(r.try_get::<&str, _>(column)?);
            plan.push('\n');
        }
        Ok(plan)
    }

    fn event_text_from_row(r: &AnyRow) -> Result<EventText, StoreError> {
        Ok(EventText {
            event: Self::event_without_data(r)?,
            data: r.try_get(11)?,
        })
    }

    pub(crate) fn event_from_row(r: &AnyRow) -> Result<Event, StoreError> {
        let mut e = Self::event_without_data(r)?;
        let data: Option<String> = r.try_get(11)?;
        e.event.data = data
            .map(|d| serde_json::from_str(&d))
            .transpose()
            .map_err(|e| invalid("event", "data", e))?;
        Ok(e)
    }

    fn event_without_data(r: &AnyRow) -> Result<Event, StoreError> {
        const K: &str = "event";
        Ok(Event {
            id: EventId(r.try_get(0)?),
            event: NewEvent {
                time: ts_from_db(K, "time_us", r.try_get(1)?)?,
                kind: parse_col(K, "kind", r.try_get::<&str, _>(2)?)?,
                door: r.try_get::<Option<i64>, _>(3)?.map(DoorId),
                reader: r.try_get::<Option<i64>, _>(4)?.map(ReaderId),
                cardholder: r.try_get::<Option<i64>, _>(5)?.map(CardholderId),
                credential: r.try_get::<Option<i64>, _>(6)?.map(CredentialId),
                result: opt_parse(K, "result", r.try_get(7)?)?,
                code: r.try_get::<Option<String>, _>(8)?.map(text_from_db),
                reason: r.try_get::<Option<String>, _>(9)?.map(text_from_db),
                actor: r.try_get::<Option<String>, _>(10)?.map(text_from_db),
                data: None,
                passback: false,
            },
        })
    }
}

/// A door's taps in a time window, newest first ([`Store::door_taps`]).
const DOOR_TAPS_SQL: &str = "SELECT id, time_us, data FROM events WHERE door_id = $1 \
    AND kind = 'tap' AND time_us >= $2 AND time_us < $3 ORDER BY time_us DESC, id DESC LIMIT $4";

/// Rows per multi-row INSERT: 12 parameters each stays far below both
/// engines' limits on bound parameters.
pub(crate) const EVENT_ROWS_PER_INSERT: usize = 256;
pub(crate) const EVENT_COLUMNS: &str = "id, time_us, kind, door_id, reader_id, cardholder_id, \
     credential_id, result, code, reason, actor, data";

enum Param {
    Int(i64),
    Text(String),
}

const TOKEN_COLUMNS: &str =
    "name, role, token_hash, created_at, doors, reader_id, expires_at, last_used_at";

/// Door ids as stored: `1,2,3`, or NULL for none.
fn doors_to_db(doors: &[DoorId]) -> Option<String> {
    (!doors.is_empty()).then(|| {
        doors
            .iter()
            .map(|d| d.0.to_string())
            .collect::<Vec<_>>()
            .join(",")
    })
}

fn token_from_row(r: &AnyRow) -> Result<ApiToken, StoreError> {
    const K: &str = "API token";
    let doors = match r.try_get::<Option<String>, _>(4)? {
        None => Vec::new(),
        Some(text) => text
            .split(',')
            .map(|d| d.trim().parse::<i64>().map(DoorId))
            .collect::<Result<_, _>>()
            .map_err(|e| invalid(K, "doors", e))?,
    };
    Ok(ApiToken {
        name: r.try_get(0)?,
        role: parse_col(K, "role", r.try_get::<&str, _>(1)?)?,
        token_hash: r.try_get(2)?,
        created_at: ts_from_db(K, "created_at", r.try_get(3)?)?,
        doors,
        reader: r.try_get::<Option<i64>, _>(5)?.map(ReaderId),
        expires_at: opt_ts(K, "expires_at", r.try_get(6)?)?,
        last_used_at: opt_ts(K, "last_used_at", r.try_get(7)?)?,
    })
}

/// Refuses a database migrated by a newer release (a downgrade), before
/// the migrator sees it. A new database has no migration table yet.
async fn refuse_newer_schema(pool: &AnyPool) -> Result<(), StoreError> {
    let found: Option<i64> =
        match sqlx::query("SELECT MAX(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(pool)
            .await
        {
            Ok(row) => row.try_get(0)?,
            Err(_) => None,
        };
    let known = Store::schema_version();
    match found {
        Some(found) if found > known => Err(StoreError::NewerSchema { found, known }),
        _ => Ok(()),
    }
}
