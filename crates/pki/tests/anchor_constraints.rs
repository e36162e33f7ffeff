//! Trust anchor constraints (RFC 5937): what a trust anchor certificate contributes to path
//! validation by default, what the bare-anchor option (RFC 5280 §6.1 exactly) turns off, and
//! agreement with `openssl verify` (installed by scripts/setup.sh), which applies the same
//! constraints to a certificate in its -CAfile.

use const_oid::ObjectIdentifier;
use pki::cache::options_fingerprint;
use pki::options::AnchorConstraints;
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{validate, RevocationMode, ValidationError, ValidationOptions};
use pki_issue::{now, pem_encode, CertificateBuilder, KeyAlgorithm, KeyPair, KeyUsages};
use std::path::Path;
use std::process::Command;

const DAY: i64 = 86_400;

fn key() -> KeyPair {
    KeyPair::generate(KeyAlgorithm::P256).unwrap()
}

/// A CA certificate for `subject` with `key`.
fn ca(subject: &str, key: &KeyPair, path_len: Option<u8>) -> CertificateBuilder {
    CertificateBuilder::new(subject, key.spki_der())
        .unwrap()
        .ca(path_len)
}

fn leaf(subject: &str) -> CertificateBuilder {
    CertificateBuilder::new(subject, key().spki_der())
        .unwrap()
        .end_entity()
}

fn store(anchors: &[&[u8]]) -> TrustStore {
    let mut b = TrustStore::builder();
    for a in anchors {
        b.add_anchor_der(a.to_vec());
    }
    b.build()
}

fn opts(mode: AnchorConstraints) -> ValidationOptions {
    let mut o = ValidationOptions {
        time: Time(now()),
        anchor_constraints: mode,
        ..ValidationOptions::default()
    };
    o.revocation.mode = RevocationMode::Off;
    o
}

fn check(
    anchors: &[&[u8]],
    leaf: &[u8],
    intermediates: &[&[u8]],
    o: &ValidationOptions,
) -> Result<pki::validate::ValidatedPath, ValidationError> {
    validate(
        &store(anchors),
        leaf,
        intermediates,
        &RevocationSet::empty(),
        o,
    )
}

fn enforced(
    anchors: &[&[u8]],
    leaf: &[u8],
    intermediates: &[&[u8]],
) -> Result<(), ValidationError> {
    check(
        anchors,
        leaf,
        intermediates,
        &opts(AnchorConstraints::Enforce),
    )
    .map(|_| ())
}

fn bare(anchors: &[&[u8]], leaf: &[u8], intermediates: &[&[u8]]) -> Result<(), ValidationError> {
    check(
        anchors,
        leaf,
        intermediates,
        &opts(AnchorConstraints::Ignore),
    )
    .map(|_| ())
}

/// Root → "Agency CA" (name constrained to O=Agency, path length 0) issued by the root.
struct Constrained {
    root: Vec<u8>,
    agency: Vec<u8>,
    agency_key: KeyPair,
}

fn constrained() -> Constrained {
    let root_key = key();
    let agency_key = key();
    let root = ca("CN=Root,O=pivgate,C=US", &root_key, None)
        .self_signed(&root_key)
        .unwrap();
    let agency = ca("CN=Agency CA,O=Agency,C=US", &agency_key, Some(0))
        .name_constraints(&["O=Agency,C=US", "dns:agency.example"], &[])
        .unwrap()
        .sign(&root, &root_key)
        .unwrap();
    Constrained {
        root,
        agency,
        agency_key,
    }
}

