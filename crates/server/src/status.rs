//! What the dashboard reads about the doors, kept in memory so reading it
//! costs no database query:
//!
//! - [`ReaderStatus`]: whether each watched reader is connected and since
//!   when, written by the reader sources ([`crate::source`]: PC/SC threads
//!   as PC/SC reports changes, no polling; OSDP ports; remote readers);
//! - [`LastTaps`]: the latest tap of every door, read from the store once
//!   at start-up for the doors of the snapshot ([`store::Store::last_taps`],
//!   a look-up per door, not a scan of the log) and then told each
//!   committed tap by the controller (a [`TapObserver`]);
//! - [`SignalTimes`]: the `signal` stage of recent taps (the commit and the
//!   lock), which the stored event cannot hold (its own commit is not
//!   inside it), kept per door for a day and handed to the latency
//!   statistics by event id.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use access::jiff::Timestamp;
use access::{CardholderId, DoorId, ReaderId};
use auth::StageName;
use store::{Event, EventId, EventKind, EventResult, Store, StoreError};

use crate::door::{TapObserver, TapResult};

/// Whether a reader is connected, and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    pub connected: bool,
    /// When the reader was last seen connecting or disconnecting (or when
    /// its watch started).
    pub since: Timestamp,
}

/// The connection state of every watched reader. A reader no thread
/// watches (another transport, or no PC/SC service) has none.
#[derive(Debug, Default)]
pub struct ReaderStatus {
    readers: Mutex<HashMap<ReaderId, Connection>>,
}

impl ReaderStatus {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `reader` is (or is not) connected; `since` moves only
    /// when the state changes.
    pub fn set(&self, reader: ReaderId, connected: bool) {
        let mut m = self.readers.lock().unwrap_or_else(|p| p.into_inner());
        match m.get(&reader) {
            Some(c) if c.connected == connected => {}
            _ => {
                m.insert(
                    reader,
                    Connection {
                        connected,
                        since: Timestamp::now(),
                    },
                );
            }
        }
    }

    /// The reader is no longer watched.
    pub fn forget(&self, reader: ReaderId) {
        self.readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&reader);
    }

    /// Every watched reader's connection, by reader id.
    pub fn all(&self) -> Vec<(ReaderId, Connection)> {
        let mut v: Vec<_> = self
            .readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(r, c)| (*r, *c))
            .collect();
        v.sort_by_key(|(r, _)| r.0);
        v
    }

    /// `None` when no thread watches `reader`.
    pub fn get(&self, reader: ReaderId) -> Option<Connection> {
        self.readers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&reader)
            .copied()
    }
}

/// A door's latest tap, as its event records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastTap {
    pub event: EventId,
    pub time: Timestamp,
    pub result: Option<EventResult>,
    /// `granted` or the refusal code.
    pub code: Option<String>,
    pub reason: Option<String>,
    pub reader: Option<ReaderId>,
    pub cardholder: Option<CardholderId>,
}

impl LastTap {
    /// The tap an event records; `None` for other kinds of event.
    pub fn of_event(e: &Event) -> Option<(DoorId, LastTap)> {
        let n = &e.event;
        match (n.kind, n.door) {
            (EventKind::Tap, Some(door)) => Some((
                door,
                LastTap {
                    event: e.id,
                    time: n.time,
                    result: n.result,
                    code: n.code.clone(),
                    reason: n.reason.clone(),
                    reader: n.reader,
                    cardholder: n.cardholder,
                },
            )),
            _ => None,
        }
    }
}

/// The latest tap of every door: read from the store at start-up
/// ([`LastTaps::seed`]), then kept current as a [`TapObserver`] of the
/// controller (committed taps only).
#[derive(Debug, Default)]
pub struct LastTaps {
    doors: Mutex<HashMap<DoorId, LastTap>>,
}

impl LastTaps {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the latest tap of each door of `doors` from `store` (one
    /// indexed look-up per door, whatever the log's size).
    pub async fn seed(&self, store: &Store, doors: &[DoorId]) -> Result<(), StoreError> {
        for e in store.last_taps(doors).await? {
            if let Some((door, tap)) = LastTap::of_event(&e) {
                self.offer(door, tap);
            }
        }
        Ok(())
    }

    /// Keeps `tap` if it is later than the one held for `door`.
    pub fn offer(&self, door: DoorId, tap: LastTap) {
        let mut m = self.doors.lock().unwrap_or_else(|p| p.into_inner());
        match m.get(&door) {
            Some(held) if held.event >= tap.event => {}
            _ => {
                m.insert(door, tap);
            }
        }
    }

    pub fn get(&self, door: DoorId) -> Option<LastTap> {
        self.doors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&door)
            .cloned()
    }
}

impl TapObserver for LastTaps {
    /// The fields are those [`crate::door::Controller::tap`] stores in the
    /// event; a tap whose event was not committed is not kept.
    fn tap(&self, r: &TapResult) {
        let Ok(event) = r.event else {
            return;
        };
        self.offer(
            r.door,
            LastTap {
                event,
                // The store keeps microseconds.
                time: Timestamp::from_microsecond(r.time.as_microsecond()).unwrap_or(r.time),
                result: Some(if r.granted() {
                    EventResult::Granted
                } else {
                    EventResult::Refused
                }),
                code: Some(r.code().to_string()),
                reason: r.reason(),
                reader: Some(r.reader),
                cardholder: r.decision.as_ref().and_then(|d| d.cardholder),
            },
        );
    }
}

