//! The card edge exercised in-process, command by command.

mod common_edge;

use aws_lc_rs::signature::{self, UnparsedPublicKey};
use card::crypto::BlockCipher;
use common_edge::*;
use iso7816::{Command, StatusWord};
use piv::{Algorithm, CertContainer, DynAuth, KeyRef, PublicKeyTemplate};

#[test]
fn select_accepts_client_aid_forms_and_keeps_pin_state() {
    let mut card = blank();
    // Without selection PIV commands are refused.
    assert_eq!(
        tx(&mut card, &[0, 0xFD, 0, 0]).1,
        StatusWord::CONDITIONS_NOT_SATISFIED
    );
    // yubico-piv-tool: 5-byte AID, no Le, expects data + 9000.
    let (d, sw) = tx(&mut card, &[0, 0xA4, 4, 0, 5, 0xA0, 0, 0, 3, 8]);
    assert_eq!(sw, StatusWord::SUCCESS);
    let apt = piv::ApplicationProperties::decode(&d).unwrap();
    assert_eq!(apt.pix, vec![0, 0, 0x10, 0, 1, 0]);
    assert_eq!(apt.authority, vec![0xA0, 0, 0, 3, 8]);
    // OpenSC: 9-byte truncation with Le.
    let (d2, sw) = tx(
        &mut card,
        &[0, 0xA4, 4, 0, 9, 0xA0, 0, 0, 3, 8, 0, 0, 0x10, 0, 0],
    );
    assert_eq!((d2, sw), (d.clone(), StatusWord::SUCCESS));
    assert_eq!(verify(&mut card, "123456"), StatusWord::SUCCESS);
    select(&mut card);
    assert!(
        card.volatile().pin_verified,
        "SELECT must not reset the PIN state"
    );
    // Another application is not found and does not deselect PIV.
    assert_eq!(
        tx(&mut card, &[0, 0xA4, 4, 0, 5, 0xA0, 0, 0, 5, 0x27]).1,
        StatusWord::FILE_NOT_FOUND
    );
    assert_eq!(tx(&mut card, &[0, 0xFD, 0, 0]).1, StatusWord::SUCCESS);
}

#[test]
fn get_data_follows_access_rules_and_chunks_long_objects() {
    let mut card = blank();
    admin(&mut card);
    let cert: Vec<u8> = std::iter::once(0x30)
        .chain((0..1200).map(|i| i as u8))
        .collect();
    let container = CertContainer::new(cert.clone()).encode();
    let mut put = vec![0x5C, 3, 0x5F, 0xC1, 0x01];
    iso7816::tlv::push(&mut put, 0x53, &container);
    assert_eq!(
        call(&mut card, 0xDB, 0x3F, 0xFF, &put).1,
        StatusWord::SUCCESS
    );
    let mut put = vec![0x5C, 3, 0x5F, 0xC1, 0x09];
    iso7816::tlv::push(&mut put, 0x53, &[0x01, 0x03, b'B', b'o', b'b']);
    assert_eq!(
        call(&mut card, 0xDB, 0x3F, 0xFF, &put).1,
        StatusWord::SUCCESS
    );

    // OpenSC's pattern: Le=08 first, then the rest through GET RESPONSE.
    let (first, sw) = tx(
        &mut card,
        &[0, 0xCB, 0x3F, 0xFF, 5, 0x5C, 3, 0x5F, 0xC1, 0x01, 0x08],
    );
    assert_eq!(first.len(), 8);
    assert_eq!(sw.sw1(), 0x61);
    let (rest, sw) = call(&mut card, 0xC0, 0, 0, &[]);
    assert_eq!(sw, StatusWord::SUCCESS);
    let whole = [first, rest].concat();
    let value = iso7816::tlv::parse_single(&whole, 0x53).unwrap();
    assert_eq!(CertContainer::decode(value).unwrap().certificate, cert);

    // Extended Le gets everything at once.
    let (d, sw) = tx(
        &mut card,
        &[
            0, 0xCB, 0x3F, 0xFF, 0, 0, 5, 0x5C, 3, 0x5F, 0xC1, 0x01, 0, 0,
        ],
    );
    assert_eq!((d, sw), (whole, StatusWord::SUCCESS));

    // Printed information needs the PIN; free objects do not; absent is 6A82.
    let printed = [0x5C, 3, 0x5F, 0xC1, 0x09];
    assert_eq!(
        call(&mut card, 0xCB, 0x3F, 0xFF, &printed).1,
        StatusWord::SECURITY_STATUS_NOT_SATISFIED
    );
    assert_eq!(verify(&mut card, "123456"), StatusWord::SUCCESS);
    assert_eq!(
        call(&mut card, 0xCB, 0x3F, 0xFF, &printed).1,
        StatusWord::SUCCESS
    );
    assert_eq!(
        call(&mut card, 0xCB, 0x3F, 0xFF, &[0x5C, 3, 0x5F, 0xC1, 0x02]).1,
        StatusWord::FILE_NOT_FOUND
    );
    // The discovery object is answered under its own tag.
    let (d, sw) = call(&mut card, 0xCB, 0x3F, 0xFF, &[0x5C, 1, 0x7E]);
    assert_eq!(sw, StatusWord::SUCCESS);
    assert_eq!(
        piv::discovery::Discovery::decode(&d).unwrap(),
        Default::default()
    );
    // GET RESPONSE with nothing pending.
    assert_eq!(
        tx(&mut card, &[0, 0xC0, 0, 0, 0]).1,
        StatusWord::CONDITIONS_NOT_SATISFIED
    );
}

