//! The access decision: who may open which door, now.

use std::collections::HashMap;
use std::fmt;

use jiff::Timestamp;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use crate::freshness::{Offline, Stale, StalePolicy};
use crate::model::*;
use crate::schedule::{self, Check};
use crate::snapshot::AccessSnapshot;

/// The identifiers an authenticated card presented. Whatever the mechanism
/// proved; the decision matches on the strongest one present (certificate
/// hash, key hash, card UUID, FASC-N) and requires the others to agree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub card_uuid: Option<CardUuid>,
    pub fasc_n: Option<FascN>,
    pub cert_sha256: Option<Sha256>,
    pub spki_sha256: Option<Sha256>,
}

/// One tap at one door, after the card was authenticated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub door: DoorId,
    pub identity: Identity,
    pub mechanism: Mechanism,
    pub assurance: Assurance,
}

/// Which side of a site a cardholder was last recorded on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Presence {
    Inside,
    Outside,
}

/// What a granted tap at an anti-passback door changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassbackUpdate {
    pub site: SiteId,
    pub cardholder: CardholderId,
    pub presence: Presence,
}

/// Where each cardholder was last recorded, per site. A cardholder never
/// seen at a site may pass either way (the first tap sets the state).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassbackState {
    presence: HashMap<(SiteId, CardholderId), Presence>,
}

impl PassbackState {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, site: SiteId, cardholder: CardholderId) -> Option<Presence> {
        self.presence.get(&(site, cardholder)).copied()
    }

    pub fn apply(&mut self, update: &PassbackUpdate) {
        self.presence
            .insert((update.site, update.cardholder), update.presence);
    }

    /// Forgets a cardholder's state at a site (an operator's reset).
    pub fn forget(&mut self, site: SiteId, cardholder: CardholderId) {
        self.presence.remove(&(site, cardholder));
    }

    pub fn len(&self) -> usize {
        self.presence.len()
    }

    pub fn is_empty(&self) -> bool {
        self.presence.is_empty()
    }
}

/// Why a tap was refused: the rule that refused it, with a stable
/// kebab-case [`code`](Refusal::code) and a sentence ([`Display`]).
/// Serialises as `{"code": …, "reason": …}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    UnknownDoor {
        door: DoorId,
    },
    NoIdentifier,
    NotEnrolled {
        /// The strongest identifier presented, e.g. "card UUID 3a4f…".
        identifier: String,
    },
    IdentityMismatch {
        credential: CredentialId,
        /// The identifier that disagrees with what was enrolled.
        identifier: String,
    },
    CredentialRevoked {
        reason: String,
        at: Option<Timestamp>,
    },
    CredentialSuspended {
        reason: String,
    },
    CredentialExpired {
        at: Timestamp,
    },
    CardholderSuspended {
        name: String,
        reason: String,
    },
    CardholderNotYetValid {
        name: String,
        from: Timestamp,
    },
    CardholderExpired {
        name: String,
        until: Timestamp,
    },
    DoorLocked {
        door: String,
    },
    SiteLockdown {
        site: String,
    },
    MechanismTooWeak {
        door: String,
        used: Mechanism,
        required: Mechanism,
    },
    LowAssurance {
        door: String,
    },
    NoGroupForDoor {
        door: String,
    },
    OutsideSchedule {
        schedules: Vec<String>,
    },
    Holiday {
        holiday: String,
        date: jiff::civil::Date,
        schedule: String,
    },
    AntiPassback {
        site: String,
        presence: Presence,
    },
    /// The door's data is older than its maximum and its policy is
    /// `refuse`.
    StaleData {
        door: String,
        stale: Stale,
    },
    /// The door's data is older than its maximum, its policy is
    /// `recent-only`, and a newer credential of the same cardholder exists.
    StaleSuperseded {
        door: String,
        newer: CredentialId,
        stale: Stale,
    },
    /// Another door of an interlock group (mantrap) is open or released
    /// (see [`crate::interlock`]); checked by the controller at the moment
    /// of opening, not by [`AccessSnapshot::decide`].
    Interlock {
        group: String,
        /// The door that blocks the release.
        door: String,
        blocking: crate::interlock::Blocking,
    },
}

