//! `pivgate reader connect`'s run: one local card source — a PC/SC reader,
//! an OSDP reader whose control panel this process is, or a card that is
//! always present — offered to a door service by the [`agent`], with the
//! card's arrivals and removals watched on their own thread and the whole
//! stopped by SIGINT/SIGTERM or by the source failing.
//!
//! Everything worth telling a person goes to the `report` callback as one
//! line of text; this module prints nothing itself.

use std::fmt;
use std::path::PathBuf;
use std::sync::mpsc as std_mpsc;

use host::Watch;
use links::panel::{ReaderNews, ReaderWatch};
use tokio::sync::{mpsc, watch};

use crate::agent::{self, AgentConfig, AgentEvent, CardState, SharedCard};

/// How the card's presence is learnt.
pub enum Presence {
    /// The card is always there (a software card image).
    Always,
    /// `SCardGetStatusChange` on this PC/SC reader.
    Pcsc(Watch, String),
    /// The OSDP reader's card-present reports (address, serial device).
    Osdp(ReaderWatch, u8, PathBuf),
}

/// A card offered to the service.
pub struct Offer {
    pub card: SharedCard,
    /// What the card is, for people ("PC/SC reader \"…\"").
    pub source: String,
    pub presence: Presence,
    /// Whether a card is there at the start (the watch reports changes).
    pub present: bool,
}

/// Why [`run`] ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum OfferError {
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    #[error("starting the runtime: {0}")]
    Runtime(std::io::Error),
    /// The card source failed (the reader went away, the serial line broke).
    #[error("{0}")]
    Source(String),
}

/// A number for the first card that differs between runs, so that a service
/// never mistakes a new run's card for the last run's.
fn first_card_number() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

/// Offers `offer` under `cfg` until SIGINT/SIGTERM (`Ok`) or until the
/// card source fails.
pub fn run(
    offer: Offer,
    cfg: AgentConfig,
    report: impl Fn(&str) + Send + Sync + Clone + 'static,
) -> Result<(), OfferError> {
    let mut number = first_card_number();
    let (presence_tx, presence_rx) = watch::channel(CardState::default());
    let (stop_tx, stop_rx) = std_mpsc::channel::<Option<String>>();
    if offer.present || matches!(offer.presence, Presence::Always) {
        presence_tx.send_replace(CardState {
            present: true,
            card: number,
        });
    }
    let cancel = match offer.presence {
        Presence::Always => None,
        Presence::Pcsc(ctx, name) => {
            let cancel = ctx.canceller();
            let (stop, report) = (stop_tx.clone(), report.clone());
            std::thread::spawn(move || {
                let r = ctx.presence(&name, |present| {
                    if present {
                        number += 1;
                    }
                    let what = if present {
                        "presented to"
                    } else {
                        "removed from"
                    };
                    report(&format!("card {what} reader {name:?}"));
                    presence_tx.send_replace(CardState {
                        present,
                        card: number,
                    });
                });
                let _ = stop.send(
                    r.err()
                        .map(|e| format!("cannot watch reader {name:?} any more: {e}")),
                );
            });
            Some(cancel)
        }
        Presence::Osdp(w, address, dev) => {
            let (stop, report) = (stop_tx.clone(), report.clone());
            std::thread::spawn(move || {
                let why = watch_osdp(w, address, &dev, number, presence_tx, &report);
                let _ = stop.send(Some(why));
            });
            None
        }
    };
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .map_err(OfferError::Signals)?;
    {
        let stop = stop_tx.clone();
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                if let Some(c) = &cancel {
                    c.cancel();
                }
                let _ = stop.send(None);
            }
        });
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(OfferError::Runtime)?;
    let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
    rt.spawn(agent::run(cfg, offer.card, presence_rx, ev_tx));
    rt.spawn(async move {
        while let Some(e) = ev_rx.recv().await {
            if !matches!(e, AgentEvent::Ready { .. }) {
                report(&e.to_string());
            }
        }
    });
    let why = stop_rx.recv().unwrap_or(None);
    rt.shutdown_background();
    match why {
        None => Ok(()),
        Some(why) => Err(OfferError::Source(why)),
    }
}

fn watch_osdp(
    w: ReaderWatch,
    address: u8,
    dev: &std::path::Path,
    mut number: u64,
    presence: watch::Sender<CardState>,
    report: &impl Fn(&str),
) -> String {
    let r = w.run(|news| match news {
        ReaderNews::Card(present) => {
            if present {
                number += 1;
            }
            let what = if present {
                "presented to"
            } else {
                "removed from"
            };
            report(&format!("card {what} OSDP reader {address}"));
            presence.send_replace(CardState {
                present,
                card: number,
            });
        }
        ReaderNews::Online { secure } => report(&format!(
            "OSDP reader {address} online{}",
            if secure {
                " (secure channel)"
            } else {
                " without the secure channel"
            }
        )),
        ReaderNews::Offline(reason) => report(&format!("OSDP reader {address} offline: {reason}")),
        ReaderNews::Refused(reason) => report(&format!(
            "OSDP reader {address} refused: it failed the secure channel ({reason})"
        )),
    });
    match r {
        Ok(_) => "the OSDP control panel stopped".into(),
        Err(e) => format!("the OSDP serial line {} failed: {e}", dev.display()),
    }
}

impl fmt::Display for AgentEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentEvent::Connected { resumed } => write!(
                f,
                "connected ({})",
                if *resumed {
                    "TLS session resumed"
                } else {
                    "full TLS handshake"
                }
            ),
            AgentEvent::Disconnected { reason } => write!(f, "disconnected: {reason}"),
            AgentEvent::Refused { reason } => write!(f, "refused: {reason}"),
            AgentEvent::ServerRefused(c) => {
                write!(f, "the service's certificate was refused: {c}")
            }
            AgentEvent::Ready { challenge } => {
                write!(f, "prepared for the next card (challenge {challenge})")
            }
            AgentEvent::CardReported { prepared, .. } => write!(
                f,
                "card reported{}",
                if *prepared {
                    " with the prepared answers"
                } else {
                    ""
                }
            ),
            AgentEvent::TapEnded { granted, text, .. } => write!(
                f,
                "tap {}: {text}",
                if *granted { "granted" } else { "refused" }
            ),
            AgentEvent::TapLost { .. } => {
                write!(
                    f,
                    "the link dropped during the tap; it ended without a decision"
                )
            }
            AgentEvent::Retrying { after } => write!(f, "reconnecting in {after:.1?}"),
        }
    }
}
