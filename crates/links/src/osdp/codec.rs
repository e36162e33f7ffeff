//! The OSDP packet: framing, check characters and a streaming decoder.
//!
//! ```text
//! SOM(0x53) ADDR LEN_LSB LEN_MSB CTRL [SCB_LEN SCB_TYPE SCB_DATA..] CODE DATA.. [MAC×4] CRC_LSB CRC_MSB | CKSUM
//! ```
//! `ADDR` bit 7 marks a reply; `0x7F` is the broadcast address. `LEN` counts
//! every byte from `SOM` to the last check byte. `CTRL` holds the sequence
//! number (bits 0–1), the CRC flag (bit 2: CRC-16, else an 8-bit checksum) and
//! the security-block flag (bit 3). A MAC is present when the security block's
//! type is `SCS_15`..`SCS_18`.
//!
//! The CRC is CRC-16/AUG-CCITT (polynomial 0x1021, initial value 0x1D0F, no
//! reflection, no final XOR), as libosdp's `osdp_compute_crc16` computes it;
//! the checksum is the two's complement of the byte sum.

use thiserror::Error;

/// Start of message.
pub const SOM: u8 = 0x53;
/// The optional mark byte some control panels send before `SOM`.
pub const MARK: u8 = 0xFF;
/// The broadcast address.
pub const BROADCAST: u8 = 0x7F;
/// The largest packet this implementation accepts or builds. PIV APDUs of up to
/// 255 data bytes plus the transparent-mode header, security block, MAC and
/// padding fit with room to spare; the standard lets a PD announce a smaller
/// receive buffer in `osdp_PDCAP`.
pub const MAX_PACKET: usize = 1024;
/// The smallest valid packet: header (5), code (1), checksum (1).
pub const MIN_PACKET: usize = 7;

const CTRL_SQN: u8 = 0x03;
const CTRL_CRC: u8 = 0x04;
const CTRL_SCB: u8 = 0x08;

/// Security control block types (the standard's `SCS_11`..`SCS_18`).
pub mod scs {
    /// CP → PD `osdp_CHLNG`.
    pub const SCS_11: u8 = 0x11;
    /// PD → CP `osdp_CCRYPT`.
    pub const SCS_12: u8 = 0x12;
    /// CP → PD `osdp_SCRYPT`.
    pub const SCS_13: u8 = 0x13;
    /// PD → CP `osdp_RMAC_I`.
    pub const SCS_14: u8 = 0x14;
    /// CP → PD, MAC, data in clear.
    pub const SCS_15: u8 = 0x15;
    /// PD → CP, MAC, data in clear.
    pub const SCS_16: u8 = 0x16;
    /// CP → PD, MAC, data encrypted.
    pub const SCS_17: u8 = 0x17;
    /// PD → CP, MAC, data encrypted.
    pub const SCS_18: u8 = 0x18;
}

/// Why bytes are not a valid OSDP packet.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("the packet does not start with SOM 0x53 (found {0:#04x})")]
    NoSom(u8),
    #[error("the packet's length field says {0} bytes, outside {MIN_PACKET}..={MAX_PACKET}")]
    BadLength(usize),
    #[error("the packet is {got} bytes but its length field says {declared}")]
    LengthMismatch { declared: usize, got: usize },
    #[error("CRC mismatch: computed {computed:#06x}, packet has {found:#06x}")]
    BadCrc { computed: u16, found: u16 },
    #[error("checksum mismatch: computed {computed:#04x}, packet has {found:#04x}")]
    BadChecksum { computed: u8, found: u8 },
    #[error("the security control block is malformed (length {0})")]
    BadScb(u8),
    #[error("unknown security control block type {0:#04x}")]
    UnknownScs(u8),
    #[error("the packet has no room for its command or reply code")]
    NoCode,
    #[error("the packet carries a security block of type {0:#04x} but no room for its 4-byte MAC")]
    NoMac(u8),
    #[error("the packet would be {0} bytes, more than the {MAX_PACKET}-byte limit")]
    TooLarge(usize),
}