impl Refusal {
    /// The stable machine-readable name of the rule.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::UnknownDoor { .. } => "unknown-door",
            Refusal::NoIdentifier => "no-identifier",
            Refusal::NotEnrolled { .. } => "not-enrolled",
            Refusal::IdentityMismatch { .. } => "identity-mismatch",
            Refusal::CredentialRevoked { .. } => "credential-revoked",
            Refusal::CredentialSuspended { .. } => "credential-suspended",
            Refusal::CredentialExpired { .. } => "credential-expired",
            Refusal::CardholderSuspended { .. } => "cardholder-suspended",
            Refusal::CardholderNotYetValid { .. } => "cardholder-not-yet-valid",
            Refusal::CardholderExpired { .. } => "cardholder-expired",
            Refusal::DoorLocked { .. } => "door-locked",
            Refusal::SiteLockdown { .. } => "site-lockdown",
            Refusal::MechanismTooWeak { .. } => "mechanism-too-weak",
            Refusal::LowAssurance { .. } => "low-assurance",
            Refusal::NoGroupForDoor { .. } => "no-group-for-door",
            Refusal::OutsideSchedule { .. } => "outside-schedule",
            Refusal::Holiday { .. } => "holiday",
            Refusal::AntiPassback { .. } => "anti-passback",
            Refusal::StaleData { .. } => "stale-data",
            Refusal::StaleSuperseded { .. } => "stale-superseded",
            Refusal::Interlock { .. } => "interlock",
        }
    }

    /// Every code, in rule order (for documentation and metrics labels).
    pub const CODES: [&'static str; 21] = [
        "unknown-door",
        "no-identifier",
        "not-enrolled",
        "identity-mismatch",
        "credential-revoked",
        "credential-suspended",
        "credential-expired",
        "cardholder-suspended",
        "cardholder-not-yet-valid",
        "cardholder-expired",
        "door-locked",
        "site-lockdown",
        "mechanism-too-weak",
        "low-assurance",
        "no-group-for-door",
        "outside-schedule",
        "holiday",
        "stale-data",
        "stale-superseded",
        "anti-passback",
        "interlock",
    ];
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::UnknownDoor { door } => write!(f, "door {door} is not configured"),
            Refusal::NoIdentifier => f.write_str("not enrolled: the card presented no identifier"),
            Refusal::NotEnrolled { identifier } => {
                write!(f, "not enrolled: no credential has {identifier}")
            }
            Refusal::IdentityMismatch {
                credential,
                identifier,
            } => write!(
                f,
                "identity mismatch: {identifier} differs from what credential {credential} was enrolled with"
            ),
            Refusal::CredentialRevoked { reason, at: Some(at) } => {
                write!(f, "credential revoked at {at}: {reason}")
            }
            Refusal::CredentialRevoked { reason, at: None } => {
                write!(f, "credential revoked: {reason}")
            }
            Refusal::CredentialSuspended { reason } => {
                write!(f, "credential suspended: {reason}")
            }
            Refusal::CredentialExpired { at } => write!(f, "credential expired at {at}"),
            Refusal::CardholderSuspended { name, reason } => {
                write!(f, "cardholder `{name}` suspended: {reason}")
            }
            Refusal::CardholderNotYetValid { name, from } => {
                write!(f, "cardholder `{name}` not valid before {from}")
            }
            Refusal::CardholderExpired { name, until } => {
                write!(f, "cardholder `{name}` expired at {until}")
            }
            Refusal::DoorLocked { door } => write!(f, "door `{door}` is locked"),
            Refusal::SiteLockdown { site } => write!(f, "site `{site}` is locked down"),
            Refusal::MechanismTooWeak {
                door,
                used,
                required,
            } => write!(
                f,
                "mechanism too weak: door `{door}` requires {required}, the card used {used}"
            ),
            Refusal::LowAssurance { door } => write!(
                f,
                "low assurance: door `{door}` does not accept low-assurance (CHUID) taps"
            ),
            Refusal::NoGroupForDoor { door } => {
                write!(f, "no access group grants door `{door}`")
            }
            Refusal::OutsideSchedule { schedules } => {
                f.write_str(if schedules.len() == 1 {
                    "outside schedule "
                } else {
                    "outside schedules "
                })?;
                for (i, s) in schedules.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "`{s}`")?;
                }
                Ok(())
            }
            Refusal::Holiday {
                holiday,
                date,
                schedule,
            } => write!(f, "holiday `{holiday}` ({date}) closes schedule `{schedule}`"),
            Refusal::AntiPassback {
                site,
                presence: Presence::Inside,
            } => write!(
                f,
                "anti-passback: already recorded inside site `{site}`; leave through an exit door first"
            ),
            Refusal::AntiPassback {
                site,
                presence: Presence::Outside,
            } => write!(
                f,
                "anti-passback: not recorded inside site `{site}`; enter through an entry door first"
            ),
            Refusal::StaleData { door, stale } => {
                write!(f, "stale data: door `{door}` refuses while {stale}")
            }
            Refusal::StaleSuperseded {
                door,
                newer,
                stale,
            } => write!(
                f,
                "stale data: door `{door}` admits only the newest credential of each cardholder while {stale}; credential {newer} replaced this one, whose revocation may not have reached the site"
            ),
            Refusal::Interlock {
                group,
                door,
                blocking,
            } => write!(
                f,
                "interlock: door `{door}` is {} (interlock group `{group}`)",
                blocking.as_str()
            ),
        }
    }
}

