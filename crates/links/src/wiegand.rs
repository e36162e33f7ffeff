//! Wiegand: the one-way, two-wire (DATA0/DATA1) link from reader to panel.
//! A frame is a string of bits, each a low pulse on DATA0 (a 0) or DATA1 (a 1)
//! of `pulse_width`, one every `bit_interval`; there is no security and no
//! acknowledgement. Sans-I/O: frames are [`Bits`], [`Timing::frame_time`]
//! says how long one takes on the wire, [`WiegandOutput`] is where a frame is
//! sent ([`RecordedLine`] records it; a GPIO backend is yet to come), and
//! [`WiegandReceiver`] reassembles frames from timed pulses on the panel side.
//!
//! Formats:
//! * **H10301**, 26 bits: even parity over bits 1–12, 8-bit facility code,
//!   16-bit card number, odd parity over bits 13–24 (HID, "Understanding Card
//!   Data Formats", 2006).
//! * **200-bit FASC-N**: the full 25-byte FASC-N of a PIV card sent as is,
//!   most significant bit first; its integrity is the FASC-N's own per-character
//!   odd parity and LRC (PACS Implementation Guidance / TIG SCEPACS), checked by
//!   [`piv::fascn::Fascn::decode`].
//! * **75-bit PIV** ([`Piv75`]): the FASC-N's agency code (14 bits), system
//!   code (14), credential number (20) and the card's expiration date as the
//!   number `YYYYMMDD` (25), between a leading parity bit that makes bits 1–37
//!   even and a trailing one that makes bits 38–75 odd (bit 1 is the first
//!   sent). The field layout is the one HID's pivCLASS readers and the
//!   AccessGrid format catalogue publish; the catalogue gives the parity ranges
//!   as "even over bits 1–37, odd over bits 38–74" without saying whether the
//!   parity bits count themselves, and other integrator sheets overlap the two
//!   ranges at bit 38. We use the split halves, as H10301 does (each parity bit
//!   covers its own half), the reading most panels configure.
//! * **48-bit Corporate 1000** ([`Corporate1000`], HID H2004064): 22-bit
//!   company ID, 23-bit card number and three parity bits — bit 2 makes bits
//!   2, 4–5, 7–8, …, 46–47 even, bit 48 makes bits 3–4, 6–7, …, 45–46, 48 odd,
//!   and bit 1 makes the whole frame odd (the masks of HID's format sheet, as
//!   implemented by Proxmark3's `C1k48s`).
//! * **128-bit card UUID** ([`encode_uuid`]): the 16-byte GUID of the CHUID
//!   (SP 800-73-4 §3.1.2, the primary identifier of PIV-I and CIV cards) sent
//!   as is, most significant bit first, with no parity; a wrong length is the
//!   only error a receiver can see.

use std::time::Duration;

use piv::chuid::ChuidDate;
use piv::fascn::{Fascn, FascnError};
use thiserror::Error;

/// A frame's bits, first transmitted first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bits(pub Vec<bool>);

impl Bits {
    /// The bits of `bytes`, most significant first, truncated to `count`.
    pub fn from_bytes(bytes: &[u8], count: usize) -> Bits {
        Bits(
            (0..count.min(bytes.len() * 8))
                .map(|i| bytes[i / 8] & (0x80 >> (i % 8)) != 0)
                .collect(),
        )
    }

    /// Packs the bits into bytes, most significant first, zero-padded.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.0.len().div_ceil(8)];
        for (i, &b) in self.0.iter().enumerate() {
            if b {
                out[i / 8] |= 0x80 >> (i % 8);
            }
        }
        out
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn field(&self, from: usize, len: usize) -> u64 {
        self.0[from..from + len]
            .iter()
            .fold(0u64, |a, &b| (a << 1) | u64::from(b))
    }

    fn ones(&self, from: usize, len: usize) -> usize {
        self.0[from..from + len].iter().filter(|&&b| b).count()
    }

    /// Refuses a frame of the wrong length.
    fn expect_len(&self, format: &'static str, expected: usize) -> Result<(), WiegandError> {
        if self.len() == expected {
            Ok(())
        } else {
            Err(WiegandError::Length {
                format,
                expected,
                got: self.len(),
            })
        }
    }
}

/// Writes `value` into `bits[from..from + len]`, most significant bit first.
fn put(bits: &mut [bool], from: usize, len: usize, value: u64) {
    for i in 0..len {
        bits[from + i] = (value >> (len - 1 - i)) & 1 == 1;
    }
}

/// Refuses a field value that does not fit its bits.
fn fits(
    format: &'static str,
    field: &'static str,
    value: u64,
    bits: u32,
) -> Result<(), WiegandError> {
    let max = (1u64 << bits) - 1;
    if value > max {
        return Err(WiegandError::Range {
            format,
            field,
            value,
            max,
        });
    }
    Ok(())
}

