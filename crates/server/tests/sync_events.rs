//! Events flow up from a site (SQLite) to the central (PostgreSQL) exactly
//! once: the site's uploader talks to the central's handler over real HTTP
//! on loopback, through a TCP proxy that cuts connections when told to.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use access::jiff::{SignedDuration, Timestamp};
use access::{CardholderId, DoorId, ReaderId};
use axum::Extension;
use server::sync::ingest::{self, IngestState, SiteIdentity};
use server::sync::upload::{
    post_batch, Uplink, UplinkError, UploadOptions, UploadProgress, Uploader,
};
use server::sync::wire::{self, UploadAck, UploadBatch};
use store::{
    EventKind, EventLog, EventQuery, EventResult, IngestPolicy, NewEvent, SiteEvent, Store,
};
use testbed::proxy::{Fault, Proxy};
use tokio::sync::watch;

/// How long a test waits for what it expects before failing.
const DEADLINE: Duration = Duration::from_secs(120);

/// The link in the tests: plain HTTP/1.1 to `target`, a connection per
/// batch (the real link is mutual TLS).
#[derive(Clone)]
struct HttpUplink {
    target: Arc<Mutex<SocketAddr>>,
}

impl HttpUplink {
    fn to(addr: SocketAddr) -> Self {
        HttpUplink {
            target: Arc::new(Mutex::new(addr)),
        }
    }

    fn retarget(&self, addr: SocketAddr) {
        *self.target.lock().unwrap() = addr;
    }
}

impl Uplink for HttpUplink {
    fn send(
        &self,
        batch: &UploadBatch,
    ) -> impl std::future::Future<Output = Result<UploadAck, UplinkError>> + Send {
        let addr = *self.target.lock().unwrap();
        async move {
            let exchange = async {
                let stream = tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(|e| UplinkError::Unreachable(e.to_string()))?;
                post_batch(stream, "central", batch).await
            };
            tokio::time::timeout(Duration::from_secs(30), exchange)
                .await
                .map_err(|e| UplinkError::Unreachable(e.to_string()))?
        }
    }
}

/// An uplink that notes the first sequence of every batch it is given.
struct Recording<U> {
    inner: U,
    firsts: Arc<Mutex<Vec<i64>>>,
}

impl<U: Uplink> Uplink for Recording<U> {
    fn send(
        &self,
        batch: &UploadBatch,
    ) -> impl std::future::Future<Output = Result<UploadAck, UplinkError>> + Send {
        if let Some(e) = batch.events.first() {
            self.firsts.lock().unwrap().push(e.seq);
        }
        self.inner.send(batch)
    }
}

/// A central instance: the ingest route on plain HTTP, every request
/// authenticated as `site`.
async fn start_central(
    store: &Store,
    policy: IngestPolicy,
    site: &str,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let app = ingest::router(IngestState {
        store: store.clone(),
        policy,
    })
    .layer(Extension(SiteIdentity::new(site)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, task)
}

/// A site's database and event log, in `dir`.
async fn open_site(dir: &std::path::Path) -> (Store, EventLog) {
    let store = Store::open_data_dir(dir).await.unwrap();
    let (log, _writer) = EventLog::start(store.clone(), 0);
    (store, log)
}

fn tap(time: Timestamp, n: i64) -> NewEvent {
    NewEvent {
        time,
        kind: EventKind::Tap,
        door: Some(DoorId(1)),
        reader: Some(ReaderId(1)),
        cardholder: Some(CardholderId(n % 3 + 1)),
        credential: None,
        result: Some(EventResult::Granted),
        code: Some("granted".into()),
        reason: None,
        actor: None,
        data: Some(serde_json::json!({ "n": n, "stages": ["select", "verify"] })),
        passback: false,
    }
}

async fn record(log: &EventLog, from: i64, n: i64) {
    let events = (from..from + n).map(|i| tap(Timestamp::now(), i)).collect();
    log.append_all(events).await.unwrap();
}

fn fast() -> UploadOptions {
    UploadOptions {
        max_batch: 4,
        min_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(50),
        ..UploadOptions::default()
    }
}

/// Starts an uploader; its progress and the sender that stops it.
fn spawn_uploader<U: Uplink + 'static>(
    store: &Store,
    log: &EventLog,
    uplink: U,
    options: UploadOptions,
) -> (
    watch::Receiver<UploadProgress>,
    watch::Sender<bool>,
    tokio::task::JoinHandle<()>,
) {
    let up = Uploader::new(store.clone(), log.clone(), uplink, options);
    let progress = up.progress();
    let (stop, stopped) = watch::channel(false);
    let task = tokio::spawn(up.run(stopped));
    (progress, stop, task)
}

