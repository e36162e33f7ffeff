//! Which part of the access data a site holds, and how two versions of a
//! part differ: what a central sends down to a site.
//!
//! [`site_part`] is the rule: the site itself; its doors and their readers;
//! the access groups reaching one of its doors (their door lists cut to the
//! site's doors); the cardholders of those groups and their credentials;
//! the schedules those groups and doors name; the holidays of the site and
//! those of every site. Nothing else: a cardholder with access only
//! elsewhere is not in it. The part is closed (every reference inside it
//! resolves inside it), so it builds a snapshot by itself.
//!
//! [`Delta::between`] says what turns one part into the next (entities to
//! store whole, entities to remove); [`Delta::revocations`] is the subset
//! that only takes access away (suspensions, revocations, removed
//! credentials and cardholders), which a site applies before anything else
//! pending.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::*;
use crate::snapshot::Entities;

/// The part of `all` that site `site` holds (empty when there is no such
/// site). Entities keep the order they have in `all`.
pub fn site_part(all: &Entities, site: SiteId) -> Entities {
    let Some(s) = all.sites.iter().find(|s| s.id == site) else {
        return Entities::default();
    };
    let doors: Vec<Door> = all
        .doors
        .iter()
        .filter(|d| d.site == site)
        .cloned()
        .collect();
    let door_ids: BTreeSet<DoorId> = doors.iter().map(|d| d.id).collect();
    let readers = all
        .readers
        .iter()
        .filter(|r| door_ids.contains(&r.door))
        .cloned()
        .collect();
    let groups: Vec<AccessGroup> = all
        .groups
        .iter()
        .filter(|g| g.doors.iter().any(|d| door_ids.contains(d)))
        .map(|g| AccessGroup {
            doors: g
                .doors
                .iter()
                .copied()
                .filter(|d| door_ids.contains(d))
                .collect(),
            ..g.clone()
        })
        .collect();
    let holders: BTreeSet<CardholderId> = groups
        .iter()
        .flat_map(|g| g.cardholders.iter().copied())
        .collect();
    let schedules: BTreeSet<ScheduleId> = groups
        .iter()
        .map(|g| g.schedule)
        .chain(doors.iter().filter_map(|d| d.unlock_schedule))
        .collect();
    Entities {
        sites: vec![s.clone()],
        doors,
        readers,
        cardholders: all
            .cardholders
            .iter()
            .filter(|c| holders.contains(&c.id))
            .cloned()
            .collect(),
        credentials: all
            .credentials
            .iter()
            .filter(|c| holders.contains(&c.cardholder))
            .cloned()
            .collect(),
        groups,
        schedules: all
            .schedules
            .iter()
            .filter(|x| schedules.contains(&x.id))
            .cloned()
            .collect(),
        holidays: all
            .holidays
            .iter()
            .filter(|h| h.site.is_none_or(|x| x == site))
            .cloned()
            .collect(),
    }
}

/// Ids of entities to remove, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removals {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<SiteId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub doors: Vec<DoorId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readers: Vec<ReaderId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cardholders: Vec<CardholderId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<CredentialId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<ScheduleId>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holidays: Vec<HolidayId>,
}

impl Removals {
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty()
            && self.doors.is_empty()
            && self.readers.is_empty()
            && self.cardholders.is_empty()
            && self.credentials.is_empty()
            && self.groups.is_empty()
            && self.schedules.is_empty()
            && self.holidays.is_empty()
    }
}

/// What turns one part into another: entities stored whole (new or
/// changed), then entities removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delta {
    #[serde(default)]
    pub put: Entities,
    #[serde(default)]
    pub remove: Removals,
}

/// Entities of one kind in `next` that are new or differ from `prev`, and
/// the ids of `prev` absent from `next`.
fn kind_delta<T: Clone + PartialEq, I: Ord + Copy>(
    prev: &[T],
    next: &[T],
    id: impl Fn(&T) -> I,
) -> (Vec<T>, Vec<I>) {
    let before: BTreeMap<I, &T> = prev.iter().map(|x| (id(x), x)).collect();
    let after: BTreeSet<I> = next.iter().map(&id).collect();
    let put = next
        .iter()
        .filter(|x| before.get(&id(x)).is_none_or(|b| *b != *x))
        .cloned()
        .collect();
    let gone = before
        .keys()
        .copied()
        .filter(|i| !after.contains(i))
        .collect();
    (put, gone)
}

