//! The checks every PIV signed object shares (RFC 5652 §5.4/§5.6 as profiled
//! by SP 800-73-4 Part 1 §3.1.2.1 and SP 800-76-2 §9.2.2): one SignerInfo,
//! contentType matching eContentType, a SHA-256/SHA-384 messageDigest over the
//! object's content, pivSigner-DN naming the signer when present, a signature
//! over the DER SET OF signed attributes, and a signer certificate valid under
//! the content-signer profile.

use super::{validate_profile, CertProfile, Fips201Error, PivValidated};
use crate::revocation_set::RevocationSet;
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
use serde::Serialize;
use thiserror::Error;
use x509_cert::name::Name;
use x509_cert::Certificate;

/// Why the CMS signature of a PIV signed object is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CmsCheckError {
    #[error("the signature is not a well-formed CMS SignedData: {0}")]
    Malformed(String),
    #[error("the signature signs content of type {found}, not {expected}")]
    WrongContentType { found: String, expected: String },
    #[error("the signature embeds its content; the standard requires detached content")]
    EmbeddedContent,
    #[error("the signature does not encapsulate its content")]
    MissingContent,
    #[error("the signature has {0} signers; exactly one is required")]
    SignerCount(usize),
    #[error("the signature has no signed attributes (contentType and messageDigest are required)")]
    NoSignedAttributes,
    #[error("the signature's signed attributes lack {0}")]
    MissingAttribute(&'static str),
    #[error("the signature's contentType attribute ({found}) does not match its eContentType")]
    ContentTypeMismatch { found: String },
    #[error("the signature uses digest {0}; only SHA-256 and SHA-384 are accepted")]
    UnsupportedDigest(String),
    #[error("the content does not match the signed digest: it was altered after signing")]
    DigestMismatch,
    #[error("the signature does not include the signer's certificate and none was supplied")]
    SignerCertificateMissing,
    #[error("the pivSigner-DN attribute names {named}, but the signer certificate's subject is {signer}")]
    SignerDnMismatch { named: String, signer: String },
    #[error("the signature does not verify with the key of {signer}")]
    BadSignature { signer: String },
    #[error("the signature by {signer} is not acceptable: {error}")]
    Algorithm {
        signer: String,
        error: SignatureError,
    },
    #[error("the signer certificate is not acceptable: {0}")]
    Signer(Fips201Error),
}

impl CmsCheckError {
    /// A stable, kebab-case machine code for the kind of failure.
    pub fn code(&self) -> &'static str {
        use CmsCheckError::*;
        match self {
            Malformed(_) => "cms-malformed",
            WrongContentType { .. } => "cms-wrong-content-type",
            EmbeddedContent => "cms-embedded-content",
            MissingContent => "cms-content-missing",
            SignerCount(_) => "cms-signer-count",
            NoSignedAttributes => "cms-no-signed-attributes",
            MissingAttribute(_) => "cms-attribute-missing",
            ContentTypeMismatch { .. } => "cms-content-type-mismatch",
            UnsupportedDigest(_) => "cms-digest-unsupported",
            DigestMismatch => "cms-digest-mismatch",
            SignerCertificateMissing => "cms-signer-certificate-missing",
            SignerDnMismatch { .. } => "cms-signer-dn-mismatch",
            BadSignature { .. } => "cms-signature-invalid",
            Algorithm { .. } => "cms-signature-algorithm-refused",
            Signer(_) => "cms-signer-invalid",
        }
    }
}

/// The certificates a CHUID's issuer signature carries (the content
/// signer's, which the Security Object and biometric signatures omit).
/// Empty when the CHUID is unsigned or its signature does not parse.
pub fn chuid_signer_certificates(chuid_bytes: &[u8]) -> Vec<Vec<u8>> {
    let Ok(chuid) = piv::chuid::Chuid::decode(chuid_bytes) else {
        return Vec::new();
    };
    let Some(Ok(sd)) = chuid.signature.as_deref().map(signed_data) else {
        return Vec::new();
    };
    sd.certificates
        .iter()
        .flat_map(|s| s.0.iter())
        .filter_map(|c| match c {
            CertificateChoices::Certificate(cert) => cert.to_der().ok(),
            _ => None,
        })
        .collect()
}

/// Whether the signed attributes name the signer (pivSigner-DN).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SignerDnCheck {
    /// pivSigner-DN is present and equals the signer certificate's subject.
    Matches,
    /// pivSigner-DN is absent (SP 800-73-4 requires it; accepted, reported).
    Absent,
}

impl SignerDnCheck {
    pub fn as_str(self) -> &'static str {
        match self {
            SignerDnCheck::Matches => "matches",
            SignerDnCheck::Absent => "absent",
        }
    }
}

pub(crate) fn malformed(what: &str, e: impl std::fmt::Display) -> CmsCheckError {
    CmsCheckError::Malformed(format!("{what}: {e}"))
}