#[test]
fn put_data_needs_the_management_key_and_empty_value_deletes() {
    let mut card = blank();
    select(&mut card);
    let put = [0x5C, 3, 0x5F, 0xC1, 0x02, 0x53, 2, 0x30, 0x00];
    assert_eq!(
        call(&mut card, 0xDB, 0x3F, 0xFF, &put).1,
        StatusWord::SECURITY_STATUS_NOT_SATISFIED
    );
    assert_eq!(
        mgmt_auth(&mut card, Algorithm::TripleDes, &DEFAULT_KEY),
        StatusWord::SUCCESS
    );
    let r = card.process_apdu(&Command::new(0, 0xDB, 0x3F, 0xFF, &put).to_bytes());
    assert!(r.persist);
    assert_eq!(
        call(&mut card, 0xCB, 0x3F, 0xFF, &put[..5]).0,
        vec![0x53, 2, 0x30, 0]
    );
    assert_eq!(
        call(
            &mut card,
            0xDB,
            0x3F,
            0xFF,
            &[0x5C, 3, 0x5F, 0xC1, 0x02, 0x53, 0]
        )
        .1,
        StatusWord::SUCCESS
    );
    assert_eq!(
        call(&mut card, 0xCB, 0x3F, 0xFF, &put[..5]).1,
        StatusWord::FILE_NOT_FOUND
    );
}

#[test]
fn verify_counts_failures_blocks_and_puk_unblocks() {
    let mut card = blank();
    select(&mut card);
    assert_eq!(call(&mut card, 0x20, 0, 0x80, &[]).1, StatusWord(0x63C3));
    // Malformed PINs are refused without counting.
    for bad in [&b"12345\xFF\xFF\xFF"[..], b"12a456\xFF\xFF", b"123456\xFF1"] {
        assert_eq!(
            call(&mut card, 0x20, 0, 0x80, bad).1,
            StatusWord::INCORRECT_DATA
        );
    }
    assert_eq!(
        call(&mut card, 0x20, 0, 0x80, b"123456").1,
        StatusWord::INCORRECT_DATA
    );
    assert_eq!(card.image().pin.retries_left, 3);
    let r = card.process_apdu(&Command::new(0, 0x20, 0, 0x80, &pin_block("000000")).to_bytes());
    assert_eq!(r.apdu, vec![0x63, 0xC2]);
    assert!(r.persist, "a failed try must be stored before the answer");
    assert_eq!(verify(&mut card, "123456"), StatusWord::SUCCESS);
    assert_eq!(card.image().pin.retries_left, 3);
    assert_eq!(call(&mut card, 0x20, 0, 0x80, &[]).1, StatusWord::SUCCESS);
    assert_eq!(
        call(&mut card, 0x20, 0xFF, 0x80, &[]).1,
        StatusWord::SUCCESS
    );
    assert_eq!(call(&mut card, 0x20, 0, 0x80, &[]).1, StatusWord(0x63C3));
    for left in [2, 1, 0] {
        assert_eq!(verify(&mut card, "999999"), StatusWord::verify_failed(left));
    }
    assert_eq!(verify(&mut card, "123456"), StatusWord::AUTH_METHOD_BLOCKED);
    assert_eq!(
        call(&mut card, 0x20, 0, 0x80, &[]).1,
        StatusWord::AUTH_METHOD_BLOCKED
    );
    // Wrong PUK counts on the PUK.
    let rrc = |puk: &str, pin: &str| [pin_block(puk), pin_block(pin)].concat();
    assert_eq!(
        call(&mut card, 0x2C, 0, 0x80, &rrc("87654321", "654321")).1,
        StatusWord(0x63C2)
    );
    assert_eq!(
        call(&mut card, 0x2C, 0, 0x80, &rrc("12345678", "654321")).1,
        StatusWord::SUCCESS
    );
    assert_eq!(card.image().puk.retries_left, 3);
    assert_eq!(verify(&mut card, "654321"), StatusWord::SUCCESS);
    // CHANGE REFERENCE DATA for the PIN and the PUK.
    let crd = [pin_block("654321"), pin_block("11223344")].concat();
    assert_eq!(call(&mut card, 0x24, 0, 0x80, &crd).1, StatusWord::SUCCESS);
    assert_eq!(verify(&mut card, "11223344"), StatusWord::SUCCESS);
    let crd = [pin_block("12345678"), pin_block("87654321")].concat();
    assert_eq!(call(&mut card, 0x24, 0, 0x81, &crd).1, StatusWord::SUCCESS);
    let crd = [pin_block("00000000"), pin_block("12345678")].concat();
    assert_eq!(call(&mut card, 0x24, 0, 0x81, &crd).1, StatusWord(0x63C2));
    assert!(!card.image().pin.is_default && !card.image().puk.is_default);
}

