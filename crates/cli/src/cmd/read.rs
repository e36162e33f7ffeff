//! `pivgate read`: what the card in a PC/SC reader holds.

use crate::args::reader::wait_and_connect;
use crate::render;
use anyhow::{Context, Result};
use auth::containers::{entries, READ_CONTAINERS};
use auth::StdinPin;
use clap::Args;
use host::{Transport, TransportExt};
use std::process::ExitCode;

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
    /// Read the PIN from the first line of standard input, to read the
    /// containers behind it too (biometrics, Printed Information).
    #[arg(long)]
    pin_stdin: bool,
    /// Write the containers read into this directory (chuid.bin, ccc.bin,
    /// security-object.bin, ...), for `pivgate pki verify-*`.
    #[arg(long, value_name = "DIR")]
    save: Option<std::path::PathBuf>,
}

pub fn run(args: ReadArgs) -> Result<ExitCode> {
    let (mut t, _) = wait_and_connect(args.reader.as_deref(), args.wait)?;
    let reader = t.reader().to_string();
    let pin = if args.pin_stdin {
        use auth::PinSource;
        Some(StdinPin.pin().map_err(|e| anyhow::anyhow!(e))?)
    } else {
        None
    };
    let (report, containers) = t
        .with_transaction(|ch| {
            let report = auth::inspect::read_card(ch);
            let verified = match &pin {
                Some(p) => {
                    let mut piv = host::client::Piv::new(ch);
                    piv.select()
                        .and_then(|_| piv.verify_pin(p.as_bytes()))
                        .map(|_| true)
                }
                None => Ok(false),
            };
            let containers = verified.and_then(|v| {
                host::client::Piv::new(ch)
                    .read_objects(&READ_CONTAINERS, v)
                    .map(entries)
            });
            Ok((report, containers))
        })
        .context("reading the card")?;
    let report = report.context("reading the card")?;
    let containers = containers.context("reading the card's containers")?;
    if let Some(dir) = &args.save {
        render::containers::save_containers(dir, &containers)?;
    }
    if args.json {
        let mut j = serde_json::to_value(&report)?;
        j["containers"] = serde_json::to_value(&containers)?;
        println!("{}", serde_json::to_string_pretty(&j)?);
    } else {
        print!("{}", auth::report::card_report(&reader, &report));
        print!("{}", auth::containers::render_containers(&containers));
    }
    Ok(ExitCode::SUCCESS)
}
