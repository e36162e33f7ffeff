//! `door`: the door transaction stage by stage. The reference door the
//! industry quotes (3678 ms with an RSA-2048 card) beside pivgate with an
//! RSA-2048 and a P-256 card under the real-card timing profiles
//! (`seed-rsa2048`, `seed-p256`: a measured card's processing times), full
//! read and fast path, with the reader in-process, behind an OSDP reader in
//! transparent mode at 9600 and 115200 baud (a paced pseudo-terminal pair,
//! secure channel up), and as a remote reader over mutual TLS behind a
//! proxy adding 10 ms each way (20 ms round trip).
//!
//! Each pivgate bar is the median of its taps, split as the reference door
//! splits it: the card–reader radio transfer and the controller are kept at
//! the reference figures (no radio is simulated; the decision and its
//! durable event are the `service-load` section's), the link is the OSDP
//! line time or the time the remote link adds, the module is pivgate's host
//! computation, and the card is the rest of the measured wall time.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use auth::measure::{self, REFERENCE_DOOR, REFERENCE_TOTAL_MS};
use auth::{Authenticator, Mechanism, PathTaken, Settings, Transaction};
use card::profile::TimingProfile;
use card::{Card, CardImage};
use host::InProcess;
use links::loopback::Loopback;
use links::osdp::sc::Key;
use pki::validate::RevocationPolicy;
use pki_issue::{
    CardCredentials, CardOptions, DeviceOptions, DeviceRole, KeyAlgorithm, TestPki, TestPkiOptions,
};
use remote::agent::{self, AgentConfig, AgentEvent, CardState, SharedCard};
use remote::hub::{HubConfig, HubEvent, RemoteHub};
use remote::tls::{self, ReaderVerifier};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::sync::{mpsc, watch};

use crate::ctx::Ctx;
use crate::model::{Bar, Chart, ChartKind, Figure, PeerFigure, Section, Spread};

/// The door the project aims for (ms).
const GOAL_MS: f64 = 1500.0;
const BAUDS: [u32; 2] = [9600, 115_200];
/// One way of the remote link's delay (a 20 ms round trip).
const WAN_ONE_WAY: Duration = Duration::from_millis(10);

const RADIO: &str = "card–reader radio (reference)";
const LINK: &str = "reader link";
const CARD: &str = "card";
const MODULE: &str = "module (host compute)";
const CONTROLLER: &str = "controller (reference)";

/// Where the card was tapped.
#[derive(Clone, Copy, PartialEq)]
enum Via {
    InProcess,
    Osdp(u32),
    Remote,
}

impl Via {
    fn label(self) -> String {
        match self {
            Via::InProcess => "in-process".into(),
            Via::Osdp(b) => format!("OSDP {b} baud"),
            Via::Remote => "remote, 20 ms RTT".into(),
        }
    }
}

/// The median of a configuration's taps, in the reference door's terms.
struct Measured {
    card: &'static str,
    via: Via,
    path: &'static str,
    taps: usize,
    card_ms: f64,
    link_ms: f64,
    module_ms: f64,
    /// The fastest and slowest tap's wall time and module compute, with
    /// two taps or more.
    wall_range: Option<(f64, f64)>,
    module_range: Option<(f64, f64)>,
}

impl Measured {
    fn total(&self) -> f64 {
        REFERENCE_DOOR[0].1 + self.card_ms + self.link_ms + self.module_ms + REFERENCE_DOOR[5].1
    }

    fn label(&self) -> String {
        format!("{} {}, {}", self.card, self.via.label(), self.path)
    }

    /// The door total's spread: the reference stages plus the fastest and
    /// the slowest tap.
    fn total_spread(&self) -> Option<Spread> {
        let fixed = REFERENCE_DOOR[0].1 + REFERENCE_DOOR[5].1;
        self.wall_range.map(|(lo, hi)| Spread {
            lo: fixed + lo,
            hi: fixed + hi,
            over: format!("the fastest and slowest of {} taps", self.taps),
        })
    }

    fn module_spread(&self) -> Option<Spread> {
        self.module_range.map(|(lo, hi)| Spread {
            lo,
            hi,
            over: format!("the fastest and slowest of {} taps", self.taps),
        })
    }
}

