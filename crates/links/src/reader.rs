//! This host's card offered to an OSDP panel: a peripheral device in
//! transparent mode on a serial line, relaying the panel's APDUs to any
//! [`host::Transport`] ([`CardBridge`]), keeping a key the panel installs
//! (`osdp_KEYSET`) in its key file, and reporting the panel's feedback
//! requests (LED, buzzer, output) as [`ReaderNote`]s for the caller to show.

use std::fmt;
use std::path::{Path, PathBuf};

use host::Transport;

use crate::osdp::msg::{BuzzerControl, LedControl, OutputControl, PdId, XrdReply, XwrRequest};
use crate::osdp::pd::{PdApp, PdConfig, PdEvent, PeripheralDevice};
use crate::osdp::sc::Key;
use crate::panel::link_for;
use crate::serial::{open_serial, Link, PdHandle};
use crate::transparent::CardBridge;

/// Something the reader did or was asked to do.
#[derive(Debug)]
pub enum ReaderNote {
    /// The panel installed a new key, saved to this file.
    KeySaved(PathBuf),
    /// The panel sent a new key that could not be saved: it was refused.
    KeyNotSaved {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The panel installed a new key, kept in memory only (no key file).
    KeyInMemory,
    Led(LedControl),
    Buzzer(BuzzerControl),
    Output(OutputControl),
}

impl std::fmt::Display for ReaderNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReaderNote::KeySaved(path) => write!(
                f,
                "the panel installed a new key; saved to {}",
                path.display()
            ),
            ReaderNote::KeyNotSaved { path, error } => write!(
                f,
                "the panel sent a new key but {} could not be written ({error}); refused",
                path.display()
            ),
            ReaderNote::KeyInMemory => write!(
                f,
                "the panel installed a new key; it is kept in memory only (no --key-file)"
            ),
            ReaderNote::Led(c) => write!(f, "LED {c:?}"),
            ReaderNote::Buzzer(c) => write!(f, "buzzer {c:?}"),
            ReaderNote::Output(c) => write!(f, "output {c:?}"),
        }
    }
}

/// How the reader's secure channel is set up.
pub struct ReaderSecurity {
    /// The installed key (SCBK), if any.
    pub scbk: Option<Key>,
    /// Accept the default key until the panel installs one.
    pub install_mode: bool,
    /// Refuse to work outside the secure channel.
    pub require_secure: bool,
    /// Where an installed key is kept.
    pub key_file: Option<PathBuf>,
}

/// The reader's application: transparent mode through the bridge, keys
/// persisted, everything else reported.
struct OfferedCard {
    bridge: CardBridge,
    key_file: Option<PathBuf>,
    notes: Box<dyn FnMut(ReaderNote) + Send>,
}

impl PdApp for OfferedCard {
    fn transparent(&mut self, request: &XwrRequest) -> Option<XrdReply> {
        self.bridge.transparent(request)
    }
    fn keyset(&mut self, key: &Key) -> bool {
        let (note, taken) = match &self.key_file {
            Some(path) => match files::write_hex_key(path, &key.0) {
                Ok(()) => (ReaderNote::KeySaved(path.clone()), true),
                Err(error) => (
                    ReaderNote::KeyNotSaved {
                        path: path.clone(),
                        error,
                    },
                    false,
                ),
            },
            None => (ReaderNote::KeyInMemory, true),
        };
        (self.notes)(note);
        taken
    }
    fn led(&mut self, control: &LedControl) {
        (self.notes)(ReaderNote::Led(*control));
    }
    fn buzzer(&mut self, control: &BuzzerControl) {
        (self.notes)(ReaderNote::Buzzer(*control));
    }
    fn output(&mut self, control: &OutputControl) {
        (self.notes)(ReaderNote::Output(*control));
    }
}

