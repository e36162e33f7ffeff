//! The service configuration: `pivgate.toml`.
//!
//! Every table refuses unknown keys, and every error names the file, the
//! line and column, the key and what is wrong with it. Relative paths in a
//! configuration file are taken relative to the file's directory; without a
//! file (embedded defaults) relative to the working directory.
//!
//! Where entities live: the database is the one source of truth for sites,
//! doors, readers, cardholders, credentials, groups, schedules and holidays
//! (managed through the API and `pivgate enroll`). The configuration may
//! *seed* a site, its doors, the PC/SC reader bindings and schedules: the seed
//! is written to the database on the first start, when the database holds no
//! site, and is ignored afterwards (a changed seed does not overwrite what was
//! managed through the API since). Server settings (data directory, database,
//! HTTP, trust, revocation, door output) are read from the file on every
//! start.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use access::{Entities, Mechanism, Passback, Window};
use pki::trust::TrustConfig;
use serde::{Deserialize, Serialize};

use crate::limits::{Limits, RemoteLimits};

/// The file name `pivgate init` writes and `pivgate serve` looks for.
pub const CONFIG_FILE: &str = "pivgate.toml";
/// The data directory when none is configured.
pub const DEFAULT_DATA_DIR: &str = "pivgate-data";
/// The HTTP listen address when none is configured.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Holds the SQLite database (`pivgate.db`) and downloaded CRLs.
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// `postgres://…` to keep entities and events in PostgreSQL instead of
    /// the SQLite file in the data directory.
    #[serde(default)]
    pub database_url: Option<String>,
    #[serde(default)]
    pub http: HttpConfig,
    /// Trust anchors, intermediates, CRLs and revocation policy. Without
    /// anchors every tap is refused (nothing can be validated).
    #[serde(default)]
    pub trust: Option<TrustConfig>,
    /// Keeping revocation data current: the stale-data policy, CRL
    /// refresh timing and the periodic re-validation of credentials.
    #[serde(default)]
    pub revocation: RevocationSettings,
    #[serde(default)]
    pub output: OutputConfig,
    #[serde(default)]
    pub keypad: KeypadConfig,
    /// OSDP readers on serial lines (see [`crate::osdp`]).
    #[serde(default, skip_serializing_if = "OsdpConfig::is_empty")]
    pub osdp: OsdpConfig,
    /// Remote readers over mutual TLS (see [`crate::remote`]).
    #[serde(default, skip_serializing_if = "RemoteConfig::is_off")]
    pub remote: RemoteConfig,
    /// Exporting and pruning old events while serving (see
    /// [`crate::retention`]); off when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<RetentionConfig>,
    /// Events sent to SIEMs over syslog and to webhooks (see
    /// [`crate::export`]).
    #[serde(default, skip_serializing_if = "ExportConfig::is_empty")]
    pub export: ExportConfig,
    /// Interlock groups (mantraps): doors of a group open one at a time
    /// (see [`crate::interlock`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interlocks: Vec<InterlockConfig>,
    /// Written to an empty database on the first start.
    #[serde(default)]
    pub seed: Option<Seed>,
    /// How old the site's revocation and access data may be before a door
    /// applies its stale-data policy (see [`access::freshness`]).
    #[serde(default, skip_serializing_if = "OfflineConfig::is_default")]
    pub offline: OfflineConfig,
    /// A central: serves its sites' links (see [`crate::sync`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sites: Option<crate::sync::settings::SitesConfig>,
    /// A site: follows a central (see [`crate::sync`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub central: Option<crate::sync::settings::CentralConfig>,
}

/// `[offline]`: the maximum age of the revocation data and of the access
/// changes from the central for doors that set none of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OfflineConfig {
    /// `"24h"`, `"90m"`, `"7d"`…; absent: a door without its own maximum
    /// is never stale.
    #[serde(default, with = "opt_span", skip_serializing_if = "Option::is_none")]
    pub max_staleness: Option<Duration>,
}

impl OfflineConfig {
    fn is_default(&self) -> bool {
        *self == OfflineConfig::default()
    }

    /// The site's default maximum, in seconds.
    pub fn default_max_staleness_s(&self) -> Option<u64> {
        self.max_staleness.map(|d| d.as_secs())
    }
}

/// An optional duration written as a number and a unit (`"24h"`).
mod opt_span {
    use serde::{Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => pki::discover::span::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        pki::discover::span::deserialize(d).map(Some)
    }
}

/// `[retention]`: events older than `days` are exported to `export_dir`
/// (one gzip JSON Lines file per UTC day, with `MANIFEST.sha256`) and then
/// deleted, once a day at `at` (local time) or every `interval_secs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// Keep this many days of events in the database (1 to 36500).
    pub days: u32,
    /// Where the daily files and the manifest go; `archive` in the data
    /// directory when absent.
    #[serde(default)]
    pub export_dir: Option<PathBuf>,
    /// The local time of day of the daily run, `HH:MM` (03:00 when neither
    /// this nor `interval_secs` is set).
    #[serde(default)]
    pub at: Option<String>,
    /// Run every this many seconds instead of daily.
    #[serde(default)]
    pub interval_secs: Option<u64>,
}

impl RetentionConfig {
    /// When runs happen; the problem names the key.
    pub fn schedule(&self) -> Result<crate::retention::Schedule, (&'static str, String)> {
        use crate::retention::Schedule;
        match (&self.at, self.interval_secs) {
            (Some(_), Some(_)) => Err((
                "retention.interval_secs",
                "set either `at` (a daily run) or `interval_secs`, not both".into(),
            )),
            (_, Some(secs)) => {
                if (1..=31_536_000).contains(&secs) {
                    Ok(Schedule::Every(Duration::from_secs(secs)))
                } else {
                    Err((
                        "retention.interval_secs",
                        format!("{secs} is out of range (1 to 31536000)"),
                    ))
                }
            }
            (at, None) => {
                let at = at.as_deref().unwrap_or("03:00");
                let t = parse_time_of_day(at).ok_or((
                    "retention.at",
                    format!("`{at}` is not a time of day `HH:MM` (00:00 to 23:59)"),
                ))?;
                Ok(Schedule::Daily(t))
            }
        }
    }
}

/// `HH:MM`, 00:00 to 23:59.
fn parse_time_of_day(s: &str) -> Option<access::jiff::civil::Time> {
    let (h, m) = s.split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    let (h, m): (i8, i8) = (h.parse().ok()?, m.parse().ok()?);
    access::jiff::civil::Time::new(h, m, 0, 0).ok()
}

fn default_data_dir() -> PathBuf {
    PathBuf::from(DEFAULT_DATA_DIR)
}

/// The HTTP API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// Address and port; without TLS only a loopback address is accepted.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// PEM certificate chain for TLS (with `tls_key`).
    #[serde(default)]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for TLS (with `tls_cert`).
    #[serde(default)]
    pub tls_key: Option<PathBuf>,
    /// The limits on the API's clients ([`Limits`], which documents each
    /// and its default): event streams (`/api/v1/events/stream`) open at
    /// once, at most.
    #[serde(default = "default_max_streams")]
    pub max_streams: usize,
    /// Event streams one token may hold open at once.
    #[serde(default = "default_max_streams_per_token")]
    pub max_streams_per_token: usize,
    /// A client must send its request head within this.
    #[serde(default = "default_header_read_timeout_ms")]
    pub header_read_timeout_ms: u64,
    /// Once its head is in, a request's body must arrive within this.
    #[serde(default = "default_body_read_timeout_ms")]
    pub body_read_timeout_ms: u64,
    /// A connection with no request in flight is closed after this.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// Connections served at once.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Connections kept for `/healthz` and `/readyz` beyond
    /// `max_connections`.
    #[serde(default = "default_reserved_connections")]
    pub reserved_connections: usize,
    /// At shutdown, requests in flight get this long to finish.
    #[serde(default = "default_shutdown_timeout_ms")]
    pub shutdown_timeout_ms: u64,
}

fn default_max_streams() -> usize {
    Limits::default().max_streams
}
fn default_max_streams_per_token() -> usize {
    Limits::default().max_streams_per_token
}
fn default_header_read_timeout_ms() -> u64 {
    Limits::default().header_read_timeout.as_millis() as u64
}
fn default_body_read_timeout_ms() -> u64 {
    Limits::default().body_read_timeout.as_millis() as u64
}
fn default_idle_timeout_ms() -> u64 {
    Limits::default().idle_timeout.as_millis() as u64
}
fn default_max_connections() -> usize {
    Limits::default().max_connections
}
fn default_reserved_connections() -> usize {
    Limits::default().reserved_connections
}
fn default_shutdown_timeout_ms() -> u64 {
    Limits::default().shutdown_timeout.as_millis() as u64
}

fn default_listen() -> SocketAddr {
    DEFAULT_LISTEN.parse().expect("constant address")
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: default_listen(),
            tls_cert: None,
            tls_key: None,
            max_streams: default_max_streams(),
            max_streams_per_token: default_max_streams_per_token(),
            header_read_timeout_ms: default_header_read_timeout_ms(),
            body_read_timeout_ms: default_body_read_timeout_ms(),
            idle_timeout_ms: default_idle_timeout_ms(),
            max_connections: default_max_connections(),
            reserved_connections: default_reserved_connections(),
            shutdown_timeout_ms: default_shutdown_timeout_ms(),
        }
    }
}

impl HttpConfig {
    /// Whether TLS is configured.
    pub fn tls(&self) -> bool {
        self.tls_cert.is_some()
    }

    /// The limits on the API's clients, as configured.
    pub fn limits(&self) -> Limits {
        Limits {
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
            body_read_timeout: Duration::from_millis(self.body_read_timeout_ms),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            max_connections: self.max_connections,
            reserved_connections: self.reserved_connections,
            max_streams: self.max_streams,
            max_streams_per_token: self.max_streams_per_token,
            shutdown_timeout: Duration::from_millis(self.shutdown_timeout_ms),
        }
    }
}

/// What a door does when the CRL it needs is past its nextUpdate and no
/// newer one could be obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StalePolicy {
    /// Refuse the card (`revocation-stale`): fail closed.
    Refuse,
    /// Accept the stale CRL for `stale_grace_hours` after its nextUpdate.
    Grace,
}

/// `[revocation]`: keeping revocation data current.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevocationSettings {
    /// `refuse` or `grace`; unset: as `trust.revocation.grace_secs` says
    /// (0, the default, refuses).
    #[serde(default)]
    pub stale: Option<StalePolicy>,
    /// With `stale = "grace"`: hours a CRL is still accepted after its
    /// nextUpdate (1 to 720).
    #[serde(default)]
    pub stale_grace_hours: Option<u64>,
    /// A downloaded CRL is fetched again once this fraction of the time
    /// from its download to its nextUpdate has passed (0.1 to 0.95).
    #[serde(default = "default_refresh_at")]
    pub refresh_at: f64,
    /// Shortest time between two downloads of one CRL, seconds: refreshes
    /// never come faster than this, whatever nextUpdate says.
    #[serde(default = "default_min_refresh_secs")]
    pub min_refresh_secs: u64,
    /// Hours between two re-validations of every enrolled credential
    /// against the current trust store and CRLs (NIST SP 800-116 §7.4:
    /// at least daily).
    #[serde(default = "default_revalidate_hours")]
    pub revalidate_hours: u64,
}

fn default_refresh_at() -> f64 {
    0.5
}

fn default_min_refresh_secs() -> u64 {
    60
}

fn default_revalidate_hours() -> u64 {
    24
}

impl Default for RevocationSettings {
    fn default() -> Self {
        RevocationSettings {
            stale: None,
            stale_grace_hours: None,
            refresh_at: default_refresh_at(),
            min_refresh_secs: default_min_refresh_secs(),
            revalidate_hours: default_revalidate_hours(),
        }
    }
}

/// The door output (the lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputConfig {
    /// How long a granted tap or a momentary unlock releases the lock, ms.
    #[serde(default = "default_unlock_ms")]
    pub unlock_ms: u64,
}

fn default_unlock_ms() -> u64 {
    5000
}

impl Default for OutputConfig {
    fn default() -> Self {
        OutputConfig {
            unlock_ms: default_unlock_ms(),
        }
    }
}

/// PIN entry at card + PIN doors (see [`crate::keypad`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeypadConfig {
    /// How long a tap at a card + PIN door waits for the PIN, and how long
    /// a PIN typed before the card is kept, ms.
    #[serde(default = "default_pin_timeout_ms")]
    pub timeout_ms: u64,
    /// How long a PIN typed before the card is kept for the next tap at
    /// that reader (door), ms.
    #[serde(default = "default_pin_first_ms")]
    pub pin_first_ms: u64,
    /// Wrong PINs from one keypad token within `wrong_window_ms` after
    /// which its entries are refused (429) for `cooldown_ms`.
    #[serde(default = "default_max_wrong")]
    pub max_wrong: u32,
    #[serde(default = "default_wrong_window_ms")]
    pub wrong_window_ms: u64,
    #[serde(default = "default_cooldown_ms")]
    pub cooldown_ms: u64,
}