/// The empty PIN / PUK (eight `FF`) is a wrong try answered `63CX`, as on a
/// YubiKey: `ykman piv reset` blocks both this way, then sends RESET.
#[test]
fn empty_pin_and_puk_count_as_wrong_tries_so_a_yubikey_reset_completes() {
    let mut card = blank();
    select(&mut card);
    let ff = [0xFFu8; 8];
    // VERIFY 00 20 00 80 08 FF..FF
    let verify_empty = [&[0x00, 0x20, 0x00, 0x80, 0x08][..], &ff].concat();
    assert_eq!(tx(&mut card, &verify_empty).1, StatusWord(0x63C2));
    let r = card.process_apdu(&verify_empty);
    assert_eq!(r.apdu, vec![0x63, 0xC1]);
    assert!(r.persist, "the try is stored before the answer");
    assert_eq!(tx(&mut card, &verify_empty).1, StatusWord(0x63C0));
    assert_eq!(
        tx(&mut card, &verify_empty).1,
        StatusWord::AUTH_METHOD_BLOCKED
    );
    assert!(card.image().pin.is_blocked());
    // RESET RETRY COUNTER 00 2C 00 80 10 FF×8 FF×8, as ykman sends it.
    let rrc_empty = [&[0x00, 0x2C, 0x00, 0x80, 0x10][..], &ff, &ff].concat();
    // An empty PUK with a well-formed new PIN counts the same.
    let rrc_empty_puk = [
        &[0x00, 0x2C, 0x00, 0x80, 0x10][..],
        &ff,
        &pin_block("123456"),
    ]
    .concat();
    assert_eq!(tx(&mut card, &rrc_empty).1, StatusWord(0x63C2));
    assert_eq!(tx(&mut card, &rrc_empty_puk).1, StatusWord(0x63C1));
    // A right PUK with an empty new PIN is still refused for its format,
    // without counting.
    let rrc_empty_pin = [
        &[0x00, 0x2C, 0x00, 0x80, 0x10][..],
        &pin_block("12345678"),
        &ff,
    ]
    .concat();
    assert_eq!(tx(&mut card, &rrc_empty_pin).1, StatusWord::INCORRECT_DATA);
    assert_eq!(card.image().puk.retries_left, 1);
    assert!(
        card.image().pin.is_blocked(),
        "a refused new PIN unblocks nothing"
    );
    assert_eq!(tx(&mut card, &rrc_empty).1, StatusWord(0x63C0));
    assert_eq!(tx(&mut card, &rrc_empty).1, StatusWord::AUTH_METHOD_BLOCKED);
    // Both blocked: the YubiKey RESET (00 FB 00 00) restores the factory values.
    assert_eq!(
        tx(&mut card, &[0x00, 0xFB, 0x00, 0x00]).1,
        StatusWord::SUCCESS
    );
    assert_eq!(verify(&mut card, "123456"), StatusWord::SUCCESS);
    assert!(card.image().pin.is_default && card.image().puk.is_default);
    assert_eq!(card.image().pin.retries_left, 3);
    assert_eq!(card.image().puk.retries_left, 3);
    // GET VERSION answers 5.7.1, which makes ykman use this reset.
    assert_eq!(
        tx(&mut card, &[0x00, 0xFD, 0x00, 0x00]),
        (vec![5, 7, 1], StatusWord::SUCCESS)
    );
}

