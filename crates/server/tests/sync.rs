//! A central on a real PostgreSQL (a temporary cluster; with CI=true a
//! machine without PostgreSQL fails these tests) and sites on SQLite, each
//! a `Service` in this process, linked over mutual TLS on loopback with
//! certificates from a test PKI.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use access::jiff::Timestamp;
use access::{
    AccessGroup, Cardholder, CardholderStatus, Door, DoorId, Mechanism, Reader, ReaderId, Schedule,
    Site, SiteId,
};
use card::Card;
use host::InProcess;
use pki_issue::{CardCredentials, CardOptions, DeviceOptions, DeviceRole, TestPki, TestPkiOptions};
use server::admin::{AccessData, EntityChange};
use server::config::{init_template, Config};
use server::door::TapResult;
use server::service::Service;
use server::sync::follow::FollowStatus;
use server::sync::link::Connector;
use server::sync::settings::{CentralConfig, SitesConfig};
use store::testing::{postgres_or_skip, TempCluster};
use store::{EventKind, EventQuery};

mod responder;

const WAIT: Duration = Duration::from_secs(60);

struct World {
    rt: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    base: Config,
    pki: TestPki,
    /// The centrals download CRLs (`[trust.fetch]`).
    central_fetch: bool,
    /// The centrals ask this OCSP responder (the sites cannot reach it);
    /// the issuing CA's status then comes from OCSP alone, at both.
    ocsp: Option<String>,
    alice: CardCredentials,
    bob: CardCredentials,
    centrals: Vec<Option<Service>>,
    sites: Vec<Service>,
    site_names: Vec<String>,
    /// Entities made at the central.
    ids: Ids,
    /// Dropped last.
    cluster: TempCluster,
}

struct Ids {
    front_reader: ReaderId,
    lab_reader: ReaderId,
    lab_group: Option<AccessGroup>,
    alice: Option<Cardholder>,
}

fn tls_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    (
        dir.join("central/central.pem"),
        dir.join("central/central.key.pem"),
        dir.join("central/ca.pem"),
    )
}

impl World {
    /// The PKI, the cluster and `centrals` central instances on it, with
    /// sites `hq` (front door: Alice) and `lab` (lab door: Bob).
    fn new(test: &str, centrals: usize) -> Option<World> {
        World::with_crls(test, centrals, None, |_| {})
    }

    /// [`World::new`] with a PKI publishing its CRLs under `crl_base`
    /// (`http://…`), downloaded by the centrals (not the sites);
    /// `published` is given the PKI before the centrals start.
    fn with_crls(
        test: &str,
        centrals: usize,
        crl_base: Option<String>,
        published: impl FnOnce(&TestPki),
    ) -> Option<World> {
        World::build(test, centrals, crl_base, |pki| {
            published(pki);
            None
        })
    }

    /// [`World::new`] with one central asking the OCSP responder whose URL
    /// `responder` returns (given the PKI before the central starts), and
    /// sites that cannot: the cards' status comes from OCSP alone (the
    /// issuing CA's CRL is not configured; the root's still covers the
    /// CA, as `either` allows).
    fn with_ocsp(test: &str, responder: impl FnOnce(&TestPki) -> String) -> Option<World> {
        World::build(test, 1, None, |pki| Some(responder(pki)))
    }

    fn build(
        test: &str,
        centrals: usize,
        crl_base: Option<String>,
        published: impl FnOnce(&TestPki) -> Option<String>,
    ) -> Option<World> {
        let cluster = postgres_or_skip(test)?;
        let dir = tempfile::tempdir().unwrap();
        let central_fetch = crl_base.is_some();
        let mut options = TestPkiOptions::default();
        if crl_base.is_some() {
            options.crl_base_url = crl_base;
        }
        let pki = TestPki::init(&dir.path().join("pki"), options).unwrap();
        let ocsp = published(&pki);
        let card = |name: &str| {
            pki.issue_card(&CardOptions {
                cardholder: name.into(),
                ..CardOptions::default()
            })
            .unwrap()
        };
        let (alice, bob) = (card("Alice"), card("Bob"));
        pki.write_device(
            DeviceOptions {
                name: "central".into(),
                role: DeviceRole::Server,
                dns: vec![],
                ips: vec!["127.0.0.1".parse().unwrap()],
                validity: None,
            },
            &dir.path().join("central"),
        )
        .unwrap();
        for s in ["hq", "lab", "nowhere"] {
            pki.write_site(s, &dir.path().join(s)).unwrap();
        }
        let text = init_template("sim:front", "UTC").replace("127.0.0.1:8080", "127.0.0.1:0");
        let path = dir.path().join("pivgate.toml");
        std::fs::write(&path, text).unwrap();
        let mut base = Config::load(&path).unwrap();
        base.seed = None;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut w = World {
            rt,
            dir,
            base,
            pki,
            central_fetch,
            ocsp,
            alice,
            bob,
            centrals: Vec::new(),
            sites: Vec::new(),
            site_names: Vec::new(),
            ids: Ids {
                front_reader: ReaderId(0),
                lab_reader: ReaderId(0),
                lab_group: None,
                alice: None,
            },
            cluster,
        };
        for _ in 0..centrals {
            w.start_central();
        }
        w.populate();
        Some(w)
    }

    fn start_central(&mut self) {
        self.start_central_on("127.0.0.1:0".parse().unwrap());
    }

    /// A central instance whose site link listens on `listen`.
    fn start_central_on(&mut self, listen: SocketAddr) {
        let (cert, key, ca) = tls_files(self.dir.path());
        let mut c = self.base.clone();
        c.data_dir = self
            .dir
            .path()
            .join(format!("central{}", self.centrals.len()));
        c.database_url = Some(self.cluster.url().to_string());
        if self.central_fetch {
            c.trust.as_mut().unwrap().fetch = Some(pki::fetch::FetchConfig::default());
        }
        if let Some(url) = &self.ocsp {
            ocsp_only(&mut c, url);
        }
        c.sites = Some(SitesConfig {
            listen,
            cert,
            key,
            site_ca: vec![ca],
            crls: vec![],
            feed_days: 30,
            heartbeat_ms: 500,
            handshake_ms: 5000,
            late_after_secs: 300,
            max_skew_secs: 30,
        });
        let s = self.rt.block_on(Service::start(c, None)).unwrap();
        self.centrals.push(Some(s));
    }

    fn central(&self, i: usize) -> &Service {
        self.centrals[i].as_ref().unwrap()
    }

    fn sites_addr(&self, i: usize) -> SocketAddr {
        self.central(i).sync().sites_addr.unwrap()
    }

