//! Why a certification path is not valid: [`ValidationError`], its stable machine
//! [`code`](ValidationError::code), its [`rank`](ValidationError::rank) for choosing which of
//! several failed candidate paths to report, and the typed revocation problems
//! ([`RevocationProblem`], with the OCSP ones in [`OcspProblem`]) behind
//! [`ValidationError::RevocationUnavailable`].

use crate::cert::{Cert, CertError};
use crate::reason::Reason;
use crate::sig::SignatureError;
use crate::time::Time;
use std::fmt;
use thiserror::Error;

/// Why a path is not valid. Every variant names the certificate concerned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ValidationError {
    /// `error` is either a structure that is not X.509 at all or, when
    /// [`CertError::breaks_rule`] says so, a certificate that parses as X.509 but breaks a rule
    /// of RFC 5280 (a malformed extension value, an extension twice, an invalid name); the
    /// two have different [codes](ValidationError::code).
    #[error("certificate {subject} {}: {error}", if error.breaks_rule() { "breaks a rule" } else { "is malformed" })]
    Malformed { subject: String, error: CertError },
    #[error("the signature on certificate {subject} does not verify with the key of {issuer}")]
    BadSignature { subject: String, issuer: String },
    #[error("certificate {subject} uses {detail}, which the algorithm policy refuses")]
    WeakAlgorithm { subject: String, detail: String },
    #[error("certificate {subject} uses an unsupported signature: {detail}")]
    UnsupportedAlgorithm { subject: String, detail: String },
    #[error("certificate {subject} has different signature algorithms inside and outside the signed part")]
    AlgorithmMismatch { subject: String },
    #[error("certificate {subject} expired at {not_after} (validation time {time})")]
    Expired {
        subject: String,
        not_after: Time,
        time: Time,
    },
    #[error("certificate {subject} is not valid before {not_before} (validation time {time})")]
    NotYetValid {
        subject: String,
        not_before: Time,
        time: Time,
    },
    #[error("certificate {subject} issues other certificates but is not a CA certificate (basicConstraints cA is not set)")]
    NotACa { subject: String },
    #[error("certificate {subject} exceeds the path length allowed by a CA above it")]
    PathLengthExceeded { subject: String },
    #[error("certificate {subject} lacks the key usage {required}")]
    KeyUsage {
        subject: String,
        required: &'static str,
    },
    #[error("certificate {subject} does not allow the extended key usage {required}")]
    EkuMissing { subject: String, required: String },
    #[error("certificate {subject}: {name} is {} the name constraints of {constrained_by}", if *excluded { "excluded by" } else { "not permitted by" })]
    NameConstraints {
        subject: String,
        name: String,
        constrained_by: String,
        excluded: bool,
    },
    #[error("no acceptable certificate policy at certificate {subject}: the path does not assert a policy the validation requires")]
    NoAcceptablePolicy { subject: String },
    #[error("certificate {subject} maps a policy to or from anyPolicy, which RFC 5280 forbids")]
    AnyPolicyMapping { subject: String },
    #[error("certificate {subject} has too many policies to process")]
    PolicyTreeTooLarge { subject: String },
    #[error("certificate {subject} has a critical extension {oid} that is not understood")]
    UnknownCriticalExtension { subject: String, oid: String },
    /// A rule of the RFC 5280 profile that conforming CAs follow ([`crate::profile`]); not
    /// checked with [`crate::profile::Profile::Lenient`].
    #[error("certificate {subject} breaks RFC 5280 §{}: it {}", .rule.section(), .rule.describe())]
    Profile {
        subject: String,
        rule: crate::profile::Rule,
    },
    #[error("trust anchor {subject} expired at {not_after} (validation time {time}); an operator can allow expired anchors explicitly")]
    AnchorExpired {
        subject: String,
        not_after: Time,
        time: Time,
    },
    #[error("trust anchor {subject} is not valid before {not_before} (validation time {time})")]
    AnchorNotYetValid {
        subject: String,
        not_before: Time,
        time: Time,
    },
    /// The anchor certificate may not issue certificates (RFC 5937 §3.5, RFC 5280 §4.2.1.3 and
    /// §4.2.1.9); `detail` says why.
    #[error("trust anchor {subject} may not issue certificates: {detail}")]
    AnchorNotCa {
        subject: String,
        detail: &'static str,
    },
    #[error("trust anchor {subject} has a critical extension {oid} that is not understood, so it cannot be used")]
    AnchorUnknownCriticalExtension { subject: String, oid: String },
    /// The reason is `Unspecified` when the CRL entry gives none.
    #[error("certificate {subject} was revoked at {date} (reason: {reason})")]
    Revoked {
        subject: String,
        reason: Reason,
        date: Time,
    },
    #[error("no usable revocation information for certificate {subject}: {detail}")]
    RevocationUnavailable {
        subject: String,
        detail: RevocationGap,
    },
    /// `issuer` names the CRL issuer of the newest stale CRL.
    #[error("the revocation information for certificate {subject} is stale: the newest CRL from {issuer} was due to be replaced at {next_update}, {age} before the validation time {time}", age = staleness(*.next_update, *.time))]
    RevocationStale {
        subject: String,
        issuer: String,
        next_update: Time,
        time: Time,
    },
    #[error("no path to a trust anchor: the issuer {issuer} of certificate {subject} is not in the trust store or among the supplied certificates")]
    NoPath { subject: String, issuer: String },
    #[error("certificate {subject} was signed by a key of {issuer} that none of the {count} known certificates of that name holds (re-keyed CA or missing intermediate)")]
    IssuerKeyMismatch {
        subject: String,
        issuer: String,
        count: usize,
    },
    #[error("the path from certificate {subject} would be longer than the maximum of {max} certificates")]
    DepthExceeded { subject: String, max: usize },
    #[error(
        "path building for certificate {subject} gave up after trying {tried} candidate issuers"
    )]
    WorkLimitExceeded { subject: String, tried: usize },
}

