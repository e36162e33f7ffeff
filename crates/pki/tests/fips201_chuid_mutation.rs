//! Robustness of CHUID verification: arbitrary corruptions of a signed CHUID
//! never panic, and whatever still verifies carries the original card data.

use piv::chuid::Chuid;
use pki::fips201::{verify_chuid, ChuidDigestForm, ChuidVerifyError, SignerDnCheck};
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::validate::ValidationOptions;
use pki_issue::{CardCredentials, CardOptions, TestPki, TestPkiOptions};
use proptest::prelude::*;
use std::sync::OnceLock;

struct Fixture {
    store: TrustStore,
    crls: RevocationSet,
    card: CardCredentials,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
        let card = pki.issue_card(&CardOptions::default()).unwrap();
        let mut b = TrustStore::builder();
        b.add_anchor_der(pki.root_der().to_vec());
        b.add_intermediate_der(pki.intermediate_der().to_vec());
        let store = b.build();
        let mut c = RevocationSet::builder();
        for crl in pki.crls() {
            c.add_der(crl).unwrap();
        }
        let f = Fixture {
            store,
            crls: c.build(),
            card,
        };
        verify_chuid(
            &f.store,
            &f.card.chuid,
            &[],
            &f.crls,
            &ValidationOptions::default(),
        )
        .expect("the unmodified CHUID verifies");
        f
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn corrupted_chuids_fail_cleanly(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
        let f = fixture();
        let mut bytes = f.card.chuid.clone();
        for (pos, val) in &edits {
            let i = pos % bytes.len();
            bytes[i] = *val;
        }
        let opts = ValidationOptions::default();
        if let Ok(v) = verify_chuid(&f.store, &bytes, &[], &f.crls, &opts) {
            let original = Chuid::decode(&f.card.chuid).unwrap();
            prop_assert_eq!(v.chuid.fascn, original.fascn);
            prop_assert_eq!(v.chuid.guid, original.guid);
            prop_assert_eq!(v.chuid.expiration, original.expiration);
            prop_assert_eq!(v.chuid.signed_content(), original.signed_content());
        }
    }

    #[test]
    fn truncated_chuids_fail_cleanly(len in 0usize..2000) {
        let f = fixture();
        let full = f.card.chuid.len();
        let n = len % full;
        let r = verify_chuid(&f.store, &f.card.chuid[..n], &[], &f.crls, &ValidationOptions::default());
        // Only dropping the trailing error detection code (FE 00) leaves a
        // CHUID whose signed content is intact.
        prop_assert_eq!(r.is_ok(), n == full - 2);
    }
}

#[test]
fn dropping_only_the_error_detection_code_keeps_the_signature_valid() {
    let f = fixture();
    let n = f.card.chuid.len();
    assert_eq!(&f.card.chuid[n - 2..], &[0xFE, 0x00]);
    verify_chuid(
        &f.store,
        &f.card.chuid[..n - 2],
        &[],
        &f.crls,
        &ValidationOptions::default(),
    )
    .unwrap();
    assert!(verify_chuid(
        &f.store,
        &f.card.chuid[..n - 3],
        &[],
        &f.crls,
        &ValidationOptions::default()
    )
    .is_err());
}

/// Re-signs the fixture's CHUID with the test PKI's content signer the way
/// another issuer would.
fn resigned(
    with_edc: bool,
    signer_dn: pki_issue::SignerDn,
) -> (Vec<u8>, TrustStore, RevocationSet) {
    let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
    let card = pki.issue_card(&CardOptions::default()).unwrap();
    let mut c = Chuid::decode(&card.chuid).unwrap();
    pki_issue::sign_chuid_as(
        &mut c,
        pki.content_signer_der(),
        pki.content_signer_key(),
        with_edc,
        signer_dn,
    )
    .unwrap();
    let mut b = TrustStore::builder();
    b.add_anchor_der(pki.root_der().to_vec());
    b.add_intermediate_der(pki.intermediate_der().to_vec());
    let mut crls = RevocationSet::builder();
    for crl in pki.crls() {
        crls.add_der(crl).unwrap();
    }
    (c.encode(), b.build(), crls.build())
}

#[test]
fn issued_chuids_use_the_standard_digest_form_and_name_their_signer() {
    let f = fixture();
    let v = verify_chuid(
        &f.store,
        &f.card.chuid,
        &[],
        &f.crls,
        &ValidationOptions::default(),
    )
    .unwrap();
    assert_eq!(v.digest_form, ChuidDigestForm::WithEdc);
    assert_eq!(v.signer_dn, SignerDnCheck::Matches);
}

#[test]
fn both_digest_forms_verify_and_are_reported() {
    use pki_issue::SignerDn;
    for (with_edc, form) in [
        (true, ChuidDigestForm::WithEdc),
        (false, ChuidDigestForm::WithoutEdc),
    ] {
        let (chuid, store, crls) = resigned(with_edc, SignerDn::Subject);
        let v = verify_chuid(&store, &chuid, &[], &crls, &ValidationOptions::default()).unwrap();
        assert_eq!(v.digest_form, form);
        // Also without the EDC element on the card.
        let n = chuid.len();
        let v = verify_chuid(
            &store,
            &chuid[..n - 2],
            &[],
            &crls,
            &ValidationOptions::default(),
        )
        .unwrap();
        assert_eq!(v.digest_form, form);
    }
}

#[test]
fn a_pivsigner_dn_naming_someone_else_is_refused() {
    use pki_issue::SignerDn;
    let (chuid, store, crls) = resigned(
        true,
        SignerDn::Other("CN=Someone Else,O=Elsewhere,C=US".into()),
    );
    let e = verify_chuid(&store, &chuid, &[], &crls, &ValidationOptions::default()).unwrap_err();
    assert_eq!(e.code(), "chuid-signer-dn-mismatch");
    assert!(
        matches!(&e, ChuidVerifyError::SignerDnMismatch { named, .. } if named.contains("Someone Else")),
        "{e}"
    );
}

#[test]
fn a_chuid_without_pivsigner_dn_is_accepted_and_reported() {
    use pki_issue::SignerDn;
    let (chuid, store, crls) = resigned(true, SignerDn::Absent);
    let v = verify_chuid(&store, &chuid, &[], &crls, &ValidationOptions::default()).unwrap();
    assert_eq!(v.signer_dn, SignerDnCheck::Absent);
}

#[test]
fn the_digest_form_is_readable_without_verifying() {
    use pki::fips201::chuid_digest_form;
    use pki_issue::SignerDn;
    assert_eq!(
        chuid_digest_form(&fixture().card.chuid),
        Some(ChuidDigestForm::WithEdc)
    );
    let (chuid, _, _) = resigned(false, SignerDn::Subject);
    assert_eq!(chuid_digest_form(&chuid), Some(ChuidDigestForm::WithoutEdc));
    let mut c = Chuid::decode(&chuid).unwrap();
    c.guid[0] ^= 1;
    assert_eq!(chuid_digest_form(&c.encode()), None);
    c.signature = None;
    assert_eq!(chuid_digest_form(&c.encode()), None);
}