/// Reads the SignedData from a ContentInfo (or a bare SignedData).
pub(crate) fn signed_data(sig: &[u8]) -> Result<SignedData, CmsCheckError> {
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

pub(crate) fn hash_of(
    oid: ObjectIdentifier,
) -> Result<(Hash, &'static aws_lc_rs::digest::Algorithm), CmsCheckError> {
    match oid {
        o if o == ID_SHA_256 => Ok((Hash::Sha256, &aws_lc_rs::digest::SHA256)),
        o if o == ID_SHA_384 => Ok((Hash::Sha384, &aws_lc_rs::digest::SHA384)),
        o => Err(CmsCheckError::UnsupportedDigest(o.to_string())),
    }
}

/// The single value of a signed attribute, `None` when absent.
pub(crate) fn optional_attribute(
    si: &SignerInfo,
    oid: ObjectIdentifier,
    name: &'static str,
) -> Result<Option<der::Any>, CmsCheckError> {
    let attrs = si
        .signed_attrs
        .as_ref()
        .ok_or(CmsCheckError::NoSignedAttributes)?;
    let mut found = attrs.iter().filter(|a| a.oid == oid);
    let Some(a) = found.next() else {
        return Ok(None);
    };
    if found.next().is_some() || a.values.len() != 1 {
        return Err(malformed(name, "attribute must appear once with one value"));
    }
    Ok(a.values.iter().next().cloned())
}

/// The single value of a required signed attribute.
pub(crate) fn attribute(
    si: &SignerInfo,
    oid: ObjectIdentifier,
    name: &'static str,
) -> Result<der::Any, CmsCheckError> {
    optional_attribute(si, oid, name)?.ok_or(CmsCheckError::MissingAttribute(name))
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
fn signer_algorithm(si: &SignerInfo, hash: Hash) -> Result<SignatureAlgorithm, CmsCheckError> {
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

/// The only SignerInfo of `sd`, after checking eContentType and whether the
/// content is embedded as the object requires.
pub(crate) fn single_signer(
    sd: &SignedData,
    expected_type: ObjectIdentifier,
    embedded: bool,
) -> Result<&SignerInfo, CmsCheckError> {
    let eci = &sd.encap_content_info;
    if eci.econtent_type != expected_type {
        return Err(CmsCheckError::WrongContentType {
            found: eci.econtent_type.to_string(),
            expected: expected_type.to_string(),
        });
    }
    match (embedded, eci.econtent.is_some()) {
        (false, true) => return Err(CmsCheckError::EmbeddedContent),
        (true, false) => return Err(CmsCheckError::MissingContent),
        _ => {}
    }
    let si = match sd.signer_infos.0.as_slice() {
        [si] => si,
        other => return Err(CmsCheckError::SignerCount(other.len())),
    };
    let v = attribute(si, ID_CONTENT_TYPE, "contentType")?;
    let oid: ObjectIdentifier = v.decode_as().map_err(|e| malformed("contentType", e))?;
    if oid != eci.econtent_type {
        return Err(CmsCheckError::ContentTypeMismatch {
            found: oid.to_string(),
        });
    }
    Ok(si)
}

/// Index of the first of `candidates` whose digest is the messageDigest
/// attribute.
pub(crate) fn matching_content(
    si: &SignerInfo,
    candidates: &[&[u8]],
) -> Result<usize, CmsCheckError> {
    let (_, alg) = hash_of(si.digest_alg.oid)?;
    let v = attribute(si, ID_MESSAGE_DIGEST, "messageDigest")?;
    let md: OctetString = v.decode_as().map_err(|e| malformed("messageDigest", e))?;
    candidates
        .iter()
        .position(|c| aws_lc_rs::digest::digest(alg, c).as_ref() == md.as_bytes())
        .ok_or(CmsCheckError::DigestMismatch)
}

/// A signature that verified, with its signer validated.
#[derive(Debug, Clone)]
pub(crate) struct CheckedSigner {
    pub signer: PivValidated,
    pub signer_dn: SignerDnCheck,
}

/// Whether two names match per RFC 5280 §7.1 (whatever string types and
/// case each uses); names that cannot be normalised match only when their
/// encodings are equal.
fn same_name(a: &Name, b: &Name) -> bool {
    let norm = |n: &Name| {
        n.to_der()
            .ok()
            .and_then(|d| crate::name::NormName::from_der(&d).ok())
    };
    match (norm(a), norm(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Finds the signer certificate (in the SignedData, else among
/// `extra_certs`), checks pivSigner-DN against it, verifies the signature
/// over the signed attributes and validates the signer under the
/// content-signer profile with the time, revocation, algorithm and depth
/// settings of `opts`.
pub(crate) fn check_signer(
    store: &TrustStore,
    sd: &SignedData,
    si: &SignerInfo,
    extra_certs: &[&[u8]],
    crls: &RevocationSet,
    opts: &ValidationOptions,
) -> Result<CheckedSigner, CmsCheckError> {
    let (hash, _) = hash_of(si.digest_alg.oid)?;
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
    let signer_der = signer.ok_or(CmsCheckError::SignerCertificateMissing)?;
    let signer_cert =
        Certificate::from_der(&signer_der).map_err(|e| malformed("signer certificate", e))?;
    let signer_name = signer_cert.tbs_certificate.subject.to_string();

    let signer_dn = match optional_attribute(si, super::oids::PIV_SIGNER_DN, "pivSigner-DN")? {
        None => SignerDnCheck::Absent,
        Some(v) => {
            let named: Name = v.decode_as().map_err(|e| malformed("pivSigner-DN", e))?;
            if !same_name(&named, &signer_cert.tbs_certificate.subject) {
                return Err(CmsCheckError::SignerDnMismatch {
                    named: named.to_string(),
                    signer: signer_name,
                });
            }
            SignerDnCheck::Matches
        }
    };

    // RFC 5652 §5.4: the signature covers the DER of the signed attributes
    // with the SET OF tag.
    let signed_attrs = si
        .signed_attrs
        .as_ref()
        .ok_or(CmsCheckError::NoSignedAttributes)?
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
        SignatureError::Invalid => CmsCheckError::BadSignature {
            signer: signer_name.clone(),
        },
        error => CmsCheckError::Algorithm {
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
    .map_err(CmsCheckError::Signer)?;
    Ok(CheckedSigner { signer, signer_dn })
}
