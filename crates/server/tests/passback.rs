//! Anti-passback survives a restart: the state of who is inside is rebuilt
//! from the durable event log when the service starts, on SQLite and on
//! PostgreSQL.

use access::jiff::Timestamp;
use access::ReaderId;
use auth::PinSource;
use card::Card;
use host::InProcess;
use pki_issue::{CardCredentials, CardOptions, TestPki, TestPkiOptions};
use server::config::Config;
use server::door::TapResult;
use server::service::Service;
use store::testing::{postgres_or_skip, TempCluster};
use store::{EventKind, EventResult, NewEvent};

/// A site with an entry (`in`) and an exit (`out`) door, open at all times
/// to the `staff` group.
const SITE: &str = r#"
data_dir = "data"
[http]
listen = "127.0.0.1:0"
[trust]
anchors = ["pki/root.pem"]
intermediates = ["pki/intermediate.pem"]
crls = ["pki/root.crl.pem", "pki/intermediate.crl.pem"]
[seed.site]
name = "HQ"
time_zone = "UTC"
[[seed.doors]]
name = "Entry"
passback = "in"
[[seed.doors]]
name = "Exit"
passback = "out"
[[seed.schedules]]
name = "always"
windows = ["mon-sun 00:00-24:00"]
[[seed.groups]]
name = "staff"
schedule = "always"
doors = ["Entry", "Exit"]
[seed.readers]
"sim:entry" = "Entry"
"sim:exit" = "Exit"
"#;

struct Site_ {
    rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    alice: CardCredentials,
    cluster: Option<TempCluster>,
}

impl Site_ {
    fn new(cluster: Option<TempCluster>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let pki = TestPki::init(&dir.path().join("pki"), TestPkiOptions::default()).unwrap();
        let alice = pki
            .issue_card(&CardOptions {
                cardholder: "Alice".into(),
                ..CardOptions::default()
            })
            .unwrap();
        std::fs::write(dir.path().join("pivgate.toml"), SITE).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        Site_ {
            rt,
            dir,
            alice,
            cluster,
        }
    }

    fn start(&self) -> Service {
        let mut c = Config::load(&self.dir.path().join("pivgate.toml")).unwrap();
        c.database_url = self.cluster.as_ref().map(|c| c.url().to_string());
        self.rt.block_on(Service::start(c, None)).unwrap()
    }

    fn reader(s: &Service, connection: &str) -> ReaderId {
        s.loaded()
            .controller
            .snapshot()
            .reader_by_connection(connection)
            .unwrap()
            .id
    }

    fn tap(&self, s: &Service, connection: &str) -> TapResult {
        let mut t = InProcess::new(Card::new(self.alice.card_image(Some(3)).unwrap()));
        s.loaded()
            .controller
            .tap(
                &mut t,
                Self::reader(s, connection),
                None::<&mut dyn PinSource>,
                None,
            )
            .unwrap()
    }

    fn enroll(&self, s: &Service) {
        let l = s.loaded();
        let mut t = InProcess::new(Card::new(self.alice.card_image(Some(3)).unwrap()));
        let validated =
            server::enroll::validate_card(l.controller.authenticator(), &mut t).unwrap();
        self.rt
            .block_on(server::enroll::register(
                &l.store,
                &validated,
                "Alice",
                Some("staff"),
                "test",
                Timestamp::now(),
            ))
            .unwrap();
        self.rt.block_on(s.reload()).unwrap();
    }
}

fn inside_is_remembered_across_a_restart(site: &Site_) {
    let s = site.start();
    site.enroll(&s);
    let r = site.tap(&s, "sim:entry");
    assert!(r.granted(), "{} {:?}", r.code(), r.reason());
    // Before a restart, in memory.
    assert_eq!(site.tap(&s, "sim:entry").code(), "anti-passback");
    site.rt.block_on(s.shutdown()).unwrap();

    let s = site.start();
    let r = site.tap(&s, "sim:entry");
    assert_eq!(r.code(), "anti-passback", "{:?}", r.reason());
    assert!(!r.opened);
    assert!(
        r.reason().unwrap().contains("already recorded inside"),
        "{:?}",
        r.reason()
    );
    let r = site.tap(&s, "sim:exit");
    assert!(r.granted(), "{} {:?}", r.code(), r.reason());
    site.rt.block_on(s.shutdown()).unwrap();

    // Outside now: after another restart the exit refuses, the entry admits.
    let s = site.start();
    assert_eq!(site.tap(&s, "sim:exit").code(), "anti-passback");
    assert!(site.tap(&s, "sim:entry").granted());
    site.rt.block_on(s.shutdown()).unwrap();
}

