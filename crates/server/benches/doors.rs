//! Decisions per second across 8 doors, and the latency of one tap with
//! the decision and its durable event write: in-process software cards
//! (P-256), the real tap pipeline (authenticate → decide → group commit →
//! signal), SQLite (WAL, `synchronous=FULL`) and PostgreSQL (a temporary
//! cluster with `fsync=on`) side by side.
//!
//! `cargo bench -p server --bench doors` runs each backend with 1 and 4
//! readers per door (8 and 32 taps in flight) for a few seconds each and
//! prints decisions/s against the 5,000/s goal, p50/p99 tap latency and how
//! many events each commit carried. `cargo test --benches` runs a short
//! smoke pass. Each reader thread keeps its card in the field and taps it
//! again and again: after the first (full) read every tap takes the fast
//! path, as a returning cardholder's does.
//!
//! Throughput depends on the machine as much as on the program, so each
//! run also prints the host CPU per decision (this process's user + system
//! time over the measured window, divided by the decisions: the card's own
//! signing is in it, PostgreSQL's server processes are not) and a
//! calibration figure measured in the same run: how many P-256 ECDSA
//! sign + verify pairs one core does per second. A slower machine lowers
//! both; a slower program raises the CPU per decision.
//!
//! `-- --quick`: 1 s per run; `-- --json FILE` also writes the figures as
//! JSON (for `pivgate-bench`), each with its value in each of five equal
//! stretches of the run's window (a tap counted in the stretch it ended
//! in, the CPU read at each stretch's end): the figure's spread. The full run measures 1, 2 and 4 readers per
//! door (8, 16 and 32 taps in flight).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use access::{
    AccessGroup, Cardholder, CardholderId, CardholderStatus, Credential, CredentialId,
    CredentialState, Door, DoorId, Entities, GroupId, Mechanism, Reader, ReaderId, Schedule,
    ScheduleId, Site, SiteId,
};
use auth::{Authenticator, Settings};
use card::Card;
use host::InProcess;
use pki_issue::{CardCredentials, CardOptions, TestPki, TestPkiOptions};
use server::door::{Controller, SimulatedOutput};
use store::testing::{in_ci, TempCluster};
use store::{EventLog, Store};

#[path = "../../pki/benches/common/repeats.rs"]
mod repeats;

const DOORS: i64 = 8;
const GOAL_PER_SEC: f64 = 5_000.0;

fn sha256(der: &[u8]) -> access::Sha256 {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der);
    access::Sha256::from_slice(d.as_ref()).expect("32 bytes")
}

