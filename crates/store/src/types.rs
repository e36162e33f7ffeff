//! Values the store reads and writes besides the access entities.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use access::jiff::Timestamp;
use access::{CardholderId, CredentialId, Decision, DoorId, ReaderId};
use serde::{Deserialize, Serialize};

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{kind} {id} does not exist")]
    NotFound { kind: &'static str, id: String },
    #[error("{kind}: {detail} (a unique value is already taken)")]
    Conflict { kind: &'static str, detail: String },
    /// A change was made against a version that is no longer the stored one.
    #[error("{kind} {id} was changed by someone else (version {expected} was expected, it is now {current}): reload it and try again")]
    Stale {
        kind: &'static str,
        id: String,
        expected: i64,
        current: i64,
    },
    #[error("{kind} {id}: {detail} (it refers to, or is referred to by, another entity)")]
    Reference {
        kind: &'static str,
        id: String,
        detail: String,
    },
    #[error("{kind}: field `{field}`: {problem}")]
    Invalid {
        kind: &'static str,
        field: &'static str,
        problem: String,
    },
    #[error("stored data does not make a consistent snapshot: {0}")]
    Snapshot(#[from] access::BuildError),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("cannot open the data directory {path}: {source}")]
    DataDir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("unsupported database URL `{0}`: use sqlite:… or postgres://…")]
    UnsupportedUrl(String),
    /// The database was migrated by a newer release: this one would not
    /// know its schema (a downgrade), so it does not touch it.
    #[error("the database was written by a newer pivgate (schema version {found}; this release knows up to {known}): run that release, or restore a backup taken before the upgrade")]
    NewerSchema { found: i64, known: i64 },
    /// A group commit failed; every event of the batch gets the same cause.
    #[error("event commit failed: {0}")]
    Commit(Arc<StoreError>),
    #[error("the event writer has stopped")]
    WriterStopped,
    /// A change refused itself (its own error goes to whoever submitted
    /// it); nothing was written.
    #[error("the change was refused")]
    ChangeRefused,
}

/// Identifies an event; ascending in commit order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EventId(pub i64);

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

macro_rules! text_enum {
    ($(#[$m:meta])* $name:ident, $what:expr, $($s:expr => $v:ident),+) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum $name { $($v),+ }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self { $($name::$v => $s),+ }
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($s => Ok($name::$v),)+
                    _ => Err(format!(concat!("`{}` is not ", $what, " (expected one of:" $(, " `", $s, "`")+, ")"), s)),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

text_enum!(
    /// What an event records: a tap, an administrative change, a command
    /// to a door, a reader link's report, a door input's change (`door`:
    /// opened, closed, request-to-exit, tamper) or an alarm's raising,
    /// acknowledgement or clearing (`alarm`).
    EventKind, "an event kind",
    "tap" => Tap, "admin" => Admin, "door-command" => DoorCommand, "reader" => Reader,
    "door" => Door, "alarm" => Alarm
);
text_enum!(
    /// The result of a tap.
    EventResult, "an event result",
    "granted" => Granted, "refused" => Refused
);
text_enum!(
    /// What an API token may do: viewers read, operators also command doors,
    /// admins also change entities and tokens. A keypad (a PIN pad at a
    /// door) may only send the PINs typed on it: it can neither read nor
    /// command anything, so a token taken from a device at the door opens
    /// nothing.
    Role, "a role",
    "keypad" => Keypad, "viewer" => Viewer, "operator" => Operator, "admin" => Admin
);

impl Role {
    /// Whether this role includes everything `other` may do.
    pub fn includes(self, other: Role) -> bool {
        match (self, other) {
            (Role::Keypad, o) => o == Role::Keypad,
            (_, Role::Keypad) => self != Role::Viewer,
            _ => {
                let rank = |r| match r {
                    Role::Keypad | Role::Viewer => 0,
                    Role::Operator => 1,
                    Role::Admin => 2,
                };
                rank(self) >= rank(other)
            }
        }
    }
}

/// An event to append.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewEvent {
    pub time: Timestamp,
    pub kind: EventKind,
    pub door: Option<DoorId>,
    pub reader: Option<ReaderId>,
    pub cardholder: Option<CardholderId>,
    pub credential: Option<CredentialId>,
    pub result: Option<EventResult>,
    /// `granted`, a refusal code, or the admin action (e.g. `door.create`).
    pub code: Option<String>,
    /// The sentence a person reads.
    pub reason: Option<String>,
    /// The API token (by name) that made an admin change or door command.
    pub actor: Option<String>,
    /// The whole transaction of a tap, or the change of an admin event.
    pub data: Option<serde_json::Value>,
    /// A granted tap that moved its cardholder in or out at an
    /// anti-passback door: recorded, in the same transaction, as the
    /// cardholder's last grant at the door, from which the presence is
    /// rebuilt at start-up. Taps at other doors write nothing besides
    /// their event. Not stored as such (false when read back).
    #[serde(skip)]
    pub passback: bool,
}

impl NewEvent {
    /// A tap, from its decision; `transaction` is the whole authentication
    /// transaction (stage table, identifiers, assurance) as JSON.
    pub fn tap(
        time: Timestamp,
        reader: Option<ReaderId>,
        decision: &Decision,
        transaction: serde_json::Value,
    ) -> Self {
        let (result, reason) = match decision.refusal() {
            None => (EventResult::Granted, None),
            Some(r) => (EventResult::Refused, Some(r.to_string())),
        };
        NewEvent {
            time,
            kind: EventKind::Tap,
            door: Some(decision.door),
            reader,
            cardholder: decision.cardholder,
            credential: decision.credential,
            result: Some(result),
            code: Some(decision.code().to_string()),
            reason,
            actor: None,
            data: Some(transaction),
            passback: decision.is_granted() && decision.passback.is_some(),
        }
    }

    /// A tap refused before the decision (e.g. by authentication): the
    /// refusal's code and sentence come from the authenticator.
    pub fn refused_tap(
        time: Timestamp,
        door: DoorId,
        reader: Option<ReaderId>,
        code: &str,
        reason: String,
        transaction: serde_json::Value,
    ) -> Self {
        NewEvent {
            time,
            kind: EventKind::Tap,
            door: Some(door),
            reader,
            cardholder: None,
            credential: None,
            result: Some(EventResult::Refused),
            code: Some(code.to_string()),
            reason: Some(reason),
            actor: None,
            data: Some(transaction),
            passback: false,
        }
    }

    /// An administrative change by `actor`: `action` like `door.update`,
    /// `reason` a sentence, `change` the new value or what was removed.
    pub fn admin(
        time: Timestamp,
        actor: &str,
        action: &str,
        reason: String,
        change: serde_json::Value,
    ) -> Self {
        NewEvent {
            time,
            kind: EventKind::Admin,
            door: None,
            reader: None,
            cardholder: None,
            credential: None,
            result: None,
            code: Some(action.to_string()),
            reason: Some(reason),
            actor: Some(actor.to_string()),
            data: Some(change),
            passback: false,
        }
    }

    /// A command sent to a door (momentary unlock, mode change) by `actor`.
    pub fn door_command(
        time: Timestamp,
        actor: &str,
        door: DoorId,
        command: &str,
        reason: String,
    ) -> Self {
        NewEvent {
            time,
            kind: EventKind::DoorCommand,
            door: Some(door),
            reader: None,
            cardholder: None,
            credential: None,
            result: None,
            code: Some(command.to_string()),
            reason: Some(reason),
            actor: Some(actor.to_string()),
            data: None,
            passback: false,
        }
    }
}

impl NewEvent {
    /// Something a reader link reported (online, offline, refused by the
    /// secure channel, tamper, power): `code` like `osdp-offline`, `reason`
    /// the sentence, `detail` the link's particulars (device, address).
    pub fn reader(
        time: Timestamp,
        door: Option<DoorId>,
        reader: Option<ReaderId>,
        code: &str,
        reason: String,
        detail: serde_json::Value,
    ) -> Self {
        NewEvent {
            time,
            kind: EventKind::Reader,
            door,
            reader,
            cardholder: None,
            credential: None,
            result: None,
            code: Some(code.to_string()),
            reason: Some(reason),
            actor: None,
            data: Some(detail),
            passback: false,
        }
    }
}

/// A stored event as an export reads it: every column but `data` parsed
/// (`event.event.data` is `None`), and `data` as the JSON text stored, for
/// the reader to parse only what it needs of it.
#[derive(Debug, Clone, PartialEq)]
pub struct EventText {
    pub event: Event,
    pub data: Option<String>,
}

/// A stored event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: EventId,
    #[serde(flatten)]
    pub event: NewEvent,
}

/// Which way a page runs from its cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    /// Oldest first, ids greater than the cursor.
    #[default]
    Forward,
    /// Newest first, ids less than the cursor.
    Backward,
}

/// Filters and a cursor for [`Store::query_events`](crate::Store::query_events).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventQuery {
    pub door: Option<DoorId>,
    pub cardholder: Option<CardholderId>,
    pub result: Option<EventResult>,
    pub kind: Option<EventKind>,
    /// At a central: only the events uploaded by the site of this name.
    #[serde(default)]
    pub site: Option<String>,
    /// Events at or after this time.
    pub since: Option<Timestamp>,
    /// Events before this time.
    pub until: Option<Timestamp>,
    /// Exclusive: the `next` of the previous page.
    pub cursor: Option<EventId>,
    #[serde(default)]
    pub direction: Direction,
    /// At most this many (1..=1000; 0 means 100).
    #[serde(default)]
    pub limit: u32,
}

