//! The service side: [`RemoteHub`] accepts reader connections, checks each
//! reader's certificate, keeps a challenge ready for every reader, and
//! hands each arriving card to the service as a [`RemoteTap`], a
//! [`host::Transport`] the mechanism runs over.

use crate::challenge::{ChallengeError, ChallengeStore};
use crate::proto::{self, FrameError, Message, Step, StepAnswer, StepStatus, PROTOCOL_VERSION};
use crate::tls::{cert_refusal, subject_cn, CertRefusal, ReaderVerifier};
use host::{Channel, Traffic, Transport, TransportError};
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// How the hub runs.
#[derive(Clone)]
pub struct HubConfig {
    /// One TLS configuration, shared by every connection.
    pub tls: Arc<ServerConfig>,
    /// The verifier inside `tls`: resumed sessions are checked again
    /// with it (revocation since the session began).
    pub verifier: Arc<ReaderVerifier>,
    /// Reader certificates' subject common names, each mapped to the reader
    /// id the service knows the door's reader by. A valid certificate whose
    /// name is not here is refused.
    pub readers: HashMap<String, String>,
    /// How often each side sends a ping.
    pub heartbeat: Duration,
    /// A peer silent this long (no frame at all) is cut off.
    pub silence: Duration,
    /// The TLS handshake and the hello must both be done within this of
    /// the connection's arrival.
    pub handshake: Duration,
    /// Connections open at once, in any state; more are closed as soon as
    /// they are accepted ([`Refusal::TooMany`]).
    pub max_connections: usize,
    /// Connections open at once from one IP address (one IPv6 /64: a
    /// host is commonly given a whole one).
    pub max_connections_per_address: usize,
    /// How long a pre-issued challenge stays valid.
    pub challenge_ttl: Duration,
    /// How long a tap waits for the reader's answer to one request.
    pub answer_timeout: Duration,
    /// Whether the full read also reads the CHUID (as the authenticator is
    /// configured to).
    pub read_chuid: bool,
    /// Messages waiting to be written to one reader, at most: a reader
    /// that reads nothing (pings whose pongs it never takes) is cut off
    /// when its queue is full, so a connection's memory stays bounded.
    pub max_queued: usize,
    /// Card presences a reader may report while its tap is in flight
    /// (each is refused with "busy"); one more and it is cut off. A reader
    /// has one tap in flight at a time, whatever it sends.
    pub max_busy_presences: u32,
}

impl HubConfig {
    /// Defaults: 5 s heartbeat, cut off after 15 s of silence, 10 s for the
    /// handshake, 512 connections (64 per address), 60 s challenges, 5 s
    /// per answer, CHUID read, 64 messages queued per reader, 8 card
    /// presences while a tap is in flight.
    pub fn new(
        tls: Arc<ServerConfig>,
        verifier: Arc<ReaderVerifier>,
        readers: HashMap<String, String>,
    ) -> HubConfig {
        HubConfig {
            tls,
            verifier,
            readers,
            heartbeat: Duration::from_secs(5),
            silence: Duration::from_secs(15),
            handshake: Duration::from_secs(10),
            max_connections: 512,
            max_connections_per_address: 64,
            challenge_ttl: Duration::from_secs(60),
            answer_timeout: Duration::from_secs(5),
            read_chuid: true,
            max_queued: 64,
            max_busy_presences: 8,
        }
    }
}

/// Why a connection was refused before its reader came online.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The reader's certificate failed verification.
    Certificate(CertRefusal),
    /// A valid certificate for a reader the service does not know.
    NotEnrolled(String),
    /// No protocol version in common.
    Version { min: u16, max: u16 },
    /// The handshake failed otherwise (not TLS, timed out, closed).
    Handshake(String),
    /// Closed on arrival: a connection cap was reached.
    TooMany(Cap),
}