/// CRC-16/AUG-CCITT over `bytes` (check value for "123456789" is 0xE5CC).
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0x1D0F;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The 8-bit checksum: two's complement of the sum of `bytes`.
pub fn checksum(bytes: &[u8]) -> u8 {
    bytes
        .iter()
        .fold(0u8, |a, &b| a.wrapping_add(b))
        .wrapping_neg()
}

/// A security control block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scb {
    /// `SCS_11`..`SCS_18`.
    pub kind: u8,
    /// The block's data (for `SCS_11`..`SCS_14` one byte: key selector or status).
    pub data: Vec<u8>,
}

impl Scb {
    /// True when a 4-byte MAC follows the data.
    pub fn has_mac(&self) -> bool {
        self.kind >= scs::SCS_15
    }
}

/// One OSDP packet, with its data field as carried on the wire (encrypted when
/// the block type says so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// PD address (0..=0x7F; 0x7F is broadcast).
    pub address: u8,
    /// Set on replies (address bit 7).
    pub reply: bool,
    /// Sequence number 0..=3.
    pub sqn: u8,
    /// CRC-16 (true) or checksum (false).
    pub crc: bool,
    /// Security control block.
    pub scb: Option<Scb>,
    /// Command or reply code.
    pub code: u8,
    /// Data field.
    pub data: Vec<u8>,
    /// The first 4 bytes of the MAC, when the block type carries one.
    pub mac: Option<[u8; 4]>,
}

impl Frame {
    /// A plain packet with CRC.
    pub fn new(address: u8, reply: bool, sqn: u8, code: u8, data: Vec<u8>) -> Frame {
        Frame {
            address: address & 0x7F,
            reply,
            sqn: sqn & CTRL_SQN,
            crc: true,
            scb: None,
            code,
            data,
            mac: None,
        }
    }

    fn scb_len(&self) -> usize {
        self.scb.as_ref().map_or(0, |s| 2 + s.data.len())
    }

    fn mac_len(&self) -> usize {
        if self.scb.as_ref().is_some_and(Scb::has_mac) {
            4
        } else {
            0
        }
    }

    /// The packet's total length on the wire.
    pub fn wire_len(&self) -> usize {
        5 + self.scb_len() + 1 + self.data.len() + self.mac_len() + if self.crc { 2 } else { 1 }
    }

    /// The bytes a MAC is computed over: `SOM` through the end of the data,
    /// with the length field already counting the MAC and check bytes.
    pub fn mac_input(&self) -> Result<Vec<u8>, FrameError> {
        let total = self.wire_len();
        if total > MAX_PACKET {
            return Err(FrameError::TooLarge(total));
        }
        let mut out = Vec::with_capacity(total);
        out.push(SOM);
        out.push((self.address & 0x7F) | if self.reply { 0x80 } else { 0 });
        out.extend_from_slice(&(total as u16).to_le_bytes());
        let mut ctrl = self.sqn & CTRL_SQN;
        if self.crc {
            ctrl |= CTRL_CRC;
        }
        if self.scb.is_some() {
            ctrl |= CTRL_SCB;
        }
        out.push(ctrl);
        if let Some(scb) = &self.scb {
            if scb.data.len() > 253 {
                return Err(FrameError::BadScb(scb.data.len() as u8));
            }
            out.push((2 + scb.data.len()) as u8);
            out.push(scb.kind);
            out.extend_from_slice(&scb.data);
        }
        out.push(self.code);
        out.extend_from_slice(&self.data);
        Ok(out)
    }

    /// Encodes the packet. A block type that carries a MAC needs `mac` set.
    pub fn encode(&self) -> Result<Vec<u8>, FrameError> {
        let mut out = self.mac_input()?;
        if self.mac_len() == 4 {
            let kind = self.scb.as_ref().map_or(0, |s| s.kind);
            out.extend_from_slice(&self.mac.ok_or(FrameError::NoMac(kind))?);
        }
        if self.crc {
            let c = crc16(&out);
            out.extend_from_slice(&c.to_le_bytes());
        } else {
            let c = checksum(&out);
            out.push(c);
        }
        Ok(out)
    }

