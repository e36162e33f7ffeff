//! The RFC 5280 profile's MUSTs (`pki::profile`): for every rule, a certificate (or CRL) that
//! breaks it is refused under the strict profile with the rule's own code and its RFC section
//! in the sentence, its conforming twin is accepted, and the lenient profile
//! (`trust.profile = "lenient"`) accepts the breaking one wherever RFC 5280 §6 path processing
//! alone does.

use const_oid::ObjectIdentifier;
use pki::options::{Profile, RevocationMode};
use pki::profile::Rule;
use pki::revocation_set::RevocationSet;
use pki::store::TrustStore;
use pki::time::Time;
use pki::validate::{validate, ValidationError, ValidationOptions};
use pki_issue::{now, CertificateBuilder, CrlBuilder, KeyAlgorithm, KeyPair, KeyUsages};

const BC: &str = "2.5.29.19";
const NC: &str = "2.5.29.30";
const PC: &str = "2.5.29.36";
const AKI: &str = "2.5.29.35";
const SAN: &str = "2.5.29.17";
const AIA: &str = "1.3.6.1.5.5.7.1.1";

fn oid(s: &str) -> ObjectIdentifier {
    ObjectIdentifier::new_unwrap(s)
}

type Edit = fn(CertificateBuilder) -> CertificateBuilder;

fn same(b: CertificateBuilder) -> CertificateBuilder {
    b
}

/// A root, an intermediate CA and an end entity, each shaped by its edit.
struct Chain {
    root: Vec<u8>,
    root_key: KeyPair,
    inter: Vec<u8>,
    inter_key: KeyPair,
    leaf: Vec<u8>,
}

fn chain(root: Edit, inter: Edit, leaf: Edit) -> Chain {
    chain_named("CN=Profile Leaf,O=pivgate,C=US", root, inter, leaf)
}

fn chain_named(leaf_subject: &str, root: Edit, inter: Edit, leaf: Edit) -> Chain {
    let root_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let inter_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let leaf_key = KeyPair::generate(KeyAlgorithm::P256).unwrap();
    let root_der = root(
        CertificateBuilder::new("CN=Profile Root,O=pivgate,C=US", root_key.spki_der())
            .unwrap()
            .ca(None),
    )
    .self_signed(&root_key)
    .unwrap();
    let inter_der = inter(
        CertificateBuilder::new("CN=Profile CA,O=pivgate,C=US", inter_key.spki_der())
            .unwrap()
            .ca(None),
    )
    .sign(&root_der, &root_key)
    .unwrap();
    let leaf_der = leaf(
        CertificateBuilder::new(leaf_subject, leaf_key.spki_der())
            .unwrap()
            .end_entity(),
    )
    .sign(&inter_der, &inter_key)
    .unwrap();
    Chain {
        root: root_der,
        root_key,
        inter: inter_der,
        inter_key,
        leaf: leaf_der,
    }
}

fn opts(profile: Profile) -> ValidationOptions {
    let mut o = ValidationOptions {
        time: Time(now()),
        profile,
        ..ValidationOptions::default()
    };
    o.revocation.mode = RevocationMode::Off;
    o
}

fn check(c: &Chain, o: &ValidationOptions, crls: &RevocationSet) -> Result<(), ValidationError> {
    let mut b = TrustStore::builder();
    b.add_anchor_der(c.root.clone());
    validate(&b.build(), &c.leaf, &[&c.inter], crls, o).map(|_| ())
}

fn strict(c: &Chain) -> Result<(), ValidationError> {
    check(c, &opts(Profile::Strict), &RevocationSet::empty())
}

fn lenient(c: &Chain) -> Result<(), ValidationError> {
    check(c, &opts(Profile::Lenient), &RevocationSet::empty())
}

/// `bad` is refused for `rule` (its code, its section in the sentence, the certificate
/// named), `good` is accepted; with `lenient_accepts`, the lenient profile accepts `bad`.
fn assert_rule(rule: Rule, bad: &Chain, good: &Chain, lenient_accepts: bool) {
    let err = strict(bad).expect_err(rule.code());
    assert_eq!(err.code(), rule.code(), "{err}");
    assert!(matches!(err, ValidationError::Profile { rule: r, .. } if r == rule));
    let text = err.to_string();
    assert!(
        text.contains(&format!("RFC 5280 §{}", rule.section())),
        "{text}"
    );
    assert!(
        text.contains("Profile") || text.contains("<empty name>"),
        "the certificate is named: {text}"
    );
    strict(good).unwrap_or_else(|e| panic!("{}: the conforming twin: {e}", rule.code()));
    if lenient_accepts {
        lenient(bad).unwrap_or_else(|e| panic!("{}: lenient: {e}", rule.code()));
    }
}

