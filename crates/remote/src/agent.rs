//! The reader side: one persistent TLS connection to the service, card
//! arrivals and removals reported as they happen, the service's commands
//! relayed to the card. The agent holds no keys of the door and decides
//! nothing: it sends the commands the service built and returns the answers.

use crate::proto::{
    self, answer_size, FrameError, Message, Step, StepAnswer, StepStatus, MAX_CHAIN, MAX_PAYLOAD,
    PROTOCOL_VERSION,
};
use crate::tls::{cert_refusal, CertRefusal};
use host::{Transport, TransportError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::TlsConnector;

/// How the agent connects.
#[derive(Clone)]
pub struct AgentConfig {
    /// `HOST:PORT` of the service.
    pub server: String,
    pub tls: Arc<ClientConfig>,
    /// This agent's name, for the service's log.
    pub name: String,
    /// The local reader offered, for the service's log.
    pub reader: String,
    /// The first reconnection delay; doubled after each failure up to
    /// `backoff_max`, each with random jitter (half to all of it).
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Connecting, the TLS handshake and the welcome must finish within this.
    pub handshake: Duration,
    /// The service silent this long is taken as gone.
    pub silence: Duration,
}

impl AgentConfig {
    /// The agent's name when none is given: this host's name
    /// (`/etc/hostname`), or `pivgate reader`.
    pub fn host_name() -> String {
        std::fs::read_to_string("/etc/hostname")
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "pivgate reader".into())
    }

    pub fn new(
        server: String,
        tls: Arc<ClientConfig>,
        name: String,
        reader: String,
    ) -> AgentConfig {
        AgentConfig {
            server,
            tls,
            name,
            reader,
            backoff_min: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
            handshake: Duration::from_secs(10),
            silence: Duration::from_secs(15),
        }
    }
}

/// The local card as the agent sees it: whether one is present, and a
/// number that changes with every arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CardState {
    pub present: bool,
    pub card: u64,
}

/// What the agent reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentEvent {
    Connected {
        resumed: bool,
    },
    Disconnected {
        reason: String,
    },
    /// The service refused this reader, or its certificate was refused.
    Refused {
        reason: String,
    },
    /// The server's certificate was refused.
    ServerRefused(CertRefusal),
    /// The service sent a prepared tap: the next card costs one round trip.
    Ready {
        challenge: u64,
    },
    CardReported {
        card: u64,
        prepared: bool,
    },
    TapEnded {
        card: u64,
        granted: bool,
        text: String,
    },
    /// The link dropped while the service was deciding on this card.
    TapLost {
        card: u64,
    },
    /// Waiting before the next connection attempt.
    Retrying {
        after: Duration,
    },
}

/// The local card, shared with blocking threads.
pub type SharedCard = Arc<Mutex<Box<dyn Transport + Send>>>;

/// Runs the agent until the task is dropped: connects, serves, reconnects.
pub async fn run(
    cfg: AgentConfig,
    card: SharedCard,
    mut presence: watch::Receiver<CardState>,
    events: mpsc::UnboundedSender<AgentEvent>,
) {
    let mut reported: Option<u64> = None;
    let mut failures = 0u32;
    loop {
        match session(&cfg, &card, &mut presence, &events, &mut reported).await {
            Ok(reason) => {
                failures = 0;
                let _ = events.send(AgentEvent::Disconnected { reason });
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                let _ = events.send(e);
            }
        }
        let after = backoff(&cfg, failures);
        let _ = events.send(AgentEvent::Retrying { after });
        tokio::time::sleep(after).await;
    }
}