/// Why a frame does not decode.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WiegandError {
    #[error("a {format} frame is {expected} bits, this one is {got}")]
    Length {
        format: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("{format}: the {which} parity bit is wrong")]
    Parity {
        format: &'static str,
        which: &'static str,
    },
    #[error("{format}: {field} {value} is above its largest value {max}")]
    Range {
        format: &'static str,
        field: &'static str,
        value: u64,
        max: u64,
    },
    #[error("75-bit PIV: the expiration field {0} is not a YYYYMMDD date")]
    Date(u64),
    #[error("200-bit FASC-N frame: {0}")]
    Fascn(#[from] FascnError),
    /// A frame of a credential cannot be made as asked.
    #[error("{0}")]
    Credential(String),
}

/// A 26-bit H10301 credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct H10301 {
    pub facility: u8,
    pub card: u16,
}

impl H10301 {
    /// Encodes with both parity bits.
    pub fn encode(&self) -> Bits {
        let mut b = vec![false; 26];
        for i in 0..8 {
            b[1 + i] = self.facility & (0x80 >> i) != 0;
        }
        for i in 0..16 {
            b[9 + i] = self.card & (0x8000 >> i) != 0;
        }
        let even = b[1..13].iter().filter(|&&x| x).count() % 2 == 1;
        let odd = b[13..25].iter().filter(|&&x| x).count() % 2 == 0;
        b[0] = even;
        b[25] = odd;
        Bits(b)
    }

    /// Decodes, checking length and both parities.
    pub fn decode(bits: &Bits) -> Result<H10301, WiegandError> {
        if bits.len() != 26 {
            return Err(WiegandError::Length {
                format: "H10301",
                expected: 26,
                got: bits.len(),
            });
        }
        if !(bits.ones(0, 13)).is_multiple_of(2) {
            return Err(WiegandError::Parity {
                format: "H10301",
                which: "leading (even)",
            });
        }
        if (bits.ones(13, 13)) % 2 != 1 {
            return Err(WiegandError::Parity {
                format: "H10301",
                which: "trailing (odd)",
            });
        }
        Ok(H10301 {
            facility: bits.field(1, 8) as u8,
            card: bits.field(9, 16) as u16,
        })
    }
}

/// A 75-bit PIV credential: the FASC-N's agency code, system code and
/// credential number with the card's expiration date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piv75 {
    pub agency: u16,
    pub system: u16,
    pub credential: u32,
    pub expiration: ChuidDate,
}

impl Piv75 {
    const NAME: &'static str = "75-bit PIV";

    /// The fields of `fascn` with `expiration`.
    pub fn from_fascn(fascn: &Fascn, expiration: ChuidDate) -> Result<Piv75, WiegandError> {
        let num = |field: &'static str, digits: &str| -> Result<u64, WiegandError> {
            digits.parse().map_err(|_| {
                WiegandError::Credential(format!("the FASC-N {field} {digits:?} is not a number"))
            })
        };
        let agency = num("agency code", &fascn.agency_code)?;
        let system = num("system code", &fascn.system_code)?;
        let credential = num("credential number", &fascn.credential_number)?;
        fits(Self::NAME, "agency code", agency, 14)?;
        fits(Self::NAME, "system code", system, 14)?;
        fits(Self::NAME, "credential number", credential, 20)?;
        Ok(Piv75 {
            agency: agency as u16,
            system: system as u16,
            credential: credential as u32,
            expiration,
        })
    }

    fn date_number(d: ChuidDate) -> u64 {
        u64::from(d.year) * 10_000 + u64::from(d.month) * 100 + u64::from(d.day)
    }

    /// Encodes with both parity bits; refuses fields that do not fit.
    pub fn encode(&self) -> Result<Bits, WiegandError> {
        let date = Self::date_number(self.expiration);
        fits(Self::NAME, "agency code", self.agency.into(), 14)?;
        fits(Self::NAME, "system code", self.system.into(), 14)?;
        fits(Self::NAME, "credential number", self.credential.into(), 20)?;
        fits(Self::NAME, "expiration date", date, 25)?;
        let mut b = vec![false; 75];
        put(&mut b, 1, 14, self.agency.into());
        put(&mut b, 15, 14, self.system.into());
        put(&mut b, 29, 20, self.credential.into());
        put(&mut b, 49, 25, date);
        b[0] = b[1..37].iter().filter(|&&x| x).count() % 2 == 1;
        b[74] = b[37..74].iter().filter(|&&x| x).count() % 2 == 0;
        Ok(Bits(b))
    }

    /// Decodes, checking length, both parities and the date.
    pub fn decode(bits: &Bits) -> Result<Piv75, WiegandError> {
        bits.expect_len(Self::NAME, 75)?;
        if !bits.ones(0, 37).is_multiple_of(2) {
            return Err(WiegandError::Parity {
                format: Self::NAME,
                which: "leading (even, bits 1-37)",
            });
        }
        if bits.ones(37, 38) % 2 != 1 {
            return Err(WiegandError::Parity {
                format: Self::NAME,
                which: "trailing (odd, bits 38-75)",
            });
        }
        let date = bits.field(49, 25);
        let expiration =
            ChuidDate::parse(&format!("{date:08}")).map_err(|_| WiegandError::Date(date))?;
        Ok(Piv75 {
            agency: bits.field(1, 14) as u16,
            system: bits.field(15, 14) as u16,
            credential: bits.field(29, 20) as u32,
            expiration,
        })
    }
}