/// Which connection cap closed a connection on arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// [`HubConfig::max_connections`], its value.
    All(usize),
    /// [`HubConfig::max_connections_per_address`], its value.
    Address(usize),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Certificate(c) => write!(f, "reader certificate refused: {c}"),
            Refusal::NotEnrolled(n) => write!(
                f,
                "reader certificate {n:?} is valid but not bound to any reader of this service"
            ),
            Refusal::Version { min, max } => write!(
                f,
                "the reader speaks protocol versions {min}–{max}; this service speaks {PROTOCOL_VERSION}"
            ),
            Refusal::Handshake(s) => write!(f, "handshake failed: {s}"),
            Refusal::TooMany(Cap::All(n)) => write!(
                f,
                "closed on arrival: {n} connections are open, the most this service keeps"
            ),
            Refusal::TooMany(Cap::Address(n)) => write!(
                f,
                "closed on arrival: {n} connections are open from this address, the most one address may hold"
            ),
        }
    }
}

/// What the hub reports.
#[derive(Debug)]
pub enum HubEvent {
    Online {
        reader: String,
        agent: String,
        peer: SocketAddr,
    },
    Offline {
        reader: String,
        reason: String,
    },
    Refused {
        peer: SocketAddr,
        reason: Refusal,
    },
    /// A card arrived: run the mechanism over the tap, then
    /// [`RemoteTap::finish`] it.
    CardPresent(RemoteTap),
    CardRemoved {
        reader: String,
    },
    /// A reader's prepared answers were not accepted; the tap goes on with
    /// fresh commands over the link.
    ChallengeRefused {
        reader: String,
        reason: ChallengeError,
    },
}

struct Shared {
    cfg: HubConfig,
    /// `cfg.readers` at first, then as [`RemoteHub::set_readers`] sets it.
    readers: Mutex<Arc<HashMap<String, String>>>,
    challenges: Mutex<ChallengeStore>,
    /// The last card presence reported per reader, so a presence is
    /// reported once even across reconnections.
    last_card: Mutex<HashMap<String, u64>>,
    /// Connections accepted so far (numbers each connection's challenges).
    connections: std::sync::atomic::AtomicU64,
    /// Readers with a tap in flight (one at a time per reader, whichever
    /// of its connections reported the card).
    in_flight: Arc<Mutex<HashSet<String>>>,
    events: mpsc::UnboundedSender<HubEvent>,
    stop: watch::Receiver<bool>,
    /// Connections open now, in all and per address.
    open: Mutex<Open>,
}

/// Connections open now.
#[derive(Default)]
struct Open {
    all: usize,
    per_address: HashMap<IpAddr, usize>,
}

/// One open connection's place under the caps, given back when dropped.
struct Place {
    shared: Arc<Shared>,
    ip: IpAddr,
}

/// The source a connection from `ip` counts against: the IPv4 address (an
/// IPv4-mapped IPv6 address is one), or the IPv6 address's /64.
fn source(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        },
    }
}

