//! Many sites at scale: N lightweight sites against the real central on
//! one PostgreSQL.
//!
//! The central is the library's own: [`server::sync::central_router`]
//! (the feed, snapshots, the ingest) behind [`server::sync::link::serve`]
//! (mutual TLS, each site's certificate from a test PKI), over a
//! temporary PostgreSQL cluster (`fsync=on`) seeded with S sites × D doors
//! (one reader each), C cardholders with a credential each (each in the
//! group of one home site) and 100 roaming cardholders allowed at every
//! door. It runs on a runtime of its own (threads named `central`), so its
//! CPU is those threads' user + system time (`/proc/self/task/*/stat`, the
//! per-thread `getrusage` accounting); PostgreSQL's is its processes'
//! (the postmaster with its reaped children, and the live backends).
//!
//! A lightweight site is a task on another runtime (threads `sim-sites`):
//! it connects with its own certificate through the library's
//! [`Connector`]/[`Link`], follows `/sync/v1/feed` (NDJSON, a `Delta` per
//! line, parsed and applied to its state in memory) and uploads its events
//! as [`UploadBatch`]es on `POST /sync/v1/events`, checking each
//! acknowledgement, as the site's uploader does. No SQLite, no readers.
//!
//! Measured, in order:
//! * **fan-out**: a roaming cardholder is suspended through the central's
//!   change path (a transaction writing the feed, `NOTIFY`); the time from
//!   the change's start until each site has applied the delta that
//!   suspends them. p50/p99 per site, and of "every site" (the slowest site
//!   of each suspension).
//! * **ingest**: every site uploads the same number of tap events (about
//!   1.2 KB of JSON each) in batches of 256 (the uploader's default), all
//!   at once; events/s from the first batch to the last acknowledgement,
//!   the central's and PostgreSQL's CPU per event, and the events table's
//!   size (`pg_total_relation_size`) per million events.
//! * **catch-up**: one site goes offline; while it is away the central
//!   makes 60 changes to its part (an hour of one change a minute) and the
//!   site records 1,000 taps (an hour old by the end). It comes back: the
//!   time until it has applied every change and the central acknowledged
//!   every event.
//!
//! `cargo bench -p server --bench sites` plays 500 sites × 20 doors and
//! 100,000 cardholders; `-- --quick` 100 × 20 and 20,000; `cargo test
//! --bench sites` a smoke pass (5 × 2, 200). `-- --json FILE` also writes
//! the figures as JSON (for `pivgate-bench`; each percentile with its
//! value in each of five blocks of consecutive samples, its spread).
//! `PIVGATE_BENCH_SITES=N` overrides the number of sites. `-- --only ingest`
//! plays the ingest alone (connect, then every site uploading; no fan-out,
//! catch-up or taps); `-- --only fanout` the fan-out alone; `-- --only
//! taps` connects the sites and measures the real site's taps only (no
//! suspension, no upload burst). The taps alternate the link's states in
//! blocks (up, slow, down, then the next round in another order), so load
//! drifting during the run weighs on every state alike.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use access::jiff::{SignedDuration, Timestamp};
use access::{
    AccessGroup, Cardholder, CardholderId, CardholderStatus, Credential, CredentialId,
    CredentialState, Delta, Door, DoorId, Entities, GroupId, Mechanism, Reader, ReaderId, Schedule,
    ScheduleId, Site, SiteId,
};
use axum::body::Bytes;
use axum::http::{header, HeaderValue, Method, StatusCode};
use card::Card;
use host::InProcess;
use http_body_util::BodyExt;
use pki_issue::{CardCredentials, CardOptions, DeviceOptions, DeviceRole, TestPki, TestPkiOptions};
use serde::Deserialize;
use server::config::{init_template, Config};
use server::service::Service;
use server::sync::feed::Central;
use server::sync::ingest::IngestConfig;
use server::sync::link::{self, Connector, Link};
use server::sync::settings::{CentralConfig, SitesConfig};
use server::sync::wire::{self, UploadAck, UploadBatch};
use store::testing::{in_ci, TempCluster};
use store::{EventKind, EventLog, EventResult, NewEvent, SiteEvent, Store};
use tokio::sync::watch;

#[path = "../../pki/benches/common/repeats.rs"]
mod repeats;

/// Cardholders allowed at every door (the ones suspended for fan-out).
const ROAMING: i64 = 100;
/// Events per upload batch (the site uploader's default).
const BATCH: usize = 256;
/// Changes to the offline site's part while it is away.
const AWAY_CHANGES: usize = 60;
/// Taps at the offline site while it is away.
const AWAY_TAPS: i64 = 1_000;
const WAIT: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy)]
struct Size {
    sites: i64,
    doors: i64,
    cardholders: i64,
    suspensions: usize,
    /// Events each site uploads in the ingest phase.
    per_site: i64,
    /// Taps at the real site per link state.
    taps: usize,
    /// The ingest alone (`--only ingest`).
    only_ingest: bool,
    /// Only the fan-out is measured (`-- --only fanout`).
    fanout_only: bool,
}

fn sha256(bytes: &[u8]) -> access::Sha256 {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
    access::Sha256::from_slice(d.as_ref()).expect("32 bytes")
}

fn site_name(i: i64) -> String {
    format!("site-{i:05}")
}

