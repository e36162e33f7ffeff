//! This process as the control panel of one OSDP reader on a serial
//! device: bring it online (the secure channel, and in install mode the
//! key installed), wait for a card, and — for a reader whose card is
//! offered to someone else — follow its card arrivals and removals while
//! its APDUs are relayed. `pivgate auth --osdp` and `pivgate reader
//! connect --osdp` use it; what the events mean to a user is theirs to
//! print.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use host::{Transport, TransportError};

use crate::osdp::cp::{ControlPanel, CpConfig, CpEvent, PdSetup};
use crate::serial::{open_serial, CpHandle, LineStats, Link};
use crate::transparent::{OsdpTransport, SharedBus};

/// A wait without end.
const FOREVER: Duration = Duration::from_secs(365 * 86_400);

/// Why the reader could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum PanelError {
    #[error("opening the serial device {}", .0.display())]
    Serial(PathBuf, #[source] std::io::Error),
    #[error("starting the OSDP control panel")]
    Start(#[source] std::io::Error),
    #[error("the reader came online without the secure channel")]
    NotSecure,
    #[error(
        "the reader at address {address} failed the secure channel ({reason}); is the key right?"
    )]
    Refused { address: u8, reason: String },
    #[error("no OSDP reader answered at address {address} on {} at {baud} baud", dev.display())]
    NoAnswer {
        address: u8,
        dev: PathBuf,
        baud: u32,
    },
    #[error("asking the reader for its card")]
    Ask(#[source] TransportError),
    #[error("the reader went offline while waiting for a card")]
    Offline,
    #[error("timed out after {0:?} waiting for a card")]
    Timeout(Duration),
}

/// Pseudo-terminals deliver at once; a real UART paces itself. Writes are
/// paced when the device is a pseudo-terminal, so link time is real either
/// way.
pub fn link_for(dev: &Path, baud: u32) -> Link {
    let real = std::fs::canonicalize(dev).unwrap_or_else(|_| dev.to_path_buf());
    Link {
        baud,
        pace: real.starts_with("/dev/pts"),
    }
}

/// Starts this process as the control panel of the reader `setup` names on
/// serial device `dev` and waits (up to `wait`, or without end) for it to
/// come online: after the secure channel when `setup` has a key, and in
/// install mode after that key is installed (`key_installed` is called
/// then). Returns the panel and when the wait began.
pub fn open(
    dev: &Path,
    baud: u32,
    setup: PdSetup,
    wait: Option<Duration>,
    mut key_installed: impl FnMut(),
) -> Result<(CpHandle, Instant), PanelError> {
    let address = setup.address;
    let secure = setup.scbk.is_some();
    let port = open_serial(dev, baud).map_err(|e| PanelError::Serial(dev.to_owned(), e))?;
    let cp = CpHandle::spawn(
        port,
        ControlPanel::new(CpConfig::default(), vec![setup]),
        link_for(dev, baud),
    )
    .map_err(PanelError::Start)?;
    let start = Instant::now();
    let left = wait
        .map(|w| w.saturating_sub(start.elapsed()))
        .unwrap_or(FOREVER);
    let mut refused = None;
    let online = cp.wait_for(left, |e| match e {
        CpEvent::Online { address: x, .. } => *x == address,
        CpEvent::Refused { address: x, reason } if *x == address => {
            refused = Some(format!("{reason:?}"));
            true
        }
        CpEvent::KeyInstalled { address: x } if *x == address => {
            key_installed();
            false
        }
        _ => false,
    });
    match online {
        Some(CpEvent::Online { secure: got, .. }) if got == secure => Ok((cp, start)),
        Some(CpEvent::Online { .. }) => Err(PanelError::NotSecure),
        Some(_) => Err(PanelError::Refused {
            address,
            reason: refused.unwrap_or_default(),
        }),
        None => Err(PanelError::NoAnswer {
            address,
            dev: dev.to_owned(),
            baud,
        }),
    }
}

