//! The control panel side, sans-I/O, for a multidrop bus.
//!
//! One command is in flight at a time (the bus is half duplex). Devices take
//! turns: a device with a queued command goes next in round-robin order, an
//! idle online device is polled every [`CpConfig::poll_interval`] (counted
//! from when the previous command to it went out, so a device slow to
//! answer is not polled less often), an offline one is retried every
//! [`CpConfig::offline_retry`]. A device that answers a poll with a report
//! (input status, card data, keys, ...) may hold more: it is polled again
//! at once, up to [`FOLLOW_UPS`] times in a row, so reports it queued
//! together arrive together (a contact's bounce is not spread over poll
//! intervals). A reply that does not
//! come within [`CpConfig::reply_timeout`] (the standard's 200 ms) is asked for
//! again with the same sequence number up to [`CpConfig::retries`] times; then
//! the device is offline. Connecting is `osdp_ID` (sequence 0), `osdp_CAP`,
//! then, when a key is configured, the secure channel handshake with it. In
//! install mode, a device that refuses the configured key is tried with
//! SCBK-D, and that session installs the configured key with `osdp_KEYSET`
//! and starts a new handshake with it; once a handshake with the configured
//! key succeeds, install mode is over. While connecting, only the expected
//! answer to the panel's own command is taken: anything else fails the
//! connection, which is tried again later.
//!
//! The driver calls [`ControlPanel::poll_transmit`] when the line is free,
//! [`ControlPanel::receive`] with what it hears and
//! [`ControlPanel::handle_timeout`] at [`ControlPanel::next_deadline`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use thiserror::Error;

use super::codec::{scs, Frame, FrameDecoder, FrameError, Scb, MAX_PACKET};
use super::msg::{
    reply, Capability, Command, MsgError, NakReason, PdId, RawCard, Reply, XrdReply, XwrRequest,
};
use super::sc::{self, Key, Session, SessionKeys};
use super::{next_sqn, open, random, seal, LinkError};

/// How many times in a row a device that answers polls with reports is
/// polled again at once before it waits for the poll interval.
pub const FOLLOW_UPS: u32 = 4;

/// Bus timing.
#[derive(Debug, Clone, Copy)]
pub struct CpConfig {
    /// How long to wait for a reply (the standard: 200 ms).
    pub reply_timeout: Duration,
    /// Retransmissions before a device is declared offline.
    pub retries: u32,
    /// How often an idle online device is polled, from one command sent
    /// to it to the next.
    pub poll_interval: Duration,
    /// How often an offline device is tried again.
    pub offline_retry: Duration,
    /// How long to wait for the answer to a transparent-mode APDU: the reader
    /// answers once the card has, and a card's private-key operation can take
    /// over a second (the reference door's card takes 1.2 s).
    pub transparent_timeout: Duration,
}

impl Default for CpConfig {
    fn default() -> CpConfig {
        CpConfig {
            reply_timeout: Duration::from_millis(200),
            retries: 2,
            poll_interval: Duration::from_millis(50),
            offline_retry: Duration::from_secs(1),
            transparent_timeout: Duration::from_secs(3),
        }
    }
}

/// How the panel talks to one device.
#[derive(Debug, Clone)]
pub struct PdSetup {
    pub address: u8,
    /// The device's secure channel base key; `None` for a plaintext link.
    pub scbk: Option<Key>,
    /// The device is in install mode: connect with SCBK-D, then install `scbk`
    /// with `osdp_KEYSET`.
    pub install_mode: bool,
}

impl PdSetup {
    /// A plaintext link.
    pub fn plain(address: u8) -> PdSetup {
        PdSetup {
            address,
            scbk: None,
            install_mode: false,
        }
    }
    /// A secure link with an installed key.
    pub fn secure(address: u8, scbk: Key) -> PdSetup {
        PdSetup {
            address,
            scbk: Some(scbk),
            install_mode: false,
        }
    }
}

