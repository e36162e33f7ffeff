//! `pivgate backup` and `pivgate restore` over the configuration: the
//! SQLite database of the data directory, backed up online while the
//! service runs ([`store::backup`]); PostgreSQL refused with the `pg_dump`
//! recipe before anything is opened.

use std::path::Path;

use store::backup::{BackupError, BackupSummary};
use store::Store;

use crate::config::Config;

/// Writes a consistent copy of the service's database to `to` (a new
/// file); taps go on meanwhile.
pub async fn backup(config: &Config, to: &Path) -> Result<BackupSummary, BackupError> {
    if config.database_url.is_some() {
        return Err(BackupError::Postgres);
    }
    if to.exists() {
        return Err(BackupError::Exists(to.to_path_buf()));
    }
    let store =
        Store::open_data_dir(&config.data_dir)
            .await
            .map_err(|e| BackupError::NotABackup {
                path: config.data_dir.clone(),
                problem: e.to_string(),
            })?;
    let result = store.backup_to(to).await;
    store.close().await;
    result
}

/// Puts the backup `from` in place of the service's database; the service
/// must be stopped.
pub async fn restore(config: &Config, from: &Path) -> Result<BackupSummary, BackupError> {
    if config.database_url.is_some() {
        return Err(BackupError::Postgres);
    }
    store::backup::restore(from, &config.data_dir).await
}
