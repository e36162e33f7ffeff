//! `WATCHDOG=1` from the tap path's health.
//!
//! systemd restarts a `WatchdogSec=` service that stops sending
//! `WATCHDOG=1`. The service sends it only while its tap path is healthy:
//! at each check, no tap may have been in progress longer than
//! `stuck_after` ([`crate::health::TapHealth`]), and the event log's
//! writer must still run. A stuck tap withholds the ping and says why in
//! `STATUS=`; when the tap ends the pings resume. The checks run on the
//! service's runtime, so a runtime that no longer schedules its tasks
//! (the one the event log's commits need) sends nothing either.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::health::TapHealth;
use crate::notify::{Notifier, State};

/// What the watchdog checks, and how often.
pub struct Watchdog {
    pub notifier: Arc<Notifier>,
    pub health: Arc<TapHealth>,
    /// The interval between checks: half the manager's timeout.
    pub every: Duration,
    /// A tap in progress for longer is stuck.
    pub stuck_after: Duration,
    /// The status line sent again when the service recovers.
    pub ready_status: Box<dyn Fn() -> String + Send + Sync>,
    /// Whether the event log's writer still runs.
    pub writer_alive: Box<dyn Fn() -> bool + Send + Sync>,
}

impl std::fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watchdog")
            .field("every", &self.every)
            .field("stuck_after", &self.stuck_after)
            .finish_non_exhaustive()
    }
}

/// What one check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Healthy,
    /// Why the ping is withheld, in a sentence.
    Unhealthy(String),
}

impl Watchdog {
    /// The interval for a manager timeout of `timeout`: half of it, as
    /// `sd_watchdog_enabled(3)` advises.
    pub fn interval(timeout: Duration) -> Duration {
        (timeout / 2).max(Duration::from_millis(1))
    }

    /// One check of the tap path, as of `now`.
    pub fn check(&self, now: Instant) -> Verdict {
        if !(self.writer_alive)() {
            return Verdict::Unhealthy("the event log's writer has stopped".into());
        }
        match self.health.oldest(now) {
            Some(o) if o.age > self.stuck_after => Verdict::Unhealthy(format!(
                "a tap at reader {} has been in progress for {} s",
                o.reader.0,
                o.age.as_secs()
            )),
            _ => Verdict::Healthy,
        }
    }

    /// Checks every [`every`](Self::every) until `stop` turns true: pings
    /// while healthy, tells why when not.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut unhealthy = false;
        loop {
            match self.check(Instant::now()) {
                Verdict::Healthy => {
                    if unhealthy {
                        tracing::info!("tap path healthy again; watchdog pings resume");
                        self.notifier
                            .tell(&[State::Status((self.ready_status)()), State::Watchdog]);
                        unhealthy = false;
                    } else {
                        self.notifier.tell(&[State::Watchdog]);
                    }
                }
                Verdict::Unhealthy(why) => {
                    if !unhealthy {
                        tracing::error!(problem = %why, "tap path stuck; watchdog pings withheld");
                        self.notifier.tell(&[State::Status(format!(
                            "stuck: {why}; watchdog pings withheld"
                        ))]);
                        unhealthy = true;
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.every) => {}
                r = stop.changed() => if r.is_err() || *stop.borrow() { return },
            }
        }
    }
}
