//! Remote readers from the command line: `pivgate reader connect` (this
//! host's card reader offered to a door service over mutual TLS) and
//! `pivgate pki issue-device` (the certificates both ends present).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use clap::Args;
use host::{Readers, Transport, TransportError};
use links::osdp::cp::CpEvent;
use links::serial::CpHandle;
use links::transparent::{OsdpTransport, SharedBus};
use pki_issue::{DeviceOptions, DeviceRole, TestPki};
use remote::agent::{self, AgentConfig, AgentEvent, CardState, SharedCard};
use tokio::sync::{mpsc, watch};

use crate::osdp_cmd::Security;
use crate::pcsc_watch::{self, PcscSlot};

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
    #[arg(long, default_value_t = 9600, value_parser = crate::osdp_cmd::parse_baud)]
    baud: u32,
    #[command(flatten)]
    security: Security,
    /// This agent's name in the service's log (default: the host name).
    #[arg(long)]
    name: Option<String>,
}

/// A number for each card arrival, different across restarts of the agent
/// (the service reports a presence once, by its number).
fn first_card_number() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "pivgate reader".into())
}

pub fn connect(a: ReaderConnectArgs) -> Result<ExitCode> {
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

    let mut number = first_card_number();
    let (presence_tx, presence_rx) = watch::channel(CardState::default());
    let (card, source, watcher): (SharedCard, String, Watcher) = match (&a.card_image, &a.osdp) {
        (Some(path), _) => {
            let image = card::image::CardImage::load(path)
                .with_context(|| format!("loading the card image {}", path.display()))?;
            let t: Box<dyn Transport + Send> =
                Box::new(host::InProcess::new(card::Card::new(image)));
            presence_tx.send_replace(CardState {
                present: true,
                card: number,
            });
            (
                Arc::new(Mutex::new(t)),
                format!("software card {}", path.display()),
                Watcher::None,
            )
        }
        (None, Some(dev)) => {
            let address = a.address.context("--osdp needs --address")?;
            eprintln!(
                "remote: waiting for the OSDP reader at address {address} on {}",
                dev.display()
            );
            let reader = OsdpReader::open(dev, address, a.baud, &a.security)?;
            if reader.present {
                presence_tx.send_replace(CardState {
                    present: true,
                    card: number,
                });
            }
            (
                Arc::new(Mutex::new(reader.transport)),
                format!(
                    "OSDP reader at address {address} on {} at {} baud",
                    dev.display(),
                    a.baud
                ),
                Watcher::Osdp(reader.watch),
            )
        }
        (None, None) => {
            let readers = Readers::establish().context("connecting to the PC/SC service")?;
            let name = readers
                .pick(a.reader.as_deref())
                .context("choosing the PC/SC reader")?;
            let ctx = pcsc::Context::establish(pcsc::Scope::User)
                .context("connecting to the PC/SC service")?;
            let t: Box<dyn Transport + Send> = Box::new(PcscSlot::new(readers, name.clone()));
            (
                Arc::new(Mutex::new(t)),
                format!("PC/SC reader {name:?}"),
                Watcher::Pcsc(ctx, name),
            )
        }
    };

    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<String>();
    let cancel = match watcher {
        Watcher::Pcsc(ctx, name) => {
            let cancel = ctx.clone();
            let stop = stop_tx.clone();
            std::thread::spawn(move || {
                let r = pcsc_watch::watch(&ctx, &name, |present| {
                    if present {
                        number += 1;
                    }
                    eprintln!(
                        "remote: card {} reader {name:?}",
                        if present {
                            "presented to"
                        } else {
                            "removed from"
                        }
                    );
                    presence_tx.send_replace(CardState {
                        present,
                        card: number,
                    });
                });
                let why = match r {
                    Ok(()) => "stopped".to_string(),
                    Err(e) => format!("cannot watch reader {name:?} any more: {e}"),
                };
                let _ = stop.send(why);
            });
            Some(cancel)
        }
        Watcher::Osdp(w) => {
            let stop = stop_tx.clone();
            std::thread::spawn(move || {
                let _ = stop.send(w.run(number, presence_tx));
            });
            None
        }
        Watcher::None => None,
    };
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .context("cannot install signal handlers")?;
    {
        let stop = stop_tx.clone();
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                if let Some(c) = &cancel {
                    let _ = c.cancel();
                }
                let _ = stop.send("stopped".into());
            }
        });
    }

    let name = a.name.clone().unwrap_or_else(host_name);
    let cfg = AgentConfig::new(a.server.clone(), tls, name, source.clone());
    eprintln!("remote: offering {source} to {}", a.server);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    rt.spawn(agent::run(cfg, card, presence_rx, ev_tx));
    rt.spawn(async move {
        while let Some(e) = ev_rx.recv().await {
            print_event(&e);
        }
    });
    let why = stop_rx.recv().unwrap_or_else(|_| "stopped".into());
    rt.shutdown_background();
    if why == "stopped" {
        eprintln!("remote: stopped");
        Ok(ExitCode::SUCCESS)
    } else {
        bail!("{why}")
    }
}