    fn access(&self, i: usize) -> &Arc<AccessData> {
        &self.central(i).loaded().access
    }

    fn change<R: store::Record>(&self, c: EntityChange<R>) -> R {
        self.rt
            .block_on(self.access(0).change("admin", c))
            .unwrap()
            .0
    }

    /// Sites, doors, readers, groups at the central; Alice enrolled in
    /// `staff` (hq), Bob in `lab` (lab).
    fn populate(&mut self) {
        let site = |name: &str| Site {
            id: SiteId(0),
            name: name.into(),
            time_zone: "UTC".into(),
            lockdown: false,
        };
        let hq = self.change(EntityChange::Create(site("hq")));
        let lab = self.change(EntityChange::Create(site("lab")));
        let always = self.change(EntityChange::Create(Schedule {
            id: access::ScheduleId(0),
            name: "always".into(),
            windows: vec!["mon-sun 00:00-24:00".parse().unwrap()],
            holiday_windows: vec![],
        }));
        let door = |site: SiteId, name: &str| Door {
            id: DoorId(0),
            site,
            name: name.into(),
            mechanism: Mechanism::PkiCak,
            allow_low_assurance: false,
            passback: Default::default(),
            mode: Default::default(),
            unlock_schedule: None,
            first_card_unlock: false,
            max_staleness_s: None,
            stale_policy: Default::default(),
        };
        let front = self.change(EntityChange::Create(door(hq.id, "front")));
        let lab_door = self.change(EntityChange::Create(door(lab.id, "lab")));
        let reader = |door: DoorId, c: &str| Reader {
            id: ReaderId(0),
            door,
            name: c.into(),
            connection: c.into(),
        };
        self.ids.front_reader = self
            .change(EntityChange::Create(reader(front.id, "sim:front")))
            .id;
        self.ids.lab_reader = self
            .change(EntityChange::Create(reader(lab_door.id, "sim:lab")))
            .id;
        let group = |name: &str, door: DoorId| AccessGroup {
            id: access::GroupId(0),
            name: name.into(),
            schedule: always.id,
            doors: vec![door],
            cardholders: vec![],
        };
        self.change(EntityChange::Create(group("staff", front.id)));
        self.change(EntityChange::Create(group("lab", lab_door.id)));
        let store = self.central(0).loaded().store.clone();
        let trust = self.base.trust.as_ref().unwrap().load().unwrap();
        let authn = server::enroll::enrollment_authenticator(trust);
        for (card, name, group) in [(&self.alice, "Alice", "staff"), (&self.bob, "Bob", "lab")] {
            let mut t = InProcess::new(Card::new(card.card_image(Some(5)).unwrap()));
            let v = server::enroll::validate_card(&authn, &mut t).unwrap();
            self.rt
                .block_on(server::enroll::register(
                    &store,
                    &v,
                    name,
                    Some(group),
                    "test",
                    Timestamp::now(),
                ))
                .unwrap();
        }
        let all = self.rt.block_on(store.load_entities()).unwrap();
        self.ids.lab_group = all.groups.iter().find(|g| g.name == "lab").cloned();
        self.ids.alice = all.cardholders.iter().find(|c| c.name == "Alice").cloned();
    }

    fn central_config(&self, site: &str, urls: &[SocketAddr]) -> CentralConfig {
        let d = self.dir.path();
        CentralConfig {
            urls: urls.iter().map(|a| format!("https://{a}")).collect(),
            site: site.into(),
            cert: d.join(format!("{site}/{site}.pem")),
            key: d.join(format!("{site}/{site}.key.pem")),
            ca: d.join("central/ca.pem"),
            silence_ms: 5000,
            connect_timeout_ms: 5000,
            retry_min_ms: 20,
            retry_max_ms: 200,
            upload_retry_min_ms: 200,
            upload_retry_max_ms: 60_000,
            upload_linger_ms: 200,
        }
    }

    /// Starts site `name` on its own SQLite, following `urls`.
    fn start_site(&mut self, name: &str, urls: &[SocketAddr]) -> usize {
        let mut c = self.base.clone();
        c.data_dir = self.dir.path().join(format!("site-{name}"));
        c.central = Some(self.central_config(name, urls));
        if self.ocsp.is_some() {
            // Nothing listens there: the site never gets an answer itself.
            ocsp_only(&mut c, "http://127.0.0.1:9");
        }
        let s = self.rt.block_on(Service::start(c, None)).unwrap();
        self.sites.push(s);
        self.site_names.push(name.to_string());
        self.sites.len() - 1
    }

    fn status(&self, site: usize) -> tokio::sync::watch::Receiver<FollowStatus> {
        self.sites[site].sync().follower.as_ref().unwrap().status()
    }

    /// Waits until `site` (named `name`) has applied the central's last
    /// change of its part, and follows a central.
    fn caught_up(&self, site: usize) -> FollowStatus {
        let name = self.site_names[site].clone();
        let store = self.central(0).loaded().store.clone();
        let pos = self.rt.block_on(async {
            let sites = store.list::<Site>().await.unwrap();
            let id = sites.iter().find(|s| s.name == name).unwrap().id;
            let mut from = 0;
            loop {
                match store.feed_after(id, from, 100_000).await.unwrap() {
                    store::FeedRead::Rows(r) => break r.last().map_or(from, |r| r.pos),
                    store::FeedRead::Gone { pruned } => from = pruned,
                }
            }
        });
        self.wait(site, |s| {
            s.applied.is_some_and(|a| a >= pos) && s.central.is_some()
        })
    }

    fn wait(&self, site: usize, f: impl Fn(&FollowStatus) -> bool) -> FollowStatus {
        let mut rx = self.status(site);
        self.rt.block_on(async {
            tokio::time::timeout(WAIT, rx.wait_for(|s| f(s)))
                .await
                .expect("the site did not get there in time")
                .unwrap()
                .clone()
        })
    }

    fn tap(&self, site: usize, card: &CardCredentials, reader: ReaderId) -> TapResult {
        let mut t = InProcess::new(Card::new(card.card_image(Some(5)).unwrap()));
        self.sites[site]
            .loaded()
            .controller
            .tap(&mut t, reader, None, None)
            .unwrap()
    }

    fn site_entities(&self, site: usize) -> access::Entities {
        self.rt
            .block_on(self.sites[site].loaded().store.load_entities())
            .unwrap()
    }
}