/// A 48-bit HID Corporate 1000 credential (format H2004064).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corporate1000 {
    /// Company ID, 22 bits.
    pub company: u32,
    /// Card number, 23 bits.
    pub card: u32,
}

impl Corporate1000 {
    const NAME: &'static str = "Corporate 1000 48-bit";

    /// Zero-based positions covered by the even parity bit (position 1):
    /// 3–4, 6–7, …, 45–46.
    fn even_covers(p: usize) -> bool {
        (2..=46).contains(&p) && p % 3 != 2
    }

    /// Zero-based positions covered by the trailing odd parity bit
    /// (position 47): 2–3, 5–6, …, 44–45.
    fn odd_covers(p: usize) -> bool {
        (2..=45).contains(&p) && p % 3 != 1
    }

    fn count(b: &[bool], covers: fn(usize) -> bool) -> usize {
        b.iter()
            .enumerate()
            .filter(|&(p, &x)| x && covers(p))
            .count()
    }

    /// Encodes with the three parity bits; refuses fields that do not fit.
    pub fn encode(&self) -> Result<Bits, WiegandError> {
        fits(Self::NAME, "company ID", self.company.into(), 22)?;
        fits(Self::NAME, "card number", self.card.into(), 23)?;
        let mut b = vec![false; 48];
        put(&mut b, 2, 22, self.company.into());
        put(&mut b, 24, 23, self.card.into());
        b[1] = Self::count(&b, Self::even_covers) % 2 == 1;
        b[47] = Self::count(&b, Self::odd_covers) % 2 == 0;
        b[0] = b[1..].iter().filter(|&&x| x).count() % 2 == 0;
        Ok(Bits(b))
    }

    /// Decodes, checking length and the three parities.
    pub fn decode(bits: &Bits) -> Result<Corporate1000, WiegandError> {
        bits.expect_len(Self::NAME, 48)?;
        let b = &bits.0;
        if !(Self::count(b, Self::even_covers) + usize::from(b[1])).is_multiple_of(2) {
            return Err(WiegandError::Parity {
                format: Self::NAME,
                which: "second (even)",
            });
        }
        if (Self::count(b, Self::odd_covers) + usize::from(b[47])) % 2 != 1 {
            return Err(WiegandError::Parity {
                format: Self::NAME,
                which: "trailing (odd)",
            });
        }
        if bits.ones(0, 48) % 2 != 1 {
            return Err(WiegandError::Parity {
                format: Self::NAME,
                which: "leading (odd, whole frame)",
            });
        }
        Ok(Corporate1000 {
            company: bits.field(2, 22) as u32,
            card: bits.field(24, 23) as u32,
        })
    }
}

/// The 128-bit frame of a card UUID, most significant bit first.
pub fn encode_uuid(uuid: &[u8; 16]) -> Bits {
    Bits::from_bytes(uuid, 128)
}

/// Decodes a 128-bit card UUID frame (no parity: only the length is checked).
pub fn decode_uuid(bits: &Bits) -> Result<[u8; 16], WiegandError> {
    bits.expect_len("card UUID", 128)?;
    let mut out = [0u8; 16];
    out.copy_from_slice(&bits.to_bytes());
    Ok(out)
}

/// The 200-bit frame of a full FASC-N.
pub fn encode_fascn(fascn: &Fascn) -> Result<Bits, WiegandError> {
    Ok(Bits::from_bytes(&fascn.encode()?, 200))
}

/// Decodes a 200-bit frame, checking every FASC-N character's parity and the LRC.
pub fn decode_fascn(bits: &Bits) -> Result<Fascn, WiegandError> {
    if bits.len() != 200 {
        return Err(WiegandError::Length {
            format: "FASC-N",
            expected: 200,
            got: bits.len(),
        });
    }
    Ok(Fascn::decode(&bits.to_bytes())?)
}