/// One site, 8 PKI-CAK doors with `per_door` readers each, one enrolled
/// cardholder and card per reader, everyone allowed everywhere always.
fn entities(cards: &[CardCredentials], per_door: i64) -> Entities {
    let readers = DOORS * per_door;
    Entities {
        sites: vec![Site {
            id: SiteId(1),
            name: "Bench site".into(),
            time_zone: "UTC".into(),
            lockdown: false,
        }],
        doors: (1..=DOORS)
            .map(|d| Door {
                id: DoorId(d),
                site: SiteId(1),
                name: format!("Door {d}"),
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
        readers: (1..=readers)
            .map(|r| Reader {
                id: ReaderId(r),
                door: DoorId((r - 1) % DOORS + 1),
                name: format!("reader {r}"),
                connection: format!("sim:{r}"),
            })
            .collect(),
        cardholders: (1..=readers)
            .map(|i| Cardholder {
                id: CardholderId(i),
                name: format!("Cardholder {i}"),
                status: CardholderStatus::Active,
                valid_from: None,
                valid_until: None,
            })
            .collect(),
        credentials: cards
            .iter()
            .take(readers as usize)
            .enumerate()
            .map(|(i, c)| Credential {
                id: CredentialId(i as i64 + 1),
                cardholder: CardholderId(i as i64 + 1),
                card_uuid: Some(access::CardUuid(c.uuid)),
                fasc_n: Some(access::FascN(c.fascn.encode().expect("FASC-N"))),
                cert_sha256: Some(sha256(&c.slot(0x9E).expect("9E").certificate)),
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
        groups: vec![AccessGroup {
            id: GroupId(1),
            name: "everyone".into(),
            schedule: ScheduleId(1),
            doors: (1..=DOORS).map(DoorId).collect(),
            cardholders: (1..=readers).map(CardholderId).collect(),
        }],
        holidays: vec![],
    }
}

/// This process's user + system CPU time so far (`/proc/self/stat`,
/// clock ticks of 1/100 s on Linux).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which is in parentheses).
    let rest = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
    let field = |i: usize| -> u64 {
        rest.split_whitespace()
            .nth(i)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    // utime is field 14 and stime 15 of the whole line: 11 and 12 after ") ".
    Duration::from_millis((field(11) + field(12)) * 10)
}

/// P-256 ECDSA sign + verify pairs per second on one core, for `period`,
/// and the same rate in each of [`repeats::BLOCKS`] equal stretches of it.
fn calibration(period: Duration) -> (f64, Vec<f64>) {
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{
        EcdsaKeyPair, KeyPair, UnparsedPublicKey, ECDSA_P256_SHA256_ASN1,
        ECDSA_P256_SHA256_ASN1_SIGNING,
    };
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).expect("key");
    let key =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref()).expect("key");
    let public =
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, key.public_key().as_ref().to_vec());
    let message = [0x5a_u8; 32];
    let t = Instant::now();
    let mut pairs = 0u64;
    let mut stretches = Vec::with_capacity(repeats::BLOCKS);
    for k in 1..=repeats::BLOCKS as u32 {
        let (from, n) = (t.elapsed(), pairs);
        while t.elapsed() < period * k / repeats::BLOCKS as u32 {
            let sig = key.sign(&rng, &message).expect("sign");
            public.verify(&message, sig.as_ref()).expect("verify");
            pairs += 1;
        }
        stretches.push((pairs - n) as f64 / (t.elapsed() - from).as_secs_f64());
    }
    (pairs as f64 / t.elapsed().as_secs_f64(), stretches)
}

/// One stretch of a run's window: its decisions per second, tap latency
/// and CPU per decision, for the figures' spread.
struct Stretch {
    per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
    cpu_us: f64,
}

struct Run {
    decisions: usize,
    elapsed: Duration,
    latencies_us: Vec<u64>,
    commits: u64,
    events: u64,
    largest_batch: u64,
    /// This process's CPU time over the measured window (the taps above
    /// are those that ended in it).
    cpu: Duration,
    /// The window cut into [`repeats::BLOCKS`] equal stretches of time,
    /// each tap counted in the stretch it ended in.
    stretches: Vec<Stretch>,
}

/// Taps every reader's card in a loop on its own thread for `duration`.
fn run(
    pki: &TestPki,
    cards: &[CardCredentials],
    store: Store,
    per_door: i64,
    duration: Duration,
) -> Run {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(store.import_entities(&entities(cards, per_door)))
        .expect("import");
    let snapshot = rt.block_on(store.load_snapshot()).expect("snapshot");
    let (log, writer) = {
        let _g = rt.enter();
        EventLog::start(store.clone(), 0)
    };
    let authn = Arc::new(Authenticator::new(
        pki.trust_store(),
        pki.crl_set().expect("CRLs"),
        Settings::default(),
    ));
    let controller = Arc::new(Controller::new(
        authn,
        snapshot,
        log,
        Arc::new(SimulatedOutput::new()),
        rt.handle().clone(),
        Duration::from_millis(3000),
    ));
    let readers = (DOORS * per_door) as usize;
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(readers + 1));
    // Every tap's end, from here, places it in a stretch of the window.
    let t0 = Instant::now();
    let threads: Vec<_> = (0..readers)
        .map(|i| {
            let image = cards[i].card_image(Some(7)).expect("card image");
            let (controller, stop, start) = (controller.clone(), stop.clone(), start.clone());
            std::thread::spawn(move || {
                let mut transport = InProcess::new(Card::new(image));
                let reader = ReaderId(i as i64 + 1);
                // The first tap reads the card in full; the rest are repeat taps.
                let first = controller
                    .tap(&mut transport, reader, None, None)
                    .expect("tap");
                assert!(first.granted(), "{} {:?}", first.code(), first.reason());
                start.wait();
                // (end since t0, latency), in µs.
                let mut latencies = Vec::with_capacity(65_536);
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let r = controller
                        .tap(&mut transport, reader, None, None)
                        .expect("tap");
                    latencies.push((
                        t0.elapsed().as_micros() as u64,
                        t.elapsed().as_micros() as u64,
                    ));
                    assert!(r.granted(), "{} {:?}", r.code(), r.reason());
                }
                latencies
            })
        })
        .collect();
    start.wait();
    let before = controller.log().stats();
    let cpu_before = process_cpu();
    // The window's stretches: (end since t0, this process's CPU by then).
    let mut marks = vec![(t0.elapsed(), cpu_before)];
    for _ in 0..repeats::BLOCKS {
        std::thread::sleep(duration / repeats::BLOCKS as u32);
        marks.push((t0.elapsed(), process_cpu()));
    }
    stop.store(true, Ordering::Relaxed);
    let taps: Vec<(u64, u64)> = threads
        .into_iter()
        .flat_map(|h| h.join().expect("reader thread"))
        .collect();
    // The window: the taps that ended in it (not those still in flight
    // when it closed), its length and this process's CPU over it, so that
    // the run's figures are the stretches' put together.
    let (first, last) = (marks[0], marks[marks.len() - 1]);
    let window = first.0.as_micros() as u64..last.0.as_micros() as u64;
    let elapsed = last.0 - first.0;
    let cpu = last.1.saturating_sub(first.1);
    let stretches = marks
        .windows(2)
        .map(|w| {
            let (from, to) = (w[0].0.as_micros() as u64, w[1].0.as_micros() as u64);
            let mut l: Vec<u64> = taps
                .iter()
                .filter(|(end, _)| (from..to).contains(end))
                .map(|(_, l)| *l)
                .collect();
            l.sort_unstable();
            Stretch {
                per_s: l.len() as f64 / (w[1].0 - w[0].0).as_secs_f64(),
                p50_ms: percentile(&l, 0.50),
                p99_ms: percentile(&l, 0.99),
                cpu_us: w[1].1.saturating_sub(w[0].1).as_secs_f64() * 1e6 / l.len().max(1) as f64,
            }
        })
        .collect();
    let mut latencies_us: Vec<u64> = taps
        .into_iter()
        .filter(|(end, _)| window.contains(end))
        .map(|(_, l)| l)
        .collect();
    let after = controller.log().stats();
    drop(controller);
    rt.block_on(writer).expect("writer");
    latencies_us.sort_unstable();
    Run {
        decisions: latencies_us.len(),
        elapsed,
        latencies_us,
        commits: after.commits - before.commits,
        events: after.events - before.events,
        largest_batch: after.largest_batch,
        cpu,
        stretches,
    }
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1000.0
}