    /// Decodes exactly one packet (starting at `SOM`, no mark byte).
    pub fn decode(bytes: &[u8]) -> Result<Frame, FrameError> {
        let head = |i: usize| bytes.get(i).copied();
        let som = head(0).ok_or(FrameError::BadLength(0))?;
        if som != SOM {
            return Err(FrameError::NoSom(som));
        }
        if bytes.len() < 5 {
            return Err(FrameError::BadLength(bytes.len()));
        }
        let declared = usize::from(u16::from_le_bytes([bytes[2], bytes[3]]));
        if !(MIN_PACKET..=MAX_PACKET).contains(&declared) {
            return Err(FrameError::BadLength(declared));
        }
        if declared != bytes.len() {
            return Err(FrameError::LengthMismatch {
                declared,
                got: bytes.len(),
            });
        }
        let ctrl = bytes[4];
        let crc = ctrl & CTRL_CRC != 0;
        let body_end = if crc {
            if declared < MIN_PACKET + 1 {
                return Err(FrameError::BadLength(declared));
            }
            let found = u16::from_le_bytes([bytes[declared - 2], bytes[declared - 1]]);
            let computed = crc16(&bytes[..declared - 2]);
            if found != computed {
                return Err(FrameError::BadCrc { computed, found });
            }
            declared - 2
        } else {
            let found = bytes[declared - 1];
            let computed = checksum(&bytes[..declared - 1]);
            if found != computed {
                return Err(FrameError::BadChecksum { computed, found });
            }
            declared - 1
        };
        let mut pos = 5;
        let scb = if ctrl & CTRL_SCB != 0 {
            let len = *bytes.get(pos).ok_or(FrameError::BadScb(0))?;
            let l = usize::from(len);
            if l < 2 || pos + l > body_end {
                return Err(FrameError::BadScb(len));
            }
            let kind = bytes[pos + 1];
            if !(scs::SCS_11..=scs::SCS_18).contains(&kind) {
                return Err(FrameError::UnknownScs(kind));
            }
            let data = bytes[pos + 2..pos + l].to_vec();
            pos += l;
            Some(Scb { kind, data })
        } else {
            None
        };
        let mac_len = if scb.as_ref().is_some_and(Scb::has_mac) {
            4
        } else {
            0
        };
        if pos >= body_end {
            return Err(FrameError::NoCode);
        }
        if body_end < pos + 1 + mac_len {
            return Err(FrameError::NoMac(scb.as_ref().map_or(0, |s| s.kind)));
        }
        let code = bytes[pos];
        let data = bytes[pos + 1..body_end - mac_len].to_vec();
        let mac = (mac_len == 4).then(|| {
            let m = &bytes[body_end - 4..body_end];
            [m[0], m[1], m[2], m[3]]
        });
        Ok(Frame {
            address: bytes[1] & 0x7F,
            reply: bytes[1] & 0x80 != 0,
            sqn: ctrl & CTRL_SQN,
            crc,
            scb,
            code,
            data,
            mac,
        })
    }
}

/// Counters of what a [`FrameDecoder`] discarded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Packets decoded.
    pub frames: u64,
    /// Bytes skipped while looking for `SOM` (mark bytes not counted).
    pub garbage_bytes: u64,
    /// Candidate packets rejected (bad length, check or structure).
    pub bad_frames: u64,
}

