//! `pivgate prune --older-than-days N --export-dir DIR`: exports the events
//! older than N days to gzip JSON Lines (one file per UTC day, with a
//! SHA-256 manifest), then deletes them. Runs beside the service.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use server::retention::export_and_prune;

#[derive(Args)]
pub struct PruneArgs {
    /// Keep this many days of events in the database.
    #[arg(long)]
    older_than_days: u32,
    /// Where the daily files and MANIFEST.sha256 go.
    #[arg(long)]
    export_dir: PathBuf,
    #[arg(long, env = "PIVGATE_CONFIG")]
    config: Option<PathBuf>,
}

pub fn run(a: PruneArgs) -> anyhow::Result<ExitCode> {
    let config = server::service::resolve_config(a.config.as_deref())?;
    let r = server::service::with_store(&config, async |store| {
        let now = access::jiff::Timestamp::now();
        anyhow::Ok(export_and_prune(store, &a.export_dir, a.older_than_days, now).await?)
    })?;
    print!("{}", r.text());
    Ok(ExitCode::SUCCESS)
}
