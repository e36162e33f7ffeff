//! Malformed and hostile APDUs: each gets the right ISO 7816 status word
//! and leaves the card's state intact; random and mutated APDUs never
//! panic the card or break its invariants.

mod common_edge;

use card::image::CardImage;
use card::Card;
use common_edge::*;
use iso7816::StatusWord;
use piv::{Algorithm, KeyRef};
use proptest::prelude::*;
use std::sync::OnceLock;

/// A personalised image (keys in 9A/9C/9E, a CHUID), built once.
fn personalised() -> &'static CardImage {
    static IMAGE: OnceLock<CardImage> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let mut img = CardImage::new_blank(Some(31337));
        img.generate_key(KeyRef::PivAuth, Algorithm::EccP256)
            .unwrap();
        img.generate_key(KeyRef::Signature, Algorithm::Rsa2048)
            .unwrap();
        img.generate_key(KeyRef::CardAuth, Algorithm::EccP384)
            .unwrap();
        img.put_object(piv::DataObject::Chuid, vec![0x30, 0x01, 0x00, 0xFE, 0x00]);
        img
    })
}

/// A card in a rich state: selected, PIN verified, management key
/// authenticated.
fn busy_card() -> Card {
    let mut card = Card::new(personalised().clone());
    admin(&mut card);
    assert_eq!(verify(&mut card, "123456"), StatusWord::SUCCESS);
    card
}

fn sw_of(card: &mut Card, apdu: &[u8]) -> StatusWord {
    tx(card, apdu).1
}