#[test]
fn a_constrained_intermediate_trusted_directly_keeps_its_name_constraints() {
    let c = constrained();
    let inside = leaf("CN=Alice,O=Agency,C=US")
        .sign(&c.agency, &c.agency_key)
        .unwrap();
    let outside = leaf("CN=Mallory,O=Elsewhere,C=US")
        .sign(&c.agency, &c.agency_key)
        .unwrap();
    let outside_dns = leaf("CN=Bob,O=Agency,C=US")
        .san_dns("www.elsewhere.example")
        .unwrap()
        .sign(&c.agency, &c.agency_key)
        .unwrap();
    enforced(&[&c.agency], &inside, &[]).unwrap();
    for l in [&outside, &outside_dns] {
        let err = enforced(&[&c.agency], l, &[]).unwrap_err();
        match &err {
            ValidationError::NameConstraints {
                constrained_by,
                excluded: false,
                ..
            } => assert!(constrained_by.contains("Agency CA"), "{err}"),
            other => panic!("expected a name constraints violation, got {other}"),
        }
        assert_eq!(err.code(), "name-constraints-violated");
        // Bare anchors are names and keys only: the constraints are gone.
        bare(&[&c.agency], l, &[]).unwrap();
    }
    // Trusting the root instead applies the CA's constraints as an intermediate: same verdicts.
    enforced(&[&c.root], &inside, &[&c.agency]).unwrap();
    assert!(enforced(&[&c.root], &outside, &[&c.agency]).is_err());
}

#[test]
fn a_constrained_intermediate_trusted_directly_keeps_its_path_length() {
    let c = constrained();
    let sub_key = key();
    let sub = ca("CN=Sub CA,O=Agency,C=US", &sub_key, None)
        .sign(&c.agency, &c.agency_key)
        .unwrap();
    let deep = leaf("CN=Carol,O=Agency,C=US").sign(&sub, &sub_key).unwrap();
    let err = enforced(&[&c.agency], &deep, &[&sub]).unwrap_err();
    assert!(
        matches!(&err, ValidationError::PathLengthExceeded { subject } if subject.contains("Sub CA")),
        "{err}"
    );
    bare(&[&c.agency], &deep, &[&sub]).unwrap();
    // A path length of 1 allows the one CA below the anchor.
    let root_key = key();
    let anchor = ca("CN=Roomy CA,O=Agency,C=US", &root_key, Some(1))
        .self_signed(&root_key)
        .unwrap();
    let sub = ca("CN=Sub CA,O=Agency,C=US", &sub_key, None)
        .sign(&anchor, &root_key)
        .unwrap();
    let l = leaf("CN=Carol,O=Agency,C=US").sign(&sub, &sub_key).unwrap();
    enforced(&[&anchor], &l, &[&sub]).unwrap();
}

#[test]
fn an_expired_anchor_is_refused_unless_allowed() {
    let t = now();
    let k = key();
    let expired = ca("CN=Old Root,O=pivgate,C=US", &k, None)
        .validity(t - 400 * DAY, t - DAY)
        .self_signed(&k)
        .unwrap();
    let l = leaf("CN=Dave,O=pivgate,C=US")
        .validity(t - DAY, t + 30 * DAY)
        .sign(&expired, &k)
        .unwrap();
    let err = enforced(&[&expired], &l, &[]).unwrap_err();
    assert!(
        matches!(err, ValidationError::AnchorExpired { .. }),
        "{err}"
    );
    assert_eq!(err.code(), "anchor-expired");
    assert!(err.to_string().contains("Old Root"), "{err}");
    let mut allow = opts(AnchorConstraints::Enforce);
    allow.allow_expired_anchors = true;
    check(&[&expired], &l, &[], &allow).unwrap();
    bare(&[&expired], &l, &[]).unwrap();

    let future = ca("CN=New Root,O=pivgate,C=US", &k, None)
        .validity(t + DAY, t + 400 * DAY)
        .self_signed(&k)
        .unwrap();
    let l = leaf("CN=Dave,O=pivgate,C=US")
        .validity(t - DAY, t + 30 * DAY)
        .sign(&future, &k)
        .unwrap();
    let err = enforced(&[&future], &l, &[]).unwrap_err();
    assert_eq!(err.code(), "anchor-not-yet-valid", "{err}");
    check(&[&future], &l, &[], &allow).unwrap();
}