#[test]
fn a_ca_without_subject_key_identifier() {
    let bad = chain(same, |b| b.subject_key_id(false), same);
    let good = chain(same, same, same);
    assert_rule(Rule::CaWithoutSubjectKeyId, &bad, &good, true);
    // The trust anchor is excepted (RFC 5937: only its name and key are required).
    let anchor_without = chain(|b| b.subject_key_id(false), same, same);
    strict(&anchor_without).unwrap();
}

#[test]
fn a_certificate_without_authority_key_identifier() {
    let bad = chain(same, same, |b| b.authority_key_id(false));
    assert_rule(
        Rule::AuthorityKeyIdMissing,
        &bad,
        &chain(same, same, same),
        true,
    );
    let bad = chain(same, |b| b.authority_key_id(false), same);
    assert_rule(
        Rule::AuthorityKeyIdMissing,
        &bad,
        &chain(same, same, same),
        true,
    );
    // A self-signed anchor needs none.
    let anchor_without = chain(|b| b.authority_key_id(false), same, same);
    strict(&anchor_without).unwrap();
}

#[test]
fn a_critical_authority_key_identifier() {
    let bad = chain(same, same, |b| b.critical(oid(AKI), true));
    let good = chain(same, same, |b| b.critical(oid(AKI), false));
    assert_rule(Rule::AuthorityKeyIdCritical, &bad, &good, true);
}

#[test]
fn an_issuer_without_basic_constraints() {
    // A version 3 intermediate with keyCertSign but no basicConstraints: §6.1.4 (k) refuses
    // it in either profile; the strict profile names the MUST it breaks.
    let bad = chain(same, |b| b.no_basic_constraints(), same);
    assert_rule(
        Rule::BasicConstraintsMissing,
        &bad,
        &chain(same, same, same),
        false,
    );
    assert_eq!(lenient(&bad).unwrap_err().code(), "issuer-not-ca");
}

#[test]
fn an_anchor_without_basic_constraints_in_constrained_mode() {
    let bad = chain(|b| b.no_basic_constraints(), same, same);
    assert_rule(
        Rule::BasicConstraintsMissing,
        &bad,
        &chain(same, same, same),
        true,
    );
    // A bare anchor is only a name and a key.
    let mut o = opts(Profile::Strict);
    o.anchor_constraints = pki::options::AnchorConstraints::Ignore;
    check(&bad, &o, &RevocationSet::empty()).unwrap();
}

#[test]
fn a_non_critical_basic_constraints_in_an_issuer() {
    let bad = chain(same, |b| b.critical(oid(BC), false), same);
    assert_rule(
        Rule::BasicConstraintsNotCritical,
        &bad,
        &chain(same, same, same),
        true,
    );
    let bad_anchor = chain(|b| b.critical(oid(BC), false), same, same);
    assert_rule(
        Rule::BasicConstraintsNotCritical,
        &bad_anchor,
        &chain(same, same, same),
        true,
    );
    // An end entity may mark cA=FALSE either way (§4.2.1.9).
    strict(&chain(same, same, |b| b.critical(oid(BC), false))).unwrap();
}

#[test]
fn key_cert_sign_in_a_certificate_that_is_not_a_ca() {
    let bad = chain(same, same, |b| {
        b.key_usage(KeyUsages::DigitalSignature | KeyUsages::KeyCertSign)
    });
    let good = chain(same, same, |b| b.key_usage(KeyUsages::DigitalSignature));
    assert_rule(Rule::KeyCertSignWithoutCa, &bad, &good, true);
}

#[test]
fn a_ca_certificate_without_key_cert_sign() {
    // A CA certificate validated as the end entity: cA without keyCertSign is inconsistent,
    // reported as an invalid certificate.
    let good = chain(same, same, |b| b.ca(None));
    let bad = chain(same, same, |b| {
        b.ca(None).key_usage(KeyUsages::DigitalSignature)
    });
    assert_rule(Rule::CaWithoutKeyCertSign, &bad, &good, true);
    let bad = chain(same, same, |b| b.ca(None).no_key_usage());
    assert_rule(Rule::CaWithoutKeyCertSign, &bad, &good, true);
}

