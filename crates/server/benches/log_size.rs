//! Start to ready and the dashboard's reads against the size of the event
//! log, on SQLite and PostgreSQL (a temporary cluster, `fsync=on`).
//!
//! The log is filled by the database itself ([`fill`]: one period of
//! 15,000 generated events copied with their own ids and times, so
//! 10,000,000 events take minutes) at one busy door's pace: an event every
//! 31.5 s (1,000,000 a year), about 1.4 KB each (a tap's whole transaction
//! as JSON), 70 % of the taps at door 1 (an anti-passback entry), one in
//! ten refused, one event in 200 a door command and one in 5,000 an admin
//! change. The log grows backwards in time from now, so the last hour and
//! day hold the same taps whatever its size: only the history grows.
//!
//! For each size: start to ready (median of three starts after a warm-up),
//! then each read the dashboard's pages make through the HTTP API (median
//! of seven after a warm-up), and the CSV export of the whole log up to
//! 1,000,000 events (rows written as read; its time is proportional to
//! what it exports). `cargo bench -p server --bench log_size` runs 0,
//! 100,000 and 1,000,000 events; with `PIVGATE_BENCH_LOG_SIZES=0,10000000`
//! other sizes, `PIVGATE_BENCH_LOG_BACKENDS=sqlite` (or `postgresql`) one
//! backend; with `PIVGATE_BENCH_LOG_10M=1` also 10,000,000 (about 17 GB on
//! either engine, one database at a time, each deleted before the next; a
//! size needing more than 2 KB an event of free space is not measured).
//! `cargo test --benches` runs a small smoke pass. `-- --quick` runs 0,
//! 10,000 and 50,000 events with three reads per endpoint; `-- --json FILE`
//! also writes the figures as JSON (for `pivgate-bench`), each median with
//! the times it is the median of (its spread).

use std::path::Path;
use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use access::{CardholderId, CredentialId, DoorId, ReaderId};
use server::config::Config;
use server::service::Service;
use store::testing::{in_ci, TempCluster};
use store::{EventKind, EventResult, NewEvent, Role, Store};

#[path = "../../pki/benches/common/repeats.rs"]
mod repeats;

const DOORS: i64 = 4;
const CREDENTIALS: usize = 1_000;
/// One busy door's pace: 1,000,000 events a year.
const SPACING_US: i64 = 31_536_000_000_000 / 1_000_000;
/// The most rows one CSV export writes (`server::http::events::CSV_MAX_ROWS`).
const CSV_MAX_ROWS: u64 = server::http::events::CSV_MAX_ROWS;
const READY_GOAL_MS: f64 = 200.0;
/// Disk an event needs, with its indexes and some room (a size is not
/// measured with less free in the temporary directory).
const BYTES_AN_EVENT: u64 = 2_000;
const ENDPOINT_GOAL_MS: f64 = 50.0;

/// A tap's transaction as the service stores it: the stage table, the
/// card's identifiers and the outcome (about 1.4 KB as JSON).
fn transaction(i: u64, granted: bool) -> serde_json::Value {
    let stage = |name: &str, wall_us: u64, apdus: u32, out: u32, inn: u32| {
        serde_json::json!({"name": name, "wall_us": wall_us, "apdus": apdus,
            "bytes_out": out, "bytes_in": inn})
    };
    let jitter = i % 997;
    serde_json::json!({
        "mechanism": "pki-cak",
        "assurance": "high",
        "reader": "Virtual PCD 00 00",
        "stages": [
            stage("detect", 900 + jitter, 0, 0, 0),
            stage("select", 2_100 + jitter, 1, 15, 96),
            stage("read", 31_000 + 7 * jitter, 9, 120, 2_310),
            stage("challenge", 11_800 + 3 * jitter, 1, 84, 76),
            stage("verify", 420 + jitter / 2, 0, 0, 0),
            stage("decide", 35 + jitter % 20, 0, 0, 0),
        ],
        "card": {
            "uuid": format!("{:032x}", u128::from(i) * 0x9e37_79b9_7f4a_7c15),
            "fascn": {"agency": "0032", "system": "0001", "credential": format!("{:06}", i % 1_000_000),
                "series": "1", "individual": "1", "policy": "1", "org": "0032", "association": "1"},
            "cert_sha256": format!("{:064x}", u128::from(i).wrapping_mul(0x2545_f491_4f6c_dd1d)),
            "subject": "CN=Cardholder,OU=People,O=Example Agency,C=US",
            "issuer": "CN=Example Agency PIV CA 2,OU=Certification Authorities,O=Example Agency,C=US",
            "serial": format!("{:040x}", u128::from(i) << 17),
            "not_after": "2030-06-30T23:59:59Z",
            "card_auth_key": "ECC P-256",
        },
        "validation": {"path_len": 3, "revocation": "crl", "crl_number": 4711,
            "crl_next_update": "2026-12-01T00:00:00Z", "cache": if i.is_multiple_of(3) { "miss" } else { "hit" },
            "policies": ["2.16.840.1.101.3.2.1.3.13", "2.16.840.1.101.3.2.1.3.17"]},
        "outcome": if granted { serde_json::json!({"code": "granted"}) }
            else { serde_json::json!({"code": "not-enrolled", "reason": "no credential is enrolled with this card"}) },
    })
}