#[test]
fn a_renewed_anchor_is_used_when_the_old_one_has_expired() {
    // The same name and key, re-issued with a new validity period: the expired one is passed
    // over, not reported.
    let t = now();
    let k = key();
    let old = ca("CN=Renewed Root,O=pivgate,C=US", &k, None)
        .validity(t - 800 * DAY, t - DAY)
        .serial(1)
        .self_signed(&k)
        .unwrap();
    let new = ca("CN=Renewed Root,O=pivgate,C=US", &k, None)
        .validity(t - 2 * DAY, t + 800 * DAY)
        .serial(2)
        .self_signed(&k)
        .unwrap();
    let l = leaf("CN=Erin,O=pivgate,C=US").sign(&new, &k).unwrap();
    for anchors in [[&old[..], &new[..]], [&new[..], &old[..]]] {
        let path = check(&anchors, &l, &[], &opts(AnchorConstraints::Enforce)).unwrap();
        assert_eq!(path.anchor().der(), &new[..]);
    }
}

#[test]
fn an_unknown_critical_extension_in_the_anchor_refuses_it() {
    let k = key();
    let odd = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.99999.1");
    let anchor = ca("CN=Odd Root,O=pivgate,C=US", &k, None)
        .extension(odd, true, &[0x05, 0x00])
        .unwrap()
        .self_signed(&k)
        .unwrap();
    let l = leaf("CN=Frank,O=pivgate,C=US").sign(&anchor, &k).unwrap();
    let err = enforced(&[&anchor], &l, &[]).unwrap_err();
    match &err {
        ValidationError::AnchorUnknownCriticalExtension { oid, .. } => {
            assert_eq!(oid, "1.3.6.1.4.1.99999.1")
        }
        other => panic!("expected anchor-unknown-critical-extension, got {other}"),
    }
    assert_eq!(err.code(), "anchor-unknown-critical-extension");
    bare(&[&anchor], &l, &[]).unwrap();
    // Not critical: ignored as in any certificate.
    let anchor = ca("CN=Odd Root,O=pivgate,C=US", &k, None)
        .extension(odd, false, &[0x05, 0x00])
        .unwrap()
        .self_signed(&k)
        .unwrap();
    let l = leaf("CN=Frank,O=pivgate,C=US").sign(&anchor, &k).unwrap();
    enforced(&[&anchor], &l, &[]).unwrap();
}

#[test]
fn an_anchor_that_is_not_a_ca_is_refused() {
    let k = key();
    let not_ca = CertificateBuilder::new("CN=Not A CA,O=pivgate,C=US", k.spki_der())
        .unwrap()
        .end_entity()
        .self_signed(&k)
        .unwrap();
    let no_cert_sign = ca("CN=Signing Only,O=pivgate,C=US", &k, None)
        .key_usage(KeyUsages::DigitalSignature | KeyUsages::CRLSign)
        .self_signed(&k)
        .unwrap();
    for (anchor, why) in [(&not_ca, "cA false"), (&no_cert_sign, "keyCertSign")] {
        let l = leaf("CN=Grace,O=pivgate,C=US").sign(anchor, &k).unwrap();
        let err = enforced(&[anchor], &l, &[]).unwrap_err();
        assert!(
            matches!(&err, ValidationError::AnchorNotCa { detail, .. } if detail.contains(why)),
            "{err}"
        );
        assert_eq!(err.code(), "anchor-not-ca");
        bare(&[anchor], &l, &[]).unwrap();
    }
}

#[test]
fn anchor_policies_narrow_the_user_initial_policy_set() {
    let p1 = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.48.11");
    let p2 = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.48.13");
    let k = key();
    let anchor = ca("CN=Policy Root,O=pivgate,C=US", &k, None)
        .policies(&[p1])
        .self_signed(&k)
        .unwrap();
    let l = leaf("CN=Heidi,O=pivgate,C=US")
        .policies(&[p1, p2])
        .sign(&anchor, &k)
        .unwrap();
    // anyPolicy asked for: the anchor's policies are what the path may be used for.
    let path = check(&[&anchor], &l, &[], &opts(AnchorConstraints::Enforce)).unwrap();
    assert_eq!(path.user_constrained_policy_set(), &[p1]);
    let path = check(&[&anchor], &l, &[], &opts(AnchorConstraints::Ignore)).unwrap();
    assert_eq!(path.user_constrained_policy_set(), &[p1, p2]);
    // Asking explicitly for a policy outside the anchor's: none acceptable.
    let mut o = opts(AnchorConstraints::Enforce);
    o.initial_policy_set = vec![p2];
    o.initial_explicit_policy = true;
    let err = check(&[&anchor], &l, &[], &o).unwrap_err();
    assert!(
        matches!(err, ValidationError::NoAcceptablePolicy { .. }),
        "{err}"
    );
    o.anchor_constraints = AnchorConstraints::Ignore;
    check(&[&anchor], &l, &[], &o).unwrap();
}

