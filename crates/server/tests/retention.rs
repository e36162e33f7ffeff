//! Retention on SQLite while taps flow: events older than the period are
//! exported to one gzip JSON Lines file per UTC day, the manifest passes
//! `sha256sum -c`, every exported line is the stored event, only exported
//! events are deleted, and the taps during the run all committed. The same
//! run inside the service (`[retention]`), asked for through its handle or
//! due by its interval, is recorded as an event and in the metrics; an
//! event committed late with an old time joins its day's file.

mod common;

use std::io::Read;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use access::jiff::{SignedDuration, Timestamp};
use server::config::RetentionConfig;
use store::{Direction, Event, EventId, EventQuery, NewEvent, Store};

async fn all_events(store: &Store) -> Vec<Event> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .query_events(&EventQuery {
                cursor,
                direction: Direction::Forward,
                limit: EventQuery::MAX_LIMIT,
                ..EventQuery::default()
            })
            .await
            .unwrap();
        out.extend(page.events);
        match page.next {
            Some(n) => cursor = Some(n),
            None => return out,
        }
    }
}

/// `per_day` admin events on each of the `days` UTC days before `cutoff`.
fn old_events(cutoff: Timestamp, days: i64, per_day: i64) -> Vec<NewEvent> {
    let mut old = Vec::new();
    for day in 1..=days {
        for i in 0..per_day {
            let t = cutoff
                .checked_sub(SignedDuration::from_hours(24 * day))
                .unwrap()
                .checked_add(SignedDuration::from_secs(60 * i + 1))
                .unwrap();
            old.push(NewEvent::admin(
                t,
                "test",
                "test.old",
                format!("old event {day}/{i}"),
                serde_json::json!({"day": day, "i": i}),
            ));
        }
    }
    old
}

/// `sha256sum -c` of the manifest in `dir`: the files it checked.
fn check_manifest(dir: &std::path::Path) -> usize {
    let check = Command::new("sha256sum")
        .args(["-c", server::retention::MANIFEST])
        .current_dir(dir)
        .output()
        .expect("sha256sum (coreutils) runs");
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    String::from_utf8_lossy(&check.stdout).lines().count()
}

/// The events in an exported day file.
fn read_day(file: &std::path::Path) -> Vec<Event> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(file).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn retention(days: u32, interval_secs: Option<u64>) -> RetentionConfig {
    RetentionConfig {
        days,
        export_dir: None,
        at: None,
        interval_secs,
    }
}

