//! The host-side checks of a transaction: certificate validation with the
//! FIPS 201 profiles (through `pki`), the card's signature over the
//! challenge, and the bindings between certificate and CHUID.

use crate::refusal::Refusal;
use crate::transaction::CardIdentity;
use piv::chuid::Chuid;
use pki::cache::{Scope, ValidationCache};
use pki::cert::Cert;
use pki::fips201::{self, PivValidated};
use pki::revocation_set::RevocationSet;
use pki::sig::{AlgorithmPolicy, Hash, PublicKey, SignatureAlgorithm};
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::ValidationOptions;
use std::sync::Arc;

pub use pki::fips201::CertProfile;

/// A certificate that validated, with what the mechanisms need from it.
#[derive(Debug, Clone)]
pub struct CardCert {
    pub validated: Arc<PivValidated>,
    pub identity: CardIdentity,
    pub key: PublicKey,
    /// Unix seconds until which the validation holds (path and CRLs).
    pub valid_until: i64,
}

/// The cache scope of a validation with `profile` and `opts` (see
/// [`options`]) against this store and these CRLs (the time itself is not
/// part of it).
pub fn scope(
    store: &TrustStore,
    crls: &RevocationSet,
    profile: CertProfile,
    opts: &ValidationOptions,
) -> Scope {
    Scope::for_validation(store, crls, opts, profile)
}

/// The PIV algorithm identifier for a key (SP 800-78-4 Table 6-2).
pub fn piv_algorithm(key: &PublicKey) -> Option<u8> {
    match key {
        PublicKey::Ec { p384: false, .. } => Some(0x11),
        PublicKey::Ec { p384: true, .. } => Some(0x14),
        PublicKey::Rsa { bits: 2048, .. } => Some(0x07),
        PublicKey::Rsa { bits: 3072, .. } => Some(0x05),
        PublicKey::Rsa { bits: 4096, .. } => Some(0x16),
        _ => None,
    }
}

fn signature_algorithm(key: &PublicKey) -> Option<SignatureAlgorithm> {
    match key {
        PublicKey::Ec { p384: false, .. } => Some(SignatureAlgorithm::Ecdsa(Hash::Sha256)),
        PublicKey::Ec { p384: true, .. } => Some(SignatureAlgorithm::Ecdsa(Hash::Sha384)),
        PublicKey::Rsa { .. } => Some(SignatureAlgorithm::RsaPkcs1(Hash::Sha256)),
        PublicKey::Other(_) => None,
    }
}

/// DigestInfo prefix for SHA-256 (RFC 8017 §9.2 note 1).
const SHA256_DIGEST_INFO: [u8; 19] = [
    0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05,
    0x00, 0x04, 0x20,
];

/// What the card is asked to sign for `challenge`: the hash for ECDSA (the
/// card signs a digest), or the EMSA-PKCS1-v1_5 encoded block for RSA (the
/// card applies its raw private-key operation).
pub fn signature_input(key: &PublicKey, challenge: &[u8]) -> Option<Vec<u8>> {
    match key {
        PublicKey::Ec { p384, .. } => {
            let alg = if *p384 {
                &aws_lc_rs::digest::SHA384
            } else {
                &aws_lc_rs::digest::SHA256
            };
            Some(aws_lc_rs::digest::digest(alg, challenge).as_ref().to_vec())
        }
        PublicKey::Rsa { bits, .. } => {
            let k = bits.div_ceil(8);
            let h = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, challenge);
            let t_len = SHA256_DIGEST_INFO.len() + h.as_ref().len();
            if k < t_len + 11 {
                return None;
            }
            let mut em = Vec::with_capacity(k);
            em.extend_from_slice(&[0x00, 0x01]);
            em.resize(k - t_len - 1, 0xFF);
            em.push(0x00);
            em.extend_from_slice(&SHA256_DIGEST_INFO);
            em.extend_from_slice(h.as_ref());
            Some(em)
        }
        PublicKey::Other(_) => None,
    }
}