#[test]
fn anchor_policy_constraints_set_the_initial_counters() {
    let p1 = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.48.11");
    let k = key();
    let sub_key = key();
    // requireExplicitPolicy 0: every certificate below must assert an acceptable policy.
    let anchor = ca("CN=Explicit Root,O=pivgate,C=US", &k, None)
        .policy_constraints(Some(0), None)
        .self_signed(&k)
        .unwrap();
    let without = leaf("CN=Ivan,O=pivgate,C=US").sign(&anchor, &k).unwrap();
    let with = leaf("CN=Ivan,O=pivgate,C=US")
        .policies(&[p1])
        .sign(&anchor, &k)
        .unwrap();
    let err = enforced(&[&anchor], &without, &[]).unwrap_err();
    assert!(
        matches!(err, ValidationError::NoAcceptablePolicy { .. }),
        "{err}"
    );
    bare(&[&anchor], &without, &[]).unwrap();
    enforced(&[&anchor], &with, &[]).unwrap();
    // inhibitAnyPolicy 0: anyPolicy in a CA below no longer stands for p1.
    let anchor = ca("CN=No Any Root,O=pivgate,C=US", &k, None)
        .inhibit_any_policy(0)
        .self_signed(&k)
        .unwrap();
    let sub = ca("CN=Any CA,O=pivgate,C=US", &sub_key, None)
        .any_policy()
        .sign(&anchor, &k)
        .unwrap();
    let l = leaf("CN=Judy,O=pivgate,C=US")
        .policies(&[p1])
        .sign(&sub, &sub_key)
        .unwrap();
    let mut o = opts(AnchorConstraints::Enforce);
    o.initial_explicit_policy = true;
    let err = check(&[&anchor], &l, &[&sub], &o).unwrap_err();
    assert!(
        matches!(err, ValidationError::NoAcceptablePolicy { .. }),
        "{err}"
    );
    o.anchor_constraints = AnchorConstraints::Ignore;
    check(&[&anchor], &l, &[&sub], &o).unwrap();
}

#[test]
fn the_anchor_mode_is_part_of_the_cache_key() {
    let e = opts(AnchorConstraints::Enforce);
    let i = opts(AnchorConstraints::Ignore);
    let mut allow = e.clone();
    allow.allow_expired_anchors = true;
    assert_ne!(options_fingerprint(&e, 0u8), options_fingerprint(&i, 0u8));
    assert_ne!(
        options_fingerprint(&e, 0u8),
        options_fingerprint(&allow, 0u8)
    );
}

// ---- agreement with OpenSSL -------------------------------------------------------------

fn openssl_available() -> bool {
    Command::new("openssl").arg("version").output().is_ok()
}

fn pem_file(dir: &Path, name: &str, certs: &[&[u8]]) -> String {
    let p = dir.join(name);
    let text: String = certs.iter().map(|c| pem_encode("CERTIFICATE", c)).collect();
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

/// `openssl verify` with `anchor` as the only certificate of -CAfile (-partial_chain when it is
/// not self-signed) and `untrusted` as -untrusted; true when it accepts the leaf.
fn openssl_accepts(anchor: &[u8], untrusted: &[&[u8]], leaf: &[u8]) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("openssl");
    cmd.args(["verify", "-partial_chain", "-CAfile"])
        .arg(pem_file(dir.path(), "ca.pem", &[anchor]));
    if !untrusted.is_empty() {
        cmd.arg("-untrusted")
            .arg(pem_file(dir.path(), "untrusted.pem", untrusted));
    }
    let out = cmd
        .arg(pem_file(dir.path(), "leaf.pem", &[leaf]))
        .output()
        .unwrap();
    out.status.success()
}

