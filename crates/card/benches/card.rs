//! Card edge benchmarks: a non-crypto APDU, P-256 and RSA-2048 signatures
//! inside the edge, and one APDU round trip through pcscd + vpcd.
//!
//! `cargo bench -p card --bench card`

use card::image::CardImage;
use card::{vpcd, Card, Runner, TimingProfile};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use iso7816::Command;
use piv::{Algorithm, KeyRef};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const SELECT: [u8; 10] = [0, 0xA4, 4, 0, 5, 0xA0, 0, 0, 3, 8];

fn card_with(slot: KeyRef, alg: Algorithm) -> Card {
    let mut img = CardImage::new_blank(Some(1));
    img.generate_key(slot, alg).unwrap();
    let mut card = Card::new(img);
    assert!(sw_ok(&card.process(&SELECT)));
    card
}

fn sw_ok(r: &[u8]) -> bool {
    r.ends_with(&[0x90, 0x00])
}

fn edge(c: &mut Criterion) {
    let mut card = card_with(KeyRef::CardAuth, Algorithm::EccP256);
    c.bench_function("edge/get_version", |b| {
        b.iter(|| {
            let r = card.process(black_box(&[0, 0xFD, 0, 0]));
            debug_assert!(sw_ok(&r));
            r
        })
    });
    let get_discovery = [0, 0xCB, 0x3F, 0xFF, 3, 0x5C, 1, 0x7E, 0];
    assert!(sw_ok(&card.process(&get_discovery)));
    c.bench_function("edge/get_data_discovery", |b| {
        b.iter(|| card.process(black_box(&get_discovery)))
    });

    let sign_p256 = Command::new(0, 0x87, 0x11, 0x9E, &piv::auth::sign_request(&[0x42; 32]))
        .with_le(256)
        .to_bytes();
    assert!(sw_ok(&card.process(&sign_p256)));
    c.bench_function("edge/sign_p256", |b| {
        b.iter(|| card.process(black_box(&sign_p256)))
    });

    let mut rsa = card_with(KeyRef::CardAuth, Algorithm::Rsa2048);
    let mut block = vec![0x00, 0x01];
    block.resize(256 - 52, 0xFF);
    block.push(0);
    block.resize(256, 0x5A);
    let template = piv::auth::sign_request(&block);
    let sign_rsa = Command::new(0, 0x87, 0x07, 0x9E, &template)
        .with_le(65_536)
        .to_bytes();
    assert!(sw_ok(&rsa.process(&sign_rsa)));
    let mut g = c.benchmark_group("edge");
    g.sample_size(50);
    g.bench_function("sign_rsa2048", |b| {
        b.iter(|| rsa.process(black_box(&sign_rsa)))
    });
    g.finish();
}

fn pcsc_round_trip(c: &mut Criterion) {
    let _lock = testbed::lock_vpcd();
    let pcscd = match testbed::Pcscd::ensure_started() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("skipping pcsc/round_trip: {e}");
            return;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let opts = vpcd::Options {
        addr: testbed::VPCD_ADDR.into(),
        shutdown: stop.clone(),
    };
    let thread = std::thread::spawn(move || {
        let card = Card::new(CardImage::new_blank(Some(2)));
        let mut runner = Runner::new(card, None, TimingProfile::Instant);
        let _ = vpcd::run(&mut runner, &opts);
    });
    let ready = testbed::wait_for_card(testbed::VPCD_READER, Duration::from_secs(20));
    if let Err(e) = ready {
        eprintln!("skipping pcsc/round_trip: {e}");
    } else {
        let ctx = pcsc::Context::establish(pcsc::Scope::User).unwrap();
        let reader = std::ffi::CString::new(testbed::VPCD_READER).unwrap();
        let pc = ctx
            .connect(&reader, pcsc::ShareMode::Shared, pcsc::Protocols::ANY)
            .unwrap();
        let mut buf = [0u8; 300];
        pc.transmit(&SELECT, &mut buf).unwrap();
        c.bench_function("pcsc/round_trip_get_version", |b| {
            b.iter(|| {
                let r = pc.transmit(black_box(&[0, 0xFD, 0, 0]), &mut buf).unwrap();
                assert!(sw_ok(r));
            })
        });
        drop(pc);
    }
    stop.store(true, Ordering::SeqCst);
    let _ = thread.join();
    let _ = testbed::wait_for_card_removed(testbed::VPCD_READER, Duration::from_secs(10));
    drop(pcscd);
}

/// The same private-key operations through aws-lc-rs's own signing API,
/// as the floor the card edge is compared with.
fn reference(c: &mut Criterion) {
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{
        EcdsaKeyPair, RsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING, RSA_PKCS1_SHA256,
    };
    let rng = SystemRandom::new();
    let der = card::crypto::generate_pkcs8(Algorithm::Rsa2048).unwrap();
    let rsa = RsaKeyPair::from_pkcs8(&der).unwrap();
    let mut sig = vec![0u8; rsa.public_modulus_len()];
    let mut g = c.benchmark_group("reference");
    g.sample_size(50);
    g.bench_function("aws_lc_rs_rsa2048_pkcs1_sha256_sign", |b| {
        b.iter(|| {
            rsa.sign(&RSA_PKCS1_SHA256, &rng, black_box(b"m"), &mut sig)
                .unwrap()
        })
    });
    let der = card::crypto::generate_pkcs8(Algorithm::EccP256).unwrap();
    let ec = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &der).unwrap();
    g.bench_function("aws_lc_rs_p256_sha256_sign", |b| {
        b.iter(|| ec.sign(&rng, black_box(b"m")).unwrap())
    });
    g.finish();
}

criterion_group!(benches, edge, reference, pcsc_round_trip);
criterion_main!(benches);
