//! CHUID issuer signature verification (SP 800-73-4 Part 1 §3.1.2, FIPS
//! 201-3 §4.2.1): the CMS SignedData in tag `3E` must have eContentType
//! id-PIV-CHUIDSecurityObject with the content detached (the CHUID TLVs
//! before `3E`), signed attributes contentType and messageDigest (SHA-256 or
//! SHA-384), a signature that verifies with the signer certificate included
//! in the SignedData, and that certificate must validate under the
//! content-signer profile.

use super::{validate_profile, CertProfile, Fips201Error, PivValidated};
use crate::crl::CrlSet;
use crate::sig::{self, Hash, PublicKey, SignatureAlgorithm, SignatureError};
use crate::store::TrustStore;
use crate::validate::ValidationOptions;
use cms::cert::CertificateChoices;
use cms::content_info::ContentInfo;
use cms::signed_data::{SignedData, SignerIdentifier, SignerInfo};
use const_oid::db::rfc5911::{ID_CONTENT_TYPE, ID_MESSAGE_DIGEST, ID_SIGNED_DATA};
use const_oid::db::rfc5912::{ID_EC_PUBLIC_KEY, ID_SHA_256, ID_SHA_384, RSA_ENCRYPTION};
use const_oid::ObjectIdentifier;
use der::asn1::OctetString;
use der::{Decode, Encode};
use piv::chuid::{signed_content_of, Chuid, ChuidError};
use thiserror::Error;
use x509_cert::Certificate;

/// Why a CHUID's issuer signature is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ChuidVerifyError {
    #[error("the CHUID cannot be decoded: {0}")]
    Decode(#[from] ChuidError),
    #[error("the CHUID carries no issuer asymmetric signature (tag 3E is empty)")]
    Unsigned,
    #[error("the CHUID signature is not a well-formed CMS SignedData: {0}")]
    Malformed(String),
    #[error("the CHUID signature signs content of type {found}, not id-PIV-CHUIDSecurityObject (2.16.840.1.101.3.6.1)")]
    WrongContentType { found: String },
    #[error("the CHUID signature embeds its content; SP 800-73-4 requires detached content")]
    EmbeddedContent,
    #[error("the CHUID signature has {0} signers; exactly one is required")]
    SignerCount(usize),
    #[error(
        "the CHUID signature has no signed attributes (contentType and messageDigest are required)"
    )]
    NoSignedAttributes,
    #[error("the CHUID signature's signed attributes lack {0}")]
    MissingAttribute(&'static str),
    #[error(
        "the CHUID signature's contentType attribute ({found}) does not match its eContentType"
    )]
    ContentTypeMismatch { found: String },
    #[error("the CHUID signature uses digest {0}; only SHA-256 and SHA-384 are accepted")]
    UnsupportedDigest(String),
    #[error(
        "the CHUID content does not match the signed digest: the CHUID was altered after signing"
    )]
    DigestMismatch,
    #[error("the CHUID signature does not include the signer's certificate")]
    SignerCertificateMissing,
    #[error("the CHUID signature does not verify with the key of {signer}")]
    BadSignature { signer: String },
    #[error("the CHUID signature by {signer} is not acceptable: {error}")]
    Algorithm {
        signer: String,
        error: SignatureError,
    },
    #[error("the CHUID signer certificate is not acceptable: {0}")]
    Signer(Fips201Error),
}