/// How long after `due` `now` is, as people say it ("3 h 12 min", "2 days 4 h").
fn staleness(due: Time, now: Time) -> String {
    let secs = now.0.saturating_sub(due.0).max(0);
    let (d, h, m) = (secs / 86_400, secs % 86_400 / 3_600, secs % 3_600 / 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{secs} s"),
        (0, 0, m) => format!("{m} min"),
        (0, h, m) => format!("{h} h {m} min"),
        (1, h, _) => format!("1 day {h} h"),
        (d, h, _) => format!("{d} days {h} h"),
    }
}

/// How far path building got when it produced an error, lowest first (see
/// [`ValidationError::rank`]). Of several failed candidate paths, path building reports an error
/// of a complete path before an exhausted budget, and an exhausted budget before an error of an
/// incomplete path; among incomplete paths the longest wins, and at equal length the higher
/// rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rank {
    /// No usable issuer was found (none known, too deep, or unparsable).
    IssuerNotFound,
    /// An issuer was found by name but its key does not verify the certificate.
    IssuerDoesNotVerify,
    /// Path building used up its work budget before it completed any path.
    BudgetExhausted,
    /// A complete path to a trust anchor was built but breaks a rule of RFC 5280 §6.1, local
    /// policy, or revocation (§6.3): that is the reason to report, whatever else was tried.
    PathRejected,
}

