//! Retention on SQLite while taps flow: events older than the period are
//! exported to one gzip JSON Lines file per UTC day, the manifest passes
//! `sha256sum -c`, every exported line is the stored event, only exported
//! events are deleted, and the taps during the run all committed.

mod common;

use std::io::Read;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use access::jiff::{SignedDuration, Timestamp};
use store::{Direction, Event, EventQuery, NewEvent, Store};

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

    // Each file holds its day's events, as stored, in id order.
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
