//! Typed OSDP commands (CP → PD) and replies (PD → CP): the code byte and the
//! plaintext data field. Every decoder checks lengths before reading, so a
//! short or oversized data field is a [`MsgError`], never a panic.

use thiserror::Error;

/// Command codes.
pub mod cmd {
    pub const POLL: u8 = 0x60;
    pub const ID: u8 = 0x61;
    pub const CAP: u8 = 0x62;
    pub const LSTAT: u8 = 0x64;
    pub const ISTAT: u8 = 0x65;
    pub const OSTAT: u8 = 0x66;
    pub const OUT: u8 = 0x68;
    pub const LED: u8 = 0x69;
    pub const BUZ: u8 = 0x6A;
    pub const COMSET: u8 = 0x6E;
    pub const KEYSET: u8 = 0x75;
    pub const CHLNG: u8 = 0x76;
    pub const SCRYPT: u8 = 0x77;
    pub const XWR: u8 = 0xA1;
}

/// Reply codes.
pub mod reply {
    pub const ACK: u8 = 0x40;
    pub const NAK: u8 = 0x41;
    pub const PDID: u8 = 0x45;
    pub const PDCAP: u8 = 0x46;
    pub const LSTATR: u8 = 0x48;
    pub const ISTATR: u8 = 0x49;
    pub const OSTATR: u8 = 0x4A;
    pub const RAW: u8 = 0x50;
    pub const FMT: u8 = 0x51;
    pub const KEYPAD: u8 = 0x53;
    pub const COM: u8 = 0x54;
    pub const CCRYPT: u8 = 0x76;
    pub const RMAC_I: u8 = 0x78;
    pub const BUSY: u8 = 0x79;
    pub const XRD: u8 = 0xB1;
}

/// Why a data field does not decode.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MsgError {
    #[error("{what}: data is {got} bytes, expected {expected}")]
    Length {
        what: &'static str,
        expected: &'static str,
        got: usize,
    },
    #[error("unknown command code {0:#04x}")]
    UnknownCommand(u8),
    #[error("unknown reply code {0:#04x}")]
    UnknownReply(u8),
    #[error("{what}: field has value {value:#x}, which the standard does not define")]
    BadValue { what: &'static str, value: u32 },
}

fn need(what: &'static str, expected: &'static str, ok: bool, got: usize) -> Result<(), MsgError> {
    if ok {
        Ok(())
    } else {
        Err(MsgError::Length {
            what,
            expected,
            got,
        })
    }
}

/// `osdp_OUT` record: one output's control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputControl {
    pub output: u8,
    /// 0 nop, 1 permanent off, 2 permanent on, 3 temporary off, 4 temporary on
    /// (then revert), 5/6 temporary after the current timer.
    pub control_code: u8,
    /// Temporary timer in units of 100 ms.
    pub timer: u16,
}

/// One half (temporary or permanent) of an LED record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LedState {
    pub control_code: u8,
    /// On time in units of 100 ms.
    pub on_time: u8,
    /// Off time in units of 100 ms.
    pub off_time: u8,
    pub on_color: u8,
    pub off_color: u8,
}

/// `osdp_LED` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LedControl {
    pub reader: u8,
    pub led: u8,
    pub temporary: LedState,
    /// Temporary timer in units of 100 ms.
    pub timer: u16,
    pub permanent: LedState,
}

/// LED colours.
pub mod color {
    pub const BLACK: u8 = 0;
    pub const RED: u8 = 1;
    pub const GREEN: u8 = 2;
    pub const AMBER: u8 = 3;
    pub const BLUE: u8 = 4;
}

/// `osdp_BUZ`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuzzerControl {
    pub reader: u8,
    /// 0 no tone, 1 off, 2 default tone.
    pub tone: u8,
    /// On time in units of 100 ms.
    pub on_time: u8,
    /// Off time in units of 100 ms.
    pub off_time: u8,
    /// Repetitions; 0 means forever.
    pub count: u8,
}

/// Transparent-mode (smart-card pass-through) requests carried by `osdp_XWR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XwrRequest {
    /// Mode 0, `osdp_PR00REQ`: read the extended-mode setting.
    GetMode,
    /// Mode 0, `osdp_PR00SET`: set the extended mode (0 or 1) and its config.
    SetMode { mode: u8, config: u8 },
    /// Mode 1, `osdp_PR01APDU`: send an APDU to the card on `reader`.
    Apdu { reader: u8, apdu: Vec<u8> },
    /// Mode 1, `osdp_PR01DONE`: end the card session on `reader`.
    Done { reader: u8 },
    /// Mode 1, `osdp_PR01SCSCAN`: look for a card on `reader`.
    Scan { reader: u8 },
}