impl ValidationError {
    /// A stable, kebab-case machine code for the kind of failure, for event logs, APIs and
    /// metrics. Codes never change once published; the sentence ([`Display`](fmt::Display))
    /// may be reworded.
    pub fn code(&self) -> &'static str {
        use ValidationError::*;
        match self {
            Malformed { error, .. } if error.breaks_rule() => "certificate-rule-violation",
            Malformed { .. } => "certificate-malformed",
            BadSignature { .. } => "certificate-signature-invalid",
            WeakAlgorithm { .. } => "algorithm-refused",
            UnsupportedAlgorithm { .. } => "algorithm-unsupported",
            AlgorithmMismatch { .. } => "algorithm-mismatch",
            Expired { .. } => "certificate-expired",
            NotYetValid { .. } => "certificate-not-yet-valid",
            NotACa { .. } => "issuer-not-ca",
            PathLengthExceeded { .. } => "path-length-exceeded",
            KeyUsage { .. } => "key-usage-missing",
            EkuMissing { .. } => "extended-key-usage-missing",
            NameConstraints { .. } => "name-constraints-violated",
            NoAcceptablePolicy { .. } => "no-acceptable-policy",
            AnyPolicyMapping { .. } => "any-policy-mapping",
            PolicyTreeTooLarge { .. } => "policy-tree-too-large",
            UnknownCriticalExtension { .. } => "unknown-critical-extension",
            Profile { rule, .. } => rule.code(),
            AnchorExpired { .. } => "anchor-expired",
            AnchorNotYetValid { .. } => "anchor-not-yet-valid",
            AnchorNotCa { .. } => "anchor-not-ca",
            AnchorUnknownCriticalExtension { .. } => "anchor-unknown-critical-extension",
            Revoked { .. } => "certificate-revoked",
            RevocationUnavailable { .. } => "revocation-unavailable",
            RevocationStale { .. } => "revocation-stale",
            NoPath { .. } => "no-path-to-anchor",
            IssuerKeyMismatch { .. } => "issuer-key-mismatch",
            DepthExceeded { .. } => "path-too-long",
            WorkLimitExceeded { .. } => "work-limit-exceeded",
        }
    }

    /// How far path building got when this error arose (as webpki's `Error::rank`): errors
    /// of a complete path outrank those of a path that could not be completed, so the error
    /// reported is the most specific one available.
    pub fn rank(&self) -> Rank {
        use ValidationError::*;
        match self {
            Malformed { .. } | NoPath { .. } | DepthExceeded { .. } => Rank::IssuerNotFound,
            BadSignature { .. }
            | WeakAlgorithm { .. }
            | UnsupportedAlgorithm { .. }
            | AlgorithmMismatch { .. }
            | IssuerKeyMismatch { .. } => Rank::IssuerDoesNotVerify,
            Expired { .. }
            | NotYetValid { .. }
            | NotACa { .. }
            | PathLengthExceeded { .. }
            | KeyUsage { .. }
            | EkuMissing { .. }
            | NameConstraints { .. }
            | NoAcceptablePolicy { .. }
            | AnyPolicyMapping { .. }
            | PolicyTreeTooLarge { .. }
            | UnknownCriticalExtension { .. }
            | Profile { .. }
            | AnchorExpired { .. }
            | AnchorNotYetValid { .. }
            | AnchorNotCa { .. }
            | AnchorUnknownCriticalExtension { .. }
            | Revoked { .. }
            | RevocationUnavailable { .. }
            | RevocationStale { .. } => Rank::PathRejected,
            WorkLimitExceeded { .. } => Rank::BudgetExhausted,
        }
    }

    pub(crate) fn from_signature(subject: &Cert, issuer: &Cert, e: SignatureError) -> Self {
        let subject_s = subject.subject_display().to_string();
        match e {
            SignatureError::Invalid => ValidationError::BadSignature {
                subject: subject_s,
                issuer: issuer.subject_display().to_string(),
            },
            SignatureError::Weak(detail) => ValidationError::WeakAlgorithm {
                subject: subject_s,
                detail,
            },
            SignatureError::Unsupported(detail) | SignatureError::BadKey(detail) => {
                ValidationError::UnsupportedAlgorithm {
                    subject: subject_s,
                    detail,
                }
            }
        }
    }
}

/// Why the CRLs supplied could not establish a certificate's revocation status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevocationGap {
    /// No CRL from the certificate's issuer (or its CRL issuer) was supplied at all.
    NoCrl { issuer: String },
    /// Some CRLs vouch for the certificate, but not for every revocation reason.
    PartialReasons(Vec<RevocationProblem>),
    /// Every CRL that might have covered the certificate was unusable.
    Unusable(Vec<RevocationProblem>),
}

