//! The PC/SC daemon for programs that bring their own readers (the door
//! demo's vpcd reader, tests): reuse a running `pcscd`, or start
//! `/usr/sbin/pcscd -f -a` and stop it again when the last [`PcscdGuard`]
//! of this process is dropped. A pcscd that was already running is left
//! alone.

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// The reader name the vsmartcard vpcd driver registers (first slot).
pub const VPCD_READER: &str = "Virtual PCD 00 00";
/// pcscd's client socket.
pub const PCSCD_SOCKET: &str = "/run/pcscd/pcscd.comm";
/// The pcscd binary.
pub const PCSCD_BIN: &str = "/usr/sbin/pcscd";

/// Why pcscd could not be made available.
#[derive(Debug, thiserror::Error)]
pub enum PcscdError {
    #[error("cannot start {PCSCD_BIN}: {0} (is the pcscd package installed and are we root?)")]
    Spawn(#[source] std::io::Error),
    #[error("pcscd exited during start-up with {status}; log: {log}")]
    Exited { status: ExitStatus, log: String },
    #[error("pcscd did not open {PCSCD_SOCKET} within {0:?}")]
    SocketTimeout(Duration),
}

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
    pub fn ensure_started() -> Result<PcscdGuard, PcscdError> {
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

fn start_or_reuse() -> Result<Daemon, PcscdError> {
    let log = std::env::temp_dir().join(format!("pivgate-pcscd-{}.log", std::process::id()));
    if Pcscd::is_running() {
        tracing::info!("reusing the running pcscd");
        return Ok(Daemon { child: None, log });
    }
    let log_file = std::fs::File::create(&log).map_err(PcscdError::Spawn)?;
    let err_file = log_file.try_clone().map_err(PcscdError::Spawn)?;
    let mut child = Command::new(PCSCD_BIN)
        .args(["-f", "-a"])
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(err_file)
        .spawn()
        .map_err(PcscdError::Spawn)?;
    let timeout = Duration::from_secs(10);
    let deadline = Instant::now() + timeout;
    // pcscd gives no start-up notification: its socket is looked for.
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
            return Err(PcscdError::Exited { status, log: text });
        }
        if Instant::now() >= deadline {
            stop_child(&mut child);
            return Err(PcscdError::SocketTimeout(timeout));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
