//! [`SqlStore`]: the [`Store`] on SQLite or PostgreSQL through `sqlx`'s
//! `Any` driver, so one implementation and one set of migrations serve both.
//! Statements use `$N` parameters, which both engines accept.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use access::jiff::civil::Date;
use access::jiff::Timestamp;
use access::*;
use sqlx::any::{install_default_drivers, AnyArguments, AnyPoolOptions, AnyRow};
use sqlx::{Any, AnyConnection, AnyPool, Executor, Row};

use crate::types::*;
use crate::Store;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Which database engine a [`SqlStore`] talks to.
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

/// A [`Store`] on SQLite or PostgreSQL.
#[derive(Clone)]
pub struct SqlStore {
    pool: AnyPool,
    backend: Backend,
    url: Arc<str>,
}

impl fmt::Debug for SqlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlStore")
            .field("backend", &self.backend)
            .finish()
    }
}

type AnyQuery<'q> = sqlx::query::Query<'q, Any, AnyArguments<'q>>;

/// SQLite settings for every connection: WAL journal, a commit is durable
/// when it returns (`synchronous=FULL`), foreign keys enforced, and writers
/// wait for each other instead of failing.
const SQLITE_PRAGMAS: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
     PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 10000;";

impl SqlStore {
    /// Opens (creating if needed) the SQLite database in `dir`, creating the
    /// directory too, and brings its schema up to date.
    pub async fn open_data_dir(dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::DataDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let dir = dir.canonicalize().map_err(|source| StoreError::DataDir {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(SQLITE_FILE);
        Self::connect(&format!("sqlite://{}?mode=rwc", path.display())).await
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
        MIGRATOR.run(&pool).await?;
        Ok(SqlStore {
            pool,
            backend,
            url: url.into(),
        })
    }

    /// The same database through a pool of its own of `connections`
    /// connections (the schema is already up to date): for the event-log
    /// writer, so that readers (API queries, event streams catching up)
    /// holding every connection of the shared pool never delay a commit a
    /// door is waiting for.
    pub async fn dedicated(&self, connections: u32) -> Result<Self, StoreError> {
        let pool = Self::pool_for(&self.url, self.backend, connections.max(1)).await?;
        Ok(SqlStore {
            pool,
            backend: self.backend,
            url: self.url.clone(),
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

    /// The connection pool, for what the trait does not cover.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Closes every connection (waits for those in use).
    pub async fn close(&self) {
        self.pool.close().await
    }
}

fn classify(err: sqlx::Error, kind: &'static str, id: impl fmt::Display) -> StoreError {
    if let sqlx::Error::Database(db) = &err {
        match db.kind() {
            sqlx::error::ErrorKind::UniqueViolation => {
                return StoreError::Conflict {
                    kind,
                    detail: db.message().to_string(),
                }
            }
            sqlx::error::ErrorKind::ForeignKeyViolation => {
                return StoreError::Reference {
                    kind,
                    id: id.to_string(),
                    detail: db.message().to_string(),
                }
            }
            _ => {}
        }
    }
    StoreError::Database(err)
}

fn invalid(kind: &'static str, field: &'static str, problem: impl fmt::Display) -> StoreError {
    StoreError::Invalid {
        kind,
        field,
        problem: problem.to_string(),
    }
}

fn ts_to_db(t: Timestamp) -> i64 {
    t.as_microsecond()
}

fn ts_from_db(kind: &'static str, field: &'static str, v: i64) -> Result<Timestamp, StoreError> {
    Timestamp::from_microsecond(v).map_err(|e| invalid(kind, field, e))
}

fn opt_ts(
    kind: &'static str,
    field: &'static str,
    v: Option<i64>,
) -> Result<Option<Timestamp>, StoreError> {
    v.map(|v| ts_from_db(kind, field, v)).transpose()
}

fn parse_col<T: std::str::FromStr>(
    kind: &'static str,
    field: &'static str,
    v: &str,
) -> Result<T, StoreError>
where
    T::Err: fmt::Display,
{
    v.parse().map_err(|e| invalid(kind, field, e))
}

fn opt_parse<T: std::str::FromStr>(
    kind: &'static str,
    field: &'static str,
    v: Option<String>,
) -> Result<Option<T>, StoreError>
where
    T::Err: fmt::Display,
{
    v.map(|v| parse_col(kind, field, &v)).transpose()
}

/// Reserves `n` consecutive ids of sequence `name` inside `conn`'s
/// transaction; returns the first.
async fn next_ids(conn: &mut AnyConnection, name: &str, n: i64) -> Result<i64, StoreError> {
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

/// How one entity type maps to its table.
trait SqlEntity: Sized + Send + Sync + 'static {
    /// Singular name, also the name of its id sequence.
    const KIND: &'static str;
    const TABLE: &'static str;
    /// Every column but `id`, in bind order.
    const COLUMNS: &'static [&'static str];
    fn id(&self) -> i64;
    fn set_id(&mut self, id: i64);
    fn validate(&self) -> Result<(), StoreError> {
        Ok(())
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q>;
    /// From a row of `id` then `COLUMNS`.
    fn from_row(row: &AnyRow) -> Result<Self, StoreError>;

    fn select_sql() -> String {
        format!(
            "SELECT id, {} FROM {}",
            Self::COLUMNS.join(", "),
            Self::TABLE
        )
    }
}

impl SqlEntity for Site {
    const KIND: &'static str = "site";
    const TABLE: &'static str = "sites";
    const COLUMNS: &'static [&'static str] = &["name", "time_zone"];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = SiteId(id);
    }
    fn validate(&self) -> Result<(), StoreError> {
        access::time_zone(&self.time_zone)
            .map(|_| ())
            .map_err(|e| invalid("site", "time_zone", format!("`{}`: {e}", self.time_zone)))
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.name.clone()).bind(self.time_zone.clone())
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Site {
            id: SiteId(r.try_get(0)?),
            name: r.try_get(1)?,
            time_zone: r.try_get(2)?,
        })
    }
}

impl SqlEntity for Door {
    const KIND: &'static str = "door";
    const TABLE: &'static str = "doors";
    const COLUMNS: &'static [&'static str] = &[
        "site_id",
        "name",
        "mechanism",
        "allow_low_assurance",
        "passback",
        "mode",
    ];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = DoorId(id);
    }
    fn validate(&self) -> Result<(), StoreError> {
        if self.mechanism == Mechanism::Chuid && !self.allow_low_assurance {
            return Err(invalid(
                "door",
                "mechanism",
                "`chuid` is low assurance: set allow_low_assurance to require it",
            ));
        }
        Ok(())
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.site.0)
            .bind(self.name.clone())
            .bind(self.mechanism.as_str())
            .bind(self.allow_low_assurance as i64)
            .bind(self.passback.as_str())
            .bind(self.mode.as_str())
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Door {
            id: DoorId(r.try_get(0)?),
            site: SiteId(r.try_get(1)?),
            name: r.try_get(2)?,
            mechanism: parse_col("door", "mechanism", r.try_get::<&str, _>(3)?)?,
            allow_low_assurance: r.try_get::<i64, _>(4)? != 0,
            passback: parse_col("door", "passback", r.try_get::<&str, _>(5)?)?,
            mode: parse_col("door", "mode", r.try_get::<&str, _>(6)?)?,
        })
    }
}

