//! The API holds its clients to its limits (`[http]`): real sockets on
//! loopback against the started service. Half-sent requests are closed
//! after the header timeout and never stop `/healthz`; with every
//! connection place taken, health checks (on the reserve) and remote
//! readers (their own port) still get in; a token's event streams are
//! capped; shutdown finishes by its deadline with half-open requests held;
//! a request body that stalls or trickles is answered 408 and closed.
//! Every wait is bounded only to stop a broken test.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use pki_issue::{DeviceOptions, DeviceRole, TestPki};
use remote::proto::{self, Message, PROTOCOL_VERSION};
use server::config::RemoteConfig;

const PATIENCE: Duration = Duration::from_secs(60);

/// Opens a connection and sends `text` (a request cut short).
fn half_sent(addr: SocketAddr, text: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(text.as_bytes()).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s
}

/// Reads until the service closes the connection; what it sent. Panics
/// if it is still open after [`PATIENCE`].
fn until_closed(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the connection stayed open: {e}"),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One request on a new connection; the status line and headers.
fn head_of(addr: SocketAddr, request: &str) -> (TcpStream, String) {
    let mut s = half_sent(addr, request);
    let mut out = Vec::new();
    let mut buf = [0u8; 1];
    while !out.ends_with(b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => out.push(buf[0]),
            Err(e) => panic!("no answer: {e}"),
        }
    }
    (s, String::from_utf8_lossy(&out).into_owned())
}

fn get(path: &str, token: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: pivgate\r\nAuthorization: Bearer {token}\r\n\r\n")
}

const HALF: &str = "GET /healthz HTTP/1.1\r\nHost: pivgate\r\nX-Slow: ";

#[test]
fn three_hundred_half_sent_requests_do_not_stop_healthz_and_are_closed_after_the_header_timeout() {
    let site = common::site_with(&|c| c.http.header_read_timeout_ms = 1_000);
    let addr = site.service().addr();
    let mut held: Vec<TcpStream> = (0..300).map(|_| half_sent(addr, HALF)).collect();
    let r = ureq::get(&site.url("/healthz")).call().unwrap();
    assert_eq!(r.status(), 200);
    for s in &mut held {
        let sent = until_closed(s);
        assert!(!sent.contains("200 OK"), "{sent}");
    }
    // And the service goes on serving.
    let r = ureq::get(&site.url("/healthz")).call().unwrap();
    assert_eq!(r.status(), 200);
}

