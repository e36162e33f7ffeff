//! OSDP from the command line: `pivgate reader osdp` (this host's card
//! reader offered to an OSDP panel as a reader in transparent mode), the
//! panel side `pivgate auth --osdp`, the secure-channel key files both use,
//! and `--wiegand-out`, the frame a Wiegand module would send its panel.

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::pcsc_watch::PcscSlot;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use host::{Readers, Transport, TransportError};
use links::osdp::cp::{ControlPanel, CpConfig, CpEvent, PdSetup};
use links::osdp::msg::{BuzzerControl, LedControl, OutputControl, PdId, XrdReply, XwrRequest};
use links::osdp::pd::{PdApp, PdConfig, PdEvent, PeripheralDevice};
use links::osdp::sc::Key;
use links::serial::{open_serial, CpHandle, Link, PdHandle, PdRemote};
use links::transparent::{CardBridge, OsdpTransport};
use links::wiegand::{self, Bits, Timing, WiegandOutput};
use std::process::ExitCode;
use zeroize::Zeroizing;

/// The baud rates of OSDP v2.2.
const BAUDS: [u32; 6] = [9600, 19200, 38400, 57600, 115200, 230400];

#[derive(Subcommand)]
pub enum ReaderCommand {
    /// Offer this host's card reader to an OSDP control panel as an OSDP
    /// reader (peripheral device) in transparent mode: the panel sends the
    /// card's APDUs in osdp_XWR and gets the answers in osdp_XRD, so it runs
    /// PKI-CAK itself and need not trust this reader. A card's arrival and
    /// removal are reported on the next poll (osdp_PR01PRES); the card is
    /// watched with SCardGetStatusChange, not polled.
    ///
    /// Secure by default: the secure channel is required, with the key in
    /// --key-file (32 hex digits, mode 0600), or --install-mode to accept the
    /// standard's default key until the panel installs one with osdp_KEYSET
    /// (written to --key-file when given). --insecure runs without the secure
    /// channel: the APDUs then cross the wire in clear.
    ///
    /// Link events (secure channel up, key installed, bad frames, MAC
    /// failures, LED, buzzer and output requests) are logged on standard
    /// error. Runs until SIGINT or SIGTERM.
    Osdp(ReaderOsdpArgs),
    /// Connect this host's card reader to a door service over the network.
    ///
    /// The card comes from a PC/SC reader (default), a software card image
    /// (--card-image), or an OSDP reader on a serial line (--osdp): this
    /// process is then the reader's control panel, relays the service's
    /// APDUs to the card in transparent mode and reports each card arrival
    /// and removal the reader signals. The secure channel is set up as for
    /// `pivgate auth --osdp`: --key-file (32 hex digits, mode 0600),
    /// --install-mode to install that key in a reader still on the default
    /// key, or --insecure.
    ///
    /// Runs until SIGINT or SIGTERM, or until the card source fails.
    Connect(crate::remote_cmd::ReaderConnectArgs),
}

#[derive(Args)]
pub struct ReaderOsdpArgs {
    /// The serial device of the OSDP bus (an RS-485 adapter, e.g.
    /// /dev/ttyUSB0, or one side of a pseudo-terminal pair).
    #[arg(long, value_name = "DEV")]
    serial: PathBuf,
    /// This reader's address on the bus (0–126).
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=126))]
    address: u8,
    /// Line speed.
    #[arg(long, default_value_t = 9600, value_parser = parse_baud)]
    baud: u32,
    #[command(flatten)]
    security: Security,
    /// The PC/SC reader whose card is offered (default: the first reader).
    #[arg(long, conflicts_with = "card_image")]
    reader: Option<String>,
    /// Offer a software PIV card image instead of a PC/SC reader's card (for
    /// trying a panel without pcscd). The card is present from the start.
    #[arg(long, value_name = "FILE")]
    card_image: Option<PathBuf>,
}