/// Transparent-mode replies carried by `osdp_XRD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XrdReply {
    /// Mode 0, `osdp_PR00REQR`: the current extended mode and config.
    Mode { mode: u8, config: u8 },
    /// Mode 1, `osdp_PR01PRES`: card presence on `reader` (status 0 none, 1 present).
    CardPresent { reader: u8, status: u8 },
    /// Mode 1, `osdp_PR01SCREP`: the card's response to an APDU (data + SW1 SW2),
    /// `status` 0 on success, non-zero when the card could not be reached.
    Response {
        reader: u8,
        status: u8,
        data: Vec<u8>,
    },
}

/// A command, CP → PD. Its `Debug` never shows the key of
/// [`Command::KeySet`].
#[derive(Clone, PartialEq, Eq)]
pub enum Command {
    Poll,
    Id,
    Cap,
    LocalStatus,
    InputStatus,
    OutputStatus,
    Output(Vec<OutputControl>),
    Led(Vec<LedControl>),
    Buzzer(BuzzerControl),
    ComSet {
        address: u8,
        baud: u32,
    },
    /// Key type 1 (SCBK), 16 bytes.
    KeySet {
        key: [u8; 16],
    },
    Challenge {
        rnd_a: [u8; 8],
    },
    ServerCryptogram {
        cryptogram: [u8; 16],
    },
    Transparent(XwrRequest),
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Poll => f.write_str("Poll"),
            Command::Id => f.write_str("Id"),
            Command::Cap => f.write_str("Cap"),
            Command::LocalStatus => f.write_str("LocalStatus"),
            Command::InputStatus => f.write_str("InputStatus"),
            Command::OutputStatus => f.write_str("OutputStatus"),
            Command::Output(r) => f.debug_tuple("Output").field(r).finish(),
            Command::Led(r) => f.debug_tuple("Led").field(r).finish(),
            Command::Buzzer(b) => f.debug_tuple("Buzzer").field(b).finish(),
            Command::ComSet { address, baud } => f
                .debug_struct("ComSet")
                .field("address", address)
                .field("baud", baud)
                .finish(),
            Command::KeySet { .. } => f.write_str("KeySet { key: .. }"),
            Command::Challenge { rnd_a } => {
                f.debug_struct("Challenge").field("rnd_a", rnd_a).finish()
            }
            Command::ServerCryptogram { cryptogram } => f
                .debug_struct("ServerCryptogram")
                .field("cryptogram", cryptogram)
                .finish(),
            Command::Transparent(x) => f.debug_tuple("Transparent").field(x).finish(),
        }
    }
}

/// NAK reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NakReason {
    /// 1: message check character(s) error.
    CheckCharacter,
    /// 2: command length error.
    CommandLength,
    /// 3: unknown command code.
    UnknownCommand,
    /// 4: unexpected sequence number.
    SequenceNumber,
    /// 5: secure channel not supported.
    ScUnsupported,
    /// 6: security conditions not met (e.g. encryption required, bad MAC).
    ScConditions,
    /// 7: BIO type not supported.
    BioType,
    /// 8: BIO format not supported.
    BioFormat,
    /// 9: unable to process command record.
    Record,
    /// Any other value.
    Other(u8),
}

impl NakReason {
    pub fn code(self) -> u8 {
        match self {
            NakReason::CheckCharacter => 1,
            NakReason::CommandLength => 2,
            NakReason::UnknownCommand => 3,
            NakReason::SequenceNumber => 4,
            NakReason::ScUnsupported => 5,
            NakReason::ScConditions => 6,
            NakReason::BioType => 7,
            NakReason::BioFormat => 8,
            NakReason::Record => 9,
            NakReason::Other(c) => c,
        }
    }
    pub fn from_code(c: u8) -> NakReason {
        match c {
            1 => NakReason::CheckCharacter,
            2 => NakReason::CommandLength,
            3 => NakReason::UnknownCommand,
            4 => NakReason::SequenceNumber,
            5 => NakReason::ScUnsupported,
            6 => NakReason::ScConditions,
            7 => NakReason::BioType,
            8 => NakReason::BioFormat,
            9 => NakReason::Record,
            c => NakReason::Other(c),
        }
    }
}