#[test]
fn change_reference_data_counts_an_empty_old_value() {
    let mut card = blank();
    select(&mut card);
    let ff = [0xFFu8; 8];
    // CHANGE REFERENCE DATA 00 24 00 80 10 FF×8 <new>: a wrong PIN try.
    let crd_pin = [
        &[0x00, 0x24, 0x00, 0x80, 0x10][..],
        &ff,
        &pin_block("654321"),
    ]
    .concat();
    assert_eq!(tx(&mut card, &crd_pin).1, StatusWord(0x63C2));
    // ...also when the new value is empty.
    let crd_pin_ff = [&[0x00, 0x24, 0x00, 0x80, 0x10][..], &ff, &ff].concat();
    assert_eq!(tx(&mut card, &crd_pin_ff).1, StatusWord(0x63C1));
    // 00 24 00 81 for the PUK.
    let crd_puk = [
        &[0x00, 0x24, 0x00, 0x81, 0x10][..],
        &ff,
        &pin_block("87654321"),
    ]
    .concat();
    assert_eq!(tx(&mut card, &crd_puk).1, StatusWord(0x63C2));
    // A right old value with an empty new one: refused, nothing counted.
    let crd_right = [
        &[0x00, 0x24, 0x00, 0x80, 0x10][..],
        &pin_block("123456"),
        &ff,
    ]
    .concat();
    assert_eq!(tx(&mut card, &crd_right).1, StatusWord::INCORRECT_DATA);
    assert_eq!(card.image().pin.retries_left, 1);
    assert_eq!(card.image().puk.retries_left, 2);
    assert_eq!(verify(&mut card, "123456"), StatusWord::SUCCESS);
    assert_eq!(card.image().pin.retries_left, 3);
}

#[test]
fn management_key_auth_refuses_wrong_answers_without_other_changes() {
    let mut card = blank();
    select(&mut card);
    // Wrong key: the witness comes back wrong and is refused with 6982.
    assert_eq!(
        mgmt_auth(&mut card, Algorithm::TripleDes, &[9; 24]),
        StatusWord::SECURITY_STATUS_NOT_SATISFIED
    );
    assert!(!card.volatile().mgmt_authenticated);
    // Answering without an outstanding witness is refused too.
    let req = DynAuth {
        witness: Some(&[0; 8]),
        challenge: Some(&[0; 8]),
        response: Some(&[]),
        ..Default::default()
    }
    .encode();
    assert_eq!(
        call(&mut card, 0x87, 3, 0x9B, &req).1,
        StatusWord::CONDITIONS_NOT_SATISFIED
    );
    // Algorithm mismatch.
    assert_eq!(
        mgmt_auth(&mut card, Algorithm::Aes192, &[1; 24]),
        StatusWord::INCORRECT_P1P2
    );

    // Single challenge-response (external authenticate).
    let cipher = BlockCipher::new(Algorithm::TripleDes, &DEFAULT_KEY).unwrap();
    let (d, sw) = call(&mut card, 0x87, 3, 0x9B, &[0x7C, 2, 0x81, 0]);
    assert_eq!(sw, StatusWord::SUCCESS);
    let challenge = DynAuth::decode(&d).unwrap().challenge.unwrap().to_vec();
    assert_eq!(challenge.len(), 8);
    let mut wrong = cipher.encrypt_block(&challenge).unwrap();
    wrong[0] ^= 1;
    let before = snapshot(&card);
    let req = DynAuth {
        response: Some(&wrong),
        ..Default::default()
    }
    .encode();
    assert_eq!(
        call(&mut card, 0x87, 3, 0x9B, &req).1,
        StatusWord::SECURITY_STATUS_NOT_SATISFIED
    );
    assert_eq!(card.image(), &before.0);
    assert!(!card.volatile().mgmt_authenticated && card.volatile().mgmt_pending.is_none());
    // The right answer to a fresh challenge works.
    let (d, _) = call(&mut card, 0x87, 3, 0x9B, &[0x7C, 2, 0x81, 0]);
    let challenge = DynAuth::decode(&d).unwrap().challenge.unwrap().to_vec();
    let req = DynAuth {
        response: Some(&cipher.encrypt_block(&challenge).unwrap()),
        ..Default::default()
    }
    .encode();
    assert_eq!(
        call(&mut card, 0x87, 3, 0x9B, &req),
        (vec![], StatusWord::SUCCESS)
    );
    assert!(card.volatile().mgmt_authenticated);

    // Switch to each AES size and authenticate with it.
    for (alg, len) in [
        (Algorithm::Aes128, 16),
        (Algorithm::Aes192, 24),
        (Algorithm::Aes256, 32),
        (Algorithm::TripleDes, 24),
    ] {
        let key: Vec<u8> = (0..len as u8).collect();
        let mut data = vec![alg.id(), 0x9B, len as u8];
        data.extend_from_slice(&key);
        assert_eq!(
            call(&mut card, 0xFF, 0xFF, 0xFF, &data).1,
            StatusWord::SUCCESS,
            "{alg:?}"
        );
        assert_eq!(
            mgmt_auth(&mut card, alg, &key),
            StatusWord::SUCCESS,
            "{alg:?}"
        );
        let (m, _) = call(&mut card, 0xF7, 0, 0x9B, &[]);
        assert_eq!(&m[..3], &[0x01, 0x01, alg.id()]);
    }
}

