//! The peripheral device (reader) side, sans-I/O: feed it the bytes heard on
//! the bus, send back the bytes it returns. Its owner queues card reads,
//! keypad input and status changes, and receives output, LED, buzzer, key and
//! transparent-mode requests through [`PdApp`].

use std::collections::VecDeque;

use super::codec::{scs, Frame, FrameDecoder, FrameError, Scb, BROADCAST};
use super::msg::{
    capability, BuzzerControl, Capability, Command, LedControl, MsgError, NakReason, OutputControl,
    PdId, RawCard, Reply, XrdReply, XwrRequest,
};
use super::sc::{self, Key, Session, SessionKeys};
use super::{next_sqn, open, random, seal, LinkError};

/// What the device's owner does with the panel's requests. Every method has a
/// do-nothing default.
pub trait PdApp {
    /// `osdp_OUT`: drive an output (a lock relay).
    fn output(&mut self, _control: &OutputControl) {}
    /// `osdp_LED`.
    fn led(&mut self, _control: &LedControl) {}
    /// `osdp_BUZ`.
    fn buzzer(&mut self, _control: &BuzzerControl) {}
    /// `osdp_COMSET`: the new address and baud rate take effect after the reply.
    fn comset(&mut self, _address: u8, _baud: u32) {}
    /// `osdp_KEYSET`: persist the new secure channel base key. Return false if
    /// it could not be stored; the panel is then told no.
    fn keyset(&mut self, _key: &Key) -> bool {
        true
    }
    /// `osdp_XWR`: transparent smart-card requests. `None` answers with a NAK.
    fn transparent(&mut self, _request: &XwrRequest) -> Option<XrdReply> {
        None
    }
    /// `osdp_ISTAT`: one byte per input.
    fn inputs(&mut self) -> Vec<u8> {
        Vec::new()
    }
    /// `osdp_OSTAT`: one byte per output.
    fn outputs(&mut self) -> Vec<u8> {
        Vec::new()
    }
}

/// A [`PdApp`] that ignores everything.
pub struct NoApp;
impl PdApp for NoApp {}

/// How the device presents itself.
#[derive(Debug, Clone)]
pub struct PdConfig {
    pub address: u8,
    pub id: PdId,
    pub capabilities: Vec<Capability>,
    /// The secure channel base key, if one is installed.
    pub scbk: Option<Key>,
    /// Accept SCBK-D until a KEYSET installs a key.
    pub install_mode: bool,
    /// Refuse everything but ID, CAP and the handshake until secured. A
    /// device with a key (or in install mode) always does, whatever this says:
    /// otherwise a plaintext command with sequence number 0 would end the
    /// session and be obeyed.
    pub require_secure: bool,
}

impl PdConfig {
    /// A reader with LED, buzzer, one output, transparent smart-card support and
    /// the secure channel.
    pub fn reader(address: u8, id: PdId) -> PdConfig {
        PdConfig {
            address,
            id,
            capabilities: vec![
                Capability {
                    function: capability::OUTPUT_CONTROL,
                    compliance: 1,
                    items: 1,
                },
                Capability {
                    function: capability::CARD_FORMAT,
                    compliance: 1,
                    items: 0,
                },
                Capability {
                    function: capability::READER_LED,
                    compliance: 1,
                    items: 1,
                },
                Capability {
                    function: capability::READER_AUDIBLE,
                    compliance: 1,
                    items: 1,
                },
                Capability {
                    function: capability::CHECK_CHARACTER,
                    compliance: 1,
                    items: 0,
                },
                Capability {
                    function: capability::COMMUNICATION_SECURITY,
                    compliance: 1,
                    items: 1,
                },
                Capability {
                    function: capability::RECEIVE_BUFFER,
                    compliance: 0,
                    items: 4,
                },
                Capability {
                    function: capability::SMART_CARD,
                    compliance: 1,
                    items: 0,
                },
                Capability {
                    function: capability::READERS,
                    compliance: 1,
                    items: 0,
                },
            ],
            scbk: None,
            install_mode: false,
            require_secure: false,
        }
    }
}

/// Things the device noticed, for its owner's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PdEvent {
    /// The secure channel is up (`default_key` when SCBK-D was used).
    Secured { default_key: bool },
    /// A KEYSET installed a new key; install mode is over.
    KeyInstalled,
    /// The panel started over with sequence number 0.
    Reset,
    /// A command failed its MAC check or was plaintext inside the session; the
    /// session was dropped.
    SecurityFailure(LinkError),
    /// The panel's cryptogram did not match (it holds another key).
    CryptogramMismatch,
    /// A damaged or malformed packet was discarded.
    BadFrame(FrameError),
    /// A command's data did not decode; it was answered with a NAK.
    BadCommand(MsgError),
}

