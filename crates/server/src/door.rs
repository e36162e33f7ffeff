//! The tap pipeline: authenticate the card with the door's mechanism, decide
//! access, commit the event durably, then signal the door.
//!
//! [`Controller`] is the one value a process needs for every door: the
//! shared [`auth::Authenticator`], the current [`access::AccessSnapshot`]
//! (swapped whole on change, a tap never waits for a reload), the group-commit
//! [`EventLog`], the anti-passback state and a [`DoorOutput`]. A tap is
//! blocking (card I/O): reader sources (PC/SC, OSDP, remote) call it
//! through [`crate::source::TapContext::tap`] from their own threads; async
//! code calls it through `spawn_blocking`. Nothing here refers back to the
//! sources or to the service.
//!
//! Order of a tap (`run_tap`, the one tap path whatever the reader), each
//! step timed into the [`Transaction`]: the reader's door and its mechanism
//! from the current snapshot (the PIN, at card + PIN doors, from the
//! caller or from the door's [`Keypads`] entry) →
//! `detect … verify` (the authenticator) → `decide` (the access decision,
//! then, for a grant that would pulse the lock, the door's interlock
//! groups: [`crate::interlock`]) →
//! `signal` (the event appended and durably committed, then the lock
//! released for a grant). An access event is committed before the door is
//! signalled: a door never opens for a tap the log does not hold. The event
//! stores the transaction up to `decide` (its own commit cannot be inside
//! it); the [`TapResult`] carries the whole table including `signal`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use access::{
    AccessSnapshot, AsOf, Decision, DoorId, DoorMode, Freshness, Identity, Offline, PassbackState,
    ReaderId, Request,
};
use arc_swap::ArcSwap;
use auth::{Authenticator, Outcome, PinSource, Stage, StageName, Transaction};
use host::Transport;
use store::{EventId, EventLog, NewEvent, StoreError};

use crate::health::TapHealth;
use crate::interlock::Interlocks;
use crate::keypad::Keypads;

/// Why the lock output could not be driven.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("door output for door {door}: {problem}")]
pub struct OutputError {
    pub door: DoorId,
    pub problem: String,
}

/// The lock of each door. Implementations must return quickly (they run at
/// the end of a tap): schedule the relock rather than sleeping.
pub trait DoorOutput: Send + Sync {
    /// Releases the lock of `door` for `duration`, then locks it again. An
    /// output that knows the door's mode refuses while it is `Locked`.
    fn momentary_unlock(&self, door: DoorId, duration: Duration) -> Result<(), OutputError>;

    /// [`momentary_unlock`](Self::momentary_unlock) of a door in `Locked`
    /// mode, commanded with an explicit override (and recorded as one).
    fn momentary_unlock_overriding(
        &self,
        door: DoorId,
        duration: Duration,
    ) -> Result<(), OutputError> {
        self.momentary_unlock(door, duration)
    }

    /// Puts `door` in `mode`: `Unlocked` holds the lock released until the
    /// mode changes again; `Normal` and `Locked` lock it.
    fn set_mode(&self, door: DoorId, mode: DoorMode) -> Result<(), OutputError>;

    /// Told of the access data the doors are driven from: by
    /// [`Controller::new`] and at each [`Controller::set_snapshot`], before
    /// any door of it is driven. An output that routes by reader (an OSDP
    /// reader's lock relay) keeps what it needs of it; others ignore it.
    fn follow(&self, _snapshot: &Arc<AccessSnapshot>) {}
}

/// One thing a simulated output did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    pub door: DoorId,
    /// When the lock opened.
    pub opened: Instant,
    /// When it locks again.
    pub closes: Instant,
}

/// A door output that drives no hardware: it records each release (open
/// and close instants), for tests, the demo and doors without a controller
/// link yet.
#[derive(Debug, Default)]
pub struct SimulatedOutput {
    releases: Mutex<Vec<Release>>,
    modes: Mutex<Vec<(DoorId, DoorMode)>>,
}

impl SimulatedOutput {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every release so far, oldest first.
    pub fn releases(&self) -> Vec<Release> {
        self.releases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Every mode change so far, oldest first.
    pub fn mode_changes(&self) -> Vec<(DoorId, DoorMode)> {
        self.modes.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The mode `door` was last put in (`Normal` when never set).
    pub fn mode(&self, door: DoorId) -> DoorMode {
        self.modes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .rev()
            .find(|(d, _)| *d == door)
            .map_or(DoorMode::Normal, |(_, m)| *m)
    }

    /// Whether `door` is unlocked at `at` (held unlocked by its mode, or
    /// within a release).
    pub fn is_open(&self, door: DoorId, at: Instant) -> bool {
        if self.mode(door) == DoorMode::Unlocked {
            return true;
        }
        self.releases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|r| r.door == door && r.opened <= at && at < r.closes)
    }
}

impl DoorOutput for SimulatedOutput {
    fn momentary_unlock(&self, door: DoorId, duration: Duration) -> Result<(), OutputError> {
        let opened = Instant::now();
        self.releases
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Release {
                door,
                opened,
                closes: opened + duration,
            });
        tracing::info!(
            door = door.0,
            ms = duration.as_millis() as u64,
            "lock released"
        );
        Ok(())
    }

