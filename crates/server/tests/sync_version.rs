//! A rolling upgrade: a central on a real PostgreSQL (a temporary cluster;
//! with CI=true a machine without PostgreSQL fails this test) and a site on
//! SQLite in this process whose follower says it is of another release
//! (the schema its requests present), over mutual TLS on loopback.

use std::sync::Arc;
use std::time::Duration;

use access::jiff::Timestamp;
use access::{
    AccessGroup, Cardholder, CardholderStatus, Door, DoorId, Mechanism, Reader, ReaderId, Schedule,
    Site, SiteId, StalePolicy,
};
use card::Card;
use host::InProcess;
use pki_issue::{CardCredentials, CardOptions, DeviceOptions, DeviceRole, TestPki, TestPkiOptions};
use server::admin::EntityChange;
use server::config::{init_template, Config};
use server::service::Service;
use server::sync::follow::{FollowStatus, Follower};
use server::sync::link::Connector;
use server::sync::settings::{CentralConfig, SitesConfig};
use server::sync::version;
use store::{EventKind, EventQuery};
use tokio::sync::watch;

const WAIT: Duration = Duration::from_secs(60);

/// Admin events of `store` with `code`, oldest first.
fn admin_events(
    rt: &tokio::runtime::Runtime,
    store: &store::Store,
    code: &str,
) -> Vec<store::Event> {
    let page = rt
        .block_on(store.query_events(&EventQuery {
            kind: Some(EventKind::Admin),
            direction: store::Direction::Forward,
            limit: 1000,
            ..EventQuery::default()
        }))
        .unwrap();
    page.events
        .into_iter()
        .filter(|e| e.event.code.as_deref() == Some(code))
        .collect()
}