impl ChuidVerifyError {
    /// A stable, kebab-case machine code for the kind of failure (never changed once
    /// published). A signer certificate that fails validation is `chuid-signer-invalid`; its
    /// own code is that of the [`Fips201Error`] inside.
    pub fn code(&self) -> &'static str {
        use ChuidVerifyError::*;
        match self {
            Decode(_) => "chuid-undecodable",
            Unsigned => "chuid-unsigned",
            Malformed(_) => "chuid-signature-malformed",
            WrongContentType { .. } => "chuid-signature-wrong-content-type",
            EmbeddedContent => "chuid-signature-embedded-content",
            SignerCount(_) => "chuid-signature-signer-count",
            NoSignedAttributes => "chuid-signature-no-signed-attributes",
            MissingAttribute(_) => "chuid-signature-attribute-missing",
            ContentTypeMismatch { .. } => "chuid-signature-content-type-mismatch",
            UnsupportedDigest(_) => "chuid-signature-digest-unsupported",
            DigestMismatch => "chuid-digest-mismatch",
            SignerCertificateMissing => "chuid-signer-certificate-missing",
            BadSignature { .. } => "chuid-signature-invalid",
            Algorithm { .. } => "chuid-signature-algorithm-refused",
            Signer(_) => "chuid-signer-invalid",
        }
    }
}

/// A CHUID whose issuer signature verified.
#[derive(Debug, Clone)]
pub struct VerifiedChuid {
    pub chuid: Chuid,
    /// The content signer's validated path.
    pub signer: PivValidated,
}

fn malformed(what: &str, e: impl std::fmt::Display) -> ChuidVerifyError {
    ChuidVerifyError::Malformed(format!("{what}: {e}"))
}

/// Reads the SignedData from a ContentInfo (or a bare SignedData).
fn signed_data(sig: &[u8]) -> Result<SignedData, ChuidVerifyError> {
    match ContentInfo::from_der(sig) {
        Ok(ci) => {
            if ci.content_type != ID_SIGNED_DATA {
                return Err(malformed(
                    "ContentInfo",
                    format!("content type {} is not signedData", ci.content_type),
                ));
            }
            ci.content
                .decode_as::<SignedData>()
                .map_err(|e| malformed("SignedData", e))
        }
        Err(_) => SignedData::from_der(sig).map_err(|e| malformed("ContentInfo", e)),
    }
}

fn hash_of(
    oid: ObjectIdentifier,
) -> Result<(Hash, &'static aws_lc_rs::digest::Algorithm), ChuidVerifyError> {
    match oid {
        o if o == ID_SHA_256 => Ok((Hash::Sha256, &aws_lc_rs::digest::SHA256)),
        o if o == ID_SHA_384 => Ok((Hash::Sha384, &aws_lc_rs::digest::SHA384)),
        o => Err(ChuidVerifyError::UnsupportedDigest(o.to_string())),
    }
}

/// The single value of a signed attribute.
fn attribute(
    si: &SignerInfo,
    oid: ObjectIdentifier,
    name: &'static str,
) -> Result<der::Any, ChuidVerifyError> {
    let attrs = si
        .signed_attrs
        .as_ref()
        .ok_or(ChuidVerifyError::NoSignedAttributes)?;
    let mut found = attrs.iter().filter(|a| a.oid == oid);
    let a = found
        .next()
        .ok_or(ChuidVerifyError::MissingAttribute(name))?;
    if found.next().is_some() || a.values.len() != 1 {
        return Err(malformed(name, "attribute must appear once with one value"));
    }
    a.values
        .iter()
        .next()
        .cloned()
        .ok_or(ChuidVerifyError::MissingAttribute(name))
}

fn is_signer(cert: &Certificate, sid: &SignerIdentifier) -> bool {
    match sid {
        SignerIdentifier::IssuerAndSerialNumber(ias) => {
            cert.tbs_certificate.issuer == ias.issuer
                && cert.tbs_certificate.serial_number == ias.serial_number
        }
        SignerIdentifier::SubjectKeyIdentifier(ski) => cert
            .tbs_certificate
            .extensions
            .iter()
            .flatten()
            .filter(|e| e.extn_id == const_oid::db::rfc5280::ID_CE_SUBJECT_KEY_IDENTIFIER)
            .any(|e| {
                OctetString::from_der(e.extn_value.as_bytes())
                    .map(|v| v.as_bytes() == ski.0.as_bytes())
                    .unwrap_or(false)
            }),
    }
}

