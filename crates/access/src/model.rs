//! The entities of a site: what the store keeps and the decision reads.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use crate::parse_error::ParseError;
use crate::schedule::{Window, WindowSet};

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id_type!(
    /// Identifies a [`Site`].
    SiteId
);
id_type!(
    /// Identifies a [`Door`].
    DoorId
);
id_type!(
    /// Identifies a [`Reader`].
    ReaderId
);
id_type!(
    /// Identifies a [`Cardholder`].
    CardholderId
);
id_type!(
    /// Identifies a [`Credential`].
    CredentialId
);
id_type!(
    /// Identifies an [`AccessGroup`].
    GroupId
);
id_type!(
    /// Identifies a [`Schedule`].
    ScheduleId
);
id_type!(
    /// Identifies a [`Holiday`].
    HolidayId
);

fn parse_hex<const N: usize>(what: &'static str, s: &str) -> Result<[u8; N], ParseError> {
    let cleaned: String = s.chars().filter(|c| *c != ':' && *c != '-').collect();
    if cleaned.len() != 2 * N {
        return Err(ParseError::new(
            what,
            format!("expected {} hex digits, found {}", 2 * N, cleaned.len()),
            s,
        ));
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(&cleaned, &mut out)
        .map_err(|e| ParseError::new(what, format!("not hexadecimal: {e}"), s))?;
    Ok(out)
}

macro_rules! bytes_type {
    ($(#[$m:meta])* $name:ident, $n:expr, $what:expr) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub [u8; $n]);

        impl $name {
            pub const LEN: usize = $n;

            pub fn as_bytes(&self) -> &[u8; $n] {
                &self.0
            }

            /// From a byte slice of exactly the right length.
            pub fn from_slice(b: &[u8]) -> Result<Self, ParseError> {
                let arr: [u8; $n] = b.try_into().map_err(|_| {
                    ParseError::new($what, format!("expected {} bytes, found {}", $n, b.len()), &hex::encode(b))
                })?;
                Ok($name(arr))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

bytes_type!(
    /// A SHA-256 digest (of a certificate, or of a SubjectPublicKeyInfo),
    /// written as 64 lowercase hex digits.
    Sha256,
    32,
    "SHA-256 digest"
);
bytes_type!(
    /// The 25-byte FASC-N as encoded on the card, written as 50 hex digits.
    FascN,
    25,
    "FASC-N"
);

impl fmt::Display for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl FromStr for Sha256 {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        parse_hex("SHA-256 digest", s).map(Sha256)
    }
}

impl fmt::Display for FascN {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl FromStr for FascN {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        parse_hex("FASC-N", s).map(FascN)
    }
}

pub use piv::chuid::CardUuid;
pub use piv::mechanism::{Assurance, Mechanism};

/// The direction a door counts for anti-passback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Passback {
    /// No anti-passback at this door.
    #[default]
    None,
    /// Entry door: refused while the cardholder is recorded inside the site.
    In,
    /// Exit door: refused while the cardholder is recorded outside the site.
    Out,
}

/// The door's operating mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DoorMode {
    /// Opens for a granted tap.
    #[default]
    Normal,
    /// Held open (free access); taps are still decided and logged.
    Unlocked,
    /// Opens for nobody: every tap is refused with `door-locked`.
    Locked,
}

macro_rules! str_enum {
    ($t:ty, $what:expr, $($s:expr => $v:expr),+) => {
        impl $t {
            pub fn as_str(self) -> &'static str {
                $(if self == $v { return $s; })+
                unreachable!()
            }
        }
        impl FromStr for $t {
            type Err = ParseError;
            fn from_str(s: &str) -> Result<Self, ParseError> {
                $(if s == $s { return Ok($v); })+
                Err(ParseError::new($what, concat!("expected one of:" $(, " `", $s, "`")+), s))
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

str_enum!(Passback, "anti-passback direction", "none" => Passback::None, "in" => Passback::In, "out" => Passback::Out);
str_enum!(DoorMode, "door mode", "normal" => DoorMode::Normal, "unlocked" => DoorMode::Unlocked, "locked" => DoorMode::Locked);

/// A place with one clock: its doors' schedules run in its IANA time zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    pub id: SiteId,
    pub name: String,
    /// IANA time zone name, e.g. `America/New_York`.
    pub time_zone: String,
    /// Locked down: no tap is granted at any of its doors and scheduled
    /// unlocks do not apply; only an explicit override opens a door.
    #[serde(default)]
    pub lockdown: bool,
}

/// A door and the policy attached to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Door {
    pub id: DoorId,
    pub site: SiteId,
    pub name: String,
    /// The weakest mechanism this door accepts.
    pub mechanism: Mechanism,
    /// Whether low-assurance taps (CHUID) are accepted at all. A door that
    /// requires `chuid` must say so explicitly.
    #[serde(default)]
    pub allow_low_assurance: bool,
    #[serde(default)]
    pub passback: Passback,
    #[serde(default)]
    pub mode: DoorMode,
    /// A schedule whose windows (in the site's time zone) hold a door in
    /// `normal` mode unlocked.
    #[serde(default)]
    pub unlock_schedule: Option<ScheduleId>,
    /// With an unlock schedule: unlock only once a tap is granted inside
    /// the window ("first card unlock"), not at its start.
    #[serde(default)]
    pub first_card_unlock: bool,
    /// The oldest revocation and access data (in seconds) the door decides
    /// from before its `stale_policy` applies; `None`: the site's default
    /// (see [`crate::freshness`]).
    #[serde(default)]
    pub max_staleness_s: Option<u64>,
    /// What the door does while its data is older than its maximum.
    #[serde(default)]
    pub stale_policy: crate::freshness::StalePolicy,
}

/// A card reader bound to a door.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reader {
    pub id: ReaderId,
    pub door: DoorId,
    pub name: String,
    /// How the service reaches it, e.g. a PC/SC reader name or `osdp:/dev/ttyUSB0#1`.
    pub connection: String,
}

/// Whether a cardholder may use their credentials at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum CardholderStatus {
    Active,
    Suspended { reason: String },
}

/// A person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cardholder {
    pub id: CardholderId,
    pub name: String,
    #[serde(flatten)]
    pub status: CardholderStatus,
    /// First instant access may be granted (inclusive).
    pub valid_from: Option<Timestamp>,
    /// Instant access ends (exclusive).
    pub valid_until: Option<Timestamp>,
}

/// Whether a credential may be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum CredentialState {
    Active,
    /// Temporarily barred (e.g. card reported lost); may be reinstated.
    Suspended {
        reason: String,
    },
    /// Permanently barred (e.g. certificate revoked by its issuer).
    Revoked {
        reason: String,
        at: Option<Timestamp>,
    },
}