/// `c` takes the issuing CA's certificates' status from OCSP only, asking
/// `responder`.
fn ocsp_only(c: &mut Config, responder: &str) {
    let t = c.trust.as_mut().unwrap();
    t.crls.retain(|p| p.ends_with("root.crl.pem"));
    t.revocation.source = pki::trust::RevocationSourceConfig::Either;
    t.ocsp = Some(pki::ocsp::client::OcspConfig {
        responder_url: Some(responder.into()),
        ..Default::default()
    });
}

impl Drop for World {
    fn drop(&mut self) {
        for s in self.sites.drain(..) {
            self.rt.block_on(s.shutdown()).unwrap();
        }
        for s in self.centrals.iter_mut().filter_map(Option::take) {
            self.rt.block_on(s.shutdown()).unwrap();
        }
    }
}

#[test]
fn a_fresh_site_bootstraps_holds_only_its_part_and_a_suspension_at_the_central_refuses_its_next_tap(
) {
    let Some(mut w) = World::new("sync_suspension", 1) else {
        return;
    };
    let hq = w.start_site("hq", &[w.sites_addr(0)]);
    let s = w.caught_up(hq);
    assert_eq!(s.snapshots, 1, "a new site starts from a snapshot");
    // Its part only: hq's door and reader, Alice; not the lab, not Bob.
    let e = w.site_entities(hq);
    assert_eq!(
        e.sites.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["hq"]
    );
    assert_eq!(e.doors.len(), 1);
    assert_eq!(
        e.cardholders
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["Alice"]
    );
    assert!(!e.readers.iter().any(|r| r.id == w.ids.lab_reader));
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert!(r.granted(), "{:?}", r.reason());
    let r = w.tap(hq, &w.bob, w.ids.front_reader);
    assert!(!r.granted());

    // Alice is suspended at the central: the site's next tap is refused.
    let alice = w.ids.alice.clone().unwrap();
    w.change(EntityChange::Replace(Cardholder {
        status: CardholderStatus::Suspended {
            reason: "card reported lost".into(),
        },
        ..alice.clone()
    }));
    let after = w.caught_up(hq);
    assert_eq!(after.snapshots, 1, "followed, not bootstrapped again");
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert!(!r.granted());
    assert_eq!(r.code(), "cardholder-suspended", "{:?}", r.reason());

    // Away longer than the feed keeps: while the site is stopped Alice is
    // reinstated and the feed pruned; restarted, the site is sent back to
    // a snapshot, and Alice is granted again.
    let site = w.sites.pop().unwrap();
    w.site_names.pop();
    w.rt.block_on(site.shutdown()).unwrap();
    w.change(EntityChange::Replace(alice));
    let store = w.central(0).loaded().store.clone();
    let pruned = w
        .rt
        .block_on(store.prune_feed(Timestamp::now() + access::jiff::SignedDuration::from_secs(1)))
        .unwrap();
    assert!(pruned > 0);
    let hq = w.start_site("hq", &[w.sites_addr(0)]);
    let s = w.caught_up(hq);
    assert_eq!(s.snapshots, 1, "sent back to a snapshot");
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert!(r.granted(), "{:?}", r.reason());
}

#[test]
fn a_cardholder_given_access_to_a_second_site_appears_there() {
    let Some(mut w) = World::new("sync_second_site", 1) else {
        return;
    };
    let addr = w.sites_addr(0);
    let hq = w.start_site("hq", &[addr]);
    let lab = w.start_site("lab", &[addr]);
    w.caught_up(hq);
    w.caught_up(lab);
    let e = w.site_entities(lab);
    assert!(!e.cardholders.iter().any(|c| c.name == "Alice"));
    let r = w.tap(lab, &w.alice, w.ids.lab_reader);
    assert!(!r.granted());
    // Alice joins the lab group.
    let alice = w.ids.alice.clone().unwrap();
    let mut g = w.ids.lab_group.clone().unwrap();
    g.cardholders.push(alice.id);
    w.change(EntityChange::Replace(g));
    w.caught_up(lab);
    let e = w.site_entities(lab);
    assert!(e.cardholders.iter().any(|c| c.id == alice.id));
    assert!(e.credentials.iter().any(|c| c.cardholder == alice.id));
    let r = w.tap(lab, &w.alice, w.ids.lab_reader);
    assert!(r.granted(), "{:?}", r.reason());
    // hq still holds no lab door.
    w.caught_up(hq);
    assert_eq!(w.site_entities(hq).doors.len(), 1);
}

#[test]
fn a_site_certificate_reads_no_other_part_and_unknown_sites_are_refused_with_an_event() {
    let Some(w) = World::new("sync_refusals", 1) else {
        return;
    };
    let addr = w.sites_addr(0);
    let get = |site: &str, path: &str| {
        let c = Arc::new(Connector::new(&w.central_config(site, &[addr])).unwrap());
        let link = c.link(0);
        let r = w
            .rt
            .block_on(link.send(link.request(axum::http::Method::GET, path, Default::default())))
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(r.body()).unwrap_or_default();
        (r.status().as_u16(), body)
    };
    let (status, body) = get("hq", "/sync/v1/snapshot?site=lab");
    assert_eq!((status, body["code"].as_str()), (403, Some("other-site")));
    let (status, body) = get("hq", "/sync/v1/feed?after=0&site=lab");
    assert_eq!((status, body["code"].as_str()), (403, Some("other-site")));
    let (status, body) = get("nowhere", "/sync/v1/snapshot");
    assert_eq!((status, body["code"].as_str()), (403, Some("unknown-site")));
    // Its own part: hq's snapshot names hq only.
    let (status, body) = get("hq", "/sync/v1/snapshot");
    assert_eq!(status, 200);
    assert_eq!(body["part"]["sites"].as_array().unwrap().len(), 1);
    assert_eq!(body["part"]["sites"][0]["name"], "hq");
    // A certificate naming another site for itself cannot be configured.
    let mut wrong = w.central_config("hq", &[addr]);
    wrong.site = "lab".into();
    assert!(Connector::new(&wrong).is_err());
    // Each refusal is an event at the central.
    let events =
        w.rt.block_on(w.central(0).loaded().store.query_events(&EventQuery {
            kind: Some(EventKind::Admin),
            limit: 1000,
            ..EventQuery::default()
        }))
        .unwrap();
    let refused: Vec<&str> = events
        .events
        .iter()
        .filter(|e| e.event.code.as_deref() == Some("sync.refused"))
        .map(|e| e.event.data.as_ref().unwrap()["code"].as_str().unwrap())
        .collect();
    // The second refusal of hq's certificate within the minute is
    // counted for a summary, not recorded on its own.
    assert_eq!(refused, ["other-site", "unknown-site"]);
}