impl RevocationGap {
    /// The problems found with the CRLs considered (empty for [`RevocationGap::NoCrl`]).
    pub fn problems(&self) -> &[RevocationProblem] {
        match self {
            RevocationGap::NoCrl { .. } => &[],
            RevocationGap::PartialReasons(p) | RevocationGap::Unusable(p) => p,
        }
    }
}

fn join(f: &mut fmt::Formatter<'_>, problems: &[RevocationProblem]) -> fmt::Result {
    for (i, p) in problems.iter().enumerate() {
        if i > 0 {
            f.write_str("; ")?;
        }
        write!(f, "{p}")?;
    }
    Ok(())
}

impl fmt::Display for RevocationGap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RevocationGap::NoCrl { issuer } => write!(f, "no CRL issued by {issuer} was supplied"),
            RevocationGap::PartialReasons(p) => {
                f.write_str("the CRLs supplied do not cover every revocation reason (")?;
                join(f, p)?;
                f.write_str(")")
            }
            RevocationGap::Unusable(p) => join(f, p),
        }
    }
}

/// Why one CRL (or one candidate CRL signer) could not be relied on (RFC 5280 §6.3.3).
/// `crl` is the display name of the CRL's issuer, `signer` that of a candidate signer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RevocationProblem {
    #[error("the CRL from {crl} is not an indirect CRL")]
    NotIndirect { crl: String },
    #[error("the CRL from {crl} is not from the certificate issuer")]
    NotFromIssuer { crl: String },
    #[error("the CRL from {crl} covers a different distribution point")]
    OtherDistributionPoint { crl: String },
    #[error("the CRL from {crl} covers only end-entity certificates")]
    OnlyEndEntities { crl: String },
    #[error("the CRL from {crl} covers only CA certificates")]
    OnlyCas { crl: String },
    #[error("the CRL from {crl} covers only attribute certificates")]
    OnlyAttributeCertificates { crl: String },
    #[error("the CRL from {crl} is not valid before {this_update}")]
    NotYetValid { crl: String, this_update: Time },
    #[error("the CRL from {crl} expired at {next_update}")]
    Expired { crl: String, next_update: Time },
    #[error("the CRL from {crl} has an unsupported critical extension")]
    UnknownCriticalExtension { crl: String },
    #[error("the CRL from {crl} has different inner and outer signature algorithms")]
    AlgorithmMismatch { crl: String },
    #[error("the CRL from {crl} names another key")]
    OtherKey { crl: String },
    #[error("the signature on the CRL from {crl} is malformed")]
    MalformedSignature { crl: String },
    #[error("the CRL from {crl} is not signed by {signer}: {error}")]
    BadSignature {
        crl: String,
        signer: String,
        error: SignatureError,
    },
    #[error("{signer} signed a CRL but lacks the key usage cRLSign")]
    SignerLacksCrlSign { signer: String },
    #[error("gave up looking for the signer of the CRL from {crl} after {tried} candidates")]
    SignerSearchExhausted { crl: String, tried: usize },
    #[error("the path of CRL signer {signer} is nested too deeply")]
    SignerNestedTooDeeply { signer: String },
    #[error("CRL signer {signer} chains to a different trust anchor")]
    SignerOtherAnchor { signer: String },
    #[error("CRL signer {signer} is not valid: {error}")]
    SignerInvalid {
        signer: String,
        error: Box<ValidationError>,
    },
    #[error("no certificate for the CRL issuer {crl} was found")]
    NoSigner { crl: String },
    #[error("no CRL issued by {issuer} was supplied")]
    NoCrl { issuer: String },
    /// RFC 5280 §5.2.3: CRL issuers MUST include the cRLNumber extension in all CRLs.
    #[error("the CRL from {crl} has no CRL number, which RFC 5280 §5.2.3 requires")]
    CrlNumberMissing { crl: String },
    /// RFC 5280 §5.2.3: ... and MUST mark it non-critical.
    #[error("the CRL from {crl} marks its CRL number critical, which RFC 5280 §5.2.3 forbids")]
    CrlNumberCritical { crl: String },
    #[error(transparent)]
    Ocsp(#[from] OcspProblem),
}

