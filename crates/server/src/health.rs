//! The tap path's health: which taps are in progress, and since when.
//!
//! Every tap ([`crate::door::Controller`]'s one tap path) holds a
//! [`TapInProgress`] from the moment it starts until its event is
//! committed and the door signalled. A tap that takes far longer than a
//! card, a PIN entry and a commit can (a reader, the database or a lock
//! output that does not answer) shows as the oldest tap in progress;
//! [`crate::watchdog`] then stops telling systemd that the service is
//! alive.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use access::ReaderId;

/// The taps in progress.
#[derive(Debug, Default)]
pub struct TapHealth {
    inner: Mutex<InProgress>,
}

#[derive(Debug, Default)]
struct InProgress {
    next: u64,
    taps: BTreeMap<u64, (Instant, ReaderId)>,
    finished: u64,
}

/// The oldest tap in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oldest {
    pub reader: ReaderId,
    pub age: Duration,
}

impl TapHealth {
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks a tap at `reader` as started; it ends when the returned guard
    /// is dropped.
    pub fn begin(&self, reader: ReaderId) -> TapInProgress<'_> {
        let mut g = self.lock();
        let id = g.next;
        g.next += 1;
        g.taps.insert(id, (Instant::now(), reader));
        TapInProgress { health: self, id }
    }

    /// The tap in progress for the longest time, as of `now`.
    pub fn oldest(&self, now: Instant) -> Option<Oldest> {
        let g = self.lock();
        // Ids grow with time: the first entry is the oldest.
        g.taps.values().next().map(|&(started, reader)| Oldest {
            reader,
            age: now.saturating_duration_since(started),
        })
    }

    /// Taps started and finished since the service started.
    pub fn finished(&self) -> u64 {
        self.lock().finished
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, InProgress> {
        // The map stays consistent whatever panicked while holding it.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A tap in progress; dropping it ends it.
#[derive(Debug)]
pub struct TapInProgress<'a> {
    health: &'a TapHealth,
    id: u64,
}

impl Drop for TapInProgress<'_> {
    fn drop(&mut self) {
        let mut g = self.health.lock();
        g.taps.remove(&self.id);
        g.finished += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_tap_in_progress_is_reported_until_it_ends() {
        let h = TapHealth::new();
        let t0 = Instant::now();
        assert_eq!(h.oldest(t0), None);
        let first = h.begin(ReaderId(1));
        let second = h.begin(ReaderId(2));
        let later = Instant::now() + Duration::from_secs(5);
        let o = h.oldest(later).unwrap();
        assert_eq!(o.reader, ReaderId(1));
        assert!(o.age >= Duration::from_secs(5));
        drop(first);
        assert_eq!(h.oldest(later).unwrap().reader, ReaderId(2));
        drop(second);
        assert_eq!(h.oldest(later), None);
        assert_eq!(h.finished(), 2);
    }
}