/// Whether `signature` is the card's valid signature over `challenge`.
pub fn card_signature(key: &PublicKey, challenge: &[u8], signature: &[u8]) -> bool {
    let Some(alg) = signature_algorithm(key) else {
        return false;
    };
    pki::sig::verify(&alg, key, challenge, signature, &AlgorithmPolicy::default()).is_ok()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A key's algorithm as people name it ("ECC P-256", "RSA-2048").
pub fn key_name(k: &PublicKey) -> String {
    match k {
        PublicKey::Ec { p384: false, .. } => "ECC P-256".into(),
        PublicKey::Ec { p384: true, .. } => "ECC P-384".into(),
        PublicKey::Rsa { bits, .. } => format!("RSA-{bits}"),
        PublicKey::Other(o) => o.clone(),
    }
}

/// Who a certificate says the card is (without validating it); `None` when
/// it does not parse.
pub fn identity_of(der: &[u8]) -> Option<CardIdentity> {
    let cert = Cert::from_der(der.to_vec()).ok()?;
    let ids = fips201::card_identity(der).unwrap_or_default();
    Some(identity(&cert, &ids))
}

fn identity(cert: &Cert, ids: &fips201::CertCardIds) -> CardIdentity {
    CardIdentity {
        fascn: ids.fascn.clone(),
        uuid: ids.uuid.map(piv::chuid::CardUuid),
        subject: Some(cert.subject_display().to_string()),
        cert_sha256: Some(hex(&pki::cache::leaf_digest(cert.der()))),
        expires: Some(cert.not_after),
        key_algorithm: Some(key_name(&cert.public_key)),
    }
}

/// The validation options of a door at `now`: its revocation policy, the
/// FIPS 201 policy set it accepts and what its trust anchors contribute.
pub fn options(now: Time, s: &crate::settings::Settings) -> ValidationOptions {
    ValidationOptions {
        time: now,
        revocation: s.revocation.clone(),
        policy_set: s.policy_set,
        anchor_constraints: s.anchor_mode,
        allow_expired_anchors: s.allow_expired_anchors,
        profile: s.profile,
        ..ValidationOptions::default()
    }
}

/// Validates a card's certificate with `profile` and `opts` (see
/// [`options`]), through the validation cache.
pub fn certificate(
    cache: &ValidationCache<Arc<PivValidated>>,
    store: &TrustStore,
    crls: &RevocationSet,
    der: &[u8],
    profile: CertProfile,
    opts: &ValidationOptions,
) -> Result<CardCert, Refusal> {
    let validated = fips201::validate_profile_cached(cache, store, der, &[], crls, opts, profile)
        .map_err(Refusal::CertificateInvalid)?;
    let leaf = validated.path.leaf();
    Ok(CardCert {
        identity: identity(leaf, &validated.identity),
        key: leaf.public_key.clone(),
        valid_until: validated.path.valid_until().0,
        validated: validated.clone(),
    })
}

/// The bindings FIPS 201 requires between a card's certificate and its
/// CHUID: same card UUID / FASC-N, and a certificate that does not outlive
/// the card.
pub fn bindings(cert: &CardCert, chuid: &Chuid) -> Result<(), Refusal> {
    fips201::check_bindings(&cert.validated, chuid).map_err(Refusal::BindingMismatch)
}

/// Decodes a CHUID and verifies its issuer signature (content-signer
/// profile, signer certificate validated like any other).
pub fn signed_chuid(
    store: &TrustStore,
    crls: &RevocationSet,
    raw: &[u8],
    opts: &ValidationOptions,
) -> Result<Chuid, Refusal> {
    fips201::verify_chuid(store, raw, &[], crls, opts)
        .map(|v| v.chuid)
        .map_err(Refusal::ChuidInvalid)
}

/// Who a CHUID says the card is.
pub fn chuid_identity(c: &Chuid) -> CardIdentity {
    CardIdentity {
        fascn: piv::fascn::Fascn::decode(&c.fascn).ok(),
        uuid: Some(c.card_uuid()),
        expires: Some(Time(c.expiration.end_of_day_unix())),
        ..CardIdentity::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rsa_input_is_an_emsa_pkcs1_v15_block_of_modulus_length() {
        let key = PublicKey::Rsa {
            pkcs1: vec![],
            bits: 2048,
        };
        let em = signature_input(&key, b"challenge").unwrap();
        assert_eq!(em.len(), 256);
        assert_eq!(&em[..2], &[0x00, 0x01]);
        let sep = em.iter().skip(2).position(|&b| b != 0xFF).unwrap() + 2;
        assert_eq!(em[sep], 0x00);
        assert_eq!(&em[sep + 1..sep + 20], &SHA256_DIGEST_INFO);
        assert_eq!(piv_algorithm(&key), Some(0x07));
    }

    #[test]
    fn ecdsa_input_is_the_curve_hash() {
        let p256 = PublicKey::Ec {
            point: vec![],
            p384: false,
        };
        let p384 = PublicKey::Ec {
            point: vec![],
            p384: true,
        };
        assert_eq!(signature_input(&p256, b"x").unwrap().len(), 32);
        assert_eq!(signature_input(&p384, b"x").unwrap().len(), 48);
        assert!(!card_signature(&p256, b"x", &[0x30, 0x00]));
    }
}
