//! A PKI-CAK tap through an OSDP reader in transparent mode, the controller
//! running the mechanism itself: pivgate CP ↔ pivgate PD over a
//! pseudo-terminal pair paced at 9600 and 115200 baud (10 bits per byte),
//! secure channel up, the PD relaying APDUs to an instant software card
//! (P-256). Full read (fresh authenticator: CHUID + certificate read and
//! validated) versus fast path (repeat tap, key already validated). Line time
//! is the model `line bytes × 10 / baud`, both directions, polls included;
//! the reference door's reader → module link is 397 ms.
//!
//! Run: `cargo bench -p links --bench osdp_tap` (release). Prints a table
//! with each line time beside the reference door's reader link (the ratio
//! line time / 397 ms); nothing is asserted.

use std::time::{Duration, Instant};

use auth::measure::REFERENCE_DOOR;
use auth::{Authenticator, Mechanism, PathTaken, Settings};
use card::Card;
use host::InProcess;
use links::loopback::Loopback;
use links::osdp::sc::Key;
use pki_issue::{CardOptions, KeyAlgorithm, TestPki, TestPkiOptions};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let pki = TestPki::generate(TestPkiOptions::default()).expect("test PKI");
    let creds = pki
        .issue_card(&CardOptions {
            algorithm: KeyAlgorithm::P256,
            ..CardOptions::default()
        })
        .expect("P-256 card");
    let fresh = || {
        Authenticator::new(
            pki.trust_store(),
            pki.crl_set().unwrap(),
            Settings::default(),
        )
    };

    let (ref_name, ref_ms) = REFERENCE_DOOR[1];
    println!("Reference door, {ref_name}: {ref_ms:.0} ms");
    println!();
    println!("| baud | path | taps | wall ms (median) | line time ms | link share | line time / reference {ref_ms:.0} ms | APDUs | APDU bytes | line bytes |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (baud, taps) in [(115200u32, 20usize), (9600, 5)] {
        let card = Box::new(InProcess::new(Card::new(
            creds.card_image(Some(1)).unwrap(),
        )));
        let (mut transport, pd, _line) = Loopback::start(card, 1, baud, Key([0x42; 16]))
            .expect("reader online")
            .split();
        // Warm the process (first random draw, code paths) once.
        let _ = fresh().authenticate(&mut transport, Mechanism::PkiCak, None, None);

        let warm = fresh();
        let _ = warm.authenticate(&mut transport, Mechanism::PkiCak, None, None);
        for path in [PathTaken::Full, PathTaken::Fast] {
            let (mut wall, mut line_ms) = (Vec::new(), Vec::new());
            let mut last = None;
            for _ in 0..taps {
                let full;
                let authn = if path == PathTaken::Full {
                    full = fresh();
                    &full
                } else {
                    &warm
                };
                let before = transport.line_stats();
                let t0 = Instant::now();
                let t = authn.authenticate(&mut transport, Mechanism::PkiCak, None, None);
                wall.push(ms(t0.elapsed()));
                let line = transport.line_stats().since(&before);
                line_ms.push(ms(line.wire_time()));
                assert!(t.outcome.granted(), "{:?}", t.outcome);
                assert_eq!(t.path, path);
                last = Some((t, line));
            }
            let (t, line) = last.unwrap();
            let total = t.total();
            let w = median(wall);
            let l = median(line_ms);
            println!(
                "| {baud} | {} | {taps} | {w:.1} | {l:.1} | {:.0} % | {:.2}× | {} | {} | {} |",
                if path == PathTaken::Full {
                    "full read"
                } else {
                    "fast path"
                },
                100.0 * l / w,
                l / ref_ms,
                total.apdus,
                total.bytes_in + total.bytes_out,
                line.tx_bytes + line.rx_bytes,
            );
        }
        transport.into_inner().shutdown().expect("CP");
        pd.shutdown().expect("PD");
    }
}