impl SqlEntity for Reader {
    const KIND: &'static str = "reader";
    const TABLE: &'static str = "readers";
    const COLUMNS: &'static [&'static str] = &["door_id", "name", "connection"];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = ReaderId(id);
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.door.0)
            .bind(self.name.clone())
            .bind(self.connection.clone())
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Reader {
            id: ReaderId(r.try_get(0)?),
            door: DoorId(r.try_get(1)?),
            name: r.try_get(2)?,
            connection: r.try_get(3)?,
        })
    }
}

impl SqlEntity for Cardholder {
    const KIND: &'static str = "cardholder";
    const TABLE: &'static str = "cardholders";
    const COLUMNS: &'static [&'static str] = &[
        "name",
        "status",
        "status_reason",
        "valid_from",
        "valid_until",
    ];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = CardholderId(id);
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        let (status, reason) = match &self.status {
            CardholderStatus::Active => ("active", None),
            CardholderStatus::Suspended { reason } => ("suspended", Some(reason.clone())),
        };
        q.bind(self.name.clone())
            .bind(status)
            .bind(reason)
            .bind(self.valid_from.map(ts_to_db))
            .bind(self.valid_until.map(ts_to_db))
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        const K: &str = "cardholder";
        let status = match r.try_get::<&str, _>(2)? {
            "active" => CardholderStatus::Active,
            "suspended" => CardholderStatus::Suspended {
                reason: r.try_get::<Option<String>, _>(3)?.unwrap_or_default(),
            },
            other => return Err(invalid(K, "status", format!("unknown status `{other}`"))),
        };
        Ok(Cardholder {
            id: CardholderId(r.try_get(0)?),
            name: r.try_get(1)?,
            status,
            valid_from: opt_ts(K, "valid_from", r.try_get(4)?)?,
            valid_until: opt_ts(K, "valid_until", r.try_get(5)?)?,
        })
    }
}

