//! The running side of [`crate::alarm`]: door inputs in, events, relocks
//! and pre-alarms out.
//!
//! [`DoorWatch`] holds the doors' state machine behind one lock. Input
//! readings come from the OSDP dispatchers ([`crate::osdp`]), releases and
//! mode changes from the door output (a grant, a momentary unlock, a mode
//! set through the API), acknowledgements from the API. Each call runs the
//! machine with the current time and carries out what it returns: events
//! go, in order, to one recorder task that appends them to the durable
//! log (a raised alarm takes the id of its event); relocks, releases and
//! the reader's pre-alarm (`osdp_BUZ`, `osdp_LED`) go to the
//! [`DoorSignals`]. One timer thread sleeps until the machine's next
//! deadline (a debounce, the end of a release window, a pre-alarm, a
//! held-open alarm), or until a call moves that deadline: there is no
//! polling loop.
//!
//! Events: kind `door` (`door-opened`, `door-closed` with `open_ms`,
//! `request-to-exit`, `tamper`, `tamper-restored`, and `interlock` for an
//! exit request whose release an interlock group refused) and kind `alarm` (code
//! the alarm's kind: `door-forced`, `door-held-open`, `tamper`,
//! `input-cut`, `input-shorted`; `data.state` `active`, `returned`,
//! `acknowledged` or `cleared`, `data.alarm` the id of the raising event;
//! `actor` who acknowledged, with the note in `data.note`).