    fn set_mode(&self, door: DoorId, mode: DoorMode) -> Result<(), OutputError> {
        self.modes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((door, mode));
        tracing::info!(door = door.0, mode = mode.as_str(), "door mode set");
        Ok(())
    }
}

/// Why a tap could not be run at all (nothing was recorded).
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    #[error("reader {0} is not bound to a door")]
    UnknownReader(ReaderId),
    #[error("reader {reader} is bound to door {door}, which does not exist")]
    UnknownDoor { reader: ReaderId, door: DoorId },
}

/// What one tap did.
#[derive(Debug)]
pub struct TapResult {
    pub door: DoorId,
    pub reader: ReaderId,
    /// When the tap was decided: the time of its event.
    pub time: Timestamp,
    /// The authentication transaction with `decide` and `signal` added.
    pub transaction: Transaction,
    /// The access decision; `None` when authentication refused the card.
    pub decision: Option<Decision>,
    /// The event's id once committed, or why it could not be committed (the
    /// door is then not opened).
    pub event: Result<EventId, Arc<StoreError>>,
    /// Whether the lock was released.
    pub opened: bool,
    /// Why the lock could not be released after a committed grant.
    pub output_error: Option<OutputError>,
}

impl TapResult {
    /// Authenticated, allowed, recorded.
    pub fn granted(&self) -> bool {
        self.event.is_ok()
            && self.transaction.outcome.granted()
            && self.decision.as_ref().is_some_and(Decision::is_granted)
    }

    /// `granted`, the refusal code of the authenticator or of the decision,
    /// or `event-not-committed`.
    pub fn code(&self) -> &str {
        if let Outcome::Refused(r) = &self.transaction.outcome {
            return r.code();
        }
        match &self.decision {
            Some(d) if !d.is_granted() => d.code(),
            _ if self.event.is_err() => "event-not-committed",
            Some(d) => d.code(),
            None => "granted",
        }
    }

    /// The sentence for a refusal.
    pub fn reason(&self) -> Option<String> {
        if let Outcome::Refused(r) = &self.transaction.outcome {
            return Some(r.to_string());
        }
        if let Some(r) = self.decision.as_ref().and_then(Decision::refusal) {
            return Some(r.to_string());
        }
        match &self.event {
            Err(e) => Some(format!(
                "the event could not be recorded, so the door stayed shut: {e}"
            )),
            Ok(_) => None,
        }
    }
}

