//! Card Holder Unique Identifier (CHUID, SP 800-73-4 Part 1 §3.1.2, data
//! object `5FC102`): TLV encoding and decoding.
//!
//! | tag | element | |
//! |---|---|---|
//! | `EE` | buffer length | optional, deprecated |
//! | `30` | FASC-N | 25 bytes |
//! | `32` | organisational identifier | optional |
//! | `33` | DUNS | optional |
//! | `34` | GUID (the card UUID) | 16 bytes |
//! | `35` | expiration date | 8 ASCII digits `YYYYMMDD` |
//! | `36` | cardholder UUID | optional, 16 bytes |
//! | `3D` | authentication key map | optional, deprecated (SP 800-73-1) |
//! | `3E` | issuer asymmetric signature | CMS SignedData |
//! | `FE` | error detection code | empty |
//!
//! [`Chuid::encode`] produces the content of the data object (the TLVs, not
//! wrapped in the `53` container); [`Chuid::decode`] accepts either form.
//!
//! The issuer signature's message digest covers "the concatenated contents of
//! the CHUID, excluding the asymmetric signature field" (SP 800-73-4 Part 1
//! §3.1.2.1): every TLV except `3E`, as encoded, which ends with the error
//! detection code `FE 00` since that element follows the signature
//! ([`Chuid::digest_content`], [`digest_content_of`]). Some issuers hash the
//! TLVs without `FE 00` ([`signed_content_of`]); verifiers accept both.

use iso7816::tlv::{self, Reader, TlvError};
use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

use crate::fascn::{Fascn, FascnError, FASCN_LEN};

pub const TAG_BUFFER_LENGTH: u32 = 0xEE;
pub const TAG_FASCN: u32 = 0x30;
pub const TAG_ORG_IDENTIFIER: u32 = 0x32;
pub const TAG_DUNS: u32 = 0x33;
pub const TAG_GUID: u32 = 0x34;
pub const TAG_EXPIRATION: u32 = 0x35;
pub const TAG_CARDHOLDER_UUID: u32 = 0x36;
/// Authentication Key Map (SP 800-73-1; deprecated, still found on older cards).
pub const TAG_AUTH_KEY_MAP: u32 = 0x3D;
pub const TAG_SIGNATURE: u32 = 0x3E;
pub const TAG_EDC: u32 = 0xFE;

/// Why a CHUID could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChuidError {
    #[error("CHUID TLV structure is malformed: {0}")]
    Tlv(#[from] TlvError),
    #[error("CHUID has no {0} (tag {1:#04X}), which SP 800-73-4 requires")]
    Missing(&'static str, u32),
    #[error("CHUID element {name} (tag {tag:#04X}) must be {expected} byte(s), found {found}")]
    BadLength {
        name: &'static str,
        tag: u32,
        expected: usize,
        found: usize,
    },
    #[error("CHUID element tag {0:#04X} appears twice")]
    Duplicate(u32),
    #[error("CHUID has an unknown element tag {0:#04X}")]
    UnknownTag(u32),
    #[error(
        "CHUID elements are out of order: tag {0:#04X} after the signature or error detection code"
    )]
    OutOfOrder(u32),
    #[error("CHUID expiration date {0:?} is not a valid YYYYMMDD date")]
    BadDate(String),
    #[error("CHUID FASC-N: {0}")]
    Fascn(#[from] FascnError),
    #[error(
        "CHUID error detection code (tag 0xFE) holds {0} byte(s); SP 800-73-4 Table 9 requires it to be empty"
    )]
    EdcNotEmpty(usize),
}

/// A calendar date as stored in the CHUID expiration element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ChuidDate {
    pub year: u16,
    pub month: u8,
    pub day: u8,
}

impl ChuidDate {
    /// Parses `YYYYMMDD` (also accepts `YYYY-MM-DD`).
    pub fn parse(text: &str) -> Result<ChuidDate, ChuidError> {
        let digits: String = text.chars().filter(|&c| c != '-').collect();
        let bad = || ChuidError::BadDate(text.to_string());
        if digits.len() != 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let year: u16 = digits[0..4].parse().map_err(|_| bad())?;
        let month: u8 = digits[4..6].parse().map_err(|_| bad())?;
        let day: u8 = digits[6..8].parse().map_err(|_| bad())?;
        let d = ChuidDate { year, month, day };
        if !(1..=12).contains(&month) || day == 0 || day > d.days_in_month() {
            return Err(bad());
        }
        Ok(d)
    }