/// Why a device went offline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfflineReason {
    /// No valid reply after the retries.
    NoReply,
    /// The device rejected the sequence number; the connection restarts.
    SequenceRejected,
    /// The secure channel failed (see the preceding [`CpEvent::Refused`]).
    Refused,
    /// The device dropped the secure session (NAK 6 to a secured command);
    /// the connection and the handshake start again.
    SessionLost,
    /// While connecting, the device answered the panel's `command` with an
    /// unexpected or undecodable `reply`.
    UnexpectedReply { command: u8, reply: u8 },
}

/// Why a device was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A reply's MAC did not verify (or a plaintext reply came inside the session).
    Mac(LinkError),
    /// The device's cryptogram or initial R-MAC is not the one our key gives.
    Cryptogram,
    /// The device refused the handshake (NAK), e.g. SCBK-D outside install mode.
    HandshakeRefused(NakReason),
    /// The device answered the handshake with something else.
    HandshakeReply(u8),
    /// The device refused `osdp_KEYSET`.
    KeySetRefused(NakReason),
}

/// What the panel reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpEvent {
    Online {
        address: u8,
        id: PdId,
        capabilities: Vec<Capability>,
        secure: bool,
    },
    Offline {
        address: u8,
        reason: OfflineReason,
    },
    /// A new key was installed with `osdp_KEYSET`.
    KeyInstalled {
        address: u8,
    },
    /// The device failed the secure channel and is not trusted.
    Refused {
        address: u8,
        reason: Refusal,
    },
    Card {
        address: u8,
        card: RawCard,
    },
    CardText {
        address: u8,
        reader: u8,
        text: Vec<u8>,
    },
    Keypad {
        address: u8,
        reader: u8,
        keys: Vec<u8>,
    },
    /// A reader in transparent mode reported a card arriving (`present`) on
    /// `reader`, or leaving it (`osdp_PR01PRES` in answer to a poll).
    CardPresence {
        address: u8,
        reader: u8,
        present: bool,
    },
    LocalStatus {
        address: u8,
        tamper: bool,
        power: bool,
    },
    /// The device's input status (`osdp_ISTATR`, one byte per input: 0
    /// inactive, 1 active; supervised inputs may report line faults with
    /// other values), unsolicited in answer to a poll or to the panel's
    /// own `osdp_ISTAT`.
    InputStatus {
        address: u8,
        inputs: Vec<u8>,
    },
    /// The reply to a command submitted with [`ControlPanel::submit`]
    /// (`ticket` is what `submit` returned).
    Completed {
        address: u8,
        command: u8,
        ticket: Ticket,
        reply: Reply,
    },
    /// A submitted command that gets no [`CpEvent::Completed`]: the device
    /// went offline or was refused, or its reply did not decode.
    Abandoned {
        address: u8,
        command: u8,
        ticket: Ticket,
    },
    /// A damaged or unexpected packet was discarded.
    BadFrame(FrameError),
    /// A reply whose data did not decode was discarded.
    BadReply {
        address: u8,
        error: MsgError,
    },
}

/// Names one submitted command in its [`CpEvent::Completed`] or
/// [`CpEvent::Abandoned`], so a late answer is never taken for the answer
/// to a later command.
pub type Ticket = u64;

/// Commands the panel will not queue.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CpError {
    #[error("no device with address {0} is configured on this bus")]
    UnknownAddress(u8),
    #[error("device {0} is offline")]
    Offline(u8),
    #[error("osdp_KEYSET needs an established secure channel with device {0}")]
    NotSecure(u8),
    #[error("the secure channel handshake commands are sent by the panel itself")]
    Reserved,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Offline,
    Connecting,
    Online,
}

struct Handshake {
    keys: SessionKeys,
    rnd_a: [u8; 8],
    server: Option<[u8; 16]>,
    default_key: bool,
}

struct Pd {
    setup: PdSetup,
    phase: Phase,
    sqn: u8,
    /// Commands the panel itself must send next (connect sequence, handshake).
    internal: VecDeque<Command>,
    queue: VecDeque<(Command, Ticket)>,
    session: Option<Session>,
    handshake: Option<Handshake>,
    id: PdId,
    caps: Vec<Capability>,
    due: Option<Instant>,
    /// The handshake with the configured key failed in install mode: the
    /// next one uses SCBK-D.
    try_default: bool,
    /// A command the device answered with `osdp_BUSY`, sent again at `due`.
    busy: Option<InFlight>,
    /// Polls in a row answered with a report (see [`FOLLOW_UPS`]).
    reports: u32,
}

