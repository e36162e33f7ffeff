//! Fuzzes CRL parsing and CRL use: the input is loaded into a CRL set (DER)
//! as the intermediate CA's CRL next to the genuine root CRL, and a PIV
//! authentication leaf of a fixed test PKI is validated with fail-closed
//! revocation checking.
//!
//! Nothing may panic or hang, and only the genuine intermediate CRL may let
//! the leaf validate: any other bytes are malformed, unsigned by the
//! intermediate, or not about this leaf's issuer, so revocation data is
//! missing and the validation must fail closed.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pki::revocation_set::RevocationSet;
use pki_issue::{CardOptions, TestPki, TestPkiOptions};
use pki::store::TrustStore;
use pki::validate::{validate, ValidationOptions};
use std::sync::OnceLock;

struct Fixture {
    store: TrustStore,
    root_crl: Vec<u8>,
    intermediate_crl: Vec<u8>,
    intermediate: Vec<u8>,
    leaf: Vec<u8>,
    opts: ValidationOptions,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let pki = TestPki::generate(TestPkiOptions::default()).expect("test PKI");
        let card = pki.issue_card(&CardOptions::default()).expect("test card");
        let mut store = TrustStore::builder();
        store.add_anchor_der(pki.root_der().to_vec());
        Fixture {
            store: store.build(),
            root_crl: pki.root_crl_der().to_vec(),
            intermediate_crl: pki.intermediate_crl_der().to_vec(),
            intermediate: pki.intermediate_der().to_vec(),
            leaf: card.slot(0x9A).expect("PIV authentication slot").certificate.clone(),
            opts: ValidationOptions::default(),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let mut builder = RevocationSet::builder();
    builder
        .add_der(f.root_crl.clone())
        .expect("the genuine root CRL loads");
    let _ = builder.add_der(data.to_vec());
    let crls = builder.build();
    for crl in crls.crls() {
        let _ = (crl.len(), crl.is_delta(), crl.issuer_display());
    }
    let result = validate(&f.store, &f.leaf, &[&f.intermediate], &crls, &f.opts);
    assert!(
        result.is_err() || data == f.intermediate_crl.as_slice(),
        "revocation data other than the genuine intermediate CRL was accepted"
    );
});
