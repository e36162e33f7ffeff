//! Upgrades from a database written by an earlier release, and downgrades
//! refused, on SQLite and PostgreSQL.
//!
//! `fixtures/pivgate-schema3.db` was written by pivgate 0.1.0 (schema
//! version 3) through `make_fixture` below: the test site, one granted
//! tap of Alice's card, one refused tap of a stranger's, the viewer and
//! operator tokens. `fixtures/pivgate-schema3.pg.sql` is the same database
//! on PostgreSQL at schema 3, a plain-SQL `pg_dump` written by
//! `make_pg_fixture` (how, in `fixtures/README.md`); each test restores it
//! with `psql` into a fresh cluster. Both are checked in and never
//! regenerated: a later release must open them, migrate them and keep every
//! entity and event. A database from a newer release is refused with a
//! clear message and left as it was.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use store::testing::TempCluster;
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
        check_upgraded(&s).await;
        s.close().await;
    });
}

/// What the fixture holds, read through today's code.
async fn check_upgraded(s: &Store) {
    {
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
    }
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

fn pg_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pivgate-schema3.pg.sql")
}

/// The tables of schema 3, parents first.
const TABLES: [&str; 13] = [
    "id_sequences",
    "sites",
    "doors",
    "readers",
    "cardholders",
    "credentials",
    "schedules",
    "access_groups",
    "access_group_doors",
    "access_group_members",
    "holidays",
    "api_tokens",
    "events",
];

/// A PostgreSQL client program of the cluster's release.
fn pg_tool(program: &str) -> Command {
    let bin = store::testing::find_binaries().expect("PostgreSQL's binaries (scripts/setup.sh)");
    Command::new(bin.join(program))
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The PostgreSQL fixture restored into `pg`'s (empty) database.
fn restore_pg_fixture(pg: &TempCluster) {
    run(pg_tool("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", pg.url(), "-f"])
        .arg(pg_fixture()));
}

/// The schema history, and every row of schema 3's tables as text (sorted)
/// with the columns read, from PostgreSQL without migrating: all columns,
/// or those of `columns` (those read before an upgrade, so that the columns
/// later schemas add do not count).
async fn pg_contents(url: &str, columns: Option<&[Vec<String>]>) -> PgContents {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .unwrap();
    let versions = sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
        .fetch_all(&pool)
        .await
        .unwrap();
    let mut rows = Vec::new();
    let mut read = Vec::new();
    for (i, t) in TABLES.iter().enumerate() {
        let all: Vec<String> = sqlx::query_scalar(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_name = $1 ORDER BY ordinal_position",
        )
        .bind(t)
        .fetch_all(&pool)
        .await
        .unwrap();
        let cols = match columns {
            Some(c) => c[i].clone(),
            None => all,
        };
        let list = cols
            .iter()
            .map(|c| format!("COALESCE({c}::text, 'NULL')"))
            .collect::<Vec<_>>()
            .join(" || '|' || ");
        let sql = format!("SELECT '{t}|' || {list} FROM {t} ORDER BY 1");
        let r: Vec<String> = sqlx::query_scalar(&sql).fetch_all(&pool).await.unwrap();
        rows.push(r);
        read.push(cols);
    }
    pool.close().await;
    PgContents {
        versions,
        rows,
        columns: read,
    }
}

#[derive(Debug, PartialEq)]
struct PgContents {
    versions: Vec<i64>,
    rows: Vec<Vec<String>>,
    columns: Vec<Vec<String>>,
}

/// The same rows read from the SQLite fixture.
async fn sqlite_contents(db: &Path) -> Vec<Vec<String>> {
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect(&format!("sqlite://{}?mode=ro", db.display()))
        .await
        .unwrap();
    let mut rows = Vec::new();
    for t in TABLES {
        let cols: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT name FROM pragma_table_info('{t}') ORDER BY cid"
        ))
        .fetch_all(&pool)
        .await
        .unwrap();
        let list = cols
            .iter()
            .map(|c| format!("COALESCE(CAST({c} AS TEXT), 'NULL')"))
            .collect::<Vec<_>>()
            .join(" || '|' || ");
        let sql = format!("SELECT '{t}|' || {list} FROM {t}");
        let mut r: Vec<String> = sqlx::query_scalar(&sql).fetch_all(&pool).await.unwrap();
        // PostgreSQL's collation order of the same strings (C: bytes).
        r.sort();
        rows.push(r);
    }
    pool.close().await;
    rows
}

