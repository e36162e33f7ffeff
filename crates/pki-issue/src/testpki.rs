//! A complete test PKI for PIV cards: a root CA, an intermediate asserting
//! the FIPS 201 policies, a CHUID content signer, CRLs, and per-card
//! credentials for slots 9A, 9C, 9D and 9E with a signed CHUID.
//!
//! Certificates carry what a relying party of the Federal PKI looks for
//! (X.509 Certificate and CRL Extensions Profile for the Shared Service
//! Providers program, PIV worksheets): a CRL distribution point and an
//! authorityInfoAccess with id-ad-caIssuers naming the issuer's `.p7c` (and
//! id-ad-ocsp when a responder is configured), both HTTP URLs under one
//! publication base ([`DEFAULT_PUBLICATION_URL`] unless configured); the
//! pivInterim extension on PIV Authentication and Card Authentication
//! certificates; and the production or test policy OIDs ([`PolicySet`]).
//! The files those URLs name are written to `publish/` in the PKI directory
//! and returned by [`TestPki::publication_files`].

use super::builder::{certs_only_p7c, now, CertificateBuilder, CrlBuilder, RevokedEntry, DAY};
use super::chuid_sign::sign_chuid;
use super::keys::{KeyAlgorithm, KeyPair};
use super::{pem_decode, pem_encode, IssueError};
use der::Decode;
use piv::chuid::{uuid_string, Chuid, ChuidDate};
use piv::fascn::Fascn;
use pki::fips201::oids;
pub use pki::fips201::oids::PolicySet;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use x509_cert::crl::CertificateList;
use x509_cert::ext::pkix::{CrlReason, KeyUsages};
use x509_cert::Certificate;

/// PIV key slots issued for every card: PIV Authentication, Digital
/// Signature, Key Management, Card Authentication.
pub const PIV_SLOTS: [u8; 4] = [0x9A, 0x9C, 0x9D, 0x9E];

const ROOT: &str = "root";
const INTERMEDIATE: &str = "intermediate";
const SIGNER: &str = "content-signer";
const MANIFEST: &str = "manifest.json";
/// The directory under a stored test PKI holding the files its certificates'
/// URLs name.
pub const PUBLISH_DIR: &str = "publish";

/// Where a test PKI's certificates say its CRLs and `.p7c` files are
/// published unless configured otherwise: serve the PKI's `publish/`
/// directory at this URL (for example `python3 -m http.server 8089 -d
/// publish`), or choose another base with `pivgate pki init --publish-url`.
/// A host name, not an IP literal, as the Federal PKI profiles ask of URIs.
pub const DEFAULT_PUBLICATION_URL: &str = "http://localhost:8089";

/// Settings of a new test PKI.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestPkiOptions {
    /// Key algorithm of the CA and content-signer keys.
    pub algorithm: KeyAlgorithm,
    /// Organisation name in the CA subjects.
    pub organization: String,
    /// The publication base URL. When set (by default
    /// [`DEFAULT_PUBLICATION_URL`]), certificates carry CRL distribution
    /// points `{base}/intermediate.crl` (end entities) and `{base}/root.crl`
    /// (the intermediate), and authorityInfoAccess id-ad-caIssuers
    /// `{base}/intermediate.p7c` / `{base}/root.p7c`; `None` leaves both out.
    pub crl_base_url: Option<String>,
    /// The OCSP responder URL put in authorityInfoAccess (id-ad-ocsp) of
    /// every certificate below the root, if any.
    #[serde(default)]
    pub ocsp_url: Option<String>,
    /// The certificate policy OIDs asserted: production `id-fpki-common-*`
    /// or the test arc.
    #[serde(default)]
    pub policy_set: PolicySet,
    /// Lifetime of the CA certificates in days.
    pub ca_validity_days: i64,
    /// Lifetime of CRLs (nextUpdate - thisUpdate) in days.
    pub crl_validity_days: i64,
}

impl Default for TestPkiOptions {
    fn default() -> Self {
        TestPkiOptions {
            algorithm: KeyAlgorithm::P256,
            organization: "pivgate Test PKI".into(),
            crl_base_url: Some(DEFAULT_PUBLICATION_URL.into()),
            ocsp_url: None,
            policy_set: PolicySet::Production,
            ca_validity_days: 3650,
            crl_validity_days: 7,
        }
    }
}

/// One CA (or signer) certificate with its key.
#[derive(Debug)]
struct Issuer {
    cert: Vec<u8>,
    key: KeyPair,
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: String,
    options: TestPkiOptions,
    created: i64,
    files: Vec<String>,
}

/// A test PKI: root, intermediate, content signer and their CRLs.
#[derive(Debug)]
pub struct TestPki {
    options: TestPkiOptions,
    root: Issuer,
    intermediate: Issuer,
    signer: Issuer,
    root_crl: Vec<u8>,
    intermediate_crl: Vec<u8>,
    dir: Option<PathBuf>,
}

