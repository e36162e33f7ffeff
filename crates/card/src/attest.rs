//! Key attestation (the Yubico-compatible ATTEST `F9` command): an X.509
//! certificate for a slot's public key, signed by the attestation key in
//! slot `F9`, stating that the key was generated on this card. The DER is
//! built directly with the BER-TLV encoder; the signature uses the card's
//! own raw operations.

use crate::crypto::{CryptoError, PrivateKey};
use iso7816::tlv::{self, Reader};
use piv::{Algorithm, PublicKeyTemplate};

const OID_RSA_ENCRYPTION: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01];
const OID_SHA256_WITH_RSA: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0B];
const OID_EC_PUBLIC_KEY: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01];
const OID_P256: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07];
const OID_P384: &[u8] = &[0x2B, 0x81, 0x04, 0x00, 0x22];
const OID_ECDSA_SHA256: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02];
const OID_ECDSA_SHA384: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x03];
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
const OID_BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1D, 0x13];
/// Yubico PIV attestation extensions 1.3.6.1.4.1.41482.3.{3,7,8}.
const OID_YK_FIRMWARE: &[u8] = &[0x2B, 0x06, 0x01, 0x04, 0x01, 0x82, 0xC4, 0x0A, 0x03, 0x03];
const OID_YK_SERIAL: &[u8] = &[0x2B, 0x06, 0x01, 0x04, 0x01, 0x82, 0xC4, 0x0A, 0x03, 0x07];
const OID_YK_POLICY: &[u8] = &[0x2B, 0x06, 0x01, 0x04, 0x01, 0x82, 0xC4, 0x0A, 0x03, 0x08];
/// SHA-256 DigestInfo prefix (RFC 8017 §9.2 note 1).
const SHA256_DIGEST_INFO: &[u8] = &[
    0x30, 0x31, 0x30, 0x0D, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05,
    0x00, 0x04, 0x20,
];

/// What the attestation certificate says about the attested key.
#[derive(Debug, Clone)]
pub struct Statement<'a> {
    pub subject_cn: &'a str,
    pub public_key: &'a PublicKeyTemplate,
    pub algorithm: Algorithm,
    pub serial: u32,
    pub version: [u8; 3],
    /// PIN and touch policy bytes.
    pub policy: [u8; 2],
}

/// Encodes a DER INTEGER from unsigned big-endian bytes.
fn integer(unsigned: &[u8]) -> Vec<u8> {
    let trimmed = match unsigned.iter().position(|&b| b != 0) {
        Some(i) => &unsigned[i..],
        None => &[0u8][..],
    };
    let mut v = Vec::with_capacity(trimmed.len() + 1);
    if trimmed[0] & 0x80 != 0 {
        v.push(0);
    }
    v.extend_from_slice(trimmed);
    tlv::encode(0x02, &v)
}

fn seq(parts: &[&[u8]]) -> Vec<u8> {
    tlv::encode(0x30, &parts.concat())
}

fn bit_string(bytes: &[u8]) -> Vec<u8> {
    tlv::encode(0x03, &[&[0u8][..], bytes].concat())
}

/// The subject of the attestation CA certificate made by personalisation.
pub const DEFAULT_CA_NAME: &str = "pivgate PIV Attestation CA";

/// A DER Name with one common name.
pub fn name(cn: &str) -> Vec<u8> {
    let atv = seq(&[
        &tlv::encode(0x06, OID_COMMON_NAME),
        &tlv::encode(0x0C, cn.as_bytes()),
    ]);
    seq(&[&tlv::encode(0x31, &atv)])
}

/// SubjectPublicKeyInfo for a PIV public key.
pub fn spki(public: &PublicKeyTemplate, alg: Algorithm) -> Result<Vec<u8>, CryptoError> {
    match public {
        PublicKeyTemplate::Rsa { modulus, exponent } => {
            let rsa_key = seq(&[&integer(modulus), &integer(exponent)]);
            Ok(seq(&[
                &seq(&[&tlv::encode(0x06, OID_RSA_ENCRYPTION), &[0x05, 0x00]]),
                &bit_string(&rsa_key),
            ]))
        }
        PublicKeyTemplate::Ec { point } => {
            let curve = match alg {
                Algorithm::EccP256 => OID_P256,
                Algorithm::EccP384 => OID_P384,
                _ => return Err(CryptoError::Unsupported("EC key on an unknown curve")),
            };
            Ok(seq(&[
                &seq(&[
                    &tlv::encode(0x06, OID_EC_PUBLIC_KEY),
                    &tlv::encode(0x06, curve),
                ]),
                &bit_string(point),
            ]))
        }
    }
}