/// What reports the card's arrivals and removals.
enum Watcher {
    /// Present from the start, never removed (a software card).
    None,
    Pcsc(pcsc::Context, String),
    Osdp(OsdpWatch),
}

/// An OSDP reader as the card source: the transport the service's APDUs
/// take, whether a card was in the reader when it came online, and the
/// panel whose events report the card's comings and goings.
struct OsdpReader {
    transport: Box<dyn Transport + Send>,
    present: bool,
    watch: OsdpWatch,
}

struct OsdpWatch {
    cp: CpHandle,
    address: u8,
    present: bool,
    dev: PathBuf,
    /// The panel's answers to the transport's requests.
    bus: std::sync::mpsc::Sender<CpEvent>,
}

impl OsdpReader {
    /// Brings the reader online as `pivgate auth --osdp` does and asks it
    /// whether it holds a card.
    fn open(dev: &std::path::Path, address: u8, baud: u32, security: &Security) -> Result<Self> {
        let (cp, _) = crate::osdp_cmd::open_panel(dev, address, baud, security, None)?;
        let mut scan = OsdpTransport::new(cp, address, 0);
        let present = match scan.reconnect(false) {
            Ok(()) => true,
            Err(TransportError::NoCard(_)) => false,
            Err(e) => return Err(e).context("asking the OSDP reader for its card"),
        };
        let cp = scan.into_inner();
        let (bus, events) = std::sync::mpsc::channel();
        let shared = SharedBus {
            commander: cp.commander(),
            events,
        };
        Ok(OsdpReader {
            transport: Box::new(OsdpTransport::new(shared, address, 0)),
            present,
            watch: OsdpWatch {
                cp,
                address,
                present,
                dev: dev.to_path_buf(),
                bus,
            },
        })
    }
}

impl OsdpWatch {
    /// Reads the panel's events until its serial line fails: card presence
    /// goes to `presence` (a new number for each arrival), the answers to
    /// the transport's requests go to the transport, and the reader going
    /// offline or failing the secure channel is logged. Returns why it
    /// stopped.
    fn run(mut self, mut number: u64, presence: watch::Sender<CardState>) -> String {
        let address = self.address;
        let set = |present: bool, number: u64| {
            presence.send_replace(CardState {
                present,
                card: number,
            });
        };
        while let Ok(e) = self.cp.events().recv() {
            match &e {
                CpEvent::CardPresence {
                    address: x,
                    reader: 0,
                    present,
                } if *x == address => {
                    if *present == self.present {
                        continue;
                    }
                    self.present = *present;
                    if *present {
                        number += 1;
                    }
                    eprintln!(
                        "remote: card {} OSDP reader {address}",
                        if *present {
                            "presented to"
                        } else {
                            "removed from"
                        }
                    );
                    set(*present, number);
                }
                CpEvent::Online {
                    address: x, secure, ..
                } if *x == address => eprintln!(
                    "remote: OSDP reader {address} online{}",
                    if *secure {
                        " (secure channel)"
                    } else {
                        " without the secure channel"
                    }
                ),
                // Its card cannot be reached until it is back and reports it again.
                CpEvent::Offline { address: x, reason } if *x == address => {
                    eprintln!("remote: OSDP reader {address} offline: {reason:?}");
                    if self.present {
                        self.present = false;
                        set(false, number);
                    }
                }
                CpEvent::Refused { address: x, reason } if *x == address => {
                    eprintln!(
                        "remote: OSDP reader {address} refused: it failed the secure channel ({reason:?})"
                    );
                    let _ = self.bus.send(e);
                }
                CpEvent::Completed { .. } | CpEvent::Abandoned { .. } => {
                    let _ = self.bus.send(e);
                }
                _ => {}
            }
        }
        match self.cp.shutdown() {
            Ok(_) => "the OSDP control panel stopped".into(),
            Err(e) => format!("the OSDP serial line {} failed: {e}", self.dev.display()),
        }
    }
}

