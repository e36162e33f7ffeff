//! Key references, PIN references and algorithm identifiers
//! (SP 800-78-4 Tables 6-2 and 6-3, SP 800-73-4 Part 1 §3.3).

use crate::error::PivError;
use crate::objects::DataObject;

/// A PIV key reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyRef {
    /// `9A`: PIV authentication key.
    PivAuth,
    /// `9B`: card application administration (management) key.
    Management,
    /// `9C`: digital signature key.
    Signature,
    /// `9D`: key management key.
    KeyManagement,
    /// `9E`: card authentication key.
    CardAuth,
    /// `82`..`95`: retired key management keys 1 to 20.
    Retired(u8),
    /// `F9`: attestation key (Yubico).
    Attestation,
}

impl KeyRef {
    pub fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            0x9A => KeyRef::PivAuth,
            0x9B => KeyRef::Management,
            0x9C => KeyRef::Signature,
            0x9D => KeyRef::KeyManagement,
            0x9E => KeyRef::CardAuth,
            0x82..=0x95 => KeyRef::Retired(b - 0x81),
            0xF9 => KeyRef::Attestation,
            _ => return None,
        })
    }

    pub fn byte(self) -> u8 {
        match self {
            KeyRef::PivAuth => 0x9A,
            KeyRef::Management => 0x9B,
            KeyRef::Signature => 0x9C,
            KeyRef::KeyManagement => 0x9D,
            KeyRef::CardAuth => 0x9E,
            KeyRef::Retired(n) => 0x81 + n,
            KeyRef::Attestation => 0xF9,
        }
    }

    /// Whether the reference names an asymmetric key slot.
    pub fn is_asymmetric_slot(self) -> bool {
        !matches!(self, KeyRef::Management)
    }

    /// The data object holding this slot's certificate.
    pub fn certificate_object(self) -> Option<DataObject> {
        Some(match self {
            KeyRef::PivAuth => DataObject::CertPivAuth,
            KeyRef::Signature => DataObject::CertSignature,
            KeyRef::KeyManagement => DataObject::CertKeyManagement,
            KeyRef::CardAuth => DataObject::CertCardAuth,
            KeyRef::Retired(n) => DataObject::RetiredCert(n),
            KeyRef::Attestation => DataObject::AttestationCert,
            KeyRef::Management => return None,
        })
    }

    /// Every asymmetric slot, in card order.
    pub fn asymmetric_slots() -> impl Iterator<Item = KeyRef> {
        [
            KeyRef::PivAuth,
            KeyRef::Signature,
            KeyRef::KeyManagement,
            KeyRef::CardAuth,
        ]
        .into_iter()
        .chain((1..=20).map(KeyRef::Retired))
        .chain(std::iter::once(KeyRef::Attestation))
    }
}

impl TryFrom<u8> for KeyRef {
    type Error = PivError;
    fn try_from(b: u8) -> Result<Self, PivError> {
        KeyRef::from_byte(b).ok_or(PivError::Unknown {
            what: "key reference",
            value: u32::from(b),
        })
    }
}

/// PIN references used by VERIFY, CHANGE REFERENCE DATA and RESET RETRY COUNTER.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PinRef {
    /// `80`: PIV card application PIN.
    Pin,
    /// `81`: PIN unblocking key.
    Puk,
}

impl PinRef {
    pub fn from_byte(b: u8) -> Option<Self> {
        match b {
            0x80 => Some(PinRef::Pin),
            0x81 => Some(PinRef::Puk),
            _ => None,
        }
    }

    pub fn byte(self) -> u8 {
        match self {
            PinRef::Pin => 0x80,
            PinRef::Puk => 0x81,
        }
    }
}

/// Cryptographic algorithm identifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// `03`: three-key Triple-DES (ECB).
    TripleDes,
    /// `08`: AES-128 (ECB).
    Aes128,
    /// `0A`: AES-192 (ECB).
    Aes192,
    /// `0C`: AES-256 (ECB).
    Aes256,
    /// `07`: RSA 2048.
    Rsa2048,
    /// `05`: RSA 3072.
    Rsa3072,
    /// `16`: RSA 4096 (Yubico).
    Rsa4096,
    /// `11`: ECC P-256.
    EccP256,
    /// `14`: ECC P-384.
    EccP384,
}

impl Algorithm {
    pub fn from_id(id: u8) -> Option<Self> {
        Some(match id {
            0x03 => Algorithm::TripleDes,
            0x08 => Algorithm::Aes128,
            0x0A => Algorithm::Aes192,
            0x0C => Algorithm::Aes256,
            0x07 => Algorithm::Rsa2048,
            0x05 => Algorithm::Rsa3072,
            0x16 => Algorithm::Rsa4096,
            0x11 => Algorithm::EccP256,
            0x14 => Algorithm::EccP384,
            _ => return None,
        })
    }

