//! Remote readers in the door service: a reader speaking the protocol by
//! hand over mutual TLS on loopback reports a card and drops the link while
//! the service waits on it; the tap ends refused with the link's reason
//! and the reader goes offline. Everything waits on the
//! event log's live feed, never on sleeps.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pki::fetch::FetchConfig;
use pki_issue::{DeviceOptions, DeviceRole, TestPki, TestPkiOptions};
use remote::proto::{self, Message, PROTOCOL_VERSION};
use server::config::{init_template, Config, RemoteConfig};
use server::service::Service;
use store::{Event, EventKind, EventResult};

/// A bound on each wait (never a timing assertion).
const PATIENCE: Duration = Duration::from_secs(30);

fn wait_event(
    rt: &tokio::runtime::Runtime,
    rx: &mut tokio::sync::broadcast::Receiver<Arc<Event>>,
    what: &str,
    pred: impl Fn(&Event) -> bool,
) -> Event {
    rt.block_on(async {
        tokio::time::timeout(PATIENCE, async {
            loop {
                match rx.recv().await {
                    Ok(e) if pred(&e) => return (*e).clone(),
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(e) => panic!("event feed ended: {e}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {what} event"))
    })
}

async fn recv<S: tokio::io::AsyncRead + Unpin>(link: &mut S) -> Message {
    tokio::time::timeout(PATIENCE, proto::read_message(link))
        .await
        .expect("the service answers")
        .expect("a message")
}

fn issue(pki: &TestPki, dir: &std::path::Path, name: &str, role: DeviceRole) {
    pki.issue_device(&DeviceOptions {
        name: name.into(),
        role,
        dns: Vec::new(),
        ips: match role {
            DeviceRole::Server => vec!["127.0.0.1".parse().unwrap()],
            _ => Vec::new(),
        },
        validity: None,
    })
    .unwrap()
    .save(dir, "device", &[pki.intermediate_der()])
    .unwrap();
}

#[test]
fn a_link_drop_mid_tap_ends_it_refused_and_the_reader_goes_offline() {
    let pki_dir: Mutex<Option<PathBuf>> = Mutex::new(None);
    let site = common::site_with(&|c| {
        let dir = c.trust.as_ref().unwrap().anchors[0]
            .parent()
            .unwrap()
            .to_owned();
        let pki = TestPki::load(&dir).unwrap();
        issue(&pki, &dir.join("service"), "127.0.0.1", DeviceRole::Server);
        issue(&pki, &dir.join("reader"), "door 1", DeviceRole::Reader);
        c.remote = RemoteConfig {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            cert: Some(dir.join("service/device.pem")),
            key: Some(dir.join("service/device.key.pem")),
            device_ca: vec![dir.join("root.pem")],
            ..RemoteConfig::default()
        };
        c.seed
            .as_mut()
            .unwrap()
            .readers
            .insert("remote:door 1".into(), "Front door".into());
        *pki_dir.lock().unwrap() = Some(dir);
    });
    let dir = pki_dir.lock().unwrap().clone().unwrap();
    let s = site.service();
    let addr = s.remote_addr().expect("[remote] is on");
    let l = s.loaded();
    let reader = l
        .controller
        .snapshot()
        .reader_by_connection("remote:door 1")
        .unwrap()
        .id;
    assert_eq!(
        l.reader_status.get(reader).map(|c| c.connected),
        Some(false)
    );
    let mut events = l.controller.log().subscribe();

    let tls = remote::tls::client_config(
        remote::tls::load_certs(&dir.join("reader/device.pem")).unwrap(),
        remote::tls::load_key(&dir.join("reader/device.key.pem")).unwrap(),
        &remote::tls::load_certs(&dir.join("root.pem")).unwrap(),
    )
    .unwrap();
    let link = site.rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut link = tokio_rustls::TlsConnector::from(tls)
            .connect(remote::tls::server_name("127.0.0.1").unwrap(), tcp)
            .await
            .unwrap();
        let hello = Message::Hello {
            min_version: PROTOCOL_VERSION,
            max_version: PROTOCOL_VERSION,
            agent: "by hand".into(),
            reader: "test".into(),
        };
        proto::write_message(&mut link, &hello).await.unwrap();
        match recv(&mut link).await {
            Message::Welcome { .. } => {}
            other => panic!("expected a welcome, got {other:?}"),
        }
        // No prepared answers: the service asks for each command.
        let present = Message::CardPresent {
            card: 7,
            prepared: None,
        };
        proto::write_message(&mut link, &present).await.unwrap();
        loop {
            if let Message::Run { .. } = recv(&mut link).await {
                break;
            }
        }
        link
    });
    let online = wait_event(&site.rt, &mut events, "remote-online", |e| {
        e.event.code.as_deref() == Some("remote-online")
    });
    assert_eq!(online.event.reader, Some(reader));
    assert_eq!(l.reader_status.get(reader).map(|c| c.connected), Some(true));
    // The service asked the card something: the link drops.
    drop(link);
    // The tap and the offline, in either order (each side notices the
    // drop on its own).
    let (mut tap, mut offline) = (None, None);
    while tap.is_none() || offline.is_none() {
        let e = wait_event(&site.rt, &mut events, "tap or remote-offline", |e| {
            e.event.kind == EventKind::Tap || e.event.code.as_deref() == Some("remote-offline")
        });
        if e.event.kind == EventKind::Tap {
            assert!(tap.is_none(), "a second tap: {e:?}");
            tap = Some(e);
        } else {
            offline = Some(e);
        }
    }
    let (tap, offline) = (tap.unwrap(), offline.unwrap());
    assert_eq!(tap.event.reader, Some(reader));
    assert_eq!(tap.event.result, Some(EventResult::Refused));
    let reason = tap.event.reason.clone().unwrap();
    assert!(reason.contains("dropped"), "{reason}");
    assert_eq!(offline.event.reader, Some(reader));
    assert_eq!(
        l.reader_status.get(reader).map(|c| c.connected),
        Some(false)
    );
}

/// Serves the test PKI's two CRLs (`/crl/root.crl`, `/crl/intermediate.crl`)
/// over plain HTTP until the test ends.
struct CrlServer {
    base: String,
    crls: Routes,
}

/// Path → body.
type Routes = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

impl CrlServer {
    fn start() -> CrlServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}/crl", listener.local_addr().unwrap());
        let crls: Routes = Arc::default();
        let served = crls.clone();
        // The thread ends with the test process.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                }
                let body = served
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, b)| b.clone());
                let _ = match body {
                    Some(b) => write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        b.len()
                    )
                    .and_then(|()| stream.write_all(&b)),
                    None => write!(
                        stream,
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    ),
                };
            }
        });
        CrlServer { base, crls }
    }

    fn publish(&self, pki: &TestPki) {
        *self.crls.lock().unwrap() = vec![
            ("/crl/root.crl".into(), pki.root_crl_der().to_vec()),
            (
                "/crl/intermediate.crl".into(),
                pki.intermediate_crl_der().to_vec(),
            ),
        ];
    }
}