fn issue(pki: &TestPki, dir: &Path, name: &str, role: DeviceRole) {
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
fn with_every_place_taken_a_health_check_and_a_remote_reader_still_get_in() {
    let pki_dir: Mutex<Option<PathBuf>> = Mutex::new(None);
    let site = common::site_with(&|c| {
        c.http.max_connections = 20;
        c.http.reserved_connections = 4;
        c.http.header_read_timeout_ms = 600_000;
        c.http.idle_timeout_ms = 3_600_000;
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
    let addr = site.service().addr();
    // Every place is taken by a request that never finishes.
    let held: Vec<TcpStream> = (0..20).map(|_| half_sent(addr, HALF)).collect();
    // A health check gets in on the reserve.
    let (_c, head) = head_of(addr, "GET /healthz HTTP/1.1\r\nHost: pivgate\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (_c, head) = head_of(addr, "GET /readyz HTTP/1.1\r\nHost: pivgate\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // Anything else on the reserve is refused, and the connection closed.
    let (mut c, head) = head_of(addr, &get("/api/v1/events", &site.viewer));
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    until_closed(&mut c);
    // A remote reader connects on its own port and is welcomed.
    let remote_addr = site.service().remote_addr().unwrap();
    let welcome = site.rt.block_on(async {
        let tls = remote::tls::client_config(
            remote::tls::load_certs(&dir.join("reader/device.pem")).unwrap(),
            remote::tls::load_key(&dir.join("reader/device.key.pem")).unwrap(),
            &remote::tls::load_certs(&dir.join("root.pem")).unwrap(),
        )
        .unwrap();
        let tcp = tokio::net::TcpStream::connect(remote_addr).await.unwrap();
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
        tokio::time::timeout(PATIENCE, proto::read_message(&mut link))
            .await
            .unwrap()
            .unwrap()
    });
    assert!(matches!(welcome, Message::Welcome { .. }), "{welcome:?}");
    // Once the slow clients go, their places serve everyone again.
    drop(held);
    let mut tries = 0;
    loop {
        let (_c, head) = head_of(addr, &get("/api/v1/events", &site.viewer));
        if head.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(head.starts_with("HTTP/1.1 503"), "{head}");
        tries += 1;
        assert!(tries < 600, "the places were never given back");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_tokens_event_stream_cap_refuses_the_next_stream_with_429() {
    let site = common::site_with(&|c| c.http.max_streams_per_token = 2);
    let addr = site.service().addr();
    let stream = "/api/v1/events/stream";
    let (_a, head) = head_of(addr, &get(stream, &site.viewer));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (_b, head) = head_of(addr, &get(stream, &site.viewer));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (mut c, head) = head_of(addr, &get(stream, &site.viewer));
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut body = [0u8; 512];
    let n = c.read(&mut body).unwrap_or(0);
    let body = String::from_utf8_lossy(&body[..n]);
    assert!(body.contains("max_streams_per_token"), "{body}");
    // Another token still gets its own.
    let (_d, head) = head_of(addr, &get(stream, &site.operator));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}

#[test]
fn shutdown_completes_by_its_deadline_with_half_open_requests_held() {
    let mut site = common::site_with(&|c| {
        c.http.shutdown_timeout_ms = 1_000;
        c.http.header_read_timeout_ms = 600_000;
        c.http.idle_timeout_ms = 3_600_000;
    });
    let addr = site.service().addr();
    // A request head cut short, and a request whose body never comes.
    let mut head = half_sent(addr, HALF);
    let mut body = half_sent(
        addr,
        &format!(
            "POST /api/v1/doors/1/unlock HTTP/1.1\r\nHost: pivgate\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"reason\"",
            site.operator
        ),
    );
    // An open event stream too.
    let (mut stream, h) = head_of(addr, &get("/api/v1/events/stream", &site.viewer));
    assert!(h.starts_with("HTTP/1.1 200"), "{h}");
    let service = site.service.take().unwrap();
    site.rt
        .block_on(async { tokio::time::timeout(PATIENCE, service.shutdown()).await })
        .expect("shutdown finished")
        .unwrap();
    until_closed(&mut head);
    until_closed(&mut body);
    until_closed(&mut stream);
}

#[test]
fn an_idle_kept_alive_connection_is_closed_after_the_idle_timeout() {
    let site = common::site_with(&|c| c.http.idle_timeout_ms = 500);
    let addr = site.service().addr();
    let (mut c, head) = head_of(addr, "GET /healthz HTTP/1.1\r\nHost: pivgate\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    // Nothing more is asked: the service closes the connection.
    until_closed(&mut c);
}

#[test]
fn a_request_body_that_stalls_or_trickles_is_answered_408_and_closed() {
    let site = common::site_with(&|c| {
        c.http.body_read_timeout_ms = 500;
        c.http.idle_timeout_ms = 3_600_000;
    });
    let addr = site.service().addr();
    let unlock = |length: usize| {
        format!(
            "POST /api/v1/doors/1/unlock HTTP/1.1\r\nHost: pivgate\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n{{\"reason\"",
            site.operator
        )
    };
    // The head and 9 bytes of a 100-byte body, then nothing.
    let (mut c, head) = head_of(addr, &unlock(100));
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    let body = until_closed(&mut c);
    assert!(body.contains("body_read_timeout_ms"), "{body}");

    // A body that keeps coming, a byte at a time, but never ends in time.
    let mut c = half_sent(addr, &unlock(100_000));
    let mut writer = c.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        while writer.write_all(b" ").is_ok() {
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    // Closed; the answer itself may be lost to the reset that bytes still
    // arriving at a closed socket cause.
    let answer = until_closed(&mut c);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
    trickle.join().unwrap();

    // The service answers on.
    let (_c, head) = head_of(addr, "GET /healthz HTTP/1.1\r\nHost: pivgate\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}
