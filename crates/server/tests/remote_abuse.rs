//! Peers on the remote-reader port that try to wear the service out: a
//! flood of refused handshakes writes one event per address, reason and
//! window (with the count), peer-chosen text is stored escaped and
//! capped, and a reader with a valid certificate that floods card
//! presences gets one tap in flight and is cut off with one event; a flood
//! of idle connections is held to the connection caps (those past them are
//! closed on arrival and counted) while a reader online goes on tapping. Real
//! TLS on loopback, the real service on SQLite; waits are on the event
//! log's live feed.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pki_issue::{DeviceOptions, DeviceRole, TestPki};
use remote::proto::{self, Message, PROTOCOL_VERSION};
use server::config::RemoteConfig;
use store::{Event, EventKind, EventQuery};

/// A bound on each wait (never a timing assertion).
const PATIENCE: Duration = Duration::from_secs(60);

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

/// A site with `[remote]` on, a reader `door 1` bound to the front door,
/// and reader credentials for each of `others` (in `pki/<dir>`), none
/// bound. Returns the site and the PKI directory.
fn remote_site(window_ms: u64, others: &[(&'static str, String)]) -> (common::Site, PathBuf) {
    remote_site_with(window_ms, others, &|_| {})
}

/// [`remote_site`] with `[remote]` edited by `edit`.
fn remote_site_with(
    window_ms: u64,
    others: &[(&'static str, String)],
    edit: &dyn Fn(&mut RemoteConfig),
) -> (common::Site, PathBuf) {
    let pki_dir: Mutex<Option<PathBuf>> = Mutex::new(None);
    let site = common::site_with(&|c| {
        let dir = c.trust.as_ref().unwrap().anchors[0]
            .parent()
            .unwrap()
            .to_owned();
        let pki = TestPki::load(&dir).unwrap();
        issue(&pki, &dir.join("service"), "127.0.0.1", DeviceRole::Server);
        issue(&pki, &dir.join("reader"), "door 1", DeviceRole::Reader);
        for (sub, name) in others {
            issue(&pki, &dir.join(sub), name, DeviceRole::Reader);
        }
        c.remote = RemoteConfig {
            listen: Some("127.0.0.1:0".parse().unwrap()),
            cert: Some(dir.join("service/device.pem")),
            key: Some(dir.join("service/device.key.pem")),
            device_ca: vec![dir.join("root.pem")],
            refusal_window_ms: window_ms,
            ..RemoteConfig::default()
        };
        edit(&mut c.remote);
        c.seed
            .as_mut()
            .unwrap()
            .readers
            .insert("remote:door 1".into(), "Front door".into());
        *pki_dir.lock().unwrap() = Some(dir);
    });
    let dir = pki_dir.lock().unwrap().clone().unwrap();
    (site, dir)
}

fn client_tls(dir: &Path, sub: &str) -> Arc<tokio_rustls::rustls::ClientConfig> {
    remote::tls::client_config(
        remote::tls::load_certs(&dir.join(sub).join("device.pem")).unwrap(),
        remote::tls::load_key(&dir.join(sub).join("device.key.pem")).unwrap(),
        &remote::tls::load_certs(&dir.join("root.pem")).unwrap(),
    )
    .unwrap()
}

type Link = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn connect(addr: std::net::SocketAddr, tls: Arc<tokio_rustls::rustls::ClientConfig>) -> Link {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tokio_rustls::TlsConnector::from(tls)
        .connect(remote::tls::server_name("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap()
}

async fn recv(link: &mut Link) -> Result<Message, proto::FrameError> {
    tokio::time::timeout(PATIENCE, proto::read_message(link))
        .await
        .expect("the service answers or closes")
}

fn hello() -> Message {
    Message::Hello {
        min_version: PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
        agent: "by hand".into(),
        reader: "test".into(),
    }
}

async fn next_event(
    rx: &mut tokio::sync::broadcast::Receiver<Arc<Event>>,
    what: &str,
    pred: impl Fn(&Event) -> bool,
) -> Event {
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
}

fn code(e: &Event) -> &str {
    e.event.code.as_deref().unwrap_or("")
}

#[test]
fn twenty_refused_handshakes_make_one_event_with_their_count_and_the_subject_escaped() {
    // A valid reader certificate bound to no reader, whose name carries a
    // line break, a terminal escape and 3,000 more characters.
    let evil = format!("evil\n\u{1b}[2J{}", "A".repeat(3000));
    let (site, dir) = remote_site(5_000, &[("evil", evil.clone())]);
    let s = site.service();
    let addr = s.remote_addr().unwrap();
    let l = s.loaded();
    let mut events = l.controller.log().subscribe();
    let tls = client_tls(&dir, "evil");
    site.rt.block_on(async {
        for _ in 0..20 {
            let mut link = connect(addr, tls.clone()).await;
            let _ = proto::write_message(&mut link, &hello()).await;
            match recv(&mut link).await {
                Ok(Message::Refuse { .. }) | Err(_) => {}
                Ok(other) => panic!("expected a refusal, got {other:?}"),
            }
        }
    });
    let e = site
        .rt
        .block_on(next_event(&mut events, "remote-refused", |e| {
            code(e) == "remote-refused"
        }));
    let data = e.event.data.clone().unwrap();
    assert_eq!(data["count"], 20, "{data}");
    assert_eq!(data["refusal"], "not-enrolled", "{data}");
    let reason = e.event.reason.clone().unwrap();
    assert!(reason.contains("refused 20 times"), "{reason}");
    assert!(reason.contains("evil\\u{a}\\u{1b}[2J"), "{reason}");
    assert!(!reason.chars().any(|c| c.is_control()), "{reason:?}");
    assert!(
        reason.chars().count() < 600,
        "{} characters",
        reason.chars().count()
    );
    assert!(reason.contains("more characters)"), "{reason}");
    // Every attempt is counted in the metrics.
    let metrics = l.metrics.encode();
    assert!(
        metrics.contains("pivgate_remote_refused_total{reason=\"not-enrolled\"} 20"),
        "{metrics}"
    );
    // And the log holds that one event, nothing more.
    let page = site
        .rt
        .block_on(l.store.query_events(&EventQuery {
            kind: Some(EventKind::Reader),
            limit: 1000,
            ..EventQuery::default()
        }))
        .unwrap();
    let refused: Vec<_> = page
        .events
        .iter()
        .filter(|e| code(e) == "remote-refused")
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
}

#[test]
fn a_reader_flooding_card_presences_has_one_tap_in_flight_and_is_cut_off_with_one_event() {
    let (site, dir) = remote_site(10_000, &[]);
    let s = site.service();
    let addr = s.remote_addr().unwrap();
    let l = s.loaded();
    let reader = l
        .controller
        .snapshot()
        .reader_by_connection("remote:door 1")
        .unwrap()
        .id;
    let mut events = l.controller.log().subscribe();
    let tls = client_tls(&dir, "reader");
    let (sent, runs) = site.rt.block_on(async {
        let mut link = connect(addr, tls).await;
        proto::write_message(&mut link, &hello()).await.unwrap();
        assert!(matches!(recv(&mut link).await, Ok(Message::Welcome { .. })));
        let (mut rd, mut wr) = tokio::io::split(link);
        // What the service asks is read (never answered) and counted: one
        // request means one tap asking its card.
        let reading = tokio::spawn(async move {
            let mut runs = 0u32;
            while let Ok(m) = proto::read_message(&mut rd).await {
                if let Message::Run { .. } = m {
                    runs += 1;
                }
            }
            runs
        });
        let mut sent = 0u32;
        for card in 1..=400u64 {
            let m = Message::CardPresent {
                card,
                prepared: None,
            };
            if proto::write_message(&mut wr, &m).await.is_err() {
                break;
            }
            sent += 1;
        }
        let runs = tokio::time::timeout(PATIENCE, reading)
            .await
            .expect("the service closes the link")
            .unwrap();
        (sent, runs)
    });
    assert!(sent > 9, "{sent} presences sent");
    // The one tap may not have asked its card anything before the cut.
    assert!(runs <= 1, "{runs} requests to the card");
    // The one tap ends (its link is gone) and the reader goes offline.
    let (mut tap, mut offline) = (None, None);
    site.rt.block_on(async {
        while tap.is_none() || offline.is_none() {
            let e = next_event(&mut events, "tap or remote-offline", |e| {
                e.event.kind == EventKind::Tap || code(e) == "remote-offline"
            })
            .await;
            if e.event.kind == EventKind::Tap {
                tap = Some(e);
            } else {
                offline = Some(e);
            }
        }
    });
    let offline = offline.unwrap();
    let why = offline.event.reason.clone().unwrap();
    assert!(
        why.contains("cut off") && why.contains("card presences"),
        "{why}"
    );
    assert_eq!(tap.unwrap().event.reader, Some(reader));
    // One tap and one offline in the log for that reader.
    let page = site
        .rt
        .block_on(l.store.query_events(&EventQuery {
            limit: 1000,
            ..EventQuery::default()
        }))
        .unwrap();
    let of_reader: Vec<_> = page
        .events
        .iter()
        .filter(|e| e.event.reader == Some(reader))
        .collect();
    let taps = of_reader
        .iter()
        .filter(|e| e.event.kind == EventKind::Tap)
        .count();
    let offlines = of_reader
        .iter()
        .filter(|e| code(e) == "remote-offline")
        .count();
    assert_eq!((taps, offlines), (1, 1), "{of_reader:?}");
}

/// A TCP connection to `addr` from the loopback address `from` (any
/// 127.x.y.z is this host), sending nothing.
async fn idle_from(from: [u8; 4], addr: std::net::SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::from((from, 0))).unwrap();
    socket.connect(addr).await.unwrap()
}

/// Whether the service closes `c` (end of stream or reset) before
/// [`PATIENCE`] runs out.
async fn closed(c: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(PATIENCE, c.read(&mut buf)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

/// The agent's next event of `what` (`connected`, or `tap`: whether it
/// was granted, and the text).
async fn agent_event(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<remote::agent::AgentEvent>,
    what: &str,
) -> Option<(bool, String)> {
    use remote::agent::AgentEvent;
    tokio::time::timeout(PATIENCE, async {
        loop {
            match events.recv().await.expect("agent stopped") {
                AgentEvent::Connected { .. } if what == "connected" => return None,
                AgentEvent::TapEnded { granted, text, .. } if what == "tap" => {
                    return Some((granted, text))
                }
                AgentEvent::Refused { reason } => panic!("reader refused: {reason}"),
                _ => {}
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {what}"))
}

#[test]
fn a_flood_of_idle_connections_is_held_to_the_caps_and_a_reader_online_still_taps() {
    use remote::agent::{self, AgentConfig, CardState, SharedCard};
    let (site, dir) = remote_site_with(10_000, &[], &|r| {
        r.max_connections = 8;
        r.max_connections_per_address = 3;
        // Idle connections are held by the caps alone, not cut by the
        // handshake limit while the test runs.
        r.handshake_ms = 600_000;
    });
    let s = site.service();
    let addr = s.remote_addr().unwrap();
    let l = s.loaded();
    let image = site.card.card_image(Some(1)).unwrap();
    let card: SharedCard = Arc::new(std::sync::Mutex::new(Box::new(host::InProcess::new(
        card::Card::new(image),
    ))));
    let granted = site.rt.block_on(async {
        // A reader comes online (one place taken).
        let (presence, rx) = tokio::sync::watch::channel(CardState::default());
        let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
        let cfg = AgentConfig::new(
            addr.to_string(),
            client_tls(&dir, "reader"),
            "door agent".into(),
            "software card".into(),
        );
        let agent = tokio::spawn(agent::run(cfg, card, rx, tx));
        agent_event(&mut events, "connected").await;
        // Five idle connections from each of three addresses: three are
        // held from the first (the per-address cap), three from the second,
        // one from the third (the cap of 8 in all, the reader's included);
        // every other is closed on arrival.
        let mut held = Vec::new();
        let mut shut = 0;
        for (i, from) in [[127, 0, 0, 2], [127, 0, 0, 3], [127, 0, 0, 4]]
            .into_iter()
            .enumerate()
        {
            let keep = [3, 3, 1][i];
            for n in 0..5 {
                let mut c = idle_from(from, addr).await;
                if n < keep {
                    held.push(c);
                } else {
                    assert!(
                        closed(&mut c).await,
                        "connection {n} from {from:?} left open"
                    );
                    shut += 1;
                }
            }
        }
        assert_eq!(shut, 8);
        // The reader online still taps, and is granted.
        let _ = presence.send(CardState {
            present: true,
            card: 1,
        });
        let tap = agent_event(&mut events, "tap").await.unwrap();
        agent.abort();
        drop(held);
        tap
    });
    assert!(granted.0, "refused: {}", granted.1);
    // Each closed connection is counted with the cap that closed it (the
    // tap came after them through the same queue, so they are counted).
    let metrics = l.metrics.encode();
    for line in [
        "pivgate_remote_refused_total{reason=\"connections-per-address\"} 4",
        "pivgate_remote_refused_total{reason=\"connections\"} 4",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
}
