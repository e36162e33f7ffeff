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
