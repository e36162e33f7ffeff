//! FIPS 201 certificate profiles on top of RFC 5280 validation: PIV
//! Authentication, Card Authentication, PIV-I and content-signer checks,
//! FASC-N and card UUID extraction from subjectAltName, CHUID signature
//! verification, and the card/certificate bindings a door checks.
//!
//! ```no_run
//! # use pki::{store::TrustStore, revocation_set::RevocationSet, validate::ValidationOptions};
//! # use pki::fips201::{validate_profile, CertProfile};
//! # fn f(store: &TrustStore, leaf: &[u8], crls: &RevocationSet) {
//! let v = validate_profile(store, leaf, &[], crls, &ValidationOptions::default(), CertProfile::CardAuth);
//! if let Ok(v) = v {
//!     println!("card {:?}", v.identity.uuid_urn());
//! }
//! # }
//! ```

mod biometric_verify;
mod chuid_verify;
mod cms_check;
pub mod lds;
pub mod oids;
pub mod report;
mod security_object_verify;

pub use biometric_verify::{verify_biometric, BiometricError, VerifiedBiometric};
pub use chuid_verify::{
    chuid_digest_form, verify_chuid, verify_chuid_cached, ChuidDigestForm, ChuidVerifyError,
    VerifiedChuid,
};
pub use cms_check::{chuid_signer_certificates, CmsCheckError, SignerDnCheck};
pub use security_object_verify::{
    covered_objects, verify_security_object, DataGroupResult, DataGroupStatus, SecurityObjectError,
    VerifiedSecurityObject,
};

use crate::asn1;
use crate::cert::{key_usage, Cert, GeneralName};
use crate::policy::ANY_POLICY;
use crate::revocation_set::RevocationSet;
use crate::store::TrustStore;
use crate::time::Time;
use crate::validate::{validate, ValidatedPath, ValidationError, ValidationOptions};
use const_oid::ObjectIdentifier;
use piv::chuid::{uuid_urn, Chuid};
use piv::fascn::{Fascn, FascnError};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use thiserror::Error;

/// Which FIPS 201 certificate profile a leaf must satisfy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum CertProfile {
    /// Generic RFC 5280 validation only.
    #[default]
    #[cfg_attr(feature = "clap", value(help = "RFC 5280 validation only"))]
    None,
    /// PIV Authentication certificate (slot 9A): policy
    /// id-fpki-common-authentication (or PIV-I hardware), digitalSignature,
    /// FASC-N and/or card UUID in subjectAltName.
    #[cfg_attr(
        feature = "clap",
        value(help = "PIV Authentication (9A): id-fpki-common-authentication, FASC-N/UUID in SAN")
    )]
    PivAuth,
    /// Card Authentication certificate (slot 9E): policy
    /// id-fpki-common-cardAuth (or PIV-I cardAuth), EKU id-PIV-cardAuth,
    /// digitalSignature, FASC-N and/or card UUID in subjectAltName.
    #[cfg_attr(
        feature = "clap",
        value(help = "Card Authentication (9E): id-fpki-common-cardAuth, EKU id-PIV-cardAuth")
    )]
    CardAuth,
    /// Content signer (CHUID and biometric signer): policy
    /// id-fpki-common-piv-contentSigning (or PIV-I contentSigning), EKU
    /// id-PIV-content-signing, digitalSignature.
    #[cfg_attr(
        feature = "clap",
        value(
            help = "CHUID content signer: id-fpki-common-piv-contentSigning, EKU id-PIV-content-signing"
        )
    )]
    ContentSigner,
}