fn subject_of(org: &str, cn: &str) -> String {
    // RFC 4514: escape the few characters that are special in a DN string.
    let esc = |s: &str| {
        s.chars()
            .flat_map(|c| match c {
                ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=' => vec!['\\', c],
                c => vec![c],
            })
            .collect::<String>()
    };
    format!("CN={},O={},C=US", esc(cn), esc(org))
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> IssueError + '_ {
    move |source| IssueError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write_file(path: &Path, data: &[u8], private: bool) -> Result<(), IssueError> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut f = opts.open(path).map_err(io_err(path))?;
    // The mode above applies only to new files: tighten existing ones too,
    // before the key is written.
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(io_err(path))?;
    }
    f.write_all(data).map_err(io_err(path))?;
    Ok(())
}

/// Reads a file of a test PKI or card directory (keys, certificates, CRLs, manifests, the
/// CHUID), bounded like every input: a regular file of at most the CRL size cap.
fn read_file(path: &Path) -> Result<Vec<u8>, IssueError> {
    pki::input::read_bounded(path, pki::input::InputKind::Crl).map_err(|e| match e {
        pki::input::InputError::Io { path, source } => IssueError::Io { path, source },
        other => IssueError::Invalid(other.to_string()),
    })
}

fn read_pem(path: &Path, label: &str) -> Result<Vec<u8>, IssueError> {
    let text = read_file(path)?;
    pem_decode(label, &text)
        .ok_or_else(|| IssueError::Invalid(format!("{} has no PEM {label} block", path.display())))
}

fn save_issuer(dir: &Path, name: &str, issuer: &Issuer) -> Result<(), IssueError> {
    write_file(
        &dir.join(format!("{name}.pem")),
        pem_encode("CERTIFICATE", &issuer.cert).as_bytes(),
        false,
    )?;
    write_file(
        &dir.join(format!("{name}.key.pem")),
        pem_encode("PRIVATE KEY", issuer.key.pkcs8_der()).as_bytes(),
        true,
    )
}

fn load_issuer(dir: &Path, name: &str) -> Result<Issuer, IssueError> {
    let cert = read_pem(&dir.join(format!("{name}.pem")), "CERTIFICATE")?;
    let key = KeyPair::from_pkcs8(&read_pem(
        &dir.join(format!("{name}.key.pem")),
        "PRIVATE KEY",
    )?)?;
    Ok(Issuer { cert, key })
}

/// The entries and number of an existing CRL, so it can be re-issued.
fn crl_state(crl_der: &[u8]) -> Result<(Vec<RevokedEntry>, u64), IssueError> {
    let crl = CertificateList::from_der(crl_der)?;
    let mut entries = Vec::new();
    for rc in crl.tbs_cert_list.revoked_certificates.iter().flatten() {
        let mut reason = None;
        for e in rc.crl_entry_extensions.iter().flatten() {
            if e.extn_id == const_oid::db::rfc5280::ID_CE_CRL_REASONS {
                reason = Some(CrlReason::from_der(e.extn_value.as_bytes())?);
            }
        }
        entries.push(RevokedEntry {
            serial: rc.serial_number.as_bytes().to_vec(),
            date: rc.revocation_date.to_unix_duration().as_secs() as i64,
            reason,
        });
    }
    let mut number = 0u64;
    for e in crl.tbs_cert_list.crl_extensions.iter().flatten() {
        if e.extn_id == const_oid::db::rfc5280::ID_CE_CRL_NUMBER {
            let n = x509_cert::ext::pkix::CrlNumber::from_der(e.extn_value.as_bytes())?;
            number =
                n.0.as_bytes()
                    .iter()
                    .fold(0u64, |a, &b| a.wrapping_shl(8) | u64::from(b));
        }
    }
    Ok((entries, number))
}

fn random_digits(n: usize) -> Result<String, IssueError> {
    let mut bytes = vec![0u8; n];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| IssueError::Crypto)?;
    Ok(bytes.iter().map(|b| char::from(b'0' + b % 10)).collect())
}

/// A random version 4 UUID.
pub fn random_uuid() -> Result<[u8; 16], IssueError> {
    let mut u = [0u8; 16];
    aws_lc_rs::rand::fill(&mut u).map_err(|_| IssueError::Crypto)?;
    u[6] = (u[6] & 0x0F) | 0x40;
    u[8] = (u[8] & 0x3F) | 0x80;
    Ok(u)
}

/// Settings of one issued card.
#[derive(Debug, Clone)]
pub struct CardOptions {
    /// Key algorithm of all four slots.
    pub algorithm: KeyAlgorithm,
    /// FASC-N; a random one under agency 9999 when `None`.
    pub fascn: Option<Fascn>,
    /// Card UUID (CHUID GUID); random when `None`.
    pub uuid: Option<[u8; 16]>,
    /// Card expiration date; five years from today when `None`.
    pub expires: Option<ChuidDate>,
    /// Cardholder name used in the subject of the 9A, 9C and 9D certificates.
    pub cardholder: String,
    /// The pivInterim indicator of the 9A and 9E certificates: TRUE while
    /// the cardholder's background investigation is not complete.
    pub interim: bool,
}

impl Default for CardOptions {
    fn default() -> Self {
        CardOptions {
            algorithm: KeyAlgorithm::P256,
            fascn: None,
            uuid: None,
            expires: None,
            cardholder: "Test Cardholder".into(),
            interim: false,
        }
    }
}

