//! Command APDUs (ISO/IEC 7816-3 §12.1 / 7816-4 §5.1): parsing of the four
//! cases in short and extended form, with a precise error for every way the
//! length fields can disagree with the bytes received, and the matching
//! encoder for hosts.

use crate::sw::StatusWord;
use thiserror::Error;

/// Largest data field of a short APDU.
pub const SHORT_MAX_LC: usize = 255;
/// Largest data field of an extended APDU.
pub const EXTENDED_MAX_LC: usize = 65_535;

/// Why a command APDU could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ApduError {
    #[error("APDU of {len} byte(s) is shorter than the 4-byte header")]
    TooShort { len: usize },
    #[error("Lc announces {declared} data byte(s) but {actual} byte(s) follow")]
    LcMismatch { declared: usize, actual: usize },
    #[error("extended-length APDU has Lc = 0")]
    ExtendedLcZero,
    #[error("6-byte APDU with a zero fifth byte is neither short nor extended")]
    MalformedExtendedLength,
}

impl ApduError {
    /// The status word a card answers for this error.
    pub fn status(&self) -> StatusWord {
        StatusWord::WRONG_LENGTH
    }
}

/// A parsed command APDU borrowing its data field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command<'a> {
    pub cla: u8,
    pub ins: u8,
    pub p1: u8,
    pub p2: u8,
    /// The data field (empty for cases 1 and 2).
    pub data: &'a [u8],
    /// Ne, the maximum number of response bytes expected; `None` when the
    /// APDU has no Le field. An encoded Le of zero is decoded to 256 (short)
    /// or 65536 (extended).
    pub le: Option<usize>,
    /// Whether the APDU used the extended length form.
    pub extended: bool,
}

impl<'a> Command<'a> {
    /// A command with no Le and short form when it fits.
    pub fn new(cla: u8, ins: u8, p1: u8, p2: u8, data: &'a [u8]) -> Self {
        Command {
            cla,
            ins,
            p1,
            p2,
            data,
            le: None,
            extended: data.len() > SHORT_MAX_LC,
        }
    }

    /// Sets Ne (the maximum expected response length).
    pub fn with_le(mut self, le: usize) -> Self {
        self.le = Some(le);
        if le > 256 {
            self.extended = true;
        }
        self
    }

    /// Parses a command APDU from untrusted bytes.
    pub fn parse(apdu: &'a [u8]) -> Result<Self, ApduError> {
        let (header, body) = match apdu {
            [a, b, c, d, rest @ ..] => ([*a, *b, *c, *d], rest),
            _ => return Err(ApduError::TooShort { len: apdu.len() }),
        };
        let (data, le, extended) = parse_body(body)?;
        Ok(Command {
            cla: header[0],
            ins: header[1],
            p1: header[2],
            p2: header[3],
            data,
            le,
            extended,
        })
    }

    /// Ne as a number, using `default` when the APDU has no Le.
    pub fn ne_or(&self, default: usize) -> usize {
        self.le.unwrap_or(default)
    }

    /// Whether bit 5 of the class byte announces more commands in a chain.
    pub fn is_chained(&self) -> bool {
        self.cla & 0x10 != 0
    }

    /// Encodes the APDU (short form unless `extended` is set or needed).
    pub fn to_bytes(&self) -> Vec<u8> {
        let extended =
            self.extended || self.data.len() > SHORT_MAX_LC || self.le.is_some_and(|le| le > 256);
        let mut out = Vec::with_capacity(self.data.len() + 9);
        out.extend_from_slice(&[self.cla, self.ins, self.p1, self.p2]);
        if extended {
            if !self.data.is_empty() {
                let lc = self.data.len().min(EXTENDED_MAX_LC) as u16;
                out.push(0);
                out.extend_from_slice(&lc.to_be_bytes());
                out.extend_from_slice(self.data);
            }
            if let Some(le) = self.le {
                if self.data.is_empty() {
                    out.push(0);
                }
                let le = if le >= 65_536 { 0 } else { le as u16 };
                out.extend_from_slice(&le.to_be_bytes());
            }
        } else {
            if !self.data.is_empty() {
                out.push(self.data.len() as u8);
                out.extend_from_slice(self.data);
            }
            if let Some(le) = self.le {
                out.push(if le >= 256 { 0 } else { le as u8 });
            }
        }
        out
    }
}