impl CertProfile {
    pub fn name(self) -> &'static str {
        match self {
            CertProfile::None => "none",
            CertProfile::PivAuth => "piv-auth",
            CertProfile::CardAuth => "card-auth",
            CertProfile::ContentSigner => "content-signer",
        }
    }

    /// The certificate policies the profile accepts (PIV and PIV-I).
    pub fn policies(self) -> &'static [ObjectIdentifier] {
        match self {
            CertProfile::None => &[],
            CertProfile::PivAuth => &[oids::FPKI_COMMON_AUTHENTICATION, oids::PIVI_HARDWARE],
            CertProfile::CardAuth => &[oids::FPKI_COMMON_CARD_AUTH, oids::PIVI_CARD_AUTH],
            CertProfile::ContentSigner => &[
                oids::FPKI_COMMON_PIV_CONTENT_SIGNING,
                oids::PIVI_CONTENT_SIGNING,
            ],
        }
    }

    /// The certificate policies the profile accepts in a policy set: the
    /// production set is [`CertProfile::policies`]; the test set is their
    /// counterparts in the test arc, for sites that accept test cards.
    pub fn policies_in(self, set: oids::PolicySet) -> Vec<ObjectIdentifier> {
        match self {
            CertProfile::None => Vec::new(),
            CertProfile::PivAuth => vec![set.authentication(), set.pivi_hardware()],
            CertProfile::CardAuth => vec![set.card_auth(), set.pivi_card_auth()],
            CertProfile::ContentSigner => {
                vec![set.content_signing(), set.pivi_content_signing()]
            }
        }
    }

    /// [`CertProfile::options`] with `base.policy_set` replaced by `set`.
    pub fn options_in(self, base: &ValidationOptions, set: oids::PolicySet) -> ValidationOptions {
        let mut b = base.clone();
        b.policy_set = set;
        self.options(&b)
    }

    /// The extended key usage the leaf must carry.
    pub fn required_eku(self) -> Option<ObjectIdentifier> {
        match self {
            CertProfile::CardAuth => Some(oids::EKU_PIV_CARD_AUTH),
            CertProfile::ContentSigner => Some(oids::EKU_PIV_CONTENT_SIGNING),
            _ => None,
        }
    }

    /// Whether the subjectAltName must name the card (FASC-N or UUID).
    pub fn requires_card_identifier(self) -> bool {
        matches!(self, CertProfile::PivAuth | CertProfile::CardAuth)
    }

    /// The validation options for this profile: unless `base` already names
    /// a policy set other than anyPolicy (a configured set), the profile's
    /// policies in `base.policy_set` ([`CertProfile::policies_in`]) become
    /// the user-initial-policy-set with explicit policy required; the
    /// profile's EKU becomes the required EKU.
    pub fn options(self, base: &ValidationOptions) -> ValidationOptions {
        let mut o = base.clone();
        if self == CertProfile::None {
            return o;
        }
        let configured = !(o.initial_policy_set.is_empty() || o.initial_policy_set == [ANY_POLICY]);
        if !configured {
            o.initial_policy_set = self.policies_in(o.policy_set);
        }
        o.initial_explicit_policy = true;
        if let Some(eku) = self.required_eku() {
            o.required_eku = Some(eku);
        }
        o
    }
}

impl fmt::Display for CertProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CertProfile {
    type Err = String;
    fn from_str(s: &str) -> Result<CertProfile, String> {
        match s {
            "none" => Ok(CertProfile::None),
            "piv-auth" | "pivauth" | "9a" | "9A" => Ok(CertProfile::PivAuth),
            "card-auth" | "cardauth" | "9e" | "9E" => Ok(CertProfile::CardAuth),
            "content-signer" | "contentsigner" => Ok(CertProfile::ContentSigner),
            _ => Err(format!(
                "unknown profile {s:?} (use none, piv-auth, card-auth or content-signer)"
            )),
        }
    }
}

/// The card identifiers a certificate's subjectAltName carries.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertCardIds {
    /// The FASC-N otherName, decoded (parity and LRC checked).
    pub fascn: Option<Fascn>,
    /// The FASC-N as encoded in the certificate (25 bytes).
    pub fascn_raw: Option<Vec<u8>>,
    /// The card UUID from a `urn:uuid:` URI.
    pub uuid: Option<[u8; 16]>,
}

impl CertCardIds {
    pub fn uuid_urn(&self) -> Option<String> {
        self.uuid.as_ref().map(uuid_urn)
    }
}