/// `osdp_PDID`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PdId {
    /// IEEE OUI, 3 bytes.
    pub vendor: [u8; 3],
    pub model: u8,
    pub version: u8,
    pub serial: u32,
    /// Major, minor, build.
    pub firmware: [u8; 3],
}

impl PdId {
    /// The 8-byte cUID the secure channel uses: vendor (3), model, version, serial (LE).
    pub fn cuid(&self) -> [u8; 8] {
        let s = self.serial.to_le_bytes();
        [
            self.vendor[0],
            self.vendor[1],
            self.vendor[2],
            self.model,
            self.version,
            s[0],
            s[1],
            s[2],
        ]
    }
}

/// One `osdp_PDCAP` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    pub function: u8,
    pub compliance: u8,
    pub items: u8,
}

/// Capability function codes.
pub mod capability {
    pub const CONTACT_STATUS: u8 = 1;
    pub const OUTPUT_CONTROL: u8 = 2;
    pub const CARD_FORMAT: u8 = 3;
    pub const READER_LED: u8 = 4;
    pub const READER_AUDIBLE: u8 = 5;
    pub const READER_TEXT: u8 = 6;
    pub const CHECK_CHARACTER: u8 = 8;
    pub const COMMUNICATION_SECURITY: u8 = 9;
    pub const RECEIVE_BUFFER: u8 = 10;
    pub const SMART_CARD: u8 = 13;
    pub const READERS: u8 = 14;
}

/// Card data from `osdp_RAW`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawCard {
    pub reader: u8,
    /// 0 unspecified raw bit array, 1 Wiegand.
    pub format: u8,
    /// Number of valid bits in `data` (most significant bit first).
    pub bits: u16,
    pub data: Vec<u8>,
}

/// A reply, PD → CP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Ack,
    Nak(NakReason),
    Id(PdId),
    Capabilities(Vec<Capability>),
    LocalStatus {
        tamper: bool,
        power: bool,
    },
    InputStatus(Vec<u8>),
    OutputStatus(Vec<u8>),
    Raw(RawCard),
    /// `osdp_FMT`: reader, read direction, ASCII characters.
    Formatted {
        reader: u8,
        direction: u8,
        text: Vec<u8>,
    },
    Keypad {
        reader: u8,
        keys: Vec<u8>,
    },
    Com {
        address: u8,
        baud: u32,
    },
    ClientCryptogram {
        cuid: [u8; 8],
        rnd_b: [u8; 8],
        cryptogram: [u8; 16],
    },
    InitialRmac([u8; 16]),
    Busy,
    Transparent(XrdReply),
}

fn arr<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&s[..N]);
    a
}

impl Command {
    /// The command code.
    pub fn code(&self) -> u8 {
        match self {
            Command::Poll => cmd::POLL,
            Command::Id => cmd::ID,
            Command::Cap => cmd::CAP,
            Command::LocalStatus => cmd::LSTAT,
            Command::InputStatus => cmd::ISTAT,
            Command::OutputStatus => cmd::OSTAT,
            Command::Output(_) => cmd::OUT,
            Command::Led(_) => cmd::LED,
            Command::Buzzer(_) => cmd::BUZ,
            Command::ComSet { .. } => cmd::COMSET,
            Command::KeySet { .. } => cmd::KEYSET,
            Command::Challenge { .. } => cmd::CHLNG,
            Command::ServerCryptogram { .. } => cmd::SCRYPT,
            Command::Transparent(_) => cmd::XWR,
        }
    }

