//! OSDP readers: the service as the control panel of each configured serial
//! line (`[[osdp.ports]]`).
//!
//! Per port, the [`links::serial`] adapter runs the control panel state
//! machine on its own thread (poll loop, reply timeouts, retries, offline
//! detection and reconnection, the secure channel). A dispatcher thread of
//! this module reads the panel's events:
//!
//! - reader online, offline, refused by the secure channel (a MAC or
//!   cryptogram that does not verify, SCBK-D outside install mode), a key
//!   installed, tamper and power changes (`osdp_LSTAT`): each one a `reader`
//!   event in the log (once per change, not once per retry) and the
//!   reader's connection in [`ReaderStatus`];
//! - `osdp_KEYPAD` digits: collected per reader and, at `#` (or Enter),
//!   handed to the door's [`Keypads`] entry, the PIN source of card + PIN
//!   doors (`*` clears);
//! - a card read (`osdp_RAW` / `osdp_FMT`): handed to the reader's own tap
//!   thread. A reader that offers transparent smart-card access (`osdp_CAP`
//!   function 13) has the card authenticated by the controller itself
//!   through [`OsdpTransport`] — [`TapContext::tap`], the same mechanism,
//!   decision, anti-passback and event as a PC/SC reader — so the reader is
//!   never trusted. Card data alone (a reader without transparent mode) is
//!   not a credential any door mechanism accepts (PKI-CAK, PKI-AUTH and
//!   CHUID all need the card itself): the tap is refused with
//!   `osdp-card-data-untrusted` and recorded.
//!
//! After each tap the reader shows the result: green LED and one short beep
//! for a grant, red LED and three beeps for a refusal. [`OsdpOutput`] is a
//! [`DoorOutput`]: a door whose OSDP reader has `lock_output` gets its lock
//! pulsed with `osdp_OUT` (also for momentary unlocks and door modes from
//! the API); other doors use the service's other output. It is made before
//! the controller ([`OsdpSource::output`]), follows the access data the
//! controller hands it ([`DoorOutput::follow`]) and is given the ports'
//! lock routes when the ports start: it holds nothing of the controller.
//!
//! Keys: `key_file` holds the secure channel base key (32 hex digits); the
//! file must be mode 0600 or stricter and owned by the service's user, or
//! the service does not start. In install mode a fresh key is generated and
//! written to `<key_file>.new` (0600), or the one already there is taken
//! again; the panel tries it first and falls back to SCBK-D; when the reader
//! acknowledges `osdp_KEYSET` (or already holds the key) it is renamed to
//! `key_file`, which later starts use.

use std::collections::HashMap;
use std::fs::File;
#[cfg(test)]
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use access::jiff::Timestamp;
use access::{AccessSnapshot, DoorId, DoorMode};
use arc_swap::ArcSwapOption;
use links::osdp::cp::{ControlPanel, CpConfig, CpEvent, OfflineReason, PdSetup, Refusal};
use links::osdp::msg::{
    capability, cmd, color, BuzzerControl, Command, LedControl, LedState, OutputControl, RawCard,
};
use links::osdp::sc::Key;
use links::serial::{open_serial, CpCommander, CpHandle, Link};
use links::transparent::{OsdpTransport, SharedBus};
use store::NewEvent;
use zeroize::Zeroizing;

use crate::alarm::{DoorSetup, InputRole, Line};
use crate::config::{OsdpConfig, OsdpPort, OsdpReader};
use crate::door::{DoorOutput, OutputError};
use crate::doorwatch::{DoorSignals, DoorWatch};
use crate::interlock::Interlocks;
use crate::source::{reader_event, Binding, Bound, ReaderSource, Running, TapContext};

/// The refusal code of card data from a reader without transparent mode.
pub const UNTRUSTED_CARD_DATA: &str = "osdp-card-data-untrusted";

/// Why the OSDP readers could not be started.
#[derive(Debug, thiserror::Error)]
pub enum OsdpError {
    #[error("`{key}`: {problem}")]
    Invalid { key: String, problem: String },
    #[error("`{key}`: {path}: {problem}", path = path.display())]
    KeyFile {
        key: String,
        path: PathBuf,
        problem: String,
    },
    #[error("`{key}`: cannot open the serial device {device}: {error}", device = device.display())]
    Serial {
        key: String,
        device: PathBuf,
        error: std::io::Error,
    },
}

/// Reads an SCBK file: 32 hex digits, mode 0600 or stricter, owned by the
/// service's user ([`files::read_hex_key`]).
pub fn read_key_file(path: &Path, key: &str) -> Result<Key, OsdpError> {
    files::read_hex_key::<16>(path)
        .map(|k| Key(*k))
        .map_err(|e| OsdpError::KeyFile {
            key: key.to_string(),
            path: path.to_owned(),
            problem: e.problem.to_string(),
        })
}

/// Writes `key` as hex to `path` with mode 0600, atomically and durably
/// ([`files::write_hex_key`]).
fn write_key_file(path: &Path, key: &Key) -> std::io::Result<()> {
    files::write_hex_key(path, &key.0)
}

/// Where install mode keeps the key being installed until the reader has it.
fn pending_key_path(key_file: &Path) -> PathBuf {
    let mut p = key_file.as_os_str().to_owned();
    p.push(".new");
    PathBuf::from(p)
}

/// How one configured reader is reached, once keys are read.
struct ReaderPlan {
    address: u8,
    connection: String,
    setup: PdSetup,
    /// Install mode: the key file to write once the reader took the key.
    install: Option<PathBuf>,
    lock_output: Option<u8>,
    unlock: Option<Duration>,
    /// The door's inputs on this reader: the machine's setup and the
    /// input number of each.
    door_io: Option<DoorIo>,
    /// An I/O module's door, by name (a reader's door is its reader
    /// record's).
    door_name: Option<String>,
}

