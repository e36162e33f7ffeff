//! A real OCSP responder for the tests: `openssl ocsp` (installed by
//! scripts/setup.sh) answering for the test PKI's issuing CA on loopback,
//! signing with the CA's own key.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use pki_issue::{pem_encode, TestPki};

/// The running responder; stopped when dropped.
pub struct Responder {
    child: Child,
    index: PathBuf,
    port: u16,
    /// The issuing CA's certificate.
    ica: Vec<u8>,
}

impl Drop for Responder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `openssl` can be run (the tests that need it skip without it).
pub fn openssl() -> bool {
    Command::new("openssl").arg("version").output().is_ok()
}

fn serial(der: &[u8]) -> String {
    hex::encode_upper(pki::cert::Cert::from_der(der.to_vec()).unwrap().serial())
}

/// openssl's index: `good` valid, `revoked` revoked (keyCompromise).
fn index(good: &[&[u8]], revoked: &[&[u8]]) -> String {
    let mut text = String::new();
    for (i, g) in good.iter().enumerate() {
        text += &format!("V\t491231235959Z\t\t{}\tunknown\t/CN=good{i}\n", serial(g));
    }
    for (i, r) in revoked.iter().enumerate() {
        text += &format!(
            "R\t491231235959Z\t260101000000Z,keyCompromise\t{}\tunknown\t/CN=revoked{i}\n",
            serial(r)
        );
    }
    text
}

impl Responder {
    /// From the next request on, answers `good` for the certificates of
    /// `good` and revoked for those of `revoked`. The index is replaced by
    /// a new file; openssl looks for one before it waits for a connection,
    /// so one request (answered as the old file says) makes it read the new
    /// one before the next.
    pub fn set(&self, good: &[&[u8]], revoked: &[&[u8]]) {
        let next = self.index.with_extension("next");
        std::fs::write(&next, index(good, revoked)).unwrap();
        std::fs::rename(&next, &self.index).unwrap();
        self.ask(
            good.iter()
                .chain(revoked)
                .next()
                .copied()
                .unwrap_or(&self.ica),
        );
    }

    /// The responder's answer (DER) about `cert`, issued by the issuing CA.
    pub fn ask(&self, cert: &[u8]) -> Vec<u8> {
        use pki::ocsp::{encode_request, CertId, CertIdHash};
        use std::io::{Read, Write};
        let parse = |der: &[u8]| pki::cert::Cert::from_der(der.to_vec()).unwrap();
        let id = CertId::new(&parse(cert), &parse(&self.ica), CertIdHash::Sha1);
        let request = encode_request(&[id], None);
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "POST / HTTP/1.0\r\nContent-Type: application/ocsp-request\r\nContent-Length: {}\r\n\r\n",
            request.len()
        )
        .unwrap();
        s.write_all(&request).unwrap();
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).unwrap();
        assert!(
            answer.starts_with(b"HTTP/1.0 200"),
            "the responder did not answer"
        );
        let body = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        answer.split_off(body)
    }
}

/// `openssl ocsp` for the issuing CA of `pki`, with files under `dir`,
/// saying `good` is good and `revoked` revoked; returns its URL once it
/// listens (it says so on its output).
pub fn responder(
    dir: &Path,
    pki: &TestPki,
    good: &[&[u8]],
    revoked: &[&[u8]],
) -> (Responder, String) {
    responder_signed_by(dir, pki, pki, good, revoked)
}

/// [`responder`], its answers signed with the issuing CA's key of `signer`
/// (another PKI's: answers the issuer never signed).
pub fn responder_signed_by(
    dir: &Path,
    pki: &TestPki,
    signer: &TestPki,
    good: &[&[u8]],
    revoked: &[&[u8]],
) -> (Responder, String) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("ica.pem"),
        pem_encode("CERTIFICATE", pki.intermediate_der()),
    )
    .unwrap();
    std::fs::write(
        dir.join("signer.key"),
        pem_encode("PRIVATE KEY", signer.intermediate_key().pkcs8_der()),
    )
    .unwrap();
    std::fs::write(
        dir.join("signer.pem"),
        pem_encode("CERTIFICATE", signer.intermediate_der()),
    )
    .unwrap();
    let index_file = dir.join("index.txt");
    std::fs::write(&index_file, index(good, revoked)).unwrap();
    let mut child = Command::new("openssl")
        .arg("ocsp")
        .arg("-index")
        .arg(&index_file)
        .args(["-port", "0", "-ndays", "1"])
        .arg("-rsigner")
        .arg(dir.join("signer.pem"))
        .arg("-rkey")
        .arg(dir.join("signer.key"))
        .arg("-CA")
        .arg(dir.join("ica.pem"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port: u16 = loop {
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
    (
        Responder {
            child,
            index: index_file,
            port,
            ica: pki.intermediate_der().to_vec(),
        },
        format!("http://127.0.0.1:{port}"),
    )
}