fn print_event(e: &AgentEvent) {
    match e {
        AgentEvent::Connected { resumed } => eprintln!(
            "remote: connected ({})",
            if *resumed {
                "TLS session resumed"
            } else {
                "full TLS handshake"
            }
        ),
        AgentEvent::Disconnected { reason } => eprintln!("remote: disconnected: {reason}"),
        AgentEvent::Refused { reason } => eprintln!("remote: refused: {reason}"),
        AgentEvent::ServerRefused(c) => {
            eprintln!("remote: the service's certificate was refused: {c}")
        }
        AgentEvent::Ready { .. } => {}
        AgentEvent::CardReported { prepared, .. } => eprintln!(
            "remote: card reported{}",
            if *prepared {
                " with the prepared answers"
            } else {
                ""
            }
        ),
        AgentEvent::TapEnded { granted, text, .. } => eprintln!(
            "remote: tap {}: {text}",
            if *granted { "granted" } else { "refused" }
        ),
        AgentEvent::TapLost { .. } => {
            eprintln!("remote: the link dropped during the tap; it ended without a decision")
        }
        AgentEvent::Retrying { after } => eprintln!("remote: reconnecting in {after:.1?}"),
    }
}

#[derive(Args)]
pub struct IssueDeviceArgs {
    /// The test PKI directory (from `pivgate pki init`).
    #[arg(long, value_name = "DIR")]
    pki: PathBuf,
    /// The device's name: its certificate's subject common name (the name a
    /// service binds a reader to, or the service's host name).
    #[arg(long)]
    name: String,
    /// Where to write NAME.pem (certificate and issuing CA), NAME.key.pem
    /// and ca.pem (the root, for the other end's --ca).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// A certificate for the service (serverAuth) instead of a reader
    /// (clientAuth).
    #[arg(long)]
    server: bool,
    /// A DNS name for the service certificate (repeatable; default: NAME).
    #[arg(long, value_name = "NAME", requires = "server")]
    dns: Vec<String>,
    /// An IP address for the service certificate (repeatable).
    #[arg(long, value_name = "ADDR", requires = "server")]
    ip: Vec<std::net::IpAddr>,
}

/// A file stem from a device name: letters, digits, `-`, `_` and `.`.
fn stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

pub fn issue_device(a: IssueDeviceArgs) -> Result<ExitCode> {
    let pki = TestPki::load(&a.pki)
        .with_context(|| format!("loading the test PKI in {}", a.pki.display()))?;
    let dns = if a.server && a.dns.is_empty() && a.ip.is_empty() {
        vec![a.name.clone()]
    } else {
        a.dns.clone()
    };
    let cred = pki.issue_device(&DeviceOptions {
        name: a.name.clone(),
        role: if a.server {
            DeviceRole::Server
        } else {
            DeviceRole::Reader
        },
        dns,
        ips: a.ip.clone(),
        validity: None,
    })?;
    let stem = stem(&a.name);
    cred.save(&a.out, &stem, &[pki.intermediate_der()])?;
    std::fs::write(
        a.out.join("ca.pem"),
        pki_issue::pem_encode("CERTIFICATE", pki.root_der()),
    )
    .with_context(|| format!("writing {}", a.out.join("ca.pem").display()))?;
    println!(
        "issued {} certificate {:?}: {}, {}, CA {}",
        if a.server { "server" } else { "reader" },
        a.name,
        a.out.join(format!("{stem}.pem")).display(),
        a.out.join(format!("{stem}.key.pem")).display(),
        a.out.join("ca.pem").display()
    );
    Ok(ExitCode::SUCCESS)
}
