//! The certificate builder's optional extensions (name constraints, policy
//! mappings and constraints, path length, unknown critical extensions) are
//! encoded so that the validator enforces them.

use const_oid::ObjectIdentifier;
use pki::crl::CrlSet;
use pki::issue::{CertificateBuilder, KeyAlgorithm, KeyPair, KeyUsages};
use pki::store::TrustStore;
use pki::validate::{validate, RevocationMode, ValidationError, ValidationOptions};

const P1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.99999.1");
const P2: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.99999.2");

struct Ca {
    cert: Vec<u8>,
    key: KeyPair,
}

fn key() -> KeyPair {
    KeyPair::generate(KeyAlgorithm::P256).unwrap()
}

fn root() -> Ca {
    let key = key();
    let cert = CertificateBuilder::new("CN=Root,O=Test,C=US", key.spki_der())
        .unwrap()
        .ca(None)
        .self_signed(&key)
        .unwrap();
    Ca { cert, key }
}

fn sub_ca(
    parent: &Ca,
    subject: &str,
    f: impl FnOnce(CertificateBuilder) -> CertificateBuilder,
) -> Ca {
    let key = key();
    let b = CertificateBuilder::new(subject, key.spki_der())
        .unwrap()
        .ca(None);
    let cert = f(b).sign(&parent.cert, &parent.key).unwrap();
    Ca { cert, key }
}

fn leaf(
    parent: &Ca,
    subject: &str,
    f: impl FnOnce(CertificateBuilder) -> CertificateBuilder,
) -> Vec<u8> {
    let key = key();
    let b = CertificateBuilder::new(subject, key.spki_der())
        .unwrap()
        .key_usage(KeyUsages::DigitalSignature);
    f(b).sign(&parent.cert, &parent.key).unwrap()
}

fn check(
    root: &Ca,
    chain: &[&[u8]],
    leaf: &[u8],
    opts: ValidationOptions,
) -> Result<(), ValidationError> {
    let mut b = TrustStore::builder();
    b.add_anchor_der(root.cert.clone());
    let store = b.build();
    let opts = ValidationOptions {
        revocation: pki::validate::RevocationPolicy {
            mode: RevocationMode::Off,
            ..Default::default()
        },
        ..opts
    };
    validate(&store, leaf, chain, &CrlSet::empty(), &opts).map(|_| ())
}

#[test]
fn name_constraints_are_enforced() {
    let r = root();
    let ca = sub_ca(&r, "CN=Constrained CA,O=Allowed,C=US", |b| {
        b.name_constraints(
            &["O=Allowed,C=US", "dns:allowed.example"],
            &["dns:bad.allowed.example"],
        )
        .unwrap()
    });
    let good = leaf(&ca, "CN=Alice,O=Allowed,C=US", |b| {
        b.san_dns("door.allowed.example").unwrap()
    });
    check(&r, &[&ca.cert], &good, Default::default()).unwrap();
    let other_org = leaf(&ca, "CN=Mallory,O=Other,C=US", |b| b);
    assert!(matches!(
        check(&r, &[&ca.cert], &other_org, Default::default()),
        Err(ValidationError::NameConstraints { .. })
    ));
    let excluded = leaf(&ca, "CN=Bob,O=Allowed,C=US", |b| {
        b.san_dns("x.bad.allowed.example").unwrap()
    });
    assert!(matches!(
        check(&r, &[&ca.cert], &excluded, Default::default()),
        Err(ValidationError::NameConstraints { excluded: true, .. })
    ));
}

#[test]
fn policy_mappings_and_constraints_are_enforced() {
    let r = root();
    let ca = sub_ca(&r, "CN=Mapping CA,C=US", |b| {
        b.policies(&[P1]).policy_mappings(&[(P1, P2)])
    });
    let l = leaf(&ca, "CN=Leaf,C=US", |b| b.policies(&[P2]));
    let opts = || ValidationOptions {
        initial_policy_set: vec![P1],
        initial_explicit_policy: true,
        ..Default::default()
    };
    check(&r, &[&ca.cert], &l, opts()).unwrap();
    let inhibited = ValidationOptions {
        initial_policy_mapping_inhibit: true,
        ..opts()
    };
    assert!(matches!(
        check(&r, &[&ca.cert], &l, inhibited),
        Err(ValidationError::NoAcceptablePolicy { .. })
    ));
    // requireExplicitPolicy 0 in the CA: a leaf without policies fails even
    // when the relying party does not ask for one.
    let strict = sub_ca(&r, "CN=Strict CA,C=US", |b| {
        b.any_policy().policy_constraints(Some(0), None)
    });
    let no_policy = leaf(&strict, "CN=Leaf,C=US", |b| b);
    assert!(matches!(
        check(&r, &[&strict.cert], &no_policy, Default::default()),
        Err(ValidationError::NoAcceptablePolicy { .. })
    ));
    let with_policy = leaf(&strict, "CN=Leaf,C=US", |b| b.policies(&[P1]));
    check(&r, &[&strict.cert], &with_policy, Default::default()).unwrap();
    // inhibitAnyPolicy 0: anyPolicy in the leaf no longer matches P1.
    let no_any = sub_ca(&r, "CN=No Any CA,C=US", |b| {
        b.policies(&[P1]).inhibit_any_policy(0)
    });
    let any_leaf = leaf(&no_any, "CN=Leaf,C=US", |b| b.any_policy());
    let want_p1 = ValidationOptions {
        initial_policy_set: vec![P1],
        initial_explicit_policy: true,
        ..Default::default()
    };
    assert!(matches!(
        check(&r, &[&no_any.cert], &any_leaf, want_p1),
        Err(ValidationError::NoAcceptablePolicy { .. })
    ));
}

#[test]
fn path_length_and_unknown_critical_extensions() {
    let r = root();
    let ca1 = {
        let key = key();
        let cert = CertificateBuilder::new("CN=CA1,C=US", key.spki_der())
            .unwrap()
            .ca(Some(0))
            .sign(&r.cert, &r.key)
            .unwrap();
        Ca { cert, key }
    };
    let ca2 = sub_ca(&ca1, "CN=CA2,C=US", |b| b);
    let l = leaf(&ca2, "CN=Leaf,C=US", |b| b);
    assert!(matches!(
        check(&r, &[&ca1.cert, &ca2.cert], &l, Default::default()),
        Err(ValidationError::PathLengthExceeded { .. })
    ));
    let direct = leaf(&ca1, "CN=Leaf,C=US", |b| b);
    check(&r, &[&ca1.cert], &direct, Default::default()).unwrap();

    let odd = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.99999.77");
    let critical = leaf(&ca1, "CN=Leaf,C=US", |b| {
        b.extension(odd, true, &[0x05, 0x00]).unwrap()
    });
    let e = check(&r, &[&ca1.cert], &critical, Default::default()).unwrap_err();
    assert!(
        matches!(&e, ValidationError::UnknownCriticalExtension { oid, .. } if oid == "1.3.6.1.4.1.99999.77"),
        "{e}"
    );
    let non_critical = leaf(&ca1, "CN=Leaf,C=US", |b| {
        b.extension(odd, false, &[0x05, 0x00]).unwrap()
    });
    check(&r, &[&ca1.cert], &non_critical, Default::default()).unwrap();
}