/// How the secure channel is set up (panel and reader alike).
#[derive(Args, Clone)]
pub struct Security {
    /// The secure channel base key (SCBK): a file holding 32 hex digits,
    /// readable by its owner only (mode 0600).
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// Install mode: connect with the standard's default key (SCBK-D), then
    /// install the key of --key-file with osdp_KEYSET. A reader in install
    /// mode accepts SCBK-D until a panel installs a key. It is one-shot: once
    /// --key-file exists, the flag is ignored with a warning and only that
    /// key is accepted.
    #[arg(long)]
    install_mode: bool,
    /// No secure channel: APDUs and card data cross the wire in clear, and
    /// anyone on the bus can impersonate either side.
    #[arg(long, conflicts_with_all = ["key_file", "install_mode"])]
    insecure: bool,
}

impl Security {
    /// Whether any of the flags was given.
    pub fn given(&self) -> bool {
        self.key_file.is_some() || self.install_mode || self.insecure
    }
}

pub(crate) fn parse_baud(s: &str) -> Result<u32, String> {
    let b: u32 = s.parse().map_err(|_| format!("`{s}` is not a baud rate"))?;
    if BAUDS.contains(&b) {
        Ok(b)
    } else {
        Err(format!("OSDP runs at {BAUDS:?} baud, not {b}"))
    }
}

/// Reads a secure channel key file: 32 hex digits (surrounding white space
/// allowed), in a file nobody but its owner can read.
pub fn load_key(path: &Path) -> Result<Key> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read the key file {}", path.display()))?;
    if !meta.is_file() {
        bail!("the key file {} is not a regular file", path.display());
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "the key file {} can be read by others (mode {mode:04o}); run `chmod 600 {}`",
            path.display(),
            path.display()
        );
    }
    let text = Zeroizing::new(
        std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the key file {}", path.display()))?,
    );
    let hex_text = text.trim();
    let mut k = Key([0u8; 16]);
    if hex_text.len() != 32 || hex::decode_to_slice(hex_text, &mut k.0).is_err() {
        bail!(
            "the key file {} must hold one AES-128 key as 32 hex digits",
            path.display()
        );
    }
    Ok(k)
}

/// Writes a key file with mode 0600, replacing the file atomically and
/// durably: the key goes to a fresh, unpredictably named file of the same
/// directory (created 0600, never through a symbolic link), which is synced
/// and renamed over `path`; then the directory is synced.
pub fn store_key(path: &Path, key: &Key) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    let text = Zeroizing::new(format!("{}\n", hex::encode(key.0)));
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    File::open(dir)?.sync_all()
}

/// Pseudo-terminals deliver at once; a real UART paces itself. Pace writes
/// when the device is a pseudo-terminal, so link time is real either way.
fn link_for(dev: &Path, baud: u32) -> Link {
    let real = std::fs::canonicalize(dev).unwrap_or_else(|_| dev.to_path_buf());
    Link {
        baud,
        pace: real.starts_with("/dev/pts"),
    }
}

// ---------------------------------------------------------------- reader side

/// The reader's application: transparent mode through the bridge, keys
/// persisted, and the panel's feedback requests logged.
struct ReaderApp {
    bridge: CardBridge,
    key_file: Option<PathBuf>,
}

impl PdApp for ReaderApp {
    fn transparent(&mut self, request: &XwrRequest) -> Option<XrdReply> {
        self.bridge.transparent(request)
    }
    fn keyset(&mut self, key: &Key) -> bool {
        match &self.key_file {
            Some(path) => match store_key(path, key) {
                Ok(()) => {
                    eprintln!(
                        "osdp: the panel installed a new key; saved to {}",
                        path.display()
                    );
                    true
                }
                Err(e) => {
                    eprintln!(
                        "osdp: the panel sent a new key but {} could not be written ({e}); refused",
                        path.display()
                    );
                    false
                }
            },
            None => {
                eprintln!(
                    "osdp: the panel installed a new key; it is kept in memory only (no --key-file)"
                );
                true
            }
        }
    }
    fn led(&mut self, control: &LedControl) {
        eprintln!("osdp: LED {control:?}");
    }
    fn buzzer(&mut self, control: &BuzzerControl) {
        eprintln!("osdp: buzzer {control:?}");
    }
    fn output(&mut self, control: &OutputControl) {
        eprintln!("osdp: output {control:?}");
    }
}

