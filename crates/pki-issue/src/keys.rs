//! Key pairs for test issuance: P-256, P-384, RSA-2048 and RSA-3072, stored as
//! PKCS#8 DER.

use super::IssueError;
use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{
    EcdsaKeyPair, KeyPair as _, RsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING,
    ECDSA_P384_SHA384_ASN1_SIGNING, RSA_PKCS1_SHA256,
};
use const_oid::db::rfc5912::{
    ECDSA_WITH_SHA_256, ECDSA_WITH_SHA_384, ID_EC_PUBLIC_KEY, RSA_ENCRYPTION, SECP_256_R_1,
    SECP_384_R_1, SHA_256_WITH_RSA_ENCRYPTION,
};
use der::asn1::BitString;
use der::{Any, Decode, Encode};
use serde::{Deserialize, Serialize};
use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};
use std::fmt;
use std::str::FromStr;

/// A key algorithm for generated keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyAlgorithm {
    P256,
    P384,
    Rsa2048,
    Rsa3072,
}

impl KeyAlgorithm {
    /// The short name used on the command line and in manifests.
    pub fn name(self) -> &'static str {
        match self {
            KeyAlgorithm::P256 => "p256",
            KeyAlgorithm::P384 => "p384",
            KeyAlgorithm::Rsa2048 => "rsa2048",
            KeyAlgorithm::Rsa3072 => "rsa3072",
        }
    }

    /// The SP 800-78-4 PIV algorithm identifier (07 RSA-2048, 11 P-256,
    /// 14 P-384; RSA-3072 has none in SP 800-78-4 and maps to 05).
    pub fn piv_algorithm_id(self) -> u8 {
        match self {
            KeyAlgorithm::P256 => 0x11,
            KeyAlgorithm::P384 => 0x14,
            KeyAlgorithm::Rsa2048 => 0x07,
            KeyAlgorithm::Rsa3072 => 0x05,
        }
    }
}

impl fmt::Display for KeyAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KeyAlgorithm {
    type Err = IssueError;
    fn from_str(s: &str) -> Result<Self, IssueError> {
        match s.to_ascii_lowercase().replace(['-', '_'], "").as_str() {
            "p256" | "ecp256" | "secp256r1" => Ok(KeyAlgorithm::P256),
            "p384" | "ecp384" | "secp384r1" => Ok(KeyAlgorithm::P384),
            "rsa2048" => Ok(KeyAlgorithm::Rsa2048),
            "rsa3072" => Ok(KeyAlgorithm::Rsa3072),
            _ => Err(IssueError::Invalid(format!(
                "unknown key algorithm {s:?} (use p256, p384, rsa2048 or rsa3072)"
            ))),
        }
    }
}

enum Inner {
    Ec(EcdsaKeyPair),
    Rsa(RsaKeyPair),
}

/// A private key with its algorithm and PKCS#8 encoding.
pub struct KeyPair {
    alg: KeyAlgorithm,
    pkcs8: zeroize::Zeroizing<Vec<u8>>,
    spki: Vec<u8>,
    inner: Inner,
}

impl fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyPair").field("alg", &self.alg).finish()
    }
}

impl KeyPair {
    /// Generates a new key.
    pub fn generate(alg: KeyAlgorithm) -> Result<KeyPair, IssueError> {
        let rng = SystemRandom::new();
        let pkcs8 = match alg {
            KeyAlgorithm::P256 => {
                EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
                    .map_err(|_| IssueError::Crypto)?
                    .as_ref()
                    .to_vec()
            }
            KeyAlgorithm::P384 => {
                EcdsaKeyPair::generate_pkcs8(&ECDSA_P384_SHA384_ASN1_SIGNING, &rng)
                    .map_err(|_| IssueError::Crypto)?
                    .as_ref()
                    .to_vec()
            }
            KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa3072 => {
                let size = if alg == KeyAlgorithm::Rsa2048 {
                    KeySize::Rsa2048
                } else {
                    KeySize::Rsa3072
                };
                let k = RsaKeyPair::generate(size).map_err(|_| IssueError::Crypto)?;
                let der: Pkcs8V1Der<'static> = k.as_der().map_err(|_| IssueError::Crypto)?;
                der.as_ref().to_vec()
            }
        };
        KeyPair::from_pkcs8(&pkcs8)
    }

