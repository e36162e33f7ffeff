//! Transparent smart-card access through an OSDP reader: a
//! [`host::Transport`] whose APDUs travel in `osdp_XWR` / `osdp_XRD`
//! (extended mode 1), so the controller runs PKI-CAK itself and the reader
//! only relays bytes — it never has to be trusted. With the secure channel up,
//! the APDUs are encrypted and MACed on the wire.

use std::time::Duration;

use host::{Channel, Traffic, Transport, TransportError};

use crate::osdp::cp::{CpError, CpEvent, Ticket};
use crate::osdp::msg::{cmd, Command, Reply, XrdReply, XwrRequest};
use crate::serial::{CpCommander, CpHandle, LineStats};

/// What a [`OsdpTransport`] needs of the bus: a way to queue commands, the
/// panel's events, and one device's share of the line counters. A [`CpHandle`] owns all three; a
/// [`SharedBus`] is for a service whose own thread reads the panel's events
/// and hands one reader's share to its transport.
pub trait Bus {
    fn submit(&self, address: u8, command: Command) -> Result<Ticket, CpError>;
    fn events(&self) -> &std::sync::mpsc::Receiver<CpEvent>;
    fn line_stats(&self, address: u8) -> LineStats;
}

impl Bus for CpHandle {
    fn submit(&self, address: u8, command: Command) -> Result<Ticket, CpError> {
        CpHandle::submit(self, address, command)
    }
    fn events(&self) -> &std::sync::mpsc::Receiver<CpEvent> {
        CpHandle::events(self)
    }
    fn line_stats(&self, address: u8) -> LineStats {
        CpHandle::device_line_stats(self, address)
    }
}

/// A bus whose events are forwarded by their reader (see [`Bus`]).
#[derive(Debug)]
pub struct SharedBus {
    pub commander: CpCommander,
    pub events: std::sync::mpsc::Receiver<CpEvent>,
}

impl Bus for SharedBus {
    fn submit(&self, address: u8, command: Command) -> Result<Ticket, CpError> {
        self.commander.submit(address, command)
    }
    fn events(&self) -> &std::sync::mpsc::Receiver<CpEvent> {
        &self.events
    }
    fn line_stats(&self, address: u8) -> LineStats {
        self.commander.device_line_stats(address)
    }
}

/// The largest short APDU: header, Lc, 255 data bytes, Le.
const MAX_APDU: usize = 4 + 1 + 255 + 1;
/// Bus events kept for [`OsdpTransport::take_events`].
const STASH_LIMIT: usize = 1024;

/// A card behind an OSDP reader on a bus driven by a [`CpHandle`] (or
/// another [`Bus`]).
pub struct OsdpTransport<B = CpHandle> {
    cp: B,
    address: u8,
    reader: u8,
    name: String,
    timeout: Duration,
    traffic: Traffic,
    stash: Vec<CpEvent>,
}

impl<B: Bus> OsdpTransport<B> {
    /// Card access through reader `reader` of the device at `address`.
    pub fn new(cp: B, address: u8, reader: u8) -> OsdpTransport<B> {
        OsdpTransport {
            cp,
            address,
            reader,
            name: format!("OSDP device {address} reader {reader}"),
            timeout: Duration::from_secs(5),
            traffic: Traffic::default(),
            stash: Vec::new(),
        }
    }

    /// Events of the bus (card reads, status, other devices) that arrived
    /// while this transport waited for its answers.
    pub fn take_events(&mut self) -> Vec<CpEvent> {
        std::mem::take(&mut self.stash)
    }

    /// This reader's share of the serial line's counters (commands to its
    /// device and the device's replies, not other devices' traffic on the
    /// bus), including link time at the baud rate.
    pub fn line_stats(&self) -> LineStats {
        self.cp.line_stats(self.address)
    }

    /// The bus handle back.
    pub fn into_inner(self) -> B {
        self.cp
    }

    fn link(&self, detail: impl Into<String>) -> TransportError {
        TransportError::Link {
            reader: self.name.clone(),
            detail: detail.into(),
        }
    }

    fn protocol(&self, detail: impl Into<String>) -> TransportError {
        TransportError::Protocol {
            reader: self.name.clone(),
            detail: detail.into(),
        }
    }

    fn request(&mut self, req: XwrRequest) -> Result<XrdReply, TransportError> {
        let ticket = self
            .cp
            .submit(self.address, Command::Transparent(req))
            .map_err(|e: CpError| self.link(e.to_string()))?;
        let end = std::time::Instant::now() + self.timeout;
        loop {
            let left = end
                .checked_duration_since(std::time::Instant::now())
                .ok_or_else(|| self.link(format!("no answer within {:?}", self.timeout)))?;
            let ev = self
                .cp
                .events()
                .recv_timeout(left)
                .map_err(|_| self.link(format!("no answer within {:?}", self.timeout)))?;
            match ev {
                CpEvent::Completed {
                    address,
                    command: cmd::XWR,
                    ticket: t,
                    reply,
                } if address == self.address && t == ticket => {
                    return match reply {
                        Reply::Transparent(x) => Ok(x),
                        Reply::Nak(r) => Err(self.protocol(format!(
                            "the reader refused the transparent-mode request (NAK {})",
                            r.code()
                        ))),
                        other => Err(self.protocol(format!(
                            "the reader answered a transparent-mode request with reply {:#04x}",
                            other.code()
                        ))),
                    };
                }
                CpEvent::Abandoned {
                    address,
                    command: cmd::XWR,
                    ticket: t,
                } if address == self.address && t == ticket => {
                    return Err(self.link("the reader went offline during the exchange"));
                }
                CpEvent::Refused { address, reason } if address == self.address => {
                    self.stash.push(CpEvent::Refused { address, reason });
                    return Err(self.link("the reader failed the secure channel"));
                }
                // A late answer to an exchange this transport gave up on.
                CpEvent::Completed {
                    address,
                    command: cmd::XWR,
                    ..
                }
                | CpEvent::Abandoned {
                    address,
                    command: cmd::XWR,
                    ..
                } if address == self.address => {}
                other => {
                    // Keep the most recent events if nobody collects them.
                    if self.stash.len() >= STASH_LIMIT {
                        self.stash.remove(0);
                    }
                    self.stash.push(other);
                }
            }
        }
    }
}

