//! The wire protocol: messages, their binary encoding and the framing.
//!
//! Every message is one frame: a 4-byte big-endian payload length, then the
//! payload, at most [`MAX_PAYLOAD`] bytes. The payload is a 1-byte message
//! type followed by the message's fields: integers big-endian, byte strings
//! and text as a 2-byte length and the bytes (text is UTF-8), lists as a
//! 2-byte count and the items. A frame longer than the maximum, a payload
//! with bytes left over, a field running past the end, an unknown type or
//! a list beyond its limit is a protocol violation: the peer is
//! disconnected (only that peer).

use std::time::Duration;
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u16 = 1;
/// The largest payload a frame may carry (8 KiB: a certificate and a CHUID
/// read in one batch fit; anything longer is refused before it is read).
pub const MAX_PAYLOAD: usize = 8192;
/// The frame header: the payload length.
pub const HEADER: usize = 4;
/// The most steps one batch may hold.
pub const MAX_STEPS: usize = 8;
/// The most `61xx` continuations the reader follows for one step.
pub const MAX_CHAIN: usize = 32;

/// Why bytes from a peer are not a message.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("frame of {0} bytes is larger than the {MAX_PAYLOAD}-byte maximum")]
    Oversized(usize),
    #[error("empty frame")]
    Empty,
    #[error("unknown message type {0:#04x}")]
    UnknownType(u8),
    #[error("message type {0:#04x} ends early")]
    Truncated(u8),
    #[error("message type {0:#04x} has {1} byte(s) left over")]
    Trailing(u8, usize),
    #[error("message type {0:#04x} carries text that is not UTF-8")]
    BadText(u8),
    #[error("message type {0:#04x} has a list of {1} items, more than allowed")]
    TooMany(u8, usize),
    #[error("message type {0:#04x} carries an invalid value")]
    BadValue(u8),
}

/// One command for the reader: an APDU, and whether to follow `61xx` with
/// GET RESPONSE (`00 C0 00 00 xx`) until the card stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub apdu: Vec<u8>,
    pub follow: bool,
}

/// How one step went at the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepStatus {
    /// The card answered; the responses are complete.
    Ok = 0,
    /// No card (absent or removed during the step).
    NoCard = 1,
    /// The card or the local reader failed.
    Failed = 2,
    /// Not run: the answers would not have fitted in one frame.
    Skipped = 3,
}

/// The reader's answer to one step: every response APDU the card gave
/// (the first, then one per GET RESPONSE), each with its status word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepAnswer {
    pub status: StepStatus,
    pub responses: Vec<Vec<u8>>,
}

/// A message, either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Reader → service, first: the versions it speaks, its name and the
    /// local reader it offers.
    Hello {
        min_version: u16,
        max_version: u16,
        agent: String,
        reader: String,
    },
    /// Service → reader: accepted, in this version; heartbeat interval.
    Welcome {
        version: u16,
        heartbeat_ms: u32,
    },
    /// Service → reader: refused (version, identity); the link closes.
    Refuse {
        reason: String,
    },
    /// Service → reader: a prepared tap. The reader keeps the latest one
    /// and runs its steps the moment a card arrives. `id` names the
    /// single-use challenge inside; the service forgets it after
    /// `expires_ms`.
    Prepare {
        id: u64,
        expires_ms: u32,
        steps: Vec<Step>,
    },
    /// Reader → service: a card arrived (presence number `card`), with the
    /// answers to the prepared tap `id` when one was held.
    CardPresent {
        card: u64,
        prepared: Option<(u64, Vec<StepAnswer>)>,
    },
    /// Reader → service: the card left.
    CardRemoved {
        card: u64,
    },
    /// Service → reader: run these steps on the present card now.
    Run {
        seq: u32,
        steps: Vec<Step>,
    },
    /// Reader → service: the answers to `Run` number `seq`.
    Ran {
        seq: u32,
        answers: Vec<StepAnswer>,
    },
    /// Service → reader: the tap of card `card` ended.
    TapEnd {
        card: u64,
        granted: bool,
        text: String,
    },
    Ping {
        nonce: u32,
    },
    Pong {
        nonce: u32,
    },
}