fn generate(card: &mut card::Card, slot: u8, alg: Algorithm) -> PublicKeyTemplate {
    let (d, sw) = call(card, 0x47, 0, slot, &[0xAC, 3, 0x80, 1, alg.id()]);
    assert_eq!(sw, StatusWord::SUCCESS);
    PublicKeyTemplate::decode(&d).unwrap()
}

fn sign(card: &mut card::Card, alg: Algorithm, slot: u8, input: &[u8]) -> (Vec<u8>, StatusWord) {
    let (d, sw) = call(card, 0x87, alg.id(), slot, &piv::auth::sign_request(input));
    if sw != StatusWord::SUCCESS {
        return (d, sw);
    }
    (DynAuth::decode(&d).unwrap().response.unwrap().to_vec(), sw)
}

#[test]
fn ecdsa_signatures_verify_and_respect_pin_rules() {
    let mut card = blank();
    admin(&mut card);
    for (alg, verify_alg, hash) in [
        (
            Algorithm::EccP256,
            &signature::ECDSA_P256_SHA256_ASN1,
            &aws_lc_rs::digest::SHA256,
        ),
        (
            Algorithm::EccP384,
            &signature::ECDSA_P384_SHA384_ASN1,
            &aws_lc_rs::digest::SHA384,
        ),
    ] {
        let PublicKeyTemplate::Ec { point } = generate(&mut card, 0x9A, alg) else {
            panic!()
        };
        let msg = b"tap at door 3";
        let digest = aws_lc_rs::digest::digest(hash, msg);
        card.process(&[0, 0x20, 0xFF, 0x80]);
        assert_eq!(
            sign(&mut card, alg, 0x9A, digest.as_ref()).1,
            StatusWord::SECURITY_STATUS_NOT_SATISFIED
        );
        assert_eq!(verify(&mut card, "123456"), StatusWord::SUCCESS);
        let (sig, sw) = sign(&mut card, alg, 0x9A, digest.as_ref());
        assert_eq!(sw, StatusWord::SUCCESS);
        UnparsedPublicKey::new(verify_alg, &point)
            .verify(msg, &sig)
            .unwrap();
        // Wrong algorithm in P1.
        assert_eq!(
            sign(&mut card, Algorithm::Rsa2048, 0x9A, &[0; 256]).1,
            StatusWord::INCORRECT_P1P2
        );
    }
    // 9E needs no PIN; 9C needs it right before every use.
    generate(&mut card, 0x9E, Algorithm::EccP256);
    generate(&mut card, 0x9C, Algorithm::EccP256);
    card.process(&[0, 0x20, 0xFF, 0x80]);
    assert_eq!(
        sign(&mut card, Algorithm::EccP256, 0x9E, &[1; 32]).1,
        StatusWord::SUCCESS
    );
    assert_eq!(
        sign(&mut card, Algorithm::EccP256, 0x9C, &[1; 32]).1,
        StatusWord::SECURITY_STATUS_NOT_SATISFIED
    );
    assert_eq!(verify(&mut card, "123456"), StatusWord::SUCCESS);
    assert_eq!(
        sign(&mut card, Algorithm::EccP256, 0x9C, &[1; 32]).1,
        StatusWord::SUCCESS
    );
    assert_eq!(
        sign(&mut card, Algorithm::EccP256, 0x9C, &[1; 32]).1,
        StatusWord::SECURITY_STATUS_NOT_SATISFIED
    );
    // Missing key.
    assert_eq!(
        sign(&mut card, Algorithm::EccP256, 0x9D, &[1; 32]).1,
        StatusWord::REFERENCED_DATA_NOT_FOUND
    );
}

