//! Scheduled door modes: whether a door's unlock schedule holds it unlocked
//! at an instant, when that next changes, and the mode the door is in.
//!
//! Windows are evaluated in the site's time zone by the same rule a tap's
//! decision uses ([`crate::schedule`]). The next change is found without
//! polling: every window start and end, holiday window start and end and
//! local midnight (when a holiday begins or ends) of the coming week is a
//! candidate, and the first candidate at which the answer differs is the
//! boundary. A caller arms one timer for it.

use jiff::civil::{Date, DateTime};
use jiff::{Span, Timestamp};

use crate::model::{DoorId, DoorMode};
use crate::schedule::{self, Check};
use crate::snapshot::AccessSnapshot;

/// How far ahead boundaries are searched; with no change within it, the
/// answer is re-evaluated at its end.
const HORIZON_DAYS: i64 = 8;

/// A door's unlock schedule at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnlockWindow {
    /// Inside one of the schedule's windows.
    pub open: bool,
    /// When `open` next changes (or, with no change within a week, when to
    /// look again). Always after the instant asked about.
    pub next_change: Timestamp,
    /// When the current window began (`open` only, within the search
    /// range): taps granted since then count for first-card unlock.
    pub opened_at: Option<Timestamp>,
}

impl AccessSnapshot {
    /// The unlock schedule of `door` at `now`, or `None` when the door has
    /// none (or is unknown).
    pub fn unlock_window(&self, door: DoorId, now: Timestamp) -> Option<UnlockWindow> {
        let entry = &self.doors[self.door_index(door)? as usize];
        let schedule = self.schedule(entry.door.unlock_schedule?)?;
        let site = &self.sites[entry.site as usize];
        let site_id = site.site.id;
        let open_at = |t: Timestamp| {
            schedule::check(
                &schedule.windows,
                &schedule.holiday_windows,
                site.tz.to_datetime(t),
                |d| self.holiday_on(site_id, d),
            ) == Check::Open
        };
        let open = open_at(now);
        let today = site.tz.to_datetime(now).date();
        let mut local: Vec<DateTime> = Vec::new();
        for k in -2..=HORIZON_DAYS {
            let Ok(day) = today.checked_add(Span::new().days(k)) else {
                continue;
            };
            let mut offsets = vec![0u32];
            for w in &schedule.windows {
                if w.days.contains(day.weekday()) {
                    offsets.push(w.range.start_secs());
                    offsets.push(end_offset(w.range));
                }
            }
            for r in &schedule.holiday_windows {
                offsets.push(r.start_secs());
                offsets.push(end_offset(*r));
            }
            local.extend(offsets.into_iter().filter_map(|o| at_offset(day, o)));
        }
        let mut candidates: Vec<Timestamp> = local
            .into_iter()
            .filter_map(|dt| site.tz.to_timestamp(dt).ok())
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        let horizon = candidates.last().copied().filter(|&t| t > now);
        let next_change = candidates
            .iter()
            .copied()
            .filter(|&t| t > now)
            .find(|&t| open_at(t) != open)
            .or(horizon)
            .unwrap_or(now + Span::new().hours(24));
        let opened_at = if open {
            candidates
                .iter()
                .rev()
                .copied()
                .filter(|&t| t <= now)
                .take_while(|&t| open_at(t))
                .last()
        } else {
            None
        };
        Some(UnlockWindow {
            open,
            next_change,
            opened_at,
        })
    }

    /// The mode `door` is driven in at `now`: `locked` while its site is
    /// locked down; its stored mode when that is not `normal`; `unlocked`
    /// inside a window of its unlock schedule (with first-card unlock, only
    /// once `first_card_seen` says a tap was granted in this window);
    /// otherwise `normal`.
    pub fn effective_mode(
        &self,
        door: DoorId,
        now: Timestamp,
        first_card_seen: bool,
    ) -> Option<DoorMode> {
        let entry = &self.doors[self.door_index(door)? as usize];
        if self.sites[entry.site as usize].site.lockdown {
            return Some(DoorMode::Locked);
        }
        if entry.door.mode != DoorMode::Normal {
            return Some(entry.door.mode);
        }
        let unlocked = self
            .unlock_window(door, now)
            .is_some_and(|w| w.open && (!entry.door.first_card_unlock || first_card_seen));
        Some(if unlocked {
            DoorMode::Unlocked
        } else {
            DoorMode::Normal
        })
    }
}

/// A range's end as an offset from the midnight that starts its day (past a
/// day when it crosses midnight).
fn end_offset(r: schedule::TimeRange) -> u32 {
    if r.crosses_midnight() {
        r.end_secs() + 86_400
    } else {
        r.end_secs()
    }
}