#[test]
fn malformed_apdus_get_precise_status_words_and_change_nothing() {
    let mut big_put = vec![0x00, 0xDB, 0x3F, 0xFF, 0x00, 0x4E, 0x29];
    big_put.extend_from_slice(&[0x5C, 3, 0x5F, 0xC1, 0x02, 0x53, 0x82, 0x4E, 0x20]);
    big_put.resize(7 + 0x4E29, 0xAA);
    let cases: Vec<(&str, Vec<u8>, StatusWord)> = vec![
        (
            "header only 3 bytes",
            vec![0, 0xCB, 0x3F],
            StatusWord::WRONG_LENGTH,
        ),
        ("empty", vec![], StatusWord::WRONG_LENGTH),
        (
            "Lc larger than data",
            vec![0, 0xCB, 0x3F, 0xFF, 5, 0x5C, 1, 0x7E],
            StatusWord::WRONG_LENGTH,
        ),
        (
            "Lc smaller than data",
            vec![0, 0xCB, 0x3F, 0xFF, 1, 0x5C, 1, 0x7E, 0, 0],
            StatusWord::WRONG_LENGTH,
        ),
        (
            "extended marker without length",
            vec![0, 0xFD, 0, 0, 0, 1],
            StatusWord::WRONG_LENGTH,
        ),
        (
            "extended Lc zero",
            vec![0, 0xCB, 0x3F, 0xFF, 0, 0, 0, 0x5C],
            StatusWord::WRONG_LENGTH,
        ),
        (
            "extended Lc mismatch",
            vec![0, 0xCB, 0x3F, 0xFF, 0, 0, 9, 0x5C, 1, 0x7E],
            StatusWord::WRONG_LENGTH,
        ),
        (
            "truncated TLV",
            vec![0, 0xCB, 0x3F, 0xFF, 3, 0x5C, 3, 0x5F],
            StatusWord::INCORRECT_DATA,
        ),
        (
            "overlong TLV length",
            vec![0, 0xCB, 0x3F, 0xFF, 6, 0x5C, 0x84, 0xFF, 0xFF, 0xFF, 0xFF],
            StatusWord::INCORRECT_DATA,
        ),
        (
            "indefinite TLV length",
            vec![0, 0xCB, 0x3F, 0xFF, 3, 0x5C, 0x80, 0x7E],
            StatusWord::INCORRECT_DATA,
        ),
        (
            "trailing bytes after tag list",
            vec![0, 0xCB, 0x3F, 0xFF, 4, 0x5C, 1, 0x7E, 0],
            StatusWord::INCORRECT_DATA,
        ),
        (
            "unknown data object",
            vec![0, 0xCB, 0x3F, 0xFF, 5, 0x5C, 3, 0x5F, 0xC1, 0x99],
            StatusWord::FILE_NOT_FOUND,
        ),
        (
            "unknown INS",
            vec![0, 0x01, 0, 0],
            StatusWord::INS_NOT_SUPPORTED,
        ),
        (
            "unknown INS with data",
            vec![0, 0xE2, 0, 0, 1, 0],
            StatusWord::INS_NOT_SUPPORTED,
        ),
        (
            "GET DATA wrong P1P2",
            vec![0, 0xCB, 0x3F, 0xFE, 3, 0x5C, 1, 0x7E],
            StatusWord::INCORRECT_P1P2,
        ),
        (
            "VERIFY unknown reference",
            vec![0, 0x20, 0, 0x81],
            StatusWord::REFERENCED_DATA_NOT_FOUND,
        ),
        (
            "VERIFY wrong P1",
            vec![0, 0x20, 0x01, 0x80],
            StatusWord::INCORRECT_P1P2,
        ),
        (
            "VERIFY short PIN block",
            vec![0, 0x20, 0, 0x80, 4, 0x31, 0x32, 0x33, 0x34],
            StatusWord::INCORRECT_DATA,
        ),
        (
            "VERIFY non-digit PIN",
            vec![
                0, 0x20, 0, 0x80, 8, 0x31, 0x32, 0x33, 0x34, 0x35, 0x41, 0xFF, 0xFF,
            ],
            StatusWord::INCORRECT_DATA,
        ),
        (
            "VERIFY bad padding",
            vec![
                0, 0x20, 0, 0x80, 8, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0xFF, 0x31,
            ],
            StatusWord::INCORRECT_DATA,
        ),
        (
            "CHANGE PIN malformed new PIN",
            [
                &[0, 0x24, 0, 0x80, 16][..],
                b"123456\xFF\xFF",
                b"12\xFF\xFF\xFF\xFF\xFF\xFF",
            ]
            .concat(),
            StatusWord::INCORRECT_DATA,
        ),
        (
            "RESET RETRY COUNTER malformed PUK",
            [
                &[0, 0x2C, 0, 0x80, 16][..],
                b"1234567\x00",
                b"123456\xFF\xFF",
            ]
            .concat(),
            StatusWord::INCORRECT_DATA,
        ),
        (
            "VERIFY reset with data",
            vec![0, 0x20, 0xFF, 0x80, 1, 0],
            StatusWord::WRONG_LENGTH,
        ),
        (
            "GA unknown algorithm",
            vec![0, 0x87, 0x42, 0x9A, 4, 0x7C, 2, 0x82, 0],
            StatusWord::INCORRECT_P1P2,
        ),
        (
            "GA unknown key",
            vec![0, 0x87, 0x11, 0x42, 4, 0x7C, 2, 0x82, 0],
            StatusWord::INCORRECT_P1P2,
        ),
        (
            "GA garbage template",
            vec![0, 0x87, 0x11, 0x9A, 3, 0x7C, 5, 0x82],
            StatusWord::INCORRECT_DATA,
        ),
        (
            "GA unknown element",
            vec![0, 0x87, 0x11, 0x9A, 4, 0x7C, 2, 0x99, 0],
            StatusWord::INCORRECT_DATA,
        ),
        (
            "GA symmetric alg on 9A",
            vec![0, 0x87, 0x03, 0x9A, 4, 0x7C, 2, 0x81, 0],
            StatusWord::INCORRECT_P1P2,
        ),
        (
            "GENERATE on 9B",
            vec![0, 0x47, 0, 0x9B, 5, 0xAC, 3, 0x80, 1, 0x11],
            StatusWord::INCORRECT_P1P2,
        ),
        (
            "GENERATE unknown algorithm",
            vec![0, 0x47, 0, 0x9A, 5, 0xAC, 3, 0x80, 1, 0x99],
            StatusWord::INCORRECT_DATA,
        ),
        (
            "PUT DATA without 53",
            vec![0, 0xDB, 0x3F, 0xFF, 5, 0x5C, 3, 0x5F, 0xC1, 0x02],
            StatusWord::INCORRECT_DATA,
        ),
        (
            "PUT DATA oversized object",
            big_put,
            StatusWord::NOT_ENOUGH_MEMORY,
        ),
        (
            "SET MGMT KEY wrong key length",
            vec![0, 0xFF, 0xFF, 0xFF, 5, 0x03, 0x9B, 2, 1, 2],
            StatusWord::INCORRECT_DATA,
        ),
        (
            "GET VERSION with data",
            vec![0, 0xFD, 0, 0, 1, 0],
            StatusWord::WRONG_LENGTH,
        ),
        (
            "GET VERSION wrong P1",
            vec![0, 0xFD, 1, 0],
            StatusWord::INCORRECT_P1P2,
        ),
        (
            "GET RESPONSE wrong P1P2",
            vec![0, 0xC0, 1, 0, 0],
            StatusWord::INCORRECT_P1P2,
        ),
        (
            "proprietary class",
            vec![0x80, 0xCB, 0x3F, 0xFF, 3, 0x5C, 1, 0x7E],
            StatusWord::CLA_NOT_SUPPORTED,
        ),
        (
            "class FF",
            vec![0xFF, 0xFD, 0, 0],
            StatusWord::CLA_NOT_SUPPORTED,
        ),
        (
            "secure messaging class",
            vec![0x0C, 0xFD, 0, 0],
            StatusWord::SECURE_MESSAGING_NOT_SUPPORTED,
        ),
        (
            "logical channel class",
            vec![0x01, 0xFD, 0, 0],
            StatusWord::LOGICAL_CHANNEL_NOT_SUPPORTED,
        ),
    ];
    for (what, apdu, want) in cases {
        let mut card = busy_card();
        let before = snapshot(&card);
        let reply = card.process_apdu(&apdu);
        let (_, sw) = iso7816::response::split_response(&reply.apdu).unwrap();
        assert_eq!(sw, want, "{what}");
        assert!(!reply.persist, "{what}: nothing to store");
        assert_eq!(snapshot(&card), before, "{what}: state changed");
    }
}

