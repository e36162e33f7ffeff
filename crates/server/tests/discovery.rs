//! Path discovery at enrollment: the configuration holds the root only (no intermediates);
//! the card's certificate names its issuer's `.p7c` in authorityInfoAccess, served by a
//! tiny HTTP server on 127.0.0.1 run by the test. With `[trust.discovery]` the enrollment
//! fetches it and the door then grants the card from what it holds; without, the
//! certificate has no path and is not enrolled.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

mod staff;
use staff::{cak, card, ensure_token, staff_member, tap};

use access::CardholderId;
use pki::discover::DiscoveryConfig;
use pki_issue::{certs_only_p7c, pem_encode, TestPki, TestPkiOptions};
use server::config::{init_template, Config};
use server::service::Service;
use store::Role;

const READER: &str = "pivgate discovery test reader";
const TOKEN: &str = "discovery-test-admin-token";

/// Serves `body` at `path`, 404 elsewhere; counts requests.
fn serve(
    path: &'static str,
    body: Arc<std::sync::OnceLock<Vec<u8>>>,
) -> (String, Arc<AtomicUsize>) {
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
            match body.get().filter(|_| asked == path) {
                Some(b) => {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/pkcs7-mime\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        b.len()
                    );
                    let _ = stream.write_all(b);
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

async fn enroll(s: &Service, holder: CardholderId, cert: &[u8]) -> (u16, String) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intermediate_is_discovered_at_enrollment_and_held_for_taps() {
    let body = Arc::new(std::sync::OnceLock::new());
    let (base, requests) = serve("/intermediate.p7c", body.clone());
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::init(
        &dir.path().join("pki"),
        TestPkiOptions {
            crl_base_url: Some(base),
            ..TestPkiOptions::default()
        },
    )
    .unwrap();
    body.set(certs_only_p7c(&[pki.intermediate_der()]).unwrap())
        .unwrap();
    let alice = card(&pki, "Alice");

    let text = init_template(READER, "UTC").replace("127.0.0.1:8080", "127.0.0.1:0");
    let path = dir.path().join("pivgate.toml");
    std::fs::write(&path, text).unwrap();
    let mut config = Config::load(&path).unwrap();
    config.trust.as_mut().unwrap().intermediates.clear();

    // Without discovery: no path, not enrolled, nothing asked.
    let s = Service::start(config.clone(), None).await.unwrap();
    let h = staff_member(&s, "Alice").await;
    ensure_token(&s, "test-admin", Role::Admin, TOKEN).await;
    let (status, body_text) = enroll(&s, h, &cak(&alice)).await;
    assert_ne!(status, 201, "{body_text}");
    assert_eq!(requests.load(Ordering::SeqCst), 0);
    s.shutdown().await.unwrap();

    config.trust.as_mut().unwrap().discovery = Some(DiscoveryConfig::default());
    let s = Service::start(config.clone(), None).await.unwrap();
    let (status, body_text) = enroll(&s, h, &cak(&alice)).await;
    assert_eq!(status, 201, "{body_text}");
    assert!(requests.load(Ordering::SeqCst) >= 1);
    let asked = requests.load(Ordering::SeqCst);
    // The tap uses what is held: no request.
    let (code, reason) = tap(&s, &alice).await;
    assert_eq!(code, "granted", "{reason:?}");
    assert_eq!(requests.load(Ordering::SeqCst), asked);
    s.shutdown().await.unwrap();

    // After a restart the discovered intermediate is restored from the copy kept on disk,
    // before the first tap, without asking the server.
    let s = Service::start(config, None).await.unwrap();
    let (code, reason) = tap(&s, &alice).await;
    assert_eq!(code, "granted", "{reason:?}");
    assert_eq!(requests.load(Ordering::SeqCst), asked);
    s.shutdown().await.unwrap();
}