impl Place {
    /// A place for a connection from `ip`, or the cap that refuses it.
    fn take(shared: &Arc<Shared>, ip: IpAddr) -> Result<Place, Cap> {
        let ip = source(ip);
        let mut open = lock(&shared.open);
        if open.all >= shared.cfg.max_connections {
            return Err(Cap::All(shared.cfg.max_connections));
        }
        let from = open.per_address.get(&ip).copied().unwrap_or(0);
        if from >= shared.cfg.max_connections_per_address {
            return Err(Cap::Address(shared.cfg.max_connections_per_address));
        }
        open.all += 1;
        open.per_address.insert(ip, from + 1);
        Ok(Place {
            shared: shared.clone(),
            ip,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut open = lock(&self.shared.open);
        open.all = open.all.saturating_sub(1);
        if let std::collections::hash_map::Entry::Occupied(mut e) = open.per_address.entry(self.ip)
        {
            if *e.get() <= 1 {
                e.remove();
            } else {
                *e.get_mut() -= 1;
            }
        }
    }
}

/// How long the accept loop waits after the listener fails (out of file
/// descriptors, mostly) before it accepts again, so it does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The remote-reader endpoint of the service.
pub struct RemoteHub {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    accept: Option<tokio::task::JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl RemoteHub {
    /// Listens on `addr` (inside a tokio runtime); events arrive on the
    /// returned receiver.
    pub async fn bind(
        addr: SocketAddr,
        cfg: HubConfig,
    ) -> std::io::Result<(RemoteHub, mpsc::UnboundedReceiver<HubEvent>)> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            readers: Mutex::new(Arc::new(cfg.readers.clone())),
            cfg,
            challenges: Mutex::new(ChallengeStore::new()),
            last_card: Mutex::new(HashMap::new()),
            connections: std::sync::atomic::AtomicU64::new(0),
            in_flight: Arc::new(Mutex::new(HashSet::new())),
            events: tx,
            stop: stop_rx,
            open: Mutex::new(Open::default()),
        });
        let s = shared.clone();
        let accept = tokio::spawn(async move {
            let acceptor = TlsAcceptor::from(s.cfg.tls.clone());
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "remote readers: cannot accept a connection");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                };
                match Place::take(&s, peer.ip()) {
                    Ok(place) => {
                        let _ = tcp.set_nodelay(true);
                        tokio::spawn(connection(s.clone(), acceptor.clone(), tcp, peer, place));
                    }
                    Err(cap) => {
                        drop(tcp);
                        emit(
                            &s,
                            HubEvent::Refused {
                                peer,
                                reason: Refusal::TooMany(cap),
                            },
                        );
                    }
                }
            }
        });
        Ok((
            RemoteHub {
                addr,
                stop: stop_tx,
                accept: Some(accept),
                shared,
            },
            rx,
        ))
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces the map of reader certificate names to reader ids (the
    /// readers bound since): the next connection is checked against it.
    /// Readers connected already stay connected.
    pub fn set_readers(&self, readers: HashMap<String, String>) {
        *lock(&self.shared.readers) = Arc::new(readers);
    }

    /// How many challenges are live (issued, not used, not expired).
    pub fn live_challenges(&self) -> usize {
        let mut c = lock(&self.shared.challenges);
        c.sweep(Instant::now());
        c.len()
    }

    /// Stops listening and closes every connection; the port is free when
    /// this returns.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(a) = self.accept.take() {
            a.abort();
            let _ = a.await;
        }
    }
}

