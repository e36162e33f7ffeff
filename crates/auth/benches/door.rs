//! A warm PKI-CAK tap through pcscd + vpcd with an instant software card,
//! P-256 and RSA-2048: wall time and host computation per tap, full read and
//! repeat tap, beside OpenSC's `pkcs11-tool` making the same card
//! authentication key signature through the same reader. "Caches cleared"
//! empties the validation and fast-path caches before each tap; signature
//! results for CA certificates and CRLs that `pki` remembers stay warm, as
//! they would at a door that has seen other cards of the same issuer.
//!
//! Run: `cargo bench -p auth --bench door` (root; packages of
//! scripts/setup.sh). Prints a table; nothing is asserted.

use auth::{Authenticator, Mechanism, Settings, Transaction};
use card::{vpcd, Card, CardImage, Runner, TimingProfile};
use host::Readers;
use pki_issue::{CardCredentials, CardOptions, KeyAlgorithm, TestPki, TestPkiOptions};
use std::process::Command;
use std::time::{Duration, Instant};

const TAPS: usize = 200;
const PEER_RUNS: usize = 7;
const PKCS11: &str = "/usr/lib/x86_64-linux-gnu/opensc-pkcs11.so";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn image(creds: &CardCredentials) -> CardImage {
    creds.card_image(Some(1)).expect("personalise")
}

/// Median wall ms and host-compute ms over `taps` taps.
fn taps(
    authn: &Authenticator,
    t: &mut host::PcscTransport,
    n: usize,
    cold: bool,
) -> (f64, f64, Transaction) {
    let (mut wall, mut host) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..n {
        if cold {
            authn.clear_caches();
        }
        let start = Instant::now();
        let tx = authn.authenticate(t, Mechanism::PkiCak, None, None);
        wall.push(start.elapsed().as_secs_f64() * 1e3);
        assert!(tx.outcome.granted(), "{:?}", tx.outcome);
        host.push(tx.host_compute_us as f64 / 1e3);
        last = Some(tx);
    }
    (median(wall), median(host), last.expect("taps > 0"))
}

/// `pkcs11-tool` logging in and signing with the card authentication key
/// (ID 04), whole command, median ms.
fn peer(mechanism: &str, input_len: usize) -> Result<f64, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let input = dir.path().join("in.bin");
    let out = dir.path().join("sig.bin");
    std::fs::write(&input, vec![0x5A; input_len]).map_err(|e| e.to_string())?;
    let mut runs = Vec::new();
    for _ in 0..PEER_RUNS {
        let start = Instant::now();
        let o = Command::new("pkcs11-tool")
            .args([
                "--module", PKCS11, "--login", "--pin", "123456", "--sign", "--id", "04",
            ])
            .args(["-m", mechanism, "--input-file"])
            .arg(&input)
            .arg("--output-file")
            .arg(&out)
            .output()
            .map_err(|e| format!("cannot run pkcs11-tool: {e}"))?;
        if !o.status.success() {
            return Err(String::from_utf8_lossy(&o.stderr).trim().to_string());
        }
        runs.push(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(runs))
}

fn main() {
    let _lock = testbed::lock_vpcd();
    let _pcscd = match testbed::Pcscd::ensure_started() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("door bench skipped: {e}");
            return;
        }
    };
    testbed::wait_for_reader(testbed::VPCD_READER, Duration::from_secs(10)).expect("vpcd reader");
    let pki = TestPki::generate(TestPkiOptions::default()).expect("test PKI");
    let authn = Authenticator::new(
        pki.trust_store(),
        pki.crl_set().expect("CRLs"),
        Settings::default(),
    );
    let readers = Readers::establish().expect("PC/SC");

    println!("PKI-CAK through pcscd + vpcd, instant software card, {TAPS} taps each (medians)");
    println!(
        "  {:<9} {:<28} {:>9} {:>12} {:>6} {:>7}",
        "card", "path", "wall ms", "host cpu ms", "APDUs", "bytes"
    );
    let mut peers = Vec::new();
    for (name, alg, mech, input) in [
        ("P-256", KeyAlgorithm::P256, "ECDSA", 32),
        ("RSA-2048", KeyAlgorithm::Rsa2048, "RSA-PKCS", 32),
    ] {
        let creds = pki
            .issue_card(&CardOptions {
                algorithm: alg,
                ..CardOptions::default()
            })
            .expect("card");
        let bg = vpcd::Background::spawn(
            Runner::new(Card::new(image(&creds)), None, TimingProfile::Instant),
            testbed::VPCD_ADDR,
        );
        testbed::wait_for_card(testbed::VPCD_READER, Duration::from_secs(10)).expect("card");
        let mut t = readers.connect(testbed::VPCD_READER).expect("connect");
        for (label, cold) in [
            ("full read (caches cleared)", true),
            ("repeat tap (warm)", false),
        ] {
            authn.clear_caches();
            let _ = taps(&authn, &mut t, 3, false);
            let (wall, host, tx) = taps(&authn, &mut t, TAPS, cold);
            let tot = tx.total();
            let label = match (cold, tx.path) {
                (false, auth::PathTaken::Fast) => "repeat tap (fast path)",
                _ => label,
            };
            println!(
                "  {:<9} {:<28} {:>9.2} {:>12.3} {:>6} {:>7}",
                name,
                label,
                wall,
                host,
                tot.apdus,
                tot.bytes_in + tot.bytes_out
            );
            if !cold {
                peers.push((name, wall, peer(mech, input)));
            }
        }
        drop(t);
        bg.stop().expect("vpcd connector");
        let _ = testbed::wait_for_card_removed(testbed::VPCD_READER, Duration::from_secs(10));
    }
    println!("peer: OpenSC pkcs11-tool --login --sign with the card authentication key (whole command, median of {PEER_RUNS})");
    for (name, ours, p) in peers {
        match p {
            Ok(ms) => println!(
                "  {name:<9} pkcs11-tool {ms:>8.1} ms   pivgate warm tap {ours:>6.2} ms   ratio {:.0}x",
                ms / ours
            ),
            Err(e) => println!("  {name:<9} pkcs11-tool unavailable: {e}"),
        }
    }
}
