//! An immutable, indexed view of every entity, built once and shared.

use std::collections::HashMap;
use std::hash::Hash;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};

use crate::model::*;

/// Everything a snapshot is built from, as the store loads it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entities {
    pub sites: Vec<Site>,
    pub doors: Vec<Door>,
    pub readers: Vec<Reader>,
    pub cardholders: Vec<Cardholder>,
    pub credentials: Vec<Credential>,
    pub groups: Vec<AccessGroup>,
    pub schedules: Vec<Schedule>,
    pub holidays: Vec<Holiday>,
}

/// Why a set of entities does not make a consistent snapshot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("two {kind}s have id {id}")]
    DuplicateId { kind: &'static str, id: i64 },
    #[error("{kind} {id}: {field} refers to {target_kind} {target}, which does not exist")]
    Dangling {
        kind: &'static str,
        id: i64,
        field: &'static str,
        target_kind: &'static str,
        target: i64,
    },
    #[error("site {site}: `{name}` is not a known IANA time zone ({reason})")]
    UnknownTimeZone {
        site: SiteId,
        name: String,
        reason: String,
    },
    #[error("credentials {first} and {second} share the {identifier} {value}; each card identifier must belong to one credential")]
    SharedIdentifier {
        identifier: &'static str,
        value: String,
        first: CredentialId,
        second: CredentialId,
    },
    #[error("door {door} (`{name}`) requires `chuid` but does not allow low assurance; set allow_low_assurance or require pki-cak")]
    ChuidNotAllowed { door: DoorId, name: String },
}

pub(crate) struct SiteEntry {
    pub site: Site,
    pub tz: TimeZone,
}

pub(crate) struct DoorEntry {
    pub door: Door,
    pub site: u32,
}

pub(crate) struct GroupEntry {
    pub group: AccessGroup,
    pub schedule: u32,
    /// `group.doors`, sorted and deduplicated for binary search.
    pub doors: Vec<DoorId>,
}

/// Every entity, indexed for the decision: credentials by card UUID, FASC-N,
/// certificate hash and key hash; cardholders to their groups; holidays by
/// date. Built in linear time; never changed afterwards (build a new one and
/// swap it in, e.g. behind an `Arc`).
pub struct AccessSnapshot {
    pub(crate) sites: Vec<SiteEntry>,
    site_ix: HashMap<SiteId, u32>,
    pub(crate) doors: Vec<DoorEntry>,
    door_ix: HashMap<DoorId, u32>,
    readers: Vec<Reader>,
    reader_ix: HashMap<ReaderId, u32>,
    pub(crate) cardholders: Vec<Cardholder>,
    cardholder_ix: HashMap<CardholderId, u32>,
    /// Per cardholder (same index): the groups they belong to.
    pub(crate) cardholder_groups: Vec<Vec<u32>>,
    pub(crate) credentials: Vec<Credential>,
    credential_ix: HashMap<CredentialId, u32>,
    /// Per credential (same index): its cardholder's index.
    pub(crate) credential_holder: Vec<u32>,
    /// Per cardholder (same index): their newest credential's index (the
    /// latest `enrolled_at`, then the highest id), if they have one.
    pub(crate) newest_credential: Vec<Option<u32>>,
    pub(crate) by_uuid: HashMap<CardUuid, u32>,
    pub(crate) by_fasc_n: HashMap<FascN, u32>,
    pub(crate) by_cert: HashMap<Sha256, u32>,
    pub(crate) by_spki: HashMap<Sha256, u32>,
    pub(crate) groups: Vec<GroupEntry>,
    pub(crate) schedules: Vec<Schedule>,
    schedule_ix: HashMap<ScheduleId, u32>,
    holidays: Vec<Holiday>,
    /// (site or every site, date) → holiday index.
    holiday_ix: HashMap<(Option<SiteId>, Date), u32>,
}

fn index<K: Hash + Eq + Copy>(
    kind: &'static str,
    ids: impl Iterator<Item = K>,
    raw: impl Fn(K) -> i64,
) -> Result<HashMap<K, u32>, BuildError> {
    let mut map = HashMap::with_capacity(ids.size_hint().0);
    for (i, id) in ids.enumerate() {
        if map.insert(id, i as u32).is_some() {
            return Err(BuildError::DuplicateId { kind, id: raw(id) });
        }
    }
    Ok(map)
}