/// The signature algorithm of a SignerInfo; CMS allows the bare key
/// algorithm (rsaEncryption, id-ecPublicKey) with the digest given apart.
fn signer_algorithm(si: &SignerInfo, hash: Hash) -> Result<SignatureAlgorithm, ChuidVerifyError> {
    let oid = si.signature_algorithm.oid;
    if oid == RSA_ENCRYPTION {
        return Ok(SignatureAlgorithm::RsaPkcs1(hash));
    }
    if oid == ID_EC_PUBLIC_KEY {
        return Ok(SignatureAlgorithm::Ecdsa(hash));
    }
    let der = si
        .signature_algorithm
        .to_der()
        .map_err(|e| malformed("signatureAlgorithm", e))?;
    SignatureAlgorithm::from_der(&der).map_err(|e| malformed("signatureAlgorithm", e))
}

/// Verifies the issuer signature of a CHUID as read from the card (with or
/// without the `53` container) and validates the content signer with
/// [`CertProfile::ContentSigner`]: the time, revocation, algorithm and depth
/// settings of `opts` apply; its policy set and EKU are replaced by the
/// content-signer profile's. `extra_certs` are untrusted certificates that
/// may help build the signer's path (they are offered as intermediates, and
/// as signer candidates when the SignedData does not include the signer).
pub fn verify_chuid(
    store: &TrustStore,
    chuid_bytes: &[u8],
    extra_certs: &[&[u8]],
    crls: &CrlSet,
    opts: &ValidationOptions,
) -> Result<VerifiedChuid, ChuidVerifyError> {
    let chuid = Chuid::decode(chuid_bytes)?;
    let sig = match chuid.signature.as_deref() {
        Some(s) if !s.is_empty() => s,
        _ => return Err(ChuidVerifyError::Unsigned),
    };
    let content = signed_content_of(chuid_bytes)?;
    let sd = signed_data(sig)?;
    check_encapsulation(&sd)?;
    let si = match sd.signer_infos.0.as_slice() {
        [si] => si,
        other => return Err(ChuidVerifyError::SignerCount(other.len())),
    };
    check_content_type_attribute(si, sd.encap_content_info.econtent_type)?;
    let (hash, digest_alg) = hash_of(si.digest_alg.oid)?;
    check_message_digest(si, digest_alg, &content)?;

    // The signer certificate: included in the SignedData, else among extras.
    let mut included: Vec<Vec<u8>> = Vec::new();
    let mut signer: Option<Vec<u8>> = None;
    for c in sd.certificates.iter().flat_map(|s| s.0.iter()) {
        if let CertificateChoices::Certificate(cert) = c {
            let der = cert.to_der().map_err(|e| malformed("certificate", e))?;
            if signer.is_none() && is_signer(cert, &si.sid) {
                signer = Some(der);
            } else {
                included.push(der);
            }
        }
    }
    if signer.is_none() {
        signer = extra_certs
            .iter()
            .find(|d| Certificate::from_der(d).is_ok_and(|c| is_signer(&c, &si.sid)))
            .map(|d| d.to_vec());
    }
    let signer_der = signer.ok_or(ChuidVerifyError::SignerCertificateMissing)?;
    let signer_cert =
        Certificate::from_der(&signer_der).map_err(|e| malformed("signer certificate", e))?;
    let signer_name = signer_cert.tbs_certificate.subject.to_string();

    // RFC 5652 §5.4: the signature covers the DER of the signed attributes
    // with the SET OF tag.
    let signed_attrs = si
        .signed_attrs
        .as_ref()
        .ok_or(ChuidVerifyError::NoSignedAttributes)?
        .to_der()
        .map_err(|e| malformed("signedAttrs", e))?;
    let spki = signer_cert
        .tbs_certificate
        .subject_public_key_info
        .to_der()
        .map_err(|e| malformed("signer key", e))?;
    let key = PublicKey::from_spki(&spki).map_err(|e| malformed("signer key", e))?;
    let alg = signer_algorithm(si, hash)?;
    sig::verify(
        &alg,
        &key,
        &signed_attrs,
        si.signature.as_bytes(),
        &opts.algorithms,
    )
    .map_err(|error| match error {
        SignatureError::Invalid => ChuidVerifyError::BadSignature {
            signer: signer_name.clone(),
        },
        error => ChuidVerifyError::Algorithm {
            signer: signer_name.clone(),
            error,
        },
    })?;

    let mut intermediates: Vec<&[u8]> = included.iter().map(|v| v.as_slice()).collect();
    intermediates.extend_from_slice(extra_certs);
    // The signer is held to the content-signer policies and EKU, whatever
    // policy set `opts` carries for authentication certificates.
    let signer_opts = ValidationOptions {
        initial_policy_set: vec![crate::policy::ANY_POLICY],
        required_eku: None,
        ..opts.clone()
    };
    let signer = validate_profile(
        store,
        &signer_der,
        &intermediates,
        crls,
        &signer_opts,
        CertProfile::ContentSigner,
    )
    .map_err(ChuidVerifyError::Signer)?;
    Ok(VerifiedChuid { chuid, signer })
}