/// How a leaf certificate breaks a FIPS 201 profile.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProfileError {
    #[error("certificate {subject} cannot be parsed for the {profile} profile checks: {reason}")]
    Unparsable {
        subject: String,
        profile: CertProfile,
        reason: String,
    },
    #[error("certificate {subject} does not allow digitalSignature, which the {profile} profile requires")]
    KeyUsage {
        subject: String,
        profile: CertProfile,
    },
    #[error("certificate {subject} lacks the extended key usage {eku}, which the {profile} profile requires")]
    EkuMissing {
        subject: String,
        profile: CertProfile,
        eku: String,
    },
    #[error("certificate {subject} names no card (no FASC-N otherName and no urn:uuid URI in subjectAltName), which the {profile} profile requires")]
    NoCardIdentifier {
        subject: String,
        profile: CertProfile,
    },
    #[error("certificate {subject} carries a FASC-N that is corrupt: {error}")]
    BadFascn { subject: String, error: FascnError },
    #[error("certificate {subject} carries more than one {what} in subjectAltName")]
    Ambiguous { subject: String, what: &'static str },
}

impl ProfileError {
    /// A stable, kebab-case machine code for the kind of failure (never changed once
    /// published).
    pub fn code(&self) -> &'static str {
        match self {
            ProfileError::Unparsable { .. } => "profile-certificate-unparsable",
            ProfileError::KeyUsage { .. } => "profile-key-usage-missing",
            ProfileError::EkuMissing { .. } => "profile-extended-key-usage-missing",
            ProfileError::NoCardIdentifier { .. } => "profile-no-card-identifier",
            ProfileError::BadFascn { .. } => "profile-fascn-corrupt",
            ProfileError::Ambiguous { .. } => "profile-card-identifier-ambiguous",
        }
    }
}

/// Why a FIPS 201 validation failed: the RFC 5280 path, or the profile.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Fips201Error {
    #[error(transparent)]
    Path(#[from] ValidationError),
    #[error(transparent)]
    Profile(#[from] ProfileError),
}

/// Every published machine code of the pki errors (path, revocation, profile, binding,
/// CHUID signature, CMS signature, Security Object, biometric), in declaration order. Codes are stored by event logs and counted by metrics:
/// this list may grow, but an entry must never change.
pub const ERROR_CODES: &[&str] = &[
    "certificate-malformed",
    "certificate-rule-violation",
    "certificate-signature-invalid",
    "algorithm-refused",
    "algorithm-unsupported",
    "algorithm-mismatch",
    "certificate-expired",
    "certificate-not-yet-valid",
    "issuer-not-ca",
    "path-length-exceeded",
    "key-usage-missing",
    "extended-key-usage-missing",
    "name-constraints-violated",
    "no-acceptable-policy",
    "any-policy-mapping",
    "policy-tree-too-large",
    "unknown-critical-extension",
    "anchor-expired",
    "anchor-not-yet-valid",
    "anchor-not-ca",
    "anchor-unknown-critical-extension",
    "certificate-revoked",
    "revocation-unavailable",
    "revocation-stale",
    "no-path-to-anchor",
    "issuer-key-mismatch",
    "path-too-long",
    "work-limit-exceeded",
    "crl-not-indirect",
    "crl-not-from-issuer",
    "crl-other-distribution-point",
    "crl-only-end-entities",
    "crl-only-cas",
    "crl-only-attribute-certificates",
    "crl-not-yet-valid",
    "crl-expired",
    "crl-unknown-critical-extension",
    "crl-algorithm-mismatch",
    "crl-other-key",
    "crl-signature-malformed",
    "crl-signature-invalid",
    "crl-signer-lacks-crl-sign",
    "crl-signer-search-exhausted",
    "crl-signer-nested-too-deeply",
    "crl-signer-other-anchor",
    "crl-signer-invalid",
    "crl-signer-not-found",
    "crl-not-supplied",
    "ocsp-no-response",
    "ocsp-status-unknown",
    "ocsp-unauthorized-responder",
    "ocsp-signer-not-found",
    "ocsp-signature-invalid",
    "ocsp-not-yet-valid",
    "ocsp-expired",
    "ocsp-too-old",
    "ocsp-unknown-critical-extension",
    "ocsp-responder-expired",
    "ocsp-responder-key-usage",
    "ocsp-responder-unchecked",
    "profile-certificate-unparsable",
    "profile-key-usage-missing",
    "profile-extended-key-usage-missing",
    "profile-no-card-identifier",
    "profile-fascn-corrupt",
    "profile-card-identifier-ambiguous",
    "binding-uuid-mismatch",
    "binding-fascn-mismatch",
    "binding-nothing-to-compare",
    "binding-certificate-outlives-card",
    "chuid-undecodable",
    "chuid-unsigned",
    "chuid-signature-malformed",
    "chuid-signature-wrong-content-type",
    "chuid-signature-embedded-content",
    "chuid-signature-signer-count",
    "chuid-signature-no-signed-attributes",
    "chuid-signature-attribute-missing",
    "chuid-signature-content-type-mismatch",
    "chuid-signature-digest-unsupported",
    "chuid-digest-mismatch",
    "chuid-signer-certificate-missing",
    "chuid-signature-invalid",
    "chuid-signer-dn-mismatch",
    "chuid-signature-algorithm-refused",
    "chuid-signer-invalid",
    "cms-malformed",
    "cms-wrong-content-type",
    "cms-embedded-content",
    "cms-content-missing",
    "cms-signer-count",
    "cms-no-signed-attributes",
    "cms-attribute-missing",
    "cms-content-type-mismatch",
    "cms-digest-unsupported",
    "cms-digest-mismatch",
    "cms-signer-certificate-missing",
    "cms-signer-dn-mismatch",
    "cms-signature-invalid",
    "cms-signature-algorithm-refused",
    "cms-signer-invalid",
    "security-object-undecodable",
    "security-object-signature-refused",
    "security-object-lds-malformed",
    "security-object-digest-unsupported",
    "security-object-hash-missing",
    "security-object-data-group-mismatch",
    "biometric-undecodable",
    "biometric-unsigned",
    "biometric-signature-refused",
    "biometric-fascn-mismatch",
    "biometric-uuid-mismatch",
];

impl Fips201Error {
    /// The machine code of the underlying path or profile error.
    pub fn code(&self) -> &'static str {
        match self {
            Fips201Error::Path(e) => e.code(),
            Fips201Error::Profile(e) => e.code(),
        }
    }
}

