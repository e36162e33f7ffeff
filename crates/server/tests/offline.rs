//! Offline as a policy, through the service on SQLite: a site whose
//! revocation data is older than its doors' maximum applies each door's
//! policy at the moment of opening, records each door turning stale and
//! current again once, and shows both data ages in the status API and the
//! metrics; anti-passback keeps working within a site cut off from its
//! central.

use std::sync::Arc;
use std::time::Duration;

use access::jiff::{SignedDuration, Timestamp};
use access::{AsOf, ReaderId};
use auth::PinSource;
use card::Card;
use host::InProcess;
use pki_issue::{pem_encode, CardCredentials, CardOptions, CrlBuilder, TestPki, TestPkiOptions};
use server::config::Config;
use server::door::TapResult;
use server::service::Service;
use store::{Event, EventKind, EventQuery, Role};

/// Front keeps deciding, Vault refuses (its own maximum of 30 min), Annex
/// admits only each cardholder's newest credential; Entry and Exit count
/// for anti-passback. The site's maximum is 1 h.
const SITE: &str = r#"
data_dir = "data"
[http]
listen = "127.0.0.1:0"
[trust]
anchors = ["pki/root.pem"]
intermediates = ["pki/intermediate.pem"]
crls = ["pki/root.crl.pem", "pki/intermediate.crl.pem"]
[offline]
max_staleness = "1h"
[seed.site]
name = "Branch"
time_zone = "UTC"
[[seed.doors]]
name = "Front"
[[seed.doors]]
name = "Vault"
max_staleness = "30m"
stale_policy = "refuse"
[[seed.doors]]
name = "Annex"
stale_policy = "recent-only"
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
doors = ["Front", "Vault", "Annex", "Entry", "Exit"]
[seed.readers]
"sim:front" = "Front"
"sim:vault" = "Vault"
"sim:annex" = "Annex"
"sim:entry" = "Entry"
"sim:exit" = "Exit"
"#;

struct Branch {
    rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    pki: TestPki,
    /// Alice's first card, replaced by `alice_new`.
    alice_old: CardCredentials,
    alice_new: CardCredentials,
    bob: CardCredentials,
}

impl Branch {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let pki = TestPki::init(&dir.path().join("pki"), TestPkiOptions::default()).unwrap();
        let card = |name: &str| {
            pki.issue_card(&CardOptions {
                cardholder: name.into(),
                ..CardOptions::default()
            })
            .unwrap()
        };
        let (alice_old, alice_new, bob) = (card("Alice"), card("Alice"), card("Bob"));
        std::fs::write(dir.path().join("pivgate.toml"), SITE).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        Branch {
            rt,
            dir,
            pki,
            alice_old,
            alice_new,
            bob,
        }
    }

    /// The issuing CA's CRL held at the site was issued `age` ago (still
    /// before its nextUpdate): a configured file, which nothing confirms
    /// later, so the revocation data is that old.
    fn crl_issued_ago(&self, age: i64) {
        let now = pki_issue::now();
        let der = CrlBuilder::new()
            .update_times(now - age, Some(now + 7 * 86_400))
            .crl_number(50)
            .sign(self.pki.intermediate_der(), self.pki.intermediate_key())
            .unwrap();
        std::fs::write(
            self.dir.path().join("pki/intermediate.crl.pem"),
            pem_encode("X509 CRL", &der),
        )
        .unwrap();
    }

    fn start(&self) -> Service {
        let c = Config::load(&self.dir.path().join("pivgate.toml")).unwrap();
        self.rt.block_on(Service::start(c, None)).unwrap()
    }

    /// Enrolls each card for its cardholder in `staff`, `enrolled` seconds
    /// before now.
    fn enroll(&self, s: &Service, cards: &[(&CardCredentials, &str, i64)]) {
        let l = s.loaded();
        for (card, name, ago) in cards {
            let mut t = InProcess::new(Card::new(card.card_image(Some(3)).unwrap()));
            let v = server::enroll::validate_card(l.controller.authenticator(), &mut t).unwrap();
            let at = Timestamp::now() - SignedDuration::from_secs(*ago);
            self.rt
                .block_on(server::enroll::register(
                    &l.store,
                    &v,
                    name,
                    Some("staff"),
                    "test",
                    at,
                ))
                .unwrap();
        }
        self.rt.block_on(s.reload()).unwrap();
    }

    fn tap(&self, s: &Service, card: &CardCredentials, connection: &str) -> TapResult {
        let controller = &s.loaded().controller;
        let reader: ReaderId = controller
            .snapshot()
            .reader_by_connection(connection)
            .unwrap()
            .id;
        let mut t = InProcess::new(Card::new(card.card_image(Some(3)).unwrap()));
        controller
            .tap(&mut t, reader, None::<&mut dyn PinSource>, None)
            .unwrap()
    }

    fn get(&self, s: &Service, token: &str, path: &str) -> String {
        let url = format!("{}{path}", s.url());
        let auth = format!("Bearer {token}");
        self.rt.block_on(async move {
            tokio::task::spawn_blocking(move || {
                ureq::get(&url)
                    .set("Authorization", &auth)
                    .call()
                    .unwrap()
                    .into_string()
                    .unwrap()
            })
            .await
            .unwrap()
        })
    }
}