/// [`verify_chuid`] through a [`ValidationCache`](crate::cache::ValidationCache)
/// keyed by the SHA-256 of the CHUID bytes: a card tapped again is answered
/// without CMS parsing or signature checks until the earliest of the signer
/// path's `valid_until`, the card's expiration date and the cache TTL.
/// Failures are not cached.
pub fn verify_chuid_cached(
    cache: &crate::cache::ValidationCache<std::sync::Arc<VerifiedChuid>>,
    store: &TrustStore,
    chuid_bytes: &[u8],
    extra_certs: &[&[u8]],
    crls: &CrlSet,
    opts: &ValidationOptions,
) -> Result<std::sync::Arc<VerifiedChuid>, ChuidVerifyError> {
    let scope = crate::cache::Scope::for_validation(store, crls, opts, CertProfile::ContentSigner);
    cache.get_or_insert_with(chuid_bytes, &scope, opts.time.0, || {
        let v = verify_chuid(store, chuid_bytes, extra_certs, crls, opts)?;
        let until = v
            .signer
            .path
            .valid_until()
            .0
            .min(v.chuid.expiration.end_of_day_unix());
        Ok((std::sync::Arc::new(v), until))
    })
}

fn check_encapsulation(sd: &SignedData) -> Result<(), ChuidVerifyError> {
    let eci = &sd.encap_content_info;
    if eci.econtent_type != super::oids::PIV_CHUID_SECURITY_OBJECT {
        return Err(ChuidVerifyError::WrongContentType {
            found: eci.econtent_type.to_string(),
        });
    }
    if eci.econtent.is_some() {
        return Err(ChuidVerifyError::EmbeddedContent);
    }
    Ok(())
}

fn check_content_type_attribute(
    si: &SignerInfo,
    econtent_type: ObjectIdentifier,
) -> Result<(), ChuidVerifyError> {
    let v = attribute(si, ID_CONTENT_TYPE, "contentType")?;
    let oid: ObjectIdentifier = v.decode_as().map_err(|e| malformed("contentType", e))?;
    if oid != econtent_type {
        return Err(ChuidVerifyError::ContentTypeMismatch {
            found: oid.to_string(),
        });
    }
    Ok(())
}

fn check_message_digest(
    si: &SignerInfo,
    alg: &'static aws_lc_rs::digest::Algorithm,
    content: &[u8],
) -> Result<(), ChuidVerifyError> {
    let v = attribute(si, ID_MESSAGE_DIGEST, "messageDigest")?;
    let md: OctetString = v.decode_as().map_err(|e| malformed("messageDigest", e))?;
    let actual = aws_lc_rs::digest::digest(alg, content);
    if md.as_bytes() != actual.as_ref() {
        return Err(ChuidVerifyError::DigestMismatch);
    }
    Ok(())
}
