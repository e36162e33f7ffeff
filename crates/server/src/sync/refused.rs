//! `sync.refused` events, limited per peer: a misbehaving site (a
//! certificate asking for another site's part, again and again) cannot
//! flood the central's log.
//!
//! A peer is the address a request came from (without the port: each
//! connection has its own) and the site its certificate names. Its first
//! refusal is recorded as it happens and opens a window
//! ([`DEFAULT_WINDOW`], a minute); the refusals that follow within it are
//! counted, not recorded, and when the window ends one summary event is
//! recorded (`sync.refused` with `suppressed`: how many, and the codes
//! seen) and a new window opens. A peer quiet for a whole window starts
//! over: its next refusal is recorded at once. Every refusal is still
//! logged (tracing) and answered as before; only the events are limited.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use access::jiff::Timestamp;
use serde_json::json;
use store::{EventLog, NewEvent};
use tokio::sync::watch;
use tokio::time::Instant;

/// How long refusals of one peer after its first are counted before a
/// summary is recorded.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);

/// Peers remembered at most; beyond, those whose window ended are
/// forgotten first, then the oldest.
const MAX_PEERS: usize = 4096;

/// Who was refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerKey {
    pub ip: IpAddr,
    /// The site its certificate names, if any.
    pub site: Option<String>,
}

/// What to do with one refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Record it now.
    Record,
    /// Count it; when `flush_at` is given, a summary is due then (the
    /// first refusal counted in this window).
    Count { flush_at: Option<Instant> },
}

#[derive(Debug)]
struct Window {
    opened: Instant,
    suppressed: u64,
    codes: BTreeMap<&'static str, u64>,
    flush_due: bool,
}

/// The counting, without the clock or the log (see the module's
/// documentation).
#[derive(Debug, Default)]
pub struct Counter {
    peers: HashMap<PeerKey, Window>,
}

impl Counter {
    /// A refusal of `peer` (`code`) at `now`.
    pub fn refused(
        &mut self,
        peer: &PeerKey,
        code: &'static str,
        now: Instant,
        window: Duration,
    ) -> Verdict {
        match self.peers.get_mut(peer) {
            Some(w) if w.flush_due || now < w.opened + window => {
                w.suppressed += 1;
                *w.codes.entry(code).or_default() += 1;
                if w.flush_due {
                    Verdict::Count { flush_at: None }
                } else {
                    w.flush_due = true;
                    Verdict::Count {
                        flush_at: Some(w.opened + window),
                    }
                }
            }
            _ => {
                if self.peers.len() >= MAX_PEERS {
                    self.forget(now, window);
                }
                self.peers.insert(
                    peer.clone(),
                    Window {
                        opened: now,
                        suppressed: 0,
                        codes: BTreeMap::new(),
                        flush_due: false,
                    },
                );
                Verdict::Record
            }
        }
    }

    /// The window of `peer` ends at `now`: how many refusals were counted
    /// in it, by code (none: nothing to record). A new window opens.
    pub fn flush(
        &mut self,
        peer: &PeerKey,
        now: Instant,
    ) -> Option<(u64, BTreeMap<&'static str, u64>)> {
        let w = self.peers.get_mut(peer)?;
        w.flush_due = false;
        w.opened = now;
        if w.suppressed == 0 {
            return None;
        }
        let n = std::mem::take(&mut w.suppressed);
        Some((n, std::mem::take(&mut w.codes)))
    }

    /// Peers remembered.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// Forgets the peers whose window ended with nothing due, then, if
    /// still full, the oldest with nothing due.
    fn forget(&mut self, now: Instant, window: Duration) {
        self.peers
            .retain(|_, w| w.flush_due || now < w.opened + window);
        while self.peers.len() >= MAX_PEERS {
            let oldest = self
                .peers
                .iter()
                .filter(|(_, w)| !w.flush_due)
                .min_by_key(|(_, w)| w.opened)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    self.peers.remove(&k);
                }
                None => break,
            }
        }
    }
}

/// The central's `sync.refused` events, limited per peer.
#[derive(Debug)]
pub struct RefusalLog {
    log: EventLog,
    counter: Arc<Mutex<Counter>>,
    window_ms: std::sync::atomic::AtomicU64,
    stop: watch::Receiver<bool>,
}

impl RefusalLog {
    pub fn new(log: EventLog, stop: watch::Receiver<bool>) -> Self {
        RefusalLog {
            log,
            counter: Arc::default(),
            window_ms: (DEFAULT_WINDOW.as_millis() as u64).into(),
            stop,
        }
    }

