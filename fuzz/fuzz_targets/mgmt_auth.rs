//! Fuzzes management-key authentication against a key the fuzzer does not
//! know.
//!
//! Each fuzzing process gives four cards a random management key (3DES,
//! AES-128, AES-192, AES-256). The first input byte picks the card; the
//! rest is a session of `[len: u8][apdu: len bytes]` records, sent after
//! SELECT. Without the key no sequence of commands may authenticate: the
//! card must never count as management-authenticated, never accept a
//! command that needs the key (PUT DATA, GENERATE, IMPORT, SET MANAGEMENT
//! KEY), and never change keys, objects or the management key.

#![no_main]

use card::image::CardImage;
use card::piv::Algorithm;
use card::Card;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const ALGORITHMS: [Algorithm; 4] = [
    Algorithm::TripleDes,
    Algorithm::Aes128,
    Algorithm::Aes192,
    Algorithm::Aes256,
];

fn images() -> &'static [CardImage; 4] {
    static IMAGES: OnceLock<[CardImage; 4]> = OnceLock::new();
    IMAGES.get_or_init(|| {
        ALGORITHMS.map(|alg| {
            let mut img = CardImage::new_blank(Some(1));
            let mut key = vec![0u8; alg.key_len().expect("symmetric")];
            card::crypto::random(&mut key).expect("random key");
            img.set_management_key(alg, &key).expect("management key");
            img
        })
    })
}

/// Instructions that need the management key.
const NEEDS_KEY: [u8; 5] = [0xDB, 0x47, 0xFA, 0xFE, 0xFF];

fuzz_target!(|data: &[u8]| {
    let [pick, session @ ..] = data else {
        return;
    };
    let mut rest = session;
    let original = &images()[usize::from(*pick) % 4];
    let mut card = Card::new(original.clone());
    let select = card.process(&[0x00, 0xA4, 0x04, 0x00, 0x05, 0xA0, 0x00, 0x00, 0x03, 0x08]);
    assert_eq!(&select[select.len() - 2..], &[0x90, 0x00]);
    while let [len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (apdu, next) = tail.split_at(n);
        rest = next;
        let answer = card.process(apdu);
        assert!(answer.len() >= 2, "answer without a status word");
        assert!(
            !card.volatile().mgmt_authenticated,
            "management-key authentication succeeded without the key"
        );
        // The last command of a chain carries CLA 00; its INS decides.
        if let [cla, ins, ..] = *apdu {
            let ok = answer.ends_with(&[0x90, 0x00]);
            assert!(
                !(ok && cla & 0x10 == 0 && NEEDS_KEY.contains(&ins)),
                "INS {ins:02X} accepted without the management key"
            );
        }
        let img = card.image();
        assert_eq!(img.management_key, original.management_key);
        assert_eq!(img.keys, original.keys);
        assert_eq!(img.objects, original.objects);
    }
});