/// The central's data: `sites` sites of `doors` doors (a reader each),
/// `cardholders` cardholders each in the group of one home site, the
/// first [`ROAMING`] of them in a group of every door.
fn entities(z: Size, tapper: &CardCredentials) -> Entities {
    let doors = z.sites * z.doors;
    let roaming = ROAMING.min(z.cardholders);
    let home = |c: i64| (c - 1) % z.sites + 1;
    let mut groups: Vec<AccessGroup> = (1..=z.sites)
        .map(|s| AccessGroup {
            id: GroupId(s),
            name: format!("{} staff", site_name(s)),
            schedule: ScheduleId(1),
            doors: ((s - 1) * z.doors + 1..=s * z.doors).map(DoorId).collect(),
            cardholders: (roaming + 1..=z.cardholders)
                .filter(|c| home(*c) == s)
                .map(CardholderId)
                .collect(),
        })
        .collect();
    let hq = hq_ids(z);
    groups.push(AccessGroup {
        id: GroupId(z.sites + 1),
        name: "roaming".into(),
        schedule: ScheduleId(1),
        doors: (1..=doors).map(DoorId).collect(),
        cardholders: (1..=roaming).map(CardholderId).collect(),
    });
    groups.push(AccessGroup {
        id: GroupId(z.sites + 2),
        name: "hq staff".into(),
        schedule: ScheduleId(1),
        doors: vec![hq.door],
        cardholders: vec![hq.cardholder],
    });
    let mut e = Entities {
        sites: (1..=z.sites)
            .map(|s| Site {
                id: SiteId(s),
                name: site_name(s),
                time_zone: "UTC".into(),
                lockdown: false,
            })
            .collect(),
        doors: (1..=doors)
            .map(|d| Door {
                id: DoorId(d),
                site: SiteId((d - 1) / z.doors + 1),
                name: format!("door {d}"),
                mechanism: Mechanism::PkiCak,
                allow_low_assurance: false,
                passback: Default::default(),
                mode: Default::default(),
                unlock_schedule: None,
                first_card_unlock: false,
                max_staleness_s: None,
                stale_policy: Default::default(),
            })
            .collect(),
        readers: (1..=doors)
            .map(|r| Reader {
                id: ReaderId(r),
                door: DoorId(r),
                name: format!("reader {r}"),
                connection: format!("sim:{r}"),
            })
            .collect(),
        cardholders: (1..=z.cardholders)
            .map(|i| Cardholder {
                id: CardholderId(i),
                name: format!("Cardholder {i}"),
                status: CardholderStatus::Active,
                valid_from: None,
                valid_until: None,
            })
            .collect(),
        credentials: (1..=z.cardholders)
            .map(|i| Credential {
                id: CredentialId(i),
                cardholder: CardholderId(i),
                card_uuid: None,
                fasc_n: None,
                cert_sha256: Some(sha256(&i.to_be_bytes())),
                spki_sha256: None,
                expires_at: None,
                enrolled_at: Timestamp::UNIX_EPOCH,
                enrolled_by: "bench".into(),
                state: CredentialState::Active,
            })
            .collect(),
        schedules: vec![Schedule {
            id: ScheduleId(1),
            name: "always".into(),
            windows: vec!["mon-sun 00:00-24:00".parse().expect("window")],
            holiday_windows: vec![],
        }],
        groups,
        holidays: vec![],
    };
    e.sites.push(Site {
        id: hq.site,
        name: HQ.into(),
        time_zone: "UTC".into(),
        lockdown: false,
    });
    e.doors.push(Door {
        id: hq.door,
        site: hq.site,
        ..e.doors[0].clone()
    });
    e.readers.push(Reader {
        id: hq.reader,
        door: hq.door,
        name: "front".into(),
        connection: "sim:front".into(),
    });
    e.cardholders.push(Cardholder {
        id: hq.cardholder,
        name: "Tapper".into(),
        ..e.cardholders[0].clone()
    });
    e.credentials.push(Credential {
        id: CredentialId(hq.cardholder.0),
        cardholder: hq.cardholder,
        card_uuid: Some(access::CardUuid(tapper.uuid)),
        fasc_n: Some(access::FascN(tapper.fascn.encode().expect("FASC-N"))),
        cert_sha256: Some(sha256(&tapper.slot(0x9E).expect("9E").certificate)),
        ..e.credentials[0].clone()
    });
    e
}

/// The real site (an in-process `Service`), beside the lightweight ones.
const HQ: &str = "hq";

struct HqIds {
    site: SiteId,
    door: DoorId,
    reader: ReaderId,
    cardholder: CardholderId,
}

fn hq_ids(z: Size) -> HqIds {
    let doors = z.sites * z.doors;
    HqIds {
        site: SiteId(z.sites + 1),
        door: DoorId(doors + 1),
        reader: ReaderId(doors + 1),
        cardholder: CardholderId(z.cardholders + 1),
    }
}

/// A tap event as a site records it (about 1.2 KB of JSON).
fn tap(time: Timestamp, i: i64) -> NewEvent {
    let stage = |name: &str, wall_us: i64, apdus: u32| {
        serde_json::json!({"name": name, "wall_us": wall_us, "apdus": apdus,
            "bytes_out": 15 * apdus, "bytes_in": 96 * apdus})
    };
    NewEvent {
        time,
        kind: EventKind::Tap,
        door: Some(DoorId(1 + i % 20)),
        reader: Some(ReaderId(1 + i % 20)),
        cardholder: Some(CardholderId(1 + i % 1000)),
        credential: None,
        result: Some(EventResult::Granted),
        code: Some("granted".into()),
        reason: None,
        actor: None,
        data: Some(serde_json::json!({
            "mechanism": "pki-cak",
            "assurance": "high",
            "reader": "Virtual PCD 00 00",
            "stages": [
                stage("detect", 900 + i % 97, 0),
                stage("select", 2_100, 1),
                stage("read", 31_000 + i % 991, 9),
                stage("challenge", 11_800, 1),
                stage("validate", 95, 0),
                stage("verify", 420, 0),
                stage("decide", 3, 0),
                stage("signal", 12, 0),
            ],
            "card_uuid": format!("{:032x}", i),
            "certificate": {"subject": format!("CN=Cardholder {i}, O=pivgate Test PKI, C=US"),
                "sha256": format!("{:064x}", i * 7919)},
        })),
        passback: false,
    }
}