/// How long a request-to-exit allows the opening when the reader has no
/// `unlock_ms`.
const EXIT_WINDOW: Duration = Duration::from_secs(5);

/// The inputs of the door a reader is bound to.
#[derive(Clone)]
struct DoorIo {
    setup: DoorSetup,
    inputs: Vec<(InputRole, u8)>,
}

/// A port whose keys are read, ready to open.
pub struct PortPlan {
    index: usize,
    device: PathBuf,
    baud: u32,
    readers: Vec<ReaderPlan>,
}

/// Reads every key file (and prepares install-mode keys): a key file that
/// is missing, malformed, readable by others or owned by another user stops
/// start-up, naming the file and the fix.
pub fn plan(config: &OsdpConfig) -> Result<Vec<PortPlan>, OsdpError> {
    let mut plans = Vec::new();
    for (i, p) in config.ports.iter().enumerate() {
        let mut readers = Vec::new();
        for (j, r) in p.readers.iter().enumerate() {
            readers.push(plan_reader(&format!("osdp.ports[{i}].readers[{j}]"), p, r)?);
        }
        for (j, m) in p.io.iter().enumerate() {
            let mut plan = plan_reader(&format!("osdp.ports[{i}].io[{j}]"), p, &m.device())?;
            plan.door_name = Some(m.door.clone());
            readers.push(plan);
        }
        plans.push(PortPlan {
            index: i,
            device: p.device.clone(),
            baud: p.baud,
            readers,
        });
    }
    Ok(plans)
}

/// `section` names the entry in errors, e.g. `osdp.ports[0].readers[1]`.
fn plan_reader(section: &str, p: &OsdpPort, r: &OsdpReader) -> Result<ReaderPlan, OsdpError> {
    let key = format!("{section}.key_file");
    let connection = p.connection(r.address);
    let (setup, install) = match (&r.key_file, r.secure, r.install_mode) {
        (_, false, _) => {
            tracing::warn!(
                reader = %connection,
                "OSDP reader configured with `secure = false`: card data, keypad and lock commands travel in plaintext"
            );
            (PdSetup::plain(r.address), None)
        }
        (Some(path), true, true) if !path.exists() => {
            let pending = pending_key_path(path);
            // A key from an earlier start that the reader may have taken
            // before its acknowledgement was lost is offered again (the
            // panel tries it before SCBK-D).
            let fresh = if pending.exists() {
                read_key_file(&pending, &key)?
            } else {
                let fresh = Key(links_random_key());
                write_key_file(&pending, &fresh).map_err(|e| OsdpError::KeyFile {
                    key: key.clone(),
                    path: pending.clone(),
                    problem: format!("cannot write the key to be installed: {e}"),
                })?;
                fresh
            };
            tracing::info!(reader = %connection, "install mode: connecting with the default key to install a new one");
            (
                PdSetup {
                    address: r.address,
                    scbk: Some(fresh),
                    install_mode: true,
                },
                Some(path.clone()),
            )
        }
        (Some(path), true, install) => {
            if install {
                tracing::info!(reader = %connection, file = %path.display(), "install mode: the key is installed already; using it");
            }
            (PdSetup::secure(r.address, read_key_file(path, &key)?), None)
        }
        (None, true, _) => {
            return Err(OsdpError::Invalid {
                key,
                problem: "missing: a secure reader needs its key file (or `secure = false`)".into(),
            })
        }
    };
    Ok(ReaderPlan {
        address: r.address,
        connection,
        setup,
        install,
        lock_output: r.lock_output,
        unlock: r.unlock_ms.map(Duration::from_millis),
        door_name: None,
        door_io: r.door.as_ref().map(|d| DoorIo {
            setup: d.setup(r.unlock_ms.map_or(EXIT_WINDOW, Duration::from_millis)),
            inputs: d.inputs(),
        }),
    })
}

fn links_random_key() -> [u8; 16] {
    let mut k = [0u8; 16];
    // aws-lc's generator only fails without any OS entropy source.
    aws_lc_rs::rand::fill(&mut k).expect("the system random generator is available");
    k
}

/// One reader's lock output on a bus.
struct Route {
    commander: CpCommander,
    address: u8,
    output: u8,
    unlock: Option<Duration>,
    online: Arc<AtomicBool>,
    connection: String,
}

/// The door output of doors whose OSDP reader drives the lock relay
/// (`lock_output`), and `fallback` for every other door.
pub struct OsdpOutput {
    fallback: Arc<dyn DoorOutput>,
    /// Per reader connection, set once the ports run.
    routes: OnceLock<HashMap<String, Route>>,
    /// Every reader's panel and address, per connection (pre-alarms).
    panels: OnceLock<HashMap<String, (CpCommander, u8)>>,
    /// Told of releases and mode changes.
    watch: Option<Arc<DoorWatch>>,
    /// The access data the doors are driven from (which readers a door has).
    snapshot: ArcSwapOption<AccessSnapshot>,
    /// Told of releases and relocks; checked before a request-to-exit
    /// releases a lock.
    interlocks: OnceLock<Arc<Interlocks>>,
}

impl OsdpOutput {
    pub fn new(fallback: Arc<dyn DoorOutput>, watch: Option<Arc<DoorWatch>>) -> Self {
        OsdpOutput {
            fallback,
            routes: OnceLock::new(),
            panels: OnceLock::new(),
            watch,
            snapshot: ArcSwapOption::empty(),
            interlocks: OnceLock::new(),
        }
    }

    /// How long the lock of `door` is released by a pulse of `duration`:
    /// the longest `unlock_ms` of its OSDP readers' lock outputs, if any
    /// says more.
    fn pulse(&self, door: DoorId, duration: Duration) -> Duration {
        let (Some(routes), Some(snapshot)) = (self.routes.get(), self.snapshot.load_full()) else {
            return duration;
        };
        snapshot
            .readers()
            .iter()
            .filter(|r| r.door == door)
            .filter_map(|r| routes.get(&r.connection)?.unlock)
            .fold(duration, Duration::max)
    }

