//! The OCSP client against `openssl ocsp` running as a real responder on loopback (installed
//! by scripts/setup.sh), with a test PKI made here: good, revoked, unknown, responders the CA
//! did not authorise, stale answers, replayed answers with another nonce, malformed answers,
//! and GET and POST. A tiny local HTTP server plays the adversary that replays or damages
//! answers.

use pki::ocsp::client::{
    fetch_for_path, NoncePolicy, OcspClient, OcspConfig, OcspError, RequestMethod,
};
use pki::ocsp::{CertIdHash, OcspProblem, OcspResponse, ResponseError};
use pki::options::RevocationSource;
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{
    validate, RevocationGap, RevocationMode, RevocationProblem, ValidationError, ValidationOptions,
};
use pki_issue::ocsp_responder::{responder_builder, with_ocsp_responder};
use pki_issue::{pem_encode, CertificateBuilder, CrlBuilder, CrlReason, KeyAlgorithm, KeyPair};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

fn openssl_available() -> bool {
    Command::new("openssl").arg("version").output().is_ok()
}

const GOOD: u64 = 0x1001;
const REVOKED: u64 = 0x1002;
const UNKNOWN: u64 = 0x1003;
const HELD: u64 = 0x1004;

/// An issuing CA (the trust anchor), its leaves, and responder certificates of every kind.
struct Pki {
    dir: tempfile::TempDir,
    ca: Vec<u8>,
    ca_key: KeyPair,
    /// Leaves by serial; each names `aia` as its OCSP responder.
    leaves: Vec<(u64, Vec<u8>)>,
}

/// A responder certificate and key, written as PEM files for openssl.
struct Signer {
    cert: PathBuf,
    key: PathBuf,
    der: Vec<u8>,
}

fn t_index(secs: i64) -> String {
    let (y, mo, d, h, mi, s) = Time(secs).to_parts();
    format!("{:02}{mo:02}{d:02}{h:02}{mi:02}{s:02}Z", y % 100)
}