/// Thousands of later events (other cardholders in and out, refusals of
/// Alice's card, admin changes) and a retention run that prunes every
/// event, her entry included: after a restart she is still inside, and
/// the others are where their last granted tap put them.
fn presence_outlives_a_long_log_and_its_pruning(site: &Site_) {
    let s = site.start();
    site.enroll(&s);
    assert!(site.tap(&s, "sim:entry").granted());
    let entry = Site_::reader(&s, "sim:entry");
    let exit = Site_::reader(&s, "sim:exit");
    let snapshot = s.loaded().controller.snapshot();
    let door_of = |r| snapshot.reader(r).unwrap().door;
    let (entry_door, exit_door) = (door_of(entry), door_of(exit));
    let alice = snapshot.cardholders()[0].id;
    let tap = |door, reader, holder: i64, granted: bool| {
        let mut e = NewEvent::door_command(Timestamp::now(), "x", door, "x", "x".into());
        e.kind = EventKind::Tap;
        e.reader = Some(reader);
        e.cardholder = Some(access::CardholderId(holder));
        e.result = Some(if granted {
            EventResult::Granted
        } else {
            EventResult::Refused
        });
        e.actor = None;
        // Granted at an anti-passback door: the cardholder moved.
        e.passback = granted;
        e
    };
    let mut events = Vec::new();
    for i in 0..5_000i64 {
        let holder = 1_000 + i % 50;
        // Holders 1000..1024 end inside, 1025..1049 outside.
        let inside_last = holder < 1_025;
        let (door, reader) = if (i / 50 % 2 == 0) == inside_last {
            (exit_door, exit)
        } else {
            (entry_door, entry)
        };
        events.push(tap(door, reader, holder, true));
        if i % 10 == 0 {
            events.push(tap(exit_door, exit, alice.0, false));
        }
        if i % 1_000 == 0 {
            events.push(NewEvent::admin(
                Timestamp::now(),
                "test",
                "door.update",
                "changed".into(),
                serde_json::Value::Null,
            ));
        }
    }
    let store = &s.loaded().store;
    let ids = site.rt.block_on(store.append_events(&events)).unwrap();
    let pruned = site
        .rt
        .block_on(store.prune_events(
            Timestamp::now() + std::time::Duration::from_secs(1),
            *ids.last().unwrap(),
            1_000,
        ))
        .unwrap();
    assert!(pruned > 5_000, "{pruned}");
    site.rt.block_on(s.shutdown()).unwrap();

    let s = site.start();
    let r = site.tap(&s, "sim:entry");
    assert_eq!(r.code(), "anti-passback", "{:?}", r.reason());
    let l = s.loaded();
    let snapshot = l.controller.snapshot();
    let state = site
        .rt
        .block_on(server::door::load_passback(&l.store, &snapshot))
        .unwrap();
    let site_id = snapshot.doors().next().unwrap().site;
    for holder in 1_000..1_050 {
        let want = if holder < 1_025 {
            access::Presence::Inside
        } else {
            access::Presence::Outside
        };
        assert_eq!(
            state.get(site_id, access::CardholderId(holder)),
            Some(want),
            "cardholder {holder}"
        );
    }
    assert!(site.tap(&s, "sim:exit").granted());
    site.rt.block_on(s.shutdown()).unwrap();
}

#[test]
fn presence_outlives_a_long_log_on_sqlite() {
    presence_outlives_a_long_log_and_its_pruning(&Site_::new(None));
}

#[test]
fn presence_outlives_a_long_log_on_postgresql() {
    let Some(cluster) = postgres_or_skip("presence_outlives_a_long_log_on_postgresql") else {
        return;
    };
    presence_outlives_a_long_log_and_its_pruning(&Site_::new(Some(cluster)));
}

#[test]
fn anti_passback_survives_a_restart_on_sqlite() {
    inside_is_remembered_across_a_restart(&Site_::new(None));
}

#[test]
fn anti_passback_survives_a_restart_on_postgresql() {
    let Some(cluster) = postgres_or_skip("anti_passback_survives_a_restart_on_postgresql") else {
        return;
    };
    inside_is_remembered_across_a_restart(&Site_::new(Some(cluster)));
}
