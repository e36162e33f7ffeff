//! `pivgate reader osdp`: this host's card reader offered to an OSDP panel
//! as a reader (peripheral device) in transparent mode.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::args::osdp::{load_key, parse_baud, Security};
use anyhow::{bail, Context, Result};
use clap::Args;
use host::{PcscSlot, Readers, Transport, Watch};
use links::reader::{CardWatch, ReaderNote, ReaderSecurity};

#[derive(Args)]
pub struct ReaderOsdpArgs {
    /// The serial device of the OSDP bus (an RS-485 adapter, e.g.
    /// /dev/ttyUSB0, or one side of a pseudo-terminal pair).
    #[arg(long, value_name = "DEV")]
    serial: PathBuf,
    /// This reader's address on the bus (0–126).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=126))]
    address: u8,
    /// Line speed.
    #[arg(long, default_value_t = 9600, value_parser = parse_baud)]
    baud: u32,
    #[command(flatten)]
    security: Security,
    /// The PC/SC reader whose card is offered (default: the first reader).
    #[arg(long, conflicts_with = "card_image")]
    reader: Option<String>,
    /// Offer a software PIV card image instead of a PC/SC reader's card (for
    /// trying a panel without pcscd). The card is present from the start.
    #[arg(long, value_name = "FILE")]
    card_image: Option<PathBuf>,
}

/// What the reader did, on standard error.
fn note(n: ReaderNote) {
    eprintln!("osdp: {n}");
}

pub fn run(a: ReaderOsdpArgs) -> Result<ExitCode> {
    let s = &a.security;
    if !s.insecure && s.key_file.is_none() && !s.install_mode {
        bail!(
            "the secure channel needs a key: pass --key-file FILE (32 hex digits, mode 0600), \
             or --install-mode to receive one from the panel; --insecure runs without it"
        );
    }
    // Install mode ends with the first installed key: once the key file
    // exists, SCBK-D is never accepted again, whatever the flags say.
    let (scbk, install_mode) = match &s.key_file {
        Some(p) if s.install_mode && std::fs::symlink_metadata(p).is_err() => (None, true),
        Some(p) => {
            if s.install_mode {
                eprintln!(
                    "osdp: warning: --install-mode ignored: the key file {} exists, so a key \
                     is installed already and only it is accepted",
                    p.display()
                );
            }
            (Some(load_key(p)?), false)
        }
        None => (None, s.install_mode),
    };
    let (slot, watch): (Box<dyn Transport + Send>, CardWatch) = match &a.card_image {
        Some(path) => {
            let image = card::image::CardImage::load(path)
                .with_context(|| format!("loading the card image {}", path.display()))?;
            (
                Box::new(host::InProcess::new(card::Card::new(image))),
                CardWatch::Always,
            )
        }
        None => {
            let readers = Readers::establish().context("connecting to the PC/SC service")?;
            let name = readers
                .pick(a.reader.as_deref())
                .context("choosing the PC/SC reader")?;
            let ctx = Watch::establish().context("connecting to the PC/SC service")?;
            (
                Box::new(PcscSlot::new(readers, name.clone())),
                CardWatch::Pcsc(ctx, name),
            )
        }
    };
    let security = ReaderSecurity {
        scbk,
        install_mode,
        require_secure: !s.insecure,
        key_file: s.key_file.clone(),
    };
    let (pd, link) = links::reader::start(&a.serial, a.address, a.baud, security, slot, note)
        .with_context(|| format!("opening the serial device {}", a.serial.display()))?;
    let source = match &watch {
        CardWatch::Pcsc(_, name) => format!("PC/SC reader {name:?}"),
        CardWatch::Always => "a software card".to_string(),
    };
    eprintln!(
        "osdp: reader at address {} on {} at {} baud{}, offering {source}; {}",
        a.address,
        a.serial.display(),
        a.baud,
        if link.pace { " (paced)" } else { "" },
        if s.insecure {
            "NO secure channel (--insecure)"
        } else if install_mode {
            "secure channel, install mode"
        } else {
            "secure channel required"
        }
    );

    let served = links::reader::serve(pd, watch, |line| eprintln!("osdp: {line}"))
        .context("the OSDP reader failed")?;
    let stats = served.stats;
    eprintln!(
        "osdp: stopped; {} bytes received, {} sent ({:.1} ms of line time)",
        stats.rx_bytes,
        stats.tx_bytes,
        stats.wire_time().as_secs_f64() * 1e3
    );
    Ok(if served.by_signal {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}