/// The delay before attempt `failures + 1`: exponential, capped, jittered.
pub fn backoff(cfg: &AgentConfig, failures: u32) -> Duration {
    let base = cfg
        .backoff_min
        .saturating_mul(1u32 << failures.min(16))
        .min(cfg.backoff_max);
    let mut r = [0u8; 2];
    let _ = aws_lc_rs::rand::fill(&mut r);
    let frac = 0.5 + f64::from(u16::from_be_bytes(r)) / f64::from(u16::MAX) / 2.0;
    base.mul_f64(frac)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `steps` on the card: each command, then GET RESPONSE while the card
/// answers `61xx`; stops at a card failure, and skips what would not fit
/// one frame.
pub fn run_steps(card: &mut dyn Transport, steps: &[Step]) -> Vec<StepAnswer> {
    let mut out = Vec::with_capacity(steps.len());
    let mut size = 64;
    let mut failed = false;
    for step in steps {
        if failed {
            out.push(StepAnswer {
                status: StepStatus::Skipped,
                responses: vec![],
            });
            continue;
        }
        let mut responses = Vec::new();
        let mut cmd = step.apdu.clone();
        let status = loop {
            match card.transmit(&cmd) {
                Ok(r) => {
                    let more = step.follow
                        && r.len() >= 2
                        && r[r.len() - 2] == 0x61
                        && responses.len() < MAX_CHAIN;
                    let sw2 = r.last().copied().unwrap_or(0);
                    responses.push(r);
                    if !more {
                        break StepStatus::Ok;
                    }
                    cmd = vec![0x00, 0xC0, 0x00, 0x00, sw2];
                }
                Err(TransportError::NoCard(_) | TransportError::CardRemoved) => {
                    break StepStatus::NoCard
                }
                Err(_) => break StepStatus::Failed,
            }
        };
        let mut a = StepAnswer { status, responses };
        if status != StepStatus::Ok {
            failed = true;
            a.responses.clear();
        }
        if size + answer_size(&a) > MAX_PAYLOAD {
            a = StepAnswer {
                status: StepStatus::Skipped,
                responses: vec![],
            };
            failed = true;
        }
        size += answer_size(&a);
        out.push(a);
    }
    out
}

async fn on_card(card: &SharedCard, steps: Vec<Step>) -> Vec<StepAnswer> {
    let card = card.clone();
    let n = steps.len();
    tokio::task::spawn_blocking(move || run_steps(&mut **lock(&card), &steps))
        .await
        .unwrap_or_else(|_| {
            vec![
                StepAnswer {
                    status: StepStatus::Failed,
                    responses: vec![],
                };
                n
            ]
        })
}

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

async fn connect(cfg: &AgentConfig) -> Result<Tls, AgentEvent> {
    let host = cfg
        .server
        .rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(&cfg.server);
    let name = crate::tls::server_name(host).map_err(|e| AgentEvent::Refused {
        reason: e.to_string(),
    })?;
    let down = |reason: String| AgentEvent::Disconnected { reason };
    let tcp = TcpStream::connect(&cfg.server)
        .await
        .map_err(|e| down(format!("cannot connect to {}: {e}", cfg.server)))?;
    let _ = tcp.set_nodelay(true);
    let connector = TlsConnector::from(cfg.tls.clone());
    match connector.connect(name, tcp).await {
        Ok(t) => Ok(t),
        Err(e) => Err(match cert_refusal(&e) {
            // Our own certificate refused by the server arrives as an alert.
            Some(c) if e.to_string().contains("received fatal alert") => AgentEvent::Refused {
                reason: format!("the service refused this reader's certificate: {c}"),
            },
            Some(c) => AgentEvent::ServerRefused(c),
            None => down(format!("TLS handshake with {} failed: {e}", cfg.server)),
        }),
    }
}

async fn session(
    cfg: &AgentConfig,
    card: &SharedCard,
    presence: &mut watch::Receiver<CardState>,
    events: &mpsc::UnboundedSender<AgentEvent>,
    reported: &mut Option<u64>,
) -> Result<String, AgentEvent> {
    let down = |reason: String| AgentEvent::Disconnected { reason };
    let mut tls = tokio::time::timeout(cfg.handshake, connect(cfg))
        .await
        .map_err(|_| {
            down(format!(
                "no connection to {} within {:?}",
                cfg.server, cfg.handshake
            ))
        })??;
    let resumed = matches!(
        tls.get_ref().1.handshake_kind(),
        Some(tokio_rustls::rustls::HandshakeKind::Resumed)
    );
    proto::write_message(
        &mut tls,
        &Message::Hello {
            min_version: PROTOCOL_VERSION,
            max_version: PROTOCOL_VERSION,
            agent: cfg.name.clone(),
            reader: cfg.reader.clone(),
        },
    )
    .await
    .map_err(|e| down(e.to_string()))?;
    let heartbeat = match proto::read_message_within(&mut tls, cfg.handshake).await {
        Ok(Message::Welcome { heartbeat_ms, .. }) => {
            Duration::from_millis(heartbeat_ms.max(100).into())
        }
        Ok(Message::Refuse { reason }) => return Err(AgentEvent::Refused { reason }),
        Ok(other) => return Err(down(format!("expected a welcome, got {other:?}"))),
        Err(FrameError::Io(e)) => {
            return Err(match cert_refusal(&e) {
                Some(c) => AgentEvent::Refused {
                    reason: format!("the service refused this reader's certificate: {c}"),
                },
                None => down(e.to_string()),
            })
        }
        Err(e) => return Err(down(e.to_string())),
    };
    let _ = events.send(AgentEvent::Connected { resumed });

    let (mut rd, mut wr) = tokio::io::split(tls);
    let (in_tx, mut in_rx) = mpsc::channel::<Result<Message, FrameError>>(4);
    // Three missed heartbeats of the service at least.
    let silence = cfg.silence.max(heartbeat * 3);
    let reading = tokio::spawn(async move {
        loop {
            let m = proto::read_message_within(&mut rd, silence).await;
            let end = m.is_err();
            if in_tx.send(m).await.is_err() || end {
                return;
            }
        }
    });
    let mut prepared: Option<(u64, Vec<Step>)> = None;
    let mut open_tap: Option<u64> = None;
    let mut ping = tokio::time::interval(heartbeat);
    ping.tick().await;
    let mut nonce = 0u32;
    let mut watching = true;
    // Cards are reported once the service's first message (its prepared
    // tap) has been read: a card already present (or arriving now) is
    // reported then, with the prepared answers.
    let mut first = true;
    let reason = loop {
        tokio::select! {
            m = in_rx.recv() => {
                let m = match m {
                    Some(Ok(m)) => m,
                    Some(Err(FrameError::Closed)) | None => break "the service closed the connection".to_string(),
                    Some(Err(e)) => break e.to_string(),
                };
                let reply = match m {
                    Message::Prepare { id, steps, .. } => {
                        prepared = Some((id, steps));
                        let _ = events.send(AgentEvent::Ready { challenge: id });
                        None
                    }
                    Message::Run { seq, steps } => Some(Message::Ran { seq, answers: on_card(card, steps).await }),
                    Message::Ping { nonce } => Some(Message::Pong { nonce }),
                    Message::Pong { .. } => None,
                    Message::TapEnd { card, granted, text } => {
                        if open_tap == Some(card) { open_tap = None; }
                        let _ = events.send(AgentEvent::TapEnded { card, granted, text });
                        None
                    }
                    Message::Refuse { reason } => { reading.abort(); return Err(AgentEvent::Refused { reason }); }
                    other => break format!("protocol violation by the service: unexpected {other:?}"),
                };
                if let Some(r) = reply {
                    if let Err(e) = proto::write_message(&mut wr, &r).await { break e.to_string(); }
                }
                if std::mem::take(&mut first) {
                    presence.mark_changed();
                }
            }
            r = presence.changed(), if watching && !first => {
                if r.is_err() {
                    // Nobody reports cards any more: serve what is asked.
                    watching = false;
                    continue;
                }
                let st = *presence.borrow_and_update();
                let msg = if st.present && *reported != Some(st.card) {
                    *reported = Some(st.card);
                    open_tap = Some(st.card);
                    let answers = match prepared.take() {
                        Some((id, steps)) => Some((id, on_card(card, steps).await)),
                        None => None,
                    };
                    let _ = events.send(AgentEvent::CardReported { card: st.card, prepared: answers.is_some() });
                    Some(Message::CardPresent { card: st.card, prepared: answers })
                } else if !st.present {
                    reported.map(|c| Message::CardRemoved { card: c })
                } else {
                    None
                };
                if let Some(m) = msg {
                    if let Err(e) = proto::write_message(&mut wr, &m).await { break e.to_string(); }
                }
            }
            _ = ping.tick() => {
                nonce = nonce.wrapping_add(1);
                if let Err(e) = proto::write_message(&mut wr, &Message::Ping { nonce }).await { break e.to_string(); }
            }
        }
    };
    reading.abort();
    if let Some(card) = open_tap {
        let _ = events.send(AgentEvent::TapLost { card });
    }
    Ok(reason)
}