/// A streaming decoder: feed it bytes as they arrive, take packets out. After
/// garbage or a damaged packet it resynchronises on the next `SOM`.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    stats: DecoderStats,
    /// While the packet at the front is incomplete: how far `buf` was
    /// searched for later packet starts, and the starts found whose packets
    /// were still incomplete (position, end). Each start is looked at once
    /// when found and decoded once when complete, so a stray start byte
    /// announcing a long packet costs linear time, not a rescan per push.
    scanned: usize,
    later: Vec<(usize, usize)>,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> FrameDecoder {
        FrameDecoder::default()
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// What was decoded and discarded so far.
    pub fn stats(&self) -> DecoderStats {
        self.stats
    }

    /// Bytes held waiting for the rest of a packet.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Drops any partial packet (e.g. after a reply timeout).
    pub fn clear(&mut self) {
        self.buf.clear();
        self.forget_later();
    }

    fn forget_later(&mut self) {
        self.scanned = 0;
        self.later.clear();
    }

    /// Drops `n` bytes from the front (the later starts move with them).
    fn consume(&mut self, n: usize) {
        self.buf.drain(..n);
        if n > 0 {
            self.forget_later();
        }
    }

    /// The next complete packet, or an error for a rejected candidate (the
    /// decoder has already skipped past it), or `None` until more bytes arrive.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<Frame, FrameError>> {
        let start = self.buf.iter().position(|&b| b == SOM);
        let skip = start.unwrap_or(self.buf.len());
        self.stats.garbage_bytes += self.buf[..skip].iter().filter(|&&b| b != MARK).count() as u64;
        self.consume(skip);
        if self.buf.len() < 5 {
            return None;
        }
        let declared = usize::from(u16::from_le_bytes([self.buf[2], self.buf[3]]));
        if !(MIN_PACKET..=MAX_PACKET).contains(&declared) {
            self.consume(1);
            self.stats.bad_frames += 1;
            return Some(Err(FrameError::BadLength(declared)));
        }
        if self.buf.len() < declared {
            // Either the rest has not arrived yet, or this SOM was a stray
            // byte announcing a long packet. If a complete, valid packet
            // starts after it, the stray start is dropped.
            return self.later_frame();
        }
        match Frame::decode(&self.buf[..declared]) {
            Ok(frame) => {
                self.consume(declared);
                self.stats.frames += 1;
                Some(Ok(frame))
            }
            Err(e) => {
                // A damaged packet, or a stray 0x53 inside garbage: skip
                // this SOM only, so a real packet starting inside the
                // rejected span is still found.
                self.consume(1);
                self.stats.bad_frames += 1;
                Some(Err(e))
            }
        }
    }
}

