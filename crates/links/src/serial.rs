//! The serial adapter: a tty in raw mode (a real RS-485 adapter, or one side
//! of a pseudo-terminal pair in tests), a pacer that holds the line for the
//! time the bytes take at the configured baud rate, and one thread per state
//! machine that blocks in `poll(2)` on the line and a wake-up socket — never
//! sleeping to look for input.
//!
//! Pacing: a UART sends 10 bits per byte (start, 8 data, stop), so a frame of
//! `n` bytes occupies the line for `n × 10 / baud` seconds. A pseudo-terminal
//! delivers instantly; [`Link::paced`] makes it behave like the real line by
//! writing in small slices, each no earlier than the line would have carried
//! the bytes before it.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::{Mode, OFlags};
use rustix::pty::OpenptFlags;
use rustix::termios::{tcflush, tcgetattr, tcsetattr, OptionalActions, QueueSelector};

use crate::osdp::cp::{ControlPanel, CpError, CpEvent, Ticket};
use crate::osdp::msg::{Command, RawCard};
use crate::osdp::pd::{PdApp, PdEvent, PeripheralDevice};

/// The time `bytes` bytes occupy a UART line at `baud` (10 bits per byte).
pub fn wire_time(bytes: usize, baud: u32) -> Duration {
    if baud == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos((bytes as u64) * 10 * 1_000_000_000 / u64::from(baud))
}

/// Line settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// Bits per second (OSDP: 9600, 19200, 38400, 57600, 115200, 230400).
    pub baud: u32,
    /// Pace writes at `baud` (for pseudo-terminals; a real UART paces itself).
    pub pace: bool,
}

impl Link {
    /// A pseudo-terminal made to behave like a line at `baud`.
    pub fn paced(baud: u32) -> Link {
        Link { baud, pace: true }
    }
}

/// Puts a tty in raw mode (no echo, no line editing, 8N1) and sets its speed.
pub fn set_raw(fd: BorrowedFd<'_>, baud: Option<u32>) -> io::Result<()> {
    let mut t = tcgetattr(fd)?;
    t.make_raw();
    if let Some(b) = baud {
        t.set_speed(b)?;
    }
    tcsetattr(fd, OptionalActions::Now, &t)?;
    Ok(())
}

/// Opens a serial device in raw mode at `baud`.
pub fn open_serial(path: &Path, baud: u32) -> io::Result<File> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    set_raw(fd.as_fd(), Some(baud))?;
    // What arrived before this process was listening is not for it: a
    // half-received frame, or — on a pseudo-terminal, which keeps what is
    // written while nobody reads — the packets a panel sent to a reader
    // that had stopped, which a restarted reader would otherwise take as
    // secure-channel packets of a session it does not have.
    tcflush(fd.as_fd(), QueueSelector::IFlush)?;
    Ok(File::from(fd))
}

/// A pseudo-terminal pair in raw mode. The subordinate side stays open here so
/// the controlling side never reads end-of-file while a peer process starts.
pub struct Pty {
    pub master: File,
    pub slave: File,
    pub slave_path: PathBuf,
}

impl Pty {
    pub fn open() -> io::Result<Pty> {
        let master =
            rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
        rustix::pty::grantpt(&master)?;
        rustix::pty::unlockpt(&master)?;
        let name = rustix::pty::ptsname(&master, Vec::new())?;
        let slave_path = PathBuf::from(name.to_string_lossy().into_owned());
        let slave = rustix::fs::open(
            &slave_path,
            OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        set_raw(slave.as_fd(), None)?;
        set_raw(master.as_fd(), None)?;
        Ok(Pty {
            master: File::from(master),
            slave: File::from(slave),
            slave_path,
        })
    }
}

/// A panel's line counters: the whole line's, and each device's share.
#[derive(Debug, Default)]
struct Counters {
    line: LineStats,
    devices: HashMap<u8, LineStats>,
}

impl Counters {
    /// Counts bytes sent and received, for device `address` too when known.
    fn count(&mut self, address: Option<u8>, tx: usize, rx: usize, baud: u32) {
        self.line.count(tx, rx, baud);
        if let Some(a) = address {
            self.devices.entry(a).or_default().count(tx, rx, baud);
        }
    }
}

/// Byte and time counters of one side of a line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineStats {
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    /// Time the transmitted bytes held the line at the configured baud rate.
    pub tx_wire_time: Duration,
    /// Time the received bytes held the line at the configured baud rate.
    pub rx_wire_time: Duration,
}