fn extension(oid: &[u8], critical: bool, value: &[u8]) -> Vec<u8> {
    let crit: &[u8] = if critical { &[0x01, 0x01, 0xFF] } else { &[] };
    seq(&[&tlv::encode(0x06, oid), crit, &tlv::encode(0x04, value)])
}

/// `UTCTime` for `secs` since the Unix epoch (years 1950-2049).
fn utc_time(secs: u64) -> Vec<u8> {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let s = format!(
        "{:02}{:02}{:02}{:02}{:02}{:02}Z",
        y % 100,
        m,
        d,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    tlv::encode(0x17, s.as_bytes())
}

fn signature_algorithm(signer: Algorithm) -> Result<Vec<u8>, CryptoError> {
    Ok(match signer {
        Algorithm::Rsa2048 | Algorithm::Rsa3072 | Algorithm::Rsa4096 => {
            seq(&[&tlv::encode(0x06, OID_SHA256_WITH_RSA), &[0x05, 0x00]])
        }
        Algorithm::EccP256 => seq(&[&tlv::encode(0x06, OID_ECDSA_SHA256)]),
        Algorithm::EccP384 => seq(&[&tlv::encode(0x06, OID_ECDSA_SHA384)]),
        _ => {
            return Err(CryptoError::Unsupported(
                "attestation key must be RSA or EC",
            ))
        }
    })
}

/// Signs `tbs` with the attestation key (PKCS#1 v1.5 SHA-256 or ECDSA).
fn sign(signer: &PrivateKey, tbs: &[u8]) -> Result<Vec<u8>, CryptoError> {
    use aws_lc_rs::digest;
    let alg = signer.algorithm();
    if let Some(k) = alg.rsa_bytes() {
        let h = digest::digest(&digest::SHA256, tbs);
        let t = [SHA256_DIGEST_INFO, h.as_ref()].concat();
        let mut block = vec![0x00, 0x01];
        block.resize(k - t.len() - 1, 0xFF);
        block.push(0x00);
        block.extend_from_slice(&t);
        signer.rsa_raw(&block)
    } else {
        let h = if alg == Algorithm::EccP384 {
            digest::digest(&digest::SHA384, tbs)
        } else {
            digest::digest(&digest::SHA256, tbs)
        };
        signer.ecdsa_sign_digest(h.as_ref())
    }
}

/// Builds and signs a certificate. `issuer` is a DER Name; `ca` adds
/// `basicConstraints cA` (for the attestation key's own certificate).
fn certificate(
    signer: &PrivateKey,
    issuer: &[u8],
    subject: &[u8],
    spki: &[u8],
    extensions: &[Vec<u8>],
) -> Result<Vec<u8>, CryptoError> {
    let mut serial = [0u8; 16];
    crate::crypto::random(&mut serial)?;
    serial[0] &= 0x7F;
    serial[0] |= 0x01;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let validity = seq(&[
        &utc_time(now.saturating_sub(60)),
        &tlv::encode(0x18, b"99991231235959Z"),
    ]);
    let sig_alg = signature_algorithm(signer.algorithm())?;
    let exts = tlv::encode(
        0xA3,
        &seq(&extensions.iter().map(Vec::as_slice).collect::<Vec<_>>()),
    );
    let tbs = seq(&[
        &[0xA0, 0x03, 0x02, 0x01, 0x02],
        &integer(&serial),
        &sig_alg,
        issuer,
        &validity,
        subject,
        spki,
        &exts,
    ]);
    let sig = sign(signer, &tbs)?;
    Ok(seq(&[&tbs, &sig_alg, &bit_string(&sig)]))
}

/// The attestation certificate for a slot key.
pub fn attest(
    signer: &PrivateKey,
    issuer: &[u8],
    s: &Statement<'_>,
) -> Result<Vec<u8>, CryptoError> {
    let extensions = vec![
        extension(OID_YK_FIRMWARE, false, &s.version),
        extension(OID_YK_SERIAL, false, &integer(&s.serial.to_be_bytes())),
        extension(OID_YK_POLICY, false, &s.policy),
    ];
    certificate(
        signer,
        issuer,
        &name(s.subject_cn),
        &spki(s.public_key, s.algorithm)?,
        &extensions,
    )
}

/// A self-signed CA certificate for the attestation key itself.
pub fn self_signed_ca(signer: &PrivateKey, cn: &str) -> Result<Vec<u8>, CryptoError> {
    let n = name(cn);
    let public = signer.public_key()?;
    let bc = extension(OID_BASIC_CONSTRAINTS, true, &seq(&[&[0x01, 0x01, 0xFF]]));
    certificate(signer, &n, &n, &spki(&public, signer.algorithm())?, &[bc])
}

/// The DER subject Name of a certificate (to use as the issuer of the
/// certificates it signs).
pub fn subject_of(cert: &[u8]) -> Option<Vec<u8>> {
    let cert = tlv::parse_single(cert, 0x30).ok()?;
    let tbs = Reader::new(cert).expect(0x30).ok()?;
    let mut r = Reader::new(tbs);
    let mut t = r.read().ok()?;
    if t.tag == 0xA0 {
        t = r.read().ok()?; // serial
    }
    if t.tag != 0x02 {
        return None;
    }
    r.expect(0x30).ok()?; // signature algorithm
    r.expect(0x30).ok()?; // issuer
    r.expect(0x30).ok()?; // validity
    r.expect(0x30).ok().map(|v| tlv::encode(0x30, v))
}

/// Splits a certificate into (to-be-signed DER, signature bytes).
pub fn split_certificate(cert: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let inner = tlv::parse_single(cert, 0x30).ok()?;
    let mut r = Reader::new(inner);
    let tbs = r.expect(0x30).ok()?;
    r.expect(0x30).ok()?;
    let sig = r.expect(0x03).ok()?;
    Some((tlv::encode(0x30, tbs), sig.get(1..)?.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::generate_pkcs8;
    use aws_lc_rs::signature::{self, UnparsedPublicKey};

    #[test]
    fn utc_time_matches_known_dates() {
        assert_eq!(utc_time(0)[2..], *b"700101000000Z");
        assert_eq!(utc_time(951_782_400)[2..], *b"000229000000Z");
        assert_eq!(utc_time(1_767_225_599)[2..], *b"251231235959Z");
    }

    #[test]
    fn attestation_chain_verifies() {
        for alg in [Algorithm::EccP256, Algorithm::Rsa2048] {
            let ca_key = PrivateKey::from_pkcs8(&generate_pkcs8(alg).unwrap()).unwrap();
            let ca = self_signed_ca(&ca_key, "pivgate attestation").unwrap();
            let issuer = subject_of(&ca).unwrap();
            assert_eq!(issuer, name("pivgate attestation"));
            let slot_key =
                PrivateKey::from_pkcs8(&generate_pkcs8(Algorithm::EccP256).unwrap()).unwrap();
            let public = slot_key.public_key().unwrap();
            let cert = attest(
                &ca_key,
                &issuer,
                &Statement {
                    subject_cn: "pivgate PIV Attestation 9a",
                    public_key: &public,
                    algorithm: Algorithm::EccP256,
                    serial: 42,
                    version: [5, 7, 1],
                    policy: [2, 1],
                },
            )
            .unwrap();
            let ca_public = ca_key.public_key().unwrap();
            for c in [&ca, &cert] {
                let (tbs, sig) = split_certificate(c).unwrap();
                match &ca_public {
                    PublicKeyTemplate::Ec { point } => {
                        UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_ASN1, point)
                            .verify(&tbs, &sig)
                            .unwrap()
                    }
                    PublicKeyTemplate::Rsa { modulus, exponent } => {
                        signature::RsaPublicKeyComponents {
                            n: modulus,
                            e: exponent,
                        }
                        .verify(&signature::RSA_PKCS1_2048_8192_SHA256, &tbs, &sig)
                        .unwrap()
                    }
                }
            }
            assert_eq!(
                subject_of(&cert).unwrap(),
                name("pivgate PIV Attestation 9a")
            );
        }
    }
}
