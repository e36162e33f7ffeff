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

use std::time::Duration;

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
    #[error("H10301 facility code {0} does not fit in 8 bits")]
    Facility(u32),
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
    /// 26-bit H10301: a facility code and the FASC-N credential number
    /// (which must be below 65536).
    H10301 { facility: Option<u8> },
}

impl TimedFrame {
    /// The frame of a credential with `fascn` in `format`, pulsed as
    /// `timing` says (the pulse must be shorter than the bit interval).
    pub fn for_credential(
        format: CredentialFormat,
        fascn: Option<&Fascn>,
        timing: Timing,
    ) -> Result<TimedFrame, WiegandError> {
        let wrong = |s: &str| WiegandError::Credential(s.to_string());
        if timing.pulse_width.is_zero() || timing.pulse_width >= timing.bit_interval {
            return Err(wrong(
                "--wiegand-pulse-us must be above 0 and below --wiegand-interval-us",
            ));
        }
        let fascn = fascn.ok_or_else(|| wrong("the card has no FASC-N to send over Wiegand"))?;
        let (name, bits) = match format {
            CredentialFormat::Fascn200 => ("FASC-N", encode_fascn(fascn)?),
            CredentialFormat::H10301 { facility } => {
                let facility = facility.ok_or_else(|| wrong("H10301 needs --wiegand-facility"))?;
                let card: u16 = fascn.credential_number.parse().map_err(|_| {
                    WiegandError::Credential(format!(
                        "the FASC-N credential number {} does not fit H10301's 16-bit card number",
                        fascn.credential_number
                    ))
                })?;
                ("H10301", H10301 { facility, card }.encode())
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

    #[test]
    fn frame_times() {
        let t = Timing::default();
        assert_eq!(t.frame_time(200), Duration::from_millis(400));
        assert_eq!(t.frame_time(26), Duration::from_millis(52));
        let sched = t.schedule(&s("101"));
        assert_eq!(sched[2], (Duration::from_millis(4), true));
    }
}
