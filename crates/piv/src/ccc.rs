//! The Card Capability Container (SP 800-73-4 Part 1 Table 8) and the key
//! history object (Table 19).

use crate::error::PivError;
use iso7816::tlv::{self, Reader};

/// The CCC fields a PIV card fills in; the remaining mandatory elements
/// (`F3`, `F6`, `F7`, `FA`..`FD`) are encoded empty as the standard allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ccc {
    /// `F0` card identifier (GSC-RID `A000000116` + manufacturer id + card
    /// type + 14-byte id, 21 bytes in total).
    pub card_identifier: Vec<u8>,
    /// `F1` capability container version number.
    pub container_version: u8,
    /// `F2` capability grammar version number.
    pub grammar_version: u8,
    /// `F5` PIV card application data model number (`10`).
    pub data_model: u8,
}

impl Ccc {
    /// A CCC with the given 14-byte card id.
    pub fn new(card_id: [u8; 14]) -> Self {
        let mut card_identifier = vec![0xA0, 0x00, 0x00, 0x01, 0x16, 0xFF, 0x02];
        card_identifier.extend_from_slice(&card_id);
        Ccc {
            card_identifier,
            container_version: 0x21,
            grammar_version: 0x21,
            data_model: 0x10,
        }
    }

    /// Encodes the content of tag `53`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        tlv::push(&mut out, 0xF0, &self.card_identifier);
        tlv::push(&mut out, 0xF1, &[self.container_version]);
        tlv::push(&mut out, 0xF2, &[self.grammar_version]);
        tlv::push(&mut out, 0xF3, &[]);
        tlv::push(&mut out, 0xF4, &[0x00]);
        tlv::push(&mut out, 0xF5, &[self.data_model]);
        for tag in [0xF6, 0xF7, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE] {
            tlv::push(&mut out, tag, &[]);
        }
        out
    }

    /// Decodes the content of tag `53`.
    pub fn decode(data: &[u8]) -> Result<Self, PivError> {
        let mut card_identifier = None;
        let mut container_version = None;
        let mut grammar_version = None;
        let mut data_model = None;
        for t in Reader::new(data) {
            let t = t?;
            match t.tag {
                0xF0 => card_identifier = Some(t.value.to_vec()),
                0xF1 => container_version = Some(one_byte(t.value, "CCC container version")?),
                0xF2 => grammar_version = Some(one_byte(t.value, "CCC grammar version")?),
                0xF5 => data_model = Some(one_byte(t.value, "CCC data model")?),
                _ => {}
            }
        }
        Ok(Ccc {
            card_identifier: card_identifier.ok_or(PivError::MissingTag(0xF0))?,
            container_version: container_version.ok_or(PivError::MissingTag(0xF1))?,
            grammar_version: grammar_version.ok_or(PivError::MissingTag(0xF2))?,
            data_model: data_model.ok_or(PivError::MissingTag(0xF5))?,
        })
    }
}

fn one_byte(v: &[u8], what: &'static str) -> Result<u8, PivError> {
    match v {
        [b] => Ok(*b),
        _ => Err(PivError::invalid(what, "must be one byte")),
    }
}

/// The key history object: how many retired keys have certificates on and
/// off the card, and where the off-card ones are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyHistory {
    /// `C1` keys with on-card certificates.
    pub on_card: u8,
    /// `C2` keys with off-card certificates.
    pub off_card: u8,
    /// `F3` URL of the off-card certificates.
    pub url: Option<String>,
}

impl KeyHistory {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        tlv::push(&mut out, 0xC1, &[self.on_card]);
        tlv::push(&mut out, 0xC2, &[self.off_card]);
        if let Some(url) = &self.url {
            tlv::push(&mut out, 0xF3, url.as_bytes());
        }
        tlv::push(&mut out, 0xFE, &[]);
        out
    }

    pub fn decode(data: &[u8]) -> Result<Self, PivError> {
        let mut on_card = None;
        let mut off_card = None;
        let mut url = None;
        for t in Reader::new(data) {
            let t = t?;
            match t.tag {
                0xC1 => on_card = Some(one_byte(t.value, "key history on-card count")?),
                0xC2 => off_card = Some(one_byte(t.value, "key history off-card count")?),
                0xF3 => {
                    url = Some(
                        String::from_utf8(t.value.to_vec())
                            .map_err(|_| PivError::invalid("key history URL", "not UTF-8"))?,
                    )
                }
                0xFE => {}
                other => return Err(PivError::UnexpectedTag(other)),
            }
        }
        let on_card = on_card.ok_or(PivError::MissingTag(0xC1))?;
        let off_card = off_card.ok_or(PivError::MissingTag(0xC2))?;
        if on_card.saturating_add(off_card) > 20 {
            return Err(PivError::invalid(
                "key history",
                "more than 20 retired keys",
            ));
        }
        Ok(KeyHistory {
            on_card,
            off_card,
            url,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ccc_round_trips() {
        let c = Ccc::new([7; 14]);
        assert_eq!(c.card_identifier.len(), 21);
        assert_eq!(Ccc::decode(&c.encode()).unwrap(), c);
        assert_eq!(
            Ccc::decode(&[0xF1, 1, 0x21]),
            Err(PivError::MissingTag(0xF0))
        );
    }

    #[test]
    fn key_history_round_trips_and_checks_counts() {
        let k = KeyHistory {
            on_card: 2,
            off_card: 1,
            url: Some("http://example.invalid/kh".into()),
        };
        assert_eq!(KeyHistory::decode(&k.encode()).unwrap(), k);
        assert!(KeyHistory::decode(&[0xC1, 1, 15, 0xC2, 1, 6]).is_err());
        assert!(KeyHistory::decode(&[0xC1, 1, 1]).is_err());
    }
}
