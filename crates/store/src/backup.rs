//! Online backups of the SQLite database and their restore.
//!
//! [`Store::backup_to`] writes a consistent copy with `VACUUM INTO`, which
//! reads the database in one read transaction: taps go on committing (WAL
//! readers do not block the writer) and the copy holds exactly the events
//! committed when it started, none torn. The copy is then checked
//! (`PRAGMA integrity_check`) and counted. [`restore`] checks a backup the
//! same way, refuses one written by a newer release (its migrations are
//! unknown here) and a database still in use, then puts it in place of the
//! data directory's database atomically. PostgreSQL is backed up with its
//! own tools: the error says how.

use std::path::{Path, PathBuf};

use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Row};

use crate::sql::{Backend, Store, MIGRATOR, SQLITE_FILE};

/// `pg_dump` and `pg_restore`, as the refusal and the README give them.
pub const PG_DUMP_RECIPE: &str = "pg_dump --format=custom --file=pivgate.dump \"$DATABASE_URL\", \
restored with pg_restore --clean --if-exists --dbname=\"$DATABASE_URL\" pivgate.dump";

/// Why a backup or restore did not happen.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("the database is PostgreSQL: back it up with its own tools, e.g. {PG_DUMP_RECIPE}")]
    Postgres,
    #[error("{0} exists already: a backup is written to a new file")]
    Exists(PathBuf),
    #[error("{path}: {source}")]
    Database { path: PathBuf, source: sqlx::Error },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a sound pivgate backup: {problem}")]
    NotABackup { path: PathBuf, problem: String },
    #[error("{path} was written by a newer pivgate (schema version {found}, this release knows up to {known}); restoring it here would lose data: use that release")]
    Newer {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("{0} is in use (is `pivgate serve` running?): stop the service before restoring")]
    InUse(PathBuf),
}

impl BackupError {
    /// A stable code for logs and exit messages.
    pub fn code(&self) -> &'static str {
        match self {
            BackupError::Postgres => "backup.postgres",
            BackupError::Exists(_) => "backup.exists",
            BackupError::Database { .. } => "backup.database",
            BackupError::Io { .. } => "backup.io",
            BackupError::NotABackup { .. } => "backup.not-a-backup",
            BackupError::Newer { .. } => "backup.newer",
            BackupError::InUse(_) => "backup.in-use",
        }
    }
}

/// What a backup holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackupSummary {
    /// Events in it.
    pub events: i64,
    /// The highest event id in it (0 when none).
    pub last_event: i64,
    /// Its size in bytes.
    pub bytes: u64,
    /// The schema version (latest migration applied).
    pub schema: i64,
}

impl Store {
    /// Writes a consistent copy of the SQLite database to `to` (a new
    /// file) while the service runs, checks it and says what it holds.
    pub async fn backup_to(&self, to: &Path) -> Result<BackupSummary, BackupError> {
        if self.backend() == Backend::Postgres {
            return Err(BackupError::Postgres);
        }
        if to.exists() {
            return Err(BackupError::Exists(to.to_path_buf()));
        }
        let target = to.to_str().ok_or_else(|| BackupError::NotABackup {
            path: to.to_path_buf(),
            problem: "the path is not UTF-8".into(),
        })?;
        sqlx::query("VACUUM INTO ?")
            .bind(target.to_string())
            .execute(self.pool())
            .await
            .map_err(|source| BackupError::Database {
                path: to.to_path_buf(),
                source,
            })?;
        // The copy is durable before it is reported.
        let f = std::fs::File::open(to).map_err(|source| BackupError::Io {
            path: to.to_path_buf(),
            source,
        })?;
        f.sync_all().map_err(|source| BackupError::Io {
            path: to.to_path_buf(),
            source,
        })?;
        inspect(to).await
    }
}

/// Opens `path` read-only, checks it is a sound pivgate database and says
/// what it holds.
pub async fn inspect(path: &Path) -> Result<BackupSummary, BackupError> {
    let db = |source| BackupError::Database {
        path: path.to_path_buf(),
        source,
    };
    let not = |problem: String| BackupError::NotABackup {
        path: path.to_path_buf(),
        problem,
    };
    if !path.is_file() {
        return Err(not("no such file".into()));
    }
    sqlx::any::install_default_drivers();
    let pool: AnyPool = AnyPoolOptions::new()
        .max_connections(1)
        .connect(&format!("sqlite://{}?mode=ro", path.display()))
        .await
        .map_err(db)?;
    let result = async {
        let check: String = sqlx::query("PRAGMA integrity_check")
            .fetch_one(&pool)
            .await
            .map_err(|e| not(e.to_string()))?
            .try_get(0)
            .map_err(db)?;
        if check != "ok" {
            return Err(not(format!("integrity check: {check}")));
        }
        let schema: i64 =
            sqlx::query("SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success")
                .fetch_one(&pool)
                .await
                .map_err(|e| not(format!("no schema history: {e}")))?
                .try_get(0)
                .map_err(db)?;
        let known = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
        if schema > known {
            return Err(BackupError::Newer {
                path: path.to_path_buf(),
                found: schema,
                known,
            });
        }
        let row = sqlx::query("SELECT COUNT(*), COALESCE(MAX(id), 0) FROM events")
            .fetch_one(&pool)
            .await
            .map_err(|e| not(format!("no event log: {e}")))?;
        Ok(BackupSummary {
            events: row.try_get(0).map_err(db)?,
            last_event: row.try_get(1).map_err(db)?,
            bytes: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
            schema,
        })
    }
    .await;
    pool.close().await;
    result
}

/// Puts the backup `from` in place of the SQLite database of `data_dir`,
/// once checked; the service must be stopped. The database it replaces
/// is kept beside it as `pivgate.db.before-restore` (replacing an older
/// one).
pub async fn restore(from: &Path, data_dir: &Path) -> Result<BackupSummary, BackupError> {
    let summary = inspect(from).await?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| BackupError::Io { path, source }
    };
    std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
    let live = data_dir.join(SQLITE_FILE);
    if live.exists() {
        // Leaving WAL mode needs the only connection: it fails while the
        // service (or anything else) has the database open. It also folds
        // the WAL into the file, so the file alone is the old database.
        let pool: AnyPool = AnyPoolOptions::new()
            .max_connections(1)
            .connect(&format!("sqlite://{}", live.display()))
            .await
            .map_err(|source| BackupError::Database {
                path: live.clone(),
                source,
            })?;
        let mode = sqlx::query("PRAGMA journal_mode = DELETE")
            .fetch_one(&pool)
            .await
            .and_then(|r| r.try_get::<String, _>(0));
        pool.close().await;
        match mode {
            Ok(m) if m.eq_ignore_ascii_case("delete") => {}
            _ => return Err(BackupError::InUse(live)),
        }
        let kept = data_dir.join(format!("{SQLITE_FILE}.before-restore"));
        std::fs::rename(&live, &kept).map_err(io(&live))?;
    }
    let partial = data_dir.join(format!("{SQLITE_FILE}.restoring"));
    std::fs::copy(from, &partial).map_err(io(&partial))?;
    std::fs::File::open(&partial)
        .and_then(|f| f.sync_all())
        .map_err(io(&partial))?;
    std::fs::rename(&partial, &live).map_err(io(&live))?;
    if let Ok(d) = std::fs::File::open(data_dir) {
        let _ = d.sync_all();
    }
    Ok(summary)
}
