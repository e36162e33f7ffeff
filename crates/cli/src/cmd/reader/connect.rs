//! `pivgate reader connect`: this host's card reader offered to a door
//! service over mutual TLS.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use clap::Args;
use host::{PcscSlot, Readers, Transport, Watch};
use links::panel::SharedReader;
use remote::agent::AgentConfig;
use remote::offer::{Offer, Presence};

use crate::args::osdp::{open_panel, parse_baud, Security};

#[derive(Args)]
pub struct ReaderConnectArgs {
    /// The door service's remote-reader endpoint, HOST:PORT. HOST must be
    /// a name or address in the service certificate.
    #[arg(long, value_name = "HOST:PORT")]
    server: String,
    /// This reader's certificate (PEM; the issuing CA certificates may
    /// follow it), e.g. from `pivgate pki issue-device`.
    #[arg(long, value_name = "FILE")]
    cert: PathBuf,
    /// This reader's private key (PEM, PKCS#8).
    #[arg(long, value_name = "FILE")]
    key: PathBuf,
    /// The CA certificate(s) the service's certificate must chain to (PEM).
    #[arg(long, value_name = "FILE")]
    ca: PathBuf,
    /// The PC/SC reader whose card is offered (default: the first reader).
    #[arg(long, conflicts_with_all = ["card_image", "osdp"])]
    reader: Option<String>,
    /// Offer a software PIV card image instead of a PC/SC reader's card
    /// (for trying a service without pcscd). The card is present from the
    /// start.
    #[arg(long, value_name = "FILE", conflicts_with = "osdp")]
    card_image: Option<PathBuf>,
    /// Offer the card of an OSDP reader on this serial device (an RS-485
    /// adapter, e.g. /dev/ttyUSB0): this process is the reader's control
    /// panel and relays the service's APDUs in transparent mode
    /// (osdp_XWR/osdp_XRD); the reader's card-present reports are the card's
    /// arrivals and removals. Needs --address and one of --key-file,
    /// --install-mode or --insecure.
    #[arg(long, value_name = "DEV", requires = "address")]
    osdp: Option<PathBuf>,
    /// The OSDP reader's address on the bus (0–126; with --osdp).
    #[arg(long, requires = "osdp", value_parser = clap::value_parser!(u8).range(0..=126))]
    address: Option<u8>,
    /// OSDP line speed (with --osdp).
    #[arg(long, default_value_t = 9600, value_parser = parse_baud)]
    baud: u32,
    #[command(flatten)]
    security: Security,
    /// This agent's name in the service's log (default: the host name).
    #[arg(long)]
    name: Option<String>,
}

pub fn run(a: ReaderConnectArgs) -> Result<ExitCode> {
    if !a.server.contains(':') {
        bail!("--server needs HOST:PORT, got {:?}", a.server);
    }
    if a.osdp.is_none() && a.security.given() {
        bail!("--key-file, --install-mode and --insecure set up an OSDP reader's secure channel: pass --osdp DEV --address N");
    }

    let chain = remote::tls::load_certs(&a.cert)?;
    let key = remote::tls::load_key(&a.key)?;
    let cas = remote::tls::load_certs(&a.ca)?;
    let tls = remote::tls::client_config(chain, key, &cas)?;

    let offer = match (&a.card_image, &a.osdp) {
        (Some(path), _) => {
            let image = card::image::CardImage::load(path)
                .with_context(|| format!("loading the card image {}", path.display()))?;
            let t: Box<dyn Transport + Send> =
                Box::new(host::InProcess::new(card::Card::new(image)));
            Offer {
                card: Arc::new(Mutex::new(t)),
                source: format!("software card {}", path.display()),
                presence: Presence::Always,
                present: true,
            }
        }
        (None, Some(dev)) => {
            let address = a.address.context("--osdp needs --address")?;
            eprintln!(
                "remote: waiting for the OSDP reader at address {address} on {}",
                dev.display()
            );
            let (cp, _) = open_panel(dev, address, a.baud, &a.security, None)?;
            let reader = SharedReader::new(cp, address)?;
            let t: Box<dyn Transport + Send> = Box::new(reader.transport);
            Offer {
                card: Arc::new(Mutex::new(t)),
                source: format!(
                    "OSDP reader at address {address} on {} at {} baud",
                    dev.display(),
                    a.baud
                ),
                presence: Presence::Osdp(reader.watch, address, dev.clone()),
                present: reader.present,
            }
        }
        (None, None) => {
            let readers = Readers::establish().context("connecting to the PC/SC service")?;
            let name = readers
                .pick(a.reader.as_deref())
                .context("choosing the PC/SC reader")?;
            let ctx = Watch::establish().context("connecting to the PC/SC service")?;
            let t: Box<dyn Transport + Send> = Box::new(PcscSlot::new(readers, name.clone()));
            Offer {
                card: Arc::new(Mutex::new(t)),
                source: format!("PC/SC reader {name:?}"),
                presence: Presence::Pcsc(ctx, name),
                present: false,
            }
        }
    };
    let name = a.name.clone().unwrap_or_else(AgentConfig::host_name);
    let cfg = AgentConfig::new(a.server.clone(), tls, name, offer.source.clone());
    eprintln!("remote: offering {} to {}", offer.source, a.server);
    remote::offer::run(offer, cfg, |line| eprintln!("remote: {line}"))?;
    eprintln!("remote: stopped");
    Ok(ExitCode::SUCCESS)
}
