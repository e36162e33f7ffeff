//! Helpers shared by the end-to-end tests of the `pivgate` binary: run it,
//! read what it said, and check how it exited.
#![allow(dead_code)] // each test binary uses its own subset

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use links::serial::Pty;

pub mod api;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_pivgate");

/// Runs `pivgate args…` with no standard input.
pub fn pivgate(args: &[&str]) -> Output {
    pivgate_with_stdin(args, None)
}

/// Runs `pivgate args…`, writing `stdin` (if any) to its standard input
/// and closing it.
pub fn pivgate_with_stdin(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("pivgate runs");
    let mut input = child.stdin.take().expect("stdin is piped");
    if let Some(text) = stdin {
        input
            .write_all(text.as_bytes())
            .expect("writing pivgate's stdin");
    }
    drop(input);
    child.wait_with_output().expect("pivgate finishes")
}

/// Runs `pivgate args…`, asserts it succeeded, and returns its standard
/// output.
pub fn ok(args: &[&str]) -> String {
    let out = pivgate(args);
    assert!(
        out.status.success(),
        "pivgate {args:?} failed: {}",
        text(&out)
    );
    String::from_utf8(out.stdout).expect("pivgate prints UTF-8")
}

/// The exit code (panics when the process was killed by a signal).
pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exit code")
}

/// Standard output followed by standard error, for assertions and messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Standard error.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A path as the `&str` an argument list needs.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// How long the PC/SC tests wait for a card to appear or go.
pub const CARD_WAIT: Duration = Duration::from_secs(20);

/// A child process, killed (and reaped) when dropped.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `pivgate card run` serving `image` behind the vpcd reader (needs pcscd).
pub struct CardProcess(Running);

impl CardProcess {
    /// Starts the card and waits until the reader sees it.
    pub fn start(image: &Path) -> Self {
        let child = Command::new(BIN)
            .args(["card", "run", "--image", s(image)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("card run starts");
        // Owned before waiting: a card that never appears is still killed.
        let card = CardProcess(Running(child));
        testbed::wait_for_card(testbed::VPCD_READER, CARD_WAIT)
            .expect("card appears in the reader");
        card
    }

    /// SIGTERM; returns the exit status once the card has left the reader.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.0 .0.id().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        let status = self.0 .0.wait().expect("card process ends");
        let _ = testbed::wait_for_card_removed(testbed::VPCD_READER, CARD_WAIT);
        status
    }

    /// Kills the card and waits until the reader has seen it go.
    pub fn remove(self) {
        drop(self);
        let _ = testbed::wait_for_card_removed(testbed::VPCD_READER, CARD_WAIT);
    }
}

/// The vpcd reader, held for a test: a running pcscd and the cross-process
/// reader lock. Fields drop in order: pcscd is stopped (when this test
/// started it) *before* the lock is released, so the next test never finds
/// a pcscd that is about to go away and takes it for one it can use.
pub struct VpcdReader {
    _pcscd: testbed::PcscdGuard,
    _lock: testbed::VpcdLock,
}

/// The vpcd reader, held for this test. `None` when `PIVGATE_SKIP_PCSC` is
/// set (the caller skips).
pub fn vpcd_reader() -> Option<VpcdReader> {
    if std::env::var_os("PIVGATE_SKIP_PCSC").is_some() {
        eprintln!("PIVGATE_SKIP_PCSC set: skipping");
        return None;
    }
    let lock = testbed::lock_vpcd();
    // A pcscd started right after another one stopped sometimes never
    // shows the vpcd reader (its driver did not get the port); a pcscd this
    // process started is then stopped and started again.
    const TRIES: u32 = 4;
    for attempt in 1..=TRIES {
        let pcscd = testbed::Pcscd::ensure_started().expect("pcscd starts (root, pcscd installed)");
        match testbed::wait_for_reader(testbed::VPCD_READER, CARD_WAIT) {
            Ok(()) => {
                return Some(VpcdReader {
                    _pcscd: pcscd,
                    _lock: lock,
                })
            }
            Err(e) if attempt < TRIES && pcscd.started_here() => {
                let listening = std::net::TcpStream::connect(testbed::VPCD_ADDR).is_ok();
                eprintln!(
                    "the vpcd reader did not appear ({e}; vpcd port {}): restarting pcscd, attempt {}",
                    if listening { "listening" } else { "not listening" },
                    attempt + 1
                );
                drop(pcscd);
            }
            Err(e) => panic!("vpcd reader: {e}"),
        }
    }
    unreachable!("the last attempt returns or panics")
}

/// A site from `pivgate init` listening on a free port, with `edit`
/// applied to its configuration, and a card issued from its test PKI: the
/// PC/SC service tests start from it.
pub struct PcscSite {
    /// Removed with the site.
    _dir: tempfile::TempDir,
    pub config: String,
    pub image: std::path::PathBuf,
}

impl PcscSite {
    pub fn new(edit: impl FnOnce(String) -> String) -> PcscSite {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("site");
        ok(&["init", site.to_str().unwrap()]);
        let config = site.join("pivgate.toml");
        let text = std::fs::read_to_string(&config)
            .unwrap()
            .replace("127.0.0.1:8080", "127.0.0.1:0");
        std::fs::write(&config, edit(text)).unwrap();
        let image = dir.path().join("card.json");
        ok(&[
            "card",
            "new",
            "--pki",
            site.join("pki").to_str().unwrap(),
            "--out",
            image.to_str().unwrap(),
        ]);
        PcscSite {
            config: config.to_str().unwrap().to_string(),
            image,
            _dir: dir,
        }
    }

