//! Path discovery over AIA caIssuers and SIA caRepository against a tiny HTTP server on
//! 127.0.0.1 run by the test, with the pool of intermediates given empty: a bridged path
//! (end entity, its CA, the agency root's cross-certificate from the bridge, the bridge as
//! trust anchor) is found from the `.p7c` files the certificates name; responses are kept on
//! disk for their lifetime; a redirect to another host is not followed; the count limit holds.

use const_oid::ObjectIdentifier;
use pki::discover::{Discovery, DiscoveryConfig};
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{RevocationMode, ValidationOptions};
use pki_issue::{certs_only_p7c, now, CertificateBuilder, KeyAlgorithm, KeyPair};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Clone)]
enum Answer {
    Body(Vec<u8>, &'static str),
    Redirect(String),
}

struct Server {
    base: String,
    routes: Arc<Mutex<Vec<(String, Answer)>>>,
    requests: Arc<AtomicUsize>,
}

impl Server {
    fn start(ip: &str) -> Server {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let routes: Arc<Mutex<Vec<(String, Answer)>>> = Arc::default();
        let requests = Arc::new(AtomicUsize::new(0));
        let (r, n) = (routes.clone(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { break };
                let r = r.clone();
                let n = n.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut line = String::new();
                    if reader.read_line(&mut line).is_err() {
                        return;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                    }
                    n.fetch_add(1, Ordering::SeqCst);
                    let answer = r
                        .lock()
                        .unwrap()
                        .iter()
                        .find(|(p, _)| *p == path)
                        .map(|(_, a)| a.clone());
                    match answer {
                        Some(Answer::Body(b, cache)) => {
                            let _ = write!(
                                stream,
                                "HTTP/1.1 200 OK\r\nContent-Type: application/pkcs7-mime\r\nCache-Control: {cache}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                b.len()
                            );
                            let _ = stream.write_all(&b);
                        }
                        Some(Answer::Redirect(to)) => {
                            let _ = write!(
                                stream,
                                "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            );
                        }
                        None => {
                            let _ = write!(
                                stream,
                                "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            );
                        }
                    }
                });
            }
        });
        Server {
            base,
            routes,
            requests,
        }
    }

    fn route(&self, path: &str, answer: Answer) {
        self.routes.lock().unwrap().push((path.to_string(), answer));
    }