impl RevocationProblem {
    /// A stable, kebab-case machine code for the problem (never changed once published).
    pub fn code(&self) -> &'static str {
        use RevocationProblem::*;
        match self {
            NotIndirect { .. } => "crl-not-indirect",
            NotFromIssuer { .. } => "crl-not-from-issuer",
            OtherDistributionPoint { .. } => "crl-other-distribution-point",
            OnlyEndEntities { .. } => "crl-only-end-entities",
            OnlyCas { .. } => "crl-only-cas",
            OnlyAttributeCertificates { .. } => "crl-only-attribute-certificates",
            NotYetValid { .. } => "crl-not-yet-valid",
            Expired { .. } => "crl-expired",
            UnknownCriticalExtension { .. } => "crl-unknown-critical-extension",
            AlgorithmMismatch { .. } => "crl-algorithm-mismatch",
            OtherKey { .. } => "crl-other-key",
            MalformedSignature { .. } => "crl-signature-malformed",
            BadSignature { .. } => "crl-signature-invalid",
            SignerLacksCrlSign { .. } => "crl-signer-lacks-crl-sign",
            SignerSearchExhausted { .. } => "crl-signer-search-exhausted",
            SignerNestedTooDeeply { .. } => "crl-signer-nested-too-deeply",
            SignerOtherAnchor { .. } => "crl-signer-other-anchor",
            SignerInvalid { .. } => "crl-signer-invalid",
            NoSigner { .. } => "crl-signer-not-found",
            NoCrl { .. } => "crl-not-supplied",
            CrlNumberMissing { .. } => "crl-number-missing",
            CrlNumberCritical { .. } => "crl-number-critical",
            Ocsp(p) => p.code(),
        }
    }
}

/// Why an OCSP response could not vouch for a certificate.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum OcspProblem {
    #[error("no OCSP response about it was available")]
    NoResponse,
    #[error("the OCSP responder {responder} does not know the certificate (status unknown)")]
    StatusUnknown { responder: String },
    #[error("the OCSP response is signed by {signer}, which is neither the certificate's issuer nor a responder that issuer authorised (issued by it with id-kp-OCSPSigning)")]
    UnauthorizedResponder { signer: String },
    #[error("no certificate of the issuer or an authorised responder verifies the OCSP response from {responder}")]
    NoSigner { responder: String },
    #[error("the signature on the OCSP response from {responder} does not verify: {error}")]
    BadSignature {
        responder: String,
        error: SignatureError,
    },
    #[error("the OCSP response from {responder} is not valid before {this_update}")]
    NotYetValid {
        responder: String,
        this_update: Time,
    },
    #[error("the OCSP response from {responder} expired at {next_update}")]
    Expired {
        responder: String,
        next_update: Time,
    },
    #[error("the OCSP response from {responder} has no nextUpdate and was produced at {this_update}, more than {max_age_secs} s before the validation time")]
    TooOld {
        responder: String,
        this_update: Time,
        max_age_secs: u64,
    },
    #[error("the OCSP response from {responder} has a critical extension that is not understood")]
    UnknownCriticalExtension { responder: String },
    #[error("OCSP responder certificate {responder} is not valid at the validation time")]
    ResponderExpired { responder: String },
    #[error("OCSP responder certificate {responder} lacks the key usage digitalSignature")]
    ResponderKeyUsage { responder: String },
    #[error("the revocation status of OCSP responder certificate {responder} (no id-pkix-ocsp-nocheck) is not established: {error}")]
    ResponderUnchecked {
        responder: String,
        error: Box<ValidationError>,
    },
}