    /// Sends `control` to the lock output of every OSDP reader of `door`;
    /// `None` when it has none (or before the ports run).
    fn drive(
        &self,
        door: DoorId,
        control: impl Fn(&Route) -> OutputControl,
    ) -> Option<Result<(), OutputError>> {
        let routes = self.routes.get()?;
        let snapshot = self.snapshot.load();
        let snapshot = snapshot.as_ref()?;
        let mut driven = None;
        for reader in snapshot.readers().iter().filter(|r| r.door == door) {
            let Some(r) = routes.get(&reader.connection) else {
                continue;
            };
            if !r.online.load(Ordering::Acquire) {
                driven = Some(Err(OutputError {
                    door,
                    problem: format!("OSDP reader {} is offline", r.connection),
                }));
                continue;
            }
            r.commander
                .send(r.address, Command::Output(vec![control(r)]));
            driven.get_or_insert(Ok(()));
        }
        driven
    }
}

/// `osdp_OUT` timer units (100 ms), rounded up.
fn timer_units(d: Duration) -> u16 {
    u16::try_from(d.as_millis().div_ceil(100)).unwrap_or(u16::MAX)
}

impl OsdpOutput {
    fn release(&self, door: DoorId, duration: Duration) -> Result<(), OutputError> {
        let driven = self.drive(door, |r| OutputControl {
            output: r.output,
            // Temporary on, then back to the permanent state (locked).
            control_code: 4,
            timer: timer_units(r.unlock.unwrap_or(duration)),
        });
        match driven {
            Some(r) => {
                if r.is_ok() {
                    tracing::info!(
                        door = door.0,
                        ms = duration.as_millis() as u64,
                        "lock released (osdp_OUT)"
                    );
                }
                r
            }
            None => self.fallback.momentary_unlock(door, duration),
        }
    }

    /// Tells the door watch the lock is released for `duration`.
    fn released(
        &self,
        door: DoorId,
        duration: Duration,
        r: Result<(), OutputError>,
    ) -> Result<(), OutputError> {
        if r.is_ok() {
            let pulse = self.pulse(door, duration);
            if let Some(i) = self.interlocks.get() {
                i.released(door, pulse, std::time::Instant::now());
            }
            if let Some(w) = &self.watch {
                w.released(door, duration);
            }
        }
        r
    }
}

impl DoorSignals for OsdpOutput {
    fn relock(&self, door: DoorId) {
        let r = match self.drive(door, |r| OutputControl {
            output: r.output,
            // Permanent off: ends the temporary release now.
            control_code: 1,
            timer: 0,
        }) {
            Some(r) => r,
            None => {
                let mode = self
                    .snapshot
                    .load()
                    .as_ref()
                    .and_then(|s| s.door(door).map(|d| d.mode))
                    .unwrap_or_default();
                self.fallback.set_mode(door, mode)
            }
        };
        if let (Ok(()), Some(i)) = (&r, self.interlocks.get()) {
            i.relocked(door);
        }
        match r {
            Ok(()) => tracing::info!(door = door.0, "door closed: lock relocked"),
            Err(e) => {
                tracing::warn!(door = door.0, error = %e, "door closed but the lock could not be relocked")
            }
        }
    }

    fn release(&self, door: DoorId, window: Duration) {
        // An interlock group's other doors, as for a tap.
        let claim = match (self.interlocks.get(), self.snapshot.load_full()) {
            (Some(i), Some(s)) => {
                match i.claim(
                    &s,
                    door,
                    self.pulse(door, window),
                    std::time::Instant::now(),
                ) {
                    Ok(c) => c.map(|c| (i, c)),
                    Err(refusal) => {
                        tracing::info!(door = door.0, %refusal, "request to exit: lock not released");
                        if let Some(w) = &self.watch {
                            w.exit_refused(door, &refusal);
                        }
                        return;
                    }
                }
            }
            _ => None,
        };
        if let Err(e) = self.momentary_unlock(door, window) {
            tracing::info!(door = door.0, error = %e, "request to exit: lock not released");
            if let Some((i, c)) = claim {
                i.withdraw(c);
            }
        }
    }

    fn prealarm(&self, door: DoorId, on: bool) {
        let (Some(panels), Some(snapshot)) = (self.panels.get(), self.snapshot.load_full()) else {
            return;
        };
        for reader in snapshot.readers().iter().filter(|r| r.door == door) {
            let Some((commander, address)) = panels.get(&reader.connection) else {
                continue;
            };
            let (led, buzzer) = if on {
                (
                    LedState {
                        control_code: 2,
                        on_time: 2,
                        off_time: 2,
                        on_color: color::AMBER,
                        off_color: color::BLACK,
                    },
                    BuzzerControl {
                        reader: 0,
                        tone: 2,
                        on_time: 2,
                        off_time: 2,
                        count: 0,
                    },
                )
            } else {
                (
                    // Cancel the temporary state: back to the permanent one.
                    LedState {
                        control_code: 1,
                        ..LedState::default()
                    },
                    BuzzerControl {
                        reader: 0,
                        tone: 1,
                        on_time: 0,
                        off_time: 0,
                        count: 0,
                    },
                )
            };
            commander.send(
                *address,
                Command::Led(vec![LedControl {
                    reader: 0,
                    led: 0,
                    temporary: led,
                    timer: if on { 6000 } else { 0 },
                    permanent: LedState::default(),
                }]),
            );
            commander.send(*address, Command::Buzzer(buzzer));
        }
    }
}