struct Handshake {
    keys: SessionKeys,
    rnd_a: [u8; 8],
    rnd_b: [u8; 8],
    default_key: bool,
}

/// The PD state machine.
pub struct PeripheralDevice {
    cfg: PdConfig,
    /// Answer with a CRC (true) or a checksum, as the panel asked.
    crc: bool,
    decoder: FrameDecoder,
    session: Option<Session>,
    handshake: Option<Handshake>,
    last_sqn: Option<u8>,
    last_reply: Option<Vec<u8>>,
    reports: VecDeque<Reply>,
    local: (bool, bool),
    local_reported: (bool, bool),
    /// The inputs set by the owner ([`Self::set_inputs`]) and the last
    /// state the panel was told.
    inputs: Option<Vec<u8>>,
    inputs_reported: Option<Vec<u8>>,
    events: VecDeque<PdEvent>,
}

impl PeripheralDevice {
    pub fn new(cfg: PdConfig) -> PeripheralDevice {
        PeripheralDevice {
            cfg,
            crc: true,
            decoder: FrameDecoder::new(),
            session: None,
            handshake: None,
            last_sqn: None,
            last_reply: None,
            reports: VecDeque::new(),
            local: (false, false),
            local_reported: (false, false),
            inputs: None,
            inputs_reported: None,
            events: VecDeque::new(),
        }
    }

    /// The device's address.
    pub fn address(&self) -> u8 {
        self.cfg.address
    }

    /// True while a secure session is established.
    pub fn is_secure(&self) -> bool {
        self.session.is_some()
    }

    /// The installed key (after a KEYSET, the new one).
    pub fn scbk(&self) -> Option<&Key> {
        self.cfg.scbk.as_ref()
    }

    /// True until a KEYSET ends install mode.
    pub fn install_mode(&self) -> bool {
        self.cfg.install_mode
    }

    /// Queues a card read for the next poll.
    pub fn card_read(&mut self, card: RawCard) {
        self.reports.push_back(Reply::Raw(card));
    }

    /// Queues card data as ASCII text (`osdp_FMT`).
    pub fn card_text(&mut self, reader: u8, text: &[u8]) {
        self.reports.push_back(Reply::Formatted {
            reader,
            direction: 0,
            text: text.to_vec(),
        });
    }

    /// Queues a transparent-mode card presence report (`osdp_XRD`
    /// `osdp_PR01PRES`) for the next poll: how a reader in extended mode 1
    /// tells its panel that a card arrived on `reader` (or left it), so the
    /// panel can start its APDU exchange.
    pub fn card_presence(&mut self, reader: u8, present: bool) {
        self.reports
            .push_back(Reply::Transparent(XrdReply::CardPresent {
                reader,
                status: u8::from(present),
            }));
    }

    /// Queues keypad input (ASCII digits, `*` as 0x7F, `#` as 0x0D).
    pub fn keypad(&mut self, reader: u8, keys: &[u8]) {
        self.reports.push_back(Reply::Keypad {
            reader,
            keys: keys.to_vec(),
        });
    }

    /// Sets the tamper and power-failure state; a change is reported on the next poll.
    pub fn set_local_status(&mut self, tamper: bool, power: bool) {
        self.local = (tamper, power);
    }

    /// Sets the inputs' state (one byte per input: 0 inactive, 1 active),
    /// as a door's position switch, exit button or tamper switch drive
    /// them: `osdp_ISTAT` is answered with it from now on (instead of
    /// [`PdApp::inputs`]), and a change is reported unsolicited
    /// (`osdp_ISTATR`) on the next poll.
    pub fn set_inputs(&mut self, inputs: Vec<u8>) {
        self.inputs = Some(inputs);
    }

    /// Takes the next event.
    pub fn poll_event(&mut self) -> Option<PdEvent> {
        self.events.pop_front()
    }

    /// Feeds received bytes; returns the bytes to transmit (empty when the
    /// packets were not for this device or incomplete).
    pub fn receive(&mut self, bytes: &[u8], app: &mut dyn PdApp) -> Vec<u8> {
        self.decoder.push(bytes);
        let mut out = Vec::new();
        while let Some(r) = self.decoder.next() {
            match r {
                Ok(frame) => {
                    if let Some(reply) = self.handle(frame, app) {
                        out.extend_from_slice(&reply);
                    }
                }
                Err(e) => self.events.push_back(PdEvent::BadFrame(e)),
            }
        }
        out
    }