/// `--json FILE`: where to write the figures as JSON.
fn json_path() -> Option<std::path::PathBuf> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .map(Into::into)
}

/// One run as JSON, each figure with its value in each stretch of the
/// window (its spread).
fn json_run(backend: &str, per_door: i64, r: &Run) -> serde_json::Value {
    let over = format!(
        "{} stretches of {:.2} s of the run",
        r.stretches.len(),
        r.elapsed.as_secs_f64() / r.stretches.len().max(1) as f64
    );
    let each = |f: fn(&Stretch) -> f64| repeats::repeats(r.stretches.iter().map(f), over.clone());
    serde_json::json!({
        "backend": backend,
        "in_flight": DOORS * per_door,
        "decisions": r.decisions,
        "seconds": r.elapsed.as_secs_f64(),
        "decisions_per_s": r.decisions as f64 / r.elapsed.as_secs_f64(),
        "decisions_per_s_repeats": each(|s| s.per_s),
        "p50_ms": percentile(&r.latencies_us, 0.50),
        "p50_ms_repeats": each(|s| s.p50_ms),
        "p99_ms": percentile(&r.latencies_us, 0.99),
        "p99_ms_repeats": each(|s| s.p99_ms),
        "events_per_commit": r.events as f64 / r.commits.max(1) as f64,
        "cpu_us_per_decision": r.cpu.as_secs_f64() * 1e6 / r.decisions.max(1) as f64,
        "cpu_us_per_decision_repeats": each(|s| s.cpu_us),
    })
}

