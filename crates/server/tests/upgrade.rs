//! Upgrades from a database written by an earlier release, and downgrades
//! refused.
//!
//! `fixtures/pivgate-schema3.db` was written by pivgate 0.1.0 (schema
//! version 3) through `make_fixture` below: the test site, one granted
//! tap of Alice's card, one refused tap of a stranger's, the viewer and
//! operator tokens. It is checked in and never regenerated: a later release
//! must open it, migrate it and keep every entity and event. A database
//! from a newer release is refused with a clear message and left as it was.

mod common;

use std::path::{Path, PathBuf};

use store::{Direction, EventQuery, Store, StoreError};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pivgate-schema3.db")
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The fixture copied into a fresh data directory.
fn copy_of_fixture(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::copy(fixture(), data.join("pivgate.db")).unwrap();
    data
}

/// The schema history and the event log of the SQLite file `db`, read
/// without migrating it.
async fn contents(db: &Path) -> (Vec<i64>, Vec<(i64, i64)>) {
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect(&format!("sqlite://{}?mode=ro", db.display()))
        .await
        .unwrap();
    let versions = sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
        .fetch_all(&pool)
        .await
        .unwrap();
    let events = sqlx::query_as("SELECT id, time_us FROM events ORDER BY id")
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;
    (versions, events)
}

#[test]
fn a_database_from_schema_3_opens_migrated_with_everything_kept() {
    let dir = tempfile::tempdir().unwrap();
    let data = copy_of_fixture(dir.path());
    rt().block_on(async {
        let s = Store::open_data_dir(&data).await.unwrap();
        let version: i64 = sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
            .fetch_one(s.pool())
            .await
            .unwrap();
        assert_eq!(version, Store::schema_version());
        let snap = s.load_snapshot().await.unwrap();
        assert_eq!(snap.doors().len(), 2);
        assert_eq!(snap.credentials().len(), 1);
        let names: Vec<_> = snap.cardholders().iter().map(|c| c.name.clone()).collect();
        assert_eq!(names, ["Alice"]);
        let tokens: Vec<_> = s
            .list_tokens()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(tokens, ["ops", "watcher"]);
        let page = s
            .query_events(&EventQuery {
                direction: Direction::Forward,
                ..EventQuery::default()
            })
            .await
            .unwrap();
        let codes: Vec<_> = page
            .events
            .iter()
            .filter(|e| e.event.kind == store::EventKind::Tap)
            .map(|e| e.event.code.clone().unwrap_or_default())
            .collect();
        assert_eq!(codes.len(), 2, "{codes:?}");
        assert_eq!(codes[0], "granted");
        assert_ne!(codes[1], "granted");
        // The anti-passback state's table was filled from the log: Alice's
        // granted tap, not the stranger's refusal.
        let granted = page
            .events
            .iter()
            .find(|e| e.event.code.as_deref() == Some("granted"))
            .unwrap();
        let doors: Vec<_> = snap.doors().map(|d| d.id).collect();
        let last = s.last_granted_taps(&doors).await.unwrap();
        assert_eq!(
            last,
            [store::LastGrant {
                cardholder: granted.event.cardholder.unwrap(),
                door: granted.event.door.unwrap(),
                event: granted.id,
            }]
        );
        // And the doors' latest taps are read as before.
        let mut latest: Vec<_> = s
            .last_taps(&doors)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.id)
            .collect();
        latest.sort();
        assert!(!latest.is_empty());
        s.close().await;
    });
}

#[test]
fn a_database_from_a_newer_release_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let data = copy_of_fixture(dir.path());
    let db = data.join("pivgate.db");
    rt().block_on(async {
        // What a later release's migration leaves behind.
        let s = Store::open_data_dir(&data).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, installed_on, success, checksum, execution_time) \
             VALUES (9999, 'from the future', CURRENT_TIMESTAMP, TRUE, x'00', 0)",
        )
        .execute(s.pool())
        .await
        .unwrap();
        s.close().await;
    });
    let before = rt().block_on(contents(&db));
    let e = rt().block_on(Store::open_data_dir(&data)).unwrap_err();
    assert!(
        matches!(e, StoreError::NewerSchema { found: 9999, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("written by a newer pivgate"), "{e}");
    assert_eq!(
        rt().block_on(contents(&db)),
        before,
        "a refused database was changed"
    );
    // The service names it at start-up too.
    let mut c = server::config::Config::defaults();
    c.data_dir = data.clone();
    c.http.listen = "127.0.0.1:0".parse().unwrap();
    let e = rt()
        .block_on(server::service::Service::start(c, None))
        .unwrap_err();
    assert!(e.to_string().contains("written by a newer pivgate"), "{e}");
}

/// Writes the fixture (run once, by the release whose schema it records):
/// `cargo test -p server --test upgrade make_fixture -- --ignored`.
#[test]
#[ignore]
fn make_fixture() {
    let mut site = common::site();
    site.tap();
    assert!(!site.tap_card(&site.stranger).granted());
    let data = site.config.data_dir.clone();
    let service = site.service.take().unwrap();
    site.rt.block_on(service.shutdown()).unwrap();
    // A copy through VACUUM INTO: one file, WAL folded in.
    let out = fixture();
    let _ = std::fs::remove_file(&out);
    site.rt.block_on(async {
        let s = Store::open_data_dir(&data).await.unwrap();
        s.backup_to(&out).await.unwrap();
        s.close().await;
    });
}