impl EventQuery {
    pub const MAX_LIMIT: u32 = 1000;
    pub const DEFAULT_LIMIT: u32 = 100;

    pub(crate) fn effective_limit(&self) -> u32 {
        match self.limit {
            0 => Self::DEFAULT_LIMIT,
            n => n.min(Self::MAX_LIMIT),
        }
    }
}

/// The last granted tap of one cardholder at one door (see
/// [`Store::last_granted_taps`](crate::Store::last_granted_taps)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastGrant {
    pub cardholder: CardholderId,
    pub door: DoorId,
    /// The tap's event: later events have greater ids.
    pub event: EventId,
}

/// One page of events and the cursor for the next, if there may be more.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventPage {
    pub events: Vec<Event>,
    pub next: Option<EventId>,
}

/// An API bearer token, as stored: only its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiToken {
    pub name: String,
    pub role: Role,
    /// Hex of a hash of the secret (the service chooses the hash).
    pub token_hash: String,
    pub created_at: Timestamp,
    /// The doors a keypad token may send PINs to (empty: none; other roles
    /// are not bound to doors).
    #[serde(default)]
    pub doors: Vec<DoorId>,
    /// The one reader of those doors whose taps its PINs are for, if bound.
    #[serde(default)]
    pub reader: Option<ReaderId>,
    /// After this the token is refused.
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
    /// When it was last used, to about a minute (the service writes it at
    /// most once a minute per token).
    #[serde(default)]
    pub last_used_at: Option<Timestamp>,
}