/// An enrolled card: the identifiers a tap is matched on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    pub id: CredentialId,
    pub cardholder: CardholderId,
    pub card_uuid: Option<CardUuid>,
    pub fasc_n: Option<FascN>,
    /// SHA-256 of the card authentication certificate (DER).
    pub cert_sha256: Option<Sha256>,
    /// SHA-256 of the card authentication key's SubjectPublicKeyInfo (DER).
    pub spki_sha256: Option<Sha256>,
    /// The certificate's notAfter: no access from this instant on.
    pub expires_at: Option<Timestamp>,
    pub enrolled_at: Timestamp,
    /// Who enrolled it (an API token name or an operator).
    pub enrolled_by: String,
    #[serde(flatten)]
    pub state: CredentialState,
}

/// The card authentication certificate a credential was enrolled with
/// (DER), kept so the credential can be validated again later (daily
/// re-validation, NIST SP 800-116 §7.4). Stored beside the credential and
/// not part of the decision snapshot: a tap matches on the hashes alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnrolledCertificate {
    pub credential: CredentialId,
    pub der: Vec<u8>,
}

/// Cardholders × doors, open when the schedule is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessGroup {
    pub id: GroupId,
    pub name: String,
    pub schedule: ScheduleId,
    pub doors: Vec<DoorId>,
    pub cardholders: Vec<CardholderId>,
}

