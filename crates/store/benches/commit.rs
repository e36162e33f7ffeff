//! Event-log commit latency and events per second through group commit, and
//! loading 10,000 credentials into a snapshot: SQLite (WAL,
//! `synchronous=FULL`) and PostgreSQL (a temporary cluster with `fsync=on`)
//! side by side.
//!
//! `cargo bench -p store --bench commit` (`-- --quick` for fewer events;
//! `-- --json FILE` also writes the commit figures as JSON, for
//! `pivgate-bench`, each figure with its value in each of five blocks of
//! consecutive commits, in the order they became durable: its spread).
//! Latency is from submitting an event to its durable acknowledgement.

use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use access::*;
use serde_json::json;
use store::testing::{in_ci, TempCluster};
use store::*;

#[path = "../../pki/benches/common/repeats.rs"]
mod repeats;

const CREDENTIALS: usize = 10_000;

fn entities() -> Entities {
    access::synthetic::site(CREDENTIALS, 8)
}

/// A tap event carrying a transaction the size the service stores.
fn tap(i: usize) -> NewEvent {
    NewEvent {
        time: Timestamp::now(),
        kind: EventKind::Tap,
        door: Some(DoorId((i % 8) as i64 + 1)),
        reader: Some(ReaderId((i % 8) as i64 + 1)),
        cardholder: Some(CardholderId((i % CREDENTIALS) as i64 + 1)),
        credential: Some(CredentialId((i % CREDENTIALS) as i64 + 1)),
        result: Some(EventResult::Granted),
        code: Some("granted".into()),
        reason: None,
        actor: None,
        data: Some(json!({
            "mechanism": "pki-cak",
            "assurance": "some",
            "path": "fast",
            "stages": [
                {"name": "detect", "wall_us": 12, "apdus": 0, "bytes_out": 0, "bytes_in": 0},
                {"name": "select", "wall_us": 180, "apdus": 1, "bytes_out": 15, "bytes_in": 22},
                {"name": "challenge", "wall_us": 820, "apdus": 1, "bytes_out": 48, "bytes_in": 124},
                {"name": "verify", "wall_us": 4, "apdus": 0, "bytes_out": 0, "bytes_in": 0},
                {"name": "decide", "wall_us": 1, "apdus": 0, "bytes_out": 0, "bytes_in": 0}
            ],
            "card": {
                "uuid": "urn:uuid:3a4f9c10-0001-4b6e-8f00-aabbccddeeff",
                "cert_sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                "expires": "2031-01-01T00:00:00Z",
                "key_algorithm": "P-256"
            },
            "outcome": {"result": "granted"},
            "host_compute_us": 620
        })),
        passback: false,
    }
}

struct Row {
    backend: String,
    concurrency: usize,
    events: usize,
    per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    avg_batch: f64,
    /// Events/s, p50 and p99 of each block of consecutive commits (in the
    /// order they became durable): the figures' spread.
    blocks: Vec<(f64, f64, f64)>,
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

async fn run(name: &str, store: Store, quick: bool, rows: &mut Vec<Row>, loads: &mut Vec<String>) {
    let t = Instant::now();
    store.import_entities(&entities()).await.unwrap();
    let import = t.elapsed();
    let (mut times, mut reads, mut builds) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        let e = store.load_entities().await.unwrap();
        let read = t.elapsed();
        let snap = AccessSnapshot::build(e).unwrap();
        times.push(t.elapsed());
        reads.push(read);
        builds.push(t.elapsed() - read);
        assert_eq!(snap.credentials().len(), CREDENTIALS);
    }
    for v in [&mut times, &mut reads, &mut builds] {
        v.sort();
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    loads.push(format!(
        "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:.0} |",
        ms(times[2]),
        ms(times[0]),
        ms(reads[2]),
        ms(builds[2]),
        ms(import)
    ));

    let (log, writer) = EventLog::start(store.clone(), 0);
    for &concurrency in &[1usize, 8, 64, 256] {
        let per_task = match (quick, concurrency) {
            (true, 1) => 50,
            (true, _) => (2000 / concurrency).max(5),
            (false, 1) => 300,
            (false, _) => (10_000 / concurrency).max(20),
        };
        let before = log.stats();
        let start = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for t in 0..concurrency {
            let log = log.clone();
            tasks.spawn(async move {
                // (durable since the start, latency).
                let mut lat = Vec::with_capacity(per_task);
                for k in 0..per_task {
                    let e = tap(t * per_task + k);
                    let s = Instant::now();
                    log.append(e).await.unwrap();
                    lat.push((start.elapsed(), s.elapsed()));
                }
                lat
            });
        }
        let mut done = Vec::new();
        while let Some(r) = tasks.join_next().await {
            done.extend(r.unwrap());
        }
        let wall = start.elapsed();
        let after = log.stats();
        done.sort();
        // Each block from the previous block's last commit to its own.
        let mut block_start = Duration::ZERO;
        let blocks = repeats::blocks(&done)
            .into_iter()
            .map(|b| {
                let end = b.last().map_or(block_start, |d| d.0);
                let mut l: Vec<Duration> = b.iter().map(|d| d.1).collect();
                l.sort();
                let per_s = b.len() as f64 / (end - block_start).as_secs_f64().max(1e-9);
                block_start = end;
                (per_s, pct(&l, 0.5), pct(&l, 0.99))
            })
            .collect();
        let mut lat: Vec<Duration> = done.into_iter().map(|d| d.1).collect();
        lat.sort();
        let n = lat.len();
        rows.push(Row {
            backend: name.to_string(),
            concurrency,
            events: n,
            per_s: n as f64 / wall.as_secs_f64(),
            p50_ms: pct(&lat, 0.5),
            p99_ms: pct(&lat, 0.99),
            avg_batch: (after.events - before.events) as f64
                / (after.commits - before.commits).max(1) as f64,
            blocks,
        });
    }
    drop(log);
    writer.await.unwrap();
}

/// `--json FILE`: where to write the commit figures as JSON.
fn json_path() -> Option<std::path::PathBuf> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .map(Into::into)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut rows = Vec::new();
        let mut loads = Vec::new();
        let pg_status: serde_json::Value;