/// The key pair and certificate of one PIV slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotCredential {
    /// Key reference: 0x9A, 0x9C, 0x9D or 0x9E.
    pub slot: u8,
    pub algorithm: KeyAlgorithm,
    /// PKCS#8 private key DER.
    pub private_key_pkcs8: Vec<u8>,
    /// X.509 certificate DER.
    pub certificate: Vec<u8>,
}

/// Everything needed to personalise one card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardCredentials {
    pub slots: Vec<SlotCredential>,
    /// The encoded, signed CHUID (TLVs without the `53` container).
    pub chuid: Vec<u8>,
    pub fascn: Fascn,
    pub uuid: [u8; 16],
    pub expires: ChuidDate,
    /// CCC, Printed Information, biometrics and Security Object; `None` for
    /// credentials saved before they were issued.
    pub containers: Option<super::CardContainers>,
}

#[derive(Debug, Serialize, Deserialize)]
struct CardManifest {
    format: String,
    fascn: String,
    uuid: String,
    expires: String,
    slots: Vec<CardManifestSlot>,
}

#[derive(Debug, Serialize, Deserialize)]
struct CardManifestSlot {
    slot: String,
    algorithm: KeyAlgorithm,
    certificate: String,
    key: String,
}

impl CardCredentials {
    /// The credential of one slot.
    pub fn slot(&self, slot: u8) -> Option<&SlotCredential> {
        self.slots.iter().find(|s| s.slot == slot)
    }

    /// Writes `card.json`, `chuid.bin`, and `slot-9a.pem` / `slot-9a.key.pem`
    /// (mode 0600) etc. into `dir` (created if needed).
    pub fn save(&self, dir: &Path) -> Result<(), IssueError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut slots = Vec::new();
        for s in &self.slots {
            let cert = format!("slot-{:02x}.pem", s.slot);
            let key = format!("slot-{:02x}.key.pem", s.slot);
            write_file(
                &dir.join(&cert),
                pem_encode("CERTIFICATE", &s.certificate).as_bytes(),
                false,
            )?;
            write_file(
                &dir.join(&key),
                pem_encode("PRIVATE KEY", &s.private_key_pkcs8).as_bytes(),
                true,
            )?;
            slots.push(CardManifestSlot {
                slot: format!("{:02X}", s.slot),
                algorithm: s.algorithm,
                certificate: cert,
                key,
            });
        }
        write_file(&dir.join("chuid.bin"), &self.chuid, false)?;
        if let Some(c) = &self.containers {
            for ((_, content), (_, file)) in
                c.objects().iter().zip(super::containers::CONTAINER_FILES)
            {
                write_file(&dir.join(file), content, false)?;
            }
        }
        let m = CardManifest {
            format: "pivgate-card/1".into(),
            fascn: self.fascn.digits(),
            uuid: uuid_string(&self.uuid),
            expires: self.expires.to_string(),
            slots,
        };
        let json = serde_json::to_vec_pretty(&m)
            .map_err(|e| IssueError::Invalid(format!("card manifest: {e}")))?;
        write_file(&dir.join("card.json"), &json, false)
    }

    /// Reads credentials written by [`CardCredentials::save`].
    pub fn load(dir: &Path) -> Result<CardCredentials, IssueError> {
        let path = dir.join("card.json");
        let m: CardManifest = serde_json::from_slice(&read_file(&path)?).map_err(|e| {
            IssueError::Invalid(format!("{}: not a card manifest: {e}", path.display()))
        })?;
        let mut slots = Vec::new();
        for s in &m.slots {
            let slot = u8::from_str_radix(&s.slot, 16).map_err(|_| {
                IssueError::Invalid(format!("{}: bad slot {:?}", path.display(), s.slot))
            })?;
            slots.push(SlotCredential {
                slot,
                algorithm: s.algorithm,
                private_key_pkcs8: read_pem(&dir.join(&s.key), "PRIVATE KEY")?,
                certificate: read_pem(&dir.join(&s.certificate), "CERTIFICATE")?,
            });
        }
        let uuid = piv::chuid::parse_uuid(&m.uuid).ok_or_else(|| {
            IssueError::Invalid(format!("{}: bad UUID {:?}", path.display(), m.uuid))
        })?;
        Ok(CardCredentials {
            slots,
            chuid: read_file(&dir.join("chuid.bin"))?,
            fascn: Fascn::from_digits(&m.fascn)?,
            uuid,
            expires: ChuidDate::parse(&m.expires)?,
            containers: super::containers::load(dir)?,
        })
    }
}