    /// The plaintext data field.
    pub fn encode_data(&self) -> Vec<u8> {
        match self {
            Command::Poll | Command::LocalStatus | Command::InputStatus | Command::OutputStatus => {
                vec![]
            }
            Command::Id | Command::Cap => vec![0],
            Command::Output(recs) => recs
                .iter()
                .flat_map(|r| {
                    let t = r.timer.to_le_bytes();
                    [r.output, r.control_code, t[0], t[1]]
                })
                .collect(),
            Command::Led(recs) => recs
                .iter()
                .flat_map(|r| {
                    let t = r.timer.to_le_bytes();
                    let (a, b) = (r.temporary, r.permanent);
                    [
                        r.reader,
                        r.led,
                        a.control_code,
                        a.on_time,
                        a.off_time,
                        a.on_color,
                        a.off_color,
                        t[0],
                        t[1],
                        b.control_code,
                        b.on_time,
                        b.off_time,
                        b.on_color,
                        b.off_color,
                    ]
                })
                .collect(),
            Command::Buzzer(b) => vec![b.reader, b.tone, b.on_time, b.off_time, b.count],
            Command::ComSet { address, baud } => {
                let mut v = vec![*address];
                v.extend_from_slice(&baud.to_le_bytes());
                v
            }
            Command::KeySet { key } => {
                let mut v = vec![1, 16];
                v.extend_from_slice(key);
                v
            }
            Command::Challenge { rnd_a } => rnd_a.to_vec(),
            Command::ServerCryptogram { cryptogram } => cryptogram.to_vec(),
            Command::Transparent(x) => match x {
                XwrRequest::GetMode => vec![0, 1],
                XwrRequest::SetMode { mode, config } => vec![0, 2, *mode, *config],
                XwrRequest::Apdu { reader, apdu } => {
                    let mut v = vec![1, 1, *reader];
                    v.extend_from_slice(apdu);
                    v
                }
                XwrRequest::Done { reader } => vec![1, 2, *reader],
                XwrRequest::Scan { reader } => vec![1, 4, *reader],
            },
        }
    }

    /// Decodes a command from its code and plaintext data.
    pub fn decode(code: u8, d: &[u8]) -> Result<Command, MsgError> {
        let n = d.len();
        Ok(match code {
            cmd::POLL => {
                need("osdp_POLL", "0", n == 0, n)?;
                Command::Poll
            }
            cmd::ID => {
                need("osdp_ID", "1", n == 1, n)?;
                Command::Id
            }
            cmd::CAP => {
                need("osdp_CAP", "1", n == 1, n)?;
                Command::Cap
            }
            cmd::LSTAT => {
                need("osdp_LSTAT", "0", n == 0, n)?;
                Command::LocalStatus
            }
            cmd::ISTAT => {
                need("osdp_ISTAT", "0", n == 0, n)?;
                Command::InputStatus
            }
            cmd::OSTAT => {
                need("osdp_OSTAT", "0", n == 0, n)?;
                Command::OutputStatus
            }
            cmd::OUT => {
                need(
                    "osdp_OUT",
                    "a positive multiple of 4",
                    n > 0 && n.is_multiple_of(4),
                    n,
                )?;
                Command::Output(
                    d.chunks_exact(4)
                        .map(|c| OutputControl {
                            output: c[0],
                            control_code: c[1],
                            timer: u16::from_le_bytes([c[2], c[3]]),
                        })
                        .collect(),
                )
            }
            cmd::LED => {
                need(
                    "osdp_LED",
                    "a positive multiple of 14",
                    n > 0 && n.is_multiple_of(14),
                    n,
                )?;
                Command::Led(
                    d.chunks_exact(14)
                        .map(|c| LedControl {
                            reader: c[0],
                            led: c[1],
                            temporary: LedState {
                                control_code: c[2],
                                on_time: c[3],
                                off_time: c[4],
                                on_color: c[5],
                                off_color: c[6],
                            },
                            timer: u16::from_le_bytes([c[7], c[8]]),
                            permanent: LedState {
                                control_code: c[9],
                                on_time: c[10],
                                off_time: c[11],
                                on_color: c[12],
                                off_color: c[13],
                            },
                        })
                        .collect(),
                )
            }
            cmd::BUZ => {
                need("osdp_BUZ", "5", n == 5, n)?;
                Command::Buzzer(BuzzerControl {
                    reader: d[0],
                    tone: d[1],
                    on_time: d[2],
                    off_time: d[3],
                    count: d[4],
                })
            }
            cmd::COMSET => {
                need("osdp_COMSET", "5", n == 5, n)?;
                Command::ComSet {
                    address: d[0],
                    baud: u32::from_le_bytes(arr(&d[1..])),
                }
            }
            cmd::KEYSET => {
                need("osdp_KEYSET", "18", n == 18, n)?;
                if d[0] != 1 || d[1] != 16 {
                    return Err(MsgError::BadValue {
                        what: "osdp_KEYSET key type/length",
                        value: u32::from(d[0]) << 8 | u32::from(d[1]),
                    });
                }
                Command::KeySet { key: arr(&d[2..]) }
            }
            cmd::CHLNG => {
                need("osdp_CHLNG", "8", n == 8, n)?;
                Command::Challenge { rnd_a: arr(d) }
            }
            cmd::SCRYPT => {
                need("osdp_SCRYPT", "16", n == 16, n)?;
                Command::ServerCryptogram { cryptogram: arr(d) }
            }
            cmd::XWR => {
                need("osdp_XWR", "at least 2", n >= 2, n)?;
                let x = match (d[0], d[1]) {
                    (0, 1) => XwrRequest::GetMode,
                    (0, 2) => {
                        need("osdp_PR00SET", "4", n == 4, n)?;
                        XwrRequest::SetMode {
                            mode: d[2],
                            config: d[3],
                        }
                    }
                    (1, 1) => {
                        need("osdp_PR01APDU", "at least 3", n >= 3, n)?;
                        XwrRequest::Apdu {
                            reader: d[2],
                            apdu: d[3..].to_vec(),
                        }
                    }
                    (1, 2) => {
                        need("osdp_PR01DONE", "3", n == 3, n)?;
                        XwrRequest::Done { reader: d[2] }
                    }
                    (1, 4) => {
                        need("osdp_PR01SCSCAN", "3", n == 3, n)?;
                        XwrRequest::Scan { reader: d[2] }
                    }
                    (m, p) => {
                        return Err(MsgError::BadValue {
                            what: "osdp_XWR mode/command",
                            value: u32::from(m) << 8 | u32::from(p),
                        })
                    }
                };
                Command::Transparent(x)
            }
            other => return Err(MsgError::UnknownCommand(other)),
        })
    }
}