impl Drop for RemoteHub {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(a) = &self.accept {
            a.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere leaves plain data consistent enough to go on.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What a tap asks its connection to do.
enum TapCmd {
    Run {
        steps: Vec<Step>,
        reply: std::sync::mpsc::SyncSender<Vec<StepAnswer>>,
    },
    End {
        card: u64,
        granted: bool,
        text: String,
    },
}

fn emit(s: &Shared, e: HubEvent) {
    let _ = s.events.send(e);
}

async fn connection(
    s: Arc<Shared>,
    acceptor: TlsAcceptor,
    tcp: TcpStream,
    peer: SocketAddr,
    _place: Place,
) {
    let refused = |reason| emit(&s, HubEvent::Refused { peer, reason });
    // One deadline for the TLS handshake and the hello together.
    let deadline = tokio::time::Instant::now() + s.cfg.handshake;
    let mut tls = match tokio::time::timeout_at(deadline, acceptor.accept(tcp)).await {
        Err(_) => return refused(Refusal::Handshake("timed out".into())),
        Ok(Err(e)) => {
            return refused(match cert_refusal(&e) {
                Some(c) => Refusal::Certificate(c),
                None => Refusal::Handshake(e.to_string()),
            })
        }
        Ok(Ok(t)) => t,
    };
    let conn = tls.get_ref().1;
    if conn.handshake_kind() == Some(tokio_rustls::rustls::HandshakeKind::Resumed) {
        let chain = conn.peer_certificates().unwrap_or(&[]);
        if let Err(r) = s.cfg.verifier.recheck(chain) {
            let r = Refusal::Certificate(r);
            let _ = proto::write_message(
                &mut tls,
                &Message::Refuse {
                    reason: r.to_string(),
                },
            )
            .await;
            return refused(r);
        }
    }
    // Kept for the session: the chain is checked again at every heartbeat,
    // so a reader revoked (a CRL refresh) or expired while connected is cut off.
    let chain: Vec<CertificateDer<'static>> = conn
        .peer_certificates()
        .map(|c| c.iter().map(|d| d.clone().into_owned()).collect())
        .unwrap_or_default();
    let name = chain.first().and_then(|c| subject_cn(c));
    let Some(name) = name else {
        return refused(Refusal::Certificate(CertRefusal::Other(
            "no subject common name".into(),
        )));
    };
    let bound = lock(&s.readers).get(&name).cloned();
    let Some(reader) = bound else {
        let r = Refusal::NotEnrolled(name);
        let _ = proto::write_message(
            &mut tls,
            &Message::Refuse {
                reason: r.to_string(),
            },
        )
        .await;
        return refused(r);
    };
    let hello = match tokio::time::timeout_at(deadline, proto::read_message(&mut tls)).await {
        Ok(m) => m,
        Err(_) => Err(FrameError::Silent(s.cfg.handshake)),
    };
    let agent = match hello {
        Ok(Message::Hello {
            min_version,
            max_version,
            agent,
            ..
        }) => {
            if !(min_version..=max_version).contains(&PROTOCOL_VERSION) {
                let r = Refusal::Version {
                    min: min_version,
                    max: max_version,
                };
                let _ = proto::write_message(
                    &mut tls,
                    &Message::Refuse {
                        reason: r.to_string(),
                    },
                )
                .await;
                return refused(r);
            }
            agent
        }
        Ok(other) => {
            return refused(Refusal::Handshake(format!(
                "expected a hello, got {other:?}"
            )))
        }
        Err(e) => return refused(Refusal::Handshake(e.to_string())),
    };
    let welcome = Message::Welcome {
        version: PROTOCOL_VERSION,
        heartbeat_ms: s.cfg.heartbeat.as_millis().min(u32::MAX as u128) as u32,
    };
    if let Err(e) = proto::write_message(&mut tls, &welcome).await {
        return refused(Refusal::Handshake(e.to_string()));
    }
    emit(
        &s,
        HubEvent::Online {
            reader: reader.clone(),
            agent,
            peer,
        },
    );
    // Challenges belong to this connection: another connection of the
    // same reader (a reconnection racing the old one's end) has its own.
    let owner = format!(
        "{reader}#{}",
        s.connections
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let reason = session(&s, tls, &reader, &owner, &chain).await;
    lock(&s.challenges).forget_reader(&owner);
    emit(&s, HubEvent::Offline { reader, reason });
}

/// The commands of a prepared tap: SELECT PIV and GENERAL AUTHENTICATE of
/// the card authentication key (9E, ECC P-256) over SHA-256 of the
/// challenge, exactly as the authenticator builds them.
fn prepared_steps(challenge: &[u8; 32]) -> Vec<Step> {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, challenge);
    let mut steps = Vec::with_capacity(2);
    if let Some(a) = record(|ch| host::client::Piv::new(ch).select().map(|_| ())) {
        steps.push(Step {
            apdu: a,
            follow: true,
        });
    }
    if let Some(a) = record(|ch| {
        host::client::Piv::new(ch)
            .sign(0x11, 0x9E, digest.as_ref())
            .map(|_| ())
    }) {
        steps.push(Step {
            apdu: a,
            follow: true,
        });
    }
    steps
}

/// The commands of the full read, sent as one batch when the mechanism
/// asks for the first: the card authentication certificate and the CHUID.
fn full_read_steps(read_chuid: bool) -> Vec<Step> {
    let mut tags = vec![0x5FC101u32];
    if read_chuid {
        tags.push(0x5FC102);
    }
    tags.into_iter()
        .filter_map(|t| {
            record(|ch| host::client::Piv::new(ch).get_data(t).map(|_| ()))
                .map(|apdu| Step { apdu, follow: true })
        })
        .collect()
}

/// The first command APDU `op` sends through the PIV client (it is then
/// stopped), so prepared commands are byte for byte what the client sends.
fn record(
    op: impl FnOnce(&mut dyn Channel) -> Result<(), host::client::ClientError>,
) -> Option<Vec<u8>> {
    struct Rec(Option<Vec<u8>>);
    impl Channel for Rec {
        fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
            self.0 = Some(apdu.to_vec());
            Err(TransportError::Cancelled)
        }
        fn extended_length(&self) -> bool {
            false
        }
        fn traffic(&self) -> Traffic {
            Traffic::default()
        }
    }
    let mut r = Rec(None);
    let _ = op(&mut r);
    r.0
}

/// A fresh prepared tap for `reader`. The reader holds only its latest
/// one, so the earlier challenges of that reader are forgotten: the store
/// holds at most one challenge per connected reader.
fn prepare(s: &Shared, owner: &str) -> Option<Message> {
    let issued = {
        let mut c = lock(&s.challenges);
        c.forget_reader(owner);
        c.issue(owner, Instant::now(), s.cfg.challenge_ttl, prepared_steps)
            .ok()?
    };
    Some(Message::Prepare {
        id: issued.id,
        expires_ms: s.cfg.challenge_ttl.as_millis().min(u32::MAX as u128) as u32,
        steps: issued.steps,
    })
}

type Tls = tokio_rustls::server::TlsStream<TcpStream>;

async fn session(
    s: &Arc<Shared>,
    tls: Tls,
    reader: &str,
    owner: &str,
    chain: &[CertificateDer<'static>],
) -> String {
    let (mut rd, mut wr) = tokio::io::split(tls);
    let (in_tx, mut in_rx) = mpsc::channel::<Result<Message, FrameError>>(4);
    let silence = s.cfg.silence;
    let reading = tokio::spawn(async move {
        loop {
            let m = proto::read_message_within(&mut rd, silence).await;
            let end = m.is_err();
            if in_tx.send(m).await.is_err() || end {
                return;
            }
        }
    });
    let (out_tx, mut out_rx) = mpsc::channel::<Message>(s.cfg.max_queued.max(1));
    let writing = tokio::spawn(async move {
        while let Some(m) = out_rx.recv().await {
            if proto::write_message(&mut wr, &m).await.is_err() {
                return;
            }
        }
    });
    // A message for the reader; `Err` (the reason to cut it off) when its
    // queue is full: it does not read what it is sent.
    let max_queued = s.cfg.max_queued.max(1);
    let send = |m: Message| -> Result<(), String> {
        match out_tx.try_send(m) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => Err(format!(
                "cut off: the reader does not read what the service sends ({max_queued} messages waiting)"
            )),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                Err("link error: the connection cannot be written".to_string())
            }
        }
    };
    let (cmd_tx, mut cmd_rx) = mpsc::unbounded_channel::<TapCmd>();
    let mut pending: HashMap<u32, std::sync::mpsc::SyncSender<Vec<StepAnswer>>> = HashMap::new();
    let mut seq = 0u32;
    // Card presences reported while this reader's tap was in flight.
    let mut busy = 0u32;
    let mut ping = tokio::time::interval(s.cfg.heartbeat);
    ping.tick().await;
    let mut stop = s.stop.clone();
    if let Some(p) = prepare(s, owner) {
        let _ = send(p);
    }
    let reason = loop {
        let sent: Result<(), String> = tokio::select! {
            m = in_rx.recv() => {
                let m = match m {
                    Some(Ok(m)) => m,
                    Some(Err(FrameError::Closed)) | None => break "the reader closed the connection".to_string(),
                    Some(Err(FrameError::Silent(d))) => break format!("the reader was silent for {d:?}"),
                    Some(Err(FrameError::Protocol(e))) => break format!("protocol violation: {e}"),
                    Some(Err(e)) => break format!("link error: {e}"),
                };
                match m {
                    Message::Ping { nonce } => send(Message::Pong { nonce }),
                    Message::Pong { .. } => Ok(()),
                    Message::Ran { seq, answers } => {
                        match pending.remove(&seq) {
                            Some(reply) => { let _ = reply.try_send(answers); Ok(()) }
                            None => break format!("protocol violation: an answer to request {seq}, which is not pending"),
                        }
                    }
                    Message::CardRemoved { .. } => { emit(s, HubEvent::CardRemoved { reader: reader.to_string() }); Ok(()) }
                    Message::CardPresent { card, prepared } => {
                        if lock(&s.last_card).get(reader) == Some(&card) {
                            continue;
                        }
                        match Flight::take(&s.in_flight, reader) {
                            None => {
                                // One tap in flight per reader: this card is
                                // refused (it may be reported again later).
                                busy += 1;
                                if busy > s.cfg.max_busy_presences {
                                    break format!(
                                        "cut off: {busy} card presences while a tap was in flight (one tap at a time per reader)"
                                    );
                                }
                                send(Message::TapEnd {
                                    card,
                                    granted: false,
                                    text: "a tap is in progress at this reader; present the card again".into(),
                                })
                            }
                            Some(flight) => {
                                busy = 0;
                                lock(&s.last_card).insert(reader.to_string(), card);
                                let tap = card_present(s, reader, owner, card, prepared, cmd_tx.clone(), flight);
                                emit(s, HubEvent::CardPresent(tap));
                                match prepare(s, owner) {
                                    Some(p) => send(p),
                                    None => Ok(()),
                                }
                            }
                        }
                    }
                    other => break format!("protocol violation: unexpected message {other:?}"),
                }
            }
            Some(c) = cmd_rx.recv() => match c {
                TapCmd::Run { steps, reply } => {
                    seq = seq.wrapping_add(1);
                    pending.insert(seq, reply);
                    send(Message::Run { seq, steps })
                }
                TapCmd::End { card, granted, text } => {
                    send(Message::TapEnd { card, granted, text })
                }
            },
            _ = ping.tick() => {
                if let Err(r) = s.cfg.verifier.recheck(chain) {
                    break format!("the reader's certificate is no longer accepted: {r}");
                }
                send(Message::Ping { nonce: seq })
            }
            _ = stop.changed() => break "the service is shutting down".to_string(),
        };
        if let Err(reason) = sent {
            break reason;
        }
    };
    reading.abort();
    writing.abort();
    reason
}

