//! Helpers shared by the end-to-end tests of the `pivgate` binary: run it,
//! read what it said, and check how it exited.
#![allow(dead_code)] // each test binary uses its own subset

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

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
