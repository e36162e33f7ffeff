//! How long a validation result holds (`ValidatedPath::valid_until`): the trust anchor's
//! notAfter bounds it only when the anchor's validity is checked (constrained mode, expired
//! anchors not allowed), so results of bare-anchor validations and of validations that allow
//! expired anchors can be cached past the anchor's dates.

use pki::options::AnchorConstraints;
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{validate, RevocationMode, ValidationOptions};
use pki_issue::{now, CertificateBuilder, KeyAlgorithm, KeyPair};

const DAY: i64 = 86_400;

#[test]
fn the_anchor_bounds_the_result_only_when_its_validity_is_checked() {
    let t = now();
    let root_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let ca_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let leaf_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let root = CertificateBuilder::new("CN=Until Root,O=pivgate,C=US", root_key.spki_der())
        .unwrap()
        .ca(None)
        .validity(t - DAY, t + 10 * DAY)
        .self_signed(&root_key)
        .unwrap();
    let ca = CertificateBuilder::new("CN=Until CA,O=pivgate,C=US", ca_key.spki_der())
        .unwrap()
        .ca(None)
        .validity(t - DAY, t + 300 * DAY)
        .sign(&root, &root_key)
        .unwrap();
    let leaf = CertificateBuilder::new("CN=Until Leaf,O=pivgate,C=US", leaf_key.spki_der())
        .unwrap()
        .end_entity()
        .validity(t - DAY, t + 200 * DAY)
        .sign(&ca, &ca_key)
        .unwrap();
    let mut b = TrustStore::builder();
    b.add_anchor_der(root);
    let store = b.build();
    let run = |anchors: AnchorConstraints, allow_expired: bool| {
        let mut o = ValidationOptions {
            time: Time(t),
            anchor_constraints: anchors,
            allow_expired_anchors: allow_expired,
            ..ValidationOptions::default()
        };
        o.revocation.mode = RevocationMode::Off;
        validate(&store, &leaf, &[&ca], &RevocationSet::empty(), &o)
            .unwrap()
            .valid_until()
    };
    assert_eq!(run(AnchorConstraints::Enforce, false), Time(t + 10 * DAY));
    assert_eq!(run(AnchorConstraints::Ignore, false), Time(t + 200 * DAY));
    assert_eq!(run(AnchorConstraints::Enforce, true), Time(t + 200 * DAY));
}
