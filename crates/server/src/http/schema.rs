//! The JSON bodies of the API as the OpenAPI document describes them.
//!
//! The entity structs are the request bodies of `POST` (create) and `PUT`
//! (replace): unknown fields are refused, and each names its field when a
//! value is wrong. Answers carry the `access` entities as they serialise,
//! which have exactly these fields (`id` and the enrolment fields filled in
//! by the service), so a body read with `GET` can be sent back with `PUT`.
//! Tests check that every field an answer carries is described here.

use access::jiff::civil::Date;
use access::jiff::Timestamp;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// An error answer: a sentence a person can act on, and the field at fault
/// when there is one.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: String,
    pub field: Option<String>,
}

/// A place with one clock: its doors' schedules run in its time zone.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Site {
    /// Assigned by the service. A replacement may repeat it; it must then
    /// be the id in the path.
    #[serde(default)]
    #[schema(read_only)]
    pub id: Option<i64>,
    /// Raised by every change; answered as the `ETag`, given back in
    /// `If-Match` to change only the version read.
    #[serde(default)]
    #[schema(read_only)]
    pub version: Option<i64>,
    /// Unique among sites.
    pub name: String,
    /// IANA time zone name.
    #[schema(example = "Europe/Paris")]
    pub time_zone: String,
    /// Locked down: no tap is granted at the site's doors and scheduled
    /// unlocks do not apply; only an override unlock opens a door.
    #[serde(default)]
    pub lockdown: bool,
}

/// How a card is (or must be) authenticated: `pki-cak` (card
/// authentication key, no PIN), `pki-auth` (PIV authentication key after
/// the PIN), `chuid` (the signed identifier only; low assurance).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    PkiCak,
    PkiAuth,
    Chuid,
}

/// Anti-passback direction: `in` refuses a cardholder already inside the
/// site, `out` one already outside.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Passback {
    None,
    In,
    Out,
}

/// A door's mode: `normal` opens for a granted tap, `unlocked` holds the
/// lock released (taps are still decided and logged), `locked` opens for
/// nobody.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DoorMode {
    Normal,
    Unlocked,
    Locked,
}

/// What a door does while the site's revocation data or access changes
/// are older than its maximum: `decide` keeps deciding (an event records
/// when it turns stale and when it recovers), `refuse` refuses every tap
/// (`stale-data`), `recent-only` refuses a credential superseded by a
/// newer one of the same cardholder (`stale-superseded`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StalePolicy {
    Decide,
    Refuse,
    RecentOnly,
}

/// A door and the policy attached to it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Door {
    #[serde(default)]
    #[schema(read_only)]
    pub id: Option<i64>,
    /// Raised by every change; answered as the `ETag`, given back in
    /// `If-Match` to change only the version read.
    #[serde(default)]
    #[schema(read_only)]
    pub version: Option<i64>,
    /// The site (by id).
    pub site: i64,
    /// Unique within the site.
    pub name: String,
    /// The weakest mechanism the door accepts.
    #[schema(value_type = Mechanism)]
    pub mechanism: access::Mechanism,
    /// Whether low-assurance taps (CHUID) are accepted; required for a door
    /// whose mechanism is `chuid`.
    #[serde(default)]
    pub allow_low_assurance: bool,
    #[serde(default)]
    #[schema(value_type = Passback)]
    pub passback: access::Passback,
    #[serde(default)]
    #[schema(value_type = DoorMode)]
    pub mode: access::DoorMode,
    /// A schedule (by id) whose windows, in the site's time zone, hold the
    /// door unlocked while its mode is `normal`.
    #[serde(default)]
    pub unlock_schedule: Option<i64>,
    /// With an unlock schedule: unlock at the first granted tap inside a
    /// window rather than at its start.
    #[serde(default)]
    pub first_card_unlock: bool,
    /// The oldest revocation data and access changes (seconds) the door
    /// decides from before `stale_policy` applies; `null`: the site's
    /// `[offline] max_staleness`.
    #[serde(default)]
    pub max_staleness_s: Option<u64>,
    #[serde(default)]
    #[schema(value_type = StalePolicy)]
    pub stale_policy: access::StalePolicy,
}

/// A card reader bound to a door.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Reader {
    #[serde(default)]
    #[schema(read_only)]
    pub id: Option<i64>,
    /// Raised by every change; answered as the `ETag`, given back in
    /// `If-Match` to change only the version read.
    #[serde(default)]
    #[schema(read_only)]
    pub version: Option<i64>,
    /// The door (by id).
    pub door: i64,
    pub name: String,
    /// How the service reaches it: a PC/SC reader name; unique.
    #[schema(example = "Virtual PCD 00 00")]
    pub connection: String,
}

/// Whether a cardholder may use their credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CardholderStatus {
    #[default]
    Active,
    Suspended,
}