    fn days_in_month(&self) -> u8 {
        match self.month {
            4 | 6 | 9 | 11 => 30,
            2 if (self.year.is_multiple_of(4) && !self.year.is_multiple_of(100))
                || self.year.is_multiple_of(400) =>
            {
                29
            }
            2 => 28,
            _ => 31,
        }
    }

    /// The 8 ASCII bytes `YYYYMMDD`.
    pub fn to_bytes(self) -> [u8; 8] {
        let s = self.to_string();
        let mut out = [0u8; 8];
        out.copy_from_slice(s.as_bytes());
        out
    }

    /// Seconds since the Unix epoch of the end of this day (23:59:59 UTC):
    /// a card is valid through its expiration date.
    pub fn end_of_day_unix(self) -> i64 {
        days_from_civil(i64::from(self.year), self.month.into(), self.day.into()) * 86_400 + 86_399
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

impl fmt::Display for ChuidDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}{:02}{:02}", self.year, self.month, self.day)
    }
}

/// A decoded CHUID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chuid {
    /// Buffer length element (`EE`), deprecated; kept when present.
    pub buffer_length: Option<Vec<u8>>,
    /// The 25-byte FASC-N as stored (decode it with [`Chuid::fascn`]).
    pub fascn: [u8; FASCN_LEN],
    pub org_identifier: Option<Vec<u8>>,
    pub duns: Option<Vec<u8>>,
    /// The card UUID (GUID element).
    pub guid: [u8; 16],
    pub expiration: ChuidDate,
    pub cardholder_uuid: Option<[u8; 16]>,
    /// Authentication key map (`3D`), deprecated; kept when present.
    pub auth_key_map: Option<Vec<u8>>,
    /// The issuer asymmetric signature: a DER CMS SignedData (ContentInfo);
    /// `None` when the `3E` element is empty or absent.
    pub signature: Option<Vec<u8>>,
}

/// A card UUID (the CHUID's GUID element, the `urn:uuid:` URI of a PIV
/// certificate's subjectAltName), as a value rather than text. It prints and
/// serialises as `urn:uuid:…` and parses from that form, the hyphenated form
/// or 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CardUuid(pub [u8; 16]);

impl CardUuid {
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Display for CardUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&uuid_urn(&self.0))
    }
}

/// Text that is not a UUID.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "{0:?} is not a UUID (expected urn:uuid:xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx or 32 hex digits)"
)]
pub struct UuidParseError(pub String);

impl std::str::FromStr for CardUuid {
    type Err = UuidParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_uuid(s)
            .map(CardUuid)
            .ok_or_else(|| UuidParseError(s.chars().take(64).collect()))
    }
}

impl Serialize for CardUuid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CardUuid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl From<[u8; 16]> for CardUuid {
    fn from(b: [u8; 16]) -> Self {
        CardUuid(b)
    }
}

/// Formats a UUID as `urn:uuid:xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`
/// (lower case, RFC 4122), the form used in PIV certificates' subjectAltName.
pub fn uuid_urn(uuid: &[u8; 16]) -> String {
    format!("urn:uuid:{}", uuid_string(uuid))
}

/// Formats a UUID as `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn uuid_string(uuid: &[u8; 16]) -> String {
    let h = hex::encode(uuid);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Parses a UUID from `urn:uuid:...`, the hyphenated form, or 32 hex digits.
pub fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let t = text.trim();
    let t = t
        .strip_prefix("urn:uuid:")
        .or_else(|| t.strip_prefix("URN:UUID:"))
        .unwrap_or(t);
    let compact: String = t.chars().filter(|&c| c != '-').collect();
    if compact.len() != 32 {
        return None;
    }
    hex::decode(compact).ok()?.try_into().ok()
}

fn fixed<const N: usize>(name: &'static str, tag: u32, v: &[u8]) -> Result<[u8; N], ChuidError> {
    v.try_into().map_err(|_| ChuidError::BadLength {
        name,
        tag,
        expected: N,
        found: v.len(),
    })
}

/// The CHUID's TLVs, with or without its `53` container.
fn unwrap_container(data: &[u8]) -> Result<&[u8], ChuidError> {
    Ok(crate::container_content(data, crate::CONTAINER_TAG)?)
}

