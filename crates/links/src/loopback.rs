//! An OSDP reader and its control panel in one process: a
//! [`PeripheralDevice`] relaying a card's APDUs ([`CardBridge`]) and a
//! [`ControlPanel`] on the two sides of a private pseudo-terminal pair,
//! paced at a real baud rate, brought online with the secure channel. The
//! demo's reader-link section, the benchmarks and the tests tap cards
//! through it exactly as through a reader on an RS-485 bus.

use std::time::Duration;

use host::Transport;

use crate::osdp::cp::{ControlPanel, CpConfig, CpEvent, PdSetup};
use crate::osdp::msg::PdId;
use crate::osdp::pd::{PdConfig, PeripheralDevice};
use crate::osdp::sc::Key;
use crate::serial::{CpHandle, Link, PdHandle, Pty};
use crate::transparent::{CardBridge, OsdpTransport};

/// How long the reader is given to come online.
const ONLINE: Duration = Duration::from_secs(10);

/// Why the pair could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LoopbackError {
    #[error("opening a pseudo-terminal pair")]
    Pty(#[source] std::io::Error),
    #[error("starting the OSDP reader")]
    Reader(#[source] std::io::Error),
    #[error("starting the OSDP panel")]
    Panel(#[source] std::io::Error),
    #[error("the OSDP reader did not come online with the secure channel: {0}")]
    NotOnline(String),
}

/// A reader at `address` and its panel, online with the secure channel.
pub struct Loopback {
    /// The panel, online.
    pub panel: CpHandle,
    /// The reader, relaying APDUs to its card.
    pub reader: PdHandle,
    pub address: u8,
    /// The pseudo-terminal pair: kept open until both ends are shut down,
    /// so neither sees the line hang up.
    pub line: Pty,
}

impl Loopback {
    /// Starts a reader at `address` offering `card` in transparent mode and
    /// a panel, both on `key` and paced at `baud`, and waits for the reader
    /// to come online with the secure channel.
    pub fn start(
        card: Box<dyn Transport + Send>,
        address: u8,
        baud: u32,
        key: Key,
    ) -> Result<Loopback, LoopbackError> {
        let pty = Pty::open().map_err(LoopbackError::Pty)?;
        let mut cfg = PdConfig::reader(
            address,
            PdId {
                serial: u32::from(address),
                ..PdId::default()
            },
        );
        cfg.scbk = Some(key.clone());
        cfg.require_secure = true;
        let reader = PdHandle::spawn(
            pty.slave.try_clone().map_err(LoopbackError::Pty)?,
            PeripheralDevice::new(cfg),
            Box::new(CardBridge::new(card, 0)),
            Link::paced(baud),
        )
        .map_err(LoopbackError::Reader)?;
        let panel = CpHandle::spawn(
            pty.master.try_clone().map_err(LoopbackError::Pty)?,
            ControlPanel::new(CpConfig::default(), vec![PdSetup::secure(address, key)]),
            Link::paced(baud),
        )
        .map_err(LoopbackError::Panel)?;
        let online = panel.wait_for(ONLINE, |e| {
            matches!(e, CpEvent::Online { .. } | CpEvent::Refused { .. })
        });
        if !matches!(online, Some(CpEvent::Online { secure: true, .. })) {
            return Err(LoopbackError::NotOnline(format!("{online:?}")));
        }
        Ok(Loopback {
            panel,
            reader,
            address,
            line: pty,
        })
    }

    /// The panel as a [`host::Transport`] to the reader's card, the
    /// reader, and the line (to be dropped after both are shut down).
    pub fn split(self) -> (OsdpTransport, PdHandle, Pty) {
        (
            OsdpTransport::new(self.panel, self.address, 0),
            self.reader,
            self.line,
        )
    }
}