/// A person.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Cardholder {
    #[serde(default)]
    #[schema(read_only)]
    pub id: Option<i64>,
    /// Raised by every change; answered as the `ETag`, given back in
    /// `If-Match` to change only the version read.
    #[serde(default)]
    #[schema(read_only)]
    pub version: Option<i64>,
    pub name: String,
    /// `active` when absent.
    #[serde(default)]
    pub status: CardholderStatus,
    /// Why the cardholder is suspended (required then, absent otherwise).
    #[serde(default)]
    pub reason: Option<String>,
    /// First instant access may be granted (inclusive), RFC 3339.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub valid_from: Option<Timestamp>,
    /// Instant access ends (exclusive), RFC 3339.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub valid_until: Option<Timestamp>,
}

/// Whether a credential may be used: `suspended` may be reinstated,
/// `revoked` is permanent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CredentialState {
    Active,
    Suspended,
    Revoked,
}

/// An enrolled card: the identifiers a tap is matched on (at least one).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Credential {
    #[serde(default)]
    #[schema(read_only)]
    pub id: Option<i64>,
    /// Raised by every change; answered as the `ETag`, given back in
    /// `If-Match` to change only the version read.
    #[serde(default)]
    #[schema(read_only)]
    pub version: Option<i64>,
    /// The cardholder (by id).
    pub cardholder: i64,
    /// The card UUID, `urn:uuid:…`, hyphenated, or 32 hex digits.
    #[serde(default)]
    #[schema(value_type = Option<String>, example = "urn:uuid:3bb0a6c4-6d2e-4c8f-9a41-2b9e7d01c5aa")]
    pub card_uuid: Option<access::CardUuid>,
    /// The FASC-N as encoded on the card, 50 hex digits.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub fasc_n: Option<access::FascN>,
    /// SHA-256 of the card authentication certificate (DER), 64 hex digits.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub cert_sha256: Option<access::Sha256>,
    /// SHA-256 of the card authentication key's SubjectPublicKeyInfo.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub spki_sha256: Option<access::Sha256>,
    /// No access from this instant on (the certificate's notAfter).
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Timestamp>,
    /// When it was enrolled (set by the service).
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime, read_only)]
    pub enrolled_at: Option<Timestamp>,
    /// Who enrolled it: the API token's name (set by the service).
    #[serde(default)]
    #[schema(read_only)]
    pub enrolled_by: Option<String>,
    pub state: CredentialState,
    /// Why it is suspended or revoked (required then, absent otherwise).
    #[serde(default)]
    pub reason: Option<String>,
    /// When it was revoked (only for `revoked`).
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub at: Option<Timestamp>,
}

/// Cardholders × doors, open when the schedule is.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Group {
    #[serde(default)]
    #[schema(read_only)]
    pub id: Option<i64>,
    /// Raised by every change; answered as the `ETag`, given back in
    /// `If-Match` to change only the version read.
    #[serde(default)]
    #[schema(read_only)]
    pub version: Option<i64>,
    pub name: String,
    /// The schedule (by id).
    pub schedule: i64,
    /// Door ids.
    #[serde(default)]
    pub doors: Vec<i64>,
    /// Cardholder ids.
    #[serde(default)]
    pub cardholders: Vec<i64>,
}

/// Named weekly windows in the site's time zone, and the windows that
/// apply on holidays instead (none: closed on holidays).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    #[serde(default)]
    #[schema(read_only)]
    pub id: Option<i64>,
    /// Raised by every change; answered as the `ETag`, given back in
    /// `If-Match` to change only the version read.
    #[serde(default)]
    #[schema(read_only)]
    pub version: Option<i64>,
    pub name: String,
    /// `DAYS HH:MM-HH:MM`; a window may cross midnight.
    #[schema(value_type = Vec<String>, example = json!(["mon-fri 07:00-19:00", "sat 22:00-02:00"]))]
    pub windows: Vec<access::Window>,
    /// `HH:MM-HH:MM` ranges open on holidays.
    #[serde(default)]
    #[schema(value_type = Vec<String>, example = json!(["10:00-14:00"]))]
    pub holiday_windows: Vec<access::TimeRange>,
}

/// A day on which schedules use their holiday windows.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Holiday {
    #[serde(default)]
    #[schema(read_only)]
    pub id: Option<i64>,
    /// Raised by every change; answered as the `ETag`, given back in
    /// `If-Match` to change only the version read.
    #[serde(default)]
    #[schema(read_only)]
    pub version: Option<i64>,
    /// The site (by id); absent: every site.
    #[serde(default)]
    pub site: Option<i64>,
    #[schema(value_type = String, format = Date, example = "2026-12-25")]
    pub date: Date,
    pub name: String,
}

macro_rules! list_schema {
    ($($list:ident of $item:ident),+ $(,)?) => {$(
        /// Every entity of the kind.
        #[derive(Debug, ToSchema)]
        pub struct $list {
            pub items: Vec<$item>,
        }
    )+};
}

