//! CHUIDs that carry the deprecated buffer length element (`EE`) are signed by issued cards
//! both over it and without it: both verify, and the result says which form the card used.
//! Any other change of the content is still refused.

use piv::chuid::Chuid;
use pki::fips201::{verify_chuid, ChuidDigestForm};
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::validate::ValidationOptions;
use pki_issue::{CardOptions, SignerDn, TestPki, TestPkiOptions};

#[test]
fn a_chuid_signed_with_or_without_its_buffer_length_verifies_and_says_which() {
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let card = pki.issue_card(&CardOptions::default()).unwrap();
    let mut b = TrustStore::builder();
    b.add_anchor_der(pki.root_der().to_vec());
    b.add_intermediate_der(pki.intermediate_der().to_vec());
    let store = b.build();
    let mut crls = RevocationSet::builder();
    for crl in pki.crls() {
        crls.add_der(crl).unwrap();
    }
    let crls = crls.build();
    let opts = ValidationOptions::default();
    let (signer, key) = (pki.content_signer_der(), pki.content_signer_key());

    // Without EE on the card, nothing is said about it.
    let v = verify_chuid(&store, &card.chuid, &[], &crls, &opts).unwrap();
    assert_eq!(v.buffer_length_in_digest, None);

    let mut with_ee = Chuid::decode(&card.chuid).unwrap();
    with_ee.buffer_length = Some(vec![0x00, 0x60]);
    for with_edc in [true, false] {
        let form = if with_edc {
            ChuidDigestForm::WithEdc
        } else {
            ChuidDigestForm::WithoutEdc
        };
        let mut c = with_ee.clone();
        pki_issue::sign_chuid_as(&mut c, signer, key, with_edc, SignerDn::Subject).unwrap();
        let v = verify_chuid(&store, &c.encode(), &[], &crls, &opts).unwrap();
        assert_eq!(
            (v.digest_form, v.buffer_length_in_digest),
            (form, Some(true))
        );

        let mut c = with_ee.clone();
        pki_issue::sign_chuid_without_buffer_length(&mut c, signer, key, with_edc).unwrap();
        let bytes = c.encode();
        let v = verify_chuid(&store, &bytes, &[], &crls, &opts).unwrap();
        assert_eq!(
            (v.digest_form, v.buffer_length_in_digest),
            (form, Some(false))
        );
        assert_eq!(
            pki::fips201::chuid_digest_form(&bytes),
            Some(form),
            "the quick report agrees"
        );

        // Another buffer length is still covered by nothing but its own form: a change of
        // any other element is refused.
        let mut tampered = c.clone();
        tampered.guid[0] ^= 1;
        assert!(verify_chuid(&store, &tampered.encode(), &[], &crls, &opts).is_err());
    }
}