use std::sync::{mpsc, Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use access::DoorId;
use store::{EventKind, NewEvent};

use crate::alarm::{
    AckError, Action, Alarm, AlarmId, AlarmState, DoorSetup, DoorView, Doors, InputRole, Line,
};
use crate::metrics::DoorMetrics;

/// What the door watch drives at a door.
pub trait DoorSignals: Send + Sync {
    /// Lock the door now (it closed after a release).
    fn relock(&self, door: DoorId);
    /// Release the lock for `window` (request-to-exit).
    fn release(&self, door: DoorId, window: Duration);
    /// Start or stop the door reader's warning (buzzer and LED).
    fn prealarm(&self, door: DoorId, on: bool);
}

/// An alarm as the API shows it.
#[derive(Debug, Clone)]
pub struct AlarmView {
    pub id: AlarmId,
    pub door: DoorId,
    pub kind: &'static str,
    pub input: Option<&'static str>,
    pub state: AlarmState,
    pub raised: Timestamp,
}

/// A door's position as the API shows it.
#[derive(Debug, Clone)]
pub struct DoorPosition {
    /// `None` while no report has come.
    pub open: Option<bool>,
    pub phase: &'static str,
    pub last_change: Option<Timestamp>,
}

/// The doors with inputs, their alarms, and the timer that drives them.
pub struct DoorWatch {
    doors: Mutex<Doors>,
    wake: Mutex<Option<mpsc::Sender<()>>>,
    events: tokio::sync::mpsc::UnboundedSender<Vec<Record>>,
    signals: OnceLock<Weak<dyn DoorSignals>>,
    metrics: DoorMetrics,
    /// The wall time at `epoch`, to date the machine's instants.
    epoch: (Instant, Timestamp),
}

/// One event for the recorder; `raise` when its id names a new alarm.
struct Record {
    event: NewEvent,
    raise: Option<(DoorId, crate::alarm::AlarmKind)>,
}

impl DoorWatch {
    /// Starts the recorder task on `runtime` and the timer thread.
    pub fn start(
        log: store::EventLog,
        runtime: &tokio::runtime::Handle,
        metrics: DoorMetrics,
    ) -> Arc<DoorWatch> {
        let (events, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<Record>>();
        let (wake, woken) = mpsc::channel();
        let watch = Arc::new(DoorWatch {
            doors: Mutex::new(Doors::new()),
            wake: Mutex::new(Some(wake)),
            events,
            signals: OnceLock::new(),
            metrics,
            epoch: (Instant::now(), Timestamp::now()),
        });
        let weak = Arc::downgrade(&watch);
        runtime.spawn(async move {
            while let Some(batch) = rx.recv().await {
                let raises: Vec<_> = batch.iter().map(|r| r.raise).collect();
                let events = batch.into_iter().map(|r| r.event).collect();
                match log.append_all(events).await {
                    Ok(ids) => {
                        let Some(w) = weak.upgrade() else { break };
                        let mut doors = w.lock();
                        for (id, raise) in ids.into_iter().zip(raises) {
                            if let Some((door, kind)) = raise {
                                doors.set_id(door, kind, id.0);
                            }
                        }
                    }
                    Err(e) => tracing::error!(error = %e, "door events not recorded"),
                }
            }
        });
        let weak = Arc::downgrade(&watch);
        let spawned = std::thread::Builder::new()
            .name("door-watch".into())
            .spawn(move || timer(weak, woken));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the door watch's timer: held-open alarms and debounced inputs wait for the next input");
        }
        watch
    }

    /// Where relocks, releases and pre-alarms go (once).
    pub fn drive(&self, signals: Weak<dyn DoorSignals>) {
        let _ = self.signals.set(signals);
    }

    /// Stops the timer thread.
    pub fn stop(&self) {
        self.wake.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Doors> {
        self.doors.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Watches `door` with `setup` (kept when already watched).
    pub fn watch(&self, door: DoorId, setup: DoorSetup) {
        self.lock().watch(door, setup);
    }

    pub fn is_watched(&self, door: DoorId) -> bool {
        self.lock().is_watched(door)
    }

    /// A reading of one of `door`'s inputs.
    pub fn input(&self, door: DoorId, role: InputRole, line: Line) {
        let actions = self.lock().input(door, role, line, Instant::now());
        self.perform(actions);
    }

    /// The door's lock was released for `duration` (grant, unlock).
    pub fn released(&self, door: DoorId, duration: Duration) {
        let now = Instant::now();
        let actions = self.lock().released(door, now + duration, now);
        self.perform(actions);
    }

    /// The door's mode changed.
    pub fn unlocked(&self, door: DoorId, unlocked: bool) {
        let actions = self.lock().unlocked(door, unlocked, Instant::now());
        self.perform(actions);
    }

    /// A request-to-exit at `door` did not release the lock: `refusal` (an
    /// interlock group's other door is open or released). Recorded as a
    /// `door` event with the refusal's code.
    pub fn exit_refused(&self, door: DoorId, refusal: &access::Refusal) {
        let mut data = serde_json::json!({ "input": InputRole::RequestToExit.as_str() });
        if let access::Refusal::Interlock {
            group,
            door: other,
            blocking,
        } = refusal
        {
            data["interlock"] = serde_json::json!({
                "group": group,
                "door": other,
                "blocking": blocking,
            });
        }
        let record = Record {
            event: event(
                EventKind::Door,
                door,
                refusal.code(),
                format!("request to exit: lock not released: {refusal}"),
                None,
                data,
            ),
            raise: None,
        };
        if self.events.send(vec![record]).is_err() {
            tracing::error!("door events not recorded: the recorder has stopped");
        }
    }

    /// An operator (`by`, a token's name) acknowledges alarm `id`.
    pub fn acknowledge(&self, id: AlarmId, by: &str, note: &str) -> Result<(), AckError> {
        let actions = self.lock().acknowledge(id, by, note)?;
        self.perform(actions);
        Ok(())
    }

    /// The alarms not cleared, oldest first (those whose event is not
    /// committed yet are left out: they have no id).
    pub fn active(&self) -> Vec<AlarmView> {
        let doors = self.lock();
        doors.alarms().iter().filter_map(|a| self.view(a)).collect()
    }

    fn view(&self, a: &Alarm) -> Option<AlarmView> {
        Some(AlarmView {
            id: a.id?,
            door: a.door,
            kind: a.kind.code(),
            input: a.input.map(InputRole::as_str),
            state: a.state,
            raised: self.wall(a.raised),
        })
    }

    /// The door's position, if it has a position switch watched.
    pub fn position(&self, door: DoorId) -> Option<DoorPosition> {
        let v: DoorView = self.lock().view(door)?;
        Some(DoorPosition {
            open: v.open,
            phase: v.phase.as_str(),
            last_change: v.last_change.map(|t| self.wall(t)),
        })
    }

    fn wall(&self, t: Instant) -> Timestamp {
        let (i, w) = self.epoch;
        let d = t.saturating_duration_since(i);
        w.checked_add(d).unwrap_or(w)
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.lock().next_deadline()
    }

    fn tick(&self) {
        let actions = self.lock().tick(Instant::now());
        self.perform(actions);
    }

    /// Carries out the machine's actions, outside its lock.
    fn perform(&self, actions: Vec<Action>) {
        if actions.is_empty() {
            // The deadline may have moved all the same (a release).
            self.wake_timer();
            return;
        }
        let signals = self.signals.get().and_then(Weak::upgrade);
        let mut batch = Vec::new();
        for a in actions {
            match a {
                Action::Input {
                    door,
                    role,
                    code,
                    open_for,
                } => {
                    if let Some(d) = open_for {
                        self.metrics.opened_for(d);
                    }
                    let reason = match (code, open_for) {
                        ("door-closed", Some(d)) => {
                            format!("door closed after {} ms open", d.as_millis())
                        }
                        ("door-closed", None) => "door closed".into(),
                        ("door-opened", _) => "door opened".into(),
                        ("request-to-exit", _) => "request to exit".into(),
                        ("tamper", _) => "tamper switch active".into(),
                        ("tamper-restored", _) => "tamper switch back to normal".into(),
                        (c, _) => c.to_string(),
                    };
                    let mut data = serde_json::json!({ "input": role.as_str() });
                    if let Some(d) = open_for {
                        data["open_ms"] = serde_json::json!(d.as_millis() as u64);
                    }
                    batch.push(Record {
                        event: event(EventKind::Door, door, code, reason, None, data),
                        raise: None,
                    });
                }
                Action::Raise { door, kind, input } => {
                    self.metrics.alarm(door, kind.code());
                    let reason = match kind {
                        crate::alarm::AlarmKind::Forced => {
                            "door forced open: opened without a grant, unlock or exit request"
                                .to_string()
                        }
                        crate::alarm::AlarmKind::HeldOpen => {
                            "door held open past its allowed time".into()
                        }
                        crate::alarm::AlarmKind::Tamper => "tamper at the door".into(),
                        crate::alarm::AlarmKind::InputCut => format!(
                            "the {} input's line is cut",
                            input.map_or("door", InputRole::as_str)
                        ),
                        crate::alarm::AlarmKind::InputShorted => format!(
                            "the {} input's line is shorted",
                            input.map_or("door", InputRole::as_str)
                        ),
                    };
                    let mut data = serde_json::json!({ "state": "active" });
                    if let Some(i) = input {
                        data["input"] = serde_json::json!(i.as_str());
                    }
                    batch.push(Record {
                        event: event(EventKind::Alarm, door, kind.code(), reason, None, data),
                        raise: Some((door, kind)),
                    });
                }
                Action::Change {
                    id,
                    door,
                    kind,
                    state,
                    by,
                    note,
                } => {
                    let reason = match (&by, state) {
                        (Some(by), AlarmState::Acknowledged) => {
                            format!("alarm acknowledged by {by}")
                        }
                        (Some(by), _) => format!("alarm {} by {by}", state.as_str()),
                        (None, AlarmState::Returned) => {
                            "the alarm's cause ended; it waits for an acknowledgement".into()
                        }
                        (None, _) => "the alarm's cause ended: alarm cleared".into(),
                    };
                    let mut data = serde_json::json!({ "state": state.as_str(), "alarm": id });
                    if let Some(n) = note {
                        data["note"] = serde_json::json!(n);
                    }
                    batch.push(Record {
                        event: event(EventKind::Alarm, door, kind.code(), reason, by, data),
                        raise: None,
                    });
                }
                Action::Relock { door } => {
                    if let Some(s) = &signals {
                        s.relock(door);
                    }
                }
                Action::Release { door, window } => {
                    // What led to it is recorded first: a release refused
                    // (an interlock) records its refusal after the request.
                    if !batch.is_empty() && self.events.send(std::mem::take(&mut batch)).is_err() {
                        tracing::error!("door events not recorded: the recorder has stopped");
                    }
                    if let Some(s) = &signals {
                        s.release(door, window);
                    }
                }
                Action::PreAlarm { door, on } => {
                    if let Some(s) = &signals {
                        s.prealarm(door, on);
                    }
                }
            }
        }
        if !batch.is_empty() && self.events.send(batch).is_err() {
            tracing::error!("door events not recorded: the recorder has stopped");
        }
        self.wake_timer();
    }

    fn wake_timer(&self) {
        if let Some(w) = self.wake.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = w.send(());
        }
    }
}

fn event(
    kind: EventKind,
    door: DoorId,
    code: &str,
    reason: String,
    actor: Option<String>,
    data: serde_json::Value,
) -> NewEvent {
    NewEvent {
        time: Timestamp::now(),
        kind,
        door: Some(door),
        reader: None,
        cardholder: None,
        credential: None,
        result: None,
        code: Some(code.to_string()),
        reason: Some(reason),
        actor,
        data: Some(data),
        passback: false,
    }
}

/// Sleeps until the machine's next deadline or a wake-up; ends with the
/// watch or at [`DoorWatch::stop`].
fn timer(watch: Weak<DoorWatch>, woken: mpsc::Receiver<()>) {
    loop {
        let Some(w) = watch.upgrade() else { return };
        let next = w.next_deadline();
        drop(w);
        let r = match next {
            Some(t) => woken.recv_timeout(t.saturating_duration_since(Instant::now())),
            None => woken
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match r {
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
            Ok(()) => continue,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let Some(w) = watch.upgrade() else { return };
                w.tick();
            }
        }
    }
}