impl ApiToken {
    /// A token bound to nothing that never expires and was never used.
    pub fn new(name: &str, role: Role, token_hash: String, created_at: Timestamp) -> Self {
        ApiToken {
            name: name.to_string(),
            role,
            token_hash,
            created_at,
            doors: Vec::new(),
            reader: None,
            expires_at: None,
            last_used_at: None,
        }
    }

    /// Whether the token has expired at `now`.
    pub fn expired(&self, now: Timestamp) -> bool {
        self.expires_at.is_some_and(|e| now >= e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use access::{Refusal, SiteId, Verdict};

    #[test]
    fn tap_event_carries_the_decision() {
        let t: Timestamp = "2026-11-23T15:00:00Z".parse().unwrap();
        let refused = Decision {
            door: DoorId(3),
            site: Some(SiteId(1)),
            credential: Some(CredentialId(9)),
            cardholder: Some(CardholderId(4)),
            verdict: Verdict::Refused(Refusal::OutsideSchedule {
                schedules: vec!["weekdays 07-19".into()],
            }),
            passback: None,
            stale: None,
        };
        let e = NewEvent::tap(t, Some(ReaderId(7)), &refused, serde_json::json!({"x": 1}));
        assert_eq!(e.kind, EventKind::Tap);
        assert_eq!(e.result, Some(EventResult::Refused));
        assert_eq!(e.code.as_deref(), Some("outside-schedule"));
        assert_eq!(
            e.reason.as_deref(),
            Some("outside schedule `weekdays 07-19`")
        );
        assert_eq!((e.door, e.reader), (Some(DoorId(3)), Some(ReaderId(7))));
        assert_eq!(e.cardholder, Some(CardholderId(4)));
        assert_eq!(e.credential, Some(CredentialId(9)));

        let granted = Decision {
            verdict: Verdict::Granted {
                group: access::GroupId(1),
                schedule: access::ScheduleId(2),
            },
            ..refused
        };
        let e = NewEvent::tap(t, None, &granted, serde_json::Value::Null);
        assert_eq!(e.result, Some(EventResult::Granted));
        assert_eq!(e.code.as_deref(), Some("granted"));
        assert_eq!(e.reason, None);
    }

    #[test]
    fn text_enums_name_the_choices() {
        assert_eq!(
            "door-command".parse::<EventKind>(),
            Ok(EventKind::DoorCommand)
        );
        let e = "root".parse::<Role>().unwrap_err();
        assert!(e.contains("`viewer`") && e.contains("`admin`"), "{e}");
        assert_eq!(
            serde_json::to_string(&EventResult::Refused).unwrap(),
            "\"refused\""
        );
    }

    #[test]
    fn query_limits() {
        let q = EventQuery::default();
        assert_eq!(q.effective_limit(), 100);
        let q = EventQuery {
            limit: 5000,
            ..EventQuery::default()
        };
        assert_eq!(q.effective_limit(), 1000);
    }
}

#[cfg(test)]
mod role_tests {
    use super::Role::{self, *};

    #[test]
    fn a_keypad_token_does_nothing_but_enter_pins() {
        let all = [Keypad, Viewer, Operator, Admin];
        let may = |r: Role| {
            all.into_iter()
                .filter(|o| r.includes(*o))
                .collect::<Vec<_>>()
        };
        assert_eq!(may(Keypad), [Keypad]);
        assert_eq!(may(Viewer), [Viewer]);
        assert_eq!(may(Operator), [Keypad, Viewer, Operator]);
        assert_eq!(may(Admin), all);
        assert_eq!("keypad".parse::<Role>(), Ok(Keypad));
    }
}
