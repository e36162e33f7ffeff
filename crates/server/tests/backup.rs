//! `pivgate backup` / `pivgate restore` on SQLite: a backup taken while
//! taps flow restores to a prefix of the live event log, every event
//! whole; restoring over a database in use is refused; PostgreSQL is
//! refused with the pg_dump recipe.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use store::backup::BackupError;
use store::{Direction, Event, EventQuery, Store};

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
fn a_backup_under_load_restores_to_a_prefix_of_the_live_log() {
    let mut site = common::site();
    let config = site.config.clone();
    let controller = site.service().loaded().controller.clone();
    let image = site.card.card_image(Some(5)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let taps = Arc::new(AtomicU64::new(0));
    let tapper = {
        let (stop, taps) = (stop.clone(), taps.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let mut t = host::InProcess::new(card::Card::new(image.clone()));
                let r = controller.tap(&mut t, common::FRONT, None, None).unwrap();
                assert!(r.event.is_ok());
                taps.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let wait_for = |n: u64| {
        while taps.load(Ordering::SeqCst) < n {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    wait_for(20);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pivgate.backup.db");
    let before = taps.load(Ordering::SeqCst);
    let summary = site
        .rt
        .block_on(server::backup::backup(&config, &file))
        .unwrap();
    let after = taps.load(Ordering::SeqCst);
    // Taps go on after the backup.
    wait_for(after + 20);

    // Not over the database the running service has open.
    let e = site
        .rt
        .block_on(server::backup::restore(&config, &file))
        .unwrap_err();
    assert!(matches!(e, BackupError::InUse(_)), "{e}");
    // Not to an existing file.
    let e = site
        .rt
        .block_on(server::backup::backup(&config, &file))
        .unwrap_err();
    assert_eq!(e.code(), "backup.exists");

    stop.store(true, Ordering::SeqCst);
    tapper.join().unwrap();
    let service = site.service.take().unwrap();
    site.rt.block_on(service.shutdown()).unwrap();

    // Restored into a fresh data directory.
    let mut restored_config = config.clone();
    restored_config.data_dir = dir.path().join("restored");
    let restored_summary = site
        .rt
        .block_on(server::backup::restore(&restored_config, &file))
        .unwrap();
    assert_eq!(restored_summary.events, summary.events);

    let (live, restored) = site.rt.block_on(async {
        let live = Store::open_data_dir(&config.data_dir).await.unwrap();
        let restored = Store::open_data_dir(&restored_config.data_dir)
            .await
            .unwrap();
        let out = (all_events(&live).await, all_events(&restored).await);
        live.close().await;
        restored.close().await;
        out
    });
    let taps_in = |events: &[Event]| {
        events
            .iter()
            .filter(|e| e.event.kind == store::EventKind::Tap)
            .count() as u64
    };
    assert_eq!(restored.len() as i64, summary.events);
    assert_eq!(restored.last().map_or(0, |e| e.id.0), summary.last_event);
    // Every tap committed before the backup began is in it, none begun
    // after it ended; the rest of the live log follows.
    assert!(
        taps_in(&restored) >= before,
        "{} < {before}",
        taps_in(&restored)
    );
    assert!(
        taps_in(&restored) <= after,
        "{} > {after}",
        taps_in(&restored)
    );
    assert!(live.len() > restored.len());
    assert_eq!(
        &live[..restored.len()],
        &restored[..],
        "the restored log is not a prefix of the live one"
    );
}

#[test]
fn postgresql_is_refused_with_the_pg_dump_recipe() {
    let mut c = server::config::Config::defaults();
    c.database_url = Some("postgres://pivgate@localhost/pivgate".into());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let e = rt
        .block_on(server::backup::backup(&c, &dir.path().join("b.db")))
        .unwrap_err();
    assert_eq!(e.code(), "backup.postgres");
    assert!(e.to_string().contains("pg_dump --format=custom"), "{e}");
    let e = rt
        .block_on(server::backup::restore(&c, &dir.path().join("b.db")))
        .unwrap_err();
    assert_eq!(e.code(), "backup.postgres");
}
