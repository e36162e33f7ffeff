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
//!
//! Test support only: a dev-dependency, never linked into the binary.

pub mod libosdp;
pub mod proxy;

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};

use host::watch::{Slot, Watch};
use host::TransportError;
use std::time::{Duration, Instant};
use thiserror::Error;

pub use host::pcscd::VPCD_READER;
/// Where the card side connects to vpcd.
pub const VPCD_ADDR: &str = "127.0.0.1:35963";
pub use host::pcscd::{PCSCD_BIN, PCSCD_SOCKET};

/// Why the test bed could not provide what was asked.
#[derive(Debug, Error)]
pub enum TestbedError {
    #[error(transparent)]
    Pcscd(#[from] host::pcscd::PcscdError),
    #[error("PC/SC error: {0}")]
    Pcsc(#[from] pcsc::Error),
    #[error("PC/SC error: {0}")]
    Reader(#[from] TransportError),
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

pub use host::pcscd::{Pcscd, PcscdGuard};

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
    wait_for(reader, timeout, "reader to appear", |s| s != Slot::Unknown)
}

/// Waits until a card is present (and powered) in `reader`.
pub fn wait_for_card(reader: &str, timeout: Duration) -> Result<()> {
    wait_for(reader, timeout, "card to appear", |s| s == Slot::Present)
}

/// Waits until no card is present in `reader` (or the reader is gone).
pub fn wait_for_card_removed(reader: &str, timeout: Duration) -> Result<()> {
    wait_for(reader, timeout, "card to be removed", |s| {
        s == Slot::Empty || s == Slot::Unknown
    })
}

fn wait_for(
    reader: &str,
    timeout: Duration,
    what: &str,
    done: impl Fn(Slot) -> bool,
) -> Result<()> {
    let watch = Watch::establish()?;
    match watch.until(reader, timeout, done) {
        Ok(()) => Ok(()),
        Err(TransportError::Timeout(_)) => Err(TestbedError::Timeout {
            what: format!("{what} in {reader:?}"),
            timeout,
        }),
        Err(e) => Err(e.into()),
    }
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