/// A path valid under a profile, with the card identifiers of the leaf.
#[derive(Debug, Clone)]
pub struct PivValidated {
    pub path: ValidatedPath,
    pub profile: CertProfile,
    pub identity: CertCardIds,
}

/// Validates `leaf_der` with the options of `profile` (see
/// [`CertProfile::options`]), then checks the leaf against the profile.
pub fn validate_profile(
    store: &TrustStore,
    leaf_der: &[u8],
    intermediates: &[&[u8]],
    crls: &RevocationSet,
    base: &ValidationOptions,
    profile: CertProfile,
) -> Result<PivValidated, Fips201Error> {
    let opts = profile.options(base);
    let path = validate(store, leaf_der, intermediates, crls, &opts)?;
    let identity = check_parsed(path.leaf(), profile)?;
    Ok(PivValidated {
        path,
        profile,
        identity,
    })
}

/// [`validate_profile`] through a [`ValidationCache`](crate::cache::ValidationCache):
/// a repeat validation of the same leaf with the same store, CRLs, options
/// (time excepted) and profile is answered from the cache until the path's
/// `valid_until` or the cache TTL. Failures are not cached.
pub fn validate_profile_cached(
    cache: &crate::cache::ValidationCache<std::sync::Arc<PivValidated>>,
    store: &TrustStore,
    leaf_der: &[u8],
    intermediates: &[&[u8]],
    crls: &RevocationSet,
    opts: &ValidationOptions,
    profile: CertProfile,
) -> Result<std::sync::Arc<PivValidated>, Fips201Error> {
    let scope = crate::cache::Scope::for_validation(store, crls, opts, profile);
    cache.get_or_insert_with(leaf_der, &scope, opts.time.0, || {
        let v = validate_profile(store, leaf_der, intermediates, crls, opts, profile)?;
        let until = v.path.valid_until().0;
        Ok((std::sync::Arc::new(v), until))
    })
}

