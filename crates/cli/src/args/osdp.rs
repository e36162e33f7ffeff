//! The OSDP arguments of `pivgate reader osdp`, `reader connect --osdp`
//! and `auth --osdp`: line speed, the secure channel's key file and mode,
//! and the panel side's reader.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use links::osdp::cp::PdSetup;
use links::osdp::sc::Key;
use links::transparent::OsdpTransport;

/// How the secure channel is set up (panel and reader alike).
#[derive(Args, Clone)]
pub struct Security {
    /// The secure channel base key (SCBK): a file holding 32 hex digits,
    /// readable by its owner only (mode 0600).
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Install mode: connect with the standard's default key (SCBK-D), then
    /// install the key of --key-file with osdp_KEYSET. A reader in install
    /// mode accepts SCBK-D until a panel installs a key. It is one-shot: once
    /// --key-file exists, the flag is ignored with a warning and only that
    /// key is accepted.
    #[arg(long)]
    pub install_mode: bool,
    /// No secure channel: APDUs and card data cross the wire in clear, and
    /// anyone on the bus can impersonate either side.
    #[arg(long, conflicts_with_all = ["key_file", "install_mode"])]
    pub insecure: bool,
}

impl Security {
    /// Whether any of the flags was given.
    pub fn given(&self) -> bool {
        self.key_file.is_some() || self.install_mode || self.insecure
    }
}

/// An OSDP line speed ([`links::osdp::BAUD_RATES`]).
pub fn parse_baud(s: &str) -> Result<u32, String> {
    let b: u32 = s.parse().map_err(|_| format!("`{s}` is not a baud rate"))?;
    links::osdp::check_baud(b)
}

/// Reads a secure channel key file: 32 hex digits (surrounding white space
/// allowed), in a file nobody but its owner — the running user — can read.
pub fn load_key(path: &Path) -> Result<Key> {
    Ok(Key(*files::read_hex_key::<16>(path)?))
}

/// `pivgate auth --osdp`: this process is the OSDP control panel and runs
/// the mechanism through the reader in transparent mode.
#[derive(Args)]
pub struct PanelArgs {
    /// Authenticate through an OSDP reader on this serial device instead of
    /// a PC/SC reader: this process is the control panel, the reader (e.g.
    /// `pivgate reader osdp`) relays the card's APDUs in transparent mode,
    /// and the printed transaction shows the link's share of the tap.
    #[arg(long, value_name = "DEV", requires = "address")]
    pub osdp: Option<PathBuf>,
    /// The reader's address on the bus (with --osdp).
    #[arg(long, requires = "osdp", value_parser = clap::value_parser!(u8).range(0..=126))]
    pub address: Option<u8>,
    /// Line speed (with --osdp).
    #[arg(long, default_value_t = 9600, value_parser = parse_baud)]
    pub baud: u32,
    #[command(flatten)]
    pub security: Security,
}

impl Security {
    /// The panel's set-up of the reader at `address` these flags ask for.
    pub fn panel_setup(&self, address: u8) -> Result<PdSetup> {
        Ok(match (&self.key_file, self.install_mode, self.insecure) {
            (_, _, true) => PdSetup::plain(address),
            (Some(k), install, false) => PdSetup {
                address,
                scbk: Some(load_key(k)?),
                install_mode: install,
            },
            (None, true, false) => {
                bail!("--install-mode installs the key of --key-file: pass --key-file too")
            }
            (None, false, false) => bail!(
                "the secure channel needs a key: pass --key-file FILE (32 hex digits, mode 0600); \
                 --insecure runs without it"
            ),
        })
    }
}

/// Starts this process as the control panel of the reader at `address` on
/// serial device `dev` and waits (up to `wait`, or without end) for it to
/// come online as `security` sets it up. Returns the panel and when the
/// wait began.
pub fn open_panel(
    dev: &Path,
    address: u8,
    baud: u32,
    security: &Security,
    wait: Option<Duration>,
) -> Result<(links::serial::CpHandle, std::time::Instant)> {
    let setup = security.panel_setup(address)?;
    Ok(links::panel::open(dev, baud, setup, wait, || {
        eprintln!("osdp: installed the key of --key-file in the reader")
    })?)
}

/// Connects to the reader and waits for a card. Returns the transport and
/// the time from the start of the wait to the card being seen.
pub fn connect_panel(
    a: &PanelArgs,
    dev: &Path,
    wait: Option<Duration>,
) -> Result<(OsdpTransport, Duration)> {
    let address = a.address.context("--osdp needs --address")?;
    let (cp, start) = open_panel(dev, address, a.baud, &a.security, wait)?;
    let t = links::panel::wait_for_card(cp, address, start, wait)?;
    Ok((t, start.elapsed()))
}
