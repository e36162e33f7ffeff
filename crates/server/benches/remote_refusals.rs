//! Tap latency at a remote reader with and without a flood of refused
//! handshakes on the same port: the real service (SQLite, durable
//! events), a remote reader agent over mutual TLS on loopback tapping a
//! software card (PKI-CAK, fast path after the first tap), and a second
//! client opening 200 connections a second with a valid certificate
//! bound to no reader (each a full TLS 1.3 handshake the service must
//! refuse).
//!
//! `cargo bench -p server --bench remote_refusals` prints p50/p99 of the
//! tap as the reader sees it (card reported → outcome received), the
//! handshakes the flood achieved, and the `remote-refused` events it
//! wrote (one per window, not one per handshake). Nothing is asserted.
//! `cargo test --benches` runs a short smoke pass.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use card::Card;
use host::InProcess;
use pki_issue::{CardOptions, DeviceOptions, DeviceRole, TestPki, TestPkiOptions};
use remote::agent::{self, AgentConfig, AgentEvent, CardState, SharedCard};
use server::config::{init_template, Config, RemoteConfig};
use server::service::{open_store, Service};
use store::{EventKind, EventQuery};
use tokio::sync::{mpsc, watch};

const FLOOD_PER_SEC: u64 = 200;

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

fn client_tls(dir: &Path, sub: &str) -> Arc<tokio_rustls::rustls::ClientConfig> {
    remote::tls::client_config(
        remote::tls::load_certs(&dir.join(sub).join("device.pem")).unwrap(),
        remote::tls::load_key(&dir.join(sub).join("device.key.pem")).unwrap(),
        &remote::tls::load_certs(&dir.join("root.pem")).unwrap(),
    )
    .unwrap()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Taps `n` times (present, wait for the outcome, remove); each tap's
/// milliseconds. `held`: the reader holds a prepared tap (a `Ready` since
/// its last card).
async fn taps(
    presence: &watch::Sender<CardState>,
    events: &mut mpsc::UnboundedReceiver<AgentEvent>,
    card: &mut u64,
    held: &mut bool,
    n: usize,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        // The next prepared tap is held before the card arrives (a reader
        // between two cardholders).
        while !*held {
            match tokio::time::timeout(Duration::from_secs(30), events.recv()).await {
                Ok(Some(AgentEvent::Ready { .. })) => *held = true,
                Ok(Some(_)) => {}
                other => panic!("agent: {other:?}"),
            }
        }
        *held = false;
        *card += 1;
        let t = Instant::now();
        presence.send_replace(CardState {
            present: true,
            card: *card,
        });
        loop {
            match tokio::time::timeout(Duration::from_secs(30), events.recv()).await {
                Ok(Some(AgentEvent::TapEnded { granted, text, .. })) => {
                    assert!(granted, "{text}");
                    break;
                }
                Ok(Some(AgentEvent::Ready { .. })) => *held = true,
                Ok(Some(_)) => {}
                other => panic!("agent: {other:?}"),
            }
        }
        out.push(t.elapsed().as_secs_f64() * 1000.0);
        presence.send_replace(CardState {
            present: false,
            card: *card,
        });
    }
    out
}