impl Reply {
    /// The reply code.
    pub fn code(&self) -> u8 {
        match self {
            Reply::Ack => reply::ACK,
            Reply::Nak(_) => reply::NAK,
            Reply::Id(_) => reply::PDID,
            Reply::Capabilities(_) => reply::PDCAP,
            Reply::LocalStatus { .. } => reply::LSTATR,
            Reply::InputStatus(_) => reply::ISTATR,
            Reply::OutputStatus(_) => reply::OSTATR,
            Reply::Raw(_) => reply::RAW,
            Reply::Formatted { .. } => reply::FMT,
            Reply::Keypad { .. } => reply::KEYPAD,
            Reply::Com { .. } => reply::COM,
            Reply::ClientCryptogram { .. } => reply::CCRYPT,
            Reply::InitialRmac(_) => reply::RMAC_I,
            Reply::Busy => reply::BUSY,
            Reply::Transparent(_) => reply::XRD,
        }
    }

    /// The plaintext data field.
    pub fn encode_data(&self) -> Vec<u8> {
        match self {
            Reply::Ack | Reply::Busy => vec![],
            Reply::Nak(r) => vec![r.code()],
            Reply::Id(id) => {
                let mut v = id.vendor.to_vec();
                v.push(id.model);
                v.push(id.version);
                v.extend_from_slice(&id.serial.to_le_bytes());
                v.extend_from_slice(&id.firmware);
                v
            }
            Reply::Capabilities(caps) => caps
                .iter()
                .flat_map(|c| [c.function, c.compliance, c.items])
                .collect(),
            Reply::LocalStatus { tamper, power } => vec![u8::from(*tamper), u8::from(*power)],
            Reply::InputStatus(v) | Reply::OutputStatus(v) => v.clone(),
            Reply::Raw(r) => {
                let mut v = vec![r.reader, r.format];
                v.extend_from_slice(&r.bits.to_le_bytes());
                v.extend_from_slice(&r.data);
                v
            }
            Reply::Formatted {
                reader,
                direction,
                text,
            } => {
                let mut v = vec![*reader, *direction, text.len() as u8];
                v.extend_from_slice(text);
                v
            }
            Reply::Keypad { reader, keys } => {
                let mut v = vec![*reader, keys.len() as u8];
                v.extend_from_slice(keys);
                v
            }
            Reply::Com { address, baud } => {
                let mut v = vec![*address];
                v.extend_from_slice(&baud.to_le_bytes());
                v
            }
            Reply::ClientCryptogram {
                cuid,
                rnd_b,
                cryptogram,
            } => [&cuid[..], &rnd_b[..], &cryptogram[..]].concat(),
            Reply::InitialRmac(m) => m.to_vec(),
            Reply::Transparent(x) => match x {
                XrdReply::Mode { mode, config } => vec![0, 1, *mode, *config],
                XrdReply::CardPresent { reader, status } => vec![1, 1, *reader, *status],
                XrdReply::Response {
                    reader,
                    status,
                    data,
                } => {
                    let mut v = vec![1, 2, *reader, *status];
                    v.extend_from_slice(data);
                    v
                }
            },
        }
    }

