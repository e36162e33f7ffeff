//! Fuzzes everything that reads untrusted certificate bytes: the trust-store
//! readers (DER, PEM, PKCS#7), the lazy full parse of stored entries, and
//! path validation with the input as the leaf and as an offered
//! intermediate, against a fixed test PKI (root, intermediate, CRLs, a PIV
//! authentication leaf) built once.
//!
//! Nothing may panic or hang, and the input may only validate if it is the
//! genuine certificate: any other bytes are malformed or carry a signature
//! that does not verify.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pki::revocation_set::RevocationSet;
use pki_issue::{CardOptions, TestPki, TestPkiOptions};
use pki::store::TrustStore;
use pki::validate::{validate, ValidationOptions};
use std::sync::OnceLock;

struct Fixture {
    store: TrustStore,
    crls: RevocationSet,
    intermediate: Vec<u8>,
    leaf: Vec<u8>,
    opts: ValidationOptions,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let pki = TestPki::generate(TestPkiOptions::default()).expect("test PKI");
        let card = pki.issue_card(&CardOptions::default()).expect("test card");
        let leaf = card.slot(0x9A).expect("PIV authentication slot").certificate.clone();
        let mut store = TrustStore::builder();
        store.add_anchor_der(pki.root_der().to_vec());
        let mut crls = RevocationSet::builder();
        for crl in pki.crls() {
            crls.add_der(crl).expect("test CRL loads");
        }
        let f = Fixture {
            store: store.build(),
            crls: crls.build(),
            intermediate: pki.intermediate_der().to_vec(),
            leaf,
            opts: ValidationOptions::default(),
        };
        validate(&f.store, &f.leaf, &[&f.intermediate], &f.crls, &f.opts)
            .expect("the fixture chain validates");
        f
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();

    // Trust-store loading: as one DER certificate and as PEM / PKCS#7 text.
    let mut builder = TrustStore::builder();
    builder.add_anchor_der(data.to_vec());
    let _ = builder.add_intermediates_pem(data);
    let store = builder.build();
    for entry in store.entries() {
        let _ = entry.cert();
    }

    // As the leaf.
    let as_leaf = validate(&f.store, data, &[&f.intermediate], &f.crls, &f.opts);
    assert!(
        as_leaf.is_err() || data == f.leaf.as_slice(),
        "bytes other than the genuine leaf validated"
    );

    // As the only offered intermediate (the store holds just the root).
    let as_intermediate = validate(&f.store, &f.leaf, &[data], &f.crls, &f.opts);
    assert!(
        as_intermediate.is_err() || data == f.intermediate.as_slice(),
        "bytes other than the genuine intermediate completed the path"
    );
});
