//! Fuzzes the software card edge with sequences of APDUs.
//!
//! Input format: a sequence of `[len: u8][apdu: len bytes]` records, so
//! the fuzzer can build multi-command sessions (SELECT, VERIFY, chains,
//! GET RESPONSE, ...). A personalised card (P-256, RSA-2048 and P-384 keys,
//! a CHUID) is built once; every input starts from a fresh copy of it.
//! The card must never panic, every answer must end in a status word, the
//! image may only change when the edge asks for it to be stored, and the
//! retry counters stay within their limits.

#![no_main]

use card::image::CardImage;
use card::piv::{Algorithm, KeyRef};
use card::Card;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn image() -> &'static CardImage {
    static IMAGE: OnceLock<CardImage> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let mut img = CardImage::new_blank(Some(1));
        img.generate_key(KeyRef::PivAuth, Algorithm::EccP256)
            .expect("P-256 key");
        img.generate_key(KeyRef::Signature, Algorithm::Rsa2048)
            .expect("RSA key");
        img.generate_key(KeyRef::CardAuth, Algorithm::EccP384)
            .expect("P-384 key");
        img.put_object(
            card::piv::DataObject::Chuid,
            vec![0x30, 0x01, 0x00, 0xFE, 0x00],
        );
        img
    })
}

fuzz_target!(|data: &[u8]| {
    let mut card = Card::new(image().clone());
    let mut rest = data;
    while let [len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (apdu, next) = tail.split_at(n);
        rest = next;
        let before = card.image().clone();
        let reply = card.process_apdu(apdu);
        assert!(reply.apdu.len() >= 2, "answer without a status word");
        if !reply.persist {
            assert!(
                card.image() == &before,
                "image changed without a store request"
            );
        }
        let img = card.image();
        assert!(img.pin.retries_left <= img.pin.retries_max);
        assert!(img.puk.retries_left <= img.puk.retries_max);
        assert!(card.volatile().chain.buffered() <= card::edge::MAX_CHAIN_LEN);
    }
});
