//! FASC-N (SP 800-73-4 §3.1.2, TIG SCEPACS v2.3 §6): the Federal Agency Smart
//! Credential Number, a 200-bit (25-byte) string of 40 five-bit characters.
//!
//! Each character carries four data bits, least significant bit first, then an
//! odd-parity bit. The characters are: start sentinel `SS`, agency code (4
//! digits), `FS`, system code (4), `FS`, credential number (6), `FS`,
//! credential series (1), `FS`, individual credential issue (1), `FS`, person
//! identifier (10), organisational category (1), organisational identifier (4),
//! person/organisation association category (1), end sentinel `ES`, and a
//! longitudinal redundancy character `LRC` (the XOR of the data bits of the 39
//! characters before it, with its own parity bit).
//!
//! [`Fascn::decode`] checks every parity bit, the LRC, each separator and each
//! digit, so any single-bit error in the 200 bits is detected.

use serde::{Deserialize, Serialize};
use std::fmt;
use thiserror::Error;

/// Length of an encoded FASC-N in bytes.
pub const FASCN_LEN: usize = 25;
/// Number of five-bit characters in an encoded FASC-N.
const CHARS: usize = 40;

/// Start sentinel data value (bits 1101 read LSB first = 0xB).
const SS: u8 = 0x0B;
/// Field separator data value (0xD).
const FS: u8 = 0x0D;
/// End sentinel data value (0xF).
const ES: u8 = 0x0F;

/// Why a FASC-N could not be decoded or built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FascnError {
    #[error("a FASC-N is 25 bytes long, but {0} byte(s) were given")]
    WrongLength(usize),
    #[error("FASC-N character {index} has a bad parity bit (the data is corrupted)")]
    BadParity { index: usize },
    #[error("FASC-N longitudinal redundancy check failed: computed {computed:#X}, card has {found:#X} (the data is corrupted)")]
    BadLrc { computed: u8, found: u8 },
    #[error("FASC-N character {index} should be the {expected} but is {found:#X}")]
    UnexpectedSeparator {
        index: usize,
        expected: &'static str,
        found: u8,
    },
    #[error("FASC-N character {index} ({field}) should be a decimal digit but is {found:#X}")]
    NonDigit {
        index: usize,
        field: &'static str,
        found: u8,
    },
    #[error("FASC-N field {field} must be {expected} decimal digit(s), got {got:?}")]
    BadField {
        field: &'static str,
        expected: usize,
        got: String,
    },
    #[error("FASC-N text must be 32 decimal digits or 50 hexadecimal characters, got {0:?}")]
    BadText(String),
}

/// A decoded FASC-N. Every field holds ASCII decimal digits of its fixed width.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Fascn {
    /// Agency code (4 digits), e.g. `9999` for non-federal issuers.
    pub agency_code: String,
    /// System code (4 digits).
    pub system_code: String,
    /// Credential number (6 digits).
    pub credential_number: String,
    /// Credential series (1 digit).
    pub credential_series: String,
    /// Individual credential issue (1 digit).
    pub individual_credential_issue: String,
    /// Person identifier (10 digits).
    pub person_identifier: String,
    /// Organisational category (1 digit), see [`Fascn::organizational_category_name`].
    pub organizational_category: String,
    /// Organisational identifier (4 digits).
    pub organizational_identifier: String,
    /// Person/organisation association category (1 digit), see
    /// [`Fascn::association_category_name`].
    pub association_category: String,
}

/// The layout: (field name, width) for the digit groups, in order.
const FIELDS: [(&str, usize); 9] = [
    ("agency code", 4),
    ("system code", 4),
    ("credential number", 6),
    ("credential series", 1),
    ("individual credential issue", 1),
    ("person identifier", 10),
    ("organizational category", 1),
    ("organizational identifier", 4),
    ("association category", 1),
];

/// Whether a field separator follows field `i` (the last four fields run
/// together without separators; an end sentinel follows the last one).
fn separator_after(i: usize) -> Option<(u8, &'static str)> {
    match i {
        0..=4 => Some((FS, "field separator")),
        8 => Some((ES, "end sentinel")),
        _ => None,
    }
}

