//! The PIV application identifier and the application property template
//! returned by SELECT (SP 800-73-4 Part 2 §3.1.1).

use crate::error::PivError;
use crate::keys::Algorithm;
use iso7816::tlv::{self, Reader};

/// The full PIV AID: NIST RID `A000000308` + PIX `00001000` + version `0100`.
pub const PIV_AID: [u8; 11] = [
    0xA0, 0x00, 0x00, 0x03, 0x08, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00,
];
/// The NIST registered application provider identifier.
pub const NIST_RID: [u8; 5] = [0xA0, 0x00, 0x00, 0x03, 0x08];
/// The PIX with version, as carried in tag `4F` of the property template.
pub const PIV_PIX: [u8; 6] = [0x00, 0x00, 0x10, 0x00, 0x01, 0x00];

/// Whether a SELECT data field names the PIV application: the full AID or
/// a truncation of it that keeps at least the RID (yubico-piv-tool sends
/// `A000000308`, OpenSC `A00000030800001000`).
pub fn selects_piv(aid: &[u8]) -> bool {
    aid.len() >= NIST_RID.len() && PIV_AID.starts_with(aid)
}

/// The application property template (tag `61`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplicationProperties {
    /// Tag `4F`: PIX of the application with version.
    pub pix: Vec<u8>,
    /// Tag `79` / `4F`: coexistent tag allocation authority (the NIST RID).
    pub authority: Vec<u8>,
    /// Tag `50`: application label.
    pub label: Option<String>,
    /// Tag `AC` / `80`: cryptographic algorithms supported.
    pub algorithms: Vec<Algorithm>,
}

impl ApplicationProperties {
    /// The template a PIV card answers.
    pub fn piv(label: Option<&str>, algorithms: &[Algorithm]) -> Self {
        ApplicationProperties {
            pix: PIV_PIX.to_vec(),
            authority: NIST_RID.to_vec(),
            label: label.map(str::to_owned),
            algorithms: algorithms.to_vec(),
        }
    }

    /// Encodes the template including the outer tag `61`.
    pub fn encode(&self) -> Vec<u8> {
        let mut inner = Vec::with_capacity(64);
        tlv::push(&mut inner, 0x4F, &self.pix);
        tlv::push(&mut inner, 0x79, &tlv::encode(0x4F, &self.authority));
        if let Some(label) = &self.label {
            tlv::push(&mut inner, 0x50, label.as_bytes());
        }
        if !self.algorithms.is_empty() {
            let mut ac = Vec::new();
            for alg in &self.algorithms {
                tlv::push(&mut ac, 0x80, &[alg.id()]);
            }
            // Object identifier of the cryptographic mechanism list end.
            tlv::push(&mut ac, 0x06, &[0x00]);
            tlv::push(&mut inner, 0xAC, &ac);
        }
        tlv::encode(0x61, &inner)
    }

    /// Decodes a SELECT answer (the template with its outer tag `61`).
    pub fn decode(data: &[u8]) -> Result<Self, PivError> {
        let inner = tlv::parse_single(data, 0x61)?;
        let mut pix = None;
        let mut authority = None;
        let mut label = None;
        let mut algorithms = Vec::new();
        for t in Reader::new(inner) {
            let t = t?;
            match t.tag {
                0x4F => pix = Some(t.value.to_vec()),
                0x79 => authority = tlv::find(t.value, 0x4F)?.map(<[u8]>::to_vec),
                0x50 => {
                    label = Some(
                        String::from_utf8(t.value.to_vec())
                            .map_err(|_| PivError::invalid("application label", "not UTF-8"))?,
                    )
                }
                0xAC => {
                    for a in Reader::new(t.value) {
                        let a = a?;
                        if a.tag == 0x80 {
                            if let [id] = a.value {
                                if let Some(alg) = Algorithm::from_id(*id) {
                                    algorithms.push(alg);
                                }
                            }
                        }
                    }
                }
                // Other tags (URL 5F50, ...) are optional and ignored.
                _ => {}
            }
        }
        Ok(ApplicationProperties {
            pix: pix.ok_or(PivError::MissingTag(0x4F))?,
            authority: authority.unwrap_or_default(),
            label,
            algorithms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_truncations_used_by_clients() {
        assert!(selects_piv(&PIV_AID));
        assert!(selects_piv(&PIV_AID[..9]));
        assert!(selects_piv(&NIST_RID));
        assert!(!selects_piv(&PIV_AID[..4]));
        assert!(!selects_piv(&[0xA0, 0x00, 0x00, 0x05, 0x27]));
        let mut longer = PIV_AID.to_vec();
        longer.push(0);
        assert!(!selects_piv(&longer));
    }

    #[test]
    fn template_round_trips_and_carries_the_pix() {
        let apt = ApplicationProperties::piv(Some("pivgate"), &[Algorithm::EccP256]);
        let enc = apt.encode();
        assert_eq!(
            &enc[2..10],
            &[0x4F, 0x06, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00]
        );
        assert_eq!(ApplicationProperties::decode(&enc).unwrap(), apt);
        assert!(ApplicationProperties::decode(&enc[..enc.len() - 1]).is_err());
    }
}
