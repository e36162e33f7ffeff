//! Doors turning stale and current again: one `door` event each way.
//!
//! A door is *stale* while the site's revocation data or its access changes
//! from the central are older than the door's maximum (its own
//! `max_staleness_s`, else `[offline] max_staleness`; see
//! [`access::freshness`]). Its taps apply its policy at the moment of
//! opening (`decide`, `refuse`, `recent-only`, in
//! [`access::AccessSnapshot::decide_offline`]); this watch records when it
//! crosses over: a `data-stale` event naming the data and its age, and a
//! `data-current` event when it recovers — once each, not at every tap.
//!
//! No polling: the watch computes the next instant a door crosses its
//! maximum and sleeps until then, or until the data's freshness changes
//! (a CRL downloaded, a change applied from the central) or the access data
//! does (a door's maximum edited). A door already stale at start-up is
//! recorded as such once.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use access::jiff::Timestamp;
use access::{AccessSnapshot, AsOf, DoorId, Offline};
use store::{EventKind, NewEvent};
use tokio::sync::watch;

use crate::door::Controller;
use crate::revocation::ACTOR;

/// A door crossing its maximum either way.
#[derive(Debug, Clone, PartialEq)]
pub struct Crossing {
    pub door: DoorId,
    /// Stale now (else current again).
    pub stale: bool,
    pub event: NewEvent,
}

/// Which doors were last recorded stale.
#[derive(Debug, Default)]
pub struct StaleDoors {
    stale: HashMap<DoorId, bool>,
}

impl StaleDoors {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `door` was last recorded stale.
    pub fn is_stale(&self, door: DoorId) -> bool {
        self.stale.get(&door).copied().unwrap_or(false)
    }

    /// The doors of `snapshot` whose staleness at `now` differs from the one
    /// last recorded (each with its event), and the next instant a door
    /// that is current now turns stale, when one will (its data held as it
    /// is). Pure: the time and the freshness are arguments.
    pub fn update(
        &mut self,
        snapshot: &AccessSnapshot,
        offline: &Offline,
        now: Timestamp,
    ) -> (Vec<Crossing>, Option<Timestamp>) {
        self.stale.retain(|d, _| snapshot.door(*d).is_some());
        let f = offline.freshness;
        let mut out = Vec::new();
        let mut next: Option<Timestamp> = None;
        for door in snapshot.doors() {
            let Some(max) = offline.max_for(door) else {
                if self.stale.remove(&door.id) == Some(true) {
                    out.push(crossing(door, false, offline, now, max_text(None)));
                }
                continue;
            };
            let stale = f.stale(max, now);
            let was = self.is_stale(door.id);
            if stale.is_some() != was {
                self.stale.insert(door.id, stale.is_some());
                let why = match stale {
                    Some(s) => s.to_string(),
                    None => max_text(Some(max)),
                };
                out.push(crossing(door, stale.is_some(), offline, now, why));
            }
            if stale.is_none() {
                // The data exceeds the maximum one second after `at + max`.
                for as_of in [f.revocation, f.changes] {
                    if let AsOf::At { at } = as_of {
                        let secs = i64::try_from(max).unwrap_or(i64::MAX).saturating_add(1);
                        if let Ok(t) = at.checked_add(access::jiff::SignedDuration::from_secs(secs))
                        {
                            if t > now {
                                next = Some(next.map_or(t, |n| n.min(t)));
                            }
                        }
                    }
                }
            }
        }
        (out, next)
    }
}

fn max_text(max: Option<u64>) -> String {
    match max {
        Some(s) => format!("within the maximum of {s} s"),
        None => "no maximum applies any more".into(),
    }
}

fn crossing(
    door: &access::Door,
    stale: bool,
    offline: &Offline,
    now: Timestamp,
    why: String,
) -> Crossing {
    let (code, reason) = if stale {
        (
            "data-stale",
            format!(
                "door `{}` decides on stale data (policy `{}`): {why}",
                door.name, door.stale_policy
            ),
        )
    } else {
        (
            "data-current",
            format!("door `{}` decides on current data again: {why}", door.name),
        )
    };
    let f = offline.freshness;
    let age = |a: AsOf| match a.age(now) {
        access::Age::Secs(s) => serde_json::json!(s),
        access::Age::Never => serde_json::json!("never"),
        access::Age::NotApplicable => serde_json::Value::Null,
    };
    let mut event = NewEvent::door_command(now, ACTOR, door.id, code, reason);
    event.kind = EventKind::Door;
    event.data = Some(serde_json::json!({
        "policy": door.stale_policy.as_str(),
        "max_staleness_s": offline.max_for(door),
        "revocation_age_s": age(f.revocation),
        "changes_age_s": age(f.changes),
    }));
    Crossing {
        door: door.id,
        stale,
        event,
    }
}