fn resolve<K: Hash + Eq>(
    map: &HashMap<K, u32>,
    key: &K,
    dangling: impl FnOnce() -> BuildError,
) -> Result<u32, BuildError> {
    map.get(key).copied().ok_or_else(dangling)
}

fn unique<K: Hash + Eq + Copy + std::fmt::Display>(
    map: &mut HashMap<K, u32>,
    key: Option<K>,
    ix: u32,
    identifier: &'static str,
    credentials: &[Credential],
) -> Result<(), BuildError> {
    let Some(key) = key else { return Ok(()) };
    if let Some(prev) = map.insert(key, ix) {
        return Err(BuildError::SharedIdentifier {
            identifier,
            value: key.to_string(),
            first: credentials[prev as usize].id,
            second: credentials[ix as usize].id,
        });
    }
    Ok(())
}

/// Looks up an IANA time zone in the time-zone database compiled into the
/// binary (no file is read).
pub fn time_zone(name: &str) -> Result<TimeZone, String> {
    jiff::tz::db().get(name).map_err(|e| e.to_string())
}

impl AccessSnapshot {
    /// An empty snapshot: every tap is refused.
    pub fn empty() -> Self {
        AccessSnapshot::build(Entities::default()).expect("no entities cannot conflict")
    }

    /// Indexes `entities`, checking that every reference resolves and every
    /// card identifier is unique. Linear in the number of entities and
    /// memberships.
    pub fn build(e: Entities) -> Result<Self, BuildError> {
        let site_ix = index("site", e.sites.iter().map(|s| s.id), |i| i.0)?;
        let door_ix = index("door", e.doors.iter().map(|d| d.id), |i| i.0)?;
        let reader_ix = index("reader", e.readers.iter().map(|r| r.id), |i| i.0)?;
        let cardholder_ix = index("cardholder", e.cardholders.iter().map(|c| c.id), |i| i.0)?;
        let credential_ix = index("credential", e.credentials.iter().map(|c| c.id), |i| i.0)?;
        let schedule_ix = index("schedule", e.schedules.iter().map(|s| s.id), |i| i.0)?;
        index("access group", e.groups.iter().map(|g| g.id), |i| i.0)?;
        index("holiday", e.holidays.iter().map(|h| h.id), |i| i.0)?;

        let mut sites = Vec::with_capacity(e.sites.len());
        for site in e.sites {
            let tz = time_zone(&site.time_zone).map_err(|reason| BuildError::UnknownTimeZone {
                site: site.id,
                name: site.time_zone.clone(),
                reason,
            })?;
            sites.push(SiteEntry { site, tz });
        }

        let mut doors = Vec::with_capacity(e.doors.len());
        for door in e.doors {
            let site = resolve(&site_ix, &door.site, || BuildError::Dangling {
                kind: "door",
                id: door.id.0,
                field: "site",
                target_kind: "site",
                target: door.site.0,
            })?;
            if let Some(s) = door.unlock_schedule {
                resolve(&schedule_ix, &s, || BuildError::Dangling {
                    kind: "door",
                    id: door.id.0,
                    field: "unlock_schedule",
                    target_kind: "schedule",
                    target: s.0,
                })?;
            }
            if door.mechanism == Mechanism::Chuid && !door.allow_low_assurance {
                return Err(BuildError::ChuidNotAllowed {
                    door: door.id,
                    name: door.name,
                });
            }
            doors.push(DoorEntry { door, site });
        }

        for r in &e.readers {
            resolve(&door_ix, &r.door, || BuildError::Dangling {
                kind: "reader",
                id: r.id.0,
                field: "door",
                target_kind: "door",
                target: r.door.0,
            })?;
        }

        let n = e.credentials.len();
        let mut credential_holder = Vec::with_capacity(n);
        let mut by_uuid = HashMap::with_capacity(n);
        let mut by_fasc_n = HashMap::with_capacity(n);
        let mut by_cert = HashMap::with_capacity(n);
        let mut by_spki = HashMap::with_capacity(n);
        for (i, c) in e.credentials.iter().enumerate() {
            let i = i as u32;
            credential_holder.push(resolve(&cardholder_ix, &c.cardholder, || {
                BuildError::Dangling {
                    kind: "credential",
                    id: c.id.0,
                    field: "cardholder",
                    target_kind: "cardholder",
                    target: c.cardholder.0,
                }
            })?);
            unique(&mut by_uuid, c.card_uuid, i, "card UUID", &e.credentials)?;
            unique(&mut by_fasc_n, c.fasc_n, i, "FASC-N", &e.credentials)?;
            unique(
                &mut by_cert,
                c.cert_sha256,
                i,
                "certificate SHA-256",
                &e.credentials,
            )?;
            unique(
                &mut by_spki,
                c.spki_sha256,
                i,
                "public key SHA-256",
                &e.credentials,
            )?;
        }

        let mut cardholder_groups = vec![Vec::new(); e.cardholders.len()];
        let mut groups = Vec::with_capacity(e.groups.len());
        for (gi, g) in e.groups.into_iter().enumerate() {
            let schedule = resolve(&schedule_ix, &g.schedule, || BuildError::Dangling {
                kind: "access group",
                id: g.id.0,
                field: "schedule",
                target_kind: "schedule",
                target: g.schedule.0,
            })?;
            for d in &g.doors {
                resolve(&door_ix, d, || BuildError::Dangling {
                    kind: "access group",
                    id: g.id.0,
                    field: "doors",
                    target_kind: "door",
                    target: d.0,
                })?;
            }
            for c in &g.cardholders {
                let ci = resolve(&cardholder_ix, c, || BuildError::Dangling {
                    kind: "access group",
                    id: g.id.0,
                    field: "cardholders",
                    target_kind: "cardholder",
                    target: c.0,
                })?;
                let list: &mut Vec<u32> = &mut cardholder_groups[ci as usize];
                if list.last() != Some(&(gi as u32)) {
                    list.push(gi as u32);
                }
            }
            let mut door_list = g.doors.clone();
            door_list.sort_unstable();
            door_list.dedup();
            groups.push(GroupEntry {
                group: g,
                schedule,
                doors: door_list,
            });
        }

        let mut holiday_ix = HashMap::with_capacity(e.holidays.len());
        for (i, h) in e.holidays.iter().enumerate() {
            if let Some(site) = h.site {
                resolve(&site_ix, &site, || BuildError::Dangling {
                    kind: "holiday",
                    id: h.id.0,
                    field: "site",
                    target_kind: "site",
                    target: site.0,
                })?;
            }
            // Two holidays on one date for one site: the first one names it.
            holiday_ix.entry((h.site, h.date)).or_insert(i as u32);
        }

        let mut newest_credential: Vec<Option<u32>> = vec![None; e.cardholders.len()];
        for (i, c) in e.credentials.iter().enumerate() {
            let slot = &mut newest_credential[credential_holder[i] as usize];
            let newer = match *slot {
                None => true,
                Some(j) => {
                    let o = &e.credentials[j as usize];
                    (c.enrolled_at, c.id) > (o.enrolled_at, o.id)
                }
            };
            if newer {
                *slot = Some(i as u32);
            }
        }

        Ok(AccessSnapshot {
            sites,
            site_ix,
            doors,
            door_ix,
            readers: e.readers,
            reader_ix,
            cardholders: e.cardholders,
            cardholder_ix,
            cardholder_groups,
            credentials: e.credentials,
            credential_ix,
            credential_holder,
            newest_credential,
            by_uuid,
            by_fasc_n,
            by_cert,
            by_spki,
            groups,
            schedules: e.schedules,
            schedule_ix,
            holidays: e.holidays,
            holiday_ix,
        })
    }

