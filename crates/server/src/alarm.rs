//! Door position, request-to-exit and tamper inputs, and the alarms they
//! raise: the whole state machine in one place, sans-I/O.
//!
//! Nothing here sleeps, reads a clock or touches a socket: every call takes
//! `now`, and returns the [`Action`]s the service carries out (record an
//! event, relock, release, start or stop the pre-alarm at the reader).
//! [`Doors::next_deadline`] says when [`Doors::tick`] next has something to
//! do; the service sleeps until then or until the next input
//! ([`crate::doorwatch`]).
//!
//! Per door, the opening goes through named [`Phase`]s:
//!
//! ```text
//!   grant / unlock / REX release done / REX shunt      door opens
//!  Secure ────────────────────────────────► Released ───────────► OpenAllowed
//!    │  ▲            window ends (no opening)   │                    │  at held_open − prealarm
//!    │  └───────────────────────────────────────┘                    ▼
//!    │  door opens                                               PreAlarm (BUZ/LED at the reader)
//!    ▼                                                               │  at held_open
//!  Forced (alarm)                                                    ▼
//!    │  door closes: back to Secure (and relock after a grant)   HeldOpen (alarm)
//! ```
//!
//! In unlocked mode the door is [`Phase::Unlocked`]: it opens and stays open
//! freely. An alarm goes through its own [`AlarmState`]s: `Active` (cause
//! present, nobody has acknowledged it) → `Acknowledged` (an operator wrote
//! a note) → `Cleared` (the cause ended); a cause that ends before the
//! acknowledgement leaves it `Returned` until someone acknowledges it.
//!
//! Inputs are debounced: a new reading counts once it has held for the
//! input's debounce time. Supervised inputs report their line as well
//! ([`Line`]): a cut or shorted line raises an `input-fault` alarm.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use access::DoorId;

/// Which door input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InputRole {
    /// The door position switch (door contact).
    Contact,
    /// The request-to-exit button or sensor.
    RequestToExit,
    /// The tamper switch of the door's equipment.
    Tamper,
}

impl InputRole {
    pub fn as_str(self) -> &'static str {
        match self {
            InputRole::Contact => "contact",
            InputRole::RequestToExit => "request-to-exit",
            InputRole::Tamper => "tamper",
        }
    }
}

/// The state of an input's line as reported (`osdp_ISTATR` byte). OSDP
/// defines 0 (inactive) and 1 (active); supervised inputs report a cut line
/// as 2 and a shorted one as 3, and any other value is taken as a fault of
/// the line too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// The contact is open (OSDP "inactive").
    Open,
    /// The contact is closed (OSDP "active").
    Closed,
    /// Supervised: the wire is cut.
    Cut,
    /// Supervised: the wire is shorted.
    Shorted,
}

impl Line {
    pub fn from_report(v: u8) -> Line {
        match v {
            0 => Line::Open,
            1 => Line::Closed,
            3 => Line::Shorted,
            _ => Line::Cut,
        }
    }

    fn fault(self) -> Option<AlarmKind> {
        match self {
            Line::Cut => Some(AlarmKind::InputCut),
            Line::Shorted => Some(AlarmKind::InputShorted),
            _ => None,
        }
    }
}

/// How one input is wired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wiring {
    /// The contact is closed in the input's normal state (a closed door,
    /// a released button, a shut enclosure); `false` for normally open.
    pub normally_closed: bool,
    /// A new reading counts once it has held this long.
    pub debounce: Duration,
}

impl Wiring {
    /// Whether `line` is the input's active state (door open, button
    /// pressed, enclosure open); `None` for a line fault.
    fn active(self, line: Line) -> Option<bool> {
        match line {
            Line::Open => Some(self.normally_closed),
            Line::Closed => Some(!self.normally_closed),
            Line::Cut | Line::Shorted => None,
        }
    }
}

/// What a request-to-exit does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitMode {
    /// It asks for the lock to be released ([`Action::Release`]); the
    /// opening is allowed once the release is carried out
    /// ([`Doors::released`]). A release that is refused (an interlock, a
    /// door in locked mode, a reader offline) leaves the door secure: an
    /// opening is forced.
    Release,
    /// It only allows the opening (a mechanical exit): no forced alarm.
    /// Nothing is released, so nothing (an interlock included) refuses it.
    Shunt,
}

/// One door's inputs and times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoorSetup {
    pub contact: Option<Wiring>,
    pub request_to_exit: Option<Wiring>,
    pub tamper: Option<Wiring>,
    pub exit: ExitMode,
    /// How long a released (or request-to-exit) door may be opened.
    pub release_window: Duration,
    /// How long the door may stay open after an allowed opening.
    pub held_open: Duration,
    /// How long before `held_open` the reader warns (0: no pre-alarm).
    pub prealarm: Duration,
}

