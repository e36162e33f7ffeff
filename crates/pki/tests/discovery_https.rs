//! Path discovery over `https://` against `openssl s_server -WWW` on 127.0.0.1, serving a
//! bridged mesh's `.p7c` files from a directory, with a server certificate issued by a test
//! TLS CA (`https_roots`). The pool of intermediates is given empty: the path is found from
//! what the certificates name. A server the roots do not vouch for, or whose certificate does
//! not name the host of the URI, is refused with the TLS reason, and no path is found.
//!
//! Needs `openssl` (installed by scripts/setup.sh); without it the tests fail under CI and
//! are skipped elsewhere.

use const_oid::ObjectIdentifier;
use pki::discover::{Discovery, DiscoveryConfig};
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{RevocationMode, ValidationOptions};
use pki_issue::{certs_only_p7c, now, pem_encode, CertificateBuilder, KeyAlgorithm, KeyPair};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

fn openssl_available(test: &str) -> bool {
    if Command::new("openssl").arg("version").output().is_ok() {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(
        !ci,
        "{test}: openssl is not installed (scripts/setup.sh installs it)"
    );
    eprintln!("{test}: openssl is not installed; skipped");
    false
}

/// `openssl s_server -WWW` serving `dir` over TLS on a port of its choosing; stopped when
/// dropped.
struct TlsServer {
    child: Child,
    port: u16,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TlsServer {
    fn start(dir: &Path, cert: &Path, key: &Path) -> TlsServer {
        let mut child = Command::new("openssl")
            .args(["s_server", "-WWW", "-accept", "127.0.0.1:0"])
            .arg("-cert")
            .arg(cert)
            .arg("-key")
            .arg(key)
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // It prints "ACCEPT 127.0.0.1:PORT" once it listens.
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let port = loop {
            let line = lines
                .next()
                .expect("openssl s_server exited before listening")
                .unwrap();
            if let Some(rest) = line.strip_prefix("ACCEPT ") {
                break rest.trim().rsplit(':').next().unwrap().parse().unwrap();
            }
        };
        // Keep draining its output so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        TlsServer { child, port }
    }
}

/// subjectInfoAccess with one id-ad-caRepository URI.
fn sia(uri: &str) -> Vec<u8> {
    let oid = [0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x05];
    let mut loc = vec![0x86, uri.len() as u8];
    loc.extend_from_slice(uri.as_bytes());
    let mut ad = vec![0x30, (oid.len() + loc.len()) as u8];
    ad.extend_from_slice(&oid);
    ad.extend_from_slice(&loc);
    let mut out = vec![0x30, ad.len() as u8];
    out.extend_from_slice(&ad);
    out
}

fn key() -> KeyPair {
    KeyPair::generate(KeyAlgorithm::P256).unwrap()
}

/// A TLS CA and a server certificate for `localhost` only, as PEM files in `dir`; returns
/// the CA file (the `https_roots`), the server certificate and key files.
fn tls_pki(dir: &Path, ca_name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let (ck, sk) = (key(), key());
    let ca = CertificateBuilder::new(&format!("CN={ca_name},O=pivgate,C=US"), ck.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&ck)
        .unwrap();
    let server_auth = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.1");
    let server = CertificateBuilder::new("CN=localhost,O=pivgate,C=US", sk.spki_der())
        .unwrap()
        .end_entity()
        .extended_key_usage(&[server_auth])
        .san_dns("localhost")
        .unwrap()
        .sign(&ca, &ck)
        .unwrap();
    let stem = ca_name.replace(' ', "-");
    let (ca_file, cert_file, key_file) = (
        dir.join(format!("{stem}.pem")),
        dir.join(format!("{stem}-server.pem")),
        dir.join(format!("{stem}-server.key")),
    );
    std::fs::write(&ca_file, pem_encode("CERTIFICATE", &ca)).unwrap();
    std::fs::write(&cert_file, pem_encode("CERTIFICATE", &server)).unwrap();
    std::fs::write(&key_file, pem_encode("PRIVATE KEY", sk.pkcs8_der())).unwrap();
    (ca_file, cert_file, key_file)
}

struct Bridged {
    bridge: Vec<u8>,
    leaf: Vec<u8>,
}

/// The bridge (the trust anchor) publishes the certificates it issued at
/// `{base}/bridge-issued.p7c` (its SIA); the agency root is cross-certified by the bridge;
/// the leaf's AIA names its CA's `.p7c`, the CA's names the agency root's. The files are
/// written to `www`.
fn bridged(base: &str, www: &Path) -> Bridged {
    let (bk, rk, ck, lk) = (key(), key(), key(), key());
    let sia_oid = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.1.11");
    let bridge = CertificateBuilder::new("CN=Test Bridge,O=pivgate,C=US", bk.spki_der())
        .unwrap()
        .ca(None)
        .extension(sia_oid, false, &sia(&format!("{base}/bridge-issued.p7c")))
        .unwrap()
        .self_signed(&bk)
        .unwrap();
    let agency = || {
        CertificateBuilder::new("CN=Agency Root,O=pivgate,C=US", rk.spki_der())
            .unwrap()
            .ca(None)
    };
    let agency_self = agency().self_signed(&rk).unwrap();
    let cross = agency().sign(&bridge, &bk).unwrap();
    let ca = CertificateBuilder::new("CN=Agency CA,O=pivgate,C=US", ck.spki_der())
        .unwrap()
        .ca(None)
        .ca_issuers(&format!("{base}/agency-root.p7c"))
        .sign(&agency_self, &rk)
        .unwrap();
    let leaf = CertificateBuilder::new("CN=Agency Employee,O=pivgate,C=US", lk.spki_der())
        .unwrap()
        .end_entity()
        .ca_issuers(&format!("{base}/agency-ca.p7c"))
        .sign(&ca, &ck)
        .unwrap();
    let p7c = |name: &str, certs: &[&[u8]]| {
        std::fs::write(www.join(name), certs_only_p7c(certs).unwrap()).unwrap()
    };
    p7c("agency-ca.p7c", &[&ca]);
    p7c("agency-root.p7c", &[&agency_self]);
    p7c("bridge-issued.p7c", &[&cross]);
    Bridged { bridge, leaf }
}

fn opts() -> ValidationOptions {
    let mut o = ValidationOptions {
        time: Time(now()),
        ..ValidationOptions::default()
    };
    o.revocation.mode = RevocationMode::Off;
    o
}

fn store(anchor: &[u8]) -> TrustStore {
    let mut b = TrustStore::builder();
    b.add_anchor_der(anchor.to_vec());
    b.build()
}

fn config(roots: &Path) -> DiscoveryConfig {
    DiscoveryConfig {
        https_roots: Some(roots.to_path_buf()),
        ..DiscoveryConfig::default()
    }
}

#[test]
fn a_bridged_path_is_found_over_https_with_an_empty_pool() {
    if !openssl_available("a_bridged_path_is_found_over_https_with_an_empty_pool") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    std::fs::create_dir(&www).unwrap();
    let (roots, cert, key) = tls_pki(dir.path(), "Test TLS CA");
    let server = TlsServer::start(&www, &cert, &key);
    let m = bridged(&format!("https://localhost:{}", server.port), &www);
    let store = store(&m.bridge);
    let d = Discovery::new(config(&roots), Some(dir.path().join("cache")));
    let (result, found) = d.validate(&store, &m.leaf, &[], &RevocationSet::empty(), &opts());
    let path = result.unwrap_or_else(|e| panic!("{e}: {found:?}"));
    let subjects: Vec<&str> = path.chain().iter().map(|c| c.subject_display()).collect();
    assert_eq!(
        subjects,
        [
            "C=US, O=pivgate, CN=Agency Employee",
            "C=US, O=pivgate, CN=Agency CA",
            "C=US, O=pivgate, CN=Agency Root",
            "C=US, O=pivgate, CN=Test Bridge",
        ]
    );
    assert_eq!(found.certificates.len(), 2, "{found:?}");
    assert!(
        found.fetched.iter().all(|u| u.starts_with("https://")),
        "{found:?}"
    );
}

#[test]
fn an_untrusted_server_or_a_wrong_host_name_is_refused() {
    if !openssl_available("an_untrusted_server_or_a_wrong_host_name_is_refused") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    std::fs::create_dir(&www).unwrap();
    let (roots, cert, key) = tls_pki(dir.path(), "Test TLS CA");
    let (other_roots, _, _) = tls_pki(dir.path(), "Another TLS CA");
    let server = TlsServer::start(&www, &cert, &key);
    let refused = |base: String, roots: &Path, reason: &str| {
        let m = bridged(&base, &www);
        let d = Discovery::new(config(roots), None);
        let (result, found) = d.validate(
            &store(&m.bridge),
            &m.leaf,
            &[],
            &RevocationSet::empty(),
            &opts(),
        );
        assert_eq!(result.unwrap_err().code(), "no-path-to-anchor");
        assert!(found.certificates.is_empty(), "{found:?}");
        assert!(
            found
                .errors
                .iter()
                .any(|e| e.contains("TLS handshake with") && e.contains(reason)),
            "{reason}: {found:?}"
        );
    };
    // Roots that do not vouch for the server.
    refused(
        format!("https://localhost:{}", server.port),
        &other_roots,
        "invalid peer certificate: UnknownIssuer",
    );
    // The right roots, but the URI names 127.0.0.1, which the certificate does not.
    refused(
        format!("https://127.0.0.1:{}", server.port),
        &roots,
        "certificate not valid for name",
    );
}

#[test]
fn a_roots_file_without_certificates_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("roots.pem");
    std::fs::write(&empty, "no certificates here\n").unwrap();
    let e = pki::https::roots(Some(&empty)).unwrap_err();
    assert!(e.to_string().contains("no PEM CERTIFICATE block"), "{e}");
    let e = pki::https::roots(Some(&dir.path().join("absent.pem"))).unwrap_err();
    assert!(e.to_string().contains("absent.pem"), "{e}");
}