fn pd_event_text(e: &PdEvent) -> String {
    match e {
        PdEvent::Secured { default_key: true } => {
            "secure channel up with the default key (install mode)".into()
        }
        PdEvent::Secured { default_key: false } => "secure channel up".into(),
        PdEvent::KeyInstalled => "key installed; install mode is over".into(),
        PdEvent::Reset => "the panel (re)connected".into(),
        PdEvent::SecurityFailure(e) => format!("secure channel failure, session dropped: {e}"),
        PdEvent::CryptogramMismatch => {
            "the panel's cryptogram does not match: it holds another key".into()
        }
        PdEvent::BadFrame(e) => format!("bad frame discarded: {e}"),
        PdEvent::BadCommand(e) => format!("bad command answered with NAK: {e}"),
    }
}

/// Watches one PC/SC reader and reports each arrival and removal to the
/// panel. Blocks in SCardGetStatusChange until a change or a cancel.
fn watch_pcsc(ctx: pcsc::Context, name: String, remote: PdRemote, stopping: Arc<AtomicBool>) {
    let r = crate::pcsc_watch::watch(&ctx, &name, |now| {
        eprintln!(
            "osdp: card {} reader {name:?}",
            if now { "presented to" } else { "removed from" }
        );
        remote.card_presence(0, now);
    });
    if let Err(e) = r {
        if !stopping.load(Ordering::SeqCst) {
            eprintln!("osdp: cannot watch reader {name:?} any more: {e}; stopping");
            remote.stop();
        }
    }
}

pub fn run(cmd: ReaderCommand) -> Result<ExitCode> {
    match cmd {
        ReaderCommand::Osdp(a) => reader_osdp(a),
        ReaderCommand::Connect(a) => crate::remote_cmd::connect(a),
    }
}