list_schema!(
    SiteList of Site,
    DoorList of Door,
    ReaderList of Reader,
    CardholderList of Cardholder,
    CredentialList of Credential,
    GroupList of Group,
    ScheduleList of Schedule,
    HolidayList of Holiday,
    TokenList of Token,
);

/// What a token may do: viewers read, operators also command doors, admins
/// also change entities and tokens; a keypad only sends the PINs typed on it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Keypad,
    Viewer,
    Operator,
    Admin,
}

/// An API token, without its secret or hash.
#[derive(Debug, Serialize, ToSchema)]
pub struct Token {
    pub name: String,
    #[schema(value_type = Role)]
    pub role: store::Role,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// The doors a keypad token may send PINs to.
    pub doors: Vec<i64>,
    /// The one reader a keypad token's PINs are for, if bound to one.
    pub reader: Option<i64>,
    /// When the token stops working; `null`: never.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Timestamp>,
    /// When it was last used, to about a minute; `null`: never.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_used_at: Option<Timestamp>,
}

/// The body of `PUT /api/v1/doors/{id}/mode`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ModeCommand {
    #[schema(value_type = DoorMode)]
    pub mode: access::DoorMode,
    /// Why, for the log (at most 1000 bytes).
    #[serde(default)]
    pub reason: Option<String>,
}

/// The answer to a mode command.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModeAnswer {
    pub door: i64,
    #[schema(value_type = DoorMode)]
    pub mode: access::DoorMode,
    /// The door-command event.
    pub event: i64,
}

/// The body of `POST` and `DELETE /api/v1/sites/{id}/lockdown` (optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LockdownCommand {
    /// Why, for the log (at most 1000 bytes).
    #[serde(default)]
    pub reason: Option<String>,
}

/// The answer to a lockdown command.
#[derive(Debug, Serialize, ToSchema)]
pub struct LockdownAnswer {
    pub site: i64,
    /// Whether the site is locked down now.
    pub lockdown: bool,
    /// The admin event.
    pub event: Option<i64>,
}

/// The body of `POST /api/v1/doors/{id}/unlock` (optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UnlockCommand {
    /// Why, for the log (at most 1000 bytes).
    #[serde(default)]
    pub reason: Option<String>,
    /// Release a door in `locked` mode anyway; without it such a door
    /// answers 409. The event records the override.
    #[serde(default, rename = "override")]
    pub override_locked: bool,
}

/// The body of `POST /api/v1/doors/{id}/keypad`.
#[derive(Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeypadEntry {
    /// The PIN typed, 6 to 8 digits.
    #[schema(example = "123456")]
    pub pin: Option<String>,
    /// The reader of the door whose tap the PIN is for (a token bound to a
    /// reader needs none); absent: any reader of the door.
    #[serde(default)]
    pub reader: Option<i64>,
}

/// The answer to a momentary unlock.
#[derive(Debug, Serialize, ToSchema)]
pub struct UnlockAnswer {
    pub door: i64,
    /// The door-command event.
    pub event: i64,
    /// How long the lock is released.
    pub unlock_ms: u64,
}

/// `GET /healthz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: String,
}

/// How long each part of start-up took.
#[derive(Debug, Serialize, ToSchema)]
pub struct StartupTimes {
    pub trust_us: u64,
    pub database_us: u64,
    pub ready_us: u64,
    pub anchors: u64,
    pub credentials: u64,
}

/// `GET /readyz`: `ready` with the start-up times, or `starting` (503).
#[derive(Debug, Serialize, ToSchema)]
pub struct Ready {
    #[schema(example = "ready")]
    pub status: String,
    pub startup: Option<StartupTimes>,
}

/// What an event records.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    Tap,
    Admin,
    DoorCommand,
    /// A reader link's report (OSDP: online, offline, refused, tamper, power).
    Reader,
}

/// The result of a tap.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EventResult {
    Granted,
    Refused,
}

/// A stored event: a tap, an administrative change, a door command or a
/// reader link's report.
#[derive(Debug, Serialize, ToSchema)]
pub struct Event {
    /// Ascending in commit order; the paging cursor.
    pub id: i64,
    #[schema(value_type = String, format = DateTime)]
    pub time: Timestamp,
    pub kind: EventKind,
    pub door: Option<i64>,
    pub reader: Option<i64>,
    pub cardholder: Option<i64>,
    pub credential: Option<i64>,
    pub result: Option<EventResult>,
    /// `granted`, a refusal code, the admin action (e.g. `door.update`) or
    /// the door command (`unlock`, `mode`).
    pub code: Option<String>,
    /// The sentence a person reads.
    pub reason: Option<String>,
    /// The API token (by name) that made a change or command.
    pub actor: Option<String>,
    /// A tap's whole transaction (stage table, identifiers, assurance), or
    /// an admin change (`before` and `after`).
    pub data: Option<serde_json::Value>,
}

/// One page of events and the cursor of the next.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventPage {
    pub events: Vec<Event>,
    /// Pass as `cursor` for the next page; absent at the end.
    pub next: Option<i64>,
}