fn report(backend: &str, per_door: i64, r: &Run, full: bool) -> f64 {
    let rate = r.decisions as f64 / r.elapsed.as_secs_f64();
    println!(
        "{backend:<10} {:>3} in flight  {:>8.0} decisions/s  p50 {:>6.2} ms  p99 {:>6.2} ms  {:>5.1} events/commit (largest {})  {:>5.0} µs CPU/decision",
        DOORS * per_door,
        rate,
        percentile(&r.latencies_us, 0.50),
        percentile(&r.latencies_us, 0.99),
        r.events as f64 / r.commits.max(1) as f64,
        r.largest_batch,
        r.cpu.as_secs_f64() * 1e6 / r.decisions.max(1) as f64,
    );
    if full {
        let verdict = if rate >= GOAL_PER_SEC {
            "met"
        } else {
            "MISSED"
        };
        println!(
            "{backend:<10} {:>3} in flight  goal >= {GOAL_PER_SEC:.0} decisions/s: {verdict}",
            DOORS * per_door
        );
    }
    rate
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let quick = std::env::args().any(|a| a == "--quick");
    let duration = match (full, quick) {
        (true, false) => Duration::from_secs(4),
        (true, true) => Duration::from_secs(1),
        (false, _) => Duration::from_millis(200),
    };
    let pki = TestPki::generate(TestPkiOptions::default()).expect("test PKI");
    let cards: Vec<CardCredentials> = (0..DOORS * 4)
        .map(|i| {
            pki.issue_card(&CardOptions {
                cardholder: format!("Cardholder {}", i + 1),
                ..CardOptions::default()
            })
            .expect("card")
        })
        .collect();
    println!(
        "8 doors, PKI-CAK, P-256 in-process cards, repeat taps (fast path), {} s per run",
        duration.as_secs_f64()
    );
    let calibration_period = match (full, quick) {
        (true, false) => Duration::from_secs(1),
        (true, true) => Duration::from_millis(500),
        (false, _) => Duration::from_millis(50),
    };
    let (pairs, pair_stretches) = calibration(calibration_period);
    println!("calibration: {pairs:.0} P-256 ECDSA sign + verify pairs/s on one core (same run)");
    let per_doors: &[i64] = match (full, quick) {
        (true, false) => &[1, 2, 4],
        (true, true) => &[1, 4],
        (false, _) => &[4],
    };
    let mut runs = Vec::new();
    let mut postgresql = serde_json::Value::Null;
    for &per_door in per_doors {
        let dir = tempfile::tempdir().expect("temp dir");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let sql = rt
            .block_on(Store::open_data_dir(dir.path()))
            .expect("SQLite");
        let r = run(&pki, &cards, sql.clone(), per_door, duration);
        rt.block_on(sql.close());
        report("SQLite", per_door, &r, full);
        runs.push(json_run("SQLite", per_door, &r));
    }
    match TempCluster::start(true) {
        Ok(cluster) => {
            for &per_door in per_doors {
                let rt = tokio::runtime::Runtime::new().expect("runtime");
                let sql = rt
                    .block_on(Store::connect(cluster.url()))
                    .expect("PostgreSQL");
                // Each run starts from an empty database.
                rt.block_on(sqlx::query("DROP SCHEMA public CASCADE").execute(sql.pool()))
                    .expect("drop schema");
                rt.block_on(sqlx::query("CREATE SCHEMA public").execute(sql.pool()))
                    .expect("create schema");
                rt.block_on(sql.close());
                let sql = rt
                    .block_on(Store::connect(cluster.url()))
                    .expect("PostgreSQL");
                let r = run(&pki, &cards, sql.clone(), per_door, duration);
                rt.block_on(sql.close());
                let version = cluster.version();
                let version = version
                    .rsplit(") ")
                    .next()
                    .and_then(|v| v.split_whitespace().next())
                    .unwrap_or(version);
                report(&format!("PG {version}"), per_door, &r, full);
                runs.push(json_run("PostgreSQL", per_door, &r));
                postgresql = serde_json::json!({ "version": version });
            }
        }
        Err(e) if !in_ci() => {
            println!("PostgreSQL: not measured ({e})");
            postgresql = serde_json::json!({ "not_measured": e.to_string() });
        }
        Err(e) => panic!("PostgreSQL is required in CI: {e}"),
    }
    if let Some(path) = json_path() {
        let value = serde_json::json!({
            "doors": DOORS,
            "goal_per_s": GOAL_PER_SEC,
            "calibration_pairs_per_s": pairs,
            "calibration_pairs_per_s_repeats": repeats::repeats(
                pair_stretches,
                format!("{} stretches of the calibration loop", repeats::BLOCKS),
            ),
            "postgresql": postgresql,
            "runs": runs,
        });
        std::fs::write(&path, serde_json::to_string_pretty(&value).expect("JSON"))
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}