impl std::error::Error for Refusal {}

impl Serialize for Refusal {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Refusal", 2)?;
        st.serialize_field("code", self.code())?;
        st.serialize_field("reason", &self.to_string())?;
        st.end()
    }
}

/// Granted (with the group and schedule that granted it) or refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Verdict {
    Granted {
        group: GroupId,
        schedule: ScheduleId,
    },
    Refused(Refusal),
}

/// The decision for one tap, with what was recognised even when refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub door: DoorId,
    pub site: Option<SiteId>,
    pub credential: Option<CredentialId>,
    pub cardholder: Option<CardholderId>,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// For a granted tap at an anti-passback door: the state change to apply
    /// once the door was actually signalled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passback: Option<PassbackUpdate>,
    /// The door's data was older than its maximum when it was decided
    /// (granted under `decide` or `recent-only`, or refused for it).
    #[serde(skip)]
    pub stale: Option<Stale>,
}

impl Decision {
    pub fn is_granted(&self) -> bool {
        matches!(self.verdict, Verdict::Granted { .. })
    }

    pub fn refusal(&self) -> Option<&Refusal> {
        match &self.verdict {
            Verdict::Refused(r) => Some(r),
            Verdict::Granted { .. } => None,
        }
    }

    /// `"granted"` or the refusal's code.
    pub fn code(&self) -> &'static str {
        match &self.verdict {
            Verdict::Granted { .. } => "granted",
            Verdict::Refused(r) => r.code(),
        }
    }
}

struct Partial {
    door: DoorId,
    site: Option<SiteId>,
    credential: Option<CredentialId>,
    cardholder: Option<CardholderId>,
}

impl Partial {
    fn refuse(self, r: Refusal) -> Decision {
        Decision {
            door: self.door,
            site: self.site,
            credential: self.credential,
            cardholder: self.cardholder,
            verdict: Verdict::Refused(r),
            passback: None,
            stale: None,
        }
    }
}