fn default_pin_timeout_ms() -> u64 {
    crate::keypad::DEFAULT_TIMEOUT.as_millis() as u64
}
fn default_pin_first_ms() -> u64 {
    crate::keypad::DEFAULT_PIN_FIRST.as_millis() as u64
}
fn default_max_wrong() -> u32 {
    crate::keypad::DEFAULT_MAX_WRONG
}
fn default_wrong_window_ms() -> u64 {
    crate::keypad::DEFAULT_WRONG_WINDOW.as_millis() as u64
}
fn default_cooldown_ms() -> u64 {
    crate::keypad::DEFAULT_COOLDOWN.as_millis() as u64
}

impl Default for KeypadConfig {
    fn default() -> Self {
        KeypadConfig {
            timeout_ms: default_pin_timeout_ms(),
            pin_first_ms: default_pin_first_ms(),
            max_wrong: default_max_wrong(),
            wrong_window_ms: default_wrong_window_ms(),
            cooldown_ms: default_cooldown_ms(),
        }
    }
}

impl KeypadConfig {
    /// The settings of the service's [`crate::keypad::Keypads`].
    pub fn settings(&self) -> crate::keypad::Settings {
        let ms = std::time::Duration::from_millis;
        crate::keypad::Settings {
            timeout: ms(self.timeout_ms),
            pin_first: ms(self.pin_first_ms),
            max_wrong: self.max_wrong,
            wrong_window: ms(self.wrong_window_ms),
            cooldown: ms(self.cooldown_ms),
        }
    }
}

/// `[osdp]`: OSDP v2.2 readers on serial lines, the service being the
/// control panel. A reader is bound to a door like a PC/SC reader, by a
/// reader record (seed or API) whose connection is
/// [`OsdpPort::connection`]: `osdp:DEVICE#ADDRESS`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsdpConfig {
    #[serde(default)]
    pub ports: Vec<OsdpPort>,
}

impl OsdpConfig {
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }
}

/// The baud rates OSDP v2.2 names ([`links::osdp::BAUD_RATES`]).
pub const OSDP_BAUD_RATES: [u32; 6] = links::osdp::BAUD_RATES;

/// `[[osdp.ports]]`: one serial line (an RS-485 bus) and the readers on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsdpPort {
    /// The serial device, e.g. `/dev/ttyUSB0`.
    pub device: PathBuf,
    /// 9600, 19200, 38400, 57600, 115200 or 230400.
    #[serde(default = "default_osdp_baud")]
    pub baud: u32,
    #[serde(default)]
    pub readers: Vec<OsdpReader>,
    /// I/O modules: devices on the bus that read a door's inputs and
    /// read no cards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io: Vec<OsdpIo>,
}

/// `[[osdp.ports.io]]`: an I/O module (PD) on the bus wired to a door's
/// position switch, request-to-exit and tamper (`[osdp.ports.io.inputs]`,
/// as a reader's `[osdp.ports.readers.door]`). The lock stays with the
/// door's reader (`lock_output`) or the service's door output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsdpIo {
    /// The module's address on the bus, 0 to 126.
    pub address: u8,
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    #[serde(default)]
    pub install_mode: bool,
    #[serde(default = "default_true")]
    pub secure: bool,
    /// The door (by name) whose inputs these are.
    pub door: String,
    pub inputs: DoorInputs,
}

impl OsdpIo {
    /// The module as a device on the bus: a reader without a lock output
    /// whose inputs are `inputs`.
    pub fn device(&self) -> OsdpReader {
        OsdpReader {
            address: self.address,
            key_file: self.key_file.clone(),
            install_mode: self.install_mode,
            secure: self.secure,
            lock_output: None,
            unlock_ms: None,
            door: Some(self.inputs.clone()),
        }
    }
}

fn default_osdp_baud() -> u32 {
    9600
}

impl OsdpPort {
    /// The connection string of the reader at `address` on this port, as
    /// reader records name it.
    pub fn connection(&self, address: u8) -> String {
        format!("osdp:{}#{address}", self.device.display())
    }
}

/// `[[osdp.ports.readers]]`: one reader (PD) on the bus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsdpReader {
    /// The reader's address on the bus, 0 to 126.
    pub address: u8,
    /// The secure channel base key (SCBK): 32 hex digits, in a file of
    /// mode 0600 (or stricter) owned by the service's user.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The reader still has the default key (SCBK-D): connect with it,
    /// install a freshly generated key with `osdp_KEYSET` and write it to
    /// `key_file`; once `key_file` exists it is used instead.
    #[serde(default)]
    pub install_mode: bool,
    /// The secure channel; `false` is a plaintext link (card data, keypad
    /// and lock commands readable and forgeable on the wire).
    #[serde(default = "default_true")]
    pub secure: bool,
    /// The reader's output wired to the lock relay (`osdp_OUT`); without
    /// it the door's lock is driven by the service's door output.
    #[serde(default)]
    pub lock_output: Option<u8>,
    /// How long `lock_output` releases the lock, ms (default
    /// `output.unlock_ms`); sent in 100 ms units.
    #[serde(default)]
    pub unlock_ms: Option<u64>,
    /// The inputs of the reader's door wired to this reader
    /// (`[osdp.ports.readers.door]`): position switch, request-to-exit,
    /// tamper, reported with `osdp_ISTATR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub door: Option<DoorInputs>,
}

/// `[osdp.ports.readers.door]`: the inputs of the door the reader is bound
/// to, by input number on the reader, and the door's alarm times. See
/// [`crate::alarm`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DoorInputs {
    /// The door position switch (normally closed unless said).
    #[serde(default)]
    pub contact: Option<InputWiring>,
    /// The request-to-exit button or sensor (normally open unless said).
    #[serde(default)]
    pub request_to_exit: Option<InputWiring>,
    /// The tamper switch (normally open unless said).
    #[serde(default)]
    pub tamper: Option<InputWiring>,
    /// What a request-to-exit does: `release` the lock, or `shunt` (only
    /// allow the opening, for a door with a mechanical exit).
    #[serde(default = "default_exit")]
    pub exit: String,
    /// How long the door may stay open after an allowed opening before
    /// the held-open alarm, ms.
    #[serde(default = "default_held_open_ms")]
    pub held_open_ms: u64,
    /// How long before the held-open alarm the reader beeps and flashes
    /// (`osdp_BUZ`, `osdp_LED`), ms; 0 for none.
    #[serde(default = "default_prealarm_ms")]
    pub prealarm_ms: u64,
}

fn default_exit() -> String {
    "release".into()
}

fn default_held_open_ms() -> u64 {
    30_000
}

fn default_prealarm_ms() -> u64 {
    5_000
}

/// One input: its number on the reader, its wiring and its debounce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputWiring {
    pub input: u8,
    /// `closed` or `open`: the contact's state when the door is closed,
    /// the button released, the enclosure shut.
    #[serde(default)]
    pub normally: Option<String>,
    /// A change counts once it has held this long, ms.
    #[serde(default)]
    pub debounce_ms: u64,
}

fn check_door_inputs(d: &DoorInputs) -> Result<(), (String, String)> {
    let wired = [
        ("contact", &d.contact),
        ("request_to_exit", &d.request_to_exit),
        ("tamper", &d.tamper),
    ];
    for (i, (name, w)) in wired.iter().enumerate() {
        let Some(w) = w else { continue };
        if let Some(n) = &w.normally {
            if n != "closed" && n != "open" {
                return Err((
                    format!("{name}.normally"),
                    format!("`{n}` is not a wiring (expected `closed` or `open`)"),
                ));
            }
        }
        if w.debounce_ms > 10_000 {
            return Err((
                format!("{name}.debounce_ms"),
                format!("{} is out of range (0 to 10000)", w.debounce_ms),
            ));
        }
        if let Some((other, _)) = wired[..i]
            .iter()
            .find(|(_, o)| o.as_ref().is_some_and(|o| o.input == w.input))
        {
            return Err((
                format!("{name}.input"),
                format!("input {} is also the {other} input", w.input),
            ));
        }
    }
    if d.exit != "release" && d.exit != "shunt" {
        return Err((
            "exit".into(),
            format!(
                "`{}` is not an exit mode (expected `release` or `shunt`)",
                d.exit
            ),
        ));
    }
    if d.held_open_ms == 0 {
        return Err((
            "held_open_ms".into(),
            "0: the door could never be opened without an alarm".into(),
        ));
    }
    if d.prealarm_ms >= d.held_open_ms {
        return Err((
            "prealarm_ms".into(),
            format!(
                "{} is not shorter than held_open_ms ({})",
                d.prealarm_ms, d.held_open_ms
            ),
        ));
    }
    Ok(())
}

impl DoorInputs {
    /// The door's setup for [`crate::alarm`]; `release_window` is how long
    /// a request-to-exit allows the opening.
    pub fn setup(&self, release_window: std::time::Duration) -> crate::alarm::DoorSetup {
        use crate::alarm::{ExitMode, Wiring};
        use std::time::Duration;
        let wiring = |w: &Option<InputWiring>, closed: bool| {
            w.as_ref().map(|w| Wiring {
                normally_closed: w.normally.as_deref().map_or(closed, |n| n == "closed"),
                debounce: Duration::from_millis(w.debounce_ms),
            })
        };
        crate::alarm::DoorSetup {
            contact: wiring(&self.contact, true),
            request_to_exit: wiring(&self.request_to_exit, false),
            tamper: wiring(&self.tamper, false),
            exit: if self.exit == "shunt" {
                ExitMode::Shunt
            } else {
                ExitMode::Release
            },
            release_window,
            held_open: Duration::from_millis(self.held_open_ms),
            prealarm: Duration::from_millis(self.prealarm_ms),
        }
    }

    /// The input numbers: contact, request-to-exit, tamper.
    pub fn inputs(&self) -> Vec<(crate::alarm::InputRole, u8)> {
        use crate::alarm::InputRole;
        [
            (InputRole::Contact, &self.contact),
            (InputRole::RequestToExit, &self.request_to_exit),
            (InputRole::Tamper, &self.tamper),
        ]
        .into_iter()
        .filter_map(|(r, w)| w.as_ref().map(|w| (r, w.input)))
        .collect()
    }
}

fn default_true() -> bool {
    true
}

/// `[remote]`: remote readers (`pivgate reader connect`) over mutual TLS
/// 1.3. Off unless `listen` is set. A reader is bound to a door by a reader
/// record whose connection is `remote:CN`, CN being the subject common name
/// of the reader's certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteConfig {
    /// Address and port readers connect to (any address: the link is always
    /// TLS with client certificates).
    #[serde(default)]
    pub listen: Option<SocketAddr>,
    /// The service's certificate (PEM, serverAuth; the issuing CA
    /// certificates may follow), e.g. from `pivgate pki issue-device --server`.
    #[serde(default)]
    pub cert: Option<PathBuf>,
    /// Its private key (PEM), in a file of mode 0600 or stricter owned by
    /// the service's user.
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// Trust anchors for reader certificates (files or directories of PEM
    /// or DER certificates); may differ from the cards' `trust.anchors`.
    #[serde(default)]
    pub device_ca: Vec<PathBuf>,
    /// CRL files for reader certificates, beside the service's own
    /// revocation data (`trust.crls` and downloads), which they follow.
    #[serde(default)]
    pub crls: Vec<PathBuf>,
    /// How long a challenge handed to a reader ahead of a tap stays valid.
    #[serde(default = "default_challenge_ttl_ms")]
    pub challenge_ttl_ms: u64,
    /// How often each side pings.
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_ms: u64,
    /// A reader silent this long is cut off (more than `heartbeat_ms`).
    #[serde(default = "default_silence_ms")]
    pub silence_ms: u64,
    /// The TLS handshake and the hello must finish within this.
    #[serde(default = "default_handshake_ms")]
    pub handshake_ms: u64,
    /// How long a tap waits for the reader's answer to one request.
    #[serde(default = "default_answer_timeout_ms")]
    pub answer_timeout_ms: u64,
    /// Refused connections are recorded as one `remote-refused` event per
    /// source address and reason per window of this length, with their
    /// count (the metrics count every one).
    #[serde(default = "default_refusal_window_ms")]
    pub refusal_window_ms: u64,
    /// Connections open at once on the remote-reader port
    /// ([`RemoteLimits`]); more are closed at once.
    #[serde(default = "default_remote_max_connections")]
    pub max_connections: usize,
    /// Connections open at once from one IP address (one /64 for IPv6).
    #[serde(default = "default_remote_max_connections_per_address")]
    pub max_connections_per_address: usize,
}

fn default_remote_max_connections() -> usize {
    RemoteLimits::default().max_connections
}
fn default_remote_max_connections_per_address() -> usize {
    RemoteLimits::default().max_connections_per_address
}