impl OcspProblem {
    /// A stable, kebab-case machine code.
    pub fn code(&self) -> &'static str {
        use OcspProblem::*;
        match self {
            NoResponse => "ocsp-no-response",
            StatusUnknown { .. } => "ocsp-status-unknown",
            UnauthorizedResponder { .. } => "ocsp-unauthorized-responder",
            NoSigner { .. } => "ocsp-signer-not-found",
            BadSignature { .. } => "ocsp-signature-invalid",
            NotYetValid { .. } => "ocsp-not-yet-valid",
            Expired { .. } => "ocsp-expired",
            TooOld { .. } => "ocsp-too-old",
            UnknownCriticalExtension { .. } => "ocsp-unknown-critical-extension",
            ResponderExpired { .. } => "ocsp-responder-expired",
            ResponderKeyUsage { .. } => "ocsp-responder-key-usage",
            ResponderUnchecked { .. } => "ocsp-responder-unchecked",
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One value of every problem.
    pub(crate) fn every_problem() -> Vec<OcspProblem> {
        use OcspProblem::*;
        let s = || "CN=x".to_string();
        let t = Time(0);
        vec![
            NoResponse,
            StatusUnknown { responder: s() },
            UnauthorizedResponder { signer: s() },
            NoSigner { responder: s() },
            BadSignature {
                responder: s(),
                error: SignatureError::Invalid,
            },
            NotYetValid {
                responder: s(),
                this_update: t,
            },
            Expired {
                responder: s(),
                next_update: t,
            },
            TooOld {
                responder: s(),
                this_update: t,
                max_age_secs: 1,
            },
            UnknownCriticalExtension { responder: s() },
            ResponderExpired { responder: s() },
            ResponderKeyUsage { responder: s() },
            ResponderUnchecked {
                responder: s(),
                error: Box::new(ValidationError::NotACa { subject: s() }),
            },
        ]
    }

    fn s() -> String {
        "CN=x".to_string()
    }

    /// One value of every variant.
    pub(crate) fn every_validation_error() -> Vec<ValidationError> {
        use ValidationError::*;
        let t = Time(0);
        vec![
            Malformed {
                subject: s(),
                error: CertError::Field {
                    field: "tbsCertificate",
                    source: crate::asn1::DerError::Truncated,
                },
            },
            Malformed {
                subject: s(),
                error: CertError::DuplicateExtension("2.5.29.17".into()),
            },
            BadSignature {
                subject: s(),
                issuer: s(),
            },
            WeakAlgorithm {
                subject: s(),
                detail: s(),
            },
            UnsupportedAlgorithm {
                subject: s(),
                detail: s(),
            },
            AlgorithmMismatch { subject: s() },
            Expired {
                subject: s(),
                not_after: t,
                time: t,
            },
            NotYetValid {
                subject: s(),
                not_before: t,
                time: t,
            },
            NotACa { subject: s() },
            PathLengthExceeded { subject: s() },
            KeyUsage {
                subject: s(),
                required: "keyCertSign",
            },
            EkuMissing {
                subject: s(),
                required: s(),
            },
            NameConstraints {
                subject: s(),
                name: s(),
                constrained_by: s(),
                excluded: true,
            },
            NoAcceptablePolicy { subject: s() },
            AnyPolicyMapping { subject: s() },
            PolicyTreeTooLarge { subject: s() },
            UnknownCriticalExtension {
                subject: s(),
                oid: s(),
            },
            AnchorExpired {
                subject: s(),
                not_after: t,
                time: t,
            },
            AnchorNotYetValid {
                subject: s(),
                not_before: t,
                time: t,
            },
            AnchorNotCa {
                subject: s(),
                detail: "basicConstraints cA is false",
            },
            AnchorUnknownCriticalExtension {
                subject: s(),
                oid: s(),
            },
            Revoked {
                subject: s(),
                reason: Reason::KeyCompromise,
                date: t,
            },
            RevocationUnavailable {
                subject: s(),
                detail: RevocationGap::NoCrl { issuer: s() },
            },
            RevocationStale {
                subject: s(),
                issuer: s(),
                next_update: t,
                time: t,
            },
            NoPath {
                subject: s(),
                issuer: s(),
            },
            IssuerKeyMismatch {
                subject: s(),
                issuer: s(),
                count: 2,
            },
            DepthExceeded {
                subject: s(),
                max: 8,
            },
            WorkLimitExceeded {
                subject: s(),
                tried: 2000,
            },
        ]
    }

    pub(crate) fn every_revocation_problem() -> Vec<RevocationProblem> {
        use RevocationProblem::*;
        vec![
            NotIndirect { crl: s() },
            NotFromIssuer { crl: s() },
            OtherDistributionPoint { crl: s() },
            OnlyEndEntities { crl: s() },
            OnlyCas { crl: s() },
            OnlyAttributeCertificates { crl: s() },
            NotYetValid {
                crl: s(),
                this_update: Time(0),
            },
            Expired {
                crl: s(),
                next_update: Time(0),
            },
            UnknownCriticalExtension { crl: s() },
            AlgorithmMismatch { crl: s() },
            OtherKey { crl: s() },
            MalformedSignature { crl: s() },
            BadSignature {
                crl: s(),
                signer: s(),
                error: SignatureError::Invalid,
            },
            SignerLacksCrlSign { signer: s() },
            SignerSearchExhausted { crl: s(), tried: 1 },
            SignerNestedTooDeeply { signer: s() },
            SignerOtherAnchor { signer: s() },
            SignerInvalid {
                signer: s(),
                error: Box::new(ValidationError::NoPath {
                    subject: s(),
                    issuer: s(),
                }),
            },
            NoSigner { crl: s() },
            NoCrl { issuer: s() },
        ]
        .into_iter()
        .chain(every_problem().into_iter().map(Ocsp))
        .collect()
    }

    #[test]
    fn the_revocation_detail_reads_as_one_sentence() {
        let p = vec![
            RevocationProblem::NotFromIssuer { crl: "CN=A".into() },
            RevocationProblem::NoSigner { crl: "CN=B".into() },
        ];
        assert_eq!(
            RevocationGap::Unusable(p.clone()).to_string(),
            "the CRL from CN=A is not from the certificate issuer; \
             no certificate for the CRL issuer CN=B was found"
        );
        assert_eq!(
            RevocationGap::PartialReasons(p[..1].to_vec()).to_string(),
            "the CRLs supplied do not cover every revocation reason \
             (the CRL from CN=A is not from the certificate issuer)"
        );
        assert_eq!(
            RevocationGap::NoCrl {
                issuer: "CN=A".into()
            }
            .to_string(),
            "no CRL issued by CN=A was supplied"
        );
    }

    #[test]
    fn ranks_order_the_stages_of_path_building() {
        let e = every_validation_error();
        let rank_of = |code: &str| e.iter().find(|e| e.code() == code).unwrap().rank();
        assert!(rank_of("no-path-to-anchor") < rank_of("certificate-signature-invalid"));
        assert!(rank_of("issuer-key-mismatch") < rank_of("certificate-expired"));
        // The anchor's own problems are those of a complete path: they outrank any path that
        // could not be completed, and running out of budget.
        for code in [
            "anchor-expired",
            "anchor-not-yet-valid",
            "anchor-not-ca",
            "anchor-unknown-critical-extension",
        ] {
            assert_eq!(rank_of(code), rank_of("certificate-expired"), "{code}");
            assert!(rank_of(code) > rank_of("issuer-key-mismatch"), "{code}");
            assert!(rank_of(code) > rank_of("work-limit-exceeded"), "{code}");
        }
        // A certificate that breaks a rule cannot be anyone's issuer, like one that is not a
        // certificate at all.
        assert_eq!(
            rank_of("certificate-rule-violation"),
            rank_of("certificate-malformed")
        );
        // A path that was found and failed says more than running out of budget.
        assert!(rank_of("work-limit-exceeded") < rank_of("certificate-revoked"));
        assert!(rank_of("work-limit-exceeded") < rank_of("revocation-unavailable"));
        assert!(rank_of("certificate-signature-invalid") < rank_of("work-limit-exceeded"));
    }
}