/// Pulse timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Low time of each pulse (typically 50 µs).
    pub pulse_width: Duration,
    /// Start-to-start time between pulses (typically 2 ms).
    pub bit_interval: Duration,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            pulse_width: Duration::from_micros(50),
            bit_interval: Duration::from_millis(2),
        }
    }
}

impl Timing {
    /// The time a frame of `bits` bits occupies the wires: one interval per bit.
    pub fn frame_time(&self, bits: usize) -> Duration {
        self.bit_interval * bits as u32
    }

    /// The pulse schedule: for each bit, its start offset and the line it
    /// pulls low (false = DATA0, true = DATA1).
    pub fn schedule(&self, bits: &Bits) -> Vec<(Duration, bool)> {
        bits.0
            .iter()
            .enumerate()
            .map(|(i, &b)| (self.bit_interval * i as u32, b))
            .collect()
    }
}

/// Where a Wiegand frame goes: the two data lines.
pub trait WiegandOutput {
    /// Sends `bits` with `timing`, returning when the last pulse is done.
    fn send(&mut self, bits: &Bits, timing: &Timing) -> std::io::Result<()>;
}

/// A line that records what it was asked to send, with each pulse's start
/// offset: the backend for tests and for showing a frame's timing.
#[derive(Debug, Default)]
pub struct RecordedLine {
    /// Every frame sent: its pulse schedule (start offset, DATA1?) and pulse width.
    pub frames: Vec<(Vec<(Duration, bool)>, Duration)>,
}

impl WiegandOutput for RecordedLine {
    fn send(&mut self, bits: &Bits, timing: &Timing) -> std::io::Result<()> {
        self.frames
            .push((timing.schedule(bits), timing.pulse_width));
        Ok(())
    }
}

/// The panel side of a Wiegand reader, sans-I/O: feed it each pulse with its
/// time; a frame ends when the lines stay quiet for `frame_gap`.
#[derive(Debug)]
pub struct WiegandReceiver {
    frame_gap: Duration,
    bits: Vec<bool>,
    last: Option<std::time::Instant>,
    max_bits: usize,
}

impl WiegandReceiver {
    /// `frame_gap` is the silence that ends a frame (well above the bit
    /// interval; 25 ms is common); frames longer than `max_bits` are cut.
    pub fn new(frame_gap: Duration, max_bits: usize) -> WiegandReceiver {
        WiegandReceiver {
            frame_gap,
            bits: Vec::new(),
            last: None,
            max_bits,
        }
    }

    /// A pulse on DATA1 (`one`) or DATA0 at `at`. Returns a finished frame if
    /// this pulse came after a gap that ended the previous one.
    pub fn pulse(&mut self, at: std::time::Instant, one: bool) -> Option<Bits> {
        let done = self.poll(at);
        if self.bits.len() < self.max_bits {
            self.bits.push(one);
        }
        self.last = Some(at);
        done
    }

    /// The frame, once the lines have been quiet for the gap at `now`.
    pub fn poll(&mut self, now: std::time::Instant) -> Option<Bits> {
        let last = self.last?;
        if now.saturating_duration_since(last) < self.frame_gap || self.bits.is_empty() {
            return None;
        }
        self.last = None;
        Some(Bits(std::mem::take(&mut self.bits)))
    }

    /// When [`WiegandReceiver::poll`] should next be called.
    pub fn deadline(&self) -> Option<std::time::Instant> {
        self.last.map(|l| l + self.frame_gap)
    }
}

/// A credential's frame as a reader module would send it to its panel: the
/// bits, their timing and a name for the format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedFrame {
    /// The format, e.g. "FASC-N" or "H10301".
    pub name: &'static str,
    pub bits: Bits,
    pub timing: Timing,
}

/// The formats a granted credential can be sent in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialFormat {
    /// The full 25-byte FASC-N, 200 bits.
    Fascn200,
    /// 26-bit H10301: a facility code (0–255) and the FASC-N credential
    /// number (which must be below 65536).
    H10301 { facility: Option<u32> },
    /// 75-bit PIV: the FASC-N's agency code, system code and credential
    /// number with the card's expiration date.
    Piv75,
    /// 48-bit Corporate 1000: a company ID (22 bits) and the FASC-N
    /// credential number as the card number.
    Corporate1000 { company: Option<u32> },
    /// The card's 16-byte UUID, 128 bits.
    Uuid128,
}

/// What a card said about itself that a frame can carry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CardIds<'a> {
    pub fascn: Option<&'a Fascn>,
    pub uuid: Option<&'a [u8; 16]>,
    /// The credential's expiration date.
    pub expiration: Option<ChuidDate>,
}