/// The CHUID's TLVs as read from the card except the signature (`3E`) and
/// the error detection code (`FE`), exactly as encoded: the form of the
/// signed content that some issuers hash, without the error detection code.
pub fn signed_content_of(data: &[u8]) -> Result<Vec<u8>, ChuidError> {
    let data = unwrap_container(data)?;
    let mut r = Reader::new(data);
    let mut out = Vec::with_capacity(data.len());
    while !r.is_empty() {
        let start = r.offset();
        let t = r.read()?;
        if t.tag == TAG_EDC && !t.value.is_empty() {
            return Err(ChuidError::EdcNotEmpty(t.value.len()));
        }
        if t.tag != TAG_SIGNATURE && t.tag != TAG_EDC {
            out.extend_from_slice(&data[start..r.offset()]);
        }
    }
    Ok(out)
}

/// `content` (a run of CHUID TLVs such as [`digest_content_of`] returns)
/// without the deprecated buffer length element (`EE`): the form of the
/// signed content issuers that leave the element out of the digest hash,
/// while the card still carries it.
pub fn without_buffer_length(content: &[u8]) -> Result<Vec<u8>, ChuidError> {
    let mut r = Reader::new(content);
    let mut out = Vec::with_capacity(content.len());
    while !r.is_empty() {
        let start = r.offset();
        let t = r.read()?;
        if t.tag != TAG_BUFFER_LENGTH {
            out.extend_from_slice(&content[start..r.offset()]);
        }
    }
    Ok(out)
}

/// The bytes SP 800-73-4 Part 1 §3.1.2.1 has the issuer signature's message
/// digest cover, taken from a CHUID as read from the card: every TLV except
/// the signature (`3E`), exactly as encoded and in card order, so the error
/// detection code `FE 00` comes last. A CHUID without an `FE` element gets
/// the `FE 00` the standard makes mandatory appended.
pub fn digest_content_of(data: &[u8]) -> Result<Vec<u8>, ChuidError> {
    let data = unwrap_container(data)?;
    let mut r = Reader::new(data);
    let mut out = Vec::with_capacity(data.len());
    let mut edc = false;
    while !r.is_empty() {
        let start = r.offset();
        let t = r.read()?;
        if t.tag != TAG_SIGNATURE {
            edc |= t.tag == TAG_EDC;
            out.extend_from_slice(&data[start..r.offset()]);
        }
    }
    if !edc {
        tlv::push(&mut out, TAG_EDC, &[]);
    }
    Ok(out)
}

impl Chuid {
    /// Creates a CHUID with the required elements.
    pub fn new(fascn: [u8; FASCN_LEN], guid: [u8; 16], expiration: ChuidDate) -> Chuid {
        Chuid {
            buffer_length: None,
            fascn,
            org_identifier: None,
            duns: None,
            guid,
            expiration,
            cardholder_uuid: None,
            auth_key_map: None,
            signature: None,
        }
    }

