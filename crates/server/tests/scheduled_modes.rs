//! Scheduled door modes and site lockdown through the controller: a door
//! held unlocked inside its unlock schedule's windows (in the site's time
//! zone), first-card unlock, and a lockdown that refuses every tap, keeps
//! scheduled unlocks off and still lets an override through. The clock is
//! the test's: boundaries are crossed by moving it, never by waiting.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use access::{
    AccessGroup, Cardholder, CardholderId, CardholderStatus, Credential, CredentialId,
    CredentialState, Door, DoorId, DoorMode, Entities, GroupId, Mechanism, Reader, ReaderId,
    Schedule, ScheduleId, Site, SiteId,
};
use auth::{Authenticator, Settings};
use card::Card;
use host::InProcess;
use pki_issue::{CardCredentials, CardOptions, TestPki, TestPkiOptions};
use server::admin::{AccessData, SetLockdown};
use server::door::{
    CommandError, Controller, DoorOutput, ModeChange, OutputError, SimulatedOutput, TapResult,
};
use store::testing::{postgres_or_skip, TempCluster};
use store::{EventKind, EventLog, EventQuery, Store};

const LOBBY: DoorId = DoorId(1);
const BACK: DoorId = DoorId(2);
/// Monday 2026-11-23, 07:59 in New York (EST, UTC-5).
const BEFORE_OPENING: &str = "2026-11-23T12:59:00Z";
/// 08:00 and 18:00 that Monday in New York.
const OPENING: &str = "2026-11-23T13:00:00Z";
const CLOSING: &str = "2026-11-23T23:00:00Z";

/// A [`SimulatedOutput`] that runs a step of the test's at the next
/// release: in the middle of a granted tap, its event committed and its
/// door being signalled.
struct Hooked {
    inner: Arc<SimulatedOutput>,
    at_release: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl DoorOutput for Hooked {
    fn momentary_unlock(&self, door: DoorId, duration: Duration) -> Result<(), OutputError> {
        let step = self.at_release.lock().unwrap().take();
        if let Some(step) = step {
            step();
        }
        self.inner.momentary_unlock(door, duration)
    }

    fn set_mode(&self, door: DoorId, mode: DoorMode) -> Result<(), OutputError> {
        self.inner.set_mode(door, mode)
    }
}

struct Site_ {
    rt: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
    store: Store,
    controller: Arc<Controller>,
    access: AccessData,
    output: Arc<SimulatedOutput>,
    /// The same output, with a step of the test's run at the next release.
    hooked: Arc<Hooked>,
    /// The test's time: this instant plus the real time since `at` set it.
    now: Arc<Mutex<(Timestamp, Instant)>>,
    alice: CardCredentials,
    _cluster: Option<TempCluster>,
}

impl Site_ {
    fn at(&self, t: &str) {
        *self.now.lock().unwrap() = (t.parse().unwrap(), Instant::now());
    }

    fn apply(&self) -> Vec<ModeChange> {
        self.rt.block_on(self.controller.apply_schedules())
    }

    fn tap(&self, door: DoorId) -> TapResult {
        let mut t = InProcess::new(Card::new(self.alice.card_image(Some(7)).unwrap()));
        self.controller
            .tap(&mut t, ReaderId(door.0), None, None)
            .unwrap()
    }

    fn lockdown(&self, on: bool) {
        self.rt
            .block_on(self.access.change(
                "admin",
                SetLockdown {
                    site: SiteId(1),
                    lockdown: on,
                    reason: Some("drill".into()),
                },
            ))
            .unwrap();
    }

    /// The committed events of `kind` with `code`.
    fn commands_of(&self, kind: EventKind, code: &str) -> Vec<store::Event> {
        let page = self
            .rt
            .block_on(self.store.query_events(&EventQuery {
                kind: Some(kind),
                limit: 1000,
                ..EventQuery::default()
            }))
            .unwrap();
        page.events
            .into_iter()
            .filter(|e| e.event.code.as_deref() == Some(code))
            .collect()
    }