#[test]
fn a_site_flooding_the_central_with_refused_requests_leaves_one_event_and_a_summary() {
    let Some(w) = World::new("sync_refusal_flood", 1) else {
        return;
    };
    let addr = w.sites_addr(0);
    let central = w.central(0).sync().central.clone().unwrap();
    central.refusals().set_window(Duration::from_secs(3));
    let mut live = w.central(0).loaded().controller.log().subscribe();
    let c = Arc::new(Connector::new(&w.central_config("hq", &[addr])).unwrap());
    let link = c.link(0);
    for _ in 0..25 {
        let r =
            w.rt.block_on(link.send(link.request(
                axum::http::Method::GET,
                "/sync/v1/snapshot?site=lab",
                Default::default(),
            )))
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "every request is still refused");
    }
    let refused = |e: &store::Event| e.event.code.as_deref() == Some("sync.refused");
    // The first is recorded; then, at the window's end, one summary.
    let summary = w.rt.block_on(async {
        let mut seen = Vec::new();
        tokio::time::timeout(WAIT, async {
            loop {
                let e = live.recv().await.unwrap();
                if refused(&e) {
                    seen.push(e.event.data.clone().unwrap());
                    if seen.len() == 2 {
                        break;
                    }
                }
            }
        })
        .await
        .expect("no summary of the refusals");
        seen
    });
    assert_eq!(summary[0]["code"], "other-site");
    assert_eq!(summary[1]["code"], "summary");
    assert_eq!(summary[1]["suppressed"], 24);
    assert_eq!(summary[1]["codes"]["other-site"], 24);
    assert_eq!(summary[1]["site"], "hq");
    let events =
        w.rt.block_on(w.central(0).loaded().store.query_events(&EventQuery {
            kind: Some(EventKind::Admin),
            limit: 1000,
            ..EventQuery::default()
        }))
        .unwrap();
    assert_eq!(events.events.iter().filter(|e| refused(e)).count(), 2);
}

#[test]
fn a_site_moves_to_the_other_central_and_continues_from_its_position() {
    let Some(mut w) = World::new("sync_failover", 2) else {
        return;
    };
    let urls = [w.sites_addr(0), w.sites_addr(1)];
    let hq = w.start_site("hq", &urls);
    let s = w.caught_up(hq);
    assert_eq!(s.central, Some(0));
    let before = s.applied.unwrap();
    // The first central goes away: the site follows the second one.
    let first = w.centrals[0].take().unwrap();
    w.rt.block_on(first.shutdown()).unwrap();
    w.centrals.swap(0, 1);
    let s = w.wait(hq, |s| s.central == Some(1));
    assert_eq!(s.applied, Some(before));
    // The remaining instance shows the site linked through itself, from
    // the position it had reached.
    let board = w.central(0).sync().board.clone().unwrap();
    let mut changes = board.changes();
    let linked = w.rt.block_on(async {
        tokio::time::timeout(WAIT, async {
            loop {
                changes.borrow_and_update();
                let all = board.status().await.unwrap();
                let hq = all.items.iter().find(|s| s.name == "hq").unwrap().clone();
                if hq.link.up && hq.link.central.as_deref() == Some(board.instance()) {
                    return hq;
                }
                changes.changed().await.unwrap();
            }
        })
        .await
        .expect("the site's link through the second instance was not recorded")
    });
    assert_eq!(linked.link.followed_from, Some(before));
    // A change made through the remaining central reaches the site from
    // where it was, without a new snapshot.
    let alice = w.ids.alice.clone().unwrap();
    w.change(EntityChange::Replace(Cardholder {
        status: CardholderStatus::Suspended {
            reason: "left".into(),
        },
        ..alice
    }));
    let s = w.caught_up(hq);
    assert!(s.applied.unwrap() > before);
    assert_eq!(s.snapshots, 1);
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert_eq!(r.code(), "cardholder-suspended");
    // Restarted, the site resumes from its stored position.
    let site = w.sites.pop().unwrap();
    w.site_names.pop();
    let applied = s.applied;
    w.rt.block_on(site.shutdown()).unwrap();
    let hq = w.start_site("hq", &[w.sites_addr(0)]);
    let s = w.wait(hq, |s| s.central.is_some());
    assert_eq!(s.applied, applied);
    assert_eq!(s.snapshots, 0);
}

impl World {
    /// Every event id in `site`'s own log, ascending.
    fn site_event_ids(&self, site: usize) -> Vec<i64> {
        let store = self.sites[site].loaded().store.clone();
        self.rt.block_on(async {
            let mut ids = Vec::new();
            let mut cursor = None;
            loop {
                let page = store
                    .query_events(&EventQuery {
                        cursor,
                        direction: store::Direction::Forward,
                        limit: 1000,
                        ..EventQuery::default()
                    })
                    .await
                    .unwrap();
                ids.extend(page.events.iter().map(|e| e.id.0));
                match page.next {
                    Some(n) if !page.events.is_empty() => cursor = Some(n),
                    _ => break,
                }
            }
            ids
        })
    }

    /// Waits until the central acknowledged `site`'s events up to `seq`.
    fn uploaded(&self, site: usize, seq: i64) {
        let mut rx = self.sites[site].sync().upload.clone().unwrap();
        self.rt.block_on(async {
            tokio::time::timeout(WAIT, rx.wait_for(|p| p.acked >= seq))
                .await
                .expect("the site's events did not reach the central in time")
                .unwrap();
        });
    }
}

#[test]
fn taps_at_a_site_reach_the_central_once_over_the_link_across_a_central_going_away() {
    let Some(mut w) = World::new("sync_upload", 2) else {
        return;
    };
    let urls = [w.sites_addr(0), w.sites_addr(1)];
    let hq = w.start_site("hq", &urls);
    w.caught_up(hq);
    for _ in 0..3 {
        w.tap(hq, &w.alice, w.ids.front_reader);
    }
    let ids = w.site_event_ids(hq);
    w.uploaded(hq, *ids.last().unwrap());
    // The first central goes away; taps go on at the site and reach the
    // other central over the link the follower moves to.
    let first = w.centrals[0].take().unwrap();
    w.rt.block_on(first.shutdown()).unwrap();
    w.centrals.swap(0, 1);
    w.tap(hq, &w.bob, w.ids.front_reader);
    w.tap(hq, &w.alice, w.ids.front_reader);
    let ids = w.site_event_ids(hq);
    let last = *ids.last().unwrap();
    w.uploaded(hq, last);
    let held =
        w.rt.block_on(w.central(0).loaded().store.site_events("hq", 1, last))
            .unwrap();
    let seqs: Vec<i64> = held.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, ids, "every site event at the central exactly once");
    let taps = held
        .iter()
        .filter(|e| e.event.event.kind == EventKind::Tap)
        .count();
    assert_eq!(taps, 5);
    // The central knows the site by its certificate, not by the batch.
    let state =
        w.rt.block_on(w.central(0).loaded().store.site_upload_state("hq"))
            .unwrap()
            .unwrap();
    assert_eq!(state.acked, last);
}

