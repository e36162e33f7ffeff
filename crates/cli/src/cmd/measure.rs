//! `pivgate measure`: time the card in a PC/SC reader
//! ([`auth::card_timing`]) and print it beside the reference door's cards
//! and the software card's seed profiles.

use anyhow::{Context, Result};
use auth::card_timing::{measure_card, report_text, MeasureError, MeasureOptions, Progress};
use auth::PinSource;
use card::replay::seed_reports;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Args)]
pub struct MeasureArgs {
    /// PC/SC reader name (default: the first reader with a card).
    #[arg(long)]
    reader: Option<String>,
    /// Seconds to wait for a card (default: wait without end).
    #[arg(long)]
    wait: Option<u64>,
    /// Samples of each operation.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    runs: u32,
    /// Read the PIN from standard input, to measure VERIFY and the keys
    /// behind it. A wrong PIN stops the run at once (never retried).
    #[arg(long)]
    pin_stdin: bool,
    /// Write the report (schema `pivgate-card-timing`, version 1) to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Put the FASC-N and the certificate subjects in the report (left out
    /// by default: they identify a person).
    #[arg(long)]
    include_identifiers: bool,
}

struct Bar(ProgressBar);

impl Progress for Bar {
    fn operation(&mut self, label: &str, runs: u32) {
        self.0.set_length(u64::from(runs));
        self.0.set_position(0);
        self.0.set_message(label.to_string());
    }
    fn sample(&mut self) {
        self.0.inc(1);
    }
}

pub fn run(args: MeasureArgs) -> Result<ExitCode> {
    let pin = if args.pin_stdin {
        let pin = auth::StdinPin.pin().map_err(|e| anyhow::anyhow!(e))?;
        Some(zeroize::Zeroizing::new(pin.as_bytes().to_vec()))
    } else {
        None
    };
    let (mut t, _) = crate::args::reader::wait_and_connect(args.reader.as_deref(), args.wait)?;
    // Ctrl-C stops between operations; the card is then reset and left as
    // it was found.
    let cancel = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, cancel.clone())
        .context("cannot install the Ctrl-C handler")?;
    let bar = ProgressBar::new(args.runs.into());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg:50} {pos}/{len} [{elapsed}]")
            .expect("valid template"),
    );
    let opts = MeasureOptions {
        runs: args.runs,
        pin,
        include_identifiers: args.include_identifiers,
        ..MeasureOptions::default()
    };
    let result = measure_card(&mut t, &opts, &mut Bar(bar.clone()), &cancel);
    bar.finish_and_clear();
    let report = match result {
        Ok(r) => r,
        Err(e @ (MeasureError::WrongPin { .. } | MeasureError::PinBlocked)) => {
            eprintln!("error [{}]: {e}", e.code());
            return Ok(ExitCode::from(1));
        }
        Err(e @ MeasureError::Interrupted) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(130));
        }
        Err(e) => return Err(e.into()),
    };
    print!("{}", report_text(&report, &seed_reports()));
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)? + "\n";
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
        println!("report written to {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