/// Checks the leaf against `profile` (key usage, EKU presence, card
/// identifiers) and returns its card identifiers. Path validation is not
/// repeated here.
pub fn check_leaf(leaf_der: &[u8], profile: CertProfile) -> Result<CertCardIds, ProfileError> {
    let parsed = Cert::from_der(leaf_der.to_vec()).map_err(|e| ProfileError::Unparsable {
        subject: "(end entity)".into(),
        profile,
        reason: e.to_string(),
    })?;
    check_parsed(&parsed, profile)
}

fn check_parsed(parsed: &Cert, profile: CertProfile) -> Result<CertCardIds, ProfileError> {
    let subject = parsed.subject_display();
    if profile != CertProfile::None {
        check_digital_signature(parsed, subject, profile)?;
    }
    if let Some(eku) = profile.required_eku() {
        check_eku_present(parsed, subject, profile, eku)?;
    }
    let identity = match card_ids_of(parsed) {
        Ok(id) => id,
        // Generic validation does not judge PIV identifiers it was not asked about.
        Err(_) if profile == CertProfile::None => CertCardIds::default(),
        Err(e) => return Err(e),
    };
    if profile.requires_card_identifier() && identity.fascn.is_none() && identity.uuid.is_none() {
        return Err(ProfileError::NoCardIdentifier {
            subject: subject.to_string(),
            profile,
        });
    }
    Ok(identity)
}

/// FIPS 201-3 §4.2.2 / the FPKI common profile: authentication and signing
/// keys are used for digital signatures.
fn check_digital_signature(
    c: &Cert,
    subject: &str,
    profile: CertProfile,
) -> Result<(), ProfileError> {
    match c.ext.key_usage {
        Some(ku) if ku & key_usage::DIGITAL_SIGNATURE != 0 => Ok(()),
        _ => Err(ProfileError::KeyUsage {
            subject: subject.to_string(),
            profile,
        }),
    }
}

/// The card authentication and content signer profiles require the EKU to
/// be present (RFC 5280 validation only checks it when the extension exists).
fn check_eku_present(
    c: &Cert,
    subject: &str,
    profile: CertProfile,
    eku: ObjectIdentifier,
) -> Result<(), ProfileError> {
    match &c.ext.ext_key_usage {
        Some(list) if list.contains(&eku) => Ok(()),
        _ => Err(ProfileError::EkuMissing {
            subject: subject.to_string(),
            profile,
            eku: eku.to_string(),
        }),
    }
}

/// Extracts the FASC-N (otherName 2.16.840.1.101.3.6.6, an OCTET STRING)
/// and the card UUID (`urn:uuid:` URI) from a certificate's subjectAltName.
pub fn card_identity(cert_der: &[u8]) -> Result<CertCardIds, ProfileError> {
    let parsed = Cert::from_der(cert_der.to_vec()).map_err(|e| ProfileError::Unparsable {
        subject: "(certificate)".into(),
        profile: CertProfile::None,
        reason: e.to_string(),
    })?;
    card_ids_of(&parsed)
}

/// The card identifiers among the subjectAltName entries of a parsed certificate.
fn card_ids_of(cert: &Cert) -> Result<CertCardIds, ProfileError> {
    let subject = cert.subject_display();
    let mut id = CertCardIds::default();
    for name in cert.subject_alt_names() {
        match name {
            GeneralName::OtherName { type_id, value } if *type_id == oids::PIV_FASCN => {
                if id.fascn_raw.is_some() {
                    return Err(ProfileError::Ambiguous {
                        subject: subject.to_string(),
                        what: "FASC-N",
                    });
                }
                let raw = asn1::single(value, asn1::tag::OCTET_STRING).map_err(|e| {
                    ProfileError::Unparsable {
                        subject: subject.to_string(),
                        profile: CertProfile::None,
                        reason: format!("FASC-N otherName is not an OCTET STRING: {e}"),
                    }
                })?;
                let f = Fascn::decode(raw).map_err(|error| ProfileError::BadFascn {
                    subject: subject.to_string(),
                    error,
                })?;
                id.fascn = Some(f);
                id.fascn_raw = Some(raw.to_vec());
            }
            GeneralName::Uri(s)
                if s.get(..9)
                    .is_some_and(|p| p.eq_ignore_ascii_case("urn:uuid:")) =>
            {
                if id.uuid.is_some() {
                    return Err(ProfileError::Ambiguous {
                        subject: subject.to_string(),
                        what: "card UUID",
                    });
                }
                id.uuid = piv::chuid::parse_uuid(s);
            }
            _ => {}
        }
    }
    Ok(id)
}

