//! The remote-reader link on loopback: TLS 1.3 handshakes per second (full
//! and resumed, with the hello/welcome exchange), resident memory per idle
//! reader connection, and a PKI-CAK tap through the link (fast path and
//! full read) beside the same tap on an in-process card, with the network
//! round trips each tap cost; the taps again behind a proxy adding 10 ms
//! each way (a 20 ms round trip; `tc netem` is not needed).
//!
//! Run: `cargo bench -p remote --bench link`. Prints a table; nothing is
//! asserted. Both ends run in this process, so the memory figure covers a
//! connection's state on both sides.

use auth::{Authenticator, Mechanism, Settings};
use card::Card;
use host::InProcess;
use pki::issue::{
    CardOptions, DeviceCredential, DeviceOptions, DeviceRole, KeyAlgorithm, TestPki, TestPkiOptions,
};
use pki::validate::RevocationPolicy;
use remote::agent::{self, AgentConfig, AgentEvent, CardState, SharedCard};
use remote::hub::{HubConfig, HubEvent, RemoteHub};
use remote::proto::{self, Message, PROTOCOL_VERSION};
use remote::tls::{self, ReaderVerifier};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio_rustls::rustls::ClientConfig;

const HANDSHAKES: usize = 300;
const IDLE: usize = 500;
const TAPS: usize = 200;
const WAN_TAPS: usize = 30;

fn der(c: &[u8]) -> CertificateDer<'static> {
    CertificateDer::from(c.to_vec())
}

fn key(k: &pki::issue::KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(k.pkcs8_der().to_vec()))
}

fn device(pki: &TestPki, name: &str, role: DeviceRole) -> DeviceCredential {
    pki.issue_device(&DeviceOptions {
        name: name.into(),
        role,
        dns: vec![],
        ips: if role == DeviceRole::Server {
            vec!["127.0.0.1".parse().unwrap()]
        } else {
            vec![]
        },
        validity: None,
    })
    .unwrap()
}

fn client(pki: &TestPki, cred: &DeviceCredential, resume: bool) -> Arc<ClientConfig> {
    let cfg = tls::client_config(
        vec![der(&cred.cert), der(pki.intermediate_der())],
        key(&cred.key),
        &[der(pki.root_der())],
    )
    .unwrap();
    if resume {
        return cfg;
    }
    let mut c = (*cfg).clone();
    c.resumption = tokio_rustls::rustls::client::Resumption::disabled();
    Arc::new(c)
}