impl TimedFrame {
    /// The frame of a credential `card` in `format`, pulsed as `timing` says
    /// (the pulse must be shorter than the bit interval).
    pub fn for_credential(
        format: CredentialFormat,
        card: CardIds<'_>,
        timing: Timing,
    ) -> Result<TimedFrame, WiegandError> {
        let wrong = |s: &str| WiegandError::Credential(s.to_string());
        if timing.pulse_width.is_zero() || timing.pulse_width >= timing.bit_interval {
            return Err(wrong(
                "--wiegand-pulse-us must be above 0 and below --wiegand-interval-us",
            ));
        }
        let fascn = || {
            card.fascn
                .ok_or_else(|| wrong("the card has no FASC-N to send over Wiegand"))
        };
        let credential_number = |format: &'static str, bits: u32| -> Result<u32, WiegandError> {
            let f = fascn()?;
            let n: u64 = f.credential_number.parse().map_err(|_| {
                WiegandError::Credential(format!(
                    "the FASC-N credential number {:?} is not a number",
                    f.credential_number
                ))
            })?;
            fits(
                format,
                "card number (the FASC-N credential number)",
                n,
                bits,
            )?;
            Ok(n as u32)
        };
        let (name, bits) = match format {
            CredentialFormat::Fascn200 => ("FASC-N", encode_fascn(fascn()?)?),
            CredentialFormat::H10301 { facility } => {
                let facility = facility.ok_or_else(|| wrong("H10301 needs --wiegand-facility"))?;
                fits("H10301", "facility code", facility.into(), 8)?;
                let card = credential_number("H10301", 16)?;
                (
                    "H10301",
                    H10301 {
                        facility: facility as u8,
                        card: card as u16,
                    }
                    .encode(),
                )
            }
            CredentialFormat::Piv75 => {
                let expiration = card
                    .expiration
                    .ok_or_else(|| wrong("75-bit PIV needs the card's expiration date"))?;
                (
                    Piv75::NAME,
                    Piv75::from_fascn(fascn()?, expiration)?.encode()?,
                )
            }
            CredentialFormat::Corporate1000 { company } => {
                let company = company.ok_or_else(|| {
                    wrong("Corporate 1000 needs its company ID in --wiegand-facility")
                })?;
                let card = credential_number(Corporate1000::NAME, 23)?;
                (
                    Corporate1000::NAME,
                    Corporate1000 { company, card }.encode()?,
                )
            }
            CredentialFormat::Uuid128 => {
                let uuid = card
                    .uuid
                    .ok_or_else(|| wrong("the card has no UUID to send over Wiegand"))?;
                ("card UUID", encode_uuid(uuid))
            }
        };
        Ok(TimedFrame { name, bits, timing })
    }

    /// The frame's time on the wire.
    pub fn wire_time(&self) -> Duration {
        self.timing.frame_time(self.bits.len())
    }

    /// The frame as text: comment lines (format, bit count, pulse timing,
    /// time on the wire, the bits, the hex), then one line per pulse,
    /// `offset_us DATA0|DATA1`.
    pub fn record(&self) -> String {
        use std::fmt::Write as _;
        let mut line = RecordedLine::default();
        // A recorded line cannot fail.
        let _ = line.send(&self.bits, &self.timing);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# wiegand {}: {} bits, pulse {} us every {} us, {:.1} ms on the wire",
            self.name,
            self.bits.len(),
            self.timing.pulse_width.as_micros(),
            self.timing.bit_interval.as_micros(),
            self.wire_time().as_secs_f64() * 1e3
        );
        let bits: String = self
            .bits
            .0
            .iter()
            .map(|&b| if b { '1' } else { '0' })
            .collect();
        let _ = writeln!(s, "# bits {bits}");
        let _ = writeln!(s, "# hex {}", lower_hex(&self.bits.to_bytes()));
        for (frame, _) in &line.frames {
            for (at, one) in frame {
                let _ = writeln!(
                    s,
                    "{} {}",
                    at.as_micros(),
                    if *one { "DATA1" } else { "DATA0" }
                );
            }
        }
        s
    }
}