struct InFlight {
    /// How long this command's reply may take.
    timeout: Duration,
    pd: usize,
    command: Command,
    /// The ticket of a submitted command; `None` for the panel's own.
    owner: Option<Ticket>,
    bytes: Vec<u8>,
    sqn: u8,
    /// When it (or its last retransmission) went out.
    sent: Instant,
    deadline: Instant,
    attempts: u32,
    /// Bytes heard while the deadline was being pushed back for a reply
    /// still arriving.
    extended: usize,
}

/// The CP state machine.
pub struct ControlPanel {
    cfg: CpConfig,
    pds: Vec<Pd>,
    next: usize,
    in_flight: Option<InFlight>,
    decoder: FrameDecoder,
    events: VecDeque<CpEvent>,
    tickets: Ticket,
}

/// True when a reply arrives for a command the panel sent itself before the
/// device is online: it should have been one of the connect sequence's.
fn connecting_reply(phase: Phase, owner: Option<Ticket>) -> bool {
    phase != Phase::Online && owner.is_none()
}

impl ControlPanel {
    pub fn new(cfg: CpConfig, devices: Vec<PdSetup>) -> ControlPanel {
        let pds = devices
            .into_iter()
            .map(|setup| Pd {
                setup,
                phase: Phase::Offline,
                sqn: 0,
                internal: VecDeque::new(),
                queue: VecDeque::new(),
                session: None,
                handshake: None,
                id: PdId::default(),
                caps: Vec::new(),
                due: None,
                try_default: false,
                busy: None,
                reports: 0,
            })
            .collect();
        ControlPanel {
            cfg,
            pds,
            next: 0,
            in_flight: None,
            decoder: FrameDecoder::new(),
            events: VecDeque::new(),
            tickets: 0,
        }
    }

    fn index(&self, address: u8) -> Result<usize, CpError> {
        self.pds
            .iter()
            .position(|p| p.setup.address == address)
            .ok_or(CpError::UnknownAddress(address))
    }

    /// True when the device is online.
    pub fn is_online(&self, address: u8) -> bool {
        self.index(address)
            .is_ok_and(|i| self.pds[i].phase == Phase::Online)
    }

    /// True when the device is online over the secure channel.
    pub fn is_secure(&self, address: u8) -> bool {
        self.index(address)
            .is_ok_and(|i| self.pds[i].phase == Phase::Online && self.pds[i].session.is_some())
    }

    /// Queues a command for an online device; its reply comes back as
    /// [`CpEvent::Completed`] (or [`CpEvent::Abandoned`]) with the ticket
    /// returned here.
    pub fn submit(&mut self, address: u8, command: Command) -> Result<Ticket, CpError> {
        let i = self.index(address)?;
        let pd = &mut self.pds[i];
        if matches!(
            command,
            Command::Challenge { .. } | Command::ServerCryptogram { .. }
        ) {
            return Err(CpError::Reserved);
        }
        if pd.phase != Phase::Online {
            return Err(CpError::Offline(address));
        }
        if matches!(command, Command::KeySet { .. }) && pd.session.is_none() {
            return Err(CpError::NotSecure(address));
        }
        self.tickets += 1;
        pd.queue.push_back((command, self.tickets));
        Ok(self.tickets)
    }

    /// Takes the next event.
    pub fn poll_event(&mut self) -> Option<CpEvent> {
        self.events.pop_front()
    }

    /// Counters of the bus decoder.
    pub fn decoder_stats(&self) -> super::codec::DecoderStats {
        self.decoder.stats()
    }

    /// The address of the device whose reply the panel awaits: the one
    /// its last transmitted packet went to, until the reply or the timeout.
    /// On a bus only the addressed device answers, so what the line
    /// carries meanwhile is that device's.
    pub fn awaiting(&self) -> Option<u8> {
        self.in_flight
            .as_ref()
            .map(|f| self.pds[f.pd].setup.address)
    }