impl AccessSnapshot {
    /// Finds the credential a tap identifies: by the strongest identifier
    /// present; every other identifier presented must agree with it.
    fn identify(&self, id: &Identity) -> Result<u32, Refusal> {
        let lookups: [(Option<u32>, bool); 4] = [
            (
                id.cert_sha256.and_then(|h| self.by_cert.get(&h).copied()),
                id.cert_sha256.is_some(),
            ),
            (
                id.spki_sha256.and_then(|h| self.by_spki.get(&h).copied()),
                id.spki_sha256.is_some(),
            ),
            (
                id.card_uuid.and_then(|u| self.by_uuid.get(&u).copied()),
                id.card_uuid.is_some(),
            ),
            (
                id.fasc_n.and_then(|f| self.by_fasc_n.get(&f).copied()),
                id.fasc_n.is_some(),
            ),
        ];
        if !lookups.iter().any(|(_, present)| *present) {
            return Err(Refusal::NoIdentifier);
        }
        let Some(ix) = lookups.iter().find_map(|(ix, _)| *ix) else {
            return Err(Refusal::NotEnrolled {
                identifier: strongest(id),
            });
        };
        let c = &self.credentials[ix as usize];
        let mismatch = |identifier: String| {
            Err(Refusal::IdentityMismatch {
                credential: c.id,
                identifier,
            })
        };
        // A presented identifier disagrees when the credential was enrolled
        // with a different value, or when it names another credential.
        if let Some(h) = id.cert_sha256 {
            if c.cert_sha256.is_some_and(|e| e != h) || lookups[0].0.is_some_and(|o| o != ix) {
                return mismatch(format!("certificate SHA-256 {h}"));
            }
        }
        if let Some(h) = id.spki_sha256 {
            if c.spki_sha256.is_some_and(|e| e != h) || lookups[1].0.is_some_and(|o| o != ix) {
                return mismatch(format!("public key SHA-256 {h}"));
            }
        }
        if let Some(u) = id.card_uuid {
            if c.card_uuid.is_some_and(|e| e != u) || lookups[2].0.is_some_and(|o| o != ix) {
                return mismatch(format!("card UUID {u}"));
            }
        }
        if let Some(f) = id.fasc_n {
            if c.fasc_n.is_some_and(|e| e != f) || lookups[3].0.is_some_and(|o| o != ix) {
                return mismatch(format!("FASC-N {f}"));
            }
        }
        Ok(ix)
    }

    /// The enrolled credential whose identifiers a card presented, whether or
    /// not the card was accepted: an audit record of a refused tap names
    /// whose card it claims to be (a revoked card, a copy of a CHUID). The
    /// strongest identifier that matches decides, as in [`Self::decide`].
    pub fn claimed_credential(&self, id: &Identity) -> Option<&Credential> {
        let ix = match self.identify(id) {
            Ok(ix) => ix,
            Err(Refusal::IdentityMismatch { credential, .. }) => {
                return self.credential(credential);
            }
            Err(_) => return None,
        };
        self.credentials().get(ix as usize)
    }

    /// Decides one tap at `now`. The rules, in order (the first that fails
    /// refuses):
    ///
    /// 1. the door is configured;
    /// 2. a credential is enrolled for the card's identifiers, and they agree;
    /// 3. the credential is not revoked, suspended or expired;
    /// 4. the cardholder is active and inside their validity;
    /// 5. the door is not locked;
    /// 6. the mechanism used satisfies the door's (and low assurance only
    ///    where the door allows it);
    /// 7. an access group of the cardholder includes the door, and its
    ///    schedule is open now in the site's time zone (holidays applied);
    /// 8. the door's data is not older than its maximum, or its
    ///    [`StalePolicy`] admits the tap anyway (see [`Self::decide_offline`]);
    /// 9. anti-passback, for doors marked in or out.
    ///
    /// Identity comes before the door's state so that a revoked card is
    /// reported as revoked at any door. Never panics, allocates only to
    /// describe a refusal. This is [`Self::decide_offline`] for a site whose
    /// data is never stale ([`Offline::NONE`]).
    pub fn decide(&self, req: &Request, passback: &PassbackState, now: Timestamp) -> Decision {
        self.decide_offline(req, passback, now, &Offline::NONE)
    }