fn is_active_cardholder(c: &Cardholder) -> bool {
    matches!(c.status, CardholderStatus::Active)
}

fn is_active_credential(c: &Credential) -> bool {
    matches!(c.state, CredentialState::Active)
}

impl Delta {
    /// What turns `prev` into `next`.
    pub fn between(prev: &Entities, next: &Entities) -> Delta {
        let mut d = Delta::default();
        (d.put.sites, d.remove.sites) = kind_delta(&prev.sites, &next.sites, |x| x.id);
        (d.put.doors, d.remove.doors) = kind_delta(&prev.doors, &next.doors, |x| x.id);
        (d.put.readers, d.remove.readers) = kind_delta(&prev.readers, &next.readers, |x| x.id);
        (d.put.cardholders, d.remove.cardholders) =
            kind_delta(&prev.cardholders, &next.cardholders, |x| x.id);
        (d.put.credentials, d.remove.credentials) =
            kind_delta(&prev.credentials, &next.credentials, |x| x.id);
        (d.put.groups, d.remove.groups) = kind_delta(&prev.groups, &next.groups, |x| x.id);
        (d.put.schedules, d.remove.schedules) =
            kind_delta(&prev.schedules, &next.schedules, |x| x.id);
        (d.put.holidays, d.remove.holidays) = kind_delta(&prev.holidays, &next.holidays, |x| x.id);
        d
    }

    pub fn is_empty(&self) -> bool {
        self.put == Entities::default() && self.remove.is_empty()
    }

    /// The part of the delta that only takes access away: cardholders and
    /// credentials stored with a status other than active, and cardholders
    /// and credentials removed. Applied on its own (to the entities a site
    /// already holds), it never grants anything.
    pub fn revocations(&self) -> Delta {
        Delta {
            put: Entities {
                cardholders: self
                    .put
                    .cardholders
                    .iter()
                    .filter(|c| !is_active_cardholder(c))
                    .cloned()
                    .collect(),
                credentials: self
                    .put
                    .credentials
                    .iter()
                    .filter(|c| !is_active_credential(c))
                    .cloned()
                    .collect(),
                ..Entities::default()
            },
            remove: Removals {
                cardholders: self.remove.cardholders.clone(),
                credentials: self.remove.credentials.clone(),
                ..Removals::default()
            },
        }
    }