#[test]
fn raw_rsa_signature_through_chaining_verifies() {
    let mut card = blank();
    admin(&mut card);
    let PublicKeyTemplate::Rsa { modulus, exponent } =
        generate(&mut card, 0x9A, Algorithm::Rsa2048)
    else {
        panic!()
    };
    assert_eq!(verify(&mut card, "123456"), StatusWord::SUCCESS);
    let msg = b"badge 7";
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, msg);
    let prefix = hex::decode("3031300d060960864801650304020105000420").unwrap();
    let mut block = vec![0x00, 0x01];
    block.resize(256 - prefix.len() - 33, 0xFF);
    block.push(0);
    block.extend_from_slice(&prefix);
    block.extend_from_slice(digest.as_ref());
    // 256-byte block + template > 255: `call` chains it like OpenSC does.
    let (sig, sw) = sign(&mut card, Algorithm::Rsa2048, 0x9A, &block);
    assert_eq!(sw, StatusWord::SUCCESS);
    signature::RsaPublicKeyComponents {
        n: &modulus,
        e: &exponent,
    }
    .verify(&signature::RSA_PKCS1_2048_8192_SHA256, msg, &sig)
    .unwrap();
    // Blocks not below the modulus, or of the wrong length, are refused.
    assert_eq!(
        sign(&mut card, Algorithm::Rsa2048, 0x9A, &modulus).1,
        StatusWord::INCORRECT_DATA
    );
    assert_eq!(
        sign(&mut card, Algorithm::Rsa2048, 0x9A, &[1; 255]).1,
        StatusWord::INCORRECT_DATA
    );
    // Metadata reports the same public key.
    let (m, sw) = call(&mut card, 0xF7, 0, 0x9A, &[]);
    assert_eq!(sw, StatusWord::SUCCESS);
    let pk = iso7816::tlv::find(&m, 0x04).unwrap().unwrap();
    assert_eq!(
        PublicKeyTemplate::decode_inner(pk).unwrap(),
        PublicKeyTemplate::Rsa { modulus, exponent }
    );
}

#[test]
fn ecdh_agrees_with_the_host() {
    let mut card = blank();
    admin(&mut card);
    let PublicKeyTemplate::Ec { point } = generate(&mut card, 0x9D, Algorithm::EccP256) else {
        panic!()
    };
    assert_eq!(verify(&mut card, "123456"), StatusWord::SUCCESS);
    let host = aws_lc_rs::agreement::EphemeralPrivateKey::generate(
        &aws_lc_rs::agreement::ECDH_P256,
        &aws_lc_rs::rand::SystemRandom::new(),
    )
    .unwrap();
    let host_pub = host.compute_public_key().unwrap();
    let (d, sw) = call(
        &mut card,
        0x87,
        0x11,
        0x9D,
        &piv::auth::ecdh_request(host_pub.as_ref()),
    );
    assert_eq!(sw, StatusWord::SUCCESS);
    let card_secret = DynAuth::decode(&d).unwrap().response.unwrap().to_vec();
    let peer =
        aws_lc_rs::agreement::UnparsedPublicKey::new(&aws_lc_rs::agreement::ECDH_P256, point);
    let host_secret =
        aws_lc_rs::agreement::agree_ephemeral(host, peer, (), |s| Ok::<_, ()>(s.to_vec())).unwrap();
    assert_eq!(card_secret, host_secret);
    let mut bad = host_pub.as_ref().to_vec();
    bad[10] ^= 0xFF;
    assert_eq!(
        call(&mut card, 0x87, 0x11, 0x9D, &piv::auth::ecdh_request(&bad)).1,
        StatusWord::INCORRECT_DATA
    );
}