impl LineStats {
    fn count(&mut self, tx: usize, rx: usize, baud: u32) {
        self.tx_bytes += tx as u64;
        self.rx_bytes += rx as u64;
        self.tx_wire_time = wire_time(self.tx_bytes as usize, baud);
        self.rx_wire_time = wire_time(self.rx_bytes as usize, baud);
    }

    /// Line time in both directions.
    pub fn wire_time(&self) -> Duration {
        self.tx_wire_time + self.rx_wire_time
    }

    /// What happened since `earlier` (a snapshot of the same counters).
    pub fn since(&self, earlier: &LineStats) -> LineStats {
        LineStats {
            tx_bytes: self.tx_bytes - earlier.tx_bytes,
            rx_bytes: self.rx_bytes - earlier.rx_bytes,
            tx_wire_time: self.tx_wire_time.saturating_sub(earlier.tx_wire_time),
            rx_wire_time: self.rx_wire_time.saturating_sub(earlier.rx_wire_time),
        }
    }
}

/// Writes `bytes`, paced at the link's rate when asked.
pub fn write_paced(port: &mut File, bytes: &[u8], link: Link) -> io::Result<()> {
    if !link.pace || link.baud == 0 {
        port.write_all(bytes)?;
        return port.flush();
    }
    // Slices of about one millisecond of line time.
    let slice = ((link.baud / 10 / 1000) as usize).max(1);
    let start = Instant::now();
    let mut sent = 0;
    for chunk in bytes.chunks(slice) {
        let due = start + wire_time(sent + chunk.len(), link.baud);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        port.write_all(chunk)?;
        sent += chunk.len();
    }
    port.flush()
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs() as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}

/// Waits until the port is readable, the waker rings, or `timeout` passes.
/// Returns (port readable, waker rang).
fn wait(port: &File, waker: &UnixStream, timeout: Option<Duration>) -> io::Result<(bool, bool)> {
    let mut fds = [
        PollFd::new(port, PollFlags::IN),
        PollFd::new(waker, PollFlags::IN),
    ];
    let ts = timeout.map(timespec);
    match poll(&mut fds, ts.as_ref()) {
        Ok(_) => {}
        Err(rustix::io::Errno::INTR) => return Ok((false, false)),
        Err(e) => return Err(e.into()),
    }
    let ready = |f: &PollFd<'_>| {
        f.revents()
            .intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR)
    };
    Ok((ready(&fds[0]), ready(&fds[1])))
}

/// Reads what the port has; end of file (the device went away, or the other
/// side of a pseudo-terminal closed) is an error that ends the thread.
fn read_port(port: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    match port.read(buf)? {
        0 => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the serial device hung up (end of file)",
        )),
        n => Ok(n),
    }
}