    pub(crate) fn door_index(&self, id: DoorId) -> Option<u32> {
        self.door_ix.get(&id).copied()
    }

    pub(crate) fn holiday_on(&self, site: SiteId, date: Date) -> Option<u32> {
        if self.holiday_ix.is_empty() {
            return None;
        }
        self.holiday_ix
            .get(&(Some(site), date))
            .or_else(|| self.holiday_ix.get(&(None, date)))
            .copied()
    }

    pub(crate) fn holiday_at(&self, ix: u32) -> &Holiday {
        &self.holidays[ix as usize]
    }

    pub fn site(&self, id: SiteId) -> Option<&Site> {
        self.site_ix.get(&id).map(|&i| &self.sites[i as usize].site)
    }

    /// The resolved time zone of a site.
    pub fn site_time_zone(&self, id: SiteId) -> Option<&TimeZone> {
        self.site_ix.get(&id).map(|&i| &self.sites[i as usize].tz)
    }

    pub fn door(&self, id: DoorId) -> Option<&Door> {
        self.door_index(id).map(|i| &self.doors[i as usize].door)
    }

    pub fn reader(&self, id: ReaderId) -> Option<&Reader> {
        self.reader_ix.get(&id).map(|&i| &self.readers[i as usize])
    }

    /// The reader whose connection string is `connection` (e.g. a PC/SC name).
    /// Linear: for start-up wiring, not for taps.
    pub fn reader_by_connection(&self, connection: &str) -> Option<&Reader> {
        self.readers.iter().find(|r| r.connection == connection)
    }