fn card_present(
    s: &Shared,
    reader: &str,
    owner: &str,
    card: u64,
    prepared: Option<(u64, Vec<StepAnswer>)>,
    cmd: mpsc::UnboundedSender<TapCmd>,
    flight: Flight,
) -> RemoteTap {
    let mut tap = RemoteTap {
        flight: Some(flight),
        reader: reader.to_string(),
        card,
        cmd,
        ready: Vec::new(),
        current: None,
        batch: full_read_steps(s.cfg.read_chuid),
        challenge: None,
        prepared: false,
        traffic: Traffic::default(),
        trips: 1,
        waited: Duration::ZERO,
        timeout: s.cfg.answer_timeout,
        ended: false,
        broken: false,
    };
    if let Some((id, answers)) = prepared {
        let taken = lock(&s.challenges).take(id, owner, Instant::now());
        match taken {
            Ok(issued) => {
                tap.challenge = Some(issued.challenge);
                tap.prepared = true;
                tap.add(&issued.steps, &answers);
            }
            Err(reason) => emit(
                s,
                HubEvent::ChallengeRefused {
                    reader: reader.to_string(),
                    reason,
                },
            ),
        }
    }
    tap
}

/// One exchange the reader already made: a command and the card's answer
/// (or why there was none).
type Exchange = (Vec<u8>, Result<Vec<u8>, StepStatus>);

