//! `pivgate lockdown on|off|status --site NAME`: a site's lockdown through
//! the running service's API ([`server::api_client`]), with a token.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use server::api_client::{token_from, ApiClient, SiteLockdown};

#[derive(Subcommand)]
pub enum LockdownCommand {
    /// Lock the site down (admin token): every door of it locked, no tap
    /// granted there, scheduled unlocks suspended; only an operator's
    /// override unlock opens a door. An admin event names the token.
    On {
        #[command(flatten)]
        api: ApiArgs,
        /// Why, for the event log.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Lift the site's lockdown (admin token): its doors go back to their
    /// own modes and schedules.
    Off {
        #[command(flatten)]
        api: ApiArgs,
        /// Why, for the event log.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Whether the site is locked down, and the mode each of its doors is
    /// driven in (any token).
    Status {
        #[command(flatten)]
        api: ApiArgs,
    },
}

/// How to reach the service.
#[derive(Args)]
pub struct ApiArgs {
    /// The site, by name.
    #[arg(long)]
    site: String,
    /// The service's URL.
    #[arg(long, env = "PIVGATE_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// A file whose first line is the API token; without it the token is
    /// read from PIVGATE_TOKEN.
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// PEM roots the certificate of an https:// service must chain to
    /// (default: the system's).
    #[arg(long, value_name = "PATH")]
    ca_file: Option<PathBuf>,
}

impl ApiArgs {
    fn client(&self) -> anyhow::Result<ApiClient> {
        let token = token_from(
            self.token_file.as_deref(),
            std::env::var("PIVGATE_TOKEN").ok(),
        )?;
        Ok(ApiClient::new(&self.url, token, self.ca_file.clone())?)
    }
}

pub fn run(c: LockdownCommand) -> anyhow::Result<ExitCode> {
    let s = match &c {
        LockdownCommand::On { api, reason } | LockdownCommand::Off { api, reason } => {
            let on = matches!(c, LockdownCommand::On { .. });
            api.client()?
                .set_lockdown(&api.site, on, reason.as_deref())?
        }
        LockdownCommand::Status { api } => api.client()?.lockdown_status(&api.site)?,
    };
    print(&s);
    Ok(ExitCode::SUCCESS)
}

fn print(s: &SiteLockdown) {
    let event = s
        .event
        .map_or_else(String::new, |e| format!(" (event {e})"));
    if s.lockdown {
        println!(
            "Site `{}` is locked down{event}: no tap is granted at its doors and scheduled unlocks do not apply; only an override unlock opens a door.",
            s.name
        );
    } else {
        println!(
            "Site `{}` is not locked down{event}: its doors follow their own modes and schedules.",
            s.name
        );
    }
    let width = s.doors.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    for (name, mode) in &s.doors {
        println!("  {name:<width$}  {mode}");
    }
}
