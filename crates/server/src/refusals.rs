//! Refused connections on the remote-reader port, counted per source
//! address and reason over a window (sans-I/O: the caller passes the
//! time). A peer that fails its handshake 200 times a second writes one
//! durable event per window, not 200; every attempt is still counted (the
//! metrics count each one as it happens).
//!
//! A window opens with the first refusal of its (address, reason) and
//! closes `window` later; [`Refusals::due`] hands out the windows that
//! have closed, each with its count and the first refusal's sentence. At
//! most [`MAX_SOURCES`] windows are open at once: refusals from further
//! addresses are counted together under "many addresses", so a flood
//! from many addresses still writes a bounded number of events.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Windows open at once, at most; the rest are counted together.
pub const MAX_SOURCES: usize = 64;

/// What a window counts: a source address (`None`: many addresses, past
/// [`MAX_SOURCES`]) and a reason kind (a stable code).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub source: Option<IpAddr>,
    pub kind: &'static str,
}

/// A closed window: one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub key: Key,
    /// Refusals in the window (at least 1).
    pub count: u64,
    /// The first refusal's sentence (already escaped by the caller).
    pub text: String,
    /// The first refusal's peer (address and port).
    pub peer: String,
    /// The reader connection it names, when a certificate name did.
    pub connection: Option<String>,
    /// From the first refusal to the window's close.
    pub window: Duration,
}

#[derive(Debug)]
struct Open {
    since: Instant,
    count: u64,
    text: String,
    peer: String,
    connection: Option<String>,
}

/// The open windows.
#[derive(Debug)]
pub struct Refusals {
    window: Duration,
    open: HashMap<Key, Open>,
}

impl Refusals {
    pub fn new(window: Duration) -> Self {
        Refusals {
            window,
            open: HashMap::new(),
        }
    }

    /// Counts one refusal from `source` for a reason of kind `kind`;
    /// `text`, `peer` and `connection` are kept when it opens a window.
    pub fn note(
        &mut self,
        now: Instant,
        source: IpAddr,
        kind: &'static str,
        text: impl FnOnce() -> String,
        peer: &str,
        connection: Option<String>,
    ) {
        let mut key = Key {
            source: Some(source),
            kind,
        };
        if !self.open.contains_key(&key) && self.open.len() >= MAX_SOURCES {
            key.source = None;
        }
        self.open
            .entry(key)
            .and_modify(|o| o.count += 1)
            .or_insert_with(|| Open {
                since: now,
                count: 1,
                text: text(),
                peer: peer.to_string(),
                connection,
            });
    }

    /// When the next window closes.
    pub fn next_due(&self) -> Option<Instant> {
        self.open.values().map(|o| o.since + self.window).min()
    }

    /// The windows closed at `now`, oldest first.
    pub fn due(&mut self, now: Instant) -> Vec<Summary> {
        let window = self.window;
        let closed: Vec<Key> = self
            .open
            .iter()
            .filter(|(_, o)| now >= o.since + window)
            .map(|(k, _)| k.clone())
            .collect();
        self.take(closed, now)
    }

    /// Every open window, closed now (at shutdown).
    pub fn drain(&mut self, now: Instant) -> Vec<Summary> {
        let all: Vec<Key> = self.open.keys().cloned().collect();
        self.take(all, now)
    }

    /// Forgets the windows of `source` (a reader from there came online):
    /// what they counted is handed out now.
    pub fn close_source(&mut self, source: IpAddr, now: Instant) -> Vec<Summary> {
        let keys: Vec<Key> = self
            .open
            .keys()
            .filter(|k| k.source == Some(source))
            .cloned()
            .collect();
        self.take(keys, now)
    }

    fn take(&mut self, keys: Vec<Key>, now: Instant) -> Vec<Summary> {
        let mut out: Vec<(Instant, Summary)> = keys
            .into_iter()
            .filter_map(|k| {
                let o = self.open.remove(&k)?;
                Some((
                    o.since,
                    Summary {
                        key: k,
                        count: o.count,
                        text: o.text,
                        peer: o.peer,
                        connection: o.connection,
                        window: now.saturating_duration_since(o.since),
                    },
                ))
            })
            .collect();
        out.sort_by_key(|(since, _)| *since);
        out.into_iter().map(|(_, s)| s).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    #[test]
    fn refusals_from_one_source_and_reason_are_one_summary_per_window() {
        let t0 = Instant::now();
        let w = Duration::from_secs(10);
        let mut r = Refusals::new(w);
        for i in 0..20 {
            r.note(
                t0 + Duration::from_millis(i),
                ip(1),
                "certificate",
                || format!("first {i}"),
                "10.0.0.1:1",
                None,
            );
        }
        r.note(
            t0,
            ip(1),
            "handshake",
            || "other".into(),
            "10.0.0.1:2",
            None,
        );
        r.note(t0, ip(2), "certificate", || "b".into(), "10.0.0.2:1", None);
        assert_eq!(r.next_due(), Some(t0 + w));
        assert!(r.due(t0 + w - Duration::from_millis(1)).is_empty());
        let s = r.due(t0 + w);
        assert_eq!(s.len(), 3);
        let cert = s
            .iter()
            .find(|s| {
                s.key
                    == Key {
                        source: Some(ip(1)),
                        kind: "certificate",
                    }
            })
            .unwrap();
        assert_eq!((cert.count, cert.text.as_str()), (20, "first 0"));
        assert!(r.next_due().is_none());
        // A new window opens with the next refusal.
        r.note(t0 + w, ip(1), "certificate", || "again".into(), "p", None);
        assert_eq!(r.drain(t0 + w).len(), 1);
    }

    #[test]
    fn past_the_source_limit_refusals_are_counted_together() {
        let t0 = Instant::now();
        let mut r = Refusals::new(Duration::from_secs(1));
        for n in 0..=255u8 {
            for m in 0..4u8 {
                r.note(
                    t0,
                    IpAddr::from([10, 1, m, n]),
                    "handshake",
                    || "x".into(),
                    "p",
                    None,
                );
            }
        }
        let s = r.drain(t0);
        assert_eq!(s.len(), MAX_SOURCES + 1);
        assert_eq!(s.iter().map(|s| s.count).sum::<u64>(), 1024);
        let many = s.iter().find(|s| s.key.source.is_none()).unwrap();
        assert_eq!(many.count, 1024 - MAX_SOURCES as u64);
    }
}