#[test]
fn chaining_abuse_is_refused_and_drops_only_the_chain() {
    let mut card = busy_card();
    let security = |c: &Card| {
        let v = c.volatile();
        (
            c.image().clone(),
            v.selected,
            v.pin_verified,
            v.mgmt_authenticated,
        )
    };
    let before = security(&card);
    // A chain continued with another INS.
    assert_eq!(
        sw_of(&mut card, &[0x10, 0xDB, 0x3F, 0xFF, 2, 0x5C, 3]),
        StatusWord::SUCCESS
    );
    assert_eq!(
        sw_of(&mut card, &[0x10, 0x87, 0x11, 0x9A, 1, 0x7C]),
        StatusWord::LAST_COMMAND_OF_CHAIN_EXPECTED
    );
    assert!(!card.volatile().chain.in_progress());
    // A chain longer than the buffer.
    let link = [&[0x10, 0xDB, 0x3F, 0xFF, 0xFF][..], &[0xAB; 255]].concat();
    let mut last = StatusWord::SUCCESS;
    for _ in 0..(card::edge::MAX_CHAIN_LEN / 255 + 1) {
        last = sw_of(&mut card, &link);
        if last != StatusWord::SUCCESS {
            break;
        }
    }
    assert_eq!(last, StatusWord::NOT_ENOUGH_MEMORY);
    assert_eq!(card.volatile().chain.buffered(), 0);
    // A reassembled chain is decoded like any command: garbage is refused.
    assert_eq!(
        sw_of(&mut card, &[0x10, 0xCB, 0x3F, 0xFF, 2, 0x5C, 0x09]),
        StatusWord::SUCCESS
    );
    assert_eq!(
        sw_of(&mut card, &[0x00, 0xCB, 0x3F, 0xFF, 1, 0x7E]),
        StatusWord::INCORRECT_DATA
    );
    assert_eq!(security(&card), before);
    // The card still works normally.
    assert_eq!(
        tx(&mut card, &[0, 0xFD, 0, 0]),
        (vec![5, 7, 1], StatusWord::SUCCESS)
    );
}

