//! The tap pipeline end to end with in-process software cards, a test PKI
//! and a SQLite event log: every decision is committed before the door
//! opens, and refusals from authentication and from the access rules are
//! both recorded with their code and reason.

use std::sync::Arc;
use std::time::Duration;

use access::jiff::Timestamp;
use access::{
    AccessGroup, Cardholder, CardholderId, CardholderStatus, Credential, CredentialId,
    CredentialState, Door, DoorId, Entities, GroupId, Mechanism, Reader, ReaderId, Schedule,
    ScheduleId, Site, SiteId,
};
use auth::{Authenticator, FixedPin, Settings, StageName};
use card::Card;
use host::InProcess;
use pki_issue::{CardCredentials, CardOptions, TestPki, TestPkiOptions};
use server::admin::{AccessData, EntityChange, SetMode};
use server::door::{CommandError, Controller, SimulatedOutput, TapResult};
use store::testing::{postgres_or_skip, TempCluster};
use store::{EventLog, EventQuery, EventResult, Store};

const FRONT: ReaderId = ReaderId(1);
const SERVER_ROOM: ReaderId = ReaderId(2);
/// A Sunday noon: inside "always", outside "weekdays 07-19".
const SUNDAY_NOON: &str = "2026-11-22T12:00:00Z";

struct Site_ {
    rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
    store: Store,
    sql: Store,
    controller: Arc<Controller>,
    output: Arc<SimulatedOutput>,
    pki: TestPki,
    alice: CardCredentials,
    bob: CardCredentials,
    dave: CardCredentials,
    /// Dropped last: the database outlives every handle to it.
    _cluster: Option<TempCluster>,
}

fn sha256(der: &[u8]) -> access::Sha256 {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, der);
    access::Sha256::from_slice(d.as_ref()).unwrap()
}

fn credential(id: i64, holder: i64, c: &CardCredentials) -> Credential {
    Credential {
        id: CredentialId(id),
        cardholder: CardholderId(holder),
        card_uuid: Some(access::CardUuid(c.uuid)),
        fasc_n: Some(access::FascN(c.fascn.encode().unwrap())),
        cert_sha256: Some(sha256(&c.slot(0x9E).unwrap().certificate)),
        spki_sha256: None,
        expires_at: None,
        enrolled_at: Timestamp::UNIX_EPOCH,
        enrolled_by: "test".into(),
        state: CredentialState::Active,
    }
}

fn holder(id: i64, name: &str) -> Cardholder {
    Cardholder {
        id: CardholderId(id),
        name: name.into(),
        status: CardholderStatus::Active,
        valid_from: None,
        valid_until: None,
    }
}

fn site() -> Site_ {
    site_on(None)
}

