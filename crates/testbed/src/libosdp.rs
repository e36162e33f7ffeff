//! libosdp (the `libosdp` package on PyPI, installed by `scripts/setup.sh`)
//! as a real OSDP peer: the small Python scripts in `crates/links/tests/peers`
//! run a libosdp control panel or reader and talk to the test one JSON object
//! per line on stdin and stdout.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The Python with libosdp: `PIVGATE_OSDP_PYTHON`, or the interpreter of the
/// virtual environment `scripts/setup.sh` makes (`PIVGATE_OSDP_VENV`, default
/// `~/.cache/pivgate/osdp-venv`). Panics, naming the fix, when libosdp cannot
/// be imported there.
pub fn python() -> PathBuf {
    let p = std::env::var_os("PIVGATE_OSDP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let venv = std::env::var_os("PIVGATE_OSDP_VENV")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    let home = std::env::var_os("HOME").unwrap_or_default();
                    PathBuf::from(home).join(".cache/pivgate/osdp-venv")
                });
            venv.join("bin/python")
        });
    let ok = Command::new(&p)
        .args(["-c", "import osdp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "libosdp (PyPI) is not available to {}: run scripts/setup.sh (or set PIVGATE_OSDP_PYTHON)",
        p.display()
    );
    p
}

/// The folder of the peer scripts.
pub fn peers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../links/tests/peers")
}

/// A running peer script.
pub struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
    wait: Duration,
}

impl Peer {
    /// Starts `script` (a file of [`peers_dir`]) with `args`; [`Peer::expect`]
    /// gives up after `wait` (a failure guard, never a measurement).
    pub fn start(script: &str, args: &[String], wait: Duration) -> Peer {
        let dir = peers_dir();
        let mut child = Command::new(python())
            .arg(dir.join(script))
            .args(args)
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the libosdp peer");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
            }
        });
        Peer {
            child,
            stdin,
            lines,
            wait,
        }
    }

    /// Sends one command to the peer.
    pub fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").expect("write to the libosdp peer");
        self.stdin.flush().expect("write to the libosdp peer");
    }

    /// The next line `pred` accepts; panics naming `what` if none comes in time.
    pub fn expect(&self, what: &str, mut pred: impl FnMut(&Value) -> bool) -> Value {
        let end = Instant::now() + self.wait;
        loop {
            let left = end
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| panic!("libosdp peer: no {what}"));
            match self.lines.recv_timeout(left) {
                Ok(v) if pred(&v) => return v,
                Ok(_) => {}
                Err(_) => panic!("libosdp peer: no {what}"),
            }
        }
    }
}

impl Drop for Peer {
    /// Asks the peer to quit, and kills it if it has not within 5 s.
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"quit": true}));
        let _ = self.stdin.flush();
        let end = Instant::now() + Duration::from_secs(5);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