impl SqlEntity for Credential {
    const KIND: &'static str = "credential";
    const TABLE: &'static str = "credentials";
    const COLUMNS: &'static [&'static str] = &[
        "cardholder_id",
        "card_uuid",
        "fasc_n",
        "cert_sha256",
        "spki_sha256",
        "expires_at",
        "enrolled_at",
        "enrolled_by",
        "state",
        "state_reason",
        "revoked_at",
    ];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = CredentialId(id);
    }
    fn validate(&self) -> Result<(), StoreError> {
        if self.card_uuid.is_none()
            && self.fasc_n.is_none()
            && self.cert_sha256.is_none()
            && self.spki_sha256.is_none()
        {
            return Err(invalid(
                "credential",
                "card_uuid",
                "a credential needs at least one card identifier (card UUID, FASC-N, certificate or key hash)",
            ));
        }
        Ok(())
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        let (state, reason, at) = match &self.state {
            CredentialState::Active => ("active", None, None),
            CredentialState::Suspended { reason } => ("suspended", Some(reason.clone()), None),
            CredentialState::Revoked { reason, at } => {
                ("revoked", Some(reason.clone()), at.map(ts_to_db))
            }
        };
        q.bind(self.cardholder.0)
            .bind(self.card_uuid.map(|v| v.to_string()))
            .bind(self.fasc_n.map(|v| v.to_string()))
            .bind(self.cert_sha256.map(|v| v.to_string()))
            .bind(self.spki_sha256.map(|v| v.to_string()))
            .bind(self.expires_at.map(ts_to_db))
            .bind(ts_to_db(self.enrolled_at))
            .bind(self.enrolled_by.clone())
            .bind(state)
            .bind(reason)
            .bind(at)
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        const K: &str = "credential";
        // Borrowed column values: no allocation for the identifiers.
        fn ident<T: std::str::FromStr>(
            r: &AnyRow,
            i: usize,
            field: &'static str,
        ) -> Result<Option<T>, StoreError>
        where
            T::Err: fmt::Display,
        {
            r.try_get::<Option<&str>, _>(i)?
                .map(|v| parse_col(K, field, v))
                .transpose()
        }
        let reason = || -> Result<String, StoreError> {
            Ok(r.try_get::<Option<&str>, _>(10)?
                .unwrap_or_default()
                .to_string())
        };
        let state = match r.try_get::<&str, _>(9)? {
            "active" => CredentialState::Active,
            "suspended" => CredentialState::Suspended { reason: reason()? },
            "revoked" => CredentialState::Revoked {
                reason: reason()?,
                at: opt_ts(K, "revoked_at", r.try_get(11)?)?,
            },
            other => return Err(invalid(K, "state", format!("unknown state `{other}`"))),
        };
        Ok(Credential {
            id: CredentialId(r.try_get(0)?),
            cardholder: CardholderId(r.try_get(1)?),
            card_uuid: ident(r, 2, "card_uuid")?,
            fasc_n: ident(r, 3, "fasc_n")?,
            cert_sha256: ident(r, 4, "cert_sha256")?,
            spki_sha256: ident(r, 5, "spki_sha256")?,
            expires_at: opt_ts(K, "expires_at", r.try_get(6)?)?,
            enrolled_at: ts_from_db(K, "enrolled_at", r.try_get(7)?)?,
            enrolled_by: r.try_get(8)?,
            state,
        })
    }
}

fn join_windows<T: fmt::Display>(ws: &[T]) -> String {
    ws.iter()
        .map(|w| w.to_string())
        .collect::<Vec<_>>()
        .join(";")
}

