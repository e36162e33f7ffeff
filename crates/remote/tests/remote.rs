//! Remote readers end to end on loopback: real sockets, real TLS, the
//! software card behind the agent and the authenticator in the service.
//! Every wait is for an event; the timeouts only stop a broken test.

use auth::{Authenticator, Mechanism, Outcome, PathTaken, Settings, Transaction};
use card::Card;
use host::InProcess;
use pki::validate::RevocationPolicy;
use pki_issue::{
    CardCredentials, CardOptions, DeviceCredential, DeviceOptions, DeviceRole, KeyAlgorithm,
    TestPki, TestPkiOptions,
};
use remote::agent::{self, AgentConfig, AgentEvent, CardState, SharedCard};
use remote::challenge::ChallengeError;
use remote::hub::{HubConfig, HubEvent, Refusal, RemoteHub, RemoteTap};
use remote::proto::{self, Message, PROTOCOL_VERSION};
use remote::tls::{self, CertRefusal, ReaderVerifier};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, watch};

/// Only a guard against a hung test, never a measurement.
const GUARD: Duration = Duration::from_secs(60);

struct Site {
    pki: TestPki,
    server: DeviceCredential,
    card: CardCredentials,
}

fn site() -> Site {
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let server = pki
        .issue_device(&DeviceOptions {
            name: "pivgate service".into(),
            role: DeviceRole::Server,
            dns: vec!["localhost".into()],
            ips: vec!["127.0.0.1".parse().unwrap()],
            validity: None,
        })
        .unwrap();
    let card = pki
        .issue_card(&CardOptions {
            algorithm: KeyAlgorithm::P256,
            ..CardOptions::default()
        })
        .unwrap();
    Site { pki, server, card }
}

/// A PKI of another organisation (other CA names).
fn other_pki() -> TestPki {
    TestPki::generate(TestPkiOptions {
        organization: "Elsewhere Test PKI".into(),
        ..TestPkiOptions::default()
    })
    .unwrap()
}

fn der(c: &[u8]) -> CertificateDer<'static> {
    CertificateDer::from(c.to_vec())
}

fn key(k: &pki_issue::KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(k.pkcs8_der().to_vec()))
}

fn reader_cert(pki: &TestPki, name: &str, validity: Option<(i64, i64)>) -> DeviceCredential {
    pki.issue_device(&DeviceOptions {
        name: name.into(),
        role: DeviceRole::Reader,
        dns: vec![],
        ips: vec![],
        validity,
    })
    .unwrap()
}

fn hub_config(s: &Site, readers: &[(&str, &str)]) -> HubConfig {
    hub_config_with(s, readers).0
}

/// The hub configuration and its reader verifier (for CRL refreshes).
fn hub_config_with(s: &Site, readers: &[(&str, &str)]) -> (HubConfig, Arc<ReaderVerifier>) {
    let verifier = ReaderVerifier::new(
        s.pki.trust_store(),
        s.pki.crl_set().unwrap(),
        RevocationPolicy::default(),
    );
    let tls = tls::server_config(
        vec![der(&s.server.cert), der(s.pki.intermediate_der())],
        key(&s.server.key),
        verifier.clone(),
    )
    .unwrap();
    let map: HashMap<String, String> = readers
        .iter()
        .map(|(cn, id)| (cn.to_string(), id.to_string()))
        .collect();
    (HubConfig::new(tls, verifier.clone(), map), verifier)
}

fn agent_config(
    addr: SocketAddr,
    pki: &TestPki,
    cred: &DeviceCredential,
    server_ca: &[u8],
) -> AgentConfig {
    let tls = tls::client_config(
        vec![der(&cred.cert), der(pki.intermediate_der())],
        key(&cred.key),
        &[der(server_ca)],
    )
    .unwrap();
    let mut c = AgentConfig::new(
        addr.to_string(),
        tls,
        "door agent".into(),
        "software card".into(),
    );
    c.backoff_min = Duration::from_millis(20);
    c.backoff_max = Duration::from_millis(200);
    c
}

struct Agent {
    task: tokio::task::JoinHandle<()>,
    presence: watch::Sender<CardState>,
    events: mpsc::UnboundedReceiver<AgentEvent>,
    card: u64,
    /// A prepared tap is held (a Ready seen since the last card).
    held: bool,
}

impl Agent {
    fn start(cfg: AgentConfig, creds: &CardCredentials) -> Agent {
        let image = creds.card_image(Some(7)).unwrap();
        let card: SharedCard = Arc::new(Mutex::new(Box::new(InProcess::new(Card::new(image)))));
        let (presence, rx) = watch::channel(CardState::default());
        let (tx, events) = mpsc::unbounded_channel();
        let task = tokio::spawn(agent::run(cfg, card, rx, tx));
        Agent {
            task,
            presence,
            events,
            card: 0,
            held: false,
        }
    }