/// Waits (with a deadline) until the log holds `n` door events with
/// `code`; returns them. `live` was subscribed before the events could be
/// committed, so none is missed between the query and the wait.
fn door_events(
    b: &Branch,
    s: &Service,
    live: &mut tokio::sync::broadcast::Receiver<Arc<Event>>,
    code: &str,
    n: usize,
) -> Vec<Event> {
    let store = &s.loaded().store;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    b.rt.block_on(async {
        loop {
            let page = store
                .query_events(&EventQuery {
                    kind: Some(EventKind::Door),
                    limit: 100,
                    ..EventQuery::default()
                })
                .await
                .unwrap();
            let found: Vec<Event> = page
                .events
                .into_iter()
                .filter(|e| e.event.code.as_deref() == Some(code))
                .collect();
            if found.len() >= n {
                return found;
            }
            match tokio::time::timeout_at(deadline, live.recv()).await {
                Ok(Ok(_)) | Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {}
                other => panic!(
                    "{} `{code}` events expected, {} found: {other:?}",
                    n,
                    found.len()
                ),
            }
        }
    })
}

#[test]
fn each_door_applies_its_policy_while_the_revocation_data_is_stale() {
    let b = Branch::new();
    // Three hours: beyond every door's maximum, still before nextUpdate
    // (authentication accepts the CRL).
    b.crl_issued_ago(3 * 3_600);
    let s = b.start();
    let mut live = s.loaded().controller.log().subscribe();
    b.enroll(
        &s,
        &[
            (&b.alice_old, "Alice", 86_400),
            (&b.alice_new, "Alice", 3_600),
            (&b.bob, "Bob", 7_200),
        ],
    );
    let l = s.loaded();
    let viewer =
        b.rt.block_on(server::token::create(&l.store, "watcher", Role::Viewer))
            .unwrap();

    // Each door crossed into stale once, at start-up.
    let stale = door_events(&b, &s, &mut live, "data-stale", 5);
    assert_eq!(stale.len(), 5, "{stale:?}");
    let vault = stale
        .iter()
        .find(|e| e.event.reason.as_deref().unwrap().contains("`Vault`"))
        .unwrap();
    let why = vault.event.reason.as_deref().unwrap();
    assert!(why.contains("policy `refuse`"), "{why}");
    assert!(why.contains("the revocation data is 3 h"), "{why}");
    assert!(why.contains("(at most 30 min allowed)"), "{why}");
    let data = vault.event.data.as_ref().unwrap();
    assert!(
        data["revocation_age_s"].as_u64().unwrap() >= 3 * 3_600,
        "{data}"
    );
    assert_eq!(data["changes_age_s"], serde_json::Value::Null);
    assert_eq!(data["max_staleness_s"], 1_800);

    // decide: granted, and the tap's event says on what data.
    let r = b.tap(&s, &b.alice_old, "sim:front");
    assert!(r.granted(), "{} {:?}", r.code(), r.reason());
    assert!(r.opened);
    let id = *r.event.as_ref().unwrap();
    let front =
        b.rt.block_on(l.store.query_events(&EventQuery {
            kind: Some(EventKind::Tap),
            door: Some(r.door),
            limit: 10,
            ..EventQuery::default()
        }))
        .unwrap()
        .events
        .into_iter()
        .find(|e| e.id == id)
        .unwrap();
    let note = front.event.data.as_ref().unwrap()["stale"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(note.starts_with("the revocation data is 3 h"), "{note}");

    // refuse: the sentence says which data is how old.
    let r = b.tap(&s, &b.bob, "sim:vault");
    assert_eq!(r.code(), "stale-data", "{:?}", r.reason());
    assert!(!r.opened);
    let reason = r.reason().unwrap();
    assert!(
        reason.starts_with("stale data: door `Vault` refuses while the revocation data is 3 h"),
        "{reason}"
    );

    // recent-only: Alice's replaced card is refused, her new one and Bob's
    // only one pass.
    let r = b.tap(&s, &b.alice_old, "sim:annex");
    assert_eq!(r.code(), "stale-superseded", "{:?}", r.reason());
    assert!(!r.opened);
    assert!(
        r.reason().unwrap().contains("replaced this one"),
        "{:?}",
        r.reason()
    );
    let r = b.tap(&s, &b.alice_new, "sim:annex");
    assert!(r.granted(), "{} {:?}", r.code(), r.reason());
    assert!(b.tap(&s, &b.bob, "sim:annex").granted());

    // The status API and the metrics show both ages: the revocation data's
    // and, at a site without a central, changes not applicable.
    let status: serde_json::Value =
        serde_json::from_str(&b.get(&s, &viewer, "/api/v1/doors/status")).unwrap();
    let age = &status["data_age"];
    assert_eq!(age["revocation"]["state"], "confirmed", "{age}");
    assert!(
        age["revocation"]["age_s"].as_u64().unwrap() >= 3 * 3_600,
        "{age}"
    );
    assert_eq!(age["changes"]["state"], "not-applicable", "{age}");
    assert_eq!(age["changes"]["age_s"], serde_json::Value::Null);
    assert_eq!(age["default_max_staleness_s"], 3_600);
    let vault = status["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "Vault")
        .unwrap();
    assert_eq!(vault["stale"], true);
    assert_eq!(vault["stale_policy"], "refuse");
    assert_eq!(vault["max_staleness_s"], 1_800);
    let metrics = b.get(&s, &viewer, "/metrics");
    let line = metrics
        .lines()
        .find(|l| l.starts_with("pivgate_data_age_seconds{data=\"revocation\"}"))
        .unwrap_or_else(|| panic!("no revocation age in\n{metrics}"));
    let secs: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(secs >= 3.0 * 3_600.0, "{line}");
    assert!(
        !metrics.contains("data=\"changes\""),
        "not applicable: absent"
    );
    assert!(metrics.contains("pivgate_doors_stale 5"), "{metrics}");

    // A refresh brings current data: every door recovers, once.
    l.controller.note_revocation_current(AsOf::At {
        at: Timestamp::now(),
    });
    let current = door_events(&b, &s, &mut live, "data-current", 5);
    assert_eq!(current.len(), 5, "{current:?}");
    assert!(b.tap(&s, &b.bob, "sim:vault").granted());
    let r = b.tap(&s, &b.alice_old, "sim:annex");
    assert!(r.granted(), "{} {:?}", r.code(), r.reason());
    let status: serde_json::Value =
        serde_json::from_str(&b.get(&s, &viewer, "/api/v1/doors/status")).unwrap();
    assert!(status["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["stale"] == false));
    assert!(b
        .get(&s, &viewer, "/metrics")
        .contains("pivgate_doors_stale 0"));
    // Exactly one event each way per door.
    assert_eq!(door_events(&b, &s, &mut live, "data-stale", 5).len(), 5);
    b.rt.block_on(s.shutdown()).unwrap();
}

/// Anti-passback needs no central: within a site it is decided from the
/// site's own log, so a site whose link is down (its access changes never
/// confirmed beyond the doors' maximum) still refuses a second entry.
#[test]
fn anti_passback_refuses_within_a_site_cut_off_from_its_central() {
    let b = Branch::new();
    let s = b.start();
    b.enroll(&s, &[(&b.alice_new, "Alice", 60)]);
    let controller = &s.loaded().controller;
    // The site follows a central it last heard from two days ago.
    controller.follow_central(Some(Timestamp::now() - SignedDuration::from_hours(48)));
    let f = controller.freshness();
    assert!(matches!(f.changes, AsOf::At { .. }), "{f:?}");

    let r = b.tap(&s, &b.alice_new, "sim:entry");
    assert!(r.granted(), "{} {:?}", r.code(), r.reason());
    assert!(r.decision.as_ref().unwrap().stale.is_some());
    let r = b.tap(&s, &b.alice_new, "sim:entry");
    assert_eq!(r.code(), "anti-passback", "{:?}", r.reason());
    assert!(!r.opened);
    assert!(b.tap(&s, &b.alice_new, "sim:exit").granted());
    assert_eq!(b.tap(&s, &b.alice_new, "sim:exit").code(), "anti-passback");

    // A door's maximum and policy are fields of the door: set through the
    // API, the next tap at it applies them.
    let store = &s.loaded().store;
    let admin =
        b.rt.block_on(server::token::create(store, "boss", Role::Admin))
            .unwrap();
    let entry = controller
        .snapshot()
        .doors()
        .find(|d| d.name == "Entry")
        .unwrap()
        .id;
    let path = format!("/api/v1/doors/{}", entry.0);
    let mut door: serde_json::Value = serde_json::from_str(&b.get(&s, &admin, &path)).unwrap();
    assert_eq!(door["stale_policy"], "decide");
    assert_eq!(door["max_staleness_s"], serde_json::Value::Null);
    door["stale_policy"] = "refuse".into();
    door["max_staleness_s"] = 60.into();
    let (url, auth) = (format!("{}{path}", s.url()), format!("Bearer {admin}"));
    let answer: serde_json::Value = b.rt.block_on(async move {
        tokio::task::spawn_blocking(move || {
            let text = ureq::put(&url)
                .set("Authorization", &auth)
                .set("Content-Type", "application/json")
                .send_string(&door.to_string())
                .unwrap()
                .into_string()
                .unwrap();
            serde_json::from_str(&text).unwrap()
        })
        .await
        .unwrap()
    });
    assert_eq!(answer["stale_policy"], "refuse", "{answer}");
    assert_eq!(answer["max_staleness_s"], 60, "{answer}");
    let r = b.tap(&s, &b.alice_new, "sim:entry");
    assert_eq!(r.code(), "stale-data", "{:?}", r.reason());
    assert!(
        r.reason()
            .unwrap()
            .contains("the access changes from the central are 2 d old (at most 1 min allowed)"),
        "{:?}",
        r.reason()
    );
    // The OpenAPI document describes the fields and the data ages.
    let doc: serde_json::Value =
        serde_json::from_str(&b.get(&s, &admin, "/api/v1/openapi.json")).unwrap();
    let schemas = &doc["components"]["schemas"];
    assert!(
        schemas["Door"]["properties"]["stale_policy"].is_object(),
        "{}",
        schemas["Door"]
    );
    assert!(schemas["DataAges"]["properties"]["revocation"].is_object());
    assert!(schemas["DoorStatusList"]["properties"]["data_age"].is_object());

    // A change applied from the central: current again; an older
    // confirmation does not turn the clock back.
    let now = Timestamp::now();
    controller.note_changes_current(now);
    controller.note_changes_current(now - SignedDuration::from_hours(1));
    assert_eq!(controller.freshness().changes, AsOf::At { at: now });
    b.rt.block_on(s.shutdown()).unwrap();
}