/// Starts a reader at `address` on serial device `dev` offering `card`,
/// secured as `security` says; `notes` receives what it does. Returns the
/// device and its link (paced on a pseudo-terminal).
pub fn start(
    dev: &Path,
    address: u8,
    baud: u32,
    security: ReaderSecurity,
    card: Box<dyn Transport + Send>,
    notes: impl FnMut(ReaderNote) + Send + 'static,
) -> std::io::Result<(PdHandle, Link)> {
    let port = open_serial(dev, baud)?;
    let mut cfg = PdConfig::reader(
        address,
        PdId {
            vendor: [0, 0, 0],
            model: 1,
            version: 1,
            serial: std::process::id(),
            firmware: [0, 1, 0],
        },
    );
    cfg.scbk = security.scbk;
    cfg.install_mode = security.install_mode;
    cfg.require_secure = security.require_secure;
    let app = OfferedCard {
        bridge: CardBridge::new(card, 0),
        key_file: security.key_file,
        notes: Box::new(notes),
    };
    let link = link_for(dev, baud);
    let pd = PdHandle::spawn(port, PeripheralDevice::new(cfg), Box::new(app), link)?;
    Ok((pd, link))
}

impl fmt::Display for PdEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PdEvent::Secured { default_key: true } => {
                f.write_str("secure channel up with the default key (install mode)")
            }
            PdEvent::Secured { default_key: false } => f.write_str("secure channel up"),
            PdEvent::KeyInstalled => f.write_str("key installed; install mode is over"),
            PdEvent::Reset => f.write_str("the panel (re)connected"),
            PdEvent::SecurityFailure(e) => {
                write!(f, "secure channel failure, session dropped: {e}")
            }
            PdEvent::CryptogramMismatch => {
                f.write_str("the panel's cryptogram does not match: it holds another key")
            }
            PdEvent::BadFrame(e) => write!(f, "bad frame discarded: {e}"),
            PdEvent::BadCommand(e) => write!(f, "bad command answered with NAK: {e}"),
        }
    }
}

/// How a running reader learns that its card came or went.
pub enum CardWatch {
    /// The card is always there (a software card image).
    Always,
    /// `SCardGetStatusChange` on this PC/SC reader.
    Pcsc(host::Watch, String),
}

/// How [`serve`] ended.
pub struct Served {
    /// What the line carried.
    pub stats: crate::serial::LineStats,
    /// Stopped by SIGINT/SIGTERM (not by the line or the card watch failing).
    pub by_signal: bool,
}

/// Runs the reader `pd` until SIGINT/SIGTERM or until its line fails: the
/// card watch on its own thread reports each arrival and removal to the
/// panel, and every event of the device goes to `report` as one line.
pub fn serve(
    pd: PdHandle,
    watch: CardWatch,
    report: impl Fn(&str) + Send + Sync + Clone + 'static,
) -> std::io::Result<Served> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let stopping = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])?;
    let stopper = pd.remote()?;
    let cancel = match &watch {
        CardWatch::Pcsc(w, _) => Some(w.canceller()),
        CardWatch::Always => None,
    };
    {
        let (stopping, cancel) = (stopping.clone(), cancel.clone());
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                stopping.store(true, Ordering::SeqCst);
                if let Some(c) = &cancel {
                    c.cancel();
                }
                stopper.stop();
            }
        });
    }
    let watcher = match watch {
        CardWatch::Pcsc(ctx, name) => {
            let remote = pd.remote()?;
            let (stopping, report) = (stopping.clone(), report.clone());
            Some(std::thread::spawn(move || {
                let r = ctx.presence(&name, |now| {
                    let what = if now { "presented to" } else { "removed from" };
                    report(&format!("card {what} reader {name:?}"));
                    remote.card_presence(0, now);
                });
                if let Err(e) = r {
                    if !stopping.load(Ordering::SeqCst) {
                        report(&format!(
                            "cannot watch reader {name:?} any more: {e}; stopping"
                        ));
                        remote.stop();
                    }
                }
            }))
        }
        CardWatch::Always => {
            pd.card_presence(0, true);
            None
        }
    };
    while let Ok(e) = pd.events().recv() {
        report(&e.to_string());
    }
    let stats = pd.shutdown();
    let by_signal = stopping.swap(true, Ordering::SeqCst);
    if let Some(w) = watcher {
        if let Some(c) = &cancel {
            c.cancel();
        }
        let _ = w.join();
    }
    Ok(Served {
        stats: stats?,
        by_signal,
    })
}