    fn handle(&mut self, frame: Frame, app: &mut dyn PdApp) -> Option<Vec<u8>> {
        if frame.reply || (frame.address != self.cfg.address && frame.address != BROADCAST) {
            return None;
        }
        let sqn = frame.sqn;
        self.crc = frame.crc;
        if sqn == 0 {
            if self.last_sqn.is_some() {
                self.events.push_back(PdEvent::Reset);
            }
            self.session = None;
            self.handshake = None;
            self.last_reply = None;
        } else if let Some(last) = self.last_sqn {
            if last == sqn {
                // The panel did not hear our reply: send it again unchanged.
                if let Some(r) = &self.last_reply {
                    return Some(r.clone());
                }
            } else if sqn != next_sqn(last) {
                return self.finish(sqn, Reply::Nak(NakReason::SequenceNumber), None, false);
            }
        }
        let reply = self.process(&frame, app);
        let (reply, scb, plain) = reply;
        self.finish(sqn, reply, scb, plain)
    }

    /// Builds, remembers and returns the reply. `plain` forces an unsecured reply.
    fn finish(&mut self, sqn: u8, reply: Reply, scb: Option<Scb>, plain: bool) -> Option<Vec<u8>> {
        let mut f = Frame::new(
            self.cfg.address,
            true,
            sqn,
            reply.code(),
            reply.encode_data(),
        );
        f.crc = self.crc;
        f.scb = scb;
        let session = if plain { None } else { self.session.as_mut() };
        match seal(f, session, false) {
            Ok(bytes) => {
                self.last_sqn = Some(sqn);
                self.last_reply = Some(bytes.clone());
                Some(bytes)
            }
            Err(e) => {
                self.events.push_back(PdEvent::SecurityFailure(e));
                None
            }
        }
    }

    fn sc_capable(&self) -> bool {
        self.cfg.scbk.is_some() || self.cfg.install_mode
    }

    fn process(&mut self, frame: &Frame, app: &mut dyn PdApp) -> (Reply, Option<Scb>, bool) {
        let nak = |r| (Reply::Nak(r), None, false);
        if frame.scb.is_some() && !self.sc_capable() {
            return (Reply::Nak(NakReason::ScUnsupported), None, true);
        }
        let data = match open(frame, self.session.as_mut(), true) {
            Ok(d) => d,
            Err(e) => {
                self.session = None;
                self.events.push_back(PdEvent::SecurityFailure(e));
                return (Reply::Nak(NakReason::ScConditions), None, true);
            }
        };
        let command = match Command::decode(frame.code, &data) {
            Ok(c) => c,
            Err(e) => {
                let reason = match e {
                    MsgError::UnknownCommand(_) => NakReason::UnknownCommand,
                    MsgError::Length { .. } => NakReason::CommandLength,
                    MsgError::BadValue { .. } => NakReason::Record,
                    MsgError::UnknownReply(_) => NakReason::UnknownCommand,
                };
                self.events.push_back(PdEvent::BadCommand(e));
                return nak(reason);
            }
        };
        let handshake_cmd = matches!(
            command,
            Command::Id
                | Command::Cap
                | Command::Challenge { .. }
                | Command::ServerCryptogram { .. }
        );
        let require_secure = self.cfg.require_secure || self.sc_capable();
        if require_secure && self.session.is_none() && !handshake_cmd {
            return nak(NakReason::ScConditions);
        }
        match command {
            Command::Poll => {
                if let Some(r) = self.reports.pop_front() {
                    return (r, None, false);
                }
                if self.local != self.local_reported {
                    self.local_reported = self.local;
                    return (
                        Reply::LocalStatus {
                            tamper: self.local.0,
                            power: self.local.1,
                        },
                        None,
                        false,
                    );
                }
                if self.inputs.is_some() && self.inputs != self.inputs_reported {
                    self.inputs_reported.clone_from(&self.inputs);
                    let inputs = self.inputs.clone().unwrap_or_default();
                    return (Reply::InputStatus(inputs), None, false);
                }
                (Reply::Ack, None, false)
            }
            Command::Id => (Reply::Id(self.cfg.id), None, false),
            Command::Cap => (
                Reply::Capabilities(self.cfg.capabilities.clone()),
                None,
                false,
            ),
            Command::LocalStatus => {
                self.local_reported = self.local;
                (
                    Reply::LocalStatus {
                        tamper: self.local.0,
                        power: self.local.1,
                    },
                    None,
                    false,
                )
            }
            Command::InputStatus => match &self.inputs {
                Some(inputs) => {
                    self.inputs_reported = Some(inputs.clone());
                    (Reply::InputStatus(inputs.clone()), None, false)
                }
                None => (Reply::InputStatus(app.inputs()), None, false),
            },
            Command::OutputStatus => (Reply::OutputStatus(app.outputs()), None, false),
            Command::Output(recs) => {
                recs.iter().for_each(|r| app.output(r));
                (Reply::Ack, None, false)
            }
            Command::Led(recs) => {
                recs.iter().for_each(|r| app.led(r));
                (Reply::Ack, None, false)
            }
            Command::Buzzer(b) => {
                app.buzzer(&b);
                (Reply::Ack, None, false)
            }
            Command::ComSet { address, baud } => {
                app.comset(address, baud);
                (Reply::Com { address, baud }, None, false)
            }
            Command::KeySet { key } => {
                if self.session.is_none() {
                    return nak(NakReason::ScConditions);
                }
                let key = Key(key);
                if !app.keyset(&key) {
                    return nak(NakReason::Record);
                }
                self.cfg.scbk = Some(key);
                self.cfg.install_mode = false;
                self.events.push_back(PdEvent::KeyInstalled);
                (Reply::Ack, None, false)
            }
            Command::Challenge { rnd_a } => self.challenge(frame, rnd_a),
            Command::ServerCryptogram { cryptogram } => self.server_cryptogram(frame, cryptogram),
            Command::Transparent(req) => match app.transparent(&req) {
                Some(x) => (Reply::Transparent(x), None, false),
                None => nak(NakReason::UnknownCommand),
            },
        }
    }