/// CPU time (user + system) of this process's threads whose name starts
/// with `prefix` (`/proc/self/task/*/stat`, ticks of 1/100 s).
fn threads_cpu(prefix: &str) -> Duration {
    let mut ticks = 0u64;
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for t in dir.flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if !comm.starts_with(prefix) {
                continue;
            }
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            ticks += stat_fields(&stat, &[11, 12]);
        }
    }
    Duration::from_millis(ticks * 10)
}

/// The sum of the fields at `idx` after the command name of a
/// `/proc/…/stat` line (0 = state; 11, 12 = utime, stime; 13, 14 =
/// children's).
fn stat_fields(stat: &str, idx: &[usize]) -> u64 {
    let rest = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    idx.iter()
        .filter_map(|i| f.get(*i).and_then(|v| v.parse::<u64>().ok()))
        .sum()
}

/// CPU time of the PostgreSQL cluster whose postmaster is `pid`: its own,
/// its reaped children's, and its live children's.
fn postgres_cpu(pid: u32) -> Duration {
    let own = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let mut ticks = stat_fields(&own, &[11, 12, 13, 14]);
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for p in dir.flatten() {
            let Ok(stat) = std::fs::read_to_string(p.path().join("stat")) else {
                continue;
            };
            if stat_fields(&stat, &[1]) == u64::from(pid) {
                ticks += stat_fields(&stat, &[11, 12]);
            }
        }
    }
    Duration::from_millis(ticks * 10)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One line of the feed.
#[derive(Deserialize)]
#[serde(untagged)]
enum Line {
    Change {
        pos: i64,
        delta: Box<Delta>,
    },
    Heartbeat {
        #[allow(dead_code)]
        heartbeat: i64,
    },
}

/// A site's state, in memory: the position applied, and when each
/// cardholder's suspension was applied.
#[derive(Debug, Default)]
struct SiteState {
    pos: i64,
    suspended_at: HashMap<CardholderId, Instant>,
    status: HashMap<CardholderId, bool>,
}

struct SimSite {
    name: String,
    connector: Arc<Connector>,
    /// The link events go up on (its own kept-alive connection).
    up: Link,
    state: Arc<Mutex<SiteState>>,
    applied: watch::Sender<i64>,
    /// The next sequence to upload.
    next_seq: Mutex<i64>,
}

impl SimSite {
    /// Follows the feed after the position held, for as long as the link
    /// lasts (reconnecting at once after a failure).
    async fn follow(self: Arc<Self>) {
        let link = self.connector.link(0);
        loop {
            if let Err(e) = self.session(&link).await {
                eprintln!("{}: the feed ended: {e}", self.name);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    async fn session(&self, link: &Link) -> Result<(), String> {
        let after = self.state.lock().unwrap().pos;
        let req = link.request(
            Method::GET,
            &format!("/sync/v1/feed?after={after}"),
            Bytes::new(),
        );
        let resp = link.stream(req).await.map_err(|e| e.to_string())?;
        if resp.status() != StatusCode::OK {
            return Err(format!("the central answered {}", resp.status()));
        }
        let mut body = resp.into_body();
        let mut buf: Vec<u8> = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| e.to_string())?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            buf.extend_from_slice(&data);
            while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=nl).collect();
                match serde_json::from_slice::<Line>(&line).map_err(|e| e.to_string())? {
                    Line::Change { pos, delta } => self.apply(pos, &delta),
                    Line::Heartbeat { .. } => {}
                }
            }
        }
        Err("the central closed the feed".into())
    }

    fn apply(&self, pos: i64, delta: &Delta) {
        let now = Instant::now();
        let mut s = self.state.lock().unwrap();
        if pos <= s.pos {
            return;
        }
        for c in &delta.put.cardholders {
            let suspended = matches!(c.status, CardholderStatus::Suspended { .. });
            s.status.insert(c.id, suspended);
            if suspended {
                s.suspended_at.insert(c.id, now);
            }
        }
        s.pos = pos;
        drop(s);
        self.applied.send_replace(pos);
    }

    /// Uploads `n` tap events timed `time`, in batches of [`BATCH`],
    /// each acknowledged before the next.
    async fn upload(&self, n: i64, time: Timestamp) -> Result<(), String> {
        let first = *self.next_seq.lock().unwrap();
        let mut seq = first;
        while seq < first + n {
            let end = (seq + BATCH as i64).min(first + n);
            let batch = UploadBatch {
                v: wire::VERSION,
                floor: 0,
                sent_at: Timestamp::now(),
                events: (seq..end)
                    .map(|s| SiteEvent {
                        seq: s,
                        event: tap(time, s),
                    })
                    .collect(),
            };
            let body = serde_json::to_vec(&batch).map_err(|e| e.to_string())?;
            let mut req = self
                .up
                .request(Method::POST, wire::EVENTS_PATH, Bytes::from(body));
            req.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            let resp = self.up.send(req).await.map_err(|e| e.to_string())?;
            if resp.status() != StatusCode::OK {
                return Err(format!(
                    "{}: {}",
                    resp.status(),
                    String::from_utf8_lossy(resp.body())
                ));
            }
            let ack: UploadAck = serde_json::from_slice(resp.body()).map_err(|e| e.to_string())?;
            if ack.acked != end - 1 {
                return Err(format!(
                    "acknowledged {} after sending up to {}",
                    ack.acked,
                    end - 1
                ));
            }
            seq = end;
        }
        *self.next_seq.lock().unwrap() = seq;
        Ok(())
    }
}

