//! The trust arguments of the commands that validate (`pki verify*`,
//! `auth`): the files, revocation and OCSP options, read into a
//! [`pki::trust::Trust`] and [`ValidationOptions`].

use clap::{Args, ValueEnum};
use pki::fetch::FetchConfig;
use pki::fips201::CertProfile;
use pki::ocsp::client::{NoncePolicy, OcspConfig, RequestMethod};
use pki::ocsp::CertIdHash;
use pki::options::AnchorConstraints;
use pki::time::Time;
use pki::trust::{RevocationCheck, RevocationConfig, RevocationSourceConfig, Trust, TrustConfig};
use pki::validate::ValidationOptions;
use std::path::PathBuf;

/// The FIPS 201 profile to check a leaf against.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ProfileArg {
    /// RFC 5280 validation only.
    None,
    /// PIV Authentication (9A): id-fpki-common-authentication, FASC-N/UUID in SAN.
    PivAuth,
    /// Card Authentication (9E): id-fpki-common-cardAuth, EKU id-PIV-cardAuth.
    CardAuth,
    /// CHUID content signer: id-fpki-common-piv-contentSigning, EKU id-PIV-content-signing.
    ContentSigner,
}

impl From<RevocationArg> for RevocationCheck {
    fn from(r: RevocationArg) -> RevocationCheck {
        match r {
            RevocationArg::Require => RevocationCheck::Require,
            RevocationArg::BestEffort => RevocationCheck::BestEffort,
            RevocationArg::Off => RevocationCheck::Off,
        }
    }
}

impl From<ProfileArg> for CertProfile {
    fn from(p: ProfileArg) -> CertProfile {
        match p {
            ProfileArg::None => CertProfile::None,
            ProfileArg::PivAuth => CertProfile::PivAuth,
            ProfileArg::CardAuth => CertProfile::CardAuth,
            ProfileArg::ContentSigner => CertProfile::ContentSigner,
        }
    }
}

/// Which certificates the RFC 5280 profile accepts.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Rfc5280ProfileArg {
    /// Every MUST of the RFC 5280 profile.
    Strict,
    /// RFC 5280 path processing only.
    Lenient,
}

/// What a trust anchor certificate contributes to validation.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum AnchorModeArg {
    /// The anchor certificate constrains the path (RFC 5937, as OpenSSL): it must be a CA
    /// certificate within its validity period without unknown critical extensions, and its
    /// name constraints, path length, policies and policy constraints apply below it.
    Constrained,
    /// The anchor is a bare name and key (RFC 5280 §6.1 exactly): the rest of its certificate
    /// is ignored.
    Bare,
}

impl From<AnchorModeArg> for AnchorConstraints {
    fn from(m: AnchorModeArg) -> AnchorConstraints {
        match m {
            AnchorModeArg::Constrained => AnchorConstraints::Enforce,
            AnchorModeArg::Bare => AnchorConstraints::Ignore,
        }
    }
}

/// Where revocation status comes from.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum SourceArg {
    /// CRLs only.
    Crl,
    /// OCSP answers only.
    Ocsp,
    /// An OCSP answer when a usable one is obtained, else CRLs.
    Either,
    /// Both a good OCSP answer and CRL coverage.
    Both,
}

