//! Path discovery in the background: a card enrolled while the site trusted its agency's root
//! keeps working when the site moves to trusting a bridge instead, once the bridge publishes
//! its cross-certificate for that root at its subjectInfoAccess caRepository URI, which it
//! does only after the enrollment. No enrollment again: the service's background pass finds
//! the path and the next tap is granted. A tap never fetches: the test's HTTP server on
//! 127.0.0.1 sees no request while a tap runs.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

mod staff;
use staff::{cak, card, ensure_token, staff_member, tap};

use const_oid::ObjectIdentifier;
use pki::discover::DiscoveryConfig;
use pki_issue::{
    certs_only_p7c, pem_encode, CertificateBuilder, CrlBuilder, KeyAlgorithm, KeyPair, TestPki,
    TestPkiOptions,
};
use server::config::{init_template, Config};
use server::service::Service;
use store::Role;

const READER: &str = "pivgate background discovery test reader";
const TOKEN: &str = "background-discovery-test-admin-token";

type Routes = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// Serves the bodies of `routes` by path, 404 elsewhere; counts requests.
fn serve(routes: Routes) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let n = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
            }
            n.fetch_add(1, Ordering::SeqCst);
            let asked = line.split_whitespace().nth(1).unwrap_or("/");
            let body = routes.lock().unwrap().get(asked).cloned();
            match body {
                Some(b) => {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/pkcs7-mime\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        b.len()
                    );
                    let _ = stream.write_all(&b);
                }
                None => {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                }
            }
        }
    });
    (base, count)
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

async fn enroll(s: &Service, holder: access::CardholderId, cert: &[u8]) -> (u16, String) {
    let url = format!("{}/api/v1/credentials/enroll", s.url());
    let body = serde_json::json!({
        "cardholder": holder.0,
        "certificate": pem_encode("CERTIFICATE", cert),
    });
    tokio::task::spawn_blocking(move || {
        let r = ureq::post(&url)
            .set("Authorization", &format!("Bearer {TOKEN}"))
            .set("Content-Type", "application/json")
            .send_string(&body.to_string());
        let resp = match r {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{e}"),
        };
        (resp.status(), resp.into_string().unwrap())
    })
    .await
    .unwrap()
}

/// Waits (with a deadline) for the service's first background discovery pass to finish.
async fn first_pass(s: &Service) -> server::discovery::PassReport {
    let mut passes = s.loaded().revocation.discovery_passes();
    let wait = passes.wait_for(|(n, _)| *n >= 1);
    let r = tokio::time::timeout(std::time::Duration::from_secs(60), wait)
        .await
        .expect("no background discovery pass within 60 s")
        .unwrap();
    r.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_certificate_published_after_enrollment_is_picked_up_in_the_background() {
    let routes: Routes = Arc::default();
    let (base, requests) = serve(routes.clone());
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::init(
        &dir.path().join("pki"),
        TestPkiOptions {
            crl_base_url: Some(base.clone()),
            ..TestPkiOptions::default()
        },
    )
    .unwrap();
    routes.lock().unwrap().insert(
        "/intermediate.p7c".into(),
        certs_only_p7c(&[pki.intermediate_der()]).unwrap(),
    );
    let alice = card(&pki, "Alice");

    // The bridge, and its cross-certificate for the agency's root (same name, same key),
    // which it publishes only later.
    let bridge_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let sia_oid = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.1.11");
    let bridge = CertificateBuilder::new("CN=Test Bridge,O=pivgate,C=US", bridge_key.spki_der())
        .unwrap()
        .ca(None)
        .extension(sia_oid, false, &sia(&format!("{base}/bridge-issued.p7c")))
        .unwrap()
        .self_signed(&bridge_key)
        .unwrap();
    let root = pki::cert::Cert::from_der(pki.root_der().to_vec()).unwrap();
    let cross = CertificateBuilder::new("CN=Test Root CA,O=pivgate Test PKI,C=US", root.spki_der())
        .unwrap()
        .ca(None)
        .any_policy()
        .sign(&bridge, &bridge_key)
        .unwrap();
    assert_eq!(
        pki::cert::Cert::from_der(cross.clone())
            .unwrap()
            .subject_der(),
        root.subject_der()
    );
    let bridge_file = dir.path().join("bridge.pem");
    std::fs::write(&bridge_file, pem_encode("CERTIFICATE", &bridge)).unwrap();
    // The bridge's CRL, covering the cross-certificate.
    let t = pki_issue::now();
    let bridge_crl = CrlBuilder::new()
        .update_times(t - 3600, Some(t + 86_400))
        .sign(&bridge, &bridge_key)
        .unwrap();
    let bridge_crl_file = dir.path().join("bridge.crl");
    std::fs::write(&bridge_crl_file, bridge_crl).unwrap();

    let text = init_template(READER, "UTC").replace("127.0.0.1:8080", "127.0.0.1:0");
    let path = dir.path().join("pivgate.toml");
    std::fs::write(&path, text).unwrap();
    let mut config = Config::load(&path).unwrap();
    {
        let t = config.trust.as_mut().unwrap();
        t.intermediates.clear();
        t.discovery = Some(DiscoveryConfig::default());
    }

    // Trusting the agency's root: enrolled, the intermediate discovered over the card's AIA.
    let s = Service::start(config.clone(), None).await.unwrap();
    let h = staff_member(&s, "Alice").await;
    ensure_token(&s, "test-admin", Role::Admin, TOKEN).await;
    let (status, body_text) = enroll(&s, h, &cak(&alice)).await;
    assert_eq!(status, 201, "{body_text}");
    first_pass(&s).await;
    let asked = requests.load(Ordering::SeqCst);
    assert!(asked >= 1);
    let (code, reason) = tap(&s, &alice).await;
    assert_eq!(code, "granted", "{reason:?}");
    assert_eq!(requests.load(Ordering::SeqCst), asked, "a tap fetched");
    s.shutdown().await.unwrap();

    // The bridge publishes its cross-certificate; the site now trusts the bridge only.
    routes.lock().unwrap().insert(
        "/bridge-issued.p7c".into(),
        certs_only_p7c(&[&cross]).unwrap(),
    );
    {
        let t = config.trust.as_mut().unwrap();
        t.anchors = vec![bridge_file];
        t.crls.push(bridge_crl_file);
    }
    let s = Service::start(config, None).await.unwrap();
    let report = first_pass(&s).await;
    assert_eq!(report.checked, 1, "{report:?}");
    assert_eq!(report.discovered, 1, "{report:?}");
    assert_eq!(report.without_path, 0, "{report:?}");
    assert!(report.added >= 1, "{report:?}");
    let asked_by_pass = requests.load(Ordering::SeqCst);
    assert!(asked_by_pass > asked, "the pass fetched nothing");
    let (code, reason) = tap(&s, &alice).await;
    assert_eq!(code, "granted", "{reason:?}");
    assert_eq!(
        requests.load(Ordering::SeqCst),
        asked_by_pass,
        "a tap fetched"
    );
    s.shutdown().await.unwrap();
}