/// Decodes the body after the header: returns (data, Ne, extended).
fn parse_body(body: &[u8]) -> Result<(&[u8], Option<usize>, bool), ApduError> {
    match body {
        // Case 1.
        [] => Ok((&[], None, false)),
        // Case 2 short.
        [le] => Ok((&[], Some(short_ne(*le)), false)),
        [0, rest @ ..] => parse_extended_body(rest),
        [lc, rest @ ..] => parse_short_body(usize::from(*lc), rest),
    }
}

fn short_ne(le: u8) -> usize {
    if le == 0 {
        256
    } else {
        usize::from(le)
    }
}

fn extended_ne(hi: u8, lo: u8) -> usize {
    match u16::from_be_bytes([hi, lo]) {
        0 => 65_536,
        n => usize::from(n),
    }
}

/// Cases 3 and 4 short: `rest` follows a non-zero Lc byte.
fn parse_short_body(lc: usize, rest: &[u8]) -> Result<(&[u8], Option<usize>, bool), ApduError> {
    if rest.len() == lc {
        Ok((rest, None, false))
    } else if rest.len() == lc + 1 {
        Ok((&rest[..lc], Some(short_ne(rest[lc])), false))
    } else {
        Err(ApduError::LcMismatch {
            declared: lc,
            actual: rest.len(),
        })
    }
}

/// Cases 2, 3 and 4 extended: `rest` follows the zero byte that marks the
/// extended form.
fn parse_extended_body(rest: &[u8]) -> Result<(&[u8], Option<usize>, bool), ApduError> {
    match rest {
        // Case 2 extended: 00 Le1 Le2.
        [hi, lo] => Ok((&[], Some(extended_ne(*hi, *lo)), true)),
        [_] => Err(ApduError::MalformedExtendedLength),
        [0, 0, ..] => Err(ApduError::ExtendedLcZero),
        [hi, lo, data @ ..] => {
            let lc = usize::from(u16::from_be_bytes([*hi, *lo]));
            if data.len() == lc {
                Ok((data, None, true))
            } else if data.len() == lc + 2 {
                Ok((&data[..lc], Some(extended_ne(data[lc], data[lc + 1])), true))
            } else {
                Err(ApduError::LcMismatch {
                    declared: lc,
                    actual: data.len(),
                })
            }
        }
        [] => unreachable_empty(),
    }
}

