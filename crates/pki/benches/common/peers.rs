//! Running the peer programs in `bench/peers/` (OpenSSL, GnuTLS, Python, Go) on
//! the same files as pivgate, and the shared bench helpers (data directory,
//! medians, table formatting).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The repository root (crates/pki/../..).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where generated data sets are cached: `<target dir>/pivgate-bench-data/`
/// (the bench executable lives in `<target dir>/<profile>/deps/`), or the
/// system temp dir when that cannot be found.
pub fn data_root() -> PathBuf {
    let from_exe = std::env::current_exe().ok().and_then(|exe| {
        exe.ancestors()
            .find(|p| p.file_name().is_some_and(|n| n == "deps"))
            .and_then(|deps| deps.parent()?.parent().map(Path::to_path_buf))
    });
    let root = from_exe
        .unwrap_or_else(std::env::temp_dir)
        .join("pivgate-bench-data");
    std::fs::create_dir_all(&root).expect("create bench data dir");
    root
}

/// True when run by `cargo bench` (criterion convention: `--bench` is
/// passed); `cargo test --benches` runs a quick smoke pass instead.
pub fn full_run() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// Median wall time of `iterations` runs of `f`.
pub fn median_of<T>(iterations: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut times = Vec::with_capacity(iterations);
    let mut last = None;
    for _ in 0..iterations.max(1) {
        let t0 = Instant::now();
        let out = f();
        times.push(t0.elapsed());
        last = Some(out);
    }
    times.sort();
    (times[times.len() / 2], last.expect("at least one run"))
}

/// A peer measurement: a median time and what the peer reports it loaded
/// (or its result code), or the reason it could not be measured.
#[derive(Debug, Clone)]
pub enum PeerResult {
    Measured {
        median: Duration,
        count: String,
        note: String,
    },
    /// Killed after the time limit: the limit is a lower bound of its time.
    TimedOut(Duration),
    Unavailable(String),
}

impl PeerResult {
    /// The measured time, or for a timed-out peer the limit (a lower bound).
    pub fn time(&self) -> Option<Duration> {
        match self {
            PeerResult::Measured { median, .. } => Some(*median),
            PeerResult::TimedOut(limit) => Some(*limit),
            PeerResult::Unavailable(_) => None,
        }
    }
}

/// Parse "ok <median_ns> <count> [note]" / "unavailable <reason>" / "error <reason>".
fn parse_peer_output(stdout: &str, stderr: &str) -> PeerResult {
    let line = stdout.lines().last().unwrap_or("").trim();
    let mut parts = line.splitn(4, ' ');
    match parts.next() {
        Some("ok") => {
            let ns = parts.next().and_then(|s| s.parse::<u64>().ok());
            match ns {
                Some(ns) => PeerResult::Measured {
                    median: Duration::from_nanos(ns),
                    count: parts.next().unwrap_or("").to_string(),
                    note: parts.next().unwrap_or("").to_string(),
                },
                None => PeerResult::Unavailable(format!("unreadable peer output {line:?}")),
            }
        }
        Some("unavailable") => {
            PeerResult::Unavailable(line.trim_start_matches("unavailable").trim().to_string())
        }
        Some("error") => PeerResult::Unavailable(format!(
            "failed: {}",
            line.trim_start_matches("error").trim()
        )),
        _ => PeerResult::Unavailable(format!(
            "no result (stdout {line:?}, stderr {:?})",
            stderr.trim()
        )),
    }
}

/// Per peer invocation; `PIVGATE_PEER_TIMEOUT_SECS` overrides. OpenSSL 3.0,
/// GnuTLS and Python `ssl` load bundles in quadratic time, so at 100,000
/// certificates they would run for tens of minutes.
pub fn peer_timeout() -> Duration {
    let secs = std::env::var("PIVGATE_PEER_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    Duration::from_secs(secs)
}

/// Runs a peer under coreutils `timeout` so a quadratic peer cannot stall the run.
pub fn run_peer(program: &Path, args: &[&str]) -> PeerResult {
    let limit = peer_timeout();
    let mut cmd = Command::new("timeout");
    cmd.arg(limit.as_secs().to_string()).arg(program).args(args);
    match cmd.output() {
        Ok(out) if out.status.code() == Some(124) => PeerResult::TimedOut(limit),
        Ok(out) => parse_peer_output(
            &String::from_utf8_lossy(&out.stdout),
            &String::from_utf8_lossy(&out.stderr),
        ),
        Err(e) => PeerResult::Unavailable(format!("cannot run {}: {e}", program.display())),
    }
}

/// Compile `bench/peers/peers.c` against OpenSSL and GnuTLS with `cc`.
pub fn build_c_peers() -> Result<PathBuf, String> {
    let src = repo_root().join("bench/peers/peers.c");
    let out = data_root().join("peers");
    let result = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&out)
        .arg(&src)
        .args(["-lssl", "-lcrypto", "-lgnutls"])
        .output()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if result.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "cc failed: {}",
            String::from_utf8_lossy(&result.stderr).trim()
        ))
    }
}

/// Build `bench/peers/go_peers.go` (standard library only) with `go build`.
pub fn build_go_peer() -> Result<PathBuf, String> {
    let src = repo_root().join("bench/peers/go_peers.go");
    let out = data_root().join("go_peers");
    let result = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .env("GO111MODULE", "off")
        .output()
        .map_err(|e| format!("cannot run go: {e}"))?;
    if result.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "go build failed: {}",
            String::from_utf8_lossy(&result.stderr).trim()
        ))
    }
}

/// The Debian Python (which has `cryptography`; the `python3` on PATH may not).
pub fn python() -> PathBuf {
    PathBuf::from(std::env::var("PIVGATE_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into()))
}

pub fn py_peers_script() -> PathBuf {
    repo_root().join("bench/peers/py_peers.py")
}

pub fn run_py_peer(args: &[&str]) -> PeerResult {
    let script = py_peers_script();
    let mut full: Vec<&str> = vec![script.to_str().expect("utf-8 path")];
    full.extend_from_slice(args);
    run_peer(&python(), &full)
}

pub fn fmt_duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1_000.0 {
        format!("{us:.1} us")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

pub fn ratio(peer: Duration, ours: Duration) -> f64 {
    peer.as_secs_f64() / ours.as_secs_f64().max(1e-12)
}