fn split_windows<T: std::str::FromStr>(field: &'static str, s: &str) -> Result<Vec<T>, StoreError>
where
    T::Err: fmt::Display,
{
    s.split(';')
        .filter(|w| !w.trim().is_empty())
        .map(|w| parse_col("schedule", field, w))
        .collect()
}

impl SqlEntity for Schedule {
    const KIND: &'static str = "schedule";
    const TABLE: &'static str = "schedules";
    const COLUMNS: &'static [&'static str] = &["name", "windows", "holiday_windows"];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = ScheduleId(id);
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.name.clone())
            .bind(join_windows(&self.windows))
            .bind(join_windows(&self.holiday_windows))
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Schedule {
            id: ScheduleId(r.try_get(0)?),
            name: r.try_get(1)?,
            windows: split_windows("windows", r.try_get(2)?)?,
            holiday_windows: split_windows("holiday_windows", r.try_get(3)?)?,
        })
    }
}

impl SqlEntity for Holiday {
    const KIND: &'static str = "holiday";
    const TABLE: &'static str = "holidays";
    const COLUMNS: &'static [&'static str] = &["site_id", "day", "name"];
    fn id(&self) -> i64 {
        self.id.0
    }
    fn set_id(&mut self, id: i64) {
        self.id = HolidayId(id);
    }
    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.site.map(|s| s.0))
            .bind(self.date.to_string())
            .bind(self.name.clone())
    }
    fn from_row(r: &AnyRow) -> Result<Self, StoreError> {
        Ok(Holiday {
            id: HolidayId(r.try_get(0)?),
            site: r.try_get::<Option<i64>, _>(1)?.map(SiteId),
            date: parse_col::<Date>("holiday", "day", r.try_get::<&str, _>(2)?)?,
            name: r.try_get(3)?,
        })
    }
}

fn insert_sql<E: SqlEntity>() -> String {
    let params: Vec<String> = (1..=E::COLUMNS.len() + 1)
        .map(|i| format!("${i}"))
        .collect();
    format!(
        "INSERT INTO {} (id, {}) VALUES ({})",
        E::TABLE,
        E::COLUMNS.join(", "),
        params.join(", ")
    )
}

/// Inserts `items` with their own ids and moves the id sequence past them.
async fn import_in<E: SqlEntity>(conn: &mut AnyConnection, items: &[E]) -> Result<(), StoreError> {
    let sql = insert_sql::<E>();
    let mut max = 0;
    for e in items {
        e.validate()?;
        e.bind(sqlx::query(&sql).bind(e.id()))
            .execute(&mut *conn)
            .await
            .map_err(|err| classify(err, E::KIND, e.id()))?;
        max = max.max(e.id());
    }
    bump_sequence(conn, E::KIND, max).await
}