mod ty {
    pub const HELLO: u8 = 0x01;
    pub const WELCOME: u8 = 0x02;
    pub const REFUSE: u8 = 0x03;
    pub const PREPARE: u8 = 0x10;
    pub const CARD_PRESENT: u8 = 0x11;
    pub const CARD_REMOVED: u8 = 0x12;
    pub const RUN: u8 = 0x13;
    pub const RAN: u8 = 0x14;
    pub const TAP_END: u8 = 0x15;
    pub const PING: u8 = 0x20;
    pub const PONG: u8 = 0x21;
}

struct Out(Vec<u8>);

impl Out {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        // Lengths beyond a frame are cut at encode time by the caller's
        // size check; a u16 holds every length that fits a frame.
        self.u16(b.len().min(u16::MAX as usize) as u16);
        self.0
            .extend_from_slice(&b[..b.len().min(u16::MAX as usize)]);
    }
    fn steps(&mut self, steps: &[Step]) {
        self.u16(steps.len() as u16);
        for s in steps {
            self.bytes(&s.apdu);
            self.u8(u8::from(s.follow));
        }
    }
    fn answers(&mut self, answers: &[StepAnswer]) {
        self.u16(answers.len() as u16);
        for a in answers {
            self.u8(a.status as u8);
            self.u16(a.responses.len() as u16);
            for r in &a.responses {
                self.bytes(r);
            }
        }
    }
}

struct In<'a> {
    ty: u8,
    rest: &'a [u8],
}

impl<'a> In<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtocolError> {
        if self.rest.len() < n {
            return Err(ProtocolError::Truncated(self.ty));
        }
        let (a, b) = self.rest.split_at(n);
        self.rest = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, ProtocolError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, ProtocolError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, ProtocolError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, ProtocolError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, ProtocolError> {
        let n = self.u16()? as usize;
        Ok(self.take(n)?.to_vec())
    }
    fn text(&mut self) -> Result<String, ProtocolError> {
        String::from_utf8(self.bytes()?).map_err(|_| ProtocolError::BadText(self.ty))
    }
    fn flag(&mut self) -> Result<bool, ProtocolError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(ProtocolError::BadValue(self.ty)),
        }
    }
    fn count(&mut self, max: usize) -> Result<usize, ProtocolError> {
        let n = self.u16()? as usize;
        if n > max {
            return Err(ProtocolError::TooMany(self.ty, n));
        }
        Ok(n)
    }
    fn steps(&mut self) -> Result<Vec<Step>, ProtocolError> {
        let n = self.count(MAX_STEPS)?;
        (0..n)
            .map(|_| {
                Ok(Step {
                    apdu: self.bytes()?,
                    follow: self.flag()?,
                })
            })
            .collect()
    }
    fn answers(&mut self) -> Result<Vec<StepAnswer>, ProtocolError> {
        let n = self.count(MAX_STEPS)?;
        (0..n)
            .map(|_| {
                let status = match self.u8()? {
                    0 => StepStatus::Ok,
                    1 => StepStatus::NoCard,
                    2 => StepStatus::Failed,
                    3 => StepStatus::Skipped,
                    _ => return Err(ProtocolError::BadValue(self.ty)),
                };
                let m = self.count(MAX_CHAIN + 1)?;
                let responses = (0..m).map(|_| self.bytes()).collect::<Result<_, _>>()?;
                Ok(StepAnswer { status, responses })
            })
            .collect()
    }
}

