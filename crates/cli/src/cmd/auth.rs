//! `pivgate auth`: authenticate the card in a PC/SC reader, or behind an
//! OSDP reader, and print the timed transaction.

use crate::args::osdp::{connect_panel, PanelArgs};
use crate::args::reader::wait_and_connect;
use crate::args::trust::{load_trust, TrustFiles};
use crate::args::wiegand::{write_frame, WiegandArgs};
use anyhow::{Context, Result};
use auth::{Authenticator, Mechanism, Settings, StdinPin};
use clap::Args;
use host::Transport;
use pki::time::Time;
use pki::trust::{RevocationCheck, RevocationConfig};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct AuthArgs {
    /// Reader to use (default: the first reader with a card).
    #[arg(long)]
    reader: Option<String>,
    /// Authentication mechanism (NIST SP 800-116).
    #[arg(long, value_enum)]
    mechanism: Mechanism,
    #[command(flatten)]
    trust: TrustFiles,
    /// Do not check revocation (for test set-ups without CRLs: without --crl,
    /// revocation cannot be checked and validation fails closed).
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
    #[command(flatten)]
    osdp: PanelArgs,
    #[command(flatten)]
    wiegand: WiegandArgs,
}

pub fn run(args: AuthArgs) -> Result<ExitCode> {
    let mode = if args.no_revocation {
        RevocationCheck::Off
    } else {
        RevocationCheck::Require
    };
    let trust = load_trust(&args.trust.config(RevocationConfig {
        mode,
        grace_secs: 0,
        ..RevocationConfig::default()
    }))?;
    let mut settings = Settings::default();
    if let Some(at) = &args.at {
        settings.at = Some(Time::from_rfc3339(at).with_context(|| format!("--at {at:?}"))?);
    }
    settings.revocation = trust.revocation.clone();
    let mechanism = args.mechanism;
    if matches!(mechanism, Mechanism::PkiAuth) && !args.pin_stdin {
        anyhow::bail!("PKI-AUTH needs the PIN: pass --pin-stdin and write it to standard input");
    }
    if args.json && args.wiegand.wiegand_out.as_deref() == Some("-") {
        anyhow::bail!(
            "--json and --wiegand-out - both write standard output: give --wiegand-out a file"
        );
    }
    let authn = Authenticator::new(trust.store, trust.crls, settings);
    let (mut t, detect): (Box<dyn Transport>, Duration) = match &args.osdp.osdp {
        Some(dev) => {
            if args.reader.is_some() {
                anyhow::bail!("--reader names a PC/SC reader; with --osdp the reader is --address");
            }
            let (t, d) = connect_panel(&args.osdp, dev, args.wait.map(Duration::from_secs))?;
            (Box::new(t), d)
        }
        None => {
            let (t, d) = wait_and_connect(args.reader.as_deref(), args.wait)?;
            (Box::new(t), d)
        }
    };
    let mut pin = StdinPin;
    let pin_src: Option<&mut dyn auth::PinSource> =
        if args.pin_stdin { Some(&mut pin) } else { None };
    let tx = authn.authenticate(t.as_mut(), mechanism, pin_src, Some(detect));
    // Printed with the transaction, whatever happens to the frame.
    let (frame, frame_error) = match &args.wiegand.wiegand_out {
        Some(_) if tx.outcome.granted() => match args.wiegand.frame(&tx.card) {
            Ok(f) => (Some(f), None),
            Err(e) => (None, Some(e)),
        },
        _ => (None, None),
    };
    if args.json {
        let mut j = serde_json::to_value(&tx)?;
        if let Some(f) = &frame {
            j["wiegand"] = serde_json::json!({
                "format": f.name,
                "bits": f.bits.len(),
                "hex": hex::encode(f.bits.to_bytes()),
                "wire_us": f.wire_time().as_micros() as u64,
            });
        }
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        print!("{}", auth::report::transaction(&tx));
        if args.osdp.osdp.is_some() {
            println!(
                "  reader link: OSDP at {} baud, {}",
                args.osdp.baud,
                t.reader()
            );
        }
        if let Some(f) = &frame {
            println!(
                "{}",
                auth::report::wiegand_stage(f.name, f.bits.len(), f.wire_time())
            );
        }
    }
    if let Some(e) = frame_error {
        return Err(e.context("building the Wiegand frame"));
    }
    if let (Some(to), Some(f)) = (&args.wiegand.wiegand_out, &frame) {
        write_frame(f, to)?;
    }
    Ok(if tx.outcome.granted() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