impl FrameDecoder {
    fn later_frame(&mut self) -> Option<Result<Frame, FrameError>> {
        // New start bytes since the last look (a start whose header is not
        // all here yet is looked at again once it is).
        let mut from = self.scanned.max(1);
        while let Some(off) = self.buf[from..].iter().position(|&b| b == SOM) {
            let p = from + off;
            let Some(h) = self.buf.get(p..p + 5) else {
                from = p;
                break;
            };
            from = p + 1;
            let len = usize::from(u16::from_le_bytes([h[2], h[3]]));
            if (MIN_PACKET..=MAX_PACKET).contains(&len) {
                self.later.push((p, p + len));
            }
        }
        self.scanned = if self.buf[from..].contains(&SOM) {
            from
        } else {
            self.buf.len()
        };
        let have = self.buf.len();
        let mut k = 0;
        while k < self.later.len() {
            let (p, end) = self.later[k];
            if end > have {
                k += 1;
                continue;
            }
            self.later.remove(k);
            if let Ok(frame) = Frame::decode(&self.buf[p..end]) {
                self.stats.bad_frames += 1;
                self.stats.garbage_bytes += p as u64;
                self.consume(end);
                self.stats.frames += 1;
                return Some(Ok(frame));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_check_value() {
        // CRC-16/AUG-CCITT check value from the CRC RevEng catalogue.
        assert_eq!(crc16(b"123456789"), 0xE5CC);
    }

    #[test]
    fn annex_e_check_character_vectors() {
        // OSDP specification Annex E, as transcribed in libosdp
        // tests/unit-tests/test-sc-sia-vectors.c.
        let crc1 = crc16(&[
            0x53, 0x7F, 0x0D, 0x00, 0x04, 0x6E, 0x00, 0x80, 0x25, 0x00, 0x00,
        ]);
        assert_eq!(crc1.to_le_bytes(), [0x6E, 0x38]);
        let crc2 = crc16(&[0x53, 0x00, 0x09, 0x00, 0x04, 0x61, 0x00]);
        assert_eq!(crc2.to_le_bytes(), [0xC0, 0x66]);
        assert_eq!(
            checksum(&[0x53, 0x7F, 0x0C, 0x00, 0x00, 0x6E, 0x00, 0x80, 0x25, 0x00, 0x00]),
            0x0F
        );
        assert_eq!(checksum(&[0x53, 0x00, 0x08, 0x00, 0x00, 0x61, 0x00]), 0x44);
        // The first is a broadcast osdp_COMSET (address 0, 9600 baud): it
        // decodes to the typed command.
        let f = Frame::decode(&[
            0x53, 0x7F, 0x0D, 0x00, 0x04, 0x6E, 0x00, 0x80, 0x25, 0x00, 0x00, 0x6E, 0x38,
        ])
        .unwrap();
        assert_eq!(f.address, BROADCAST);
        assert_eq!(
            crate::osdp::msg::Command::decode(f.code, &f.data).unwrap(),
            crate::osdp::msg::Command::ComSet {
                address: 0,
                baud: 9600
            }
        );
    }

    #[test]
    fn libosdp_poll_and_id_vectors() {
        // libosdp tests/unit-tests/test-cp-phy.c: POLL to PD 0x65 with SQN 0,
        // and ID (data 0x00) with SQN 1, both with CRC (mark byte omitted).
        let poll = Frame::new(0x65, false, 0, 0x60, vec![]);
        assert_eq!(
            poll.encode().unwrap(),
            [0x53, 0x65, 0x08, 0x00, 0x04, 0x60, 0x60, 0x90]
        );
        let id = Frame::new(0x65, false, 1, 0x61, vec![0x00]);
        assert_eq!(
            id.encode().unwrap(),
            [0x53, 0x65, 0x09, 0x00, 0x05, 0x61, 0x00, 0xe9, 0x4d]
        );
        assert_eq!(Frame::decode(&id.encode().unwrap()).unwrap(), id);
    }

    #[test]
    fn checksum_frames_round_trip() {
        let mut f = Frame::new(3, true, 2, 0x40, vec![]);
        f.crc = false;
        let bytes = f.encode().unwrap();
        assert_eq!(bytes.len(), 7);
        assert_eq!(bytes.iter().fold(0u8, |a, &b| a.wrapping_add(b)), 0);
        assert_eq!(Frame::decode(&bytes).unwrap(), f);
    }

    #[test]
    fn a_stray_som_announcing_a_long_packet_does_not_hide_the_next_one() {
        let good = Frame::new(1, false, 1, 0x60, vec![]).encode().unwrap();
        let mut dec = FrameDecoder::new();
        // 0x53 followed by a plausible 0x0300-byte length, then a real packet.
        dec.push(&[0x53, 0x01, 0x00, 0x03, 0x04]);
        dec.push(&good);
        assert_eq!(dec.next(), Some(Ok(Frame::decode(&good).unwrap())));
        assert_eq!(dec.pending(), 0);
        assert_eq!(dec.stats().bad_frames, 1);
    }

    #[test]
    fn decoder_resynchronises_after_garbage_and_damage() {
        let good = Frame::new(1, false, 1, 0x60, vec![]).encode().unwrap();
        let mut damaged = good.clone();
        damaged[5] ^= 0x01;
        let mut dec = FrameDecoder::new();
        dec.push(&[0x00, 0x53, 0x12, MARK]);
        dec.push(&damaged);
        dec.push(&[MARK]);
        dec.push(&good);
        let mut frames = 0;
        let mut errors = 0;
        while let Some(r) = dec.next() {
            match r {
                Ok(f) => {
                    assert_eq!(f.code, 0x60);
                    frames += 1;
                }
                Err(_) => errors += 1,
            }
        }
        assert_eq!(frames, 1);
        assert!(errors >= 1);
        assert_eq!(dec.pending(), 0);
    }
}
