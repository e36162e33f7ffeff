//! RFC 5280 §6.3.3 (f): the certificate that signed a CRL must have a path to the trust
//! anchor of the path the CRL serves. When the signer's issuer is cross-certified under two
//! trust anchors, its path to the required one counts, whichever is met first.

use pki::path::validate_counting;
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{validate, RevocationMode, ValidationError, ValidationOptions};
use pki_issue::{now, CertificateBuilder, CrlBuilder, CrlReason, KeyAlgorithm, KeyPair};

const DAY: i64 = 86_400;

fn key() -> KeyPair {
    KeyPair::generate(KeyAlgorithm::P256).unwrap()
}

fn ca(subject: &str, key: &KeyPair) -> CertificateBuilder {
    CertificateBuilder::new(subject, key.spki_der())
        .unwrap()
        .ca(None)
}

#[test]
fn a_crl_signer_reaching_two_anchors_is_checked_against_the_path_anchor() {
    let t = now();
    let (k1, k2) = (key(), key());
    let t1 = ca("CN=Root One,O=Example,C=US", &k1)
        .self_signed(&k1)
        .unwrap();
    let t2 = ca("CN=Root Two,O=Example,C=US", &k2)
        .self_signed(&k2)
        .unwrap();
    // X is certified by both roots; the certificate under the other root is the newer, so
    // it is tried first.
    let kx = key();
    let x_by_t1 = ca("CN=X,O=Example,C=US", &kx)
        .validity(t - 10 * DAY, t + 365 * DAY)
        .sign(&t1, &k1)
        .unwrap();
    let x_by_t2 = ca("CN=X,O=Example,C=US", &kx)
        .validity(t - DAY, t + 365 * DAY)
        .sign(&t2, &k2)
        .unwrap();
    // The issuing CA signs certificates with one key and CRLs with another, certified by X.
    let (ki, ks) = (key(), key());
    let issuer = ca("CN=Issuing CA,O=Example,C=US", &ki)
        .sign(&t1, &k1)
        .unwrap();
    let crl_signer = ca("CN=Issuing CA,O=Example,C=US", &ks)
        .sign(&x_by_t1, &kx)
        .unwrap();
    let leaf = CertificateBuilder::new("CN=Leaf,O=Example,C=US", key().spki_der())
        .unwrap()
        .serial(0x4242)
        .end_entity()
        .sign(&issuer, &ki)
        .unwrap();
    let crl = CrlBuilder::new()
        .revoke(&[0x42, 0x42], t - 60, Some(CrlReason::KeyCompromise))
        .sign(&crl_signer, &ks)
        .unwrap();

    let mut b = TrustStore::builder();
    b.add_anchor_der(t1.clone());
    b.add_anchor_der(t2.clone());
    for c in [&issuer, &crl_signer, &x_by_t2, &x_by_t1] {
        b.add_intermediate_der(c.to_vec());
    }
    let store = b.build();
    let mut crls = RevocationSet::builder();
    crls.add_der(crl).unwrap();
    let crls = crls.build();
    let mut opts = ValidationOptions {
        time: Time(t),
        ..ValidationOptions::default()
    };
    // Only what the CRL says matters here: the path's other certificates have no CRLs.
    opts.revocation.mode = RevocationMode::BestEffort;
    let r = validate(&store, &leaf, &[], &crls, &opts);
    assert!(
        matches!(r, Err(ValidationError::Revoked { .. })),
        "{:?}",
        r.map(|_| ())
    );
    // The map the CRL signer's search draws counts in the validation's work.
    let (_, with_signer) = validate_counting(&store, &leaf, &[], &crls, &opts);
    opts.revocation.mode = RevocationMode::Off;
    let (_, alone) = validate_counting(&store, &leaf, &[], &crls, &opts);
    assert!(
        with_signer.edges_mapped > alone.edges_mapped,
        "{with_signer:?} {alone:?}"
    );
}