        let dir = tempfile::tempdir().unwrap();
        let sqlite = Store::open_data_dir(dir.path()).await.unwrap();
        run(
            "SQLite (WAL, synchronous=FULL)",
            sqlite.clone(),
            quick,
            &mut rows,
            &mut loads,
        )
        .await;
        sqlite.close().await;

        match TempCluster::start(true) {
            Ok(pg) => {
                let store = Store::connect(pg.url()).await.unwrap();
                let name = format!(
                    "PostgreSQL {} (fsync=on, Unix socket)",
                    pg.version()
                        .rsplit(' ')
                        .next()
                        .and_then(|v| v.split('-').next())
                        .unwrap_or("")
                );
                pg_status = serde_json::json!({ "version": name });
                run(&name, store.clone(), quick, &mut rows, &mut loads).await;
                store.close().await;
            }
            Err(e) if in_ci() => panic!("PostgreSQL is required in CI: {e}"),
            Err(e) => {
                eprintln!("PostgreSQL skipped: {e}");
                pg_status = serde_json::json!({ "not_measured": e.to_string() });
            }
        }

        println!("\nLoad 10,000 credentials into an AccessSnapshot (ms, of 5 runs; import = seeding them in one transaction)\n");
        println!("| backend | load median | load best | read rows (median) | index (median) | import |");
        println!("|---|---|---|---|---|---|");
        for l in &loads {
            println!("{l}");
        }
        if let Some(path) = json_path() {
            let value = serde_json::json!({
                "postgresql": pg_status,
                "rows": rows.iter().map(|r| {
                    let over = format!(
                        "{} blocks of {} consecutive commits",
                        r.blocks.len(),
                        r.events / repeats::BLOCKS
                    );
                    let each = |f: fn(&(f64, f64, f64)) -> f64| {
                        repeats::repeats(r.blocks.iter().map(f), over.clone())
                    };
                    serde_json::json!({
                        "backend": r.backend,
                        "submitters": r.concurrency,
                        "events": r.events,
                        "events_per_s": r.per_s,
                        "events_per_s_repeats": each(|b| b.0),
                        "p50_ms": r.p50_ms,
                        "p50_ms_repeats": each(|b| b.1),
                        "p99_ms": r.p99_ms,
                        "p99_ms_repeats": each(|b| b.2),
                        "events_per_commit": r.avg_batch,
                    })
                }).collect::<Vec<_>>(),
            });
            std::fs::write(&path, serde_json::to_string_pretty(&value).unwrap())
                .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        }
        println!("\nEvent append through group commit (latency = submit to durable acknowledgement)\n");
        println!("| backend | concurrent submitters | events | events/s | p50 ms | p99 ms | events per commit |");
        println!("|---|---|---|---|---|---|---|");
        for r in &rows {
            println!(
                "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.1} |",
                r.backend, r.concurrency, r.events, r.per_s, r.p50_ms, r.p99_ms, r.avg_batch
            );
        }
    });
}
