//! The entities of a site: what the store keeps and the decision reads.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

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

/// A text value that does not parse as the identifier it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {problem} (got `{input}`)")]
pub struct ParseError {
    pub what: &'static str,
    pub problem: String,
    pub input: String,
}

impl ParseError {
    pub(crate) fn new(what: &'static str, problem: impl Into<String>, input: &str) -> Self {
        // Echo at most a short prefix of what was given.
        let input: String = input.chars().take(80).collect();
        ParseError {
            what,
            problem: problem.into(),
            input,
        }
    }
}

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
    /// The card UUID (the CHUID's GUID, FIPS 201 §4.2.1), written in the
    /// canonical 8-4-4-4-12 form; parsing also takes `urn:uuid:` and plain hex.
    CardUuid,
    16,
    "card UUID"
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

impl fmt::Display for CardUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let h = hex::encode(self.0);
        write!(
            f,
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }
}

impl FromStr for CardUuid {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let body = s
            .strip_prefix("urn:uuid:")
            .or_else(|| s.strip_prefix("URN:UUID:"))
            .unwrap_or(s);
        parse_hex("card UUID", body).map(CardUuid)
    }
}

/// How a card was (or must be) authenticated, NIST SP 800-116r1 §6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Card authentication key, no PIN: one strong factor.
    PkiCak,
    /// PIV authentication key after the PIN: two factors.
    PkiAuth,
    /// The signed CHUID only: clonable, low assurance.
    Chuid,
}

impl Mechanism {
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::PkiCak => "pki-cak",
            Mechanism::PkiAuth => "pki-auth",
            Mechanism::Chuid => "chuid",
        }
    }

    /// Strength order: CHUID < PKI-CAK < PKI-AUTH.
    pub fn rank(self) -> u8 {
        match self {
            Mechanism::Chuid => 0,
            Mechanism::PkiCak => 1,
            Mechanism::PkiAuth => 2,
        }
    }

    /// Whether a tap made with `self` meets a door that requires `required`.
    pub fn satisfies(self, required: Mechanism) -> bool {
        self.rank() >= required.rank()
    }
}

impl fmt::Display for Mechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mechanism {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "pki-cak" => Ok(Mechanism::PkiCak),
            "pki-auth" => Ok(Mechanism::PkiAuth),
            "chuid" => Ok(Mechanism::Chuid),
            _ => Err(ParseError::new(
                "mechanism",
                "expected `pki-cak`, `pki-auth` or `chuid`",
                s,
            )),
        }
    }
}

/// The assurance a tap gives (SP 800-116r1 §6), as the authenticator reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Assurance {
    Low,
    Some,
    VeryHigh,
}

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
str_enum!(Assurance, "assurance", "low" => Assurance::Low, "some" => Assurance::Some, "very-high" => Assurance::VeryHigh);

/// A place with one clock: its doors' schedules run in its IANA time zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Site {
    pub id: SiteId,
    pub name: String,
    /// IANA time zone name, e.g. `America/New_York`.
    pub time_zone: String,
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
    fn card_uuid_forms() {
        let u: CardUuid = "urn:uuid:3a4f9c10-0001-4b6e-8f00-aabbccddeeff"
            .parse()
            .unwrap();
        assert_eq!(u.to_string(), "3a4f9c10-0001-4b6e-8f00-aabbccddeeff");
        let plain: CardUuid = "3a4f9c1000014b6e8f00aabbccddeeff".parse().unwrap();
        assert_eq!(u, plain);
        let e = "3a4f".parse::<CardUuid>().unwrap_err();
        assert!(e.to_string().contains("expected 32 hex digits"), "{e}");
        assert!("zz4f9c1000014b6e8f00aabbccddeeff"
            .parse::<CardUuid>()
            .is_err());
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