    /// The window after a peer's recorded refusal (for tests and tuning).
    pub fn set_window(&self, window: Duration) {
        self.window_ms.store(
            window.as_millis().max(1) as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    fn window(&self) -> Duration {
        Duration::from_millis(self.window_ms.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Records `event` (a refusal of `peer` with `code`) now, or counts it
    /// for the peer's next summary.
    pub async fn refused(&self, peer: PeerKey, code: &'static str, event: NewEvent) {
        let window = self.window();
        let verdict = self
            .counter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .refused(&peer, code, Instant::now(), window);
        match verdict {
            Verdict::Record => {
                if let Err(e) = self.log.append(event).await {
                    tracing::error!(error = %e, "the sync.refused event could not be recorded");
                }
            }
            Verdict::Count { flush_at: None } => {}
            Verdict::Count { flush_at: Some(at) } => {
                let (log, counter, mut stop) =
                    (self.log.clone(), self.counter.clone(), self.stop.clone());
                tokio::spawn(async move {
                    // At the window's end, or at once when the central
                    // stops (the count is not lost).
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = stop.wait_for(|s| *s) => {}
                    }
                    let counted = counter
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .flush(&peer, Instant::now());
                    if let Some((n, codes)) = counted {
                        if let Err(e) = log.append(summary(&peer, n, &codes, window)).await {
                            tracing::error!(error = %e, "the sync.refused summary could not be recorded");
                        }
                    }
                });
            }
        }
    }
}

/// The summary of `n` refusals of `peer` not recorded one by one.
fn summary(
    peer: &PeerKey,
    n: u64,
    codes: &BTreeMap<&'static str, u64>,
    window: Duration,
) -> NewEvent {
    let site = peer
        .site
        .as_deref()
        .map(|s| crate::peer_text::escape(s, 64));
    let who = match &site {
        Some(s) => format!("site `{s}` at {}", peer.ip),
        None => format!("{} (no site in its certificate)", peer.ip),
    };
    let seconds = window.as_secs_f64();
    NewEvent::admin(
        Timestamp::now(),
        "site-link",
        "sync.refused",
        format!("{n} more site link request(s) from {who} refused within {seconds} s (counted, not recorded one by one)"),
        json!({
            "code": "summary",
            "suppressed": n,
            "codes": codes,
            "peer": peer.ip.to_string(),
            "site": site,
            "window_s": seconds,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(site: &str) -> PeerKey {
        PeerKey {
            ip: "127.0.0.1".parse().unwrap(),
            site: Some(site.into()),
        }
    }

    #[test]
    fn the_first_refusal_is_recorded_and_the_rest_of_the_minute_summed() {
        let w = Duration::from_secs(60);
        let t0 = Instant::now();
        let mut c = Counter::default();
        let hq = peer("hq");
        assert_eq!(c.refused(&hq, "other-site", t0, w), Verdict::Record);
        // The first counted one schedules the summary at the window's end.
        assert_eq!(
            c.refused(&hq, "other-site", t0 + Duration::from_secs(1), w),
            Verdict::Count {
                flush_at: Some(t0 + w)
            }
        );
        for i in 2..10 {
            assert_eq!(
                c.refused(&hq, "unknown-site", t0 + Duration::from_secs(i), w),
                Verdict::Count { flush_at: None }
            );
        }
        // Another peer is counted apart.
        assert_eq!(
            c.refused(&peer("lab"), "other-site", t0, w),
            Verdict::Record
        );
        let (n, codes) = c.flush(&hq, t0 + w).unwrap();
        assert_eq!(n, 9);
        assert_eq!(codes.get("other-site"), Some(&1));
        assert_eq!(codes.get("unknown-site"), Some(&8));
        // Still flooding: counted into the next summary.
        assert_eq!(
            c.refused(&hq, "other-site", t0 + w + Duration::from_secs(1), w),
            Verdict::Count {
                flush_at: Some(t0 + w + w)
            }
        );
        assert_eq!(c.flush(&hq, t0 + w + w).map(|x| x.0), Some(1));
        // A window with nothing counted: no summary; a quiet peer starts
        // over with a recorded refusal.
        assert_eq!(c.flush(&hq, t0 + w + w), None);
        assert_eq!(c.refused(&hq, "other-site", t0 + w * 4, w), Verdict::Record);
    }

    #[test]
    fn peers_remembered_are_bounded() {
        let w = Duration::from_secs(60);
        let t0 = Instant::now();
        let mut c = Counter::default();
        for i in 0..(MAX_PEERS as u32 + 100) {
            let p = PeerKey {
                ip: IpAddr::from(i.to_be_bytes()),
                site: None,
            };
            assert_eq!(
                c.refused(&p, "no-site-in-certificate", t0, w),
                Verdict::Record
            );
        }
        assert!(c.len() <= MAX_PEERS);
    }
}