/// Event `i` of a log of `total`, `total - i` paces before `end`.
fn event(i: u64, total: u64, end: i64) -> NewEvent {
    let time =
        Timestamp::from_microsecond(end - (total - i) as i64 * SPACING_US).expect("in range");
    let door = if i % 10 < 7 { 1 } else { 2 + (i % 3) as i64 };
    if i % 5_000 == 4_999 {
        return NewEvent::admin(
            time,
            "admin",
            "cardholder.update",
            "status changed".into(),
            serde_json::json!({"id": 1 + i % CREDENTIALS as u64, "status": "active"}),
        );
    }
    if i % 200 == 199 {
        return NewEvent::door_command(time, "ops", DoorId(door), "unlock", "delivery".into());
    }
    let granted = i % 10 != 3;
    let holder = 1 + (i.wrapping_mul(2_654_435_761) % CREDENTIALS as u64) as i64;
    NewEvent {
        time,
        kind: EventKind::Tap,
        door: Some(DoorId(door)),
        reader: Some(ReaderId(door)),
        cardholder: granted.then_some(CardholderId(holder)),
        credential: granted.then_some(CredentialId(holder)),
        result: Some(if granted {
            EventResult::Granted
        } else {
            EventResult::Refused
        }),
        code: Some(if granted { "granted" } else { "not-enrolled" }.into()),
        reason: (!granted).then(|| "no credential is enrolled with this card".into()),
        actor: None,
        data: Some(transaction(i, granted)),
        passback: false,
    }
}

/// The period of [`event`]'s pattern: every modulus it uses (door `i % 10`
/// and `i % 3`, door command `i % 200`, admin change `i % 5_000`,
/// cardholder `i % 1_000`) divides it, so event `i` is event `i % PERIOD`
/// moved in time (only the JSON's varying digits repeat).
const PERIOD: u64 = 15_000;
/// Rows one fill statement (and transaction) inserts: about 350 MB of
/// events, so SQLite's WAL stays bounded.
const FILL_ROWS: u64 = 250_000;