/// Adds the odd-parity bit to a 4-bit data value, giving the 5-bit character
/// as it is laid out on the wire: data bits b1..b4 then parity, b1 first.
fn char_bits(data: u8) -> u8 {
    let d = data & 0x0F;
    // Reverse the four data bits so b1 (LSB) is sent first.
    let rev = ((d & 1) << 3) | ((d & 2) << 1) | ((d & 4) >> 1) | ((d & 8) >> 3);
    let parity = u8::from(d.count_ones().is_multiple_of(2));
    (rev << 1) | parity
}

/// Splits a 5-bit wire character into (data value, parity ok).
fn split_char(c: u8) -> (u8, bool) {
    let rev = (c >> 1) & 0x0F;
    let d = ((rev & 1) << 3) | ((rev & 2) << 1) | ((rev & 4) >> 1) | ((rev & 8) >> 3);
    (d, c.count_ones() % 2 == 1)
}

/// Reads the `i`-th 5-bit character from the 200 bits, most significant first.
fn get_char(bytes: &[u8; FASCN_LEN], i: usize) -> u8 {
    let mut v = 0u8;
    for b in 0..5 {
        let bit = i * 5 + b;
        let set = (bytes[bit / 8] >> (7 - bit % 8)) & 1;
        v = (v << 1) | set;
    }
    v
}

fn put_char(bytes: &mut [u8; FASCN_LEN], i: usize, c: u8) {
    for b in 0..5 {
        if (c >> (4 - b)) & 1 == 1 {
            let bit = i * 5 + b;
            bytes[bit / 8] |= 1 << (7 - bit % 8);
        }
    }
}

impl Fascn {
    /// Decodes a 25-byte FASC-N, checking parity, LRC, separators and digits.
    pub fn decode(bytes: &[u8]) -> Result<Fascn, FascnError> {
        let bytes: &[u8; FASCN_LEN] = bytes
            .try_into()
            .map_err(|_| FascnError::WrongLength(bytes.len()))?;
        let mut data = [0u8; CHARS];
        for (i, d) in data.iter_mut().enumerate() {
            let (value, parity_ok) = split_char(get_char(bytes, i));
            if !parity_ok {
                return Err(FascnError::BadParity { index: i });
            }
            *d = value;
        }
        let computed = data[..CHARS - 1].iter().fold(0u8, |a, &d| a ^ d);
        if computed != data[CHARS - 1] {
            return Err(FascnError::BadLrc {
                computed,
                found: data[CHARS - 1],
            });
        }
        expect_sep(&data, 0, SS, "start sentinel")?;
        let mut pos = 1;
        let mut out: Vec<String> = Vec::with_capacity(FIELDS.len());
        for (i, (name, width)) in FIELDS.iter().enumerate() {
            let mut s = String::with_capacity(*width);
            for k in 0..*width {
                let d = data[pos + k];
                if d > 9 {
                    return Err(FascnError::NonDigit {
                        index: pos + k,
                        field: name,
                        found: d,
                    });
                }
                s.push(char::from(b'0' + d));
            }
            pos += width;
            if let Some((sep, sep_name)) = separator_after(i) {
                expect_sep(&data, pos, sep, sep_name)?;
                pos += 1;
            }
            out.push(s);
        }
        debug_assert_eq!(pos, CHARS - 1);
        let mut it = out.into_iter();
        let mut next = || it.next().unwrap_or_default();
        Ok(Fascn {
            agency_code: next(),
            system_code: next(),
            credential_number: next(),
            credential_series: next(),
            individual_credential_issue: next(),
            person_identifier: next(),
            organizational_category: next(),
            organizational_identifier: next(),
            association_category: next(),
        })
    }