    /// Decodes a reply from its code and plaintext data.
    pub fn decode(code: u8, d: &[u8]) -> Result<Reply, MsgError> {
        let n = d.len();
        Ok(match code {
            reply::ACK => Reply::Ack,
            reply::BUSY => Reply::Busy,
            reply::NAK => {
                need("osdp_NAK", "at least 1", n >= 1, n)?;
                Reply::Nak(NakReason::from_code(d[0]))
            }
            reply::PDID => {
                need("osdp_PDID", "12", n == 12, n)?;
                Reply::Id(PdId {
                    vendor: arr(d),
                    model: d[3],
                    version: d[4],
                    serial: u32::from_le_bytes(arr(&d[5..])),
                    firmware: arr(&d[9..]),
                })
            }
            reply::PDCAP => {
                need("osdp_PDCAP", "a multiple of 3", n.is_multiple_of(3), n)?;
                Reply::Capabilities(
                    d.chunks_exact(3)
                        .map(|c| Capability {
                            function: c[0],
                            compliance: c[1],
                            items: c[2],
                        })
                        .collect(),
                )
            }
            reply::LSTATR => {
                need("osdp_LSTATR", "2", n == 2, n)?;
                Reply::LocalStatus {
                    tamper: d[0] != 0,
                    power: d[1] != 0,
                }
            }
            reply::ISTATR => Reply::InputStatus(d.to_vec()),
            reply::OSTATR => Reply::OutputStatus(d.to_vec()),
            reply::RAW => {
                need("osdp_RAW", "at least 4", n >= 4, n)?;
                let bits = u16::from_le_bytes([d[2], d[3]]);
                let bytes = usize::from(bits).div_ceil(8);
                need(
                    "osdp_RAW data for its bit count",
                    "bit count / 8",
                    n - 4 == bytes,
                    n - 4,
                )?;
                Reply::Raw(RawCard {
                    reader: d[0],
                    format: d[1],
                    bits,
                    data: d[4..].to_vec(),
                })
            }
            reply::FMT => {
                need("osdp_FMT", "at least 3", n >= 3, n)?;
                need(
                    "osdp_FMT characters",
                    "its count byte",
                    n - 3 == usize::from(d[2]),
                    n - 3,
                )?;
                Reply::Formatted {
                    reader: d[0],
                    direction: d[1],
                    text: d[3..].to_vec(),
                }
            }
            reply::KEYPAD => {
                need("osdp_KEYPAD", "at least 2", n >= 2, n)?;
                need(
                    "osdp_KEYPAD keys",
                    "its count byte",
                    n - 2 == usize::from(d[1]),
                    n - 2,
                )?;
                Reply::Keypad {
                    reader: d[0],
                    keys: d[2..].to_vec(),
                }
            }
            reply::COM => {
                need("osdp_COM", "5", n == 5, n)?;
                Reply::Com {
                    address: d[0],
                    baud: u32::from_le_bytes(arr(&d[1..])),
                }
            }
            reply::CCRYPT => {
                need("osdp_CCRYPT", "32", n == 32, n)?;
                Reply::ClientCryptogram {
                    cuid: arr(d),
                    rnd_b: arr(&d[8..]),
                    cryptogram: arr(&d[16..]),
                }
            }
            reply::RMAC_I => {
                need("osdp_RMAC_I", "16", n == 16, n)?;
                Reply::InitialRmac(arr(d))
            }
            reply::XRD => {
                need("osdp_XRD", "at least 2", n >= 2, n)?;
                let x = match (d[0], d[1]) {
                    (0, 1) => {
                        need("osdp_PR00REQR", "4", n == 4, n)?;
                        XrdReply::Mode {
                            mode: d[2],
                            config: d[3],
                        }
                    }
                    (1, 1) => {
                        need("osdp_PR01PRES", "4", n == 4, n)?;
                        XrdReply::CardPresent {
                            reader: d[2],
                            status: d[3],
                        }
                    }
                    (1, 2) => {
                        need("osdp_PR01SCREP", "at least 4", n >= 4, n)?;
                        XrdReply::Response {
                            reader: d[2],
                            status: d[3],
                            data: d[4..].to_vec(),
                        }
                    }
                    (m, p) => {
                        return Err(MsgError::BadValue {
                            what: "osdp_XRD mode/reply",
                            value: u32::from(m) << 8 | u32::from(p),
                        })
                    }
                };
                Reply::Transparent(x)
            }
            other => return Err(MsgError::UnknownReply(other)),
        })
    }
}