impl DoorOutput for OsdpOutput {
    /// Refused while the door is in `locked` mode: whoever asks, the lock
    /// relay of a locked door stays shut without an explicit override.
    fn momentary_unlock(&self, door: DoorId, duration: Duration) -> Result<(), OutputError> {
        let locked = self
            .snapshot
            .load()
            .as_ref()
            .and_then(|s| s.door(door).map(|d| d.mode == DoorMode::Locked))
            .unwrap_or(false);
        if locked {
            return Err(OutputError {
                door,
                problem: "the door is in locked mode; the lock stays shut".into(),
            });
        }
        let r = self.release(door, duration);
        self.released(door, duration, r)
    }

    fn momentary_unlock_overriding(
        &self,
        door: DoorId,
        duration: Duration,
    ) -> Result<(), OutputError> {
        let r = self.release(door, duration);
        self.released(door, duration, r)
    }

    fn set_mode(&self, door: DoorId, mode: DoorMode) -> Result<(), OutputError> {
        let code = if mode == DoorMode::Unlocked { 2 } else { 1 };
        let r = match self.drive(door, |r| OutputControl {
            output: r.output,
            control_code: code,
            timer: 0,
        }) {
            Some(r) => r,
            None => self.fallback.set_mode(door, mode),
        };
        if let (Ok(()), Some(w)) = (&r, &self.watch) {
            w.unlocked(door, mode == DoorMode::Unlocked);
        }
        r
    }

    fn follow(&self, snapshot: &Arc<AccessSnapshot>) {
        self.snapshot.store(Some(snapshot.clone()));
        self.fallback.follow(snapshot);
    }
}

/// A reader's state as the dispatcher follows it.
struct ReaderState {
    address: u8,
    connection: String,
    online: Arc<AtomicBool>,
    /// Offers transparent smart-card access (from `osdp_CAP`).
    transparent: Arc<AtomicBool>,
    /// A refusal was recorded since the reader was last online.
    refused: bool,
    tamper: bool,
    power: bool,
    install: Option<PathBuf>,
    lock_output: Option<u8>,
    door_io: Option<DoorIo>,
    door_name: Option<String>,
    keys: Zeroizing<String>,
    /// The tap thread's work, and its share of the bus events.
    jobs: mpsc::Sender<Job>,
    bus: mpsc::Sender<CpEvent>,
}

enum Job {
    Card(RawCard),
    Text {
        reader: u8,
    },
    /// A reader in transparent mode reported a card arriving (`osdp_XRD` card present), as
    /// `pivgate reader osdp` does.
    Present {
        reader: u8,
    },
}

/// The running OSDP ports.
pub struct OsdpPorts {
    ports: Vec<RunningPort>,
    watch: Option<Arc<DoorWatch>>,
}

struct RunningPort {
    device: PathBuf,
    commander: CpCommander,
    dispatcher: JoinHandle<()>,
    workers: Vec<JoinHandle<()>>,
}

impl OsdpPorts {
    /// No ports.
    pub fn none() -> Self {
        OsdpPorts {
            ports: Vec::new(),
            watch: None,
        }
    }

    pub fn len(&self) -> usize {
        self.ports.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    /// Stops every panel (a tap in progress ends with a link error, recorded
    /// as a refusal) and waits for the threads.
    pub fn stop(self) {
        if let Some(w) = &self.watch {
            w.stop();
        }
        for p in &self.ports {
            p.commander.shutdown();
        }
        for p in self.ports {
            let _ = p.dispatcher.join();
            for w in p.workers {
                let _ = w.join();
            }
            tracing::info!(device = %p.device.display(), "OSDP port stopped");
        }
    }
}

impl Running for OsdpPorts {
    fn stop(self: Box<Self>) {
        OsdpPorts::stop(*self);
    }
}

/// The OSDP source: the configured ports, their key files read, and the
/// lock output of their readers.
pub struct OsdpSource {
    plans: Vec<PortPlan>,
    output: Option<Arc<OsdpOutput>>,
    watch: Option<Arc<DoorWatch>>,
}

impl OsdpSource {
    /// Reads every key file ([`plan`]): a key file that is missing,
    /// malformed, readable by others or owned by another user stops
    /// start-up, naming the file and the fix.
    pub fn plan(config: &OsdpConfig) -> Result<Self, OsdpError> {
        Ok(OsdpSource {
            plans: plan(config)?,
            output: None,
            watch: None,
        })
    }

    /// The door output for the controller: with ports configured, an
    /// [`OsdpOutput`] driving the lock relays of readers with
    /// `lock_output` and `fallback` for every other door; else `fallback`.
    /// `watch` follows the doors whose inputs a reader reports
    /// (`[osdp.ports.readers.door]`).
    pub fn output(
        &mut self,
        fallback: Arc<dyn DoorOutput>,
        watch: Option<Arc<DoorWatch>>,
    ) -> Arc<dyn DoorOutput> {
        if self.plans.is_empty() {
            return fallback;
        }
        let o = Arc::new(OsdpOutput::new(fallback, watch.clone()));
        if let Some(w) = &watch {
            let signals: Arc<dyn DoorSignals> = o.clone();
            w.drive(Arc::downgrade(&signals));
        }
        self.watch = watch;
        self.output = Some(o.clone());
        o
    }

    /// Holds the OSDP doors' request-to-exit releases to `interlocks`'
    /// groups, and tells it of their releases and relocks (after
    /// [`output`](Self::output)).
    pub fn interlock(&self, interlocks: Arc<Interlocks>) {
        if let Some(o) = &self.output {
            let _ = o.interlocks.set(interlocks);
        }
    }

    /// Whether any reader reports door inputs.
    pub fn has_door_inputs(config: &OsdpConfig) -> bool {
        config
            .ports
            .iter()
            .any(|p| !p.io.is_empty() || p.readers.iter().any(|r| r.door.is_some()))
    }
}

impl ReaderSource for OsdpSource {
    type Error = OsdpError;