/// Why a certificate is not bound to a CHUID.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BindingError {
    #[error("certificate {subject} names card UUID {cert} but the CHUID's card UUID is {chuid}")]
    UuidMismatch {
        subject: String,
        cert: String,
        chuid: String,
    },
    #[error("certificate {subject} carries a FASC-N different from the CHUID's")]
    FascnMismatch { subject: String },
    #[error("certificate {subject} shares no identifier (card UUID or FASC-N) with the CHUID")]
    NothingToCompare { subject: String },
    #[error("certificate {subject} expires at {not_after}, after the card expiration date {card_expires}")]
    OutlivesCard {
        subject: String,
        not_after: Time,
        card_expires: String,
    },
}

impl BindingError {
    /// A stable, kebab-case machine code for the kind of mismatch (never changed once
    /// published).
    pub fn code(&self) -> &'static str {
        match self {
            BindingError::UuidMismatch { .. } => "binding-uuid-mismatch",
            BindingError::FascnMismatch { .. } => "binding-fascn-mismatch",
            BindingError::NothingToCompare { .. } => "binding-nothing-to-compare",
            BindingError::OutlivesCard { .. } => "binding-certificate-outlives-card",
        }
    }
}

/// Checks that a validated certificate belongs to the card whose CHUID was
/// read: equal card UUIDs and/or FASC-Ns (at least one compared), and a
/// certificate that does not expire after the card (CHUID expiration date).
pub fn check_bindings(v: &PivValidated, chuid: &Chuid) -> Result<(), BindingError> {
    let leaf = v.path.leaf();
    let subject = leaf.subject_display().to_string();
    let mut compared = false;
    if let Some(u) = v.identity.uuid {
        compared = true;
        if u != chuid.guid {
            return Err(BindingError::UuidMismatch {
                subject,
                cert: uuid_urn(&u),
                chuid: uuid_urn(&chuid.guid),
            });
        }
    }
    if let Some(f) = &v.identity.fascn_raw {
        compared = true;
        if f.as_slice() != chuid.fascn.as_slice() {
            return Err(BindingError::FascnMismatch { subject });
        }
    }
    if !compared {
        return Err(BindingError::NothingToCompare { subject });
    }
    let card_end = chuid.expiration.end_of_day_unix();
    if leaf.not_after.0 > card_end {
        return Err(BindingError::OutlivesCard {
            subject,
            not_after: leaf.not_after,
            card_expires: chuid.expiration.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod codes {
    use super::*;
    use crate::error::tests::{every_revocation_problem, every_validation_error};

    fn s() -> String {
        "CN=x".to_string()
    }

    fn every_profile_error() -> Vec<ProfileError> {
        let profile = CertProfile::PivAuth;
        vec![
            ProfileError::Unparsable {
                subject: s(),
                profile,
                reason: s(),
            },
            ProfileError::KeyUsage {
                subject: s(),
                profile,
            },
            ProfileError::EkuMissing {
                subject: s(),
                profile,
                eku: s(),
            },
            ProfileError::NoCardIdentifier {
                subject: s(),
                profile,
            },
            ProfileError::BadFascn {
                subject: s(),
                error: FascnError::WrongLength(3),
            },
            ProfileError::Ambiguous {
                subject: s(),
                what: "FASC-N",
            },
        ]
    }

    fn every_binding_error() -> Vec<BindingError> {
        vec![
            BindingError::UuidMismatch {
                subject: s(),
                cert: s(),
                chuid: s(),
            },
            BindingError::FascnMismatch { subject: s() },
            BindingError::NothingToCompare { subject: s() },
            BindingError::OutlivesCard {
                subject: s(),
                not_after: Time(0),
                card_expires: s(),
            },
        ]
    }

    fn every_chuid_error() -> Vec<ChuidVerifyError> {
        use ChuidVerifyError::*;
        vec![
            Decode(piv::chuid::ChuidError::Duplicate(0x30)),
            Unsigned,
            Malformed(s()),
            WrongContentType { found: s() },
            EmbeddedContent,
            SignerCount(2),
            NoSignedAttributes,
            MissingAttribute("messageDigest"),
            ContentTypeMismatch { found: s() },
            UnsupportedDigest(s()),
            DigestMismatch,
            SignerCertificateMissing,
            BadSignature { signer: s() },
            SignerDnMismatch {
                named: s(),
                signer: s(),
            },
            Algorithm {
                signer: s(),
                error: crate::sig::SignatureError::Invalid,
            },
            Signer(Fips201Error::Profile(ProfileError::KeyUsage {
                subject: s(),
                profile: CertProfile::ContentSigner,
            })),
        ]
    }

    fn every_cms_error() -> Vec<CmsCheckError> {
        use CmsCheckError::*;
        vec![
            Malformed(s()),
            WrongContentType {
                found: s(),
                expected: s(),
            },
            EmbeddedContent,
            MissingContent,
            SignerCount(0),
            NoSignedAttributes,
            MissingAttribute("pivFASC-N"),
            ContentTypeMismatch { found: s() },
            UnsupportedDigest(s()),
            DigestMismatch,
            SignerCertificateMissing,
            SignerDnMismatch {
                named: s(),
                signer: s(),
            },
            BadSignature { signer: s() },
            Algorithm {
                signer: s(),
                error: crate::sig::SignatureError::Invalid,
            },
            Signer(Fips201Error::Profile(ProfileError::KeyUsage {
                subject: s(),
                profile: CertProfile::ContentSigner,
            })),
        ]
    }

    fn every_security_object_error() -> Vec<SecurityObjectError> {
        use SecurityObjectError::*;
        vec![
            Decode(piv::PivError::MissingTag(0xBA)),
            Signature(CmsCheckError::DigestMismatch),
            Lds(s()),
            UnsupportedDigest(s()),
            HashMissing { number: 1 },
            DataGroupMismatch {
                number: 1,
                object: s(),
            },
        ]
    }

    fn every_biometric_error() -> Vec<BiometricError> {
        use BiometricError::*;
        vec![
            Decode(piv::PivError::MissingTag(0xBC)),
            Unsigned(0),
            Signature(CmsCheckError::DigestMismatch),
            FascnMismatch {
                what: "header",
                found: s(),
                card: s(),
            },
            UuidMismatch {
                found: s(),
                card: s(),
            },
        ]
    }

    #[test]
    fn every_error_has_a_unique_published_code() {
        let mut codes: Vec<&'static str> = Vec::new();
        codes.extend(every_validation_error().iter().map(|e| e.code()));
        codes.extend(every_revocation_problem().iter().map(|e| e.code()));
        codes.extend(every_profile_error().iter().map(|e| e.code()));
        codes.extend(every_binding_error().iter().map(|e| e.code()));
        codes.extend(every_chuid_error().iter().map(|e| e.code()));
        codes.extend(every_cms_error().iter().map(|e| e.code()));
        codes.extend(every_security_object_error().iter().map(|e| e.code()));
        codes.extend(every_biometric_error().iter().map(|e| e.code()));
        assert_eq!(
            codes, ERROR_CODES,
            "a code changed, or a variant was added without one"
        );
        let mut unique = codes.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), codes.len(), "duplicate codes: {codes:?}");
        for c in &codes {
            assert!(
                !c.is_empty()
                    && c.split('-').all(|w| !w.is_empty()
                        && w.bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())),
                "{c} is not kebab-case"
            );
        }
    }

    #[test]
    fn fips201_errors_carry_the_code_of_their_cause() {
        for e in every_validation_error() {
            assert_eq!(Fips201Error::Path(e.clone()).code(), e.code());
        }
        for e in every_profile_error() {
            assert_eq!(Fips201Error::Profile(e.clone()).code(), e.code());
        }
    }
}