/// The smallest and largest of `v`, with two values or more.
fn range(v: &[f64]) -> Option<(f64, f64)> {
    Spread::of_repeats(v, "").map(|s| (s.lo, s.hi))
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ms_of(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Summarises one path's taps: `walls` are the measured wall times, the
/// transactions give the module's compute and the link time; `card_ms`,
/// when known from elsewhere (the remote card runs at the agent), replaces
/// the card share and the link takes the rest.
fn summarise(
    card: &'static str,
    via: Via,
    path: &'static str,
    set: &[(f64, Transaction)],
    card_ms: Option<f64>,
) -> Result<Measured> {
    if let Some((_, bad)) = set.iter().find(|(_, t)| !t.outcome.granted()) {
        bail!(
            "a {card} tap {} was refused: {:?}",
            via.label(),
            bad.outcome
        );
    }
    let walls: Vec<f64> = set.iter().map(|(w, _)| *w).collect();
    let modules: Vec<f64> = set.iter().map(|(_, t)| ms_of(t.host_compute_us)).collect();
    let (wall_range, module_range) = (range(&walls), range(&modules));
    let wall = median(walls);
    let module = median(modules);
    let (card_share, link) = match card_ms {
        Some(c) => (c, (wall - c - module).max(0.0)),
        None => {
            let link = median(
                set.iter()
                    .map(|(_, t)| t.link_us.map_or(0.0, ms_of))
                    .collect(),
            );
            ((wall - link - module).max(0.0), link)
        }
    };
    Ok(Measured {
        card,
        via,
        path,
        taps: set.len(),
        card_ms: card_share,
        link_ms: link,
        module_ms: module,
        wall_range,
        module_range,
    })
}

/// The full-read and repeat halves of a series of timed taps.
struct Timed {
    full: Vec<(f64, Transaction)>,
    repeat: Vec<(f64, Transaction)>,
}

/// `n` taps with the caches cleared, one untimed tap of the same card at
/// software speed in-process that teaches the authenticator the card (what
/// it learns does not depend on the reader), `n` repeat taps; `tap`
/// presents the card once and returns its wall time (ms) with the
/// transaction.
fn series(
    authn: &Authenticator,
    image: &CardImage,
    n: usize,
    mut tap: impl FnMut(&Authenticator) -> Result<(f64, Transaction)>,
) -> Result<Timed> {
    let mut out = Timed {
        full: Vec::new(),
        repeat: Vec::new(),
    };
    for _ in 0..n {
        authn.clear_caches();
        out.full.push(tap(authn)?);
    }
    authn.clear_caches();
    let mut card = InProcess::new(Card::new(image.clone()));
    let first = authn.authenticate(&mut card, Mechanism::PkiCak, None, None);
    if !first.outcome.granted() {
        bail!("the card was refused in-process: {:?}", first.outcome);
    }
    for _ in 0..n {
        out.repeat.push(tap(authn)?);
    }
    Ok(out)
}

/// Times `f`, in ms.
fn timed(f: impl FnOnce() -> Transaction) -> (f64, Transaction) {
    let t = Instant::now();
    let tx = f();
    (t.elapsed().as_secs_f64() * 1e3, tx)
}

fn repeat_label(set: &[(f64, Transaction)]) -> &'static str {
    match set.first().map(|(_, t)| t.path) {
        Some(PathTaken::Fast) => "fast path",
        _ => "repeat (cached validation)",
    }
}

/// The card's share of the same card and path tapped in-process.
fn local_card(local: &[Measured], card: &str, path: &str) -> Option<f64> {
    local
        .iter()
        .find(|m| m.card == card && m.via == Via::InProcess && m.path == path)
        .map(|m| m.card_ms)
}

fn authenticator(pki: &TestPki) -> Result<Authenticator> {
    Ok(Authenticator::new(
        pki.trust_store(),
        pki.crl_set().context("the test PKI's CRLs")?,
        Settings::default(),
    ))
}

fn in_process(
    pki: &TestPki,
    name: &'static str,
    creds: &CardCredentials,
    profile: TimingProfile,
    n: usize,
) -> Result<Vec<Measured>> {
    let authn = authenticator(pki)?;
    let image = creds.card_image(Some(1)).context("personalising")?;
    let t = series(&authn, &image, n, |authn| {
        let mut t = InProcess::with_profile(Card::new(image.clone()), profile).named("in-process");
        Ok(timed(|| {
            authn.authenticate(&mut t, Mechanism::PkiCak, None, None)
        }))
    })?;
    Ok(vec![
        summarise(name, Via::InProcess, "full read", &t.full, None)?,
        summarise(
            name,
            Via::InProcess,
            repeat_label(&t.repeat),
            &t.repeat,
            None,
        )?,
    ])
}

fn osdp(
    pki: &TestPki,
    name: &'static str,
    creds: &CardCredentials,
    profile: TimingProfile,
    baud: u32,
    n: usize,
    local: &[Measured],
) -> Result<Vec<Measured>> {
    let image = creds.card_image(Some(1)).context("personalising")?;
    let card = Box::new(InProcess::with_profile(Card::new(image.clone()), profile));
    let (mut transport, pd, _line) = Loopback::start(card, 1, baud, Key([0x5a; 16]))
        .with_context(|| format!("starting an OSDP reader at {baud} baud"))?
        .split();
    let authn = authenticator(pki)?;
    let t = series(&authn, &image, n, |authn| {
        Ok(timed(|| {
            authn.authenticate(&mut transport, Mechanism::PkiCak, None, None)
        }))
    });
    transport
        .into_inner()
        .shutdown()
        .context("stopping the OSDP panel")?;
    pd.shutdown().context("stopping the OSDP reader")?;
    let t = t?;
    let via = Via::Osdp(baud);
    let repeat = repeat_label(&t.repeat);
    Ok(vec![
        summarise(
            name,
            via,
            "full read",
            &t.full,
            local_card(local, name, "full read"),
        )?,
        summarise(
            name,
            via,
            repeat,
            &t.repeat,
            local_card(local, name, repeat),
        )?,
    ])
}

/// The service's hub and a reader agent behind the delay proxy.
struct RemoteRig {
    rt: tokio::runtime::Runtime,
    hub: Option<RemoteHub>,
    proxy_addr: SocketAddr,
    _proxy: remote::testing::DelayProxy,
    client: Arc<tokio_rustls::rustls::ClientConfig>,
    taps: std::sync::mpsc::Receiver<remote::hub::RemoteTap>,
}

impl RemoteRig {
    fn start(pki: &TestPki) -> Result<RemoteRig> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("a runtime")?;
        let device = |name: &str, role| {
            pki.issue_device(&DeviceOptions {
                name: name.into(),
                role,
                dns: vec![],
                ips: if role == DeviceRole::Server {
                    vec!["127.0.0.1".parse().expect("an address")]
                } else {
                    vec![]
                },
                validity: None,
            })
            .with_context(|| format!("issuing the {name} certificate"))
        };
        let server = device("service", DeviceRole::Server)?;
        let reader = device("bench reader", DeviceRole::Reader)?;
        let der = |c: &[u8]| CertificateDer::from(c.to_vec());
        let key = |k: &pki_issue::KeyPair| {
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(k.pkcs8_der().to_vec()))
        };
        let verifier = ReaderVerifier::new(
            pki.trust_store(),
            pki.crl_set()?,
            RevocationPolicy::default(),
        );
        let server_tls = tls::server_config(
            vec![der(&server.cert), der(pki.intermediate_der())],
            key(&server.key),
            verifier.clone(),
        )?;
        let client = tls::client_config(
            vec![der(&reader.cert), der(pki.intermediate_der())],
            key(&reader.key),
            &[der(pki.root_der())],
        )?;
        let cfg = HubConfig::new(
            server_tls,
            verifier,
            HashMap::from([("bench reader".to_string(), "bench".to_string())]),
        );
        let (hub, mut events) = rt.block_on(RemoteHub::bind(
            "127.0.0.1:0".parse().expect("an address"),
            cfg,
        ))?;
        let (tap_tx, taps) = std::sync::mpsc::channel();
        rt.spawn(async move {
            while let Some(e) = events.recv().await {
                if let HubEvent::CardPresent(t) = e {
                    let _ = tap_tx.send(t);
                }
            }
        });
        let proxy = rt.block_on(remote::testing::DelayProxy::start(
            hub.local_addr(),
            WAN_ONE_WAY,
        ))?;
        Ok(RemoteRig {
            rt,
            hub: Some(hub),
            proxy_addr: proxy.local_addr(),
            _proxy: proxy,
            client,
            taps,
        })
    }

    /// Taps `card` through an agent connected behind the proxy.
    fn taps(
        &self,
        authn: &Authenticator,
        image: &CardImage,
        card: Box<dyn host::Transport + Send>,
        n: usize,
    ) -> Result<Timed> {
        let card: SharedCard = Arc::new(Mutex::new(card));
        let (presence, presence_rx) = watch::channel(CardState::default());
        let (ev_tx, mut ev_rx) = mpsc::unbounded_channel();
        let acfg = AgentConfig::new(
            self.proxy_addr.to_string(),
            self.client.clone(),
            "bench".into(),
            "card".into(),
        );
        let agent_task = self.rt.spawn(agent::run(acfg, card, presence_rx, ev_tx));
        let ready = |ev_rx: &mut mpsc::UnboundedReceiver<AgentEvent>| -> Result<()> {
            self.rt.block_on(async {
                let wait = async {
                    while let Some(e) = ev_rx.recv().await {
                        match e {
                            AgentEvent::Ready { .. } => return Ok(()),
                            AgentEvent::Refused { reason } => bail!("the hub refused: {reason}"),
                            AgentEvent::ServerRefused(r) => bail!("the agent refused: {r:?}"),
                            _ => {}
                        }
                    }
                    bail!("the agent stopped")
                };
                tokio::time::timeout(Duration::from_secs(20), wait)
                    .await
                    .context("the remote reader did not get ready within 20 s")?
            })
        };
        let result = (|| {
            ready(&mut ev_rx)?;
            let mut n_card = 0u64;
            series(authn, image, n, |authn| {
                n_card += 1;
                let t = Instant::now();
                presence.send_replace(CardState {
                    present: true,
                    card: n_card,
                });
                let mut tap = self
                    .taps
                    .recv_timeout(Duration::from_secs(20))
                    .context("no tap reached the hub within 20 s")?;
                let tx = authn.authenticate(&mut tap, Mechanism::PkiCak, None, None);
                let wall = t.elapsed().as_secs_f64() * 1e3;
                tap.finish(tx.outcome.granted(), "bench");
                presence.send_replace(CardState {
                    present: false,
                    card: n_card,
                });
                ready(&mut ev_rx)?;
                Ok((wall, tx))
            })
        })();
        agent_task.abort();
        result
    }
}