/// The central's view of its sites, read through its API with a viewer
/// token.
struct SitesApi {
    base: String,
    token: String,
}

impl SitesApi {
    fn new(w: &World) -> SitesApi {
        let store = w.central(0).loaded().store.clone();
        let token =
            w.rt.block_on(server::token::create(&store, "dash", store::Role::Viewer))
                .unwrap();
        SitesApi {
            base: w.central(0).url(),
            token,
        }
    }

    fn get(&self, path: &str) -> String {
        ureq::get(&format!("{}{path}", self.base))
            .set("Authorization", &format!("Bearer {}", self.token))
            .timeout(Duration::from_secs(20))
            .call()
            .unwrap()
            .into_string()
            .unwrap()
    }

    fn json(&self, path: &str) -> serde_json::Value {
        serde_json::from_str(&self.get(path)).unwrap()
    }

    /// Site `name` in `GET /api/v1/sites/status`, once `f` holds of it:
    /// read again after each link change or report central 0 records.
    fn site_when(
        &self,
        w: &World,
        name: &str,
        f: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let board = w.central(0).sync().board.clone().unwrap();
        let mut changes = board.changes();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            changes.borrow_and_update();
            let all = self.json("/api/v1/sites/status");
            let site = all["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["name"] == name)
                .cloned()
                .unwrap();
            if f(&site) {
                return site;
            }
            w.rt.block_on(async {
                tokio::time::timeout_at(deadline, changes.changed())
                    .await
                    .unwrap_or_else(|_| panic!("site {name} never got there: {site:#}"))
                    .unwrap()
            });
        }
    }

    /// The ids of `GET /api/v1/events?site=…` (every page).
    fn event_ids(&self, site: &str) -> Vec<i64> {
        let mut ids = Vec::new();
        let mut cursor = String::new();
        loop {
            let page = self.json(&format!("/api/v1/events?site={site}&limit=1000{cursor}"));
            ids.extend(
                page["events"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["id"].as_i64().unwrap()),
            );
            match page["next"].as_i64() {
                Some(n) => cursor = format!("&cursor={n}"),
                None => return ids,
            }
        }
    }
}

#[test]
fn the_central_shows_each_sites_link_lag_backlog_and_ages_and_filters_events_by_site() {
    let Some(mut w) = World::new("sync_status", 1) else {
        return;
    };
    let api = SitesApi::new(&w);
    let addr = w.sites_addr(0);
    let hq = w.start_site("hq", &[addr]);
    let lab = w.start_site("lab", &[addr]);
    // The status names every site entity, linked yet or not.
    let all = api.json("/api/v1/sites/status");
    assert_eq!(all["central"], true);
    let mut names: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["hq", "lab"]);

    // Caught up and uploaded: linked, nothing pending, nothing to upload.
    w.caught_up(hq);
    w.caught_up(lab);
    w.tap(hq, &w.alice, w.ids.front_reader);
    w.tap(hq, &w.bob, w.ids.front_reader);
    w.tap(lab, &w.bob, w.ids.lab_reader);
    let hq_last = *w.site_event_ids(hq).last().unwrap();
    let lab_last = *w.site_event_ids(lab).last().unwrap();
    w.uploaded(hq, hq_last);
    w.uploaded(lab, lab_last);
    let instance = w
        .central(0)
        .sync()
        .board
        .as_ref()
        .unwrap()
        .instance()
        .to_string();
    for (name, site, last) in [("hq", hq, hq_last), ("lab", lab, lab_last)] {
        let applied = w.status(site).borrow().applied.unwrap();
        let s = api.site_when(&w, name, |s| {
            s["upload"]["last_seq"] == last && s["changes"]["applied"] == applied
        });
        assert_eq!(s["link"]["state"], "up", "{s:#}");
        assert_eq!(s["link"]["up"], true);
        assert_eq!(s["link"]["central"], instance.as_str());
        assert_eq!(s["changes"]["pending"], 0, "{s:#}");
        assert_eq!(s["changes"]["behind_s"], 0);
        assert_eq!(s["upload"]["acked"], last);
        assert_eq!(s["upload"]["backlog"], 0);
        // Its change data confirmed by the central; the clock compared.
        assert_eq!(s["data_age"]["changes"]["state"], "confirmed", "{s:#}");
        assert_ne!(s["data_age"]["revocation"]["state"], "unknown");
        assert!(s["clock_skew_s"].is_number());
        assert!(s["reported_at"].is_string());
    }

    // Events filtered by site: exactly the events each site uploaded.
    let store = w.central(0).loaded().store.clone();
    for (name, last) in [("hq", hq_last), ("lab", lab_last)] {
        let held: Vec<i64> =
            w.rt.block_on(store.site_events(name, 1, last))
                .unwrap()
                .iter()
                .map(|e| e.event.id.0)
                .collect();
        assert_eq!(held.len() as i64, last);
        let mut listed = api.event_ids(name);
        listed.sort();
        let mut held = held;
        held.sort();
        assert_eq!(listed, held, "events?site={name}");
    }
    assert!(api.event_ids("nowhere").is_empty());

    // Uploads held up at the central (its row of the site locked): the
    // site's next taps show as backlog, then none once they are in.
    let mut lock = w.rt.block_on(async {
        use sqlx::Connection;
        let mut c = sqlx::PgConnection::connect(w.cluster.url()).await.unwrap();
        sqlx::query("BEGIN").execute(&mut c).await.unwrap();
        sqlx::query("SELECT acked FROM site_uploads WHERE site = 'hq' FOR UPDATE")
            .execute(&mut c)
            .await
            .unwrap();
        c
    });
    w.tap(hq, &w.alice, w.ids.front_reader);
    w.tap(hq, &w.alice, w.ids.front_reader);
    let now_last = *w.site_event_ids(hq).last().unwrap();
    assert!(now_last > hq_last);
    let s = api.site_when(&w, "hq", |s| {
        s["upload"]["last_seq"].as_i64().unwrap_or(0) >= now_last
    });
    let reported = s["upload"]["last_seq"].as_i64().unwrap();
    assert_eq!(s["upload"]["acked"], hq_last, "{s:#}");
    assert_eq!(s["upload"]["backlog"], reported - hq_last, "{s:#}");
    let text = api.get("/metrics");
    let metric = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert!(metric("pivgate_site_upload_backlog{site=\"hq\"}") >= (now_last - hq_last) as f64);
    assert_eq!(metric("pivgate_site_link_up{site=\"hq\"}"), 1.0);
    assert_eq!(metric("pivgate_site_change_lag{site=\"lab\"}"), 0.0);
    assert!(metric("pivgate_site_data_age_seconds{site=\"hq\",data=\"changes\"}") >= 0.0);
    w.rt.block_on(async {
        sqlx::query("ROLLBACK").execute(&mut lock).await.unwrap();
    });
    w.uploaded(hq, reported);
    let s = api.site_when(&w, "hq", |s| {
        s["upload"]["acked"].as_i64().unwrap_or(0) >= reported
    });
    assert_eq!(s["upload"]["backlog"], 0, "{s:#}");

    // A site that goes away shows its link down; a change of its part made
    // meanwhile shows as pending, until it is back and has applied it.
    let lab_site = w.sites.remove(lab);
    w.site_names.remove(lab);
    let lab_applied = lab_site
        .sync()
        .follower
        .as_ref()
        .unwrap()
        .status()
        .borrow()
        .applied;
    w.rt.block_on(lab_site.shutdown()).unwrap();
    let s = api.site_when(&w, "lab", |s| s["link"]["state"] == "down");
    assert_eq!(s["link"]["up"], false);
    let alice = w.ids.alice.clone().unwrap();
    let mut g = w.ids.lab_group.clone().unwrap();
    g.cardholders.push(alice.id);
    w.change(EntityChange::Replace(g));
    let s = api.site_when(&w, "lab", |s| s["changes"]["pending"] != 0);
    assert_eq!(s["changes"]["pending"], 1, "{s:#}");
    assert_eq!(s["changes"]["applied"], lab_applied.unwrap());
    assert_eq!(s["link"]["state"], "down");
    let lab = w.start_site("lab", &[addr]);
    let applied = w.caught_up(lab).applied.unwrap();
    let s = api.site_when(&w, "lab", |s| {
        s["link"]["state"] == "up" && s["changes"]["applied"] == applied
    });
    assert_eq!(s["changes"]["pending"], 0, "{s:#}");
    assert_eq!(s["link"]["followed_from"], lab_applied.unwrap());
}