impl DoorSetup {
    fn wiring(&self, role: InputRole) -> Option<Wiring> {
        match role {
            InputRole::Contact => self.contact,
            InputRole::RequestToExit => self.request_to_exit,
            InputRole::Tamper => self.tamper,
        }
    }
}

/// The opening of one door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The position is not known yet (no report since start).
    Unknown,
    /// Closed and locked: an opening is forced.
    Secure,
    /// Closed, the opening allowed until `until` (a grant, a momentary
    /// unlock, a request-to-exit); `relock` when the lock was released.
    Released { until: Instant, relock: bool },
    /// Open after an allowed opening since `since`.
    OpenAllowed { since: Instant, relock: bool },
    /// Still open past the pre-alarm point: the reader warns.
    PreAlarm { since: Instant, relock: bool },
    /// Open past the allowed time: the held-open alarm is raised.
    HeldOpen { since: Instant, relock: bool },
    /// Opened without a grant, unlock or exit request.
    Forced { since: Instant },
    /// Unlocked mode: opening is free; `open` since when it is open.
    Unlocked { open: Option<Instant> },
}

impl Phase {
    /// Since when the door is open, if it is.
    pub fn open_since(self) -> Option<Instant> {
        match self {
            Phase::OpenAllowed { since, .. }
            | Phase::PreAlarm { since, .. }
            | Phase::HeldOpen { since, .. }
            | Phase::Forced { since } => Some(since),
            Phase::Unlocked { open } => open,
            Phase::Unknown | Phase::Secure | Phase::Released { .. } => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Unknown => "unknown",
            Phase::Secure => "secure",
            Phase::Released { .. } => "released",
            Phase::OpenAllowed { .. } => "open",
            Phase::PreAlarm { .. } => "pre-alarm",
            Phase::HeldOpen { .. } => "held-open",
            Phase::Forced { .. } => "forced",
            Phase::Unlocked { .. } => "unlocked",
        }
    }
}

/// What an alarm is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlarmKind {
    Forced,
    HeldOpen,
    Tamper,
    InputCut,
    InputShorted,
}

impl AlarmKind {
    /// The stable code of the alarm's events.
    pub fn code(self) -> &'static str {
        match self {
            AlarmKind::Forced => "door-forced",
            AlarmKind::HeldOpen => "door-held-open",
            AlarmKind::Tamper => "tamper",
            AlarmKind::InputCut => "input-cut",
            AlarmKind::InputShorted => "input-shorted",
        }
    }

    pub const ALL: [AlarmKind; 5] = [
        AlarmKind::Forced,
        AlarmKind::HeldOpen,
        AlarmKind::Tamper,
        AlarmKind::InputCut,
        AlarmKind::InputShorted,
    ];
}

/// Where an alarm is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmState {
    /// The cause is present and nobody has acknowledged it.
    Active,
    /// The cause ended before anyone acknowledged it.
    Returned,
    /// An operator acknowledged it; the cause is still present.
    Acknowledged,
    /// Acknowledged and the cause ended: the alarm is over.
    Cleared,
}

impl AlarmState {
    pub fn as_str(self) -> &'static str {
        match self {
            AlarmState::Active => "active",
            AlarmState::Returned => "returned",
            AlarmState::Acknowledged => "acknowledged",
            AlarmState::Cleared => "cleared",
        }
    }
}

/// Names an alarm: the id of the event that raised it, once recorded.
pub type AlarmId = i64;

/// One alarm as it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alarm {
    /// `None` until the service has recorded the raising event.
    pub id: Option<AlarmId>,
    pub door: DoorId,
    pub kind: AlarmKind,
    /// The input at fault, for line faults.
    pub input: Option<InputRole>,
    pub state: AlarmState,
    pub raised: Instant,
}

/// What the service should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Record an input change (`door` event): `code` like `door-opened`.
    Input {
        door: DoorId,
        role: InputRole,
        code: &'static str,
        /// For `door-closed`: how long it was open.
        open_for: Option<Duration>,
    },
    /// Record a new alarm; tell [`Doors::set_id`] the event's id.
    Raise {
        door: DoorId,
        kind: AlarmKind,
        input: Option<InputRole>,
    },
    /// Record an alarm's change of state (acknowledged or cleared), by
    /// `by` (a token's name, or `None` when the cause ended).
    Change {
        id: Option<AlarmId>,
        door: DoorId,
        kind: AlarmKind,
        state: AlarmState,
        by: Option<String>,
        note: Option<String>,
    },
    /// Lock the door again now (it closed after a release).
    Relock { door: DoorId },
    /// Release the lock for `window` (request-to-exit).
    Release { door: DoorId, window: Duration },
    /// Start (`true`) or stop the pre-alarm at the door's reader.
    PreAlarm { door: DoorId, on: bool },
}

