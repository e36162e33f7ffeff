//! Shapes the Federal PKI issues, checked under the strict profile: a bridge
//! cross-certificate that maps the bridge's policy to the agency's and carries
//! inhibitPolicyMapping with skipCerts 0, as the Federal Bridge's do. Its own mapping
//! applies; a mapping further down the agency's path does not (RFC 5280 §6.1.4 (b)(2), (i)),
//! so a card whose policy is reached only through that second mapping has no acceptable
//! policy, while the same agency path under a cross-certificate without the inhibit is valid.

use const_oid::ObjectIdentifier;
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{RevocationMode, ValidationOptions};
use pki_issue::{now, CertificateBuilder, KeyAlgorithm, KeyPair};

fn key() -> KeyPair {
    KeyPair::generate(KeyAlgorithm::P256).unwrap()
}

#[test]
fn a_mapping_cross_certificate_with_inhibit_policy_mapping_allows_its_own_mapping_only() {
    let bridge_policy = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.3.12");
    let agency_policy = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.99999.1.1.1");
    let sub_policy = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.99999.1.1.2");
    let (bk, rk, c1k, c2k) = (key(), key(), key(), key());
    let bridge = CertificateBuilder::new("CN=Test Bridge,O=pivgate,C=US", bk.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&bk)
        .unwrap();
    let cross = |inhibit: Option<u32>| {
        let b = CertificateBuilder::new("CN=Agency Root,O=pivgate,C=US", rk.spki_der())
            .unwrap()
            .ca(None)
            .policies(&[bridge_policy])
            .policy_mappings(&[(bridge_policy, agency_policy)]);
        let b = match inhibit {
            Some(skip) => b.policy_constraints(None, Some(skip)),
            None => b,
        };
        b.sign(&bridge, &bk).unwrap()
    };
    let inhibiting = cross(Some(0));
    let mapping_only = cross(None);
    // The agency root's own self-signed certificate, the issuer the CAs below name.
    let agency_root = CertificateBuilder::new("CN=Agency Root,O=pivgate,C=US", rk.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&rk)
        .unwrap();
    // An issuing CA asserting the agency's policy, and one that maps it once more.
    let ca1 = CertificateBuilder::new("CN=Agency CA 1,O=pivgate,C=US", c1k.spki_der())
        .unwrap()
        .ca(None)
        .policies(&[agency_policy])
        .sign(&agency_root, &rk)
        .unwrap();
    let ca2 = CertificateBuilder::new("CN=Agency CA 2,O=pivgate,C=US", c2k.spki_der())
        .unwrap()
        .ca(None)
        .policies(&[agency_policy])
        .policy_mappings(&[(agency_policy, sub_policy)])
        .sign(&agency_root, &rk)
        .unwrap();
    let leaf = |ca: &[u8], ca_key: &KeyPair, policy| {
        let lk = key();
        CertificateBuilder::new("CN=Agency Employee,O=pivgate,C=US", lk.spki_der())
            .unwrap()
            .end_entity()
            .policies(&[policy])
            .sign(ca, ca_key)
            .unwrap()
    };
    let leaf1 = leaf(&ca1, &c1k, agency_policy);
    let leaf2 = leaf(&ca2, &c2k, sub_policy);

    let mut o = ValidationOptions {
        time: Time(now()),
        initial_policy_set: vec![bridge_policy],
        initial_explicit_policy: true,
        ..ValidationOptions::default()
    };
    o.revocation.mode = RevocationMode::Off;
    assert_eq!(o.profile, pki::options::Profile::Strict);
    let mut b = TrustStore::builder();
    b.add_anchor_der(bridge.clone());
    let store = b.build();
    let validate = |leaf: &[u8], cross: &[u8], ca: &[u8]| {
        pki::validate::validate(&store, leaf, &[cross, ca], &RevocationSet::empty(), &o)
    };

    // The cross-certificate's own mapping applies, inhibit or not.
    let path = validate(&leaf1, &inhibiting, &ca1).unwrap();
    assert_eq!(path.chain().len(), 4);
    validate(&leaf1, &mapping_only, &ca1).unwrap();
    // The second mapping is honoured without the inhibit, and not with it.
    validate(&leaf2, &mapping_only, &ca2).unwrap();
    let e = validate(&leaf2, &inhibiting, &ca2).unwrap_err();
    assert_eq!(e.code(), "no-acceptable-policy", "{e}");
}
