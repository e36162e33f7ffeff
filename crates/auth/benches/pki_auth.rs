//! What PKI-AUTH costs per tap, in-process with instant software cards
//! (P-256 and RSA-2048): wall time, host computation, APDUs and bytes, first
//! tap of a card (caches cleared) and repeat tap (caches warm). PKI-AUTH
//! proves the card with its card authentication key before the PIN is
//! sent; this is the price of that order, beside a PKI-CAK tap of the same
//! card for scale.
//!
//! Run: `cargo bench -p auth --bench pki_auth`. Prints a table; nothing is
//! asserted.

use auth::{Authenticator, FixedPin, Mechanism, Settings, Transaction};
use card::Card;
use host::InProcess;
use pki_issue::{CardOptions, KeyAlgorithm, TestPki, TestPkiOptions};
use std::time::Instant;

const TAPS: usize = 100;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn run(
    authn: &Authenticator,
    image: &card::CardImage,
    mechanism: Mechanism,
    cold: bool,
) -> (f64, f64, Transaction) {
    let (mut wall, mut host) = (Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..TAPS {
        if cold {
            authn.clear_caches();
        }
        let mut t = InProcess::new(Card::new(image.clone()));
        let mut pin = FixedPin::new("123456");
        let pin = (mechanism == Mechanism::PkiAuth).then_some(&mut pin as &mut dyn auth::PinSource);
        let start = Instant::now();
        let tx = authn.authenticate(&mut t, mechanism, pin, None);
        wall.push(start.elapsed().as_secs_f64() * 1e3);
        assert!(tx.outcome.granted(), "{:?}", tx.outcome);
        host.push(tx.host_compute_us as f64 / 1e3);
        last = Some(tx);
    }
    (median(wall), median(host), last.expect("taps > 0"))
}

fn main() {
    println!("PKI-AUTH and PKI-CAK in-process, instant software card, {TAPS} taps each (medians)");
    println!(
        "  {:<9} {:<9} {:<14} {:>9} {:>9} {:>6} {:>7}",
        "card", "mechanism", "caches", "wall ms", "host ms", "APDUs", "bytes"
    );
    for (name, alg) in [
        ("P-256", KeyAlgorithm::P256),
        ("RSA-2048", KeyAlgorithm::Rsa2048),
    ] {
        let pki = TestPki::generate(TestPkiOptions {
            algorithm: alg,
            ..TestPkiOptions::default()
        })
        .expect("test PKI");
        let creds = pki
            .issue_card(&CardOptions {
                algorithm: alg,
                ..CardOptions::default()
            })
            .expect("card");
        let image = creds.card_image(Some(1)).expect("image");
        let authn = Authenticator::new(
            pki.trust_store(),
            pki.crl_set().expect("CRLs"),
            Settings::default(),
        );
        for mechanism in [Mechanism::PkiAuth, Mechanism::PkiCak] {
            for (caches, cold) in [("cleared", true), ("warm", false)] {
                let (wall, host, tx) = run(&authn, &image, mechanism, cold);
                let t = tx.total();
                println!(
                    "  {:<9} {:<9} {:<14} {:>9.2} {:>9.2} {:>6} {:>7}",
                    name,
                    mechanism.as_str(),
                    caches,
                    wall,
                    host,
                    t.apdus,
                    t.bytes_in + t.bytes_out
                );
            }
        }
    }
}