/// Valid APDUs for the personalised card; the proptest mutates them.
fn valid_apdus() -> Vec<Vec<u8>> {
    // (The RSA entry is an extended APDU: Lc 0x010A, template 7C 82 0106.)
    let mut verify = vec![0, 0x20, 0, 0x80, 8];
    verify.extend_from_slice(b"123456\xFF\xFF");
    let mut sign_rsa = vec![
        0x00, 0x87, 0x07, 0x9C, 0x00, 0x01, 0x0A, 0x7C, 0x82, 0x01, 0x06, 0x82, 0x00, 0x81, 0x82,
        0x01, 0x00,
    ];
    sign_rsa.extend_from_slice(&[0x00; 1]);
    sign_rsa.extend_from_slice(&[0x5A; 255]);
    sign_rsa.extend_from_slice(&[0x00, 0x00]);
    vec![
        vec![0, 0xA4, 4, 0, 5, 0xA0, 0, 0, 3, 8],
        vec![0, 0xA4, 4, 0, 9, 0xA0, 0, 0, 3, 8, 0, 0, 0x10, 0, 0],
        vec![0, 0xCB, 0x3F, 0xFF, 5, 0x5C, 3, 0x5F, 0xC1, 0x02, 0x08],
        vec![0, 0xCB, 0x3F, 0xFF, 3, 0x5C, 1, 0x7E, 0],
        vec![0, 0xC0, 0, 0, 0],
        verify,
        vec![0, 0x20, 0, 0x80],
        vec![0, 0x20, 0xFF, 0x80],
        vec![
            0, 0x87, 0x11, 0x9A, 0x26, 0x7C, 0x24, 0x82, 0, 0x81, 0x20, 1, 2, 3, 4, 5, 6, 7, 8, 1,
            2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0,
        ],
        vec![0, 0x87, 0x03, 0x9B, 4, 0x7C, 2, 0x80, 0, 0],
        vec![0, 0x87, 0x03, 0x9B, 4, 0x7C, 2, 0x81, 0, 0],
        vec![0x10, 0xDB, 0x3F, 0xFF, 5, 0x5C, 3, 0x5F, 0xC1, 0x02],
        vec![0, 0xDB, 0x3F, 0xFF, 4, 0x53, 2, 0x30, 0],
        vec![0, 0xFD, 0, 0],
        vec![0, 0xF8, 0, 0],
        vec![0, 0xF7, 0, 0x9A],
        vec![
            0, 0x2C, 0, 0x80, 16, b'1', b'2', b'3', b'4', b'5', b'6', b'7', b'8', b'1', b'2', b'3',
            b'4', b'5', b'6', 0xFF, 0xFF,
        ],
        sign_rsa,
    ]
}

#[test]
fn the_valid_apdus_are_valid() {
    let mut card = Card::new(personalised().clone());
    for apdu in valid_apdus() {
        let sw = tx(&mut card, &apdu).1;
        assert!(
            !matches!(sw.0, 0x6700 | 0x6A80 | 0x6A86 | 0x6D00 | 0x6E00),
            "{apdu:02X?} -> {sw}"
        );
    }
    // With the PIN verified the PIN-always RSA key signs the extended APDU.
    let apdus = valid_apdus();
    assert_eq!(tx(&mut card, &apdus[5]).1, StatusWord::SUCCESS);
    let (sig, sw) = tx(&mut card, apdus.last().unwrap());
    assert_eq!(sw, StatusWord::SUCCESS);
    assert_eq!(sig.len(), 4 + 4 + 256);
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Extend(Vec<u8>),
    SetByte(usize, u8),
}

fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let base = valid_apdus();
    let n = base.len();
    (
        0..n,
        proptest::collection::vec(
            prop_oneof![
                (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
                any::<usize>().prop_map(Mutation::Truncate),
                proptest::collection::vec(any::<u8>(), 1..8).prop_map(Mutation::Extend),
                (0usize..8, any::<u8>()).prop_map(|(i, b)| Mutation::SetByte(i, b)),
            ],
            0..3,
        ),
    )
        .prop_map(move |(i, muts)| {
            let mut a = valid_apdus()[i].clone();
            for m in muts {
                match m {
                    Mutation::Flip(j, b) if !a.is_empty() => {
                        let j = j % a.len();
                        a[j] ^= b;
                    }
                    Mutation::Truncate(j) if !a.is_empty() => a.truncate(j % a.len()),
                    Mutation::Extend(v) => a.extend_from_slice(&v),
                    Mutation::SetByte(j, b) if j < a.len() => a[j] = b,
                    _ => {}
                }
            }
            a
        })
}

fn any_apdu() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => mutated(),
        1 => proptest::collection::vec(any::<u8>(), 0..300),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_and_mutated_apdus_keep_invariants(apdus in proptest::collection::vec(any_apdu(), 1..24)) {
        let mut card = Card::new(personalised().clone());
        for apdu in &apdus {
            let image_before = card.image().clone();
            let reply = card.process_apdu(apdu);
            prop_assert!(reply.apdu.len() >= 2, "every answer ends in a status word");
            if !reply.persist {
                prop_assert_eq!(card.image(), &image_before, "image changed without a store request");
            }
            let img = card.image();
            prop_assert!(img.pin.retries_left <= img.pin.retries_max);
            prop_assert!(img.puk.retries_left <= img.puk.retries_max);
            prop_assert!(card.volatile().chain.buffered() <= card::edge::MAX_CHAIN_LEN);
        }
    }
}