/// Waits until the bytes written to a tty have left it, so the reply timeout
/// runs from the end of the command on a real UART too. Not a tty (a pipe,
/// a socket): nothing to wait for.
fn drain_output(port: &File) -> io::Result<()> {
    match rustix::termios::tcdrain(port) {
        Ok(()) | Err(rustix::io::Errno::NOTTY) | Err(rustix::io::Errno::INVAL) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn drain_waker(mut w: &UnixStream) {
    let mut b = [0u8; 64];
    let _ = w.read(&mut b);
}

enum CpCtl {
    Submit(u8, Command, mpsc::Sender<Result<Ticket, CpError>>),
    Shutdown,
}

/// A control panel running on its own thread over a serial line.
pub struct CpHandle {
    stats: Arc<Mutex<Counters>>,
    ctl: mpsc::Sender<CpCtl>,
    waker: Arc<UnixStream>,
    events: mpsc::Receiver<CpEvent>,
    thread: Option<JoinHandle<io::Result<LineStats>>>,
}

impl CpHandle {
    /// Starts the panel on `port`.
    pub fn spawn(port: File, cp: ControlPanel, link: Link) -> io::Result<CpHandle> {
        let (ctl, ctl_rx) = mpsc::channel();
        let (ev_tx, events) = mpsc::channel();
        let (waker, waker_rx) = UnixStream::pair()?;
        waker_rx.set_nonblocking(true)?;
        let stats = Arc::new(Mutex::new(Counters::default()));
        let shared = stats.clone();
        let thread = std::thread::Builder::new()
            .name("osdp-cp".into())
            .spawn(move || run_cp(port, cp, link, ctl_rx, waker_rx, ev_tx, shared))?;
        Ok(CpHandle {
            stats,
            ctl,
            waker: Arc::new(waker),
            events,
            thread: Some(thread),
        })
    }

    fn ring(&self) {
        let _ = (&*self.waker).write(&[1]);
    }

    /// A handle other threads can keep to queue commands and read the line
    /// counters while this handle's owner reads the events.
    pub fn commander(&self) -> CpCommander {
        CpCommander {
            stats: self.stats.clone(),
            ctl: self.ctl.clone(),
            waker: self.waker.clone(),
        }
    }

    /// Queues a command (see [`ControlPanel::submit`]).
    pub fn submit(&self, address: u8, command: Command) -> Result<Ticket, CpError> {
        submit(&self.ctl, &self.waker, address, command)
    }

    /// The line counters so far (take two snapshots to measure one exchange).
    pub fn line_stats(&self) -> LineStats {
        self.stats.lock().map(|s| s.line).unwrap_or_default()
    }

    /// The share of the line counters of the device at `address`: the
    /// packets sent to it and the bytes received while its reply was
    /// awaited (other devices' traffic on the bus is not counted).
    pub fn device_line_stats(&self, address: u8) -> LineStats {
        device_stats(&self.stats, address)
    }

    /// The panel's events.
    pub fn events(&self) -> &mpsc::Receiver<CpEvent> {
        &self.events
    }

    /// Waits up to `timeout` for an event matching `pred`, returning it (and
    /// dropping the events before it).
    pub fn wait_for(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&CpEvent) -> bool,
    ) -> Option<CpEvent> {
        let end = Instant::now() + timeout;
        loop {
            let left = end.checked_duration_since(Instant::now())?;
            match self.events.recv_timeout(left) {
                Ok(e) if pred(&e) => return Some(e),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    /// Stops the thread; returns the line counters.
    pub fn shutdown(mut self) -> io::Result<LineStats> {
        let _ = self.ctl.send(CpCtl::Shutdown);
        self.ring();
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            _ => Err(io::Error::other("the OSDP control panel thread panicked")),
        }
    }
}

impl Drop for CpHandle {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = self.ctl.send(CpCtl::Shutdown);
            self.ring();
            let _ = t.join();
        }
    }
}

/// Queues commands on a running panel from any thread (see
/// [`CpHandle::commander`]); the events stay with the [`CpHandle`].
#[derive(Clone)]
pub struct CpCommander {
    stats: Arc<Mutex<Counters>>,
    ctl: mpsc::Sender<CpCtl>,
    waker: Arc<UnixStream>,
}

impl std::fmt::Debug for CpCommander {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpCommander").finish_non_exhaustive()
    }
}

impl CpCommander {
    fn ring(&self) {
        let _ = (&*self.waker).write(&[1]);
    }

    /// Queues a command and waits for the panel to accept it (see
    /// [`ControlPanel::submit`]); its reply comes as an event.
    pub fn submit(&self, address: u8, command: Command) -> Result<Ticket, CpError> {
        submit(&self.ctl, &self.waker, address, command)
    }

    /// Queues a command without waiting for the panel's thread (which may
    /// be writing a long frame at a low baud rate); a command the panel
    /// does not accept is dropped.
    pub fn send(&self, address: u8, command: Command) {
        let (tx, _) = mpsc::channel();
        if self.ctl.send(CpCtl::Submit(address, command, tx)).is_ok() {
            self.ring();
        }
    }

    /// The line counters so far.
    pub fn line_stats(&self) -> LineStats {
        self.stats.lock().map(|s| s.line).unwrap_or_default()
    }

    /// One device's share of the line counters (see
    /// [`CpHandle::device_line_stats`]).
    pub fn device_line_stats(&self, address: u8) -> LineStats {
        device_stats(&self.stats, address)
    }

    /// Stops the panel's thread: its event channel then ends, which tells
    /// whoever reads the events to stop too.
    pub fn shutdown(&self) {
        let _ = self.ctl.send(CpCtl::Shutdown);
        self.ring();
    }
}

fn device_stats(stats: &Mutex<Counters>, address: u8) -> LineStats {
    stats
        .lock()
        .ok()
        .and_then(|s| s.devices.get(&address).copied())
        .unwrap_or_default()
}