    fn start(self, ctx: &Arc<TapContext>) -> Result<Box<dyn Running>, OsdpError> {
        Ok(Box::new(start(
            self.plans,
            ctx,
            self.output.as_deref(),
            self.watch,
        )?))
    }
}

/// Opens every planned port and starts its panel, dispatcher and one tap
/// thread per reader; routes the lock outputs through `output`.
pub fn start(
    plans: Vec<PortPlan>,
    ctx: &Arc<TapContext>,
    output: Option<&OsdpOutput>,
    watch: Option<Arc<DoorWatch>>,
) -> Result<OsdpPorts, OsdpError> {
    let mut running = OsdpPorts {
        ports: Vec::new(),
        watch: watch.clone(),
    };
    let mut routes = HashMap::new();
    let mut panels = HashMap::new();
    let configured: Vec<String> = plans
        .iter()
        .flat_map(|p| p.readers.iter().map(|r| r.connection.clone()))
        .collect();
    for plan in plans {
        let key = format!("osdp.ports[{}].device", plan.index);
        let port = match open_serial(&plan.device, plan.baud) {
            Ok(p) => p,
            Err(error) => {
                running.stop();
                return Err(OsdpError::Serial {
                    key,
                    device: plan.device,
                    error,
                });
            }
        };
        let setups: Vec<PdSetup> = plan.readers.iter().map(|r| r.setup.clone()).collect();
        let cp = ControlPanel::new(CpConfig::default(), setups);
        let cp = match CpHandle::spawn(port, cp, Link::paced(plan.baud)) {
            Ok(c) => c,
            Err(error) => {
                running.stop();
                return Err(OsdpError::Serial {
                    key,
                    device: plan.device,
                    error,
                });
            }
        };
        let commander = cp.commander();
        let mut states = Vec::new();
        let mut workers = Vec::new();
        for r in plan.readers {
            let online = Arc::new(AtomicBool::new(false));
            let transparent = Arc::new(AtomicBool::new(false));
            let (jobs, jobs_rx) = mpsc::channel();
            let (bus, bus_rx) = mpsc::channel();
            panels.insert(r.connection.clone(), (commander.clone(), r.address));
            if let Some(output) = r.lock_output {
                routes.insert(
                    r.connection.clone(),
                    Route {
                        commander: commander.clone(),
                        address: r.address,
                        output,
                        unlock: r.unlock,
                        online: online.clone(),
                        connection: r.connection.clone(),
                    },
                );
            }
            let worker = TapWorker {
                ctx: ctx.clone(),
                commander: commander.clone(),
                address: r.address,
                connection: r.connection.clone(),
                transparent: transparent.clone(),
            };
            match std::thread::Builder::new()
                .name(format!("osdp-reader-{}", r.address))
                .spawn(move || worker.run(jobs_rx, bus_rx))
            {
                Ok(t) => workers.push(t),
                Err(e) => {
                    tracing::error!(error = %e, reader = %r.connection, "cannot start the reader's tap thread")
                }
            }
            states.push(ReaderState {
                address: r.address,
                connection: r.connection,
                online,
                transparent,
                refused: false,
                tamper: false,
                power: false,
                install: r.install,
                lock_output: r.lock_output,
                door_io: r.door_io,
                door_name: r.door_name,
                keys: Zeroizing::new(String::new()),
                jobs,
                bus,
            });
        }
        let device = plan.device.clone();
        let sh = ctx.clone();
        let w = watch.clone();
        let dispatcher = std::thread::Builder::new()
            .name(format!("osdp-port-{}", plan.index))
            .spawn(move || dispatch(cp, states, &sh, &device, w.as_deref()));
        let dispatcher = match dispatcher {
            Ok(d) => d,
            Err(error) => {
                commander.shutdown();
                running.stop();
                return Err(OsdpError::Serial {
                    key,
                    device: plan.device,
                    error,
                });
            }
        };
        tracing::info!(device = %plan.device.display(), baud = plan.baud, readers = workers.len(), "OSDP port started");
        running.ports.push(RunningPort {
            device: plan.device,
            commander,
            dispatcher,
            workers,
        });
    }
    if let Some(o) = output {
        let _ = o.routes.set(routes);
        let _ = o.panels.set(panels);
    }
    let snapshot = ctx.snapshot();
    for r in snapshot.readers() {
        if r.connection.starts_with("osdp:") && !configured.contains(&r.connection) {
            tracing::warn!(reader = %r.connection, "reader record names an OSDP reader that no `[[osdp.ports]]` configures");
        }
    }
    Ok(running)
}

fn detail(device: &Path, address: u8) -> serde_json::Value {
    serde_json::json!({ "link": "osdp", "device": device.display().to_string(), "address": address })
}

/// Reads the panel's events until its thread ends.
fn dispatch(
    cp: CpHandle,
    mut readers: Vec<ReaderState>,
    ctx: &TapContext,
    device: &Path,
    watch: Option<&DoorWatch>,
) {
    let mut bindings: Vec<Binding> = readers.iter().map(|_| Binding::new()).collect();
    while let Ok(event) = cp.events().recv() {
        let address = match &event {
            CpEvent::Online { address, .. }
            | CpEvent::Offline { address, .. }
            | CpEvent::KeyInstalled { address }
            | CpEvent::Refused { address, .. }
            | CpEvent::Card { address, .. }
            | CpEvent::CardPresence { address, .. }
            | CpEvent::CardText { address, .. }
            | CpEvent::Keypad { address, .. }
            | CpEvent::LocalStatus { address, .. }
            | CpEvent::InputStatus { address, .. }
            | CpEvent::Completed { address, .. }
            | CpEvent::Abandoned { address, .. }
            | CpEvent::BadReply { address, .. } => *address,
            CpEvent::BadFrame(e) => {
                tracing::debug!(device = %device.display(), error = %e, "damaged OSDP frame discarded");
                continue;
            }
        };
        let Some(i) = readers.iter().position(|r| r.address == address) else {
            continue;
        };
        let r = &mut readers[i];
        let snapshot = ctx.snapshot();
        let before = bindings[i].last();
        let bound = bindings[i].get(&snapshot, &r.connection);
        if bound != before {
            // Bound (or rebound) since the last event: its status follows.
            if let Some(old) = before {
                ctx.status().forget(old.reader);
            }
            if let Some(b) = bound {
                ctx.status().set(b.reader, r.online.load(Ordering::Acquire));
            }
        }
        let (reader_id, door) = (bound.map(|b| b.reader), bound.map(|b| b.door));
        let record = |code: &str, reason: String| {
            ctx.record(reader_event(bound, code, reason, detail(device, address)));
        };
        match event {
            CpEvent::Online {
                secure,
                capabilities,
                id,
                ..
            } => {
                let transparent = capabilities
                    .iter()
                    .any(|c| c.function == capability::SMART_CARD && c.compliance >= 1);
                r.transparent.store(transparent, Ordering::Release);
                r.online.store(true, Ordering::Release);
                r.refused = false;
                if let Some(id) = reader_id {
                    ctx.status().set(id, true);
                }
                // The lock relay takes the door's mode again (the reader
                // may have restarted): held open for an unlocked door,
                // locked otherwise.
                // The door's inputs as they are now; changes come
                // unsolicited in answer to polls.
                if r.door_io.is_some() {
                    let _ = cp.submit(address, Command::InputStatus);
                }
                if let Some(output) = r.lock_output {
                    let mode = door.and_then(|d| snapshot.door(d)).map(|d| d.mode);
                    let control_code = if mode == Some(DoorMode::Unlocked) {
                        2
                    } else {
                        1
                    };
                    let _ = cp.submit(
                        address,
                        Command::Output(vec![OutputControl {
                            output,
                            control_code,
                            timer: 0,
                        }]),
                    );
                }
                record(
                    "osdp-online",
                    format!(
                        "OSDP reader {} is online ({}; {}; vendor {:02x}{:02x}{:02x} model {} serial {})",
                        r.connection,
                        if secure { "secure channel" } else { "plaintext" },
                        if transparent { "transparent smart-card access" } else { "card data only" },
                        id.vendor[0], id.vendor[1], id.vendor[2], id.model, id.serial
                    ),
                );
            }
            CpEvent::Offline { reason, .. } => {
                let _ = r.bus.send(CpEvent::Offline {
                    address,
                    reason: reason.clone(),
                });
                if r.online.swap(false, Ordering::AcqRel) {
                    if let Some(id) = reader_id {
                        ctx.status().set(id, false);
                    }
                    let why = match reason {
                        OfflineReason::NoReply => "it stopped answering",
                        OfflineReason::SequenceRejected => "it rejected a sequence number",
                        OfflineReason::Refused => "it failed the secure channel",
                        OfflineReason::SessionLost => "it dropped the secure session",
                        OfflineReason::UnexpectedReply { .. } => {
                            "it answered the connect sequence out of turn"
                        }
                    };
                    record(
                        "osdp-offline",
                        format!("OSDP reader {} is offline: {why}", r.connection),
                    );
                }
            }
            CpEvent::Refused { reason, .. } => {
                let _ = r.bus.send(CpEvent::Refused {
                    address,
                    reason: reason.clone(),
                });
                if let Some(id) = reader_id {
                    ctx.status().set(id, false);
                }
                if !r.refused {
                    r.refused = true;
                    let why = match &reason {
                        Refusal::Mac(e) => format!("a message authentication code did not verify ({e})"),
                        Refusal::Cryptogram => "its cryptogram does not match our key: the reader has another secure channel key".into(),
                        Refusal::HandshakeRefused(n) => format!("it refused the secure channel handshake (NAK {}): it does not accept this key (or the default key outside install mode)", n.code()),
                        Refusal::HandshakeReply(c) => format!("it answered the handshake with reply {c:#04x}"),
                        Refusal::KeySetRefused(n) => format!("it refused the new key (NAK {})", n.code()),
                    };
                    tracing::warn!(reader = %r.connection, reason = %why, "OSDP reader refused");
                    record("osdp-refused", format!("OSDP reader {} refused: {why}; it is not trusted until it passes the secure channel", r.connection));
                }
            }
            CpEvent::KeyInstalled { .. } => {
                if let Some(path) = r.install.take() {
                    let pending = pending_key_path(&path);
                    match std::fs::rename(&pending, &path).and_then(|()| {
                        let dir = path
                            .parent()
                            .filter(|p| !p.as_os_str().is_empty())
                            .unwrap_or(Path::new("."));
                        File::open(dir)?.sync_all()
                    }) {
                        Ok(()) => record(
                            "osdp-key-installed",
                            format!(
                                "OSDP reader {} took a new secure channel key, kept in {}",
                                r.connection,
                                path.display()
                            ),
                        ),
                        Err(e) => {
                            tracing::error!(error = %e, file = %path.display(), "the installed key could not be kept");
                            record(
                                "osdp-key-installed",
                                format!("OSDP reader {} took a new secure channel key, but it could not be moved from {} to {}: {e}", r.connection, pending.display(), path.display()),
                            );
                        }
                    }
                }
            }
            CpEvent::LocalStatus { tamper, power, .. } => {
                if tamper != r.tamper {
                    r.tamper = tamper;
                    if tamper {
                        record(
                            "osdp-tamper",
                            format!("OSDP reader {} reports tamper", r.connection),
                        );
                    } else {
                        record(
                            "osdp-tamper-cleared",
                            format!("OSDP reader {} reports tamper cleared", r.connection),
                        );
                    }
                }
                if power != r.power {
                    r.power = power;
                    if power {
                        record(
                            "osdp-power-failure",
                            format!("OSDP reader {} reports a power failure", r.connection),
                        );
                    } else {
                        record(
                            "osdp-power-restored",
                            format!("OSDP reader {} reports power restored", r.connection),
                        );
                    }
                }
            }
            CpEvent::InputStatus { inputs, .. }
            | CpEvent::Completed {
                reply: links::osdp::msg::Reply::InputStatus(inputs),
                ..
            } => match (
                watch,
                &r.door_io,
                // An I/O module's door is named in its configuration.
                match &r.door_name {
                    Some(name) => snapshot.doors().find(|d| d.name == *name).map(|d| d.id),
                    None => door,
                },
            ) {
                (Some(w), Some(io), Some(d)) => door_inputs(w, io, d, &inputs, &snapshot),
                (_, Some(_), None) => {
                    tracing::warn!(reader = %r.connection, door = r.door_name.as_deref(), "door inputs reported by an OSDP device bound to no door (or naming no door that exists)")
                }
                _ => {}
            },
            CpEvent::Card { card, .. } => {
                let _ = r.jobs.send(Job::Card(card));
            }
            CpEvent::CardText { reader, .. } => {
                let _ = r.jobs.send(Job::Text { reader });
            }
            CpEvent::CardPresence {
                reader,
                present: true,
                ..
            } => {
                let _ = r.jobs.send(Job::Present { reader });
            }
            CpEvent::CardPresence { present: false, .. } => {}
            CpEvent::Keypad { keys, .. } => {
                for k in keys {
                    match k {
                        b'0'..=b'9' if r.keys.len() < 16 => r.keys.push(char::from(k)),
                        b'0'..=b'9' => {}
                        // `#`: 0x0D in OSDP (and ASCII `#` from some readers).
                        0x0D | b'#' => {
                            let pin = std::mem::take(&mut *r.keys);
                            match door {
                                Some(d) => {
                                    let place = crate::keypad::Place {
                                        door: d,
                                        reader: reader_id,
                                        by: None,
                                    };
                                    if let Err(e) =
                                        ctx.keypads().enter_at(place, Zeroizing::new(pin))
                                    {
                                        tracing::info!(reader = %r.connection, error = %e, "keypad entry not accepted");
                                    }
                                }
                                None => {
                                    tracing::warn!(reader = %r.connection, "keypad entry at a reader bound to no door")
                                }
                            }
                        }
                        // `*`: 0x7F in OSDP.
                        _ => r.keys.clear(),
                    }
                }
            }
            e @ CpEvent::Completed {
                command: cmd::XWR, ..
            }
            | e @ CpEvent::Abandoned {
                command: cmd::XWR, ..
            } => {
                let _ = r.bus.send(e);
            }
            CpEvent::Completed { command, reply, .. } => {
                if let links::osdp::msg::Reply::Nak(n) = reply {
                    tracing::warn!(reader = %r.connection, command, nak = n.code(), "OSDP reader refused a command");
                }
            }
            CpEvent::Abandoned { .. } => {}
            CpEvent::BadReply { error, .. } => {
                tracing::debug!(reader = %r.connection, error = %error, "undecodable OSDP reply discarded");
            }
            CpEvent::BadFrame(_) => {}
        }
    }
    for b in bindings {
        if let Some(b) = b.last() {
            ctx.status().forget(b.reader);
        }
    }
    // The panel's thread ended: stopped, or its serial line failed.
    if let Err(e) = cp.shutdown() {
        tracing::error!(device = %device.display(), error = %e, "OSDP port failed; its readers are no longer served until a restart");
    }
}

/// Hands the door's inputs in an `osdp_ISTATR` report to the door watch.
fn door_inputs(w: &DoorWatch, io: &DoorIo, door: DoorId, report: &[u8], snapshot: &AccessSnapshot) {
    if !w.is_watched(door) {
        w.watch(door, io.setup.clone());
        // A door found in unlocked mode opens freely from the start.
        if snapshot
            .door(door)
            .is_some_and(|d| d.mode == DoorMode::Unlocked)
        {
            w.unlocked(door, true);
        }
    }
    for (role, n) in &io.inputs {
        match report.get(usize::from(*n)) {
            Some(v) => w.input(door, *role, Line::from_report(*v)),
            None => tracing::warn!(
                door = door.0,
                input = n,
                reported = report.len(),
                "a configured door input is beyond those the reader reports"
            ),
        }
    }
}

/// The FASC-N a 200-bit card-data frame carries (SP 800-73-4's 200-bit
/// encoding, every character's parity and the LRC checked), if it is one.
fn claimed_fasc_n(card: &links::osdp::msg::RawCard) -> Option<access::FascN> {
    if card.bits != 200 || card.data.len() != 25 {
        return None;
    }
    let bits = links::wiegand::Bits::from_bytes(&card.data, 200);
    links::wiegand::decode_fascn(&bits).ok()?;
    let mut raw = [0u8; 25];
    raw.copy_from_slice(&card.data);
    Some(access::FascN(raw))
}

/// One reader's taps.
struct TapWorker {
    ctx: Arc<TapContext>,
    commander: CpCommander,
    address: u8,
    connection: String,
    transparent: Arc<AtomicBool>,
}

impl TapWorker {
    fn run(self, jobs: mpsc::Receiver<Job>, bus: mpsc::Receiver<CpEvent>) {
        let mut bus = Some(bus);
        let mut binding = Binding::new();
        while let Ok(job) = jobs.recv() {
            let reader = match &job {
                Job::Card(c) => c.reader,
                Job::Text { reader } | Job::Present { reader } => *reader,
            };
            let Some(bound) = binding.get(&self.ctx.snapshot(), &self.connection) else {
                tracing::warn!(reader = %self.connection, "card at an OSDP reader bound to no door: add a reader with this connection to a door");
                continue;
            };
            let granted = if self.transparent.load(Ordering::Acquire) {
                let Some(events) = bus.take() else { break };
                // Answers to an earlier, abandoned exchange are stale.
                while events.try_recv().is_ok() {}
                let shared_bus = SharedBus {
                    commander: self.commander.clone(),
                    events,
                };
                let mut transport = OsdpTransport::new(shared_bus, self.address, reader);
                let result = self.ctx.tap(&mut transport, bound.reader);
                bus = Some(transport.into_inner().events);
                result.is_ok_and(|r| r.granted())
            } else {
                self.refuse_card_data(&job, bound);
                false
            };
            self.feedback(reader, granted);
        }
    }

