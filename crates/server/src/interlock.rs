//! Interlock groups (mantraps) at run time: `[[interlocks]]` doors open
//! one at a time.
//!
//! The rule itself is [`access::interlock::check`]. [`Interlocks`] holds
//! what it reads: the doors' positions (the [`DoorWatch`], for doors whose
//! position switch is wired), when each door's lock was last released and
//! until when (told by the controller for grants and unlocks, and by the
//! OSDP output for request-to-exit releases and early relocks), and which
//! doors their mode holds unlocked. [`Interlocks::claim`] checks the rule
//! and records the release in one step under one lock, so two doors of a
//! group tapped at the same instant cannot both release; a release that
//! then does not happen (its event not committed, the output failing) is
//! given back with [`Interlocks::withdraw`].
//!
//! Where it is checked: a granted tap, at the moment of opening (after the
//! decision, under the controller's opening lock, before the event is
//! committed), is refused with code `interlock` and a sentence naming the
//! door that blocks it; a request-to-exit that would release the lock is
//! not carried out and recorded as a `door` event with code `interlock`.
//! An operator's momentary unlock through the API is an explicit command:
//! it is recorded as a release (it blocks the other doors) but not refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use access::interlock::{check, Blocking, DoorState, InterlockGroup};
use access::{AccessSnapshot, DoorId, Refusal};

use crate::config::InterlockConfig;
use crate::doorwatch::DoorWatch;

/// What is known of one door's lock.
#[derive(Debug, Clone, Copy, Default)]
struct Lock {
    /// Released until then (a pulse).
    released_until: Option<Instant>,
    /// Its mode holds it unlocked.
    unlocked: bool,
}

/// A release recorded by [`Interlocks::claim`], to give back if it does
/// not happen.
#[derive(Debug)]
#[must_use = "a claim not carried out is withdrawn"]
pub struct Claim {
    door: DoorId,
    previous: Option<Instant>,
    until: Instant,
}

/// The interlock groups and the state of their doors' locks.
pub struct Interlocks {
    groups: Vec<InterlockConfig>,
    watch: Option<Arc<DoorWatch>>,
    locks: Mutex<HashMap<DoorId, Lock>>,
    /// The groups resolved in the last snapshot a release was checked
    /// against (names are looked up once per snapshot, not per tap).
    resolved: Mutex<Option<Resolved>>,
}

/// Groups resolved in a snapshot, and which one.
type Resolved = (Weak<AccessSnapshot>, Arc<[InterlockGroup]>);

impl std::fmt::Debug for Interlocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interlocks")
            .field("groups", &self.groups)
            .finish_non_exhaustive()
    }
}

impl Interlocks {
    /// `None` without groups. `watch` gives the positions of doors with a
    /// position switch.
    pub fn new(groups: &[InterlockConfig], watch: Option<Arc<DoorWatch>>) -> Option<Arc<Self>> {
        (!groups.is_empty()).then(|| {
            Arc::new(Interlocks {
                groups: groups.to_vec(),
                watch,
                locks: Mutex::new(HashMap::new()),
                resolved: Mutex::new(None),
            })
        })
    }

