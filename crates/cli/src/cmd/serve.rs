//! `pivgate init`, `pivgate serve` and `pivgate enroll`: argument parsing
//! and printing over the `server` crate.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

#[derive(Args)]
pub struct InitArgs {
    /// Directory to write `pivgate.toml` and the test PKI (`pki/`) into.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// IANA time zone of the seeded site.
    #[arg(long, default_value = "UTC")]
    time_zone: String,
}

#[derive(Args)]
pub struct ServeArgs {
    /// Configuration file; default: `pivgate.toml` in the working directory
    /// when present, else the embedded defaults.
    #[arg(long, env = "PIVGATE_CONFIG")]
    config: Option<PathBuf>,
}

pub fn init(a: InitArgs) -> anyhow::Result<ExitCode> {
    let done = server::init::init(&a.dir, &a.time_zone)?;
    print!("{}", done.next_steps());
    Ok(ExitCode::SUCCESS)
}

pub fn serve(a: ServeArgs) -> anyhow::Result<ExitCode> {
    server::service::run(a.config, |s| {
        let t = s.loaded().times;
        println!(
            "pivgate serving {} (ready in {:.1} ms: {} trust anchors, {} credentials); dashboard at {}/",
            s.url(),
            t.ready_us as f64 / 1000.0,
            t.anchors,
            t.credentials,
            s.url()
        );
    })?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Args)]
pub struct EnrollArgs {
    /// PC/SC reader holding the card (e.g. "Virtual PCD 00 00").
    #[arg(long)]
    reader: String,
    /// Cardholder name; created when no cardholder has it.
    #[arg(long)]
    cardholder: String,
    /// Access group to add the cardholder to.
    #[arg(long)]
    group: Option<String>,
    /// Seconds to wait for a card in the reader.
    #[arg(long, default_value_t = 30)]
    wait: u64,
    #[arg(long, env = "PIVGATE_CONFIG")]
    config: Option<PathBuf>,
}

/// Exit 0 enrolled, 1 refused (the card did not validate, or is enrolled
/// already), 2 usage or I/O error.
pub fn enroll(a: EnrollArgs) -> anyhow::Result<ExitCode> {
    use server::enroll::{register, validate_card, EnrollError};
    let config = server::service::resolve_config(a.config.as_deref())?;
    // The CRLs the service downloaded and kept count as well as the files.
    let trust = server::trust::load(&config)?;
    let authn = server::enroll::enrollment_authenticator(trust);
    let readers = host::Readers::establish().context("connecting to the PC/SC service")?;
    readers
        .wait_for_card(
            Some(&a.reader),
            Some(std::time::Duration::from_secs(a.wait)),
        )
        .with_context(|| format!("waiting for a card in `{}`", a.reader))?;
    let mut transport = readers.connect(&a.reader)?;
    let validated = match validate_card(&authn, &mut transport) {
        Ok(t) => t,
        Err(e @ EnrollError::Refused { .. }) => {
            eprintln!("not enrolled: {e}");
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e.into()),
    };
    let result = server::service::with_store(&config, async |store| {
        let now = access::jiff::Timestamp::now();
        let (holder, group) = (&a.cardholder, a.group.as_deref());
        anyhow::Ok(register(store, &validated, holder, group, "pivgate enroll", now).await)
    })?;
    match result {
        Ok(e) => {
            print!("{}", e.text());
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ (EnrollError::AlreadyEnrolled { .. } | EnrollError::NoIdentifier)) => {
            eprintln!("not enrolled: {e}");
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e.into()),
    }
}
