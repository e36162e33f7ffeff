//! The GENERAL AUTHENTICATE dynamic authentication template `7C`
//! (SP 800-73-4 Part 2 §3.2.4): `80` witness, `81` challenge, `82`
//! response, `85` exponentiation. A present-but-empty element is a request
//! for the card to fill it in.

use crate::error::PivError;
use iso7816::tlv::{self, Reader};

/// A dynamic authentication template; `None` = absent, `Some(&[])` =
/// requested.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DynAuth<'a> {
    pub witness: Option<&'a [u8]>,
    pub challenge: Option<&'a [u8]>,
    pub response: Option<&'a [u8]>,
    pub exponentiation: Option<&'a [u8]>,
}

impl<'a> DynAuth<'a> {
    /// Encodes the template including the outer tag `7C`.
    pub fn encode(&self) -> Vec<u8> {
        let mut inner = Vec::new();
        for (tag, v) in [
            (0x80, self.witness),
            (0x81, self.challenge),
            (0x82, self.response),
            (0x85, self.exponentiation),
        ] {
            if let Some(v) = v {
                tlv::push(&mut inner, tag, v);
            }
        }
        tlv::encode(0x7C, &inner)
    }

    /// Decodes a template (with its outer tag `7C`, no trailing bytes).
    /// Unknown or repeated elements are refused.
    pub fn decode(data: &'a [u8]) -> Result<Self, PivError> {
        let inner = tlv::parse_single(data, 0x7C)?;
        let mut out = DynAuth::default();
        for t in Reader::new(inner) {
            let t = t?;
            let slot = match t.tag {
                0x80 => &mut out.witness,
                0x81 => &mut out.challenge,
                0x82 => &mut out.response,
                0x85 => &mut out.exponentiation,
                other => return Err(PivError::UnexpectedTag(other)),
            };
            if slot.is_some() {
                return Err(PivError::DuplicateTag(t.tag));
            }
            *slot = Some(t.value);
        }
        Ok(out)
    }
}

/// Builds the template a host sends to have the card sign or decrypt
/// `data` (`82` requested, `81` = data).
pub fn sign_request(data: &[u8]) -> Vec<u8> {
    DynAuth {
        response: Some(&[]),
        challenge: Some(data),
        ..Default::default()
    }
    .encode()
}

/// Builds the template a host sends for ECDH with the peer's public point.
pub fn ecdh_request(peer_point: &[u8]) -> Vec<u8> {
    DynAuth {
        response: Some(&[]),
        exponentiation: Some(peer_point),
        ..Default::default()
    }
    .encode()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_element() {
        let big = vec![0x55; 300];
        let t = DynAuth {
            witness: Some(&[1, 2]),
            challenge: Some(&big),
            response: Some(&[]),
            exponentiation: Some(&[4]),
        };
        let enc = t.encode();
        assert_eq!(&enc[..2], &[0x7C, 0x82]);
        assert_eq!(DynAuth::decode(&enc).unwrap(), t);
        assert_eq!(
            sign_request(&[9]),
            vec![0x7C, 0x05, 0x81, 0x01, 0x09, 0x82, 0x00]
        );
    }

    #[test]
    fn refuses_unknown_repeated_and_truncated_elements() {
        assert_eq!(
            DynAuth::decode(&[0x7C, 0x02, 0x83, 0x00]),
            Err(PivError::UnexpectedTag(0x83))
        );
        assert_eq!(
            DynAuth::decode(&[0x7C, 0x04, 0x80, 0x00, 0x80, 0x00]),
            Err(PivError::DuplicateTag(0x80))
        );
        assert!(DynAuth::decode(&[0x7C, 0x04, 0x80, 0x05, 1]).is_err());
        assert!(DynAuth::decode(&[0x7D, 0x00]).is_err());
        assert!(DynAuth::decode(&[0x7C, 0x00, 0x00]).is_err());
    }
}
