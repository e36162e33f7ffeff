//! The certificate container (SP 800-73-4 Part 1 Table 10): `70` the
//! certificate, `71` CertInfo (bit 0: gzip-compressed), `FE` error detection
//! code (empty).

use crate::error::PivError;
use iso7816::tlv::{self, Reader};

/// A decoded certificate container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertContainer {
    /// The certificate bytes as stored (DER, or gzip of DER when compressed).
    pub certificate: Vec<u8>,
    /// CertInfo bit 0: the certificate is gzip-compressed.
    pub compressed: bool,
}

impl CertContainer {
    /// A container for an uncompressed DER certificate.
    pub fn new(der: Vec<u8>) -> Self {
        CertContainer {
            certificate: der,
            compressed: false,
        }
    }

    /// Encodes the container value (the content of tag `53`).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.certificate.len() + 12);
        tlv::push(&mut out, 0x70, &self.certificate);
        tlv::push(&mut out, 0x71, &[u8::from(self.compressed)]);
        tlv::push(&mut out, 0xFE, &[]);
        out
    }

    /// Decodes the container value (the content of tag `53`). `71` and `FE`
    /// are optional on input, as on deployed cards.
    pub fn decode(data: &[u8]) -> Result<Self, PivError> {
        let mut certificate = None;
        let mut compressed = false;
        let mut seen_info = false;
        for t in Reader::new(data) {
            let t = t?;
            match t.tag {
                0x70 if certificate.is_none() => certificate = Some(t.value.to_vec()),
                0x71 if !seen_info => {
                    seen_info = true;
                    compressed = match t.value {
                        [] => false,
                        [b] => b & 0x01 != 0,
                        _ => return Err(PivError::invalid("CertInfo", "longer than one byte")),
                    };
                }
                0x70 | 0x71 => return Err(PivError::DuplicateTag(t.tag)),
                0xFE => {}
                other => return Err(PivError::UnexpectedTag(other)),
            }
        }
        let certificate = certificate.ok_or(PivError::MissingTag(0x70))?;
        if certificate.is_empty() {
            return Err(PivError::invalid(
                "certificate container",
                "empty certificate",
            ));
        }
        Ok(CertContainer {
            certificate,
            compressed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_sets_the_compressed_bit() {
        let c = CertContainer::new(vec![0x30, 0x03, 1, 2, 3]);
        let enc = c.encode();
        assert_eq!(enc, vec![0x70, 5, 0x30, 3, 1, 2, 3, 0x71, 1, 0, 0xFE, 0]);
        assert_eq!(CertContainer::decode(&enc).unwrap(), c);
        let z = CertContainer {
            certificate: vec![0x1F, 0x8B],
            compressed: true,
        };
        assert_eq!(CertContainer::decode(&z.encode()).unwrap(), z);
    }

    #[test]
    fn rejects_malformed_containers() {
        assert_eq!(
            CertContainer::decode(&[0x71, 1, 0]),
            Err(PivError::MissingTag(0x70))
        );
        assert_eq!(
            CertContainer::decode(&[0x70, 1, 9, 0x70, 1, 9]),
            Err(PivError::DuplicateTag(0x70))
        );
        assert_eq!(
            CertContainer::decode(&[0x70, 1, 9, 0x99, 0]),
            Err(PivError::UnexpectedTag(0x99))
        );
        assert!(CertContainer::decode(&[0x70, 5, 9]).is_err());
    }
}