/// `parse_body` only calls `parse_extended_body` with at least one byte
/// after the marker (a lone `00` is case 2 short); treat the impossible
/// empty case as a malformed length rather than panicking.
fn unreachable_empty() -> Result<(&'static [u8], Option<usize>, bool), ApduError> {
    Err(ApduError::MalformedExtendedLength)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_four_short_cases() {
        let c = Command::parse(&[0x00, 0xA4, 0x04, 0x00]).unwrap();
        assert_eq!((c.data, c.le, c.extended), (&[][..], None, false));
        let c = Command::parse(&[0x00, 0xFD, 0x00, 0x00, 0x00]).unwrap();
        assert_eq!(c.le, Some(256));
        let c = Command::parse(&[0x00, 0xA4, 0x04, 0x00, 0x02, 0xA0, 0x00]).unwrap();
        assert_eq!((c.data, c.le), (&[0xA0, 0x00][..], None));
        let c = Command::parse(&[0x00, 0xCB, 0x3F, 0xFF, 0x01, 0x7E, 0x08]).unwrap();
        assert_eq!((c.data, c.le), (&[0x7E][..], Some(8)));
    }

    #[test]
    fn parses_the_extended_cases() {
        let c = Command::parse(&[0x00, 0xCB, 0x3F, 0xFF, 0x00, 0x00, 0x00]).unwrap();
        assert_eq!((c.le, c.extended), (Some(65_536), true));
        let c = Command::parse(&[0x00, 0xDB, 0x3F, 0xFF, 0x00, 0x00, 0x02, 1, 2]).unwrap();
        assert_eq!((c.data, c.le, c.extended), (&[1, 2][..], None, true));
        let c = Command::parse(&[0x00, 0x87, 0x07, 0x9A, 0x00, 0x00, 0x01, 9, 0x01, 0x00]).unwrap();
        assert_eq!((c.data, c.le), (&[9][..], Some(256)));
    }

    #[test]
    fn rejects_inconsistent_lengths_precisely() {
        assert_eq!(
            Command::parse(&[0x00, 0xA4, 0x04]),
            Err(ApduError::TooShort { len: 3 })
        );
        assert_eq!(
            Command::parse(&[0x00, 0xA4, 0x04, 0x00, 0x05, 1, 2]),
            Err(ApduError::LcMismatch {
                declared: 5,
                actual: 2
            })
        );
        assert_eq!(
            Command::parse(&[0x00, 0xA4, 0x04, 0x00, 0x02, 1, 2, 3, 4]),
            Err(ApduError::LcMismatch {
                declared: 2,
                actual: 4
            })
        );
        assert_eq!(
            Command::parse(&[0x00, 0xA4, 0x04, 0x00, 0x00, 0x01]),
            Err(ApduError::MalformedExtendedLength)
        );
        assert_eq!(
            Command::parse(&[0x00, 0xA4, 0x04, 0x00, 0x00, 0x00, 0x00, 0x01]),
            Err(ApduError::ExtendedLcZero)
        );
        assert_eq!(
            Command::parse(&[0x00, 0xDB, 0x3F, 0xFF, 0x00, 0x00, 0x03, 1]),
            Err(ApduError::LcMismatch {
                declared: 3,
                actual: 1
            })
        );
        assert_eq!(ApduError::ExtendedLcZero.status(), StatusWord::WRONG_LENGTH);
    }

    #[test]
    fn encodes_short_and_extended() {
        assert_eq!(
            Command::new(0, 0xA4, 4, 0, &[0xA0, 0]).to_bytes(),
            vec![0, 0xA4, 4, 0, 2, 0xA0, 0]
        );
        assert_eq!(
            Command::new(0, 0xCB, 0x3F, 0xFF, &[])
                .with_le(256)
                .to_bytes(),
            vec![0, 0xCB, 0x3F, 0xFF, 0]
        );
        assert_eq!(
            Command::new(0, 0xCB, 0x3F, 0xFF, &[])
                .with_le(65_536)
                .to_bytes(),
            vec![0, 0xCB, 0x3F, 0xFF, 0, 0, 0]
        );
        let big = vec![7u8; 300];
        let enc = Command::new(0, 0xDB, 0x3F, 0xFF, &big).to_bytes();
        assert_eq!(&enc[4..7], &[0, 0x01, 0x2C]);
        assert_eq!(enc.len(), 307);
    }

    proptest! {
        #[test]
        fn encode_then_parse_round_trips(
            header in any::<[u8; 4]>(),
            data in proptest::collection::vec(any::<u8>(), 0..600),
            le in proptest::option::of(1usize..=65_536),
            extended in any::<bool>(),
        ) {
            let mut cmd = Command::new(header[0], header[1], header[2], header[3], &data);
            cmd.extended |= extended;
            if let Some(le) = le { cmd = cmd.with_le(le); }
            let bytes = cmd.to_bytes();
            let back = Command::parse(&bytes).unwrap();
            prop_assert_eq!(back.data, &data[..]);
            let short = !back.extended;
            let want_le = le.map(|l| if short && l == 256 { 256 } else { l });
            prop_assert_eq!(back.le, want_le);
            prop_assert_eq!((back.cla, back.ins, back.p1, back.p2), (header[0], header[1], header[2], header[3]));
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = Command::parse(&bytes);
        }
    }
}
