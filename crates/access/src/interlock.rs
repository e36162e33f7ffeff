//! Interlock groups (mantraps), the pure rule.
//!
//! The doors of an interlock group open one at a time: a door of the group
//! is not released while another door of the group is open (its position
//! switch says so) or released (a grant, an unlock or a request-to-exit
//! pulsed its lock, or its mode holds it unlocked). A door whose position
//! is unknown (no position switch, or no report yet) counts as closed only
//! while it is not released. [`check`] is the whole rule: the caller says
//! what it knows of each door ([`DoorState`]) and gets the door that
//! blocks the release, as the [`Refusal::Interlock`] a tap is refused
//! with.

use serde::{Deserialize, Serialize};

use crate::decide::Refusal;
use crate::model::DoorId;

/// A named group of doors of which only one may be open or released at a
/// time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterlockGroup {
    pub name: String,
    pub doors: Vec<DoorId>,
}

/// What the controller knows of one door at the moment another door of
/// its group would release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DoorState {
    /// From the position switch: `Some(true)` open, `Some(false)` closed,
    /// `None` not known (no switch wired, or no report yet).
    pub open: Option<bool>,
    /// The lock is released now (a pulse not yet over).
    pub released: bool,
    /// The door's mode holds its lock released.
    pub held_unlocked: bool,
}

/// Why another door of the group blocks a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Blocking {
    /// Its position switch reads open.
    Open,
    /// Its lock is released (a grant, an unlock or an exit request).
    Released,
    /// Its mode holds it unlocked.
    Unlocked,
}

impl Blocking {
    pub fn as_str(self) -> &'static str {
        match self {
            Blocking::Open => "open",
            Blocking::Released => "released",
            Blocking::Unlocked => "held unlocked",
        }
    }
}

impl DoorState {
    /// Whether this door, as another door of the group, blocks a release;
    /// an open door is reported as open before anything else.
    pub fn blocking(self) -> Option<Blocking> {
        if self.open == Some(true) {
            Some(Blocking::Open)
        } else if self.held_unlocked {
            Some(Blocking::Unlocked)
        } else if self.released {
            Some(Blocking::Released)
        } else {
            None
        }
    }
}

/// Whether `door` may release now: `Err` names the first other door (in
/// group order, then door order) that is open or released. `state` tells
/// what is known of a door; `name` names it for the sentence. A door in no
/// group is never blocked; a door listed in its own group is not compared
/// with itself.
pub fn check(
    groups: &[InterlockGroup],
    door: DoorId,
    mut state: impl FnMut(DoorId) -> DoorState,
    mut name: impl FnMut(DoorId) -> String,
) -> Result<(), Refusal> {
    for g in groups.iter().filter(|g| g.doors.contains(&door)) {
        for &other in g.doors.iter().filter(|&&d| d != door) {
            if let Some(blocking) = state(other).blocking() {
                return Err(Refusal::Interlock {
                    group: g.name.clone(),
                    door: name(other),
                    blocking,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const OUTER: DoorId = DoorId(1);
    const INNER: DoorId = DoorId(2);
    const LOBBY: DoorId = DoorId(3);

    fn groups() -> Vec<InterlockGroup> {
        vec![InterlockGroup {
            name: "vestibule".into(),
            doors: vec![OUTER, INNER],
        }]
    }

    fn run(door: DoorId, states: &[(DoorId, DoorState)]) -> Result<(), Refusal> {
        let states: HashMap<DoorId, DoorState> = states.iter().copied().collect();
        check(
            &groups(),
            door,
            |d| states.get(&d).copied().unwrap_or_default(),
            |d| match d {
                OUTER => "vestibule-outer".into(),
                INNER => "vestibule-inner".into(),
                d => format!("door {d}"),
            },
        )
    }

    const OPEN: DoorState = DoorState {
        open: Some(true),
        released: false,
        held_unlocked: false,
    };
    const CLOSED: DoorState = DoorState {
        open: Some(false),
        released: false,
        held_unlocked: false,
    };

    #[test]
    fn an_open_door_of_the_group_blocks_the_other_and_is_named() {
        let r = run(OUTER, &[(INNER, OPEN)]).unwrap_err();
        assert_eq!(r.code(), "interlock");
        assert_eq!(
            r.to_string(),
            "interlock: door `vestibule-inner` is open (interlock group `vestibule`)"
        );
        // Both ways round.
        let r = run(INNER, &[(OUTER, OPEN)]).unwrap_err();
        assert!(r.to_string().contains("`vestibule-outer` is open"), "{r}");
    }

    #[test]
    fn closed_and_locked_doors_let_the_door_release() {
        assert_eq!(run(OUTER, &[(INNER, CLOSED)]), Ok(()));
        // The door's own state does not matter: it is the one releasing.
        assert_eq!(run(OUTER, &[(OUTER, OPEN), (INNER, CLOSED)]), Ok(()));
    }

    #[test]
    fn a_released_or_unlocked_door_blocks_even_while_closed() {
        let released = DoorState {
            released: true,
            ..CLOSED
        };
        let r = run(OUTER, &[(INNER, released)]).unwrap_err();
        assert_eq!(
            r,
            Refusal::Interlock {
                group: "vestibule".into(),
                door: "vestibule-inner".into(),
                blocking: Blocking::Released
            }
        );
        assert!(r.to_string().contains("is released"), "{r}");
        let held = DoorState {
            held_unlocked: true,
            ..CLOSED
        };
        let r = run(OUTER, &[(INNER, held)]).unwrap_err();
        assert!(r.to_string().contains("is held unlocked"), "{r}");
        // Open and released: reported as open.
        let both = DoorState {
            released: true,
            ..OPEN
        };
        assert!(matches!(
            run(OUTER, &[(INNER, both)]),
            Err(Refusal::Interlock {
                blocking: Blocking::Open,
                ..
            })
        ));
    }

    #[test]
    fn an_unknown_position_counts_as_closed_only_while_not_released() {
        let unknown = DoorState::default();
        assert_eq!(run(OUTER, &[(INNER, unknown)]), Ok(()));
        let released = DoorState {
            released: true,
            ..unknown
        };
        assert!(run(OUTER, &[(INNER, released)]).is_err());
    }

    #[test]
    fn doors_outside_the_group_are_neither_blocked_nor_blocking() {
        assert_eq!(run(LOBBY, &[(INNER, OPEN), (OUTER, OPEN)]), Ok(()));
        assert_eq!(run(OUTER, &[(LOBBY, OPEN)]), Ok(()));
    }

    #[test]
    fn a_door_in_two_groups_answers_to_both() {
        let mut gs = groups();
        gs.push(InterlockGroup {
            name: "airlock".into(),
            doors: vec![INNER, LOBBY],
        });
        let states: HashMap<DoorId, DoorState> = [(LOBBY, OPEN)].into_iter().collect();
        let r = check(
            &gs,
            INNER,
            |d| states.get(&d).copied().unwrap_or_default(),
            |d| format!("door {d}"),
        )
        .unwrap_err();
        assert!(
            r.to_string()
                .contains("door 3` is open (interlock group `airlock`)"),
            "{r}"
        );
        // The outer door shares no group with the lobby.
        let r = check(
            &gs,
            OUTER,
            |d| states.get(&d).copied().unwrap_or_default(),
            |d| format!("door {d}"),
        );
        assert_eq!(r, Ok(()));
    }
}