/// A reader's one tap in flight: held by its [`RemoteTap`], given back
/// when the tap is dropped (finished or not), whatever became of the
/// connection.
struct Flight {
    set: Arc<Mutex<HashSet<String>>>,
    reader: String,
}

impl Flight {
    /// The reader's place for a tap, unless a tap of it is in flight.
    fn take(set: &Arc<Mutex<HashSet<String>>>, reader: &str) -> Option<Flight> {
        lock(set).insert(reader.to_string()).then(|| Flight {
            set: set.clone(),
            reader: reader.to_string(),
        })
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        lock(&self.set).remove(&self.reader);
    }
}

/// A card at a remote reader, for one tap: a [`Transport`] that answers
/// from what the reader already sent when it can, and asks over the link
/// when it cannot. Use it from a blocking thread (it waits for the link).
pub struct RemoteTap {
    /// This reader's place for its one tap in flight, given back when the
    /// reader is told the outcome (before, so that the reader's next card
    /// never finds it taken).
    flight: Option<Flight>,
    reader: String,
    card: u64,
    cmd: mpsc::UnboundedSender<TapCmd>,
    /// Exchanges already made, one queue per step (its GET RESPONSE chain).
    ready: Vec<VecDeque<Exchange>>,
    current: Option<usize>,
    /// The full read, sent as one request when its first command is asked.
    batch: Vec<Step>,
    challenge: Option<[u8; 32]>,
    prepared: bool,
    traffic: Traffic,
    trips: u32,
    waited: Duration,
    timeout: Duration,
    /// The reader was told the outcome.
    ended: bool,
    /// A request went unanswered or the link dropped: no more requests.
    broken: bool,
}

