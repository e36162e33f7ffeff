//! `pivgate pki ...` subcommands: verify certificate paths (RFC 5280 with
//! the FIPS 201 profiles), verify CHUID signatures, and run a test PKI
//! (init, issue-card, revoke). The work is done by the `pki` crate.

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use const_oid::ObjectIdentifier;
use pki::fetch::{fetch_for_path, CrlFetcher, FetchConfig};
use pki::fips201::{
    check_bindings, validate_profile, verify_chuid, CertProfile, Fips201Error, PivValidated,
};
use pki::input::{read_bounded, InputKind};
use pki::ocsp::client::{NoncePolicy, OcspClient, OcspConfig, RequestMethod};
use pki::ocsp::CertIdHash;
use pki::options::AnchorConstraints;
use pki::revocation_set::RevocationSet;
use pki::time::Time;
use pki::trust::{RevocationCheck, RevocationConfig, RevocationSourceConfig, Trust, TrustConfig};
use pki::validate::ValidationOptions;
use pki_issue::{CardOptions, CrlReason, KeyAlgorithm, TestPki, TestPkiOptions};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Subcommand)]
pub enum PkiCommand {
    /// Validate a certificate path (RFC 5280 + FIPS 201 profile).
    ///
    /// Prints VALID with the path (leaf first, trust anchor last) and the
    /// policy sets, or INVALID with the reason. Exit status: 0 valid,
    /// 1 invalid, 2 bad usage or unreadable input.
    Verify(VerifyArgs),
    /// Verify the issuer signature of a CHUID (raw bytes as read from the
    /// card, with or without the 53 container) and validate its content
    /// signer. Exit status as for `verify`.
    VerifyChuid(VerifyChuidArgs),
    /// Verify a Security Object (SP 800-73-4 §3.1.6): its signature by the
    /// content signer and the hash of each data group against the containers
    /// given. Exit status as for `verify`.
    VerifySecurityObject(crate::object_cmd::VerifySecurityObjectArgs),
    /// Verify the signature of a biometric container (Cardholder
    /// Fingerprints or Facial Image, SP 800-76-2 §9.2.2) and its card
    /// identifiers. Exit status as for `verify`.
    VerifyBiometric(crate::object_cmd::VerifyBiometricArgs),
    /// Create a test PKI in a directory: root CA, an issuing CA asserting
    /// the FIPS 201 policies, a CHUID content signer and empty CRLs.
    Init(InitArgs),
    /// Issue one card's credentials from a test PKI: keys and certificates
    /// for slots 9A, 9C, 9D and 9E, and a signed CHUID.
    IssueCard(IssueCardArgs),
    /// Issue a device certificate and key from a test PKI: a door reader's
    /// (TLS client authentication) or, with --server, the door service's
    /// (TLS server authentication, with its DNS names and IP addresses).
    IssueDevice(crate::remote_cmd::IssueDeviceArgs),
    /// Revoke a certificate issued by a test PKI (re-signs the CRL of its
    /// issuer with the next CRL number).
    Revoke(RevokeArgs),
    /// Re-issue a test PKI's CRLs with a fresh thisUpdate/nextUpdate (same
    /// entries, next CRL numbers), e.g. before the old ones go stale.
    RefreshCrls(RefreshArgs),
    /// Write a bridged test PKI (a bridge cross-certified both ways with
    /// agency roots, SSP CAs, a second bridge, old and expired
    /// cross-certificates, unrelated roots) as PEM files: anchors/, pool.pem,
    /// crls.pem, leaves/ and leaves.tsv with each end entity's expected outcome.
    Mesh(MeshArgs),
}

#[derive(Args)]
pub struct MeshArgs {
    /// Where to write the mesh.
    out: PathBuf,
    /// About 60 CA certificates instead of over 300.
    #[arg(long)]
    small: bool,
}

#[derive(Args)]
pub struct RefreshArgs {
    /// The test PKI directory.
    #[arg(long)]
    pki: PathBuf,
}

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
/// fully parses every certificate so a damaged one is reported here (exit 2),
/// not as an INVALID path.
pub fn load_trust(config: &TrustConfig) -> anyhow::Result<Trust> {
    let trust = config.load()?;
    trust.check_certificates()?;
    Ok(trust)
}