/// Where a tap's PIN comes from.
enum Pin<'a> {
    /// The caller's source (or none).
    Given(Option<&'a mut dyn PinSource>),
    /// The keypad entry of the reader's door.
    Keypad(&'a Keypads),
}

/// Where the current time comes from (tests fix it).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// Told about every tap once the door has been signalled (for metrics).
/// Runs on the tapping thread: implementations must be quick.
pub trait TapObserver: Send + Sync {
    fn tap(&self, result: &TapResult);
}

/// Every door of the process: authenticate → decide → commit → signal.
pub struct Controller {
    authenticator: Arc<Authenticator>,
    snapshot: ArcSwap<AccessSnapshot>,
    log: EventLog,
    output: Arc<dyn DoorOutput>,
    passback: Mutex<PassbackState>,
    runtime: tokio::runtime::Handle,
    unlock: Duration,
    clock: Clock,
    observer: Option<Arc<dyn TapObserver>>,
    /// Counts snapshot swaps, for those that follow them (reader threads).
    swaps: tokio::sync::watch::Sender<u64>,
    /// The moment of opening: a tap holds it (shared) from its decision
    /// until its event is committed and the door signalled; a change to
    /// access data holds it (exclusive) from its commit until its snapshot
    /// is in force. A tap therefore decides against the state in force
    /// when the door opens, never against one a committed change replaced.
    opening: Arc<tokio::sync::RwLock<()>>,
    /// The taps in progress (the watchdog's evidence).
    health: Arc<TapHealth>,
    /// The mode each door was last driven in and its first-card unlocks.
    driven: Mutex<Driven>,
    /// How current the revocation data and the access changes are (see
    /// [`access::freshness`]): read once per tap, written by the
    /// revocation refresh and the change follower.
    freshness: ArcSwap<Freshness>,
    /// Seconds; the `[offline]` maximum of doors that set none.
    default_max_staleness_s: Option<u64>,
    /// Bumped at each change of `freshness`.
    freshness_changed: tokio::sync::watch::Sender<u64>,
    /// The doors last recorded stale ([`crate::offline`]).
    stale_doors: Arc<Mutex<crate::offline::StaleDoors>>,
    /// Interlock groups, when configured: checked at the moment of opening.
    interlocks: Option<Arc<Interlocks>>,
}

/// What the controller last drove each door to: its effective mode (the
/// stored mode, the site's lockdown and the unlock schedule together, see
/// [`AccessSnapshot::effective_mode`]) and, for first-card-unlock doors,
/// until when the window whose first granted tap was seen lasts.
#[derive(Debug, Default)]
struct Driven {
    /// Absent: `normal`.
    modes: std::collections::HashMap<DoorId, DoorMode>,
    first_card: std::collections::HashMap<DoorId, Timestamp>,
}

/// A door's mode changed by its unlock schedule (a window opened or closed,
/// or the first granted tap of a window unlocked it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeChange {
    pub door: DoorId,
    pub mode: DoorMode,
    pub previous: DoorMode,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("snapshot", &self.snapshot.load())
            .field("log", &self.log)
            .field("unlock", &self.unlock)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// `runtime` runs the event log's writer; [`tap`](Self::tap) must be
    /// called from outside it (a reader thread, or `spawn_blocking`).
    pub fn new(
        authenticator: Arc<Authenticator>,
        snapshot: AccessSnapshot,
        log: EventLog,
        output: Arc<dyn DoorOutput>,
        runtime: tokio::runtime::Handle,
        unlock: Duration,
    ) -> Self {
        let snapshot = Arc::new(snapshot);
        output.follow(&snapshot);
        let controller = Controller {
            authenticator,
            snapshot: ArcSwap::new(snapshot),
            log,
            output,
            passback: Mutex::new(PassbackState::new()),
            runtime,
            unlock,
            clock: Arc::new(Timestamp::now),
            observer: None,
            swaps: tokio::sync::watch::Sender::new(0),
            opening: Arc::new(tokio::sync::RwLock::new(())),
            health: Arc::new(TapHealth::new()),
            driven: Mutex::new(Driven::default()),
            freshness: ArcSwap::from_pointee(Freshness::NOT_APPLICABLE),
            default_max_staleness_s: None,
            freshness_changed: tokio::sync::watch::Sender::new(0),
            stale_doors: Default::default(),
            interlocks: None,
        };
        // Doors whose mode (stored, locked down or scheduled) is other than
        // normal are put in it now.
        controller.drive_all(&controller.snapshot.load(), Timestamp::now());
        controller
    }

    /// The lock a change to access data holds (write) from its commit until
    /// its snapshot is swapped in (see the field's description).
    pub fn opening(&self) -> &Arc<tokio::sync::RwLock<()>> {
        &self.opening
    }

    /// Reports every tap to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn TapObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Starts from `state` (see [`load_passback`]) instead of nobody
    /// recorded anywhere.
    pub fn with_passback(self, state: PassbackState) -> Self {
        *self.passback.lock().unwrap_or_else(|p| p.into_inner()) = state;
        self
    }

    /// Holds the doors of `interlocks`' groups to one open or released at a
    /// time (see [`crate::interlock`]).
    pub fn with_interlocks(mut self, interlocks: Option<Arc<Interlocks>>) -> Self {
        if let Some(i) = &interlocks {
            let driven = self.driven.lock().unwrap_or_else(|p| p.into_inner());
            for (door, mode) in &driven.modes {
                i.set_unlocked(*door, *mode == DoorMode::Unlocked);
            }
        }
        self.interlocks = interlocks;
        self
    }

    /// The interlock groups the doors are held to, if any.
    pub fn interlocks(&self) -> Option<&Arc<Interlocks>> {
        self.interlocks.as_ref()
    }

    /// Decides at the times `clock` gives instead of the system clock (and
    /// drives the doors' scheduled modes for its time at once).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self.drive_all(&self.snapshot.load(), (self.clock)());
        self
    }

    pub fn authenticator(&self) -> &Arc<Authenticator> {
        &self.authenticator
    }

    /// Doors without a maximum age of their own use `secs` (`[offline]
    /// max_staleness`); `None`: they are never stale.
    pub fn with_default_max_staleness(mut self, secs: Option<u64>) -> Self {
        self.default_max_staleness_s = secs;
        self
    }

    /// The time taps are decided at.
    pub fn now(&self) -> Timestamp {
        (self.clock)()
    }

    /// How current the site's data is now.
    pub fn freshness(&self) -> Freshness {
        **self.freshness.load()
    }

    /// What a tap's decision is told about the data's age.
    pub fn offline(&self) -> Offline {
        Offline {
            freshness: **self.freshness.load(),
            default_max_staleness_s: self.default_max_staleness_s,
        }
    }

    /// Whether `door` was last recorded stale (its data older than its
    /// maximum; see [`crate::offline`]).
    pub fn door_stale(&self, door: DoorId) -> bool {
        self.stale_doors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_stale(door)
    }

    /// Records the doors crossing their maximum age until `stop` turns
    /// true ([`crate::offline::run`]).
    pub async fn run_stale_watch(self: Arc<Self>, stop: tokio::sync::watch::Receiver<bool>) {
        let doors = self.stale_doors.clone();
        crate::offline::run(self, doors, stop).await
    }

    /// Changes at each change of [`Self::freshness`] (for the stale-door
    /// watch).
    pub fn freshness_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.freshness_changed.subscribe()
    }

    fn update_freshness(&self, f: impl Fn(Freshness) -> Freshness) {
        let before = self.freshness.rcu(|old| f(**old));
        if *before != f(*before) {
            self.freshness_changed
                .send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// The revocation data in force is as of `as_of` (the revocation
    /// refresh calls this after each swap and each successful download).
    pub fn note_revocation_current(&self, as_of: AsOf) {
        self.update_freshness(|f| Freshness {
            revocation: as_of,
            ..f
        });
    }

    /// This site follows a central: from now on its access data has an
    /// age, counted from `last` (the last change applied or confirmation
    /// received, kept from an earlier run), or never confirmed. Until this
    /// is called (a site without `[central]`), the change age is not
    /// applicable.
    pub fn follow_central(&self, last: Option<Timestamp>) {
        let as_of = last.map_or(AsOf::Never, |at| AsOf::At { at });
        self.update_freshness(|f| Freshness {
            changes: as_of,
            ..f
        });
    }

    /// The central's changes up to `at` are applied: a change was applied,
    /// or the central confirmed that none is pending. An earlier `at` than
    /// the one held changes nothing.
    pub fn note_changes_current(&self, at: Timestamp) {
        self.update_freshness(|f| Freshness {
            changes: match f.changes {
                AsOf::At { at: held } if held >= at => f.changes,
                _ => AsOf::At { at },
            },
            ..f
        });
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<AccessSnapshot> {
        self.snapshot.load_full()
    }

    /// Swaps in a new snapshot; taps in flight finish on the old one. Doors
    /// whose mode changed are put in their new mode.
    pub fn set_snapshot(&self, snapshot: AccessSnapshot) {
        let snapshot = Arc::new(snapshot);
        self.output.follow(&snapshot);
        self.snapshot.store(snapshot.clone());
        // Recorded by the change that caused them (a mode set, a lockdown).
        self.drive_all(&snapshot, (self.clock)());
        self.swaps.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The mode `door` is in at `now` as [`Driven`] sees it.
    fn effective(
        snapshot: &AccessSnapshot,
        driven: &Driven,
        door: DoorId,
        now: Timestamp,
    ) -> DoorMode {
        let seen = driven
            .first_card
            .get(&door)
            .is_some_and(|&until| now < until);
        // A door removed meanwhile stays shut.
        snapshot
            .effective_mode(door, now, seen)
            .unwrap_or(DoorMode::Locked)
    }

    /// Drives every door whose effective mode at `now` differs from the one
    /// it was last driven in; returns the changes.
    fn drive_all(&self, snapshot: &AccessSnapshot, now: Timestamp) -> Vec<ModeChange> {
        let mut driven = self.driven.lock().unwrap_or_else(|p| p.into_inner());
        driven.first_card.retain(|_, until| now < *until);
        driven.modes.retain(|id, _| snapshot.door(*id).is_some());
        let mut changes = Vec::new();
        for door in snapshot.doors() {
            let mode = Self::effective(snapshot, &driven, door.id, now);
            let previous = driven
                .modes
                .get(&door.id)
                .copied()
                .unwrap_or(DoorMode::Normal);
            if mode != previous {
                self.drive_mode(door.id, mode);
                driven.modes.insert(door.id, mode);
                changes.push(ModeChange {
                    door: door.id,
                    mode,
                    previous,
                });
            }
        }
        changes
    }

    /// Puts every door in the mode its unlock schedule gives it now (at the
    /// controller's clock) and records each automatic change as a
    /// `scheduled-mode` door-command event. [`run_schedules`](Self::run_schedules)
    /// calls it at each boundary; returns the changes.
    pub async fn apply_schedules(&self) -> Vec<ModeChange> {
        let _opening = self.opening.read().await;
        let now = (self.clock)();
        let snapshot = self.snapshot.load_full();
        let changes = self.drive_all(&snapshot, now);
        for c in &changes {
            self.record_mode_change(&snapshot, now, c, "window");
        }
        changes
    }

    /// The next instant a door's unlock schedule changes, after the
    /// controller's present time.
    pub fn next_schedule_change(&self) -> Option<Timestamp> {
        let now = (self.clock)();
        let snapshot = self.snapshot.load();
        snapshot
            .doors()
            .filter_map(|d| snapshot.unlock_window(d.id, now))
            .map(|w| w.next_change)
            .min()
    }

    /// Drives scheduled door modes until `stop`: one timer to the next
    /// window boundary of any door (re-armed when the access data
    /// changes), no polling.
    pub async fn run_schedules(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut swaps = self.snapshot_changes();
        loop {
            if *stop.borrow() {
                return;
            }
            self.apply_schedules().await;
            // In microseconds: a timer that fired a fraction of a millisecond
            // early would find nothing to change and spin until the boundary.
            let wait = self.next_schedule_change().map(|t| {
                let now = (self.clock)();
                Duration::from_micros(
                    u64::try_from(t.as_microsecond().saturating_sub(now.as_microsecond()))
                        .unwrap_or(0),
                )
            });
            tokio::select! {
                _ = async {
                    match wait {
                        Some(d) => tokio::time::sleep(d).await,
                        None => std::future::pending().await,
                    }
                } => {}
                r = swaps.changed() => if r.is_err() { return },
                _ = stop.changed() => {}
            }
        }
    }

    /// Records `change` (caused by `cause`: `window` or `first-card`) off
    /// the tap path.
    fn record_mode_change(
        &self,
        snapshot: &AccessSnapshot,
        now: Timestamp,
        change: &ModeChange,
        cause: &str,
    ) {
        let name = snapshot
            .door(change.door)
            .map_or_else(String::new, |d| d.name.clone());
        let why = match (cause, change.mode) {
            ("first-card", _) => "the first granted tap of its unlock window",
            (_, DoorMode::Unlocked) => "its unlock window opened",
            _ => "its unlock window closed",
        };
        let mut e = NewEvent::door_command(
            now,
            "schedule",
            change.door,
            "scheduled-mode",
            format!(
                "door {} (`{name}`) set to mode {} (was {}): {why}",
                change.door, change.mode, change.previous
            ),
        );
        e.data = Some(serde_json::json!({
            "mode": change.mode,
            "previous": change.previous,
            "cause": cause,
        }));
        let log = self.log.clone();
        self.runtime.spawn(async move {
            if let Err(err) = log.append(e).await {
                tracing::error!(error = %err, "a scheduled door mode change could not be recorded");
            }
        });
    }

    /// After a granted tap that opened `door` at `now`: a first-card-unlock
    /// door inside its unlock window, not unlocked yet, is unlocked until
    /// the window ends. A window that has ended by the time the tap gets
    /// here (its event committed, its door signalled) unlocks nothing: the
    /// boundary may already have been applied, and nothing would relock
    /// the door before the next one.
    fn first_card(&self, snapshot: &AccessSnapshot, door: DoorId, now: Timestamp) {
        if !snapshot.door(door).is_some_and(|d| d.first_card_unlock) {
            return;
        }
        let Some(window) = snapshot.unlock_window(door, now).filter(|w| w.open) else {
            return;
        };
        let (change, current) = {
            let mut driven = self.driven.lock().unwrap_or_else(|p| p.into_inner());
            // Read under the lock: a boundary applied before it was taken
            // (`drive_all` reads its time first) is in the past here.
            let current = (self.clock)().max(now);
            if current >= window.next_change {
                return;
            }
            if driven
                .first_card
                .get(&door)
                .is_some_and(|&until| current < until)
            {
                return;
            }
            driven.first_card.insert(door, window.next_change);
            let mode = Self::effective(snapshot, &driven, door, current);
            let previous = driven.modes.get(&door).copied().unwrap_or(DoorMode::Normal);
            if mode == previous {
                return;
            }
            self.drive_mode(door, mode);
            driven.modes.insert(door, mode);
            (
                ModeChange {
                    door,
                    mode,
                    previous,
                },
                current,
            )
        };
        self.record_mode_change(snapshot, current, &change, "first-card");
    }

    /// The mode `door` was last driven in.
    pub fn door_mode(&self, door: DoorId) -> DoorMode {
        self.driven
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .modes
            .get(&door)
            .copied()
            .unwrap_or(DoorMode::Normal)
    }

    /// Changes each time [`set_snapshot`](Self::set_snapshot) swaps in a
    /// new snapshot (read it with [`snapshot`](Self::snapshot)).
    pub fn snapshot_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.swaps.subscribe()
    }

    /// How long a grant or a momentary unlock releases the lock.
    pub fn unlock_duration(&self) -> Duration {
        self.unlock
    }

    /// The taps in progress.
    pub fn health(&self) -> &Arc<TapHealth> {
        &self.health
    }

    pub fn log(&self) -> &EventLog {
        &self.log
    }

    /// Runs one tap of the card behind `transport` at `reader`. `pin` is
    /// asked for at doors that require PKI-AUTH; `detect` is how long the
    /// reader took to notice the card, when measured.
    pub fn tap(
        &self,
        transport: &mut dyn Transport,
        reader: ReaderId,
        pin: Option<&mut dyn PinSource>,
        detect: Option<Duration>,
    ) -> Result<TapResult, TapError> {
        self.run_tap(transport, reader, Pin::Given(pin), detect)
    }

    /// [`tap`](Self::tap) with the PIN, when the door's mechanism asks for
    /// one, from `keypads`' entry for the door of `reader` (a keypad at the
    /// door through the API, or the reader's own keypad): how every reader
    /// source taps ([`crate::source::TapContext::tap`]).
    pub fn tap_with_keypad(
        &self,
        transport: &mut dyn Transport,
        reader: ReaderId,
        keypads: &Keypads,
        detect: Option<Duration>,
    ) -> Result<TapResult, TapError> {
        self.run_tap(transport, reader, Pin::Keypad(keypads), detect)
    }

    /// The one tap path: reader → door → mechanism → decision → durable
    /// event → door output → observers.
    fn run_tap(
        &self,
        transport: &mut dyn Transport,
        reader: ReaderId,
        pin: Pin<'_>,
        detect: Option<Duration>,
    ) -> Result<TapResult, TapError> {
        let _in_progress = self.health.begin(reader);
        let (door_id, mechanism) = {
            let snapshot = self.snapshot.load();
            let bound = snapshot
                .reader(reader)
                .ok_or(TapError::UnknownReader(reader))?;
            let door = snapshot.door(bound.door).ok_or(TapError::UnknownDoor {
                reader,
                door: bound.door,
            })?;
            (door.id, door.mechanism)
        };
        // The PIN is asked for only at card + PIN doors.
        let authn = &self.authenticator;
        // Whose keypad entry the tap used (an API token), for its event
        // and the token's wrong-PIN count.
        let mut pin_by: Option<(String, &Keypads)> = None;
        let mut transaction = match pin {
            Pin::Given(pin) => authn.authenticate(transport, mechanism, pin, detect),
            Pin::Keypad(k) => {
                let mut keypad = k.source(door_id, reader);
                let t = authn.authenticate(transport, mechanism, Some(&mut keypad), detect);
                pin_by = keypad.entered_by().map(|by| (by.to_string(), k));
                t
            }
        };

        // The moment of opening. Authentication may have taken seconds (a
        // PIN typed at the keypad): the decision reads the state in force
        // now, and no change commits until the door has been signalled.
        let _opening = self.opening.blocking_read();
        let snapshot = self.snapshot.load_full();
        let now = (self.clock)();
        let offline = self.offline();
        // The release recorded for the door's interlock groups, if any.
        let mut claim = None;
        // A door removed meanwhile stays shut; one locked meanwhile (or
        // locked down) too; one held unlocked by its schedule is not pulsed.
        let mode = {
            let driven = self.driven.lock().unwrap_or_else(|p| p.into_inner());
            Self::effective(&snapshot, &driven, door_id, now)
        };

        let (decision, event, previous) = match &transaction.outcome {
            Outcome::Refused(r) => {
                let mut event = NewEvent::refused_tap(
                    now,
                    door_id,
                    Some(reader),
                    r.code(),
                    r.to_string(),
                    serde_json::to_value(&transaction).unwrap_or_default(),
                );
                // Whose card this claims to be: a revoked or damaged card
                // names the credential its identifiers match.
                if let Some(c) = snapshot.claimed_credential(&identity(&transaction)) {
                    event.credential = Some(c.id);
                    event.cardholder = Some(c.cardholder);
                }
                (None, event, None)
            }
            Outcome::Granted => {
                let started = Instant::now();
                let request = Request {
                    door: door_id,
                    identity: identity(&transaction),
                    mechanism: transaction.mechanism,
                    assurance: transaction.assurance,
                };
                // The presence change is applied at once (a second tap of
                // the same card sees it) and undone if the event is lost.
                let (decision, previous) = {
                    let mut pb = self.passback.lock().unwrap_or_else(|p| p.into_inner());
                    let mut d = snapshot.decide_offline(&request, &pb, now, &offline);
                    // An interlock group's other doors, at the moment of
                    // opening: a grant that would release the lock is
                    // refused while one of them is open or released.
                    if let (true, DoorMode::Normal, Some(i)) =
                        (d.is_granted(), mode, &self.interlocks)
                    {
                        match i.claim(&snapshot, door_id, self.unlock, Instant::now()) {
                            Ok(c) => claim = c,
                            Err(r) => {
                                d.verdict = access::Verdict::Refused(r);
                                d.passback = None;
                            }
                        }
                    }
                    let previous = d.passback.as_ref().map(|u| {
                        let before = pb.get(u.site, u.cardholder);
                        pb.apply(u);
                        (*u, before)
                    });
                    (d, previous)
                };
                push_stage(&mut transaction, StageName::Decide, started.elapsed());
                let mut event = NewEvent::tap(
                    now,
                    Some(reader),
                    &decision,
                    serde_json::to_value(&transaction).unwrap_or_default(),
                );
                // Decided on data older than the door's maximum: the event
                // says which and how old.
                if let (Some(stale), Some(serde_json::Value::Object(data))) =
                    (&decision.stale, event.data.as_mut())
                {
                    data.insert("stale".into(), serde_json::json!(stale.to_string()));
                }
                (Some(decision), event, previous)
            }
        };
        let mut event = event;
        if let Some((by, _)) = &pin_by {
            // The token whose PIN the card was given.
            event.actor.get_or_insert_with(|| by.clone());
        }
        let started = Instant::now();
        let committed = self.runtime.block_on(self.log.append(event));
        if let (Err(_), Some((applied, before))) = (&committed, previous) {
            // Undone only if no later tap of the cardholder changed it since.
            let mut pb = self.passback.lock().unwrap_or_else(|p| p.into_inner());
            if pb.get(applied.site, applied.cardholder) == Some(applied.presence) {
                match before {
                    Some(presence) => pb.apply(&access::PassbackUpdate {
                        presence,
                        ..applied
                    }),
                    None => pb.forget(applied.site, applied.cardholder),
                }
            }
        }
        let result = self.finish(
            transaction,
            now,
            door_id,
            mode,
            reader,
            decision,
            committed,
            started,
        );
        if let (Some(c), Some(i)) = (claim, &self.interlocks) {
            if !result.opened {
                i.withdraw(c);
            }
        }
        if let Some((by, keypads)) = pin_by {
            let wrong = matches!(result.code(), "wrong-pin" | "pin-blocked");
            if let Some(c) = keypads.outcome(&by, wrong) {
                // Recorded off the tap path: the door has been signalled.
                let mut e = NewEvent::door_command(
                    now,
                    &c.token,
                    door_id,
                    "keypad-cooldown",
                    format!(
                        "keypad token `{}` sent {} wrong PINs; its PIN entries are refused for {} s",
                        c.token,
                        c.wrong,
                        c.cooldown.as_secs()
                    ),
                );
                e.reader = Some(reader);
                let log = self.log.clone();
                self.runtime.spawn(async move {
                    if let Err(err) = log.append(e).await {
                        tracing::error!(error = %err, "the keypad cool-down event could not be recorded");
                    }
                });
            }
        }
        if result.opened {
            self.first_card(&snapshot, door_id, now);
        }
        if let Some(o) = &self.observer {
            o.tap(&result);
        }
        Ok(result)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        mut transaction: Transaction,
        time: Timestamp,
        door: DoorId,
        mode: DoorMode,
        reader: ReaderId,
        decision: Option<Decision>,
        committed: Result<EventId, StoreError>,
        signal_started: Instant,
    ) -> TapResult {
        let event = committed.map_err(Arc::new);
        let grant = event.is_ok()
            && transaction.outcome.granted()
            && decision.as_ref().is_some_and(Decision::is_granted)
            && mode != DoorMode::Locked;
        let mut output_error = None;
        let mut opened = false;
        if grant && mode == DoorMode::Unlocked {
            // Held unlocked by its mode: a pulse would relock it early.
            opened = true;
        } else if grant {
            match self.output.momentary_unlock(door, self.unlock) {
                Ok(()) => opened = true,
                Err(e) => {
                    tracing::error!(error = %e, "door output failed after a granted tap");
                    output_error = Some(e);
                }
            }
        }
        if let Err(e) = &event {
            tracing::error!(error = %e, door = door.0, "tap event not committed; door not opened");
        }
        push_stage(
            &mut transaction,
            StageName::Signal,
            signal_started.elapsed(),
        );
        TapResult {
            door,
            reader,
            time,
            transaction,
            decision,
            event,
            opened,
            output_error,
        }
    }

    /// A momentary unlock commanded by `actor` (an API token name): the
    /// command event is committed, then the lock released. A door in
    /// `locked` mode is released only when `override_locked` says so, and
    /// the event says it was an override.
    pub async fn unlock(
        &self,
        door: DoorId,
        actor: &str,
        why: Option<&str>,
        override_locked: bool,
    ) -> Result<EventId, CommandError> {
        // As a tap: decided on the state in force when the lock opens.
        let _opening = self.opening.read().await;
        let snapshot = self.snapshot.load_full();
        let d = snapshot.door(door).ok_or(CommandError::UnknownDoor(door))?;
        let now = (self.clock)();
        let mode = {
            let driven = self.driven.lock().unwrap_or_else(|p| p.into_inner());
            Self::effective(&snapshot, &driven, door, now)
        };
        let overriding = mode == DoorMode::Locked;
        if overriding && !override_locked {
            return Err(CommandError::Locked(door));
        }
        let mut text = format!(
            "momentary unlock of `{}` for {} ms by {actor}",
            d.name,
            self.unlock.as_millis()
        );
        if overriding {
            text.push_str(if d.mode == DoorMode::Locked {
                ", overriding its locked mode"
            } else {
                ", overriding its site's lockdown"
            });
        }
        if let Some(w) = why {
            text.push_str(": ");
            text.push_str(w);
        }
        let command = if overriding {
            "unlock-override"
        } else {
            "unlock"
        };
        let event = NewEvent::door_command(now, actor, door, command, text);
        let id = self.log.append(event).await?;
        if overriding {
            self.output.momentary_unlock_overriding(door, self.unlock)?;
        } else if mode != DoorMode::Unlocked {
            self.output.momentary_unlock(door, self.unlock)?;
        }
        if let Some(i) = &self.interlocks {
            // Not refused (an operator's command), but it blocks the
            // other doors of the door's groups like any release.
            i.released(door, self.unlock, Instant::now());
        }
        Ok(id)
    }
}

/// Where each cardholder was last recorded at the sites of `snapshot`,
/// rebuilt from the durable event log: the last granted tap per cardholder
/// at the site's anti-passback doors (`in` → inside, `out` → outside),
/// kept by the store beside each such tap's event. A restart therefore
/// forgets nobody, and a tap at any other door needs no write besides its
/// event.
pub async fn load_passback(
    store: &store::Store,
    snapshot: &AccessSnapshot,
) -> Result<PassbackState, StoreError> {
    use std::collections::HashMap;
    let doors: HashMap<DoorId, (access::SiteId, access::Presence)> = snapshot
        .doors()
        .filter_map(|d| match d.passback {
            access::Passback::In => Some((d.id, (d.site, access::Presence::Inside))),
            access::Passback::Out => Some((d.id, (d.site, access::Presence::Outside))),
            access::Passback::None => None,
        })
        .collect();
    let mut state = PassbackState::new();
    if doors.is_empty() {
        return Ok(state);
    }
    let ids: Vec<DoorId> = doors.keys().copied().collect();
    let mut last: HashMap<(access::SiteId, access::CardholderId), (EventId, access::Presence)> =
        HashMap::new();
    for g in store.last_granted_taps(&ids).await? {
        let Some(&(site, presence)) = doors.get(&g.door) else {
            continue;
        };
        let e = last
            .entry((site, g.cardholder))
            .or_insert((g.event, presence));
        if g.event > e.0 {
            *e = (g.event, presence);
        }
    }
    for ((site, cardholder), (_, presence)) in last {
        state.apply(&access::PassbackUpdate {
            site,
            cardholder,
            presence,
        });
    }
    Ok(state)
}

/// Why a door command was not carried out.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("door {0} does not exist")]
    UnknownDoor(DoorId),
    #[error("door {0} is in locked mode: a momentary unlock needs an explicit override")]
    Locked(DoorId),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Output(#[from] OutputError),
}

impl Controller {
    fn drive_mode(&self, door: DoorId, mode: DoorMode) {
        if let Some(i) = &self.interlocks {
            i.set_unlocked(door, mode == DoorMode::Unlocked);
        }
        if let Err(e) = self.output.set_mode(door, mode) {
            tracing::error!(error = %e, door = door.0, mode = mode.as_str(), "door output cannot take the mode");
        }
    }
}

fn push_stage(t: &mut Transaction, name: StageName, wall: Duration) {
    t.stages.push(Stage {
        name,
        wall_us: wall.as_micros() as u64,
        apdus: 0,
        bytes_out: 0,
        bytes_in: 0,
    });
}

/// The identifiers an authenticated card presented, as the decision reads them.
pub fn identity(t: &Transaction) -> Identity {
    let c = &t.card;
    Identity {
        card_uuid: c.uuid,
        fasc_n: c
            .fascn
            .as_ref()
            .and_then(|f| f.encode().ok())
            .map(access::FascN),
        // Credentials are enrolled with the card authentication
        // certificate: another slot's certificate (PKI-AUTH) is not compared.
        cert_sha256: match t.mechanism {
            auth::Mechanism::PkiCak => c.cert_sha256.as_deref().and_then(|h| h.parse().ok()),
            _ => None,
        },
        spki_sha256: None,
    }
}