    /// Builds a FASC-N from its 32 digits (agency .. association category, in
    /// order, without separators).
    pub fn from_digits(digits: &str) -> Result<Fascn, FascnError> {
        if digits.len() != 32 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(FascnError::BadText(digits.to_string()));
        }
        let mut pos = 0;
        let mut take = |n: usize| {
            let s = digits[pos..pos + n].to_string();
            pos += n;
            s
        };
        let f = Fascn {
            agency_code: take(4),
            system_code: take(4),
            credential_number: take(6),
            credential_series: take(1),
            individual_credential_issue: take(1),
            person_identifier: take(10),
            organizational_category: take(1),
            organizational_identifier: take(4),
            association_category: take(1),
        };
        f.check()?;
        Ok(f)
    }

    /// Parses either 32 decimal digits (see [`Fascn::from_digits`]) or the
    /// 50-character hexadecimal form of the 25 encoded bytes.
    pub fn parse_text(text: &str) -> Result<Fascn, FascnError> {
        let t: String = text
            .chars()
            .filter(|c| !matches!(c, ' ' | '-' | ':'))
            .collect();
        if t.len() == 32 {
            return Fascn::from_digits(&t);
        }
        if t.len() == 2 * FASCN_LEN {
            let bytes = hex::decode(&t).map_err(|_| FascnError::BadText(text.to_string()))?;
            return Fascn::decode(&bytes);
        }
        Err(FascnError::BadText(text.to_string()))
    }

    /// The fields in order, with their names and widths.
    fn fields(&self) -> [(&str, &'static str, usize); 9] {
        let v = [
            self.agency_code.as_str(),
            self.system_code.as_str(),
            self.credential_number.as_str(),
            self.credential_series.as_str(),
            self.individual_credential_issue.as_str(),
            self.person_identifier.as_str(),
            self.organizational_category.as_str(),
            self.organizational_identifier.as_str(),
            self.association_category.as_str(),
        ];
        let mut out = [("", "", 0); 9];
        for (i, s) in v.iter().enumerate() {
            out[i] = (*s, FIELDS[i].0, FIELDS[i].1);
        }
        out
    }

    /// Checks that every field has its fixed number of decimal digits.
    pub fn check(&self) -> Result<(), FascnError> {
        for (value, name, width) in self.fields() {
            if value.len() != width || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(FascnError::BadField {
                    field: name,
                    expected: width,
                    got: value.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Encodes to the 25-byte, 200-bit form, with parity bits and LRC.
    pub fn encode(&self) -> Result<[u8; FASCN_LEN], FascnError> {
        self.check()?;
        let mut data = Vec::with_capacity(CHARS);
        data.push(SS);
        for (i, (value, _, _)) in self.fields().iter().enumerate() {
            data.extend(value.bytes().map(|b| b - b'0'));
            if let Some((sep, _)) = separator_after(i) {
                data.push(sep);
            }
        }
        let lrc = data.iter().fold(0u8, |a, &d| a ^ d);
        data.push(lrc);
        let mut out = [0u8; FASCN_LEN];
        for (i, d) in data.iter().enumerate() {
            put_char(&mut out, i, char_bits(*d));
        }
        Ok(out)
    }

    /// The 32 digits without separators.
    pub fn digits(&self) -> String {
        self.fields().iter().map(|(v, _, _)| *v).collect()
    }

    /// Human description of the organisational category (TIG SCEPACS).
    pub fn organizational_category_name(&self) -> &'static str {
        match self.organizational_category.as_str() {
            "1" => "Federal Government Agency",
            "2" => "State Government Agency",
            "3" => "Commercial Enterprise",
            "4" => "Foreign Government",
            _ => "unassigned category",
        }
    }

    /// Human description of the person/organisation association category.
    pub fn association_category_name(&self) -> &'static str {
        match self.association_category.as_str() {
            "1" => "Employee",
            "2" => "Civil",
            "3" => "Executive Staff",
            "4" => "Uniformed Service",
            "5" => "Contractor",
            "6" => "Organizational Affiliate",
            "7" => "Organizational Beneficiary",
            _ => "unassigned category",
        }
    }
}

fn expect_sep(
    data: &[u8; CHARS],
    index: usize,
    sep: u8,
    name: &'static str,
) -> Result<(), FascnError> {
    if data[index] != sep {
        return Err(FascnError::UnexpectedSeparator {
            index,
            expected: name,
            found: data[index],
        });
    }
    Ok(())
}

impl fmt::Display for Fascn {
    /// `agency-system-credential-series-issue-person-orgcat-orgid-assoc`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}-{}-{}-{}-{}-{}-{}-{}",
            self.agency_code,
            self.system_code,
            self.credential_number,
            self.credential_series,
            self.individual_credential_issue,
            self.person_identifier,
            self.organizational_category,
            self.organizational_identifier,
            self.association_category
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample FASC-N of SP 800-73 / TIG SCEPACS.
    const SAMPLE: &str = "D4E739DA739CED39CE739D836858210842108421C84210C3EB";

    #[test]
    fn decodes_published_sample() {
        let bytes = hex::decode(SAMPLE).unwrap();
        let f = Fascn::decode(&bytes).unwrap();
        assert_eq!(f.agency_code, "9999");
        assert_eq!(f.system_code, "9999");
        assert_eq!(f.credential_number, "999999");
        assert_eq!(f.credential_series, "0");
        assert_eq!(f.individual_credential_issue, "1");
        assert_eq!(f.person_identifier, "0000000000");
        assert_eq!(f.organizational_category, "3");
        assert_eq!(f.organizational_identifier, "0000");
        assert_eq!(f.association_category, "1");
        assert_eq!(f.organizational_category_name(), "Commercial Enterprise");
        assert_eq!(f.association_category_name(), "Employee");
        assert_eq!(f.encode().unwrap().to_vec(), bytes);
        assert_eq!(f.to_string(), "9999-9999-999999-0-1-0000000000-3-0000-1");
    }

    #[test]
    fn round_trips_arbitrary_digits() {
        let f = Fascn::from_digits("12345678901234567890123456123456").unwrap();
        let enc = f.encode().unwrap();
        assert_eq!(Fascn::decode(&enc).unwrap(), f);
        assert_eq!(f.digits(), "12345678901234567890123456123456");
        assert_eq!(
            f.organizational_category_name(),
            "Federal Government Agency"
        );
        assert_eq!(f.association_category_name(), "Organizational Affiliate");
        assert_eq!(Fascn::parse_text(&hex::encode(enc)).unwrap(), f);
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let good: [u8; 25] = hex::decode(SAMPLE).unwrap().try_into().unwrap();
        for bit in 0..200 {
            let mut bad = good;
            bad[bit / 8] ^= 1 << (7 - bit % 8);
            let err = Fascn::decode(&bad).unwrap_err();
            assert_eq!(err, FascnError::BadParity { index: bit / 5 }, "bit {bit}");
        }
    }

    #[test]
    fn detects_wrong_length_lrc_separator_and_digit_errors() {
        assert_eq!(
            Fascn::decode(&[0u8; 24]).unwrap_err(),
            FascnError::WrongLength(24)
        );
        let good: [u8; 25] = hex::decode(SAMPLE).unwrap().try_into().unwrap();
        // Replace one digit character with another valid character: parity
        // is fine, the LRC is not.
        let mut bad = good;
        let mut chars: Vec<u8> = (0..CHARS).map(|i| get_char(&good, i)).collect();
        chars[2] = char_bits(3);
        bad.fill(0);
        for (i, c) in chars.iter().enumerate() {
            put_char(&mut bad, i, *c);
        }
        assert!(matches!(
            Fascn::decode(&bad),
            Err(FascnError::BadLrc { .. })
        ));
        // A separator where a digit belongs, with a recomputed LRC.
        let encode_data = |data: &[u8]| {
            let mut out = [0u8; 25];
            let lrc = data.iter().fold(0u8, |a, &d| a ^ d);
            for (i, d) in data.iter().chain(std::iter::once(&lrc)).enumerate() {
                put_char(&mut out, i, char_bits(*d));
            }
            out
        };
        let mut data: Vec<u8> = (0..CHARS - 1)
            .map(|i| split_char(get_char(&good, i)).0)
            .collect();
        data[5] = 0;
        assert_eq!(
            Fascn::decode(&encode_data(&data)).unwrap_err(),
            FascnError::UnexpectedSeparator {
                index: 5,
                expected: "field separator",
                found: 0
            }
        );
        data[5] = FS;
        data[1] = 0x0C;
        assert!(matches!(
            Fascn::decode(&encode_data(&data)).unwrap_err(),
            FascnError::NonDigit { index: 1, .. }
        ));
    }

    #[test]
    fn rejects_bad_fields_and_text() {
        let mut f = Fascn::from_digits("99999999999999010000000000100001").unwrap();
        f.agency_code = "12a4".into();
        assert!(matches!(f.encode(), Err(FascnError::BadField { .. })));
        assert!(Fascn::parse_text("1234").is_err());
        assert!(Fascn::from_digits("9999999999999901000000000010000x").is_err());
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let _ = Fascn::decode(&bytes);
        }

        #[test]
        fn any_digits_round_trip(digits in "[0-9]{32}") {
            let f = Fascn::from_digits(&digits).unwrap();
            let enc = f.encode().unwrap();
            proptest::prop_assert_eq!(Fascn::decode(&enc).unwrap(), f);
        }
    }
}