/// Hands a command to the panel's thread and waits for its verdict.
fn submit(
    ctl: &mpsc::Sender<CpCtl>,
    waker: &UnixStream,
    address: u8,
    command: Command,
) -> Result<Ticket, CpError> {
    let (tx, rx) = mpsc::channel();
    if ctl.send(CpCtl::Submit(address, command, tx)).is_err() {
        return Err(CpError::Offline(address));
    }
    let _ = (&*waker).write(&[1]);
    rx.recv().unwrap_or(Err(CpError::Offline(address)))
}

fn run_cp(
    mut port: File,
    mut cp: ControlPanel,
    link: Link,
    ctl: mpsc::Receiver<CpCtl>,
    waker: UnixStream,
    events: mpsc::Sender<CpEvent>,
    shared: Arc<Mutex<Counters>>,
) -> io::Result<LineStats> {
    let count = |address: Option<u8>, tx: usize, rx: usize| {
        if let Ok(mut c) = shared.lock() {
            c.count(address, tx, rx, link.baud);
        }
    };
    let mut buf = [0u8; 512];
    // A packet goes to the device whose reply the panel then awaits.
    let send = |cp: &mut ControlPanel, port: &mut File, bytes: &[u8]| -> io::Result<()> {
        write_paced(port, bytes, link)?;
        if !link.pace {
            drain_output(port)?;
        }
        cp.transmitted(Instant::now());
        count(cp.awaiting(), bytes.len(), 0);
        Ok(())
    };
    loop {
        let now = Instant::now();
        if let Some(bytes) = cp.handle_timeout(now) {
            send(&mut cp, &mut port, &bytes)?;
        }
        while let Some(bytes) = cp.poll_transmit(Instant::now()) {
            send(&mut cp, &mut port, &bytes)?;
        }
        while let Some(e) = cp.poll_event() {
            let _ = events.send(e);
        }
        let now = Instant::now();
        let timeout = cp.next_deadline(now).saturating_duration_since(now);
        let (readable, rang) = wait(&port, &waker, Some(timeout))?;
        if readable {
            let n = read_port(&mut port, &mut buf)?;
            // Only the addressed device answers on the bus.
            count(cp.awaiting(), 0, n);
            cp.receive(&buf[..n], Instant::now());
        }
        if rang {
            drain_waker(&waker);
        }
        while let Ok(c) = ctl.try_recv() {
            match c {
                CpCtl::Submit(a, cmd, reply) => {
                    let _ = reply.send(cp.submit(a, cmd));
                }
                CpCtl::Shutdown => {
                    return Ok(shared.lock().map(|c| c.line).unwrap_or_default());
                }
            }
        }
    }
}

enum PdCtl {
    Card(RawCard),
    Text(u8, Vec<u8>),
    Keypad(u8, Vec<u8>),
    Presence(u8, bool),
    LocalStatus(bool, bool),
    Inputs(Vec<u8>),
    Shutdown,
}

/// Hands a request to the device's thread and wakes it.
fn pd_send(ctl: &mpsc::Sender<PdCtl>, mut waker: &UnixStream, c: PdCtl) {
    let _ = ctl.send(c);
    let _ = waker.write(&[1]);
}

/// A peripheral device running on its own thread over a serial line.
pub struct PdHandle {
    ctl: mpsc::Sender<PdCtl>,
    waker: UnixStream,
    events: mpsc::Receiver<PdEvent>,
    thread: Option<JoinHandle<io::Result<LineStats>>>,
}

impl PdHandle {
    /// Starts the device on `port`; `app` receives the panel's requests.
    pub fn spawn(
        port: File,
        pd: PeripheralDevice,
        app: Box<dyn PdApp + Send>,
        link: Link,
    ) -> io::Result<PdHandle> {
        let (ctl, ctl_rx) = mpsc::channel();
        let (ev_tx, events) = mpsc::channel();
        let (waker, waker_rx) = UnixStream::pair()?;
        waker_rx.set_nonblocking(true)?;
        let thread = std::thread::Builder::new()
            .name("osdp-pd".into())
            .spawn(move || run_pd(port, pd, app, link, ctl_rx, waker_rx, ev_tx))?;
        Ok(PdHandle {
            ctl,
            waker,
            events,
            thread: Some(thread),
        })
    }

    fn send(&self, c: PdCtl) {
        pd_send(&self.ctl, &self.waker, c);
    }