    pub fn id(self) -> u8 {
        match self {
            Algorithm::TripleDes => 0x03,
            Algorithm::Aes128 => 0x08,
            Algorithm::Aes192 => 0x0A,
            Algorithm::Aes256 => 0x0C,
            Algorithm::Rsa2048 => 0x07,
            Algorithm::Rsa3072 => 0x05,
            Algorithm::Rsa4096 => 0x16,
            Algorithm::EccP256 => 0x11,
            Algorithm::EccP384 => 0x14,
        }
    }

    pub fn is_symmetric(self) -> bool {
        self.block_size().is_some()
    }

    pub fn is_rsa(self) -> bool {
        self.rsa_bytes().is_some()
    }

    pub fn is_ec(self) -> bool {
        self.ec_field_bytes().is_some()
    }

    /// Block size of a symmetric algorithm.
    pub fn block_size(self) -> Option<usize> {
        match self {
            Algorithm::TripleDes => Some(8),
            Algorithm::Aes128 | Algorithm::Aes192 | Algorithm::Aes256 => Some(16),
            _ => None,
        }
    }

    /// Key length of a symmetric algorithm in bytes.
    pub fn key_len(self) -> Option<usize> {
        match self {
            Algorithm::TripleDes | Algorithm::Aes192 => Some(24),
            Algorithm::Aes128 => Some(16),
            Algorithm::Aes256 => Some(32),
            _ => None,
        }
    }

    /// Modulus length of an RSA algorithm in bytes.
    pub fn rsa_bytes(self) -> Option<usize> {
        match self {
            Algorithm::Rsa2048 => Some(256),
            Algorithm::Rsa3072 => Some(384),
            Algorithm::Rsa4096 => Some(512),
            _ => None,
        }
    }

    /// Field size of an EC algorithm in bytes.
    pub fn ec_field_bytes(self) -> Option<usize> {
        match self {
            Algorithm::EccP256 => Some(32),
            Algorithm::EccP384 => Some(48),
            _ => None,
        }
    }

    /// A short name, for logs and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::TripleDes => "3DES",
            Algorithm::Aes128 => "AES-128",
            Algorithm::Aes192 => "AES-192",
            Algorithm::Aes256 => "AES-256",
            Algorithm::Rsa2048 => "RSA-2048",
            Algorithm::Rsa3072 => "RSA-3072",
            Algorithm::Rsa4096 => "RSA-4096",
            Algorithm::EccP256 => "P-256",
            Algorithm::EccP384 => "P-384",
        }
    }
}

impl TryFrom<u8> for Algorithm {
    type Error = PivError;
    fn try_from(b: u8) -> Result<Self, PivError> {
        Algorithm::from_id(b).ok_or(PivError::Unknown {
            what: "algorithm",
            value: u32::from(b),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_references_round_trip() {
        for b in 0..=255u8 {
            if let Some(k) = KeyRef::from_byte(b) {
                assert_eq!(k.byte(), b);
            }
        }
        assert_eq!(KeyRef::from_byte(0x82), Some(KeyRef::Retired(1)));
        assert_eq!(KeyRef::from_byte(0x95), Some(KeyRef::Retired(20)));
        assert_eq!(KeyRef::from_byte(0x96), None);
        assert_eq!(KeyRef::asymmetric_slots().count(), 25);
        assert_eq!(
            KeyRef::Retired(20).certificate_object().unwrap().tag(),
            0x5FC120
        );
        assert!(KeyRef::try_from(0x00).is_err());
    }

    #[test]
    fn algorithms_round_trip_and_know_their_sizes() {
        for b in 0..=255u8 {
            if let Some(a) = Algorithm::from_id(b) {
                assert_eq!(a.id(), b);
                assert_eq!(
                    u8::from(a.is_symmetric()) + u8::from(a.is_rsa()) + u8::from(a.is_ec()),
                    1
                );
            }
        }
        assert_eq!(Algorithm::from_id(0x16), Some(Algorithm::Rsa4096));
        assert_eq!(Algorithm::Rsa3072.rsa_bytes(), Some(384));
        assert_eq!(Algorithm::Aes192.key_len(), Some(24));
        assert_eq!(Algorithm::TripleDes.block_size(), Some(8));
        assert_eq!(PinRef::from_byte(0x81), Some(PinRef::Puk));
    }
}
