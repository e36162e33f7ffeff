//! `pivgate restore --from FILE`: puts a backup in place of the SQLite
//! database (the service stopped).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Args)]
pub struct RestoreArgs {
    /// The backup file written by `pivgate backup`.
    #[arg(long)]
    from: PathBuf,
    #[arg(long, env = "PIVGATE_CONFIG")]
    config: Option<PathBuf>,
}

pub fn run(a: RestoreArgs) -> anyhow::Result<ExitCode> {
    let config = server::service::resolve_config(a.config.as_deref())?;
    let s = server::service::block_on(server::backup::restore(&config, &a.from))??;
    println!(
        "restored {} events (last event {}) from {} into {}",
        s.events,
        s.last_event,
        a.from.display(),
        config.data_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