fn main() {
    let smoke =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let (n, rounds) = if smoke { (20, 1) } else { (2000, 3) };
    let dir = tempfile::tempdir().unwrap();
    let pki_dir = dir.path().join("pki");
    let pki = TestPki::init(&pki_dir, TestPkiOptions::default()).unwrap();
    let card = pki.issue_card(&CardOptions::default()).unwrap();
    issue(
        &pki,
        &pki_dir.join("service"),
        "127.0.0.1",
        DeviceRole::Server,
    );
    issue(&pki, &pki_dir.join("reader"), "door 1", DeviceRole::Reader);
    issue(
        &pki,
        &pki_dir.join("stray"),
        "stray reader",
        DeviceRole::Reader,
    );
    let text = init_template("remote:door 1", "UTC").replace("127.0.0.1:8080", "127.0.0.1:0");
    let path = dir.path().join("pivgate.toml");
    std::fs::write(&path, text).unwrap();
    let mut config = Config::load(&path).unwrap();
    config.remote = RemoteConfig {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        cert: Some(pki_dir.join("service/device.pem")),
        key: Some(pki_dir.join("service/device.key.pem")),
        device_ca: vec![pki_dir.join("root.pem")],
        ..RemoteConfig::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let service = rt.block_on(async {
        let store = open_store(&config).await.unwrap();
        let trust = config.trust.as_ref().unwrap().load().unwrap();
        let authn = server::enroll::enrollment_authenticator(trust);
        let mut t = InProcess::new(Card::new(card.card_image(Some(5)).unwrap()));
        let v = server::enroll::validate_card(&authn, &mut t).unwrap();
        server::enroll::register(
            &store,
            &v,
            "Alice",
            Some("staff"),
            "bench",
            Timestamp::now(),
        )
        .await
        .unwrap();
        store.close().await;
        Service::start(config, None).await.unwrap()
    });
    let addr = service.remote_addr().unwrap();

    // The reader: its own runtime, as a reader is its own machine.
    let agent_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let image = card.card_image(Some(7)).unwrap();
    let shared: SharedCard = Arc::new(Mutex::new(Box::new(InProcess::new(Card::new(image)))));
    let (presence, presence_rx) = watch::channel(CardState::default());
    let (tx, mut events) = mpsc::unbounded_channel();
    let cfg = AgentConfig::new(
        addr.to_string(),
        client_tls(&pki_dir, "reader"),
        "bench agent".into(),
        "software card".into(),
    );
    let _agent = agent_rt.spawn(agent::run(cfg, shared, presence_rx, tx));
    let (mut card_no, mut held) = (0u64, false);
    // Warm: the first tap reads the certificate, the rest take the fast path.
    agent_rt.block_on(taps(&presence, &mut events, &mut card_no, &mut held, 5));
    // The flood: another client on its own thread, on while `flooding`.
    let flooding = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let flood = {
        let (flooding, stop, done) = (flooding.clone(), stop.clone(), done.clone());
        let tls = client_tls(&pki_dir, "stray");
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let mut tick =
                    tokio::time::interval(Duration::from_micros(1_000_000 / FLOOD_PER_SEC));
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    if !flooding.load(Ordering::Relaxed) {
                        continue;
                    }
                    let tls = tls.clone();
                    let done = done.clone();
                    tokio::spawn(async move {
                        let Ok(tcp) = tokio::net::TcpStream::connect(addr).await else {
                            return;
                        };
                        let c = tokio_rustls::TlsConnector::from(tls)
                            .connect(remote::tls::server_name("127.0.0.1").unwrap(), tcp)
                            .await;
                        if let Ok(mut link) = c {
                            // The service refuses: its refusal or the close.
                            let _ = tokio::time::timeout(
                                Duration::from_secs(5),
                                remote::proto::read_message(&mut link),
                            )
                            .await;
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                    });
                }
            });
        })
    };
    // Alternating rounds, so that the machine's other load falls on both.
    let (mut quiet, mut flooded) = (Vec::new(), Vec::new());
    let (mut flood_time, mut flood_done) = (Duration::ZERO, 0u64);
    for _ in 0..rounds {
        quiet.extend(agent_rt.block_on(taps(&presence, &mut events, &mut card_no, &mut held, n)));
        flooding.store(true, Ordering::Relaxed);
        // Let the flood reach its rate before measuring.
        std::thread::sleep(Duration::from_millis(300));
        let started = Instant::now();
        let before = done.load(Ordering::Relaxed);
        flooded.extend(agent_rt.block_on(taps(&presence, &mut events, &mut card_no, &mut held, n)));
        flood_done += done.load(Ordering::Relaxed) - before;
        flood_time += started.elapsed();
        flooding.store(false, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(300));
    }
    let rate = flood_done as f64 / flood_time.as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();

    let store = service.loaded().store.clone();
    let metrics = service.loaded().metrics.encode();
    rt.block_on(service.shutdown()).unwrap();
    let _ = store;
    let attempts = metrics
        .lines()
        .find(|l| l.starts_with("pivgate_remote_refused_total{reason=\"not-enrolled\"}"))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap_or("0")
        .to_string();
    // The events the flood wrote, read back after shutdown (the last
    // window is written then).
    let refused_events = rt.block_on(async {
        let store = open_store(&Config::load(&path).unwrap()).await.unwrap();
        let page = store
            .query_events(&EventQuery {
                kind: Some(EventKind::Reader),
                limit: 1000,
                ..EventQuery::default()
            })
            .await
            .unwrap();
        let n = page
            .events
            .iter()
            .filter(|e| e.event.code.as_deref() == Some("remote-refused"))
            .count();
        store.close().await;
        n
    });

    quiet.sort_by(f64::total_cmp);
    flooded.sort_by(f64::total_cmp);
    println!(
        "remote reader tap (PKI-CAK fast path, SQLite, loopback), {rounds} alternating rounds of {n} taps each; load average {}",
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    println!("| load | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|");
    for (name, v) in [("quiet", &quiet), ("200 refused handshakes/s", &flooded)] {
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} |",
            percentile(v, 50.0),
            percentile(v, 99.0),
            v.last().copied().unwrap_or(f64::NAN)
        );
    }
    println!(
        "p99 under the flood / quiet: {:.2}",
        percentile(&flooded, 99.0) / percentile(&quiet, 99.0)
    );
    println!(
        "flood: {rate:.0} refused handshakes/s achieved over {:.1} s, {attempts} counted by the metric, {refused_events} remote-refused events written",
        flood_time.as_secs_f64()
    );
}