    pub fn cardholder(&self, id: CardholderId) -> Option<&Cardholder> {
        self.cardholder_ix
            .get(&id)
            .map(|&i| &self.cardholders[i as usize])
    }

    pub fn credential(&self, id: CredentialId) -> Option<&Credential> {
        self.credential_ix
            .get(&id)
            .map(|&i| &self.credentials[i as usize])
    }

    pub fn credential_by_card_uuid(&self, uuid: &CardUuid) -> Option<&Credential> {
        self.by_uuid
            .get(uuid)
            .map(|&i| &self.credentials[i as usize])
    }

    pub fn credential_by_fasc_n(&self, f: &FascN) -> Option<&Credential> {
        self.by_fasc_n
            .get(f)
            .map(|&i| &self.credentials[i as usize])
    }

    pub fn credential_by_cert(&self, h: &Sha256) -> Option<&Credential> {
        self.by_cert.get(h).map(|&i| &self.credentials[i as usize])
    }

    pub fn credential_by_spki(&self, h: &Sha256) -> Option<&Credential> {
        self.by_spki.get(h).map(|&i| &self.credentials[i as usize])
    }

    pub fn schedule(&self, id: ScheduleId) -> Option<&Schedule> {
        self.schedule_ix
            .get(&id)
            .map(|&i| &self.schedules[i as usize])
    }

    pub fn sites(&self) -> impl ExactSizeIterator<Item = &Site> {
        self.sites.iter().map(|s| &s.site)
    }

    pub fn doors(&self) -> impl ExactSizeIterator<Item = &Door> {
        self.doors.iter().map(|d| &d.door)
    }

    pub fn readers(&self) -> &[Reader] {
        &self.readers
    }

    pub fn cardholders(&self) -> &[Cardholder] {
        &self.cardholders
    }

    /// The newest credential of the cardholder of `id` (the latest
    /// `enrolled_at`, then the highest id), when it is not `id` itself:
    /// what superseded it.
    pub fn superseded_by(&self, id: CredentialId) -> Option<CredentialId> {
        let ci = *self.credential_ix.get(&id)?;
        self.newer_than(ci)
    }

    pub(crate) fn newer_than(&self, ci: u32) -> Option<CredentialId> {
        let hi = *self.credential_holder.get(ci as usize)?;
        let newest = self.newest_credential.get(hi as usize).copied().flatten()?;
        (newest != ci).then(|| self.credentials[newest as usize].id)
    }

    pub fn credentials(&self) -> &[Credential] {
        &self.credentials
    }

    pub fn groups(&self) -> impl ExactSizeIterator<Item = &AccessGroup> {
        self.groups.iter().map(|g| &g.group)
    }

    pub fn schedules(&self) -> &[Schedule] {
        &self.schedules
    }

    pub fn holidays(&self) -> &[Holiday] {
        &self.holidays
    }
}

impl std::fmt::Debug for AccessSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessSnapshot")
            .field("sites", &self.sites.len())
            .field("doors", &self.doors.len())
            .field("readers", &self.readers.len())
            .field("cardholders", &self.cardholders.len())
            .field("credentials", &self.credentials.len())
            .field("groups", &self.groups.len())
            .field("schedules", &self.schedules.len())
            .field("holidays", &self.holidays.len())
            .finish()
    }
}