#[test]
fn a_site_refuses_local_edits_of_the_centrals_data_and_keeps_its_own_actions() {
    let Some(mut w) = World::new("sync_managed", 1) else {
        return;
    };
    let hq = w.start_site("hq", &[w.sites_addr(0)]);
    w.caught_up(hq);
    let site = &w.sites[hq];
    let store = site.loaded().store.clone();
    let (admin, operator) = w.rt.block_on(async {
        (
            server::token::create(&store, "site-admin", store::Role::Admin)
                .await
                .unwrap(),
            server::token::create(&store, "site-ops", store::Role::Operator)
                .await
                .unwrap(),
        )
    });
    let e = w.site_entities(hq);
    let door = e.doors[0].id.0;
    let alice = w.ids.alice.as_ref().unwrap().id.0;
    let call = |method: &str, path: &str, token: &str, body: &str| {
        let r = ureq::request(method, &format!("{}{path}", site.url()))
            .set("Authorization", &format!("Bearer {token}"))
            .send_string(body);
        let (status, r) = match r {
            Ok(r) => (r.status(), r),
            Err(ureq::Error::Status(s, r)) => (s, r),
            Err(e) => panic!("{method} {path}: {e}"),
        };
        let body: serde_json::Value = serde_json::from_reader(r.into_reader()).unwrap_or_default();
        (status, body)
    };
    let central = format!("https://{}", w.sites_addr(0));
    // Entities, enrollment, door modes and lockdowns are the central's.
    let refused = [
        (
            "POST",
            "/api/v1/doors".to_string(),
            format!(
                r#"{{"site": {}, "name": "back", "mechanism": "pki-cak"}}"#,
                e.sites[0].id.0
            ),
        ),
        (
            "DELETE",
            format!("/api/v1/cardholders/{alice}"),
            String::new(),
        ),
        (
            "PATCH",
            format!("/api/v1/doors/{door}"),
            r#"{"name": "renamed"}"#.to_string(),
        ),
        (
            "PUT",
            format!("/api/v1/doors/{door}/mode"),
            r#"{"mode": "unlocked"}"#.to_string(),
        ),
        (
            "POST",
            format!("/api/v1/sites/{}/lockdown", e.sites[0].id.0),
            String::new(),
        ),
        (
            "POST",
            "/api/v1/credentials/enroll".to_string(),
            r#"{"cardholder": 1, "certificate": "x"}"#.to_string(),
        ),
    ];
    for (method, path, body) in &refused {
        let (status, answer) = call(method, path, &admin, body);
        assert_eq!(status, 409, "{method} {path}: {answer}");
        assert_eq!(answer["code"], "managed-by-central", "{method} {path}");
        assert_eq!(answer["central"], central.as_str());
        assert!(
            answer["error"].as_str().unwrap().contains(&central),
            "{answer}"
        );
    }
    // Nothing changed at the site.
    assert_eq!(w.site_entities(hq), e);
    // Without a token it is still 401 (the role is checked first).
    let r = ureq::delete(&format!("{}/api/v1/cardholders/{alice}", site.url())).call();
    assert!(matches!(r, Err(ureq::Error::Status(401, _))));
    // Its own actions stay: a momentary unlock, its tokens.
    let (status, answer) = call(
        "POST",
        &format!("/api/v1/doors/{door}/unlock"),
        &operator,
        r#"{"reason": "delivery"}"#,
    );
    assert_eq!(status, 200, "{answer}");
    let (status, _) = call("DELETE", "/api/v1/tokens/site-ops", &admin, "");
    assert_eq!(status, 204);
    // The central's changes still reach it, and the central takes edits.
    assert!(w.access(0).managed_by().is_none());
    let alice = w.ids.alice.clone().unwrap();
    w.change(EntityChange::Replace(Cardholder {
        status: CardholderStatus::Suspended {
            reason: "left".into(),
        },
        ..alice
    }));
    w.caught_up(hq);
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert_eq!(r.code(), "cardholder-suspended");
}