    fn locks(&self) -> std::sync::MutexGuard<'_, HashMap<DoorId, Lock>> {
        self.locks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The groups with their doors resolved in `snapshot` (a name that
    /// names no door is left out).
    pub fn groups(&self, snapshot: &AccessSnapshot) -> Vec<InterlockGroup> {
        self.groups
            .iter()
            .map(|g| InterlockGroup {
                name: g.name.clone(),
                doors: g
                    .doors
                    .iter()
                    .filter_map(|n| snapshot.doors().find(|d| d.name == *n).map(|d| d.id))
                    .collect(),
            })
            .collect()
    }

    /// [`groups`](Self::groups) in `snapshot`, resolved once per snapshot.
    fn resolved(&self, snapshot: &Arc<AccessSnapshot>) -> Arc<[InterlockGroup]> {
        let mut r = self.resolved.lock().unwrap_or_else(|p| p.into_inner());
        match &*r {
            Some((s, g)) if Weak::ptr_eq(s, &Arc::downgrade(snapshot)) => g.clone(),
            _ => {
                let g: Arc<[InterlockGroup]> = self.groups(snapshot).into();
                *r = Some((Arc::downgrade(snapshot), g.clone()));
                g
            }
        }
    }

    /// Each group `door` is in (in configuration order), with the first
    /// other door of the group that keeps it from releasing at `now` and
    /// why (`None`: it may release). The same rule as [`claim`](Self::claim),
    /// without recording anything.
    pub fn blocked(
        &self,
        snapshot: &Arc<AccessSnapshot>,
        door: DoorId,
        now: Instant,
    ) -> Vec<(String, Option<(DoorId, Blocking)>)> {
        let groups = self.resolved(snapshot);
        let locks = self.locks();
        groups
            .iter()
            .filter(|g| g.doors.contains(&door))
            .map(|g| {
                let by = g
                    .doors
                    .iter()
                    .filter(|&&d| d != door)
                    .find_map(|&d| self.state(&locks, d, now).blocking().map(|b| (d, b)));
                (g.name.clone(), by)
            })
            .collect()
    }

    /// `(group, door name)` of every door name that names no door of
    /// `snapshot` (reported at start-up).
    pub fn unknown_doors(&self, snapshot: &AccessSnapshot) -> Vec<(String, String)> {
        self.groups
            .iter()
            .flat_map(|g| {
                g.doors
                    .iter()
                    .filter(|n| !snapshot.doors().any(|d| d.name == **n))
                    .map(|n| (g.name.clone(), n.clone()))
            })
            .collect()
    }

    /// What is known of `door` at `now`.
    fn state(&self, locks: &HashMap<DoorId, Lock>, door: DoorId, now: Instant) -> DoorState {
        let lock = locks.get(&door).copied().unwrap_or_default();
        DoorState {
            open: self
                .watch
                .as_ref()
                .and_then(|w| w.position(door))
                .and_then(|p| p.open),
            released: lock.released_until.is_some_and(|t| now < t),
            held_unlocked: lock.unlocked,
        }
    }

    /// Whether `door` may release its lock for `hold` from `now`: if so
    /// the release is recorded at once (`None` for a door in no group,
    /// which records nothing) and the caller withdraws the claim if the
    /// lock is not released after all.
    pub fn claim(
        &self,
        snapshot: &Arc<AccessSnapshot>,
        door: DoorId,
        hold: Duration,
        now: Instant,
    ) -> Result<Option<Claim>, Refusal> {
        let groups = self.resolved(snapshot);
        if !groups.iter().any(|g| g.doors.contains(&door)) {
            return Ok(None);
        }
        let mut locks = self.locks();
        check(
            &groups,
            door,
            |d| self.state(&locks, d, now),
            |d| {
                snapshot
                    .door(d)
                    .map_or_else(|| d.to_string(), |d| d.name.clone())
            },
        )?;
        let until = now + hold;
        let lock = locks.entry(door).or_default();
        let previous = lock.released_until;
        lock.released_until = Some(previous.map_or(until, |p| p.max(until)));
        Ok(Some(Claim {
            door,
            previous,
            until,
        }))
    }

    /// Gives back a claim whose release did not happen (unless a later
    /// release of the door has been recorded since).
    pub fn withdraw(&self, claim: Claim) {
        let mut locks = self.locks();
        if let Some(l) = locks.get_mut(&claim.door) {
            if l.released_until.is_some_and(|t| t <= claim.until) {
                l.released_until = claim.previous;
            }
        }
    }

    /// `door`'s lock was released for `hold` from `now` (an operator's
    /// unlock, or a reader's longer pulse), without the rule.
    pub fn released(&self, door: DoorId, hold: Duration, now: Instant) {
        let until = now + hold;
        let mut locks = self.locks();
        let l = locks.entry(door).or_default();
        l.released_until = Some(l.released_until.map_or(until, |p| p.max(until)));
    }

    /// `door` closed after a release and its lock was relocked before the
    /// end of the pulse.
    pub fn relocked(&self, door: DoorId) {
        if let Some(l) = self.locks().get_mut(&door) {
            l.released_until = None;
        }
    }

    /// `door`'s mode holds it unlocked, or no longer.
    pub fn set_unlocked(&self, door: DoorId, unlocked: bool) {
        self.locks().entry(door).or_default().unlocked = unlocked;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use access::{Door, Entities, Site, SiteId};

    fn snapshot() -> Arc<AccessSnapshot> {
        snapshot_with("inner")
    }

    /// Doors 1 "outer", 2 `inner`, 3 "lobby".
    fn snapshot_with(inner: &str) -> Arc<AccessSnapshot> {
        let door = |id: i64, name: &str| Door {
            id: DoorId(id),
            site: SiteId(1),
            name: name.into(),
            mechanism: access::Mechanism::PkiCak,
            allow_low_assurance: false,
            passback: Default::default(),
            mode: Default::default(),
            unlock_schedule: None,
            first_card_unlock: false,
            max_staleness_s: None,
            stale_policy: Default::default(),
        };
        Arc::new(
            AccessSnapshot::build(Entities {
                sites: vec![Site {
                    id: SiteId(1),
                    name: "HQ".into(),
                    time_zone: "UTC".into(),
                    lockdown: false,
                }],
                doors: vec![door(1, "outer"), door(2, inner), door(3, "lobby")],
                ..Entities::default()
            })
            .unwrap(),
        )
    }

    fn interlocks() -> Arc<Interlocks> {
        Interlocks::new(
            &[InterlockConfig {
                name: "vestibule".into(),
                doors: vec!["outer".into(), "inner".into(), "gone".into()],
            }],
            None,
        )
        .unwrap()
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_claim_blocks_the_other_door_until_its_pulse_ends() {
        let (s, i, t) = (snapshot(), interlocks(), Instant::now());
        let _claim = i.claim(&s, DoorId(1), SECOND, t).unwrap().unwrap();
        let r = i.claim(&s, DoorId(2), SECOND, t).unwrap_err();
        assert_eq!(r.code(), "interlock");
        assert!(r.to_string().contains("door `outer` is released"), "{r}");
        // The same door again is not blocked by itself.
        assert!(i.claim(&s, DoorId(1), SECOND, t).is_ok());
        // Once the pulse is over, the other door may release.
        assert!(i
            .claim(&s, DoorId(2), SECOND, t + SECOND)
            .unwrap()
            .is_some());
        // A door in no group records nothing and is never blocked.
        assert!(i.claim(&s, DoorId(3), SECOND, t).unwrap().is_none());
    }

    #[test]
    fn blocked_names_the_group_and_the_door_that_blocks() {
        let (s, i, t) = (snapshot(), interlocks(), Instant::now());
        assert_eq!(i.blocked(&s, DoorId(2), t), [("vestibule".into(), None)]);
        let _claim = i.claim(&s, DoorId(1), SECOND, t).unwrap().unwrap();
        assert_eq!(
            i.blocked(&s, DoorId(2), t),
            [("vestibule".into(), Some((DoorId(1), Blocking::Released)))]
        );
        // The released door itself is not blocked; a door in no group has
        // no group.
        assert_eq!(i.blocked(&s, DoorId(1), t), [("vestibule".into(), None)]);
        assert!(i.blocked(&s, DoorId(3), t).is_empty());
        i.set_unlocked(DoorId(1), true);
        assert_eq!(
            i.blocked(&s, DoorId(2), t + SECOND),
            [("vestibule".into(), Some((DoorId(1), Blocking::Unlocked)))]
        );
    }

    #[test]
    fn a_withdrawn_claim_and_an_early_relock_free_the_group() {
        let (s, i, t) = (snapshot(), interlocks(), Instant::now());
        let claim = i.claim(&s, DoorId(1), SECOND, t).unwrap().unwrap();
        i.withdraw(claim);
        assert!(i.claim(&s, DoorId(2), SECOND, t).unwrap().is_some());
        i.relocked(DoorId(2));
        assert!(i.claim(&s, DoorId(1), SECOND, t).unwrap().is_some());
    }

    #[test]
    fn an_unlocked_mode_or_an_operator_release_blocks() {
        let (s, i, t) = (snapshot(), interlocks(), Instant::now());
        i.set_unlocked(DoorId(2), true);
        let r = i.claim(&s, DoorId(1), SECOND, t).unwrap_err();
        assert!(r.to_string().contains("`inner` is held unlocked"), "{r}");
        i.set_unlocked(DoorId(2), false);
        i.released(DoorId(2), SECOND, t);
        assert!(i.claim(&s, DoorId(1), SECOND, t).is_err());
        assert!(i.claim(&s, DoorId(1), SECOND, t + SECOND).is_ok());
    }

    #[test]
    fn a_new_snapshot_resolves_the_names_again() {
        let (s, i, t) = (snapshot(), interlocks(), Instant::now());
        i.released(DoorId(2), SECOND, t);
        assert!(i.claim(&s, DoorId(1), SECOND, t).is_err());
        // Door 2 renamed: no longer in the group.
        let renamed = snapshot_with("storeroom");
        assert!(i.claim(&renamed, DoorId(1), SECOND, t).unwrap().is_some());
        assert!(i.claim(&renamed, DoorId(2), SECOND, t).unwrap().is_none());
    }

    #[test]
    fn door_names_are_resolved_and_unknown_ones_reported() {
        let (s, i) = (snapshot(), interlocks());
        assert_eq!(i.groups(&s)[0].doors, [DoorId(1), DoorId(2)]);
        assert_eq!(
            i.unknown_doors(&s),
            [("vestibule".to_string(), "gone".to_string())]
        );
        assert!(Interlocks::new(&[], None).is_none());
    }
}