impl Drop for RemoteRig {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.take() {
            self.rt.block_on(hub.shutdown());
        }
    }
}

/// The remote taps: the wall time is from the card's arrival at the
/// agent's reader to the decision; the card's share is the same path's
/// in-process card time, the link the rest beyond the module.
fn remote_taps(
    rig: &RemoteRig,
    pki: &TestPki,
    name: &'static str,
    creds: &CardCredentials,
    profile: TimingProfile,
    n: usize,
    local: &[Measured],
) -> Result<Vec<Measured>> {
    let authn = authenticator(pki)?;
    let image = creds.card_image(Some(1)).context("personalising")?;
    let card = Box::new(InProcess::with_profile(Card::new(image.clone()), profile));
    let t = rig.taps(&authn, &image, card, n)?;
    let repeat = repeat_label(&t.repeat);
    Ok(vec![
        summarise(
            name,
            Via::Remote,
            "full read",
            &t.full,
            local_card(local, name, "full read"),
        )?,
        summarise(
            name,
            Via::Remote,
            repeat,
            &t.repeat,
            local_card(local, name, repeat),
        )?,
    ])
}

pub fn run(ctx: &Ctx) -> Result<Section> {
    let n = if ctx.quick { 1 } else { 3 };
    ctx.step("a test PKI and an RSA-2048 and a P-256 card");
    let pki = TestPki::generate(TestPkiOptions {
        algorithm: KeyAlgorithm::Rsa2048,
        ..TestPkiOptions::default()
    })
    .context("creating the test PKI")?;
    let mut cards = Vec::new();
    for (name, alg, seed) in [
        (
            "RSA-2048",
            KeyAlgorithm::Rsa2048,
            TimingProfile::SeedRsa2048,
        ),
        ("P-256", KeyAlgorithm::P256, TimingProfile::SeedP256),
    ] {
        let creds = pki
            .issue_card(&CardOptions {
                algorithm: alg,
                ..CardOptions::default()
            })
            .with_context(|| format!("issuing the {name} card"))?;
        // The smoke pass checks the plumbing at software speed.
        let profile = if ctx.smoke {
            TimingProfile::Instant
        } else {
            seed
        };
        cards.push((name, creds, profile));
    }
    let mut rows = Vec::new();
    for (name, creds, profile) in &cards {
        ctx.step(format!("{name} card in-process, {}", profile.name()));
        let local = in_process(&pki, name, creds, *profile, n)?;
        let mut via_osdp = Vec::new();
        // The smoke pass leaves out the slow line (seconds per full read).
        for baud in BAUDS.into_iter().filter(|b| !ctx.smoke || *b > 9600) {
            ctx.step(format!("{name} card behind an OSDP reader at {baud} baud"));
            via_osdp.extend(osdp(&pki, name, creds, *profile, baud, n, &local)?);
        }
        rows.extend(local);
        rows.extend(via_osdp);
    }
    ctx.step("a remote reader behind a 20 ms round trip");
    let rig = RemoteRig::start(&pki).context("starting the remote hub and proxy")?;
    let mut remote_rows = Vec::new();
    for (name, creds, profile) in &cards {
        ctx.step(format!("{name} card on a remote reader, 20 ms RTT"));
        remote_rows.extend(remote_taps(&rig, &pki, name, creds, *profile, n, &rows)?);
    }
    drop(rig);
    rows.extend(remote_rows);
    Ok(section(ctx, &cards, &rows))
}