fn dns_leaf(b: CertificateBuilder) -> CertificateBuilder {
    b.san_dns("door.example.com").unwrap()
}

#[test]
fn a_non_critical_name_constraints() {
    let bad = chain(
        same,
        |b| {
            b.name_constraints(&["dns:example.com"], &[])
                .unwrap()
                .critical(oid(NC), false)
        },
        dns_leaf,
    );
    let good = chain(
        same,
        |b| b.name_constraints(&["dns:example.com"], &[]).unwrap(),
        dns_leaf,
    );
    assert_rule(Rule::NameConstraintsNotCritical, &bad, &good, true);
}

#[test]
fn name_constraints_in_an_end_entity() {
    let bad = chain(same, same, |b| {
        b.name_constraints(&["dns:example.com"], &[]).unwrap()
    });
    assert_rule(
        Rule::NameConstraintsInEndEntity,
        &bad,
        &chain(same, same, same),
        true,
    );
}

#[test]
fn name_constraints_without_subtrees() {
    let good = chain(
        same,
        |b| b.name_constraints(&["dns:example.com"], &[]).unwrap(),
        dns_leaf,
    );
    // Neither subtree.
    let bad = chain(
        same,
        |b| b.extension(oid(NC), true, &[0x30, 0x00]).unwrap(),
        dns_leaf,
    );
    assert_rule(Rule::NameConstraintsEmpty, &bad, &good, true);
    // An empty permittedSubtrees.
    let bad = chain(
        same,
        |b| {
            b.extension(oid(NC), true, &[0x30, 0x02, 0xa0, 0x00])
                .unwrap()
        },
        dns_leaf,
    );
    assert_rule(Rule::NameConstraintsEmpty, &bad, &good, true);
}

#[test]
fn a_dns_name_constraint_with_a_leading_period() {
    let bad = chain(
        same,
        |b| b.name_constraints(&["dns:.example.com"], &[]).unwrap(),
        dns_leaf,
    );
    let good = chain(
        same,
        |b| b.name_constraints(&["dns:example.com"], &[]).unwrap(),
        dns_leaf,
    );
    assert_rule(Rule::DnsConstraintLeadingPeriod, &bad, &good, true);
}

#[test]
fn a_non_critical_policy_constraints() {
    let bad = chain(
        same,
        |b| b.policy_constraints(None, Some(1)).critical(oid(PC), false),
        same,
    );
    let good = chain(same, |b| b.policy_constraints(None, Some(1)), same);
    assert_rule(Rule::PolicyConstraintsNotCritical, &bad, &good, true);
}

#[test]
fn a_critical_authority_info_access() {
    let aia = |b: CertificateBuilder| b.ca_issuers("http://127.0.0.1/ca.p7c");
    let bad = chain(same, same, |b| {
        b.ca_issuers("http://127.0.0.1/ca.p7c")
            .critical(oid(AIA), true)
    });
    let good = chain(same, same, aia);
    assert_rule(Rule::AuthorityInfoAccessCritical, &bad, &good, true);
}

#[test]
fn an_empty_subject_needs_a_critical_subject_alt_name() {
    let bad = chain_named("", same, same, |b| dns_leaf(b).critical(oid(SAN), false));
    // The builder marks the subjectAltName of an empty subject critical.
    let good = chain_named("", same, same, dns_leaf);
    assert_rule(Rule::EmptySubjectWithoutCriticalSan, &bad, &good, true);
    let bad = chain_named("", same, same, same);
    let err = strict(&bad).unwrap_err();
    assert_eq!(err.code(), "empty-subject-san-not-critical", "{err}");
}

#[test]
fn a_ca_with_an_empty_subject() {
    let bad = chain_named("", same, same, |b| dns_leaf(b).ca(None));
    let good = chain(same, same, |b| dns_leaf(b).ca(None));
    assert_rule(Rule::CaEmptySubject, &bad, &good, true);
}

#[test]
fn an_ip_address_written_as_a_dns_name() {
    let bad = chain(same, same, |b| b.san_dns("192.0.2.7").unwrap());
    let good = chain(same, same, |b| {
        b.san_ip(std::net::Ipv4Addr::new(192, 0, 2, 7).into())
            .unwrap()
    });
    assert_rule(Rule::IpAddressAsDnsName, &bad, &good, true);
}