impl From<SourceArg> for RevocationSourceConfig {
    fn from(s: SourceArg) -> RevocationSourceConfig {
        match s {
            SourceArg::Crl => RevocationSourceConfig::Crl,
            SourceArg::Ocsp => RevocationSourceConfig::Ocsp,
            SourceArg::Either => RevocationSourceConfig::Either,
            SourceArg::Both => RevocationSourceConfig::Both,
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OcspMethodArg {
    Auto,
    Get,
    Post,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OcspHashArg {
    Sha1,
    Sha256,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OcspNonceArg {
    Prefer,
    Require,
    Off,
}

/// Revocation checking mode.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RevocationArg {
    /// Every certificate needs current CRL coverage; missing data is INVALID.
    Require,
    /// Revoked certificates are INVALID; missing CRLs are not.
    BestEffort,
    /// No revocation checking.
    Off,
}

/// The trust files of a command (`pki verify`, `pki verify-chuid`, `auth`),
/// read into a [`TrustConfig`]. Every file must be what its option asks for:
/// anything else is a usage error (exit 2) naming the file.
#[derive(Args)]
pub struct TrustFiles {
    /// Trust anchors: a PEM bundle, a DER certificate, a PKCS#7 .p7b/.p7c,
    /// or a directory of such files. Repeatable; at least one is required.
    #[arg(long, value_name = "FILE|DIR", required = true)]
    anchors: Vec<PathBuf>,
    /// Intermediate CA certificates (same forms), untrusted: added to the
    /// certificates path building may use, never trust anchors; a path
    /// through one must still end at an --anchors certificate and pass every
    /// check. Repeatable.
    #[arg(long, value_name = "FILE|DIR")]
    intermediates: Vec<PathBuf>,
    /// CRL files (DER or PEM) or directories of them; every file of a
    /// directory must be a CRL. Repeatable.
    #[arg(long, value_name = "FILE|DIR")]
    crl: Vec<PathBuf>,
}

impl TrustFiles {
    /// The configuration these files make, with `revocation`.
    pub fn config(&self, revocation: RevocationConfig) -> TrustConfig {
        TrustConfig {
            anchors: self.anchors.clone(),
            intermediates: self.intermediates.clone(),
            crls: self.crl.clone(),
            revocation,
            ..Default::default()
        }
    }

    /// Whether CRL files were given.
    pub fn has_crls(&self) -> bool {
        !self.crl.is_empty()
    }
}

/// Loads a trust configuration; the error names the file and the reason, and
/// fully parses every certificate so a damaged trust anchor is reported here
/// (exit 2), not as an INVALID path. A damaged intermediate, an untrusted
/// candidate, is skipped with a warning.
pub fn load_trust(config: &TrustConfig) -> anyhow::Result<Trust> {
    Ok(load_trust_reporting(config)?.0)
}

/// [`load_trust`], also returning the intermediates skipped (one sentence each).
pub fn load_trust_reporting(config: &TrustConfig) -> anyhow::Result<(Trust, Vec<String>)> {
    let trust = config.load()?;
    let skipped = trust.check_certificates()?;
    for s in &skipped {
        eprintln!("warning: skipped as a candidate issuer: {s}");
    }
    Ok((trust, skipped))
}

#[derive(Args)]
pub struct TrustArgs {
    #[command(flatten)]
    pub(crate) files: TrustFiles,
    /// After a path to a trust anchor is found, download the CRLs of its
    /// certificates from their http:// CRL distribution points (at most 4
    /// per certificate, 10 s in all; redirects only within the same
    /// server). A certificate without a path causes no download.
    #[arg(long)]
    pub(crate) fetch_crls: bool,
    /// Revocation checking [default: require: a certificate without current
    /// CRL coverage is INVALID, so give --crl or --fetch-crls, or say
    /// --revocation off for a path without revocation data].
    #[arg(long, value_enum)]
    revocation: Option<RevocationArg>,
    /// After a path to a trust anchor is found, ask the OCSP responder of
    /// each of its certificates (authorityInfoAccess id-ad-ocsp, or
    /// --ocsp-url) for its status, with a nonce; 3 s and 64 KiB per answer.
    /// Alone, it means --revocation-source either.
    #[arg(long)]
    ocsp: bool,
    /// Where revocation status comes from [default: crl, or either with
    /// --ocsp]: crl, ocsp, either (OCSP first, CRLs when no OCSP answer is
    /// usable) or both (a good OCSP answer and CRL coverage). Any source
    /// but crl asks the responders, as --ocsp does.
    #[arg(long, value_enum, value_name = "SOURCE")]
    revocation_source: Option<SourceArg>,
    /// Ask this OCSP responder instead of the one each certificate names.
    #[arg(long, value_name = "URL")]
    ocsp_url: Option<String>,
    /// How OCSP requests are sent: auto (GET when the request fits in the
    /// URL, else POST), get or post.
    #[arg(long, value_enum, default_value = "auto")]
    ocsp_method: OcspMethodArg,
    /// The hash of the CertID in OCSP requests.
    #[arg(long, value_enum, default_value = "sha1")]
    ocsp_hash: OcspHashArg,
    /// An OCSP answer without our nonce: prefer (accepted: pre-produced
    /// answers), require (refused) or off (no nonce is sent).
    #[arg(long, value_enum, default_value = "prefer")]
    ocsp_nonce: OcspNonceArg,
    /// Accept an OCSP answer without nextUpdate this many seconds after its
    /// thisUpdate.
    #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
    ocsp_max_age: u64,
    /// Validation time (RFC 3339, e.g. 2030-01-01T00:00:00Z) [default: now].
    #[arg(long, value_name = "RFC3339")]
    at: Option<String>,
    /// Accept a CRL (or OCSP answer) this many seconds past its nextUpdate.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    crl_grace: u64,
    /// Accept SHA-1 signatures and RSA keys of 1024 bits (old test suites).
    #[arg(long)]
    legacy_algorithms: bool,
    /// The policies the FIPS 201 profiles accept: production
    /// (id-fpki-common-*) or test (the Federal PKI's test arc
    /// 2.16.840.1.101.3.2.1.48.x, as `pki init --policy-set test` issues).
    #[arg(long, default_value = "production", value_name = "SET")]
    policy_set: pki_issue::PolicySet,
    /// What a trust anchor certificate contributes: `constrained` applies
    /// its validity, CA status, critical extensions, name constraints, path
    /// length and policies to the path (RFC 5937); `bare` uses only its name
    /// and key (RFC 5280 §6.1).
    #[arg(long, value_enum, default_value = "constrained")]
    anchor_mode: AnchorModeArg,
    /// Accept a trust anchor outside its validity period (constrained mode;
    /// otherwise an expired anchor makes every path through it INVALID).
    #[arg(long)]
    allow_expired_anchor: bool,
    /// `strict` refuses certificates and CRLs that break a MUST of the
    /// RFC 5280 profile, each with its own code; `lenient` applies RFC 5280
    /// path processing only, for a known non-conforming issuer. (`--profile`
    /// is the FIPS 201 profile.)
    #[arg(long, value_enum, default_value = "strict", value_name = "PROFILE")]
    rfc5280_profile: Rfc5280ProfileArg,
    /// Print the result as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The trust and base options of `verify` and `verify-chuid`.
pub struct Inputs {
    pub trust: Trust,
    pub opts: ValidationOptions,
    /// Intermediates that could not be parsed and were left out of path building.
    pub skipped: Vec<String>,
}

pub fn load_inputs(t: &TrustArgs) -> anyhow::Result<Inputs> {
    let mut opts = ValidationOptions::default();
    if let Some(at) = &t.at {
        opts.time = Time::from_rfc3339(at)
            .map_err(|e| anyhow::anyhow!("--at {at:?}: {e} (use e.g. 2030-01-01T00:00:00Z)"))?;
    }
    if t.legacy_algorithms {
        opts.algorithms = pki::sig::AlgorithmPolicy::legacy();
    }
    opts.anchor_constraints = t.anchor_mode.into();
    opts.allow_expired_anchors = t.allow_expired_anchor;
    // Missing revocation data fails closed unless the user says otherwise.
    let source = match (t.revocation_source, t.ocsp || t.ocsp_url.is_some()) {
        (Some(s), _) => s.into(),
        (None, true) => RevocationSourceConfig::Either,
        (None, false) => RevocationSourceConfig::Crl,
    };
    let mut config = t.files.config(RevocationConfig {
        mode: t.revocation.map_or(RevocationCheck::Require, Into::into),
        grace_secs: t.crl_grace,
        source,
        ocsp_max_age_secs: t.ocsp_max_age,
        ..RevocationConfig::default()
    });
    if t.fetch_crls {
        config.fetch = Some(FetchConfig::default());
    }
    config.policy_set = t.policy_set;
    config.profile = match t.rfc5280_profile {
        Rfc5280ProfileArg::Strict => pki::profile::Profile::Strict,
        Rfc5280ProfileArg::Lenient => pki::profile::Profile::Lenient,
    };
    if source != RevocationSourceConfig::Crl || t.ocsp || t.ocsp_url.is_some() {
        if let Some(u) = &t.ocsp_url {
            if !u.to_ascii_lowercase().starts_with("http://") {
                anyhow::bail!("--ocsp-url {u:?}: only http:// responders are asked");
            }
        }
        config.ocsp = Some(OcspConfig {
            responder_url: t.ocsp_url.clone(),
            method: match t.ocsp_method {
                OcspMethodArg::Auto => RequestMethod::Auto,
                OcspMethodArg::Get => RequestMethod::Get,
                OcspMethodArg::Post => RequestMethod::Post,
            },
            hash: match t.ocsp_hash {
                OcspHashArg::Sha1 => CertIdHash::Sha1,
                OcspHashArg::Sha256 => CertIdHash::Sha256,
            },
            nonce: match t.ocsp_nonce {
                OcspNonceArg::Prefer => NoncePolicy::Prefer,
                OcspNonceArg::Require => NoncePolicy::Require,
                OcspNonceArg::Off => NoncePolicy::Off,
            },
            ..OcspConfig::default()
        });
    }
    let (trust, skipped) = load_trust_reporting(&config)?;
    opts.revocation = trust.revocation.clone();
    opts.policy_set = trust.policy_set;
    opts.profile = trust.profile;
    Ok(Inputs {
        trust,
        opts,
        skipped,
    })
}