impl Pki {
    fn new(aia: &str) -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let ca = CertificateBuilder::new("CN=OCSP Test CA,O=Example,C=US", ca_key.spki_der())
            .unwrap()
            .ca(None)
            .self_signed(&ca_key)
            .unwrap();
        let mut p = Pki {
            dir,
            ca,
            ca_key,
            leaves: Vec::new(),
        };
        p.issue_leaves(aia);
        std::fs::write(p.path("ca.pem"), pem_encode("CERTIFICATE", &p.ca)).unwrap();
        std::fs::write(
            p.path("ca.key"),
            pem_encode("PRIVATE KEY", p.ca_key.pkcs8_der()),
        )
        .unwrap();
        // openssl's CA database: the unknown serial is left out.
        let now = pki_issue::now();
        let exp = t_index(now + 365 * 86_400);
        let rev = t_index(now - 3600);
        let index = format!(
            "V\t{exp}\t\t{GOOD:X}\tunknown\t/CN=Leaf {GOOD:x}\n\
             R\t{exp}\t{rev},keyCompromise\t{REVOKED:X}\tunknown\t/CN=Leaf {REVOKED:x}\n\
             R\t{exp}\t{rev},certificateHold\t{HELD:X}\tunknown\t/CN=Leaf {HELD:x}\n"
        );
        std::fs::write(p.path("index.txt"), index).unwrap();
        p
    }

    /// (Re-)issues the leaves, naming `aia` as their OCSP responder.
    fn issue_leaves(&mut self, aia: &str) {
        self.leaves.clear();
        for serial in [GOOD, REVOKED, UNKNOWN, HELD] {
            let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
            let b = CertificateBuilder::new(&format!("CN=Leaf {serial:x}"), k.spki_der())
                .unwrap()
                .serial(serial)
                .end_entity();
            let leaf = with_ocsp_responder(b, aia)
                .unwrap()
                .sign(&self.ca, &self.ca_key)
                .unwrap();
            self.leaves.push((serial, leaf));
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn leaf(&self, serial: u64) -> &[u8] {
        &self.leaves.iter().find(|(s, _)| *s == serial).unwrap().1
    }

    fn store(&self) -> TrustStore {
        let mut b = TrustStore::builder();
        b.add_anchor_der(self.ca.clone());
        b.build()
    }

    /// A responder certificate issued by `issuer` (the CA unless given).
    fn signer(
        &self,
        name: &str,
        issuer: Option<(&[u8], &KeyPair)>,
        ocsp_signing: bool,
        nocheck: bool,
    ) -> Signer {
        let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let (icert, ikey) = issuer.unwrap_or((&self.ca, &self.ca_key));
        let der = responder_builder(
            &format!("CN={name},O=Example,C=US"),
            k.spki_der(),
            ocsp_signing,
            nocheck,
        )
        .unwrap()
        .sign(icert, ikey)
        .unwrap();
        let cert = self.path(&format!("{name}.pem"));
        let key = self.path(&format!("{name}.key"));
        std::fs::write(&cert, pem_encode("CERTIFICATE", &der)).unwrap();
        std::fs::write(&key, pem_encode("PRIVATE KEY", k.pkcs8_der())).unwrap();
        Signer { cert, key, der }
    }

    /// The CA itself as the signer.
    fn ca_signer(&self) -> Signer {
        Signer {
            cert: self.path("ca.pem"),
            key: self.path("ca.key"),
            der: self.ca.clone(),
        }
    }
}

/// `openssl ocsp` answering on a port of its choosing, stopped when dropped.
struct Responder {
    child: Child,
    url: String,
}

impl Drop for Responder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Responder {
    fn start(pki: &Pki, signer: &Signer, extra: &[&str]) -> Responder {
        let mut child = Command::new("openssl")
            .arg("ocsp")
            .arg("-index")
            .arg(pki.path("index.txt"))
            .args(["-port", "0"])
            .arg("-rsigner")
            .arg(&signer.cert)
            .arg("-rkey")
            .arg(&signer.key)
            .arg("-CA")
            .arg(pki.path("ca.pem"))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // openssl prints "ACCEPT [::]:PORT PID=…" once it listens.
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let port = loop {
            let line = lines
                .next()
                .expect("openssl ocsp exited before listening")
                .unwrap();
            if let Some(rest) = line.strip_prefix("ACCEPT ") {
                let addr = rest.split_whitespace().next().unwrap();
                break addr.rsplit(':').next().unwrap().parse::<u16>().unwrap();
            }
        };
        // Keep draining its output so it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        // It listens already (an empty probe connection would make openssl 3.0 spin).
        Responder {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

/// Asks the responder with openssl's own client and returns the DER response.
fn capture(pki: &Pki, leaf: &[u8], url: &str, nonce: bool) -> Vec<u8> {
    let leaf_path = pki.path("capture-leaf.pem");
    std::fs::write(&leaf_path, pem_encode("CERTIFICATE", leaf)).unwrap();
    let out = pki.path("captured.der");
    let status = Command::new("openssl")
        .arg("ocsp")
        .arg("-issuer")
        .arg(pki.path("ca.pem"))
        .arg("-cert")
        .arg(&leaf_path)
        .args(["-url", url, "-noverify"])
        .args(if nonce { &[][..] } else { &["-no_nonce"][..] })
        .arg("-respout")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read(out).unwrap()
}

/// A one-purpose HTTP server on loopback answering every request with `body` as
/// `content_type`, for as long as the value lives.
struct Replay {
    url: String,
    _stop: Arc<()>,
}

fn replay(content_type: &'static str, body: Vec<u8>) -> Replay {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = Arc::new(());
    let weak = Arc::downgrade(&stop);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            if weak.upgrade().is_none() {
                break;
            }
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut request_body = vec![0; length];
            let _ = reader.read_exact(&mut request_body);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(&body);
        }
    });
    Replay { url, _stop: stop }
}

fn config(url: Option<&str>, method: RequestMethod) -> OcspConfig {
    OcspConfig {
        method,
        responder_url: url.map(str::to_string),
        retry_after_secs: 0,
        ..OcspConfig::default()
    }
}

fn ocsp_only(time: Time) -> ValidationOptions {
    let mut o = ValidationOptions {
        time,
        ..ValidationOptions::default()
    };
    o.revocation.mode = RevocationMode::Require;
    o.revocation.source = RevocationSource::Ocsp;
    o
}

/// Fetches for `leaf`'s path and validates with `opts`.
fn check(
    pki: &Pki,
    client: &OcspClient,
    leaf: &[u8],
    crls: &RevocationSet,
    opts: &ValidationOptions,
) -> (Result<(), ValidationError>, Vec<OcspError>) {
    let store = pki.store();
    let got = fetch_for_path(client, &store, leaf, &[], crls, opts);
    let r = validate(&store, leaf, &[], &got.crls, opts).map(|_| ());
    (r, got.errors)
}

fn ocsp_problems(e: &ValidationError) -> Vec<OcspProblem> {
    match e {
        ValidationError::RevocationUnavailable {
            detail: RevocationGap::Unusable(p),
            ..
        } => p
            .iter()
            .filter_map(|p| match p {
                RevocationProblem::Ocsp(o) => Some(o.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Validates `leaf` with one captured response as the only revocation data.
fn validate_with(
    pki: &Pki,
    leaf: &[u8],
    der: Vec<u8>,
    opts: &ValidationOptions,
) -> Result<(), ValidationError> {
    let resp = Arc::new(OcspResponse::from_der(der).unwrap());
    let set = RevocationSet::empty().with_ocsp(&[resp]);
    validate(&pki.store(), leaf, &[], &set, opts).map(|_| ())
}

#[test]
fn good_revoked_unknown_over_get_and_post_with_a_delegated_responder() {
    if !openssl_available() {
        eprintln!("openssl not installed; skipping");
        return;
    }
    // The leaves name the responder in their AIA; its port is known once it runs (it needs
    // only the CA and its index), so the leaves are issued again with its URL.
    let mut pki = Pki::new("http://127.0.0.1:1/");
    let signer = pki.signer("Delegated Responder", None, true, true);
    let responder = Responder::start(&pki, &signer, &["-ndays", "1"]);
    pki.issue_leaves(&responder.url);
    let now = Time::now();
    let opts = ocsp_only(now);
    for method in [RequestMethod::Get, RequestMethod::Post, RequestMethod::Auto] {
        for hash in [CertIdHash::Sha1, CertIdHash::Sha256] {
            let client = OcspClient::new(OcspConfig {
                hash,
                nonce: NoncePolicy::Require,
                ..config(None, method)
            });
            let (r, errors) = check(
                &pki,
                &client,
                pki.leaf(GOOD),
                &RevocationSet::empty(),
                &opts,
            );
            assert!(errors.is_empty(), "{method:?} {hash:?}: {errors:?}");
            r.unwrap_or_else(|e| panic!("{method:?} {hash:?}: {e}"));

            let (r, _) = check(
                &pki,
                &client,
                pki.leaf(REVOKED),
                &RevocationSet::empty(),
                &opts,
            );
            match r.unwrap_err() {
                ValidationError::Revoked { reason, .. } => {
                    assert_eq!(reason, pki::crl::Reason::KeyCompromise)
                }
                e => panic!("{method:?}: {e}"),
            }
            let (r, _) = check(
                &pki,
                &client,
                pki.leaf(HELD),
                &RevocationSet::empty(),
                &opts,
            );
            assert!(
                matches!(
                    r,
                    Err(ValidationError::Revoked {
                        reason: pki::crl::Reason::CertificateHold,
                        ..
                    })
                ),
                "{r:?}"
            );

            let (r, _) = check(
                &pki,
                &client,
                pki.leaf(UNKNOWN),
                &RevocationSet::empty(),
                &opts,
            );
            let e = r.unwrap_err();
            assert!(
                ocsp_problems(&e)
                    .iter()
                    .any(|p| matches!(p, OcspProblem::StatusUnknown { .. })),
                "{e}"
            );
            assert!(e.to_string().contains("status unknown"), "{e}");
            assert_eq!(client.len(), 4);
        }
    }

    // Answers are cached until nextUpdate and shared: with the responder gone, the same
    // client still answers, and the revoked leaf stays revoked.
    let client = OcspClient::new(config(None, RequestMethod::Auto));
    let store = pki.store();
    let first = fetch_for_path(
        &client,
        &store,
        pki.leaf(GOOD),
        &[],
        &RevocationSet::empty(),
        &opts,
    );
    assert!(first.errors.is_empty());
    drop(responder);
    let again = fetch_for_path(
        &client,
        &store,
        pki.leaf(GOOD),
        &[],
        &RevocationSet::empty(),
        &opts,
    );
    assert!(again.errors.is_empty(), "{:?}", again.errors);
    validate(&store, pki.leaf(GOOD), &[], &again.crls, &opts).unwrap();
    // A client that never asked has nothing and cannot reach the responder.
    let cold = OcspClient::new(config(None, RequestMethod::Auto));
    let (r, errors) = check(&pki, &cold, pki.leaf(GOOD), &RevocationSet::empty(), &opts);
    assert!(
        matches!(errors[..], [OcspError::Transport { .. }]),
        "{errors:?}"
    );
    assert!(ocsp_problems(&r.unwrap_err()).contains(&OcspProblem::NoResponse));
    // In best-effort mode a missing answer does not refuse.
    let mut lenient = opts.clone();
    lenient.revocation.mode = RevocationMode::BestEffort;
    let cold = OcspClient::new(config(None, RequestMethod::Auto));
    check(
        &pki,
        &cold,
        pki.leaf(GOOD),
        &RevocationSet::empty(),
        &lenient,
    )
    .0
    .unwrap();
}

#[test]
fn the_ca_itself_may_sign_and_the_responder_url_may_be_configured() {
    if !openssl_available() {
        return;
    }
    let pki = Pki::new("http://127.0.0.1:1/unused");
    let responder = Responder::start(&pki, &pki.ca_signer(), &["-ndays", "1"]);
    let client = OcspClient::new(config(Some(&responder.url), RequestMethod::Post));
    let opts = ocsp_only(Time::now());
    let (r, errors) = check(
        &pki,
        &client,
        pki.leaf(GOOD),
        &RevocationSet::empty(),
        &opts,
    );
    assert!(errors.is_empty(), "{errors:?}");
    r.unwrap();
    let (r, _) = check(
        &pki,
        &client,
        pki.leaf(REVOKED),
        &RevocationSet::empty(),
        &opts,
    );
    assert!(matches!(r, Err(ValidationError::Revoked { .. })), "{r:?}");
    // Without the override the leaves' AIA (a closed port) is asked, and nothing is known.
    let plain = OcspClient::new(config(None, RequestMethod::Post));
    let (r, errors) = check(&pki, &plain, pki.leaf(GOOD), &RevocationSet::empty(), &opts);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].to_string().contains("127.0.0.1:1/unused"),
        "{}",
        errors[0]
    );
    assert!(r.is_err());
}

#[test]
fn responders_the_ca_did_not_authorise_are_refused() {
    if !openssl_available() {
        return;
    }
    let pki = Pki::new("http://127.0.0.1:1/");
    let opts = ocsp_only(Time::now());
    // A responder certificate with id-kp-OCSPSigning, but issued by another CA of the same
    // name (only the signature tells them apart).
    let rogue_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let rogue_ca = CertificateBuilder::new("CN=OCSP Test CA,O=Example,C=US", rogue_key.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&rogue_key)
        .unwrap();
    let other = pki.signer(
        "Other CA Responder",
        Some((&rogue_ca, &rogue_key)),
        true,
        true,
    );
    // Issued by the CA, but without id-kp-OCSPSigning.
    let no_eku = pki.signer("Plain Certificate", None, false, true);
    for signer in [&other, &no_eku] {
        let responder = Responder::start(&pki, signer, &["-ndays", "1"]);
        let client = OcspClient::new(config(Some(&responder.url), RequestMethod::Post));
        let (r, errors) = check(
            &pki,
            &client,
            pki.leaf(GOOD),
            &RevocationSet::empty(),
            &opts,
        );
        assert!(
            matches!(
                &errors[..],
                [OcspError::Unauthorized {
                    problem: OcspProblem::UnauthorizedResponder { .. },
                    ..
                }]
            ),
            "{errors:?}"
        );
        assert!(r.is_err());
        // The same answer handed to validation directly is refused there too, with the reason.
        let der = capture(&pki, pki.leaf(GOOD), &responder.url, true);
        let e = validate_with(&pki, pki.leaf(GOOD), der, &opts).unwrap_err();
        assert!(
            ocsp_problems(&e)
                .iter()
                .any(|p| p.code() == "ocsp-unauthorized-responder"),
            "{e}"
        );
        assert!(e.to_string().contains("id-kp-OCSPSigning"), "{e}");
        // Even a revoked answer from it proves nothing.
        let der = capture(&pki, pki.leaf(REVOKED), &responder.url, true);
        let e = validate_with(&pki, pki.leaf(REVOKED), der, &opts).unwrap_err();
        assert!(!matches!(e, ValidationError::Revoked { .. }), "{e}");
    }
}

#[test]
fn a_responder_without_nocheck_is_checked_against_the_ca_crl() {
    if !openssl_available() {
        return;
    }
    let pki = Pki::new("http://127.0.0.1:1/");
    let signer = pki.signer("Checked Responder", None, true, false);
    let responder = Responder::start(&pki, &signer, &["-ndays", "1"]);
    let client = OcspClient::new(config(Some(&responder.url), RequestMethod::Get));
    let now = Time::now();
    let opts = ocsp_only(now);
    // No CRL: the responder's own status is unknown, so its answer is not relied on.
    let (r, errors) = check(
        &pki,
        &client,
        pki.leaf(GOOD),
        &RevocationSet::empty(),
        &opts,
    );
    assert!(errors.is_empty(), "{errors:?}");
    let e = r.unwrap_err();
    assert!(
        ocsp_problems(&e)
            .iter()
            .any(|p| p.code() == "ocsp-responder-unchecked"),
        "{e}"
    );
    // A current CRL of the CA that does not list the responder: the answer counts.
    let crl = |revoke_responder: bool| {
        let mut b = CrlBuilder::new().update_times(now.0 - 60, Some(now.0 + 86_400));
        if revoke_responder {
            let c = pki::cert::Cert::from_der(signer.der.clone()).unwrap();
            b = b.revoke(c.serial(), now.0 - 60, Some(CrlReason::KeyCompromise));
        }
        let mut s = RevocationSet::builder();
        s.add_der(b.sign(&pki.ca, &pki.ca_key).unwrap()).unwrap();
        s.build()
    };
    let (r, _) = check(&pki, &client, pki.leaf(GOOD), &crl(false), &opts);
    r.unwrap();
    // The same CRL revoking the responder: its answers are void.
    let (r, _) = check(&pki, &client, pki.leaf(GOOD), &crl(true), &opts);
    let e = r.unwrap_err();
    assert!(e.to_string().contains("Checked Responder"), "{e}");
    assert!(e.to_string().contains("revoked"), "{e}");
}

#[test]
fn stale_answers_are_refused_after_next_update_or_beyond_the_maximum_age() {
    if !openssl_available() {
        return;
    }
    let pki = Pki::new("http://127.0.0.1:1/");
    let signer = pki.signer("Delegated Responder", None, true, true);
    // nextUpdate one minute after thisUpdate.
    let responder = Responder::start(&pki, &signer, &["-nmin", "1"]);
    let der = capture(&pki, pki.leaf(GOOD), &responder.url, true);
    let now = Time::now();
    validate_with(&pki, pki.leaf(GOOD), der.clone(), &ocsp_only(now)).unwrap();
    // A day later it is stale; the clock-skew tolerance (5 min) does not stretch that far.
    let e = validate_with(
        &pki,
        pki.leaf(GOOD),
        der.clone(),
        &ocsp_only(now.plus_secs(86_400)),
    )
    .unwrap_err();
    assert!(
        ocsp_problems(&e).iter().any(|p| p.code() == "ocsp-expired"),
        "{e}"
    );
    // Within the grace period it still counts.
    let mut graced = ocsp_only(now.plus_secs(86_400));
    graced.revocation.grace = std::time::Duration::from_secs(2 * 86_400);
    validate_with(&pki, pki.leaf(GOOD), der.clone(), &graced).unwrap();
    // An answer from the future (beyond the skew) is not yet valid.
    let e = validate_with(&pki, pki.leaf(GOOD), der, &ocsp_only(now.plus_secs(-3600))).unwrap_err();
    assert!(
        ocsp_problems(&e)
            .iter()
            .any(|p| p.code() == "ocsp-not-yet-valid"),
        "{e}"
    );
    drop(responder);

    // Without nextUpdate: accepted within the maximum age (1 h by default), not after.
    let responder = Responder::start(&pki, &signer, &[]);
    let der = capture(&pki, pki.leaf(GOOD), &responder.url, true);
    assert!(OcspResponse::from_der(der.clone()).unwrap().responses[0]
        .next_update
        .is_none());
    validate_with(&pki, pki.leaf(GOOD), der.clone(), &ocsp_only(now)).unwrap();
    // A result cached from it holds no longer than the maximum age.
    let parsed = Arc::new(OcspResponse::from_der(der.clone()).unwrap());
    let this_update = parsed.responses[0].this_update;
    let set = RevocationSet::empty().with_ocsp(&[parsed]);
    let path = validate(&pki.store(), pki.leaf(GOOD), &[], &set, &ocsp_only(now)).unwrap();
    assert_eq!(path.valid_until(), this_update.plus_secs(3600));
    let e = validate_with(&pki, pki.leaf(GOOD), der, &ocsp_only(now.plus_secs(7200))).unwrap_err();
    assert!(
        ocsp_problems(&e).iter().any(|p| p.code() == "ocsp-too-old"),
        "{e}"
    );
}

#[test]
fn a_replayed_answer_with_another_nonce_is_refused() {
    if !openssl_available() {
        return;
    }
    let pki = Pki::new("http://127.0.0.1:1/");
    let signer = pki.signer("Delegated Responder", None, true, true);
    let responder = Responder::start(&pki, &signer, &["-ndays", "1"]);
    let with_nonce = capture(&pki, pki.leaf(GOOD), &responder.url, true);
    let without_nonce = capture(&pki, pki.leaf(GOOD), &responder.url, false);
    drop(responder);
    assert!(OcspResponse::from_der(with_nonce.clone())
        .unwrap()
        .nonce
        .is_some());
    assert!(OcspResponse::from_der(without_nonce.clone())
        .unwrap()
        .nonce
        .is_none());
    let opts = ocsp_only(Time::now());

    // The genuine, signed answer to someone else's request: its nonce is not ours.
    let server = replay("application/ocsp-response", with_nonce);
    for nonce in [NoncePolicy::Prefer, NoncePolicy::Require] {
        let client = OcspClient::new(OcspConfig {
            nonce,
            ..config(Some(&server.url), RequestMethod::Post)
        });
        let (r, errors) = check(
            &pki,
            &client,
            pki.leaf(GOOD),
            &RevocationSet::empty(),
            &opts,
        );
        assert!(
            matches!(&errors[..], [OcspError::NonceMismatch { .. }]),
            "{errors:?}"
        );
        assert!(r.is_err());
        assert!(client.is_empty());
    }
    // Without a nonce: accepted when preferred (pre-produced answers), refused when required.
    let server = replay("application/ocsp-response", without_nonce);
    let client = OcspClient::new(OcspConfig {
        nonce: NoncePolicy::Require,
        ..config(Some(&server.url), RequestMethod::Get)
    });
    let (_, errors) = check(
        &pki,
        &client,
        pki.leaf(GOOD),
        &RevocationSet::empty(),
        &opts,
    );
    assert!(
        matches!(&errors[..], [OcspError::NonceMissing { .. }]),
        "{errors:?}"
    );
    let client = OcspClient::new(OcspConfig {
        nonce: NoncePolicy::Prefer,
        ..config(Some(&server.url), RequestMethod::Get)
    });
    let (r, errors) = check(
        &pki,
        &client,
        pki.leaf(GOOD),
        &RevocationSet::empty(),
        &opts,
    );
    assert!(errors.is_empty(), "{errors:?}");
    r.unwrap();
}

#[test]
fn malformed_answers_are_errors_not_statuses() {
    if !openssl_available() {
        return;
    }
    let pki = Pki::new("http://127.0.0.1:1/");
    let signer = pki.signer("Delegated Responder", None, true, true);
    let responder = Responder::start(&pki, &signer, &["-ndays", "1"]);
    let genuine = capture(&pki, pki.leaf(GOOD), &responder.url, false);
    drop(responder);
    let opts = ocsp_only(Time::now());
    let truncated = genuine[..genuine.len() - 7].to_vec();
    // The last octet of the response's own signature changed.
    let mut flipped = genuine.clone();
    let parsed = OcspResponse::from_der(genuine.clone()).unwrap();
    let at = parsed.signature().as_ptr() as usize - parsed.der().as_ptr() as usize
        + parsed.signature().len()
        - 1;
    flipped[at] ^= 0x01;
    type Expect = fn(&OcspError) -> bool;
    let cases: Vec<(&str, Vec<u8>, Expect)> = vec![
        (
            "application/ocsp-response",
            b"<html>It works</html>".to_vec(),
            |e| {
                matches!(
                    e,
                    OcspError::Response {
                        source: ResponseError::Malformed { .. },
                        ..
                    }
                )
            },
        ),
        ("application/ocsp-response", truncated, |e| {
            matches!(
                e,
                OcspError::Response {
                    source: ResponseError::Malformed { .. },
                    ..
                }
            )
        }),
        ("text/html", genuine.clone(), |e| {
            matches!(e, OcspError::ContentType { .. })
        }),
        (
            "application/ocsp-response",
            vec![0x30, 3, 0x0a, 1, 1],
            |e| e.to_string().contains("malformedRequest"),
        ),
        ("application/ocsp-response", vec![0; 70 * 1024], |e| {
            matches!(e, OcspError::TooLarge { .. })
        }),
        ("application/ocsp-response", flipped, |e| {
            matches!(
                e,
                OcspError::Unauthorized {
                    problem: OcspProblem::BadSignature { .. },
                    ..
                }
            )
        }),
    ];
    for (i, (content_type, body, expected)) in cases.into_iter().enumerate() {
        let server = replay(content_type, body);
        let client = OcspClient::new(config(Some(&server.url), RequestMethod::Post));
        let (r, errors) = check(
            &pki,
            &client,
            pki.leaf(GOOD),
            &RevocationSet::empty(),
            &opts,
        );
        assert!(
            errors.len() == 1 && expected(&errors[0]),
            "case {i}: {errors:?}"
        );
        assert!(r.is_err(), "case {i}");
        assert!(client.is_empty(), "case {i}");
    }
}

#[test]
fn either_falls_back_to_crls_and_both_needs_both() {
    if !openssl_available() {
        return;
    }
    let pki = Pki::new("http://127.0.0.1:1/");
    let signer = pki.signer("Delegated Responder", None, true, true);
    let responder = Responder::start(&pki, &signer, &["-ndays", "1"]);
    let now = Time::now();
    let crls = |revoke_good: bool| {
        let mut b = CrlBuilder::new().update_times(now.0 - 60, Some(now.0 + 86_400));
        if revoke_good {
            b = b.revoke(&[0x10, 0x01], now.0 - 60, Some(CrlReason::Superseded));
        }
        let mut s = RevocationSet::builder();
        s.add_der(b.sign(&pki.ca, &pki.ca_key).unwrap()).unwrap();
        s.build()
    };
    let mut opts = ocsp_only(now);
    // Either: the responder unreachable (the leaves' AIA is a closed port), the CRL decides.
    opts.revocation.source = RevocationSource::Either;
    let dead = OcspClient::new(config(None, RequestMethod::Post));
    check(&pki, &dead, pki.leaf(GOOD), &crls(false), &opts)
        .0
        .unwrap();
    let (r, _) = check(&pki, &dead, pki.leaf(GOOD), &crls(true), &opts);
    assert!(matches!(r, Err(ValidationError::Revoked { .. })), "{r:?}");
    // Neither: both reasons are given.
    let (r, _) = check(&pki, &dead, pki.leaf(GOOD), &RevocationSet::empty(), &opts);
    let e = r.unwrap_err();
    assert!(e.to_string().contains("no OCSP response"), "{e}");
    assert!(e.to_string().contains("no CRL issued by"), "{e}");
    // Either: a good OCSP answer does not outweigh a CRL held that revokes the certificate;
    // a missing CRL does not count against it.
    let live = OcspClient::new(config(Some(&responder.url), RequestMethod::Post));
    let (r, _) = check(&pki, &live, pki.leaf(GOOD), &crls(true), &opts);
    assert!(matches!(r, Err(ValidationError::Revoked { .. })), "{r:?}");
    check(&pki, &live, pki.leaf(GOOD), &crls(false), &opts)
        .0
        .unwrap();
    check(&pki, &live, pki.leaf(GOOD), &RevocationSet::empty(), &opts)
        .0
        .unwrap();
    // Both: a good OCSP answer and a CRL revoking the certificate is revoked; without a CRL
    // it is not enough.
    opts.revocation.source = RevocationSource::Both;
    check(&pki, &live, pki.leaf(GOOD), &crls(false), &opts)
        .0
        .unwrap();
    let (r, _) = check(&pki, &live, pki.leaf(GOOD), &crls(true), &opts);
    assert!(matches!(r, Err(ValidationError::Revoked { .. })), "{r:?}");
    let (r, _) = check(&pki, &live, pki.leaf(GOOD), &RevocationSet::empty(), &opts);
    assert!(
        matches!(r, Err(ValidationError::RevocationUnavailable { .. })),
        "{r:?}"
    );
}

/// An answer about the good leaf with it marked in the responder's database as good, or
/// as revoked for `revoked` (an openssl reason name), captured without a nonce.
fn capture_as(pki: &Pki, signer: &Signer, revoked: Option<&str>) -> Vec<u8> {
    let now = pki_issue::now();
    let exp = t_index(now + 365 * 86_400);
    let line = match revoked {
        None => format!("V\t{exp}\t\t{GOOD:X}\tunknown\t/CN=Leaf {GOOD:x}\n"),
        Some(reason) => format!(
            "R\t{exp}\t{},{reason}\t{GOOD:X}\tunknown\t/CN=Leaf {GOOD:x}\n",
            t_index(now - 3600)
        ),
    };
    std::fs::write(pki.path("index.txt"), line).unwrap();
    let responder = Responder::start(pki, signer, &["-ndays", "1"]);
    capture(pki, pki.leaf(GOOD), &responder.url, false)
}

fn status_held(client: &OcspClient, pki: &Pki) -> pki::ocsp::CertStatus {
    let leaf = pki::cert::Cert::from_der(pki.leaf(GOOD).to_vec()).unwrap();
    let ca = pki::cert::Cert::from_der(pki.ca.clone()).unwrap();
    client.cached(&leaf, &ca).unwrap().responses[0].status
}

#[test]
fn a_replayed_older_or_unrevoking_answer_does_not_roll_the_status_back() {
    if !openssl_available() {
        return;
    }
    let pki = Pki::new("http://127.0.0.1:1/");
    let signer = pki.signer("Delegated Responder", None, true, true);
    // thisUpdate has a resolution of one second: the answers are a second apart.
    let second = std::time::Duration::from_millis(1100);
    let old_good = capture_as(&pki, &signer, None);
    std::thread::sleep(second);
    let revoked = capture_as(&pki, &signer, Some("keyCompromise"));
    let held = capture_as(&pki, &signer, Some("certificateHold"));
    std::thread::sleep(second);
    let new_good = capture_as(&pki, &signer, None);
    let parse = |d: &Vec<u8>| Arc::new(OcspResponse::from_der(d.clone()).unwrap());
    assert!(parse(&old_good).responses[0].this_update < parse(&revoked).responses[0].this_update);
    assert!(parse(&revoked).responses[0].this_update < parse(&new_good).responses[0].this_update);

    let leaf = pki::cert::Cert::from_der(pki.leaf(GOOD).to_vec()).unwrap();
    let ca = pki::cert::Cert::from_der(pki.ca.clone()).unwrap();
    let now = Time::now();
    let opts = ocsp_only(now);
    let is_revoked = |s: pki::ocsp::CertStatus| matches!(s, pki::ocsp::CertStatus::Revoked { .. });
    for (replayed, what) in [(&old_good, "an older good"), (&new_good, "a newer good")] {
        let server = replay("application/ocsp-response", replayed.clone());
        let client = OcspClient::new(OcspConfig {
            nonce: NoncePolicy::Prefer,
            ..config(Some(&server.url), RequestMethod::Post)
        });
        assert!(client.insert(&leaf, &ca, parse(&revoked), now));
        // A background refresh gets the replayed answer: the revocation stands, in what is
        // answered and in what is held.
        let got = client.refresh(&leaf, &ca, now).unwrap();
        assert!(is_revoked(got.responses[0].status), "{what}");
        assert!(is_revoked(status_held(&client, &pki)), "{what}");
        let set = RevocationSet::empty().with_ocsp(&client.responses());
        let r = validate(&pki.store(), pki.leaf(GOOD), &[], &set, &opts);
        assert!(
            matches!(r, Err(ValidationError::Revoked { .. })),
            "{what}: {r:?}"
        );
        // Nor can it be put in by hand.
        assert!(!client.insert(&leaf, &ca, parse(replayed), now), "{what}");
        assert!(is_revoked(status_held(&client, &pki)), "{what}");
    }
    // An older answer does not replace an older hold either; a newer good one lifts it.
    let server = replay("application/ocsp-response", old_good.clone());
    let client = OcspClient::new(OcspConfig {
        nonce: NoncePolicy::Prefer,
        ..config(Some(&server.url), RequestMethod::Post)
    });
    assert!(client.insert(&leaf, &ca, parse(&held), now));
    client.refresh(&leaf, &ca, now).unwrap();
    assert!(is_revoked(status_held(&client, &pki)));
    assert!(client.insert(&leaf, &ca, parse(&new_good), now));
    assert_eq!(status_held(&client, &pki), pki::ocsp::CertStatus::Good);
}

#[test]
fn a_responder_certificate_with_an_unknown_critical_extension_is_refused() {
    if !openssl_available() {
        return;
    }
    let pki = Pki::new("http://127.0.0.1:1/");
    let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let der = responder_builder(
        "CN=Restricted Responder,O=Example,C=US",
        k.spki_der(),
        true,
        true,
    )
    .unwrap()
    .extension("1.2.3.4.5".parse().unwrap(), true, &[0x05, 0x00])
    .unwrap()
    .sign(&pki.ca, &pki.ca_key)
    .unwrap();
    let signer = Signer {
        cert: pki.path("restricted.pem"),
        key: pki.path("restricted.key"),
        der,
    };
    std::fs::write(&signer.cert, pem_encode("CERTIFICATE", &signer.der)).unwrap();
    std::fs::write(&signer.key, pem_encode("PRIVATE KEY", k.pkcs8_der())).unwrap();
    let responder = Responder::start(&pki, &signer, &["-ndays", "1"]);
    let der = capture(&pki, pki.leaf(GOOD), &responder.url, true);
    let e = validate_with(&pki, pki.leaf(GOOD), der, &ocsp_only(Time::now())).unwrap_err();
    assert!(
        ocsp_problems(&e)
            .iter()
            .any(|p| p.code() == "ocsp-unknown-critical-extension"),
        "{e}"
    );
}

/// DER tag-length-value.
fn der(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = value.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(value);
    out
}

/// The contents of the DER element at the start of `d`, and the rest.
fn element(d: &[u8]) -> (&[u8], &[u8]) {
    let (len, head) = match d[1] {
        n if n < 0x80 => (n as usize, 2),
        n => {
            let k = (n & 0x7f) as usize;
            let len = d[2..2 + k]
                .iter()
                .fold(0usize, |a, b| (a << 8) | *b as usize);
            (len, 2 + k)
        }
    };
    (&d[head..head + len], &d[head + len..])
}

#[test]
fn a_responder_certificate_whose_signature_algorithms_disagree_is_refused() {
    if !openssl_available() {
        return;
    }
    let pki = Pki::new("http://127.0.0.1:1/");
    let k = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let good = responder_builder("CN=Odd Responder,O=Example,C=US", k.spki_der(), true, true)
        .unwrap()
        .sign(&pki.ca, &pki.ca_key)
        .unwrap();
    // The signature field inside the signed part says ecdsa-with-SHA384 while the outer one
    // (and the signature, made again over the changed part) is ecdsa-with-SHA256.
    let (cert, _) = element(&good);
    let (_, rest) = element(cert);
    let tbs_len = cert.len() - rest.len();
    let mut tbs_der = cert[..tbs_len].to_vec();
    let sha256 = [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
    let at = tbs_der
        .windows(sha256.len())
        .position(|w| w == sha256)
        .unwrap();
    tbs_der[at + sha256.len() - 1] = 0x03;
    let (_, after_alg) = element(rest);
    let outer_alg = &rest[..rest.len() - after_alg.len()];
    let mut bits = vec![0u8];
    bits.extend(pki.ca_key.sign(&tbs_der).unwrap());
    let odd = der(
        0x30,
        &[tbs_der, outer_alg.to_vec(), der(0x03, &bits)].concat(),
    );
    let parsed = pki::cert::Cert::from_der(odd.clone()).unwrap();
    assert!(!parsed.algorithms_match);

    let signer = Signer {
        cert: pki.path("odd.pem"),
        key: pki.path("odd.key"),
        der: odd,
    };
    std::fs::write(&signer.cert, pem_encode("CERTIFICATE", &signer.der)).unwrap();
    std::fs::write(&signer.key, pem_encode("PRIVATE KEY", k.pkcs8_der())).unwrap();
    let responder = Responder::start(&pki, &signer, &["-ndays", "1"]);
    let der = capture(&pki, pki.leaf(GOOD), &responder.url, true);
    let e = validate_with(&pki, pki.leaf(GOOD), der, &ocsp_only(Time::now())).unwrap_err();
    assert!(
        ocsp_problems(&e)
            .iter()
            .any(|p| p.code() == "ocsp-unauthorized-responder"),
        "{e}"
    );
}