fn reader_osdp(a: ReaderOsdpArgs) -> Result<ExitCode> {
    let s = &a.security;
    if !s.insecure && s.key_file.is_none() && !s.install_mode {
        bail!(
            "the secure channel needs a key: pass --key-file FILE (32 hex digits, mode 0600), \
             or --install-mode to receive one from the panel; --insecure runs without it"
        );
    }
    // Install mode ends with the first installed key: once the key file
    // exists, SCBK-D is never accepted again, whatever the flags say.
    let (scbk, install_mode) = match &s.key_file {
        Some(p) if s.install_mode && std::fs::symlink_metadata(p).is_err() => (None, true),
        Some(p) => {
            if s.install_mode {
                eprintln!(
                    "osdp: warning: --install-mode ignored: the key file {} exists, so a key \
                     is installed already and only it is accepted",
                    p.display()
                );
            }
            (Some(load_key(p)?), false)
        }
        None => (None, s.install_mode),
    };
    let stopping = Arc::new(AtomicBool::new(false));
    let (slot, watch): (Box<dyn Transport + Send>, Option<(pcsc::Context, String)>) =
        match &a.card_image {
            Some(path) => {
                let image = card::image::CardImage::load(path)
                    .with_context(|| format!("loading the card image {}", path.display()))?;
                (Box::new(host::InProcess::new(card::Card::new(image))), None)
            }
            None => {
                let readers = Readers::establish().context("connecting to the PC/SC service")?;
                let name = readers
                    .pick(a.reader.as_deref())
                    .context("choosing the PC/SC reader")?;
                let ctx = pcsc::Context::establish(pcsc::Scope::User)
                    .context("connecting to the PC/SC service")?;
                (
                    Box::new(PcscSlot::new(readers, name.clone())),
                    Some((ctx, name)),
                )
            }
        };
    let port = open_serial(&a.serial, a.baud)
        .with_context(|| format!("opening the serial device {}", a.serial.display()))?;
    let mut cfg = PdConfig::reader(
        a.address,
        PdId {
            vendor: [0, 0, 0],
            model: 1,
            version: 1,
            serial: std::process::id(),
            firmware: [0, 1, 0],
        },
    );
    cfg.scbk = scbk;
    cfg.install_mode = install_mode;
    cfg.require_secure = !s.insecure;
    let app = ReaderApp {
        bridge: CardBridge::new(slot, 0),
        key_file: s.key_file.clone(),
    };
    let link = link_for(&a.serial, a.baud);
    let pd = PdHandle::spawn(port, PeripheralDevice::new(cfg), Box::new(app), link)
        .context("starting the OSDP reader")?;
    let source = match &watch {
        Some((_, name)) => format!("PC/SC reader {name:?}"),
        None => "a software card".to_string(),
    };
    eprintln!(
        "osdp: reader at address {} on {} at {} baud{}, offering {source}; {}",
        a.address,
        a.serial.display(),
        a.baud,
        if link.pace { " (paced)" } else { "" },
        if s.insecure {
            "NO secure channel (--insecure)"
        } else if install_mode {
            "secure channel, install mode"
        } else {
            "secure channel required"
        }
    );

    // SIGINT / SIGTERM stop the device (and the card watch).
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .context("cannot install signal handlers")?;
    let stopper = pd.remote().context("starting the OSDP reader")?;
    let cancel = watch.as_ref().map(|(ctx, _)| ctx.clone());
    let cancel_at_end = cancel.clone();
    {
        let stopping = stopping.clone();
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                stopping.store(true, Ordering::SeqCst);
                if let Some(c) = &cancel {
                    let _ = c.cancel();
                }
                stopper.stop();
            }
        });
    }
    let watcher = match watch {
        Some((ctx, name)) => {
            let remote = pd.remote().context("starting the card watch")?;
            let stopping = stopping.clone();
            Some(std::thread::spawn(move || {
                watch_pcsc(ctx, name, remote, stopping)
            }))
        }
        None => {
            pd.card_presence(0, true);
            None
        }
    };
    while let Ok(e) = pd.events().recv() {
        eprintln!("osdp: {}", pd_event_text(&e));
    }
    let stats = pd.shutdown();
    let by_signal = stopping.swap(true, Ordering::SeqCst);
    if let Some(w) = watcher {
        if let Some(c) = &cancel_at_end {
            let _ = c.cancel();
        }
        let _ = w.join();
    }
    let stats = stats.context("the OSDP reader failed")?;
    eprintln!(
        "osdp: stopped; {} bytes received, {} sent ({:.1} ms of line time)",
        stats.rx_bytes,
        stats.tx_bytes,
        stats.wire_time().as_secs_f64() * 1e3
    );
    Ok(if by_signal {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

// ----------------------------------------------------------------- panel side

/// `pivgate auth --osdp`: this process is the OSDP control panel and runs
/// the mechanism through the reader in transparent mode.
#[derive(Args)]
pub struct PanelArgs {
    /// Authenticate through an OSDP reader on this serial device instead of
    /// a PC/SC reader: this process is the control panel, the reader (e.g.
    /// `pivgate reader osdp`) relays the card's APDUs in transparent mode,
    /// and the printed transaction shows the link's share of the tap.
    #[arg(long, value_name = "DEV", requires = "address")]
    pub osdp: Option<PathBuf>,
    /// The reader's address on the bus (with --osdp).
    #[arg(long, requires = "osdp", value_parser = clap::value_parser!(u8).range(0..=126))]
    pub address: Option<u8>,
    /// Line speed (with --osdp).
    #[arg(long, default_value_t = 9600, value_parser = parse_baud)]
    pub baud: u32,
    #[command(flatten)]
    pub security: Security,
}

/// Starts this process as the control panel of the reader at `address` on
/// serial device `dev` and waits (up to `wait`, or without end) for it to
/// come online: after the secure channel as `security` sets it up, and in
/// install mode after the key of --key-file is installed. Returns the panel
/// and when the wait began.
pub fn open_panel(
    dev: &Path,
    address: u8,
    baud: u32,
    security: &Security,
    wait: Option<Duration>,
) -> Result<(CpHandle, Instant)> {
    let s = security;
    let setup = match (&s.key_file, s.install_mode, s.insecure) {
        (_, _, true) => PdSetup::plain(address),
        (Some(k), install, false) => PdSetup {
            address,
            scbk: Some(load_key(k)?),
            install_mode: install,
        },
        (None, true, false) => {
            bail!("--install-mode installs the key of --key-file: pass --key-file too")
        }
        (None, false, false) => bail!(
            "the secure channel needs a key: pass --key-file FILE (32 hex digits, mode 0600); \
             --insecure runs without it"
        ),
    };
    let secure = setup.scbk.is_some();
    let port = open_serial(dev, baud)
        .with_context(|| format!("opening the serial device {}", dev.display()))?;
    let cp = CpHandle::spawn(
        port,
        ControlPanel::new(CpConfig::default(), vec![setup]),
        link_for(dev, baud),
    )
    .context("starting the OSDP control panel")?;
    let start = Instant::now();
    let left = wait
        .map(|w| w.saturating_sub(start.elapsed()))
        .unwrap_or(Duration::from_secs(365 * 86_400));
    // Online (after the secure channel, and a key installation in install mode).
    let mut refused = None;
    let online = cp.wait_for(left, |e| match e {
        CpEvent::Online { address: x, .. } => *x == address,
        CpEvent::Refused { address: x, reason } if *x == address => {
            refused = Some(format!("{reason:?}"));
            true
        }
        CpEvent::KeyInstalled { address: x } if *x == address => {
            eprintln!("osdp: installed the key of --key-file in the reader");
            false
        }
        _ => false,
    });
    match online {
        Some(CpEvent::Online { secure: got, .. }) if got == secure => Ok((cp, start)),
        Some(CpEvent::Online { .. }) => bail!("the reader came online without the secure channel"),
        Some(_) => bail!(
            "the reader at address {address} failed the secure channel ({}); is the key right?",
            refused.unwrap_or_default()
        ),
        None => bail!(
            "no OSDP reader answered at address {address} on {} at {baud} baud",
            dev.display()
        ),
    }
}

/// Connects to the reader and waits for a card. Returns the transport and
/// the time from the start of the wait to the card being seen.
pub fn connect_panel(
    a: &PanelArgs,
    dev: &Path,
    wait: Option<Duration>,
) -> Result<(OsdpTransport, Duration)> {
    let address = a.address.context("--osdp needs --address")?;
    let (cp, start) = open_panel(dev, address, a.baud, &a.security, wait)?;
    let forever = Duration::from_secs(365 * 86_400);
    let left = |start: Instant| {
        wait.map(|w| w.saturating_sub(start.elapsed()))
            .unwrap_or(forever)
    };
    let mut transport = OsdpTransport::new(cp, address, 0);
    loop {
        match transport.reconnect(false) {
            Ok(()) => return Ok((transport, start.elapsed())),
            Err(TransportError::NoCard(_)) => {}
            Err(e) => return Err(e).context("asking the reader for its card"),
        }
        let cp = transport.into_inner();
        let ev = cp.wait_for(left(start), |e| match e {
            CpEvent::CardPresence {
                address: x,
                present: true,
                ..
            } => *x == address,
            CpEvent::Offline { address: x, .. } => *x == address,
            _ => false,
        });
        match ev {
            Some(CpEvent::CardPresence { .. }) => {}
            Some(_) => bail!("the reader went offline while waiting for a card"),
            None => bail!(
                "timed out after {:?} waiting for a card",
                wait.unwrap_or(forever)
            ),
        }
        transport = OsdpTransport::new(cp, address, 0);
    }
}

// -------------------------------------------------------------- Wiegand output

#[derive(Clone, Copy, ValueEnum)]
pub enum WiegandFormat {
    /// The full 25-byte FASC-N, 200 bits.
    Fascn200,
    /// 26-bit H10301: --wiegand-facility and the FASC-N credential number
    /// (which must be below 65536).
    H10301,
}

/// Where a granted tap's credential goes as a Wiegand frame.
#[derive(Args)]
pub struct WiegandArgs {
    /// After a granted tap, write the Wiegand frame a reader module would
    /// send its legacy panel: the bits, each pulse's offset and line
    /// (DATA0/DATA1), and the frame's time on the wire — to FILE, or `-` for
    /// standard output. This records the frame; it drives no GPIO lines.
    #[arg(long, value_name = "FILE|-")]
    pub wiegand_out: Option<String>,
    /// Frame format.
    #[arg(long, value_enum, default_value = "fascn200")]
    pub wiegand_format: WiegandFormat,
    /// Facility code for H10301 (0–255).
    #[arg(long)]
    pub wiegand_facility: Option<u8>,
    /// Pulse width in microseconds.
    #[arg(long, default_value_t = 50)]
    pub wiegand_pulse_us: u64,
    /// Time from one pulse's start to the next one's, in microseconds.
    #[arg(long, default_value_t = 2000)]
    pub wiegand_interval_us: u64,
}

/// The frame of a credential, its timing and its text record.
pub struct WiegandFrame {
    pub name: &'static str,
    pub bits: Bits,
    pub timing: Timing,
}

impl WiegandArgs {
    pub fn frame(&self, fascn: Option<&piv::fascn::Fascn>) -> Result<WiegandFrame> {
        if self.wiegand_pulse_us == 0 || self.wiegand_pulse_us >= self.wiegand_interval_us {
            bail!("--wiegand-pulse-us must be above 0 and below --wiegand-interval-us");
        }
        let fascn = fascn.context("the card has no FASC-N to send over Wiegand")?;
        let timing = Timing {
            pulse_width: Duration::from_micros(self.wiegand_pulse_us),
            bit_interval: Duration::from_micros(self.wiegand_interval_us),
        };
        let (name, bits) = match self.wiegand_format {
            WiegandFormat::Fascn200 => (
                "FASC-N",
                wiegand::encode_fascn(fascn).context("encoding the FASC-N")?,
            ),
            WiegandFormat::H10301 => {
                let facility = self
                    .wiegand_facility
                    .context("H10301 needs --wiegand-facility")?;
                let card: u16 = fascn.credential_number.parse().map_err(|_| {
                    anyhow::anyhow!(
                        "the FASC-N credential number {} does not fit H10301's 16-bit card number",
                        fascn.credential_number
                    )
                })?;
                ("H10301", wiegand::H10301 { facility, card }.encode())
            }
        };
        Ok(WiegandFrame { name, bits, timing })
    }
}

impl WiegandFrame {
    pub fn wire_time(&self) -> Duration {
        self.timing.frame_time(self.bits.len())
    }

    /// The record written by `--wiegand-out`: comment lines, then one line
    /// per pulse, `offset_us DATA0|DATA1`.
    pub fn record(&self) -> String {
        use std::fmt::Write as _;
        let mut line = wiegand::RecordedLine::default();
        // A recorded line cannot fail.
        let _ = line.send(&self.bits, &self.timing);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# wiegand {}: {} bits, pulse {} us every {} us, {:.1} ms on the wire",
            self.name,
            self.bits.len(),
            self.timing.pulse_width.as_micros(),
            self.timing.bit_interval.as_micros(),
            self.wire_time().as_secs_f64() * 1e3
        );
        let bits: String = self
            .bits
            .0
            .iter()
            .map(|&b| if b { '1' } else { '0' })
            .collect();
        let _ = writeln!(s, "# bits {bits}");
        let _ = writeln!(s, "# hex {}", hex::encode(self.bits.to_bytes()));
        for (frame, _) in &line.frames {
            for (at, one) in frame {
                let _ = writeln!(
                    s,
                    "{} {}",
                    at.as_micros(),
                    if *one { "DATA1" } else { "DATA0" }
                );
            }
        }
        s
    }

    pub fn write(&self, to: &str) -> Result<()> {
        let text = self.record();
        if to == "-" {
            print!("{text}");
            return Ok(());
        }
        let mut f = File::create(to).with_context(|| format!("cannot write {to}"))?;
        f.write_all(text.as_bytes())
            .with_context(|| format!("cannot write {to}"))
    }
}