/// Waits (up to `wait` from `start`, or without end) for a card in the
/// reader at `address` of the online panel `cp`, and connects to it.
pub fn wait_for_card(
    cp: CpHandle,
    address: u8,
    start: Instant,
    wait: Option<Duration>,
) -> Result<OsdpTransport, PanelError> {
    let left = || {
        wait.map(|w| w.saturating_sub(start.elapsed()))
            .unwrap_or(FOREVER)
    };
    let mut transport = OsdpTransport::new(cp, address, 0);
    loop {
        match transport.reconnect(false) {
            Ok(()) => return Ok(transport),
            Err(TransportError::NoCard(_)) => {}
            Err(e) => return Err(PanelError::Ask(e)),
        }
        let cp = transport.into_inner();
        let ev = cp.wait_for(left(), |e| match e {
            CpEvent::CardPresence {
                address: x,
                present: true,
                ..
            } => *x == address,
            CpEvent::Offline { address: x, .. } => *x == address,
            _ => false,
        });
        match ev {
            Some(CpEvent::CardPresence { .. }) => {}
            Some(_) => return Err(PanelError::Offline),
            None => return Err(PanelError::Timeout(wait.unwrap_or(FOREVER))),
        }
        transport = OsdpTransport::new(cp, address, 0);
    }
}

/// What the reader of a [`SharedReader`] did, as [`ReaderWatch::run`]
/// reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReaderNews {
    /// A card arrived (`true`) or left; also `false` when the reader went
    /// offline holding a card.
    Card(bool),
    Online {
        secure: bool,
    },
    Offline(String),
    /// It failed the secure channel.
    Refused(String),
}

/// An online reader whose card is used from another thread: the transport
/// the APDUs take, whether a card was in the reader at the start, and the
/// watch that follows the reader's events.
pub struct SharedReader {
    pub transport: OsdpTransport<SharedBus>,
    pub present: bool,
    pub watch: ReaderWatch,
}

/// Reads the panel's events for a [`SharedReader`].
pub struct ReaderWatch {
    cp: CpHandle,
    address: u8,
    present: bool,
    /// The panel's answers to the transport's requests.
    bus: mpsc::Sender<CpEvent>,
}

impl SharedReader {
    /// Takes over the online panel `cp` of the reader at `address` and asks
    /// the reader whether it holds a card.
    pub fn new(cp: CpHandle, address: u8) -> Result<SharedReader, PanelError> {
        let mut scan = OsdpTransport::new(cp, address, 0);
        let present = match scan.reconnect(false) {
            Ok(()) => true,
            Err(TransportError::NoCard(_)) => false,
            Err(e) => return Err(PanelError::Ask(e)),
        };
        let cp = scan.into_inner();
        let (bus, events) = mpsc::channel();
        let shared = SharedBus {
            commander: cp.commander(),
            events,
        };
        Ok(SharedReader {
            transport: OsdpTransport::new(shared, address, 0),
            present,
            watch: ReaderWatch {
                cp,
                address,
                present,
                bus,
            },
        })
    }
}

impl ReaderWatch {
    /// Reads the panel's events until its serial line stops: card arrivals
    /// and removals, the reader coming online, going offline and failing
    /// the secure channel go to `news`; the answers to the transport's
    /// requests go to the transport. Returns how the panel stopped.
    pub fn run(mut self, mut news: impl FnMut(ReaderNews)) -> std::io::Result<LineStats> {
        let address = self.address;
        while let Ok(e) = self.cp.events().recv() {
            match &e {
                CpEvent::CardPresence {
                    address: x,
                    reader: 0,
                    present,
                } if *x == address && *present != self.present => {
                    self.present = *present;
                    news(ReaderNews::Card(*present));
                }
                CpEvent::Online {
                    address: x, secure, ..
                } if *x == address => news(ReaderNews::Online { secure: *secure }),
                // Its card cannot be reached until it is back and reports it again.
                CpEvent::Offline { address: x, reason } if *x == address => {
                    news(ReaderNews::Offline(format!("{reason:?}")));
                    if self.present {
                        self.present = false;
                        news(ReaderNews::Card(false));
                    }
                }
                CpEvent::Refused { address: x, reason } if *x == address => {
                    news(ReaderNews::Refused(format!("{reason:?}")));
                    let _ = self.bus.send(e);
                }
                CpEvent::Completed { .. } | CpEvent::Abandoned { .. } => {
                    let _ = self.bus.send(e);
                }
                _ => {}
            }
        }
        self.cp.shutdown()
    }
}