#[test]
fn import_key_and_vendor_commands() {
    let mut card = blank();
    select(&mut card);
    assert_eq!(
        call(&mut card, 0xFD, 0, 0, &[]),
        (vec![5, 7, 1], StatusWord::SUCCESS)
    );
    assert_eq!(
        call(&mut card, 0xF8, 0, 0, &[]),
        (4242u32.to_be_bytes().to_vec(), StatusWord::SUCCESS)
    );
    let (m, _) = call(&mut card, 0xF7, 0, 0x80, &[]);
    assert_eq!(m, vec![0x01, 1, 0xFF, 0x05, 1, 1, 0x06, 2, 3, 3]);
    assert_eq!(
        call(&mut card, 0xF7, 0, 0x9A, &[]).1,
        StatusWord::REFERENCED_DATA_NOT_FOUND
    );
    let import = [0x06, 32]
        .iter()
        .copied()
        .chain([0x22; 32])
        .collect::<Vec<u8>>();
    assert_eq!(
        call(&mut card, 0xFE, 0x11, 0x9A, &import).1,
        StatusWord::SECURITY_STATUS_NOT_SATISFIED
    );
    assert_eq!(
        mgmt_auth(&mut card, Algorithm::TripleDes, &DEFAULT_KEY),
        StatusWord::SUCCESS
    );
    assert_eq!(
        call(&mut card, 0xFE, 0x11, 0x9A, &import).1,
        StatusWord::SUCCESS
    );
    let (m, _) = call(&mut card, 0xF7, 0, 0x9A, &[]);
    assert_eq!(&m[..9], &[0x01, 1, 0x11, 0x02, 2, 0x02, 0x01, 0x03, 1]);
    assert_eq!(m[9], 0x02, "origin: imported");
    // Retries: need the PIN too; resets PIN and PUK to defaults.
    assert_eq!(
        call(&mut card, 0xFA, 5, 6, &[]).1,
        StatusWord::SECURITY_STATUS_NOT_SATISFIED
    );
    assert_eq!(verify(&mut card, "123456"), StatusWord::SUCCESS);
    assert_eq!(call(&mut card, 0xFA, 5, 6, &[]).1, StatusWord::SUCCESS);
    assert_eq!(
        (card.image().pin.retries_left, card.image().puk.retries_max),
        (5, 6)
    );
    // RESET only when PIN and PUK are blocked.
    assert_eq!(
        call(&mut card, 0xFB, 0, 0, &[]).1,
        StatusWord::CONDITIONS_NOT_SATISFIED
    );
    for _ in 0..5 {
        verify(&mut card, "000000");
    }
    let rrc = [pin_block("00000000"), pin_block("123456")].concat();
    for _ in 0..6 {
        call(&mut card, 0x2C, 0, 0x80, &rrc);
    }
    assert_eq!(call(&mut card, 0xFB, 0, 0, &[]).1, StatusWord::SUCCESS);
    assert!(card.image().keys.is_empty());
    assert_eq!(
        card.image().objects.len(),
        1,
        "only the discovery object is left"
    );
    assert_eq!(card.image().serial, 4242);
    assert_eq!(verify(&mut card, "123456"), StatusWord::SUCCESS);
}

#[test]
fn failed_persistence_rolls_back_but_keeps_counter_decrements() {
    let mut card = blank();
    admin(&mut card);
    let r = card.process_apdu(
        &Command::new(
            0,
            0xDB,
            0x3F,
            0xFF,
            &[0x5C, 3, 0x5F, 0xC1, 0x02, 0x53, 1, 1],
        )
        .to_bytes(),
    );
    assert!(r.persist);
    assert_eq!(card.rollback(), vec![0x65, 0x81]);
    assert!(card.image().object(piv::DataObject::Chuid).is_none());
    assert!(!card.volatile().mgmt_authenticated);
    let r = card.process_apdu(&Command::new(0, 0x20, 0, 0x80, &pin_block("000000")).to_bytes());
    assert!(r.persist);
    card.rollback();
    assert_eq!(card.image().pin.retries_left, 2);
    // Read-only commands never ask for persistence.
    assert!(!card.process_apdu(&[0, 0xFD, 0, 0]).persist);
    let _ = KeyRef::PivAuth;
}

#[test]
fn attest_vouches_for_generated_keys_only() {
    let mut img = card::CardImage::new_blank(Some(77));
    img.install_attestation(Algorithm::EccP256).unwrap();
    let mut card = card::Card::new(img);
    admin(&mut card);
    assert_eq!(
        call(&mut card, 0xF9, 0x9A, 0, &[]).1,
        StatusWord::REFERENCED_DATA_NOT_FOUND
    );
    let PublicKeyTemplate::Ec { point } = generate(&mut card, 0x9A, Algorithm::EccP256) else {
        panic!()
    };
    let (cert, sw) = call(&mut card, 0xF9, 0x9A, 0, &[]);
    assert_eq!(sw, StatusWord::SUCCESS);
    // Signed by the F9 key, and certifying the 9A key.
    let PublicKeyTemplate::Ec { point: ca_point } =
        card::crypto::PrivateKey::from_pkcs8(&card.image().keys[&KeyRef::Attestation].pkcs8)
            .unwrap()
            .public_key()
            .unwrap()
    else {
        panic!()
    };
    let (tbs, sig) = card::attest::split_certificate(&cert).unwrap();
    UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_ASN1, &ca_point)
        .verify(&tbs, &sig)
        .unwrap();
    assert!(tbs.windows(point.len()).any(|w| w == point.as_slice()));
    // Imported keys are not attested.
    let import: Vec<u8> = [0x06, 32].into_iter().chain([0x33; 32]).collect();
    assert_eq!(
        call(&mut card, 0xFE, 0x11, 0x9D, &import).1,
        StatusWord::SUCCESS
    );
    assert_eq!(
        call(&mut card, 0xF9, 0x9D, 0, &[]).1,
        StatusWord::INCORRECT_DATA
    );
    assert_eq!(
        call(&mut card, 0xF9, 0x9B, 0, &[]).1,
        StatusWord::INCORRECT_P1P2
    );
}

