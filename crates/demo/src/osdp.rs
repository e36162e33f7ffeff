//! The demo's reader-link section: a PKI-CAK tap run by the controller
//! through an OSDP reader in transparent mode (secure channel up), over a
//! pseudo-terminal pair paced at 9600 and 115200 baud, full read and fast
//! path, beside the reference door's reader → module link; and the 200-bit
//! Wiegand frame a separate module would send its controller.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use auth::measure::REFERENCE_DOOR;
use auth::transaction::{totals, PathTaken, Transaction};
use auth::{Authenticator, Mechanism, Settings};
use card::profile::TimingProfile;
use card::Card;
use host::InProcess;
use links::loopback::Loopback;
use links::osdp::sc::Key;
use links::wiegand::Timing;
use pki_issue::{CardCredentials, TestPki};

/// The baud rates shown.
pub const BAUDS: [u32; 2] = [9600, 115200];

/// One tap through the OSDP reader.
pub struct OsdpTap {
    pub baud: u32,
    pub transaction: Transaction,
    /// Wall time of the whole tap as the controller saw it.
    pub wall: Duration,
    pub line_bytes: u64,
}

/// Runs a full-read tap and a fast-path repeat tap at each baud rate.
pub fn taps(
    pki: &TestPki,
    creds: &CardCredentials,
    profile: TimingProfile,
) -> Result<Vec<OsdpTap>> {
    let mut out = Vec::new();
    for baud in BAUDS {
        let image = creds
            .card_image(Some(1))
            .context("personalising the card")?;
        let card = Box::new(InProcess::with_profile(Card::new(image), profile));
        // Both ends are in this process, on a private pseudo-terminal pair.
        let (mut transport, pd, _line) = Loopback::start(card, 1, baud, Key([0x5a; 16]))?.split();
        let authn = Authenticator::new(
            pki.trust_store(),
            pki.crl_set().context("loading the test PKI's CRLs")?,
            Settings::default(),
        );
        for want in [PathTaken::Full, PathTaken::Fast] {
            let before = transport.line_stats();
            let t0 = Instant::now();
            let tx = authn.authenticate(&mut transport, Mechanism::PkiCak, None, None);
            let wall = t0.elapsed();
            let line = transport.line_stats().since(&before);
            if !tx.outcome.granted() || tx.path != want {
                bail!(
                    "the OSDP tap at {baud} baud ended {:?} on the {:?} path",
                    tx.outcome,
                    tx.path
                );
            }
            out.push(OsdpTap {
                baud,
                transaction: tx,
                wall,
                line_bytes: line.tx_bytes + line.rx_bytes,
            });
        }
        transport
            .into_inner()
            .shutdown()
            .context("stopping the OSDP panel")?;
        pd.shutdown().context("stopping the OSDP reader")?;
    }
    Ok(out)
}

fn ms(d: Duration) -> String {
    auth::report::ms(d.as_micros() as u64)
}

/// The section's text.
pub fn render(taps: &[OsdpTap], profile: &str) -> String {
    let reader_link = REFERENCE_DOOR[1].1;
    let wiegand_ref = REFERENCE_DOOR[2].1;
    let mut s = String::new();
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "PKI-CAK through an OSDP reader (transparent mode, secure channel, pseudo-terminal paced at the baud rate; `{profile}` card timing):"
    );
    let _ = writeln!(
        s,
        "  {:<7} {:<10} {:>8} {:>9} {:>11} {:>6} {:>10} {:>11}",
        "baud", "path", "tap ms", "link ms", "link share", "APDUs", "APDU bytes", "line bytes"
    );
    for t in taps {
        let tot = totals(&t.transaction.stages);
        let link = Duration::from_micros(t.transaction.link_us.unwrap_or(0));
        let _ = writeln!(
            s,
            "  {:<7} {:<10} {:>8} {:>9} {:>10.0}% {:>6} {:>10} {:>11}",
            t.baud,
            match t.transaction.path {
                PathTaken::Full => "full read",
                PathTaken::Fast => "fast path",
            },
            ms(t.wall),
            ms(link),
            100.0 * link.as_secs_f64() / t.wall.as_secs_f64().max(1e-9),
            tot.apdus,
            tot.bytes_in + tot.bytes_out,
            t.line_bytes,
        );
    }
    let frame = Timing::default().frame_time(200);
    let _ = writeln!(
        s,
        "  The reference door's reader to module link takes {reader_link:.0} ms; link ms above is the line time of the tap's OSDP frames (both directions, 10 bits per byte)."
    );
    let _ = writeln!(
        s,
        "  A separate module would then send a 200-bit FASC-N Wiegand frame to its controller: {} ms at 2 ms per bit (reference door: {wiegand_ref:.0} ms); pivgate decides in the controller, so there is no such link.",
        ms(frame)
    );
    let others: Vec<String> = [
        ("128-bit card UUID", 128),
        ("75-bit PIV", 75),
        ("48-bit Corporate 1000", 48),
        ("26-bit H10301", 26),
    ]
    .iter()
    .map(|(name, bits)| format!("{name} {} ms", ms(Timing::default().frame_time(*bits))))
    .collect();
    let _ = writeln!(
        s,
        "  The shorter formats a legacy panel may expect (--wiegand-format): {}.",
        others.join(", ")
    );
    s
}