#[derive(Args)]
pub struct TrustArgs {
    #[command(flatten)]
    files: TrustFiles,
    /// After a path to a trust anchor is found, download the CRLs of its
    /// certificates from their http:// CRL distribution points (at most 4
    /// per certificate, 10 s in all; redirects only within the same
    /// server). A certificate without a path causes no download.
    #[arg(long)]
    fetch_crls: bool,
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
    /// Print the result as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    trust: TrustArgs,
    /// user-initial-policy-set OID (repeatable) [default: anyPolicy, or the
    /// profile's policies when a profile is chosen].
    #[arg(long, value_name = "OID")]
    policy: Vec<String>,
    /// Require an explicit policy (initial-explicit-policy).
    #[arg(long)]
    explicit_policy: bool,
    /// Refuse policy mappings (initial-policy-mapping-inhibit).
    #[arg(long)]
    inhibit_policy_mapping: bool,
    /// Do not let anyPolicy match (initial-any-policy-inhibit).
    #[arg(long)]
    inhibit_any_policy: bool,
    /// Require this extended key usage in the leaf (when it has the extension).
    #[arg(long, value_name = "OID")]
    eku: Option<String>,
    /// FIPS 201 profile the leaf must satisfy.
    #[arg(long, value_enum, default_value = "none")]
    profile: ProfileArg,
    /// Also verify this CHUID (binary, as read from the card): its issuer
    /// signature, and that the certificate belongs to the same card (card
    /// UUID / FASC-N) and does not outlive it.
    #[arg(long, value_name = "FILE")]
    chuid: Option<PathBuf>,
    /// The certificate to validate (PEM or DER).
    leaf: PathBuf,
}

#[derive(Args)]
pub struct VerifyChuidArgs {
    #[command(flatten)]
    trust: TrustArgs,
    /// The CHUID (binary, as read from the card).
    chuid: PathBuf,
}

#[derive(Args)]
pub struct InitArgs {
    /// Directory to create the PKI in (must not already hold one).
    #[arg(long)]
    dir: PathBuf,
    /// Key algorithm of the CAs and the content signer.
    #[arg(long, default_value = "p256", value_parser = parse_alg)]
    alg: KeyAlgorithm,
    /// Organisation name in the CA subjects.
    #[arg(long, default_value = "pivgate Test PKI")]
    org: String,
    /// Base URL the certificates name for the issuers' CRLs and `.p7c`
    /// files: CRL distribution points BASE/intermediate.crl and
    /// BASE/root.crl, authorityInfoAccess caIssuers BASE/intermediate.p7c and
    /// BASE/root.p7c. The files are written to DIR/publish/ to be served
    /// there [default: http://localhost:8089].
    #[arg(long, visible_alias = "publish-url", value_name = "URL")]
    crl_url: Option<String>,
    /// Leave the CRL distribution points and caIssuers URLs out.
    #[arg(long, conflicts_with = "crl_url")]
    no_urls: bool,
    /// OCSP responder URL put in authorityInfoAccess (id-ad-ocsp).
    #[arg(long, value_name = "URL")]
    ocsp_url: Option<String>,
    /// Certificate policy OIDs the certificates assert: production
    /// (id-fpki-common-*, 2.16.840.1.101.3.2.1.3.x) or test (the Federal
    /// PKI's test arc 2.16.840.1.101.3.2.1.48.x); kept in the PKI's manifest
    /// for every later issue.
    #[arg(long, default_value = "production", value_name = "SET")]
    policy_set: pki_issue::PolicySet,
    /// CRL lifetime in days (nextUpdate - thisUpdate).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(i64).range(1..=3650))]
    crl_days: i64,
}

#[derive(Args)]
pub struct IssueCardArgs {
    /// The test PKI directory (from `pivgate pki init`).
    #[arg(long)]
    pki: PathBuf,
    /// Where to write the card credentials.
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    spec: CardSpec,
}