    /// Card data without the card: no mechanism accepts it.
    fn refuse_card_data(&self, job: &Job, bound: Bound) {
        let (what, detail) = match job {
            Job::Card(c) => (
                "osdp_RAW",
                serde_json::json!({ "link": "osdp", "card_data": "raw", "format": c.format, "bits": c.bits }),
            ),
            Job::Text { .. } => (
                "osdp_FMT",
                serde_json::json!({ "link": "osdp", "card_data": "formatted" }),
            ),
            // A card-present report from a reader whose capabilities did not
            // offer transparent smart-card access: nothing can be asked of the card.
            Job::Present { .. } => (
                "an osdp_XRD card-present report",
                serde_json::json!({ "link": "osdp", "card_data": "presence" }),
            ),
        };
        let reason = format!(
            "OSDP reader {} sent card data ({what}) without transparent smart-card access: card data can be copied and the reader is not trusted, and no door mechanism (PKI-CAK, PKI-AUTH, CHUID) accepts it — use a reader with transparent mode (osdp_XWR)",
            self.connection
        );
        tracing::info!(reader = %self.connection, "card data without transparent mode refused");
        let mut detail = detail;
        let mut event = NewEvent::refused_tap(
            Timestamp::now(),
            bound.door,
            Some(bound.reader),
            UNTRUSTED_CARD_DATA,
            reason,
            serde_json::Value::Null,
        );
        // A 200-bit frame is a FASC-N (its parity and LRC checked): the event
        // names the credential it claims to be, so an operator sees whose card
        // data was offered. It identifies; it never grants.
        if let Job::Card(c) = job {
            if let Some(fasc_n) = claimed_fasc_n(c) {
                detail["fasc_n"] = serde_json::Value::String(fasc_n.to_string());
                let snapshot = self.ctx.snapshot();
                if let Some(cred) = snapshot.credential_by_fasc_n(&fasc_n) {
                    event.credential = Some(cred.id);
                    event.cardholder = Some(cred.cardholder);
                }
            }
        }
        event.data = Some(detail);
        self.ctx.record(event);
    }