    /// [`Self::decide`] at a site whose data is as old as `offline` says.
    /// A door whose data is older than its maximum (its own
    /// `max_staleness_s`, else `offline`'s default) applies its
    /// [`StalePolicy`] to a tap every other rule would grant: `decide`
    /// grants it, `refuse` refuses it (`stale-data`), `recent-only` refuses
    /// a credential a newer credential of the same cardholder superseded
    /// (`stale-superseded`). The decision's `stale` says the door was stale.
    pub fn decide_offline(
        &self,
        req: &Request,
        passback: &PassbackState,
        now: Timestamp,
        offline: &Offline,
    ) -> Decision {
        let mut p = Partial {
            door: req.door,
            site: None,
            credential: None,
            cardholder: None,
        };
        let Some(di) = self.door_index(req.door) else {
            return p.refuse(Refusal::UnknownDoor { door: req.door });
        };
        let door_entry = &self.doors[di as usize];
        let door = &door_entry.door;
        let site = &self.sites[door_entry.site as usize];
        p.site = Some(site.site.id);

        let ci = match self.identify(&req.identity) {
            Ok(ci) => ci,
            Err(r) => return p.refuse(r),
        };
        let cred = &self.credentials[ci as usize];
        p.credential = Some(cred.id);
        let hi = self.credential_holder[ci as usize];
        let holder = &self.cardholders[hi as usize];
        p.cardholder = Some(holder.id);

        match &cred.state {
            CredentialState::Active => {}
            CredentialState::Revoked { reason, at } => {
                return p.refuse(Refusal::CredentialRevoked {
                    reason: reason.clone(),
                    at: *at,
                })
            }
            CredentialState::Suspended { reason } => {
                return p.refuse(Refusal::CredentialSuspended {
                    reason: reason.clone(),
                })
            }
        }
        if let Some(at) = cred.expires_at {
            if now >= at {
                return p.refuse(Refusal::CredentialExpired { at });
            }
        }

        if let CardholderStatus::Suspended { reason } = &holder.status {
            return p.refuse(Refusal::CardholderSuspended {
                name: holder.name.clone(),
                reason: reason.clone(),
            });
        }
        if let Some(from) = holder.valid_from {
            if now < from {
                return p.refuse(Refusal::CardholderNotYetValid {
                    name: holder.name.clone(),
                    from,
                });
            }
        }
        if let Some(until) = holder.valid_until {
            if now >= until {
                return p.refuse(Refusal::CardholderExpired {
                    name: holder.name.clone(),
                    until,
                });
            }
        }

        if site.site.lockdown {
            return p.refuse(Refusal::SiteLockdown {
                site: site.site.name.clone(),
            });
        }
        if door.mode == DoorMode::Locked {
            return p.refuse(Refusal::DoorLocked {
                door: door.name.clone(),
            });
        }

        if !req.mechanism.satisfies(door.mechanism) {
            return p.refuse(Refusal::MechanismTooWeak {
                door: door.name.clone(),
                used: req.mechanism,
                required: door.mechanism,
            });
        }
        if (req.assurance == Assurance::Low || req.mechanism == Mechanism::Chuid)
            && !door.allow_low_assurance
        {
            return p.refuse(Refusal::LowAssurance {
                door: door.name.clone(),
            });
        }

        let local = site.tz.to_datetime(now);
        let site_id = site.site.id;
        let mut any_group = false;
        let mut closed: Option<u32> = None;
        let mut holiday: Option<(u32, u32)> = None;
        let mut granted = None;
        for &gi in &self.cardholder_groups[hi as usize] {
            let g = &self.groups[gi as usize];
            if g.doors.binary_search(&req.door).is_err() {
                continue;
            }
            any_group = true;
            let s = &self.schedules[g.schedule as usize];
            match schedule::check(&s.windows, &s.holiday_windows, local, |d| {
                self.holiday_on(site_id, d)
            }) {
                Check::Open => {
                    granted = Some((g.group.id, s.id));
                    break;
                }
                Check::Closed => {
                    closed.get_or_insert(g.schedule);
                }
                Check::Holiday(h) => {
                    holiday.get_or_insert((h, g.schedule));
                }
            }
        }
        let Some((group, schedule)) = granted else {
            if !any_group {
                return p.refuse(Refusal::NoGroupForDoor {
                    door: door.name.clone(),
                });
            }
            if let Some((h, s)) = holiday {
                let h = self.holiday_at(h);
                return p.refuse(Refusal::Holiday {
                    holiday: h.name.clone(),
                    date: h.date,
                    schedule: self.schedules[s as usize].name.clone(),
                });
            }
            let mut schedules = Vec::new();
            for &gi in &self.cardholder_groups[hi as usize] {
                let g = &self.groups[gi as usize];
                if g.doors.binary_search(&req.door).is_ok() {
                    let name = &self.schedules[g.schedule as usize].name;
                    if !schedules.contains(name) {
                        schedules.push(name.clone());
                    }
                }
            }
            debug_assert!(closed.is_some());
            return p.refuse(Refusal::OutsideSchedule { schedules });
        };

        let stale = offline.stale(door, now);
        if let Some(st) = stale {
            let refusal = match door.stale_policy {
                StalePolicy::Decide => None,
                StalePolicy::Refuse => Some(Refusal::StaleData {
                    door: door.name.clone(),
                    stale: st,
                }),
                StalePolicy::RecentOnly => {
                    self.newer_than(ci).map(|newer| Refusal::StaleSuperseded {
                        door: door.name.clone(),
                        newer,
                        stale: st,
                    })
                }
            };
            if let Some(r) = refusal {
                let mut d = p.refuse(r);
                d.stale = stale;
                return d;
            }
        }

        let passback_update = match door.passback {
            Passback::None => None,
            Passback::In | Passback::Out => {
                let (forbidden, next) = if door.passback == Passback::In {
                    (Presence::Inside, Presence::Inside)
                } else {
                    (Presence::Outside, Presence::Outside)
                };
                if passback.get(site_id, holder.id) == Some(forbidden) {
                    return p.refuse(Refusal::AntiPassback {
                        site: site.site.name.clone(),
                        presence: forbidden,
                    });
                }
                Some(PassbackUpdate {
                    site: site_id,
                    cardholder: holder.id,
                    presence: next,
                })
            }
        };

        Decision {
            door: req.door,
            site: p.site,
            credential: p.credential,
            cardholder: p.cardholder,
            verdict: Verdict::Granted { group, schedule },
            passback: passback_update,
            stale,
        }
    }

    /// [`decide`](Self::decide), then applies a grant's anti-passback update
    /// to `passback` (for callers that signal the door unconditionally).
    pub fn decide_and_record(
        &self,
        req: &Request,
        passback: &mut PassbackState,
        now: Timestamp,
    ) -> Decision {
        let d = self.decide(req, passback, now);
        if let Some(u) = &d.passback {
            passback.apply(u);
        }
        d
    }
}

fn strongest(id: &Identity) -> String {
    if let Some(h) = id.cert_sha256 {
        format!("certificate SHA-256 {h}")
    } else if let Some(h) = id.spki_sha256 {
        format!("public key SHA-256 {h}")
    } else if let Some(u) = id.card_uuid {
        format!("card UUID {u}")
    } else if let Some(f) = id.fasc_n {
        format!("FASC-N {f}")
    } else {
        "no identifier".to_string()
    }
}
