//! Events up from a site to the central: how many events a second one
//! site's uploader gets into the central's database.
//!
//! The site is a SQLite database (WAL, `synchronous=FULL`) holding the
//! events already (taps with their whole transaction as JSON, about
//! 1.2 KB each); the central is the ingest route served by axum on
//! loopback, plain HTTP (the link's mutual TLS is not part of it), over a
//! temporary PostgreSQL cluster (`fsync=on`, Unix socket), and then over
//! SQLite for comparison. The uploader sends batches of `max_batch`
//! events, one at a time, a connection each, and records every
//! acknowledgement at the site; the time is from its start to the last
//! acknowledgement. Each run uploads as a site of its own (the central
//! starts empty for it).
//!
//! `cargo bench -p server --bench site_upload` uploads 20,000 events per
//! batch size (`PIVGATE_BENCH_UPLOAD_EVENTS` for another count);
//! `cargo test --benches` runs a small smoke pass.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use access::{CardholderId, DoorId, ReaderId};
use axum::Extension;
use server::sync::ingest::{self, IngestState, SiteIdentity};
use server::sync::upload::{post_batch, Uplink, UplinkError, UploadOptions, Uploader};
use server::sync::wire::{UploadAck, UploadBatch};
use store::testing::{in_ci, TempCluster};
use store::{EventKind, EventLog, EventResult, IngestPolicy, NewEvent, Store};

struct Tcp(SocketAddr);

impl Uplink for Tcp {
    fn send(
        &self,
        batch: &UploadBatch,
    ) -> impl std::future::Future<Output = Result<UploadAck, UplinkError>> + Send {
        let addr = self.0;
        async move {
            let stream = tokio::net::TcpStream::connect(addr)
                .await
                .map_err(|e| UplinkError::Unreachable(e.to_string()))?;
            post_batch(stream, "central", batch).await
        }
    }
}

fn tap(time: Timestamp, i: i64) -> NewEvent {
    let stage = |name: &str, wall_us: i64, apdus: u32| {
        serde_json::json!({"name": name, "wall_us": wall_us, "apdus": apdus,
            "bytes_out": 15 * apdus, "bytes_in": 96 * apdus})
    };
    NewEvent {
        time,
        kind: EventKind::Tap,
        door: Some(DoorId(1 + i % 4)),
        reader: Some(ReaderId(1 + i % 4)),
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
            "fasc_n": {"agency": "9999", "system": "9999", "credential": format!("{:06}", i % 1_000_000),
                "series": "1", "issue": "1", "person": format!("{:010}", i), "org_category": "1",
                "org": "1223", "association": "1"},
            "card_uuid": format!("{:032x}", i),
            "certificate": {"subject": format!("CN=Cardholder {i}, O=pivgate Test PKI, C=US"),
                "sha256": format!("{:064x}", i * 7919)},
        })),
        passback: false,
    }
}

/// Fills a site with `n` events; its database and log.
async fn site(dir: &std::path::Path, n: i64) -> (Store, EventLog) {
    let store = Store::open_data_dir(dir).await.unwrap();
    let now = Timestamp::now();
    let mut i = 0;
    while i < n {
        let chunk: Vec<_> = (i..(i + 1000).min(n)).map(|j| tap(now, j)).collect();
        store.append_events(&chunk).await.unwrap();
        i += chunk.len() as i64;
    }
    let (log, _) = EventLog::start(store.clone(), 0);
    (store, log)
}

/// Uploads `n` events in batches of `max_batch` to `central` as `name`;
/// the time to the last acknowledgement.
async fn upload(central: &Store, name: &str, n: i64, max_batch: u32) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let (store, log) = site(dir.path(), n).await;
    let app = ingest::router(IngestState {
        store: central.clone(),
        policy: IngestPolicy::default(),
    })
    .layer(Extension(SiteIdentity::new(name)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let up = Uploader::new(
        store.clone(),
        log,
        Tcp(addr),
        UploadOptions {
            max_batch,
            ..UploadOptions::default()
        },
    );
    let mut progress = up.progress();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let started = Instant::now();
    let task = tokio::spawn(up.run(stopped));
    tokio::time::timeout(
        Duration::from_secs(600),
        progress.wait_for(|p| p.acked >= n),
    )
    .await
    .expect("every event acknowledged in time")
    .unwrap();
    let took = started.elapsed();
    let failures = progress.borrow().failures;
    assert_eq!(failures, 0, "no batch should fail on loopback");
    stop.send(true).unwrap();
    task.await.unwrap();
    server.abort();
    store.close().await;
    took
}

async fn run(backend: &str, central: &Store, n: i64, batches: &[u32]) {
    for &b in batches {
        let took = upload(central, &format!("{backend}-{b}"), n, b).await;
        println!(
            "{backend:<10} batch {b:>4}: {n} events in {:>7.1} ms = {:>7.0} events/s",
            took.as_secs_f64() * 1e3,
            n as f64 / took.as_secs_f64()
        );
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n: i64 = if full {
        std::env::var("PIVGATE_BENCH_UPLOAD_EVENTS")
            .ok()
            .map(|v| {
                v.parse()
                    .expect("PIVGATE_BENCH_UPLOAD_EVENTS: an event count")
            })
            .unwrap_or(20_000)
    } else {
        300
    };
    let batches: &[u32] = if full { &[64, 256, 1024] } else { &[64] };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("site upload: events/s from a SQLite site into the central, one uploader");
    match TempCluster::start(true) {
        Ok(cluster) => rt.block_on(async {
            let central = Store::connect(cluster.url()).await.unwrap();
            run("PostgreSQL", &central, n, batches).await;
            central.close().await;
        }),
        Err(e) if !in_ci() => println!("PostgreSQL: not measured ({e})"),
        Err(e) => panic!("PostgreSQL is required in CI: {e}"),
    }
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let central = Store::open_data_dir(dir.path()).await.unwrap();
        run("SQLite", &central, n, batches).await;
    });
}
