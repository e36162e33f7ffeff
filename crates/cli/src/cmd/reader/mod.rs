//! `pivgate reader ...`: this host's card reader offered to something
//! else — an OSDP panel (`osdp`) or a door service over the network
//! (`connect`).

mod connect;
mod osdp;

use anyhow::Result;
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum ReaderCommand {
    /// Offer this host's card reader to an OSDP control panel as an OSDP
    /// reader (peripheral device) in transparent mode: the panel sends the
    /// card's APDUs in osdp_XWR and gets the answers in osdp_XRD, so it runs
    /// PKI-CAK itself and need not trust this reader. A card's arrival and
    /// removal are reported on the next poll (osdp_PR01PRES); the card is
    /// watched with SCardGetStatusChange, not polled.
    ///
    /// Secure by default: the secure channel is required, with the key in
    /// --key-file (32 hex digits, mode 0600), or --install-mode to accept the
    /// standard's default key until the panel installs one with osdp_KEYSET
    /// (written to --key-file when given). --insecure runs without the secure
    /// channel: the APDUs then cross the wire in clear.
    ///
    /// Link events (secure channel up, key installed, bad frames, MAC
    /// failures, LED, buzzer and output requests) are logged on standard
    /// error. Runs until SIGINT or SIGTERM.
    Osdp(osdp::ReaderOsdpArgs),
    /// Connect this host's card reader to a door service over the network.
    ///
    /// The card comes from a PC/SC reader (default), a software card image
    /// (--card-image), or an OSDP reader on a serial line (--osdp): this
    /// process is then the reader's control panel, relays the service's
    /// APDUs to the card in transparent mode and reports each card arrival
    /// and removal the reader signals. The secure channel is set up as for
    /// `pivgate auth --osdp`: --key-file (32 hex digits, mode 0600),
    /// --install-mode to install that key in a reader still on the default
    /// key, or --insecure.
    ///
    /// Runs until SIGINT or SIGTERM, or until the card source fails.
    Connect(connect::ReaderConnectArgs),
}

pub fn run(cmd: ReaderCommand) -> Result<ExitCode> {
    match cmd {
        ReaderCommand::Osdp(a) => osdp::run(a),
        ReaderCommand::Connect(a) => connect::run(a),
    }
}