/// `offset` seconds after the midnight starting `day`, in local civil time.
fn at_offset(day: Date, offset: u32) -> Option<DateTime> {
    day.at(0, 0, 0, 0)
        .checked_add(Span::new().seconds(i64::from(offset)))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::*;
    use crate::snapshot::Entities;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// A site in `tz` with door 1 unlocked by "mon-fri 08:00-18:00" (and
    /// `first_card`), door 2 without a schedule.
    fn snapshot(
        tz: &str,
        first_card: bool,
        lockdown: bool,
        holiday: Option<&str>,
    ) -> AccessSnapshot {
        let door = |id: i64, schedule: Option<ScheduleId>| Door {
            id: DoorId(id),
            site: SiteId(1),
            name: format!("door {id}"),
            mechanism: Mechanism::PkiCak,
            allow_low_assurance: false,
            passback: Passback::None,
            mode: DoorMode::Normal,
            unlock_schedule: schedule,
            first_card_unlock: first_card,
            max_staleness_s: None,
            stale_policy: Default::default(),
        };
        AccessSnapshot::build(Entities {
            sites: vec![Site {
                id: SiteId(1),
                name: "HQ".into(),
                time_zone: tz.into(),
                lockdown,
            }],
            doors: vec![door(1, Some(ScheduleId(1))), door(2, None)],
            schedules: vec![Schedule {
                id: ScheduleId(1),
                name: "lobby hours".into(),
                windows: vec!["mon-fri 08:00-18:00".parse().unwrap()],
                holiday_windows: vec![],
            }],
            holidays: holiday
                .map(|d| Holiday {
                    id: HolidayId(1),
                    site: None,
                    date: d.parse().unwrap(),
                    name: "closed".into(),
                })
                .into_iter()
                .collect(),
            ..Entities::default()
        })
        .unwrap()
    }

    #[test]
    fn window_boundaries_in_the_site_time_zone() {
        let s = snapshot("America/New_York", false, false, None);
        // Monday 2026-11-23, 07:59 in New York is 12:59 UTC (EST, UTC-5).
        let before = ts("2026-11-23T12:59:00Z");
        let w = s.unlock_window(DoorId(1), before).unwrap();
        assert!(!w.open);
        assert_eq!(w.next_change, ts("2026-11-23T13:00:00Z"));
        assert_eq!(
            s.effective_mode(DoorId(1), before, false),
            Some(DoorMode::Normal)
        );
        // Crossing the boundary: open from 08:00 local until 18:00 local.
        let w = s.unlock_window(DoorId(1), w.next_change).unwrap();
        assert!(w.open);
        assert_eq!(w.opened_at, Some(ts("2026-11-23T13:00:00Z")));
        assert_eq!(w.next_change, ts("2026-11-23T23:00:00Z"));
        assert_eq!(
            s.effective_mode(DoorId(1), ts("2026-11-23T13:00:00Z"), false),
            Some(DoorMode::Unlocked)
        );
        // Friday evening: the next opening is Monday morning.
        let w = s
            .unlock_window(DoorId(1), ts("2026-11-27T23:00:00Z"))
            .unwrap();
        assert!(!w.open);
        assert_eq!(w.next_change, ts("2026-11-30T13:00:00Z"));
        // A door without a schedule has no window and stays normal.
        assert_eq!(s.unlock_window(DoorId(2), before), None);
        assert_eq!(
            s.effective_mode(DoorId(2), ts("2026-11-23T15:00:00Z"), true),
            Some(DoorMode::Normal)
        );
    }

    #[test]
    fn daylight_saving_moves_the_utc_boundary() {
        // Paris: 08:00 local is 07:00 UTC in winter, 06:00 UTC in summer.
        let s = snapshot("Europe/Paris", false, false, None);
        let w = s
            .unlock_window(DoorId(1), ts("2026-03-27T20:00:00Z"))
            .unwrap();
        // Friday evening before the change (Sunday 29 March): Monday 30
        // March opens at 08:00 CEST.
        assert_eq!(w.next_change, ts("2026-03-30T06:00:00Z"));
        let w = s
            .unlock_window(DoorId(1), ts("2026-03-26T20:00:00Z"))
            .unwrap();
        assert_eq!(w.next_change, ts("2026-03-27T07:00:00Z"));
    }

    #[test]
    fn a_holiday_keeps_the_door_normal() {
        let s = snapshot("UTC", false, false, Some("2026-11-23"));
        let w = s
            .unlock_window(DoorId(1), ts("2026-11-23T07:00:00Z"))
            .unwrap();
        assert!(!w.open);
        // Not Monday's 08:00 (a holiday) but Tuesday's.
        assert_eq!(w.next_change, ts("2026-11-24T08:00:00Z"));
    }

    #[test]
    fn first_card_unlock_waits_for_a_grant() {
        let s = snapshot("UTC", true, false, None);
        let inside = ts("2026-11-23T09:00:00Z");
        assert_eq!(
            s.effective_mode(DoorId(1), inside, false),
            Some(DoorMode::Normal)
        );
        assert_eq!(
            s.effective_mode(DoorId(1), inside, true),
            Some(DoorMode::Unlocked)
        );
        // Outside the window a tap seen earlier no longer counts.
        assert_eq!(
            s.effective_mode(DoorId(1), ts("2026-11-23T18:00:00Z"), true),
            Some(DoorMode::Normal)
        );
    }

    #[test]
    fn lockdown_overrides_the_schedule() {
        let s = snapshot("UTC", false, true, None);
        for door in [DoorId(1), DoorId(2)] {
            assert_eq!(
                s.effective_mode(door, ts("2026-11-23T09:00:00Z"), true),
                Some(DoorMode::Locked)
            );
        }
    }
}