impl Message {
    /// The payload (type and fields, without the frame header).
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Out(Vec::with_capacity(64));
        match self {
            Message::Hello {
                min_version,
                max_version,
                agent,
                reader,
            } => {
                o.u8(ty::HELLO);
                o.u16(*min_version);
                o.u16(*max_version);
                o.bytes(agent.as_bytes());
                o.bytes(reader.as_bytes());
            }
            Message::Welcome {
                version,
                heartbeat_ms,
            } => {
                o.u8(ty::WELCOME);
                o.u16(*version);
                o.u32(*heartbeat_ms);
            }
            Message::Refuse { reason } => {
                o.u8(ty::REFUSE);
                o.bytes(reason.as_bytes());
            }
            Message::Prepare {
                id,
                expires_ms,
                steps,
            } => {
                o.u8(ty::PREPARE);
                o.u64(*id);
                o.u32(*expires_ms);
                o.steps(steps);
            }
            Message::CardPresent { card, prepared } => {
                o.u8(ty::CARD_PRESENT);
                o.u64(*card);
                match prepared {
                    None => o.u8(0),
                    Some((id, answers)) => {
                        o.u8(1);
                        o.u64(*id);
                        o.answers(answers);
                    }
                }
            }
            Message::CardRemoved { card } => {
                o.u8(ty::CARD_REMOVED);
                o.u64(*card);
            }
            Message::Run { seq, steps } => {
                o.u8(ty::RUN);
                o.u32(*seq);
                o.steps(steps);
            }
            Message::Ran { seq, answers } => {
                o.u8(ty::RAN);
                o.u32(*seq);
                o.answers(answers);
            }
            Message::TapEnd {
                card,
                granted,
                text,
            } => {
                o.u8(ty::TAP_END);
                o.u64(*card);
                o.u8(u8::from(*granted));
                o.bytes(text.as_bytes());
            }
            Message::Ping { nonce } => {
                o.u8(ty::PING);
                o.u32(*nonce);
            }
            Message::Pong { nonce } => {
                o.u8(ty::PONG);
                o.u32(*nonce);
            }
        }
        o.0
    }

    /// Parses one payload; every byte must be used.
    pub fn decode(payload: &[u8]) -> Result<Message, ProtocolError> {
        let (&t, rest) = payload.split_first().ok_or(ProtocolError::Empty)?;
        let mut i = In { ty: t, rest };
        let m = match t {
            ty::HELLO => Message::Hello {
                min_version: i.u16()?,
                max_version: i.u16()?,
                agent: i.text()?,
                reader: i.text()?,
            },
            ty::WELCOME => Message::Welcome {
                version: i.u16()?,
                heartbeat_ms: i.u32()?,
            },
            ty::REFUSE => Message::Refuse { reason: i.text()? },
            ty::PREPARE => Message::Prepare {
                id: i.u64()?,
                expires_ms: i.u32()?,
                steps: i.steps()?,
            },
            ty::CARD_PRESENT => {
                let card = i.u64()?;
                let prepared = if i.flag()? {
                    Some((i.u64()?, i.answers()?))
                } else {
                    None
                };
                Message::CardPresent { card, prepared }
            }
            ty::CARD_REMOVED => Message::CardRemoved { card: i.u64()? },
            ty::RUN => Message::Run {
                seq: i.u32()?,
                steps: i.steps()?,
            },
            ty::RAN => Message::Ran {
                seq: i.u32()?,
                answers: i.answers()?,
            },
            ty::TAP_END => Message::TapEnd {
                card: i.u64()?,
                granted: i.flag()?,
                text: i.text()?,
            },
            ty::PING => Message::Ping { nonce: i.u32()? },
            ty::PONG => Message::Pong { nonce: i.u32()? },
            other => return Err(ProtocolError::UnknownType(other)),
        };
        if !i.rest.is_empty() {
            return Err(ProtocolError::Trailing(t, i.rest.len()));
        }
        Ok(m)
    }
}

/// Why a frame could not be read or written.
#[derive(Debug, Error)]
pub enum FrameError {
    #[error("the connection closed")]
    Closed,
    #[error("nothing received for {0:?}")]
    Silent(Duration),
    #[error("{0}")]
    Protocol(#[from] ProtocolError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Reads one frame; a length over [`MAX_PAYLOAD`] is refused before any of
/// the payload is read.
pub async fn read_message<R: AsyncRead + Unpin>(r: &mut R) -> Result<Message, FrameError> {
    let mut h = [0u8; HEADER];
    match r.read_exact(&mut h).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(FrameError::Closed),
        Err(e) => return Err(e.into()),
    }
    let n = u32::from_be_bytes(h) as usize;
    if n > MAX_PAYLOAD {
        return Err(ProtocolError::Oversized(n).into());
    }
    let mut buf = vec![0u8; n];
    match r.read_exact(&mut buf).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(FrameError::Closed),
        Err(e) => return Err(e.into()),
    }
    Ok(Message::decode(&buf)?)
}

/// Like [`read_message`], giving up after `limit` of silence.
pub async fn read_message_within<R: AsyncRead + Unpin>(
    r: &mut R,
    limit: Duration,
) -> Result<Message, FrameError> {
    match tokio::time::timeout(limit, read_message(r)).await {
        Ok(m) => m,
        Err(_) => Err(FrameError::Silent(limit)),
    }
}