    /// The door-command events with `code`, waiting (with a deadline) for
    /// `count` of them: automatic changes are recorded off the tap path.
    fn commands(&self, code: &str, count: usize) -> Vec<store::Event> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let page = self
                .rt
                .block_on(self.store.query_events(&EventQuery {
                    kind: Some(EventKind::DoorCommand),
                    limit: 1000,
                    ..EventQuery::default()
                }))
                .unwrap();
            let found: Vec<store::Event> = page
                .events
                .into_iter()
                .filter(|e| e.event.code.as_deref() == Some(code))
                .collect();
            if found.len() >= count || Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A New York site: the lobby (door 1) is unlocked by "mon-fri
/// 08:00-18:00" (only after the first granted tap when `first_card`), the
/// back door (door 2) has no unlock schedule. Alice may use both at any time.
fn site(first_card: bool, cluster: Option<TempCluster>) -> Site_ {
    site_with(first_card, cluster, &[])
}

/// [`site`] with `interlocks` (doors named "door 1", "door 2").
fn site_with(
    first_card: bool,
    cluster: Option<TempCluster>,
    interlocks: &[server::config::InterlockConfig],
) -> Site_ {
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let alice = pki
        .issue_card(&CardOptions {
            cardholder: "Alice".into(),
            ..CardOptions::default()
        })
        .unwrap();
    let door = |id: i64, schedule: Option<ScheduleId>| Door {
        id: DoorId(id),
        site: SiteId(1),
        name: format!("door {id}"),
        mechanism: Mechanism::PkiCak,
        allow_low_assurance: false,
        passback: Default::default(),
        mode: Default::default(),
        unlock_schedule: schedule,
        first_card_unlock: first_card && schedule.is_some(),
        max_staleness_s: None,
        stale_policy: Default::default(),
    };
    let reader = |id: i64| Reader {
        id: ReaderId(id),
        door: DoorId(id),
        name: format!("reader {id}"),
        connection: format!("sim:{id}"),
    };
    let schedule = |id: i64, name: &str, window: &str| Schedule {
        id: ScheduleId(id),
        name: name.into(),
        windows: vec![window.parse().unwrap()],
        holiday_windows: vec![],
    };
    let d = aws_lc_rs::digest::digest(
        &aws_lc_rs::digest::SHA256,
        &alice.slot(0x9E).unwrap().certificate,
    );
    let e = Entities {
        sites: vec![Site {
            id: SiteId(1),
            name: "HQ".into(),
            time_zone: "America/New_York".into(),
            lockdown: false,
        }],
        doors: vec![door(1, Some(ScheduleId(2))), door(2, None)],
        readers: vec![reader(1), reader(2)],
        cardholders: vec![Cardholder {
            id: CardholderId(1),
            name: "Alice".into(),
            status: CardholderStatus::Active,
            valid_from: None,
            valid_until: None,
        }],
        credentials: vec![Credential {
            id: CredentialId(1),
            cardholder: CardholderId(1),
            card_uuid: Some(access::CardUuid(alice.uuid)),
            fasc_n: Some(access::FascN(alice.fascn.encode().unwrap())),
            cert_sha256: Some(access::Sha256::from_slice(d.as_ref()).unwrap()),
            spki_sha256: None,
            expires_at: None,
            enrolled_at: Timestamp::UNIX_EPOCH,
            enrolled_by: "test".into(),
            state: CredentialState::Active,
        }],
        schedules: vec![
            schedule(1, "always", "mon-sun 00:00-24:00"),
            schedule(2, "lobby hours", "mon-fri 08:00-18:00"),
        ],
        groups: vec![AccessGroup {
            id: GroupId(1),
            name: "staff".into(),
            schedule: ScheduleId(1),
            doors: vec![LOBBY, BACK],
            cardholders: vec![CardholderId(1)],
        }],
        holidays: vec![],
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = match &cluster {
        Some(c) => rt.block_on(Store::connect(c.url())).unwrap(),
        None => rt.block_on(Store::open_data_dir(dir.path())).unwrap(),
    };
    rt.block_on(store.import_entities(&e)).unwrap();
    let snapshot = rt.block_on(store.load_snapshot()).unwrap();
    // What was stored is what is read back, on either database.
    let lobby = snapshot.door(LOBBY).unwrap();
    assert_eq!(lobby.unlock_schedule, Some(ScheduleId(2)));
    assert_eq!(lobby.first_card_unlock, first_card);
    assert!(!snapshot.site(SiteId(1)).unwrap().lockdown);
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
    let hooked = Arc::new(Hooked {
        inner: output.clone(),
        at_release: Mutex::new(None),
    });
    let now = Arc::new(Mutex::new((
        BEFORE_OPENING.parse().unwrap(),
        Instant::now(),
    )));
    let clock = now.clone();
    let controller = Arc::new(
        Controller::new(
            authn,
            snapshot,
            log,
            hooked.clone(),
            rt.handle().clone(),
            // Long enough, with interlocks, that a pulse is still on at
            // the next tap whatever the machine's load.
            Duration::from_millis(if interlocks.is_empty() { 3000 } else { 600_000 }),
        )
        .with_clock(Arc::new(move || {
            let (t, since) = *clock.lock().unwrap();
            t + since.elapsed()
        }))
        .with_interlocks(server::interlock::Interlocks::new(interlocks, None)),
    );
    let access = AccessData::new(store.clone(), controller.clone());
    Site_ {
        rt,
        _dir: dir,
        store,
        controller,
        access,
        output,
        hooked,
        now,
        alice,
        _cluster: cluster,
    }
}

#[test]
fn the_lobby_unlocks_and_locks_at_its_window_boundaries_in_the_site_time_zone() {
    let s = site(false, None);
    assert_eq!(s.output.mode(LOBBY), DoorMode::Normal);
    // One timer, armed for 08:00 New York time.
    assert_eq!(
        s.controller.next_schedule_change(),
        Some(OPENING.parse().unwrap())
    );
    assert!(s.apply().is_empty(), "nothing changes before the window");

    s.at(OPENING);
    assert_eq!(
        s.apply(),
        [ModeChange {
            door: LOBBY,
            mode: DoorMode::Unlocked,
            previous: DoorMode::Normal
        }]
    );
    assert_eq!(s.output.mode(LOBBY), DoorMode::Unlocked);
    assert_eq!(s.output.mode(BACK), DoorMode::Normal);
    assert_eq!(
        s.controller.next_schedule_change(),
        Some(CLOSING.parse().unwrap())
    );
    // Held unlocked: a granted tap is recorded but does not pulse the lock.
    let r = s.tap(LOBBY);
    assert!(r.granted() && r.opened, "{} {:?}", r.code(), r.reason());
    assert!(s.output.releases().is_empty());

    s.at(CLOSING);
    assert_eq!(
        s.apply(),
        [ModeChange {
            door: LOBBY,
            mode: DoorMode::Normal,
            previous: DoorMode::Unlocked
        }]
    );
    assert_eq!(s.output.mode(LOBBY), DoorMode::Normal);
    let r = s.tap(LOBBY);
    assert!(r.opened);
    assert_eq!(s.output.releases().len(), 1, "normal again: pulsed");

    // Each automatic change is an event naming the schedule as its actor.
    let events = s.commands("scheduled-mode", 2);
    assert_eq!(events.len(), 2, "{events:?}");
    for e in &events {
        assert_eq!(e.event.actor.as_deref(), Some("schedule"));
        assert_eq!(e.event.door, Some(LOBBY));
    }
    let modes: Vec<&str> = events
        .iter()
        .map(|e| e.event.data.as_ref().unwrap()["mode"].as_str().unwrap())
        .collect();
    assert!(
        modes.contains(&"unlocked") && modes.contains(&"normal"),
        "{modes:?}"
    );
}

#[test]
fn the_service_timer_fires_at_the_boundary_not_before() {
    let s = site(false, None);
    // 300 ms before 08:00 New York time.
    s.at("2026-11-23T12:59:59.700Z");
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let armed = Instant::now();
    let timer = s.rt.spawn(s.controller.clone().run_schedules(stopped));
    let deadline = armed + Duration::from_secs(10);
    while s.output.mode(LOBBY) != DoorMode::Unlocked {
        assert!(Instant::now() < deadline, "the window never opened");
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = armed.elapsed();
    assert!(
        took >= Duration::from_millis(290),
        "unlocked {took:?} after arming, before the boundary"
    );
    assert_eq!(
        s.controller.next_schedule_change(),
        Some(CLOSING.parse().unwrap())
    );
    let _ = stop.send(true);
    s.rt.block_on(timer).unwrap();
    assert_eq!(s.commands("scheduled-mode", 1).len(), 1);
}

#[test]
fn first_card_unlock_waits_for_the_first_granted_tap_in_the_window() {
    let s = site(true, None);
    s.at(OPENING);
    assert!(s.apply().is_empty(), "the window alone does not unlock");
    assert_eq!(s.output.mode(LOBBY), DoorMode::Normal);
    // The first granted tap inside the window is pulsed, then the door is
    // held unlocked.
    s.at("2026-11-23T14:00:00Z");
    let r = s.tap(LOBBY);
    assert!(r.granted() && r.opened);
    assert_eq!(s.output.releases().len(), 1);
    assert_eq!(s.output.mode(LOBBY), DoorMode::Unlocked);
    assert_eq!(s.controller.door_mode(LOBBY), DoorMode::Unlocked);
    let first = s.commands("scheduled-mode", 1);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].event.data.as_ref().unwrap()["cause"], "first-card");
    // The next tap finds it held open: no pulse, no second change.
    assert!(s.tap(LOBBY).opened);
    assert_eq!(s.output.releases().len(), 1);
    assert!(s.apply().is_empty());

    // The window ends; the next day's window waits for its own first tap.
    s.at(CLOSING);
    assert_eq!(s.apply().len(), 1);
    assert_eq!(s.output.mode(LOBBY), DoorMode::Normal);
    s.at("2026-11-24T13:00:00Z");
    assert!(s.apply().is_empty());
    assert_eq!(s.output.mode(LOBBY), DoorMode::Normal);
    assert!(s.tap(LOBBY).opened);
    assert_eq!(s.output.mode(LOBBY), DoorMode::Unlocked);
}

/// The window ends while its first granted tap is still signalling the door
/// (decided before the boundary, finished after the boundary was applied):
/// the door is not unlocked after its window, when nothing would relock it
/// before the next day's opening.
#[test]
fn a_first_tap_finishing_after_its_window_ended_leaves_the_door_locked() {
    let s = site(true, None);
    // 17:00 New York: inside the window, no tap yet.
    s.at("2026-11-23T22:00:00Z");
    assert!(s.apply().is_empty());
    let now = s.now.clone();
    let controller = s.controller.clone();
    let rt = s.rt.handle().clone();
    *s.hooked.at_release.lock().unwrap() = Some(Box::new(move || {
        // 18:00 and its boundary applied (the service's timer): nothing
        // to change, the door never was unlocked.
        *now.lock().unwrap() = (CLOSING.parse().unwrap(), Instant::now());
        assert!(rt.block_on(controller.apply_schedules()).is_empty());
    }));
    let r = s.tap(LOBBY);
    assert!(r.granted() && r.opened);
    assert!(s.hooked.at_release.lock().unwrap().is_none());
    assert!(r.time < CLOSING.parse().unwrap(), "decided in the window");
    assert_eq!(s.output.releases().len(), 1);
    assert_eq!(s.controller.door_mode(LOBBY), DoorMode::Normal);
    assert_eq!(s.output.mode(LOBBY), DoorMode::Normal);
    assert!(s.apply().is_empty());
    // The next day's window still unlocks at its first granted tap.
    s.at("2026-11-24T14:00:00Z");
    assert!(s.apply().is_empty());
    assert!(s.tap(LOBBY).opened);
    assert_eq!(s.controller.door_mode(LOBBY), DoorMode::Unlocked);
    assert_eq!(s.output.mode(LOBBY), DoorMode::Unlocked);
}

#[test]
fn lockdown_refuses_taps_and_scheduled_unlocks_until_lifted() {
    lockdown_on(&site(false, None));
}

fn lockdown_on(s: &Site_) {
    s.at(OPENING);
    s.apply();
    assert_eq!(s.output.mode(LOBBY), DoorMode::Unlocked);

    s.lockdown(true);
    // Every door of the site locked in one change.
    assert_eq!(s.output.mode(LOBBY), DoorMode::Locked);
    assert_eq!(s.output.mode(BACK), DoorMode::Locked);
    let snapshot = s.rt.block_on(s.store.load_snapshot()).unwrap();
    assert!(snapshot.site(SiteId(1)).unwrap().lockdown, "stored");
    for door in [LOBBY, BACK] {
        let r = s.tap(door);
        assert!(!r.granted() && !r.opened);
        assert_eq!(r.code(), "site-lockdown");
        assert_eq!(r.reason(), Some("site `HQ` is locked down".into()));
    }
    assert!(s.output.releases().is_empty());
    // Scheduled unlocks do not apply meanwhile.
    s.at("2026-11-24T13:00:00Z");
    assert!(s.apply().is_empty());
    assert_eq!(s.output.mode(LOBBY), DoorMode::Locked);
    // An override still opens a door, and says what it overrode.
    let refused = s.rt.block_on(s.controller.unlock(BACK, "ops", None, false));
    assert!(
        matches!(refused, Err(CommandError::Locked(BACK))),
        "{refused:?}"
    );
    s.rt.block_on(s.controller.unlock(BACK, "ops", Some("fire"), true))
        .unwrap();
    assert_eq!(s.output.releases().len(), 1);
    let o = s.commands("unlock-override", 1);
    assert!(
        o[0].event
            .reason
            .as_deref()
            .unwrap()
            .contains("overriding its site's lockdown"),
        "{o:?}"
    );
    // The lockdown is an admin event.
    let admin =
        s.rt.block_on(s.store.query_events(&EventQuery {
            kind: Some(EventKind::Admin),
            ..EventQuery::default()
        }))
        .unwrap();
    assert!(
        admin
            .events
            .iter()
            .any(|e| e.event.code.as_deref() == Some("site.lockdown")),
        "{admin:?}"
    );

    // Lifted: inside Tuesday's window the lobby is unlocked again, the back
    // door normal, and taps are granted.
    s.lockdown(false);
    assert_eq!(s.output.mode(LOBBY), DoorMode::Unlocked);
    assert_eq!(s.output.mode(BACK), DoorMode::Normal);
    let r = s.tap(BACK);
    assert!(r.granted() && r.opened, "{} {:?}", r.code(), r.reason());
}

#[test]
fn lockdown_on_postgresql() {
    let Some(cluster) = postgres_or_skip("lockdown_on_postgresql") else {
        return;
    };
    let s = site(false, Some(cluster));
    assert_eq!(s.store.backend(), store::Backend::Postgres);
    lockdown_on(&s);
}

#[test]
fn an_interlocked_door_waits_while_its_partner_is_held_unlocked_or_released() {
    // Neither door has a position switch: each counts as closed unless
    // released or held unlocked.
    let s = site_with(
        false,
        None,
        &[server::config::InterlockConfig {
            name: "vestibule".into(),
            doors: vec!["door 1".into(), "door 2".into()],
        }],
    );
    // Before the lobby's window both doors are locked and closed.
    let r = s.tap(BACK);
    assert!(r.granted() && r.opened, "{} {:?}", r.code(), r.reason());
    // Within the back door's pulse the lobby stays shut.
    let r = s.tap(LOBBY);
    assert!(!r.granted() && !r.opened);
    assert_eq!(r.code(), "interlock");
    assert_eq!(
        r.reason().as_deref(),
        Some("interlock: door `door 2` is released (interlock group `vestibule`)")
    );
    assert_eq!(
        s.output.releases().len(),
        1,
        "only the back door was pulsed"
    );
    // The refusal is stored like any other, with the card recognised.
    let refused = s.commands_of(EventKind::Tap, "interlock");
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].event.door, Some(LOBBY));
    assert_eq!(refused[0].event.result, Some(store::EventResult::Refused));
    assert!(refused[0].event.cardholder.is_some());

    // Inside the window the lobby is held unlocked: the back door waits.
    s.at(OPENING);
    s.apply();
    let r = s.tap(BACK);
    assert_eq!(r.code(), "interlock");
    assert_eq!(
        r.reason().as_deref(),
        Some("interlock: door `door 1` is held unlocked (interlock group `vestibule`)")
    );
    // The lobby itself, held unlocked, is not pulsed and not refused.
    assert!(s.tap(LOBBY).opened);
    // The window ends: the lobby locks and the back door opens again.
    s.at(CLOSING);
    s.apply();
    let r = s.tap(BACK);
    assert!(r.granted() && r.opened, "{} {:?}", r.code(), r.reason());
}