/// What a card issued from a test PKI looks like.
#[derive(Args)]
pub struct CardSpec {
    /// Key algorithm of the four slots.
    #[arg(long, default_value = "p256", value_parser = parse_alg)]
    alg: KeyAlgorithm,
    /// FASC-N: 32 digits (agency, system, credential, series, issue, person,
    /// org category, org id, association) or 50 hex digits of the encoding
    /// [default: random under agency 9999].
    #[arg(long, value_name = "DIGITS|HEX")]
    fascn: Option<String>,
    /// Card UUID [default: random].
    #[arg(long)]
    uuid: Option<String>,
    /// Card expiration date, YYYY-MM-DD [default: five years from today].
    #[arg(long, value_name = "YYYY-MM-DD")]
    expires: Option<String>,
    /// Cardholder name for the 9A, 9C and 9D subjects.
    #[arg(long, default_value = "Test Cardholder")]
    name: String,
    /// Mark the 9A and 9E certificates interim (pivInterim
    /// interim_indicator TRUE: background investigation not complete).
    #[arg(long)]
    interim: bool,
}

impl CardSpec {
    /// Whether every option is at its default (none was given).
    pub fn is_default(&self) -> bool {
        self.alg == KeyAlgorithm::P256
            && self.fascn.is_none()
            && self.uuid.is_none()
            && self.expires.is_none()
            && self.name == "Test Cardholder"
            && !self.interim
    }

    /// The issuance options these arguments ask for.
    pub fn options(&self) -> anyhow::Result<CardOptions> {
        let fascn = self
            .fascn
            .as_deref()
            .map(piv::fascn::Fascn::parse_text)
            .transpose()
            .context("--fascn")?;
        let uuid = match &self.uuid {
            Some(u) => Some(piv::chuid::parse_uuid(u).with_context(|| {
                format!("--uuid {u:?} is not a UUID (e.g. 3f2504e0-4f89-41d3-9a0c-0305e82c3301)")
            })?),
            None => None,
        };
        let expires = self
            .expires
            .as_deref()
            .map(piv::chuid::ChuidDate::parse)
            .transpose()
            .context("--expires")?;
        Ok(CardOptions {
            algorithm: self.alg,
            fascn,
            uuid,
            expires,
            cardholder: self.name.clone(),
            interim: self.interim,
        })
    }
}

