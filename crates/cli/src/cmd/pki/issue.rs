//! `pivgate pki init`, `issue-card`, `issue-device`, `revoke` and
//! `refresh-crls`: a test PKI and what it issues.

use crate::args::card::{parse_alg, CardSpec};
use anyhow::Context;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use pki::cert_file::read_certificate;
use pki_issue::report::{crl_reason, CRL_REASONS};
use pki_issue::{CrlReason, DeviceOptions, DeviceRole, KeyAlgorithm, TestPki, TestPkiOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct RefreshArgs {
    /// The test PKI directory.
    #[arg(long)]
    pki: PathBuf,
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

#[derive(Args)]
pub struct RevokeArgs {
    /// The test PKI directory.
    #[arg(long)]
    pki: PathBuf,
    /// Revocation reason.
    #[arg(long, value_parser = PossibleValuesParser::new(CRL_REASONS.map(|r| r.0))
        .try_map(|n| crl_reason(&n)))]
    reason: Option<CrlReason>,
    /// The certificate to revoke (PEM or DER).
    cert: PathBuf,
}

pub fn init(a: InitArgs) -> anyhow::Result<ExitCode> {
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
    print!("{}", pki_issue::report::init_text(&pki, &a.dir));
    Ok(ExitCode::SUCCESS)
}

pub fn issue_card(a: IssueCardArgs) -> anyhow::Result<ExitCode> {
    let pki = TestPki::load(&a.pki)
        .with_context(|| format!("loading the test PKI in {}", a.pki.display()))?;
    let card = pki.issue_card(&a.spec.options()?)?;
    card.save(&a.out)?;
    print!("{}", pki_issue::report::card_text(&card, &a.out));
    Ok(ExitCode::SUCCESS)
}

pub fn revoke(a: RevokeArgs) -> anyhow::Result<ExitCode> {
    let cert = read_certificate(&a.cert)?;
    let mut pki = TestPki::load(&a.pki)
        .with_context(|| format!("loading the test PKI in {}", a.pki.display()))?;
    pki.revoke(&cert, a.reason)?;
    println!("{}", pki_issue::report::revoked_line(&cert, &a.pki));
    Ok(ExitCode::SUCCESS)
}

pub fn refresh_crls(a: RefreshArgs) -> anyhow::Result<ExitCode> {
    let mut pki = TestPki::load(&a.pki)
        .with_context(|| format!("loading the test PKI in {}", a.pki.display()))?;
    pki.refresh_crls()?;
    println!("{}", pki_issue::report::refreshed_line(&pki, &a.pki));
    Ok(ExitCode::SUCCESS)
}

#[derive(Args)]
pub struct IssueDeviceArgs {
    /// The test PKI directory (from `pivgate pki init`).
    #[arg(long, value_name = "DIR")]
    pki: PathBuf,
    /// The device's name: its certificate's subject common name (the name a
    /// service binds a reader to, or the service's host name).
    #[arg(long, required_unless_present = "site")]
    name: Option<String>,
    /// A site's certificate for its link to the central (clientAuth): the
    /// site's name as the URI `urn:pivgate:site:SITE` and the common name.
    #[arg(long, value_name = "SITE", conflicts_with_all = ["name", "server"])]
    site: Option<String>,
    /// Where to write NAME.pem (certificate and issuing CA), NAME.key.pem
    /// and ca.pem (the root, for the other end's --ca).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// A certificate for the service (serverAuth) instead of a reader
    /// (clientAuth).
    #[arg(long)]
    server: bool,
    /// A DNS name for the service certificate (repeatable; default: NAME).
    #[arg(long, value_name = "NAME", requires = "server")]
    dns: Vec<String>,
    /// An IP address for the service certificate (repeatable).
    #[arg(long, value_name = "ADDR", requires = "server")]
    ip: Vec<std::net::IpAddr>,
}

pub fn issue_device(a: IssueDeviceArgs) -> anyhow::Result<ExitCode> {
    let pki = TestPki::load(&a.pki)
        .with_context(|| format!("loading the test PKI in {}", a.pki.display()))?;
    if let Some(site) = &a.site {
        let files = pki.write_site(site, &a.out)?;
        println!(
            "issued site certificate {:?} ({}): {}, {}, CA {}",
            site,
            pki_issue::site_uri(site),
            files.cert.display(),
            files.key.display(),
            files.ca.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let name = a.name.unwrap_or_default();
    let opts = DeviceOptions {
        name: name.clone(),
        role: if a.server {
            DeviceRole::Server
        } else {
            DeviceRole::Reader
        },
        dns: a.dns,
        ips: a.ip,
        validity: None,
    };
    let files = pki.write_device(opts, &a.out)?;
    println!(
        "issued {} certificate {:?}: {}, {}, CA {}",
        if a.server { "server" } else { "reader" },
        name,
        files.cert.display(),
        files.key.display(),
        files.ca.display()
    );
    Ok(ExitCode::SUCCESS)
}