    /// `self` then `later`, as one delta: what the two do in turn.
    pub fn then(self, later: Delta) -> Delta {
        fn merge<T: Clone, I: Ord + Copy>(
            put: Vec<T>,
            gone: Vec<I>,
            later_put: Vec<T>,
            later_gone: Vec<I>,
            id: impl Fn(&T) -> I,
        ) -> (Vec<T>, Vec<I>) {
            let mut puts: BTreeMap<I, T> = put.into_iter().map(|x| (id(&x), x)).collect();
            let mut gones: BTreeSet<I> = gone.into_iter().collect();
            for i in later_gone {
                puts.remove(&i);
                gones.insert(i);
            }
            for x in later_put {
                gones.remove(&id(&x));
                puts.insert(id(&x), x);
            }
            (puts.into_values().collect(), gones.into_iter().collect())
        }
        let (a, b) = (self, later);
        let mut d = Delta::default();
        (d.put.sites, d.remove.sites) = merge(
            a.put.sites,
            a.remove.sites,
            b.put.sites,
            b.remove.sites,
            |x| x.id,
        );
        (d.put.doors, d.remove.doors) = merge(
            a.put.doors,
            a.remove.doors,
            b.put.doors,
            b.remove.doors,
            |x| x.id,
        );
        (d.put.readers, d.remove.readers) = merge(
            a.put.readers,
            a.remove.readers,
            b.put.readers,
            b.remove.readers,
            |x| x.id,
        );
        (d.put.cardholders, d.remove.cardholders) = merge(
            a.put.cardholders,
            a.remove.cardholders,
            b.put.cardholders,
            b.remove.cardholders,
            |x| x.id,
        );
        (d.put.credentials, d.remove.credentials) = merge(
            a.put.credentials,
            a.remove.credentials,
            b.put.credentials,
            b.remove.credentials,
            |x| x.id,
        );
        (d.put.groups, d.remove.groups) = merge(
            a.put.groups,
            a.remove.groups,
            b.put.groups,
            b.remove.groups,
            |x| x.id,
        );
        (d.put.schedules, d.remove.schedules) = merge(
            a.put.schedules,
            a.remove.schedules,
            b.put.schedules,
            b.remove.schedules,
            |x| x.id,
        );
        (d.put.holidays, d.remove.holidays) = merge(
            a.put.holidays,
            a.remove.holidays,
            b.put.holidays,
            b.remove.holidays,
            |x| x.id,
        );
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::AccessSnapshot;
    use jiff::Timestamp;

    fn two_sites() -> Entities {
        let site = |id, name: &str| Site {
            id: SiteId(id),
            name: name.into(),
            time_zone: "UTC".into(),
            lockdown: false,
        };
        let door = |id, site, name: &str, unlock| Door {
            id: DoorId(id),
            site: SiteId(site),
            name: name.into(),
            mechanism: Mechanism::PkiCak,
            allow_low_assurance: false,
            passback: Passback::None,
            mode: DoorMode::Normal,
            unlock_schedule: unlock,
            first_card_unlock: false,
            max_staleness_s: None,
            stale_policy: Default::default(),
        };
        let holder = |id, name: &str| Cardholder {
            id: CardholderId(id),
            name: name.into(),
            status: CardholderStatus::Active,
            valid_from: None,
            valid_until: None,
        };
        let cred = |id, holder| Credential {
            id: CredentialId(id),
            cardholder: CardholderId(holder),
            card_uuid: Some(CardUuid([id as u8; 16])),
            fasc_n: None,
            cert_sha256: None,
            spki_sha256: None,
            expires_at: None,
            enrolled_at: Timestamp::UNIX_EPOCH,
            enrolled_by: "t".into(),
            state: CredentialState::Active,
        };
        let schedule = |id, name: &str| Schedule {
            id: ScheduleId(id),
            name: name.into(),
            windows: vec!["mon-sun 00:00-24:00".parse().unwrap()],
            holiday_windows: Default::default(),
        };
        Entities {
            sites: vec![site(1, "hq"), site(2, "lab")],
            doors: vec![
                door(1, 1, "front", Some(ScheduleId(3))),
                door(2, 2, "lab", None),
            ],
            readers: vec![
                Reader {
                    id: ReaderId(1),
                    door: DoorId(1),
                    name: "r1".into(),
                    connection: "a".into(),
                },
                Reader {
                    id: ReaderId(2),
                    door: DoorId(2),
                    name: "r2".into(),
                    connection: "b".into(),
                },
            ],
            cardholders: vec![holder(1, "ada"), holder(2, "bob"), holder(3, "cy")],
            credentials: vec![cred(1, 1), cred(2, 2), cred(3, 3)],
            groups: vec![
                AccessGroup {
                    id: GroupId(1),
                    name: "everywhere".into(),
                    schedule: ScheduleId(1),
                    doors: vec![DoorId(1), DoorId(2)],
                    cardholders: vec![CardholderId(1)],
                },
                AccessGroup {
                    id: GroupId(2),
                    name: "lab only".into(),
                    schedule: ScheduleId(2),
                    doors: vec![DoorId(2)],
                    cardholders: vec![CardholderId(2)],
                },
            ],
            schedules: vec![
                schedule(1, "always"),
                schedule(2, "lab"),
                schedule(3, "lobby"),
            ],
            holidays: vec![
                Holiday {
                    id: HolidayId(1),
                    site: None,
                    date: jiff::civil::date(2026, 12, 25),
                    name: "x".into(),
                },
                Holiday {
                    id: HolidayId(2),
                    site: Some(SiteId(2)),
                    date: jiff::civil::date(2026, 7, 1),
                    name: "lab day".into(),
                },
            ],
        }
    }

    fn ids<T, I: Copy>(v: &[T], id: impl Fn(&T) -> I) -> Vec<I> {
        v.iter().map(id).collect()
    }

    #[test]
    fn a_part_holds_its_doors_and_who_has_access_there_only() {
        let all = two_sites();
        let hq = site_part(&all, SiteId(1));
        assert_eq!(ids(&hq.doors, |d| d.id), vec![DoorId(1)]);
        assert_eq!(ids(&hq.readers, |r| r.id), vec![ReaderId(1)]);
        assert_eq!(ids(&hq.cardholders, |c| c.id), vec![CardholderId(1)]);
        assert_eq!(ids(&hq.credentials, |c| c.id), vec![CredentialId(1)]);
        assert_eq!(ids(&hq.groups, |g| g.id), vec![GroupId(1)]);
        // The group is cut to the site's doors.
        assert_eq!(hq.groups[0].doors, vec![DoorId(1)]);
        // The group's schedule and the door's unlock schedule, not the lab's.
        assert_eq!(
            ids(&hq.schedules, |s| s.id),
            vec![ScheduleId(1), ScheduleId(3)]
        );
        assert_eq!(ids(&hq.holidays, |h| h.id), vec![HolidayId(1)]);
        let lab = site_part(&all, SiteId(2));
        assert_eq!(
            ids(&lab.cardholders, |c| c.id),
            vec![CardholderId(1), CardholderId(2)]
        );
        assert_eq!(
            ids(&lab.holidays, |h| h.id),
            vec![HolidayId(1), HolidayId(2)]
        );
        // Cy has access nowhere: in no part.
        assert!(!lab.cardholders.iter().any(|c| c.id == CardholderId(3)));
        // Each part builds a snapshot on its own.
        AccessSnapshot::build(hq).unwrap();
        AccessSnapshot::build(lab).unwrap();
        assert_eq!(site_part(&all, SiteId(9)), Entities::default());
    }

    #[test]
    fn access_given_elsewhere_enters_the_part_and_taking_it_away_leaves_it() {
        let before = two_sites();
        let mut after = before.clone();
        // Bob is given access to hq too.
        after.groups[0].cardholders.push(CardholderId(2));
        let d = Delta::between(
            &site_part(&before, SiteId(1)),
            &site_part(&after, SiteId(1)),
        );
        assert_eq!(ids(&d.put.cardholders, |c| c.id), vec![CardholderId(2)]);
        assert_eq!(ids(&d.put.credentials, |c| c.id), vec![CredentialId(2)]);
        assert_eq!(ids(&d.put.groups, |g| g.id), vec![GroupId(1)]);
        assert!(d.remove.is_empty());
        // Bob was at the lab already: there only the group changes.
        let lab = Delta::between(
            &site_part(&before, SiteId(2)),
            &site_part(&after, SiteId(2)),
        );
        assert!(lab.put.cardholders.is_empty() && lab.put.credentials.is_empty());
        assert_eq!(ids(&lab.put.groups, |g| g.id), vec![GroupId(1)]);
        // And back: Bob leaves hq's part with his credential.
        let back = Delta::between(
            &site_part(&after, SiteId(1)),
            &site_part(&before, SiteId(1)),
        );
        assert_eq!(back.remove.cardholders, vec![CardholderId(2)]);
        assert_eq!(back.remove.credentials, vec![CredentialId(2)]);
        assert!(back.revocations().remove.credentials == vec![CredentialId(2)]);
    }

    #[test]
    fn revocations_keep_only_what_takes_access_away() {
        let before = two_sites();
        let mut after = before.clone();
        after.cardholders[0].status = CardholderStatus::Suspended {
            reason: "lost".into(),
        };
        after.credentials[1].state = CredentialState::Revoked {
            reason: "key compromise".into(),
            at: None,
        };
        after.readers[1].name = "renamed".into();
        after.credentials.retain(|c| c.id != CredentialId(3));
        let d = Delta::between(&before, &after);
        let r = d.revocations();
        assert_eq!(ids(&r.put.cardholders, |c| c.id), vec![CardholderId(1)]);
        assert_eq!(ids(&r.put.credentials, |c| c.id), vec![CredentialId(2)]);
        assert_eq!(r.remove.credentials, vec![CredentialId(3)]);
        assert!(r.put.readers.is_empty());
        assert_eq!(d.put.readers.len(), 1);
    }

    #[test]
    fn deltas_compose_in_order() {
        let a = two_sites();
        let mut b = a.clone();
        b.readers[0].name = "b".into();
        b.credentials.retain(|c| c.id != CredentialId(2));
        let mut c = b.clone();
        c.readers[0].name = "c".into();
        c.credentials.push(a.credentials[1].clone());
        let composed = Delta::between(&a, &b).then(Delta::between(&b, &c));
        // Applied to `a`, the composition gives `c`: the reader once, as
        // last stored; the credential removed then stored again is stored.
        assert_eq!(composed.put.readers[0].name, "c");
        assert_eq!(
            ids(&composed.put.credentials, |c| c.id),
            vec![CredentialId(2)]
        );
        assert!(composed.remove.credentials.is_empty());
    }
}
