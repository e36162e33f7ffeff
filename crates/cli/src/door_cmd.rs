//! `pivgate read` and `pivgate auth`: one card in a PC/SC reader.

use crate::render;
use anyhow::{Context, Result};
use auth::{Authenticator, Mechanism, Settings, StdinPin};
use clap::{Args, ValueEnum};
use host::{Readers, Transport, TransportExt};
use pki::crl::CrlSet;
use pki::store::TrustStore;
use pki::time::Time;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct ReadArgs {
    /// Reader to use (default: the first reader with a card).
    #[arg(long)]
    reader: Option<String>,
    /// Seconds to wait for a card (default: wait forever).
    #[arg(long)]
    wait: Option<u64>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum MechanismArg {
    /// Card authentication key (9E), no PIN; works contactless.
    PkiCak,
    /// PIV authentication key (9A) after the PIN.
    PkiAuth,
    /// Signed CHUID only (legacy, low assurance).
    Chuid,
}

#[derive(Args)]
pub struct AuthArgs {
    /// Reader to use (default: the first reader with a card).
    #[arg(long)]
    reader: Option<String>,
    /// Authentication mechanism (NIST SP 800-116).
    #[arg(long, value_enum)]
    mechanism: MechanismArg,
    /// Trust anchors: a PEM bundle, DER file, .p7b/.p7c, or a directory of them.
    #[arg(long, required = true)]
    anchors: Vec<PathBuf>,
    /// Intermediate CA certificates (same formats as --anchors).
    #[arg(long)]
    intermediates: Vec<PathBuf>,
    /// CRL files (DER or PEM). Without CRLs revocation cannot be checked and
    /// validation fails closed unless --no-revocation is given.
    #[arg(long)]
    crl: Vec<PathBuf>,
    /// Do not check revocation (for test set-ups without CRLs).
    #[arg(long)]
    no_revocation: bool,
    /// Read the PIN from the first line of standard input (PKI-AUTH).
    #[arg(long)]
    pin_stdin: bool,
    /// Validate at this time (RFC 3339) instead of now.
    #[arg(long)]
    at: Option<String>,
    /// Seconds to wait for a card (default: wait forever).
    #[arg(long)]
    wait: Option<u64>,
    /// Print the transaction as JSON.
    #[arg(long)]
    json: bool,
}

fn wait_and_connect(
    reader: Option<&str>,
    wait: Option<u64>,
) -> Result<(host::PcscTransport, Duration)> {
    let readers = Readers::establish().context("connecting to the PC/SC service")?;
    let start = Instant::now();
    let name = readers
        .wait_for_card(reader, wait.map(Duration::from_secs))
        .context("waiting for a card")?;
    let t = readers
        .connect(&name)
        .with_context(|| format!("connecting to the card in {name:?}"))?;
    Ok((t, start.elapsed()))
}

pub fn read(args: ReadArgs) -> Result<ExitCode> {
    let (mut t, _) = wait_and_connect(args.reader.as_deref(), args.wait)?;
    let reader = t.reader().to_string();
    let report = t
        .with_transaction(|ch| Ok(auth::inspect::read_card(ch)))
        .context("reading the card")?
        .context("reading the card")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render::card_report(&reader, &report));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn authenticate(args: AuthArgs) -> Result<ExitCode> {
    let mut b = TrustStore::builder();
    for a in &args.anchors {
        b.add_anchors_from_path(a)
            .with_context(|| format!("loading trust anchors from {}", a.display()))?;
    }
    for i in &args.intermediates {
        b.add_intermediates_from_path(i)
            .with_context(|| format!("loading intermediates from {}", i.display()))?;
    }
    let store = b.build();
    let mut cb = CrlSet::builder();
    for c in &args.crl {
        cb.add_path(c)
            .with_context(|| format!("loading the CRL {}", c.display()))?;
    }
    let crls = cb.build();
    let mut settings = Settings::default();
    if let Some(at) = &args.at {
        settings.at = Some(Time::from_rfc3339(at).with_context(|| format!("--at {at:?}"))?);
    }
    if args.no_revocation {
        settings.revocation.mode = pki::validate::RevocationMode::Off;
    }
    let mechanism = match args.mechanism {
        MechanismArg::PkiCak => Mechanism::PkiCak,
        MechanismArg::PkiAuth => Mechanism::PkiAuth,
        MechanismArg::Chuid => Mechanism::Chuid,
    };
    if matches!(mechanism, Mechanism::PkiAuth) && !args.pin_stdin {
        anyhow::bail!("PKI-AUTH needs the PIN: pass --pin-stdin and write it to standard input");
    }
    let authn = Authenticator::new(store, crls, settings);
    let (mut t, detect) = wait_and_connect(args.reader.as_deref(), args.wait)?;
    let mut pin = StdinPin;
    let pin_src: Option<&mut dyn auth::PinSource> =
        if args.pin_stdin { Some(&mut pin) } else { None };
    let tx = authn.authenticate(&mut t, mechanism, pin_src, Some(detect));
    if args.json {
        println!("{}", serde_json::to_string_pretty(&tx)?);
    } else {
        print!("{}", render::transaction(&tx));
    }
    Ok(if tx.outcome.granted() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