    fn challenge(&mut self, frame: &Frame, rnd_a: [u8; 8]) -> (Reply, Option<Scb>, bool) {
        self.session = None;
        self.handshake = None;
        let sel = frame
            .scb
            .as_ref()
            .filter(|s| s.kind == scs::SCS_11)
            .and_then(|s| s.data.first().copied());
        let key = match sel {
            Some(0) if self.cfg.install_mode => Key::default_key(),
            Some(1) => match &self.cfg.scbk {
                Some(k) => k.clone(),
                None => return (Reply::Nak(NakReason::ScConditions), None, true),
            },
            _ => return (Reply::Nak(NakReason::ScConditions), None, true),
        };
        let rnd_b: [u8; 8] = random();
        let Ok(keys) = SessionKeys::derive(&key, &rnd_a) else {
            return (Reply::Nak(NakReason::ScConditions), None, true);
        };
        let Ok(cryptogram) = keys.client_cryptogram(&rnd_a, &rnd_b) else {
            return (Reply::Nak(NakReason::ScConditions), None, true);
        };
        let sel = sel.unwrap_or(1);
        self.handshake = Some(Handshake {
            keys,
            rnd_a,
            rnd_b,
            default_key: sel == 0,
        });
        (
            Reply::ClientCryptogram {
                cuid: self.cfg.id.cuid(),
                rnd_b,
                cryptogram,
            },
            Some(Scb {
                kind: scs::SCS_12,
                data: vec![sel],
            }),
            true,
        )
    }

    fn server_cryptogram(&mut self, frame: &Frame, got: [u8; 16]) -> (Reply, Option<Scb>, bool) {
        let Some(h) = self.handshake.take() else {
            // Only the second step of a handshake: inside a session it ends it.
            if self.session.take().is_some() {
                self.events
                    .push_back(PdEvent::SecurityFailure(LinkError::MisplacedBlock {
                        kind: scs::SCS_13,
                        code: frame.code,
                    }));
            }
            return (Reply::Nak(NakReason::ScConditions), None, true);
        };
        if frame.scb.as_ref().map(|s| s.kind) != Some(scs::SCS_13) {
            return (Reply::Nak(NakReason::ScConditions), None, true);
        }
        let expected = h.keys.server_cryptogram(&h.rnd_a, &h.rnd_b);
        let ok = expected.as_ref().is_ok_and(|e| sc::ct_eq(e, &got));
        let rmac = if ok {
            h.keys.initial_rmac(&got).ok()
        } else {
            None
        };
        let Some(rmac) = rmac else {
            self.events.push_back(PdEvent::CryptogramMismatch);
            return (Reply::Nak(NakReason::ScConditions), None, true);
        };
        let default_key = h.default_key;
        self.session = Some(Session::new(h.keys, rmac));
        self.events.push_back(PdEvent::Secured { default_key });
        (
            Reply::InitialRmac(rmac),
            Some(Scb {
                kind: scs::SCS_14,
                data: vec![0x01],
            }),
            true,
        )
    }
}
