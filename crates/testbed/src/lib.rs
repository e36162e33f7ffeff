//! Test support for everything that needs the real PC/SC stack: start (or
//! reuse) `pcscd`, serialise access to the single vpcd reader across tests
//! and processes, wait for the reader and a card, and run external tools
//! with a timeout so that nothing can hang.
//!
//! ```no_run
//! let _vpcd = testbed::lock_vpcd();
//! let _pcscd = testbed::Pcscd::ensure_started().expect("pcscd");
//! // ... start a card connecting to 127.0.0.1:35963 ...
//! testbed::wait_for_card(testbed::VPCD_READER, std::time::Duration::from_secs(10)).unwrap();
//! ```

pub mod libosdp;

use std::ffi::CString;
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};
use thiserror::Error;

/// The reader name vpcd registers (first slot).
pub const VPCD_READER: &str = "Virtual PCD 00 00";
/// Where the card side connects to vpcd.
pub const VPCD_ADDR: &str = "127.0.0.1:35963";
/// pcscd's client socket.
pub const PCSCD_SOCKET: &str = "/run/pcscd/pcscd.comm";
/// The pcscd binary.
pub const PCSCD_BIN: &str = "/usr/sbin/pcscd";

/// Why the test bed could not provide what was asked.
#[derive(Debug, Error)]
pub enum TestbedError {
    #[error("cannot start {PCSCD_BIN}: {0} (is the pcscd package installed and are we root?)")]
    Spawn(#[source] std::io::Error),
    #[error("pcscd exited during start-up with {status}; log: {log}")]
    Exited { status: ExitStatus, log: String },
    #[error("pcscd did not open {PCSCD_SOCKET} within {0:?}")]
    SocketTimeout(Duration),
    #[error("PC/SC error: {0}")]
    Pcsc(#[from] pcsc::Error),
    #[error("{what} did not happen within {timeout:?}")]
    Timeout { what: String, timeout: Duration },
    #[error("cannot run {program}: {source}")]
    Run {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} did not finish within {timeout:?}; output so far:\n{output}")]
    CommandTimeout {
        program: String,
        timeout: Duration,
        output: String,
    },
}

pub type Result<T> = std::result::Result<T, TestbedError>;

// ---- exclusive use of the vpcd reader ---------------------------------------

static VPCD_MUTEX: Mutex<()> = Mutex::new(());

/// Exclusive use of the vpcd reader: within this process (a mutex) and
/// across processes (an advisory lock on a file in the temp directory).
pub struct VpcdLock {
    _file: std::fs::File,
    _guard: MutexGuard<'static, ()>,
}

/// Waits for exclusive use of the vpcd reader.
pub fn lock_vpcd() -> VpcdLock {
    // A test that panicked while holding the lock leaves nothing to repair.
    let guard = VPCD_MUTEX.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::env::temp_dir().join("pivgate-vpcd.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open lock file {}: {e}", path.display()));
    if let Err(e) = file.lock() {
        panic!("cannot lock {}: {e}", path.display());
    }
    VpcdLock {
        _file: file,
        _guard: guard,
    }
}

// ---- pcscd ------------------------------------------------------------------

struct Daemon {
    child: Option<Child>,
    log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            stop_child(child);
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// Sends SIGTERM to our own child (by pid), waits, then SIGKILL.
fn stop_child(child: &mut Child) {
    let pid = child.id().to_string();
    let _ = Command::new("kill")
        .args(["-TERM", &pid])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

static DAEMON: Mutex<Weak<Daemon>> = Mutex::new(Weak::new());

/// Keeps pcscd available; when the last guard of this process is dropped a
/// pcscd this process started is stopped (one that was already running is
/// left alone).
#[derive(Clone)]
pub struct PcscdGuard {
    daemon: Arc<Daemon>,
}

impl PcscdGuard {
    /// Whether this process started pcscd (rather than reusing one).
    pub fn started_here(&self) -> bool {
        self.daemon.child.is_some()
    }
}

/// Entry point for pcscd management.
pub struct Pcscd;

impl Pcscd {
    /// Reuses a running pcscd or starts `/usr/sbin/pcscd -f -a` and waits
    /// for its socket.
    pub fn ensure_started() -> Result<PcscdGuard> {
        let mut shared = DAEMON.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(daemon) = shared.upgrade() {
            return Ok(PcscdGuard { daemon });
        }
        let daemon = Arc::new(start_or_reuse()?);
        *shared = Arc::downgrade(&daemon);
        Ok(PcscdGuard { daemon })
    }

    /// Whether a pcscd answers on its socket.
    pub fn is_running() -> bool {
        UnixStream::connect(PCSCD_SOCKET).is_ok()
    }
}

fn start_or_reuse() -> Result<Daemon> {
    let log = std::env::temp_dir().join(format!("pivgate-pcscd-{}.log", std::process::id()));
    if Pcscd::is_running() {
        tracing::info!("reusing the running pcscd");
        return Ok(Daemon { child: None, log });
    }
    let log_file = std::fs::File::create(&log).map_err(TestbedError::Spawn)?;
    let err_file = log_file.try_clone().map_err(TestbedError::Spawn)?;
    let mut child = Command::new(PCSCD_BIN)
        .args(["-f", "-a"])
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(err_file)
        .spawn()
        .map_err(TestbedError::Spawn)?;
    let timeout = Duration::from_secs(10);
    let deadline = Instant::now() + timeout;
    loop {
        if Pcscd::is_running() {
            return Ok(Daemon {
                child: Some(child),
                log,
            });
        }
        if let Ok(Some(status)) = child.try_wait() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let _ = std::fs::remove_file(&log);
            return Err(TestbedError::Exited { status, log: text });
        }
        if Instant::now() >= deadline {
            stop_child(&mut child);
            return Err(TestbedError::SocketTimeout(timeout));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---- readers and cards ------------------------------------------------------

/// Lists the PC/SC readers.
pub fn readers() -> Result<Vec<String>> {
    let ctx = pcsc::Context::establish(pcsc::Scope::User)?;
    let names = match ctx.list_readers_owned() {
        Ok(n) => n,
        Err(pcsc::Error::NoReadersAvailable) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    Ok(names
        .into_iter()
        .map(|n| n.to_string_lossy().into_owned())
        .collect())
}

/// Waits until `reader` is listed.
pub fn wait_for_reader(reader: &str, timeout: Duration) -> Result<()> {
    wait_for(reader, timeout, "reader to appear", |_| true)
}

/// Waits until a card is present (and powered) in `reader`.
pub fn wait_for_card(reader: &str, timeout: Duration) -> Result<()> {
    wait_for(reader, timeout, "card to appear", |s| {
        s.contains(pcsc::State::PRESENT) && !s.contains(pcsc::State::MUTE)
    })
}

/// Waits until no card is present in `reader` (or the reader is gone).
pub fn wait_for_card_removed(reader: &str, timeout: Duration) -> Result<()> {
    wait_for(reader, timeout, "card to be removed", |s| {
        s.contains(pcsc::State::EMPTY)
    })
}

fn wait_for(
    reader: &str,
    timeout: Duration,
    what: &str,
    done: impl Fn(pcsc::State) -> bool,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let name = CString::new(reader).map_err(|_| TestbedError::Timeout {
        what: format!("{reader:?} (name contains NUL)"),
        timeout,
    })?;
    while Instant::now() < deadline {
        // A fresh context each round survives a pcscd restart.
        if let Ok(ctx) = pcsc::Context::establish(pcsc::Scope::User) {
            let mut states = [pcsc::ReaderState::new(name.clone(), pcsc::State::UNAWARE)];
            if ctx
                .get_status_change(Duration::from_millis(200), &mut states)
                .is_ok()
                && !states[0].event_state().contains(pcsc::State::UNKNOWN)
                && done(states[0].event_state())
            {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(TestbedError::Timeout {
        what: format!("{what} in {reader:?}"),
        timeout,
    })
}

// ---- external tools ---------------------------------------------------------

/// The result of a tool run.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl ToolOutput {
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// stdout and stderr, for assertion messages.
    pub fn text(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs `cmd` with a timeout, killing it (by its pid) when it takes too long.
pub fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<ToolOutput> {
    let program = format!("{:?}", cmd.get_program());
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| TestbedError::Run {
            program: program.clone(),
            source,
        })?;
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => break None,
        }
    };
    match status {
        Some(status) => Ok(ToolOutput {
            status,
            stdout: join(out),
            stderr: join(err),
        }),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(TestbedError::CommandTimeout {
                program,
                timeout,
                output: format!("{}{}", join(out), join(err)),
            })
        }
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).into_owned()
    })
}

fn join(h: std::thread::JoinHandle<String>) -> String {
    h.join().unwrap_or_default()
}

/// Whether an executable exists (tests skip tools that are not installed).
pub fn have_tool(path: &str) -> bool {
    Path::new(path).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_with_timeout_captures_output_and_kills_hung_tools() {
        let out = run_with_timeout(
            Command::new("sh").args(["-c", "echo hi; echo err >&2"]),
            Duration::from_secs(10),
        )
        .unwrap();
        assert!(out.success());
        assert_eq!(out.stdout, "hi\n");
        assert_eq!(out.stderr, "err\n");
        let e = run_with_timeout(Command::new("sleep").arg("30"), Duration::from_millis(200))
            .unwrap_err();
        assert!(matches!(e, TestbedError::CommandTimeout { .. }), "{e}");
    }

    #[test]
    fn vpcd_lock_is_reentrant_across_sequential_users() {
        drop(lock_vpcd());
        drop(lock_vpcd());
    }
}