fn default_refusal_window_ms() -> u64 {
    10_000
}

fn default_challenge_ttl_ms() -> u64 {
    60_000
}
fn default_heartbeat_ms() -> u64 {
    5_000
}
fn default_silence_ms() -> u64 {
    15_000
}
fn default_handshake_ms() -> u64 {
    RemoteLimits::default().handshake.as_millis() as u64
}
fn default_answer_timeout_ms() -> u64 {
    5_000
}

impl Default for RemoteConfig {
    fn default() -> Self {
        RemoteConfig {
            listen: None,
            cert: None,
            key: None,
            device_ca: Vec::new(),
            crls: Vec::new(),
            challenge_ttl_ms: default_challenge_ttl_ms(),
            heartbeat_ms: default_heartbeat_ms(),
            silence_ms: default_silence_ms(),
            handshake_ms: default_handshake_ms(),
            answer_timeout_ms: default_answer_timeout_ms(),
            refusal_window_ms: default_refusal_window_ms(),
            max_connections: default_remote_max_connections(),
            max_connections_per_address: default_remote_max_connections_per_address(),
        }
    }
}

impl RemoteConfig {
    /// The default: no remote readers.
    pub fn is_off(&self) -> bool {
        *self == RemoteConfig::default()
    }

    /// The remote-reader port's limits on its peers, as configured.
    pub fn limits(&self) -> RemoteLimits {
        RemoteLimits {
            max_connections: self.max_connections,
            max_connections_per_address: self.max_connections_per_address,
            handshake: Duration::from_millis(self.handshake_ms),
        }
    }
}

/// `[export]`: where events are sent besides the database, each sink
/// delivering every event at least once, in id order (see
/// [`crate::export`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportConfig {
    #[serde(default)]
    pub syslog: Vec<SyslogExport>,
    #[serde(default)]
    pub webhook: Vec<WebhookExport>,
}

impl ExportConfig {
    /// No sink configured.
    pub fn is_empty(&self) -> bool {
        self.syslog.is_empty() && self.webhook.is_empty()
    }
}

/// How a syslog sink reaches its receiver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyslogTransport {
    /// Plaintext TCP (RFC 6587 octet counting): loopback or a trusted
    /// network only.
    Tcp,
    /// TLS (RFC 5425), the receiver's certificate checked against
    /// `ca_file`.
    #[default]
    Tls,
}

/// What a syslog message carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyslogFormat {
    /// RFC 5424 with the event's fields as structured data.
    #[default]
    Rfc5424,
    /// An ArcSight Common Event Format record as the RFC 5424 message.
    Cef,
}

impl SyslogFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            SyslogFormat::Rfc5424 => "rfc5424",
            SyslogFormat::Cef => "cef",
        }
    }
}

/// `[[export.syslog]]`: one syslog receiver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyslogExport {
    /// The receiver, `HOST:PORT` (an IPv6 address in brackets).
    pub address: String,
    /// `tls` (the default) or `tcp`.
    #[serde(default)]
    pub transport: SyslogTransport,
    /// `rfc5424` (the default) or `cef`.
    #[serde(default)]
    pub format: SyslogFormat,
    /// The CA certificate(s) (PEM) the receiver's certificate chains to;
    /// required with `transport = "tls"`.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// The name the receiver's certificate must carry (default: the host
    /// of `address`).
    #[serde(default)]
    pub server_name: Option<String>,
}

/// `[[export.webhook]]`: one HTTP endpoint receiving each event as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookExport {
    /// `https://…`, or `http://…` to a loopback address.
    pub url: String,
    /// The HMAC-SHA256 key signing each body (at least 16 bytes; a
    /// trailing newline is not part of it), in a file of mode 0600 or
    /// stricter owned by the service's user.
    pub secret_file: PathBuf,
    /// The CA certificate(s) (PEM) an `https://` receiver's certificate
    /// chains to; required with `https://`.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// One delivery attempt (connecting, sending, the answer) must finish
    /// within this.
    #[serde(default = "default_webhook_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_webhook_timeout_ms() -> u64 {
    10_000
}

/// `[[interlocks]]`: doors (by name) of which only one may be open or
/// released at a time, e.g. the two doors of a vestibule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterlockConfig {
    pub name: String,
    /// Names of doors (at least two).
    pub doors: Vec<String>,
}

impl Config {
    /// Each group has a name of its own and at least two distinct doors.
    /// Door names are resolved against the access data when a door
    /// releases (doors are managed through the API): one that names no
    /// door is reported at start-up and leaves the rest of its group in
    /// force.
    fn check_interlocks(&self) -> Result<(), (String, String)> {
        for (i, g) in self.interlocks.iter().enumerate() {
            let key = |k: &str| format!("interlocks[{i}].{k}");
            if g.name.trim().is_empty() {
                return Err((key("name"), "empty: name the interlock group".into()));
            }
            if self.interlocks[..i].iter().any(|o| o.name == g.name) {
                return Err((
                    key("name"),
                    format!("`{}` names another interlock group too", g.name),
                ));
            }
            for (j, d) in g.doors.iter().enumerate() {
                if d.trim().is_empty() {
                    return Err((key(&format!("doors[{j}]")), "empty: name a door".into()));
                }
                if g.doors[..j].contains(d) {
                    return Err((
                        key(&format!("doors[{j}]")),
                        format!("door `{d}` is listed twice"),
                    ));
                }
            }
            if g.doors.len() < 2 {
                return Err((
                    key("doors"),
                    "an interlock group needs at least two doors".into(),
                ));
            }
        }
        Ok(())
    }
}

/// A site, its doors, reader bindings and schedules for an empty database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seed {
    pub site: SeedSite,
    #[serde(default)]
    pub doors: Vec<SeedDoor>,
    /// PC/SC reader name → door name.
    #[serde(default)]
    pub readers: BTreeMap<String, String>,
    #[serde(default)]
    pub schedules: Vec<SeedSchedule>,
    /// Access groups (cardholders join them at enrollment: `--group`).
    #[serde(default)]
    pub groups: Vec<SeedGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedGroup {
    pub name: String,
    /// The name of one of `seed.schedules`.
    pub schedule: String,
    /// Names of `seed.doors`.
    pub doors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedSite {
    pub name: String,
    /// IANA time zone, e.g. `Europe/Berlin`.
    pub time_zone: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedDoor {
    pub name: String,
    /// `pki-cak` (default), `pki-auth` (card + PIN) or `chuid`.
    #[serde(default = "default_mechanism")]
    pub mechanism: Mechanism,
    /// Required for a `chuid` door: CHUID is clonable (low assurance).
    #[serde(default)]
    pub allow_low_assurance: bool,
    #[serde(default)]
    pub passback: Passback,
    /// A seed schedule (by name) whose windows hold the door unlocked.
    #[serde(default)]
    pub unlock_schedule: Option<String>,
    /// With `unlock_schedule`: unlock only at the first granted tap of
    /// each window.
    #[serde(default)]
    pub first_card_unlock: bool,
    /// The oldest data the door decides from (`"1h"`); absent: the
    /// `[offline]` default.
    #[serde(default, with = "opt_span", skip_serializing_if = "Option::is_none")]
    pub max_staleness: Option<Duration>,
    /// `decide` (default), `refuse` or `recent-only`, beyond the maximum.
    #[serde(default)]
    pub stale_policy: access::StalePolicy,
}

fn default_mechanism() -> Mechanism {
    Mechanism::PkiCak
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedSchedule {
    pub name: String,
    /// Weekly windows, e.g. `mon-fri 07:00-19:00`.
    pub windows: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: default_data_dir(),
            database_url: None,
            http: HttpConfig::default(),
            trust: None,
            revocation: RevocationSettings::default(),
            output: OutputConfig::default(),
            keypad: KeypadConfig::default(),
            osdp: OsdpConfig::default(),
            remote: RemoteConfig::default(),
            retention: None,
            export: ExportConfig::default(),
            interlocks: Vec::new(),
            seed: None,
            offline: OfflineConfig::default(),
            sites: None,
            central: None,
        }
    }
}

/// Why a configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {path}: {error}", path = path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The file is not valid TOML, or a key is unknown or has the wrong type.
    #[error("{}", parse_message(path, *line, *column, key.as_deref(), message))]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        /// The dotted key the error is at, when it could be told.
        key: Option<String>,
        message: String,
    },
    /// A value that parsed but cannot be used.
    #[error("{path}: `{key}`: {problem}", path = path.display())]
    Invalid {
        path: PathBuf,
        key: String,
        problem: String,
    },
}

fn parse_message(
    path: &Path,
    line: usize,
    column: usize,
    key: Option<&str>,
    message: &str,
) -> String {
    match key {
        Some(k) => format!("{}:{line}:{column}: `{k}`: {message}", path.display()),
        None => format!("{}:{line}:{column}: {message}", path.display()),
    }
}

impl ConfigError {
    /// The key the error names, if any.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Parse { key, .. } => key.as_deref(),
            ConfigError::Invalid { key, .. } => Some(key),
            ConfigError::Read { .. } => None,
        }
    }
}

