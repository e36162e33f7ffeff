//! Start to ready and the dashboard's reads against the size of the event
//! log, on SQLite and PostgreSQL (a temporary cluster, `fsync=on`).
//!
//! The log is filled through the store (`Store::append_events`, 5,000
//! events a transaction) at one busy door's pace: an event every 31.5 s
//! (1,000,000 a year), about 1.4 KB each (a tap's whole transaction as
//! JSON), 70 % of the taps at door 1 (an anti-passback entry), one in ten
//! refused, one event in 200 a door command and one in 5,000 an admin
//! change. The log grows backwards in time from now, so the last hour and
//! day hold the same taps whatever its size: only the history grows.
//!
//! For each size: start to ready (median of three starts after a warm-up),
//! then each dashboard read through the HTTP API (median of seven after a
//! warm-up), and the CSV export of the whole log (rows written as read; its
//! time is proportional to what it exports). `cargo bench -p server --bench
//! log_size` runs 0, 100,000 and 1,000,000 events; with
//! `PIVGATE_BENCH_LOG_SIZES=0,100000` other sizes,
//! `PIVGATE_BENCH_LOG_BACKENDS=sqlite` (or `postgresql`) one backend; with
//! `PIVGATE_BENCH_LOG_10M=1` also 10,000,000 (about 14 GB on SQLite: it
//! refuses to start with less than 40 GB free in the temporary directory).
//! `cargo test --benches` runs a small smoke pass. `-- --quick` runs 0,
//! 10,000 and 50,000 events with three reads per endpoint; `-- --json FILE`
//! also writes the figures as JSON (for `pivgate-bench`).

use std::path::Path;
use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use access::{CardholderId, CredentialId, DoorId, ReaderId};
use server::config::Config;
use server::service::Service;
use store::testing::{in_ci, TempCluster};
use store::{EventKind, EventResult, NewEvent, Role, Store};

const DOORS: i64 = 4;
const CREDENTIALS: usize = 1_000;
/// One busy door's pace: 1,000,000 events a year.
const SPACING_US: i64 = 31_536_000_000_000 / 1_000_000;
const FILL_BATCH: u64 = 5_000;
/// The most rows one CSV export writes (`server::http::events::CSV_MAX_ROWS`).
const CSV_MAX_ROWS: u64 = server::http::events::CSV_MAX_ROWS;
const READY_GOAL_MS: f64 = 200.0;
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

/// Adds events `from..to` of a log of `total` ending at `end`.
async fn fill(store: &Store, from: u64, to: u64, total: u64, end: i64) {
    let mut i = from;
    while i < to {
        let n = FILL_BATCH.min(to - i);
        let batch: Vec<NewEvent> = (i..i + n).map(|j| event(j, total, end)).collect();
        store.append_events(&batch).await.expect("append");
        i += n;
    }
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
    endpoints: Vec<(String, Duration)>,
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
    let hour_ago = Timestamp::from_second(Timestamp::now().as_second() - 3600).expect("time");
    let paths = [
        "/api/v1/doors/status".to_string(),
        "/api/v1/doors/1/latency?window=1h".into(),
        "/api/v1/doors/1/latency?window=1d".into(),
        "/api/v1/events?direction=backward&limit=100".into(),
        "/api/v1/events?door=2&direction=backward&limit=100".into(),
        "/api/v1/events?cardholder=7&direction=backward&limit=100".into(),
        "/api/v1/events?result=refused&direction=backward&limit=100".into(),
        "/api/v1/events?kind=admin&direction=backward&limit=100".into(),
        "/api/v1/events?door=1&result=refused&direction=backward&limit=100".into(),
        format!("/api/v1/events?since={hour_ago}&direction=backward&limit=100"),
        format!("/api/v1/events?door=3&since={hour_ago}&limit=100"),
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
        endpoints.push((p, median(times)));
    }
    let csv = ((full && !quick) || rows <= 10_000).then(|| {
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
        ready: median(starts),
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
    for (p, t) in &m.endpoints {
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
        let dir = tempfile::tempdir().expect("temp dir");
        let mut text = "data_dir = \"data\"\n[http]\nlisten = \"127.0.0.1:0\"\n".to_string();
        if let Some(url) = database_url {
            text = format!("database_url = \"{url}\"\n{text}");
        }
        let config_path = dir.path().join("pivgate.toml");
        std::fs::write(&config_path, text).expect("configuration");
        let t = Instant::now();
        rt.block_on(async {
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
            fill(&store, 0, n, n, Timestamp::now().as_microsecond()).await;
            if database_url.is_some() {
                // What autovacuum would have done to a log written over a year.
                sqlx::query("VACUUM ANALYZE")
                    .execute(store.pool())
                    .await
                    .expect("vacuum");
            }
            store.close().await;
        });
        let fill = t.elapsed();
        if n > 0 {
            println!(
                "{backend:<10} filled {n} events in {:.1} s",
                fill.as_secs_f64()
            );
        }
        let m = measure(&rt, &config_path, full, quick, n);
        report(backend, n, &m, full);
        json.push(serde_json::json!({
            "backend": backend,
            "events": n,
            "fill_s": fill.as_secs_f64(),
            "ready_ms": ms(m.ready),
            "endpoints": m.endpoints.iter().map(|(p, t)| serde_json::json!({
                "path": p,
                "ms": ms(*t),
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
        let free = free_bytes(&std::env::temp_dir()).unwrap_or(0);
        if free < 40_000_000_000 {
            println!(
                "10,000,000 events: not measured ({:.0} GB free in the temporary directory, 40 GB needed)",
                free as f64 / 1e9
            );
        } else {
            sizes.push(10_000_000);
        }
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
