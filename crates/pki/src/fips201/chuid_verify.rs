//! CHUID issuer signature verification (SP 800-73-4 Part 1 §3.1.2.1, FIPS
//! 201-3 §4.2.1): the CMS SignedData in tag `3E` must have eContentType
//! id-PIV-CHUIDSecurityObject with the content detached, signed attributes
//! contentType and messageDigest (SHA-256 or SHA-384), a signature that
//! verifies with the signer certificate included in the SignedData, and that
//! certificate must validate under the content-signer profile.
//!
//! The message digest is accepted in two forms ([`ChuidDigestForm`]): over
//! every element of the CHUID but the signature, the error detection code
//! `FE 00` included, as §3.1.2.1 says; and over the same elements without
//! `FE 00`, as some issuers compute it. `FE 00` is a constant, so accepting
//! both weakens nothing; the result says which one the card used.
//!
//! pivSigner-DN (required by §3.1.2.1 "at a minimum") must name the signer
//! certificate's subject when present; a CHUID that names another signer is
//! refused (`chuid-signer-dn-mismatch`). A CHUID without it is accepted and
//! reported ([`SignerDnCheck::Absent`]): the signer is already identified by
//! the SignerInfo and its certificate is the one verified and validated, so
//! the attribute adds no assurance a door could lose, while refusing would
//! shut out cards issued before the attribute was commonly filled in.

use super::cms_check::{self, CmsCheckError, SignerDnCheck};
use super::{CertProfile, Fips201Error, PivValidated};
use crate::revocation_set::RevocationSet;
use crate::sig::SignatureError;
use crate::store::TrustStore;
use crate::validate::ValidationOptions;
use piv::chuid::{digest_content_of, signed_content_of, without_buffer_length, Chuid, ChuidError};
use serde::Serialize;
use thiserror::Error;

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
    #[error("the CHUID signature's pivSigner-DN names {named}, but it was signed by {signer}")]
    SignerDnMismatch { named: String, signer: String },
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
            SignerDnMismatch { .. } => "chuid-signer-dn-mismatch",
            Algorithm { .. } => "chuid-signature-algorithm-refused",
            Signer(_) => "chuid-signer-invalid",
        }
    }
}

impl From<CmsCheckError> for ChuidVerifyError {
    fn from(e: CmsCheckError) -> Self {
        use ChuidVerifyError as C;
        match e {
            CmsCheckError::Malformed(m) => C::Malformed(m),
            CmsCheckError::WrongContentType { found, .. } => C::WrongContentType { found },
            CmsCheckError::EmbeddedContent => C::EmbeddedContent,
            CmsCheckError::MissingContent => {
                C::Malformed("the SignedData lacks its encapsulated content".into())
            }
            CmsCheckError::SignerCount(n) => C::SignerCount(n),
            CmsCheckError::NoSignedAttributes => C::NoSignedAttributes,
            CmsCheckError::MissingAttribute(a) => C::MissingAttribute(a),
            CmsCheckError::ContentTypeMismatch { found } => C::ContentTypeMismatch { found },
            CmsCheckError::UnsupportedDigest(d) => C::UnsupportedDigest(d),
            CmsCheckError::DigestMismatch => C::DigestMismatch,
            CmsCheckError::SignerCertificateMissing => C::SignerCertificateMissing,
            CmsCheckError::SignerDnMismatch { named, signer } => {
                C::SignerDnMismatch { named, signer }
            }
            CmsCheckError::BadSignature { signer } => C::BadSignature { signer },
            CmsCheckError::Algorithm { signer, error } => C::Algorithm { signer, error },
            CmsCheckError::Signer(e) => C::Signer(e),
        }
    }
}

/// Which bytes the CHUID's messageDigest covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChuidDigestForm {
    /// Every element but the signature, the error detection code `FE 00`
    /// included (SP 800-73-4 Part 1 §3.1.2.1).
    WithEdc,
    /// Every element but the signature and the error detection code (a form
    /// some issuers use).
    WithoutEdc,
}

impl ChuidDigestForm {
    pub fn as_str(self) -> &'static str {
        match self {
            ChuidDigestForm::WithEdc => "with-edc",
            ChuidDigestForm::WithoutEdc => "without-edc",
        }
    }

    /// A sentence for people.
    pub fn describe(self) -> &'static str {
        match self {
            ChuidDigestForm::WithEdc => {
                "over the CHUID without its signature, error detection code included (SP 800-73-4)"
            }
            ChuidDigestForm::WithoutEdc => {
                "over the CHUID without its signature and error detection code (non-standard form, accepted)"
            }
        }
    }
}