    fn present(&mut self) -> u64 {
        self.card += 1;
        self.held = false;
        let _ = self.presence.send(CardState {
            present: true,
            card: self.card,
        });
        self.card
    }

    fn remove(&mut self) {
        let _ = self.presence.send(CardState {
            present: false,
            card: self.card,
        });
    }

    async fn wait<T>(&mut self, mut f: impl FnMut(&AgentEvent) -> Option<T>) -> T {
        let fut = async {
            loop {
                let e = self.events.recv().await.expect("agent stopped");
                match e {
                    AgentEvent::Ready { .. } => self.held = true,
                    AgentEvent::Disconnected { .. } | AgentEvent::Refused { .. } => {
                        self.held = false
                    }
                    _ => {}
                }
                if let Some(t) = f(&e) {
                    return t;
                }
            }
        };
        tokio::time::timeout(GUARD, fut).await.expect("agent event")
    }

    async fn ready(&mut self) {
        if self.held {
            return;
        }
        self.wait(|e| matches!(e, AgentEvent::Ready { .. }).then_some(()))
            .await
    }
}

async fn hub_event<T>(
    rx: &mut mpsc::UnboundedReceiver<HubEvent>,
    mut f: impl FnMut(HubEvent) -> Option<T>,
) -> T {
    let fut = async {
        loop {
            let e = rx.recv().await.expect("hub stopped");
            if let Some(t) = f(e) {
                return t;
            }
        }
    };
    tokio::time::timeout(GUARD, fut).await.expect("hub event")
}

async fn next_tap(rx: &mut mpsc::UnboundedReceiver<HubEvent>) -> RemoteTap {
    hub_event(rx, |e| match e {
        HubEvent::CardPresent(t) => Some(t),
        _ => None,
    })
    .await
}

/// Runs PKI-CAK over the tap on a blocking thread, tells the reader, and
/// returns the transaction and the round trips the tap cost.
async fn run_tap(authn: &Arc<Authenticator>, mut tap: RemoteTap) -> (Transaction, u32, bool) {
    let authn = authn.clone();
    tokio::task::spawn_blocking(move || {
        let t = authn.authenticate(&mut tap, Mechanism::PkiCak, None, None);
        let trips = tap.round_trips();
        let prepared = tap.prepared();
        tap.finish(t.outcome.granted(), &format!("{:?}", t.outcome));
        (t, trips, prepared)
    })
    .await
    .unwrap()
}

