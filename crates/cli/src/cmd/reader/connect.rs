//! `pivgate reader connect`: this host's card reader offered to a door
//! service over mutual TLS.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use clap::Args;
use host::{PcscSlot, Readers, Transport, Watch};
use links::panel::{ReaderNews, ReaderWatch, SharedReader};
use remote::agent::{self, AgentConfig, AgentEvent, CardState, SharedCard};
use tokio::sync::{mpsc, watch};

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
            let (cp, _) = open_panel(dev, address, a.baud, &a.security, None)?;
            let reader = SharedReader::new(cp, address)?;
            if reader.present {
                presence_tx.send_replace(CardState {
                    present: true,
                    card: number,
                });
            }
            (
                Arc::new(Mutex::new(
                    Box::new(reader.transport) as Box<dyn Transport + Send>
                )),
                format!(
                    "OSDP reader at address {address} on {} at {} baud",
                    dev.display(),
                    a.baud
                ),
                Watcher::Osdp(reader.watch, address, dev.clone()),
            )
        }
        (None, None) => {
            let readers = Readers::establish().context("connecting to the PC/SC service")?;
            let name = readers
                .pick(a.reader.as_deref())
                .context("choosing the PC/SC reader")?;
            let ctx = Watch::establish().context("connecting to the PC/SC service")?;
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
            let cancel = ctx.canceller();
            let stop = stop_tx.clone();
            std::thread::spawn(move || {
                let r = ctx.presence(&name, |present| {
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
        Watcher::Osdp(w, address, dev) => {
            let stop = stop_tx.clone();
            std::thread::spawn(move || {
                let _ = stop.send(watch_osdp(w, address, &dev, number, presence_tx));
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
                    c.cancel();
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
    Pcsc(Watch, String),
    Osdp(ReaderWatch, u8, PathBuf),
}

/// Follows an OSDP reader's card: each arrival gets a new number. Returns
/// why the watch stopped.
fn watch_osdp(
    w: ReaderWatch,
    address: u8,
    dev: &std::path::Path,
    mut number: u64,
    presence: watch::Sender<CardState>,
) -> String {
    let r = w.run(|news| match news {
        ReaderNews::Card(present) => {
            if present {
                number += 1;
            }
            eprintln!(
                "remote: card {} OSDP reader {address}",
                if present {
                    "presented to"
                } else {
                    "removed from"
                }
            );
            presence.send_replace(CardState {
                present,
                card: number,
            });
        }
        ReaderNews::Online { secure } => eprintln!(
            "remote: OSDP reader {address} online{}",
            if secure {
                " (secure channel)"
            } else {
                " without the secure channel"
            }
        ),
        ReaderNews::Offline(reason) => {
            eprintln!("remote: OSDP reader {address} offline: {reason}")
        }
        ReaderNews::Refused(reason) => eprintln!(
            "remote: OSDP reader {address} refused: it failed the secure channel ({reason})"
        ),
    });
    match r {
        Ok(_) => "the OSDP control panel stopped".into(),
        Err(e) => format!("the OSDP serial line {} failed: {e}", dev.display()),
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