    pub fn token(&self, role: &str) -> String {
        ok(&["token", "create", "--role", role, "--config", &self.config])
            .trim()
            .to_string()
    }

    /// `pivgate enroll` of the card for Alice into `staff`.
    pub fn enroll_args(&self) -> [&str; 11] {
        [
            "enroll",
            "--reader",
            testbed::VPCD_READER,
            "--cardholder",
            "Alice",
            "--group",
            "staff",
            "--wait",
            "10",
            "--config",
            &self.config,
        ]
    }

    /// Starts `pivgate serve`; the process and the API's base URL.
    pub fn serve(&self) -> (Running, String) {
        serve(&self.config)
    }
}

/// Starts `pivgate serve --config config` and waits for its first line
/// (printed once it listens); the process and the API's base URL.
pub fn serve(config: &str) -> (Running, String) {
    let mut serve = Command::new(BIN)
        .args(["serve", "--config", config])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_string();
    (Running(serve), base)
}

/// Two pseudo-terminal pairs whose controlling sides are joined: what one
/// process writes to its side, the other reads from its own.
pub struct NullModem {
    pub a: Pty,
    pub b: Pty,
}

impl NullModem {
    pub fn new() -> NullModem {
        let a = Pty::open().unwrap();
        let b = Pty::open().unwrap();
        for (from, to) in [(&a.master, &b.master), (&b.master, &a.master)] {
            let mut from = from.try_clone().unwrap();
            let mut to = to.try_clone().unwrap();
            // The threads end with the test process (the subordinate
            // sides stay open here, so the reads never see end-of-file).
            std::thread::spawn(move || {
                let mut buf = [0u8; 512];
                while let Ok(n) = from.read(&mut buf) {
                    if n == 0 || to.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
        NullModem { a, b }
    }
}

/// Writes `hex` and a newline to `dir/name` with permissions `mode`.
pub fn key_file(dir: &Path, name: &str, hex: &str, mode: u32) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, format!("{hex}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

/// Starts `pivgate reader osdp args…`, its standard error piped.
pub fn start_reader(args: &[&str]) -> Running {
    Running(
        Command::new(BIN)
            .args(["reader", "osdp"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("pivgate reader osdp starts"),
    )
}

/// SIGTERM, then the exit code and what the reader logged.
pub fn stop_reader(mut r: Running) -> (i32, String) {
    let pid = r.0.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let status = r.0.wait().unwrap();
    let mut log = String::new();
    r.0.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    (status.code().unwrap_or(-1), log)
}