    fn count(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
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

struct Bridged {
    bridge: Vec<u8>,
    leaf: Vec<u8>,
}

/// The bridge (the trust anchor) publishes the certificates it issued at
/// `{base}/bridge-issued.p7c` (its SIA); the agency root is self-signed (its own `.p7c` is
/// a dead end) and cross-certified by the bridge; the leaf's AIA names its CA's `.p7c`, the
/// CA's names the agency root's.
fn bridged(server: &Server, cache: &'static str) -> Bridged {
    let base = &server.base;
    let key = || KeyPair::generate(KeyAlgorithm::P256).unwrap();
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
    let p7c = |certs: &[&[u8]]| Answer::Body(certs_only_p7c(certs).unwrap(), cache);
    server.route("/agency-ca.p7c", p7c(&[&ca]));
    server.route("/agency-root.p7c", p7c(&[&agency_self]));
    server.route("/bridge-issued.p7c", p7c(&[&cross]));
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

#[test]
fn a_bridged_path_is_found_over_aia_and_sia_with_an_empty_pool() {
    let server = Server::start("127.0.0.1");
    let m = bridged(&server, "max-age=3600");
    let dir = tempfile::tempdir().unwrap();
    let d = Discovery::new(DiscoveryConfig::default(), Some(dir.path().to_path_buf()));
    let store = store(&m.bridge);
    // Nothing held: no path.
    let err = pki::validate::validate(&store, &m.leaf, &[], &RevocationSet::empty(), &opts())
        .unwrap_err();
    assert_eq!(err.code(), "no-path-to-anchor");
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
    // The leaf's caIssuers and the bridge's caRepository were enough: the agency root's
    // self-signed certificate (a dead end) was never asked for.
    assert_eq!(found.certificates.len(), 2, "{found:?}");
    let asked = server.count();
    assert_eq!(asked, 2, "{found:?}");
    // Kept on disk for the response's lifetime: a second discovery asks nobody.
    let again = Discovery::new(DiscoveryConfig::default(), Some(dir.path().to_path_buf()));
    let (result, found) = again.validate(&store, &m.leaf, &[], &RevocationSet::empty(), &opts());
    result.unwrap();
    assert_eq!(server.count(), asked);
    assert!(
        found.fetched.iter().all(|u| u.starts_with("cache:")),
        "{found:?}"
    );
}

#[test]
fn expired_cache_entries_are_fetched_again() {
    let server = Server::start("127.0.0.1");
    let m = bridged(&server, "no-store");
    let dir = tempfile::tempdir().unwrap();
    let store = store(&m.bridge);
    for round in 1..=2 {
        let d = Discovery::new(DiscoveryConfig::default(), Some(dir.path().to_path_buf()));
        let (result, _) = d.validate(&store, &m.leaf, &[], &RevocationSet::empty(), &opts());
        result.unwrap();
        assert_eq!(server.count(), 2 * round);
    }
}

#[test]
fn a_redirect_to_another_host_is_not_followed() {
    let server = Server::start("127.0.0.1");
    let m = bridged(&server, "max-age=60");
    // The same files on another host (another loopback address): only a redirect leads
    // there.
    let other = Server::start("127.0.0.2");
    other.route("/agency-ca.p7c", server.routes.lock().unwrap()[0].1.clone());
    server.routes.lock().unwrap()[0] = (
        "/agency-ca.p7c".into(),
        Answer::Redirect(format!("{}/agency-ca.p7c", other.base)),
    );
    let d = Discovery::new(DiscoveryConfig::default(), None);
    let (result, found) = d.validate(
        &store(&m.bridge),
        &m.leaf,
        &[],
        &RevocationSet::empty(),
        &opts(),
    );
    assert_eq!(result.unwrap_err().code(), "no-path-to-anchor");
    assert_eq!(other.count(), 0);
    assert!(
        found.errors.iter().any(|e| e.contains("another host")),
        "{found:?}"
    );
}

#[test]
fn the_request_count_and_size_limits_hold() {
    let server = Server::start("127.0.0.1");
    let m = bridged(&server, "max-age=60");
    let limited = DiscoveryConfig {
        max_fetches: 1,
        ..DiscoveryConfig::default()
    };
    let d = Discovery::new(limited, None);
    let (result, found) = d.validate(
        &store(&m.bridge),
        &m.leaf,
        &[],
        &RevocationSet::empty(),
        &opts(),
    );
    assert!(result.is_err());
    assert_eq!(server.count(), 1);
    assert!(
        found
            .errors
            .iter()
            .any(|e| e.contains("limit of 1 requests")),
        "{found:?}"
    );
    let tiny = DiscoveryConfig {
        max_bytes: 64,
        ..DiscoveryConfig::default()
    };
    let (result, found) = Discovery::new(tiny, None).validate(
        &store(&m.bridge),
        &m.leaf,
        &[],
        &RevocationSet::empty(),
        &opts(),
    );
    assert!(result.is_err());
    assert!(found.certificates.is_empty());
    assert!(
        found.errors.iter().any(|e| e.contains("64-byte limit")),
        "{found:?}"
    );
}

/// A re-keyed root as the Federal PKI publishes one: the same name under an old and a new
/// key, the old-with-new link certificate (old key, signed with the new) and the
/// new-with-old one (new key, signed with the old), all four in one `.p7c` bundle the
/// issuing CAs' caIssuers name. From the new root a card under the old key is reached
/// through old-with-new, and from the old root a card under the new key through
/// new-with-old; the strict profile accepts every certificate of both paths.
#[test]
fn a_re_keyed_root_s_link_certificates_come_from_one_p7c_bundle() {
    let server = Server::start("127.0.0.1");
    let base = server.base.clone();
    let key = || KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let (old_k, new_k) = (key(), key());
    const ROOT: &str = "CN=Agency Root,O=pivgate,C=US";
    let root = |k: &KeyPair| {
        CertificateBuilder::new(ROOT, k.spki_der())
            .unwrap()
            .ca(None)
    };
    let root_old = root(&old_k).self_signed(&old_k).unwrap();
    let root_new = root(&new_k).self_signed(&new_k).unwrap();
    let old_with_new = root(&old_k).sign(&root_new, &new_k).unwrap();
    let new_with_old = root(&new_k).sign(&root_old, &old_k).unwrap();
    server.route(
        "/agency-root.p7c",
        Answer::Body(
            certs_only_p7c(&[&root_old, &root_new, &old_with_new, &new_with_old]).unwrap(),
            "max-age=60",
        ),
    );
    // An issuing CA and a card under each key.
    let card = |ca_name: &str, file: &str, issuer: &[u8], issuer_key: &KeyPair| {
        let (ck, lk) = (key(), key());
        let ca = CertificateBuilder::new(ca_name, ck.spki_der())
            .unwrap()
            .ca(None)
            .ca_issuers(&format!("{base}/agency-root.p7c"))
            .sign(issuer, issuer_key)
            .unwrap();
        server.route(
            &format!("/{file}"),
            Answer::Body(certs_only_p7c(&[&ca]).unwrap(), "max-age=60"),
        );
        CertificateBuilder::new("CN=Agency Employee,O=pivgate,C=US", lk.spki_der())
            .unwrap()
            .end_entity()
            .ca_issuers(&format!("{base}/{file}"))
            .sign(&ca, &ck)
            .unwrap()
    };
    let card_old = card(
        "CN=Agency CA 1,O=pivgate,C=US",
        "ca-1.p7c",
        &root_old,
        &old_k,
    );
    let card_new = card(
        "CN=Agency CA 2,O=pivgate,C=US",
        "ca-2.p7c",
        &root_new,
        &new_k,
    );
    let o = opts();
    assert_eq!(o.profile, pki::options::Profile::Strict);
    let path_of = |anchor: &[u8], leaf: &[u8]| {
        let d = Discovery::new(DiscoveryConfig::default(), None);
        let (r, found) = d.validate(&store(anchor), leaf, &[], &RevocationSet::empty(), &o);
        let path = r.unwrap_or_else(|e| panic!("{e}: {found:?}"));
        path.chain()
            .iter()
            .map(|c| c.der().to_vec())
            .collect::<Vec<_>>()
    };
    let chain = path_of(&root_new, &card_old);
    assert_eq!(chain.len(), 4);
    assert_eq!(chain[2], old_with_new);
    assert_eq!(chain[3], root_new);
    let chain = path_of(&root_old, &card_new);
    assert_eq!(chain.len(), 4);
    assert_eq!(chain[2], new_with_old);
    assert_eq!(chain[3], root_old);
    // Under its own key's root, no link certificate is needed.
    let chain = path_of(&root_new, &card_new);
    assert_eq!(chain.len(), 3);
    assert_eq!(chain[2], root_new);
}

/// An internationalised host name in its ASCII (xn--) form is an ordinary dNSName: a
/// certificate carrying one, under a CA whose name constraints permit it, is found over
/// discovery and accepted by the strict profile; one outside the permitted subtree is not.
#[test]
fn an_idn_dns_name_in_its_xn_form_passes_the_strict_profile() {
    let server = Server::start("127.0.0.1");
    let base = server.base.clone();
    let key = || KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let (rk, ck) = (key(), key());
    let root = CertificateBuilder::new("CN=IDN Root,O=pivgate,C=US", rk.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&rk)
        .unwrap();
    let ca = CertificateBuilder::new("CN=IDN CA,O=pivgate,C=US", ck.spki_der())
        .unwrap()
        .ca(None)
        .name_constraints(&["dns:xn--bcher-kva.example"], &[])
        .unwrap()
        .sign(&root, &rk)
        .unwrap();
    server.route(
        "/idn-ca.p7c",
        Answer::Body(certs_only_p7c(&[&ca]).unwrap(), "max-age=60"),
    );
    let leaf = |dns: &str| {
        let lk = key();
        CertificateBuilder::new("CN=Door Controller,O=pivgate,C=US", lk.spki_der())
            .unwrap()
            .end_entity()
            .san_dns(dns)
            .unwrap()
            .ca_issuers(&format!("{base}/idn-ca.p7c"))
            .sign(&ca, &ck)
            .unwrap()
    };
    let d = Discovery::new(DiscoveryConfig::default(), None);
    let check = |leaf: &[u8]| {
        d.validate(&store(&root), leaf, &[], &RevocationSet::empty(), &opts())
            .0
    };
    let path = check(&leaf("door.xn--bcher-kva.example")).unwrap();
    assert_eq!(path.chain().len(), 3);
    let e = check(&leaf("door.xn--caf-dma.example")).unwrap_err();
    assert_eq!(e.code(), "name-constraints-violated", "{e}");
}

/// A background pass renews what ends before the next one: `cache_ends_within` sees the
/// responses kept for 60 s as ending within the hour, `renewing` fetches them again although
/// they still live, and, when the server no longer answers, keeps using the copy held.
#[test]
fn responses_ending_before_the_next_pass_are_fetched_again_or_kept() {
    let server = Server::start("127.0.0.1");
    let m = bridged(&server, "max-age=60");
    let dir = tempfile::tempdir().unwrap();
    let d = Discovery::new(DiscoveryConfig::default(), Some(dir.path().to_path_buf()));
    let store = store(&m.bridge);
    let (result, _) = d.validate(&store, &m.leaf, &[], &RevocationSet::empty(), &opts());
    result.unwrap();
    let asked = server.count();
    assert_eq!(asked, 2);
    let hour = std::time::Duration::from_secs(3600);
    assert!(!d.cache_ends_within(std::time::Duration::from_secs(1)));
    assert!(d.cache_ends_within(hour));
    // Fresh for another minute: a plain discovery answers from the disk.
    let (result, found) = d.validate(&store, &m.leaf, &[], &RevocationSet::empty(), &opts());
    result.unwrap();
    assert_eq!(server.count(), asked, "{found:?}");
    // Renewing an hour ahead: fetched again.
    let renewing = d.renewing(hour);
    let (result, found) = renewing.validate(&store, &m.leaf, &[], &RevocationSet::empty(), &opts());
    result.unwrap();
    assert_eq!(server.count(), asked + 2, "{found:?}");
    assert!(
        found.fetched.iter().all(|u| u.starts_with("http://")),
        "{found:?}"
    );
    // One pass asks each URI once, however many certificates lead to it.
    let (result, found) = renewing.validate(&store, &m.leaf, &[], &RevocationSet::empty(), &opts());
    result.unwrap();
    assert_eq!(server.count(), asked + 2, "{found:?}");
    // The server is gone: at the next pass the copies held still complete the path, with
    // the failures said.
    server.routes.lock().unwrap().clear();
    let next_pass = d.renewing(hour);
    let (result, found) =
        next_pass.validate(&store, &m.leaf, &[], &RevocationSet::empty(), &opts());
    result.unwrap_or_else(|e| panic!("{e}: {found:?}"));
    assert_eq!(server.count(), asked + 4, "{found:?}");
    assert!(
        found
            .errors
            .iter()
            .any(|e| e.contains("HTTP 404") && e.contains("the copy held is used")),
        "{found:?}"
    );
}