impl Config {
    /// Reads and checks `path`; relative paths in it are resolved against
    /// the file's directory.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_owned(),
            error,
        })?;
        let mut c = Config::parse(&text, path)?;
        let base = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        c.resolve_paths(base);
        c.check(path)?;
        Ok(c)
    }

    /// Parses `text` (`origin` names it in errors) without resolving paths
    /// or checking values.
    pub fn parse(text: &str, origin: &Path) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| {
            let (line, column, key) = match e.span() {
                Some(span) => locate(text, span.start),
                None => (1, 1, None),
            };
            ConfigError::Parse {
                path: origin.to_owned(),
                line,
                column,
                key,
                message: e.message().trim().to_string(),
            }
        })
    }

    /// Where retention exports go: `retention.export_dir`, else `archive`
    /// in the data directory.
    pub fn retention_export_dir(&self) -> Option<PathBuf> {
        let r = self.retention.as_ref()?;
        Some(
            r.export_dir
                .clone()
                .unwrap_or_else(|| self.data_dir.join("archive")),
        )
    }

    /// The embedded defaults, checked.
    pub fn defaults() -> Config {
        Config::default()
    }

    fn resolve_paths(&mut self, base: &Path) {
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        fix(&mut self.data_dir);
        if let Some(p) = &mut self.http.tls_cert {
            fix(p);
        }
        if let Some(p) = &mut self.http.tls_key {
            fix(p);
        }
        if let Some(t) = &mut self.trust {
            t.anchors.iter_mut().for_each(fix);
            t.intermediates.iter_mut().for_each(fix);
            t.crls.iter_mut().for_each(fix);
            if let Some(p) = t.discovery.as_mut().and_then(|d| d.https_roots.as_mut()) {
                fix(p);
            }
        }
        if let Some(p) = &mut self.remote.cert {
            fix(p);
        }
        if let Some(p) = &mut self.remote.key {
            fix(p);
        }
        self.remote.device_ca.iter_mut().for_each(fix);
        if let Some(p) = self.retention.as_mut().and_then(|r| r.export_dir.as_mut()) {
            fix(p);
        }
        self.remote.crls.iter_mut().for_each(fix);
        crate::sync::settings::resolve_paths(self.sites.as_mut(), self.central.as_mut(), base);
        for s in &mut self.export.syslog {
            if let Some(p) = &mut s.ca_file {
                fix(p);
            }
        }
        for w in &mut self.export.webhook {
            fix(&mut w.secret_file);
            if let Some(p) = &mut w.ca_file {
                fix(p);
            }
        }
        for p in &mut self.osdp.ports {
            for r in &mut p.readers {
                if let Some(k) = &mut r.key_file {
                    fix(k);
                }
            }
            for r in &mut p.io {
                if let Some(k) = &mut r.key_file {
                    fix(k);
                }
            }
        }
    }

    /// Checks what types alone cannot: the listen address against TLS, the
    /// database URL, the seed's names, time zone and windows.
    pub fn check(&self, origin: &Path) -> Result<(), ConfigError> {
        let invalid = |key: &str, problem: String| ConfigError::Invalid {
            path: origin.to_owned(),
            key: key.to_string(),
            problem,
        };
        match (&self.http.tls_cert, &self.http.tls_key) {
            (Some(_), None) => {
                return Err(invalid(
                    "http.tls_key",
                    "missing: `http.tls_cert` is set, so the private key is needed too".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "http.tls_cert",
                    "missing: `http.tls_key` is set, so the certificate is needed too".into(),
                ))
            }
            _ => {}
        }
        if !self.http.tls() && !self.http.listen.ip().is_loopback() {
            return Err(invalid(
                "http.listen",
                format!(
                    "{} is not a loopback address; without TLS (`http.tls_cert` and `http.tls_key`) the API listens on loopback only, e.g. 127.0.0.1:{}",
                    self.http.listen,
                    self.http.listen.port()
                ),
            ));
        }
        if let Some(url) = &self.database_url {
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                return Err(invalid(
                    "database_url",
                    format!("`{url}` is not a postgres:// URL (leave it out for SQLite in the data directory)"),
                ));
            }
        }
        if let Some(t) = &self.trust {
            if t.anchors.is_empty() {
                return Err(invalid(
                    "trust.anchors",
                    "empty: name at least one file or directory of trust anchor certificates"
                        .into(),
                ));
            }
        }
        self.check_revocation()
            .map_err(|(key, problem)| invalid(key, problem))?;
        if self.output.unlock_ms == 0 || self.output.unlock_ms > 3_600_000 {
            return Err(invalid(
                "output.unlock_ms",
                format!("{} is out of range (1 to 3600000)", self.output.unlock_ms),
            ));
        }
        let h = &self.http;
        let limits: [(&'static str, u64, u64, u64); 7] = [
            (
                "http.max_streams_per_token",
                h.max_streams_per_token as u64,
                1,
                10_000,
            ),
            (
                "http.header_read_timeout_ms",
                h.header_read_timeout_ms,
                100,
                600_000,
            ),
            (
                "http.body_read_timeout_ms",
                h.body_read_timeout_ms,
                100,
                600_000,
            ),
            ("http.idle_timeout_ms", h.idle_timeout_ms, 100, 3_600_000),
            ("http.max_connections", h.max_connections as u64, 1, 100_000),
            (
                "http.reserved_connections",
                h.reserved_connections as u64,
                1,
                10_000,
            ),
            (
                "http.shutdown_timeout_ms",
                h.shutdown_timeout_ms,
                0,
                600_000,
            ),
        ];
        for (key, v, lo, hi) in limits {
            if v < lo || v > hi {
                return Err(invalid(key, format!("{v} is out of range ({lo} to {hi})")));
            }
        }
        if self.http.max_streams == 0 || self.http.max_streams > 10_000 {
            return Err(invalid(
                "http.max_streams",
                format!("{} is out of range (1 to 10000)", self.http.max_streams),
            ));
        }
        if self.keypad.timeout_ms < 1000 || self.keypad.timeout_ms > 300_000 {
            return Err(invalid(
                "keypad.timeout_ms",
                format!(
                    "{} is out of range (1000 to 300000)",
                    self.keypad.timeout_ms
                ),
            ));
        }
        let k = &self.keypad;
        for (key, v, lo, hi) in [
            ("keypad.pin_first_ms", k.pin_first_ms, 100, 60_000),
            ("keypad.max_wrong", u64::from(k.max_wrong), 1, 100),
            (
                "keypad.wrong_window_ms",
                k.wrong_window_ms,
                1000,
                86_400_000,
            ),
            ("keypad.cooldown_ms", k.cooldown_ms, 1000, 86_400_000),
        ] {
            if !(lo..=hi).contains(&v) {
                return Err(invalid(key, format!("{v} is out of range ({lo} to {hi})")));
            }
        }
        self.check_osdp()
            .map_err(|(key, problem)| invalid(&key, problem))?;
        if let Some(r) = &self.retention {
            if !(1..=36_500).contains(&r.days) {
                return Err(invalid(
                    "retention.days",
                    format!("{} is out of range (1 to 36500)", r.days),
                ));
            }
            r.schedule()
                .map_err(|(key, problem)| invalid(key, problem))?;
        }
        self.check_remote()
            .map_err(|(key, problem)| invalid(key, problem))?;
        crate::sync::settings::check(
            self.sites.as_ref(),
            self.central.as_ref(),
            self.database_url.as_deref(),
        )
        .map_err(|(key, problem)| invalid(key, problem))?;
        self.check_export()
            .map_err(|(key, problem)| invalid(&key, problem))?;
        self.check_interlocks()
            .map_err(|(key, problem)| invalid(&key, problem))?;
        if let Some(seed) = &self.seed {
            seed.entities()
                .map_err(|(key, problem)| invalid(&key, problem))?;
        }
        Ok(())
    }

    fn check_osdp(&self) -> Result<(), (String, String)> {
        let ports = &self.osdp.ports;
        for (i, p) in ports.iter().enumerate() {
            let key = |k: &str| format!("osdp.ports[{i}].{k}");
            if p.device.as_os_str().is_empty() {
                return Err((
                    key("device"),
                    "empty: name the serial device, e.g. /dev/ttyUSB0".into(),
                ));
            }
            if ports[..i].iter().any(|o| o.device == p.device) {
                return Err((
                    key("device"),
                    format!(
                        "{} is configured twice: put every reader of one bus under one port",
                        p.device.display()
                    ),
                ));
            }
            if let Err(e) = links::osdp::check_baud(p.baud) {
                return Err((key("baud"), e));
            }
            if p.readers.is_empty() && p.io.is_empty() {
                return Err((key("readers"), "empty: add the readers on this bus ([[osdp.ports.readers]] with their address)".into()));
            }
            for (j, r) in p.readers.iter().enumerate() {
                let key = |k: &str| format!("osdp.ports[{i}].readers[{j}].{k}");
                if r.address > 126 {
                    return Err((
                        key("address"),
                        format!(
                            "{} is out of range (0 to 126; 127 is the broadcast address)",
                            r.address
                        ),
                    ));
                }
                if p.readers[..j].iter().any(|o| o.address == r.address) {
                    return Err((
                        key("address"),
                        format!(
                            "address {} is used twice on {}",
                            r.address,
                            p.device.display()
                        ),
                    ));
                }
                match (r.secure, &r.key_file, r.install_mode) {
                    (true, None, true) => {
                        return Err((key("key_file"), "missing: install mode writes the new secure channel key there".into()))
                    }
                    (true, None, false) => {
                        return Err((key("key_file"), "missing: a secure reader needs its secure channel base key (32 hex digits in a file of mode 0600), or `install_mode = true` to install one, or `secure = false` for a plaintext link".into()))
                    }
                    (false, Some(_), _) | (false, _, true) => {
                        return Err((key("secure"), "false, but a key or install mode is configured: remove `secure = false` or the key settings".into()))
                    }
                    _ => {}
                }
                if let Some(d) = &r.door {
                    check_door_inputs(d).map_err(|(k, e)| (key(&format!("door.{k}")), e))?;
                }
                if let Some(ms) = r.unlock_ms {
                    if ms < 100 || ms > u64::from(u16::MAX) * 100 {
                        return Err((
                            key("unlock_ms"),
                            format!("{ms} is out of range (100 to 6553500)"),
                        ));
                    }
                }
                if r.unlock_ms.is_some() && r.lock_output.is_none() {
                    return Err((
                        key("unlock_ms"),
                        "applies only with `lock_output` (the reader output wired to the lock)"
                            .into(),
                    ));
                }
            }
            for (j, m) in p.io.iter().enumerate() {
                let key = |k: &str| format!("osdp.ports[{i}].io[{j}].{k}");
                if m.address > 126 {
                    return Err((
                        key("address"),
                        format!("{} is out of range (0 to 126)", m.address),
                    ));
                }
                let taken = p.readers.iter().any(|o| o.address == m.address)
                    || p.io[..j].iter().any(|o| o.address == m.address);
                if taken {
                    return Err((
                        key("address"),
                        format!(
                            "address {} is used twice on {}",
                            m.address,
                            p.device.display()
                        ),
                    ));
                }
                match (m.secure, &m.key_file, m.install_mode) {
                    (true, None, _) => {
                        return Err((key("key_file"), "missing: a secure module needs its secure channel base key, or `install_mode = true`, or `secure = false`".into()))
                    }
                    (false, Some(_), _) | (false, _, true) => {
                        return Err((key("secure"), "false, but a key or install mode is configured".into()))
                    }
                    _ => {}
                }
                if m.door.trim().is_empty() {
                    return Err((
                        key("door"),
                        "empty: name the door whose inputs these are".into(),
                    ));
                }
                check_door_inputs(&m.inputs).map_err(|(k, e)| (key(&format!("inputs.{k}")), e))?;
            }
        }
        Ok(())
    }
}

/// A syslog receiver's `HOST:PORT`, split.
pub fn split_host_port(address: &str) -> Option<(&str, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    match bare {
        Some(v6) if v6.parse::<std::net::Ipv6Addr>().is_ok() => Some((host, port)),
        Some(_) => None,
        None if host.is_empty() || host.contains([':', '/', '@', ' ']) => None,
        None => Some((host, port)),
    }
}