/// The service's own run (asked for through its handle rather than waited
/// for at 03:00) while taps flow: exactly the old days exported and pruned,
/// the manifest verified, every tap committed and kept, the run recorded as
/// an `events.pruned` event and in the metrics.
#[test]
fn the_service_exports_and_prunes_the_old_days_while_taps_flow() {
    let site = common::site_with(&|c| c.retention = Some(retention(30, None)));
    let loaded = site.service().loaded();
    let handle = loaded.retention.clone().expect("[retention] is configured");
    assert_eq!(
        handle.export_dir(),
        site.config.data_dir.join("archive"),
        "the default export directory is in the data directory"
    );
    let now = Timestamp::now();
    let cutoff = server::retention::cutoff(now, 30).unwrap();
    let log = loaded.controller.log().clone();
    let store = loaded.store.clone();
    let mut events = old_events(cutoff, 3, 40);
    // Well after the cut even if the run starts on the next UTC day.
    events.push(NewEvent::admin(
        cutoff.checked_add(SignedDuration::from_hours(36)).unwrap(),
        "test",
        "test.kept",
        "after the cut".into(),
        serde_json::Value::Null,
    ));
    site.rt.block_on(log.append_all(events)).unwrap();
    let before = site.rt.block_on(all_events(&store));

    let controller = loaded.controller.clone();
    let image = site.card.card_image(Some(5)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let tapper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut ids: Vec<EventId> = Vec::new();
            while !stop.load(Ordering::SeqCst) || ids.len() < 5 {
                let mut t = host::InProcess::new(card::Card::new(image.clone()));
                let r = controller.tap(&mut t, common::FRONT, None, None).unwrap();
                assert!(r.granted(), "a tap was refused during retention");
                ids.push(*r.event.as_ref().expect("a tap's event committed"));
            }
            ids
        })
    };
    let report = site.rt.block_on(handle.run_now()).unwrap();
    stop.store(true, Ordering::SeqCst);
    let taps = tapper.join().unwrap();
    assert!(report.cutoff >= cutoff);
    assert_eq!((report.exported, report.deleted), (120, 120));
    assert_eq!(report.days.len(), 3);

    let dir = site.config.data_dir.join("archive");
    assert_eq!(check_manifest(&dir), 3);
    let expected: Vec<&Event> = before
        .iter()
        .filter(|e| e.event.code.as_deref() == Some("test.old"))
        .collect();
    let mut exported = Vec::new();
    for d in &report.days {
        exported.extend(read_day(&d.file));
    }
    // Oldest day first; each file in id order.
    exported.sort_by_key(|e| e.id);
    assert_eq!(exported.iter().collect::<Vec<_>>(), expected);

    let after = site.rt.block_on(all_events(&store));
    assert!(after
        .iter()
        .all(|e| e.event.code.as_deref() != Some("test.old")));
    for e in before
        .iter()
        .filter(|e| e.event.code.as_deref() != Some("test.old"))
    {
        assert!(after.contains(e), "{e:?} was deleted");
    }
    let ids: std::collections::HashSet<EventId> = after.iter().map(|e| e.id).collect();
    assert!(taps.len() >= 5);
    for id in &taps {
        assert!(ids.contains(id), "the tap event {id:?} is missing");
    }

    // Recorded: an event with what was done, and the metrics.
    let recorded: Vec<&Event> = after
        .iter()
        .filter(|e| e.event.code.as_deref() == Some("events.pruned"))
        .collect();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    let data = recorded[0].event.data.as_ref().unwrap();
    assert_eq!(data["deleted"], 120);
    assert_eq!(data["exported"], 120);
    assert_eq!(data["days"].as_array().unwrap().len(), 3);
    assert_eq!(recorded[0].event.kind, store::EventKind::Admin);
    let metrics = loaded.metrics.encode();
    assert!(
        metrics.contains("pivgate_retention_events_pruned_total 120\n"),
        "{metrics}"
    );
    assert!(metrics.contains("pivgate_retention_days_exported_total 3\n"));
    assert!(metrics.contains("pivgate_retention_last_run_success 1\n"));
    let last_run = metrics
        .lines()
        .find_map(|l| l.strip_prefix("pivgate_retention_last_run_timestamp_seconds "))
        .expect("the last run's time is exported");
    assert!(last_run.parse::<i64>().unwrap() >= now.as_second());

    // A second run has nothing to do and records nothing.
    let again = site.rt.block_on(handle.run_now()).unwrap();
    assert_eq!((again.exported, again.deleted), (0, 0));
    let recorded = site
        .rt
        .block_on(all_events(&store))
        .iter()
        .filter(|e| e.event.code.as_deref() == Some("events.pruned"))
        .count();
    assert_eq!(recorded, 1);
}

/// With `interval_secs`, runs come by themselves.
#[test]
fn an_interval_brings_runs_without_being_asked() {
    let site = common::site_with(&|c| c.retention = Some(retention(30, Some(1))));
    let loaded = site.service().loaded();
    let handle = loaded.retention.clone().unwrap();
    let cutoff = server::retention::cutoff(Timestamp::now(), 30).unwrap();
    let log = loaded.controller.log().clone();
    site.rt
        .block_on(log.append_all(old_events(cutoff, 2, 10)))
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while handle.status().events_deleted < 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "no run pruned the old events: {:?}",
            handle.status()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(handle.status().runs >= 1);
    assert_eq!(check_manifest(&site.config.data_dir.join("archive")), 2);
}

