//! The service in-process: starts on a temporary data directory, seeds it
//! from the configuration once, picks up changed access data on reload,
//! and commits every submitted event before shutdown completes.

use access::jiff::Timestamp;
use access::{Cardholder, CardholderId, CardholderStatus};
use server::config::{init_template, Config};
use server::service::Service;
use store::{EventQuery, NewEvent};

fn config(dir: &std::path::Path) -> Config {
    let text = init_template("pivgate test reader that is not there", "Europe/Paris")
        .replace("127.0.0.1:8080", "127.0.0.1:0");
    let path = dir.join("pivgate.toml");
    std::fs::write(&path, text).unwrap();
    let mut c = Config::load(&path).unwrap();
    c.trust = None;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeds_once_reloads_and_commits_before_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let s = Service::start(config(dir.path()), None).await.unwrap();
    assert_ne!(s.addr().port(), 0);
    let l = s.loaded();
    let snap = l.controller.snapshot();
    assert_eq!(snap.doors().len(), 2);
    assert_eq!(snap.groups().len(), 2);
    assert_eq!(snap.sites().next().unwrap().time_zone, "Europe/Paris");
    assert_eq!(snap.cardholders().len(), 0);

    // A change in the database is taken up on reload.
    l.store
        .create(Cardholder {
            id: CardholderId(0),
            name: "Alice".into(),
            status: CardholderStatus::Active,
            valid_from: None,
            valid_until: None,
        })
        .await
        .unwrap();
    assert_eq!(l.controller.snapshot().cardholders().len(), 0);
    s.reload().await.unwrap();
    assert_eq!(l.controller.snapshot().cardholders().len(), 1);

    // Events submitted before shutdown are committed by the time it returns.
    let log = l.controller.log().clone();
    let pending: Vec<_> = (0..50)
        .map(|i| {
            let log = log.clone();
            tokio::spawn(async move {
                log.append(NewEvent::admin(
                    Timestamp::now(),
                    "test",
                    "test.event",
                    format!("event {i}"),
                    serde_json::Value::Null,
                ))
                .await
            })
        })
        .collect();
    drop(log);
    for p in pending {
        p.await.unwrap().unwrap();
    }
    s.shutdown().await.unwrap();

    // A second start does not seed again, and finds the events.
    let s = Service::start(config(dir.path()), None).await.unwrap();
    let l = s.loaded();
    assert_eq!(l.controller.snapshot().doors().len(), 2);
    assert_eq!(l.controller.snapshot().cardholders().len(), 1);
    let page = l
        .store
        .query_events(&EventQuery {
            limit: 1000,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.events.len(), 50);
    s.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_in_use_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = config(dir.path());
    c.http.listen = taken.local_addr().unwrap();
    let e = Service::start(c, None).await.unwrap_err();
    assert!(
        e.to_string().starts_with("`http.listen`: cannot listen on"),
        "{e}"
    );
}

/// A CA and a `localhost` server certificate it signed, as PEM files.
fn tls_files(dir: &std::path::Path) -> (Vec<u8>, std::path::PathBuf, std::path::PathBuf) {
    use pki_issue::{pem_encode, CertificateBuilder, KeyAlgorithm, KeyPair};
    let ca_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let ca = CertificateBuilder::new("CN=Test API CA", ca_key.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&ca_key)
        .unwrap();
    let key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let cert = CertificateBuilder::new("CN=localhost", key.spki_der())
        .unwrap()
        .end_entity()
        .san_dns("localhost")
        .unwrap()
        .sign(&ca, &ca_key)
        .unwrap();
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&c, pem_encode("CERTIFICATE", &cert)).unwrap();
    std::fs::write(&k, pem_encode("PRIVATE KEY", key.pkcs8_der())).unwrap();
    set_mode(&k, 0o600);
    (ca, c, k)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_https_when_a_certificate_is_configured() {
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls;

    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = tls_files(dir.path());
    let mut c = config(dir.path());
    c.http.tls_cert = Some(cert);
    c.http.tls_key = Some(key.clone());
    let s = Service::start(c.clone(), None).await.unwrap();
    assert!(s.url().starts_with("https://127.0.0.1:"), "{}", s.url());

    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.into()).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let tcp = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
    let mut tls = connector
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .unwrap();
    tls.write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    tls.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"ready\""), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("strict-transport-security: max-age="),
        "HSTS over TLS: {answer}"
    );

    // Plain HTTP on the TLS port gets no answer.
    let mut plain = tokio::net::TcpStream::connect(s.addr()).await.unwrap();
    plain
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let _ = plain.read_to_end(&mut buf).await;
    assert!(!String::from_utf8_lossy(&buf).contains("200"));
    s.shutdown().await.unwrap();

    // A key others can read is refused, like the OSDP and reader keys.
    set_mode(&key, 0o644);
    let e = Service::start(c.clone(), None).await.unwrap_err();
    assert!(e.to_string().starts_with("`http.tls_key`:"), "{e}");
    assert!(
        e.to_string().contains("0644") || e.to_string().contains("read"),
        "{e}"
    );
    set_mode(&key, 0o600);

    // A key that is not a key is named.
    std::fs::write(&key, "not a key").unwrap();
    let e = Service::start(c, None).await.unwrap_err();
    assert!(e.to_string().starts_with("`http.tls_key`:"), "{e}");
}

fn set_mode(p: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_directory_and_database_are_the_service_users_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fresh");
    let store = store::Store::open_data_dir(&data).await.unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&data.join("pivgate.db")), 0o600);
    store.close().await;

    let done = server::init::init(&dir.path().join("site"), "UTC").unwrap();
    assert_eq!(
        mode(&done.config),
        0o600,
        "the configuration may hold secrets"
    );
}