impl TestPki {
    /// Creates a new test PKI in memory.
    pub fn generate(options: TestPkiOptions) -> Result<TestPki, IssueError> {
        let t = now();
        let not_after = t + options.ca_validity_days * DAY;
        let org = options.organization.as_str();
        let set = options.policy_set;
        let published = |b: CertificateBuilder, issuer: &str| publication(b, &options, issuer);

        let root_key = KeyPair::generate(options.algorithm)?;
        let root_cert =
            CertificateBuilder::new(&subject_of(org, "Test Root CA"), root_key.spki_der())?
                .validity(t - DAY, not_after)
                .ca(None)
                .self_signed(&root_key)?;
        let root = Issuer {
            cert: root_cert,
            key: root_key,
        };

        let int_key = KeyPair::generate(options.algorithm)?;
        let b =
            CertificateBuilder::new(&subject_of(org, "Test PIV Issuing CA"), int_key.spki_der())?
                .validity(t - DAY, not_after)
                .ca(Some(0))
                .policies(&[
                    set.hardware(),
                    set.authentication(),
                    set.card_auth(),
                    set.content_signing(),
                    set.pivi_hardware(),
                    set.pivi_card_auth(),
                    set.pivi_content_signing(),
                ]);
        let b = published(b, ROOT);
        let intermediate = Issuer {
            cert: b.sign(&root.cert, &root.key)?,
            key: int_key,
        };

        let signer_key = KeyPair::generate(options.algorithm)?;
        let b = CertificateBuilder::new(
            &subject_of(org, "Test CHUID Content Signer"),
            signer_key.spki_der(),
        )?
        .validity(t - DAY, not_after)
        .key_usage(KeyUsages::DigitalSignature)
        .extended_key_usage(&[oids::EKU_PIV_CONTENT_SIGNING])
        .policies(&[set.content_signing()]);
        let b = published(b, INTERMEDIATE);
        let signer = Issuer {
            cert: b.sign(&intermediate.cert, &intermediate.key)?,
            key: signer_key,
        };

        let mut pki = TestPki {
            options,
            root,
            intermediate,
            signer,
            root_crl: Vec::new(),
            intermediate_crl: Vec::new(),
            dir: None,
        };
        pki.root_crl = pki.sign_crl(true, Vec::new(), 1)?;
        pki.intermediate_crl = pki.sign_crl(false, Vec::new(), 1)?;
        Ok(pki)
    }

    /// Creates a new test PKI and writes it to `dir` (created if needed):
    /// `root.pem`, `intermediate.pem`, `content-signer.pem`, their
    /// `*.key.pem` (PKCS#8, mode 0600), `root.crl.pem` (signed by the root,
    /// covers the intermediate), `intermediate.crl.pem` and `manifest.json`.
    pub fn init(dir: &Path, options: TestPkiOptions) -> Result<TestPki, IssueError> {
        if dir.join(MANIFEST).exists() {
            return Err(IssueError::Invalid(format!(
                "{} already holds a test PKI (manifest.json exists); choose an empty directory",
                dir.display()
            )));
        }
        let mut pki = TestPki::generate(options)?;
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        pki.dir = Some(dir.to_path_buf());
        pki.save()?;
        Ok(pki)
    }

    /// Loads a test PKI written by [`TestPki::init`].
    pub fn load(dir: &Path) -> Result<TestPki, IssueError> {
        let path = dir.join(MANIFEST);
        let m: Manifest = serde_json::from_slice(&read_file(&path)?).map_err(|e| {
            IssueError::Invalid(format!("{}: not a test PKI manifest: {e}", path.display()))
        })?;
        Ok(TestPki {
            options: m.options,
            root: load_issuer(dir, ROOT)?,
            intermediate: load_issuer(dir, INTERMEDIATE)?,
            signer: load_issuer(dir, SIGNER)?,
            root_crl: read_pem(&dir.join("root.crl.pem"), "X509 CRL")?,
            intermediate_crl: read_pem(&dir.join("intermediate.crl.pem"), "X509 CRL")?,
            dir: Some(dir.to_path_buf()),
        })
    }

    fn save(&self) -> Result<(), IssueError> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        save_issuer(dir, ROOT, &self.root)?;
        save_issuer(dir, INTERMEDIATE, &self.intermediate)?;
        save_issuer(dir, SIGNER, &self.signer)?;
        self.save_crls()?;
        let m = Manifest {
            format: "pivgate-test-pki/1".into(),
            options: self.options.clone(),
            created: now(),
            files: [
                "root.pem",
                "root.key.pem",
                "intermediate.pem",
                "intermediate.key.pem",
                "content-signer.pem",
                "content-signer.key.pem",
                "root.crl.pem",
                "intermediate.crl.pem",
                "publish/root.crl",
                "publish/intermediate.crl",
                "publish/root.p7c",
                "publish/intermediate.p7c",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        };
        let json = serde_json::to_vec_pretty(&m)
            .map_err(|e| IssueError::Invalid(format!("manifest: {e}")))?;
        write_file(&dir.join(MANIFEST), &json, false)
    }