#[test]
fn the_uploader_sends_its_backlog_as_soon_as_the_central_is_back_not_after_its_back_off() {
    let Some(mut w) = World::new("sync_upload_wake", 1) else {
        return;
    };
    let addr = w.sites_addr(0);
    // A back-off far longer than the test waits: only the link coming
    // back can make the uploader send in time.
    let mut c = w.base.clone();
    c.data_dir = w.dir.path().join("site-hq");
    let mut central = w.central_config("hq", &[addr]);
    central.upload_retry_min_ms = 600_000;
    central.upload_retry_max_ms = 600_000;
    c.central = Some(central);
    w.sites
        .push(w.rt.block_on(Service::start(c, None)).unwrap());
    w.site_names.push("hq".into());
    let hq = w.sites.len() - 1;
    w.caught_up(hq);
    w.tap(hq, &w.alice, w.ids.front_reader);
    w.uploaded(hq, *w.site_event_ids(hq).last().unwrap());
    // The central goes away; taps go on; the uploader fails and backs off.
    let central = w.centrals[0].take().unwrap();
    w.rt.block_on(central.shutdown()).unwrap();
    w.wait(hq, |s| s.central.is_none());
    let mut progress = w.sites[hq].sync().upload.clone().unwrap();
    let failures = progress.borrow().failures;
    for _ in 0..3 {
        w.tap(hq, &w.alice, w.ids.front_reader);
    }
    w.rt.block_on(async {
        tokio::time::timeout(WAIT, progress.wait_for(|p| p.failures > failures))
            .await
            .expect("the uploader did not try while the central was away")
            .unwrap();
    });
    let last = *w.site_event_ids(hq).last().unwrap();
    assert!(progress.borrow().acked < last);
    // The central comes back on the same address: the follower reconnects
    // and the backlog goes up well within the back-off.
    w.start_central_on(addr);
    w.centrals.swap(0, 1);
    w.rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(20),
            progress.wait_for(|p| p.acked >= last),
        )
        .await
        .expect("the backlog did not go up once the central was back")
        .unwrap();
    });
    assert!(progress.borrow().woken >= 1, "{:?}", *progress.borrow());
    let held =
        w.rt.block_on(w.central(0).loaded().store.site_events("hq", 1, last))
            .unwrap();
    let seqs: Vec<i64> = held.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, w.site_event_ids(hq));
}

/// Path → body.
type Files = Arc<std::sync::Mutex<Vec<(String, Vec<u8>)>>>;

/// Serves the test PKI's CRLs over HTTP on loopback (for the centrals
/// only), until dropped.
struct CrlServer {
    base: String,
    files: Files,
    addr: SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CrlServer {
    fn start() -> CrlServer {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let files: Files = Arc::default();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (f, st) = (files.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if st.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { break };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                }
                let body = f
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, b)| b.clone());
                let _ = match body {
                    Some(b) => write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        b.len()
                    )
                    .and_then(|_| stream.write_all(&b)),
                    None => write!(
                        stream,
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    ),
                };
            }
        });
        CrlServer {
            base: format!("http://{addr}/crl"),
            files,
            addr,
            stop,
            thread: Some(thread),
        }
    }

    fn publish(&self, pki: &TestPki) {
        *self.files.lock().unwrap() = vec![
            ("/crl/root.crl".into(), pki.root_crl_der().to_vec()),
            (
                "/crl/intermediate.crl".into(),
                pki.intermediate_crl_der().to_vec(),
            ),
        ];
    }
}

impl Drop for CrlServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_crl_the_central_downloaded_reaches_a_site_that_cannot_download_it_and_refuses_the_card() {
    let crls = CrlServer::start();
    let Some(mut w) = World::with_crls("sync_crl", 1, Some(crls.base.clone()), |pki| {
        crls.publish(pki)
    }) else {
        return;
    };
    let hq = w.start_site("hq", &[w.sites_addr(0)]);
    w.caught_up(hq);
    // The site downloads nothing: its CRLs are its configured files and
    // what the central sends.
    assert!(!w.sites[hq].loaded().revocation.downloads());
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert!(r.granted(), "{:?}", r.reason());
    let central = w.central(0).loaded().revocation.clone();
    assert_eq!(
        w.rt.block_on(central.refresh_now()).unwrap(),
        0,
        "{:?}",
        central.crl_status()
    );
    w.caught_up(hq);
    // The site's revocation data is as old as the central's downloads
    // that brought it (as the feed carried them).
    assert!(central.crl_status().iter().all(|c| c.fetched_at.is_some()));
    let sent =
        w.rt.block_on(w.central(0).loaded().store.revocation_data_upto(i64::MAX))
            .unwrap();
    assert_eq!(sent.len(), 2, "{sent:?}");
    let oldest = sent.iter().map(|d| d.fetched_at).min().unwrap();
    let freshness = w.sites[hq].loaded().controller.freshness();
    assert_eq!(
        freshness.revocation,
        access::AsOf::At {
            at: Timestamp::from_second(oldest).unwrap()
        }
    );
    // The issuer revokes Alice's card; the central downloads the new CRL
    // and the site, which never reaches the CRL server, refuses her.
    let alice_cak = w.alice.slot(0x9E).unwrap().certificate.clone();
    w.pki.revoke(&alice_cak, None).unwrap();
    crls.publish(&w.pki);
    assert_eq!(w.rt.block_on(central.refresh_now()).unwrap(), 0);
    w.caught_up(hq);
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert_eq!(r.code(), "certificate-revoked", "{:?}", r.reason());
    let after = w.sites[hq].loaded().controller.freshness();
    match after.revocation {
        access::AsOf::At { at } => assert!(at.as_second() >= oldest),
        other => panic!("{other:?}"),
    }
    // Held in the site's database: still refused after a restart, before
    // any link to the central.
    let site = w.sites.pop().unwrap();
    w.site_names.pop();
    w.rt.block_on(site.shutdown()).unwrap();
    drop(crls);
    // (The central's revocation work holds its event log open.)
    drop(central);
    let first = w.centrals[0].take().unwrap();
    w.rt.block_on(first.shutdown()).unwrap();
    let addr = "127.0.0.1:9".parse().unwrap();
    let hq = w.start_site("hq", &[addr]);
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert_eq!(r.code(), "certificate-revoked", "{:?}", r.reason());
}