/// What the proxy between the real site and the central does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LinkMode {
    Up,
    /// Every connection refused and cut.
    Down,
    /// Every chunk each way held this long.
    Slow(Duration),
}

/// Forwards connections on `listener` to `to` as `mode` says; a change of
/// mode cuts every connection (the site reconnects through the new one).
async fn proxy(listener: tokio::net::TcpListener, to: SocketAddr, mode: watch::Receiver<LinkMode>) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            continue;
        };
        let mut m = mode.clone();
        let delay = match *m.borrow_and_update() {
            LinkMode::Down => continue,
            LinkMode::Up => Duration::ZERO,
            LinkMode::Slow(d) => d,
        };
        tokio::spawn(async move {
            let Ok(out) = tokio::net::TcpStream::connect(to).await else {
                return;
            };
            let (ri, wi) = inbound.into_split();
            let (ro, wo) = out.into_split();
            tokio::select! {
                _ = pipe(ri, wo, delay) => {}
                _ = pipe(ro, wi, delay) => {}
                _ = m.changed() => {}
            }
        });
    }
}

async fn pipe(
    mut r: tokio::net::tcp::OwnedReadHalf,
    mut w: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if w.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The slow link's delay each way.
const SLOW: Duration = Duration::from_millis(200);

/// Blocks of taps per link state, alternating with the other states.
const TAP_ROUNDS: usize = 5;

/// Taps at a real site (an in-process `Service` following the central
/// through a proxy) with its link up, down and slow: p50/p99 of each.
fn hq_taps(
    d: &Path,
    central: SocketAddr,
    tapper: &CardCredentials,
    z: Size,
    taps: usize,
) -> serde_json::Value {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("site")
        .enable_all()
        .build()
        .unwrap();
    let (mode_tx, mode) = watch::channel(LinkMode::Up);
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let proxy_addr = listener.local_addr().unwrap();
    rt.spawn(proxy(listener, central, mode));
    let text = init_template("sim:front", "UTC").replace("127.0.0.1:8080", "127.0.0.1:0");
    let path = d.join("pivgate.toml");
    std::fs::write(&path, text).unwrap();
    let mut c = Config::load(&path).unwrap();
    c.seed = None;
    c.data_dir = d.join("site-hq");
    c.central = Some(site_config(d, HQ, proxy_addr));
    let service = rt
        .block_on(Service::start(c, None))
        .expect("the site starts");
    let mut status = service.sync().follower.as_ref().unwrap().status();
    rt.block_on(async {
        tokio::time::timeout(
            WAIT,
            status.wait_for(|s| s.applied.is_some() && s.central.is_some()),
        )
        .await
        .expect("the site bootstraps in time")
        .unwrap();
    });
    let mut upload = service.sync().upload.clone().unwrap();
    let controller = &service.loaded().controller;
    let reader = hq_ids(z).reader;
    let mut card = InProcess::new(Card::new(tapper.card_image(Some(5)).unwrap()));
    let mut tap = || {
        let t = Instant::now();
        let r = controller
            .tap(&mut card, reader, None, None)
            .expect("a tap");
        assert!(r.granted(), "{:?}", r.reason());
        t.elapsed()
    };
    // Warm: the first tap reads the card whole.
    for _ in 0..20 {
        tap();
    }
    // The states alternate in blocks (each round in another order), so a
    // machine getting busier or quieter during the run weighs on all three
    // alike.
    let modes = [
        ("up", LinkMode::Up),
        ("slow", LinkMode::Slow(SLOW)),
        ("down", LinkMode::Down),
    ];
    let block = taps.div_ceil(TAP_ROUNDS).max(1);
    let mut all: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut loads: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 0..TAP_ROUNDS {
        for k in 0..modes.len() {
            let i = (k + round) % modes.len();
            let m = modes[i].1;
            mode_tx.send_replace(m);
            if m != LinkMode::Down {
                // The link works again: a tap's event reaches the central.
                let before = upload.borrow_and_update().acked;
                tap();
                rt.block_on(async {
                    tokio::time::timeout(WAIT, upload.wait_for(|p| p.acked > before))
                        .await
                        .expect("the site's events go up")
                        .unwrap();
                });
            }
            all[i].extend((0..block).map(|_| ms(tap())));
            if let Some(load) = load_average()
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
            {
                loads[i].push(load);
            }
        }
    }
    let mut out = serde_json::Map::new();
    let mut base_p99 = None;
    for (i, (name, _)) in modes.iter().enumerate() {
        // In the order taken: its five blocks are the five rounds.
        let taken = &all[i];
        let what = "taps, the link's states alternating";
        let mut l = taken.clone();
        l.sort_by(f64::total_cmp);
        let p99 = percentile(&l, 0.99);
        let base = *base_p99.get_or_insert(p99);
        out.insert(
            (*name).into(),
            serde_json::json!({
                "taps": l.len(),
                "rounds": TAP_ROUNDS,
                "p50_ms": percentile(&l, 0.5),
                "p50_ms_repeats": block_percentiles(taken, what, 0.5),
                "p99_ms": p99,
                "p99_ms_repeats": block_percentiles(taken, what, 0.99),
                "p99_vs_up": p99 / base,
                "load": loads[i].iter().sum::<f64>() / loads[i].len().max(1) as f64,
            }),
        );
    }
    out.insert("slow_delay_ms".into(), serde_json::json!(ms(SLOW)));
    rt.block_on(service.shutdown()).expect("the site stops");
    rt.shutdown_timeout(Duration::from_secs(5));
    serde_json::Value::Object(out)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Percentile `p` of each block of consecutive `samples` (in the order
/// taken), as a figure's repeats.
fn block_percentiles(samples: &[f64], what: &str, p: f64) -> serde_json::Value {
    repeats::over_blocks(samples, what, |b| {
        let mut b = b.to_vec();
        b.sort_by(f64::total_cmp);
        percentile(&b, p)
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Suspends (or reinstates) cardholder `id` through the central's change
/// path (a transaction that writes the feed); returns its position.
async fn set_suspended(store: &Store, id: CardholderId, suspended: bool) -> i64 {
    let mut c: Cardholder = store.get(id).await.expect("the cardholder");
    c.status = if suspended {
        CardholderStatus::Suspended {
            reason: "card reported lost".into(),
        }
    } else {
        CardholderStatus::Active
    };
    let mut tx = store.begin().await.expect("begin");
    tx.update(&c).await.expect("update");
    let pos = tx
        .write_feed()
        .await
        .expect("the feed")
        .expect("a feed row");
    tx.commit().await.expect("commit");
    pos
}

/// The central: the library's site routes behind its mutual-TLS listener.
async fn start_central(url: &str, dir: &Path, stop: watch::Receiver<bool>) -> (Store, SocketAddr) {
    let store = Store::connect(url)
        .await
        .expect("PostgreSQL")
        .with_change_feed();
    let (log, _) = EventLog::start(store.clone(), 0);
    let cfg = SitesConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        cert: dir.join("central/central.pem"),
        key: dir.join("central/central.key.pem"),
        site_ca: vec![dir.join("central/ca.pem")],
        crls: vec![],
        feed_days: 30,
        heartbeat_ms: 15_000,
        handshake_ms: 30_000,
        late_after_secs: 300,
        max_skew_secs: 30,
    };
    let tls = link::server_tls(&cfg).expect("the central's TLS");
    let central = Central::new(
        store.clone(),
        log,
        Duration::from_millis(cfg.heartbeat_ms),
        stop.clone(),
    )
    .expect("a central");
    let board = server::sync::board::Board::new(store.clone(), "bench".into());
    let router = server::sync::central_router(central, IngestConfig::default(), board);
    let listener = tokio::net::TcpListener::bind(cfg.listen).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(link::serve(
        listener,
        tls,
        Duration::from_millis(cfg.handshake_ms),
        router,
        stop,
    ));
    (store, addr)
}

fn site_config(dir: &Path, name: &str, addr: SocketAddr) -> CentralConfig {
    CentralConfig {
        urls: vec![format!("https://{addr}")],
        site: name.into(),
        cert: dir.join(format!("{name}/{name}.pem")),
        key: dir.join(format!("{name}/{name}.key.pem")),
        ca: dir.join("central/ca.pem"),
        silence_ms: 60_000,
        connect_timeout_ms: 30_000,
        retry_min_ms: 100,
        retry_max_ms: 1_000,
        upload_retry_min_ms: 100,
        upload_retry_max_ms: 1_000,
        // `PIVGATE_BENCH_LINGER_MS` sets the real site's linger (to set
        // the taps with and without it side by side); the default is the
        // service's.
        upload_linger_ms: std::env::var("PIVGATE_BENCH_LINGER_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(200),
    }
}

async fn pg_scalar(store: &Store, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sql)
        .fetch_one(store.pool())
        .await
        .expect(sql)
}

async fn wait_applied(sites: &[Arc<SimSite>], pos: i64) {
    for s in sites {
        let mut rx = s.applied.subscribe();
        tokio::time::timeout(WAIT, rx.wait_for(|p| *p >= pos))
            .await
            .expect("every site applies the change in time")
            .unwrap();
    }
}

fn run(z: Size, cluster: &TempCluster) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = TestPki::init(&d.join("pki"), TestPkiOptions::default()).unwrap();
    pki.write_device(
        DeviceOptions {
            name: "central".into(),
            role: DeviceRole::Server,
            dns: vec![],
            ips: vec!["127.0.0.1".parse().unwrap()],
            validity: None,
        },
        &d.join("central"),
    )
    .unwrap();
    let tapper = pki
        .issue_card(&CardOptions {
            cardholder: "Tapper".into(),
            ..CardOptions::default()
        })
        .unwrap();
    pki.write_site(HQ, &d.join(HQ)).unwrap();
    let t = Instant::now();
    for s in 1..=z.sites {
        let name = site_name(s);
        pki.write_site(&name, &d.join(&name)).unwrap();
    }
    eprintln!(
        "sites: {} site certificates in {:.1} s",
        z.sites,
        t.elapsed().as_secs_f64()
    );
    let central_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("central")
        .enable_all()
        .build()
        .unwrap();
    let sites_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("sim-sites")
        .enable_all()
        .build()
        .unwrap();
    let (stop_tx, stop) = watch::channel(false);
    let url = cluster.url().to_string();
    let (store, addr) = central_rt.block_on(start_central(&url, d, stop));
    let t = Instant::now();
    central_rt
        .block_on(store.import_entities(&entities(z, &tapper)))
        .expect("seeding the central");
    eprintln!(
        "sites: seeded the central in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // The postmaster, for PostgreSQL's CPU.
    let data_dir: String = central_rt
        .block_on(sqlx::query_scalar("SHOW data_directory").fetch_one(store.pool()))
        .expect("data_directory");
    let postmaster: u32 = std::fs::read_to_string(PathBuf::from(&data_dir).join("postmaster.pid"))
        .ok()
        .and_then(|t| t.lines().next().and_then(|l| l.trim().parse().ok()))
        .unwrap_or(0);
    let head = central_rt.block_on(store.feed_position()).unwrap();

    // Every site connects and follows the feed from the position its data
    // is at (as a site that holds its part already).
    let t = Instant::now();
    let sites: Vec<Arc<SimSite>> = (1..=z.sites)
        .map(|s| {
            let name = site_name(s);
            let connector = Arc::new(Connector::new(&site_config(d, &name, addr)).unwrap());
            Arc::new(SimSite {
                up: connector.link(0),
                connector,
                name,
                state: Arc::new(Mutex::new(SiteState {
                    pos: head,
                    ..SiteState::default()
                })),
                applied: watch::channel(head).0,
                next_seq: Mutex::new(1),
            })
        })
        .collect();
    let mut followers: Vec<tokio::task::JoinHandle<()>> = sites
        .iter()
        .map(|s| sites_rt.spawn(s.clone().follow()))
        .collect();
    // Connected: a change reaches all of them.
    for suspended in [true, false] {
        let warm = central_rt.block_on(set_suspended(&store, CardholderId(1), suspended));
        sites_rt.block_on(wait_applied(&sites, warm));
    }
    let connect_s = t.elapsed().as_secs_f64();
    eprintln!(
        "sites: {} sites following in {connect_s:.1} s (load {})",
        z.sites,
        load_average()
    );

    // Fan-out.
    let roaming = ROAMING.min(z.cardholders);
    let mut per_site = Vec::new();
    let mut every = Vec::new();
    let mut commit = Vec::new();
    let load_fanout = load_average();
    let cpu0 = threads_cpu("central");
    for k in 0..z.suspensions {
        let who = CardholderId(1 + (k as i64 % roaming));
        let started = Instant::now();
        let pos = central_rt.block_on(set_suspended(&store, who, true));
        commit.push(ms(started.elapsed()));
        sites_rt.block_on(wait_applied(&sites, pos));
        let mut slowest: f64 = 0.0;
        for s in &sites {
            let at = s.state.lock().unwrap().suspended_at[&who];
            let l = ms(at.duration_since(started));
            per_site.push(l);
            slowest = slowest.max(l);
        }
        every.push(slowest);
        // Reinstated, for the next round (not measured).
        let pos = central_rt.block_on(set_suspended(&store, who, false));
        sites_rt.block_on(wait_applied(&sites, pos));
    }
    let fanout_cpu = threads_cpu("central") - cpu0;
    // In the order taken (suspension by suspension), for the spread.
    let repeats_of = |v: &[f64], what: &str| {
        (
            block_percentiles(v, what, 0.5),
            block_percentiles(v, what, 0.99),
        )
    };
    let (per_site_p50, per_site_p99) =
        repeats_of(&per_site, "sites' times (suspension by suspension)");
    let (every_p50, every_p99) = repeats_of(&every, "suspensions");
    per_site.sort_by(f64::total_cmp);
    every.sort_by(f64::total_cmp);
    commit.sort_by(f64::total_cmp);
    let fanout = serde_json::json!({
        "suspensions": z.suspensions,
        "per_site_p50_ms": percentile(&per_site, 0.5),
        "per_site_p50_ms_repeats": per_site_p50,
        "per_site_p99_ms": percentile(&per_site, 0.99),
        "per_site_p99_ms_repeats": per_site_p99,
        "every_site_p50_ms": percentile(&every, 0.5),
        "every_site_p50_ms_repeats": every_p50,
        "every_site_p99_ms": percentile(&every, 0.99),
        "every_site_p99_ms_repeats": every_p99,
        "every_site_max_ms": every.last().copied().unwrap_or(f64::NAN),
        "commit_p50_ms": percentile(&commit, 0.5),
        "central_cpu_ms_per_change": ms(fanout_cpu) / (2 * z.suspensions).max(1) as f64,
        "load": load_fanout,
    });
    eprintln!("sites: fan-out {fanout}");
    if z.fanout_only {
        stop_tx.send_replace(true);
        for f in followers {
            f.abort();
        }
        drop(sites);
        sites_rt.shutdown_timeout(Duration::from_secs(5));
        central_rt.block_on(store.close());
        central_rt.shutdown_timeout(Duration::from_secs(5));
        return serde_json::json!({
            "sites": z.sites,
            "doors_per_site": z.doors,
            "cardholders": z.cardholders,
            "connect_s": connect_s,
            "fanout": fanout,
        });
    }

    // Ingest: every site uploads at once.
    let size0 = central_rt.block_on(pg_scalar(&store, "SELECT pg_total_relation_size('events')"));
    let rows0 = central_rt.block_on(pg_scalar(&store, "SELECT COUNT(*) FROM events"));
    let (cpu0, pg0) = (threads_cpu("central"), postgres_cpu(postmaster));
    let sites_cpu0 = threads_cpu("sim-sites");
    let started = Instant::now();
    let now = Timestamp::now();
    let uploads: Vec<_> = sites
        .iter()
        .map(|s| {
            let s = s.clone();
            sites_rt.spawn(async move { s.upload(z.per_site, now).await })
        })
        .collect();
    for u in uploads {
        sites_rt
            .block_on(u)
            .unwrap()
            .expect("every batch acknowledged");
    }
    let took = started.elapsed();
    let load_ingest = load_average();
    let (cpu, pg) = (
        threads_cpu("central") - cpu0,
        postgres_cpu(postmaster) - pg0,
    );
    // The simulated sites' own work (JSON, TLS) on the same cores.
    let sites_cpu = threads_cpu("sim-sites") - sites_cpu0;
    let events = z.per_site * z.sites;
    let rows = central_rt.block_on(pg_scalar(&store, "SELECT COUNT(*) FROM events")) - rows0;
    assert_eq!(rows, events, "every event stored once");
    let size = central_rt.block_on(pg_scalar(&store, "SELECT pg_total_relation_size('events')"));
    let per_million = (size - size0) as f64 * 1e6 / events as f64;
    let ingest = serde_json::json!({
        "events": events,
        "batch": BATCH,
        "seconds": took.as_secs_f64(),
        "events_per_s": events as f64 / took.as_secs_f64(),
        "central_cpu_s": cpu.as_secs_f64(),
        "central_cpu_us_per_event": cpu.as_secs_f64() * 1e6 / events as f64,
        "central_cpu_s_per_million": cpu.as_secs_f64() * 1e6 / events as f64,
        "postgres_cpu_s": pg.as_secs_f64(),
        "postgres_cpu_s_per_million": pg.as_secs_f64() * 1e6 / events as f64,
        "sites_cpu_s": sites_cpu.as_secs_f64(),
        "events_bytes_per_million": per_million,
        "events_table_bytes": size,
        "load": load_ingest,
    });
    eprintln!("sites: ingest {ingest}");
    if z.only_ingest {
        stop_tx.send_replace(true);
        for f in followers {
            f.abort();
        }
        drop(sites);
        sites_rt.shutdown_timeout(Duration::from_secs(5));
        central_rt.block_on(store.close());
        central_rt.shutdown_timeout(Duration::from_secs(5));
        return serde_json::json!({
            "sites": z.sites,
            "doors_per_site": z.doors,
            "cardholders": z.cardholders,
            "connect_s": connect_s,
            "ingest": ingest,
        });
    }

    // Catch-up: the first site goes away for "an hour".
    let away = sites[0].clone();
    followers[0].abort();
    let away_id = SiteId(1);
    let home: Vec<CardholderId> = (roaming + 1..=z.cardholders)
        .filter(|c| (c - 1) % z.sites + 1 == away_id.0)
        .map(CardholderId)
        .collect();
    let mut last = 0;
    for k in 0..AWAY_CHANGES {
        let who = home[k % home.len()];
        // Each in turn suspended, then reinstated.
        let suspend = (k / home.len()).is_multiple_of(2);
        last = central_rt.block_on(set_suspended(&store, who, suspend));
    }
    let hour_ago = Timestamp::now() - SignedDuration::from_hours(1);
    let load_catchup = load_average();
    let started = Instant::now();
    followers[0] = sites_rt.spawn(away.clone().follow());
    let up = {
        let away = away.clone();
        sites_rt.spawn(async move { away.upload(AWAY_TAPS, hour_ago).await })
    };
    sites_rt.block_on(wait_applied(std::slice::from_ref(&away), last));
    let feed_s = started.elapsed().as_secs_f64();
    sites_rt
        .block_on(up)
        .unwrap()
        .expect("the site's taps acknowledged");
    let catchup_s = started.elapsed().as_secs_f64();
    let late = central_rt.block_on(pg_scalar(
        &store,
        &format!(
            "SELECT COUNT(*) FROM events WHERE site = '{}' AND late <> 0",
            away.name
        ),
    ));
    let catchup = serde_json::json!({
        "changes": AWAY_CHANGES,
        "taps": AWAY_TAPS,
        "feed_s": feed_s,
        "seconds": catchup_s,
        "late_events": late,
        "load": load_catchup,
    });
    eprintln!("sites: catch-up {catchup}");

    // Taps at a real site with its link up, slow, down.
    let taps = hq_taps(d, addr, &tapper, z, z.taps);
    eprintln!("sites: taps at a real site {taps}");

    let db_bytes = central_rt.block_on(pg_scalar(
        &store,
        "SELECT pg_database_size(current_database())",
    ));
    let feed_rows = central_rt.block_on(pg_scalar(&store, "SELECT COUNT(*) FROM sync_feed"));
    stop_tx.send_replace(true);
    for f in followers {
        f.abort();
    }
    drop(sites);
    sites_rt.shutdown_timeout(Duration::from_secs(5));
    central_rt.block_on(store.close());
    central_rt.shutdown_timeout(Duration::from_secs(5));
    serde_json::json!({
        "sites": z.sites,
        "doors_per_site": z.doors,
        "cardholders": z.cardholders,
        "connect_s": connect_s,
        "fanout": fanout,
        "ingest": ingest,
        "catchup": catchup,
        "taps": taps,
        "database_bytes": db_bytes,
        "feed_rows": feed_rows,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick");
    let json = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let mut z = match (full, quick) {
        (true, false) => Size {
            sites: 500,
            doors: 20,
            cardholders: 100_000,
            suspensions: 50,
            per_site: 1_024,
            taps: 2_000,
            only_ingest: false,
            fanout_only: false,
        },
        (true, true) => Size {
            sites: 100,
            doors: 20,
            cardholders: 20_000,
            suspensions: 20,
            per_site: 1_024,
            taps: 1_000,
            only_ingest: false,
            fanout_only: false,
        },
        _ => Size {
            sites: 5,
            doors: 2,
            cardholders: 200,
            suspensions: 3,
            per_site: 300,
            taps: 50,
            only_ingest: false,
            fanout_only: false,
        },
    };
    if let Some(i) = args.iter().position(|a| a == "--only") {
        match args.get(i + 1).map(String::as_str) {
            Some("ingest") => {
                z.only_ingest = true;
                z.suspensions = 0;
            }
            Some("fanout") => z.fanout_only = true,
            Some("taps") => {
                // The sites connect and follow; no suspension, no upload
                // burst: only the real site's taps, link up, slow, down.
                z.suspensions = 0;
                z.per_site = 0;
            }
            other => panic!("--only takes `ingest`, `fanout` or `taps`, not {other:?}"),
        }
    }
    if let Some(n) = std::env::var("PIVGATE_BENCH_SITES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        z.sites = n;
    }
    println!(
        "many sites: {} sites × {} doors, {} cardholders, against one central on PostgreSQL (load {})",
        z.sites,
        z.doors,
        z.cardholders,
        load_average()
    );
    let load_before = load_average();
    let out = match TempCluster::start(true) {
        Ok(cluster) => {
            let mut r = run(z, &cluster);
            r["postgresql"] = serde_json::json!({ "version": cluster.version() });
            r
        }
        Err(e) if !in_ci() => {
            println!("PostgreSQL: not measured ({e})");
            serde_json::json!({ "postgresql": { "not_measured": e.to_string() } })
        }
        Err(e) => panic!("PostgreSQL is required in CI: {e}"),
    };
    let mut out = out;
    out["load_before"] = serde_json::json!(load_before);
    out["load_after"] = serde_json::json!(load_average());
    if let Some(f) = &out.get("fanout") {
        println!(
            "fan-out (suspension → in force at every site): p50 {:.0} ms, p99 {:.0} ms (goal ≤ 1000 ms); per site p50 {:.0} ms, p99 {:.0} ms",
            f["every_site_p50_ms"].as_f64().unwrap_or(f64::NAN),
            f["every_site_p99_ms"].as_f64().unwrap_or(f64::NAN),
            f["per_site_p50_ms"].as_f64().unwrap_or(f64::NAN),
            f["per_site_p99_ms"].as_f64().unwrap_or(f64::NAN),
        );
    }
    if out.get("ingest").is_some() {
        let i = &out["ingest"];
        println!(
            "ingest, every site uploading: {:.0} events/s (goal ≥ 10000); central CPU {:.1} µs/event; PostgreSQL CPU {:.0} s and {:.0} MB of events per million events",
            i["events_per_s"].as_f64().unwrap_or(f64::NAN),
            i["central_cpu_us_per_event"].as_f64().unwrap_or(f64::NAN),
            i["postgres_cpu_s_per_million"].as_f64().unwrap_or(f64::NAN),
            i["events_bytes_per_million"].as_f64().unwrap_or(f64::NAN) / 1e6,
        );
        let c = &out["catchup"];
        println!(
            "catch-up after an hour away ({AWAY_CHANGES} changes, {AWAY_TAPS} taps): {:.2} s (goal ≤ 5 s); the feed in {:.2} s",
            c["seconds"].as_f64().unwrap_or(f64::NAN),
            c["feed_s"].as_f64().unwrap_or(f64::NAN),
        );
    }
    if out.get("fanout").is_none() {
        if let Some(i) = out.get("ingest") {
            println!(
                "ingest, every site uploading: {:.0} events/s (goal ≥ 10000); central CPU {:.1} µs/event; PostgreSQL CPU {:.0} s per million events; load {}",
                i["events_per_s"].as_f64().unwrap_or(f64::NAN),
                i["central_cpu_us_per_event"].as_f64().unwrap_or(f64::NAN),
                i["postgres_cpu_s_per_million"].as_f64().unwrap_or(f64::NAN),
                i["load"],
            );
        }
    }
    if let Some(t) = out.get("taps") {
        for m in ["up", "slow", "down"] {
            println!(
                "tap at a real site, link {m}: p50 {:.2} ms, p99 {:.2} ms ({:.3} × up; goal within 5 %); p99 of each block {}; load {:.2}",
                t[m]["p50_ms"].as_f64().unwrap_or(f64::NAN),
                t[m]["p99_ms"].as_f64().unwrap_or(f64::NAN),
                t[m]["p99_vs_up"].as_f64().unwrap_or(f64::NAN),
                t[m]["p99_ms_repeats"]["values"],
                t[m]["load"].as_f64().unwrap_or(f64::NAN),
            );
        }
    }
    if let Some(f) = json {
        std::fs::write(&f, serde_json::to_vec_pretty(&out).unwrap()).expect("writing --json");
    }
}
