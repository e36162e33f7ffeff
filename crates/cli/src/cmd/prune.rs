//! `pivgate prune --older-than-days N --export-dir DIR`: exports the events
//! older than N days to gzip JSON Lines (one file per UTC day, with a
//! SHA-256 manifest), then deletes them. Runs beside the service.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let r = rt.block_on(async {
        let store = server::service::open_store(&config).await?;
        let r = server::retention::export_and_prune(
            &store,
            &a.export_dir,
            a.older_than_days,
            access::jiff::Timestamp::now(),
        )
        .await;
        store.close().await;
        anyhow::Ok(r?)
    })?;
    for d in &r.days {
        println!(
            "{}\t{} events\t{} bytes\tsha256 {}",
            d.file.display(),
            d.events,
            d.bytes,
            d.sha256
        );
    }
    println!(
        "exported {} and deleted {} events before {}",
        r.exported, r.deleted, r.cutoff
    );
    Ok(ExitCode::SUCCESS)
}