impl std::fmt::Debug for RemoteTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteTap")
            .field("reader", &self.reader)
            .field("card", &self.card)
            .field("trips", &self.trips)
            .finish()
    }
}

impl RemoteTap {
    /// The reader id (as mapped from its certificate).
    pub fn reader_id(&self) -> &str {
        &self.reader
    }

    /// The reader's number for this card presence.
    pub fn card(&self) -> u64 {
        self.card
    }

    /// Network round trips this tap has cost so far: the card's arrival
    /// (with the prepared answers) and one per request over the link.
    pub fn round_trips(&self) -> u32 {
        self.trips
    }

    /// Whether the prepared answers were accepted (a live, unused,
    /// unexpired challenge of this reader).
    pub fn prepared(&self) -> bool {
        self.prepared
    }

    /// Ends the tap: the reader is told the outcome.
    pub fn finish(mut self, granted: bool, text: &str) {
        self.end(granted, text.to_string());
    }

    fn end(&mut self, granted: bool, text: String) {
        if !self.ended {
            self.ended = true;
            drop(self.flight.take());
            let _ = self.cmd.send(TapCmd::End {
                card: self.card,
                granted,
                text,
            });
        }
    }

    fn add(&mut self, steps: &[Step], answers: &[StepAnswer]) {
        for (step, ans) in steps.iter().zip(answers) {
            let mut q = VecDeque::new();
            match ans.status {
                StepStatus::Ok => {
                    let mut cmd = step.apdu.clone();
                    for r in &ans.responses {
                        q.push_back((cmd, Ok(r.clone())));
                        let sw2 = r.last().copied().unwrap_or(0);
                        cmd = vec![0x00, 0xC0, 0x00, 0x00, sw2];
                    }
                }
                StepStatus::NoCard | StepStatus::Failed => {
                    q.push_back((step.apdu.clone(), Err(ans.status)));
                }
                StepStatus::Skipped => {}
            }
            if !q.is_empty() {
                self.ready.push(q);
            }
        }
    }

    fn answered(&mut self, apdu: &[u8]) -> Option<Result<Vec<u8>, StepStatus>> {
        if let Some(i) = self.current {
            if self.ready[i].front().is_some_and(|(c, _)| c == apdu) {
                return self.ready[i].pop_front().map(|(_, r)| r);
            }
        }
        let i = self
            .ready
            .iter()
            .position(|q| q.front().is_some_and(|(c, _)| c == apdu))?;
        self.current = Some(i);
        self.ready[i].pop_front().map(|(_, r)| r)
    }

    fn link(&self, detail: impl Into<String>) -> TransportError {
        TransportError::Link {
            reader: self.reader.clone(),
            detail: detail.into(),
        }
    }

