//! The trust arguments of the commands that validate (`pki verify*`,
//! `auth`): the files, revocation and OCSP options, read into a
//! [`pki::trust::Trust`] and [`ValidationOptions`].

use clap::Args;
use pki::fetch::FetchConfig;
use pki::ocsp::client::{NoncePolicy, OcspConfig, RequestMethod};
use pki::ocsp::CertIdHash;
use pki::options::AnchorConstraints;
use pki::profile::Profile;
use pki::time::Time;
use pki::trust::{RevocationCheck, RevocationConfig, RevocationSourceConfig, Trust, TrustConfig};
use pki::validate::ValidationOptions;
use std::path::PathBuf;

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
    revocation: Option<RevocationCheck>,
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
    revocation_source: Option<RevocationSourceConfig>,
    /// Ask this OCSP responder instead of the one each certificate names.
    #[arg(long, value_name = "URL")]
    ocsp_url: Option<String>,
    /// How OCSP requests are sent: auto (GET when the request fits in the
    /// URL, else POST), get or post.
    #[arg(long, value_enum, default_value = "auto")]
    ocsp_method: RequestMethod,
    /// The hash of the CertID in OCSP requests.
    #[arg(long, value_enum, default_value = "sha1")]
    ocsp_hash: CertIdHash,
    /// An OCSP answer without our nonce: prefer (accepted: pre-produced
    /// answers), require (refused) or off (no nonce is sent).
    #[arg(long, value_enum, default_value = "prefer")]
    ocsp_nonce: NoncePolicy,
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
    anchor_mode: AnchorConstraints,
    /// Accept a trust anchor outside its validity period (constrained mode;
    /// otherwise an expired anchor makes every path through it INVALID).
    #[arg(long)]
    allow_expired_anchor: bool,
    /// `strict` refuses certificates and CRLs that break a MUST of the
    /// RFC 5280 profile, each with its own code; `lenient` applies RFC 5280
    /// path processing only, for a known non-conforming issuer. (`--profile`
    /// is the FIPS 201 profile.)
    #[arg(long, value_enum, default_value = "strict", value_name = "PROFILE")]
    rfc5280_profile: Profile,
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
    opts.anchor_constraints = t.anchor_mode;
    opts.allow_expired_anchors = t.allow_expired_anchor;
    // Missing revocation data fails closed unless the user says otherwise.
    let source = match (t.revocation_source, t.ocsp || t.ocsp_url.is_some()) {
        (Some(s), _) => s,
        (None, true) => RevocationSourceConfig::Either,
        (None, false) => RevocationSourceConfig::Crl,
    };
    let mut config = t.files.config(RevocationConfig {
        mode: t.revocation.unwrap_or(RevocationCheck::Require),
        grace_secs: t.crl_grace,
        source,
        ocsp_max_age_secs: t.ocsp_max_age,
        ..RevocationConfig::default()
    });
    if t.fetch_crls {
        config.fetch = Some(FetchConfig::default());
    }
    config.policy_set = t.policy_set;
    config.profile = t.rfc5280_profile;
    if source != RevocationSourceConfig::Crl || t.ocsp || t.ocsp_url.is_some() {
        if let Some(u) = &t.ocsp_url {
            if !u.to_ascii_lowercase().starts_with("http://") {
                anyhow::bail!("--ocsp-url {u:?}: only http:// responders are asked");
            }
        }
        config.ocsp = Some(OcspConfig {
            responder_url: t.ocsp_url.clone(),
            method: t.ocsp_method,
            hash: t.ocsp_hash,
            nonce: t.ocsp_nonce,
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
