//! `pivgate pki init`, `issue-card`, `issue-device`, `revoke` and
//! `refresh-crls`: a test PKI and what it issues.

use crate::args::card::{parse_alg, CardSpec};
use crate::render::containers::print_issued_containers;
use anyhow::Context;
use clap::{Args, ValueEnum};
use pki::cert_file::read_certificate;
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

pub fn issue_card(a: IssueCardArgs) -> anyhow::Result<ExitCode> {
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
    print_issued_containers(&card);
    Ok(ExitCode::SUCCESS)
}

pub fn revoke(a: RevokeArgs) -> anyhow::Result<ExitCode> {
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

pub fn refresh_crls(a: RefreshArgs) -> anyhow::Result<ExitCode> {
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

#[derive(Args)]
pub struct IssueDeviceArgs {
    /// The test PKI directory (from `pivgate pki init`).
    #[arg(long, value_name = "DIR")]
    pki: PathBuf,
    /// The device's name: its certificate's subject common name (the name a
    /// service binds a reader to, or the service's host name).
    #[arg(long)]
    name: String,
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

/// A file stem from a device name: letters, digits, `-`, `_` and `.`.
fn stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

pub fn issue_device(a: IssueDeviceArgs) -> anyhow::Result<ExitCode> {
    let pki = TestPki::load(&a.pki)
        .with_context(|| format!("loading the test PKI in {}", a.pki.display()))?;
    // A service certificate names the host it is reached by: --name too,
    // when it is a host name (`reader connect --server NAME:7443`).
    let mut dns = a.dns.clone();
    let host = pki::cert::name_syntax::host_problem(&a.name).is_none()
        && a.name.parse::<std::net::IpAddr>().is_err();
    if a.server && host && !dns.contains(&a.name) {
        dns.insert(0, a.name.clone());
    }
    let cred = pki.issue_device(&DeviceOptions {
        name: a.name.clone(),
        role: if a.server {
            DeviceRole::Server
        } else {
            DeviceRole::Reader
        },
        dns,
        ips: a.ip.clone(),
        validity: None,
    })?;
    let stem = stem(&a.name);
    cred.save(&a.out, &stem, &[pki.intermediate_der()])?;
    std::fs::write(
        a.out.join("ca.pem"),
        pki_issue::pem_encode("CERTIFICATE", pki.root_der()),
    )
    .with_context(|| format!("writing {}", a.out.join("ca.pem").display()))?;
    println!(
        "issued {} certificate {:?}: {}, {}, CA {}",
        if a.server { "server" } else { "reader" },
        a.name,
        a.out.join(format!("{stem}.pem")).display(),
        a.out.join(format!("{stem}.key.pem")).display(),
        a.out.join("ca.pem").display()
    );
    Ok(ExitCode::SUCCESS)
}