impl<B: Bus> Channel for OsdpTransport<B> {
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
        if apdu.len() > MAX_APDU {
            return Err(TransportError::CommandTooLong(apdu.len()));
        }
        let reply = self.request(XwrRequest::Apdu {
            reader: self.reader,
            apdu: apdu.to_vec(),
        })?;
        match reply {
            XrdReply::Response {
                reader,
                status: 0,
                data,
            } if reader == self.reader => {
                if data.len() < 2 {
                    return Err(TransportError::ShortResponse(data.len()));
                }
                self.traffic.record(apdu.len(), data.len());
                Ok(data)
            }
            XrdReply::Response { status, .. } if status != 0 => {
                Err(TransportError::NoCard(self.name.clone()))
            }
            other => Err(self.protocol(format!("unexpected transparent-mode answer {other:?}"))),
        }
    }

    fn extended_length(&self) -> bool {
        false
    }

    fn traffic(&self) -> Traffic {
        self.traffic
    }
}

impl<B: Bus + Send> Transport for OsdpTransport<B> {
    fn transaction(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Channel) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        // The panel is the reader's only master: nothing can interleave.
        f(self)
    }

    fn reconnect(&mut self, _reset: bool) -> Result<(), TransportError> {
        self.request(XwrRequest::Done {
            reader: self.reader,
        })?;
        match self.request(XwrRequest::Scan {
            reader: self.reader,
        })? {
            XrdReply::CardPresent { status: 1, .. } => Ok(()),
            XrdReply::CardPresent { .. } => Err(TransportError::NoCard(self.name.clone())),
            other => Err(self.protocol(format!("unexpected answer to a card scan {other:?}"))),
        }
    }

    fn atr(&self) -> &[u8] {
        // Transparent mode relays APDUs only; the reader keeps the ATR.
        &[]
    }

    fn reader(&self) -> &str {
        &self.name
    }

    fn line_time(&self) -> Option<Duration> {
        Some(self.line_stats().wire_time())
    }
}

/// The reader side of transparent mode: a [`crate::osdp::pd::PdApp`] that
/// relays the panel's APDUs to a local card through any [`host::Transport`]
/// (a PC/SC reader, or the in-process software card), so a host can act as an
/// OSDP reader for another controller.
pub struct CardBridge {
    transport: Box<dyn Transport + Send>,
    reader: u8,
    mode: u8,
}

impl CardBridge {
    /// Relays requests for reader number `reader` to `transport`.
    pub fn new(transport: Box<dyn Transport + Send>, reader: u8) -> CardBridge {
        CardBridge {
            transport,
            reader,
            mode: 1,
        }
    }
}

/// `osdp_PR01SCREP` status values used by [`CardBridge`].
pub mod status {
    /// The card answered.
    pub const OK: u8 = 0;
    /// No card (absent or removed).
    pub const NO_CARD: u8 = 1;
    /// The card or the local reader failed.
    pub const FAILED: u8 = 2;
}

impl crate::osdp::pd::PdApp for CardBridge {
    fn transparent(&mut self, request: &XwrRequest) -> Option<XrdReply> {
        match request {
            XwrRequest::GetMode => Some(XrdReply::Mode {
                mode: self.mode,
                config: 0,
            }),
            XwrRequest::SetMode { mode, config } => {
                if *mode <= 1 {
                    self.mode = *mode;
                }
                Some(XrdReply::Mode {
                    mode: self.mode,
                    config: *config,
                })
            }
            _ if self.mode != 1 => None,
            XwrRequest::Apdu { reader, .. }
            | XwrRequest::Done { reader }
            | XwrRequest::Scan { reader }
                if *reader != self.reader =>
            {
                None
            }
            XwrRequest::Apdu { reader, apdu } => Some(match self.transport.transmit(apdu) {
                Ok(data) => XrdReply::Response {
                    reader: *reader,
                    status: status::OK,
                    data,
                },
                Err(TransportError::NoCard(_) | TransportError::CardRemoved) => {
                    XrdReply::Response {
                        reader: *reader,
                        status: status::NO_CARD,
                        data: vec![],
                    }
                }
                Err(_) => XrdReply::Response {
                    reader: *reader,
                    status: status::FAILED,
                    data: vec![],
                },
            }),
            XwrRequest::Scan { reader } | XwrRequest::Done { reader } => {
                let present = self.transport.reconnect(false).is_ok();
                Some(XrdReply::CardPresent {
                    reader: *reader,
                    status: u8::from(present),
                })
            }
        }
    }
}