    fn save_crls(&self) -> Result<(), IssueError> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        write_file(
            &dir.join("root.crl.pem"),
            pem_encode("X509 CRL", &self.root_crl).as_bytes(),
            false,
        )?;
        write_file(
            &dir.join("intermediate.crl.pem"),
            pem_encode("X509 CRL", &self.intermediate_crl).as_bytes(),
            false,
        )?;
        self.save_publication()
    }

    /// Writes [`TestPki::publication_files`] to `publish/`.
    fn save_publication(&self) -> Result<(), IssueError> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let publish = dir.join(PUBLISH_DIR);
        std::fs::create_dir_all(&publish).map_err(io_err(&publish))?;
        for (name, der) in self.publication_files()? {
            write_file(&publish.join(name), &der, false)?;
        }
        Ok(())
    }

    /// The files the certificates' URLs name, by file name under the
    /// publication base: `root.crl` and `intermediate.crl` (DER CRLs, RFC
    /// 5280 §4.2.1.13), `root.p7c` and `intermediate.p7c` (certs-only CMS
    /// with the certificates issued to that CA, RFC 5280 §4.2.2.1).
    pub fn publication_files(&self) -> Result<Vec<(&'static str, Vec<u8>)>, IssueError> {
        Ok(vec![
            ("root.crl", self.root_crl.clone()),
            ("intermediate.crl", self.intermediate_crl.clone()),
            ("root.p7c", certs_only_p7c(&[&self.root.cert])?),
            (
                "intermediate.p7c",
                certs_only_p7c(&[&self.intermediate.cert])?,
            ),
        ])
    }

    fn sign_crl(
        &self,
        root: bool,
        entries: Vec<RevokedEntry>,
        number: u64,
    ) -> Result<Vec<u8>, IssueError> {
        let t = now();
        let issuer = if root { &self.root } else { &self.intermediate };
        CrlBuilder::new()
            .update_times(t - 60, Some(t + self.options.crl_validity_days * DAY))
            .crl_number(number)
            .entries(entries)
            .sign(&issuer.cert, &issuer.key)
    }

    /// The directory this PKI is stored in, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    pub fn options(&self) -> &TestPkiOptions {
        &self.options
    }

    /// The root CA certificate (the trust anchor), DER.
    pub fn root_der(&self) -> &[u8] {
        &self.root.cert
    }

    /// The issuing (intermediate) CA certificate, DER.
    pub fn intermediate_der(&self) -> &[u8] {
        &self.intermediate.cert
    }

    /// The CHUID content signer certificate, DER.
    pub fn content_signer_der(&self) -> &[u8] {
        &self.signer.cert
    }

    /// The CRL issued by the root (covers the intermediate), DER.
    pub fn root_crl_der(&self) -> &[u8] {
        &self.root_crl
    }

    /// The CRL issued by the intermediate (covers cards and the signer), DER.
    pub fn intermediate_crl_der(&self) -> &[u8] {
        &self.intermediate_crl
    }

    /// Both CRLs, DER.
    pub fn crls(&self) -> Vec<Vec<u8>> {
        vec![self.root_crl.clone(), self.intermediate_crl.clone()]
    }

    /// A trust store that relies on this PKI: the root as anchor, the
    /// issuing CA as intermediate.
    pub fn trust_store(&self) -> pki::store::TrustStore {
        let mut b = pki::store::TrustStore::builder();
        b.add_anchor_der(self.root_der().to_vec());
        b.add_intermediate_der(self.intermediate_der().to_vec());
        b.build()
    }

    /// This PKI's current CRLs as a set.
    pub fn crl_set(&self) -> Result<pki::revocation_set::RevocationSet, pki::crl::CrlError> {
        let mut b = pki::revocation_set::RevocationSet::builder();
        for c in self.crls() {
            b.add_der(c)?;
        }
        Ok(b.build())
    }

    /// The key of the issuing CA (for tests that need to sign odd certificates).
    pub fn intermediate_key(&self) -> &KeyPair {
        &self.intermediate.key
    }

    /// The content signer's key (for tests that sign objects the way other
    /// issuers do).
    pub fn content_signer_key(&self) -> &KeyPair {
        &self.signer.key
    }

    /// Issues the four slot certificates and a signed CHUID for one card.
    pub fn issue_card(&self, opts: &CardOptions) -> Result<CardCredentials, IssueError> {
        let fascn = match &opts.fascn {
            Some(f) => f.clone(),
            None => Fascn::from_digits(&format!(
                "99999999{}01{}10000{}",
                random_digits(6)?,
                random_digits(10)?,
                1
            ))?,
        };
        let fascn_bytes = fascn.encode()?;
        let uuid = match opts.uuid {
            Some(u) => u,
            None => random_uuid()?,
        };
        let t = now();
        let expires = match opts.expires {
            Some(d) => d,
            None => {
                let (y, m, d) = pki::time::civil_from_days((t + 5 * 365 * DAY).div_euclid(DAY));
                ChuidDate::parse(&format!("{y:04}{m:02}{d:02}"))?
            }
        };
        let card_end = expires.end_of_day_unix();
        if card_end <= t {
            return Err(IssueError::Invalid(format!(
                "card expiration date {expires} is in the past"
            )));
        }
        let int = Certificate::from_der(&self.intermediate.cert)?;
        let ca_end = int
            .tbs_certificate
            .validity
            .not_after
            .to_unix_duration()
            .as_secs() as i64;
        let not_after = card_end.min(ca_end);
        let set = self.options.policy_set;
        let org = self.options.organization.as_str();

        let mut slots = Vec::with_capacity(PIV_SLOTS.len());
        for slot in PIV_SLOTS {
            let key = KeyPair::generate(opts.algorithm)?;
            let is_ec = matches!(opts.algorithm, KeyAlgorithm::P256 | KeyAlgorithm::P384);
            let (subject, policy, ku) = match slot {
                0x9A => (
                    subject_of(org, &opts.cardholder),
                    set.authentication(),
                    KeyUsages::DigitalSignature.into(),
                ),
                0x9C => (
                    subject_of(org, &opts.cardholder),
                    set.hardware(),
                    KeyUsages::DigitalSignature | KeyUsages::NonRepudiation,
                ),
                0x9D => (
                    subject_of(org, &opts.cardholder),
                    set.hardware(),
                    if is_ec {
                        KeyUsages::KeyAgreement.into()
                    } else {
                        KeyUsages::KeyEncipherment.into()
                    },
                ),
                _ => (
                    subject_of(org, "Card Authentication"),
                    set.card_auth(),
                    KeyUsages::DigitalSignature.into(),
                ),
            };
            let mut b = CertificateBuilder::new(&subject, key.spki_der())?
                .validity(t - 60, not_after)
                .key_usage(ku)
                .policies(&[policy]);
            if slot == 0x9A || slot == 0x9E {
                b = b
                    .san_fascn(&fascn_bytes)?
                    .san_uuid(&uuid)?
                    .piv_interim(opts.interim);
            }
            if slot == 0x9E {
                b = b.extended_key_usage(&[oids::EKU_PIV_CARD_AUTH]);
            }
            b = publication(b, &self.options, INTERMEDIATE);
            let certificate = b.sign(&self.intermediate.cert, &self.intermediate.key)?;
            slots.push(SlotCredential {
                slot,
                algorithm: opts.algorithm,
                private_key_pkcs8: key.pkcs8_der().to_vec(),
                certificate,
            });
        }

        let mut chuid = Chuid::new(fascn_bytes, uuid, expires);
        sign_chuid(&mut chuid, &self.signer.cert, &self.signer.key)?;
        let chuid = chuid.encode();
        let containers =
            super::containers::issue_containers(&super::containers::ContainerInputs {
                signer_cert_der: &self.signer.cert,
                signer_key: &self.signer.key,
                fascn: &fascn,
                fascn_bytes: &fascn_bytes,
                uuid: &uuid,
                expires,
                cardholder: &opts.cardholder,
                organization: org,
                chuid: &chuid,
                now: t,
            })?;
        Ok(CardCredentials {
            slots,
            chuid,
            fascn,
            uuid,
            expires,
            containers: Some(containers),
        })
    }

    /// Revokes a certificate issued by this PKI: adds it to the CRL of its
    /// issuer (root or intermediate), increments the CRL number and re-signs;
    /// the CRL file is rewritten when the PKI is stored in a directory.
    pub fn revoke(&mut self, cert_der: &[u8], reason: Option<CrlReason>) -> Result<(), IssueError> {
        let cert = Certificate::from_der(cert_der)
            .map_err(|e| IssueError::Invalid(format!("not a certificate: {e}")))?;
        let issuer_name = &cert.tbs_certificate.issuer;
        let root = Certificate::from_der(&self.root.cert)?;
        let int = Certificate::from_der(&self.intermediate.cert)?;
        let foreign = || {
            IssueError::Invalid(format!(
                "certificate {} was not issued by this test PKI",
                cert.tbs_certificate.subject
            ))
        };
        let by_root = if *issuer_name == int.tbs_certificate.subject {
            false
        } else if *issuer_name == root.tbs_certificate.subject && cert_der != self.root.cert {
            true
        } else {
            return Err(foreign());
        };
        // Names can collide between test PKIs: require our CA's signature.
        let issuer_der = if by_root {
            &self.root.cert
        } else {
            &self.intermediate.cert
        };
        if !signed_by(cert_der, issuer_der) {
            return Err(foreign());
        }
        let current = if by_root {
            &self.root_crl
        } else {
            &self.intermediate_crl
        };
        let (mut entries, number) = crl_state(current)?;
        let serial = cert.tbs_certificate.serial_number.as_bytes().to_vec();
        if entries.iter().any(|e| e.serial == serial) {
            return Err(IssueError::Invalid(format!(
                "certificate {} (serial {}) is already revoked",
                cert.tbs_certificate.subject,
                hex::encode(&serial)
            )));
        }
        entries.push(RevokedEntry {
            serial,
            date: now(),
            reason,
        });
        let crl = self.sign_crl(by_root, entries, number + 1)?;
        if by_root {
            self.root_crl = crl;
        } else {
            self.intermediate_crl = crl;
        }
        self.save_crls()
    }

    /// Re-issues both CRLs with fresh thisUpdate/nextUpdate (same entries,
    /// numbers incremented).
    pub fn refresh_crls(&mut self) -> Result<(), IssueError> {
        let (entries, number) = crl_state(&self.root_crl)?;
        self.root_crl = self.sign_crl(true, entries, number + 1)?;
        let (entries, number) = crl_state(&self.intermediate_crl)?;
        self.intermediate_crl = self.sign_crl(false, entries, number + 1)?;
        self.save_crls()
    }
}