/// Fills the log with events `0..total` ending at `end` in bulk: the
/// pattern's [`PERIOD`] events are written once (through the store's own
/// column encoding, as `append_events` would), then copied by the
/// database itself, `FILL_ROWS` a statement, each with its id and time
/// (a recursive CTE on SQLite, `generate_series` on PostgreSQL): no row
/// crosses the client, so 10,000,000 events take minutes, not an hour.
/// The ids are taken from the store's sequence and `last_grants` is set as
/// the taps' commits would have (the latest granted tap of each
/// cardholder at door 1, the anti-passback entry).
async fn fill(store: &Store, total: u64, end: i64) {
    if total == 0 {
        return;
    }
    let pool = store.pool();
    let pattern = std::cmp::min(PERIOD, total);
    // The pattern, as rows of the events table with ids 0.. and no time.
    sqlx::query(
        "CREATE TABLE bench_pattern (p BIGINT PRIMARY KEY, kind TEXT NOT NULL, door_id BIGINT, \
         reader_id BIGINT, cardholder_id BIGINT, credential_id BIGINT, result TEXT, code TEXT, \
         reason TEXT, actor TEXT, data TEXT)",
    )
    .execute(pool)
    .await
    .expect("pattern table");
    let rows: Vec<NewEvent> = (0..pattern).map(|i| event(i, PERIOD, end)).collect();
    for (c, chunk) in rows.chunks(200).enumerate() {
        let mut sql = "INSERT INTO bench_pattern VALUES ".to_string();
        for r in 0..chunk.len() {
            if r > 0 {
                sql.push_str(", ");
            }
            let cols: Vec<String> = (1..=11).map(|k| format!("${}", r * 11 + k)).collect();
            sql.push_str(&format!("({})", cols.join(", ")));
        }
        let mut q = sqlx::query(&sql);
        for (r, e) in chunk.iter().enumerate() {
            q = q
                .bind((c * 200 + r) as i64)
                .bind(e.kind.as_str())
                .bind(e.door.map(|v| v.0))
                .bind(e.reader.map(|v| v.0))
                .bind(e.cardholder.map(|v| v.0))
                .bind(e.credential.map(|v| v.0))
                .bind(e.result.map(|r| r.as_str()))
                .bind(e.code.clone())
                .bind(e.reason.clone())
                .bind(e.actor.clone())
                .bind(e.data.as_ref().map(|d| d.to_string()));
        }
        q.execute(pool).await.expect("pattern rows");
    }
    let next: i64 = sqlx::query_scalar(
        "UPDATE id_sequences SET next_id = next_id + $1 WHERE name = 'event' RETURNING next_id",
    )
    .bind(total as i64)
    .fetch_one(pool)
    .await
    .expect("event ids");
    let first = next - total as i64;
    let postgres = store.backend() == store::Backend::Postgres;
    let mut from = 0u64;
    while from < total {
        let to = total.min(from + FILL_ROWS);
        let select = "SELECT $3 + s.i, $4 - ($5 - s.i) * $6, p.kind, p.door_id, p.reader_id, \
             p.cardholder_id, p.credential_id, p.result, p.code, p.reason, p.actor, p.data";
        let sql = if postgres {
            format!(
                "INSERT INTO events (id, time_us, kind, door_id, reader_id, cardholder_id, \
                 credential_id, result, code, reason, actor, data) {select} \
                 FROM generate_series($1::BIGINT, $2::BIGINT - 1) AS s(i) \
                 JOIN bench_pattern p ON p.p = s.i % {PERIOD} ORDER BY s.i"
            )
        } else {
            format!(
                "WITH RECURSIVE s(i) AS (SELECT $1 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < $2) \
                 INSERT INTO events (id, time_us, kind, door_id, reader_id, cardholder_id, \
                 credential_id, result, code, reason, actor, data) {select} \
                 FROM s JOIN bench_pattern p ON p.p = s.i % {PERIOD}"
            )
        };
        sqlx::query(&sql)
            .bind(from as i64)
            .bind(to as i64)
            .bind(first)
            .bind(end)
            .bind(total as i64)
            .bind(SPACING_US)
            .execute(pool)
            .await
            .expect("fill");
        from = to;
    }
    // Every cardholder's latest granted tap at door 1 is among the last
    // PERIOD events (each has one residue of the cardholder pattern).
    let tail = first + total.saturating_sub(pattern) as i64;
    sqlx::query(
        "INSERT INTO last_grants (door_id, cardholder_id, event_id) \
         SELECT door_id, cardholder_id, MAX(id) FROM events \
         WHERE id >= $1 AND kind = 'tap' AND result = 'granted' AND door_id = 1 \
         AND cardholder_id IS NOT NULL GROUP BY door_id, cardholder_id",
    )
    .bind(tail)
    .execute(pool)
    .await
    .expect("last grants");
    sqlx::query("DROP TABLE bench_pattern")
        .execute(pool)
        .await
        .expect("pattern table");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Measured {
    ready: Duration,
    /// Each timed start, in order (the spread of `ready`).
    starts: Vec<Duration>,
    /// Each read's median and its timed repeats, in order.
    endpoints: Vec<(String, Duration, Vec<Duration>)>,
    csv: Option<(Duration, u64, u64)>,
}

fn start(rt: &tokio::runtime::Runtime, config_path: &Path) -> Service {
    let config = Config::load(config_path).expect("configuration");
    rt.block_on(Service::start(config, None)).expect("start")
}

fn get(url: &str, token: &str) -> (Duration, ureq::Response) {
    let t = Instant::now();
    let r = ureq::get(url)
        .set("Authorization", &format!("Bearer {token}"))
        .call()
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    (t.elapsed(), r)
}

fn measure(
    rt: &tokio::runtime::Runtime,
    config_path: &Path,
    full: bool,
    quick: bool,
    rows: u64,
) -> Measured {
    start(rt, config_path);
    // The smoke pass (`cargo test --benches`) measures once.
    let repeats = match (full, quick) {
        (true, false) => 7,
        (true, true) => 3,
        (false, _) => 1,
    };
    let mut starts = Vec::new();
    for _ in 0..repeats.min(3) {
        let s = start(rt, config_path);
        starts.push(Duration::from_micros(s.loaded().times.ready_us));
        rt.block_on(s.shutdown()).expect("shutdown");
    }
    let s = start(rt, config_path);
    let token = rt
        .block_on(server::token::create(
            &s.loaded().store,
            &format!("bench-{}", Timestamp::now().as_microsecond()),
            Role::Viewer,
        ))
        .expect("token");
    let now = Timestamp::now().as_second();
    let ago = |s: i64| Timestamp::from_second(now - s).expect("time");
    let (hour_ago, day_ago) = (ago(3_600), ago(86_400));
    let (week_ago, eight_days_ago) = (ago(7 * 86_400), ago(8 * 86_400));
    // The newest event, for the live view's catch-up read (the page after
    // a cursor 500 events back).
    let (_, r) = get(
        &format!("{}/api/v1/events?direction=backward&limit=1", s.url()),
        &token,
    );
    let newest: serde_json::Value = serde_json::from_reader(r.into_reader()).expect("events");
    let newest = newest["events"][0]["id"].as_i64().unwrap_or(0);
    // What the dashboard's pages ask (crates/server/assets/*.js), in the
    // order a sign-in and a tour of the pages asks it.
    let paths = [
        "/readyz".to_string(),
        "/api/v1/whoami".into(),
        "/api/v1/doors".into(),
        "/api/v1/cardholders".into(),
        "/api/v1/doors/status".into(),
        "/api/v1/doors/1/latency?window=1h".into(),
        "/api/v1/doors/1/latency?window=1d".into(),
        "/api/v1/alarms".into(),
        "/api/v1/events?direction=backward&limit=100".into(),
        format!("/api/v1/events?cursor={}&limit=1000", (newest - 500).max(0)),
        "/api/v1/events?direction=backward&limit=50&cursor=".to_string()
            + &(newest - 5_000).max(0).to_string(),
        "/api/v1/events?door=2&direction=backward&limit=100".into(),
        "/api/v1/events?cardholder=7&direction=backward&limit=25".into(),
        "/api/v1/events?result=refused&direction=backward&limit=100".into(),
        "/api/v1/events?kind=admin&direction=backward&limit=100".into(),
        "/api/v1/events?kind=alarm&direction=backward&limit=50".into(),
        "/api/v1/events?door=1&result=refused&direction=backward&limit=100".into(),
        format!("/api/v1/events?since={hour_ago}&direction=backward&limit=100"),
        format!("/api/v1/events?door=3&since={hour_ago}&limit=100"),
        format!("/api/v1/events?since={day_ago}&direction=backward&limit=50"),
        format!(
            "/api/v1/events?since={eight_days_ago}&until={week_ago}&direction=backward&limit=50"
        ),
        format!("/api/v1/events.csv?since={hour_ago}"),
        format!("/api/v1/events.csv?door=2&since={day_ago}"),
        "/api/v1/cardholders/7/credentials".into(),
        "/api/v1/pki/health".into(),
        "/metrics".into(),
    ];
    let mut endpoints = Vec::new();
    for p in paths {
        let url = format!("{}{p}", s.url());
        get(&url, &token);
        let times: Vec<Duration> = (0..repeats)
            .map(|_| {
                let (t, r) = get(&url, &token);
                std::io::copy(&mut r.into_reader(), &mut std::io::sink()).expect("body");
                t
            })
            .collect();
        endpoints.push((p, median(times.clone()), times));
    }
    let csv = ((full && !quick && rows <= 1_000_000) || rows <= 10_000).then(|| {
        let t = Instant::now();
        let (_, r) = get(&format!("{}/api/v1/events.csv", s.url()), &token);
        let mut lines = 0u64;
        let mut bytes = 0u64;
        let mut reader = std::io::BufReader::with_capacity(1 << 16, r.into_reader());
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = std::io::BufRead::read_until(&mut reader, b'\n', &mut line).expect("csv");
            if n == 0 {
                break;
            }
            bytes += n as u64;
            lines += 1;
        }
        // The header and one row per event.
        assert_eq!(lines, rows.min(CSV_MAX_ROWS) + 1, "CSV rows");
        (t.elapsed(), lines - 1, bytes)
    });
    rt.block_on(s.shutdown()).expect("shutdown");
    Measured {
        ready: median(starts.clone()),
        starts,
        endpoints,
        csv,
    }
}