/// Why an acknowledgement was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AckError {
    #[error("no alarm {0} is active")]
    Unknown(AlarmId),
    #[error("alarm {0} is acknowledged already")]
    Already(AlarmId),
}

/// One input's accepted reading and the one waiting out its debounce.
#[derive(Debug, Clone, Copy)]
struct Reading {
    line: Option<Line>,
    /// Whether the input was active at its last reading without a fault.
    active: Option<bool>,
    pending: Option<(Line, Instant)>,
}

struct Door {
    setup: DoorSetup,
    phase: Phase,
    inputs: BTreeMap<InputRole, Reading>,
    last_change: Option<Instant>,
}

/// Every watched door, and the alarms not yet cleared.
pub struct Doors {
    doors: BTreeMap<DoorId, Door>,
    alarms: Vec<Alarm>,
}

impl Default for Doors {
    fn default() -> Self {
        Self::new()
    }
}

/// A door's state for the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoorView {
    pub phase: Phase,
    /// `Some(true)` open, `Some(false)` closed, `None` unknown.
    pub open: Option<bool>,
    pub last_change: Option<Instant>,
}

impl Doors {
    pub fn new() -> Doors {
        Doors {
            doors: BTreeMap::new(),
            alarms: Vec::new(),
        }
    }

    /// Watches `door` with `setup` (again: a new setup keeps its state).
    pub fn watch(&mut self, door: DoorId, setup: DoorSetup) {
        match self.doors.get_mut(&door) {
            Some(d) => d.setup = setup,
            None => {
                self.doors.insert(
                    door,
                    Door {
                        setup,
                        phase: Phase::Unknown,
                        inputs: BTreeMap::new(),
                        last_change: None,
                    },
                );
            }
        }
    }

    pub fn is_watched(&self, door: DoorId) -> bool {
        self.doors.contains_key(&door)
    }

    /// The door's state, if it is watched.
    pub fn view(&self, door: DoorId) -> Option<DoorView> {
        let d = self.doors.get(&door)?;
        let open = match d.phase {
            Phase::Unknown => None,
            p => Some(p.open_since().is_some()),
        };
        Some(DoorView {
            phase: d.phase,
            open,
            last_change: d.last_change,
        })
    }

    /// The alarms not cleared yet, oldest first.
    pub fn alarms(&self) -> &[Alarm] {
        &self.alarms
    }

    /// The id of the event that raised the newest alarm of `kind` at `door`.
    pub fn set_id(&mut self, door: DoorId, kind: AlarmKind, id: AlarmId) {
        if let Some(a) = self
            .alarms
            .iter_mut()
            .rev()
            .find(|a| a.door == door && a.kind == kind && a.id.is_none())
        {
            a.id = Some(id);
        }
    }

    /// A reading of one input.
    pub fn input(
        &mut self,
        door: DoorId,
        role: InputRole,
        line: Line,
        now: Instant,
    ) -> Vec<Action> {
        let mut out = Vec::new();
        let Some(d) = self.doors.get_mut(&door) else {
            return out;
        };
        let Some(wiring) = d.setup.wiring(role) else {
            return out;
        };
        let r = d.inputs.entry(role).or_insert(Reading {
            line: None,
            active: None,
            pending: None,
        });
        if r.line == Some(line) {
            r.pending = None;
            return out;
        }
        // The first reading counts at once: it is the state at start.
        if r.line.is_none() || wiring.debounce.is_zero() {
            r.pending = None;
            self.accept(door, role, line, now, &mut out);
            return out;
        }
        if r.pending.map(|(l, _)| l) != Some(line) {
            r.pending = Some((line, now + wiring.debounce));
        }
        out
    }

    /// A grant, momentary unlock or API release of `door`'s lock until
    /// `until`.
    pub fn released(&mut self, door: DoorId, until: Instant, now: Instant) -> Vec<Action> {
        let out = Vec::new();
        if let Some(d) = self.doors.get_mut(&door) {
            if let Phase::Secure | Phase::Released { .. } = d.phase {
                d.phase = Phase::Released {
                    until: until.max(now),
                    relock: true,
                };
            }
        }
        out
    }

    /// The door's mode changed: `unlocked` or not.
    pub fn unlocked(&mut self, door: DoorId, unlocked: bool, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        let Some(d) = self.doors.get_mut(&door) else {
            return out;
        };
        let open = d.phase.open_since();
        if unlocked {
            let warning = !d.setup.prealarm.is_zero();
            if matches!(d.phase, Phase::PreAlarm { .. })
                || (warning && matches!(d.phase, Phase::HeldOpen { .. }))
            {
                out.push(Action::PreAlarm { door, on: false });
            }
            d.phase = Phase::Unlocked { open };
        } else if let Phase::Unlocked { open } = d.phase {
            // Locked again with the door open: it may stay open for the
            // allowed time, as after a grant.
            d.phase = match open {
                Some(since) => Phase::OpenAllowed {
                    since: since.max(now),
                    relock: false,
                },
                None => Phase::Secure,
            };
        }
        out
    }