/// What a device certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceRole {
    /// A reader at a door: TLS client authentication (clientAuth).
    Reader,
    /// The authentication service a reader connects to: TLS server
    /// authentication (serverAuth), with its DNS names and IP addresses.
    Server,
}

/// A device certificate request: see [`TestPki::issue_device`].
#[derive(Debug, Clone)]
pub struct DeviceOptions {
    /// The subject common name (a reader's name, or the server's host name).
    pub name: String,
    pub role: DeviceRole,
    /// subjectAltName DNS names (a server's host names).
    pub dns: Vec<String>,
    /// subjectAltName IP addresses.
    pub ips: Vec<std::net::IpAddr>,
    /// Validity as Unix seconds (not before, not after); `None` is from a
    /// day ago for two years, bounded by the issuing CA.
    pub validity: Option<(i64, i64)>,
}

/// A device certificate and its private key.
#[derive(Debug)]
pub struct DeviceCredential {
    pub cert: Vec<u8>,
    pub key: KeyPair,
}

impl DeviceCredential {
    /// Writes `{stem}.pem` (the certificate followed by the issuing CA
    /// certificate) and `{stem}.key.pem` (PKCS#8, mode 0600) into `dir`.
    pub fn save(&self, dir: &Path, stem: &str, chain: &[&[u8]]) -> Result<(), IssueError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut pem = pem_encode("CERTIFICATE", &self.cert);
        for c in chain {
            pem.push_str(&pem_encode("CERTIFICATE", c));
        }
        write_file(&dir.join(format!("{stem}.pem")), pem.as_bytes(), false)?;
        write_file(
            &dir.join(format!("{stem}.key.pem")),
            pem_encode("PRIVATE KEY", self.key.pkcs8_der()).as_bytes(),
            true,
        )
    }
}