/// A policy choice: an underscore in a server's dNSName (legal in DNS, outside RFC 5280's
/// preferred name syntax, issued by some CAs) is refused by the strict profile with its own
/// code and accepted by the lenient one; a name constraint still applies to it.
#[test]
fn an_underscore_in_a_dns_name() {
    let bad = chain(same, same, |b| b.san_dns("door_12.example.com").unwrap());
    let good = chain(same, same, |b| b.san_dns("door-12.example.com").unwrap());
    assert_rule(Rule::DnsNameUnderscore, &bad, &good, true);
    let constrained = chain(
        same,
        |b| b.name_constraints(&["dns:example.org"], &[]).unwrap(),
        |b| b.san_dns("door_12.example.com").unwrap(),
    );
    assert_eq!(
        lenient(&constrained).unwrap_err().code(),
        "name-constraints-violated"
    );
}

#[test]
fn serial_numbers_zero_negative_or_too_long() {
    let good = chain(same, same, |b| b.serial_raw(&[0x01]));
    assert_rule(
        Rule::SerialNumberZero,
        &chain(same, same, |b| b.serial_raw(&[0x00])),
        &good,
        true,
    );
    assert_rule(
        Rule::SerialNumberNegative,
        &chain(same, same, |b| b.serial_raw(&[0xff, 0x01])),
        &good,
        true,
    );
    assert_rule(
        Rule::SerialNumberTooLong,
        &chain(same, same, |b| b.serial_raw(&[0x01; 21])),
        &good,
        true,
    );
    // 20 octets of value, with and without the sign octet a top bit needs, are within bounds.
    strict(&chain(same, same, |b| b.serial_raw(&[0x7f; 20]))).unwrap();
    strict(&chain(same, same, |b| {
        let mut signed = vec![0x00];
        signed.extend([0x80; 20]);
        b.serial_raw(&signed)
    }))
    .unwrap();
}

fn crls(c: &Chain, marking: Option<bool>) -> RevocationSet {
    let mut b = RevocationSet::builder();
    b.add_der(CrlBuilder::new().sign(&c.root, &c.root_key).unwrap())
        .unwrap();
    b.add_der(
        CrlBuilder::new()
            .crl_number_marking(marking)
            .sign(&c.inter, &c.inter_key)
            .unwrap(),
    )
    .unwrap();
    b.build()
}

/// RFC 5280 §5.2.3: a CRL without a CRL number, or with a critical one, is not relied on.
#[test]
fn crls_without_a_crl_number_or_with_a_critical_one() {
    let c = chain(same, same, same);
    let mut o = opts(Profile::Strict);
    o.revocation.mode = RevocationMode::Require;
    check(&c, &o, &crls(&c, Some(false))).unwrap();
    for (marking, code) in [
        (None, "crl-number-missing"),
        (Some(true), "crl-number-critical"),
    ] {
        let set = crls(&c, marking);
        let err = check(&c, &o, &set).unwrap_err();
        match &err {
            ValidationError::RevocationUnavailable { detail, .. } => {
                let codes: Vec<&str> = detail.problems().iter().map(|p| p.code()).collect();
                assert!(codes.contains(&code), "{codes:?}: {err}");
            }
            other => panic!("expected revocation-unavailable ({code}), got {other}"),
        }
        assert!(err.to_string().contains("RFC 5280 §5.2.3"), "{err}");
        let mut l = o.clone();
        l.profile = Profile::Lenient;
        check(&c, &l, &set).unwrap();
    }
}

#[test]
fn every_rule_has_its_own_code() {
    use Rule::*;
    let all = [
        CaWithoutSubjectKeyId,
        AuthorityKeyIdMissing,
        AuthorityKeyIdCritical,
        BasicConstraintsMissing,
        BasicConstraintsNotCritical,
        KeyCertSignWithoutCa,
        CaWithoutKeyCertSign,
        NameConstraintsNotCritical,
        NameConstraintsInEndEntity,
        NameConstraintsEmpty,
        DnsConstraintLeadingPeriod,
        PolicyConstraintsNotCritical,
        AuthorityInfoAccessCritical,
        EmptySubjectWithoutCriticalSan,
        CaEmptySubject,
        IpAddressAsDnsName,
        DnsNameUnderscore,
        SerialNumberZero,
        SerialNumberNegative,
        SerialNumberTooLong,
    ];
    let codes: std::collections::HashSet<&str> = all.iter().map(|r| r.code()).collect();
    assert_eq!(codes.len(), all.len());
}
