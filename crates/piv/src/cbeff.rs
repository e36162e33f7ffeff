//! Biometric data objects in the SP 800-76-2 form: the Cardholder
//! Fingerprints (`5FC103`, SP 800-73-4 Part 1 Table 11) and Cardholder Facial
//! Image (`5FC108`, Table 13) containers hold one element (`BC`) that is a
//! CBEFF record, then the error detection code (`FE`). A CBEFF record (SP 800-76-2 §9) is the patron-format header
//! (Table 7, 88 bytes), the biometric data block (an INCITS 378 minutiae
//! record or an INCITS 385 / ISO 19794-5 facial image record) and the
//! signature block (a CMS SignedData with the content detached: its message
//! digest covers the header and the data block).

use crate::error::PivError;
use iso7816::tlv::{self, Reader};

/// The tag of the CBEFF record inside the biometric containers.
pub const TAG_BIOMETRIC: u32 = 0xBC;
/// The length of the CBEFF patron-format header.
pub const HEADER_LEN: usize = 88;
/// Patron header version of SP 800-76-2.
pub const PATRON_HEADER_VERSION: u8 = 0x03;
/// SBH security options: signed, integrity (b00001101).
pub const SECURITY_OPTIONS_SIGNED: u8 = 0x0D;
/// BDB format owner: INCITS Technical Committee M1.
pub const FORMAT_OWNER_M1: u16 = 0x001B;
/// BDB format type: INCITS 378 finger minutiae.
pub const FORMAT_FINGER_MINUTIAE: u16 = 0x0201;
/// BDB format type: INCITS 385 face image.
pub const FORMAT_FACE_IMAGE: u16 = 0x0501;
/// Biometric type: fingerprint.
pub const TYPE_FINGERPRINT: u32 = 0x000008;
/// Biometric type: facial features.
pub const TYPE_FACE: u32 = 0x000002;
/// Biometric data type: processed (minutiae), b100xxxxx.
pub const DATA_PROCESSED: u8 = 0x80;
/// Biometric data type: raw (image), b001xxxxx.
pub const DATA_RAW: u8 = 0x20;

/// A date and time in the 8-byte binary form of the CBEFF header:
/// `YYYYMMDDhhmmssZ`, the year in two bytes, each other pair one byte, then `Z`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct CbeffTime {
    pub year: u16,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
}

impl CbeffTime {
    pub fn encode(self) -> [u8; 8] {
        let y = self.year.to_be_bytes();
        [
            y[0],
            y[1],
            self.month,
            self.day,
            self.hour,
            self.minute,
            self.second,
            b'Z',
        ]
    }

    pub fn decode(b: &[u8; 8]) -> Result<Self, PivError> {
        let t = CbeffTime {
            year: u16::from_be_bytes([b[0], b[1]]),
            month: b[2],
            day: b[3],
            hour: b[4],
            minute: b[5],
            second: b[6],
        };
        if b[7] != b'Z'
            || !(1..=12).contains(&t.month)
            || !(1..=31).contains(&t.day)
            || t.hour > 23
            || t.minute > 59
            || t.second > 60
        {
            return Err(PivError::invalid("CBEFF date", "not YYYYMMDDhhmmssZ"));
        }
        Ok(t)
    }
}

impl std::fmt::Display for CbeffTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// The CBEFF patron-format header of SP 800-76-2 Table 7.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CbeffHeader {
    pub version: u8,
    pub security_options: u8,
    pub bdb_length: u32,
    pub sb_length: u16,
    pub format_owner: u16,
    pub format_type: u16,
    pub created: CbeffTime,
    pub not_before: CbeffTime,
    pub not_after: CbeffTime,
    /// 3 bytes.
    pub biometric_type: u32,
    pub data_type: u8,
    /// -2 "not supported", -1 "not set", 0..=100.
    pub quality: i8,
    /// Up to 17 printable characters (NUL-terminated in 18 bytes).
    pub creator: String,
    #[serde(with = "hex_bytes")]
    pub fascn: [u8; 25],
}

mod hex_bytes {
    pub fn serialize<S: serde::Serializer>(b: &[u8; 25], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode_upper(b))
    }
}

impl CbeffHeader {
    /// The 88 header bytes (the creator is cut to 17 bytes).
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0] = self.version;
        h[1] = self.security_options;
        h[2..6].copy_from_slice(&self.bdb_length.to_be_bytes());
        h[6..8].copy_from_slice(&self.sb_length.to_be_bytes());
        h[8..10].copy_from_slice(&self.format_owner.to_be_bytes());
        h[10..12].copy_from_slice(&self.format_type.to_be_bytes());
        h[12..20].copy_from_slice(&self.created.encode());
        h[20..28].copy_from_slice(&self.not_before.encode());
        h[28..36].copy_from_slice(&self.not_after.encode());
        h[36..39].copy_from_slice(&self.biometric_type.to_be_bytes()[1..]);
        h[39] = self.data_type;
        h[40] = self.quality as u8;
        let c = self.creator.as_bytes();
        let n = c.len().min(17);
        h[41..41 + n].copy_from_slice(&c[..n]);
        h[59..84].copy_from_slice(&self.fascn);
        // 84..88: reserved, zero.
        h
    }

    pub fn decode(h: &[u8]) -> Result<Self, PivError> {
        let h: &[u8; HEADER_LEN] = h
            .get(..HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(PivError::invalid("CBEFF header", "shorter than 88 bytes"))?;
        let date = |i: usize| CbeffTime::decode(h[i..i + 8].try_into().expect("8 bytes"));
        let creator = &h[41..59];
        let end = creator
            .iter()
            .position(|&b| b == 0)
            .ok_or(PivError::invalid("CBEFF creator", "not NUL-terminated"))?;
        let creator = std::str::from_utf8(&creator[..end])
            .map_err(|_| PivError::invalid("CBEFF creator", "not text"))?;
        Ok(CbeffHeader {
            version: h[0],
            security_options: h[1],
            bdb_length: u32::from_be_bytes([h[2], h[3], h[4], h[5]]),
            sb_length: u16::from_be_bytes([h[6], h[7]]),
            format_owner: u16::from_be_bytes([h[8], h[9]]),
            format_type: u16::from_be_bytes([h[10], h[11]]),
            created: date(12)?,
            not_before: date(20)?,
            not_after: date(28)?,
            biometric_type: u32::from_be_bytes([0, h[36], h[37], h[38]]),
            data_type: h[39],
            quality: h[40] as i8,
            creator: creator.to_string(),
            fascn: h[59..84].try_into().expect("25 bytes"),
        })
    }
}

