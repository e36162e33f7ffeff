//! `pivgate backup --to FILE`: an online backup of the SQLite database.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Args)]
pub struct BackupArgs {
    /// The backup file to write (must not exist).
    #[arg(long)]
    to: PathBuf,
    #[arg(long, env = "PIVGATE_CONFIG")]
    config: Option<PathBuf>,
}

pub fn run(a: BackupArgs) -> anyhow::Result<ExitCode> {
    let config = server::service::resolve_config(a.config.as_deref())?;
    let s = server::service::block_on(server::backup::backup(&config, &a.to))??;
    println!(
        "backed up {} events (last event {}, schema {}) to {} ({} bytes)",
        s.events,
        s.last_event,
        s.schema,
        a.to.display(),
        s.bytes
    );
    Ok(ExitCode::SUCCESS)
}
