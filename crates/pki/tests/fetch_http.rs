//! CRL fetching against a tiny HTTP server on 127.0.0.1 run by the test.

use pki::fetch::{distribution_points, CrlFetcher, FetchConfig, FetchError};
use pki_issue::{CardOptions, CrlBuilder, TestPki, TestPkiOptions, DAY};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the server answers for a path.
#[derive(Clone)]
enum Answer {
    Body(Vec<u8>),
    Status(u16),
    /// Accept, read the request, then never answer.
    Hang,
    /// 302 to this location.
    Redirect(String),
}

struct Server {
    base: String,
    routes: Arc<Mutex<Vec<(String, Answer)>>>,
    requests: Arc<AtomicUsize>,
}

impl Server {
    fn start() -> Server {
        Server::start_on("127.0.0.1")
    }

    fn start_on(ip: &str) -> Server {
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
                        .map(|(_, a)| a.clone())
                        .unwrap_or(Answer::Status(404));
                    match answer {
                        Answer::Body(b) => {
                            let _ = write!(
                                stream,
                                "HTTP/1.1 200 OK\r\nContent-Type: application/pkix-crl\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                b.len()
                            );
                            let _ = stream.write_all(&b);
                        }
                        Answer::Status(s) => {
                            let _ = write!(
                                stream,
                                "HTTP/1.1 {s} Nope\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            );
                        }
                        Answer::Hang => std::thread::sleep(Duration::from_secs(5)),
                        Answer::Redirect(to) => {
                            let _ = write!(
                                stream,
                                "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
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
        let mut r = self.routes.lock().unwrap();
        r.retain(|(p, _)| p != path);
        r.push((path.to_string(), answer));
    }

    fn count(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

fn config() -> FetchConfig {
    FetchConfig {
        timeout: Duration::from_millis(500),
        max_bytes: 1 << 20,
        retry_after_secs: 30,
        default_lifetime_secs: 3_600,
        ..FetchConfig::default()
    }
}

#[test]
fn fetches_caches_until_next_update_and_refetches() {
    let server = Server::start();
    let pki = TestPki::generate(TestPkiOptions {
        crl_base_url: Some(format!("{}/crl", server.base)),
        ..Default::default()
    })
    .unwrap();
    let card = pki.issue_card(&CardOptions::default()).unwrap();
    let leaf = &card.slot(0x9A).unwrap().certificate;
    let url = format!("{}/crl/intermediate.crl", server.base);
    assert_eq!(distribution_points(leaf).unwrap(), vec![url.clone()]);
    server.route(
        "/crl/intermediate.crl",
        Answer::Body(pki.intermediate_crl_der().to_vec()),
    );

    let fetcher = CrlFetcher::new(config());
    let now = pki_issue::now();
    let crl = fetcher.fetch_for(leaf, now).unwrap();
    assert_eq!(crl.der.as_slice(), pki.intermediate_crl_der());
    assert!(crl.next_update.unwrap() > now);
    assert_eq!(server.count(), 1);
    // Cached until nextUpdate.
    fetcher.fetch_for(leaf, now + DAY).unwrap();
    assert_eq!(server.count(), 1);
    // After nextUpdate a new copy is fetched.
    let later = crl.next_update.unwrap() + 1;
    let newer = CrlBuilder::new()
        .crl_number(9)
        .update_times(later, Some(later + DAY))
        .sign(pki.intermediate_der(), pki.intermediate_key())
        .unwrap();
    server.route("/crl/intermediate.crl", Answer::Body(newer.clone()));
    let crl2 = fetcher.fetch_for(leaf, later).unwrap();
    assert_eq!(server.count(), 2);
    assert_eq!(crl2.der.as_slice(), newer.as_slice());

    // The intermediate points at the root's CRL, which is not served: the
    // failure is reported beside the CRL that was obtained.
    let (crls, errors) = fetcher.fetch_for_chain(
        &[leaf.as_slice(), pki.intermediate_der(), pki.root_der()],
        later,
    );
    assert_eq!(crls.len(), 1);
    assert_eq!(errors.len(), 1);
    assert!(
        matches!(&errors[0], FetchError::Http { status: 404, .. }),
        "{errors:?}"
    );
}

#[test]
fn crl_set_snapshot_changes_only_with_new_crls() {
    use pki::revocation_set::RevocationSet;
    use pki::store::TrustStore;
    use pki::validate::{validate, ValidationError, ValidationOptions};

    let server = Server::start();
    let mut pki = TestPki::generate(TestPkiOptions {
        crl_base_url: Some(format!("{}/crl", server.base)),
        ..Default::default()
    })
    .unwrap();
    let card = pki.issue_card(&CardOptions::default()).unwrap();
    let leaf = card.slot(0x9A).unwrap().certificate.clone();
    let publish = |pki: &TestPki| {
        server.route(
            "/crl/intermediate.crl",
            Answer::Body(pki.intermediate_crl_der().to_vec()),
        );
        server.route("/crl/root.crl", Answer::Body(pki.root_crl_der().to_vec()));
    };
    publish(&pki);
    let fetcher = CrlFetcher::new(config());
    assert!(fetcher.crl_set().is_empty());
    let now = pki_issue::now();
    let intermediate = pki.intermediate_der().to_vec();
    let chain = [leaf.as_slice(), intermediate.as_slice()];
    let (crls, errors) = fetcher.fetch_for_chain(&chain, now);
    assert_eq!((crls.len(), errors.len()), (2, 0));
    let a = fetcher.crl_set();
    assert_eq!(a.len(), 2);
    assert_eq!(fetcher.crl_set().id(), a.id());
    let mut b = TrustStore::builder();
    b.add_anchor_der(pki.root_der().to_vec());
    b.add_intermediate_der(pki.intermediate_der().to_vec());
    let store = b.build();
    let opts = ValidationOptions::default();
    validate(&store, &leaf, &[], &a, &opts).unwrap();

    // Revocation is published; after nextUpdate the fetcher downloads it and
    // the snapshot changes.
    pki.revoke(&leaf, None).unwrap();
    publish(&pki);
    let later = crls[0].next_update.unwrap() + 1;
    fetcher.fetch_for_chain(&chain, later);
    let c: std::sync::Arc<RevocationSet> = fetcher.crl_set();
    assert_ne!(c.id(), a.id());
    let opts = ValidationOptions {
        time: pki::time::Time(now + 60),
        ..Default::default()
    };
    assert!(matches!(
        validate(&store, &leaf, &[], &c, &opts),
        Err(ValidationError::Revoked { .. })
    ));
    // Re-downloading identical CRLs keeps the snapshot.
    fetcher.fetch_for_chain(&chain, later + 10 * DAY);
    assert_eq!(fetcher.crl_set().id(), c.id());
}

#[test]
fn reports_http_errors_garbage_size_and_scheme() {
    let server = Server::start();
    let fetcher = CrlFetcher::new(config());
    let now = 1_000;
    let missing = format!("{}/missing.crl", server.base);
    assert!(matches!(
        fetcher.fetch_url(&missing, now),
        Err(FetchError::Http { status: 404, .. })
    ));
    // A recent failure is answered without asking the server again.
    let before = server.count();
    assert!(matches!(
        fetcher.fetch_url(&missing, now + 1),
        Err(FetchError::Backoff { .. })
    ));
    assert_eq!(server.count(), before);

    server.route("/garbage.crl", Answer::Body(b"not a CRL at all".to_vec()));
    assert!(matches!(
        fetcher.fetch_url(&format!("{}/garbage.crl", server.base), now),
        Err(FetchError::NotACrl { .. })
    ));
    server.route("/big.crl", Answer::Body(vec![0x30; (1 << 20) + 10]));
    assert!(matches!(
        fetcher.fetch_url(&format!("{}/big.crl", server.base), now),
        Err(FetchError::TooLarge { .. })
    ));
    assert!(matches!(
        fetcher.fetch_url("https://127.0.0.1/x.crl", now),
        Err(FetchError::UnsupportedScheme(_))
    ));
    assert!(matches!(
        fetcher.fetch_url("ldap://example/x", now),
        Err(FetchError::UnsupportedScheme(_))
    ));
}

#[test]
fn a_silent_server_times_out_and_the_last_good_copy_stays_available() {
    let server = Server::start();
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let url = format!("{}/c.crl", server.base);
    server.route("/c.crl", Answer::Body(pki.intermediate_crl_der().to_vec()));
    let fetcher = CrlFetcher::new(config());
    let now = pki_issue::now();
    let good = fetcher.fetch_url(&url, now).unwrap();
    server.route("/c.crl", Answer::Hang);
    let stale_time = good.next_update.unwrap() + 10;
    let err = fetcher.fetch_url(&url, stale_time).unwrap_err();
    assert!(matches!(err, FetchError::Transport { .. }), "{err}");
    assert_eq!(fetcher.cached(&url).unwrap().der, good.der);
}

#[test]
fn certificates_without_distribution_points() {
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let fetcher = CrlFetcher::new(config());
    assert!(distribution_points(pki.root_der()).unwrap().is_empty());
    assert!(matches!(
        fetcher.fetch_for(pki.root_der(), 0),
        Err(FetchError::NoDistributionPoint(_))
    ));
    assert!(matches!(
        fetcher.fetch_for(b"junk", 0),
        Err(FetchError::BadCertificate(_))
    ));
}

/// A leaf under a test PKI whose distribution points are `urls`, and the
/// store it validates against.
fn leaf_with_points(urls: &[String]) -> (pki::store::TrustStore, Vec<u8>) {
    use pki_issue::{CertificateBuilder, KeyAlgorithm, KeyPair};
    // The leaf's points are the only ones on the path.
    let pki = TestPki::generate(TestPkiOptions {
        crl_base_url: None,
        ..TestPkiOptions::default()
    })
    .unwrap();
    let key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let mut b = CertificateBuilder::new("CN=Leaf,O=pivgate,C=US", key.spki_der())
        .unwrap()
        .end_entity();
    for u in urls {
        b = b.crl_distribution_point(u);
    }
    let leaf = b
        .sign(pki.intermediate_der(), pki.intermediate_key())
        .unwrap();
    let mut s = pki::store::TrustStore::builder();
    s.add_anchor_der(pki.root_der().to_vec());
    s.add_intermediate_der(pki.intermediate_der().to_vec());
    (s.build(), leaf)
}

#[test]
fn urls_per_certificate_are_capped() {
    use pki::fetch::fetch_for_path;
    use pki::validate::ValidationOptions;
    let server = Server::start();
    let urls: Vec<String> = (0..12)
        .map(|i| format!("{}/missing-{i}.crl", server.base))
        .collect();
    let (store, leaf) = leaf_with_points(&urls);
    let fetcher = CrlFetcher::new(FetchConfig {
        max_urls_per_certificate: 4,
        ..config()
    });
    let out = fetch_for_path(
        &fetcher,
        &store,
        &leaf,
        &[],
        &pki::revocation_set::RevocationSet::empty(),
        &ValidationOptions::default(),
    );
    assert_eq!(out.certificates, 2, "the leaf and the intermediate");
    assert_eq!(server.count(), 4, "four of the leaf's twelve URLs");
    assert!(
        matches!(&out.errors[..], [FetchError::Http { status: 404, .. }]),
        "{:?}",
        out.errors
    );
}

#[test]
fn the_total_time_budget_bounds_a_path_of_silent_servers() {
    use pki::fetch::fetch_for_path;
    use pki::validate::ValidationOptions;
    let server = Server::start();
    let urls: Vec<String> = (0..12)
        .map(|i| format!("{}/silent-{i}.crl", server.base))
        .collect();
    for i in 0..12 {
        server.route(&format!("/silent-{i}.crl"), Answer::Hang);
    }
    let (store, leaf) = leaf_with_points(&urls);
    let fetcher = CrlFetcher::new(FetchConfig {
        timeout: Duration::from_millis(400),
        total_timeout: Duration::from_millis(1000),
        max_urls_per_certificate: 12,
        ..config()
    });
    let start = std::time::Instant::now();
    let out = fetch_for_path(
        &fetcher,
        &store,
        &leaf,
        &[],
        &pki::revocation_set::RevocationSet::empty(),
        &ValidationOptions::default(),
    );
    let took = start.elapsed();
    // Without the total budget: 12 URLs x 400 ms. The margin is for a loaded machine.
    assert!(took < Duration::from_millis(3000), "took {took:?}");
    assert!(took >= Duration::from_millis(900), "took {took:?}");
    assert!(server.count() <= 4, "{} requests", server.count());
    assert_eq!(out.crls.len(), 0);
    assert!(!out.errors.is_empty());
}

#[test]
fn redirects_are_followed_within_the_same_origin_only() {
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let crl = pki.intermediate_crl_der().to_vec();
    let server = Server::start();
    // Another host (127.0.0.2), and the same host on another port: both are
    // other origins.
    let elsewhere = Server::start_on("127.0.0.2");
    let other_port = Server::start();
    for s in [&elsewhere, &other_port] {
        s.route("/c.crl", Answer::Body(crl.clone()));
    }
    let fetcher = CrlFetcher::new(config());
    let now = pki_issue::now();

    server.route("/moved.crl", Answer::Redirect("/c.crl".into()));
    server.route("/c.crl", Answer::Body(crl.clone()));
    let got = fetcher
        .fetch_url(&format!("{}/moved.crl", server.base), now)
        .unwrap();
    assert_eq!(got.der.as_slice(), crl.as_slice());

    for (i, target) in [&elsewhere, &other_port].iter().enumerate() {
        let path = format!("/away-{i}.crl");
        server.route(&path, Answer::Redirect(format!("{}/c.crl", target.base)));
        let err = fetcher
            .fetch_url(&format!("{}{path}", server.base), now)
            .unwrap_err();
        assert!(
            matches!(&err, FetchError::Redirect { location, .. } if location.starts_with(&target.base)),
            "{err}"
        );
        assert_eq!(target.count(), 0, "{} was contacted", target.base);
    }

    // A redirect loop ends at the hop limit.
    server.route("/loop.crl", Answer::Redirect("/loop.crl".into()));
    let err = fetcher
        .fetch_url(&format!("{}/loop.crl", server.base), now)
        .unwrap_err();
    assert!(err.to_string().contains("too many redirects"), "{err}");
}