#[derive(Args)]
pub struct RevokeArgs {
    /// The test PKI directory.
    #[arg(long)]
    pki: PathBuf,
    /// Revocation reason.
    #[arg(long, value_enum)]
    reason: Option<ReasonArg>,
    /// The certificate to revoke (PEM or DER).
    cert: PathBuf,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ReasonArg {
    Unspecified,
    KeyCompromise,
    CaCompromise,
    AffiliationChanged,
    Superseded,
    CessationOfOperation,
    CertificateHold,
    PrivilegeWithdrawn,
}

impl From<ReasonArg> for CrlReason {
    fn from(r: ReasonArg) -> CrlReason {
        match r {
            ReasonArg::Unspecified => CrlReason::Unspecified,
            ReasonArg::KeyCompromise => CrlReason::KeyCompromise,
            ReasonArg::CaCompromise => CrlReason::CaCompromise,
            ReasonArg::AffiliationChanged => CrlReason::AffiliationChanged,
            ReasonArg::Superseded => CrlReason::Superseded,
            ReasonArg::CessationOfOperation => CrlReason::CessationOfOperation,
            ReasonArg::CertificateHold => CrlReason::CertificateHold,
            ReasonArg::PrivilegeWithdrawn => CrlReason::PrivilegeWithdrawn,
        }
    }
}

fn parse_alg(s: &str) -> Result<KeyAlgorithm, String> {
    s.parse::<KeyAlgorithm>().map_err(|e| e.to_string())
}

fn parse_oid(s: &str) -> anyhow::Result<ObjectIdentifier> {
    ObjectIdentifier::new(s).map_err(|e| anyhow::anyhow!("{s:?} is not an object identifier: {e}"))
}

pub fn run(cmd: PkiCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PkiCommand::Verify(a) => verify(a),
        PkiCommand::VerifyChuid(a) => verify_chuid_cmd(a),
        PkiCommand::VerifySecurityObject(a) => crate::object_cmd::verify_security_object_cmd(a),
        PkiCommand::VerifyBiometric(a) => crate::object_cmd::verify_biometric_cmd(a),
        PkiCommand::Init(a) => init(a),
        PkiCommand::IssueCard(a) => issue_card(a),
        PkiCommand::IssueDevice(a) => crate::remote_cmd::issue_device(a),
        PkiCommand::Revoke(a) => revoke(a),
        PkiCommand::RefreshCrls(a) => refresh_crls(a),
        PkiCommand::Mesh(a) => {
            use pki_issue::mesh::{Mesh, MeshOptions};
            let opts = if a.small {
                MeshOptions::small()
            } else {
                MeshOptions::default()
            };
            let mesh = Mesh::generate(&opts)?;
            mesh.write(&a.out)?;
            println!(
                "wrote {} CA certificates, {} CRLs and {} end entities to {} (validation time {})",
                mesh.cas().len(),
                mesh.crls().len(),
                mesh.leaves().len(),
                a.out.display(),
                Time(mesh.time())
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Reads one certificate in PEM or DER and checks that it parses.
fn read_certificate(path: &Path) -> anyhow::Result<Vec<u8>> {
    let der = read_x509(path)?;
    pki::cert::Cert::from_der(der.clone())
        .with_context(|| format!("{} is not an X.509 certificate", path.display()))?;
    Ok(der)
}

/// Reads one certificate in PEM or DER and checks that it has the structure of an X.509
/// certificate; whether its contents follow RFC 5280 is for validation to say (a certificate
/// that breaks a rule is INVALID, not unreadable).
fn read_x509(path: &Path) -> anyhow::Result<Vec<u8>> {
    let data = read_bounded(path, InputKind::Certificate)?;
    let der = if data.trim_ascii_start().starts_with(b"-----BEGIN") {
        pki::pem::decode("CERTIFICATE", &data)
            .with_context(|| format!("{} is not a PEM or DER certificate", path.display()))?
    } else {
        data
    };
    if !pki::cert::is_certificate_structure(&der) {
        // The parser's own account of what is wrong.
        pki::cert::Cert::from_der(der.clone())
            .with_context(|| format!("{} is not an X.509 certificate", path.display()))?;
    }
    Ok(der)
}

/// The trust and base options of `verify` and `verify-chuid`.
pub(crate) struct Inputs {
    pub(crate) trust: Trust,
    pub(crate) opts: ValidationOptions,
}

pub(crate) fn load_inputs(t: &TrustArgs) -> anyhow::Result<Inputs> {
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
    let trust = load_trust(&config)?;
    opts.revocation = trust.revocation.clone();
    opts.policy_set = trust.policy_set;
    Ok(Inputs { trust, opts })
}

/// With --fetch-crls, the CRLs given plus those downloaded for the
/// certificates of `leaf`'s path to a trust anchor. Download failures are
/// reported on stderr (the validation then fails closed in require mode).
fn fetched_crls(inputs: &Inputs, leaf: &[u8]) -> Option<RevocationSet> {
    let t = &inputs.trust;
    let fetcher = CrlFetcher::new(t.fetch?);
    let fetched = fetch_for_path(&fetcher, &t.store, leaf, &[], &t.crls, &inputs.opts);
    for e in &fetched.errors {
        eprintln!("warning: {e}");
    }
    Some(fetched.crls)
}

/// With OCSP on, `crls` plus the answers of the responders of the
/// certificates of `leaf`'s path to a trust anchor. Failed requests are
/// reported on stderr (the validation then decides what they mean).
fn with_ocsp(inputs: &Inputs, leaf: &[u8], crls: &RevocationSet) -> Option<RevocationSet> {
    let t = &inputs.trust;
    let client = OcspClient::new(t.ocsp.clone()?);
    let got = pki::ocsp::client::fetch_for_path(&client, &t.store, leaf, &[], crls, &inputs.opts);
    for e in &got.errors {
        eprintln!("warning: {e}");
    }
    Some(got.crls)
}

pub(crate) fn path_json(v: &PivValidated) -> serde_json::Value {
    let chain: Vec<_> = v
        .path
        .chain()
        .iter()
        .map(|c| {
            json!({
                "subject": c.subject_display(),
                "not_after": c.not_after.to_string(),
                "sha256": hex::encode(pki::cache::leaf_digest(c.der())),
            })
        })
        .collect();
    let oids = |s: &[ObjectIdentifier]| s.iter().map(|o| o.to_string()).collect::<Vec<_>>();
    json!({
        "valid": true,
        "profile": v.profile.name(),
        "path": chain,
        "authorities_constrained_policy_set": oids(v.path.authorities_constrained_policy_set()),
        "user_constrained_policy_set": oids(v.path.user_constrained_policy_set()),
        "valid_until": v.path.valid_until().to_string(),
        "fascn": v.identity.fascn.as_ref().map(|f| f.digits()),
        "card_uuid": v.identity.uuid_urn(),
    })
}

pub(crate) fn print_valid(v: &PivValidated) {
    println!("VALID");
    println!("profile: {}", v.profile);
    println!("path (leaf first, trust anchor last):");
    let n = v.path.chain().len();
    for (i, c) in v.path.chain().iter().enumerate() {
        let note = if i + 1 == n { " (trust anchor)" } else { "" };
        println!("  {i}: {}{note}", c.subject_display());
    }
    let join = |s: &[ObjectIdentifier]| {
        if s.is_empty() {
            "(empty)".to_string()
        } else {
            s.iter().map(policy_name).collect::<Vec<_>>().join(", ")
        }
    };
    println!(
        "authorities-constrained policy set: {}",
        join(v.path.authorities_constrained_policy_set())
    );
    println!(
        "user-constrained policy set: {}",
        join(v.path.user_constrained_policy_set())
    );
    println!("valid until: {}", v.path.valid_until());
    if let Some(f) = &v.identity.fascn {
        println!(
            "FASC-N: {f} ({}, {})",
            f.organizational_category_name(),
            f.association_category_name()
        );
    }
    if let Some(u) = v.identity.uuid_urn() {
        println!("card UUID: {u}");
    }
}

fn policy_name(o: &ObjectIdentifier) -> String {
    use pki::fips201::oids;
    let name = match *o {
        x if x == pki::policy::ANY_POLICY => "anyPolicy",
        x if x == oids::FPKI_COMMON_AUTHENTICATION => "id-fpki-common-authentication",
        x if x == oids::FPKI_COMMON_CARD_AUTH => "id-fpki-common-cardAuth",
        x if x == oids::FPKI_COMMON_HARDWARE => "id-fpki-common-hardware",
        x if x == oids::FPKI_COMMON_PIV_CONTENT_SIGNING => "id-fpki-common-piv-contentSigning",
        x if x == oids::PIVI_HARDWARE => "id-fpki-certpcy-pivi-hardware",
        x if x == oids::PIVI_CARD_AUTH => "id-fpki-certpcy-pivi-cardAuth",
        x if x == oids::PIVI_CONTENT_SIGNING => "id-fpki-certpcy-pivi-contentSigning",
        _ => return o.to_string(),
    };
    format!("{o} ({name})")
}

pub(crate) fn print_invalid(json: bool, kind: &str, code: &str, reason: &str) -> ExitCode {
    if json {
        println!(
            "{}",
            json!({ "valid": false, "kind": kind, "code": code, "error": reason })
        );
    } else {
        println!("INVALID: {reason}");
    }
    ExitCode::from(1)
}

fn error_kind(e: &Fips201Error) -> &'static str {
    match e {
        Fips201Error::Path(_) => "path",
        Fips201Error::Profile(_) => "profile",
    }
}

fn verify(a: VerifyArgs) -> anyhow::Result<ExitCode> {
    let leaf = read_x509(&a.leaf)?;
    let chuid = match &a.chuid {
        Some(p) => Some(read_bounded(p, InputKind::Chuid)?),
        None => None,
    };
    let mut inputs = load_inputs(&a.trust)?;
    if !a.policy.is_empty() {
        inputs.opts.initial_policy_set = a
            .policy
            .iter()
            .map(|s| parse_oid(s))
            .collect::<anyhow::Result<_>>()?;
    }
    inputs.opts.initial_explicit_policy = a.explicit_policy;
    inputs.opts.initial_policy_mapping_inhibit = a.inhibit_policy_mapping;
    inputs.opts.initial_any_policy_inhibit = a.inhibit_any_policy;
    if let Some(e) = &a.eku {
        inputs.opts.required_eku = Some(parse_oid(e)?);
    }
    let fetched = fetched_crls(&inputs, &leaf);
    let crls = fetched.as_ref().unwrap_or(&inputs.trust.crls);
    let answered = with_ocsp(&inputs, &leaf, crls);
    let crls = answered.as_ref().unwrap_or(crls);
    let store = &inputs.trust.store;
    let result = validate_profile(store, &leaf, &[], crls, &inputs.opts, a.profile.into());
    let v = match result {
        Ok(v) => v,
        Err(e) => {
            let mut reason = e.to_string();
            if matches!(
                e,
                Fips201Error::Path(pki::validate::ValidationError::RevocationUnavailable { .. })
            ) && !a.trust.files.has_crls()
                && !a.trust.fetch_crls
                && inputs.trust.ocsp.is_none()
            {
                reason.push_str(
                    " (no CRLs were given: add --crl FILE or --fetch-crls, or --revocation off to skip revocation checking)",
                );
            }
            return Ok(print_invalid(
                a.trust.json,
                error_kind(&e),
                e.code(),
                &reason,
            ));
        }
    };
    warn_expired_anchor(&inputs.opts, v.path.anchor());
    let chuid = match &chuid {
        Some(bytes) => {
            let verified = match verify_chuid(store, bytes, &[], crls, &inputs.opts) {
                Ok(c) => c,
                Err(e) => {
                    return Ok(print_invalid(
                        a.trust.json,
                        "chuid",
                        e.code(),
                        &e.to_string(),
                    ))
                }
            };
            if let Err(e) = check_bindings(&v, &verified.chuid) {
                return Ok(print_invalid(
                    a.trust.json,
                    "binding",
                    e.code(),
                    &e.to_string(),
                ));
            }
            Some(verified)
        }
        None => None,
    };
    if a.trust.json {
        let mut j = path_json(&v);
        if let Some(c) = &chuid {
            j["chuid"] = json!({
                "signature": "valid",
                "signer": c.signer.path.leaf().subject_display(),
                "card_uuid": c.chuid.card_uuid_urn(),
                "expires": c.chuid.expiration.to_string(),
                "digest_form": c.digest_form.as_str(),
                "signer_dn": c.signer_dn.as_str(),
                "bound": true,
            });
        }
        println!("{j}");
    } else {
        print_valid(&v);
        if let Some(c) = &chuid {
            println!(
                "CHUID: signature valid (signer {}); certificate bound to card {} (expires {})",
                c.signer.path.leaf().subject_display(),
                c.chuid.card_uuid_urn(),
                c.chuid.expiration
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Says on stderr when a path was accepted through an anchor outside its validity period
/// only because the operator allowed it.
fn warn_expired_anchor(opts: &ValidationOptions, anchor: &pki::cert::Cert) {
    if !opts.allow_expired_anchors || opts.anchor_constraints != AnchorConstraints::Enforce {
        return;
    }
    if opts.time > anchor.not_after {
        eprintln!(
            "warning: trust anchor {} expired at {}; accepted because of --allow-expired-anchor",
            anchor.subject_display(),
            anchor.not_after
        );
    } else if opts.time < anchor.not_before {
        eprintln!(
            "warning: trust anchor {} is not valid before {}; accepted because of --allow-expired-anchor",
            anchor.subject_display(),
            anchor.not_before
        );
    }
}

fn verify_chuid_cmd(a: VerifyChuidArgs) -> anyhow::Result<ExitCode> {
    let chuid = read_bounded(&a.chuid, InputKind::Chuid)?;
    let inputs = load_inputs(&a.trust)?;
    let t = &inputs.trust;
    match verify_chuid(&t.store, &chuid, &[], &t.crls, &inputs.opts) {
        Ok(v) => {
            let fascn = v.chuid.fascn().map(|f| f.to_string()).ok();
            if a.trust.json {
                let mut j = path_json(&v.signer);
                j["card_uuid"] = json!(v.chuid.card_uuid_urn());
                j["fascn"] = json!(fascn);
                j["expires"] = json!(v.chuid.expiration.to_string());
                j["digest_form"] = json!(v.digest_form.as_str());
                j["signer_dn"] = json!(v.signer_dn.as_str());
                println!("{j}");
            } else {
                println!("VALID CHUID signature");
                println!("message digest: {}", v.digest_form.describe());
                println!("pivSigner-DN: {}", signer_dn_text(v.signer_dn));
                println!("card UUID: {}", v.chuid.card_uuid_urn());
                if let Some(f) = fascn {
                    println!("FASC-N: {f}");
                }
                println!("card expires: {}", v.chuid.expiration);
                println!("signer:");
                print_valid(&v.signer);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Ok(print_invalid(
            a.trust.json,
            "chuid",
            e.code(),
            &e.to_string(),
        )),
    }
}

/// The pivSigner-DN outcome for people.
pub(crate) fn signer_dn_text(c: pki::fips201::SignerDnCheck) -> &'static str {
    match c {
        pki::fips201::SignerDnCheck::Matches => "names the signer",
        pki::fips201::SignerDnCheck::Absent => {
            "absent (SP 800-73-4 requires it; accepted, the signer is identified by its certificate)"
        }
    }
}

fn init(a: InitArgs) -> anyhow::Result<ExitCode> {
    let pki = TestPki::init(
        &a.dir,
        TestPkiOptions {
            algorithm: a.alg,
            organization: a.org,
            crl_base_url: if a.no_urls {
                None
            } else {
                Some(
                    a.crl_url
                        .unwrap_or_else(|| pki_issue::DEFAULT_PUBLICATION_URL.to_string()),
                )
            },
            ocsp_url: a.ocsp_url,
            policy_set: a.policy_set,
            crl_validity_days: a.crl_days,
            ..Default::default()
        },
    )?;
    let subject = |der: &[u8]| {
        pki::cert::Cert::from_der(der.to_vec())
            .map(|c| c.subject_display().to_string())
            .unwrap_or_default()
    };
    println!("test PKI created in {}", a.dir.display());
    println!("  root CA:        {} (root.pem)", subject(pki.root_der()));
    println!(
        "  issuing CA:     {} (intermediate.pem)",
        subject(pki.intermediate_der())
    );
    println!(
        "  content signer: {} (content-signer.pem)",
        subject(pki.content_signer_der())
    );
    println!("  CRLs:           root.crl.pem, intermediate.crl.pem");
    println!("  policies:       {}", pki.options().policy_set);
    if let Some(base) = &pki.options().crl_base_url {
        println!(
            "  published:      {}/ (serve it at {base}: root.crl, intermediate.crl, root.p7c, intermediate.p7c)",
            a.dir.join(pki_issue::PUBLISH_DIR).display()
        );
    }
    println!("  private keys:   *.key.pem (PKCS#8, mode 0600)");
    Ok(ExitCode::SUCCESS)
}

fn issue_card(a: IssueCardArgs) -> anyhow::Result<ExitCode> {
    let pki = TestPki::load(&a.pki)
        .with_context(|| format!("loading the test PKI in {}", a.pki.display()))?;
    let card = pki.issue_card(&a.spec.options()?)?;
    card.save(&a.out)?;
    println!("card credentials written to {}", a.out.display());
    println!("  FASC-N:    {}", card.fascn);
    println!("  card UUID: {}", piv::chuid::uuid_urn(&card.uuid));
    println!("  expires:   {}", card.expires);
    for s in &card.slots {
        println!(
            "  slot {:02X}:   {} key, slot-{:02x}.pem + slot-{:02x}.key.pem",
            s.slot, s.algorithm, s.slot, s.slot
        );
    }
    println!(
        "  CHUID:     chuid.bin ({} bytes, signed)",
        card.chuid.len()
    );
    crate::object_cmd::print_issued_containers(&card);
    Ok(ExitCode::SUCCESS)
}

fn revoke(a: RevokeArgs) -> anyhow::Result<ExitCode> {
    let cert = read_certificate(&a.cert)?;
    let mut pki = TestPki::load(&a.pki)
        .with_context(|| format!("loading the test PKI in {}", a.pki.display()))?;
    pki.revoke(&cert, a.reason.map(Into::into))?;
    let subject = pki::cert::Cert::from_der(cert)
        .map(|c| c.subject_display().to_string())
        .unwrap_or_default();
    println!("revoked {subject}; CRLs in {} re-signed", a.pki.display());
    Ok(ExitCode::SUCCESS)
}

fn refresh_crls(a: RefreshArgs) -> anyhow::Result<ExitCode> {
    let mut pki = TestPki::load(&a.pki)
        .with_context(|| format!("loading the test PKI in {}", a.pki.display()))?;
    pki.refresh_crls()?;
    let next = |der: &[u8]| {
        pki::crl::Crl::from_der(der.to_vec())
            .ok()
            .and_then(|c| c.next_update)
            .map(|t| t.to_string())
            .unwrap_or_else(|| "(none)".into())
    };
    println!(
        "CRLs in {} re-issued; next update {} (root), {} (issuing CA)",
        a.pki.display(),
        next(pki.root_crl_der()),
        next(pki.intermediate_crl_der())
    );
    Ok(ExitCode::SUCCESS)
}