/// The site on PostgreSQL when `cluster` is given, else SQLite.
fn site_on(cluster: Option<TempCluster>) -> Site_ {
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let card = |name: &str| {
        pki.issue_card(&CardOptions {
            cardholder: name.into(),
            ..CardOptions::default()
        })
        .unwrap()
    };
    let (alice, bob, dave) = (card("Alice"), card("Bob"), card("Dave"));
    let door = |id: i64, name: &str, mechanism| Door {
        id: DoorId(id),
        site: SiteId(1),
        name: name.into(),
        mechanism,
        allow_low_assurance: false,
        passback: Default::default(),
        mode: Default::default(),
        unlock_schedule: None,
        first_card_unlock: false,
        max_staleness_s: None,
        stale_policy: Default::default(),
    };
    let e = Entities {
        sites: vec![Site {
            id: SiteId(1),
            name: "HQ".into(),
            time_zone: "UTC".into(),
            lockdown: false,
        }],
        doors: vec![
            door(1, "Front door", Mechanism::PkiCak),
            door(2, "Server room", Mechanism::PkiAuth),
        ],
        readers: vec![
            Reader {
                id: FRONT,
                door: DoorId(1),
                name: "front".into(),
                connection: "sim:front".into(),
            },
            Reader {
                id: SERVER_ROOM,
                door: DoorId(2),
                name: "server room".into(),
                connection: "sim:server".into(),
            },
        ],
        cardholders: vec![holder(1, "Alice"), holder(3, "Dave")],
        credentials: vec![credential(1, 1, &alice), credential(3, 3, &dave)],
        schedules: vec![
            Schedule {
                id: ScheduleId(1),
                name: "always".into(),
                windows: vec!["mon-sun 00:00-24:00".parse().unwrap()],
                holiday_windows: vec![],
            },
            Schedule {
                id: ScheduleId(2),
                name: "weekdays 07-19".into(),
                windows: vec!["mon-fri 07:00-19:00".parse().unwrap()],
                holiday_windows: vec![],
            },
        ],
        groups: vec![
            AccessGroup {
                id: GroupId(1),
                name: "staff".into(),
                schedule: ScheduleId(1),
                doors: vec![DoorId(1), DoorId(2)],
                cardholders: vec![CardholderId(1)],
            },
            AccessGroup {
                id: GroupId(2),
                name: "day shift".into(),
                schedule: ScheduleId(2),
                doors: vec![DoorId(1)],
                cardholders: vec![CardholderId(3)],
            },
        ],
        holidays: vec![],
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sql = match &cluster {
        Some(c) => rt.block_on(Store::connect(c.url())).unwrap(),
        None => rt.block_on(Store::open_data_dir(dir.path())).unwrap(),
    };
    let store: Store = sql.clone();
    rt.block_on(store.import_entities(&e)).unwrap();
    let snapshot = rt.block_on(store.load_snapshot()).unwrap();
    let log = {
        let _g = rt.enter();
        EventLog::start(store.clone(), 0).0
    };
    let authn = Arc::new(Authenticator::new(
        pki.trust_store(),
        pki.crl_set().unwrap(),
        Settings::default(),
    ));
    let output = Arc::new(SimulatedOutput::new());
    let noon: Timestamp = SUNDAY_NOON.parse().unwrap();
    let controller = Controller::new(
        authn,
        snapshot,
        log,
        output.clone(),
        rt.handle().clone(),
        Duration::from_millis(3000),
    )
    .with_clock(Arc::new(move || noon));
    let controller = Arc::new(controller);
    Site_ {
        rt,
        _dir: dir,
        store,
        sql,
        controller,
        output,
        pki,
        alice,
        bob,
        dave,
        _cluster: cluster,
    }
}

fn tap(s: &Site_, c: &CardCredentials, reader: ReaderId, pin: Option<&str>) -> TapResult {
    let mut t = InProcess::new(Card::new(c.card_image(Some(7)).unwrap()));
    let mut pin = pin.map(FixedPin::new);
    s.controller
        .tap(
            &mut t,
            reader,
            pin.as_mut().map(|p| p as &mut dyn auth::PinSource),
            None,
        )
        .unwrap()
}

/// The stored event of `r`.
fn stored(s: &Site_, r: &TapResult) -> store::Event {
    let id = *r.event.as_ref().expect("committed");
    let page =
        s.rt.block_on(s.store.query_events(&EventQuery {
            cursor: Some(store::EventId(id.0 - 1)),
            limit: 1,
            ..EventQuery::default()
        }))
        .unwrap();
    assert_eq!(page.events[0].id, id);
    page.events.into_iter().next().unwrap()
}

fn stage_names(r: &TapResult) -> Vec<StageName> {
    r.transaction.stages.iter().map(|s| s.name).collect()
}

#[test]
fn granted_tap_is_committed_then_opens_the_door() {
    granted_tap_is_committed_then_opens_the_door_on(&site());
}

fn granted_tap_is_committed_then_opens_the_door_on(s: &Site_) {
    let before = s.output.releases().len();
    let r = tap(s, &s.alice, FRONT, None);
    assert!(r.granted(), "{:?} {:?}", r.code(), r.reason());
    assert_eq!(r.code(), "granted");
    assert!(r.opened);
    let names = stage_names(&r);
    assert_eq!(
        &names[names.len() - 2..],
        [StageName::Decide, StageName::Signal]
    );
    let releases = s.output.releases();
    assert_eq!(releases.len(), before + 1);
    let last = releases.last().unwrap();
    assert_eq!(last.door, DoorId(1));
    assert_eq!(last.closes - last.opened, Duration::from_millis(3000));
    let e = stored(s, &r);
    assert_eq!(e.event.result, Some(EventResult::Granted));
    assert_eq!(e.event.cardholder, Some(CardholderId(1)));
    assert_eq!(e.event.reader, Some(FRONT));
    // The stored transaction is the table up to the decision.
    let t: auth::Transaction = serde_json::from_value(e.event.data.unwrap()).unwrap();
    assert_eq!(t.stages.last().unwrap().name, StageName::Decide);
    assert!(t.outcome.granted());
    // A repeat tap (fast path) is granted the same way.
    let r2 = tap(s, &s.alice, FRONT, None);
    assert!(r2.granted(), "{:?}", r2.reason());
    assert_eq!(r2.transaction.path, auth::PathTaken::Fast);
    assert!(r2.event.as_ref().unwrap() > r.event.as_ref().unwrap());
}

#[test]
fn card_not_enrolled_is_refused_and_recorded() {
    card_not_enrolled_is_refused_and_recorded_on(&site());
}

fn card_not_enrolled_is_refused_and_recorded_on(s: &Site_) {
    let before = s.output.releases().len();
    let r = tap(s, &s.bob, FRONT, None);
    assert!(!r.granted() && !r.opened);
    assert_eq!(r.code(), "not-enrolled");
    assert!(
        r.reason().unwrap().contains("not enrolled"),
        "{:?}",
        r.reason()
    );
    let e = stored(s, &r);
    assert_eq!(e.event.result, Some(EventResult::Refused));
    assert_eq!(e.event.code.as_deref(), Some("not-enrolled"));
    assert_eq!(s.output.releases().len(), before);
}

#[test]
fn outside_schedule_names_the_schedule() {
    outside_schedule_names_the_schedule_on(&site());
}

fn outside_schedule_names_the_schedule_on(s: &Site_) {
    let r = tap(s, &s.dave, FRONT, None);
    assert_eq!(r.code(), "outside-schedule");
    assert!(
        r.reason().unwrap().contains("weekdays 07-19"),
        "{:?}",
        r.reason()
    );
    assert!(!r.opened);
    assert_eq!(
        stored(s, &r).event.code.as_deref(),
        Some("outside-schedule")
    );
}

#[test]
fn revoked_after_crl_refresh_is_refused_by_authentication() {
    revoked_after_crl_refresh_is_refused_by_authentication_on(&mut site());
}

fn revoked_after_crl_refresh_is_refused_by_authentication_on(s: &mut Site_) {
    let before = s.output.releases().len();
    assert!(tap(s, &s.alice, FRONT, None).granted());
    let cak = s.alice.slot(0x9E).unwrap().certificate.clone();
    s.pki.revoke(&cak, None).unwrap();
    s.controller
        .authenticator()
        .set_crls(s.pki.crl_set().unwrap());
    let r = tap(s, &s.alice, FRONT, None);
    assert!(!r.granted() && !r.opened);
    assert!(
        r.decision.is_none(),
        "authentication refused before the decision"
    );
    assert!(r.code().contains("revoked"), "{}", r.code());
    assert!(r.reason().unwrap().contains("revoked"), "{:?}", r.reason());
    let e = stored(s, &r);
    assert_eq!(e.event.result, Some(EventResult::Refused));
    assert_eq!(e.event.code.as_deref(), Some(r.code()));
    assert_eq!(e.event.door, Some(DoorId(1)));
    // The audit record names whose revoked card it was.
    assert_eq!(e.event.credential, Some(CredentialId(1)));
    assert_eq!(e.event.cardholder, Some(CardholderId(1)));
    assert_eq!(
        s.output.releases().len(),
        before + 1,
        "only the first tap opened"
    );
}

#[test]
fn card_and_pin_at_a_pki_auth_door() {
    card_and_pin_at_a_pki_auth_door_on(&site());
}

fn card_and_pin_at_a_pki_auth_door_on(s: &Site_) {
    let r = tap(s, &s.alice, SERVER_ROOM, Some("123456"));
    assert!(r.granted(), "{:?} {:?}", r.code(), r.reason());
    assert_eq!(r.transaction.mechanism, auth::Mechanism::PkiAuth);
    assert_eq!(r.output_error, None);
    assert_eq!(s.output.releases()[0].door, DoorId(2));

    let r = tap(s, &s.alice, SERVER_ROOM, Some("999999"));
    assert_eq!(r.code(), "wrong-pin");
    assert!(!r.opened);
    assert_eq!(stored(s, &r).event.code.as_deref(), Some("wrong-pin"));

    let r = tap(s, &s.alice, SERVER_ROOM, None);
    assert_eq!(r.code(), "pin-unavailable");
    assert_eq!(s.output.releases().len(), 1);
}

#[test]
fn unknown_reader_records_nothing() {
    let s = site();
    let mut t = InProcess::new(Card::new(s.alice.card_image(Some(7)).unwrap()));
    let e = s
        .controller
        .tap(&mut t, ReaderId(99), None, None)
        .unwrap_err();
    assert!(e.to_string().contains("not bound"), "{e}");
    assert_eq!(s.controller.log().stats().events, 0);
}

#[test]
fn a_tap_whose_event_cannot_be_committed_does_not_open() {
    let s = site();
    // Take the event table away under the writer: the commit fails.
    s.rt.block_on(sqlx::query("DROP TABLE events").execute(s.sql.pool()))
        .unwrap();
    let r = tap(&s, &s.alice, FRONT, None);
    assert!(r.event.is_err());
    assert!(!r.granted() && !r.opened);
    assert_eq!(r.code(), "event-not-committed");
    assert!(
        r.reason().unwrap().contains("stayed shut"),
        "{:?}",
        r.reason()
    );
    assert!(
        r.decision.as_ref().unwrap().is_granted(),
        "the rules allowed it"
    );
    assert!(s.output.releases().is_empty());
    assert_eq!(s.controller.log().stats().failed_commits, 1);
}

#[test]
fn momentary_unlock_command_is_logged_first() {
    let s = site();
    let id =
        s.rt.block_on(
            s.controller
                .unlock(DoorId(1), "ops-token", Some("delivery"), false),
        )
        .unwrap();
    assert!(id.0 > 0);
    let releases = s.output.releases();
    assert_eq!(releases.len(), 1);
    let page =
        s.rt.block_on(s.store.query_events(&EventQuery::default()))
            .unwrap();
    assert_eq!(page.events[0].event.actor.as_deref(), Some("ops-token"));
    assert_eq!(page.events[0].event.kind, store::EventKind::DoorCommand);
    let reason = page.events[0].event.reason.as_deref().unwrap();
    assert!(reason.ends_with("by ops-token: delivery"), "{reason}");
    assert!(s
        .rt
        .block_on(s.controller.unlock(DoorId(9), "x", None, false))
        .is_err());
}

#[test]
fn the_pipeline_on_postgresql() {
    let Some(cluster) = postgres_or_skip("the_pipeline_on_postgresql") else {
        return;
    };
    let mut s = site_on(Some(cluster));
    assert_eq!(s.sql.backend(), store::Backend::Postgres);
    granted_tap_is_committed_then_opens_the_door_on(&s);
    card_not_enrolled_is_refused_and_recorded_on(&s);
    outside_schedule_names_the_schedule_on(&s);
    revoked_after_crl_refresh_is_refused_by_authentication_on(&mut s);
}

/// Prints the service's own share of a tap (decide, and signal = durable
/// commit + output) over repeated fast-path taps on SQLite; run with
/// `--release -- --nocapture` for the figures.
#[test]
fn decide_and_signal_stage_times() {
    let s = site();
    let mut card = InProcess::new(Card::new(s.alice.card_image(Some(7)).unwrap()));
    let n = 200;
    let (mut decide, mut signal, mut total) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let r = s.controller.tap(&mut card, FRONT, None, None).unwrap();
        assert!(r.granted(), "{:?}", r.reason());
        let us = |name| r.transaction.stage(name).unwrap().wall_us;
        decide.push(us(StageName::Decide));
        signal.push(us(StageName::Signal));
        total.push(r.transaction.total().wall_us);
    }
    assert_eq!(s.controller.log().stats().events, n as u64);
    for v in [&mut decide, &mut signal, &mut total] {
        v.sort_unstable();
    }
    let p = |v: &[u64], q: f64| v[((v.len() - 1) as f64 * q) as usize];
    println!(
        "{n} sequential fast-path taps on SQLite: decide p50 {} µs p99 {} µs; signal (durable commit + output) p50 {} µs p99 {} µs; whole tap p50 {} µs p99 {} µs",
        p(&decide, 0.5),
        p(&decide, 0.99),
        p(&signal, 0.5),
        p(&signal, 0.99),
        p(&total, 0.5),
        p(&total, 0.99)
    );
}

