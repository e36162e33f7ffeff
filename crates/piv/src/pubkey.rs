//! The public key template `7F49` answered by GENERATE ASYMMETRIC KEY PAIR
//! (SP 800-73-4 Part 2 §3.3.2): `81` modulus and `82` exponent for RSA,
//! `86` the uncompressed point for ECC.

use crate::error::PivError;
use iso7816::tlv::{self, Reader};

/// A public key as carried in `7F49`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKeyTemplate {
    Rsa { modulus: Vec<u8>, exponent: Vec<u8> },
    Ec { point: Vec<u8> },
}

impl PublicKeyTemplate {
    /// The template's content (without the `7F49` header), as also used by
    /// GET METADATA.
    pub fn encode_inner(&self) -> Vec<u8> {
        let mut inner = Vec::new();
        match self {
            PublicKeyTemplate::Rsa { modulus, exponent } => {
                tlv::push(&mut inner, 0x81, modulus);
                tlv::push(&mut inner, 0x82, exponent);
            }
            PublicKeyTemplate::Ec { point } => tlv::push(&mut inner, 0x86, point),
        }
        inner
    }

    /// Encodes the template including the `7F49` header.
    pub fn encode(&self) -> Vec<u8> {
        tlv::encode(0x7F49, &self.encode_inner())
    }

    /// Decodes a template with its `7F49` header.
    pub fn decode(data: &[u8]) -> Result<Self, PivError> {
        Self::decode_inner(tlv::parse_single(data, 0x7F49)?)
    }

    /// Decodes the template's content.
    pub fn decode_inner(inner: &[u8]) -> Result<Self, PivError> {
        let (mut n, mut e, mut p) = (None, None, None);
        for t in Reader::new(inner) {
            let t = t?;
            let slot = match t.tag {
                0x81 => &mut n,
                0x82 => &mut e,
                0x86 => &mut p,
                other => return Err(PivError::UnexpectedTag(other)),
            };
            if slot.is_some() {
                return Err(PivError::DuplicateTag(t.tag));
            }
            *slot = Some(t.value.to_vec());
        }
        match (n, e, p) {
            (Some(modulus), Some(exponent), None) => {
                if modulus.is_empty() || exponent.is_empty() {
                    return Err(PivError::invalid(
                        "RSA public key",
                        "empty modulus or exponent",
                    ));
                }
                Ok(PublicKeyTemplate::Rsa { modulus, exponent })
            }
            (None, None, Some(point)) => {
                if point.first() != Some(&0x04) || point.len() % 2 == 0 {
                    return Err(PivError::invalid(
                        "EC public key",
                        "not an uncompressed point",
                    ));
                }
                Ok(PublicKeyTemplate::Ec { point })
            }
            (None, None, None) => Err(PivError::MissingTag(0x86)),
            _ => Err(PivError::invalid(
                "public key template",
                "mixes RSA and EC elements",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_rsa_and_ec() {
        let rsa = PublicKeyTemplate::Rsa {
            modulus: vec![0xC0; 256],
            exponent: vec![1, 0, 1],
        };
        let enc = rsa.encode();
        assert_eq!(&enc[..6], &[0x7F, 0x49, 0x82, 0x01, 0x09, 0x81]);
        assert_eq!(PublicKeyTemplate::decode(&enc).unwrap(), rsa);
        let mut point = vec![0x04];
        point.extend_from_slice(&[7; 64]);
        let ec = PublicKeyTemplate::Ec { point };
        assert_eq!(PublicKeyTemplate::decode(&ec.encode()).unwrap(), ec);
    }

    #[test]
    fn refuses_inconsistent_templates() {
        assert!(PublicKeyTemplate::decode_inner(&[0x81, 1, 1]).is_err());
        assert!(PublicKeyTemplate::decode_inner(&[0x86, 2, 4, 1]).is_err());
        assert!(PublicKeyTemplate::decode_inner(&[0x81, 1, 1, 0x82, 1, 3, 0x86, 1, 4]).is_err());
        assert!(PublicKeyTemplate::decode_inner(&[]).is_err());
    }
}