/// A CBEFF record split into its three parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CbeffRecord {
    pub header: CbeffHeader,
    pub bdb: Vec<u8>,
    pub signature_block: Vec<u8>,
    /// The header and data block as stored: what the signature covers.
    pub signed_bytes: Vec<u8>,
}

impl CbeffRecord {
    /// Splits the value of tag `BC` by the lengths in its header.
    pub fn parse(bc: &[u8]) -> Result<Self, PivError> {
        let header = CbeffHeader::decode(bc)?;
        let bdb_end = HEADER_LEN
            .checked_add(header.bdb_length as usize)
            .filter(|&e| e <= bc.len())
            .ok_or(PivError::invalid(
                "CBEFF record",
                "the data block is longer than the record",
            ))?;
        let sb_end = bdb_end + usize::from(header.sb_length);
        if sb_end != bc.len() {
            return Err(PivError::invalid(
                "CBEFF record",
                "the header's lengths do not add up to the record's",
            ));
        }
        Ok(CbeffRecord {
            bdb: bc[HEADER_LEN..bdb_end].to_vec(),
            signature_block: bc[bdb_end..].to_vec(),
            signed_bytes: bc[..bdb_end].to_vec(),
            header,
        })
    }
}

/// Encodes a biometric container's content: `BC` (the CBEFF record) and `FE`.
pub fn encode_container(record: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(record.len() + 8);
    tlv::push(&mut out, TAG_BIOMETRIC, record);
    tlv::push(&mut out, 0xFE, &[]);
    out
}

/// The CBEFF record (value of `BC`) of a biometric container's content (or
/// of the whole `53` TLV).
pub fn container_record(data: &[u8]) -> Result<&[u8], PivError> {
    let data = crate::container_content(data, crate::CONTAINER_TAG)?;
    let mut record = None;
    for t in Reader::new(data) {
        let t = t?;
        match t.tag {
            TAG_BIOMETRIC if record.is_none() => record = Some(t.value),
            TAG_BIOMETRIC => return Err(PivError::DuplicateTag(t.tag)),
            0xFE => {}
            other => return Err(PivError::UnexpectedTag(other)),
        }
    }
    record.ok_or(PivError::MissingTag(TAG_BIOMETRIC))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(y: u16) -> CbeffTime {
        CbeffTime {
            year: y,
            month: 11,
            day: 23,
            hour: 7,
            minute: 45,
            second: 1,
        }
    }

    fn header() -> CbeffHeader {
        CbeffHeader {
            version: PATRON_HEADER_VERSION,
            security_options: SECURITY_OPTIONS_SIGNED,
            bdb_length: 3,
            sb_length: 2,
            format_owner: FORMAT_OWNER_M1,
            format_type: FORMAT_FINGER_MINUTIAE,
            created: t(2026),
            not_before: t(2026),
            not_after: t(2031),
            biometric_type: TYPE_FINGERPRINT,
            data_type: DATA_PROCESSED,
            quality: -2,
            creator: "pivgate test data".into(),
            fascn: [0xD4; 25],
        }
    }

    #[test]
    fn header_round_trips_in_88_bytes() {
        let h = header();
        let enc = h.encode();
        assert_eq!(enc[0..2], [0x03, 0x0D]);
        assert_eq!(enc[12..20], [0x07, 0xEA, 11, 23, 7, 45, 1, b'Z']);
        assert_eq!(enc[36..39], [0, 0, 8]);
        assert_eq!(enc[58], 0, "the creator is NUL-terminated");
        assert_eq!(CbeffHeader::decode(&enc).unwrap(), h);
        assert!(CbeffHeader::decode(&enc[..87]).is_err());
    }

    #[test]
    fn records_split_by_their_lengths() {
        let mut rec = header().encode().to_vec();
        rec.extend_from_slice(&[1, 2, 3, 0x30, 0x00]);
        let c = encode_container(&rec);
        let r = CbeffRecord::parse(container_record(&c).unwrap()).unwrap();
        assert_eq!(r.bdb, [1, 2, 3]);
        assert_eq!(r.signature_block, [0x30, 0x00]);
        assert_eq!(r.signed_bytes.len(), HEADER_LEN + 3);
        assert!(CbeffRecord::parse(&rec[..rec.len() - 1]).is_err());
        assert_eq!(
            container_record(&[0xFE, 0x00]).unwrap_err(),
            PivError::MissingTag(0xBC)
        );
    }

    proptest::proptest! {
        #[test]
        fn parsing_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = CbeffRecord::parse(&bytes);
            let _ = container_record(&bytes);
        }
    }
}