fn section(
    ctx: &Ctx,
    cards: &[(&'static str, CardCredentials, TimingProfile)],
    rows: &[Measured],
) -> Section {
    let command = if ctx.smoke {
        "pivgate-bench --smoke --only door".to_string()
    } else if ctx.quick {
        "./scripts/bench.sh --quick --only door".to_string()
    } else {
        "./scripts/bench.sh --only door".to_string()
    };
    let profiles: Vec<String> = cards
        .iter()
        .map(|(n, _, p)| format!("{n} `{}`", p.name()))
        .collect();
    let mut figures = Vec::new();
    for m in rows {
        let reference = measure::reference_total_ms(m.card == "P-256");
        figures.push(Figure {
            name: format!("door total: {} ({} taps)", m.label(), m.taps),
            value: m.total(),
            unit: "ms".into(),
            peer: Some(PeerFigure {
                name: if m.card == "P-256" {
                    "reference door, ECC card".into()
                } else {
                    "reference door".into()
                },
                value: reference,
                ratio: m.total() / reference,
            }),
            lower_is_better: true,
            goal: Some(GOAL_MS),
            command: command.clone(),
            spread: m.total_spread(),
        });
    }
    for m in rows.iter().filter(|m| m.via == Via::InProcess) {
        figures.push(Figure {
            name: format!("authentication module (host compute): {}", m.label()),
            value: m.module_ms,
            unit: "ms".into(),
            peer: Some(PeerFigure {
                name: "reference authentication module".into(),
                value: REFERENCE_DOOR[4].1,
                ratio: m.module_ms / REFERENCE_DOOR[4].1,
            }),
            lower_is_better: true,
            goal: None,
            command: command.clone(),
            spread: m.module_spread(),
        });
    }
    for m in rows.iter().filter(|m| m.via != Via::InProcess) {
        figures.push(Figure {
            name: format!("reader link: {}", m.label()),
            value: m.link_ms,
            unit: "ms".into(),
            peer: Some(PeerFigure {
                name: "reference reader → module → controller links".into(),
                value: REFERENCE_DOOR[1].1 + REFERENCE_DOOR[2].1,
                ratio: m.link_ms / (REFERENCE_DOOR[1].1 + REFERENCE_DOOR[2].1),
            }),
            lower_is_better: true,
            goal: None,
            command: command.clone(),
            spread: None,
        });
    }
    let mut bars = vec![Bar {
        label: "reference door (RSA-2048)".into(),
        segments: vec![
            (RADIO.into(), REFERENCE_DOOR[0].1),
            (LINK.into(), REFERENCE_DOOR[1].1),
            ("module → controller link".into(), REFERENCE_DOOR[2].1),
            (CARD.into(), REFERENCE_DOOR[3].1),
            (MODULE.into(), REFERENCE_DOOR[4].1),
            (CONTROLLER.into(), REFERENCE_DOOR[5].1),
        ],
    }];
    bars.extend(rows.iter().map(|m| Bar {
        label: m.label(),
        segments: vec![
            (RADIO.into(), REFERENCE_DOOR[0].1),
            (LINK.into(), m.link_ms),
            (CARD.into(), m.card_ms),
            (MODULE.into(), m.module_ms),
            (CONTROLLER.into(), REFERENCE_DOOR[5].1),
        ],
    }));
    let mut notes = vec![
        format!(
            "Cards under the timing profiles {} ({} taps per path, medians). The radio transfer ({:.0} ms) and the controller ({:.0} ms) are the reference door's figures, not measured: no radio is simulated, and pivgate's decision with its durable event is measured in `service-load`. There is no module → controller link: the module is inside the controller.",
            profiles.join(", "),
            rows.first().map_or(0, |m| m.taps),
            REFERENCE_DOOR[0].1,
            REFERENCE_DOOR[5].1
        ),
        "Reader link: what the reader adds to the same tap in-process, i.e. the measured wall time less the card's own time (from the in-process taps of the same card and path) and the module; for the remote reader from the card's arrival at the agent's reader to the decision, 10 ms added each way by a delaying TCP proxy on loopback. OSDP runs through a paced pseudo-terminal pair with the secure channel up; its polls while the card works are line time too, so the OSDP line-time model (`link_us`) is not used here.".into(),
    ];
    if ctx.smoke {
        notes.push("Smoke pass: instant cards, no 9600 baud line, figures not meaningful.".into());
    }
    // Where the RSA-2048 card alone keeps the door above the goal.
    let fixed = REFERENCE_DOOR[0].1 + REFERENCE_DOOR[5].1;
    for m in rows
        .iter()
        .filter(|m| m.card == "RSA-2048" && m.via == Via::InProcess)
    {
        let floor = m.card_ms + fixed;
        if floor > GOAL_MS {
            notes.push(format!(
                "The RSA-2048 card alone keeps the door above {GOAL_MS:.0} ms on the {}: its own APDU time is {:.0} ms, so with the radio and controller ({fixed:.0} ms) the door takes at least {floor:.0} ms even with no link and no module time (pivgate's module adds {:.1} ms).",
                m.path, m.card_ms, m.module_ms
            ));
        } else {
            notes.push(format!(
                "On the {} the RSA-2048 card's own APDU time is {:.0} ms: with the radio and controller ({fixed:.0} ms) the door can be under {GOAL_MS:.0} ms ({floor:.0} ms before link and module).",
                m.path, m.card_ms
            ));
        }
    }
    Section {
        id: "door".into(),
        title: "The door transaction, stage by stage".into(),
        story: format!(
            "A PIV card tapped at a door commonly takes {REFERENCE_TOTAL_MS:.0} ms before it opens: 811 ms on the reader and controller links and 1200 ms in the authentication module. pivgate puts the module in the controller and times every stage, so that the card is what is left to wait for."
        ),
        peers: vec![crate::model::Peer {
            name: "reference door (industry figures)".into(),
            version: "RSA-2048 card; ECC card 1100 ms faster at the card".into(),
        }],
        figures,
        charts: vec![Chart {
            title: "Door transaction by stage (ms), goal 1500 ms".into(),
            kind: ChartKind::StackedBars,
            x_label: "ms from tap to decision".into(),
            y_label: String::new(),
            series: vec![],
            bars,
            goal: Some(GOAL_MS),
        }],
        notes,
    }
}