    /// Decodes the CHUID (with or without the `53` container). Unknown tags,
    /// duplicates, missing required elements and wrong sizes are errors.
    pub fn decode(data: &[u8]) -> Result<Chuid, ChuidError> {
        let data = unwrap_container(data)?;
        let mut seen: Vec<u32> = Vec::with_capacity(9);
        let mut c = Chuid {
            buffer_length: None,
            fascn: [0; FASCN_LEN],
            org_identifier: None,
            duns: None,
            guid: [0; 16],
            expiration: ChuidDate {
                year: 0,
                month: 0,
                day: 0,
            },
            cardholder_uuid: None,
            auth_key_map: None,
            signature: None,
        };
        let mut after_signature = false;
        for t in Reader::new(data) {
            let t = t?;
            if seen.contains(&t.tag) {
                return Err(ChuidError::Duplicate(t.tag));
            }
            seen.push(t.tag);
            if after_signature && t.tag != TAG_EDC && t.tag != TAG_SIGNATURE {
                return Err(ChuidError::OutOfOrder(t.tag));
            }
            match t.tag {
                TAG_BUFFER_LENGTH => c.buffer_length = Some(t.value.to_vec()),
                TAG_FASCN => c.fascn = fixed("FASC-N", t.tag, t.value)?,
                TAG_ORG_IDENTIFIER => c.org_identifier = Some(t.value.to_vec()),
                TAG_DUNS => c.duns = Some(t.value.to_vec()),
                TAG_GUID => c.guid = fixed("GUID", t.tag, t.value)?,
                TAG_EXPIRATION => {
                    let b: [u8; 8] = fixed("expiration date", t.tag, t.value)?;
                    let s = String::from_utf8_lossy(&b).into_owned();
                    c.expiration = ChuidDate::parse(&s)?;
                }
                TAG_CARDHOLDER_UUID => {
                    c.cardholder_uuid = Some(fixed("cardholder UUID", t.tag, t.value)?)
                }
                TAG_AUTH_KEY_MAP => c.auth_key_map = Some(t.value.to_vec()),
                TAG_SIGNATURE => {
                    after_signature = true;
                    // An empty 3E is an unsigned CHUID.
                    c.signature = (!t.value.is_empty()).then(|| t.value.to_vec());
                }
                // Not covered by the signature in every digest form, so
                // any contents would give one signed CHUID many encodings.
                TAG_EDC if !t.value.is_empty() => {
                    return Err(ChuidError::EdcNotEmpty(t.value.len()))
                }
                TAG_EDC => after_signature = true,
                other => return Err(ChuidError::UnknownTag(other)),
            }
        }
        for (tag, name) in [
            (TAG_FASCN, "FASC-N"),
            (TAG_GUID, "GUID"),
            (TAG_EXPIRATION, "expiration date"),
        ] {
            if !seen.contains(&tag) {
                return Err(ChuidError::Missing(name, tag));
            }
        }
        Ok(c)
    }

    /// The TLVs the issuer signature covers, in SP 800-73-4 order.
    pub fn signed_content(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(96);
        if let Some(b) = &self.buffer_length {
            tlv::push(&mut out, TAG_BUFFER_LENGTH, b);
        }
        tlv::push(&mut out, TAG_FASCN, &self.fascn);
        if let Some(o) = &self.org_identifier {
            tlv::push(&mut out, TAG_ORG_IDENTIFIER, o);
        }
        if let Some(d) = &self.duns {
            tlv::push(&mut out, TAG_DUNS, d);
        }
        tlv::push(&mut out, TAG_GUID, &self.guid);
        tlv::push(&mut out, TAG_EXPIRATION, &self.expiration.to_bytes());
        if let Some(u) = &self.cardholder_uuid {
            tlv::push(&mut out, TAG_CARDHOLDER_UUID, u);
        }
        if let Some(m) = &self.auth_key_map {
            tlv::push(&mut out, TAG_AUTH_KEY_MAP, m);
        }
        out
    }

    /// The bytes the issuer signature's message digest covers (SP 800-73-4
    /// Part 1 §3.1.2.1): [`Chuid::signed_content`] followed by the error
    /// detection code `FE 00`, i.e. [`Chuid::encode`] without the `3E` element.
    pub fn digest_content(&self) -> Vec<u8> {
        let mut out = self.signed_content();
        tlv::push(&mut out, TAG_EDC, &[]);
        out
    }

