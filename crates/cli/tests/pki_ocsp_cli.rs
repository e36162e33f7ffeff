//! `pivgate pki verify --ocsp` against `openssl ocsp` running as the responder on loopback
//! (installed by scripts/setup.sh), with a test PKI made here whose leaves name the responder
//! in their authorityInfoAccess.

mod util;

use pki_issue::ocsp_responder::{responder_builder, with_ocsp_responder};
use pki_issue::{pem_encode, CertificateBuilder, KeyAlgorithm, KeyPair};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use util::{code, pivgate, s, stderr, text};

const GOOD: u64 = 0x2001;
const REVOKED: u64 = 0x2002;
const UNKNOWN: u64 = 0x2003;

struct Responder {
    child: Child,
    port: u16,
}

impl Drop for Responder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `openssl ocsp` on a port it chooses; returns once it listens (it says so).
fn start_responder(dir: &Path) -> Responder {
    let mut child = Command::new("openssl")
        .arg("ocsp")
        .arg("-index")
        .arg(dir.join("index.txt"))
        .args(["-port", "0", "-ndays", "1"])
        .arg("-rsigner")
        .arg(dir.join("responder.pem"))
        .arg("-rkey")
        .arg(dir.join("responder.key"))
        .arg("-CA")
        .arg(dir.join("ca.pem"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port = loop {
        let line = lines
            .next()
            .expect("openssl ocsp exited before listening")
            .unwrap();
        if let Some(rest) = line.strip_prefix("ACCEPT ") {
            let addr = rest.split_whitespace().next().unwrap();
            break addr.rsplit(':').next().unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Responder { child, port }
}

fn index_time(secs: i64) -> String {
    let (y, mo, d, h, mi, s) = pki::time::Time(secs).to_parts();
    format!("{:02}{mo:02}{d:02}{h:02}{mi:02}{s:02}Z", y % 100)
}

/// Writes the CA, a delegated responder and openssl's index; returns the CA and its key.
fn make_ca(dir: &Path) -> (Vec<u8>, KeyPair) {
    let key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let ca = CertificateBuilder::new("CN=CLI OCSP CA,O=Example,C=US", key.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.join("ca.pem"), pem_encode("CERTIFICATE", &ca)).unwrap();
    let rkey = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let responder = responder_builder("CN=CLI OCSP Responder", rkey.spki_der(), true, true)
        .unwrap()
        .sign(&ca, &key)
        .unwrap();
    std::fs::write(
        dir.join("responder.pem"),
        pem_encode("CERTIFICATE", &responder),
    )
    .unwrap();
    std::fs::write(
        dir.join("responder.key"),
        pem_encode("PRIVATE KEY", rkey.pkcs8_der()),
    )
    .unwrap();
    let now = pki_issue::now();
    let exp = index_time(now + 365 * 86_400);
    let rev = index_time(now - 600);
    std::fs::write(
        dir.join("index.txt"),
        format!(
            "V\t{exp}\t\t{GOOD:X}\tunknown\t/CN=Good\n\
             R\t{exp}\t{rev},keyCompromise\t{REVOKED:X}\tunknown\t/CN=Revoked\n"
        ),
    )
    .unwrap();
    (ca, key)
}

fn leaf(dir: &Path, ca: &[u8], key: &KeyPair, serial: u64, aia: &str) -> PathBuf {
    let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let b = CertificateBuilder::new(&format!("CN=Leaf {serial:x}"), k.spki_der())
        .unwrap()
        .serial(serial)
        .end_entity();
    let der = with_ocsp_responder(b, aia).unwrap().sign(ca, key).unwrap();
    let p = dir.join(format!("leaf-{serial:x}.pem"));
    std::fs::write(&p, pem_encode("CERTIFICATE", &der)).unwrap();
    p
}

#[test]
fn verify_asks_the_responder_the_certificate_names() {
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("openssl not installed; skipping");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (ca, key) = make_ca(dir);
    let responder = start_responder(dir);
    let url = format!("http://127.0.0.1:{}", responder.port);
    let good = leaf(dir, &ca, &key, GOOD, &url);
    let revoked = leaf(dir, &ca, &key, REVOKED, &url);
    let unknown = leaf(dir, &ca, &key, UNKNOWN, &url);
    let anchors = dir.join("ca.pem");
    let verify = |extra: &[&str], leaf: &Path| {
        let mut args = vec!["pki", "verify", "--anchors", s(&anchors)];
        args.extend_from_slice(extra);
        args.push(s(leaf));
        pivgate(&args)
    };

    // Without OCSP there is no revocation data at all: INVALID, with a hint.
    let o = verify(&[], &good);
    assert_eq!(code(&o), 1, "{}", text(&o));

    let o = verify(&["--ocsp"], &good);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("VALID"), "{}", text(&o));

    for method in ["get", "post"] {
        let o = verify(
            &[
                "--revocation-source",
                "ocsp",
                "--ocsp-method",
                method,
                "--ocsp-nonce",
                "require",
            ],
            &good,
        );
        assert_eq!(code(&o), 0, "{method}: {}", text(&o));
    }

    let o = verify(&["--ocsp", "--json"], &revoked);
    assert_eq!(code(&o), 1, "{}", text(&o));
    let j: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&o.stdout).trim()).unwrap();
    assert_eq!(j["valid"], false);
    let reason = j["error"].as_str().unwrap();
    assert!(reason.contains("revoked"), "{reason}");
    assert!(reason.contains("key compromise"), "{reason}");

    let o = verify(&["--revocation-source", "ocsp"], &unknown);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("status unknown"), "{}", text(&o));

    // In best-effort mode an unknown status does not refuse, a revocation does.
    let o = verify(&["--ocsp", "--revocation", "best-effort"], &unknown);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = verify(&["--ocsp", "--revocation", "best-effort"], &revoked);
    assert_eq!(code(&o), 1, "{}", text(&o));

    // An override URL is asked instead of the AIA; a dead one is reported, and fails closed.
    let o = verify(&["--ocsp-url", "http://127.0.0.1:1/"], &good);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(stderr(&o).contains("127.0.0.1:1"), "{}", stderr(&o));
    let o = verify(&["--ocsp-url", &url, "--ocsp-hash", "sha256"], &good);
    assert_eq!(code(&o), 0, "{}", text(&o));

    // Bad flags are usage errors.
    let o = verify(&["--ocsp-url", "ftp://127.0.0.1/"], &good);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("http://"), "{}", text(&o));
    let o = verify(&["--revocation-source", "sometimes"], &good);
    assert_eq!(code(&o), 2, "{}", text(&o));
    drop(responder);
}