    /// A handle other threads can use to report cards and to stop the
    /// device (a card watcher, a signal handler).
    pub fn remote(&self) -> io::Result<PdRemote> {
        Ok(PdRemote {
            ctl: self.ctl.clone(),
            waker: self.waker.try_clone()?,
        })
    }

    /// Reports a card read on the next poll.
    pub fn card_read(&self, card: RawCard) {
        self.send(PdCtl::Card(card));
    }
    /// Reports card data as text on the next poll.
    pub fn card_text(&self, reader: u8, text: &[u8]) {
        self.send(PdCtl::Text(reader, text.to_vec()));
    }
    /// Reports a card's arrival or removal (transparent mode) on the next poll.
    pub fn card_presence(&self, reader: u8, present: bool) {
        self.send(PdCtl::Presence(reader, present));
    }
    /// Reports keypad input on the next poll.
    pub fn keypad(&self, reader: u8, keys: &[u8]) {
        self.send(PdCtl::Keypad(reader, keys.to_vec()));
    }
    /// Sets tamper and power state.
    pub fn set_local_status(&self, tamper: bool, power: bool) {
        self.send(PdCtl::LocalStatus(tamper, power));
    }
    /// Sets the inputs' state; a change is reported on the next poll
    /// ([`PeripheralDevice::set_inputs`]).
    pub fn set_inputs(&self, inputs: Vec<u8>) {
        self.send(PdCtl::Inputs(inputs));
    }
    /// The device's events.
    pub fn events(&self) -> &mpsc::Receiver<PdEvent> {
        &self.events
    }
    /// Stops the thread; returns the line counters.
    pub fn shutdown(mut self) -> io::Result<LineStats> {
        self.send(PdCtl::Shutdown);
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            _ => Err(io::Error::other("the OSDP device thread panicked")),
        }
    }
}

/// Reports to a running device from another thread; see [`PdHandle::remote`].
pub struct PdRemote {
    ctl: mpsc::Sender<PdCtl>,
    waker: UnixStream,
}

impl PdRemote {
    fn send(&self, c: PdCtl) {
        pd_send(&self.ctl, &self.waker, c);
    }
    /// Reports a card's arrival or removal (transparent mode) on the next poll.
    pub fn card_presence(&self, reader: u8, present: bool) {
        self.send(PdCtl::Presence(reader, present));
    }
    /// Reports a card read on the next poll.
    pub fn card_read(&self, card: RawCard) {
        self.send(PdCtl::Card(card));
    }
    /// Stops the device's thread: its event channel then closes, which ends
    /// a loop reading [`PdHandle::events`].
    pub fn stop(&self) {
        self.send(PdCtl::Shutdown);
    }
}

impl Drop for PdHandle {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.send(PdCtl::Shutdown);
            let _ = t.join();
        }
    }
}

fn run_pd(
    mut port: File,
    mut pd: PeripheralDevice,
    mut app: Box<dyn PdApp + Send>,
    link: Link,
    ctl: mpsc::Receiver<PdCtl>,
    waker: UnixStream,
    events: mpsc::Sender<PdEvent>,
) -> io::Result<LineStats> {
    let mut stats = LineStats::default();
    let mut buf = [0u8; 512];
    loop {
        let (readable, rang) = wait(&port, &waker, None)?;
        if rang {
            drain_waker(&waker);
        }
        while let Ok(c) = ctl.try_recv() {
            match c {
                PdCtl::Card(card) => pd.card_read(card),
                PdCtl::Text(r, t) => pd.card_text(r, &t),
                PdCtl::Keypad(r, k) => pd.keypad(r, &k),
                PdCtl::Presence(r, p) => pd.card_presence(r, p),
                PdCtl::LocalStatus(t, p) => pd.set_local_status(t, p),
                PdCtl::Inputs(i) => pd.set_inputs(i),
                PdCtl::Shutdown => return Ok(stats),
            }
        }
        if readable {
            let n = read_port(&mut port, &mut buf)?;
            stats.rx_bytes += n as u64;
            stats.rx_wire_time = wire_time(stats.rx_bytes as usize, link.baud);
            let out = pd.receive(&buf[..n], app.as_mut());
            if !out.is_empty() {
                write_paced(&mut port, &out, link)?;
                stats.tx_bytes += out.len() as u64;
                stats.tx_wire_time = wire_time(stats.tx_bytes as usize, link.baud);
            }
        }
        while let Some(e) = pd.poll_event() {
            let _ = events.send(e);
        }
    }
}