#[test]
fn rsa_3072_and_4096_sign_through_extended_apdus() {
    for (alg, size) in [(Algorithm::Rsa3072, 384), (Algorithm::Rsa4096, 512)] {
        let mut img = card::CardImage::new_blank(Some(1));
        let PublicKeyTemplate::Rsa { modulus, exponent } =
            img.generate_key(KeyRef::CardAuth, alg).unwrap()
        else {
            panic!()
        };
        assert_eq!(modulus.len(), size);
        let mut card = card::Card::new(img);
        select(&mut card);
        let msg = b"large keys";
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, msg);
        let prefix = hex::decode("3031300d060960864801650304020105000420").unwrap();
        let mut block = vec![0x00, 0x01];
        block.resize(size - prefix.len() - 33, 0xFF);
        block.push(0);
        block.extend_from_slice(&prefix);
        block.extend_from_slice(digest.as_ref());
        let apdu = Command::new(0, 0x87, alg.id(), 0x9E, &piv::auth::sign_request(&block))
            .with_le(65_536)
            .to_bytes();
        let (d, sw) = tx(&mut card, &apdu);
        assert_eq!(sw, StatusWord::SUCCESS, "{alg:?}");
        let sig = DynAuth::decode(&d).unwrap().response.unwrap().to_vec();
        signature::RsaPublicKeyComponents {
            n: &modulus,
            e: &exponent,
        }
        .verify(&signature::RSA_PKCS1_2048_8192_SHA256, msg, &sig)
        .unwrap();
    }
}

/// The CRT parameters of a PKCS#8 RSA key (p, q, dp, dq, qinv).
fn crt_parameters(pkcs8: &[u8]) -> Vec<Vec<u8>> {
    use iso7816::tlv::{parse_single, Reader};
    let info = parse_single(pkcs8, 0x30).unwrap();
    let mut r = Reader::new(info);
    r.expect(0x02).unwrap();
    r.expect(0x30).unwrap();
    let rsa = parse_single(r.expect(0x04).unwrap(), 0x30).unwrap();
    let ints: Vec<Vec<u8>> = Reader::new(rsa)
        .map(|t| t.unwrap().value.to_vec())
        .collect();
    ints[4..9].to_vec()
}

#[test]
fn import_rsa_key_from_crt_components() {
    let der = card::crypto::generate_pkcs8(Algorithm::Rsa2048).unwrap();
    let public = card::crypto::PrivateKey::from_pkcs8(&der)
        .unwrap()
        .public_key()
        .unwrap();
    let mut data = Vec::new();
    for (i, part) in crt_parameters(&der).iter().enumerate() {
        iso7816::tlv::push(&mut data, 0x01 + i as u32, part);
    }
    let mut card = blank();
    admin(&mut card);
    assert_eq!(
        call(&mut card, 0xFE, 0x07, 0x9E, &data).1,
        StatusWord::SUCCESS
    );
    let (m, _) = call(&mut card, 0xF7, 0, 0x9E, &[]);
    let pk = iso7816::tlv::find(&m, 0x04).unwrap().unwrap();
    assert_eq!(PublicKeyTemplate::decode_inner(pk).unwrap(), public);
    // Inconsistent components are refused and nothing is stored.
    let mut bad = data.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert_eq!(
        call(&mut card, 0xFE, 0x07, 0x9A, &bad).1,
        StatusWord::INCORRECT_DATA
    );
    assert!(!card.image().keys.contains_key(&KeyRef::PivAuth));
    // Wrong algorithm for the material.
    assert_eq!(
        call(&mut card, 0xFE, 0x11, 0x9A, &data).1,
        StatusWord::INCORRECT_DATA
    );
}