/// Connects as the reader whose credentials are in `dir/reader` and says
/// hello; the service's first answer, if any.
async fn hello(addr: std::net::SocketAddr, dir: &Path) -> Option<Message> {
    let tls = remote::tls::client_config(
        remote::tls::load_certs(&dir.join("reader/device.pem")).unwrap(),
        remote::tls::load_key(&dir.join("reader/device.key.pem")).unwrap(),
        &remote::tls::load_certs(&dir.join("root.pem")).unwrap(),
    )
    .unwrap();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut link = tokio_rustls::TlsConnector::from(tls)
        .connect(remote::tls::server_name("127.0.0.1").unwrap(), tcp)
        .await
        .ok()?;
    let hello = Message::Hello {
        min_version: PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
        agent: "by hand".into(),
        reader: "test".into(),
    };
    proto::write_message(&mut link, &hello).await.ok()?;
    tokio::time::timeout(PATIENCE, proto::read_message(&mut link))
        .await
        .expect("the service answers or closes")
        .ok()
}

async fn next_event(rx: &mut tokio::sync::broadcast::Receiver<Arc<Event>>, code: &str) -> Event {
    tokio::time::timeout(PATIENCE, async {
        loop {
            match rx.recv().await {
                Ok(e) if e.event.code.as_deref() == Some(code) => return (*e).clone(),
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("event feed ended: {e}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {code} event"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_downloaded_crl_refuses_a_revoked_reader_from_its_next_connection() {
    let tmp = tempfile::tempdir().unwrap();
    let crls = CrlServer::start();
    let dir = tmp.path().join("pki");
    let mut pki = TestPki::init(
        &dir,
        TestPkiOptions {
            crl_base_url: Some(crls.base.clone()),
            ..TestPkiOptions::default()
        },
    )
    .unwrap();
    crls.publish(&pki);
    issue(&pki, &dir.join("service"), "127.0.0.1", DeviceRole::Server);
    issue(&pki, &dir.join("reader"), "door 1", DeviceRole::Reader);
    let reader_cert = remote::tls::load_certs(&dir.join("reader/device.pem")).unwrap()[0].to_vec();

    // The init template, CRLs only from downloads.
    let text = init_template("sim:front", "UTC").replace("127.0.0.1:8080", "127.0.0.1:0");
    let path = tmp.path().join("pivgate.toml");
    std::fs::write(&path, text).unwrap();
    let mut c = Config::load(&path).unwrap();
    let t = c.trust.as_mut().unwrap();
    t.crls.clear();
    t.fetch = Some(FetchConfig::default());
    c.remote = RemoteConfig {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        cert: Some(dir.join("service/device.pem")),
        key: Some(dir.join("service/device.key.pem")),
        device_ca: vec![dir.join("root.pem")],
        // Refusals are recorded when their window closes.
        refusal_window_ms: 100,
        ..RemoteConfig::default()
    };
    c.seed
        .as_mut()
        .unwrap()
        .readers
        .insert("remote:door 1".into(), "Front door".into());
    let s = Service::start(c, None).await.unwrap();
    let l = s.loaded();
    let addr = s.remote_addr().unwrap();
    // The issuing CA's CRL is downloaded and watched (as once a card of
    // that CA is enrolled through the API).
    l.revocation.prefetch(reader_cert.clone()).await;
    assert_eq!(l.revocation.refresh_now().await.unwrap(), 0);
    let mut events = l.controller.log().subscribe();

    let welcome = hello(addr, &dir).await;
    assert!(
        matches!(welcome, Some(Message::Welcome { .. })),
        "{welcome:?}"
    );
    next_event(&mut events, "remote-online").await;
    next_event(&mut events, "remote-offline").await;

    // Revoked by its CA; the new CRL downloaded: refused at once.
    pki.revoke(&reader_cert, None).unwrap();
    crls.publish(&pki);
    assert_eq!(l.revocation.refresh_now().await.unwrap(), 0);
    let refused = hello(addr, &dir).await;
    assert!(
        !matches!(refused, Some(Message::Welcome { .. })),
        "{refused:?}"
    );
    let e = next_event(&mut events, "remote-refused").await;
    let reason = e.event.reason.unwrap();
    assert!(reason.contains("revoked"), "{reason}");
    s.shutdown().await.unwrap();
}