    /// One request over the link.
    fn run(&mut self, steps: Vec<Step>) -> Result<Vec<StepAnswer>, TransportError> {
        if self.ended || self.broken {
            return Err(self.link("the tap has ended"));
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let t = Instant::now();
        self.trips += 1;
        self.cmd
            .send(TapCmd::Run { steps, reply: tx })
            .map_err(|_| self.link("the link to the reader dropped during the tap"))?;
        let r = rx.recv_timeout(self.timeout);
        self.waited += t.elapsed();
        match r {
            Ok(a) => Ok(a),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                self.broken = true;
                Err(self.link(format!("no answer within {:?}", self.timeout)))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                self.broken = true;
                Err(self.link("the link to the reader dropped during the tap"))
            }
        }
    }

    fn answer(
        &mut self,
        apdu: &[u8],
        r: Result<Vec<u8>, StepStatus>,
    ) -> Result<Vec<u8>, TransportError> {
        match r {
            Ok(resp) if resp.len() < 2 => Err(TransportError::ShortResponse(resp.len())),
            Ok(resp) => {
                self.traffic.record(apdu.len(), resp.len());
                Ok(resp)
            }
            Err(StepStatus::NoCard) => Err(TransportError::CardRemoved),
            Err(_) => Err(TransportError::Protocol {
                reader: self.reader.clone(),
                detail: "the reader could not reach its card".into(),
            }),
        }
    }
}

impl Channel for RemoteTap {
    fn transmit(&mut self, apdu: &[u8]) -> Result<Vec<u8>, TransportError> {
        if let Some(r) = self.answered(apdu) {
            return self.answer(apdu, r);
        }
        let steps = if self.batch.first().is_some_and(|s| s.apdu == apdu) {
            std::mem::take(&mut self.batch)
        } else {
            vec![Step {
                apdu: apdu.to_vec(),
                follow: true,
            }]
        };
        let answers = self.run(steps.clone())?;
        if answers.len() > steps.len() {
            return Err(TransportError::Protocol {
                reader: self.reader.clone(),
                detail: format!("{} answers to {} commands", answers.len(), steps.len()),
            });
        }
        self.add(&steps, &answers);
        match self.answered(apdu) {
            Some(r) => self.answer(apdu, r),
            None => Err(TransportError::Protocol {
                reader: self.reader.clone(),
                detail: "the reader did not answer the command".into(),
            }),
        }
    }

    fn extended_length(&self) -> bool {
        false
    }

    fn traffic(&self) -> Traffic {
        self.traffic
    }
}

impl Transport for RemoteTap {
    fn transaction(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Channel) -> Result<(), TransportError>,
    ) -> Result<(), TransportError> {
        // The reader holds its card for the tap; nothing else talks to it.
        f(self)
    }

    fn reconnect(&mut self, _reset: bool) -> Result<(), TransportError> {
        Err(TransportError::CardReset)
    }

    fn atr(&self) -> &[u8] {
        &[]
    }

    fn reader(&self) -> &str {
        &self.reader
    }

    /// Time spent waiting on the network for answers.
    fn line_time(&self) -> Option<Duration> {
        Some(self.waited)
    }

    fn take_challenge(&mut self) -> Option<[u8; 32]> {
        self.challenge.take()
    }

    fn round_trips(&self) -> Option<u32> {
        Some(self.trips)
    }
}

impl Drop for RemoteTap {
    fn drop(&mut self) {
        self.end(false, "the tap ended without a decision".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_an_ipv4_address_or_an_ipv6_64() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(source(ip("192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(source(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
        assert_eq!(
            source(ip("2001:db8:1:2:aaaa:bbbb:cccc:dddd")),
            ip("2001:db8:1:2::")
        );
        assert_eq!(
            source(ip("2001:db8:1:2::1")),
            source(ip("2001:db8:1:2:ffff::9"))
        );
        assert_ne!(source(ip("2001:db8:1:2::1")), source(ip("2001:db8:1:3::1")));
    }
}