async fn bump_sequence(conn: &mut AnyConnection, name: &str, max: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE id_sequences SET next_id = $1 WHERE name = $2 AND next_id <= $3")
        .bind(max + 1)
        .bind(name.to_string())
        .bind(max)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

impl SqlStore {
    async fn insert<E: SqlEntity>(&self, mut e: E) -> Result<E, StoreError> {
        e.validate()?;
        let mut tx = self.pool.begin().await?;
        let id = next_ids(&mut tx, E::KIND, 1).await?;
        e.set_id(id);
        e.bind(sqlx::query(&insert_sql::<E>()).bind(id))
            .execute(&mut *tx)
            .await
            .map_err(|err| classify(err, E::KIND, id))?;
        tx.commit().await?;
        Ok(e)
    }

    async fn update<E: SqlEntity>(&self, e: &E) -> Result<(), StoreError> {
        e.validate()?;
        let sets: Vec<String> = E::COLUMNS
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c} = ${}", i + 1))
            .collect();
        let sql = format!(
            "UPDATE {} SET {} WHERE id = ${}",
            E::TABLE,
            sets.join(", "),
            E::COLUMNS.len() + 1
        );
        let done = e
            .bind(sqlx::query(&sql))
            .bind(e.id())
            .execute(&self.pool)
            .await
            .map_err(|err| classify(err, E::KIND, e.id()))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                kind: E::KIND,
                id: e.id().to_string(),
            });
        }
        Ok(())
    }

    async fn get<E: SqlEntity>(&self, id: i64) -> Result<E, StoreError> {
        let sql = format!("{} WHERE id = $1", E::select_sql());
        let row = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                kind: E::KIND,
                id: id.to_string(),
            })?;
        E::from_row(&row)
    }

    async fn list_in<E: SqlEntity>(conn: &mut AnyConnection) -> Result<Vec<E>, StoreError> {
        let sql = format!("{} ORDER BY id", E::select_sql());
        let rows = sqlx::query(&sql).fetch_all(&mut *conn).await?;
        rows.iter().map(E::from_row).collect()
    }

    async fn list<E: SqlEntity>(&self) -> Result<Vec<E>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        Self::list_in(&mut conn).await
    }

    async fn delete<E: SqlEntity>(&self, id: i64) -> Result<(), StoreError> {
        self.delete_where(E::KIND, E::TABLE, "id", id.to_string(), |q| q.bind(id))
            .await
    }

    async fn delete_where(
        &self,
        kind: &'static str,
        table: &str,
        column: &str,
        shown: String,
        bind: impl for<'q> FnOnce(AnyQuery<'q>) -> AnyQuery<'q>,
    ) -> Result<(), StoreError> {
        let sql = format!("DELETE FROM {table} WHERE {column} = $1");
        let done = bind(sqlx::query(&sql))
            .execute(&self.pool)
            .await
            .map_err(|err| classify(err, kind, &shown))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound { kind, id: shown });
        }
        Ok(())
    }

    async fn write_group_members(
        conn: &mut AnyConnection,
        g: &AccessGroup,
    ) -> Result<(), StoreError> {
        let mut doors = g.doors.clone();
        doors.sort_unstable();
        doors.dedup();
        for d in doors {
            sqlx::query("INSERT INTO access_group_doors (group_id, door_id) VALUES ($1, $2)")
                .bind(g.id.0)
                .bind(d.0)
                .execute(&mut *conn)
                .await
                .map_err(|err| classify(err, "access group", g.id))?;
        }
        let mut holders = g.cardholders.clone();
        holders.sort_unstable();
        holders.dedup();
        for c in holders {
            sqlx::query(
                "INSERT INTO access_group_members (group_id, cardholder_id) VALUES ($1, $2)",
            )
            .bind(g.id.0)
            .bind(c.0)
            .execute(&mut *conn)
            .await
            .map_err(|err| classify(err, "access group", g.id))?;
        }
        Ok(())
    }

    /// Groups (optionally one) with their doors and cardholders: three
    /// queries, merged in linear time.
    async fn groups_in(
        conn: &mut AnyConnection,
        only: Option<GroupId>,
    ) -> Result<Vec<AccessGroup>, StoreError> {
        let filter = if only.is_some() {
            " WHERE group_id = $1"
        } else {
            ""
        };
        let group_sql = format!(
            "SELECT id, name, schedule_id FROM access_groups{} ORDER BY id",
            if only.is_some() { " WHERE id = $1" } else { "" }
        );
        let mut q = sqlx::query(&group_sql);
        if let Some(g) = only {
            q = q.bind(g.0);
        }
        let mut groups = Vec::new();
        let mut ix = HashMap::new();
        for r in q.fetch_all(&mut *conn).await? {
            let id = GroupId(r.try_get(0)?);
            ix.insert(id, groups.len());
            groups.push(AccessGroup {
                id,
                name: r.try_get(1)?,
                schedule: ScheduleId(r.try_get(2)?),
                doors: Vec::new(),
                cardholders: Vec::new(),
            });
        }
        for (table, column, is_door) in [
            ("access_group_doors", "door_id", true),
            ("access_group_members", "cardholder_id", false),
        ] {
            let sql = format!(
                "SELECT group_id, {column} FROM {table}{filter} ORDER BY group_id, {column}"
            );
            let mut q = sqlx::query(&sql);
            if let Some(g) = only {
                q = q.bind(g.0);
            }
            for r in q.fetch_all(&mut *conn).await? {
                let g = GroupId(r.try_get(0)?);
                let v: i64 = r.try_get(1)?;
                if let Some(&i) = ix.get(&g) {
                    if is_door {
                        groups[i].doors.push(DoorId(v));
                    } else {
                        groups[i].cardholders.push(CardholderId(v));
                    }
                }
            }
        }
        Ok(groups)
    }

    fn event_from_row(r: &AnyRow) -> Result<Event, StoreError> {
        const K: &str = "event";
        let data: Option<String> = r.try_get(11)?;
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
                code: r.try_get(8)?,
                reason: r.try_get(9)?,
                actor: r.try_get(10)?,
                data: data
                    .map(|d| serde_json::from_str(&d))
                    .transpose()
                    .map_err(|e| invalid(K, "data", e))?,
            },
        })
    }
}

/// Rows per multi-row INSERT: 12 parameters each stays far below both
/// engines' limits on bound parameters.
const EVENT_ROWS_PER_INSERT: usize = 256;
const EVENT_COLUMNS: &str = "id, time_us, kind, door_id, reader_id, cardholder_id, \
     credential_id, result, code, reason, actor, data";