/// Lower-case hex digits.
fn lower_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(bits: &str) -> Bits {
        Bits(bits.chars().map(|c| c == '1').collect())
    }

    #[test]
    fn h10301_vectors() {
        // Facility 1, card 1: bits 1..12 = 00000001 0000 hold one 1, so the
        // even-parity bit is 1; bits 13..24 = 000000000001 hold one 1, so the
        // odd-parity bit is 0 (layout and rules from HID's "Understanding Card
        // Data Formats", derived by hand).
        assert_eq!(
            H10301 {
                facility: 1,
                card: 1
            }
            .encode(),
            s("10000000100000000000000010")
        );
        // Facility 255, card 65535: bits 1..12 have 12 ones (even → 0), bits
        // 13..24 have 12 ones (odd → 1).
        assert_eq!(
            H10301 {
                facility: 255,
                card: 65535
            }
            .encode(),
            s("01111111111111111111111111")
        );
        // Published examples:
        // - accessgrid.com, "Examples of every access control bit format"
        //   (2025), Standard 26bit (H10301): facility 42, card 69.
        assert_eq!(
            H10301 {
                facility: 42,
                card: 69
            }
            .encode(),
            s("10010101000000000010001010")
        );
        // - Nedap COMBI-BOOSTER user's manual, §6.3: an HID card with
        //   facility code 10 and number 1093 is sent as hex 014088B.
        let bits = H10301 {
            facility: 10,
            card: 1093,
        }
        .encode();
        let value = bits.0.iter().fold(0u32, |a, &b| (a << 1) | u32::from(b));
        assert_eq!(value, 0x014088B);
        assert_eq!(
            H10301::decode(&bits).unwrap(),
            H10301 {
                facility: 10,
                card: 1093
            }
        );
        for v in [(0u8, 0u16), (18, 51387), (123, 4567), (255, 0)] {
            let c = H10301 {
                facility: v.0,
                card: v.1,
            };
            assert_eq!(H10301::decode(&c.encode()).unwrap(), c);
        }
        let mut bad = H10301 {
            facility: 18,
            card: 51387,
        }
        .encode();
        bad.0[5] = !bad.0[5];
        assert!(matches!(
            H10301::decode(&bad),
            Err(WiegandError::Parity { .. })
        ));
        bad.0[5] = !bad.0[5];
        bad.0[20] = !bad.0[20];
        assert!(matches!(
            H10301::decode(&bad),
            Err(WiegandError::Parity { .. })
        ));
    }

    #[test]
    fn fascn_frame_of_the_published_sample() {
        // The sample FASC-N of SP 800-73 / TIG SCEPACS (hex of the 25 bytes):
        // the 200-bit frame is these bits, first bit = MSB of the first byte.
        let sample = hex::decode("D4E739DA739CED39CE739D836858210842108421C84210C3EB").unwrap();
        let f = Fascn::decode(&sample).unwrap();
        let bits = encode_fascn(&f).unwrap();
        assert_eq!(bits.to_bytes(), sample);
        assert_eq!(
            &bits.0[..8],
            &[true, true, false, true, false, true, false, false]
        );
        assert_eq!(decode_fascn(&bits).unwrap().agency_code, "9999");
        assert!(matches!(
            decode_fascn(&Bits(bits.0[..199].to_vec())),
            Err(WiegandError::Length {
                expected: 200,
                got: 199,
                ..
            })
        ));
    }

    #[test]
    fn fascn_frame_round_trips_and_detects_single_bit_errors() {
        let f = Fascn::from_digits("70999999999999991234567890112341").unwrap();
        let bits = encode_fascn(&f).unwrap();
        assert_eq!(bits.len(), 200);
        assert_eq!(decode_fascn(&bits).unwrap(), f);
        for i in 0..200 {
            let mut b = bits.clone();
            b.0[i] = !b.0[i];
            assert!(decode_fascn(&b).is_err(), "bit {i} flip undetected");
        }
    }

    #[test]
    fn receiver_reassembles_frames_from_timed_pulses() {
        let timing = Timing::default();
        let frame = H10301 {
            facility: 42,
            card: 69,
        }
        .encode();
        let mut line = RecordedLine::default();
        line.send(&frame, &timing).unwrap();
        let (schedule, width) = &line.frames[0];
        assert_eq!(*width, Duration::from_micros(50));
        assert_eq!(schedule.len(), 26);
        assert_eq!(schedule[25].0, Duration::from_millis(50));

        let mut rx = WiegandReceiver::new(Duration::from_millis(25), 256);
        let t0 = std::time::Instant::now();
        for (at, one) in schedule {
            assert_eq!(rx.pulse(t0 + *at, *one), None);
        }
        let end = t0 + schedule[25].0;
        assert_eq!(rx.deadline(), Some(end + Duration::from_millis(25)));
        assert_eq!(rx.poll(end + Duration::from_millis(10)), None);
        let got = rx.poll(end + Duration::from_millis(25)).unwrap();
        assert_eq!(
            H10301::decode(&got).unwrap(),
            H10301 {
                facility: 42,
                card: 69
            }
        );
        // A second frame after the gap is reported when its first pulse arrives
        // only if the first one was not collected; here it starts clean.
        let t1 = end + Duration::from_secs(1);
        rx.pulse(t1, true);
        assert_eq!(
            rx.poll(t1 + Duration::from_millis(30)),
            Some(Bits(vec![true]))
        );
    }

    /// Proxmark3's `Pack_C1k48s` parity computation, restated over the
    /// frame as two words (`mid` = bits 1–16, `bot` = bits 17–48): an
    /// independent check of the per-position masks above.
    fn c1k48_by_masks(company: u32, card: u32) -> u64 {
        let par = |x: u32| u64::from(x.count_ones() & 1);
        let mut bot: u32 = (card & 0x7F_FFFF) << 1 | (company & 0xFF) << 24;
        let mut mid: u32 = (company & 0x3F_FF00) >> 8;
        mid |= (par((mid & 0x1B6D) ^ (bot & 0xB6DB_6DB6)) as u32) << 14;
        bot |= 1 - par((mid & 0x36DB) ^ (bot & 0x6DB6_DB6C)) as u32;
        mid |= ((1 - par((mid & 0x7FFF) ^ bot)) as u32) << 15;
        u64::from(mid) << 32 | u64::from(bot)
    }

    fn value(bits: &Bits) -> u128 {
        bits.0.iter().fold(0u128, |a, &b| (a << 1) | u128::from(b))
    }

    #[test]
    fn corporate1000_vectors_round_trips_and_parity() {
        // Company 42, card 69 (the values the AccessGrid catalogue uses for
        // its examples): company at bits 3–24, card at 25–47; bit 2's set
        // (4–5, 7–8, …) holds 4 ones → 0, bit 48's set (3–4, 6–7, …) holds 3
        // ones → 0, and bits 2–48 then hold 6 ones → bit 1 is 1. No published
        // bit string for this format was found; `c1k48_by_masks` is the
        // independent check.
        let c = Corporate1000 {
            company: 42,
            card: 69,
        };
        let bits = c.encode().unwrap();
        assert_eq!(bits.len(), 48);
        assert_eq!(bits, s("100000000000000000101010000000000000000010001010"));
        assert_eq!(value(&bits), 0x8000_2A00_008A);
        for (company, card) in [
            (42, 69),
            (0, 0),
            (0x3F_FFFF, 0x7F_FFFF),
            (1_234_567, 7_654_321),
            (1, 999_999),
        ] {
            let c = Corporate1000 { company, card };
            let bits = c.encode().unwrap();
            assert_eq!(value(&bits), u128::from(c1k48_by_masks(company, card)));
            assert_eq!(Corporate1000::decode(&bits).unwrap(), c);
            // Every single-bit error is caught by one of the three parities.
            for i in 0..48 {
                let mut b = bits.clone();
                b.0[i] = !b.0[i];
                assert!(
                    matches!(Corporate1000::decode(&b), Err(WiegandError::Parity { .. })),
                    "bit {i} flip undetected"
                );
            }
        }
        assert!(matches!(
            Corporate1000 {
                company: 1 << 22,
                card: 0
            }
            .encode(),
            Err(WiegandError::Range { max: 0x3F_FFFF, .. })
        ));
        let e = Corporate1000::decode(&Bits(vec![false; 47])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "a Corporate 1000 48-bit frame is 48 bits, this one is 47"
        );
    }

    #[test]
    fn piv75_vectors_round_trips_and_parity() {
        let date = |t: &str| ChuidDate::parse(t).unwrap();
        // The sample FASC-N of SP 800-73 / TIG SCEPACS (agency 9999, system
        // 9999, credential 999999), expiring 2030-12-31: agency at bits 2–15,
        // system at 16–29, credential at 30–49, 20301231 at 50–74; bits 2–37
        // hold 21 ones (leading bit 1), bits 38–74 hold 22 (trailing bit 1).
        let sample = hex::decode("D4E739DA739CED39CE739D836858210842108421C84210C3EB").unwrap();
        let fascn = Fascn::decode(&sample).unwrap();
        let p = Piv75::from_fascn(&fascn, date("20301231")).unwrap();
        assert_eq!(
            p,
            Piv75 {
                agency: 9999,
                system: 9999,
                credential: 999_999,
                expiration: date("20301231")
            }
        );
        let bits = p.encode().unwrap();
        assert_eq!(
            bits,
            s("110011100001111100111000011111111010000100011111110011010111000101101011111")
        );
        assert_eq!(value(&bits), 0x670_F9C3_FD08_FE6B_8B5F);
        assert_eq!(Piv75::decode(&bits).unwrap(), p);
        // Agency 1, system 1, credential 1, 2000-01-01.
        let small = Piv75 {
            agency: 1,
            system: 1,
            credential: 1,
            expiration: date("20000101"),
        };
        assert_eq!(
            small.encode().unwrap(),
            s("000000000000001000000000000010000000000000000000110011000100101101011001010")
        );
        for i in 0..75 {
            let mut b = bits.clone();
            b.0[i] = !b.0[i];
            assert!(
                matches!(Piv75::decode(&b), Err(WiegandError::Parity { .. })),
                "bit {i} flip undetected"
            );
        }
        // A date field that is no date, with both parities right, is refused.
        let mut b = bits.clone();
        put(&mut b.0, 49, 25, 20_301_232);
        b.0[0] = b.ones(1, 36) % 2 == 1;
        b.0[74] = b.ones(37, 37).is_multiple_of(2);
        assert_eq!(Piv75::decode(&b), Err(WiegandError::Date(20_301_232)));
        assert!(matches!(
            Piv75::decode(&Bits(bits.0[..74].to_vec())),
            Err(WiegandError::Length {
                expected: 75,
                got: 74,
                ..
            })
        ));
        assert!(matches!(
            Piv75 {
                agency: 16_384,
                ..small
            }
            .encode(),
            Err(WiegandError::Range {
                field: "agency code",
                ..
            })
        ));
    }

    #[test]
    fn uuid128_frame() {
        // The example UUID of RFC 4122 §3 / RFC 9562,
        // f81d4fae-7dec-11d0-a765-00a0c91e6bf6: 128 bits, first bit the MSB
        // of 0xf8, no parity.
        let uuid = piv::chuid::parse_uuid("urn:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6").unwrap();
        let bits = encode_uuid(&uuid);
        assert_eq!(bits.len(), 128);
        assert_eq!(value(&bits), 0xf81d_4fae_7dec_11d0_a765_00a0_c91e_6bf6);
        assert_eq!(&bits.0[..5], &[true, true, true, true, true]);
        assert_eq!(decode_uuid(&bits).unwrap(), uuid);
        assert_eq!(
            decode_uuid(&Bits(vec![true; 129])).unwrap_err().to_string(),
            "a card UUID frame is 128 bits, this one is 129"
        );
    }

    #[test]
    fn every_format_from_a_credential() {
        let f = Fascn::from_digits("70999999999999991234567890112341").unwrap();
        let uuid = [0x11u8; 16];
        let card = CardIds {
            fascn: Some(&f),
            uuid: Some(&uuid),
            expiration: Some(ChuidDate::parse("20301231").unwrap()),
        };
        let t = Timing::default();
        let frame = |format| TimedFrame::for_credential(format, card, t);
        let cases = [
            (CredentialFormat::Fascn200, "FASC-N", 200),
            (CredentialFormat::H10301 { facility: Some(7) }, "H10301", 26),
            (CredentialFormat::Piv75, "75-bit PIV", 75),
            (
                CredentialFormat::Corporate1000 { company: Some(42) },
                "Corporate 1000 48-bit",
                48,
            ),
            (CredentialFormat::Uuid128, "card UUID", 128),
        ];
        // The FASC-N's credential number 999999 is too big for H10301.
        for (format, name, len) in cases {
            match frame(format) {
                Ok(fr) => {
                    assert_eq!((fr.name, fr.bits.len()), (name, len));
                    assert_eq!(fr.wire_time(), t.frame_time(len));
                }
                Err(e) => {
                    assert_eq!(name, "H10301");
                    assert!(e.to_string().contains("card number"), "{e}");
                }
            }
        }
        let p = Piv75::decode(&frame(CredentialFormat::Piv75).unwrap().bits).unwrap();
        assert_eq!((p.agency, p.system, p.credential), (7099, 9999, 999_999));
        let c = Corporate1000::decode(
            &frame(CredentialFormat::Corporate1000 { company: Some(42) })
                .unwrap()
                .bits,
        )
        .unwrap();
        assert_eq!(
            c,
            Corporate1000 {
                company: 42,
                card: 999_999
            }
        );
        let none = CardIds::default();
        for format in [
            CredentialFormat::Piv75,
            CredentialFormat::Uuid128,
            CredentialFormat::Corporate1000 { company: None },
        ] {
            assert!(TimedFrame::for_credential(format, none, t).is_err());
        }
        let no_date = CardIds {
            expiration: None,
            ..card
        };
        assert!(
            TimedFrame::for_credential(CredentialFormat::Piv75, no_date, t)
                .unwrap_err()
                .to_string()
                .contains("expiration")
        );
    }

    #[test]
    fn frame_times() {
        let t = Timing::default();
        assert_eq!(t.frame_time(200), Duration::from_millis(400));
        assert_eq!(t.frame_time(26), Duration::from_millis(52));
        let sched = t.schedule(&s("101"));
        assert_eq!(sched[2], (Duration::from_millis(4), true));
    }
}