/// An event committed after its day was exported, with that day's time,
/// is added to the day's file on the next run; the lines already there
/// stay. A run told to stop after the first day leaves the others whole.
#[test]
fn a_late_event_joins_its_days_file_and_a_stopped_run_leaves_whole_days() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("archive");
    rt.block_on(async {
        let store = Store::open_data_dir(&dir.path().join("data"))
            .await
            .unwrap();
        let now = Timestamp::now();
        let cutoff = server::retention::cutoff(now, 10).unwrap();
        store
            .append_events(&old_events(cutoff, 3, 5))
            .await
            .unwrap();
        // Stopped after the oldest day.
        let asked = AtomicU64::new(0);
        let first = server::retention::export_and_prune_while(&store, None, &out, 10, now, || {
            asked.fetch_add(1, Ordering::SeqCst) == 0
        })
        .await
        .unwrap();
        assert_eq!((first.days.len(), first.exported, first.deleted), (1, 5, 5));
        let rest = all_events(&store).await;
        assert_eq!(rest.len(), 10, "the other days are untouched");
        assert_eq!(check_manifest(&out), 1);
        let full = server::retention::export_and_prune(&store, &out, 10, now)
            .await
            .unwrap();
        assert_eq!((full.days.len(), full.deleted), (2, 10));
        assert_eq!(check_manifest(&out), 3);

        // A late event on the middle day.
        let middle = &full.days[0];
        let mut before = read_day(&middle.file);
        let late = old_events(cutoff, 2, 1).pop().unwrap();
        let id = store
            .append_events(std::slice::from_ref(&late))
            .await
            .unwrap()[0];
        let again = server::retention::export_and_prune(&store, &out, 10, now)
            .await
            .unwrap();
        assert_eq!((again.days.len(), again.exported, again.deleted), (1, 1, 1));
        assert_eq!((again.days[0].events, again.days[0].carried), (6, 5));
        assert_eq!(again.days[0].file, middle.file);
        before.push(Event { id, event: late });
        assert_eq!(read_day(&middle.file), before);
        assert_eq!(check_manifest(&out), 3);
        assert!(all_events(&store).await.is_empty());
        store.close().await;
    });
}

#[test]
fn old_events_are_exported_per_day_with_a_manifest_then_pruned_while_taps_go_on() {
    let site = common::site();
    let now = Timestamp::now();
    let keep_days = 30;
    let cutoff = server::retention::cutoff(now, keep_days).unwrap();
    // Old events on three days before the cut, and one just after it.
    let log = site.service().loaded().controller.log().clone();
    let store = site.service().loaded().store.clone();
    let mut old = Vec::new();
    for day in 1..=3i64 {
        for i in 0..40i64 {
            let t = cutoff
                .checked_sub(SignedDuration::from_hours(24 * day))
                .unwrap()
                .checked_add(SignedDuration::from_secs(60 * i + 1))
                .unwrap();
            old.push(NewEvent::admin(
                t,
                "test",
                "test.old",
                format!("old event {day}/{i}"),
                serde_json::json!({"day": day, "i": i}),
            ));
        }
    }
    let kept_old = NewEvent::admin(
        cutoff.checked_add(SignedDuration::from_secs(1)).unwrap(),
        "test",
        "test.kept",
        "after the cut".into(),
        serde_json::Value::Null,
    );
    old.push(kept_old);
    site.rt.block_on(log.append_all(old)).unwrap();

    // Taps flow during the run.
    let controller = site.service().loaded().controller.clone();
    let image = site.card.card_image(Some(5)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let taps = Arc::new(AtomicU64::new(0));
    let tapper = {
        let (stop, taps) = (stop.clone(), taps.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) || taps.load(Ordering::SeqCst) < 5 {
                let mut t = host::InProcess::new(card::Card::new(image.clone()));
                let r = controller.tap(&mut t, common::FRONT, None, None).unwrap();
                assert!(r.event.is_ok(), "a tap's event failed during retention");
                taps.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let before = site.rt.block_on(all_events(&store));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("archive");
    let report = site
        .rt
        .block_on(server::retention::export_and_prune(
            &store, &out, keep_days, now,
        ))
        .unwrap();
    stop.store(true, Ordering::SeqCst);
    tapper.join().unwrap();
    assert_eq!(report.cutoff, cutoff);
    assert_eq!(report.exported, 120);
    assert_eq!(report.deleted, 120);
    assert_eq!(report.days.len(), 3);

    // The manifest, checked by coreutils.
    let check = Command::new("sha256sum")
        .args(["-c", server::retention::MANIFEST])
        .current_dir(&out)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&check.stdout).lines().count(), 3);

    // Each file holds its day's events, as stored.
    let expected: Vec<&Event> = before.iter().filter(|e| e.event.time < cutoff).collect();
    assert_eq!(expected.len(), 120);
    let mut exported = Vec::new();
    for d in &report.days {
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&d.file).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        let name = d.file.file_name().unwrap().to_string_lossy().into_owned();
        for line in text.lines() {
            let e: Event = serde_json::from_str(line).unwrap();
            let day = e
                .event
                .time
                .to_zoned(access::jiff::tz::TimeZone::UTC)
                .date()
                .to_string();
            assert_eq!(name, format!("events-{day}.jsonl.gz"));
            exported.push(e);
        }
        assert_eq!(text.lines().count() as u64, d.events);
    }
    // Oldest day first; each file in id order.
    exported.sort_by_key(|e| e.id);
    assert_eq!(exported.iter().collect::<Vec<_>>(), expected);

    // Gone from the database; everything after the cut is still there.
    let after = site.rt.block_on(all_events(&store));
    assert!(after.iter().all(|e| e.event.time >= cutoff));
    let kept: Vec<_> = before.iter().filter(|e| e.event.time >= cutoff).collect();
    for k in kept {
        assert!(after.contains(k), "{k:?} was deleted");
    }
    assert!(after
        .iter()
        .any(|e| e.event.code.as_deref() == Some("test.kept")));

    // A second run finds nothing more to do.
    let again = site
        .rt
        .block_on(server::retention::export_and_prune(
            &store, &out, keep_days, now,
        ))
        .unwrap();
    assert_eq!((again.exported, again.deleted), (0, 0));
}

