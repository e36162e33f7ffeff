// Shared host-side helpers for the in-process card tests.
#![allow(dead_code)]

use card::crypto::BlockCipher;
use card::{Card, CardImage};
use iso7816::response::split_response;
use iso7816::{Command, StatusWord};
use piv::{Algorithm, DynAuth};

pub const DEFAULT_KEY: [u8; 24] = card::image::DEFAULT_MGMT_KEY;

pub fn blank() -> Card {
    Card::new(CardImage::new_blank(Some(4242)))
}

/// Sends one APDU; returns data and status word.
pub fn tx(card: &mut Card, apdu: &[u8]) -> (Vec<u8>, StatusWord) {
    let r = card.process(apdu);
    let (d, sw) = split_response(&r).expect("response has a status word");
    (d.to_vec(), sw)
}

/// Sends a command (chained when long) and follows 61xx.
pub fn call(card: &mut Card, ins: u8, p1: u8, p2: u8, data: &[u8]) -> (Vec<u8>, StatusWord) {
    let parts = iso7816::chain::split(0x00, ins, p1, p2, data, 255);
    let mut last = (Vec::new(), StatusWord::SUCCESS);
    for (i, p) in parts.iter().enumerate() {
        let apdu = if i + 1 == parts.len() {
            p.with_le(256)
        } else {
            *p
        };
        last = tx(card, &apdu.to_bytes());
        if i + 1 < parts.len() {
            assert_eq!(last.1, StatusWord::SUCCESS, "chained part refused");
        }
    }
    let (mut data, mut sw) = last;
    while let Some(n) = sw.remaining_bytes() {
        let (more, sw2) = tx(
            card,
            &Command::new(0, 0xC0, 0, 0, &[]).with_le(n).to_bytes(),
        );
        data.extend_from_slice(&more);
        sw = sw2;
    }
    (data, sw)
}

pub fn select(card: &mut Card) -> Vec<u8> {
    let (d, sw) = call(card, 0xA4, 0x04, 0x00, &piv::PIV_AID);
    assert_eq!(sw, StatusWord::SUCCESS);
    d
}

pub fn pin_block(pin: &str) -> Vec<u8> {
    let mut b = pin.as_bytes().to_vec();
    b.resize(8, 0xFF);
    b
}

pub fn verify(card: &mut Card, pin: &str) -> StatusWord {
    call(card, 0x20, 0x00, 0x80, &pin_block(pin)).1
}

/// Mutual (witness + challenge) management-key authentication.
pub fn mgmt_auth(card: &mut Card, alg: Algorithm, key: &[u8]) -> StatusWord {
    let cipher = BlockCipher::new(alg, key).unwrap();
    let req = DynAuth {
        witness: Some(&[]),
        ..Default::default()
    }
    .encode();
    let (d, sw) = call(card, 0x87, alg.id(), 0x9B, &req);
    if sw != StatusWord::SUCCESS {
        return sw;
    }
    let t = DynAuth::decode(&d).unwrap();
    let witness = cipher.decrypt_block(t.witness.unwrap()).unwrap();
    let challenge = vec![0x5A; cipher.block_size()];
    let req = DynAuth {
        witness: Some(&witness),
        challenge: Some(&challenge),
        response: Some(&[]),
        ..Default::default()
    }
    .encode();
    let (d, sw) = call(card, 0x87, alg.id(), 0x9B, &req);
    if sw == StatusWord::SUCCESS {
        let t = DynAuth::decode(&d).unwrap();
        assert_eq!(
            t.response.unwrap(),
            cipher.encrypt_block(&challenge).unwrap(),
            "card answered the challenge wrongly"
        );
    }
    sw
}

pub fn admin(card: &mut Card) {
    select(card);
    assert_eq!(
        mgmt_auth(card, Algorithm::TripleDes, &DEFAULT_KEY),
        StatusWord::SUCCESS
    );
}

/// The persistent and volatile state, for before/after comparisons.
pub fn snapshot(card: &Card) -> (CardImage, card::Volatile) {
    (card.image().clone(), card.volatile().clone())
}