    /// Green LED and a short beep for a grant; red LED and three beeps for
    /// a refusal. Sent without waiting for the panel's thread.
    fn feedback(&self, reader: u8, granted: bool) {
        let (on_color, beeps) = if granted {
            (color::GREEN, 1)
        } else {
            (color::RED, 3)
        };
        self.commander.send(
            self.address,
            Command::Led(vec![LedControl {
                reader,
                led: 0,
                temporary: LedState {
                    control_code: 2,
                    on_time: 20,
                    off_time: 0,
                    on_color,
                    off_color: color::BLACK,
                },
                timer: 20,
                permanent: LedState::default(),
            }]),
        );
        self.commander.send(
            self.address,
            Command::Buzzer(BuzzerControl {
                reader,
                tone: 2,
                on_time: 1,
                off_time: 1,
                count: beeps,
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_mode_offers_the_same_pending_key_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let reader = OsdpReader {
            address: 1,
            key_file: Some(dir.path().join("k")),
            install_mode: true,
            secure: true,
            lock_output: None,
            unlock_ms: None,
            door: None,
        };
        let port = OsdpPort {
            device: "/dev/null".into(),
            baud: 9600,
            readers: vec![reader.clone()],
            io: vec![],
        };
        let first = plan_reader("r", &port, &reader).unwrap();
        let second = plan_reader("r", &port, &reader).unwrap();
        assert!(first.setup.install_mode && second.setup.install_mode);
        assert!(first.setup.scbk.is_some());
        assert_eq!(first.setup.scbk, second.setup.scbk);
    }

    #[test]
    fn key_files_are_written_fresh_never_through_links_or_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        let key = Key([0x5A; 16]);
        // A symbolic link planted at the predictable temporary name and at
        // the key file itself, and an old file readable by everyone.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "untouched").unwrap();
        std::os::unix::fs::symlink(&victim, p.with_extension("tmp")).unwrap();
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        write_key_file(&p, &key).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "untouched");
        let meta = std::fs::symlink_metadata(&p).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(read_key_file(&p, "k").unwrap(), key);

        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_key_file(&p, &key).unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn key_files_are_read_and_written_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        let key = Key([0xA5; 16]);
        write_key_file(&p, &key).unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(read_key_file(&p, "k").unwrap(), key);
        // Upper case and surrounding white space are fine.
        std::fs::write(&p, format!("  {}\n", hex::encode_upper(key.0))).unwrap();
        assert_eq!(read_key_file(&p, "k").unwrap(), key);
        std::fs::write(&p, hex::encode([1u8; 15])).unwrap();
        let e = read_key_file(&p, "x.key_file").unwrap_err().to_string();
        assert!(e.starts_with("`x.key_file`: "), "{e}");
        assert!(e.contains("32 hex digits"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = read_key_file(&p, "k").unwrap_err().to_string();
        assert!(e.contains("mode 0640") && e.contains("chmod 600"), "{e}");
        let e = read_key_file(&dir.path().join("none"), "k")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot read"), "{e}");
    }

    #[test]
    fn output_timers_round_up_to_100_ms() {
        assert_eq!(timer_units(Duration::from_millis(5000)), 50);
        assert_eq!(timer_units(Duration::from_millis(1)), 1);
        assert_eq!(timer_units(Duration::from_millis(250)), 3);
        assert_eq!(timer_units(Duration::from_secs(100_000)), u16::MAX);
    }
}
