//! The discovery object `7E` (SP 800-73-4 Part 1 Table 18): the PIV AID and
//! the PIN usage policy.

use crate::aid::PIV_AID;
use crate::error::PivError;
use iso7816::tlv::{self, Reader};

/// PIN usage policy, first byte: the PIV application PIN satisfies the
/// access control rules.
pub const POLICY_PIV_PIN: u8 = 0x40;
/// PIN usage policy, first byte: the global PIN satisfies them.
pub const POLICY_GLOBAL_PIN: u8 = 0x20;
/// PIN usage policy, first byte: on-card biometric comparison.
pub const POLICY_OCC: u8 = 0x10;

/// A decoded discovery object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// `4F` the PIV AID.
    pub aid: Vec<u8>,
    /// `5F2F` the two-byte PIN usage policy.
    pub pin_policy: [u8; 2],
}

impl Default for Discovery {
    /// PIV application PIN only.
    fn default() -> Self {
        Discovery {
            aid: PIV_AID.to_vec(),
            pin_policy: [POLICY_PIV_PIN, 0x00],
        }
    }
}

impl Discovery {
    /// The object's content (inside tag `7E`).
    pub fn encode_inner(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20);
        tlv::push(&mut out, 0x4F, &self.aid);
        tlv::push(&mut out, 0x5F2F, &self.pin_policy);
        out
    }

    /// Encodes the object with its tag `7E`.
    pub fn encode(&self) -> Vec<u8> {
        tlv::encode(0x7E, &self.encode_inner())
    }

    /// Decodes the object's content.
    pub fn decode_inner(data: &[u8]) -> Result<Self, PivError> {
        let mut aid = None;
        let mut pin_policy = None;
        for t in Reader::new(data) {
            let t = t?;
            match t.tag {
                0x4F => aid = Some(t.value.to_vec()),
                0x5F2F => {
                    pin_policy = Some(match t.value {
                        [a, b] => [*a, *b],
                        // A one-byte policy is seen on some cards.
                        [a] => [*a, 0],
                        _ => {
                            return Err(PivError::invalid(
                                "PIN usage policy",
                                "must be 1 or 2 bytes",
                            ))
                        }
                    })
                }
                other => return Err(PivError::UnexpectedTag(other)),
            }
        }
        Ok(Discovery {
            aid: aid.ok_or(PivError::MissingTag(0x4F))?,
            pin_policy: pin_policy.ok_or(PivError::MissingTag(0x5F2F))?,
        })
    }

    /// Decodes the object with its tag `7E`.
    pub fn decode(data: &[u8]) -> Result<Self, PivError> {
        Self::decode_inner(tlv::parse_single(data, 0x7E)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_matches_common_cards_and_round_trips() {
        let d = Discovery::default();
        let enc = d.encode();
        assert_eq!(enc.len(), 2 + 13 + 5);
        assert_eq!(&enc[..4], &[0x7E, 0x12, 0x4F, 0x0B]);
        assert_eq!(&enc[15..], &[0x5F, 0x2F, 0x02, 0x40, 0x00]);
        assert_eq!(Discovery::decode(&enc).unwrap(), d);
        assert!(Discovery::decode(&[0x7E, 0x02, 0x4F, 0x00]).is_err());
    }
}