enum Param {
    Int(i64),
    Text(String),
}

#[async_trait::async_trait]
impl Store for SqlStore {
    fn backend(&self) -> Backend {
        self.backend
    }

    async fn create_site(&self, site: Site) -> Result<Site, StoreError> {
        self.insert(site).await
    }
    async fn get_site(&self, id: SiteId) -> Result<Site, StoreError> {
        self.get(id.0).await
    }
    async fn list_sites(&self) -> Result<Vec<Site>, StoreError> {
        self.list().await
    }
    async fn update_site(&self, site: &Site) -> Result<(), StoreError> {
        self.update(site).await
    }
    async fn delete_site(&self, id: SiteId) -> Result<(), StoreError> {
        self.delete::<Site>(id.0).await
    }

    async fn create_door(&self, door: Door) -> Result<Door, StoreError> {
        self.insert(door).await
    }
    async fn get_door(&self, id: DoorId) -> Result<Door, StoreError> {
        self.get(id.0).await
    }
    async fn list_doors(&self) -> Result<Vec<Door>, StoreError> {
        self.list().await
    }
    async fn update_door(&self, door: &Door) -> Result<(), StoreError> {
        self.update(door).await
    }
    async fn delete_door(&self, id: DoorId) -> Result<(), StoreError> {
        self.delete::<Door>(id.0).await
    }

    async fn create_reader(&self, reader: Reader) -> Result<Reader, StoreError> {
        self.insert(reader).await
    }
    async fn get_reader(&self, id: ReaderId) -> Result<Reader, StoreError> {
        self.get(id.0).await
    }
    async fn list_readers(&self) -> Result<Vec<Reader>, StoreError> {
        self.list().await
    }
    async fn update_reader(&self, reader: &Reader) -> Result<(), StoreError> {
        self.update(reader).await
    }
    async fn delete_reader(&self, id: ReaderId) -> Result<(), StoreError> {
        self.delete::<Reader>(id.0).await
    }

    async fn create_cardholder(&self, c: Cardholder) -> Result<Cardholder, StoreError> {
        self.insert(c).await
    }
    async fn get_cardholder(&self, id: CardholderId) -> Result<Cardholder, StoreError> {
        self.get(id.0).await
    }
    async fn list_cardholders(&self) -> Result<Vec<Cardholder>, StoreError> {
        self.list().await
    }
    async fn update_cardholder(&self, c: &Cardholder) -> Result<(), StoreError> {
        self.update(c).await
    }
    async fn delete_cardholder(&self, id: CardholderId) -> Result<(), StoreError> {
        self.delete::<Cardholder>(id.0).await
    }

    async fn create_credential(&self, c: Credential) -> Result<Credential, StoreError> {
        self.insert(c).await
    }
    async fn get_credential(&self, id: CredentialId) -> Result<Credential, StoreError> {
        self.get(id.0).await
    }
    async fn list_credentials(&self) -> Result<Vec<Credential>, StoreError> {
        self.list().await
    }
    async fn update_credential(&self, c: &Credential) -> Result<(), StoreError> {
        self.update(c).await
    }
    async fn delete_credential(&self, id: CredentialId) -> Result<(), StoreError> {
        self.delete::<Credential>(id.0).await
    }

    async fn create_credential_with_certificate(
        &self,
        mut c: Credential,
        certificate: &[u8],
    ) -> Result<Credential, StoreError> {
        c.validate()?;
        let mut tx = self.pool.begin().await?;
        let id = next_ids(&mut tx, Credential::KIND, 1).await?;
        c.set_id(id);
        c.bind(sqlx::query(&insert_sql::<Credential>()).bind(id))
            .execute(&mut *tx)
            .await
            .map_err(|err| classify(err, Credential::KIND, id))?;
        sqlx::query("UPDATE credentials SET certificate = $1 WHERE id = $2")
            .bind(hex::encode(certificate))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(c)
    }