type Stream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn hello(addr: SocketAddr, cfg: &Arc<ClientConfig>) -> Stream {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut t = tokio_rustls::TlsConnector::from(cfg.clone())
        .connect(tls::server_name("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap();
    proto::write_message(
        &mut t,
        &Message::Hello {
            min_version: PROTOCOL_VERSION,
            max_version: PROTOCOL_VERSION,
            agent: "bench".into(),
            reader: "bench".into(),
        },
    )
    .await
    .unwrap();
    match proto::read_message(&mut t).await.unwrap() {
        Message::Welcome { .. } => t,
        other => panic!("{other:?}"),
    }
}

/// Full handshakes per second against `openssl s_server -rev` driven by
/// the same rustls client.
fn s_server_rate(
    rt: &tokio::runtime::Runtime,
    pki: &TestPki,
    server: &DeviceCredential,
    cfg: &Arc<ClientConfig>,
) -> Result<f64, String> {
    use std::io::BufRead;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let pem = |label: &str, der: &[u8]| pki::issue::pem_encode(label, der);
    let w = |name: &str, text: String| {
        std::fs::write(dir.path().join(name), text).map_err(|e| e.to_string())
    };
    w("cert.pem", pem("CERTIFICATE", &server.cert))?;
    w("chain.pem", pem("CERTIFICATE", pki.intermediate_der()))?;
    w("key.pem", pem("PRIVATE KEY", server.key.pkcs8_der()))?;
    w("ca.pem", pem("CERTIFICATE", pki.root_der()))?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let path = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    let mut child = std::process::Command::new("openssl")
        .args([
            "s_server",
            "-accept",
            &format!("127.0.0.1:{port}"),
            "-tls1_3",
        ])
        .args([
            "-cert",
            &path("cert.pem"),
            "-cert_chain",
            &path("chain.pem"),
        ])
        .args(["-key", &path("key.pem"), "-CAfile", &path("ca.pem")])
        .args(["-Verify", "3", "-verify_return_error", "-rev", "-no_ticket"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run openssl: {e}"))?;
    let out = child.stdout.take().ok_or("no stdout")?;
    let mut lines = std::io::BufReader::new(out).lines();
    // s_server prints ACCEPT once it listens.
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.contains("ACCEPT"));
    std::thread::spawn(move || for _ in lines {});
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let r = if !ready {
        Err("s_server did not start".to_string())
    } else {
        let once = || async {
            let tcp = tokio::net::TcpStream::connect(addr)
                .await
                .map_err(|e| e.to_string())?;
            let mut t = tokio_rustls::TlsConnector::from(cfg.clone())
                .connect(tls::server_name("127.0.0.1").unwrap(), tcp)
                .await
                .map_err(|e| e.to_string())?;
            t.write_all(b"ping\n").await.map_err(|e| e.to_string())?;
            let mut buf = [0u8; 16];
            let n = t.read(&mut buf).await.map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("s_server closed the connection".to_string());
            }
            Ok::<(), String>(())
        };
        rt.block_on(async {
            once().await?;
            let t = Instant::now();
            for _ in 0..HANDSHAKES {
                once().await?;
            }
            Ok(HANDSHAKES as f64 / t.elapsed().as_secs_f64())
        })
    };
    let _ = child.kill();
    let _ = child.wait();
    r
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time of every thread of this process so far, in nanoseconds
/// (`/proc/self/task/*/schedstat`, first field).
fn cpu_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let server = device(&pki, "service", DeviceRole::Server);
    let reader = device(&pki, "bench reader", DeviceRole::Reader);
    let creds = pki
        .issue_card(&CardOptions {
            algorithm: KeyAlgorithm::P256,
            ..CardOptions::default()
        })
        .unwrap();
    let verifier = ReaderVerifier::new(
        pki.trust_store(),
        pki.crl_set().unwrap(),
        RevocationPolicy::default(),
    );
    let tls_cfg = tls::server_config(
        vec![der(&server.cert), der(pki.intermediate_der())],
        key(&server.key),
        verifier.clone(),
    )
    .unwrap();
    let mut cfg = HubConfig::new(
        tls_cfg,
        verifier,
        HashMap::from([("bench reader".to_string(), "bench".to_string())]),
    );
    cfg.heartbeat = Duration::from_secs(60);
    cfg.silence = Duration::from_secs(600);
    let (hub, mut events) = rt
        .block_on(RemoteHub::bind("127.0.0.1:0".parse().unwrap(), cfg))
        .unwrap();
    let addr = hub.local_addr();
    // Taps go to the tap loop below; everything else is drained.
    let (tap_tx, tap_rx) = std::sync::mpsc::channel();
    let offline = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let gone = Arc::new(tokio::sync::Notify::new());
    {
        let (offline, gone) = (offline.clone(), gone.clone());
        rt.spawn(async move {
            while let Some(e) = events.recv().await {
                match e {
                    HubEvent::CardPresent(t) => {
                        let _ = tap_tx.send(t);
                    }
                    HubEvent::Offline { .. } => {
                        offline.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        gone.notify_one();
                    }
                    _ => {}
                }
            }
        });
    }
    // Waits until the hub has seen `n` connections end in all.
    let all_gone = |n: usize| {
        rt.block_on(async {
            while offline.load(std::sync::atomic::Ordering::SeqCst) < n {
                gone.notified().await;
            }
        })
    };

    println!("remote-reader link on loopback (both ends in this process)");
    for (label, resume) in [("full handshake", false), ("resumed handshake", true)] {
        let c = client(&pki, &reader, resume);
        rt.block_on(async {
            drop(hello(addr, &c).await);
        });
        let t = Instant::now();
        rt.block_on(async {
            for _ in 0..HANDSHAKES {
                drop(hello(addr, &c).await);
            }
        });
        let per = t.elapsed().as_secs_f64() / HANDSHAKES as f64;
        println!(
            "  {label:<22} {:>8.0} /s   ({:.2} ms each, TLS 1.3 + hello/welcome, client and server)",
            1.0 / per,
            per * 1e3
        );
    }

    // The same client load against `openssl s_server` (TLS 1.3, client
    // certificate required and verified against the same root; it checks
    // no CRL), with one line echoed as the application round trip.
    match s_server_rate(&rt, &pki, &server, &client(&pki, &reader, false)) {
        Ok(rate) => println!(
            "  openssl s_server       {rate:>8.0} /s   (full handshake + one echoed line, same client)"
        ),
        Err(e) => println!("  openssl s_server       not measured: {e}"),
    }

    let c = client(&pki, &reader, true);
    let before = rss_kib();
    let held = rt.block_on(async {
        let mut v = Vec::with_capacity(IDLE);
        for _ in 0..IDLE {
            v.push(hello(addr, &c).await);
        }
        v
    });
    let after = rss_kib();
    println!(
        "  idle connections       {IDLE} held: {:.1} KiB each (RSS {} → {} KiB, both ends)",
        (after.saturating_sub(before)) as f64 / IDLE as f64,
        before,
        after
    );
    drop(held);

    // Teardown: CPU (both ends) to open IDLE connections with full
    // handshakes, then to close them all until the hub has seen each end.
    let full = client(&pki, &reader, false);
    all_gone(HANDSHAKES * 2 + 2 + IDLE);
    let c0 = cpu_ns();
    let held = rt.block_on(async {
        let mut v = Vec::with_capacity(IDLE);
        for _ in 0..IDLE {
            v.push(hello(addr, &full).await);
        }
        v
    });
    let c1 = cpu_ns();
    drop(held);
    all_gone(HANDSHAKES * 2 + 2 + 2 * IDLE);
    let c2 = cpu_ns();
    let (open, close) = (
        (c1 - c0) as f64 / IDLE as f64,
        (c2 - c1) as f64 / IDLE as f64,
    );
    println!(
        "  teardown               {:.1} µs CPU per connection closed vs {:.1} µs per full handshake opened: {:.2} %",
        close / 1e3,
        open / 1e3,
        close / open * 100.0
    );

    // Taps through the agent, straight on loopback and behind a proxy
    // adding 10 ms each way (a 20 ms round trip).
    let authn = Arc::new(Authenticator::new(
        pki.trust_store(),
        pki.crl_set().unwrap(),
        Settings::default(),
    ));
    let image = creds.card_image(Some(1)).unwrap();
    let wan = rt
        .block_on(remote::testing::DelayProxy::start(
            addr,
            Duration::from_millis(10),
        ))
        .unwrap();
    let mut n = 0u64;
    for (link, to, taps) in [
        ("loopback", addr, TAPS),
        ("20 ms RTT", wan.local_addr(), WAN_TAPS),
    ] {
        let card: SharedCard = Arc::new(Mutex::new(Box::new(InProcess::new(Card::new(
            image.clone(),
        )))));
        let (presence, presence_rx) = watch::channel(CardState::default());
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        let acfg = AgentConfig::new(to.to_string(), c.clone(), "bench".into(), "card".into());
        let agent_task = rt.spawn(agent::run(acfg, card, presence_rx, ev_tx));
        let ready = |ev_rx: &mut mpsc::UnboundedReceiver<AgentEvent>| {
            rt.block_on(async {
                while let Some(e) = ev_rx.recv().await {
                    if matches!(e, AgentEvent::Ready { .. }) {
                        return;
                    }
                }
            })
        };
        ready(&mut ev_rx);
        for (label, clear) in [("fast path", false), ("full read", true)] {
            let mut wall = Vec::with_capacity(taps);
            let mut trips = Vec::with_capacity(taps);
            for i in 0..taps + 1 {
                if clear {
                    authn.clear_caches();
                }
                n += 1;
                let t = Instant::now();
                presence.send_replace(CardState {
                    present: true,
                    card: n,
                });
                let mut tap = tap_rx.recv().unwrap();
                let tx = authn.authenticate(&mut tap, Mechanism::PkiCak, None, None);
                let took = t.elapsed();
                assert!(tx.outcome.granted(), "{:?}", tx.outcome);
                if i > 0 {
                    trips.push(tap.round_trips());
                    wall.push(took.as_secs_f64() * 1e3);
                }
                tap.finish(true, "bench");
                presence.send_replace(CardState {
                    present: false,
                    card: n,
                });
                ready(&mut ev_rx);
            }
            trips.sort();
            // The same tap on an in-process card.
            let mut local = Vec::with_capacity(taps);
            let mut t_card = InProcess::new(Card::new(image.clone()));
            for _ in 0..taps {
                if clear {
                    authn.clear_caches();
                }
                let t = Instant::now();
                let tx = authn.authenticate(&mut t_card, Mechanism::PkiCak, None, None);
                local.push(t.elapsed().as_secs_f64() * 1e3);
                assert!(tx.outcome.granted());
            }
            let (w, l) = (median(wall), median(local));
            println!(
                "  tap {link:<9}, {label:<9} {w:>7.3} ms remote, {l:.3} ms local: link adds {:.3} ms; round trips {}–{}",
                w - l,
                trips[0],
                trips[trips.len() - 1]
            );
        }
        agent_task.abort();
    }
    rt.block_on(hub.shutdown());
}