/// Size on disk per million events, SQLite and PostgreSQL, and of their
/// gzip JSON Lines export: real tap events (a grant and a refusal, with
/// their stage tables) repeated. Prints the figures (BENCHMARKS.md):
/// `cargo test --release -p server --test retention bytes_per_million_events -- --ignored --nocapture`.
#[test]
#[ignore]
fn bytes_per_million_events() {
    const N: usize = 100_000;
    let site = common::site();
    site.tap();
    assert!(!site.tap_card(&site.stranger).granted());
    let store = site.service().loaded().store.clone();
    let templates: Vec<NewEvent> = site
        .rt
        .block_on(all_events(&store))
        .into_iter()
        .filter(|e| e.event.kind == store::EventKind::Tap)
        .map(|e| e.event)
        .collect();
    assert_eq!(templates.len(), 2);
    let start = Timestamp::now()
        .checked_sub(SignedDuration::from_hours(24 * 40))
        .unwrap();
    let events: Vec<NewEvent> = (0..N)
        .map(|i| {
            let mut e = templates[i % 2].clone();
            // Spread over about five days.
            e.time = start
                .checked_add(SignedDuration::from_secs(4 * i as i64))
                .unwrap();
            e
        })
        .collect();
    let per_million = |bytes: u64| bytes as f64 * 1e6 / N as f64;

    let dir = tempfile::tempdir().unwrap();
    let sqlite_dir = dir.path().join("sqlite");
    let (sqlite_bytes, export_bytes, files) = site.rt.block_on(async {
        let s = Store::open_data_dir(&sqlite_dir).await.unwrap();
        let size = |s: &Store| {
            let s = s.clone();
            let dir = sqlite_dir.clone();
            async move {
                sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                    .execute(s.pool())
                    .await
                    .unwrap();
                std::fs::read_dir(&dir)
                    .unwrap()
                    .map(|e| e.unwrap().metadata().unwrap().len())
                    .sum::<u64>()
            }
        };
        let empty = size(&s).await;
        for chunk in events.chunks(1000) {
            s.append_events(chunk).await.unwrap();
        }
        let full = size(&s).await;
        let r = server::retention::export_and_prune(
            &s,
            &dir.path().join("archive"),
            30,
            Timestamp::now(),
        )
        .await
        .unwrap();
        assert_eq!(r.exported as usize, N);
        s.close().await;
        (
            full - empty,
            r.days.iter().map(|d| d.bytes).sum::<u64>(),
            r.days.len(),
        )
    });
    println!(
        "SQLite: {:.0} bytes per million events ({:.1} MB), {N} events measured",
        per_million(sqlite_bytes),
        per_million(sqlite_bytes) / 1e6
    );
    println!(
        "gzip JSON Lines export: {:.0} bytes per million events ({:.1} MB) in {files} daily files",
        per_million(export_bytes),
        per_million(export_bytes) / 1e6
    );

    let Some(pg) = store::testing::postgres_or_skip("bytes_per_million_events") else {
        return;
    };
    let pg_bytes = site.rt.block_on(async {
        let s = Store::connect(pg.url()).await.unwrap();
        let size = |s: &Store| {
            let s = s.clone();
            async move {
                sqlx::query("VACUUM ANALYZE events")
                    .execute(s.pool())
                    .await
                    .unwrap();
                let n: i64 = sqlx::query_scalar("SELECT pg_total_relation_size('events')")
                    .fetch_one(s.pool())
                    .await
                    .unwrap();
                n as u64
            }
        };
        let empty = size(&s).await;
        for chunk in events.chunks(1000) {
            s.append_events(chunk).await.unwrap();
        }
        let full = size(&s).await;
        s.close().await;
        full - empty
    });
    println!(
        "PostgreSQL {}: {:.0} bytes per million events ({:.1} MB; table, indexes and TOAST)",
        pg.version(),
        per_million(pg_bytes),
        per_million(pg_bytes) / 1e6
    );
}