    async fn credential_certificates(&self) -> Result<Vec<EnrolledCertificate>, StoreError> {
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

    async fn create_schedule(&self, s: Schedule) -> Result<Schedule, StoreError> {
        self.insert(s).await
    }
    async fn get_schedule(&self, id: ScheduleId) -> Result<Schedule, StoreError> {
        self.get(id.0).await
    }
    async fn list_schedules(&self) -> Result<Vec<Schedule>, StoreError> {
        self.list().await
    }
    async fn update_schedule(&self, s: &Schedule) -> Result<(), StoreError> {
        self.update(s).await
    }
    async fn delete_schedule(&self, id: ScheduleId) -> Result<(), StoreError> {
        self.delete::<Schedule>(id.0).await
    }

    async fn create_group(&self, mut g: AccessGroup) -> Result<AccessGroup, StoreError> {
        let mut tx = self.pool.begin().await?;
        let id = next_ids(&mut tx, "access_group", 1).await?;
        g.id = GroupId(id);
        sqlx::query("INSERT INTO access_groups (id, name, schedule_id) VALUES ($1, $2, $3)")
            .bind(id)
            .bind(g.name.clone())
            .bind(g.schedule.0)
            .execute(&mut *tx)
            .await
            .map_err(|err| classify(err, "access group", id))?;
        Self::write_group_members(&mut tx, &g).await?;
        tx.commit().await?;
        Ok(g)
    }
    async fn get_group(&self, id: GroupId) -> Result<AccessGroup, StoreError> {
        let mut conn = self.pool.acquire().await?;
        Self::groups_in(&mut conn, Some(id))
            .await?
            .pop()
            .ok_or_else(|| StoreError::NotFound {
                kind: "access group",
                id: id.to_string(),
            })
    }
    async fn list_groups(&self) -> Result<Vec<AccessGroup>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        Self::groups_in(&mut conn, None).await
    }
    async fn update_group(&self, g: &AccessGroup) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        let done =
            sqlx::query("UPDATE access_groups SET name = $1, schedule_id = $2 WHERE id = $3")
                .bind(g.name.clone())
                .bind(g.schedule.0)
                .bind(g.id.0)
                .execute(&mut *tx)
                .await
                .map_err(|err| classify(err, "access group", g.id))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound {
                kind: "access group",
                id: g.id.to_string(),
            });
        }
        for table in ["access_group_doors", "access_group_members"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE group_id = $1"))
                .bind(g.id.0)
                .execute(&mut *tx)
                .await?;
        }
        Self::write_group_members(&mut tx, g).await?;
        tx.commit().await?;
        Ok(())
    }
    async fn delete_group(&self, id: GroupId) -> Result<(), StoreError> {
        self.delete_where("access group", "access_groups", "id", id.to_string(), |q| {
            q.bind(id.0)
        })
        .await
    }

    async fn create_holiday(&self, h: Holiday) -> Result<Holiday, StoreError> {
        self.insert(h).await
    }
    async fn get_holiday(&self, id: HolidayId) -> Result<Holiday, StoreError> {
        self.get(id.0).await
    }
    async fn list_holidays(&self) -> Result<Vec<Holiday>, StoreError> {
        self.list().await
    }
    async fn update_holiday(&self, h: &Holiday) -> Result<(), StoreError> {
        self.update(h).await
    }
    async fn delete_holiday(&self, id: HolidayId) -> Result<(), StoreError> {
        self.delete::<Holiday>(id.0).await
    }

    async fn create_token(&self, t: &ApiToken) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO api_tokens (name, role, token_hash, created_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(t.name.clone())
        .bind(t.role.as_str())
        .bind(t.token_hash.clone())
        .bind(ts_to_db(t.created_at))
        .execute(&self.pool)
        .await
        .map_err(|err| classify(err, "API token", &t.name))?;
        Ok(())
    }
    async fn token_by_hash(&self, hash: &str) -> Result<Option<ApiToken>, StoreError> {
        let row = sqlx::query(
            "SELECT name, role, token_hash, created_at FROM api_tokens WHERE token_hash = $1",
        )
        .bind(hash.to_string())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(token_from_row).transpose()
    }
    async fn list_tokens(&self) -> Result<Vec<ApiToken>, StoreError> {
        let rows =
            sqlx::query("SELECT name, role, token_hash, created_at FROM api_tokens ORDER BY name")
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(token_from_row).collect()
    }
    async fn delete_token(&self, name: &str) -> Result<(), StoreError> {
        let owned = name.to_string();
        self.delete_where("API token", "api_tokens", "name", name.to_string(), |q| {
            q.bind(owned)
        })
        .await
    }

    async fn import_entities(&self, e: &Entities) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        import_in(&mut tx, &e.sites).await?;
        import_in(&mut tx, &e.doors).await?;
        import_in(&mut tx, &e.readers).await?;
        import_in(&mut tx, &e.cardholders).await?;
        import_in(&mut tx, &e.credentials).await?;
        import_in(&mut tx, &e.schedules).await?;
        import_in(&mut tx, &e.holidays).await?;
        let mut max = 0;
        for g in &e.groups {
            sqlx::query("INSERT INTO access_groups (id, name, schedule_id) VALUES ($1, $2, $3)")
                .bind(g.id.0)
                .bind(g.name.clone())
                .bind(g.schedule.0)
                .execute(&mut *tx)
                .await
                .map_err(|err| classify(err, "access group", g.id))?;
            Self::write_group_members(&mut tx, g).await?;
            max = max.max(g.id.0);
        }
        bump_sequence(&mut tx, "access_group", max).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn load_entities(&self) -> Result<Entities, StoreError> {
        let mut tx = self.pool.begin().await?;
        if self.backend == Backend::Postgres {
            // One snapshot for every table read below.
            tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                .await?;
        }
        let e = Entities {
            sites: Self::list_in(&mut tx).await?,
            doors: Self::list_in(&mut tx).await?,
            readers: Self::list_in(&mut tx).await?,
            cardholders: Self::list_in(&mut tx).await?,
            credentials: Self::list_in(&mut tx).await?,
            groups: Self::groups_in(&mut tx, None).await?,
            schedules: Self::list_in(&mut tx).await?,
            holidays: Self::list_in(&mut tx).await?,
        };
        tx.commit().await?;
        Ok(e)
    }

    async fn append_events(&self, events: &[NewEvent]) -> Result<Vec<EventId>, StoreError> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let n = events.len() as i64;
        let mut tx = self.pool.begin().await?;
        let first = next_ids(&mut tx, "event", n).await?;
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
                    .bind(e.code.clone())
                    .bind(e.reason.clone())
                    .bind(e.actor.clone())
                    .bind(data);
                id += 1;
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok((first..first + n).map(EventId).collect())
    }

    async fn query_events(&self, q: &EventQuery) -> Result<EventPage, StoreError> {
        let mut sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE 1 = 1");
        let mut params = Vec::new();
        let mut cond = |sql: &mut String, clause: &str, p: Param| {
            params.push(p);
            sql.push_str(&format!(" AND {clause} ${}", params.len()));
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
        if let Some(t) = q.since {
            cond(&mut sql, "time_us >=", Param::Int(ts_to_db(t)));
        }
        if let Some(t) = q.until {
            cond(&mut sql, "time_us <", Param::Int(ts_to_db(t)));
        }
        let backward = q.direction == Direction::Backward;
        if let Some(c) = q.cursor {
            cond(
                &mut sql,
                if backward { "id <" } else { "id >" },
                Param::Int(c.0),
            );
        }
        let limit = q.effective_limit();
        sql.push_str(if backward {
            " ORDER BY id DESC"
        } else {
            " ORDER BY id ASC"
        });
        // One more than asked tells whether another page follows.
        sql.push_str(&format!(" LIMIT {}", limit + 1));
        let mut query = sqlx::query(&sql);
        for p in params {
            query = match p {
                Param::Int(v) => query.bind(v),
                Param::Text(v) => query.bind(v),
            };
        }
        let rows = query.fetch_all(&self.pool).await?;
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
    async fn last_granted_taps(&self, doors: &[DoorId]) -> Result<Vec<LastGrant>, StoreError> {
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
                "SELECT cardholder_id, door_id, MAX(id) FROM events \
                 WHERE door_id IN ({list}) AND kind = 'tap' AND result = 'granted' \
                 AND cardholder_id IS NOT NULL GROUP BY cardholder_id, door_id"
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

    async fn last_taps(&self) -> Result<Vec<Event>, StoreError> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE id IN \
             (SELECT MAX(id) FROM events WHERE kind = 'tap' AND door_id IS NOT NULL \
             GROUP BY door_id)"
        );
        sqlx::query(&sql)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(Self::event_from_row)
            .collect()
    }
}

fn token_from_row(r: &AnyRow) -> Result<ApiToken, StoreError> {
    Ok(ApiToken {
        name: r.try_get(0)?,
        role: parse_col("API token", "role", r.try_get::<&str, _>(1)?)?,
        token_hash: r.try_get(2)?,
        created_at: ts_from_db("API token", "created_at", r.try_get(3)?)?,
    })
}