impl TestPki {
    /// Issues a device certificate from the issuing CA: a P-256 key,
    /// digitalSignature, the id-fpki-common-devices policy of this PKI's
    /// policy set, and the extended key usage of its role (clientAuth for a
    /// reader, serverAuth for the server). Revoke it like a card
    /// certificate, with [`TestPki::revoke`].
    pub fn issue_device(&self, opts: &DeviceOptions) -> Result<DeviceCredential, IssueError> {
        self.issue_device_with_uris(opts, &[])
    }

    /// [`TestPki::issue_device`] with subjectAltName URIs, e.g. a site's
    /// identity `urn:pivgate:site:NAME` ([`site_uri`]).
    pub fn issue_device_with_uris(
        &self,
        opts: &DeviceOptions,
        uris: &[String],
    ) -> Result<DeviceCredential, IssueError> {
        if opts.name.is_empty() {
            return Err(IssueError::Invalid("a device needs a name".into()));
        }
        let int = Certificate::from_der(&self.intermediate.cert)?;
        let ca_end = int
            .tbs_certificate
            .validity
            .not_after
            .to_unix_duration()
            .as_secs() as i64;
        let t = now();
        let (from, to) = opts
            .validity
            .unwrap_or((t - DAY, (t + 2 * 365 * DAY).min(ca_end)));
        let key = KeyPair::generate(KeyAlgorithm::P256)?;
        let eku = match opts.role {
            DeviceRole::Reader => const_oid::db::rfc5280::ID_KP_CLIENT_AUTH,
            DeviceRole::Server => const_oid::db::rfc5280::ID_KP_SERVER_AUTH,
        };
        let mut b = CertificateBuilder::new(
            &subject_of(&self.options.organization, &opts.name),
            key.spki_der(),
        )?
        .validity(from, to)
        .end_entity()
        .key_usage(KeyUsages::DigitalSignature)
        .extended_key_usage(&[eku])
        .policies(&[self.options.policy_set.devices()]);
        for d in &opts.dns {
            b = b.san_dns(d)?;
        }
        for ip in &opts.ips {
            b = b.san_ip(*ip)?;
        }
        for u in uris {
            b = b.san_uri(u)?;
        }
        let b = publication(b, &self.options, INTERMEDIATE);
        let cert = b.sign(&self.intermediate.cert, &self.intermediate.key)?;
        Ok(DeviceCredential { cert, key })
    }
}

/// How a site certificate names its site: the subjectAltName URI
/// `urn:pivgate:site:NAME`.
pub const SITE_URI_PREFIX: &str = "urn:pivgate:site:";

/// The subjectAltName URI naming site `name`.
pub fn site_uri(name: &str) -> String {
    format!("{SITE_URI_PREFIX}{name}")
}

/// The files [`TestPki::write_device`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceFiles {
    /// The certificate followed by the issuing CA certificate.
    pub cert: PathBuf,
    /// The private key (PKCS#8, mode 0600).
    pub key: PathBuf,
    /// The root CA certificate, for the other end's trust.
    pub ca: PathBuf,
}