/// Records each door's crossings until `stop` turns true (see the module
/// description). `doors` is shared with the status API.
pub async fn run(
    controller: Arc<Controller>,
    doors: Arc<std::sync::Mutex<StaleDoors>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut swaps = controller.snapshot_changes();
    let mut fresh = controller.freshness_changes();
    loop {
        if *stop.borrow() {
            return;
        }
        let now = controller.now();
        let (crossings, next) = doors.lock().unwrap_or_else(|p| p.into_inner()).update(
            &controller.snapshot(),
            &controller.offline(),
            now,
        );
        if !crossings.is_empty() {
            for c in &crossings {
                tracing::warn!(
                    door = c.door.0,
                    stale = c.stale,
                    "{}",
                    c.event.reason.as_deref().unwrap_or("")
                );
            }
            let events = crossings.into_iter().map(|c| c.event).collect();
            if let Err(e) = controller.log().append_all(events).await {
                tracing::error!(error = %e, "the doors' stale-data events could not be recorded");
            }
        }
        let wait = next.map(|t| {
            Duration::from_secs(
                u64::try_from(t.as_second().saturating_sub(now.as_second())).unwrap_or(1),
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
            r = fresh.changed() => if r.is_err() { return },
            _ = stop.changed() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use access::{Freshness, StalePolicy};

    fn snapshot(max: Option<u64>) -> AccessSnapshot {
        let mut e = access::Entities::default();
        e.sites.push(access::Site {
            id: access::SiteId(1),
            name: "Branch".into(),
            time_zone: "UTC".into(),
            lockdown: false,
        });
        e.doors.push(access::Door {
            id: DoorId(1),
            site: access::SiteId(1),
            name: "Front".into(),
            mechanism: access::Mechanism::PkiCak,
            allow_low_assurance: false,
            passback: Default::default(),
            mode: Default::default(),
            unlock_schedule: None,
            first_card_unlock: false,
            max_staleness_s: max,
            stale_policy: StalePolicy::Decide,
        });
        AccessSnapshot::build(e).unwrap()
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    #[test]
    fn one_event_when_a_door_turns_stale_and_one_when_it_recovers() {
        let s = snapshot(Some(3_600));
        let mut doors = StaleDoors::new();
        let mut offline = Offline {
            freshness: Freshness {
                revocation: AsOf::At { at: t(0) },
                changes: AsOf::NotApplicable,
            },
            default_max_staleness_s: None,
        };
        let (c, next) = doors.update(&s, &offline, t(60));
        assert!(c.is_empty());
        assert_eq!(next, Some(t(3_601)));
        let (c, _) = doors.update(&s, &offline, t(3_600));
        assert!(c.is_empty(), "exactly the maximum is not beyond it");
        let (c, next) = doors.update(&s, &offline, t(3_601));
        assert_eq!(c.len(), 1);
        assert!(c[0].stale);
        assert_eq!(c[0].event.code.as_deref(), Some("data-stale"));
        assert_eq!(
            c[0].event.reason.as_deref(),
            Some("door `Front` decides on stale data (policy `decide`): the revocation data is 1 h 1 s old (at most 1 h allowed)")
        );
        assert_eq!(next, None);
        // Still stale: nothing more.
        assert!(doors.update(&s, &offline, t(7_200)).0.is_empty());
        assert!(doors.is_stale(DoorId(1)));
        // A refresh: current again, once.
        offline.freshness.revocation = AsOf::At { at: t(7_000) };
        let (c, next) = doors.update(&s, &offline, t(7_200));
        assert_eq!(c.len(), 1);
        assert!(!c[0].stale);
        assert_eq!(c[0].event.code.as_deref(), Some("data-current"));
        assert_eq!(c[0].event.data.as_ref().unwrap()["revocation_age_s"], 200);
        assert_eq!(next, Some(t(10_601)));
        assert!(doors.update(&s, &offline, t(7_300)).0.is_empty());
    }

    #[test]
    fn no_maximum_no_event_and_a_site_default() {
        let s = snapshot(None);
        let mut doors = StaleDoors::new();
        let mut offline = Offline {
            freshness: Freshness {
                revocation: AsOf::Never,
                changes: AsOf::Never,
            },
            default_max_staleness_s: None,
        };
        assert_eq!(doors.update(&s, &offline, t(0)), (vec![], None));
        offline.default_max_staleness_s = Some(60);
        let (c, _) = doors.update(&s, &offline, t(0));
        assert_eq!(c.len(), 1);
        assert!(c[0].stale);
        assert_eq!(c[0].event.data.as_ref().unwrap()["changes_age_s"], "never");
        // The maximum removed: current again.
        offline.default_max_staleness_s = None;
        let (c, _) = doors.update(&s, &offline, t(0));
        assert_eq!(c.len(), 1);
        assert!(!c[0].stale);
    }
}