    /// An operator acknowledges alarm `id` with a note.
    pub fn acknowledge(
        &mut self,
        id: AlarmId,
        by: &str,
        note: &str,
    ) -> Result<Vec<Action>, AckError> {
        let i = self
            .alarms
            .iter()
            .position(|a| a.id == Some(id))
            .ok_or(AckError::Unknown(id))?;
        let a = &mut self.alarms[i];
        let state = match a.state {
            AlarmState::Active => AlarmState::Acknowledged,
            AlarmState::Returned => AlarmState::Cleared,
            AlarmState::Acknowledged | AlarmState::Cleared => return Err(AckError::Already(id)),
        };
        a.state = state;
        let mut out = vec![Action::Change {
            id: a.id,
            door: a.door,
            kind: a.kind,
            state: AlarmState::Acknowledged,
            by: Some(by.to_string()),
            note: Some(note.to_string()),
        }];
        if state == AlarmState::Cleared {
            out.push(Action::Change {
                id: a.id,
                door: a.door,
                kind: a.kind,
                state: AlarmState::Cleared,
                by: Some(by.to_string()),
                note: None,
            });
            self.alarms.remove(i);
        }
        Ok(out)
    }

    /// When [`Doors::tick`] next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut at = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for d in self.doors.values() {
            for r in d.inputs.values() {
                if let Some((_, t)) = r.pending {
                    at(t);
                }
            }
            match d.phase {
                Phase::Released { until, .. } => at(until),
                Phase::OpenAllowed { since, .. } => at(prealarm_at(&d.setup, since)),
                Phase::PreAlarm { since, .. } => at(since + d.setup.held_open),
                _ => {}
            }
        }
        next
    }

    /// Everything due at `now`: debounced readings, the end of release
    /// windows, pre-alarms and held-open alarms.
    pub fn tick(&mut self, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        let due: Vec<(DoorId, InputRole, Line)> = self
            .doors
            .iter()
            .flat_map(|(id, d)| {
                d.inputs
                    .iter()
                    .filter_map(move |(role, r)| match r.pending {
                        Some((line, t)) if t <= now => Some((*id, *role, line)),
                        _ => None,
                    })
            })
            .collect();
        for (door, role, line) in due {
            if let Some(r) = self
                .doors
                .get_mut(&door)
                .and_then(|d| d.inputs.get_mut(&role))
            {
                r.pending = None;
            }
            self.accept(door, role, line, now, &mut out);
        }
        let ids: Vec<DoorId> = self.doors.keys().copied().collect();
        for door in ids {
            let Some(d) = self.doors.get_mut(&door) else {
                continue;
            };
            match d.phase {
                Phase::Released { until, .. } if until <= now => d.phase = Phase::Secure,
                Phase::OpenAllowed { since, relock } if prealarm_at(&d.setup, since) <= now => {
                    if d.setup.prealarm.is_zero() || since + d.setup.held_open <= now {
                        d.phase = Phase::HeldOpen { since, relock };
                        self.raise(door, AlarmKind::HeldOpen, None, now, &mut out);
                    } else {
                        d.phase = Phase::PreAlarm { since, relock };
                        out.push(Action::PreAlarm { door, on: true });
                    }
                }
                Phase::PreAlarm { since, relock } if since + d.setup.held_open <= now => {
                    d.phase = Phase::HeldOpen { since, relock };
                    self.raise(door, AlarmKind::HeldOpen, None, now, &mut out);
                }
                _ => {}
            }
        }
        out
    }

    /// A reading that passed its debounce.
    fn accept(
        &mut self,
        door: DoorId,
        role: InputRole,
        line: Line,
        now: Instant,
        out: &mut Vec<Action>,
    ) {
        let Some(d) = self.doors.get_mut(&door) else {
            return;
        };
        let Some(wiring) = d.setup.wiring(role) else {
            return;
        };
        let r = d.inputs.entry(role).or_insert(Reading {
            line: None,
            active: None,
            pending: None,
        });
        let before = r.line.replace(line);
        let was_active = r.active;
        if let Some(a) = wiring.active(line) {
            r.active = Some(a);
        }
        d.last_change = Some(now);
        let was_fault = before.and_then(Line::fault);
        // A line fault and its end.
        if let Some(kind) = line.fault() {
            if was_fault != Some(kind) {
                if let Some(k) = was_fault {
                    self.cause_ended(door, k, Some(role), out);
                }
                self.raise(door, kind, Some(role), now, out);
            }
            return;
        }
        if let Some(k) = was_fault {
            self.cause_ended(door, k, Some(role), out);
        }
        let Some(active) = wiring.active(line) else {
            return;
        };
        if was_active == Some(active) {
            return;
        }
        match role {
            InputRole::Contact => {
                if active {
                    self.opened(door, now, was_active.is_none(), out);
                } else {
                    self.closed(door, now, was_active.is_none(), out);
                }
            }
            InputRole::RequestToExit => {
                if active {
                    out.push(Action::Input {
                        door,
                        role,
                        code: "request-to-exit",
                        open_for: None,
                    });
                    self.exit_requested(door, now, out);
                }
            }
            InputRole::Tamper => {
                if active {
                    out.push(Action::Input {
                        door,
                        role,
                        code: "tamper",
                        open_for: None,
                    });
                    self.raise(door, AlarmKind::Tamper, None, now, out);
                } else if was_active.is_some() {
                    out.push(Action::Input {
                        door,
                        role,
                        code: "tamper-restored",
                        open_for: None,
                    });
                    self.cause_ended(door, AlarmKind::Tamper, None, out);
                }
            }
        }
    }

    fn exit_requested(&mut self, door: DoorId, now: Instant, out: &mut Vec<Action>) {
        let Some(d) = self.doors.get_mut(&door) else {
            return;
        };
        match d.setup.exit {
            // The opening is allowed once the lock is released: the door
            // output tells [`Doors::released`] when it has done it, and a
            // refused release leaves the door as it was.
            ExitMode::Release => out.push(Action::Release {
                door,
                window: d.setup.release_window,
            }),
            ExitMode::Shunt => {
                let until = now + d.setup.release_window;
                match d.phase {
                    Phase::Secure | Phase::Unknown => {
                        d.phase = Phase::Released {
                            until,
                            relock: false,
                        }
                    }
                    // A release already running keeps its relock.
                    Phase::Released { until: u, relock } => {
                        d.phase = Phase::Released {
                            until: u.max(until),
                            relock,
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn opened(&mut self, door: DoorId, now: Instant, first: bool, out: &mut Vec<Action>) {
        let Some(d) = self.doors.get_mut(&door) else {
            return;
        };
        out.push(Action::Input {
            door,
            role: InputRole::Contact,
            code: "door-opened",
            open_for: None,
        });
        let mut forced = false;
        d.phase = match d.phase {
            Phase::Released { relock, .. } => Phase::OpenAllowed { since: now, relock },
            Phase::Unlocked { .. } => Phase::Unlocked { open: Some(now) },
            // Found open at start: how it was opened is not known; it may
            // stay open for the allowed time.
            Phase::Unknown if first => Phase::OpenAllowed {
                since: now,
                relock: false,
            },
            Phase::Unknown | Phase::Secure => {
                forced = true;
                Phase::Forced { since: now }
            }
            open => open,
        };
        if forced {
            self.raise(door, AlarmKind::Forced, None, now, out);
        }
    }

    fn closed(&mut self, door: DoorId, now: Instant, first: bool, out: &mut Vec<Action>) {
        let Some(d) = self.doors.get_mut(&door) else {
            return;
        };
        let phase = d.phase;
        out.push(Action::Input {
            door,
            role: InputRole::Contact,
            code: "door-closed",
            open_for: phase.open_since().map(|s| now.saturating_duration_since(s)),
        });
        d.phase = match phase {
            Phase::Unlocked { .. } => Phase::Unlocked { open: None },
            Phase::Released { until, relock } if first => Phase::Released { until, relock },
            _ => Phase::Secure,
        };
        // The reader's warning goes on through the held-open alarm until
        // the door closes.
        let warning = !d.setup.prealarm.is_zero();
        match phase {
            Phase::OpenAllowed { relock: true, .. } => out.push(Action::Relock { door }),
            Phase::PreAlarm { relock, .. } | Phase::HeldOpen { relock, .. } => {
                if warning || matches!(phase, Phase::PreAlarm { .. }) {
                    out.push(Action::PreAlarm { door, on: false });
                }
                if relock {
                    out.push(Action::Relock { door });
                }
            }
            _ => {}
        }
        if let Phase::HeldOpen { .. } = phase {
            self.cause_ended(door, AlarmKind::HeldOpen, None, out);
        }
        if let Phase::Forced { .. } = phase {
            self.cause_ended(door, AlarmKind::Forced, None, out);
        }
    }

    fn raise(
        &mut self,
        door: DoorId,
        kind: AlarmKind,
        input: Option<InputRole>,
        now: Instant,
        out: &mut Vec<Action>,
    ) {
        let present = self.alarms.iter().any(|a| {
            a.door == door
                && a.kind == kind
                && a.input == input
                && matches!(a.state, AlarmState::Active | AlarmState::Acknowledged)
        });
        if present {
            return;
        }
        self.alarms.push(Alarm {
            id: None,
            door,
            kind,
            input,
            state: AlarmState::Active,
            raised: now,
        });
        out.push(Action::Raise { door, kind, input });
    }

    /// The cause of the door's `kind` alarm ended.
    fn cause_ended(
        &mut self,
        door: DoorId,
        kind: AlarmKind,
        input: Option<InputRole>,
        out: &mut Vec<Action>,
    ) {
        let mut i = 0;
        while i < self.alarms.len() {
            let a = &mut self.alarms[i];
            if a.door != door || a.kind != kind || a.input != input {
                i += 1;
                continue;
            }
            match a.state {
                AlarmState::Active => {
                    a.state = AlarmState::Returned;
                    out.push(change(a, AlarmState::Returned));
                    i += 1;
                }
                AlarmState::Acknowledged => {
                    out.push(change(a, AlarmState::Cleared));
                    self.alarms.remove(i);
                }
                AlarmState::Returned | AlarmState::Cleared => i += 1,
            }
        }
    }
}

fn change(a: &Alarm, state: AlarmState) -> Action {
    Action::Change {
        id: a.id,
        door: a.door,
        kind: a.kind,
        state,
        by: None,
        note: None,
    }
}

/// When the open door's reader starts warning.
fn prealarm_at(setup: &DoorSetup, since: Instant) -> Instant {
    since + setup.held_open.saturating_sub(setup.prealarm)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: DoorId = DoorId(1);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn setup() -> DoorSetup {
        let w = |nc| Wiring {
            normally_closed: nc,
            debounce: Duration::ZERO,
        };
        DoorSetup {
            contact: Some(w(true)),
            request_to_exit: Some(w(false)),
            tamper: Some(w(false)),
            exit: ExitMode::Shunt,
            release_window: ms(1000),
            held_open: ms(300),
            prealarm: ms(100),
        }
    }

    /// A door watched and reported closed at `t0`.
    fn closed_door(t0: Instant) -> Doors {
        let mut d = Doors::new();
        d.watch(D, setup());
        let a = d.input(D, InputRole::Contact, Line::Closed, t0);
        assert_eq!(codes(&a), ["door-closed"]);
        assert_eq!(d.view(D).unwrap().phase, Phase::Secure);
        d
    }

    fn codes(a: &[Action]) -> Vec<&'static str> {
        a.iter()
            .map(|a| match a {
                Action::Input { code, .. } => *code,
                Action::Raise { kind, .. } => kind.code(),
                Action::Change { state, .. } => state.as_str(),
                Action::Relock { .. } => "relock",
                Action::Release { .. } => "release",
                Action::PreAlarm { on: true, .. } => "prealarm-on",
                Action::PreAlarm { on: false, .. } => "prealarm-off",
            })
            .collect()
    }

    #[test]
    fn a_grant_then_opening_and_closing_relocks_without_alarm() {
        let t = Instant::now();
        let mut d = closed_door(t);
        assert!(d.released(D, t + ms(1000), t).is_empty());
        assert_eq!(d.next_deadline(), Some(t + ms(1000)));
        let a = d.input(D, InputRole::Contact, Line::Open, t + ms(50));
        assert_eq!(codes(&a), ["door-opened"]);
        let a = d.input(D, InputRole::Contact, Line::Closed, t + ms(150));
        assert_eq!(codes(&a), ["door-closed", "relock"]);
        let Action::Input { open_for, .. } = &a[0] else {
            panic!()
        };
        assert_eq!(*open_for, Some(ms(100)));
        assert!(d.alarms().is_empty());
        assert_eq!(d.view(D).unwrap().phase, Phase::Secure);
    }

    #[test]
    fn opening_a_secure_door_is_forced_and_clears_after_ack_and_close() {
        let t = Instant::now();
        let mut d = closed_door(t);
        let a = d.input(D, InputRole::Contact, Line::Open, t + ms(10));
        assert_eq!(codes(&a), ["door-opened", "door-forced"]);
        d.set_id(D, AlarmKind::Forced, 42);
        let a = d.acknowledge(42, "op", "checked").unwrap();
        assert_eq!(codes(&a), ["acknowledged"]);
        assert_eq!(d.acknowledge(42, "op", "again"), Err(AckError::Already(42)));
        let a = d.input(D, InputRole::Contact, Line::Closed, t + ms(20));
        assert_eq!(codes(&a), ["door-closed", "cleared"]);
        assert!(d.alarms().is_empty());
        assert_eq!(d.acknowledge(42, "op", "late"), Err(AckError::Unknown(42)));
    }

    #[test]
    fn an_alarm_whose_cause_ended_waits_for_its_acknowledgement() {
        let t = Instant::now();
        let mut d = closed_door(t);
        d.input(D, InputRole::Contact, Line::Open, t);
        d.set_id(D, AlarmKind::Forced, 7);
        let a = d.input(D, InputRole::Contact, Line::Closed, t + ms(5));
        assert_eq!(codes(&a), ["door-closed", "returned"]);
        assert_eq!(d.alarms()[0].state, AlarmState::Returned);
        let a = d.acknowledge(7, "op", "saw it").unwrap();
        assert_eq!(codes(&a), ["acknowledged", "cleared"]);
        assert!(d.alarms().is_empty());
    }

    #[test]
    fn held_open_warns_first_then_raises_and_clears_on_close() {
        let t = Instant::now();
        let mut d = closed_door(t);
        d.released(D, t + ms(1000), t);
        d.input(D, InputRole::Contact, Line::Open, t + ms(10));
        assert_eq!(d.next_deadline(), Some(t + ms(210)));
        assert!(d.tick(t + ms(209)).is_empty());
        assert_eq!(codes(&d.tick(t + ms(210))), ["prealarm-on"]);
        assert_eq!(d.next_deadline(), Some(t + ms(310)));
        assert_eq!(codes(&d.tick(t + ms(310))), ["door-held-open"]);
        assert_eq!(d.next_deadline(), None);
        d.set_id(D, AlarmKind::HeldOpen, 9);
        d.acknowledge(9, "op", "propped for a delivery").unwrap();
        let a = d.input(D, InputRole::Contact, Line::Closed, t + ms(400));
        assert_eq!(
            codes(&a),
            ["door-closed", "prealarm-off", "relock", "cleared"]
        );
    }

    #[test]
    fn closing_during_the_prealarm_stops_it_and_raises_nothing() {
        let t = Instant::now();
        let mut d = closed_door(t);
        d.released(D, t + ms(1000), t);
        d.input(D, InputRole::Contact, Line::Open, t);
        assert_eq!(codes(&d.tick(t + ms(250))), ["prealarm-on"]);
        let a = d.input(D, InputRole::Contact, Line::Closed, t + ms(260));
        assert_eq!(codes(&a), ["door-closed", "prealarm-off", "relock"]);
        assert!(d.alarms().is_empty());
    }

    #[test]
    fn request_to_exit_shunts_or_releases() {
        let t = Instant::now();
        let mut d = closed_door(t);
        let a = d.input(D, InputRole::RequestToExit, Line::Closed, t);
        assert_eq!(codes(&a), ["request-to-exit"]);
        let a = d.input(D, InputRole::Contact, Line::Open, t + ms(100));
        assert_eq!(codes(&a), ["door-opened"]);
        // Shunted only: the lock was never released, nothing to relock.
        let a = d.input(D, InputRole::Contact, Line::Closed, t + ms(150));
        assert_eq!(codes(&a), ["door-closed"]);

        let mut s = setup();
        s.exit = ExitMode::Release;
        d.watch(D, s);
        d.input(D, InputRole::RequestToExit, Line::Open, t + ms(200));
        let a = d.input(D, InputRole::RequestToExit, Line::Closed, t + ms(300));
        assert_eq!(codes(&a), ["request-to-exit", "release"]);
        // The window passes unused: the door is secure again.
        d.tick(t + ms(1300));
        assert_eq!(d.view(D).unwrap().phase, Phase::Secure);
        let a = d.input(D, InputRole::Contact, Line::Open, t + ms(1400));
        assert_eq!(codes(&a), ["door-opened", "door-forced"]);
    }

    #[test]
    fn tamper_and_line_faults_raise_and_return() {
        let t = Instant::now();
        let mut d = closed_door(t);
        d.input(D, InputRole::Tamper, Line::Open, t);
        let a = d.input(D, InputRole::Tamper, Line::Closed, t + ms(1));
        assert_eq!(codes(&a), ["tamper", "tamper"]);
        let a = d.input(D, InputRole::Tamper, Line::Open, t + ms(2));
        assert_eq!(codes(&a), ["tamper-restored", "returned"]);
        let a = d.input(D, InputRole::Contact, Line::from_report(2), t + ms(3));
        assert_eq!(codes(&a), ["input-cut"]);
        assert_eq!(d.alarms().last().unwrap().input, Some(InputRole::Contact));
        let a = d.input(D, InputRole::Contact, Line::from_report(3), t + ms(4));
        assert_eq!(codes(&a), ["returned", "input-shorted"]);
        let a = d.input(D, InputRole::Contact, Line::Closed, t + ms(5));
        assert_eq!(codes(&a), ["returned"]);
    }

    #[test]
    fn unlocked_mode_allows_any_opening_and_never_holds() {
        let t = Instant::now();
        let mut d = closed_door(t);
        d.unlocked(D, true, t);
        let a = d.input(D, InputRole::Contact, Line::Open, t);
        assert_eq!(codes(&a), ["door-opened"]);
        assert_eq!(d.next_deadline(), None);
        let a = d.input(D, InputRole::Contact, Line::Closed, t + ms(5000));
        assert_eq!(codes(&a), ["door-closed"]);
        d.unlocked(D, false, t + ms(5001));
        assert_eq!(d.view(D).unwrap().phase, Phase::Secure);
    }

    #[test]
    fn a_refused_exit_release_leaves_the_door_secure_and_an_opening_forced() {
        let t = Instant::now();
        let mut d = closed_door(t);
        let mut s = setup();
        s.exit = ExitMode::Release;
        d.watch(D, s);
        let a = d.input(D, InputRole::RequestToExit, Line::Closed, t);
        assert_eq!(codes(&a), ["request-to-exit", "release"]);
        // The door output refused the release (an interlock): nothing
        // told the machine the lock was released.
        assert_eq!(d.view(D).unwrap().phase, Phase::Secure);
        let a = d.input(D, InputRole::Contact, Line::Open, t + ms(100));
        assert_eq!(codes(&a), ["door-opened", "door-forced"]);
        let a = d.input(D, InputRole::Contact, Line::Closed, t + ms(200));
        assert_eq!(codes(&a), ["door-closed", "returned"]);

        // The next request's release is carried out: the opening in its
        // window is allowed, and the lock relocks when the door closes.
        d.input(D, InputRole::RequestToExit, Line::Open, t + ms(300));
        let a = d.input(D, InputRole::RequestToExit, Line::Closed, t + ms(400));
        assert_eq!(codes(&a), ["request-to-exit", "release"]);
        assert!(d.released(D, t + ms(1400), t + ms(400)).is_empty());
        let a = d.input(D, InputRole::Contact, Line::Open, t + ms(500));
        assert_eq!(codes(&a), ["door-opened"]);
        let a = d.input(D, InputRole::Contact, Line::Closed, t + ms(600));
        assert_eq!(codes(&a), ["door-closed", "relock"]);
    }

    #[test]
    fn a_shunting_exit_allows_the_opening_and_keeps_a_grants_relock() {
        let t = Instant::now();
        let mut d = closed_door(t);
        // Shunt: the opening is allowed without any release.
        d.input(D, InputRole::RequestToExit, Line::Closed, t);
        assert!(matches!(
            d.view(D).unwrap().phase,
            Phase::Released { relock: false, .. }
        ));
        d.input(D, InputRole::RequestToExit, Line::Open, t + ms(10));
        d.tick(t + ms(1010));
        // During a grant's release, the exit does not lose its relock.
        d.released(D, t + ms(2000), t + ms(1100));
        d.input(D, InputRole::RequestToExit, Line::Closed, t + ms(1200));
        let a = d.input(D, InputRole::Contact, Line::Open, t + ms(1300));
        assert_eq!(codes(&a), ["door-opened"]);
        let a = d.input(D, InputRole::Contact, Line::Closed, t + ms(1400));
        assert_eq!(codes(&a), ["door-closed", "relock"]);
    }

    #[test]
    fn a_bounce_shorter_than_the_debounce_is_ignored() {
        let t = Instant::now();
        let mut d = Doors::new();
        let mut s = setup();
        s.contact = Some(Wiring {
            normally_closed: true,
            debounce: ms(50),
        });
        d.watch(D, s);
        d.input(D, InputRole::Contact, Line::Closed, t);
        assert!(d
            .input(D, InputRole::Contact, Line::Open, t + ms(10))
            .is_empty());
        assert_eq!(d.next_deadline(), Some(t + ms(60)));
        assert!(d
            .input(D, InputRole::Contact, Line::Closed, t + ms(20))
            .is_empty());
        assert_eq!(d.next_deadline(), None);
        assert!(d.tick(t + ms(100)).is_empty());
        // A change that holds counts at the end of its debounce.
        d.input(D, InputRole::Contact, Line::Open, t + ms(200));
        let a = d.tick(t + ms(250));
        assert_eq!(codes(&a), ["door-opened", "door-forced"]);
    }

    #[test]
    fn normally_open_contacts_read_the_other_way() {
        let t = Instant::now();
        let mut d = Doors::new();
        let mut s = setup();
        s.contact = Some(Wiring {
            normally_closed: false,
            debounce: Duration::ZERO,
        });
        d.watch(D, s);
        assert_eq!(
            codes(&d.input(D, InputRole::Contact, Line::Open, t)),
            ["door-closed"]
        );
        assert_eq!(
            codes(&d.input(D, InputRole::Contact, Line::Closed, t)),
            ["door-opened", "door-forced"]
        );
    }
}