/// Which form the CHUID's messageDigest attribute covers, read without
/// verifying anything else (for reports such as `pivgate read`): `None`
/// when the CHUID is unsigned, its signature does not parse, or neither
/// form matches.
pub fn chuid_digest_form(chuid_bytes: &[u8]) -> Option<ChuidDigestForm> {
    let chuid = Chuid::decode(chuid_bytes).ok()?;
    let sd = cms_check::signed_data(chuid.signature.as_deref()?).ok()?;
    let si = match sd.signer_infos.0.as_slice() {
        [si] => si,
        _ => return None,
    };
    let forms = DigestForms::of(&chuid, chuid_bytes).ok()?;
    let i = cms_check::matching_content(si, &forms.candidates()).ok()?;
    Some(forms.form(i).0)
}

/// The contents a CHUID's messageDigest may cover: with and without the error
/// detection code, and, when the card carries the deprecated buffer length
/// element (`EE`), each with and without it (both forms exist in issued cards).
struct DigestForms {
    with_edc: Vec<u8>,
    without_edc: Vec<u8>,
    /// The two without `EE`, when the CHUID has it.
    without_buffer_length: Option<(Vec<u8>, Vec<u8>)>,
}

impl DigestForms {
    fn of(chuid: &Chuid, bytes: &[u8]) -> Result<DigestForms, ChuidError> {
        let with_edc = digest_content_of(bytes)?;
        let without_edc = signed_content_of(bytes)?;
        let without_buffer_length = match chuid.buffer_length {
            Some(_) => Some((
                without_buffer_length(&with_edc)?,
                without_buffer_length(&without_edc)?,
            )),
            None => None,
        };
        Ok(DigestForms {
            with_edc,
            without_edc,
            without_buffer_length,
        })
    }

    fn candidates(&self) -> Vec<&[u8]> {
        let mut c: Vec<&[u8]> = vec![&self.with_edc, &self.without_edc];
        if let Some((a, b)) = &self.without_buffer_length {
            c.push(a);
            c.push(b);
        }
        c
    }

    /// The form of candidate `i`, and where the card has `EE`, whether the digest covers it.
    fn form(&self, i: usize) -> (ChuidDigestForm, Option<bool>) {
        let edc = if i.is_multiple_of(2) {
            ChuidDigestForm::WithEdc
        } else {
            ChuidDigestForm::WithoutEdc
        };
        let ee = self.without_buffer_length.as_ref().map(|_| i < 2);
        (edc, ee)
    }
}

/// A CHUID whose issuer signature verified.
#[derive(Debug, Clone)]
pub struct VerifiedChuid {
    pub chuid: Chuid,
    /// The content signer's validated path.
    pub signer: PivValidated,
    /// Which content form the message digest covers.
    pub digest_form: ChuidDigestForm,
    /// When the card carries the deprecated buffer length element (`EE`): whether the
    /// message digest covers it (`Some(true)`, SP 800-73-4's form) or leaves it out
    /// (`Some(false)`, a form other issuers used); `None` without the element.
    pub buffer_length_in_digest: Option<bool>,
    /// Whether pivSigner-DN named the signer or was absent.
    pub signer_dn: SignerDnCheck,
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
    crls: &RevocationSet,
    opts: &ValidationOptions,
) -> Result<VerifiedChuid, ChuidVerifyError> {
    let chuid = Chuid::decode(chuid_bytes)?;
    let sig = match chuid.signature.as_deref() {
        Some(s) if !s.is_empty() => s,
        _ => return Err(ChuidVerifyError::Unsigned),
    };
    let forms = DigestForms::of(&chuid, chuid_bytes)?;
    let sd = cms_check::signed_data(sig)?;
    let si = cms_check::single_signer(&sd, super::oids::PIV_CHUID_SECURITY_OBJECT, false)?;
    let (digest_form, buffer_length_in_digest) =
        forms.form(cms_check::matching_content(si, &forms.candidates())?);
    let checked = cms_check::check_signer(store, &sd, si, extra_certs, crls, opts)?;
    Ok(VerifiedChuid {
        chuid,
        signer: checked.signer,
        digest_form,
        buffer_length_in_digest,
        signer_dn: checked.signer_dn,
    })
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
    crls: &RevocationSet,
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
