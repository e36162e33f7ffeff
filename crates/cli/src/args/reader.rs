//! The PC/SC reader argument of `pivgate read` and `auth`: wait for a card
//! and connect to it.

use anyhow::{Context, Result};
use host::Readers;
use std::time::{Duration, Instant};

/// Waits (up to `wait` seconds, or without end) for a card in `reader`, or
/// in any reader, and connects to it. Returns the connection and the time
/// the card took to come.
pub fn wait_and_connect(
    reader: Option<&str>,
    wait: Option<u64>,
) -> Result<(host::PcscTransport, Duration)> {
    let readers = Readers::establish().context("connecting to the PC/SC service")?;
    let start = Instant::now();
    let name = readers
        .wait_for_card(reader, wait.map(Duration::from_secs))
        .context("waiting for a card")?;
    let t = readers
        .connect(&name)
        .with_context(|| format!("connecting to the card in {name:?}"))?;
    Ok((t, start.elapsed()))
}
