//! Card issuance: the slot certificates carry the profile FIPS 201 expects,
//! their keys match, and the CHUID binds the same card.

use der::{Decode, Encode};
use piv::chuid::{Chuid, ChuidDate};
use piv::fascn::Fascn;
use pki_issue::{CardOptions, KeyAlgorithm, KeyPair, TestPki, TestPkiOptions, PIV_SLOTS};
use x509_cert::ext::pkix::{ExtendedKeyUsage, KeyUsage, KeyUsages};
use x509_cert::Certificate;

fn ext<'a>(c: &'a Certificate, oid: &str) -> Option<&'a [u8]> {
    c.tbs_certificate
        .extensions
        .iter()
        .flatten()
        .find(|e| e.extn_id.to_string() == oid)
        .map(|e| e.extn_value.as_bytes())
}

#[test]
fn slot_certificates_follow_the_piv_profiles() {
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let fascn = Fascn::from_digits("70991234000001010000000001210001").unwrap();
    let uuid = [0x42u8; 16];
    let expires = ChuidDate::parse("2030-01-31").unwrap();
    let card = pki
        .issue_card(&CardOptions {
            algorithm: KeyAlgorithm::P256,
            fascn: Some(fascn.clone()),
            uuid: Some(uuid),
            expires: Some(expires),
            cardholder: "Jane Q. Public".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(card.fascn, fascn);
    assert_eq!(card.uuid, uuid);
    assert_eq!(card.expires, expires);
    assert_eq!(
        card.slots.iter().map(|s| s.slot).collect::<Vec<_>>(),
        PIV_SLOTS.to_vec()
    );
    for s in &card.slots {
        let c = Certificate::from_der(&s.certificate).unwrap();
        // The private key belongs to the certificate.
        let key = KeyPair::from_pkcs8(&s.private_key_pkcs8).unwrap();
        assert_eq!(
            key.spki_der(),
            c.tbs_certificate
                .subject_public_key_info
                .to_der()
                .unwrap()
                .as_slice()
        );
        // No certificate outlives the card.
        let not_after = c
            .tbs_certificate
            .validity
            .not_after
            .to_unix_duration()
            .as_secs() as i64;
        assert!(
            not_after <= expires.end_of_day_unix(),
            "slot {:02X}",
            s.slot
        );
        let ku = KeyUsage::from_der(ext(&c, "2.5.29.15").unwrap()).unwrap();
        let eku = ext(&c, "2.5.29.37").map(|e| ExtendedKeyUsage::from_der(e).unwrap());
        let has_san = ext(&c, "2.5.29.17").is_some();
        let subject = c.tbs_certificate.subject.to_string();
        match s.slot {
            0x9A => {
                assert!(ku.0.contains(KeyUsages::DigitalSignature));
                assert!(has_san);
                assert!(subject.contains("Jane Q. Public"));
            }
            0x9C => assert!(ku.0.contains(KeyUsages::NonRepudiation)),
            0x9D => assert!(ku.0.contains(KeyUsages::KeyAgreement)),
            0x9E => {
                assert!(has_san);
                assert_eq!(
                    eku.unwrap().0[0].to_string(),
                    "2.16.840.1.101.3.6.8",
                    "card authentication EKU"
                );
                // FIPS 201: no cardholder name in the card-auth certificate.
                assert!(!subject.contains("Jane"));
            }
            _ => unreachable!(),
        }
    }
    let chuid = Chuid::decode(&card.chuid).unwrap();
    assert_eq!(chuid.fascn, fascn.encode().unwrap());
    assert_eq!(chuid.guid, uuid);
    assert_eq!(chuid.expiration, expires);
    assert!(chuid.signature.is_some());
}

#[test]
fn rsa_key_management_uses_key_encipherment() {
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let card = pki
        .issue_card(&CardOptions {
            algorithm: KeyAlgorithm::Rsa2048,
            ..Default::default()
        })
        .unwrap();
    let c = Certificate::from_der(&card.slot(0x9D).unwrap().certificate).unwrap();
    let ku = KeyUsage::from_der(ext(&c, "2.5.29.15").unwrap()).unwrap();
    assert!(ku.0.contains(KeyUsages::KeyEncipherment));
    assert_eq!(card.slot(0x9A).unwrap().algorithm, KeyAlgorithm::Rsa2048);
}

#[test]
fn refuses_an_expired_card_and_bad_input() {
    let mut pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let r = pki.issue_card(&CardOptions {
        expires: Some(ChuidDate::parse("2001-01-01").unwrap()),
        ..Default::default()
    });
    assert!(r.unwrap_err().to_string().contains("in the past"));
    assert!(pki.revoke(b"not a certificate", None).is_err());
    // A certificate from another PKI cannot be revoked here.
    let other = TestPki::generate(TestPkiOptions::default()).unwrap();
    let foreign = other.issue_card(&CardOptions::default()).unwrap();
    let e = pki
        .revoke(&foreign.slot(0x9A).unwrap().certificate, None)
        .unwrap_err();
    assert!(e.to_string().contains("not issued by this test PKI"), "{e}");
}