#[test]
fn openssl_agrees_on_anchor_constraints() {
    if !openssl_available() {
        eprintln!("openssl not installed; skipping");
        return;
    }
    let c = constrained();
    let t = now();
    let inside = leaf("CN=Alice,O=Agency,C=US")
        .sign(&c.agency, &c.agency_key)
        .unwrap();
    let outside = leaf("CN=Mallory,O=Elsewhere,C=US")
        .sign(&c.agency, &c.agency_key)
        .unwrap();
    let sub_key = key();
    let sub = ca("CN=Sub CA,O=Agency,C=US", &sub_key, None)
        .sign(&c.agency, &c.agency_key)
        .unwrap();
    let deep = leaf("CN=Carol,O=Agency,C=US").sign(&sub, &sub_key).unwrap();
    let k = key();
    let expired = ca("CN=Old Root,O=pivgate,C=US", &k, None)
        .validity(t - 400 * DAY, t - DAY)
        .self_signed(&k)
        .unwrap();
    let under_expired = leaf("CN=Dave,O=pivgate,C=US")
        .validity(t - DAY, t + 30 * DAY)
        .sign(&expired, &k)
        .unwrap();
    let not_ca = CertificateBuilder::new("CN=Not A CA,O=pivgate,C=US", k.spki_der())
        .unwrap()
        .end_entity()
        .self_signed(&k)
        .unwrap();
    let under_not_ca = leaf("CN=Grace,O=pivgate,C=US").sign(&not_ca, &k).unwrap();
    /// (what, anchor, untrusted intermediates, leaf, valid)
    type Case<'a> = (&'a str, &'a [u8], &'a [&'a [u8]], &'a [u8], bool);
    let cases: [Case; 5] = [
        (
            "inside the anchor's name constraints",
            &c.agency,
            &[],
            &inside,
            true,
        ),
        (
            "outside the anchor's name constraints",
            &c.agency,
            &[],
            &outside,
            false,
        ),
        (
            "beyond the anchor's path length",
            &c.agency,
            &[&sub],
            &deep,
            false,
        ),
        (
            "under an expired anchor",
            &expired,
            &[],
            &under_expired,
            false,
        ),
        (
            "under an anchor that is not a CA",
            &not_ca,
            &[],
            &under_not_ca,
            false,
        ),
    ];
    for (what, anchor, untrusted, l, valid) in cases {
        let ours = enforced(&[anchor], l, untrusted);
        assert_eq!(ours.is_ok(), valid, "pivgate, {what}: {ours:?}");
        assert_eq!(
            openssl_accepts(anchor, untrusted, l),
            valid,
            "openssl, {what}"
        );
    }
}

#[test]
fn a_cross_certificate_trusted_directly_narrows_policies_in_the_subject_domain() {
    // A bridge-style cross-certificate asserting the bridge's policy p_bridge, mapped to the
    // agency's p_agency: the agency's certificates below it assert p_agency.
    let p_bridge = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.3.7");
    let p_agency = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.48.11");
    let p_other = ObjectIdentifier::new_unwrap("2.16.840.1.101.3.2.1.48.13");
    let bridge_key = key();
    let agency_key = key();
    let bridge = ca("CN=Bridge CA,O=pivgate,C=US", &bridge_key, None)
        .self_signed(&bridge_key)
        .unwrap();
    let cross = ca("CN=Agency CA,O=Agency,C=US", &agency_key, None)
        .policies(&[p_bridge])
        .policy_mappings(&[(p_bridge, p_agency)])
        .sign(&bridge, &bridge_key)
        .unwrap();
    let l = leaf("CN=Kim,O=Agency,C=US")
        .policies(&[p_agency, p_other])
        .sign(&cross, &agency_key)
        .unwrap();
    let path = check(&[&cross], &l, &[], &opts(AnchorConstraints::Enforce)).unwrap();
    assert_eq!(path.user_constrained_policy_set(), &[p_agency]);
    let mut o = opts(AnchorConstraints::Enforce);
    o.initial_policy_set = vec![p_agency];
    o.initial_explicit_policy = true;
    check(&[&cross], &l, &[], &o).unwrap();
    o.initial_policy_set = vec![p_other];
    let err = check(&[&cross], &l, &[], &o).unwrap_err();
    assert!(
        matches!(err, ValidationError::NoAcceptablePolicy { .. }),
        "{err}"
    );
}