#[test]
fn a_postgresql_database_from_schema_3_opens_migrated_with_everything_kept() {
    let Some(pg) = store::testing::postgres_or_skip("upgrade from schema 3 on PostgreSQL") else {
        return;
    };
    restore_pg_fixture(&pg);
    rt().block_on(async {
        let PgContents {
            versions,
            rows: before,
            columns,
        } = pg_contents(pg.url(), None).await;
        assert_eq!(versions, [1, 2, 3]);
        // The same entities and events as the SQLite fixture.
        assert_eq!(before, sqlite_contents(&fixture()).await);
        assert_eq!(
            before[TABLES.len() - 1].len(),
            5,
            "events: {:?}",
            before.last()
        );

        let s = Store::connect(pg.url()).await.unwrap();
        check_upgraded(&s).await;
        // New ids continue after the release's.
        let id = s
            .append_events(&[store::NewEvent::admin(
                access::jiff::Timestamp::now(),
                "test",
                "test.after-upgrade",
                "written by this release".into(),
                serde_json::Value::Null,
            )])
            .await
            .unwrap()[0];
        s.close().await;

        let PgContents {
            versions,
            rows: after,
            ..
        } = pg_contents(pg.url(), Some(&columns)).await;
        assert_eq!(*versions.last().unwrap(), Store::schema_version());
        for (i, t) in TABLES.iter().enumerate() {
            match *t {
                "id_sequences" => {}
                "events" => {
                    assert_eq!(after[i][..before[i].len()], before[i][..]);
                    assert_eq!(after[i].len(), before[i].len() + 1);
                }
                _ => assert_eq!(after[i], before[i], "{t} changed in the upgrade"),
            }
        }
        let max_old: i64 = before[TABLES.len() - 1]
            .iter()
            .map(|r| r.split('|').nth(1).unwrap().parse::<i64>().unwrap())
            .max()
            .unwrap();
        assert!(id.0 > max_old, "{id:?} after {max_old}");
    });
}