    /// Loads a PKCS#8 private key (P-256, P-384 or RSA 2048/3072).
    pub fn from_pkcs8(der: &[u8]) -> Result<KeyPair, IssueError> {
        if let Ok(k) = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, der) {
            let spki = ec_spki(SECP_256_R_1, k.public_key().as_ref())?;
            return Ok(KeyPair {
                alg: KeyAlgorithm::P256,
                pkcs8: der.to_vec().into(),
                spki,
                inner: Inner::Ec(k),
            });
        }
        if let Ok(k) = EcdsaKeyPair::from_pkcs8(&ECDSA_P384_SHA384_ASN1_SIGNING, der) {
            let spki = ec_spki(SECP_384_R_1, k.public_key().as_ref())?;
            return Ok(KeyPair {
                alg: KeyAlgorithm::P384,
                pkcs8: der.to_vec().into(),
                spki,
                inner: Inner::Ec(k),
            });
        }
        let k = RsaKeyPair::from_pkcs8(der).map_err(|e| IssueError::BadKey(e.to_string()))?;
        let alg = match k.public_modulus_len() {
            256 => KeyAlgorithm::Rsa2048,
            384 => KeyAlgorithm::Rsa3072,
            n => {
                return Err(IssueError::BadKey(format!(
                    "RSA modulus of {} bits is not supported",
                    n * 8
                )))
            }
        };
        let spki: aws_lc_rs::encoding::PublicKeyX509Der<'static> =
            k.public_key().as_der().map_err(|_| IssueError::Crypto)?;
        Ok(KeyPair {
            alg,
            pkcs8: der.to_vec().into(),
            spki: spki.as_ref().to_vec(),
            inner: Inner::Rsa(k),
        })
    }

    pub fn algorithm(&self) -> KeyAlgorithm {
        self.alg
    }

    /// The PKCS#8 private key DER.
    pub fn pkcs8_der(&self) -> &[u8] {
        &self.pkcs8
    }

    /// The SubjectPublicKeyInfo DER of the public key.
    pub fn spki_der(&self) -> &[u8] {
        &self.spki
    }

    /// The raw public key bits (EC point, or RSAPublicKey DER).
    pub fn public_key_bytes(&self) -> Vec<u8> {
        match &self.inner {
            Inner::Ec(k) => k.public_key().as_ref().to_vec(),
            Inner::Rsa(k) => k.public_key().as_ref().to_vec(),
        }
    }

    /// The key identifier of RFC 7093 §2 method 1: the leftmost 160 bits of
    /// the SHA-256 of the subjectPublicKey bits.
    pub fn key_id(&self) -> Vec<u8> {
        key_id_of_spki(&self.spki).unwrap_or_default()
    }

    /// The algorithm identifier of signatures made with this key
    /// (ECDSA with SHA-256/384, or sha256WithRSAEncryption).
    pub fn signature_algorithm(&self) -> AlgorithmIdentifierOwned {
        match self.alg {
            KeyAlgorithm::P256 => AlgorithmIdentifierOwned {
                oid: ECDSA_WITH_SHA_256,
                parameters: None,
            },
            KeyAlgorithm::P384 => AlgorithmIdentifierOwned {
                oid: ECDSA_WITH_SHA_384,
                parameters: None,
            },
            KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa3072 => AlgorithmIdentifierOwned {
                oid: SHA_256_WITH_RSA_ENCRYPTION,
                parameters: Some(Any::null()),
            },
        }
    }

    /// The digest algorithm matching [`KeyPair::signature_algorithm`].
    pub fn digest_algorithm(&self) -> &'static aws_lc_rs::digest::Algorithm {
        match self.alg {
            KeyAlgorithm::P384 => &aws_lc_rs::digest::SHA384,
            _ => &aws_lc_rs::digest::SHA256,
        }
    }

    /// Signs `msg` (hashing it with the key's digest).
    pub fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, IssueError> {
        let rng = SystemRandom::new();
        match &self.inner {
            Inner::Ec(k) => Ok(k
                .sign(&rng, msg)
                .map_err(|_| IssueError::Crypto)?
                .as_ref()
                .to_vec()),
            Inner::Rsa(k) => {
                let mut sig = vec![0u8; k.public_modulus_len()];
                k.sign(&RSA_PKCS1_SHA256, &rng, msg, &mut sig)
                    .map_err(|_| IssueError::Crypto)?;
                Ok(sig)
            }
        }
    }
}

fn ec_spki(curve: const_oid::ObjectIdentifier, point: &[u8]) -> Result<Vec<u8>, IssueError> {
    let spki = SubjectPublicKeyInfoOwned {
        algorithm: AlgorithmIdentifierOwned {
            oid: ID_EC_PUBLIC_KEY,
            parameters: Some(Any::from(&curve)),
        },
        subject_public_key: BitString::from_bytes(point)?,
    };
    Ok(spki.to_der()?)
}

/// RFC 7093 §2 method 1 key identifier of a SubjectPublicKeyInfo DER.
pub(crate) fn key_id_of_spki(spki_der: &[u8]) -> Result<Vec<u8>, IssueError> {
    let spki = SubjectPublicKeyInfoOwned::from_der(spki_der)?;
    let bits = spki.subject_public_key.raw_bytes();
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bits);
    Ok(d.as_ref()[..20].to_vec())
}

/// Whether an SPKI is RSA (used to choose NULL parameters etc.).
#[allow(dead_code)]
pub(crate) fn spki_is_rsa(spki: &SubjectPublicKeyInfoOwned) -> bool {
    spki.algorithm.oid == RSA_ENCRYPTION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generates_and_reloads_ec_keys() {
        for alg in [KeyAlgorithm::P256, KeyAlgorithm::P384] {
            let k = KeyPair::generate(alg).unwrap();
            let again = KeyPair::from_pkcs8(k.pkcs8_der()).unwrap();
            assert_eq!(again.algorithm(), alg);
            assert_eq!(again.spki_der(), k.spki_der());
            assert_eq!(k.key_id().len(), 20);
            let sig = k.sign(b"hello").unwrap();
            let verify_alg = if alg == KeyAlgorithm::P256 {
                &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1
            } else {
                &aws_lc_rs::signature::ECDSA_P384_SHA384_ASN1
            };
            aws_lc_rs::signature::UnparsedPublicKey::new(verify_alg, k.public_key_bytes())
                .verify(b"hello", &sig)
                .unwrap();
        }
    }

    #[test]
    fn rejects_garbage_keys_and_names() {
        assert!(matches!(
            KeyPair::from_pkcs8(&[0x30, 0x03, 0x02, 0x01, 0x00]),
            Err(IssueError::BadKey(_))
        ));
        assert!("dsa".parse::<KeyAlgorithm>().is_err());
        assert_eq!("P-256".parse::<KeyAlgorithm>().unwrap(), KeyAlgorithm::P256);
    }
}