/// Whether `host` (a URL's host, IPv6 in brackets) is this machine.
fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl Config {
    fn check_export(&self) -> Result<(), (String, String)> {
        for (i, s) in self.export.syslog.iter().enumerate() {
            let key = |k: &str| format!("export.syslog[{i}].{k}");
            if split_host_port(&s.address).is_none() {
                return Err((
                    key("address"),
                    format!(
                        "`{}` is not HOST:PORT (e.g. \"siem.example.net:6514\", an IPv6 address in brackets)",
                        s.address
                    ),
                ));
            }
            if self.export.syslog[..i]
                .iter()
                .any(|o| o.address == s.address && o.format == s.format)
            {
                return Err((
                    key("address"),
                    format!(
                        "`{}` is configured twice with format `{}`",
                        s.address,
                        s.format.as_str()
                    ),
                ));
            }
            match s.transport {
                SyslogTransport::Tls if s.ca_file.is_none() => {
                    return Err((
                        key("ca_file"),
                        "missing: TLS (the default transport) needs the CA certificate the receiver's certificate chains to, or `transport = \"tcp\"` for plaintext".into(),
                    ))
                }
                SyslogTransport::Tcp if s.ca_file.is_some() || s.server_name.is_some() => {
                    let k = if s.ca_file.is_some() { "ca_file" } else { "server_name" };
                    return Err((
                        key(k),
                        "applies only with `transport = \"tls\"`".into(),
                    ));
                }
                _ => {}
            }
        }
        for (i, w) in self.export.webhook.iter().enumerate() {
            let key = |k: &str| format!("export.webhook[{i}].{k}");
            let uri: hyper::Uri = w
                .url
                .parse()
                .map_err(|e| (key("url"), format!("`{}` is not a URL: {e}", w.url)))?;
            let https = match uri.scheme_str() {
                Some("https") => true,
                Some("http") => false,
                _ => {
                    return Err((
                        key("url"),
                        format!(
                            "`{}`: only https:// (or http:// to a loopback address) is supported",
                            w.url
                        ),
                    ))
                }
            };
            let Some(authority) = uri.authority() else {
                return Err((key("url"), format!("`{}` names no host", w.url)));
            };
            if authority.as_str().contains('@') {
                return Err((
                    key("url"),
                    "credentials in the URL are refused: the body is signed with `secret_file` instead".into(),
                ));
            }
            if !https && !is_loopback_host(authority.host()) {
                return Err((
                    key("url"),
                    format!("`{}` is plaintext HTTP to another machine: use https:// (events name people and doors)", w.url),
                ));
            }
            match (https, &w.ca_file) {
                (true, None) => {
                    return Err((
                        key("ca_file"),
                        "missing: https:// needs the CA certificate the receiver's certificate chains to".into(),
                    ))
                }
                (false, Some(_)) => {
                    return Err((key("ca_file"), "applies only to an https:// URL".into()))
                }
                _ => {}
            }
            if self.export.webhook[..i].iter().any(|o| o.url == w.url) {
                return Err((key("url"), format!("`{}` is configured twice", w.url)));
            }
            if !(100..=600_000).contains(&w.timeout_ms) {
                return Err((
                    key("timeout_ms"),
                    format!("{} is out of range (100 to 600000)", w.timeout_ms),
                ));
            }
        }
        Ok(())
    }

    fn check_remote(&self) -> Result<(), (&'static str, String)> {
        let r = &self.remote;
        if r.listen.is_none() {
            if !r.is_off() {
                return Err((
                    "remote.listen",
                    "missing: the other `[remote]` settings take effect only with the address readers connect to, e.g. \"0.0.0.0:7443\"".into(),
                ));
            }
            return Ok(());
        }
        if r.cert.is_none() {
            return Err((
                "remote.cert",
                "missing: the service's certificate for remote readers (`pivgate pki issue-device --server`)".into(),
            ));
        }
        if r.key.is_none() {
            return Err((
                "remote.key",
                "missing: the private key of `remote.cert`".into(),
            ));
        }
        if r.device_ca.is_empty() {
            return Err((
                "remote.device_ca",
                "empty: name the CA certificate(s) reader certificates are issued by".into(),
            ));
        }
        let ranges: [(&'static str, u64, u64, u64); 8] = [
            (
                "remote.max_connections",
                r.max_connections as u64,
                1,
                100_000,
            ),
            (
                "remote.max_connections_per_address",
                r.max_connections_per_address as u64,
                1,
                100_000,
            ),
            (
                "remote.challenge_ttl_ms",
                r.challenge_ttl_ms,
                100,
                3_600_000,
            ),
            ("remote.heartbeat_ms", r.heartbeat_ms, 100, 600_000),
            ("remote.silence_ms", r.silence_ms, 300, 3_600_000),
            ("remote.handshake_ms", r.handshake_ms, 100, 600_000),
            (
                "remote.answer_timeout_ms",
                r.answer_timeout_ms,
                100,
                600_000,
            ),
            (
                "remote.refusal_window_ms",
                r.refusal_window_ms,
                10,
                3_600_000,
            ),
        ];
        for (key, v, lo, hi) in ranges {
            if v < lo || v > hi {
                return Err((key, format!("{v} is out of range ({lo} to {hi})")));
            }
        }
        if r.silence_ms <= r.heartbeat_ms {
            return Err((
                "remote.silence_ms",
                format!(
                    "{} is not longer than `remote.heartbeat_ms` ({}): a reader would be cut off between two pings",
                    r.silence_ms, r.heartbeat_ms
                ),
            ));
        }
        Ok(())
    }

    fn check_revocation(&self) -> Result<(), (&'static str, String)> {
        let r = &self.revocation;
        let trust_grace = self.trust.as_ref().map_or(0, |t| t.revocation.grace_secs);
        match (r.stale, r.stale_grace_hours) {
            (Some(StalePolicy::Refuse), Some(_)) | (None, Some(_)) => {
                return Err((
                    "revocation.stale_grace_hours",
                    "applies only with `revocation.stale = \"grace\"`".into(),
                ))
            }
            (Some(StalePolicy::Grace), None) => {
                return Err((
                    "revocation.stale_grace_hours",
                    "missing: `revocation.stale = \"grace\"` needs the number of hours a stale CRL is still accepted".into(),
                ))
            }
            (Some(StalePolicy::Grace), Some(h)) if h == 0 || h > 720 => {
                return Err((
                    "revocation.stale_grace_hours",
                    format!("{h} is out of range (1 to 720)"),
                ))
            }
            (Some(_), _) if trust_grace != 0 => {
                return Err((
                    "trust.revocation.grace_secs",
                    format!(
                        "{trust_grace} conflicts with `revocation.stale`: set the stale-data policy in one place"
                    ),
                ))
            }
            _ => {}
        }
        if let Some(t) = &self.trust {
            use pki::trust::{RevocationCheck, RevocationSourceConfig};
            if t.revocation.source != RevocationSourceConfig::Crl
                && t.revocation.mode != RevocationCheck::Off
                && t.ocsp.is_none()
            {
                return Err((
                    "trust.ocsp",
                    "missing: `trust.revocation.source` names OCSP, so the responders must be asked (add `[trust.ocsp]`, `{}` for the defaults)".into(),
                ));
            }
        }
        if let Some(d) = self.trust.as_ref().and_then(|t| t.discovery.as_ref()) {
            let secs = d.refresh.as_secs();
            if !(60..=7 * 86_400).contains(&secs) {
                return Err((
                    "trust.discovery.refresh",
                    format!("{secs} s is out of range (1m to 7d)"),
                ));
            }
        }
        if !(0.1..=0.95).contains(&r.refresh_at) {
            return Err((
                "revocation.refresh_at",
                format!("{} is out of range (0.1 to 0.95)", r.refresh_at),
            ));
        }
        if r.min_refresh_secs == 0 || r.min_refresh_secs > 86_400 {
            return Err((
                "revocation.min_refresh_secs",
                format!("{} is out of range (1 to 86400)", r.min_refresh_secs),
            ));
        }
        if r.revalidate_hours == 0 || r.revalidate_hours > 24 {
            return Err((
                "revocation.revalidate_hours",
                format!(
                    "{} is out of range (1 to 24: credentials are re-validated at least daily)",
                    r.revalidate_hours
                ),
            ));
        }
        Ok(())
    }

    /// How revocation is checked at the doors and at enrollment: the mode of
    /// `trust.revocation`, and the grace period the stale-data policy gives.
    pub fn revocation_policy(&self) -> pki::validate::RevocationPolicy {
        let mut p: pki::validate::RevocationPolicy = self
            .trust
            .as_ref()
            .map(|t| t.revocation.into())
            .unwrap_or_default();
        match self.revocation.stale {
            Some(StalePolicy::Refuse) => p.grace = std::time::Duration::ZERO,
            Some(StalePolicy::Grace) => {
                p.grace = std::time::Duration::from_secs(
                    self.revocation.stale_grace_hours.unwrap_or(0) * 3600,
                )
            }
            None => {}
        }
        p
    }
}

impl Seed {
    /// The seed as entities with ids from 1, checked: the time zone exists,
    /// door names are unique, every reader names a door, windows parse.
    /// On error: the key and the problem.
    pub fn entities(&self) -> Result<Entities, (String, String)> {
        use access::{Door, DoorId, Reader, ReaderId, Schedule, ScheduleId, Site, SiteId};
        access::time_zone(&self.site.time_zone)
            .map_err(|e| ("seed.site.time_zone".to_string(), e))?;
        let site = Site {
            id: SiteId(1),
            name: self.site.name.clone(),
            time_zone: self.site.time_zone.clone(),
            lockdown: false,
        };
        let mut doors = Vec::new();
        for (i, d) in self.doors.iter().enumerate() {
            if d.name.trim().is_empty() {
                return Err((format!("seed.doors[{i}].name"), "empty".into()));
            }
            if self.doors[..i].iter().any(|o| o.name == d.name) {
                return Err((
                    format!("seed.doors[{i}].name"),
                    format!("door `{}` is named twice", d.name),
                ));
            }
            if d.mechanism == Mechanism::Chuid && !d.allow_low_assurance {
                return Err((
                    format!("seed.doors[{i}].allow_low_assurance"),
                    format!(
                        "door `{}` requires `chuid`, which is clonable (low assurance): set allow_low_assurance = true to accept that",
                        d.name
                    ),
                ));
            }
            doors.push(Door {
                id: DoorId(i as i64 + 1),
                site: site.id,
                name: d.name.clone(),
                mechanism: d.mechanism,
                allow_low_assurance: d.allow_low_assurance,
                passback: d.passback,
                mode: Default::default(),
                unlock_schedule: None,
                first_card_unlock: false,
                max_staleness_s: d.max_staleness.map(|m| m.as_secs()),
                stale_policy: d.stale_policy,
            });
        }
        let mut readers = Vec::new();
        for (name, door) in &self.readers {
            let Some(d) = doors.iter().find(|d| &d.name == door) else {
                return Err((
                    format!("seed.readers.\"{name}\""),
                    format!(
                        "door `{door}` is not among seed.doors ({})",
                        names(self.doors.iter().map(|d| d.name.as_str()))
                    ),
                ));
            };
            readers.push(Reader {
                id: ReaderId(readers.len() as i64 + 1),
                door: d.id,
                name: name.clone(),
                connection: name.clone(),
            });
        }
        let mut schedules = Vec::new();
        for (i, s) in self.schedules.iter().enumerate() {
            let mut windows = Vec::new();
            for (j, w) in s.windows.iter().enumerate() {
                let w: Window = w.parse().map_err(|e: access::ParseError| {
                    (format!("seed.schedules[{i}].windows[{j}]"), e.to_string())
                })?;
                windows.push(w);
            }
            schedules.push(Schedule {
                id: ScheduleId(i as i64 + 1),
                name: s.name.clone(),
                windows,
                holiday_windows: Vec::new(),
            });
        }
        for (i, d) in self.doors.iter().enumerate() {
            let key = |field: &str| format!("seed.doors[{i}].{field}");
            match &d.unlock_schedule {
                Some(name) => {
                    let Some(s) = schedules.iter().find(|s| &s.name == name) else {
                        return Err((
                            key("unlock_schedule"),
                            format!(
                                "schedule `{name}` is not among seed.schedules ({})",
                                names(self.schedules.iter().map(|s| s.name.as_str()))
                            ),
                        ));
                    };
                    doors[i].unlock_schedule = Some(s.id);
                    doors[i].first_card_unlock = d.first_card_unlock;
                }
                None if d.first_card_unlock => {
                    return Err((
                        key("first_card_unlock"),
                        "first-card unlock needs an unlock_schedule".into(),
                    ))
                }
                None => {}
            }
        }
        let mut groups = Vec::new();
        for (i, g) in self.groups.iter().enumerate() {
            if self.groups[..i].iter().any(|o| o.name == g.name) {
                return Err((
                    format!("seed.groups[{i}].name"),
                    format!("group `{}` is named twice", g.name),
                ));
            }
            let Some(s) = schedules.iter().find(|s| s.name == g.schedule) else {
                return Err((
                    format!("seed.groups[{i}].schedule"),
                    format!(
                        "schedule `{}` is not among seed.schedules ({})",
                        g.schedule,
                        names(self.schedules.iter().map(|s| s.name.as_str()))
                    ),
                ));
            };
            let mut door_ids = Vec::new();
            for (j, name) in g.doors.iter().enumerate() {
                let Some(d) = doors.iter().find(|d| &d.name == name) else {
                    return Err((
                        format!("seed.groups[{i}].doors[{j}]"),
                        format!(
                            "door `{name}` is not among seed.doors ({})",
                            names(self.doors.iter().map(|d| d.name.as_str()))
                        ),
                    ));
                };
                door_ids.push(d.id);
            }
            groups.push(access::AccessGroup {
                id: access::GroupId(i as i64 + 1),
                name: g.name.clone(),
                schedule: s.id,
                doors: door_ids,
                cardholders: Vec::new(),
            });
        }
        let e = Entities {
            sites: vec![site],
            doors,
            readers,
            schedules,
            groups,
            ..Entities::default()
        };
        access::AccessSnapshot::build(e.clone())
            .map_err(|e| ("seed".to_string(), e.to_string()))?;
        Ok(e)
    }
}

fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<String> = it.map(|n| format!("`{n}`")).collect();
    if v.is_empty() {
        "there are none".into()
    } else {
        v.join(", ")
    }
}

/// Line and column (1-based) of byte `offset` in `text`, and the dotted key
/// the position belongs to: the table header in effect and the key written
/// on that line.
fn locate(text: &str, offset: usize) -> (usize, usize, Option<String>) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = text[line_start..offset].chars().count() + 1;
    let mut table: Option<String> = None;
    for l in text[..line_start].lines() {
        let t = l.trim();
        if let Some(h) = t.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            table = Some(h.trim().to_string());
        } else if let Some(h) = t.strip_prefix('[').and_then(|r| r.split(']').next()) {
            table = Some(h.trim().to_string());
        }
    }
    let this_line = text[line_start..].lines().next().unwrap_or("");
    let t = this_line.trim();
    let key = if t.starts_with('[') {
        t.trim_start_matches('[')
            .split(']')
            .next()
            .map(|h| h.trim().to_string())
    } else {
        t.split_once('=').map(|(k, _)| {
            let k = k.trim().to_string();
            match &table {
                Some(tb) => format!("{tb}.{k}"),
                None => k,
            }
        })
    };
    (line, column, key.filter(|k| !k.is_empty()))
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match toml::to_string(self) {
            Ok(s) => f.write_str(&s),
            Err(_) => Err(fmt::Error),
        }
    }
}