/// The whole frame of `m`, or an error when it is larger than allowed.
pub fn frame(m: &Message) -> Result<Vec<u8>, ProtocolError> {
    let payload = m.encode();
    if payload.len() > MAX_PAYLOAD {
        return Err(ProtocolError::Oversized(payload.len()));
    }
    let mut f = Vec::with_capacity(HEADER + payload.len());
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(&payload);
    Ok(f)
}

/// Writes one frame and flushes it.
pub async fn write_message<W: AsyncWrite + Unpin>(
    w: &mut W,
    m: &Message,
) -> Result<(), FrameError> {
    let f = frame(m)?;
    w.write_all(&f).await?;
    w.flush().await?;
    Ok(())
}

/// The encoded size of a step answer inside a message (for the reader's
/// frame budget).
pub fn answer_size(a: &StepAnswer) -> usize {
    3 + a.responses.iter().map(|r| 2 + r.len()).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Message> {
        vec![
            Message::Hello {
                min_version: 1,
                max_version: 3,
                agent: "door-1".into(),
                reader: "Virtual PCD 00 00".into(),
            },
            Message::Welcome {
                version: 1,
                heartbeat_ms: 5000,
            },
            Message::Refuse {
                reason: "no".into(),
            },
            Message::Prepare {
                id: 7,
                expires_ms: 30_000,
                steps: vec![
                    Step {
                        apdu: vec![0, 0xA4, 4, 0],
                        follow: false,
                    },
                    Step {
                        apdu: vec![0, 0x87, 0x11, 0x9E, 1, 2],
                        follow: true,
                    },
                ],
            },
            Message::CardPresent {
                card: 3,
                prepared: Some((
                    7,
                    vec![
                        StepAnswer {
                            status: StepStatus::Ok,
                            responses: vec![vec![0x61, 0x10], vec![1, 2, 0x90, 0]],
                        },
                        StepAnswer {
                            status: StepStatus::Skipped,
                            responses: vec![],
                        },
                    ],
                )),
            },
            Message::CardPresent {
                card: 4,
                prepared: None,
            },
            Message::CardRemoved { card: 4 },
            Message::Run {
                seq: 9,
                steps: vec![],
            },
            Message::Ran {
                seq: 9,
                answers: vec![StepAnswer {
                    status: StepStatus::NoCard,
                    responses: vec![],
                }],
            },
            Message::TapEnd {
                card: 3,
                granted: true,
                text: "granted".into(),
            },
            Message::Ping { nonce: 1 },
            Message::Pong { nonce: 1 },
        ]
    }

    #[test]
    fn every_message_round_trips_and_every_truncation_fails() {
        for m in all() {
            let p = m.encode();
            assert_eq!(Message::decode(&p).unwrap(), m);
            for cut in 0..p.len() {
                assert!(Message::decode(&p[..cut]).is_err(), "{m:?} cut at {cut}");
            }
            let mut longer = p.clone();
            longer.push(0);
            assert!(matches!(
                Message::decode(&longer),
                Err(ProtocolError::Trailing(..))
            ));
        }
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        assert_eq!(
            Message::decode(&[0xEE]),
            Err(ProtocolError::UnknownType(0xEE))
        );
        assert_eq!(Message::decode(&[]), Err(ProtocolError::Empty));
        // A list longer than allowed.
        let mut p = vec![ty::RUN, 0, 0, 0, 1];
        p.extend_from_slice(&(MAX_STEPS as u16 + 1).to_be_bytes());
        assert_eq!(
            Message::decode(&p),
            Err(ProtocolError::TooMany(ty::RUN, MAX_STEPS + 1))
        );
        // Text that is not UTF-8.
        assert_eq!(
            Message::decode(&[ty::REFUSE, 0, 1, 0xFF]),
            Err(ProtocolError::BadText(ty::REFUSE))
        );
    }

    #[tokio::test]
    async fn an_oversized_frame_is_refused_before_its_payload_is_read() {
        let mut bytes = ((MAX_PAYLOAD + 1) as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(&[0u8; 16]);
        let mut r = &bytes[..];
        assert!(matches!(
            read_message(&mut r).await,
            Err(FrameError::Protocol(ProtocolError::Oversized(n))) if n == MAX_PAYLOAD + 1
        ));
        let big = Message::Refuse {
            reason: "x".repeat(MAX_PAYLOAD),
        };
        assert!(matches!(frame(&big), Err(ProtocolError::Oversized(_))));
    }
}
