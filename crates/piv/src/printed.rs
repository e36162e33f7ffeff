//! Printed Information (SP 800-73-4 Part 1 Table 14, data object `5FC109`):
//! what is printed on the card, readable after PIN verification.
//!
//! | tag | element | max bytes |
//! |---|---|---|
//! | `01` | name | 125 |
//! | `02` | employee affiliation | 20 |
//! | `04` | expiration date (`YYYYMMMDD`, e.g. `2030DEC31`) | 9 |
//! | `05` | agency card serial number | 20 |
//! | `06` | issuer identification | 15 |
//! | `07` | organization affiliation line 1 | 20, optional |
//! | `08` | organization affiliation line 2 | 20, optional |
//! | `FE` | error detection code | empty |

use crate::chuid::ChuidDate;
use crate::error::PivError;
use iso7816::tlv::{self, Reader};

/// The decoded Printed Information.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PrintedInfo {
    pub name: String,
    pub employee_affiliation: String,
    /// `YYYYMMMDD` as printed (upper-case month abbreviation).
    pub expiration: String,
    pub agency_card_serial: String,
    pub issuer_identification: String,
    pub organization_line1: Option<String>,
    pub organization_line2: Option<String>,
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];

/// A date in the printed form `YYYYMMMDD`.
pub fn printed_date(d: ChuidDate) -> String {
    let m = MONTHS[usize::from(d.month.clamp(1, 12)) - 1];
    format!("{:04}{m}{:02}", d.year, d.day)
}

const FIELDS: [(u32, &str, usize); 7] = [
    (0x01, "name", 125),
    (0x02, "employee affiliation", 20),
    (0x04, "expiration date", 9),
    (0x05, "agency card serial number", 20),
    (0x06, "issuer identification", 15),
    (0x07, "organization affiliation line 1", 20),
    (0x08, "organization affiliation line 2", 20),
];

impl PrintedInfo {
    /// Encodes the content of tag `53`; each field is cut to its maximum
    /// length (at a character boundary).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        let values = [
            Some(&self.name),
            Some(&self.employee_affiliation),
            Some(&self.expiration),
            Some(&self.agency_card_serial),
            Some(&self.issuer_identification),
            self.organization_line1.as_ref(),
            self.organization_line2.as_ref(),
        ];
        for ((tag, _, max), v) in FIELDS.iter().zip(values) {
            if let Some(v) = v {
                tlv::push(&mut out, *tag, truncate(v, *max).as_bytes());
            }
        }
        tlv::push(&mut out, 0xFE, &[]);
        out
    }

    /// Decodes the content of tag `53` (or the whole `53` TLV).
    pub fn decode(data: &[u8]) -> Result<Self, PivError> {
        let data = crate::container_content(data, crate::CONTAINER_TAG)?;
        let mut fields: [Option<String>; 7] = Default::default();
        for t in Reader::new(data) {
            let t = t?;
            if t.tag == 0xFE {
                continue;
            }
            let i = FIELDS
                .iter()
                .position(|(tag, _, _)| *tag == t.tag)
                .ok_or(PivError::UnexpectedTag(t.tag))?;
            let (_, what, max) = FIELDS[i];
            if t.value.len() > max {
                return Err(PivError::invalid(what, "longer than SP 800-73-4 allows"));
            }
            if fields[i].is_some() {
                return Err(PivError::DuplicateTag(t.tag));
            }
            let text =
                std::str::from_utf8(t.value).map_err(|_| PivError::invalid(what, "not text"))?;
            fields[i] = Some(text.to_string());
        }
        let [name, aff, exp, serial, issuer, l1, l2] = fields;
        Ok(PrintedInfo {
            name: name.ok_or(PivError::MissingTag(0x01))?,
            employee_affiliation: aff.ok_or(PivError::MissingTag(0x02))?,
            expiration: exp.ok_or(PivError::MissingTag(0x04))?,
            agency_card_serial: serial.ok_or(PivError::MissingTag(0x05))?,
            issuer_identification: issuer.ok_or(PivError::MissingTag(0x06))?,
            organization_line1: l1,
            organization_line2: l2,
        })
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PrintedInfo {
        PrintedInfo {
            name: "Test Cardholder".into(),
            employee_affiliation: "Employee".into(),
            expiration: printed_date(ChuidDate::parse("20301231").unwrap()),
            agency_card_serial: "0000123456".into(),
            issuer_identification: "PIVGATETEST".into(),
            organization_line1: Some("pivgate Test PKI".into()),
            organization_line2: None,
        }
    }

    #[test]
    fn round_trips_with_and_without_container() {
        let p = sample();
        assert_eq!(p.expiration, "2030DEC31");
        let enc = p.encode();
        assert!(enc.ends_with(&[0xFE, 0x00]));
        assert_eq!(PrintedInfo::decode(&enc).unwrap(), p);
        assert_eq!(PrintedInfo::decode(&tlv::encode(0x53, &enc)).unwrap(), p);
    }

    #[test]
    fn long_fields_are_cut_and_bad_ones_refused() {
        let mut p = sample();
        p.issuer_identification = "Ä".repeat(10);
        let d = PrintedInfo::decode(&p.encode()).unwrap();
        assert_eq!(d.issuer_identification, "Ä".repeat(7));
        let mut long = Vec::new();
        tlv::push(&mut long, 0x06, &[b'x'; 16]);
        assert!(PrintedInfo::decode(&long).is_err());
        assert_eq!(
            PrintedInfo::decode(&[0x02, 0x01, b'a']).unwrap_err(),
            PivError::MissingTag(0x01)
        );
        assert_eq!(
            PrintedInfo::decode(&[0x09, 0x00]).unwrap_err(),
            PivError::UnexpectedTag(0x09)
        );
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = PrintedInfo::decode(&bytes);
        }
    }
}