#[test]
fn a_site_back_from_away_counts_as_connected_only_once_it_applied_what_changed_meanwhile() {
    let Some(mut w) = World::new("sync_back", 1) else {
        return;
    };
    let hq = w.start_site("hq", &[w.sites_addr(0)]);
    let s = w.caught_up(hq);
    let before = s.applied.unwrap();
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert!(r.granted(), "{:?}", r.reason());
    // The site is away; Alice is suspended at the central meanwhile.
    let site = w.sites.pop().unwrap();
    w.site_names.pop();
    w.rt.block_on(site.shutdown()).unwrap();
    let alice = w.ids.alice.clone().unwrap();
    w.change(EntityChange::Replace(Cardholder {
        status: CardholderStatus::Suspended {
            reason: "left".into(),
        },
        ..alice
    }));
    // Back: the moment it shows a central (and its uploader and reporter
    // get the link), the suspension is already applied.
    let hq = w.start_site("hq", &[w.sites_addr(0)]);
    let mut rx = w.status(hq);
    let seen = w.rt.block_on(async {
        tokio::time::timeout(WAIT, async {
            loop {
                let s = rx.borrow_and_update().clone();
                if s.central.is_some() {
                    return s;
                }
                rx.changed().await.unwrap();
            }
        })
        .await
        .expect("the site never reconnected")
    });
    assert!(
        seen.applied.is_some_and(|a| a > before),
        "connected at position {:?}, before the change made while away (after {before})",
        seen.applied
    );
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert_eq!(r.code(), "cardholder-suspended", "{:?}", r.reason());
}

#[test]
fn an_ocsp_answer_the_central_got_reaches_a_site_that_cannot_ask_and_refuses_the_card() {
    if !responder::openssl() {
        eprintln!("openssl not installed; skipping");
        return;
    }
    let files = tempfile::tempdir().unwrap();
    let mut started = None;
    let Some(mut w) = World::with_ocsp("sync_ocsp", |pki| {
        // Told about the cards once they are issued.
        let (r, url) = responder::responder(files.path(), pki, &[pki.intermediate_der()], &[]);
        started = Some(r);
        url
    }) else {
        return;
    };
    let responder = started.unwrap();
    let alice_cak = w.alice.slot(0x9E).unwrap().certificate.clone();
    let bob_cak = w.bob.slot(0x9E).unwrap().certificate.clone();
    responder.set(&[&alice_cak, &bob_cak], &[]);
    let hq = w.start_site("hq", &[w.sites_addr(0)]);
    w.caught_up(hq);
    // No answer yet: the site cannot tell whether Alice's card is revoked.
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert_eq!(r.code(), "revocation-unavailable", "{:?}", r.reason());
    // The central asks the responder (about the issuing CA too, which
    // that responder cannot answer for: the root's CRL covers the CA);
    // the answers go down the feed and the site lets Alice in on them.
    let central = w.central(0).loaded().revocation.clone();
    w.rt.block_on(central.refresh_ocsp_now()).unwrap();
    assert_eq!(central.ocsp_answers(), 2);
    w.caught_up(hq);
    let site_revocation = w.sites[hq].loaded().revocation.clone();
    assert_eq!(site_revocation.central_ocsp_answers(), 2);
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert!(r.granted(), "{:?}", r.reason());
    // The responder now says Alice's card is revoked; the central asks
    // again and the site, which never reaches the responder, refuses her.
    responder.set(&[&bob_cak], &[&alice_cak]);
    w.rt.block_on(central.refresh_ocsp_now()).unwrap();
    w.caught_up(hq);
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert_eq!(r.code(), "certificate-revoked", "{:?}", r.reason());
    assert_eq!(site_revocation.central_ocsp_answers(), 2);
    // The snapshot carries the latest answer of each certificate, to a
    // site that knows them; a site a release before them (schema 13) is
    // sent its CRLs alone.
    let kinds = |schema: i64| -> Vec<String> {
        let cfg = w.central_config("hq", &[w.sites_addr(0)]);
        let c = Arc::new(Connector::new(&cfg).unwrap().presenting_schema(schema));
        let link = c.link(0);
        let resp =
            w.rt.block_on(link.send(link.request(
                axum::http::Method::GET,
                "/sync/v1/snapshot?data=true",
                Default::default(),
            )))
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let body: serde_json::Value = serde_json::from_slice(resp.body()).unwrap();
        body["revocation_data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["kind"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(kinds(server::sync::version::current()), ["ocsp", "ocsp"]);
    assert!(kinds(13).is_empty());
    // Were the central to deliver a forged answer (good, signed by a key
    // that is not the issuer's), the site would not hold it: with no
    // answer about Alice's card it cannot tell, and does not let her in.
    let other = TestPki::generate(TestPkiOptions::default()).unwrap();
    let (forger, _) = responder::responder_signed_by(
        &files.path().join("forger"),
        &w.pki,
        &other,
        &[&alice_cak],
        &[],
    );
    let forged = forger.ask(&alice_cak);
    drop(forger);
    let about = pki::ocsp::OcspResponse::from_der(forged.clone()).unwrap();
    assert!(matches!(
        about.responses[0].status,
        pki::ocsp::CertStatus::Good
    ));
    let source = server::revocation::ocsp_source(&about.responses[0].id);
    let central_store = w.central(0).loaded().store.clone();
    let forged = store::RevocationData::ocsp(&source, &forged, Timestamp::now().as_second());
    w.rt.block_on(central_store.record_revocation_data(&forged))
        .unwrap()
        .unwrap();
    w.caught_up(hq);
    assert_eq!(site_revocation.central_ocsp_answers(), 1);
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert_eq!(r.code(), "revocation-unavailable", "{:?}", r.reason());
    // The central's next answer, genuine, is held again.
    w.rt.block_on(central.refresh_ocsp_now()).unwrap();
    w.caught_up(hq);
    assert_eq!(site_revocation.central_ocsp_answers(), 2);
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert_eq!(r.code(), "certificate-revoked", "{:?}", r.reason());
    // Held in the site's database: still refused after a restart, before
    // any link to the central.
    drop(site_revocation);
    let site = w.sites.pop().unwrap();
    w.site_names.pop();
    w.rt.block_on(site.shutdown()).unwrap();
    drop(responder);
    // (The central's revocation work holds its event log open.)
    drop(central);
    let first = w.centrals[0].take().unwrap();
    w.rt.block_on(first.shutdown()).unwrap();
    let addr = "127.0.0.1:9".parse().unwrap();
    let hq = w.start_site("hq", &[addr]);
    assert_eq!(w.sites[hq].loaded().revocation.central_ocsp_answers(), 2);
    let r = w.tap(hq, &w.alice, w.ids.front_reader);
    assert_eq!(r.code(), "certificate-revoked", "{:?}", r.reason());
}