    /// Encodes the CHUID content (without the `53` container): the signed
    /// content, then `3E` (empty when unsigned) and an empty `FE`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.signed_content();
        tlv::push(
            &mut out,
            TAG_SIGNATURE,
            self.signature.as_deref().unwrap_or_default(),
        );
        tlv::push(&mut out, TAG_EDC, &[]);
        out
    }

    /// Decodes the FASC-N element (parity and LRC checked).
    pub fn fascn(&self) -> Result<Fascn, FascnError> {
        Fascn::decode(&self.fascn)
    }

    /// The card UUID as `urn:uuid:...`.
    pub fn card_uuid_urn(&self) -> String {
        uuid_urn(&self.guid)
    }

    /// The card UUID as a value.
    pub fn card_uuid(&self) -> CardUuid {
        CardUuid(self.guid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FASCN_HEX: &str = "D4E739DA739CED39CE739D836858210842108421C84210C3EB";

    fn sample() -> Chuid {
        let fascn: [u8; 25] = hex::decode(FASCN_HEX).unwrap().try_into().unwrap();
        let mut c = Chuid::new(fascn, [0x3A; 16], ChuidDate::parse("20301231").unwrap());
        c.cardholder_uuid = Some([0x5C; 16]);
        c.signature = Some(vec![0x30, 0x00]);
        c
    }

    #[test]
    fn round_trips_and_unwraps_container() {
        let c = sample();
        let enc = c.encode();
        assert_eq!(Chuid::decode(&enc).unwrap(), c);
        let wrapped = tlv::encode(0x53, &enc);
        assert_eq!(Chuid::decode(&wrapped).unwrap(), c);
        assert_eq!(signed_content_of(&wrapped).unwrap(), c.signed_content());
        assert_eq!(c.fascn().unwrap().agency_code, "9999");
        assert!(enc.ends_with(&[0x3E, 0x02, 0x30, 0x00, 0xFE, 0x00]));
    }

    #[test]
    fn digest_content_is_everything_but_the_signature_ending_with_the_edc() {
        let c = sample();
        let enc = c.encode();
        let mut expected = c.signed_content();
        expected.extend_from_slice(&[0xFE, 0x00]);
        assert_eq!(c.digest_content(), expected);
        assert_eq!(digest_content_of(&enc).unwrap(), expected);
        assert_eq!(
            digest_content_of(&tlv::encode(0x53, &enc)).unwrap(),
            expected
        );
        // A CHUID stored without its EDC gets the mandatory FE 00 appended.
        let mut no_edc = c.signed_content();
        tlv::push(&mut no_edc, TAG_SIGNATURE, &[0x30, 0x00]);
        assert_eq!(digest_content_of(&no_edc).unwrap(), expected);
        assert_eq!(signed_content_of(&no_edc).unwrap(), c.signed_content());
    }

    #[test]
    fn an_error_detection_code_with_contents_is_refused() {
        let c = sample();
        let mut enc = c.signed_content();
        tlv::push(&mut enc, TAG_SIGNATURE, &[0x30, 0x00]);
        let mut with_edc = enc.clone();
        tlv::push(&mut with_edc, TAG_EDC, &[]);
        assert!(Chuid::decode(&with_edc).is_ok());
        tlv::push(&mut enc, TAG_EDC, &[0xAA, 0xBB]);
        let e = Chuid::decode(&enc).unwrap_err();
        assert_eq!(e, ChuidError::EdcNotEmpty(2));
        assert!(e.to_string().contains("requires it to be empty"), "{e}");
        assert_eq!(
            signed_content_of(&enc).unwrap_err(),
            ChuidError::EdcNotEmpty(2)
        );
    }

    #[test]
    fn signed_content_excludes_signature_and_edc() {
        let c = sample();
        let sc = c.signed_content();
        assert!(sc.starts_with(&[0x30, 25]));
        assert!(Reader::new(&sc).all(|t| {
            let t = t.unwrap();
            t.tag != TAG_SIGNATURE && t.tag != TAG_EDC
        }));
        let mut c2 = c.clone();
        c2.signature = Some(vec![1, 2, 3]);
        assert_eq!(c2.signed_content(), sc);
    }

    #[test]
    fn formats_uuids() {
        let u = [
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
            0xcd, 0xef,
        ];
        assert_eq!(
            uuid_urn(&u),
            "urn:uuid:12345678-9abc-def0-0123-456789abcdef"
        );
        assert_eq!(parse_uuid(&uuid_urn(&u)), Some(u));
        assert_eq!(parse_uuid("123456789ABCDEF00123456789ABCDEF"), Some(u));
        assert_eq!(parse_uuid("not-a-uuid"), None);
    }

    #[test]
    fn rejects_malformed_input() {
        let c = sample();
        let enc = c.encode();
        // Truncated.
        assert!(matches!(
            Chuid::decode(&enc[..enc.len() - 3]),
            Err(ChuidError::Tlv(_))
        ));
        // Missing GUID.
        let mut no_guid = Vec::new();
        tlv::push(&mut no_guid, TAG_FASCN, &c.fascn);
        tlv::push(&mut no_guid, TAG_EXPIRATION, b"20301231");
        assert_eq!(
            Chuid::decode(&no_guid).unwrap_err(),
            ChuidError::Missing("GUID", TAG_GUID)
        );
        // Wrong FASC-N length.
        let mut short = Vec::new();
        tlv::push(&mut short, TAG_FASCN, &[0; 24]);
        assert!(matches!(
            Chuid::decode(&short),
            Err(ChuidError::BadLength {
                tag: 0x30,
                found: 24,
                ..
            })
        ));
        // Bad date.
        let mut bad_date = no_guid.clone();
        tlv::push(&mut bad_date, TAG_GUID, &[0; 16]);
        let pos = bad_date.windows(8).position(|w| w == b"20301231").unwrap();
        bad_date[pos + 4..pos + 6].copy_from_slice(b"13");
        assert!(matches!(
            Chuid::decode(&bad_date),
            Err(ChuidError::BadDate(_))
        ));
        // Duplicate and unknown tags.
        let mut dup = enc.clone();
        tlv::push(&mut dup, TAG_FASCN, &c.fascn);
        assert!(matches!(
            Chuid::decode(&dup),
            Err(ChuidError::Duplicate(0x30) | ChuidError::OutOfOrder(0x30))
        ));
        let mut unknown = c.signed_content();
        tlv::push(&mut unknown, 0x99, &[1]);
        assert_eq!(
            Chuid::decode(&unknown).unwrap_err(),
            ChuidError::UnknownTag(0x99)
        );
    }

    #[test]
    fn dates() {
        assert!(ChuidDate::parse("20240229").is_ok());
        assert!(ChuidDate::parse("20230229").is_err());
        assert!(ChuidDate::parse("2024-02-30").is_err());
        assert_eq!(
            ChuidDate::parse("1970-01-01").unwrap().end_of_day_unix(),
            86_399
        );
        assert_eq!(
            ChuidDate::parse("20000301").unwrap().end_of_day_unix(),
            951_868_800 + 86_399
        );
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = Chuid::decode(&bytes);
            let _ = signed_content_of(&bytes);
            let _ = digest_content_of(&bytes);
        }

        #[test]
        fn text_parsers_never_panic(text in "\\PC{0,40}") {
            let _ = ChuidDate::parse(&text);
            let _ = parse_uuid(&text);
            let _ = crate::fascn::Fascn::parse_text(&text);
        }

        #[test]
        fn mutated_chuids_never_panic(pos in 0usize..160, val in proptest::num::u8::ANY) {
            let mut enc = sample().encode();
            let i = pos % enc.len();
            enc[i] = val;
            if let Ok(c) = Chuid::decode(&enc) {
                // Whatever decodes re-encodes to a CHUID that decodes the same.
                proptest::prop_assert_eq!(Chuid::decode(&c.encode()).unwrap(), c);
            }
        }

        #[test]
        fn round_trips(
            guid in proptest::array::uniform16(proptest::num::u8::ANY),
            holder in proptest::option::of(proptest::array::uniform16(proptest::num::u8::ANY)),
            key_map in proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 0..20)),
            duns in proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 9)),
            sig in proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 1..300)),
        ) {
            let mut c = sample();
            c.guid = guid;
            c.cardholder_uuid = holder;
            c.auth_key_map = key_map;
            c.duns = duns;
            c.signature = sig;
            let enc = c.encode();
            proptest::prop_assert_eq!(Chuid::decode(&enc).unwrap(), c.clone());
            proptest::prop_assert_eq!(signed_content_of(&enc).unwrap(), c.signed_content());
            proptest::prop_assert_eq!(digest_content_of(&enc).unwrap(), c.digest_content());
        }
    }
}

#[cfg(test)]
mod card_uuid_tests {
    use super::*;

    #[test]
    fn card_uuid_prints_parses_and_serialises_as_a_urn() {
        let u = CardUuid([
            0x3f, 0x25, 0x04, 0xe0, 0x4f, 0x89, 0x41, 0xd3, 0x9a, 0x0c, 0x03, 0x05, 0xe8, 0x2c,
            0x33, 0x01,
        ]);
        let text = "urn:uuid:3f2504e0-4f89-41d3-9a0c-0305e82c3301";
        assert_eq!(u.to_string(), text);
        assert_eq!(text.parse::<CardUuid>(), Ok(u));
        assert_eq!(
            "3F2504E04F8941D39A0C0305E82C3301".parse::<CardUuid>(),
            Ok(u)
        );
        let json = serde_json::to_string(&u).unwrap();
        assert_eq!(json, format!("\"{text}\""));
        assert_eq!(serde_json::from_str::<CardUuid>(&json).unwrap(), u);
        assert!("urn:uuid:not-a-uuid".parse::<CardUuid>().is_err());
        assert!(serde_json::from_str::<CardUuid>("\"0123\"").is_err());
    }
}
