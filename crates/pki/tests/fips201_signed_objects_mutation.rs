//! Robustness of Security Object and biometric verification: arbitrary
//! corruptions never panic, and whatever still verifies carries the
//! original signed content.

use piv::cbeff::{container_record, CbeffRecord};
use piv::DataObject;
use pki::fips201::{
    chuid_signer_certificates, verify_biometric, verify_security_object, DataGroupStatus,
};
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
    signer: Vec<Vec<u8>>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let pki = TestPki::generate(TestPkiOptions::default()).unwrap();
        let card = pki.issue_card(&CardOptions::default()).unwrap();
        let mut b = TrustStore::builder();
        b.add_anchor_der(pki.root_der().to_vec());
        b.add_intermediate_der(pki.intermediate_der().to_vec());
        let mut c = RevocationSet::builder();
        for crl in pki.crls() {
            c.add_der(crl).unwrap();
        }
        let signer = chuid_signer_certificates(&card.chuid);
        Fixture {
            store: b.build(),
            crls: c.build(),
            card,
            signer,
        }
    })
}

fn mutate(mut bytes: Vec<u8>, edits: &[(usize, u8)]) -> Vec<u8> {
    for (pos, val) in edits {
        let i = pos % bytes.len();
        bytes[i] = *val;
    }
    bytes
}

/// The data groups of the issued Security Object, from a clean verification.
fn original_groups() -> Vec<(u8, String)> {
    let f = fixture();
    let c = f.card.containers.as_ref().unwrap();
    let extra: Vec<&[u8]> = f.signer.iter().map(|v| v.as_slice()).collect();
    let v = verify_security_object(
        &f.store,
        &c.security_object,
        &given(f, &c.printed_info),
        &extra,
        &f.crls,
        &ValidationOptions::default(),
    )
    .unwrap();
    v.groups
        .iter()
        .map(|g| (g.number, g.container.clone()))
        .collect()
}

fn given<'a>(f: &'a Fixture, printed: &'a [u8]) -> [(DataObject, &'a [u8]); 4] {
    let c = f.card.containers.as_ref().unwrap();
    [
        (DataObject::Chuid, f.card.chuid.as_slice()),
        (DataObject::PrintedInfo, printed),
        (DataObject::Fingerprints, c.fingerprints.as_slice()),
        (DataObject::FacialImage, c.facial_image.as_slice()),
    ]
}

#[test]
fn the_original_groups_are_the_four_given_containers() {
    assert_eq!(
        original_groups(),
        [
            (1, "CHUID".to_string()),
            (2, "Cardholder Fingerprints".to_string()),
            (3, "Printed Information".to_string()),
            (4, "Cardholder Facial Image".to_string()),
        ]
    );
}

#[test]
fn a_remapped_data_group_fails_the_mutation_check() {
    // The remapping of data group 3 to the (unread) Iris container, with
    // the Printed Information edited, is refused.
    let f = fixture();
    let c = f.card.containers.as_ref().unwrap();
    let extra: Vec<&[u8]> = f.signer.iter().map(|v| v.as_slice()).collect();
    let mut so = piv::security_object::SecurityObjectContainer::decode(&c.security_object).unwrap();
    so.mapping[2].object = DataObject::Iris;
    let mut printed = c.printed_info.clone();
    printed[5] ^= 1;
    let r = verify_security_object(
        &f.store,
        &so.encode(),
        &given(f, &printed),
        &extra,
        &f.crls,
        &ValidationOptions::default(),
    );
    assert!(r.is_err(), "{:?}", r.map(|v| v.groups));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn corrupted_security_objects_fail_cleanly(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        target in 0usize..2,
    ) {
        let f = fixture();
        let c = f.card.containers.as_ref().unwrap();
        let extra: Vec<&[u8]> = f.signer.iter().map(|v| v.as_slice()).collect();
        let (so, printed) = if target == 0 {
            (mutate(c.security_object.clone(), &edits), c.printed_info.clone())
        } else {
            (c.security_object.clone(), mutate(c.printed_info.clone(), &edits))
        };
        let given = given(f, &printed);
        let r = verify_security_object(&f.store, &so, &given, &extra, &f.crls, &ValidationOptions::default());
        if let Ok(v) = r {
            // Only a change the hashes cannot see may pass: none to the
            // Printed Information, and none to the mapping that would leave
            // a given container unchecked or name it under another group.
            prop_assert_eq!(printed, c.printed_info.clone());
            prop_assert!(
                v.groups.iter().all(|g| g.status == DataGroupStatus::Matches),
                "{:?}",
                v.groups
            );
            let groups: Vec<(u8, String)> =
                v.groups.iter().map(|g| (g.number, g.container.clone())).collect();
            prop_assert_eq!(groups, original_groups());
        }
    }

    #[test]
    fn corrupted_biometrics_fail_cleanly(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        face in any::<bool>(),
    ) {
        let f = fixture();
        let c = f.card.containers.as_ref().unwrap();
        let extra: Vec<&[u8]> = f.signer.iter().map(|v| v.as_slice()).collect();
        let original = if face { &c.facial_image } else { &c.fingerprints };
        let bytes = mutate(original.clone(), &edits);
        let chuid = piv::chuid::Chuid::decode(&f.card.chuid).unwrap();
        let r = verify_biometric(
            &f.store,
            &bytes,
            Some((&chuid.fascn, &chuid.guid)),
            &extra,
            &f.crls,
            &ValidationOptions::default(),
        );
        if r.is_ok() {
            let a = CbeffRecord::parse(container_record(&bytes).unwrap()).unwrap();
            let b = CbeffRecord::parse(container_record(original).unwrap()).unwrap();
            prop_assert_eq!(a.signed_bytes, b.signed_bytes);
        }
    }
}