/// How long [`SignalTimes`] keeps a tap's `signal` stage.
pub const SIGNAL_KEEP: Duration = Duration::from_secs(24 * 3600);
/// The most taps per door [`SignalTimes`] keeps (the oldest go first).
pub const SIGNAL_CAP: usize = 50_000;

/// Per event: when it was recorded, and its `signal` stage (µs).
type DoorSignals = BTreeMap<EventId, (Instant, u64)>;

/// The `signal` stage (µs) of each committed tap of the last day, per
/// door: a [`TapObserver`] of the controller. At most [`SIGNAL_CAP`] taps
/// per door (about 1.2 MB for a door that busy).
#[derive(Debug, Default)]
pub struct SignalTimes {
    doors: Mutex<HashMap<DoorId, DoorSignals>>,
}

impl SignalTimes {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the `signal` stage of tap `event` at `door`.
    pub fn record(&self, door: DoorId, event: EventId, signal_us: u64) {
        let now = Instant::now();
        let mut m = self.doors.lock().unwrap_or_else(|p| p.into_inner());
        let taps = m.entry(door).or_default();
        taps.insert(event, (now, signal_us));
        // Ids follow commit order, so the oldest taps come first.
        while taps.len() > SIGNAL_CAP
            || taps
                .first_key_value()
                .is_some_and(|(_, (at, _))| now.duration_since(*at) > SIGNAL_KEEP)
        {
            taps.pop_first();
        }
    }

    /// The `signal` stage of every tap of `door` held, by event id.
    pub fn door(&self, door: DoorId) -> HashMap<EventId, u64> {
        let m = self.doors.lock().unwrap_or_else(|p| p.into_inner());
        m.get(&door)
            .map(|t| t.iter().map(|(id, (_, us))| (*id, *us)).collect())
            .unwrap_or_default()
    }
}

impl TapObserver for SignalTimes {
    fn tap(&self, r: &TapResult) {
        let (Ok(event), Some(signal)) = (&r.event, r.transaction.stage(StageName::Signal)) else {
            return;
        };
        self.record(r.door, *event, signal.wall_us);
    }
}

/// Hands every tap to each observer in turn.
pub struct Observers(pub Vec<Arc<dyn TapObserver>>);

impl TapObserver for Observers {
    fn tap(&self, r: &TapResult) {
        for o in &self.0 {
            o.tap(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_since_moves_only_on_a_change() {
        let s = ReaderStatus::new();
        assert_eq!(s.get(ReaderId(1)), None);
        s.set(ReaderId(1), true);
        let first = s.get(ReaderId(1)).unwrap();
        assert!(first.connected);
        s.set(ReaderId(1), true);
        assert_eq!(s.get(ReaderId(1)), Some(first));
        s.set(ReaderId(1), false);
        let off = s.get(ReaderId(1)).unwrap();
        assert!(!off.connected);
        assert!(off.since >= first.since);
        s.forget(ReaderId(1));
        assert_eq!(s.get(ReaderId(1)), None);
    }

    fn event(id: i64, kind: EventKind, door: Option<i64>) -> Event {
        Event {
            id: EventId(id),
            event: store::NewEvent {
                time: Timestamp::now(),
                kind,
                door: door.map(DoorId),
                reader: None,
                cardholder: None,
                credential: None,
                result: None,
                code: None,
                reason: None,
                actor: None,
                data: None,
                passback: false,
            },
        }
    }

    #[test]
    fn last_tap_keeps_the_latest_tap_per_door() {
        let t = LastTaps::new();
        let offer = |e: Event| {
            if let Some((door, tap)) = LastTap::of_event(&e) {
                t.offer(door, tap);
            }
        };
        offer(event(5, EventKind::Tap, Some(1)));
        offer(event(3, EventKind::Tap, Some(1)));
        offer(event(6, EventKind::DoorCommand, Some(1)));
        offer(event(7, EventKind::Tap, None));
        assert_eq!(t.get(DoorId(1)).unwrap().event, EventId(5));
        offer(event(8, EventKind::Tap, Some(1)));
        assert_eq!(t.get(DoorId(1)).unwrap().event, EventId(8));
        assert!(t.get(DoorId(2)).is_none());
    }

    #[test]
    fn signal_times_are_capped_per_door() {
        let s = SignalTimes::new();
        for i in 0..(SIGNAL_CAP as i64 + 10) {
            s.record(DoorId(1), EventId(i), i as u64);
        }
        s.record(DoorId(2), EventId(1), 42);
        let d1 = s.door(DoorId(1));
        assert_eq!(d1.len(), SIGNAL_CAP);
        assert!(!d1.contains_key(&EventId(9)));
        assert_eq!(d1[&EventId(10)], 10);
        assert_eq!(s.door(DoorId(2))[&EventId(1)], 42);
        assert!(s.door(DoorId(3)).is_empty());
    }
}