/// The commented configuration `pivgate init` writes: a test PKI under
/// `pki/`, SQLite in `pivgate-data/`, one site with a PKI-CAK front door
/// on the virtual reader and a card + PIN server room.
pub fn init_template(reader: &str, time_zone: &str) -> String {
    format!(
        r#"# pivgate door service configuration (`pivgate serve --config pivgate.toml`).
# Unknown keys are refused. Relative paths are relative to this file.

# SQLite database (pivgate.db) and downloaded CRLs live here.
data_dir = "pivgate-data"
# Keep entities and events in PostgreSQL instead:
# database_url = "postgres://pivgate@localhost/pivgate"

[http]
# Without TLS the API listens on a loopback address only.
listen = "127.0.0.1:8080"
# tls_cert = "tls/cert.pem"
# tls_key = "tls/key.pem"
# Limits on the API's clients (defaults shown):
# Event streams (the dashboard's live view, /api/v1/events/stream) open at
# once, in all and per token.
# max_streams = 256
# max_streams_per_token = 4
# A client must send its request head within this, or is disconnected.
# header_read_timeout_ms = 10000
# Then the whole request body within this (else 408 and disconnected).
# body_read_timeout_ms = 30000
# A kept-alive connection with no request in flight is closed after this.
# idle_timeout_ms = 60000
# Connections served at once, and kept beyond that for /healthz and /readyz.
# max_connections = 512
# reserved_connections = 16
# At shutdown, requests in flight get this long; then they are cut.
# shutdown_timeout_ms = 5000

# Trust: the test PKI written next to this file by `pivgate init`.
# Replace with your PIV issuers' roots (PEM, DER, .p7b or directories).
[trust]
anchors = ["pki/root.pem"]
intermediates = ["pki/intermediate.pem"]
crls = ["pki/root.crl.pem", "pki/intermediate.crl.pem"]
# The certificate policies the FIPS 201 profiles accept: "production"
# (id-fpki-common-*, the default) or "test" (the Federal PKI's test arc, as
# issued by `pivgate pki init --policy-set test`).
# policy_set = "production"
# What a trust anchor certificate contributes: "constrained" (default: its
# validity, CA status, critical extensions, name constraints, path length and
# policies apply below it, RFC 5937) or "bare" (only its name and key).
# anchor_mode = "constrained"
# Accept trust anchors outside their validity period.
# allow_expired_anchors = false
# "strict" (default): refuse certificates and CRLs that break a MUST of the
# RFC 5280 profile (each with its own code); "lenient": RFC 5280 path
# processing only, for a known non-conforming issuer.
# profile = "strict"
# Discover missing intermediates at enrollment and in the background over the
# certificates' authorityInfoAccess caIssuers and the CAs' subjectInfoAccess
# caRepository URIs (http:// or https://; never during a tap). Absent: never.
# [trust.discovery]
# timeout_ms = 5000
# max_fetches = 16
# How often enrolled cards with no path, or with discovered certificates
# about to reach the end of their cached lifetime, are discovered again.
# refresh = "6h"
# Roots an https:// server's certificate must chain to (default: the
# system's, /etc/ssl/certs).
# https_roots = "https-roots.pem"

[trust.revocation]
# require (default): refuse when CRLs are missing or stale; best-effort; off.
mode = "require"
# Where the status comes from: "crl" (default), "ocsp", "either" (OCSP
# first, the CRLs when no usable answer is held) or "both".
# source = "either"

# Ask the OCSP responders (each certificate's authorityInfoAccess, or
# responder_url) in the background about the enrolled cards and the CAs
# above them, again before each answer's nextUpdate; taps use the answers
# held and never wait on the network. Needed when `source` names OCSP.
# [trust.ocsp]
# timeout_ms = 3000
# nonce = "prefer"        # or "require", "off"
# responder_url = "http://ocsp.example.gov/"

# Download CRLs from the http:// distribution points of the anchors,
# intermediates and enrolled cards in the background (refreshed before
# their nextUpdate, kept in <data_dir>/crls/ so a restart needs no network).
# Without this table only the `crls` files above are used.
# [trust.fetch]
# timeout_ms = 5000
# retry_after_secs = 30

[revocation]
# What a door does when a CRL is past its nextUpdate and no newer one could
# be downloaded: "refuse" (fail closed, refusal `revocation-stale`) or
# "grace" (accept it for stale_grace_hours more).
stale = "refuse"
# stale = "grace"
# stale_grace_hours = 24
# A CRL is downloaded again once this fraction of the time between its
# download and its nextUpdate has passed, never more often than
# min_refresh_secs.
refresh_at = 0.5
min_refresh_secs = 60
# Every enrolled credential is validated again against the current trust
# and CRLs this often (at most 24: NIST SP 800-116 asks for daily); one
# found revoked or expired is suspended, with an event saying why.
revalidate_hours = 24

# [offline]
# The oldest revocation data (the least recently confirmed CRL or OCSP
# answer in force) and access changes from a central a door decides from
# before its stale_policy applies: "decide" (default: keep deciding; an
# event records the door turning stale and recovering), "refuse"
# (`stale-data`) or "recent-only" (only each cardholder's newest credential;
# `stale-superseded`). A door's own max_staleness overrides this; unset:
# doors without their own are never stale.
# max_staleness = "24h"

[output]
# How long a granted tap or a momentary unlock releases the lock.
unlock_ms = 5000

[keypad]
# Card + PIN doors whose reader has no PIN pad take the PIN from a keypad at
# the door (POST /api/v1/doors/ID/keypad with a token made by
# `pivgate token create --role keypad --door ID`, which can send PINs to
# that door only and do nothing else): how long a tap waits for the PIN.
timeout_ms = 20000
# A PIN typed before the card goes to the next tap at that reader (door)
# within this many ms, to no later one.
pin_first_ms = 5000
# After max_wrong wrong PINs from one keypad token within wrong_window_ms,
# its entries are refused (429) for cooldown_ms; each is an event.
max_wrong = 3
wrong_window_ms = 300000
cooldown_ms = 300000

# OSDP v2.2 readers on a serial line (RS-485 bus), this service being the
# control panel. Bind each to a door like a PC/SC reader, with the
# connection "osdp:DEVICE#ADDRESS" (below in [seed.readers], or through the
# API). A reader with transparent smart-card access (osdp_XWR) has the card
# authenticated by this service itself (PKI-CAK through the reader, which is
# never trusted); card data alone (osdp_RAW/osdp_FMT) is refused at every
# door. Reader online/offline, secure channel failures, tamper and power are
# events; its keypad (osdp_KEYPAD, digits then #) is the PIN source of card +
# PIN doors; grants and refusals show on its LED and buzzer.
# [[osdp.ports]]
# device = "/dev/ttyUSB0"
# baud = 9600              # 9600, 19200, 38400, 57600, 115200 or 230400
# [[osdp.ports.readers]]
# address = 1              # 0 to 126, unique on the port
# # The secure channel base key: 32 hex digits in a file of mode 0600 owned
# # by the service's user (start-up refuses anything else).
# key_file = "osdp/front.key"
# # A reader still on the default key (SCBK-D): install a freshly generated
# # key (osdp_KEYSET) and write it to key_file; later starts use the file.
# # install_mode = true
# # secure = false         # plaintext link: only with a warning, never by default
# # The reader output wired to the lock relay (osdp_OUT), and its pulse.
# lock_output = 0
# unlock_ms = 5000
# # The door's inputs wired to this reader (osdp_ISTATR): position switch,
# # request-to-exit and tamper by input number; `normally` is the contact's
# # state with the door shut (contact: closed, others: open by default).
# # Opening without a grant, unlock or exit request is a forced alarm;
# # open past held_open_ms a held-open alarm, the reader beeping from
# # prealarm_ms before; closing after a grant relocks at once.
# [osdp.ports.readers.door]
# contact = {{ input = 0, normally = "closed", debounce_ms = 50 }}
# request_to_exit = {{ input = 1 }}
# tamper = {{ input = 2 }}
# exit = "release"          # or "shunt": exit allowed, lock not released
# held_open_ms = 30000
# prealarm_ms = 5000
# # An I/O module on the same bus reading another door's inputs (no cards):
# [[osdp.ports.io]]
# address = 5
# key_file = "osdp/io5.key"
# door = "Back"
# [osdp.ports.io.inputs]
# contact = {{ input = 0 }}
# request_to_exit = {{ input = 1 }}

# Interlock groups (mantraps): doors, by name, that open one at a time. A
# door of a group is not released (tap, request-to-exit) while another is
# open (its position switch) or released (a pulse, or held unlocked); a door
# with no position switch counts as closed unless released. A refused tap is
# recorded with code `interlock`, naming the other door.
# [[interlocks]]
# name = "vestibule"
# doors = ["Vestibule outer", "Vestibule inner"]

# Remote readers (`pivgate reader connect` at the door) over TLS 1.3 with
# client certificates. Bind each to a door with the connection "remote:CN",
# CN being its certificate's subject common name (below in [seed.readers],
# or through the API); a reader whose name is bound to no reader, or whose
# certificate is unknown, expired or revoked, is refused with an event.
# Issue the certificates with `pivgate pki issue-device` (a real site uses
# its own CA). The reader certificates' revocation follows `crls` and this
# service's own CRLs (trust.crls and downloads).
# [remote]
# listen = "0.0.0.0:7443"
# cert = "remote/service.pem"      # pivgate pki issue-device --server
# key = "remote/service.key.pem"   # mode 0600, owned by the service's user
# device_ca = ["pki/root.pem"]     # anchors for reader certificates
# crls = []
# challenge_ttl_ms = 60000         # a challenge handed out ahead of a tap
# heartbeat_ms = 5000
# silence_ms = 15000               # a silent reader is cut off
# handshake_ms = 10000
# answer_timeout_ms = 5000
# refusal_window_ms = 10000        # refused connections: one event per address and reason per window
# max_connections = 512            # open at once (handshaking or online); more are closed at once
# max_connections_per_address = 64 # open at once from one IP address (IPv6: one /64)

# Events older than `days` are exported to gzip JSON Lines (one file per
# UTC day, with MANIFEST.sha256 for `sha256sum -c`) and then deleted, by the
# running service, a few hundred a transaction so taps never wait long.
# Off when absent (`pivgate prune` does the same by hand).
# [retention]
# days = 365
# export_dir = "pivgate-data/archive"   # the default
# at = "03:00"                          # local time, daily (the default)
# interval_secs = 3600                  # or: every this many seconds
# Events sent to SIEMs, each at least once and in order, resuming after a
# restart or an outage where the receiver stopped (see the README, "Send
# events to a SIEM"). Syslog: RFC 5424 with the event's fields as
# structured data, or CEF; TLS unless `transport = "tcp"`.
# [[export.syslog]]
# address = "siem.example.net:6514"
# transport = "tls"                # or "tcp" (plaintext)
# format = "rfc5424"               # or "cef"
# ca_file = "siem-ca.pem"          # the receiver's CA (TLS only)
# Webhooks: each event POSTed as JSON, signed with HMAC-SHA256
# (`X-Pivgate-Signature: sha256=<hex>`), `X-Pivgate-Event-Id` to drop duplicates.
# [[export.webhook]]
# url = "https://hooks.example.net/pivgate"
# secret_file = "webhook.key"      # mode 0600, at least 16 bytes
# ca_file = "hooks-ca.pem"         # the receiver's CA (https only)
# timeout_ms = 10000

# Written to the database on the first start only; afterwards manage
# sites, doors and readers through the API.
[seed.site]
name = "Main site"
time_zone = "{time_zone}"

[[seed.doors]]
name = "Front door"
mechanism = "pki-cak"     # card authentication key, no PIN

[[seed.doors]]
name = "Server room"
mechanism = "pki-auth"    # card + PIN

[[seed.schedules]]
name = "always"
windows = ["mon-sun 00:00-24:00"]

[[seed.schedules]]
name = "weekdays 07-19"
windows = ["mon-fri 07:00-19:00"]

# Enroll a card into a group: pivgate enroll --reader R --cardholder NAME --group staff
[[seed.groups]]
name = "staff"
schedule = "always"
doors = ["Front door", "Server room"]

[[seed.groups]]
name = "day shift"
schedule = "weekdays 07-19"
doors = ["Front door"]

# PC/SC reader name (or "osdp:DEVICE#ADDRESS") = door name
[seed.readers]
"{reader}" = "Front door"
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let c = Config::parse(text, Path::new("t.toml"))?;
        c.check(Path::new("t.toml"))?;
        Ok(c)
    }

    #[test]
    fn defaults_without_a_file() {
        let c = parse("").unwrap();
        assert_eq!(c, Config::defaults());
        assert_eq!(c.data_dir, PathBuf::from("pivgate-data"));
        assert_eq!(c.http.listen.to_string(), "127.0.0.1:8080");
        assert!(c.database_url.is_none() && c.trust.is_none() && c.seed.is_none());
    }

    #[test]
    fn the_init_template_parses_and_seeds() {
        let c = parse(&init_template("Virtual PCD 00 00", "Europe/Berlin")).unwrap();
        let t = c.trust.as_ref().unwrap();
        assert_eq!(t.anchors, [PathBuf::from("pki/root.pem")]);
        let e = c.seed.as_ref().unwrap().entities().unwrap();
        assert_eq!(e.doors.len(), 2);
        assert_eq!(e.doors[1].mechanism, Mechanism::PkiAuth);
        assert_eq!(e.readers[0].connection, "Virtual PCD 00 00");
        assert_eq!(e.readers[0].door, e.doors[0].id);
        assert_eq!(e.schedules.len(), 2);
        assert_eq!(e.groups.len(), 2);
        assert_eq!(e.groups[0].doors, [e.doors[0].id, e.doors[1].id]);
        assert_eq!(e.groups[1].schedule, e.schedules[1].id);
    }

    #[test]
    fn discovery_refresh_and_https_roots() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pivgate.toml");
        let trust = "[trust]\nanchors = [\"root.pem\"]\n[trust.discovery]\n";
        std::fs::write(
            &path,
            format!("{trust}refresh = \"30m\"\nhttps_roots = \"https-roots.pem\"\n"),
        )
        .unwrap();
        let c = Config::load(&path).unwrap();
        let d = c.trust.unwrap().discovery.unwrap();
        assert_eq!(d.refresh, std::time::Duration::from_secs(1800));
        assert_eq!(d.https_roots, Some(dir.path().join("https-roots.pem")));
        let d = parse(&format!("{trust}max_fetches = 4\n"))
            .unwrap()
            .trust
            .unwrap()
            .discovery
            .unwrap();
        assert_eq!(d.refresh, std::time::Duration::from_secs(6 * 3600));
        assert_eq!(d.https_roots, None);
        let e = parse(&format!("{trust}refresh = \"10s\"\n")).unwrap_err();
        assert_eq!(e.key(), Some("trust.discovery.refresh"), "{e}");
        let e = parse(&format!("{trust}refresh = \"6 hours\"\n")).unwrap_err();
        assert_eq!(e.key(), Some("trust.discovery.refresh"), "{e}");
        assert!(e.to_string().contains("not a duration"), "{e}");
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let e =
            parse("data_dir = \"d\"\n[http]\nlisten = \"127.0.0.1:1\"\nport = 8080\n").unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.key(), Some("http.port"), "{msg}");
        assert!(
            msg.starts_with("t.toml:4:1: `http.port`: unknown field `port`"),
            "{msg}"
        );
        let e = parse("[trust]\nanchors = [\"a\"]\nanchor = [\"b\"]\n").unwrap_err();
        assert_eq!(e.key(), Some("trust.anchor"), "{e}");
        let e = parse("[seed.site]\nname = \"x\"\ntime_zone = \"UTC\"\ncolour = 1\n").unwrap_err();
        assert!(e.to_string().contains("unknown field `colour`"), "{e}");
    }

    #[test]
    fn wrong_type_is_named_with_its_line() {
        let e = parse("[output]\nunlock_ms = \"five\"\n").unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.key(), Some("output.unlock_ms"), "{msg}");
        assert!(msg.contains("t.toml:2:"), "{msg}");
        assert!(msg.contains("invalid type"), "{msg}");
        let e = parse("[http]\nlisten = \"localhost\"\n").unwrap_err();
        assert_eq!(e.key(), Some("http.listen"), "{e}");
        let e = parse("[[seed.doors]]\nname = \"a\"\nmechanism = \"face\"\n").unwrap_err();
        assert_eq!(e.key(), Some("seed.doors.mechanism"), "{e}");
        assert!(e.to_string().contains("pki-cak"), "{e}");
        let e = parse("data_dir = [\n").unwrap_err();
        assert!(matches!(e, ConfigError::Parse { line: 1 | 2, .. }), "{e}");
    }

    #[test]
    fn offline_maximums_for_the_site_and_per_door() {
        assert_eq!(parse("").unwrap().offline.default_max_staleness_s(), None);
        let site = "[seed.site]\nname = \"s\"\ntime_zone = \"UTC\"\n";
        let c = parse(&format!(
            "[offline]\nmax_staleness = \"24h\"\n{site}[[seed.doors]]\nname = \"Vault\"\nmax_staleness = \"30m\"\nstale_policy = \"recent-only\"\n[[seed.doors]]\nname = \"Front\"\n"
        ))
        .unwrap();
        assert_eq!(c.offline.default_max_staleness_s(), Some(86_400));
        let e = c.seed.as_ref().unwrap().entities().unwrap();
        assert_eq!(e.doors[0].max_staleness_s, Some(1_800));
        assert_eq!(e.doors[0].stale_policy, access::StalePolicy::RecentOnly);
        assert_eq!(e.doors[1].max_staleness_s, None);
        assert_eq!(e.doors[1].stale_policy, access::StalePolicy::Decide);
        let e = parse("[offline]\nmax_staleness = \"a day\"\n").unwrap_err();
        assert!(e.to_string().contains("not a duration"), "{e}");
        let e = parse(&format!(
            "{site}[[seed.doors]]\nname = \"V\"\nstale_policy = \"panic\"\n"
        ))
        .unwrap_err();
        assert!(e.to_string().contains("recent-only"), "{e}");
    }

    #[test]
    fn values_that_cannot_be_used_are_named() {
        let e = parse("[http]\nlisten = \"0.0.0.0:8080\"\n").unwrap_err();
        assert_eq!(e.key(), Some("http.listen"));
        assert!(e.to_string().contains("loopback"), "{e}");
        // With TLS any address is fine.
        parse("[http]\nlisten = \"0.0.0.0:8443\"\ntls_cert = \"c\"\ntls_key = \"k\"\n").unwrap();
        let e = parse("[http]\ntls_cert = \"c\"\n").unwrap_err();
        assert_eq!(e.key(), Some("http.tls_key"));
        let e = parse("database_url = \"mysql://x\"\n").unwrap_err();
        assert_eq!(e.key(), Some("database_url"));
        parse("database_url = \"postgres://u@h/db\"\n").unwrap();
        let e = parse("[trust]\nanchors = []\n").unwrap_err();
        assert_eq!(e.key(), Some("trust.anchors"));
        let e = parse("[keypad]\ntimeout_ms = 10\n").unwrap_err();
        assert_eq!(e.key(), Some("keypad.timeout_ms"), "{e}");
        let e = parse("[keypad]\ntimeout = 10\n").unwrap_err();
        assert!(e.to_string().contains("timeout"), "{e}");
        let e = parse("[output]\nunlock_ms = 0\n").unwrap_err();
        assert_eq!(e.key(), Some("output.unlock_ms"));
        let site = "[seed.site]\nname = \"s\"\ntime_zone = \"Europe/Berlin\"\n";
        let e = parse("[seed.site]\nname = \"s\"\ntime_zone = \"Mars/Olympus\"\n").unwrap_err();
        assert_eq!(e.key(), Some("seed.site.time_zone"), "{e}");
        let e = parse(&format!("{site}[seed.readers]\n\"R1\" = \"Nowhere\"\n")).unwrap_err();
        assert_eq!(e.key(), Some("seed.readers.\"R1\""), "{e}");
        assert!(e.to_string().contains("door `Nowhere`"), "{e}");
        let e = parse(&format!(
            "{site}[[seed.doors]]\nname = \"Old\"\nmechanism = \"chuid\"\n"
        ))
        .unwrap_err();
        assert_eq!(e.key(), Some("seed.doors[0].allow_low_assurance"), "{e}");
        let e = parse(&format!(
            "{site}[[seed.schedules]]\nname = \"x\"\nwindows = [\"mon-fri 7-19\"]\n"
        ))
        .unwrap_err();
        assert_eq!(e.key(), Some("seed.schedules[0].windows[0]"), "{e}");
        let e = parse(&format!(
            "{site}[[seed.doors]]\nname = \"A\"\n[[seed.doors]]\nname = \"A\"\n"
        ))
        .unwrap_err();
        assert_eq!(e.key(), Some("seed.doors[1].name"), "{e}");
        let lobby =
            "[[seed.schedules]]\nname = \"lobby hours\"\nwindows = [\"mon-fri 08:00-18:00\"]\n";
        let c = parse(&format!(
            "{site}{lobby}[[seed.doors]]\nname = \"Lobby\"\nunlock_schedule = \"lobby hours\"\nfirst_card_unlock = true\n"
        ))
        .unwrap();
        let e = c.seed.as_ref().unwrap().entities().unwrap();
        assert_eq!(e.doors[0].unlock_schedule, Some(e.schedules[0].id));
        assert!(e.doors[0].first_card_unlock);
        let e = parse(&format!(
            "{site}{lobby}[[seed.doors]]\nname = \"Lobby\"\nunlock_schedule = \"night\"\n"
        ))
        .unwrap_err();
        assert_eq!(e.key(), Some("seed.doors[0].unlock_schedule"), "{e}");
        assert!(e.to_string().contains("lobby hours"), "{e}");
        let e = parse(&format!(
            "{site}[[seed.doors]]\nname = \"Lobby\"\nfirst_card_unlock = true\n"
        ))
        .unwrap_err();
        assert_eq!(e.key(), Some("seed.doors[0].first_card_unlock"), "{e}");
        let e = parse(&format!(
            "{site}[[seed.groups]]\nname = \"g\"\nschedule = \"never\"\ndoors = []\n"
        ))
        .unwrap_err();
        assert_eq!(e.key(), Some("seed.groups[0].schedule"), "{e}");
        let e = parse(&format!(
            "{site}[[seed.schedules]]\nname = \"a\"\nwindows = []\n[[seed.groups]]\nname = \"g\"\nschedule = \"a\"\ndoors = [\"Back\"]\n"
        ))
        .unwrap_err();
        assert_eq!(e.key(), Some("seed.groups[0].doors[0]"), "{e}");
        assert!(e.to_string().contains("door `Back`"), "{e}");
    }

    #[test]
    fn export_sinks_are_checked_with_secure_defaults() {
        let c = parse("").unwrap();
        assert!(c.export.is_empty());
        let c =
            parse("[[export.syslog]]\naddress = \"siem:6514\"\nca_file = \"ca.pem\"\n").unwrap();
        let s = &c.export.syslog[0];
        assert_eq!(
            (s.transport, s.format),
            (SyslogTransport::Tls, SyslogFormat::Rfc5424)
        );
        let tcp =
            "[[export.syslog]]\naddress = \"[::1]:514\"\ntransport = \"tcp\"\nformat = \"cef\"\n";
        assert_eq!(
            parse(tcp).unwrap().export.syslog[0].format,
            SyslogFormat::Cef
        );
        let hook = "[[export.webhook]]\nsecret_file = \"k\"\n";
        for (text, key, says) in [
            (
                "[[export.syslog]]\naddress = \"siem:6514\"\n",
                "export.syslog[0].ca_file",
                "missing",
            ),
            (
                "[[export.syslog]]\naddress = \"siem\"\ntransport = \"tcp\"\n",
                "export.syslog[0].address",
                "HOST:PORT",
            ),
            (
                "[[export.syslog]]\naddress = \"siem:0\"\ntransport = \"tcp\"\n",
                "export.syslog[0].address",
                "HOST:PORT",
            ),
            (
                "[[export.syslog]]\naddress = \"s:1\"\ntransport = \"tcp\"\nca_file = \"c\"\n",
                "export.syslog[0].ca_file",
                "only with",
            ),
            (&format!("{tcp}{tcp}"), "export.syslog[1].address", "twice"),
            (
                &format!("{hook}url = \"http://siem.example.net/h\"\n"),
                "export.webhook[0].url",
                "https://",
            ),
            (
                &format!("{hook}url = \"https://u:p@siem/h\"\nca_file = \"c\"\n"),
                "export.webhook[0].url",
                "credentials",
            ),
            (
                &format!("{hook}url = \"https://siem/h\"\n"),
                "export.webhook[0].ca_file",
                "missing",
            ),
            (
                &format!("{hook}url = \"ftp://siem/h\"\n"),
                "export.webhook[0].url",
                "only https",
            ),
            (
                &format!("{hook}url = \"http://127.0.0.1:9/h\"\ntimeout_ms = 1\n"),
                "export.webhook[0].timeout_ms",
                "out of range",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.key(), Some(key), "{text}: {e}");
            assert!(e.to_string().contains(says), "{e}");
        }
        let c = parse(&format!("{hook}url = \"http://localhost:9000/h\"\n")).unwrap();
        assert_eq!(c.export.webhook[0].timeout_ms, 10_000);
        let e = parse("[[export.syslog]]\naddress = \"s:1\"\nport = 2\n").unwrap_err();
        assert!(e.to_string().contains("unknown field `port`"), "{e}");
    }

    #[test]
    fn remote_readers_are_off_by_default_and_checked() {
        let c = parse("").unwrap();
        assert!(c.remote.listen.is_none() && c.remote.is_off());
        let ok = "[remote]\nlisten = \"0.0.0.0:7443\"\ncert = \"s.pem\"\nkey = \"s.key\"\ndevice_ca = [\"ca.pem\"]\n";
        let c = parse(ok).unwrap();
        assert_eq!(c.remote.listen, Some("0.0.0.0:7443".parse().unwrap()));
        assert_eq!(c.remote.challenge_ttl_ms, 60_000);
        assert_eq!(c.remote.answer_timeout_ms, 5_000);
        for (text, key) in [
            ("[remote]\ncert = \"s.pem\"\n", "remote.listen"),
            ("[remote]\nlisten = \"127.0.0.1:7443\"\n", "remote.cert"),
            (
                "[remote]\nlisten = \"127.0.0.1:7443\"\ncert = \"s.pem\"\n",
                "remote.key",
            ),
            (
                "[remote]\nlisten = \"127.0.0.1:7443\"\ncert = \"s.pem\"\nkey = \"k\"\n",
                "remote.device_ca",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.key(), Some(key), "{e}");
        }
        let e = parse(&format!("{ok}challenge_ttl_ms = 0\n")).unwrap_err();
        assert_eq!(e.key(), Some("remote.challenge_ttl_ms"), "{e}");
        assert!(e.to_string().contains("out of range"), "{e}");
        let e = parse(&format!("{ok}heartbeat_ms = 20000\n")).unwrap_err();
        assert_eq!(e.key(), Some("remote.silence_ms"), "{e}");
        assert_eq!(c.remote.limits(), crate::limits::RemoteLimits::default());
        let c = parse(&format!(
            "{ok}max_connections = 100\nmax_connections_per_address = 5\nhandshake_ms = 2000\n"
        ))
        .unwrap();
        let l = c.remote.limits();
        assert_eq!(
            (
                l.max_connections,
                l.max_connections_per_address,
                l.handshake
            ),
            (100, 5, Duration::from_secs(2))
        );
        for key in ["max_connections", "max_connections_per_address"] {
            let e = parse(&format!("{ok}{key} = 0\n")).unwrap_err();
            assert_eq!(e.key(), Some(format!("remote.{key}").as_str()), "{e}");
        }
        let c = parse("").unwrap();
        assert_eq!(
            c.http.limits().body_read_timeout,
            crate::limits::Limits::default().body_read_timeout
        );
        let e = parse("[http]\nbody_read_timeout_ms = 10\n").unwrap_err();
        assert_eq!(e.key(), Some("http.body_read_timeout_ms"), "{e}");
        let e = parse(&format!("{ok}listen = \"nowhere\"\n")).unwrap_err();
        assert!(e.to_string().contains("remote"), "{e}");
        let e = parse("[remote]\nport = 1\n").unwrap_err();
        assert!(e.to_string().contains("unknown field `port`"), "{e}");
    }

    #[test]
    fn door_inputs_are_read_and_checked() {
        let port = "[[osdp.ports]]\ndevice = \"/dev/ttyS0\"\n[[osdp.ports.readers]]\naddress = 1\nsecure = false\n[osdp.ports.readers.door]\n";
        let c = parse(&format!(
            "{port}contact = {{ input = 3, normally = \"open\", debounce_ms = 40 }}\nrequest_to_exit = {{ input = 1 }}\nexit = \"shunt\"\nheld_open_ms = 300\nprealarm_ms = 100\n"
        ))
        .unwrap();
        let d = c.osdp.ports[0].readers[0].door.as_ref().unwrap();
        let setup = d.setup(std::time::Duration::from_secs(2));
        let contact = setup.contact.unwrap();
        assert!(!contact.normally_closed);
        assert_eq!(contact.debounce, std::time::Duration::from_millis(40));
        assert!(!setup.request_to_exit.unwrap().normally_closed);
        assert_eq!(setup.exit, crate::alarm::ExitMode::Shunt);
        assert_eq!(
            d.inputs(),
            [
                (crate::alarm::InputRole::Contact, 3),
                (crate::alarm::InputRole::RequestToExit, 1)
            ]
        );
        // Defaults: 30 s held open, 5 s pre-alarm, release on exit.
        let c = parse(&format!("{port}contact = {{ input = 0 }}\n")).unwrap();
        let d = c.osdp.ports[0].readers[0].door.as_ref().unwrap();
        assert!(
            d.setup(std::time::Duration::ZERO)
                .contact
                .unwrap()
                .normally_closed
        );
        assert_eq!(
            (d.held_open_ms, d.prealarm_ms, d.exit.as_str()),
            (30_000, 5_000, "release")
        );
        for (text, key, what) in [
            (
                "contact = { input = 0 }\ntamper = { input = 0 }\n",
                "door.tamper.input",
                "also the contact",
            ),
            (
                "contact = { input = 0, normally = \"shut\" }\n",
                "door.contact.normally",
                "not a wiring",
            ),
            ("exit = \"door\"\n", "door.exit", "not an exit mode"),
            (
                "held_open_ms = 100\nprealarm_ms = 100\n",
                "door.prealarm_ms",
                "not shorter",
            ),
        ] {
            let e = parse(&format!("{port}{text}")).unwrap_err().to_string();
            assert!(
                e.contains(&format!("osdp.ports[0].readers[0].{key}")) && e.contains(what),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn interlock_groups_are_read_and_checked() {
        let c = parse(
            "[[interlocks]]\nname = \"vestibule\"\ndoors = [\"vestibule-outer\", \"vestibule-inner\"]\n",
        )
        .unwrap();
        assert_eq!(c.interlocks[0].name, "vestibule");
        assert_eq!(
            c.interlocks[0].doors,
            ["vestibule-outer", "vestibule-inner"]
        );
        for (text, key, what) in [
            (
                "name = \"\"\ndoors = [\"a\", \"b\"]",
                "interlocks[0].name",
                "empty",
            ),
            (
                "name = \"v\"\ndoors = [\"a\"]",
                "interlocks[0].doors",
                "at least two",
            ),
            (
                "name = \"v\"\ndoors = [\"a\", \"a\"]",
                "interlocks[0].doors[1]",
                "listed twice",
            ),
            (
                "name = \"v\"\ndoors = [\"a\", \" \"]",
                "interlocks[0].doors[1]",
                "empty",
            ),
        ] {
            let e = parse(&format!("[[interlocks]]\n{text}\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key) && e.contains(what), "{text}: {e}");
        }
        let twice = "[[interlocks]]\nname = \"v\"\ndoors = [\"a\", \"b\"]\n";
        let e = parse(&format!("{twice}{twice}")).unwrap_err().to_string();
        assert!(e.contains("interlocks[1].name"), "{e}");
        // Unknown fields are refused like everywhere else.
        assert!(parse("[[interlocks]]\nname = \"v\"\ndoors = [\"a\", \"b\"]\nmode = 1\n").is_err());
    }

    #[test]
    fn io_modules_name_their_door_and_are_checked() {
        let port = "[[osdp.ports]]\ndevice = \"/dev/ttyS0\"\n";
        let io = "[[osdp.ports.io]]\naddress = 4\nsecure = false\ndoor = \"Front\"\n[osdp.ports.io.inputs]\ncontact = { input = 0 }\n";
        let c = parse(&format!("{port}{io}")).unwrap();
        let m = &c.osdp.ports[0].io[0];
        assert_eq!(m.door, "Front");
        let dev = m.device();
        assert_eq!((dev.address, dev.lock_output), (4, None));
        assert!(dev.door.is_some());
        let bad = |text: &str, key: &str, what: &str| {
            let e = parse(&format!("{port}{text}")).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(what), "{text}: {e}");
        };
        bad(
            &format!("[[osdp.ports.readers]]\naddress = 4\nsecure = false\n{io}"),
            "osdp.ports[0].io[0].address",
            "used twice",
        );
        bad(
            &io.replace("secure = false\n", ""),
            "osdp.ports[0].io[0].key_file",
            "missing",
        );
        bad(
            &io.replace("\"Front\"", "\" \""),
            "osdp.ports[0].io[0].door",
            "empty",
        );
        bad(
            &format!("{io}prealarm_ms = 40000\n"),
            "osdp.ports[0].io[0].inputs.prealarm_ms",
            "not shorter",
        );
    }

    #[test]
    fn osdp_ports_and_readers_are_checked() {
        let port = "[[osdp.ports]]\ndevice = \"/dev/ttyUSB0\"\nbaud = 115200\n";
        let c = parse(&format!(
            "{port}[[osdp.ports.readers]]\naddress = 1\nkey_file = \"k1\"\nlock_output = 0\nunlock_ms = 3000\n[[osdp.ports.readers]]\naddress = 2\nkey_file = \"k2\"\ninstall_mode = true\n[[osdp.ports.readers]]\naddress = 3\nsecure = false\n"
        ))
        .unwrap();
        let p = &c.osdp.ports[0];
        assert_eq!(p.readers.len(), 3);
        assert!(p.readers[0].secure && !p.readers[2].secure);
        assert_eq!(p.connection(1), "osdp:/dev/ttyUSB0#1");
        // Printed and read back.
        assert_eq!(parse(&c.to_string()).unwrap(), c);
        // The default baud rate.
        let c = parse("[[osdp.ports]]\ndevice = \"/dev/ttyS0\"\n[[osdp.ports.readers]]\naddress = 0\nsecure = false\n").unwrap();
        assert_eq!(c.osdp.ports[0].baud, 9600);

        let bad = |tail: &str, key: &str, words: &str| {
            let e = parse(&format!("{port}{tail}")).unwrap_err();
            assert_eq!(e.key(), Some(key), "{e}");
            assert!(e.to_string().contains(words), "{e}");
        };
        bad(
            "[[osdp.ports.readers]]\naddress = 127\nsecure = false\n",
            "osdp.ports[0].readers[0].address",
            "0 to 126",
        );
        bad(
            "[[osdp.ports.readers]]\naddress = 1\nsecure = false\n[[osdp.ports.readers]]\naddress = 1\nsecure = false\n",
            "osdp.ports[0].readers[1].address",
            "used twice",
        );
        bad(
            "[[osdp.ports.readers]]\naddress = 1\n",
            "osdp.ports[0].readers[0].key_file",
            "install_mode",
        );
        bad(
            "[[osdp.ports.readers]]\naddress = 1\ninstall_mode = true\n",
            "osdp.ports[0].readers[0].key_file",
            "install mode writes",
        );
        bad(
            "[[osdp.ports.readers]]\naddress = 1\nsecure = false\nkey_file = \"k\"\n",
            "osdp.ports[0].readers[0].secure",
            "false",
        );
        bad(
            "[[osdp.ports.readers]]\naddress = 1\nsecure = false\nunlock_ms = 500\n",
            "osdp.ports[0].readers[0].unlock_ms",
            "lock_output",
        );
        bad("", "osdp.ports[0].readers", "empty");
        let e = parse("[[osdp.ports]]\ndevice = \"/dev/ttyS0\"\nbaud = 4800\n[[osdp.ports.readers]]\naddress = 0\nsecure = false\n").unwrap_err();
        assert_eq!(e.key(), Some("osdp.ports[0].baud"), "{e}");
        assert!(e.to_string().contains("9600, 19200"), "{e}");
        let e = parse("[[osdp.ports]]\ndevice = \"/dev/ttyS0\"\nspeed = 9600\n").unwrap_err();
        assert!(e.to_string().contains("unknown field `speed`"), "{e}");
        let e = parse(
            "[[osdp.ports]]\ndevice = \"/dev/ttyS0\"\n[[osdp.ports.readers]]\naddress = 300\n",
        )
        .unwrap_err();
        assert!(matches!(e, ConfigError::Parse { .. }), "{e}");
    }

    #[test]
    fn missing_file_is_named() {
        let e = Config::load(Path::new("/nonexistent/pivgate.toml")).unwrap_err();
        assert!(matches!(e, ConfigError::Read { .. }));
        assert!(e.to_string().contains("/nonexistent/pivgate.toml"), "{e}");
    }

    #[test]
    fn relative_paths_follow_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pivgate.toml");
        std::fs::write(
            &p,
            "data_dir = \"d\"\n[trust]\nanchors = [\"pki/root.pem\", \"/abs.pem\"]\n",
        )
        .unwrap();
        let c = Config::load(&p).unwrap();
        assert_eq!(c.data_dir, dir.path().join("d"));
        let t = c.trust.unwrap();
        assert_eq!(
            t.anchors,
            [dir.path().join("pki/root.pem"), PathBuf::from("/abs.pem")]
        );
    }

    #[test]
    fn retention_is_off_by_default_and_checked_when_on() {
        assert_eq!(Config::defaults().retention, None);
        let parse = |extra: &str| {
            let text = format!("{}\n{extra}", init_template("sim:front", "UTC"));
            let c = Config::parse(&text, Path::new("t.toml")).unwrap();
            c.check(Path::new("t.toml")).map(|_| c)
        };
        let c = parse("[retention]\ndays = 365\n").unwrap();
        let r = c.retention.as_ref().unwrap();
        assert_eq!(
            r.schedule().unwrap(),
            crate::retention::Schedule::Daily(access::jiff::civil::time(3, 0, 0, 0))
        );
        assert_eq!(c.retention_export_dir(), Some(c.data_dir.join("archive")));
        let c = parse("[retention]\ndays = 30\ninterval_secs = 600\n").unwrap();
        assert_eq!(
            c.retention.unwrap().schedule().unwrap(),
            crate::retention::Schedule::Every(Duration::from_secs(600))
        );
        for (extra, key) in [
            ("[retention]\ndays = 0\n", "retention.days"),
            ("[retention]\ndays = 30\nat = \"25:00\"\n", "retention.at"),
            ("[retention]\ndays = 30\nat = \"3:00\"\n", "retention.at"),
            (
                "[retention]\ndays = 30\nat = \"03:00\"\ninterval_secs = 60\n",
                "retention.interval_secs",
            ),
            (
                "[retention]\ndays = 30\ninterval_secs = 0\n",
                "retention.interval_secs",
            ),
        ] {
            let e = parse(extra).unwrap_err();
            assert_eq!(e.key(), Some(key), "{extra}: {e}");
        }
        let e = Config::parse("[retention]\ndayz = 3\n", Path::new("t.toml")).unwrap_err();
        assert!(e.to_string().contains("dayz"), "{e}");
    }
}