fn report(backend: &str, n: u64, m: &Measured, full: bool) {
    let verdict = |ok: bool| if full && !ok { "  MISSED" } else { "" };
    println!(
        "{backend:<10} {n:>10} events  start to ready {:>8.1} ms{}",
        ms(m.ready),
        verdict(ms(m.ready) <= READY_GOAL_MS)
    );
    for (p, t, _) in &m.endpoints {
        println!(
            "{backend:<10} {n:>10} events  {:>8.2} ms  GET {p}{}",
            ms(*t),
            verdict(ms(*t) <= ENDPOINT_GOAL_MS)
        );
    }
    if let Some((t, rows, bytes)) = m.csv {
        println!(
            "{backend:<10} {n:>10} events  {:>8.0} ms  GET /api/v1/events.csv ({rows} rows, {:.1} MB, {:.0} rows/s)",
            ms(t),
            bytes as f64 / 1e6,
            rows as f64 / t.as_secs_f64().max(1e-9)
        );
    }
}

fn free_bytes(dir: &Path) -> Option<u64> {
    let out = std::process::Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .ok()?;
    String::from_utf8(out.stdout)
        .ok()?
        .lines()
        .nth(1)?
        .trim()
        .parse()
        .ok()
}

/// Runs every size on a database of its own (emptied first), the log
/// filled oldest first as a service would have.
fn run_backend(
    backend: &str,
    database_url: Option<&str>,
    sizes: &[u64],
    full: bool,
    quick: bool,
    json: &mut Vec<serde_json::Value>,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for &n in sizes {
        // About 1.7 KB an event on disk with its indexes, on either engine.
        let free = free_bytes(&std::env::temp_dir()).unwrap_or(u64::MAX);
        if n.saturating_mul(BYTES_AN_EVENT) > free {
            println!(
                "{backend:<10} {n} events: not measured ({:.1} GB free in the temporary directory, {:.1} GB needed)",
                free as f64 / 1e9,
                n.saturating_mul(BYTES_AN_EVENT) as f64 / 1e9
            );
            continue;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let mut text = "data_dir = \"data\"\n[http]\nlisten = \"127.0.0.1:0\"\n".to_string();
        if let Some(url) = database_url {
            text = format!("database_url = \"{url}\"\n{text}");
        }
        let config_path = dir.path().join("pivgate.toml");
        std::fs::write(&config_path, text).expect("configuration");
        let t = Instant::now();
        let db_bytes = rt.block_on(async {
            let store = match database_url {
                Some(url) => {
                    let s = Store::connect(url).await.expect("PostgreSQL");
                    sqlx::query("DROP SCHEMA public CASCADE")
                        .execute(s.pool())
                        .await
                        .expect("drop schema");
                    sqlx::query("CREATE SCHEMA public")
                        .execute(s.pool())
                        .await
                        .expect("create schema");
                    s.close().await;
                    Store::connect(url).await.expect("PostgreSQL")
                }
                None => Store::open_data_dir(&dir.path().join("data"))
                    .await
                    .expect("SQLite"),
            };
            store
                .import_entities(&access::synthetic::site(CREDENTIALS, DOORS))
                .await
                .expect("entities");
            fill(&store, n, Timestamp::now().as_microsecond()).await;
            if database_url.is_some() {
                // What autovacuum would have done to a log written over a year.
                sqlx::query("VACUUM ANALYZE")
                    .execute(store.pool())
                    .await
                    .expect("vacuum");
            }
            let bytes: i64 = if database_url.is_some() {
                sqlx::query_scalar("SELECT pg_database_size(current_database())")
                    .fetch_one(store.pool())
                    .await
                    .expect("database size")
            } else {
                sqlx::query_scalar(
                    "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
                )
                .fetch_one(store.pool())
                .await
                .expect("database size")
            };
            store.close().await;
            bytes
        });
        let fill = t.elapsed();
        if n > 0 {
            println!(
                "{backend:<10} filled {n} events in {:.1} s ({:.2} GB, {:.0} bytes an event)",
                fill.as_secs_f64(),
                db_bytes as f64 / 1e9,
                db_bytes as f64 / n as f64
            );
        }
        let m = measure(&rt, &config_path, full, quick, n);
        report(backend, n, &m, full);
        json.push(serde_json::json!({
            "backend": backend,
            "events": n,
            "fill_s": fill.as_secs_f64(),
            "db_bytes": db_bytes,
            "ready_ms": ms(m.ready),
            "ready_ms_repeats": repeats::repeats(
                m.starts.iter().map(|t| ms(*t)),
                format!("{} starts", m.starts.len()),
            ),
            "endpoints": m.endpoints.iter().map(|(p, t, runs)| serde_json::json!({
                "path": p,
                "ms": ms(*t),
                "ms_repeats": repeats::repeats(
                    runs.iter().map(|t| ms(*t)),
                    format!("{} reads", runs.len()),
                ),
            })).collect::<Vec<_>>(),
            "csv": m.csv.map(|(t, rows, bytes)| serde_json::json!({
                "ms": ms(t),
                "rows": rows,
                "bytes": bytes,
            })),
        }));
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let quick = std::env::args().any(|a| a == "--quick");
    let mut sizes: Vec<u64> = if !full {
        vec![0, 2_000]
    } else if quick {
        vec![0, 10_000, 50_000]
    } else if let Ok(list) = std::env::var("PIVGATE_BENCH_LOG_SIZES") {
        list.split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .expect("PIVGATE_BENCH_LOG_SIZES: event counts, comma-separated")
            })
            .collect()
    } else {
        vec![0, 100_000, 1_000_000]
    };
    if full && std::env::var("PIVGATE_BENCH_LOG_10M").is_ok_and(|v| v == "1") {
        sizes.push(10_000_000);
    }
    println!(
        "event log size against start to ready (goal <= {READY_GOAL_MS} ms) and dashboard reads \
         (goal <= {ENDPOINT_GOAL_MS} ms each), {CREDENTIALS} credentials, {DOORS} doors"
    );
    // `PIVGATE_BENCH_LOG_BACKENDS=sqlite` (or `postgresql`): one only.
    let only = std::env::var("PIVGATE_BENCH_LOG_BACKENDS").unwrap_or_default();
    let mut runs = Vec::new();
    let mut postgresql = serde_json::Value::Null;
    if only != "postgresql" {
        run_backend("SQLite", None, &sizes, full, quick, &mut runs);
    }
    if only != "sqlite" {
        match TempCluster::start(true) {
            Ok(cluster) => {
                postgresql = serde_json::json!({ "version": cluster.version() });
                run_backend(
                    "PostgreSQL",
                    Some(cluster.url()),
                    &sizes,
                    full,
                    quick,
                    &mut runs,
                );
            }
            Err(e) if !in_ci() => {
                println!("PostgreSQL: not measured ({e})");
                postgresql = serde_json::json!({ "not_measured": e.to_string() });
            }
            Err(e) => panic!("PostgreSQL is required in CI: {e}"),
        }
    }
    if let Some(path) = json_path() {
        let value = serde_json::json!({
            "ready_goal_ms": READY_GOAL_MS,
            "endpoint_goal_ms": ENDPOINT_GOAL_MS,
            "credentials": CREDENTIALS,
            "doors": DOORS,
            "postgresql": postgresql,
            "runs": runs,
        });
        std::fs::write(&path, serde_json::to_string_pretty(&value).expect("JSON"))
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}

/// `--json FILE`: where to write the figures as JSON.
fn json_path() -> Option<std::path::PathBuf> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .map(Into::into)
}