/// A PIN typed at the keypad after `meanwhile` ran: what an admin does while
/// a tap waits at a card + PIN door.
struct PinAfter<F: FnMut()>(Option<F>);

impl<F: FnMut()> auth::PinSource for PinAfter<F> {
    fn pin(&mut self) -> Result<zeroize::Zeroizing<String>, String> {
        if let Some(mut meanwhile) = self.0.take() {
            meanwhile();
        }
        Ok(zeroize::Zeroizing::new("123456".into()))
    }
}

fn tap_while(
    s: &Site_,
    c: &CardCredentials,
    reader: ReaderId,
    meanwhile: impl FnMut(),
) -> TapResult {
    let mut t = InProcess::new(Card::new(c.card_image(Some(7)).unwrap()));
    let mut pin = PinAfter(Some(meanwhile));
    s.controller
        .tap(&mut t, reader, Some(&mut pin), None)
        .unwrap()
}

fn lock_door(s: &Site_, access: &AccessData, door: DoorId) {
    let edit = SetMode {
        door,
        mode: access::DoorMode::Locked,
        reason: Some("lockdown".into()),
    };
    s.rt.block_on(access.change("admin", edit)).unwrap();
}

#[test]
fn a_door_locked_while_a_tap_waits_for_its_pin_stays_shut() {
    let s = site();
    let access = AccessData::new(s.store.clone(), s.controller.clone());
    let r = tap_while(&s, &s.alice, SERVER_ROOM, || {
        lock_door(&s, &access, DoorId(2))
    });
    assert!(!r.granted() && !r.opened, "{} {:?}", r.code(), r.reason());
    assert_eq!(r.code(), "door-locked");
    assert!(s.output.releases().is_empty(), "the lock was never pulsed");
    assert_eq!(stored(&s, &r).event.code.as_deref(), Some("door-locked"));
}