/// Nearest-rank percentile of sorted µs, in ms.
fn pct(sorted: &[u64], p: f64) -> f64 {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1000.0
}

/// How long taps wait while the service prunes: 200,000 old tap events
/// (real grants and refusals with their stage tables), then taps of the
/// enrolled card with no run, and taps while the service's own run exports
/// and prunes them all. Prints p50/p99/max of the whole tap and of its
/// `signal` stage (the durable commit of the event, then the lock), with
/// the run's time (BENCHMARKS.md):
/// `cargo test --release -p server --test retention tap_latency_during_a_prune -- --ignored --nocapture`.
#[test]
#[ignore]
fn tap_latency_during_a_prune() {
    const OLD: usize = 200_000;
    const QUIET_TAPS: usize = 1000;
    let site = common::site_with(&|c| c.retention = Some(retention(30, None)));
    site.tap();
    assert!(!site.tap_card(&site.stranger).granted());
    let loaded = site.service().loaded();
    let store = loaded.store.clone();
    let handle = loaded.retention.clone().unwrap();
    let templates: Vec<NewEvent> = site
        .rt
        .block_on(all_events(&store))
        .into_iter()
        .filter(|e| e.event.kind == store::EventKind::Tap)
        .map(|e| e.event)
        .collect();
    assert_eq!(templates.len(), 2);
    let cutoff = server::retention::cutoff(Timestamp::now(), 30).unwrap();
    let start = cutoff
        .checked_sub(SignedDuration::from_hours(24 * 10))
        .unwrap();
    let old: Vec<NewEvent> = (0..OLD)
        .map(|i| {
            let mut e = templates[i % 2].clone();
            // Spread over ten days before the cut.
            e.time = start
                .checked_add(SignedDuration::from_secs(4 * i as i64))
                .unwrap();
            e
        })
        .collect();
    site.rt.block_on(async {
        for chunk in old.chunks(1000) {
            store.append_events(chunk).await.unwrap();
        }
        // The inserts' WAL folded in: the taps measured do not pay for it.
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(store.pool())
            .await
            .unwrap();
    });
    let controller = loaded.controller.clone();
    let image = site.card.card_image(Some(5)).unwrap();
    let tap = move || {
        let mut t = host::InProcess::new(card::Card::new(image.clone()));
        let began = std::time::Instant::now();
        let r = controller.tap(&mut t, common::FRONT, None, None).unwrap();
        let wall = began.elapsed().as_micros() as u64;
        assert!(r.granted() && r.event.is_ok());
        let signal = r
            .transaction
            .stage(auth::StageName::Signal)
            .map_or(0, |s| s.wall_us);
        (wall, signal)
    };
    for _ in 0..20 {
        tap();
    }
    let summary = |name: &str, mut v: Vec<(u64, u64)>| {
        let mut walls: Vec<u64> = v.iter().map(|x| x.0).collect();
        v.sort_by_key(|x| x.1);
        let signals: Vec<u64> = v.iter().map(|x| x.1).collect();
        walls.sort();
        println!(
            "{name}: {} taps; tap p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; signal (commit + lock) p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            walls.len(),
            pct(&walls, 0.5),
            pct(&walls, 0.99),
            pct(&walls, 1.0),
            pct(&signals, 0.5),
            pct(&signals, 0.99),
            pct(&signals, 1.0),
        );
    };
    let quiet: Vec<(u64, u64)> = (0..QUIET_TAPS).map(|_| tap()).collect();
    summary("no run", quiet);

    let began = std::time::Instant::now();
    let run = {
        let handle = handle.clone();
        site.rt.spawn(async move { handle.run_now().await })
    };
    let mut during = Vec::new();
    while !run.is_finished() {
        during.push(tap());
    }
    let report = site.rt.block_on(run).unwrap().unwrap();
    let took = began.elapsed();
    assert_eq!(report.deleted as usize, OLD);
    summary("during the run", during);
    println!(
        "the run: {} events in {} daily files exported and deleted in {:.1} s",
        report.deleted,
        report.days.len(),
        took.as_secs_f64()
    );
}