#[test]
fn a_postgresql_database_from_a_newer_release_is_refused_and_left_alone() {
    let Some(pg) = store::testing::postgres_or_skip("downgrade refused on PostgreSQL") else {
        return;
    };
    restore_pg_fixture(&pg);
    rt().block_on(async {
        // What a later release's migration leaves behind.
        let s = Store::connect(pg.url()).await.unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES (9999, 'from the future', TRUE, decode('00', 'hex'), 0)",
        )
        .execute(s.pool())
        .await
        .unwrap();
        s.close().await;
    });
    let before = rt().block_on(pg_contents(pg.url(), None));
    let e = rt().block_on(Store::connect(pg.url())).unwrap_err();
    assert!(
        matches!(e, StoreError::NewerSchema { found: 9999, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("written by a newer pivgate"), "{e}");
    assert_eq!(
        rt().block_on(pg_contents(pg.url(), None)),
        before,
        "a refused database was changed"
    );
    // The service names it at start-up too.
    let dir = tempfile::tempdir().unwrap();
    let mut c = server::config::Config::defaults();
    c.data_dir = dir.path().join("data");
    c.database_url = Some(pg.url().to_string());
    c.http.listen = "127.0.0.1:0".parse().unwrap();
    let e = rt()
        .block_on(server::service::Service::start(c, None))
        .unwrap_err();
    assert!(e.to_string().contains("written by a newer pivgate"), "{e}");
    assert_eq!(rt().block_on(pg_contents(pg.url(), None)), before);
}

/// Writes the PostgreSQL fixture (see `fixtures/README.md`): a database
/// migrated to schema 3 with the release's migrations, holding the SQLite
/// fixture's rows, dumped as plain SQL:
/// `cargo test -p server --test upgrade make_pg_fixture -- --ignored`.
#[test]
#[ignore]
fn make_pg_fixture() {
    let pg = TempCluster::start(false).unwrap();
    rt().block_on(async {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(pg.url())
            .await
            .unwrap();
        let lite = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect(&format!("sqlite://{}?mode=ro", fixture().display()))
            .await
            .unwrap();
        // Schema 3: migrations 1 to 3, checked to be the ones the release
        // applied (their checksums in the SQLite fixture).
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../store/migrations");
        let mut m = sqlx::migrate::Migrator::new(dir).await.unwrap();
        let release: Vec<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT version, checksum FROM _sqlx_migrations ORDER BY version")
                .fetch_all(&lite)
                .await
                .unwrap();
        let upto3: Vec<_> = m
            .migrations
            .iter()
            .filter(|x| x.version <= 3)
            .cloned()
            .collect();
        assert_eq!(
            upto3
                .iter()
                .map(|x| (x.version, x.checksum.to_vec()))
                .collect::<Vec<_>>(),
            release,
            "migrations 1 to 3 differ from the release's"
        );
        m.migrations = upto3.into();
        m.run(&pool).await.unwrap();
        // The release's rows, column by column (schema 3 has only BIGINT
        // and TEXT columns).
        sqlx::query("DELETE FROM id_sequences")
            .execute(&pool)
            .await
            .unwrap();
        for t in TABLES {
            let cols: Vec<(String, String)> = sqlx::query_as(
                "SELECT column_name::text, data_type::text FROM information_schema.columns \
                 WHERE table_name = $1 ORDER BY ordinal_position",
            )
            .bind(t)
            .fetch_all(&pool)
            .await
            .unwrap();
            let names: Vec<&str> = cols.iter().map(|(c, _)| c.as_str()).collect();
            let select = format!("SELECT {} FROM {t}", names.join(", "));
            let insert = format!(
                "INSERT INTO {t} ({}) VALUES ({})",
                names.join(", "),
                (1..=names.len())
                    .map(|i| format!("${i}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            for row in sqlx::query(&select).fetch_all(&lite).await.unwrap() {
                use sqlx::Row;
                let mut q = sqlx::query(&insert);
                for (i, (c, ty)) in cols.iter().enumerate() {
                    q = match ty.as_str() {
                        "bigint" => q.bind(row.try_get::<Option<i64>, _>(i).unwrap()),
                        "text" => q.bind(row.try_get::<Option<String>, _>(i).unwrap()),
                        other => panic!("{t}.{c}: a {other} column in schema 3"),
                    };
                }
                q.execute(&pool).await.unwrap();
            }
        }
        pool.close().await;
        lite.close().await;
    });
    run(pg_tool("pg_dump")
        .args(["--no-owner", "--no-privileges", "--file"])
        .arg(pg_fixture())
        .args(["--dbname", pg.url()]));
}

/// The last release's SQLite database (schema 7; see `fixtures/README.md`).
fn release_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pivgate-schema7.db")
}

/// The same release's PostgreSQL database, as a plain-SQL `pg_dump`.
fn release_pg_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pivgate-schema7.pg.sql")
}

/// What the last release's fixtures hold beyond the test site: an admin
/// token and a keypad token bound to the front door's reader with an
/// expiry (schema 5), the server room held unlocked by the weekday schedule
/// after a first card (schema 6, entity versions of schema 4 raised), the
/// front door an anti-passback entry, a granted tap (schema 7's
/// `last_grants`), a lockdown and a tap it refused, the lockdown lifted, a
/// tap refused by anti-passback (Alice is inside), a stranger's refused tap
/// and a momentary unlock.
fn release_scenario(site: &common::Site) {
    use access::jiff::{SignedDuration, Timestamp};
    let loaded = site.service().loaded();
    let admin = site
        .rt
        .block_on(server::token::create(
            &loaded.store,
            "root",
            store::Role::Admin,
        ))
        .unwrap();
    site.rt
        .block_on(server::token::issue(
            &loaded.access,
            "root",
            server::token::NewToken {
                name: "keypad-front".into(),
                role: store::Role::Keypad,
                doors: vec![access::DoorId(1)],
                reader: Some(common::FRONT),
                expires_at: Some(Timestamp::now() + SignedDuration::from_hours(24 * 3650)),
            },
        ))
        .unwrap();
    let auth = format!("Bearer {admin}");
    let schedules: serde_json::Value = serde_json::from_reader(
        ureq::get(&site.url("/api/v1/schedules"))
            .set("Authorization", &auth)
            .call()
            .unwrap()
            .into_reader(),
    )
    .unwrap();
    let weekdays = schedules
        .as_array()
        .or_else(|| schedules["items"].as_array())
        .expect("a list of schedules")
        .iter()
        .find(|s| s["name"] == "weekdays 07-19")
        .expect("the weekday schedule")["id"]
        .clone();
    let send = |method: &str, path: &str, body: serde_json::Value| {
        ureq::request(method, &site.url(path))
            .set("Authorization", &auth)
            .set("Content-Type", "application/json")
            .send_string(&body.to_string())
            .unwrap();
    };
    send(
        "PATCH",
        "/api/v1/doors/2",
        serde_json::json!({"unlock_schedule": weekdays, "first_card_unlock": true}),
    );
    send(
        "PATCH",
        "/api/v1/doors/1",
        serde_json::json!({"passback": "in"}),
    );
    site.tap();
    send(
        "POST",
        "/api/v1/sites/1/lockdown",
        serde_json::json!({"reason": "drill"}),
    );
    assert!(!site.tap_card(&site.card).granted());
    send(
        "DELETE",
        "/api/v1/sites/1/lockdown",
        serde_json::json!({"reason": "drill over"}),
    );
    assert!(!site.tap_card(&site.card).granted());
    assert!(!site.tap_card(&site.stranger).granted());
    site.unlock();
}

/// Writes the last release's fixtures (run once, by that release: see
/// `fixtures/README.md`): the test site and [`release_scenario`] on SQLite,
/// copied with `VACUUM INTO`, and the same on PostgreSQL, dumped as plain
/// SQL: `cargo test -p server --test upgrade make_release_fixtures -- --ignored`.
#[test]
#[ignore]
fn make_release_fixtures() {
    let mut site = common::site();
    release_scenario(&site);
    let data = site.config.data_dir.clone();
    let service = site.service.take().unwrap();
    site.rt.block_on(service.shutdown()).unwrap();
    let out = release_fixture();
    let _ = std::fs::remove_file(&out);
    site.rt.block_on(async {
        let s = Store::open_data_dir(&data).await.unwrap();
        s.backup_to(&out).await.unwrap();
        s.close().await;
    });
    drop(site);

    let pg = TempCluster::start(false).unwrap();
    let url = pg.url().to_string();
    let mut site = common::site_with(&|c| c.database_url = Some(url.clone()));
    release_scenario(&site);
    let service = site.service.take().unwrap();
    site.rt.block_on(service.shutdown()).unwrap();
    drop(site);
    run(pg_tool("pg_dump")
        .args(["--no-owner", "--no-privileges", "--file"])
        .arg(release_pg_fixture())
        .args(["--dbname", pg.url()]));
}

/// The tables of schema 7 (the last release's), parents first.
const RELEASE_TABLES: [&str; 14] = [
    "id_sequences",
    "sites",
    "doors",
    "readers",
    "cardholders",
    "credentials",
    "schedules",
    "access_groups",
    "access_group_doors",
    "access_group_members",
    "holidays",
    "api_tokens",
    "events",
    "last_grants",
];

/// Every row of the last release's tables as text, sorted (bytewise), with
/// the columns read: all of them, or those of `columns` (the release's,
/// so that the columns later schemas add do not count). `pool` is SQLite
/// or PostgreSQL; `columns_of` lists a table's columns in order.
async fn release_rows(
    pool: &sqlx::AnyPool,
    columns_of: &str,
    columns: Option<&[Vec<String>]>,
) -> (Vec<i64>, Vec<Vec<String>>, Vec<Vec<String>>) {
    let versions = sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY version")
        .fetch_all(pool)
        .await
        .unwrap();
    let (mut rows, mut read) = (Vec::new(), Vec::new());
    for (i, t) in RELEASE_TABLES.iter().enumerate() {
        let cols: Vec<String> = match columns {
            Some(c) => c[i].clone(),
            None => sqlx::query_scalar(&columns_of.replace("$TABLE", t))
                .fetch_all(pool)
                .await
                .unwrap(),
        };
        let list = cols
            .iter()
            .map(|c| format!("COALESCE(CAST({c} AS TEXT), 'NULL')"))
            .collect::<Vec<_>>()
            .join(" || '|' || ");
        let mut r: Vec<String> = sqlx::query_scalar(&format!("SELECT {list} FROM {t}"))
            .fetch_all(pool)
            .await
            .unwrap();
        r.sort();
        rows.push(r);
        read.push(cols);
    }
    (versions, rows, read)
}

const SQLITE_COLUMNS: &str = "SELECT name FROM pragma_table_info('$TABLE') ORDER BY cid";
const PG_COLUMNS: &str = "SELECT column_name::text FROM information_schema.columns \
     WHERE table_name = '$TABLE' ORDER BY ordinal_position";

async fn any_pool(url: &str) -> sqlx::AnyPool {
    sqlx::any::install_default_drivers();
    sqlx::any::AnyPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .unwrap()
}

/// The last release's database at `url` (`columns_of` its engine's column
/// list) migrated by today's code: every row of every table it had is
/// kept, and today's code reads what the release wrote.
async fn check_release_upgrade(url: &str, columns_of: &str) {
    let pool = any_pool(url).await;
    let (versions, before, columns) = release_rows(&pool, columns_of, None).await;
    pool.close().await;
    assert_eq!(versions, [1, 2, 3, 4, 5, 6, 7], "the release's schema");
    assert_eq!(before[12].len(), 13, "the release's events");
    assert_eq!(before[13].len(), 1, "the release's anti-passback state");

    let s = Store::connect(url).await.unwrap();
    let snap = s.load_snapshot().await.unwrap();
    let e = s.load_entities().await.unwrap();
    assert_eq!(e.doors.len(), 2);
    let room = e.doors.iter().find(|d| d.name == "Server room").unwrap();
    assert!(room.unlock_schedule.is_some() && room.first_card_unlock);
    // Doors the release wrote decide as they did: no offline limit.
    assert!(e.doors.iter().all(|d| d.max_staleness_s.is_none()));
    assert!(!e.sites[0].lockdown);
    assert_eq!(snap.credentials().len(), 1);
    let mut tokens: Vec<_> = s.list_tokens().await.unwrap();
    tokens.sort_by(|a, b| a.name.cmp(&b.name));
    let names: Vec<_> = tokens.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["keypad-front", "ops", "root", "watcher"]);
    assert_eq!(tokens[0].doors, [access::DoorId(1)]);
    assert!(tokens[0].reader.is_some() && tokens[0].expires_at.is_some());
    let page = s
        .query_events(&EventQuery {
            direction: Direction::Forward,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    let taps: Vec<_> = page
        .events
        .iter()
        .filter(|e| e.event.kind == store::EventKind::Tap)
        .map(|e| e.event.code.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        taps,
        ["granted", "site-lockdown", "anti-passback", "not-enrolled"]
    );
    // Alice's granted tap is the anti-passback state, as before: she is
    // inside.
    let doors: Vec<_> = snap.doors().map(|d| d.id).collect();
    let last = s.last_granted_taps(&doors).await.unwrap();
    let granted = page
        .events
        .iter()
        .find(|e| e.event.code.as_deref() == Some("granted"))
        .unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].event, granted.id);
    // A new event continues after the release's ids.
    let id = s
        .append_events(&[store::NewEvent::admin(
            access::jiff::Timestamp::now(),
            "test",
            "test.after-upgrade",
            "written by this release".into(),
            serde_json::Value::Null,
        )])
        .await
        .unwrap()[0];
    assert!(id.0 > 13, "{id:?}");
    s.close().await;

    let pool = any_pool(url).await;
    let (versions, after, _) = release_rows(&pool, columns_of, Some(&columns)).await;
    pool.close().await;
    assert_eq!(*versions.last().unwrap(), Store::schema_version());
    for (i, t) in RELEASE_TABLES.iter().enumerate() {
        match *t {
            // Counters go on; later schemas add their own.
            "id_sequences" => {}
            "events" => {
                let kept: Vec<_> = after[i]
                    .iter()
                    .filter(|r| !r.contains("test.after-upgrade"))
                    .cloned()
                    .collect();
                assert_eq!(kept, before[i], "events changed in the upgrade");
                assert_eq!(after[i].len(), before[i].len() + 1);
            }
            _ => assert_eq!(after[i], before[i], "{t} changed in the upgrade"),
        }
    }
}

#[test]
fn a_sqlite_database_from_the_last_release_opens_migrated_with_everything_kept() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let db = data.join("pivgate.db");
    std::fs::copy(release_fixture(), &db).unwrap();
    rt().block_on(check_release_upgrade(
        &format!("sqlite://{}", db.display()),
        SQLITE_COLUMNS,
    ));
    // And through the data directory, as `pivgate serve` opens it.
    rt().block_on(async {
        let s = Store::open_data_dir(&data).await.unwrap();
        assert_eq!(s.load_entities().await.unwrap().doors.len(), 2);
        s.close().await;
    });
}

#[test]
fn a_postgresql_database_from_the_last_release_opens_migrated_with_everything_kept() {
    let Some(pg) = store::testing::postgres_or_skip("upgrade from the last release on PostgreSQL")
    else {
        return;
    };
    run(pg_tool("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", pg.url(), "-f"])
        .arg(release_pg_fixture()));
    rt().block_on(check_release_upgrade(pg.url(), PG_COLUMNS));
}