/// A file stem from a device name: letters, digits, `-`, `_` and `.`.
fn device_stem(name: &str) -> String {
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

impl TestPki {
    /// Issues a device certificate ([`TestPki::issue_device`]) and writes it
    /// into `out` as `STEM.pem` (with the issuing CA), `STEM.key.pem` and
    /// `ca.pem` (the root), STEM being the name with other characters than
    /// letters, digits, `-`, `_` and `.` as `-`. A server certificate also
    /// names the host it is reached by: its name, when that is a host name
    /// (not an IP address), is added first to its DNS names.
    pub fn write_device(&self, opts: DeviceOptions, out: &Path) -> Result<DeviceFiles, IssueError> {
        self.write_device_with_uris(opts, &[], out)
    }

    /// The certificate of site `site` of a central (clientAuth, its name
    /// as the URI `urn:pivgate:site:SITE` and as the common name), written
    /// like [`TestPki::write_device`].
    pub fn write_site(&self, site: &str, out: &Path) -> Result<DeviceFiles, IssueError> {
        if site.is_empty() || site.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(IssueError::Invalid(format!(
                "a site name has no spaces or control characters: {site:?}"
            )));
        }
        let opts = DeviceOptions {
            name: site.to_string(),
            role: DeviceRole::Reader,
            dns: Vec::new(),
            ips: Vec::new(),
            validity: None,
        };
        self.write_device_with_uris(opts, &[site_uri(site)], out)
    }

    fn write_device_with_uris(
        &self,
        mut opts: DeviceOptions,
        uris: &[String],
        out: &Path,
    ) -> Result<DeviceFiles, IssueError> {
        let host = pki::cert::name_syntax::host_problem(&opts.name).is_none()
            && opts.name.parse::<std::net::IpAddr>().is_err();
        if opts.role == DeviceRole::Server && host && !opts.dns.contains(&opts.name) {
            opts.dns.insert(0, opts.name.clone());
        }
        let cred = self.issue_device_with_uris(&opts, uris)?;
        let stem = device_stem(&opts.name);
        cred.save(out, &stem, &[self.intermediate_der()])?;
        let ca = out.join("ca.pem");
        write_file(
            &ca,
            pem_encode("CERTIFICATE", self.root_der()).as_bytes(),
            false,
        )?;
        Ok(DeviceFiles {
            cert: out.join(format!("{stem}.pem")),
            key: out.join(format!("{stem}.key.pem")),
            ca,
        })
    }
}

/// Adds the URLs of a certificate issued by `issuer` (`root` or
/// `intermediate`): the CRL distribution point `{base}/{issuer}.crl`, and
/// authorityInfoAccess with id-ad-caIssuers `{base}/{issuer}.p7c` and, when
/// configured, id-ad-ocsp.
fn publication(
    mut b: CertificateBuilder,
    options: &TestPkiOptions,
    issuer: &str,
) -> CertificateBuilder {
    if let Some(base) = &options.crl_base_url {
        let base = base.trim_end_matches('/');
        b = b
            .crl_distribution_point(&format!("{base}/{issuer}.crl"))
            .ca_issuers(&format!("{base}/{issuer}.p7c"));
    }
    if let Some(ocsp) = &options.ocsp_url {
        b = b.ocsp_responder(ocsp);
    }
    b
}

/// Whether `cert_der` carries a valid signature by the key of `issuer_der`.
fn signed_by(cert_der: &[u8], issuer_der: &[u8]) -> bool {
    let (Ok(cert), Ok(issuer)) = (
        pki::cert::Cert::from_der(cert_der.to_vec()),
        pki::cert::Cert::from_der(issuer_der.to_vec()),
    ) else {
        return false;
    };
    pki::sig::verify(
        &cert.signature_algorithm,
        &issuer.public_key,
        cert.tbs(),
        cert.signature(),
        &pki::sig::AlgorithmPolicy::default(),
    )
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        let civil = |secs: i64| pki::time::civil_from_days(secs.div_euclid(DAY));
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(951_868_800), (2000, 3, 1));
        assert_eq!(civil(951_782_400), (2000, 2, 29));
    }

    #[test]
    fn issues_and_reloads_a_card() {
        let dir = tempfile::tempdir().unwrap();
        let pki = TestPki::init(&dir.path().join("pki"), TestPkiOptions::default()).unwrap();
        let card = pki.issue_card(&CardOptions::default()).unwrap();
        assert_eq!(card.slots.len(), 4);
        let chuid = Chuid::decode(&card.chuid).unwrap();
        assert_eq!(chuid.guid, card.uuid);
        assert_eq!(chuid.fascn().unwrap(), card.fascn);
        // An existing, world-readable key file is tightened when overwritten.
        let card_dir = dir.path().join("card");
        std::fs::create_dir_all(&card_dir).unwrap();
        std::fs::write(card_dir.join("slot-9a.key.pem"), b"old").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let p = card_dir.join("slot-9a.key.pem");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        card.save(&card_dir).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(card_dir.join("slot-9a.key.pem"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(
            CardCredentials::load(&dir.path().join("card")).unwrap(),
            card
        );
        let again = TestPki::load(&dir.path().join("pki")).unwrap();
        assert_eq!(again.root_der(), pki.root_der());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("pki/root.key.pem"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(TestPki::init(&dir.path().join("pki"), TestPkiOptions::default()).is_err());
    }

    #[test]
    fn revocation_increments_crl_number() {
        let mut pki = TestPki::generate(TestPkiOptions::default()).unwrap();
        let card = pki.issue_card(&CardOptions::default()).unwrap();
        let cert = card.slot(0x9A).unwrap().certificate.clone();
        pki.revoke(&cert, Some(CrlReason::KeyCompromise)).unwrap();
        let (entries, n) = crl_state(pki.intermediate_crl_der()).unwrap();
        assert_eq!(n, 2);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].reason, Some(CrlReason::KeyCompromise));
        assert!(pki.revoke(&cert, None).is_err());
        let int = pki.intermediate_der().to_vec();
        pki.revoke(&int, None).unwrap();
        assert_eq!(crl_state(pki.root_crl_der()).unwrap().0.len(), 1);
        let root = pki.root_der().to_vec();
        assert!(pki.revoke(&root, None).is_err());
    }
}