    /// When [`ControlPanel::handle_timeout`] or [`ControlPanel::poll_transmit`]
    /// next has something to do.
    pub fn next_deadline(&self, now: Instant) -> Instant {
        if let Some(f) = &self.in_flight {
            return f.deadline;
        }
        self.pds
            .iter()
            .map(|p| self.due_at(p, now))
            .min()
            .unwrap_or(now + self.cfg.offline_retry)
    }

    fn due_at(&self, p: &Pd, now: Instant) -> Instant {
        if p.busy.is_some() {
            return p.due.unwrap_or(now);
        }
        if !p.internal.is_empty() || (p.phase == Phase::Online && !p.queue.is_empty()) {
            return now;
        }
        // A device connecting with nothing left to send starts over (see
        // `poll_transmit`), so it is never due in the past without anything
        // to do.
        p.due.unwrap_or(now)
    }

    /// The next packet to put on the line, if the line is free and a device is due.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.in_flight.is_some() || self.pds.is_empty() {
            return None;
        }
        let n = self.pds.len();
        for k in 0..n {
            let i = (self.next + k) % n;
            if self.due_at(&self.pds[i], now) > now {
                continue;
            }
            let pd = &mut self.pds[i];
            if let Some(mut f) = pd.busy.take() {
                self.next = (i + 1) % n;
                f.attempts = 0;
                f.sent = now;
                f.deadline = now + f.timeout;
                let bytes = f.bytes.clone();
                self.in_flight = Some(f);
                return Some(bytes);
            }
            let stalled = pd.phase == Phase::Connecting && pd.internal.is_empty();
            let (command, owner) = if pd.phase == Phase::Offline || stalled {
                pd.phase = Phase::Connecting;
                pd.sqn = 0;
                pd.session = None;
                pd.handshake = None;
                pd.internal.clear();
                pd.try_default = false;
                (Command::Id, None)
            } else if let Some(c) = pd.internal.pop_front() {
                (c, None)
            } else {
                match pd.queue.pop_front() {
                    Some((c, ticket)) => (c, Some(ticket)),
                    None => (Command::Poll, None),
                }
            };
            self.next = (i + 1) % n;
            return self.send(i, command, owner, now);
        }
        None
    }

    fn send(
        &mut self,
        i: usize,
        command: Command,
        owner: Option<Ticket>,
        now: Instant,
    ) -> Option<Vec<u8>> {
        let pd = &mut self.pds[i];
        let sqn = pd.sqn;
        let mut f = Frame::new(
            pd.setup.address,
            false,
            sqn,
            command.code(),
            command.encode_data(),
        );
        let mut session = pd.session.as_mut();
        match &command {
            Command::Challenge { .. } => {
                let default = pd.handshake.as_ref().is_some_and(|h| h.default_key);
                f.scb = Some(Scb {
                    kind: scs::SCS_11,
                    data: vec![u8::from(!default)],
                });
                session = None;
            }
            Command::ServerCryptogram { .. } => {
                let default = pd.handshake.as_ref().is_some_and(|h| h.default_key);
                f.scb = Some(Scb {
                    kind: scs::SCS_13,
                    data: vec![u8::from(!default)],
                });
                session = None;
            }
            _ => {}
        }
        match seal(f, session, true) {
            Ok(bytes) => {
                let timeout = if matches!(command, Command::Transparent(XwrRequest::Apdu { .. })) {
                    self.cfg.transparent_timeout
                } else {
                    self.cfg.reply_timeout
                };
                self.in_flight = Some(InFlight {
                    timeout,
                    pd: i,
                    command,
                    owner,
                    bytes: bytes.clone(),
                    sqn,
                    sent: now,
                    deadline: now + timeout,
                    attempts: 0,
                    extended: 0,
                });
                Some(bytes)
            }
            Err(e) => {
                if let Some(ticket) = owner {
                    let address = self.pds[i].setup.address;
                    self.events.push_back(CpEvent::Abandoned {
                        address,
                        command: command.code(),
                        ticket,
                    });
                }
                self.refuse(i, Refusal::Mac(e), now, None);
                None
            }
        }
    }

    /// Handles the reply timeout: retransmits (returning the bytes) or declares
    /// the device offline.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Vec<u8>> {
        let f = self.in_flight.as_mut()?;
        if now < f.deadline {
            return None;
        }
        self.decoder.clear();
        if f.attempts < self.cfg.retries {
            f.attempts += 1;
            f.sent = now;
            f.deadline = now + f.timeout;
            return Some(f.bytes.clone());
        }
        let f = self.in_flight.take()?;
        self.go_offline(f.pd, OfflineReason::NoReply, now, Some(&f));
        None
    }

    fn go_offline(&mut self, i: usize, reason: OfflineReason, now: Instant, f: Option<&InFlight>) {
        let retry = self.cfg.offline_retry;
        let pd = &mut self.pds[i];
        let address = pd.setup.address;
        let was = pd.phase;
        pd.phase = Phase::Offline;
        pd.session = None;
        pd.handshake = None;
        pd.internal.clear();
        pd.due = Some(now + retry);
        let parked = pd.busy.take();
        let mut abandoned: Vec<(u8, Ticket)> =
            pd.queue.drain(..).map(|(c, t)| (c.code(), t)).collect();
        if let Some(f) = f.or(parked.as_ref()) {
            if let Some(ticket) = f.owner {
                abandoned.insert(0, (f.command.code(), ticket));
            }
        }
        for (command, ticket) in abandoned {
            self.events.push_back(CpEvent::Abandoned {
                address,
                command,
                ticket,
            });
        }
        if was != Phase::Offline {
            self.events.push_back(CpEvent::Offline { address, reason });
        }
    }

    fn refuse(&mut self, i: usize, reason: Refusal, now: Instant, f: Option<&InFlight>) {
        let address = self.pds[i].setup.address;
        self.events.push_back(CpEvent::Refused { address, reason });
        self.go_offline(i, OfflineReason::Refused, now, f);
    }

    /// Tells the panel the last packet has left the line: the reply timeout
    /// runs from the end of the command, which on a slow line is well after
    /// [`ControlPanel::poll_transmit`] handed it out.
    pub fn transmitted(&mut self, now: Instant) {
        if let Some(f) = self.in_flight.as_mut() {
            f.sent = now;
            f.deadline = now + f.timeout;
        }
    }

    /// Feeds bytes heard on the line.
    pub fn receive(&mut self, bytes: &[u8], now: Instant) {
        self.decoder.push(bytes);
        while let Some(r) = self.decoder.next() {
            match r {
                Ok(frame) => self.on_frame(frame, now),
                Err(e) => self.events.push_back(CpEvent::BadFrame(e)),
            }
        }
        // A reply is arriving: give the rest of it time to come in (a long
        // reply on a slow line arrives over several reply timeouts). Only
        // for as many bytes as two of the longest packets: a trickle of noise
        // must not hold the line for ever.
        if self.decoder.pending() > 0 {
            if let Some(f) = self
                .in_flight
                .as_mut()
                .filter(|f| f.extended < 2 * MAX_PACKET)
            {
                f.extended += bytes.len();
                f.deadline = f.deadline.max(now + self.cfg.reply_timeout);
            }
        }
    }

    fn on_frame(&mut self, frame: Frame, now: Instant) {
        let Some(f) = self.in_flight.as_ref() else {
            return;
        };
        let i = f.pd;
        if frame.reply
            && frame.address == self.pds[i].setup.address
            && frame.code == reply::BUSY
            && frame.scb.is_none()
            && frame.data.is_empty()
            && (frame.sqn == 0 || frame.sqn == f.sqn)
        {
            // osdp_BUSY is always plaintext and may carry sequence number 0:
            // send the same packet again later, still on behalf of its owner.
            let Some(f) = self.in_flight.take() else {
                return;
            };
            let pd = &mut self.pds[i];
            pd.busy = Some(f);
            pd.due = Some(now + self.cfg.poll_interval);
            return;
        }
        if !frame.reply || frame.address != self.pds[i].setup.address || frame.sqn != f.sqn {
            // Our own echo, another device's late reply, or a stale packet.
            return;
        }
        let Some(f) = self.in_flight.take() else {
            return;
        };
        let data = match open(&frame, self.pds[i].session.as_mut(), false) {
            Ok(d) => d,
            Err(LinkError::PlaintextInSession) if frame.code == reply::NAK => {
                // A device that lost its session (a restart) can only answer
                // in plaintext. Nothing it says is trusted; the session is
                // set up again from the start.
                self.go_offline(i, OfflineReason::SessionLost, now, Some(&f));
                self.pds[i].due = Some(now);
                return;
            }
            Err(e) => return self.refuse(i, Refusal::Mac(e), now, Some(&f)),
        };
        // A handshake reply only answers the panel's own handshake command.
        let handshake_block = match f.command {
            Command::Challenge { .. } => Some(scs::SCS_12),
            Command::ServerCryptogram { .. } => Some(scs::SCS_14),
            _ => None,
        };
        if let Some(kind) = frame.scb.as_ref().map(|s| s.kind) {
            if !(scs::SCS_15..=scs::SCS_18).contains(&kind) && handshake_block != Some(kind) {
                let e = LinkError::MisplacedBlock {
                    kind,
                    code: frame.code,
                };
                return self.refuse(i, Refusal::Mac(e), now, Some(&f));
            }
        }
        let address = self.pds[i].setup.address;
        let connecting = self.pds[i].phase != Phase::Online;
        let reply = match Reply::decode(frame.code, &data) {
            Ok(r) => r,
            Err(error) => {
                self.events.push_back(CpEvent::BadReply { address, error });
                if let Some(ticket) = f.owner {
                    self.events.push_back(CpEvent::Abandoned {
                        address,
                        command: f.command.code(),
                        ticket,
                    });
                }
                if connecting {
                    return self.connect_failed(i, &f, frame.code, now);
                }
                self.advance(i, &f, now);
                return;
            }
        };
        if reply == Reply::Busy {
            // A BUSY inside the session (with a MAC): ask again later.
            let pd = &mut self.pds[i];
            pd.busy = Some(f);
            pd.due = Some(now + self.cfg.poll_interval);
            return;
        }
        if reply == Reply::Nak(NakReason::SequenceNumber) {
            return self.go_offline(i, OfflineReason::SequenceRejected, now, Some(&f));
        }
        if reply == Reply::Nak(NakReason::ScConditions) && self.pds[i].session.is_some() {
            self.go_offline(i, OfflineReason::SessionLost, now, Some(&f));
            // Reconnect at once rather than after the offline back-off.
            self.pds[i].due = Some(now);
            return;
        }
        self.advance(i, &f, now);
        if matches!(f.command, Command::Poll) {
            self.follow_up(i, &reply, now);
        }
        self.on_reply(i, f, reply, &frame, now);
    }

    fn connect_failed(&mut self, i: usize, f: &InFlight, reply: u8, now: Instant) {
        let reason = OfflineReason::UnexpectedReply {
            command: f.command.code(),
            reply,
        };
        self.go_offline(i, reason, now, Some(f));
    }

    /// The device answered `f`: the next sequence number, and the next
    /// poll one poll interval after `f` went out (at once if that is past).
    fn advance(&mut self, i: usize, f: &InFlight, now: Instant) {
        let pd = &mut self.pds[i];
        pd.sqn = next_sqn(pd.sqn);
        pd.due = Some((f.sent + self.cfg.poll_interval).max(now));
    }

    /// A poll answered with `reply`: a report (anything but `osdp_ACK` or
    /// a NAK) may be followed by more the device holds, so the device is
    /// polled again at once, [`FOLLOW_UPS`] times in a row at most; after
    /// that it keeps the poll interval until it answers a poll with
    /// `osdp_ACK` again (a device that reports on every poll does not take
    /// the bus).
    fn follow_up(&mut self, i: usize, reply: &Reply, now: Instant) {
        let pd = &mut self.pds[i];
        if matches!(reply, Reply::Ack | Reply::Nak(_)) || pd.phase != Phase::Online {
            pd.reports = 0;
        } else if pd.reports < FOLLOW_UPS {
            pd.reports += 1;
            pd.due = Some(now);
        }
    }

    fn start_handshake(&mut self, i: usize) -> Result<(), Refusal> {
        let pd = &mut self.pds[i];
        let default_key = pd.try_default && pd.setup.install_mode;
        let key = if default_key {
            Key::default_key()
        } else {
            match &pd.setup.scbk {
                Some(k) => k.clone(),
                None => return Ok(()),
            }
        };
        let rnd_a: [u8; 8] = random();
        let keys = SessionKeys::derive(&key, &rnd_a).map_err(|e| Refusal::Mac(e.into()))?;
        pd.session = None;
        pd.handshake = Some(Handshake {
            keys,
            rnd_a,
            server: None,
            default_key,
        });
        pd.internal.push_back(Command::Challenge { rnd_a });
        Ok(())
    }

    fn online(&mut self, i: usize) {
        let pd = &mut self.pds[i];
        pd.phase = Phase::Online;
        self.events.push_back(CpEvent::Online {
            address: pd.setup.address,
            id: pd.id,
            capabilities: pd.caps.clone(),
            secure: pd.session.is_some(),
        });
    }

    fn on_reply(&mut self, i: usize, f: InFlight, reply: Reply, frame: &Frame, now: Instant) {
        let address = self.pds[i].setup.address;
        match (&f.command, reply) {
            (Command::Id, Reply::Id(id)) if f.owner.is_none() => {
                self.pds[i].id = id;
                self.pds[i].internal.push_back(Command::Cap);
            }
            (Command::Cap, Reply::Capabilities(caps)) if f.owner.is_none() => {
                self.pds[i].caps = caps;
                if self.pds[i].setup.scbk.is_some() {
                    if let Err(r) = self.start_handshake(i) {
                        self.refuse(i, r, now, None);
                    }
                } else {
                    self.online(i);
                }
            }
            (Command::Challenge { .. }, reply) if f.owner.is_none() => {
                let Reply::ClientCryptogram {
                    rnd_b, cryptogram, ..
                } = reply
                else {
                    let r = match reply {
                        Reply::Nak(n) => Refusal::HandshakeRefused(n),
                        other => Refusal::HandshakeReply(other.code()),
                    };
                    if self.fall_back_to_default_key(i, now) {
                        return;
                    }
                    return self.refuse(i, r, now, None);
                };
                let pd = &mut self.pds[i];
                let Some(h) = pd.handshake.as_mut() else {
                    return self.refuse(i, Refusal::Cryptogram, now, None);
                };
                let expected = h.keys.client_cryptogram(&h.rnd_a, &rnd_b);
                let server = h.keys.server_cryptogram(&h.rnd_a, &rnd_b);
                let sel_ok = frame.scb.as_ref().is_some_and(|s| s.kind == scs::SCS_12);
                match (expected, server) {
                    (Ok(e), Ok(s)) if sel_ok && sc::ct_eq(&e, &cryptogram) => {
                        h.server = Some(s);
                        pd.internal
                            .push_back(Command::ServerCryptogram { cryptogram: s });
                    }
                    _ => {
                        if !self.fall_back_to_default_key(i, now) {
                            self.refuse(i, Refusal::Cryptogram, now, None);
                        }
                    }
                }
            }
            (Command::ServerCryptogram { .. }, reply) if f.owner.is_none() => {
                let Reply::InitialRmac(rmac) = reply else {
                    let r = match reply {
                        Reply::Nak(n) => Refusal::HandshakeRefused(n),
                        other => Refusal::HandshakeReply(other.code()),
                    };
                    return self.refuse(i, r, now, None);
                };
                let pd = &mut self.pds[i];
                let Some(h) = pd.handshake.take() else {
                    return self.refuse(i, Refusal::Cryptogram, now, None);
                };
                let ok = h
                    .server
                    .and_then(|s| h.keys.initial_rmac(&s).ok())
                    .is_some_and(|e| sc::ct_eq(&e, &rmac))
                    && frame
                        .scb
                        .as_ref()
                        .is_some_and(|s| s.kind == scs::SCS_14 && s.data.first() == Some(&1));
                if !ok {
                    return self.refuse(i, Refusal::Cryptogram, now, None);
                }
                pd.session = Some(Session::new(h.keys, rmac));
                if h.default_key {
                    let key = pd.setup.scbk.clone().map(|k| k.0).unwrap_or_default();
                    pd.internal.push_back(Command::KeySet { key });
                    return;
                }
                if pd.setup.install_mode {
                    // The device holds the configured key (the answer to an
                    // earlier KEYSET may have been lost): install mode is over.
                    pd.setup.install_mode = false;
                    pd.try_default = false;
                    self.events.push_back(CpEvent::KeyInstalled { address });
                }
                if self.pds[i].phase != Phase::Online {
                    self.online(i);
                }
            }
            (Command::KeySet { .. }, reply) if f.owner.is_none() => match reply {
                Reply::Ack => {
                    let pd = &mut self.pds[i];
                    pd.try_default = false;
                    pd.setup.install_mode = false;
                    self.events.push_back(CpEvent::KeyInstalled { address });
                    if let Err(r) = self.start_handshake(i) {
                        self.refuse(i, r, now, None);
                    }
                }
                Reply::Nak(n) => self.refuse(i, Refusal::KeySetRefused(n), now, None),
                other => self.refuse(i, Refusal::HandshakeReply(other.code()), now, None),
            },
            (_, reply) if connecting_reply(self.pds[i].phase, f.owner) => {
                self.connect_failed(i, &f, reply.code(), now);
            }
            (command, reply) => {
                let owner_keyset = matches!(command, Command::KeySet { .. }) && f.owner.is_some();
                if owner_keyset {
                    if let (Command::KeySet { key }, Reply::Ack) = (command, &reply) {
                        // The device now holds this key: restart the session with it.
                        self.pds[i].setup.scbk = Some(Key(*key));
                        self.events.push_back(CpEvent::KeyInstalled { address });
                        if let Err(r) = self.start_handshake(i) {
                            return self.refuse(i, r, now, Some(&f));
                        }
                    }
                }
                self.report(i, f.owner, command.code(), reply);
            }
        }
    }

    /// In install mode, after the configured key failed: tries SCBK-D.
    /// Returns false when that is not possible.
    fn fall_back_to_default_key(&mut self, i: usize, now: Instant) -> bool {
        let pd = &mut self.pds[i];
        if !pd.setup.install_mode || pd.try_default || pd.phase == Phase::Online {
            return false;
        }
        pd.try_default = true;
        if let Err(r) = self.start_handshake(i) {
            self.refuse(i, r, now, None);
        }
        true
    }

    fn report(&mut self, i: usize, owner: Option<Ticket>, command: u8, reply: Reply) {
        let pd = &self.pds[i];
        let unsecured = pd.setup.scbk.is_some() && pd.session.is_none() && owner.is_none();
        if pd.phase != Phase::Online || unsecured {
            // Device data is only taken from a connected device, and from a
            // keyed one only inside its secure session.
            return;
        }
        let address = pd.setup.address;
        let event = match reply {
            Reply::Raw(card) => Some(CpEvent::Card { address, card }),
            Reply::Formatted { reader, text, .. } => Some(CpEvent::CardText {
                address,
                reader,
                text,
            }),
            Reply::Keypad { reader, keys } => Some(CpEvent::Keypad {
                address,
                reader,
                keys,
            }),
            Reply::Transparent(XrdReply::CardPresent { reader, status }) if owner.is_none() => {
                Some(CpEvent::CardPresence {
                    address,
                    reader,
                    present: status != 0,
                })
            }
            Reply::LocalStatus { tamper, power } if owner.is_none() => Some(CpEvent::LocalStatus {
                address,
                tamper,
                power,
            }),
            Reply::InputStatus(inputs) if owner.is_none() => {
                Some(CpEvent::InputStatus { address, inputs })
            }
            reply => owner.map(|ticket| CpEvent::Completed {
                address,
                command,
                ticket,
                reply,
            }),
        };
        self.events.extend(event);
    }
}