fn authenticator(s: &Site) -> Arc<Authenticator> {
    Arc::new(Authenticator::new(
        s.pki.trust_store(),
        s.pki.crl_set().unwrap(),
        Settings::default(),
    ))
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_path_tap_costs_one_round_trip_and_a_full_read_two() {
    let s = site();
    let (hub, mut events) =
        RemoteHub::bind(loopback(), hub_config(&s, &[("door 1 reader", "door-1")]))
            .await
            .unwrap();
    let cred = reader_cert(&s.pki, "door 1 reader", None);
    let mut agent = Agent::start(
        agent_config(hub.local_addr(), &s.pki, &cred, s.pki.root_der()),
        &s.card,
    );
    let online = hub_event(&mut events, |e| match e {
        HubEvent::Online { reader, .. } => Some(reader),
        _ => None,
    })
    .await;
    assert_eq!(online, "door-1");
    agent.ready().await;
    let authn = authenticator(&s);

    // First tap of this card: the full path.
    let card = agent.present();
    let tap = next_tap(&mut events).await;
    assert_eq!((tap.reader_id(), tap.card()), ("door-1", card));
    let (t, trips, prepared) = run_tap(&authn, tap).await;
    assert!(t.outcome.granted(), "{:?}", t.outcome);
    assert_eq!(t.path, PathTaken::Full);
    assert!(prepared);
    assert_eq!(trips, 2, "full read round trips");
    let ended = agent
        .wait(|e| match e {
            AgentEvent::TapEnded { card, granted, .. } => Some((*card, *granted)),
            _ => None,
        })
        .await;
    assert_eq!(ended, (card, true));
    agent.remove();
    hub_event(&mut events, |e| {
        matches!(e, HubEvent::CardRemoved { .. }).then_some(())
    })
    .await;

    // The repeat tap: the fast path, in one round trip.
    agent.ready().await;
    let card = agent.present();
    let tap = next_tap(&mut events).await;
    assert_eq!(tap.card(), card);
    let (t, trips, prepared) = run_tap(&authn, tap).await;
    assert!(t.outcome.granted(), "{:?}", t.outcome);
    assert_eq!(t.path, PathTaken::Fast);
    assert!(prepared);
    assert_eq!(trips, 1, "fast path round trips");
    // Two APDUs moved (SELECT, GENERAL AUTHENTICATE), nothing more.
    assert_eq!(t.total().apdus, 2);
    assert!(hub.live_challenges() >= 1);
    agent.task.abort();
    hub.shutdown().await;
}

/// A raw reader that speaks the protocol by hand (to misbehave).
struct Raw {
    tls: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
}

impl Raw {
    async fn connect(addr: SocketAddr, cfg: &AgentConfig) -> Raw {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let tls = tokio_rustls::TlsConnector::from(cfg.tls.clone())
            .connect(tls::server_name("127.0.0.1").unwrap(), tcp)
            .await
            .unwrap();
        Raw { tls }
    }

    async fn hello(addr: SocketAddr, cfg: &AgentConfig) -> Raw {
        let mut r = Raw::connect(addr, cfg).await;
        r.send(&Message::Hello {
            min_version: PROTOCOL_VERSION,
            max_version: PROTOCOL_VERSION,
            agent: "raw".into(),
            reader: "raw".into(),
        })
        .await;
        assert!(matches!(r.recv().await, Message::Welcome { .. }));
        r
    }

    async fn send(&mut self, m: &Message) {
        proto::write_message(&mut self.tls, m).await.unwrap();
    }

    async fn recv(&mut self) -> Message {
        tokio::time::timeout(GUARD, proto::read_message(&mut self.tls))
            .await
            .unwrap()
            .unwrap()
    }

    async fn prepared(&mut self) -> (u64, Vec<proto::Step>) {
        loop {
            if let Message::Prepare { id, steps, .. } = self.recv().await {
                return (id, steps);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_challenge_is_refused() {
    let s = site();
    let (hub, mut events) =
        RemoteHub::bind(loopback(), hub_config(&s, &[("door 2 reader", "door-2")]))
            .await
            .unwrap();
    let cred = reader_cert(&s.pki, "door 2 reader", None);
    let cfg = agent_config(hub.local_addr(), &s.pki, &cred, s.pki.root_der());
    let mut raw = Raw::hello(hub.local_addr(), &cfg).await;
    let (id, steps) = raw.prepared().await;
    let mut card = InProcess::new(Card::new(s.card.card_image(Some(1)).unwrap()));
    let answers = agent::run_steps(&mut card, &steps);
    raw.send(&Message::CardPresent {
        card: 1,
        prepared: Some((id, answers.clone())),
    })
    .await;
    let tap = next_tap(&mut events).await;
    assert!(tap.prepared());
    tap.finish(false, "test");
    // The same answers again, as a new card: refused, and not used.
    raw.send(&Message::CardPresent {
        card: 2,
        prepared: Some((id, answers)),
    })
    .await;
    let reason = hub_event(&mut events, |e| match e {
        HubEvent::ChallengeRefused { reason, .. } => Some(reason),
        _ => None,
    })
    .await;
    assert_eq!(reason, ChallengeError::NotIssued(id));
    let tap = next_tap(&mut events).await;
    assert!(!tap.prepared());
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_challenge_is_refused_and_the_tap_goes_on_over_the_link() {
    let s = site();
    let mut cfg = hub_config(&s, &[("door 3 reader", "door-3")]);
    cfg.challenge_ttl = Duration::ZERO;
    let (hub, mut events) = RemoteHub::bind(loopback(), cfg).await.unwrap();
    let cred = reader_cert(&s.pki, "door 3 reader", None);
    let mut agent = Agent::start(
        agent_config(hub.local_addr(), &s.pki, &cred, s.pki.root_der()),
        &s.card,
    );
    agent.ready().await;
    agent.present();
    let reason = hub_event(&mut events, |e| match e {
        HubEvent::ChallengeRefused { reason, .. } => Some(reason),
        _ => None,
    })
    .await;
    assert!(
        matches!(reason, ChallengeError::Expired { .. }),
        "{reason:?}"
    );
    let tap = next_tap(&mut events).await;
    let (t, trips, prepared) = run_tap(&authenticator(&s), tap).await;
    assert!(!prepared);
    // Granted all the same, with commands and a challenge of its own.
    assert!(t.outcome.granted(), "{:?}", t.outcome);
    assert!(trips > 2, "{trips}");
    agent.task.abort();
    hub.shutdown().await;
}

async fn refused_reader(
    s: &Site,
    cred: &DeviceCredential,
    chain_pki: &TestPki,
) -> (Refusal, AgentEvent) {
    let (hub, mut events) =
        RemoteHub::bind(loopback(), hub_config(s, &[("door 4 reader", "door-4")]))
            .await
            .unwrap();
    let mut agent = Agent::start(
        agent_config(hub.local_addr(), chain_pki, cred, s.pki.root_der()),
        &s.card,
    );
    let reason = hub_event(&mut events, |e| match e {
        HubEvent::Refused { reason, .. } => Some(reason),
        HubEvent::Online { .. } => panic!("a refused reader came online"),
        _ => None,
    })
    .await;
    let seen = agent
        .wait(|e| match e {
            AgentEvent::Refused { .. } | AgentEvent::Disconnected { .. } => Some(e.clone()),
            AgentEvent::Connected { .. } => panic!("a refused reader connected"),
            _ => None,
        })
        .await;
    agent.task.abort();
    hub.shutdown().await;
    (reason, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_expired_revoked_and_unenrolled_reader_certificates_are_refused() {
    let mut s = site();
    // Another CA's reader.
    let other = other_pki();
    let stranger = reader_cert(&other, "door 4 reader", None);
    let (r, _) = refused_reader(&s, &stranger, &other).await;
    assert_eq!(r, Refusal::Certificate(CertRefusal::UnknownIssuer));

    // Expired yesterday.
    let now = pki_issue::now();
    let old = reader_cert(
        &s.pki,
        "door 4 reader",
        Some((now - 10 * 86_400, now - 86_400)),
    );
    let (r, _) = refused_reader(&s, &old, &s.pki).await;
    assert_eq!(r, Refusal::Certificate(CertRefusal::Expired));

    // Valid, but bound to no reader.
    let unbound = reader_cert(&s.pki, "a reader nobody enrolled", None);
    let (r, seen) = refused_reader(&s, &unbound, &s.pki).await;
    assert_eq!(r, Refusal::NotEnrolled("a reader nobody enrolled".into()));
    assert!(
        matches!(&seen, AgentEvent::Refused { reason } if reason.contains("not bound")),
        "{seen:?}"
    );

    // Revoked.
    let revoked = reader_cert(&s.pki, "door 4 reader", None);
    s.pki.revoke(&revoked.cert, None).unwrap();
    let (r, _) = refused_reader(&s, &revoked, &s.pki).await;
    assert_eq!(r, Refusal::Certificate(CertRefusal::Revoked));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_refuses_a_server_certified_by_another_ca() {
    let s = site();
    let other = other_pki();
    let (hub, _events) =
        RemoteHub::bind(loopback(), hub_config(&s, &[("door 5 reader", "door-5")]))
            .await
            .unwrap();
    let cred = reader_cert(&s.pki, "door 5 reader", None);
    // The agent trusts only the other PKI's root for the server.
    let mut agent = Agent::start(
        agent_config(hub.local_addr(), &s.pki, &cred, other.root_der()),
        &s.card,
    );
    let seen = agent
        .wait(|e| match e {
            AgentEvent::ServerRefused(c) => Some(c.clone()),
            AgentEvent::Connected { .. } => panic!("connected to an untrusted server"),
            _ => None,
        })
        .await;
    assert_eq!(seen, CertRefusal::UnknownIssuer);
    agent.task.abort();
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_drop_mid_tap_ends_it_once_and_the_agent_reconnects_to_a_restarted_service() {
    let s = site();
    let (hub, mut events) =
        RemoteHub::bind(loopback(), hub_config(&s, &[("door 6 reader", "door-6")]))
            .await
            .unwrap();
    let addr = hub.local_addr();
    let cred = reader_cert(&s.pki, "door 6 reader", None);
    let mut agent = Agent::start(agent_config(addr, &s.pki, &cred, s.pki.root_der()), &s.card);
    agent.ready().await;
    let card = agent.present();
    let tap = next_tap(&mut events).await;
    // The service goes away before the mechanism runs.
    hub.shutdown().await;
    let lost = agent
        .wait(|e| match e {
            AgentEvent::TapLost { card } => Some(*card),
            _ => None,
        })
        .await;
    assert_eq!(lost, card);
    let (t, trips, _) = run_tap(&authenticator(&s), tap).await;
    match &t.outcome {
        Outcome::Refused(r) => assert!(r.to_string().contains("link"), "{r}"),
        Outcome::Granted => panic!("granted over a dropped link"),
    }
    assert_eq!(trips, 2);

    // The service comes back on the same address: the agent reconnects and
    // does not report the same card again; the next card is reported.
    let (hub, mut events) = RemoteHub::bind(addr, hub_config(&s, &[("door 6 reader", "door-6")]))
        .await
        .unwrap();
    agent
        .wait(|e| matches!(e, AgentEvent::Connected { .. }).then_some(()))
        .await;
    agent.ready().await;
    agent.remove();
    let next = agent.present();
    let tap = hub_event(&mut events, |e| match e {
        HubEvent::CardPresent(t) => Some(t),
        _ => None,
    })
    .await;
    assert_eq!(
        tap.card(),
        next,
        "the card of the dropped tap was reported again"
    );
    let (t, _, _) = run_tap(&authenticator(&s), tap).await;
    assert!(t.outcome.granted(), "{:?}", t.outcome);
    agent.task.abort();
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_oversized_and_silent_peers_are_cut_off_while_another_reader_works() {
    let s = site();
    let mut cfg = hub_config(
        &s,
        &[
            ("good reader", "good"),
            ("bad reader", "bad"),
            ("mute reader", "mute"),
        ],
    );
    cfg.silence = Duration::from_millis(300);
    cfg.heartbeat = Duration::from_millis(100);
    let (hub, mut events) = RemoteHub::bind(loopback(), cfg).await.unwrap();
    let addr = hub.local_addr();
    let good = reader_cert(&s.pki, "good reader", None);
    let mut agent = Agent::start(agent_config(addr, &s.pki, &good, s.pki.root_der()), &s.card);
    agent.ready().await;

    let bad = reader_cert(&s.pki, "bad reader", None);
    let bad_cfg = agent_config(addr, &s.pki, &bad, s.pki.root_der());
    // An unknown message type.
    let mut raw = Raw::hello(addr, &bad_cfg).await;
    raw.tls.write_all(&[0, 0, 0, 2, 0xEE, 0x00]).await.unwrap();
    raw.tls.flush().await.unwrap();
    let why = hub_event(&mut events, |e| match e {
        HubEvent::Offline { reader, reason } if reader == "bad" => Some(reason),
        _ => None,
    })
    .await;
    assert!(why.contains("unknown message type"), "{why}");
    // An oversized frame.
    let mut raw = Raw::hello(addr, &bad_cfg).await;
    raw.tls.write_all(&[0, 1, 0, 0]).await.unwrap();
    raw.tls.flush().await.unwrap();
    let why = hub_event(&mut events, |e| match e {
        HubEvent::Offline { reader, reason } if reader == "bad" => Some(reason),
        _ => None,
    })
    .await;
    assert!(why.contains("larger than"), "{why}");
    // Not TLS at all.
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET / HTTP/1.0\r\n\r\n").await.unwrap();
    hub_event(&mut events, |e| match e {
        HubEvent::Refused {
            reason: Refusal::Handshake(_),
            ..
        } => Some(()),
        _ => None,
    })
    .await;
    // A reader that says hello and then nothing.
    let mute = reader_cert(&s.pki, "mute reader", None);
    let _raw = Raw::hello(addr, &agent_config(addr, &s.pki, &mute, s.pki.root_der())).await;
    let why = hub_event(&mut events, |e| match e {
        HubEvent::Offline { reader, reason } if reader == "mute" => Some(reason),
        _ => None,
    })
    .await;
    assert!(why.contains("silent"), "{why}");

    // The good reader was never disturbed: it taps.
    agent.present();
    let tap = next_tap(&mut events).await;
    assert_eq!(tap.reader_id(), "good");
    let (t, _, _) = run_tap(&authenticator(&s), tap).await;
    assert!(t.outcome.granted(), "{:?}", t.outcome);
    agent.task.abort();
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnecting_reader_resumes_its_tls_session() {
    let s = site();
    let (hub, mut events) =
        RemoteHub::bind(loopback(), hub_config(&s, &[("door 7 reader", "door-7")]))
            .await
            .unwrap();
    let cred = reader_cert(&s.pki, "door 7 reader", None);
    let cfg = agent_config(hub.local_addr(), &s.pki, &cred, s.pki.root_der());
    let kind = |r: &Raw| r.tls.get_ref().1.handshake_kind();
    use tokio_rustls::rustls::HandshakeKind;
    let first = Raw::hello(hub.local_addr(), &cfg).await;
    assert_eq!(kind(&first), Some(HandshakeKind::Full));
    drop(first);
    hub_event(&mut events, |e| {
        matches!(e, HubEvent::Offline { .. }).then_some(())
    })
    .await;
    // Same client configuration (its session cache): resumed, and still
    // the same reader identity.
    let second = Raw::hello(hub.local_addr(), &cfg).await;
    assert_eq!(kind(&second), Some(HandshakeKind::Resumed));
    let reader = hub_event(&mut events, |e| match e {
        HubEvent::Online { reader, .. } => Some(reader),
        _ => None,
    })
    .await;
    assert_eq!(reader, "door-7");
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crl_refresh_refuses_a_revoked_reader_at_its_next_handshake() {
    let mut s = site();
    let (cfg, verifier) = hub_config_with(&s, &[("door 8 reader", "door-8")]);
    let (hub, mut events) = RemoteHub::bind(loopback(), cfg).await.unwrap();
    let cred = reader_cert(&s.pki, "door 8 reader", None);
    let agent_cfg = agent_config(hub.local_addr(), &s.pki, &cred, s.pki.root_der());
    let first = Raw::hello(hub.local_addr(), &agent_cfg).await;
    drop(first);
    hub_event(&mut events, |e| {
        matches!(e, HubEvent::Offline { .. }).then_some(())
    })
    .await;
    // Revoked, and the service's CRLs refreshed: the same TLS
    // configuration now refuses the reader.
    s.pki.revoke(&cred.cert, None).unwrap();
    verifier.set_crls(s.pki.crl_set().unwrap());
    // The same client configuration would resume its TLS session, whose
    // certificate was verified before the revocation: checked again.
    let mut agent = Agent::start(agent_cfg, &s.card);
    let reason = hub_event(&mut events, |e| match e {
        HubEvent::Refused { reason, .. } => Some(reason),
        HubEvent::Online { .. } => panic!("a revoked reader came online"),
        _ => None,
    })
    .await;
    assert_eq!(reason, Refusal::Certificate(CertRefusal::Revoked));
    agent
        .wait(|e| matches!(e, AgentEvent::Refused { .. }).then_some(()))
        .await;
    agent.task.abort();
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_revoked_while_connected_is_cut_off_at_its_next_heartbeat() {
    let mut s = site();
    let (mut cfg, verifier) = hub_config_with(&s, &[("door 9 reader", "door-9")]);
    // A short heartbeat so the test does not wait the default 5 s (the
    // assertion waits for the event, whenever it comes).
    cfg.heartbeat = Duration::from_millis(100);
    let (hub, mut events) = RemoteHub::bind(loopback(), cfg).await.unwrap();
    let cred = reader_cert(&s.pki, "door 9 reader", None);
    let agent_cfg = agent_config(hub.local_addr(), &s.pki, &cred, s.pki.root_der());
    let connected = Raw::hello(hub.local_addr(), &agent_cfg).await;
    hub_event(&mut events, |e| {
        matches!(e, HubEvent::Online { .. }).then_some(())
    })
    .await;
    s.pki.revoke(&cred.cert, None).unwrap();
    verifier.set_crls(s.pki.crl_set().unwrap());
    let reason = hub_event(&mut events, |e| match e {
        HubEvent::Offline { reason, .. } => Some(reason.clone()),
        _ => None,
    })
    .await;
    assert!(
        reason.contains("no longer accepted") && reason.contains("revoked"),
        "{reason}"
    );
    drop(connected);
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_without_a_common_version_is_refused() {
    let s = site();
    let (hub, mut events) =
        RemoteHub::bind(loopback(), hub_config(&s, &[("door 10 reader", "door-10")]))
            .await
            .unwrap();
    let cred = reader_cert(&s.pki, "door 10 reader", None);
    let cfg = agent_config(hub.local_addr(), &s.pki, &cred, s.pki.root_der());
    let mut raw = Raw::connect(hub.local_addr(), &cfg).await;
    raw.send(&Message::Hello {
        min_version: PROTOCOL_VERSION + 1,
        max_version: PROTOCOL_VERSION + 3,
        agent: "future".into(),
        reader: "future".into(),
    })
    .await;
    match raw.recv().await {
        Message::Refuse { reason } => assert!(reason.contains("protocol versions"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let reason = hub_event(&mut events, |e| match e {
        HubEvent::Refused { reason, .. } => Some(reason),
        _ => None,
    })
    .await;
    assert_eq!(
        reason,
        Refusal::Version {
            min: PROTOCOL_VERSION + 1,
            max: PROTOCOL_VERSION + 3
        }
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_does_not_answer_ends_the_tap_with_a_reason() {
    let s = site();
    let mut cfg = hub_config(&s, &[("door 11 reader", "door-11")]);
    cfg.answer_timeout = Duration::from_millis(200);
    let (hub, mut events) = RemoteHub::bind(loopback(), cfg).await.unwrap();
    let cred = reader_cert(&s.pki, "door 11 reader", None);
    let acfg = agent_config(hub.local_addr(), &s.pki, &cred, s.pki.root_der());
    let mut raw = Raw::hello(hub.local_addr(), &acfg).await;
    // A card without the prepared answers: every command goes over the
    // link, and this reader never answers.
    raw.send(&Message::CardPresent {
        card: 1,
        prepared: None,
    })
    .await;
    let tap = next_tap(&mut events).await;
    let authn = authenticator(&s);
    let tapping = tokio::spawn(async move { run_tap(&authn, tap).await });
    loop {
        if let Message::Run { .. } = raw.recv().await {
            break;
        }
    }
    let (t, trips, _) = tapping.await.unwrap();
    match &t.outcome {
        Outcome::Refused(r) => assert!(r.to_string().contains("no answer within"), "{r}"),
        Outcome::Granted => panic!("granted without answers"),
    }
    assert_eq!(trips, 2);
    // The reader is told the tap ended.
    loop {
        if let Message::TapEnd { card, granted, .. } = raw.recv().await {
            assert_eq!((card, granted), (1, false));
            break;
        }
    }
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_a_delayed_link_the_fast_path_still_costs_one_round_trip() {
    let s = site();
    let (hub, mut events) =
        RemoteHub::bind(loopback(), hub_config(&s, &[("door 12 reader", "door-12")]))
            .await
            .unwrap();
    // 10 ms each way: a 20 ms round trip.
    let wan = remote::testing::DelayProxy::start(hub.local_addr(), Duration::from_millis(10))
        .await
        .unwrap();
    let cred = reader_cert(&s.pki, "door 12 reader", None);
    let mut agent = Agent::start(
        agent_config(wan.local_addr(), &s.pki, &cred, s.pki.root_der()),
        &s.card,
    );
    agent.ready().await;
    let authn = authenticator(&s);
    let mut trips = Vec::new();
    for _ in 0..2 {
        agent.ready().await;
        agent.present();
        let tap = next_tap(&mut events).await;
        let (t, n, _) = run_tap(&authn, tap).await;
        assert!(t.outcome.granted(), "{:?}", t.outcome);
        trips.push((t.path, n));
        agent.remove();
    }
    assert_eq!(trips, vec![(PathTaken::Full, 2), (PathTaken::Fast, 1)]);
    agent.task.abort();
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_cuts_off_a_silent_service() {
    let s = site();
    let verifier = ReaderVerifier::new(
        s.pki.trust_store(),
        s.pki.crl_set().unwrap(),
        RevocationPolicy::default(),
    );
    let tls_cfg = tls::server_config(
        vec![der(&s.server.cert), der(s.pki.intermediate_der())],
        key(&s.server.key),
        verifier,
    )
    .unwrap();
    // A service that welcomes the reader and then says nothing more.
    let listener = tokio::net::TcpListener::bind(loopback()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mute = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut t = tokio_rustls::TlsAcceptor::from(tls_cfg)
            .accept(tcp)
            .await
            .unwrap();
        assert!(matches!(
            proto::read_message(&mut t).await.unwrap(),
            Message::Hello { .. }
        ));
        proto::write_message(
            &mut t,
            &Message::Welcome {
                version: PROTOCOL_VERSION,
                heartbeat_ms: 100,
            },
        )
        .await
        .unwrap();
        // Keep the connection open, read nothing.
        std::future::pending::<()>().await;
        drop(t);
    });
    let cred = reader_cert(&s.pki, "door 13 reader", None);
    let mut cfg = agent_config(addr, &s.pki, &cred, s.pki.root_der());
    cfg.silence = Duration::from_millis(100);
    let mut agent = Agent::start(cfg, &s.card);
    agent
        .wait(|e| matches!(e, AgentEvent::Connected { .. }).then_some(()))
        .await;
    let reason = agent
        .wait(|e| match e {
            AgentEvent::Disconnected { reason } => Some(reason.clone()),
            _ => None,
        })
        .await;
    assert!(reason.contains("nothing received"), "{reason}");
    agent.task.abort();
    mute.abort();
}

/// A certificate from the readers' CA that does not say it is for client
/// authentication (no extendedKeyUsage, or another purpose) is no reader's.
#[test]
fn a_certificate_without_client_authentication_is_not_a_reader() {
    use pki_issue::{now, CertificateBuilder, KeyAlgorithm, KeyPair};
    let s = site();
    let verifier = ReaderVerifier::new(
        s.pki.trust_store(),
        s.pki.crl_set().unwrap(),
        RevocationPolicy::default(),
    );
    let issue = |eku: Option<&[der::asn1::ObjectIdentifier]>| {
        let key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
        let mut b = CertificateBuilder::new("CN=door 10 reader,O=pivgate,C=US", key.spki_der())
            .unwrap()
            .validity(now() - 3600, now() + 86_400)
            .end_entity();
        if let Some(e) = eku {
            b = b.extended_key_usage(e);
        }
        b.sign(s.pki.intermediate_der(), s.pki.intermediate_key())
            .unwrap()
    };
    let ims = [s.pki.intermediate_der()];
    let t = now();
    let e = verifier.check(&issue(None), &ims, t).unwrap_err();
    assert_eq!(e.code(), "extended-key-usage-missing", "{e}");
    let server_auth = [der::asn1::ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.1")];
    let e = verifier
        .check(&issue(Some(&server_auth)), &ims, t)
        .unwrap_err();
    assert_eq!(e.code(), "extended-key-usage-missing", "{e}");
    let client_auth = [der::asn1::ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.2")];
    verifier.check(&issue(Some(&client_auth)), &ims, t).unwrap();
}

/// A reader with a valid certificate that reports 400 cards without ever
/// answering: one tap is in flight at a time (the hub hands out one), the
/// presences past the allowance cut the reader off, and the cut is one
/// offline with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_present_flood_runs_one_tap_and_cuts_the_reader_off() {
    let s = site();
    let cfg = hub_config(&s, &[("flood reader", "flood")]);
    let allowance = cfg.max_busy_presences;
    let (hub, mut events) = RemoteHub::bind(loopback(), cfg).await.unwrap();
    let cred = reader_cert(&s.pki, "flood reader", None);
    let acfg = agent_config(hub.local_addr(), &s.pki, &cred, s.pki.root_der());
    let mut raw = Raw::hello(hub.local_addr(), &acfg).await;
    let flood = tokio::spawn(async move {
        let mut sent = 0u32;
        for card in 1..=400u64 {
            let m = Message::CardPresent {
                card,
                prepared: None,
            };
            if proto::write_message(&mut raw.tls, &m).await.is_err() {
                break;
            }
            sent += 1;
        }
        (raw, sent)
    });
    // The taps are held (never finished) until the reader is cut off.
    let mut taps = Vec::new();
    let reason = hub_event(&mut events, |e| match e {
        HubEvent::CardPresent(t) => {
            taps.push(t);
            None
        }
        HubEvent::Offline { reader, reason } if reader == "flood" => Some(reason),
        _ => None,
    })
    .await;
    assert_eq!(taps.len(), 1, "taps handed out");
    assert_eq!(taps[0].card(), 1);
    assert!(
        reason.contains("cut off") && reason.contains(&format!("{} card presences", allowance + 1)),
        "{reason}"
    );
    let (_raw, sent) = tokio::time::timeout(GUARD, flood).await.unwrap().unwrap();
    assert!(sent > allowance + 1, "{sent} presences sent");
    drop(taps);
    // The place is given back with the tap: the reader taps again on its
    // next connection.
    let mut raw = Raw::hello(hub.local_addr(), &acfg).await;
    raw.send(&Message::CardPresent {
        card: 1000,
        prepared: None,
    })
    .await;
    let tap = next_tap(&mut events).await;
    assert_eq!((tap.reader_id(), tap.card()), ("flood", 1000));
    hub.shutdown().await;
}

/// A reader that sends pings and never reads the pongs: its queue of
/// messages is bounded, and once full the reader is cut off with one
/// offline saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_never_reads_is_cut_off_when_its_queue_is_full() {
    let s = site();
    let mut cfg = hub_config(&s, &[("deaf reader", "deaf")]);
    cfg.max_queued = 16;
    let (hub, mut events) = RemoteHub::bind(loopback(), cfg).await.unwrap();
    let cred = reader_cert(&s.pki, "deaf reader", None);
    let acfg = agent_config(hub.local_addr(), &s.pki, &cred, s.pki.root_der());
    // A small receive window, so the service's socket fills quickly.
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let tcp = sock.connect(hub.local_addr()).await.unwrap();
    let mut tls_link = tokio_rustls::TlsConnector::from(acfg.tls.clone())
        .connect(tls::server_name("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap();
    proto::write_message(
        &mut tls_link,
        &Message::Hello {
            min_version: PROTOCOL_VERSION,
            max_version: PROTOCOL_VERSION,
            agent: "deaf".into(),
            reader: "deaf".into(),
        },
    )
    .await
    .unwrap();
    let pinging = tokio::spawn(async move {
        // Bounded only so that a broken hub ends the test.
        for nonce in 0..5_000_000u32 {
            if proto::write_message(&mut tls_link, &Message::Ping { nonce })
                .await
                .is_err()
            {
                return nonce;
            }
        }
        u32::MAX
    });
    let reason = hub_event(&mut events, |e| match e {
        HubEvent::Offline { reader, reason } if reader == "deaf" => Some(reason),
        _ => None,
    })
    .await;
    assert!(
        reason.contains("cut off") && reason.contains("16 messages waiting"),
        "{reason}"
    );
    let sent = tokio::time::timeout(GUARD, pinging).await.unwrap().unwrap();
    assert!(sent < u32::MAX, "the link stayed open");
    hub.shutdown().await;
}