/// Named weekly windows, plus the windows that apply on holidays instead.
///
/// On a holiday the regular windows do not apply; `holiday_windows` do (their
/// days are ignored). An empty `holiday_windows` closes the schedule on
/// holidays; `00:00-24:00` keeps it open all day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    pub id: ScheduleId,
    pub name: String,
    pub windows: Vec<Window>,
    #[serde(default)]
    pub holiday_windows: WindowSet,
}

impl Schedule {
    /// Whether the schedule is open at local wall-clock time `at`, where
    /// `is_holiday(date)` says whether a date is a holiday at the site: the
    /// same evaluation a tap's decision makes.
    pub fn is_open_at(
        &self,
        at: jiff::civil::DateTime,
        is_holiday: impl Fn(jiff::civil::Date) -> bool,
    ) -> bool {
        matches!(
            crate::schedule::check(&self.windows, &self.holiday_windows, at, |d| {
                is_holiday(d).then_some(())
            }),
            crate::schedule::Check::Open
        )
    }
}

/// A day on which schedules use their holiday windows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holiday {
    pub id: HolidayId,
    /// `None`: every site.
    pub site: Option<SiteId>,
    pub date: jiff::civil::Date,
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_open_at_wall_clock_time_and_holidays() {
        use jiff::civil::date;
        let s = Schedule {
            id: ScheduleId(1),
            name: "office".into(),
            windows: vec!["mon-fri 07:00-19:00".parse().unwrap()],
            holiday_windows: vec!["10:00-12:00".parse().unwrap()],
        };
        // 2026-11-26 is a Thursday.
        let thu = date(2026, 11, 26);
        assert!(s.is_open_at(thu.at(7, 0, 0, 0), |_| false));
        assert!(!s.is_open_at(thu.at(19, 0, 0, 0), |_| false));
        assert!(!s.is_open_at(thu.at(8, 0, 0, 0), |d| d == thu));
        assert!(s.is_open_at(thu.at(11, 59, 59, 0), |d| d == thu));
        assert!(!s.is_open_at(date(2026, 11, 28).at(8, 0, 0, 0), |_| false));
    }

    #[test]
    fn digest_serde_round_trip() {
        let d = Sha256([0xab; 32]);
        let j = serde_json::to_string(&d).unwrap();
        assert_eq!(j, format!("\"{}\"", "ab".repeat(32)));
        assert_eq!(serde_json::from_str::<Sha256>(&j).unwrap(), d);
        assert!(serde_json::from_str::<Sha256>("\"ab\"").is_err());
    }

    #[test]
    fn mechanism_strength() {
        assert!(Mechanism::PkiAuth.satisfies(Mechanism::PkiCak));
        assert!(Mechanism::PkiCak.satisfies(Mechanism::PkiCak));
        assert!(!Mechanism::PkiCak.satisfies(Mechanism::PkiAuth));
        assert!(!Mechanism::Chuid.satisfies(Mechanism::PkiCak));
        assert_eq!("pki-auth".parse::<Mechanism>().unwrap(), Mechanism::PkiAuth);
        assert!("pin".parse::<Mechanism>().is_err());
        assert_eq!("locked".parse::<DoorMode>().unwrap(), DoorMode::Locked);
        let e = "sideways".parse::<Passback>().unwrap_err().to_string();
        assert!(e.contains("`in`"), "{e}");
    }

    #[test]
    fn entities_serialise_with_flat_state() {
        let c = Cardholder {
            id: CardholderId(1),
            name: "Ada".into(),
            status: CardholderStatus::Suspended {
                reason: "on leave".into(),
            },
            valid_from: None,
            valid_until: None,
        };
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["status"], "suspended");
        assert_eq!(v["reason"], "on leave");
        assert_eq!(serde_json::from_value::<Cardholder>(v).unwrap(), c);
    }
}
