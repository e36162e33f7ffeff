//! Remote readers from the command line: `pivgate reader connect` (this
//! host's card reader offered to a door service over mutual TLS) and
//! `pivgate pki issue-device` (the certificates both ends present).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use clap::Args;
use host::{Readers, Transport};
use pki::issue::{DeviceOptions, DeviceRole, TestPki};
use remote::agent::{self, AgentConfig, AgentEvent, CardState, SharedCard};
use tokio::sync::{mpsc, watch};

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
    #[arg(long, conflicts_with = "card_image")]
    reader: Option<String>,
    /// Offer a software PIV card image instead of a PC/SC reader's card
    /// (for trying a service without pcscd). The card is present from the
    /// start.
    #[arg(long, value_name = "FILE")]
    card_image: Option<PathBuf>,
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
    let chain = remote::tls::load_certs(&a.cert)?;
    let key = remote::tls::load_key(&a.key)?;
    let cas = remote::tls::load_certs(&a.ca)?;
    let tls = remote::tls::client_config(chain, key, &cas)?;

    let mut number = first_card_number();
    let (presence_tx, presence_rx) = watch::channel(CardState::default());
    let (card, source, watcher): (SharedCard, String, Option<(pcsc::Context, String)>) =
        match &a.card_image {
            Some(path) => {
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
                    None,
                )
            }
            None => {
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
                    Some((ctx, name)),
                )
            }
        };

    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<String>();
    if let Some((ctx, name)) = &watcher {
        let (ctx, name, stop) = (ctx.clone(), name.clone(), stop_tx.clone());
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
    }
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .context("cannot install signal handlers")?;
    {
        let stop = stop_tx.clone();
        let cancel = watcher.as_ref().map(|(ctx, _)| ctx.clone());
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
        pki::issue::pem_encode("CERTIFICATE", pki.root_der()),
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
