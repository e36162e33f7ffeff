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