#[test]
fn a_site_a_schema_behind_still_syncs_and_one_too_old_keeps_deciding_and_says_it_must_be_upgraded()
{
    let Some(cluster) = store::testing::postgres_or_skip("sync_version") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = TestPki::init(&d.join("pki"), TestPkiOptions::default()).unwrap();
    let alice: CardCredentials = pki
        .issue_card(&CardOptions {
            cardholder: "Alice".into(),
            ..CardOptions::default()
        })
        .unwrap();
    pki.write_device(
        DeviceOptions {
            name: "central".into(),
            role: DeviceRole::Server,
            dns: vec![],
            ips: vec!["127.0.0.1".parse().unwrap()],
            validity: None,
        },
        &d.join("central"),
    )
    .unwrap();
    pki.write_site("hq", &d.join("hq")).unwrap();
    let text = init_template("sim:front", "UTC").replace("127.0.0.1:8080", "127.0.0.1:0");
    std::fs::write(d.join("pivgate.toml"), text).unwrap();
    let mut base = Config::load(&d.join("pivgate.toml")).unwrap();
    base.seed = None;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // The central, on PostgreSQL: site hq, its front door refusing taps
    // on data older than an hour (a field of schema 11), Alice in staff.
    let mut c = base.clone();
    c.data_dir = d.join("central-data");
    c.database_url = Some(cluster.url().to_string());
    c.sites = Some(SitesConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        cert: d.join("central/central.pem"),
        key: d.join("central/central.key.pem"),
        site_ca: vec![d.join("central/ca.pem")],
        crls: vec![],
        feed_days: 30,
        heartbeat_ms: 500,
        handshake_ms: 5000,
        late_after_secs: 300,
        max_skew_secs: 30,
    });
    let central = rt.block_on(Service::start(c, None)).unwrap();
    let addr = central.sync().sites_addr.unwrap();
    let access = central.loaded().access.clone();
    fn made<R: store::Record>(
        rt: &tokio::runtime::Runtime,
        access: &server::admin::AccessData,
        c: EntityChange<R>,
    ) -> R {
        rt.block_on(access.change("admin", c)).unwrap().0
    }
    macro_rules! change {
        ($c:expr) => {
            made(&rt, &access, $c)
        };
    }
    let hq: Site = change!(EntityChange::Create(Site {
        id: SiteId(0),
        name: "hq".into(),
        time_zone: "UTC".into(),
        lockdown: false,
    }));
    let always: Schedule = change!(EntityChange::Create(Schedule {
        id: access::ScheduleId(0),
        name: "always".into(),
        windows: vec!["mon-sun 00:00-24:00".parse().unwrap()],
        holiday_windows: vec![],
    }));
    let front: Door = change!(EntityChange::Create(Door {
        id: DoorId(0),
        site: hq.id,
        name: "front".into(),
        mechanism: Mechanism::PkiCak,
        allow_low_assurance: false,
        passback: Default::default(),
        mode: Default::default(),
        unlock_schedule: None,
        first_card_unlock: false,
        max_staleness_s: Some(3600),
        stale_policy: StalePolicy::Refuse,
    }));
    let reader: Reader = change!(EntityChange::Create(Reader {
        id: ReaderId(0),
        door: front.id,
        name: "sim:front".into(),
        connection: "sim:front".into(),
    }));
    let _: AccessGroup = change!(EntityChange::Create(AccessGroup {
        id: access::GroupId(0),
        name: "staff".into(),
        schedule: always.id,
        doors: vec![front.id],
        cardholders: vec![],
    }));
    let cstore = central.loaded().store.clone();
    let trust = base.trust.as_ref().unwrap().load().unwrap();
    let authn = server::enroll::enrollment_authenticator(trust);
    let mut t = InProcess::new(Card::new(alice.card_image(Some(5)).unwrap()));
    let v = server::enroll::validate_card(&authn, &mut t).unwrap();
    rt.block_on(server::enroll::register(
        &cstore,
        &v,
        "Alice",
        Some("staff"),
        "test",
        Timestamp::now(),
    ))
    .unwrap();
    let alice_id: Cardholder = rt
        .block_on(cstore.load_entities())
        .unwrap()
        .cardholders
        .into_iter()
        .find(|c| c.name == "Alice")
        .unwrap();

    // The site: its own SQLite; its follower is started below, presenting
    // the schema of another release.
    let mut s = base.clone();
    s.data_dir = d.join("site-hq");
    let site = rt.block_on(Service::start(s, None)).unwrap();
    let cfg = CentralConfig {
        urls: vec![format!("https://{addr}")],
        site: "hq".into(),
        cert: d.join("hq/hq.pem"),
        key: d.join("hq/hq.key.pem"),
        ca: d.join("central/ca.pem"),
        silence_ms: 5000,
        connect_timeout_ms: 5000,
        retry_min_ms: 20,
        retry_max_ms: 200,
        upload_retry_min_ms: 20,
        upload_retry_max_ms: 200,
        upload_linger_ms: 20,
    };
    let follow = |schema: i64| {
        let f = Follower::with_connector(
            &cfg,
            site.loaded().store.clone(),
            site.loaded().access.clone(),
            Connector::new(&cfg).unwrap().presenting_schema(schema),
        )
        .unwrap();
        let (stop_tx, stop) = watch::channel(false);
        let task = rt.spawn(f.clone().run(stop));
        (f, stop_tx, task)
    };
    let wait = |f: &Arc<Follower>, what: &dyn Fn(&FollowStatus) -> bool| {
        let mut rx = f.status();
        rt.block_on(async {
            tokio::time::timeout(WAIT, rx.wait_for(|s| what(s)))
                .await
                .expect("the follower did not get there in time")
                .unwrap()
                .clone()
        })
    };
    let head = || {
        rt.block_on(async {
            match cstore.feed_after(hq.id, 0, 100_000).await.unwrap() {
                store::FeedRead::Rows(r) => r.last().map_or(0, |r| r.pos),
                store::FeedRead::Gone { .. } => panic!("pruned"),
            }
        })
    };
    let tap = || {
        let mut t = InProcess::new(Card::new(alice.card_image(Some(5)).unwrap()));
        site.loaded()
            .controller
            .tap(&mut t, reader.id, None, None)
            .unwrap()
    };
    let now = version::current();
    // A site of the release before the doors' offline policy (migration
    // 11): the schema just before the first field `ADDED` lists.
    let behind = version::ADDED[0].0 - 1;
    assert!(behind >= version::OLDEST_SITE && behind < now);

    // A release behind: served in its form. The door comes without the
    // offline policy that site could not enforce; Alice is granted.
    let (f, stop, task) = follow(behind);
    let pos = head();
    let st = wait(&f, &|s| s.applied >= Some(pos) && s.central.is_some());
    assert_eq!(st.must_upgrade, None);
    let e = rt.block_on(site.loaded().store.load_entities()).unwrap();
    assert_eq!(e.doors.len(), 1);
    assert_eq!(
        (e.doors[0].max_staleness_s, e.doors[0].stale_policy),
        (None, StalePolicy::Decide)
    );
    let r = tap();
    assert!(r.granted(), "{:?}", r.reason());
    stop.send(true).unwrap();
    rt.block_on(task).unwrap();
    // The site's service stops once nothing else holds its event log.
    drop(f);

    // Older than the central serves: refused, the site says it must be
    // upgraded, records it once, and keeps deciding on what it holds
    // while a suspension made at the central does not reach it.
    let (f, stop, task) = follow(version::OLDEST_SITE - 1);
    let st = wait(&f, &|s| s.must_upgrade.is_some());
    let why = st.must_upgrade.unwrap();
    assert!(why.contains("upgrade pivgate at the site"), "{why}");
    assert_eq!(st.central, None);
    change!(EntityChange::Replace(Cardholder {
        status: CardholderStatus::Suspended {
            reason: "card reported lost".into(),
        },
        ..alice_id.clone()
    }));
    let r = tap();
    assert!(r.granted(), "the site keeps deciding: {:?}", r.reason());
    let site_events = admin_events(&rt, &site.loaded().store, "sync.version");
    assert_eq!(site_events.len(), 1, "{site_events:?}");
    assert_eq!(
        site_events[0].event.data.as_ref().unwrap()["upgrade"],
        "site"
    );
    stop.send(true).unwrap();
    rt.block_on(task).unwrap();
    // The site's service stops once nothing else holds its event log.
    drop(f);
    let refused = admin_events(&rt, &cstore, "sync.refused");
    assert!(
        !refused.is_empty()
            && refused
                .iter()
                .all(|e| e.event.data.as_ref().unwrap()["code"] == "sync-version"),
        "{refused:?}"
    );

    // Upgraded (to a release behind again): it follows, the suspension arrives.
    let (f, stop, task) = follow(behind);
    let pos = head();
    let st = wait(&f, &|s| s.applied >= Some(pos) && s.central.is_some());
    assert_eq!(st.must_upgrade, None);
    let r = tap();
    assert_eq!(r.code(), "cardholder-suspended", "{:?}", r.reason());
    stop.send(true).unwrap();
    rt.block_on(task).unwrap();
    // The site's service stops once nothing else holds its event log.
    drop(f);

    // A site newer than the central: the centrals go first.
    let c = Arc::new(Connector::new(&cfg).unwrap().presenting_schema(now + 1));
    let link = c.link(0);
    let resp = rt
        .block_on(link.send(link.request(
            axum::http::Method::GET,
            "/sync/v1/snapshot",
            Default::default(),
        )))
        .unwrap();
    assert_eq!(resp.status().as_u16(), 426);
    assert_eq!(
        resp.headers()[version::SCHEMA_HEADER].to_str().unwrap(),
        now.to_string()
    );
    let body: serde_json::Value = serde_json::from_slice(resp.body()).unwrap();
    assert_eq!(
        (body["code"].as_str(), body["upgrade"].as_str()),
        (Some("sync-version"), Some("central"))
    );

    // Stopping the site's service (started without `[central]`, changed by
    // the followers above) does not return yet: it is not waited for here;
    // the process ends with the test.
    std::mem::forget(site);
    std::mem::forget(central);
    drop(cluster);
    rt.shutdown_background();
}