#[test]
fn a_cardholder_suspended_while_a_tap_waits_for_the_pin_is_refused() {
    let s = site();
    let access = AccessData::new(s.store.clone(), s.controller.clone());
    let r = tap_while(&s, &s.alice, SERVER_ROOM, || {
        let mut alice = holder(1, "Alice");
        alice.status = CardholderStatus::Suspended {
            reason: "badge reported stolen".into(),
        };
        s.rt.block_on(access.change("admin", EntityChange::Replace(alice)))
            .unwrap();
    });
    assert!(!r.granted() && !r.opened);
    assert_eq!(r.code(), "cardholder-suspended");
    assert!(s.output.releases().is_empty());
    // Without the change the same tap opens: the refusal came from it.
    let mut alice = holder(1, "Alice");
    alice.status = CardholderStatus::Active;
    s.rt.block_on(access.change("admin", EntityChange::Replace(alice)))
        .unwrap();
    assert!(tap_while(&s, &s.alice, SERVER_ROOM, || ()).opened);
}

#[test]
fn a_locked_door_opens_for_a_command_only_with_an_override_that_is_recorded() {
    let s = site();
    let access = AccessData::new(s.store.clone(), s.controller.clone());
    lock_door(&s, &access, DoorId(1));
    let refused =
        s.rt.block_on(s.controller.unlock(DoorId(1), "ops", None, false));
    assert!(
        matches!(refused, Err(CommandError::Locked(DoorId(1)))),
        "{refused:?}"
    );
    assert!(s.output.releases().is_empty());
    assert!(
        !tap(&s, &s.alice, FRONT, None).opened,
        "locked wins over a tap"
    );

    let id =
        s.rt.block_on(
            s.controller
                .unlock(DoorId(1), "ops", Some("fire drill"), true),
        )
        .unwrap();
    assert_eq!(s.output.releases().len(), 1);
    let page =
        s.rt.block_on(s.store.query_events(&EventQuery::default()))
            .unwrap();
    let e = page.events.iter().find(|e| e.id == id).unwrap();
    assert_eq!(e.event.code.as_deref(), Some("unlock-override"));
    let reason = e.event.reason.as_deref().unwrap();
    assert!(reason.contains("overriding its locked mode"), "{reason}");
}