async fn wait_for(
    progress: &mut watch::Receiver<UploadProgress>,
    what: &str,
    f: impl FnMut(&UploadProgress) -> bool,
) -> UploadProgress {
    let reached = match tokio::time::timeout(DEADLINE, progress.wait_for(f)).await {
        Ok(Ok(p)) => Some(p.clone()),
        _ => None,
    };
    match reached {
        Some(p) => p,
        None => panic!("{what}: not reached; progress {:?}", *progress.borrow()),
    }
}

/// How many rows the central holds for `site`, and how many sequences it
/// holds more than once.
async fn central_counts(central: &Store, site: &str) -> (i64, i64) {
    use sqlx::Row;
    let rows = sqlx::query("SELECT COUNT(*) FROM events WHERE site = $1")
        .bind(site.to_string())
        .fetch_one(central.pool())
        .await
        .unwrap();
    let doubled = sqlx::query(
        "SELECT COUNT(*) FROM (SELECT site_seq FROM events WHERE site = $1 \
         GROUP BY site_seq HAVING COUNT(*) > 1) d",
    )
    .bind(site.to_string())
    .fetch_one(central.pool())
    .await
    .unwrap();
    (rows.try_get(0).unwrap(), doubled.try_get(0).unwrap())
}

/// Every event of the site with an id up to `up_to` is at the central
/// once, as the site recorded it.
async fn assert_all_there_once(site_store: &Store, central: &Store, site: &str, up_to: i64) {
    let at_site = site_store
        .events_after_site_seq(0, 100_000)
        .await
        .unwrap()
        .events;
    let at_site: Vec<_> = at_site.into_iter().filter(|e| e.id.0 <= up_to).collect();
    let there = central.site_events(site, 1, up_to).await.unwrap();
    let (_, doubled) = central_counts(central, site).await;
    assert_eq!(doubled, 0, "a sequence stored twice");
    assert_eq!(there.len(), at_site.len(), "events at the central");
    for (s, c) in at_site.iter().zip(&there) {
        assert_eq!(c.seq, s.id.0);
        assert_eq!(c.event.event, s.event, "event {}", s.id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_sent_again_after_a_lost_acknowledgement_is_stored_once() {
    let Some(pg) = store::testing::postgres_or_skip("lost_acknowledgement") else {
        return;
    };
    let central = Store::connect(pg.url()).await.unwrap();
    let (addr, _server) = start_central(&central, IngestPolicy::default(), "north").await;
    let dir = tempfile::tempdir().unwrap();
    let (site, log) = open_site(dir.path()).await;
    record(&log, 0, 10).await;

    // The answer to the first connection is lost after the central stored
    // the batch.
    let proxy = Proxy::start(addr, |n| {
        if n < 4 {
            Fault::DropResponse
        } else {
            Fault::Pass
        }
    })
    .unwrap();
    let uplink = HttpUplink::to(proxy.addr());
    let found = site.events_after_site_seq(0, 100).await.unwrap();
    let batch = UploadBatch {
        v: wire::VERSION,
        floor: found.floor,
        sent_at: Timestamp::now(),
        events: found
            .events
            .iter()
            .map(|e| SiteEvent {
                seq: e.id.0,
                event: e.event.clone(),
            })
            .collect(),
    };
    let lost = uplink.send(&batch).await;
    assert!(matches!(lost, Err(UplinkError::Unreachable(_))), "{lost:?}");
    let state = central.site_upload_state("north").await.unwrap().unwrap();
    assert_eq!(state.acked, 10, "the central stored the batch");

    // Sent again (directly): nothing new, the same acknowledgement.
    let again = HttpUplink::to(addr).send(&batch).await.unwrap();
    assert_eq!((again.acked, again.stored, again.duplicates), (10, 0, 10));
    assert_eq!(central_counts(&central, "north").await, (10, 0));

    // The uploader meets three more lost answers, then gets through; it
    // starts from its own cursor (0), so all ten are sent again too.
    record(&log, 10, 6).await;
    let (mut progress, _stop, _task) = spawn_uploader(&site, &log, uplink, fast());
    let p = wait_for(&mut progress, "all acknowledged", |p| p.acked >= 16).await;
    assert!(p.failures >= 3, "{p:?}");
    assert_eq!(proxy.cuts(), 4);
    assert_eq!(central_counts(&central, "north").await, (16, 0));
    assert_all_there_once(&site, &central, "north", 16).await;
    assert_eq!(site.upload_cursor().await.unwrap().unwrap().acked, 16);
}

/// The acknowledgement rule on one central database.
async fn check_gap_free_prefix(central: &Store) {
    let (addr, _server) = start_central(central, IngestPolicy::default(), "east").await;
    let uplink = HttpUplink::to(addr);
    let now = Timestamp::now();
    let batch = |floor: i64, seqs: &[i64]| UploadBatch {
        v: wire::VERSION,
        floor,
        sent_at: now,
        events: seqs
            .iter()
            .map(|&seq| SiteEvent {
                seq,
                event: tap(now, seq),
            })
            .collect(),
    };
    let ack = |a: &UploadAck| (a.acked, a.stored, a.duplicates);

    let a = uplink.send(&batch(0, &[1, 2, 3])).await.unwrap();
    assert_eq!(ack(&a), (3, 3, 0));
    // A gap: stored, not acknowledged.
    let a = uplink.send(&batch(0, &[7, 8, 9])).await.unwrap();
    assert_eq!(ack(&a), (3, 3, 0));
    // Out of order, and the gap filled: acknowledged through 9.
    let a = uplink.send(&batch(0, &[6, 4, 5])).await.unwrap();
    assert_eq!(ack(&a), (9, 3, 0));
    // Duplicates, one twice in the batch, and one new.
    let a = uplink.send(&batch(0, &[5, 10, 10, 2])).await.unwrap();
    assert_eq!(ack(&a), (10, 1, 3));
    // The acknowledgement never goes back.
    let a = uplink.send(&batch(0, &[1])).await.unwrap();
    assert_eq!(ack(&a), (10, 0, 1));
    let (rows, doubled) = central_counts(central, "east").await;
    assert_eq!((rows, doubled), (10, 0));

    // Another site's sequences are its own; a site that pruned before it
    // first uploaded starts above its floor.
    let (addr_w, _server_w) = start_central(central, IngestPolicy::default(), "west").await;
    let west = HttpUplink::to(addr_w);
    let a = west.send(&batch(100, &[101, 102])).await.unwrap();
    assert_eq!(ack(&a), (102, 2, 0));
    let a = west.send(&batch(100, &[104])).await.unwrap();
    assert_eq!(ack(&a), (102, 1, 0));
    assert_eq!(central_counts(central, "east").await, (10, 0));

    // Refused, and nothing stored: another version, a sequence below 1.
    let mut wrong = batch(0, &[11]);
    wrong.v = 2;
    match uplink.send(&wrong).await {
        Err(UplinkError::Refused { status, code, .. }) => {
            assert_eq!((status, code.as_str()), (400, "sync-version"))
        }
        other => panic!("{other:?}"),
    }
    match uplink.send(&batch(0, &[0, 11])).await {
        Err(UplinkError::Refused { code, .. }) => assert_eq!(code, "bad-sequence"),
        other => panic!("{other:?}"),
    }
    assert_eq!(central_counts(central, "east").await, (10, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_gap_free_prefix_is_acknowledged_on_sqlite_and_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let central = Store::open_data_dir(dir.path()).await.unwrap();
    check_gap_free_prefix(&central).await;
    let Some(pg) = store::testing::postgres_or_skip("gap_free_prefix") else {
        return;
    };
    let central = Store::connect(pg.url()).await.unwrap();
    check_gap_free_prefix(&central).await;
}

#[test]
fn every_tap_reaches_the_central_once_through_connections_cut_mid_upload() {
    let Some(pg) = store::testing::postgres_or_skip("cut_mid_upload") else {
        return;
    };
    let site = common::site();
    let store = site.service().loaded().store.clone();
    let log = site.service().loaded().controller.log().clone();
    let central = site.rt.block_on(Store::connect(pg.url())).unwrap();
    let (addr, _server) =
        site.rt
            .block_on(start_central(&central, IngestPolicy::default(), "plant"));
    // Of every three connections: one cut inside the request, one whose
    // answer is lost after the central committed, one that gets through.
    let proxy = Proxy::start(addr, |n| match n % 3 {
        0 => Fault::CutRequestAfter(60 + (n as usize * 37) % 400),
        1 => Fault::DropResponse,
        _ => Fault::Pass,
    })
    .unwrap();
    let (mut progress, _stop, _task) = site
        .rt
        .block_on(async { spawn_uploader(&store, &log, HttpUplink::to(proxy.addr()), fast()) });
    // Taps at the door while the uploads fail and succeed.
    for i in 0..24 {
        let card = if i % 4 == 3 {
            &site.stranger
        } else {
            &site.card
        };
        site.tap_card(card);
    }
    let last = site
        .rt
        .block_on(store.query_events(&EventQuery {
            direction: store::Direction::Backward,
            limit: 1,
            ..EventQuery::default()
        }))
        .unwrap()
        .events[0]
        .id
        .0;
    assert!(last >= 24, "{last}");
    let p = site
        .rt
        .block_on(wait_for(&mut progress, "every tap acknowledged", |p| {
            p.acked >= last
        }));
    assert!(p.failures >= 5, "{p:?}");
    assert!(proxy.cuts() >= 5, "{}", proxy.cuts());
    site.rt
        .block_on(assert_all_there_once(&store, &central, "plant", last));
    let taps = site
        .rt
        .block_on(central.site_events("plant", 1, last))
        .unwrap()
        .into_iter()
        .filter(|e| e.event.event.kind == EventKind::Tap)
        .count();
    assert_eq!(taps, 24);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_site_resumes_from_the_acknowledgement_and_a_central_can_be_replaced() {
    let Some(pg) = store::testing::postgres_or_skip("restarted_site") else {
        return;
    };
    let central = Store::connect(pg.url()).await.unwrap();
    let (addr, server) = start_central(&central, IngestPolicy::default(), "depot").await;
    let dir = tempfile::tempdir().unwrap();
    let (site, log) = open_site(dir.path()).await;
    record(&log, 0, 20).await;
    let uplink = HttpUplink::to(addr);
    let (mut progress, stop, task) = spawn_uploader(&site, &log, uplink.clone(), fast());
    wait_for(&mut progress, "first twenty", |p| p.acked >= 20).await;

    // The central instance dies; taps go on; another instance serves.
    server.abort();
    let _ = server.await;
    record(&log, 20, 4).await;
    wait_for(&mut progress, "failures while the central is gone", |p| {
        p.failures >= 2
    })
    .await;
    let (addr2, _server2) = start_central(&central, IngestPolicy::default(), "depot").await;
    uplink.retarget(addr2);
    wait_for(&mut progress, "after the new central", |p| p.acked >= 24).await;
    stop.send(true).unwrap();
    task.await.unwrap();

    // The site goes on, then is killed while its batch is at the central
    // (stored there, the answer never back).
    record(&log, 24, 6).await;
    let proxy = Proxy::start(addr2, |_| Fault::DropResponse).unwrap();
    let (mut progress, _stop, task) = spawn_uploader(
        &site,
        &log,
        HttpUplink::to(proxy.addr()),
        UploadOptions {
            max_batch: 100,
            ..fast()
        },
    );
    wait_for(&mut progress, "a lost answer", |p| p.failures >= 1).await;
    task.abort();
    let _ = task.await;
    assert_eq!(
        central
            .site_upload_state("depot")
            .await
            .unwrap()
            .unwrap()
            .acked,
        30
    );
    drop(log);
    site.close().await;

    // Restarted: the cursor is what the site last heard; it resumes there.
    let (site, log) = open_site(dir.path()).await;
    assert_eq!(site.upload_cursor().await.unwrap().unwrap().acked, 24);
    record(&log, 30, 5).await;
    let firsts = Arc::new(Mutex::new(Vec::new()));
    let recording = Recording {
        inner: HttpUplink::to(addr2),
        firsts: firsts.clone(),
    };
    let (mut progress, _stop, _task) = spawn_uploader(
        &site,
        &log,
        recording,
        UploadOptions {
            max_batch: 100,
            ..fast()
        },
    );
    wait_for(&mut progress, "all after the restart", |p| p.acked >= 35).await;
    assert_eq!(firsts.lock().unwrap().first(), Some(&25));
    assert_eq!(central_counts(&central, "depot").await, (35, 0));
    assert_all_there_once(&site, &central, "depot", 35).await;
}

fn ten_minutes_fast() -> Timestamp {
    Timestamp::now() + SignedDuration::from_mins(10)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_events_are_marked_and_a_skewed_site_clock_raises_an_event() {
    let Some(pg) = store::testing::postgres_or_skip("late_and_skew") else {
        return;
    };
    let central = Store::connect(pg.url()).await.unwrap();
    let policy = IngestPolicy {
        late_after: SignedDuration::from_hours(1),
        max_skew: SignedDuration::from_secs(30),
    };
    let (addr, _server) = start_central(&central, policy, "harbour").await;
    let dir = tempfile::tempdir().unwrap();
    let (site, log) = open_site(dir.path()).await;
    let now = Timestamp::now();
    log.append_all(vec![
        tap(now - SignedDuration::from_hours(3), 1),
        tap(now - SignedDuration::from_mins(20), 2),
        tap(now - SignedDuration::from_hours(2), 3),
    ])
    .await
    .unwrap();

    // The site's clock is ten minutes fast.
    let (mut progress, stop, task) = spawn_uploader(
        &site,
        &log,
        HttpUplink::to(addr),
        UploadOptions {
            clock: ten_minutes_fast,
            ..fast()
        },
    );
    let p = wait_for(&mut progress, "first batch", |p| p.acked >= 3).await;
    assert!(p.skewed, "{p:?}");
    let skew = p.skew.unwrap();
    assert!(
        skew > SignedDuration::from_mins(9) && skew < SignedDuration::from_mins(11),
        "{skew}"
    );
    let cursor = site.upload_cursor().await.unwrap().unwrap();
    assert_eq!(cursor.skew, Some(skew), "the site keeps the skew it learnt");

    let there = central.site_events("harbour", 1, 3).await.unwrap();
    let late: Vec<bool> = there.iter().map(|e| e.late).collect();
    assert_eq!(late, [true, false, true]);
    for e in &there {
        assert!(e.received_at >= now, "received at the central's time");
        assert!(e.event.event.time < now, "the site's time is kept");
    }
    let skew_events = |code: &'static str| {
        let central = central.clone();
        async move {
            central
                .query_events(&EventQuery {
                    kind: Some(EventKind::Admin),
                    ..EventQuery::default()
                })
                .await
                .unwrap()
                .events
                .into_iter()
                .filter(|e| e.event.code.as_deref() == Some(code))
                .collect::<Vec<_>>()
        }
    };
    let raised = skew_events("site.clock-skew").await;
    assert_eq!(raised.len(), 1);
    let reason = raised[0].event.reason.clone().unwrap();
    assert!(
        reason.contains("harbour") && reason.contains("ahead of"),
        "{reason}"
    );

    // Still skewed: no second event. Then the clock is set right.
    record(&log, 4, 2).await;
    wait_for(&mut progress, "second batch", |p| p.acked >= 5).await;
    assert_eq!(skew_events("site.clock-skew").await.len(), 1);
    stop.send(true).unwrap();
    task.await.unwrap();
    let (mut progress, _stop, _task) = spawn_uploader(&site, &log, HttpUplink::to(addr), fast());
    record(&log, 6, 1).await;
    let p = wait_for(&mut progress, "right clock", |p| p.acked >= 6).await;
    assert!(!p.skewed, "{p:?}");
    assert_eq!(skew_events("site.clock-ok").await.len(), 1);
    assert_eq!(skew_events("site.clock-skew").await.len(), 1);
    let state = central.site_upload_state("harbour").await.unwrap().unwrap();
    assert!(!state.skewed);
    assert!(!central.site_events("harbour", 6, 6).await.unwrap()[0].late);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_at_a_site_keeps_what_the_central_has_not_acknowledged() {
    let Some(pg) = store::testing::postgres_or_skip("retention_keeps_unacknowledged") else {
        return;
    };
    let central = Store::connect(pg.url()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (site, log) = open_site(dir.path()).await;
    let now = Timestamp::now();
    let old = now - SignedDuration::from_hours(24 * 10);
    log.append_all((0..10).map(|i| tap(old, i)).collect())
        .await
        .unwrap();
    // The central acknowledged four so far.
    site.start_upload_cursor().await.unwrap();
    site.set_upload_cursor(4, SignedDuration::ZERO, now)
        .await
        .unwrap();

    let archive = tempfile::tempdir().unwrap();
    let report = server::retention::export_and_prune(&site, archive.path(), 1, now)
        .await
        .unwrap();
    assert_eq!((report.exported, report.deleted), (10, 4));
    let kept = site.events_after_site_seq(0, 100).await.unwrap();
    let ids: Vec<i64> = kept.events.iter().map(|e| e.id.0).collect();
    assert_eq!(ids, (5..=10).collect::<Vec<_>>());
    assert_eq!(kept.floor, 4);

    // Uploaded: the central starts above the site's floor (the first four
    // are gone there) and takes the rest.
    let (addr, _server) = start_central(&central, IngestPolicy::default(), "yard").await;
    let (mut progress, stop, task) = spawn_uploader(&site, &log, HttpUplink::to(addr), fast());
    wait_for(&mut progress, "the rest acknowledged", |p| p.acked >= 10).await;
    stop.send(true).unwrap();
    task.await.unwrap();
    assert_eq!(central_counts(&central, "yard").await, (6, 0));

    let report = server::retention::export_and_prune(&site, archive.path(), 1, now)
        .await
        .unwrap();
    assert_eq!(report.deleted, 6);
    assert!(site
        .events_after_site_seq(0, 100)
        .await
        .unwrap()
        .events
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_site_whose_database_was_replaced_stops_instead_of_losing_its_events() {
    let central_dir = tempfile::tempdir().unwrap();
    let central = Store::open_data_dir(central_dir.path()).await.unwrap();
    let (addr, _server) = start_central(&central, IngestPolicy::default(), "annex").await;
    let dir = tempfile::tempdir().unwrap();
    let (site, log) = open_site(dir.path()).await;
    record(&log, 0, 10).await;
    let (mut progress, stop, task) = spawn_uploader(&site, &log, HttpUplink::to(addr), fast());
    wait_for(&mut progress, "first database", |p| p.acked >= 10).await;
    stop.send(true).unwrap();
    task.await.unwrap();

    // The same site with a new, empty database: its events 1..3 are not
    // the central's 1..3.
    let fresh = tempfile::tempdir().unwrap();
    let (site, log) = open_site(fresh.path()).await;
    record(&log, 0, 3).await;
    let (mut progress, _stop, _task) = spawn_uploader(&site, &log, HttpUplink::to(addr), fast());
    let p = wait_for(&mut progress, "refused to go on", |p| p.failures >= 1).await;
    assert_eq!(p.last_error.as_ref().map(|e| e.0), Some("central-ahead"));
    assert_eq!(site.upload_cursor().await.unwrap().unwrap().acked, 0);
    assert_eq!(central_counts(&central, "annex").await, (10, 0));
}

/// Many sites upload at once through one central's writer (their batches
/// share transactions), each batch sent twice at the same moment and a
/// refused batch among them: every event is stored once, each answer is
/// its own site's.
async fn check_many_sites_at_once(central: &Store) {
    const SITES: usize = 40;
    const BATCHES: i64 = 6;
    const PER_BATCH: i64 = 10;
    let group = ingest::IngestGroup::new(IngestState {
        store: central.clone(),
        policy: IngestPolicy::default(),
    });
    let batch = |from: i64, n: i64, now: Timestamp| UploadBatch {
        v: wire::VERSION,
        floor: 0,
        sent_at: now,
        events: (from..from + n)
            .map(|seq| SiteEvent {
                seq,
                event: tap(now, seq),
            })
            .collect(),
    };
    let uploads: Vec<_> = (0..SITES)
        .map(|k| {
            let group = group.clone();
            tokio::spawn(async move {
                let site = SiteIdentity::new(&format!("crowd-{k:02}"));
                for b in 0..BATCHES {
                    let now = Timestamp::now();
                    let sent = batch(b * PER_BATCH + 1, PER_BATCH, now);
                    let (one, two) = tokio::join!(
                        group.ingest(&site, sent.clone(), now),
                        group.ingest(&site, sent, now)
                    );
                    let (one, two) = (one.unwrap(), two.unwrap());
                    let acked = (b + 1) * PER_BATCH;
                    assert_eq!((one.acked, two.acked), (acked, acked), "{site:?}");
                    assert_eq!(one.stored + two.stored, PER_BATCH as u64, "{site:?}");
                    assert_eq!(
                        one.duplicates + two.duplicates,
                        PER_BATCH as u64,
                        "{site:?}"
                    );
                    if k % 8 == 0 {
                        // A batch the central refuses, among the others.
                        let mut bad = batch(acked + 1, 2, now);
                        bad.events[1].seq = 0;
                        match group.ingest(&site, bad, now).await {
                            Err(e) => assert_eq!(e.code(), "bad-sequence"),
                            Ok(a) => panic!("a sequence 0 accepted: {a:?}"),
                        }
                    }
                }
            })
        })
        .collect();
    for u in uploads {
        tokio::time::timeout(DEADLINE, u).await.unwrap().unwrap();
    }
    for k in 0..SITES {
        let site = format!("crowd-{k:02}");
        let all = BATCHES * PER_BATCH;
        assert_eq!(central_counts(central, &site).await, (all, 0), "{site}");
        let state = central.site_upload_state(&site).await.unwrap().unwrap();
        assert_eq!(state.acked, all, "{site}");
        let there = central.site_events(&site, 1, all).await.unwrap();
        let seqs: Vec<i64> = there.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=all).collect::<Vec<_>>(), "{site}");
        for e in &there {
            assert_eq!(
                e.event.event.data,
                Some(serde_json::json!({ "n": e.seq, "stages": ["select", "verify"] })),
                "{site}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_sites_uploading_at_once_share_transactions_and_store_each_event_once() {
    let dir = tempfile::tempdir().unwrap();
    let central = Store::open_data_dir(dir.path()).await.unwrap();
    check_many_sites_at_once(&central).await;
    let Some(pg) = store::testing::postgres_or_skip("many_sites_at_once") else {
        return;
    };
    let central = Store::connect(pg.url()).await.unwrap();
    check_many_sites_at_once(&central).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_committed_one_by_one_go_up_together_after_the_linger() {
    let Some(pg) = store::testing::postgres_or_skip("upload_linger") else {
        return;
    };
    let central = Store::connect(pg.url()).await.unwrap();
    let (addr, _server) = start_central(&central, IngestPolicy::default(), "north").await;
    let dir = tempfile::tempdir().unwrap();
    let (site, log) = open_site(dir.path()).await;
    record(&log, 0, 1).await;
    let (mut progress, _stop, _task) = spawn_uploader(
        &site,
        &log,
        HttpUplink::to(addr),
        UploadOptions {
            max_batch: 100,
            linger: Duration::from_secs(5),
            ..fast()
        },
    );
    let p = wait_for(&mut progress, "the first event", |p| p.acked >= 1).await;
    assert_eq!(p.batches, 1, "{p:?}");
    // Ten commits, one event each, while the uploader lets events gather:
    // they go up in one request, not ten.
    for i in 1..=10 {
        record(&log, i, 1).await;
    }
    let p = wait_for(&mut progress, "the ten events", |p| p.acked >= 11).await;
    assert_eq!(p.batches, 2, "{p:?}");
    assert_eq!(central_counts(&central, "north").await, (11, 0));
}
